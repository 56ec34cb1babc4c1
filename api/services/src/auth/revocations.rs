//! The count of revocations that cached credentials and live streams are checked against.
//! Nothing here reaches the application state.
use std::sync::atomic::{AtomicU64, Ordering};

/// Counts revocations (logout, password change or reset, deactivation, role or keypair
/// changes). Cached credentials are stamped with it (`auth::cache`); open WebSockets and event
/// streams watch it and prove their caller again when it moves. With several managers, a
/// revocation here is announced on the bus ([`crate::events::Event::Revoked`]) and every
/// other process counts it too ([`follow`]): within the bus's delay (milliseconds), no
/// process serves a revoked credential from its cache.
pub struct Revocations {
    count: AtomicU64,
    /// The count after each revocation, and whose credentials it revoked (None: anyone's).
    changed: tokio::sync::watch::Sender<(u64, Option<uuid::Uuid>)>,
    /// Where revocations are announced, and this process's id among the managers.
    bus: parking_lot::RwLock<Option<(std::sync::Arc<dyn crate::events::EventBus>, String)>>,
}

impl Default for Revocations {
    fn default() -> Self {
        Self {
            count: AtomicU64::new(0),
            changed: tokio::sync::watch::channel((0, None)).0,
            bus: parking_lot::RwLock::new(None),
        }
    }
}

impl std::fmt::Debug for Revocations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Revocations").field(&self.current()).finish()
    }
}

impl Revocations {
    /// A revocation of `user`'s credentials here: counted, and announced to the other
    /// managers.
    pub fn bump(&self, user: uuid::Uuid) {
        self.count_one(Some(user));
        if let Some((bus, me)) = self.bus.read().as_ref() {
            bus.publish(crate::events::Event::Revoked {
                by: me.clone(),
                user: Some(user),
            });
        }
    }
    /// A revocation announced by another manager, of `user`'s credentials (None: anyone's,
    /// events may have been missed): counted only.
    pub fn count_one(&self, user: Option<uuid::Uuid>) {
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        self.changed.send_replace((n, user));
    }
    pub fn current(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }
    /// Wakes on every revocation: the count after it, and whose it was.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<(u64, Option<uuid::Uuid>)> {
        self.changed.subscribe()
    }
    /// Announces revocations on `bus` from now on (a bus across processes), as manager `me`.
    pub fn announce_on(&self, bus: std::sync::Arc<dyn crate::events::EventBus>, me: &str) {
        *self.bus.write() = Some((bus, me.to_string()));
    }
}
