//! What the event bus carries: object changes, session status changes, background-task
//! progress and storage-folder changes, and the topics listeners subscribe to. The bus itself
//! (a port) lives above; these payloads are shared by every layer and the console.
use serde::{Deserialize, Serialize};

/// What kind of object changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::Enum))]
#[cfg_attr(feature = "graphql", graphql(rename_items = "snake_case"))]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    ResourcePreset,
    ContainerRegistry,
    Image,
    ScalingGroup,
    User,
    Keypair,
    KeypairResourcePolicy,
    Domain,
    Group,
    SystemSetting,
    Agent,
    /// Usage statistics (a batch of samples was written; `key` is its newest bucket).
    Usage,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::Enum))]
#[cfg_attr(feature = "graphql", graphql(rename_items = "snake_case"))]
#[serde(rename_all = "snake_case")]
pub enum ChangeAction {
    Created,
    Modified,
    Deleted,
}

/// "Object X of kind K was created/modified/deleted". `domain` scopes who may hear about it
/// (None = visible to everyone allowed to read that kind).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub kind: ObjectKind,
    pub action: ChangeAction,
    pub key: String,
    pub domain: Option<String>,
}

/// Session event names Backend.AI's own clients know. bai's own (`session_agent_lost`,
/// `session_agent_returned`: the session's agent stopped / resumed answering) go to bai's
/// GraphQL subscriptions only, never to Backend.AI's event stream.
pub const BACKEND_AI_SESSION_EVENTS: &[&str] = &[
    "session_enqueued",
    "session_scheduled",
    "session_preparing",
    "kernel_preparing",
    "kernel_pulling",
    "kernel_started",
    "session_started",
    "kernel_terminating",
    "kernel_terminated",
    "kernel_cancelled",
    "session_terminating",
    "session_terminated",
    "session_cancelled",
    "session_failure",
    "session_success",
];

/// bai's own session events (see [`BACKEND_AI_SESSION_EVENTS`]): `session_renamed` (the
/// console shows the new name at once) and the agent's silence and return.
pub const BAI_SESSION_EVENTS: &[&str] = &[
    "session_renamed",
    "session_agent_lost",
    "session_agent_returned",
];

/// The session event of this name (Backend.AI's or bai's own), as the code spells it; None
/// for a name no code sends. Another manager's events are read through it, so an event sent
/// under a name not listed here never crosses to the other managers.
pub fn session_event_name(name: &str) -> Option<&'static str> {
    BACKEND_AI_SESSION_EVENTS
        .iter()
        .chain(BAI_SESSION_EVENTS)
        .find(|n| **n == name)
        .copied()
}

/// A compute session changed status (Backend.AI's event names: `session_started`, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "SessionEventWire")]
pub struct SessionEvent {
    pub session_id: uuid::Uuid,
    pub name: String,
    pub access_key: String,
    pub user: uuid::Uuid,
    pub domain: String,
    pub status: crate::enums::SessionStatus,
    // Read through `SessionEventWire` (this only keeps the derive from borrowing 'static).
    #[serde(skip_deserializing)]
    pub event: &'static str,
    pub reason: Option<String>,
    /// A batch session's exit code (`session_success` / `session_failure`).
    pub exit_code: Option<i32>,
    /// For `kernel_*` events: which of the session's containers.
    pub kernel: Option<KernelRef>,
}

/// A [`SessionEvent`] as read from the wire (another manager's): its name becomes the one the
/// code spells (a `&'static str`); a name no code sends is refused.
#[derive(Deserialize)]
struct SessionEventWire {
    session_id: uuid::Uuid,
    name: String,
    access_key: String,
    user: uuid::Uuid,
    domain: String,
    status: crate::enums::SessionStatus,
    event: String,
    reason: Option<String>,
    exit_code: Option<i32>,
    kernel: Option<KernelRef>,
}

impl TryFrom<SessionEventWire> for SessionEvent {
    type Error = String;
    fn try_from(w: SessionEventWire) -> Result<Self, String> {
        let event = session_event_name(&w.event)
            .ok_or_else(|| format!("unknown session event {}", w.event))?;
        Ok(Self {
            session_id: w.session_id,
            name: w.name,
            access_key: w.access_key,
            user: w.user,
            domain: w.domain,
            status: w.status,
            event,
            reason: w.reason,
            exit_code: w.exit_code,
            kernel: w.kernel,
        })
    }
}

/// One container of a session, as Backend.AI's kernel events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelRef {
    pub id: uuid::Uuid,
    pub role: crate::enums::ClusterRole,
    pub idx: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::Enum))]
#[cfg_attr(feature = "graphql", graphql(rename_items = "snake_case"))]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Running,
    Done,
    Failed,
}

impl TaskStatus {
    /// The status as the schema spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Done => "done",
            TaskStatus::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
#[cfg_attr(feature = "graphql", graphql(rename_fields = "snake_case"))]
// The state of a background task (`bgtasks`), as its events carry it.
pub struct TaskState {
    pub task_id: uuid::Uuid,
    pub kind: String,
    pub status: TaskStatus,
    /// Backend.AI's event name: bgtask_updated, bgtask_done or bgtask_failed.
    pub event: String,
    pub current_progress: u64,
    pub total_progress: u64,
    pub message: String,
    #[cfg_attr(feature = "graphql", graphql(skip))]
    pub owner: uuid::Uuid,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", content = "e", rename_all = "snake_case")]
pub enum Event {
    Changed(Change),
    Session(SessionEvent),
    BgTask(TaskState),
    Vfolder(VfolderEvent),
    /// Credentials of `user` were revoked (a logout, a password, role or status change, a
    /// keypair deactivated or deleted) by the manager `by` (empty, and no user: events may
    /// have been missed, anyone's may have been): every other manager drops its cached
    /// credentials and proves again those of the live streams concerned.
    Revoked {
        by: String,
        user: Option<uuid::Uuid>,
    },
}

/// A storage folder was created, renamed or deleted. Owner and project say who may hear it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VfolderEvent {
    pub id: uuid::Uuid,
    pub name: String,
    pub action: ChangeAction,
    pub user: Option<uuid::Uuid>,
    pub group: Option<uuid::Uuid>,
    pub domain: String,
}

/// What a subscriber listens to. Session and task events go to their own topics, so a
/// change reaches only the listeners it concerns (no stream sees, and filters, every event of
/// the server); everything also goes to [`EventBus::stream`] for the few listeners that want
/// it all (the scheduler, administrators' change feeds).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Topic {
    /// Session events of one user's sessions.
    SessionsOf(uuid::Uuid),
    /// Session events of one domain's sessions.
    SessionsIn(String),
    /// Every session event.
    Sessions,
    /// One background task's events.
    Task(uuid::Uuid),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every session event the code may send crosses to another manager as it was sent (the
    /// PostgreSQL bus carries them as JSON); a name nobody lists is refused on arrival.
    #[test]
    fn every_listed_session_event_crosses_to_another_manager() {
        let event = |event: &'static str| SessionEvent {
            session_id: uuid::Uuid::nil(),
            name: "s".into(),
            access_key: "AKIA".into(),
            user: uuid::Uuid::nil(),
            domain: "default".into(),
            status: crate::enums::SessionStatus::Running,
            event,
            reason: None,
            exit_code: None,
            kernel: None,
        };
        for name in BACKEND_AI_SESSION_EVENTS.iter().chain(BAI_SESSION_EVENTS) {
            let e = event(name);
            let wire = serde_json::to_string(&e).unwrap();
            let back: SessionEvent = serde_json::from_str(&wire).unwrap();
            assert_eq!(back, e, "{name}");
        }
        let unknown = serde_json::to_string(&event("session_exploded")).unwrap();
        assert!(serde_json::from_str::<SessionEvent>(&unknown).is_err());
        assert_eq!(
            session_event_name("session_renamed"),
            Some("session_renamed")
        );
    }
}
