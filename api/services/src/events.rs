//! The event bus as the services see it: the port and its in-process implementation live in
//! `bai_bus`, the payloads in `bai_types::events`.
pub use bai_bus::{
    Change, ChangeAction, Event, EventBus, EventStream, LocalBus, ObjectKind, SessionEvent,
    TaskState, TaskStatus, Topic, VfolderEvent, until,
};
