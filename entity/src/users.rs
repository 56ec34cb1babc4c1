//! User accounts. Never deleted: deactivation keeps usage history (seeds, admin chapter).
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

use crate::enums::{UserRole, UserStatus};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "users")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub uuid: Uuid,
    #[sea_orm(unique)]
    pub username: String,
    #[sea_orm(unique)]
    pub email: String,
    /// argon2id PHC string; never leaves the server.
    #[serde(skip_serializing)]
    pub password: String,
    pub need_password_change: bool,
    pub full_name: Option<String>,
    pub description: Option<String>,
    pub status: UserStatus,
    pub status_info: Option<String>,
    pub created_at: DateTimeUtc,
    pub modified_at: DateTimeUtc,
    pub password_changed_at: Option<DateTimeUtc>,
    pub domain_name: String,
    pub role: UserRole,
    pub allowed_client_ip: Option<Json>,
    pub main_access_key: Option<String>,
    /// The app port pool's port the user's SSH/SFTP app asks for first (user settings).
    pub preferred_ssh_port: Option<i32>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
