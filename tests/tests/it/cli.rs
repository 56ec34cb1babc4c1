//! Backend.AI's own client, unchanged (PyPI `backend.ai-client`, installed by
//! scripts/cli.sh), against a real server with real containers: the seed's CLI chapter.
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::support::*;
use crate::{both_dbs, gql};

fn cli_path() -> PathBuf {
    installed_cli("BAI_TEST_CLI", "venv")
}

/// The newest 26.9.x client (Python 3.13), beside 23.9.10.
fn cli26_path() -> PathBuf {
    installed_cli("BAI_TEST_CLI26", "venv26")
}

fn installed_cli(var: &str, venv: &str) -> PathBuf {
    let p = std::env::var(var).map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(std::env::var("HOME").unwrap_or_default())
            .join(format!(".cache/bai-cli/{venv}/bin/backend.ai"))
    });
    assert!(
        p.exists(),
        "the backend.ai client is not installed at {} (run scripts/cli.sh)",
        p.display()
    );
    p
}

pub(crate) struct Cli {
    bin: PathBuf,
    endpoint: String,
    access_key: String,
    secret_key: String,
    dir: PathBuf,
    /// The CA the client must trust (an HTTPS server made by the test).
    ca: Option<PathBuf>,
    /// `BACKEND_ENDPOINT_TYPE=session`: through a Lablup web server, after `backend.ai login`
    /// (no keypair in the environment; the login cookie kept in the client's own directory).
    session: bool,
}

pub(crate) struct Out {
    pub(crate) ok: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Out {
    /// Whether the client was refused by the server with HTTP `status` ("404 Not Found") and
    /// a problem whose message contains `message`: Backend.AI's client exits non-zero and
    /// prints `BackendAPIError: <status> <reason>` and the problem's title. A client that
    /// crashed, timed out or never reached the server prints neither.
    pub(crate) fn refused(&self, status: &str, message: &str) -> bool {
        !self.ok
            && self.stderr.contains(&format!("BackendAPIError: {status}"))
            && self.stderr.contains(message)
    }
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        )
    }
}

impl Cli {
    /// As [`Cli::for_user`], with the newest client (26.9).
    pub(crate) async fn for_user26(app: &TestApp, token: &str) -> Cli {
        Cli {
            bin: cli26_path(),
            ..Cli::for_user(app, token).await
        }
    }

    /// The same client and keypair, sent to `endpoint` (a load balancer in front of the
    /// managers).
    pub(crate) fn through(self, endpoint: &str) -> Cli {
        Cli {
            endpoint: endpoint.to_string(),
            ..self
        }
    }

    /// The same client through Lablup's web server at `url`, in its session mode.
    pub(crate) fn through_web_server(self, url: &str) -> Cli {
        Cli {
            endpoint: url.to_string(),
            session: true,
            ..self
        }
    }

    pub(crate) async fn for_user(app: &TestApp, token: &str) -> Cli {
        let kp = app
            .op_ok::<gql::MyKeypair>(Some(token), Default::default())
            .await;
        let dir = app
            .dir
            .join(format!("cli-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        Cli {
            bin: cli_path(),
            endpoint: app.base.clone(),
            access_key: kp["keypair"]["access_key"].as_str().unwrap().into(),
            secret_key: kp["keypair"]["secret_key"].as_str().unwrap().into(),
            dir,
            ca: app
                .config
                .tls_cert
                .as_ref()
                .map(|c| c.with_file_name("ca.pem")),
            session: false,
        }
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        self.program(&self.bin, args)
    }

    /// The client's own Python, for scripts on its SDK.
    fn python(&self, args: &[&str]) -> tokio::process::Command {
        self.program(&self.bin.with_file_name("python"), args)
    }

    fn program(&self, program: &std::path::Path, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(program);
        c.args(args)
            .current_dir(&self.dir)
            .env("BACKEND_ENDPOINT", &self.endpoint)
            .env("BACKEND_ENDPOINT_TYPE", "api")
            .env("BACKEND_ACCESS_KEY", &self.access_key)
            .env("BACKEND_SECRET_KEY", &self.secret_key)
            .env("PYTHONWARNINGS", "ignore")
            .env("COLUMNS", "300")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        if self.session {
            c.env("BACKEND_ENDPOINT_TYPE", "session")
                .env_remove("BACKEND_ACCESS_KEY")
                .env_remove("BACKEND_SECRET_KEY")
                .env("XDG_STATE_HOME", &self.dir);
        }
        if let Some(ca) = &self.ca {
            // Python's default TLS context (the client's) reads its roots from here.
            c.env("SSL_CERT_FILE", ca);
        }
        c
    }

    /// Runs a script on the client's SDK (`source`, saved as `name`) with `args`; it must
    /// succeed and print one JSON document, which is returned.
    pub(crate) async fn sdk_script(&self, name: &str, source: &str, args: &[&str]) -> Value {
        let script = self.dir.join(name);
        std::fs::write(&script, source).unwrap();
        let mut all = vec![script.to_str().unwrap()];
        all.extend_from_slice(args);
        let out = tokio::time::timeout(Duration::from_secs(300), self.python(&all).output())
            .await
            .unwrap_or_else(|_| panic!("{name} did not end"))
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{name}: {e}: {stdout}"))
    }

    /// As [`Cli::run`], answering the command's prompts with `input`.
    pub(crate) async fn run_input(&self, args: &[&str], input: &str) -> Out {
        use tokio::io::AsyncWriteExt as _;
        let mut cmd = self.command(args);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).await.unwrap();
        drop(stdin);
        let out = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("backend.ai {args:?} timed out"))
            .unwrap();
        Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// The directory the client runs in (its files to upload, downloads land here).
    pub(crate) fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    pub(crate) async fn run(&self, args: &[&str]) -> Out {
        let out = tokio::time::timeout(Duration::from_secs(180), self.command(args).output())
            .await
            .unwrap_or_else(|_| panic!("backend.ai {args:?} timed out"))
            .unwrap();
        Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

fn session_id_in(text: &str) -> String {
    text.split(|c: char| !(c.is_ascii_hexdigit() || c == '-'))
        .find(|w| w.len() == 36 && uuid::Uuid::parse_str(w).is_ok())
        .unwrap_or_else(|| panic!("no session id in: {text}"))
        .to_string()
}

both_dbs!(official_cli_against_bai, |db| async move {
    require_docker();
    let app = spawn(db).await;
    // `python` is an alias the first start seeded (the guides' commands use it), with
    // `python3` and `python:<tag>`; one an admin removes stays removed after a rescan.
    let aliases = |img: Value| img["image"]["aliases"].clone();
    let img = app
        .admin_op::<gql::Image>(gql::image::Variables {
            reference: "python3".into(),
        })
        .await;
    assert_eq!(img["image"]["name"], PYTHON, "{img}");
    for a in ["python", "python3", "python:3.11-debian12"] {
        assert!(
            aliases(img.clone()).as_array().unwrap().contains(&json!(a)),
            "{img}"
        );
    }
    app.admin_op::<gql::live::DealiasImage>(gql::live::dealias_image::Variables {
        alias: "python:3.11-debian12".into(),
    })
    .await;
    let task =
        app.admin_op::<gql::RescanImages>(Default::default()).await["rescan_images"]["task_id"]
            .as_str()
            .unwrap()
            .to_string();
    wait_task_done(&app, &app.admin_token, &task).await;
    let img = app
        .admin_op::<gql::Image>(gql::image::Variables {
            reference: "python".into(),
        })
        .await;
    assert!(
        !aliases(img.clone())
            .as_array()
            .unwrap()
            .contains(&json!("python:3.11-debian12")),
        "{img}"
    );
    let user = app.user("cli@x.org", "user", "default").await;
    let cli = Cli::for_user(&app, &user).await;

    // run: a query-mode snippet; the session is removed afterwards.
    let out = cli
        .run(&["run", "--rm", "-c", "print(\"hello world\")", "python"])
        .await;
    assert!(out.ok, "{out}");
    assert!(out.stdout.contains("hello world\n"), "{out}");
    assert!(out.to_string().contains("exit code = 0"), "{out}");

    // run --exec: a file uploaded to /home/work and run in batch mode with arguments.
    std::fs::write(
        cli.dir.join("myscript.py"),
        "import glob, os, sys\nprint('args:', sys.argv[1:])\nprint('big:', os.path.getsize('big.bin'))\nprint('long:', [os.path.join(r, f) for r, d, fs in os.walk('.') for f in fs if f == 'long.txt'])\nsys.exit(3)\n",
    )
    .unwrap();
    // A second file above axum's default 2 MiB body limit travels along, and a third whose
    // path is longer than the 99 bytes of a plain ustar name.
    std::fs::write(cli.dir.join("big.bin"), vec![7u8; 3 * 1024 * 1024]).unwrap();
    let long_dir = format!("data/{}", "n".repeat(110));
    std::fs::create_dir_all(cli.dir.join(&long_dir)).unwrap();
    std::fs::write(cli.dir.join(&long_dir).join("long.txt"), "far away\n").unwrap();
    let long_file = format!("./{long_dir}/long.txt");
    let out = cli
        .run(&[
            "run",
            "--rm",
            "--exec",
            "python myscript.py arg1 arg2",
            "python",
            "./myscript.py",
            "./big.bin",
            &long_file,
        ])
        .await;
    assert!(out.stdout.contains("args: ['arg1', 'arg2']"), "{out}");
    assert!(
        out.stdout.contains(&format!("long: ['{}']", long_file)),
        "{out}"
    );
    assert!(out.stdout.contains("big: 3145728"), "{out}");
    assert!(out.to_string().contains("exit code = 3"), "{out}");

    // start: an interactive session that stays; ps lists it, with the columns in order.
    let out = cli.run(&["start", "-t", "cli-keep", "python"]).await;
    assert!(out.ok, "{out}");
    let ps = cli.run(&["ps"]).await;
    assert!(ps.ok, "{ps}");
    let header = ps.stdout.lines().next().unwrap_or_default().to_string();
    let row = ps
        .stdout
        .lines()
        .find(|l| l.starts_with("cli-keep"))
        .unwrap_or_else(|| panic!("cli-keep listed: {ps}"))
        .to_string();
    let col = |name: &str| {
        header
            .find(name)
            .unwrap_or_else(|| panic!("{name} in {header}"))
    };
    assert_eq!(
        &row[col("Image")..col("Image") + PYTHON.len()],
        PYTHON,
        "{ps}"
    );
    assert_eq!(&row[col("Status")..col("Status") + 7], "RUNNING", "{ps}");
    assert_eq!(
        &row[col("Project/Group")..col("Project/Group") + 7],
        "default",
        "{ps}"
    );
    let keep_id = session_id_in(&row);

    // A batch session: its output is the session log.
    let out = cli
        .run(&[
            "start",
            "-t",
            "cli-batch",
            "--type",
            "batch",
            "-c",
            "echo from-the-batch-job",
            "python",
        ])
        .await;
    assert!(out.ok, "{out}");
    let logs = eventually("the batch job's output in its log", WAIT, || async {
        let out = cli.run(&["session", "logs", "cli-batch"]).await;
        out.stdout
            .contains("from-the-batch-job")
            .then(|| out.to_string())
    })
    .await;
    assert!(logs.contains("from-the-batch-job"), "{logs}");

    // --enqueue-only returns at once; --max-wait gives up on a session that cannot start.
    let out = cli
        .run(&[
            "run",
            "--enqueue-only",
            "-t",
            "cli-queued",
            "-c",
            "print(1)",
            "python",
        ])
        .await;
    assert!(out.ok, "{out}");
    assert!(
        out.to_string()
            .contains("Session ID cli-queued is enqueued for scheduling."),
        "{out}"
    );
    let waited = cli
        .run(&[
            "run",
            "--max-wait",
            "1",
            "-t",
            "cli-too-big",
            "-r",
            "cpu=64",
            "-c",
            "print(1)",
            "python",
        ])
        .await;
    assert!(
        waited
            .to_string()
            .contains("Session ID cli-too-big is still on the job queue."),
        "{waited}"
    );
    let big = app
        .op_ok::<gql::SessionList>(
            Some(&user),
            gql::session_list::Variables {
                limit: 5,
                filter: Some("name == \"cli-too-big\"".into()),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(big["compute_session_list"]["items"][0]["status"], "PENDING");

    // events: a live stream of the session's lifecycle while it is removed.
    let listeners = app.state().shared.events.subscribers();
    let mut events = cli
        .command(&["events", &keep_id])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(events.stdout.take().unwrap()).lines();
    // The client's event stream (Server-Sent Events) listens on the event bus.
    eventually("the client's event stream to listen", WAIT, || async {
        (app.state().shared.events.subscribers() > listeners).then_some(())
    })
    .await;
    // rm with two ids: the kept session and the queued one (a pending session is cancelled).
    let out = cli.run(&["rm", &keep_id, "cli-too-big"]).await;
    assert!(out.ok, "{out}");
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !seen
        .iter()
        .any(|l: &String| l.starts_with("session_terminated"))
    {
        let line = tokio::time::timeout_at(deadline, lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("events so far: {seen:?}"))
            .unwrap()
            .unwrap_or_else(|| panic!("the stream ended: {seen:?}"));
        seen.push(line);
    }
    let _ = events.kill().await;
    let terminated = seen
        .iter()
        .find(|l| l.starts_with("session_terminated"))
        .unwrap();
    assert!(
        terminated.contains(&format!("\"sessionId\": \"{keep_id}\"")),
        "{seen:?}"
    );
    assert!(
        terminated.contains("\"sessionName\": \"cli-keep\""),
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|l| l.starts_with("session_terminating")),
        "{seen:?}"
    );

    // admin session list --dead: the ended sessions; ps no longer shows them.
    let dead = cli.run(&["admin", "session", "list", "--dead"]).await;
    assert!(dead.ok, "{dead}");
    assert!(
        dead.stdout.contains("cli-keep") && dead.stdout.contains("TERMINATED"),
        "{dead}"
    );
    assert!(
        dead.stdout.contains("cli-too-big") && dead.stdout.contains("CANCELLED"),
        "{dead}"
    );
    let ps = cli.run(&["ps"]).await;
    assert!(!ps.stdout.contains("cli-keep"), "{ps}");
    assert!(ps.stdout.contains("cli-queued"), "{ps}");

    // Another user's keypair sees none of it.
    let other = app.user("cli-other@x.org", "user", "default").await;
    let stranger = Cli::for_user(&app, &other).await;
    let out = stranger.run(&["session", "logs", "cli-batch"]).await;
    assert!(
        out.refused("404 Not Found", "session 'cli-batch' not found"),
        "{out}"
    );
    assert!(!out.stdout.contains("from-the-batch-job"), "{out}");
});

both_dbs!(rest_resources_and_authorize, |db| async move {
    let app = spawn(db).await;
    let user = app.user("rest@x.org", "user", "default").await;
    // /auth/authorize: email + password → the main keypair; a wrong password is refused.
    let kp = app
        .op_ok::<gql::MyKeypair>(Some(&user), Default::default())
        .await;
    let ok = app
        .http
        .post(app.url("/auth/authorize"))
        .json(&json!({"type": "keypair", "domain": "default", "username": "rest@x.org", "password": USER_PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let body: serde_json::Value = ok.json().await.unwrap();
    assert_eq!(body["data"]["access_key"], kp["keypair"]["access_key"]);
    assert_eq!(body["data"]["secret_key"], kp["keypair"]["secret_key"]);
    assert_eq!(body["data"]["role"], "user");
    let bad = app
        .http
        .post(app.url("/auth/authorize"))
        .json(&json!({"type": "keypair", "domain": "default", "username": "rest@x.org", "password": "wrong-Pass-123"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 401);
    assert_eq!(bad.headers()["content-type"], "application/problem+json");
    // Presets, resource groups, slot types.
    let get = |path: &str| {
        app.http
            .get(app.url(path))
            .bearer_auth(&user)
            .header("x-backendai-version", "v8.20240915")
            .send()
    };
    let presets: serde_json::Value = get("/resource/presets")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = presets["presets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"small"), "{presets}");
    let groups: serde_json::Value = get("/scaling-groups?group=default")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(groups, json!({"scaling_groups": [{"name": "default"}]}));
    let slots: serde_json::Value = get("/config/resource-slots")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(slots["cpu"], "count");
    assert_eq!(slots["mem"], "bytes");
    // How Lablup's consoles name and show each slot type.
    let details: serde_json::Value = get("/config/resource-slots/details?sgroup=default")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(details["mem"]["display_unit"], "GiB", "{details}");
    assert_eq!(details["mem"]["number_format"]["binary"], true, "{details}");
    assert_eq!(
        details["cuda.shares"]["human_readable_name"], "fGPU",
        "{details}"
    );
    // A Backend.AI call bai has no counterpart for: refused by name (reading `/config/get`
    // is answered, read-only; writing is not).
    let etcd = get("/config/set?key=x").await.unwrap();
    assert_eq!(etcd.status(), 400);
    let problem: serde_json::Value = etcd.json().await.unwrap();
    assert!(
        problem.to_string().contains("not supported by this server"),
        "{problem}"
    );
    let check = app
        .http
        .post(app.url("/resource/check-presets"))
        .bearer_auth(&user)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(check.status(), 200);
    let check: serde_json::Value = check.json().await.unwrap();
    assert!(
        check["presets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["allocatable"].is_boolean())
    );
    assert!(check["keypair_remaining"].is_object(), "{check}");
    // Every known slot in every map, as Lablup's consoles read them unguarded: "Infinity"
    // where unlimited (the default policy, the project without limits), "0" where unused.
    let sg = check["scaling_groups"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    for slot in ["cpu", "mem", "cuda.device", "cuda.shares"] {
        assert_eq!(check["keypair_limits"][slot], "Infinity", "{check}");
        assert_eq!(check["group_limits"][slot], "Infinity", "{check}");
        assert_eq!(check["group_remaining"][slot], "Infinity", "{check}");
        assert_eq!(check["keypair_using"][slot], "0", "{check}");
        assert_eq!(check["group_using"][slot], "0", "{check}");
        assert!(
            check["scaling_groups"][&sg]["remaining"][slot].is_string(),
            "{check}"
        );
        assert_eq!(check["scaling_groups"][&sg]["using"][slot], "0", "{check}");
    }
    // An API version Backend.AI never had; an unknown session; anonymous callers.
    let odd = app
        .http
        .get(app.url("/resource/presets"))
        .bearer_auth(&user)
        .header("x-backendai-version", "v99.20990101")
        .send()
        .await
        .unwrap();
    assert_eq!(odd.status(), 400);
    let missing = get("/session/no-such-session").await.unwrap();
    assert_eq!(missing.status(), 404);
    let problem: serde_json::Value = missing.json().await.unwrap();
    assert_eq!(
        problem["type"],
        "https://api.backend.ai/probs/object-not-found"
    );
    let anon = app
        .http
        .get(app.url("/resource/presets"))
        .send()
        .await
        .unwrap();
    assert_eq!(anon.status(), 401);
});

// Both official clients, unchanged, against bai serving HTTPS itself (a CA made by the
// test, given to the client as Python's `SSL_CERT_FILE`): a query-mode run streams over a
// WebSocket through TLS, `ps` lists through GraphQL.
both_dbs!(official_clis_over_https, |db| async move {
    require_docker();
    let tls = TlsFiles::new();
    let app = spawn_with(db, |c| {
        c.tls_cert = Some(tls.cert.clone());
        c.tls_key = Some(tls.key.clone());
    })
    .await;
    // `python` is an alias the first start seeded (the guides' commands use it).
    let user = app.user("tls-cli@x.org", "user", "default").await;
    for (bin, name) in [(cli_path(), "tls-sdk23"), (cli26_path(), "tls-sdk26")] {
        let mut cli = Cli::for_user(&app, &user).await;
        assert!(cli.endpoint.starts_with("https://"), "{}", cli.endpoint);
        cli.bin = bin.clone();
        let out = cli
            .run(&["run", "--name", name, "-c", "print(\"over tls\")", "python"])
            .await;
        assert!(out.ok, "{}: {out}", bin.display());
        assert!(
            out.stdout.contains("over tls\n"),
            "{}: {out}",
            bin.display()
        );
        let out = cli.run(&["ps"]).await;
        assert!(out.ok, "{}: {out}", bin.display());
        assert!(out.stdout.contains(name), "{}: {out}", bin.display());
        // Without the CA, the client refuses the server (verification is real): the
        // certificate check fails, not the connection or the client.
        cli.ca = None;
        let out = cli.run(&["ps"]).await;
        assert!(
            !out.ok && out.stderr.contains("CERTIFICATE_VERIFY_FAILED"),
            "{}: {out}",
            bin.display()
        );
    }
});

/// A script on the official 26.9 SDK listening to a session's events by name, as Backend.AI's
/// scripts do before they create the session: one JSON line per event, `OPEN` once listening.
const LISTEN_BY_NAME: &str = r#"
import asyncio, json, sys
from ai.backend.client.session import AsyncSession

async def main():
    async with AsyncSession() as api:
        session = api.ComputeSession(sys.argv[1])
        async with session.listen_events() as response:
            print("OPEN", flush=True)
            async for ev in response:
                print(json.dumps({"event": ev.event, "data": json.loads(ev.data)}), flush=True)
                if ev.event == "session_terminated":
                    return

asyncio.run(main())
"#;

both_dbs!(events_by_name_before_the_session_exists, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("listen@x.org", "user", "default").await;
    let stranger = app.user("peek@x.org", "user", "default").await;
    let cli = Cli::for_user26(&app, &user).await;
    let script = cli.dir.join("listen.py");
    std::fs::write(&script, LISTEN_BY_NAME).unwrap();
    let mut listener = cli
        .python(&[script.to_str().unwrap(), "by-name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(listener.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(WAIT, lines.next_line()).await;
    assert!(
        matches!(&first, Ok(Ok(Some(l))) if l == "OPEN"),
        "the SDK listens before the session exists: {first:?}"
    );
    // A stranger following the same name sees nothing of this user's session, and may not
    // name this user's keypair.
    let peek = app
        .http
        .get(app.url("/events/session?sessionName=by-name"))
        .bearer_auth(&stranger)
        .send()
        .await
        .unwrap();
    assert_eq!(peek.status(), 200);
    let ak = app.access_key(&user).await;
    let foreign = app
        .http
        .get(app.url(&format!(
            "/events/session?sessionName=by-name&ownerAccessKey={ak}"
        )))
        .bearer_auth(&stranger)
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    let bad_scope = app
        .http
        .get(app.url("/events/session?sessionName=by-name&scope=agents"))
        .bearer_auth(&user)
        .send()
        .await
        .unwrap();
    assert_eq!(bad_scope.status(), 400);
    // The same by name over GraphQL: the owner hears its session, the stranger nothing.
    let by_name = || gql::session_status_changes::Variables {
        session_id: None,
        session_name: Some("by-name".into()),
    };
    let mut owner_ws = subscribe_op::<gql::SessionStatusChanges>(&app, &user, by_name()).await;
    let mut stranger_ws =
        subscribe_op::<gql::SessionStatusChanges>(&app, &stranger, by_name()).await;

    let created = create_session(
        &app,
        &user,
        json!({"image": PYTHON, "name": "by-name", "type": "batch", "startup_command": "exit 3"}),
    )
    .await;
    let id = session_ids(&created)[0].clone();
    let mut events: Vec<Value> = Vec::new();
    let read = tokio::time::timeout(WAIT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            events.push(serde_json::from_str(&line).unwrap());
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the listener ends with session_terminated: {events:?}"
    );
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    let at = |name: &str| {
        names
            .iter()
            .position(|n| *n == name)
            .unwrap_or_else(|| panic!("no {name} in {names:?}"))
    };
    assert!(
        at("session_enqueued") < at("session_scheduled"),
        "{names:?}"
    );
    assert!(
        at("session_scheduled") < at("kernel_preparing"),
        "{names:?}"
    );
    assert!(at("kernel_started") < at("session_started"), "{names:?}");
    assert!(at("session_started") < at("session_failure"), "{names:?}");
    assert!(at("session_failure") < at("kernel_terminated"), "{names:?}");
    assert!(
        at("kernel_terminated") < at("session_terminated"),
        "{names:?}"
    );
    let failure = &events[at("session_failure")]["data"];
    assert_eq!(failure["exitCode"], 3, "{failure}");
    assert_eq!(failure["sessionId"], id.as_str(), "{failure}");
    assert_eq!(failure["ownerAccessKey"], ak.as_str(), "{failure}");
    let started = &events[at("kernel_started")]["data"];
    assert_eq!(started["clusterRole"], "main", "{started}");
    assert_eq!(started["clusterIdx"], 1, "{started}");
    assert!(started["kernelId"].as_str().is_some(), "{started}");
    let status = tokio::time::timeout(WAIT, listener.wait()).await;
    assert!(matches!(status, Ok(Ok(s)) if s.success()), "{status:?}");

    let mut body = peek.bytes_stream();
    let mut seen = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while let Some(Ok(chunk)) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await;
    assert!(!seen.contains("event:"), "a stranger saw: {seen}");
    // A domain admin may name another keypair, but never hears a superadmin's session.
    let peer = app.user("peer@x.org", "admin", "default").await;
    let super_ak = app.access_key(&app.admin_token).await;
    let upward = app
        .http
        .get(app.url(&format!(
            "/events/session?sessionName=boss-run&ownerAccessKey={super_ak}"
        )))
        .bearer_auth(&peer)
        .send()
        .await
        .unwrap();
    assert_eq!(upward.status(), 200);
    let boss = create_session(
        &app,
        &app.admin_token,
        json!({"image": PYTHON, "name": "boss-run", "type": "batch", "startup_command": "exit 0"}),
    )
    .await;
    let boss = session_ids(&boss)[0].clone();
    wait_status(&app, &app.admin_token, &boss, &["TERMINATED"]).await;
    let mut body = upward.bytes_stream();
    let mut seen = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while let Some(Ok(chunk)) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await;
    assert!(
        !seen.contains("event:"),
        "a domain admin saw the superadmin's: {seen}"
    );
    let heard = next_json(&mut owner_ws).await;
    assert_eq!(
        heard["payload"]["data"]["session_status_changes"]["name"], "by-name",
        "{heard}"
    );
    let mut stranger_heard = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while let Some(Ok(m)) = stranger_ws.next().await {
            stranger_heard.push(m.to_string());
        }
    })
    .await;
    assert!(
        !stranger_heard.iter().any(|m| m.contains("by-name")),
        "a stranger heard: {stranger_heard:?}"
    );
});

/// Batch sessions created through the official 26.9 SDK as a script would (`enqueue_only=False`):
/// the answer comes once the job runs, as Backend.AI's; a job past its `batch_timeout`
/// is ended; what bai does not run yet is refused, never run as something else; a timeout that
/// overflows and memory with no room for shared memory are refused with the reason.
const BATCHES: &str = r#"
import asyncio, json, sys
from ai.backend.client.session import AsyncSession

async def main():
    image = sys.argv[1]
    out = {}
    async with AsyncSession() as api:
        for name, command, timeout in [
            ("batch-ok", "echo done", None),
            ("batch-fails", "exit 4", None),
            ("batch-long", "sleep 600", 3),
        ]:
            s = await api.ComputeSession.get_or_create(
                image, name=name, type_="batch", startup_command=command,
                batch_timeout=timeout, enqueue_only=False, max_wait=120,
            )
            out[name] = {"id": str(s.id), "status": s.status}
        refusals = {
            "cluster": dict(name="three", cluster_size=3),
            "timeout": dict(name="never", type_="batch", startup_command="true",
                            batch_timeout="99999999999999999d"),
            "memory": dict(name="tight", resources={"cpu": "1", "mem": "256m"}),
        }
        for what, kwargs in refusals.items():
            try:
                await api.ComputeSession.get_or_create(image, **kwargs)
                out[what] = "accepted"
            except Exception as e:
                out[what] = str(e)
    print(json.dumps(out))

asyncio.run(main())
"#;

both_dbs!(batch_sessions_through_the_sdk, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("batches@x.org", "user", "default").await;
    let cli = Cli::for_user26(&app, &user).await;
    let got = cli.sdk_script("batches.py", BATCHES, &[PYTHON]).await;
    // Answered once running, as Backend.AI's manager answers, with a job that ends at once
    // answering its end (its status read after it ran: Lablup's tester expects it).
    for name in ["batch-ok", "batch-fails"] {
        let status = got[name]["status"].as_str().unwrap();
        assert!(["TERMINATING", "TERMINATED"].contains(&status), "{got}");
    }
    assert_eq!(got["batch-long"]["status"], "RUNNING", "{got}");
    let state = |name: &str| {
        let id = got[name]["id"].as_str().unwrap().to_string();
        let (app, user) = (&app, &user);
        async move { wait_status(app, user, &id, &["TERMINATED"]).await }
    };
    let ok = state("batch-ok").await;
    assert_eq!(ok["result"], "success", "{ok}");
    let fails = state("batch-fails").await;
    assert_eq!(fails["result"], "failure", "{fails}");
    assert_eq!(fails["containers"][0]["exit_code"], 4, "{fails}");
    let long = state("batch-long").await;
    // Past its batch_timeout: failed, for Backend.AI's reason (`task-timeout`).
    assert_eq!(long["status_info"], "task-timeout", "{long}");
    assert_eq!(long["result"], "failure", "{long}");
    let cluster = got["cluster"].as_str().unwrap();
    assert!(cluster.contains("at most 1 container"), "{cluster}");
    // The official CLI's batch create reads the answer as a session that started.
    let out = cli
        .run(&[
            "session",
            "create",
            "--type",
            "batch",
            "-c",
            "sleep 5",
            "-t",
            "cli-batch",
            PYTHON,
        ])
        .await;
    assert!(out.ok, "{out}");
    assert!(out.stderr.contains("is created and ready"), "{out}");
    assert!(!out.to_string().contains("already terminated"), "{out}");
    let timeout = got["timeout"].as_str().unwrap();
    assert!(timeout.contains("batch_timeout"), "{timeout}");
    let memory = got["memory"].as_str().unwrap();
    assert!(memory.contains("64m of shared memory"), "{memory}");
});

/// Dependencies, bootstrap scripts and the REST calls Backend.AI's clients make, through the
/// official 26.9 SDK as a script uses it; a stranger's keypair tries the same calls on the
/// owner's session and names it as a dependency.
const SESSION_CALLS: &str = r#"
import asyncio, json, os, sys, tempfile
from pathlib import Path
from ai.backend.client.config import APIConfig
from ai.backend.client.session import AsyncSession

async def main():
    image, stranger_ak, stranger_sk = sys.argv[1:4]
    out = {}
    async with AsyncSession() as api:
        create = api.ComputeSession.get_or_create
        batch = dict(type_="batch", enqueue_only=True)
        a = await create(image, name="dep-fails", startup_command="exit 1", **batch)
        b = await create(image, name="dep-waits", startup_command="echo never",
                         dependencies=[a.id], **batch)
        ok = await create(image, name="dep-first", startup_command="sleep 2; echo first", **batch)
        c = await create(image, name="dep-then", startup_command="echo then",
                         dependencies=["dep-first"], **batch)
        out["ids"] = {k: str(v.id) for k, v in
                      {"a": a, "b": b, "ok": ok, "c": c}.items()}
        s = await create(image, name="booted", enqueue_only=False, max_wait=120,
                         bootstrap_script="echo BOOTSTRAPPED-$((6*7)) > /home/work/boot.txt; echo BOOT-LOG")
        out["booted"] = str(s.id)
        out["status"] = s.status
        r = await s.execute(code="import sys; print(6*7); print('oops', file=sys.stderr)", mode="query")
        console, runs = list(r["console"]), 1
        while r["status"] != "finished":
            r = await s.execute(run_id=r["runId"], code="", mode="continue")
            console += r["console"]
            runs += 1
        out["execute"] = {"console": console, "exitCode": r["exitCode"]}
        src = Path(tempfile.mkdtemp()) / "hello.txt"
        src.write_text("hello from the client")
        await s.upload([src], basedir=src.parent)
        listing = await s.list_files(".")
        out["files"] = sorted(f["filename"] for f in json.loads(listing["files"]))
        dest = Path(tempfile.mkdtemp())
        got = await s.download(["hello.txt", "boot.txt"], dest=dest)
        out["downloaded"] = {n: (dest / n).read_text() for n in got["file_names"]}
        # What the session's own code plants: a FIFO and a link to the container's root.
        r = await s.execute(code="import os; os.mkfifo('/home/work/pipe'); os.symlink('/', '/home/work/escape')", mode="query")
        while r["status"] != "finished":
            r = await s.execute(run_id=r["runId"], code="", mode="continue")
        planted = json.loads((await s.list_files("."))["files"])
        out["planted"] = {f["filename"]: f["mode"] for f in planted if f["filename"] in ("pipe", "escape")}
        dest = Path(tempfile.mkdtemp())
        got = await s.download(["escape/etc/hostname"], dest=dest)
        out["through_link"] = (dest / "hostname").read_text()
        try:
            await s.download(["pipe"], dest=tempfile.mkdtemp())
            out["pipe"] = "downloaded"
        except Exception as e:
            out["pipe"] = str(e)
        out["history"] = await s.get_status_history()
        out["graph"] = await api.ComputeSession(out["ids"]["c"]).get_dependency_graph()
        out["logs"] = (await s.get_logs())["result"]["logs"]
        stranger = APIConfig(endpoint=os.environ["BACKEND_ENDPOINT"], endpoint_type="api",
                             access_key=stranger_ak, secret_key=stranger_sk)
        attacks = {}
        async with AsyncSession(config=stranger) as other:
            victim = other.ComputeSession(str(s.id))
            calls = {
                "execute": lambda: victim.execute(code="print(1)", mode="query"),
                "files": lambda: victim.list_files("."),
                "download": lambda: victim.download(["boot.txt"], dest=tempfile.mkdtemp()),
                "history": lambda: victim.get_status_history(),
                "rename": lambda: victim.rename("stolen"),
                "destroy": lambda: victim.destroy(),
                "depend": lambda: other.ComputeSession.get_or_create(
                    image, name="thief", type_="batch", startup_command="true",
                    dependencies=[s.id], enqueue_only=True),
            }
            for what, call in calls.items():
                try:
                    await call()
                    attacks[what] = "accepted"
                except Exception as e:
                    attacks[what] = str(e)
        out["attacks"] = attacks
        await s.rename("booted-renamed")
        out["destroyed"] = await api.ComputeSession("booted-renamed").destroy()
        root = await create(image, name="r-root", startup_command="sleep 60", **batch)
        child = await create(image, name="r-child", startup_command="true",
                             dependencies=[root.id], **batch)
        out["recursive"] = await api.ComputeSession(str(root.id)).destroy(recursive=True)
        out["recursive_ids"] = [str(root.id), str(child.id)]
    print(json.dumps(out))

asyncio.run(main())
"#;

both_dbs!(session_calls_through_the_sdk, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("calls@x.org", "user", "default").await;
    let stranger = app.user("stranger-calls@x.org", "user", "default").await;
    let cli = Cli::for_user26(&app, &user).await;
    let other = Cli::for_user(&app, &stranger).await;
    let got = cli
        .sdk_script(
            "calls.py",
            SESSION_CALLS,
            &[PYTHON, &other.access_key, &other.secret_key],
        )
        .await;
    // The bootstrap script ran before the session was RUNNING, its output in the logs.
    assert_eq!(got["status"], "RUNNING", "{got}");
    assert!(got["logs"].as_str().unwrap().contains("BOOT-LOG"), "{got}");
    assert_eq!(got["downloaded"]["boot.txt"], "BOOTSTRAPPED-42\n", "{got}");
    assert_eq!(got["downloaded"]["hello.txt"], "hello from the client");
    let files: Vec<&str> = got["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        files.contains(&"hello.txt") && files.contains(&"boot.txt"),
        "{files:?}"
    );
    // Execute over HTTP: the output, merged per stream, and the exit code.
    let console = got["execute"]["console"].to_string();
    assert!(console.contains(r#"["stdout","42\n"]"#), "{console}");
    assert!(console.contains("oops"), "{console}");
    assert_eq!(got["execute"]["exitCode"], 0);
    let history = &got["history"]["result"];
    assert!(
        history["PENDING"].is_string() && history["RUNNING"].is_string(),
        "{history}"
    );
    assert_eq!(got["destroyed"], json!({"stats": {"status": "terminated"}}));
    // What the session planted is listed as what it is; a link leads within its container
    // only (its own hostname, never the host's); a FIFO is archived, never read (no hang).
    assert!(
        got["planted"]["pipe"].as_str().unwrap().starts_with('p'),
        "{got}"
    );
    assert!(
        got["planted"]["escape"].as_str().unwrap().starts_with('l'),
        "{got}"
    );
    assert_eq!(got["through_link"], "main1\n", "{got}");
    assert!(got["pipe"].is_string(), "{got}");
    // DELETE ?recursive: the dependent goes first, then the session.
    let child = got["recursive_ids"][1].as_str().unwrap().to_string();
    let ended = wait_status(&app, &user, &child, &["CANCELLED", "TERMINATED"]).await;
    assert_eq!(ended["status_info"], "user-requested", "{ended}");
    assert!(got["recursive"]["stats"]["status"].is_string(), "{got}");
    // The dependency graph as the CLI's show-graph reads it.
    let graph = &got["graph"];
    assert_eq!(graph["session_name"], "dep-then", "{graph}");
    assert_eq!(
        graph["depends_on"][0]["session_name"], "dep-first",
        "{graph}"
    );
    assert!(
        graph["status"]
            .as_str()
            .unwrap()
            .starts_with("KernelStatus.")
    );
    // A stranger learns nothing and changes nothing.
    for (what, answer) in got["attacks"].as_object().unwrap() {
        let answer = answer.as_str().unwrap();
        assert!(
            answer.contains("404") || answer.contains("not found") || answer.contains("Not Found"),
            "{what}: {answer}"
        );
    }
    // A → B where A fails: B is cancelled with the reason; first → then runs in order.
    let id = |k: &str| got["ids"][k].as_str().unwrap().to_string();
    let b = wait_status(&app, &user, &id("b"), &["CANCELLED"]).await;
    assert_eq!(b["status_info"], "dependency-failed", "{b}");
    assert!(
        b["status_data"].to_string().contains("dep-fails"),
        "the reason names the dependency: {b}"
    );
    let c = wait_status(&app, &user, &id("c"), &["TERMINATED"]).await;
    assert_eq!(c["result"], "success", "{c}");
    let history = |id: String| {
        let (app, user) = (&app, &user);
        async move {
            let q = "query($id: UUID!) { compute_session(id: $id) { status_history } }";
            let h = app.ok(Some(user), q, json!({"id": id})).await;
            serde_json::from_str::<Value>(h["compute_session"]["status_history"].as_str().unwrap())
                .unwrap()
        }
    };
    let (first, then) = (history(id("ok")).await, history(id("c")).await);
    let ts = |h: &Value, k: &str| {
        chrono::DateTime::parse_from_rfc3339(h[k].as_str().unwrap_or_else(|| panic!("{k}: {h}")))
            .unwrap()
    };
    assert!(
        ts(&then, "SCHEDULED") >= ts(&first, "TERMINATED"),
        "dep-then was placed only after dep-first ended: {first} {then}"
    );
    // The official CLI's info (GraphQL) names the dependency; status-history and ls work.
    let info = cli.run(&["session", "info", &id("c")]).await;
    assert!(info.ok, "{info}");
    assert!(info.stdout.contains("dep-first"), "{info}");
    // The same calls through the 23.9.10 CLI (a GET with a JSON body for `ls`, `download` by
    // POST, the status history read from `result`, rename by query).
    let old = Cli {
        bin: cli_path(),
        ..Cli::for_user(&app, &user).await
    };
    std::fs::write(old.dir.join("up.txt"), "from 23.9").unwrap();
    let created = old
        .run(&["session", "create", "-t", "old-cli", PYTHON])
        .await;
    assert!(created.ok, "{created}");
    for (args, want) in [
        (vec!["session", "upload", "old-cli", "up.txt"], "Uploaded"),
        (vec!["session", "ls", "old-cli"], "up.txt"),
        (
            vec!["session", "download", "old-cli", "up.txt", "--dest", "back"],
            "Downloaded",
        ),
        (vec!["session", "status-history", "old-cli"], "RUNNING"),
        (vec!["session", "rename", "old-cli", "old-cli-2"], "renamed"),
        (vec!["session", "destroy", "old-cli-2"], "Done"),
    ] {
        let o = old.run(&args).await;
        assert!(o.ok && o.to_string().contains(want), "{args:?}: {o}");
    }
    assert_eq!(
        std::fs::read_to_string(old.dir.join("back/up.txt")).unwrap(),
        "from 23.9"
    );
});

/// A session template through the official clients: created from a YAML file with the 26.9
/// CLI, listed, read, used through the SDK with an override and through the 23.9.10 CLI's
/// create-from-template (26.9's passes an argument its own SDK does not take), updated and
/// deleted; a stranger neither reads, uses nor deletes it.
const TEMPLATE_YAML: &str = "
api_version: v1
kind: taskTemplate
metadata:
  name: greeter
spec:
  session_type: batch
  kernel:
    image: IMAGE
    environ:
      GREETING: template
    run:
      startup_command: 'echo \"greeting: $GREETING\"'
  resources:
    cpu: '1'
    mem: 1g
";

const FROM_TEMPLATE: &str = r#"
import asyncio, json, sys
from ai.backend.client.session import AsyncSession

async def main():
    template_id = sys.argv[1]
    async with AsyncSession() as api:
        s = await api.ComputeSession.create_from_template(
            template_id, name="from-sdk", envs={"GREETING": "override"}, enqueue_only=True)
        print(json.dumps({"id": str(s.id)}))

asyncio.run(main())
"#;

both_dbs!(session_templates_through_the_clients, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("templates@x.org", "user", "default").await;
    let stranger = app
        .user("stranger-templates@x.org", "user", "default")
        .await;
    let cli26 = Cli::for_user26(&app, &user).await;
    let cli23 = Cli {
        dir: cli26.dir.clone(),
        ..Cli::for_user(&app, &user).await
    };
    let other = Cli::for_user(&app, &stranger).await;
    std::fs::write(
        cli26.dir.join("greeter.yaml"),
        TEMPLATE_YAML.replace("IMAGE", PYTHON),
    )
    .unwrap();
    let created = cli26
        .run(&["session-template", "create", "-f", "greeter.yaml"])
        .await;
    assert!(created.ok, "{created}");
    let text = created.to_string();
    let id = text
        .split("Task template ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no id in {created}"))
        .to_string();
    let list = cli26.run(&["session-template", "list"]).await;
    assert!(list.ok && list.stdout.contains("greeter"), "{list}");
    let got = cli26.run(&["session-template", "get", &id]).await;
    assert!(got.ok && got.stdout.contains(PYTHON), "{got}");
    // The SDK with an override: the template's command, the caller's environment.
    let sdk = cli26
        .sdk_script("from_template.py", FROM_TEMPLATE, &[&id])
        .await;
    let from_sdk = sdk["id"].as_str().unwrap().to_string();
    let done = wait_status(&app, &user, &from_sdk, &["TERMINATED"]).await;
    assert_eq!(done["result"], "success", "{done}");
    let logs = cli26.run(&["session", "logs", &from_sdk]).await;
    assert!(logs.stdout.contains("greeting: override"), "{logs}");
    // The 23.9.10 CLI's create-from-template, its own name and environment over the template's.
    let from_cli = cli23
        .run(&[
            "session",
            "create-from-template",
            "-t",
            "from-cli",
            "--type",
            "batch",
            "-e",
            "GREETING=cli",
            &id,
        ])
        .await;
    assert!(from_cli.ok, "{from_cli}");
    let listed = app
        .ok(
            Some(&user),
            "{ compute_session_list(limit: 10, offset: 0) { items { id name } } }",
            json!({}),
        )
        .await;
    let cli_session = listed["compute_session_list"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "from-cli")
        .unwrap_or_else(|| panic!("{listed}"))["id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_status(&app, &user, &cli_session, &["TERMINATED"]).await;
    let logs = cli26.run(&["session", "logs", &cli_session]).await;
    assert!(logs.stdout.contains("greeting: cli"), "{logs}");
    // A stranger: not found for reading, using and deleting (the same answer as for no
    // template at all).
    let missing = format!(
        "session template '{}' not found",
        uuid::Uuid::parse_str(&id).unwrap()
    );
    for args in [
        vec!["session-template", "get", id.as_str()],
        vec!["session-template", "delete", "-f", id.as_str()],
    ] {
        let o = other.run(&args).await;
        assert!(o.refused("404 Not Found", &missing), "{args:?}: {o}");
    }
    let stolen = Cli {
        dir: other.dir.clone(),
        ..Cli::for_user(&app, &stranger).await
    }
    .run(&["session", "create-from-template", "-t", "stolen", &id])
    .await;
    assert!(stolen.refused("404 Not Found", &missing), "{stolen}");
    let o = other.run(&["session-template", "list"]).await;
    assert!(o.ok && !o.stdout.contains("greeter"), "{o}");
    // Updated, then deleted; the GraphQL list follows.
    std::fs::write(
        cli26.dir.join("greeter2.yaml"),
        TEMPLATE_YAML
            .replace("IMAGE", PYTHON)
            .replace("name: greeter", "name: greeter-v2"),
    )
    .unwrap();
    let updated = cli26
        .run(&["session-template", "update", &id, "-f", "greeter2.yaml"])
        .await;
    assert!(updated.ok, "{updated}");
    let mine = app
        .ok(
            Some(&user),
            "{ session_templates { id name scope } }",
            json!({}),
        )
        .await;
    assert_eq!(mine["session_templates"][0]["name"], "greeter-v2", "{mine}");
    assert_eq!(mine["session_templates"][0]["scope"], "user", "{mine}");
    let deleted = cli26.run(&["session-template", "delete", "-f", &id]).await;
    assert!(deleted.ok, "{deleted}");
    let list = cli26.run(&["session-template", "list"]).await;
    assert!(list.ok && !list.stdout.contains("greeter"), "{list}");
    let gone = cli26.run(&["session-template", "get", &id]).await;
    assert!(gone.refused("404 Not Found", &missing), "{gone}");
});

/// A single-node cluster through the official 26.9 SDK: three containers (main1, sub1, sub2)
/// on one agent, each with Backend.AI's cluster variables, reaching the others by name and
/// over SSH (`ssh sub1 hostname`), while an ordinary session of another user reaches none of
/// them; beyond the policy's containers per session, and multi-node without other hosts, are
/// refused.
const CLUSTER: &str = r#"
import asyncio, json, sys
from ai.backend.client.session import AsyncSession

async def main():
    image = sys.argv[1]
    out = {}
    async with AsyncSession() as api:
        s = await api.ComputeSession.get_or_create(
            image, name="trio", cluster_size=3, cluster_mode="single-node",
            resources={"cpu": "0.5", "mem": "320m"}, enqueue_only=False, max_wait=180)
        out["status"] = s.status
        out["id"] = str(s.id)
        async def run(code):
            r = await s.execute(code=code, mode="query")
            text = "".join(c[1] for c in r["console"] if c[0] == "stdout")
            while r["status"] != "finished":
                r = await s.execute(run_id=r["runId"], code="", mode="continue")
                text += "".join(c[1] for c in r["console"] if c[0] == "stdout")
            return text
        out["env"] = await run("import os; print(' '.join(f'{k}={v}' for k, v in sorted(os.environ.items()) if k.startswith('BACKENDAI_CLUSTER')))")
        # Their SSH daemons start just after RUNNING: tried for a while.
        out["reach"] = await run(
            "import socket, time\n"
            "for h in ['sub1', 'sub2']:\n"
            "    for i in range(60):\n"
            "        try:\n"
            "            c = socket.create_connection((h, 2200), timeout=5); print(h, 'reached'); c.close(); break\n"
            "        except OSError as e:\n"
            "            err = e; time.sleep(0.5)\n"
            "    else:\n"
            "        print(h, 'unreachable', err)\n")
        ssh = "import subprocess, time\n" \
              "for i in range(30):\n" \
              "    p = subprocess.run(['ssh', '-o', 'BatchMode=yes', 'sub1', 'hostname'], capture_output=True, text=True)\n" \
              "    if p.returncode == 0: break\n" \
              "    time.sleep(1)\n" \
              "print('ssh:', p.stdout.strip(), p.stderr.strip())\n"
        out["ssh"] = await run(ssh)
        refusals = {
            "too-many": dict(name="crowd", cluster_size=5),
            "multi-node": dict(name="spread", cluster_size=2, cluster_mode="multi-node"),
        }
        for what, kwargs in refusals.items():
            try:
                await api.ComputeSession.get_or_create(image, enqueue_only=True, **kwargs)
                out[what] = "accepted"
            except Exception as e:
                out[what] = str(e)
    print(json.dumps(out))

asyncio.run(main())
"#;

both_dbs!(cluster_sessions_through_the_sdk, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("cluster@x.org", "user", "default").await;
    app.use_policy(
        &user,
        "clusters",
        gql::create_policy::CreateKeyPairResourcePolicyInput {
            max_containers_per_session: 4,
            ..TestApp::open_policy()
        },
    )
    .await;
    // Three containers on a two-core test machine: half a core each.
    app.image_min_cpu(PYTHON, "0.5").await;
    let cli = Cli::for_user26(&app, &user).await;
    let got = cli.sdk_script("cluster.py", CLUSTER, &[PYTHON]).await;
    assert_eq!(got["status"], "RUNNING", "{got}");
    let env = got["env"].as_str().unwrap();
    for want in [
        "BACKENDAI_CLUSTER_HOST=main1",
        "BACKENDAI_CLUSTER_HOSTS=main1,sub1,sub2",
        "BACKENDAI_CLUSTER_REPLICAS=main:1,sub:2",
        "BACKENDAI_CLUSTER_ROLE=main",
        "BACKENDAI_CLUSTER_SIZE=3",
        "BACKENDAI_CLUSTER_LOCAL_RANK=0",
    ] {
        assert!(env.contains(want), "{want}: {env}");
    }
    let reach = got["reach"].as_str().unwrap();
    assert!(
        reach.contains("sub1 reached") && reach.contains("sub2 reached"),
        "{reach}"
    );
    let ssh = got["ssh"].as_str().unwrap();
    assert!(ssh.starts_with("ssh: sub1"), "{ssh}");
    for (what, why) in [
        ("too-many", "at most 4 container"),
        // No agent of other hosts with a session subnet here.
        ("multi-node", "resource group 'default' has none"),
    ] {
        let answer = got[what].as_str().unwrap();
        assert!(answer.contains(why), "{what}: {answer}");
    }
    // Three containers, each its own kernel; the session is charged for all of them.
    let id = got["id"].as_str().unwrap().to_string();
    let s = wait_status(&app, &user, &id, &["RUNNING"]).await;
    let containers = s["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 3, "{s}");
    let ids: std::collections::BTreeSet<&str> = containers
        .iter()
        .filter_map(|c| c["container_id"].as_str())
        .collect();
    assert_eq!(ids.len(), 3, "a container of its own each: {s}");
    let occupying = s["occupying_slots"].to_string();
    assert!(
        occupying.contains("1.5"),
        "the session holds all three containers' CPU: {occupying}"
    );
    // Another user's ordinary session reaches none of them.
    let other = app.user("outsider@x.org", "user", "default").await;
    let created = create_session(
        &app,
        &other,
        json!({"image": PYTHON, "name": "outsider", "resources": "{\"cpu\": \"0.5\", \"mem\": \"320m\"}"}),
    )
    .await;
    let outsider = session_ids(&created)[0].clone();
    wait_status(&app, &other, &outsider, &["RUNNING"]).await;
    let probe = app
        .ok(
            Some(&other),
            "mutation($id: UUID!, $code: String) { execute_in_session(session_id: $id, mode: \"query\", code: $code) { run_id } }",
            json!({"id": outsider, "code": "import socket\ntry:\n    socket.create_connection(('sub1', 2200), timeout=3); print('REACHED')\nexcept Exception as e:\n    print('refused', type(e).__name__)\n"}),
        )
        .await;
    let run = probe["execute_in_session"]["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let output = eventually("the outsider's probe", Duration::from_secs(30), || {
        let (app, other, run) = (&app, &other, run.clone());
        async move {
            let r = app
                .ok(
                    Some(other),
                    "query($id: UUID!) { execution(run_id: $id) { status console { data } } }",
                    json!({"id": run}),
                )
                .await;
            (r["execution"]["status"] == "finished").then(|| r["execution"]["console"].to_string())
        }
    })
    .await;
    assert!(
        output.contains("refused") && !output.contains("REACHED"),
        "{output}"
    );
    destroy(&app, &user, &id).await;
    destroy(&app, &other, &outsider).await;
    // The cluster's containers and network are gone with it.
    let left = docker(&[
        "network",
        "ls",
        "--filter",
        &format!("name=bai-cluster-{}", id.replace('-', "")),
        "-q",
    ]);
    assert!(left.trim().is_empty(), "network left: {left}");
    // A batch cluster: the job is the main container's; when it ends, the others go too.
    let created = create_session(
        &app,
        &user,
        json!({"image": PYTHON, "name": "duo-job", "type": "batch", "cluster_size": 2,
               "startup_command": "echo hosts=$BACKENDAI_CLUSTER_HOSTS",
               "resources": "{\"cpu\": \"0.5\", \"mem\": \"320m\"}"}),
    )
    .await;
    let job = session_ids(&created)[0].clone();
    let done = wait_status(&app, &user, &job, &["TERMINATED"]).await;
    assert_eq!(done["result"], "success", "{done}");
    let logs = app
        .ok(
            Some(&user),
            "query($id: UUID!) { session_logs(id: $id) }",
            json!({"id": job}),
        )
        .await;
    assert!(logs.to_string().contains("hosts=main1,sub1"), "{logs}");
    eventually(
        "the job's containers and network to go",
        Duration::from_secs(30),
        || async {
            let c = docker(&[
                "ps",
                "-aq",
                "--filter",
                &format!("label=ai.backend.session-id={job}"),
            ]);
            let n = docker(&[
                "network",
                "ls",
                "-q",
                "--filter",
                &format!("name=bai-cluster-{}", job.replace('-', "")),
            ]);
            (c.is_empty() && n.is_empty()).then_some(())
        },
    )
    .await;
});

const COMMIT: &str = r#"
import asyncio, json, os, sys
from ai.backend.client.config import APIConfig
from ai.backend.client.request import Request
from ai.backend.client.session import AsyncSession

async def run(s, code):
    r = await s.execute(code=code, mode="query")
    console = list(r["console"])
    while r["status"] != "finished":
        r = await s.execute(run_id=r["runId"], code="", mode="continue")
        console += r["console"]
    return console

async def follow(api, task_id):
    events = []
    async with api.BackgroundTask(task_id).listen_events() as resp:
        async for ev in resp:
            events.append([ev.event, json.loads(ev.data)])
    return events

async def commit_status(sid):
    async with Request("GET", f"/session/{sid}/commit").fetch() as resp:
        return await resp.json()

async def main():
    image, folder, stranger_ak, stranger_sk = sys.argv[1:5]
    out = {}
    async with AsyncSession() as api:
        s = await api.ComputeSession.get_or_create(image, name="to-commit", enqueue_only=False,
                                                   max_wait=120, mounts=[folder])
        await run(s, "open('/home/work/marker.txt','w').write('kept-in-home');"
                     "open('/tmp/layer.txt','w').write('kept-in-layer');"
                     "open('/home/work/%s/in-folder.txt','w').write('folder data');"
                     "import os; os.mkfifo('/home/work/pipe'); os.symlink('/', '/home/work/escape')" % folder)
        out["before"] = await commit_status(s.id)
        r = await s.export_to_image("my-env")
        out["imagify"] = r
        out["events"] = await follow(api, r["task_id"])
        out["after"] = await commit_status(s.id)
        c = await s.commit()
        out["commit"] = c
        out["commit_events"] = await follow(api, c["bgtask_id"])
        stranger = APIConfig(endpoint=os.environ["BACKEND_ENDPOINT"], endpoint_type="api",
                             access_key=stranger_ak, secret_key=stranger_sk)
        attacks = {}
        async with AsyncSession(config=stranger) as other:
            victim = other.ComputeSession(str(s.id))
            for name, call in {
                "imagify": lambda: victim.export_to_image("stolen"),
                "commit": victim.commit,
                "events": lambda: follow(other, r["task_id"]),
            }.items():
                try:
                    attacks[name] = "answered: %r" % (await call(),)
                except Exception as e:
                    attacks[name] = str(e)
        out["attacks"] = attacks
        await s.destroy()
    print(json.dumps(out))

asyncio.run(main())
"#;

const FROM_COMMITTED: &str = r#"
import asyncio, json, sys
from ai.backend.client.session import AsyncSession

async def main():
    image = sys.argv[1]
    async with AsyncSession() as api:
        s = await api.ComputeSession.get_or_create(image, name="from-commit", enqueue_only=False,
                                                   max_wait=120)
        r = await s.execute(code="import os\n"
            "for p in ['/home/work/marker.txt', '/tmp/layer.txt']: print(open(p).read())\n"
            "print(sorted(os.listdir('/home/work')))\n"
            "import stat\n"
            "print('pipe-is-fifo', stat.S_ISFIFO(os.lstat('/home/work/pipe').st_mode))\n"
            "print('escape-is-link', os.readlink('/home/work/escape'))", mode="query")
        console = list(r["console"])
        while r["status"] != "finished":
            r = await s.execute(run_id=r["runId"], code="", mode="continue")
            console += r["console"]
        await s.destroy()
    print(json.dumps({"status": s.status, "console": console}))

asyncio.run(main())
"#;

both_dbs!(commit_sessions_to_images, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let user = app.user("commit@x.org", "user", "default").await;
    let stranger = app.user("stranger-commit@x.org", "user", "default").await;
    app.use_policy(
        &user,
        "two-images",
        gql::create_policy::CreateKeyPairResourcePolicyInput {
            max_customized_image_count: Some(2),
            ..TestApp::open_policy()
        },
    )
    .await;
    app.op_ok::<gql::CreateVfolder>(
        Some(&user),
        gql::create_vfolder::Variables {
            props: gql::create_vfolder::CreateVFolderInput {
                name: "data".into(),
                ..Default::default()
            },
        },
    )
    .await;
    let cli = Cli::for_user26(&app, &user).await;
    let other = Cli::for_user26(&app, &stranger).await;
    let got = cli
        .sdk_script(
            "commit.py",
            COMMIT,
            &[PYTHON, "data", &other.access_key, &other.secret_key],
        )
        .await;
    // The task's progress as Backend.AI's events, ending done; the status around it.
    assert_eq!(got["before"]["status"], "ready", "{got}");
    assert_eq!(got["after"]["status"], "ready", "{got}");
    // Progress (bytes of /home/work copied), the end, then the server's close.
    for (events, task) in [
        (&got["events"], &got["imagify"]["task_id"]),
        (&got["commit_events"], &got["commit"]["task_id"]),
    ] {
        let events = events.as_array().unwrap();
        let names: Vec<&str> = events.iter().map(|e| e[0].as_str().unwrap()).collect();
        assert_eq!(names.first(), Some(&"bgtask_updated"), "{got}");
        assert_eq!(
            names[names.len() - 2..],
            ["bgtask_done", "server_close"],
            "{got}"
        );
        assert!(
            events[..events.len() - 1]
                .iter()
                .all(|e| e[1]["task_id"] == *task),
            "{got}"
        );
        assert!(
            events
                .iter()
                .any(|e| e[1]["current_progress"].as_u64() > Some(0)),
            "{got}"
        );
    }
    assert_eq!(
        got["commit"]["bgtask_id"], got["commit"]["task_id"],
        "{got}"
    );
    // A stranger can neither commit the session nor follow the owner's task.
    for (what, answer) in got["attacks"].as_object().unwrap() {
        let answer = answer.as_str().unwrap();
        assert!(
            answer.contains("404") || answer.contains("not found") || answer.contains("Not Found"),
            "{what}: {answer}"
        );
    }
    // Two images of the owner's: one named, one after the session; nobody else sees them.
    let mine = app
        .op_ok::<gql::CustomizedImages>(Some(&user), Default::default())
        .await;
    let mine = mine["customized_images"].as_array().unwrap().clone();
    let names: Vec<&str> = mine
        .iter()
        .map(|i| i["customized_name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{mine:?}");
    assert!(
        names.contains(&"my-env") && names.contains(&"to-commit"),
        "{names:?}"
    );
    let named = mine
        .iter()
        .find(|i| i["customized_name"] == "my-env")
        .unwrap();
    let reference = named["name"].as_str().unwrap().to_string();
    assert!(reference.contains("/user-"), "{reference}");
    // The conversion's last message is the new image's id, as Backend.AI's (its clients
    // untag the image by it).
    let done = got["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e[0] == "bgtask_done")
        .unwrap();
    assert_eq!(done[1]["message"], named["id"], "{got}");
    let theirs = app
        .op_ok::<gql::Images>(Some(&stranger), Default::default())
        .await;
    assert!(!theirs.to_string().contains("customized_"), "{theirs}");
    let seen = app
        .op::<gql::Image>(
            Some(&stranger),
            gql::image::Variables {
                reference: reference.clone(),
            },
        )
        .await;
    assert_eq!(
        seen["errors"][0]["extensions"]["code"], "NOT_FOUND",
        "{seen}"
    );
    let launched = create_session(&app, &stranger, json!({"image": reference})).await;
    assert_eq!(
        launched["errors"][0]["extensions"]["code"], "NOT_FOUND",
        "{launched}"
    );
    // The owner's new session from the image has the old one's home and changes, not the
    // folder's contents (folders are mounts, never part of an image).
    let again = cli
        .sdk_script("from_committed.py", FROM_COMMITTED, &[&reference])
        .await;
    let console = again["console"].to_string();
    assert!(console.contains("kept-in-home"), "{again}");
    assert!(console.contains("kept-in-layer"), "{again}");
    assert!(!console.contains("in-folder.txt"), "{again}");
    // What the session planted in its home (a FIFO, a link to /) was committed as what it is:
    // never read through nor followed (the commit would hang on the FIFO, or copy the root).
    assert!(console.contains("pipe-is-fifo True"), "{again}");
    assert!(console.contains("escape-is-link /"), "{again}");
    // The policy's count: a third image is refused with the reason (the CLI prints it).
    let s = create_session(&app, &user, json!({"image": PYTHON, "name": "third"})).await;
    let third = session_ids(&s)[0].clone();
    wait_status(&app, &user, &third, &["RUNNING"]).await;
    let out = cli
        .run(&["session", "convert-to-image", "third", "another"])
        .await;
    assert!(
        format!("{}{}", out.stdout, out.stderr)
            .contains("the most your resource policy allows (2)"),
        "{out}"
    );
    // The CLI lists them with the names given; a stranger's list has none.
    let listed = cli.run(&["image", "list", "--customized"]).await;
    // Its name as Backend.AI names images: the path without the registry and the tag.
    let path = reference
        .split_once('/')
        .map_or(reference.as_str(), |(_, r)| r);
    let bai_name = path.rsplit_once(':').map_or(path, |(n, _)| n);
    assert!(
        listed.ok && listed.stdout.contains("my-env") && listed.stdout.contains(bai_name),
        "{listed}"
    );
    let theirs = other.run(&["image", "list"]).await;
    assert!(theirs.ok && !theirs.stdout.contains("/user-"), "{theirs}");
    // The owner forgets one through the CLI: it leaves the catalog and the engine.
    let named_id = named["id"].as_str().unwrap().to_string();
    let stolen = other.run(&["image", "forget", &named_id]).await;
    assert!(!stolen.to_string().contains("Image forgotten"), "{stolen}");
    let forgotten = cli.run(&["image", "forget", &named_id]).await;
    assert!(
        forgotten.to_string().contains("Image forgotten"),
        "{forgotten}"
    );
    let left = app
        .op_ok::<gql::CustomizedImages>(Some(&user), Default::default())
        .await;
    assert_eq!(
        left["customized_images"].as_array().unwrap().len(),
        1,
        "{left}"
    );
    let engine = std::process::Command::new("docker")
        .args(["image", "inspect", &reference])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&engine.stderr);
    assert!(
        !engine.status.success() && said.contains("No such image"),
        "the engine still has {reference}: {said}"
    );
    // With a slot free, the 23.9.10 CLI's `session commit` makes an image named after it.
    let old_cli = Cli::for_user(&app, &user).await;
    let committed = old_cli.run(&["session", "commit", "third"]).await;
    assert!(committed.ok, "{committed}");
    let mine = eventually("the third session's image", WAIT, || async {
        let l = app
            .op_ok::<gql::CustomizedImages>(Some(&user), Default::default())
            .await;
        let all = l["customized_images"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        all.iter()
            .any(|i| i["customized_name"] == "third")
            .then_some(all)
    })
    .await;
    destroy(&app, &user, &third).await;
    // Backend.AI's untag_image_from_registry (Lablup's tester after a conversion): a stranger
    // gets NOT_FOUND, a registry's image is not untagged (bai keeps committed images in its
    // engines), the owner's image leaves the catalog and the engine.
    let untag = |token: String, id: String| {
        let app = &app;
        async move {
            app.op::<gql::UntagImageFromRegistry>(
                Some(&token),
                gql::untag_image_from_registry::Variables { image_id: id },
            )
            .await
        }
    };
    let catalog = app
        .ok(
            Some(&app.admin_token),
            "query($r: String!) { image(reference: $r) { id } }",
            json!({"r": PYTHON}),
        )
        .await["image"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let registry = untag(app.admin_token.clone(), catalog).await;
    assert_code(&registry, "BAD_REQUEST");
    assert!(message(&registry).contains("registry"), "{registry}");
    for image in mine {
        let id = image["id"].as_str().unwrap().to_string();
        assert_code(&untag(stranger.clone(), id.clone()).await, "NOT_FOUND");
        let untagged = untag(user.clone(), id).await;
        assert_eq!(
            untagged["data"]["untag_image_from_registry"]["ok"], true,
            "{untagged}"
        );
    }
    let left = app
        .op_ok::<gql::CustomizedImages>(Some(&user), Default::default())
        .await;
    assert_eq!(left["customized_images"], json!([]), "{left}");
});

// Both official clients' admin lists, unchanged, with Backend.AI's `--filter` and `--order`:
// the rows asked for, in the order asked for, under their headers; the other lists answer
// without a traceback.
both_dbs!(
    admin_lists_filter_and_order_on_both_clients,
    |db| async move {
        let app = spawn(db).await;
        app.user("lst-b@x.org", "user", "default").await;
        app.user("lst-a@x.org", "user", "default").await;
        let agent = app
            .admin_op::<gql::sessions::Agents>(Default::default())
            .await["agents"][0]["id"]
            .as_str()
            .unwrap()
            .to_string();
        // Backend.AI 26's `compute_session_nodes` with a UUID in the filter (Lablup's Web UI
        // lists a user's own sessions so), on both databases.
        let made = create_session(
            &app,
            &app.admin_token,
            json!({"image": PYTHON, "name": "nodes-listed", "resources": "{\"cpu\": \"1\", \"mem\": \"512m\"}"}),
        )
        .await;
        session_ids(&made);
        let me = app
            .ok(Some(&app.admin_token), "{ user { uuid } }", json!({}))
            .await;
        let uuid = me["user"]["uuid"].as_str().unwrap().to_string();
        for (who, want) in [
            (uuid.as_str(), 1),
            ("00000000-0000-0000-0000-000000000000", 0),
            ("not-a-uuid", 0),
        ] {
            let got = app
                .ok(
                    Some(&app.admin_token),
                    "query($f: String) { compute_session_nodes(filter: $f, first: 5) { count edges { node { name row_id } } } }",
                    json!({"f": format!("user_id == \"{who}\" & status != \"TERMINATED\"")}),
                )
                .await;
            assert_eq!(got["compute_session_nodes"]["count"], want, "{who}: {got}");
        }
        // A user: the manager's status and the recount are the superadmin's.
        let lst = app.login("lst-a@x.org", USER_PASSWORD).await;
        for (method, path) in [
            (reqwest::Method::GET, "/manager/status"),
            (reqwest::Method::POST, "/resource/recalculate-usage"),
        ] {
            let (st, body) = rest(&app, &lst, method, path, None).await;
            assert_eq!(st, 403, "{path}: {body}");
        }
        let before = |out: &Out, a: &str, b: &str| {
            let (i, j) = (out.stdout.find(a), out.stdout.find(b));
            assert!(i.is_some() && j.is_some() && i < j, "{a} before {b}: {out}");
        };
        for (v, cli) in [
            (23, Cli::for_user(&app, &app.admin_token).await),
            (26, Cli::for_user26(&app, &app.admin_token).await),
        ] {
            let run = |args: &'static [&'static str]| cli.run(args);
            let up = run(&[
                "admin",
                "user",
                "list",
                "--filter",
                "email ilike \"%lst-%\"",
                "--order",
                "email",
            ])
            .await;
            assert!(up.ok && up.stdout.contains("Email"), "{up}");
            before(&up, "lst-a@x.org", "lst-b@x.org");
            assert!(!up.stdout.contains("admin@bai.local"), "{up}");
            let down = run(&[
                "admin",
                "user",
                "list",
                "--filter",
                "email ilike \"%lst-%\"",
                "--order",
                "-email",
            ])
            .await;
            before(&down, "lst-b@x.org", "lst-a@x.org");
            let keys = run(&[
                "admin",
                "keypair",
                "list",
                "--filter",
                "user_id ilike \"%lst-%\"",
                "--order",
                "user_id",
            ])
            .await;
            assert!(keys.ok, "{keys}");
            before(&keys, "lst-a@x.org", "lst-b@x.org");
            assert!(!keys.stdout.contains("admin@bai.local"), "{keys}");
            let alive = run(&[
                "admin",
                "agent",
                "list",
                "--filter",
                "status == \"ALIVE\"",
                "--order",
                "id",
            ])
            .await;
            assert!(alive.ok && alive.stdout.contains(&agent), "{alive}");
            let nowhere = run(&[
                "admin",
                "agent",
                "list",
                "--filter",
                "region == \"nowhere\"",
            ])
            .await;
            // An empty page: the 23.9 client's own `NoItems` (it says so for any empty list).
            let empty = |o: &Out| o.ok || o.stderr.contains("NoItems");
            assert!(
                empty(&nowhere) && !nowhere.stdout.contains(&agent),
                "{nowhere}"
            );
            // A filter on a field that is not offered: the GraphQL error (the client's own
            // "400 Bad request" around it) names the field.
            let bad = run(&["admin", "user", "list", "--filter", "password == \"x\""]).await;
            assert!(
                bad.refused(
                    "400 Bad request",
                    "Invalid filter: unknown field 'password'"
                ),
                "{bad}"
            );
            for args in [
                &[
                    "admin",
                    "session",
                    "list",
                    "--filter",
                    "name ilike \"%x%\"",
                    "--order",
                    "-created_at",
                ][..],
                &["admin", "domain", "list"],
                &["admin", "group", "list"],
                &["admin", "scaling-group", "list"],
                &["admin", "keypair-resource-policy", "list"],
                &["admin", "image", "list"],
                &["admin", "storage", "list"],
                &["admin", "vfolder", "list", "--filter", "name ilike \"%x%\""],
                &["session-template", "list"],
                &["dotfile", "list"],
            ] {
                let out = cli.run(args).await;
                assert!(empty(&out), "{args:?}: {out}");
            }
            if v == 26 {
                // The 26.x client's own image list (23.9 has `admin image list` only).
                let out = cli.run(&["image", "list"]).await;
                assert!(out.ok && out.stdout.contains("python"), "{out}");
            }
            // The manager's status, the storage-host permissions, an agent's details, usage
            // recalculated; what bai has no counterpart for is refused by name, never a traceback.
            let status = cli.run(&["admin", "manager", "status"]).await;
            assert!(status.ok && status.stdout.contains("running"), "{status}");
            let perms = cli.run(&["admin", "permission", "list"]).await;
            assert!(
                perms.ok && perms.stdout.contains("create-vfolder"),
                "{perms}"
            );
            // The licence, as Backend.AI's clients print it: bai is open source.
            let licence = cli.run(&["admin", "license", "show"]).await;
            assert!(
                licence.ok && format!("{licence}").contains("open-source"),
                "{licence}"
            );
            let info = cli.run(&["admin", "agent", "info", &agent]).await;
            assert!(info.ok && info.stdout.contains(&agent), "{info}");
            let recalc = cli.run(&["admin", "resource", "recalculate-usage"]).await;
            assert!(recalc.ok, "{recalc}");
            // Reading Backend.AI's etcd keys is answered from bai's own settings (null for
            // what it has not); writing is refused.
            let auto_pull = cli
                .run(&["admin", "etcd", "get", "config/docker/image/auto_pull"])
                .await;
            assert!(
                auto_pull.ok && format!("{auto_pull}").contains("tag"),
                "{auto_pull}"
            );
            for (args, instead) in [
                (
                    &["admin", "etcd", "set", "config/x", "y"][..],
                    "etcd configuration",
                ),
                (&["admin", "manager", "freeze"], "freezing the manager"),
                (&["server-logs", "list"], "the error-log API"),
            ] {
                let out = cli.run(args).await;
                assert!(
                    out.refused("400 Bad Request", &format!("{instead}: bai "))
                        && out.stderr.contains("is not supported by this server ("),
                    "{args:?}: {out}"
                );
                assert!(!format!("{out}").contains("Traceback"), "{args:?}: {out}");
            }
            if v == 26 {
                // The 26.x client's own image list (23.9 has `admin image list` only).
                let out = cli.run(&["image", "list"]).await;
                assert!(out.ok && out.stdout.contains("python"), "{out}");
            }
            for args in [
                &["admin", "domain", "list"][..],
                &["admin", "scaling-group", "list"],
            ] {
                let out = cli.run(args).await;
                assert!(
                    out.stdout.contains("Name") && out.stdout.contains("default"),
                    "{args:?}: {out}"
                );
            }
            assert!(!format!("{bad}").contains("Traceback"), "{bad}");
        }
    }
);
