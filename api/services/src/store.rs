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
    fn tasks(&self) -> crate::bgtasks::Tasks;
    fn exec_runs(&self) -> &crate::sessions::exec::runs::Runs;
    fn started_apps(&self) -> &crate::sessions::apps::started::StartedApps;
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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The code before its unit tests, without comments.
    fn code(path: &Path) -> String {
        let text = std::fs::read_to_string(path).unwrap();
        let text = match text.find("#[cfg(test)]") {
            Some(at) => &text[..at],
            None => &text[..],
        };
        text.lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The file a `crate::a::b::Item` path names (the longest prefix that is a module file).
    fn file_of(src: &Path, path: &str) -> Option<PathBuf> {
        let segs: Vec<&str> = path.split("::").collect();
        (1..=segs.len()).rev().find_map(|n| {
            let base = src.join(segs[..n].join("/"));
            [base.with_extension("rs"), base.join("mod.rs")]
                .into_iter()
                .find(|p| p.is_file())
        })
    }

    #[test]
    fn no_service_reaches_the_whole_state() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        let allowed = ["state.rs", "lib.rs"];
        let reaching: Vec<_> = files
            .iter()
            .filter(|p| {
                let name = p.file_name().unwrap().to_str().unwrap();
                !allowed.contains(&name) && !name.ends_with("_tests.rs")
            })
            .filter(|p| code(p).contains("AppState"))
            .collect();
        assert!(
            reaching.is_empty(),
            "services taking the whole state: {reaching:?}"
        );
    }

    #[test]
    fn the_state_and_its_handle_sets_name_only_leaf_handles() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let path = crate_paths();
        for file in ["state.rs", "store.rs"] {
            let text = code(&src.join(file));
            for used in path(&text) {
                let Some(leaf) = file_of(&src, &used) else {
                    continue;
                };
                if leaf.ends_with("state.rs") || leaf.ends_with("store.rs") {
                    continue;
                }
                let leaf_code = code(&leaf);
                for back in ["crate::state", "crate::store", "AppState", "super::state"] {
                    assert!(
                        !leaf_code.contains(back),
                        "{file} names {used} from {leaf:?}, which reaches back ({back}): an \
                         import circle"
                    );
                }
            }
        }
    }

    /// Every `crate::…` path in a text, without the item's trailing punctuation.
    fn crate_paths() -> impl Fn(&str) -> Vec<String> {
        |text: &str| {
            let mut out = Vec::new();
            let mut rest = text;
            while let Some(at) = rest.find("crate::") {
                let tail = &rest[at + "crate::".len()..];
                let end = tail
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(tail.len());
                out.push(tail[..end].trim_end_matches(':').to_string());
                rest = &tail[end..];
            }
            out
        }
    }
}
