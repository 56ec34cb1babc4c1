//! Model serving: requests through an endpoint's URL (bai's proxy, a token checked on each)
//! against the same requests straight to the replica's container, for small JSON answers and
//! for a streamed one; and scaling an endpoint from 1 to 4 healthy replicas against starting
//! 4 sessions by hand (needs Docker and the image).
use std::time::{Duration, Instant};

use anyhow::Context;
use uuid::Uuid;

use super::bench_admin;
use super::load::load;

/// The model: a JSON answer on `POST /predict`, ten server-sent events on `GET /stream`.
const MODEL: &str = r#"import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # One write per answer, sent at once (no 40 ms delayed-ACK stall per request).
    wbufsize = -1
    disable_nagle_algorithm = True
    def log_message(self, *a):
        pass
    def send(self, body, kind):
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.path == "/stream":
            self.send(b"".join(b"data: token-%d\n\n" % i for i in range(10)), "text/event-stream")
        else:
            self.send(b'{"ok": true}', "application/json")
    def do_POST(self):
        x = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))["x"]
        self.send(json.dumps({"y": [3 * v + 2 for v in x]}).encode(), "application/json")

ThreadingHTTPServer(("0.0.0.0", 8000), H).serve_forever()
"#;

const DEFINITION: &str = "models:\n  - name: bench\n    model_path: /models\n    service:\n      start_command: [python3, serve.py]\n      port: 8000\n      health_check: {path: /health, interval: 0.5}\n";

fn fail(e: crate::error::ApiError) -> anyhow::Error {
    anyhow::anyhow!("{}", e.describe())
}

/// Waits until `n` replicas of `endpoint` are healthy in this manager's routing table.
async fn healthy(state: &crate::state::AppState, endpoint: Uuid, n: usize) -> anyhow::Result<()> {
    let until = Instant::now() + Duration::from_secs(180);
    loop {
        if state
            .local
            .serving
            .get(endpoint)
            .is_some_and(|s| s.healthy.len() >= n)
        {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < until,
            "{n} healthy replicas within 3 minutes"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(super) async fn run(seconds: u64, connections: usize, image: &str) -> anyhow::Result<()> {
    use crate::auth::Caller;
    let dir = std::env::temp_dir().join(format!("bai-bench-{}", Uuid::new_v4().simple()));
    let config = crate::Config {
        listen: "127.0.0.1:0".parse()?,
        data_dir: dir.clone(),
        admin_password: Some("Bench-pass-1".into()),
        log: "warn".into(),
        agent_cpu_overcommit: 8,
        ..Default::default()
    };
    let server = crate::start(config).await?;
    let state = server.state.clone();
    let (admin, _) = bench_admin(&state.db).await?;
    let caller = Caller::of_user(admin.clone(), admin.main_access_key.clone(), None);
    // A model folder with the model and its definition.
    let folder = crate::storage::create(
        &state,
        &caller,
        crate::storage::NewFolder {
            name: "bench-model".into(),
            host: None,
            group: None,
            permission: entity::enums::VFolderPermission::ReadWrite,
            usage_mode: entity::enums::VFolderUsageMode::Model,
            cloneable: false,
        },
    )
    .await
    .map_err(fail)?;
    let root = crate::storage::folder_root(&state.config, &folder).map_err(fail)?;
    std::fs::write(root.join("serve.py"), MODEL)?;
    std::fs::write(root.join("model-definition.yaml"), DEFINITION)?;
    let resources = [("cpu", "1"), ("mem", "512m")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let e = crate::serving::create(
        &state,
        &caller,
        crate::serving::NewService {
            name: "bench-service".into(),
            replicas: 1,
            image: image.into(),
            runtime_variant: "custom".into(),
            group: "default".into(),
            cluster_size: 1,
            cluster_mode: "single-node".into(),
            model: folder.id.to_string(),
            model_mount_destination: "/models".into(),
            resources,
            ..Default::default()
        },
    )
    .await
    .map_err(fail)?;
    healthy(&state, e.id, 1).await?;
    let served = state
        .local
        .serving
        .get(e.id)
        .context("the endpoint served")?;
    let direct = format!("http://{}", served.healthy[0].addr);
    let url = crate::serving::url_of(&state, Some(i32::from(served.port))).context("its URL")?;
    let until = state.clock.now().timestamp() + 3600;
    let (_, token) = crate::serving::issue_token(&state, &caller, e.id, until)
        .await
        .map_err(fail)?;
    println!(
        "serving: {seconds} s per run, {connections} connections, one replica of `{image}` (Python's HTTP server)"
    );
    for (what, path, post) in [
        ("small JSON (POST /predict)", "/predict", true),
        ("streamed answer (GET /stream)", "/stream", false),
    ] {
        let ask = move |base: String, token: Option<String>| {
            move |c: &reqwest::Client, _: usize| {
                let mut r = if post {
                    c.post(format!("{base}{path}"))
                        .json(&serde_json::json!({"x": [1, 2, 3]}))
                } else {
                    c.get(format!("{base}{path}"))
                };
                if let Some(t) = &token {
                    r = r.bearer_auth(t);
                }
                r
            }
        };
        let straight = load(connections, seconds, ask(direct.clone(), None)).await;
        let through = load(connections, seconds, ask(url.clone(), Some(token.clone()))).await;
        println!("  {what}");
        println!(
            "{}",
            straight.line("straight to the replica (baseline)", None)
        );
        println!(
            "{}",
            through.line("through the endpoint URL, with a token", Some(&straight))
        );
        println!(
            "    added latency: p50 {:+.2} ms, p99 {:+.2} ms",
            (through.p(0.5) - straight.p(0.5)) * 1e3,
            (through.p(0.99) - straight.p(0.99)) * 1e3
        );
    }
    // Scaling from 1 to 4, against 4 sessions started by hand.
    let t = Instant::now();
    crate::serving::scale(&state, &caller, e.id, 4)
        .await
        .map_err(fail)?;
    healthy(&state, e.id, 4).await?;
    let scaled = t.elapsed();
    crate::serving::delete(&state, &caller, e.id)
        .await
        .map_err(fail)?;
    let t = Instant::now();
    let made = crate::sessions::create(
        &state,
        &caller,
        crate::sessions::CreateRequest {
            image: image.into(),
            name: None,
            session_type: entity::enums::SessionType::Interactive,
            group: None,
            scaling_group: None,
            preset: None,
            resources: [("cpu", "1"), ("mem", "512m")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            shmem: None,
            environ: Default::default(),
            startup_command: None,
            batch_timeout: None,
            count: 4,
            tag: None,
            mounts: Vec::new(),
            mount_map: Default::default(),
            dependencies: Vec::new(),
            bootstrap_script: None,
            cluster_size: 1,
            cluster_mode: entity::enums::ClusterMode::SingleNode,
            model: None,
        },
    )
    .await
    .map_err(fail)?;
    let until = Instant::now() + Duration::from_secs(180);
    for s in &made {
        loop {
            let now = crate::lookup::get::<entity::sessions::Entity>(&state.db, "session", s.id)
                .await
                .map_err(fail)?;
            if now.status == entity::enums::SessionStatus::Running {
                break;
            }
            anyhow::ensure!(
                !now.status.is_over() && Instant::now() < until,
                "a session by hand did not run"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let by_hand = t.elapsed();
    println!(
        "  scale 1 → 4 replicas until 4 are healthy   {:>7.0} ms  = {:.2}x starting 4 sessions by hand ({:.0} ms, until RUNNING)",
        scaled.as_secs_f64() * 1e3,
        scaled.as_secs_f64() / by_hand.as_secs_f64(),
        by_hand.as_secs_f64() * 1e3
    );
    for s in made {
        let _ = crate::sessions::terminate(&state, s.id, "bench").await;
    }
    server.stop().await?;
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}
