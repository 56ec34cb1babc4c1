//! API keypairs. Every request a user makes is authenticated by one of these.
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "keypairs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub access_key: String,
    #[serde(skip_serializing)]
    pub secret_key: String,
    /// The owner's email, as Backend.AI stores it.
    pub user_id: String,
    pub user: Uuid,
    pub is_active: bool,
    pub is_admin: bool,
    pub created_at: DateTimeUtc,
    pub modified_at: DateTimeUtc,
    pub last_used: Option<DateTimeUtc>,
    /// Requests allowed per 15 minutes; 0 means no limit.
    pub rate_limit: i32,
    pub num_queries: i64,
    pub ssh_public_key: Option<String>,
    #[serde(skip_serializing)]
    pub ssh_private_key: Option<String>,
    pub resource_policy: String,
    pub dotfiles: Option<Vec<u8>>,
    pub bootstrap_script: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
