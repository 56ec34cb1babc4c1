//! The event bus across processes, an implementation of the port `bai_bus::EventBus` kept
//! here beside the database driver (the port's crate names no database crate): PostgreSQL's
//! `LISTEN/NOTIFY`. Every manager on one database
//! LISTENs on one channel; an event is published as a NOTIFY (inside the transaction of the
//! change it announces where the service has one: PostgreSQL sends it when that transaction
//! commits, and never when it rolls back), and each process hands what its listener receives
//! to its own subscribers ([`LocalBus`]). An event is delivered once per process: a process
//! hears its own NOTIFYs as every other's, and never delivers locally on publish.
//!
//! NOTIFY carries at most 8000 bytes: a larger event goes into `event_outbox` and the NOTIFY
//! carries its id (`#42`). A listener whose connection is lost reconnects; what was sent in
//! the meantime is missed, so it then counts a resync ([`EventBus::resyncs`]: live streams
//! end and their clients refetch) and announces [`Event::Revoked`] (cached credentials are
//! proven again, whatever was revoked meanwhile).
use std::sync::Arc;
use std::time::Duration;

use sea_orm::sqlx;
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::{broadcast, mpsc, watch};

use bai_bus::{Event, EventBus, EventStream, LocalBus, Topic};

/// The channel every manager of a database LISTENs on.
pub const CHANNEL: &str = "bai_events";
/// The largest payload sent inline (NOTIFY refuses 8000 bytes and more).
pub const MAX_INLINE: usize = 7000;
/// Events waiting to be sent: publishing never waits; past this, an event is dropped (and
/// counted in `bai_events_dropped_total`).
const OUTGOING: usize = 4096;

/// An event as it travels.
pub fn encode(event: &Event) -> Option<String> {
    serde_json::to_string(event).ok()
}

/// The bus of one manager among several on a PostgreSQL database.
pub struct PgBus {
    local: Arc<LocalBus>,
    outgoing: mpsc::Sender<String>,
    resyncs: watch::Receiver<u64>,
}

impl PgBus {
    /// LISTENs (returning once the listener is in place, so nothing published after this is
    /// missed) and starts the tasks that send and receive.
    pub async fn connect(pool: PgPool) -> Result<Self, sqlx::Error> {
        let local = Arc::new(LocalBus::new());
        let listener = listen(&pool).await?;
        let (resync_tx, resyncs) = watch::channel(0u64);
        tokio::spawn(receive(pool.clone(), listener, local.clone(), resync_tx));
        let (outgoing, rx) = mpsc::channel(OUTGOING);
        tokio::spawn(send(pool, rx));
        Ok(Self {
            local,
            outgoing,
            resyncs,
        })
    }
}

async fn listen(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

/// Sends what was published outside a transaction, in order.
async fn send(pool: PgPool, mut rx: mpsc::Receiver<String>) {
    while let Some(payload) = rx.recv().await {
        if let Err(e) = notify(&pool, &payload).await {
            metrics::counter!("bai_events_dropped_total").increment(1);
            tracing::warn!(error = %e, "sending an event to the other managers failed; it is lost");
        }
    }
}

async fn notify(pool: &PgPool, payload: &str) -> Result<(), sqlx::Error> {
    let inline = if payload.len() <= MAX_INLINE {
        payload.to_string()
    } else {
        let id: i32 = sqlx::query_scalar(
            "INSERT INTO event_outbox (payload, created_at) VALUES ($1, now()) RETURNING id",
        )
        .bind(payload)
        .fetch_one(pool)
        .await?;
        format!("#{id}")
    };
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(inline)
        .execute(pool)
        .await?;
    Ok(())
}

/// Hands every NOTIFY to this process's subscribers; reconnects when the connection is lost.
async fn receive(
    pool: PgPool,
    mut listener: PgListener,
    local: Arc<LocalBus>,
    resyncs: watch::Sender<u64>,
) {
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => {
                if let Some(event) = decode(&pool, n.payload()).await {
                    local.publish(event);
                }
            }
            Ok(None) | Err(_) => {
                tracing::warn!("the event listener lost its database connection; reconnecting");
                let mut pause = Duration::from_millis(100);
                listener = loop {
                    tokio::time::sleep(pause).await;
                    match listen(&pool).await {
                        Ok(l) => break l,
                        Err(e) => {
                            tracing::warn!(error = %e, "reconnecting the event listener failed; retrying");
                            pause = (pause * 2).min(Duration::from_secs(5));
                        }
                    }
                };
                tracing::info!(
                    "the event listener is back; live streams end so that their clients refetch"
                );
                resyncs.send_modify(|n| *n += 1);
                local.publish(Event::Revoked {
                    by: String::new(),
                    user: None,
                });
            }
        }
    }
}

async fn decode(pool: &PgPool, payload: &str) -> Option<Event> {
    let owned;
    let text = match payload.strip_prefix('#') {
        Some(id) => {
            let id: i32 = id.parse().ok()?;
            let row: Result<Option<String>, _> =
                sqlx::query_scalar("SELECT payload FROM event_outbox WHERE id = $1")
                    .bind(id)
                    .fetch_optional(pool)
                    .await;
            owned = match row {
                Ok(Some(p)) => p,
                Ok(None) => {
                    tracing::warn!(id, "an event's outbox row is gone; the event is lost");
                    return None;
                }
                Err(e) => {
                    tracing::warn!(id, error = %e, "reading an event's outbox row failed; the event is lost");
                    return None;
                }
            };
            owned.as_str()
        }
        None => payload,
    };
    match serde_json::from_str(text) {
        Ok(e) => Some(e),
        Err(e) => {
            tracing::warn!(error = %e, "an event from another manager could not be read; dropped");
            None
        }
    }
}

impl EventBus for PgBus {
    fn publish(&self, event: Event) {
        let Some(payload) = encode(&event) else {
            return;
        };
        if self.outgoing.try_send(payload).is_err() {
            metrics::counter!("bai_events_dropped_total").increment(1);
            tracing::warn!("too many events waiting to be sent; one is dropped");
        }
    }

    fn stream_topic(&self, topic: Topic) -> EventStream {
        self.local.stream_topic(topic)
    }

    fn stream(&self) -> EventStream {
        self.local.stream()
    }

    fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.local.subscribe()
    }

    fn subscribers(&self) -> usize {
        self.local.subscribers()
    }

    fn spans_processes(&self) -> bool {
        true
    }

    fn resyncs(&self) -> Option<watch::Receiver<u64>> {
        Some(self.resyncs.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_travel_as_json_and_come_back_the_same() {
        let e = Event::Session(crate::events::SessionEvent {
            session_id: uuid::Uuid::from_u128(1),
            name: "s".into(),
            access_key: "AK".into(),
            user: uuid::Uuid::from_u128(2),
            domain: "default".into(),
            status: bai_types::enums::SessionStatus::Running,
            event: "session_started",
            reason: Some("x".into()),
            exit_code: None,
            kernel: None,
        });
        let text = encode(&e).unwrap_or_default();
        let back: Event = serde_json::from_str(&text).unwrap();
        assert!(
            matches!(back, Event::Session(s) if s.event == "session_started" && s.user.as_u128() == 2)
        );
        let revoked = Event::Revoked {
            by: "p1".into(),
            user: Some(uuid::Uuid::from_u128(3)),
        };
        let revoked: Event = serde_json::from_str(&encode(&revoked).unwrap()).unwrap();
        assert!(
            matches!(revoked, Event::Revoked { by, user } if by == "p1" && user == Some(uuid::Uuid::from_u128(3)))
        );
        // A name no code sends is refused, not invented.
        let forged = text.replace("session_started", "session_exploded");
        assert!(serde_json::from_str::<Event>(&forged).is_err());
    }
}
