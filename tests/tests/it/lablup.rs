//! Lablup's own CLI test suite, unchanged: the `cli_integration` package of PyPI
//! `backend.ai-test` 26.9.x (pytest over pexpect, its pinned official CLI), its `admin` and
//! `user` groups against a fresh `bai serve`. Installed by `scripts/cli.sh`; run once per test
//! run. The counts are asserted: nothing failed, nothing errored.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
