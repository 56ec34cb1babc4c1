//! Several hosts: extra Docker engines, each a host of its own (network namespace, address,
//! engine id), reached over mutual TLS. `scripts/hosts.sh up` starts them once per test run;
//! a machine where it cannot fails these tests (never skips them).
use std::path::PathBuf;
use std::sync::OnceLock;

use api::config::EngineConfig;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::both_dbs;
use crate::gql;
use crate::sessions::{read_until, run_to_end, session_key, ssh, terminal_ws};
use crate::support::*;

/// The hosts tests take turns: one of them stops and restarts an engine, and every one of
/// them drives the same two engines.
pub(crate) async fn turn() -> tokio::sync::MutexGuard<'static, ()> {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    TURN.lock().await
}

/// The hosts' state directory, once `scripts/hosts.sh up 2` has them answering.
pub(crate) fn hosts() -> PathBuf {
    static UP: OnceLock<PathBuf> = OnceLock::new();
    UP.get_or_init(|| {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/hosts.sh");
        let out = std::process::Command::new(script)
            .args(["up", "2"])
            .output()
            .expect("scripts/hosts.sh runs");
        assert!(
            out.status.success(),
            "the extra engines must start (scripts/hosts.sh up 2): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(
            std::env::var("BAI_HOSTS_DIR").unwrap_or_else(|_| "/var/lib/bai-hosts".into()),
        )
    })
    .clone()
}

/// Host `n`'s engine, bai presenting `client` (`cert` = the hosts' CA's, `rogue-cert` =
/// another CA's) and trusting the hosts' CA.
pub(crate) fn engine(n: u8, client: &str) -> EngineConfig {
    let tls = hosts().join("tls");
    let key = client.replace("cert", "key");
    EngineConfig {
        endpoint: format!("tcp://10.231.{n}.2:2376"),
        tls_ca: Some(tls.join("ca.pem")),
        tls_cert: Some(tls.join(format!("{client}.pem"))),
        tls_key: Some(tls.join(format!("{key}.pem"))),
        insecure: false,
        scaling_group: Some(format!("h{n}")),
        session_subnet: Some(format!("10.233.{n}.0/24")),
        manager_address: None,
        storage: Default::default(),
    }
}

/// The `docker` command line for host `n`'s engine, over its mutual TLS (its words, for a
/// shell pipeline or a `Command`).
pub(crate) fn docker_words(n: u8) -> Vec<String> {
    let tls = hosts().join("tls");
    let file = |f: &str| tls.join(f).display().to_string();
    vec![
        "docker".into(),
        "--tlsverify".into(),
        "--tlscacert".into(),
        file("ca.pem"),
        "--tlscert".into(),
        file("cert.pem"),
        "--tlskey".into(),
        file("key.pem"),
        "-H".into(),
        format!("tcp://10.231.{n}.2:2376"),
    ]
}

/// `docker` against host `n`'s engine, over its mutual TLS.
pub(crate) fn docker_on(n: u8, args: &[&str]) -> std::process::Output {
    let words = docker_words(n);
    std::process::Command::new(&words[0])
        .args(&words[1..])
        .args(args)
        .output()
        .expect("docker CLI")
}

pub(crate) async fn alive_agents(app: &TestApp) -> serde_json::Value {
    app.admin_op::<gql::sessions::AgentList>(gql::sessions::agent_list::Variables {
        status: Some("ALIVE".into()),
    })
    .await["agent_list"]["items"]
        .clone()
}

both_dbs!(remote_engines_are_agents_of_their_groups, |db| async move {
    let _turn = turn().await;
    let app = spawn_with(db, |c| {
        c.docker_endpoints = Vec::new();
        c.engines = vec![engine(1, "cert"), engine(2, "cert")];
    })
    .await;
    let agents = alive_agents(&app).await;
    let mut seen: Vec<(String, String, String)> = agents
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["addr"].as_str().unwrap().to_string(),
                a["scaling_group"].as_str().unwrap().to_string(),
                a["id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(seen.len(), 2, "both hosts are agents: {agents}");
    assert_eq!(seen[0].0, "tcp://10.231.1.2:2376");
    assert_eq!(seen[0].1, "h1");
    assert_eq!(seen[1].1, "h2");
    assert_ne!(
        seen[0].2, seen[1].2,
        "each host's agent id comes from its own engine"
    );
    // The same engines listed the other way round keep their ids.
    let again = spawn_with(db, |c| {
        c.docker_endpoints = Vec::new();
        c.engines = vec![engine(2, "cert"), engine(1, "cert")];
    })
    .await;
    let mut ids: Vec<String> = alive_agents(&again)
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    let mut before = vec![seen[0].2.clone(), seen[1].2.clone()];
    before.sort();
    assert_eq!(ids, before);
});

both_dbs!(
    unsafe_or_foreign_engine_settings_are_refused,
    |db| async move {
        let _turn = turn().await;
        hosts();
        // Plain TCP: root on that host for anyone who reaches it.
        let mut config = api::Config {
            docker_endpoints: Vec::new(),
            engines: vec![EngineConfig {
                tls_ca: None,
                tls_cert: None,
                tls_key: None,
                ..engine(1, "cert")
            }],
            ..api::Config::default()
        };
        let refused = api::config::Config::all_engines(&config).unwrap_err();
        assert!(
            format!("{refused:#}").contains("root on that host"),
            "{refused:#}"
        );
        // A client certificate of another CA: refused before any connection, and no agent.
        config.engines = vec![engine(1, "rogue-cert")];
        let app = spawn_with(db, |c| {
            c.docker_endpoints = Vec::new();
            c.engines = config.engines.clone();
        })
        .await;
        assert_eq!(
            alive_agents(&app).await.as_array().unwrap().len(),
            0,
            "no agent for an engine bai cannot prove itself to"
        );
    }
);

// A host whose sessions the manager could not reach, or whose session network is not the one
// configured, is no agent: never one that starts sessions nobody can use or that sit on a
// subnet nobody routes.
both_dbs!(
    a_host_whose_sessions_would_be_out_of_reach_is_refused,
    |db| async move {
        let _turn = turn().await;
        hosts();
        let app = spawn_with(db, |c| {
            c.docker_endpoints = Vec::new();
            c.engines = vec![
                // The rules let in another address than the manager's.
                EngineConfig {
                    manager_address: Some("10.231.1.99".parse().unwrap()),
                    ..engine(1, "cert")
                },
                // Host 2's session network exists on another subnet than this one.
                EngineConfig {
                    session_subnet: Some("10.233.50.0/24".into()),
                    ..engine(2, "cert")
                },
            ];
        })
        .await;
        assert_eq!(alive_agents(&app).await, json!([]));
        // The wrong address's rule goes, or it would keep the manager out of host 1.
        let removed = std::process::Command::new("nsenter")
            .args([
                "--net=/var/run/netns/h1",
                "iptables",
                "-w",
                "-D",
                "DOCKER-USER",
            ])
            .args(["-o", "bai-sessions", "!", "-s", "10.231.1.99/32"])
            .args(["-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"])
            .output()
            .unwrap();
        assert!(removed.status.success(), "{removed:?}");
        // Run first on a fresh machine, host 2 had no session network yet: bai made it on the
        // wrong subnet, then refused the host because the manager could not reach it there.
        // Either way the host was refused; the network on the wrong subnet must not stay, or
        // every later test would find host 2 misconfigured.
        let subnet = docker_on(
            2,
            &[
                "network",
                "inspect",
                "-f",
                "{{range .IPAM.Config}}{{.Subnet}}{{end}}",
                "bai-sessions",
            ],
        );
        if String::from_utf8_lossy(&subnet.stdout).trim() == "10.233.50.0/24" {
            let rm = docker_on(2, &["network", "rm", "bai-sessions"]);
            assert!(rm.status.success(), "{rm:?}");
        }
    }
);

/// An address where something accepts connections and then never answers (`garbage` false)
/// or answers with bytes that are not HTTP (`garbage` true).
async fn bad_engine(garbage: bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut conn, _)) = listener.accept().await {
            if garbage {
                use tokio::io::AsyncWriteExt;
                let _ = conn.write_all(b"\x00\xffnot http at all\r\n\r\n").await;
            } else {
                held.push(conn);
            }
        }
    });
    format!("tcp://{addr}")
}

both_dbs!(
    a_hanging_or_babbling_engine_holds_up_no_other,
    |db| async move {
        let _turn = turn().await;
        let insecure = |endpoint: String| EngineConfig {
            endpoint,
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            insecure: true,
            scaling_group: None,
            session_subnet: Some("10.233.99.0/24".into()),
            manager_address: None,
            storage: Default::default(),
        };
        let (hangs, babbles) = (bad_engine(false).await, bad_engine(true).await);
        let app = tokio::time::timeout(
            WAIT,
            spawn_with(db, |c| {
                c.docker_endpoints = Vec::new();
                c.engine_timeout_secs = 2;
                c.engines = vec![insecure(hangs), insecure(babbles), engine(1, "cert")];
            }),
        )
        .await
        .expect("the server starts although one engine never answers");
        let agents = alive_agents(&app).await;
        let addrs: Vec<&str> = agents
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["addr"].as_str().unwrap())
            .collect();
        assert_eq!(
            addrs,
            vec!["tcp://10.231.1.2:2376"],
            "the good engine is an agent, the bad ones are not"
        );
    }
);

/// Runs Python in a session and returns what it printed (exit code 0 asserted).
async fn python(app: &TestApp, token: &str, session: &str, code: &str) -> String {
    let (out, err, exit) = run_to_end(app, token, session, "query", code, json!({})).await;
    assert_eq!(exit, 0, "{code}: {out}{err}");
    out
}

/// What a session's connection to each `host:port` meets: open, refused, or timeout.
const REACH: &str = r#"
import socket
def reach(host, port):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port))
        return "open"
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return "refused" if e.errno == 111 else "error%d" % e.errno
"#;

/// The address of a remote session's container on host `n`'s session network.
fn remote_ip(n: u8, container: &str) -> String {
    let out = docker_on(
        n,
        &[
            "inspect",
            "-f",
            "{{(index .NetworkSettings.Networks \"bai-sessions\").IPAddress}}",
            container,
        ],
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Brings host `n`'s engine back when dropped (`scripts/hosts.sh up` is idempotent): a test
/// that stops an engine and then fails leaves it answering for the tests after it.
struct Revive(u8);

impl Drop for Revive {
    fn drop(&mut self) {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/hosts.sh");
        let _ = std::process::Command::new(script)
            .args(["up", &self.0.to_string()])
            .output();
    }
}

fn pid_of(n: u8) -> String {
    std::fs::read_to_string(hosts().join(format!("h{n}/docker.pid")))
        .unwrap()
        .trim()
        .to_string()
}

both_dbs!(sessions_run_on_remote_hosts, |db| async move {
    require_docker();
    let _turn = turn().await;
    hosts();
    // Host 1 has no environment image: bai brings it there from the engine that has it.
    docker_on(1, &["image", "rm", "-f", PYTHON]);
    let pool = port_block();
    let app = spawn_with(db, |c| {
        c.app_port_pool = format!("{pool}-{}", pool + 9);
        c.heartbeat_secs = 1;
        c.agent_lost_after_misses = 2;
        // The default: on a machine busy with the other tests, host 1's engine once took over
        // 10 s to create the container right after the image arrived (a dead engine is found
        // by the heartbeat's own bounded ping, not by this).
        c.engine_timeout_secs = 30;
        // Two storage hosts; both engines see `local` (one export on every node: here the
        // same disk), only host 1 sees `scratch`.
        let root = std::path::absolute(&c.data_dir).unwrap().join("vfolders");
        c.storage_hosts = vec!["local".into(), "scratch".into()];
        let mut h1 = engine(1, "cert");
        h1.storage = [
            ("local".to_string(), root.join("local")),
            ("scratch".to_string(), root.join("scratch")),
        ]
        .into();
        let mut h2 = engine(2, "cert");
        h2.storage = [("local".to_string(), root.join("local"))].into();
        c.engines = vec![h1, h2];
    })
    .await;
    let agents = alive_agents(&app).await;
    let agent_of = |n: u8| {
        agents
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["addr"] == format!("tcp://10.231.{n}.2:2376"))
            .unwrap_or_else(|| panic!("host {n} is an agent: {agents}"))["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (a1, a2) = (agent_of(1), agent_of(2));
    for group in ["h1", "h2"] {
        app.resource_group(group).await;
    }
    let user = app.user("far@x.org", "user", "default").await;
    let perms = json!([
        "create-vfolder",
        "mount-in-session",
        "upload-file",
        "download-file"
    ]);
    app.use_policy(
        &user,
        "two-storage-hosts",
        gql::create_policy::CreateKeyPairResourcePolicyInput {
            allowed_vfolder_hosts: Some(json!(
                json!({"local": perms, "scratch": perms}).to_string()
            )),
            ..TestApp::open_policy()
        },
    )
    .await;
    let folder = |name: &str, host: &str| gql::create_vfolder::Variables {
        props: gql::create_vfolder::CreateVFolderInput {
            name: name.into(),
            host: Some(host.into()),
            ..Default::default()
        },
    };
    app.op_ok::<gql::CreateVfolder>(Some(&user), folder("shared", "local"))
        .await;
    app.op_ok::<gql::CreateVfolder>(Some(&user), folder("fast", "scratch"))
        .await;

    // A session on host 1: PULLING with its progress, live, then RUNNING there.
    let one = session_ids(
        &create_session(
            &app,
            &user,
            json!({"image": PYTHON, "scaling_group": "h1", "mounts": ["shared"]}),
        )
        .await,
    )[0]
    .clone();
    let mut events = subscribe_op::<gql::hosts::SessionProgress>(
        &app,
        &user,
        gql::hosts::session_progress::Variables {
            session_id: Some(one.clone()),
        },
    )
    .await;
    let mut progress = Vec::new();
    loop {
        let msg = tokio::time::timeout(WAIT, events.next())
            .await
            .expect("events until RUNNING")
            .unwrap()
            .unwrap();
        let Message::Text(t) = msg else { continue };
        let v: Value = serde_json::from_str(t.as_str()).unwrap();
        let e = &v["payload"]["data"]["session_status_changes"];
        if e["status"] == "PULLING"
            && let Some(reason) = e["reason"].as_str()
        {
            progress.push(reason.to_string());
        }
        if e["status"] == "RUNNING" || e["status"] == "ERROR" {
            break;
        }
    }
    let s1 = wait_status(&app, &user, &one, &["RUNNING", "ERROR"]).await;
    assert_eq!(s1["status"], "RUNNING", "{s1}");
    assert_eq!(s1["containers"][0]["agent"], a1.as_str());
    assert!(
        progress
            .iter()
            .any(|p| p.starts_with(&format!("pulling {PYTHON}: ")) && p.ends_with('%')),
        "the image's arrival is shown with its per-cent: {progress:?}"
    );
    assert!(
        docker_on(1, &["image", "inspect", PYTHON]).status.success(),
        "host 1 holds the image now"
    );
    let images = app
        .admin_op::<gql::hosts::ImageAgents>(gql::hosts::image_agents::Variables)
        .await;
    assert!(
        images.to_string().contains(&a1),
        "the image list says host 1's agent has it: {images}"
    );
    // The engine on host 1 runs it with its limits, on the session network, labelled.
    let c1 = s1["containers"][0]["container_id"]
        .as_str()
        .unwrap()
        .to_string();
    let inspect: Value = serde_json::from_slice(&docker_on(1, &["inspect", &c1]).stdout).unwrap();
    let hc = &inspect[0]["HostConfig"];
    assert_eq!(hc["NetworkMode"], "bai-sessions");
    assert_eq!(hc["Privileged"], false);
    assert_eq!(hc["CapDrop"], json!(["ALL"]));
    assert!(hc["Memory"].as_i64().unwrap() > 0 && hc["NanoCpus"].as_i64().unwrap() > 0);
    assert_eq!(
        inspect[0]["Config"]["Labels"]["ai.backend.session-id"],
        one.as_str()
    );
    assert!(
        remote_ip(1, &c1).starts_with("10.233.1."),
        "the session sits on host 1's routed session subnet"
    );

    // A session on host 2 with the same folder: what one writes, the other reads.
    let two = session_ids(
        &create_session(
            &app,
            &user,
            json!({"image": PYTHON, "scaling_group": "h2", "mounts": ["shared"]}),
        )
        .await,
    )[0]
    .clone();
    let s2 = wait_status(&app, &user, &two, &["RUNNING", "ERROR"]).await;
    assert_eq!(s2["status"], "RUNNING", "{s2}");
    assert_eq!(s2["containers"][0]["agent"], a2.as_str());
    python(
        &app,
        &user,
        &one,
        "open('/home/work/shared/note.txt', 'w').write('written on host 1')",
    )
    .await;
    let read = python(
        &app,
        &user,
        &two,
        "print(open('/home/work/shared/note.txt').read())",
    )
    .await;
    assert_eq!(read.trim(), "written on host 1");

    // A folder whose storage host host 2 does not see: its session waits and says why.
    let far = session_ids(
        &create_session(
            &app,
            &user,
            json!({"image": PYTHON, "scaling_group": "h2", "mounts": ["fast"]}),
        )
        .await,
    )[0]
    .clone();
    let waiting = eventually("the storage-host predicate", WAIT, || async {
        let s = app
            .op_ok::<gql::SessionState>(
                Some(&user),
                gql::session_state::Variables { id: far.clone() },
            )
            .await;
        let data = s["compute_session"]["status_data"].to_string();
        data.contains("storage_host").then_some(s)
    })
    .await;
    assert_eq!(waiting["compute_session"]["status"], "PENDING", "{waiting}");
    destroy(&app, &user, &far).await;

    // Jupyter through the proxy, the terminal and SSH, on host 1.
    let started = app
        .op_ok::<gql::StartService>(
            Some(&user),
            gql::start_service::Variables {
                session_id: one.clone(),
                app: "jupyter".into(),
                open_to_public: false,
                preferred_port: None,
            },
        )
        .await;
    let token = started["start_service"]["token"].as_str().unwrap();
    let status = eventually("Jupyter on host 1 through the proxy", WAIT, || async {
        let r = app
            .http
            .get(app.url(&format!("/apps/{one}/jupyter/api/status?token={token}")))
            .bearer_auth(&user)
            .send()
            .await
            .ok()?;
        (r.status() == 200).then_some(r)
    })
    .await;
    assert!(
        status
            .json::<Value>()
            .await
            .unwrap()
            .get("started")
            .is_some()
    );
    let mut ws = terminal_ws(&app, &user, &one).await.expect("terminal");
    ws.send(Message::binary(
        b"echo remote-$((6*7)) $(hostname -I)\r".to_vec(),
    ))
    .await
    .unwrap();
    let screen = read_until(&mut ws, "remote-42").await;
    drop(ws);
    assert!(!screen.is_empty());
    let sshd = app
        .op_ok::<gql::StartService>(
            Some(&user),
            gql::start_service::Variables {
                session_id: one.clone(),
                app: "sshd".into(),
                open_to_public: false,
                preferred_port: Some(i64::from(pool + 2)),
            },
        )
        .await;
    // The preferred port, or another of the pool when something else holds it.
    let ssh_port = sshd["start_service"]["port"].as_u64().unwrap() as u16;
    let key_file = session_key(&app, &user, &one, &app.dir.join("id_container")).await;
    let last = std::sync::Mutex::new(String::new());
    let out = tokio::time::timeout(
        WAIT,
        eventually("ssh into the session on host 1", WAIT, || async {
            let out = ssh(&key_file, ssh_port, "cat /home/work/shared/note.txt");
            *last.lock().unwrap() = String::from_utf8_lossy(&out.stderr).to_string();
            out.status.success().then_some(out)
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("ssh on port {ssh_port}: {}", last.lock().unwrap()));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "written on host 1");

    // Isolation across hosts: the manager reaches host 2's session (its sshd); a session on
    // host 1 reaches neither it, nor either host, nor cloud metadata; nor does a session on
    // the manager's own host (which would otherwise arrive masqueraded as the manager).
    let c2 = s2["containers"][0]["container_id"].as_str().unwrap();
    let ip2 = remote_ip(2, c2);
    let ip1 = remote_ip(1, &c1);
    // sshd in the session on host 2 is up once its SSH setup is done (the key waits for it).
    app.op_ok::<gql::SessionSshPrivateKey>(
        Some(&user),
        gql::session_ssh_private_key::Variables {
            session_id: two.clone(),
        },
    )
    .await;
    eventually("the manager reaching host 2's session", WAIT, || async {
        tokio::net::TcpStream::connect((ip2.as_str(), 2200))
            .await
            .ok()
    })
    .await;
    let probe = format!(
        "{REACH}\nprint(reach('{ip2}', 2200), reach('10.231.2.2', 2376), reach('10.231.1.2', 2376), reach('169.254.169.254', 80))"
    );
    let seen = python(&app, &user, &one, &probe).await;
    assert!(
        !seen.contains("open"),
        "a session on host 1 reaches nothing of host 2, its own host or metadata: {seen}"
    );
    let local =
        session_ids(&create_session(&app, &user, json!({"image": PYTHON})).await)[0].clone();
    wait_status(&app, &user, &local, &["RUNNING"]).await;
    let probe = format!(
        "{REACH}\nprint(reach('{ip1}', 8080), reach('{ip2}', 2200), reach('10.231.1.2', 2376))"
    );
    let seen = python(&app, &user, &local, &probe).await;
    assert!(
        !seen.contains("open"),
        "a session on the manager's host reaches no remote session or engine: {seen}"
    );
    destroy(&app, &user, &local).await;

    // Host 2's engine dies: its agent turns LOST and its session says so; back, it is
    // reconciled (the container that died with the engine is gone, its resources freed).
    // Backend.AI's event stream carries only names Backend.AI's clients know.
    let sse = app.session_events(&user).await;
    assert_eq!(sse.status(), 200);
    let killed = std::process::Command::new("kill")
        .arg(pid_of(2))
        .status()
        .unwrap();
    assert!(killed.success());
    // Should this test fail from here on, the next one still finds host 2 answering.
    let _revive = Revive(2);
    eventually("host 2's agent LOST", WAIT, || async {
        let lost = app
            .admin_op::<gql::sessions::AgentList>(gql::sessions::agent_list::Variables {
                status: Some("LOST".into()),
            })
            .await;
        lost.to_string().contains(&a2).then_some(())
    })
    .await;
    // The agent is marked LOST first, its sessions right after.
    eventually("host 2's session marked agent-lost", WAIT, || async {
        let s = wait_status(&app, &user, &two, &["RUNNING"]).await;
        (s["status_info"] == "agent-lost").then_some(())
    })
    .await;
    let restarted = std::process::Command::new(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/hosts.sh"),
    )
    .args(["up", "2"])
    .output()
    .unwrap();
    assert!(restarted.status.success(), "{restarted:?}");
    let ended = wait_status(&app, &user, &two, &["ERROR", "TERMINATED"]).await;
    assert_eq!(ended["status_info"], "container-lost", "{ended}");
    let mut body = sse.bytes_stream();
    let mut text = String::new();
    // Read until the end shows up: WAIT is a hang bound.
    let _ = tokio::time::timeout(WAIT, async {
        while let Some(Ok(chunk)) = body.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if text.contains("session_failure") {
                break;
            }
        }
    })
    .await;
    assert!(text.contains("event: session_failure"), "{text}");
    assert!(!text.contains("session_agent_"), "{text}");
    // The agent is reconciled (its lost session ended) before it is ALIVE again.
    eventually("host 2's agent ALIVE again", WAIT, || async {
        alive_agents(&app)
            .await
            .to_string()
            .contains(&a2)
            .then_some(())
    })
    .await;
    let leftovers = docker_on(
        2,
        &[
            "ps",
            "-aq",
            "--filter",
            &format!("label=ai.backend.session-id={two}"),
        ],
    );
    assert!(
        String::from_utf8_lossy(&leftovers.stdout).trim().is_empty(),
        "no orphan container on host 2"
    );
    destroy(&app, &user, &one).await;
});

/// A multi-node cluster session: its containers on two hosts at fixed addresses of each
/// host's routed session subnet, reaching each other by name (and over SSH with the cluster's
/// key) through each host's rules, which name exactly their pairs; a session of another user
/// on the same hosts reaches neither container nor is reached; the end removes the rules.
const MULTI_NODE_PROBE: &str = r#"
import socket, subprocess, time
print('sub1-at', socket.gethostbyname('sub1'))
for i in range(60):
    try:
        c = socket.create_connection(('sub1', 2200), timeout=3); c.close(); print('sub1 reached'); break
    except OSError as e:
        err = e; time.sleep(0.5)
else:
    print('sub1 unreachable', err)
for i in range(30):
    p = subprocess.run(['ssh', '-o', 'BatchMode=yes', 'sub1', 'hostname'], capture_output=True, text=True)
    if p.returncode == 0: break
    time.sleep(1)
print('ssh:', p.stdout.strip(), p.stderr.strip())
"#;

/// The rules of host `n` (filter and nat tables) as `iptables -S` prints them.
fn host_rules(n: u8) -> String {
    let mut all = String::new();
    for table in ["filter", "nat"] {
        let out = std::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                &format!("h{n}"),
                "iptables",
                "-w",
                "-t",
                table,
                "-S",
            ])
            .output()
            .expect("ip netns exec iptables");
        assert!(out.status.success(), "{out:?}");
        all.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    all
}

both_dbs!(a_multi_node_cluster_spans_two_hosts, |db| async move {
    require_docker();
    let _turn = turn().await;
    hosts();
    // The manager's own engine stays (it has the image, and bai brings it to the hosts that
    // lack it); it has no session subnet, so no container of the cluster lands there.
    let app = spawn_with(db, |c| {
        let (mut h1, mut h2) = (engine(1, "cert"), engine(2, "cert"));
        h1.scaling_group = Some("pair".into());
        h2.scaling_group = Some("pair".into());
        c.engines = vec![h1, h2];
    })
    .await;
    app.resource_group("pair").await;
    // Half a core each: three containers on two small hosts.
    app.image_min_cpu(PYTHON, "0.5").await;
    let user = app.user("spread@x.org", "user", "default").await;
    app.use_policy(
        &user,
        "two-containers",
        gql::create_policy::CreateKeyPairResourcePolicyInput {
            max_containers_per_session: 2,
            ..TestApp::open_policy()
        },
    )
    .await;
    let half = json!({"cpu": "0.5", "mem": "320m"}).to_string();
    // Created as a Backend.AI script does: the official 26.9 SDK.
    let cli26 = crate::cli::Cli::for_user26(&app, &user).await;
    let made = cli26
        .sdk_script("spread.py", MULTI_NODE_SDK, &[PYTHON])
        .await;
    assert_eq!(made["status"], "RUNNING", "{made}");
    let id = made["id"].as_str().unwrap().to_string();
    let s = wait_status(&app, &user, &id, &["RUNNING", "ERROR"]).await;
    assert_eq!(s["status"], "RUNNING", "{s}");
    // One container on each host, each at an address of its host's session subnet.
    let containers = s["containers"].as_array().unwrap().clone();
    assert_eq!(containers.len(), 2, "{s}");
    let mut at: Vec<(u8, String)> = Vec::new();
    for c in &containers {
        let cid = c["container_id"].as_str().unwrap();
        let n = (1..=2u8)
            .find(|n| docker_on(*n, &["inspect", cid]).status.success())
            .unwrap_or_else(|| panic!("container {cid} is on a host: {s}"));
        at.push((n, remote_ip(n, cid)));
    }
    let hosts_used: std::collections::BTreeSet<u8> = at.iter().map(|(n, _)| *n).collect();
    assert_eq!(hosts_used.len(), 2, "the cluster spans both hosts: {at:?}");
    for (n, ip) in &at {
        assert!(ip.starts_with(&format!("10.233.{n}.")), "{at:?}");
    }
    let (main_ip, sub_ip) = (at[0].1.clone(), at[1].1.clone());
    // Its SSH setup done (the key waits for it), main1 reaches sub1 by name and over SSH.
    app.op_ok::<gql::SessionSshPrivateKey>(
        Some(&user),
        gql::session_ssh_private_key::Variables {
            session_id: id.clone(),
        },
    )
    .await;
    let seen = python(&app, &user, &id, MULTI_NODE_PROBE).await;
    assert!(seen.contains(&format!("sub1-at {sub_ip}")), "{seen}");
    assert!(seen.contains("sub1 reached"), "{seen}");
    assert!(seen.contains("ssh: sub1"), "{seen}");
    // Each host holds the pair's rules, and only this session's.
    let tag = format!("{}", uuid::Uuid::parse_str(&id).unwrap().simple());
    for n in [1u8, 2] {
        let rules = host_rules(n);
        let mine: Vec<&str> = rules.lines().filter(|l| l.contains(&tag)).collect();
        assert_eq!(mine.len(), 3, "host {n}: {rules}");
        assert!(
            mine.iter()
                .all(|l| l.contains(&main_ip) && l.contains(&sub_ip)),
            "every rule names both members: {mine:?}"
        );
    }

    // Another user's session on the same hosts reaches neither member, nor is reached.
    let other = app.user("next-door@x.org", "user", "default").await;
    let theirs = session_ids(
        &create_session(
            &app,
            &other,
            json!({"image": PYTHON, "scaling_group": "pair", "resources": half}),
        )
        .await,
    )[0]
    .clone();
    let t = wait_status(&app, &other, &theirs, &["RUNNING", "ERROR"]).await;
    assert_eq!(t["status"], "RUNNING", "{t}");
    app.op_ok::<gql::SessionSshPrivateKey>(
        Some(&other),
        gql::session_ssh_private_key::Variables {
            session_id: theirs.clone(),
        },
    )
    .await;
    let tcid = t["containers"][0]["container_id"].as_str().unwrap();
    let tn = (1..=2u8)
        .find(|n| docker_on(*n, &["inspect", tcid]).status.success())
        .unwrap();
    let their_ip = remote_ip(tn, tcid);
    let probe = format!("{REACH}\nprint(reach('{main_ip}', 2200), reach('{sub_ip}', 2200))");
    let seen = python(&app, &other, &theirs, &probe).await;
    assert!(
        !seen.contains("open"),
        "a stranger's session reaches no member of the cluster: {seen}"
    );
    let probe = format!("{REACH}\nprint(reach('{their_ip}', 2200))");
    let seen = python(&app, &user, &id, &probe).await;
    assert!(
        !seen.contains("open"),
        "the cluster reaches no stranger's session: {seen}"
    );
    destroy(&app, &other, &theirs).await;

    // The end takes both containers and every rule of the session on both hosts.
    destroy(&app, &user, &id).await;
    for n in [1u8, 2] {
        eventually("the cluster's rules gone", WAIT, || async {
            (!host_rules(n).contains(&tag)).then_some(())
        })
        .await;
        let left = docker_on(
            n,
            &[
                "ps",
                "-aq",
                "--filter",
                &format!("label=ai.backend.session-id={id}"),
            ],
        );
        assert!(String::from_utf8_lossy(&left.stdout).trim().is_empty());
    }
    // The 23.9.10 CLI's `run` of a multi-node cluster: its code runs in main1, which names
    // sub1 on the other host's subnet; `--rm` ends it.
    let cli = crate::cli::Cli::for_user(&app, &user).await;
    let ran = cli
        .run(&[
            "run",
            "--rm",
            "--cluster-mode",
            "multi-node",
            "--cluster-size",
            "2",
            "--scaling-group",
            "pair",
            "-r",
            "cpu=0.5",
            "-r",
            "mem=320m",
            "-c",
            "import socket; print('sub1-at', socket.gethostbyname('sub1'))",
            PYTHON,
        ])
        .await;
    assert!(ran.ok && ran.stdout.contains("sub1-at 10.233."), "{ran}");
});

/// The 26.9 SDK's call for a multi-node cluster in the resource group `pair`.
const MULTI_NODE_SDK: &str = r#"
import asyncio, json, sys
from ai.backend.client.session import AsyncSession

async def main():
    async with AsyncSession() as api:
        s = await api.ComputeSession.get_or_create(
            sys.argv[1], name="spread", cluster_size=2, cluster_mode="multi-node",
            scaling_group="pair", resources={"cpu": "0.5", "mem": "320m"},
            enqueue_only=False, max_wait=300)
        print(json.dumps({"id": str(s.id), "status": s.status}))

asyncio.run(main())
"#;
