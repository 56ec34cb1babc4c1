//! Resource (scaling) groups: sets of agents with their own scheduler, made available to
//! domains, groups and keypairs.

use std::collections::BTreeSet;

use entity::{
    association_groups_users, scaling_groups, sgroups_for_domains, sgroups_for_groups,
    sgroups_for_keypairs,
};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use serde_json::Value;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};

/// Names of the active resource groups a user may use: those associated with its domain,
/// with its groups (or only `group` when given) and with its keypair.
pub async fn allowed_for<C: ConnectionTrait>(
    db: &C,
    domain: &str,
    user: Uuid,
    group: Option<Uuid>,
    access_key: Option<&str>,
) -> ApiResult<Vec<String>> {
    let mut names = BTreeSet::new();
    for s in sgroups_for_domains::Entity::find()
        .filter(sgroups_for_domains::Column::Domain.eq(domain))
        .all(db)
        .await?
    {
        names.insert(s.scaling_group);
    }
    let group_ids: Vec<Uuid> = match group {
        Some(g) => vec![g],
        None => association_groups_users::Entity::find()
            .filter(association_groups_users::Column::UserId.eq(user))
            .all(db)
            .await?
            .into_iter()
            .map(|a| a.group_id)
            .collect(),
    };
    for s in sgroups_for_groups::Entity::find()
        .filter(sgroups_for_groups::Column::Group.is_in(group_ids))
        .all(db)
        .await?
    {
        names.insert(s.scaling_group);
    }
    if let Some(ak) = access_key {
        for s in sgroups_for_keypairs::Entity::find()
            .filter(sgroups_for_keypairs::Column::AccessKey.eq(ak))
            .all(db)
            .await?
        {
            names.insert(s.scaling_group);
        }
    }
    let active = scaling_groups::Entity::find()
        .filter(scaling_groups::Column::Name.is_in(names))
        .filter(scaling_groups::Column::IsActive.eq(true))
        .all(db)
        .await?;
    Ok(active.into_iter().map(|s| s.name).collect())
}

const STRATEGIES: &[&str] = &["dispersed", "concentrated", "legacy"];
const SESSION_TYPES: &[&str] = &["interactive", "batch", "inference"];

/// `scheduler_opts`: `allowed_session_types`, `pending_timeout` (seconds),
/// `agent_selection_strategy`, `config`.
pub fn validate_scheduler_opts(v: &Value) -> ApiResult<Value> {
    let obj = v
        .as_object()
        .ok_or_else(|| ApiError::bad_request("scheduler_opts must be a JSON object"))?;
    for (k, val) in obj {
        let ok = match k.as_str() {
            "allowed_session_types" => val.as_array().is_some_and(|a| {
                a.iter()
                    .all(|t| t.as_str().is_some_and(|s| SESSION_TYPES.contains(&s)))
            }),
            "pending_timeout" => val.as_f64().is_some_and(|n| n >= 0.0),
            "agent_selection_strategy" => val.as_str().is_some_and(|s| STRATEGIES.contains(&s)),
            "config" | "num_retries_to_skip" => true,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "unknown scheduler option '{k}' (allowed: allowed_session_types, pending_timeout, agent_selection_strategy, config)"
                )));
            }
        };
        if !ok {
            return Err(ApiError::bad_request(format!(
                "invalid value for scheduler option '{k}'"
            )));
        }
    }
    Ok(v.clone())
}

pub fn validate_driver(driver: &str) -> ApiResult<String> {
    if driver == "static" {
        Ok(driver.to_string())
    } else {
        Err(ApiError::bad_request(format!(
            "unsupported resource group driver '{driver}' (only 'static')"
        )))
    }
}
