//! Short-lived copies of the rows every authenticated request reads (its login session, user
//! and keypair), so that proving who calls costs no database round trip on most requests.
//!
//! Revocation still takes effect at once: each entry remembers the revocation count
//! ([`Revocations`]) read *before* its row was fetched, and every revocation (logout,
//! password change or reset, deactivation, role, user or keypair change) bumps that count
//! after its change is committed, so no entry fetched before the change survives it. Entries
//! also expire after [`TTL`]; misses are never cached (a guessed token cannot fill the cache),
//! and each map holds at most [`MAX_ENTRIES`].
use std::hash::Hash;
use std::time::Duration;

use entity::{keypairs, login_sessions, users};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};

use crate::auth::revocations::Revocations;
use crate::error::ApiResult;

pub const TTL: Duration = Duration::from_secs(5);
pub const MAX_ENTRIES: u64 = 20_000;

/// Rows with the revocation count they were read under, kept for [`TTL`] at most. A bounded
/// cache of this process: another `bai serve` keeps its own, and a change it makes reaches
/// this one within [`TTL`] unless the revocation count carries it sooner.
struct Memo<K, V> {
    map: moka::sync::Cache<K, (V, u64)>,
}

impl<K, V> Default for Memo<K, V>
where
    K: Eq + Hash + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    fn default() -> Self {
        Self {
            map: moka::sync::Cache::builder()
                .max_capacity(MAX_ENTRIES)
                .time_to_live(TTL)
                .build(),
        }
    }
}

impl<K, V> Memo<K, V>
where
    K: Eq + Hash + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    fn get<Q>(&self, key: &Q, generation: u64) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        match self.map.get(key) {
            Some((v, g)) if g == generation => Some(v),
            _ => None,
        }
    }

    fn put(&self, key: K, value: V, generation: u64) {
        self.map.insert(key, (value, generation));
    }
}

/// The three memos; one per server.
#[derive(Default)]
pub struct AuthCache {
    sessions: Memo<String, login_sessions::Model>,
    users: Memo<uuid::Uuid, users::Model>,
    keypairs: Memo<String, keypairs::Model>,
}

impl AuthCache {
    /// The login session whose token hashes to `hash`.
    pub async fn login_session(
        &self,
        read: &DatabaseConnection,
        revocations: &Revocations,
        hash: &str,
    ) -> ApiResult<Option<login_sessions::Model>> {
        let generation = revocations.current();
        if let Some(s) = self.sessions.get(hash, generation) {
            return Ok(Some(s));
        }
        let found = login_sessions::Entity::find()
            .filter(login_sessions::Column::TokenHash.eq(hash))
            .one(read)
            .await?;
        if let Some(s) = &found {
            self.sessions.put(hash.to_string(), s.clone(), generation);
        }
        Ok(found)
    }

    pub async fn user(
        &self,
        read: &DatabaseConnection,
        revocations: &Revocations,
        uuid: uuid::Uuid,
    ) -> ApiResult<Option<users::Model>> {
        let generation = revocations.current();
        if let Some(u) = self.users.get(&uuid, generation) {
            return Ok(Some(u));
        }
        let found = users::Entity::find_by_id(uuid).one(read).await?;
        if let Some(u) = &found {
            self.users.put(uuid, u.clone(), generation);
        }
        Ok(found)
    }

    pub async fn keypair(
        &self,
        read: &DatabaseConnection,
        revocations: &Revocations,
        access_key: &str,
    ) -> ApiResult<Option<keypairs::Model>> {
        let generation = revocations.current();
        if let Some(k) = self.keypairs.get(access_key, generation) {
            return Ok(Some(k));
        }
        let found = keypairs::Entity::find_by_id(access_key.to_string())
            .one(read)
            .await?;
        if let Some(k) = &found {
            self.keypairs
                .put(access_key.to_string(), k.clone(), generation);
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::Memo;

    #[test]
    fn a_revocation_ends_every_entry() {
        let m: Memo<String, u32> = Memo::default();
        m.put("a".into(), 1, 7);
        assert_eq!(m.get("a", 7), Some(1));
        assert_eq!(m.get("a", 8), None, "the count moved: stale");
        assert_eq!(m.get("b", 7), None);
    }

    #[test]
    fn bounded() {
        let m: Memo<u32, u32> = Memo::default();
        for i in 0..(super::MAX_ENTRIES as u32 + 1000) {
            m.put(i, i, 1);
        }
        m.map.run_pending_tasks();
        assert!(m.map.entry_count() <= super::MAX_ENTRIES);
    }
}
