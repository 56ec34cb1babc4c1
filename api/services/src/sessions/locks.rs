//! Per-session locks: launch, batch completion and termination of one session never
//! interleave.
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tokio::sync::Mutex;
use uuid::Uuid;

#[derive(Default)]
pub struct SessionLocks {
    locks: parking_lot::Mutex<HashMap<Uuid, Arc<Mutex<()>>>>,
    /// Sessions whose termination waits for their lock: a launch holding it stops waiting
    /// for what it may stop waiting for (a bootstrap script) and lets it go. Per process, as
    /// the locks themselves (a termination through another `bai serve` waits out the launch's
    /// bootstrap wait, as before); bounded by the terminations under way.
    ending: parking_lot::Mutex<HashSet<Uuid>>,
}

/// A termination's wish to end a session, withdrawn when dropped (it then holds the lock).
pub struct EndRequest<'a> {
    locks: &'a SessionLocks,
    id: Uuid,
}

impl Drop for EndRequest<'_> {
    fn drop(&mut self) {
        self.locks.ending.lock().remove(&self.id);
    }
}

impl SessionLocks {
    pub async fn get(&self, id: Uuid) -> Arc<Mutex<()>> {
        let mut map = self.locks.lock();
        // Forget locks nobody holds or waits for, so the map stays small.
        if map.len() > 1024 {
            map.retain(|_, l| Arc::strong_count(l) > 1);
        }
        map.entry(id).or_default().clone()
    }

    /// Says that session `id` is to end (until the returned request is dropped).
    pub fn ask_to_end(&self, id: Uuid) -> EndRequest<'_> {
        self.ending.lock().insert(id);
        EndRequest { locks: self, id }
    }

    /// Whether a termination of session `id` waits for its lock.
    pub fn asked_to_end(&self, id: Uuid) -> bool {
        self.ending.lock().contains(&id)
    }
}
