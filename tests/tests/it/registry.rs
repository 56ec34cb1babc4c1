//! The image catalog against a real Docker Registry (Debian's `docker-registry` on a
//! loopback port): rescan as a background task with progress, and a session whose image only
//! the registry has goes through PULLING.
use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::both_dbs;
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
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("bai-registry-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let config = format!(
        "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
        dir.join("data").display()
    );
    std::fs::write(dir.join("config.yml"), config).unwrap();
    let proc = tokio::process::Command::new("docker-registry")
        .args(["serve", dir.join("config.yml").to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("docker-registry must be installed (Debian package docker-registry)");
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Registry {
        _proc: proc,
        port,
        dir,
    }
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

async fn follow_task(app: &TestApp, task_id: &str) -> Value {
    let q = "subscription($t: UUID!) { background_task_events(task_id: $t) { status event current_progress total_progress message } }";
    let mut ws = subscribe_ws(app, &app.admin_token, q, json!({"t": task_id})).await;
    let mut last = Value::Null;
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(60), ws.next())
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
    app.admin("mutation($h: String!, $u: String!) { create_container_registry(hostname: $h, props: {url: $u, type: \"docker\"}) { ok } }", json!({"h": host, "u": format!("http://{host}")})).await;
    let started = app
        .admin(
            "mutation($r: String) { rescan_images(registry: $r) { ok task_id } }",
            json!({"r": host}),
        )
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
        .admin(
            "query($t: UUID!) { background_task(task_id: $t) { status } }",
            json!({"t": task}),
        )
        .await;
    assert_eq!(polled["background_task"]["status"], "done");
    let img = app.admin("query($r: String!) { image(reference: $r) { name registry namespace base_distro installed digest } }", json!({"r": env_ref})).await;
    assert_eq!(img["image"]["registry"], host.as_str());
    assert_eq!(img["image"]["installed"], false);
    assert!(
        img["image"]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let all = app.admin("{ images { name } }", json!({})).await;
    assert!(
        !all.to_string().contains("testing/plain"),
        "images without Backend.AI labels are skipped"
    );

    // A session on it: the agent pulls (PULLING), then runs it.
    let user = app.user("puller@x.org", "user", "default").await;
    let id = session_ids(&create_session(&app, &user, json!({"image": env_ref})).await)[0].clone();
    let s = wait_status(&app, &user, &id, &["RUNNING", "ERROR"]).await;
    assert_eq!(s["status"], "RUNNING", "{s}");
    let hist = app
        .ok(
            Some(&user),
            "query($id: UUID!) { compute_session(id: $id) { status_history } }",
            json!({"id": id}),
        )
        .await;
    assert!(
        hist["compute_session"]["status_history"]
            .as_str()
            .unwrap()
            .contains("PULLING"),
        "{hist}"
    );
    let img = app
        .admin(
            "query($r: String!) { image(reference: $r) { installed } }",
            json!({"r": env_ref}),
        )
        .await;
    assert_eq!(img["image"]["installed"], true);
    destroy(&app, &user, &id).await;
    let _ = std::process::Command::new("docker")
        .args(["rmi", &env_ref])
        .output();

    // An unreachable registry: the task fails and says why.
    app.admin(r#"mutation { create_container_registry(hostname: "127.0.0.1:9", props: {url: "http://127.0.0.1:9", type: "docker"}) { ok } }"#, json!({})).await;
    let started = app
        .admin(
            r#"mutation { rescan_images(registry: "127.0.0.1:9") { task_id } }"#,
            json!({}),
        )
        .await;
    let failed = follow_task(&app, started["rescan_images"]["task_id"].as_str().unwrap()).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["message"].as_str().unwrap().contains("unreachable"),
        "{failed}"
    );
    assert_code(
        &app.gql(
            Some(&app.admin_token),
            r#"mutation { rescan_images(registry: "nope:1") { task_id } }"#,
            json!({}),
        )
        .await,
        "NOT_FOUND",
    );
    assert_code(
        &app.gql(
            Some(&user),
            "mutation { rescan_images { task_id } }",
            json!({}),
        )
        .await,
        "FORBIDDEN",
    );
});
