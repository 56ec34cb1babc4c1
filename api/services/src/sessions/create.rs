//! Creating sessions, in the steps a request passes: its own fields are checked
//! (`validate`), the image is resolved and the slots sized as Backend.AI does (`size`), the
//! caller's right to each part is checked (`authorise`: registry, project, resource group,
//! folders, policy), the sessions and their kernels are written in one transaction
//! (`persist`), and the scheduler is told (`enqueue`). Only the scheduler allocates.
use std::collections::BTreeMap;

use entity::enums::{ClusterMode, ClusterRole, SessionResult, SessionStatus, SessionType};
use entity::slots::{ResourceSlots, parse_binary_size};
use entity::{groups, images, kernels, keypair_resource_policies, resource_presets, sessions};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, Set,
    TransactionTrait,
};
use serde_json::{Value, json};
use uuid::Uuid;

use super::status::publish;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::store::Runtime;

/// Shared memory a session gets when it asks for none (64 MiB).
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
    /// Batch sessions: seconds the job may run (Backend.AI's `batch_timeout`).
    pub batch_timeout: Option<i64>,
    pub count: u32,
    pub tag: Option<String>,
    /// Folders to mount, by name or id (automount folders are added by themselves).
    pub mounts: Vec<String>,
    /// Folder name (or id) → mount path (relative to /home/work or absolute beneath it).
    pub mount_map: BTreeMap<String, String>,
    /// Sessions (UUID or name, the caller's own) that must end in success before these start.
    pub dependencies: Vec<String>,
    /// A shell script run once in the container before anything else (its output in the logs).
    pub bootstrap_script: Option<String>,
    /// Containers in the session (1: an ordinary session); each gets the resources asked.
    pub cluster_size: u32,
    pub cluster_mode: ClusterMode,
    /// An inference session's model folder: mounted alone (no automount folders) where the
    /// model definition says (`/models`).
    pub model: Option<ModelMount>,
}

/// A model folder and the absolute path it is mounted at in an inference session.
#[derive(Debug, Clone)]
pub struct ModelMount {
    pub folder: Uuid,
    pub destination: String,
}

/// The most containers one cluster session may have, whatever the policy says.
pub const MAX_CLUSTER_SIZE: u32 = 32;

/// The most sessions one session may depend on.
pub const MAX_DEPENDENCIES: usize = 32;
/// The largest bootstrap script.
pub const MAX_BOOTSTRAP_BYTES: usize = 64 * 1024;

/// The longest `batch_timeout` (a year).
pub const MAX_BATCH_TIMEOUT_SECS: i64 = 365 * 86_400;

/// Backend.AI's `batch_timeout`: seconds as a number, or a number with `s`, `m`, `h` or `d`.
pub fn parse_batch_timeout(raw: &serde_json::Value) -> ApiResult<i64> {
    let bad = || {
        ApiError::bad_request(format!(
            "batch_timeout must be seconds or a number with s, m, h or d (e.g. 90, '15m', '2h'), not {raw}"
        ))
    };
    if let Some(n) = raw.as_i64() {
        return Ok(n);
    }
    let text = raw.as_str().ok_or_else(bad)?.trim();
    let (digits, unit) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&text[..i], c),
        _ => (text, 's'),
    };
    let n: i64 = digits.trim().parse().map_err(|_| bad())?;
    let scale = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(scale).ok_or_else(bad)
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
            || upper.starts_with("CUDA_MPS_")
            || upper.starts_with("LD_")
        {
            return Err(ApiError::bad_request(format!(
                "'{k}' may not be set: GPU visibility and MPS limits follow the allocation, and LD_* would change how every program loads"
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
/// the shared memory on top), explicit amounts below the minimum (for memory: the minimum plus
/// the shared memory) or above the maximum are refused, shared memory must stay below memory.
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
    if shm >= slots.get("mem") {
        return Err(ApiError::bad_request(format!(
            "Shared memory ({}) must be smaller than the memory ({})",
            entity::slots::format_amount("mem", shm),
            entity::slots::format_amount("mem", slots.get("mem"))
        )));
    }
    for (slot, amount) in slots.0.clone() {
        let min = image_min(image, &slot);
        // Shared memory comes out of memory: the image's minimum memory is what is left.
        if slot == "mem" && amount < min + shm {
            return Err(ApiError::bad_request(format!(
                "mem must be at least {} for the image {}: its minimum {} plus {} of shared memory",
                entity::slots::format_amount("mem", min + shm),
                image.name,
                entity::slots::format_amount("mem", min),
                entity::slots::format_amount("mem", shm),
            )));
        }
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
    state: &impl Runtime,
    caller: &Caller,
    req: CreateRequest,
) -> ApiResult<Vec<sessions::Model>> {
    let valid = validate(caller, &req)?;
    let image = crate::images::resolve_for(state.db(), caller, &req.image, None).await?;
    let sized = size(state, &image, &req).await?;
    let place = authorise(state, caller, &valid, &image, &sized, &req).await?;
    let created = persist(state, caller, &valid, &image, &sized, &place, &req).await?;
    enqueue(state, &created);
    Ok(created)
}

/// A request whose own fields are well-formed.
struct Valid {
    access_key: String,
    names: Vec<String>,
    startup_command: Option<String>,
    bootstrap_script: Option<String>,
}

/// The request's own fields, before anything is looked up: a keypair to run under, a sane
/// count, environment variables the server does not own, names Backend.AI accepts.
fn validate(caller: &Caller, req: &CreateRequest) -> ApiResult<Valid> {
    let access_key = caller
        .access_key
        .clone()
        .ok_or_else(|| ApiError::bad_request("This account has no keypair"))?;
    if req.count == 0 || req.count > 100 {
        return Err(ApiError::bad_request("count must be between 1 and 100"));
    }
    validate_environ(&req.environ)?;
    let startup_command = req.startup_command.clone().filter(|c| !c.trim().is_empty());
    if req.session_type == SessionType::Batch && startup_command.is_none() {
        return Err(ApiError::bad_request(
            "A batch session needs a startup command",
        ));
    }
    if let Some(t) = req.batch_timeout {
        if req.session_type != SessionType::Batch {
            return Err(ApiError::bad_request(
                "batch_timeout applies to batch sessions only",
            ));
        }
        if !(1..=MAX_BATCH_TIMEOUT_SECS).contains(&t) {
            return Err(ApiError::bad_request(format!(
                "batch_timeout must be between 1 second and {} days",
                MAX_BATCH_TIMEOUT_SECS / 86_400
            )));
        }
    }
    let base_name = req.name.as_deref().filter(|n| !n.trim().is_empty());
    if let Some(n) = base_name {
        validate_name(n)?;
    }
    let names: Vec<String> = (0..req.count)
        .map(|i| match base_name {
            Some(n) if req.count == 1 => n.to_string(),
            Some(n) => format!("{n}-{}", i + 1),
            None => random_name(),
        })
        .collect();
    for n in &names {
        validate_name(n)?;
    }
    let bootstrap_script = req
        .bootstrap_script
        .clone()
        .filter(|b| !b.trim().is_empty());
    if bootstrap_script
        .as_ref()
        .is_some_and(|b| b.len() > MAX_BOOTSTRAP_BYTES || b.contains('\0'))
    {
        return Err(ApiError::bad_request(format!(
            "bootstrap_script must be text of at most {} KiB",
            MAX_BOOTSTRAP_BYTES / 1024
        )));
    }
    if req.cluster_size == 0 || req.cluster_size > MAX_CLUSTER_SIZE {
        return Err(ApiError::bad_request(format!(
            "cluster_size must be between 1 and {MAX_CLUSTER_SIZE}"
        )));
    }
    if req.dependencies.len() > MAX_DEPENDENCIES {
        return Err(ApiError::bad_request(format!(
            "A session may depend on at most {MAX_DEPENDENCIES} sessions"
        )));
    }
    Ok(Valid {
        access_key,
        names,
        startup_command,
        bootstrap_script,
    })
}

/// What one session asks of an agent: each container's share, and all of them together.
struct Sized {
    per_kernel: ResourceSlots,
    requested: ResourceSlots,
    shmem: i64,
}

/// The slots: a preset, then the amounts given, sized against the image (§6).
async fn size(
    state: &impl Runtime,
    image: &images::Model,
    req: &CreateRequest,
) -> ApiResult<Sized> {
    let (mut slots, mut shmem) = (ResourceSlots::new(), None);
    if let Some(p) = &req.preset {
        let preset = crate::lookup::get::<resource_presets::Entity>(
            state.db(),
            "resource preset",
            p.clone(),
        )
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
    let per_kernel = size_request(image, slots, shmem)?;
    // Whole devices are whole: a fraction would be charged as a fraction and handed out whole.
    let d = per_kernel.get("cuda.device");
    if !d.fract().is_zero() {
        return Err(ApiError::bad_request(format!(
            "cuda.device must be a whole number of GPUs (got {d}); use cuda.shares for a fraction"
        )));
    }
    // The resource check is per container × containers.
    let mut requested = per_kernel.clone();
    for _ in 1..req.cluster_size {
        requested = requested.add(&per_kernel);
    }
    Ok(Sized {
        per_kernel,
        requested,
        shmem,
    })
}

/// Where the sessions may go and what they may mount, once the caller's right to each is shown.
struct Placement {
    group: groups::Model,
    scaling_group: String,
    mounts: entity::columns::Mounts,
    /// The sessions these wait for.
    dependencies: Vec<Uuid>,
}

/// The caller's rights: the domain's registries, an installed or pullable image, a project
/// they belong to, a resource group open to them, their folders, their keypair's policy.
async fn authorise(
    state: &impl Runtime,
    caller: &Caller,
    valid: &Valid,
    image: &images::Model,
    sized: &Sized,
    req: &CreateRequest,
) -> ApiResult<Placement> {
    let db = state.db();
    // The domain's registry allowlist (empty = any registry).
    let domain =
        crate::lookup::get::<entity::domains::Entity>(db, "domain", caller.domain_name.clone())
            .await?;
    if !domain.is_active {
        return Err(ApiError::bad_request(format!(
            "The domain '{}' is inactive",
            domain.name
        )));
    }
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
        Some(&valid.access_key),
    )
    .await?;
    let scaling_group = match &req.scaling_group {
        Some(sg) if allowed.contains(sg) => sg.clone(),
        Some(sg) => return Err(ApiError::not_found("resource group", sg)),
        None => allowed
            .first()
            .cloned()
            .ok_or_else(|| ApiError::bad_request("No resource group is available to you"))?,
    };
    let mounts = entity::columns::Mounts(match &req.model {
        Some(m) if req.session_type == SessionType::Inference => {
            vec![crate::storage::model_mount(state, caller, m.folder, &m.destination).await?]
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "Only inference sessions mount a model folder",
            ));
        }
        None => crate::storage::session_mounts(state, caller, &req.mounts, &req.mount_map).await?,
    });
    within_policy(state, &valid.access_key, &sized.requested, req).await?;
    if req.cluster_mode == ClusterMode::MultiNode
        && req.cluster_size > 1
        && !crate::agents::group_has_routed(state, &scaling_group).await?
    {
        return Err(ApiError::bad_request(format!(
            "Multi-node cluster sessions run on agents of other hosts with a session subnet (remote engines); resource group '{scaling_group}' has none: use cluster_mode single-node"
        )));
    }
    let dependencies = resolve_dependencies(db, &valid.access_key, &req.dependencies).await?;
    Ok(Placement {
        group,
        scaling_group,
        mounts,
        dependencies,
    })
}

/// The sessions named as dependencies, each the caller's own (by UUID, or by name: the most
/// recent of that name). Anyone else's session is as unknown as none at all.
async fn resolve_dependencies<C: ConnectionTrait>(
    db: &C,
    access_key: &str,
    named: &[String],
) -> ApiResult<Vec<Uuid>> {
    use sea_orm::QueryOrder;
    let mut ids = Vec::new();
    for key in named {
        let key = key.trim();
        let mine = sessions::Entity::find().filter(sessions::Column::AccessKey.eq(access_key));
        let found = match key.parse::<Uuid>() {
            Ok(id) => mine.filter(sessions::Column::Id.eq(id)).one(db).await?,
            Err(_) => {
                mine.filter(sessions::Column::Name.eq(key))
                    .order_by_desc(sessions::Column::CreatedAt)
                    .one(db)
                    .await?
            }
        };
        let s = found.ok_or_else(|| ApiError::not_found("session (dependency)", key))?;
        if !ids.contains(&s.id) {
            ids.push(s.id);
        }
    }
    Ok(ids)
}

/// A request beyond the keypair policy's absolute limits could never run: refuse it now, as
/// one that would exceed the pending sessions the policy allows.
async fn within_policy(
    state: &impl Runtime,
    access_key: &str,
    requested: &ResourceSlots,
    req: &CreateRequest,
) -> ApiResult<()> {
    let count = req.count;
    let db = state.db();
    let kp = crate::lookup::get::<entity::keypairs::Entity>(db, "keypair", access_key.to_string())
        .await?;
    let policy = crate::lookup::get::<keypair_resource_policies::Entity>(
        db,
        "resource policy",
        kp.resource_policy.clone(),
    )
    .await?;
    let over = policy
        .total_resource_slots
        .exceeded_by(requested, crate::policies::unspecified_limit(&policy));
    if !over.is_empty() {
        return Err(ApiError::bad_request(format!(
            "The request exceeds your resource policy '{}' for {} (requested {})",
            policy.name,
            over.join(", "),
            requested
        )));
    }
    let max_containers = u32::try_from(policy.max_containers_per_session.max(1)).unwrap_or(1);
    if req.cluster_size > max_containers {
        // Backend.AI's QuotaExceeded.
        return Err(ApiError::bad_request(format!(
            "Your resource policy '{}' allows at most {max_containers} container(s) per session; {} were asked",
            policy.name, req.cluster_size
        ))
        .with_error_code("session_create_unavailable"));
    }
    if let Some(max) = policy.max_pending_session_count.filter(|m| *m > 0) {
        let pending = sessions::Entity::find()
            .filter(sessions::Column::AccessKey.eq(access_key))
            .filter(sessions::Column::Status.eq(SessionStatus::Pending))
            .count(db)
            .await?;
        if pending + u64::from(count) > u64::try_from(max).unwrap_or(0) {
            return Err(ApiError::bad_request(format!(
                "Your resource policy '{}' allows at most {max} pending session(s); {pending} are waiting already",
                policy.name
            )));
        }
    }
    Ok(())
}

/// The sessions and their main kernels, in one transaction that also checks that no live
/// session of the keypair has one of the names.
async fn persist(
    state: &impl Runtime,
    caller: &Caller,
    valid: &Valid,
    image: &images::Model,
    sized: &Sized,
    place: &Placement,
    req: &CreateRequest,
) -> ApiResult<Vec<sessions::Model>> {
    let access_key = &valid.access_key;
    let txn = state.db().begin().await?;
    for n in &valid.names {
        let taken = sessions::Entity::find()
            .filter(sessions::Column::AccessKey.eq(access_key))
            .filter(sessions::Column::Name.eq(n))
            .filter(sessions::Column::Status.is_in(SessionStatus::LIVE.iter().copied()))
            .count(&txn)
            .await?;
        if taken > 0 {
            return Err(ApiError::conflict(format!(
                "You already have a live session named '{n}'"
            )));
        }
    }
    let now = state.clock().now();
    let history = json!({ "PENDING": now.to_rfc3339() });
    let environ = json!(req.environ);
    let resource_opts = json!({ "shmem": sized.shmem });
    let mut created = Vec::new();
    for name in &valid.names {
        let id = Uuid::new_v4();
        let s = sessions::ActiveModel {
            id: Set(id),
            name: Set(name.clone()),
            session_type: Set(req.session_type),
            priority: Set(10),
            cluster_mode: Set(req.cluster_mode),
            cluster_size: Set(i32::try_from(req.cluster_size).unwrap_or(1)),
            agent_ids: Set(Default::default()),
            scaling_group_name: Set(Some(place.scaling_group.clone())),
            domain_name: Set(caller.domain_name.clone()),
            group_id: Set(place.group.id),
            user_uuid: Set(caller.uuid),
            access_key: Set(access_key.clone()),
            images: Set(json!([image.name])),
            tag: Set(req.tag.clone()),
            occupying_slots: Set(ResourceSlots::new()),
            requested_slots: Set(sized.requested.clone()),
            vfolder_mounts: Set(place.mounts.clone()),
            environ: Set(environ.clone()),
            resource_opts: Set(resource_opts.clone()),
            bootstrap_script: Set(valid.bootstrap_script.clone()),
            startup_command: Set(valid.startup_command.clone()),
            batch_timeout: Set(req.batch_timeout),
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
            utilization_idle_since: Set(None),
            utilization_sampled_at: Set(None),
            owner: Set(None),
        }
        .insert(&txn)
        .await?;
        // Backend.AI's naming: main1, then sub1, sub2…; local ranks count from 0.
        for rank in 0..req.cluster_size {
            let (role, idx, hostname) = cluster_member(rank);
            kernels::ActiveModel {
                id: Set(Uuid::new_v4()),
                session_id: Set(id),
                cluster_role: Set(role),
                cluster_idx: Set(idx),
                local_rank: Set(i32::try_from(rank).unwrap_or(0)),
                cluster_hostname: Set(hostname),
                agent: Set(None),
                agent_addr: Set(None),
                image: Set(image.name.clone()),
                architecture: Set(image.architecture.clone()),
                registry: Set(image.registry.clone()),
                container_id: Set(None),
                occupied_slots: Set(ResourceSlots::new()),
                requested_slots: Set(sized.per_kernel.clone()),
                mounts: Set(place.mounts.clone()),
                resource_opts: Set(resource_opts.clone()),
                service_ports: Set(json!(image.labels.get("ai.backend.service-ports"))),
                domain_name: Set(caller.domain_name.clone()),
                group_id: Set(place.group.id),
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
        }
        for d in &place.dependencies {
            entity::session_dependencies::ActiveModel {
                session_id: Set(id),
                depends_on: Set(*d),
            }
            .insert(&txn)
            .await?;
        }
        created.push(s);
    }
    txn.commit().await?;
    Ok(created)
}

/// The role, index and hostname of a cluster session's container of local rank `rank`.
pub fn cluster_member(rank: u32) -> (ClusterRole, i32, String) {
    if rank == 0 {
        (ClusterRole::Main, 1, "main1".into())
    } else {
        let idx = i32::try_from(rank).unwrap_or(i32::MAX);
        (ClusterRole::Sub, idx, format!("sub{idx}"))
    }
}

/// Committed sessions are announced and the scheduler woken: it allocates on its next pass.
fn enqueue(state: &impl Runtime, created: &[sessions::Model]) {
    for s in created {
        publish(state, s, "session_enqueued", None);
    }
    state.scheduler().wake();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> images::Model {
        images::Model {
            resources: json!({"cpu": {"min": "1", "max": null}, "mem": {"min": "268435456", "max": "8589934592"}}),
            installed_agents: vec!["a".to_string()].into(),
            ..crate::images::test_image("stable/python", "3.11")
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
        // Memory at the image minimum leaves nothing for shared memory: refused, with why.
        let at_min = ResourceSlots::parse_input([("mem", "256m")]).unwrap();
        let why = size_request(&image(), at_min, shm).unwrap_err().message;
        assert!(why.contains("at least 320m"), "{why}");
        assert!(why.contains("64m of shared memory"), "{why}");
        let just = ResourceSlots::parse_input([("mem", "320m")]).unwrap();
        assert!(size_request(&image(), just, shm).is_ok());
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
