//! Authentication and authorization: who is calling and what that allows.
pub mod caller;
pub mod hmac;
pub mod middleware;
pub mod password;
pub mod ratelimit;
pub mod ssh;
pub mod tokens;

pub use caller::{AdminScope, Caller, Principal, ReadScope};
