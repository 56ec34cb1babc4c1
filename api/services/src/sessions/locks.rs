//! Per-session locks: launch, batch completion and termination of one session never
//! interleave.
use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::Mutex;
use uuid::Uuid;

#[derive(Default)]
pub struct SessionLocks {
    locks: parking_lot::Mutex<HashMap<Uuid, Arc<Mutex<()>>>>,
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
}
