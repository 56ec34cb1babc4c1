//! The scheduler: placements/s of the real planner (1,000 × 10,000 and 10,000 × 100,000
//! agents × pending sessions) against a minimal first-fit loop over the same data, and the pass
//! that places nothing. Needs no server, database or engine.
use std::collections::HashMap;
use std::time::{Duration, Instant};

use entity::enums::SchedulerKind;
use entity::slots::ResourceSlots;
use uuid::Uuid;

use crate::scheduler::plan::{
    self, AgentState, Decision, Dense, DenseLimit, KeypairState, PendingSession, Quota, Snapshot,
    Strategy,
};

fn dense(cpu: u32, mem_gib: u32) -> Dense {
    Dense::from_slots(
        &ResourceSlots::parse_input([
            ("cpu", cpu.to_string().as_str()),
            ("mem", format!("{mem_gib}g").as_str()),
        ])
        .unwrap_or_default(),
    )
}

/// A deterministic synthetic cluster: `agents` agents, `pending` sessions from 500 keypairs.
fn synthetic_snapshot(kind: SchedulerKind, agents: usize, pending: usize) -> Snapshot {
    let mut keypairs = HashMap::new();
    for k in 0..500 {
        keypairs.insert(
            format!("AK{k:05}"),
            KeypairState {
                quota: Quota {
                    limit: DenseLimit::UNLIMITED,
                    using: Dense::default(),
                },
                max_concurrent: 0,
                concurrency: 0,
            },
        );
    }
    Snapshot {
        scheduler: kind,
        strategy: Strategy::Dispersed,
        num_retries_to_skip: 0,
        agents: (0..agents)
            .map(|i| AgentState {
                id: format!("i-agent-{i}"),
                available: dense(64, 256),
                occupied: Dense::default(),
                storage_hosts: None,
                routed: false,
            })
            .collect(),
        pending: (0..pending)
            .map(|i| PendingSession {
                id: Uuid::from_u128(i as u128),
                access_key: format!("AK{:05}", i % 500),
                group_id: Uuid::nil(),
                domain: "default".into(),
                requested: dense(1 + (i % 4) as u32, 1 + (i % 8) as u32),
                order: i as i64,
                retries: 0,
                storage_hosts: Vec::new(),
                spread: Vec::new(),
            })
            .collect(),
        keypairs,
        groups: HashMap::new(),
        domains: HashMap::new(),
    }
}

/// The least work any placement needs: first agent with room, no predicates, no ranking.
fn first_fit(snap: &Snapshot) -> usize {
    let mut free: Vec<[i64; plan::N]> = snap.agents.iter().map(|a| a.available.0).collect();
    let mut placed = 0;
    for s in &snap.pending {
        if let Some(f) = free
            .iter_mut()
            .find(|f| (0..plan::N).all(|i| f[i] >= s.requested.0[i]))
        {
            for (slot, want) in f.iter_mut().zip(s.requested.0.iter()) {
                *slot -= want;
            }
            placed += 1;
        }
    }
    placed
}

/// Best of `runs`: each run prepares its input untimed and returns what it counted and the
/// time of the measured part alone.
fn best_of<F: FnMut() -> (usize, Duration)>(runs: usize, mut f: F) -> (usize, Duration) {
    let mut best = Duration::MAX;
    let mut n = 0;
    for _ in 0..runs {
        let (count, t) = f();
        n = std::hint::black_box(count);
        best = best.min(t);
    }
    (n, best)
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let out = std::hint::black_box(f());
    (out, t.elapsed())
}

/// One pass of the planner on an index that already holds the agents (as the scheduler keeps
/// it between passes): placements made and the pass's time.
fn pass(snap: &Snapshot) -> (usize, Duration) {
    let mut index = plan::AgentIndex::new(snap.strategy);
    index.sync(&snap.agents);
    let (decisions, t) = timed(|| plan::plan_on(&mut index, snap));
    let placed = decisions
        .iter()
        .filter(|d| matches!(d, Decision::Place { .. }))
        .count();
    (placed, t)
}

/// Placements/s of the planner at each size beside the first-fit loop, then the pass that
/// places nothing at the largest size.
pub(super) fn run(sizes: &[(usize, usize)]) {
    for &(agents, pending) in sizes {
        println!(
            "scheduler: {agents} agents x {pending} pending sessions (best of 5 runs, one core)"
        );
        let fifo = synthetic_snapshot(SchedulerKind::Fifo, agents, pending);
        let (base_n, base_t) = best_of(5, || timed(|| first_fit(&fifo)));
        let base_rate = base_n as f64 / base_t.as_secs_f64();
        println!(
            "  baseline first-fit loop        {base_n:>7} placed in {:>8.1} ms = {base_rate:>12.0} placements/s",
            base_t.as_secs_f64() * 1e3
        );
        let (_, build) = best_of(5, || {
            let mut index = plan::AgentIndex::new(Strategy::Dispersed);
            timed(|| index.sync(&fifo.agents))
        });
        println!(
            "  indexing {agents} agents from nothing   {:>8.1} ms (once; later passes re-key only agents that changed)",
            build.as_secs_f64() * 1e3
        );
        let runs = [
            (SchedulerKind::Fifo, Strategy::Dispersed),
            (SchedulerKind::Lifo, Strategy::Dispersed),
            (SchedulerKind::Drf, Strategy::Dispersed),
            (SchedulerKind::Fifo, Strategy::Concentrated),
        ];
        for (kind, strategy) in runs {
            let mut snap = synthetic_snapshot(kind, agents, pending);
            snap.strategy = strategy;
            let (n, t) = best_of(5, || pass(&snap));
            let rate = n as f64 / t.as_secs_f64();
            println!(
                "  plan ({:<4} {:<12})      {n:>7} placed in {:>8.1} ms = {rate:>12.0} placements/s  ({:.2}x the baseline's time per placement)",
                kind.as_str(),
                match strategy {
                    Strategy::Dispersed => "dispersed",
                    Strategy::Concentrated => "concentrated",
                },
                t.as_secs_f64() * 1e3,
                base_rate / rate
            );
        }
    }
    let Some(&(agents, pending)) = sizes.iter().max() else {
        return;
    };
    println!(
        "scheduler: a pass that places nothing, {agents} agents x {pending} pending (best of 5)"
    );
    let mut by_keypair = synthetic_snapshot(SchedulerKind::Fifo, agents, pending);
    for k in by_keypair.keypairs.values_mut() {
        k.max_concurrent = 4;
        k.concurrency = 4;
    }
    let mut by_domain = synthetic_snapshot(SchedulerKind::Drf, agents, pending);
    let cpu_used_up = DenseLimit([Some(0), None, None, None]);
    by_domain.domains.insert(
        "default".into(),
        Quota {
            limit: cpu_used_up,
            using: Dense::default(),
        },
    );
    for (what, snap) in [
        ("every keypair at its session limit (FIFO)", &by_keypair),
        ("the domain's cpu limit used up (DRF)", &by_domain),
    ] {
        let (n, t) = best_of(5, || pass(snap));
        println!(
            "  {what:<44} {n} placed in {:>6.2} ms",
            t.as_secs_f64() * 1e3
        );
    }
}
