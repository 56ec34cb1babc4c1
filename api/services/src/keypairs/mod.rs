//! Keypairs: API credentials (access key + secret key) with a resource policy and rate limit.
pub mod usage;

use chrono::Utc;
use entity::enums::SessionStatus;
use entity::{keypair_resource_policies, keypairs, sessions, users};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, ModelTrait,
    PaginatorTrait, QueryFilter, Set,
};

use crate::auth::{AdminScope, Caller, SuperadminScope, tokens};
use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Store;

pub struct NewKeypair {
    pub resource_policy: String,
    pub rate_limit: i32,
    pub is_active: bool,
    pub is_admin: bool,
    /// Explicit keys (to recreate a keypair deleted by mistake); generated when None.
    pub access_key: Option<String>,
    pub secret_key: Option<String>,
}

fn check_explicit_keys(access_key: Option<&str>, secret_key: Option<&str>) -> ApiResult<()> {
    let good_ak = |ak: &str| {
        ak.len() == 20
            && ak
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    };
    let good_sk = |sk: &str| {
        sk.len() == 40
            && sk
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '-' | '_'))
    };
    if access_key.is_some_and(|ak| !good_ak(ak)) {
        return Err(ApiError::bad_request(
            "Access key must be exactly 20 upper-case letters or digits",
        ));
    }
    if secret_key.is_some_and(|sk| !good_sk(sk)) {
        return Err(ApiError::bad_request(
            "Secret key must be exactly 40 letters, digits or +/=-_ characters",
        ));
    }
    Ok(())
}

pub async fn insert<C: ConnectionTrait>(
    db: &C,
    user: &users::Model,
    new: NewKeypair,
    now: chrono::DateTime<Utc>,
) -> ApiResult<keypairs::Model> {
    check_explicit_keys(new.access_key.as_deref(), new.secret_key.as_deref())?;
    if new.rate_limit < 0 {
        return Err(ApiError::bad_request(
            "Rate limit must not be negative (0 means unlimited)",
        ));
    }
    if keypair_resource_policies::Entity::find_by_id(new.resource_policy.clone())
        .one(db)
        .await?
        .is_none()
    {
        return Err(ApiError::not_found("resource policy", &new.resource_policy));
    }
    let access_key = new.access_key.unwrap_or_else(tokens::new_access_key);
    if keypairs::Entity::find_by_id(access_key.clone())
        .one(db)
        .await?
        .is_some()
    {
        return Err(ApiError::conflict(
            "A keypair with this access key already exists",
        ));
    }
    Ok(keypairs::ActiveModel {
        access_key: Set(access_key),
        secret_key: Set(new.secret_key.unwrap_or_else(tokens::new_secret_key)),
        user_id: Set(user.email.clone()),
        user: Set(user.uuid),
        is_active: Set(new.is_active),
        is_admin: Set(new.is_admin),
        created_at: Set(now),
        modified_at: Set(now),
        last_used: Set(None),
        rate_limit: Set(new.rate_limit),
        num_queries: Set(0),
        ssh_public_key: Set(None),
        ssh_private_key: Set(None),
        resource_policy: Set(new.resource_policy),
        dotfiles: Set(None),
        bootstrap_script: Set(None),
    }
    .insert(db)
    .await?)
}

/// When an account is reactivated, its main keypair works again.
pub async fn reactivate_main<C: ConnectionTrait>(db: &C, user: &users::Model) -> ApiResult<()> {
    if let Some(ak) = &user.main_access_key
        && let Some(kp) = keypairs::Entity::find_by_id(ak.clone()).one(db).await?
    {
        let mut m: keypairs::ActiveModel = kp.into();
        m.is_active = Set(true);
        m.update(db).await?;
    }
    Ok(())
}

/// Sessions holding resources under this keypair (for `concurrency_used`).
pub async fn live_session_count<C: ConnectionTrait>(db: &C, access_key: &str) -> ApiResult<u64> {
    Ok(sessions::Entity::find()
        .filter(sessions::Column::AccessKey.eq(access_key))
        .filter(sessions::Column::Status.is_in(SessionStatus::LIVE.iter().copied()))
        .count(db)
        .await?)
}

/// A change to a keypair as a surface read it; `None` keeps the value.
#[derive(Debug, Default, Clone)]
pub struct KeypairChange {
    pub is_active: Option<bool>,
    pub is_admin: Option<bool>,
    pub resource_policy: Option<String>,
    pub rate_limit: Option<i32>,
}

/// Adds a keypair for the user with email `user_id` (superadmins only), with its audit
/// record, and announces it. Returns the keypair and its owner.
pub async fn create(
    store: &impl Store,
    scope: &SuperadminScope,
    caller: &Caller,
    user_id: &str,
    new: NewKeypair,
) -> ApiResult<(keypairs::Model, users::Model)> {
    let owner = crate::auth::visibility::user(store.db(), caller, user_id).await?;
    let now = store.clock().now();
    let kp = crate::audit::audited(
        store,
        scope.actor(),
        "create_keypair",
        "keypair",
        move |txn| {
            Box::pin(async move {
                let kp = insert(txn, &owner, new, now).await?;
                let key = kp.access_key.to_string();
                let detail = serde_json::json!({"user": owner.email});
                Ok((kp, key, detail))
            })
        },
    )
    .await?;
    let owner = crate::lookup::get::<users::Entity>(store.db(), "user", kp.user).await?;
    store.events().changed(
        ObjectKind::Keypair,
        ChangeAction::Created,
        &kp.access_key,
        Some(owner.domain_name.clone()),
    );
    Ok((kp, owner))
}

/// Changes a keypair's activity, policy or rate limit (administrators who govern its owner,
/// `find_visible`; NOT_FOUND for anyone else). Nobody changes these on their own keypair, and
/// only superadmins change whether a keypair is an admin keypair. `_scope` is the proof of
/// `Caller::require_admin`. Returns the keypair and its owner.
pub async fn modify(
    store: &impl Store,
    _scope: &AdminScope,
    caller: &Caller,
    access_key: &str,
    change: KeypairChange,
) -> ApiResult<(keypairs::Model, users::Model)> {
    let (kp, owner) = crate::auth::visibility::keypair(store.db(), caller, access_key).await?;
    if owner.uuid == caller.uuid
        && (change.is_active.is_some_and(|a| a != kp.is_active)
            || change.is_admin.is_some_and(|a| a != kp.is_admin)
            || change.rate_limit.is_some_and(|r| r != kp.rate_limit)
            || change
                .resource_policy
                .as_ref()
                .is_some_and(|p| *p != kp.resource_policy))
    {
        return Err(ApiError::forbidden(
            "You cannot change your own keypair's activity, policy or rate limit.",
        ));
    }
    if change.is_admin.is_some_and(|a| a != kp.is_admin) && !caller.is_superadmin() {
        return Err(ApiError::forbidden(
            "Only superadmins may change whether a keypair is an admin keypair.",
        ));
    }
    if let Some(rl) = change.rate_limit {
        crate::validate::non_negative_i32("rate_limit", rl)?;
    }
    if let Some(p) = &change.resource_policy
        && keypair_resource_policies::Entity::find_by_id(p.clone())
            .one(store.db())
            .await?
            .is_none()
    {
        return Err(ApiError::not_found("resource policy", p));
    }
    let now = store.clock().now();
    let kp = crate::audit::audited(
        store,
        &caller.email,
        "modify_keypair",
        "keypair",
        move |txn| {
            Box::pin(async move {
                let mut m = kp.into_active_model();
                if let Some(v) = change.is_active {
                    m.is_active = Set(v);
                }
                if let Some(v) = change.is_admin {
                    m.is_admin = Set(v);
                }
                if let Some(v) = change.resource_policy {
                    m.resource_policy = Set(v);
                }
                if let Some(v) = change.rate_limit {
                    m.rate_limit = Set(v);
                }
                m.modified_at = Set(now);
                let kp = m.update(txn).await?;
                let key = kp.access_key.to_string();
                let detail = serde_json::json!({
                    "is_active": kp.is_active,
                    "resource_policy": kp.resource_policy,
                    "rate_limit": kp.rate_limit,
                });
                Ok((kp, key, detail))
            })
        },
    )
    .await?;
    store.revocations().bump(owner.uuid);
    store.events().changed(
        ObjectKind::Keypair,
        ChangeAction::Modified,
        &kp.access_key,
        Some(owner.domain_name.clone()),
    );
    Ok((kp, owner))
}

/// Deletes a keypair for good (superadmins only). Refused while a session created with it is
/// live (as Backend.AI's manager refuses it; ended sessions keep its access key for history),
/// and for a user's main keypair.
pub async fn delete(
    store: &impl Store,
    scope: &SuperadminScope,
    caller: &Caller,
    access_key: &str,
) -> ApiResult<()> {
    let (kp, owner) = crate::auth::visibility::keypair(store.db(), caller, access_key).await?;
    let live = sessions::Entity::find()
        .filter(sessions::Column::AccessKey.eq(access_key))
        .filter(sessions::Column::Status.is_in(SessionStatus::LIVE.iter().copied()))
        .count(store.db())
        .await?;
    if live > 0 {
        return Err(ApiError::conflict(format!(
            "Keypair {access_key} cannot be deleted: {live} compute session(s) created with it are still live. Terminate them, or deactivate it instead."
        )));
    }
    if owner.main_access_key.as_deref() == Some(access_key) {
        return Err(ApiError::conflict(format!(
            "Keypair {access_key} is the main keypair of {}; deactivate it instead.",
            owner.email
        )));
    }
    crate::audit::audited(
        store,
        scope.actor(),
        "delete_keypair",
        "keypair",
        move |txn| {
            Box::pin(async move {
                let key = kp.access_key.clone();
                kp.delete(txn).await?;
                Ok(((), key, serde_json::json!({})))
            })
        },
    )
    .await?;
    store.revocations().bump(owner.uuid);
    store.events().changed(
        ObjectKind::Keypair,
        ChangeAction::Deleted,
        access_key,
        Some(owner.domain_name),
    );
    Ok(())
}

/// Keypairs the caller may list: its own, or (admins) those of the users it governs, narrowed
/// to the users of `domain_name`, the owner `email` and activity when given.
pub fn listable(
    caller: &Caller,
    domain_name: Option<String>,
    email: Option<String>,
    is_active: Option<bool>,
) -> sea_orm::Select<keypairs::Entity> {
    use sea_orm::sea_query::{Expr, Query};
    let mut select = keypairs::Entity::find();
    if let Some(sub) = crate::auth::visibility::governed(caller) {
        select = select.filter(keypairs::Column::User.in_subquery(sub));
    }
    match caller.admin_scope() {
        Some(_) => {
            if let Some(d) = domain_name {
                let domain_users = Query::select()
                    .column(users::Column::Uuid)
                    .from(users::Entity)
                    .and_where(Expr::col(users::Column::DomainName).eq(d))
                    .to_owned();
                select = select.filter(keypairs::Column::User.in_subquery(domain_users));
            }
            if let Some(e) = email {
                select = select.filter(keypairs::Column::UserId.eq(e.trim().to_ascii_lowercase()));
            }
        }
        None => select = select.filter(keypairs::Column::User.eq(caller.uuid)),
    }
    if let Some(a) = is_active {
        select = select.filter(keypairs::Column::IsActive.eq(a));
    }
    select
}

/// The resource policy of each user's main keypair, by access key (one query for a page).
pub async fn main_policies<C: ConnectionTrait>(
    db: &C,
    owners: &[users::Model],
) -> ApiResult<std::collections::HashMap<String, String>> {
    let keys: Vec<String> = owners
        .iter()
        .filter_map(|u| u.main_access_key.clone())
        .collect();
    Ok(keypairs::Entity::find()
        .filter(keypairs::Column::AccessKey.is_in(keys))
        .all(db)
        .await?
        .into_iter()
        .map(|k| (k.access_key, k.resource_policy))
        .collect())
}

/// The keypair a password login hands out: the user's main one if active, else its oldest
/// active one; None without an active keypair.
pub async fn preferred<C: ConnectionTrait>(
    db: &C,
    user: &users::Model,
) -> ApiResult<Option<keypairs::Model>> {
    use sea_orm::QueryOrder;
    let mut keys = keypairs::Entity::find()
        .filter(keypairs::Column::User.eq(user.uuid))
        .filter(keypairs::Column::IsActive.eq(true))
        .order_by_asc(keypairs::Column::CreatedAt)
        .all(db)
        .await?;
    let pick = keys
        .iter()
        .position(|k| Some(&k.access_key) == user.main_access_key.as_ref())
        .unwrap_or(0);
    if keys.is_empty() {
        return Ok(None);
    }
    Ok(Some(keys.swap_remove(pick)))
}
