//! This manager's routing table of model-serving endpoints: for each live endpoint with a
//! port, who may call it (public, or its key and the ids of its live tokens) and where its
//! healthy replicas answer. Refreshed from the database about every second by every manager
//! (`serving::refresh`), read by the endpoint proxy on each request without a database
//! round-trip. A handle: it reaches no state. Kind: a per-process cache of what the database
//! holds (bounded by the live endpoints, their routes and tokens); every manager keeps its own
//! and none is ever the truth (several managers: docs/src/several-managers.md).
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::RwLock;
use uuid::Uuid;

/// A replica that takes traffic.
#[derive(Debug, Clone, PartialEq)]
pub struct Upstream {
    pub route: Uuid,
    pub session: Uuid,
    pub addr: SocketAddr,
    pub traffic_ratio: f64,
}

/// One endpoint as the proxy sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Served {
    pub endpoint: Uuid,
    pub port: u16,
    pub public: bool,
    /// The key its tokens are signed with.
    pub token_key: String,
    /// Ids of its tokens not revoked (expiry is in each token).
    pub tokens: HashSet<Uuid>,
    /// Replicas that passed their health check (or have none).
    pub healthy: Vec<Upstream>,
    /// Replicas still starting (their sessions run, their check has not passed yet): a
    /// request may wait for one.
    pub starting: usize,
    /// Token ids found revoked since the last read (no database round-trip for them again).
    pub refused: HashSet<Uuid>,
}

/// The most refused token ids kept per endpoint between reads.
const REFUSED_KEPT: usize = 1024;
/// How long a revocation through this manager outlives a read of the database that began
/// before it (reads take well under this).
const REVOCATION_HOLD: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Default)]
pub struct ServingTable {
    served: RwLock<HashMap<Uuid, Arc<Served>>>,
    /// Wakes this manager's reconciler before its next tick (a service was created, scaled,
    /// changed or deleted through this manager).
    wake: tokio::sync::Notify,
    /// Tokens this manager revoked lately: a read of the database begun before a revocation
    /// never brings its token back.
    revoked: parking_lot::Mutex<HashMap<Uuid, std::time::Instant>>,
}

impl ServingTable {
    /// Asks the reconciler for a pass now (a no-op unless this manager leads).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Waits for `wake`.
    pub async fn woken(&self) {
        self.wake.notified().await;
    }

    /// The endpoint as last read, if it is served.
    pub fn get(&self, endpoint: Uuid) -> Option<Arc<Served>> {
        self.served.read().get(&endpoint).cloned()
    }

    /// Replaces the table with what the database says now.
    pub fn replace(&self, mut all: Vec<Served>) {
        let revoked: HashSet<Uuid> = {
            let mut r = self.revoked.lock();
            r.retain(|_, at| at.elapsed() < REVOCATION_HOLD);
            r.keys().copied().collect()
        };
        if !revoked.is_empty() {
            for s in &mut all {
                s.tokens.retain(|t| !revoked.contains(t));
            }
        }
        let map = all.into_iter().map(|s| (s.endpoint, Arc::new(s))).collect();
        *self.served.write() = map;
    }

    /// Remembers until the next read that token `id` of `endpoint` is not live.
    pub fn refuse(&self, endpoint: Uuid, id: Uuid) {
        let mut map = self.served.write();
        if let Some(s) = map.get(&endpoint)
            && s.refused.len() < REFUSED_KEPT
        {
            let mut s = (**s).clone();
            s.refused.insert(id);
            map.insert(endpoint, Arc::new(s));
        }
    }

    /// Every served endpoint and its port.
    pub fn ports(&self) -> Vec<(Uuid, u16)> {
        self.served
            .read()
            .values()
            .map(|s| (s.endpoint, s.port))
            .collect()
    }

    /// Opens or closes `endpoint` to the public at once (this manager changed it; the
    /// others follow at their next refresh).
    pub fn set_public(&self, endpoint: Uuid, public: bool) {
        let mut map = self.served.write();
        if let Some(s) = map.get(&endpoint) {
            let mut s = (**s).clone();
            s.public = public;
            map.insert(endpoint, Arc::new(s));
        }
    }

    /// Knows token `id` of `endpoint` at once (found live in the database after a miss).
    pub fn grant(&self, endpoint: Uuid, id: Uuid) {
        let mut map = self.served.write();
        if let Some(s) = map.get(&endpoint) {
            let mut s = (**s).clone();
            s.tokens.insert(id);
            map.insert(endpoint, Arc::new(s));
        }
    }

    /// Forgets token `id` of `endpoint` at once (this manager revoked it; the others follow
    /// at their next refresh).
    pub fn revoke(&self, endpoint: Uuid, id: Uuid) {
        self.revoked.lock().insert(id, std::time::Instant::now());
        let mut map = self.served.write();
        if let Some(s) = map.get(&endpoint) {
            let mut s = (**s).clone();
            s.tokens.remove(&id);
            map.insert(endpoint, Arc::new(s));
        }
    }
}
