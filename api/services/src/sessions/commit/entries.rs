//! The commits under way in this process. Nothing here reaches the application state.
use std::collections::HashMap;

use uuid::Uuid;

/// Sessions being committed now, with their task: one commit per session at a time.
///
/// Per process, bounded by the live sessions (an entry leaves with its task; it also counts the
/// images its commit will add against the owner's quota until the image is in the catalog): like the
/// background tasks it points to, a second `bai serve` on the same database does not see it
/// (there a commit of the same session could start, and its status reads `ready`); the
/// many-managers issue moves both to PostgreSQL.
#[derive(Default)]
pub struct Commits {
    pub(super) running: parking_lot::Mutex<HashMap<Uuid, Running>>,
}

/// A commit under way: its task, and the owner of the image it adds (None: it replaces one).
pub(super) struct Running {
    pub(super) task: Uuid,
    pub(super) adds_for: Option<Uuid>,
}

impl Commits {
    pub fn task_of(&self, session: Uuid) -> Option<Uuid> {
        self.running.lock().get(&session).map(|r| r.task)
    }
}
