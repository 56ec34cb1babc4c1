//! Lablup's own suites, unchanged, from PyPI `backend.ai-test` 26.9.x (installed by
//! `scripts/cli.sh`), each run once per test run, alone (`scripts/test.sh`):
//! - `cli_integration` (pytest over pexpect, its pinned official CLI), its `admin` and `user`
//!   groups against a fresh `bai serve`: nothing failed, nothing errored;
//! - the tester (`backend.ai test run-test`, 82 specs) through `tests/lablup-tester/run.sh`
//!   against a fresh `bai serve` process with the remote hosts of `scripts/hosts.sh`: every
//!   spec passes, model serving's included.
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::gql;
use crate::support::*;

fn suite_venv() -> PathBuf {
    std::env::var("BAI_SUITE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/bai-cli/suite")
        })
}

/// `export` lines for one profile, as the suite reads them (values taken verbatim).
fn profile(endpoint: &str, ak: &str, sk: &str) -> String {
    format!(
        "export BACKEND_ENDPOINT={endpoint}/\nexport BACKEND_ENDPOINT_TYPE=api\nexport BACKEND_ACCESS_KEY={ak}\nexport BACKEND_SECRET_KEY={sk}\n"
    )
}

async fn keys(app: &TestApp, token: &str) -> (String, String) {
    let kp = app
        .op_ok::<gql::MyKeypair>(Some(token), Default::default())
        .await;
    (
        kp["keypair"]["access_key"].as_str().unwrap().to_string(),
        kp["keypair"]["secret_key"].as_str().unwrap().to_string(),
    )
}

/// The counts of pytest's last summary line (`3 failed, 30 passed, 6 skipped in …`).
fn counts(out: &str) -> std::collections::BTreeMap<String, u64> {
    let line = out
        .lines()
        .rev()
        .find(|l| l.contains(" in ") && (l.contains("passed") || l.contains("failed")))
        .unwrap_or_default();
    line.trim_matches(|c: char| c == '=' || c.is_whitespace())
        .split(", ")
        .filter_map(|part| {
            let mut w = part.split_whitespace();
            let n = w.next()?.parse().ok()?;
            Some((w.next()?.to_string(), n))
        })
        .collect()
}

/// Run alone, right after the other tests, by `scripts/test.sh` (the same test command, never
/// skipped there): the suite allows each CLI command 5 seconds, which a machine busy with the
/// other tests in parallel may pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run alone by scripts/test.sh after the other tests (the suite's 5 s per command)"]
async fn lablup_cli_integration_suite_passes() {
    let started = Instant::now();
    require_docker();
    let venv = suite_venv();
    let cli = venv.join("bin/backend.ai");
    assert!(
        cli.exists(),
        "Lablup's CLI suite is not installed in {}: run scripts/cli.sh (scripts/test.sh does)",
        venv.display()
    );
    // The suite names its storage volume `local:volume1`.
    let app = spawn_with(Db::Sqlite, |c| {
        c.storage_hosts = vec!["local:volume1".into()]
    })
    .await;
    app.admin_op::<gql::ModifyPolicy>(gql::modify_policy::Variables {
        name: "default".into(),
        props: gql::modify_policy::ModifyKeyPairResourcePolicyInput {
            allowed_vfolder_hosts: Some(serde_json::json!(
                "{\"local:volume1\": [\"create-vfolder\", \"modify-vfolder\", \"delete-vfolder\", \"mount-in-session\", \"upload-file\", \"download-file\", \"invite-others\", \"set-user-specific-permission\"]}"
            )),
            ..Default::default()
        },
    })
    .await;
    let user = app.user("user@x.org", "user", "default").await;
    let user2 = app.user("user2@x.org", "user", "default").await;
    let work = app.dir.join("lablup-suite");
    std::fs::create_dir_all(work.join("root/src")).unwrap();
    std::os::unix::fs::symlink(&cli, work.join("root/backend.ai")).unwrap();
    for (file, token) in [
        ("env-admin.sh", app.admin_token.clone()),
        ("env-user.sh", user),
        ("env-user2.sh", user2),
    ] {
        let (ak, sk) = keys(&app, &token).await;
        std::fs::write(work.join(file), profile(&app.base, &ak, &sk)).unwrap();
    }
    let mut cmd = tokio::process::Command::new(&cli);
    cmd.args([
        "test",
        "run-cli",
        "admin,user",
        "--admin-file",
        "env-admin.sh",
        "--user-file",
        "env-user.sh",
        "--user2-file",
        "env-user2.sh",
        "-v",
        "-rA",
        "-p",
        "no:cacheprovider",
    ])
    .current_dir(&work)
    .env("NO_COLOR", "1")
    .env("BACKEND_BUILD_ROOT", work.join("root"))
    .env("PYTHONWARNINGS", "ignore")
    .env_remove("FORCE_COLOR")
    .env_remove("CLICOLOR_FORCE")
    .kill_on_drop(true);
    for (k, _) in std::env::vars() {
        if k.starts_with("BACKEND_") && k != "BACKEND_BUILD_ROOT" {
            cmd.env_remove(k);
        }
    }
    let out = tokio::time::timeout(Duration::from_secs(900), cmd.output())
        .await
        .expect("Lablup's CLI suite did not end in 15 minutes")
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let got = counts(&text);
    println!("Lablup's cli_integration suite: {got:?}");
    assert!(
        got.get("passed").copied().unwrap_or(0) > 0
            && got.get("failed").copied().unwrap_or(0) == 0
            && got.get("error").copied().unwrap_or(0) == 0
            && got.get("errors").copied().unwrap_or(0) == 0,
        "Lablup's CLI suite: {got:?}\n{text}"
    );
    took("it::lablup::lablup_cli_integration_suite_passes", started);
}

/// One spec's line of `results.tsv`: spec, verdict, seconds, sessions it left, first cause.
#[derive(Debug)]
struct Verdict {
    spec: String,
    result: String,
    seconds: f64,
    left: u32,
    cause: String,
}

fn verdicts(tsv: &str) -> Vec<Verdict> {
    tsv.lines()
        .skip(1)
        .filter_map(|line| {
            let mut f = line.splitn(5, '\t');
            Some(Verdict {
                spec: f.next()?.to_string(),
                result: f.next()?.to_string(),
                seconds: f.next()?.parse().unwrap_or(0.0),
                left: f.next()?.parse().unwrap_or(0),
                cause: f.next().unwrap_or_default().to_string(),
            })
        })
        .collect()
}

/// Lablup's end-to-end tester, all 82 specs, against a fresh `bai serve` on SQLite set up as
/// an operator sets a site up for it (`tests/lablup-tester/run.sh`: the storage host, policy,
/// model folder, the two hosts of `scripts/hosts.sh`, Lablup's web server for `login`).
/// Run alone (each spec's sessions need the machine's CPUs, and several time out on their own
/// clocks). Fails on any spec that does not pass, and on a spec that left a session behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run alone by scripts/test.sh after the other tests (the specs need the machine's CPUs)"]
async fn lablup_tester_specs_pass() {
    let started = Instant::now();
    require_docker();
    crate::hosts::hosts();
    let suite = suite_venv();
    assert!(
        suite.join("bin/backend.ai").exists(),
        "Lablup's tester is not installed in {}: run scripts/cli.sh (scripts/test.sh does)",
        suite.display()
    );
    let out = std::env::temp_dir().join(format!("bai-lablup-tester-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("lablup-tester/run.sh");
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg(&script)
        .env("BAI", bai_binary())
        .env("OUT", &out)
        .env("SUITE", &suite)
        .env("HOSTS", "1")
        .env("SPEC_TIMEOUT", "240")
        .env_remove("DATABASE_URL")
        .env("NO_COLOR", "1")
        .kill_on_drop(true);
    for (k, _) in std::env::vars() {
        if k.starts_with("BACKEND_") || (k.starts_with("BAI_") && k != "BAI_HOSTS_DIR") {
            cmd.env_remove(k);
        }
    }
    let run = tokio::time::timeout(Duration::from_secs(45 * 60), cmd.output())
        .await
        .expect("Lablup's tester did not end in 45 minutes")
        .unwrap();
    let log = format!(
        "{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let rows = verdicts(&std::fs::read_to_string(out.join("results.tsv")).unwrap_or_default());
    println!("Lablup's tester ({}):", out.display());
    for v in &rows {
        println!(
            "  {:<88} {:<8} {:>6.1}s {}",
            v.spec, v.result, v.seconds, v.cause
        );
    }
    let passed = rows.iter().filter(|v| v.result == "PASS").count();
    println!(
        "Lablup's tester: {passed} of {} specs pass in {:.0} s",
        rows.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(rows.len(), 82, "every spec gets a verdict:\n{log}");
    let failed: Vec<&Verdict> = rows.iter().filter(|v| v.result != "PASS").collect();
    assert!(
        failed.is_empty(),
        "specs that did not pass: {failed:#?}\n{log}"
    );
    // A spec that ends with a session still live (run.sh destroys it before the next): only
    // the schedule-timeout spec, by its design (it creates a session no agent can hold, reads
    // TIMEOUT and leaves it PENDING, as it would on Backend.AI).
    let leaked: Vec<&Verdict> = rows
        .iter()
        .filter(|v| v.left > 0 && v.spec != "creation_interactive_session_failure_schedule_timeout")
        .collect();
    assert!(
        leaked.is_empty(),
        "specs that left sessions behind: {leaked:#?}"
    );
    let _ = std::fs::remove_dir_all(&out);
    took("it::lablup::lablup_tester_specs_pass", started);
}

crate::both_dbs!(web_server_login_and_legacy_graphql, |db| async move {
    use serde_json::{Value, json};
    let app = spawn(db).await;
    app.user("web@x.org", "user", "default").await;
    // Lablup's web servers log in through `/auth/authorize`: the keypair, who, and a login
    // session of its own.
    let resp = app
        .http
        .post(app.url("/auth/authorize"))
        .json(&json!({"type": "keypair", "domain": "default", "username": "web@x.org", "password": USER_PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let got: Value = resp.json().await.unwrap();
    let data = &got["data"];
    assert_eq!(data["response_type"], "success", "{got}");
    assert_eq!(data["role"], "user", "{got}");
    assert_eq!(data["status"], "active", "{got}");
    assert!(
        data["access_key"].is_string() && data["secret_key"].is_string(),
        "{got}"
    );
    assert!(
        uuid::Uuid::parse_str(data["user_id"].as_str().unwrap()).is_ok(),
        "{got}"
    );
    let token = data["session_token"].as_str().unwrap().to_string();
    let me = app.ok(Some(&token), "{ user { email } }", json!({})).await;
    assert_eq!(me["user"]["email"], "web@x.org");
    // A wrong password: Backend.AI's problem, 401.
    let wrong = app
        .http
        .post(app.url("/auth/authorize"))
        .json(&json!({"type": "keypair", "domain": "default", "username": "web@x.org", "password": "nope"}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let problem: Value = wrong.json().await.unwrap();
    assert!(
        problem["type"].is_string() && problem["title"].is_string(),
        "{problem}"
    );

    // `/admin/gql` answers `application/json` (Lablup's Web UI reads nothing else as JSON),
    // with what the Web UI 26 reads of the caller.
    let gql = app
        .http
        .post(app.url("/admin/gql"))
        .bearer_auth(&token)
        .header("accept-encoding", "gzip")
        .json(&json!({"query": "{ myUserV2 { id basicInfo { email fullName } security { totpActivated allowedClientIp } } myClientIp { clientIp } groups(type: [\"GENERAL\", \"MODEL_STORE\", null]) { name resource_policy } }"}))
        .send()
        .await
        .unwrap();
    assert_eq!(gql.headers()["content-type"], "application/json");
    assert!(gql.headers().get("content-encoding").is_none());
    let got: Value = gql.json().await.unwrap();
    assert_eq!(
        got["data"]["myUserV2"]["basicInfo"]["email"], "web@x.org",
        "{got}"
    );
    assert_eq!(
        got["data"]["myUserV2"]["security"]["totpActivated"], false,
        "{got}"
    );
    assert_eq!(got["data"]["myClientIp"]["clientIp"], "127.0.0.1", "{got}");
    assert_eq!(got["data"]["groups"][0]["name"], "default", "{got}");

    // The legacy endpoint: the bare data, errors as Backend.AI's graphql-error problem.
    let legacy = app
        .http
        .post(app.url("/admin/graphql"))
        .bearer_auth(&token)
        .json(&json!({"query": "{ user { email role } }"}))
        .send()
        .await
        .unwrap();
    assert_eq!(legacy.status(), 200);
    assert!(
        legacy.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let bare: Value = legacy.json().await.unwrap();
    assert_eq!(
        bare,
        json!({"user": {"email": "web@x.org", "role": "user"}})
    );
    let bad = app
        .http
        .post(app.url("/admin/graphql"))
        .bearer_auth(&token)
        .json(&json!({"query": "{ users { email } }"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let problem: Value = bad.json().await.unwrap();
    assert_eq!(
        problem["type"], "https://api.backend.ai/probs/graphql-error",
        "{problem}"
    );
    assert_eq!(
        problem["data"][0]["extensions"]["code"], "FORBIDDEN",
        "{problem}"
    );

    // `/auth/logout` ends that login session, and only the caller's own.
    let other = app.user("other@x.org", "user", "default").await;
    let theirs = app
        .http
        .post(app.url("/auth/logout"))
        .bearer_auth(&other)
        .json(&json!({"session_token": token}))
        .send()
        .await
        .unwrap();
    assert_eq!(theirs.status(), 200);
    let still = app.ok(Some(&token), "{ user { email } }", json!({})).await;
    assert_eq!(still["user"]["email"], "web@x.org");
    let out = app
        .http
        .post(app.url("/auth/logout"))
        .bearer_auth(&token)
        .json(&json!({"session_token": token}))
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 200);
    let gone = app
        .http
        .post(app.url("/graphql"))
        .bearer_auth(&token)
        .json(&json!({"query": "{ user { email } }"}))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 401, "the login session ended");
});
