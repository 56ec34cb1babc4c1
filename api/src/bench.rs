//! `bai bench`: measurements printed as ratios against a baseline run in the same process.
//!
//! - scheduler: placements/s of the real planner (1,000 agents, 10,000 pending sessions)
//!   against a minimal first-fit loop over the same data;
//! - launch: API call → RUNNING for a warm image, against `docker run -d` of the same image,
//!   interleaved in one run.
use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context;
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
pub fn synthetic_snapshot(kind: SchedulerKind, agents: usize, pending: usize) -> Snapshot {
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

fn best_of<F: FnMut() -> usize>(runs: usize, mut f: F) -> (usize, Duration) {
    let mut best = Duration::MAX;
    let mut n = 0;
    for _ in 0..runs {
        let t = Instant::now();
        n = std::hint::black_box(f());
        best = best.min(t.elapsed());
    }
    (n, best)
}

pub fn scheduler(agents: usize, pending: usize) {
    println!("scheduler: {agents} agents, {pending} pending sessions (best of 5 runs, one core)");
    let (base_n, base_t) = best_of(5, || {
        first_fit(&synthetic_snapshot(SchedulerKind::Fifo, agents, pending))
    });
    let base_rate = base_n as f64 / base_t.as_secs_f64();
    println!(
        "  baseline first-fit loop     {base_n:>6} placed in {:>8.1} ms = {base_rate:>12.0} placements/s",
        base_t.as_secs_f64() * 1e3
    );
    for kind in [SchedulerKind::Fifo, SchedulerKind::Lifo, SchedulerKind::Drf] {
        let (n, t) = best_of(5, || {
            plan::plan(synthetic_snapshot(kind, agents, pending))
                .iter()
                .filter(|d| matches!(d, Decision::Place { .. }))
                .count()
        });
        let rate = n as f64 / t.as_secs_f64();
        println!(
            "  plan ({:<4})                 {n:>6} placed in {:>8.1} ms = {rate:>12.0} placements/s  ({:.2}x the baseline's time per placement)",
            kind.as_str(),
            t.as_secs_f64() * 1e3,
            base_rate / rate
        );
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Launch latency through the GraphQL API (executed in-process, no HTTP hop) against
/// `docker run -d`, interleaved.
pub async fn launch(rounds: usize, image: &str) -> anyhow::Result<()> {
    use crate::auth::{Caller, Principal};
    let dir = std::env::temp_dir().join(format!("bai-bench-{}", Uuid::new_v4().simple()));
    let config = crate::Config {
        listen: "127.0.0.1:0".parse()?,
        data_dir: dir.clone(),
        admin_password: Some("Bench-pass-1".into()),
        log: "warn".into(),
        ..Default::default()
    };
    let server = crate::start(config).await?;
    let state = server.state.clone();
    let schema = crate::graphql::build_schema(state.clone());
    let admin = {
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
        entity::users::Entity::find()
            .filter(entity::users::Column::Email.eq("admin@bai.local"))
            .one(&state.db)
            .await?
            .context("the bench superadmin")?
    };
    let principal = Principal::User(std::sync::Arc::new(Caller {
        uuid: admin.uuid,
        email: admin.email.clone(),
        domain_name: admin.domain_name.clone(),
        role: admin.role,
        access_key: admin.main_access_key.clone(),
        login_session: None,
    }));
    let gql = |q: String| {
        let schema = schema.clone();
        let principal = principal.clone();
        async move {
            let resp = schema
                .execute(async_graphql::Request::new(q).data(principal))
                .await;
            anyhow::ensure!(resp.errors.is_empty(), "GraphQL error: {:?}", resp.errors);
            Ok::<_, anyhow::Error>(resp.data.into_json()?)
        }
    };
    let (mut bai, mut docker) = (Vec::new(), Vec::new());
    println!("launch: {rounds} rounds of `{image}` (warm), API call → RUNNING vs `docker run -d`");
    for round in 0..=rounds {
        let t = Instant::now();
        let created = gql(format!(r#"mutation {{ create_session(props: {{image: "{image}", resources: "{{\"cpu\": \"1\", \"mem\": \"512m\"}}"}}) {{ sessions {{ id }} }} }}"#)).await?;
        let id = created["create_session"]["sessions"][0]["id"]
            .as_str()
            .context("session id")?
            .to_string();
        let mut rx = state.events.subscribe();
        loop {
            let s = crate::lookup::get::<entity::sessions::Entity>(
                &state.db,
                "session",
                Uuid::parse_str(&id)?,
            )
            .await
            .map_err(|e| anyhow::anyhow!("{}", e.message))?;
            if s.status == entity::enums::SessionStatus::Running {
                break;
            }
            anyhow::ensure!(
                !s.status.is_terminal() && s.status != entity::enums::SessionStatus::Error,
                "session ended: {:?}",
                s.status_info
            );
            let _ = tokio::time::timeout(Duration::from_millis(50), rx.recv()).await;
        }
        let bai_t = t.elapsed();
        gql(format!(
            r#"mutation {{ destroy_session(id: "{id}") {{ ok }} }}"#
        ))
        .await?;
        let t = Instant::now();
        let out = tokio::process::Command::new("docker")
            .args([
                "run", "-d", "--cpus", "1", "--memory", "512m", image, "sleep", "infinity",
            ])
            .output()
            .await?;
        let docker_t = t.elapsed();
        anyhow::ensure!(
            out.status.success(),
            "docker run failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let cid = String::from_utf8_lossy(&out.stdout).trim().to_string();
        tokio::process::Command::new("docker")
            .args(["rm", "-f", &cid])
            .output()
            .await?;
        if round > 0 {
            // Round 0 warms both paths up.
            bai.push(bai_t);
            docker.push(docker_t);
        }
    }
    bai.sort();
    docker.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "  docker run -d   p50 {:>7.1} ms   p90 {:>7.1} ms",
        ms(percentile(&docker, 0.5)),
        ms(percentile(&docker, 0.9))
    );
    println!(
        "  bai session     p50 {:>7.1} ms   p90 {:>7.1} ms",
        ms(percentile(&bai, 0.5)),
        ms(percentile(&bai, 0.9))
    );
    println!(
        "  ratio (p50)     {:.2}x docker",
        ms(percentile(&bai, 0.5)) / ms(percentile(&docker, 0.5))
    );
    server.stop().await?;
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}
