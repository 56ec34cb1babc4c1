//! `/manager/status` (superadmins: this manager's state, as `backend.ai admin manager status`
//! shows it), `/resource/recalculate-usage` (the Maintenance page's "recalculate usage"), and
//! the Backend.AI calls for which bai has no counterpart: each answers a clear "not supported
//! by this server" problem naming what bai does instead, never a 404 that reads like a typo.
//! `/config/get` answers, read-only, the keys Lablup's consoles read from Backend.AI's etcd;
//! `/license` answers that bai is open source. `/totp` stays 404, as an open-source Backend.AI
//! without that plugin answers.
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
            let active = crate::sessions::count_allocated(&state.read, &scope).await?;
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

/// `POST /config/get` `{key, prefix}` (superadmins): Backend.AI keeps its configuration in etcd
/// and Lablup's consoles read a few keys of it (Configurations, Registries); bai answers them,
/// read-only, from what it has — images are pulled or copied when an agent lacks their tag
/// (`tag`), the default resource group's scheduler, the registries without their passwords —
/// and every other key as etcd answers an unset one: `null`. Writing (`/config/set`,
/// `/config/delete`) stays refused with what to do instead.
pub(super) async fn config_get(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    body: axum::body::Bytes,
) -> Response {
    #[derive(serde::Deserialize)]
    struct Ask {
        key: String,
        #[serde(default)]
        prefix: bool,
    }
    reply(
        async {
            let scope = caller(&principal)?.require_superadmin()?;
            let ask: Ask = serde_json::from_slice(&body).map_err(|e| {
                ApiError::bad_request(format!("expected {{\"key\": …, \"prefix\": …}}: {e}"))
            })?;
            let key = ask.key.trim_matches('/');
            let registry = |r: &entity::container_registries::Model| {
                json!({
                    "": r.url,
                    "type": r.registry_type.as_str(),
                    "project": r.project.clone().unwrap_or_default(),
                    "username": r.username.clone().unwrap_or_default(),
                    "ssl_verify": r.ssl_verify,
                })
            };
            let result = match key {
                "config/docker/image/auto_pull" => json!("tag"),
                "config/plugins/scheduler" => {
                    let default = &state.config.agent_scaling_group;
                    crate::scaling_groups::scheduler_of(&state.read, default)
                        .await?
                        .map_or(serde_json::Value::Null, |s| json!(s))
                }
                // Keys as Backend.AI's etcd prefix reads give them: unquoted (`host:5000`).
                "config/docker/registry" if ask.prefix => {
                    let all = crate::registries::list(&state.read, &scope).await?;
                    let map: serde_json::Map<String, serde_json::Value> = all
                        .iter()
                        .map(|r| (r.hostname.clone(), registry(r)))
                        .collect();
                    serde_json::Value::Object(map)
                }
                k => match k.strip_prefix("config/docker/registry/") {
                    Some(host) if ask.prefix && !host.contains('/') => {
                        let host = percent_encoding::percent_decode_str(host).decode_utf8_lossy();
                        match crate::registries::find(&state.read, &host).await {
                            Ok(r) => registry(&r),
                            Err(_) => serde_json::Value::Null,
                        }
                    }
                    _ => serde_json::Value::Null,
                },
            };
            Ok(Json(json!({"result": result})).into_response())
        }
        .await,
    )
}

/// `GET /license`: bai is open source (its licence, no key, no expiry), as Lablup's consoles
/// show a licence: never an error where they ask.
pub(super) async fn license(Extension(principal): Extension<Principal>) -> Response {
    reply(
        async {
            caller(&principal)?;
            Ok(Json(json!({
                "status": "valid",
                "certificate": {
                    "type": "open-source",
                    "licensee": format!("bai, open source ({})", env!("CARGO_PKG_LICENSE")),
                    "licenseKey": "",
                    "key": "",
                    "expiration": "never",
                },
            }))
            .into_response())
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
