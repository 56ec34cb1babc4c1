//! Backend.AI 26's Relay shapes of sessions, which Lablup's Web UI 26 lists sessions with:
//! `compute_session_nodes(scope_id, first, offset, filter, order)` answering a connection of
//! `ComputeSessionNode`s (with their `kernel_nodes` and each kernel's `ImageNode`). Ids are
//! Relay global ids, `base64("ComputeSessionNode:<uuid>")`; `row_id` is the UUID. Who sees
//! which session is the one rule of `compute_session_list`.
use async_graphql::{Context, ID, InputValueError, Object, Scalar, ScalarType, SimpleObject};
use base64::Engine as _;
use chrono::{DateTime, Utc};
use entity::{images, kernels, sessions};
use sea_orm::{ColumnTrait, Order, QueryFilter};
use uuid::Uuid;

use super::slots_json;
use crate::error::ApiError;
use crate::graphql::context::{authed, state};
use crate::graphql::images::KVPair;
use crate::graphql::scalars::JsonString;

/// Relay's `Node`: what has a global id (Lablup's Web UI 26 spreads fragments on it).
#[derive(async_graphql::Interface)]
#[graphql(field(name = "id", ty = "ID"))]
pub enum Node {
    ComputeSessionNode(ComputeSessionNode),
    KernelNode(KernelNode),
    ImageNode(ImageNode),
    AgentNode(crate::graphql::agents::AgentNode),
    VirtualFolderNode(crate::graphql::folder_nodes::VirtualFolderNode),
    VFolder(crate::graphql::folder_nodes::VFolder),
    UserV2(crate::graphql::users_v2::UserV2),
    ProjectV2(crate::graphql::users_v2::ProjectV2),
}

/// A Relay global id: `base64("<type>:<id>")`.
pub fn global_id(kind: &str, id: impl std::fmt::Display) -> ID {
    ID(base64::engine::general_purpose::STANDARD.encode(format!("{kind}:{id}")))
}

/// Backend.AI's `GlobalIDField`: a Relay global id, `base64("<type>:<id>")`.
#[derive(Debug, Clone)]
pub struct GlobalIdField(pub String);

#[Scalar(name = "GlobalIDField")]
impl ScalarType for GlobalIdField {
    fn parse(value: async_graphql::Value) -> async_graphql::InputValueResult<Self> {
        match value {
            async_graphql::Value::String(s) => Ok(GlobalIdField(s)),
            other => Err(InputValueError::expected_type(other)),
        }
    }
    fn to_value(&self) -> async_graphql::Value {
        async_graphql::Value::String(self.0.clone())
    }
}

impl GlobalIdField {
    /// The local id of a global id (base64 of `Type:id`), whatever type it names — Backend.AI
    /// resolves a global id by its local part alone (its clients write
    /// `to_global_id("compute_session_node", id)` as well as `ComputeSessionNode:id`); anything
    /// that is not one is taken as a local id.
    pub fn local(&self) -> String {
        base64::engine::general_purpose::STANDARD
            .decode(self.0.as_str())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.split_once(':').map(|(_, id)| id.to_string()))
            .unwrap_or_else(|| self.0.clone())
    }
}

/// Backend.AI's `ScopeField`: `project:<uuid>`, `user:<uuid>` or `domain:<name>`.
#[derive(Debug, Clone)]
pub struct ScopeField(String);

/// What a `ScopeField` names.
pub enum Scope {
    Project(Uuid),
    User(Uuid),
    Domain(String),
}

impl ScopeField {
    /// The scope this names (BAD_REQUEST for anything else); with none, Backend.AI's older
    /// `project_id` argument.
    pub fn resolve(
        scope: Option<&ScopeField>,
        project_id: Option<Uuid>,
    ) -> Result<Option<Scope>, ApiError> {
        let Some(scope) = scope else {
            return Ok(project_id.map(Scope::Project));
        };
        let bad = || {
            ApiError::bad_request(format!(
                "'{}' is not a scope: project:<uuid>, user:<uuid> or domain:<name>",
                scope.0
            ))
        };
        let (kind, id) = scope.0.split_once(':').ok_or_else(bad)?;
        Ok(Some(match kind {
            "project" => Scope::Project(id.parse().map_err(|_| bad())?),
            "user" => Scope::User(id.parse().map_err(|_| bad())?),
            "domain" => Scope::Domain(id.to_string()),
            _ => return Err(bad()),
        }))
    }
}

#[Scalar(name = "ScopeField")]
impl ScalarType for ScopeField {
    fn parse(value: async_graphql::Value) -> async_graphql::InputValueResult<Self> {
        match value {
            async_graphql::Value::String(s) => Ok(ScopeField(s)),
            other => Err(InputValueError::expected_type(other)),
        }
    }
    fn to_value(&self) -> async_graphql::Value {
        async_graphql::Value::String(self.0.clone())
    }
}

fn scoped(
    select: sea_orm::Select<sessions::Entity>,
    scope: Option<Scope>,
) -> sea_orm::Select<sessions::Entity> {
    match scope {
        None => select,
        Some(Scope::Project(g)) => select.filter(sessions::Column::GroupId.eq(g)),
        Some(Scope::User(u)) => select.filter(sessions::Column::UserUuid.eq(u)),
        Some(Scope::Domain(d)) => select.filter(sessions::Column::DomainName.eq(d)),
    }
}

#[derive(SimpleObject)]
pub struct ComputeSessionEdge {
    node: ComputeSessionNode,
    cursor: String,
}

#[derive(SimpleObject)]
pub struct ComputeSessionConnection {
    count: u64,
    edges: Vec<ComputeSessionEdge>,
}

fn session_connection(rows: Vec<sessions::Model>, count: u64) -> ComputeSessionConnection {
    ComputeSessionConnection {
        count,
        edges: rows
            .into_iter()
            .map(|s| ComputeSessionEdge {
                cursor: s.id.to_string(),
                node: ComputeSessionNode(s),
            })
            .collect(),
    }
}

pub struct ComputeSessionNode(pub sessions::Model);

#[Object(rename_fields = "snake_case")]
impl ComputeSessionNode {
    async fn id(&self) -> ID {
        global_id("ComputeSessionNode", self.0.id)
    }
    async fn row_id(&self) -> Uuid {
        self.0.id
    }
    async fn name(&self) -> &str {
        &self.0.name
    }
    #[graphql(name = "type")]
    async fn session_type(&self) -> String {
        self.0.session_type.as_str().to_lowercase()
    }
    async fn status(&self) -> &str {
        self.0.status.as_str()
    }
    async fn status_info(&self) -> Option<&str> {
        self.0.status_info.as_deref()
    }
    async fn status_data(&self) -> Option<JsonString> {
        self.0.status_data.clone().map(JsonString)
    }
    async fn priority(&self) -> i32 {
        self.0.priority
    }
    async fn user_id(&self) -> Uuid {
        self.0.user_uuid
    }
    async fn project_id(&self) -> Uuid {
        self.0.group_id
    }
    async fn domain_name(&self) -> &str {
        &self.0.domain_name
    }
    async fn access_key(&self) -> &str {
        &self.0.access_key
    }
    async fn agent_ids(&self) -> Vec<String> {
        self.0.agent_ids.0.clone()
    }
    async fn scaling_group(&self) -> Option<&str> {
        self.0.scaling_group_name.as_deref()
    }
    async fn cluster_size(&self) -> i32 {
        self.0.cluster_size
    }
    async fn cluster_mode(&self) -> &str {
        self.0.cluster_mode.as_str()
    }
    async fn occupied_slots(&self) -> JsonString {
        slots_json(&self.0.occupying_slots)
    }
    async fn requested_slots(&self) -> JsonString {
        slots_json(&self.0.requested_slots)
    }
    async fn resource_opts(&self) -> JsonString {
        JsonString(self.0.resource_opts.clone())
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    async fn starts_at(&self) -> Option<DateTime<Utc>> {
        self.0.starts_at
    }
    async fn terminated_at(&self) -> Option<DateTime<Utc>> {
        self.0.terminated_at
    }
    /// The main container's apps, as `compute_session_list` answers them.
    async fn service_ports(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<JsonString> {
        let k = crate::sessions::main_kernel(&state(ctx)?.read, self.0.id).await?;
        Ok(JsonString(super::service_ports_json(&k)))
    }
    async fn tag(&self) -> Option<&str> {
        self.0.tag.as_deref()
    }
    async fn idle_checks(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<JsonString> {
        Ok(JsonString(
            crate::sessions::idle_checks(state(ctx)?, &self.0).await?,
        ))
    }
    async fn startup_command(&self) -> Option<&str> {
        self.0.startup_command.as_deref()
    }
    /// Whether a commit of the session to an image runs: `ongoing`, else `ready`.
    async fn commit_status(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<String> {
        Ok(crate::sessions::commit::status(state(ctx)?, &self.0)
            .await
            .map(|(s, _)| s)
            .unwrap_or("ready")
            .to_string())
    }
    async fn result(&self) -> &str {
        self.0.result.as_str()
    }
    /// The mounted folders' ids.
    async fn vfolder_mounts(&self) -> Vec<String> {
        self.0
            .vfolder_mounts
            .0
            .iter()
            .map(|m| m.id.to_string())
            .collect()
    }
    /// The images of the session's containers (`registry/name:tag`), as Backend.AI 25.4 names
    /// them.
    async fn image_references(&self) -> Vec<String> {
        self.0
            .images
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
    /// The sessions this one waits for.
    async fn dependees(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<ComputeSessionConnection> {
        let ids = crate::sessions::dependency_ids(&state(ctx)?.read, self.0.id).await?;
        related(ctx, ids).await
    }
    /// The sessions that wait for this one.
    async fn dependents(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<ComputeSessionConnection> {
        let ids = crate::sessions::dependent_ids(&state(ctx)?.read, self.0.id).await?;
        related(ctx, ids).await
    }
    async fn kernel_nodes(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<KernelConnection> {
        // Main first, then by local rank: the order of `cluster_idx` (main1, sub1, sub2, …).
        let ks = crate::sessions::kernels_of(&state(ctx)?.read, self.0.id).await?;
        Ok(KernelConnection {
            count: ks.len() as u64,
            edges: ks
                .into_iter()
                .map(|k| KernelEdge {
                    cursor: k.id.to_string(),
                    node: KernelNode(k),
                })
                .collect(),
        })
    }
}

/// Sessions by id that the caller may see, as a connection.
async fn related(
    ctx: &Context<'_>,
    ids: Vec<Uuid>,
) -> crate::graphql::context::Result<ComputeSessionConnection> {
    let (state, caller) = authed(ctx)?;
    let rows = crate::sessions::visible_among(&state.read, caller, ids).await?;
    let n = rows.len() as u64;
    Ok(session_connection(rows, n))
}

#[derive(SimpleObject)]
pub struct KernelEdge {
    node: KernelNode,
    cursor: String,
}

#[derive(SimpleObject)]
pub struct KernelConnection {
    count: u64,
    edges: Vec<KernelEdge>,
}

pub struct KernelNode(kernels::Model);

#[Object(rename_fields = "snake_case")]
impl KernelNode {
    async fn id(&self) -> ID {
        global_id("KernelNode", self.0.id)
    }
    async fn row_id(&self) -> Uuid {
        self.0.id
    }
    async fn agent_id(&self) -> Option<&str> {
        self.0.agent.as_deref()
    }
    async fn cluster_hostname(&self) -> &str {
        &self.0.cluster_hostname
    }
    async fn cluster_idx(&self) -> i32 {
        self.0.cluster_idx
    }
    async fn cluster_role(&self) -> &str {
        self.0.cluster_role.as_str()
    }
    async fn container_id(&self) -> Option<&str> {
        self.0.container_id.as_deref()
    }
    async fn status(&self) -> &str {
        self.0.status.as_str()
    }
    async fn status_info(&self) -> Option<&str> {
        self.0.status_info.as_deref()
    }
    /// Live measurements per container: none kept yet (null).
    async fn live_stat(&self) -> Option<JsonString> {
        None
    }
    /// The container's image reference (`registry/name:tag`), as the kernel was created.
    async fn image_reference(&self) -> &str {
        &self.0.image
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// The kernel's image as the catalog has it (null once the catalog forgot it).
    async fn image(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<Option<ImageNode>> {
        Ok(
            crate::images::find_named(&state(ctx)?.read, &self.0.image, &self.0.architecture)
                .await?
                .map(ImageNode),
        )
    }
}

pub struct ImageNode(pub(crate) images::Model);

#[Object(rename_fields = "snake_case")]
impl ImageNode {
    async fn id(&self) -> ID {
        global_id("ImageNode", self.0.id)
    }
    async fn row_id(&self) -> Uuid {
        self.0.id
    }
    /// The repository's last part (`python`).
    async fn base_image_name(&self) -> &str {
        self.0.image.rsplit('/').next().unwrap_or(&self.0.image)
    }
    /// The repository path without the registry (`stable/python`), as Backend.AI 24.12 names
    /// it, so that `{registry}/{namespace}:{tag}` is the reference.
    async fn namespace(&self) -> &str {
        &self.0.image
    }
    /// Backend.AI's older name of `namespace` (its CLI's service list asks it).
    async fn name(&self) -> &str {
        &self.0.image
    }
    async fn registry(&self) -> &str {
        &self.0.registry
    }
    async fn tag(&self) -> &str {
        &self.0.tag
    }
    async fn architecture(&self) -> &str {
        &self.0.architecture
    }
    /// The environment's version (`3.11` of `3.11-debian12`).
    async fn version(&self) -> String {
        crate::images::environment(&self.0.image, &self.0.tag, &self.0.labels).1
    }
    /// The tag's parts after the version (`debian12`), as Backend.AI splits them.
    async fn tags(&self) -> Vec<KVPair> {
        crate::graphql::images::tag_parts(&self.0)
    }
    async fn labels(&self) -> Vec<KVPair> {
        self.0
            .labels
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| KVPair {
                        key: k.clone(),
                        value: v.as_str().unwrap_or_default().to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[derive(Default)]
pub struct SessionNodeQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl SessionNodeQuery {
    /// The sessions the caller may see in `scope_id`, filtered and ordered in Backend.AI's
    /// languages (`first: 0` answers the count alone).
    async fn compute_session_nodes(
        &self,
        ctx: &Context<'_>,
        scope_id: Option<ScopeField>,
        first: Option<i32>,
        offset: Option<i32>,
        filter: Option<String>,
        order: Option<String>,
    ) -> crate::graphql::context::Result<ComputeSessionConnection> {
        let (state, caller) = authed(ctx)?;
        let scope = ScopeField::resolve(scope_id.as_ref(), None)?;
        let select = scoped(crate::sessions::visible(caller), scope);
        let select = super::filtered(select, filter)?;
        let count = {
            use sea_orm::PaginatorTrait;
            select
                .clone()
                .count(&state.read)
                .await
                .map_err(ApiError::from)?
        };
        let first = first.unwrap_or(20);
        if first <= 0 {
            return Ok(session_connection(Vec::new(), count));
        }
        let rows = crate::graphql::context::page_rows(
            &state.read,
            select,
            (first, offset.unwrap_or(0)),
            order.as_deref(),
            super::ORDERABLE,
            (sessions::Column::CreatedAt, Order::Desc),
        )
        .await?;
        Ok(session_connection(rows, count))
    }
    /// One session by its global id (or its UUID), if the caller may see it (and it lies in
    /// `scope_id` / `project_id` when given).
    async fn compute_session_node(
        &self,
        ctx: &Context<'_>,
        id: GlobalIdField,
        scope_id: Option<ScopeField>,
        #[graphql(desc = "Backend.AI's older form of `scope_id: \"project:<uuid>\"`")]
        project_id: Option<Uuid>,
        #[graphql(desc = "accepted: bai answers what the caller may read")] _permission: Option<
            String,
        >,
    ) -> crate::graphql::context::Result<ComputeSessionNode> {
        let (state, caller) = authed(ctx)?;
        let not_found = || ApiError::not_found("session", &id.0);
        let uuid = id.local().parse::<Uuid>().map_err(|_| not_found())?;
        let scope = ScopeField::resolve(scope_id.as_ref(), project_id)?;
        let select = crate::sessions::visible(caller).filter(sessions::Column::Id.eq(uuid));
        let s = scoped(select, scope)
            .one(&state.read)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(not_found)?;
        Ok(ComputeSessionNode(s))
    }
}
