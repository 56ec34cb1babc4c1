//! Authentication and authorization: who is calling and what that allows.
pub mod cache;
pub mod caller;
pub mod credentials;
pub mod hmac;
pub mod password;
pub mod ratelimit;
pub mod shared;
pub mod ssh;
pub mod throttle;
pub mod tokens;
pub mod ws;

pub use caller::{AdminScope, Caller, Principal, ReadScope, SuperadminScope};

use std::sync::atomic::{AtomicU64, Ordering};

/// The client's address (from the TCP connection), for throttles and logs.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientAddr(pub Option<std::net::IpAddr>);

/// How the request proved who it is, so that a long-lived connection (a GraphQL WebSocket)
/// can prove it again before each operation.
#[derive(Debug, Clone, Default)]
pub enum Credential {
    #[default]
    None,
    /// A login session's token (bearer or cookie).
    Token(String),
    /// An HMAC-signed request by this access key.
    Keypair(String),
}

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

/// Counts the revocations other managers announce (every process runs it on a bus across
/// processes; its own come back too, and were counted when they were made).
pub async fn follow(state: crate::state::AppState) {
    use crate::events::Event;
    if !state.events.spans_processes() {
        return;
    }
    crate::events::follow(&*state.events, |e| match e {
        Some(Event::Revoked { by, user }) if *by != state.cluster.id => {
            state.revocations.count_one(*user)
        }
        Some(_) => {}
        // Missed events may have held a revocation of anyone's.
        None => state.revocations.count_one(None),
    })
    .await
}
