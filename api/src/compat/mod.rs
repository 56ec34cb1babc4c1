//! Backend.AI's REST surface for its official client (`backend.ai` CLI and SDK), HMAC-signed
//! (see `auth::hmac`): sessions (`/session…`), the execute WebSocket and the session event
//! stream (`stream.rs`), resources, resource groups and slots (`resource.rs`), keypair
//! authorization (`auth.rs`). Every
//! handler delegates to the same functions the GraphQL API uses; errors are Backend.AI's
//! `application/problem+json`.
mod auth;
mod dotfile;
mod folder;
mod manager;
mod resource;
mod service;
mod session;
mod session_calls;
mod stream;
mod template;

use axum::Router;
use axum::response::Response;
use axum::routing::{any, delete, get, post};

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
        .route(
            "/resource/stats/user/month",
            get(resource::user_month_stats),
        )
        .route("/resource/check-presets", post(resource::check_presets))
        .route("/scaling-groups", get(resource::scaling_groups))
        .route(
            "/scaling-groups/{name}/wsproxy-version",
            get(resource::wsproxy_version),
        )
        .route("/config/resource-slots", get(resource::resource_slots))
        .route(
            "/user-config/dotfiles",
            get(dotfile::dotfiles)
                .post(dotfile::dotfiles)
                .patch(dotfile::dotfiles)
                .delete(dotfile::dotfiles),
        )
        .route(
            "/group-config/dotfiles",
            get(dotfile::dotfiles)
                .post(dotfile::dotfiles)
                .patch(dotfile::dotfiles)
                .delete(dotfile::dotfiles),
        )
        .route(
            "/domain-config/dotfiles",
            get(dotfile::dotfiles)
                .post(dotfile::dotfiles)
                .patch(dotfile::dotfiles)
                .delete(dotfile::dotfiles),
        )
        .route(
            "/manager/status",
            get(manager::status).fallback(manager::unsupported),
        )
        .route(
            "/resource/recalculate-usage",
            post(manager::recalculate_usage),
        )
        .route(
            "/config/resource-slots/details",
            get(resource::resource_slot_details),
        )
        .route("/config/get", post(manager::config_get))
        .route("/license", get(manager::license))
        .route("/config/{*rest}", any(manager::unsupported))
        .route("/resource/watcher", any(manager::unsupported))
        .route("/resource/watcher/{*rest}", any(manager::unsupported))
        .route("/logs/error", any(manager::unsupported))
        .route("/logs/error/{*rest}", any(manager::unsupported))
        .route("/services", get(service::list).post(service::create))
        .route("/services/_/search", post(service::search))
        .route("/services/_/runtimes", get(service::runtimes))
        .route("/services/{id}", get(service::info).delete(service::delete))
        .route("/services/{id}/errors", get(service::errors))
        .route("/services/{id}/errors/clear", post(service::clear_errors))
        .route("/services/{id}/scale", post(service::scale))
        .route("/services/{id}/sync", post(service::sync))
        .route(
            "/services/{id}/routings/{route}",
            axum::routing::put(service::update_route).delete(service::delete_route),
        )
        .route("/services/{id}/token", post(service::token))
        .route("/auth/authorize", post(auth::authorize))
        .route("/auth/logout", post(auth::logout))
        .route(
            "/folders",
            get(folder::list)
                .post(folder::create)
                .delete(folder::delete_by_id),
        )
        .route("/folders/_/id", get(folder::id_of))
        .route("/folders/_/hosts", get(folder::hosts))
        .route("/folders/_/all_hosts", get(folder::all_hosts))
        .route("/folders/_/all-hosts", get(folder::all_hosts))
        .route("/folders/_/allowed_types", get(folder::allowed_types))
        .route("/folders/_/allowed-types", get(folder::allowed_types))
        .route(
            "/folders/_/shared",
            get(folder::shared).post(folder::set_shared),
        )
        .route("/folders/restore-from-trash-bin", post(folder::restore))
        .route("/folders/delete-from-trash-bin", post(folder::purge))
        .route("/folders/purge", post(folder::purge))
        .route("/folders/invitations/list", get(folder::invitations))
        .route(
            "/folders/invitations/list-sent",
            get(folder::invitations_sent),
        )
        .route(
            "/folders/invitations/list_sent",
            get(folder::invitations_sent),
        )
        .route(
            "/folders/invitations/update/{inv_id}",
            post(folder::update_invitation),
        )
        .route("/folders/invitations/accept", post(folder::accept))
        .route(
            "/folders/invitations/delete",
            post(folder::decline).delete(folder::decline),
        )
        .route(
            "/folders/{name}",
            get(folder::info).delete(folder::delete_named),
        )
        .route("/folders/{name}/force", delete(folder::force_delete))
        .route("/folders/{name}/rename", post(folder::rename))
        .route(
            "/folders/{name}/update-options",
            post(folder::update_options),
        )
        .route("/folders/{name}/mkdir", post(folder::mkdir))
        .route("/folders/{name}/files", get(folder::files))
        .route("/folders/{name}/rename-file", post(folder::rename_file))
        .route("/folders/{name}/rename_file", post(folder::rename_file))
        .route("/folders/{name}/move-file", post(folder::move_file))
        .route(
            "/folders/{name}/delete-files",
            post(folder::delete_files).delete(folder::delete_files),
        )
        .route("/folders/{name}/delete_files", delete(folder::delete_files))
        .route(
            "/folders/{name}/request-upload",
            post(folder::request_upload),
        )
        .route(
            "/folders/{name}/request-download",
            post(folder::request_download),
        )
        .route("/folders/{name}/invite", post(folder::invite))
        .route("/folders/{name}/leave", post(folder::leave))
        .route("/folders/{name}/share", post(folder::share))
        .route(
            "/folders/{name}/unshare",
            post(folder::unshare).delete(folder::unshare),
        )
        .route("/folders/{name}/clone", post(folder::clone))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::middleware::authenticate,
        ))
        .route_layer(axum::middleware::from_fn(check_version))
        .layer(body_limit)
        .with_state(state)
}

/// The transfers of Backend.AI's storage-proxy flow (`/folders/_/transfer/…`): the token in
/// the query is the only credential (its client sends no signature there), and an upload's
/// body is bounded by the size it declared, not by the API's body limit.
pub fn transfer_router(state: AppState) -> Router {
    Router::new()
        .route(
            "/folders/_/transfer/upload",
            axum::routing::patch(folder::upload_patch)
                .head(folder::upload_head)
                .options(folder::upload_options)
                .layer(axum::middleware::map_response(folder::tus_cors)),
        )
        .route("/folders/_/transfer/download", get(folder::download))
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
    "v6.20210815",
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
