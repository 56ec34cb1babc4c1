//! Backend.AI's REST surface for its official client (`backend.ai` CLI and SDK), HMAC-signed
//! (see `auth::hmac`): sessions (`/session…`), the execute WebSocket and the session event
//! stream (`stream.rs`), resources, resource groups and slots (`resource.rs`), keypair
//! authorization (`auth.rs`). Every
//! handler delegates to the same functions the GraphQL API uses; errors are Backend.AI's
//! `application/problem+json`.
mod auth;
mod resource;
mod session;
mod session_calls;
mod stream;
mod template;

use axum::Router;
use axum::response::Response;
use axum::routing::{get, post};

use crate::auth::{Caller, Principal};
use crate::error::IntoProblem as _;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
pub(crate) use session::OwnNamed;

pub fn router(state: AppState) -> Router {
    // Bodies are bounded as GraphQL's are (`max_body_bytes`), not by the extractors' own 2 MiB;
    // an upload's route sets its own, larger bound.
    let body_limit = axum::extract::DefaultBodyLimit::max(state.config.max_body_bytes);
    Router::new()
        .route("/session", post(session::create))
        .route("/session/_/create", post(session::create))
        .route(
            "/session/_/create-from-template",
            post(session::create_from_template),
        )
        .route(
            "/template/session",
            get(template::list).post(template::create),
        )
        .route(
            "/template/session/{id}",
            get(template::get)
                .put(template::update)
                .delete(template::delete),
        )
        .route(
            "/session/{id}",
            get(session::info)
                .post(session_calls::execute)
                .delete(session::destroy),
        )
        .route("/session/{id}/logs", get(session::logs))
        .route(
            "/session/{id}/status-history",
            get(session_calls::status_history),
        )
        .route("/session/{id}/rename", post(session_calls::rename))
        .route(
            "/session/{id}/commit",
            get(session_calls::commit_status).post(session_calls::commit),
        )
        .route("/session/{id}/imagify", post(session_calls::imagify))
        .route(
            "/session/{id}/dependency-graph",
            get(session_calls::dependency_graph),
        )
        .route("/session/{id}/files", get(session_calls::list_files))
        .route(
            "/session/{id}/download",
            get(session_calls::download).post(session_calls::download),
        )
        .route(
            "/session/{id}/download_single",
            get(session_calls::download_single).post(session_calls::download_single),
        )
        .route(
            "/session/{id}/direct-access-info",
            get(session_calls::direct_access_info),
        )
        .route(
            "/session/{id}/upload",
            post(session::upload).layer(axum::extract::DefaultBodyLimit::max(
                session::MAX_UPLOAD + 1024 * 1024,
            )),
        )
        .route("/stream/session/{id}/execute", get(stream::execute))
        .route("/events/session", get(stream::session_events))
        .route("/events/background-task", get(stream::task_events))
        .route("/resource/presets", get(resource::presets))
        .route("/resource/check-presets", post(resource::check_presets))
        .route("/scaling-groups", get(resource::scaling_groups))
        .route("/config/resource-slots", get(resource::resource_slots))
        .route("/auth/authorize", post(auth::authorize))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::middleware::authenticate,
        ))
        .route_layer(axum::middleware::from_fn(check_version))
        .layer(body_limit)
        .with_state(state)
}

/// API versions Backend.AI's managers accept in `X-BackendAI-Version`.
const VERSIONS: &[&str] = &[
    "v4.20181215",
    "v4.20190115",
    "v4.20190315",
    "v4.20190615",
    "v5.20191215",
    "v6.20200815",
    "v6.20220315",
    "v6.20220615",
    "v6.20221201",
    "v6.20230315",
    "v7.20230615",
    "v8.20240315",
    "v8.20240915",
    "v9.20250722",
];

/// A request naming an API version Backend.AI never had is refused, as the manager does.
async fn check_version(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let given = req
        .headers()
        .get("x-backendai-version")
        .map(|v| v.to_str().unwrap_or("").to_string());
    match given {
        Some(v) if !VERSIONS.contains(&v.as_str()) => ApiError::bad_request(format!(
            "Unsupported API version '{v}' (supported: {})",
            VERSIONS.join(", ")
        ))
        .into_response(),
        _ => next.run(req).await,
    }
}

fn reply(r: ApiResult<Response>) -> Response {
    r.unwrap_or_else(crate::error::IntoProblem::into_response)
}

fn caller(p: &Principal) -> ApiResult<&Caller> {
    p.caller()
}
