//! The agents of one resource group, indexed by free capacity so that choosing an agent costs
//! about log(agents) instead of a scan, and kept between passes: a placement re-keys one agent,
//! and [`AgentIndex::sync`] re-keys only the agents whose capacity or use changed since.
//!
//! Agents fall into classes by what ranks them apart from free capacity: which accelerators
//! they offer (the ranking puts agents without an accelerator the request does not use first)
//! and which storage hosts they see (a predicate). Real sites have a handful of classes. Each
//! class is a treap ordered by the strategy's rank key — free `cuda.device`, `cuda.shares`,
//! `cpu` (descending when dispersed, ascending when concentrated), then the agent's position
//! (the order the index first saw it) — whose nodes also keep the largest free amount of every
//! slot in their subtree. The best agent that fits is the first node in key order with enough
//! of every slot; subtrees whose maxima fall short are never entered.
use std::collections::HashMap;

use super::{AgentState, Dense, N, Strategy};

const NIL: u32 = u32::MAX;
const CPU: usize = 0;
const DEV: usize = 2;
const SHARES: usize = 3;
/// The slots of the rank key, most significant first.
const RANK: [usize; 3] = [DEV, SHARES, CPU];

/// Rank key: the smallest is the best agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key([i64; 3], u32);

#[derive(Debug, Clone)]
struct Node {
    key: Key,
    free: [i64; N],
    /// The largest free amount of each slot in this subtree.
    max: [i64; N],
    prio: u64,
    left: u32,
    right: u32,
}

#[derive(Debug, Clone)]
struct Agent {
    id: std::sync::Arc<str>,
    available: Dense,
    occupied: Dense,
    storage: Option<Vec<String>>,
    routed: bool,
    class: u32,
    /// The last `sync` that saw this agent.
    seen: u32,
}

#[derive(Debug, Clone)]
struct Class {
    /// Bit 0: offers `cuda.device`; bit 1: offers `cuda.shares`.
    accel: u8,
    storage: Option<Vec<String>>,
    root: u32,
}

impl Class {
    fn sees(&self, hosts: &[String]) -> bool {
        self.storage
            .as_ref()
            .is_none_or(|mine| hosts.iter().all(|h| mine.contains(h)))
    }

    /// Accelerators this class offers that `want` does not use (fewer ranks first).
    fn unused_accel(&self, want: &Dense) -> u8 {
        u8::from(self.accel & 1 != 0 && want.0[DEV] == 0)
            + u8::from(self.accel & 2 != 0 && want.0[SHARES] == 0)
    }
}

fn covers(have: &[i64; N], want: &Dense) -> bool {
    (0..N).all(|i| have[i] >= want.0[i])
}

/// splitmix64: treap priorities, deterministic and independent of the keys.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[derive(Debug, Clone)]
pub struct AgentIndex {
    strategy: Strategy,
    /// By position; a removed agent leaves `None` until the index is compacted.
    agents: Vec<Option<Agent>>,
    /// Parallel to `agents`: each agent's node.
    nodes: Vec<Node>,
    by_id: HashMap<String, u32>,
    classes: Vec<Class>,
    class_of: HashMap<(u8, Option<Vec<String>>), u32>,
    generation: u32,
    /// Sum and per-slot largest of `available` (with the first agent holding it), recomputed
    /// when an agent's capacity changes rather than on every placement.
    capacity: Option<Capacity>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Capacity {
    pub total: Dense,
    pub largest: Dense,
    pub largest_at: [Option<u32>; N],
}

impl AgentIndex {
    pub fn new(strategy: Strategy) -> AgentIndex {
        AgentIndex {
            strategy,
            agents: Vec::new(),
            nodes: Vec::new(),
            by_id: HashMap::new(),
            classes: Vec::new(),
            class_of: HashMap::new(),
            generation: 0,
            capacity: None,
        }
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Brings the index to `agents`: new agents are added (after every known one), gone ones
    /// removed, and only those whose capacity, use or storage changed are re-keyed. Returns how
    /// many were added, re-keyed or removed.
    pub fn sync(&mut self, agents: &[AgentState]) -> usize {
        self.generation = self.generation.wrapping_add(1);
        let mut touched = 0;
        for a in agents {
            touched += usize::from(self.upsert(a));
        }
        let gone: Vec<String> = self
            .agents
            .iter()
            .flatten()
            .filter(|a| a.seen != self.generation)
            .map(|a| a.id.to_string())
            .collect();
        for id in gone {
            touched += usize::from(self.remove(&id));
        }
        if self.agents.len() > 2 * self.len() + 64 {
            self.compact();
        }
        touched
    }

    /// Adds `a` or brings its entry up to date; false when nothing changed.
    fn upsert(&mut self, a: &AgentState) -> bool {
        let storage = a.storage_hosts.as_ref().map(|h| {
            let mut h = h.clone();
            h.sort();
            h.dedup();
            h
        });
        if let Some(&pos) = self.by_id.get(&a.id) {
            let Some(Some(agent)) = self.agents.get_mut(pos as usize) else {
                return false;
            };
            agent.seen = self.generation;
            agent.routed = a.routed;
            if agent.available == a.available
                && agent.occupied == a.occupied
                && agent.storage == storage
            {
                return false;
            }
            if agent.available != a.available {
                self.capacity = None;
            }
            self.unlink(pos);
            if let Some(Some(agent)) = self.agents.get_mut(pos as usize) {
                agent.available = a.available;
                agent.occupied = a.occupied;
                agent.storage = storage;
            }
            self.link(pos);
            return true;
        }
        let pos = self.agents.len() as u32;
        self.agents.push(Some(Agent {
            id: a.id.as_str().into(),
            available: a.available,
            occupied: a.occupied,
            storage,
            routed: a.routed,
            class: 0,
            seen: self.generation,
        }));
        self.nodes.push(Node {
            key: Key([0; 3], pos),
            free: [0; N],
            max: [0; N],
            prio: mix(u64::from(pos)),
            left: NIL,
            right: NIL,
        });
        self.by_id.insert(a.id.clone(), pos);
        self.capacity = None;
        self.link(pos);
        true
    }

    fn remove(&mut self, id: &str) -> bool {
        let Some(pos) = self.by_id.remove(id) else {
            return false;
        };
        self.unlink(pos);
        self.agents[pos as usize] = None;
        self.capacity = None;
        true
    }

    /// Changes the strategy, re-keying every agent (an administrator's change, not a pass's).
    pub fn set_strategy(&mut self, strategy: Strategy) {
        if strategy != self.strategy {
            self.strategy = strategy;
            self.compact();
        }
    }

    /// Renumbers the live agents in their order, dropping the holes removals left.
    fn compact(&mut self) {
        let agents: Vec<AgentState> = self
            .agents
            .iter()
            .flatten()
            .map(|a| AgentState {
                id: a.id.to_string(),
                available: a.available,
                occupied: a.occupied,
                storage_hosts: a.storage.clone(),
                routed: a.routed,
            })
            .collect();
        let (strategy, generation) = (self.strategy, self.generation);
        *self = AgentIndex::new(strategy);
        self.generation = generation;
        for a in &agents {
            self.upsert(a);
        }
    }

    pub(super) fn id(&self, pos: u32) -> &str {
        self.agents
            .get(pos as usize)
            .and_then(Option::as_ref)
            .map_or("", |a| &a.id)
    }

    /// The agent's id, shared (a placement names its agent without copying the id).
    pub(super) fn shared_id(&self, pos: u32) -> std::sync::Arc<str> {
        self.agents
            .get(pos as usize)
            .and_then(Option::as_ref)
            .map_or_else(|| "".into(), |a| a.id.clone())
    }

    /// Adds `want` to the agent's use and re-keys it.
    pub(super) fn occupy(&mut self, pos: u32, want: &Dense) {
        self.unlink(pos);
        if let Some(Some(a)) = self.agents.get_mut(pos as usize) {
            a.occupied.add(want);
        }
        self.link(pos);
    }

    /// Takes `want` off the agent's use (a placement undone) and re-keys it.
    fn release(&mut self, pos: u32, want: &Dense) {
        self.unlink(pos);
        if let Some(Some(a)) = self.agents.get_mut(pos as usize) {
            for i in 0..N {
                a.occupied.0[i] = a.occupied.0[i].saturating_sub(want.0[i]);
            }
        }
        self.link(pos);
    }

    /// The agents of a multi-node cluster's containers, one by one: each the best-ranked routed
    /// agent that sees `storage` and has room after the containers before it (a dispersed
    /// group spreads them, a concentrated one packs them). Occupies as it goes; None, with
    /// nothing occupied, when one does not fit. A scan of the agents: such sessions are few.
    pub(super) fn spread(&mut self, wants: &[Dense], storage: &[String]) -> Option<Vec<u32>> {
        let mut taken: Vec<u32> = Vec::with_capacity(wants.len());
        for want in wants {
            let best = self
                .agents
                .iter()
                .enumerate()
                .filter_map(|(pos, a)| a.as_ref().map(|a| (pos as u32, a)))
                .filter(|(_, a)| a.routed && self.classes[a.class as usize].sees(storage))
                .filter(|(pos, _)| covers(&self.nodes[*pos as usize].free, want))
                .min_by_key(|(pos, a)| {
                    (
                        self.classes[a.class as usize].unused_accel(want),
                        self.nodes[*pos as usize].key,
                    )
                })
                .map(|(pos, _)| pos);
            match best {
                Some(pos) => {
                    self.occupy(pos, want);
                    taken.push(pos);
                }
                None => {
                    for (pos, want) in taken.iter().zip(wants) {
                        self.release(*pos, want);
                    }
                    return None;
                }
            }
        }
        Some(taken)
    }

    /// Whether some agent sees every host in `hosts`.
    pub(super) fn any_sees(&self, hosts: &[String]) -> bool {
        self.classes.iter().any(|c| c.root != NIL && c.sees(hosts))
    }

    pub(super) fn capacity(&mut self) -> Capacity {
        if let Some(c) = self.capacity {
            return c;
        }
        let mut c = Capacity {
            total: Dense::default(),
            largest: Dense::default(),
            largest_at: [None; N],
        };
        for (pos, a) in self.agents.iter().enumerate() {
            let Some(a) = a else { continue };
            c.total.add(&a.available);
            for i in 0..N {
                if c.largest_at[i].is_none() || a.available.0[i] > c.largest.0[i] {
                    c.largest.0[i] = a.available.0[i];
                    c.largest_at[i] = Some(pos as u32);
                }
            }
        }
        self.capacity = Some(c);
        c
    }

    /// The agent to place `want` on: among the agents that see `storage` and have room, the
    /// one with the fewest unused accelerators, then the best rank, then the earliest.
    pub(super) fn select(&self, want: &Dense, storage: &[String]) -> Option<u32> {
        let mut best: Option<(u8, Key)> = None;
        for c in &self.classes {
            if c.root == NIL || !covers(&self.nodes[c.root as usize].max, want) || !c.sees(storage)
            {
                continue;
            }
            let penalty = c.unused_accel(want);
            if best.is_some_and(|(p, _)| p < penalty) {
                continue;
            }
            if let Some(n) = self.first_fit(c.root, want) {
                let cand = (penalty, self.nodes[n as usize].key);
                if best.is_none_or(|b| cand < b) {
                    best = Some(cand);
                }
            }
        }
        best.map(|(_, k)| k.1)
    }

    /// The first node in key order under `t` with room for `want`.
    fn first_fit(&self, t: u32, want: &Dense) -> Option<u32> {
        if t == NIL {
            return None;
        }
        let n = &self.nodes[t as usize];
        if !covers(&n.max, want) {
            return None;
        }
        if let Some(x) = self.first_fit(n.left, want) {
            return Some(x);
        }
        if covers(&n.free, want) {
            return Some(t);
        }
        self.first_fit(n.right, want)
    }

    fn class_for(&mut self, accel: u8, storage: &Option<Vec<String>>) -> u32 {
        if let Some(&c) = self.class_of.get(&(accel, storage.clone())) {
            return c;
        }
        let c = self.classes.len() as u32;
        self.classes.push(Class {
            accel,
            storage: storage.clone(),
            root: NIL,
        });
        self.class_of.insert((accel, storage.clone()), c);
        c
    }

    /// Puts the agent at `pos` into its class's treap under its current key.
    fn link(&mut self, pos: u32) {
        let Some(Some(a)) = self.agents.get(pos as usize) else {
            return;
        };
        let accel = u8::from(a.available.0[DEV] > 0) | (u8::from(a.available.0[SHARES] > 0) << 1);
        let storage = a.storage.clone();
        let mut free = [0i64; N];
        for (i, f) in free.iter_mut().enumerate() {
            *f = a.available.0[i].saturating_sub(a.occupied.0[i]);
        }
        let rank = RANK.map(|i| match self.strategy {
            Strategy::Dispersed => free[i].saturating_neg(),
            Strategy::Concentrated => free[i],
        });
        let class = self.class_for(accel, &storage);
        if let Some(Some(a)) = self.agents.get_mut(pos as usize) {
            a.class = class;
        }
        let n = &mut self.nodes[pos as usize];
        n.key = Key(rank, pos);
        n.free = free;
        n.max = free;
        n.left = NIL;
        n.right = NIL;
        let root = self.classes[class as usize].root;
        self.classes[class as usize].root = self.insert(root, pos);
    }

    /// Takes the agent at `pos` out of its class's treap.
    fn unlink(&mut self, pos: u32) {
        let Some(Some(a)) = self.agents.get(pos as usize) else {
            return;
        };
        let class = a.class as usize;
        let key = self.nodes[pos as usize].key;
        let root = self.classes[class].root;
        self.classes[class].root = self.erase(root, key);
    }

    fn pull(&mut self, t: u32) {
        let (l, r) = {
            let n = &self.nodes[t as usize];
            (n.left, n.right)
        };
        let mut max = self.nodes[t as usize].free;
        for c in [l, r] {
            if c != NIL {
                let m = self.nodes[c as usize].max;
                for i in 0..N {
                    max[i] = max[i].max(m[i]);
                }
            }
        }
        self.nodes[t as usize].max = max;
    }

    /// Splits `t` into keys `< key` and keys `>= key`.
    fn split(&mut self, t: u32, key: Key) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        if self.nodes[t as usize].key < key {
            let right = self.nodes[t as usize].right;
            let (l, r) = self.split(right, key);
            self.nodes[t as usize].right = l;
            self.pull(t);
            (t, r)
        } else {
            let left = self.nodes[t as usize].left;
            let (l, r) = self.split(left, key);
            self.nodes[t as usize].left = r;
            self.pull(t);
            (l, t)
        }
    }

    /// Joins `a` and `b`, every key of `a` below every key of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let ar = self.nodes[a as usize].right;
            let m = self.merge(ar, b);
            self.nodes[a as usize].right = m;
            self.pull(a);
            a
        } else {
            let bl = self.nodes[b as usize].left;
            let m = self.merge(a, bl);
            self.nodes[b as usize].left = m;
            self.pull(b);
            b
        }
    }

    fn insert(&mut self, t: u32, n: u32) -> u32 {
        if t == NIL {
            return n;
        }
        let key = self.nodes[n as usize].key;
        if self.nodes[n as usize].prio > self.nodes[t as usize].prio {
            let (l, r) = self.split(t, key);
            self.nodes[n as usize].left = l;
            self.nodes[n as usize].right = r;
            self.pull(n);
            return n;
        }
        if key < self.nodes[t as usize].key {
            let c = self.insert(self.nodes[t as usize].left, n);
            self.nodes[t as usize].left = c;
        } else {
            let c = self.insert(self.nodes[t as usize].right, n);
            self.nodes[t as usize].right = c;
        }
        self.pull(t);
        t
    }

    fn erase(&mut self, t: u32, key: Key) -> u32 {
        if t == NIL {
            return NIL;
        }
        let here = self.nodes[t as usize].key;
        if here == key {
            let (l, r) = (self.nodes[t as usize].left, self.nodes[t as usize].right);
            return self.merge(l, r);
        }
        if key < here {
            let c = self.erase(self.nodes[t as usize].left, key);
            self.nodes[t as usize].left = c;
        } else {
            let c = self.erase(self.nodes[t as usize].right, key);
            self.nodes[t as usize].right = c;
        }
        self.pull(t);
        t
    }
}
