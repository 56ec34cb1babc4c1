//! `/resource/presets`, `/resource/check-presets`, `/scaling-groups`, `/config/resource-slots`.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use entity::resource_presets;
use sea_orm::{EntityTrait, QueryOrder};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Principal;
use crate::state::AppState;

use super::{caller, reply};

/// `GET /resource/presets`.
pub(super) async fn presets(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Response {
    reply(
        async {
            caller(&principal)?;
            let all = resource_presets::Entity::find()
                .order_by_asc(resource_presets::Column::Name)
                .all(&state.db)
                .await?;
            let presets: Vec<Value> = all
                .into_iter()
                .map(|p| {
                    json!({
                        "name": p.name,
                        "resource_slots": p.resource_slots,
                        "shared_memory": p.shared_memory.map(|m| m.to_string()),
                    })
                })
                .collect();
            Ok(Json(json!({"presets": presets})).into_response())
        }
        .await,
    )
}

#[derive(Deserialize, Default)]
pub(super) struct CheckPresets {
    scaling_group: Option<String>,
    group: Option<String>,
}

/// `POST /resource/check-presets`: limits, use and what is left, and which presets fit.
pub(super) async fn check_presets(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    body: Option<Json<CheckPresets>>,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let body = body.map(|b| b.0).unwrap_or_default();
            let group =
                crate::sessions::resolve_group(&state.db, caller, body.group.as_deref()).await?;
            let u = crate::graphql::sessions::resource_usage(
                &state,
                caller,
                Some(group.id),
                body.scaling_group,
            )
            .await?;
            let presets: Vec<Value> = u
                .presets
                .iter()
                .map(|p| {
                    json!({
                        "name": p.name,
                        "resource_slots": p.resource_slots.0,
                        "shared_memory": p.shared_memory.as_ref().map(|m| m.0.to_string()),
                        "allocatable": p.allocatable,
                    })
                })
                .collect();
            Ok(Json(json!({
                "keypair_limits": u.keypair_limits.0,
                "keypair_using": u.keypair_using.0,
                "keypair_remaining": u.keypair_remaining.0,
                "group_using": u.group_using.0,
                "scaling_group_remaining": u.scaling_group_remaining.0,
                "scaling_groups": {
                    u.scaling_group.clone(): {
                        "using": u.group_using.0,
                        "remaining": u.scaling_group_remaining.0,
                    }
                },
                "presets": presets,
            }))
            .into_response())
        }
        .await,
    )
}

#[derive(Deserialize, Default)]
pub(super) struct GroupQuery {
    group: Option<String>,
}

/// `GET /scaling-groups?group=`: the resource groups the caller may use.
pub(super) async fn scaling_groups(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Query(q): Query<GroupQuery>,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let group =
                crate::sessions::resolve_group(&state.db, caller, q.group.as_deref()).await?;
            let names = crate::scaling_groups::allowed_for(
                &state.db,
                &caller.domain_name,
                caller.uuid,
                Some(group.id),
                caller.access_key.as_deref(),
            )
            .await?;
            let list: Vec<Value> = names.into_iter().map(|n| json!({"name": n})).collect();
            Ok(Json(json!({"scaling_groups": list})).into_response())
        }
        .await,
    )
}

/// `GET /config/resource-slots`: the slot types this installation knows.
pub(super) async fn resource_slots(Extension(principal): Extension<Principal>) -> Response {
    reply(
        async {
            caller(&principal)?;
            let slots: serde_json::Map<String, Value> = entity::slots::KNOWN_SLOTS
                .iter()
                .map(|(name, kind)| (name.to_string(), json!(kind)))
                .collect();
            Ok(Json(Value::Object(slots)).into_response())
        }
        .await,
    )
}
