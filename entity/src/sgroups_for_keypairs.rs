//! Which resource groups the keypairs may use.
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "sgroups_for_keypairs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub scaling_group: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub access_key: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
