//! The scheduler's placement logic: a pure function from a snapshot of one resource group to
//! placements (and, for sessions left pending, the predicates that failed). No I/O here, so
//! it is unit-tested and benchmarked directly.
//!
//! Slots are dense integer vectors: `mem` in bytes, every other slot in thousandths
//! (requests finer than 0.001 are rounded up), so sums and comparisons are exact and cheap.
use std::collections::HashMap;

use bai_types::enums::SchedulerKind;
use bai_types::slots::{KNOWN_SLOTS, ResourceLimits, ResourceSlots, SlotLimit, format_amount};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use uuid::Uuid;

pub const N: usize = KNOWN_SLOTS.len();

fn scale(slot: &str) -> Decimal {
    if slot == "mem" {
        Decimal::ONE
    } else {
        Decimal::from(1000)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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

    /// The slots where `using + want` would pass the limit.
    fn exceeded(&self, using: &Dense, want: &Dense) -> Vec<&'static str> {
        (0..N)
            .filter(|&i| self.0[i].is_some_and(|max| using.0[i].saturating_add(want.0[i]) > max))
            .map(|i| KNOWN_SLOTS[i].0)
            .collect()
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
}

impl AgentState {
    /// Whether the agent's host sees every storage host in `hosts`.
    fn sees(&self, hosts: &[String]) -> bool {
        self.storage_hosts
            .as_ref()
            .is_none_or(|mine| hosts.iter().all(|h| mine.contains(h)))
    }
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Place {
        session: Uuid,
        agent: String,
    },
    Wait {
        session: Uuid,
        status_info: &'static str,
        failed: Vec<Predicate>,
        passed: Vec<&'static str>,
    },
}

/// Quota checks that do not depend on agents.
fn predicates(s: &PendingSession, snap: &Snapshot) -> (Vec<Predicate>, Vec<&'static str>) {
    let mut failed = Vec::new();
    let mut passed = Vec::new();
    let mut check = |name: &'static str, result: Option<String>| match result {
        Some(msg) => failed.push(Predicate { name, msg }),
        None => passed.push(name),
    };
    let kp = snap.keypairs.get(&s.access_key);
    check(
        "concurrency",
        kp.filter(|k| k.max_concurrent > 0 && k.concurrency >= k.max_concurrent).map(|k| {
            format!("You can run at most {} sessions at once (the keypair's resource policy); {} are running.", k.max_concurrent, k.concurrency)
        }),
    );
    let quota_msg = |what: &str, q: &Quota| {
        let over = q.limit.exceeded(&q.using, &s.requested);
        (!over.is_empty()).then(|| {
            format!(
                "The {what} resource limit would be exceeded ({}): it allows {}, {} in use, {} requested.",
                over.join(", "),
                q.limit.describe(&over),
                q.using.human(),
                s.requested.human()
            )
        })
    };
    check(
        "keypair_resource_limit",
        kp.and_then(|k| quota_msg("keypair", &k.quota)),
    );
    check(
        "group_resource_limit",
        snap.groups
            .get(&s.group_id)
            .and_then(|q| quota_msg("project", q)),
    );
    check(
        "domain_resource_limit",
        snap.domains
            .get(&s.domain)
            .and_then(|q| quota_msg("domain", q)),
    );
    (failed, passed)
}

/// The agent to place `want` on, following the strategy; None when none has room.
fn select_agent(
    agents: &[AgentState],
    want: &Dense,
    storage: &[String],
    strategy: Strategy,
) -> Option<usize> {
    let mut best: Option<(usize, [i64; N])> = None;
    for (i, a) in agents.iter().enumerate() {
        if !a.sees(storage) || !a.occupied.fits(want, &a.available) {
            continue;
        }
        // Rank: prefer agents without accelerators the request does not use, then by
        // remaining capacity, accelerators first.
        let mut key = [0i64; N];
        let unused_accel = (0..N)
            .filter(|&k| {
                KNOWN_SLOTS[k].0.starts_with("cuda") && want.0[k] == 0 && a.available.0[k] > 0
            })
            .count();
        key[0] = -(unused_accel as i64);
        let order = [2usize, 3, 0, 1]; // cuda.device, cuda.shares, cpu, mem
        for (slot, k) in order.iter().take(N - 1).enumerate() {
            let rem = a.available.0[*k] - a.occupied.0[*k] - want.0[*k];
            key[slot + 1] = match strategy {
                Strategy::Dispersed => rem,
                Strategy::Concentrated => -rem,
            };
        }
        if best.as_ref().is_none_or(|(_, b)| key > *b) {
            best = Some((i, key));
        }
    }
    best.map(|(i, _)| i)
}

/// Dominant share of a keypair: the largest fraction of any slot's total capacity it uses.
fn dominant_share(using: &Dense, total: &Dense) -> f64 {
    (0..N)
        .filter(|&i| total.0[i] > 0)
        .map(|i| using.0[i] as f64 / total.0[i] as f64)
        .fold(0.0, f64::max)
}

pub fn plan(mut snap: Snapshot) -> Vec<Decision> {
    let mut pending = std::mem::take(&mut snap.pending);
    match snap.scheduler {
        SchedulerKind::Fifo | SchedulerKind::Drf => pending.sort_by_key(|s| s.order),
        SchedulerKind::Lifo => pending.sort_by_key(|s| std::cmp::Reverse(s.order)),
    }
    let mut total = Dense::default();
    for a in &snap.agents {
        total.add(&a.available);
    }
    let mut largest = Dense::default();
    for a in &snap.agents {
        for i in 0..N {
            largest.0[i] = largest.0[i].max(a.available.0[i]);
        }
    }
    let mut out = Vec::with_capacity(pending.len());
    let mut blocked_by: Option<Uuid> = None;
    let mut queue = Queue::new(pending, snap.scheduler == SchedulerKind::Drf);
    while let Some(s) = queue.next(&snap, &total) {
        let (failed, passed) = predicates(&s, &snap);
        if !failed.is_empty() {
            out.push(Decision::Wait {
                session: s.id,
                status_info: "predicate-checks-failed",
                failed,
                passed,
            });
            continue;
        }
        if let Some(head) = blocked_by {
            let msg = format!(
                "Waiting for an earlier session ({head}) of this resource group to start first."
            );
            out.push(Decision::Wait {
                session: s.id,
                status_info: "no-available-instances",
                failed: vec![Predicate {
                    name: "queue_order",
                    msg,
                }],
                passed,
            });
            continue;
        }
        // Folders on a storage host no agent here sees: a predicate, never a failed start.
        if !snap.agents.is_empty() && !snap.agents.iter().any(|a| a.sees(&s.storage_hosts)) {
            let missing: Vec<&str> = s
                .storage_hosts
                .iter()
                .filter(|h| !snap.agents.iter().any(|a| a.sees(std::slice::from_ref(h))))
                .map(String::as_str)
                .collect();
            out.push(Decision::Wait {
                session: s.id,
                status_info: "no-available-instances",
                failed: vec![Predicate {
                    name: "storage_host",
                    msg: format!(
                        "No agent of this resource group sees every storage host of this session's folders ({}): the storage host is not available on these agents.",
                        if missing.is_empty() {
                            s.storage_hosts.join(", ")
                        } else {
                            missing.join(", ")
                        }
                    ),
                }],
                passed,
            });
            continue;
        }
        match select_agent(&snap.agents, &s.requested, &s.storage_hosts, snap.strategy) {
            Some(i) => {
                let agent = &mut snap.agents[i];
                agent.occupied.add(&s.requested);
                if let Some(k) = snap.keypairs.get_mut(&s.access_key) {
                    k.quota.using.add(&s.requested);
                    k.concurrency += 1;
                }
                if let Some(g) = snap.groups.get_mut(&s.group_id) {
                    g.using.add(&s.requested);
                }
                if let Some(d) = snap.domains.get_mut(&s.domain) {
                    d.using.add(&s.requested);
                }
                out.push(Decision::Place {
                    session: s.id,
                    agent: agent.id.clone(),
                });
            }
            None => {
                let ever_fits = Dense::default().fits(&s.requested, &largest);
                let msg = if snap.agents.is_empty() {
                    "No agent of this resource group is alive.".to_string()
                } else if !ever_fits {
                    format!(
                        "No agent of this resource group is large enough for {}.",
                        s.requested.human()
                    )
                } else {
                    format!(
                        "No agent has {} free right now; the session starts when resources are released.",
                        s.requested.human()
                    )
                };
                let strict = matches!(snap.scheduler, SchedulerKind::Fifo | SchedulerKind::Lifo);
                let skip = snap.num_retries_to_skip > 0 && s.retries >= snap.num_retries_to_skip;
                if strict && ever_fits && !skip {
                    blocked_by = Some(s.id);
                }
                out.push(Decision::Wait {
                    session: s.id,
                    status_info: "no-available-instances",
                    failed: vec![Predicate {
                        name: "agent_resources",
                        msg,
                    }],
                    passed,
                });
            }
        }
    }
    out
}

/// The sessions still to consider. FIFO/LIFO: one ordered queue. DRF: one queue per keypair
/// (each in creation order); the next session comes from the keypair with the smallest
/// dominant share, so a pick costs O(keypairs), not O(pending).
enum Queue {
    Ordered(std::collections::VecDeque<PendingSession>),
    Fair(Vec<(String, std::collections::VecDeque<PendingSession>)>),
}

impl Queue {
    fn new(pending: Vec<PendingSession>, fair: bool) -> Queue {
        if !fair {
            return Queue::Ordered(pending.into());
        }
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut queues: Vec<(String, std::collections::VecDeque<PendingSession>)> = Vec::new();
        for s in pending {
            let i = *index.entry(s.access_key.clone()).or_insert_with(|| {
                queues.push((s.access_key.clone(), Default::default()));
                queues.len() - 1
            });
            queues[i].1.push_back(s);
        }
        Queue::Fair(queues)
    }

    fn next(&mut self, snap: &Snapshot, total: &Dense) -> Option<PendingSession> {
        match self {
            Queue::Ordered(q) => q.pop_front(),
            Queue::Fair(queues) => {
                let share = |ak: &str| {
                    snap.keypairs
                        .get(ak)
                        .map(|k| dominant_share(&k.quota.using, total))
                        .unwrap_or(0.0)
                };
                let mut best: Option<(usize, f64, i64)> = None;
                for (i, (ak, q)) in queues.iter().enumerate() {
                    let Some(head) = q.front() else { continue };
                    let d = share(ak);
                    // Smallest share first; among equals, the earliest session.
                    if best.is_none_or(|(_, b, o)| d < b || (d == b && head.order < o)) {
                        best = Some((i, d, head.order));
                    }
                }
                best.and_then(|(i, _, _)| queues[i].1.pop_front())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(cpu: &str, mem: &str) -> Dense {
        Dense::from_slots(&ResourceSlots::parse_input([("cpu", cpu), ("mem", mem)]).unwrap())
    }

    fn agent(id: &str, cpu: &str, mem: &str) -> AgentState {
        AgentState {
            id: id.into(),
            available: slots(cpu, mem),
            occupied: Dense::default(),
            storage_hosts: None,
        }
    }

    fn session(n: i64, ak: &str, cpu: &str, mem: &str) -> PendingSession {
        PendingSession {
            id: Uuid::from_u128(n as u128),
            access_key: ak.into(),
            group_id: Uuid::nil(),
            domain: "default".into(),
            requested: slots(cpu, mem),
            order: n,
            retries: 0,
            storage_hosts: Vec::new(),
        }
    }

    fn unlimited_key(max_concurrent: u32) -> KeypairState {
        KeypairState {
            quota: Quota {
                limit: DenseLimit::UNLIMITED,
                using: Dense::default(),
            },
            max_concurrent,
            concurrency: 0,
        }
    }

    fn snap(
        kind: SchedulerKind,
        agents: Vec<AgentState>,
        pending: Vec<PendingSession>,
    ) -> Snapshot {
        let mut keypairs = HashMap::new();
        for ak in ["a", "b"] {
            keypairs.insert(ak.to_string(), unlimited_key(0));
        }
        Snapshot {
            scheduler: kind,
            strategy: Strategy::Dispersed,
            num_retries_to_skip: 0,
            agents,
            pending,
            keypairs,
            groups: HashMap::new(),
            domains: HashMap::new(),
        }
    }

    fn placed(d: &[Decision]) -> Vec<u128> {
        d.iter()
            .filter_map(|x| {
                if let Decision::Place { session, .. } = x {
                    Some(session.as_u128())
                } else {
                    None
                }
            })
            .collect()
    }

    #[test]
    fn never_overcommits_an_agent() {
        let pending = (0..10).map(|i| session(i, "a", "1", "1g")).collect();
        let d = plan(snap(
            SchedulerKind::Fifo,
            vec![agent("x", "4", "16g")],
            pending,
        ));
        assert_eq!(placed(&d), vec![0, 1, 2, 3]);
        assert!(matches!(
            &d[4],
            Decision::Wait {
                status_info: "no-available-instances",
                ..
            }
        ));
    }

    #[test]
    fn fifo_blocks_behind_the_head_lifo_reverses_drf_is_fair() {
        let agents = || vec![agent("x", "4", "16g")];
        let pending = || {
            vec![
                session(1, "a", "3", "1g"),
                session(2, "a", "2", "1g"),
                session(3, "b", "1", "1g"),
            ]
        };
        assert_eq!(
            placed(&plan(snap(SchedulerKind::Fifo, agents(), pending()))),
            vec![1],
            "strict FIFO: 2 blocks 3"
        );
        assert_eq!(
            placed(&plan(snap(SchedulerKind::Lifo, agents(), pending()))),
            vec![3, 2]
        );
        // DRF: after a's first session, b (share 0) goes before a's second.
        let d = plan(snap(SchedulerKind::Drf, agents(), pending()));
        assert_eq!(placed(&d), vec![1, 3]);
    }

    #[test]
    fn too_large_for_any_agent_does_not_block() {
        let pending = vec![session(1, "a", "64", "1g"), session(2, "a", "1", "1g")];
        let d = plan(snap(
            SchedulerKind::Fifo,
            vec![agent("x", "4", "16g")],
            pending,
        ));
        assert_eq!(placed(&d), vec![2]);
        match &d[0] {
            Decision::Wait { failed, .. } => {
                assert!(failed[0].msg.contains("large enough"), "{failed:?}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn folders_go_only_where_their_storage_host_is_seen() {
        let mut nfs_only = agent("nfs", "8", "32g");
        nfs_only.storage_hosts = Some(vec!["nfs".into()]);
        let mut bare = agent("bare", "64", "256g");
        bare.storage_hosts = Some(Vec::new());
        let mut wants_nfs = session(1, "a", "1", "1g");
        wants_nfs.storage_hosts = vec!["nfs".into()];
        let mut wants_other = session(2, "a", "1", "1g");
        wants_other.storage_hosts = vec!["local".into()];
        // Dispersed would pick the larger agent; it cannot see the folder.
        let d = plan(snap(
            SchedulerKind::Fifo,
            vec![bare.clone(), nfs_only.clone()],
            vec![wants_nfs, wants_other, session(3, "a", "1", "1g")],
        ));
        assert_eq!(
            d[0],
            Decision::Place {
                session: Uuid::from_u128(1),
                agent: "nfs".into()
            }
        );
        match &d[1] {
            Decision::Wait { failed, .. } => {
                assert_eq!(failed[0].name, "storage_host");
                assert!(failed[0].msg.contains("(local)"), "{}", failed[0].msg);
            }
            other => panic!("{other:?}"),
        }
        // A session that sees nothing it cannot reach is not held up behind it.
        assert!(matches!(&d[2], Decision::Place { agent, .. } if agent == "bare"));
    }

    #[test]
    fn predicates_name_what_failed() {
        let mut s = snap(
            SchedulerKind::Fifo,
            vec![agent("x", "8", "32g")],
            vec![session(1, "a", "2", "4g"), session(2, "b", "1", "1g")],
        );
        let limit = DenseLimit::from_limits(
            &ResourceLimits::parse_json(&serde_json::json!({"cpu": "1"})).unwrap(),
            SlotLimit::Unlimited,
        );
        s.keypairs.get_mut("a").unwrap().quota.limit = limit;
        s.keypairs.get_mut("b").unwrap().max_concurrent = 1;
        s.keypairs.get_mut("b").unwrap().concurrency = 1;
        let d = plan(s);
        match &d[0] {
            Decision::Wait {
                failed,
                passed,
                status_info,
                ..
            } => {
                assert_eq!(*status_info, "predicate-checks-failed");
                assert_eq!(failed[0].name, "keypair_resource_limit");
                assert!(failed[0].msg.contains("allows cpu=1"), "{}", failed[0].msg);
                assert!(passed.contains(&"concurrency"));
            }
            other => panic!("{other:?}"),
        }
        match &d[1] {
            Decision::Wait { failed, .. } => assert_eq!(failed[0].name, "concurrency"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn dispersed_spreads_concentrated_packs() {
        let agents = vec![agent("x", "4", "16g"), agent("y", "4", "16g")];
        let pending = vec![session(1, "a", "1", "1g"), session(2, "a", "1", "1g")];
        let d = plan(snap(SchedulerKind::Fifo, agents.clone(), pending.clone()));
        let on = |d: &[Decision]| {
            d.iter()
                .filter_map(|x| {
                    if let Decision::Place { agent, .. } = x {
                        Some(agent.clone())
                    } else {
                        None
                    }
                })
                .collect::<Vec<_>>()
        };
        let spread = on(&d);
        assert_ne!(spread[0], spread[1]);
        let mut s = snap(SchedulerKind::Fifo, agents, pending);
        s.strategy = Strategy::Concentrated;
        let packed = on(&plan(s));
        assert_eq!(packed[0], packed[1]);
    }

    #[test]
    fn dense_round_trip() {
        let s =
            ResourceSlots::parse_input([("cpu", "0.5"), ("mem", "1g"), ("cuda.shares", "0.25")])
                .unwrap();
        assert_eq!(Dense::from_slots(&s).to_slots(), s);
    }
}
