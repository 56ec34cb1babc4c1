//! Backend.AI 26's user layer as Lablup's Web UI 26 reads it: `myUserV2` (the caller) and
//! `adminUsersV2` (administrators: the users of their scope, with Backend.AI's typed
//! `UserV2Filter` and `UserV2OrderBy`), each user a `UserV2` with its projects.
// Resolver arguments mirror Backend.AI's GraphQL signatures, however many there are.
#![allow(clippy::too_many_arguments)]
use async_graphql::{Context, Enum, ID, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::enums::{UserRole, UserStatus};
use entity::{groups, users};
use sea_orm::{ColumnTrait, Condition, Order, QueryFilter, QueryOrder};
use std::collections::HashMap;

use crate::error::ApiError;
use crate::graphql::context::{authed, state};
use crate::graphql::filters::{self, StringFilter};
use crate::graphql::sessions::global_id;

/// How many nested `AND`/`OR`/`NOT` levels a `UserV2Filter` may have.
const MAX_FILTER_DEPTH: usize = 8;

#[derive(Enum, Copy, Clone, PartialEq, Eq)]
pub enum UserStatusV2 {
    Active,
    Inactive,
    Deleted,
    BeforeVerification,
}

impl From<UserStatus> for UserStatusV2 {
    fn from(s: UserStatus) -> Self {
        match s {
            UserStatus::Active => Self::Active,
            UserStatus::Inactive => Self::Inactive,
            UserStatus::Deleted => Self::Deleted,
            UserStatus::BeforeVerification => Self::BeforeVerification,
        }
    }
}

impl UserStatusV2 {
    fn stored(self) -> &'static str {
        match self {
            Self::Active => UserStatus::Active,
            Self::Inactive => UserStatus::Inactive,
            Self::Deleted => UserStatus::Deleted,
            Self::BeforeVerification => UserStatus::BeforeVerification,
        }
        .as_str()
    }
}

#[derive(Enum, Copy, Clone, PartialEq, Eq)]
pub enum UserRoleV2 {
    User,
    Admin,
    Superadmin,
    Monitor,
}

impl From<UserRole> for UserRoleV2 {
    fn from(r: UserRole) -> Self {
        match r {
            UserRole::User => Self::User,
            UserRole::Admin => Self::Admin,
            UserRole::Superadmin => Self::Superadmin,
            UserRole::Monitor => Self::Monitor,
        }
    }
}

impl UserRoleV2 {
    fn stored(self) -> &'static str {
        match self {
            Self::User => UserRole::User,
            Self::Admin => UserRole::Admin,
            Self::Superadmin => UserRole::Superadmin,
            Self::Monitor => UserRole::Monitor,
        }
        .as_str()
    }
}

/// A user as Backend.AI 26 shows one; `resource_policy` is its main keypair's.
pub struct UserV2 {
    user: users::Model,
    resource_policy: String,
}

#[derive(SimpleObject)]
pub struct UserV2BasicInfo {
    email: String,
    username: String,
    full_name: Option<String>,
    description: Option<String>,
    /// Backend.AI's integration name: bai has none (null).
    integration_name: Option<String>,
}

#[derive(SimpleObject)]
pub struct UserV2StatusInfo {
    status: UserStatusV2,
    status_info: Option<String>,
    need_password_change: bool,
}

#[derive(SimpleObject)]
pub struct UserV2OrganizationInfo {
    domain_name: String,
    role: UserRoleV2,
    /// The resource policy of the user's main keypair.
    resource_policy: String,
    main_access_key: Option<String>,
}

#[derive(SimpleObject)]
pub struct UserV2SecurityInfo {
    /// Backend.AI's TOTP: bai has none (false).
    totp_activated: bool,
    /// Backend.AI's TOTP: bai has none (null).
    totp_activated_at: Option<DateTime<Utc>>,
    /// Backend.AI's client-address allowlist: bai has none (null).
    allowed_client_ip: Option<Vec<String>>,
    /// Backend.AI's sudo sessions: bai has none (false).
    sudo_session_enabled: bool,
}

/// Backend.AI's per-user container ids: sessions run as the images' `work` user (null).
#[derive(SimpleObject)]
pub struct UserV2ContainerSettings {
    container_uid: Option<i32>,
    container_main_gid: Option<i32>,
    container_gids: Option<Vec<i32>>,
}

#[derive(SimpleObject)]
pub struct EntityTimestamps {
    created_at: DateTime<Utc>,
    modified_at: DateTime<Utc>,
}

/// A project as Backend.AI 26 names one (here: those a user belongs to).
pub struct ProjectV2(groups::Model);

#[derive(Enum, Copy, Clone, PartialEq, Eq)]
pub enum ProjectTypeV2 {
    General,
    ModelStore,
}

#[derive(SimpleObject)]
pub struct ProjectBasicInfo {
    name: String,
    description: Option<String>,
    #[graphql(name = "type")]
    project_type: ProjectTypeV2,
    /// Backend.AI's integration name: bai has none (null).
    integration_name: Option<String>,
}

#[Object]
impl ProjectV2 {
    /// The Relay global id, `base64("ProjectV2:<uuid>")`.
    pub(crate) async fn id(&self) -> ID {
        global_id("ProjectV2", self.0.id)
    }
    async fn basic_info(&self) -> ProjectBasicInfo {
        ProjectBasicInfo {
            name: self.0.name.clone(),
            description: self.0.description.clone(),
            project_type: match self.0.group_type {
                entity::enums::GroupType::General => ProjectTypeV2::General,
                entity::enums::GroupType::ModelStore => ProjectTypeV2::ModelStore,
            },
            integration_name: None,
        }
    }
}

#[derive(SimpleObject)]
pub struct ProjectV2Edge {
    cursor: String,
    node: ProjectV2,
}

#[derive(SimpleObject)]
pub struct ProjectV2Connection {
    count: u64,
    edges: Vec<ProjectV2Edge>,
}

#[Object]
impl UserV2 {
    /// The Relay global id, `base64("UserV2:<uuid>")`.
    pub(crate) async fn id(&self) -> ID {
        global_id("UserV2", self.user.uuid)
    }
    async fn basic_info(&self) -> UserV2BasicInfo {
        UserV2BasicInfo {
            email: self.user.email.clone(),
            username: self.user.username.clone(),
            full_name: self.user.full_name.clone(),
            description: self.user.description.clone(),
            integration_name: None,
        }
    }
    async fn status(&self) -> UserV2StatusInfo {
        UserV2StatusInfo {
            status: self.user.status.into(),
            status_info: self.user.status_info.clone(),
            need_password_change: self.user.need_password_change,
        }
    }
    async fn organization(&self) -> UserV2OrganizationInfo {
        UserV2OrganizationInfo {
            domain_name: self.user.domain_name.clone(),
            role: self.user.role.into(),
            resource_policy: self.resource_policy.clone(),
            main_access_key: self.user.main_access_key.clone(),
        }
    }
    async fn security(&self) -> UserV2SecurityInfo {
        UserV2SecurityInfo {
            totp_activated: false,
            totp_activated_at: None,
            allowed_client_ip: None,
            sudo_session_enabled: false,
        }
    }
    async fn container(&self) -> UserV2ContainerSettings {
        UserV2ContainerSettings {
            container_uid: None,
            container_main_gid: None,
            container_gids: None,
        }
    }
    async fn timestamps(&self) -> EntityTimestamps {
        EntityTimestamps {
            created_at: self.user.created_at,
            modified_at: self.user.modified_at,
        }
    }
    /// The projects the user belongs to, by name (`limit` at most 1000).
    async fn projects(
        &self,
        ctx: &Context<'_>,
        limit: Option<i32>,
        offset: Option<i32>,
        first: Option<i32>,
    ) -> crate::graphql::context::Result<ProjectV2Connection> {
        let state = state(ctx)?;
        let all = crate::groups::of_user(self.user.uuid)
            .order_by_asc(groups::Column::Name)
            .all(&state.read)
            .await
            .map_err(ApiError::from)?;
        let count = all.len() as u64;
        let take = usize::try_from(limit.or(first).unwrap_or(1000).clamp(0, 1000)).unwrap_or(0);
        let skip = usize::try_from(offset.unwrap_or(0).max(0)).unwrap_or(0);
        Ok(ProjectV2Connection {
            count,
            edges: all
                .into_iter()
                .skip(skip)
                .take(take)
                .map(|g| ProjectV2Edge {
                    cursor: g.id.to_string(),
                    node: ProjectV2(g),
                })
                .collect(),
        })
    }
}

#[derive(SimpleObject)]
pub struct UserV2Edge {
    cursor: String,
    node: UserV2,
}

#[derive(SimpleObject)]
pub struct UserV2Connection {
    count: u64,
    edges: Vec<UserV2Edge>,
}

#[derive(InputObject)]
pub struct UserStatusV2EnumFilter {
    equals: Option<UserStatusV2>,
    #[graphql(name = "in")]
    in_: Option<Vec<UserStatusV2>>,
    not_equals: Option<UserStatusV2>,
    not_in: Option<Vec<UserStatusV2>>,
}

#[derive(InputObject)]
pub struct UserRoleV2EnumFilter {
    equals: Option<UserRoleV2>,
    #[graphql(name = "in")]
    in_: Option<Vec<UserRoleV2>>,
    not_equals: Option<UserRoleV2>,
    not_in: Option<Vec<UserRoleV2>>,
}

/// Backend.AI's `UserV2Filter` (the fields bai keeps); every given test must hold.
#[derive(InputObject)]
pub struct UserV2Filter {
    username: Option<StringFilter>,
    email: Option<StringFilter>,
    full_name: Option<StringFilter>,
    description: Option<StringFilter>,
    status: Option<UserStatusV2EnumFilter>,
    status_info: Option<StringFilter>,
    domain_name: Option<StringFilter>,
    role: Option<UserRoleV2EnumFilter>,
    need_password_change: Option<bool>,
    #[graphql(name = "AND")]
    and: Option<Vec<UserV2Filter>>,
    #[graphql(name = "OR")]
    or: Option<Vec<UserV2Filter>>,
    #[graphql(name = "NOT")]
    not: Option<Vec<UserV2Filter>>,
}

impl UserV2Filter {
    fn condition(&self, depth: usize) -> Result<Condition, ApiError> {
        if depth > MAX_FILTER_DEPTH {
            return Err(ApiError::bad_request(format!(
                "a user filter nests AND/OR/NOT at most {MAX_FILTER_DEPTH} deep"
            )));
        }
        let mut c = Condition::all();
        for (col, f) in [
            (users::Column::Username, &self.username),
            (users::Column::Email, &self.email),
            (users::Column::FullName, &self.full_name),
            (users::Column::Description, &self.description),
            (users::Column::StatusInfo, &self.status_info),
            (users::Column::DomainName, &self.domain_name),
        ] {
            if let Some(f) = f {
                c = c.add(filters::string(col, f));
            }
        }
        if let Some(s) = &self.status {
            let list = |v: &Option<Vec<UserStatusV2>>| {
                v.as_ref().map(|v| v.iter().map(|s| s.stored()).collect())
            };
            c = c.add(filters::enumeration(
                users::Column::Status,
                s.equals.map(UserStatusV2::stored),
                list(&s.in_),
                s.not_equals.map(UserStatusV2::stored),
                list(&s.not_in),
            ));
        }
        if let Some(r) = &self.role {
            let list = |v: &Option<Vec<UserRoleV2>>| {
                v.as_ref().map(|v| v.iter().map(|r| r.stored()).collect())
            };
            c = c.add(filters::enumeration(
                users::Column::Role,
                r.equals.map(UserRoleV2::stored),
                list(&r.in_),
                r.not_equals.map(UserRoleV2::stored),
                list(&r.not_in),
            ));
        }
        if let Some(b) = self.need_password_change {
            c = c.add(users::Column::NeedPasswordChange.eq(b));
        }
        if let Some(all) = &self.and {
            for f in all {
                c = c.add(f.condition(depth + 1)?);
            }
        }
        if let Some(any) = &self.or {
            let mut o = Condition::any();
            for f in any {
                o = o.add(f.condition(depth + 1)?);
            }
            c = c.add(o);
        }
        if let Some(none) = &self.not {
            for f in none {
                c = c.add(f.condition(depth + 1)?.not());
            }
        }
        Ok(c)
    }
}

#[derive(Enum, Copy, Clone, PartialEq, Eq)]
pub enum UserV2OrderField {
    CreatedAt,
    ModifiedAt,
    Username,
    Email,
    Status,
    DomainName,
    /// Accepted; bai orders users by their own columns only (refused with a message).
    ProjectName,
}

#[derive(Enum, Copy, Clone, PartialEq, Eq)]
pub enum OrderDirection {
    Asc,
    Desc,
}

#[derive(InputObject)]
pub struct UserV2OrderBy {
    #[graphql(default_with = "UserV2OrderField::CreatedAt")]
    field: UserV2OrderField,
    #[graphql(default_with = "OrderDirection::Desc")]
    direction: OrderDirection,
}

fn with_policies(rows: Vec<users::Model>, policies: &HashMap<String, String>) -> Vec<UserV2> {
    rows.into_iter()
        .map(|u| UserV2 {
            resource_policy: u
                .main_access_key
                .as_ref()
                .and_then(|k| policies.get(k))
                .cloned()
                .unwrap_or_else(|| "default".into()),
            user: u,
        })
        .collect()
}

#[derive(Default)]
pub struct UserV2Query;

#[Object]
impl UserV2Query {
    /// Backend.AI 26's `myUserV2`: the caller.
    #[graphql(name = "myUserV2")]
    async fn my_user_v2(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<UserV2> {
        let (state, caller) = authed(ctx)?;
        let u = crate::users::by_uuid(&state.read, caller.uuid).await?;
        let policies =
            crate::keypairs::main_policies(&state.read, std::slice::from_ref(&u)).await?;
        Ok(with_policies(vec![u], &policies)
            .pop()
            .ok_or_else(|| ApiError::not_found("user", caller.uuid.to_string()))?)
    }

    /// Backend.AI 26's `adminUsersV2` (superadmins: every user; domain admins: their
    /// domain's), filtered and ordered; pages by `limit`/`offset` (or `first`).
    #[graphql(name = "adminUsersV2")]
    async fn admin_users_v2(
        &self,
        ctx: &Context<'_>,
        filter: Option<UserV2Filter>,
        order_by: Option<Vec<UserV2OrderBy>>,
        limit: Option<i32>,
        offset: Option<i32>,
        first: Option<i32>,
        #[graphql(desc = "accepted; pages go by offset")] _before: Option<String>,
        #[graphql(desc = "accepted; pages go by offset")] _after: Option<String>,
        #[graphql(desc = "accepted; pages go by offset")] _last: Option<i32>,
    ) -> crate::graphql::context::Result<UserV2Connection> {
        let (state, caller) = authed(ctx)?;
        let mut select = crate::users::administered(caller)?;
        if let Some(f) = &filter {
            select = select.filter(f.condition(0)?);
        }
        let count = {
            use sea_orm::PaginatorTrait;
            select
                .clone()
                .count(&state.read)
                .await
                .map_err(ApiError::from)?
        };
        let orders = order_by.unwrap_or_default();
        if orders.len() > 8 {
            return Err(ApiError::bad_request("at most 8 orderBy entries").into());
        }
        if orders.is_empty() {
            // Newest first, as Backend.AI lists users.
            select = select.order_by(users::Column::CreatedAt, Order::Desc);
        }
        for o in &orders {
            let col = match o.field {
                UserV2OrderField::CreatedAt => users::Column::CreatedAt,
                UserV2OrderField::ModifiedAt => users::Column::ModifiedAt,
                UserV2OrderField::Username => users::Column::Username,
                UserV2OrderField::Email => users::Column::Email,
                UserV2OrderField::Status => users::Column::Status,
                UserV2OrderField::DomainName => users::Column::DomainName,
                UserV2OrderField::ProjectName => {
                    return Err(ApiError::bad_request(
                        "ordering users by project name is not supported by this server",
                    )
                    .into());
                }
            };
            let dir = match o.direction {
                OrderDirection::Asc => Order::Asc,
                OrderDirection::Desc => Order::Desc,
            };
            select = select.order_by(col, dir);
        }
        let rows = crate::graphql::context::page_rows(
            &state.read,
            select,
            (limit.or(first).unwrap_or(20), offset.unwrap_or(0)),
            None,
            &[],
            // After the asked order, a stable one: pages never repeat or skip a user.
            (users::Column::Uuid, Order::Asc),
        )
        .await?;
        let policies = crate::keypairs::main_policies(&state.read, &rows).await?;
        Ok(UserV2Connection {
            count,
            edges: with_policies(rows, &policies)
                .into_iter()
                .map(|u| UserV2Edge {
                    cursor: u.user.uuid.to_string(),
                    node: u,
                })
                .collect(),
        })
    }
}
