//! What this process knows of the apps started in sessions: their tokens, visibility, pool
//! ports and listeners, where it reaches their container ports, and the SSH setups still
//! going on. Nothing here reaches the application state.
use parking_lot::Mutex;
use std::collections::HashMap;
use uuid::Uuid;

/// Apps started in sessions: their tokens, visibility and pool ports, and where the server
/// reaches their container ports (the container's address on its host's session network,
/// fixed for a container's life, so the proxy asks the engine only once).
///
/// Process memory: the listeners are this process's. With several managers, an app's token
/// and visibility are also in the database ([`share_route`]), so every manager serves it
/// (each on a pool port of its own) and none starts it twice.
#[derive(Default)]
pub struct StartedApps {
    inner: Mutex<AppsInner>,
}

#[derive(Default)]
struct AppsInner {
    apps: HashMap<(Uuid, String), AppEntry>,
    ports: HashMap<(Uuid, u16), std::net::SocketAddr>,
    /// Sessions whose SSH setup (after RUNNING) is still going on.
    ssh_setups: HashMap<Uuid, tokio::sync::watch::Receiver<()>>,
}

/// The longest the sshd app or the key download waits for a session's SSH setup.
pub const SSH_SETUP_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// An app started in a session: its per-launch token, whether anyone may use it, and the
/// pool port (and its listener) serving it.
#[derive(Clone)]
pub struct AppEntry {
    pub token: String,
    pub public: bool,
    /// The port-pool listener serving this app, if any.
    pub pool_port: Option<u16>,
    pub listener: Option<tokio::task::AbortHandle>,
}

impl StartedApps {
    /// Drops everything known about a session's apps (it ended) and closes their listeners.
    pub fn forget(&self, session: Uuid) {
        let mut inner = self.inner.lock();
        inner.apps.retain(|(s, _), e| {
            if *s == session
                && let Some(l) = &e.listener
            {
                l.abort();
            }
            *s != session
        });
        inner.ports.retain(|(s, _), _| *s != session);
        inner.ssh_setups.remove(&session);
    }

    /// A session's SSH setup starts: until `ssh_setup_ends`, `ssh_setup_done` waits.
    pub fn ssh_setup_begins(&self, session: Uuid) -> tokio::sync::watch::Sender<()> {
        let (tx, rx) = tokio::sync::watch::channel(());
        self.inner.lock().ssh_setups.insert(session, rx);
        tx
    }

    /// The setup is over (done or failed): the waiters go on.
    pub fn ssh_setup_ends(&self, session: Uuid, setup: tokio::sync::watch::Sender<()>) {
        let mut inner = self.inner.lock();
        if inner
            .ssh_setups
            .get(&session)
            .is_some_and(|rx| rx.same_channel(&setup.subscribe()))
        {
            inner.ssh_setups.remove(&session);
        }
        drop(setup); // closes the channel: every waiter wakes
    }

    /// Waits (bounded) until the session's SSH keys and daemon are in place.
    pub async fn ssh_setup_done(&self, session: Uuid) {
        let pending = self.inner.lock().ssh_setups.get(&session).cloned();
        if let Some(mut rx) = pending {
            // The sender is dropped when the setup ends: `changed` then returns an error.
            let _ = tokio::time::timeout(SSH_SETUP_WAIT, async {
                while rx.changed().await.is_ok() {}
            })
            .await;
        }
    }

    /// What is known of an app started in a session.
    pub fn entry(&self, session: Uuid, app: &str) -> Option<AppEntry> {
        self.inner
            .lock()
            .apps
            .get(&(session, app.to_string()))
            .cloned()
    }

    /// Records an app started in a session (the proxy serves it from now on).
    pub fn insert(&self, session: Uuid, app: &str, entry: AppEntry) {
        self.inner
            .lock()
            .apps
            .insert((session, app.to_string()), entry);
    }

    /// Where the server reaches `port` of the session's container, if looked up before.
    pub fn port(&self, session: Uuid, port: u16) -> Option<std::net::SocketAddr> {
        self.inner.lock().ports.get(&(session, port)).copied()
    }

    /// Remembers where `port` of the session's container is reached (fixed for its life).
    pub fn remember_port(&self, session: Uuid, port: u16, at: std::net::SocketAddr) {
        self.inner.lock().ports.insert((session, port), at);
    }
}
