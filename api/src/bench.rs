//! `bai bench`: measurements printed as ratios against a baseline run in the same process.
//!
//! - scheduler: placements/s of the real planner (1,000 × 10,000 and 10,000 × 100,000 agents ×
//!   pending sessions) against a minimal first-fit loop over the same data, and the pass that
//!   places nothing;
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
pub fn scheduler(sizes: &[(usize, usize)]) {
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

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// `docker run -d` of `image` (on `network` if given), removed again: its wall time.
async fn docker_run(image: &str, network: Option<&str>) -> anyhow::Result<Duration> {
    let mut args = vec!["run", "-d", "--cpus", "1", "--memory", "512m"];
    if let Some(n) = network {
        args.extend(["--network", n]);
    }
    args.extend([image, "sleep", "infinity"]);
    let t = Instant::now();
    let out = tokio::process::Command::new("docker")
        .args(&args)
        .output()
        .await?;
    let took = t.elapsed();
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
    Ok(took)
}

/// The bench's superadmin (`admin@bai.local`) and the default project it launches in.
async fn bench_admin(
    db: &sea_orm::DatabaseConnection,
) -> anyhow::Result<(entity::users::Model, entity::groups::Model)> {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let admin = entity::users::Entity::find()
        .filter(entity::users::Column::Email.eq("admin@bai.local"))
        .one(db)
        .await?
        .context("the bench superadmin")?;
    let group = entity::groups::Entity::find()
        .filter(entity::groups::Column::Name.eq("default"))
        .one(db)
        .await?
        .context("default project")?;
    Ok((admin, group))
}

/// A bench server's configuration on a scratch data directory (no engines), its directory
/// and the database's name; `database_url` None = SQLite.
fn bench_config(
    database_url: Option<String>,
) -> anyhow::Result<(crate::Config, std::path::PathBuf, &'static str)> {
    let dir = std::env::temp_dir().join(format!("bai-bench-{}", Uuid::new_v4().simple()));
    let db_name = if database_url.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let config = crate::Config {
        listen: "127.0.0.1:0".parse()?,
        data_dir: dir.clone(),
        database_url,
        admin_password: Some("Bench-pass-1".into()),
        admin_rate_limit: u32::MAX,
        docker_endpoints: Vec::new(),
        network_isolation: false,
        log: "warn".into(),
        ..Default::default()
    };
    Ok((config, dir, db_name))
}

/// The bench superadmin's bearer token from the server at `base`.
async fn bench_login(base: &str) -> anyhow::Result<String> {
    let login: serde_json::Value = reqwest::Client::new()
        .post(format!("{base}/graphql"))
        .json(&serde_json::json!({"query": "mutation { login(email: \"admin@bai.local\", password: \"Bench-pass-1\") { token } }"}))
        .send()
        .await?
        .json()
        .await?;
    let token = login["data"]["login"]["token"]
        .as_str()
        .context("bench login")?
        .to_string();
    Ok(token)
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
    let schema = crate::graphql::schema::build_schema(state.clone());
    let (admin, _) = bench_admin(&state.db).await?;
    let principal = Principal::User(std::sync::Arc::new(Caller::of_user(
        admin.clone(),
        admin.main_access_key.clone(),
        None,
    )));
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
    let (mut bai, mut docker, mut docker_net) = (Vec::new(), Vec::new(), Vec::new());
    let mut phases: [Vec<Duration>; 5] = Default::default();
    println!("launch: {rounds} rounds of `{image}` (warm), API call → RUNNING vs `docker run -d`");
    for round in 0..=rounds {
        let t = Instant::now();
        let created = gql(format!(r#"mutation {{ create_session(props: {{image: "{image}", resources: "{{\"cpu\": \"1\", \"mem\": \"512m\"}}"}}) {{ sessions {{ id }} }} }}"#)).await?;
        let api_t = t.elapsed();
        let id = created["create_session"]["sessions"][0]["id"]
            .as_str()
            .context("session id")?
            .to_string();
        let mut rx = state.shared.events.subscribe();
        loop {
            let s = crate::lookup::get::<entity::sessions::Entity>(
                &state.db,
                "session",
                Uuid::parse_str(&id)?,
            )
            .await
            .map_err(|e| anyhow::anyhow!("{}", e.describe()))?;
            if s.status == entity::enums::SessionStatus::Running {
                break;
            }
            anyhow::ensure!(
                !s.status.is_over(),
                "session ended: {:?}",
                s.status_info
            );
            // Drains what arrives within 50 ms; a quiet channel is fine.
            let _ = tokio::time::timeout(Duration::from_millis(50), rx.recv()).await;
        }
        let bai_t = t.elapsed();
        // Where the time went: the API call, the queue, the launch task, the engine.
        let sid = Uuid::parse_str(&id)?;
        let s = crate::lookup::get::<entity::sessions::Entity>(&state.db, "session", sid)
            .await
            .map_err(|e| anyhow::anyhow!("{}", e.describe()))?;
        let at = |status: &str| {
            s.status_history[status]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&chrono::Utc))
        };
        let gap = |a: Option<chrono::DateTime<chrono::Utc>>,
                   b: Option<chrono::DateTime<chrono::Utc>>| match (a, b) {
            (Some(a), Some(b)) => (b - a).to_std().unwrap_or_default(),
            _ => Duration::ZERO,
        };
        let engine = state.local.launch_phases.of(sid).unwrap_or_default();
        let preparing = gap(at("PREPARING"), at("RUNNING"));
        let round_phases = [
            api_t,
            gap(Some(s.created_at), at("SCHEDULED")),
            gap(at("SCHEDULED"), at("PREPARING")),
            engine,
            preparing.saturating_sub(engine),
        ];
        gql(format!(
            r#"mutation {{ destroy_session(id: "{id}") {{ ok }} }}"#
        ))
        .await?;
        // The plain baseline, and the same container on the session network (what bai asks
        // the engine for when network isolation is on: a user-defined bridge, embedded DNS).
        let docker_t = docker_run(image, None).await?;
        let docker_net_t = if state.config.network_isolation {
            Some(docker_run(image, Some(bai_engine::network::NETWORK)).await?)
        } else {
            None
        };
        if round > 0 {
            // Round 0 warms both paths up.
            bai.push(bai_t);
            docker.push(docker_t);
            docker_net.extend(docker_net_t);
            for (i, p) in round_phases.iter().enumerate() {
                phases[i].push(*p);
            }
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
    docker_net.sort();
    if !docker_net.is_empty() {
        println!(
            "  docker run -d --network {}   p50 {:>7.1} ms   p90 {:>7.1} ms",
            bai_engine::network::NETWORK,
            ms(percentile(&docker_net, 0.5)),
            ms(percentile(&docker_net, 0.9))
        );
    }
    println!(
        "  bai session     p50 {:>7.1} ms   p90 {:>7.1} ms",
        ms(percentile(&bai, 0.5)),
        ms(percentile(&bai, 0.9))
    );
    println!(
        "  ratio (p50)     {:.2}x docker",
        ms(percentile(&bai, 0.5)) / ms(percentile(&docker, 0.5))
    );
    if !docker_net.is_empty() {
        println!(
            "  ratio (p50)     {:.2}x docker on the same network",
            ms(percentile(&bai, 0.5)) / ms(percentile(&docker_net, 0.5))
        );
    }
    let names = [
        "API call (create_session answered)",
        "queued until SCHEDULED (scheduler)",
        "SCHEDULED until PREPARING (launch task)",
        "engine: container create + start",
        "rest of PREPARING to RUNNING (DB, image)",
    ];
    for (name, p) in names.iter().zip(phases.iter_mut()) {
        p.sort();
        println!("    {name:<42} p50 {:>7.1} ms", ms(percentile(p, 0.5)));
    }
    server.stop().await?;
    // A scratch directory of the bench; one left behind is harmless.
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}

/// One load run's figures.
struct Load {
    requests: usize,
    errors: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Load {
    fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
    fn line(&self, name: &str, baseline: Option<&Load>) -> String {
        let ms = |p: f64| percentile(&self.latencies, p).as_secs_f64() * 1e3;
        let ratio = baseline
            .map(|b| format!("  = {:.2} of the baseline's req/s", self.rate() / b.rate()))
            .unwrap_or_default();
        format!(
            "  {name:<44} {:>8.0} req/s  p50 {:>6.2} ms  p99 {:>6.2} ms  errors {}{ratio}",
            self.rate(),
            ms(0.5),
            ms(0.99),
            self.errors
        )
    }
}

/// `connections` HTTP/1.1 keep-alive connections, each sending `make()`'s requests one after
/// another for `seconds` (`make` is told which connection asks: 0, 1, …).
async fn load<F>(connections: usize, seconds: u64, make: F) -> Load
where
    F: Fn(&reqwest::Client, usize) -> reqwest::RequestBuilder + Send + Sync + 'static,
{
    let make = std::sync::Arc::new(make);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for n in 0..connections {
        let make = make.clone();
        tasks.push(tokio::spawn(async move {
            // One client per connection: its pool keeps that one connection alive.
            let client = reqwest::Client::builder()
                .http1_only()
                .pool_max_idle_per_host(1)
                .build()
                .unwrap_or_default();
            let (mut lat, mut errors) = (Vec::new(), 0usize);
            while Instant::now() < deadline {
                let t = Instant::now();
                match make(&client, n).send().await {
                    Ok(r) if r.status().is_success() => {
                        // The body is read only to finish the request; its content is not measured.
                        let _ = r.bytes().await;
                        lat.push(t.elapsed());
                    }
                    _ => errors += 1,
                }
            }
            (lat, errors)
        }));
    }
    let mut all = Load {
        requests: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        latencies: Vec::new(),
    };
    for t in tasks {
        if let Ok((lat, errors)) = t.await {
            all.latencies.extend(lat);
            all.errors += errors;
        }
    }
    all.elapsed = started.elapsed();
    all.requests = all.latencies.len();
    all.latencies.sort();
    all
}

/// The API under load, over real HTTP on loopback: a bearer-token and an HMAC-signed
/// `compute_session_list(limit: 20)` over `sessions` sessions, against anonymous
/// `{ __typename }` measured in the same run. `database_url` None = SQLite.
pub async fn api(
    seconds: u64,
    connections: usize,
    sessions: usize,
    database_url: Option<String>,
) -> anyhow::Result<()> {
    use sea_orm::EntityTrait;
    let (config, dir, db_name) = bench_config(database_url)?;
    let server = crate::start(config).await?;
    let state = server.state.clone();
    let base = format!("http://{}", server.addr);
    let (admin, group) = bench_admin(&state.db).await?;
    let ak = admin.main_access_key.clone().context("admin keypair")?;
    let kp = entity::keypairs::Entity::find_by_id(ak.clone())
        .one(&state.db)
        .await?
        .context("admin keypair")?;
    seed_sessions(
        &state.db,
        "bench",
        sessions,
        &admin,
        group.id,
        entity::enums::SessionStatus::Terminated,
    )
    .await?;
    let token = bench_login(&base).await?;
    let list = serde_json::json!({"query": "{ compute_session_list(limit: 20, offset: 0, status: \"TERMINATED\") { total_count items { id name status } } }"});
    let check: serde_json::Value = reqwest::Client::new()
        .post(format!("{base}/graphql"))
        .bearer_auth(&token)
        .json(&list)
        .send()
        .await?
        .json()
        .await?;
    anyhow::ensure!(
        check["data"]["compute_session_list"]["total_count"].as_u64() == Some(sessions as u64),
        "the list does not show the sessions: {check}"
    );
    println!(
        "api on {db_name}: {connections} HTTP/1.1 keep-alive connections, {seconds} s each, {sessions} sessions"
    );
    let url = format!("{base}/graphql");
    let anon = {
        let url = url.clone();
        load(connections, seconds, move |c, _| {
            c.post(&url)
                .json(&serde_json::json!({"query": "{ __typename }"}))
        })
        .await
    };
    println!("{}", anon.line("baseline: anonymous { __typename }", None));
    let bearer = {
        let (url, token, list) = (url.clone(), token.clone(), list.clone());
        load(connections, seconds, move |c, _| {
            c.post(&url).bearer_auth(&token).json(&list)
        })
        .await
    };
    println!(
        "{}",
        bearer.line("bearer compute_session_list(limit: 20)", Some(&anon))
    );
    let signed = {
        let admin_gql = format!("{base}/admin/gql");
        let host = server.addr.to_string();
        let secret = kp.secret_key.clone();
        let body = list.to_string();
        let last_micros = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
        load(connections, seconds, move |c, _| {
            // A fresh date (microseconds, never the same twice across the connections) per
            // request: every signature is new, as the official client's are; two requests
            // signed in the same microsecond would be one replayed signature.
            let wall = chrono::Utc::now().timestamp_micros();
            let micros = match last_micros.fetch_update(
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
                |last| Some(wall.max(last + 1)),
            ) {
                Ok(last) | Err(last) => wall.max(last + 1),
            };
            let now = chrono::DateTime::from_timestamp_micros(micros).unwrap_or_default();
            let raw_date = now.to_rfc3339_opts(chrono::SecondsFormat::Micros, false);
            let date = now.fixed_offset();
            let input = crate::auth::hmac::SignInput {
                method: "POST",
                path_and_query: "/admin/gql",
                raw_date: &raw_date,
                date,
                host: &host,
                content_type: "application/json",
                version: crate::API_VERSION,
            };
            let sig = crate::auth::hmac::sign(&secret, &input);
            c.post(&admin_gql)
                .header(
                    "authorization",
                    format!("BackendAI signMethod=HMAC-SHA256, credential={ak}:{sig}"),
                )
                .header("date", raw_date.clone())
                .header("x-backendai-version", crate::API_VERSION)
                .header("content-type", "application/json")
                .body(body.clone())
        })
        .await
    };
    println!(
        "{}",
        signed.line("HMAC-signed /admin/gql, the same list", Some(&anon))
    );
    server.stop().await?;
    // A scratch directory of the bench; one left behind is harmless.
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}

/// `count` session rows named `<prefix>-<i>` (see [`session_row`]).
async fn seed_sessions(
    db: &sea_orm::DatabaseConnection,
    prefix: &str,
    count: usize,
    owner: &entity::users::Model,
    group: Uuid,
    status: entity::enums::SessionStatus,
) -> anyhow::Result<()> {
    use sea_orm::ActiveModelTrait;
    for i in 0..count {
        session_row(&format!("{prefix}-{i}"), owner, group, status)
            .insert(db)
            .await?;
    }
    Ok(())
}

/// A session row owned by `owner` in project `group` (no kernel, no container: a list entry
/// or a queue entry).
fn session_row(
    name: &str,
    owner: &entity::users::Model,
    group: Uuid,
    status: entity::enums::SessionStatus,
) -> entity::sessions::ActiveModel {
    use entity::enums::{ClusterMode, SessionResult, SessionType};
    use sea_orm::Set;
    let now = chrono::Utc::now();
    let ended = status.is_over();
    entity::sessions::ActiveModel {
        id: Set(Uuid::new_v4()),
        name: Set(name.to_string()),
        session_type: Set(SessionType::Interactive),
        priority: Set(10),
        cluster_mode: Set(ClusterMode::SingleNode),
        cluster_size: Set(1),
        agent_ids: Set(Default::default()),
        scaling_group_name: Set(Some("default".into())),
        domain_name: Set(owner.domain_name.clone()),
        group_id: Set(group),
        user_uuid: Set(owner.uuid),
        access_key: Set(owner.main_access_key.clone().unwrap_or_default()),
        images: Set(serde_json::json!(["bai.local/stable/python:3.11-debian12"])),
        tag: Set(None),
        occupying_slots: Set(Default::default()),
        requested_slots: Set(entity::slots::ResourceSlots::parse_input([
            ("cpu", "1"),
            ("mem", "1g"),
        ])
        .unwrap_or_default()),
        vfolder_mounts: Set(Default::default()),
        environ: Set(serde_json::json!({})),
        resource_opts: Set(serde_json::json!({})),
        bootstrap_script: Set(None),
        startup_command: Set(None),
        batch_timeout: Set(None),
        created_at: Set(now),
        terminated_at: Set(ended.then_some(now)),
        starts_at: Set(None),
        status: Set(status),
        status_changed: Set(now),
        status_info: Set(ended.then(|| "user-requested".to_string())),
        status_data: Set(None),
        status_history: Set(serde_json::json!({})),
        callback_url: Set(None),
        result: Set(if ended {
            SessionResult::Success
        } else {
            SessionResult::Undefined
        }),
        num_queries: Set(0),
        last_stat: Set(None),
        last_activity: Set(None),
        utilization_idle_since: Set(None),
        utilization_sampled_at: Set(None),
        owner: Set(None),
    }
}

/// A `bai serve` child process on a fresh data directory (no engines), for measuring what the
/// server alone holds; killed with the value.
struct Child {
    proc: tokio::process::Child,
    base: String,
    dir: std::path::PathBuf,
    database_url: Option<String>,
}

/// A new, empty database on the PostgreSQL server of `url`; its URL.
pub async fn fresh_postgres(url: &str) -> anyhow::Result<String> {
    use sea_orm::ConnectionTrait;
    let name = format!("bai_bench_{}", Uuid::new_v4().simple());
    let admin = crate::db::connect_raw(url).await?;
    admin
        .execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await?;
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let server = base
        .rsplit_once('/')
        .map(|(server, _)| server)
        .context("a PostgreSQL URL ends with /database")?;
    Ok(format!("{server}/{name}{query}"))
}

impl Drop for Child {
    fn drop(&mut self) {
        // Clean-up on drop: a process already gone and a missing directory are both fine.
        let _ = self.proc.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Child {
    async fn start(
        database_url: Option<String>,
        extra_env: &[(&str, &str)],
    ) -> anyhow::Result<Child> {
        // The HTTP clients below use rustls with ring, as the server does.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let dir = std::env::temp_dir().join(format!("bai-bench-{}", Uuid::new_v4().simple()));
        let mut cmd = tokio::process::Command::new(std::env::current_exe()?);
        cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .arg("--data-dir")
            .arg(&dir)
            .env("BAI_ADMIN_PASSWORD", "Bench-pass-1")
            .env("BAI_DOCKER_ENDPOINTS", "")
            .env("BAI_NETWORK_ISOLATION", "false")
            .env("BAI_LOG", "warn")
            .env("BAI_WEB_DIR", dir.join("no-web"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        match &database_url {
            Some(url) => cmd.env("DATABASE_URL", url),
            None => cmd.env_remove("DATABASE_URL"),
        };
        let proc = cmd.spawn().context("starting bai serve")?;
        let base = format!("http://127.0.0.1:{port}");
        let child = Child {
            proc,
            base,
            dir,
            database_url,
        };
        for _ in 0..200 {
            if reqwest::get(format!("{}/health/live", child.base))
                .await
                .is_ok()
            {
                return Ok(child);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("bai serve did not come up")
    }

    fn rss_bytes(&self) -> u64 {
        let Some(pid) = self.proc.id() else { return 0 };
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
            .map(|kb| kb * 1024)
            .unwrap_or(0)
    }

    /// CPU time (user + system) the child has used so far.
    fn cpu(&self) -> Duration {
        let Some(pid) = self.proc.id() else {
            return Duration::ZERO;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Fields after the command name (which may hold spaces) start after the last ')'.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        // utime and stime are fields 14 and 15 (1-based) of the whole line: 12 and 13 here.
        Duration::from_millis((ticks(11) + ticks(12)) * 10)
    }

    async fn gql(&self, token: Option<&str>, query: &str) -> anyhow::Result<serde_json::Value> {
        let mut req = reqwest::Client::new()
            .post(format!("{}/graphql", self.base))
            .json(&serde_json::json!({ "query": query }));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let body: serde_json::Value = req.send().await?.json().await?;
        anyhow::ensure!(body.get("errors").is_none(), "GraphQL error: {body}");
        Ok(body["data"].clone())
    }

    async fn login(&self) -> anyhow::Result<String> {
        let data = self
            .gql(
                None,
                "mutation { login(email: \"admin@bai.local\", password: \"Bench-pass-1\") { token } }",
            )
            .await?;
        data["login"]["token"]
            .as_str()
            .map(str::to_string)
            .context("bench login")
    }

    async fn db(&self) -> anyhow::Result<sea_orm::DatabaseConnection> {
        match &self.database_url {
            Some(url) => crate::db::connect_raw(url).await,
            None => {
                crate::db::connect_raw(&format!(
                    "sqlite://{}?mode=rw",
                    self.dir.join("bai.db").display()
                ))
                .await
            }
        }
    }

    fn database(&self) -> &'static str {
        if self.database_url.is_some() {
            "PostgreSQL"
        } else {
            "SQLite"
        }
    }
}

/// One GraphQL-over-WebSocket subscriber; returns when subscribed, then waits for one event
/// and reports when it came.
async fn subscriber(
    url: String,
    token: String,
    ready: tokio::sync::mpsc::Sender<()>,
    got: tokio::sync::mpsc::Sender<Instant>,
) -> anyhow::Result<()> {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = url.into_client_request()?;
    req.headers_mut()
        .insert("sec-websocket-protocol", "graphql-transport-ws".parse()?);
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(0);
    let (mut ws, _) =
        tokio_tungstenite::connect_async_with_config(req, Some(config), false).await?;
    ws.send(Message::text(
        serde_json::json!({"type": "connection_init", "payload": {"token": token}}).to_string(),
    ))
    .await?;
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) if t.as_str().contains("connection_ack") => break,
            Some(Ok(_)) => continue,
            other => anyhow::bail!("no connection_ack: {other:?}"),
        }
    }
    ws.send(Message::text(
        serde_json::json!({"id": "1", "type": "subscribe", "payload": {"query": "subscription { session_status_changes { session_id event } }"}}).to_string(),
    ))
    .await?;
    // The bench may have stopped waiting; then nobody needs the signal.
    let _ = ready.send(()).await;
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) if t.as_str().contains("\"next\"") => {
                // The receiver ends with the bench; a late event is simply not counted.
                let _ = got.send(Instant::now()).await;
                // Stay connected until the bench ends (the sender side closes first).
                let _ = ws.next().await;
                return Ok(());
            }
            Some(Ok(Message::Ping(p))) => ws.send(Message::Pong(p)).await?,
            Some(Ok(_)) => continue,
            other => anyhow::bail!("subscription ended: {other:?}"),
        }
    }
}

/// Delivery of one session event to `n` subscribers of one topic (GraphQL subscriptions
/// over WebSockets to a `bai serve` child process), against delivery to one subscriber in
/// the same run; and the server's memory per subscriber.
pub async fn fanout(n: usize, database_url: Option<String>) -> anyhow::Result<()> {
    let limit = (n + 10).to_string();
    let child = Child::start(
        database_url,
        &[("BAI_WS_MAX_CONNECTIONS_PER_USER", limit.as_str())],
    )
    .await?;
    let token = child.login().await?;
    let db = child.db().await?;
    let (admin, group) = bench_admin(&db).await?;
    let url = format!("{}/graphql/ws", child.base.replace("http://", "ws://"));
    println!(
        "fanout on {}: one session event to N subscribers of one topic (a bai serve child process)",
        child.database()
    );
    let mut baseline = None;
    for count in [1, n] {
        let before = child.rss_bytes();
        let fan = fan_out(
            &child,
            std::slice::from_ref(&url),
            count,
            &token,
            &db,
            &admin,
            group.id,
            || child.rss_bytes().saturating_sub(before),
        )
        .await?;
        let line = format!(
            "  {count:>5} subscriber(s): {}  server memory {:>6.1} KiB per subscriber",
            fan.figures(count),
            fan.held as f64 / 1024.0 / count as f64
        );
        match baseline {
            None => {
                println!("{line}   (baseline)");
                baseline = Some(fan.p50);
            }
            Some(b) => println!(
                "{line}   p99 = {:.1}x the baseline's p50",
                fan.p99 / b.max(0.001)
            ),
        }
    }
    Ok(())
}

/// One fan-out measurement's figures.
struct Fan {
    delivered: usize,
    p50: f64,
    p99: f64,
    /// Server memory held by the subscribers (bytes), as the caller measured it.
    held: u64,
}

impl Fan {
    fn figures(&self, count: usize) -> String {
        format!(
            "delivered {:>5}/{count}  p50 {:>7.1} ms  p99 {:>7.1} ms",
            self.delivered, self.p50, self.p99
        )
    }
}

/// `count` subscribers, spread in turn over the servers at `urls` (GraphQL WebSocket URLs),
/// then one session event made through `trigger`: when each subscriber heard it.
#[allow(clippy::too_many_arguments)]
async fn fan_out(
    trigger: &Child,
    urls: &[String],
    count: usize,
    token: &str,
    db: &sea_orm::DatabaseConnection,
    admin: &entity::users::Model,
    group: Uuid,
    held: impl Fn() -> u64,
) -> anyhow::Result<Fan> {
    use sea_orm::ActiveModelTrait;
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(count.max(1));
    let (got_tx, mut got_rx) = tokio::sync::mpsc::channel(count.max(1));
    let mut tasks = Vec::new();
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(64));
    for i in 0..count {
        let (url, token, ready, got, gate) = (
            urls[i % urls.len()].clone(),
            token.to_string(),
            ready_tx.clone(),
            got_tx.clone(),
            gate.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let permit = gate.acquire_owned().await;
            let (ready2, mut wait) = tokio::sync::mpsc::channel(1);
            let run = subscriber(url, token, ready2, got);
            tokio::pin!(run);
            tokio::select! {
                r = &mut run => return r,
                _ = wait.recv() => {}
            }
            drop(permit);
            // The bench may have stopped waiting; then nobody needs the signal.
            let _ = ready.send(()).await;
            run.await
        }));
    }
    drop((ready_tx, got_tx));
    for _ in 0..count {
        ready_rx
            .recv()
            .await
            .context("a subscriber failed to subscribe")?;
    }
    // Subscriptions start as their messages are handled: give the last ones a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = held();
    let row = session_row(
        &format!("fanout-{}", Uuid::new_v4().simple()),
        admin,
        group,
        entity::enums::SessionStatus::Pending,
    )
    .insert(db)
    .await?;
    let t0 = Instant::now();
    trigger
        .gql(
            Some(token),
            &format!(
                "mutation {{ destroy_session(id: \"{}\") {{ ok }} }}",
                row.id
            ),
        )
        .await?;
    let mut lat = Vec::with_capacity(count);
    while lat.len() < count {
        match tokio::time::timeout(Duration::from_secs(30), got_rx.recv()).await {
            Ok(Some(at)) => lat.push(at.duration_since(t0)),
            _ => break,
        }
    }
    lat.sort();
    for t in tasks {
        t.abort();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ms = |p: f64| percentile(&lat, p).as_secs_f64() * 1e3;
    Ok(Fan {
        delivered: lat.len(),
        p50: ms(0.5),
        p99: ms(0.99),
        held,
    })
}

/// Several managers on one PostgreSQL database: the bearer session list with all
/// `connections` on one `bai serve` child process against split over two, and one event
/// fanned out to `subscribers` on one process against split over two (made through the
/// first), each beside the one-process figure of the same run; anonymous `{ __typename }`
/// on one process is the baseline of the list.
pub async fn managers(
    seconds: u64,
    connections: usize,
    sessions: usize,
    subscribers: usize,
    database_url: String,
) -> anyhow::Result<()> {
    let limit = (subscribers + 10).to_string();
    let env = [
        ("BAI_WS_MAX_CONNECTIONS_PER_USER", limit.as_str()),
        ("BAI_ADMIN_RATE_LIMIT", "4000000000"),
    ];
    let a = Child::start(Some(database_url.clone()), &env).await?;
    // The second process once the first has migrated and seeded the database.
    let b = Child::start(Some(database_url), &env).await?;
    let token = a.login().await?;
    let db = a.db().await?;
    let (admin, group) = bench_admin(&db).await?;
    seed_sessions(
        &db,
        "bench",
        sessions,
        &admin,
        group.id,
        entity::enums::SessionStatus::Terminated,
    )
    .await?;
    println!(
        "managers on PostgreSQL: two bai serve child processes on one database; {connections} keep-alive connections, {seconds} s each, {sessions} sessions"
    );
    let list = serde_json::json!({"query": "{ compute_session_list(limit: 20, offset: 0, status: \"TERMINATED\") { total_count items { id name status } } }"});
    let urls = [format!("{}/graphql", a.base), format!("{}/graphql", b.base)];
    let anon = {
        let url = urls[0].clone();
        load(connections, seconds, move |c, _| {
            c.post(&url)
                .json(&serde_json::json!({"query": "{ __typename }"}))
        })
        .await
    };
    println!(
        "{}",
        anon.line("baseline: anonymous { __typename }, one", None)
    );
    for split in [1usize, 2] {
        let (urls, token, list) = (urls.clone(), token.clone(), list.clone());
        let run = load(connections, seconds, move |c, n| {
            c.post(&urls[n % split]).bearer_auth(&token).json(&list)
        })
        .await;
        let name = if split == 1 {
            "bearer session list, one process"
        } else {
            "bearer session list, split over two"
        };
        println!("{}", run.line(name, Some(&anon)));
    }
    if subscribers > 0 {
        let ws = |c: &Child| format!("{}/graphql/ws", c.base.replace("http://", "ws://"));
        let one = fan_out(
            &a,
            &[ws(&a)],
            subscribers,
            &token,
            &db,
            &admin,
            group.id,
            || 0,
        )
        .await?;
        println!(
            "  fan-out to {subscribers:>5} subscribers, one process:     {}   (baseline)",
            one.figures(subscribers)
        );
        let two = fan_out(
            &a,
            &[ws(&a), ws(&b)],
            subscribers,
            &token,
            &db,
            &admin,
            group.id,
            || 0,
        )
        .await?;
        println!(
            "  fan-out to {subscribers:>5} subscribers, split over two: {}   p99 = {:.1}x the baseline's p99",
            two.figures(subscribers),
            two.p99 / one.p99.max(0.001)
        );
    }
    Ok(())
}

/// The server idle with `pending` sessions that cannot be placed (no agent), against the same
/// server with none: CPU used over `seconds` of idling, and `create_session` latency.
pub async fn queue(
    pending: usize,
    seconds: u64,
    database_url: Option<String>,
) -> anyhow::Result<()> {
    use sea_orm::{ActiveModelTrait, Set};
    let child = Child::start(database_url, &[]).await?;
    let token = child.login().await?;
    let db = child.db().await?;
    let (admin, group) = bench_admin(&db).await?;
    let image = "bai.local/bench/none:1";
    entity::images::ActiveModel {
        id: Set(Uuid::new_v4()),
        name: Set(image.into()),
        image: Set("bench/none".into()),
        tag: Set("1".into()),
        registry: Set("bai.local".into()),
        architecture: Set("x86_64".into()),
        config_digest: Set("sha256:00".into()),
        size_bytes: Set(0),
        is_local: Set(true),
        image_type: Set(entity::enums::ImageType::Compute),
        accelerators: Set(None),
        labels: Set(serde_json::json!({"ai.backend.kernelspec": "1"})),
        resources: Set(crate::agents::resources_from_labels(&HashMap::new())),
        created_at: Set(chrono::Utc::now()),
        // "Installed" on an agent that is not there: sessions are accepted, never placed.
        installed_agents: Set(vec!["i-absent".to_string()].into()),
        owner_id: Set(None),
    }
    .insert(&db)
    .await?;
    let create = |i: usize| {
        let (child, token) = (&child, token.clone());
        async move {
            let t = Instant::now();
            child
                .gql(
                    Some(&token),
                    &format!(r#"mutation {{ create_session(props: {{image: "{image}", name: "queue-{i:05}", resources: "{{\"cpu\": \"1\", \"mem\": \"2g\"}}"}}) {{ sessions {{ id }} }} }}"#),
                )
                .await?;
            Ok::<_, anyhow::Error>(t.elapsed())
        }
    };
    println!(
        "queue on {}: the server idle for {seconds} s, then 20 create_session calls",
        child.database()
    );
    let mut created = 0;
    for queued in [0, pending] {
        if queued > 0 {
            seed_sessions(
                &db,
                "queued",
                queued,
                &admin,
                group.id,
                entity::enums::SessionStatus::Pending,
            )
            .await?;
            // One create wakes the scheduler, which sees the whole queue once and records
            // each session's reason; the idle measurement starts when that is done.
            create(created).await?;
            created += 1;
            let settle = Instant::now();
            while settle.elapsed() < Duration::from_secs(180) {
                let (c, t) = (child.cpu(), Instant::now());
                tokio::time::sleep(Duration::from_secs(1)).await;
                if (child.cpu() - c).as_secs_f64() / t.elapsed().as_secs_f64() < 0.05 {
                    break;
                }
            }
            println!(
                "  (the first pass over {queued} new sessions took {:.1} s)",
                settle.elapsed().as_secs_f64()
            );
        }
        let (cpu0, t0) = (child.cpu(), Instant::now());
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        let share = (child.cpu() - cpu0).as_secs_f64() / t0.elapsed().as_secs_f64() * 100.0;
        let mut lat = Vec::new();
        for _ in 0..20 {
            lat.push(create(created).await?);
            created += 1;
        }
        lat.sort();
        let ms = |p: f64| percentile(&lat, p).as_secs_f64() * 1e3;
        println!(
            "  {queued:>6} pending: idle CPU {share:>5.2} % of a core   create p50 {:>6.1} ms  p90 {:>6.1} ms  server memory {:>5.0} MiB",
            ms(0.5),
            ms(0.9),
            child.rss_bytes() as f64 / 1024.0 / 1024.0
        );
    }
    Ok(())
}

/// Statistics: a month of 1-minute samples of `sessions` sessions stored the way the sampler
/// stores them (minute buckets for the kept last two days, hour and day buckets for the whole
/// month), then over real HTTP on loopback, one request at a time: month charts (the user who
/// owns them all, one session, the resource group) and the month's list of sessions by use,
/// against a plain `compute_session_list(limit: 20)` in the same run. `database_url` None =
/// SQLite.
pub async fn usage(
    sessions: usize,
    seconds: u64,
    database_url: Option<String>,
) -> anyhow::Result<()> {
    use crate::statistics::{Batch, Figures, HOUR, MINUTE, Retention, Sample};
    use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
    let (mut config, dir, db_name) = bench_config(database_url)?;
    config.usage_sample_secs = 0;
    let server = crate::start(config).await?;
    let state = server.state.clone();
    let base = format!("http://{}", server.addr);
    let (admin, group) = bench_admin(&state.db).await?;
    seed_sessions(
        &state.db,
        "usage",
        sessions,
        &admin,
        group.id,
        entity::enums::SessionStatus::Running,
    )
    .await?;
    let ids: Vec<Uuid> = entity::sessions::Entity::find()
        .filter(entity::sessions::Column::Name.starts_with("usage-"))
        .all(&state.db)
        .await?
        .into_iter()
        .map(|s| s.id)
        .collect();
    let keep = Retention::current(&state.db)
        .await
        .map_err(|e| anyhow::anyhow!(e.describe()))?;
    let now = chrono::Utc::now().timestamp();
    let month = 30 * crate::statistics::DAY;
    let started = Instant::now();
    let mut written = 0usize;
    // Sums add up: an hour of 1-minute samples is one sample standing for the hour in every
    // bucket of an hour or more, so hours whose minute buckets are gone by retention are
    // written as such; the kept ones minute by minute. One batch per hour of the month.
    let mut t = now - month;
    t -= t.rem_euclid(HOUR);
    while t < now {
        let mut b = Batch::default();
        let minutes = keep.kept(MINUTE, t + HOUR - MINUTE, now);
        let (step, secs) = if minutes {
            (MINUTE, 60.0)
        } else {
            (HOUR, 3600.0)
        };
        let mut at = t;
        while at < (t + HOUR).min(now) {
            for (i, id) in ids.iter().enumerate() {
                // Busy by day, idle by night, each session its own share of its 2 cores.
                let hour = (at / HOUR).rem_euclid(24) as f64;
                let busy = (0.2
                    + 0.8 * ((hour - 6.0) / 24.0 * std::f64::consts::TAU).sin().max(0.0))
                    * (0.3 + (i % 7) as f64 / 10.0);
                b.add(&Sample {
                    session: *id,
                    user: admin.uuid,
                    project: group.id,
                    domain: admin.domain_name.clone(),
                    resource_group: Some("default".into()),
                    owner_governed: false,
                    at,
                    figures: Figures::over(
                        secs,
                        Figures {
                            secs: 1.0,
                            cpu_alloc: 2.0,
                            cpu_used: 2.0 * busy,
                            mem_alloc: 4.0 * 1024.0 * 1024.0 * 1024.0,
                            mem_used: 4.0 * 1024.0 * 1024.0 * 1024.0 * busy,
                            gpu_alloc: 0.0,
                            gpu_used: 0.0,
                        },
                    ),
                });
            }
            at += step;
        }
        b.retain(|res, ts| keep.kept(res, ts, now));
        written += crate::statistics::write(&state, &b)
            .await
            .map_err(|e| anyhow::anyhow!(e.describe()))?;
        t += HOUR;
    }
    let rows = entity::usage_series::Entity::find()
        .count(&state.db)
        .await?;
    println!(
        "usage on {db_name}: a month of 1-minute samples of {sessions} sessions: {rows} stored buckets ({written} upserts in {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    let token = bench_login(&base).await?;
    let url = format!("{base}/graphql");
    let points = "points { ts used_secs usage { sessions cpu_allocated cpu_used mem_allocated mem_used gpu_allocated gpu_used } }";
    let first = ids.first().context("no sessions")?;
    let queries = [
        (
            "baseline: compute_session_list(limit: 20)".to_string(),
            "{ compute_session_list(limit: 20, offset: 0) { total_count items { id name status } } }".to_string(),
        ),
        (
            format!("month chart of a user with {sessions} sessions"),
            format!("{{ usage_series(scope: USER, period: MONTH) {{ resolution_secs {points} }} }}"),
        ),
        (
            "month chart of one session".to_string(),
            format!("{{ usage_series(scope: SESSION, id: \"{first}\", period: MONTH) {{ resolution_secs {points} }} }}"),
        ),
        (
            "month chart of the resource group".to_string(),
            format!("{{ usage_series(scope: RESOURCE_GROUP, id: \"default\", period: MONTH) {{ resolution_secs {points} }} }}"),
        ),
        (
            "day chart (1-minute buckets) of the user".to_string(),
            format!("{{ usage_series(scope: USER, period: DAY) {{ resolution_secs {points} }} }}"),
        ),
        (
            "month's top 50 sessions (usage_totals)".to_string(),
            "{ usage_totals(scope: SESSION, period: MONTH) { items { id label used_secs } } }".to_string(),
        ),
    ];
    for (_, q) in &queries {
        let check: serde_json::Value = reqwest::Client::new()
            .post(&url)
            .bearer_auth(&token)
            .json(&serde_json::json!({"query": q}))
            .send()
            .await?
            .json()
            .await?;
        anyhow::ensure!(check.get("errors").is_none(), "{q}: {check}");
    }
    println!("  one connection, {seconds} s each");
    let mut baseline: Option<Load> = None;
    for (name, q) in queries {
        let (url, token) = (url.clone(), token.clone());
        let body = serde_json::json!({ "query": q });
        let l = load(1, seconds, move |c, _| {
            c.post(&url).bearer_auth(&token).json(&body)
        })
        .await;
        println!("{}", l.line(&name, baseline.as_ref()));
        if baseline.is_none() {
            baseline = Some(l);
        }
    }
    // The same month chart without HTTP and GraphQL: what the database and the sums take.
    let caller = crate::auth::Caller::of_user(admin.clone(), admin.main_access_key.clone(), None);
    let mut lat = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        let t = Instant::now();
        let s = crate::statistics::series(
            &state,
            &caller,
            crate::statistics::Scope::User,
            None,
            crate::statistics::Period::Month,
        )
        .await
        .map_err(|e| anyhow::anyhow!(e.describe()))?;
        lat.push(t.elapsed());
        anyhow::ensure!(!s.points.is_empty(), "an empty month");
    }
    lat.sort();
    println!(
        "  {:<44} p50 {:>6.2} ms  p99 {:>6.2} ms",
        "in-process statistics::series (no HTTP, GraphQL)",
        percentile(&lat, 0.5).as_secs_f64() * 1e3,
        percentile(&lat, 0.99).as_secs_f64() * 1e3
    );
    server.stop().await?;
    // A scratch directory of the bench; one left behind is harmless.
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}
