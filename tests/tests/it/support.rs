//! Test harness: boots the real server in-process on 127.0.0.1:0 against a fresh SQLite file
//! or a fresh PostgreSQL database, and talks to it over HTTP/WebSocket only.
use std::path::PathBuf;

use graphql_client::GraphQLQuery;
use serde_json::{Value, json};

use crate::gql;

pub const ADMIN_EMAIL: &str = "admin@bai.local";
pub const ADMIN_PASSWORD: &str = "Admin-pass-1";
pub const USER_PASSWORD: &str = "User-pass-1";

#[derive(Clone, Copy, Debug)]
pub enum Db {
    Sqlite,
    Postgres,
}

/// Runs one scenario against both databases: `both_dbs!(name, |db| async move { … })`.
#[macro_export]
macro_rules! both_dbs {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let started = std::time::Instant::now();
                ($body)($crate::support::Db::Sqlite).await;
                $crate::support::took(concat!(module_path!(), "::sqlite"), started);
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let started = std::time::Instant::now();
                ($body)($crate::support::Db::Postgres).await;
                $crate::support::took(concat!(module_path!(), "::postgres"), started);
            }
        }
    };
}

/// Records how long a passing test took, as `seconds name` lines in `$BAI_TEST_TIMES` (the
/// test command prints the slowest).
pub fn took(name: &str, started: std::time::Instant) {
    use std::io::Write;
    if let Some(path) = std::env::var_os("BAI_TEST_TIMES")
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        // A timing that cannot be written only leaves the list shorter.
        let _ = writeln!(f, "{:.1} {name}", started.elapsed().as_secs_f64());
    }
}

pub struct TestApp {
    pub server: Option<api::Server>,
    pub base: String,
    pub http: reqwest::Client,
    pub admin_token: String,
    pub config: api::Config,
    pub dir: PathBuf,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        // Whatever a test left running (or a failing test left behind) goes with it: every
        // container and scratch volume of this installation.
        if let Some(s) = &self.server {
            let label = format!("label=ai.backend.bai-instance={}", s.state.instance_id);
            for (list, rm) in [
                (&["ps", "-aq", "--filter"][..], &["rm", "-f"][..]),
                (
                    &["volume", "ls", "-q", "--filter"][..],
                    &["volume", "rm", "-f"][..],
                ),
            ] {
                let ids = std::process::Command::new("docker")
                    .args(list)
                    .arg(&label)
                    .output();
                if let Ok(out) = ids {
                    let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
                        .split_whitespace()
                        .map(str::to_string)
                        .collect();
                    if !ids.is_empty() {
                        let _ = std::process::Command::new("docker")
                            .args(rm)
                            .args(&ids)
                            .output();
                    }
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A PostgreSQL server URL (to the `postgres` maintenance database). scripts/test.sh starts
/// Debian's postgresql and exports it; without it the PostgreSQL tests fail, never skip.
fn pg_admin_url() -> String {
    std::env::var("BAI_TEST_PG_URL").unwrap_or_else(|_| {
        panic!("BAI_TEST_PG_URL is not set: PostgreSQL tests need a server (run scripts/test.sh, which installs and starts one)")
    })
}

pub async fn fresh_pg_database() -> String {
    database_on(&pg_admin_url()).await
}

/// A PostgreSQL cluster of the tests' own (Debian's `pg_createcluster`, port 5440) that a test
/// may stop and start again; made once per run. Tests that stop it take turns (`turn`).
pub struct OwnPg {
    version: String,
}

pub const OWN_PG_CLUSTER: &str = "baioutage";

impl OwnPg {
    pub fn get() -> &'static OwnPg {
        static PG: std::sync::OnceLock<OwnPg> = std::sync::OnceLock::new();
        PG.get_or_init(|| {
            let sh = |cmd: &str| {
                let out = std::process::Command::new("sh")
                    .args(["-c", cmd])
                    .output()
                    .expect("sh");
                assert!(
                    out.status.success(),
                    "{cmd}: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                String::from_utf8_lossy(&out.stdout).trim().to_string()
            };
            let version = sh("ls /usr/lib/postgresql | sort -V | tail -n 1");
            sh(&format!(
                "pg_lsclusters -h | awk '{{print $2}}' | grep -qx {OWN_PG_CLUSTER} \
                 || pg_createcluster {version} {OWN_PG_CLUSTER} -p 5440 >/dev/null"
            ));
            let pg = OwnPg { version };
            pg.start();
            let psql = |sql: &str| {
                let out = std::process::Command::new("runuser")
                    .args(["-u", "postgres", "--", "psql", "-p", "5440", "-qtAc", sql])
                    .output()
                    .expect("runuser psql");
                assert!(out.status.success(), "{sql}: {out:?}");
                String::from_utf8_lossy(&out.stdout).trim().to_string()
            };
            if psql("SELECT 1 FROM pg_roles WHERE rolname = 'bai'") != "1" {
                psql("CREATE ROLE bai LOGIN SUPERUSER PASSWORD 'bai'");
            }
            pg
        })
    }

    /// Starts the cluster (already running is fine) and waits until it answers.
    pub fn start(&self) {
        let _ = std::process::Command::new("pg_ctlcluster")
            .args([&self.version, OWN_PG_CLUSTER, "start"])
            .output();
        for _ in 0..120 {
            let ready = std::process::Command::new("pg_isready")
                .args(["-q", "-h", "127.0.0.1", "-p", "5440"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        panic!("the tests' own PostgreSQL cluster does not start");
    }

    /// Stops the cluster at once (its connections cut: an outage).
    pub fn stop(&self) {
        let out = std::process::Command::new("pg_ctlcluster")
            .args([&self.version, OWN_PG_CLUSTER, "stop", "-m", "immediate"])
            .output()
            .expect("pg_ctlcluster");
        assert!(out.status.success(), "{out:?}");
    }

    pub async fn fresh_database(&self) -> String {
        database_on("postgres://bai:bai@127.0.0.1:5440/postgres").await
    }
}

/// Starts [`OwnPg`] again when dropped: a test that fails mid-outage leaves it running.
pub struct PgBack;

impl Drop for PgBack {
    fn drop(&mut self) {
        OwnPg::get().start();
    }
}

/// A fresh database on the PostgreSQL server of `admin` (its maintenance database's URL).
async fn database_on(admin: &str) -> String {
    let admin = admin.to_string();
    let name = format!("bai_t_{}", uuid::Uuid::new_v4().simple());
    let db = api::db::connect_raw(&admin)
        .await
        .expect("connect to PostgreSQL");
    db.execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create test database");
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
    format!("{base}/{name}")
}

use sea_orm::ConnectionTrait;

pub async fn spawn(db: Db) -> TestApp {
    spawn_with(db, |_| {}).await
}

/// A test server's configuration: a fresh directory (data in `data/`), on SQLite or a fresh
/// PostgreSQL database.
pub async fn config_for(db: Db) -> api::Config {
    let dir = std::env::temp_dir().join(format!("bai-it-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut config = api::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.join("data"),
        web_dir: dir.join("web"),
        admin_email: ADMIN_EMAIL.into(),
        admin_password: Some(ADMIN_PASSWORD.into()),
        ..Default::default()
    };
    if let Db::Postgres = db {
        config.database_url = Some(fresh_pg_database().await);
    }
    config
}

pub async fn spawn_with(db: Db, tweak: impl FnOnce(&mut api::Config)) -> TestApp {
    let mut config = config_for(db).await;
    let dir = config.data_dir.parent().unwrap().to_path_buf();
    tweak(&mut config);
    let server = api::start(config.clone()).await.expect("server starts");
    let base = base_url(&server, &config);
    let http = client_for(&config);
    let mut app = TestApp {
        server: Some(server),
        base,
        http,
        admin_token: String::new(),
        config,
        dir,
    };
    app.admin_token = app.login(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    app
}

/// `http://127.0.0.1:PORT`, or over TLS `https://localhost:PORT` (the name in the test
/// certificate).
fn base_url(server: &api::Server, config: &api::Config) -> String {
    match config.tls_cert {
        Some(_) => format!("https://localhost:{}", server.addr.port()),
        None => format!("http://{}", server.addr),
    }
}

/// An HTTP client; for a TLS server one that trusts the test CA (`ca.pem` beside
/// `tls_cert`, as [`TlsFiles`] makes them) and nothing else.
fn client_for(config: &api::Config) -> reqwest::Client {
    match &config.tls_cert {
        Some(cert) => reqwest::Client::builder()
            .tls_certs_only([TlsFiles::ca_of(cert)])
            .build()
            .unwrap(),
        None => reqwest::Client::new(),
    }
}

/// A certificate authority and a server certificate for `localhost` / 127.0.0.1 signed by
/// it, made by `openssl` in a fresh directory.
pub struct TlsFiles {
    pub dir: PathBuf,
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    pub fn new() -> TlsFiles {
        let dir = std::env::temp_dir().join(format!("bai-tls-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let openssl = |args: &[&str]| {
            let out = std::process::Command::new("openssl")
                .args(args)
                .current_dir(&dir)
                .output()
                .expect("openssl must be installed");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        openssl(
            &[
                &["req", "-x509"][..],
                &ec,
                &[
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.pem",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=bai test CA",
                    "-addext",
                    "basicConstraints=critical,CA:TRUE",
                    "-addext",
                    "keyUsage=critical,keyCertSign,cRLSign",
                ],
            ]
            .concat(),
        );
        openssl(
            &[
                &["req"][..],
                &ec,
                &[
                    "-keyout",
                    "server.key",
                    "-out",
                    "server.csr",
                    "-subj",
                    "/CN=localhost",
                ],
            ]
            .concat(),
        );
        std::fs::write(
            dir.join("ext.cnf"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ]);
        TlsFiles {
            ca: dir.join("ca.pem"),
            cert: dir.join("server.pem"),
            key: dir.join("server.key"),
            dir,
        }
    }

    /// The CA that signed `cert` (it lies beside it).
    pub fn ca_of(cert: &std::path::Path) -> reqwest::Certificate {
        let pem = std::fs::read(cert.with_file_name("ca.pem")).unwrap();
        reqwest::Certificate::from_pem(&pem).unwrap()
    }

    /// The base64 SHA-256 of the server key's SubjectPublicKeyInfo (Chromium's
    /// `--ignore-certificate-errors-spki-list`: trust this one key, nothing else).
    pub fn spki_sha256(&self) -> String {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("openssl pkey -in server.key -pubout -outform der | openssl dgst -sha256 -binary | base64")
            .current_dir(&self.dir)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }
}

impl TestApp {
    pub fn state(&self) -> &api::AppState {
        &self.server.as_ref().unwrap().state
    }

    /// Stops the server (gracefully, as a restart would) and starts a new one on the same
    /// database and data directory.
    pub async fn restart(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop().await.unwrap();
        }
        let server = api::start(self.config.clone())
            .await
            .expect("server restarts");
        self.base = base_url(&server, &self.config);
        self.server = Some(server);
        self.admin_token = self.login(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    }

    /// Another manager (`bai serve`) on the same PostgreSQL database and data directory, in
    /// this test process (its own state: bus, leases, caches); the same superadmin.
    pub async fn beside(&self) -> TestApp {
        self.beside_with(|_| {}).await
    }

    /// As [`TestApp::beside`], its configuration changed by `tweak` first.
    pub async fn beside_with(&self, tweak: impl FnOnce(&mut api::Config)) -> TestApp {
        let mut config = self.config.clone();
        config.listen = "127.0.0.1:0".parse().unwrap();
        config.advertise_addr = None;
        tweak(&mut config);
        let server = api::start(config.clone())
            .await
            .expect("a second manager starts");
        let base = base_url(&server, &config);
        // Its own (empty) directory: the shared one goes with the first.
        let dir = std::env::temp_dir().join(format!("bai-it-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut app = TestApp {
            server: Some(server),
            base,
            http: client_for(&config),
            admin_token: String::new(),
            config,
            dir,
        };
        app.admin_token = app.login(ADMIN_EMAIL, ADMIN_PASSWORD).await;
        app
    }

    /// `/health/readyz` as JSON.
    pub async fn readyz(&self) -> Value {
        self.http
            .get(self.url("/health/readyz"))
            .send()
            .await
            .expect("readyz answers")
            .json()
            .await
            .expect("readyz JSON")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// POSTs a GraphQL document with an optional bearer token; returns the whole response body.
    pub async fn gql(&self, token: Option<&str>, query: &str, variables: Value) -> Value {
        let mut req = self
            .http
            .post(self.url("/graphql"))
            .json(&json!({"query": query, "variables": variables}));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.expect("request sent");
        resp.json().await.expect("JSON body")
    }

    /// As `gql`, and asserts there were no errors; returns `data`.
    pub async fn ok(&self, token: Option<&str>, query: &str, variables: Value) -> Value {
        let body = self.gql(token, query, variables).await;
        assert!(
            body.get("errors").is_none() && !body["data"].is_null(),
            "unexpected errors for {query}: {body}"
        );
        body["data"].clone()
    }

    pub async fn admin(&self, query: &str, variables: Value) -> Value {
        self.ok(Some(&self.admin_token.clone()), query, variables)
            .await
    }

    /// Runs the typed operation `Q` (see `gql`) as `token`; returns the whole response body,
    /// errors included.
    pub async fn op<Q: GraphQLQuery>(&self, token: Option<&str>, variables: Q::Variables) -> Value {
        let mut req = self
            .http
            .post(self.url("/graphql"))
            .json(&Q::build_query(variables));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.expect("request sent");
        resp.json().await.expect("JSON body")
    }

    /// As `op`, and asserts there were no errors; returns `data`.
    pub async fn op_ok<Q: GraphQLQuery>(
        &self,
        token: Option<&str>,
        variables: Q::Variables,
    ) -> Value {
        let body = self.op::<Q>(token, variables).await;
        assert!(
            body.get("errors").is_none() && !body["data"].is_null(),
            "unexpected errors for {}: {body}",
            std::any::type_name::<Q>()
        );
        body["data"].clone()
    }

    /// As `op_ok`, as the superadmin.
    pub async fn admin_op<Q: GraphQLQuery>(&self, variables: Q::Variables) -> Value {
        self.op_ok::<Q>(Some(&self.admin_token.clone()), variables)
            .await
    }

    pub async fn login(&self, email: &str, password: &str) -> String {
        let data = self
            .op_ok::<gql::Login>(
                None,
                gql::login::Variables {
                    email: email.into(),
                    password: password.into(),
                },
            )
            .await;
        data["login"]["token"].as_str().expect("token").to_string()
    }

    /// Creates a user (as the superadmin) and returns a bearer token for it.
    pub async fn user(&self, email: &str, role: &str, domain: &str) -> String {
        self.admin_op::<gql::CreateUser>(gql::create_user::Variables {
            email: email.into(),
            props: gql::create_user::UserInput {
                username: email.split('@').next().unwrap().into(),
                password: USER_PASSWORD.into(),
                need_password_change: false,
                domain_name: domain.into(),
                role: Some(role.into()),
                ..Default::default()
            },
        })
        .await;
        self.login(email, USER_PASSWORD).await
    }

    /// The access key of the main keypair behind `token`.
    pub async fn access_key(&self, token: &str) -> String {
        self.op_ok::<gql::MyAccessKey>(Some(token), Default::default())
            .await["keypair"]["access_key"]
            .as_str()
            .expect("an access key")
            .to_string()
    }

    /// A policy without resource limits (ten sessions at once, one container each, never
    /// idle), for a test to change what it is about: `Input { field, ..open_policy() }`.
    pub fn open_policy() -> gql::create_policy::CreateKeyPairResourcePolicyInput {
        gql::create_policy::CreateKeyPairResourcePolicyInput {
            default_for_unspecified: "UNLIMITED".into(),
            total_resource_slots: serde_json::json!("{}"),
            max_concurrent_sessions: 10,
            max_containers_per_session: 1,
            idle_timeout: 0,
            ..Default::default()
        }
    }

    /// Creates the resource policy `name` and gives it to the main keypair behind `token`.
    /// A resource group (static, FIFO) open to the default domain.
    pub async fn resource_group(&self, name: &str) {
        self.admin_op::<gql::CreateScalingGroup>(gql::create_scaling_group::Variables {
            name: name.into(),
            props: gql::create_scaling_group::CreateScalingGroupInput {
                driver: "static".into(),
                scheduler: "fifo".into(),
                ..Default::default()
            },
        })
        .await;
        self.admin_op::<gql::admin::AssociateScalingGroupWithDomain>(
            gql::admin::associate_scaling_group_with_domain::Variables {
                scaling_group: name.into(),
                domain: "default".into(),
            },
        )
        .await;
    }

    /// The image's least CPU (`"0.5"`: several containers on a small test machine).
    pub async fn image_min_cpu(&self, image: &str, min: &str) {
        self.admin_op::<gql::ModifyImage>(gql::modify_image::Variables {
            target: image.into(),
            props: gql::modify_image::ModifyImageInput {
                resource_limits: Some(vec![gql::modify_image::ResourceLimitInput {
                    key: "cpu".into(),
                    min: Some(min.into()),
                    max: None,
                }]),
            },
        })
        .await;
    }

    pub async fn use_policy(
        &self,
        token: &str,
        name: &str,
        props: gql::create_policy::CreateKeyPairResourcePolicyInput,
    ) {
        self.admin_op::<gql::CreatePolicy>(gql::create_policy::Variables {
            name: name.into(),
            props,
        })
        .await;
        let ak = self.access_key(token).await;
        self.admin_op::<gql::SetKeypairPolicy>(gql::set_keypair_policy::Variables {
            access_key: ak,
            policy: name.into(),
        })
        .await;
    }

    /// Backend.AI's session event stream (SSE) for every session the caller may see.
    pub async fn session_events(&self, token: &str) -> reqwest::Response {
        let resp = self
            .http
            .get(self.url("/events/session?name=*"))
            .header("x-backendai-version", "v8.20240915")
            .bearer_auth(token)
            .send()
            .await
            .expect("the event stream answers");
        assert_eq!(resp.status(), 200);
        resp
    }

    pub async fn create_domain(&self, name: &str) {
        self.admin_op::<gql::CreateDomain>(gql::create_domain::Variables { name: name.into() })
            .await;
    }
}

/// A loopback port free now (for a server a test starts).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A REST call with a login token: the status and the JSON answer (Null when none).
pub async fn rest(
    app: &TestApp,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = app.http.request(method, app.url(path)).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The `extensions.code` of the first error.
pub fn code(body: &Value) -> &str {
    body["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no error code in {body}"))
}

pub fn message(body: &Value) -> &str {
    body["errors"][0]["message"].as_str().unwrap_or("")
}

/// Asserts the response failed with `expected` code.
#[track_caller]
pub fn assert_code(body: &Value, expected: &str) {
    assert_eq!(code(body), expected, "{body}");
}

/// Records a terminated compute session for `access_key` directly in the database (the
/// sessions API lands later), so rules that depend on session history can be tested.
pub async fn insert_session(
    app: &TestApp,
    access_key: &str,
    user: uuid::Uuid,
    group: uuid::Uuid,
) -> uuid::Uuid {
    use sea_orm::ActiveModelTrait;
    let row = ended_session(access_key, user, group);
    let id = *row.id.as_ref();
    row.insert(&app.server.as_ref().unwrap().state.db)
        .await
        .unwrap();
    id
}

/// A session that ended (TERMINATED, named "history") of `user`'s keypair in `group`, as a
/// row to insert.
pub fn ended_session(
    access_key: &str,
    user: uuid::Uuid,
    group: uuid::Uuid,
) -> entity::sessions::ActiveModel {
    use entity::enums::{ClusterMode, SessionResult, SessionStatus, SessionType};
    use sea_orm::Set;
    let now = chrono::Utc::now();
    let id = uuid::Uuid::new_v4();
    entity::sessions::ActiveModel {
        id: Set(id),
        name: Set("history".into()),
        session_type: Set(SessionType::Interactive),
        priority: Set(10),
        cluster_mode: Set(ClusterMode::SingleNode),
        cluster_size: Set(1),
        agent_ids: Set(Default::default()),
        scaling_group_name: Set(Some("default".into())),
        domain_name: Set("default".into()),
        group_id: Set(group),
        user_uuid: Set(user),
        access_key: Set(access_key.into()),
        images: Set(json!(["cr.local/stable/python:3.11"])),
        tag: Set(None),
        occupying_slots: Set(Default::default()),
        requested_slots: Set(Default::default()),
        vfolder_mounts: Set(Default::default()),
        environ: Set(json!({})),
        resource_opts: Set(json!({})),
        bootstrap_script: Set(None),
        startup_command: Set(None),
        batch_timeout: Set(None),
        created_at: Set(now),
        terminated_at: Set(Some(now)),
        starts_at: Set(None),
        status: Set(SessionStatus::Terminated),
        status_changed: Set(now),
        status_info: Set(Some("user-requested".into())),
        status_data: Set(None),
        status_history: Set(json!({"TERMINATED": now.to_rfc3339()})),
        callback_url: Set(None),
        result: Set(SessionResult::Success),
        num_queries: Set(0),
        last_stat: Set(None),
        last_activity: Set(None),
        utilization_idle_since: Set(None),
        utilization_sampled_at: Set(None),
        owner: Set(None),
    }
}

pub const PYTHON: &str = "bai.local/stable/python:3.11-debian12";

/// A `bai serve` started outside this process (a child process, a container) at `base`: waits
/// until it is ready, then logs in as the test superadmin. `dir` is this client's scratch.
pub async fn external_app(base: String, dir: PathBuf) -> TestApp {
    let http = reqwest::Client::new();
    eventually(&format!("bai at {base} to be ready"), WAIT, || async {
        let r = http
            .get(format!("{base}/health/readyz"))
            .send()
            .await
            .ok()?;
        r.status().is_success().then_some(())
    })
    .await;
    let mut app = TestApp {
        server: None,
        base,
        http,
        admin_token: String::new(),
        config: api::Config::default(),
        dir,
    };
    app.admin_token = app.login(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    app
}

/// The `bai` binary of this build (the tests that run `bai serve` as a process).
pub fn bai_binary() -> std::path::PathBuf {
    // target/<profile>/deps/it-… → target/<profile>/bai
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("bai"))
        .unwrap();
    assert!(
        bin.exists(),
        "{} is missing: build it first (`cargo build -p bai`; scripts/test.sh does)",
        bin.display()
    );
    bin
}

/// Docker must be there: scripts/test.sh builds the images; without the engine these tests
/// fail (they never skip).
pub fn require_docker() {
    let ok = std::process::Command::new("docker")
        .args(["image", "inspect", PYTHON])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "Docker with the image {PYTHON} is required: run scripts/images.sh (scripts/test.sh does)"
    );
}

/// `docker` CLI output, for checking what the engine really has.
pub fn docker(args: &[&str]) -> String {
    let out = std::process::Command::new("docker")
        .args(args)
        .output()
        .expect("docker CLI");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Waits until the session's status is one of `want` (a bound against hanging, not a speed
/// claim); returns the session as `SessionState` selects it.
pub async fn wait_status(app: &TestApp, token: &str, id: &str, want: &[&str]) -> Value {
    eventually(&format!("session {id} reaching {want:?}"), WAIT, || async {
        let s = app
            .op_ok::<gql::SessionState>(
                Some(token),
                gql::session_state::Variables { id: id.into() },
            )
            .await;
        let st = s["compute_session"]["status"].as_str().unwrap_or("");
        want.contains(&st).then(|| s["compute_session"].clone())
    })
    .await
}

/// Waits for background task `task_id` to end and asserts it is done; its final state.
pub async fn wait_task_done(app: &TestApp, token: &str, task_id: &str) -> Value {
    let end = eventually(&format!("task {task_id} ending"), WAIT, || async {
        let t = app
            .op_ok::<gql::BackgroundTask>(
                Some(token),
                gql::background_task::Variables {
                    task_id: task_id.into(),
                },
            )
            .await;
        (t["background_task"]["status"] != "running").then(|| t["background_task"].clone())
    })
    .await;
    assert_eq!(end["status"], "done", "{end}");
    end
}

/// Creates sessions through GraphQL and returns the response body.
pub async fn create_session(app: &TestApp, token: &str, props: Value) -> Value {
    let props = serde_json::from_value(props).expect("props of CreateSessionInput");
    app.op::<gql::CreateSession>(Some(token), gql::create_session::Variables { props })
        .await
}

pub fn session_ids(body: &Value) -> Vec<String> {
    body["data"]["create_session"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// graphql-transport-ws: connects with `token`, checks the ack, subscribes to the typed
/// subscription `Q` as operation "1", and returns once the server listens on the event bus
/// for it.
pub async fn subscribe_op<Q: GraphQLQuery>(
    app: &TestApp,
    token: &str,
    variables: Q::Variables,
) -> Ws {
    let payload = serde_json::to_value(Q::build_query(variables)).unwrap();
    let before = app.state().shared.events.subscribers();
    let ws = subscribe_payload(app, token, payload).await;
    eventually(
        "the subscription to listen on the event bus",
        WAIT,
        || async { (app.state().shared.events.subscribers() > before).then_some(()) },
    )
    .await;
    ws
}

/// As `subscribe_op`, for a subscription that never listens on the event bus: one that polls
/// (`session_stats`), one that replays what was produced before it (`execution_output`), or
/// one the server refuses. Returns once it is sent; its first message is what the test waits
/// for.
pub async fn subscribe_op_sent<Q: GraphQLQuery>(
    app: &TestApp,
    token: &str,
    variables: Q::Variables,
) -> Ws {
    subscribe_payload(
        app,
        token,
        serde_json::to_value(Q::build_query(variables)).unwrap(),
    )
    .await
}

async fn subscribe_payload(app: &TestApp, token: &str, payload: Value) -> Ws {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = app
        .url("/graphql/ws")
        .replace("http://", "ws://")
        .into_client_request()
        .unwrap();
    req.headers_mut().insert(
        "sec-websocket-protocol",
        "graphql-transport-ws".parse().unwrap(),
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .expect("websocket connects");
    ws.send(Message::text(
        json!({"type": "connection_init", "payload": {"token": token}}).to_string(),
    ))
    .await
    .unwrap();
    let ack = next_json(&mut ws).await;
    assert_eq!(ack["type"], "connection_ack", "{ack}");
    ws.send(Message::text(
        json!({"id": "1", "type": "subscribe", "payload": payload}).to_string(),
    ))
    .await
    .unwrap();
    ws
}

/// The next text message as JSON (10 s at most).
pub async fn next_json<S>(ws: &mut S) -> Value
where
    S: futures_util::Stream<
            Item = Result<
                tokio_tungstenite::tungstenite::Message,
                tokio_tungstenite::tungstenite::Error,
            >,
        > + Unpin,
{
    use futures_util::StreamExt;
    loop {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(10), ws.next())
            .await
            .expect("message within 10 s")
            .unwrap()
            .unwrap();
        if let tokio_tungstenite::tungstenite::Message::Text(t) = msg {
            return serde_json::from_str(t.as_str()).unwrap();
        }
    }
}

/// A block of ten app-pool ports for one test (random, so parallel tests rarely meet), below
/// the kernel's ephemeral range (32768 and up): an outgoing connection of any test never holds
/// one of them (a test that asks for a given port found it taken that way).
pub fn port_block() -> u16 {
    20000 + (rand_u16() % 1200) * 10
}

fn rand_u16() -> u16 {
    let b = uuid::Uuid::new_v4().into_bytes();
    u16::from_le_bytes([b[0], b[1]])
}

/// Terminates a session as `token` (the call must succeed).
pub async fn destroy(app: &TestApp, token: &str, id: &str) {
    app.op_ok::<gql::DestroySession>(
        Some(token),
        gql::destroy_session::Variables { id: id.into() },
    )
    .await;
}

/// How long a test waits for something the server does in the background before it calls it
/// a hang. A bound against hanging, never a claim about speed.
pub const WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Asks `probe` again and again (every 50 ms) until it answers `Some`, and returns that; fails
/// the test with `what` when `timeout` passes first. The one way tests wait for the server:
/// for an event, a status, a subscription to be registered — never a bare sleep.
pub async fn eventually<T, F, Fut>(what: &str, timeout: std::time::Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("waited {timeout:?} for {what}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The id of the project `name` among those `token` may see.
pub async fn group_id(app: &TestApp, token: &str, name: &str) -> String {
    let gs = app
        .ok(Some(token), "{ groups { id name } }", json!({}))
        .await;
    gs["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("no group {name}: {gs}"))["id"]
        .as_str()
        .unwrap()
        .to_string()
}
