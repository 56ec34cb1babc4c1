//! Keypair resource policies: what a keypair may allocate (CPU, RAM, GPU, fGPU, each
//! possibly unlimited), how many sessions and containers, idle timeout, storage hosts and
//! folder limits.

use entity::enums::DefaultForUnspecified;
use entity::slots::{ResourceLimits, SlotLimit};
use entity::{keypair_resource_policies, keypairs};
use rust_decimal::Decimal;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, ModelTrait, PaginatorTrait,
    QueryFilter, Set,
};
use serde_json::{Value, json};

use crate::auth::{Caller, SuperadminScope};
use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Store;
use crate::validate::{non_negative, non_negative_i32};

/// Backend.AI's storage-host permissions; a host listed without permissions gets all.
pub const HOST_PERMISSIONS: &[&str] = &[
    "create-vfolder",
    "modify-vfolder",
    "delete-vfolder",
    "mount-in-session",
    "upload-file",
    "download-file",
    "invite-others",
    "set-user-specific-permission",
];

/// Accepts `["local", "nfs"]` or `{"local": ["create-vfolder", …]}` and returns the object form.
pub fn normalize_allowed_hosts(value: &Value) -> ApiResult<Value> {
    let all = || Value::from(HOST_PERMISSIONS.to_vec());
    let mut out = serde_json::Map::new();
    let check_host = |h: &str| -> ApiResult<()> {
        if h.trim().is_empty() || h.len() > 128 {
            Err(ApiError::bad_request(
                "Storage host names must be 1 to 128 characters",
            ))
        } else {
            Ok(())
        }
    };
    match value {
        Value::Array(hosts) => {
            for h in hosts {
                let h = h.as_str().ok_or_else(|| {
                    ApiError::bad_request("allowed_vfolder_hosts: host names must be strings")
                })?;
                check_host(h)?;
                out.insert(h.to_string(), all());
            }
        }
        Value::Object(map) => {
            for (h, perms) in map {
                check_host(h)?;
                let perms = match perms {
                    Value::Array(p) if p.is_empty() => all(),
                    Value::Array(p) => {
                        for perm in p {
                            let s = perm.as_str().unwrap_or("");
                            if !HOST_PERMISSIONS.contains(&s) {
                                return Err(ApiError::bad_request(format!(
                                    "unknown storage host permission '{perm}' (one of: {})",
                                    HOST_PERMISSIONS.join(", ")
                                )));
                            }
                        }
                        Value::Array(p.clone())
                    }
                    Value::Null => all(),
                    _ => {
                        return Err(ApiError::bad_request(
                            "allowed_vfolder_hosts: permissions must be a list",
                        ));
                    }
                };
                out.insert(h.clone(), perms);
            }
        }
        Value::Null => {}
        _ => {
            return Err(ApiError::bad_request(
                "allowed_vfolder_hosts must be a list of hosts or an object {host: [permissions]}",
            ));
        }
    }
    Ok(Value::Object(out))
}

/// What unspecified slots are limited to under this policy.
pub fn unspecified_limit(p: &keypair_resource_policies::Model) -> SlotLimit {
    match p.default_for_unspecified {
        DefaultForUnspecified::Limited => SlotLimit::Limited(Decimal::ZERO),
        DefaultForUnspecified::Unlimited => SlotLimit::Unlimited,
    }
}

pub fn parse_limits(value: &Value) -> ApiResult<ResourceLimits> {
    Ok(ResourceLimits::parse_json(value)?)
}

/// The `default` policy seeded on first start: unlimited resources, 30 concurrent sessions,
/// 10 folders on the `local` host (the seeds' example row).
pub fn default_policy_values() -> (ResourceLimits, Value) {
    (
        ResourceLimits::default(),
        json!({ "local": HOST_PERMISSIONS }),
    )
}

fn parse_default(s: &str) -> ApiResult<DefaultForUnspecified> {
    DefaultForUnspecified::parse(s).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid default_for_unspecified '{s}' (one of: {})",
            DefaultForUnspecified::choices()
        ))
    })
}

/// A change to a keypair resource policy as a surface read it; `None` keeps the value. Each
/// value is checked here (limits, non-negative counts and durations, storage hosts).
#[derive(Debug, Default, Clone)]
pub struct PolicyChange {
    pub default_for_unspecified: Option<String>,
    pub total_resource_slots: Option<Value>,
    pub max_session_lifetime: Option<i64>,
    pub max_concurrent_sessions: Option<i32>,
    pub max_containers_per_session: Option<i32>,
    pub max_pending_session_count: Option<i32>,
    pub idle_timeout: Option<i64>,
    pub idle_utilization_pct: Option<i32>,
    pub idle_utilization_secs: Option<i64>,
    pub allowed_vfolder_hosts: Option<Value>,
    pub max_vfolder_count: Option<i32>,
    pub max_vfolder_size: Option<i64>,
    pub max_customized_image_count: Option<i32>,
    pub max_session_count_per_model_session: Option<i32>,
}

/// Replicas one model-serving endpoint may keep, by default (Backend.AI's).
pub const DEFAULT_MAX_REPLICAS: i32 = 10;

/// The shortest window of the utilization rule, seconds.
pub const MIN_UTILIZATION_WINDOW_SECS: i64 = 60;

/// Applies `c` onto `m`, validating each value.
fn apply(m: &mut keypair_resource_policies::ActiveModel, c: PolicyChange) -> ApiResult<()> {
    if let Some(v) = c.default_for_unspecified {
        m.default_for_unspecified = Set(parse_default(&v)?);
    }
    if let Some(v) = c.total_resource_slots {
        m.total_resource_slots = Set(parse_limits(&v)?);
    }
    if let Some(v) = c.max_session_lifetime {
        m.max_session_lifetime = Set(non_negative("max_session_lifetime", v)?);
    }
    if let Some(v) = c.max_concurrent_sessions {
        m.max_concurrent_sessions = Set(non_negative_i32("max_concurrent_sessions", v)?);
    }
    if let Some(v) = c.max_containers_per_session {
        m.max_containers_per_session = Set(non_negative_i32("max_containers_per_session", v)?);
    }
    if let Some(v) = c.max_pending_session_count {
        m.max_pending_session_count = Set(Some(non_negative_i32("max_pending_session_count", v)?));
    }
    if let Some(v) = c.idle_timeout {
        m.idle_timeout = Set(non_negative("idle_timeout", v)?);
    }
    if let Some(v) = c.idle_utilization_pct {
        if !(0..=100).contains(&v) {
            return Err(ApiError::bad_request(
                "idle_utilization_pct is a percentage: 0 (no rule) to 100",
            ));
        }
        m.idle_utilization_pct = Set(v);
    }
    if let Some(v) = c.idle_utilization_secs {
        m.idle_utilization_secs = Set(non_negative("idle_utilization_secs", v)?);
    }
    // Samples come every 10 s: a rule judges a window of several, never one.
    let pct = match &m.idle_utilization_pct {
        Set(v) | sea_orm::ActiveValue::Unchanged(v) => *v,
        sea_orm::ActiveValue::NotSet => 0,
    };
    let secs = match &m.idle_utilization_secs {
        Set(v) | sea_orm::ActiveValue::Unchanged(v) => *v,
        sea_orm::ActiveValue::NotSet => 0,
    };
    if pct > 0 && secs < MIN_UTILIZATION_WINDOW_SECS {
        return Err(ApiError::bad_request(format!(
            "idle_utilization_secs must be at least {MIN_UTILIZATION_WINDOW_SECS} when idle_utilization_pct is set"
        )));
    }
    if let Some(v) = c.allowed_vfolder_hosts {
        m.allowed_vfolder_hosts = Set(normalize_allowed_hosts(&v)?);
    }
    if let Some(v) = c.max_vfolder_count {
        m.max_vfolder_count = Set(non_negative_i32("max_vfolder_count", v)?);
    }
    if let Some(v) = c.max_vfolder_size {
        m.max_vfolder_size = Set(non_negative("max_vfolder_size", v)?);
    }
    if let Some(v) = c.max_customized_image_count {
        m.max_customized_image_count = Set(non_negative_i32("max_customized_image_count", v)?);
    }
    if let Some(v) = c.max_session_count_per_model_session {
        m.max_session_count_per_model_session =
            Set(non_negative_i32("max_session_count_per_model_session", v)?);
    }
    Ok(())
}

/// Creates keypair resource policy `name` (superadmins only): `default_for_unspecified`
/// (LIMITED or UNLIMITED), then `change` over the defaults (its `default_for_unspecified` is
/// not read); every value is checked before the name's uniqueness.
pub async fn create(
    store: &impl Store,
    scope: &SuperadminScope,
    name: &str,
    default_for_unspecified: &str,
    change: PolicyChange,
) -> ApiResult<keypair_resource_policies::Model> {
    let name = crate::validate::object_name("resource policy", name)?;
    let (_, default_hosts) = default_policy_values();
    let mut m = keypair_resource_policies::ActiveModel {
        name: Set(name.clone()),
        created_at: Set(store.clock().now()),
        default_for_unspecified: Set(parse_default(default_for_unspecified)?),
        total_resource_slots: Set(Default::default()),
        max_session_lifetime: Set(0),
        max_concurrent_sessions: Set(0),
        max_containers_per_session: Set(1),
        max_pending_session_count: Set(None),
        idle_timeout: Set(0),
        idle_utilization_pct: Set(0),
        idle_utilization_secs: Set(0),
        allowed_vfolder_hosts: Set(default_hosts),
        max_vfolder_count: Set(10),
        max_vfolder_size: Set(0),
        max_customized_image_count: Set(3),
        max_session_count_per_model_session: Set(DEFAULT_MAX_REPLICAS),
    };
    apply(
        &mut m,
        PolicyChange {
            default_for_unspecified: None,
            ..change
        },
    )?;
    if keypair_resource_policies::Entity::find_by_id(name.clone())
        .one(store.db())
        .await?
        .is_some()
    {
        return Err(ApiError::conflict(format!(
            "Resource policy '{name}' already exists"
        )));
    }
    let p = crate::audit::audited(
        store,
        scope.actor(),
        "create_keypair_resource_policy",
        "resource_policy",
        move |txn| {
            Box::pin(async move {
                let p = m.insert(txn).await?;
                let key = p.name.to_string();
                let detail = json!({});
                Ok((p, key, detail))
            })
        },
    )
    .await?;
    store.events().changed(
        ObjectKind::KeypairResourcePolicy,
        ChangeAction::Created,
        &p.name,
        None,
    );
    Ok(p)
}

/// Changes keypair resource policy `name` (superadmins only).
pub async fn modify(
    store: &impl Store,
    scope: &SuperadminScope,
    name: &str,
    change: PolicyChange,
) -> ApiResult<keypair_resource_policies::Model> {
    let existing = crate::lookup::get::<keypair_resource_policies::Entity>(
        store.db(),
        "resource policy",
        name.to_string(),
    )
    .await?;
    let mut m = existing.into_active_model();
    apply(&mut m, change)?;
    let p = crate::audit::audited(
        store,
        scope.actor(),
        "modify_keypair_resource_policy",
        "resource_policy",
        move |txn| {
            Box::pin(async move {
                let p = m.update(txn).await?;
                let key = p.name.to_string();
                let detail = json!({});
                Ok((p, key, detail))
            })
        },
    )
    .await?;
    store.events().changed(
        ObjectKind::KeypairResourcePolicy,
        ChangeAction::Modified,
        &p.name,
        None,
    );
    Ok(p)
}

/// Deletes keypair resource policy `name` (superadmins only); refused while any keypair
/// uses it.
pub async fn delete(store: &impl Store, scope: &SuperadminScope, name: &str) -> ApiResult<()> {
    let existing = crate::lookup::get::<keypair_resource_policies::Entity>(
        store.db(),
        "resource policy",
        name.to_string(),
    )
    .await?;
    let users = keypairs::Entity::find()
        .filter(keypairs::Column::ResourcePolicy.eq(name))
        .count(store.db())
        .await?;
    if users > 0 {
        return Err(ApiError::conflict(format!(
            "Resource policy '{name}' is used by {users} keypair(s); assign them another policy first."
        )));
    }
    crate::audit::audited(
        store,
        scope.actor(),
        "delete_keypair_resource_policy",
        "resource_policy",
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
        ObjectKind::KeypairResourcePolicy,
        ChangeAction::Deleted,
        name,
        None,
    );
    Ok(())
}

/// The resource policy of the caller's keypair.
pub async fn of_caller(
    store: &impl Store,
    caller: &Caller,
) -> ApiResult<keypair_resource_policies::Model> {
    let ak = caller
        .access_key
        .clone()
        .ok_or_else(|| ApiError::bad_request("This account has no keypair"))?;
    let kp = crate::lookup::get::<keypairs::Entity>(store.read(), "keypair", ak).await?;
    crate::lookup::get::<keypair_resource_policies::Entity>(
        store.read(),
        "resource policy",
        kp.resource_policy,
    )
    .await
}

/// The policy called `name`, if there is one.
pub async fn find<C: sea_orm::ConnectionTrait>(
    db: &C,
    name: &str,
) -> ApiResult<Option<keypair_resource_policies::Model>> {
    Ok(
        keypair_resource_policies::Entity::find_by_id(name.to_string())
            .one(db)
            .await?,
    )
}

/// The names of the policies of the caller's keypairs.
async fn own_names<C: sea_orm::ConnectionTrait>(db: &C, caller: &Caller) -> ApiResult<Vec<String>> {
    Ok(keypairs::Entity::find()
        .filter(keypairs::Column::User.eq(caller.uuid))
        .all(db)
        .await?
        .into_iter()
        .map(|k| k.resource_policy)
        .collect())
}

/// The name of the policy of the keypair authenticating the caller (NOT_FOUND without one).
pub async fn name_of_caller<C: sea_orm::ConnectionTrait>(
    db: &C,
    caller: &Caller,
) -> ApiResult<String> {
    let ak = caller.access_key.clone().unwrap_or_default();
    keypairs::Entity::find_by_id(ak)
        .one(db)
        .await?
        .map(|k| k.resource_policy)
        .ok_or_else(|| ApiError::not_found("resource policy", "(caller)"))
}

/// Policy `name` if the caller may read it: an admin any, anyone else only its keypairs'
/// (NOT_FOUND otherwise).
pub async fn find_visible<C: sea_orm::ConnectionTrait>(
    db: &C,
    caller: &Caller,
    name: String,
) -> ApiResult<keypair_resource_policies::Model> {
    if caller.admin_scope().is_none() && !own_names(db, caller).await?.contains(&name) {
        return Err(ApiError::not_found("resource policy", &name));
    }
    crate::lookup::get::<keypair_resource_policies::Entity>(db, "resource policy", name).await
}

/// The policies the caller may read, by name: an admin all, anyone else its keypairs'.
pub async fn visible<C: sea_orm::ConnectionTrait>(
    db: &C,
    caller: &Caller,
) -> ApiResult<Vec<keypair_resource_policies::Model>> {
    use sea_orm::QueryOrder;
    let mut select = keypair_resource_policies::Entity::find()
        .order_by_asc(keypair_resource_policies::Column::Name);
    if caller.admin_scope().is_none() {
        select = select
            .filter(keypair_resource_policies::Column::Name.is_in(own_names(db, caller).await?));
    }
    Ok(select.all(db).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_normalize() {
        let v = normalize_allowed_hosts(&json!(["local"])).unwrap();
        assert_eq!(v["local"].as_array().unwrap().len(), HOST_PERMISSIONS.len());
        let v = normalize_allowed_hosts(&json!({"local": ["upload-file"]})).unwrap();
        assert_eq!(v, json!({"local": ["upload-file"]}));
        assert!(normalize_allowed_hosts(&json!({"local": ["fly"]})).is_err());
        assert!(normalize_allowed_hosts(&json!("local")).is_err());
        assert!(normalize_allowed_hosts(&json!([""])).is_err());
    }
}
