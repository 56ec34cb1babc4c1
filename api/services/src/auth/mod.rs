//! Authentication and authorization: who is calling and what that allows.
pub mod cache;
pub mod caller;
pub mod credentials;
pub mod hmac;
pub mod password;
pub mod ratelimit;
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
/// changes). Open WebSockets compare it with the value they last checked against and
/// re-resolve their caller when it moved.
#[derive(Debug, Default)]
pub struct Revocations(AtomicU64);

impl Revocations {
    pub fn bump(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    pub fn current(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}
