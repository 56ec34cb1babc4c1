//! Keypair resource policies: what a keypair may allocate (CPU, RAM, GPU, fGPU, each
//! possibly unlimited), how many sessions and containers, idle timeout, storage hosts and
//! folder limits.

use entity::enums::DefaultForUnspecified;
use entity::keypair_resource_policies;
use entity::slots::{ResourceLimits, SlotLimit};
use rust_decimal::Decimal;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};

/// Backend.AI's storage-host permissions; a host listed without permissions gets all.
pub const HOST_PERMISSIONS: &[&str] = &[
    "create-vfolder",
    "modify-vfolder",
    "delete-vfolder",
    "mount-in-session",
    "upload-file",
    "download-file",
    "invite-others",
    "set-user-specific-permission",
];

/// Accepts `["local", "nfs"]` or `{"local": ["create-vfolder", …]}` and returns the object form.
pub fn normalize_allowed_hosts(value: &Value) -> ApiResult<Value> {
    let all = || Value::from(HOST_PERMISSIONS.to_vec());
    let mut out = serde_json::Map::new();
    let check_host = |h: &str| -> ApiResult<()> {
        if h.trim().is_empty() || h.len() > 128 {
            Err(ApiError::bad_request(
                "Storage host names must be 1 to 128 characters",
            ))
        } else {
            Ok(())
        }
    };
    match value {
        Value::Array(hosts) => {
            for h in hosts {
                let h = h.as_str().ok_or_else(|| {
                    ApiError::bad_request("allowed_vfolder_hosts: host names must be strings")
                })?;
                check_host(h)?;
                out.insert(h.to_string(), all());
            }
        }
        Value::Object(map) => {
            for (h, perms) in map {
                check_host(h)?;
                let perms = match perms {
                    Value::Array(p) if p.is_empty() => all(),
                    Value::Array(p) => {
                        for perm in p {
                            let s = perm.as_str().unwrap_or("");
                            if !HOST_PERMISSIONS.contains(&s) {
                                return Err(ApiError::bad_request(format!(
                                    "unknown storage host permission '{perm}' (one of: {})",
                                    HOST_PERMISSIONS.join(", ")
                                )));
                            }
                        }
                        Value::Array(p.clone())
                    }
                    Value::Null => all(),
                    _ => {
                        return Err(ApiError::bad_request(
                            "allowed_vfolder_hosts: permissions must be a list",
                        ));
                    }
                };
                out.insert(h.clone(), perms);
            }
        }
        Value::Null => {}
        _ => {
            return Err(ApiError::bad_request(
                "allowed_vfolder_hosts must be a list of hosts or an object {host: [permissions]}",
            ));
        }
    }
    Ok(Value::Object(out))
}

/// What unspecified slots are limited to under this policy.
pub fn unspecified_limit(p: &keypair_resource_policies::Model) -> SlotLimit {
    match p.default_for_unspecified {
        DefaultForUnspecified::Limited => SlotLimit::Limited(Decimal::ZERO),
        DefaultForUnspecified::Unlimited => SlotLimit::Unlimited,
    }
}

pub fn parse_limits(value: &Value) -> ApiResult<ResourceLimits> {
    Ok(ResourceLimits::parse_json(value)?)
}

/// The `default` policy seeded on first start: unlimited resources, 30 concurrent sessions,
/// 10 folders on the `local` host (the seeds' example row).
pub fn default_policy_values() -> (ResourceLimits, Value) {
    (
        ResourceLimits::default(),
        json!({ "local": HOST_PERMISSIONS }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_normalize() {
        let v = normalize_allowed_hosts(&json!(["local"])).unwrap();
        assert_eq!(v["local"].as_array().unwrap().len(), HOST_PERMISSIONS.len());
        let v = normalize_allowed_hosts(&json!({"local": ["upload-file"]})).unwrap();
        assert_eq!(v, json!({"local": ["upload-file"]}));
        assert!(normalize_allowed_hosts(&json!({"local": ["fly"]})).is_err());
        assert!(normalize_allowed_hosts(&json!("local")).is_err());
        assert!(normalize_allowed_hosts(&json!([""])).is_err());
    }
}
