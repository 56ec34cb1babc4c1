//! The one way from a user-supplied path to a file inside a folder. Every storage operation
//! goes through `resolve`, which keeps the result beneath the folder root: `..`, absolute
//! paths, encoded dots and slashes, backslashes, NUL and control characters are refused, and
//! no existing component may be a symbolic link (a link could point anywhere, and a container
//! that mounts the folder can make one). Files with more than one hard link are refused too:
//! the other name may be outside.
use std::path::{Component, Path, PathBuf};

use crate::error::{ApiError, ApiResult};

fn refuse(path: &str, why: &str) -> ApiError {
    let shown: String = path
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .take(200)
        .collect();
    ApiError::bad_request(format!("Invalid path '{shown}': {why}"))
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

/// Resolves `path` beneath `root`. The target may not exist yet (for creating); every
/// existing component on the way must be a real directory or file, never a symlink.
pub fn resolve(root: &Path, path: &str) -> ApiResult<PathBuf> {
    let parts = components(path)?;
    let mut current = root.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        current.push(part);
        match std::fs::symlink_metadata(&current) {
            Ok(meta) => {
                if meta.file_type().is_symlink() {
                    return Err(refuse(path, "it goes through a symbolic link"));
                }
                let last = i + 1 == parts.len();
                if !last && !meta.is_dir() {
                    return Err(refuse(path, "a parent is not a directory"));
                }
                #[cfg(unix)]
                {
                    use std::os::unix::fs::MetadataExt;
                    if meta.is_file() && meta.nlink() > 1 {
                        return Err(refuse(path, "the file has other hard links"));
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Nothing below a missing component exists either.
                for rest in &parts[i + 1..] {
                    current.push(rest);
                }
                break;
            }
            Err(e) => return Err(ApiError::internal("checking a path", e)),
        }
    }
    Ok(current)
}

/// Like `resolve`, and the target must exist.
pub fn resolve_existing(root: &Path, path: &str) -> ApiResult<PathBuf> {
    let p = resolve(root, path)?;
    if std::fs::symlink_metadata(&p).is_err() {
        return Err(ApiError::not_found("file", path));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (PathBuf, PathBuf) {
        let base = std::env::temp_dir().join(format!("bai-path-{}", uuid::Uuid::new_v4().simple()));
        let root = base.join("folder");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("sub/file.txt"), "in").unwrap();
        std::fs::write(outside.join("secret"), "out").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("escape")).unwrap();
        std::os::unix::fs::symlink("sub", root.join("inner-link")).unwrap();
        std::fs::hard_link(outside.join("secret"), root.join("hard")).unwrap();
        (root, base)
    }

    #[test]
    fn good_paths_stay_inside() {
        let (root, base) = tree();
        assert_eq!(
            resolve(&root, "sub/file.txt").unwrap(),
            root.join("sub/file.txt")
        );
        assert_eq!(
            resolve(&root, "./sub//deeper/").unwrap(),
            root.join("sub/deeper")
        );
        assert_eq!(resolve(&root, "").unwrap(), root);
        assert_eq!(
            resolve(&root, "new/dir/file").unwrap(),
            root.join("new/dir/file")
        );
        assert_eq!(
            resolve(&root, "..hidden..name").unwrap(),
            root.join("..hidden..name")
        );
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn bad_paths_are_refused() {
        let (root, base) = tree();
        for bad in [
            "..",
            "../outside/secret",
            "sub/../../outside",
            "/etc/passwd",
            "~/x",
            "escape/secret",
            "escape",
            "inner-link/file.txt",
            "hard",
            "sub/file.txt/x",
            "a\0b",
            "%2e%2e/outside",
            "sub%2f..",
            "..%2F",
            "a\\..\\b",
            "line\nbreak",
        ] {
            assert!(resolve(&root, bad).is_err(), "{bad:?} must be refused");
        }
        std::fs::remove_dir_all(base).unwrap();
    }

    proptest::proptest! {
        /// Any string: either refused, or resolved to a place beneath the root that passes
        /// through no link.
        #[test]
        fn any_path_stays_beneath_the_root(p in "([a-z./\\\\%~ -]|\\.\\.|escape|inner-link|sub|secret){0,12}") {
            static TREE: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
            let root = TREE.get_or_init(tree).0.as_path();
            let canonical_root = root.canonicalize().unwrap();
            if let Ok(resolved) = resolve(root, &p) {
                let mut probe = resolved.clone();
                while !probe.exists() {
                    match probe.parent() {
                        Some(parent) => probe = parent.to_path_buf(),
                        None => break,
                    }
                }
                let real = probe.canonicalize().unwrap();
                proptest::prop_assert!(real.starts_with(&canonical_root), "{} -> {}", p, real.display());
            }
        }
    }

    /// Thousands of generated paths, mixing every dangerous piece: whatever is accepted must
    /// lie beneath the root and never pass through a link.
    #[test]
    fn fuzz_never_escapes() {
        let (root, base) = tree();
        let pieces = [
            "..",
            ".",
            "",
            "sub",
            "deeper",
            "file.txt",
            "escape",
            "inner-link",
            "hard",
            "secret",
            "%2e",
            "%2E%2e",
            "%2f",
            "\\",
            "\0",
            "/",
            "~",
            "..%00",
            "a b",
            "é",
            "....",
            ".hidden",
            "\u{202e}",
            "%25",
            "\n",
        ];
        let mut seed: u64 = 0x9e3779b97f4a7c15;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let canonical_root = root.canonicalize().unwrap();
        let mut accepted = 0;
        for _ in 0..20_000 {
            let n = 1 + (next() % 6) as usize;
            let mut p = String::new();
            for i in 0..n {
                if i > 0 || next() % 4 == 0 {
                    p.push('/');
                }
                p.push_str(pieces[(next() % pieces.len() as u64) as usize]);
            }
            if let Ok(resolved) = resolve(&root, &p) {
                accepted += 1;
                // Canonicalise the existing part and check it is beneath the root.
                let mut existing = resolved.clone();
                while !existing.exists() {
                    existing.pop();
                }
                let c = existing.canonicalize().unwrap();
                assert!(c.starts_with(&canonical_root), "{p:?} escaped to {c:?}");
                assert!(resolved.starts_with(&root), "{p:?} → {resolved:?}");
                assert!(
                    !p.split('/').any(|c| c == ".."),
                    "{p:?} was accepted with a '..' component"
                );
            }
        }
        assert!(
            accepted > 100,
            "the generator also makes good paths ({accepted})"
        );
        std::fs::remove_dir_all(base).unwrap();
    }
}
