//! `/session…`: create (Backend.AI's body and its aliases, waiting like the manager does),
//! info, destroy, logs and uploads; sessions named by UUID or by name.

use std::time::Duration;

use axum::extract::{Multipart, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use entity::enums::{SessionStatus, SessionType};
use entity::sessions;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::{Caller, Principal};
use crate::error::IntoProblem as _;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

use super::{caller, reply};

#[derive(Deserialize, Default)]
pub(crate) struct OwnerQuery {
    owner_access_key: Option<String>,
}

/// The keypair whose sessions a name refers to (the service's rule; the event stream names it
/// too).
pub(crate) use crate::sessions::owner_key;

/// `{id}` is a session's UUID or its name; names pick the caller's (or, for admins with
/// `owner_access_key`, that keypair's) most recent session, live ones first.
async fn find_session(
    state: &AppState,
    caller: &Caller,
    key: &str,
    owner_access_key: Option<&str>,
) -> ApiResult<sessions::Model> {
    if let Ok(id) = key.parse::<Uuid>() {
        return crate::sessions::find_visible(state, caller, id).await;
    }
    crate::sessions::find_named(&state.read, caller, key, owner_access_key).await
}

fn principal_of(parts: &axum::http::request::Parts) -> Principal {
    parts
        .extensions
        .get::<Principal>()
        .cloned()
        .unwrap_or(Principal::Anonymous)
}

/// The session a `/session/{id}/…` request names (UUID or name, `owner_access_key` for
/// admins), resolved for the request's caller.
pub(crate) struct Named(pub sessions::Model);

impl axum::extract::FromRequestParts<AppState> for Named {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<Self, Response> {
        let Path(id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let Query(q) = Query::<OwnerQuery>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let principal = principal_of(parts);
        let caller = caller(&principal).map_err(crate::error::IntoProblem::into_response)?;
        find_session(state, caller, &id, q.owner_access_key.as_deref())
            .await
            .map(Named)
            .map_err(crate::error::IntoProblem::into_response)
    }
}

/// As [`Named`], for what only the owner (or a superadmin) may do inside a session:
/// uploads and code execution. Others get the same NOT_FOUND as for no session at all.
pub(crate) struct OwnNamed(pub sessions::Model);

impl axum::extract::FromRequestParts<AppState> for OwnNamed {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<Self, Response> {
        let Named(s) = Named::from_request_parts(parts, state).await?;
        let principal = principal_of(parts);
        let caller = caller(&principal).map_err(crate::error::IntoProblem::into_response)?;
        if !crate::sessions::works_inside(caller, &s) {
            return Err(ApiError::not_found("session", s.id).into_response());
        }
        Ok(OwnNamed(s))
    }
}

fn image_of(s: &sessions::Model) -> String {
    s.images
        .as_array()
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// How long a batch session's creation waits after it runs for the job's end: Backend.AI's
/// manager reads the kernel's status 0.5 s after RUNNING; bai waits up to 2 s, so that a job
/// that ends at once answers its end on a busy host too (a longer job answers RUNNING; never
/// past `maxWaitSeconds`).
const BATCH_SETTLE: Duration = Duration::from_secs(2);

/// `POST /session`: creates a session (Backend.AI's body, camelCase and its aliases) and,
/// unless `enqueueOnly`, waits until it runs, ends, or `maxWaitSeconds` pass (`TIMEOUT`).
pub(super) async fn create(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<Value>,
) -> Response {
    reply(create_inner(&state, &principal, body).await)
}

/// `POST /session/_/create-from-template`: the template's settings with the request's keys
/// over them (`template_id` names a template the caller may see), then as `POST /session`.
pub(super) async fn create_from_template(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<Value>,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let raw = crate::sessions::body::text(body.get("template_id"))
                .or_else(|| crate::sessions::body::text(body.get("templateId")))
                .ok_or_else(|| ApiError::bad_request("'template_id' is required"))?;
            let id = raw
                .parse::<Uuid>()
                .map_err(|_| ApiError::not_found("session template", &raw))?;
            let merged = crate::templates::creation_body(&state, caller, id, &body).await?;
            create_inner(&state, &principal, merged).await
        }
        .await,
    )
}

/// Who a creation acts as: the caller, or with `owner_access_key` (administrators only, as in
/// Backend.AI) the owner of that keypair, whom the caller must govern: a keypair it may not
/// see is NOT_FOUND, an inactive one too.
async fn acting_as(state: &AppState, caller: &Caller, body: &Value) -> ApiResult<Caller> {
    let owner_access_key = crate::sessions::body::text(body.get("owner_access_key"));
    crate::sessions::acting_as(&state.read, caller, owner_access_key.as_deref()).await
}

async fn create_inner(state: &AppState, principal: &Principal, body: Value) -> ApiResult<Response> {
    let acting = acting_as(state, caller(principal)?, &body).await?;
    let caller = &acting;
    let req = crate::sessions::body::creation_request(caller, &body)?;
    let flag = |k: &str, default: bool| body.get(k).and_then(Value::as_bool).unwrap_or(default);
    let enqueue_only = flag("enqueueOnly", false);
    let reuse = flag("reuseIfExists", true);
    let max_wait = body
        .get("maxWaitSeconds")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    // An existing live session of the same name: reused when it runs the same image.
    if let Some(n) = &req.name
        && let Some(s) = crate::sessions::live_named(&state.read, caller, n).await?
    {
        let wanted = crate::images::resolve_for(&state.read, caller, &req.image, None).await?;
        if reuse && image_of(&s) == wanted.name {
            return Ok((
                StatusCode::CREATED,
                Json(created_body(state, &s, false).await),
            )
                .into_response());
        }
        return Err(ApiError::conflict(format!(
            "A session named '{n}' already exists (id {}); choose another name",
            s.id
        )));
    }
    // Listen before creating, so no status change slips by.
    let events = state.shared.events.stream();
    let created = crate::sessions::create(state, caller, req).await?;
    let s = created
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::internal("creating a session", "nothing created"))?;
    if enqueue_only {
        return Ok((
            StatusCode::CREATED,
            Json(created_body(state, &s, true).await),
        )
            .into_response());
    }
    // Only this session's status events wake the wait (a safety recheck every few seconds).
    let id = s.id;
    let mut mine = std::pin::pin!(events.filter(move |ev| std::future::ready(
        matches!(&**ev, crate::events::Event::Session(e) if e.session_id == id)
    )));
    let deadline =
        (max_wait > 0).then(|| tokio::time::Instant::now() + Duration::from_secs(max_wait));
    // As Backend.AI's manager: the answer comes once the session runs (a batch job too: its
    // end is `session_success` / `session_failure` on the event stream, with the exit code;
    // the official CLI takes TERMINATED here for a broken image), or has already ended.
    loop {
        let mut now = crate::lookup::get::<sessions::Entity>(&state.read, "session", s.id).await?;
        if now.status == SessionStatus::Running || now.status.is_over() {
            // Backend.AI's manager answers the main kernel's status half a second after it
            // ran: a batch job that ends at once answers its end (TERMINATING or TERMINATED),
            // as Lablup's tester expects. Only batch sessions wait (an interactive one keeps
            // running), and only until their status changes (`BATCH_SETTLE` at most, never
            // past the caller's `maxWaitSeconds`).
            let cap = tokio::time::Instant::now() + BATCH_SETTLE;
            let settle = deadline.map_or(cap, |d| d.min(cap));
            while now.status == SessionStatus::Running && now.session_type == SessionType::Batch {
                let Ok(Some(_)) = tokio::time::timeout_at(settle, mine.next()).await else {
                    break;
                };
                now = crate::lookup::get::<sessions::Entity>(&state.read, "session", s.id).await?;
            }
            return Ok((
                StatusCode::CREATED,
                Json(created_body(state, &now, true).await),
            )
                .into_response());
        }
        let wait = async {
            // Waiting is a courtesy: after 5 s the caller gets the state as it is (timing out is fine).
            let _ = tokio::time::timeout(Duration::from_secs(5), mine.next()).await;
        };
        match deadline {
            Some(d) => {
                if tokio::time::timeout_at(d, wait).await.is_err() {
                    let mut b = created_body(state, &now, true).await;
                    b["status"] = json!("TIMEOUT");
                    return Ok((StatusCode::CREATED, Json(b)).into_response());
                }
            }
            None => wait.await,
        }
    }
}

async fn created_body(state: &AppState, s: &sessions::Model, created: bool) -> Value {
    // The answer goes out without the ports rather than not at all; the error is logged.
    let (ports, exit_code) = match crate::sessions::main_kernel(&state.read, s.id).await {
        Ok(k) => (
            crate::sessions::apps::apps(k.service_ports.as_str().unwrap_or_default()),
            k.exit_code,
        ),
        Err(e) => {
            crate::error::leaving(e);
            (Vec::new(), None)
        }
    };
    let ports: Vec<Value> = ports
        .into_iter()
        .map(|p| json!({"name": p.name, "protocol": p.protocol, "ports": p.container_port.into_iter().collect::<Vec<_>>()}))
        .collect();
    json!({
        "sessionId": s.id,
        "sessionName": s.name,
        "status": s.status.as_str(),
        "servicePorts": ports,
        "created": created,
        "exitCode": exit_code,
        "statusInfo": s.status_info,
        "result": s.result.as_str(),
    })
}

/// `GET /session/{id}`: the session's details, Backend.AI's camelCase keys.
pub(super) async fn info(State(state): State<AppState>, Named(s): Named) -> Response {
    reply(
        async {
            let k = crate::sessions::main_kernel(&state.read, s.id)
                .await
                .map_err(crate::error::leaving)
                .ok();
            let age = (state.clock.now() - s.created_at).num_milliseconds().max(0);
            Ok(Json(json!({
                "sessionId": s.id,
                "sessionName": s.name,
                "domainName": s.domain_name,
                "groupId": s.group_id,
                "userId": s.user_uuid,
                "image": image_of(&s),
                "lang": image_of(&s),
                "type": s.session_type.as_str(),
                "tag": s.tag,
                "containerId": k.as_ref().and_then(|k| k.container_id.clone()),
                "occupiedSlots": s.occupying_slots,
                "occupyingSlots": s.occupying_slots,
                "requestedSlots": s.requested_slots,
                "environ": s.environ,
                "resourceOpts": s.resource_opts,
                "status": s.status.as_str(),
                "statusInfo": s.status_info,
                "statusData": s.status_data,
                "age": age,
                "creationTime": s.created_at.to_rfc3339(),
                "terminationTime": s.terminated_at.map(|t| t.to_rfc3339()),
                "numQueriesExecuted": s.num_queries,
                "lastStat": s.last_stat,
                "result": s.result.as_str(),
            }))
            .into_response())
        }
        .await,
    )
}

#[derive(Deserialize, Default)]
pub(crate) struct DestroyQuery {
    recursive: Option<String>,
}

/// `DELETE /session/{id}`: terminates it (a pending one is cancelled); with `recursive`, the
/// sessions that depend on it first. Backend.AI's answer: `{"stats": {"status": "cancelled"
/// | "terminated"}}` (the official CLI's `--stats` reads `status`).
pub(super) async fn destroy(
    State(state): State<AppState>,
    Named(s): Named,
    Query(q): Query<DestroyQuery>,
) -> Response {
    reply(
        async {
            if q.recursive
                .as_deref()
                .is_some_and(|r| matches!(r, "true" | "1" | "yes"))
            {
                for d in crate::sessions::dependents(&state, s.id).await? {
                    match crate::sessions::terminate(&state, d, "user-requested").await {
                        // Ended meanwhile: nothing left to do for it.
                        Err(e) if e.code == crate::error::ErrorCode::BadRequest => {}
                        other => drop(other?),
                    }
                }
            }
            let done = crate::sessions::terminate(&state, s.id, "user-requested").await?;
            let status = if done.status == SessionStatus::Cancelled {
                "cancelled"
            } else {
                "terminated"
            };
            Ok(Json(json!({"stats": {"status": status}})).into_response())
        }
        .await,
    )
}

/// `GET /session/{id}/logs` → `{"result": {"logs": …}}`.
pub(super) async fn logs(State(state): State<AppState>, Named(s): Named) -> Response {
    reply(
        async {
            let logs = crate::sessions::logs(&state, s.id).await?;
            Ok(Json(json!({"result": {"logs": logs}})).into_response())
        }
        .await,
    )
}

/// A path under /home/work from an upload's file name: relative, no `..`.
/// aiohttp (the official client) percent-encodes the file name of a multipart part
/// (`data%2Finput.csv`), as aiohttp's server decodes it; decoded first, then checked.
fn upload_path(name: &str) -> ApiResult<String> {
    let name = percent_encoding::percent_decode_str(name)
        .decode_utf8_lossy()
        .into_owned();
    let bad = || {
        ApiError::bad_request(format!(
            "Invalid upload path '{name}': use a relative path under /home/work"
        ))
    };
    if name.starts_with('/') {
        return Err(bad());
    }
    let path = crate::sessions::files::work_path(&name).map_err(|_| bad())?;
    match path.strip_prefix("/home/work/") {
        Some(rel) => Ok(rel.to_string()),
        None => Err(bad()),
    }
}

/// Largest upload through `/session/{id}/upload` (files go into the container in one piece).
pub(super) const MAX_UPLOAD: usize = 64 * 1024 * 1024;

/// `POST /session/{id}/upload`: multipart parts named `src`, file name = path under
/// /home/work.
pub(super) async fn upload(
    State(state): State<AppState>,
    OwnNamed(s): OwnNamed,
    mut form: Multipart,
) -> Response {
    reply(
        async {
            if s.status != SessionStatus::Running {
                return Err(ApiError::bad_request(format!(
                    "Session '{}' is not running ({})",
                    s.name, s.status
                )));
            }
            let k = crate::sessions::main_kernel(&state.read, s.id).await?;
            let (agent, container) = crate::sessions::container_of(&state, &k).await?;
            let mut files: Vec<(String, Vec<u8>)> = Vec::new();
            let mut total = 0usize;
            while let Some(field) = form
                .next_field()
                .await
                .map_err(|e| ApiError::bad_request(format!("malformed upload: {e}")))?
            {
                let Some(name) = field.file_name().map(str::to_string) else {
                    continue;
                };
                let path = upload_path(&name)?;
                let data = field
                    .bytes()
                    .await
                    .map_err(|e| ApiError::bad_request(format!("malformed upload: {e}")))?;
                total += data.len();
                if total > MAX_UPLOAD {
                    return Err(ApiError::bad_request(
                        "Uploads through a session are limited to 64 MiB; use a storage folder",
                    ));
                }
                files.push((path, data.to_vec()));
            }
            if files.is_empty() {
                return Err(ApiError::bad_request("No file in the upload (part 'src')"));
            }
            let entries: Vec<(&str, u32, &[u8])> = files
                .iter()
                .map(|(p, d)| (p.as_str(), 0o644, d.as_slice()))
                .collect();
            agent
                .put_files(&container, "/home/work", "", &entries)
                .await?;
            crate::sessions::exec::touch(&state, s.id).await;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        .await,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn upload_paths() {
        assert_eq!(super::upload_path("./myscript.py").unwrap(), "myscript.py");
        assert_eq!(super::upload_path("src/a.py").unwrap(), "src/a.py");
        assert!(super::upload_path("../x").is_err());
        assert!(super::upload_path("/etc/passwd").is_err());
        assert!(super::upload_path("a/../../b").is_err());
        assert!(super::upload_path("").is_err());
        assert_eq!(
            super::upload_path("data%2Fin%20put.csv").unwrap(),
            "data/in put.csv"
        );
        assert!(
            super::upload_path("%2E%2E%2Fx").is_err(),
            "decoded before it is checked"
        );
        assert!(super::upload_path("%2Fetc%2Fpasswd").is_err());
    }
}
