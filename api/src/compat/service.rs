//! `/services…`: Backend.AI's model serving for its official client (`backend.ai service …`),
//! its tester and consoles — endpoints, their routes, scaling and tokens, over the serving
//! service (`serving`). An endpoint the caller may not act on is NOT_FOUND, before anything
//! else; a malformed id is Backend.AI's 400.
use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use entity::{endpoints, routings};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::session_calls::Params;
use super::{caller, reply};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::serving::{self, NewService, route_status};
use crate::state::AppState;

fn invalid(m: impl Into<String>) -> ApiError {
    ApiError::bad_request(m).with_error_code("api_parsing_invalid-parameters")
}

fn id_of(raw: &str, what: &str) -> ApiResult<Uuid> {
    raw.parse::<Uuid>()
        .map_err(|_| invalid(format!("'{raw}' is not a {what} id (a UUID)")))
}

/// The caller and the service `raw` names, when the caller may act on it: a malformed id is
/// Backend.AI's 400, anyone else's service NOT_FOUND, before any parameter is looked at.
async fn service_of<'a>(
    state: &AppState,
    principal: &'a Principal,
    raw: &str,
) -> ApiResult<(&'a crate::auth::Caller, endpoints::Model)> {
    let caller = caller(principal)?;
    let e = serving::find(state, caller, id_of(raw, "service")?).await?;
    Ok((caller, e))
}

/// The first of `keys` present (Backend.AI accepts each field by its name or alias).
fn field<'a>(p: &'a Map<String, Value>, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().find_map(|k| p.get(*k).filter(|v| !v.is_null()))
}

fn text(p: &Map<String, Value>, keys: &[&str]) -> ApiResult<Option<String>> {
    match field(p, keys) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(format!("'{}' must be text", keys[0]))),
    }
}

fn integer(p: &Map<String, Value>, keys: &[&str]) -> ApiResult<Option<i64>> {
    match field(p, keys) {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| invalid(format!("'{}' must be a whole number", keys[0]))),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| invalid(format!("'{}' must be a whole number", keys[0]))),
        Some(_) => Err(invalid(format!("'{}' must be a whole number", keys[0]))),
    }
}

fn flag(p: &Map<String, Value>, keys: &[&str]) -> ApiResult<Option<bool>> {
    match field(p, keys) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        Some(_) => Err(invalid(format!("'{}' must be true or false", keys[0]))),
    }
}

/// A map of text values (`environ`, `resources`: numbers become their text).
fn text_map(p: &Map<String, Value>, keys: &[&str]) -> ApiResult<BTreeMap<String, String>> {
    match field(p, keys) {
        None => Ok(BTreeMap::new()),
        Some(Value::Object(o)) => o
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                Value::Number(n) => Ok((k.clone(), n.to_string())),
                _ => Err(invalid(format!(
                    "'{}.{k}' must be text or a number",
                    keys[0]
                ))),
            })
            .collect(),
        Some(_) => Err(invalid(format!("'{}' must be an object", keys[0]))),
    }
}

/// `NewServiceRequestModel`, read as Backend.AI reads it.
fn new_service(p: &Map<String, Value>) -> ApiResult<NewService> {
    let config = match field(p, &["config"]) {
        Some(Value::Object(c)) => c,
        Some(_) => return Err(invalid("'config' must be an object")),
        None => return Err(invalid("'config' is required")),
    };
    let extra_mounts = match field(config, &["extra_mounts", "extraMounts"]) {
        None => 0,
        Some(Value::Object(m)) => m.len(),
        Some(_) => return Err(invalid("'config.extra_mounts' must be an object")),
    };
    let resource_opts = match field(config, &["resource_opts", "resourceOpts"]) {
        None => Map::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(_) => return Err(invalid("'config.resource_opts' must be an object")),
    };
    Ok(NewService {
        name: text(p, &["name", "service_name", "clientSessionToken"])?
            .ok_or_else(|| invalid("'name' is required"))?,
        replicas: integer(
            p,
            &["replicas", "desired_session_count", "desiredSessionCount"],
        )?
        .ok_or_else(|| invalid("'replicas' is required"))?,
        image: text(p, &["image", "lang"])?.ok_or_else(|| invalid("'image' is required"))?,
        architecture: text(p, &["arch", "architecture"])?,
        runtime_variant: text(p, &["runtime_variant", "runtimeVariant"])?
            .unwrap_or_else(|| "custom".into()),
        group: text(p, &["group", "groupName", "group_name"])?.unwrap_or_else(|| "default".into()),
        domain: text(p, &["domain", "domainName", "domain_name"])?,
        cluster_size: integer(p, &["cluster_size", "clusterSize"])?.unwrap_or(1),
        cluster_mode: text(p, &["cluster_mode", "clusterMode"])?
            .unwrap_or_else(|| "single-node".into())
            .to_ascii_lowercase(),
        tag: text(p, &["tag"])?,
        startup_command: text(p, &["startup_command", "startupCommand"])?,
        bootstrap_script: text(p, &["bootstrap_script", "bootstrapScript"])?,
        callback_url: text(p, &["callback_url", "callbackUrl", "CallbackURL"])?,
        owner_access_key: text(p, &["owner_access_key", "ownerAccessKey"])?,
        open_to_public: flag(p, &["open_to_public", "openToPublic"])?.unwrap_or(false),
        model: text(config, &["model"])?.ok_or_else(|| invalid("'config.model' is required"))?,
        model_definition_path: text(config, &["model_definition_path", "modelDefinitionPath"])?,
        model_mount_destination: text(
            config,
            &["model_mount_destination", "modelMountDestination"],
        )?
        .unwrap_or_else(|| "/models".into()),
        extra_mounts,
        environ: text_map(config, &["environ"])?,
        scaling_group: text(config, &["scaling_group", "scalingGroup"])?,
        resources: text_map(config, &["resources"])?,
        resource_opts,
    })
}

/// Backend.AI's `ServeInfoModel`.
fn serve_info(state: &AppState, e: &endpoints::Model, routes: &[routings::Model]) -> Value {
    json!({
        "endpoint_id": e.id,
        "model_id": e.model,
        "extra_mounts": [],
        "name": e.name,
        "replicas": e.replicas,
        "desired_session_count": e.replicas,
        "model_definition_path": e.model_definition_path,
        "active_routes": routes
            .iter()
            .filter(|r| r.status != route_status::FAILED_TO_START)
            .map(|r| json!({"route_id": r.id, "session_id": r.session, "traffic_ratio": r.traffic_ratio}))
            .collect::<Vec<_>>(),
        "service_endpoint": service_endpoint(state, e, routes),
        "is_public": e.open_to_public,
        "runtime_variant": e.runtime_variant,
    })
}

/// The service's URL once a replica answers there (Backend.AI registers an endpoint with its
/// app proxy when its first route is healthy; until then clients read `null`).
fn service_endpoint(
    state: &AppState,
    e: &endpoints::Model,
    routes: &[routings::Model],
) -> Option<String> {
    if healthy_count(routes) == 0 {
        return None;
    }
    serving::url_of(state, e.port)
}

fn healthy_count(routes: &[routings::Model]) -> usize {
    routes
        .iter()
        .filter(|r| r.status == route_status::HEALTHY)
        .count()
}

/// `GET /services[?name=]`: the caller's own live services.
pub(super) async fn list(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let name = text(&p, &["name"])?;
            let mut out = Vec::new();
            for e in serving::visible(&state, caller, false).await? {
                if e.session_owner != caller.uuid || name.as_ref().is_some_and(|n| *n != e.name) {
                    continue;
                }
                let routes = serving::routes_of(&state, e.id).await?;
                out.push(json!({
                    "id": e.id,
                    "name": e.name,
                    "replicas": e.replicas,
                    "desired_session_count": e.replicas,
                    "active_route_count": healthy_count(&routes),
                    "service_endpoint": service_endpoint(&state, &e, &routes),
                    "is_public": e.open_to_public,
                }));
            }
            Ok(Json(out).into_response())
        }
        .await,
    )
}

/// `POST /services/_/search`: the caller's services, filtered by name and paged.
pub(super) async fn search(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let offset = integer(&p, &["offset"])?.unwrap_or(0);
            let limit = integer(&p, &["limit"])?.unwrap_or(20);
            if offset < 0 || !(1..=100).contains(&limit) {
                return Err(invalid("offset must be 0 or more and limit 1 to 100"));
            }
            let filter = match field(&p, &["filter"]) {
                None => None,
                Some(Value::Object(f)) => match f.get("name") {
                    None | Some(Value::Null) => None,
                    Some(Value::Object(n)) => Some(n.clone()),
                    Some(_) => return Err(invalid("'filter.name' must be an object")),
                },
                Some(_) => return Err(invalid("'filter' must be an object")),
            };
            let all: Vec<endpoints::Model> = serving::visible(&state, caller, false)
                .await?
                .into_iter()
                .filter(|e| e.session_owner == caller.uuid)
                .filter(|e| filter.as_ref().is_none_or(|f| string_filter(f, &e.name)))
                .collect();
            let total = all.len();
            let mut items = Vec::new();
            for e in all
                .into_iter()
                .skip(usize::try_from(offset).unwrap_or(0))
                .take(usize::try_from(limit).unwrap_or(20))
            {
                let routes = serving::routes_of(&state, e.id).await?;
                items.push(json!({
                    "id": e.id,
                    "name": e.name,
                    "desired_session_count": e.replicas,
                    "replicas": e.replicas,
                    "active_route_count": healthy_count(&routes),
                    "service_endpoint": service_endpoint(&state, &e, &routes),
                    "resource_slots": e.resources,
                    "resource_group": e.resource_group,
                    "open_to_public": e.open_to_public,
                }));
            }
            Ok(Json(json!({
                "items": items,
                "pagination": {"total": total, "offset": offset, "limit": limit},
            }))
            .into_response())
        }
        .await,
    )
}

/// Backend.AI's `StringFilter` on one value (every key given must hold).
fn string_filter(f: &Map<String, Value>, value: &str) -> bool {
    f.iter().all(|(k, v)| {
        let Some(want) = v.as_str() else { return true };
        let (ci, op) = match k.strip_prefix("i_") {
            Some(op) => (true, op),
            None => (false, k.as_str()),
        };
        let (have, want) = if ci {
            (value.to_lowercase(), want.to_lowercase())
        } else {
            (value.to_string(), want.to_string())
        };
        match op {
            "equals" => have == want,
            "not_equals" => have != want,
            "contains" => have.contains(&want),
            "not_contains" => !have.contains(&want),
            "starts_with" => have.starts_with(&want),
            "not_starts_with" => !have.starts_with(&want),
            "ends_with" => have.ends_with(&want),
            "not_ends_with" => !have.ends_with(&want),
            _ => false,
        }
    })
}

/// `GET /services/_/runtimes`.
pub(super) async fn runtimes(Extension(principal): Extension<Principal>) -> Response {
    reply(caller(&principal).map(|_| {
        Json(json!({
            "runtimes": serving::RUNTIME_VARIANTS
                .iter()
                .map(|(n, h)| json!({"name": n, "human_readable_name": h}))
                .collect::<Vec<_>>(),
        }))
        .into_response()
    }))
}

/// `POST /services`: 201 with the new service (no URL yet: the leader gives it its port).
pub(super) async fn create(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let req = new_service(&p)?;
            let e = serving::create(&state, caller, req).await?;
            Ok((StatusCode::CREATED, Json(serve_info(&state, &e, &[]))).into_response())
        }
        .await,
    )
}

/// `GET /services/{id}`.
pub(super) async fn info(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Response {
    reply(
        async {
            let (_, e) = service_of(&state, &principal, &id).await?;
            let routes = serving::routes_of(&state, e.id).await?;
            Ok(Json(serve_info(&state, &e, &routes)).into_response())
        }
        .await,
    )
}

/// `DELETE /services/{id}`: the replicas end in the background.
pub(super) async fn delete(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            serving::delete(&state, caller, id_of(&id, "service")?).await?;
            Ok(Json(json!({"success": true})).into_response())
        }
        .await,
    )
}

/// `POST /services/{id}/scale` `{"to": n}`.
pub(super) async fn scale(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            // Strangers learn nothing, not even that a parameter is wrong.
            let (caller, e) = service_of(&state, &principal, &id).await?;
            let id = e.id;
            let to = integer(&p, &["to"])?.ok_or_else(|| invalid("'to' is required"))?;
            let (current, target) = serving::scale(&state, caller, id, to).await?;
            Ok(
                Json(json!({"current_route_count": current, "target_count": target}))
                    .into_response(),
            )
        }
        .await,
    )
}

/// `POST /services/{id}/sync`: bai's routing table follows the database every second on
/// every manager; this answers once the caller may act on the service.
pub(super) async fn sync(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Response {
    reply(
        async {
            service_of(&state, &principal, &id).await?;
            Ok(Json(json!({"success": true})).into_response())
        }
        .await,
    )
}

/// `PUT /services/{id}/routings/{route}` `{"traffic_ratio": x}`.
pub(super) async fn update_route(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path((id, route)): Path<(String, String)>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let (caller, e) = service_of(&state, &principal, &id).await?;
            let (id, route) = (e.id, id_of(&route, "route")?);
            let ratio = match field(&p, &["traffic_ratio", "trafficRatio"]) {
                Some(Value::Number(n)) => n.as_f64(),
                Some(Value::String(s)) => s.trim().parse().ok(),
                _ => None,
            }
            .ok_or_else(|| invalid("'traffic_ratio' (a number) is required"))?;
            serving::set_traffic_ratio(&state, caller, id, route, ratio).await?;
            Ok(Json(json!({"success": true})).into_response())
        }
        .await,
    )
}

/// `DELETE /services/{id}/routings/{route}`: one replica fewer.
pub(super) async fn delete_route(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path((id, route)): Path<(String, String)>,
) -> Response {
    reply(
        async {
            let (caller, e) = service_of(&state, &principal, &id).await?;
            let (id, route) = (e.id, id_of(&route, "route")?);
            serving::remove_route(&state, caller, id, route).await?;
            Ok(Json(json!({"success": true})).into_response())
        }
        .await,
    )
}

/// `POST /services/{id}/token` `{"duration": …}` or `{"valid_until": epoch}`.
pub(super) async fn token(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let (caller, e) = service_of(&state, &principal, &id).await?;
            let id = e.id;
            let now = state.clock.now().timestamp();
            let until = match (
                field(&p, &["valid_until", "validUntil"]),
                field(&p, &["duration"]),
            ) {
                (Some(v), _) => integer(&p, &["valid_until", "validUntil"])?
                    .ok_or_else(|| invalid(format!("valid_until must be seconds since the epoch, not {v}")))?,
                (None, Some(d)) => {
                    now + serving::tokens::parse_duration(d).ok_or_else(|| {
                        invalid(format!(
                            "duration must be seconds or a number with w, d, h, m or s (up to ten years), not {d}"
                        ))
                    })?
                }
                (None, None) => {
                    return Err(invalid(
                        "Either valid_until or duration must be specified.",
                    ));
                }
            };
            let (_, token) = serving::issue_token(&state, caller, id, until).await?;
            Ok(Json(json!({"token": token})).into_response())
        }
        .await,
    )
}

/// `GET /services/{id}/errors`: the replicas that failed to start, and why.
pub(super) async fn errors(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let (failed, retries) = serving::errors(&state, caller, id_of(&id, "service")?).await?;
            Ok(Json(json!({
                "errors": failed
                    .iter()
                    .map(|r| json!({"session_id": r.session, "error": r.error_data}))
                    .collect::<Vec<_>>(),
                "retries": retries,
            }))
            .into_response())
        }
        .await,
    )
}

/// `POST /services/{id}/errors/clear`: 204.
pub(super) async fn clear_errors(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            serving::clear_errors(&state, caller, id_of(&id, "service")?).await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        .await,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_testers_create_body_reads() {
        let body = json!({"name": "bai-serve-abc", "replicas": 1, "image": "img", "arch": "x86_64",
            "group": "default", "domain": "default", "cluster_size": 3, "cluster_mode": "MULTI-NODE",
            "open_to_public": false, "runtime_variant": "custom",
            "config": {"model": "tester-model", "model_mount_destination": "/models", "extra_mounts": {},
                "environ": {"TEST_KEY": "test_value"}, "scaling_group": "default",
                "resources": {"cpu": 1, "mem": "512m"}, "resource_opts": {},
                "model_definition_path": "./model-definition.yaml"}});
        let s = new_service(body.as_object().unwrap()).unwrap();
        assert_eq!(
            (s.replicas, s.cluster_size, s.cluster_mode.as_str()),
            (1, 3, "multi-node")
        );
        assert_eq!(s.resources.get("cpu").map(String::as_str), Some("1"));
        assert_eq!(
            s.environ.get("TEST_KEY").map(String::as_str),
            Some("test_value")
        );
        assert_eq!(s.extra_mounts, 0);
        // Aliases, and what is missing.
        let alias = json!({"clientSessionToken": "n1n1", "desiredSessionCount": 2, "lang": "img",
            "config": {"model": "m", "scalingGroup": "sg"}});
        let s = new_service(alias.as_object().unwrap()).unwrap();
        assert_eq!(
            (s.name.as_str(), s.replicas, s.image.as_str()),
            ("n1n1", 2, "img")
        );
        assert_eq!(s.scaling_group.as_deref(), Some("sg"));
        let missing = json!({"name": "abcd", "replicas": 1, "image": "i"});
        let e = new_service(missing.as_object().unwrap()).unwrap_err();
        assert_eq!(e.backend_ai_error_code(), "api_parsing_invalid-parameters");
        let wrong = json!({"name": "abcd", "replicas": "many", "image": "i", "config": {"model": "m", "scaling_group": "s"}});
        assert!(new_service(wrong.as_object().unwrap()).is_err());
    }

    #[test]
    fn string_filters_as_backend_ai_has_them() {
        let f = |v: Value| v.as_object().unwrap().clone();
        assert!(string_filter(&f(json!({"contains": "ser"})), "my-service"));
        assert!(!string_filter(
            &f(json!({"equals": "My-service"})),
            "my-service"
        ));
        assert!(string_filter(
            &f(json!({"i_equals": "My-service"})),
            "my-service"
        ));
        assert!(string_filter(
            &f(json!({"starts_with": "my", "not_ends_with": "x"})),
            "my-service"
        ));
        assert!(!string_filter(&f(json!({"bogus": "x"})), "my-service"));
    }
}
