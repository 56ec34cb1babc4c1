//! Code inside a session never reaches beyond it (issue 12): each attack runs for real inside
//! a container while the server works, and what lies outside the session is checked after.
use std::time::{Duration, Instant};

use serde_json::json;

use crate::both_dbs;
use crate::gql;
use crate::support::*;

/// Starts `code` (Python) in the session; returns the run id at once.
async fn start_py(app: &TestApp, token: &str, session: &str, code: &str) -> String {
    app.op_ok::<gql::ExecuteInSession>(
        Some(token),
        gql::execute_in_session::Variables {
            session_id: session.into(),
            mode: "query".into(),
            code: Some(code.into()),
            options: None,
        },
    )
    .await["execute_in_session"]["run_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Waits for a run to finish; returns its output.
async fn finish(app: &TestApp, token: &str, run: &str) -> String {
    eventually(&format!("run {run} to finish"), WAIT, || async {
        let e = app
            .op_ok::<gql::Execution>(
                Some(token),
                gql::execution::Variables { run_id: run.into() },
            )
            .await;
        (e["execution"]["status"] == "finished").then(|| {
            e["execution"]["console"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["data"].as_str().unwrap_or("").to_string())
                .collect()
        })
    })
    .await
}

/// A folder of the caller's called `name`; returns its id.
async fn create_folder(app: &TestApp, token: &str, name: &str) -> String {
    app.op_ok::<gql::CreateVfolder>(
        Some(token),
        gql::create_vfolder::Variables {
            props: gql::create_vfolder::CreateVFolderInput {
                name: name.into(),
                ..Default::default()
            },
        },
    )
    .await["create_vfolder"]["vfolder"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn py(app: &TestApp, token: &str, session: &str, code: &str) -> String {
    let run = start_py(app, token, session, code).await;
    finish(app, token, &run).await
}

fn owner_of(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p).unwrap().uid()
}

both_dbs!(
    folder_content_attacks_never_reach_the_host,
    |db| async move {
        require_docker();
        // The race below sends thousands of requests in seconds: no rate limit for it.
        let app = spawn_with(db, |c| c.default_rate_limit = 0).await;
        let t = app.user("mallory@x.org", "user", "default").await;
        let folder = create_folder(&app, &t, "data").await;
        let created = create_session(&app, &t, json!({"image": PYTHON, "mounts": ["data"]})).await;
        let session = session_ids(&created)[0].clone();
        wait_status(&app, &t, &session, &["RUNNING"]).await;
        // The canary: a host directory outside every folder, owned by root.
        let canary = app.dir.join("canary");
        std::fs::create_dir_all(&canary).unwrap();
        std::fs::write(canary.join("secret"), "out").unwrap();
        let canary_text = canary.display().to_string();
        let check_canary = || {
            assert_eq!(
                std::fs::read_to_string(canary.join("secret")).unwrap(),
                "out"
            );
            assert_eq!(owner_of(&canary), 0, "the canary directory was re-owned");
            assert_eq!(
                owner_of(&canary.join("secret")),
                0,
                "the canary was re-owned"
            );
            let names: Vec<String> = std::fs::read_dir(&canary)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                .collect();
            assert_eq!(
                names,
                ["secret"],
                "something was written into or removed from the canary"
            );
        };
        let url = |kind: &str, path: &str| {
            app.url(&format!("/storage/folders/{folder}/{kind}?path={path}"))
        };

        // 0. A page the container writes into the folder is downloaded as a file, never shown
        //    as a page of the server's origin.
        py(
            &app,
            &t,
            &session,
            "open('/home/work/data/evil.html', 'w').write('<script>fetch(\"/graphql\")</script>')",
        )
        .await;
        let page = app
            .http
            .get(url("download", "evil.html"))
            .bearer_auth(&t)
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 200);
        assert_eq!(page.headers()["content-type"], "application/octet-stream");
        assert!(
            page.headers()["content-disposition"]
                .to_str()
                .unwrap()
                .starts_with("attachment")
        );
        assert_eq!(page.headers()["x-content-type-options"], "nosniff");
        assert!(
            page.headers()["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'")
        );

        // 1. A FIFO: refused at once, nothing blocks.
        py(
            &app,
            &t,
            &session,
            "import os; os.mkfifo('/home/work/data/pipe')",
        )
        .await;
        // Opening a FIFO to read would wait for a writer forever: the bound is against that
        // hang (the refusal comes at once), not a claim about speed.
        let (status, text) = tokio::time::timeout(WAIT, async {
            let resp = app
                .http
                .get(url("download", "pipe"))
                .bearer_auth(&t)
                .send()
                .await
                .unwrap();
            (resp.status(), resp.text().await.unwrap())
        })
        .await
        .expect("the FIFO's download does not hang");
        assert_eq!(status, 400);
        assert!(text.contains("regular file"));
        let resp = app
            .http
            .get(url("download", ""))
            .bearer_auth(&t)
            .send()
            .await
            .unwrap();
        assert_eq!(
            resp.status(),
            200,
            "a folder with a FIFO still downloads as an archive"
        );
        let _ = resp.bytes().await.unwrap();

        // 2. A slow upload whose temp file the container replaces with a link to the host.
        let swap_tmp = start_py(&app, &t, &session, &format!(
        "import os, time\nend = time.time() + 6\nwhile time.time() < end:\n    for n in os.listdir('/home/work/data'):\n        if n.startswith('.bai-upload-'):\n            p = '/home/work/data/' + n\n            try:\n                os.unlink(p); os.symlink('{canary_text}/secret', p)\n            except OSError: pass\n    time.sleep(0.01)\n"
    )).await;
        let body = futures_util::stream::unfold(0, |i| async move {
            if i >= 20 {
                return None;
            }
            // Wall time is the point: the upload stays open (3 s) while the container swaps
            // its temp file.
            tokio::time::sleep(Duration::from_millis(150)).await;
            Some((Ok::<_, std::io::Error>(vec![b'x'; 1024]), i + 1))
        });
        let resp = app
            .http
            .post(url("upload", "up.bin"))
            .bearer_auth(&t)
            .body(reqwest::Body::wrap_stream(body))
            .send()
            .await
            .unwrap();
        let _ = resp.text().await;
        finish(&app, &t, &swap_tmp).await;
        check_canary();

        // 3. A directory swapped with a link to the host, as fast as the container can, while
        //    the server lists, reads, archives, creates, uploads, renames and deletes through it.
        py(&app, &t, &session, &format!(
        "import os\nos.makedirs('/home/work/data/d/sub', exist_ok=True)\nopen('/home/work/data/d/secret', 'w').write('in')\nos.symlink('{canary_text}', '/home/work/data/l')\n"
    )).await;
        let swapper = start_py(&app, &t, &session,
        "import ctypes, os, time\nlibc = ctypes.CDLL(None, use_errno=True)\nos.chdir('/home/work/data')\nend = time.time() + 8\nn = 0\nwhile time.time() < end:\n    libc.renameat2(-100, b'd', -100, b'l', 2)\n    n += 1\nprint(n)\n",
    ).await;
        // Wall time is the point: operations go on for as long as the container swaps (8 s).
        let deadline = Instant::now() + Duration::from_secs(7);
        let mut i = 0;
        while Instant::now() < deadline {
            i += 1;
            for path in ["d/secret", "d"] {
                if let Ok(r) = app
                    .http
                    .get(url("download", path))
                    .bearer_auth(&t)
                    .send()
                    .await
                {
                    let bytes = r.bytes().await.unwrap_or_default();
                    assert!(
                        !String::from_utf8_lossy(&bytes).contains("out"),
                        "read the canary through {path}"
                    );
                }
            }
            let listed = app
                .op::<gql::storage::VfolderFileDetails>(
                    Some(&t),
                    gql::storage::vfolder_file_details::Variables {
                        id: folder.clone(),
                        path: Some("d".into()),
                    },
                )
                .await;
            assert!(
                !listed.to_string().contains("\"size\":3"),
                "listed the canary: {listed}"
            );
            let _ = app
                .op::<gql::CreateVfolderDirectory>(
                    Some(&t),
                    gql::create_vfolder_directory::Variables {
                        id: folder.clone(),
                        path: format!("d/sub/m{i}"),
                        parents: None,
                    },
                )
                .await;
            let _ = app
                .http
                .post(url("upload", &format!("d/u{i}")))
                .bearer_auth(&t)
                .body("x")
                .send()
                .await;
            let _ = app
                .op::<gql::RenameVfolderFile>(
                    Some(&t),
                    gql::rename_vfolder_file::Variables {
                        id: folder.clone(),
                        path: format!("d/u{i}"),
                        new_name: format!("r{i}"),
                    },
                )
                .await;
            for path in [format!("d/r{i}"), "d/sub".into()] {
                let _ = app
                    .op::<gql::DeleteVfolderFiles>(
                        Some(&t),
                        gql::delete_vfolder_files::Variables {
                            id: folder.clone(),
                            paths: vec![path],
                            recursive: Some(true),
                        },
                    )
                    .await;
            }
        }
        let swaps: u64 = finish(&app, &t, &swapper).await.trim().parse().unwrap_or(0);
        assert!(swaps > 1000, "the container swapped only {swaps} times");
        assert!(i > 5, "only {i} rounds of operations");
        check_canary();
        destroy(&app, &t, &session).await;
    }
);

both_dbs!(
    a_hostile_app_never_runs_in_the_console_origin,
    |db| async move {
        require_docker();
        let app = spawn(db).await;
        let t = app.user("apps@x.org", "user", "default").await;
        let created = create_session(&app, &t, json!({"image": PYTHON})).await;
        let session = session_ids(&created)[0].clone();
        wait_status(&app, &t, &session, &["RUNNING"]).await;
        let started = app
            .op_ok::<gql::StartService>(
                Some(&t),
                gql::start_service::Variables {
                    session_id: session.clone(),
                    app: "jupyter".into(),
                    open_to_public: false,
                    preferred_port: None,
                },
            )
            .await;
        let token = started["start_service"]["token"]
            .as_str()
            .unwrap()
            .to_string();
        let port = started["start_service"]["port"]
            .as_u64()
            .expect("every app has its own port");
        let pooled = format!("http://127.0.0.1:{port}");
        // Where a followed redirect would land: a listener on the host.
        let trap = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let trap_port = trap.local_addr().unwrap().port();
        // The owner replaces Jupyter with a server of its own on the app's port.
        let server = format!(
            r#"import http.server, socketserver, os, time
for pid in os.listdir('/proc'):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            if b'jupyter' in open('/proc/%s/cmdline' % pid, 'rb').read():
                os.kill(int(pid), 9)
        except Exception:
            pass
time.sleep(1)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if 'redir' in self.path:
            self.send_response(307)
            self.send_header('Location', 'http://127.0.0.1:{trap_port}/stolen')
            self.end_headers()
            return
        self.send_response(200)
        self.send_header('Content-Type', 'text/html')
        self.send_header('Set-Cookie', 'bai_session=evil; Path=/')
        self.send_header('Set-Cookie', '__Host-bai_session=evil; Path=/; Secure')
        self.send_header('Set-Cookie', 'theirs=ok; Path=/')
        self.end_headers()
        self.wfile.write(b'<script>fetch("/graphql")</script>EVIL')
socketserver.TCPServer.allow_reuse_address = True
srv = socketserver.TCPServer(('0.0.0.0', 8080), H)
srv.timeout = 1
end = time.time() + 40
while time.time() < end:
    srv.handle_request()
"#
        );
        let _run = start_py(&app, &t, &session, &server).await;
        let no_follow = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let page = format!("/apps/{session}/jupyter/x.html?token={token}");
        let cookies = eventually(
            "the planted server to answer on the app's own port",
            WAIT,
            || async {
                let r = no_follow.get(format!("{pooled}{page}")).send().await.ok()?;
                let cookies: Vec<String> = r
                    .headers()
                    .get_all("set-cookie")
                    .iter()
                    .map(|v| v.to_str().unwrap().to_string())
                    .collect();
                let body = r.text().await.unwrap_or_default();
                body.contains("EVIL").then_some(cookies)
            },
        )
        .await;
        // On its own origin the app may set its own cookies, never bai's.
        assert!(
            cookies.iter().any(|c| c.starts_with("theirs=")),
            "{cookies:?}"
        );
        assert!(
            !cookies
                .iter()
                .any(|c| c.starts_with("bai_session") || c.starts_with("__Host-bai_session")),
            "the app planted bai's login cookie: {cookies:?}"
        );
        // The console's origin serves none of it, to the owner, a superadmin or a token holder.
        for req in [
            no_follow.get(app.url(&page)).bearer_auth(&t),
            no_follow.get(app.url(&page)).bearer_auth(&app.admin_token),
            no_follow.get(app.url(&page)),
        ] {
            let r = req.send().await.unwrap();
            assert_eq!(r.status(), 307);
            assert!(
                r.headers()["location"]
                    .to_str()
                    .unwrap()
                    .starts_with(&pooled)
            );
            assert!(r.headers().get("set-cookie").is_none());
            assert!(!r.text().await.unwrap().contains("EVIL"));
        }
        // A redirect from the app is handed to the browser (without its absolute target), never
        // followed by the server.
        let r = no_follow
            .get(format!(
                "{pooled}/apps/{session}/jupyter/redir?token={token}"
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 307);
        assert!(r.headers().get("location").is_none(), "{:?}", r.headers());
        // Something that must not happen: the answer has come, so a followed redirect would
        // already be knocking; the short wait only lets a connection in flight arrive.
        let followed = tokio::time::timeout(Duration::from_millis(800), trap.accept()).await;
        assert!(followed.is_err(), "the server followed the app's redirect");
        destroy(&app, &t, &session).await;
    }
);

fn container_of(body: &serde_json::Value) -> String {
    body["containers"][0]["container_id"]
        .as_str()
        .unwrap()
        .to_string()
}

both_dbs!(
    sessions_are_isolated_from_each_other_and_the_host,
    |db| async move {
        require_docker();
        let app = spawn(db).await;
        let a = app.user("alice@x.org", "user", "default").await;
        let b = app.user("bob@x.org", "user", "default").await;
        let sa = session_ids(&create_session(&app, &a, json!({"image": PYTHON})).await)[0].clone();
        let sb = session_ids(&create_session(&app, &b, json!({"image": PYTHON})).await)[0].clone();
        let ca = container_of(&wait_status(&app, &a, &sa, &["RUNNING"]).await);
        let cb = container_of(&wait_status(&app, &b, &sb, &["RUNNING"]).await);
        // What `docker inspect` shows: the isolated network and log rotation.
        let host_config: serde_json::Value =
            serde_json::from_str(&docker(&["inspect", "-f", "{{json .HostConfig}}", &ca])).unwrap();
        assert_eq!(host_config["NetworkMode"], "bai-sessions", "{host_config}");
        assert_eq!(host_config["LogConfig"]["Type"], "json-file");
        assert_eq!(host_config["LogConfig"]["Config"]["max-size"], "10m");
        let icc = docker(&[
            "network",
            "inspect",
            "-f",
            "{{index .Options \"com.docker.network.bridge.enable_icc\"}}",
            "bai-sessions",
        ]);
        assert_eq!(icc, "false");
        let b_ip = docker(&[
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            &cb,
        ]);
        let gateway = docker(&[
            "network",
            "inspect",
            "-f",
            "{{(index .IPAM.Config 0).Gateway}}",
            "bai-sessions",
        ]);
        assert!(!b_ip.is_empty() && !gateway.is_empty(), "{b_ip} {gateway}");
        // Bob serves something; the host reaches it (the control), Alice does not.
        let _server = start_py(&app, &b, &sb, "import http.server\nhttp.server.ThreadingHTTPServer(('0.0.0.0', 8000), http.server.SimpleHTTPRequestHandler).serve_forever()").await;
        eventually("bob's server to listen", WAIT, || async {
            tokio::net::TcpStream::connect((b_ip.as_str(), 8000))
                .await
                .ok()
                .map(|_| ())
        })
        .await;
        // A service of the host listening on the bridge's gateway address.
        let host_service = tokio::net::TcpListener::bind((gateway.as_str(), 0))
            .await
            .unwrap();
        let host_port = host_service.local_addr().unwrap().port();
        let probe = format!(
            "import socket\ndef reach(h, p):\n    s = socket.socket(); s.settimeout(2)\n    try:\n        s.connect((h, p)); return 'open'\n    except Exception as e:\n        return 'blocked'\nprint('bob', reach('{b_ip}', 8000))\nprint('host', reach('{gateway}', {host_port}))\nprint('metadata', reach('169.254.169.254', 80))\nprint('internet-dns', 'ok')\n"
        );
        let out = py(&app, &a, &sa, &probe).await;
        assert!(out.contains("bob blocked"), "{out}");
        assert!(out.contains("host blocked"), "{out}");
        assert!(out.contains("metadata blocked"), "{out}");
        // Something that must not happen: the probe has finished, so a connection that got
        // through would be waiting; the short wait only lets one in flight arrive.
        let accepted =
            tokio::time::timeout(Duration::from_millis(300), host_service.accept()).await;
        assert!(
            accepted.is_err(),
            "the host service was reached from a session"
        );
        // The app proxy still reaches Alice's own ports.
        let started = app
            .op_ok::<gql::StartService>(
                Some(&a),
                gql::start_service::Variables {
                    session_id: sa.clone(),
                    app: "jupyter".into(),
                    open_to_public: false,
                    preferred_port: None,
                },
            )
            .await;
        let port = started["start_service"]["port"].as_u64().unwrap();
        let url = started["start_service"]["url"].as_str().unwrap();
        let page = app
            .http
            .get(format!("http://127.0.0.1:{port}{url}"))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 200);
        destroy(&app, &a, &sa).await;
        destroy(&app, &b, &sb).await;
    }
);

both_dbs!(
    requests_for_devices_and_loader_variables_are_refused,
    |db| async move {
        require_docker();
        let app = spawn(db).await;
        let t = app.user("gpu@x.org", "user", "default").await;
        let fraction = create_session(
            &app,
            &t,
            json!({"image": PYTHON, "resources": "{\"cuda.device\": \"0.001\"}"}),
        )
        .await;
        assert_code(&fraction, "BAD_REQUEST");
        assert!(message(&fraction).contains("whole number"), "{fraction}");
        for (k, v) in [
            ("NVIDIA_VISIBLE_DEVICES", "all"),
            ("NVIDIA_DRIVER_CAPABILITIES", "all"),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
            // The MPS limits of a fractional GPU are the server's to set.
            ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100"),
            ("cuda_mps_pinned_device_mem_limit", "0=1000G"),
            ("LD_PRELOAD", "/home/work/evil.so"),
        ] {
            let env = json!({k: v}).to_string();
            let body = create_session(&app, &t, json!({"image": PYTHON, "environ": env})).await;
            assert_code(&body, "BAD_REQUEST");
            assert!(message(&body).contains(k), "{body}");
        }
        // A session that prints 3 MB: its log is read and kept with a bound (the newest part).
        let noisy = create_session(
        &app,
        &t,
        json!({"image": PYTHON, "type": "batch", "startup_command": "python3 -c \"import sys\nfor i in range(3000): sys.stdout.write('y' * 1000 + '\\n')\""}),
    )
    .await;
        let id = session_ids(&noisy)[0].clone();
        wait_status(&app, &t, &id, &["TERMINATED"]).await;
        let logs = app
            .op_ok::<gql::SessionLogs>(Some(&t), gql::session_logs::Variables { id: id.clone() })
            .await["session_logs"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(logs.len() <= 1024 * 1024 + 200, "{} bytes kept", logs.len());
        assert!(
            logs.contains("earlier output dropped"),
            "{}",
            &logs[..200.min(logs.len())]
        );
    }
);

both_dbs!(
    uploads_are_bounded_by_the_folder_size_limit,
    |db| async move {
        let app = spawn(db).await;
        let t = app.user("full@x.org", "user", "default").await;
        app.use_policy(
            &t,
            "tiny",
            gql::create_policy::CreateKeyPairResourcePolicyInput {
                default_for_unspecified: "UNLIMITED".into(),
                total_resource_slots: json!("{}"),
                max_concurrent_sessions: 5,
                max_containers_per_session: 1,
                idle_timeout: 0,
                allowed_vfolder_hosts: Some(json!("[\"local\"]")),
                max_vfolder_count: Some(10),
                max_vfolder_size: Some(3000),
                ..Default::default()
            },
        )
        .await;
        let folder = create_folder(&app, &t, "small").await;
        let up = |path: &str, n: usize| {
            app.http
                .post(app.url(&format!("/storage/folders/{folder}/upload?path={path}")))
                .bearer_auth(&t)
                .body(vec![b'z'; n])
                .send()
        };
        assert_eq!(up("a.bin", 2000).await.unwrap().status(), 200);
        let over = up("b.bin", 2000).await.unwrap();
        assert_eq!(over.status(), 400);
        assert!(over.text().await.unwrap().contains("size limit"));
        let listed = app
            .op_ok::<gql::storage::VfolderFileNames>(
                Some(&t),
                gql::storage::vfolder_file_names::Variables {
                    id: folder.clone(),
                    path: None,
                },
            )
            .await;
        assert_eq!(
            listed["vfolder_files"],
            json!([{"name": "a.bin"}]),
            "nothing of the refused upload stays"
        );
    }
);
