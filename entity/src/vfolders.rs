//! Storage folders (vfolders): data that outlives sessions.
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::enums::{VFolderOwnershipType, VFolderPermission, VFolderStatus, VFolderUsageMode};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "vfolders")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub host: String,
    pub domain_name: String,
    pub name: String,
    pub usage_mode: VFolderUsageMode,
    pub permission: VFolderPermission,
    pub max_files: i32,
    pub max_size: Option<i64>,
    pub num_files: i64,
    pub cur_size: i64,
    pub ownership_type: VFolderOwnershipType,
    pub user: Option<Uuid>,
    pub group: Option<Uuid>,
    pub creator: Option<String>,
    pub cloneable: bool,
    pub status: VFolderStatus,
    pub created_at: DateTimeUtc,
    pub last_used: Option<DateTimeUtc>,
    /// When `cur_size` and `num_files` were last measured (None: never).
    pub usage_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
