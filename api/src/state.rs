//! Shared application state handed to every handler and resolver.
use std::sync::Arc;

use sea_orm::DatabaseConnection;

use crate::auth::ratelimit::RateLimiter;
use crate::config::Config;
use crate::events::EventBus;

#[derive(Clone)]
pub struct AppState {
    pub db: DatabaseConnection,
    pub config: Arc<Config>,
    pub events: EventBus,
    pub rate_limiter: Arc<RateLimiter>,
}

impl AppState {
    pub fn new(db: DatabaseConnection, config: Config) -> Self {
        Self {
            db,
            config: Arc::new(config),
            events: EventBus::new(),
            rate_limiter: Arc::new(RateLimiter::default()),
        }
    }
}
