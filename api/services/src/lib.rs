//! Layer 4 of bai: the services, one module per domain — they own transactions, role checks
//! (typed caller scopes) and events — with the state that wires them (`state::AppState`).
//! Below: `bai_core` (errors, pure rules), the ports `bai_engine` and `bai_bus`, `entity`.
//! Above: the `api` crate's surfaces (GraphQL, REST, terminal, transfer) and server; nothing
//! here may name them (Cargo forbids it).
pub mod accounts;
pub mod agents;
pub mod audit;
pub mod auth;
pub mod bgtasks;
pub mod cluster;
pub mod config;
pub mod db;
pub mod domains;
pub mod dotfiles;
pub use bai_core::error;
pub mod events;
pub mod groups;
pub mod heartbeat;
pub mod images;
pub mod keypairs;
#[cfg(test)]
mod layers;
pub mod lookup;
pub mod mail;
pub mod policies;
pub mod presets;
pub mod registries;
pub mod scaling_groups;
pub mod scheduler;
pub mod serving;
pub mod sessions;
pub mod settings;
pub mod sql;
pub mod state;
pub mod statistics;
pub mod storage;
pub mod store;
pub mod templates;
#[cfg(test)]
mod testing;
pub mod users;
pub use bai_core::validate;

pub use config::Config;
pub use state::AppState;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The Backend.AI API version announced to clients.
pub const API_VERSION: &str = "v8.20240915";
/// A Backend.AI manager release that announced `API_VERSION` (24.12.0): what `GET /`
/// answers as `manager`, since Lablup's consoles switch their features on that number.
pub const MANAGER_COMPAT: &str = "24.12.0";
