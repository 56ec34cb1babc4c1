//! Live connections per owner (a user, or an address when anonymous), capped: GraphQL
//! WebSockets and Backend.AI's event streams (Server-Sent Events) alike. Process memory: each
//! `bai serve` counts the connections it holds itself. The guard that proves a WebSocket's
//! rights again before each operation is the GraphQL surface's (`api/src/graphql/ws_guard.rs`).
use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{ApiError, ApiResult};

/// Who a connection counts against: a user, or an address for anonymous connections.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Owner {
    User(uuid::Uuid),
    Addr(Option<std::net::IpAddr>),
}

/// Open connections per owner.
#[derive(Default)]
pub struct Connections {
    open: Mutex<HashMap<Owner, usize>>,
    /// Connections refused at the cap since the process started.
    refused: std::sync::atomic::AtomicU64,
}

/// Held for as long as the connection is open.
pub struct ConnectionSlot {
    conns: Arc<Connections>,
    owner: Owner,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = self.conns.open.lock();
        if let Some(n) = open.get_mut(&self.owner) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.owner);
            }
        }
    }
}

impl Connections {
    /// As [`Connections::acquire`], with the refusal the caller is shown at the cap.
    pub fn admit(self: &Arc<Self>, owner: Owner, max: usize) -> ApiResult<ConnectionSlot> {
        self.acquire(owner, max).ok_or_else(|| {
            ApiError::new(
                crate::error::ErrorCode::RateLimited,
                format!("At most {max} live connections per user."),
            )
        })
    }

    /// How many connections `owner` holds open now.
    pub fn open_of(&self, owner: &Owner) -> usize {
        self.open.lock().get(owner).copied().unwrap_or(0)
    }

    /// How many connections were refused at the cap since the process started.
    pub fn refusals(&self) -> u64 {
        self.refused.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A slot for one more connection of `owner`, or None at `max`.
    pub fn acquire(self: &Arc<Self>, owner: Owner, max: usize) -> Option<ConnectionSlot> {
        let mut open = self.open.lock();
        let n = open.entry(owner.clone()).or_insert(0);
        if *n >= max {
            self.refused
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return None;
        }
        *n += 1;
        Some(ConnectionSlot {
            conns: self.clone(),
            owner,
        })
    }
}
