//! Usage over time (Statistics): one row per scope (`session`, `user`, `project`,
//! `resource_group`, `domain`), bucket size (`res`: 60, 3600 or 86400 seconds) and bucket start
//! (`ts`, Unix seconds). The figures are sums over the bucket: `secs` session-seconds of use,
//! `cpu_*` core-seconds, `mem_*` byte-seconds, `gpu_*` GPU-seconds, each allocated and used.
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "usage_series")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub scope: String,
    /// The session's, user's or project's UUID; the resource group's or domain's name.
    #[sea_orm(primary_key, auto_increment = false)]
    pub scope_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub res: i32,
    #[sea_orm(primary_key, auto_increment = false)]
    pub ts: i64,
    /// The domain the figures belong to (None for a resource group's, which spans domains).
    pub domain_name: Option<String>,
    /// The user the figures belong to (a session's owner, the user itself).
    pub owner: Option<Uuid>,
    pub secs: f64,
    pub cpu_alloc: f64,
    pub cpu_used: f64,
    pub mem_alloc: f64,
    pub mem_used: f64,
    pub gpu_alloc: f64,
    pub gpu_used: f64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
