//! The HTTP load generator of the API benchmarks: keep-alive connections sending requests
//! one after another, and the figures of a run.
use std::time::{Duration, Instant};

use super::percentile;

/// One load run's figures.
pub(super) struct Load {
    requests: usize,
    errors: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Load {
    /// The latency at `p` (0 to 1), seconds.
    pub(super) fn p(&self, p: f64) -> f64 {
        percentile(&self.latencies, p).as_secs_f64()
    }
    /// Requests answered (errors included).
    pub(super) fn requests(&self) -> usize {
        self.requests
    }
    fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
    pub(super) fn line(&self, name: &str, baseline: Option<&Load>) -> String {
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
pub(super) async fn load<F>(connections: usize, seconds: u64, make: F) -> Load
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
