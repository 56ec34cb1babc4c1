//! Shared application state handed to every handler and resolver.
use std::sync::Arc;

use sea_orm::DatabaseConnection;

use crate::agents::registry::AgentRegistry;
use crate::auth::ratelimit::RateLimiter;
use crate::config::Config;
use crate::events::{EventBus, LocalBus};
use crate::scheduler::handle::Scheduler;
use crate::sessions::locks::SessionLocks;

/// What every handler and service reaches. With several managers on one PostgreSQL each field
/// is one of three kinds, said below: **shared** (in the database, or announced on the bus),
/// **elected** (used by the process holding the lease: the leader, an engine's driver), or
/// **per process** (a bounded cache of what the database holds, or state README's "Several
/// managers" names as not yet shared).
#[derive(Clone)]
pub struct AppState {
    /// Reads and writes (SQLite: the one writer connection).
    pub db: DatabaseConnection,
    /// Reads only (SQLite: a pool of read-only connections beside the writer, WAL; PostgreSQL:
    /// the same pool as `db`). Committed writes are visible to the next read.
    pub read: DatabaseConnection,
    pub config: Arc<Config>,
    /// Shared: across managers on PostgreSQL (`bai_bus::pg`).
    pub events: Arc<dyn EventBus>,
    /// Shared: counted here, added to the database's counts every second (`auth::shared`).
    pub rate_limiter: Arc<RateLimiter>,
    /// Per process: its connections to every engine; which it drives is elected (`cluster`).
    pub agents: Arc<AgentRegistry>,
    /// Elected: only the leader's schedules (its retry counts and index are the leader's).
    pub scheduler: Arc<Scheduler>,
    /// Per process: launch and termination of one session in this process never interleave;
    /// across managers, status changes are compare-and-set (`sessions::transition`).
    pub session_locks: Arc<SessionLocks>,
    /// This installation's id (labels its containers).
    pub instance_id: String,
    /// Per process, bounded: the tasks this manager runs, and every manager's as their events
    /// (which carry the whole state) arrive on the bus (`sessions::follow`).
    pub bgtasks: Arc<crate::bgtasks::records::BgTasks>,
    /// Per process, bounded: the executions this manager runs. Several managers: each is copied
    /// to the database, where every other manager reads it (`sessions::exec::find`).
    pub exec_runs: Arc<crate::sessions::exec::runs::Runs>,
    /// Per process: this manager's listeners for started apps; forgotten on any manager's end
    /// of the session (`sessions::follow`). Several managers: tokens and visibility are shared
    /// (`app_routes`, `sessions::apps::known`).
    pub started_apps: Arc<crate::sessions::apps::started::StartedApps>,
    /// Per process: sessions being committed to images through this manager (the commit's
    /// progress is a background task, read through any manager).
    pub commits: Arc<crate::sessions::commit::entries::Commits>,
    /// One HTTP client (connection pool) for the app proxy and probes.
    pub http: reqwest::Client,
    /// Per process: attempts running at once; failures are shared (`auth::shared`).
    pub login_throttle: Arc<crate::auth::throttle::LoginThrottle>,
    /// Shared: announced on the bus to every manager.
    pub revocations: Arc<crate::auth::revocations::Revocations>,
    /// Open GraphQL WebSockets per user (or per address when anonymous). Per process by
    /// design: the cap holds per manager.
    pub ws_connections: Arc<crate::auth::ws::Connections>,
    /// HMAC signatures already used within the clock-skew window: this process's first, then
    /// the database's (`auth::shared`).
    pub seen_signatures: Arc<crate::auth::hmac::SeenSignatures>,
    /// Cancelled when the server begins to shut down: live streams end with a reason.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Login sessions, users and keypairs as requests prove who they are (`auth::cache`). Per
    /// process, a bounded cache emptied by every revocation of any manager.
    pub auth_cache: Arc<crate::auth::cache::AuthCache>,
    /// Keypair use counted in memory, added to the database in batches (`keypairs::usage`):
    /// each manager adds its own, none overwrites another's.
    pub usage: Arc<crate::keypairs::usage::Usage>,
    /// Time spent by the last launches' phases (`bai bench`, metrics).
    pub launch_phases: Arc<crate::sessions::phases::LaunchPhases>,
    /// `total_count` of session lists; `sessions::publish` marks every change, and every other
    /// manager's (`sessions::follow`). A bounded per-process cache.
    pub session_counts: Arc<crate::db::counts::CountCache>,
    /// The server's TLS settings when it speaks HTTPS (app ports use them too).
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// What time it is (the system clock; tests move a manual one).
    pub clock: Arc<dyn bai_core::clock::Clock>,
    /// Folder content (this machine's storage, through directory handles).
    pub storage: Arc<dyn bai_storage::FolderStore>,
    /// This process among the managers of the database: whether it leads, which engines it
    /// drives (`cluster`).
    pub cluster: Arc<crate::cluster::Cluster>,
}

impl AppState {
    pub fn new(
        db: DatabaseConnection,
        read: DatabaseConnection,
        config: Config,
        instance_id: String,
        http: reqwest::Client,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> Self {
        let login_limits = crate::auth::throttle::LoginLimits {
            per_account: config.login_max_failures_per_account,
            per_addr: config.login_max_failures_per_addr,
            concurrent_per_addr: config.login_max_concurrent_per_addr,
            window: std::time::Duration::from_secs(config.login_block_secs),
        };
        let skew = std::time::Duration::from_secs(config.hmac_clock_skew_secs);
        let addr = config
            .advertise_addr
            .clone()
            .unwrap_or_else(|| config.listen.to_string());
        let shared = config.shares_database();
        let cluster = if shared {
            crate::cluster::Cluster::shared(addr, std::time::Duration::from_secs(config.lease_secs))
        } else {
            crate::cluster::Cluster::single(addr)
        };
        Self {
            cluster: Arc::new(cluster),
            login_throttle: Arc::new(crate::auth::throttle::LoginThrottle::new(login_limits)),
            revocations: Arc::new(crate::auth::revocations::Revocations::default()),
            ws_connections: Arc::new(crate::auth::ws::Connections::default()),
            seen_signatures: Arc::new(crate::auth::hmac::SeenSignatures::new(skew)),
            shutdown: tokio_util::sync::CancellationToken::new(),
            db,
            read,
            auth_cache: Arc::default(),
            usage: Arc::default(),
            launch_phases: Arc::default(),
            session_counts: Arc::new(crate::db::counts::CountCache::new(
                std::time::Duration::from_secs(2),
            )),
            config: Arc::new(config),
            // Several managers: the server puts a bus across processes here (`bai_bus::pg`).
            events: Arc::new(LocalBus::new()),
            rate_limiter: Arc::new(RateLimiter::default()),
            agents: Arc::new(AgentRegistry::default()),
            scheduler: Arc::new(Scheduler::default()),
            session_locks: Arc::new(SessionLocks::default()),
            instance_id,
            bgtasks: Arc::new(crate::bgtasks::records::BgTasks::default()),
            exec_runs: Arc::new(crate::sessions::exec::runs::Runs::default()),
            started_apps: Arc::new(crate::sessions::apps::started::StartedApps::default()),
            commits: Arc::default(),
            http,
            tls,
            clock: Arc::new(bai_core::clock::SystemClock),
            storage: Arc::new(bai_storage::LocalStore),
        }
    }
}
