//! This process's record of background tasks (bounded): the ones it runs and, with several
//! managers, every other manager's as their events arrive. Nothing here reaches the
//! application state.
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;

use crate::events::{EventBus, TaskState, TaskStatus};

#[derive(Default)]
pub struct BgTasks {
    tasks: Mutex<HashMap<Uuid, TaskState>>,
}

impl BgTasks {
    pub fn get(&self, id: Uuid) -> Option<TaskState> {
        self.lock().get(&id).cloned()
    }

    pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, HashMap<Uuid, TaskState>> {
        self.tasks.lock()
    }

    /// Several managers: a task's state as announced on the bus (by any manager, this one
    /// included), so its state is read through every manager. A state never moves back: an
    /// ended task stays ended, a running one only goes forward.
    pub fn heard(&self, t: &TaskState) {
        let mut tasks = self.lock();
        let newer = tasks.get(&t.task_id).is_none_or(|known| {
            known.status == TaskStatus::Running
                && (t.status != TaskStatus::Running || t.current_progress >= known.current_progress)
        });
        if newer {
            keep_recent(&mut tasks);
            tasks.insert(t.task_id, t.clone());
        }
    }
}

/// Keeps the most recent tasks only (those still running, when more than 256 are known).
pub(crate) fn keep_recent(tasks: &mut HashMap<Uuid, TaskState>) {
    if tasks.len() > 256 {
        tasks.retain(|_, t| t.status == TaskStatus::Running);
    }
}

/// What background tasks use: this process's records of them (shared through their events)
/// and the bus their events travel on.
#[derive(Clone)]
pub struct Tasks {
    pub records: Arc<BgTasks>,
    pub events: Arc<dyn EventBus>,
}

impl Tasks {
    pub fn new(records: &Arc<BgTasks>, events: &Arc<dyn EventBus>) -> Self {
        Self {
            records: records.clone(),
            events: events.clone(),
        }
    }
}
