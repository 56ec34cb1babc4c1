//! Several hosts: extra Docker engines, each a host of its own (network namespace, address,
//! engine id), reached over mutual TLS. `scripts/hosts.sh up` starts them once per test run;
//! a machine where it cannot fails these tests (never skips them).
use std::path::PathBuf;
use std::sync::OnceLock;

use api::config::EngineConfig;

use crate::both_dbs;
use crate::gql;
use crate::support::*;

/// The hosts' state directory, once `scripts/hosts.sh up 2` has them answering.
fn hosts() -> PathBuf {
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
fn engine(n: u8, client: &str) -> EngineConfig {
    let tls = hosts().join("tls");
    let key = client.replace("cert", "key");
    EngineConfig {
        endpoint: format!("tcp://10.231.{n}.2:2376"),
        tls_ca: Some(tls.join("ca.pem")),
        tls_cert: Some(tls.join(format!("{client}.pem"))),
        tls_key: Some(tls.join(format!("{key}.pem"))),
        insecure: false,
        scaling_group: Some(format!("h{n}")),
    }
}

async fn alive_agents(app: &TestApp) -> serde_json::Value {
    app.admin_op::<gql::sessions::AgentList>(gql::sessions::agent_list::Variables {
        status: Some("ALIVE".into()),
    })
    .await["agent_list"]["items"]
        .clone()
}

both_dbs!(remote_engines_are_agents_of_their_groups, |db| async move {
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
        let insecure = |endpoint: String| EngineConfig {
            endpoint,
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            insecure: true,
            scaling_group: None,
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
