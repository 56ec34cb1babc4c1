//! Accounts: login sessions (cookie + bearer token), signup, password changes and the
//! user's SSH keypair; links sent by e-mail (`links`).

pub mod links;
mod passwords;

use chrono::{Duration, Utc};
use entity::enums::{UserRole, UserStatus};
use entity::{login_sessions, users};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
use uuid::Uuid;

use crate::auth::credentials::session_cookie_name;
use crate::auth::{password, tokens};
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::store::Gate;

const BAD_LOGIN: &str = "Invalid email or password.";

/// Checks email + password, throttled per account and per client address. Wrong email and
/// wrong password are indistinguishable, in message and in time.
pub async fn check_credentials(
    state: &impl Gate,
    email: &str,
    pw: &str,
    addr: Option<std::net::IpAddr>,
) -> ApiResult<users::Model> {
    let email = email.trim().to_ascii_lowercase();
    // Failures counted by any manager first, then this process's own attempts.
    crate::auth::shared::login_allowed(state, &email, addr).await?;
    let attempt = state.login_throttle().start(&email, addr)?;
    let user = users::Entity::find()
        .filter(users::Column::Email.eq(&email))
        .one(state.db())
        .await?;
    let hash = user
        .as_ref()
        .map(|u| u.password.as_str())
        .unwrap_or(password::DUMMY_HASH);
    let ok = password::verify(pw, hash).await?;
    if ok && user.is_some() {
        attempt.succeeded();
    } else {
        metrics::counter!("bai_login_failures_total").increment(1);
        crate::auth::shared::login_failed(state, &email, addr).await;
    }
    match user {
        Some(u) if ok => match u.status {
            UserStatus::Active => Ok(u),
            UserStatus::BeforeVerification => Err(ApiError::unauthenticated(
                "This account's e-mail address has not been verified yet: follow the link in the e-mail sent at signup (or ask for a new one with \"Forgot password?\").",
            )),
            _ => Err(ApiError::unauthenticated(
                "This account is deactivated. Contact your administrator.",
            )),
        },
        _ => Err(ApiError::unauthenticated(BAD_LOGIN)),
    }
}

pub struct NewLogin {
    pub token: String,
    pub expires_at: chrono::DateTime<Utc>,
    pub user: users::Model,
}

/// Email + password → a new login session. Refused with PASSWORD_CHANGE_REQUIRED when an
/// admin flagged the account; the user then changes it with `update_password_no_auth`.
pub async fn login(
    state: &impl Gate,
    email: &str,
    pw: &str,
    addr: Option<std::net::IpAddr>,
    user_agent: Option<String>,
) -> ApiResult<NewLogin> {
    let user = check_credentials(state, email, pw, addr).await?;
    let ttl = state.config().login_session_ttl_secs;
    login_of(state, user, ttl, user_agent).await
}

/// A new login session of `user`, proven otherwise (its password, or a console's web server
/// through the app proxy), for `ttl_secs`; refused as [`login`] refuses.
pub async fn login_of(
    state: &impl Gate,
    user: users::Model,
    ttl_secs: u64,
    user_agent: Option<String>,
) -> ApiResult<NewLogin> {
    usable(state, &user).await?;
    let token = tokens::new_token();
    let now = state.clock().now();
    let ttl = i64::try_from(ttl_secs).unwrap_or(i64::MAX / 2);
    let expires_at = now + Duration::seconds(ttl);
    login_sessions::ActiveModel {
        id: Set(Uuid::new_v4()),
        token_hash: Set(tokens::hash_token(&token)),
        user_uuid: Set(user.uuid),
        created_at: Set(now),
        expires_at: Set(expires_at),
        last_seen: Set(now),
        user_agent: Set(user_agent),
    }
    .insert(state.db())
    .await?;
    // Expired sessions of this user are of no further use.
    login_sessions::Entity::delete_many()
        .filter(login_sessions::Column::UserUuid.eq(user.uuid))
        .filter(login_sessions::Column::ExpiresAt.lte(now))
        .exec(state.db())
        .await?;
    Ok(NewLogin {
        token,
        expires_at,
        user,
    })
}

/// What must hold after the password was proven before credentials are handed out (a login
/// session, or the keypair through `/auth/authorize`): no pending forced password change, an
/// active main keypair and (but for superadmins) an active domain.
pub async fn usable(state: &impl Gate, user: &users::Model) -> ApiResult<()> {
    if user.need_password_change {
        return Err(ApiError::new(
            ErrorCode::PasswordChangeRequired,
            "Your password must be changed before you can log in.",
        ));
    }
    if !crate::auth::credentials::main_keypair_active(state, user).await? {
        return Err(ApiError::unauthenticated(
            "Your keypair is deactivated. Contact your administrator.",
        ));
    }
    // An inactive domain's users are locked out; superadmins, who administer every domain
    // (and could reactivate it), are not.
    let domain = entity::domains::Entity::find_by_id(user.domain_name.clone())
        .one(state.db())
        .await?;
    if user.role != UserRole::Superadmin && domain.is_some_and(|d| !d.is_active) {
        return Err(ApiError::unauthenticated(
            "Your domain is deactivated. Contact your administrator.",
        ));
    }
    Ok(())
}

pub async fn logout(state: &impl Gate, session: Uuid) -> ApiResult<()> {
    let Some(row) = login_sessions::Entity::find_by_id(session)
        .one(state.db())
        .await?
    else {
        return Ok(()); // ended already
    };
    login_sessions::Entity::delete_by_id(session)
        .exec(state.db())
        .await?;
    state.revocations().bump(row.user_uuid);
    Ok(())
}

/// The `Set-Cookie` value for a new login session (HttpOnly, SameSite=Strict).
pub fn session_cookie(state: &impl Gate, token: &str) -> String {
    login_cookie(state, token, state.config().login_session_ttl_secs)
}

/// The login cookie (`__Host-` and `Secure` over HTTPS) with `value` for `max_age` seconds.
fn login_cookie(state: &impl Gate, value: &str, max_age: u64) -> String {
    let secure = state.config().cookie_secure;
    format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{}",
        session_cookie_name(secure),
        if secure { "; Secure" } else { "" }
    )
}

pub fn clear_cookie(state: &impl Gate) -> String {
    login_cookie(state, "", 0)
}

pub struct Signup {
    pub email: String,
    pub username: String,
    pub password: String,
    pub password2: String,
    pub invitation_token: Option<String>,
    pub agreed_to_terms: bool,
}

/// Self-service signup, only when enabled by configuration (CVE-2025-49652 was a signup
/// endpoint that stayed open while "disabled").
pub async fn signup(
    state: &impl Gate,
    req: Signup,
    addr: Option<std::net::IpAddr>,
) -> ApiResult<users::Model> {
    if !state.config().signup_enabled {
        return Err(ApiError::forbidden(
            "Signup is disabled on this server. Contact your administrator.",
        ));
    }
    if let Some(expected) = &state.config().signup_invitation_token {
        let given = req.invitation_token.as_deref().unwrap_or("").trim();
        if !crate::auth::tokens::eq(given, expected) {
            return Err(ApiError::forbidden(
                "A valid invitation token is required to sign up.",
            ));
        }
    }
    if !req.agreed_to_terms {
        return Err(ApiError::bad_request(
            "You must agree to the Terms of Service and Privacy Policy.",
        ));
    }
    password::validate_new(&req.password, &req.password2)?;
    // With SMTP configured, the address is verified by an e-mailed link before the first
    // login; a signup sends mail, so it is throttled as mail requests are.
    let verify = links::verification_required(state);
    if verify {
        let email = req.email.trim().to_ascii_lowercase();
        crate::auth::shared::mail_allowed(state, &email, addr).await?;
    }
    let password_hash = password::hash(&req.password).await?;
    let new = crate::users::NewUser {
        email: req.email,
        username: req.username,
        password_hash,
        need_password_change: false,
        full_name: None,
        description: None,
        status: if verify {
            UserStatus::BeforeVerification
        } else {
            UserStatus::Active
        },
        domain_name: "default".into(),
        role: UserRole::User,
        group_ids: vec![],
        resource_policy: "default".into(),
        rate_limit: i32::try_from(state.config().default_rate_limit).unwrap_or(i32::MAX),
    };
    let email_for_audit = new.email.trim().to_ascii_lowercase();
    let now = state.clock().now();
    let user = crate::audit::audited(state, &email_for_audit, "signup", "user", move |txn| {
        Box::pin(async move {
            let (user, _) = crate::users::create(txn, new, now).await?;
            let key = user.email.to_string();
            Ok((user, key, serde_json::json!({})))
        })
    })
    .await?;
    // A full queue does not undo the signup: "Forgot password?" sends a link that verifies too.
    if verify && let Err(e) = links::send_verification(state, &user.email) {
        tracing::warn!(error = %e.message, "the verification e-mail of a signup was not queued");
    }
    Ok(user)
}

/// The ports a user may prefer for SSH/SFTP: not the system's well-known ones.
pub const PREFERRED_PORTS: std::ops::RangeInclusive<i32> = 1024..=65535;

/// Sets (a port) or clears (None) the user's "Preferred SSH port": the app port pool's port
/// their SSH/SFTP apps ask for first (a random free one when it is taken or outside the pool).
pub async fn set_preferred_ssh_port(
    state: &impl Gate,
    user: users::Model,
    port: Option<i32>,
) -> ApiResult<()> {
    if let Some(p) = port
        && !PREFERRED_PORTS.contains(&p)
    {
        return Err(ApiError::bad_request(format!(
            "The preferred SSH port must be between {} and {} (10000-65000 is recommended); got {p}.",
            PREFERRED_PORTS.start(),
            PREFERRED_PORTS.end()
        )));
    }
    let mut m: users::ActiveModel = user.into();
    m.preferred_ssh_port = Set(port);
    m.modified_at = Set(state.clock().now());
    m.update(state.db()).await?;
    Ok(())
}

/// Sets a new password after checking the current one (throttled like logins) and the
/// rules; clears the "require password change" flag and ends every other login session.
pub async fn change_password(
    state: &impl Gate,
    user: users::Model,
    old: &str,
    new: &str,
    new2: &str,
    current: Option<(Uuid, Option<std::net::IpAddr>)>,
) -> ApiResult<()> {
    let addr = current.and_then(|(_, a)| a);
    let attempt = state.login_throttle().start(&user.email, addr)?;
    if !password::verify(old, &user.password).await? {
        return Err(ApiError::bad_request("The current password is incorrect."));
    }
    attempt.succeeded();
    set_password(state, user, old, new, new2, current.map(|(s, _)| s)).await
}

/// Sets a new password whose current one was already proven; ends every login session but
/// `keep`.
pub async fn set_password(
    state: &impl Gate,
    user: users::Model,
    old: &str,
    new: &str,
    new2: &str,
    keep: Option<Uuid>,
) -> ApiResult<()> {
    password::validate_new(new, new2)?;
    if old == new {
        return Err(ApiError::bad_request(
            "The new password must differ from the current one.",
        ));
    }
    let hash = password::hash(new).await?;
    let uuid = user.uuid;
    passwords::store(state.db(), state.clock().now(), user, hash, false).await?;
    crate::auth::logins::end(state.db(), uuid, keep)
        .await?
        .announce(state.revocations());
    Ok(())
}

/// The SSH public key of the keypair authenticating the caller, if one was generated.
pub async fn ssh_public_key<C: sea_orm::ConnectionTrait>(
    db: &C,
    caller: &crate::auth::Caller,
) -> ApiResult<Option<String>> {
    let Some(ak) = &caller.access_key else {
        return Ok(None);
    };
    let kp = entity::keypairs::Entity::find_by_id(ak.clone())
        .one(db)
        .await?;
    Ok(kp.and_then(|k| k.ssh_public_key))
}

/// Generates a new SSH keypair for the keypair authenticating the caller: keeps the public
/// key and returns it with the private one, which is not kept.
pub async fn refresh_ssh_keypair(
    store: &impl crate::store::Store,
    caller: &crate::auth::Caller,
) -> ApiResult<(String, String)> {
    use entity::keypairs;
    let ak = caller
        .access_key
        .clone()
        .ok_or_else(|| ApiError::not_found("keypair", "(none)"))?;
    let kp = crate::lookup::get::<keypairs::Entity>(store.db(), "keypair", ak).await?;
    let (public, private) = crate::auth::ssh::generate(&caller.email)?;
    let mut m: keypairs::ActiveModel = kp.into();
    m.ssh_public_key = Set(Some(public.clone()));
    m.ssh_private_key = Set(None);
    m.modified_at = Set(store.clock().now());
    m.update(store.db()).await?;
    Ok((public, private))
}

/// Ends the caller's login session whose token is `token`; another user's token ends nothing.
pub async fn logout_token(
    state: &impl Gate,
    caller: &crate::auth::Caller,
    token: &str,
) -> ApiResult<()> {
    let row = login_sessions::Entity::find()
        .filter(login_sessions::Column::TokenHash.eq(tokens::hash_token(token)))
        .filter(login_sessions::Column::UserUuid.eq(caller.uuid))
        .one(state.db())
        .await?;
    if let Some(row) = row {
        logout(state, row.id).await?;
    }
    Ok(())
}
