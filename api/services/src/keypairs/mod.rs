//! Keypairs: API credentials (access key + secret key) with a resource policy and rate limit.
pub mod usage;

use chrono::Utc;
use entity::enums::SessionStatus;
use entity::{keypair_resource_policies, keypairs, sessions, users};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, Set,
};

use crate::auth::{Caller, tokens};
use crate::error::{ApiError, ApiResult};

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
    let now = Utc::now();
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

/// The keypair if the caller may see it: its owner, or an admin of the owner's domain.
pub async fn find_visible<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
    access_key: &str,
) -> ApiResult<(keypairs::Model, users::Model)> {
    let not_found = || ApiError::not_found("keypair", access_key);
    let kp = keypairs::Entity::find_by_id(access_key.to_string())
        .one(db)
        .await?
        .ok_or_else(not_found)?;
    let owner = users::Entity::find_by_id(kp.user)
        .one(db)
        .await?
        .ok_or_else(not_found)?;
    if caller.governs(owner.uuid, owner.role, &owner.domain_name) {
        Ok((kp, owner))
    } else {
        Err(not_found())
    }
}

/// Sessions holding resources under this keypair (for `concurrency_used`).
pub async fn live_session_count<C: ConnectionTrait>(db: &C, access_key: &str) -> ApiResult<u64> {
    Ok(sessions::Entity::find()
        .filter(sessions::Column::AccessKey.eq(access_key))
        .filter(sessions::Column::Status.is_not_in([
            SessionStatus::Terminated,
            SessionStatus::Cancelled,
            SessionStatus::Error,
        ]))
        .count(db)
        .await?)
}

/// Any session ever created with this keypair (its history keeps the key referenced).
pub async fn used_by_sessions<C: ConnectionTrait>(db: &C, access_key: &str) -> ApiResult<u64> {
    Ok(sessions::Entity::find()
        .filter(sessions::Column::AccessKey.eq(access_key))
        .count(db)
        .await?)
}
