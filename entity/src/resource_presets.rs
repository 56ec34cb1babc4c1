//! Resource presets offered in the launch dialog.
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::slots::ResourceSlots;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "resource_presets")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub name: String,
    #[sea_orm(column_type = "Json")]
    pub resource_slots: ResourceSlots,
    /// Bytes; None = the default (64m).
    pub shared_memory: Option<i64>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
