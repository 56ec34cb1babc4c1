//! Input checks shared by every domain, each with a message a person can act on.
use crate::error::{ApiError, ApiResult};

/// A plausible email address, normalised to lower case.
pub fn email(input: &str) -> ApiResult<String> {
    let e = input.trim().to_ascii_lowercase();
    let ok = e.len() <= 64
        && !e.chars().any(|c| c.is_whitespace() || c.is_control())
        && match e.split_once('@') {
            Some((local, domain)) => {
                !local.is_empty()
                    && domain.contains('.')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
                    && !domain.contains('@')
            }
            None => false,
        };
    if ok {
        Ok(e)
    } else {
        Err(ApiError::bad_request(format!(
            "'{input}' is not a valid email address (at most 64 characters)"
        )))
    }
}

/// User names: 1–64 printable characters without spaces at the ends.
pub fn username(input: &str) -> ApiResult<String> {
    let u = input.trim();
    if u.is_empty() || u.chars().count() > 64 || u.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "User name must be 1 to 64 characters long",
        ));
    }
    Ok(u.to_string())
}

/// Names of domains, groups, policies, presets and resource groups: 1–64 characters of
/// letters, digits, `-`, `_` and `.`, starting with a letter or digit.
pub fn object_name(kind: &str, input: &str) -> ApiResult<String> {
    let n = input.trim();
    let ok = !n.is_empty()
        && n.len() <= 64
        && n.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(n.to_string())
    } else {
        Err(ApiError::bad_request(format!(
            "Invalid {kind} name '{input}': use 1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit"
        )))
    }
}

/// A non-negative integer setting where 0 means unlimited.
pub fn non_negative(field: &str, v: i64) -> ApiResult<i64> {
    if v < 0 {
        Err(ApiError::bad_request(format!(
            "{field} must not be negative (0 means unlimited)"
        )))
    } else {
        Ok(v)
    }
}

pub fn non_negative_i32(field: &str, v: i32) -> ApiResult<i32> {
    non_negative(field, i64::from(v)).map(|_| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails() {
        assert_eq!(email(" User@Example.COM ").unwrap(), "user@example.com");
        for bad in ["", "no-at", "a@b", "a b@c.d", "@c.d", "a@.c", "a@c.d@e.f"] {
            assert!(email(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names() {
        assert!(object_name("group", "team-a_1.x").is_ok());
        for bad in ["", "-x", "a b", "a/b", "é", &"x".repeat(65)] {
            assert!(object_name("group", bad).is_err(), "{bad}");
        }
    }
}
