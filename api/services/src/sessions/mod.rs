//! Compute sessions: creation (validated and sized as Backend.AI does), the lifecycle
//! PENDING → SCHEDULED → PREPARING → RUNNING → TERMINATING → TERMINATED (CANCELLED, ERROR),
//! with every change in `status_history` and published as an event. Only the scheduler
//! allocates; launch and termination of one session are serialised by a per-session lock.
pub mod apps;
pub mod exec;
#[cfg(test)]
mod lifecycle_tests;
pub mod locks;
pub mod reconcile;

use std::collections::BTreeMap;

use entity::enums::{ClusterMode, ClusterRole, SessionResult, SessionStatus, SessionType};
use entity::slots::{ResourceSlots, parse_binary_size};
use entity::{groups, images, kernels, keypair_resource_policies, resource_presets, sessions};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, PaginatorTrait,
    QueryFilter, Set, TransactionTrait,
};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::events::{Event, SessionEvent};
use crate::state::AppState;
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

pub struct CreateRequest {
    pub image: String,
    pub name: Option<String>,
    pub session_type: SessionType,
    pub group: Option<String>,
    pub scaling_group: Option<String>,
    pub preset: Option<String>,
    /// Slot amounts as given (`{"cpu": "2", "mem": "4g"}`).
    pub resources: BTreeMap<String, String>,
    pub shmem: Option<String>,
    pub environ: BTreeMap<String, String>,
    pub startup_command: Option<String>,
    pub count: u32,
    pub tag: Option<String>,
    /// Folders to mount, by name or id (automount folders are added by themselves).
    pub mounts: Vec<String>,
    /// Folder name (or id) → mount path (relative to /home/work or absolute beneath it).
    pub mount_map: BTreeMap<String, String>,
}

/// Session names: 4–64 characters, letters/digits first and last, `-`, `_`, `.` inside.
pub fn validate_name(name: &str) -> ApiResult<()> {
    let n = name.chars().count();
    let ok = (4..=64).contains(&n)
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "Invalid session name '{name}': use 4 to 64 letters, digits, '-', '_' or '.', without spaces, starting and ending with a letter or digit"
        )))
    }
}

fn random_name() -> String {
    let id = Uuid::new_v4().simple().to_string();
    format!("sess-{}", &id[..8])
}

fn validate_environ(env: &BTreeMap<String, String>) -> ApiResult<()> {
    for (k, v) in env {
        let ok = !k.is_empty()
            && k.len() <= 128
            && k.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(ApiError::bad_request(format!(
                "Invalid environment variable name '{k}': use letters, digits and '_', not starting with a digit"
            )));
        }
        if k.starts_with("BACKENDAI_") {
            return Err(ApiError::bad_request(format!(
                "'{k}' is set by the server and cannot be overridden"
            )));
        }
        // Variables the container runtime or the dynamic loader act on: they would hand out
        // devices that were not allocated, or load code into every program.
        let upper = k.to_ascii_uppercase();
        if upper.starts_with("NVIDIA_")
            || upper == "CUDA_VISIBLE_DEVICES"
            || upper.starts_with("LD_")
        {
            return Err(ApiError::bad_request(format!(
                "'{k}' may not be set: GPU visibility follows the allocation, and LD_* would change how every program loads"
            )));
        }
        if v.contains('\0') || v.len() > 32 * 1024 {
            return Err(ApiError::bad_request(format!(
                "The value of '{k}' is too long or contains a NUL byte"
            )));
        }
    }
    Ok(())
}

fn image_min(image: &images::Model, slot: &str) -> Decimal {
    image
        .resources
        .get(slot)
        .and_then(|r| r.get("min"))
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or_default()
}

fn image_max(image: &images::Model, slot: &str) -> Option<Decimal> {
    image
        .resources
        .get(slot)
        .and_then(|r| r.get("max"))
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
}

/// Sizes a request (BACKENDAI-API.md §6): image minimums fill unspecified cpu/mem (mem gets
/// the shared memory on top), explicit amounts below the minimum or above the maximum are
/// refused, shared memory must stay below memory.
pub fn size_request(
    image: &images::Model,
    mut slots: ResourceSlots,
    shmem: i64,
) -> ApiResult<ResourceSlots> {
    let shm = Decimal::from(shmem);
    if slots.get("cpu").is_zero() {
        slots.set("cpu", image_min(image, "cpu").max(Decimal::ONE));
    }
    if slots.get("mem").is_zero() {
        slots.set("mem", image_min(image, "mem") + shm);
    }
    for (slot, amount) in slots.0.clone() {
        let min = image_min(image, &slot);
        if amount < min {
            return Err(ApiError::bad_request(format!(
                "{slot} must be at least {} for the image {}",
                entity::slots::format_amount(&slot, min),
                image.name
            )));
        }
        if let Some(max) = image_max(image, &slot)
            && amount > max
        {
            return Err(ApiError::bad_request(format!(
                "{slot} must be at most {} for the image {}",
                entity::slots::format_amount(&slot, max),
                image.name
            )));
        }
    }
    if shm >= slots.get("mem") {
        return Err(ApiError::bad_request(format!(
            "Shared memory ({}) must be smaller than the memory ({})",
            entity::slots::format_amount("mem", shm),
            entity::slots::format_amount("mem", slots.get("mem"))
        )));
    }
    Ok(slots)
}

pub async fn resolve_group<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
    group: Option<&str>,
) -> ApiResult<groups::Model> {
    let g = match group {
        Some(g) => match Uuid::parse_str(g) {
            Ok(id) => groups::Entity::find_by_id(id).one(db).await?,
            Err(_) => {
                groups::Entity::find()
                    .filter(groups::Column::DomainName.eq(&caller.domain_name))
                    .filter(groups::Column::Name.eq(g))
                    .one(db)
                    .await?
            }
        },
        None => {
            groups::Entity::find()
                .filter(groups::Column::DomainName.eq(&caller.domain_name))
                .filter(groups::Column::Name.eq("default"))
                .one(db)
                .await?
        }
    };
    let name = group.unwrap_or("default");
    let g = g.ok_or_else(|| ApiError::not_found("group", name))?;
    if !crate::groups::is_member(db, caller.uuid, g.id).await? {
        return Err(ApiError::not_found("group", name));
    }
    if !g.is_active {
        return Err(ApiError::bad_request(format!(
            "The project '{}' is inactive",
            g.name
        )));
    }
    Ok(g)
}

/// Creates `count` identical PENDING sessions and wakes the scheduler.
pub async fn create(
    state: &AppState,
    caller: &Caller,
    req: CreateRequest,
) -> ApiResult<Vec<sessions::Model>> {
    let db = &state.db;
    let access_key = caller
        .access_key
        .clone()
        .ok_or_else(|| ApiError::bad_request("This account has no keypair"))?;
    if req.count == 0 || req.count > 100 {
        return Err(ApiError::bad_request("count must be between 1 and 100"));
    }
    validate_environ(&req.environ)?;
    let image = crate::images::resolve(db, &req.image, None).await?;
    // The domain's registry allowlist (empty = any registry).
    let domain =
        crate::lookup::get::<entity::domains::Entity>(db, "domain", caller.domain_name.clone())
            .await?;
    let registries = &domain.allowed_docker_registries;
    if !registries.is_empty() && !registries.contains(&image.registry) {
        return Err(ApiError::forbidden(format!(
            "Images from the registry '{}' are not allowed in the domain '{}' (allowed: {})",
            image.registry,
            domain.name,
            registries.0.join(", ")
        )));
    }
    let installed = !image.installed_agents.is_empty();
    let pullable = entity::container_registries::Entity::find()
        .filter(entity::container_registries::Column::Hostname.eq(&image.registry))
        .one(db)
        .await?
        .is_some();
    if !installed && !pullable {
        return Err(ApiError::bad_request(format!(
            "The image {} is neither installed on an agent nor in a configured registry",
            image.name
        )));
    }
    let group = resolve_group(db, caller, req.group.as_deref()).await?;
    let allowed = crate::scaling_groups::allowed_for(
        db,
        &caller.domain_name,
        caller.uuid,
        Some(group.id),
        Some(&access_key),
    )
    .await?;
    let scaling_group = match req.scaling_group {
        Some(sg) if allowed.contains(&sg) => sg,
        Some(sg) => return Err(ApiError::not_found("resource group", sg)),
        None => allowed
            .first()
            .cloned()
            .ok_or_else(|| ApiError::bad_request("No resource group is available to you"))?,
    };
    let (mut slots, mut shmem) = (ResourceSlots::new(), None);
    if let Some(p) = &req.preset {
        let preset =
            crate::lookup::get::<resource_presets::Entity>(db, "resource preset", p.clone())
                .await?;
        slots = preset.resource_slots.clone();
        shmem = preset.shared_memory;
    }
    let custom =
        ResourceSlots::parse_input(req.resources.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
    for (k, v) in custom.0 {
        slots.set(&k, v);
    }
    if let Some(s) = &req.shmem {
        let v = parse_binary_size(s)
            .and_then(|d| d.to_i64())
            .ok_or_else(|| ApiError::bad_request(format!("invalid shared memory size '{s}'")))?;
        shmem = Some(v);
    }
    let shmem = shmem.unwrap_or(DEFAULT_SHMEM);
    let mounts = entity::columns::Mounts(
        crate::storage::session_mounts(state, caller, &req.mounts, &req.mount_map).await?,
    );
    let requested = size_request(&image, slots, shmem)?;
    // Whole devices are whole: a fraction would be charged as a fraction and handed out whole.
    let d = requested.get("cuda.device");
    if !d.fract().is_zero() {
        return Err(ApiError::bad_request(format!(
            "cuda.device must be a whole number of GPUs (got {d}); use cuda.shares for a fraction"
        )));
    }
    // A request beyond the keypair policy's absolute limits could never run: refuse it now.
    let kp =
        crate::lookup::get::<entity::keypairs::Entity>(db, "keypair", access_key.clone()).await?;
    let policy = crate::lookup::get::<keypair_resource_policies::Entity>(
        db,
        "resource policy",
        kp.resource_policy.clone(),
    )
    .await?;
    let over = policy
        .total_resource_slots
        .exceeded_by(&requested, crate::policies::unspecified_limit(&policy));
    if !over.is_empty() {
        return Err(ApiError::bad_request(format!(
            "The request exceeds your resource policy '{}' for {} (requested {})",
            policy.name,
            over.join(", "),
            requested
        )));
    }
    if let Some(max) = policy.max_pending_session_count.filter(|m| *m > 0) {
        let pending = sessions::Entity::find()
            .filter(sessions::Column::AccessKey.eq(&access_key))
            .filter(sessions::Column::Status.eq(SessionStatus::Pending))
            .count(db)
            .await?;
        if pending + u64::from(req.count) > u64::try_from(max).unwrap_or(0) {
            return Err(ApiError::bad_request(format!(
                "Your resource policy '{}' allows at most {max} pending session(s); {pending} are waiting already",
                policy.name
            )));
        }
    }
    if policy.max_containers_per_session > 0 && policy.max_containers_per_session < 1 {
        return Err(ApiError::bad_request(
            "Your resource policy allows no containers",
        ));
    }
    let session_type = req.session_type;
    let startup_command = req.startup_command.filter(|c| !c.trim().is_empty());
    if session_type == SessionType::Batch && startup_command.is_none() {
        return Err(ApiError::bad_request(
            "A batch session needs a startup command",
        ));
    }
    let base_name = match req.name.filter(|n| !n.trim().is_empty()) {
        Some(n) => {
            validate_name(&n)?;
            Some(n)
        }
        None => None,
    };
    let names: Vec<String> = (0..req.count)
        .map(|i| match &base_name {
            Some(n) if req.count == 1 => n.clone(),
            Some(n) => format!("{n}-{}", i + 1),
            None => random_name(),
        })
        .collect();
    for n in &names {
        validate_name(n)?;
    }
    let txn = db.begin().await?;
    for n in &names {
        let taken = sessions::Entity::find()
            .filter(sessions::Column::AccessKey.eq(&access_key))
            .filter(sessions::Column::Name.eq(n))
            .filter(sessions::Column::Status.is_in(LIVE.iter().copied()))
            .count(&txn)
            .await?;
        if taken > 0 {
            return Err(ApiError::conflict(format!(
                "You already have a live session named '{n}'"
            )));
        }
    }
    let now = state.clock.now();
    let history = json!({ "PENDING": now.to_rfc3339() });
    let environ = json!(req.environ);
    let resource_opts = json!({ "shmem": shmem });
    let mut created = Vec::new();
    for name in names {
        let id = Uuid::new_v4();
        let s = sessions::ActiveModel {
            id: Set(id),
            name: Set(name),
            session_type: Set(session_type),
            priority: Set(10),
            cluster_mode: Set(ClusterMode::SingleNode),
            cluster_size: Set(1),
            agent_ids: Set(Default::default()),
            scaling_group_name: Set(Some(scaling_group.clone())),
            domain_name: Set(caller.domain_name.clone()),
            group_id: Set(group.id),
            user_uuid: Set(caller.uuid),
            access_key: Set(access_key.clone()),
            images: Set(json!([image.name])),
            tag: Set(req.tag.clone()),
            occupying_slots: Set(ResourceSlots::new()),
            requested_slots: Set(requested.clone()),
            vfolder_mounts: Set(mounts.clone()),
            environ: Set(environ.clone()),
            resource_opts: Set(resource_opts.clone()),
            bootstrap_script: Set(None),
            startup_command: Set(startup_command.clone()),
            created_at: Set(now),
            terminated_at: Set(None),
            starts_at: Set(None),
            status: Set(SessionStatus::Pending),
            status_changed: Set(now),
            status_info: Set(None),
            status_data: Set(None),
            status_history: Set(history.clone()),
            callback_url: Set(None),
            result: Set(SessionResult::Undefined),
            num_queries: Set(0),
            last_stat: Set(None),
            last_activity: Set(Some(now)),
        }
        .insert(&txn)
        .await?;
        kernels::ActiveModel {
            id: Set(Uuid::new_v4()),
            session_id: Set(id),
            cluster_role: Set(ClusterRole::Main),
            cluster_idx: Set(1),
            local_rank: Set(0),
            cluster_hostname: Set("main1".into()),
            agent: Set(None),
            agent_addr: Set(None),
            image: Set(image.name.clone()),
            architecture: Set(image.architecture.clone()),
            registry: Set(image.registry.clone()),
            container_id: Set(None),
            occupied_slots: Set(ResourceSlots::new()),
            requested_slots: Set(requested.clone()),
            mounts: Set(mounts.clone()),
            resource_opts: Set(resource_opts.clone()),
            service_ports: Set(json!(image.labels.get("ai.backend.service-ports"))),
            domain_name: Set(caller.domain_name.clone()),
            group_id: Set(group.id),
            user_uuid: Set(caller.uuid),
            access_key: Set(access_key.clone()),
            status: Set(SessionStatus::Pending),
            status_changed: Set(now),
            status_info: Set(None),
            status_data: Set(None),
            status_history: Set(history.clone()),
            created_at: Set(now),
            terminated_at: Set(None),
            exit_code: Set(None),
            container_log: Set(None),
            last_stat: Set(None),
        }
        .insert(&txn)
        .await?;
        created.push(s);
    }
    txn.commit().await?;
    for s in &created {
        publish(state, s, "session_enqueued", None);
    }
    state.scheduler.wake();
    Ok(created)
}

pub fn publish(state: &AppState, s: &sessions::Model, event: &'static str, reason: Option<String>) {
    // Every committed change of a session passes here: list counts are stale.
    state.session_counts.changed();
    state.events.publish(Event::Session(SessionEvent {
        session_id: s.id,
        name: s.name.clone(),
        access_key: s.access_key.clone(),
        user: s.user_uuid,
        domain: s.domain_name.clone(),
        status: s.status,
        event,
        reason: reason.or_else(|| s.status_info.clone()),
    }));
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
    pub agent: Option<String>,
    pub container_id: Option<String>,
    pub occupying: Option<ResourceSlots>,
    pub result: Option<SessionResult>,
    pub exit_code: Option<i32>,
    pub log: Option<String>,
}

/// Moves a session and its kernel to `to`, recording the time in `status_history`.
pub async fn transition<C: ConnectionTrait>(
    db: &C,
    id: Uuid,
    to: SessionStatus,
    change: Change,
    now: chrono::DateTime<chrono::Utc>,
) -> ApiResult<sessions::Model> {
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
        )));
    }
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
    if change.info.is_some() || to != SessionStatus::Pending {
        m.status_info = Set(change.info.clone());
    }
    if change.data.is_some() {
        m.status_data = Set(change.data.clone());
    }
    if let Some(a) = &change.agent {
        m.agent_ids = Set(vec![a.clone()].into());
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
    let updated = m.update(db).await?;
    for k in kernels::Entity::find()
        .filter(kernels::Column::SessionId.eq(id))
        .all(db)
        .await?
    {
        let mut km = k.into_active_model();
        km.status = Set(to);
        km.status_changed = Set(now);
        km.status_history = Set(history.clone());
        km.status_info = Set(change.info.clone());
        if let Some(a) = &change.agent {
            km.agent = Set(Some(a.clone()));
        }
        if let Some(c) = &change.container_id {
            km.container_id = Set(Some(c.clone()));
        }
        if let Some(o) = &change.occupying {
            km.occupied_slots = Set(o.clone());
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
        km.update(db).await?;
    }
    Ok(updated)
}

/// `transition` + event + (when resources are released) agent usage refresh and a scheduler
/// wake-up.
pub async fn apply(
    state: &AppState,
    id: Uuid,
    to: SessionStatus,
    change: Change,
) -> ApiResult<sessions::Model> {
    // Session and kernel rows change together: nobody sees a RUNNING session without its
    // container.
    let txn = state.db.begin().await?;
    let s = transition(&txn, id, to, change, state.clock.now()).await?;
    txn.commit().await?;
    publish(state, &s, event_name(to), None);
    if matches!(
        to,
        SessionStatus::Terminated | SessionStatus::Cancelled | SessionStatus::Error
    ) {
        // Its apps are gone with its container.
        state.started_apps.forget(id);
    }
    if matches!(
        to,
        SessionStatus::Terminated
            | SessionStatus::Cancelled
            | SessionStatus::Error
            | SessionStatus::Running
    ) {
        crate::agents::refresh_agent_usage(state).await?;
        state.scheduler.wake();
    }
    Ok(s)
}

/// The agent and container of a kernel that is running now.
pub async fn container_of(
    state: &AppState,
    k: &kernels::Model,
) -> ApiResult<(std::sync::Arc<crate::agents::Agent>, String)> {
    let (Some(agent_id), Some(container)) = (&k.agent, &k.container_id) else {
        return Err(ApiError::bad_request("The session has no container"));
    };
    let agent = state
        .agents
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
pub async fn launch(state: AppState, id: Uuid) {
    let lock = state.session_locks.get(id).await;
    let _guard = lock.lock().await;
    if let Err(e) = launch_locked(&state, id).await {
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

async fn launch_locked(state: &AppState, id: Uuid) -> ApiResult<()> {
    let s = crate::lookup::get::<sessions::Entity>(&state.db, "session", id).await?;
    if s.status != SessionStatus::Scheduled {
        return Ok(()); // terminated while waiting for the lock
    }
    let k = main_kernel(&state.db, id).await?;
    let agent_id = k
        .agent
        .clone()
        .ok_or_else(|| ApiError::internal("launching a session", "no agent assigned"))?;
    let agent = state
        .agents
        .get(&agent_id)
        .await
        .ok_or_else(|| crate::agents::not_alive(&agent_id))?;
    apply(state, id, SessionStatus::Preparing, Change::default()).await?;
    let image = crate::images::resolve(&state.db, &k.image, Some(&k.architecture)).await?;
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
    let user = crate::users::by_uuid(&state.db, s.user_uuid).await?;
    env.extend([
        ("BACKENDAI_USER_UUID".into(), s.user_uuid.to_string()),
        ("BACKENDAI_USER_EMAIL".into(), user.email.clone()),
        ("BACKENDAI_SESSION_ID".into(), s.id.to_string()),
        ("BACKENDAI_SESSION_NAME".into(), s.name.clone()),
        ("BACKENDAI_KERNEL_ID".into(), k.id.to_string()),
        ("BACKENDAI_CLUSTER_ROLE".into(), "main".into()),
        ("BACKENDAI_CLUSTER_IDX".into(), "1".into()),
        ("BACKENDAI_CLUSTER_SIZE".into(), "1".into()),
        ("BACKENDAI_CLUSTER_HOST".into(), k.cluster_hostname.clone()),
        ("BACKENDAI_CLUSTER_HOSTS".into(), k.cluster_hostname.clone()),
        ("BACKENDAI_ACCESS_KEY".into(), s.access_key.clone()),
        ("BACKENDAI_PREOPEN_PORTS".into(), String::new()),
    ]);
    let req = &k.requested_slots;
    // The mounts were resolved and checked at creation; a row that no longer reads as mounts
    // does not load at all (never a session silently without its folders).
    let mounts = k.mounts.0.clone();
    let service_ports = k.service_ports.as_str().unwrap_or_default().to_string();
    let spec = KernelSpec {
        session_id: s.id,
        kernel_id: k.id,
        owner_access_key: s.access_key.clone(),
        image: crate::agents::docker_reference(&image),
        hostname: k.cluster_hostname.clone(),
        cpu: req.get("cpu"),
        mem_bytes: req.get("mem").to_i64().unwrap_or(0),
        shmem_bytes: shmem,
        gpu_ids: k
            .resource_opts
            .get("gpus")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        env,
        command: s
            .startup_command
            .clone()
            .filter(|_| s.session_type == SessionType::Batch),
        ports: crate::sessions::apps::container_ports(&service_ports),
        service_ports,
        pids_limit: i64::from(state.config.container_pids_limit),
        mounts: mounts
            .into_iter()
            .map(|m| BindMount {
                host_path: m.host_path,
                target: m.target,
                read_only: m.read_only,
            })
            .collect(),
    };
    if !image.installed_agents.contains(&agent_id) {
        apply(state, id, SessionStatus::Pulling, Change::default()).await?;
        let creds = entity::container_registries::Entity::find()
            .filter(entity::container_registries::Column::Hostname.eq(&image.registry))
            .one(&state.db)
            .await?
            .and_then(|r| r.username.map(|u| (u, r.password.unwrap_or_default())));
        agent.pull(&spec.image, creds).await?;
        crate::agents::mark_installed(state, &image, &agent_id).await?;
        apply(state, id, SessionStatus::Preparing, Change::default()).await?;
    }
    let started = std::time::Instant::now();
    let container_id = agent.create_and_start(&spec).await?;
    state.launch_phases.record(id, started.elapsed());
    // SSH keys and the daemon go in after RUNNING (they are not the engine's work and took
    // a third of the launch); whatever needs them (the sshd app, the key download) waits
    // for this setup, registered before RUNNING is visible.
    let ssh_setup = state.started_apps.ssh_setup_begins(id);
    let running = apply(
        state,
        id,
        SessionStatus::Running,
        Change {
            container_id: Some(container_id.clone()),
            occupying: Some(k.requested_slots.clone()),
            ..Default::default()
        },
    )
    .await;
    if let Err(e) = running {
        state.started_apps.ssh_setup_ends(id, ssh_setup);
        return Err(e);
    }
    {
        let (state, agent, container_id, name) = (
            state.clone(),
            agent.clone(),
            container_id.clone(),
            s.name.clone(),
        );
        tokio::spawn(async move {
            // Under the session's lock: a termination waits for the setup instead of racing
            // it, and a session already ended gets none.
            let lock = state.session_locks.get(id).await;
            let _guard = lock.lock().await;
            let started = std::time::Instant::now();
            let still_running = crate::lookup::get::<sessions::Entity>(&state.db, "session", id)
                .await
                .is_ok_and(|s| s.status == SessionStatus::Running);
            if still_running
                && let Err(e) = apps::install_ssh(agent.as_ref(), &container_id, &name).await
            {
                tracing::warn!(session = %id, error = ?e, "SSH/SFTP is unavailable in this session");
            }
            metrics::histogram!("bai_launch_phase_seconds", "phase" => "ssh")
                .record(started.elapsed().as_secs_f64());
            state.started_apps.ssh_setup_ends(id, ssh_setup);
        });
    }
    if s.session_type == SessionType::Batch {
        tokio::spawn(watch_batch(state.clone(), id, agent_id, container_id, k.id));
    }
    Ok(())
}

/// A batch session ends when its command exits: success for 0, failure otherwise, the exit
/// code in `status_data`, the output kept as the session log.
pub async fn watch_batch(
    state: AppState,
    id: Uuid,
    agent_id: String,
    container_id: String,
    kernel_id: Uuid,
) {
    let Some(agent) = state.agents.get(&agent_id).await else {
        return;
    };
    let code = agent.wait(&container_id).await;
    let lock = state.session_locks.get(id).await;
    let _guard = lock.lock().await;
    let Ok(s) = crate::lookup::get::<sessions::Entity>(&state.db, "session", id).await else {
        return;
    };
    if s.status != SessionStatus::Running {
        return; // terminated by someone else, who cleaned up
    }
    let log = agent.logs(&container_id).await.unwrap_or_default();
    agent.remove(&container_id, kernel_id).await;
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

/// Terminates a session: a pending one is CANCELLED; a running one goes TERMINATING, its
/// container is stopped and removed (output kept), then TERMINATED.
pub async fn terminate(state: &AppState, id: Uuid, reason: &str) -> ApiResult<sessions::Model> {
    let lock = state.session_locks.get(id).await;
    let _guard = lock.lock().await;
    let s = crate::lookup::get::<sessions::Entity>(&state.db, "session", id).await?;
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
            let k = main_kernel(&state.db, id).await?;
            let mut log = None;
            if let (Some(agent_id), Some(container)) = (&k.agent, &k.container_id)
                && let Some(agent) = state.agents.get(agent_id).await
            {
                agent.stop(container, 3).await;
                log = agent.logs(container).await.ok();
                agent.remove(container, k.id).await;
            }
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

/// Terminates running sessions idle for longer than their keypair policy's `idle_timeout`
/// (reason `idle-timeout`). Activity (apps, terminal, executions) moves `last_activity`.
pub async fn reap_idle(state: &AppState) -> ApiResult<usize> {
    let running = sessions::Entity::find()
        .filter(sessions::Column::Status.eq(SessionStatus::Running))
        .all(&state.db)
        .await?;
    // Per keypair: (idle timeout, maximum lifetime) in seconds, 0 = none.
    let mut timeouts: std::collections::HashMap<String, (i64, i64)> =
        std::collections::HashMap::new();
    let now = state.clock.now();
    let mut reaped = 0;
    for s in running {
        let timeout = match timeouts.get(&s.access_key) {
            Some(t) => *t,
            None => {
                let t = match entity::keypairs::Entity::find_by_id(s.access_key.clone())
                    .one(&state.db)
                    .await?
                {
                    Some(kp) => keypair_resource_policies::Entity::find_by_id(kp.resource_policy)
                        .one(&state.db)
                        .await?
                        .map(|p| (p.idle_timeout, p.max_session_lifetime))
                        .unwrap_or((0, 0)),
                    None => (0, 0),
                };
                timeouts.insert(s.access_key.clone(), t);
                t
            }
        };
        let (timeout, lifetime) = timeout;
        let started = s
            .status_history
            .get("RUNNING")
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.to_utc())
            .unwrap_or(s.created_at);
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
        let since = s
            .last_activity
            .unwrap_or(s.status_changed)
            .max(s.status_changed);
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

pub async fn idle_loop(state: AppState) {
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        if let Err(e) = reap_idle(&state).await {
            tracing::warn!(error = %e.message, cause = %e.chain(), "idle check failed");
        }
    }
}

/// The container's output: live while it runs, the kept copy afterwards.
pub async fn logs(state: &AppState, id: Uuid) -> ApiResult<String> {
    let k = main_kernel(&state.db, id).await?;
    if k.status == SessionStatus::Running
        && let (Some(agent_id), Some(container)) = (&k.agent, &k.container_id)
        && let Some(agent) = state.agents.get(agent_id).await
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
pub async fn sees(state: &AppState, caller: &Caller, e: &crate::events::SessionEvent) -> bool {
    if e.user == caller.uuid || caller.is_superadmin() {
        return true;
    }
    match caller.read_scope() {
        crate::auth::ReadScope::Admin(s) if s.covers_domain(&e.domain) => {
            match entity::users::Entity::find_by_id(e.user)
                .one(&state.db)
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
pub async fn find_own(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<sessions::Model> {
    let s = find_visible(state, caller, id).await?;
    if !works_inside(caller, &s) {
        return Err(ApiError::not_found("session", id));
    }
    Ok(s)
}

pub async fn find_visible(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
) -> ApiResult<sessions::Model> {
    visible(caller)
        .filter(sessions::Column::Id.eq(id))
        .one(&state.db)
        .await?
        .ok_or_else(|| ApiError::not_found("session", id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> images::Model {
        images::Model {
            id: Uuid::nil(),
            name: "bai.local/stable/python:3.11".into(),
            image: "stable/python".into(),
            tag: "3.11".into(),
            registry: "bai.local".into(),
            architecture: "x86_64".into(),
            config_digest: String::new(),
            size_bytes: 0,
            is_local: true,
            image_type: entity::enums::ImageType::Compute,
            accelerators: None,
            labels: json!({}),
            resources: json!({"cpu": {"min": "1", "max": null}, "mem": {"min": "268435456", "max": "8589934592"}}),
            created_at: chrono::Utc::now(),
            installed_agents: vec!["a".to_string()].into(),
        }
    }

    #[test]
    fn sizing_follows_backend_ai() {
        let shm = DEFAULT_SHMEM;
        let filled = size_request(&image(), ResourceSlots::new(), shm).unwrap();
        assert_eq!(filled.get("cpu"), Decimal::ONE);
        assert_eq!(
            filled.get("mem"),
            Decimal::from(268435456 + shm),
            "min mem + shmem"
        );
        let two = ResourceSlots::parse_input([("cpu", "2"), ("mem", "1g")]).unwrap();
        assert_eq!(size_request(&image(), two.clone(), shm).unwrap(), two);
        let small = ResourceSlots::parse_input([("cpu", "0.5")]).unwrap();
        assert!(
            size_request(&image(), small, shm)
                .unwrap_err()
                .message
                .contains("at least 1")
        );
        let big = ResourceSlots::parse_input([("mem", "16g")]).unwrap();
        assert!(
            size_request(&image(), big, shm)
                .unwrap_err()
                .message
                .contains("at most 8g")
        );
        let shm_big = ResourceSlots::parse_input([("mem", "1g")]).unwrap();
        assert!(
            size_request(&image(), shm_big, 1 << 30)
                .unwrap_err()
                .message
                .contains("Shared memory")
        );
    }

    #[test]
    fn names_and_env() {
        assert!(validate_name("my-session_1").is_ok());
        for bad in [
            "abc",
            "has space",
            "-lead",
            "trail-",
            &"x".repeat(65),
            "ünï",
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        let env = |k: &str| BTreeMap::from([(k.to_string(), "v".to_string())]);
        assert!(validate_environ(&env("MY_VAR")).is_ok());
        assert!(validate_environ(&env("1BAD")).is_err());
        assert!(validate_environ(&env("A-B")).is_err());
        assert!(validate_environ(&env("BACKENDAI_SESSION_ID")).is_err());
    }
}

/// How long the last launches spent in the engine's own create+start (inside PREPARING), for
/// `bai bench` and the metrics (SSH setup, after RUNNING, has its own histogram phase).
#[derive(Default)]
pub struct LaunchPhases {
    last: std::sync::Mutex<std::collections::VecDeque<(Uuid, std::time::Duration)>>,
}

impl LaunchPhases {
    fn record(&self, session: Uuid, engine: std::time::Duration) {
        metrics::histogram!("bai_launch_phase_seconds", "phase" => "engine")
            .record(engine.as_secs_f64());
        let mut last = match self.last.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if last.len() >= 64 {
            last.pop_front();
        }
        last.push_back((session, engine));
    }

    /// The engine's create+start of `session`'s launch, if it is among the last 64.
    pub fn of(&self, session: Uuid) -> Option<std::time::Duration> {
        let last = match self.last.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        last.iter()
            .rev()
            .find(|(id, _)| *id == session)
            .map(|(_, e)| *e)
    }
}
