//! Several managers: `bai serve` processes on one PostgreSQL database serve one product. Two in
//! this test process (each its own state, bus, leases and caches), and two real `bai serve`
//! processes of which the leader is killed with SIGKILL during launches.
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::gql;
use crate::support::*;

async fn role(app: &TestApp) -> String {
    app.readyz().await["manager"]["role"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_managers_serve_one_product() {
    let started = Instant::now();
    require_docker();
    let a = spawn(Db::Postgres).await;
    let b = a.beside().await;
    // One leads (the first one up), the other follows; both say so.
    assert_eq!(role(&a).await, "leader");
    assert_eq!(role(&b).await, "follower");

    // Logged in through A is logged in on B.
    let user = a.user("across@x.org", "user", "default").await;
    let me = b
        .op_ok::<gql::ops::WhoAmI>(Some(&user), Default::default())
        .await;
    assert_eq!(me["whoami"]["email"], "across@x.org");

    // Created through B (the follower), placed by A's scheduler, seen live through B, each
    // status once.
    let mut events = subscribe_op::<gql::SessionStatusChanges>(&b, &user, Default::default()).await;
    let body = create_session(
        &b,
        &user,
        json!({"image": PYTHON, "name": "across", "resources": "{\"cpu\": \"1\", \"mem\": \"320m\"}"}),
    )
    .await;
    let id = session_ids(&body)[0].clone();
    let mut seen: Vec<String> = Vec::new();
    while !seen.iter().any(|e| e == "session_started") {
        let msg = next_json(&mut events).await;
        let e = &msg["payload"]["data"]["session_status_changes"];
        assert_eq!(e["name"], "across", "{msg}");
        seen.push(e["event"].as_str().unwrap_or_default().to_string());
    }
    let mut once = seen.clone();
    once.dedup();
    assert_eq!(once, seen, "an event delivered twice: {seen:?}");
    for e in ["session_scheduled", "session_preparing", "session_started"] {
        assert!(seen.iter().any(|s| s == e), "{e} missing from {seen:?}");
    }
    // A launched it (the leader); code runs through B all the same.
    let (out, _err, exit) =
        crate::sessions::run_to_end(&b, &user, &id, "query", "print(6 * 7)", json!({})).await;
    assert_eq!((out.trim(), exit), ("42", 0));

    // Backend.AI's official clients through B (the follower): the session is placed by A,
    // its events reach B's stream through the database, its code runs through B.
    // `python` is an alias the first start seeded (the guides' commands use it).
    let cli_user = a.user("cli-across@x.org", "user", "default").await;
    let old = crate::cli::Cli::for_user(&b, &cli_user).await;
    let out = old
        .run(&["run", "--rm", "-c", "print(\"through B\")", "python"])
        .await;
    assert!(out.ok && out.stdout.contains("through B\n"), "{out}");
    let new = crate::cli::Cli::for_user26(&b, &cli_user).await;
    let out = new
        .run(&["run", "--rm", "-c", "print(\"newest through B\")", "python"])
        .await;
    assert!(out.ok && out.stdout.contains("newest through B"), "{out}");

    // An event too large for NOTIFY travels by its outbox row, once.
    let mut heard = b.state().shared.events.stream();
    let big = "k".repeat(10_000);
    a.state().shared.events.changed(
        api::events::ObjectKind::Agent,
        api::events::ChangeAction::Modified,
        big.clone(),
        None,
    );
    a.state().shared.events.changed(
        api::events::ObjectKind::Agent,
        api::events::ChangeAction::Modified,
        "small",
        None,
    );
    let mut keys = Vec::new();
    while keys.last().map(String::as_str) != Some("small") {
        let e = tokio::time::timeout(Duration::from_secs(10), heard.next())
            .await
            .expect("B hears A's events")
            .unwrap();
        if let api::events::Event::Changed(c) = &*e
            && (c.key == big || c.key == "small")
        {
            keys.push(c.key.clone());
        }
    }
    assert_eq!(keys, [big, "small".to_string()]);

    // A logout through A ends the credential on B, and B's live subscription, within 1 s.
    let quiet = subscribe_op::<gql::SessionStatusChanges>(&b, &user, Default::default()).await;
    // Someone else's stream lives on.
    let admin_token = b.admin_token.clone();
    let mut watching =
        subscribe_op::<gql::SessionStatusChanges>(&b, &admin_token, Default::default()).await;
    let before = b
        .op::<gql::ops::WhoAmI>(Some(&user), Default::default())
        .await;
    assert!(before.get("errors").is_none(), "{before}");
    let revoked_at = Instant::now();
    a.op_ok::<gql::managers::Logout>(Some(&user), Default::default())
        .await;
    eventually("B to refuse the token A logged out", WAIT, || async {
        let r = b
            .op::<gql::ops::WhoAmI>(Some(&user), Default::default())
            .await;
        // A bearer token the server no longer knows is refused before GraphQL (problem+json).
        let refused = r["code"] == "UNAUTHENTICATED"
            || r["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED";
        refused.then_some(())
    })
    .await;
    let refused_after = revoked_at.elapsed();
    let ended = ended_with(quiet).await;
    let ended_after = revoked_at.elapsed();
    println!(
        "revocation across managers: token refused on B after {refused_after:?}, subscription ended after {ended_after:?}"
    );
    assert!(ended.contains("revoked"), "{ended}");
    assert!(refused_after < Duration::from_secs(1), "{refused_after:?}");
    assert!(ended_after < Duration::from_secs(1), "{ended_after:?}");

    // The admin ends the session through B; A's bus hears it.
    destroy(&b, &b.admin_token.clone(), &id).await;
    wait_status(&a, &a.admin_token.clone(), &id, &["TERMINATED"]).await;
    loop {
        let msg = next_json(&mut watching).await;
        assert_eq!(msg["type"], "next", "the admin's stream ended: {msg}");
        if msg["payload"]["data"]["session_status_changes"]["event"] == "session_terminated" {
            break;
        }
    }
    drop(b);
    drop(a);
    took("it::managers::two_managers_serve_one_product", started);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_across_managers() {
    let started = Instant::now();
    let a = spawn(Db::Postgres).await;
    let b = a.beside().await;
    // A password-guessing flood split over both is throttled as one: 10 failures per account.
    a.user("victim@x.org", "user", "default").await;
    let mut refused = Vec::new();
    for i in 0..12 {
        let through = if i % 2 == 0 { &a } else { &b };
        let r = crate::auth::login_body(through, "victim@x.org", "wrong-Pass-1").await;
        if r["errors"][0]["extensions"]["code"] == "RATE_LIMITED" {
            refused.push(i);
        }
    }
    assert_eq!(
        refused,
        [10, 11],
        "each manager saw only 6 failures of its own"
    );

    // A keypair's rate limit (6 per window) holds across both.
    a.user("rl@x.org", "user", "default").await;
    let created = a
        .admin_op::<gql::CreateKeypair>(gql::create_keypair::Variables {
            user_id: "rl@x.org".into(),
            props: gql::create_keypair::KeyPairInput {
                resource_policy: "default".into(),
                rate_limit: 6,
                ..Default::default()
            },
        })
        .await;
    let kp = &created["create_keypair"]["keypair"];
    let (ak, sk) = (
        kp["access_key"].as_str().unwrap().to_string(),
        kp["secret_key"].as_str().unwrap().to_string(),
    );
    let on = |app| crate::auth::Signed {
        app,
        ak: ak.clone(),
        sk: sk.clone(),
    };
    for _ in 0..4 {
        let r = on(&a)
            .post("/admin/gql", "/admin/gql", &crate::auth::now_iso(0), None)
            .await;
        assert_eq!(r.status(), 200);
    }
    // A shares its count within a second (the flush period).
    let db = api::db::connect_raw(a.config.database_url.as_deref().unwrap())
        .await
        .unwrap();
    eventually("A's count to be shared", WAIT, || async {
        use sea_orm::ConnectionTrait;
        let row = db
            .query_one(sea_orm::Statement::from_sql_and_values(
                sea_orm::DbBackend::Postgres,
                "SELECT count FROM limit_windows WHERE key = $1",
                [format!("rate:{ak}").into()],
            ))
            .await
            .unwrap()?;
        (row.try_get::<i64>("", "count").unwrap() >= 4).then_some(())
    })
    .await;
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let r = on(&b)
            .post("/admin/gql", "/admin/gql", &crate::auth::now_iso(0), None)
            .await;
        statuses.push(r.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 429], "4 through A, 2 more through B");

    // A signed request captured on its way to A is refused when replayed to B (a load
    // balancer sends the same Host to both).
    let admin_kp = a
        .op_ok::<gql::MyKeypair>(Some(&a.admin_token.clone()), Default::default())
        .await;
    let admin = crate::auth::Signed {
        app: &a,
        ak: admin_kp["keypair"]["access_key"].as_str().unwrap().into(),
        sk: admin_kp["keypair"]["secret_key"].as_str().unwrap().into(),
    };
    let date = crate::auth::now_iso(0);
    let first = admin.post_via(&a, "/admin/gql", &date).await;
    assert_eq!(first.status(), 200);
    let replayed = admin.post_via(&b, "/admin/gql", &date).await;
    assert_eq!(
        replayed.status(),
        401,
        "a replay accepted by another manager"
    );
    let problem: Value = replayed.json().await.unwrap();
    assert!(problem.to_string().contains("already used"), "{problem}");
    drop(b);
    drop(a);
    took("it::managers::limits_hold_across_managers", started);
}

/// The message that ends a subscription (an error's message; "complete" if it just ends).
async fn ended_with(mut ws: Ws) -> String {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("the subscription ends within 10 s");
        let Some(Ok(Message::Text(t))) = msg else {
            return "closed".into();
        };
        let v: Value = serde_json::from_str(t.as_str()).unwrap();
        match v["type"].as_str() {
            Some("next") if v["payload"]["errors"].is_array() => {
                return v["payload"]["errors"][0]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
            }
            Some("error") => return v["payload"].to_string(),
            Some("complete") => return "complete".into(),
            _ => continue,
        }
    }
}

/// A `bai serve` of its own (the binary beside this test's), killed when dropped.
struct Manager {
    child: std::process::Child,
    app: TestApp,
}

impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_manager(database_url: &str, data_dir: &std::path::Path) -> Manager {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = std::fs::File::create(data_dir.with_extension(format!("{port}.log"))).unwrap();
    let child = std::process::Command::new(bai_binary())
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("DATABASE_URL", database_url)
        .env("BAI_DATA_DIR", data_dir)
        .env("BAI_WEB_DIR", data_dir.join("web"))
        .env("BAI_ADMIN_EMAIL", ADMIN_EMAIL)
        .env("BAI_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .env("BAI_LEASE_SECS", "3")
        .env("BAI_LOG", "info,sqlx=warn,sea_orm=warn")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("bai serve starts");
    let app = external_app(
        format!("http://127.0.0.1:{port}"),
        std::env::temp_dir().join(format!("bai-it-{}", uuid::Uuid::new_v4().simple())),
    )
    .await;
    Manager { child, app }
}

/// Containers of this installation by session, as the engine has them.
fn containers_by_session(instance: &str) -> Vec<(String, String, bool)> {
    let out = docker(&[
        "ps",
        "-a",
        "--filter",
        &format!("label=ai.backend.bai-instance={instance}"),
        "--format",
        "{{.ID}} {{.Label \"ai.backend.session-id\"}} {{.State}}",
    ]);
    out.lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            Some((
                parts.next()?.to_string(),
                parts.next()?.to_string(),
                parts.next()? == "running",
            ))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_killed_during_launches_is_replaced_and_nothing_is_lost_or_doubled() {
    let started = Instant::now();
    require_docker();
    api::install_crypto();
    let url = fresh_pg_database().await;
    let dir = std::env::temp_dir().join(format!("bai-it-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut first = start_manager(&url, &dir.join("data")).await;
    let second = start_manager(&url, &dir.join("data")).await;
    assert_eq!(first.app.readyz().await["manager"]["role"], "leader");
    assert_eq!(second.app.readyz().await["manager"]["role"], "follower");
    let (a, b) = (&first.app, &second.app);
    let user = a.user("burst@x.org", "user", "default").await;
    b.image_min_cpu(PYTHON, "0.1").await;
    // 20 launches asked through both; the leader dies while they run.
    let mut ids = Vec::new();
    for i in 0..20 {
        let through = if i % 2 == 0 { a } else { b };
        let body = create_session(
            through,
            &user,
            json!({"image": PYTHON, "resources": "{\"cpu\": \"0.1\", \"mem\": \"320m\"}"}),
        )
        .await;
        ids.extend(session_ids(&body));
    }
    eventually("a launch to be under way", WAIT, || async {
        let s = b
            .op_ok::<gql::SessionList>(
                Some(&user),
                gql::session_list::Variables {
                    limit: 100,
                    status: Some("PREPARING,PULLING,RUNNING".into()),
                    ..Default::default()
                },
            )
            .await;
        (s["compute_session_list"]["total_count"].as_u64() > Some(0)).then_some(())
    })
    .await;
    let killed_at = Instant::now();
    let killed_on_clock = chrono::Utc::now();
    first.child.kill().unwrap(); // SIGKILL
    first.child.wait().unwrap();
    eventually("the survivor to lead", WAIT, || async {
        (b.readyz().await["manager"]["role"] == "leader").then_some(())
    })
    .await;
    let takeover = killed_at.elapsed();
    println!("takeover after SIGKILL of the leader: {takeover:?} (lease 3 s)");
    assert!(takeover < Duration::from_secs(10), "{takeover:?}");
    // Every session ends RUNNING, or ERROR with the reason; none stays in flight.
    let mut states = Vec::new();
    for id in &ids {
        let s = wait_status(b, &user, id, &["RUNNING", "ERROR"]).await;
        if s["status"] == "ERROR" {
            assert_eq!(s["status_info"], "server-restarted", "{s}");
        }
        states.push((id.clone(), s["status"].as_str().unwrap().to_string()));
    }
    // The dead leader's launches were finished within twice the lease and one round of its
    // death (README, Several managers), give or take a loaded machine's scheduling.
    let mut finished_after = Duration::ZERO;
    for (id, st) in &states {
        if st != "ERROR" {
            continue;
        }
        let s = b
            .ok(
                Some(&user),
                "query($id: UUID!) { compute_session(id: $id) { status_changed } }",
                json!({"id": id}),
            )
            .await;
        let at: chrono::DateTime<chrono::Utc> = s["compute_session"]["status_changed"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        finished_after = finished_after.max((at - killed_on_clock).to_std().unwrap_or_default());
    }
    println!(
        "the dead leader's launches were finished {finished_after:?} after the kill (lease 3 s: 2 × 3 s + one round of 1 s)"
    );
    assert!(
        finished_after < Duration::from_secs(7 + 8),
        "{finished_after:?}"
    );
    let running: Vec<&String> = states
        .iter()
        .filter(|(_, st)| st == "RUNNING")
        .map(|(id, _)| id)
        .collect();
    println!(
        "after the kill: {} of 20 running, {} ended with server-restarted",
        running.len(),
        20 - running.len()
    );
    // None launched twice, no orphan: each running session has exactly one container, the
    // others none (the survivor's recovery and sweep removed what the dead one left).
    let instance = {
        use sea_orm::EntityTrait;
        let db = api::db::connect_raw(&url).await.unwrap();
        let row = entity::system_settings::Entity::find_by_id("manager.instance_id".to_string())
            .one(&db)
            .await
            .unwrap()
            .expect("the installation's id");
        row.value.as_str().unwrap().to_string()
    };
    eventually("no orphan container", WAIT, || async {
        let cs = containers_by_session(&instance);
        let ok = ids.iter().all(|id| {
            let mine: Vec<_> = cs.iter().filter(|(_, s, _)| s == id).collect();
            if running.contains(&id) {
                mine.len() == 1 && mine[0].2
            } else {
                mine.is_empty()
            }
        }) && cs.iter().all(|(_, s, _)| ids.contains(s));
        ok.then_some(())
    })
    .await;
    // No leaked allocation: the agent holds what the running sessions asked, no more.
    let agents = b
        .admin_op::<gql::sessions::Agents>(Default::default())
        .await;
    let occ: Value =
        serde_json::from_str(agents["agents"][0]["occupied_slots"].as_str().unwrap()).unwrap();
    let cpu: f64 = occ["cpu"].as_str().unwrap_or("0").parse().unwrap();
    assert!(
        (cpu - 0.1 * running.len() as f64).abs() < 1e-6,
        "occupied {cpu} CPU for {} running sessions",
        running.len()
    );
    let res = b
        .op_ok::<gql::DestroySessions>(
            Some(&user),
            gql::destroy_sessions::Variables {
                ids: running.iter().map(|s| s.to_string()).collect(),
            },
        )
        .await;
    assert!(
        res["destroy_sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["ok"] == true),
        "{res}"
    );
    drop(second);
    let _ = std::fs::remove_dir_all(&dir);
    took(
        "it::managers::a_leader_killed_during_launches_is_replaced_and_nothing_is_lost_or_doubled",
        started,
    );
}

/// A load balancer in front of managers: each HTTP request goes to the next manager in turn
/// (its Host kept, so HMAC signatures made for the balancer's name hold), the answer streams
/// back. It records which manager took each request.
struct RoundRobin {
    url: String,
    log: std::sync::Arc<std::sync::Mutex<Vec<(usize, String)>>>,
    task: tokio::task::AbortHandle,
}

impl Drop for RoundRobin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RoundRobin {
    /// The managers that took requests whose line starts with `prefix`.
    fn managers_of(&self, prefix: &str) -> std::collections::BTreeSet<usize> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, line)| line.starts_with(prefix))
            .map(|(i, _)| *i)
            .collect()
    }
}

async fn round_robin(backends: Vec<String>) -> RoundRobin {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const HOP: [&str; 6] = [
        "connection",
        "keep-alive",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "proxy-connection",
    ];
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let next = std::sync::Arc::new(AtomicUsize::new(0));
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let backends = std::sync::Arc::new(backends);
    let handler = {
        let log = log.clone();
        move |req: axum::extract::Request| {
            let (log, next, client, backends) =
                (log.clone(), next.clone(), client.clone(), backends.clone());
            async move {
                let i = next.fetch_add(1, Ordering::SeqCst) % backends.len();
                let wants_ws = req
                    .headers()
                    .get("upgrade")
                    .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"));
                if wants_ws {
                    log.lock()
                        .unwrap()
                        .push((i, format!("WS {}", req.uri().path())));
                    return websocket_through(req, &backends[i]).await;
                }
                let target = format!(
                    "{}{}",
                    backends[i],
                    req.uri().path_and_query().map_or("/", |p| p.as_str())
                );
                log.lock()
                    .unwrap()
                    .push((i, format!("{} {}", req.method(), req.uri().path())));
                let mut out = client.request(req.method().clone(), target);
                for (k, v) in req.headers() {
                    if !HOP.contains(&k.as_str()) {
                        out = out.header(k, v);
                    }
                }
                let body = axum::body::to_bytes(req.into_body(), 64 << 20)
                    .await
                    .unwrap_or_default();
                let Ok(resp) = out.body(body).send().await else {
                    return axum::response::Response::builder()
                        .status(502)
                        .body(axum::body::Body::empty())
                        .unwrap();
                };
                let mut back = axum::response::Response::builder().status(resp.status());
                for (k, v) in resp.headers() {
                    if !HOP.contains(&k.as_str()) {
                        back = back.header(k, v);
                    }
                }
                back.body(axum::body::Body::from_stream(resp.bytes_stream()))
                    .unwrap()
            }
        }
    };
    let router = axum::Router::new().fallback(handler);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    })
    .abort_handle();
    RoundRobin { url, log, task }
}

async fn commit_session(app: &TestApp, user: &str, id: &str, name: &str) -> Value {
    app.op::<gql::CommitSession>(
        Some(user),
        gql::commit_session::Variables {
            session_id: id.to_string(),
            image_name: name.into(),
        },
    )
    .await
}

/// Jupyter's status answers at `url` (an app port a manager redirected to).
async fn jupyter_answers(app: &TestApp, url: &str) {
    let status = eventually(&format!("Jupyter at {url}"), WAIT, || async {
        let r = app.http.get(url).send().await.ok()?;
        (r.status() == 200).then_some(r)
    })
    .await;
    let body: Value = status.json().await.unwrap();
    assert!(body.get("started").is_some(), "{body}");
}

async fn start_jupyter(app: &TestApp, user: &str, id: &str) -> Value {
    app.op_ok::<gql::StartService>(
        Some(user),
        gql::start_service::Variables {
            session_id: id.to_string(),
            app: "jupyter".into(),
            open_to_public: false,
            preferred_port: None,
        },
    )
    .await
}

/// A WebSocket through the balancer: the client's handshake headers (its Host and HMAC
/// signature) go to the manager, then messages flow both ways until either side closes.
async fn websocket_through(req: axum::extract::Request, backend: &str) -> axum::response::Response {
    use axum::extract::FromRequestParts;
    use axum::extract::ws::{Message as Axum, WebSocketUpgrade};
    use axum::response::IntoResponse;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let (mut parts, _) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let Ok(upgrade) = WebSocketUpgrade::from_request_parts(&mut parts, &()).await else {
        return (axum::http::StatusCode::BAD_REQUEST, "not a WebSocket").into_response();
    };
    let target = format!("{}{path}", backend.replacen("http://", "ws://", 1));
    let mut to_backend = target.into_client_request().unwrap();
    for (k, v) in &parts.headers {
        let n = k.as_str();
        if !n.starts_with("sec-websocket-") && !["connection", "upgrade"].contains(&n) {
            to_backend.headers_mut().insert(k.clone(), v.clone());
        }
    }
    let Ok((server, _)) = tokio_tungstenite::connect_async(to_backend).await else {
        return (axum::http::StatusCode::BAD_GATEWAY, "the manager refused").into_response();
    };
    upgrade.on_upgrade(move |client| async move {
        let (mut client_tx, mut client_rx) = client.split();
        let (mut server_tx, mut server_rx) = server.split();
        let up = async {
            while let Some(Ok(m)) = client_rx.next().await {
                let m = match m {
                    Axum::Text(t) => Message::text(t.as_str()),
                    Axum::Binary(b) => Message::binary(b),
                    Axum::Close(_) => break,
                    _ => continue,
                };
                if server_tx.send(m).await.is_err() {
                    break;
                }
            }
            let _ = server_tx.close().await;
        };
        let down = async {
            while let Some(Ok(m)) = server_rx.next().await {
                let m = match m {
                    Message::Text(t) => Axum::Text(t.as_str().into()),
                    Message::Binary(b) => Axum::Binary(b),
                    Message::Close(_) => break,
                    _ => continue,
                };
                if client_tx.send(m).await.is_err() {
                    break;
                }
            }
            let _ = client_tx.close().await;
        };
        tokio::join!(up, down);
    })
}

/// Through a load balancer: a session made, used and removed with the official SDK, each
/// call to the next manager; its execute polls (`continue`) read on from each other.
const THROUGH_BALANCER: &str = r#"
import asyncio, json, sys, tempfile
from pathlib import Path
from ai.backend.client.exceptions import BackendAPIError
from ai.backend.client.session import AsyncSession

async def main():
    image = sys.argv[1]
    out = {}
    async with AsyncSession() as api:
        s = await api.ComputeSession.get_or_create(image, name="balanced", max_wait=120)
        code = "import time\nfor i in range(6):\n    print('tick', i, flush=True)\n    time.sleep(0.7)\n"
        r = await s.execute(code=code, mode="query")
        console, polls = list(r["console"]), 1
        while r["status"] != "finished":
            r = await s.execute(run_id=r["runId"], code="", mode="continue")
            console += r["console"]
            polls += 1
        out["stdout"] = "".join(c[1] for c in console if c[0] == "stdout")
        out["polls"] = polls
        out["exit"] = r["exitCode"]
        # The run of another session (argv[2]), named on this one: not found on every manager.
        out["foreign"] = []
        for _ in range(3):
            try:
                await s.execute(run_id=sys.argv[2], code="", mode="continue")
                out["foreign"].append("answered")
            except BackendAPIError as e:
                out["foreign"].append(e.status)
        src = Path(tempfile.mkdtemp()) / "lb.txt"
        src.write_text("through the balancer")
        await s.upload([src], basedir=src.parent)
        dest = Path(tempfile.mkdtemp())
        await s.download(["lb.txt"], dest=dest)
        out["downloaded"] = (dest / "lb.txt").read_text()
        await s.destroy()
    print(json.dumps(out))

asyncio.run(main())
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_managers_behind_a_load_balancer_serve_one_product() {
    let started = Instant::now();
    require_docker();
    let a = spawn(Db::Postgres).await;
    let b = a.beside().await;
    // C is known by a name of its own: its app ports are found there.
    let c = a
        .beside_with(|c| c.advertise_addr = Some("localhost:8090".into()))
        .await;
    let user = a.user("lb@x.org", "user", "default").await;
    let stranger = b.user("lb-stranger@x.org", "user", "default").await;
    let body = create_session(
        &a,
        &user,
        json!({"image": PYTHON, "name": "lb-shared", "resources": "{\"cpu\": \"1\", \"mem\": \"320m\"}"}),
    )
    .await;
    let id = session_ids(&body)[0].clone();
    let running = wait_status(&a, &user, &id, &["RUNNING"]).await;
    let container = running["containers"][0]["container_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{running}"))
        .to_string();

    // An execution started through A: followed live through B, fed through C, read whole
    // through C, each piece once and in order.
    let code = "import time\nfor i in range(4):\n    print('line', i, flush=True)\n    time.sleep(0.3)\nprint('got', input(), flush=True)\n";
    let run = crate::sessions::execute(&a, &user, &id, "query", Some(code), None).await;
    let run_id = run["data"]["execute_in_session"]["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{run}"))
        .to_string();
    let mut follow = subscribe_op_sent::<gql::ExecutionOutput>(
        &b,
        &user,
        gql::execution_output::Variables {
            run_id: run_id.clone(),
        },
    )
    .await;
    // Another user learns nothing of it through any manager.
    let theirs = c
        .op::<gql::Execution>(
            Some(&stranger),
            gql::execution::Variables {
                run_id: run_id.clone(),
            },
        )
        .await;
    assert_code(&theirs, "NOT_FOUND");
    let fed = c
        .op::<gql::SendExecutionInput>(
            Some(&stranger),
            gql::send_execution_input::Variables {
                run_id: run_id.clone(),
                input: "intruder\n".into(),
            },
        )
        .await;
    assert_code(&fed, "NOT_FOUND");
    c.op_ok::<gql::SendExecutionInput>(
        Some(&user),
        gql::send_execution_input::Variables {
            run_id: run_id.clone(),
            input: "hello\n".into(),
        },
    )
    .await;
    let (mut out, mut seqs, mut exit) = (String::new(), Vec::new(), None);
    while exit.is_none() {
        let msg = tokio::time::timeout(Duration::from_secs(60), follow.next())
            .await
            .expect("output through B")
            .unwrap()
            .unwrap();
        let Message::Text(t) = msg else { continue };
        let v: Value = serde_json::from_str(t.as_str()).unwrap();
        let chunk = &v["payload"]["data"]["execution_output"];
        seqs.push(chunk["seq"].as_u64().unwrap_or_else(|| panic!("{v}")));
        match chunk["stream"].as_str().unwrap() {
            "stdout" => out.push_str(chunk["data"].as_str().unwrap()),
            "finished" => exit = chunk["exit_code"].as_i64(),
            other => panic!("{other}: {v}"),
        }
    }
    assert_eq!(
        (out.as_str(), exit),
        ("line 0\nline 1\nline 2\nline 3\ngot hello\n", Some(0))
    );
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let whole = c
        .op_ok::<gql::Execution>(
            Some(&user),
            gql::execution::Variables {
                run_id: run_id.clone(),
            },
        )
        .await;
    assert_eq!(whole["execution"]["status"], "finished", "{whole}");
    let text: String = whole["execution"]["console"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["stream"] == "stdout")
        .map(|c| c["data"].as_str().unwrap())
        .collect();
    assert_eq!(text, out);

    // Backend.AI's official CLI through a load balancer that sends each request to the next
    // manager: its execute polls (`continue`) land on different managers and read on from
    // each other, nothing twice, nothing lost.
    // `python` is an alias the first start seeded (the guides' commands use it).
    let lb = round_robin(vec![a.base.clone(), b.base.clone(), c.base.clone()]).await;
    let sdk = crate::cli::Cli::for_user26(&a, &user)
        .await
        .through(&lb.url);
    let got = sdk
        .sdk_script("balanced.py", THROUGH_BALANCER, &[PYTHON, &run_id])
        .await;
    assert_eq!(got["foreign"], json!([404, 404, 404]), "{got}");
    assert_eq!(
        got["stdout"], "tick 0\ntick 1\ntick 2\ntick 3\ntick 4\ntick 5\n",
        "{got}"
    );
    assert_eq!(got["exit"], 0, "{got}");
    assert!(got["polls"].as_u64().unwrap() >= 2, "{got}");
    assert_eq!(got["downloaded"], "through the balancer", "{got}");
    let polled_on = lb.managers_of("POST /session/");
    assert!(
        polled_on.len() >= 2,
        "the execute calls all went to one manager: {:?}",
        lb.log.lock().unwrap()
    );
    // The CLI's `run` (a WebSocket for the code, the rest over HTTP) through the balancer.
    let cli = crate::cli::Cli::for_user(&a, &user).await.through(&lb.url);
    let ticks = "import time\nfor i in range(3):\n    print('cli tick', i, flush=True)\n    time.sleep(0.3)\n";
    let run = cli.run(&["run", "--rm", "-c", ticks, "python"]).await;
    assert!(run.ok, "{run}");
    assert!(
        run.stdout.contains("cli tick 0\ncli tick 1\ncli tick 2\n"),
        "{run}"
    );
    let log = lb.log.lock().unwrap().clone();
    let on = |m: usize| log.iter().filter(|(i, _)| *i == m).count();
    println!(
        "through the balancer: {} requests, {} on A, {} on B, {} on C",
        log.len(),
        on(0),
        on(1),
        on(2)
    );

    // An app started through A is served through B (on a port of B's own) and started again
    // through C as the same app (its token), never a second Jupyter.
    let on_a = start_jupyter(&a, &user, &id).await;
    let token = on_a["start_service"]["token"].as_str().unwrap().to_string();
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let redirect = |app: &TestApp, who: &str| {
        plain
            .get(app.url(&format!("/apps/{id}/jupyter/api/status?token={token}")))
            .bearer_auth(who.to_string())
            .send()
    };
    let strangers = redirect(&b, &stranger).await.unwrap();
    assert_eq!(strangers.status(), 404, "a stranger sees no app");
    let to_b = redirect(&b, &user).await.unwrap();
    assert_eq!(to_b.status(), 307);
    let location = to_b.headers()["location"].to_str().unwrap().to_string();
    let b_port = b.base.rsplit(':').next().unwrap();
    assert!(
        location.contains("127.0.0.1:") && !location.contains(&format!(":{b_port}/")),
        "{location}"
    );
    jupyter_answers(&b, &location).await;
    let on_c = start_jupyter(&c, &user, &id).await;
    assert_eq!(on_c["start_service"]["token"], token.as_str(), "{on_c}");
    // Through C, the redirect names C's advertised host, whatever Host the request had.
    let to_c = redirect(&c, &user).await.unwrap();
    assert_eq!(to_c.status(), 307);
    let on_c_at = to_c.headers()["location"].to_str().unwrap().to_string();
    assert!(on_c_at.starts_with("http://localhost:"), "{on_c_at}");
    jupyter_answers(&c, &on_c_at).await;
    let jupyters = docker(&[
        "exec",
        &container,
        "sh",
        "-c",
        "ps -eo args | grep -c '[j]upyter-notebook' || true",
    ]);
    assert_eq!(jupyters.trim(), "1", "one Jupyter in the container");

    // A background task started through A is read through C until it ends; a user sees
    // nothing of it.
    let task =
        a.admin_op::<gql::RescanImages>(Default::default()).await["rescan_images"]["task_id"]
            .as_str()
            .unwrap()
            .to_string();
    let theirs = c
        .op::<gql::BackgroundTask>(
            Some(&user),
            gql::background_task::Variables {
                task_id: task.clone(),
            },
        )
        .await;
    assert_code(&theirs, "NOT_FOUND");
    wait_task_done(&c, &c.admin_token, &task).await;

    // A commit through A is one commit: B refuses a second one of the same session, C reads
    // it under way, then done.
    let first = commit_session(&a, &user, &id, "through-a").await;
    let commit_task = first["data"]["commit_session"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    let second = commit_session(&b, &user, &id, "through-b").await;
    assert_code(&second, "CONFLICT");
    let done = wait_task_done(&c, &user, &commit_task).await;
    let reference = done["message"]
        .as_str()
        .unwrap_or_default()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(!reference.is_empty(), "{done}");
    docker(&["rmi", "-f", &reference]);

    // The terminal through C, for the session A launched.
    let mut ws = crate::sessions::terminal_ws(&c, &user, &id)
        .await
        .expect("terminal through C");
    ws.send(Message::binary(b"echo via-c-$((6*7))\r".to_vec()))
        .await
        .unwrap();
    crate::sessions::read_until(&mut ws, "via-c-42").await;
    drop(ws);
    destroy(&b, &user, &id).await;
    drop(lb);
    drop(c);
    drop(b);
    drop(a);
    took(
        "it::managers::three_managers_behind_a_load_balancer_serve_one_product",
        started,
    );
}

/// Model serving across managers: a service created through the follower is kept by the
/// leader (its replicas exactly as many as wanted, never doubled by two reconcilers); when
/// the leader is killed, the survivor serves the service's URL, keeps the same replicas and
/// scales it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leaders_model_service_keeps_its_replicas_and_its_url() {
    let started = Instant::now();
    require_docker();
    api::install_crypto();
    let url = fresh_pg_database().await;
    let dir = std::env::temp_dir().join(format!("bai-it-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut first = start_manager(&url, &dir.join("data")).await;
    let second = start_manager(&url, &dir.join("data")).await;
    assert_eq!(first.app.readyz().await["manager"]["role"], "leader");
    let b = &second.app;
    let user = b.user("served@x.org", "user", "default").await;
    b.image_min_cpu(PYTHON, "0.1").await;
    let model = crate::serving::model_folder(b, &user, "shared-model").await;
    let (st, created) = rest(b, &user, reqwest::Method::POST, "/services", Some(json!({
        "name": "across", "replicas": 2, "image": PYTHON, "open_to_public": true,
        "config": {"model": model, "scaling_group": "default", "resources": {"cpu": "0.4", "mem": "512m"}},
    }))).await;
    assert_eq!(st, 201, "{created}");
    let id = created["endpoint_id"].as_str().unwrap().to_string();
    let e = crate::serving::wait_healthy(b, &user, &id, 2).await;
    let endpoint_url = e["url"].as_str().unwrap().to_string();
    let http = reqwest::Client::new();
    let running = || async {
        b.op_ok::<gql::SessionList>(
            Some(&user),
            gql::session_list::Variables {
                limit: 100,
                status: Some("PENDING,SCHEDULED,PREPARING,PULLING,RUNNING".into()),
                ..Default::default()
            },
        )
        .await["compute_session_list"]["total_count"]
            .as_u64()
    };
    for _ in 0..3 {
        assert_eq!(running().await, Some(2), "exactly the replicas wanted");
        let r = http
            .post(format!("{endpoint_url}/predict"))
            .json(&json!({"x": [2]}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.json::<Value>().await.unwrap(), json!({"y": [8.0]}));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    first.child.kill().unwrap(); // SIGKILL
    first.child.wait().unwrap();
    let killed_at = Instant::now();
    eventually("the survivor to lead", WAIT, || async {
        (b.readyz().await["manager"]["role"] == "leader").then_some(())
    })
    .await;
    eventually("the service's URL through the survivor", WAIT, || async {
        let r = http
            .post(format!("{endpoint_url}/predict"))
            .json(&json!({"x": [2]}))
            .send()
            .await
            .ok()?;
        (r.status() == 200).then_some(())
    })
    .await;
    println!(
        "a killed leader's service answered again after {:?} (lease 3 s)",
        killed_at.elapsed()
    );
    assert_eq!(running().await, Some(2), "the same replicas, none doubled");
    let (st, s) = rest(
        b,
        &user,
        reqwest::Method::POST,
        &format!("/services/{id}/scale"),
        Some(json!({"to": 3})),
    )
    .await;
    assert_eq!(st, 200, "{s}");
    crate::serving::wait_healthy(b, &user, &id, 3).await;
    for _ in 0..3 {
        assert_eq!(running().await, Some(3));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (st, _) = rest(
        b,
        &user,
        reqwest::Method::DELETE,
        &format!("/services/{id}"),
        None,
    )
    .await;
    assert_eq!(st, 200);
    eventually("the replicas gone", WAIT, || async {
        (running().await == Some(0)).then_some(())
    })
    .await;
    took(
        "it::managers::a_killed_leaders_model_service_keeps_its_replicas_and_its_url",
        started,
    );
}
