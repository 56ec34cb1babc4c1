//! Background tasks with progress (image rescans, later maintenance jobs), as Backend.AI's
//! `task_id` + `bgtask_updated/done/failed` events. The latest state of each task is kept so
//! a late subscriber still sees where it is. The service takes only the handles it uses
//! ([`Tasks`]: this process's records and the bus), never the whole application state.

use uuid::Uuid;

use crate::auth::caller::Caller;
use crate::events::Event;

// The task payloads travel on the event bus, so they are defined there.
pub use crate::events::{TaskState, TaskStatus};

pub mod records;
use records::keep_recent;
pub use records::{BgTasks, Tasks};

/// A handle the task's code reports through.
#[derive(Clone)]
pub struct Progress {
    tasks: Tasks,
    id: Uuid,
}

impl Progress {
    fn set(&self, f: impl FnOnce(&mut TaskState)) {
        let snapshot = {
            let mut tasks = self.tasks.records.lock();
            let Some(t) = tasks.get_mut(&self.id) else {
                return;
            };
            f(t);
            t.clone()
        };
        self.tasks.events.publish(Event::BgTask(snapshot));
    }

    pub fn update(&self, current: u64, total: u64, message: impl Into<String>) {
        let message = message.into();
        self.set(|t| {
            t.current_progress = current;
            t.total_progress = total.max(current);
            t.message = message;
        });
    }
}

/// Starts `work` in the background and returns its task id at once.
pub fn spawn<F, Fut>(tasks: &Tasks, kind: &str, owner: Uuid, work: F) -> Uuid
where
    F: FnOnce(Progress) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<String, String>> + Send + 'static,
{
    let id = Uuid::new_v4();
    let initial = TaskState {
        task_id: id,
        kind: kind.to_string(),
        status: TaskStatus::Running,
        event: "bgtask_updated".into(),
        current_progress: 0,
        total_progress: 0,
        message: String::new(),
        owner,
    };
    {
        let mut records = tasks.records.lock();
        keep_recent(&mut records);
        records.insert(id, initial);
    }
    let progress = Progress {
        tasks: tasks.clone(),
        id,
    };
    tokio::spawn(async move {
        let result = work(progress.clone()).await;
        progress.set(|t| match result {
            Ok(msg) => {
                t.status = TaskStatus::Done;
                t.event = "bgtask_done".into();
                t.current_progress = t.total_progress;
                t.message = msg;
            }
            Err(msg) => {
                t.status = TaskStatus::Failed;
                t.event = "bgtask_failed".into();
                t.message = msg;
            }
        });
    });
    id
}

/// Background task `id` of `caller`'s (a superadmin: anyone's); another user's is NOT_FOUND,
/// as one that does not exist.
pub fn visible(tasks: &Tasks, caller: &Caller, id: Uuid) -> crate::error::ApiResult<TaskState> {
    tasks
        .records
        .get(id)
        .filter(|t| t.owner == caller.uuid || caller.is_superadmin())
        .ok_or_else(|| crate::error::ApiError::not_found("background task", id))
}

/// Task `id` as [`visible`] finds it, then every change until it is done or failed: the
/// stream ends with its last state. Listening starts before the state is read, so nothing in
/// between is lost.
pub fn follow(
    tasks: &Tasks,
    caller: &Caller,
    id: Uuid,
) -> crate::error::ApiResult<impl futures_util::Stream<Item = TaskState> + Send + use<>> {
    use futures_util::StreamExt as _;
    let live = tasks.events.stream_topic(crate::events::Topic::Task(id));
    let first = visible(tasks, caller, id)?;
    let live = live.filter_map(move |ev| {
        let out = match &*ev {
            Event::BgTask(t) if t.task_id == id => Some(t.clone()),
            _ => None,
        };
        std::future::ready(out)
    });
    let over = first.status != TaskStatus::Running;
    Ok(
        futures_util::stream::iter([first]).chain(crate::events::until(
            live,
            over,
            |t: &TaskState| t.status != TaskStatus::Running,
        )),
    )
}
