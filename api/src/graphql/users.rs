//! GraphQL for users: `user`, `users`, `user_list`, `create_user`, `modify_user`.
// Resolver arguments mirror Backend.AI's GraphQL signatures, however many there are.
#![allow(clippy::too_many_arguments)]
use async_graphql::{Context, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::enums::UserStatus;
use entity::users;
use sea_orm::{Order, QueryFilter};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::graphql::context::authed;

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
    /// Backend.AI's client-address allowlist: bai restricts none (null).
    async fn allowed_client_ip(&self) -> Option<Vec<String>> {
        None
    }
    /// Backend.AI's sudo sessions: bai has none (false).
    async fn sudo_session_enabled(&self) -> bool {
        false
    }
    /// Backend.AI 20.09 answered a user's password hash here; bai never does (null). Lablup's
    /// Console 21.02 selects it.
    async fn password(&self) -> Option<String> {
        None
    }
    /// The app port pool's port this user's SSH/SFTP apps ask for first (user settings).
    async fn preferred_ssh_port(&self) -> Option<i32> {
        self.0.preferred_ssh_port
    }
    /// Backend.AI's TOTP: bai has none (false).
    async fn totp_activated(&self) -> bool {
        false
    }
    /// The projects (groups) the user belongs to.
    async fn groups(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<Vec<UserGroup>> {
        let state = crate::graphql::context::state(ctx)?;
        let gs = crate::groups::of_user(self.0.uuid)
            .all(&state.read)
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

/// The address a request came from, as bai sees it (`myClientIp`).
#[derive(SimpleObject)]
pub struct ClientIp {
    client_ip: Option<String>,
}

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl UserQuery {
    /// Backend.AI 26's `myClientIp`: the address this request came from.
    #[graphql(name = "myClientIp")]
    async fn my_client_ip(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<ClientIp> {
        authed(ctx)?;
        let addr = ctx
            .data_opt::<crate::auth::ClientAddr>()
            .and_then(|a| a.0)
            .map(|ip| ip.to_string());
        Ok(ClientIp { client_ip: addr })
    }

    /// A user by email; without `email`, the caller.
    async fn user(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "accepted for compatibility; the email decides")] _domain_name: Option<
            String,
        >,
        email: Option<String>,
    ) -> crate::graphql::context::Result<User> {
        let (state, caller) = authed(ctx)?;
        let user = match email {
            Some(e) => crate::auth::visibility::user(&state.read, caller, &e).await?,
            None => crate::users::by_uuid(&state.read, caller.uuid).await?,
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
    ) -> crate::graphql::context::Result<Vec<User>> {
        let (state, caller) = authed(ctx)?;
        let select = crate::users::listable(caller, domain_name, group_id, is_active, status)?;
        let rows = select.all(&state.read).await.map_err(ApiError::from)?;
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
        filter: Option<String>,
    ) -> crate::graphql::context::Result<UserList> {
        let (state, caller) = authed(ctx)?;
        let mut select = crate::users::listable(caller, domain_name, group_id, is_active, status)?;
        if let Some(f) = filter
            && let Some(f) = bai_core::filter::parse(
                &f,
                &[
                    ("email", users::Column::Email),
                    ("username", users::Column::Username),
                    ("full_name", users::Column::FullName),
                    ("role", users::Column::Role),
                    ("status", users::Column::Status),
                    ("domain_name", users::Column::DomainName),
                    ("created_at", users::Column::CreatedAt),
                    ("need_password_change", users::Column::NeedPasswordChange),
                ],
            )?
        {
            select = select.filter(crate::sql::condition(&f));
        }
        let (rows, total_count) = crate::graphql::context::paginate(
            &state.read,
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
            // Newest first, as Backend.AI lists users.
            (users::Column::CreatedAt, Order::Desc),
        )
        .await?;
        Ok(UserList {
            items: rows.into_iter().map(User).collect(),
            total_count,
        })
    }
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
    /// Accepted as Backend.AI's clients send it; bai has no TOTP (must be false or absent).
    pub totp_activated: Option<bool>,
    /// Accepted as Backend.AI's clients send it; bai has no sudo sessions (false or absent).
    pub sudo_session_enabled: Option<bool>,
    /// Accepted as Backend.AI's clients send it; bai does not restrict client addresses
    /// (null or empty).
    pub allowed_client_ip: Option<Vec<String>>,
    /// Accepted as Backend.AI's clients send it: sessions run as the images' `work` user
    /// (null).
    pub container_uid: Option<i32>,
    pub container_main_gid: Option<i32>,
    pub container_gids: Option<Vec<i32>>,
}

/// Refuses what Backend.AI's clients may set but bai has no concept of, unless it is the
/// default they send anyway.
fn unsupported_user_options(
    totp: Option<bool>,
    sudo: Option<bool>,
    ips: &Option<Vec<String>>,
    uid: Option<i32>,
    gid: Option<i32>,
    gids: &Option<Vec<i32>>,
) -> ApiResult<()> {
    let set = |what: &str| {
        Err(ApiError::bad_request(format!(
            "{what} is not supported by this server"
        )))
    };
    if totp == Some(true) {
        return set("TOTP (totp_activated)");
    }
    if sudo == Some(true) {
        return set("Sudo sessions (sudo_session_enabled)");
    }
    if ips.as_ref().is_some_and(|v| !v.is_empty()) {
        return set("Restricting client addresses (allowed_client_ip)");
    }
    if uid.is_some() || gid.is_some() || gids.as_ref().is_some_and(|v| !v.is_empty()) {
        return set(
            "Container user and group ids (container_uid, container_main_gid, container_gids)",
        );
    }
    Ok(())
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
    /// Accepted when it is the user's own domain: bai does not move users between domains.
    pub domain_name: Option<String>,
    pub totp_activated: Option<bool>,
    pub sudo_session_enabled: Option<bool>,
    pub allowed_client_ip: Option<Vec<String>>,
    pub container_uid: Option<i32>,
    pub container_main_gid: Option<i32>,
    pub container_gids: Option<Vec<i32>>,
}

/// Backend.AI's `PurgeUserInput`: bai has no model services, and a purged user's folders go
/// to the trash.
#[derive(InputObject, Default)]
#[graphql(rename_fields = "snake_case")]
pub struct PurgeUserInput {
    pub purge_shared_vfolders: Option<bool>,
    pub delegate_endpoint_ownership: Option<bool>,
}

impl From<UserInput> for crate::users::UserCreation {
    fn from(p: UserInput) -> Self {
        Self {
            username: p.username,
            password: p.password,
            need_password_change: p.need_password_change,
            domain_name: p.domain_name,
            full_name: p.full_name,
            description: p.description,
            is_active: p.is_active,
            status: p.status,
            role: p.role,
            group_ids: p.group_ids,
            resource_policy: p.resource_policy,
        }
    }
}

impl From<ModifyUserInput> for crate::users::UserChange {
    fn from(p: ModifyUserInput) -> Self {
        Self {
            username: p.username,
            password: p.password,
            need_password_change: p.need_password_change,
            full_name: p.full_name,
            description: p.description,
            is_active: p.is_active,
            status: p.status,
            role: p.role,
            group_ids: p.group_ids,
        }
    }
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

#[derive(SimpleObject)]
pub struct DeleteUser {
    pub ok: bool,
    pub msg: String,
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
    ) -> crate::graphql::context::Result<CreateUser> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        unsupported_user_options(
            props.totp_activated,
            props.sudo_session_enabled,
            &props.allowed_client_ip,
            props.container_uid,
            props.container_main_gid,
            &props.container_gids,
        )?;
        let user = crate::users::create_user(state, &scope, email, props.into()).await?;
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
    ) -> crate::graphql::context::Result<ModifyUser> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_admin()?;
        unsupported_user_options(
            props.totp_activated,
            props.sudo_session_enabled,
            &props.allowed_client_ip,
            props.container_uid,
            props.container_main_gid,
            &props.container_gids,
        )?;
        if let Some(d) = &props.domain_name {
            let target = crate::auth::visibility::user(&state.read, caller, &email).await?;
            if *d != target.domain_name {
                return Err(ApiError::bad_request(
                    "Moving a user to another domain is not supported by this server",
                )
                .into());
            }
        }
        let updated =
            crate::users::modify_user(state, &scope, caller, &email, props.into()).await?;
        Ok(ModifyUser {
            ok: true,
            msg: "success".into(),
            user: Some(User(updated)),
        })
    }

    /// Backend.AI's `delete_user`: the account is marked `deleted`, as [`purge_user`] does
    /// here (bai keeps a deleted account's history either way). Superadmins only; refused
    /// while the user has live sessions.
    async fn delete_user(
        &self,
        ctx: &Context<'_>,
        email: String,
    ) -> crate::graphql::context::Result<DeleteUser> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        crate::users::purge_user(state, &scope, caller, &email).await?;
        Ok(DeleteUser {
            ok: true,
            msg: "success".into(),
        })
    }

    /// Backend.AI's purge: the account is marked `deleted` (keypairs and login sessions end;
    /// its sessions and records stay for history). Superadmins only; refused while the user
    /// has live sessions.
    async fn purge_user(
        &self,
        ctx: &Context<'_>,
        email: String,
        props: Option<PurgeUserInput>,
    ) -> crate::graphql::context::Result<ModifyUser> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        let _ = props;
        let user = crate::users::purge_user(state, &scope, caller, &email).await?;
        Ok(ModifyUser {
            ok: true,
            msg: "success".into(),
            user: Some(User(user)),
        })
    }
}
