//! Links sent by e-mail ("Forgot password?", signup verification): each works once, until it
//! expires. Only a hash of the token is stored; the link names the address it was sent to,
//! so it stops working when the account's address changes.
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "email_tokens")]
pub struct Model {
    /// Hex SHA-256 of the opaque token.
    #[sea_orm(primary_key, auto_increment = false)]
    pub token_hash: String,
    /// `password_reset` or `verify_email`.
    pub purpose: String,
    pub user_uuid: Uuid,
    /// The address the link was sent to.
    pub email: String,
    pub created_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
