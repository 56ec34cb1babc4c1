//! System settings: the server's main settings as a readable list; a few are editable at
//! run time and stored in the database.

use chrono::Utc;
use entity::system_settings;
use sea_orm::{ActiveModelTrait, ConnectionTrait, EntityTrait, IntoActiveModel, Set};
use serde_json::{Value, json};

use crate::auth::SuperadminScope;
use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Store;

#[derive(Clone, Copy)]
pub enum Kind {
    Text,
    Count,
    /// A whole number from the first to the second.
    Range(u64, u64),
}

/// How long statistics keep their 1-minute (hours), 1-hour and 1-day (days) usage buckets.
pub const MINUTE_RETENTION_KEY: &str = "statistics.minute_samples_hours";
pub const HOUR_RETENTION_KEY: &str = "statistics.hourly_samples_days";
pub const DAY_RETENTION_KEY: &str = "statistics.daily_samples_days";

/// A setting editable at run time.
pub struct SettingDef {
    pub key: &'static str,
    pub description: &'static str,
    pub kind: Kind,
    pub default: fn() -> Value,
}

pub const EDITABLE: &[SettingDef] = &[
    SettingDef {
        key: "announcement",
        description: "Message shown to every user on the console and the CLI; empty = none.",
        kind: Kind::Text,
        default: || json!(""),
    },
    SettingDef {
        key: "scheduler.num_retries_to_skip",
        description: "Pending sessions that failed to schedule this many times are skipped so they do not block the queue (0 = never skip).",
        kind: Kind::Count,
        default: || json!(0),
    },
    SettingDef {
        key: MINUTE_RETENTION_KEY,
        description: "Statistics: hours 1-minute usage buckets are kept (the day chart draws them while they cover a day).",
        kind: Kind::Range(1, 24 * 31),
        default: || json!(48),
    },
    SettingDef {
        key: HOUR_RETENTION_KEY,
        description: "Statistics: days 1-hour usage buckets are kept (the week and month charts draw them while they cover the period).",
        kind: Kind::Range(1, 3660),
        default: || json!(45),
    },
    SettingDef {
        key: DAY_RETENTION_KEY,
        description: "Statistics: days 1-day usage buckets are kept.",
        kind: Kind::Range(1, 36_600),
        default: || json!(730),
    },
];

pub struct Setting {
    pub key: String,
    pub value: Value,
    pub description: String,
    pub editable: bool,
}

fn definition(key: &str) -> Option<&'static SettingDef> {
    EDITABLE.iter().find(|d| d.key == key)
}

/// The stored value of an editable setting, or its default.
pub async fn get<C: ConnectionTrait>(db: &C, key: &str) -> ApiResult<Value> {
    let def = definition(key).ok_or_else(|| ApiError::not_found("system setting", key))?;
    Ok(system_settings::Entity::find_by_id(key.to_string())
        .one(db)
        .await?
        .map(|s| s.value)
        .unwrap_or_else(def.default))
}

pub async fn set<C: ConnectionTrait>(
    db: &C,
    key: &str,
    value: Value,
    now: chrono::DateTime<Utc>,
) -> ApiResult<Value> {
    let def = definition(key).ok_or_else(|| {
        ApiError::bad_request(format!(
            "'{key}' is not an editable setting (editable: {})",
            EDITABLE
                .iter()
                .map(|d| d.key)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    let ok = match def.kind {
        Kind::Text => value.as_str().is_some_and(|s| s.len() <= 4096),
        Kind::Count => value.as_u64().is_some_and(|n| n <= 1_000_000),
        Kind::Range(lo, hi) => value.as_u64().is_some_and(|n| (lo..=hi).contains(&n)),
    };
    if !ok {
        let want = match def.kind {
            Kind::Text => "a string of at most 4096 characters".to_string(),
            Kind::Count => "a whole number from 0 to 1000000".to_string(),
            Kind::Range(lo, hi) => format!("a whole number from {lo} to {hi}"),
        };
        return Err(ApiError::bad_request(format!("'{key}' must be {want}")));
    }
    match system_settings::Entity::find_by_id(key.to_string())
        .one(db)
        .await?
    {
        Some(row) => {
            let mut m = row.into_active_model();
            m.value = Set(value.clone());
            m.modified_at = Set(now);
            m.update(db).await?;
        }
        None => {
            system_settings::ActiveModel {
                key: Set(key.to_string()),
                value: Set(value.clone()),
                modified_at: Set(now),
            }
            .insert(db)
            .await?;
        }
    }
    Ok(value)
}

/// Changes the editable setting `key` (superadmins only), with its audit record, and
/// announces it; returns the setting as stored.
pub async fn modify(
    store: &impl Store,
    scope: &SuperadminScope,
    key: &str,
    value: Value,
) -> ApiResult<Setting> {
    let k = key.to_string();
    let now = store.clock().now();
    let value = crate::audit::audited(
        store,
        scope.actor(),
        "modify_system_setting",
        "system_setting",
        move |txn| {
            Box::pin(async move {
                let v = set(txn, &k, value, now).await?;
                Ok((v.clone(), k, json!({"value": v})))
            })
        },
    )
    .await?;
    store
        .events()
        .changed(ObjectKind::SystemSetting, ChangeAction::Modified, key, None);
    let description = definition(key)
        .map(|d| d.description.to_string())
        .unwrap_or_default();
    Ok(Setting {
        key: key.to_string(),
        value,
        description,
        editable: true,
    })
}

/// Every setting: read-only ones from the configuration, then the editable ones.
pub async fn list(store: &impl Store) -> ApiResult<Vec<Setting>> {
    let c = store.config();
    let ro = |key: &str, value: Value, description: &str| Setting {
        key: key.to_string(),
        value,
        description: description.to_string(),
        editable: false,
    };
    let backend = if c.database_url.is_some() {
        "postgresql"
    } else {
        "sqlite"
    };
    let mut out = vec![
        ro("manager.version", json!(crate::VERSION), "bai version."),
        ro(
            "manager.api_version",
            json!(crate::API_VERSION),
            "Backend.AI API version announced to clients.",
        ),
        ro(
            "database.backend",
            json!(backend),
            "Database in use (DATABASE_URL selects PostgreSQL).",
        ),
        ro(
            "auth.signup_enabled",
            json!(c.signup_enabled),
            "Whether visitors may sign up (BAI_SIGNUP_ENABLED).",
        ),
        ro(
            "auth.signup_requires_invitation",
            json!(c.signup_invitation_token.is_some()),
            "Whether signup needs an invitation token.",
        ),
        ro(
            "auth.login_session_ttl",
            json!(c.login_session_ttl_secs),
            "Lifetime of a login session, in seconds.",
        ),
        ro(
            "auth.hmac_clock_skew",
            json!(c.hmac_clock_skew_secs),
            "Accepted clock skew of signed API requests, in seconds.",
        ),
        ro(
            "auth.default_rate_limit",
            json!(c.default_rate_limit),
            "Requests per 15 minutes for new user keypairs.",
        ),
    ];
    for def in EDITABLE {
        out.push(Setting {
            key: def.key.to_string(),
            value: get(store.db(), def.key).await?,
            description: def.description.to_string(),
            editable: true,
        });
    }
    Ok(out)
}
