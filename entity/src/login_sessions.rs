//! Browser/API login sessions. Only a hash of the token is stored.
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "login_sessions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Hex SHA-256 of the opaque token.
    #[sea_orm(unique)]
    pub token_hash: String,
    pub user_uuid: Uuid,
    pub created_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
    pub last_seen: DateTimeUtc,
    pub user_agent: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
