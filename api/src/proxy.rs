//! The app proxy (a surface): starting an app on demand (`start_service`: any app the image
//! declares, by its service definition — `sessions::apps::defs` — with a per-launch token and
//! its base URL under the proxy), serving each app on a pool port
//! of its own, and the proxy at `/apps/{session}/{app}/…`, which only the session's owner (or
//! a superadmin) may use. Container ports are not published on the host: the proxy reaches
//! each container at its address on the session network. What is known of the apps
//! (`StartedApps`, service ports, SSH setup) is the sessions service's (`sessions::apps`).
use std::collections::HashMap;
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::response::Response;
use futures_util::TryStreamExt;
use uuid::Uuid;

use crate::auth::Principal;
use crate::error::IntoProblem as _;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

use crate::sessions::apps::{
    AppEntry, SSHD_PORT, app_of, known, owned_running, parse_port_range, port_of, running,
    share_route, upstream,
};

/// How an app is opened (the launcher's two check boxes).
#[derive(Debug, Clone, Copy, Default)]
pub struct StartOptions {
    /// "Open app to public": anyone with the URL may use it, without logging in.
    pub public: bool,
    /// "Try preferred port": serve the app on this port of the pool if it is free.
    pub preferred_port: Option<u16>,
}

pub struct Started {
    /// Path of the app under the server (`/apps/{session}/{app}/?token=…`); on a pool port
    /// the same path is served at `http://<server host>:<port>`.
    pub url: String,
    pub token: String,
    pub port: Option<u16>,
    pub public: bool,
    pub protocol: String,
}

/// Starts `app` in the session (idempotent; the options may be changed by starting again)
/// and waits until it answers.
pub async fn start(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
    app: &str,
    mut opts: StartOptions,
) -> ApiResult<Started> {
    let (_, k) = owned_running(state, principal, id).await?;
    let service = app_of(&k, app)?;
    let port = port_of(&k, app)?;
    // SSH/SFTP without a port asked for: the caller's "Preferred SSH port", if set.
    if matches!(app, "sshd" | "sftp")
        && opts.preferred_port.is_none()
        && let Ok(c) = principal.caller()
    {
        opts.preferred_port = crate::users::by_uuid(&state.read, c.uuid)
            .await?
            .preferred_ssh_port
            .and_then(|p| u16::try_from(p).ok());
    }
    if port == SSHD_PORT {
        state.local.started_apps.ssh_setup_done(id).await;
    }
    let base = format!("/apps/{id}/{app}/");
    let is_tcp = service.protocol == "tcp";
    // Started before, through this manager or (several managers) another: the same app.
    let token = match known(state, id, app).await? {
        Some(e) => e.token,
        None if is_tcp => crate::auth::tokens::new_token(),
        None => launch_http_app(state, id, &k, app, port, &base).await?,
    };
    let token = share_route(state, id, app, &token, opts.public).await?;
    let pool_port = serve_here(state, id, &k, app, &token, opts).await?;
    crate::sessions::exec::touch(state, id).await;
    Ok(Started {
        url: if is_tcp {
            String::new()
        } else {
            format!("{base}?token={token}")
        },
        token: if is_tcp { String::new() } else { token },
        port: Some(pool_port),
        public: opts.public,
        protocol: service.protocol,
    })
}

/// Serves a started app on a pool port of this manager's (the one it has, else a new one):
/// every app has an origin of its own, so no page an app produces ever runs in the console's
/// origin (with the visitor's login). Returns the port.
async fn serve_here(
    state: &AppState,
    id: Uuid,
    k: &entity::kernels::Model,
    app: &str,
    token: &str,
    opts: StartOptions,
) -> ApiResult<u16> {
    let service = app_of(k, app)?;
    let is_tcp = service.protocol == "tcp";
    let port = port_of(k, app)?;
    let upstream = upstream(state, id, k, port)
        .await?
        .ok_or_else(|| ApiError::internal("starting an app", "the container has no address"))?;
    let existing = state.local.started_apps.entry(id, app);
    let (pool_port, listener) = match existing
        .as_ref()
        .and_then(|e| e.pool_port.zip(e.listener.clone()))
    {
        Some((p, l)) => (p, l),
        None => {
            let (listener, p) = bind_pool_port(state, opts.preferred_port).await?;
            let handle = if is_tcp {
                tokio::spawn(forward_tcp(state.clone(), id, listener, upstream)).abort_handle()
            } else {
                let router = pool_router(state.clone(), id, app.to_string());
                let tls = state.tls.clone();
                let edge = crate::edge::Edge::of(&state.config);
                tokio::spawn(async move {
                    let served =
                        crate::edge::serve(listener, tls, router, edge, std::future::pending())
                            .await;
                    if let Err(e) = served {
                        tracing::warn!(error = %e, "app port listener stopped");
                    }
                })
                .abort_handle()
            };
            (p, handle)
        }
    };
    state.local.started_apps.insert(
        id,
        app,
        AppEntry {
            token: token.to_string(),
            public: opts.public,
            pool_port: Some(pool_port),
            listener: Some(listener),
        },
    );
    Ok(pool_port)
}

/// Launches a web app process in the container and waits until it answers; returns its
/// per-launch token.
async fn launch_http_app(
    state: &AppState,
    id: Uuid,
    k: &entity::kernels::Model,
    app: &str,
    port: u16,
    base: &str,
) -> ApiResult<String> {
    let token = crate::auth::tokens::new_token();
    let Some(launch) = crate::sessions::apps::launch_of(state, k, app, base, &token).await? else {
        // A `noop` app: something in the image serves it already.
        return Ok(token);
    };
    let (agent, container) = crate::sessions::container_of(state, k).await?;
    agent
        .spawn_detached(&container, app_command(launch))
        .await?;
    let upstream = upstream(state, id, k, port)
        .await?
        .ok_or_else(|| ApiError::internal("starting an app", "the container has no address"))?;
    // Any answer but a server error (a login redirect included) means it serves.
    let probe = format!("http://{upstream}{base}");
    for _ in 0..300 {
        if state
            .http
            .get(&probe)
            .send()
            .await
            .is_ok_and(|r| !r.status().is_server_error())
        {
            return Ok(token);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(ApiError::internal(
        "starting an app",
        format!("{app} did not answer within 60 s"),
    ))
}

/// The process line of a launch, run as `work` in /home/work: its environment, the
/// directories its `mkdir` actions ask for (made first, by a script that names them only as
/// arguments), then its command.
fn app_command(launch: crate::sessions::apps::defs::Launch) -> Vec<String> {
    let mut cmd = vec!["env".to_string(), "--".into()];
    cmd.extend(launch.env.iter().map(|(k, v)| format!("{k}={v}")));
    let n = launch.mkdirs.len();
    if n > 0 {
        let dirs: Vec<String> = (1..=n).map(|i| format!("\"${i}\"")).collect();
        cmd.extend([
            "sh".to_string(),
            "-c".into(),
            format!("mkdir -p -- {} && shift {n} && exec \"$@\"", dirs.join(" ")),
            "sh".into(),
        ]);
        cmd.extend(launch.mkdirs);
    }
    cmd.extend(launch.argv);
    cmd
}

/// Binds a listener on a port of the pool: the preferred one when it is in the pool and
/// free, else a random free one.
async fn bind_pool_port(
    state: &AppState,
    preferred: Option<u16>,
) -> ApiResult<(tokio::net::TcpListener, u16)> {
    let (lo, hi) = parse_port_range(&state.config.app_port_pool).ok_or_else(|| {
        ApiError::internal(
            "binding an app port",
            format!("bad app_port_pool '{}'", state.config.app_port_pool),
        )
    })?;
    let ip = state.config.listen.ip();
    if let Some(p) = preferred.filter(|p| (lo..=hi).contains(p))
        && let Ok(l) = tokio::net::TcpListener::bind((ip, p)).await
    {
        return Ok((l, p));
    }
    let span = u32::from(hi - lo) + 1;
    let offset: u32 = rand::random::<u32>() % span;
    for i in 0..span {
        let p = lo + ((offset + i) % span) as u16;
        if let Ok(l) = tokio::net::TcpListener::bind((ip, p)).await {
            return Ok((l, p));
        }
    }
    Err(ApiError::conflict(format!(
        "No free port left in the app port pool {lo}-{hi}"
    )))
}

/// Raw TCP forwarding from a pool port to the container's port (SSH/SFTP).
async fn forward_tcp(
    state: AppState,
    session: Uuid,
    listener: tokio::net::TcpListener,
    upstream: std::net::SocketAddr,
) {
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            // Out of descriptors or the like: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        crate::sessions::exec::touch(&state, session).await;
        tokio::spawn(async move {
            match tokio::net::TcpStream::connect(upstream).await {
                Ok(mut outbound) => {
                    // Either side closing (or resetting) ends the forward; there is no one to report to.
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
                Err(e) => tracing::debug!(error = %e, "app port: container unreachable"),
            }
        });
    }
}

/// The router serving one web app on its pool port (same checks as the main proxy).
fn pool_router(state: AppState, session: Uuid, app: String) -> axum::Router {
    let handler = move |State(state): State<AppState>,
                        Extension(principal): Extension<Principal>,
                        req: Request| {
        let app = app.clone();
        async move {
            if req.uri().path() == "/" {
                // Into the app's base path (relative: never an open redirect).
                return Response::builder()
                    .status(StatusCode::FOUND)
                    .header(
                        "location",
                        format!(
                            "/apps/{session}/{app}/{}",
                            req.uri()
                                .query()
                                .map(|q| format!("?{q}"))
                                .unwrap_or_default()
                        ),
                    )
                    .body(Body::empty())
                    .unwrap_or_default();
            }
            // A console that may open apps (app_proxy_origins) may read what the app's first
            // page answers (Web UI 26 asks it before it opens the window).
            let headers = req.headers().clone();
            let resp = match proxy_inner(&state, &principal, session, &app, req, true).await {
                Ok(r) => r,
                Err(e) => e.into_response(),
            };
            match crate::wsproxy::console_origin(&state, &headers) {
                Some(_) => crate::wsproxy::with_cors(&state, &headers, resp),
                None => resp,
            }
        }
    };
    axum::Router::new()
        .fallback(handler)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::middleware::authenticate,
        ))
        .layer(axum::middleware::from_fn(set_aside_app_authorization))
        .with_state(state)
}

/// An `Authorization` header of an app's own scheme (JupyterLab sends `token …`), set aside
/// for the app on its port.
#[derive(Clone)]
struct AppAuthorization(axum::http::HeaderValue);

/// Whether an `Authorization` value is one of bai's credentials (a bearer token, an HMAC
/// signature): those are bai's alone and never reach an app.
fn is_bai_authorization(value: &[u8]) -> bool {
    let v = String::from_utf8_lossy(value);
    let scheme = v.split_ascii_whitespace().next().unwrap_or("");
    ["bearer", "backendai", "sorna"]
        .iter()
        .any(|s| scheme.eq_ignore_ascii_case(s))
}

/// On an app's port, a header of another scheme is the app's: it is taken out before bai looks
/// for its own credentials and handed to the app with the request.
async fn set_aside_app_authorization(mut req: Request, next: axum::middleware::Next) -> Response {
    if let Some(v) = req.headers().get(axum::http::header::AUTHORIZATION)
        && !is_bai_authorization(v.as_bytes())
    {
        let v = v.clone();
        req.headers_mut().remove(axum::http::header::AUTHORIZATION);
        req.extensions_mut().insert(AppAuthorization(v));
    }
    next.run(req).await
}

/// Cookie carrying a per-app token after a first visit with `?token=`.
fn app_cookie(app: &str) -> String {
    format!("bai_app_{app}")
}

fn query_token(req: &Request) -> Option<String> {
    query_param(req, "token")
}

/// The (percent-decoded) query parameter `name`.
fn query_param(req: &Request, name: &str) -> Option<String> {
    req.uri().query().and_then(|q| {
        q.split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| {
                percent_encoding::percent_decode_str(v)
                    .decode_utf8_lossy()
                    .into_owned()
            })
    })
}

/// A `redirect` that stays inside the app: an absolute path (`/tree`), never another host
/// (`//evil`), a scheme, a backslash or a control character; None otherwise.
fn inside_app(path: &str) -> Option<String> {
    let ok = path.starts_with('/')
        && !path.starts_with("//")
        && !path
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == '\\')
        && path.len() <= 1024;
    ok.then(|| path.to_string())
}

/// Who may use an app: its owner (or a superadmin) by login; anyone when it is public (on its
/// pool port only: a public app never runs in the console's origin); a browser that is not
/// logged in by the per-app token (query `token`, then a cookie scoped to the app). Another
/// logged-in user never rides on a leaked URL. Returns a cookie to set.
fn authorize(
    principal: &Principal,
    session: &entity::sessions::Model,
    app: &str,
    entry: Option<&AppEntry>,
    req: &Request,
    via_pool: bool,
    secure: bool,
) -> ApiResult<Option<String>> {
    if let Principal::User(c) = principal
        && crate::sessions::works_inside(c, session)
    {
        return Ok(None);
    }
    let Some(entry) = entry else {
        return Err(match principal {
            Principal::User(_) => ApiError::not_found("session", session.id),
            Principal::Anonymous => {
                ApiError::unauthenticated("Login required (or open the app with its token).")
            }
        });
    };
    if entry.public && via_pool {
        return Ok(None);
    }
    if let Principal::User(_) = principal {
        return Err(ApiError::not_found("session", session.id));
    }
    let cookie = app_cookie(app);
    if crate::auth::credentials::cookie(req.headers(), &cookie)
        .is_some_and(|t| crate::auth::tokens::eq(&t, &entry.token))
    {
        return Ok(None);
    }
    if query_token(req).is_some_and(|t| crate::auth::tokens::eq(&t, &entry.token)) {
        let secure = if secure { "; Secure" } else { "" };
        return Ok(Some(format!(
            "{cookie}={}; Path=/apps/{}/{app}/; HttpOnly; SameSite=Lax{secure}",
            entry.token, session.id
        )));
    }
    Err(ApiError::unauthenticated(
        "Login required (or open the app with its token).",
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

/// HTTP reverse proxy to an app inside the session at `/apps/{session}/{app}/…`.
pub async fn proxy(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(params): Path<HashMap<String, String>>,
    req: Request,
) -> Response {
    let Some(id) = params.get("session").and_then(|s| s.parse::<Uuid>().ok()) else {
        return ApiError::not_found("session", "?").into_response();
    };
    let app = params.get("app").cloned().unwrap_or_default();
    match proxy_inner(&state, &principal, id, &app, req, false).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// Whether a state-changing or WebSocket request comes from a page of the same origin.
fn origin_allowed(req: &Request) -> bool {
    let safe = matches!(req.method().as_str(), "GET" | "HEAD" | "OPTIONS");
    let upgrade = req.headers().contains_key("upgrade");
    if safe && !upgrade {
        return true;
    }
    let header = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok());
    match (header("origin"), header("host")) {
        (None, _) => true,
        (Some(origin), Some(host)) => origin.split_once("://").is_some_and(|(_, h)| h == host),
        (Some(_), None) => false,
    }
}

/// Keeps a `Location` from the app inside the session: relative ones as they are, absolute
/// ones only when they point at the app itself (made relative); anything else is dropped.
pub(crate) fn safe_location(location: &str, upstream: std::net::SocketAddr) -> Option<String> {
    // Browsers drop tabs and newlines inside URLs and read `\` as `/`: `/\t/evil` would
    // become `//evil`. Any of them, or any other control character, and the header goes.
    if location
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == '\\')
    {
        return None;
    }
    let own = format!("http://{upstream}");
    if let Some(rest) = location.strip_prefix(&own) {
        return match rest.chars().next() {
            None => Some("/".into()),
            Some('/' | '?' | '#') if !rest.starts_with("//") => Some(rest.to_string()),
            Some(_) => None,
        };
    }
    // A scheme (`https:evil`, `javascript:…`) lives before the first `/`, `?` or `#`.
    let first_segment = location.split(['/', '?', '#']).next().unwrap_or("");
    let relative = location.starts_with('/') && !location.starts_with("//");
    let bare = !location.starts_with('/') && !first_segment.contains(':');
    (relative || bare).then(|| location.to_string())
}

async fn proxy_inner(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
    app: &str,
    req: Request,
    via_pool: bool,
) -> ApiResult<Response> {
    if !origin_allowed(&req) {
        return Err(ApiError::forbidden(
            "Requests to an app must come from its own pages.",
        ));
    }
    // Who may enter is decided before anything about the session is told: a session that
    // does not exist answers as one the caller may not enter.
    let found = <entity::sessions::Entity as sea_orm::EntityTrait>::find_by_id(id)
        .one(&state.read)
        .await?;
    let Some(s) = found else {
        return Err(match principal {
            Principal::User(_) => ApiError::not_found("session", id),
            Principal::Anonymous => {
                ApiError::unauthenticated("Login required (or open the app with its token).")
            }
        });
    };
    let entry = known(state, id, app).await?;
    let set_cookie = authorize(
        principal,
        &s,
        app,
        entry.as_ref(),
        &req,
        via_pool,
        state.tls.is_some(),
    )?;
    if !via_pool {
        // The console's origin never serves an app: the browser goes to the app's own port.
        let Some(entry) = entry else {
            return Err(ApiError::bad_request(format!(
                "'{app}' is not running; start it first"
            )));
        };
        let port = match entry.pool_port {
            Some(p) => p,
            // Started through another manager: this one serves it too, on a port of its own.
            None => {
                let (_, k) = running(state, s.clone()).await?;
                let opts = StartOptions {
                    public: entry.public,
                    preferred_port: None,
                };
                serve_here(state, id, &k, app, &entry.token, opts).await?
            }
        };
        let origin = app_origin(state, req.headers(), port)?;
        let path_and_query = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        return Response::builder()
            .status(StatusCode::TEMPORARY_REDIRECT)
            .header("location", format!("{origin}{path_and_query}"))
            .body(Body::empty())
            .map_err(|e| ApiError::internal("redirecting to an app", e));
    }
    // The first visit with the token (from Backend.AI's app-proxy protocol, whose consoles
    // add `&redirect=/tree`): the cookie, then the page asked for, inside the app.
    // The token goes along: the app itself (Jupyter) logs the browser in with it.
    if let Some(cookie) = &set_cookie
        && let Some(to) = query_param(&req, "redirect").and_then(|r| inside_app(&r))
        && let Some(token) = query_token(&req)
    {
        let joint = if to.contains('?') { '&' } else { '?' };
        return Response::builder()
            .status(StatusCode::FOUND)
            .header("set-cookie", cookie.as_str())
            .header(
                "location",
                format!("/apps/{id}/{app}{to}{joint}token={token}"),
            )
            .body(Body::empty())
            .map_err(|e| ApiError::internal("redirecting into an app", e));
    }
    let (_, k) = running(state, s).await?;
    let port = port_of(&k, app)?;
    if app_of(&k, app)?.protocol != "http" {
        return Err(ApiError::bad_request(format!("'{app}' is not a web app")));
    }
    let upstream = upstream(state, id, &k, port)
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
        crate::sessions::exec::touch(state, id).await;
        return websocket(state.clone(), id, upstream, path_and_query, req).await;
    }
    let url = format!("http://{upstream}{path_and_query}");
    let method = reqwest::Method::from_bytes(req.method().as_str().as_bytes())
        .map_err(|_| ApiError::bad_request("unsupported method"))?;
    let mut out = state.http.request(method, &url);
    // The app's own credentials (set aside on its port); bai's never pass.
    if let Some(AppAuthorization(v)) = req.extensions().get::<AppAuthorization>() {
        out = out.header("authorization", v.as_bytes());
    }
    for (name, value) in req.headers() {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n) || n == "authorization" {
            continue;
        }
        if n == "cookie" {
            if let Some(kept) = app_cookies(value.to_str().unwrap_or("")) {
                out = out.header("cookie", kept);
            }
            continue;
        }
        out = out.header(n, value.as_bytes());
    }
    // Streamed through: nothing of the body is held here.
    let body = reqwest::Body::wrap_stream(req.into_body().into_data_stream());
    let resp = out.body(body).send().await.map_err(|e| {
        let reference = Uuid::new_v4();
        tracing::warn!(%reference, session = %id, app, error = %e, "app proxy request failed");
        ApiError::bad_request(format!("The app did not answer (reference {reference})."))
    })?;
    crate::sessions::exec::touch(state, id).await;
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut builder = Response::builder().status(status);
    for (name, value) in resp.headers() {
        if HOP_BY_HOP.contains(&name.as_str()) {
            continue;
        }
        if name.as_str() == "location" {
            if let Some(l) = value.to_str().ok().and_then(|l| safe_location(l, upstream)) {
                builder = builder.header("location", l);
            }
            continue;
        }
        // An app may not plant or replace bai's cookies (they are host-wide, not per port).
        if name.as_str() == "set-cookie"
            && value
                .to_str()
                .map(|v| is_bai_cookie(v.split('=').next().unwrap_or(v)))
                .unwrap_or(true)
        {
            continue;
        }
        if let Ok(n) = HeaderName::from_bytes(name.as_str().as_bytes()) {
            builder = builder.header(n, value.as_bytes());
        }
    }
    if let Some(c) = set_cookie {
        builder = builder.header("set-cookie", c);
    }
    let stream = resp.bytes_stream().map_err(std::io::Error::other);
    builder
        .body(Body::from_stream(stream))
        .map_err(|e| ApiError::internal("building a proxied response", e))
}

/// Where a browser reaches an app served on pool port `port` of this manager:
/// `scheme://host:port`. Several managers: the port is this manager's, at the host it is known
/// by (a load balancer's name would lead the browser to whichever manager it picks); else the
/// host the browser used.
pub(crate) fn app_origin(
    state: &AppState,
    headers: &axum::http::HeaderMap,
    port: u16,
) -> ApiResult<String> {
    let advertised = state
        .config
        .advertise_addr
        .as_deref()
        .filter(|_| state.elected.cluster.is_shared())
        .and_then(|a| a.parse::<axum::http::uri::Authority>().ok())
        .map(|a| a.host().to_string());
    let host = advertised
        .or_else(|| request_host(headers))
        .ok_or_else(|| ApiError::bad_request("The request has no usable Host header"))?;
    let scheme = if state.tls.is_some() { "https" } else { "http" };
    Ok(format!("{scheme}://{host}:{port}"))
}

/// The host name (without port) the browser used, for an absolute URL on another port.
fn request_host(headers: &axum::http::HeaderMap) -> Option<String> {
    let raw = headers.get("host")?.to_str().ok()?;
    let authority: axum::http::uri::Authority = raw.parse().ok()?;
    let host = authority.host();
    host.chars()
        .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        .then(|| host.to_string())
}

/// Whether a cookie name is one of bai's (login, per-app tokens, with or without the
/// `__Host-`/`__Secure-` prefixes): the app never sees them and may never set them.
pub fn is_bai_cookie(name: &str) -> bool {
    let name = name.trim();
    let bare = name
        .strip_prefix("__Host-")
        .or_else(|| name.strip_prefix("__Secure-"))
        .unwrap_or(name);
    bare.starts_with("bai_")
}

/// The request's cookies minus bai's own (login and per-app token), which the app never sees.
pub(crate) fn app_cookies(header: &str) -> Option<String> {
    let kept: Vec<&str> = header
        .split(';')
        .map(str::trim)
        .filter(|c| !c.is_empty() && !is_bai_cookie(c.split('=').next().unwrap_or(c)))
        .collect();
    (!kept.is_empty()).then(|| kept.join("; "))
}

/// WebSocket passthrough (Jupyter kernels and the like): frames both ways until either side
/// closes.
async fn websocket(
    state: AppState,
    session: Uuid,
    upstream: std::net::SocketAddr,
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
        .and_then(app_cookies);
    let protocols = req.headers().get("sec-websocket-protocol").cloned();
    let (mut parts, _) = req.into_parts();
    let upgrade = WebSocketUpgrade::from_request_parts(&mut parts, &state)
        .await
        .map_err(|e| ApiError::bad_request(format!("not a WebSocket request: {e}")))?;
    let mut upstream_req = format!("ws://{upstream}{path_and_query}")
        .into_client_request()
        .map_err(|e| ApiError::internal("proxying a WebSocket", e))?;
    if let Some(c) = cookies
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
        .map_err(|e| {
            let reference = Uuid::new_v4();
            tracing::warn!(%reference, error = %e, "app WebSocket refused");
            ApiError::bad_request(format!(
                "The app refused the WebSocket (reference {reference})."
            ))
        })?;
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
                crate::sessions::exec::touch(&state, session).await;
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
    fn only_bais_own_credentials_are_kept_from_apps() {
        for bai in [
            "Bearer abc",
            "bearer abc",
            "BackendAI signMethod=HMAC-SHA256, credential=a:b",
            "Sorna x",
        ] {
            assert!(is_bai_authorization(bai.as_bytes()), "{bai}");
        }
        for app in ["token abc", "Basic dXNlcjpwYXNz", "", "Bearerx abc"] {
            assert!(!is_bai_authorization(app.as_bytes()), "{app}");
        }
    }

    #[test]
    fn app_commands_make_their_directories_first() {
        use crate::sessions::apps::defs::Launch;
        let plain = Launch {
            mkdirs: vec![],
            argv: vec!["tb".into(), "--port".into(), "1".into()],
            env: vec![("A".into(), "b c".into())],
        };
        assert_eq!(
            app_command(plain),
            ["env", "--", "A=b c", "tb", "--port", "1"]
        );
        let with_dirs = Launch {
            mkdirs: vec!["/home/work/logs".into(), "$(reboot)".into()],
            argv: vec!["tb".into()],
            env: vec![],
        };
        assert_eq!(
            app_command(with_dirs),
            [
                "env",
                "--",
                "sh",
                "-c",
                "mkdir -p -- \"$1\" \"$2\" && shift 2 && exec \"$@\"",
                "sh",
                "/home/work/logs",
                "$(reboot)",
                "tb"
            ]
        );
    }

    #[test]
    fn pool_ports_and_redirects() {
        assert_eq!(parse_port_range("30000-30999"), Some((30000, 30999)));
        assert_eq!(parse_port_range("3-1"), None);
        let at = |ip: &str| std::net::SocketAddr::new(ip.parse().unwrap(), 9);
        assert_eq!(
            safe_location("/apps/x/", at("172.17.0.2")),
            Some("/apps/x/".into())
        );
        assert_eq!(safe_location("tree", at("172.17.0.2")), Some("tree".into()));
        assert_eq!(
            safe_location("http://172.17.0.2:9/a", at("172.17.0.2")),
            Some("/a".into())
        );
        assert_eq!(
            safe_location("http://172.17.0.3:9/a", at("172.17.0.2")),
            None
        );
        assert_eq!(
            safe_location("https://evil.example/", at("172.17.0.2")),
            None
        );
        assert_eq!(safe_location("//evil.example/", at("172.17.0.2")), None);
        assert_eq!(safe_location("/\t/evil.example/", at("172.17.0.2")), None);
        assert_eq!(safe_location("/\\evil.example/", at("172.17.0.2")), None);
        assert_eq!(safe_location("https:evil.example", at("172.17.0.2")), None);
        assert_eq!(safe_location("javascript:alert(1)", at("172.17.0.2")), None);
        assert_eq!(
            safe_location("http://172.17.0.2:9@evil.example/", at("172.17.0.2")),
            None
        );
        assert_eq!(
            safe_location("http://172.17.0.2:9//evil.example/", at("172.17.0.2")),
            None
        );
        assert_eq!(
            safe_location("tree?a=b:c", at("172.17.0.2")),
            Some("tree?a=b:c".into())
        );
    }
}
