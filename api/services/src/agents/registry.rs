//! This process's agents (its engine connections) and what it knows of their hosts. Nothing
//! here reaches the application state.
use std::collections::HashMap;
use std::sync::Arc;

use bai_engine::Engine;
use bai_storage::StoragePaths;
use tokio::sync::RwLock;

/// An agent: the engine it drives (`bai_engine`), by the port's interface.
pub type Agent = dyn Engine;

/// The agents of this server process, by id.
#[derive(Default)]
pub struct AgentRegistry {
    pub(super) agents: RwLock<HashMap<String, Arc<Agent>>>,
    /// Where each remote agent's host sees each storage host (absent: the manager's paths).
    /// Owned by the process that drives the agent, from its configuration (what the scheduler
    /// of any process needs is on the agent row: `storage_hosts`).
    pub(super) storage: parking_lot::RwLock<HashMap<String, StoragePaths>>,
    /// One at a time per key: an image's transfer to one agent, the image's row, a multi-node
    /// launch's addresses on an agent. Process memory, bounded by images × agents. Launches
    /// run on the elected leader only, so its turns serialise every launch; the image row is
    /// also written by each manager's scan of its engines at start (`scan_local_images`),
    /// where a lost update is repaired by the next scan or delivery.
    pub(super) turns: parking_lot::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl AgentRegistry {
    pub async fn get(&self, id: &str) -> Option<Arc<Agent>> {
        self.agents.read().await.get(id).cloned()
    }

    /// Where `agent`'s host sees each storage host; None: where the manager does.
    pub fn storage_of(&self, agent: &str) -> Option<StoragePaths> {
        self.storage.read().get(agent).cloned()
    }

    pub async fn all(&self) -> Vec<Arc<Agent>> {
        self.agents.read().await.values().cloned().collect()
    }

    /// The ids of this process's agents (the engines it can reach).
    pub async fn ids(&self) -> Vec<String> {
        self.agents.read().await.keys().cloned().collect()
    }

    /// Waits for the turn of `key` (bounded by the keys in use: one per image and agent).
    pub async fn turn(&self, key: String) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = self.turns.lock().entry(key).or_default().clone();
        lock.lock_owned().await
    }

    /// Forgets an agent (tests: as if another process drove it).
    #[cfg(test)]
    pub(crate) async fn forget(&self, id: &str) -> Option<Arc<Agent>> {
        self.agents.write().await.remove(id)
    }

    pub(crate) async fn insert(&self, agent: Arc<Agent>) {
        self.agents
            .write()
            .await
            .insert(agent.info().id.clone(), agent);
    }
}
