//! In-process agents, one per container engine: registration in the agents table,
//! heartbeats (ALIVE / LOST / TERMINATED), the local image scan and reconciliation.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use entity::enums::{AgentStatus, ImageType, SessionStatus};
use entity::slots::ResourceSlots;
use entity::{agents, images, kernels};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, QueryFilter, Set};
use serde_json::{Value, json};
use uuid::Uuid;

pub use bai_engine::Engine;
use bai_engine::docker::{DockerEngine, DockerSettings};

use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Runtime;

pub mod delivery;
pub mod registry;

pub use registry::{Agent, AgentRegistry, StoragePaths};

/// How this server sets up its Docker engines.
fn docker_settings(config: &crate::config::Config) -> DockerSettings {
    DockerSettings {
        reserved_mem: config.agent_reserved_mem.clone(),
        reserved_cpu: config.agent_reserved_cpu,
        network_isolation: config.network_isolation,
        cuda_shares_per_gpu: config.cuda_shares_per_gpu,
        mps_dir: (!config.gpu_mps_dir.is_empty())
            .then(|| std::path::PathBuf::from(&config.gpu_mps_dir)),
        log_max_size: config.container_log_max_size.clone(),
        disk_size: config.container_disk_size.clone(),
        timeout_secs: config.engine_timeout_secs,
    }
}

/// Registers an engine as an ALIVE agent of this process (in the default resource group)
/// and scans its images.
pub async fn add(state: &impl Runtime, agent: Arc<Agent>) -> ApiResult<()> {
    add_to(
        state,
        agent,
        &state.config().agent_scaling_group.clone(),
        None,
    )
    .await
}

/// Registers an engine as an ALIVE agent in `scaling_group` and scans its images. `storage`:
/// where its host sees each storage host (None: where the manager does, every one).
pub async fn add_to(
    state: &impl Runtime,
    agent: Arc<Agent>,
    scaling_group: &str,
    storage: Option<StoragePaths>,
) -> ApiResult<()> {
    let id = agent.info().id.clone();
    // Only storage hosts that exist here count.
    let storage = storage.map(|paths| {
        let known = crate::storage::hosts(state.config());
        let (kept, unknown): (StoragePaths, StoragePaths) =
            paths.into_iter().partition(|(name, _)| known.contains_key(name));
        for name in unknown.keys() {
            tracing::warn!(agent = %id, storage_host = %name, "the agent's storage setting names a storage host that is not configured (storage_hosts); ignored");
        }
        kept
    });
    let hosts = storage
        .as_ref()
        .map(|s| s.keys().cloned().collect::<Vec<_>>());
    register(state, agent.info(), scaling_group, hosts).await?;
    match storage {
        Some(paths) => state.agents().storage.write().insert(id, paths),
        None => state.agents().storage.write().remove(&id),
    };
    state.agents().insert(agent.clone()).await;
    if let Err(e) = scan_local_images(state, agent.as_ref()).await {
        tracing::warn!(agent = %agent.info().id, error = %e.message, cause = %e.chain(), "scanning local images failed");
    }
    Ok(())
}

/// Connects every configured engine and registers it as an ALIVE agent. An engine that cannot
/// be reached is logged and skipped (its agent row, if any, stays LOST); one whose settings
/// are unsafe (plain TCP not named insecure) was refused when the configuration was loaded.
/// Whether an agent's session network is routed between the hosts (it may hold a container of a
/// multi-node cluster): its engine has a session subnet; an agent another process drives is
/// told by its address (a remote engine's subnet is required).
pub async fn routed(state: &impl Runtime, agent: &agents::Model) -> bool {
    match state.agents().get(&agent.id).await {
        Some(engine) => engine.info().session_subnet.is_some(),
        None => agent.addr.starts_with("tcp://"),
    }
}

/// Whether a resource group has a routed agent that is not gone for good.
pub async fn group_has_routed(state: &impl Runtime, scaling_group: &str) -> ApiResult<bool> {
    let rows = agents::Entity::find()
        .filter(agents::Column::ScalingGroup.eq(scaling_group))
        .filter(agents::Column::Status.ne(AgentStatus::Terminated))
        .all(state.read())
        .await?;
    for a in &rows {
        if routed(state, a).await {
            return Ok(true);
        }
    }
    Ok(false)
}

pub async fn start_all(state: &impl Runtime) -> ApiResult<()> {
    let settings = docker_settings(state.config());
    let engines = state
        .config()
        .all_engines()
        .map_err(|e| ApiError::bad_request(format!("{e:#}")))?;
    let connects = engines.into_iter().map(|planned| {
        let settings = &settings;
        async move {
            let connected = DockerEngine::connect(
                &planned.endpoint,
                settings,
                state.instance_id(),
                &planned.network,
            )
            .await;
            (planned, connected)
        }
    });
    // Side by side: an engine that hangs holds up no other.
    for (planned, connected) in futures_util::future::join_all(connects).await {
        let (url, group) = (&planned.endpoint.url, &planned.scaling_group);
        match connected {
            Ok(engine) => {
                let info = engine.info().clone();
                add_to(state, Arc::new(engine), group, planned.storage).await?;
                tracing::info!(agent = %info.id, endpoint = %url, scaling_group = %group, capacity = %info.capacity, "agent started");
            }
            Err(e) => {
                tracing::error!(endpoint = %url, error = format!("{e:#}"), "container engine unavailable; no agent for it")
            }
        }
    }
    Ok(())
}

async fn register(
    state: &impl Runtime,
    agent: &bai_engine::EngineInfo,
    scaling_group: &str,
    storage_hosts: Option<Vec<String>>,
) -> ApiResult<()> {
    let storage_hosts = storage_hosts.map(entity::columns::StringList);
    if entity::scaling_groups::Entity::find_by_id(scaling_group.to_string())
        .one(state.db())
        .await?
        .is_none()
    {
        // As Backend.AI's agents, it joins the group by name; until an admin creates it,
        // nobody may schedule there (`--scaling-group` answers NOT_FOUND).
        tracing::warn!(agent = %agent.id, scaling_group, "the agent joins a resource group that does not exist yet; create it (Admin → Resource groups) to run sessions there");
    }
    let now = state.clock().now();
    let existing = agents::Entity::find_by_id(agent.id.clone())
        .one(state.db())
        .await?;
    let plugins = json!({
        "cuda": {
            "devices": agent.gpus.iter().map(|g| json!({"id": g.id, "uuid": g.uuid, "name": g.name, "memory": g.memory_bytes})).collect::<Vec<_>>(),
        }
    });
    match existing {
        Some(row) => {
            let mut m = row.into_active_model();
            m.status = Set(AgentStatus::Alive);
            m.status_changed = Set(Some(now));
            m.region = Set(state.config().agent_region.clone());
            m.scaling_group = Set(scaling_group.to_string());
            m.available_slots = Set(agent.capacity.clone());
            m.addr = Set(agent.endpoint.clone());
            m.lost_at = Set(None);
            m.last_heartbeat = Set(Some(now));
            m.version = Set(agent.version.clone());
            m.architecture = Set(agent.architecture.clone());
            m.compute_plugins = Set(plugins);
            m.storage_hosts = Set(storage_hosts);
            m.update(state.db()).await?;
        }
        None => {
            agents::ActiveModel {
                id: Set(agent.id.clone()),
                status: Set(AgentStatus::Alive),
                status_changed: Set(Some(now)),
                region: Set(state.config().agent_region.clone()),
                scaling_group: Set(scaling_group.to_string()),
                schedulable: Set(true),
                available_slots: Set(agent.capacity.clone()),
                occupied_slots: Set(Default::default()),
                addr: Set(agent.endpoint.clone()),
                public_host: Set(None),
                first_contact: Set(now),
                lost_at: Set(None),
                last_heartbeat: Set(Some(now)),
                version: Set(agent.version.clone()),
                architecture: Set(agent.architecture.clone()),
                compute_plugins: Set(plugins),
                live_stat: Set(None),
                storage_hosts: Set(storage_hosts),
            }
            .insert(state.db())
            .await?;
        }
    }
    state
        .events()
        .changed(ObjectKind::Agent, ChangeAction::Modified, &agent.id, None);
    Ok(())
}

/// Sets an agent's status (and publishes the change) when it differs.
async fn set_status(state: &impl Runtime, id: &str, status: AgentStatus) -> ApiResult<()> {
    match agents::Entity::find_by_id(id.to_string())
        .one(state.db())
        .await?
    {
        Some(row) => apply_status(state, row, status).await,
        None => Ok(()),
    }
}

/// [`set_status`] on a row already read.
async fn apply_status(
    state: &impl Runtime,
    row: agents::Model,
    status: AgentStatus,
) -> ApiResult<()> {
    let id = row.id.clone();
    let id = id.as_str();
    let now = state.clock().now();
    let changed = row.status != status;
    let mut m = row.into_active_model();
    if changed {
        m.status = Set(status);
        m.status_changed = Set(Some(now));
        if status == AgentStatus::Lost {
            m.lost_at = Set(Some(now));
        }
    }
    if status == AgentStatus::Alive {
        m.last_heartbeat = Set(Some(now));
    }
    m.update(state.db()).await?;
    if changed {
        tracing::info!(agent = id, status = %status, "agent status changed");
        state
            .events()
            .changed(ObjectKind::Agent, ChangeAction::Modified, id, None);
        state.scheduler().wake();
    }
    Ok(())
}

/// One heartbeat of one agent: ALIVE when its engine answers; LOST once it has missed
/// `agent_lost_after_misses` in a row (`misses` counts them; 0 = it answered this time). An
/// agent coming back is reconciled before it is ALIVE again, so nothing is scheduled onto it
/// while containers of sessions that ended meanwhile still hold its resources.
///
/// `misses` is owned by the process that drives the agent (agents live in their process).
pub async fn beat(state: &impl Runtime, agent: &Arc<Agent>, misses: &mut u32) -> AgentStatus {
    let id = &agent.info().id;
    let status = match agent.ping().await {
        Ok(()) => {
            *misses = 0;
            AgentStatus::Alive
        }
        Err(e) => {
            *misses = misses.saturating_add(1);
            tracing::warn!(agent = %id, misses = *misses, error = ?e, "the agent's container engine does not answer");
            if *misses < state.config().agent_lost_after_misses.max(1) {
                return AgentStatus::Alive;
            }
            AgentStatus::Lost
        }
    };
    let updated = async {
        let Some(row) = agents::Entity::find_by_id(id.clone())
            .one(state.db())
            .await?
        else {
            return Ok(());
        };
        let was = row.status;
        if was == AgentStatus::Lost && status == AgentStatus::Alive {
            tracing::info!(agent = %id, "the agent is back; reconciling its containers");
            crate::sessions::reconcile::sweep_agent(state, agent.as_ref()).await?;
        }
        apply_status(state, row, status).await?;
        if was != status && matches!(status, AgentStatus::Lost | AgentStatus::Alive) {
            crate::sessions::agent_lost(state, id, status == AgentStatus::Lost).await?;
        }
        Ok::<(), ApiError>(())
    };
    if let Err(e) = updated.await {
        tracing::warn!(agent = %id, error = %e.message, cause = %e.chain(), "heartbeat update failed; the next heartbeat retries");
    }
    status
}

/// Heartbeats: every `heartbeat_secs`, each agent pings its engine (see [`beat`]). Agents of
/// other processes that stopped beating for `agent_lost_after_misses` periods become LOST.
pub async fn heartbeat_loop(state: impl Runtime) {
    let period = Duration::from_secs(state.config().heartbeat_secs.max(1));
    // Previous cumulative CPU time per agent, to turn it into a rate.
    let mut previous: HashMap<String, (std::time::Instant, u64)> = HashMap::new();
    let mut misses: HashMap<String, u32> = HashMap::new();
    loop {
        tokio::time::sleep(period).await;
        // Side by side: an engine that hangs (until the call timeout) delays no other agent.
        // Each engine's heartbeat is beaten by the process that drives it (its lease).
        let agents: Vec<Arc<Agent>> = state
            .agents()
            .all()
            .await
            .into_iter()
            .filter(|a| state.cluster().drives(&a.info().id))
            .collect();
        let beats = agents.iter().map(|agent| {
            let mut missed = misses.get(&agent.info().id).copied().unwrap_or(0);
            let state = &state;
            async move {
                beat(state, agent, &mut missed).await;
                // Sampled only from an engine that just answered.
                let (sample, gpus) = if missed == 0 {
                    (agent.usage_sample().await, agent.gpu_sample().await)
                } else {
                    (None, None)
                };
                (agent.info().id.clone(), missed, sample, gpus)
            }
        });
        for (id, missed, sample, gpus) in futures_util::future::join_all(beats).await {
            misses.insert(id.clone(), missed);
            if let Some((cpu_ns, mem, containers)) = sample {
                let gpus = gpus.map(|s| bai_engine::gpu::device_use(&s));
                let live = LiveUse {
                    cpu_ns,
                    mem,
                    containers,
                    gpus: gpus.unwrap_or_default(),
                };
                record_live_use(&state, &id, &mut previous, live).await;
            }
        }
        // Agents nobody beats for a while are LOST: the leader says so.
        if !state.cluster().is_leader() {
            continue;
        }
        let silent = period * state.config().agent_lost_after_misses.max(1);
        let deadline = state.clock().now() - chrono::Duration::from_std(silent).unwrap_or_default();
        let stale = agents::Entity::find()
            .filter(agents::Column::Status.eq(AgentStatus::Alive))
            .filter(agents::Column::LastHeartbeat.lt(deadline))
            .all(state.db())
            .await;
        match stale {
            Ok(rows) => {
                for row in rows {
                    if let Err(e) = set_status(&state, &row.id, AgentStatus::Lost).await {
                        tracing::warn!(agent = %row.id, error = %e.message, cause = %e.chain(), "marking a silent agent lost failed; next sweep retries");
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading agents for the heartbeat sweep failed; next sweep retries")
            }
        }
    }
}

/// Stores the agent's live CPU (as a rate since the last heartbeat) and memory use.
/// One sample of an agent's use: its containers' cumulative CPU time, memory and count, and
/// each GPU's (UUID, use, memory) from NVML.
struct LiveUse {
    cpu_ns: u64,
    mem: u64,
    containers: usize,
    gpus: Vec<(String, bai_engine::gpu::GpuUse, u64)>,
}

async fn record_live_use(
    state: &impl Runtime,
    id: &str,
    previous: &mut HashMap<String, (std::time::Instant, u64)>,
    LiveUse {
        cpu_ns,
        mem,
        containers,
        gpus,
    }: LiveUse,
) {
    let now = std::time::Instant::now();
    let pct = match previous.insert(id.to_string(), (now, cpu_ns)) {
        Some((t, before)) if cpu_ns >= before => {
            (cpu_ns - before) as f64 / now.duration_since(t).as_nanos().max(1) as f64 * 100.0
        }
        _ => 0.0,
    };
    let mut live = json!({"cpu_used_pct": (pct * 10.0).round() / 10.0, "mem_used_bytes": mem, "containers": containers});
    if !gpus.is_empty() {
        live["gpus"] = gpus
            .iter()
            .map(|(uuid, u, total)| json!({"uuid": uuid, "util_pct": u.util_pct, "mem_used_bytes": u.mem_bytes, "mem_total_bytes": total}))
            .collect();
    }
    let updated = agents::Entity::update_many()
        .col_expr(
            agents::Column::LiveStat,
            sea_orm::sea_query::Expr::value(live),
        )
        .filter(agents::Column::Id.eq(id))
        .exec(state.db())
        .await;
    match updated {
        Ok(_) => state
            .events()
            .changed(ObjectKind::Agent, ChangeAction::Modified, id, None),
        Err(e) => tracing::warn!(agent = id, error = %e, "recording live use failed"),
    }
}

/// On shutdown the agents of this process stop: TERMINATED, unless another manager is alive
/// to drive them (it takes their leases over and beats their heartbeats).
pub async fn stop_all(state: &impl Runtime) {
    if state.cluster().is_shared()
        && crate::cluster::others_alive(state.db(), state.cluster()).await
    {
        tracing::info!("other managers are alive: the agents stay theirs to drive");
        return;
    }
    for agent in state.agents().all().await {
        if let Err(e) = set_status(state, &agent.info().id, AgentStatus::Terminated).await {
            // Shutting down: the next start's heartbeat corrects the row.
            tracing::warn!(agent = %agent.info().id, error = %e.message, cause = %e.chain(), "marking an agent terminated at shutdown failed");
        }
    }
}

/// Splits `registry/namespace/name:tag` (registry = first part when it has a dot or colon);
/// for `…name@sha256:…` the third part is the digest.
pub fn split_reference(reference: &str, default_registry: &str) -> (String, String, String) {
    let (path, tag) = match reference.split_once('@') {
        Some((p, digest)) => (p, digest.to_string()),
        None => match reference.rsplit_once(':') {
            Some((p, t)) if !t.contains('/') => (p, t.to_string()),
            _ => (reference, "latest".to_string()),
        },
    };
    match path.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            (first.to_string(), rest.to_string(), tag)
        }
        _ => (default_registry.to_string(), path.to_string(), tag),
    }
}

/// `{slot: {"min", "max"}}` from the image's `ai.backend.resource.min.*` labels (defaults: cpu
/// 1, mem 1g as Backend.AI).
pub fn resources_from_labels(labels: &HashMap<String, String>) -> Value {
    let mut out = serde_json::Map::new();
    let min = |slot: &str, default: &str| {
        let raw = labels
            .get(&format!("ai.backend.resource.min.{slot}"))
            .map(String::as_str)
            .unwrap_or(default);
        entity::slots::parse_amount(slot, raw)
            .unwrap_or_default()
            .to_string()
    };
    out.insert("cpu".into(), json!({"min": min("cpu", "1"), "max": null}));
    out.insert("mem".into(), json!({"min": min("mem", "1g"), "max": null}));
    for (k, v) in labels {
        if let Some(slot) = k.strip_prefix("ai.backend.resource.min.")
            && slot != "cpu"
            && slot != "mem"
            && let Ok(amount) = entity::slots::parse_amount(slot, v)
        {
            out.insert(
                slot.to_string(),
                json!({"min": amount.to_string(), "max": null}),
            );
        }
    }
    Value::Object(out)
}

/// Adds the engine's environment images (those with `ai.backend.kernelspec`) to the catalog
/// and records which agent has them. Edited minimum resources are kept on rescan.
pub async fn scan_local_images(state: &impl Runtime, agent: &Agent) -> ApiResult<usize> {
    let found = agent.environment_images().await?;
    let agent = agent.info();
    let mut count = 0;
    for img in found {
        for reference in &img.repo_tags {
            if reference.ends_with("<none>") {
                continue;
            }
            let (registry, image, tag) =
                split_reference(reference, &state.config().local_registry_name);
            let name = format!("{registry}/{image}:{tag}");
            let labels: Value = json!(img.labels);
            let existing = images::Entity::find()
                .filter(images::Column::Name.eq(&name))
                .filter(images::Column::Architecture.eq(&agent.architecture))
                .one(state.db())
                .await?;
            let (installed, action) = match existing {
                Some(row) => {
                    let mut agents = row.installed_agents.clone();
                    if !agents.contains(&agent.id) {
                        agents.0.push(agent.id.clone());
                    }
                    let mut m = row.into_active_model();
                    m.config_digest = Set(img.id.clone());
                    m.size_bytes = Set(img.size);
                    m.labels = Set(labels);
                    m.is_local = Set(true);
                    m.installed_agents = Set(agents);
                    (m.update(state.db()).await?, ChangeAction::Modified)
                }
                None => (
                    images::ActiveModel {
                        id: Set(Uuid::new_v4()),
                        name: Set(name.clone()),
                        image: Set(image),
                        tag: Set(tag),
                        registry: Set(registry),
                        architecture: Set(agent.architecture.clone()),
                        config_digest: Set(img.id.clone()),
                        size_bytes: Set(img.size),
                        is_local: Set(true),
                        image_type: Set(ImageType::Compute),
                        accelerators: Set(img.labels.get("ai.backend.accelerators").cloned()),
                        resources: Set(resources_from_labels(&img.labels)),
                        labels: Set(labels),
                        created_at: Set(state.clock().now()),
                        installed_agents: Set(vec![agent.id.clone()].into()),
                        owner_id: Set(crate::images::owner_of(&img.labels)),
                    }
                    .insert(state.db())
                    .await?,
                    ChangeAction::Created,
                ),
            };
            if action == ChangeAction::Created {
                crate::images::seed_aliases(state.db(), &installed).await?;
            }
            state
                .events()
                .changed(ObjectKind::Image, action, &installed.name, None);
            count += 1;
        }
    }
    Ok(count)
}

/// Records that `agent_id` now has `image` locally.
pub async fn mark_installed(
    state: &impl Runtime,
    image: &images::Model,
    agent_id: &str,
) -> ApiResult<()> {
    // Read again under the image's turn: two agents marked at once must not undo each other.
    let _turn = state.agents().turn(format!("image-row:{}", image.id)).await;
    let image = crate::lookup::get::<images::Entity>(state.db(), "image", image.id).await?;
    let mut agents = image.installed_agents.clone();
    if agents.contains(agent_id) {
        return Ok(());
    }
    agents.0.push(agent_id.to_string());
    let mut m = image.clone().into_active_model();
    m.installed_agents = Set(agents);
    m.update(state.db()).await?;
    state
        .events()
        .changed(ObjectKind::Image, ChangeAction::Modified, &image.name, None);
    Ok(())
}

/// The Docker reference of a catalog image (local images keep their tag as found).
/// Recomputes every agent's `occupied_slots` from the kernels holding resources (the
/// source of truth), for display.
pub async fn refresh_agent_usage(state: &impl Runtime) -> ApiResult<()> {
    let live = kernels::Entity::find()
        .filter(kernels::Column::Status.is_in(SessionStatus::ALLOCATED.iter().copied()))
        .all(state.db())
        .await?;
    let mut usage: HashMap<String, ResourceSlots> = HashMap::new();
    for k in live {
        if let Some(a) = k.agent {
            let e = usage.entry(a).or_default();
            *e = e.add(&k.requested_slots);
        }
    }
    for a in agents::Entity::find().all(state.db()).await? {
        let now = usage.remove(&a.id).unwrap_or_default();
        if a.occupied_slots != now {
            let id = a.id.clone();
            let mut m = a.into_active_model();
            m.occupied_slots = Set(now);
            m.update(state.db()).await?;
            state
                .events()
                .changed(ObjectKind::Agent, ChangeAction::Modified, id, None);
        }
    }
    Ok(())
}

pub fn docker_reference(image: &images::Model) -> String {
    format!("{}/{}:{}", image.registry, image.image, image.tag)
}

pub(crate) fn not_alive(id: &str) -> ApiError {
    ApiError::conflict(format!("agent {id} is not available"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references() {
        assert_eq!(
            split_reference("bai.local/stable/python:3.11-debian12", "x"),
            (
                "bai.local".into(),
                "stable/python".into(),
                "3.11-debian12".into()
            )
        );
        assert_eq!(
            split_reference("127.0.0.1:5000/a/b:1", "x"),
            ("127.0.0.1:5000".into(), "a/b".into(), "1".into())
        );
        assert_eq!(
            split_reference("python", "bai.local"),
            ("bai.local".into(), "python".into(), "latest".into())
        );
        assert_eq!(
            split_reference("127.0.0.1:5000/a/b@sha256:00ff", "x"),
            ("127.0.0.1:5000".into(), "a/b".into(), "sha256:00ff".into())
        );
        let labels: HashMap<String, String> = [(
            "ai.backend.resource.min.mem".to_string(),
            "256m".to_string(),
        )]
        .into_iter()
        .collect();
        let r = resources_from_labels(&labels);
        assert_eq!(r["mem"]["min"], "268435456");
        assert_eq!(r["cpu"]["min"], "1");
    }
}
