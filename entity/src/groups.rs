//! Groups, called projects in the console. Sessions belong to exactly one group.
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::enums::GroupType;
use crate::slots::ResourceLimits;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "groups")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub name: String,
    pub description: Option<String>,
    pub is_active: bool,
    pub created_at: DateTimeUtc,
    pub modified_at: DateTimeUtc,
    pub domain_name: String,
    #[sea_orm(column_type = "Json")]
    pub total_resource_slots: ResourceLimits,
    pub allowed_vfolder_hosts: Json,
    pub integration_id: Option<String>,
    #[sea_orm(column_name = "type")]
    pub group_type: GroupType,
    /// Dotfiles put into the sessions' /home/work (`bai_services::dotfiles`).
    pub dotfiles: Option<Vec<u8>>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
