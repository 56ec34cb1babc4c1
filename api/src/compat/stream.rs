//! The execute WebSocket (`/stream/session/{id}/execute`, what `backend.ai run` talks to) and
//! the session event stream (`/events/session`, Server-Sent Events with Backend.AI's names).
use std::convert::Infallible;
use std::time::Duration;

use axum::Extension;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{OwnNamed, caller};
use crate::auth::Principal;
use crate::error::IntoProblem as _;
use crate::events::Event;
use crate::state::AppState;

/// `GET /stream/session/{id}/execute`: the client sends `{"code","mode","options"}`; the
/// server answers with `{"status": "continued", "console": [[stream, text]]}` frames while
/// the program runs and `{"status": "finished", "exitCode": N}` at the end. Output is sent
/// [`FLUSH`] after it began (as Backend.AI's manager flushes a run's results), so a program
/// that ends at once answers in one `finished` frame with its console. Text frames the
/// client sends meanwhile go to the program's standard input.
pub async fn execute(
    State(state): State<AppState>,
    OwnNamed(session): OwnNamed,
    upgrade: WebSocketUpgrade,
) -> Response {
    upgrade.on_upgrade(move |ws| async move {
        if let Err(e) = run_over_ws(state, session, ws).await {
            tracing::debug!(error = %e, "execute stream ended");
        }
    })
}

/// How long output gathers before it is sent.
const FLUSH: std::time::Duration = std::time::Duration::from_millis(200);

/// The most output gathered before it is sent at once (whatever `FLUSH` says): a program
/// writing fast never piles up more than this per connection, and waits on the reader again.
const FLUSH_BYTES: usize = 64 * 1024;

/// Adds a piece of output to a console: consecutive pieces of one stream are one record (as
/// Backend.AI's agent merges them); the client knows `stdout` and `stderr` only, so anything
/// else (a gap notice) goes to stderr.
pub(super) fn add_to_console(
    console: &mut Vec<(&'static str, String)>,
    stream: &str,
    data: String,
) {
    let stream = if stream == "stdout" {
        "stdout"
    } else {
        "stderr"
    };
    match console.last_mut() {
        Some((last, text)) if *last == stream => text.push_str(&data),
        _ => console.push((stream, data)),
    }
}

pub(super) fn console_json(console: Vec<(&'static str, String)>) -> Vec<Value> {
    console.into_iter().map(|(k, v)| json!([k, v])).collect()
}

fn frame(status: &str, console: Vec<Value>, exit_code: Option<i64>) -> Message {
    Message::text(
        json!({
            "status": status,
            "console": console,
            "exitCode": exit_code,
            "options": {},
            "files": [],
        })
        .to_string(),
    )
}

async fn run_over_ws(
    state: AppState,
    session: entity::sessions::Model,
    ws: WebSocket,
) -> Result<(), String> {
    let (mut tx, mut rx) = ws.split();
    let request: Value = loop {
        match rx.next().await {
            Some(Ok(Message::Text(t))) => {
                break serde_json::from_str(t.as_str()).map_err(|e| e.to_string())?;
            }
            Some(Ok(Message::Close(_))) | None => return Ok(()),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(e.to_string()),
        }
    };
    let mode = request
        .get("mode")
        .and_then(Value::as_str)
        .unwrap_or("query");
    let code = request.get("code").and_then(Value::as_str).unwrap_or("");
    let options = request.get("options").cloned().unwrap_or_else(|| json!({}));
    let run = match crate::sessions::exec::start(&state, &session, mode, code, &options).await {
        Ok(r) => r,
        Err(e) => {
            let msg = format!("{}\n", crate::error::leaving(e).message);
            // The client may be gone already; then there is nobody to tell.
            let _ = tx
                .send(frame("finished", vec![json!(["stderr", msg])], Some(-1)))
                .await;
            return Ok(());
        }
    };
    let mut output = run.follow(&state);
    let stopping = state.shutdown.clone();
    // Output gathered since the last frame, and when it is due.
    let mut console: Vec<(&'static str, String)> = Vec::new();
    let mut due: Option<tokio::time::Instant> = None;
    loop {
        let flush = async {
            match due {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stopping.cancelled() => {
                // Shutting down: a client already gone needs no goodbye.
                let _ = tx.send(crate::terminal::going_away()).await;
                return Ok(());
            }
            () = flush => {
                due = None;
                let sent = console_json(std::mem::take(&mut console));
                tx.send(frame("continued", sent, None))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            c = output.next() => {
                let Some(c) = c else {
                    // The output ended without its end: what was gathered still goes out.
                    if !console.is_empty() {
                        let sent = console_json(std::mem::take(&mut console));
                        tx.send(frame("continued", sent, None)).await.map_err(|e| e.to_string())?;
                    }
                    return Ok(());
                };
                if c.stream == "finished" {
                    let sent = console_json(std::mem::take(&mut console));
                    tx.send(frame("finished", sent, c.exit_code)).await.map_err(|e| e.to_string())?;
                    // Closing a connection the client already closed is not an error worth reporting.
                    let _ = tx.close().await;
                    return Ok(());
                }
                add_to_console(&mut console, c.stream, c.data);
                if console.iter().map(|(_, t)| t.len()).sum::<usize>() >= FLUSH_BYTES {
                    due = None;
                    let sent = console_json(std::mem::take(&mut console));
                    tx.send(frame("continued", sent, None)).await.map_err(|e| e.to_string())?;
                } else {
                    due.get_or_insert_with(|| tokio::time::Instant::now() + FLUSH);
                }
            }
            msg = rx.next() => match msg {
                Some(Ok(Message::Text(t))) => {
                    let mut line = t.as_str().to_string();
                    if !line.ends_with('\n') {
                        line.push('\n');
                    }
                    if let Err(e) = run.send_input(&state, &line).await {
                        tracing::debug!(error = %e.message, cause = %e.chain(), "input after the end");
                    }
                }
                Some(Ok(Message::Close(_))) | None => return Ok(()),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.to_string()),
            },
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct EventsQuery {
    session_name: Option<String>,
    name: Option<String>,
    session_id: Option<String>,
    #[serde(rename = "owner_access_key")]
    owner_access_key: Option<String>,
    #[serde(rename = "ownerAccessKey")]
    owner_access_key_camel: Option<String>,
    /// `*` (default), `session`, `kernel`, or both comma-separated.
    scope: Option<String>,
}

/// Which sessions a stream follows.
enum Follow {
    Every,
    Id(Uuid),
    /// Backend.AI treats a name as a filter: the session need not exist yet.
    Named {
        name: String,
        access_key: String,
    },
}

/// `GET /events/session?sessionName=|name=|sessionId=[&ownerAccessKey=][&scope=]`: Server-Sent
/// Events, named and shaped as Backend.AI's (`session_started`, `kernel_started`, …), for the
/// sessions the caller may see: every one (`*`), one by id, or those of a name (and owner) —
/// which may be created after the stream opened.
pub async fn session_events(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Query(q): Query<EventsQuery>,
) -> Response {
    let caller = match caller(&principal) {
        Ok(c) => c.clone(),
        Err(e) => return e.into_response(),
    };
    let (mut sessions, mut kernels) = (false, false);
    for part in q.scope.as_deref().unwrap_or("*").split(',') {
        match part.trim() {
            "*" => (sessions, kernels) = (true, true),
            "session" => sessions = true,
            "kernel" => kernels = true,
            other => {
                return crate::error::ApiError::bad_request(format!(
                    "scope must be *, session, kernel or both comma-separated, not '{other}'"
                ))
                .into_response();
            }
        }
    }
    let owner = q
        .owner_access_key
        .clone()
        .or(q.owner_access_key_camel.clone());
    let id = match q.session_id.as_deref() {
        Some(raw) => match raw.parse::<Uuid>() {
            Ok(id) => Some(id),
            Err(_) => {
                return crate::error::ApiError::bad_request("sessionId is not a UUID")
                    .into_response();
            }
        },
        // An id given as the name (older clients) is an id.
        None => q
            .session_name
            .as_deref()
            .or(q.name.as_deref())
            .and_then(|n| n.parse::<Uuid>().ok()),
    };
    let follow = match (id, q.session_name.clone().or(q.name.clone())) {
        (Some(id), _) => match crate::sessions::find_visible(&state, &caller, id).await {
            Ok(s) => Follow::Id(s.id),
            Err(e) => return e.into_response(),
        },
        (None, None) => Follow::Every,
        (None, Some(n)) if n == "*" => Follow::Every,
        (None, Some(name)) => match super::session::owner_key(&caller, owner.as_deref()) {
            Ok(access_key) => Follow::Named { name, access_key },
            Err(e) => return e.into_response(),
        },
    };
    let slot = match live_slot(&state, &caller) {
        Ok(slot) => slot,
        Err(e) => return e.into_response(),
    };
    let for_events = state.clone();
    let follow = std::sync::Arc::new(follow);
    let topic = crate::sessions::session_topic(&caller);
    let stream = state
        .shared
        .events
        .stream_topic(topic)
        .filter_map(move |ev| {
            let (state, caller, follow) = (for_events.clone(), caller.clone(), follow.clone());
            async move {
                let Event::Session(e) = &*ev else {
                    return None;
                };
                let followed = match &*follow {
                    Follow::Every => true,
                    Follow::Id(id) => *id == e.session_id,
                    Follow::Named { name, access_key } => {
                        *name == e.name && *access_key == e.access_key
                    }
                };
                let in_scope = if e.event.starts_with("kernel_") {
                    kernels
                } else {
                    sessions
                };
                if !followed
                    || !in_scope
                    || !bai_types::events::BACKEND_AI_SESSION_EVENTS.contains(&e.event)
                    || !crate::sessions::sees(&state, &caller, e).await
                {
                    return None;
                }
                let mut data = json!({
                    "reason": e.reason.clone().unwrap_or_default(),
                    "sessionName": e.name,
                    "ownerAccessKey": e.access_key,
                    "sessionId": e.session_id,
                    "exitCode": e.exit_code,
                });
                if let (Some(k), Some(o)) = (e.kernel, data.as_object_mut()) {
                    o.insert("kernelId".into(), json!(k.id));
                    o.insert("clusterRole".into(), json!(k.role.as_str()));
                    o.insert("clusterIdx".into(), json!(k.idx));
                }
                Some(Ok::<_, Infallible>(
                    SseEvent::default().event(e.event).data(data.to_string()),
                ))
            }
        });
    // At shutdown the stream ends with an event that says so.
    let stopping = state.shutdown.clone();
    let farewell = futures_util::stream::once(async {
        Ok::<_, Infallible>(
            SseEvent::default()
                .event("server_shutdown")
                .data(json!({"reason": "the server is shutting down"}).to_string()),
        )
    });
    let stream = stream
        .take_until(stopping.cancelled_owned())
        .chain(farewell)
        .map(move |e| {
            let _held = &slot;
            e
        });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

#[derive(Deserialize)]
pub struct TaskQuery {
    task_id: Option<String>,
    #[serde(rename = "taskId")]
    task_id_camel: Option<String>,
}

/// A live stream's place among the caller's live connections (the same cap as GraphQL's
/// WebSockets, `ws_max_connections_per_user`), held until the stream ends.
fn live_slot(
    state: &AppState,
    caller: &crate::auth::Caller,
) -> crate::error::ApiResult<crate::auth::ws::ConnectionSlot> {
    state.local.ws_connections.admit(
        crate::auth::ws::Owner::User(caller.uuid),
        state.config.ws_max_connections_per_user,
    )
}

/// A task's state as Backend.AI's `bgtask_*` event payload.
fn task_payload(t: &crate::bgtasks::TaskState) -> SseEvent {
    let data = if t.status == crate::bgtasks::TaskStatus::Running {
        json!({
            "task_id": t.task_id,
            "message": t.message,
            "current_progress": t.current_progress,
            "total_progress": t.total_progress,
        })
    } else {
        json!({"task_id": t.task_id, "message": t.message})
    };
    SseEvent::default()
        .event(t.event.clone())
        .data(data.to_string())
}

/// `GET /events/background-task?task_id=`: Server-Sent Events of one background task of the
/// caller's (a superadmin's: anyone's), as Backend.AI sends them: its state now, then
/// `bgtask_updated` until `bgtask_done` or `bgtask_failed`, then `server_close`. Another
/// user's task is NOT_FOUND, as one that does not exist.
pub async fn task_events(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Query(q): Query<TaskQuery>,
) -> Response {
    let caller = match caller(&principal) {
        Ok(c) => c.clone(),
        Err(e) => return e.into_response(),
    };
    let Some(raw) = q.task_id.or(q.task_id_camel) else {
        return crate::error::ApiError::bad_request("task_id is required").into_response();
    };
    let Ok(id) = raw.parse::<Uuid>() else {
        return crate::error::ApiError::bad_request("task_id is not a UUID").into_response();
    };
    let states = match crate::bgtasks::follow(
        &crate::bgtasks::Tasks::new(&state.local.bgtasks, &state.shared.events),
        &caller,
        id,
    ) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let close = futures_util::stream::once(async {
        Ok::<_, Infallible>(SseEvent::default().event("server_close").data("{}"))
    });
    let slot = match live_slot(&state, &caller) {
        Ok(slot) => slot,
        Err(e) => return e.into_response(),
    };
    // The first state waits a moment after the headers: Backend.AI's CLI starts a spinner once
    // the stream is open and fails (cancelling a task that never ran) when an event is already
    // there to read, as it is for a task that ended before the client listened.
    let pause = futures_util::stream::once(tokio::time::sleep(Duration::from_millis(200)))
        .filter_map(|()| std::future::ready(None));
    let stream = pause
        .chain(states.map(|t| Ok::<_, Infallible>(task_payload(&t))))
        .take_until(state.shutdown.clone().cancelled_owned())
        .chain(close)
        .map(move |e| {
            let _held = &slot;
            e
        });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}
