//! The queue: the server idle with sessions that cannot be placed, against the same server
//! with none (CPU while idle, `create_session` latency).
use std::collections::HashMap;
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::child::Child;
use super::{bench_admin, percentile, seed_sessions};

/// The server idle with `pending` sessions that cannot be placed (no agent), against the same
/// server with none: CPU used over `seconds` of idling, and `create_session` latency.
pub(super) async fn run(
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
        resources: Set(crate::images::local::resources_from_labels(&HashMap::new())),
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
