//! Fan-out: one session event to N GraphQL subscribers over WebSockets, against one
//! subscriber, and the server's memory per subscriber.
use std::time::{Duration, Instant};

use anyhow::Context;
use uuid::Uuid;

use super::child::Child;
use super::{bench_admin, percentile, session_row};

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
pub(super) async fn run(n: usize, database_url: Option<String>) -> anyhow::Result<()> {
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
pub(super) struct Fan {
    delivered: usize,
    p50: f64,
    pub(super) p99: f64,
    /// Server memory held by the subscribers (bytes), as the caller measured it.
    held: u64,
}

impl Fan {
    pub(super) fn figures(&self, count: usize) -> String {
        format!(
            "delivered {:>5}/{count}  p50 {:>7.1} ms  p99 {:>7.1} ms",
            self.delivered, self.p50, self.p99
        )
    }
}

/// `count` subscribers, spread in turn over the servers at `urls` (GraphQL WebSocket URLs),
/// then one session event made through `trigger`: when each subscriber heard it.
#[allow(clippy::too_many_arguments)]
pub(super) async fn fan_out(
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
