//! Links sent by e-mail: "Forgot password?" (the guide's §3.3) and the verification of a new
//! account's address before its first login (§3.1). Both exist only when SMTP is configured.
//!
//! - A request never tells whether an account has the address: it is checked, throttled (per
//!   address asked for and per client address) and queued the same way for every address,
//!   and this process's worker looks the account up, makes the link and sends it later.
//! - A link carries a 256-bit random token; only its hash is stored, with its purpose, its
//!   user, the address it went to and when it expires. It works once: using it deletes its
//!   row, and only the request that deleted the row goes on.
//! - A password reset follows the password rules, ends every login session of the account and
//!   makes its other reset links void; any password change does the latter too (a link made
//!   before the account's last password change does not work), and so does deactivating the
//!   account (its links are deleted with its login sessions).
use chrono::Duration;
use entity::email_tokens;
use entity::enums::UserStatus;
use entity::users;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set, TransactionTrait,
};

use crate::auth::{password, tokens};
use crate::error::{ApiError, ApiResult};
use crate::mail::{LinkRequest, Mailer, Purpose};
use crate::store::Gate;

const INVALID_LINK: &str = "This link is invalid, used or expired. Ask for a new one.";

/// Whether password reset by e-mail is offered (SMTP configured).
pub fn reset_enabled(state: &impl Gate) -> bool {
    state.mailer().is_some()
}

/// Whether a signup must verify its address before the first login.
pub fn verification_required(state: &impl Gate) -> bool {
    state.mailer().is_some() && state.config().signup_email_verification
}

fn mailer(state: &impl Gate) -> ApiResult<&Mailer> {
    state.mailer().ok_or_else(|| {
        ApiError::forbidden(
            "E-mail is not configured on this server, so passwords cannot be reset by e-mail. Contact your administrator.",
        )
    })
}

/// "Forgot password?": a reset link goes to `email` if an active (or not yet verified)
/// account has it. The answer is the same either way.
pub async fn request_password_reset(
    state: &impl Gate,
    email: &str,
    addr: Option<std::net::IpAddr>,
) -> ApiResult<()> {
    request(state, Purpose::PasswordReset, email, addr).await
}

async fn request(
    state: &impl Gate,
    purpose: Purpose,
    email: &str,
    addr: Option<std::net::IpAddr>,
) -> ApiResult<()> {
    let mailer = mailer(state)?;
    let email = crate::validate::email(email)?;
    crate::auth::shared::mail_allowed(state, &email, addr).await?;
    mailer.enqueue(LinkRequest { purpose, email })
}

/// After a signup that must be verified: the verification link for the new account (the
/// signup was throttled as signups are; its address is known to exist).
pub fn send_verification(state: &impl Gate, email: &str) -> ApiResult<()> {
    mailer(state)?.enqueue(LinkRequest {
        purpose: Purpose::VerifyEmail,
        email: email.to_string(),
    })
}

/// This process's mail worker: turns each queued request into a link for the account that
/// has the address (if one does and the purpose fits it) and sends it. Runs while the server
/// does; failures are logged and counted, never shown to the requester.
pub async fn outbox(state: impl Gate + Clone + 'static) {
    let Some(mailer) = state.mailer() else {
        return;
    };
    let Some(mut queue) = mailer.take_queue() else {
        return;
    };
    while let Some(req) = queue.recv().await {
        let outcome = match issue(&state, req.purpose, &req.email).await {
            Ok(Some(token)) => {
                let Some(mailer) = state.mailer() else {
                    return;
                };
                let (subject, body) = message(&state, mailer, req.purpose, &token);
                mailer.send(&req.email, subject, body).await.map(|()| true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(anyhow::anyhow!("{}", e.describe())),
        };
        match outcome {
            Ok(sent) => {
                if sent {
                    metrics::counter!("bai_mail_sent_total", "purpose" => req.purpose.as_str())
                        .increment(1);
                    tracing::info!(purpose = req.purpose.as_str(), "link e-mailed");
                }
            }
            Err(e) => {
                metrics::counter!("bai_mail_failed_total", "purpose" => req.purpose.as_str())
                    .increment(1);
                tracing::warn!(purpose = req.purpose.as_str(), error = %format!("{e:#}"), "an e-mail could not be sent");
            }
        }
    }
}

fn message(
    state: &impl Gate,
    mailer: &Mailer,
    purpose: Purpose,
    token: &str,
) -> (&'static str, String) {
    let link = mailer.link(purpose, token);
    let cfg = state.config();
    match purpose {
        Purpose::PasswordReset => (
            "Reset your bai password",
            format!(
                "Someone (hopefully you) asked to reset the password of your bai account.\n\n\
                 Set a new password here (the link works once, for {} minutes):\n\n{link}\n\n\
                 Setting it ends every login session of the account.\n\
                 If you did not ask for this, ignore this e-mail: your password stays as it is.\n",
                cfg.password_reset_ttl_secs.div_ceil(60)
            ),
        ),
        Purpose::VerifyEmail => (
            "Verify your e-mail address for bai",
            format!(
                "Welcome to bai. Verify your e-mail address to log in for the first time \
                 (the link works once, for {} hours):\n\n{link}\n\n\
                 If you did not sign up, ignore this e-mail.\n",
                cfg.email_verification_ttl_secs.div_ceil(3600)
            ),
        ),
    }
}

/// Whether an account of this status may get a link for `purpose`.
fn fits(purpose: Purpose, status: UserStatus) -> bool {
    match purpose {
        // Proving the address also verifies it.
        Purpose::PasswordReset => {
            matches!(status, UserStatus::Active | UserStatus::BeforeVerification)
        }
        Purpose::VerifyEmail => status == UserStatus::BeforeVerification,
    }
}

/// A new link's token for the account that has `email`, if one does and may get it.
async fn issue(state: &impl Gate, purpose: Purpose, email: &str) -> ApiResult<Option<String>> {
    let now = state.clock().now();
    // Expired links of anyone are of no further use.
    email_tokens::Entity::delete_many()
        .filter(email_tokens::Column::ExpiresAt.lte(now))
        .exec(state.db())
        .await?;
    let Some(user) = users::Entity::find()
        .filter(users::Column::Email.eq(email))
        .one(state.db())
        .await?
    else {
        return Ok(None);
    };
    if !fits(purpose, user.status) {
        return Ok(None);
    }
    let ttl = match purpose {
        Purpose::PasswordReset => state.config().password_reset_ttl_secs,
        Purpose::VerifyEmail => state.config().email_verification_ttl_secs,
    };
    let token = tokens::new_token();
    email_tokens::ActiveModel {
        token_hash: Set(tokens::hash_token(&token)),
        purpose: Set(purpose.as_str().to_string()),
        user_uuid: Set(user.uuid),
        email: Set(user.email),
        created_at: Set(now),
        expires_at: Set(now + Duration::seconds(i64::try_from(ttl).unwrap_or(i64::MAX / 4))),
    }
    .insert(state.db())
    .await?;
    Ok(Some(token))
}

/// Uses up a link in `db` (the caller's transaction): its account, if the link is live, of
/// this purpose, still names the account's address, the account may still use it and — for a
/// reset — its password did not change since. Concurrent uses: one wins.
async fn consume<C: ConnectionTrait>(
    db: &C,
    now: chrono::DateTime<chrono::Utc>,
    purpose: Purpose,
    token: &str,
) -> ApiResult<users::Model> {
    let invalid = || ApiError::bad_request(INVALID_LINK);
    let token = token.trim();
    if token.is_empty() || token.len() > 128 {
        return Err(invalid());
    }
    let hash = tokens::hash_token(token);
    let Some(row) = email_tokens::Entity::find_by_id(hash.clone())
        .one(db)
        .await?
    else {
        return Err(invalid());
    };
    if row.purpose != purpose.as_str() || row.expires_at <= now {
        return Err(invalid());
    }
    let deleted = email_tokens::Entity::delete_by_id(hash).exec(db).await?;
    if deleted.rows_affected != 1 {
        return Err(invalid());
    }
    let user = users::Entity::find_by_id(row.user_uuid)
        .one(db)
        .await?
        .ok_or_else(invalid)?;
    let changed_since = purpose == Purpose::PasswordReset
        && user.password_changed_at.is_some_and(|t| t > row.created_at);
    if user.email != row.email || !fits(purpose, user.status) || changed_since {
        return Err(invalid());
    }
    Ok(user)
}

/// Sets a new password through a reset link. The rules are checked and the password hashed
/// before the link is used, and the link is used, the password stored and every login session
/// of the account ended in one transaction: a refusal or a failure on the way leaves the link
/// as it was.
pub async fn reset_password(
    state: &impl Gate,
    token: &str,
    new: &str,
    new2: &str,
) -> ApiResult<()> {
    password::validate_new(new, new2)?;
    let hash = password::hash(new).await?;
    let now = state.clock().now();
    let txn = state.db().begin().await?;
    let user = consume(&txn, now, Purpose::PasswordReset, token).await?;
    let uuid = user.uuid;
    super::passwords::store(&txn, now, user, hash, true).await?;
    let ended = crate::auth::logins::end(&txn, uuid, None).await?;
    txn.commit().await?;
    // Open WebSockets re-check their rights now that the sessions are gone.
    ended.announce(state.revocations());
    Ok(())
}

/// Verifies an account's address through the link sent at signup: it may log in from now on.
/// The link is used and the account activated in one transaction.
pub async fn verify_email(state: &impl Gate, token: &str) -> ApiResult<()> {
    let now = state.clock().now();
    let txn = state.db().begin().await?;
    let user = consume(&txn, now, Purpose::VerifyEmail, token).await?;
    let email = user.email.clone();
    let mut m: users::ActiveModel = user.into();
    m.status = Set(UserStatus::Active);
    m.modified_at = Set(now);
    m.update(&txn).await?;
    crate::audit::record(
        &txn,
        now,
        &email,
        "verify_email",
        "user",
        &email,
        serde_json::json!({}),
    )
    .await?;
    txn.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_checked_and_normalised() {
        // The accounts' own rule (`validate::email`), as every other path takes addresses.
        let address = crate::validate::email;
        assert_eq!(address(" Alice@X.org ").unwrap(), "alice@x.org");
        for bad in [
            "",
            "alice",
            "@x.org",
            "alice@",
            "a@b@c",
            "a b@x.org",
            "a\n@x.org",
        ] {
            assert!(address(bad).is_err(), "{bad:?}");
        }
        assert!(address(&format!("{}@x.org", "a".repeat(260))).is_err());
    }

    #[test]
    fn links_fit_the_account_status() {
        assert!(fits(Purpose::PasswordReset, UserStatus::Active));
        assert!(fits(Purpose::PasswordReset, UserStatus::BeforeVerification));
        assert!(!fits(Purpose::PasswordReset, UserStatus::Inactive));
        assert!(!fits(Purpose::PasswordReset, UserStatus::Deleted));
        assert!(fits(Purpose::VerifyEmail, UserStatus::BeforeVerification));
        assert!(!fits(Purpose::VerifyEmail, UserStatus::Active));
    }
}
