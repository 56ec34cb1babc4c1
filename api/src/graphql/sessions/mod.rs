//! GraphQL for compute sessions: `compute_session_list`, `compute_session` (Backend.AI's
//! names and fields), `create_session`, `destroy_session(s)`, `start_service`,
//! `session_logs`, and the owner-scoped subscriptions `session_status_changes` and
//! `session_stats`. Code run inside a session is in `execution`, what a caller may still
//! allocate in `usage`.
// Resolver arguments mirror Backend.AI's GraphQL signatures, however many there are.
#![allow(clippy::too_many_arguments)]
mod execution;
mod nodes;
mod usage;

pub use execution::{ExecutionMutation, ExecutionQuery, ExecutionSubscription};
pub use nodes::{GlobalIdField, ImageNode, Node, Scope, ScopeField, SessionNodeQuery, global_id};
pub use usage::UsageQuery;
pub(crate) use usage::resource_usage;

use std::collections::BTreeMap;
use std::time::Duration;

use async_graphql::{Context, InputObject, Object, SimpleObject, Subscription};
use chrono::{DateTime, Utc};
use entity::enums::{SessionStatus, SessionType};
use entity::slots::ResourceSlots;
use entity::{kernels, sessions};
use futures_util::{Stream, StreamExt};
use sea_orm::{ColumnTrait, Order, QueryFilter};
use serde_json::Value;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::graphql::{context::authed, context::state, scalars::BigInt, scalars::JsonString};
use crate::sessions::{find_visible, visible};

pub struct ComputeSession(pub sessions::Model);

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ComputeContainer {
    pub id: Uuid,
    pub kernel_id: Uuid,
    pub session_id: Uuid,
    pub cluster_role: String,
    pub cluster_idx: i32,
    pub cluster_hostname: String,
    pub image: String,
    pub architecture: String,
    pub registry: String,
    pub status: String,
    pub status_changed: DateTime<Utc>,
    pub status_info: Option<String>,
    pub agent: Option<String>,
    pub agent_addr: Option<String>,
    pub container_id: Option<String>,
    pub occupied_slots: JsonString,
    pub requested_slots: JsonString,
    pub exit_code: Option<i32>,
    pub last_stat: Option<JsonString>,
    /// The container's live measurements (none kept per container yet: null).
    pub live_stat: Option<JsonString>,
    pub status_data: Option<JsonString>,
    /// Shared memory (`shmem`) and the GPUs it was given.
    pub resource_opts: JsonString,
    /// Backend.AI's ports opened at creation for the session's own servers (bai opens none:
    /// its apps are reached through the app proxy).
    pub preopen_ports: Vec<i32>,
}

fn slots_json(s: &ResourceSlots) -> JsonString {
    JsonString(serde_json::to_value(s).unwrap_or_default())
}

impl From<kernels::Model> for ComputeContainer {
    fn from(k: kernels::Model) -> Self {
        Self {
            id: k.id,
            kernel_id: k.id,
            session_id: k.session_id,
            cluster_role: k.cluster_role.as_str().into(),
            cluster_idx: k.cluster_idx,
            cluster_hostname: k.cluster_hostname,
            image: k.image,
            architecture: k.architecture,
            registry: k.registry,
            status: k.status.as_str().into(),
            status_changed: k.status_changed,
            status_info: k.status_info,
            agent: k.agent,
            agent_addr: k.agent_addr,
            container_id: k.container_id,
            occupied_slots: slots_json(&k.occupied_slots),
            requested_slots: slots_json(&k.requested_slots),
            exit_code: k.exit_code,
            last_stat: k.last_stat.map(JsonString),
            live_stat: None,
            status_data: k.status_data.map(JsonString),
            resource_opts: JsonString(k.resource_opts),
            preopen_ports: Vec::new(),
        }
    }
}

#[Object(rename_fields = "snake_case")]
impl ComputeSession {
    async fn id(&self) -> Uuid {
        self.0.id
    }
    async fn session_id(&self) -> Uuid {
        self.0.id
    }
    async fn name(&self) -> &str {
        &self.0.name
    }
    #[graphql(name = "type")]
    async fn session_type(&self) -> &str {
        self.0.session_type.as_str()
    }
    /// The environment image reference.
    async fn image(&self) -> String {
        self.0
            .images
            .get(0)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    }
    async fn cluster_mode(&self) -> &str {
        self.0.cluster_mode.as_str()
    }
    async fn cluster_size(&self) -> i32 {
        self.0.cluster_size
    }
    async fn priority(&self) -> i32 {
        self.0.priority
    }
    async fn tag(&self) -> Option<&str> {
        self.0.tag.as_deref()
    }
    async fn domain_name(&self) -> &str {
        &self.0.domain_name
    }
    async fn group_id(&self) -> Uuid {
        self.0.group_id
    }
    async fn group_name(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Option<String>> {
        crate::graphql::context::group_name(ctx, self.0.group_id).await
    }
    async fn user_id(&self) -> Uuid {
        self.0.user_uuid
    }
    async fn user_email(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Option<String>> {
        crate::graphql::context::user_email(ctx, self.0.user_uuid).await
    }
    async fn access_key(&self) -> &str {
        &self.0.access_key
    }
    async fn status(&self) -> &str {
        self.0.status.as_str()
    }
    async fn status_changed(&self) -> DateTime<Utc> {
        self.0.status_changed
    }
    /// Why: `predicate-checks-failed`, `no-available-instances`, `user-requested`, …
    async fn status_info(&self) -> Option<&str> {
        self.0.status_info.as_deref()
    }
    /// For pending sessions: `{"scheduler": {"failed_predicates": [{name, msg}], …}}`; after
    /// a batch run: `{"kernel": {"exit_code": N}}`.
    async fn status_data(&self) -> Option<JsonString> {
        self.0.status_data.clone().map(JsonString)
    }
    /// `{STATUS: ISO time}` for every status the session went through.
    async fn status_history(&self) -> JsonString {
        JsonString(self.0.status_history.clone())
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    async fn scheduled_at(&self) -> Option<DateTime<Utc>> {
        self.0
            .status_history
            .get("SCHEDULED")
            .and_then(Value::as_str)
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.to_utc())
    }
    async fn terminated_at(&self) -> Option<DateTime<Utc>> {
        self.0.terminated_at
    }
    async fn starts_at(&self) -> Option<DateTime<Utc>> {
        self.0.starts_at
    }
    /// Names of the environment variables the session was started with (values stay out
    /// of lists and panels).
    async fn environ_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .0
            .environ
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        names.sort();
        names
    }
    async fn startup_command(&self) -> Option<&str> {
        self.0.startup_command.as_deref()
    }
    /// undefined, success or failure.
    async fn result(&self) -> &str {
        self.0.result.as_str()
    }
    async fn agent_ids(&self) -> Vec<String> {
        self.0.agent_ids.0.clone()
    }
    async fn scaling_group(&self) -> Option<&str> {
        self.0.scaling_group_name.as_deref()
    }
    async fn resource_opts(&self) -> JsonString {
        JsonString(self.0.resource_opts.clone())
    }
    /// The mounted folders; where they live on the host is for superadmins only.
    async fn vfolder_mounts(&self, ctx: &Context<'_>) -> JsonString {
        let mut mounts = serde_json::to_value(&self.0.vfolder_mounts).unwrap_or(Value::Null);
        let superadmin = crate::graphql::context::caller(ctx).is_ok_and(|c| c.is_superadmin());
        if !superadmin && let Some(list) = mounts.as_array_mut() {
            for m in list {
                if let Some(o) = m.as_object_mut() {
                    o.remove("host_path");
                }
            }
        }
        JsonString(mounts)
    }
    async fn requested_slots(&self) -> JsonString {
        slots_json(&self.0.requested_slots)
    }
    /// What the session holds on its agent while it runs.
    async fn occupying_slots(&self) -> JsonString {
        slots_json(&self.0.occupying_slots)
    }
    async fn occupied_slots(&self) -> JsonString {
        slots_json(&self.0.occupying_slots)
    }
    async fn num_queries(&self) -> BigInt {
        BigInt(self.0.num_queries)
    }
    /// The app launcher's entries: the image's service ports and the built-in terminal.
    async fn apps(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<Vec<ServicePort>> {
        let k = crate::sessions::main_kernel(&state(ctx)?.read, self.0.id).await?;
        Ok(
            crate::sessions::apps::apps(k.service_ports.as_str().unwrap_or_default())
                .into_iter()
                .map(ServicePort)
                .collect(),
        )
    }
    /// Backend.AI's `service_ports`: the main container's apps as a JSON array of
    /// `{name, protocol, container_ports}` (what Lablup's Console 21.02 lists).
    async fn service_ports(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<JsonString> {
        let k = crate::sessions::main_kernel(&state(ctx)?.read, self.0.id).await?;
        Ok(JsonString(service_ports_json(&k)))
    }
    /// Backend.AI's `mounts`: the names of the folders mounted.
    async fn mounts(&self) -> Vec<String> {
        self.0
            .vfolder_mounts
            .0
            .iter()
            .map(|m| m.name.clone())
            .collect()
    }
    /// The CPU architecture the main container runs on (its image's).
    async fn architecture(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Option<String>> {
        Ok(crate::sessions::main_kernel(&state(ctx)?.read, self.0.id)
            .await
            .ok()
            .map(|k| k.architecture))
    }
    /// The main container's kernel id.
    async fn main_kernel_id(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Option<Uuid>> {
        Ok(crate::sessions::main_kernel(&state(ctx)?.read, self.0.id)
            .await
            .ok()
            .map(|k| k.id))
    }
    /// For each limit of the keypair policy, the seconds left before it ends the session
    /// (`network_timeout`: idle time, `session_lifetime`: age).
    async fn idle_checks(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<JsonString> {
        Ok(JsonString(
            crate::sessions::idle_checks(state(ctx)?, &self.0).await?,
        ))
    }
    /// The sessions this one waits for (they must end in success before it starts).
    async fn dependencies(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Vec<ComputeSession>> {
        let deps = crate::sessions::dependencies(&state(ctx)?.read, self.0.id).await?;
        Ok(deps.into_iter().map(ComputeSession).collect())
    }
    async fn containers(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Vec<ComputeContainer>> {
        let ks = crate::sessions::kernels_of(&state(ctx)?.read, self.0.id).await?;
        Ok(ks.into_iter().map(ComputeContainer::from).collect())
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ComputeSessionList {
    pub items: Vec<ComputeSession>,
    pub total_count: u64,
}

/// `"RUNNING,PENDING"` → statuses.
/// An app of the launcher (the service's `apps::ServicePort`, as GraphQL shows it).
pub struct ServicePort(pub crate::sessions::apps::ServicePort);

#[Object(name = "ServicePort", rename_fields = "snake_case")]
impl ServicePort {
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// http, tcp, pty or preopen.
    async fn protocol(&self) -> &str {
        &self.0.protocol
    }
    async fn container_port(&self) -> Option<u16> {
        self.0.container_port
    }
}

/// The main container's apps as Backend.AI's `service_ports`: a JSON array of
/// `{name, protocol, container_ports}`.
fn service_ports_json(k: &kernels::Model) -> Value {
    let apps = crate::sessions::apps::apps(k.service_ports.as_str().unwrap_or_default());
    Value::Array(
        apps.into_iter()
            .map(|a| {
                serde_json::json!({
                    "name": a.name,
                    "protocol": a.protocol,
                    "container_ports": a.container_port.into_iter().collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}

/// The columns a session list may be ordered by.
const ORDERABLE: &[(&str, sessions::Column)] = &[
    ("name", sessions::Column::Name),
    ("created_at", sessions::Column::CreatedAt),
    ("status_changed", sessions::Column::StatusChanged),
    ("terminated_at", sessions::Column::TerminatedAt),
    ("status", sessions::Column::Status),
];

/// Sessions matching Backend.AI's filter expression (`name ilike "%x%" & type == "batch"`).
fn filtered(
    select: sea_orm::Select<sessions::Entity>,
    filter: Option<String>,
) -> ApiResult<sea_orm::Select<sessions::Entity>> {
    let Some(f) = filter else {
        return Ok(select);
    };
    Ok(
        match bai_core::filter::parse(
            &f,
            &[
                ("name", sessions::Column::Name),
                ("session_name", sessions::Column::Name),
                ("type", sessions::Column::SessionType),
                ("status", sessions::Column::Status),
                ("status_info", sessions::Column::StatusInfo),
                ("access_key", sessions::Column::AccessKey),
                ("domain_name", sessions::Column::DomainName),
                ("tag", sessions::Column::Tag),
                ("scaling_group", sessions::Column::ScalingGroupName),
                ("result", sessions::Column::Result),
                ("created_at", sessions::Column::CreatedAt),
                ("terminated_at", sessions::Column::TerminatedAt),
                ("user_id", sessions::Column::UserUuid),
                ("project_id", sessions::Column::GroupId),
            ],
        )? {
            Some(f) => select.filter(crate::sql::condition(&f)),
            None => select,
        },
    )
}

pub fn parse_statuses(s: &str) -> ApiResult<Vec<SessionStatus>> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        // Backend.AI statuses a bai session never takes: valid in a filter, match nothing.
        .filter(|p| !matches!(*p, "RUNNING_DEGRADED" | "PREPARED" | "CREATING"))
        .map(|p| {
            SessionStatus::parse(p).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "invalid session status '{p}' (one of: {})",
                    SessionStatus::choices()
                ))
            })
        })
        .collect()
}

#[derive(Default)]
pub struct SessionQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl SessionQuery {
    async fn compute_session(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
    ) -> crate::graphql::context::Result<ComputeSession> {
        let (state, caller) = authed(ctx)?;
        Ok(ComputeSession(find_visible(state, caller, id).await?))
    }

    async fn compute_session_list(
        &self,
        ctx: &Context<'_>,
        limit: i32,
        offset: i32,
        order: Option<String>,
        domain_name: Option<String>,
        group_id: Option<Uuid>,
        access_key: Option<String>,
        #[graphql(desc = "comma-separated statuses, e.g. \"PENDING,RUNNING\"")] status: Option<
            String,
        >,
        #[graphql(
            desc = "Backend.AI's filter expression, e.g. `name ilike \"%test%\" & type == \"batch\"`"
        )]
        filter: Option<String>,
    ) -> crate::graphql::context::Result<ComputeSessionList> {
        let (state, caller) = authed(ctx)?;
        let mut select = visible(caller);
        if let Some(d) = domain_name {
            select = select.filter(sessions::Column::DomainName.eq(d));
        }
        if let Some(g) = group_id {
            select = select.filter(sessions::Column::GroupId.eq(g));
        }
        if let Some(ak) = access_key {
            select = select.filter(sessions::Column::AccessKey.eq(ak));
        }
        if let Some(s) = status.filter(|s| !s.trim().is_empty()) {
            select = select.filter(sessions::Column::Status.is_in(parse_statuses(&s)?));
        }
        let select = filtered(select, filter)?;
        // Lists read on the read pool (SQLite: beside the writer, never queued behind it);
        // the count only when asked for, and from the cache while no session changed.
        let total_count = if ctx.look_ahead().field("total_count").exists() {
            state
                .local
                .session_counts
                .count(&state.read, select.clone())
                .await?
        } else {
            0
        };
        let rows = crate::graphql::context::page_rows(
            &state.read,
            select,
            (limit, offset),
            order.as_deref(),
            ORDERABLE,
            (sessions::Column::StatusChanged, Order::Desc),
        )
        .await?;
        crate::graphql::context::prime_names(
            ctx,
            &["items"],
            rows.iter().map(|r| r.user_uuid),
            rows.iter().map(|r| r.group_id),
        )
        .await?;
        Ok(ComputeSessionList {
            items: rows.into_iter().map(ComputeSession).collect(),
            total_count,
        })
    }

    /// The session's SSH private key (`/home/work/id_container`), for SSH/SFTP clients.
    async fn session_ssh_private_key(
        &self,
        ctx: &Context<'_>,
        session_id: Uuid,
    ) -> crate::graphql::context::Result<String> {
        let (state, _) = authed(ctx)?;
        let principal = ctx
            .data::<crate::auth::Principal>()
            .map_err(|_| ApiError::unauthenticated("Login required."))?;
        Ok(crate::sessions::apps::ssh_private_key(state, principal, session_id).await?)
    }

    /// The session's container output (live while running, kept afterwards).
    async fn session_logs(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
    ) -> crate::graphql::context::Result<String> {
        let (state, caller) = authed(ctx)?;
        let s = find_visible(state, caller, id).await?;
        Ok(crate::sessions::logs(state, s.id).await?)
    }
}

#[derive(InputObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CreateSessionInput {
    /// Image reference or alias (e.g. `bai.local/stable/python:3.11-debian12`, `python`).
    pub image: String,
    /// 4–64 characters; random when absent.
    pub name: Option<String>,
    /// interactive (default) or batch.
    #[graphql(name = "type")]
    pub session_type: Option<String>,
    /// Project name or id (default: `default`).
    pub group: Option<String>,
    pub scaling_group: Option<String>,
    /// A resource preset to start from; `resources` override its slots.
    pub preset: Option<String>,
    /// `{"cpu": "2", "mem": "4g", "cuda.shares": "0.5"}`; unspecified cpu/mem follow the image.
    pub resources: Option<JsonString>,
    /// Shared memory, e.g. `1g` (default 64m or the preset's).
    pub shmem: Option<String>,
    /// Environment variables `{"NAME": "value"}`.
    pub environ: Option<JsonString>,
    /// Required for batch sessions; the session ends when it exits.
    pub startup_command: Option<String>,
    /// Batch sessions: seconds the job may run before it is ended.
    pub batch_timeout: Option<i32>,
    /// How many identical sessions (default 1).
    pub count: Option<i32>,
    pub tag: Option<String>,
    /// Storage folders to mount, by name or id; each appears at /home/work/<name>.
    pub mounts: Option<Vec<String>>,
    /// `{"folder": "alias"}`: mount a folder elsewhere beneath /home/work.
    pub mount_map: Option<JsonString>,
    /// Your sessions (id or name) that must end in success before this one starts; one that
    /// ends otherwise cancels it.
    pub dependencies: Option<Vec<String>>,
    /// A shell script run once in the container before anything else (output in the logs).
    pub bootstrap_script: Option<String>,
    /// Containers in the session (default 1): main1, sub1, sub2…, reaching each other by
    /// hostname and over SSH; each gets the resources asked.
    pub cluster_size: Option<i32>,
    /// `single-node` (default: every container on one agent) or `multi-node` (spread over the
    /// resource group's routed agents: remote hosts with a session subnet).
    pub cluster_mode: Option<String>,
}

pub(crate) fn string_map(v: Option<JsonString>, what: &str) -> ApiResult<BTreeMap<String, String>> {
    crate::sessions::body::string_map(v.as_ref().map(|j| &j.0), what)
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CreateSessionResult {
    pub ok: bool,
    pub msg: String,
    pub sessions: Vec<ComputeSession>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct DestroySessionResult {
    pub ok: bool,
    pub msg: String,
    pub session: Option<ComputeSession>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct StartedService {
    pub ok: bool,
    /// Path of a web app through the app proxy, token included (empty for TCP apps). With a
    /// `port`, the same path is also served at `http://<server host>:<port>`.
    pub url: String,
    /// The per-launch token (also accepted by the proxy from browsers not logged in).
    pub token: String,
    /// Port of the pool the app is served on (always for SSH/SFTP), if any.
    pub port: Option<u16>,
    pub public: bool,
    /// http or tcp.
    pub protocol: String,
}

#[derive(Default)]
pub struct SessionMutation;

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CommitSessionResult {
    pub ok: bool,
    pub task_id: Uuid,
}

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl SessionMutation {
    /// Creates one or more sessions; they start PENDING and the scheduler takes them from there.
    async fn create_session(
        &self,
        ctx: &Context<'_>,
        props: CreateSessionInput,
    ) -> crate::graphql::context::Result<CreateSessionResult> {
        let (state, caller) = authed(ctx)?;
        let session_type = match props.session_type.as_deref() {
            None => SessionType::Interactive,
            Some(t) => match SessionType::parse(t) {
                Some(st @ (SessionType::Interactive | SessionType::Batch)) => st,
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "invalid session type '{t}' (interactive or batch)"
                    ))
                    .into());
                }
            },
        };
        let count = u32::try_from(props.count.unwrap_or(1))
            .map_err(|_| ApiError::bad_request("count must be between 1 and 100"))?;
        let req = crate::sessions::CreateRequest {
            image: props.image,
            name: props.name,
            session_type,
            group: props.group,
            scaling_group: props.scaling_group,
            preset: props.preset,
            resources: string_map(props.resources, "resources")?,
            shmem: props.shmem,
            environ: string_map(props.environ, "environ")?,
            startup_command: props.startup_command,
            batch_timeout: props.batch_timeout.map(i64::from),
            count,
            tag: props.tag,
            mounts: props.mounts.unwrap_or_default(),
            mount_map: string_map(props.mount_map, "mount_map")?,
            dependencies: props.dependencies.unwrap_or_default(),
            bootstrap_script: props.bootstrap_script,
            cluster_size: u32::try_from(props.cluster_size.unwrap_or(1))
                .map_err(|_| ApiError::bad_request("cluster_size must be a positive number"))?,
            cluster_mode: match props.cluster_mode.as_deref() {
                None | Some("single-node") => entity::enums::ClusterMode::SingleNode,
                Some("multi-node") => entity::enums::ClusterMode::MultiNode,
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "invalid cluster_mode '{other}' (single-node or multi-node)"
                    ))
                    .into());
                }
            },
            model: None,
        };
        let created = crate::sessions::create(state, caller, req).await?;
        Ok(CreateSessionResult {
            ok: true,
            msg: "enqueued".into(),
            sessions: created.into_iter().map(ComputeSession).collect(),
        })
    }

    /// Terminates a session (cancels it when still pending).
    async fn destroy_session(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
    ) -> crate::graphql::context::Result<DestroySessionResult> {
        let (state, caller) = authed(ctx)?;
        let s = find_visible(state, caller, id).await?;
        let done = crate::sessions::terminate(state, s.id, "user-requested").await?;
        Ok(DestroySessionResult {
            ok: true,
            msg: "terminated".into(),
            session: Some(ComputeSession(done)),
        })
    }

    /// Commits a running session of the caller's to an image of theirs named `image_name`
    /// (its changes and /home/work; storage folders stay out), as a background task: follow
    /// it with `background_task_events(task_id)`. The image is the caller's only; the keypair
    /// policy's `max_customized_image_count` bounds how many they keep.
    async fn commit_session(
        &self,
        ctx: &Context<'_>,
        session_id: Uuid,
        image_name: String,
    ) -> crate::graphql::context::Result<CommitSessionResult> {
        let (state, caller) = authed(ctx)?;
        let s = crate::sessions::find_own(state, caller, session_id).await?;
        let started = crate::sessions::commit::start(state, caller, &s, Some(&image_name)).await?;
        Ok(CommitSessionResult {
            ok: true,
            task_id: started.task_id,
        })
    }

    /// Starts an app in the session (Jupyter Notebook for now) and returns where to reach it
    /// through the app proxy (owner or superadmin only).
    async fn start_service(
        &self,
        ctx: &Context<'_>,
        session_id: Uuid,
        app: String,
        #[graphql(default)] open_to_public: bool,
        preferred_port: Option<u16>,
    ) -> crate::graphql::context::Result<StartedService> {
        let (state, _) = authed(ctx)?;
        let principal = ctx
            .data::<crate::auth::Principal>()
            .map_err(|_| ApiError::unauthenticated("Login required."))?;
        let opts = crate::proxy::StartOptions {
            public: open_to_public,
            preferred_port,
        };
        let started = crate::proxy::start(state, principal, session_id, &app, opts).await?;
        Ok(StartedService {
            ok: true,
            url: started.url,
            token: started.token,
            port: started.port,
            public: started.public,
            protocol: started.protocol,
        })
    }

    /// Terminates several sessions; each result says what happened.
    async fn destroy_sessions(
        &self,
        ctx: &Context<'_>,
        ids: Vec<Uuid>,
    ) -> crate::graphql::context::Result<Vec<DestroySessionResult>> {
        let (state, caller) = authed(ctx)?;
        if ids.len() > 100 {
            return Err(ApiError::bad_request("at most 100 sessions at once").into());
        }
        let mut out = Vec::new();
        for id in ids {
            let r = match find_visible(state, caller, id).await {
                Ok(s) => crate::sessions::terminate(state, s.id, "user-requested").await,
                Err(e) => Err(e),
            };
            out.push(match r {
                Ok(s) => DestroySessionResult {
                    ok: true,
                    msg: "terminated".into(),
                    session: Some(ComputeSession(s)),
                },
                Err(e) => DestroySessionResult {
                    ok: false,
                    msg: crate::error::leaving(e).message,
                    session: None,
                },
            });
        }
        Ok(out)
    }
}

#[derive(SimpleObject, Clone)]
#[graphql(rename_fields = "snake_case")]
pub struct SessionStatusEvent {
    pub session_id: Uuid,
    pub name: String,
    pub status: String,
    /// Backend.AI's event name (`session_started`, `session_terminated`, …).
    pub event: String,
    pub reason: Option<String>,
    pub access_key: String,
    /// A batch session's exit code (with `session_success` / `session_failure`).
    pub exit_code: Option<i32>,
}

#[derive(SimpleObject, Clone)]
#[graphql(rename_fields = "snake_case")]
pub struct SessionStats {
    pub session_id: Uuid,
    /// CPU use in percent of one core (200 = two cores busy).
    pub cpu_used_pct: f64,
    pub mem_bytes: BigInt,
    pub mem_limit_bytes: BigInt,
    /// GPU (SM) use of the session's processes, percent of one GPU, from NVML; null when the
    /// session holds no GPU.
    pub gpu_used_pct: Option<f64>,
    /// GPU memory of the session's processes; null when the session holds no GPU.
    pub gpu_mem_bytes: Option<BigInt>,
    /// Bytes read from and written to block devices since the container started.
    pub io_read_bytes: BigInt,
    pub io_write_bytes: BigInt,
    /// Bytes received and sent on the container's network interfaces since it started.
    pub net_rx_bytes: BigInt,
    pub net_tx_bytes: BigInt,
}

#[derive(Default)]
pub struct SessionSubscription;

#[Subscription(rename_fields = "snake_case", rename_args = "snake_case")]
impl SessionSubscription {
    /// Status changes of one session, of the sessions of a name (which may not exist yet:
    /// the name is a filter, as in Backend.AI), or of every session the caller may see.
    async fn session_status_changes(
        &self,
        ctx: &Context<'_>,
        session_id: Option<Uuid>,
        session_name: Option<String>,
    ) -> crate::graphql::context::Result<impl Stream<Item = SessionStatusEvent>> {
        let (state, caller) = authed(ctx)?;
        if let Some(id) = session_id {
            find_visible(state, caller, id).await?;
        }
        let (state, caller) = (state.clone(), caller.clone());
        let topic = crate::sessions::session_topic(&caller);
        Ok(state
            .shared
            .events
            .stream_topic(topic)
            .filter_map(move |ev| {
                let (state, caller, session_name) =
                    (state.clone(), caller.clone(), session_name.clone());
                async move {
                    let Event::Session(e) = &*ev else {
                        return None;
                    };
                    // Containers' events are Backend.AI's stream's; here a session is one thing.
                    if session_id.is_some_and(|id| id != e.session_id)
                        || session_name.as_ref().is_some_and(|n| *n != e.name)
                        || e.kernel.is_some()
                        || !crate::sessions::sees(&state, &caller, e).await
                    {
                        return None;
                    }
                    Some(SessionStatusEvent {
                        session_id: e.session_id,
                        name: e.name.clone(),
                        status: e.status.as_str().into(),
                        event: e.event.into(),
                        reason: e.reason.clone(),
                        access_key: e.access_key.clone(),
                        exit_code: e.exit_code,
                    })
                }
            }))
    }

    /// Live CPU, memory, block and network I/O (and GPU) use of a running session, every
    /// `interval_secs` (default 2).
    async fn session_stats(
        &self,
        ctx: &Context<'_>,
        session_id: Uuid,
        interval_secs: Option<i32>,
    ) -> crate::graphql::context::Result<impl Stream<Item = SessionStats>> {
        let (state, caller) = authed(ctx)?;
        find_visible(state, caller, session_id).await?;
        let period = Duration::from_secs(
            u64::try_from(interval_secs.unwrap_or(2))
                .unwrap_or(2)
                .clamp(1, 60),
        );
        let state = state.clone();
        Ok(futures_util::stream::unfold((), move |()| {
            let state = state.clone();
            async move {
                loop {
                    let k = crate::sessions::main_kernel(&state.read, session_id)
                        .await
                        .ok()?;
                    if k.status.is_over() {
                        return None;
                    }
                    let st = stats_of(&state, &k).await;
                    tokio::time::sleep(period).await;
                    if let Some(st) = st {
                        return Some((st, ()));
                    }
                }
            }
        }))
    }

    /// Live use of several sessions in one subscription (a list's usage column: one for the
    /// rows on screen, not one per row): every `interval_secs` (default 3) the sessions of
    /// `session_ids` running then, each with its figures. At most 100 sessions, each one the
    /// caller may see (NOT_FOUND otherwise, before anything is measured). Ends when none of
    /// them is live any more.
    async fn sessions_stats(
        &self,
        ctx: &Context<'_>,
        session_ids: Vec<Uuid>,
        interval_secs: Option<i32>,
    ) -> crate::graphql::context::Result<impl Stream<Item = Vec<SessionStats>>> {
        let (state, caller) = authed(ctx)?;
        let mut ids = session_ids;
        ids.sort_unstable();
        ids.dedup();
        // The bound says nothing of anyone's sessions, so it comes before the lookup.
        if ids.len() > MAX_STATS_SESSIONS {
            return Err(ApiError::bad_request(format!(
                "At most {MAX_STATS_SESSIONS} sessions in one subscription; {} asked.",
                ids.len()
            ))
            .into());
        }
        let seen: std::collections::HashSet<Uuid> =
            crate::sessions::visible_among(&state.read, caller, ids.clone())
                .await?
                .into_iter()
                .map(|s| s.id)
                .collect();
        if let Some(stranger) = ids.iter().find(|id| !seen.contains(id)) {
            return Err(ApiError::not_found("session", stranger).into());
        }
        let period = Duration::from_secs(
            u64::try_from(interval_secs.unwrap_or(3))
                .unwrap_or(3)
                .clamp(1, 60),
        );
        let state = state.clone();
        Ok(futures_util::stream::unfold(true, move |first| {
            let (state, ids) = (state.clone(), ids.clone());
            async move {
                if !first {
                    tokio::time::sleep(period).await;
                }
                let kernels = crate::sessions::main_kernels(&state.read, &ids)
                    .await
                    .ok()?;
                if kernels.iter().all(|k| k.status.is_over()) {
                    return None;
                }
                // Engines asked a few at a time: each answer takes a sample of about a second.
                let out: Vec<SessionStats> = futures_util::stream::iter(kernels)
                    .map(|k| {
                        let state = state.clone();
                        async move { stats_of(&state, &k).await }
                    })
                    .buffer_unordered(16)
                    .filter_map(|s| async move { s })
                    .collect()
                    .await;
                Some((out, false))
            }
        }))
    }
}

/// The most sessions one `sessions_stats` subscription measures (a list's page).
const MAX_STATS_SESSIONS: usize = 100;

/// What the engine says of kernel `k`'s use now; None unless it runs on an engine here.
async fn stats_of(state: &crate::AppState, k: &kernels::Model) -> Option<SessionStats> {
    let (SessionStatus::Running, Some(agent_id), Some(container)) =
        (k.status, &k.agent, &k.container_id)
    else {
        return None;
    };
    let agent = state.local.agents.get(agent_id).await?;
    let st = agent.stats(container).await?;
    let limit =
        rust_decimal::prelude::ToPrimitive::to_i64(&k.requested_slots.get("mem")).unwrap_or(0);
    let holds_gpu = ["cuda.device", "cuda.shares"]
        .iter()
        .any(|s| k.requested_slots.get(s) > rust_decimal::Decimal::ZERO);
    let gpu = if holds_gpu {
        agent.gpu_use(container).await
    } else {
        None
    };
    let big = |v: u64| BigInt(i64::try_from(v).unwrap_or(i64::MAX));
    Some(SessionStats {
        session_id: k.session_id,
        cpu_used_pct: st.cpu_pct,
        mem_bytes: big(st.mem_bytes),
        io_read_bytes: big(st.io_read_bytes),
        io_write_bytes: big(st.io_write_bytes),
        net_rx_bytes: big(st.net_rx_bytes),
        net_tx_bytes: big(st.net_tx_bytes),
        mem_limit_bytes: BigInt(limit),
        gpu_used_pct: gpu.map(|g| g.util_pct),
        gpu_mem_bytes: gpu.map(|g| big(g.mem_bytes)),
    })
}
