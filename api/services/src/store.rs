//! What most services reach, and no more: the database, the configuration, the clock their
//! times come from, the bus their changes are announced on, the revocation count, and folder
//! content. A service that takes `&impl Store` cannot touch the
//! rest of the application state (the leader's scheduler, this process's engines, caches or
//! work in flight); `AppState` is one `Store` (`state.rs`).
use sea_orm::DatabaseConnection;

use crate::events::EventBus;

pub trait Store: Send + Sync {
    /// Reads and writes.
    fn db(&self) -> &DatabaseConnection;
    /// Reads only (SQLite: beside the writer; PostgreSQL: the same pool).
    fn read(&self) -> &DatabaseConnection;
    /// What time it is.
    fn clock(&self) -> &dyn bai_core::clock::Clock;
    /// Where changes are announced (across managers on PostgreSQL).
    fn events(&self) -> &(dyn EventBus + 'static);
    /// Every setting.
    fn config(&self) -> &crate::config::Config;
    /// Folder content (this machine's storage, through directory handles).
    fn storage(&self) -> &dyn bai_storage::FolderStore;
    /// Revocations of credentials (announced to every manager).
    fn revocations(&self) -> &crate::auth::revocations::Revocations;
}

/// What the engines' services reach besides the store (`agents`, `images`): this process's
/// connections to the engines, which of them it drives and whether it leads (elected), and
/// the leader's scheduler to wake. Nothing of the callers' credentials or of sessions' work in
/// flight.
pub trait Engines: Store + Clone + 'static {
    /// This installation's id (labels its containers).
    fn instance_id(&self) -> &str;
    /// This process's connections to every engine (local).
    fn agents(&self) -> &std::sync::Arc<crate::agents::registry::AgentRegistry>;
    /// This process among the managers: whether it leads, which engines it drives (elected).
    fn cluster(&self) -> &std::sync::Arc<crate::cluster::Cluster>;
    /// The leader's scheduler (elected).
    fn scheduler(&self) -> &std::sync::Arc<crate::scheduler::handle::Scheduler>;
}

/// What sessions reach besides the engines: this process's work in flight for them (locks,
/// executions, started apps, commits, background tasks), its caches of their counts and launch
/// times, and its HTTP client, TLS settings and shutdown signal for the app proxy. Nothing of
/// the callers' credentials or the shared limits.
pub trait Runtime: Engines {
    fn session_locks(&self) -> &crate::sessions::locks::SessionLocks;
    fn bgtasks(&self) -> &std::sync::Arc<crate::bgtasks::records::BgTasks>;
    /// The background tasks' records and the bus their events travel on.
    fn tasks(&self) -> crate::bgtasks::records::Tasks;
    fn exec_runs(&self) -> &crate::sessions::exec::runs::Runs;
    fn started_apps(&self) -> &crate::sessions::apps::started::StartedApps;
    fn serving_table(&self) -> &crate::serving::table::ServingTable;
    fn commits(&self) -> &crate::sessions::commit::entries::Commits;
    fn launch_phases(&self) -> &crate::sessions::phases::LaunchPhases;
    fn session_counts(&self) -> &crate::db::counts::CountCache;
    fn http(&self) -> &reqwest::Client;
    fn tls(&self) -> Option<&tokio_rustls::TlsAcceptor>;
    fn shutdown(&self) -> &tokio_util::sync::CancellationToken;
}

/// What proving a caller reaches besides the store (`accounts`, `auth::credentials`): the
/// limits shared across managers as this process counts them, and its cache of credentials
/// (emptied by every revocation). Nothing of engines or sessions.
pub trait Gate: Store {
    fn auth_cache(&self) -> &crate::auth::cache::AuthCache;
    fn rate_limiter(&self) -> &crate::auth::ratelimit::RateLimiter;
    fn seen_signatures(&self) -> &crate::auth::hmac::SeenSignatures;
    fn login_throttle(&self) -> &crate::auth::throttle::LoginThrottle;
    fn usage(&self) -> &crate::keypairs::usage::Usage;
    /// E-mail, when SMTP is configured.
    fn mailer(&self) -> Option<&crate::mail::Mailer>;
}
