//! Container registries the image catalog scans. Credentials are stored but never returned.
pub mod scan;
pub use scan::url_authority;

use entity::container_registries as registries;
use entity::enums::RegistryType;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, ModelTrait, QueryFilter, Set,
};
use serde_json::json;
use uuid::Uuid;

use crate::auth::SuperadminScope;
use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Store;

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

/// The registry with host name `hostname` (compared trimmed and lower-cased).
pub async fn find(
    db: &sea_orm::DatabaseConnection,
    hostname: &str,
) -> ApiResult<registries::Model> {
    registries::Entity::find()
        .filter(registries::Column::Hostname.eq(hostname.trim().to_ascii_lowercase()))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found("container registry", hostname))
}

/// Every registry, by host name (superadmins only).
pub async fn list<C: sea_orm::ConnectionTrait>(
    db: &C,
    _scope: &SuperadminScope,
) -> ApiResult<Vec<registries::Model>> {
    use sea_orm::QueryOrder;
    Ok(registries::Entity::find()
        .order_by_asc(registries::Column::Hostname)
        .all(db)
        .await?)
}

/// The registries "any registry" (a domain's empty allowlist) stands for: every configured
/// one and every one the catalog's images come from, by host name.
pub async fn usable_when_any<C: sea_orm::ConnectionTrait>(db: &C) -> ApiResult<Vec<String>> {
    use sea_orm::QuerySelect;
    let mut names: std::collections::BTreeSet<String> = registries::Entity::find()
        .all(db)
        .await?
        .into_iter()
        .map(|r| r.hostname)
        .collect();
    let from_images: Vec<String> = entity::images::Entity::find()
        .select_only()
        .column(entity::images::Column::Registry)
        .distinct()
        .into_tuple()
        .all(db)
        .await?;
    names.extend(from_images);
    Ok(names.into_iter().collect())
}

fn parse_type(s: &str) -> ApiResult<RegistryType> {
    RegistryType::parse(s).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid registry type '{s}' (one of: {})",
            RegistryType::choices()
        ))
    })
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|v| !v.is_empty())
}

/// A new registry as a surface read it; the type and URL are checked here, empty strings
/// count as absent.
#[derive(Debug, Default, Clone)]
pub struct NewRegistry {
    /// With an explicit scheme: `http://host:port` or `https://host`.
    pub url: String,
    pub registry_type: String,
    pub project: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
    /// Default: true.
    pub ssl_verify: Option<bool>,
    /// Default: true.
    pub is_global: Option<bool>,
}

/// A change to a registry as a surface read it; `None` keeps the value, an empty string
/// clears project, username or password.
#[derive(Debug, Default, Clone)]
pub struct RegistryChange {
    pub url: Option<String>,
    pub registry_type: Option<String>,
    pub project: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub ssl_verify: Option<bool>,
    pub is_global: Option<bool>,
}

/// Creates registry `hostname` (superadmins only): checked, written with its audit record,
/// announced.
pub async fn create(
    store: &impl Store,
    scope: &SuperadminScope,
    hostname: &str,
    new: NewRegistry,
) -> ApiResult<registries::Model> {
    let hostname = validate(hostname, &new.url)?;
    if find(store.db(), &hostname).await.is_ok() {
        return Err(ApiError::conflict(format!(
            "Registry '{hostname}' already exists"
        )));
    }
    let now = store.clock().now();
    let m = registries::ActiveModel {
        id: Set(Uuid::new_v4()),
        hostname: Set(hostname),
        url: Set(new.url.trim_end_matches('/').to_string()),
        registry_type: Set(parse_type(&new.registry_type)?),
        project: Set(non_empty(new.project)),
        username: Set(non_empty(new.username)),
        password: Set(non_empty(new.password)),
        ssl_verify: Set(new.ssl_verify.unwrap_or(true)),
        is_global: Set(new.is_global.unwrap_or(true)),
        created_at: Set(now),
        modified_at: Set(now),
    };
    let r = crate::audit::audited(
        store,
        scope.actor(),
        "create_container_registry",
        "container_registry",
        move |txn| {
            Box::pin(async move {
                let r = m.insert(txn).await?;
                let key = r.hostname.clone();
                let detail = json!({"url": r.url});
                Ok((r, key, detail))
            })
        },
    )
    .await?;
    store.events().changed(
        ObjectKind::ContainerRegistry,
        ChangeAction::Created,
        &r.hostname,
        None,
    );
    Ok(r)
}

/// Changes registry `hostname` (superadmins only).
pub async fn modify(
    store: &impl Store,
    scope: &SuperadminScope,
    hostname: &str,
    change: RegistryChange,
) -> ApiResult<registries::Model> {
    let existing = find(store.db(), hostname).await?;
    let url = change.url.clone().unwrap_or_else(|| existing.url.clone());
    validate(&existing.hostname, &url)?;
    let mut m = existing.into_active_model();
    m.url = Set(url.trim_end_matches('/').to_string());
    if let Some(t) = change.registry_type {
        m.registry_type = Set(parse_type(&t)?);
    }
    if let Some(v) = change.project {
        m.project = Set(non_empty(Some(v)));
    }
    if let Some(v) = change.username {
        m.username = Set(non_empty(Some(v)));
    }
    if let Some(v) = change.password {
        m.password = Set(non_empty(Some(v)));
    }
    if let Some(v) = change.ssl_verify {
        m.ssl_verify = Set(v);
    }
    if let Some(v) = change.is_global {
        m.is_global = Set(v);
    }
    m.modified_at = Set(store.clock().now());
    let r = crate::audit::audited(
        store,
        scope.actor(),
        "modify_container_registry",
        "container_registry",
        move |txn| {
            Box::pin(async move {
                let r = m.update(txn).await?;
                let key = r.hostname.clone();
                Ok((r, key, json!({})))
            })
        },
    )
    .await?;
    store.events().changed(
        ObjectKind::ContainerRegistry,
        ChangeAction::Modified,
        &r.hostname,
        None,
    );
    Ok(r)
}

/// Deletes registry `hostname` (superadmins only).
pub async fn delete(store: &impl Store, scope: &SuperadminScope, hostname: &str) -> ApiResult<()> {
    let existing = find(store.db(), hostname).await?;
    let key = existing.hostname.clone();
    crate::audit::audited(
        store,
        scope.actor(),
        "delete_container_registry",
        "container_registry",
        move |txn| {
            Box::pin(async move {
                let key = existing.hostname.clone();
                existing.delete(txn).await?;
                Ok(((), key, json!({})))
            })
        },
    )
    .await?;
    store.events().changed(
        ObjectKind::ContainerRegistry,
        ChangeAction::Deleted,
        &key,
        None,
    );
    Ok(())
}

/// Scans one registry and adds its environment images to the catalog; returns how many.
pub async fn scan_into_catalog(
    store: &impl Store,
    reg: &entity::container_registries::Model,
    progress: &crate::bgtasks::Progress,
    done_before: u64,
) -> ApiResult<(u64, u64)> {
    use entity::enums::ImageType;
    use entity::images;

    let client = scan::RegistryClient::new(reg, store.config().registry_ca_file.as_deref())?;
    let mut refs = Vec::new();
    for repo in client.repositories(reg.project.as_deref()).await? {
        for tag in client.tags(&repo).await? {
            refs.push((repo.clone(), tag));
        }
    }
    let total = done_before + refs.len() as u64;
    let mut found = 0;
    for (i, (repo, tag)) in refs.iter().enumerate() {
        progress.update(
            done_before + i as u64,
            total,
            format!("{}/{repo}:{tag}", reg.hostname),
        );
        let Some(img) = client.inspect(repo, tag).await? else {
            continue;
        };
        let name = format!("{}/{}:{}", reg.hostname, img.repository, img.tag);
        let existing = images::Entity::find()
            .filter(images::Column::Name.eq(&name))
            .filter(images::Column::Architecture.eq(&img.architecture))
            .one(store.db())
            .await?;
        let action = match existing {
            Some(row) => {
                let mut m = row.into_active_model();
                m.config_digest = Set(img.digest.clone());
                m.size_bytes = Set(img.size_bytes);
                m.labels = Set(json!(img.labels));
                m.update(store.db()).await?;
                crate::events::ChangeAction::Modified
            }
            None => {
                images::ActiveModel {
                    id: Set(uuid::Uuid::new_v4()),
                    name: Set(name.clone()),
                    image: Set(img.repository.clone()),
                    tag: Set(img.tag.clone()),
                    registry: Set(reg.hostname.clone()),
                    architecture: Set(img.architecture.clone()),
                    config_digest: Set(img.digest.clone()),
                    size_bytes: Set(img.size_bytes),
                    is_local: Set(false),
                    image_type: Set(ImageType::Compute),
                    accelerators: Set(img.labels.get("ai.backend.accelerators").cloned()),
                    labels: Set(json!(img.labels)),
                    resources: Set(crate::images::local::resources_from_labels(&img.labels)),
                    created_at: Set(store.clock().now()),
                    installed_agents: Set(Default::default()),
                    owner_id: Set(None),
                }
                .insert(store.db())
                .await?;
                crate::events::ChangeAction::Created
            }
        };
        store
            .events()
            .changed(crate::events::ObjectKind::Image, action, &name, None);
        found += 1;
    }
    Ok((found, total))
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
