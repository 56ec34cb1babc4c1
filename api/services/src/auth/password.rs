//! Password rules (seeds: ≥ 8 characters with a letter, a digit and a special character) and
//! argon2id hashing with the OWASP parameters (m = 19 MiB, t = 2, p = 1; argon2's defaults),
//! always on a blocking thread.
use argon2::password_hash::phc::PasswordHash;
use argon2::{Argon2, PasswordHasher, PasswordVerifier};

use crate::error::{ApiError, ApiResult};

pub use bai_types::password::RULES;
const MAX_LEN: usize = 256;

/// The guides' rule ([`bai_types::password::meets_rules`]) within the length bound.
pub fn validate_rules(password: &str) -> ApiResult<()> {
    if password.len() > MAX_LEN {
        return Err(ApiError::bad_request(format!(
            "Password must be at most {MAX_LEN} bytes long."
        )));
    }
    if bai_types::password::meets_rules(password) {
        Ok(())
    } else {
        Err(ApiError::bad_request(RULES))
    }
}

/// A password an administrator sets for someone (`create_user`, `modify_user`): with
/// `password_rule_for_admins` the rules, else as Backend.AI's manager takes it — anything
/// non-empty within the length bound (the rules are the sign-up form's and users' own).
pub fn validate_set_by_admin(password: &str, rule_for_admins: bool) -> ApiResult<()> {
    if rule_for_admins {
        return validate_rules(password);
    }
    if password.is_empty() {
        return Err(ApiError::bad_request("Password must not be empty."));
    }
    if password.len() > MAX_LEN {
        return Err(ApiError::bad_request(format!(
            "Password must be at most {MAX_LEN} bytes long."
        )));
    }
    Ok(())
}

/// Checks the rules and that both entries match (`new_password` / `new_password2`).
pub fn validate_new(password: &str, again: &str) -> ApiResult<()> {
    if password != again {
        return Err(ApiError::bad_request("The two passwords do not match."));
    }
    validate_rules(password)
}

/// argon2 computations running at once, process-wide (each holds 19 MiB and a blocking
/// thread); more callers wait in a bounded queue.
const MAX_RUNNING: usize = 2;
/// Callers allowed to wait for a turn; beyond it, RATE_LIMITED at once.
const MAX_WAITING: usize = 64;
static RUNNING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_RUNNING);
static WAITING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A turn to run argon2, or RATE_LIMITED when too many are already waiting.
async fn turn() -> ApiResult<tokio::sync::SemaphorePermit<'static>> {
    use std::sync::atomic::Ordering;
    if let Ok(p) = RUNNING.try_acquire() {
        return Ok(p);
    }
    if WAITING.fetch_add(1, Ordering::SeqCst) >= MAX_WAITING {
        WAITING.fetch_sub(1, Ordering::SeqCst);
        return Err(ApiError::new(
            crate::error::ErrorCode::RateLimited,
            "Too many password checks in progress; try again in a few seconds.",
        ));
    }
    let permit = RUNNING.acquire().await;
    WAITING.fetch_sub(1, Ordering::SeqCst);
    permit.map_err(|e| ApiError::internal("waiting for a password check", e))
}

pub async fn hash(password: &str) -> ApiResult<String> {
    let password = password.to_string();
    let _turn = turn().await?;
    tokio::task::spawn_blocking(move || {
        Argon2::default()
            .hash_password(password.as_bytes())
            .map(|h| h.to_string())
            .map_err(|e| ApiError::internal("hashing a password", e))
    })
    .await
    .map_err(|e| ApiError::internal("hashing a password", e))?
}

/// A hash of a random password: verifying against it costs the same as a real check, so
/// unknown emails take as long as wrong passwords.
pub const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$Jc0c+Jp8wW3OfQ3pdgSUeS5mZ1zbxW7l6iXl2Lz2fOk";

/// Whether `password` matches `stored`; RATE_LIMITED when the argon2 queue is full.
pub async fn verify(password: &str, stored: &str) -> ApiResult<bool> {
    let password = password.to_string();
    let stored = stored.to_string();
    let _turn = turn().await?;
    Ok(
        tokio::task::spawn_blocking(move || match PasswordHash::new(&stored) {
            Ok(parsed) => Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok(),
            Err(_) => false,
        })
        .await
        .unwrap_or(false),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert!(validate_rules("abc123!@").is_ok());
        assert!(validate_rules("abc12!").is_err(), "too short");
        assert!(validate_rules("abcdefgh!").is_err(), "no digit");
        assert!(validate_rules("12345678!").is_err(), "no letter");
        assert!(validate_rules("abcd1234").is_err(), "no special");
        assert!(validate_new("abc123!@", "abc123!#").is_err());
    }

    #[tokio::test]
    async fn hash_and_verify() {
        let h = hash("abc123!@").await.unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify("abc123!@", &h).await.unwrap());
        assert!(!verify("abc123!#", &h).await.unwrap());
        assert!(!verify("abc123!@", "not a hash").await.unwrap());
        assert!(!verify("abc123!@", DUMMY_HASH).await.unwrap());
    }
}
