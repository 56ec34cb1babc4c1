//! Model serving the Backend.AI way: an endpoint serves a model folder through `replicas`
//! inference sessions (routes), started and kept by the leader (`reconcile`), reached at the
//! endpoint's own port through bai's proxy (the surfaces' `serving.rs`, reading `table`),
//! open to anyone or to holders of the endpoint's tokens (`tokens`). The model folder's
//! definition (`definition`) says what runs and on which port.
//!
//! Who may act on an endpoint is who governs its session owner (`Caller::governs`): the owner,
//! a domain admin of the owner's domain over lower-ranked users, a superadmin. To anyone else
//! an endpoint does not exist (NOT_FOUND), before any other check.
pub mod definition;
pub mod reconcile;
pub mod records;
pub mod table;
pub mod tokens;

use std::collections::BTreeMap;

use entity::enums::{ClusterMode, VFolderUsageMode};
use entity::{endpoint_tokens, endpoints, routings, vfolders};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder, Set,
};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::store::{Runtime, Store};

pub use reconcile::{claim_port, reconcile_loop, refresh, taken_ports, unported, wake_on_sessions};
pub use records::{definition_of, owner_caller, route_status, routes_of, stage};

/// Backend.AI's runtime variants, with the name its Web UI shows. bai runs `custom` (the
/// folder's own model definition); the others bring their own servers and are refused.
pub const RUNTIME_VARIANTS: [(&str, &str); 7] = [
    ("custom", "Custom (Default)"),
    ("vllm", "vLLM"),
    ("nim", "NVIDIA NIM"),
    ("huggingface-tgi", "Huggingface TGI"),
    ("sglang", "SGLang"),
    ("modular-max", "Modular MAX"),
    ("cmd", "Predefined Image Command"),
];

/// The most endpoints one user may keep live.
pub const MAX_LIVE_ENDPOINTS_PER_USER: usize = 32;

/// A request to serve a model (`POST /services`, GraphQL), as the surfaces read it.
#[derive(Debug, Clone, Default)]
pub struct NewService {
    pub name: String,
    pub replicas: i64,
    pub image: String,
    pub architecture: Option<String>,
    pub runtime_variant: String,
    /// The project, by name or id.
    pub group: String,
    /// The owner's domain (default: that domain).
    pub domain: Option<String>,
    pub cluster_size: i64,
    pub cluster_mode: String,
    pub tag: Option<String>,
    pub startup_command: Option<String>,
    pub bootstrap_script: Option<String>,
    pub callback_url: Option<String>,
    /// Admins: serve as the owner of this keypair.
    pub owner_access_key: Option<String>,
    pub open_to_public: bool,
    /// The model folder, by name or id.
    pub model: String,
    pub model_definition_path: Option<String>,
    pub model_mount_destination: String,
    /// Other folders to mount: bai mounts the model folder only.
    pub extra_mounts: usize,
    pub environ: BTreeMap<String, String>,
    /// The resource group (default: the first the owner may use).
    pub scaling_group: Option<String>,
    pub resources: BTreeMap<String, String>,
    pub resource_opts: serde_json::Map<String, Value>,
}

/// Backend.AI's answer to a request it cannot take (400 `api_parsing_invalid-parameters`).
fn invalid(m: impl Into<String>) -> ApiError {
    ApiError::bad_request(m).with_error_code("api_parsing_invalid-parameters")
}

/// Endpoint names as Backend.AI takes them: 4 to 24 word characters and `-`, a word
/// character first and last.
pub fn validate_name(name: &str) -> ApiResult<()> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let n = name.chars().count();
    let ok = (4..=24).contains(&n)
        && name.chars().next().is_some_and(word)
        && name.chars().last().is_some_and(word)
        && name.chars().all(|c| word(c) || c == '-');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "Invalid service name '{name}': use 4 to 24 letters, digits, '_' or '-', starting and ending with a letter, digit or '_'"
        )))
    }
}

/// The replicas `access_key`'s policy lets one endpoint keep.
async fn max_replicas(store: &impl Store, access_key: &str) -> ApiResult<i64> {
    let kp = crate::lookup::get::<entity::keypairs::Entity>(
        store.db(),
        "keypair",
        access_key.to_string(),
    )
    .await?;
    let p = crate::lookup::get::<entity::keypair_resource_policies::Entity>(
        store.db(),
        "resource policy",
        kp.resource_policy,
    )
    .await?;
    Ok(i64::from(p.max_session_count_per_model_session))
}

/// `to` replicas are allowed by `access_key`'s policy.
async fn check_replicas(store: &impl Store, access_key: &str, to: i64) -> ApiResult<()> {
    if to < 0 {
        return Err(invalid(
            "Amount of desired session count cannot be a negative number",
        ));
    }
    let max = max_replicas(store, access_key).await?;
    if to > max {
        return Err(invalid(format!(
            "Cannot spawn more than {max} sessions for a single service"
        )));
    }
    Ok(())
}

/// Who a new service belongs to: the caller, or (admins) the owner of `owner_access_key`
/// when the caller governs that user.
async fn owner_of_request(
    store: &impl Store,
    caller: &Caller,
    req: &NewService,
) -> ApiResult<Caller> {
    let Some(ak) = req
        .owner_access_key
        .as_deref()
        .filter(|ak| Some(*ak) != caller.access_key.as_deref())
    else {
        return Ok(caller.clone());
    };
    let not_found = || ApiError::not_found("keypair", ak);
    let kp = entity::keypairs::Entity::find_by_id(ak.to_string())
        .one(store.db())
        .await?
        .ok_or_else(not_found)?;
    let user = crate::users::by_uuid(store.db(), kp.user).await?;
    if !caller.governs(user.uuid, user.role, &user.domain_name) {
        return Err(not_found());
    }
    if !kp.is_active || user.status != entity::enums::UserStatus::Active {
        return Err(invalid(format!(
            "The keypair '{ak}' or its user is not active"
        )));
    }
    Ok(Caller::of_user(user, Some(kp.access_key), None))
}

/// The model folder `key` (id or name) among the folders `owner` may reach, of `model` usage.
async fn model_folder(store: &impl Store, owner: &Caller, key: &str) -> ApiResult<vfolders::Model> {
    let not_found =
        || ApiError::not_found("model folder", key).with_error_code("vfolder_read_not-found");
    let reachable = crate::storage::accessible(owner).all(store.db()).await?;
    let by_id = Uuid::parse_str(key).ok();
    let mut found: Vec<&vfolders::Model> = reachable
        .iter()
        .filter(|f| Some(f.id) == by_id || (by_id.is_none() && f.name == key))
        .filter(|f| {
            !matches!(
                f.status,
                entity::enums::VFolderStatus::DeleteOngoing
                    | entity::enums::VFolderStatus::DeleteComplete
            )
        })
        .collect();
    // The owner's own folder first, then a model folder among the same names.
    found.sort_by_key(|f| {
        (
            f.usage_mode != VFolderUsageMode::Model,
            f.user != Some(owner.uuid),
        )
    });
    let f = found.first().ok_or_else(not_found)?;
    if f.usage_mode != VFolderUsageMode::Model {
        return Err(invalid(format!(
            "Selected VFolder '{}' is not a model folder",
            f.name
        )));
    }
    let (f, _) = crate::storage::find(store, owner, f.id).await?;
    crate::storage::require_ready(&f)?;
    Ok(f)
}

/// Reads the model definition from the folder: the path given (relative to the folder), or
/// the first of Backend.AI's default names that exists. Returns the path read and the
/// definition.
async fn read_definition(
    store: &impl Store,
    folder: &vfolders::Model,
    path: Option<&str>,
    mount_destination: &str,
) -> ApiResult<(String, definition::Definition)> {
    use tokio::io::AsyncReadExt as _;
    let root = crate::storage::folder_root(store.config(), folder)?;
    let candidates: Vec<String> = match path.map(str::trim).filter(|p| !p.is_empty()) {
        Some(p) => vec![p.to_string()],
        None => definition::DEFAULT_PATHS
            .iter()
            .map(|p| (*p).to_string())
            .collect(),
    };
    for shown in &candidates {
        let rel = shown.trim_start_matches("./");
        let parts = crate::storage::path::components(rel)
            .map_err(|e| invalid(format!("model_definition_path: {}", e.message)))?;
        let rel = parts.join("/");
        if rel.is_empty() {
            return Err(invalid("model_definition_path names the folder itself"));
        }
        if store.storage().kind(&root, &rel).await? != Some(bai_storage::Kind::File) {
            continue;
        }
        let (reader, size) = store.storage().read(&root, &rel).await?;
        if size > definition::MAX_DEFINITION_BYTES as u64 {
            return Err(ApiError::bad_request(format!(
                "The model definition file is larger than {} KiB",
                definition::MAX_DEFINITION_BYTES / 1024
            ))
            .with_error_code("model-deployment_read_invalid-data-format"));
        }
        let mut text = String::new();
        reader
            .take(definition::MAX_DEFINITION_BYTES as u64 + 1)
            .read_to_string(&mut text)
            .await
            .map_err(|e| {
                ApiError::bad_request(format!("The model definition file is not text: {e}"))
                    .with_error_code("model-deployment_read_invalid-data-format")
            })?;
        let d = definition::parse(&rel, &text, mount_destination)?;
        return Ok((format!("./{rel}"), d));
    }
    Err(ApiError::not_found(
        "model definition",
        format!("{} in folder '{}'", candidates.join(" or "), folder.name),
    )
    .with_error_code("model-service_parsing_invalid-parameters"))
}

/// Creates an endpoint (Backend.AI's `POST /services`). Its replicas and URL come from the
/// leader's next pass (`reconcile`), not from this call: the answer has no URL yet.
pub async fn create(
    state: &impl Runtime,
    caller: &Caller,
    req: NewService,
) -> ApiResult<endpoints::Model> {
    validate_name(&req.name)?;
    let owner = owner_of_request(state, caller, &req).await?;
    let access_key = owner
        .access_key
        .clone()
        .ok_or_else(|| ApiError::bad_request("This account has no keypair"))?;
    // What the owner may not reach is not found, before anything else is said of it.
    let folder = model_folder(state, &owner, &req.model).await?;
    check_replicas(state, &access_key, req.replicas).await?;
    match RUNTIME_VARIANTS
        .iter()
        .find(|(n, _)| *n == req.runtime_variant)
    {
        Some(("custom", _)) => {}
        Some((n, _)) => {
            return Err(invalid(format!(
                "The runtime variant '{n}' is not supported by bai: use 'custom' with a model definition in the folder"
            )));
        }
        None => {
            return Err(invalid(format!(
                "Unknown runtime variant '{}'.",
                req.runtime_variant
            )));
        }
    }
    if req.extra_mounts > 0 {
        return Err(invalid(
            "extra_mounts are not supported by bai: a replica mounts its model folder only",
        ));
    }
    let cluster_mode = ClusterMode::parse(&req.cluster_mode.replace('_', "-"))
        .ok_or_else(|| invalid(format!("Unknown cluster mode '{}'", req.cluster_mode)))?;
    let cluster_size = u32::try_from(req.cluster_size)
        .ok()
        .filter(|n| (1..=crate::sessions::MAX_CLUSTER_SIZE).contains(n))
        .ok_or_else(|| {
            invalid(format!(
                "cluster_size must be between 1 and {}",
                crate::sessions::MAX_CLUSTER_SIZE
            ))
        })?;
    if req.domain.as_ref().is_some_and(|d| *d != owner.domain_name) {
        return Err(ApiError::not_found(
            "domain",
            req.domain.as_deref().unwrap_or(""),
        ));
    }
    let db = state.db();
    let group = crate::sessions::resolve_group(db, &owner, Some(&req.group)).await?;
    let allowed = crate::scaling_groups::allowed_for(
        db,
        &owner.domain_name,
        owner.uuid,
        Some(group.id),
        Some(&access_key),
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
    let image =
        crate::images::resolve_for(db, &owner, &req.image, req.architecture.as_deref()).await?;
    // The amounts are sized now against the image, as each replica's will be.
    let slots = entity::slots::ResourceSlots::parse_input(
        req.resources.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    )?;
    let shmem = shmem_of(&req.resource_opts)?;
    crate::sessions::size_request(
        &image,
        slots,
        shmem.unwrap_or(crate::sessions::DEFAULT_SHMEM),
    )?;
    let destination = crate::storage::model_destination(&req.model_mount_destination)?;
    let (def_path, def) = read_definition(
        state,
        &folder,
        req.model_definition_path.as_deref(),
        &destination,
    )
    .await?;
    let live = endpoints::Entity::find()
        .filter(endpoints::Column::SessionOwner.eq(owner.uuid))
        .filter(endpoints::Column::LifecycleStage.ne(stage::DESTROYED))
        .all(db)
        .await?;
    if live.len() >= MAX_LIVE_ENDPOINTS_PER_USER {
        return Err(invalid(format!(
            "A user may keep at most {MAX_LIVE_ENDPOINTS_PER_USER} services"
        )));
    }
    if live.iter().any(|e| e.name == req.name) {
        return Err(ApiError::conflict(format!(
            "A service named '{}' exists already",
            req.name
        )));
    }
    let e = endpoints::ActiveModel {
        id: Set(Uuid::new_v4()),
        name: Set(req.name.clone()),
        domain_name: Set(owner.domain_name.clone()),
        project: Set(group.id),
        resource_group: Set(scaling_group),
        created_user: Set(caller.uuid),
        session_owner: Set(owner.uuid),
        owner_access_key: Set(access_key),
        image: Set(image.name.clone()),
        architecture: Set(image.architecture.clone()),
        model: Set(Some(folder.id)),
        model_mount_destination: Set(destination),
        model_definition_path: Set(Some(def_path)),
        model_definition: Set(serde_json::to_value(&def)
            .map_err(|e| ApiError::internal("keeping a model definition", e))?),
        runtime_variant: Set(req.runtime_variant.clone()),
        resources: Set(json!(req.resources)),
        resource_opts: Set(Value::Object(req.resource_opts.clone())),
        environ: Set(json!(req.environ)),
        cluster_mode: Set(cluster_mode.as_str().to_string()),
        cluster_size: Set(i32::try_from(cluster_size).unwrap_or(1)),
        replicas: Set(i32::try_from(req.replicas).unwrap_or(0)),
        open_to_public: Set(req.open_to_public),
        lifecycle_stage: Set(stage::CREATED.into()),
        retries: Set(0),
        port: Set(None),
        token_key: Set(tokens::new_key()),
        tag: Set(req.tag.clone()),
        startup_command: Set(req.startup_command.clone()),
        bootstrap_script: Set(req.bootstrap_script.clone()),
        callback_url: Set(req.callback_url.clone()),
        created_at: Set(state.clock().now()),
        destroyed_at: Set(None),
    }
    .insert(db)
    .await?;
    tracing::info!(endpoint = %e.id, name = %e.name, owner = %e.session_owner, replicas = e.replicas, "model service created");
    state.serving_table().wake();
    Ok(e)
}

/// The shared memory `resource_opts` asks for (`{"shmem": "1g"}`), bytes.
fn shmem_of(opts: &serde_json::Map<String, Value>) -> ApiResult<Option<i64>> {
    use rust_decimal::prelude::ToPrimitive;
    match opts.get("shmem") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            entity::slots::parse_binary_size(&text)
                .and_then(|d| d.to_i64())
                .map(Some)
                .ok_or_else(|| invalid(format!("invalid shared memory size '{text}'")))
        }
    }
}

/// The endpoint `id` when `caller` may act on it; NOT_FOUND otherwise, as for none at all.
pub async fn find(store: &impl Store, caller: &Caller, id: Uuid) -> ApiResult<endpoints::Model> {
    let not_found =
        || ApiError::not_found("model service", id).with_error_code("model-service_read_not-found");
    let e = endpoints::Entity::find_by_id(id)
        .one(store.db())
        .await?
        .ok_or_else(not_found)?;
    let owner = crate::users::by_uuid(store.db(), e.session_owner).await?;
    if !caller.governs(owner.uuid, owner.role, &owner.domain_name) {
        return Err(not_found());
    }
    Ok(e)
}

/// The endpoint `id` when `caller` may act on it and it is not being destroyed.
async fn find_live(store: &impl Store, caller: &Caller, id: Uuid) -> ApiResult<endpoints::Model> {
    let e = find(store, caller, id).await?;
    if e.lifecycle_stage != stage::CREATED {
        return Err(invalid("Cannot update endpoint marked for removal"));
    }
    Ok(e)
}

/// The endpoints `caller` may see: its own; a domain admin's also those of the lower-ranked
/// users of its domain; all for a superadmin (the rule of sessions, `Caller::governs`).
pub fn visible_query(caller: &Caller) -> sea_orm::Select<endpoints::Entity> {
    match caller.read_scope() {
        crate::auth::ReadScope::Admin(scope) => {
            let mut select = endpoints::Entity::find();
            if let Some(d) = scope.domain() {
                select = select.filter(endpoints::Column::DomainName.eq(d));
            }
            if let Some(sub) = crate::auth::visibility::governed(caller) {
                select = select.filter(endpoints::Column::SessionOwner.in_subquery(sub));
            }
            select
        }
        crate::auth::ReadScope::Own { user, .. } => {
            endpoints::Entity::find().filter(endpoints::Column::SessionOwner.eq(user))
        }
    }
}

/// The endpoints `caller` may see, newest first; destroyed ones only when asked.
pub async fn visible(
    store: &impl Store,
    caller: &Caller,
    with_destroyed: bool,
) -> ApiResult<Vec<endpoints::Model>> {
    let mut q = visible_query(caller).order_by_desc(endpoints::Column::CreatedAt);
    if !with_destroyed {
        q = q.filter(endpoints::Column::LifecycleStage.ne(stage::DESTROYED));
    }
    Ok(q.all(store.read()).await?)
}

/// The URL of an endpoint served on `port` (`scheme://host:port`, no trailing slash).
pub fn url_of(store: &impl Store, port: Option<i32>) -> Option<String> {
    let port = port?;
    let c = store.config();
    let scheme = if c.tls_cert.is_some() {
        "https"
    } else {
        "http"
    };
    let host = match &c.serving_host {
        Some(h) => h.clone(),
        None => c
            .advertise_addr
            .as_deref()
            .and_then(|a| a.rsplit_once(':').map(|(h, _)| h.to_string()))
            .unwrap_or_else(|| {
                let ip = c.listen.ip();
                if ip.is_unspecified() {
                    "localhost".to_string()
                } else if ip.is_ipv6() {
                    format!("[{ip}]")
                } else {
                    ip.to_string()
                }
            }),
    };
    Some(format!("{scheme}://{host}:{port}"))
}

/// Marks the endpoint for removal: its replicas are terminated by the leader, then it is
/// destroyed (Backend.AI's `DELETE /services/{id}`).
pub async fn delete(store: &impl Runtime, caller: &Caller, id: Uuid) -> ApiResult<()> {
    let e = find(store, caller, id).await?;
    if e.lifecycle_stage != stage::CREATED {
        return Ok(());
    }
    let mut m = e.into_active_model();
    m.lifecycle_stage = Set(stage::DESTROYING.into());
    m.replicas = Set(0);
    m.update(store.db()).await?;
    tracing::info!(endpoint = %id, by = %caller.uuid, "model service marked for removal");
    store.serving_table().wake();
    Ok(())
}

/// Sets the replicas wanted; returns the routes there were and the target.
pub async fn scale(
    store: &impl Runtime,
    caller: &Caller,
    id: Uuid,
    to: i64,
) -> ApiResult<(usize, i64)> {
    let e = find_live(store, caller, id).await?;
    check_replicas(store, &e.owner_access_key, to).await?;
    let current = routes_of(store, id)
        .await?
        .iter()
        .filter(|r| route_status::ACTIVE.contains(&r.status.as_str()))
        .count();
    let mut m = e.into_active_model();
    m.replicas = Set(i32::try_from(to).unwrap_or(0));
    m.update(store.db()).await?;
    store.serving_table().wake();
    Ok((current, to))
}

/// Changes what may be changed of a live endpoint (GraphQL `modify_endpoint`): its replicas
/// (within the policy), its name, whether it is public.
pub async fn modify(
    store: &impl Runtime,
    caller: &Caller,
    id: Uuid,
    replicas: Option<i64>,
    name: Option<String>,
    open_to_public: Option<bool>,
) -> ApiResult<endpoints::Model> {
    let e = find_live(store, caller, id).await?;
    if let Some(to) = replicas {
        check_replicas(store, &e.owner_access_key, to).await?;
    }
    if let Some(n) = &name {
        validate_name(n)?;
        let taken = endpoints::Entity::find()
            .filter(endpoints::Column::SessionOwner.eq(e.session_owner))
            .filter(endpoints::Column::Name.eq(n))
            .filter(endpoints::Column::Id.ne(e.id))
            .filter(endpoints::Column::LifecycleStage.ne(stage::DESTROYED))
            .one(store.db())
            .await?;
        if taken.is_some() {
            return Err(ApiError::conflict(format!(
                "A service named '{n}' exists already"
            )));
        }
    }
    let mut m = e.into_active_model();
    if let Some(to) = replicas {
        m.replicas = Set(i32::try_from(to).unwrap_or(0));
    }
    if let Some(n) = name {
        m.name = Set(n);
    }
    if let Some(p) = open_to_public {
        m.open_to_public = Set(p);
    }
    let e = m.update(store.db()).await?;
    store.serving_table().set_public(e.id, e.open_to_public);
    store.serving_table().wake();
    Ok(e)
}

/// The route `route` of endpoint `id` (NOT_FOUND when it is another endpoint's).
async fn route_of(store: &impl Store, id: Uuid, route: Uuid) -> ApiResult<routings::Model> {
    routings::Entity::find_by_id(route)
        .filter(routings::Column::Endpoint.eq(id))
        .one(store.db())
        .await?
        .ok_or_else(|| ApiError::not_found("route", route).with_error_code("route_read_not-found"))
}

/// Route `route` with its endpoint, when `caller` may act on the endpoint; NOT_FOUND as for
/// none otherwise.
pub async fn find_route(
    store: &impl Store,
    caller: &Caller,
    route: Uuid,
) -> ApiResult<(routings::Model, endpoints::Model)> {
    let not_found = || ApiError::not_found("route", route).with_error_code("route_read_not-found");
    let r = routings::Entity::find_by_id(route)
        .one(store.read())
        .await?
        .ok_or_else(not_found)?;
    let e = find(store, caller, r.endpoint)
        .await
        .map_err(|_| not_found())?;
    Ok((r, e))
}

/// Sets a route's share of the traffic (0 = none while others take it).
pub async fn set_traffic_ratio(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    route: Uuid,
    ratio: f64,
) -> ApiResult<()> {
    find_live(store, caller, id).await?;
    if !ratio.is_finite() || !(0.0..=1000.0).contains(&ratio) {
        return Err(invalid("traffic_ratio must be a number from 0 to 1000"));
    }
    let r = route_of(store, id, route).await?;
    let mut m = r.into_active_model();
    m.traffic_ratio = Set(ratio);
    m.update(store.db()).await?;
    Ok(())
}

/// Removes one replica (its session ends) and wants one fewer.
pub async fn remove_route(
    state: &impl Runtime,
    caller: &Caller,
    id: Uuid,
    route: Uuid,
) -> ApiResult<()> {
    use sea_orm::TransactionTrait;
    use sea_orm::sea_query::Expr;
    find_live(state, caller, id).await?;
    let r = route_of(state, id, route).await?;
    if r.status == route_status::PROVISIONING {
        return Err(invalid("Cannot remove route in PROVISIONING status"));
    }
    if r.status != route_status::HEALTHY && r.status != route_status::UNHEALTHY {
        return Err(invalid(format!(
            "Only a serving route can be removed (this one is {})",
            r.status
        )));
    }
    // The route leaves and one replica fewer is wanted in one step: the reconciler never
    // sees one without the other (it would start a replacement, or retire another).
    let txn = state.db().begin().await?;
    let left = routings::Entity::update_many()
        .col_expr(
            routings::Column::Status,
            Expr::value(route_status::TERMINATING),
        )
        .filter(routings::Column::Id.eq(route))
        .filter(routings::Column::Status.is_in([route_status::HEALTHY, route_status::UNHEALTHY]))
        .exec(&txn)
        .await?;
    if left.rows_affected == 0 {
        return Err(invalid("The route changed meanwhile: try again"));
    }
    endpoints::Entity::update_many()
        .col_expr(
            endpoints::Column::Replicas,
            Expr::cust("CASE WHEN replicas > 0 THEN replicas - 1 ELSE 0 END"),
        )
        .filter(endpoints::Column::Id.eq(id))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    let mut r = r;
    r.status = route_status::TERMINATING.into();
    reconcile::retire(state, r, "SERVICE_SCALED_DOWN").await
}

/// The routes that failed to start, with why (`GET /services/{id}/errors`).
pub async fn errors(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
) -> ApiResult<(Vec<routings::Model>, i32)> {
    let e = find(store, caller, id).await?;
    let failed = routes_of(store, id)
        .await?
        .into_iter()
        .filter(|r| r.status == route_status::FAILED_TO_START)
        .collect();
    Ok((failed, e.retries))
}

/// Forgets the routes that failed to start and the count of retries.
pub async fn clear_errors(store: &impl Store, caller: &Caller, id: Uuid) -> ApiResult<()> {
    let e = find(store, caller, id).await?;
    routings::Entity::delete_many()
        .filter(routings::Column::Endpoint.eq(id))
        .filter(routings::Column::Status.eq(route_status::FAILED_TO_START))
        .exec(store.db())
        .await?;
    let mut m = e.into_active_model();
    m.retries = Set(0);
    m.update(store.db()).await?;
    Ok(())
}

/// The most live tokens one endpoint may have.
pub const MAX_TOKENS_PER_ENDPOINT: usize = 256;

/// Issues a token for endpoint `id`, valid until `valid_until` (seconds since the epoch).
pub async fn issue_token(
    store: &impl Runtime,
    caller: &Caller,
    id: Uuid,
    valid_until: i64,
) -> ApiResult<(endpoint_tokens::Model, String)> {
    let e = find_live(store, caller, id).await?;
    let now = store.clock().now();
    if valid_until <= now.timestamp() {
        return Err(invalid("The token's expiry is in the past"));
    }
    if valid_until > now.timestamp() + tokens::MAX_LIFETIME_SECS {
        return Err(invalid("A token lives at most ten years"));
    }
    let valid = chrono::DateTime::from_timestamp(valid_until, 0)
        .ok_or_else(|| invalid("The token's expiry is out of range"))?;
    // Expired tokens go; live ones are bounded.
    endpoint_tokens::Entity::delete_many()
        .filter(endpoint_tokens::Column::Endpoint.eq(id))
        .filter(endpoint_tokens::Column::ValidUntil.lte(now))
        .exec(store.db())
        .await?;
    let live = tokens_of(store, id).await?;
    if live.len() >= MAX_TOKENS_PER_ENDPOINT {
        return Err(invalid(format!(
            "An endpoint may have at most {MAX_TOKENS_PER_ENDPOINT} live tokens: revoke some first"
        )));
    }
    let row = endpoint_tokens::ActiveModel {
        id: Set(Uuid::new_v4()),
        endpoint: Set(id),
        domain_name: Set(e.domain_name.clone()),
        project: Set(e.project),
        session_owner: Set(e.session_owner),
        created_at: Set(now),
        valid_until: Set(valid),
    }
    .insert(store.db())
    .await?;
    let token = token_of(&e, &row)?;
    store.serving_table().grant(id, row.id);
    Ok((row, token))
}

/// The token a row stands for, signed again with its endpoint's key.
pub fn token_of(e: &endpoints::Model, row: &endpoint_tokens::Model) -> ApiResult<String> {
    tokens::sign(
        &e.token_key,
        &tokens::Claims {
            jti: row.id,
            endpoint: e.id,
            user: row.session_owner,
            iat: row.created_at.timestamp(),
            exp: row.valid_until.timestamp(),
        },
    )
    .ok_or_else(|| ApiError::internal("signing a token", "the endpoint's key is unreadable"))
}

/// The live tokens of endpoint `id`, newest first.
pub async fn tokens_of(store: &impl Store, id: Uuid) -> ApiResult<Vec<endpoint_tokens::Model>> {
    Ok(endpoint_tokens::Entity::find()
        .filter(endpoint_tokens::Column::Endpoint.eq(id))
        .filter(endpoint_tokens::Column::ValidUntil.gt(store.clock().now()))
        .order_by_desc(endpoint_tokens::Column::CreatedAt)
        .all(store.read())
        .await?)
}

/// Whether token `id` of endpoint `endpoint` is live (a token issued through another manager
/// since this one's last refresh: checked once, then kept in the table).
pub async fn token_is_live(store: &impl Store, endpoint: Uuid, id: Uuid) -> ApiResult<bool> {
    Ok(endpoint_tokens::Entity::find_by_id(id)
        .filter(endpoint_tokens::Column::Endpoint.eq(endpoint))
        .filter(endpoint_tokens::Column::ValidUntil.gt(store.clock().now()))
        .one(store.read())
        .await?
        .is_some())
}

/// Revokes token `token` of endpoint `id`: the proxy refuses it from this manager's next
/// request, and every other manager's within a second.
pub async fn revoke_token(
    state: &impl Runtime,
    caller: &Caller,
    id: Uuid,
    token: Uuid,
) -> ApiResult<()> {
    find(state, caller, id).await?;
    let gone = endpoint_tokens::Entity::delete_many()
        .filter(endpoint_tokens::Column::Endpoint.eq(id))
        .filter(endpoint_tokens::Column::Id.eq(token))
        .exec(state.db())
        .await?;
    if gone.rows_affected == 0 {
        return Err(ApiError::not_found("token", token));
    }
    state.serving_table().revoke(id, token);
    Ok(())
}

/// Whether project `group` has endpoints that are not destroyed (a purge must wait).
pub async fn project_has_live_endpoints<C: sea_orm::ConnectionTrait>(
    db: &C,
    group: Uuid,
) -> ApiResult<bool> {
    Ok(endpoints::Entity::find()
        .filter(endpoints::Column::Project.eq(group))
        .filter(endpoints::Column::LifecycleStage.ne(stage::DESTROYED))
        .one(db)
        .await?
        .is_some())
}

/// Backend.AI's `Endpoint.status`, derived from the stage and the routes.
pub fn status_of(e: &endpoints::Model, routes: &[routings::Model]) -> &'static str {
    match e.lifecycle_stage.as_str() {
        stage::DESTROYED => return "DESTROYED",
        stage::DESTROYING => return "DESTROYING",
        _ => {}
    }
    let active: Vec<&routings::Model> = routes
        .iter()
        .filter(|r| route_status::ACTIVE.contains(&r.status.as_str()))
        .collect();
    if active.is_empty() {
        return if e.replicas == 0 {
            "READY"
        } else {
            "PROVISIONING"
        };
    }
    let healthy = active
        .iter()
        .filter(|r| r.status == route_status::HEALTHY)
        .count();
    let unhealthy = active
        .iter()
        .filter(|r| r.status == route_status::UNHEALTHY)
        .count();
    if healthy == active.len() && healthy >= usize::try_from(e.replicas).unwrap_or(0) {
        "HEALTHY"
    } else if unhealthy == active.len() {
        "UNHEALTHY"
    } else if healthy == 0 {
        "PROVISIONING"
    } else {
        "DEGRADED"
    }
}
