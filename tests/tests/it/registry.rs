//! The image catalog against a real Docker Registry (Debian's `docker-registry` on a
//! loopback port): rescan as a background task with progress, and a session whose image only
//! the registry has goes through PULLING.
use std::path::Path;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::both_dbs;
use crate::gql;
use crate::support::*;

fn run(cmd: &str, args: &[&str], input: Option<&Path>) {
    let mut c = std::process::Command::new(cmd);
    c.args(args);
    if let Some(f) = input {
        c.stdin(std::fs::File::open(f).unwrap());
    }
    let out = c.output().unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A registry server on a free loopback port, removed with the value.
struct Registry {
    _proc: tokio::process::Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn registry() -> Registry {
    let dir = std::env::temp_dir().join(format!("bai-registry-{}", uuid::Uuid::new_v4().simple()));
    let (proc, port) = registry_on(&dir, "").await;
    Registry {
        _proc: proc,
        port,
        dir,
    }
}

/// A registry serving the storage under `dir/data` with `extra` lines of configuration (an
/// `auth:` section, say) on a free loopback port.
async fn registry_on(dir: &Path, extra: &str) -> (tokio::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let config = format!(
        "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n{extra}",
        dir.join("data").display()
    );
    let file = dir.join(format!("config-{port}.yml"));
    std::fs::write(&file, config).unwrap();
    let proc = tokio::process::Command::new("docker-registry")
        .args(["serve", file.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("docker-registry must be installed (Debian package docker-registry)");
    eventually("the registry to listen", WAIT, || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(drop)
    })
    .await;
    (proc, port)
}

/// A tiny runnable image (busybox, a `work` user) pushed to `reference`, then removed
/// locally so that only the registry has it.
fn push_mini_image(reference: &str, labels: &[&str]) {
    let root = std::env::temp_dir().join(format!("bai-mini-{}", uuid::Uuid::new_v4().simple()));
    for d in ["bin", "etc", "home/work", "tmp"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy("/bin/busybox", root.join("bin/busybox"))
        .expect("busybox-static must be installed");
    for tool in ["sh", "sleep", "cat", "echo", "id"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(tool)).unwrap();
    }
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\nwork:x:1000:1000::/home/work:/bin/sh\n",
    )
    .unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\nwork:x:1000:\n").unwrap();
    run(
        "chown",
        &["1000:1000", root.join("home/work").to_str().unwrap()],
        None,
    );
    let tar = root.with_extension("tar");
    run(
        "tar",
        &[
            "-C",
            root.to_str().unwrap(),
            "-cf",
            tar.to_str().unwrap(),
            ".",
        ],
        None,
    );
    let mut args = vec![
        "import".to_string(),
        "--change".into(),
        "ENV PATH=/bin".into(),
    ];
    for l in labels {
        args.push("--change".into());
        args.push(format!("LABEL {l}"));
    }
    args.push("-".into());
    args.push(reference.into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run("docker", &args, Some(&tar));
    run("docker", &["push", reference], None);
    run("docker", &["rmi", reference], None);
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_file(&tar);
}

/// The task's last state, followed to its end. The subscription answers the current state
/// first, so it needs no event-bus listener before the task moves on (and one of a finished
/// task ends at once): its first message is what this waits for.
async fn follow_task(app: &TestApp, task_id: &str) -> Value {
    let mut ws = subscribe_op_sent::<gql::BackgroundTaskEvents>(
        app,
        &app.admin_token,
        gql::background_task_events::Variables {
            task_id: task_id.into(),
        },
    )
    .await;
    let mut last = Value::Null;
    loop {
        let msg = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("task event")
            .unwrap()
            .unwrap();
        let Message::Text(t) = msg else { continue };
        let v: Value = serde_json::from_str(t.as_str()).unwrap();
        if v["type"] == "complete" {
            return last;
        }
        assert!(v["payload"]["errors"].is_null(), "{v}");
        last = v["payload"]["data"]["background_task_events"].clone();
        if last["status"] != "running" {
            return last;
        }
    }
}

both_dbs!(registry_rescan_and_pull, |db| async move {
    require_docker();
    let reg = registry().await;
    let host = format!("127.0.0.1:{}", reg.port);
    let env_ref = format!("{host}/testing/mini:1");
    push_mini_image(
        &env_ref,
        &[
            "ai.backend.kernelspec=1",
            "ai.backend.base-distro=busybox",
            "ai.backend.resource.min.cpu=1",
            "ai.backend.resource.min.mem=64m",
            "ai.backend.runtime-type=app",
        ],
    );
    push_mini_image(
        &format!("{host}/testing/plain:1"),
        &["purpose=not-an-environment"],
    );

    let app = spawn(db).await;
    app.admin_op::<gql::registry::CreateRegistry>(create_registry(
        &host,
        &format!("http://{host}"),
    ))
    .await;
    let started = app
        .admin_op::<gql::RescanImages>(gql::rescan_images::Variables {
            registry: Some(host.clone()),
        })
        .await;
    let task = started["rescan_images"]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let done = follow_task(&app, &task).await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["event"], "bgtask_done");
    assert_eq!(done["message"], "1 environment image(s) found");
    assert_eq!(done["current_progress"], done["total_progress"]);
    let polled = app
        .admin_op::<gql::BackgroundTask>(gql::background_task::Variables {
            task_id: task.clone(),
        })
        .await;
    assert_eq!(polled["background_task"]["status"], "done");
    let img = image(&app, &env_ref).await;
    assert_eq!(img["image"]["registry"], host.as_str());
    assert_eq!(img["image"]["installed"], false);
    assert!(
        img["image"]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let all = app.admin_op::<gql::Images>(Default::default()).await;
    assert!(
        !all["images"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"].as_str().unwrap().contains("testing/plain")),
        "images without Backend.AI labels are skipped"
    );

    // A session on it: the agent pulls (PULLING), then runs it.
    let user = app.user("puller@x.org", "user", "default").await;
    let mut events = subscribe_op::<gql::hosts::SessionProgress>(
        &app,
        &user,
        gql::hosts::session_progress::Variables { session_id: None },
    )
    .await;
    let id = session_ids(&create_session(&app, &user, json!({"image": env_ref})).await)[0].clone();
    let s = wait_status(&app, &user, &id, &["RUNNING", "ERROR"]).await;
    assert_eq!(s["status"], "RUNNING", "{s}");
    // The pull's progress came live (Backend.AI's kernel_pulling, with the per-cent done).
    let mut pulling = Vec::new();
    loop {
        let msg = tokio::time::timeout(WAIT, futures_util::StreamExt::next(&mut events))
            .await
            .expect("events until RUNNING")
            .unwrap()
            .unwrap();
        let tokio_tungstenite::tungstenite::Message::Text(t) = msg else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(t.as_str()).unwrap();
        let e = v["payload"]["data"]["session_status_changes"].clone();
        if e["event"] == "kernel_pulling" {
            pulling.push(e["reason"].as_str().unwrap_or_default().to_string());
        }
        if e["status"] == "RUNNING" {
            break;
        }
    }
    assert!(
        pulling
            .iter()
            .any(|r| r.starts_with(&format!("pulling {env_ref}: ")) && r.ends_with('%')),
        "{pulling:?}"
    );
    let hist = app
        .op_ok::<gql::registry::SessionHistory>(
            Some(&user),
            gql::registry::session_history::Variables { id: id.clone() },
        )
        .await;
    assert!(
        hist["compute_session"]["status_history"]
            .as_str()
            .unwrap()
            .contains("PULLING"),
        "{hist}"
    );
    let img = image(&app, &env_ref).await;
    assert_eq!(img["image"]["installed"], true);
    destroy(&app, &user, &id).await;
    let _ = std::process::Command::new("docker")
        .args(["rmi", &env_ref])
        .output();

    // An unreachable registry: the task fails and says why.
    app.admin_op::<gql::registry::CreateRegistry>(create_registry(
        "127.0.0.1:9",
        "http://127.0.0.1:9",
    ))
    .await;
    let started = app
        .admin_op::<gql::RescanImages>(gql::rescan_images::Variables {
            registry: Some("127.0.0.1:9".into()),
        })
        .await;
    let failed = follow_task(&app, started["rescan_images"]["task_id"].as_str().unwrap()).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["message"].as_str().unwrap().contains("unreachable"),
        "{failed}"
    );
    assert_code(
        &app.op::<gql::RescanImages>(
            Some(&app.admin_token),
            gql::rescan_images::Variables {
                registry: Some("nope:1".into()),
            },
        )
        .await,
        "NOT_FOUND",
    );
    assert_code(
        &app.op::<gql::RescanImages>(Some(&user), Default::default())
            .await,
        "FORBIDDEN",
    );
});

/// A token issuer as registries use (Docker's token authentication): `GET /token?service=…
/// &scope=…` with HTTP Basic credentials answers `{"token": JWT}` signed (RS256, through
/// `openssl`) by a key whose certificate the registry trusts. It grants exactly the scopes
/// asked for, to `scanner` / `s3cret` only, and records them.
struct TokenIssuer {
    port: u16,
    scopes: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TokenIssuer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn token_issuer(dir: &Path) -> TokenIssuer {
    use base64::Engine;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    run(
        "openssl",
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=bai test token issuer",
            "-keyout",
            dir.join("token.key").to_str().unwrap(),
            "-out",
            dir.join("token.pem").to_str().unwrap(),
        ],
        None,
    );
    let der = std::process::Command::new("openssl")
        .args([
            "x509",
            "-outform",
            "der",
            "-in",
            dir.join("token.pem").to_str().unwrap(),
        ])
        .output()
        .unwrap()
        .stdout;
    let x5c = base64::engine::general_purpose::STANDARD.encode(der);
    let key = dir.join("token.key");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let scopes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = scopes.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                continue;
            };
            let (key, x5c, seen) = (key.clone(), x5c.clone(), seen.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).to_string();
                let target = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let url = reqwest::Url::parse(&format!("http://x{target}")).unwrap();
                let q: std::collections::HashMap<String, String> =
                    url.query_pairs().into_owned().collect();
                let want = format!(
                    "basic {}",
                    base64::engine::general_purpose::STANDARD.encode("scanner:s3cret")
                );
                let authorised = head.lines().any(|l| {
                    l.to_ascii_lowercase().starts_with("authorization:")
                        && l.split_once(':')
                            .unwrap()
                            .1
                            .trim()
                            .eq_ignore_ascii_case(&want)
                });
                let flood = head.lines().any(|l| {
                    l.to_ascii_lowercase().starts_with("authorization:")
                        && l.trim_end().ends_with(
                            &base64::engine::general_purpose::STANDARD.encode("scanner:flood"),
                        )
                });
                if flood {
                    // A hostile token service: an endless-looking answer (2 MiB of token).
                    let body = json!({"token": "A".repeat(2 << 20)}).to_string();
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(resp.as_bytes()).await;
                    return;
                }
                let (status, body) = if authorised {
                    let scope = q.get("scope").cloned().unwrap_or_default();
                    seen.lock().unwrap().push(scope.clone());
                    let access: Vec<Value> = scope
                        .split(' ')
                        .filter(|s| !s.is_empty())
                        .map(|s| {
                            let mut parts = s.splitn(3, ':');
                            let (t, n, a) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                            json!({"type": t, "name": n, "actions": a.split(',').collect::<Vec<_>>()})
                        })
                        .collect();
                    let now = chrono::Utc::now().timestamp();
                    let b64 = |v: &Value| {
                        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
                    };
                    let signing_input = format!(
                        "{}.{}",
                        b64(&json!({"alg": "RS256", "typ": "JWT", "x5c": [x5c]})),
                        b64(&json!({"iss": "bai-test-issuer", "sub": "scanner",
                                    "aud": q.get("service").cloned().unwrap_or_default(),
                                    "exp": now + 300, "nbf": now - 10, "iat": now,
                                    "jti": uuid::Uuid::new_v4().to_string(), "access": access}))
                    );
                    let mut sign = tokio::process::Command::new("openssl")
                        .args(["dgst", "-sha256", "-sign", key.to_str().unwrap()])
                        .stdin(std::process::Stdio::piped())
                        .stdout(std::process::Stdio::piped())
                        .spawn()
                        .unwrap();
                    let mut stdin = sign.stdin.take().unwrap();
                    stdin.write_all(signing_input.as_bytes()).await.unwrap();
                    drop(stdin);
                    let sig = sign.wait_with_output().await.unwrap().stdout;
                    let token = format!(
                        "{signing_input}.{}",
                        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sig)
                    );
                    (
                        "200 OK",
                        json!({"token": token, "expires_in": 300}).to_string(),
                    )
                } else {
                    (
                        "401 Unauthorized",
                        json!({"details": "bad credentials"}).to_string(),
                    )
                };
                let resp = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(resp.as_bytes()).await;
            });
        }
    });
    TokenIssuer { port, scopes, task }
}

/// A Docker registry at `url` as `create_container_registry` takes it.
fn create_registry(host: &str, url: &str) -> gql::registry::create_registry::Variables {
    gql::registry::create_registry::Variables {
        hostname: host.into(),
        props: gql::registry::create_registry::CreateContainerRegistryInput {
            url: url.into(),
            type_: "docker".into(),
            ..Default::default()
        },
    }
}

/// The image `reference` (a tag or a digest) as the superadmin reads it.
async fn image(app: &TestApp, reference: &str) -> Value {
    app.admin_op::<gql::Image>(gql::image::Variables {
        reference: reference.into(),
    })
    .await
}

async fn set_password(app: &TestApp, host: &str, pass: &str) {
    app.admin_op::<gql::registry::ModifyRegistry>(gql::registry::modify_registry::Variables {
        hostname: host.into(),
        props: gql::registry::modify_registry::ModifyContainerRegistryInput {
            password: Some(pass.into()),
            ..Default::default()
        },
    })
    .await;
}

/// Adds the registry with a wrong password (the scan fails with the reason), then sets the
/// right one (the scan finds the two environment images).
async fn refused_then_scanned(app: &TestApp, host: &str, url: &str) {
    let mut registry = create_registry(host, url);
    registry.props.username = Some("scanner".into());
    registry.props.password = Some("wrong".into());
    app.admin_op::<gql::registry::CreateRegistry>(registry)
        .await;
    let failed = rescan(app, host).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("refused the credentials"),
        "{failed}"
    );
    set_password(app, host, "s3cret").await;
    let done = rescan(app, host).await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["message"], "2 environment image(s) found", "{done}");
}

async fn rescan(app: &TestApp, host: &str) -> Value {
    let started = app
        .admin_op::<gql::RescanImages>(gql::rescan_images::Variables {
            registry: Some(host.into()),
        })
        .await;
    follow_task(app, started["rescan_images"]["task_id"].as_str().unwrap()).await
}

// Registries as labs run them: HTTP Basic (htpasswd), and token authentication over HTTPS
// with a private CA (a Harbor's or GitLab's). The catalog comes in pages smaller than asked
// (`maxentries`), images are found by digest too, and wrong credentials fail the scan
// with the reason.
both_dbs!(registry_basic_and_token_auth, |db| async move {
    require_docker();
    let dir = std::env::temp_dir().join(format!("bai-regauth-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    // Images go in through an open registry on the same storage.
    let (open, port) = registry_on(&dir, "").await;
    let labels = ["ai.backend.kernelspec=1", "ai.backend.base-distro=busybox"];
    for r in ["bai/tok:1", "bai/tok:2"] {
        push_mini_image(&format!("127.0.0.1:{port}/{r}"), &labels);
    }
    for r in ["other/a:1", "other/b:1"] {
        push_mini_image(&format!("127.0.0.1:{port}/{r}"), &["purpose=plain"]);
    }
    drop(open);
    let tls = TlsFiles::new();
    let app = spawn_with(db, |c| c.registry_ca_file = Some(tls.ca.clone())).await;
    // HTTP Basic, catalog pages of 2 for 3 repositories.
    let htpasswd = std::process::Command::new("htpasswd")
        .args(["-Bbn", "scanner", "s3cret"])
        .output()
        .expect("htpasswd must be installed (Debian apache2-utils)");
    std::fs::write(dir.join("htpasswd"), &htpasswd.stdout).unwrap();
    let (_basic, port) = registry_on(
        &dir,
        &format!(
            "catalog:\n  maxentries: 2\nauth:\n  htpasswd:\n    realm: bai-test\n    path: {}\n",
            dir.join("htpasswd").display()
        ),
    )
    .await;
    let host = format!("127.0.0.1:{port}");
    refused_then_scanned(&app, &host, &format!("http://{host}")).await;

    // Token authentication over HTTPS signed by the test CA.
    let issuer = token_issuer(&dir).await;
    let (_token, port) = registry_on(
        &dir,
        &format!(
            "  tls:\n    certificate: {}\n    key: {}\ncatalog:\n  maxentries: 2\nauth:\n  token:\n    realm: http://127.0.0.1:{}/token\n    service: bai-test-registry\n    issuer: bai-test-issuer\n    rootcertbundle: {}\n",
            tls.cert.display(),
            tls.key.display(),
            issuer.port,
            dir.join("token.pem").display()
        ),
    )
    .await;
    let host = format!("localhost:{port}");
    refused_then_scanned(&app, &host, &format!("https://{host}")).await;
    // A token service answering without end is cut off at a bound.
    set_password(&app, &host, "flood").await;
    let flooded = rescan(&app, &host).await;
    assert_eq!(flooded["status"], "failed", "{flooded}");
    assert!(
        flooded["message"]
            .as_str()
            .unwrap()
            .contains("token service sent more than 256 KiB"),
        "{flooded}"
    );
    set_password(&app, &host, "s3cret").await;
    let scopes = issuer.scopes.lock().unwrap().clone();
    assert!(
        scopes.iter().any(|s| s == "registry:catalog:*"),
        "{scopes:?}"
    );
    assert!(
        scopes.iter().any(|s| s == "repository:bai/tok:pull"),
        "{scopes:?}"
    );
    assert!(!scopes.iter().any(|s| s.contains("push")), "{scopes:?}");

    // By tag and by digest.
    let reference = format!("{host}/bai/tok:2");
    let img = image(&app, &reference).await;
    let digest = img["image"]["digest"].as_str().unwrap().to_string();
    assert!(digest.starts_with("sha256:"), "{img}");
    let by_digest = image(&app, &format!("{host}/bai/tok@{digest}")).await;
    assert_eq!(
        by_digest["image"]["name"],
        reference.as_str(),
        "{by_digest}"
    );
    let _ = std::fs::remove_dir_all(&dir);
});
