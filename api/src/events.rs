//! The in-process event bus. Services publish after their transaction commits; GraphQL
//! subscriptions (and later SSE and the scheduler) listen.
use std::collections::HashMap;
use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use tokio::sync::broadcast;

/// What kind of object changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, async_graphql::Enum)]
#[graphql(rename_items = "snake_case")]
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, async_graphql::Enum)]
#[graphql(rename_items = "snake_case")]
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

/// A compute session changed status (Backend.AI's event names: `session_started`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEvent {
    pub session_id: uuid::Uuid,
    pub name: String,
    pub access_key: String,
    pub user: uuid::Uuid,
    pub domain: String,
    pub status: entity::enums::SessionStatus,
    pub event: &'static str,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, async_graphql::Enum)]
#[graphql(rename_items = "snake_case")]
pub enum TaskStatus {
    Running,
    Done,
    Failed,
}

#[derive(Debug, Clone, PartialEq, async_graphql::SimpleObject)]
#[graphql(rename_fields = "snake_case")]
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
    #[graphql(skip)]
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

/// Events kept per topic for listeners that fall behind (a slower one skips, and only in its
/// own stream).
const TOPIC_BUFFER: usize = 256;

#[derive(Clone)]
pub struct EventBus {
    tx: broadcast::Sender<Arc<Event>>,
    topics: Arc<std::sync::Mutex<HashMap<Topic, broadcast::Sender<Arc<Event>>>>>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new()
    }
}

impl EventBus {
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(1024);
        Self {
            tx,
            topics: Arc::default(),
        }
    }

    fn topics(&self) -> std::sync::MutexGuard<'_, HashMap<Topic, broadcast::Sender<Arc<Event>>>> {
        match self.topics.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    pub fn publish(&self, event: Event) {
        let event = Arc::new(event);
        let topics: Vec<Topic> = match &*event {
            Event::Session(e) => vec![
                Topic::SessionsOf(e.user),
                Topic::SessionsIn(e.domain.clone()),
                Topic::Sessions,
            ],
            Event::BgTask(t) => vec![Topic::Task(t.task_id)],
            _ => Vec::new(),
        };
        if !topics.is_empty() {
            let mut map = self.topics();
            for topic in topics {
                if let Some(tx) = map.get(&topic) {
                    // A topic nobody listens to any more goes.
                    if tx.send(event.clone()).is_err() {
                        map.remove(&topic);
                    }
                }
            }
        }
        // No subscriber is fine: nobody is watching.
        let _ = self.tx.send(event);
    }

    /// The events of one topic from this call on (see [`EventBus::stream`]).
    pub fn stream_topic(
        &self,
        topic: Topic,
    ) -> impl Stream<Item = Arc<Event>> + Send + 'static + use<> {
        let rx = {
            let mut map = self.topics();
            if map.len() > 10_000 {
                map.retain(|_, tx| tx.receiver_count() > 0);
            }
            map.entry(topic)
                .or_insert_with(|| broadcast::channel(TOPIC_BUFFER).0)
                .subscribe()
        };
        receiver_stream(rx)
    }

    pub fn changed(
        &self,
        kind: ObjectKind,
        action: ChangeAction,
        key: impl Into<String>,
        domain: Option<String>,
    ) {
        self.publish(Event::Changed(Change {
            kind,
            action,
            key: key.into(),
            domain,
        }));
    }

    /// Listeners right now (for metrics): of the whole stream and of every topic.
    pub fn subscribers(&self) -> usize {
        self.tx.receiver_count()
            + self
                .topics()
                .values()
                .map(broadcast::Sender::receiver_count)
                .sum::<usize>()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    /// Every event from this call on, as a stream: a listener that falls behind skips what it
    /// missed; the stream ends when the bus closes. Subscribes at once, so work done after
    /// this call (a snapshot) cannot miss an event.
    pub fn stream(&self) -> impl Stream<Item = Arc<Event>> + Send + 'static + use<> {
        receiver_stream(self.subscribe())
    }
}

fn receiver_stream(
    rx: broadcast::Receiver<Arc<Event>>,
) -> impl Stream<Item = Arc<Event>> + Send + 'static {
    futures_util::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(ev) => return Some((ev, rx)),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    metrics::counter!("bai_events_dropped_total").increment(n);
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}

/// Ends `stream` after the first item for which `last` holds (that item included); empty
/// when `already_over`.
pub fn until<S, T>(
    stream: S,
    already_over: bool,
    last: impl Fn(&T) -> bool + Send + 'static,
) -> impl Stream<Item = T> + Send
where
    S: Stream<Item = T> + Send,
    T: Send,
{
    stream.scan(already_over, move |over, item| {
        let out = if *over {
            None
        } else {
            *over = last(&item);
            Some(item)
        };
        std::future::ready(out)
    })
}
