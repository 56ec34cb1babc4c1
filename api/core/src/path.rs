//! The text of a user-supplied path inside a folder: `..`, absolute paths, encoded dots and
//! slashes, backslashes, NUL and control characters are refused; what is left are plain
//! names, which `fsat` then walks one at a time through directory handles (no symbolic link
//! is ever followed, and files with other hard links are refused: the other name may be
//! outside).
use std::path::{Component, PathBuf};

use crate::error::{ApiError, ApiResult};

/// A user's path as it may appear in a message: control characters masked, bounded.
pub fn shown(path: &str) -> String {
    path.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .take(200)
        .collect()
}

pub fn refuse(path: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!("Invalid path '{}': {why}", shown(path)))
}

/// Checks the text of a relative path and returns its normal components.
pub fn components(path: &str) -> ApiResult<Vec<String>> {
    if path.len() > 4096 {
        return Err(refuse(path, "it is too long"));
    }
    if path.chars().any(|c| c == '\0' || c.is_control()) {
        return Err(refuse(path, "it contains a NUL or control character"));
    }
    if path.contains('\\') {
        return Err(refuse(path, "backslashes are not allowed"));
    }
    let lower = path.to_ascii_lowercase();
    if ["%2e", "%2f", "%5c", "%00", "%25"]
        .iter()
        .any(|e| lower.contains(e))
    {
        return Err(refuse(path, "encoded dots or separators are not allowed"));
    }
    if path.starts_with('/') || path.starts_with('~') {
        return Err(refuse(path, "it must be relative to the folder"));
    }
    let mut out = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => continue,
            ".." => return Err(refuse(path, "'..' is not allowed")),
            p if p.len() > 255 => return Err(refuse(path, "a name is longer than 255 bytes")),
            p => out.push(p.to_string()),
        }
    }
    // Belt and braces: what std makes of it must be plain names only.
    let joined: PathBuf = out.iter().collect();
    if !joined
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
    {
        return Err(refuse(path, "it is not a plain relative path"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_pass() {
        assert_eq!(components("./sub//deeper/").unwrap(), ["sub", "deeper"]);
        assert!(components("").unwrap().is_empty());
        assert_eq!(components("..hidden..name").unwrap(), ["..hidden..name"]);
        for bad in [
            "..",
            "../x",
            "sub/../../x",
            "/etc/passwd",
            "~/x",
            "a\0b",
            "%2e%2e/x",
            "sub%2f..",
            "..%2F",
            "a\\..\\b",
            "line\nbreak",
        ] {
            assert!(components(bad).is_err(), "{bad:?} must be refused");
        }
    }
}
