//! Kernels: one row per container of a session.
use crate::columns::Mounts;
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::enums::{ClusterRole, SessionStatus};
use crate::slots::ResourceSlots;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "kernels")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub session_id: Uuid,
    pub cluster_role: ClusterRole,
    pub cluster_idx: i32,
    pub local_rank: i32,
    pub cluster_hostname: String,
    pub agent: Option<String>,
    pub agent_addr: Option<String>,
    pub image: String,
    pub architecture: String,
    pub registry: String,
    pub container_id: Option<String>,
    #[sea_orm(column_type = "Json")]
    pub occupied_slots: ResourceSlots,
    #[sea_orm(column_type = "Json")]
    pub requested_slots: ResourceSlots,
    #[sea_orm(column_type = "Json")]
    pub mounts: Mounts,
    pub resource_opts: Json,
    pub service_ports: Json,
    pub domain_name: String,
    pub group_id: Uuid,
    pub user_uuid: Uuid,
    pub access_key: String,
    pub status: SessionStatus,
    pub status_changed: DateTimeUtc,
    pub status_info: Option<String>,
    pub status_data: Option<Json>,
    pub status_history: Json,
    pub created_at: DateTimeUtc,
    pub terminated_at: Option<DateTimeUtc>,
    pub exit_code: Option<i32>,
    /// The container's output, kept after the container is gone.
    #[sea_orm(column_type = "Text", nullable)]
    pub container_log: Option<String>,
    pub last_stat: Option<Json>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
