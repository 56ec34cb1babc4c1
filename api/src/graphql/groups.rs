//! GraphQL for groups (projects): `group`, `groups`, `create_group`, `modify_group`.
use async_graphql::{Context, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::groups;
use uuid::Uuid;

use crate::graphql::{context::authed, context::state, scalars::JsonString};

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
    /// Backend.AI's project resource policy: bai has none (null; the keypair's policy and the
    /// project's `total_resource_slots` bound its sessions).
    async fn resource_policy(&self) -> Option<String> {
        None
    }
    async fn integration_id(&self) -> Option<&str> {
        self.0.integration_id.as_deref()
    }
    #[graphql(name = "type")]
    async fn group_type(&self) -> &str {
        self.0.group_type.as_str()
    }
    /// Resource groups associated with this group.
    async fn scaling_groups(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Vec<String>> {
        let state = state(ctx)?;
        Ok(crate::groups::scaling_groups(&state.read, self.0.id).await?)
    }
}

#[derive(Default)]
pub struct GroupQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl GroupQuery {
    /// A group by id (in `domain_name`, when given) that the caller may see; null for any other.
    async fn group(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        domain_name: Option<String>,
    ) -> crate::graphql::context::Result<Option<Group>> {
        let (state, caller) = authed(ctx)?;
        // No such group, or one the caller may not see: null, as Backend.AI answers an unknown
        // id (its clients check `Group.detail` for None, e.g. after a purge).
        let g = match crate::groups::find_visible(&state.read, caller, id).await {
            Ok(g) => g,
            Err(e) if e.code == crate::error::ErrorCode::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if domain_name.is_some_and(|d| d != g.domain_name) {
            return Ok(None);
        }
        Ok(Some(Group(g)))
    }

    /// Admins: the groups of their scope. Users: the groups they belong to.
    async fn groups(
        &self,
        ctx: &Context<'_>,
        domain_name: Option<String>,
        is_active: Option<bool>,
        #[graphql(name = "type")] group_type: Option<Vec<Option<String>>>,
    ) -> crate::graphql::context::Result<Vec<Group>> {
        let (state, caller) = authed(ctx)?;
        let types = group_type.map(|t| t.into_iter().flatten().collect());
        Ok(
            crate::groups::list(&state.read, caller, domain_name, is_active, types)
                .await?
                .into_iter()
                .map(Group)
                .collect(),
        )
    }

    /// The projects called `name` the caller may see (as `groups` lists them), in
    /// `domain_name` when given (Backend.AI's `groups_by_name`).
    async fn groups_by_name(
        &self,
        ctx: &Context<'_>,
        name: String,
        domain_name: Option<String>,
    ) -> crate::graphql::context::Result<Vec<Group>> {
        let all = self.groups(ctx, domain_name, None, None).await?;
        Ok(all.into_iter().filter(|g| g.0.name == name).collect())
    }
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

impl From<GroupInput> for crate::groups::NewGroup {
    fn from(p: GroupInput) -> Self {
        Self {
            domain_name: p.domain_name,
            description: p.description,
            is_active: p.is_active,
            total_resource_slots: p.total_resource_slots.map(|v| v.0),
            allowed_vfolder_hosts: p.allowed_vfolder_hosts.map(|v| v.0),
            integration_id: p.integration_id,
            group_type: p.group_type,
        }
    }
}

impl From<ModifyGroupInput> for crate::groups::GroupChange {
    fn from(p: ModifyGroupInput) -> Self {
        Self {
            name: p.name,
            description: p.description,
            is_active: p.is_active,
            total_resource_slots: p.total_resource_slots.map(|v| v.0),
            allowed_vfolder_hosts: p.allowed_vfolder_hosts.map(|v| v.0),
            integration_id: p.integration_id,
            user_update_mode: p.user_update_mode,
            user_uuids: p.user_uuids,
        }
    }
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

#[derive(SimpleObject)]
pub struct PurgeGroup {
    pub ok: bool,
    pub msg: String,
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
    ) -> crate::graphql::context::Result<CreateGroup> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_admin()?;
        let g = crate::groups::create(state, &scope, &caller.email, &name, props.into()).await?;
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
    ) -> crate::graphql::context::Result<ModifyGroup> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_admin()?;
        let g = crate::groups::modify(state, &scope, &caller.email, gid, props.into()).await?;
        Ok(ModifyGroup {
            ok: true,
            msg: "success".into(),
            group: Some(Group(g)),
        })
    }

    /// Purges a project for good (Backend.AI's `purge_group`): refused while it has live
    /// sessions or folders, and for a domain's `default` project.
    async fn purge_group(
        &self,
        ctx: &Context<'_>,
        gid: Uuid,
    ) -> crate::graphql::context::Result<PurgeGroup> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_admin()?;
        crate::groups::purge(state, &scope, &caller.email, gid).await?;
        Ok(PurgeGroup {
            ok: true,
            msg: "success".into(),
        })
    }
}
