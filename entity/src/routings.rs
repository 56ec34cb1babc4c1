//! The routes of a model-serving endpoint (Backend.AI's `routings`): one per replica, with its
//! inference session, its status (`PROVISIONING`, `HEALTHY`, `UNHEALTHY`, `TERMINATING`,
//! `FAILED_TO_START`) and its share of the traffic.
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "routings")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub endpoint: Uuid,
    /// The replica's session (null when it could not be created).
    pub session: Option<Uuid>,
    pub status: String,
    pub traffic_ratio: f64,
    /// Health probes failed in a row.
    pub health_failures: i32,
    /// When the model's service was started in the replica's main container.
    pub service_started_at: Option<DateTimeUtc>,
    /// When the route last passed its health check (or was found serving, without one).
    pub healthy_at: Option<DateTimeUtc>,
    /// Why the replica failed (`{"message": …}`).
    pub error_data: Option<Json>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
