//! Domains: the top layer for authority and resource control.
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::columns::StringList;
use crate::slots::ResourceLimits;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "domains")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub name: String,
    pub description: Option<String>,
    pub is_active: bool,
    pub created_at: DateTimeUtc,
    pub modified_at: DateTimeUtc,
    #[sea_orm(column_type = "Json")]
    pub total_resource_slots: ResourceLimits,
    pub allowed_vfolder_hosts: Json,
    #[sea_orm(column_type = "Json")]
    pub allowed_docker_registries: StringList,
    pub integration_id: Option<String>,
    /// Dotfiles put into the sessions' /home/work (`bai_services::dotfiles`).
    pub dotfiles: Option<Vec<u8>>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
