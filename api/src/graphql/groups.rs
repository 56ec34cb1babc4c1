//! GraphQL for groups (projects): `group`, `groups`, `create_group`, `modify_group`.
use async_graphql::{Context, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::enums::GroupType;
use entity::{association_groups_users, groups, sgroups_for_groups, users};
use sea_orm::sea_query::{Expr, Query as SqlQuery};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder, Set,
};
use serde_json::json;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::graphql::{JsonString, authed, state};

pub struct Group(pub groups::Model);

#[Object(rename_fields = "snake_case")]
impl Group {
    async fn id(&self) -> Uuid {
        self.0.id
    }
    async fn name(&self) -> &str {
        &self.0.name
    }
    async fn description(&self) -> Option<&str> {
        self.0.description.as_deref()
    }
    async fn is_active(&self) -> bool {
        self.0.is_active
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
    async fn total_resource_slots(&self) -> JsonString {
        JsonString(serde_json::to_value(&self.0.total_resource_slots).unwrap_or_default())
    }
    async fn allowed_vfolder_hosts(&self) -> JsonString {
        JsonString(self.0.allowed_vfolder_hosts.clone())
    }
    async fn integration_id(&self) -> Option<&str> {
        self.0.integration_id.as_deref()
    }
    #[graphql(name = "type")]
    async fn group_type(&self) -> &str {
        self.0.group_type.as_str()
    }
    /// Resource groups associated with this group.
    async fn scaling_groups(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<String>> {
        let state = state(ctx)?;
        Ok(sgroups_for_groups::Entity::find()
            .filter(sgroups_for_groups::Column::Group.eq(self.0.id))
            .all(&state.db)
            .await
            .map_err(ApiError::from)?
            .into_iter()
            .map(|s| s.scaling_group)
            .collect())
    }
}

#[derive(Default)]
pub struct GroupQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl GroupQuery {
    async fn group(&self, ctx: &Context<'_>, id: Uuid) -> async_graphql::Result<Group> {
        let (state, caller) = authed(ctx)?;
        Ok(Group(
            crate::groups::find_visible(&state.db, caller, id).await?,
        ))
    }

    /// Admins: the groups of their scope. Users: the groups they belong to.
    async fn groups(
        &self,
        ctx: &Context<'_>,
        domain_name: Option<String>,
        is_active: Option<bool>,
        #[graphql(name = "type")] group_type: Option<Vec<String>>,
    ) -> async_graphql::Result<Vec<Group>> {
        let (state, caller) = authed(ctx)?;
        let mut select = groups::Entity::find().order_by_asc(groups::Column::Name);
        match caller.admin_scope() {
            Some(scope) => {
                if let Some(d) = scope.domain() {
                    select = select.filter(groups::Column::DomainName.eq(d));
                }
            }
            None => {
                select = select.filter(
                    groups::Column::Id.in_subquery(
                        SqlQuery::select()
                            .column(association_groups_users::Column::GroupId)
                            .from(association_groups_users::Entity)
                            .and_where(
                                Expr::col(association_groups_users::Column::UserId).eq(caller.uuid),
                            )
                            .to_owned(),
                    ),
                )
            }
        }
        if let Some(d) = domain_name {
            select = select.filter(groups::Column::DomainName.eq(d));
        }
        if let Some(a) = is_active {
            select = select.filter(groups::Column::IsActive.eq(a));
        }
        if let Some(types) = group_type {
            let parsed = types
                .iter()
                .map(|t| parse_type(t))
                .collect::<ApiResult<Vec<_>>>()?;
            select = select.filter(groups::Column::GroupType.is_in(parsed));
        }
        Ok(select
            .all(&state.db)
            .await
            .map_err(ApiError::from)?
            .into_iter()
            .map(Group)
            .collect())
    }
}

fn parse_type(s: &str) -> ApiResult<GroupType> {
    GroupType::parse(s).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid group type '{s}' (one of: {})",
            GroupType::choices()
        ))
    })
}

#[derive(InputObject)]
#[graphql(rename_fields = "snake_case")]
pub struct GroupInput {
    pub domain_name: String,
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub total_resource_slots: Option<JsonString>,
    pub allowed_vfolder_hosts: Option<JsonString>,
    pub integration_id: Option<String>,
    #[graphql(name = "type")]
    pub group_type: Option<String>,
}

#[derive(InputObject, Default)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyGroupInput {
    pub name: Option<String>,
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub total_resource_slots: Option<JsonString>,
    pub allowed_vfolder_hosts: Option<JsonString>,
    pub integration_id: Option<String>,
    /// `add` or `remove` the users in `user_uuids`.
    pub user_update_mode: Option<String>,
    pub user_uuids: Option<Vec<Uuid>>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CreateGroup {
    pub ok: bool,
    pub msg: String,
    pub group: Option<Group>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyGroup {
    pub ok: bool,
    pub msg: String,
    pub group: Option<Group>,
}

#[derive(Default)]
pub struct GroupMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl GroupMutation {
    /// Creates a group in a domain (admins of that domain).
    async fn create_group(
        &self,
        ctx: &Context<'_>,
        name: String,
        props: GroupInput,
    ) -> async_graphql::Result<CreateGroup> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_admin()?;
        if !scope.covers_domain(&props.domain_name) {
            return Err(ApiError::not_found("domain", &props.domain_name).into());
        }
        if entity::domains::Entity::find_by_id(props.domain_name.clone())
            .one(&state.db)
            .await
            .map_err(ApiError::from)?
            .is_none()
        {
            return Err(ApiError::not_found("domain", &props.domain_name).into());
        }
        let name = crate::validate::object_name("group", &name)?;
        let taken = groups::Entity::find()
            .filter(groups::Column::DomainName.eq(&props.domain_name))
            .filter(groups::Column::Name.eq(&name))
            .one(&state.db)
            .await
            .map_err(ApiError::from)?;
        if taken.is_some() {
            return Err(ApiError::conflict(format!(
                "Group '{name}' already exists in domain '{}'",
                props.domain_name
            ))
            .into());
        }
        let now = state.clock.now();
        let m = groups::ActiveModel {
            id: Set(Uuid::new_v4()),
            name: Set(name),
            description: Set(props.description),
            is_active: Set(props.is_active.unwrap_or(true)),
            created_at: Set(now),
            modified_at: Set(now),
            domain_name: Set(props.domain_name),
            total_resource_slots: Set(props
                .total_resource_slots
                .map(|v| crate::policies::parse_limits(&v.0))
                .transpose()?
                .unwrap_or_default()),
            allowed_vfolder_hosts: Set(props
                .allowed_vfolder_hosts
                .map(|v| crate::policies::normalize_allowed_hosts(&v.0))
                .transpose()?
                .unwrap_or_else(|| json!({}))),
            integration_id: Set(props.integration_id),
            group_type: Set(props
                .group_type
                .as_deref()
                .map(parse_type)
                .transpose()?
                .unwrap_or(GroupType::General)),
        };
        let g = crate::audit::audited(
            &state.db,
            &caller.email,
            "create_group",
            "group",
            move |txn| {
                Box::pin(async move {
                    let g = m.insert(txn).await?;
                    let key = g.id.to_string();
                    Ok((g, key, json!({})))
                })
            },
        )
        .await?;
        state.events.changed(
            ObjectKind::Group,
            ChangeAction::Created,
            g.id.to_string(),
            Some(g.domain_name.clone()),
        );
        Ok(CreateGroup {
            ok: true,
            msg: "success".into(),
            group: Some(Group(g)),
        })
    }

    /// Modifies a group and (with `user_update_mode`) its members.
    async fn modify_group(
        &self,
        ctx: &Context<'_>,
        gid: Uuid,
        props: ModifyGroupInput,
    ) -> async_graphql::Result<ModifyGroup> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_admin()?;
        let existing = groups::Entity::find_by_id(gid)
            .one(&state.db)
            .await
            .map_err(ApiError::from)?
            .filter(|g| scope.covers_domain(&g.domain_name))
            .ok_or_else(|| ApiError::not_found("group", gid))?;
        let domain = existing.domain_name.clone();
        let mode = match (props.user_update_mode.as_deref(), &props.user_uuids) {
            (None, None) => None,
            (Some(m @ ("add" | "remove")), Some(_)) => Some(m.to_string()),
            (Some(other), Some(_)) => {
                return Err(ApiError::bad_request(format!(
                    "user_update_mode must be 'add' or 'remove', not '{other}'"
                ))
                .into());
            }
            _ => {
                return Err(
                    ApiError::bad_request("user_update_mode and user_uuids go together").into(),
                );
            }
        };
        let new_name = props
            .name
            .as_deref()
            .map(|n| crate::validate::object_name("group", n))
            .transpose()?;
        if let Some(n) = &new_name {
            let taken = groups::Entity::find()
                .filter(groups::Column::DomainName.eq(&domain))
                .filter(groups::Column::Name.eq(n))
                .filter(groups::Column::Id.ne(gid))
                .one(&state.db)
                .await
                .map_err(ApiError::from)?;
            if taken.is_some() {
                return Err(ApiError::conflict(format!(
                    "Group '{n}' already exists in domain '{domain}'"
                ))
                .into());
            }
        }
        let mut m = existing.into_active_model();
        if let Some(v) = new_name {
            m.name = Set(v);
        }
        if let Some(v) = props.description {
            m.description = Set(Some(v));
        }
        if let Some(v) = props.is_active {
            m.is_active = Set(v);
        }
        if let Some(v) = props.total_resource_slots {
            m.total_resource_slots = Set(crate::policies::parse_limits(&v.0)?);
        }
        if let Some(v) = props.allowed_vfolder_hosts {
            m.allowed_vfolder_hosts = Set(crate::policies::normalize_allowed_hosts(&v.0)?);
        }
        if let Some(v) = props.integration_id {
            m.integration_id = Set(Some(v));
        }
        m.modified_at = Set(state.clock.now());
        let user_uuids = props.user_uuids.unwrap_or_default();
        let g = crate::audit::audited(
            &state.db,
            &caller.email,
            "modify_group",
            "group",
            move |txn| {
                Box::pin(async move {
                    let g = m.update(txn).await?;
                    if let Some(mode) = &mode {
                        for u in &user_uuids {
                            let user = users::Entity::find_by_id(*u).one(txn).await?;
                            if user.is_none_or(|u| u.domain_name != domain) {
                                return Err(ApiError::not_found("user", u));
                            }
                            let member = crate::groups::is_member(txn, *u, gid).await?;
                            if mode == "add" && !member {
                                association_groups_users::ActiveModel {
                                    user_id: Set(*u),
                                    group_id: Set(gid),
                                }
                                .insert(txn)
                                .await?;
                            } else if mode == "remove" && member {
                                association_groups_users::Entity::delete_many()
                                    .filter(association_groups_users::Column::UserId.eq(*u))
                                    .filter(association_groups_users::Column::GroupId.eq(gid))
                                    .exec(txn)
                                    .await?;
                            }
                        }
                    }
                    let key = g.id.to_string();
                    Ok((
                        g,
                        key,
                        json!({"user_update_mode": mode, "users": user_uuids}),
                    ))
                })
            },
        )
        .await?;
        state.events.changed(
            ObjectKind::Group,
            ChangeAction::Modified,
            g.id.to_string(),
            Some(g.domain_name.clone()),
        );
        Ok(ModifyGroup {
            ok: true,
            msg: "success".into(),
            group: Some(Group(g)),
        })
    }
}
