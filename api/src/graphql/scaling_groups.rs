//! GraphQL for resource groups: `scaling_group(s)`, create/modify/delete, and the
//! associations with domains, groups and keypairs.
use async_graphql::{Context, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::enums::AgentStatus;
use entity::scaling_groups as sg;
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::graphql::{context::authed, context::state, scalars::JsonString};
use crate::scaling_groups::{Link, ScalingGroupChange};

pub struct ScalingGroup(pub sg::Model);

#[Object(rename_fields = "snake_case")]
impl ScalingGroup {
    async fn name(&self) -> &str {
        &self.0.name
    }
    async fn description(&self) -> Option<&str> {
        self.0.description.as_deref()
    }
    /// The step a console offers for a fractional GPU request (`cuda.shares`): bai takes any
    /// fraction, and shows shares with two decimals.
    async fn accelerator_quantum_size(&self) -> f64 {
        0.01
    }
    async fn is_active(&self) -> bool {
        self.0.is_active
    }
    async fn is_public(&self) -> bool {
        self.0.is_public
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    async fn wsproxy_addr(&self) -> Option<&str> {
        self.0.wsproxy_addr.as_deref()
    }
    async fn driver(&self) -> &str {
        &self.0.driver
    }
    async fn driver_opts(&self) -> JsonString {
        JsonString(self.0.driver_opts.clone())
    }
    /// fifo, lifo or drf.
    async fn scheduler(&self) -> &str {
        self.0.scheduler.as_str()
    }
    /// The scheduler's options, with Backend.AI's defaults for those not set.
    async fn scheduler_opts(&self) -> JsonString {
        let mut opts = serde_json::json!({
            "allowed_session_types": ["interactive", "batch"],
            "pending_timeout": 0.0,
            "config": {},
            "agent_selection_strategy": "dispersed",
            "roundrobin": false,
        });
        if let (Some(all), Some(set)) = (opts.as_object_mut(), self.0.scheduler_opts.as_object()) {
            for (k, v) in set {
                all.insert(k.clone(), v.clone());
            }
        }
        JsonString(opts)
    }
    /// Backend.AI's app proxy token: bai proxies apps itself (null).
    async fn wsproxy_api_token(&self) -> Option<String> {
        None
    }
    async fn use_host_network(&self) -> bool {
        self.0.use_host_network
    }
    /// Number of agents in this resource group with the given status (default ALIVE).
    async fn agent_count_by_status(
        &self,
        ctx: &Context<'_>,
        status: Option<String>,
    ) -> crate::graphql::context::Result<u64> {
        let state = state(ctx)?;
        let status = match status {
            Some(s) => AgentStatus::parse(&s).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "invalid agent status '{s}' (one of: {})",
                    AgentStatus::choices()
                ))
            })?,
            None => AgentStatus::Alive,
        };
        Ok(crate::agents::count_in(&state.read, &self.0.name, status).await?)
    }
}

#[derive(Default)]
pub struct ScalingGroupQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl ScalingGroupQuery {
    /// A resource group by name (users see only the ones they may use).
    async fn scaling_group(
        &self,
        ctx: &Context<'_>,
        name: Option<String>,
    ) -> crate::graphql::context::Result<ScalingGroup> {
        let (state, caller) = authed(ctx)?;
        let name = name.ok_or_else(|| ApiError::bad_request("'name' is required"))?;
        let s = crate::scaling_groups::find_visible(&state.read, caller, &name).await?;
        Ok(ScalingGroup(s))
    }

    async fn scaling_groups(
        &self,
        ctx: &Context<'_>,
        name: Option<String>,
        is_active: Option<bool>,
    ) -> crate::graphql::context::Result<Vec<ScalingGroup>> {
        let (state, caller) = authed(ctx)?;
        Ok(
            crate::scaling_groups::visible(&state.read, caller, name, is_active)
                .await?
                .into_iter()
                .map(ScalingGroup)
                .collect(),
        )
    }

    /// Active resource groups usable from a group (project), for the launch dialog.
    async fn scaling_groups_for_user_group(
        &self,
        ctx: &Context<'_>,
        user_group: Uuid,
    ) -> crate::graphql::context::Result<Vec<ScalingGroup>> {
        let (state, caller) = authed(ctx)?;
        Ok(usable_from(state, caller, user_group).await?)
    }

    /// Backend.AI's `accessible_scaling_groups`: the resource groups the caller may launch
    /// sessions in from a project (Lablup's Web UI 26 launcher).
    async fn accessible_scaling_groups(
        &self,
        ctx: &Context<'_>,
        project_id: Uuid,
    ) -> crate::graphql::context::Result<Vec<ScalingGroup>> {
        let (state, caller) = authed(ctx)?;
        Ok(usable_from(state, caller, project_id).await?)
    }
}

/// The resource groups `caller` may use from project `group` (NOT_FOUND for a project the
/// caller cannot see).
async fn usable_from(
    state: &crate::state::AppState,
    caller: &Caller,
    group: Uuid,
) -> ApiResult<Vec<ScalingGroup>> {
    let g = crate::groups::find_visible(&state.read, caller, group).await?;
    let rows = crate::scaling_groups::usable_from(&state.read, caller, &g).await?;
    Ok(rows.into_iter().map(ScalingGroup).collect())
}

/// Backend.AI's app-proxy token is refused: bai proxies apps itself (empty is fine).
fn no_wsproxy_token(t: Option<&str>) -> ApiResult<()> {
    match t {
        Some(t) if !t.is_empty() => Err(ApiError::bad_request(
            "An app-proxy token (wsproxy_api_token) is not supported by this server: bai proxies apps itself",
        )),
        _ => Ok(()),
    }
}

/// A new resource group (Backend.AI's `CreateScalingGroupInput`).
#[derive(InputObject)]
#[graphql(name = "CreateScalingGroupInput", rename_fields = "snake_case")]
pub struct ScalingGroupInput {
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub is_public: Option<bool>,
    pub wsproxy_addr: Option<String>,
    /// Accepted as Backend.AI's clients send it; bai proxies apps itself (null only).
    pub wsproxy_api_token: Option<String>,
    pub driver: String,
    pub driver_opts: Option<JsonString>,
    pub scheduler: String,
    pub scheduler_opts: Option<JsonString>,
    pub use_host_network: Option<bool>,
}

#[derive(InputObject, Default)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyScalingGroupInput {
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub is_public: Option<bool>,
    pub wsproxy_addr: Option<String>,
    /// Accepted as Backend.AI's clients send it; null only.
    pub wsproxy_api_token: Option<String>,
    pub driver: Option<String>,
    pub driver_opts: Option<JsonString>,
    pub scheduler: Option<String>,
    pub scheduler_opts: Option<JsonString>,
    pub use_host_network: Option<bool>,
}

impl From<ModifyScalingGroupInput> for ScalingGroupChange {
    fn from(p: ModifyScalingGroupInput) -> Self {
        Self {
            description: p.description,
            is_active: p.is_active,
            is_public: p.is_public,
            wsproxy_addr: p.wsproxy_addr,
            driver: p.driver,
            driver_opts: p.driver_opts.map(|v| v.0),
            scheduler: p.scheduler,
            scheduler_opts: p.scheduler_opts.map(|v| v.0),
            use_host_network: p.use_host_network,
        }
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ScalingGroupResult {
    pub ok: bool,
    pub msg: String,
    pub scaling_group: Option<ScalingGroup>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct AssociationResult {
    pub ok: bool,
    pub msg: String,
}

async fn set_link(
    ctx: &Context<'_>,
    scaling_group: String,
    link: Link,
    associate: bool,
) -> crate::graphql::context::Result<AssociationResult> {
    let (state, caller) = authed(ctx)?;
    let scope = caller.require_superadmin()?;
    crate::scaling_groups::set_link(state, &scope, &scaling_group, link, associate).await?;
    Ok(AssociationResult {
        ok: true,
        msg: "success".into(),
    })
}

#[derive(Default)]
pub struct ScalingGroupMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl ScalingGroupMutation {
    async fn create_scaling_group(
        &self,
        ctx: &Context<'_>,
        name: String,
        props: ScalingGroupInput,
    ) -> crate::graphql::context::Result<ScalingGroupResult> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        no_wsproxy_token(props.wsproxy_api_token.as_deref())?;
        let change = ScalingGroupChange {
            description: props.description,
            is_active: props.is_active,
            is_public: props.is_public,
            wsproxy_addr: props.wsproxy_addr,
            driver: None,
            driver_opts: props.driver_opts.map(|v| v.0),
            scheduler: None,
            scheduler_opts: props.scheduler_opts.map(|v| v.0),
            use_host_network: props.use_host_network,
        };
        let s = crate::scaling_groups::create(
            state,
            &scope,
            &name,
            &props.driver,
            &props.scheduler,
            change,
        )
        .await?;
        Ok(ScalingGroupResult {
            ok: true,
            msg: "success".into(),
            scaling_group: Some(ScalingGroup(s)),
        })
    }

    async fn modify_scaling_group(
        &self,
        ctx: &Context<'_>,
        name: String,
        props: ModifyScalingGroupInput,
    ) -> crate::graphql::context::Result<ScalingGroupResult> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        no_wsproxy_token(props.wsproxy_api_token.as_deref())?;
        let s = crate::scaling_groups::modify(state, &scope, &name, props.into()).await?;
        Ok(ScalingGroupResult {
            ok: true,
            msg: "success".into(),
            scaling_group: Some(ScalingGroup(s)),
        })
    }

    /// Deletes a resource group; refused while agents or live sessions are in it.
    async fn delete_scaling_group(
        &self,
        ctx: &Context<'_>,
        name: String,
    ) -> crate::graphql::context::Result<AssociationResult> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        crate::scaling_groups::delete(state, &scope, &name).await?;
        Ok(AssociationResult {
            ok: true,
            msg: "success".into(),
        })
    }

    async fn associate_scaling_group_with_domain(
        &self,
        ctx: &Context<'_>,
        scaling_group: String,
        domain: String,
    ) -> crate::graphql::context::Result<AssociationResult> {
        set_link(ctx, scaling_group, Link::Domain(domain), true).await
    }
    async fn disassociate_scaling_group_with_domain(
        &self,
        ctx: &Context<'_>,
        scaling_group: String,
        domain: String,
    ) -> crate::graphql::context::Result<AssociationResult> {
        set_link(ctx, scaling_group, Link::Domain(domain), false).await
    }
    async fn associate_scaling_group_with_user_group(
        &self,
        ctx: &Context<'_>,
        scaling_group: String,
        user_group: Uuid,
    ) -> crate::graphql::context::Result<AssociationResult> {
        set_link(ctx, scaling_group, Link::Group(user_group), true).await
    }
    async fn disassociate_scaling_group_with_user_group(
        &self,
        ctx: &Context<'_>,
        scaling_group: String,
        user_group: Uuid,
    ) -> crate::graphql::context::Result<AssociationResult> {
        set_link(ctx, scaling_group, Link::Group(user_group), false).await
    }
    async fn associate_scaling_group_with_keypair(
        &self,
        ctx: &Context<'_>,
        scaling_group: String,
        access_key: String,
    ) -> crate::graphql::context::Result<AssociationResult> {
        set_link(ctx, scaling_group, Link::Keypair(access_key), true).await
    }
    async fn disassociate_scaling_group_with_keypair(
        &self,
        ctx: &Context<'_>,
        scaling_group: String,
        access_key: String,
    ) -> crate::graphql::context::Result<AssociationResult> {
        set_link(ctx, scaling_group, Link::Keypair(access_key), false).await
    }
}
