//! Reconciliation between the sessions recorded in the database and the containers on the
//! engines. On start, sessions caught mid-launch or mid-termination are finished; on start
//! and periodically, containers without a live session are removed and live sessions whose
//! container vanished are marked. Allocations are derived from session states, so nothing
//! stays allocated once its session is over.
use std::collections::HashMap;
use std::time::Duration;

use entity::enums::{SessionStatus, SessionType};
use entity::{kernels, sessions};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use crate::error::ApiResult;
use crate::sessions::{Change, apply};
use crate::store::Runtime;

const IN_FLIGHT: &[SessionStatus] = &[
    SessionStatus::Scheduled,
    SessionStatus::Preparing,
    SessionStatus::Pulling,
];

async fn remove_kernel_container(state: &impl Runtime, k: &kernels::Model) -> Option<String> {
    let (Some(agent_id), Some(container)) = (&k.agent, &k.container_id) else {
        return None;
    };
    let agent = state.agents().get(agent_id).await?;
    let log = agent.logs(container).await.ok();
    if let Err(e) = agent.remove(container, k.id).await {
        // Left to the next sweep: the session no longer holds the container.
        tracing::warn!(container = %container, error = ?e, "removing a container failed; the next sweep retries");
    }
    log
}

/// Runs once when the server starts, before the scheduler: the leader (on SQLite, the one
/// process) recovers the work of processes that are gone and reconciles its engines.
pub async fn on_start(state: &impl Runtime) -> ApiResult<()> {
    if state.cluster().is_leader() {
        recover(state).await?;
    }
    sweep(state).await?;
    crate::agents::refresh_agent_usage(state).await
}

/// Finishes the in-flight work of processes that are gone (a launch or termination stopped
/// midway, a batch job nobody watches); the work of live processes is theirs. Every change is
/// a compare-and-set, so a process that was only slow loses nothing but the race.
pub async fn recover(state: &impl Runtime) -> ApiResult<()> {
    let alive = crate::cluster::alive(state.db(), state.cluster()).await?;
    let orphaned = |owner: &Option<String>| owner.as_ref().is_none_or(|o| !alive.contains(o));
    let stuck = sessions::Entity::find()
        .filter(
            sessions::Column::Status.is_in(
                IN_FLIGHT
                    .iter()
                    .copied()
                    .chain([SessionStatus::Terminating]),
            ),
        )
        .all(state.db())
        .await?;
    for s in stuck.into_iter().filter(|s| orphaned(&s.owner)) {
        let mut log = None;
        for k in crate::sessions::kernels::kernels_of(state.db(), s.id).await? {
            let l = remove_kernel_container(state, &k).await;
            if k.cluster_role == entity::enums::ClusterRole::Main {
                log = l;
            }
        }
        let (to, info) = if s.status == SessionStatus::Terminating {
            (
                SessionStatus::Terminated,
                s.status_info
                    .clone()
                    .unwrap_or_else(|| "user-requested".into()),
            )
        } else {
            (SessionStatus::Error, "server-restarted".to_string())
        };
        tracing::warn!(session = %s.id, from = %s.status, to = %to, owner = ?s.owner, "finishing a session whose manager stopped midway");
        let done = apply(
            state,
            s.id,
            to,
            Change {
                info: Some(info),
                log,
                expect: Some(s.status),
                ..Default::default()
            },
        )
        .await;
        match done {
            Ok(_) => {}
            Err(e) if crate::sessions::status::lost_race(&e) => {}
            Err(e) => return Err(e),
        }
    }
    // Batch sessions still running whose watcher is gone: this process watches them now.
    let running = sessions::Entity::find()
        .filter(sessions::Column::Status.eq(SessionStatus::Running))
        .filter(sessions::Column::SessionType.eq(SessionType::Batch))
        .all(state.db())
        .await?;
    for s in running.into_iter().filter(|s| orphaned(&s.owner)) {
        let mut take = sessions::Entity::update_many()
            .col_expr(
                sessions::Column::Owner,
                sea_orm::sea_query::Expr::value(state.cluster().id.clone()),
            )
            .filter(sessions::Column::Id.eq(s.id))
            .filter(sessions::Column::Status.eq(SessionStatus::Running));
        take = match &s.owner {
            Some(o) => take.filter(sessions::Column::Owner.eq(o.clone())),
            None => take.filter(sessions::Column::Owner.is_null()),
        };
        if take.exec(state.db()).await?.rows_affected == 0 {
            continue; // another process took it first
        }
        let k = crate::sessions::kernels::main_kernel(state.db(), s.id).await?;
        if let (Some(agent), Some(container)) = (k.agent.clone(), k.container_id.clone()) {
            tokio::spawn(crate::sessions::batch::watch_batch(
                state.clone(),
                s.id,
                agent,
                container,
                k.id,
            ));
        }
    }
    Ok(())
}

/// What a process does when it becomes the leader: the work of processes that are gone, the
/// allocation figures, the database's leftovers, and a scheduling pass.
pub async fn take_over(state: &impl Runtime) {
    let started = std::time::Instant::now();
    if let Err(e) = recover(state).await {
        tracing::warn!(error = %e.message, cause = %e.chain(), "recovering the work of stopped managers failed; the next sweep retries");
    }
    // Containers a stopped manager made but never recorded go now, not at the next sweep.
    if let Err(e) = sweep(state).await {
        tracing::warn!(error = %e.message, cause = %e.chain(), "reconciliation sweep failed");
    }
    if let Err(e) = crate::agents::refresh_agent_usage(state).await {
        tracing::warn!(error = %e.message, cause = %e.chain(), "refreshing agent usage failed");
    }
    if let Err(e) = forget_expired(state).await {
        tracing::warn!(error = %e.message, cause = %e.chain(), "removing departed managers' rows failed");
    }
    state.scheduler().wake();
    tracing::info!(process = %state.cluster().id, took_ms = started.elapsed().as_millis() as u64, "this process leads now: scheduler, reaper and recovery run here");
}

/// Several managers: renews this process's row and leases every third of `lease_secs`, and
/// takes over when it becomes the leader. Without PostgreSQL there is nothing to do.
pub async fn membership_loop(state: impl Runtime) {
    if !state.cluster().is_shared() {
        return;
    }
    let mut led = state.cluster().is_leader();
    loop {
        tokio::time::sleep(crate::cluster::period(state.cluster())).await;
        let engines = state.agents().ids().await;
        if let Err(e) = crate::cluster::round(state.db(), state.cluster(), &engines).await {
            // Unsure whether its leases still hold: this process acts as if they did not.
            tracing::warn!(error = %e.message, cause = %e.chain(), "renewing this process's leases failed; it leads and drives nothing until it can");
            crate::cluster::step_down(state.cluster());
        }
        let leads = state.cluster().is_leader();
        metrics::gauge!("bai_leader").set(if leads { 1.0 } else { 0.0 });
        if leads && !led {
            take_over(&state).await;
        } else if led && !leads {
            tracing::warn!(process = %state.cluster().id, "this process no longer leads");
        } else if leads && let Err(e) = recover(&state).await {
            // Every round: a process found dead has its work finished within twice the
            // lease and one round of its death.
            tracing::warn!(error = %e.message, cause = %e.chain(), "recovering the work of stopped managers failed; the next round retries");
        }
        led = leads;
    }
}

/// Removes containers that belong to no live session; marks live sessions whose container
/// is gone.
pub async fn sweep(state: &impl Runtime) -> ApiResult<()> {
    for agent in state.agents().all().await {
        // Each engine is reconciled by the process that drives it.
        if state.cluster().drives(&agent.info().id) {
            sweep_agent(state, agent.as_ref()).await?;
        }
    }
    Ok(())
}

/// [`sweep`] for one agent (also when it answers again after being LOST).
pub async fn sweep_agent(state: &impl Runtime, agent: &crate::agents::Agent) -> ApiResult<()> {
    let Ok(containers) = agent.managed_containers().await else {
        // Not answering: nothing is concluded about its containers.
        return Ok(());
    };
    let kernel_ids: Vec<Uuid> = containers.iter().filter_map(|c| c.kernel_id).collect();
    let known: HashMap<Uuid, kernels::Model> = kernels::Entity::find()
        .filter(kernels::Column::Id.is_in(kernel_ids))
        .all(state.db())
        .await?
        .into_iter()
        .map(|k| (k.id, k))
        .collect();
    // Cluster networks of sessions no longer live, their containers first (the loop below
    // leaves those alone).
    let mut removed = std::collections::HashSet::new();
    if let Ok(nets) = agent.cluster_sessions().await
        && !nets.is_empty()
    {
        let live: std::collections::HashSet<Uuid> = sessions::Entity::find()
            .filter(sessions::Column::Id.is_in(nets.clone()))
            .filter(sessions::Column::Status.is_in(SessionStatus::ALLOCATED.iter().copied()))
            .all(state.db())
            .await?
            .into_iter()
            .map(|s| s.id)
            .collect();
        for id in nets.into_iter().filter(|id| !live.contains(id)) {
            // Its containers first: a network in use cannot go.
            for c in containers.iter().filter(|c| c.session_id == Some(id)) {
                removed.insert(c.container_id.clone());
                if let Err(e) = agent
                    .remove(&c.container_id, c.kernel_id.unwrap_or_default())
                    .await
                {
                    tracing::warn!(container = %c.container_id, error = ?e, "removing a container failed; the next sweep retries");
                }
            }
            // Whether it had peer rules is not known here: the host is asked.
            if let Err(e) = agent.remove_cluster(id, true).await {
                tracing::warn!(session = %id, error = ?e, "removing the network or peer rules of an ended cluster session failed; the next sweep retries");
            }
        }
    }
    for c in containers
        .iter()
        .filter(|c| !removed.contains(&c.container_id))
    {
        let keep = c.kernel_id.and_then(|id| known.get(&id)).is_some_and(|k| {
            SessionStatus::ALLOCATED.contains(&k.status)
                && k.agent.as_deref() == Some(&agent.info().id)
        });
        if !keep {
            tracing::warn!(agent = %agent.info().id, container = %c.container_id, "removing a container that belongs to no live session");
            if let Err(e) = agent
                .remove(&c.container_id, c.kernel_id.unwrap_or_default())
                .await
            {
                tracing::warn!(agent = %agent.info().id, container = %c.container_id, error = ?e, "removing a container failed; the next sweep retries");
            }
        }
    }
    // Interactive sessions whose container is gone or stopped. (Batch sessions end
    // through their watcher, which records the exit code.)
    let running = kernels::Entity::find()
        .filter(kernels::Column::Agent.eq(&agent.info().id))
        .filter(kernels::Column::Status.eq(SessionStatus::Running))
        .all(state.db())
        .await?;
    for k in running {
        let alive = containers
            .iter()
            .any(|c| Some(&c.container_id) == k.container_id.as_ref() && c.running);
        if alive {
            continue;
        }
        let Ok(s) =
            crate::lookup::get::<sessions::Entity>(state.db(), "session", k.session_id).await
        else {
            continue;
        };
        if s.session_type == SessionType::Batch {
            continue;
        }
        let lock = state.session_locks().get(s.id).await;
        let _guard = lock.lock().await;
        let current = crate::lookup::get::<sessions::Entity>(state.db(), "session", s.id).await?;
        if current.status != SessionStatus::Running {
            continue;
        }
        let log = remove_kernel_container(state, &k).await;
        tracing::warn!(session = %s.id, "the session's container is gone");
        let marked = apply(
            state,
            s.id,
            SessionStatus::Error,
            Change {
                info: Some("container-lost".into()),
                log,
                expect: Some(SessionStatus::Running),
                ..Default::default()
            },
        )
        .await;
        match marked {
            Ok(_) => {}
            Err(e) if crate::sessions::status::lost_race(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The leader's removal of shared rows past use (several managers): departed managers, old
/// outbox events, limit windows, executions, commit claims and app routes of ended sessions.
pub async fn forget_expired(state: &impl Runtime) -> ApiResult<()> {
    // Transfer tokens past their time, and what they staged (one manager or several).
    crate::storage::transfer::expire(state).await?;
    if !state.cluster().is_shared() {
        return Ok(());
    }
    crate::cluster::forget_departed(state.db(), state.cluster()).await?;
    super::exec::expire_shared(state).await?;
    super::commit::expire_claims(state).await?;
    super::apps::expire_routes(state).await
}

pub async fn sweep_loop(state: impl Runtime) {
    loop {
        tokio::time::sleep(Duration::from_secs(30)).await;
        if state.cluster().is_leader() {
            // (The work of stopped managers is recovered at each membership round.)
            // Departed managers' rows, old outbox events, windows and signatures past use,
            // expired transfer tokens.
            if let Err(e) = forget_expired(&state).await {
                tracing::warn!(error = %e.message, cause = %e.chain(), "removing expired rows failed");
            }
            // Folders' kept usage figures, a few of the stalest each time.
            if let Err(e) = crate::storage::measure_stalest(&state, 5).await {
                tracing::warn!(error = %e.message, cause = %e.chain(), "measuring folders failed");
            }
        }
        if let Err(e) = sweep(&state).await {
            tracing::warn!(error = %e.message, cause = %e.chain(), "reconciliation sweep failed");
        }
    }
}
