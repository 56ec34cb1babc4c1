//! The other `/session/{id}/…` calls Backend.AI's clients make: execute over HTTP, status
//! history, rename, directory listing, downloads, direct-access info. Parameters are read
//! as Backend.AI's managers up to 25.x did (and its clients of every version send them): from
//! the JSON body when there is one, else from the query string.
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::reply;
use super::session::{Named, OwnNamed};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The request's parameters: the JSON body's keys, then the query's for keys the body lacks
/// (a key repeated in the query becomes a list). `owner_access_key` is the extractor's.
fn params(query: Vec<(String, String)>, body: &Bytes) -> ApiResult<Map<String, Value>> {
    let mut out = if body.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(m)) => m,
            _ => {
                return Err(ApiError::bad_request(
                    "The request body must be a JSON object",
                ));
            }
        }
    };
    let mut from_query: Map<String, Value> = Map::new();
    for (k, v) in query {
        if k == "owner_access_key" || out.contains_key(&k) {
            continue;
        }
        match from_query.get_mut(&k) {
            Some(Value::Array(a)) => a.push(Value::String(v)),
            Some(first) => *first = json!([first.take(), v]),
            None => {
                from_query.insert(k, Value::String(v));
            }
        }
    }
    out.extend(from_query);
    Ok(out)
}

/// A request's parameters as [`params`] reads them (the extractor takes the body: last).
pub(super) struct Params(pub Map<String, Value>);

impl<S: Send + Sync> axum::extract::FromRequest<S> for Params {
    type Rejection = Response;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Response> {
        use axum::extract::FromRequestParts as _;
        let (mut parts, body) = req.into_parts();
        let Query(query) = Query::<Vec<(String, String)>>::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let bytes = Bytes::from_request(axum::extract::Request::from_parts(parts, body), state)
            .await
            .map_err(IntoResponse::into_response)?;
        params(query, &bytes)
            .map(Params)
            .map_err(crate::error::IntoProblem::into_response)
    }
}

pub(super) fn string(p: &Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| p.get(*k).and_then(Value::as_str).map(str::to_string))
}

/// `POST /session/{id}`: Backend.AI's execute over HTTP. `query`/`batch` start a run,
/// `continue` reads on, `input` writes to its standard input; each answer holds the output
/// since the previous one, `finished` (with `exitCode`) once it ended, else `continued`.
pub(super) async fn execute(
    State(state): State<AppState>,
    OwnNamed(s): OwnNamed,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let mode = string(&p, &["mode"]).ok_or_else(|| {
                ApiError::bad_request("'mode' is required (query, batch, continue or input)")
            })?;
            let code = string(&p, &["code"]).unwrap_or_default();
            let run_id = string(&p, &["runId", "run_id"]).filter(|r| !r.is_empty());
            let run = match mode.as_str() {
                "query" | "batch" => {
                    let options = p.get("options").cloned().unwrap_or_else(|| json!({}));
                    crate::sessions::exec::start(&state, &s, &mode, &code, &options).await?
                }
                "continue" | "input" => {
                    let id = run_id.as_deref().ok_or_else(|| {
                        ApiError::bad_request(format!("mode '{mode}' needs the runId of a run"))
                    })?;
                    let found = match id.parse::<Uuid>() {
                        Ok(run_id) => crate::sessions::exec::find(&state, run_id).await?,
                        Err(_) => None,
                    };
                    let run = found
                        .filter(|r| r.session_id == s.id)
                        .ok_or_else(|| ApiError::not_found("execution run", id))?;
                    if mode == "input" {
                        run.send_input(&state, &code).await?;
                    }
                    run
                }
                "complete" => {
                    return Err(ApiError::bad_request(
                        "Code completion is not supported by this server",
                    ));
                }
                other => {
                    return Err(ApiError::bad_request(format!(
                        "unknown execution mode '{other}' (query, batch, continue or input)"
                    )));
                }
            };
            let (chunks, finished, exit_code) =
                run.poll(&state, std::time::Duration::from_secs(2)).await?;
            let mut console: Vec<(&'static str, String)> = Vec::new();
            for c in chunks.into_iter().filter(|c| c.stream != "finished") {
                super::stream::add_to_console(&mut console, c.stream, c.data);
            }
            Ok(axum::Json(json!({"result": {
                "runId": run.id,
                "status": if finished { "finished" } else { "continued" },
                "exitCode": if finished { exit_code } else { None },
                "console": super::stream::console_json(console),
                "options": null,
                "files": [],
            }}))
            .into_response())
        }
        .await,
    )
}

/// `GET /session/{id}/status-history`: `{"result": {"PENDING": time, …}}`.
pub(super) async fn status_history(Named(s): Named) -> Response {
    axum::Json(json!({"result": s.status_history})).into_response()
}

/// `POST /session/{id}/rename` with `name` (or `session_name`, `clientSessionToken`) in
/// the body or the query: 204.
pub(super) async fn rename(
    State(state): State<AppState>,
    OwnNamed(s): OwnNamed,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let name = string(&p, &["name", "session_name", "clientSessionToken"])
                .ok_or_else(|| ApiError::bad_request("'name' (the new name) is required"))?;
            crate::sessions::rename(&state, s.id, &name).await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        .await,
    )
}

/// `GET /session/{id}/files` with `path` (relative to /home/work): Backend.AI's answer, the
/// entries as a JSON-encoded string in `files`.
pub(super) async fn list_files(
    State(state): State<AppState>,
    OwnNamed(s): OwnNamed,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let path = string(&p, &["path"]).unwrap_or_else(|| ".".into());
            let (abspath, entries, errors) =
                crate::sessions::files::list(&state, &s, &path).await?;
            let files = serde_json::to_string(&entries)
                .map_err(|e| ApiError::internal("listing files", e))?;
            Ok(
                axum::Json(json!({"files": files, "errors": errors, "abspath": abspath}))
                    .into_response(),
            )
        }
        .await,
    )
}

/// The paths a download names: `files` as a list or repeated, one path per entry.
pub(super) fn file_list(p: &Map<String, Value>, key: &str) -> Vec<String> {
    match p.get(key) {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// `GET|POST /session/{id}/download` with `files`: a `multipart/mixed` answer, one tar
/// archive per path, in order (what the official client unpacks).
pub(super) async fn download(
    State(state): State<AppState>,
    OwnNamed(s): OwnNamed,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let archives =
                crate::sessions::files::download(&state, &s, &file_list(&p, "files")).await?;
            let boundary = format!("bai-{}", Uuid::new_v4().simple());
            let mut out = Vec::new();
            for (_, tar) in archives {
                out.extend_from_slice(
                    format!(
                        "--{boundary}\r\nContent-Type: application/octet-stream\r\nContent-Encoding: identity\r\nContent-Length: {}\r\n\r\n",
                        tar.len()
                    )
                    .as_bytes(),
                );
                out.extend_from_slice(&tar);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
            let content_type = HeaderValue::from_str(&format!(
                "multipart/mixed; boundary={boundary}"
            ))
            .map_err(|e| ApiError::internal("answering a download", e))?;
            Ok(([(header::CONTENT_TYPE, content_type)], out).into_response())
        }
        .await,
    )
}

/// `GET|POST /session/{id}/download_single` with `file`: the file's bytes.
pub(super) async fn download_single(
    State(state): State<AppState>,
    OwnNamed(s): OwnNamed,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let file =
                string(&p, &["file"]).ok_or_else(|| ApiError::bad_request("'file' is required"))?;
            let data = crate::sessions::files::read_one(&state, &s, &file).await?;
            Ok((
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/octet-stream"),
                )],
                data,
            )
                .into_response())
        }
        .await,
    )
}

/// `GET /session/{id}/dependency-graph`: the session and, nested under `depends_on`, the
/// sessions it waits for, with the keys and value formats the official CLI's `show-graph`
/// parses (Python's renderings of the status and time).
pub(super) async fn dependency_graph(State(state): State<AppState>, Named(s): Named) -> Response {
    reply(
        async {
            let mut budget = 1000usize;
            Ok(axum::Json(graph_node(&state, s, &mut budget, 0).await?).into_response())
        }
        .await,
    )
}

/// How deep the graph is followed: a long chain of dependencies is cut there, never a deep
/// recursion.
const GRAPH_DEPTH: usize = 32;

fn graph_node<'a>(
    state: &'a AppState,
    s: entity::sessions::Model,
    budget: &'a mut usize,
    depth: usize,
) -> futures_util::future::BoxFuture<'a, ApiResult<Value>> {
    Box::pin(async move {
        let mut depends_on = Vec::new();
        for depends in crate::sessions::dependency_ids(&state.read, s.id).await? {
            // Dependencies form no cycle (each named an existing session); the budget bounds
            // a very wide graph all the same.
            if *budget == 0 || depth >= GRAPH_DEPTH {
                break;
            }
            *budget -= 1;
            if let Some(d) = crate::sessions::find(&state.read, depends).await? {
                depends_on.push(graph_node(state, d, budget, depth + 1).await?);
            }
        }
        Ok(json!({
            "session_id": s.id,
            "session_name": s.name,
            "status": format!("KernelStatus.{}", s.status.as_str()),
            "status_changed": s.status_changed.format("%Y-%m-%d %H:%M:%S%.6f+00:00").to_string(),
            "depends_on": depends_on,
        }))
    })
}

/// `GET /session/{id}/direct-access-info`: Backend.AI answers `{}` for every session but its
/// system (private) ones, which bai does not have.
pub(super) async fn direct_access_info(Named(_s): Named) -> Response {
    axum::Json(json!({})).into_response()
}

/// `POST /session/{id}/commit`: commits the session's main container (its changes and
/// `/home/work`) to an image of the caller's named after the session, as a background task
/// (Backend.AI commits to a tar file on the agent's host; bai makes the image, as
/// `imagify` does). `201` with the task (`bgtask_id`, `task_id`) and the kernel.
pub(super) async fn commit(
    State(state): State<AppState>,
    axum::Extension(principal): axum::Extension<crate::auth::Principal>,
    OwnNamed(s): OwnNamed,
) -> Response {
    reply(
        async {
            let caller = super::caller(&principal)?;
            let started = crate::sessions::commit::start(&state, caller, &s, None).await?;
            Ok((
                StatusCode::CREATED,
                axum::Json(json!({
                    "bgtask_id": started.task_id,
                    "task_id": started.task_id,
                    "kernel": started.kernel_id,
                    "path": null,
                })),
            )
                .into_response())
        }
        .await,
    )
}

/// `GET /session/{id}/commit`: `ongoing` while a commit of the session runs, else `ready`.
pub(super) async fn commit_status(
    State(state): State<AppState>,
    OwnNamed(s): OwnNamed,
) -> Response {
    reply(
        async {
            let (status, kernel) = crate::sessions::commit::status(&state, &s).await?;
            Ok(axum::Json(json!({"status": status, "kernel": kernel})).into_response())
        }
        .await,
    )
}

/// `POST /session/{id}/imagify` with `image_name` (and Backend.AI's `image_visibility`, of
/// which `user` is the one there is): commits the session to an image of the caller's under
/// that name; answers the background task's id at once.
pub(super) async fn imagify(
    State(state): State<AppState>,
    axum::Extension(principal): axum::Extension<crate::auth::Principal>,
    OwnNamed(s): OwnNamed,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let caller = super::caller(&principal)?;
            let name = string(&p, &["image_name", "imageName"])
                .ok_or_else(|| ApiError::bad_request("'image_name' is required"))?;
            if let Some(v) = string(&p, &["image_visibility", "imageVisibility"])
                && v != "user"
            {
                return Err(ApiError::bad_request(format!(
                    "Unsupported image visibility '{v}': committed images belong to a user"
                )));
            }
            let started = crate::sessions::commit::start(&state, caller, &s, Some(&name)).await?;
            Ok(axum::Json(json!({"task_id": started.task_id})).into_response())
        }
        .await,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_come_from_the_body_else_the_query() {
        let q = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect::<Vec<_>>()
        };
        let p = params(
            q(&[("name", "x"), ("owner_access_key", "AK")]),
            &Bytes::new(),
        )
        .unwrap();
        assert_eq!(p.get("name"), Some(&json!("x")));
        assert!(!p.contains_key("owner_access_key"));
        let p = params(
            q(&[("name", "q")]),
            &Bytes::from_static(b"{\"name\": \"b\"}"),
        )
        .unwrap();
        assert_eq!(p.get("name"), Some(&json!("b")), "the body wins");
        let p = params(
            q(&[("files", "a"), ("files", "b"), ("files", "c")]),
            &Bytes::new(),
        )
        .unwrap();
        assert_eq!(file_list(&p, "files"), ["a", "b", "c"]);
        assert!(params(Vec::new(), &Bytes::from_static(b"[1]")).is_err());
    }
}
