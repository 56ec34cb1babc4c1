//! Launch: API call → RUNNING for a warm image, against `docker run -d` of the same image,
//! interleaved in one run (needs Docker and the image).
use std::time::{Duration, Instant};

use anyhow::Context;
use uuid::Uuid;

use super::{bench_admin, percentile};

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

/// Launch latency through the GraphQL API (executed in-process, no HTTP hop) against
/// `docker run -d`, interleaved.
pub(super) async fn run(rounds: usize, image: &str) -> anyhow::Result<()> {
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
            anyhow::ensure!(!s.status.is_over(), "session ended: {:?}", s.status_info);
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
