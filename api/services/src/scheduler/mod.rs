//! The scheduler: woken on every create/terminate/agent change (plus a slow safety tick), it
//! loads a snapshot per resource group, asks the pure planner (`plan`) for placements, and
//! applies them. It is the only code that allocates, and it runs as one task, so parallel
//! creates can never over-commit an agent or a policy.
pub use bai_core::plan;

mod dependencies;
pub mod handle;

pub use handle::Scheduler;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use entity::enums::{AgentStatus, SessionStatus};
use entity::slots::ResourceSlots;
use entity::{
    agents, domains, groups, kernels, keypair_resource_policies, keypairs, scaling_groups, sessions,
};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::json;
use uuid::Uuid;

use self::plan::{
    AgentState, Decision, Dense, DenseLimit, KeypairState, PendingSession, Quota, Snapshot,
    Strategy,
};
use crate::error::{ApiError, ApiResult};
use crate::events::ObjectKind;
use crate::sessions::Change;
use crate::store::Runtime;

/// Ticks without a change between the passes the safety tick still makes (time-based
/// predicates such as a reservation's start, and anything a wake-up missed).
const IDLE_TICKS_PER_PASS: u32 = 6;

pub async fn run(state: impl Runtime) {
    let tick = Duration::from_secs(state.config().scheduler_tick_secs.max(1));
    let mut idle_ticks = 0;
    loop {
        tokio::select! {
            _ = state.scheduler().notify.notified() => {}
            _ = tokio::time::sleep(tick) => {
                // Nothing changed: a queue that could not be placed a moment ago still
                // cannot; only every few ticks is it looked at again.
                if !state.scheduler().dirty.load(std::sync::atomic::Ordering::SeqCst) {
                    idle_ticks += 1;
                    if idle_ticks < IDLE_TICKS_PER_PASS {
                        continue;
                    }
                }
            }
        }
        idle_ticks = 0;
        // One scheduler at a time: the leader's (a follower's wake-ups reach it as events).
        if !state.cluster().is_leader() {
            continue;
        }
        state
            .scheduler()
            .dirty
            .store(false, std::sync::atomic::Ordering::SeqCst);
        let started = std::time::Instant::now();
        match schedule_once(&state).await {
            Ok(placed) => {
                metrics::counter!("bai_scheduler_placements_total").increment(placed as u64)
            }
            Err(e) => {
                tracing::error!(error = %e.message, cause = %e.chain(), "scheduling pass failed")
            }
        }
        metrics::histogram!("bai_scheduler_pass_seconds").record(started.elapsed().as_secs_f64());
    }
}

/// Wakes the scheduler when an administrator changes what placement depends on: policies,
/// project/domain limits, resource groups, keypairs, scheduler settings. Sessions arriving
/// and ending and agents coming and going wake it where they happen; an agent's heartbeat
/// (live use) does not. Lagging behind the bus only means waking once more.
pub async fn wake_on_changes(state: impl Runtime) {
    use crate::events::Event;
    // Sessions arriving or ending through another manager (this one wakes where they happen).
    let others = state.events().spans_processes();
    crate::events::follow(state.events(), |event| match event {
        Some(Event::Session(e))
            if others
                && e.kernel.is_none()
                && matches!(
                    e.status,
                    SessionStatus::Pending
                        | SessionStatus::Running
                        | SessionStatus::Terminated
                        | SessionStatus::Cancelled
                        | SessionStatus::Error
                ) =>
        {
            state.scheduler().wake()
        }
        Some(Event::Changed(c))
            if matches!(
                c.kind,
                ObjectKind::KeypairResourcePolicy
                    | ObjectKind::Keypair
                    | ObjectKind::Group
                    | ObjectKind::Domain
                    | ObjectKind::ScalingGroup
                    | ObjectKind::SystemSetting
            ) =>
        {
            state.scheduler().wake()
        }
        Some(_) => {}
        // Missed events: waking once more costs one pass.
        None => state.scheduler().wake(),
    })
    .await
}

/// One pass over every active resource group with pending sessions; returns placements made.
pub async fn schedule_once(state: &impl Runtime) -> ApiResult<usize> {
    let _pass = state.scheduler().pass.lock().await;
    // Snapshots are read on the read pool: a pass never holds up a writer (a create).
    let pending = sessions::Entity::find()
        .filter(sessions::Column::Status.eq(SessionStatus::Pending))
        .order_by_asc(sessions::Column::CreatedAt)
        .all(state.read())
        .await?;
    {
        let ids: std::collections::HashSet<Uuid> = pending.iter().map(|s| s.id).collect();
        state
            .scheduler()
            .retries
            .lock()
            .retain(|id, _| ids.contains(id));
    }
    if pending.is_empty() {
        return Ok(0);
    }
    let (pending, waiting_on) = dependencies::gate(state, pending).await?;
    if !waiting_on.is_empty() {
        apply(state, &waiting_on.sessions, waiting_on.decisions).await?;
    }
    let mut by_group: HashMap<String, Vec<sessions::Model>> = HashMap::new();
    for s in pending {
        by_group
            .entry(s.scaling_group_name.clone().unwrap_or_default())
            .or_default()
            .push(s);
    }
    // Indexes of resource groups with nothing pending (or gone) are dropped: memory follows
    // the groups in use, and one rebuilt later costs a single pass's indexing.
    state
        .scheduler()
        .indexes
        .lock()
        .retain(|name, _| by_group.contains_key(name));
    let mut placed = 0;
    for (sg_name, pending) in by_group {
        let Some(sg) = scaling_groups::Entity::find_by_id(sg_name.clone())
            .one(state.read())
            .await?
        else {
            continue;
        };
        let snapshot = load_snapshot(state, &sg, &pending).await?;
        let mut index = state
            .scheduler()
            .indexes
            .lock()
            .remove(&sg_name)
            .unwrap_or_else(|| plan::AgentIndex::new(snapshot.strategy));
        // A large pass is CPU work: off the async workers. An index lost to a failed task is
        // rebuilt by the next pass.
        let (index, decisions) = tokio::task::spawn_blocking(move || {
            let decisions = plan::plan_on(&mut index, &snapshot);
            (index, decisions)
        })
        .await
        .map_err(|e| ApiError::internal("planning a scheduling pass", e))?;
        state.scheduler().indexes.lock().insert(sg_name, index);
        placed += apply(state, &pending, decisions).await?;
    }
    Ok(placed)
}

async fn load_snapshot(
    state: &impl Runtime,
    sg: &scaling_groups::Model,
    pending: &[sessions::Model],
) -> ApiResult<Snapshot> {
    let db = state.read();
    let alive = agents::Entity::find()
        .filter(agents::Column::ScalingGroup.eq(&sg.name))
        .filter(agents::Column::Status.eq(AgentStatus::Alive))
        .filter(agents::Column::Schedulable.eq(true))
        .all(db)
        .await?;
    // Usage comes from what is allocated right now, never from counters kept by hand.
    let allocated = sessions::Entity::find()
        .filter(sessions::Column::Status.is_in(SessionStatus::ALLOCATED.iter().copied()))
        .all(db)
        .await?;
    let live_kernels = kernels::Entity::find()
        .filter(kernels::Column::Status.is_in(SessionStatus::ALLOCATED.iter().copied()))
        .all(db)
        .await?;
    let mut agent_use: HashMap<String, Dense> = HashMap::new();
    for k in &live_kernels {
        if let Some(a) = &k.agent {
            let d = agent_use.entry(a.clone()).or_default();
            add(d, &k.requested_slots);
        }
    }
    let mut key_use: HashMap<String, (Dense, u32)> = HashMap::new();
    let mut group_use: HashMap<Uuid, Dense> = HashMap::new();
    let mut domain_use: HashMap<String, Dense> = HashMap::new();
    for s in &allocated {
        let e = key_use.entry(s.access_key.clone()).or_default();
        add(&mut e.0, &s.requested_slots);
        e.1 += 1;
        add(group_use.entry(s.group_id).or_default(), &s.requested_slots);
        add(
            domain_use.entry(s.domain_name.clone()).or_default(),
            &s.requested_slots,
        );
    }
    let mut keypairs_state = HashMap::new();
    let mut groups_state = HashMap::new();
    let mut domains_state = HashMap::new();
    for s in pending {
        if !keypairs_state.contains_key(&s.access_key)
            && let Some(kp) = keypairs::Entity::find_by_id(s.access_key.clone())
                .one(db)
                .await?
            && let Some(p) =
                keypair_resource_policies::Entity::find_by_id(kp.resource_policy.clone())
                    .one(db)
                    .await?
        {
            let (using, concurrency) = key_use.get(&s.access_key).copied().unwrap_or_default();
            keypairs_state.insert(
                s.access_key.clone(),
                KeypairState {
                    quota: Quota {
                        limit: DenseLimit::from_limits(
                            &p.total_resource_slots,
                            crate::policies::unspecified_limit(&p),
                        ),
                        using,
                    },
                    max_concurrent: u32::try_from(p.max_concurrent_sessions).unwrap_or(0),
                    concurrency,
                },
            );
        }
        if !groups_state.contains_key(&s.group_id)
            && let Some(g) = groups::Entity::find_by_id(s.group_id).one(db).await?
        {
            let limit = DenseLimit::from_limits(
                &g.total_resource_slots,
                entity::slots::SlotLimit::Unlimited,
            );
            groups_state.insert(
                g.id,
                Quota {
                    limit,
                    using: group_use.get(&g.id).copied().unwrap_or_default(),
                },
            );
        }
        if !domains_state.contains_key(&s.domain_name)
            && let Some(d) = domains::Entity::find_by_id(s.domain_name.clone())
                .one(db)
                .await?
        {
            let limit = DenseLimit::from_limits(
                &d.total_resource_slots,
                entity::slots::SlotLimit::Unlimited,
            );
            domains_state.insert(
                d.name.clone(),
                Quota {
                    limit,
                    using: domain_use.get(&d.name).copied().unwrap_or_default(),
                },
            );
        }
    }
    // A multi-node cluster's containers are placed one by one, on routed agents.
    let mut spread: HashMap<Uuid, Vec<Dense>> = HashMap::new();
    let multi: Vec<Uuid> = pending
        .iter()
        .filter(|s| crate::sessions::is_multi_node(s))
        .map(|s| s.id)
        .collect();
    if !multi.is_empty() {
        let mut ks = kernels::Entity::find()
            .filter(kernels::Column::SessionId.is_in(multi))
            .all(db)
            .await?;
        crate::sessions::in_kernel_order(&mut ks);
        for k in ks {
            spread
                .entry(k.session_id)
                .or_default()
                .push(Dense::from_slots(&k.requested_slots));
        }
    }
    // Asked only when a multi-node cluster waits (a pass of ordinary sessions skips it).
    let mut routed = std::collections::HashSet::new();
    if !spread.is_empty() {
        for a in &alive {
            if crate::agents::routed(state, a).await {
                routed.insert(a.id.clone());
            }
        }
    }
    let strategy = match sg
        .scheduler_opts
        .get("agent_selection_strategy")
        .and_then(|v| v.as_str())
    {
        Some("concentrated") => Strategy::Concentrated,
        _ => Strategy::Dispersed,
    };
    let num_retries_to_skip = crate::settings::get(db, "scheduler.num_retries_to_skip")
        .await?
        .as_u64()
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(0);
    Ok(Snapshot {
        scheduler: sg.scheduler,
        strategy,
        num_retries_to_skip,
        agents: alive
            .iter()
            .map(|a| AgentState {
                id: a.id.clone(),
                available: Dense::from_slots(&a.available_slots),
                occupied: agent_use.get(&a.id).copied().unwrap_or_default(),
                storage_hosts: a.storage_hosts.as_ref().map(|h| h.0.clone()),
                routed: routed.contains(&a.id),
            })
            .collect(),
        pending: pending
            .iter()
            .map(|s| PendingSession {
                id: s.id,
                access_key: s.access_key.clone(),
                group_id: s.group_id,
                domain: s.domain_name.clone(),
                requested: Dense::from_slots(&s.requested_slots),
                order: s.created_at.timestamp_micros(),
                retries: state.scheduler().retries_of(s),
                storage_hosts: {
                    let mut hosts: Vec<String> = s
                        .vfolder_mounts
                        .0
                        .iter()
                        .filter_map(|m| m.storage_host.clone())
                        .collect();
                    hosts.sort();
                    hosts.dedup();
                    hosts
                },
                spread: spread.remove(&s.id).unwrap_or_default(),
            })
            .collect(),
        keypairs: keypairs_state,
        groups: groups_state,
        domains: domains_state,
    })
}

fn add(d: &mut Dense, s: &ResourceSlots) {
    let x = Dense::from_slots(s);
    for i in 0..plan::N {
        d.0[i] = d.0[i].saturating_add(x.0[i]);
    }
}

async fn apply(
    state: &impl Runtime,
    pending: &[sessions::Model],
    decisions: Vec<Decision>,
) -> ApiResult<usize> {
    let by_id: HashMap<Uuid, &sessions::Model> = pending.iter().map(|s| (s.id, s)).collect();
    // Sessions held back by one limit share one reason: its JSON is made once (the entry holds
    // the reason, so its address names it for the whole loop).
    let mut reason_json: HashMap<usize, (std::sync::Arc<plan::Reason>, serde_json::Value)> =
        HashMap::new();
    let mut placed = 0;
    for d in decisions {
        match d {
            Decision::Place { session, agent } => {
                if let Some(s) = by_id.get(&session)
                    && place(state, s, &[agent]).await?
                {
                    placed += 1;
                }
            }
            Decision::Spread { session, agents } => {
                if let Some(s) = by_id.get(&session)
                    && place(state, s, &agents).await?
                {
                    placed += 1;
                }
            }
            Decision::Wait { session, reason } => {
                let Some(s) = by_id.get(&session) else {
                    continue;
                };
                let status_info = reason.status_info;
                let (_, failed) = reason_json
                    .entry(std::sync::Arc::as_ptr(&reason) as usize)
                    .or_insert_with(|| (reason.clone(), json!(reason.failed)));
                let retries = state.scheduler().retries_of(s)
                    + u32::from(status_info == "no-available-instances");
                state.scheduler().retries.lock().insert(session, retries);
                // Only write (and notify) when the reason changed, not on every pass.
                let old = s
                    .status_data
                    .as_ref()
                    .and_then(|d| d.pointer("/scheduler/failed_predicates"))
                    .cloned();
                let changed =
                    s.status_info.as_deref() != Some(status_info) || old.as_ref() != Some(&*failed);
                if !changed {
                    continue;
                }
                let data = json!({"scheduler": {
                    "retries": retries,
                    "last_try": state.clock().now().to_rfc3339(),
                    "failed_predicates": failed,
                    "passed_predicates": reason.passed.iter().map(|p| json!({"name": p})).collect::<Vec<_>>(),
                }});
                // Only while still pending: a cancelled session keeps its reason.
                let res = sessions::Entity::update_many()
                    .col_expr(
                        sessions::Column::StatusInfo,
                        sea_orm::sea_query::Expr::value(status_info),
                    )
                    .col_expr(
                        sessions::Column::StatusData,
                        sea_orm::sea_query::Expr::value(data),
                    )
                    .filter(sessions::Column::Id.eq(session))
                    .filter(sessions::Column::Status.eq(SessionStatus::Pending))
                    .exec(state.db())
                    .await?;
                if res.rows_affected == 0 {
                    continue;
                }
                let updated =
                    crate::lookup::get::<sessions::Entity>(state.db(), "session", session).await?;
                crate::sessions::publish(
                    state,
                    &updated,
                    "session_enqueued",
                    Some(status_info.to_string()),
                );
            }
        }
    }
    Ok(placed)
}

/// Places a pending session: its containers on `agents` (one for all, or one each in kernel
/// order), each given its GPU devices, all or none; SCHEDULED, and its launch begins. False
/// when it is no longer pending or the devices are not free after all.
async fn place(state: &impl Runtime, s: &sessions::Model, agents: &[Arc<str>]) -> ApiResult<bool> {
    let session = s.id;
    // The session may have been cancelled since the snapshot: place it only if it is still
    // pending, holding its lock so no termination interleaves.
    let lock = state.session_locks().get(session).await;
    let _guard = lock.lock().await;
    let current = crate::lookup::get::<sessions::Entity>(state.db(), "session", session).await?;
    if current.status != SessionStatus::Pending {
        return Ok(false);
    }
    let kernels = crate::sessions::kernels_of(state.db(), session).await?;
    let agent_of = |i: usize| -> Option<&Arc<str>> {
        if agents.len() == 1 {
            agents.first()
        } else {
            agents.get(i)
        }
    };
    // Devices per container (a cluster's each ask their own), all or none.
    let wanted = kernels.len();
    // Shares in use per device, per agent: the live kernels' (read once per agent that a
    // container asking for GPUs goes to), then what this session's containers took.
    let mut used: HashMap<Arc<str>, std::collections::BTreeMap<String, rust_decimal::Decimal>> =
        HashMap::new();
    let mut assigned = Vec::with_capacity(kernels.len());
    for (i, k) in kernels.into_iter().enumerate() {
        let Some(agent) = agent_of(i) else { break };
        let asks = ["cuda.device", "cuda.shares"]
            .iter()
            .any(|slot| !k.requested_slots.get(slot).is_zero());
        let gpus = if asks {
            if !used.contains_key(agent) {
                used.insert(agent.clone(), gpu_use_on(state, agent).await?);
            }
            let Some(mine) = used.get_mut(agent) else {
                break;
            };
            let Some(gpus) = assign_gpus(state, agent, &k.requested_slots, mine).await else {
                break;
            };
            for (id, s) in &gpus {
                *mine
                    .entry(id.clone())
                    .or_insert(rust_decimal::Decimal::ZERO) += *s;
            }
            gpus
        } else {
            Vec::new()
        };
        assigned.push((k, agent.to_string(), gpus));
    }
    if assigned.len() < wanted {
        tracing::warn!(session = %session, agents = ?agents, "no GPU devices free despite free GPU slots; retrying later");
        return Ok(false);
    }
    let mut kernel_agents = HashMap::new();
    let mut kernel_opts = HashMap::new();
    for (k, agent, gpus) in assigned {
        kernel_agents.insert(k.id, agent);
        if gpus.is_empty() {
            continue;
        }
        let mut opts = k.resource_opts.clone();
        if let Some(o) = opts.as_object_mut() {
            o.insert(
                "gpus".into(),
                json!(gpus.iter().map(|(id, _)| id).collect::<Vec<_>>()),
            );
            let shares: Vec<_> = gpus
                .iter()
                .map(|(id, s)| json!({"id": id, "shares": s.to_string()}))
                .collect();
            o.insert("gpu_shares".into(), json!(shares));
        }
        kernel_opts.insert(k.id, opts);
    }
    // Placed once, whoever else believes it leads: only from PENDING, and only while the
    // agents still have room (both checked in the placing transaction).
    let placed = crate::sessions::apply(
        state,
        session,
        SessionStatus::Scheduled,
        Change {
            agents: Some(kernel_agents),
            occupying: Some(s.requested_slots.clone()),
            kernel_opts: Some(kernel_opts),
            expect: Some(SessionStatus::Pending),
            check_capacity: true,
            ..Default::default()
        },
    )
    .await;
    match placed {
        Ok(_) => {}
        Err(e) if crate::sessions::lost_race(&e) => {
            tracing::info!(session = %session, reason = %e.message, "placement not made: the session or its agents changed meanwhile");
            return Ok(false);
        }
        Err(e) => return Err(e),
    }
    tokio::spawn(crate::sessions::launch(state.clone(), session));
    Ok(true)
}

/// GPU devices on `agent_id` for one container asking `cuda.device` or `cuda.shares`, beside
/// `used` (shares by device: the live kernels' and this session's other containers'); None when
/// the devices are not free.
async fn assign_gpus(
    state: &impl Runtime,
    agent_id: &str,
    requested: &ResourceSlots,
    used: &std::collections::BTreeMap<String, rust_decimal::Decimal>,
) -> Option<Vec<(String, rust_decimal::Decimal)>> {
    let agent = state.agents().get(agent_id).await?;
    let per_gpu = rust_decimal::Decimal::from(state.config().cuda_shares_per_gpu.max(1));
    bai_engine::gpu::allocate(
        &agent.info().gpus,
        used,
        per_gpu,
        requested.get("cuda.device"),
        requested.get("cuda.shares"),
    )
}

/// Shares in use per GPU device on `agent_id`: what its live kernels were given.
async fn gpu_use_on(
    state: &impl Runtime,
    agent_id: &str,
) -> ApiResult<std::collections::BTreeMap<String, rust_decimal::Decimal>> {
    let mut used = std::collections::BTreeMap::new();
    let live = kernels::Entity::find()
        .filter(kernels::Column::Agent.eq(agent_id))
        .filter(kernels::Column::Status.is_in(SessionStatus::ALLOCATED.iter().copied()))
        .all(state.db())
        .await?;
    for k in live {
        for g in k
            .resource_opts
            .get("gpu_shares")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            if let (Some(id), Some(s)) = (
                g.get("id").and_then(|v| v.as_str()),
                g.get("shares")
                    .and_then(|v| v.as_str())
                    .and_then(|s| s.parse::<rust_decimal::Decimal>().ok()),
            ) {
                *used
                    .entry(id.to_string())
                    .or_insert(rust_decimal::Decimal::ZERO) += s;
            }
        }
    }
    Ok(used)
}
