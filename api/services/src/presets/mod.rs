//! Resource presets offered in the launch dialog (superadmins manage them).

use entity::resource_presets as presets;
use entity::slots::{ResourceSlots, parse_binary_size};
use rust_decimal::prelude::ToPrimitive;
use sea_orm::{ActiveModelTrait, EntityTrait, IntoActiveModel, ModelTrait, Set};
use serde_json::json;

use crate::auth::SuperadminScope;
use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Store;

/// The id of the preset named `name` (bai keys presets by name): the first 16 bytes of a
/// SHA-256 of the name, as a UUID of version 8 (custom).
pub fn id_of(name: &str) -> uuid::Uuid {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("resource-preset:{name}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// Creates preset `name` (superadmins only): checked, written with its audit record, announced.
pub async fn create(
    store: &impl Store,
    scope: &SuperadminScope,
    name: &str,
    slots: ResourceSlots,
    shared_memory: Option<i64>,
) -> ApiResult<presets::Model> {
    let name = crate::validate::object_name("preset", name)?;
    validate(&slots, shared_memory)?;
    if presets::Entity::find_by_id(name.clone())
        .one(store.db())
        .await?
        .is_some()
    {
        return Err(ApiError::conflict(format!(
            "Resource preset '{name}' already exists"
        )));
    }
    let m = presets::ActiveModel {
        name: Set(name),
        resource_slots: Set(slots),
        shared_memory: Set(shared_memory),
        created_at: Set(store.clock().now()),
    };
    let p = crate::audit::audited(
        store,
        scope.actor(),
        "create_resource_preset",
        "resource_preset",
        move |txn| {
            Box::pin(async move {
                let p = m.insert(txn).await?;
                let key = p.name.clone();
                let detail =
                    json!({"resource_slots": p.resource_slots, "shared_memory": p.shared_memory});
                Ok((p, key, detail))
            })
        },
    )
    .await?;
    store.events().changed(
        ObjectKind::ResourcePreset,
        ChangeAction::Created,
        &p.name,
        None,
    );
    Ok(p)
}

/// Changes preset `name` (superadmins only); `None` keeps a value, `Some(None)` clears the
/// shared memory.
pub async fn modify(
    store: &impl Store,
    scope: &SuperadminScope,
    name: &str,
    slots: Option<ResourceSlots>,
    shared_memory: Option<Option<i64>>,
) -> ApiResult<presets::Model> {
    let existing =
        crate::lookup::get::<presets::Entity>(store.db(), "resource preset", name.to_string())
            .await?;
    let slots = slots.unwrap_or_else(|| existing.resource_slots.clone());
    let shm = shared_memory.unwrap_or(existing.shared_memory);
    validate(&slots, shm)?;
    let mut m = existing.into_active_model();
    m.resource_slots = Set(slots);
    m.shared_memory = Set(shm);
    let p = crate::audit::audited(
        store,
        scope.actor(),
        "modify_resource_preset",
        "resource_preset",
        move |txn| {
            Box::pin(async move {
                let p = m.update(txn).await?;
                let key = p.name.clone();
                let detail =
                    json!({"resource_slots": p.resource_slots, "shared_memory": p.shared_memory});
                Ok((p, key, detail))
            })
        },
    )
    .await?;
    store.events().changed(
        ObjectKind::ResourcePreset,
        ChangeAction::Modified,
        &p.name,
        None,
    );
    Ok(p)
}

/// Deletes preset `name` (superadmins only).
pub async fn delete(store: &impl Store, scope: &SuperadminScope, name: &str) -> ApiResult<()> {
    let existing =
        crate::lookup::get::<presets::Entity>(store.db(), "resource preset", name.to_string())
            .await?;
    crate::audit::audited(
        store,
        scope.actor(),
        "delete_resource_preset",
        "resource_preset",
        move |txn| {
            Box::pin(async move {
                let key = existing.name.clone();
                existing.delete(txn).await?;
                Ok(((), key, json!({})))
            })
        },
    )
    .await?;
    store.events().changed(
        ObjectKind::ResourcePreset,
        ChangeAction::Deleted,
        name,
        None,
    );
    Ok(())
}

/// Checks a preset: CPU and memory are required, shared memory (if any) must be smaller
/// than memory.
pub fn validate(slots: &ResourceSlots, shared_memory: Option<i64>) -> ApiResult<()> {
    if slots.get("cpu").is_zero() || slots.get("mem").is_zero() {
        return Err(ApiError::bad_request(
            "A preset needs both cpu and mem greater than zero",
        ));
    }
    if let Some(shm) = shared_memory {
        if shm < 0 {
            return Err(ApiError::bad_request("Shared memory must not be negative"));
        }
        if rust_decimal::Decimal::from(shm) >= slots.get("mem") {
            return Err(ApiError::bad_request(
                "Shared memory must be smaller than the memory (RAM) of the preset",
            ));
        }
    }
    Ok(())
}

/// Parses `1g`, `512m` or bytes; empty = none.
pub fn parse_shared_memory(input: &str) -> ApiResult<Option<i64>> {
    if input.trim().is_empty() {
        return Ok(None);
    }
    parse_binary_size(input)
        .and_then(|d| d.to_i64())
        .map(Some)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "invalid shared memory size '{input}' (e.g. 1g, 512m)"
            ))
        })
}

/// Every resource preset, oldest first.
pub async fn list<C: sea_orm::ConnectionTrait>(db: &C) -> ApiResult<Vec<presets::Model>> {
    use sea_orm::QueryOrder;
    Ok(presets::Entity::find()
        .order_by_asc(presets::Column::CreatedAt)
        .all(db)
        .await?)
}

/// Every resource preset, by name.
pub async fn list_by_name<C: sea_orm::ConnectionTrait>(db: &C) -> ApiResult<Vec<presets::Model>> {
    use sea_orm::QueryOrder;
    Ok(presets::Entity::find()
        .order_by_asc(presets::Column::Name)
        .all(db)
        .await?)
}

/// The preset called `name` (NOT_FOUND otherwise).
pub async fn find<C: sea_orm::ConnectionTrait>(db: &C, name: &str) -> ApiResult<presets::Model> {
    crate::lookup::get::<presets::Entity>(db, "resource preset", name.to_string()).await
}
