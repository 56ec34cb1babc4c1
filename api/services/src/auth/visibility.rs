//! Who may see which users and keypairs: a superadmin everyone; a domain admin itself and the
//! lower-ranked users of its domain (`Caller::governs`) and their keypairs; anyone else itself.
//! A stranger's account or keypair is NOT_FOUND, so nobody learns what they may not see. The
//! lists of users, keypairs, sessions and statistics narrow by `governed`, its SQL form.
use entity::{keypairs, users};
use sea_orm::sea_query::{Expr, Query as SqlQuery};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Select};

use super::caller::{AdminScope, Caller};
use crate::error::{ApiError, ApiResult};

/// Users an administrator may see: all for a superadmin; for a domain admin itself and the
/// lower-ranked users of its domain (role order, `Caller::governs`).
pub fn users(caller: &Caller) -> Select<users::Entity> {
    match governed(caller) {
        Some(sub) => users::Entity::find().filter(users::Column::Uuid.in_subquery(sub)),
        None => users::Entity::find(),
    }
}

/// The UUIDs of the users whose things `caller` governs, as a subquery; None = everyone
/// (superadmin). The one SQL form of `Caller::governs`, for lists of users, keypairs and
/// sessions.
pub fn governed(caller: &Caller) -> Option<sea_orm::sea_query::SelectStatement> {
    let mut q = SqlQuery::select();
    q.column(users::Column::Uuid).from(users::Entity);
    match caller.admin_scope() {
        Some(AdminScope::Super) => return None,
        Some(AdminScope::Domain(d)) => {
            q.and_where(Expr::col(users::Column::DomainName).eq(d));
            q.cond_where(
                sea_orm::Condition::any()
                    .add(Expr::col(users::Column::Uuid).eq(caller.uuid))
                    .add(
                        Expr::col(users::Column::Role).is_in(
                            super::caller::GOVERNED_BY_DOMAIN_ADMINS
                                .iter()
                                .map(|r| r.as_str()),
                        ),
                    ),
            );
        }
        None => {
            q.and_where(Expr::col(users::Column::Uuid).eq(caller.uuid));
        }
    }
    Some(q.to_owned())
}

/// The user with `email` if the caller may see it (itself, or an admin of its domain);
/// NOT_FOUND otherwise, so nobody learns about accounts they may not see.
pub async fn user<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
    email: &str,
) -> ApiResult<users::Model> {
    let email = email.trim().to_ascii_lowercase();
    let user = users::Entity::find()
        .filter(users::Column::Email.eq(&email))
        .one(db)
        .await?;
    match user {
        Some(u) if caller.governs(u.uuid, u.role, &u.domain_name) => Ok(u),
        _ => Err(ApiError::not_found("user", email)),
    }
}

/// The keypair if the caller may see it: its owner, or an admin of the owner's domain.
pub async fn keypair<C: ConnectionTrait>(
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
