//! User accounts: creation (always with a main keypair), modification, deactivation. Users
//! are never deleted, as the seeds require.

use chrono::Utc;
use entity::enums::{UserRole, UserStatus};
use entity::{
    association_groups_users, domains, groups, keypair_resource_policies, keypairs, users,
};
use sea_orm::sea_query::{Expr, Query as SqlQuery};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, QueryFilter,
    Select, Set,
};
use uuid::Uuid;

use crate::auth::{AdminScope, Caller, SuperadminScope, password};
use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Store;

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
    now: chrono::DateTime<Utc>,
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
        preferred_ssh_port: Set(None),
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
        now,
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
    // Announced after the change commits: `modify_user` ends a deactivated account's logins
    // again there and announces that.
    let _ = crate::auth::logins::end(db, user, None).await?;
    Ok(())
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

/// The e-mail addresses of these users (those that exist), in one query: a list's rows ask
/// for theirs together (GraphQL's batched loader). At most as many as `ids`.
pub async fn emails_of<C: ConnectionTrait>(
    db: &C,
    ids: &[Uuid],
) -> ApiResult<std::collections::HashMap<Uuid, String>> {
    Ok(users::Entity::find()
        .filter(users::Column::Uuid.is_in(ids.iter().copied()))
        .all(db)
        .await?
        .into_iter()
        .map(|u| (u.uuid, u.email))
        .collect())
}

pub async fn by_uuid<C: ConnectionTrait>(db: &C, uuid: Uuid) -> ApiResult<users::Model> {
    crate::lookup::get::<users::Entity>(db, "user", uuid).await
}

/// A user status by name (BAD_REQUEST naming the choices otherwise).
pub fn parse_status(s: &str) -> ApiResult<UserStatus> {
    UserStatus::parse(s).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid user status '{s}' (one of: {})",
            UserStatus::choices()
        ))
    })
}

/// A role by name (BAD_REQUEST naming the choices otherwise).
pub fn parse_role(s: &str) -> ApiResult<UserRole> {
    UserRole::parse(s).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid role '{s}' (one of: {})",
            UserRole::choices()
        ))
    })
}

/// A new account as a surface read it. Role and status are names, checked here (`parse_role`,
/// `parse_status`); the password is checked against the rules and hashed here.
pub struct UserCreation {
    pub username: String,
    pub password: String,
    pub need_password_change: bool,
    pub domain_name: String,
    pub full_name: Option<String>,
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub status: Option<String>,
    pub role: Option<String>,
    pub group_ids: Option<Vec<Uuid>>,
    /// Resource policy of the user's main keypair (default: `default`).
    pub resource_policy: Option<String>,
}

/// A change to an account as a surface read it; `None` keeps the value. `group_ids` replaces
/// the user's projects.
#[derive(Default)]
pub struct UserChange {
    pub username: Option<String>,
    pub password: Option<String>,
    pub need_password_change: Option<bool>,
    pub full_name: Option<String>,
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub status: Option<String>,
    pub role: Option<String>,
    pub group_ids: Option<Vec<Uuid>>,
}

/// Creates the user `email` with a main keypair (superadmins only), with its audit record,
/// and announces it.
pub async fn create_user(
    store: &impl Store,
    scope: &SuperadminScope,
    email: String,
    props: UserCreation,
) -> ApiResult<users::Model> {
    password::validate_set_by_admin(&props.password, store.config().password_rule_for_admins)?;
    let role = props
        .role
        .as_deref()
        .map(parse_role)
        .transpose()?
        .unwrap_or(UserRole::User);
    let status = match (props.status.as_deref(), props.is_active) {
        (Some(s), _) => parse_status(s)?,
        (None, Some(false)) => UserStatus::Inactive,
        (None, _) => UserStatus::Active,
    };
    let password_hash = password::hash(&props.password).await?;
    let rate_limit = if matches!(role, UserRole::Superadmin | UserRole::Admin) {
        store.config().admin_rate_limit
    } else {
        store.config().default_rate_limit
    };
    let new = NewUser {
        email,
        username: props.username,
        password_hash,
        need_password_change: props.need_password_change,
        full_name: props.full_name,
        description: props.description,
        status,
        domain_name: props.domain_name,
        role,
        group_ids: props.group_ids.unwrap_or_default(),
        resource_policy: props.resource_policy.unwrap_or_else(|| "default".into()),
        rate_limit: i32::try_from(rate_limit).unwrap_or(i32::MAX),
    };
    let now = store.clock().now();
    let user = crate::audit::audited(store, scope.actor(), "create_user", "user", move |txn| {
        Box::pin(async move {
            let (user, _) = create(txn, new, now).await?;
            let key = user.email.to_string();
            let detail =
                serde_json::json!({"role": user.role.as_str(), "domain": user.domain_name});
            Ok((user, key, detail))
        })
    })
    .await?;
    store.events().changed(
        ObjectKind::User,
        ChangeAction::Created,
        &user.email,
        Some(user.domain_name.clone()),
    );
    Ok(user)
}

/// Modifies the user `email`. Superadmins may change anything; domain admins may change the
/// users they govern (`find_visible`; NOT_FOUND for others) but not roles, and may not
/// deactivate anyone. A deactivation ends the account's keypairs and login sessions; a
/// reset password or a new role ends its login sessions too.
pub async fn modify_user(
    store: &impl Store,
    scope: &AdminScope,
    caller: &Caller,
    email: &str,
    props: UserChange,
) -> ApiResult<users::Model> {
    let target = crate::auth::visibility::user(store.db(), caller, email).await?;
    if !scope.covers_domain(&target.domain_name) {
        return Err(ApiError::not_found("user", email));
    }
    let role = props.role.as_deref().map(parse_role).transpose()?;
    if target.uuid == caller.uuid {
        if role.is_some_and(|r| r != target.role) {
            return Err(ApiError::forbidden("You cannot change your own role."));
        }
        if props.password.is_some() {
            return Err(ApiError::forbidden(
                "Change your own password with change_password (it asks for the current one).",
            ));
        }
    }
    if role.is_some_and(|r| r != target.role) && !caller.is_superadmin() {
        return Err(ApiError::forbidden("Only superadmins may change roles."));
    }
    if target.role == UserRole::Superadmin && !caller.is_superadmin() {
        return Err(ApiError::forbidden(
            "Only superadmins may modify a superadmin.",
        ));
    }
    let status = match (props.status.as_deref(), props.is_active) {
        (Some(s), _) => Some(parse_status(s)?),
        (None, Some(true)) => Some(UserStatus::Active),
        (None, Some(false)) => Some(UserStatus::Inactive),
        (None, None) => None,
    };
    if target.uuid == caller.uuid && status.is_some_and(|s| s != UserStatus::Active) {
        return Err(ApiError::bad_request(
            "You cannot deactivate your own account.",
        ));
    }
    if status.is_some_and(|s| s != UserStatus::Active) && !caller.is_superadmin() {
        return Err(ApiError::forbidden(
            "Only superadmins may deactivate users.",
        ));
    }
    let password_hash = match &props.password {
        Some(p) => {
            password::validate_set_by_admin(p, store.config().password_rule_for_admins)?;
            Some(password::hash(p).await?)
        }
        None => None,
    };
    let username = props
        .username
        .as_deref()
        .map(crate::validate::username)
        .transpose()?;
    let UserChange {
        need_password_change,
        full_name,
        description,
        group_ids,
        ..
    } = props;
    let old_role = target.role;
    let reset = password_hash.is_some();
    let now = store.clock().now();
    let updated = crate::audit::audited(store, &caller.email, "modify_user", "user", move |txn| {
        Box::pin(async move {
            let was_active = target.status == UserStatus::Active;
            let uuid = target.uuid;
            let domain = target.domain_name.clone();
            let mut m = target.into_active_model();
            if let Some(u) = username {
                let taken = users::Entity::find()
                    .filter(users::Column::Username.eq(&u))
                    .filter(users::Column::Uuid.ne(uuid))
                    .one(txn)
                    .await?;
                if taken.is_some() {
                    return Err(ApiError::conflict(format!(
                        "The user name '{u}' is already taken"
                    )));
                }
                m.username = Set(u);
            }
            if let Some(h) = password_hash {
                m.password = Set(h);
                m.password_changed_at = Set(Some(now));
            }
            if let Some(v) = need_password_change {
                m.need_password_change = Set(v);
            }
            if let Some(v) = full_name {
                m.full_name = Set(Some(v));
            }
            if let Some(v) = description {
                m.description = Set(Some(v));
            }
            if let Some(r) = role {
                m.role = Set(r);
            }
            if let Some(s) = status {
                m.status = Set(s);
            }
            m.modified_at = Set(now);
            let user = m.update(txn).await?;
            if let Some(gids) = group_ids {
                check_groups_in_domain(txn, &gids, &domain).await?;
                set_groups(txn, uuid, &gids).await?;
            }
            if was_active && user.status != UserStatus::Active {
                deactivate(txn, uuid).await?;
            } else if !was_active && user.status == UserStatus::Active {
                crate::keypairs::reactivate_main(txn, &user).await?;
            }
            let key = user.email.to_string();
            let detail = serde_json::json!({
                "status": user.status.as_str(),
                "role": user.role.as_str(),
            });
            Ok((user, key, detail))
        })
    })
    .await?;
    // A reset password, a deactivation or a new role ends the account's login sessions (and
    // the rights of its open WebSockets) at once.
    if reset || updated.role != old_role || updated.status != UserStatus::Active {
        crate::auth::logins::end(store.db(), updated.uuid, None)
            .await?
            .announce(store.revocations());
    } else {
        // Cached copies of the account (auth::cache) are not used past this change.
        store.revocations().bump(updated.uuid);
    }
    store.events().changed(
        ObjectKind::User,
        ChangeAction::Modified,
        &updated.email,
        Some(updated.domain_name.clone()),
    );
    Ok(updated)
}

/// Backend.AI's `purge_user`, as far as bai keeps history: the account `email` is marked
/// `deleted` (its keypairs and login sessions end, as for a deactivation; its sessions and
/// audit records stay for the record). Superadmins only; refused for the caller itself and
/// while the user has live sessions.
pub async fn purge_user(
    store: &impl Store,
    scope: &crate::auth::SuperadminScope,
    caller: &Caller,
    email: &str,
) -> ApiResult<users::Model> {
    let _ = scope;
    let target = crate::auth::visibility::user(store.db(), caller, email).await?;
    if target.uuid == caller.uuid {
        return Err(ApiError::bad_request("You cannot purge your own account."));
    }
    let live = sea_orm::PaginatorTrait::count(
        entity::sessions::Entity::find()
            .filter(entity::sessions::Column::UserUuid.eq(target.uuid))
            .filter(
                entity::sessions::Column::Status
                    .is_in(entity::enums::SessionStatus::LIVE.iter().copied()),
            ),
        store.db(),
    )
    .await?;
    if live > 0 {
        return Err(ApiError::conflict(format!(
            "The user has {live} live sessions: terminate them first"
        )));
    }
    modify_user(
        store,
        &AdminScope::Super,
        caller,
        email,
        UserChange {
            status: Some(UserStatus::Deleted.as_str().into()),
            ..Default::default()
        },
    )
    .await
}

/// The users an administrator may list (`auth::visibility::users`); FORBIDDEN for others.
pub fn administered(caller: &Caller) -> ApiResult<Select<users::Entity>> {
    caller.require_admin()?;
    Ok(crate::auth::visibility::users(caller))
}

/// The users an administrator may list, narrowed to a domain, a group, activity and a status
/// by name (BAD_REQUEST for an unknown one); FORBIDDEN for others.
pub fn listable(
    caller: &Caller,
    domain_name: Option<String>,
    group_id: Option<Uuid>,
    is_active: Option<bool>,
    status: Option<String>,
) -> ApiResult<Select<users::Entity>> {
    let mut select = administered(caller)?;
    if let Some(d) = domain_name {
        select = select.filter(users::Column::DomainName.eq(d));
    }
    if let Some(g) = group_id {
        select = in_group(select, g);
    }
    match is_active {
        Some(true) => select = select.filter(users::Column::Status.eq(UserStatus::Active)),
        Some(false) => select = select.filter(users::Column::Status.ne(UserStatus::Active)),
        None => {}
    }
    if let Some(s) = status {
        select = select.filter(users::Column::Status.eq(parse_status(&s)?));
    }
    Ok(select)
}
