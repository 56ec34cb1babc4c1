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

#[cfg(test)]
mod tests {
    use entity::enums::UserRole;

    use crate::testing::world;

    #[tokio::test]
    async fn strangers_are_not_found_and_domain_admins_see_only_whom_they_govern() {
        let w = world().await;
        let db = &w.state.db;
        let admin = w.user("da@a.test", UserRole::Admin, "alpha").await;
        let mine = w.user("u@a.test", UserRole::User, "alpha").await;
        let peer = w.user("da2@a.test", UserRole::Admin, "alpha").await;
        let other = w.user("u@b.test", UserRole::User, "beta").await;
        let key = |c: &crate::auth::Caller| c.access_key.clone().unwrap();

        // A domain admin: itself and the lower-ranked users of its domain, and their keypairs.
        assert!(super::user(db, &admin, "u@a.test").await.is_ok());
        assert!(super::keypair(db, &admin, &key(&mine)).await.is_ok());
        for (email, kp) in [("da2@a.test", key(&peer)), ("u@b.test", key(&other))] {
            let e = super::user(db, &admin, email).await.unwrap_err();
            assert_eq!(e.code, crate::error::ErrorCode::NotFound, "{email}");
            let e = super::keypair(db, &admin, &kp).await.unwrap_err();
            assert_eq!(
                e.code,
                crate::error::ErrorCode::NotFound,
                "{email}'s keypair"
            );
        }
        let e = super::user(db, &admin, &w.admin.email).await.unwrap_err();
        assert_eq!(e.code, crate::error::ErrorCode::NotFound, "the superadmin");
        // A user: only itself, and a stranger's account looks like one that does not exist.
        assert!(super::user(db, &mine, "U@A.test").await.is_ok());
        let stranger = super::user(db, &mine, "u@b.test").await.unwrap_err();
        let missing = super::user(db, &mine, "nobody@a.test").await.unwrap_err();
        assert_eq!(stranger.code, missing.code);
        // The superadmin: everyone. The lists narrow by the same rule.
        assert!(super::user(db, &w.admin, "u@b.test").await.is_ok());
        let listed: Vec<String> = super::users(&admin)
            .all(db)
            .await
            .unwrap()
            .into_iter()
            .map(|u| u.email)
            .collect();
        assert_eq!(listed.len(), 2, "{listed:?}");
        assert!(
            listed.contains(&"da@a.test".to_string()) && listed.contains(&"u@a.test".to_string())
        );
    }
}
