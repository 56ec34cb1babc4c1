//! Compute sessions. A session owns one or more kernels (containers).
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::columns::{Mounts, StringList};
use crate::enums::{ClusterMode, SessionResult, SessionStatus, SessionType};
use crate::slots::ResourceSlots;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "sessions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub name: String,
    pub session_type: SessionType,
    pub priority: i32,
    pub cluster_mode: ClusterMode,
    pub cluster_size: i32,
    #[sea_orm(column_type = "Json")]
    pub agent_ids: StringList,
    pub scaling_group_name: Option<String>,
    pub domain_name: String,
    pub group_id: Uuid,
    pub user_uuid: Uuid,
    pub access_key: String,
    pub images: Json,
    pub tag: Option<String>,
    #[sea_orm(column_type = "Json")]
    pub occupying_slots: ResourceSlots,
    #[sea_orm(column_type = "Json")]
    pub requested_slots: ResourceSlots,
    #[sea_orm(column_type = "Json")]
    pub vfolder_mounts: Mounts,
    pub environ: Json,
    pub resource_opts: Json,
    pub bootstrap_script: Option<String>,
    pub startup_command: Option<String>,
    /// Batch sessions: the seconds the job may run before it is ended (None: no limit).
    pub batch_timeout: Option<i64>,
    pub created_at: DateTimeUtc,
    pub terminated_at: Option<DateTimeUtc>,
    pub starts_at: Option<DateTimeUtc>,
    pub status: SessionStatus,
    pub status_changed: DateTimeUtc,
    pub status_info: Option<String>,
    pub status_data: Option<Json>,
    /// `{STATUS: ISO timestamp}` for every status the session went through.
    pub status_history: Json,
    pub callback_url: Option<String>,
    pub result: SessionResult,
    pub num_queries: i64,
    pub last_stat: Option<Json>,
    pub last_activity: Option<DateTimeUtc>,
    /// Since when the session's CPU and GPU use have stayed below its policy's
    /// `idle_utilization_pct` (None: above it, or not measured).
    pub utilization_idle_since: Option<DateTimeUtc>,
    /// When the session's use was last measured under a utilization rule.
    pub utilization_sampled_at: Option<DateTimeUtc>,
    /// The `bai serve` process doing the session's in-flight work (its launch, termination or
    /// batch watch): the one that made its last status change.
    pub owner: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
