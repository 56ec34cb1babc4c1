//! What an operator sees of each request: an id (`X-Request-ID`, accepted or made) returned on
//! every response and carried in problem+json and GraphQL errors, one access-log line per
//! request, routing that tells the truth (404/405 as problem+json; the console only for
//! browsers), and health endpoints.
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::IntoProblem as _;
use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

/// Filled in while the request is served: the matched route and who called.
#[derive(Clone, Default)]
pub struct Seen(Arc<Mutex<(Option<String>, Option<String>)>>);

impl Seen {
    pub fn route(&self, route: &str) {
        self.0.lock().0 = Some(route.to_string());
    }
    pub fn who(&self, who: String) {
        self.0.lock().1 = Some(who);
    }
}

/// Records the matched route for the access log and the metrics (every routed request;
/// the fallback's are logged as "-").
pub async fn record_route(req: Request, next: Next) -> Response {
    if let (Some(seen), Some(route)) = (
        req.extensions().get::<Seen>(),
        req.extensions().get::<axum::extract::MatchedPath>(),
    ) {
        seen.route(route.as_str());
    }
    next.run(req).await
}

/// An id from the client is kept when it is short and plain; otherwise one is made.
fn usable_id(v: &HeaderValue) -> Option<String> {
    let s = v.to_str().ok()?;
    (!s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c)))
    .then(|| s.to_string())
}

/// The outermost layer: id, access log, `X-Request-ID` on the response.
pub async fn request_context(mut req: Request, next: Next) -> Response {
    // HTTP/2 carries the host in `:authority`; the rest of the server reads `Host`.
    if !req.headers().contains_key(axum::http::header::HOST)
        && let Some(v) = req
            .uri()
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    {
        req.headers_mut().insert(axum::http::header::HOST, v);
    }
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(usable_id)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let seen = Seen::default();
    req.extensions_mut().insert(seen.clone());
    let started = Instant::now();
    let mut resp = crate::error::with_request_id(id.clone(), next.run(req)).await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    let status = resp.status().as_u16();
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let (route, who) = seen.0.lock().clone();
    let route = route.unwrap_or_else(|| "-".into());
    let who = who.unwrap_or_else(|| "-".into());
    let labels = [
        ("method", method.to_string()),
        ("route", route.clone()),
        ("status", status.to_string()),
    ];
    metrics::counter!("bai_http_requests_total", &labels).increment(1);
    metrics::histogram!("bai_http_request_duration_seconds", &labels[..2]).record(ms / 1000.0);
    if status >= 500 {
        tracing::error!(target: "access", request_id = %id, %method, route, path, status, ms, who, "request failed");
    } else {
        tracing::info!(target: "access", request_id = %id, %method, route, path, status, ms, who, "request");
    }
    resp
}

/// First path segments that belong to the API (Backend.AI's REST surface included): an
/// unknown path under them is a 404 problem, never the console's page.
const API_ROOTS: &[&str] = &[
    "graphql",
    "admin",
    "apps",
    "storage",
    "sessions",
    "session",
    "stream",
    "events",
    "resource",
    "scaling-groups",
    "config",
    "auth",
    "folders",
    "manager",
    "health",
    "metrics",
    "totp",
    "license",
    "user-config",
    "domain-config",
    "group-config",
    "image",
    "kernel",
    "vfolder",
    "server",
    "func",
    "spec",
    "acl",
    "logs",
    "template",
    "services",
    "service",
    "ping",
];

fn is_api(path: &str) -> bool {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    API_ROOTS.contains(&first)
}

/// Everything no route matched: static console files for GET/HEAD, the console's page for
/// browsers, and problem+json otherwise.
pub async fn fallback(State(state): State<AppState>, req: Request) -> Response {
    use tower::ServiceExt;
    let path = req.uri().path().to_string();
    if is_api(&path) {
        return ApiError::not_found("API path", &path).into_response();
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return method_not_allowed("GET, HEAD");
    }
    let html = wants_html(req.headers());
    let hashed = is_hashed_asset(&path);
    let web_dir = state.config.web_dir.clone();
    let served = tower_http::services::ServeDir::new(&web_dir)
        .precompressed_br()
        .precompressed_gzip()
        .oneshot(req)
        .await;
    if let Ok(resp) = served
        && resp.status() != StatusCode::NOT_FOUND
    {
        let mut resp = resp.map(Body::new);
        let cache = if hashed {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        };
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
        // The answer depends on Accept-Encoding (precompressed copies): caches must know.
        resp.headers_mut()
            .insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        return resp;
    }
    if html && let Some(page) = console_page(&web_dir).await {
        return page;
    }
    ApiError::not_found("path", &path).into_response()
}

/// The console's page (always revalidated), or None when the bundle is not built.
pub async fn console_page(web_dir: &std::path::Path) -> Option<Response> {
    let index = web_dir.join("index.html");
    match tokio::fs::read_to_string(&index).await {
        Ok(page) => {
            let mut resp = axum::response::Html(page).into_response();
            resp.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            Some(resp)
        }
        Err(e) => {
            tracing::warn!(path = %index.display(), error = %e, "web console not built");
            None
        }
    }
}

/// Whether the request asks for a page (a browser navigating).
pub fn wants_html(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"))
}

/// `web-<12 hex>.js`, `web_bg-<12 hex>.wasm`: named by their content, so never stale.
fn is_hashed_asset(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or("");
    let stem = name.split('.').next().unwrap_or("");
    stem.rsplit_once('-')
        .is_some_and(|(_, h)| h.len() == 12 && h.chars().all(|c| c.is_ascii_hexdigit()))
}

fn method_not_allowed(allow: &str) -> Response {
    let mut resp = ApiError::new(
        ErrorCode::MethodNotAllowed,
        "This method is not allowed here.",
    )
    .into_response();
    // Left out when unknown here: axum's route sets it once this layer has answered.
    if !allow.is_empty()
        && let Ok(v) = HeaderValue::from_str(allow)
    {
        resp.headers_mut().insert(header::ALLOW, v);
    }
    resp
}

/// axum answers a known path with a wrong method with a bare 405 (and `Allow`): give it the
/// same problem+json body as every other error.
pub async fn problem_for_bare_errors(resp: Response) -> Response {
    let bare = resp.headers().get(header::CONTENT_TYPE).is_none();
    match resp.status() {
        StatusCode::METHOD_NOT_ALLOWED if bare => {
            let allow = resp
                .headers()
                .get(header::ALLOW)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            method_not_allowed(&allow)
        }
        StatusCode::PAYLOAD_TOO_LARGE if bare => ApiError::new(
            ErrorCode::PayloadTooLarge,
            "The request body is larger than this server accepts.",
        )
        .into_response(),
        _ => resp,
    }
}

/// `GET /health/live`: the process answers.
pub async fn live() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

/// `GET /health/readyz`: the database answers and its schema is current, and the configured
/// engines' states; 503 when the database or every engine is out.
pub async fn ready(State(state): State<AppState>) -> Response {
    use migration::MigratorTrait;
    use sea_orm::ConnectionTrait;
    let db_ok = state.db.execute_unprepared("SELECT 1").await.is_ok();
    let pending = migration::Migrator::get_pending_migrations(&state.db)
        .await
        .map(|p| p.len())
        .ok();
    // Side by side: an engine that hangs (until the call timeout) delays the answer once.
    let agents = state.local.agents.all().await;
    let engines: Vec<_> = futures_util::future::join_all(agents.iter().map(|agent| async move {
        json!({"agent": agent.info().id, "endpoint": agent.info().endpoint, "alive": agent.ping().await.is_ok()})
    }))
    .await;
    let configured = state.config.docker_endpoints.len() + state.config.engines.len();
    let engines_ok = configured == 0 || engines.iter().any(|e| e["alive"] == true);
    let ready = db_ok && pending == Some(0) && engines_ok;
    let body = json!({
        "status": if ready { "ready" } else { "not ready" },
        "database": {"reachable": db_ok, "pending_migrations": pending},
        "engines": {"configured": configured, "connected": engines},
        "manager": {
            "id": state.elected.cluster.id,
            "addr": state.elected.cluster.addr,
            "role": state.elected.cluster.role(),
            "drives": engines_driven(&state, &agents),
        },
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(body)).into_response()
}

/// The agents whose engine this process drives (their heartbeat and reconciliation).
fn engines_driven(
    state: &AppState,
    agents: &[std::sync::Arc<crate::agents::Agent>],
) -> Vec<String> {
    agents
        .iter()
        .map(|a| a.info().id.clone())
        .filter(|id| state.elected.cluster.drives(id))
        .collect()
}

/// Marks a response that may be compressed: it echoes no secret, so compression cannot leak
/// one through the response size (BREACH).
#[derive(Clone, Copy)]
pub struct Compressible;

/// A GraphQL document whose answer may be compressed: a read (no mutation) that selects no
/// field that can carry a secret (keys, tokens, passwords). Judged on the text, so a false
/// "no" only costs bytes.
pub fn compressible_document(query: &str) -> bool {
    const SECRETS: &[&str] = &["mutation", "secret", "token", "private", "password"];
    let q = query.to_ascii_lowercase();
    !SECRETS.iter().any(|s| q.contains(s))
}

/// The compression predicate's test for the [`Compressible`] mark.
type Marked = fn(
    axum::http::StatusCode,
    axum::http::Version,
    &axum::http::HeaderMap,
    &axum::http::Extensions,
) -> bool;

/// Compresses (gzip) marked answers of at least 1 KiB for clients that accept it.
pub fn compression() -> tower_http::compression::CompressionLayer<
    tower_http::compression::predicate::And<tower_http::compression::predicate::SizeAbove, Marked>,
> {
    use tower_http::compression::predicate::{Predicate, SizeAbove};
    let marked: Marked = |_, _, _, ext| ext.get::<Compressible>().is_some();
    tower_http::compression::CompressionLayer::new()
        .gzip(true)
        .compress_when(SizeAbove::new(1024).and(marked))
}
