//! Heartbeats and what they do to sessions. Above both agents and sessions: an agent that
//! comes back has its containers reconciled (sessions that ended meanwhile cleaned up) before
//! it is marked ALIVE again — an order that matters, since nothing may be scheduled onto it
//! while their containers still hold its resources — and an agent that becomes LOST or
//! ALIVE has its sessions told, whichever way it got there.
//!
//! Liveness is apart from measurement ([`Liveness`] is the one rule):
//! - each engine this process drives is pinged on its own schedule, every `heartbeat_secs`,
//!   each ping bounded by [`Liveness::ping_timeout`]: a slow or silent engine delays no
//!   other, and a beat still in flight is never doubled;
//! - its use (`docker stats` of every running container, GPUs) is sampled apart, a few
//!   containers at a time and within [`Liveness::sample_timeout`], and never decides liveness;
//! - the leader marks LOST an ALIVE agent that nobody has beaten for
//!   [`Liveness::stale_after`] (its driving process died or hangs): no sooner than its own
//!   driver would have after `agent_lost_after_misses` missed beats.
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use entity::agents;
use entity::enums::AgentStatus;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::json;

use crate::agents::Agent;
use crate::error::ApiResult;
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Runtime;

/// The liveness rule of agents, in one place: how often an engine is pinged, how long a ping
/// may take, after how many missed beats its agent is LOST, and when the leader concludes
/// that nobody beats an agent any more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Liveness {
    /// Between two beats of one engine (`heartbeat_secs`).
    pub period: Duration,
    /// The longest a ping may take before it counts as missed: the period, at most 10 s.
    pub ping_timeout: Duration,
    /// Missed beats in a row that make an agent LOST (`agent_lost_after_misses`).
    pub misses: u32,
}

impl Liveness {
    pub fn of(config: &crate::config::Config) -> Self {
        let period = Duration::from_secs(config.heartbeat_secs.max(1));
        Liveness {
            period,
            ping_timeout: period.min(Duration::from_secs(10)),
            misses: config.agent_lost_after_misses.max(1),
        }
    }

    /// How long the row of an agent whose driver beats it can go without a fresh heartbeat:
    /// its driver concludes LOST itself after `misses` beats of at most a period and a ping
    /// timeout each; one period more is left for its write.
    pub fn stale_after(&self) -> Duration {
        (self.period + self.ping_timeout) * self.misses + self.period
    }

    /// Whether an ALIVE agent last beaten at `last` is silent at `now` (the clock's).
    pub fn is_stale(&self, last: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
        let limit =
            chrono::Duration::from_std(self.stale_after()).unwrap_or(chrono::TimeDelta::MAX);
        last.is_none_or(|t| now - t > limit)
    }

    /// How long one usage sample of an engine may take (then it is dropped, and the next
    /// one tried a period later): ample, since it decides nothing (200 containers of a
    /// remote engine take some 25 s on a loaded 2-core machine).
    pub fn sample_timeout(&self) -> Duration {
        (self.period * 12).clamp(Duration::from_secs(30), Duration::from_secs(120))
    }
}

/// One heartbeat of one agent: ALIVE when its engine answers within the ping timeout; LOST
/// once it has missed `agent_lost_after_misses` in a row (`misses` counts them; 0 = it
/// answered this time). An agent coming back is reconciled before it is ALIVE again, so
/// nothing is scheduled onto it while containers of sessions that ended meanwhile still hold
/// its resources.
///
/// `misses` is owned by the process that drives the agent (agents live in their process).
pub async fn beat(state: &impl Runtime, agent: &Arc<Agent>, misses: &mut u32) -> AgentStatus {
    beat_by(state, agent, misses, Liveness::of(state.config())).await
}

/// [`beat`] by `rule`.
async fn beat_by(
    state: &impl Runtime,
    agent: &Arc<Agent>,
    misses: &mut u32,
    rule: Liveness,
) -> AgentStatus {
    let id = &agent.info().id;
    let answered = match tokio::time::timeout(rule.ping_timeout, agent.ping()).await {
        Ok(answer) => answer.map_err(|e| format!("{e:?}")),
        Err(_) => Err(format!("no answer within {:?}", rule.ping_timeout)),
    };
    let status = match answered {
        Ok(()) => {
            *misses = 0;
            AgentStatus::Alive
        }
        Err(e) => {
            *misses = misses.saturating_add(1);
            tracing::warn!(agent = %id, misses = *misses, error = %e, "the agent's container engine does not answer");
            if *misses < rule.misses {
                return AgentStatus::Alive;
            }
            AgentStatus::Lost
        }
    };
    if let Err(e) = record(state, agent, status).await {
        tracing::warn!(agent = %id, error = %e.message, cause = %e.chain(), "heartbeat update failed; the next heartbeat retries");
    }
    status
}

/// Writes what a beat found: a LOST agent's sessions are told; one that is back is
/// reconciled first, then ALIVE, then its sessions are told.
async fn record(state: &impl Runtime, agent: &Arc<Agent>, status: AgentStatus) -> ApiResult<()> {
    let id = &agent.info().id;
    let Some(row) = agents::Entity::find_by_id(id.clone())
        .one(state.db())
        .await?
    else {
        return Ok(());
    };
    if status == AgentStatus::Lost {
        return mark_lost(state, row).await;
    }
    let was = row.status;
    if was == AgentStatus::Lost {
        tracing::info!(agent = %id, "the agent is back; reconciling its containers");
        crate::sessions::reconcile::sweep_agent(state, agent.as_ref()).await?;
    }
    crate::agents::apply_status(state, row, status).await?;
    if was != status {
        crate::sessions::agent_lost(state, id, false).await?;
    }
    Ok(())
}

/// The one way an agent becomes LOST (its driver's missed beats, or the leader's sweep): the
/// row, then its live sessions say `agent-lost` (once: only when the status changes).
async fn mark_lost(state: &impl Runtime, row: agents::Model) -> ApiResult<()> {
    let id = row.id.clone();
    let was = row.status;
    crate::agents::apply_status(state, row, AgentStatus::Lost).await?;
    if was != AgentStatus::Lost {
        crate::sessions::agent_lost(state, &id, true).await?;
    }
    Ok(())
}

/// The leader's sweep: ALIVE agents that no process has beaten for
/// [`Liveness::stale_after`] become LOST (their sessions told). Agents this process drives
/// are left to their own beats, which know more than the row's age (a ping that answered, a
/// write that queued). Returns the agents it marked.
pub async fn sweep_silent(state: &impl Runtime) -> ApiResult<Vec<String>> {
    let rule = Liveness::of(state.config());
    let now = state.clock().now();
    let alive = agents::Entity::find()
        .filter(agents::Column::Status.eq(AgentStatus::Alive))
        .all(state.db())
        .await?;
    let mut marked = Vec::new();
    for row in alive {
        if !rule.is_stale(row.last_heartbeat, now) {
            continue;
        }
        if state.cluster().drives(&row.id) && state.agents().get(&row.id).await.is_some() {
            continue;
        }
        let id = row.id.clone();
        tracing::warn!(agent = %id, last_heartbeat = ?row.last_heartbeat, stale_after = ?rule.stale_after(), "no process beats the agent: it is LOST");
        match mark_lost(state, row).await {
            Ok(()) => marked.push(id),
            Err(e) => {
                tracing::warn!(agent = %id, error = %e.message, cause = %e.chain(), "marking a silent agent lost failed; the next sweep retries")
            }
        }
    }
    Ok(marked)
}

/// Work of one kind (a beat, a sample) in flight for one agent: none is started while one
/// runs, so a slow engine's calls never pile up. Process memory owned by the process that
/// drives the engine (its engine lease), as are the missed-beat counts and CPU readings
/// below: another `bai serve` starts its own when it takes the lease over, and what it needs
/// of the others' is on the agent row (`last_heartbeat`, `status`, `live_stat`).
#[derive(Clone, Default)]
struct InFlight(Arc<parking_lot::Mutex<HashSet<String>>>);

/// An agent's place in [`InFlight`], given back when the work ends (or panics).
struct Running(InFlight, String);

impl InFlight {
    fn start(&self, id: &str) -> Option<Running> {
        self.0
            .lock()
            .insert(id.to_string())
            .then(|| Running(self.clone(), id.to_string()))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.0.lock().remove(&self.1);
    }
}

/// Heartbeats: every `heartbeat_secs`, each engine this process drives gets a beat of its own
/// ([`beat`]) and, if it answered last time, a usage sample of its own; neither waits for
/// any other engine. On the leader, agents nobody beats become LOST ([`sweep_silent`]).
pub async fn heartbeat_loop(state: impl Runtime) {
    let rule = Liveness::of(state.config());
    let misses: Arc<parking_lot::Mutex<HashMap<String, u32>>> = Arc::default();
    // Previous cumulative CPU time per agent, to turn it into a rate.
    let previous: Arc<parking_lot::Mutex<HashMap<String, (std::time::Instant, u64)>>> =
        Arc::default();
    let (beating, sampling, sweeping) = (
        InFlight::default(),
        InFlight::default(),
        InFlight::default(),
    );
    let mut tick = tokio::time::interval(rule.period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        // Each engine's heartbeat is beaten by the process that drives it (its lease).
        for agent in state.agents().all().await {
            let id = agent.info().id.clone();
            if !state.cluster().drives(&id) {
                continue;
            }
            if let Some(running) = beating.start(&id) {
                let (state, misses, agent) = (state.clone(), misses.clone(), agent.clone());
                tokio::spawn(async move {
                    let _running = running;
                    let mut missed = misses.lock().get(&id).copied().unwrap_or(0);
                    beat(&state, &agent, &mut missed).await;
                    misses.lock().insert(id, missed);
                });
            }
            // Sampled only from an engine that answered its last beat.
            let answered = misses.lock().get(&agent.info().id).copied().unwrap_or(0) == 0;
            if answered && let Some(running) = sampling.start(&agent.info().id) {
                let (state, previous) = (state.clone(), previous.clone());
                tokio::spawn(async move {
                    let _running = running;
                    sample(&state, &agent, &previous, rule.sample_timeout()).await;
                });
            }
        }
        if state.cluster().is_leader()
            && let Some(running) = sweeping.start("")
        {
            let state = state.clone();
            tokio::spawn(async move {
                let _running = running;
                if let Err(e) = sweep_silent(&state).await {
                    tracing::warn!(error = %e.message, cause = %e.chain(), "reading agents for the heartbeat sweep failed; the next sweep retries");
                }
            });
        }
    }
}

/// One usage sample of one agent (CPU, memory, containers, GPUs) within `within`; one that
/// takes longer is dropped.
async fn sample(
    state: &impl Runtime,
    agent: &Arc<Agent>,
    previous: &parking_lot::Mutex<HashMap<String, (std::time::Instant, u64)>>,
    within: Duration,
) {
    let id = agent.info().id.clone();
    let started = std::time::Instant::now();
    let taken = tokio::time::timeout(within, async {
        (agent.usage_sample().await, agent.gpu_sample().await)
    })
    .await;
    metrics::histogram!("bai_agent_usage_sample_seconds").record(started.elapsed().as_secs_f64());
    let (sample, gpus) = match taken {
        Ok(s) => s,
        Err(_) => {
            tracing::debug!(agent = %id, ?within, "the agent's usage sample took too long; dropped");
            return;
        }
    };
    let Some((cpu_ns, mem, containers)) = sample else {
        return;
    };
    let now = std::time::Instant::now();
    let pct = match previous.lock().insert(id.clone(), (now, cpu_ns)) {
        Some((t, before)) if cpu_ns >= before => {
            (cpu_ns - before) as f64 / now.duration_since(t).as_nanos().max(1) as f64 * 100.0
        }
        _ => 0.0,
    };
    let gpus = gpus
        .map(|s| bai_engine::gpu::device_use(&s))
        .unwrap_or_default();
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
        .filter(agents::Column::Id.eq(&id))
        .exec(state.db())
        .await;
    match updated {
        Ok(_) => state
            .events()
            .changed(ObjectKind::Agent, ChangeAction::Modified, &id, None),
        Err(e) => tracing::warn!(agent = %id, error = %e, "recording live use failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{IMAGE, World, request, world};
    use entity::enums::{SessionStatus, SessionType};
    use entity::sessions;

    fn rule(period_secs: u64, misses: u32) -> Liveness {
        let config = crate::config::Config {
            heartbeat_secs: period_secs,
            agent_lost_after_misses: misses,
            ..Default::default()
        };
        Liveness::of(&config)
    }

    #[test]
    fn the_sweep_waits_as_long_as_the_driver_would() {
        let r = rule(5, 3);
        assert_eq!(r.ping_timeout, Duration::from_secs(5));
        // Three beats of a period and a ping timeout each, and a period for the write.
        assert_eq!(r.stale_after(), Duration::from_secs(35));
        let now = chrono::Utc::now();
        let ago = |s: i64| Some(now - chrono::Duration::seconds(s));
        assert!(!r.is_stale(ago(35), now));
        assert!(r.is_stale(ago(36), now));
        assert!(r.is_stale(None, now), "never beaten");
        // Long periods keep the ping short; zero settings are one.
        assert_eq!(rule(60, 3).ping_timeout, Duration::from_secs(10));
        assert_eq!(rule(0, 0), rule(1, 1));
        assert_eq!(rule(1, 2).stale_after(), Duration::from_secs(5));
        assert_eq!(rule(1, 2).sample_timeout(), Duration::from_secs(30));
        assert_eq!(rule(60, 3).sample_timeout(), Duration::from_secs(120));
    }

    async fn running_session(w: &World) -> uuid::Uuid {
        let id =
            crate::sessions::create(&w.state, &w.admin, request(SessionType::Interactive, None))
                .await
                .unwrap()[0]
                .id;
        for _ in 0..200 {
            crate::scheduler::schedule_once(&w.state).await.unwrap();
            if status_of(w, id).await.0 == SessionStatus::Running {
                return id;
            }
            tokio::task::yield_now().await;
        }
        panic!("the session never ran ({IMAGE})");
    }

    async fn status_of(w: &World, id: uuid::Uuid) -> (SessionStatus, Option<String>) {
        let s = sessions::Entity::find_by_id(id)
            .one(&w.state.db)
            .await
            .unwrap()
            .unwrap();
        (s.status, s.status_info)
    }

    async fn agent_status(w: &World) -> AgentStatus {
        agents::Entity::find_by_id("i-memory".to_string())
            .one(&w.state.db)
            .await
            .unwrap()
            .unwrap()
            .status
    }

    // A silent engine (its packets dropped: the ping never answers) costs each beat the ping
    // timeout, not the engine call timeout, and is LOST after the misses, its session told.
    #[tokio::test]
    async fn a_silent_engine_misses_beats_within_the_ping_timeout() {
        let w = world().await;
        let id = running_session(&w).await;
        let agent = w.state.local.agents.get("i-memory").await.unwrap();
        let quick = Liveness {
            period: Duration::from_millis(50),
            ping_timeout: Duration::from_millis(50),
            misses: 2,
        };
        w.engine.set_silent(true);
        let mut misses = 0;
        let started = std::time::Instant::now();
        assert_eq!(
            beat_by(&w.state, &agent, &mut misses, quick).await,
            AgentStatus::Alive
        );
        assert_eq!(misses, 1);
        assert_eq!(
            agent_status(&w).await,
            AgentStatus::Alive,
            "one miss is not LOST"
        );
        assert_eq!(
            beat_by(&w.state, &agent, &mut misses, quick).await,
            AgentStatus::Lost
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(agent_status(&w).await, AgentStatus::Lost);
        assert_eq!(
            status_of(&w, id).await,
            (SessionStatus::Running, Some("agent-lost".into()))
        );
        w.engine.set_silent(false);
        assert_eq!(
            beat_by(&w.state, &agent, &mut misses, quick).await,
            AgentStatus::Alive
        );
        assert_eq!(status_of(&w, id).await, (SessionStatus::Running, None));
    }

    // The leader's sweep (the agent's driving process died): an agent nobody beats is LOST
    // once `stale_after` has passed on the clock, no sooner; its sessions say `agent-lost`;
    // when a process drives it again, its first beat reconciles it and they stop saying it.
    #[tokio::test]
    async fn sessions_of_an_agent_the_sweep_finds_silent_say_so_until_it_is_back() {
        let w = world().await;
        let id = running_session(&w).await;
        let r = Liveness::of(&w.state.config);
        let agent = w.state.local.agents.forget("i-memory").await.unwrap();
        w.clock
            .advance(chrono::Duration::from_std(r.stale_after()).unwrap());
        assert!(
            sweep_silent(&w.state).await.unwrap().is_empty(),
            "not yet stale"
        );
        assert_eq!(agent_status(&w).await, AgentStatus::Alive);
        w.clock.advance(chrono::Duration::seconds(1));
        assert_eq!(
            sweep_silent(&w.state).await.unwrap(),
            vec!["i-memory".to_string()]
        );
        assert_eq!(agent_status(&w).await, AgentStatus::Lost);
        assert_eq!(
            status_of(&w, id).await,
            (SessionStatus::Running, Some("agent-lost".into()))
        );
        assert!(
            sweep_silent(&w.state).await.unwrap().is_empty(),
            "LOST once"
        );
        // Driven again: reconciled (its container kept: the session is live), then ALIVE.
        w.state.local.agents.insert(agent.clone()).await;
        let mut misses = 0;
        assert_eq!(
            beat(&w.state, &agent, &mut misses).await,
            AgentStatus::Alive
        );
        assert_eq!(agent_status(&w).await, AgentStatus::Alive);
        assert_eq!(status_of(&w, id).await, (SessionStatus::Running, None));
        assert!(!w.engine.calls().iter().any(|c| c.starts_with("remove")));
        // An agent this process drives is judged by its own beats, not by its row's age.
        w.clock.advance(chrono::Duration::hours(1));
        assert!(sweep_silent(&w.state).await.unwrap().is_empty());
    }
}
