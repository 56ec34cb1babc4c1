//! Groups (projects): sessions belong to one, users belong to several within their domain.

use entity::{association_groups_users, groups};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};

pub async fn is_member<C: ConnectionTrait>(db: &C, user: Uuid, group: Uuid) -> ApiResult<bool> {
    Ok(association_groups_users::Entity::find()
        .filter(association_groups_users::Column::UserId.eq(user))
        .filter(association_groups_users::Column::GroupId.eq(group))
        .one(db)
        .await?
        .is_some())
}

/// The group if the caller may see it: a member, or an admin of its domain.
pub async fn find_visible<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
    id: Uuid,
) -> ApiResult<groups::Model> {
    let g = crate::lookup::get::<groups::Entity>(db, "group", id).await?;
    let admin = caller
        .admin_scope()
        .is_some_and(|s| s.covers_domain(&g.domain_name));
    if admin || is_member(db, caller.uuid, id).await? {
        Ok(g)
    } else {
        Err(ApiError::not_found("group", id))
    }
}
