//! Keeping endpoints as they are asked to be: the leader gives each new endpoint its port,
//! starts and replaces replicas until `replicas` of them run, starts the model's service in
//! each, checks its health as the definition says, retires the surplus, and destroys an
//! endpoint marked for removal once its replicas are gone. Several managers: only the leader
//! does this (one lease), so no replica is ever doubled; every manager refreshes its routing
//! table (`refresh`).
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use entity::enums::{ClusterMode, SessionStatus, SessionType};
use entity::{endpoint_tokens, endpoints, kernels, routings, sessions};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder, Set,
};
use serde_json::{Value, json};
use uuid::Uuid;

use super::definition::Definition;
use super::records::route_status as rs;
use super::records::{definition_of, stage};
use super::table::{Served, Upstream};
use crate::error::ApiResult;
use crate::store::Runtime;

/// The longest time between passes (a change through this manager wakes it at once).
const PASS: Duration = Duration::from_secs(1);
/// How often a starting replica is probed (its definition's interval when shorter): a model
/// that starts in 2 s is served 2 s on, not one interval later.
const STARTING_PROBE: Duration = Duration::from_millis(250);
/// Replicas one pass starts for one endpoint, at most.
const STARTS_PER_PASS: usize = 4;
/// Failed starts kept per endpoint (for `errors`).
const FAILURES_KEPT: usize = 10;
/// A route whose session could not be recorded is adopted or dropped after this long.
const ORPHAN_AFTER_SECS: i64 = 60;

/// Health probes running at once, at most (each a task beside the pass).
const PROBES_AT_ONCE: usize = 64;
/// A retired replica whose session is still live after this long is asked to end again.
const RETRY_TERMINATE: Duration = Duration::from_secs(30);
/// A running replica whose model's service could not be started for this long is replaced.
const START_DEADLINE_SECS: i64 = 60;

/// A probe's state: running (a task beside the pass), or its answer.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Probe {
    Running,
    Passed(bool),
}

/// What the leader remembers between passes. Kind: owned by the elected process, bounded by
/// the live endpoints and routes; lost with leadership (a new leader probes at once and starts
/// replicas without waiting), never needed by another process.
pub struct Memory {
    /// When each route is probed next.
    next_probe: HashMap<Uuid, tokio::time::Instant>,
    /// Probes under way or answered, by route: a model that hangs its check holds up nothing
    /// but its own route.
    probes: std::sync::Arc<parking_lot::Mutex<HashMap<Uuid, Probe>>>,
    probe_slots: std::sync::Arc<tokio::sync::Semaphore>,
    /// Per endpoint: failed starts in a row and when the last one was.
    failures: HashMap<Uuid, (u32, tokio::time::Instant)>,
    /// When each retiring route was last asked to end.
    retired_at: HashMap<Uuid, tokio::time::Instant>,
    /// Routes whose model's service could not be started (a task beside the pass said so),
    /// with why.
    start_failed: std::sync::Arc<parking_lot::Mutex<HashMap<Uuid, String>>>,
}

impl Default for Memory {
    fn default() -> Self {
        Memory {
            next_probe: HashMap::new(),
            probes: Default::default(),
            probe_slots: std::sync::Arc::new(tokio::sync::Semaphore::new(PROBES_AT_ONCE)),
            failures: HashMap::new(),
            retired_at: HashMap::new(),
            start_failed: Default::default(),
        }
    }
}

impl Memory {
    /// Forgets what it kept of routes that are gone.
    fn forget_routes(&mut self, live: &HashSet<Uuid>) {
        self.next_probe.retain(|id, _| live.contains(id));
        self.retired_at.retain(|id, _| live.contains(id));
        self.probes.lock().retain(|id, _| live.contains(id));
        self.start_failed.lock().retain(|id, _| live.contains(id));
    }
    /// Whether a new replica may be tried for `endpoint` now: after a failure, 5 s, doubling
    /// with each failure in a row, at most 5 minutes.
    fn may_start(&self, endpoint: Uuid) -> bool {
        match self.failures.get(&endpoint) {
            None => true,
            Some((n, at)) => {
                let wait = Duration::from_secs(5u64.saturating_mul(1 << (*n).min(6)).min(300));
                at.elapsed() >= wait
            }
        }
    }
    fn failed(&mut self, endpoint: Uuid) {
        let n = self.failures.get(&endpoint).map_or(0, |(n, _)| *n);
        self.failures
            .insert(endpoint, (n + 1, tokio::time::Instant::now()));
    }
}

/// The leader's loop (every manager runs it; only the leader acts).
pub async fn reconcile_loop(state: impl Runtime) {
    let mut memory = Memory::default();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(PASS) => {}
            _ = state.serving_table().woken() => {}
        }
        if !state.cluster().is_leader() {
            memory = Memory::default();
            continue;
        }
        if let Err(e) = pass(&state, &mut memory).await {
            tracing::warn!(error = %e.message, cause = %e.chain(), "model serving pass failed");
        }
        // What the pass changed (a replica healthy, one retired) is served here at once.
        match refresh(&state).await {
            Ok(all) => state.serving_table().replace(all),
            Err(e) => tracing::warn!(error = %e.message, "reading the routing table failed"),
        }
    }
}

/// Wakes the reconciler when a session starts running or ends (anywhere): a replica that
/// runs gets its model's service at once, one that ended is replaced at once.
pub async fn wake_on_sessions(state: impl Runtime) {
    use crate::events::Event;
    crate::events::follow(state.events(), |event| match event {
        Some(Event::Session(e))
            if e.kernel.is_none() && (e.status == SessionStatus::Running || e.status.is_over()) =>
        {
            state.serving_table().wake();
        }
        Some(_) => {}
        None => state.serving_table().wake(),
    })
    .await
}

/// One pass over every endpoint that is not destroyed.
pub async fn pass(state: &impl Runtime, memory: &mut Memory) -> ApiResult<()> {
    let live = endpoints::Entity::find()
        .filter(endpoints::Column::LifecycleStage.ne(stage::DESTROYED))
        .all(state.db())
        .await?;
    let ids: HashSet<Uuid> = live.iter().map(|e| e.id).collect();
    memory.failures.retain(|id, _| ids.contains(id));
    let mut seen = HashSet::new();
    for e in live {
        if let Err(err) = one(state, memory, e.clone(), &mut seen).await {
            tracing::warn!(endpoint = %e.id, error = %err.message, cause = %err.chain(), "keeping a model service failed");
        }
    }
    // What was kept of routes no pass met is forgotten (bounded by the live routes).
    memory.forget_routes(&seen);
    Ok(())
}

async fn one(
    state: &impl Runtime,
    memory: &mut Memory,
    e: endpoints::Model,
    seen: &mut HashSet<Uuid>,
) -> ApiResult<()> {
    let def = definition_of(&e)?;
    let routes = super::records::routes_of(state, e.id).await?;
    seen.extend(routes.iter().map(|r| r.id));
    let ids: Vec<Uuid> = routes.iter().filter_map(|r| r.session).collect();
    let found: HashMap<Uuid, sessions::Model> = sessions::Entity::find()
        .filter(sessions::Column::Id.is_in(ids))
        .all(state.db())
        .await?
        .into_iter()
        .map(|s| (s.id, s))
        .collect();
    let now = state.clock().now();
    let mut active = Vec::new();
    for r in routes {
        let kept = r.clone();
        match follow_route(state, memory, &e, &def, r, &found, now).await {
            Ok(Some(r)) => active.push(r),
            Ok(None) => {}
            // One route's trouble holds up neither the others nor scaling or deletion.
            Err(err) => {
                tracing::warn!(endpoint = %e.id, route = %kept.id, error = %err.message, cause = %err.chain(), "following a replica failed");
                active.push(kept);
            }
        }
    }
    if e.lifecycle_stage == stage::CREATED {
        let want = usize::try_from(e.replicas).unwrap_or(0);
        let running: Vec<&routings::Model> = active
            .iter()
            .filter(|r| rs::ACTIVE.contains(&r.status.as_str()))
            .collect();
        if running.len() < want && memory.may_start(e.id) {
            for _ in 0..(want - running.len()).min(STARTS_PER_PASS) {
                if !add_replica(state, &e).await? {
                    memory.failed(e.id);
                    break;
                }
            }
        } else if running.len() > want {
            // The surplus: starting ones first, then unhealthy, then the newest healthy.
            let mut surplus: Vec<&routings::Model> = running.clone();
            surplus.sort_by_key(|r| {
                let rank = match r.status.as_str() {
                    rs::PROVISIONING => 0,
                    rs::UNHEALTHY => 1,
                    _ => 2,
                };
                (rank, std::cmp::Reverse(r.created_at))
            });
            for r in surplus.into_iter().take(running.len() - want) {
                retire(state, r.clone(), "SERVICE_SCALED_DOWN").await?;
            }
        }
        prune_failures(state, &active).await?;
    } else {
        // Being destroyed: every replica goes, then the endpoint.
        let mut left = 0;
        for r in active {
            match r.status.as_str() {
                rs::FAILED_TO_START => {
                    routings::Entity::delete_by_id(r.id)
                        .exec(state.db())
                        .await?;
                }
                rs::TERMINATING => left += 1,
                _ => {
                    retire(state, r, "SERVICE_DESTROYED").await?;
                    left += 1;
                }
            }
        }
        if left == 0 {
            let id = e.id;
            let mut m = e.into_active_model();
            m.lifecycle_stage = Set(stage::DESTROYED.into());
            m.destroyed_at = Set(Some(now));
            m.port = Set(None);
            m.update(state.db()).await?;
            endpoint_tokens::Entity::delete_many()
                .filter(endpoint_tokens::Column::Endpoint.eq(id))
                .exec(state.db())
                .await?;
            tracing::info!(endpoint = %id, "model service destroyed");
        }
    }
    Ok(())
}

/// Follows one route a step: its session's end, its service's start, its health. Returns
/// the route as it is now, or None when it is gone.
async fn follow_route(
    state: &impl Runtime,
    memory: &mut Memory,
    e: &endpoints::Model,
    def: &Definition,
    r: routings::Model,
    found: &HashMap<Uuid, sessions::Model>,
    now: DateTime<Utc>,
) -> ApiResult<Option<routings::Model>> {
    let db = state.db();
    let Some(sid) = r.session else {
        return match r.status.as_str() {
            rs::FAILED_TO_START => Ok(Some(r)),
            _ if (now - r.created_at).num_seconds() < ORPHAN_AFTER_SECS => Ok(Some(r)),
            // The leader stopped between creating the session and recording it: adopt the
            // session by its name, or drop the route.
            _ => adopt(state, e, r).await,
        };
    };
    let Some(s) = found.get(&sid) else {
        // Purged with its records.
        routings::Entity::delete_by_id(r.id).exec(db).await?;
        return Ok(None);
    };
    if s.status.is_over() {
        match r.status.as_str() {
            rs::FAILED_TO_START => return Ok(Some(r)),
            rs::PROVISIONING => {
                let why = s
                    .status_info
                    .clone()
                    .unwrap_or_else(|| s.status.to_string());
                tracing::warn!(endpoint = %e.id, route = %r.id, session = %sid, why, "a replica failed to start");
                let mut m = r.into_active_model();
                m.status = Set(rs::FAILED_TO_START.into());
                m.error_data = Set(Some(json!({
                    "message": format!("The replica's session ended before it served: {why}"),
                    "session_status": s.status.as_str(),
                })));
                let r = m.update(db).await?;
                bump_retries(state, e.id).await?;
                memory.failed(e.id);
                return Ok(Some(r));
            }
            // Ended (terminated, crashed, killed): a replacement follows.
            _ => {
                routings::Entity::delete_by_id(r.id).exec(db).await?;
                memory.next_probe.remove(&r.id);
                return Ok(None);
            }
        }
    }
    if r.status == rs::TERMINATING {
        // A termination that did not take (an engine away at the time) is asked again.
        let first = *memory
            .retired_at
            .entry(r.id)
            .or_insert_with(tokio::time::Instant::now);
        if first.elapsed() >= RETRY_TERMINATE {
            memory.retired_at.insert(r.id, tokio::time::Instant::now());
            tracing::warn!(endpoint = %e.id, route = %r.id, session = %sid, "a retired replica is still live: ending it again");
            retire(state, r.clone(), "SERVICE_SCALED_DOWN").await?;
        }
        return Ok(Some(r));
    }
    if s.status != SessionStatus::Running || !rs::ACTIVE.contains(&r.status.as_str()) {
        return Ok(Some(r));
    }
    let Some((model, service)) = def.served() else {
        return Ok(Some(r));
    };
    let mut r = r;
    let start_failure = memory.start_failed.lock().remove(&r.id);
    if let Some(why) = start_failure {
        let mut m = r.into_active_model();
        m.error_data = Set(Some(json!({
            "message": format!("The model's service could not be started: {why}"),
        })));
        let r = m.update(db).await?;
        bump_retries(state, e.id).await?;
        memory.failed(e.id);
        retire(state, r, "FAILED_TO_START").await?;
        return Ok(None);
    }
    if r.service_started_at.is_none() {
        // Started by a task beside the pass: an engine slow to answer holds up only this
        // replica; a failure is read at the next pass.
        spawn_start(state, memory, e, def, s, r.id);
        let mut m = r.into_active_model();
        m.service_started_at = Set(Some(now));
        if service.health_check.is_none() {
            m.status = Set(rs::HEALTHY.into());
            m.healthy_at = Set(Some(now));
        }
        r = m.update(db).await?;
        tracing::info!(endpoint = %e.id, route = %r.id, session = %sid, model = %model.name, "model service started in a replica");
    }
    let Some(check) = &service.health_check else {
        return Ok(Some(r));
    };
    // Probes run beside the pass; the pass reads their answers.
    let answered = {
        let mut probes = memory.probes.lock();
        match probes.get(&r.id).copied() {
            Some(Probe::Passed(p)) => {
                probes.remove(&r.id);
                Some(p)
            }
            Some(Probe::Running) => return Ok(Some(r)),
            None => None,
        }
    };
    let Some(passed) = answered else {
        let due = memory
            .next_probe
            .get(&r.id)
            .is_none_or(|at| tokio::time::Instant::now() >= *at);
        if due {
            let every = Duration::from_secs_f64(check.interval);
            let every = if r.status == rs::PROVISIONING {
                every.min(STARTING_PROBE)
            } else {
                every
            };
            memory
                .next_probe
                .insert(r.id, tokio::time::Instant::now() + every);
            spawn_probe(state, memory, r.id, s.id, service.port, check.clone());
        }
        return Ok(Some(r));
    };
    let started = r.service_started_at.unwrap_or(now);
    let mut m = r.clone().into_active_model();
    if passed {
        if r.status == rs::HEALTHY && r.health_failures == 0 {
            return Ok(Some(r));
        }
        m.health_failures = Set(0);
        if r.status != rs::HEALTHY {
            m.status = Set(rs::HEALTHY.into());
            m.healthy_at = Set(Some(now));
            // A replica that serves ends the backoff of failed starts.
            memory.failures.remove(&e.id);
            tracing::info!(endpoint = %e.id, route = %r.id, "replica healthy");
        }
        return Ok(Some(m.update(db).await?));
    }
    let failures = r.health_failures.saturating_add(1);
    m.health_failures = Set(failures);
    let max = i32::try_from(check.max_retries).unwrap_or(i32::MAX);
    let r = m.update(db).await?;
    match r.status.as_str() {
        rs::PROVISIONING
            if (now - started).num_milliseconds() as f64 > check.initial_delay * 1000.0 =>
        {
            let mut m = r.into_active_model();
            m.error_data = Set(Some(json!({
                "message": format!("The model did not pass its health check ({}) within {} s", check.path, check.initial_delay),
            })));
            let r = m.update(db).await?;
            bump_retries(state, e.id).await?;
            memory.failed(e.id);
            retire(state, r, "HEALTH_CHECK_TIMEOUT").await?;
            Ok(None)
        }
        rs::HEALTHY if failures >= max => {
            tracing::warn!(endpoint = %e.id, route = %r.id, failures, "replica unhealthy");
            let mut m = r.into_active_model();
            m.status = Set(rs::UNHEALTHY.into());
            Ok(Some(m.update(db).await?))
        }
        rs::UNHEALTHY if failures >= max.saturating_mul(2) => {
            tracing::warn!(endpoint = %e.id, route = %r.id, failures, "replacing an unhealthy replica");
            memory.failed(e.id);
            retire(state, r, "UNHEALTHY").await?;
            Ok(None)
        }
        _ => Ok(Some(r)),
    }
}

/// Probes route `route` (replica session `session`) in a task of its own, bounded by
/// `PROBES_AT_ONCE`; its answer waits in `memory.probes` for the next pass.
fn spawn_probe(
    state: &impl Runtime,
    memory: &Memory,
    route: Uuid,
    session: Uuid,
    port: u16,
    check: super::definition::HealthCheck,
) {
    memory.probes.lock().insert(route, Probe::Running);
    let (state, probes, slots) = (
        state.clone(),
        memory.probes.clone(),
        memory.probe_slots.clone(),
    );
    tokio::spawn(async move {
        let passed = match slots.acquire_owned().await {
            Ok(_slot) => probe(&state, session, port, &check).await,
            Err(_) => false,
        };
        let mut probes = probes.lock();
        // A route forgotten meanwhile (gone) stays forgotten.
        if probes.contains_key(&route) {
            probes.insert(route, Probe::Passed(passed));
        }
        drop(probes);
        state.serving_table().wake();
    });
}

/// One health probe of a replica: its answer to `GET path` on the service port, within the
/// definition's wait, has the expected status.
async fn probe(
    state: &impl Runtime,
    session: Uuid,
    port: u16,
    check: &super::definition::HealthCheck,
) -> bool {
    let Some(addr) = replica_addr(state, session, port).await else {
        return false;
    };
    let url = format!("http://{addr}{}", check.path);
    let asked = state
        .http()
        .get(&url)
        .timeout(Duration::from_secs_f64(check.max_wait_time))
        .send()
        .await;
    matches!(asked, Ok(r) if r.status().as_u16() == check.expected_status_code)
}

/// Where a replica's service answers: its main container's address on the session network.
async fn replica_addr(
    state: &impl Runtime,
    session: Uuid,
    port: u16,
) -> Option<std::net::SocketAddr> {
    let k = crate::sessions::main_kernel(state.db(), session)
        .await
        .ok()?;
    crate::sessions::apps::upstream(state, session, &k, port)
        .await
        .ok()
        .flatten()
}

/// Starts the model's service of route `route` in a task of its own (see `start_service`).
fn spawn_start(
    state: &impl Runtime,
    memory: &Memory,
    e: &endpoints::Model,
    def: &Definition,
    s: &sessions::Model,
    route: Uuid,
) {
    let (state, failed) = (state.clone(), memory.start_failed.clone());
    let (e, def, s) = (e.clone(), def.clone(), s.clone());
    tokio::spawn(async move {
        let started = tokio::time::timeout(
            Duration::from_secs(START_DEADLINE_SECS.unsigned_abs()),
            start_service(&state, &e, &def, &s),
        )
        .await;
        let why = match started {
            Ok(Ok(())) => return,
            Ok(Err(err)) => err.message,
            Err(_) => "the engine did not answer in time".to_string(),
        };
        tracing::warn!(endpoint = %e.id, %route, why, "starting the model's service failed");
        failed.lock().insert(route, why);
        state.serving_table().wake();
    });
}

/// Starts every model's service in the replica's main container, as `work`, in the model's
/// directory, with the model's name and path in its environment.
async fn start_service(
    state: &impl Runtime,
    e: &endpoints::Model,
    def: &Definition,
    s: &sessions::Model,
) -> ApiResult<()> {
    let k = crate::sessions::main_kernel(state.db(), s.id).await?;
    let (agent, container) = crate::sessions::container_of(state, &k).await?;
    let first = def
        .models
        .first()
        .map(|m| m.name.clone())
        .unwrap_or_default();
    for m in &def.models {
        let Some(service) = &m.service else { continue };
        let mut argv = vec![
            "env".to_string(),
            "--".into(),
            format!("BACKEND_MODEL_NAME={first}"),
            format!("BACKEND_MODEL_PATH={}", m.model_path),
            "sh".into(),
            "-c".into(),
            // The directory is an argument, never part of the script.
            "cd \"$1\" 2>/dev/null || cd /home/work; shift; exec \"$@\"".into(),
            "sh".into(),
            m.model_path.clone(),
        ];
        argv.extend(service.argv(&m.model_path));
        agent.spawn_detached(&container, argv).await?;
    }
    tracing::debug!(endpoint = %e.id, session = %s.id, "model services spawned");
    Ok(())
}

/// A replica's session name: the endpoint's name (letters and digits first) and the route.
fn session_name(endpoint_name: &str, route: Uuid) -> String {
    let base: String = endpoint_name
        .trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
        .chars()
        .take(40)
        .collect();
    let base = if base.is_empty() { "svc".into() } else { base };
    format!("{base}-{}", &route.simple().to_string()[..8])
}

/// Starts one replica: its route first (so a leader that stops half-way leaves a trace the
/// next one adopts), then its inference session. Returns whether it was started.
async fn add_replica(state: &impl Runtime, e: &endpoints::Model) -> ApiResult<bool> {
    let route = routings::ActiveModel {
        id: Set(Uuid::new_v4()),
        endpoint: Set(e.id),
        session: Set(None),
        status: Set(rs::PROVISIONING.into()),
        traffic_ratio: Set(1.0),
        health_failures: Set(0),
        service_started_at: Set(None),
        healthy_at: Set(None),
        error_data: Set(None),
        created_at: Set(state.clock().now()),
    }
    .insert(state.db())
    .await?;
    let created = match super::records::owner_caller(state, e).await {
        Ok(owner) => crate::sessions::create(state, &owner, replica_request(e, route.id)).await,
        Err(err) => Err(err),
    };
    let mut m = route.into_active_model();
    let started = match created {
        Ok(s) => {
            m.session = Set(s.first().map(|s| s.id));
            true
        }
        Err(err) => {
            tracing::warn!(endpoint = %e.id, error = %err.message, "a replica could not be created");
            m.status = Set(rs::FAILED_TO_START.into());
            m.error_data = Set(Some(json!({ "message": err.message })));
            bump_retries(state, e.id).await?;
            false
        }
    };
    m.update(state.db()).await?;
    Ok(started)
}

/// The inference session of one replica of `e`.
fn replica_request(e: &endpoints::Model, route: Uuid) -> crate::sessions::CreateRequest {
    let map = |v: &Value| -> BTreeMap<String, String> {
        v.as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| {
                        let v = match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        (k.clone(), v)
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let shmem = e.resource_opts.get("shmem").map(|v| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    crate::sessions::CreateRequest {
        image: e.image.clone(),
        name: Some(session_name(&e.name, route)),
        session_type: SessionType::Inference,
        group: Some(e.project.to_string()),
        scaling_group: Some(e.resource_group.clone()),
        preset: None,
        resources: map(&e.resources),
        shmem,
        environ: map(&e.environ),
        startup_command: e.startup_command.clone(),
        batch_timeout: None,
        count: 1,
        tag: e.tag.clone(),
        mounts: Vec::new(),
        mount_map: BTreeMap::new(),
        dependencies: Vec::new(),
        bootstrap_script: e.bootstrap_script.clone(),
        cluster_size: u32::try_from(e.cluster_size).unwrap_or(1),
        cluster_mode: ClusterMode::parse(&e.cluster_mode).unwrap_or(ClusterMode::SingleNode),
        model: e.model.map(|folder| crate::sessions::ModelMount {
            folder,
            destination: e.model_mount_destination.clone(),
        }),
    }
}

/// A route without its session's id: the live session of its name, if the leader created
/// one before it stopped, else nothing (the route goes).
async fn adopt(
    state: &impl Runtime,
    e: &endpoints::Model,
    r: routings::Model,
) -> ApiResult<Option<routings::Model>> {
    let name = session_name(&e.name, r.id);
    let s = sessions::Entity::find()
        .filter(sessions::Column::AccessKey.eq(&e.owner_access_key))
        .filter(sessions::Column::Name.eq(&name))
        .filter(sessions::Column::Status.is_in(SessionStatus::LIVE.iter().copied()))
        .order_by_desc(sessions::Column::CreatedAt)
        .one(state.db())
        .await?;
    match s {
        Some(s) => {
            let mut m = r.into_active_model();
            m.session = Set(Some(s.id));
            Ok(Some(m.update(state.db()).await?))
        }
        None => {
            routings::Entity::delete_by_id(r.id)
                .exec(state.db())
                .await?;
            Ok(None)
        }
    }
}

/// Takes a replica out of service: no more traffic, its session ends (in the background),
/// and the route goes once it has.
pub async fn retire(
    state: &impl Runtime,
    r: routings::Model,
    reason: &'static str,
) -> ApiResult<()> {
    let Some(session) = r.session else {
        routings::Entity::delete_by_id(r.id)
            .exec(state.db())
            .await?;
        return Ok(());
    };
    if r.status != rs::TERMINATING {
        let mut m = r.into_active_model();
        m.status = Set(rs::TERMINATING.into());
        m.update(state.db()).await?;
    }
    let state = state.clone();
    tokio::spawn(async move {
        if let Err(e) = crate::sessions::terminate(&state, session, reason).await {
            tracing::warn!(%session, error = %e.message, "ending a replica failed");
        }
    });
    Ok(())
}

async fn bump_retries(state: &impl Runtime, endpoint: Uuid) -> ApiResult<()> {
    use sea_orm::sea_query::Expr;
    endpoints::Entity::update_many()
        .col_expr(
            endpoints::Column::Retries,
            Expr::col(endpoints::Column::Retries).add(1),
        )
        .filter(endpoints::Column::Id.eq(endpoint))
        .exec(state.db())
        .await?;
    Ok(())
}

/// Keeps the newest failed starts only.
async fn prune_failures(state: &impl Runtime, routes: &[routings::Model]) -> ApiResult<()> {
    let mut failed: Vec<&routings::Model> = routes
        .iter()
        .filter(|r| r.status == rs::FAILED_TO_START)
        .collect();
    if failed.len() <= FAILURES_KEPT {
        return Ok(());
    }
    failed.sort_by_key(|r| std::cmp::Reverse(r.created_at));
    let old: Vec<Uuid> = failed.iter().skip(FAILURES_KEPT).map(|r| r.id).collect();
    routings::Entity::delete_many()
        .filter(routings::Column::Id.is_in(old))
        .exec(state.db())
        .await?;
    Ok(())
}

/// Live endpoints still without a port (the leader's surface gives each one it serves).
pub async fn unported(state: &impl Runtime) -> ApiResult<Vec<endpoints::Model>> {
    Ok(endpoints::Entity::find()
        .filter(endpoints::Column::LifecycleStage.eq(stage::CREATED))
        .filter(endpoints::Column::Port.is_null())
        .all(state.db())
        .await?)
}

/// The ports live endpoints hold.
pub async fn taken_ports(state: &impl Runtime) -> ApiResult<HashSet<u16>> {
    Ok(endpoints::Entity::find()
        .filter(endpoints::Column::LifecycleStage.ne(stage::DESTROYED))
        .filter(endpoints::Column::Port.is_not_null())
        .all(state.db())
        .await?
        .iter()
        .filter_map(|e| e.port.and_then(|p| u16::try_from(p).ok()))
        .collect())
}

/// Gives endpoint `id` port `port` (already bound by the caller, so the URL answers the
/// moment it is shown), unless it has one. Returns whether it was given.
pub async fn claim_port(state: &impl Runtime, id: Uuid, port: u16) -> ApiResult<bool> {
    let done = endpoints::Entity::update_many()
        .col_expr(
            endpoints::Column::Port,
            sea_orm::sea_query::Expr::value(i32::from(port)),
        )
        .filter(endpoints::Column::Id.eq(id))
        .filter(endpoints::Column::Port.is_null())
        .filter(endpoints::Column::LifecycleStage.eq(stage::CREATED))
        .exec(state.db())
        .await?;
    if done.rows_affected > 0 {
        tracing::info!(endpoint = %id, port, "model service given its port");
    }
    Ok(done.rows_affected > 0)
}

/// The routing table as the database says now: every live endpoint with a port, its tokens,
/// and the replicas that take traffic (where each answers).
pub async fn refresh(state: &impl Runtime) -> ApiResult<Vec<Served>> {
    let db = state.read();
    let eps = endpoints::Entity::find()
        .filter(endpoints::Column::LifecycleStage.eq(stage::CREATED))
        .filter(endpoints::Column::Port.is_not_null())
        .all(db)
        .await?;
    if eps.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = eps.iter().map(|e| e.id).collect();
    let routes = routings::Entity::find()
        .filter(routings::Column::Endpoint.is_in(ids.clone()))
        .filter(routings::Column::Status.is_in([rs::HEALTHY, rs::PROVISIONING]))
        .filter(routings::Column::Session.is_not_null())
        .all(db)
        .await?;
    let now = state.clock().now();
    let tokens = endpoint_tokens::Entity::find()
        .filter(endpoint_tokens::Column::Endpoint.is_in(ids))
        .filter(endpoint_tokens::Column::ValidUntil.gt(now))
        .all(db)
        .await?;
    let session_ids: Vec<Uuid> = routes.iter().filter_map(|r| r.session).collect();
    let live: HashMap<Uuid, SessionStatus> = sessions::Entity::find()
        .filter(sessions::Column::Id.is_in(session_ids.clone()))
        .filter(sessions::Column::Status.is_in(SessionStatus::LIVE.iter().copied()))
        .all(db)
        .await?
        .into_iter()
        .map(|s| (s.id, s.status))
        .collect();
    let mains: HashMap<Uuid, kernels::Model> = kernels::Entity::find()
        .filter(kernels::Column::SessionId.is_in(session_ids))
        .filter(kernels::Column::ClusterRole.eq(entity::enums::ClusterRole::Main))
        .all(db)
        .await?
        .into_iter()
        .map(|k| (k.session_id, k))
        .collect();
    let mut out = Vec::with_capacity(eps.len());
    for e in eps {
        let Some(port) = e.port.and_then(|p| u16::try_from(p).ok()) else {
            continue;
        };
        let service_port = definition_of(&e)
            .ok()
            .and_then(|d| d.served().map(|(_, s)| s.port));
        let mut healthy = Vec::new();
        let mut starting = 0;
        for r in routes.iter().filter(|r| r.endpoint == e.id) {
            let Some((session, status)) = r.session.and_then(|s| live.get(&s).map(|st| (s, *st)))
            else {
                continue;
            };
            // On its way: a request may wait for it.
            if r.status == rs::PROVISIONING || status != SessionStatus::Running {
                starting += 1;
                continue;
            }
            let (Some(k), Some(sp)) = (mains.get(&session), service_port) else {
                continue;
            };
            // An engine slow to answer costs this replica a second, never the table.
            let found = tokio::time::timeout(
                Duration::from_secs(1),
                crate::sessions::apps::upstream(state, session, k, sp),
            )
            .await
            .unwrap_or(Ok(None));
            match found {
                Ok(Some(addr)) => healthy.push(Upstream {
                    route: r.id,
                    session,
                    addr,
                    traffic_ratio: r.traffic_ratio,
                }),
                Ok(None) => starting += 1,
                Err(err) => {
                    tracing::debug!(route = %r.id, error = %err.message, "a replica's address is unknown");
                }
            }
        }
        // Replicas wanted but not serving yet: a request may wait for them.
        let wanted = usize::try_from(e.replicas).unwrap_or(0);
        starting = starting.max(wanted.saturating_sub(healthy.len()));
        out.push(Served {
            endpoint: e.id,
            port,
            public: e.open_to_public,
            token_key: e.token_key.clone(),
            tokens: tokens
                .iter()
                .filter(|t| t.endpoint == e.id)
                .map(|t| t.id)
                .collect(),
            healthy,
            starting,
            refused: HashSet::new(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_session_names_are_valid_session_names() {
        for name in [
            "tester-model",
            "_x_y",
            "_-ab",
            "abcd",
            "a__________________b_",
        ] {
            let n = session_name(name, Uuid::new_v4());
            crate::sessions::validate_name(&n).unwrap_or_else(|_| panic!("{n}"));
        }
    }

    #[test]
    fn failed_starts_back_off() {
        let mut m = Memory::default();
        let id = Uuid::new_v4();
        assert!(m.may_start(id));
        m.failed(id);
        assert!(!m.may_start(id), "5 s after a failure");
    }
}
