//! Apps inside sessions: the launcher's list (the image's `ai.backend.service-ports` plus the
//! built-in terminal), starting an app on demand (`start_service`; Jupyter Notebook with a
//! per-launch token and its base URL under the proxy), and the app proxy at
//! `/apps/{session}/{app}/…`, which only the session's owner (or a superadmin) may use.
//! Container ports are published on 127.0.0.1 only; the proxy talks to loopback.
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use bollard::exec::{CreateExecOptions, StartExecOptions};
use futures_util::TryStreamExt;
use uuid::Uuid;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

#[derive(Debug, Clone, PartialEq, Eq, async_graphql::SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ServicePort {
    pub name: String,
    /// http, tcp, pty or preopen.
    pub protocol: String,
    pub container_port: Option<u16>,
}

/// `jupyter:http:8080,ssh:tcp:2200` → ports (malformed entries are skipped).
pub fn parse_service_ports(label: &str) -> Vec<ServicePort> {
    label
        .split(',')
        .filter_map(|entry| {
            let mut parts = entry.trim().split(':');
            let (name, protocol, port) = (parts.next()?, parts.next()?, parts.next()?);
            let port: u16 = port
                .trim_matches(|c| c == '[' || c == ']')
                .split('|')
                .next()?
                .parse()
                .ok()?;
            (!name.is_empty()).then(|| ServicePort {
                name: name.to_string(),
                protocol: protocol.to_string(),
                container_port: Some(port),
            })
        })
        .collect()
}

/// The launcher's apps: the image's service ports and the built-in web terminal.
pub fn apps(label: &str) -> Vec<ServicePort> {
    let mut out = parse_service_ports(label);
    out.push(ServicePort {
        name: "terminal".into(),
        protocol: "pty".into(),
        container_port: None,
    });
    out
}

/// Container ports to publish for a kernel.
pub fn container_ports(label: &str) -> Vec<u16> {
    parse_service_ports(label)
        .into_iter()
        .filter_map(|p| p.container_port)
        .collect()
}

/// Apps started in sessions: their tokens, and the loopback ports their container ports are
/// published on (fixed for a container's life, so the proxy asks the engine only once).
#[derive(Default)]
pub struct StartedApps {
    inner: Mutex<AppsInner>,
}

#[derive(Default)]
struct AppsInner {
    tokens: HashMap<(Uuid, String), String>,
    ports: HashMap<(Uuid, u16), u16>,
}

impl StartedApps {
    fn lock(&self) -> std::sync::MutexGuard<'_, AppsInner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Drops everything known about a session's apps (it ended).
    pub fn forget(&self, session: Uuid) {
        let mut inner = self.lock();
        inner.tokens.retain(|(s, _), _| *s != session);
        inner.ports.retain(|(s, _), _| *s != session);
    }

    fn token(&self, session: Uuid, app: &str) -> Option<String> {
        self.lock().tokens.get(&(session, app.to_string())).cloned()
    }
}

/// The loopback port for `port` of the session's container, cached after the first lookup.
async fn host_port(
    state: &AppState,
    session: Uuid,
    k: &entity::kernels::Model,
    port: u16,
) -> ApiResult<Option<u16>> {
    if let Some(p) = state.started_apps.lock().ports.get(&(session, port)) {
        return Ok(Some(*p));
    }
    let (agent, container) = super::container_of(state, k).await?;
    let found = agent.published_port(&container, port).await;
    if let Some(p) = found {
        state.started_apps.lock().ports.insert((session, port), p);
    }
    Ok(found)
}

pub struct Started {
    pub url: String,
    pub token: String,
}

pub(crate) async fn owned_running(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
) -> ApiResult<(entity::sessions::Model, entity::kernels::Model)> {
    let caller = principal.caller()?;
    let s = crate::lookup::get::<entity::sessions::Entity>(&state.db, "session", id).await?;
    if s.user_uuid != caller.uuid && !caller.is_superadmin() {
        return Err(ApiError::not_found("session", id));
    }
    if s.status != entity::enums::SessionStatus::Running {
        return Err(ApiError::bad_request(format!(
            "Session '{}' is not running ({})",
            s.name, s.status
        )));
    }
    let k = super::main_kernel(&state.db, id).await?;
    Ok((s, k))
}

fn port_of(k: &entity::kernels::Model, app: &str) -> ApiResult<u16> {
    parse_service_ports(k.service_ports.as_str().unwrap_or_default())
        .into_iter()
        .find(|p| p.name == app && p.protocol == "http")
        .and_then(|p| p.container_port)
        .ok_or_else(|| ApiError::not_found("app", app))
}

/// Starts `app` in the session (idempotent) and waits until it answers.
pub async fn start(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
    app: &str,
) -> ApiResult<Started> {
    let (_, k) = owned_running(state, principal, id).await?;
    let port = port_of(&k, app)?;
    let base = format!("/apps/{id}/{app}/");
    if let Some(token) = state.started_apps.token(id, app) {
        return Ok(Started {
            url: format!("{base}?token={token}"),
            token,
        });
    }
    if app != "jupyter" {
        return Err(ApiError::bad_request(format!(
            "Starting '{app}' is not supported yet (supported: jupyter)"
        )));
    }
    let (agent, container) = super::container_of(state, &k).await?;
    let token = crate::auth::tokens::new_token();
    let cmd = vec![
        "jupyter-notebook".to_string(),
        "--no-browser".into(),
        "--ip=0.0.0.0".into(),
        format!("--port={port}"),
        format!("--NotebookApp.token={token}"),
        format!("--NotebookApp.base_url={base}"),
        "--NotebookApp.allow_remote_access=True".into(),
        "--notebook-dir=/home/work".into(),
    ];
    let exec = agent
        .docker
        .create_exec(
            &container,
            CreateExecOptions {
                cmd: Some(cmd),
                user: Some("work".to_string()),
                working_dir: Some("/home/work".to_string()),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| ApiError::internal("starting an app", e))?;
    agent
        .docker
        .start_exec(
            &exec.id,
            Some(StartExecOptions {
                detach: true,
                tty: false,
                output_capacity: None,
            }),
        )
        .await
        .map_err(|e| ApiError::internal("starting an app", e))?;
    let host_port = host_port(state, id, &k, port)
        .await?
        .ok_or_else(|| ApiError::internal("starting an app", "port not published"))?;
    let client = &state.http;
    let probe = format!("http://127.0.0.1:{host_port}{base}api/status?token={token}");
    for _ in 0..150 {
        if client
            .get(&probe)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            state
                .started_apps
                .lock()
                .tokens
                .insert((id, app.to_string()), token.clone());
            super::exec::touch(state, id).await;
            return Ok(Started {
                url: format!("{base}?token={token}"),
                token,
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(ApiError::internal(
        "starting an app",
        format!("{app} did not answer within 30 s"),
    ))
}

const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "host",
];

/// HTTP reverse proxy to an app inside the session (owner or superadmin only).
pub async fn proxy(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(params): Path<HashMap<String, String>>,
    req: Request,
) -> Response {
    match proxy_inner(&state, &principal, &params, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn proxy_inner(
    state: &AppState,
    principal: &Principal,
    params: &HashMap<String, String>,
    req: Request,
) -> ApiResult<Response> {
    let id: Uuid = params
        .get("session")
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| ApiError::not_found("session", "?"))?;
    let app = params.get("app").cloned().unwrap_or_default();
    let (_, k) = owned_running(state, principal, id).await?;
    let port = port_of(&k, &app)?;
    let host_port = host_port(state, id, &k, port)
        .await?
        .ok_or_else(|| ApiError::bad_request(format!("'{app}' is not running; start it first")))?;
    let path_and_query = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let wants_ws = req
        .headers()
        .get("upgrade")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    if wants_ws {
        super::exec::touch(state, id).await;
        return websocket(state.clone(), id, host_port, path_and_query, req).await;
    }
    let url = format!("http://127.0.0.1:{host_port}{path_and_query}");
    let method = reqwest::Method::from_bytes(req.method().as_str().as_bytes())
        .map_err(|_| ApiError::bad_request("unsupported method"))?;
    let mut out = state.http.request(method, &url);
    for (name, value) in req.headers() {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n) || n == "authorization" {
            continue;
        }
        if n == "cookie" {
            // The app never sees bai's own session cookie.
            let kept: Vec<&str> = value
                .to_str()
                .unwrap_or("")
                .split(';')
                .map(str::trim)
                .filter(|c| !c.starts_with(crate::auth::middleware::SESSION_COOKIE))
                .collect();
            if !kept.is_empty() {
                out = out.header("cookie", kept.join("; "));
            }
            continue;
        }
        out = out.header(n, value.as_bytes());
    }
    let body = axum::body::to_bytes(req.into_body(), 256 * 1024 * 1024)
        .await
        .map_err(|e| ApiError::bad_request(format!("request body: {e}")))?;
    let resp = out
        .body(body)
        .send()
        .await
        .map_err(|e| ApiError::bad_request(format!("the app did not answer: {e}")))?;
    super::exec::touch(state, id).await;
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut builder = Response::builder().status(status);
    for (name, value) in resp.headers() {
        if HOP_BY_HOP.contains(&name.as_str()) {
            continue;
        }
        if let Ok(n) = HeaderName::from_bytes(name.as_str().as_bytes()) {
            builder = builder.header(n, value.as_bytes());
        }
    }
    let stream = resp.bytes_stream().map_err(std::io::Error::other);
    builder
        .body(Body::from_stream(stream))
        .map_err(|e| ApiError::internal("building a proxied response", e))
}

/// WebSocket passthrough (Jupyter kernels and the like): frames both ways until either side
/// closes.
async fn websocket(
    state: AppState,
    session: Uuid,
    host_port: u16,
    path_and_query: String,
    req: Request,
) -> ApiResult<Response> {
    use axum::extract::FromRequestParts;
    use axum::extract::ws::{Message as AxMsg, WebSocketUpgrade};
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message as TMsg;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    let cookies: Option<String> = req
        .headers()
        .get("cookie")
        .and_then(|v| v.to_str().ok())
        .map(|c| {
            c.split(';')
                .map(str::trim)
                .filter(|c| !c.starts_with(crate::auth::middleware::SESSION_COOKIE))
                .collect::<Vec<_>>()
                .join("; ")
        });
    let protocols = req.headers().get("sec-websocket-protocol").cloned();
    let (mut parts, _) = req.into_parts();
    let upgrade = WebSocketUpgrade::from_request_parts(&mut parts, &state)
        .await
        .map_err(|e| ApiError::bad_request(format!("not a WebSocket request: {e}")))?;
    let mut upstream_req = format!("ws://127.0.0.1:{host_port}{path_and_query}")
        .into_client_request()
        .map_err(|e| ApiError::internal("proxying a WebSocket", e))?;
    if let Some(c) = cookies.filter(|c| !c.is_empty())
        && let Ok(v) = c.parse()
    {
        upstream_req.headers_mut().insert("cookie", v);
    }
    if let Some(p) = &protocols {
        upstream_req
            .headers_mut()
            .insert("sec-websocket-protocol", p.clone());
    }
    let (upstream, _) = tokio_tungstenite::connect_async(upstream_req)
        .await
        .map_err(|e| ApiError::bad_request(format!("the app refused the WebSocket: {e}")))?;
    let upgrade = match protocols.as_ref().and_then(|p| p.to_str().ok()) {
        Some(p) => upgrade.protocols(
            p.split(',')
                .map(|x| x.trim().to_string())
                .collect::<Vec<_>>(),
        ),
        None => upgrade,
    };
    Ok(upgrade.on_upgrade(move |client| async move {
        let (mut up_tx, mut up_rx) = upstream.split();
        let (mut cl_tx, mut cl_rx) = client.split();
        let to_app = async {
            while let Some(Ok(m)) = cl_rx.next().await {
                let out = match m {
                    AxMsg::Text(t) => TMsg::text(t.as_str()),
                    AxMsg::Binary(b) => TMsg::binary(b),
                    AxMsg::Ping(p) => TMsg::Ping(p),
                    AxMsg::Pong(p) => TMsg::Pong(p),
                    AxMsg::Close(_) => break,
                };
                if up_tx.send(out).await.is_err() {
                    break;
                }
                super::exec::touch(&state, session).await;
            }
        };
        let to_client = async {
            while let Some(Ok(m)) = up_rx.next().await {
                let out = match m {
                    TMsg::Text(t) => AxMsg::text(t.as_str()),
                    TMsg::Binary(b) => AxMsg::binary(b),
                    TMsg::Ping(p) => AxMsg::Ping(p),
                    TMsg::Pong(p) => AxMsg::Pong(p),
                    TMsg::Close(_) | TMsg::Frame(_) => break,
                };
                if cl_tx.send(out).await.is_err() {
                    break;
                }
            }
        };
        tokio::select! {
            _ = to_app => {}
            _ = to_client => {}
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_ports() {
        let p = parse_service_ports("jupyter:http:8080,ssh:tcp:2200,bad,x:http:notaport");
        assert_eq!(p.len(), 2);
        assert_eq!(
            p[0],
            ServicePort {
                name: "jupyter".into(),
                protocol: "http".into(),
                container_port: Some(8080)
            }
        );
        assert_eq!(container_ports("jupyter:http:8080"), vec![8080]);
        assert_eq!(apps("").last().unwrap().name, "terminal");
    }
}
