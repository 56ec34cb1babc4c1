//! The commits under way in this process. Nothing here reaches the application state.
use std::collections::HashMap;

use uuid::Uuid;

/// Sessions being committed now, with their task: one commit per session at a time.
///
/// Per process, bounded by the live sessions (an entry leaves with its task; it also counts the
/// images its commit will add against the owner's quota until the image is in the catalog).
/// With several managers each commit is also claimed in the database (`session_commits`), so
/// one session is committed through one manager at a time and the quota counts every
/// manager's commits under way.
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
