//! GraphQL for accounts: `login`, `logout`, `signup`, `change_password`,
//! `update_password_no_auth`, `ssh_keypair`, `refresh_ssh_keypair`, `signup_config`, and the
//! e-mailed links: `request_password_reset`, `reset_password`, `verify_email`.
// Resolver arguments mirror Backend.AI's GraphQL signatures, however many there are.
#![allow(clippy::too_many_arguments)]
use async_graphql::{Context, Object, SimpleObject};
use axum::http::header::SET_COOKIE;
use chrono::{DateTime, Utc};

use crate::graphql::users::User;
use crate::graphql::{context::authed, context::caller, context::state};

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct LoginResult {
    pub ok: bool,
    pub msg: String,
    /// Bearer token for API clients (the browser gets the same as an HttpOnly cookie).
    pub token: String,
    pub expires_at: DateTime<Utc>,
    pub user: User,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct OkResult {
    pub ok: bool,
    pub msg: String,
}

impl OkResult {
    fn success() -> Self {
        Self {
            ok: true,
            msg: "success".into(),
        }
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct SshKeypair {
    pub ssh_public_key: Option<String>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct RefreshSshKeypair {
    pub ok: bool,
    pub msg: String,
    pub ssh_public_key: String,
    /// Shown once: the server keeps only the public key.
    pub ssh_private_key: String,
}

/// What the login page needs to know before anyone logs in.
#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct SignupConfig {
    pub enabled: bool,
    pub requires_invitation_token: bool,
    pub password_rules: String,
    /// "Forgot password?" e-mails a reset link (SMTP is configured).
    pub password_reset_enabled: bool,
    /// A signup verifies its e-mail address by an e-mailed link before its first login.
    pub email_verification_required: bool,
}

#[derive(Default)]
pub struct AccountQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl AccountQuery {
    /// The caller's SSH public key (from its main keypair), if one was generated.
    async fn ssh_keypair(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<SshKeypair> {
        let (state, caller) = authed(ctx)?;
        Ok(SshKeypair {
            ssh_public_key: crate::accounts::ssh_public_key(&state.read, caller).await?,
        })
    }

    /// Whether signup is open (for the login page); answered to anyone.
    async fn signup_config(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<SignupConfig> {
        let state = state(ctx)?;
        Ok(SignupConfig {
            enabled: state.config.signup_enabled,
            requires_invitation_token: state.config.signup_invitation_token.is_some(),
            password_rules: crate::auth::password::RULES.to_string(),
            password_reset_enabled: crate::accounts::links::reset_enabled(state),
            email_verification_required: crate::accounts::links::verification_required(state),
        })
    }
}

#[derive(Default)]
pub struct AccountMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl AccountMutation {
    /// Logs in with email and password: sets the session cookie and returns a bearer token.
    async fn login(
        &self,
        ctx: &Context<'_>,
        email: String,
        password: String,
    ) -> crate::graphql::context::Result<LoginResult> {
        let state = state(ctx)?;
        let addr = crate::graphql::context::client_addr(ctx);
        let login = crate::accounts::login(state, &email, &password, addr, None).await?;
        ctx.append_http_header(
            SET_COOKIE,
            crate::accounts::session_cookie(state, &login.token),
        );
        Ok(LoginResult {
            ok: true,
            msg: "success".into(),
            token: login.token,
            expires_at: login.expires_at,
            user: User(login.user),
        })
    }

    /// Ends the current login session (the cookie or bearer token stops working).
    async fn logout(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<OkResult> {
        let state = state(ctx)?;
        ctx.append_http_header(SET_COOKIE, crate::accounts::clear_cookie(state));
        if let Ok(c) = caller(ctx)
            && let Some(session) = c.login_session
        {
            crate::accounts::logout(state, session).await?;
        }
        Ok(OkResult::success())
    }

    /// Self-service signup (only when the server enables it).
    async fn signup(
        &self,
        ctx: &Context<'_>,
        email: String,
        username: String,
        password: String,
        #[graphql(name = "password2")] password2: String,
        invitation_token: Option<String>,
        agreed_to_terms: bool,
    ) -> crate::graphql::context::Result<OkResult> {
        let state = state(ctx)?;
        let addr = crate::graphql::context::client_addr(ctx);
        let verify = crate::accounts::links::verification_required(state);
        crate::accounts::signup(
            state,
            crate::accounts::Signup {
                email,
                username,
                password,
                password2,
                invitation_token,
                agreed_to_terms,
            },
            addr,
        )
        .await?;
        Ok(if verify {
            OkResult {
                ok: true,
                msg:
                    "Check your e-mail: follow the link in it to verify your address, then log in."
                        .into(),
            }
        } else {
            OkResult::success()
        })
    }

    /// "Forgot password?": e-mails a single-use, expiring link that sets a new password, if an
    /// account has this address. The answer is the same whether one does or not; requests are
    /// throttled per address and per client. FORBIDDEN when the server has no SMTP.
    async fn request_password_reset(
        &self,
        ctx: &Context<'_>,
        email: String,
    ) -> crate::graphql::context::Result<OkResult> {
        let state = state(ctx)?;
        let addr = crate::graphql::context::client_addr(ctx);
        crate::accounts::links::request_password_reset(state, &email, addr).await?;
        Ok(OkResult {
            ok: true,
            msg: "If an account has this address, a link to set a new password is on its way."
                .into(),
        })
    }

    /// Sets a new password with the token of an e-mailed reset link (it works once, until it
    /// expires): the password rules apply, and every login session of the account ends.
    async fn reset_password(
        &self,
        ctx: &Context<'_>,
        token: String,
        new_password: String,
        #[graphql(name = "new_password2")] new_password2: String,
    ) -> crate::graphql::context::Result<OkResult> {
        let state = state(ctx)?;
        crate::accounts::links::reset_password(state, &token, &new_password, &new_password2)
            .await?;
        Ok(OkResult::success())
    }

    /// Verifies a new account's e-mail address with the token of the link sent at signup.
    async fn verify_email(
        &self,
        ctx: &Context<'_>,
        token: String,
    ) -> crate::graphql::context::Result<OkResult> {
        let state = state(ctx)?;
        crate::accounts::links::verify_email(state, &token).await?;
        Ok(OkResult::success())
    }

    /// Changes the caller's password: the current one, then the new one twice.
    async fn change_password(
        &self,
        ctx: &Context<'_>,
        old_password: String,
        new_password: String,
        #[graphql(name = "new_password2")] new_password2: String,
    ) -> crate::graphql::context::Result<OkResult> {
        let (state, caller) = authed(ctx)?;
        let user = crate::users::by_uuid(&state.read, caller.uuid).await?;
        let current = caller
            .login_session
            .map(|s| (s, crate::graphql::context::client_addr(ctx)));
        crate::accounts::change_password(
            state,
            user,
            &old_password,
            &new_password,
            &new_password2,
            current,
        )
        .await?;
        Ok(OkResult::success())
    }

    /// Sets the caller's "Preferred SSH port" (user settings): the app port pool's port their
    /// SSH/SFTP apps ask for first; null clears it (a random free port each time).
    async fn update_preferred_ssh_port(
        &self,
        ctx: &Context<'_>,
        port: Option<i32>,
    ) -> crate::graphql::context::Result<OkResult> {
        let (state, caller) = authed(ctx)?;
        let user = crate::users::by_uuid(&state.read, caller.uuid).await?;
        crate::accounts::set_preferred_ssh_port(state, user, port).await?;
        Ok(OkResult::success())
    }

    /// For accounts flagged "require password change": change it with email and current
    /// password, without a login session.
    async fn update_password_no_auth(
        &self,
        ctx: &Context<'_>,
        email: String,
        current_password: String,
        new_password: String,
        #[graphql(name = "new_password2")] new_password2: String,
    ) -> crate::graphql::context::Result<OkResult> {
        let state = state(ctx)?;
        let addr = crate::graphql::context::client_addr(ctx);
        let user =
            crate::accounts::check_credentials(state, &email, &current_password, addr).await?;
        crate::accounts::set_password(
            state,
            user,
            &current_password,
            &new_password,
            &new_password2,
            None,
        )
        .await?;
        Ok(OkResult::success())
    }

    /// Generates a new SSH keypair for the caller. The private key is returned once and
    /// not kept.
    async fn refresh_ssh_keypair(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<RefreshSshKeypair> {
        let (state, caller) = authed(ctx)?;
        let (public, private) = crate::accounts::refresh_ssh_keypair(state, caller).await?;
        Ok(RefreshSshKeypair {
            ok: true,
            msg: "success".into(),
            ssh_public_key: public,
            ssh_private_key: private,
        })
    }
}
