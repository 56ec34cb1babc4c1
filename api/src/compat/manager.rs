//! `/manager/status` (superadmins: this manager's state, as `backend.ai admin manager status`
//! shows it), `/resource/recalculate-usage` (the Maintenance page's "recalculate usage"), and
//! the Backend.AI calls for which bai has no counterpart: each answers a clear "not supported
//! by this server" problem naming what bai does instead, never a 404 that reads like a typo.
//! `/license`, `/totp` and the usage statistics stay 404, as an open-source Backend.AI without
//! those plugins answers (Lablup's Web UI reads that 404 so).
use axum::extract::State;
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::json;

use super::{caller, reply};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::state::AppState;

/// `GET /manager/status`: Backend.AI's answer for this manager (one node: the process that
/// answers), with the sessions holding resources across the installation.
pub(super) async fn status(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Response {
    reply(
        async {
            let scope = caller(&principal)?.require_superadmin()?;
            let active = crate::sessions::count_allocated(&state.db, &scope).await?;
            let addr = state
                .config
                .advertise_addr
                .clone()
                .unwrap_or_else(|| state.config.listen.to_string());
            Ok(Json(json!({
                "nodes": [{
                    "id": state.instance_id,
                    "num_proc": 1,
                    "service_addr": addr,
                    "heartbeat_timeout": state.config.heartbeat_secs * u64::from(state.config.agent_lost_after_misses),
                    "ssl_enabled": state.config.tls_cert.is_some(),
                    "active_sessions": active,
                    "status": "running",
                    "version": crate::VERSION,
                    "api_version": crate::API_VERSION,
                }],
                "status": "running",
                "active_sessions": active,
            }))
            .into_response())
        }
        .await,
    )
}

/// `POST /resource/recalculate-usage` (superadmins): matches containers and sessions again and
/// recounts what every agent holds, as the Maintenance page's button does.
pub(super) async fn recalculate_usage(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Response {
    reply(
        async {
            caller(&principal)?.require_superadmin()?;
            crate::sessions::reconcile::sweep(&state).await?;
            crate::agents::refresh_agent_usage(&state).await?;
            Ok(Json(json!({})).into_response())
        }
        .await,
    )
}

/// What bai does instead of a Backend.AI call it has no counterpart for.
fn instead(method: &Method, path: &str) -> &'static str {
    match path {
        p if p == "/manager/status" && method != Method::GET => {
            "freezing the manager: bai ends no sessions on request; stop or restart `bai serve` (it drains requests and keeps sessions running)"
        }
        p if p.starts_with("/config/") => {
            "etcd configuration: bai reads a TOML file and its environment (`bai check-config`, README: Configuration)"
        }
        p if p.starts_with("/resource/watcher") => {
            "the agent watcher: bai's agents live inside the server process; restart `bai serve`"
        }
        p if p.starts_with("/logs/error") => {
            "the error-log API: bai writes errors to its own log (stderr or the journal, `log_format`)"
        }
        _ => "this call",
    }
}

/// A Backend.AI call bai does not have: a clear problem, for any method.
pub(super) async fn unsupported(
    Extension(principal): Extension<Principal>,
    method: Method,
    uri: Uri,
) -> Response {
    reply(
        async {
            caller(&principal)?;
            Err::<Response, _>(ApiError::bad_request(format!(
                "{} is not supported by this server ({method} {})",
                instead(&method, uri.path()),
                uri.path()
            )))
        }
        .await,
    )
}
