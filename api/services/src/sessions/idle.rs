//! Idle checks as Backend.AI defines them (network timeout, session lifetime, utilization),
//! the reaper that ends idle sessions, and the utilization sampler feeding it.
use entity::enums::SessionStatus;
use entity::{kernels, keypair_resource_policies, sessions};
use rust_decimal::prelude::ToPrimitive;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use uuid::Uuid;

use super::lifecycle::terminate;
use crate::error::ApiResult;
use crate::store::Runtime;

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
/// Inference sessions (a model endpoint's replicas) are kept by their endpoint, never reaped.
pub async fn reap_idle(state: &impl Runtime) -> ApiResult<usize> {
    let running = sessions::Entity::find()
        .filter(sessions::Column::Status.eq(SessionStatus::Running))
        .filter(sessions::Column::SessionType.ne(entity::enums::SessionType::Inference))
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
