//! The scheduler's handle: its wake-ups, the lock of a pass, and what the leader keeps between
//! passes (retry counts, the agents' index). Nothing here reaches the application state.
use std::collections::HashMap;

use entity::sessions;
use tokio::sync::{Mutex, Notify};
use uuid::Uuid;

use bai_core::plan;

#[derive(Default)]
pub struct Scheduler {
    pub(super) notify: Notify,
    /// Held while a pass runs (tests and benchmarks may run a pass directly).
    pub(super) pass: Mutex<()>,
    /// Something relevant changed since the last pass (a session arrived or ended, an agent
    /// came or went, resources were released).
    pub(super) dirty: std::sync::atomic::AtomicBool,
    /// Passes each pending session waited through, kept here rather than written on every
    /// pass (the database gets them with the next change of reason). The leader's: a new
    /// leader starts from the counts last written.
    pub(super) retries: parking_lot::Mutex<HashMap<Uuid, u32>>,
    /// Per resource group, its agents indexed by free capacity, kept between passes: each pass
    /// re-keys only the agents whose capacity or use changed since (placements, terminations,
    /// heartbeats), and a placement costs about log(agents).
    ///
    /// A bounded cache (one entry per resource group with pending sessions), never the truth:
    /// every pass first brings it to the agents and allocations read from the database, so a
    /// new leader builds its own and plans from the same rows.
    pub(super) indexes: parking_lot::Mutex<HashMap<String, plan::AgentIndex>>,
}

impl Scheduler {
    pub fn wake(&self) {
        self.dirty.store(true, std::sync::atomic::Ordering::SeqCst);
        self.notify.notify_one();
    }

    /// Waited passes of `s`: the count kept here, else the one last written.
    pub(super) fn retries_of(&self, s: &sessions::Model) -> u32 {
        self.retries
            .lock()
            .get(&s.id)
            .copied()
            .unwrap_or_else(|| retries_of(s))
    }
}

fn retries_of(s: &sessions::Model) -> u32 {
    s.status_data
        .as_ref()
        .and_then(|d| d.pointer("/scheduler/retries"))
        .and_then(|v| v.as_u64())
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(0)
}
