//! Container image references: `registry/namespace/name:tag` or `…name@sha256:…`, split the
//! way Docker reads them, and written back the way an engine pulls them.
use std::fmt;

/// A parsed image reference. `tag` holds the digest (`sha256:…`) for a reference by digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    pub registry: String,
    /// The repository path inside the registry (`stable/python`).
    pub path: String,
    pub tag: String,
}

impl ImageRef {
    pub fn new(registry: &str, path: &str, tag: &str) -> Self {
        ImageRef {
            registry: registry.to_string(),
            path: path.to_string(),
            tag: tag.to_string(),
        }
    }

    /// Splits `registry/namespace/name:tag`: the registry is the first part when it has a dot
    /// or a colon or is `localhost` (otherwise `default_registry`); the tag defaults to
    /// `latest`; for `…name@sha256:…` the tag is the digest.
    pub fn parse(reference: &str, default_registry: &str) -> Self {
        let (path, tag) = match reference.split_once('@') {
            Some((p, digest)) => (p, digest),
            None => match reference.rsplit_once(':') {
                Some((p, t)) if !t.contains('/') => (p, t),
                _ => (reference, "latest"),
            },
        };
        match path.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                ImageRef::new(first, rest, tag)
            }
            _ => ImageRef::new(default_registry, path, tag),
        }
    }
}

/// `registry/path:tag`, the name an engine knows the image by.
impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}:{}", self.registry, self.path, self.tag)
    }
}

#[cfg(test)]
mod tests {
    use super::ImageRef;

    #[test]
    fn references() {
        assert_eq!(
            ImageRef::parse("bai.local/stable/python:3.11-debian12", "x"),
            ImageRef::new("bai.local", "stable/python", "3.11-debian12")
        );
        assert_eq!(
            ImageRef::parse("127.0.0.1:5000/a/b:1", "x"),
            ImageRef::new("127.0.0.1:5000", "a/b", "1")
        );
        assert_eq!(
            ImageRef::parse("python", "bai.local"),
            ImageRef::new("bai.local", "python", "latest")
        );
        assert_eq!(
            ImageRef::parse("127.0.0.1:5000/a/b@sha256:00ff", "x"),
            ImageRef::new("127.0.0.1:5000", "a/b", "sha256:00ff")
        );
        assert_eq!(
            ImageRef::parse("localhost/a:2", "x").to_string(),
            "localhost/a:2"
        );
    }
}
