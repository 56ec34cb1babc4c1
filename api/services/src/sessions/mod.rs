//! Compute sessions: creation (validated and sized as Backend.AI does), the lifecycle
//! PENDING → SCHEDULED → PREPARING → RUNNING → TERMINATING → TERMINATED (CANCELLED, ERROR),
//! with every change in `status_history` and published as an event. Only the scheduler
//! allocates; launch and termination of one session are serialised by a per-session lock.
pub mod apps;
pub mod body;
pub mod commit;
mod create;
pub mod exec;
pub mod files;
#[cfg(test)]
mod lifecycle_tests;
pub mod locks;
pub mod phases;
pub use phases::LaunchPhases;
pub mod reconcile;

pub use create::{
    CreateRequest, create, parse_batch_timeout, resolve_group, size_request, validate_name,
};

use entity::enums::{ClusterRole, SessionResult, SessionStatus, SessionType};
use entity::slots::ResourceSlots;
use entity::{kernels, keypair_resource_policies, sessions};
use rust_decimal::prelude::ToPrimitive;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, QueryFilter, Set,
    TransactionTrait, TryIntoModel,
};
use serde_json::{Value, json};
use std::sync::Arc;
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::events::{Event, SessionEvent};
use crate::store::Runtime;
use bai_engine::{BindMount, KernelSpec};

/// Statuses of sessions that are not over yet.
pub const LIVE: &[SessionStatus] = &[
    SessionStatus::Pending,
    SessionStatus::Scheduled,
    SessionStatus::Preparing,
    SessionStatus::Pulling,
    SessionStatus::Running,
    SessionStatus::Restarting,
    SessionStatus::Terminating,
];

pub const DEFAULT_SHMEM: i64 = 64 * 1024 * 1024;

pub fn publish(
    state: &impl Runtime,
    s: &sessions::Model,
    event: &'static str,
    reason: Option<String>,
) {
    emit(state, s, event, reason, None, None);
}

fn emit(
    state: &impl Runtime,
    s: &sessions::Model,
    event: &'static str,
    reason: Option<String>,
    exit_code: Option<i32>,
    kernel: Option<&kernels::Model>,
) {
    // Every committed change of a session passes here: list counts are stale.
    state.session_counts().changed();
    state
        .events()
        .publish(session_event(s, event, reason, exit_code, kernel));
}

/// The event `event` of session `s` (of one of its containers when `kernel` is given).
fn session_event(
    s: &sessions::Model,
    event: &'static str,
    reason: Option<String>,
    exit_code: Option<i32>,
    kernel: Option<&kernels::Model>,
) -> Event {
    Event::Session(SessionEvent {
        session_id: s.id,
        name: s.name.clone(),
        access_key: s.access_key.clone(),
        user: s.user_uuid,
        domain: s.domain_name.clone(),
        status: s.status,
        event,
        reason: reason.or_else(|| s.status_info.clone()),
        exit_code,
        kernel: kernel.map(|k| bai_types::events::KernelRef {
            id: k.id,
            role: k.cluster_role,
            idx: k.cluster_idx,
        }),
    })
}

/// Backend.AI's event for a session's containers reaching `status` (None: it has none).
fn kernel_event_name(status: SessionStatus) -> Option<&'static str> {
    match status {
        SessionStatus::Preparing => Some("kernel_preparing"),
        SessionStatus::Running => Some("kernel_started"),
        SessionStatus::Terminating => Some("kernel_terminating"),
        SessionStatus::Terminated => Some("kernel_terminated"),
        SessionStatus::Cancelled | SessionStatus::Error => Some("kernel_cancelled"),
        _ => None,
    }
}

fn event_name(status: SessionStatus) -> &'static str {
    match status {
        SessionStatus::Pending => "session_enqueued",
        SessionStatus::Scheduled => "session_scheduled",
        SessionStatus::Preparing | SessionStatus::Pulling => "session_preparing",
        SessionStatus::Running | SessionStatus::Restarting => "session_started",
        SessionStatus::Terminating => "session_terminating",
        SessionStatus::Terminated => "session_terminated",
        SessionStatus::Cancelled => "session_cancelled",
        SessionStatus::Error => "session_failure",
    }
}

/// What changes with a status.
#[derive(Default)]
pub struct Change {
    pub info: Option<String>,
    pub data: Option<Value>,
    /// Each kernel's agent (a placement): the session's agents are theirs, in kernel order.
    pub agents: Option<std::collections::HashMap<Uuid, String>>,
    pub container_id: Option<String>,
    pub occupying: Option<ResourceSlots>,
    pub result: Option<SessionResult>,
    pub exit_code: Option<i32>,
    pub log: Option<String>,
    /// The status the session must have for the change to happen (compare-and-set): a change
    /// made meanwhile by another task or another manager answers CONFLICT instead.
    pub expect: Option<SessionStatus>,
    /// Each kernel's new resource options (GPU devices given at placement).
    pub kernel_opts: Option<std::collections::HashMap<Uuid, Value>>,
    /// A placement: its agents are locked and their capacity checked against what is
    /// allocated there, in the same transaction (two schedulers never over-commit one).
    pub check_capacity: bool,
}

/// Moves a session and its kernel to `to`, recording the time in `status_history`. The
/// session's row changes only from the status it was read in (or `change.expect`), so two
/// processes never make the same change twice; `owner` (the process making it) owns the
/// in-flight work that follows.
pub async fn transition<C: ConnectionTrait>(
    db: &C,
    id: Uuid,
    to: SessionStatus,
    change: Change,
    now: chrono::DateTime<chrono::Utc>,
    owner: &str,
) -> ApiResult<(sessions::Model, Vec<kernels::Model>)> {
    let s = crate::lookup::get::<sessions::Entity>(db, "session", id).await?;
    if matches!(
        s.status,
        SessionStatus::Terminated | SessionStatus::Cancelled | SessionStatus::Error
    ) {
        // A finished session never changes again (a late scheduler pass or launch must not
        // bring it back).
        return Err(ApiError::conflict(format!(
            "Session '{}' has already ended ({})",
            s.name, s.status
        ))
        .with_source(LostRace));
    }
    let from = s.status;
    if let Some(expected) = change.expect
        && expected != from
    {
        return Err(changed_meanwhile(&s.name, from));
    }
    let name = s.name.clone();
    let mut history = s.status_history.clone();
    if let Some(h) = history.as_object_mut() {
        h.insert(to.as_str().to_string(), json!(now.to_rfc3339()));
    }
    let terminal = matches!(
        to,
        SessionStatus::Terminated | SessionStatus::Cancelled | SessionStatus::Error
    );
    let mut m = s.into_active_model();
    m.status = Set(to);
    m.status_changed = Set(now);
    m.status_history = Set(history.clone());
    m.owner = Set(Some(owner.to_string()));
    if change.info.is_some() || to != SessionStatus::Pending {
        m.status_info = Set(change.info.clone());
    }
    if change.data.is_some() {
        m.status_data = Set(change.data.clone());
    }
    let mut kernel_rows = kernels::Entity::find()
        .filter(kernels::Column::SessionId.eq(id))
        .all(db)
        .await?;
    in_kernel_order(&mut kernel_rows);
    if change.check_capacity
        && let Some(agents) = &change.agents
    {
        check_capacity(db, id, agents, &kernel_rows).await?;
    }
    if let Some(agents) = &change.agents {
        let mut ids: Vec<String> = Vec::new();
        for a in kernel_rows.iter().filter_map(|k| agents.get(&k.id)) {
            if !ids.contains(a) {
                ids.push(a.clone());
            }
        }
        m.agent_ids = Set(ids.into());
    }
    if let Some(o) = &change.occupying {
        m.occupying_slots = Set(o.clone());
    }
    if let Some(r) = change.result {
        m.result = Set(r);
    }
    if terminal {
        m.terminated_at = Set(Some(now));
    }
    // Compare-and-set: only from the status read above. What it writes is the row now.
    let updated_row = m.clone().try_into_model()?;
    let updated = sessions::Entity::update_many()
        .set(m)
        .filter(sessions::Column::Id.eq(id))
        .filter(sessions::Column::Status.eq(from))
        .exec(db)
        .await?;
    if updated.rows_affected == 0 {
        let now_is = crate::lookup::get::<sessions::Entity>(db, "session", id)
            .await
            .map(|s| s.status)
            .unwrap_or(from);
        return Err(changed_meanwhile(&name, now_is));
    }
    let updated = updated_row;
    let mut kernels_now = Vec::new();
    for k in kernel_rows {
        let (k_id, k_requested) = (k.id, k.requested_slots.clone());
        let mut km = k.into_active_model();
        km.status = Set(to);
        km.status_changed = Set(now);
        km.status_history = Set(history.clone());
        km.status_info = Set(change.info.clone());
        if let Some(a) = change.agents.as_ref().and_then(|m| m.get(&k_id)) {
            km.agent = Set(Some(a.clone()));
        }
        if let Some(opts) = change.kernel_opts.as_ref().and_then(|m| m.get(&k_id)) {
            km.resource_opts = Set(opts.clone());
        }
        if let Some(c) = &change.container_id {
            km.container_id = Set(Some(c.clone()));
        }
        if change.occupying.is_some() {
            // Each container holds what it asked for (a cluster's session holds the sum).
            km.occupied_slots = Set(k_requested.clone());
        }
        if let Some(code) = change.exit_code {
            km.exit_code = Set(Some(code));
        }
        if let Some(log) = &change.log {
            km.container_log = Set(Some(log.clone()));
        }
        if terminal {
            km.terminated_at = Set(Some(now));
        }
        kernels_now.push(km.update(db).await?);
    }
    Ok((updated, kernels_now))
}

/// The cause of a change refused because its session moved on meanwhile (another task or
/// another manager changed it first): whoever lost the race has nothing left to do.
#[derive(Debug)]
pub struct LostRace;

impl std::fmt::Display for LostRace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the session changed meanwhile")
    }
}

impl std::error::Error for LostRace {}

/// The refusal of a change whose session moved on meanwhile.
fn changed_meanwhile(name: &str, now_is: SessionStatus) -> ApiError {
    ApiError::conflict(format!(
        "Session '{name}' changed meanwhile (it is {now_is} now)"
    ))
    .with_source(LostRace)
}

/// Whether `e` refused a change that another task or manager made first (or that ended the
/// session first).
pub fn lost_race(e: &ApiError) -> bool {
    e.source().is_some_and(|s| s.is::<LostRace>())
}

/// Refuses a placement beyond an agent's capacity: the agents' rows are locked (PostgreSQL:
/// `FOR UPDATE`; SQLite has one writer) and what is allocated on each is summed from the
/// kernels, with the session's own containers added.
async fn check_capacity<C: ConnectionTrait>(
    db: &C,
    id: Uuid,
    agents: &std::collections::HashMap<Uuid, String>,
    own: &[kernels::Model],
) -> ApiResult<()> {
    use sea_orm::QuerySelect;
    let mut wanted: std::collections::HashMap<&str, ResourceSlots> =
        std::collections::HashMap::new();
    for k in own {
        if let Some(a) = agents.get(&k.id) {
            let e = wanted.entry(a.as_str()).or_default();
            *e = e.add(&k.requested_slots);
        }
    }
    let mut names: Vec<&str> = wanted.keys().copied().collect();
    names.sort_unstable();
    let rows = entity::agents::Entity::find()
        .filter(entity::agents::Column::Id.is_in(names.iter().map(|n| n.to_string())))
        .lock_exclusive()
        .all(db)
        .await?;
    let live = kernels::Entity::find()
        .filter(kernels::Column::Agent.is_in(names.iter().map(|n| n.to_string())))
        .filter(kernels::Column::Status.is_in(SessionStatus::ALLOCATED.iter().copied()))
        .filter(kernels::Column::SessionId.ne(id))
        .all(db)
        .await?;
    for agent in rows {
        let mut used = wanted.get(agent.id.as_str()).cloned().unwrap_or_default();
        for k in live
            .iter()
            .filter(|k| k.agent.as_deref() == Some(&agent.id))
        {
            used = used.add(&k.requested_slots);
        }
        if !used.le(&agent.available_slots) {
            return Err(ApiError::conflict(format!(
                "Agent {} has no room for the session any more ({})",
                agent.id,
                used.exceeding(&agent.available_slots).join(", ")
            ))
            .with_source(LostRace));
        }
    }
    Ok(())
}

/// Applies a status change in one transaction with the events that announce it, and what
/// follows it in this process (list counts, started apps, agent usage, the scheduler).
pub async fn apply(
    state: &impl Runtime,
    id: Uuid,
    to: SessionStatus,
    change: Change,
) -> ApiResult<sessions::Model> {
    // Session and kernel rows change together: nobody sees a RUNNING session without its
    // container.
    let (result, exit_code) = (change.result, change.exit_code);
    let txn = state.db().begin().await?;
    let (s, kernels) = transition(
        &txn,
        id,
        to,
        change,
        state.clock().now(),
        &state.cluster().id,
    )
    .await?;
    // Backend.AI's order: a batch's result, then each container, then the session.
    let mut events = Vec::new();
    match result {
        Some(SessionResult::Success) => {
            events.push(session_event(&s, "session_success", None, exit_code, None))
        }
        Some(SessionResult::Failure) => {
            events.push(session_event(&s, "session_failure", None, exit_code, None))
        }
        _ => {}
    }
    if let Some(name) = kernel_event_name(to) {
        for k in &kernels {
            events.push(session_event(&s, name, None, None, Some(k)));
        }
    }
    // A failed start (ERROR, `session_failure`) has no exit code of its own: -1.
    let code = (to == SessionStatus::Error).then_some(exit_code.unwrap_or(-1));
    events.push(session_event(&s, event_name(to), None, code, None));
    let events = crate::events::in_transaction(state.events(), &txn, events).await?;
    txn.commit().await?;
    state.session_counts().changed();
    crate::events::after_commit(state.events(), events);
    if matches!(
        to,
        SessionStatus::Terminated | SessionStatus::Cancelled | SessionStatus::Error
    ) {
        // Its apps are gone with its container.
        state.started_apps().forget(id);
    }
    if matches!(
        to,
        SessionStatus::Terminated
            | SessionStatus::Cancelled
            | SessionStatus::Error
            | SessionStatus::Running
    ) {
        crate::agents::refresh_agent_usage(state).await?;
        state.scheduler().wake();
    }
    Ok(s)
}

/// How far the session's image has come to its agent ("pulling <image>: 42%"): written on
/// the session (not its status history) and announced as Backend.AI's `kernel_pulling`.
pub async fn pulling(state: &impl Runtime, id: Uuid, image: &str, percent: u8) -> ApiResult<()> {
    let info = format!("pulling {image}: {percent}%");
    let updated = sessions::Entity::update_many()
        .col_expr(sessions::Column::StatusInfo, Expr::value(info.clone()))
        .filter(sessions::Column::Id.eq(id))
        .filter(sessions::Column::Status.eq(SessionStatus::Pulling))
        .exec(state.db())
        .await?;
    if updated.rows_affected == 0 {
        return Ok(()); // no longer pulling: nothing to say
    }
    let s = crate::lookup::get::<sessions::Entity>(state.db(), "session", id).await?;
    publish(state, &s, "kernel_pulling", Some(info));
    Ok(())
}

/// The sessions on an agent that stopped answering say so (`status_info` "agent-lost": the
/// session may well still run, nothing is concluded); when it answers again and its
/// reconciliation kept them, they stop saying it.
pub async fn agent_lost(state: &impl Runtime, agent_id: &str, lost: bool) -> ApiResult<()> {
    const LOST: &str = "agent-lost";
    let on_agent = kernels::Entity::find()
        .filter(kernels::Column::Agent.eq(agent_id))
        .filter(kernels::Column::Status.is_in(SessionStatus::ALLOCATED.iter().copied()))
        .all(state.db())
        .await?;
    for k in on_agent {
        let (from, to) = if lost {
            (None, Some(LOST))
        } else {
            (Some(LOST), None)
        };
        let mut update = sessions::Entity::update_many()
            .col_expr(
                sessions::Column::StatusInfo,
                Expr::value(to.map(str::to_string)),
            )
            .filter(sessions::Column::Id.eq(k.session_id))
            .filter(sessions::Column::Status.is_in(SessionStatus::ALLOCATED.iter().copied()));
        update = match from {
            Some(old) => update.filter(sessions::Column::StatusInfo.eq(old)),
            None => update,
        };
        if update.exec(state.db()).await?.rows_affected == 0 {
            continue;
        }
        let s = crate::lookup::get::<sessions::Entity>(state.db(), "session", k.session_id).await?;
        let event = if lost {
            "session_agent_lost"
        } else {
            "session_agent_returned"
        };
        publish(state, &s, event, to.map(str::to_string));
    }
    Ok(())
}

/// The agent and container of a kernel that is running now.
pub async fn container_of(
    state: &impl Runtime,
    k: &kernels::Model,
) -> ApiResult<(std::sync::Arc<crate::agents::Agent>, String)> {
    let (Some(agent_id), Some(container)) = (&k.agent, &k.container_id) else {
        return Err(ApiError::bad_request("The session has no container"));
    };
    let agent = state
        .agents()
        .get(agent_id)
        .await
        .ok_or_else(|| crate::agents::not_alive(agent_id))?;
    Ok((agent, container.clone()))
}

pub async fn main_kernel<C: ConnectionTrait>(db: &C, session: Uuid) -> ApiResult<kernels::Model> {
    kernels::Entity::find()
        .filter(kernels::Column::SessionId.eq(session))
        .filter(kernels::Column::ClusterRole.eq(ClusterRole::Main))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found("kernel of session", session))
}

/// Starts the container of a SCHEDULED session: PREPARING → RUNNING, or ERROR.
pub async fn launch(state: impl Runtime, id: Uuid) {
    let lock = state.session_locks().get(id).await;
    let _guard = lock.lock().await;
    if let Err(e) = launch_locked(&state, id).await {
        if lost_race(&e) {
            // Ended (or moved on) meanwhile: whoever did it recorded why.
            tracing::info!(session = %id, reason = %e.message, "a launch stopped: the session changed meanwhile");
            return;
        }
        tracing::warn!(session = %id, error = %e.message, cause = %e.chain(), "session failed to start");
        let data = json!({"error": {"message": e.message}});
        if let Err(e2) = apply(
            &state,
            id,
            SessionStatus::Error,
            Change {
                info: Some("kernel-creation-failed".into()),
                data: Some(data),
                ..Default::default()
            },
        )
        .await
        {
            tracing::error!(session = %id, error = %e2.message, "cannot record a failed start");
        }
    }
}

/// The kernels of a session, main first, then by local rank.
pub async fn kernels_of<C: ConnectionTrait>(
    db: &C,
    session: Uuid,
) -> ApiResult<Vec<kernels::Model>> {
    let mut ks = kernels::Entity::find()
        .filter(kernels::Column::SessionId.eq(session))
        .all(db)
        .await?;
    in_kernel_order(&mut ks);
    Ok(ks)
}

/// A session's kernels in their order: main first, then by local rank (placements and
/// launches name them in this order).
pub fn in_kernel_order(ks: &mut [kernels::Model]) {
    ks.sort_by_key(|k| {
        (
            k.session_id,
            k.cluster_role != ClusterRole::Main,
            k.local_rank,
        )
    });
}

/// A cluster whose containers may run on several agents.
pub fn is_multi_node(s: &sessions::Model) -> bool {
    s.cluster_mode == entity::enums::ClusterMode::MultiNode && s.cluster_size > 1
}

/// Backend.AI's cluster variables of one container: the session's shape (size, replicas per
/// role, every hostname) and the container's place in it.
fn cluster_env(all: &[kernels::Model], k: &kernels::Model) -> Vec<(String, String)> {
    let subs = all
        .iter()
        .filter(|k| k.cluster_role == ClusterRole::Sub)
        .count();
    let mut replicas = vec!["main:1".to_string()];
    if subs > 0 {
        replicas.push(format!("sub:{subs}"));
    }
    let hosts: Vec<&str> = all.iter().map(|k| k.cluster_hostname.as_str()).collect();
    vec![
        ("BACKENDAI_KERNEL_ID".into(), k.id.to_string()),
        (
            "BACKENDAI_CLUSTER_ROLE".into(),
            k.cluster_role.as_str().into(),
        ),
        ("BACKENDAI_CLUSTER_IDX".into(), k.cluster_idx.to_string()),
        (
            "BACKENDAI_CLUSTER_LOCAL_RANK".into(),
            k.local_rank.to_string(),
        ),
        ("BACKENDAI_CLUSTER_SIZE".into(), all.len().to_string()),
        ("BACKENDAI_CLUSTER_REPLICAS".into(), replicas.join(",")),
        ("BACKENDAI_CLUSTER_HOST".into(), k.cluster_hostname.clone()),
        ("BACKENDAI_CLUSTER_HOSTS".into(), hosts.join(",")),
    ]
}

/// Removes what a failed launch had started: its containers, and a cluster's network or peer
/// rules on each of its agents.
async fn undo_launch(
    id: Uuid,
    started: &[(Uuid, String, Arc<crate::agents::Agent>)],
    cluster_on: &[Arc<crate::agents::Agent>],
    multi_node: bool,
) {
    for (kernel, container, agent) in started {
        if let Err(e) = agent.remove(container, *kernel).await {
            tracing::warn!(session = %id, container = %container, error = ?e, "removing a container of a failed launch failed; the reconciliation removes it");
        }
    }
    for agent in cluster_on {
        if let Err(e) = agent.remove_cluster(id, multi_node).await {
            tracing::warn!(session = %id, agent = %agent.info().id, error = ?e, "removing the network or peer rules of a failed cluster launch failed; the reconciliation removes them");
        }
    }
}

/// Each kernel's agent, in the kernels' order; the distinct agents, in their first kernel's.
type Placement = (
    Vec<Arc<crate::agents::Agent>>,
    Vec<Arc<crate::agents::Agent>>,
);

async fn placement(state: &impl Runtime, all: &[kernels::Model]) -> ApiResult<Placement> {
    let mut each = Vec::with_capacity(all.len());
    let mut distinct: Vec<Arc<crate::agents::Agent>> = Vec::new();
    for k in all {
        let agent_id = k
            .agent
            .clone()
            .ok_or_else(|| ApiError::internal("launching a session", "no agent assigned"))?;
        let agent = state
            .agents()
            .get(&agent_id)
            .await
            .ok_or_else(|| crate::agents::not_alive(&agent_id))?;
        if !distinct.iter().any(|a| a.info().id == agent_id) {
            distinct.push(agent.clone());
        }
        each.push(agent);
    }
    Ok((each, distinct))
}

/// A multi-node cluster's places: a fixed address for each container on its agent's session
/// network (so every member's hosts file names them all before any starts), and on each
/// agent's host the rules that let exactly these addresses reach each other. Holds each
/// agent's turn for its addresses until the containers are made (returned), so that two
/// launches never pick the same one. The turns are this process's memory, and launches run on
/// the elected leader only. Should two processes ever both launch (both believing they lead),
/// the engine refuses one of two containers given the same address, whose launch ends in ERROR
/// with its rules removed.
async fn multi_node_places(
    state: &impl Runtime,
    id: Uuid,
    all: &[kernels::Model],
    each: &[Arc<crate::agents::Agent>],
    distinct: &[Arc<crate::agents::Agent>],
) -> ApiResult<(
    Vec<bai_engine::ClusterPlace>,
    Vec<tokio::sync::OwnedMutexGuard<()>>,
)> {
    let mut order: Vec<&Arc<crate::agents::Agent>> = distinct.iter().collect();
    order.sort_by(|a, b| a.info().id.cmp(&b.info().id));
    let mut turns = Vec::with_capacity(order.len());
    for agent in order {
        turns.push(
            state
                .agents()
                .turn(format!("session-addresses:{}", agent.info().id))
                .await,
        );
    }
    let mut addresses = vec![String::new(); all.len()];
    for agent in distinct {
        let mine: Vec<usize> = (0..all.len())
            .filter(|&i| each[i].info().id == agent.info().id)
            .collect();
        let got = agent.session_addresses(mine.len()).await?;
        for (i, a) in mine.into_iter().zip(got) {
            addresses[i] = a;
        }
    }
    for agent in distinct {
        let local: Vec<String> = (0..all.len())
            .filter(|&i| each[i].info().id == agent.info().id)
            .map(|i| addresses[i].clone())
            .collect();
        agent.cluster_peers(id, &local, &addresses).await?;
    }
    let hosts: Vec<(String, String)> = all
        .iter()
        .map(|k| k.cluster_hostname.clone())
        .zip(addresses.iter().cloned())
        .collect();
    let places = addresses
        .into_iter()
        .map(|address| bai_engine::ClusterPlace {
            network: bai_engine::network::NETWORK.to_string(),
            address,
            hosts: hosts.clone(),
        })
        .collect();
    Ok((places, turns))
}

async fn launch_locked(state: &impl Runtime, id: Uuid) -> ApiResult<()> {
    let s = crate::lookup::get::<sessions::Entity>(state.db(), "session", id).await?;
    if s.status != SessionStatus::Scheduled {
        return Ok(()); // terminated while waiting for the lock
    }
    let all = kernels_of(state.db(), id).await?;
    let k = all
        .first()
        .filter(|k| k.cluster_role == ClusterRole::Main)
        .cloned()
        .ok_or_else(|| ApiError::not_found("kernel of session", id))?;
    let cluster = all.len() > 1;
    let multi_node = cluster && is_multi_node(&s);
    let (each, distinct) = placement(state, &all).await?;
    let (agent_id, agent) = (k.agent.clone().unwrap_or_default(), each[0].clone());
    // Each step only from the one before: a termination through another manager wins.
    let from = |status| Change {
        expect: Some(status),
        ..Default::default()
    };
    apply(
        state,
        id,
        SessionStatus::Preparing,
        from(SessionStatus::Scheduled),
    )
    .await?;
    let image = crate::images::resolve(state.db(), &k.image, Some(&k.architecture)).await?;
    let shmem = k
        .resource_opts
        .get("shmem")
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_SHMEM);
    let mut env: Vec<(String, String)> = s
        .environ
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    let user = crate::users::by_uuid(state.db(), s.user_uuid).await?;
    env.extend([
        ("BACKENDAI_USER_UUID".into(), s.user_uuid.to_string()),
        ("BACKENDAI_USER_EMAIL".into(), user.email.clone()),
        ("BACKENDAI_SESSION_ID".into(), s.id.to_string()),
        ("BACKENDAI_SESSION_NAME".into(), s.name.clone()),
        ("BACKENDAI_ACCESS_KEY".into(), s.access_key.clone()),
        ("BACKENDAI_PREOPEN_PORTS".into(), String::new()),
    ]);
    // The mounts were resolved and checked at creation; a row that no longer reads as mounts
    // does not load at all (never a session silently without its folders). Each agent's host
    // sees the storage hosts at paths of its own.
    let mut mounts: Vec<Vec<BindMount>> = Vec::with_capacity(all.len());
    for (kernel, on) in all.iter().zip(&each) {
        let on = &on.info().id;
        mounts.push(
            crate::storage::mounts_on(state.agents().storage_of(on), on, kernel.mounts.0.clone())?
                .into_iter()
                .map(|m| BindMount {
                    host_path: m.host_path,
                    target: m.target,
                    read_only: m.read_only,
                })
                .collect(),
        );
    }
    let service_ports = k.service_ports.as_str().unwrap_or_default().to_string();
    let reference = crate::agents::docker_reference(&image);
    // The engine says what it holds (the catalog may be stale: an image removed on the host).
    for on in &distinct {
        if !on.has_image(&reference).await? {
            apply(
                state,
                id,
                SessionStatus::Pulling,
                from(SessionStatus::Preparing),
            )
            .await?;
            crate::agents::delivery::bring(state, id, &image, &on.info().id, on, &reference)
                .await?;
            apply(
                state,
                id,
                SessionStatus::Preparing,
                from(SessionStatus::Pulling),
            )
            .await?;
        }
    }
    // Backend.AI's dotfiles (the domain's, the project's, the keypair's), in every container.
    let home_files =
        crate::dotfiles::for_session(state.db(), &s.access_key, s.group_id, &s.domain_name).await?;
    let started = std::time::Instant::now();
    // Where each container sits: a single-node cluster on its private network; a multi-node
    // one at fixed addresses on the routed session networks.
    let cluster_on: Vec<Arc<crate::agents::Agent>> = if cluster {
        distinct.clone()
    } else {
        Vec::new()
    };
    let (places, _turns): (Vec<Option<bai_engine::ClusterPlace>>, _) = if multi_node {
        match multi_node_places(state, id, &all, &each, &distinct).await {
            Ok((places, turns)) => (places.into_iter().map(Some).collect(), turns),
            Err(e) => {
                undo_launch(id, &[], &cluster_on, multi_node).await;
                return Err(e);
            }
        }
    } else if cluster {
        let net = match agent.cluster_network(id, all.len()).await {
            Ok(net) => net,
            Err(e) => {
                undo_launch(id, &[], &cluster_on, multi_node).await;
                return Err(e.into());
            }
        };
        let hosts: Vec<(String, String)> = all
            .iter()
            .map(|k| k.cluster_hostname.clone())
            .zip(net.addresses.iter().cloned())
            .collect();
        let places = (0..all.len())
            .map(|rank| {
                Some(bai_engine::ClusterPlace {
                    network: net.name.clone(),
                    address: net.addresses.get(rank).cloned().unwrap_or_default(),
                    hosts: hosts.clone(),
                })
            })
            .collect();
        (places, Vec::new())
    } else {
        (vec![None], Vec::new())
    };
    let mut containers: Vec<(Uuid, String, Arc<crate::agents::Agent>)> =
        Vec::with_capacity(all.len());
    for (rank, kernel) in all.iter().enumerate() {
        let req = &kernel.requested_slots;
        let mut kernel_env = env.clone();
        kernel_env.extend(cluster_env(&all, kernel));
        let spec = KernelSpec {
            session_id: s.id,
            kernel_id: kernel.id,
            owner_access_key: s.access_key.clone(),
            image: reference.clone(),
            hostname: kernel.cluster_hostname.clone(),
            cpu: req.get("cpu"),
            mem_bytes: req.get("mem").to_i64().unwrap_or(0),
            shmem_bytes: shmem,
            gpu_ids: kernel
                .resource_opts
                .get("gpus")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            gpu_shares: gpu_shares(&kernel.resource_opts),
            env: kernel_env,
            // A batch job is the main container's command; the others stand by for it.
            command: s
                .startup_command
                .clone()
                .filter(|_| s.session_type == SessionType::Batch && kernel.id == k.id),
            bootstrap: s.bootstrap_script.clone(),
            cluster: places.get(rank).cloned().flatten(),
            ports: crate::sessions::apps::container_ports(&service_ports),
            service_ports: service_ports.clone(),
            pids_limit: i64::from(state.config().container_pids_limit),
            mounts: mounts.get(rank).cloned().unwrap_or_default(),
            home_files: outside_mounts(&home_files, mounts.get(rank).map(Vec::as_slice)),
        };
        let on = &each[rank];
        match on.create_and_start(&spec).await {
            Ok(c) => containers.push((kernel.id, c, on.clone())),
            Err(e) => {
                undo_launch(id, &containers, &cluster_on, multi_node).await;
                return Err(e.into());
            }
        }
    }
    drop(_turns);
    if s.bootstrap_script.is_some() {
        // Backend.AI runs the script before the session's services: it is PREPARING until
        // the script has ended in every container (one deadline for them all).
        let deadline = tokio::time::Instant::now() + BOOTSTRAP_WAIT;
        for (_, c, on) in &containers {
            bootstrapped(state, on.as_ref(), id, c, deadline).await;
        }
    }
    state.launch_phases().record(id, started.elapsed());
    if cluster {
        // Each container's own id on its kernel (the status change below leaves them).
        for (kernel, container, _) in &containers {
            kernels::Entity::update_many()
                .col_expr(kernels::Column::ContainerId, Expr::value(container.clone()))
                .filter(kernels::Column::Id.eq(*kernel))
                .exec(state.db())
                .await?;
        }
    }
    let container_id = containers
        .first()
        .map(|(_, c, _)| c.clone())
        .ok_or_else(|| ApiError::internal("launching a session", "no container started"))?;
    // SSH keys and the daemon go in after RUNNING (they are not the engine's work and took
    // a third of the launch); whatever needs them (the sshd app, the key download) waits
    // for this setup, registered before RUNNING is visible.
    let ssh_setup = state.started_apps().ssh_setup_begins(id);
    let running = apply(
        state,
        id,
        SessionStatus::Running,
        Change {
            container_id: (!cluster).then(|| container_id.clone()),
            occupying: Some(s.requested_slots.clone()),
            expect: Some(SessionStatus::Preparing),
            ..Default::default()
        },
    )
    .await;
    if let Err(e) = running {
        state.started_apps().ssh_setup_ends(id, ssh_setup);
        if lost_race(&e) {
            // Ended meanwhile (through another manager): what this launch made goes now,
            // not at the next sweep.
            for (kernel, container, on) in &containers {
                if let Err(e) = on.remove(container, *kernel).await {
                    tracing::warn!(container = %container, error = ?e, "removing a container failed; the next sweep retries");
                }
            }
        }
        return Err(e);
    }
    {
        let (state, name) = (state.clone(), s.name.clone());
        let all_containers: Vec<(String, Arc<crate::agents::Agent>)> = containers
            .iter()
            .map(|(_, c, on)| (c.clone(), on.clone()))
            .collect();
        let hostnames: Vec<String> = all.iter().map(|k| k.cluster_hostname.clone()).collect();
        tokio::spawn(async move {
            // Under the session's lock: a termination waits for the setup instead of racing
            // it, and a session already ended gets none.
            let lock = state.session_locks().get(id).await;
            let _guard = lock.lock().await;
            let started = std::time::Instant::now();
            let still_running = crate::lookup::get::<sessions::Entity>(state.db(), "session", id)
                .await
                .is_ok_and(|s| s.status == SessionStatus::Running);
            let cluster_key = if all_containers.len() > 1 {
                match apps::cluster_ssh(&name, hostnames) {
                    Ok(k) => Some(k),
                    Err(e) => {
                        tracing::warn!(session = %id, error = ?e, "no cluster key: the containers cannot reach each other over SSH");
                        None
                    }
                }
            } else {
                None
            };
            for (container_id, on) in all_containers.iter().filter(|_| still_running) {
                if let Err(e) =
                    apps::install_ssh(on.as_ref(), container_id, &name, cluster_key.as_ref()).await
                {
                    if e.code == crate::error::ErrorCode::Conflict {
                        // A batch job that ended at once: a normal end, nothing to set up.
                        tracing::debug!(session = %id, "the container ended before SSH/SFTP was set up");
                    } else {
                        tracing::warn!(session = %id, error = ?e, "SSH/SFTP is unavailable in this session");
                    }
                }
            }
            metrics::histogram!("bai_launch_phase_seconds", "phase" => "ssh")
                .record(started.elapsed().as_secs_f64());
            state.started_apps().ssh_setup_ends(id, ssh_setup);
        });
    }
    if s.session_type == SessionType::Batch {
        tokio::spawn(watch_batch(state.clone(), id, agent_id, container_id, k.id));
    }
    Ok(())
}

/// The dotfiles that do not fall inside a folder mounted into the container: a dotfile never
/// writes into a storage folder (a read-only one would fail the launch, a shared one would
/// carry it to others).
fn outside_mounts(
    files: &[bai_engine::HomeFile],
    mounts: Option<&[bai_engine::BindMount]>,
) -> Vec<bai_engine::HomeFile> {
    let inside = |f: &bai_engine::HomeFile| {
        let path = format!("/home/work/{}", f.path);
        mounts.unwrap_or_default().iter().any(|m| {
            let target = m.target.trim_end_matches('/');
            path == target || path.starts_with(&format!("{target}/"))
        })
    };
    files.iter().filter(|f| !inside(f)).cloned().collect()
}

/// How long a session waits in PREPARING for its bootstrap script; past it, the session runs
/// while the script goes on (as Backend.AI, whose agent stops waiting for a container after
/// its start timeout).
const BOOTSTRAP_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Waits until the container's bootstrap script has ended ([`bai_engine::BOOTSTRAP_DONE`]
/// exists; a stopped container's files are read as well), [`BOOTSTRAP_WAIT`] passed, or the
/// session is being ended: through this process (it asked, `SessionLocks::ask_to_end`) or
/// through another manager (its status moved on; read once per poll).
async fn bootstrapped(
    state: &impl Runtime,
    agent: &crate::agents::Agent,
    id: Uuid,
    container_id: &str,
    deadline: tokio::time::Instant,
) {
    let mut pause = std::time::Duration::from_millis(100);
    loop {
        if state.session_locks().asked_to_end(id) {
            return;
        }
        let moved_on = crate::lookup::get::<sessions::Entity>(state.db(), "session", id)
            .await
            .map(|s| !matches!(s.status, SessionStatus::Preparing | SessionStatus::Pulling))
            .unwrap_or(true);
        if moved_on {
            return;
        }
        match agent
            .read_file(container_id, bai_engine::BOOTSTRAP_DONE, 0)
            .await
        {
            Ok(_) => return,
            Err(e) if e.is_not_found() => {}
            Err(e) => {
                tracing::warn!(session = %id, error = ?e, "cannot tell whether the bootstrap script has ended; going on");
                return;
            }
        }
        if tokio::time::Instant::now() + pause > deadline {
            tracing::warn!(session = %id, "the bootstrap script runs past {} s; the session runs while it goes on", BOOTSTRAP_WAIT.as_secs());
            return;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_secs(2));
    }
}

/// A batch session ends when its command exits: success for 0, failure otherwise, the exit
/// code in `status_data`, the output kept as the session log.
pub async fn watch_batch(
    state: impl Runtime,
    id: Uuid,
    agent_id: String,
    container_id: String,
    kernel_id: Uuid,
) {
    let Some(agent) = state.agents().get(&agent_id).await else {
        return;
    };
    let deadline = batch_deadline(&state, id).await;
    // An engine that does not answer says nothing about the job: keep waiting (the job may
    // be running), until it answers or the session ends some other way.
    let mut backoff = std::time::Duration::from_secs(1);
    let code = loop {
        let waited = match deadline {
            Some(d) => tokio::time::timeout_at(d, agent.wait(&container_id)).await,
            None => Ok(agent.wait(&container_id).await),
        };
        let Ok(waited) = waited else {
            tracing::info!(session = %id, "the batch job ran past its batch_timeout; ending it");
            if let Err(e) = terminate(&state, id, "batch-timeout").await
                && e.code != crate::error::ErrorCode::BadRequest
            {
                tracing::warn!(session = %id, error = %e.message, cause = %e.chain(), "ending a batch job past its batch_timeout failed");
            }
            return;
        };
        match waited {
            Ok(code) => break Some(code),
            Err(e) if e.is_not_found() => break None,
            Err(e) => {
                tracing::warn!(session = %id, agent = %agent_id, error = ?e, "waiting for a batch job: the engine does not answer; waiting on");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(std::time::Duration::from_secs(30));
                match crate::lookup::get::<sessions::Entity>(state.db(), "session", id).await {
                    Ok(s) if s.status == SessionStatus::Running => continue,
                    Ok(_) => return,
                    Err(e) if e.code == crate::error::ErrorCode::NotFound => return,
                    Err(_) => continue,
                }
            }
        }
    };
    let lock = state.session_locks().get(id).await;
    let _guard = lock.lock().await;
    let Ok(s) = crate::lookup::get::<sessions::Entity>(state.db(), "session", id).await else {
        return;
    };
    if s.status != SessionStatus::Running {
        return; // terminated by someone else, who cleaned up
    }
    let log = agent.logs(&container_id).await.unwrap_or_default();
    if let Err(e) = agent.remove(&container_id, kernel_id).await {
        // The job has ended; its container goes with the next reconciliation.
        tracing::warn!(session = %id, container = %container_id, error = ?e, "removing a finished batch container failed");
    }
    // A cluster's other containers stood by for the main one: they go with it.
    match kernels_of(state.db(), id).await {
        Ok(all) => remove_others(&state, &s, &all, kernel_id, None).await,
        Err(e) => {
            tracing::warn!(session = %id, error = %e.message, "cannot list a session's containers to remove them; the reconciliation removes them")
        }
    }
    let exit = code.unwrap_or(-1);
    let change = Change {
        info: Some(if code.is_some() {
            "task-finished".into()
        } else {
            "container-lost".into()
        }),
        data: Some(json!({"kernel": {"exit_code": exit}})),
        result: Some(if exit == 0 {
            SessionResult::Success
        } else {
            SessionResult::Failure
        }),
        exit_code: i32::try_from(exit).ok(),
        log: Some(log),
        ..Default::default()
    };
    if let Err(e) = apply(&state, id, SessionStatus::Terminated, change).await {
        tracing::error!(session = %id, error = %e.message, cause = %e.chain(), "cannot record the end of a batch session");
    }
}

/// Stops and removes a session's containers other than `main` (a cluster's `all`, each on its
/// own agent), and a cluster's networks or peer rules on every agent it used; failures, and
/// whatever is on the agent `silent` (which did not answer just now), are left to the
/// reconciliation.
async fn remove_others(
    state: &impl Runtime,
    s: &sessions::Model,
    all: &[kernels::Model],
    main: Uuid,
    silent: Option<&str>,
) {
    let id = s.id;
    if all.len() < 2 {
        return;
    }
    let mut agents: Vec<Arc<crate::agents::Agent>> = Vec::new();
    let mut others = Vec::new();
    for k in all {
        let Some(agent) = (match k.agent.as_deref().filter(|a| Some(*a) != silent) {
            Some(a) => state.agents().get(a).await,
            None => None,
        }) else {
            continue;
        };
        if !agents.iter().any(|a| a.info().id == agent.info().id) {
            agents.push(agent.clone());
        }
        if let (true, Some(container)) = (k.id != main, &k.container_id) {
            others.push((k.id, container.clone(), agent));
        }
    }
    // All at once: each may take its stop's grace period.
    let ends = others.into_iter().map(|(kernel, container, agent)| async move {
        if let Err(e) = agent.stop(&container, 3).await {
            tracing::warn!(session = %id, container = %container, error = ?e, "stopping a cluster container failed; removing it anyway");
        }
        if let Err(e) = agent.remove(&container, kernel).await {
            tracing::warn!(session = %id, container = %container, error = ?e, "removing a cluster container failed; the reconciliation removes it");
        }
    });
    futures_util::future::join_all(ends).await;
    for agent in agents {
        if let Err(e) = agent.remove_cluster(id, is_multi_node(s)).await {
            tracing::warn!(session = %id, agent = %agent.info().id, error = ?e, "removing a cluster's network or peer rules failed; the reconciliation removes them");
        }
    }
}

/// When a batch job must have ended: its `batch_timeout` after it started running (as the
/// status history says, so a restarted server keeps the same end); None without a limit.
/// The timer is owned by the process that drives the job's agent (it runs `watch_batch`);
/// the deadline itself is in the database, so whichever process watches next keeps it.
async fn batch_deadline(state: &impl Runtime, id: Uuid) -> Option<tokio::time::Instant> {
    let s = crate::lookup::get::<sessions::Entity>(state.db(), "session", id)
        .await
        .ok()?;
    let limit = chrono::Duration::seconds(s.batch_timeout?);
    let now = state.clock().now();
    let started = s
        .status_history
        .get("RUNNING")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map_or(now, |t| t.with_timezone(&chrono::Utc));
    let left = (started + limit - now).to_std().unwrap_or_default();
    Some(tokio::time::Instant::now() + left)
}

/// Terminates a session: a pending one is CANCELLED; a running one goes TERMINATING, its
/// container is stopped and removed (output kept), then TERMINATED.
pub async fn terminate(state: &impl Runtime, id: Uuid, reason: &str) -> ApiResult<sessions::Model> {
    let lock = state.session_locks().get(id).await;
    // A launch waiting for a bootstrap script lets go at once.
    let _asked = state.session_locks().ask_to_end(id);
    let _guard = lock.lock().await;
    let s = crate::lookup::get::<sessions::Entity>(state.db(), "session", id).await?;
    let info = Some(reason.to_string());
    match s.status {
        SessionStatus::Pending => {
            apply(
                state,
                id,
                SessionStatus::Cancelled,
                Change {
                    info,
                    ..Default::default()
                },
            )
            .await
        }
        SessionStatus::Terminated | SessionStatus::Cancelled | SessionStatus::Error => {
            Err(ApiError::bad_request(format!(
                "Session '{}' has already ended ({})",
                s.name, s.status
            )))
        }
        _ => {
            apply(
                state,
                id,
                SessionStatus::Terminating,
                Change {
                    info: info.clone(),
                    ..Default::default()
                },
            )
            .await?;
            let all = kernels_of(state.db(), id).await?;
            let k = all
                .first()
                .filter(|k| k.cluster_role == ClusterRole::Main)
                .ok_or_else(|| ApiError::not_found("kernel of session", id))?;
            let mut log = None;
            let mut silent = None;
            if let (Some(agent_id), Some(container)) = (&k.agent, &k.container_id)
                && let Some(agent) = state.agents().get(agent_id).await
            {
                // A user may end a session whose agent does not answer; its container is
                // removed by the reconciliation when the agent is back.
                // An engine that does not answer is asked once, not three times (each
                // call would wait for the timeout).
                match agent.stop(container, 3).await {
                    Err(e) if e.is_unreachable() => {
                        tracing::warn!(session = %id, container = %container, error = ?e, "the agent does not answer; the reconciliation removes the container when it is back");
                        silent = Some(agent_id.as_str());
                    }
                    stopped => {
                        if let Err(e) = stopped {
                            tracing::warn!(session = %id, container = %container, error = ?e, "stopping a container failed; removing it anyway");
                        }
                        log = agent.logs(container).await.ok();
                        if let Err(e) = agent.remove(container, k.id).await {
                            tracing::warn!(session = %id, container = %container, error = ?e, "removing a container failed; the reconciliation removes it");
                        }
                    }
                }
            }
            // The others on agents that answer go now, whether or not the main one's did.
            remove_others(state, &s, &all, k.id, silent).await;
            apply(
                state,
                id,
                SessionStatus::Terminated,
                Change {
                    info,
                    log,
                    ..Default::default()
                },
            )
            .await
        }
    }
}

/// Renames a running session (Backend.AI renames only those), keeping names unique among the
/// keypair's live sessions.
pub async fn rename(state: &impl Runtime, id: Uuid, new_name: &str) -> ApiResult<sessions::Model> {
    validate_name(new_name)?;
    let lock = state.session_locks().get(id).await;
    let _guard = lock.lock().await;
    let txn = state.db().begin().await?;
    let s = crate::lookup::get::<sessions::Entity>(&txn, "session", id).await?;
    if s.status != SessionStatus::Running {
        return Err(ApiError::bad_request(format!(
            "Only a running session can be renamed; '{}' is {}",
            s.name, s.status
        )));
    }
    if s.name == new_name {
        return Ok(s);
    }
    let taken = sessions::Entity::find()
        .filter(sessions::Column::AccessKey.eq(&s.access_key))
        .filter(sessions::Column::Name.eq(new_name))
        .filter(sessions::Column::Status.is_in(LIVE.iter().copied()))
        .one(&txn)
        .await?;
    if taken.is_some() {
        return Err(ApiError::conflict(format!(
            "You already have a live session named '{new_name}'"
        )));
    }
    let mut m = s.into_active_model();
    m.name = Set(new_name.to_string());
    let renamed = m.update(&txn).await?;
    txn.commit().await?;
    publish(state, &renamed, "session_renamed", None);
    Ok(renamed)
}

/// The live sessions that depend on `id`, directly or through others.
pub async fn dependents(state: &impl Runtime, id: Uuid) -> ApiResult<Vec<Uuid>> {
    let mut seen: std::collections::HashSet<Uuid> = std::collections::HashSet::from([id]);
    let mut all = Vec::new();
    let mut frontier = vec![id];
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for chunk in frontier.chunks(500) {
            for e in entity::session_dependencies::Entity::find()
                .filter(entity::session_dependencies::Column::DependsOn.is_in(chunk.to_vec()))
                .all(state.db())
                .await?
            {
                if seen.insert(e.session_id) {
                    next.push(e.session_id);
                }
            }
        }
        all.extend(next.iter().copied());
        frontier = next;
    }
    let mut live = Vec::new();
    for chunk in all.chunks(500) {
        live.extend(
            sessions::Entity::find()
                .filter(sessions::Column::Id.is_in(chunk.to_vec()))
                .filter(sessions::Column::Status.is_in(LIVE.iter().copied()))
                .all(state.db())
                .await?
                .into_iter()
                .map(|s| s.id),
        );
    }
    Ok(live)
}

/// What a keypair policy holds a running session to (each 0: no such limit).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IdleLimits {
    /// Seconds without activity (apps, terminal, executions).
    pub timeout: i64,
    /// Seconds since the session started running.
    pub lifetime: i64,
    /// Percent of its allocated CPU and GPU a session must use…
    pub util_pct: i32,
    /// …or, below it for this many seconds, the session is idle.
    pub util_secs: i64,
}

/// The keypair policy's limits of sessions of `access_key`.
async fn idle_limits(state: &impl Runtime, access_key: &str) -> ApiResult<IdleLimits> {
    Ok(
        match entity::keypairs::Entity::find_by_id(access_key.to_string())
            .one(state.db())
            .await?
        {
            Some(kp) => keypair_resource_policies::Entity::find_by_id(kp.resource_policy)
                .one(state.db())
                .await?
                .map(|p| IdleLimits {
                    timeout: p.idle_timeout,
                    lifetime: p.max_session_lifetime,
                    util_pct: p.idle_utilization_pct,
                    util_secs: p.idle_utilization_secs,
                })
                .unwrap_or_default(),
            None => IdleLimits::default(),
        },
    )
}

/// Whether a session's use counts as work under a utilization rule of `threshold` percent:
/// its CPU use (percent of one core, summed) against the cores it was allocated, and its GPU
/// use (percent of one GPU, summed) against the GPUs it holds. Idle only when both are below
/// the threshold; a session holding no GPU is judged by its CPU alone.
pub fn utilization_busy(
    cpu_pct: f64,
    cpu_cores: f64,
    gpu: Option<(f64, f64)>,
    threshold: i32,
) -> bool {
    let threshold = f64::from(threshold);
    let share = |used: f64, allocated: f64| {
        if allocated > 0.0 {
            used / allocated
        } else {
            used
        }
    };
    let cpu_busy = share(cpu_pct, cpu_cores) >= threshold;
    let gpu_busy = gpu.is_some_and(|(used, gpus)| share(used, gpus) >= threshold);
    cpu_busy || gpu_busy
}

/// When the session started running (its creation when it has not).
fn running_since(s: &sessions::Model) -> chrono::DateTime<chrono::Utc> {
    s.status_history
        .get("RUNNING")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.to_utc())
        .unwrap_or(s.created_at)
}

/// The last use of the session (apps, terminal, executions) or its last status change.
fn idle_since(s: &sessions::Model) -> chrono::DateTime<chrono::Utc> {
    s.last_activity
        .unwrap_or(s.status_changed)
        .max(s.status_changed)
}

/// Backend.AI's `idle_checks` of a running session: for each limit of its keypair policy,
/// the seconds left before it ends the session (`network_timeout`: idle time,
/// `session_lifetime`: age). Empty for a session not running or a policy without limits.
pub async fn idle_checks(state: &impl Runtime, s: &sessions::Model) -> ApiResult<Value> {
    if s.status != SessionStatus::Running {
        return Ok(json!({}));
    }
    let IdleLimits {
        timeout,
        lifetime,
        util_pct,
        util_secs,
    } = idle_limits(state, &s.access_key).await?;
    let now = state.clock().now();
    let left = |limit: i64, from: chrono::DateTime<chrono::Utc>| {
        let secs =
            (from + chrono::Duration::seconds(limit) - now).num_milliseconds() as f64 / 1000.0;
        json!({"remaining": secs.max(0.0), "remaining_time_type": "expire_after", "extra": null})
    };
    let mut checks = serde_json::Map::new();
    if timeout > 0 {
        checks.insert("network_timeout".into(), left(timeout, idle_since(s)));
    }
    if lifetime > 0 {
        checks.insert("session_lifetime".into(), left(lifetime, running_since(s)));
    }
    if util_pct > 0 {
        // Backend.AI's `utilization` check: the full window while the session works.
        let mut u = match s.utilization_idle_since {
            Some(since) => left(util_secs, since),
            None => json!({"remaining": util_secs as f64, "remaining_time_type": "grace_period"}),
        };
        u["extra"] = json!({"threshold_pct": util_pct, "resources": ["cpu", "cuda"]});
        checks.insert("utilization".into(), u);
    }
    Ok(Value::Object(checks))
}

/// Terminates running sessions idle for longer than their keypair policy's `idle_timeout`
/// (reason `idle-timeout`). Activity (apps, terminal, executions) moves `last_activity`.
pub async fn reap_idle(state: &impl Runtime) -> ApiResult<usize> {
    let running = sessions::Entity::find()
        .filter(sessions::Column::Status.eq(SessionStatus::Running))
        .all(state.db())
        .await?;
    // Per keypair: its policy's limits.
    let mut timeouts: std::collections::HashMap<String, IdleLimits> =
        std::collections::HashMap::new();
    let now = state.clock().now();
    let mut reaped = 0;
    for s in running {
        let IdleLimits {
            timeout,
            lifetime,
            util_pct,
            util_secs,
        } = match timeouts.get(&s.access_key) {
            Some(t) => *t,
            None => {
                let t = idle_limits(state, &s.access_key).await?;
                timeouts.insert(s.access_key.clone(), t);
                t
            }
        };
        let started = running_since(&s);
        if lifetime > 0 && now - started > chrono::Duration::seconds(lifetime) {
            tracing::info!(session = %s.id, max_session_lifetime = lifetime, "terminating a session at its maximum lifetime");
            match terminate(state, s.id, "max-session-lifetime").await {
                Ok(_) => reaped += 1,
                Err(e) => {
                    tracing::warn!(session = %s.id, error = %e.message, cause = %e.chain(), "lifetime termination failed")
                }
            }
            continue;
        }
        if util_pct > 0
            && let Some(low) = s.utilization_idle_since
            && now - low > chrono::Duration::seconds(util_secs)
            && s.utilization_sampled_at
                .is_some_and(|t| now - t <= chrono::Duration::seconds(UTILIZATION_FRESH_SECS))
        {
            tracing::info!(session = %s.id, idle_utilization_pct = util_pct, idle_utilization_secs = util_secs, since = %low, "terminating a session whose CPU and GPU use stayed below its policy's threshold");
            match terminate(state, s.id, "idle-utilization").await {
                Ok(_) => reaped += 1,
                Err(e) => {
                    tracing::warn!(session = %s.id, error = %e.message, cause = %e.chain(), "utilization termination failed")
                }
            }
            continue;
        }
        let since = idle_since(&s);
        if timeout > 0 && now - since > chrono::Duration::seconds(timeout) {
            tracing::info!(session = %s.id, idle_timeout = timeout, "terminating an idle session");
            match terminate(state, s.id, "idle-timeout").await {
                Ok(_) => reaped += 1,
                Err(e) => {
                    tracing::warn!(session = %s.id, error = %e.message, cause = %e.chain(), "idle termination failed")
                }
            }
        }
    }
    Ok(reaped)
}

/// Seconds between utilization samples of sessions under a utilization rule.
const UTILIZATION_SAMPLE_SECS: u64 = 10;

/// Samples the CPU and GPU use of the running sessions whose policy has a utilization rule,
/// on the agents this process drives, and records since when each has stayed below it
/// (`utilization_idle_since`; the leader's [`reap_idle`] ends them). A session whose use
/// cannot be read starts its window again.
pub async fn sample_utilization(state: &impl Runtime) -> ApiResult<usize> {
    let running = sessions::Entity::find()
        .filter(sessions::Column::Status.eq(SessionStatus::Running))
        .all(state.db())
        .await?;
    let mut limits: std::collections::HashMap<String, IdleLimits> =
        std::collections::HashMap::new();
    let mut ruled = Vec::new();
    for s in running {
        let l = match limits.get(&s.access_key) {
            Some(l) => *l,
            None => {
                let l = idle_limits(state, &s.access_key).await?;
                limits.insert(s.access_key.clone(), l);
                l
            }
        };
        if l.util_pct > 0 {
            ruled.push((s, l.util_pct));
        } else if s.utilization_idle_since.is_some() {
            set_utilization_idle_since(state, s.id, None).await?;
        }
    }
    let measured = measure_each(state, ruled, 16).await;
    let now = state.clock().now();
    let mut changed = 0;
    let mut sampled = Vec::new();
    for ((s, pct), m) in measured {
        let next = match m {
            Ok(Measured::NotMine) => continue,
            // Never ended on figures that could not be read: the window starts again.
            Ok(Measured::Unreadable) => None,
            Err(e) => {
                tracing::warn!(session = %s.id, error = %e.message, cause = %e.chain(), "sampling a session's utilization failed");
                None
            }
            Ok(Measured::Use {
                cpu, cores, gpu, ..
            }) => {
                sampled.push(s.id);
                if utilization_busy(cpu, cores, gpu, pct) {
                    None
                } else {
                    Some(s.utilization_idle_since.unwrap_or(now))
                }
            }
        };
        if next != s.utilization_idle_since {
            set_utilization_idle_since(state, s.id, next).await?;
            changed += 1;
        }
    }
    // When each was measured: the reaper acts on fresh figures only.
    for chunk in sampled.chunks(500) {
        sessions::Entity::update_many()
            .col_expr(
                sessions::Column::UtilizationSampledAt,
                sea_orm::sea_query::Expr::value(Some(now)),
            )
            .filter(sessions::Column::Id.is_in(chunk.to_vec()))
            .exec(state.db())
            .await?;
    }
    Ok(changed)
}

/// How old a utilization sample may be for the reaper to act on it (a stalled sampler or a
/// manager gone leaves older figures, which end nothing).
const UTILIZATION_FRESH_SECS: i64 = 60;

/// One utilization sample of a session, over its containers.
pub(crate) enum Measured {
    /// Its agents are driven by another manager, which samples it.
    NotMine,
    /// A container's figures could not be read (gone, an engine not answering).
    Unreadable,
    /// CPU (percent of one core) and cores allocated; memory used and allocated (bytes); GPU
    /// use (percent of one GPU) and GPUs held, if any.
    Use {
        cpu: f64,
        cores: f64,
        mem: f64,
        mem_alloc: f64,
        gpu: Option<(f64, f64)>,
    },
}

/// Measures each session of `items` (`(session, anything)`), `width` at a time: each sample
/// waits on the engine (about a second for Docker's CPU figure), so they go side by side.
pub(crate) async fn measure_each<T: Send>(
    state: &impl Runtime,
    items: Vec<(sessions::Model, T)>,
    width: usize,
) -> Vec<((sessions::Model, T), ApiResult<Measured>)> {
    use futures_util::StreamExt;
    futures_util::stream::iter(items)
        .map(|item| async move {
            let m = measure_utilization(state, item.0.id).await;
            (item, m)
        })
        .buffer_unordered(width)
        .collect()
        .await
}

pub(crate) async fn measure_utilization(
    state: &impl Runtime,
    session: Uuid,
) -> ApiResult<Measured> {
    let ks = kernels::Entity::find()
        .filter(kernels::Column::SessionId.eq(session))
        .all(state.db())
        .await?;
    let (mut cpu, mut cores, mut gpu, mut gpus) = (0.0, 0.0, 0.0, 0.0);
    let (mut mem, mut mem_alloc) = (0.0, 0.0);
    let per_gpu = f64::from(state.config().cuda_shares_per_gpu.max(1));
    for k in &ks {
        let (Some(agent_id), Some(container)) = (&k.agent, &k.container_id) else {
            return Ok(Measured::Unreadable);
        };
        if !state.cluster().drives(agent_id) {
            return Ok(Measured::NotMine);
        }
        let Some(agent) = state.agents().get(agent_id).await else {
            return Ok(Measured::Unreadable);
        };
        let Some(st) = agent.stats(container).await else {
            return Ok(Measured::Unreadable);
        };
        cpu += st.cpu_pct;
        cores += k.requested_slots.get("cpu").to_f64().unwrap_or(0.0);
        mem += st.mem_bytes as f64;
        mem_alloc += k.requested_slots.get("mem").to_f64().unwrap_or(0.0);
        let held = k.requested_slots.get("cuda.device").to_f64().unwrap_or(0.0)
            + k.requested_slots.get("cuda.shares").to_f64().unwrap_or(0.0) / per_gpu;
        if held > 0.0 {
            let Some(u) = agent.gpu_use(container).await else {
                return Ok(Measured::Unreadable);
            };
            gpu += u.util_pct;
            gpus += held;
        }
    }
    Ok(Measured::Use {
        cpu,
        cores,
        mem,
        mem_alloc,
        gpu: (gpus > 0.0).then_some((gpu, gpus)),
    })
}

async fn set_utilization_idle_since(
    state: &impl Runtime,
    id: Uuid,
    since: Option<chrono::DateTime<chrono::Utc>>,
) -> ApiResult<()> {
    sessions::Entity::update_many()
        .col_expr(
            sessions::Column::UtilizationIdleSince,
            sea_orm::sea_query::Expr::value(since),
        )
        .filter(sessions::Column::Id.eq(id))
        .exec(state.db())
        .await?;
    Ok(())
}

pub async fn utilization_loop(state: impl Runtime) {
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(UTILIZATION_SAMPLE_SECS)).await;
        if let Err(e) = sample_utilization(&state).await {
            tracing::warn!(error = %e.message, cause = %e.chain(), "utilization sampling failed");
        }
    }
}

pub async fn idle_loop(state: impl Runtime) {
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        // One reaper at a time: the leader's.
        if !state.cluster().is_leader() {
            continue;
        }
        if let Err(e) = reap_idle(&state).await {
            tracing::warn!(error = %e.message, cause = %e.chain(), "idle check failed");
        }
    }
}

/// Several managers: what another process's session changes mean here (its list counts are
/// stale; an ended session's apps are gone). On one process this happens where they change.
pub async fn follow(state: impl Runtime) {
    if !state.events().spans_processes() {
        return;
    }
    crate::events::follow(state.events(), |e| match e {
        Some(Event::Session(e)) => {
            state.session_counts().changed();
            if matches!(
                e.status,
                SessionStatus::Terminated | SessionStatus::Cancelled | SessionStatus::Error
            ) {
                state.started_apps().forget(e.session_id);
            }
        }
        Some(Event::BgTask(t)) => state.bgtasks().heard(t),
        Some(_) => {}
        None => state.session_counts().changed(),
    })
    .await
}

/// The container's output: live while it runs, the kept copy afterwards.
pub async fn logs(state: &impl Runtime, id: Uuid) -> ApiResult<String> {
    let k = main_kernel(state.db(), id).await?;
    if k.status == SessionStatus::Running
        && let (Some(agent_id), Some(container)) = (&k.agent, &k.container_id)
        && let Some(agent) = state.agents().get(agent_id).await
    {
        return Ok(agent.logs(container).await?);
    }
    Ok(k.container_log.unwrap_or_default())
}

/// The event topic that holds every session event `caller` may see: a superadmin's is all
/// of them, a domain admin's its domain's (role order is checked per event by [`sees`]), a
/// user's its own sessions'.
pub fn session_topic(caller: &Caller) -> crate::events::Topic {
    use crate::events::Topic;
    match caller.read_scope() {
        crate::auth::ReadScope::Admin(scope) => match scope.domain() {
            None => Topic::Sessions,
            Some(d) => Topic::SessionsIn(d.to_string()),
        },
        _ => Topic::SessionsOf(caller.uuid),
    }
}

/// Whether `caller` may hear about the session of event `e`: the same rule as for seeing the
/// session (`Caller::governs`); a domain admin's check reads the owner's role.
pub async fn sees(state: &impl Runtime, caller: &Caller, e: &crate::events::SessionEvent) -> bool {
    if e.user == caller.uuid || caller.is_superadmin() {
        return true;
    }
    match caller.read_scope() {
        crate::auth::ReadScope::Admin(s) if s.covers_domain(&e.domain) => {
            match entity::users::Entity::find_by_id(e.user)
                .one(state.db())
                .await
            {
                Ok(Some(owner)) => caller.governs(owner.uuid, owner.role, &owner.domain_name),
                _ => false,
            }
        }
        _ => false,
    }
}

/// Sessions the caller may see and terminate: its own; a domain admin's also those of the
/// lower-ranked users of its domain; all for a superadmin (role order, `Caller::governs`).
pub fn visible(caller: &Caller) -> sea_orm::Select<sessions::Entity> {
    match caller.read_scope() {
        crate::auth::ReadScope::Admin(scope) => {
            let mut select = sessions::Entity::find();
            if let Some(d) = scope.domain() {
                select = select.filter(sessions::Column::DomainName.eq(d));
            }
            if let Some(sub) = crate::users::governed(caller) {
                select = select.filter(sessions::Column::UserUuid.in_subquery(sub));
            }
            select
        }
        crate::auth::ReadScope::Own { user, .. } => {
            sessions::Entity::find().filter(sessions::Column::UserUuid.eq(user))
        }
    }
}

/// Whether `caller` may work inside `s`: its owner or a superadmin.
pub fn works_inside(caller: &Caller, s: &sessions::Model) -> bool {
    s.user_uuid == caller.uuid || caller.is_superadmin()
}

/// A session the caller may work inside (execute code, upload files, open the terminal or
/// apps, read the SSH key): only its owner's and a superadmin's. Anyone else gets the same
/// NOT_FOUND as for a session that does not exist, checked before anything else.
pub async fn find_own(
    state: &impl Runtime,
    caller: &Caller,
    id: Uuid,
) -> ApiResult<sessions::Model> {
    let s = find_visible(state, caller, id).await?;
    if !works_inside(caller, &s) {
        return Err(ApiError::not_found("session", id));
    }
    Ok(s)
}

pub async fn find_visible(
    state: &impl Runtime,
    caller: &Caller,
    id: Uuid,
) -> ApiResult<sessions::Model> {
    visible(caller)
        .filter(sessions::Column::Id.eq(id))
        .one(state.db())
        .await?
        .ok_or_else(|| ApiError::not_found("session", id))
}

/// The shares of each assigned GPU (the scheduler's `gpu_shares`), in `gpus` order; empty when
/// the kernel holds whole devices (or was placed before shares were recorded).
fn gpu_shares(opts: &Value) -> Vec<rust_decimal::Decimal> {
    opts.get("gpu_shares")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|g| g.get("shares")?.as_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod dotfile_tests {
    use bai_engine::{BindMount, HomeFile};

    #[test]
    fn dotfiles_never_land_in_a_mounted_folder() {
        let file = |p: &str| HomeFile {
            path: p.into(),
            mode: 0o644,
            data: Vec::new(),
        };
        let files = [
            file(".vimrc"),
            file("data/x"),
            file("data"),
            file("database/y"),
        ];
        let mounts = [BindMount {
            host_path: "/srv/f".into(),
            target: "/home/work/data".into(),
            read_only: true,
        }];
        let kept: Vec<String> = super::outside_mounts(&files, Some(&mounts))
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(kept, [".vimrc", "database/y"]);
        assert_eq!(super::outside_mounts(&files, None).len(), 4);
    }
}
