//! A cache of list counts (`total_count`). Nothing here reaches the application state.
use std::time::Duration;

use sea_orm::{DatabaseConnection, EntityTrait, PaginatorTrait};

/// Row counts of list queries (`total_count`), kept until the table changes: counting is the
/// one part of a page that grows with the table (10,000 sessions: a scan per request). An
/// entry is good while the generation it was counted under is current — the owner of the
/// table calls `changed` after every committed write — and for at most `ttl` (writes this
/// process does not see: another manager's, a cascade). The key is the count's SQL with its
/// values, so callers with other visibility filters never share an entry.
///
/// A bounded cache of this process (another manager's writes show within `ttl`).
pub struct CountCache {
    generation: std::sync::atomic::AtomicU64,
    /// Count SQL → (generation it was counted under, rows).
    entries: moka::sync::Cache<String, (u64, u64)>,
}

/// Distinct count queries kept at most.
const COUNT_CACHE_MAX: u64 = 4096;

impl CountCache {
    pub fn new(ttl: Duration) -> Self {
        Self {
            generation: std::sync::atomic::AtomicU64::new(0),
            entries: moka::sync::Cache::builder()
                .max_capacity(COUNT_CACHE_MAX)
                .time_to_live(ttl)
                .build(),
        }
    }

    /// The table changed (call after the commit): every entry is stale.
    pub fn changed(&self) {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// The number of rows `select` finds, from the cache when it is still good.
    pub async fn count<E>(
        &self,
        db: &DatabaseConnection,
        select: sea_orm::Select<E>,
    ) -> Result<u64, sea_orm::DbErr>
    where
        E: EntityTrait,
        E::Model: Sync,
    {
        use sea_orm::QueryTrait;
        let key = select
            .build(sea_orm::ConnectionTrait::get_database_backend(db))
            .to_string();
        // Read before counting: a write that commits meanwhile makes this entry stale.
        let generation = self.generation.load(std::sync::atomic::Ordering::SeqCst);
        if let Some((g, n)) = self.entries.get(&key)
            && g == generation
        {
            return Ok(n);
        }
        let n = select.count(db).await?;
        self.entries.insert(key, (generation, n));
        Ok(n)
    }
}
