//! Shared application state handed to every handler and resolver.
use std::sync::Arc;

use sea_orm::DatabaseConnection;

use crate::agents::AgentRegistry;
use crate::auth::ratelimit::RateLimiter;
use crate::config::Config;
use crate::events::EventBus;
use crate::scheduler::Scheduler;
use crate::sessions::locks::SessionLocks;

#[derive(Clone)]
pub struct AppState {
    pub db: DatabaseConnection,
    pub config: Arc<Config>,
    pub events: EventBus,
    pub rate_limiter: Arc<RateLimiter>,
    pub agents: Arc<AgentRegistry>,
    pub scheduler: Arc<Scheduler>,
    pub session_locks: Arc<SessionLocks>,
    /// This installation's id (labels its containers).
    pub instance_id: String,
    pub bgtasks: Arc<crate::bgtasks::BgTasks>,
    pub exec_runs: Arc<crate::sessions::exec::Runs>,
    pub started_apps: Arc<crate::sessions::apps::StartedApps>,
    /// One HTTP client (connection pool) for the app proxy and probes.
    pub http: reqwest::Client,
}

impl AppState {
    pub fn new(
        db: DatabaseConnection,
        config: Config,
        instance_id: String,
        http: reqwest::Client,
    ) -> Self {
        Self {
            db,
            config: Arc::new(config),
            events: EventBus::new(),
            rate_limiter: Arc::new(RateLimiter::default()),
            agents: Arc::new(AgentRegistry::default()),
            scheduler: Arc::new(Scheduler::default()),
            session_locks: Arc::new(SessionLocks::default()),
            instance_id,
            bgtasks: Arc::new(crate::bgtasks::BgTasks::default()),
            exec_runs: Arc::new(crate::sessions::exec::Runs::default()),
            started_apps: Arc::new(crate::sessions::apps::StartedApps::default()),
            http,
        }
    }
}
