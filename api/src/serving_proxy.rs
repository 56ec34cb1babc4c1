//! Model-serving endpoints' traffic (a surface): every manager serves each live endpoint on
//! the endpoint's own port (its URL: an origin of its own, like an app's), authorizes each
//! request in memory (public, or a token of that endpoint: `serving::tokens`), and forwards
//! it to a healthy replica chosen by traffic ratio, streaming both bodies. The routing table
//! comes from the database every second (`serving::refresh`); a request never waits on the
//! database. A request that finds no healthy replica while one is starting waits for it
//! (up to `WAIT_FOR_REPLICA`), then is answered 503.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::{StreamExt, TryStreamExt};
use uuid::Uuid;

use crate::error::ApiError;
use crate::error::IntoProblem as _;
use crate::serving::table::{Served, Upstream};
use crate::serving::tokens;
use crate::state::AppState;

/// How long a request waits for a starting replica, or retries a replica that does not take
/// connections yet (a bodiless request only).
const WAIT_FOR_REPLICA: Duration = Duration::from_secs(15);
/// How long a replica has to start its answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(600);

/// Answers of a model that would act on the whole host (every port, the console's origin
/// included): never forwarded.
const HOST_WIDE: &[&str] = &["clear-site-data", "strict-transport-security", "alt-svc"];
/// The cookies one answer of a model may set, and the size of each.
const MAX_MODEL_COOKIES: usize = 8;
const MAX_MODEL_COOKIE_BYTES: usize = 1024;

/// Headers that belong to one connection, never forwarded.
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

/// Keeps this manager's listeners in step with the routing table, refreshed every second.
pub async fn serve_loop(state: AppState) {
    let mut listeners: HashMap<Uuid, (u16, tokio::task::AbortHandle)> = HashMap::new();
    loop {
        match crate::serving::refresh(&state).await {
            Ok(all) => state.local.serving.replace(all),
            Err(e) => {
                tracing::warn!(error = %e.message, cause = %e.chain(), "reading the model-serving routes failed");
            }
        }
        // The leader gives new endpoints their ports, bound here before the URL is shown.
        if state.elected.cluster.is_leader()
            && let Err(e) = give_ports(&state, &mut listeners).await
        {
            tracing::warn!(error = %e.message, cause = %e.chain(), "giving endpoints their ports failed");
        }
        let want = state.local.serving.ports();
        listeners.retain(|id, (port, handle)| {
            let keep = want.iter().any(|(i, p)| i == id && p == port);
            if !keep {
                handle.abort();
            }
            keep
        });
        for (id, port) in want {
            if listeners.contains_key(&id) {
                continue;
            }
            // Another process on this host may hold it (another manager): it serves it.
            let Ok(listener) =
                tokio::net::TcpListener::bind((state.config.listen.ip(), port)).await
            else {
                continue;
            };
            listeners.insert(id, (port, listen(&state, id, port, listener)));
        }
        tokio::select! {
            _ = state.shutdown.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    for (_, (_, h)) in listeners {
        h.abort();
    }
}

/// Serves endpoint `id` on `listener` until shutdown or abort.
fn listen(
    state: &AppState,
    id: Uuid,
    port: u16,
    listener: tokio::net::TcpListener,
) -> tokio::task::AbortHandle {
    let router = router(state.clone(), id);
    let tls = state.tls.clone();
    let edge = crate::edge::Edge::of(&state.config);
    let stop = state.shutdown.clone();
    tracing::info!(endpoint = %id, port, "serving a model endpoint");
    tokio::spawn(async move {
        let served = crate::edge::serve(listener, tls, router, edge, async move {
            stop.cancelled().await;
        })
        .await;
        if let Err(e) = served {
            tracing::warn!(endpoint = %id, error = %e, "endpoint listener stopped");
        }
    })
    .abort_handle()
}

/// Binds a free port of `serving_port_pool` for each endpoint without one, records it, and
/// serves it; then reads the table again, so the endpoint answers from the moment its URL
/// is shown.
async fn give_ports(
    state: &AppState,
    listeners: &mut HashMap<Uuid, (u16, tokio::task::AbortHandle)>,
) -> crate::error::ApiResult<()> {
    let waiting = crate::serving::unported(state).await?;
    if waiting.is_empty() {
        return Ok(());
    }
    let pool = &state.config.serving_port_pool;
    let (lo, hi) = crate::sessions::apps::parse_port_range(pool).ok_or_else(|| {
        ApiError::internal(
            "giving an endpoint its port",
            format!("bad serving_port_pool '{pool}'"),
        )
    })?;
    let mut taken = crate::serving::taken_ports(state).await?;
    let span = u32::from(hi - lo) + 1;
    for e in waiting {
        let offset = rand::random::<u32>() % span;
        let mut bound = None;
        for i in 0..span {
            let p = lo + ((offset + i) % span) as u16;
            if taken.contains(&p) {
                continue;
            }
            if let Ok(l) = tokio::net::TcpListener::bind((state.config.listen.ip(), p)).await {
                bound = Some((p, l));
                break;
            }
        }
        let Some((port, listener)) = bound else {
            return Err(ApiError::conflict(format!(
                "No free port left in the serving port pool {lo}-{hi}"
            )));
        };
        if crate::serving::claim_port(state, e.id, port).await? {
            taken.insert(port);
            listeners.insert(e.id, (port, listen(state, e.id, port, listener)));
        }
    }
    state
        .local
        .serving
        .replace(crate::serving::refresh(state).await?);
    Ok(())
}

fn router(state: AppState, endpoint: Uuid) -> axum::Router {
    axum::Router::new().fallback(move |req: Request| {
        let state = state.clone();
        async move { with_cors(handle(&state, endpoint, req).await) }
    })
}

/// Any origin may call an endpoint (it is an API; its tokens are not cookies).
fn with_cors(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert("access-control-allow-origin", HeaderValue::from_static("*"));
    h.insert(
        "access-control-expose-headers",
        HeaderValue::from_static("*"),
    );
    resp
}

async fn handle(state: &AppState, endpoint: Uuid, req: Request) -> Response {
    if req.method() == Method::OPTIONS {
        return Response::builder()
            .status(StatusCode::NO_CONTENT)
            .header(
                "access-control-allow-methods",
                "GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS",
            )
            .header(
                "access-control-allow-headers",
                "authorization, content-type, accept",
            )
            .header("access-control-max-age", "600")
            .body(Body::empty())
            .unwrap_or_default();
    }
    let Some(served) = state.local.serving.get(endpoint) else {
        return ApiError::not_found("endpoint", endpoint).into_response();
    };
    if !served.public {
        match authorize(&served, req.headers(), state.clock.now().timestamp()) {
            Ok(Granted::Known) => {}
            // Signed for this endpoint but issued since the last refresh (perhaps through
            // another manager), or revoked: the database says which.
            Ok(Granted::Unknown(jti)) => {
                match crate::serving::token_is_live(state, endpoint, jti).await {
                    Ok(true) => state.local.serving.grant(endpoint, jti),
                    Ok(false) => return refuse("The token was revoked"),
                    Err(e) => return e.into_response(),
                }
            }
            Err(refused) => return refused,
        }
    }
    let max = state.config.serving_max_body_bytes;
    let declared = req
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return too_large(max);
    }
    match forward(state, endpoint, req, declared, max).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

fn too_large(max: u64) -> Response {
    ApiError::new(
        crate::error::ErrorCode::PayloadTooLarge,
        format!("The request body is larger than this endpoint takes ({max} bytes)"),
    )
    .into_response()
}

/// A token that verified: known live to the table, or to be checked once.
#[derive(Debug, PartialEq)]
enum Granted {
    Known,
    Unknown(Uuid),
}

fn refuse(why: &str) -> Response {
    ApiError::unauthenticated(why)
        .with_header("www-authenticate", "Bearer")
        .into_response()
}

/// A private endpoint's request carries a token of it (`Bearer` or `BackendAI`), signed with
/// its key and not expired.
#[allow(clippy::result_large_err)]
fn authorize(
    served: &Served,
    headers: &axum::http::HeaderMap,
    now: i64,
) -> Result<Granted, Response> {
    let Some(value) = headers.get("authorization").and_then(|v| v.to_str().ok()) else {
        return Err(refuse("Authorization header not provided"));
    };
    let Some((scheme, token)) = value.trim().split_once(' ') else {
        return Err(refuse("Invalid authorization header"));
    };
    if !scheme.eq_ignore_ascii_case("bearer") && !scheme.eq_ignore_ascii_case("backendai") {
        return Err(refuse("Unsupported authorization method"));
    }
    match tokens::verify(&served.token_key, token.trim(), served.endpoint, now) {
        Ok(c) if served.tokens.contains(&c.jti) => Ok(Granted::Known),
        Ok(c) if served.refused.contains(&c.jti) => Err(refuse("The token was revoked")),
        Ok(c) => Ok(Granted::Unknown(c.jti)),
        Err(tokens::Refusal::Expired) => Err(refuse("The token has expired")),
        Err(_) => Err(refuse("Invalid token")),
    }
}

/// One healthy replica, by traffic ratio (all alike when every ratio is 0).
fn choose(healthy: &[Upstream]) -> Option<&Upstream> {
    let total: f64 = healthy.iter().map(|u| u.traffic_ratio.max(0.0)).sum();
    if healthy.is_empty() {
        return None;
    }
    if total <= 0.0 {
        return healthy.get(rand::random::<usize>() % healthy.len());
    }
    let mut pick = rand::random::<f64>() * total;
    for u in healthy {
        pick -= u.traffic_ratio.max(0.0);
        if pick <= 0.0 && u.traffic_ratio > 0.0 {
            return Some(u);
        }
    }
    healthy.iter().rev().find(|u| u.traffic_ratio > 0.0)
}

/// A healthy replica of `endpoint`, waiting for a starting one if that is all there is.
async fn replica(
    state: &AppState,
    endpoint: Uuid,
    until: tokio::time::Instant,
) -> Result<Upstream, ApiError> {
    loop {
        let Some(s) = state.local.serving.get(endpoint) else {
            return Err(ApiError::not_found("endpoint", endpoint));
        };
        if let Some(u) = choose(&s.healthy) {
            return Ok(u.clone());
        }
        if s.starting == 0 || tokio::time::Instant::now() >= until {
            return Err(unavailable());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn unavailable() -> ApiError {
    ApiError::new(
        crate::error::ErrorCode::Unavailable,
        "No replica of this endpoint is ready to serve",
    )
    .with_header("retry-after", "5")
}

async fn forward(
    state: &AppState,
    endpoint: Uuid,
    req: Request,
    declared: Option<u64>,
    max: u64,
) -> Result<Response, ApiError> {
    let until = tokio::time::Instant::now() + WAIT_FOR_REPLICA;
    let method = reqwest::Method::from_bytes(req.method().as_str().as_bytes())
        .map_err(|_| ApiError::bad_request("unsupported method"))?;
    let path_and_query = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in req.headers() {
        let n = name.as_str();
        // bai's credential stays here; bai's cookies never reach a model.
        if HOP_BY_HOP.contains(&n) || n == "authorization" {
            continue;
        }
        if n == "cookie" {
            if let Some(kept) = crate::proxy::app_cookies(value.to_str().unwrap_or(""))
                && let Ok(v) = reqwest::header::HeaderValue::from_str(&kept)
            {
                headers.insert(reqwest::header::COOKIE, v);
            }
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            reqwest::header::HeaderName::from_bytes(n.as_bytes()),
            reqwest::header::HeaderValue::from_bytes(value.as_bytes()),
        ) {
            headers.append(n, v);
        }
    }
    // From the body itself: an HTTP/2 upload has neither a length nor `transfer-encoding`.
    let bodiless =
        declared == Some(0) || axum::body::HttpBody::size_hint(req.body()).exact() == Some(0);
    if let Some(host) = req.headers().get("host").cloned()
        && let Ok(v) = reqwest::header::HeaderValue::from_bytes(host.as_bytes())
    {
        headers.insert("x-forwarded-host", v);
    }
    let proto = if state.tls.is_some() { "https" } else { "http" };
    headers.insert(
        "x-forwarded-proto",
        reqwest::header::HeaderValue::from_static(proto),
    );
    let mut body = Some(req.into_body());
    let over = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (resp, up_addr) = loop {
        let up = replica(state, endpoint, until).await?;
        let url = format!("http://{}{path_and_query}", up.addr);
        let out = state
            .http
            .request(method.clone(), &url)
            .headers(headers.clone());
        let out = if bodiless {
            out
        } else {
            let Some(b) = body.take() else {
                return Err(unavailable());
            };
            out.body(reqwest::Body::wrap_stream(bounded(b, max, over.clone())))
        };
        let sent = tokio::time::timeout(ANSWER_TIMEOUT, out.send()).await;
        // The body ran past the limit: whatever the model made of the part it got.
        if over.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(too_large(max));
        }
        match sent {
            Ok(Ok(r)) => break (r, up.addr),
            // Not listening yet (just started): a bodiless request tries again.
            Ok(Err(e)) if e.is_connect() && bodiless && tokio::time::Instant::now() < until => {
                tracing::debug!(%endpoint, route = %up.route, error = %e, "replica not taking connections yet");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok(Err(e)) => {
                let reference = Uuid::new_v4();
                tracing::warn!(%reference, %endpoint, route = %up.route, error = %e, "endpoint request failed");
                return Ok(gateway(
                    StatusCode::BAD_GATEWAY,
                    format!("The model did not answer (reference {reference})."),
                ));
            }
            Err(_) => {
                return Ok(gateway(
                    StatusCode::GATEWAY_TIMEOUT,
                    "The model did not answer in time.".into(),
                ));
            }
        }
    };
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut builder = Response::builder().status(status);
    let mut cookies = 0usize;
    for (name, value) in resp.headers() {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n) || HOST_WIDE.contains(&n) {
            continue;
        }
        // A redirect stays on the endpoint: relative, or made relative when it names the
        // replica itself; anything else (another host, a scheme) is dropped.
        if n == "location" {
            if let Some(l) = value
                .to_str()
                .ok()
                .and_then(|l| crate::proxy::safe_location(l, up_addr))
            {
                builder = builder.header("location", l);
            }
            continue;
        }
        // A few small cookies of the model's own, no more: cookies are per host, and a flood
        // of them would make the host's other pages (the console) refuse the browser.
        if n == "set-cookie" {
            cookies += 1;
            if cookies > MAX_MODEL_COOKIES || value.len() > MAX_MODEL_COOKIE_BYTES {
                continue;
            }
        }
        // A model may not plant or replace bai's cookies (cookies are per host, not port).
        if n == "set-cookie"
            && value
                .to_str()
                .map(|v| crate::proxy::is_bai_cookie(v.split('=').next().unwrap_or(v)))
                .unwrap_or(true)
        {
            continue;
        }
        if let Ok(n) = HeaderName::from_bytes(n.as_bytes()) {
            builder = builder.header(n, value.as_bytes());
        }
    }
    let stream = resp.bytes_stream().map_err(std::io::Error::other);
    builder
        .body(Body::from_stream(stream))
        .map_err(|e| ApiError::internal("building a proxied answer", e))
}

/// A replica that failed the request (problem+json, as bai's other answers).
fn gateway(status: StatusCode, msg: String) -> Response {
    let body = serde_json::json!({
        "type": "https://api.backend.ai/probs/bad-gateway",
        "title": msg,
        "status": status.as_u16(),
    });
    (
        status,
        [("content-type", "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}

/// The body streamed, cut with an error past `max` bytes (`over` then says so).
fn bounded(
    body: Body,
    max: u64,
    over: Arc<std::sync::atomic::AtomicBool>,
) -> impl futures_util::Stream<Item = Result<axum::body::Bytes, std::io::Error>> + Send + 'static {
    let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
    body.into_data_stream().map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        let n = seen.fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed)
            + chunk.len() as u64;
        if n > max {
            over.store(true, std::sync::atomic::Ordering::Relaxed);
            return Err(std::io::Error::other(TooLarge));
        }
        Ok(chunk)
    })
}

#[derive(Debug)]
struct TooLarge;
impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("request body over the endpoint's limit")
    }
}
impl std::error::Error for TooLarge {}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(ratio: f64) -> Upstream {
        Upstream {
            route: Uuid::new_v4(),
            session: Uuid::new_v4(),
            addr: "127.0.0.1:1".parse().unwrap(),
            traffic_ratio: ratio,
        }
    }

    #[test]
    fn traffic_follows_the_ratios() {
        assert!(choose(&[]).is_none());
        let routes = [up(0.0), up(3.0), up(1.0)];
        let mut counts = [0usize; 3];
        for _ in 0..4000 {
            let u = choose(&routes).unwrap();
            let i = routes.iter().position(|r| r.route == u.route).unwrap();
            counts[i] += 1;
        }
        assert_eq!(
            counts[0], 0,
            "a route at ratio 0 gets nothing while others take traffic"
        );
        assert!((2700..3300).contains(&counts[1]), "{counts:?}");
        let zero = [up(0.0), up(0.0)];
        assert!(choose(&zero).is_some(), "all at 0: all alike");
    }

    #[test]
    fn private_endpoints_take_their_own_live_tokens_only() {
        let ep = Uuid::new_v4();
        let key = tokens::new_key();
        let claims = |jti| tokens::Claims {
            jti,
            endpoint: ep,
            user: Uuid::new_v4(),
            iat: 0,
            exp: 100,
        };
        let (live, revoked) = (Uuid::new_v4(), Uuid::new_v4());
        let served = Served {
            endpoint: ep,
            port: 1,
            public: false,
            token_key: key.clone(),
            tokens: [live].into_iter().collect(),
            healthy: vec![],
            starting: 0,
            refused: Default::default(),
        };
        let with = |v: &str| {
            let mut h = axum::http::HeaderMap::new();
            h.insert("authorization", v.parse().unwrap());
            h
        };
        let good = tokens::sign(&key, &claims(live)).unwrap();
        assert_eq!(
            authorize(&served, &with(&format!("Bearer {good}")), 50).ok(),
            Some(Granted::Known)
        );
        assert_eq!(
            authorize(&served, &with(&format!("BackendAI {good}")), 50).ok(),
            Some(Granted::Known)
        );
        let status = |r: Result<Granted, Response>| r.unwrap_err().status();
        assert_eq!(
            status(authorize(&served, &axum::http::HeaderMap::new(), 50)),
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            status(authorize(&served, &with(&format!("Bearer {good}")), 100)),
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            status(authorize(&served, &with(&format!("Basic {good}")), 50)),
            StatusCode::UNAUTHORIZED
        );
        // Not known to the table: the database decides (revoked, or issued since).
        let gone = tokens::sign(&key, &claims(revoked)).unwrap();
        assert_eq!(
            authorize(&served, &with(&format!("Bearer {gone}")), 50).ok(),
            Some(Granted::Unknown(revoked))
        );
        // Another endpoint's key: refused outright.
        let other = tokens::sign(&tokens::new_key(), &claims(live)).unwrap();
        assert_eq!(
            status(authorize(&served, &with(&format!("Bearer {other}")), 50)),
            StatusCode::UNAUTHORIZED
        );
    }
}
