//! In-process agents, one per container engine: registration in the agents table,
//! heartbeats (ALIVE / LOST / TERMINATED), the local image scan and reconciliation.

use std::collections::HashMap;
use std::sync::Arc;

use entity::enums::{AgentStatus, SessionStatus};
use entity::slots::ResourceSlots;
use entity::{agents, kernels};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, QueryFilter, Set};
use serde_json::json;

pub use bai_engine::Engine;
use bai_engine::docker::{DockerEngine, DockerSettings};

use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Runtime;

pub mod registry;

use bai_storage::StoragePaths;
pub use registry::{Agent, AgentRegistry};

/// How this server sets up its Docker engines.
fn docker_settings(config: &crate::config::Config) -> DockerSettings {
    DockerSettings {
        reserved_mem: config.agent_reserved_mem.clone(),
        reserved_cpu: config.agent_reserved_cpu,
        cpu_overcommit: config.agent_cpu_overcommit,
        network_isolation: config.network_isolation,
        cuda_shares_per_gpu: config.cuda_shares_per_gpu,
        mps_dir: (!config.gpu_mps_dir.is_empty())
            .then(|| std::path::PathBuf::from(&config.gpu_mps_dir)),
        log_max_size: config.container_log_max_size.clone(),
        disk_size: config.container_disk_size.clone(),
        timeout_secs: config.engine_timeout_secs,
    }
}

/// Registers an engine as an ALIVE agent of this process (in the default resource group; a
/// LOST one stays LOST until its first heartbeat) and scans its images.
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
    if let Err(e) = crate::images::local::scan(state, agent.as_ref()).await {
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
    let connected = futures_util::future::join_all(connects).await;
    // One engine id is one engine: two endpoints reporting it are never merged into one
    // agent (the second would take over the first's row), nor made two (one host's
    // resources offered twice).
    let ids = connected.iter().filter_map(|(planned, c)| {
        let engine = c.as_ref().ok()?;
        Some((
            engine.info().engine_id.as_str(),
            planned.endpoint.url.as_str(),
        ))
    });
    if let Some(clash) = same_engine_id(ids) {
        return Err(clash);
    }
    for (planned, connected) in connected {
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

/// The first two endpoints (of engine id, endpoint pairs) that report one engine id, as the
/// refusal an operator reads at start.
fn same_engine_id<'a>(ids: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<ApiError> {
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for (engine_id, endpoint) in ids {
        if engine_id.is_empty() {
            continue;
        }
        if let Some(first) = seen.insert(engine_id, endpoint) {
            return Some(ApiError::bad_request(format!(
                "the container engines at {first} and {endpoint} report one engine id ({engine_id}): \
                 one engine listed twice, or hosts cloned from one disk image with the engine's id. \
                 List each engine once; on a cloned host, give its engine a new id (stop dockerd, \
                 remove /var/lib/docker/engine-id — /etc/docker/key.json before Docker 23 — and start it again)"
            )));
        }
    }
    None
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
            // A LOST agent comes back through its first heartbeat alone, which reconciles
            // it before it is ALIVE and tells its sessions (`heartbeat`).
            let lost = row.status == AgentStatus::Lost;
            let mut m = row.into_active_model();
            if !lost {
                m.status = Set(AgentStatus::Alive);
                m.status_changed = Set(Some(now));
                m.lost_at = Set(None);
            }
            m.region = Set(state.config().agent_region.clone());
            m.scaling_group = Set(scaling_group.to_string());
            m.available_slots = Set(agent.capacity.clone());
            m.addr = Set(agent.endpoint.clone());
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
pub(crate) async fn set_status(
    state: &impl Runtime,
    id: &str,
    status: AgentStatus,
) -> ApiResult<()> {
    match agents::Entity::find_by_id(id.to_string())
        .one(state.db())
        .await?
    {
        Some(row) => apply_status(state, row, status).await,
        None => Ok(()),
    }
}

/// [`set_status`] on a row already read.
pub(crate) async fn apply_status(
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

pub(crate) fn not_alive(id: &str) -> ApiError {
    ApiError::conflict(format!("agent {id} is not available"))
}

/// Every agent's row, whatever its status.
pub async fn all_rows<C: sea_orm::ConnectionTrait>(db: &C) -> ApiResult<Vec<agents::Model>> {
    Ok(agents::Entity::find().all(db).await?)
}

/// The alive, schedulable agents of resource group `scaling_group`.
pub async fn schedulable_in<C: sea_orm::ConnectionTrait>(
    db: &C,
    scaling_group: &str,
) -> ApiResult<Vec<agents::Model>> {
    Ok(agents::Entity::find()
        .filter(agents::Column::ScalingGroup.eq(scaling_group))
        .filter(agents::Column::Status.eq(AgentStatus::Alive))
        .filter(agents::Column::Schedulable.eq(true))
        .all(db)
        .await?)
}

/// Agent `id` (superadmins only; NOT_FOUND otherwise).
pub async fn find<C: sea_orm::ConnectionTrait>(
    db: &C,
    _scope: &crate::auth::SuperadminScope,
    id: String,
) -> ApiResult<agents::Model> {
    crate::lookup::get::<agents::Entity>(db, "agent", id).await
}

/// Agents narrowed to statuses (comma-separated; BAD_REQUEST for an unknown one) and a
/// resource group.
fn filtered(
    status: Option<String>,
    scaling_group: Option<String>,
) -> ApiResult<sea_orm::Select<agents::Entity>> {
    let mut select = agents::Entity::find();
    if let Some(s) = status.filter(|s| !s.is_empty()) {
        let statuses = s
            .split(',')
            .map(|p| {
                AgentStatus::parse(p).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "invalid agent status '{p}' (one of: {})",
                        AgentStatus::choices()
                    ))
                })
            })
            .collect::<ApiResult<Vec<_>>>()?;
        select = select.filter(agents::Column::Status.is_in(statuses));
    }
    if let Some(sg) = scaling_group {
        select = select.filter(agents::Column::ScalingGroup.eq(sg));
    }
    Ok(select)
}

/// The agents a superadmin lists, narrowed to statuses (comma-separated; BAD_REQUEST for an
/// unknown one) and a resource group.
pub fn listable(
    _scope: &crate::auth::SuperadminScope,
    status: Option<String>,
    scaling_group: Option<String>,
) -> ApiResult<sea_orm::Select<agents::Entity>> {
    filtered(status, scaling_group)
}

/// The agents the caller may know of (Backend.AI's agent summaries): a superadmin every one,
/// anyone else those of the resource groups it may use; narrowed as [`listable`].
pub async fn summarized<C: sea_orm::ConnectionTrait>(
    db: &C,
    caller: &crate::auth::Caller,
    status: Option<String>,
    scaling_group: Option<String>,
) -> ApiResult<sea_orm::Select<agents::Entity>> {
    let mut select = filtered(status, scaling_group)?;
    if !caller.is_superadmin() {
        let groups = crate::scaling_groups::allowed_for(
            db,
            &caller.domain_name,
            caller.uuid,
            None,
            caller.access_key.as_deref(),
        )
        .await?;
        select = select.filter(agents::Column::ScalingGroup.is_in(groups));
    }
    Ok(select)
}

/// Containers of running sessions on agent `id`.
pub async fn running_containers<C: sea_orm::ConnectionTrait>(db: &C, id: &str) -> ApiResult<u64> {
    use sea_orm::PaginatorTrait;
    Ok(kernels::Entity::find()
        .filter(kernels::Column::Agent.eq(id))
        .filter(kernels::Column::Status.eq(SessionStatus::Running))
        .count(db)
        .await?)
}

/// Agents of resource group `scaling_group` with `status`.
pub async fn count_in<C: sea_orm::ConnectionTrait>(
    db: &C,
    scaling_group: &str,
    status: AgentStatus,
) -> ApiResult<u64> {
    use sea_orm::PaginatorTrait;
    Ok(agents::Entity::find()
        .filter(agents::Column::ScalingGroup.eq(scaling_group))
        .filter(agents::Column::Status.eq(status))
        .count(db)
        .await?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_endpoints_of_one_engine_id_are_refused_naming_both() {
        let ids = [
            ("AAA", "tcp://10.0.0.1:2376"),
            ("BBB", "tcp://10.0.0.2:2376"),
            ("", "x"),
            ("", "y"),
        ];
        assert!(super::same_engine_id(ids).is_none());
        let clash = super::same_engine_id([
            ("AAA", "tcp://10.0.0.1:2376"),
            ("BBB", "tcp://10.0.0.2:2376"),
            ("AAA", "tcp://10.0.0.3:2376"),
        ])
        .expect("refused");
        assert!(
            clash
                .message
                .contains("tcp://10.0.0.1:2376 and tcp://10.0.0.3:2376"),
            "{}",
            clash.message
        );
        assert!(clash.message.contains("engine-id"), "{}", clash.message);
    }
}
