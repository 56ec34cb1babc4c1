//! Operable like a service (issue 23): routing that tells the truth, health, request ids.
use graphql_client::GraphQLQuery;
use serde_json::{Value, json};

use crate::support::*;
use crate::{both_dbs, gql};

async fn problem(resp: reqwest::Response) -> (u16, Value, reqwest::header::HeaderMap) {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    assert_eq!(
        headers[reqwest::header::CONTENT_TYPE],
        "application/problem+json",
        "{status} {headers:?}"
    );
    (status, resp.json().await.unwrap(), headers)
}

both_dbs!(routing_tells_the_truth, |db| async move {
    let app = spawn(db).await;
    std::fs::create_dir_all(&app.config.web_dir).unwrap();
    std::fs::write(
        app.config.web_dir.join("index.html"),
        "<html>console</html>",
    )
    .unwrap();
    // Unknown API paths: 404 problems, never the console's page (the official client and
    // Lablup's web UI call these).
    for path in [
        "/folders/_/nope",
        "/folders/invitations/nope",
        "/totp",
        "/graphql/nope",
        "/apps",
        "/storage/x",
    ] {
        let resp = app
            .http
            .get(app.url(path))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        let (status, body, _) = problem(resp).await;
        assert_eq!(status, 404, "{path}");
        assert_eq!(
            body["type"], "https://api.backend.ai/probs/object-not-found",
            "{body}"
        );
    }
    // Even a browser gets the problem for an API path.
    let resp = app
        .http
        .get(app.url("/totp"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    // A wrong method: 405 with Allow, as a problem.
    for (method, path, allow) in [
        (reqwest::Method::POST, "/", "GET"),
        (reqwest::Method::DELETE, "/graphql", "POST"),
        (reqwest::Method::POST, "/some/page", "GET"),
    ] {
        let resp = app
            .http
            .request(method.clone(), app.url(path))
            .send()
            .await
            .unwrap();
        let (status, body, headers) = problem(resp).await;
        assert_eq!(status, 405, "{method} {path}");
        assert!(
            headers[reqwest::header::ALLOW]
                .to_str()
                .unwrap()
                .contains(allow),
            "{headers:?}"
        );
        assert_eq!(
            body["type"],
            "https://api.backend.ai/probs/method-not-allowed"
        );
    }
    // The console's page for browsers on other paths, a problem for everything else.
    let page = app
        .http
        .get(app.url("/some/page"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("console"));
    let resp = app
        .http
        .get(app.url("/some/page"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(problem(resp).await.0, 404);
    // Static files of the console are served as they are.
    let index = app.http.get(app.url("/index.html")).send().await.unwrap();
    assert_eq!(index.status(), 200);
});

both_dbs!(health_and_request_ids, |db| async move {
    let app = spawn(db).await;
    let live: Value = app
        .http
        .get(app.url("/health/live"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(live, json!({"status": "ok"}));
    let resp = app
        .http
        .get(app.url("/health/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let ready: Value = resp.json().await.unwrap();
    assert_eq!(ready["status"], "ready", "{ready}");
    assert_eq!(ready["database"]["reachable"], true);
    assert_eq!(ready["database"]["pending_migrations"], 0);
    assert!(ready["engines"]["configured"].as_u64().unwrap() >= 1);

    // An id from the client comes back on the response, in problems and in GraphQL errors.
    let resp = app
        .http
        .get(app.url("/totp"))
        .header("x-request-id", "trace-42")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-request-id"], "trace-42");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["request_id"], "trace-42");
    let resp = app
        .http
        .post(app.url("/graphql"))
        .header("x-request-id", "trace-43")
        .json(&gql::ops::WhoAmI::build_query(Default::default()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-request-id"], "trace-43");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["errors"][0]["extensions"]["request_id"], "trace-43",
        "{body}"
    );
    // Without one (or with one that is not plain), the server makes one.
    for sent in [None, Some("<script>")] {
        let mut req = app.http.get(app.url("/"));
        if let Some(s) = sent {
            req = req.header("x-request-id", s);
        }
        let resp = req.send().await.unwrap();
        let id = resp.headers()["x-request-id"].to_str().unwrap().to_string();
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
    }
});

both_dbs!(backup_while_running_and_restore, |db| async move {
    let app = spawn(db).await;
    let dest = app.dir.join("backup.db");
    if let Db::Postgres = db {
        let err = api::db::backup(&app.config, &dest).await.unwrap_err();
        assert!(format!("{err:#}").contains("pg_dump"), "{err:#}");
        return;
    }
    let t = app.user("keep@x.org", "user", "default").await;
    let me = app
        .op_ok::<gql::ops::MyIds>(Some(&t), Default::default())
        .await;
    let ak = me["keypair"]["access_key"].as_str().unwrap().to_string();
    let user: uuid::Uuid = me["user"]["uuid"].as_str().unwrap().parse().unwrap();
    let group: uuid::Uuid = me["groups"][0]["id"].as_str().unwrap().parse().unwrap();
    app.op_ok::<gql::CreateVfolder>(
        Some(&t),
        gql::create_vfolder::Variables {
            props: gql::create_vfolder::CreateVFolderInput {
                name: "kept".into(),
                ..Default::default()
            },
        },
    )
    .await;
    for _ in 0..5 {
        insert_session(&app, &ak, user, group).await;
    }
    // Sessions keep being created while the backup runs.
    let writer = {
        let db = app.state().db.clone();
        let ak = ak.clone();
        tokio::spawn(async move {
            use sea_orm::{ConnectionTrait, Statement};
            for i in 0..200 {
                let _ = db
                    .execute(Statement::from_string(
                        db.get_database_backend(),
                        format!("UPDATE keypairs SET num_queries = {i} WHERE access_key = '{ak}'"),
                    ))
                    .await;
            }
        })
    };
    api::db::backup(&app.config, &dest)
        .await
        .expect("backup while running");
    writer.await.unwrap();
    let err = api::db::backup(&app.config, &dest).await.unwrap_err();
    assert!(
        format!("{err:#}").contains("exists already; give a new file"),
        "never overwrites a file: {err:#}"
    );
    // Restoring into the running server's directory is refused.
    let err = api::db::restore(&app.config, &dest, true)
        .await
        .unwrap_err();
    assert!(format!("{err:#}").contains("another bai server"), "{err:#}");
    // Into a fresh data directory: the server starts with the same users, keypairs, folders
    // and session history.
    let fresh = app.dir.join("restored");
    let mut config = app.config.clone();
    config.data_dir = fresh.join("data");
    api::db::restore(&config, &dest, false)
        .await
        .expect("restore");
    let err = api::db::restore(&config, &dest, false).await.unwrap_err();
    assert!(
        format!("{err:#}").contains("pass --force to replace it"),
        "an existing database needs --force: {err:#}"
    );
    let server = api::start(config).await.expect("restored server starts");
    let base = format!("http://{}", server.addr);
    let login: Value = app
        .http
        .post(format!("{base}/graphql"))
        .json(&gql::Login::build_query(gql::login::Variables {
            email: "keep@x.org".into(),
            password: USER_PASSWORD.into(),
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = login["data"]["login"]["token"]
        .as_str()
        .expect("the user logs in")
        .to_string();
    let seen: Value = app
        .http
        .post(format!("{base}/graphql"))
        .bearer_auth(&token)
        .json(&gql::ops::RestoredView::build_query(Default::default()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(seen["data"]["keypair"]["access_key"], ak.as_str(), "{seen}");
    assert_eq!(
        seen["data"]["vfolder_list"]["items"][0]["name"], "kept",
        "{seen}"
    );
    assert_eq!(
        seen["data"]["compute_session_list"]["total_count"], 5,
        "{seen}"
    );
    server.stop().await.unwrap();
});

both_dbs!(prometheus_scrapes_bai, |db| async move {
    require_docker();
    let app = spawn_with(db, |c| {
        c.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
        c.metrics_token = Some("scrape-token".into());
    })
    .await;
    let metrics_addr = app
        .server
        .as_ref()
        .unwrap()
        .metrics_addr
        .expect("metrics listener");
    // On the main port only with the token.
    let refused = app.http.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let text = app
        .http
        .get(app.url("/metrics"))
        .bearer_auth("scrape-token")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for name in [
        "bai_http_requests_total",
        "bai_sessions_pending",
        "bai_agents{",
        "bai_agent_capacity{",
        "bai_db_connections{",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    // A real Prometheus (Debian's package) scrapes the metrics listener.
    let dir = app.dir.join("prometheus");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: bai\n    static_configs:\n      - targets: ['{metrics_addr}']\n"),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut prometheus = tokio::process::Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("prometheus (Debian package) is installed: scripts/test.sh installs it");
    let t = app.user("metrics@x.org", "user", "default").await;
    let id = session_ids(&create_session(&app, &t, json!({"image": PYTHON})).await)[0].clone();
    wait_status(&app, &t, &id, &["RUNNING"]).await;
    let query = format!(
        "http://127.0.0.1:{port}/api/v1/query?query=bai_sessions%7Bstatus%3D%22RUNNING%22%7D"
    );
    // Prometheus starts, scrapes every second, and answers once it has a sample.
    let seen = eventually("Prometheus to see one running session", WAIT, || async {
        let r = app.http.get(&query).send().await.ok()?;
        let v = r.json::<Value>().await.ok()?;
        (v["data"]["result"][0]["value"][1] == "1").then_some(v)
    })
    .await;
    assert_eq!(
        seen["data"]["result"][0]["value"][1], "1",
        "Prometheus saw: {seen}"
    );
    let _ = prometheus.kill().await;
    destroy(&app, &t, &id).await;
});

both_dbs!(
    console_assets_are_precompressed_and_cached,
    |db| async move {
        let app = spawn(db).await;
        let web = &app.config.web_dir;
        std::fs::create_dir_all(web).unwrap();
        std::fs::write(web.join("index.html"), "<html>console</html>").unwrap();
        let js = "web-0123456789ab.js";
        std::fs::write(web.join(js), "plain").unwrap();
        std::fs::write(web.join(format!("{js}.br")), "brotli-bytes").unwrap();
        std::fs::write(web.join(format!("{js}.gz")), "gzip-bytes").unwrap();
        let get = |enc: &'static str| {
            app.http
                .get(app.url(&format!("/{js}")))
                .header("accept-encoding", enc)
                .send()
        };
        let br = get("br, gzip").await.unwrap();
        assert_eq!(br.headers()["content-encoding"], "br");
        assert!(
            br.headers()["vary"]
                .to_str()
                .unwrap()
                .to_ascii_lowercase()
                .contains("accept-encoding")
        );
        assert_eq!(
            br.headers()["cache-control"],
            "public, max-age=31536000, immutable"
        );
        assert_eq!(br.bytes().await.unwrap().as_ref(), b"brotli-bytes");
        let gz = get("gzip").await.unwrap();
        assert_eq!(gz.headers()["content-encoding"], "gzip");
        let plain = get("identity").await.unwrap();
        assert!(plain.headers().get("content-encoding").is_none());
        // The page itself is always revalidated.
        let page = app
            .http
            .get(app.url("/"))
            .header("accept", "text/html")
            .send()
            .await
            .unwrap();
        assert_eq!(page.headers()["cache-control"], "no-cache");
    }
);

both_dbs!(shutdown_closes_streams_with_a_reason, |db| async move {
    let mut app = spawn_with(db, |c| c.shutdown_grace_secs = 2).await;
    let t = app.user("bye@x.org", "user", "default").await;
    let mut ws = subscribe_op::<gql::SessionStatusChanges>(&app, &t, Default::default()).await;
    let sse = app.session_events(&t).await;
    assert_eq!(sse.status(), 200);
    let server = app.server.take().unwrap();
    let started = std::time::Instant::now();
    let stopping = tokio::spawn(server.stop());
    // The subscription ends with the reason…
    let msg = next_json(&mut ws).await;
    assert!(msg.to_string().contains("shutting down"), "{msg}");
    assert!(msg.to_string().contains("SERVICE_UNAVAILABLE"), "{msg}");
    // …so does Backend.AI's event stream…
    let text = tokio::time::timeout(std::time::Duration::from_secs(5), sse.text())
        .await
        .expect("the SSE stream ends")
        .unwrap_or_default();
    assert!(text.contains("server_shutdown"), "{text}");
    // …and the server is gone, though a WebSocket stays open: a server that waited for it
    // would never stop. The bound (far beyond the 2 s grace period) only tells a hang.
    tokio::time::timeout(WAIT, stopping)
        .await
        .unwrap_or_else(|_| panic!("the server still runs after {:?}", started.elapsed()))
        .unwrap()
        .unwrap();
});

/// An error and its sources, one after another.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    std::iter::successors(Some(e), |e| e.source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

both_dbs!(https_in_the_binary, |db| async move {
    let tls = TlsFiles::new();
    let app = spawn_with(db, |c| {
        c.tls_cert = Some(tls.cert.clone());
        c.tls_key = Some(tls.key.clone());
        c.tls_redirect_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let port = app.server.as_ref().unwrap().addr.port();
    // HTTP/2 through ALPN, with HSTS.
    let resp = app.http.get(app.url("/health/live")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.version(), reqwest::Version::HTTP_2);
    assert_eq!(
        resp.headers()["strict-transport-security"],
        "max-age=31536000"
    );
    // HTTP/1.1 clients too; GraphQL over either.
    let h1 = reqwest::Client::builder()
        .tls_certs_only([TlsFiles::ca_of(&tls.cert)])
        .http1_only()
        .build()
        .unwrap();
    let resp = h1
        .post(app.url("/graphql"))
        .json(&gql::Login::build_query(gql::login::Variables {
            email: ADMIN_EMAIL.into(),
            password: ADMIN_PASSWORD.into(),
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.version(), reqwest::Version::HTTP_11);
    // The login cookie is `Secure` with the `__Host-` prefix (no Domain, Path=/).
    let cookie = resp.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.starts_with("__Host-bai_session="), "{cookie}");
    assert!(cookie.contains("; Secure"), "{cookie}");
    assert!(cookie.contains("Path=/"), "{cookie}");
    assert!(!cookie.to_ascii_lowercase().contains("domain="), "{cookie}");
    let body: Value = resp.json().await.unwrap();
    assert!(body["data"]["login"]["token"].is_string(), "{body}");
    // The logged-in cookie works over HTTPS; the same value under the plain name does not.
    let value = cookie
        .split(';')
        .next()
        .unwrap()
        .trim_start_matches("__Host-bai_session=")
        .to_string();
    for (name, works) in [("__Host-bai_session", true), ("bai_session", false)] {
        let body: Value = app
            .http
            .post(app.url("/graphql"))
            .header("cookie", format!("{name}={value}"))
            .json(&gql::ops::WhoAmI::build_query(Default::default()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            body["data"]["whoami"]["email"] == ADMIN_EMAIL,
            works,
            "{name}: {body}"
        );
    }
    // A client that does not trust the CA fails the handshake; plain HTTP on the TLS port
    // gets nothing served in the clear.
    let untrusting = reqwest::Client::builder()
        .tls_certs_only([])
        .build()
        .unwrap();
    let refused = untrusting
        .get(app.url("/health/live"))
        .send()
        .await
        .unwrap_err();
    let chain = error_chain(&refused);
    assert!(chain.contains("invalid peer certificate"), "{chain}");
    // The listener answers the plain request in TLS (an alert), which no HTTP client reads:
    // connected, but no HTTP answer.
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/health/live"))
        .send()
        .await
        .unwrap_err();
    let chain = error_chain(&plain);
    assert!(
        !plain.is_connect() && chain.contains("invalid HTTP version parsed"),
        "{chain}"
    );
    // The redirect listener sends every path (and query) to HTTPS with 308.
    let redirect = app.server.as_ref().unwrap().redirect_addr.unwrap();
    let no_follow = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let resp = no_follow
        .post(format!("http://{redirect}/graphql?x=1"))
        .header("host", format!("localhost:{}", redirect.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 308);
    assert_eq!(
        resp.headers()["location"],
        format!("https://localhost:{port}/graphql?x=1").as_str()
    );
    // A Host header carrying more than a host name never shapes the redirect.
    let resp = no_follow
        .get(format!("http://{redirect}/"))
        .header("host", "evil.example/x@y")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    // Followed by a client that trusts the CA, the redirect lands on the real page.
    let resp = app
        .http
        .get(format!("http://localhost:{}/health/live", redirect.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.url().scheme(), "https");
    // No TLS settings half given.
    let mut half = app.config.clone();
    half.tls_key = None;
    half.listen = "127.0.0.1:0".parse().unwrap();
    let err = api::start(half).await.err().expect("refused").to_string();
    assert!(err.contains("tls_cert and tls_key"), "{err}");
});

// Large answers that echo no secret are compressed for clients that ask; answers that may
// carry a secret (keys, tokens) never are, so their size cannot leak it (BREACH).
// The large answers are the schema's introspection (`__schema`), which the schema file that
// graphql_client reads does not describe: these requests stay inline text.
both_dbs!(large_answers_compressed_secrets_never, |db| async move {
    let app = spawn(db).await;
    let post = |query: &'static str| {
        app.http
            .post(app.url("/graphql"))
            .bearer_auth(&app.admin_token)
            .header("accept-encoding", "gzip")
            .json(&json!({ "query": query }))
            .send()
    };
    let encoding = |r: &reqwest::Response| {
        r.headers()
            .get("content-encoding")
            .map(|v| v.to_str().unwrap().to_string())
    };
    let big = post("{ __schema { types { name description fields { name description } } } }")
        .await
        .unwrap();
    assert_eq!(encoding(&big).as_deref(), Some("gzip"));
    let raw = big.bytes().await.unwrap();
    assert_eq!(&raw[..2], &[0x1f, 0x8b], "a gzip stream");
    // The same size of answer with a secret key in it: plain.
    let secret = post("{ __schema { types { name description fields { name description } } } keypair { secret_key } }")
        .await
        .unwrap();
    assert_eq!(encoding(&secret), None);
    let body: Value = secret.json().await.unwrap();
    assert!(body["data"]["keypair"]["secret_key"].is_string(), "{body}");
    // Small answers and clients that do not ask: plain.
    // Inline: graphql_client's derive cannot build an operation that selects only the root
    // `__typename` (its generated answer type misses serde's path).
    assert_eq!(encoding(&post("{ __typename }").await.unwrap()), None);
    let unasked = app
        .http
        .post(app.url("/graphql"))
        .bearer_auth(&app.admin_token)
        .json(&json!({ "query": "{ __schema { types { name description } } }" }))
        .send()
        .await
        .unwrap();
    assert_eq!(encoding(&unasked), None);
});

// Upgrades (README: upgrading): today's binary starts on a database made by the previous
// migration set and applies the rest (one log line each), keeping what was there; a database
// a newer bai migrated is refused with what to do, and left as it was.
both_dbs!(
    upgrades_migrate_older_databases_and_refuse_newer_ones,
    |db| async move {
        use migration::MigratorTrait;
        use sea_orm::ConnectionTrait;
        let data = std::env::temp_dir()
            .join(format!("bai-upgrade-{}", uuid::Uuid::new_v4().simple()))
            .join("data");
        std::fs::create_dir_all(&data).unwrap();
        let url = match db {
            Db::Sqlite => format!("sqlite://{}?mode=rwc", data.join("bai.db").display()),
            Db::Postgres => fresh_pg_database().await,
        };
        let all = migration::Migrator::migrations().len() as u32;
        {
            let old = api::db::connect_raw(&url).await.unwrap();
            migration::Migrator::up(&old, Some(all - 1)).await.unwrap();
            let pending = migration::Migrator::get_pending_migrations(&old)
                .await
                .unwrap();
            assert_eq!(pending.len(), 1);
        }
        let (data2, url2) = (data.clone(), url.clone());
        let mut app = spawn_with(db, move |c| {
            c.data_dir = data2;
            if let Db::Postgres = db {
                c.database_url = Some(url2);
            }
        })
        .await;
        let conn = api::db::connect_raw(&url).await.unwrap();
        assert!(
            migration::Migrator::get_pending_migrations(&conn)
                .await
                .unwrap()
                .is_empty()
        );
        let user = app.user("upgraded@x.org", "user", "default").await;
        assert!(!user.is_empty());
        let config = app.config.clone();
        if let Some(s) = app.server.take() {
            s.stop().await.unwrap();
        }
        // A migration of a newer bai.
        conn.execute_unprepared(
        "INSERT INTO seaql_migrations (version, applied_at) VALUES ('m29991231_000001_from_a_newer_bai', 0)",
    )
    .await
    .unwrap();
        let refused = api::start(config.clone())
            .await
            .err()
            .expect("a database of a newer bai is refused");
        let why = format!("{refused:#}");
        assert!(
            why.contains("migrated by a newer bai")
                && why.contains("m29991231_000001_from_a_newer_bai"),
            "{why}"
        );
        // Nothing was changed: the user is still there, the newer migration still recorded.
        let rows = conn
            .query_all(sea_orm::Statement::from_string(
                conn.get_database_backend(),
                "SELECT email FROM users WHERE email = 'upgraded@x.org'",
            ))
            .await
            .unwrap();
        assert_eq!(rows.len(), 1);
    }
);

/// The container image of bai (`deploy/container.sh`, built by scripts/test.sh from this
/// run's binary): it serves its console and API on the host's network, drives the host's Docker
/// engine through the mounted socket (sessions on the isolated network: iptables inside) and
/// keeps its state in the mounted data directory — a session launched through it runs.
#[tokio::test]
async fn the_container_image_of_bai_serves_and_runs_sessions() {
    api::install_crypto();
    require_docker();
    let image = std::env::var("BAI_TEST_CONTAINER_IMAGE").unwrap_or_else(|_| {
        panic!("BAI_TEST_CONTAINER_IMAGE is not set: scripts/test.sh builds bai's image with deploy/container.sh")
    });
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Folders are bind-mounted into sessions by the host's engine: the data directory has the
    // same path inside and outside.
    let data = std::env::temp_dir().join(format!("bai-ct-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&data).unwrap();
    let name = format!("bai-ct-{port}");
    struct Gone(String, std::path::PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::process::Command::new("docker")
                .args(["rm", "-f", &self.0])
                .output();
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }
    let _gone = Gone(name.clone(), data.clone());
    let d = data.display().to_string();
    let out = std::process::Command::new("docker")
        .args([
            "run",
            "-d",
            "--name",
            &name,
            "--network",
            "host",
            "--cap-add",
            "NET_ADMIN",
            "--cap-add",
            "NET_RAW",
            "-v",
            "/var/run/docker.sock:/var/run/docker.sock",
            "-v",
            &format!("{d}:{d}"),
            "-e",
            &format!("BAI_DATA_DIR={d}"),
            "-e",
            &format!("BAI_LISTEN=127.0.0.1:{port}"),
            "-e",
            &format!("BAI_ADMIN_EMAIL={ADMIN_EMAIL}"),
            "-e",
            &format!("BAI_ADMIN_PASSWORD={ADMIN_PASSWORD}"),
            &image,
        ])
        .output()
        .expect("docker run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let app = external_app(format!("http://127.0.0.1:{port}"), data.join("client")).await;
    let root: Value = app
        .http
        .get(&app.base)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(root["bai"], env!("CARGO_PKG_VERSION"), "{root}");
    // The console is in the image.
    let page = app
        .http
        .get(format!("{}/", app.base))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("<script"), "{page}");
    let admin = app.admin_token.clone();
    let created = create_session(
        &app,
        &admin,
        json!({"image": PYTHON, "session_name": "in-container", "resources": "{\"cpu\": \"1\", \"mem\": \"512m\"}"}),
    )
    .await;
    let id = session_ids(&created)[0].clone();
    wait_status(&app, &admin, &id, &["RUNNING"]).await;
    let ended = app
        .op::<gql::DestroySession>(
            Some(&admin),
            gql::destroy_session::Variables { id: id.clone() },
        )
        .await;
    assert!(ended["errors"].is_null(), "{ended}");
    wait_status(&app, &admin, &id, &["TERMINATED"]).await;
    // Its state is in the mounted directory.
    assert!(data.join("bai.db").exists());
}
