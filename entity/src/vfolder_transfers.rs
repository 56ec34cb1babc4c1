//! Transfers under way: an upload (tus) or download token of Backend.AI's storage-proxy flow,
//! kept by its SHA-256, bound to its folder, path and user, until it expires (an upload's ends
//! when the file is in place).
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "vfolder_transfers")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub token_hash: String,
    /// `upload` or `download`.
    pub op: String,
    pub vfolder: Uuid,
    pub user: Uuid,
    pub path: String,
    /// An upload's declared size in bytes (0 for a download).
    pub size: i64,
    pub created_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
