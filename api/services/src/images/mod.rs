//! The image catalog: metadata of environment images, their minimum resources and aliases.
//! Rescanning engines and registries fills it (sessions issue); here it is read and edited.

use entity::slots::{format_amount, parse_amount};
use entity::{image_aliases, images};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, ModelTrait,
    QueryFilter, QueryOrder, Set,
};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::{Caller, SuperadminScope};
use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Engines;

pub mod local;

/// Labels of a committed session's image, Backend.AI's names.
pub const CUSTOMIZED_OWNER_LABEL: &str = "ai.backend.customized-image.owner";
pub const CUSTOMIZED_NAME_LABEL: &str = "ai.backend.customized-image.name";
pub const CUSTOMIZED_ID_LABEL: &str = "ai.backend.customized-image.id";
pub const CUSTOMIZED_EMAIL_LABEL: &str = "ai.backend.customized-image.user.email";

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
/// the version is the tag without its base-distro suffix (`3.11-debian12` → `3.11`), or, for a
/// committed session's image, the name its owner gave it.
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
    if let Some(given) = label(CUSTOMIZED_NAME_LABEL) {
        return (name, given.to_string());
    }
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
        let reference = bai_core::image_ref::ImageRef::parse(name, "");
        select = select
            .filter(images::Column::Registry.eq(reference.registry))
            .filter(images::Column::Image.eq(reference.path))
            .filter(images::Column::ConfigDigest.eq(digest));
    } else {
        select = select.filter(images::Column::Name.eq(target));
    }
    if let Some(a) = architecture {
        select = select.filter(images::Column::Architecture.eq(a));
    }
    select.one(db).await?.ok_or_else(not_found)
}

/// Short names for an image the catalog has just learned of, so the guides' commands work as
/// written (`backend.ai run python …`): the repository's base name (`python`), the base name
/// with the tag's major version (`python3`) and with the whole tag (`python:3.11-debian12`).
/// An alias already taken stays with its image (the first image scanned keeps `python`); only
/// new images seed, so an alias an admin removed is not brought back by a rescan. A committed
/// session's image (it has an owner) seeds nothing.
pub async fn seed_aliases<C: ConnectionTrait>(db: &C, image: &images::Model) -> ApiResult<()> {
    if image.owner_id.is_some() {
        return Ok(());
    }
    let base = image.image.rsplit('/').next().unwrap_or(&image.image);
    let major: String = image.tag.chars().take_while(char::is_ascii_digit).collect();
    let mut names = vec![base.to_string(), format!("{base}:{}", image.tag)];
    if !major.is_empty() {
        names.push(format!("{base}{major}"));
    }
    for alias in names {
        if alias.len() > 256 || alias.chars().any(char::is_whitespace) {
            continue;
        }
        // Another manager scanning the same engine may seed the same alias at once.
        image_aliases::Entity::insert(image_aliases::ActiveModel {
            id: Set(Uuid::new_v4()),
            alias: Set(alias),
            image: Set(image.id),
        })
        .on_conflict(
            sea_orm::sea_query::OnConflict::column(image_aliases::Column::Alias)
                .do_nothing()
                .to_owned(),
        )
        .do_nothing()
        .exec(db)
        .await?;
    }
    Ok(())
}

/// The reference an engine knows a catalog image by (local images keep their tag as found).
pub fn docker_reference(image: &images::Model) -> String {
    bai_core::image_ref::ImageRef::new(&image.registry, &image.image, &image.tag).to_string()
}

/// The user an image's labels say it belongs to (`user:<uuid>`).
pub fn owner_of(labels: &std::collections::HashMap<String, String>) -> Option<Uuid> {
    labels
        .get(CUSTOMIZED_OWNER_LABEL)
        .and_then(|v| v.strip_prefix("user:"))
        .and_then(|u| Uuid::parse_str(u).ok())
}

/// The images of committed sessions `user` owns.
pub async fn owned_by<C: ConnectionTrait>(db: &C, user: Uuid) -> ApiResult<Vec<images::Model>> {
    Ok(images::Entity::find()
        .filter(images::Column::OwnerId.eq(user))
        .order_by_asc(images::Column::Name)
        .all(db)
        .await?)
}

/// The aliases of image `image`.
pub async fn aliases_of<C: ConnectionTrait>(db: &C, image: Uuid) -> ApiResult<Vec<String>> {
    Ok(image_aliases::Entity::find()
        .filter(image_aliases::Column::Image.eq(image))
        .all(db)
        .await?
        .into_iter()
        .map(|a| a.alias)
        .collect())
}

/// The catalog as `caller` sees it: global images and their own committed ones (`everyone`:
/// every user's too, for a superadmin only).
pub fn visible(caller: &Caller, everyone: bool) -> sea_orm::Select<images::Entity> {
    let select = images::Entity::find().order_by_asc(images::Column::Name);
    if everyone && caller.is_superadmin() {
        return select;
    }
    select.filter(
        images::Column::OwnerId
            .is_null()
            .or(images::Column::OwnerId.eq(caller.uuid)),
    )
}

/// Whether `caller` may see and use `image`: the global catalog, or an image of a session
/// they committed (a superadmin sees every one).
pub fn may_use(caller: &Caller, image: &images::Model) -> bool {
    image
        .owner_id
        .is_none_or(|o| o == caller.uuid || caller.is_superadmin())
}

/// [`resolve`] for `caller`: another user's image is NOT_FOUND, as one that does not exist.
pub async fn resolve_for<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
    target: &str,
    architecture: Option<&str>,
) -> ApiResult<images::Model> {
    let image = resolve(db, target, architecture).await?;
    if !may_use(caller, &image) {
        return Err(ApiError::not_found("image", target));
    }
    Ok(image)
}

/// An edit of one slot's minimum/maximum as a surface read it (amounts are parsed here).
#[derive(Debug, Default, Clone)]
pub struct ResourceLimitEdit {
    pub key: String,
    /// e.g. `1` for cpu, `256m` for mem; `None` keeps the current minimum.
    pub min: Option<String>,
    /// Empty or absent = no maximum.
    pub max: Option<String>,
}

/// Applies per-slot min/max edits onto the image's `resources` JSON.
fn edit_limits(resources: &Value, edits: &[ResourceLimitEdit]) -> ApiResult<Value> {
    let mut out = resources.as_object().cloned().unwrap_or_default();
    for e in edits {
        let entry = out
            .entry(e.key.clone())
            .or_insert_with(|| json!({"min": "0", "max": null}));
        let min = match &e.min {
            Some(m) => parse_amount(&e.key, m)?,
            None => entry
                .get("min")
                .and_then(Value::as_str)
                .map(|s| parse_amount(&e.key, s))
                .transpose()?
                .unwrap_or_default(),
        };
        let max = match e.max.as_deref().map(str::trim) {
            Some("") | None => None,
            Some(m) => Some(parse_amount(&e.key, m)?),
        };
        if max.is_some_and(|mx| mx < min) {
            return Err(ApiError::bad_request(format!(
                "minimum {} of '{}' exceeds its maximum",
                format_amount(&e.key, min),
                e.key
            )));
        }
        *entry = json!({"min": min.to_string(), "max": max.map(|m| m.to_string())});
    }
    Ok(Value::Object(out))
}

/// Edits the minimum/maximum resources of image `target` (superadmins only); `None` keeps
/// them.
pub async fn modify(
    state: &impl Engines,
    scope: &SuperadminScope,
    target: &str,
    architecture: Option<&str>,
    resource_limits: Option<Vec<ResourceLimitEdit>>,
) -> ApiResult<images::Model> {
    let image = resolve(state.db(), target, architecture).await?;
    let resources = match &resource_limits {
        Some(edits) => edit_limits(&image.resources, edits)?,
        None => image.resources.clone(),
    };
    let mut m = image.into_active_model();
    m.resources = Set(resources);
    let img = crate::audit::audited(state, scope.actor(), "modify_image", "image", move |txn| {
        Box::pin(async move {
            let i = m.update(txn).await?;
            let key = i.name.clone();
            let detail = json!({"resources": i.resources});
            Ok((i, key, detail))
        })
    })
    .await?;
    state
        .events()
        .changed(ObjectKind::Image, ChangeAction::Modified, &img.name, None);
    Ok(img)
}

/// Gives image `target` the short name `alias` such as `python` (superadmins only).
pub async fn alias(
    state: &impl Engines,
    scope: &SuperadminScope,
    alias: &str,
    target: &str,
    architecture: Option<&str>,
) -> ApiResult<()> {
    let alias = alias.trim().to_string();
    if alias.is_empty() || alias.len() > 256 || alias.chars().any(|c| c.is_whitespace()) {
        return Err(ApiError::bad_request(
            "An alias must be 1 to 256 characters without spaces",
        ));
    }
    let image = resolve(state.db(), target, architecture).await?;
    if image_aliases::Entity::find()
        .filter(image_aliases::Column::Alias.eq(&alias))
        .one(state.db())
        .await?
        .is_some()
    {
        return Err(ApiError::conflict(format!(
            "The alias '{alias}' is already in use"
        )));
    }
    let name = image.name.clone();
    crate::audit::audited(state, scope.actor(), "alias_image", "image", move |txn| {
        Box::pin(async move {
            image_aliases::ActiveModel {
                id: Set(Uuid::new_v4()),
                alias: Set(alias.clone()),
                image: Set(image.id),
            }
            .insert(txn)
            .await?;
            Ok(((), image.name, json!({"alias": alias})))
        })
    })
    .await?;
    state
        .events()
        .changed(ObjectKind::Image, ChangeAction::Modified, &name, None);
    Ok(())
}

/// Removes the alias `alias` (superadmins only).
pub async fn dealias(state: &impl Engines, scope: &SuperadminScope, alias: &str) -> ApiResult<()> {
    let row = image_aliases::Entity::find()
        .filter(image_aliases::Column::Alias.eq(alias))
        .one(state.db())
        .await?
        .ok_or_else(|| ApiError::not_found("image alias", alias))?;
    crate::audit::audited(state, scope.actor(), "dealias_image", "image", move |txn| {
        Box::pin(async move {
            let key = row.alias.clone();
            row.delete(txn).await?;
            Ok(((), key, json!({})))
        })
    })
    .await?;
    state
        .events()
        .changed(ObjectKind::Image, ChangeAction::Modified, alias, None);
    Ok(())
}

/// Removes image `reference` from the catalog, not from the engines (superadmins only).
pub async fn forget(
    state: &impl Engines,
    scope: &SuperadminScope,
    reference: &str,
    architecture: Option<&str>,
) -> ApiResult<()> {
    let image = resolve(state.db(), reference, architecture).await?;
    let name = image.name.clone();
    crate::audit::audited(state, scope.actor(), "forget_image", "image", move |txn| {
        Box::pin(async move {
            let key = image.name.clone();
            image.delete(txn).await?;
            Ok(((), key, json!({})))
        })
    })
    .await?;
    state
        .events()
        .changed(ObjectKind::Image, ChangeAction::Deleted, &name, None);
    Ok(())
}

/// Forgets image `id` for `caller`. A committed session's image (the caller's own; a
/// superadmin's for anyone's) is removed from the engines that hold it as well, or a rescan
/// would bring it back and it would still count against its owner's policy; a catalog image
/// is forgotten by a superadmin only, as [`forget`]. Another user's image is NOT_FOUND.
pub async fn forget_by_id(state: &impl Engines, caller: &Caller, id: Uuid) -> ApiResult<()> {
    let image = resolve_for(state.db(), caller, &id.to_string(), None).await?;
    let Some(_) = image.owner_id else {
        let scope = caller.require_superadmin()?;
        return forget(state, &scope, &id.to_string(), None).await;
    };
    remove_committed(state, caller, image).await
}

/// Backend.AI's `untag_image_from_registry`: bai keeps committed sessions' images in its
/// engines, not in a registry, so untagging one (the caller's; a superadmin's for anyone's;
/// another's is NOT_FOUND) removes it there and from the catalog; a registry's image is
/// refused (bai speaks no registry's management API).
pub async fn untag(state: &impl Engines, caller: &Caller, id: Uuid) -> ApiResult<()> {
    let image = resolve_for(state.db(), caller, &id.to_string(), None).await?;
    if image.owner_id.is_none() {
        return Err(ApiError::bad_request(format!(
            "'{}' is a registry's image: bai untags only committed sessions' images (kept in its engines); remove the tag in the registry itself",
            image.name
        )));
    }
    remove_committed(state, caller, image).await
}

/// Removes a committed session's image from the engines that hold it and from the catalog.
async fn remove_committed(
    state: &impl Engines,
    caller: &Caller,
    image: images::Model,
) -> ApiResult<()> {
    let reference = docker_reference(&image);
    for agent_id in image.installed_agents.0.iter() {
        let Some(agent) = state.agents().get(agent_id).await else {
            continue;
        };
        agent.remove_image(&reference).await?;
    }
    image.delete(state.db()).await?;
    tracing::info!(image = %reference, user = %caller.email, "a committed session's image was removed");
    state
        .events()
        .changed(ObjectKind::Image, ChangeAction::Deleted, &reference, None);
    Ok(())
}

/// The catalog's image by canonical name for `architecture`, if it has one.
pub async fn find_named<C: ConnectionTrait>(
    db: &C,
    name: &str,
    architecture: &str,
) -> ApiResult<Option<images::Model>> {
    Ok(images::Entity::find()
        .filter(images::Column::Name.eq(name))
        .filter(images::Column::Architecture.eq(architecture))
        .one(db)
        .await?)
}

/// A catalog row of local image `image:tag` for unit tests (nothing else set).
#[cfg(test)]
pub(crate) fn test_image(image: &str, tag: &str) -> images::Model {
    images::Model {
        id: Uuid::nil(),
        name: format!("bai.local/{image}:{tag}"),
        image: image.into(),
        tag: tag.into(),
        registry: "bai.local".into(),
        architecture: "x86_64".into(),
        config_digest: String::new(),
        size_bytes: 0,
        is_local: true,
        image_type: entity::enums::ImageType::Compute,
        accelerators: None,
        labels: json!({}),
        resources: json!({}),
        created_at: chrono::Utc::now(),
        installed_agents: Default::default(),
        owner_id: None,
    }
}

#[cfg(test)]
mod tests {
    use super::{ResourceLimitEdit, edit_limits, environment};
    use serde_json::json;

    #[test]
    fn limits_edit() {
        let r = json!({"cpu": {"min": "1", "max": null}});
        let out = edit_limits(
            &r,
            &[ResourceLimitEdit {
                key: "mem".into(),
                min: Some("256m".into()),
                max: None,
            }],
        )
        .unwrap();
        assert_eq!(out["mem"]["min"], "268435456");
        assert_eq!(out["cpu"]["min"], "1");
        assert!(
            edit_limits(
                &r,
                &[ResourceLimitEdit {
                    key: "cpu".into(),
                    min: Some("4".into()),
                    max: Some("2".into())
                }]
            )
            .is_err()
        );
        assert!(
            edit_limits(
                &r,
                &[ResourceLimitEdit {
                    key: "tpu".into(),
                    min: Some("1".into()),
                    max: None
                }]
            )
            .is_err()
        );
    }

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
