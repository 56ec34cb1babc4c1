//! Tokens of private model-serving endpoints: the claims of each (its id, endpoint, owner and
//! expiry), never the token itself, which is signed again from them with the endpoint's key.
//! Deleting a row revokes the token.
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "endpoint_tokens")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub endpoint: Uuid,
    pub domain_name: String,
    pub project: Uuid,
    pub session_owner: Uuid,
    pub created_at: DateTimeUtc,
    pub valid_until: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
