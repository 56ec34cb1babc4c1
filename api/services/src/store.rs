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
