//! A keypair's use (`num_queries`, `last_used`), counted in memory and written in batches:
//! no request waits for a database write to account for it. Admin lists see the counts
//! within [`FLUSH_EVERY`]; a clean shutdown writes what is left.
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use entity::keypairs;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};

pub const FLUSH_EVERY: Duration = Duration::from_secs(2);

/// Requests counted per access key since the last flush, with the latest time.
#[derive(Default)]
pub struct Usage {
    pending: Mutex<HashMap<String, (i64, DateTime<Utc>)>>,
}

impl Usage {
    /// One request by `access_key` at `now` (the state's clock). (Keys come from
    /// authenticated callers only, so the map holds at most one entry per keypair.)
    pub fn record(&self, access_key: &str, now: DateTime<Utc>) {
        let mut pending = self.pending.lock();
        match pending.get_mut(access_key) {
            Some(e) => {
                e.0 += 1;
                e.1 = now;
            }
            None => {
                pending.insert(access_key.to_string(), (1, now));
            }
        }
    }

    /// Writes the counts gathered so far; what fails to be written is kept for next time.
    pub async fn flush(&self, db: &DatabaseConnection) {
        let batch = std::mem::take(&mut *self.pending.lock());
        for (key, (count, last)) in batch {
            let written = keypairs::Entity::update_many()
                .col_expr(
                    keypairs::Column::NumQueries,
                    Expr::col(keypairs::Column::NumQueries).add(count),
                )
                .col_expr(keypairs::Column::LastUsed, Expr::value(last))
                .filter(keypairs::Column::AccessKey.eq(&key))
                .exec(db)
                .await;
            if let Err(e) = written {
                tracing::warn!(access_key = %key, error = %e, "recording keypair use failed; kept for the next flush");
                let mut pending = self.pending.lock();
                let e = pending.entry(key).or_insert((0, last));
                e.0 += count;
                e.1 = e.1.max(last);
            }
        }
    }
}

/// Flushes every [`FLUSH_EVERY`] until the task is stopped (the server flushes once more on
/// its way out).
pub async fn flush_loop(usage: std::sync::Arc<Usage>, db: DatabaseConnection) {
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        usage.flush(&db).await;
    }
}
