//! Per-user permissions on folders shared with them.
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::enums::VFolderPermission;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "vfolder_permissions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub vfolder: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub user: Uuid,
    pub permission: VFolderPermission,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
