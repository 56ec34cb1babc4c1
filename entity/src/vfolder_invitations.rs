//! Invitations to share a folder with a user: pending until the invitee accepts (a
//! `vfolder_permissions` row is made) or rejects, or the inviter cancels.
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::enums::{InvitationState, VFolderPermission};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "vfolder_invitations")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub vfolder: Uuid,
    /// The user who invited (the folder's owner, or an admin of a project folder's domain).
    pub inviter: Uuid,
    pub invitee: Uuid,
    pub permission: VFolderPermission,
    pub state: InvitationState,
    pub created_at: DateTimeUtc,
    pub modified_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
