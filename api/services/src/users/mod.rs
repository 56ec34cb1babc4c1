//! User accounts: creation (always with a main keypair), modification, deactivation. Users
//! are never deleted, as the seeds require.

use chrono::Utc;
use entity::enums::{UserRole, UserStatus};
use entity::{
    association_groups_users, domains, groups, keypair_resource_policies, keypairs, login_sessions,
    users,
};
use sea_orm::sea_query::{Expr, Query as SqlQuery};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Select, Set,
};
use uuid::Uuid;

use crate::auth::{AdminScope, Caller};
use crate::error::{ApiError, ApiResult};

pub struct NewUser {
    pub email: String,
    pub username: String,
    pub password_hash: String,
    pub need_password_change: bool,
    pub full_name: Option<String>,
    pub description: Option<String>,
    pub status: UserStatus,
    pub domain_name: String,
    pub role: UserRole,
    /// Empty = the domain's `default` group, if there is one.
    pub group_ids: Vec<Uuid>,
    pub resource_policy: String,
    pub rate_limit: i32,
}

/// Inserts a user, its main keypair and its group memberships. Run inside a transaction.
pub async fn create<C: ConnectionTrait>(
    db: &C,
    new: NewUser,
) -> ApiResult<(users::Model, keypairs::Model)> {
    let email = crate::validate::email(&new.email)?;
    let username = crate::validate::username(&new.username)?;
    if domains::Entity::find_by_id(new.domain_name.clone())
        .one(db)
        .await?
        .is_none()
    {
        return Err(ApiError::not_found("domain", &new.domain_name));
    }
    if keypair_resource_policies::Entity::find_by_id(new.resource_policy.clone())
        .one(db)
        .await?
        .is_none()
    {
        return Err(ApiError::not_found("resource policy", &new.resource_policy));
    }
    if users::Entity::find()
        .filter(users::Column::Email.eq(&email))
        .one(db)
        .await?
        .is_some()
    {
        return Err(ApiError::conflict(format!(
            "A user with email '{email}' already exists"
        )));
    }
    if users::Entity::find()
        .filter(users::Column::Username.eq(&username))
        .one(db)
        .await?
        .is_some()
    {
        return Err(ApiError::conflict(format!(
            "The user name '{username}' is already taken"
        )));
    }
    let group_ids = if new.group_ids.is_empty() {
        groups::Entity::find()
            .filter(groups::Column::DomainName.eq(&new.domain_name))
            .filter(groups::Column::Name.eq("default"))
            .one(db)
            .await?
            .map(|g| vec![g.id])
            .unwrap_or_default()
    } else {
        new.group_ids.clone()
    };
    check_groups_in_domain(db, &group_ids, &new.domain_name).await?;

    let now = Utc::now();
    let user = users::ActiveModel {
        uuid: Set(Uuid::new_v4()),
        username: Set(username),
        email: Set(email),
        password: Set(new.password_hash),
        need_password_change: Set(new.need_password_change),
        full_name: Set(new.full_name),
        description: Set(new.description),
        status: Set(new.status),
        status_info: Set(None),
        created_at: Set(now),
        modified_at: Set(now),
        password_changed_at: Set(Some(now)),
        domain_name: Set(new.domain_name),
        role: Set(new.role),
        allowed_client_ip: Set(None),
        main_access_key: Set(None),
    }
    .insert(db)
    .await?;
    let is_admin = matches!(new.role, UserRole::Superadmin | UserRole::Admin);
    let keypair = crate::keypairs::insert(
        db,
        &user,
        crate::keypairs::NewKeypair {
            resource_policy: new.resource_policy,
            rate_limit: new.rate_limit,
            is_active: true,
            is_admin,
            access_key: None,
            secret_key: None,
        },
    )
    .await?;
    let mut active: users::ActiveModel = user.into();
    active.main_access_key = Set(Some(keypair.access_key.clone()));
    let user = active.update(db).await?;
    set_groups(db, user.uuid, &group_ids).await?;
    Ok((user, keypair))
}

/// All `group_ids` must exist and belong to `domain`.
pub async fn check_groups_in_domain<C: ConnectionTrait>(
    db: &C,
    group_ids: &[Uuid],
    domain: &str,
) -> ApiResult<()> {
    for gid in group_ids {
        match groups::Entity::find_by_id(*gid).one(db).await? {
            Some(g) if g.domain_name == domain => {}
            _ => return Err(ApiError::not_found("group", gid)),
        }
    }
    Ok(())
}

/// Replaces the user's group memberships.
pub async fn set_groups<C: ConnectionTrait>(
    db: &C,
    user: Uuid,
    group_ids: &[Uuid],
) -> ApiResult<()> {
    association_groups_users::Entity::delete_many()
        .filter(association_groups_users::Column::UserId.eq(user))
        .exec(db)
        .await?;
    for gid in group_ids {
        association_groups_users::ActiveModel {
            user_id: Set(user),
            group_id: Set(*gid),
        }
        .insert(db)
        .await?;
    }
    Ok(())
}

/// Deactivation: the account can no longer log in, its keypairs stop working and its login
/// sessions end. Nothing is deleted.
pub async fn deactivate<C: ConnectionTrait>(db: &C, user: Uuid) -> ApiResult<()> {
    keypairs::Entity::update_many()
        .col_expr(keypairs::Column::IsActive, Expr::value(false))
        .filter(keypairs::Column::User.eq(user))
        .exec(db)
        .await?;
    revoke_login_sessions(db, user).await
}

pub async fn revoke_login_sessions<C: ConnectionTrait>(db: &C, user: Uuid) -> ApiResult<()> {
    login_sessions::Entity::delete_many()
        .filter(login_sessions::Column::UserUuid.eq(user))
        .exec(db)
        .await?;
    Ok(())
}

/// Users an administrator may see: all for a superadmin; for a domain admin itself and the
/// lower-ranked users of its domain (role order, `Caller::governs`).
pub fn visible_to(caller: &Caller) -> Select<users::Entity> {
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
                            crate::auth::caller::GOVERNED_BY_DOMAIN_ADMINS
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

/// Narrows a user query to members of `group`.
pub fn in_group(select: Select<users::Entity>, group: Uuid) -> Select<users::Entity> {
    select.filter(
        users::Column::Uuid.in_subquery(
            SqlQuery::select()
                .column(association_groups_users::Column::UserId)
                .from(association_groups_users::Entity)
                .and_where(Expr::col(association_groups_users::Column::GroupId).eq(group))
                .to_owned(),
        ),
    )
}

/// The user with `email` if the caller may see it (itself, or an admin of its domain);
/// NOT_FOUND otherwise, so nobody learns about accounts they may not see.
pub async fn find_visible<C: ConnectionTrait>(
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

pub async fn by_uuid<C: ConnectionTrait>(db: &C, uuid: Uuid) -> ApiResult<users::Model> {
    crate::lookup::get::<users::Entity>(db, "user", uuid).await
}
