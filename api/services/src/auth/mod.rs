//! Authentication and authorization: who is calling and what that allows.
pub mod cache;
pub mod caller;
pub mod credentials;
pub mod hmac;
pub mod logins;
pub mod password;
pub mod ratelimit;
pub mod shared;
pub mod ssh;
pub mod throttle;
pub mod tokens;
pub mod visibility;
pub mod ws;

pub use caller::{AdminScope, Caller, Principal, ReadScope, SuperadminScope};

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

pub mod revocations;
pub use revocations::Revocations;

/// Counts the revocations other managers announce (every process runs it on a bus across
/// processes; its own come back too, and were counted when they were made): `me` is this
/// manager's id.
pub async fn follow(
    events: std::sync::Arc<dyn crate::events::EventBus>,
    revocations: std::sync::Arc<Revocations>,
    me: String,
) {
    use crate::events::Event;
    if !events.spans_processes() {
        return;
    }
    crate::events::follow(&*events, |e| match e {
        Some(Event::Revoked { by, user }) if *by != me => revocations.count_one(*user),
        Some(_) => {}
        // Missed events may have held a revocation of anyone's.
        None => revocations.count_one(None),
    })
    .await
}
