//! Layer 3 of bai, a port: the event bus (publish/subscribe) and its in-process
//! implementation. The payloads are layer 1's (`bai_types::events`).
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

pub use bai_types::events::{
    Change, ChangeAction, Event, ObjectKind, SessionEvent, TaskState, TaskStatus, Topic,
    VfolderEvent,
};
use futures_util::{Stream, StreamExt};
use tokio::sync::broadcast;

/// Events kept per topic for listeners that fall behind (a slower one skips, and only in its
/// own stream).
const TOPIC_BUFFER: usize = 256;

/// A stream of events that lives as long as its listener wants.
pub type EventStream = Pin<Box<dyn Stream<Item = Arc<Event>> + Send + 'static>>;

/// The event bus, a port: services publish after their transaction commits; subscriptions, the
/// scheduler and the REST event streams listen. [`LocalBus`] carries events within this
/// process; a bus that spans processes (several managers on one database) implements the same.
pub trait EventBus: Send + Sync {
    /// Sends `event` to every listener of the whole stream and of its topics.
    fn publish(&self, event: Event);
    /// The events of one topic from this call on (see [`EventBus::stream`]).
    fn stream_topic(&self, topic: Topic) -> EventStream;
    /// Every event from this call on, as a stream: a listener that falls behind skips what it
    /// missed; the stream ends when the bus closes. Subscribes at once, so work done after
    /// this call (a snapshot) cannot miss an event.
    fn stream(&self) -> EventStream;
    /// Every event from this call on, as a receiver (lagging shows as `Lagged`).
    fn subscribe(&self) -> broadcast::Receiver<Arc<Event>>;
    /// Listeners right now (for metrics): of the whole stream and of every topic.
    fn subscribers(&self) -> usize;
    /// Whether events reach other processes: then a change's events are sent inside its
    /// transaction (the services' `events::in_transaction`), delivered when it commits and never when it does not.
    fn spans_processes(&self) -> bool {
        false
    }
    /// Counts the times events may have been missed (the connection that carries them was
    /// lost and is back): live streams end on a change so that their clients refetch. None:
    /// nothing is ever missed (one process).
    fn resyncs(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }
}

impl dyn EventBus {
    /// Publishes "object `key` of `kind` was created/modified/deleted".
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
}

/// The in-process bus: one broadcast channel for the whole stream and one per topic.
pub struct LocalBus {
    tx: broadcast::Sender<Arc<Event>>,
    topics: parking_lot::Mutex<HashMap<Topic, broadcast::Sender<Arc<Event>>>>,
}

impl Default for LocalBus {
    fn default() -> Self {
        Self::new()
    }
}

impl LocalBus {
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(1024);
        Self {
            tx,
            topics: parking_lot::Mutex::default(),
        }
    }
}

impl EventBus for LocalBus {
    fn publish(&self, event: Event) {
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
            let mut map = self.topics.lock();
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

    fn stream_topic(&self, topic: Topic) -> EventStream {
        let rx = {
            let mut map = self.topics.lock();
            if map.len() > 10_000 {
                map.retain(|_, tx| tx.receiver_count() > 0);
            }
            map.entry(topic)
                .or_insert_with(|| broadcast::channel(TOPIC_BUFFER).0)
                .subscribe()
        };
        Box::pin(receiver_stream(rx))
    }

    fn subscribers(&self) -> usize {
        self.tx.receiver_count()
            + self
                .topics
                .lock()
                .values()
                .map(broadcast::Sender::receiver_count)
                .sum::<usize>()
    }

    fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    fn stream(&self) -> EventStream {
        Box::pin(receiver_stream(self.subscribe()))
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

/// Ends `stream` after the first item for which `last` holds (that item included), at once:
/// never waiting for another item (a live stream may have none to give); empty when
/// `already_over`.
pub fn until<S, T>(
    stream: S,
    already_over: bool,
    last: impl Fn(&T) -> bool + Send + Sync + 'static,
) -> impl Stream<Item = T> + Send
where
    S: Stream<Item = T> + Send,
    T: Send,
{
    let last = Arc::new(last);
    futures_util::stream::unfold(
        (Box::pin(stream), already_over),
        move |(mut stream, over)| {
            let last = last.clone();
            async move {
                if over {
                    return None;
                }
                let item = stream.next().await?;
                let over = last(&item);
                Some((item, (stream, over)))
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session_event(user: u128, domain: &str) -> Event {
        Event::Session(SessionEvent {
            session_id: uuid::Uuid::from_u128(1),
            name: "s".into(),
            access_key: "AK".into(),
            user: uuid::Uuid::from_u128(user),
            domain: domain.into(),
            status: bai_types::enums::SessionStatus::Running,
            event: "session_started",
            reason: None,
            exit_code: None,
            kernel: None,
        })
    }

    #[tokio::test]
    async fn topics_reach_only_their_listeners_and_the_whole_stream_gets_all() {
        let bus: Arc<dyn EventBus> = Arc::new(LocalBus::new());
        let mut mine = bus.stream_topic(Topic::SessionsOf(uuid::Uuid::from_u128(7)));
        let mut domain = bus.stream_topic(Topic::SessionsIn("lab".into()));
        let mut all = bus.stream();
        bus.publish(session_event(8, "other"));
        bus.publish(session_event(7, "lab"));
        bus.changed(ObjectKind::Agent, ChangeAction::Modified, "i-1", None);
        let first = mine.next().await.unwrap();
        assert!(matches!(&*first, Event::Session(e) if e.user.as_u128() == 7));
        let d = domain.next().await.unwrap();
        assert!(matches!(&*d, Event::Session(e) if e.domain == "lab"));
        let mut kinds = Vec::new();
        for _ in 0..3 {
            kinds.push(match &*all.next().await.unwrap() {
                Event::Session(e) => e.domain.clone(),
                Event::Changed(c) => c.key.clone(),
                _ => String::new(),
            });
        }
        assert_eq!(kinds, ["other", "lab", "i-1"]);
        assert_eq!(bus.subscribers(), 3);
        drop((mine, domain, all));
        assert_eq!(bus.subscribers(), 0);
    }

    #[tokio::test]
    async fn until_ends_after_the_last_item() {
        let s = until(futures_util::stream::iter([1, 2, 3, 4]), false, |x| *x == 2);
        assert_eq!(s.collect::<Vec<_>>().await, [1, 2]);
        let none = until(futures_util::stream::iter([1]), true, |_| false);
        assert!(none.collect::<Vec<_>>().await.is_empty());
        // A live stream that gives nothing more: the end comes with the last item, and at
        // once when already over.
        let live = futures_util::stream::iter([1, 2]).chain(futures_util::stream::pending());
        let ended = futures_util::FutureExt::now_or_never(
            until(live, false, |x| *x == 2).collect::<Vec<_>>(),
        );
        assert_eq!(ended, Some(vec![1, 2]));
        let over = futures_util::FutureExt::now_or_never(
            until(futures_util::stream::pending::<i32>(), true, |_| false).collect::<Vec<_>>(),
        );
        assert_eq!(over, Some(vec![]));
    }
}
