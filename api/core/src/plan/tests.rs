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
        routed: false,
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
        spread: Vec::new(),
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

fn snap(kind: SchedulerKind, agents: Vec<AgentState>, pending: Vec<PendingSession>) -> Snapshot {
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
    let d = plan(&snap(
        SchedulerKind::Fifo,
        vec![agent("x", "4", "16g")],
        pending,
    ));
    assert_eq!(placed(&d), vec![0, 1, 2, 3]);
    assert!(matches!(
        &d[4],
        Decision::Wait { reason, .. } if reason.status_info == "no-available-instances"
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
        placed(&plan(&snap(SchedulerKind::Fifo, agents(), pending()))),
        vec![1],
        "strict FIFO: 2 blocks 3"
    );
    assert_eq!(
        placed(&plan(&snap(SchedulerKind::Lifo, agents(), pending()))),
        vec![3, 2]
    );
    // DRF: after a's first session, b (share 0) goes before a's second.
    let d = plan(&snap(SchedulerKind::Drf, agents(), pending()));
    assert_eq!(placed(&d), vec![1, 3]);
}

#[test]
fn too_large_for_any_agent_does_not_block() {
    let pending = vec![session(1, "a", "64", "1g"), session(2, "a", "1", "1g")];
    let d = plan(&snap(
        SchedulerKind::Fifo,
        vec![agent("x", "4", "16g")],
        pending,
    ));
    assert_eq!(placed(&d), vec![2]);
    match &d[0] {
        Decision::Wait { reason, .. } => {
            let msg = &reason.failed[0].msg;
            assert!(msg.contains("large enough"), "{msg}");
            assert!(msg.contains("cpu=4 on x"), "names the closest agent: {msg}");
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
    let d = plan(&snap(
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
        Decision::Wait { reason, .. } => {
            assert_eq!(reason.failed[0].name, "storage_host");
            assert!(
                reason.failed[0].msg.contains("(local)"),
                "{}",
                reason.failed[0].msg
            );
        }
        other => panic!("{other:?}"),
    }
    // A session that sees nothing it cannot reach is not held up behind it.
    assert!(matches!(&d[2], Decision::Place { agent, .. } if &**agent == "bare"));
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
    let d = plan(&s);
    match &d[0] {
        Decision::Wait { reason, .. } => {
            assert_eq!(reason.status_info, "predicate-checks-failed");
            assert_eq!(reason.failed[0].name, "keypair_resource_limit");
            assert!(
                reason.failed[0].msg.contains("allows cpu=1"),
                "{}",
                reason.failed[0].msg
            );
            assert!(reason.passed.contains(&"concurrency"));
        }
        other => panic!("{other:?}"),
    }
    match &d[1] {
        Decision::Wait { reason, .. } => assert_eq!(reason.failed[0].name, "concurrency"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn dispersed_spreads_concentrated_packs() {
    let agents = vec![agent("x", "4", "16g"), agent("y", "4", "16g")];
    let pending = vec![session(1, "a", "1", "1g"), session(2, "a", "1", "1g")];
    let d = plan(&snap(SchedulerKind::Fifo, agents.clone(), pending.clone()));
    let on = |d: &[Decision]| {
        d.iter()
            .filter_map(|x| {
                if let Decision::Place { agent, .. } = x {
                    Some(agent.to_string())
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
    let packed = on(&plan(&s));
    assert_eq!(packed[0], packed[1]);
}

#[test]
fn dense_round_trip() {
    let s = ResourceSlots::parse_input([("cpu", "0.5"), ("mem", "1g"), ("cuda.shares", "0.25")])
        .unwrap();
    assert_eq!(Dense::from_slots(&s).to_slots(), s);
}

#[test]
fn sessions_held_by_one_limit_share_one_reason_until_it_changes() {
    let mut s = snap(
        SchedulerKind::Fifo,
        vec![agent("x", "64", "256g")],
        (0..6).map(|i| session(i, "a", "1", "1g")).collect(),
    );
    s.keypairs.get_mut("a").unwrap().max_concurrent = 2;
    let d = plan(&s);
    assert_eq!(placed(&d), vec![0, 1]);
    let reasons: Vec<&Arc<Reason>> = d
        .iter()
        .filter_map(|x| match x {
            Decision::Wait { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(reasons.len(), 4);
    assert!(reasons.iter().all(|r| Arc::ptr_eq(r, reasons[0])));
    assert!(reasons[0].failed[0].msg.contains("2 are running"));
}

#[test]
fn an_index_kept_between_passes_follows_changes() {
    let mut index = AgentIndex::new(Strategy::Dispersed);
    let one = |agents: Vec<AgentState>, n: i64| {
        snap(
            SchedulerKind::Fifo,
            agents,
            vec![session(n, "a", "2", "1g")],
        )
    };
    let d = plan_on(
        &mut index,
        &one(vec![agent("x", "4", "16g"), agent("y", "2", "16g")], 1),
    );
    assert!(matches!(&d[0], Decision::Place { agent, .. } if &**agent == "x"));
    // x now has 2 cpu in use (the database says so too): x and y tie, and x came first.
    let mut x = agent("x", "4", "16g");
    x.occupied = slots("2", "1g");
    let d = plan_on(&mut index, &one(vec![x.clone(), agent("y", "2", "16g")], 2));
    assert!(matches!(&d[0], Decision::Place { agent, .. } if &**agent == "x"));
    // x is gone; z joins: y is full only if its use says so.
    x.occupied = slots("4", "2g");
    let d = plan_on(
        &mut index,
        &one(vec![agent("y", "2", "16g"), agent("z", "1", "1g")], 3),
    );
    assert!(matches!(&d[0], Decision::Place { agent, .. } if &**agent == "y"));
    assert_eq!(index.len(), 2);
    let d = plan_on(&mut index, &one(vec![x, agent("z", "1", "1g")], 4));
    assert!(
        matches!(&d[0], Decision::Wait { reason, .. } if reason.failed[0].name == "agent_resources"),
        "{d:?}"
    );
}

#[test]
fn an_agent_listed_twice_does_not_keep_a_gone_one() {
    let mut index = AgentIndex::new(Strategy::Dispersed);
    index.sync(&[agent("x", "4", "16g"), agent("y", "4", "16g")]);
    index.sync(&[agent("x", "4", "16g"), agent("x", "4", "16g")]);
    assert_eq!(index.len(), 1);
    let d = plan_on(
        &mut index,
        &snap(
            SchedulerKind::Fifo,
            vec![agent("x", "1", "1g")],
            vec![session(1, "a", "2", "1g")],
        ),
    );
    assert!(
        matches!(&d[0], Decision::Wait { reason, .. } if reason.failed[0].name == "agent_resources"),
        "y is gone: {d:?}"
    );
}

/// The plain scan the index must agree with: every placement looks at every agent, DRF
/// recomputes every keypair's share for every pick. Waits are compared by predicate names.
mod scan {
    use super::super::*;

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Outcome {
        Place(Uuid, String),
        Wait(Uuid, &'static str, Vec<&'static str>, Vec<&'static str>),
    }

    pub fn outcomes(d: &[Decision]) -> Vec<Outcome> {
        d.iter()
            .map(|x| match x {
                Decision::Place { session, agent } => Outcome::Place(*session, agent.to_string()),
                Decision::Spread { session, agents } => Outcome::Place(*session, agents.join(",")),
                Decision::Wait { session, reason } => Outcome::Wait(
                    *session,
                    reason.status_info,
                    reason.failed.iter().map(|p| p.name).collect(),
                    reason.passed.clone(),
                ),
            })
            .collect()
    }

    fn sees(a: &AgentState, hosts: &[String]) -> bool {
        a.storage_hosts
            .as_ref()
            .is_none_or(|mine| hosts.iter().all(|h| mine.contains(h)))
    }

    fn over(q: &Quota, want: &Dense) -> bool {
        (0..N).any(|i| q.limit.0[i].is_some_and(|max| q.using.0[i].saturating_add(want.0[i]) > max))
    }

    fn predicates(s: &PendingSession, snap: &Snapshot) -> (Vec<&'static str>, Vec<&'static str>) {
        let kp = snap.keypairs.get(&s.access_key);
        let results = [
            (
                "concurrency",
                kp.is_some_and(|k| k.max_concurrent > 0 && k.concurrency >= k.max_concurrent),
            ),
            (
                "keypair_resource_limit",
                kp.is_some_and(|k| over(&k.quota, &s.requested)),
            ),
            (
                "group_resource_limit",
                snap.groups
                    .get(&s.group_id)
                    .is_some_and(|q| over(q, &s.requested)),
            ),
            (
                "domain_resource_limit",
                snap.domains
                    .get(&s.domain)
                    .is_some_and(|q| over(q, &s.requested)),
            ),
        ];
        let failed = results.iter().filter(|r| r.1).map(|r| r.0).collect();
        let passed = results.iter().filter(|r| !r.1).map(|r| r.0).collect();
        (failed, passed)
    }

    fn select(
        agents: &[AgentState],
        want: &Dense,
        storage: &[String],
        strategy: Strategy,
    ) -> Option<usize> {
        let mut best: Option<(usize, [i64; N])> = None;
        for (i, a) in agents.iter().enumerate() {
            if !sees(a, storage) || !a.occupied.fits(want, &a.available) {
                continue;
            }
            let mut key = [0i64; N];
            let unused = (0..N)
                .filter(|&k| {
                    KNOWN_SLOTS[k].0.starts_with("cuda") && want.0[k] == 0 && a.available.0[k] > 0
                })
                .count();
            key[0] = -(unused as i64);
            for (slot, k) in [2usize, 3, 0].iter().enumerate() {
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

    pub fn plan(mut snap: Snapshot) -> Vec<Outcome> {
        let mut pending = std::mem::take(&mut snap.pending);
        match snap.scheduler {
            SchedulerKind::Fifo | SchedulerKind::Drf => pending.sort_by_key(|s| s.order),
            SchedulerKind::Lifo => pending.sort_by_key(|s| std::cmp::Reverse(s.order)),
        }
        let mut total = Dense::default();
        let mut largest = Dense::default();
        for a in &snap.agents {
            total.add(&a.available);
            for i in 0..N {
                largest.0[i] = largest.0[i].max(a.available.0[i]);
            }
        }
        // DRF: queues per keypair in order of first appearance.
        let mut queues: Vec<(String, std::collections::VecDeque<PendingSession>)> = Vec::new();
        let mut ordered: std::collections::VecDeque<PendingSession> = Default::default();
        for s in pending {
            if snap.scheduler == SchedulerKind::Drf {
                match queues.iter_mut().find(|(k, _)| *k == s.access_key) {
                    Some((_, q)) => q.push_back(s),
                    None => queues.push((s.access_key.clone(), [s].into())),
                }
            } else {
                ordered.push_back(s);
            }
        }
        let mut out = Vec::new();
        let mut blocked = false;
        loop {
            let next = if snap.scheduler == SchedulerKind::Drf {
                let mut best: Option<(usize, f64, i64)> = None;
                for (i, (ak, q)) in queues.iter().enumerate() {
                    let Some(head) = q.front() else { continue };
                    let d = snap
                        .keypairs
                        .get(ak)
                        .map(|k| dominant_share(&k.quota.using, &total))
                        .unwrap_or(0.0);
                    if best.is_none_or(|(_, b, o)| d < b || (d == b && head.order < o)) {
                        best = Some((i, d, head.order));
                    }
                }
                best.and_then(|(i, _, _)| queues[i].1.pop_front())
            } else {
                ordered.pop_front()
            };
            let Some(s) = next else { break };
            let (failed, passed) = predicates(&s, &snap);
            if !failed.is_empty() {
                out.push(Outcome::Wait(
                    s.id,
                    "predicate-checks-failed",
                    failed,
                    passed,
                ));
                continue;
            }
            let no_instance =
                |name| Outcome::Wait(s.id, "no-available-instances", vec![name], passed.clone());
            if blocked {
                out.push(no_instance("queue_order"));
                continue;
            }
            if !snap.agents.is_empty() && !snap.agents.iter().any(|a| sees(a, &s.storage_hosts)) {
                out.push(no_instance("storage_host"));
                continue;
            }
            match select(&snap.agents, &s.requested, &s.storage_hosts, snap.strategy) {
                Some(i) => {
                    snap.agents[i].occupied.add(&s.requested);
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
                    out.push(Outcome::Place(s.id, snap.agents[i].id.clone()));
                }
                None => {
                    let ever_fits = Dense::default().fits(&s.requested, &largest);
                    let strict =
                        matches!(snap.scheduler, SchedulerKind::Fifo | SchedulerKind::Lifo);
                    let skip =
                        snap.num_retries_to_skip > 0 && s.retries >= snap.num_retries_to_skip;
                    if strict && ever_fits && !skip {
                        blocked = true;
                    }
                    out.push(no_instance("agent_resources"));
                }
            }
        }
        out
    }
}

mod exact {
    use super::super::{Strategy as Placement, *};
    use super::scan;
    use proptest::prelude::{
        Just, ProptestConfig, Strategy, any, prop_assert_eq, prop_oneof, proptest,
    };

    const HOSTS: [&str; 3] = ["local", "nfs", "ceph"];

    fn dense() -> impl Strategy<Value = Dense> {
        // Small ranges so that ties, full agents and limits are all common.
        (0i64..6, 0i64..6, 0i64..3, 0i64..3)
            .prop_map(|(c, m, d, s)| Dense([c * 500, m * (1 << 30), d * 1000, s * 250]))
    }

    fn storage() -> impl Strategy<Value = Option<Vec<String>>> {
        prop_oneof![
            3 => Just(None),
            1 => proptest::sample::subsequence(HOSTS.to_vec(), 0..=3)
                .prop_map(|h| Some(h.into_iter().map(String::from).collect())),
        ]
    }

    fn agents() -> impl Strategy<Value = Vec<AgentState>> {
        proptest::collection::vec((dense(), dense(), storage(), 0u8..4), 0..24).prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (cap, used, storage_hosts, accel))| {
                    let mut available = cap;
                    available.0[0] += 4000;
                    available.0[1] += 4 << 30;
                    available.0[2] = if accel & 1 != 0 {
                        available.0[2] + 1000
                    } else {
                        0
                    };
                    available.0[3] = if accel & 2 != 0 {
                        available.0[3] + 1000
                    } else {
                        0
                    };
                    // Use may exceed capacity (an agent that shrank): never placed on then.
                    let mut occupied = used;
                    occupied.0[2] = occupied.0[2].min(available.0[2] + 1000);
                    occupied.0[3] = occupied.0[3].min(available.0[3] + 250);
                    AgentState {
                        id: format!("i-{i}"),
                        available,
                        occupied,
                        storage_hosts,
                        routed: false,
                    }
                })
                .collect()
        })
    }

    fn limit() -> impl Strategy<Value = DenseLimit> {
        proptest::option::of((0i64..12, 0i64..12)).prop_map(|l| match l {
            None => DenseLimit::UNLIMITED,
            Some((c, m)) => DenseLimit([Some(c * 1000), Some(m * (1 << 30)), None, None]),
        })
    }

    fn quota() -> impl Strategy<Value = Quota> {
        (limit(), dense()).prop_map(|(limit, using)| Quota { limit, using })
    }

    fn snapshot() -> impl Strategy<Value = Snapshot> {
        let pending = proptest::collection::vec(
            (
                dense(),
                0usize..4,
                0u128..3,
                0usize..2,
                0i64..40,
                0u32..3,
                proptest::sample::subsequence(HOSTS.to_vec(), 0..=1),
            ),
            0..80,
        );
        let keypairs = proptest::collection::vec((quota(), 0u32..4, 0u32..4), 3);
        (
            prop_oneof![
                Just(SchedulerKind::Fifo),
                Just(SchedulerKind::Lifo),
                Just(SchedulerKind::Drf)
            ],
            prop_oneof![Just(Placement::Dispersed), Just(Placement::Concentrated)],
            0u32..3,
            agents(),
            pending,
            keypairs,
            proptest::collection::vec(quota(), 2),
            proptest::collection::vec(quota(), 2),
        )
            .prop_map(
                |(
                    scheduler,
                    strategy,
                    num_retries_to_skip,
                    agents,
                    pending,
                    kps,
                    groups,
                    domains,
                )| {
                    Snapshot {
                        scheduler,
                        strategy,
                        num_retries_to_skip,
                        agents,
                        pending: pending
                            .into_iter()
                            .enumerate()
                            .map(|(i, (requested, kp, g, d, order, retries, hosts))| {
                                PendingSession {
                                    id: Uuid::from_u128(i as u128 + 1),
                                    // Keypair 3 has no policy (no limits, share 0).
                                    access_key: format!("AK{kp}"),
                                    group_id: Uuid::from_u128(g),
                                    domain: format!("d{d}"),
                                    requested,
                                    order,
                                    retries,
                                    storage_hosts: hosts.into_iter().map(String::from).collect(),
                                    spread: Vec::new(),
                                }
                            })
                            .collect(),
                        keypairs: kps
                            .into_iter()
                            .enumerate()
                            .map(|(i, (quota, max_concurrent, concurrency))| {
                                (
                                    format!("AK{i}"),
                                    KeypairState {
                                        quota,
                                        max_concurrent,
                                        concurrency,
                                    },
                                )
                            })
                            .collect(),
                        // Project 2 has no row (no limit).
                        groups: groups
                            .into_iter()
                            .enumerate()
                            .map(|(i, q)| (Uuid::from_u128(i as u128), q))
                            .collect(),
                        domains: domains
                            .into_iter()
                            .enumerate()
                            .map(|(i, q)| (format!("d{i}"), q))
                            .collect(),
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Same sessions placed on the same agents in the same order, same predicates failed.
        #[test]
        fn the_index_places_what_the_plain_scan_places(snap in snapshot()) {
            let expected = scan::plan(snap.clone());
            let got = scan::outcomes(&plan(&snap));
            prop_assert_eq!(got, expected);
        }

        /// An index kept across passes (agents changing, leaving and joining between them)
        /// plans what a fresh one does.
        #[test]
        fn a_kept_index_plans_what_a_fresh_one_does(
            first in snapshot(),
            changes in proptest::collection::vec((any::<bool>(), dense(), any::<bool>()), 24),
            joining in agents(),
        ) {
            let mut index = AgentIndex::new(first.strategy);
            let mut snap = first;
            for round in 0..3 {
                let fresh = scan::outcomes(&plan(&snap));
                let kept = scan::outcomes(&plan_on(&mut index, &snap));
                prop_assert_eq!(kept, fresh, "round {}", round);
                // Between passes: some agents report other use, some leave, new ones join
                // (after every agent the index knows, as they would be listed).
                let mut next = Vec::new();
                for (a, (leave, used, change)) in snap.agents.iter().zip(changes.iter().cycle()) {
                    if *leave && round % 2 == 0 {
                        continue;
                    }
                    let mut a = a.clone();
                    if *change {
                        a.occupied = *used;
                    }
                    next.push(a);
                }
                for (i, mut a) in joining.iter().cloned().enumerate() {
                    a.id = format!("j{round}-{i}");
                    next.push(a);
                }
                snap.agents = next;
            }
        }
    }
}

#[test]
fn a_multi_node_cluster_spreads_over_routed_agents_or_waits_whole() {
    let routed = |id: &str, cpu: &str| AgentState {
        routed: true,
        ..agent(id, cpu, "8g")
    };
    let mut cluster = session(1, "AK", "4", "2g");
    cluster.spread = vec![slots("2", "1g"), slots("2", "1g")];
    let snap = |agents: Vec<AgentState>, pending: Vec<PendingSession>| Snapshot {
        scheduler: SchedulerKind::Fifo,
        strategy: Strategy::Dispersed,
        num_retries_to_skip: 0,
        agents,
        pending,
        keypairs: HashMap::new(),
        groups: HashMap::new(),
        domains: HashMap::new(),
    };
    // Dispersed: one container on each routed agent; the unrouted one (the manager's own
    // engine) is never chosen, however free.
    let d = plan(&snap(
        vec![
            agent("local", "64", "64g"),
            routed("a", "4"),
            routed("b", "4"),
        ],
        vec![cluster.clone()],
    ));
    match &d[0] {
        Decision::Spread { agents, .. } => {
            let mut names: Vec<&str> = agents.iter().map(|a| &**a).collect();
            names.sort();
            assert_eq!(names, ["a", "b"]);
        }
        other => panic!("{other:?}"),
    }
    // Room for one container only: the session waits, and nothing of it is held, so a later
    // session that fits is placed.
    let later = session(2, "AK", "2", "1g");
    let d = plan(&snap(
        vec![agent("local", "64", "64g"), routed("a", "3")],
        vec![cluster.clone(), later],
    ));
    assert!(
        matches!(&d[0], Decision::Wait { reason, .. } if reason.failed[0].name == "multi_node"),
        "{d:?}"
    );
    assert!(matches!(&d[1], Decision::Place { .. }), "{d:?}");
    // Both containers on one routed agent with room for both.
    let d = plan(&snap(vec![routed("a", "4")], vec![cluster]));
    assert!(
        matches!(&d[0], Decision::Spread { agents, .. } if agents.iter().all(|a| &**a == "a")),
        "{d:?}"
    );
}
