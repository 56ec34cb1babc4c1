//! `/template/session…`: Backend.AI's session templates for its official client
//! (`backend.ai session-template …`) and consoles. A template someone may not see is
//! NOT_FOUND; parameters come from the JSON body, else the query string.
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Value, json};
use uuid::Uuid;

use super::session_calls::Params;
use super::{caller, reply};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::templates::{self, Scope};

fn text(p: &serde_json::Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| match p.get(*k) {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    })
}

fn template_id(raw: &str) -> ApiResult<Uuid> {
    raw.parse::<Uuid>()
        .map_err(|_| ApiError::not_found("session template", raw))
}

/// `POST /template/session` with `payload` (JSON or YAML), `group`, `scope`: the created
/// templates' ids.
pub(super) async fn create(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let payload = text(&p, &["payload"])
                .ok_or_else(|| ApiError::bad_request("'payload' (the template) is required"))?;
            if let Some(owner) = text(&p, &["owner_access_key"])
                && Some(owner.as_str()) != caller.access_key.as_deref()
            {
                return Err(ApiError::bad_request(
                    "Creating templates for another keypair (owner_access_key) is not supported",
                ));
            }
            let scope = text(&p, &["scope"])
                .map(|s| Scope::parse(&s))
                .transpose()?
                .unwrap_or(Scope::User);
            let group = text(&p, &["group", "group_name", "groupName"]);
            let created =
                templates::create(&state, caller, &payload, group.as_deref(), scope).await?;
            Ok(Json(
                created
                    .iter()
                    .map(|t| json!({"id": t.id.simple().to_string(), "user": t.user_uuid}))
                    .collect::<Vec<_>>(),
            )
            .into_response())
        }
        .await,
    )
}

/// `GET /template/session`: the templates the caller may see, with Backend.AI's keys.
pub(super) async fn list(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let list = templates::list(&state, caller).await?;
            let (emails, groups) = templates::names(&state, &list).await?;
            Ok(Json(
                list.into_iter()
                    .map(|t| {
                        json!({
                            "name": t.name,
                            "id": t.id.simple().to_string(),
                            "created_at": t.created_at.to_rfc3339(),
                            "is_owner": t.user_uuid == caller.uuid,
                            "user": t.user_uuid,
                            "group": t.group_id,
                            "user_email": emails.get(&t.user_uuid),
                            "group_name": t.group_id.and_then(|g| groups.get(&g)),
                            "domain_name": t.domain_name,
                            "type": t.template_type,
                            "scope": t.scope,
                            "is_active": t.is_active,
                            "template": t.template,
                        })
                    })
                    .collect::<Vec<_>>(),
            )
            .into_response())
        }
        .await,
    )
}

/// `GET /template/session/{id}`: the template (JSON whatever `format` asks, as Backend.AI).
pub(super) async fn get(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let t = templates::find(&state, caller, template_id(&id)?).await?;
            Ok(Json(json!({
                "template": t.template,
                "name": t.name,
                "user_uuid": t.user_uuid,
                "group_id": t.group_id,
                "domain_name": t.domain_name,
                "scope": t.scope,
            }))
            .into_response())
        }
        .await,
    )
}

/// `PUT /template/session/{id}` with `payload` (one template), optionally `scope`.
pub(super) async fn update(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let payload = text(&p, &["payload"])
                .ok_or_else(|| ApiError::bad_request("'payload' (the template) is required"))?;
            let scope = text(&p, &["scope"]).map(|s| Scope::parse(&s)).transpose()?;
            templates::update(
                &state,
                caller,
                template_id(&id)?,
                Some(&payload),
                None,
                scope,
            )
            .await?;
            Ok(Json(json!({"success": true})).into_response())
        }
        .await,
    )
}

/// `DELETE /template/session/{id}`.
pub(super) async fn delete(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            templates::delete(&state, caller, template_id(&id)?).await?;
            Ok(Json(json!({"success": true})).into_response())
        }
        .await,
    )
}
