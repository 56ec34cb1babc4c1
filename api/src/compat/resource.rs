//! `/resource/presets`, `/resource/check-presets`, `/scaling-groups`, `/config/resource-slots`.

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
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
            let all = crate::presets::list_by_name(&state.read).await?;
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
                crate::sessions::resolve_group(&state.read, caller, body.group.as_deref()).await?;
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
            // Backend.AI's shape: every known slot in every map ("Infinity" where unlimited,
            // "0" where nothing is used or left), which Lablup's consoles read unguarded.
            let remaining = full(&u.keypair_remaining.0, |_| "Infinity");
            let keypair_limits = full(&u.keypair_limits.0, |slot| {
                if remaining.get(slot) == Some(&json!("Infinity")) {
                    "Infinity"
                } else {
                    "0"
                }
            });
            let group_limits = full(&u.group_limits.0, |_| "Infinity");
            let group_using = full(&u.group_using.0, |_| "0");
            let group_remaining: serde_json::Map<String, Value> = group_limits
                .iter()
                .map(|(slot, limit)| {
                    let left = match (decimal(limit), decimal(&group_using[slot])) {
                        (Some(l), Some(used)) => {
                            json!((l - used).max(rust_decimal::Decimal::ZERO).to_string())
                        }
                        _ => json!("Infinity"),
                    };
                    (slot.clone(), left)
                })
                .collect();
            let sg_remaining = full(&u.scaling_group_remaining.0, |_| "0");
            Ok(Json(json!({
                "keypair_limits": keypair_limits,
                "keypair_using": full(&u.keypair_using.0, |_| "0"),
                "keypair_remaining": remaining,
                "group_limits": group_limits,
                "group_using": group_using,
                "group_remaining": group_remaining,
                "scaling_group_remaining": sg_remaining,
                "scaling_groups": {
                    u.scaling_group.clone(): {
                        "using": full(&u.keypair_using_in_scaling_group.0, |_| "0"),
                        "remaining": sg_remaining,
                    }
                },
                "presets": presets,
            }))
            .into_response())
        }
        .await,
    )
}

/// `map` with every known slot: its own value as a string, else `missing(slot)`.
fn full(map: &Value, missing: impl Fn(&str) -> &'static str) -> serde_json::Map<String, Value> {
    entity::slots::KNOWN_SLOTS
        .iter()
        .map(|(slot, _)| {
            let v = match map.get(*slot) {
                Some(Value::String(s)) => json!(s),
                Some(Value::Number(n)) => json!(n.to_string()),
                _ => json!(missing(slot)),
            };
            (slot.to_string(), v)
        })
        .collect()
}

fn decimal(v: &Value) -> Option<rust_decimal::Decimal> {
    v.as_str().and_then(|s| s.parse().ok())
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
                crate::sessions::resolve_group(&state.read, caller, q.group.as_deref()).await?;
            let names = crate::scaling_groups::allowed_for(
                &state.read,
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

/// `GET /config/resource-slots/details` (`?sgroup=` accepted): how Lablup's consoles name and
/// show each slot type, as Backend.AI's accelerator plugins describe them.
pub(super) async fn resource_slot_details(Extension(principal): Extension<Principal>) -> Response {
    reply(
        async {
            caller(&principal)?;
            let detail = |slot: &str| {
                let (name, unit, binary, round, icon) = match slot {
                    "cpu" => ("CPU", "Core", false, 0, "cpu"),
                    "mem" => ("RAM", "GiB", true, 0, "mem"),
                    "cuda.device" => ("GPU", "GPU", false, 0, "gpu1"),
                    "cuda.shares" => ("fGPU", "fGPU", false, 2, "gpu1"),
                    other => (other, "", false, 0, ""),
                };
                json!({
                    "slot_name": slot,
                    "description": name,
                    "human_readable_name": name,
                    "display_unit": unit,
                    "number_format": {"binary": binary, "round_length": round},
                    "display_icon": icon,
                })
            };
            let slots: serde_json::Map<String, Value> = entity::slots::KNOWN_SLOTS
                .iter()
                .map(|(name, _)| (name.to_string(), detail(name)))
                .collect();
            Ok(Json(Value::Object(slots)).into_response())
        }
        .await,
    )
}

/// `GET /resource/stats/user/month`: the caller's use over the last 30 days as Backend.AI
/// answers it (Lablup's consoles chart it): a value per quarter hour, oldest first, from bai's
/// usage series — average sessions running, cores, memory and GPUs allocated in it (an hour's
/// or a day's average where no finer bucket is kept). bai's series have no block I/O or disk
/// figures: those values are null, never a made-up zero.
pub(super) async fn user_month_stats(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Response {
    use crate::statistics::{Period, Scope};
    reply(
        async {
            let caller = caller(&principal)?;
            let most = Period::Month.secs() / crate::statistics::QUARTER_HOUR;
            let series = crate::statistics::series_of_at_most(
                &state,
                caller,
                Scope::User,
                None,
                Period::Month,
                most,
            )
            .await?;
            let counted = |v: f64| json!({"value": (v * 1000.0).round() / 1000.0, "unit_hint": "count"});
            let unknown = || json!({"value": null, "unit_hint": "bytes"});
            let bins: Vec<Value> = crate::statistics::quarter_hours(&series)
                .into_iter()
                .map(|(ts, f)| {
                    json!({
                        "date": ts as f64,
                        "num_sessions": counted(f.secs),
                        "cpu_allocated": counted(f.cpu_alloc),
                        "mem_allocated": {"value": f.mem_alloc.round() as i64, "unit_hint": "bytes"},
                        "gpu_allocated": counted(f.gpu_alloc),
                        "io_read_bytes": unknown(),
                        "io_write_bytes": unknown(),
                        "disk_used": unknown(),
                    })
                })
                .collect();
            Ok(Json(Value::Array(bins)).into_response())
        }
        .await,
    )
}

/// `GET /scaling-groups/{name}/wsproxy-version`: the app-proxy protocol Lablup's Web UI speaks
/// for the group's sessions: `v1`, which bai's own app proxy answers (`wsproxy`); a group the
/// caller may not see is NOT_FOUND.
pub(super) async fn wsproxy_version(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            crate::scaling_groups::find_visible(&state.read, caller, &name).await?;
            Ok(Json(json!({"wsproxy_version": "v1"})).into_response())
        }
        .await,
    )
}
