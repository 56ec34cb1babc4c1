//! Heartbeats and what they do to sessions. Above both agents and sessions: an agent that
//! comes back has its containers reconciled (sessions that ended meanwhile cleaned up) before
//! it is marked ALIVE again — an order that matters, since nothing may be scheduled onto it
//! while their containers still hold its resources — and an agent that becomes LOST or
//! ALIVE has its sessions told.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use entity::agents;
use entity::enums::AgentStatus;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::json;

use crate::agents::Agent;
use crate::error::ApiError;
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Runtime;

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
        crate::agents::apply_status(state, row, status).await?;
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
                    if let Err(e) =
                        crate::agents::set_status(&state, &row.id, AgentStatus::Lost).await
                    {
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
