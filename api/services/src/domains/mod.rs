//! Domains: the top layer of authority and resource control. Superadmins manage them;
//! everyone else sees only their own domain.

use entity::domains;
use sea_orm::{ActiveModelTrait, EntityTrait, IntoActiveModel, Set};
use serde_json::{Value, json};

use crate::auth::SuperadminScope;
use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Store;

/// A change to a domain as a surface read it; `None` keeps the value. The JSON values are
/// checked here (`policies::parse_limits`, `normalize_allowed_hosts`).
#[derive(Debug, Default, Clone)]
pub struct DomainChange {
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub total_resource_slots: Option<Value>,
    pub allowed_vfolder_hosts: Option<Value>,
    pub allowed_docker_registries: Option<Vec<String>>,
    pub integration_id: Option<String>,
}

fn apply(store: &impl Store, m: &mut domains::ActiveModel, c: DomainChange) -> ApiResult<()> {
    if let Some(v) = c.description {
        m.description = Set(Some(v));
    }
    if let Some(v) = c.is_active {
        m.is_active = Set(v);
    }
    if let Some(v) = c.total_resource_slots {
        m.total_resource_slots = Set(crate::policies::parse_limits(&v)?);
    }
    if let Some(v) = c.allowed_vfolder_hosts {
        m.allowed_vfolder_hosts = Set(crate::policies::normalize_allowed_hosts(&v)?);
    }
    if let Some(v) = c.allowed_docker_registries {
        m.allowed_docker_registries = Set(v.into());
    }
    if let Some(v) = c.integration_id {
        m.integration_id = Set(Some(v));
    }
    m.modified_at = Set(store.clock().now());
    Ok(())
}

/// Creates domain `name` (superadmins only), with its audit record, and announces it.
pub async fn create(
    store: &impl Store,
    scope: &SuperadminScope,
    name: &str,
    change: DomainChange,
) -> ApiResult<domains::Model> {
    let name = crate::validate::object_name("domain", name)?;
    if domains::Entity::find_by_id(name.clone())
        .one(store.db())
        .await?
        .is_some()
    {
        return Err(ApiError::conflict(format!(
            "Domain '{name}' already exists"
        )));
    }
    let now = store.clock().now();
    let mut m = domains::ActiveModel {
        name: Set(name),
        description: Set(None),
        is_active: Set(true),
        created_at: Set(now),
        modified_at: Set(now),
        total_resource_slots: Set(Default::default()),
        allowed_vfolder_hosts: Set(json!({})),
        allowed_docker_registries: Set(Default::default()),
        integration_id: Set(None),
    };
    apply(store, &mut m, change)?;
    let d = crate::audit::audited(
        store,
        scope.actor(),
        "create_domain",
        "domain",
        move |txn| {
            Box::pin(async move {
                let d = m.insert(txn).await?;
                let key = d.name.clone();
                Ok((d, key, json!({})))
            })
        },
    )
    .await?;
    store.events().changed(
        ObjectKind::Domain,
        ChangeAction::Created,
        &d.name,
        Some(d.name.clone()),
    );
    Ok(d)
}

/// Changes domain `name` (superadmins only).
pub async fn modify(
    store: &impl Store,
    scope: &SuperadminScope,
    name: &str,
    change: DomainChange,
) -> ApiResult<domains::Model> {
    let existing =
        crate::lookup::get::<domains::Entity>(store.db(), "domain", name.to_string()).await?;
    let mut m = existing.into_active_model();
    apply(store, &mut m, change)?;
    let d = crate::audit::audited(
        store,
        scope.actor(),
        "modify_domain",
        "domain",
        move |txn| {
            Box::pin(async move {
                let d = m.update(txn).await?;
                let key = d.name.clone();
                Ok((d, key, json!({})))
            })
        },
    )
    .await?;
    store.events().changed(
        ObjectKind::Domain,
        ChangeAction::Modified,
        &d.name,
        Some(d.name.clone()),
    );
    Ok(d)
}
