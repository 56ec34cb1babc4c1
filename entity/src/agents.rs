//! Agents: one per container engine, living inside the server process. A live view kept
//! current by heartbeats.
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::columns::StringList;
use crate::enums::AgentStatus;
use crate::slots::ResourceSlots;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "agents")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub status: AgentStatus,
    pub status_changed: Option<DateTimeUtc>,
    pub region: String,
    pub scaling_group: String,
    pub schedulable: bool,
    #[sea_orm(column_type = "Json")]
    pub available_slots: ResourceSlots,
    #[sea_orm(column_type = "Json")]
    pub occupied_slots: ResourceSlots,
    pub addr: String,
    pub public_host: Option<String>,
    pub first_contact: DateTimeUtc,
    pub lost_at: Option<DateTimeUtc>,
    pub last_heartbeat: Option<DateTimeUtc>,
    pub version: String,
    pub architecture: String,
    pub compute_plugins: Json,
    /// Latest measured CPU/memory use, from the engine.
    pub live_stat: Option<Json>,
    /// The storage hosts this agent's host sees (None: every one, the manager's own host).
    #[sea_orm(column_type = "Json", nullable)]
    pub storage_hosts: Option<StringList>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
