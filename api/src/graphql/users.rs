//! GraphQL for users: `user`, `users`, `user_list`, `create_user`, `modify_user`.
// Resolver arguments mirror Backend.AI's GraphQL signatures, however many there are.
#![allow(clippy::too_many_arguments)]
use async_graphql::{Context, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::enums::{UserRole, UserStatus};
use entity::{association_groups_users, groups, users};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, Order, QueryFilter, Set,
};
use uuid::Uuid;

use crate::auth::password;
use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::graphql::authed;

pub struct User(pub users::Model);

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct UserGroup {
    pub id: Uuid,
    pub name: String,
}

#[Object(rename_fields = "snake_case")]
impl User {
    async fn id(&self) -> Uuid {
        self.0.uuid
    }
    async fn uuid(&self) -> Uuid {
        self.0.uuid
    }
    async fn username(&self) -> &str {
        &self.0.username
    }
    async fn email(&self) -> &str {
        &self.0.email
    }
    async fn need_password_change(&self) -> bool {
        self.0.need_password_change
    }
    async fn full_name(&self) -> Option<&str> {
        self.0.full_name.as_deref()
    }
    async fn description(&self) -> Option<&str> {
        self.0.description.as_deref()
    }
    async fn is_active(&self) -> bool {
        self.0.status == UserStatus::Active
    }
    async fn status(&self) -> &str {
        self.0.status.as_str()
    }
    async fn status_info(&self) -> Option<&str> {
        self.0.status_info.as_deref()
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    async fn modified_at(&self) -> DateTime<Utc> {
        self.0.modified_at
    }
    async fn domain_name(&self) -> &str {
        &self.0.domain_name
    }
    async fn role(&self) -> &str {
        self.0.role.as_str()
    }
    async fn main_access_key(&self) -> Option<&str> {
        self.0.main_access_key.as_deref()
    }
    /// The projects (groups) the user belongs to.
    async fn groups(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<UserGroup>> {
        let state = crate::graphql::state(ctx)?;
        let ids: Vec<Uuid> = association_groups_users::Entity::find()
            .filter(association_groups_users::Column::UserId.eq(self.0.uuid))
            .all(&state.db)
            .await
            .map_err(ApiError::from)?
            .into_iter()
            .map(|a| a.group_id)
            .collect();
        let gs = groups::Entity::find()
            .filter(groups::Column::Id.is_in(ids))
            .all(&state.db)
            .await
            .map_err(ApiError::from)?;
        Ok(gs
            .into_iter()
            .map(|g| UserGroup {
                id: g.id,
                name: g.name,
            })
            .collect())
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct UserList {
    pub items: Vec<User>,
    pub total_count: u64,
}

#[derive(Default)]
pub struct UserQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl UserQuery {
    /// A user by email; without `email`, the caller.
    async fn user(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "accepted for compatibility; the email decides")] _domain_name: Option<
            String,
        >,
        email: Option<String>,
    ) -> async_graphql::Result<User> {
        let (state, caller) = authed(ctx)?;
        let user = match email {
            Some(e) => crate::users::find_visible(&state.db, caller, &e).await?,
            None => crate::users::by_uuid(&state.db, caller.uuid).await?,
        };
        Ok(User(user))
    }

    /// Users visible to an administrator.
    async fn users(
        &self,
        ctx: &Context<'_>,
        domain_name: Option<String>,
        group_id: Option<Uuid>,
        is_active: Option<bool>,
        status: Option<String>,
    ) -> async_graphql::Result<Vec<User>> {
        let (state, caller) = authed(ctx)?;
        let select = filtered(caller, domain_name, group_id, is_active, status)?;
        let rows = select.all(&state.db).await.map_err(ApiError::from)?;
        Ok(rows.into_iter().map(User).collect())
    }

    async fn user_list(
        &self,
        ctx: &Context<'_>,
        limit: i32,
        offset: i32,
        order: Option<String>,
        domain_name: Option<String>,
        group_id: Option<Uuid>,
        is_active: Option<bool>,
        status: Option<String>,
    ) -> async_graphql::Result<UserList> {
        let (state, caller) = authed(ctx)?;
        let select = filtered(caller, domain_name, group_id, is_active, status)?;
        let (rows, total_count) = crate::graphql::paginate(
            &state.db,
            select,
            (limit, offset),
            order.as_deref(),
            &[
                ("email", users::Column::Email),
                ("username", users::Column::Username),
                ("created_at", users::Column::CreatedAt),
                ("modified_at", users::Column::ModifiedAt),
                ("domain_name", users::Column::DomainName),
                ("role", users::Column::Role),
                ("status", users::Column::Status),
            ],
            (users::Column::CreatedAt, Order::Asc),
        )
        .await?;
        Ok(UserList {
            items: rows.into_iter().map(User).collect(),
            total_count,
        })
    }
}

fn filtered(
    caller: &crate::auth::Caller,
    domain_name: Option<String>,
    group_id: Option<Uuid>,
    is_active: Option<bool>,
    status: Option<String>,
) -> ApiResult<sea_orm::Select<users::Entity>> {
    caller.require_admin()?;
    let mut select = crate::users::visible_to(caller);
    if let Some(d) = domain_name {
        select = select.filter(users::Column::DomainName.eq(d));
    }
    if let Some(g) = group_id {
        select = crate::users::in_group(select, g);
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

fn parse_status(s: &str) -> ApiResult<UserStatus> {
    UserStatus::parse(s).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid user status '{s}' (one of: {})",
            UserStatus::choices()
        ))
    })
}

fn parse_role(s: &str) -> ApiResult<UserRole> {
    UserRole::parse(s).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid role '{s}' (one of: {})",
            UserRole::choices()
        ))
    })
}

#[derive(InputObject)]
#[graphql(rename_fields = "snake_case")]
pub struct UserInput {
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

#[derive(InputObject, Default)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyUserInput {
    pub username: Option<String>,
    pub password: Option<String>,
    pub need_password_change: Option<bool>,
    pub full_name: Option<String>,
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub status: Option<String>,
    pub role: Option<String>,
    /// Replaces the user's projects.
    pub group_ids: Option<Vec<Uuid>>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CreateUser {
    pub ok: bool,
    pub msg: String,
    pub user: Option<User>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyUser {
    pub ok: bool,
    pub msg: String,
    pub user: Option<User>,
}

#[derive(Default)]
pub struct UserMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl UserMutation {
    /// Creates a user with a main keypair (superadmin only, as the seeds say).
    async fn create_user(
        &self,
        ctx: &Context<'_>,
        email: String,
        props: UserInput,
    ) -> async_graphql::Result<CreateUser> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        password::validate_rules(&props.password)?;
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
            state.config.admin_rate_limit
        } else {
            state.config.default_rate_limit
        };
        let new = crate::users::NewUser {
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
        let user = crate::audit::audited(
            &state.db,
            &caller.email,
            "create_user",
            "user",
            move |txn| {
                Box::pin(async move {
                    let (user, _) = crate::users::create(txn, new).await?;
                    let key = user.email.to_string();
                    let detail =
                        serde_json::json!({"role": user.role.as_str(), "domain": user.domain_name});
                    Ok((user, key, detail))
                })
            },
        )
        .await?;
        state.events.changed(
            ObjectKind::User,
            ChangeAction::Created,
            &user.email,
            Some(user.domain_name.clone()),
        );
        Ok(CreateUser {
            ok: true,
            msg: "success".into(),
            user: Some(User(user)),
        })
    }

    /// Modifies a user. Superadmins may change anything; domain admins may change users of
    /// their own domain but not roles. `is_active: false` deactivates the account.
    async fn modify_user(
        &self,
        ctx: &Context<'_>,
        email: String,
        props: ModifyUserInput,
    ) -> async_graphql::Result<ModifyUser> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_admin()?;
        let target = crate::users::find_visible(&state.db, caller, &email).await?;
        if !scope.covers_domain(&target.domain_name) {
            return Err(ApiError::not_found("user", &email).into());
        }
        let role = props.role.as_deref().map(parse_role).transpose()?;
        if target.uuid == caller.uuid {
            if role.is_some_and(|r| r != target.role) {
                return Err(ApiError::forbidden("You cannot change your own role.").into());
            }
            if props.password.is_some() {
                return Err(ApiError::forbidden(
                    "Change your own password with change_password (it asks for the current one).",
                )
                .into());
            }
        }
        if role.is_some_and(|r| r != target.role) && !caller.is_superadmin() {
            return Err(ApiError::forbidden("Only superadmins may change roles.").into());
        }
        if target.role == UserRole::Superadmin && !caller.is_superadmin() {
            return Err(ApiError::forbidden("Only superadmins may modify a superadmin.").into());
        }
        let status = match (props.status.as_deref(), props.is_active) {
            (Some(s), _) => Some(parse_status(s)?),
            (None, Some(true)) => Some(UserStatus::Active),
            (None, Some(false)) => Some(UserStatus::Inactive),
            (None, None) => None,
        };
        if target.uuid == caller.uuid && status.is_some_and(|s| s != UserStatus::Active) {
            return Err(ApiError::bad_request("You cannot deactivate your own account.").into());
        }
        if status.is_some_and(|s| s != UserStatus::Active) && !caller.is_superadmin() {
            return Err(ApiError::forbidden("Only superadmins may deactivate users.").into());
        }
        let password_hash = match &props.password {
            Some(p) => {
                password::validate_rules(p)?;
                Some(password::hash(p).await?)
            }
            None => None,
        };
        let username = props
            .username
            .as_deref()
            .map(crate::validate::username)
            .transpose()?;
        let group_ids = props.group_ids.clone();
        let old_role = target.role;
        let reset = password_hash.is_some();
        let updated = crate::audit::audited(&state.db, &caller.email, "modify_user", "user", move |txn| {
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
                            return Err(ApiError::conflict(format!("The user name '{u}' is already taken")));
                        }
                        m.username = Set(u);
                    }
                    if let Some(h) = password_hash {
                        m.password = Set(h);
                        m.password_changed_at = Set(Some(Utc::now()));
                    }
                    if let Some(v) = props.need_password_change {
                        m.need_password_change = Set(v);
                    }
                    if let Some(v) = props.full_name {
                        m.full_name = Set(Some(v));
                    }
                    if let Some(v) = props.description {
                        m.description = Set(Some(v));
                    }
                    if let Some(r) = role {
                        m.role = Set(r);
                    }
                    if let Some(s) = status {
                        m.status = Set(s);
                    }
                    m.modified_at = Set(Utc::now());
                    let user = m.update(txn).await?;
                    if let Some(gids) = group_ids {
                        crate::users::check_groups_in_domain(txn, &gids, &domain).await?;
                        crate::users::set_groups(txn, uuid, &gids).await?;
                    }
                    if was_active && user.status != UserStatus::Active {
                        crate::users::deactivate(txn, uuid).await?;
                    } else if !was_active && user.status == UserStatus::Active {
                        crate::keypairs::reactivate_main(txn, &user).await?;
                    }
                    let key = user.email.to_string();
                    let detail = serde_json::json!({"status": user.status.as_str(), "role": user.role.as_str()});
                    Ok((user, key, detail))
                })
            })
            .await?;
        // A reset password, a deactivation or a new role ends the account's login sessions
        // (and the rights of its open WebSockets) at once.
        if reset || updated.role != old_role || updated.status != UserStatus::Active {
            crate::accounts::end_login_sessions(&state.db, &state.revocations, updated.uuid, None)
                .await?;
        } else {
            // Cached copies of the account (auth::cache) are not used past this change.
            state.revocations.bump();
        }
        state.events.changed(
            ObjectKind::User,
            ChangeAction::Modified,
            &updated.email,
            Some(updated.domain_name.clone()),
        );
        Ok(ModifyUser {
            ok: true,
            msg: "success".into(),
            user: Some(User(updated)),
        })
    }
}
