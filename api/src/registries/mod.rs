//! Container registries the image catalog scans. Credentials are stored but never returned.
pub mod graphql;

use crate::error::{ApiError, ApiResult};

/// Checks a registry URL (scheme must be explicit: `http://` or `https://`) and returns its
/// `host[:port]`.
pub fn url_authority(url: &str) -> ApiResult<String> {
    let bad = |why: &str| ApiError::bad_request(format!("Invalid registry URL '{url}': {why}"));
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad("it must start with http:// or https://"))?;
    if scheme != "http" && scheme != "https" {
        return Err(bad("the scheme must be http or https"));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("it must not contain spaces"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.is_empty() {
        return Err(bad("the host is missing"));
    }
    if authority.contains('@') {
        return Err(bad(
            "put credentials in the username and password fields, not in the URL",
        ));
    }
    Ok(authority.to_ascii_lowercase())
}

/// Registry host names: `host[:port]`; the URL must point at the same host (seeds: "must be
/// set identically"), except for `index.docker.io`.
pub fn validate(hostname: &str, url: &str) -> ApiResult<String> {
    let hostname = hostname.trim().to_ascii_lowercase();
    let ok = !hostname.is_empty()
        && hostname.len() <= 256
        && hostname
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'));
    if !ok {
        return Err(ApiError::bad_request(format!(
            "Invalid registry hostname '{hostname}' (use host or host:port)"
        )));
    }
    let authority = url_authority(url)?;
    if hostname != "index.docker.io" && authority != hostname {
        return Err(ApiError::bad_request(format!(
            "The registry URL's host '{authority}' must match the registry hostname '{hostname}'"
        )));
    }
    Ok(hostname)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            validate("localhost:5000", "http://localhost:5000").unwrap(),
            "localhost:5000"
        );
        assert!(validate("index.docker.io", "https://registry-1.docker.io").is_ok());
        assert!(
            validate("localhost:5000", "localhost:5000").is_err(),
            "scheme required"
        );
        assert!(validate("localhost:5000", "ftp://localhost:5000").is_err());
        assert!(validate("localhost:5000", "http://other:5000").is_err());
        assert!(validate("localhost:5000", "http://u:p@localhost:5000").is_err());
        assert!(validate("bad host", "http://bad host").is_err());
    }
}
