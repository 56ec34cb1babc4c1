//! Resource (scaling) groups: sets of agents with their own scheduler.
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::enums::SchedulerKind;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "scaling_groups")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub name: String,
    pub description: Option<String>,
    pub is_active: bool,
    pub is_public: bool,
    pub created_at: DateTimeUtc,
    pub wsproxy_addr: Option<String>,
    pub driver: String,
    pub driver_opts: Json,
    pub scheduler: SchedulerKind,
    pub scheduler_opts: Json,
    pub use_host_network: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
