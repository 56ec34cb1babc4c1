//! What every part of model serving reads of an endpoint's records: its stages, its routes'
//! statuses, its routes, its definition and the caller its replicas run as.
use entity::{endpoints, routings};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use uuid::Uuid;

use super::definition;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::store::Store;

/// An endpoint's life (Backend.AI's `lifecycle_stage`).
pub mod stage {
    pub const CREATED: &str = "created";
    pub const DESTROYING: &str = "destroying";
    pub const DESTROYED: &str = "destroyed";
}

/// A route's status (Backend.AI's `RouteStatus`).
pub mod route_status {
    pub const PROVISIONING: &str = "PROVISIONING";
    pub const HEALTHY: &str = "HEALTHY";
    pub const UNHEALTHY: &str = "UNHEALTHY";
    pub const TERMINATING: &str = "TERMINATING";
    pub const FAILED_TO_START: &str = "FAILED_TO_START";
    /// Routes that hold (or are getting) a replica.
    pub const ACTIVE: [&str; 3] = [PROVISIONING, HEALTHY, UNHEALTHY];
}

/// The caller a replica is launched as: the endpoint's session owner with its keypair.
pub async fn owner_caller(store: &impl Store, e: &endpoints::Model) -> ApiResult<Caller> {
    let user = crate::users::by_uuid(store.db(), e.session_owner).await?;
    Ok(Caller::of_user(
        user,
        Some(e.owner_access_key.clone()),
        None,
    ))
}

/// The routes of `endpoint`, oldest first.
pub async fn routes_of(store: &impl Store, endpoint: Uuid) -> ApiResult<Vec<routings::Model>> {
    Ok(routings::Entity::find()
        .filter(routings::Column::Endpoint.eq(endpoint))
        .order_by_asc(routings::Column::CreatedAt)
        .all(store.read())
        .await?)
}

/// The endpoint's resolved model definition.
pub fn definition_of(e: &endpoints::Model) -> ApiResult<definition::Definition> {
    serde_json::from_value(e.model_definition.clone())
        .map_err(|err| ApiError::internal("reading a kept model definition", err))
}
