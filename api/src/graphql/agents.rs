//! GraphQL for agents (superadmins, as the seeds say): `agent`, `agents`, `agent_list`;
//! `agent_summary_list` for everyone (the agents of the caller's resource groups);
//! and `rescan_images` for the engines' local images.
// Resolver arguments mirror Backend.AI's GraphQL signatures, however many there are.
#![allow(clippy::too_many_arguments)]
use async_graphql::{Context, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::agents;
use sea_orm::{Order, PaginatorTrait, QueryFilter, Select};

use crate::error::{ApiError, ApiResult};
use crate::graphql::{context::authed, context::state, scalars::JsonString};

pub struct Agent(pub agents::Model);

#[Object(rename_fields = "snake_case")]
impl Agent {
    async fn id(&self) -> &str {
        &self.0.id
    }
    /// ALIVE, LOST, RESTARTING or TERMINATED.
    async fn status(&self) -> &str {
        self.0.status.as_str()
    }
    async fn status_changed(&self) -> Option<DateTime<Utc>> {
        self.0.status_changed
    }
    async fn region(&self) -> &str {
        &self.0.region
    }
    async fn scaling_group(&self) -> &str {
        &self.0.scaling_group
    }
    async fn schedulable(&self) -> bool {
        self.0.schedulable
    }
    async fn available_slots(&self) -> JsonString {
        JsonString(serde_json::to_value(&self.0.available_slots).unwrap_or_default())
    }
    async fn occupied_slots(&self) -> JsonString {
        JsonString(serde_json::to_value(&self.0.occupied_slots).unwrap_or_default())
    }
    /// The engine endpoint (`unix:///var/run/docker.sock`).
    async fn addr(&self) -> &str {
        &self.0.addr
    }
    async fn first_contact(&self) -> DateTime<Utc> {
        self.0.first_contact
    }
    async fn lost_at(&self) -> Option<DateTime<Utc>> {
        self.0.lost_at
    }
    async fn last_heartbeat(&self) -> Option<DateTime<Utc>> {
        self.0.last_heartbeat
    }
    async fn version(&self) -> &str {
        &self.0.version
    }
    async fn architecture(&self) -> &str {
        &self.0.architecture
    }
    async fn compute_plugins(&self) -> JsonString {
        JsonString(self.0.compute_plugins.clone())
    }
    /// Backend.AI's agent configuration: bai's agents live in the server and have no file of
    /// their own; what they were given (id, region, resource group, engine address).
    async fn local_config(&self) -> JsonString {
        JsonString(serde_json::json!({
            "agent": {
                "id": self.0.id,
                "region": self.0.region,
                "scaling-group": self.0.scaling_group,
                "addr": self.0.addr,
            }
        }))
    }
    /// Backend.AI's hardware data of the agent's node: bai has none (`{}`).
    async fn hardware_metadata(&self) -> JsonString {
        JsonString(serde_json::json!({}))
    }
    /// Live use in Backend.AI's shape (what its clients and consoles format):
    /// `{"node": {"cpu_util": …, "mem": …}, "devices": {"cpu_util": {…}, "mem": {…}}}`, each
    /// metric `{current, capacity, pct, unit_hint}`; the engine's own figures (CPU in percent
    /// of one core, memory of the sessions' containers) against the agent's capacity.
    async fn live_stat(&self) -> Option<JsonString> {
        live_stat(&self.0)
    }
    /// Live CPU use of the agent's session containers, in percent of one core.
    async fn cpu_cur_pct(&self) -> f64 {
        self.0
            .live_stat
            .as_ref()
            .and_then(|s| s.get("cpu_used_pct"))
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0)
    }
    /// Live memory use of the agent's session containers, in bytes.
    async fn mem_cur_bytes(&self) -> crate::graphql::scalars::BigInt {
        crate::graphql::scalars::BigInt(
            self.0
                .live_stat
                .as_ref()
                .and_then(|s| s.get("mem_used_bytes"))
                .and_then(|v| v.as_i64())
                .unwrap_or(0),
        )
    }
    /// Live GPU use, mean over the agent's GPUs, percent (null: no GPUs).
    async fn gpu_cur_pct(&self) -> Option<f64> {
        let gpus = gpu_live(&self.0);
        (!gpus.is_empty()).then(|| gpus.iter().map(|g| g.1).sum::<f64>() / gpus.len() as f64)
    }
    /// Live GPU memory in use over the agent's GPUs, bytes (null: no GPUs).
    async fn gpu_mem_cur_bytes(&self) -> Option<crate::graphql::scalars::BigInt> {
        let gpus = gpu_live(&self.0);
        (!gpus.is_empty()).then(|| {
            crate::graphql::scalars::BigInt(
                i64::try_from(gpus.iter().map(|g| g.2).sum::<u64>()).unwrap_or(i64::MAX),
            )
        })
    }
    /// Containers of running sessions on this agent.
    async fn container_count(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<u64> {
        let state = state(ctx)?;
        Ok(crate::agents::running_containers(&state.read, &self.0.id).await?)
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct AgentList {
    pub items: Vec<Agent>,
    pub total_count: u64,
}

fn live_stat(agent: &agents::Model) -> Option<JsonString> {
    let live = agent.live_stat.as_ref()?;
    let cpu = live
        .get("cpu_used_pct")
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0);
    let mem = live
        .get("mem_used_bytes")
        .and_then(|v| v.as_u64())
        .unwrap_or(0);
    let cores = agent.available_slots.get("cpu");
    let mem_cap = agent.available_slots.get("mem");
    let cpu_cap = cores * rust_decimal::Decimal::from(100);
    let pct = |used: f64, cap: f64| {
        if cap > 0.0 {
            format!("{:.2}", used / cap * 100.0)
        } else {
            "0.00".to_string()
        }
    };
    let cpu_metric = serde_json::json!({
        "current": format!("{cpu:.2}"),
        "capacity": cpu_cap.to_string(),
        "pct": pct(cpu, cpu_cap.to_string().parse().unwrap_or(0.0)),
        "unit_hint": "pct",
    });
    let mem_metric = serde_json::json!({
        "current": mem.to_string(),
        "capacity": mem_cap.to_string(),
        "pct": pct(mem as f64, mem_cap.to_string().parse().unwrap_or(0.0)),
        "unit_hint": "bytes",
    });
    let mut out = serde_json::json!({
        "node": {"cpu_util": cpu_metric, "mem": mem_metric},
        "devices": {"cpu_util": {"host": cpu_metric}, "mem": {"host": mem_metric}},
    });
    // bai's own: the running containers of this installation the last sample found on the
    // engine (a count above the agent's kernels shows containers no session knows).
    if let Some(n) = live.get("containers").and_then(|v| v.as_u64()) {
        out["containers"] = n.into();
    }
    // Backend.AI's CUDA plugin names: `cuda_util` (percent) and `cuda_mem` (bytes).
    let gpus = gpu_live(agent);
    if !gpus.is_empty() {
        let metric = |cur: f64, cap: f64, hint: &str| {
            serde_json::json!({
                "current": format!("{cur:.2}"),
                "capacity": format!("{cap:.0}"),
                "pct": pct(cur, cap),
                "unit_hint": hint,
            })
        };
        let util: f64 = gpus.iter().map(|g| g.1).sum();
        let used: u64 = gpus.iter().map(|g| g.2).sum();
        let total: u64 = gpus.iter().map(|g| g.3).sum();
        out["node"]["cuda_util"] = metric(util, 100.0 * gpus.len() as f64, "pct");
        out["node"]["cuda_mem"] = metric(used as f64, total as f64, "bytes");
        out["devices"]["cuda_util"] = gpus
            .iter()
            .map(|g| (g.0.clone(), metric(g.1, 100.0, "pct")))
            .collect::<serde_json::Map<_, _>>()
            .into();
        out["devices"]["cuda_mem"] = gpus
            .iter()
            .map(|g| (g.0.clone(), metric(g.2 as f64, g.3 as f64, "bytes")))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    Some(JsonString(out))
}

/// Each GPU's (UUID, utilization %, memory used, memory total) from the agent's last sample.
fn gpu_live(agent: &agents::Model) -> Vec<(String, f64, u64, u64)> {
    let Some(gpus) = agent
        .live_stat
        .as_ref()
        .and_then(|s| s.get("gpus"))
        .and_then(|g| g.as_array())
    else {
        return Vec::new();
    };
    gpus.iter()
        .map(|g| {
            (
                g.get("uuid")
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_string(),
                g.get("util_pct").and_then(|v| v.as_f64()).unwrap_or(0.0),
                g.get("mem_used_bytes")
                    .and_then(|v| v.as_u64())
                    .unwrap_or(0),
                g.get("mem_total_bytes")
                    .and_then(|v| v.as_u64())
                    .unwrap_or(0),
            )
        })
        .collect()
}

/// Agents matching Backend.AI's filter expression.
fn with_filter(
    select: Select<agents::Entity>,
    filter: Option<String>,
) -> ApiResult<Select<agents::Entity>> {
    let Some(f) = filter else {
        return Ok(select);
    };
    Ok(
        match bai_core::filter::parse(
            &f,
            &[
                ("id", agents::Column::Id),
                ("status", agents::Column::Status),
                ("region", agents::Column::Region),
                ("scaling_group", agents::Column::ScalingGroup),
                ("addr", agents::Column::Addr),
                ("architecture", agents::Column::Architecture),
                ("version", agents::Column::Version),
                ("schedulable", agents::Column::Schedulable),
                ("first_contact", agents::Column::FirstContact),
            ],
        )? {
            Some(f) => select.filter(crate::sql::condition(&f)),
            None => select,
        },
    )
}

/// The columns an agent list may be ordered by.
const ORDERABLE: &[(&str, agents::Column)] = &[
    ("id", agents::Column::Id),
    ("first_contact", agents::Column::FirstContact),
    ("status", agents::Column::Status),
    ("scaling_group", agents::Column::ScalingGroup),
    ("region", agents::Column::Region),
    ("architecture", agents::Column::Architecture),
];

/// Backend.AI 26's Relay shape of an agent (Lablup's Web UI 26 lists agents with it).
pub struct AgentNode(Agent);

#[Object(rename_fields = "snake_case")]
impl AgentNode {
    pub(crate) async fn id(&self) -> async_graphql::ID {
        crate::graphql::sessions::global_id("AgentNode", &self.0.0.id)
    }
    async fn row_id(&self) -> &str {
        &self.0.0.id
    }
    async fn status(&self) -> &str {
        self.0.0.status.as_str()
    }
    async fn status_changed(&self) -> Option<DateTime<Utc>> {
        self.0.0.status_changed
    }
    async fn region(&self) -> &str {
        &self.0.0.region
    }
    async fn scaling_group(&self) -> &str {
        &self.0.0.scaling_group
    }
    async fn schedulable(&self) -> bool {
        self.0.0.schedulable
    }
    async fn available_slots(&self) -> JsonString {
        JsonString(serde_json::to_value(&self.0.0.available_slots).unwrap_or_default())
    }
    async fn occupied_slots(&self) -> JsonString {
        JsonString(serde_json::to_value(&self.0.0.occupied_slots).unwrap_or_default())
    }
    async fn addr(&self) -> &str {
        &self.0.0.addr
    }
    async fn first_contact(&self) -> DateTime<Utc> {
        self.0.0.first_contact
    }
    async fn lost_at(&self) -> Option<DateTime<Utc>> {
        self.0.0.lost_at
    }
    async fn version(&self) -> &str {
        &self.0.0.version
    }
    async fn architecture(&self) -> &str {
        &self.0.0.architecture
    }
    async fn compute_plugins(&self) -> JsonString {
        JsonString(self.0.0.compute_plugins.clone())
    }
    async fn live_stat(&self) -> Option<JsonString> {
        live_stat(&self.0.0)
    }
    /// Backend.AI's map of GPU allocations per device: bai keeps them per session (`{}`).
    async fn gpu_alloc_map(&self) -> JsonString {
        JsonString(serde_json::json!({}))
    }
}

#[derive(SimpleObject)]
pub struct AgentEdge {
    node: AgentNode,
    cursor: String,
}

#[derive(SimpleObject)]
pub struct AgentConnection {
    count: u64,
    edges: Vec<AgentEdge>,
}

/// Backend.AI's `AgentSummary`: what anyone may know of an agent it could run sessions on.
pub struct AgentSummary(agents::Model);

#[Object(rename_fields = "snake_case")]
impl AgentSummary {
    async fn id(&self) -> &str {
        &self.0.id
    }
    async fn status(&self) -> &str {
        self.0.status.as_str()
    }
    async fn scaling_group(&self) -> &str {
        &self.0.scaling_group
    }
    async fn schedulable(&self) -> bool {
        self.0.schedulable
    }
    async fn available_slots(&self) -> JsonString {
        JsonString(serde_json::to_value(&self.0.available_slots).unwrap_or_default())
    }
    async fn occupied_slots(&self) -> JsonString {
        JsonString(serde_json::to_value(&self.0.occupied_slots).unwrap_or_default())
    }
    async fn architecture(&self) -> &str {
        &self.0.architecture
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct AgentSummaryList {
    items: Vec<AgentSummary>,
    total_count: u64,
}

#[derive(Default)]
pub struct AgentQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl AgentQuery {
    async fn agent(
        &self,
        ctx: &Context<'_>,
        agent_id: String,
    ) -> crate::graphql::context::Result<Agent> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        Ok(Agent(
            crate::agents::find(&state.read, &scope, agent_id).await?,
        ))
    }

    async fn agents(
        &self,
        ctx: &Context<'_>,
        status: Option<String>,
        scaling_group: Option<String>,
    ) -> crate::graphql::context::Result<Vec<Agent>> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        let rows = crate::agents::listable(&scope, status, scaling_group)?
            .all(&state.read)
            .await
            .map_err(ApiError::from)?;
        Ok(rows.into_iter().map(Agent).collect())
    }

    /// Backend.AI 26's `agent_nodes` (superadmins): agents filtered and ordered in Backend.AI's
    /// languages, as a connection (`first: 0` answers the count alone).
    async fn agent_nodes(
        &self,
        ctx: &Context<'_>,
        filter: Option<String>,
        order: Option<String>,
        offset: Option<i32>,
        first: Option<i32>,
        #[graphql(desc = "accepted; pages go by offset")] _before: Option<String>,
        #[graphql(desc = "accepted; pages go by offset")] _after: Option<String>,
        #[graphql(desc = "accepted; pages go by offset")] _last: Option<i32>,
    ) -> crate::graphql::context::Result<AgentConnection> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        let select = with_filter(crate::agents::listable(&scope, None, None)?, filter)?;
        let count = select
            .clone()
            .count(&state.read)
            .await
            .map_err(ApiError::from)?;
        let first = first.unwrap_or(20);
        let rows = if first <= 0 {
            Vec::new()
        } else {
            crate::graphql::context::page_rows(
                &state.read,
                select,
                (first, offset.unwrap_or(0)),
                order.as_deref(),
                ORDERABLE,
                (agents::Column::FirstContact, Order::Asc),
            )
            .await?
        };
        Ok(AgentConnection {
            count,
            edges: rows
                .into_iter()
                .map(|a| AgentEdge {
                    cursor: a.id.clone(),
                    node: AgentNode(Agent(a)),
                })
                .collect(),
        })
    }

    /// Backend.AI's `agent_summary_list`: superadmins see every agent, anyone else the agents
    /// of the resource groups it may use (their capacity and what is taken, for the launcher
    /// and the dashboard).
    async fn agent_summary_list(
        &self,
        ctx: &Context<'_>,
        limit: i32,
        offset: i32,
        order: Option<String>,
        status: Option<String>,
        scaling_group: Option<String>,
        filter: Option<String>,
    ) -> crate::graphql::context::Result<AgentSummaryList> {
        let (state, caller) = authed(ctx)?;
        let select = crate::agents::summarized(&state.read, caller, status, scaling_group).await?;
        let select = with_filter(select, filter)?;
        let (rows, total_count) = crate::graphql::context::paginate(
            &state.read,
            select,
            (limit, offset),
            order.as_deref(),
            ORDERABLE,
            (agents::Column::FirstContact, Order::Asc),
        )
        .await?;
        Ok(AgentSummaryList {
            items: rows.into_iter().map(AgentSummary).collect(),
            total_count,
        })
    }

    async fn agent_list(
        &self,
        ctx: &Context<'_>,
        limit: i32,
        offset: i32,
        order: Option<String>,
        status: Option<String>,
        scaling_group: Option<String>,
        #[graphql(
            desc = "Backend.AI's filter expression over id, status, region, scaling_group, addr, architecture, version, schedulable, first_contact"
        )]
        filter: Option<String>,
    ) -> crate::graphql::context::Result<AgentList> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        let select = with_filter(
            crate::agents::listable(&scope, status, scaling_group)?,
            filter,
        )?;
        let (rows, total_count) = crate::graphql::context::paginate(
            &state.read,
            select,
            (limit, offset),
            order.as_deref(),
            ORDERABLE,
            (agents::Column::FirstContact, Order::Asc),
        )
        .await?;
        Ok(AgentList {
            items: rows.into_iter().map(Agent).collect(),
            total_count,
        })
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct RescanImages {
    pub ok: bool,
    pub msg: String,
    /// Follow it with `background_task_events(task_id)` or `background_task(task_id)`.
    pub task_id: uuid::Uuid,
}

#[derive(Default)]
pub struct AgentMutation;

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct MaintenanceResult {
    pub ok: bool,
    pub msg: String,
}

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl AgentMutation {
    /// Maintenance "RECALCULATE USAGE" (superadmin): matches containers with sessions again
    /// (orphans removed, vanished containers marked) and recomputes every agent's occupied
    /// resources from the sessions holding them.
    async fn recalculate_usage(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<MaintenanceResult> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        crate::sessions::reconcile::sweep(state).await?;
        crate::agents::refresh_agent_usage(state).await?;
        let agents = crate::agents::all_rows(&state.read).await?;
        let summary: Vec<String> = agents
            .iter()
            .map(|a| {
                let o = a.occupied_slots.to_string();
                format!(
                    "{}: {}",
                    a.id,
                    if o.is_empty() { "nothing".into() } else { o }
                )
            })
            .collect();
        Ok(MaintenanceResult {
            ok: true,
            msg: format!("Usage recalculated. Occupied now: {}", summary.join("; ")),
        })
    }

    /// Maintenance "CLEAN UP IMAGES" (superadmin): removes dangling (untagged, unused) images
    /// from every agent's engine.
    async fn clean_up_images(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<MaintenanceResult> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let (mut removed, mut reclaimed) = (0usize, 0i64);
        let mut problems = Vec::new();
        for agent in state.local.agents.all().await {
            match agent.prune_dangling_images().await {
                Ok((n, bytes)) => {
                    removed += n;
                    reclaimed += bytes;
                }
                Err(e) => problems.push(format!(
                    "{}: {}",
                    agent.info().id,
                    crate::error::leaving(crate::error::ApiError::from(e)).message
                )),
            }
        }
        let mut msg = format!(
            "Removed {removed} unused image(s), reclaimed {} MiB.",
            reclaimed / (1024 * 1024)
        );
        if !problems.is_empty() {
            msg.push_str(&format!(" Problems: {}", problems.join("; ")));
        }
        Ok(MaintenanceResult {
            ok: problems.is_empty(),
            msg,
        })
    }

    /// Rescans the agents' engines and the registries (or only `registry`) for environment
    /// images, in the background (superadmin). Returns the task to follow.
    async fn rescan_images(
        &self,
        ctx: &Context<'_>,
        registry: Option<String>,
    ) -> crate::graphql::context::Result<RescanImages> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        let registries = match &registry {
            Some(r) => vec![crate::registries::find(&state.read, r).await?],
            None => crate::registries::list(&state.read, &scope).await?,
        };
        let scan_local = registry.is_none();
        let task_state = state.clone();
        let task_id = crate::bgtasks::spawn(
            &crate::bgtasks::Tasks::new(&state.local.bgtasks, &state.shared.events),
            "rescan_images",
            caller.uuid,
            move |progress| async move {
                let state = task_state;
                let mut found = 0u64;
                let mut done = 0u64;
                let mut problems = Vec::new();
                if scan_local {
                    for agent in state.local.agents.all().await {
                        progress.update(
                            done,
                            done + 1,
                            format!("local images of {}", agent.info().id),
                        );
                        match crate::images::local::scan(&state, agent.as_ref()).await {
                            Ok(n) => found += n as u64,
                            Err(e) => problems.push(format!(
                                "{}: {}",
                                agent.info().id,
                                crate::error::leaving(e).message
                            )),
                        }
                        done += 1;
                    }
                }
                for reg in registries {
                    match crate::registries::scan_into_catalog(&state, &reg, &progress, done).await
                    {
                        Ok((n, total)) => {
                            found += n;
                            done = total;
                        }
                        Err(e) => problems.push(format!(
                            "{}: {}",
                            reg.hostname,
                            crate::error::leaving(e).message
                        )),
                    }
                }
                if problems.is_empty() {
                    Ok(format!("{found} environment image(s) found"))
                } else {
                    Err(format!(
                        "{found} image(s) found; problems: {}",
                        problems.join("; ")
                    ))
                }
            },
        );
        Ok(RescanImages {
            ok: true,
            msg: "started".into(),
            task_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::Decimal;

    fn agent(live: serde_json::Value) -> agents::Model {
        agents::Model {
            id: "i-gpu".into(),
            status: entity::enums::AgentStatus::Alive,
            status_changed: None,
            region: "local".into(),
            scaling_group: "default".into(),
            schedulable: true,
            available_slots: entity::slots::ResourceSlots::new()
                .with("cpu", Decimal::from(16))
                .with("mem", Decimal::from(64i64 << 30))
                .with("cuda.device", Decimal::from(2)),
            occupied_slots: Default::default(),
            addr: "unix:///var/run/docker.sock".into(),
            public_host: None,
            first_contact: chrono::Utc::now(),
            lost_at: None,
            last_heartbeat: None,
            version: "28".into(),
            architecture: "x86_64".into(),
            compute_plugins: serde_json::json!({}),
            live_stat: Some(live),
            storage_hosts: None,
        }
    }

    #[test]
    fn gpu_use_in_live_stat_as_backend_ai_names_it() {
        let a = agent(serde_json::json!({
            "cpu_used_pct": 150.0, "mem_used_bytes": 1024, "containers": 2,
            "gpus": [
                {"uuid": "GPU-a", "util_pct": 90.0, "mem_used_bytes": 4u64 << 30, "mem_total_bytes": 80u64 << 30},
                {"uuid": "GPU-b", "util_pct": 10.0, "mem_used_bytes": 0, "mem_total_bytes": 80u64 << 30},
            ],
        }));
        let live = live_stat(&a).unwrap().0;
        assert_eq!(live["node"]["cuda_util"]["current"], "100.00");
        assert_eq!(live["node"]["cuda_util"]["capacity"], "200");
        assert_eq!(live["node"]["cuda_util"]["pct"], "50.00");
        assert_eq!(
            live["node"]["cuda_mem"]["current"],
            (4u64 << 30).to_string() + ".00"
        );
        assert_eq!(live["devices"]["cuda_util"]["GPU-a"]["pct"], "90.00");
        assert_eq!(live["devices"]["cuda_mem"]["GPU-b"]["current"], "0.00");
        assert_eq!(gpu_live(&a).len(), 2);
        // No GPUs sampled: no cuda metrics at all.
        let plain =
            agent(serde_json::json!({"cpu_used_pct": 1.0, "mem_used_bytes": 1, "containers": 0}));
        let live = live_stat(&plain).unwrap().0;
        assert!(live["node"].get("cuda_util").is_none(), "{live}");
        assert!(gpu_live(&plain).is_empty());
    }
}
