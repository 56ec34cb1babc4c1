//! Container registries the image catalog scans.
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::enums::RegistryType;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "container_registries")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    #[sea_orm(unique)]
    pub hostname: String,
    pub url: String,
    #[sea_orm(column_name = "type")]
    pub registry_type: RegistryType,
    pub project: Option<String>,
    pub username: Option<String>,
    /// Never returned in clear by the API.
    #[serde(skip_serializing)]
    pub password: Option<String>,
    pub ssl_verify: bool,
    pub is_global: bool,
    pub created_at: DateTimeUtc,
    pub modified_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
