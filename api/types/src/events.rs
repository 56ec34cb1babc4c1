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
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// A compute session changed status (Backend.AI's event names: `session_started`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEvent {
    pub session_id: uuid::Uuid,
    pub name: String,
    pub access_key: String,
    pub user: uuid::Uuid,
    pub domain: String,
    pub status: crate::enums::SessionStatus,
    pub event: &'static str,
    pub reason: Option<String>,
    /// A batch session's exit code (`session_success` / `session_failure`).
    pub exit_code: Option<i32>,
    /// For `kernel_*` events: which of the session's containers.
    pub kernel: Option<KernelRef>,
}

/// One container of a session, as Backend.AI's kernel events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

#[derive(Debug, Clone, PartialEq)]
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

#[derive(Debug, Clone)]
pub enum Event {
    Changed(Change),
    Session(SessionEvent),
    BgTask(TaskState),
    Vfolder(VfolderEvent),
}

/// A storage folder was created, renamed or deleted. Owner and project say who may hear it.
#[derive(Debug, Clone, PartialEq, Eq)]
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
