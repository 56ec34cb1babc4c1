//! Compute sessions on the real Docker engine: lifecycle with live events, cgroup limits seen
//! from inside, batch results, scheduling predicates, validation, isolation, parallel
//! creates, and restarts that leave no orphans.
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::*;
use crate::{both_dbs, gql};

both_dbs!(interactive_session_lifecycle, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("researcher@x.org", "user", "default").await;
    let mut events =
        subscribe_op::<gql::SessionStatusChanges>(&app, &user, Default::default()).await;
    let body = create_session(&app, &user, json!({"image": PYTHON, "name": "my-notebook", "resources": "{\"cpu\": \"1\", \"mem\": \"512m\"}", "shmem": "128m", "environ": "{\"MY_VAR\": \"hi\"}"})).await;
    let id = session_ids(&body)[0].clone();
    // PENDING → … → RUNNING arrives live.
    let mut seen = Vec::new();
    while !seen.contains(&"RUNNING".to_string()) {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(30), events.next())
            .await
            .expect("event")
            .unwrap()
            .unwrap();
        let Message::Text(t) = msg else { continue };
        let v: Value = serde_json::from_str(t.as_str()).unwrap();
        let e = &v["payload"]["data"]["session_status_changes"];
        assert_eq!(e["name"], "my-notebook");
        seen.push(e["status"].as_str().unwrap().to_string());
    }
    assert_eq!(
        seen.first().map(String::as_str),
        Some("PENDING"),
        "{seen:?}"
    );
    assert!(
        seen.contains(&"SCHEDULED".to_string()) && seen.contains(&"PREPARING".to_string()),
        "{seen:?}"
    );
    let s = wait_status(&app, &user, &id, &["RUNNING"]).await;
    let container = s["containers"][0]["container_id"]
        .as_str()
        .unwrap()
        .to_string();
    // The engine really runs it with the requested limits, unprivileged and not as root.
    let inspect: Value = serde_json::from_str(&docker(&["inspect", &container])).unwrap();
    let hc = &inspect[0]["HostConfig"];
    assert_eq!(hc["NanoCpus"], 1_000_000_000i64);
    assert_eq!(hc["Memory"], 512i64 * 1024 * 1024);
    assert_eq!(hc["MemorySwap"], hc["Memory"]);
    assert_eq!(hc["ShmSize"], 128i64 * 1024 * 1024);
    assert_eq!(hc["Privileged"], false);
    assert!(hc["PidsLimit"].as_i64().unwrap() > 0);
    assert_eq!(hc["CapDrop"], json!(["ALL"]));
    assert!(hc["SecurityOpt"].to_string().contains("no-new-privileges"));
    assert!(!inspect[0]["Mounts"].to_string().contains("docker.sock"));
    assert_eq!(inspect[0]["Config"]["User"], "work");
    let env = inspect[0]["Config"]["Env"].to_string();
    assert!(
        env.contains("MY_VAR=hi")
            && env.contains(&format!("BACKENDAI_SESSION_ID={id}"))
            && env.contains("BACKENDAI_USER_EMAIL=researcher@x.org"),
        "{env}"
    );
    let cg = docker(&[
        "exec",
        &container,
        "cat",
        "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]);
    assert_eq!(
        cg.split_whitespace().collect::<Vec<_>>(),
        ["100000", "536870912"],
        "cgroup limits inside the container"
    );
    docker(&[
        "exec",
        &container,
        "sh",
        "-c",
        "echo scratch > /home/work/file",
    ]);

    let agents = app
        .admin_op::<gql::sessions::Agents>(Default::default())
        .await;
    let occupied: Value =
        serde_json::from_str(agents["agents"][0]["occupied_slots"].as_str().unwrap()).unwrap();
    assert_eq!(occupied["cpu"], "1");
    // Another user cannot see or terminate it.
    let other = app.user("other@x.org", "user", "default").await;
    assert_code(
        &app.op::<gql::SessionState>(
            Some(&other),
            gql::session_state::Variables { id: id.clone() },
        )
        .await,
        "NOT_FOUND",
    );
    assert_code(
        &app.op::<gql::DestroySession>(
            Some(&other),
            gql::destroy_session::Variables { id: id.clone() },
        )
        .await,
        "NOT_FOUND",
    );
    let theirs = app
        .op_ok::<gql::SessionList>(
            Some(&other),
            gql::session_list::Variables {
                limit: 10,
                ..Default::default()
            },
        )
        .await;
    assert_eq!(theirs["compute_session_list"]["total_count"], 0);

    let done = app
        .op_ok::<gql::sessions::DestroySessionState>(
            Some(&user),
            gql::sessions::destroy_session_state::Variables { id: id.clone() },
        )
        .await;
    assert_eq!(
        done["destroy_session"]["session"],
        json!({"status": "TERMINATED", "status_info": "user-requested"})
    );
    assert_eq!(
        docker(&["ps", "-aq", "--filter", &format!("id={container}")]),
        "",
        "container removed"
    );
    let scratch = docker(&["volume", "ls", "-q", "--filter", "name=bai-scratch-"]);
    let kernel_scratch: Vec<&str> = scratch
        .lines()
        .filter(|v| inspect[0]["Mounts"].to_string().contains(v))
        .collect();
    assert!(
        kernel_scratch.is_empty(),
        "scratch /home/work removed with the session"
    );
    let finished = app
        .op_ok::<gql::SessionList>(
            Some(&user),
            gql::session_list::Variables {
                limit: 10,
                status: Some("TERMINATED,CANCELLED".into()),
                ..Default::default()
            },
        )
        .await;
    let item = &finished["compute_session_list"]["items"][0];
    assert_eq!(item["name"], "my-notebook");
    let history: Value = serde_json::from_str(item["status_history"].as_str().unwrap()).unwrap();
    for st in [
        "PENDING",
        "SCHEDULED",
        "PREPARING",
        "RUNNING",
        "TERMINATING",
        "TERMINATED",
    ] {
        assert!(history.get(st).is_some(), "{st} missing in {history}");
    }
    let agents = app
        .admin_op::<gql::sessions::Agents>(Default::default())
        .await;
    assert_eq!(agents["agents"][0]["occupied_slots"], "{}");
    assert_code(
        &app.op::<gql::DestroySession>(
            Some(&user),
            gql::destroy_session::Variables { id: id.clone() },
        )
        .await,
        "BAD_REQUEST",
    );
});

both_dbs!(batch_sessions_report_limits_and_results, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("batch@x.org", "user", "default").await;
    let ok = create_session(&app, &user, json!({
        "image": PYTHON, "type": "batch", "resources": "{\"cpu\": \"0.5\", \"mem\": \"384m\"}",
        "startup_command": "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/memory/memory.limit_in_bytes; python3 -c 'import numpy; print(numpy.arange(3).sum())'",
    }))
    .await;
    // cpu 0.5 is below the image minimum (1): refused, not adjusted, when given explicitly.
    assert_code(&ok, "BAD_REQUEST");
    let ok = create_session(&app, &user, json!({
        "image": PYTHON, "type": "batch", "resources": "{\"cpu\": \"1\", \"mem\": \"384m\"}",
        "startup_command": "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/memory/memory.limit_in_bytes; python3 -c 'import numpy; print(numpy.arange(3).sum())'",
    }))
    .await;
    let fail = create_session(
        &app,
        &user,
        json!({"image": PYTHON, "type": "batch", "startup_command": "echo failing >&2; exit 3"}),
    )
    .await;
    let ok_id = session_ids(&ok)[0].clone();
    let fail_id = session_ids(&fail)[0].clone();
    let s = wait_status(&app, &user, &ok_id, &["TERMINATED", "ERROR"]).await;
    assert_eq!(s["status"], "TERMINATED", "{s}");
    assert_eq!(s["result"], "success");
    assert_eq!(
        serde_json::from_str::<Value>(s["status_data"].as_str().unwrap()).unwrap(),
        json!({"kernel": {"exit_code": 0}})
    );
    let logs = app
        .op_ok::<gql::SessionLogs>(
            Some(&user),
            gql::session_logs::Variables { id: ok_id.clone() },
        )
        .await;
    let lines: Vec<&str> = logs["session_logs"].as_str().unwrap().lines().collect();
    assert_eq!(
        lines,
        ["100000", &(384u64 * 1024 * 1024).to_string(), "3"],
        "cgroup limits and numpy output"
    );
    let f = wait_status(&app, &user, &fail_id, &["TERMINATED", "ERROR"]).await;
    assert_eq!(f["result"], "failure");
    assert_eq!(f["containers"][0]["exit_code"], 3);
    let flogs = app
        .op_ok::<gql::SessionLogs>(
            Some(&user),
            gql::session_logs::Variables {
                id: fail_id.clone(),
            },
        )
        .await;
    assert!(flogs["session_logs"].as_str().unwrap().contains("failing"));
    // Unspecified cpu/mem follow the image: 1 core and 256m + 64m shared memory.
    let sized = app
        .op_ok::<gql::sessions::SessionDetail>(
            Some(&user),
            gql::sessions::session_detail::Variables { id: fail_id },
        )
        .await;
    let req: Value = serde_json::from_str(
        sized["compute_session"]["requested_slots"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        req,
        json!({"cpu": "1", "mem": (320u64 * 1024 * 1024).to_string()})
    );
});

// Session lists keep `total_count` in a cache (counting 10,000 rows per request was the
// list's cost): a count follows every change at once, and callers with different visibility
// never share one.
both_dbs!(
    session_counts_follow_changes_and_never_cross_callers,
    |db| async move {
        require_docker();
        let app = spawn(db).await;
        let alice = app.user("count-a@x.org", "user", "default").await;
        let bob = app.user("count-b@x.org", "user", "default").await;
        let count = |token: String, status: &'static str| {
            let app = &app;
            async move {
                app.op_ok::<gql::SessionList>(
                    Some(&token),
                    gql::session_list::Variables {
                        limit: 5,
                        status: Some(status.into()),
                        ..Default::default()
                    },
                )
                .await["compute_session_list"]["total_count"]
                    .as_u64()
                    .unwrap()
            }
        };
        let live = "PENDING,SCHEDULED,PREPARING,PULLING,RUNNING";
        assert_eq!(count(alice.clone(), live).await, 0);
        assert_eq!(count(bob.clone(), live).await, 0);
        let id = session_ids(
            &create_session(&app, &alice, json!({"image": PYTHON, "name": "counted"})).await,
        )[0]
        .clone();
        // At once, not after the cache's lifetime; and only for her.
        assert_eq!(count(alice.clone(), live).await, 1);
        assert_eq!(count(bob.clone(), live).await, 0);
        let named = app
            .admin_op::<gql::SessionList>(gql::session_list::Variables {
                limit: 5,
                filter: Some("name == \"counted\"".into()),
                ..Default::default()
            })
            .await;
        assert_eq!(named["compute_session_list"]["total_count"], 1, "{named}");
        wait_status(&app, &alice, &id, &["RUNNING"]).await;
        destroy(&app, &alice, &id).await;
        wait_status(&app, &alice, &id, &["TERMINATED"]).await;
        assert_eq!(count(alice.clone(), live).await, 0);
        assert_eq!(count(alice.clone(), "TERMINATED").await, 1);
        assert_eq!(count(bob.clone(), "TERMINATED").await, 0);
    }
);

both_dbs!(pending_sessions_say_why, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("quota@x.org", "user", "default").await;
    app.use_policy(
        &user,
        "one-at-a-time",
        gql::create_policy::CreateKeyPairResourcePolicyInput {
            default_for_unspecified: "UNLIMITED".into(),
            total_resource_slots: json!("{\"cpu\": \"4\"}"),
            max_concurrent_sessions: 1,
            max_containers_per_session: 1,
            idle_timeout: 0,
            ..Default::default()
        },
    )
    .await;

    // Beyond the policy's absolute limit: refused at once with a clear message.
    let refused = create_session(
        &app,
        &user,
        json!({"image": PYTHON, "resources": "{\"cpu\": \"8\"}"}),
    )
    .await;
    assert_code(&refused, "BAD_REQUEST");
    assert!(
        message(&refused).contains("exceeds your resource policy"),
        "{refused}"
    );

    let first =
        session_ids(&create_session(&app, &user, json!({"image": PYTHON, "name": "first"})).await)
            [0]
        .clone();
    wait_status(&app, &user, &first, &["RUNNING"]).await;
    let second =
        session_ids(&create_session(&app, &user, json!({"image": PYTHON, "name": "second"})).await)
            [0]
        .clone();
    let why = eventually("the second session's failed predicates", WAIT, || async {
        let s = app
            .op_ok::<gql::SessionState>(
                Some(&user),
                gql::session_state::Variables { id: second.clone() },
            )
            .await;
        (s["compute_session"]["status_info"] == "predicate-checks-failed")
            .then(|| s["compute_session"].clone())
    })
    .await;
    assert_eq!(why["status"], "PENDING", "{why}");
    let data: Value = serde_json::from_str(why["status_data"].as_str().unwrap()).unwrap();
    assert_eq!(
        data["scheduler"]["failed_predicates"][0]["name"], "concurrency",
        "{data}"
    );
    assert!(
        data["scheduler"]["failed_predicates"][0]["msg"]
            .as_str()
            .unwrap()
            .contains("at most 1 sessions"),
        "{data}"
    );
    // When the first ends, the second starts by itself.
    destroy(&app, &user, &first).await;
    wait_status(&app, &user, &second, &["RUNNING"]).await;

    // Larger than any agent: pending with the reason, and cancellable.
    let admin_big = session_ids(
        &create_session(
            &app,
            &app.admin_token,
            json!({"image": PYTHON, "resources": "{\"cpu\": \"64\"}"}),
        )
        .await,
    )[0]
    .clone();
    let reason = eventually("the big session's pending reason", WAIT, || async {
        let s = app
            .admin_op::<gql::SessionState>(gql::session_state::Variables {
                id: admin_big.clone(),
            })
            .await;
        s["compute_session"]["status_data"]
            .as_str()
            .map(str::to_string)
    })
    .await;
    assert!(reason.contains("large enough"), "{reason}");
    let cancelled = app
        .admin_op::<gql::sessions::DestroySessionState>(
            gql::sessions::destroy_session_state::Variables { id: admin_big },
        )
        .await;
    assert_eq!(
        cancelled["destroy_session"]["session"]["status"],
        "CANCELLED"
    );
    destroy(&app, &user, &second).await;

    // What is left, and which presets fit (2 CPUs on this agent: `large` does not).
    let usage = app
        .op_ok::<gql::ResourceUsage>(Some(&user), Default::default())
        .await;
    let u = &usage["resource_usage"];
    assert_eq!(u["concurrency_limit"], 1);
    assert_eq!(
        serde_json::from_str::<Value>(u["keypair_remaining"].as_str().unwrap()).unwrap()["cpu"],
        "4"
    );
    let presets: Vec<(String, bool)> = u["presets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["allocatable"].as_bool().unwrap(),
            )
        })
        .collect();
    assert!(
        presets.contains(&("small".to_string(), true)),
        "{presets:?}"
    );
    assert!(
        presets.contains(&("large".to_string(), false)),
        "{presets:?}"
    );
});

both_dbs!(session_requests_are_validated, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("valid@x.org", "user", "default").await;
    for (props, needle) in [
        (json!({"image": "no/such:image"}), "not found"),
        (
            json!({"image": PYTHON, "name": "a b"}),
            "Invalid session name",
        ),
        (
            json!({"image": PYTHON, "name": "abc"}),
            "Invalid session name",
        ),
        (
            json!({"image": PYTHON, "resources": "{\"mem\": \"512m\"}", "shmem": "512m"}),
            "Shared memory",
        ),
        (
            json!({"image": PYTHON, "resources": "{\"tpu\": \"1\"}"}),
            "unknown resource slot",
        ),
        (
            json!({"image": PYTHON, "resources": "{\"mem\": \"100m\"}"}),
            "at least",
        ),
        // At the image minimum there is no room left for the shared memory.
        (
            json!({"image": PYTHON, "resources": "{\"mem\": \"256m\"}"}),
            "plus 64m of shared memory",
        ),
        (
            json!({"image": PYTHON, "environ": "{\"1BAD\": \"x\"}"}),
            "environment variable",
        ),
        (
            json!({"image": PYTHON, "environ": "{\"BACKENDAI_SESSION_ID\": \"x\"}"}),
            "cannot be overridden",
        ),
        (json!({"image": PYTHON, "type": "batch"}), "startup command"),
        (
            json!({"image": PYTHON, "type": "inference"}),
            "invalid session type",
        ),
        (
            json!({"image": PYTHON, "scaling_group": "elsewhere"}),
            "not found",
        ),
        (json!({"image": PYTHON, "group": "not-mine"}), "not found"),
        (json!({"image": PYTHON, "count": 0}), "count"),
        (json!({"image": PYTHON, "preset": "nope"}), "not found"),
    ] {
        let body = create_session(&app, &user, props.clone()).await;
        assert!(body["errors"].is_array(), "{props}: {body}");
        assert!(message(&body).contains(needle), "{props}: {body}");
    }
    // A preset plus a name, twice: the live name is taken.
    let first = create_session(
        &app,
        &user,
        json!({"image": PYTHON, "name": "dup-name", "preset": "small"}),
    )
    .await;
    assert_eq!(session_ids(&first).len(), 1);
    let again = create_session(&app, &user, json!({"image": PYTHON, "name": "dup-name"})).await;
    assert_code(&again, "CONFLICT");
    // count creates several identical sessions.
    let many = create_session(
        &app,
        &user,
        json!({"image": PYTHON, "name": "grid", "count": 3, "resources": "{\"cpu\": \"64\"}"}),
    )
    .await;
    let names: Vec<&str> = many["data"]["create_session"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["grid-1", "grid-2", "grid-3"]);
    let ids: Vec<String> = session_ids(&many)
        .into_iter()
        .chain(session_ids(&first))
        .collect();
    let res = app
        .op_ok::<gql::DestroySessions>(Some(&user), gql::destroy_sessions::Variables { ids })
        .await;
    assert!(
        res["destroy_sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["ok"] == true),
        "{res}"
    );
});

both_dbs!(parallel_creates_never_overcommit, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("burst@x.org", "user", "default").await;
    let futures = (0..50).map(|_| {
        create_session(
            &app,
            &user,
            json!({"image": PYTHON, "resources": "{\"cpu\": \"1\", \"mem\": \"320m\"}"}),
        )
    });
    let bodies = futures_util::future::join_all(futures).await;
    let ids: Vec<String> = bodies.iter().flat_map(session_ids).collect();
    assert_eq!(ids.len(), 50);
    // The agent offers 2 CPUs: never more than 2 sessions hold resources at once. Sampled
    // while the queue drains: the sleep spaces the samples over time, it waits for nothing.
    for _ in 0..30 {
        let list = app
            .op_ok::<gql::SessionList>(
                Some(&user),
                gql::session_list::Variables {
                    limit: 100,
                    status: Some("SCHEDULED,PREPARING,RUNNING,TERMINATING".into()),
                    ..Default::default()
                },
            )
            .await;
        assert!(
            list["compute_session_list"]["total_count"]
                .as_u64()
                .unwrap()
                <= 2,
            "{list}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let agents = app
        .admin_op::<gql::sessions::Agents>(Default::default())
        .await;
    let occ: Value =
        serde_json::from_str(agents["agents"][0]["occupied_slots"].as_str().unwrap()).unwrap();
    assert!(
        occ["cpu"].as_str().unwrap_or("0").parse::<f64>().unwrap() <= 2.0,
        "{agents}"
    );
    let res = app
        .op_ok::<gql::DestroySessions>(Some(&user), gql::destroy_sessions::Variables { ids })
        .await;
    assert!(
        res["destroy_sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["ok"] == true)
    );
});

both_dbs!(restart_leaves_no_orphans, |db| async move {
    require_docker();
    let mut app = spawn(db).await;
    let user = app.user("restart@x.org", "user", "default").await;
    let keep = session_ids(
        &create_session(&app, &user, json!({"image": PYTHON, "name": "survivor"})).await,
    )[0]
    .clone();
    let interrupted = session_ids(
        &create_session(&app, &user, json!({"image": PYTHON, "name": "interrupted"})).await,
    )[0]
    .clone();
    let keep_s = wait_status(&app, &user, &keep, &["RUNNING"]).await;
    let int_s = wait_status(&app, &user, &interrupted, &["RUNNING"]).await;
    let keep_container = keep_s["containers"][0]["container_id"]
        .as_str()
        .unwrap()
        .to_string();
    let int_container = int_s["containers"][0]["container_id"]
        .as_str()
        .unwrap()
        .to_string();
    // Pretend the server died mid-launch of `interrupted`: its record says PREPARING while
    // its container exists.
    {
        use sea_orm::{ActiveModelTrait, EntityTrait, IntoActiveModel, Set};
        let db = &app.state().db;
        let id: uuid::Uuid = interrupted.parse().unwrap();
        let s = entity::sessions::Entity::find_by_id(id)
            .one(db)
            .await
            .unwrap()
            .unwrap();
        let mut m = s.into_active_model();
        m.status = Set(entity::enums::SessionStatus::Preparing);
        m.update(db).await.unwrap();
    }
    app.restart().await;
    let user = app.login("restart@x.org", USER_PASSWORD).await;
    let s = wait_status(&app, &user, &interrupted, &["ERROR"]).await;
    assert_eq!(s["status_info"], "server-restarted");
    assert_eq!(
        docker(&["ps", "-aq", "--filter", &format!("id={int_container}")]),
        "",
        "no orphan container"
    );
    let k = wait_status(&app, &user, &keep, &["RUNNING"]).await;
    assert_eq!(
        k["containers"][0]["container_id"],
        keep_container.as_str(),
        "a running session survives a restart"
    );
    // Its container vanishes while the server is down: marked on the next start.
    app.server.take().unwrap().stop().await.unwrap();
    docker(&["rm", "-f", &keep_container]);
    app.restart().await;
    let user = app.login("restart@x.org", USER_PASSWORD).await;
    let k = wait_status(&app, &user, &keep, &["ERROR"]).await;
    assert_eq!(k["status_info"], "container-lost");
    let agents = app
        .admin_op::<gql::sessions::Agents>(Default::default())
        .await;
    let agent = &agents["agents"][0];
    assert_eq!(
        json!({"status": agent["status"], "occupied_slots": agent["occupied_slots"]}),
        json!({"status": "ALIVE", "occupied_slots": "{}"}),
        "no leaked allocation: {agents}"
    );
});

both_dbs!(agents_are_listed_for_superadmins, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let list = app
        .admin_op::<gql::sessions::AgentList>(gql::sessions::agent_list::Variables {
            status: Some("ALIVE".into()),
        })
        .await;
    let a = &list["agent_list"]["items"][0];
    assert_eq!(list["agent_list"]["total_count"], 1);
    assert_eq!(a["status"], "ALIVE");
    assert_eq!(a["scaling_group"], "default");
    assert_eq!(a["addr"], "unix:///var/run/docker.sock");
    let slots: Value = serde_json::from_str(a["available_slots"].as_str().unwrap()).unwrap();
    assert!(slots["cpu"].as_str().unwrap().parse::<f64>().unwrap() >= 1.0);
    assert!(
        slots.get("cuda.device").is_none(),
        "no GPUs without a driver"
    );
    let user = app.user("peek@x.org", "user", "default").await;
    assert_code(
        &app.op::<gql::sessions::Agents>(Some(&user), Default::default())
            .await,
        "FORBIDDEN",
    );
    let images = app
        .op_ok::<gql::Images>(Some(&user), Default::default())
        .await;
    let names: Vec<&str> = images["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&PYTHON) && names.contains(&"bai.local/stable/cpp:12-debian12"),
        "{names:?}"
    );
    let rescan = app.admin_op::<gql::RescanImages>(Default::default()).await;
    assert_eq!(rescan["rescan_images"]["ok"], true);
});

both_dbs!(idle_sessions_are_terminated, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("idle@x.org", "user", "default").await;
    app.use_policy(
        &user,
        "impatient",
        gql::create_policy::CreateKeyPairResourcePolicyInput {
            default_for_unspecified: "UNLIMITED".into(),
            total_resource_slots: json!("{}"),
            max_concurrent_sessions: 0,
            max_containers_per_session: 1,
            idle_timeout: 2,
            ..Default::default()
        },
    )
    .await;
    let id = session_ids(&create_session(&app, &user, json!({"image": PYTHON})).await)[0].clone();
    wait_status(&app, &user, &id, &["RUNNING"]).await;
    let s = wait_status(&app, &user, &id, &["TERMINATED"]).await;
    assert_eq!(s["status_info"], "idle-timeout");
});

both_dbs!(live_usage_of_sessions_and_agents, |db| async move {
    require_docker();
    let app = spawn_with(db, |c| c.heartbeat_secs = 1).await;
    let user = app.user("stats@x.org", "user", "default").await;
    let id = session_ids(
        &create_session(
            &app,
            &user,
            json!({"image": PYTHON, "resources": "{\"cpu\": \"1\", \"mem\": \"512m\"}"}),
        )
        .await,
    )[0]
    .clone();
    let s = wait_status(&app, &user, &id, &["RUNNING"]).await;
    let container = s["containers"][0]["container_id"]
        .as_str()
        .unwrap()
        .to_string();
    // Keep one core busy and hold some memory inside the session.
    docker(&[
        "exec",
        "-d",
        &container,
        "python3",
        "-c",
        "x = bytearray(64 * 1024 * 1024)\nwhile True: pass",
    ]);
    // Network traffic out of the session: 300 datagrams of 1,000 bytes to its gateway (or,
    // on a network without one, the bridge's first address; the frames leave its interface
    // whether or not anything answers), and a
    // file written through to disk (block I/O, where the engine accounts it).
    docker(&[
        "exec",
        &container,
        "python3",
        "-c",
        "import os, socket, struct\n\
         rows = [l.split() for l in open('/proc/net/route').readlines()[1:]]\n\
         ip = lambda h: socket.inet_ntoa(struct.pack('<L', int(h, 16)))\n\
         gws = [r[2] for r in rows if r[2] != '00000000']\n\
         gw = ip(gws[0]) if gws else ip('%08X' % (int(rows[0][1], 16) + (1 << 24)))\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         [s.sendto(b'x' * 1000, (gw, 9)) for _ in range(300)]\n\
         f = open('/tmp/blk', 'wb'); f.write(os.urandom(4 << 20)); f.flush(); os.fsync(f.fileno())",
    ]);
    // session_stats polls the engine (it does not listen on the event bus): the first
    // sample is what it is waited for by.
    let mut stats = subscribe_op_sent::<gql::SessionStats>(
        &app,
        &user,
        gql::session_stats::Variables {
            session_id: id.clone(),
            interval_secs: Some(1),
        },
    )
    .await;
    let mut best = (0.0f64, 0i64);
    let mut net_tx = 0i64;
    for _ in 0..6 {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(20), stats.next())
            .await
            .expect("stats")
            .unwrap()
            .unwrap();
        let Message::Text(t) = msg else { continue };
        let v: Value = serde_json::from_str(t.as_str()).unwrap();
        let s = &v["payload"]["data"]["session_stats"];
        assert_eq!(s["mem_limit_bytes"], 512i64 * 1024 * 1024, "{v}");
        // No GPU held (and none on this machine): no GPU figures, rather than zeros.
        assert!(
            s["gpu_used_pct"].is_null() && s["gpu_mem_bytes"].is_null(),
            "{v}"
        );
        best = (
            best.0.max(s["cpu_used_pct"].as_f64().unwrap()),
            best.1.max(s["mem_bytes"].as_i64().unwrap()),
        );
        // Block I/O reads as Docker reports it: this machine's cgroup v1 Docker accounts
        // none (0), a cgroup v2 host the fsynced 4 MiB; never negative or missing.
        for f in ["io_read_bytes", "io_write_bytes", "net_rx_bytes"] {
            assert!(s[f].as_i64().is_some_and(|v| v >= 0), "{f}: {v}");
        }
        net_tx = net_tx.max(s["net_tx_bytes"].as_i64().unwrap());
    }
    assert!(
        net_tx >= 300_000,
        "the 300 datagrams show as bytes sent: {net_tx}"
    );
    // A busy loop against an idle container (~0%): the margin allows for a loaded machine.
    assert!(best.0 > 10.0, "a busy core shows as CPU use: {best:?}");
    assert!(
        best.1 > 64 * 1024 * 1024,
        "the 64 MiB buffer shows as memory use: {best:?}"
    );
    let agent_cpu = eventually("the agent's live CPU and memory use", WAIT, || async {
        let a = app
            .admin_op::<gql::sessions::Agents>(Default::default())
            .await;
        let cpu = a["agents"][0]["cpu_cur_pct"].as_f64().unwrap();
        // This machine has no GPU: no GPU figures, and no cuda metrics in live_stat.
        assert!(a["agents"][0]["gpu_cur_pct"].is_null(), "{a}");
        assert!(a["agents"][0]["gpu_mem_cur_bytes"].is_null(), "{a}");
        assert!(
            !a["agents"][0]["live_stat"]
                .as_str()
                .unwrap_or("")
                .contains("cuda_util"),
            "{a}"
        );
        (cpu > 10.0 && a["agents"][0]["mem_cur_bytes"].as_i64().unwrap() > 64 * 1024 * 1024)
            .then_some(cpu)
    })
    .await;
    assert!(agent_cpu > 10.0, "agent live CPU: {agent_cpu}");
    destroy(&app, &user, &id).await;
});

both_dbs!(finished_sessions_never_change_again, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("final@x.org", "user", "default").await;
    let id = session_ids(
        &create_session(
            &app,
            &user,
            json!({"image": PYTHON, "resources": "{\"cpu\": \"64\"}"}),
        )
        .await,
    )[0]
    .clone();
    let cancelled = app
        .op_ok::<gql::sessions::DestroySessionState>(
            Some(&user),
            gql::sessions::destroy_session_state::Variables { id: id.clone() },
        )
        .await;
    assert_eq!(
        cancelled["destroy_session"]["session"]["status"],
        "CANCELLED"
    );
    // What a late scheduler pass would try: it must be refused, not resurrect the session.
    let late = api::sessions::apply(
        app.state(),
        id.parse().unwrap(),
        entity::enums::SessionStatus::Scheduled,
        Default::default(),
    )
    .await;
    assert_eq!(late.unwrap_err().code, api::error::ErrorCode::Conflict);
    // A whole scheduling pass, run here and finished before the session is read again.
    api::scheduler::schedule_once(app.state())
        .await
        .expect("a scheduling pass");
    let s = app
        .op_ok::<gql::SessionState>(Some(&user), gql::session_state::Variables { id })
        .await;
    let s = &s["compute_session"];
    assert_eq!(
        json!({"status": s["status"], "status_info": s["status_info"]}),
        json!({"status": "CANCELLED", "status_info": "user-requested"}),
        "{s}"
    );
});

/// Starts `code` in `session` (`execute_in_session`); the whole answer, errors included.
pub(crate) async fn execute(
    app: &TestApp,
    token: &str,
    session: &str,
    mode: &str,
    code: Option<&str>,
    options: Option<Value>,
) -> Value {
    app.op::<gql::ExecuteInSession>(
        Some(token),
        gql::execute_in_session::Variables {
            session_id: session.into(),
            mode: mode.into(),
            code: code.map(str::to_string),
            options,
        },
    )
    .await
}

pub(crate) async fn run_to_end(
    app: &TestApp,
    token: &str,
    session: &str,
    mode: &str,
    code: &str,
    options: Value,
) -> (String, String, i64) {
    let started = execute(
        app,
        token,
        session,
        mode,
        Some(code),
        Some(json!(options.to_string())),
    )
    .await;
    assert!(started.get("errors").is_none(), "{started}");
    let run = started["data"]["execute_in_session"]["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_string();
    // Follow it live; chunks produced before the subscription are replayed first (so nothing
    // is waited for before reading).
    let mut ws = subscribe_op_sent::<gql::ExecutionOutput>(
        app,
        token,
        gql::execution_output::Variables { run_id: run },
    )
    .await;
    let (mut out, mut err, mut seqs) = (String::new(), String::new(), Vec::new());
    loop {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(60), ws.next())
            .await
            .expect("output")
            .unwrap()
            .unwrap();
        let Message::Text(t) = msg else { continue };
        let v: Value = serde_json::from_str(t.as_str()).unwrap();
        let c = &v["payload"]["data"]["execution_output"];
        seqs.push(c["seq"].as_u64().unwrap());
        match c["stream"].as_str().unwrap() {
            "stdout" => out.push_str(c["data"].as_str().unwrap()),
            "stderr" => err.push_str(c["data"].as_str().unwrap()),
            "finished" => {
                assert_eq!(
                    seqs,
                    (0..seqs.len() as u64).collect::<Vec<_>>(),
                    "no gaps or repeats"
                );
                return (out, err, c["exit_code"].as_i64().unwrap());
            }
            other => panic!("{other}"),
        }
    }
}

both_dbs!(code_runs_inside_sessions, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("coder@x.org", "user", "default").await;
    let id = session_ids(&create_session(&app, &user, json!({"image": PYTHON})).await)[0].clone();
    let s = wait_status(&app, &user, &id, &["RUNNING"]).await;
    let c = s["containers"][0]["container_id"]
        .as_str()
        .unwrap()
        .to_string();

    assert_eq!(
        run_to_end(
            &app,
            &user,
            &id,
            "query",
            "print(\"hello world\")",
            json!({})
        )
        .await,
        ("hello world\n".into(), String::new(), 0)
    );
    let (out, err, code) = run_to_end(
        &app,
        &user,
        &id,
        "query",
        "import sys\nprint('partial')\nsys.stderr.write('bad\\n')\nsys.exit(3)",
        json!({}),
    )
    .await;
    // As on Backend.AI's Python kernel, SystemExit's traceback follows on stderr.
    assert_eq!((out.as_str(), code), ("partial\n", 3));
    assert!(
        err.starts_with("bad\nTraceback") && err.ends_with("SystemExit: 3\n"),
        "{err}"
    );
    docker(&[
        "exec",
        "-u",
        "work",
        &c,
        "sh",
        "-c",
        "printf 'import sys\\nprint(sys.argv[1:])\\n' > /home/work/myscript.py",
    ]);
    let (out, _, code) = run_to_end(
        &app,
        &user,
        &id,
        "batch",
        "",
        json!({"clean": "*", "build": "*", "exec": "python3 myscript.py arg1 arg2"}),
    )
    .await;
    assert_eq!((out.as_str(), code), ("['arg1', 'arg2']\n", 0));
    assert_code(
        &execute(&app, &user, &id, "batch", None, Some(json!("{}"))).await,
        "BAD_REQUEST",
    );

    // A program that waits for input gets it.
    let started = execute(
        &app,
        &user,
        &id,
        "query",
        Some("name = input()\nprint('hi', name)"),
        None,
    )
    .await;
    assert!(started.get("errors").is_none(), "{started}");
    let run = started["data"]["execute_in_session"]["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_string();
    app.op_ok::<gql::SendExecutionInput>(
        Some(&user),
        gql::send_execution_input::Variables {
            run_id: run.clone(),
            input: "bai\n".into(),
        },
    )
    .await;
    let done = eventually("the execution to finish", WAIT, || async {
        let e = app
            .op_ok::<gql::Execution>(
                Some(&user),
                gql::execution::Variables {
                    run_id: run.clone(),
                },
            )
            .await;
        (e["execution"]["status"] == "finished").then(|| e["execution"].clone())
    })
    .await;
    assert_eq!(done["exit_code"], 0, "{done}");
    assert_eq!(
        done["console"][0],
        json!({"stream": "stdout", "data": "hi bai\n"})
    );

    // Others see nothing of it.
    let other = app.user("peeker@x.org", "user", "default").await;
    assert_code(
        &app.op::<gql::Execution>(Some(&other), gql::execution::Variables { run_id: run })
            .await,
        "NOT_FOUND",
    );
    assert_code(
        &execute(&app, &other, &id, "query", Some("1"), None).await,
        "NOT_FOUND",
    );
    destroy(&app, &user, &id).await;
    assert_code(
        &execute(&app, &user, &id, "query", Some("1"), None).await,
        "BAD_REQUEST",
    );

    // The C++ environment compiles and runs a query.
    let cpp = session_ids(
        &create_session(
            &app,
            &user,
            json!({"image": "bai.local/stable/cpp:12-debian12"}),
        )
        .await,
    )[0]
    .clone();
    wait_status(&app, &user, &cpp, &["RUNNING"]).await;
    let (out, _, code) = run_to_end(
        &app,
        &user,
        &cpp,
        "query",
        "#include <cstdio>\nint main(){ std::printf(\"%d\\n\", 6*7); return 0; }",
        json!({}),
    )
    .await;
    assert_eq!((out.as_str(), code), ("42\n", 0));
    destroy(&app, &user, &cpp).await;
});

pub(crate) async fn terminal_ws(
    app: &TestApp,
    token: &str,
    id: &str,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    tokio_tungstenite::tungstenite::Error,
> {
    let mut req = app
        .url(&format!("/sessions/{id}/terminal"))
        .replace("http://", "ws://")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    tokio_tungstenite::connect_async(req)
        .await
        .map(|(ws, _)| ws)
}

/// Reads terminal output until `needle` appears (15 s at most).
pub(crate) async fn read_until<S>(ws: &mut S, needle: &str) -> String
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let mut screen = String::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(15);
    while !screen.contains(needle) {
        let msg = tokio::time::timeout_at(deadline, ws.next())
            .await
            .unwrap_or_else(|_| panic!("never saw {needle:?} in {screen:?}"))
            .unwrap()
            .unwrap();
        if let Message::Binary(b) = msg {
            screen.push_str(&String::from_utf8_lossy(&b));
        }
    }
    screen
}

// At shutdown, a live terminal and a live execution stream are closed with 1001 and the
// reason, not cut.
both_dbs!(
    live_websockets_close_with_a_reason_at_shutdown,
    |db| async move {
        require_docker();
        let mut app = spawn_with(db, |c| c.shutdown_grace_secs = 5).await;
        let user = app.user("closing@x.org", "user", "default").await;
        let id =
            session_ids(&create_session(&app, &user, json!({"image": PYTHON})).await)[0].clone();
        wait_status(&app, &user, &id, &["RUNNING"]).await;
        let mut term = terminal_ws(&app, &user, &id).await.unwrap();
        term.send(Message::text(
            r#"{"type":"input","data":"echo ready-$((40+2))\r"}"#,
        ))
        .await
        .unwrap();
        read_until(&mut term, "ready-42").await;
        let mut req = app
            .url(&format!("/stream/session/{id}/execute"))
            .replace("http://", "ws://")
            .into_client_request()
            .unwrap();
        req.headers_mut()
            .insert("authorization", format!("Bearer {user}").parse().unwrap());
        req.headers_mut()
            .insert("x-backendai-version", "v8.20240915".parse().unwrap());
        let (mut exec, _) = tokio_tungstenite::connect_async(req).await.unwrap();
        exec.send(Message::text(
        json!({"mode": "query", "code": "import time\nprint('started', flush=True)\ntime.sleep(60)"}).to_string(),
    ))
    .await
    .unwrap();
        loop {
            let msg = tokio::time::timeout(std::time::Duration::from_secs(30), exec.next())
                .await
                .expect("execution output")
                .unwrap()
                .unwrap();
            if msg.to_text().unwrap_or("").contains("started") {
                break;
            }
        }
        let instance = app.state().instance_id.clone();
        let server = app.server.take().unwrap();
        let stopping = tokio::spawn(server.stop());
        for (name, ws) in [("terminal", &mut term), ("execute", &mut exec)] {
            let frame = loop {
                let msg = tokio::time::timeout(std::time::Duration::from_secs(5), ws.next())
                    .await
                    .unwrap_or_else(|_| panic!("{name}: no close frame"));
                match msg {
                    Some(Ok(Message::Close(f))) => break f,
                    Some(Ok(_)) => continue,
                    other => panic!("{name}: ended without a close frame: {other:?}"),
                }
            };
            let frame = frame.unwrap_or_else(|| panic!("{name}: close without a reason"));
            assert_eq!(u16::from(frame.code), 1001, "{name}");
            assert!(frame.reason.contains("shutting down"), "{name}: {frame:?}");
        }
        stopping.await.unwrap().unwrap();
        // The server is gone: its containers go by hand.
        let left = docker(&[
            "ps",
            "-aq",
            "--filter",
            &format!("label=ai.backend.bai-instance={instance}"),
        ]);
        for c in left.split_whitespace() {
            docker(&["rm", "-f", "-v", c]);
        }
    }
);

both_dbs!(web_terminal_is_real_tmux, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("term@x.org", "user", "default").await;
    let id = session_ids(&create_session(&app, &user, json!({"image": PYTHON})).await)[0].clone();
    wait_status(&app, &user, &id, &["RUNNING"]).await;
    let mut ws = terminal_ws(&app, &user, &id)
        .await
        .expect("terminal connects");
    ws.send(Message::text(
        json!({"type": "resize", "cols": 100, "rows": 30}).to_string(),
    ))
    .await
    .unwrap();
    ws.send(Message::text(
        json!({"type": "input", "data": "echo bai-term-$((6*7)); tput cols\r"}).to_string(),
    ))
    .await
    .unwrap();
    let screen = read_until(&mut ws, "bai-term-42").await;
    assert!(screen.contains("bai-term-42"), "{screen}");
    // `tput cols` may have come in the same chunk.
    if !screen
        .split("bai-term-42")
        .nth(1)
        .is_some_and(|rest| rest.contains("100"))
    {
        read_until(&mut ws, "100").await;
    }
    // Leave a mark in a second tmux window, disconnect, reconnect: the same tmux session.
    // The shell's answer (computed, so not the echo of the line) says the mark is set.
    ws.send(Message::binary(
        b"export MARK=still-here; echo marked-$((40+2))\r".to_vec(),
    ))
    .await
    .unwrap();
    read_until(&mut ws, "marked-42").await;
    drop(ws);
    let mut again = terminal_ws(&app, &user, &id).await.unwrap();
    again
        .send(Message::binary(b"echo mark=$MARK\r".to_vec()))
        .await
        .unwrap();
    read_until(&mut again, "mark=still-here").await;
    // Nobody else gets the terminal.
    let other = app.user("nosy@x.org", "user", "default").await;
    match terminal_ws(&app, &other, &id).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 404),
        other => panic!("a stranger must not attach: {other:?}"),
    }
    destroy(&app, &user, &id).await;
});

both_dbs!(jupyter_through_the_app_proxy, |db| async move {
    require_docker();
    let pool = port_block();
    let app = spawn_with(db, |c| c.app_port_pool = format!("{pool}-{}", pool + 9)).await;
    let user = app.user("notebook@x.org", "user", "default").await;
    let id = session_ids(&create_session(&app, &user, json!({"image": PYTHON})).await)[0].clone();
    wait_status(&app, &user, &id, &["RUNNING"]).await;
    let apps = app
        .op_ok::<gql::sessions::SessionDetail>(
            Some(&user),
            gql::sessions::session_detail::Variables { id: id.clone() },
        )
        .await;
    assert_eq!(
        apps["compute_session"]["apps"],
        json!([{"name": "jupyter", "protocol": "http", "container_port": 8080}, {"name": "jupyterlab", "protocol": "http", "container_port": 8090}, {"name": "tensorboard", "protocol": "http", "container_port": 6006}, {"name": "ttyd", "protocol": "http", "container_port": 7681}, {"name": "sshd", "protocol": "tcp", "container_port": 2200}, {"name": "terminal", "protocol": "pty", "container_port": null}])
    );
    let service = |app_name: &str, public: bool, port: Option<u16>| gql::start_service::Variables {
        session_id: id.clone(),
        app: app_name.into(),
        open_to_public: public,
        preferred_port: port.map(i64::from),
    };
    assert_code(
        &app.op::<gql::StartService>(Some(&user), service("vscode", false, None))
            .await,
        "NOT_FOUND",
    );
    // "Try preferred port" with the preferred port taken: another port of the pool. Every
    // app runs on a pool port of its own (its own origin).
    let busy = std::net::TcpListener::bind(("127.0.0.1", pool)).ok();
    let started = app
        .op_ok::<gql::StartService>(Some(&user), service("jupyter", false, Some(pool)))
        .await;
    let port = started["start_service"]["port"].as_u64().unwrap() as u16;
    assert!(
        port > pool && port <= pool + 9,
        "{port} from the pool, not the busy {pool}"
    );
    drop(busy);
    let pooled = format!("http://127.0.0.1:{port}");
    // The console's origin never serves the app: it sends the browser to the app's port.
    let no_follow = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let url = started["start_service"]["url"]
        .as_str()
        .unwrap()
        .to_string();
    let token = started["start_service"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(url.starts_with(&format!("/apps/{id}/jupyter/")), "{url}");
    let moved = no_follow
        .get(app.url(&url))
        .bearer_auth(&user)
        .send()
        .await
        .unwrap();
    assert_eq!(moved.status(), 307);
    assert_eq!(
        moved.headers()["location"].to_str().unwrap(),
        format!("{pooled}{url}")
    );
    assert!(moved.text().await.unwrap().is_empty());
    let again = app
        .op_ok::<gql::StartService>(Some(&user), service("jupyter", false, None))
        .await;
    assert_eq!(
        again["start_service"]["token"],
        token.as_str(),
        "starting twice reuses the running app"
    );

    let status = app
        .http
        .get(app.url(&format!("/apps/{id}/jupyter/api/status?token={token}")))
        .bearer_auth(&user)
        .send()
        .await
        .unwrap();
    assert_eq!(status.status(), 200);
    assert!(
        status
            .json::<Value>()
            .await
            .unwrap()
            .get("started")
            .is_some()
    );
    let tree = app
        .http
        .get(app.url(&url))
        .bearer_auth(&user)
        .send()
        .await
        .unwrap();
    let tree_status = tree.status();
    let tree_body = tree.text().await.unwrap();
    assert_eq!(
        tree_status,
        200,
        "{}",
        &tree_body[..tree_body.len().min(400)]
    );
    assert!(tree_body.contains("Jupyter"));
    // Jupyter's own REST API through the proxy: a Python kernel starts.
    let kernel = app
        .http
        .post(app.url(&format!("/apps/{id}/jupyter/api/kernels?token={token}")))
        .bearer_auth(&user)
        .json(&json!({"name": "python3"}))
        .send()
        .await
        .unwrap();
    assert_eq!(kernel.status(), 201);
    let kid = kernel.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // …and runs 1+1 over Jupyter's WebSocket protocol, through the proxy.
    let mut req = format!("{pooled}/apps/{id}/jupyter/api/kernels/{kid}/channels?token={token}")
        .replace("http://", "ws://")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {user}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .expect("kernel channel through the proxy");
    let execute = json!({
        "header": {"msg_id": "bai-1", "username": "bai", "session": "bai-test", "msg_type": "execute_request", "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": "1+1", "silent": false, "store_history": false, "user_expressions": {}, "allow_stdin": false, "stop_on_error": true},
    });
    ws.send(Message::text(execute.to_string())).await.unwrap();
    let result = loop {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(30), ws.next())
            .await
            .expect("kernel answer")
            .unwrap()
            .unwrap();
        let Message::Text(t) = msg else { continue };
        let v: Value = serde_json::from_str(t.as_str()).unwrap();
        if v["msg_type"] == "execute_result" || v["header"]["msg_type"] == "execute_result" {
            break v["content"]["data"]["text/plain"].clone();
        }
    };
    assert_eq!(result, "2");

    let other = app.user("snoop@x.org", "user", "default").await;
    let refused = app
        .http
        .get(app.url(&format!("/apps/{id}/jupyter/api/status?token={token}")))
        .bearer_auth(&other)
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        404,
        "another user cannot use the app, even with its token"
    );
    let anon = app
        .http
        .get(app.url(&format!("/apps/{id}/jupyter/api/status?token={token}")))
        .send()
        .await
        .unwrap();
    assert_eq!(
        anon.status(),
        200,
        "the per-app token lets a browser in without login"
    );
    let app_cookie = anon
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("bai_app_jupyter="))
        .expect("per-app cookie")
        .to_string();
    assert!(
        app_cookie.contains(&format!("Path=/apps/{id}/jupyter/")),
        "{app_cookie}"
    );
    assert!(app_cookie.contains("HttpOnly"), "{app_cookie}");
    let no_token = app
        .http
        .get(app.url(&format!("/apps/{id}/jupyter/api/status")))
        .send()
        .await
        .unwrap();
    assert_eq!(no_token.status(), 401, "no login, no token");
    let by_cookie = app
        .http
        .get(format!("{pooled}/apps/{id}/jupyter/api/status"))
        .header("cookie", app_cookie.split(';').next().unwrap())
        .send()
        .await
        .unwrap();
    assert_ne!(
        by_cookie.status(),
        401,
        "the per-app cookie stands for the token"
    );
    assert!(
        !by_cookie
            .headers()
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap().contains("problem")),
        "the request reached Jupyter"
    );
    // A cross-site page cannot drive the app with the owner's login.
    let forged = app
        .http
        .post(app.url(&format!("/apps/{id}/jupyter/api/kernels")))
        .bearer_auth(&user)
        .header("origin", "http://evil.example")
        .json(&json!({"name": "python3"}))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);

    // "Open app to public": on its port, anyone with the URL may use it.
    let public = app
        .op_ok::<gql::StartService>(Some(&user), service("jupyter", true, Some(pool)))
        .await;
    assert_eq!(
        public["start_service"]["port"], port,
        "the app keeps its port"
    );
    assert_eq!(public["start_service"]["public"], true);
    assert_eq!(public["start_service"]["token"], token.as_str());
    let by_other = app
        .http
        .get(format!(
            "{pooled}/apps/{id}/jupyter/api/status?token={token}"
        ))
        .bearer_auth(&other)
        .send()
        .await
        .unwrap();
    assert_eq!(by_other.status(), 200, "public: another user may use it");
    let stranger = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let root = stranger.get(format!("{pooled}/")).send().await.unwrap();
    assert_eq!(root.status(), 302);
    assert_eq!(
        root.headers()["location"].to_str().unwrap(),
        format!("/apps/{id}/jupyter/")
    );
    // Not public any more: strangers are out again, on the same port.
    app.op_ok::<gql::StartService>(Some(&user), service("jupyter", false, None))
        .await;
    let closed = app
        .http
        .get(format!(
            "{pooled}/apps/{id}/jupyter/api/status?token={token}"
        ))
        .bearer_auth(&other)
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 404);
    assert_code(
        &app.op::<gql::StartService>(Some(&other), service("jupyter", false, None))
            .await,
        "NOT_FOUND",
    );
    destroy(&app, &user, &id).await;
    wait_status(&app, &user, &id, &["TERMINATED"]).await;
    eventually(
        "the app's pool port to close with the session",
        WAIT,
        || async {
            std::net::TcpStream::connect(("127.0.0.1", port))
                .is_err()
                .then_some(())
        },
    )
    .await;
});

/// The session's SSH private key (the console's download), written to `path` for `ssh -i`.
pub(crate) async fn session_key(
    app: &TestApp,
    token: &str,
    session: &str,
    path: &std::path::Path,
) -> std::path::PathBuf {
    let key = app
        .op_ok::<gql::SessionSshPrivateKey>(
            Some(token),
            gql::session_ssh_private_key::Variables {
                session_id: session.into(),
            },
        )
        .await;
    std::fs::write(path, key["session_ssh_private_key"].as_str().unwrap()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path.to_path_buf()
}

pub(crate) fn ssh(key: &std::path::Path, port: u16, command: &str) -> std::process::Output {
    std::process::Command::new("ssh")
        .args(["-i", key.to_str().unwrap(), "-p", &port.to_string()])
        .args([
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
        ])
        .args([
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "ConnectTimeout=10",
        ])
        .args(["-o", "LogLevel=ERROR", "work@127.0.0.1", command])
        .output()
        .expect("ssh runs (openssh-client)")
}

both_dbs!(ssh_and_sftp_into_a_session, |db| async move {
    require_docker();
    let pool = port_block();
    let app = spawn_with(db, |c| c.app_port_pool = format!("{pool}-{}", pool + 9)).await;
    let user = app.user("ssh@x.org", "user", "default").await;
    let keys = app.dir.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    // The user's own key, authorized through a `.ssh` automount folder.
    let own = keys.join("own");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "mine", "-f"])
        .arg(&own)
        .status()
        .unwrap();
    assert!(made.success());
    let folder = app
        .op_ok::<gql::CreateVfolder>(
            Some(&user),
            gql::create_vfolder::Variables {
                props: gql::create_vfolder::CreateVFolderInput {
                    name: ".ssh".into(),
                    ..Default::default()
                },
            },
        )
        .await;
    assert_eq!(folder["create_vfolder"]["vfolder"]["is_automount"], true);
    let fid = folder["create_vfolder"]["vfolder"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let up = app
        .http
        .post(app.url(&format!(
            "/storage/folders/{fid}/upload?path=authorized_keys"
        )))
        .bearer_auth(&user)
        .body(std::fs::read(keys.join("own.pub")).unwrap())
        .send()
        .await
        .unwrap();
    assert!(up.status().is_success(), "{}", up.text().await.unwrap());

    let id = session_ids(&create_session(&app, &user, json!({"image": PYTHON})).await)[0].clone();
    wait_status(&app, &user, &id, &["RUNNING"]).await;
    // "Try preferred port" with a free port of the pool: that very port.
    let started = app
        .op_ok::<gql::StartService>(
            Some(&user),
            gql::start_service::Variables {
                session_id: id.clone(),
                app: "sshd".into(),
                open_to_public: false,
                preferred_port: Some(i64::from(pool + 3)),
            },
        )
        .await;
    assert_eq!(started["start_service"]["protocol"], "tcp");
    assert_eq!(started["start_service"]["port"], pool + 3);
    let port = pool + 3;
    let key_file = session_key(&app, &user, &id, &keys.join("id_container")).await;
    // sshd may still be starting: until it answers.
    let out = eventually("ssh into the session", WAIT, || async {
        let out = ssh(&key_file, port, "echo hello-$((6*7)); whoami; pwd");
        out.status.success().then_some(out)
    })
    .await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hello-42\nwork\n/home/work\n"
    );

    // sftp puts a file; it is there for the session.
    std::fs::write(keys.join("local.txt"), "via sftp\n").unwrap();
    std::fs::write(
        keys.join("batch"),
        format!("put {} up.txt\nls\n", keys.join("local.txt").display()),
    )
    .unwrap();
    let sftp = std::process::Command::new("sftp")
        .args(["-i", key_file.to_str().unwrap(), "-P", &port.to_string()])
        .args([
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
        ])
        .args([
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "LogLevel=ERROR",
        ])
        .arg("-b")
        .arg(keys.join("batch"))
        .arg("work@127.0.0.1")
        .output()
        .unwrap();
    assert!(
        sftp.status.success(),
        "sftp: {}",
        String::from_utf8_lossy(&sftp.stderr)
    );
    assert!(String::from_utf8_lossy(&sftp.stdout).contains("id_container"));
    let cat = ssh(&key_file, port, "cat up.txt");
    assert_eq!(String::from_utf8_lossy(&cat.stdout), "via sftp\n");

    // The user's own key works too (the automount folder's authorized_keys).
    let mine = ssh(&own, port, "echo mine");
    assert!(
        mine.status.success(),
        "own key: {}",
        String::from_utf8_lossy(&mine.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&mine.stdout), "mine\n");

    // Nobody else gets the key.
    let other = app.user("nokey@x.org", "user", "default").await;
    assert_code(
        &app.op::<gql::SessionSshPrivateKey>(
            Some(&other),
            gql::session_ssh_private_key::Variables {
                session_id: id.clone(),
            },
        )
        .await,
        "NOT_FOUND",
    );
    destroy(&app, &user, &id).await;

    // "Preferred SSH port" (user settings): refused outside 1024-65535, kept per user, then
    // taken by the next SSH/SFTP app started without a port.
    const SET: &str = "mutation($p: Int) { update_preferred_ssh_port(port: $p) { ok } }";
    const GET: &str = "{ user { preferred_ssh_port } }";
    for bad in [80, 70000, -1] {
        assert_code(
            &app.gql(Some(&user), SET, json!({ "p": bad })).await,
            "BAD_REQUEST",
        );
    }
    app.ok(Some(&user), SET, json!({ "p": pool + 6 })).await;
    let me = app.ok(Some(&user), GET, json!({})).await;
    assert_eq!(me["user"]["preferred_ssh_port"], pool + 6);
    let theirs = app.ok(Some(&other), GET, json!({})).await;
    assert!(theirs["user"]["preferred_ssh_port"].is_null(), "{theirs}");
    let id2 = session_ids(&create_session(&app, &user, json!({"image": PYTHON})).await)[0].clone();
    wait_status(&app, &user, &id2, &["RUNNING"]).await;
    let started = app
        .op_ok::<gql::StartService>(
            Some(&user),
            gql::start_service::Variables {
                session_id: id2.clone(),
                app: "sshd".into(),
                open_to_public: false,
                preferred_port: None,
            },
        )
        .await;
    assert_eq!(started["start_service"]["port"], pool + 6, "{started}");
    let key2 = session_key(&app, &user, &id2, &keys.join("id_second")).await;
    let out = eventually("ssh on the preferred port", WAIT, || async {
        let out = ssh(&key2, pool + 6, "echo preferred");
        out.status.success().then_some(out)
    })
    .await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "preferred\n");
    app.ok(Some(&user), SET, json!({ "p": null })).await;
    let me = app.ok(Some(&user), GET, json!({})).await;
    assert!(me["user"]["preferred_ssh_port"].is_null(), "{me}");
    destroy(&app, &user, &id2).await;
});

// Apps the image declares, started by its service definitions (the Backend.AI way): JupyterLab
// serves its page and starts a kernel of the system Python; TensorBoard shows a scalar a
// program in the session logged. Another user reaches neither.
both_dbs!(image_apps_by_service_definitions, |db| async move {
    require_docker();
    let pool = port_block();
    let app = spawn_with(db, |c| c.app_port_pool = format!("{pool}-{}", pool + 9)).await;
    let user = app.user("lab@x.org", "user", "default").await;
    let id = session_ids(&create_session(&app, &user, json!({"image": PYTHON})).await)[0].clone();
    wait_status(&app, &user, &id, &["RUNNING"]).await;
    let service = |name: &str| gql::start_service::Variables {
        session_id: id.clone(),
        app: name.into(),
        open_to_public: false,
        preferred_port: None,
    };
    let lab = app
        .op_ok::<gql::StartService>(Some(&user), service("jupyterlab"))
        .await;
    let url = lab["start_service"]["url"].as_str().unwrap().to_string();
    let token = lab["start_service"]["token"].as_str().unwrap().to_string();
    assert!(url.starts_with(&format!("/apps/{id}/jupyterlab/")), "{url}");
    let page = app
        .http
        .get(app.url(&format!("/apps/{id}/jupyterlab/lab?token={token}")))
        .bearer_auth(&user)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("JupyterLab"));
    let kernel = app
        .http
        .post(app.url(&format!("/apps/{id}/jupyterlab/api/kernels?token={token}")))
        .bearer_auth(&user)
        .json(&json!({"name": "python3"}))
        .send()
        .await
        .unwrap();
    assert_eq!(kernel.status(), 201, "{}", kernel.text().await.unwrap());

    // A program in the session logs a scalar; TensorBoard (its definition makes ~/logs) shows it.
    let (out, err, code) = run_to_end(
        &app,
        &user,
        &id,
        "query",
        "from tensorboardX import SummaryWriter\nw = SummaryWriter('/home/work/logs/run1')\nfor i in range(5):\n    w.add_scalar('bai/loss', 1.0 / (i + 1), i)\nw.close()\nprint('logged')",
        json!({}),
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let tb = app
        .op_ok::<gql::StartService>(Some(&user), service("tensorboard"))
        .await;
    let tb_token = tb["start_service"]["token"].as_str().unwrap().to_string();
    let tags = format!("/apps/{id}/tensorboard/data/plugin/scalars/tags?token={tb_token}");
    let found = eventually("TensorBoard to read the run", WAIT, || async {
        let v: Value = app
            .http
            .get(app.url(&tags))
            .bearer_auth(&user)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        v["run1"]["bai/loss"].is_object().then_some(v)
    })
    .await;
    assert!(found["run1"]["bai/loss"].is_object(), "{found}");
    // Another user: NOT_FOUND, starting or reaching, token or not.
    let other = app.user("stranger@x.org", "user", "default").await;
    assert_code(
        &app.op::<gql::StartService>(Some(&other), service("tensorboard"))
            .await,
        "NOT_FOUND",
    );
    let refused = app
        .http
        .get(app.url(&tags))
        .bearer_auth(&other)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 404);
    // An app the image does not declare is not started.
    assert_code(
        &app.op::<gql::StartService>(Some(&user), service("vscode"))
            .await,
        "NOT_FOUND",
    );
    destroy(&app, &user, &id).await;
});

// Backend.AI's error bodies carry an `error_code` beside `type` and `title` (Lablup's tester
// reads it): a request below the image's minimum is its InvalidAPIParameters'
// (`api_generic_invalid-parameters`), more containers than the policy allows its
// QuotaExceeded's (`session_create_unavailable`).
both_dbs!(refusals_carry_backend_ais_error_codes, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("codes@x.org", "user", "default").await;
    for (config, code) in [
        (
            json!({"resources": {"cpu": 1, "mem": "64m"}}),
            "api_generic_invalid-parameters",
        ),
        (
            json!({"clusterSize": 5, "cluster_size": 5}),
            "session_create_unavailable",
        ),
    ] {
        let mut body = json!({"image": PYTHON, "name": "codes", "config": config});
        if let Some(n) = config.get("clusterSize") {
            body["clusterSize"] = n.clone();
        }
        let (st, problem) = rest(&app, &user, reqwest::Method::POST, "/session", Some(body)).await;
        assert_eq!(st, 400, "{problem}");
        assert_eq!(problem["error_code"], code, "{problem}");
        assert_eq!(
            problem["type"], "https://api.backend.ai/probs/invalid-api-params",
            "{problem}"
        );
    }
});

// A batch job past its batch_timeout fails as Backend.AI's does: `session_failure` on the
// event stream with the reason `task-timeout` (Lablup's tester waits for it), then its end.
both_dbs!(
    a_batch_job_past_its_timeout_fails_with_task_timeout,
    |db| async move {
        require_docker();
        let app = spawn(db).await;
        let user = app.user("timeout@x.org", "user", "default").await;
        let sse = app.session_events(&user).await;
        let (st, made) = rest(
            &app,
            &user,
            reqwest::Method::POST,
            "/session",
            Some(json!({"image": PYTHON, "name": "past-due", "type": "batch",
                    "startupCommand": "sleep 60", "batch_timeout": 2, "enqueueOnly": true})),
        )
        .await;
        assert_eq!(st, 201, "{made}");
        let mut body = sse.bytes_stream();
        let mut text = String::new();
        let _ = tokio::time::timeout(WAIT, async {
            while let Some(Ok(chunk)) = body.next().await {
                text.push_str(&String::from_utf8_lossy(&chunk));
                if text.contains("event: session_terminated") {
                    break;
                }
            }
        })
        .await;
        let failure = text
            .split("\n\n")
            .find(|e| e.contains("event: session_failure"))
            .unwrap_or_else(|| panic!("no session_failure: {text}"));
        assert!(failure.contains("\"reason\":\"task-timeout\""), "{failure}");
        let id = made["sessionId"].as_str().unwrap().to_string();
        let ended = wait_status(&app, &user, &id, &["TERMINATED"]).await;
        assert_eq!(
            (&ended["status_info"], &ended["result"]),
            (&json!("task-timeout"), &json!("failure")),
            "{ended}"
        );
    }
);

// A program writing fast over the execute WebSocket: its output comes in frames of bounded
// size (never one frame of everything it wrote in the gathering window), all of it, then
// `finished`.
both_dbs!(
    fast_output_over_the_execute_websocket_comes_in_bounded_frames,
    |db| async move {
        require_docker();
        let app = spawn(db).await;
        let user = app.user("fastout@x.org", "user", "default").await;
        let id =
            session_ids(&create_session(&app, &user, json!({"image": PYTHON})).await)[0].clone();
        wait_status(&app, &user, &id, &["RUNNING"]).await;
        let mut req = app
            .url(&format!("/stream/session/{id}/execute"))
            .replace("http://", "ws://")
            .into_client_request()
            .unwrap();
        req.headers_mut()
            .insert("authorization", format!("Bearer {user}").parse().unwrap());
        req.headers_mut()
            .insert("x-backendai-version", "v8.20240915".parse().unwrap());
        let (mut exec, _) = tokio_tungstenite::connect_async(req).await.unwrap();
        // 400 KB at once: under the run's kept output (512 KiB), far over one frame's bound.
        exec.send(Message::text(
            json!({"mode": "query", "code": "import sys\nsys.stdout.write('x' * 400000)\nsys.stdout.flush()"})
                .to_string(),
        ))
        .await
        .unwrap();
        let (mut total, mut largest) = (0usize, 0usize);
        loop {
            let msg = tokio::time::timeout(std::time::Duration::from_secs(60), exec.next())
                .await
                .expect("execution output")
                .unwrap()
                .unwrap();
            let Message::Text(t) = msg else { continue };
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            let got: usize = v["console"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r[0] == "stdout")
                .map(|r| r[1].as_str().unwrap_or_default().len())
                .sum();
            total += got;
            largest = largest.max(got);
            if v["status"] == "finished" {
                break;
            }
        }
        assert_eq!(total, 400_000, "all of it arrives");
        assert!(
            largest <= 64 * 1024 + 64 * 1024,
            "one frame carried {largest} bytes"
        );
    }
);
