//! Backend.AI's session-creation body (`POST /session`, camelCase keys and their aliases, the
//! body a template stands for) read into a [`CreateRequest`]: one reading for the REST
//! surface, GraphQL's create-from-template and templates alike.
use std::collections::BTreeMap;

use entity::enums::SessionType;
use serde_json::{Value, json};

use super::create::CreateRequest;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};

/// A non-empty string or a number, as text.
pub fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A JSON object of names to strings (`environ`, `resources`, `mount_map`); numbers and
/// booleans are taken as their text.
pub fn string_map(v: Option<&Value>, what: &str) -> ApiResult<BTreeMap<String, String>> {
    let obj = match v {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(v) => v
            .as_object()
            .ok_or_else(|| ApiError::bad_request(format!("{what} must be a JSON object")))?,
    };
    obj.iter()
        .map(|(k, v)| {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "{what}: the value of '{k}' must be a string or a number"
                    )));
                }
            };
            Ok((k.clone(), s))
        })
        .collect()
}

/// The session a Backend.AI creation body describes (camelCase keys and their aliases).
pub fn creation_request(caller: &Caller, body: &Value) -> ApiResult<CreateRequest> {
    let empty = json!({});
    let config = body.get("config").unwrap_or(&empty);
    let name = text(body.get("name")).or_else(|| text(body.get("clientSessionToken")));
    let image = text(body.get("image"))
        .or_else(|| text(body.get("lang")))
        .ok_or_else(|| ApiError::bad_request("'image' is required"))?;
    if let Some(owner) = text(body.get("owner_access_key"))
        && Some(owner.as_str()) != caller.access_key.as_deref()
    {
        return Err(ApiError::bad_request(
            "Creating sessions for another keypair (owner_access_key) is not supported",
        ));
    }
    let session_type = match text(body.get("type")).as_deref() {
        None | Some("interactive") => SessionType::Interactive,
        Some("batch") => SessionType::Batch,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "invalid session type '{other}' (interactive or batch)"
            )));
        }
    };
    let size = body
        .get("clusterSize")
        .or(body.get("cluster_size"))
        .or(config.get("clusterSize"))
        .or(config.get("cluster_size"))
        .filter(|v| !v.is_null())
        .map(|v| {
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| ApiError::bad_request("clusterSize must be a positive number"))
        })
        .transpose()?
        .unwrap_or(1);
    let cluster_mode = match text(body.get("clusterMode").or(body.get("cluster_mode"))).as_deref() {
        None | Some("single-node") => entity::enums::ClusterMode::SingleNode,
        Some("multi-node") => entity::enums::ClusterMode::MultiNode,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "invalid clusterMode '{other}' (single-node or multi-node)"
            )));
        }
    };
    let dependencies: Vec<String> = match body.get("dependencies") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|d| {
                text(Some(d)).ok_or_else(|| {
                    ApiError::bad_request("dependencies must be session ids or names")
                })
            })
            .collect::<ApiResult<_>>()?,
        Some(_) => {
            return Err(ApiError::bad_request(
                "dependencies must be a list of session ids or names",
            ));
        }
    };
    // Folders by name or id (`mounts`) and, as Backend.AI 24+ sends them, by id (`mount_ids`,
    // with destinations in `mount_id_map`).
    let mut mounts: Vec<String> = Vec::new();
    for key in ["mounts", "mount_ids"] {
        match config.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) => {
                for v in a {
                    mounts.push(text(Some(v)).ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "{key} must be a list of folder names or ids"
                        ))
                    })?);
                }
            }
            Some(_) => {
                return Err(ApiError::bad_request(format!(
                    "{key} must be a list of folder names or ids"
                )));
            }
        }
    }
    let mut mount_map = string_map(config.get("mount_map"), "mount_map")?;
    mount_map.extend(string_map(config.get("mount_id_map"), "mount_id_map")?);
    // What bai does not do is refused, never dropped: preopened ports, sub-path mounts and
    // a hand-picked agent.
    for (key, what) in [
        ("preopen_ports", "Preopened ports are"),
        ("mount_options", "Mount options (sub-path mounts) are"),
        ("agent_list", "Choosing the agent by hand is"),
    ] {
        let empty = match config.get(key) {
            None | Some(Value::Null) => true,
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::Object(o)) => o.is_empty(),
            Some(_) => false,
        };
        if !empty {
            return Err(ApiError::bad_request(format!(
                "{what} not supported by this server ({key})"
            )));
        }
    }
    let shmem = config
        .get("resource_opts")
        .and_then(|o| text(o.get("shmem")));
    Ok(CreateRequest {
        image,
        name,
        session_type,
        group: text(body.get("group")).or_else(|| text(body.get("group_name"))),
        scaling_group: text(config.get("scalingGroup"))
            .or_else(|| text(config.get("scaling_group"))),
        preset: None,
        resources: string_map(config.get("resources"), "resources")?,
        shmem,
        environ: string_map(config.get("environ"), "environ")?,
        startup_command: text(body.get("startupCommand"))
            .or_else(|| text(body.get("startup_command"))),
        batch_timeout: match body.get("batch_timeout").or(body.get("batchTimeout")) {
            None | Some(Value::Null) => None,
            Some(t) => Some(super::create::parse_batch_timeout(t)?),
        },
        count: 1,
        tag: text(body.get("tag")),
        mounts,
        mount_map,
        dependencies,
        bootstrap_script: text(body.get("bootstrap_script"))
            .or_else(|| text(body.get("bootstrapScript"))),
        cluster_size: size,
        cluster_mode,
        model: None,
    })
}
