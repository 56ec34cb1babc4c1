//! The image catalog: metadata of environment images, their minimum resources and aliases.
//! Rescanning engines and registries fills it (sessions issue); here it is read and edited.

use entity::{image_aliases, images};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};

/// Human names of well-known environments, by the image's base name (the last part of its
/// repository), as the console's launcher shows them.
const KNOWN_ENVIRONMENTS: &[(&str, &str)] = &[
    ("python", "Python"),
    ("cpp", "C++ (GCC)"),
    ("gcc", "C++ (GCC)"),
    ("tensorflow", "TensorFlow"),
    ("pytorch", "PyTorch"),
    ("ngc-pytorch", "NGC PyTorch"),
    ("ngc-tensorflow", "NGC TensorFlow"),
    ("r-base", "R"),
    ("r", "R"),
    ("julia", "Julia"),
    ("go", "Go"),
    ("rust", "Rust"),
    ("nodejs", "Node.js"),
    ("java", "Java"),
    ("octave", "Octave"),
    ("lua", "Lua"),
];

/// The environment an image belongs to, by name, and its version: the OCI title label
/// (`org.opencontainers.image.title`) or a well-known name, else the repository's base name;
/// the version is the tag without its base-distro suffix (`3.11-debian12` → `3.11`).
pub fn environment(image: &str, tag: &str, labels: &serde_json::Value) -> (String, String) {
    let base = image.rsplit('/').next().unwrap_or(image);
    let label = |k: &str| labels.get(k).and_then(serde_json::Value::as_str);
    let name = label("org.opencontainers.image.title")
        .filter(|t| !t.trim().is_empty())
        .map(|t| t.trim().to_string())
        .or_else(|| {
            KNOWN_ENVIRONMENTS
                .iter()
                .find(|(k, _)| *k == base)
                .map(|(_, v)| v.to_string())
        })
        .unwrap_or_else(|| base.to_string());
    let version = label("ai.backend.base-distro")
        .and_then(|d| tag.strip_suffix(d))
        .map(|v| v.trim_end_matches(['-', '_']))
        .filter(|v| !v.is_empty())
        .unwrap_or(tag)
        .to_string();
    (name, version)
}

/// Finds an image by UUID, canonical reference or alias (optionally for one architecture).
pub async fn resolve<C: ConnectionTrait>(
    db: &C,
    target: &str,
    architecture: Option<&str>,
) -> ApiResult<images::Model> {
    let not_found = || ApiError::not_found("image", target);
    let mut select = images::Entity::find();
    if let Ok(id) = Uuid::parse_str(target) {
        select = select.filter(images::Column::Id.eq(id));
    } else if let Some(alias) = image_aliases::Entity::find()
        .filter(image_aliases::Column::Alias.eq(target))
        .one(db)
        .await?
    {
        select = select.filter(images::Column::Id.eq(alias.image));
    } else if let Some((name, digest)) = target.split_once('@') {
        // `registry/namespace/name@sha256:…`: the image with that manifest digest.
        let (registry, image, _) = crate::agents::split_reference(name, "");
        select = select
            .filter(images::Column::Registry.eq(registry))
            .filter(images::Column::Image.eq(image))
            .filter(images::Column::ConfigDigest.eq(digest));
    } else {
        select = select.filter(images::Column::Name.eq(target));
    }
    if let Some(a) = architecture {
        select = select.filter(images::Column::Architecture.eq(a));
    }
    select.one(db).await?.ok_or_else(not_found)
}

#[cfg(test)]
mod tests {
    use super::environment;
    use serde_json::json;

    #[test]
    fn environments_by_name_and_version() {
        let distro = json!({"ai.backend.base-distro": "debian12"});
        assert_eq!(
            environment("stable/python", "3.11-debian12", &distro),
            ("Python".into(), "3.11".into())
        );
        assert_eq!(
            environment("stable/cpp", "12-debian12", &distro),
            ("C++ (GCC)".into(), "12".into())
        );
        // No metadata: the repository's base name and the whole tag.
        assert_eq!(
            environment("lab/my-tool", "latest", &json!({})),
            ("my-tool".into(), "latest".into())
        );
        // A tag that is only the distro keeps it; a title label wins over the table.
        assert_eq!(
            environment("stable/python", "debian12", &distro),
            ("Python".into(), "debian12".into())
        );
        assert_eq!(
            environment(
                "x/python",
                "1.0",
                &json!({"org.opencontainers.image.title": "Lab Python"})
            ),
            ("Lab Python".into(), "1.0".into())
        );
    }
}
