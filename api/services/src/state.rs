//! The application state handed to every handler and resolver, grouped by what each part is
//! when several managers share one PostgreSQL database (the book, docs/src/several-managers.md):
//!
//! - the foundation: the database, the configuration, the clock, the storage, this process's
//!   HTTP client, TLS settings and shutdown signal;
//! - [`Shared`]: what every manager sees alike, through the database or the event bus;
//! - [`Elected`]: what one process does at a time, by lease (the leader's scheduler, each
//!   engine's driver);
//! - [`Local`]: this process's own, each bounded: its connections, its work in flight, and
//!   caches of what the database holds.
//!
//! It names only handle types, from files that reach no application state, so no import
//! circle runs through it.
use std::sync::Arc;

use sea_orm::DatabaseConnection;

use crate::agents::registry::AgentRegistry;
use crate::auth::cache::AuthCache;
use crate::auth::hmac::SeenSignatures;
use crate::auth::ratelimit::RateLimiter;
use crate::auth::revocations::Revocations;
use crate::auth::throttle::{LoginLimits, LoginThrottle};
use crate::auth::ws::Connections;
use crate::bgtasks::records::BgTasks;
use crate::cluster::Cluster;
use crate::config::Config;
use crate::db::counts::CountCache;
use crate::events::{EventBus, LocalBus};
use crate::keypairs::usage::Usage;
use crate::mail::Mailer;
use crate::scheduler::handle::Scheduler;
use crate::sessions::apps::started::StartedApps;
use crate::sessions::commit::entries::Commits;
use crate::sessions::exec::runs::Runs;
use crate::sessions::locks::SessionLocks;
use crate::sessions::phases::LaunchPhases;

#[derive(Clone)]
pub struct AppState {
    /// Reads and writes (SQLite: the one writer connection).
    pub db: DatabaseConnection,
    /// Reads only (SQLite: a pool of read-only connections beside the writer, WAL; PostgreSQL:
    /// the same pool as `db`). Committed writes are visible to the next read.
    pub read: DatabaseConnection,
    pub config: Arc<Config>,
    /// This installation's id (labels its containers).
    pub instance_id: String,
    /// One HTTP client (connection pool) for the app proxy and probes.
    pub http: reqwest::Client,
    /// The server's TLS settings when it speaks HTTPS (app ports use them too).
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// What time it is (the system clock; tests move a manual one).
    pub clock: Arc<dyn bai_core::clock::Clock>,
    /// Folder content (this machine's storage, through directory handles).
    pub storage: Arc<dyn bai_storage::FolderStore>,
    /// Cancelled when the server begins to shut down: live streams end with a reason.
    pub shutdown: tokio_util::sync::CancellationToken,
    pub shared: Shared,
    pub elected: Elected,
    pub local: Local,
}

/// What every manager sees alike: announced on the bus or counted in the database.
#[derive(Clone)]
pub struct Shared {
    /// The event bus: across managers on PostgreSQL (`events::pg`), in process on SQLite.
    pub events: Arc<dyn EventBus>,
    /// Revocations: announced on the bus to every manager.
    pub revocations: Arc<Revocations>,
    /// Keypair rate limits: counted here, added to the database's counts every second
    /// (`auth::shared`).
    pub rate_limiter: Arc<RateLimiter>,
    /// HMAC signatures already used within the clock-skew window: this process's first, then
    /// the database's (`auth::shared`).
    pub seen_signatures: Arc<SeenSignatures>,
    /// Login failures, in the database (`auth::shared`); only the attempts running at once
    /// are counted per process.
    pub login_throttle: Arc<LoginThrottle>,
    /// Keypair use counted in memory, added to the database in batches (`keypairs::usage`):
    /// each manager adds its own, none overwrites another's.
    pub usage: Arc<Usage>,
}

/// What one process does at a time, by lease.
#[derive(Clone)]
pub struct Elected {
    /// This process among the managers of the database: whether it leads, which engines it
    /// drives.
    pub cluster: Arc<Cluster>,
    /// The leader's scheduler (its retry counts and agents' index are the leader's).
    pub scheduler: Arc<Scheduler>,
}

/// This process's own, each bounded.
#[derive(Clone)]
pub struct Local {
    /// Its connections to every engine (which it drives is elected: `Elected::cluster`).
    pub agents: Arc<AgentRegistry>,
    /// Launch and termination of one session in this process never interleave; across
    /// managers, status changes are compare-and-set (`sessions::transition`).
    pub session_locks: Arc<SessionLocks>,
    /// The tasks this manager runs, and every manager's as their events (which carry the whole
    /// state) arrive on the bus (`sessions::follow`).
    pub bgtasks: Arc<BgTasks>,
    /// The executions this manager runs. Several managers: each is copied to the database,
    /// where every other manager reads it (`sessions::exec::find`).
    pub exec_runs: Arc<Runs>,
    /// This manager's listeners for started apps; forgotten on any manager's end of the
    /// session (`sessions::follow`). Several managers: tokens and visibility are shared
    /// (`app_routes`, `sessions::apps::known`).
    pub started_apps: Arc<StartedApps>,
    /// This manager's routing table of model-serving endpoints: a bounded cache of the
    /// database, refreshed every second by every manager (`serving::refresh`).
    pub serving: Arc<crate::serving::table::ServingTable>,
    /// Sessions being committed to images through this manager (several managers: claimed in
    /// the database, `sessions::commit`).
    pub commits: Arc<Commits>,
    /// Open GraphQL WebSockets per user (or per address when anonymous): the cap holds per
    /// manager.
    pub ws_connections: Arc<Connections>,
    /// Login sessions, users and keypairs as requests prove who they are (`auth::cache`),
    /// emptied by every revocation of any manager.
    pub auth_cache: Arc<AuthCache>,
    /// Time spent by the last launches' phases (`bai bench`, metrics).
    pub launch_phases: Arc<LaunchPhases>,
    /// `total_count` of session lists; `sessions::publish` marks every change, and every other
    /// manager's (`sessions::follow`).
    pub session_counts: Arc<CountCache>,
    /// Statements run by this process's connections, by table (`db::StatementCounts`; set by
    /// the server when it connects).
    pub statements: Arc<crate::db::StatementCounts>,
    /// E-mail (None unless SMTP is configured): the transport and this process's bounded
    /// queue of link requests, worked through by one task (`accounts::links::outbox`).
    pub mailer: Option<Arc<Mailer>>,
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
        let login_limits = LoginLimits {
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
        let cluster = if config.shares_database() {
            Cluster::shared(addr, std::time::Duration::from_secs(config.lease_secs))
        } else {
            Cluster::single(addr)
        };
        Self {
            db,
            read,
            config: Arc::new(config),
            instance_id,
            http,
            tls,
            clock: Arc::new(bai_core::clock::SystemClock),
            storage: Arc::new(bai_storage::LocalStore),
            shutdown: tokio_util::sync::CancellationToken::new(),
            shared: Shared {
                // Several managers: the server puts a bus across processes here (`events::pg`).
                events: Arc::new(LocalBus::new()),
                revocations: Arc::default(),
                rate_limiter: Arc::default(),
                seen_signatures: Arc::new(SeenSignatures::new(skew)),
                login_throttle: Arc::new(LoginThrottle::new(login_limits)),
                usage: Arc::default(),
            },
            elected: Elected {
                cluster: Arc::new(cluster),
                scheduler: Arc::default(),
            },
            local: Local {
                agents: Arc::default(),
                session_locks: Arc::default(),
                bgtasks: Arc::default(),
                exec_runs: Arc::default(),
                started_apps: Arc::default(),
                serving: Arc::default(),
                commits: Arc::default(),
                ws_connections: Arc::default(),
                auth_cache: Arc::default(),
                launch_phases: Arc::default(),
                session_counts: Arc::new(CountCache::new(std::time::Duration::from_secs(2))),
                statements: Arc::default(),
                mailer: None,
            },
        }
    }
}

impl crate::store::Store for AppState {
    fn db(&self) -> &DatabaseConnection {
        &self.db
    }
    fn read(&self) -> &DatabaseConnection {
        &self.read
    }
    fn clock(&self) -> &dyn bai_core::clock::Clock {
        &*self.clock
    }
    fn events(&self) -> &(dyn EventBus + 'static) {
        &*self.shared.events
    }
    fn config(&self) -> &Config {
        &self.config
    }
    fn storage(&self) -> &dyn bai_storage::FolderStore {
        &*self.storage
    }
    fn revocations(&self) -> &Revocations {
        &self.shared.revocations
    }
}

impl crate::store::Engines for AppState {
    fn instance_id(&self) -> &str {
        &self.instance_id
    }
    fn agents(&self) -> &Arc<AgentRegistry> {
        &self.local.agents
    }
    fn cluster(&self) -> &Arc<Cluster> {
        &self.elected.cluster
    }
    fn scheduler(&self) -> &Arc<Scheduler> {
        &self.elected.scheduler
    }
}

impl crate::store::Runtime for AppState {
    fn session_locks(&self) -> &SessionLocks {
        &self.local.session_locks
    }
    fn bgtasks(&self) -> &Arc<BgTasks> {
        &self.local.bgtasks
    }
    fn tasks(&self) -> crate::bgtasks::records::Tasks {
        crate::bgtasks::records::Tasks::new(&self.local.bgtasks, &self.shared.events)
    }
    fn exec_runs(&self) -> &Runs {
        &self.local.exec_runs
    }
    fn started_apps(&self) -> &StartedApps {
        &self.local.started_apps
    }
    fn serving_table(&self) -> &crate::serving::table::ServingTable {
        &self.local.serving
    }
    fn commits(&self) -> &Commits {
        &self.local.commits
    }
    fn launch_phases(&self) -> &LaunchPhases {
        &self.local.launch_phases
    }
    fn session_counts(&self) -> &CountCache {
        &self.local.session_counts
    }
    fn http(&self) -> &reqwest::Client {
        &self.http
    }
    fn tls(&self) -> Option<&tokio_rustls::TlsAcceptor> {
        self.tls.as_ref()
    }
    fn shutdown(&self) -> &tokio_util::sync::CancellationToken {
        &self.shutdown
    }
}

impl crate::store::Gate for AppState {
    fn auth_cache(&self) -> &AuthCache {
        &self.local.auth_cache
    }
    fn rate_limiter(&self) -> &RateLimiter {
        &self.shared.rate_limiter
    }
    fn seen_signatures(&self) -> &SeenSignatures {
        &self.shared.seen_signatures
    }
    fn login_throttle(&self) -> &LoginThrottle {
        &self.shared.login_throttle
    }
    fn usage(&self) -> &Usage {
        &self.shared.usage
    }
    fn mailer(&self) -> Option<&Mailer> {
        self.local.mailer.as_deref()
    }
}
