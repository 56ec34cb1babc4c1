//! `bai bench`: measurements printed as ratios against a baseline run in the same process,
//! one benchmark a file:
//!
//! - scheduler: placements/s of the real planner against a first-fit loop, and the pass that
//!   places nothing;
//! - launch: API call → RUNNING for a warm image, against `docker run -d` of the same image,
//!   interleaved in one run;
//! - api: the session list over HTTP (bearer and HMAC-signed) against `{ __typename }`;
//! - queue: the server idle with sessions it cannot place, against none;
//! - fanout: one session event to N subscribers against one;
//! - usage: the Statistics charts over a month of samples against the session list;
//! - managers: two `bai serve` processes on one PostgreSQL database against one;
//! - serving: requests through a model endpoint against straight to its replica, and scaling
//!   an endpoint from 1 to 4 replicas against starting 4 sessions by hand.
//!
//! Here: the command's options and its order of runs ([`run`]), and what several benchmarks
//! set up alike (the bench server's configuration, its superadmin and login, session rows, a
//! fresh PostgreSQL database); `child.rs` starts `bai serve` processes, `load.rs` is the HTTP
//! load generator.
use std::time::Duration;

use anyhow::Context;
use uuid::Uuid;

mod api;
mod child;
mod fanout;
mod launch;
mod load;
mod managers;
mod queue;
mod scheduler;
mod serving;
mod usage;

/// The options of `bai bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Launch rounds (0 = skip the launch benchmark, which needs Docker and the images).
    #[arg(long, default_value_t = 10)]
    pub launch_rounds: usize,
    #[arg(long, default_value = "bai.local/stable/python:3.11-debian12")]
    pub image: String,
    /// Agents of the scheduler benchmark (with --pending: that size alone; without: 1,000 ×
    /// 10,000 and 10,000 × 100,000).
    #[arg(long, requires = "pending")]
    pub agents: Option<usize>,
    /// Pending sessions of the scheduler benchmark.
    #[arg(long, requires = "agents")]
    pub pending: Option<usize>,
    /// Seconds per API load run (0 = skip the API benchmark).
    #[arg(long, default_value_t = 10)]
    pub api_seconds: u64,
    /// Keep-alive connections of the API load generator.
    #[arg(long, default_value_t = 16)]
    pub api_connections: usize,
    /// Sessions in the database the API lists from.
    #[arg(long, default_value_t = 10000)]
    pub api_sessions: usize,
    /// Also run the api, queue and fanout benchmarks on PostgreSQL, and the two-manager
    /// figures (two processes on one database): a server URL; each run creates a fresh
    /// database there.
    #[arg(long, env = "BAI_BENCH_DATABASE_URL")]
    pub api_postgres: Option<String>,
    /// Subscribers of the fan-out benchmark (0 = skip).
    #[arg(long, default_value_t = 5000)]
    pub fanout: usize,
    /// Pending sessions of the idle-queue benchmark (0 = skip).
    #[arg(long, default_value_t = 10000)]
    pub queue: usize,
    /// Seconds the idle-queue benchmark idles per measurement.
    #[arg(long, default_value_t = 10)]
    pub queue_seconds: u64,
    /// Sessions of the Statistics benchmark: a month of their 1-minute samples (0 = skip).
    #[arg(long, default_value_t = 1000)]
    pub usage_sessions: usize,
    /// Seconds per model-serving load run (0 = skip the serving benchmark, which needs Docker
    /// and the image).
    #[arg(long, default_value_t = 10)]
    pub serving_seconds: u64,
    /// Keep-alive connections of the serving benchmark.
    #[arg(long, default_value_t = 4)]
    pub serving_connections: usize,
}

/// Runs the benchmarks `args` selects: the API, queue, fan-out and Statistics ones on SQLite
/// (and on PostgreSQL when a server is given), then two managers, the scheduler and launches.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let Args {
        launch_rounds,
        image,
        agents,
        pending,
        api_seconds,
        api_connections,
        api_sessions,
        api_postgres,
        fanout,
        queue,
        queue_seconds,
        usage_sessions,
        serving_seconds,
        serving_connections,
    } = args;
    // SQLite always; PostgreSQL too when a server is given (a fresh database each).
    let mut databases = vec![None];
    if api_postgres.is_some() {
        databases.push(api_postgres.clone());
    }
    for db in &databases {
        let fresh = || async {
            match db {
                Some(url) => fresh_postgres(url).await.map(Some),
                None => Ok(None),
            }
        };
        if api_seconds > 0 {
            api::run(api_seconds, api_connections, api_sessions, fresh().await?).await?;
        }
        if queue > 0 {
            queue::run(queue, queue_seconds, fresh().await?).await?;
        }
        if fanout > 0 {
            fanout::run(fanout, fresh().await?).await?;
        }
        if usage_sessions > 0 {
            usage::run(usage_sessions, 5, fresh().await?).await?;
        }
    }
    // Several managers: two processes on one PostgreSQL database.
    if let Some(url) = &api_postgres
        && api_seconds > 0
    {
        let fresh = fresh_postgres(url).await?;
        managers::run(api_seconds, api_connections, api_sessions, fanout, fresh).await?;
    }
    match (agents, pending) {
        (Some(a), Some(p)) => scheduler::run(&[(a, p)]),
        _ => scheduler::run(&[(1_000, 10_000), (10_000, 100_000)]),
    }
    if launch_rounds > 0 {
        launch::run(launch_rounds, &image).await?;
    }
    if serving_seconds > 0 {
        serving::run(serving_seconds, serving_connections, &image).await?;
    }
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
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

/// A new, empty database on the PostgreSQL server of `url`; its URL.
async fn fresh_postgres(url: &str) -> anyhow::Result<String> {
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
