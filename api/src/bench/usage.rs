//! Statistics: a month of usage samples, then the month charts and totals over HTTP and
//! in-process.
use std::time::{Duration, Instant};

use anyhow::Context;
use uuid::Uuid;

use super::load::{Load, load};
use super::{bench_admin, bench_config, bench_login, percentile, seed_sessions};

/// Statistics: a month of 1-minute samples of `sessions` sessions stored the way the sampler
/// stores them (minute buckets for the kept last two days, hour and day buckets for the whole
/// month), then over real HTTP on loopback, one request at a time: month charts (the user who
/// owns them all, one session, the resource group) and the month's list of sessions by use,
/// against a plain `compute_session_list(limit: 20)` in the same run. `database_url` None =
/// SQLite.
pub(super) async fn run(
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
