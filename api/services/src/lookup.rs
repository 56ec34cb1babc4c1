//! Fetching one row by primary key, or NOT_FOUND naming what was looked for.
use std::fmt::Display;

use sea_orm::{ConnectionTrait, EntityTrait, PrimaryKeyTrait};

use crate::error::{ApiError, ApiResult};

/// `get::<presets::Entity>(db, "resource preset", name)`.
pub async fn get<E: EntityTrait>(
    db: &impl ConnectionTrait,
    what: &str,
    key: impl Into<<E::PrimaryKey as PrimaryKeyTrait>::ValueType> + Display + Clone,
) -> ApiResult<E::Model> {
    E::find_by_id(key.clone())
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found(what, key))
}
