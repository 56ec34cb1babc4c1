//! Environment images known to the catalog.
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::columns::StringList;
use crate::enums::ImageType;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "images")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Canonical reference `registry/project/name:tag`.
    pub name: String,
    /// `project/name` without registry and tag.
    pub image: String,
    pub tag: String,
    pub registry: String,
    pub architecture: String,
    pub config_digest: String,
    pub size_bytes: i64,
    pub is_local: bool,
    #[sea_orm(column_name = "type")]
    pub image_type: ImageType,
    pub accelerators: Option<String>,
    /// Docker labels of the image (`ai.backend.*`).
    pub labels: Json,
    /// `{slot: {"min": "1", "max": null}}`.
    pub resources: Json,
    pub created_at: DateTimeUtc,
    /// Agents that have this image locally.
    #[sea_orm(column_type = "Json")]
    pub installed_agents: StringList,
    /// The user a committed session's image belongs to (only they see and run it); None:
    /// the global catalog.
    pub owner_id: Option<Uuid>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
