//! A session's status: every change by compare-and-set (`transition`, `apply`), recorded in
//! its status history and announced as Backend.AI's events; how far its image has come
//! (`pulling`); what an agent becoming LOST or ALIVE says on its sessions (`agent_lost`).
use entity::enums::{SessionResult, SessionStatus};
use entity::slots::ResourceSlots;
use entity::{kernels, sessions};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, QueryFilter, Set,
    TransactionTrait, TryIntoModel,
};
use serde_json::{Value, json};
use uuid::Uuid;

use super::kernels::in_kernel_order;
use crate::error::{ApiError, ApiResult};
use crate::events::{Event, SessionEvent};
use crate::store::Runtime;

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
    // An event under a name not listed would never reach the other managers.
    debug_assert!(
        bai_types::events::session_event_name(event).is_some(),
        "session event {event} is not listed in bai_types::events"
    );
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
    if s.status.is_over() {
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
    let terminal = to.is_over();
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
    if to.is_over() {
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
