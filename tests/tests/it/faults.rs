//! Agents that stay truthful under load and faults (issue 61): heartbeats that never wait on
//! one slow engine or on usage sampling, sessions that say when their agent is lost however
//! it was found, launches that survive a database outage, managers judged alive on evidence
//! an outage does not erase, and engines that cannot be mistaken for each other.
use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::both_dbs;
use crate::hosts::{docker_on, engine, turn};
use crate::support::*;

/// Every agent's status by address, with its live use (bai's `containers` among it).
async fn agents_by_addr(app: &TestApp) -> HashMap<String, (String, Value)> {
    let mut out = HashMap::new();
    {
        let data = app
            .admin(
                "{ agent_list(limit: 50, offset: 0, status: \"ALIVE,LOST,TERMINATED\") { items { id status addr live_stat } } }",
                json!({}),
            )
            .await;
        for a in data["agent_list"]["items"].as_array().unwrap() {
            let live = a["live_stat"]
                .as_str()
                .and_then(|s| serde_json::from_str(s).ok())
                .unwrap_or(Value::Null);
            out.insert(
                a["addr"].as_str().unwrap().to_string(),
                (a["status"].as_str().unwrap().to_string(), live),
            );
        }
    }
    out
}

const LOCAL: &str = "unix:///var/run/docker.sock";

fn host_addr(n: u8) -> String {
    format!("tcp://10.231.{n}.2:2376")
}

/// Host `n`'s engine port drops every packet (not refused: silence) until dropped.
struct Silenced(u8);

impl Silenced {
    fn new(n: u8) -> Silenced {
        Self::rule(n, "-I");
        Silenced(n)
    }

    fn rule(n: u8, op: &str) -> bool {
        std::process::Command::new("nsenter")
            .arg(format!("--net=/var/run/netns/h{n}"))
            .args([
                "iptables", op, "INPUT", "-p", "tcp", "--dport", "2376", "-j", "DROP",
            ])
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Silenced {
    fn drop(&mut self) {
        while Self::rule(self.0, "-D") {}
    }
}

// One engine silent (its port's packets dropped, not refused) for 12 s: its agent is LOST
// within the ping timeouts, while the manager's own agent and the other host's stay ALIVE
// in every sample and their sessions keep working; when it answers again it is ALIVE again.
both_dbs!(a_silent_engine_delays_no_other_agent, |db| async move {
    require_docker();
    let _turn = turn().await;
    crate::hosts::hosts();
    let app = spawn_with(db, |c| {
        c.heartbeat_secs = 1;
        c.agent_lost_after_misses = 2;
        c.engine_timeout_secs = 30;
        c.engines = vec![engine(1, "cert"), engine(2, "cert")];
    })
    .await;
    let user = app.user("steady@x.org", "user", "default").await;
    app.image_min_cpu(PYTHON, "0.1").await;
    let local = session_ids(
        &create_session(
            &app,
            &user,
            json!({"image": PYTHON, "resources": "{\"cpu\": \"0.1\", \"mem\": \"320m\"}"}),
        )
        .await,
    )[0]
    .clone();
    wait_status(&app, &user, &local, &["RUNNING"]).await;
    let all = agents_by_addr(&app).await;
    for addr in [LOCAL.to_string(), host_addr(1), host_addr(2)] {
        assert_eq!(
            all.get(&addr).map(|a| a.0.as_str()),
            Some("ALIVE"),
            "{addr}: {all:?}"
        );
    }
    let silenced = Silenced::new(2);
    let started = Instant::now();
    let mut lost_after = None;
    let mut samples = 0;
    while started.elapsed() < Duration::from_secs(12) {
        let all = agents_by_addr(&app).await;
        for addr in [LOCAL.to_string(), host_addr(1)] {
            assert_eq!(
                all[&addr].0,
                "ALIVE",
                "{addr} after {:?} of host 2's silence: {all:?}",
                started.elapsed()
            );
        }
        if lost_after.is_none() && all[&host_addr(2)].0 == "LOST" {
            lost_after = Some(started.elapsed());
        }
        samples += 1;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let lost_after = lost_after.expect("the silent engine's agent is LOST");
    println!(
        "host 2 silent: LOST after {lost_after:?}; the other agents ALIVE in all {samples} samples"
    );
    // A session on a healthy agent is served meanwhile, without waiting on host 2.
    let t = Instant::now();
    let (status, _) = rest(
        &app,
        &user,
        reqwest::Method::GET,
        &format!("/session/{local}/logs"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    drop(silenced);
    eventually("host 2's agent ALIVE again", WAIT, || async {
        (agents_by_addr(&app).await[&host_addr(2)].0 == "ALIVE").then_some(())
    })
    .await;
    destroy(&app, &user, &local).await;
});

// 200 idle containers on one engine (clones of a session's container, so the agent samples
// every one of them, as it would 200 sessions): for a minute, sampled every second, neither
// that agent nor the manager's own is ever LOST, and the samples did count them all.
both_dbs!(
    two_hundred_idle_containers_make_no_agent_flap,
    |db| async move {
        require_docker();
        let _turn = turn().await;
        crate::hosts::hosts();
        let app = spawn_with(db, |c| {
            c.heartbeat_secs = 1;
            c.agent_lost_after_misses = 2;
            c.engines = vec![engine(1, "cert")];
        })
        .await;
        app.resource_group("h1").await;
        let user = app.user("crowd@x.org", "user", "default").await;
        let id = session_ids(
            &create_session(&app, &user, json!({"image": PYTHON, "scaling_group": "h1"})).await,
        )[0]
        .clone();
        let s = wait_status(&app, &user, &id, &["RUNNING"]).await;
        let container = s["containers"][0]["container_id"]
            .as_str()
            .unwrap()
            .to_string();
        let labels = docker_on(1, &["inspect", "-f", "{{json .Config.Labels}}", &container]);
        let labels: HashMap<String, String> = serde_json::from_slice(&labels.stdout).unwrap();
        let docker = crate::hosts::docker_words(1).join(" ");
        let mut run = format!("{docker} run -d --network none");
        for (k, v) in &labels {
            run.push_str(&format!(" --label '{k}={v}'"));
        }
        run.push_str(&format!(
            " --label bai-test-clone={id} {PYTHON} sleep infinity"
        ));
        let t = Instant::now();
        let made = std::process::Command::new("sh")
            .args([
                "-c",
                &format!("seq 200 | xargs -P 8 -I{{}} {run} >/dev/null"),
            ])
            .output()
            .unwrap();
        assert!(made.status.success(), "{made:?}");
        println!("200 idle containers made on host 1 in {:?}", t.elapsed());
        let started = Instant::now();
        let (mut samples, mut most) = (0, 0u64);
        while started.elapsed() < Duration::from_secs(60) {
            let all = agents_by_addr(&app).await;
            for addr in [LOCAL.to_string(), host_addr(1)] {
                assert_eq!(
                    all[&addr].0,
                    "ALIVE",
                    "{addr} after {:?} with 201 containers on host 1",
                    started.elapsed()
                );
            }
            most = most.max(all[&host_addr(1)].1["containers"].as_u64().unwrap_or(0));
            samples += 1;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        println!("201 containers on host 1: no agent LOST in {samples} samples over a minute");
        // The clones go first (by a label of their own), while the session still holds
        // them: ended first, the session's containers would be removed by the agent's
        // reconciliation at the same time, and a removal under way refuses the other.
        let t = Instant::now();
        let removed = std::process::Command::new("sh")
            .args(["-c", &format!(
                "D='{docker}'; \
                 $D ps -aq --filter label=bai-test-clone={id} | xargs -r -n 25 -P 4 $D rm -f >/dev/null && \
                 test -z \"$($D ps -aq --filter label=bai-test-clone={id})\""
            )])
            .output()
            .unwrap();
        assert!(
            removed.status.success(),
            "the clones are removed: {removed:?}"
        );
        println!("200 containers removed from host 1 in {:?}", t.elapsed());
        destroy(&app, &user, &id).await;
        assert_eq!(most, 201, "the usage samples counted every container");
    }
);

// Two configured engines that report one engine id (one engine listed twice here; hosts
// cloned from one disk image elsewhere) are refused at start, both endpoints named with the
// way out; never merged into one agent, never offered twice.
both_dbs!(
    two_endpoints_of_one_engine_id_are_refused,
    |db| async move {
        require_docker();
        let mut config = config_for(db).await;
        let link = config.data_dir.parent().unwrap().join("docker.sock");
        std::os::unix::fs::symlink("/var/run/docker.sock", &link).unwrap();
        let twin = format!("unix://{}", link.display());
        config.docker_endpoints = vec![LOCAL.to_string(), twin.clone()];
        let refused = match api::start(config).await {
            Ok(_) => panic!("a server with one engine listed twice started"),
            Err(e) => format!("{e:#}"),
        };
        assert!(
            refused.contains(&format!("{LOCAL} and {twin}")),
            "{refused}"
        );
        assert!(refused.contains("one engine id"), "{refused}");
        assert!(refused.contains("engine-id"), "{refused}");
    }
);

// A manager that alone drives a host stops: the leader's sweep (not a missed heartbeat)
// finds the host's agent silent and marks it LOST, and its session says `agent-lost`; when
// a manager drives it again, it is reconciled and the session stops saying it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_of_an_agent_the_sweep_finds_silent_say_so() {
    let started = Instant::now();
    require_docker();
    let _turn = turn().await;
    crate::hosts::hosts();
    let mut driver = spawn_with(Db::Postgres, |c| {
        c.heartbeat_secs = 1;
        c.agent_lost_after_misses = 2;
        c.lease_secs = 2;
        c.engines = vec![engine(2, "cert")];
    })
    .await;
    // The other manager reaches only its own host's engine.
    let other = driver
        .beside_with(|c| {
            c.engines = Vec::new();
        })
        .await;
    assert_eq!(driver.readyz().await["manager"]["role"], "leader");
    driver.resource_group("h2").await;
    let user = driver.user("far-away@x.org", "user", "default").await;
    let id = session_ids(
        &create_session(
            &driver,
            &user,
            json!({"image": PYTHON, "scaling_group": "h2"}),
        )
        .await,
    )[0]
    .clone();
    wait_status(&driver, &user, &id, &["RUNNING"]).await;
    // The driver stops; the other leads now and cannot reach host 2.
    driver.server.take().unwrap().stop().await.unwrap();
    let t = Instant::now();
    eventually("host 2's agent LOST by the sweep", WAIT, || async {
        (agents_by_addr(&other)
            .await
            .get(&host_addr(2))
            .map(|a| a.0.clone())
            == Some("LOST".into()))
        .then_some(())
    })
    .await;
    println!(
        "the sweep found host 2 silent {:?} after its driver stopped",
        t.elapsed()
    );
    let s = wait_status(&other, &user, &id, &["RUNNING"]).await;
    assert_eq!(s["status_info"], "agent-lost", "{s}");
    // Driven again: reconciled (the session kept: its container runs), then ALIVE.
    driver.restart().await;
    eventually("host 2's agent ALIVE again", WAIT, || async {
        (agents_by_addr(&other).await[&host_addr(2)].0 == "ALIVE").then_some(())
    })
    .await;
    eventually("the session no longer says agent-lost", WAIT, || async {
        let s = wait_status(&other, &user, &id, &["RUNNING"]).await;
        s["status_info"].is_null().then_some(())
    })
    .await;
    destroy(&other, &user, &id).await;
    took(
        "it::faults::sessions_of_an_agent_the_sweep_finds_silent_say_so",
        started,
    );
}

// PostgreSQL stops while launches are under way (each holding PREPARING while its bootstrap
// script runs, its container started) and comes back after more than twice the lease:
// requests meanwhile answer 503 `database unavailable` in bounded time; afterwards every
// session is RUNNING (its owner, alive all along, recorded it; no other manager took its
// work as a dead one's) with exactly its container, and nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_loses_no_launch_and_takes_no_live_managers_work() {
    let started = Instant::now();
    require_docker();
    let pg = OwnPg::get();
    let url = pg.fresh_database().await;
    let first = spawn_with(Db::Postgres, |c| {
        c.database_url = Some(url.clone());
        c.heartbeat_secs = 1;
        c.lease_secs = 2;
    })
    .await;
    let second = first.beside().await;
    let user = first.user("patient@x.org", "user", "default").await;
    first.image_min_cpu(PYTHON, "0.1").await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let body = create_session(
            &first,
            &user,
            json!({"image": PYTHON, "resources": "{\"cpu\": \"0.1\", \"mem\": \"320m\"}",
                   "bootstrap_script": "sleep 8"}),
        )
        .await;
        ids.extend(session_ids(&body));
    }
    for id in &ids {
        wait_status(&first, &user, id, &["PREPARING"]).await;
    }
    let instance = first.state().instance_id.clone();
    eventually("every launch's container started", WAIT, || async {
        let cs = docker(&[
            "ps",
            "-q",
            "--filter",
            &format!("label=ai.backend.bai-instance={instance}"),
        ]);
        (cs.lines().count() == ids.len()).then_some(())
    })
    .await;
    let back = PgBack;
    pg.stop();
    let outage = Instant::now();
    // Requests meanwhile: a clear 503 in bounded time, on GraphQL and REST.
    // (The caller is proven before anything else, from the database: the answer is the
    // edge's problem+json on GraphQL's path too.)
    for app in [&first, &second] {
        for (method, path) in [
            (reqwest::Method::POST, "/graphql"),
            (reqwest::Method::GET, "/folders"),
        ] {
            let t = Instant::now();
            let mut req = app.http.request(method, app.url(path)).bearer_auth(&user);
            if path == "/graphql" {
                req = req.json(&json!({"query": "{ compute_session_list(limit: 5, offset: 0) { total_count } }"}));
            }
            let resp = req.send().await.unwrap();
            let status = resp.status();
            let problem = resp.headers()["content-type"] == "application/problem+json";
            let body: Value = resp.json().await.unwrap();
            if problem {
                // Refused before the resolvers (the caller is proven from the database).
                assert_eq!(status, 503, "{path}: {body}");
                assert_eq!(body["code"], "SERVICE_UNAVAILABLE", "{body}");
                assert!(
                    body["title"]
                        .as_str()
                        .unwrap()
                        .starts_with("database unavailable"),
                    "{body}"
                );
            } else {
                // A GraphQL resolver's error (the caller was proven from the cache).
                assert_eq!(path, "/graphql", "REST answers problem+json: {body}");
                assert_eq!(code(&body), "SERVICE_UNAVAILABLE", "{body}");
                assert!(message(&body).starts_with("database unavailable"), "{body}");
            }
            assert!(
                t.elapsed() < Duration::from_secs(8),
                "{path}: {:?}",
                t.elapsed()
            );
        }
    }
    // Longer than twice the lease (2 s): every manager's row is stale when it comes back.
    let remaining = Duration::from_secs(10).saturating_sub(outage.elapsed());
    tokio::time::sleep(remaining).await;
    drop(back);
    println!("PostgreSQL was down for {:?}", outage.elapsed());
    let t = Instant::now();
    for id in &ids {
        let s = wait_status(&second, &user, id, &["RUNNING", "ERROR", "TERMINATED"]).await;
        assert_eq!(
            s["status"], "RUNNING",
            "a launch under way during the outage: {s}"
        );
    }
    println!(
        "every launch RUNNING {:?} after PostgreSQL was back",
        t.elapsed()
    );
    let cs = docker(&[
        "ps",
        "-a",
        "--filter",
        &format!("label=ai.backend.bai-instance={instance}"),
        "--format",
        "{{.State}} {{.Label \"ai.backend.session-id\"}}",
    ]);
    let mut seen: Vec<&str> = cs.lines().collect();
    seen.sort();
    let mut want: Vec<String> = ids.iter().map(|id| format!("running {id}")).collect();
    want.sort();
    assert_eq!(
        seen, want,
        "each session its one running container, nothing else"
    );
    for id in &ids {
        destroy(&second, &user, id).await;
    }
    eventually("no container left", WAIT, || async {
        docker(&[
            "ps",
            "-aq",
            "--filter",
            &format!("label=ai.backend.bai-instance={instance}"),
        ])
        .trim()
        .is_empty()
        .then_some(())
    })
    .await;
    took(
        "it::faults::a_database_outage_loses_no_launch_and_takes_no_live_managers_work",
        started,
    );
}
