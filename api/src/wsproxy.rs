//! Backend.AI's app-proxy protocol ("wsproxy", version 1), spoken by Lablup's consoles to open
//! an app: Console 21.02, and Web UI 26 once `GET /scaling-groups/{name}/wsproxy-version` says
//! `v1`. The consoles find it at their web server's `wsproxy` URL; pointed at bai, bai answers
//! with its own app proxy, so each app keeps its own origin (a pool port) and its per-launch
//! token:
//!
//! 1. `PUT /conf` `{mode, endpoint, session | access_key + secret_key}` proves who asks: in
//!    `SESSION` mode by asking the console's web server (`endpoint`, one of
//!    `app_proxy_origins`: never a URL a caller makes up) whom its login session
//!    (`AIOHTTP_SESSION`) belongs to; in `DEFAULT` mode by the keypair's secret. The answer is
//!    `{"token"}`: a login of that user for an hour.
//! 2. `GET /proxy/{token}/{session}/add?app=…[&port=…][&open_to_public=true]` starts the app
//!    as `start_service` does (owner or superadmin; a stranger's session is NOT_FOUND) and
//!    answers `{"code": 200, "proxy", "url", "port"}`: the app's address on its pool port with
//!    its token; the console adds `&redirect=/tree` and opens it.
//! 3. `GET /proxy/{token}/{session}` and `…/delete` (at a session's end): bai keeps no state
//!    per console (an app's port closes with its session), so `{"code": 404}` and
//!    `{"code": 200}`.
//!
//! Answers carry CORS for the consoles' origins (`app_proxy_origins`) only; without that
//! setting the protocol is off (403 with what to set).
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use serde::Deserialize;
use serde_json::json;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, IntoProblem as _};
use crate::state::AppState;

/// How long a token from `/conf` opens apps.
const TOKEN_TTL_SECS: u64 = 3600;
/// How long the console's web server may take to say whose login session it is.
const WEB_SERVER_WAIT: Duration = Duration::from_secs(5);

pub fn router(state: AppState) -> axum::Router {
    axum::Router::new()
        .route("/conf", put(conf).post(conf).options(preflight))
        .route("/proxy/{token}/{session}/add", get(add).options(preflight))
        .route(
            "/proxy/{token}/{session}/delete",
            get(delete).options(preflight),
        )
        .route("/proxy/{token}/{session}", get(status).options(preflight))
        .with_state(state)
}

/// The request's origin, when it is one of the consoles that may use bai as their app proxy.
pub(crate) fn console_origin(state: &AppState, headers: &HeaderMap) -> Option<HeaderValue> {
    let origin = headers.get(header::ORIGIN)?;
    let o = origin.to_str().ok()?.trim_end_matches('/');
    state
        .config
        .app_proxy_origins
        .iter()
        .any(|allowed| allowed.trim_end_matches('/').eq_ignore_ascii_case(o))
        .then(|| origin.clone())
}

/// `resp` with CORS headers for a console's origin (none for any other).
pub(crate) fn with_cors(state: &AppState, headers: &HeaderMap, mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
    if let Some(origin) = console_origin(state, headers) {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, PUT, POST, OPTIONS"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("content-type, accept"),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
    }
    resp
}

async fn preflight(State(state): State<AppState>, headers: HeaderMap) -> Response {
    with_cors(&state, &headers, StatusCode::NO_CONTENT.into_response())
}

fn protocol_on(state: &AppState) -> ApiResult<()> {
    if state.config.app_proxy_origins.is_empty() {
        return Err(ApiError::forbidden(
            "bai answers Backend.AI's app-proxy protocol only for the consoles named in app_proxy_origins (their web server's origin); set it to open apps from Lablup's consoles",
        ));
    }
    Ok(())
}

#[derive(Deserialize)]
struct Conf {
    #[serde(default)]
    mode: Option<String>,
    endpoint: Option<String>,
    session: Option<String>,
    access_key: Option<String>,
    secret_key: Option<String>,
}

/// `PUT /conf`: who asks, proven; a token to open apps with.
async fn conf(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let answer = async {
        protocol_on(&state)?;
        let c: Conf = serde_json::from_slice(&body).map_err(|e| {
            ApiError::bad_request(format!(
                "expected the app proxy's configuration (JSON): {e}"
            ))
        })?;
        let user = match c.mode.as_deref().unwrap_or("DEFAULT") {
            "SESSION" => {
                let endpoint = c.endpoint.as_deref().unwrap_or_default();
                let session = c.session.as_deref().unwrap_or_default();
                let access_key = session_owner(&state, endpoint, session).await?;
                crate::auth::credentials::keypair_user(&state, &access_key, None).await?
            }
            "DEFAULT" => {
                let (Some(ak), Some(sk)) = (c.access_key.as_deref(), c.secret_key.as_deref())
                else {
                    return Err(ApiError::bad_request(
                        "access_key and secret_key are required (or mode SESSION)",
                    ));
                };
                crate::auth::credentials::keypair_user(&state, ak, Some(sk)).await?
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown mode '{other}' (SESSION or DEFAULT)"
                )));
            }
        };
        let token = crate::accounts::login_of(
            &state,
            user,
            TOKEN_TTL_SECS,
            Some("app proxy (Backend.AI wsproxy v1)".into()),
        )
        .await?
        .token;
        Ok(Json(json!({"token": token})).into_response())
    }
    .await;
    with_cors(
        &state,
        &headers,
        answer.unwrap_or_else(|e: ApiError| e.into_response()),
    )
}

/// The access key a console's web server says its login session `session` is of; only web
/// servers of `app_proxy_origins` are asked.
async fn session_owner(state: &AppState, endpoint: &str, session: &str) -> ApiResult<String> {
    let endpoint = endpoint.trim_end_matches('/');
    let known = state
        .config
        .app_proxy_origins
        .iter()
        .any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(endpoint));
    if !known {
        return Err(ApiError::forbidden(format!(
            "'{endpoint}' is not a console this server answers (app_proxy_origins)"
        )));
    }
    let well_formed = !session.is_empty()
        && session.len() <= 256
        && session
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !well_formed {
        return Err(ApiError::unauthenticated("Login required."));
    }
    let asked = state
        .http
        .post(format!("{endpoint}/server/login-check"))
        .header(header::COOKIE, format!("AIOHTTP_SESSION={session}"))
        .header(header::ACCEPT, "application/json")
        .timeout(WEB_SERVER_WAIT)
        .send()
        .await
        .map_err(|e| {
            tracing::warn!(endpoint, error = %e, "asking a console's web server whose login it is failed");
            ApiError::new(
                crate::error::ErrorCode::Unavailable,
                "the console's web server did not answer",
            )
        })?;
    let said: serde_json::Value = asked
        .json()
        .await
        .map_err(|_| ApiError::unauthenticated("Login required."))?;
    match (
        said["authenticated"].as_bool(),
        said["data"]["access_key"].as_str(),
    ) {
        (Some(true), Some(ak)) => Ok(ak.to_string()),
        _ => Err(ApiError::unauthenticated("Login required.")),
    }
}

#[derive(Deserialize)]
struct AddQuery {
    app: String,
    port: Option<u16>,
    open_to_public: Option<String>,
}

/// `GET /proxy/{token}/{session}/add?app=…`: the app started, and where the browser opens it.
async fn add(
    State(state): State<AppState>,
    Path((token, session)): Path<(String, String)>,
    Query(q): Query<AddQuery>,
    headers: HeaderMap,
) -> Response {
    let answer = async {
        protocol_on(&state)?;
        let caller = crate::auth::credentials::caller_from_token(&state, &token)
            .await?
            .ok_or_else(|| {
                ApiError::unauthenticated("The app proxy's token is invalid or has expired.")
            })?;
        let principal = Principal::User(Arc::new(caller));
        let id = session
            .parse::<uuid::Uuid>()
            .map_err(|_| ApiError::not_found("session", &session))?;
        let opts = crate::proxy::StartOptions {
            public: q.open_to_public.as_deref() == Some("true"),
            // The console sends a port only when the user asked for one.
            preferred_port: q.port.filter(|p| *p > 1024),
        };
        let started = crate::proxy::start(&state, &principal, id, &q.app, opts).await?;
        let port = started.port.unwrap_or_default();
        let proxy = crate::proxy::app_origin(&state, &headers, port)?;
        let url = if started.url.is_empty() {
            String::new()
        } else {
            format!("{proxy}{}", started.url)
        };
        Ok(Json(json!({"code": 200, "proxy": proxy, "url": url, "port": port})).into_response())
    }
    .await;
    with_cors(
        &state,
        &headers,
        answer.unwrap_or_else(|e: ApiError| e.into_response()),
    )
}

/// `GET /proxy/{token}/{session}`: bai keeps nothing per console to clean up.
async fn status(State(state): State<AppState>, headers: HeaderMap) -> Response {
    with_cors(&state, &headers, Json(json!({"code": 404})).into_response())
}

/// `GET /proxy/{token}/{session}/delete`: nothing to remove (an app's port closes with its
/// session).
async fn delete(State(state): State<AppState>, headers: HeaderMap) -> Response {
    with_cors(&state, &headers, Json(json!({"code": 200})).into_response())
}
