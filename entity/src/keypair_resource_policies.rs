//! Keypair resource policies: what a keypair may allocate and how many folders it may own.
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::enums::DefaultForUnspecified;
use crate::slots::ResourceLimits;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "keypair_resource_policies")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub name: String,
    pub created_at: DateTimeUtc,
    pub default_for_unspecified: DefaultForUnspecified,
    #[sea_orm(column_type = "Json")]
    pub total_resource_slots: ResourceLimits,
    /// Seconds; 0 = unlimited.
    pub max_session_lifetime: i64,
    /// 0 = unlimited.
    pub max_concurrent_sessions: i32,
    pub max_pending_session_count: Option<i32>,
    pub max_containers_per_session: i32,
    /// Seconds; 0 = sessions are never reclaimed for being idle.
    pub idle_timeout: i64,
    /// Percent of the allocated CPU and GPU a session must use; below it in both for
    /// `idle_utilization_secs`, the session is idle (0 = no such rule).
    pub idle_utilization_pct: i32,
    /// Seconds of use below `idle_utilization_pct` after which a session ends.
    pub idle_utilization_secs: i64,
    /// `{host: [permission, …]}`.
    pub allowed_vfolder_hosts: Json,
    pub max_vfolder_count: i32,
    /// Bytes; 0 = unlimited.
    pub max_vfolder_size: i64,
    /// Images a user may keep from committed sessions; 0 = none.
    pub max_customized_image_count: i32,
    /// Replicas one model-serving endpoint may keep.
    pub max_session_count_per_model_session: i32,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
