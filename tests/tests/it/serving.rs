//! Model serving the Backend.AI way, end to end with real containers: a model folder with a
//! model definition and a model (a linear model numpy fits in milliseconds, served by
//! Python's HTTP server), an endpoint of replicas, traffic through bai's endpoint proxy,
//! tokens, scaling, a replica that falls ill, and the attacks: other users' endpoints and
//! tokens, a token of one endpoint on another, expired and revoked tokens, an oversized body.
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

/// The model: y = 3x + 2, fitted by least squares at start; `/health` fails while
/// `/tmp/sick` exists in the replica and hangs while `/tmp/hang` does; `/stream` sends three
/// server-sent events 0.4 s apart.
const SERVE_PY: &str = r#"import json, os, time
import numpy as np
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

x = np.linspace(0, 10, 50)
A = np.vstack([x, np.ones_like(x)]).T
W, B = np.linalg.lstsq(A, 3 * x + 2, rcond=None)[0]
ME = os.urandom(8).hex()

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        if self.path == "/health":
            while os.path.exists("/tmp/hang"):
                time.sleep(0.2)
            self.answer(500 if os.path.exists("/tmp/sick") else 200, {"model": os.environ.get("BACKEND_MODEL_NAME")})
        elif self.path == "/stream":
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            for i in range(3):
                self.wfile.write(("data: token-%d\n\n" % i).encode())
                self.wfile.flush()
                time.sleep(0.4)
            self.close_connection = True
        elif self.path == "/whoami":
            self.answer(200, {"host": ME, "env": os.environ.get("SERVING_TEST"), "cookie": self.headers.get("cookie"), "authorization": self.headers.get("authorization")})
        else:
            self.answer(404, {"error": "no such path"})
    def body(self):
        if self.headers.get("transfer-encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("content-length", 0)))
        data = b""
        while True:
            size = int(self.rfile.readline().strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()
                return data
            data += self.rfile.read(size)
            self.rfile.readline()
    def do_POST(self):
        xs = json.loads(self.body())["x"]
        self.answer(200, {"y": [round(float(W * v + B), 6) for v in xs]})

ThreadingHTTPServer(("0.0.0.0", 8000), H).serve_forever()
"#;

const DEFINITION: &str = "models:
  - name: linear
    model_path: /models
    service:
      start_command: [python3, serve.py]
      port: 8000
      health_check:
        path: /health
        interval: 1
        max_retries: 2
        max_wait_time: 1
        initial_delay: 60
";

async fn upload(app: &TestApp, token: &str, folder: &str, path: &str, body: &str) {
    let resp = app
        .http
        .post(app.url(&format!("/storage/folders/{folder}/upload?path={path}")))
        .bearer_auth(token)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{:?}", resp.text().await);
}

/// A model folder of `token`'s with the definition and the model.
pub(crate) async fn model_folder(app: &TestApp, token: &str, name: &str) -> String {
    let (st, f) = rest(
        app,
        token,
        Method::POST,
        "/folders",
        Some(json!({"name": name, "usage_mode": "model"})),
    )
    .await;
    assert_eq!(st, 201, "{f}");
    let id = uuid::Uuid::parse_str(f["id"].as_str().unwrap())
        .unwrap()
        .to_string();
    upload(app, token, &id, "model-definition.yaml", DEFINITION).await;
    upload(app, token, &id, "serve.py", SERVE_PY).await;
    id
}

fn service_body(name: &str, model: &str, replicas: i64) -> Value {
    json!({
        "name": name, "replicas": replicas, "image": PYTHON, "group": "default", "domain": "default",
        "runtime_variant": "custom", "open_to_public": false,
        "config": {"model": model, "scaling_group": "default", "model_mount_destination": "/models",
            "environ": {"SERVING_TEST": "yes"}, "resources": {"cpu": "1", "mem": "512m"}},
    })
}

/// The endpoint as GraphQL shows it to `token`.
pub(crate) async fn endpoint(app: &TestApp, token: &str, id: &str) -> Value {
    app.ok(
        Some(token),
        "query($id: UUID!) { endpoint(endpoint_id: $id) { name url replicas status lifecycle_stage open_to_public routings { routing_id session status health_status traffic_ratio } } }",
        json!({"id": id}),
    )
    .await["endpoint"]
        .clone()
}

pub(crate) fn healthy(e: &Value) -> Vec<Value> {
    e["routings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "HEALTHY")
        .cloned()
        .collect()
}

/// Waits until `n` replicas of the endpoint are healthy; the endpoint then.
pub(crate) async fn wait_healthy(app: &TestApp, token: &str, id: &str, n: usize) -> Value {
    eventually(
        &format!("{n} healthy replicas of {id}"),
        2 * WAIT,
        || async {
            let e = endpoint(app, token, id).await;
            (healthy(&e).len() == n && e["url"].is_string()).then_some(e)
        },
    )
    .await
}

async fn token_for(app: &TestApp, token: &str, id: &str, duration: &str) -> String {
    let (st, t) = rest(
        app,
        token,
        Method::POST,
        &format!("/services/{id}/token"),
        Some(json!({"duration": duration})),
    )
    .await;
    assert_eq!(st, 200, "{t}");
    t["token"].as_str().unwrap().to_string()
}

crate::both_dbs!(models_are_served_through_endpoints, |db| async move {
    require_docker();
    let ports = port_block();
    let app = spawn_with(db, |c| {
        c.serving_port_pool = format!("{ports}-{}", ports + 9);
        c.serving_max_body_bytes = 1024 * 1024;
        // Three replicas of 1 core at once on a 2-core machine.
        c.agent_cpu_overcommit = 4;
    })
    .await;
    let alice = app.user("alice-serving@x.org", "user", "default").await;
    let mallory = app.user("mallory-serving@x.org", "user", "default").await;
    let dadmin = app.user("dadmin-serving@x.org", "admin", "default").await;
    let model = model_folder(&app, &alice, "linear-model").await;

    // Refusals before anything runs, each with Backend.AI's code.
    let (st, e) = rest(
        &app,
        &alice,
        Method::POST,
        "/services",
        Some(service_body("too-many", &model, 11)),
    )
    .await;
    assert_eq!(
        (st, e["error_code"].as_str()),
        (400, Some("api_parsing_invalid-parameters")),
        "{e}"
    );
    assert!(
        e["title"]
            .as_str()
            .unwrap()
            .contains("Cannot spawn more than 10 sessions"),
        "{e}"
    );
    let (st, e) = rest(
        &app,
        &mallory,
        Method::POST,
        "/services",
        Some(service_body("stolen", &model, 1)),
    )
    .await;
    assert_eq!(st, 404, "another user's model folder is not found: {e}");
    let (_, plain) = rest(
        &app,
        &alice,
        Method::POST,
        "/folders",
        Some(json!({"name": "plain-data"})),
    )
    .await;
    let (st, e) = rest(
        &app,
        &alice,
        Method::POST,
        "/services",
        Some(service_body("plain", plain["id"].as_str().unwrap(), 1)),
    )
    .await;
    assert_eq!(st, 400, "{e}");
    assert!(
        e["title"].as_str().unwrap().contains("not a model folder"),
        "{e}"
    );
    let mut bad_dest = service_body("bad-dest", &model, 1);
    bad_dest["config"]["model_mount_destination"] = json!("/etc");
    let (st, e) = rest(&app, &alice, Method::POST, "/services", Some(bad_dest)).await;
    assert_eq!(
        st, 400,
        "a model folder never covers a system directory: {e}"
    );
    // A definition a container planted as a link (to a host file) or a FIFO is never read.
    let planted = model_folder(&app, &alice, "planted-model").await;
    let host_root = api::storage::hosts(&app.state().config)["local"].clone();
    let root = host_root.join(
        uuid::Uuid::parse_str(&planted)
            .unwrap()
            .simple()
            .to_string(),
    );
    std::fs::remove_file(root.join("model-definition.yaml")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("model-definition.yaml")).unwrap();
    let mkfifo = std::process::Command::new("mkfifo")
        .arg(root.join("fifo.yaml"))
        .status()
        .unwrap();
    assert!(mkfifo.success());
    for path in [None, Some("fifo.yaml")] {
        let mut body = service_body("planted", &planted, 1);
        if let Some(p) = path {
            body["config"]["model_definition_path"] = json!(p);
        }
        let answer = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            rest(&app, &alice, Method::POST, "/services", Some(body)),
        )
        .await
        .expect("a FIFO is never opened");
        let (st, e) = answer;
        assert_eq!(st, 404, "{path:?}: {e}");
        assert!(
            e["title"].as_str().unwrap().contains("model definition"),
            "{e}"
        );
    }
    let mut missing = service_body("missing-def", &model, 1);
    missing["config"]["model_definition_path"] = json!("../../etc/passwd");
    let (st, e) = rest(&app, &alice, Method::POST, "/services", Some(missing)).await;
    assert_eq!(st, 400, "{e}");

    // Two replicas of a private endpoint: created without a URL, served once healthy.
    let (st, created) = rest(
        &app,
        &alice,
        Method::POST,
        "/services",
        Some(service_body("linear", &model, 2)),
    )
    .await;
    assert_eq!(st, 201, "{created}");
    let id = created["endpoint_id"].as_str().unwrap().to_string();
    assert_eq!(created["service_endpoint"], Value::Null);
    assert_eq!(created["model_id"].as_str(), Some(model.as_str()));
    // No URL before a replica answers there (as Backend.AI's app proxy registers it), even once
    // the leader has given the service its port (the GraphQL `url`, within a pass).
    let given = eventually("the service's port", WAIT, || async {
        let e = endpoint(&app, &alice, &id).await;
        e["url"].is_string().then_some(e)
    })
    .await;
    let (st, info) = rest(&app, &alice, Method::GET, &format!("/services/{id}"), None).await;
    assert_eq!(st, 200, "{info}");
    if healthy(&given).is_empty() && healthy(&endpoint(&app, &alice, &id).await).is_empty() {
        assert_eq!(info["service_endpoint"], Value::Null, "{info}");
    }
    let e = wait_healthy(&app, &alice, &id, 2).await;
    let url = e["url"].as_str().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let (_, info) = rest(&app, &alice, Method::GET, &format!("/services/{id}"), None).await;
    assert_eq!(
        info["service_endpoint"].as_str(),
        Some(url.as_str()),
        "{info}"
    );
    assert_eq!(e["status"], "HEALTHY");
    // Replicas are inference sessions mounting the model folder alone, isolated as any.
    let session = healthy(&e)[0]["session"].as_str().unwrap().to_string();
    let s = wait_status(&app, &alice, &session, &["RUNNING"]).await;
    let container = s["containers"][0]["container_id"]
        .as_str()
        .unwrap()
        .to_string();
    let inspect: Value = serde_json::from_str(&docker(&["inspect", &container])).unwrap();
    assert_eq!(inspect[0]["HostConfig"]["Privileged"], false);
    assert_eq!(inspect[0]["HostConfig"]["CapDrop"], json!(["ALL"]));
    assert_eq!(inspect[0]["Config"]["User"], "work");
    let mounts: Vec<&str> = inspect[0]["Mounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["Destination"].as_str())
        .filter(|d| !d.starts_with("/home/work/.") && *d != "/dev/shm")
        .collect();
    assert!(mounts.contains(&"/models"), "{mounts:?}");
    let node = app
        .ok(
            Some(&alice),
            "query($id: GlobalIDField!) { compute_session_node(id: $id) { type vfolder_mounts } }",
            json!({"id": base64_id("compute_session_node", &session)}),
        )
        .await;
    assert_eq!(node["compute_session_node"]["type"], "inference", "{node}");
    assert_eq!(
        node["compute_session_node"]["vfolder_mounts"],
        json!([model]),
        "{node}"
    );

    // Private: no token, a wrong scheme, garbage → 401; the owner's token → the model's answers.
    let http = reqwest::Client::new();
    let r = http.get(format!("{url}/health")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .get(format!("{url}/health"))
        .header("authorization", "Basic YTpi")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .get(format!("{url}/health"))
        .bearer_auth("x.y.z")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let token = token_for(&app, &alice, &id, "1h").await;
    let r = http
        .post(format!("{url}/predict"))
        .bearer_auth(&token)
        .header("cookie", "bai_session=stolen; theme=dark")
        .json(&json!({"x": [1, 2, 10]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"y": [5.0, 8.0, 32.0]})
    );
    // bai's credentials never reach the model; the service's environment does.
    let who: Value = http
        .get(format!("{url}/whoami"))
        .bearer_auth(&token)
        .header("cookie", "bai_session=stolen; theme=dark")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(who["env"], "yes", "{who}");
    assert_eq!(who["cookie"], "theme=dark", "{who}");
    assert_eq!(who["authorization"], Value::Null, "{who}");
    // Both replicas take traffic.
    let mut hosts = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let w: Value = http
            .get(format!("{url}/whoami"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        hosts.insert(w["host"].as_str().unwrap().to_string());
    }
    assert_eq!(hosts.len(), 2, "{hosts:?}");
    // A streamed answer arrives as it is written, not at its end.
    let started = std::time::Instant::now();
    let mut r = http
        .get(format!("{url}/stream"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let first = r.chunk().await.unwrap().unwrap();
    let first_at = started.elapsed();
    assert!(
        String::from_utf8_lossy(&first).contains("token-0"),
        "{first:?}"
    );
    let mut rest_of = String::new();
    while let Some(c) = r.chunk().await.unwrap() {
        rest_of.push_str(&String::from_utf8_lossy(&c));
    }
    assert!(rest_of.contains("token-2"), "{rest_of}");
    assert!(
        started.elapsed() - first_at >= std::time::Duration::from_millis(600),
        "the first event came with the last"
    );
    // A body over the endpoint's limit: 413, declared or streamed.
    let big = vec![b'x'; 2 * 1024 * 1024];
    let r = http
        .post(format!("{url}/predict"))
        .bearer_auth(&token)
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let stream = futures_util::stream::iter(
        big.chunks(64 * 1024)
            .map(|c| Ok::<_, std::io::Error>(c.to_vec()))
            .collect::<Vec<_>>(),
    );
    let r = http
        .post(format!("{url}/predict"))
        .bearer_auth(&token)
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);

    // Strangers: another user, a domain admin before a superadmin's endpoint — not found.
    for (method, path, body) in [
        (Method::GET, format!("/services/{id}"), None),
        (Method::DELETE, format!("/services/{id}"), None),
        (
            Method::POST,
            format!("/services/{id}/scale"),
            Some(json!({"to": 0})),
        ),
        (
            Method::POST,
            format!("/services/{id}/token"),
            Some(json!({"duration": "1h"})),
        ),
        (Method::GET, format!("/services/{id}/errors"), None),
        (Method::POST, format!("/services/{id}/sync"), None),
    ] {
        let (st, e) = rest(&app, &mallory, method.clone(), &path, body).await;
        assert_eq!(st, 404, "{method} {path}: {e}");
    }
    let (st, _) = rest(&app, &mallory, Method::GET, "/services/not-a-uuid", None).await;
    assert_eq!(st, 400);
    let gql_probe = app
        .gql(
            Some(&mallory),
            "query($id: UUID!) { endpoint(endpoint_id: $id) { name } }",
            json!({"id": id}),
        )
        .await;
    assert_code(&gql_probe, "NOT_FOUND");
    let listed = app
        .ok(
            Some(&mallory),
            "{ endpoint_list(limit: 10, offset: 0) { total_count } }",
            json!({}),
        )
        .await;
    assert_eq!(listed["endpoint_list"]["total_count"], 0);
    let probe = app.gql(Some(&mallory), "query($id: UUID!) { endpoint_token_list(limit: 10, offset: 0, endpoint_id: $id) { total_count } }", json!({"id": id})).await;
    assert_code(&probe, "NOT_FOUND");
    // The domain admin governs alice: it sees her endpoint.
    assert_eq!(endpoint(&app, &dadmin, &id).await["name"], "linear");
    let listed = app.ok(Some(&alice), "{ endpoint_list(limit: 10, offset: 0, filter: \"name == \\\"linear\\\"\") { total_count items { endpoint_id } } }", json!({})).await;
    assert_eq!(
        listed["endpoint_list"]["items"][0]["endpoint_id"],
        id.as_str()
    );

    // The superadmin's endpoint: a domain admin cannot reach it; tokens do not cross.
    let admin_model = model_folder(&app, &app.admin_token, "admin-model").await;
    let (st, other) = rest(
        &app,
        &app.admin_token,
        Method::POST,
        "/services",
        Some(service_body("admins", &admin_model, 1)),
    )
    .await;
    assert_eq!(st, 201, "{other}");
    let other_id = other["endpoint_id"].as_str().unwrap().to_string();
    let (st, _) = rest(
        &app,
        &dadmin,
        Method::GET,
        &format!("/services/{other_id}"),
        None,
    )
    .await;
    assert_eq!(st, 404);
    let (st, _) = rest(
        &app,
        &dadmin,
        Method::DELETE,
        &format!("/services/{other_id}"),
        None,
    )
    .await;
    assert_eq!(st, 404);
    let o = wait_healthy(&app, &app.admin_token, &other_id, 1).await;
    let other_url = o["url"].as_str().unwrap().to_string();
    assert_ne!(other_url, url);
    let other_token = token_for(&app, &app.admin_token, &other_id, "1h").await;
    let r = http
        .get(format!("{other_url}/health"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "alice's token on another endpoint");
    let r = http
        .get(format!("{url}/health"))
        .bearer_auth(&other_token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "another endpoint's token on alice's");
    // Made public, it needs no token.
    app.ok(Some(&app.admin_token), "mutation($id: UUID!) { modify_endpoint(endpoint_id: $id, props: {open_to_public: true}) { ok } }", json!({"id": other_id})).await;
    let r = http
        .get(format!("{other_url}/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // Revoked and expired tokens stop working.
    let tokens = app.ok(Some(&alice), "query($id: UUID!) { endpoint_token_list(limit: 10, offset: 0, endpoint_id: $id) { total_count items { id token valid_until } } }", json!({"id": id})).await;
    let item = tokens["endpoint_token_list"]["items"][0].clone();
    assert_eq!(item["token"].as_str(), Some(token.as_str()), "{tokens}");
    app.ok(Some(&alice), "mutation($e: UUID!, $t: UUID!) { revoke_endpoint_token(endpoint_id: $e, token_id: $t) { ok } }", json!({"e": id, "t": item["id"]})).await;
    let r = http
        .get(format!("{url}/health"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "a revoked token");
    let short = token_for(&app, &alice, &id, "1").await;
    let r = http
        .get(format!("{url}/health"))
        .bearer_auth(&short)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let r = http
        .get(format!("{url}/health"))
        .bearer_auth(&short)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "an expired token");
    let token = token_for(&app, &alice, &id, "1h").await;

    // A replica that hangs leaves the routing; the other serves meanwhile; it is replaced.
    let before: Vec<String> = healthy(&endpoint(&app, &alice, &id).await)
        .iter()
        .map(|r| r["routing_id"].as_str().unwrap().to_string())
        .collect();
    docker(&["exec", &container, "touch", "/tmp/hang"]);
    eventually("the hanging replica out of the routing", WAIT, || async {
        let e = endpoint(&app, &alice, &id).await;
        let sick = e["routings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["session"] == session.as_str() && r["status"] == "HEALTHY");
        (!sick).then_some(())
    })
    .await;
    for _ in 0..10 {
        let r = http
            .post(format!("{url}/predict"))
            .bearer_auth(&token)
            .json(&json!({"x": [0]}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "the healthy replica serves");
    }
    let e = eventually("a replacement replica", 2 * WAIT, || async {
        let e = endpoint(&app, &alice, &id).await;
        let h = healthy(&e);
        (h.len() == 2
            && h.iter()
                .any(|r| !before.contains(&r["routing_id"].as_str().unwrap().to_string())))
        .then_some(e)
    })
    .await;
    assert!(healthy(&e).iter().all(|r| r["session"] != session.as_str()));

    // Scaling: down to 1, within the policy only.
    let (st, s) = rest(
        &app,
        &alice,
        Method::POST,
        &format!("/services/{id}/scale"),
        Some(json!({"to": 11})),
    )
    .await;
    assert_eq!(
        (st, s["error_code"].as_str()),
        (400, Some("api_parsing_invalid-parameters")),
        "{s}"
    );
    let (st, s) = rest(
        &app,
        &alice,
        Method::POST,
        &format!("/services/{id}/scale"),
        Some(json!({"to": 1})),
    )
    .await;
    assert_eq!((st, s["target_count"].as_i64()), (200, Some(1)), "{s}");
    eventually("one replica", WAIT, || async {
        let e = endpoint(&app, &alice, &id).await;
        (e["routings"].as_array().unwrap().len() == 1 && healthy(&e).len() == 1).then_some(())
    })
    .await;

    // The model folder of a live service stays until the service goes.
    let (st, e) = rest(&app, &alice, Method::DELETE, "/folders/linear-model", None).await;
    assert_eq!(
        (st, e["error_code"].as_str()),
        (400, Some("model-service_soft-delete_conflict")),
        "{e}"
    );

    // Deleting: the replicas end, the endpoint is destroyed, its URL no longer answers.
    for (t, e) in [(&alice, &id), (&app.admin_token, &other_id)] {
        let (st, d) = rest(&app, t, Method::DELETE, &format!("/services/{e}"), None).await;
        assert_eq!((st, d["success"].as_bool()), (200, Some(true)), "{d}");
    }
    eventually("the endpoint destroyed", WAIT, || async {
        let e = endpoint(&app, &alice, &id).await;
        (e["lifecycle_stage"] == "DESTROYED").then_some(())
    })
    .await;
    wait_status(&app, &alice, &session, &["TERMINATED"]).await;
    let gone = app
        .ok(
            Some(&alice),
            "{ compute_session_list(limit: 50, offset: 0, status: \"RUNNING\") { total_count } }",
            json!({}),
        )
        .await;
    assert_eq!(gone["compute_session_list"]["total_count"], 0, "{gone}");
    eventually("the URL closed", WAIT, || async {
        http.get(format!("{url}/health"))
            .send()
            .await
            .is_err()
            .then_some(())
    })
    .await;
});

/// Backend.AI's global id of `kind` `id` (the session's UUID without dashes, as its clients
/// send it).
fn base64_id(kind: &str, id: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(format!("{kind}:{id}"))
}

/// The token a CLI printed (a JWT: three dot-separated parts).
fn jwt_in(text: &str) -> String {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c))))
        .find(|w| w.split('.').count() == 3 && w.len() > 40)
        .unwrap_or_else(|| panic!("no token in {text}"))
        .to_string()
}

// Both official CLIs (23.9 and 26.9) serve a model with `backend.ai service …`: create, list,
// info, get-endpoint, generate-token (used on the endpoint), scale, rm.
crate::both_dbs!(both_clis_serve_models, |db| async move {
    use crate::cli::Cli;
    require_docker();
    let ports = port_block();
    let app = spawn_with(db, |c| {
        c.serving_port_pool = format!("{ports}-{}", ports + 9);
        c.agent_cpu_overcommit = 4;
    })
    .await;
    let user = app.user("cli-serving@x.org", "user", "default").await;
    let model = model_folder(&app, &user, "cli-model").await;
    let http = reqwest::Client::new();
    for (cli, name) in [
        (Cli::for_user(&app, &user).await, "cli-svc-23"),
        (Cli::for_user26(&app, &user).await, "cli-svc-26"),
    ] {
        let out = cli
            .run(&[
                "service",
                "create",
                PYTHON,
                "cli-model",
                "1",
                "-t",
                name,
                "-r",
                "cpu=1",
                "-r",
                "mem=512m",
                "-e",
                "SERVING_TEST=cli",
            ])
            .await;
        assert!(out.ok, "{out}");
        let listed = app.ok(Some(&user), "query($f: String) { endpoint_list(limit: 5, offset: 0, filter: $f) { items { endpoint_id model } } }",
            json!({"f": format!("name == \"{name}\"")})).await;
        let id = listed["endpoint_list"]["items"][0]["endpoint_id"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(listed["endpoint_list"]["items"][0]["model"], model.as_str());
        let out = cli.run(&["service", "list"]).await;
        assert!(out.ok && out.stdout.contains(name), "{out}");
        let e = wait_healthy(&app, &user, &id, 1).await;
        let url = e["url"].as_str().unwrap().to_string();
        let out = cli.run(&["service", "info", name]).await;
        assert!(out.ok && out.stdout.contains("HEALTHY"), "{out}");
        let out = cli.run(&["service", "get-endpoint", name]).await;
        assert!(out.ok && out.stdout.contains(&url), "{out}");
        let out = cli.run(&["service", "generate-token", name, "3600"]).await;
        assert!(out.ok, "{out}");
        let token = jwt_in(&format!("{} {}", out.stdout, out.stderr));
        let r = http
            .post(format!("{url}/predict"))
            .bearer_auth(&token)
            .json(&json!({"x": [4]}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.json::<Value>().await.unwrap(), json!({"y": [14.0]}));
        let out = cli.run(&["service", "scale", name, "0"]).await;
        assert!(out.ok, "{out}");
        eventually("no replica", WAIT, || async {
            endpoint(&app, &user, &id).await["routings"]
                .as_array()
                .unwrap()
                .is_empty()
                .then_some(())
        })
        .await;
        let out = cli.run(&["service", "rm", name]).await;
        assert!(out.ok, "{out}");
        let gone = cli
            .run(&["service", "info", &uuid::Uuid::new_v4().to_string()])
            .await;
        assert!(!gone.ok, "{gone}");
    }
});
