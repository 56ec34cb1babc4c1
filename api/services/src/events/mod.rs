//! The event bus as the services see it: the port and its in-process implementation live in
//! `bai_bus`, the payloads in `bai_types::events`.
pub mod pg;
pub use bai_bus::{
    Change, ChangeAction, Event, EventBus, EventStream, LocalBus, ObjectKind, SessionEvent,
    TaskState, TaskStatus, Topic, VfolderEvent, until,
};
/// The bus across processes (several managers on PostgreSQL).
pub use pg::PgBus;
use sea_orm::{ConnectionTrait, DbBackend, Statement};

use crate::error::ApiResult;

/// Calls `on` with every event of `bus` from now on, and with None when some were missed (the
/// listener fell behind), until the bus closes.
pub async fn follow(bus: &dyn EventBus, mut on: impl FnMut(Option<&Event>)) {
    let mut rx = bus.subscribe();
    loop {
        match rx.recv().await {
            Ok(e) => on(Some(&e)),
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => on(None),
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Events of a change, sent with its transaction: on a bus across processes they go out as
/// NOTIFYs inside `txn` (PostgreSQL delivers them when it commits, never when it rolls back:
/// nothing is announced that did not happen, nothing that happened goes unannounced); on the
/// one-process bus they are returned for [`after_commit`].
pub async fn in_transaction<C: ConnectionTrait>(
    bus: &dyn EventBus,
    txn: &C,
    events: Vec<Event>,
) -> ApiResult<Vec<Event>> {
    if !bus.spans_processes() || txn.get_database_backend() != DbBackend::Postgres {
        return Ok(events);
    }
    for event in events {
        let Some(payload) = pg::encode(&event) else {
            continue;
        };
        let inline = if payload.len() <= pg::MAX_INLINE {
            payload
        } else {
            let row = txn
                .query_one(Statement::from_sql_and_values(
                    DbBackend::Postgres,
                    "INSERT INTO event_outbox (payload, created_at) VALUES ($1, now()) RETURNING id",
                    [payload.into()],
                ))
                .await?;
            let id: i32 = match row {
                Some(r) => r.try_get("", "id")?,
                None => continue,
            };
            format!("#{id}")
        };
        txn.execute(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT pg_notify($1, $2)",
            [pg::CHANNEL.into(), inline.into()],
        ))
        .await?;
    }
    Ok(Vec::new())
}

/// Publishes what [`in_transaction`] left for after the commit (the one-process bus).
pub fn after_commit(bus: &dyn EventBus, events: Vec<Event>) {
    for e in events {
        bus.publish(e);
    }
}
