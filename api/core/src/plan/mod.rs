//! The scheduler's placement logic: from a snapshot of one resource group to placements (and,
//! for sessions left pending, the predicates that failed). No I/O here, so it is unit-tested
//! and benchmarked directly. The agents live in an [`AgentIndex`] that a caller may keep
//! between passes; a placement costs about log(agents), and sessions held back by the same
//! limit share one reason, built once per state of that limit.
//!
//! Slots are dense integer vectors: `mem` in bytes, every other slot in thousandths
//! (requests finer than 0.001 are rounded up), so sums and comparisons are exact and cheap.
mod index;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use bai_types::enums::SchedulerKind;
use bai_types::slots::{KNOWN_SLOTS, ResourceLimits, ResourceSlots, SlotLimit, format_amount};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use uuid::Uuid;

pub use index::AgentIndex;

pub const N: usize = KNOWN_SLOTS.len();

fn scale(slot: &str) -> Decimal {
    if slot == "mem" {
        Decimal::ONE
    } else {
        Decimal::from(1000)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Dense(pub [i64; N]);

impl Dense {
    pub fn from_slots(s: &ResourceSlots) -> Dense {
        let mut d = [0i64; N];
        for (i, (name, _)) in KNOWN_SLOTS.iter().enumerate() {
            d[i] = (s.get(name) * scale(name))
                .ceil()
                .to_i64()
                .unwrap_or(i64::MAX);
        }
        Dense(d)
    }

    pub fn to_slots(self) -> ResourceSlots {
        let mut s = ResourceSlots::new();
        for (i, (name, _)) in KNOWN_SLOTS.iter().enumerate() {
            s.set(name, Decimal::from(self.0[i]) / scale(name));
        }
        s
    }

    fn add(&mut self, o: &Dense) {
        for i in 0..N {
            self.0[i] = self.0[i].saturating_add(o.0[i]);
        }
    }

    /// `self + extra <= cap` for every slot.
    fn fits(&self, extra: &Dense, cap: &Dense) -> bool {
        (0..N).all(|i| self.0[i].saturating_add(extra.0[i]) <= cap.0[i])
    }

    fn human(self) -> String {
        let s = self.to_slots();
        if s.is_empty() {
            "nothing".into()
        } else {
            s.humanize()
        }
    }
}

/// Per-slot limits (None = unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DenseLimit(pub [Option<i64>; N]);

impl DenseLimit {
    pub const UNLIMITED: DenseLimit = DenseLimit([None; N]);

    pub fn from_limits(l: &ResourceLimits, unspecified: SlotLimit) -> DenseLimit {
        let mut d = [None; N];
        for (i, (name, _)) in KNOWN_SLOTS.iter().enumerate() {
            d[i] = match l.limit(name, unspecified) {
                SlotLimit::Limited(v) => {
                    Some((v * scale(name)).floor().to_i64().unwrap_or(i64::MAX))
                }
                SlotLimit::Unlimited => None,
            };
        }
        DenseLimit(d)
    }

    fn describe(&self, slots: &[&str]) -> String {
        slots
            .iter()
            .filter_map(|s| {
                let i = KNOWN_SLOTS.iter().position(|(n, _)| n == s)?;
                let v = Decimal::from(self.0[i]?) / scale(s);
                Some(format!("{s}={}", format_amount(s, v)))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[derive(Debug, Clone)]
pub struct Quota {
    pub limit: DenseLimit,
    pub using: Dense,
}

#[derive(Debug, Clone)]
pub struct KeypairState {
    pub quota: Quota,
    /// 0 = unlimited.
    pub max_concurrent: u32,
    pub concurrency: u32,
}

#[derive(Debug, Clone)]
pub struct AgentState {
    pub id: String,
    pub available: Dense,
    pub occupied: Dense,
    /// The storage hosts this agent's host sees (None: every one, as the manager's own host).
    pub storage_hosts: Option<Vec<String>>,
    /// Its session network is routed between the hosts: it may hold a container of a
    /// multi-node cluster session.
    pub routed: bool,
}

#[derive(Debug, Clone)]
pub struct PendingSession {
    pub id: Uuid,
    pub access_key: String,
    pub group_id: Uuid,
    pub domain: String,
    pub requested: Dense,
    /// Creation order (earlier = smaller).
    pub order: i64,
    /// Scheduling attempts that found no agent.
    pub retries: u32,
    /// The storage hosts of the session's folders: only an agent that sees them all may run it.
    pub storage_hosts: Vec<String>,
    /// A multi-node cluster session: each container's request, each placed on a routed agent
    /// of its own choosing (several may share one). Empty: the session runs on one agent.
    pub spread: Vec<Dense>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Most remaining capacity first (spread the load).
    Dispersed,
    /// Least remaining capacity first (pack agents).
    Concentrated,
}

#[derive(Debug, Clone)]
pub struct Snapshot {
    pub scheduler: SchedulerKind,
    pub strategy: Strategy,
    /// FIFO/LIFO: a session that found no agent this many times stops blocking the queue
    /// (0 = it always blocks, as strict FIFO does).
    pub num_retries_to_skip: u32,
    pub agents: Vec<AgentState>,
    pub pending: Vec<PendingSession>,
    pub keypairs: HashMap<String, KeypairState>,
    pub groups: HashMap<Uuid, Quota>,
    pub domains: HashMap<String, Quota>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Predicate {
    pub name: &'static str,
    pub msg: String,
}

/// Why a session waits. Sessions held back by the same limit in the same state share one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    pub status_info: &'static str,
    pub failed: Vec<Predicate>,
    pub passed: Vec<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Place {
        session: Uuid,
        agent: Arc<str>,
    },
    /// A multi-node cluster session: each container's agent, in the order of `spread`.
    Spread {
        session: Uuid,
        agents: Vec<Arc<str>>,
    },
    Wait {
        session: Uuid,
        reason: Arc<Reason>,
    },
}

/// The quota predicates, in the order they are reported.
const QUOTA_PREDICATES: [&str; 4] = [
    "concurrency",
    "keypair_resource_limit",
    "group_resource_limit",
    "domain_resource_limit",
];

/// Failed quota checks as bits: 0 concurrency; then `N` bits (one per slot over the limit)
/// for the keypair, the project and the domain.
type Fails = u16;
const KP_SHIFT: u32 = 1;
const GROUP_SHIFT: u32 = 1 + N as u32;
const DOMAIN_SHIFT: u32 = 1 + 2 * N as u32;
const SLOT_BITS: u16 = (1 << N) - 1;

/// A limit's holder within one pass, with a version bumped whenever its use changes: a reason
/// built from it stays valid (and shared) until then.
#[derive(Debug)]
struct Holder<T> {
    state: T,
    version: u32,
}

/// The quota holders of one pass, looked up by dense indices.
struct Limits {
    keypairs: Vec<Holder<KeypairState>>,
    groups: Vec<Holder<Quota>>,
    domains: Vec<Holder<Quota>>,
}

/// The limit holders of one pending session: keypair, project, domain (`NONE`: no limit
/// applies). Four bytes each: a pass keeps one per pending session.
#[derive(Debug, Clone, Copy)]
struct Holders([u32; 3]);

impl Holders {
    const NONE: u32 = u32::MAX;

    fn new(kp: Option<u32>, group: Option<u32>, domain: Option<u32>) -> Holders {
        Holders([kp, group, domain].map(|h| h.unwrap_or(Self::NONE)))
    }

    fn get(self, i: usize) -> Option<u32> {
        Some(self.0[i]).filter(|&h| h != Self::NONE)
    }

    fn kp(self) -> Option<u32> {
        self.get(0)
    }

    fn group(self) -> Option<u32> {
        self.get(1)
    }

    fn domain(self) -> Option<u32> {
        self.get(2)
    }
}

fn slots_over(q: &Quota, want: &Dense) -> u16 {
    let mut bits = 0;
    for i in 0..N {
        if q.limit.0[i].is_some_and(|max| q.using.0[i].saturating_add(want.0[i]) > max) {
            bits |= 1 << i;
        }
    }
    bits
}

impl Limits {
    fn fails(&self, h: Holders, want: &Dense) -> Fails {
        let mut f = 0;
        if let Some(k) = h.kp().map(|i| &self.keypairs[i as usize].state) {
            if k.max_concurrent > 0 && k.concurrency >= k.max_concurrent {
                f |= 1;
            }
            f |= slots_over(&k.quota, want) << KP_SHIFT;
        }
        if let Some(g) = h.group() {
            f |= slots_over(&self.groups[g as usize].state, want) << GROUP_SHIFT;
        }
        if let Some(d) = h.domain() {
            f |= slots_over(&self.domains[d as usize].state, want) << DOMAIN_SHIFT;
        }
        f
    }

    /// What a reason for `fails` depends on: the failing holders in their current versions.
    fn reason_key(&self, h: Holders, fails: Fails) -> ReasonKey {
        let of = |on: bool, i: Option<u32>, version: &dyn Fn(u32) -> u32| {
            i.filter(|_| on).map(|i| (i, version(i)))
        };
        ReasonKey {
            fails,
            kp: of(fails & ((SLOT_BITS << KP_SHIFT) | 1) != 0, h.kp(), &|i| {
                self.keypairs[i as usize].version
            }),
            group: of((fails >> GROUP_SHIFT) & SLOT_BITS != 0, h.group(), &|i| {
                self.groups[i as usize].version
            }),
            domain: of((fails >> DOMAIN_SHIFT) & SLOT_BITS != 0, h.domain(), &|i| {
                self.domains[i as usize].version
            }),
        }
    }

    fn reason(&self, h: Holders, fails: Fails) -> Reason {
        let mut failed = Vec::new();
        let mut passed = Vec::new();
        let quota_msg = |what: &str, q: &Quota, bits: u16| {
            let over: Vec<&str> = (0..N)
                .filter(|i| bits & (1 << i) != 0)
                .map(|i| KNOWN_SLOTS[i].0)
                .collect();
            format!(
                "The {what} resource limit would be exceeded ({}): it allows {}; {} in use.",
                over.join(", "),
                q.limit.describe(&over),
                q.using.human(),
            )
        };
        for (n, name) in QUOTA_PREDICATES.iter().enumerate() {
            let msg = match n {
                0 => h
                    .kp()
                    .filter(|_| fails & 1 != 0)
                    .map(|i| &self.keypairs[i as usize].state)
                    .map(|k| {
                        format!(
                            "You can run at most {} sessions at once (the keypair's resource policy); {} are running.",
                            k.max_concurrent, k.concurrency
                        )
                    }),
                1 => h.kp().and_then(|i| {
                    let bits = (fails >> KP_SHIFT) & SLOT_BITS;
                    (bits != 0)
                        .then(|| quota_msg("keypair", &self.keypairs[i as usize].state.quota, bits))
                }),
                2 => h.group().and_then(|i| {
                    let bits = (fails >> GROUP_SHIFT) & SLOT_BITS;
                    (bits != 0).then(|| quota_msg("project", &self.groups[i as usize].state, bits))
                }),
                _ => h.domain().and_then(|i| {
                    let bits = (fails >> DOMAIN_SHIFT) & SLOT_BITS;
                    (bits != 0).then(|| quota_msg("domain", &self.domains[i as usize].state, bits))
                }),
            };
            match msg {
                Some(msg) => failed.push(Predicate { name, msg }),
                None => passed.push(*name),
            }
        }
        Reason {
            status_info: "predicate-checks-failed",
            failed,
            passed,
        }
    }

    /// Counts a placement against the session's holders.
    fn charge(&mut self, h: Holders, want: &Dense) {
        if let Some(k) = h.kp().map(|i| &mut self.keypairs[i as usize]) {
            k.state.quota.using.add(want);
            k.state.concurrency += 1;
            k.version += 1;
        }
        if let Some(g) = h.group().map(|i| &mut self.groups[i as usize]) {
            g.state.using.add(want);
            g.version += 1;
        }
        if let Some(d) = h.domain().map(|i| &mut self.domains[i as usize]) {
            d.state.using.add(want);
            d.version += 1;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ReasonKey {
    fails: Fails,
    kp: Option<(u32, u32)>,
    group: Option<(u32, u32)>,
    domain: Option<(u32, u32)>,
}

/// Dense indices for the holders a pass looks up once per session.
fn indexed<'a, K: std::hash::Hash + Eq + ?Sized, T: Clone + 'a>(
    map: impl ExactSizeIterator<Item = (&'a K, &'a T)>,
) -> (fx::Map<&'a K, u32>, Vec<Holder<T>>) {
    let mut index = fx::Map::with_capacity_and_hasher(map.len(), Default::default());
    let mut holders = Vec::with_capacity(map.len());
    for (k, state) in map {
        index.insert(k, holders.len() as u32);
        holders.push(Holder {
            state: state.clone(),
            version: 0,
        });
    }
    (index, holders)
}

/// Dominant share of a keypair: the largest fraction of any slot's total capacity it uses.
fn dominant_share(using: &Dense, total: &Dense) -> f64 {
    (0..N)
        .filter(|&i| total.0[i] > 0)
        .map(|i| using.0[i] as f64 / total.0[i] as f64)
        .fold(0.0, f64::max)
}

/// Plans one pass on an index built for it (see [`plan_on`] for an index kept across passes).
pub fn plan(snap: &Snapshot) -> Vec<Decision> {
    let mut index = AgentIndex::new(snap.strategy);
    plan_on(&mut index, snap)
}

/// Plans one pass: `index` is brought to `snap.agents` (only changed agents are re-keyed) and
/// is left holding this pass's placements.
pub fn plan_on(index: &mut AgentIndex, snap: &Snapshot) -> Vec<Decision> {
    index.set_strategy(snap.strategy);
    index.sync(&snap.agents);
    let Snapshot {
        scheduler,
        num_retries_to_skip,
        pending,
        ..
    } = snap;
    let (scheduler, num_retries_to_skip) = (*scheduler, *num_retries_to_skip);
    let (kp_index, keypairs) = indexed(snap.keypairs.iter().map(|(k, v)| (k.as_str(), v)));
    let (group_index, groups) = indexed(snap.groups.iter());
    let (domain_index, domains) = indexed(snap.domains.iter().map(|(k, v)| (k.as_str(), v)));
    let mut limits = Limits {
        keypairs,
        groups,
        domains,
    };
    // Consecutive sessions mostly share their project and domain: asked of the maps only
    // when they change.
    let mut prev: Option<(&PendingSession, Holders)> = None;
    let holders: Vec<Holders> = pending
        .iter()
        .map(|s| {
            let (group, domain) = match prev {
                Some((p, h)) if p.group_id == s.group_id && p.domain == s.domain => {
                    (h.group(), h.domain())
                }
                _ => (
                    group_index.get(&s.group_id).copied(),
                    domain_index.get(s.domain.as_str()).copied(),
                ),
            };
            let h = Holders::new(kp_index.get(s.access_key.as_str()).copied(), group, domain);
            prev = Some((s, h));
            h
        })
        .collect();
    let capacity = index.capacity();
    let mut reasons = Reasons::default();
    let mut out = Vec::with_capacity(pending.len());
    let mut blocked_by: Option<Arc<Reason>> = None;
    let mut queue = Queue::new(pending, &holders, scheduler, &limits, &capacity.total);
    // The last quota reason per keypair (the last slot: sessions without one): sessions held
    // back by one limit mostly come from the same keypairs, so the map is seldom asked.
    let mut last: Vec<Option<(ReasonKey, Arc<Reason>)>> = vec![None; limits.keypairs.len() + 1];
    while let Some(at) = queue.next() {
        let s = &pending[at];
        let h = holders[at];
        let fails = limits.fails(h, &s.requested);
        if fails != 0 {
            let key = limits.reason_key(h, fails);
            let slot = &mut last[h.kp().map_or(limits.keypairs.len(), |k| k as usize)];
            let reason = match slot {
                Some((k, r)) if *k == key => r.clone(),
                _ => {
                    let r = reasons
                        .quota
                        .entry(key)
                        .or_insert_with(|| Arc::new(limits.reason(h, fails)))
                        .clone();
                    *slot = Some((key, r.clone()));
                    r
                }
            };
            out.push(Decision::Wait {
                session: s.id,
                reason,
            });
            queue.requeue(&limits, &capacity.total);
            continue;
        }
        if let Some(reason) = &blocked_by {
            out.push(Decision::Wait {
                session: s.id,
                reason: reason.clone(),
            });
            queue.requeue(&limits, &capacity.total);
            continue;
        }
        // Folders on a storage host no agent here sees: a predicate, never a failed start.
        if !index.is_empty() && !index.any_sees(&s.storage_hosts) {
            let reason = match reasons.storage.get(s.storage_hosts.as_slice()) {
                Some(r) => r.clone(),
                None => {
                    let r = Arc::new(storage_reason(index, &s.storage_hosts));
                    reasons.storage.insert(s.storage_hosts.clone(), r.clone());
                    r
                }
            };
            out.push(Decision::Wait {
                session: s.id,
                reason,
            });
            queue.requeue(&limits, &capacity.total);
            continue;
        }
        if !s.spread.is_empty() {
            match index.spread(&s.spread, &s.storage_hosts) {
                Some(at) => {
                    limits.charge(h, &s.requested);
                    out.push(Decision::Spread {
                        session: s.id,
                        agents: at.into_iter().map(|pos| index.shared_id(pos)).collect(),
                    });
                }
                None => out.push(Decision::Wait {
                    session: s.id,
                    reason: reasons
                        .spread
                        .get_or_insert_with(|| Arc::new(spread_reason()))
                        .clone(),
                }),
            }
            queue.requeue(&limits, &capacity.total);
            continue;
        }
        match index.select(&s.requested, &s.storage_hosts) {
            Some(pos) => {
                index.occupy(pos, &s.requested);
                limits.charge(h, &s.requested);
                out.push(Decision::Place {
                    session: s.id,
                    agent: index.shared_id(pos),
                });
            }
            None => {
                let ever_fits = Dense::default().fits(&s.requested, &capacity.largest);
                let strict = matches!(scheduler, SchedulerKind::Fifo | SchedulerKind::Lifo);
                let skip = num_retries_to_skip > 0 && s.retries >= num_retries_to_skip;
                if strict && ever_fits && !skip {
                    blocked_by = Some(Arc::new(queue_reason(s.id)));
                }
                let reason = reasons
                    .resources
                    .entry(s.requested)
                    .or_insert_with(|| Arc::new(resources_reason(index, &capacity, &s.requested)))
                    .clone();
                out.push(Decision::Wait {
                    session: s.id,
                    reason,
                });
            }
        }
        queue.requeue(&limits, &capacity.total);
    }
    out
}

/// Reasons built in one pass, each shared by every session it applies to.
#[derive(Default)]
struct Reasons {
    quota: fx::Map<ReasonKey, Arc<Reason>>,
    storage: fx::Map<Vec<String>, Arc<Reason>>,
    resources: fx::Map<Dense, Arc<Reason>>,
    spread: Option<Arc<Reason>>,
}

fn all_quota_passed() -> Vec<&'static str> {
    QUOTA_PREDICATES.to_vec()
}

fn queue_reason(head: Uuid) -> Reason {
    Reason {
        status_info: "no-available-instances",
        failed: vec![Predicate {
            name: "queue_order",
            msg: format!(
                "Waiting for an earlier session ({head}) of this resource group to start first."
            ),
        }],
        passed: all_quota_passed(),
    }
}

fn spread_reason() -> Reason {
    Reason {
        status_info: "no-available-instances",
        failed: vec![Predicate {
            name: "multi_node",
            msg: "The routed agents of this resource group (remote hosts with a session subnet) have no room for every container of this multi-node cluster session right now.".into(),
        }],
        passed: all_quota_passed(),
    }
}

fn storage_reason(index: &AgentIndex, hosts: &[String]) -> Reason {
    let missing: Vec<&str> = hosts
        .iter()
        .filter(|h| !index.any_sees(std::slice::from_ref(h)))
        .map(String::as_str)
        .collect();
    Reason {
        status_info: "no-available-instances",
        failed: vec![Predicate {
            name: "storage_host",
            msg: format!(
                "No agent of this resource group sees every storage host of this session's folders ({}): the storage host is not available on these agents.",
                if missing.is_empty() {
                    hosts.join(", ")
                } else {
                    missing.join(", ")
                }
            ),
        }],
        passed: all_quota_passed(),
    }
}

/// No agent has room: none alive, none large enough (naming the largest of each slot that
/// falls short), or none free right now. The message depends on the request alone, so it
/// stays the same (and is not rewritten) while the session waits.
fn resources_reason(index: &AgentIndex, capacity: &index::Capacity, want: &Dense) -> Reason {
    let msg = if index.is_empty() {
        "No agent of this resource group is alive.".to_string()
    } else if !Dense::default().fits(want, &capacity.largest) {
        let closest: Vec<String> = (0..N)
            .filter(|&i| want.0[i] > capacity.largest.0[i])
            .map(|i| {
                let mut one = Dense::default();
                one.0[i] = capacity.largest.0[i];
                let at = capacity.largest_at[i].map_or("", |p| index.id(p));
                format!("{} on {at}", one.human())
            })
            .collect();
        format!(
            "No agent of this resource group is large enough for {} (the most any agent has: {}).",
            want.human(),
            closest.join(", ")
        )
    } else {
        format!(
            "No agent has {} free right now; the session starts when resources are released.",
            want.human()
        )
    };
    Reason {
        status_info: "no-available-instances",
        failed: vec![Predicate {
            name: "agent_resources",
            msg,
        }],
        passed: all_quota_passed(),
    }
}

/// The order sessions are considered in. FIFO/LIFO: creation order (or its reverse). DRF:
/// one queue per keypair in creation order; the next session comes from the keypair with the
/// smallest dominant share (then the earliest head, then the keypair seen first), kept in a
/// heap whose top is replaced in place once its session has been considered.
enum Queue {
    Ascending(std::ops::Range<usize>),
    Descending(std::iter::Rev<std::ops::Range<usize>>),
    Ordered(std::vec::IntoIter<u32>),
    Fair {
        queues: Vec<KeypairQueue>,
        /// [`fair_key`]s, smallest on top.
        heads: BinaryHeap<Reverse<u128>>,
    },
}

/// DRF: one keypair's sessions in creation order (each with the rank of its order), how many
/// were taken, and the keypair's limit holder.
struct KeypairQueue {
    sessions: Vec<(u32, u32)>,
    taken: usize,
    kp: Option<u32>,
}

impl Queue {
    fn new(
        pending: &[PendingSession],
        holders: &[Holders],
        kind: SchedulerKind,
        limits: &Limits,
        total: &Dense,
    ) -> Queue {
        // Pending sessions usually arrive in creation order: then no order is built for
        // FIFO and LIFO (ties keep their arrival order, so LIFO walks back only strict order).
        let strictly = pending.is_sorted_by(|a, b| a.order < b.order);
        match kind {
            SchedulerKind::Fifo if strictly => return Queue::Ascending(0..pending.len()),
            SchedulerKind::Lifo if strictly => return Queue::Descending((0..pending.len()).rev()),
            _ => {}
        }
        let mut order: Vec<u32> = (0..pending.len() as u32).collect();
        match kind {
            SchedulerKind::Fifo | SchedulerKind::Drf => {
                if !pending.is_sorted_by_key(|s| s.order) {
                    order.sort_by_key(|&i| pending[i as usize].order);
                }
            }
            SchedulerKind::Lifo => order.sort_by_key(|&i| Reverse(pending[i as usize].order)),
        }
        if kind != SchedulerKind::Drf {
            return Queue::Ordered(order.into_iter());
        }
        // Keypairs with a policy by their holder's index, others by their access key.
        let mut by_holder: Vec<Option<u32>> = vec![None; limits.keypairs.len()];
        let mut by_key: fx::Map<&str, u32> = fx::Map::default();
        let mut queues: Vec<KeypairQueue> = Vec::new();
        // Equal orders share a rank, so ties still go to the keypair seen first.
        let mut rank = 0u32;
        let mut last_order = None;
        for i in order {
            let o = pending[i as usize].order;
            if last_order.is_some_and(|l| l != o) {
                rank += 1;
            }
            last_order = Some(o);
            let kp = holders[i as usize].kp();
            let known = match kp {
                Some(k) => by_holder[k as usize],
                None => by_key.get(pending[i as usize].access_key.as_str()).copied(),
            };
            let q = match known {
                Some(q) => q,
                None => {
                    let q = queues.len() as u32;
                    queues.push(KeypairQueue {
                        sessions: Vec::new(),
                        taken: 0,
                        kp,
                    });
                    match kp {
                        Some(k) => by_holder[k as usize] = Some(q),
                        None => {
                            by_key.insert(pending[i as usize].access_key.as_str(), q);
                        }
                    }
                    q
                }
            };
            queues[q as usize].sessions.push((i, rank));
        }
        // Each share starts from what the keypair uses before the pass.
        let heads = queues
            .iter()
            .enumerate()
            .filter_map(|(q, k)| {
                let (_, rank) = *k.sessions.first()?;
                Some(Reverse(fair_key(limits, k.kp, total, rank, q as u32)))
            })
            .collect();
        Queue::Fair { queues, heads }
    }

    fn next(&mut self) -> Option<usize> {
        match self {
            Queue::Ascending(it) => it.next(),
            Queue::Descending(it) => it.next(),
            Queue::Ordered(it) => it.next().map(|i| i as usize),
            Queue::Fair { queues, heads } => {
                let Reverse(key) = *heads.peek()?;
                let k = &mut queues[key as u32 as usize];
                let s = k.sessions.get(k.taken).map(|&(i, _)| i as usize);
                k.taken += 1;
                s
            }
        }
    }

    /// DRF: after the top keypair's session was considered, its next session takes its place
    /// under the keypair's share now (it changed only if that session was placed).
    fn requeue(&mut self, limits: &Limits, total: &Dense) {
        if let Queue::Fair { queues, heads } = self
            && let Some(mut top) = heads.peek_mut()
        {
            let q = top.0 as u32;
            let k = &queues[q as usize];
            match k.sessions.get(k.taken) {
                Some(&(_, rank)) => *top = Reverse(fair_key(limits, k.kp, total, rank, q)),
                None => {
                    std::collections::binary_heap::PeekMut::pop(top);
                }
            }
        }
    }
}

/// DRF's order as one number: the keypair's dominant share (as bits that order like the
/// non-negative share itself), then its head's order rank, then the queue.
fn fair_key(limits: &Limits, kp: Option<u32>, total: &Dense, rank: u32, q: u32) -> u128 {
    (u128::from(share_bits(limits, kp, total)) << 64) | (u128::from(rank) << 32) | u128::from(q)
}

/// A keypair's dominant share as bits that order like the (non-negative) share itself.
fn share_bits(limits: &Limits, kp: Option<u32>, total: &Dense) -> u64 {
    kp.map(|i| dominant_share(&limits.keypairs[i as usize].state.quota.using, total))
        .unwrap_or(0.0)
        .to_bits()
}

/// A fast hasher for the maps a pass builds from its own keys (access keys, project ids,
/// domain names, requests): none of them is chosen freely by a user.
mod fx {
    use std::hash::{BuildHasherDefault, Hasher};

    #[derive(Default, Clone, Copy)]
    pub struct Fx(u64);

    const K: u64 = 0x517c_c1b7_2722_0a95;

    impl Fx {
        fn add(&mut self, w: u64) {
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
    }

    impl Hasher for Fx {
        fn write(&mut self, bytes: &[u8]) {
            let mut chunks = bytes.chunks_exact(8);
            for c in &mut chunks {
                let mut w = [0u8; 8];
                w.copy_from_slice(c);
                self.add(u64::from_le_bytes(w));
            }
            let rest = chunks.remainder();
            if !rest.is_empty() {
                let mut w = [0u8; 8];
                w[..rest.len()].copy_from_slice(rest);
                self.add(u64::from_le_bytes(w));
            }
        }

        fn write_u8(&mut self, i: u8) {
            self.add(u64::from(i));
        }

        fn write_u16(&mut self, i: u16) {
            self.add(u64::from(i));
        }

        fn write_u32(&mut self, i: u32) {
            self.add(u64::from(i));
        }

        fn write_u64(&mut self, i: u64) {
            self.add(i);
        }

        fn write_usize(&mut self, i: usize) {
            self.add(i as u64);
        }

        fn finish(&self) -> u64 {
            self.0
        }
    }

    pub type Map<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<Fx>>;
}

#[cfg(test)]
mod tests;
