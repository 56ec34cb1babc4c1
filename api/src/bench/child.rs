//! A `bai serve` child process (this very binary) on a fresh data directory: what the fan-out,
//! queue and several-managers benchmarks measure.
use std::time::Duration;

use anyhow::Context;
use uuid::Uuid;

/// A `bai serve` child process on a fresh data directory (no engines), for measuring what the
/// server alone holds; killed with the value.
pub(super) struct Child {
    proc: tokio::process::Child,
    pub(super) base: String,
    dir: std::path::PathBuf,
    database_url: Option<String>,
}

impl Drop for Child {
    fn drop(&mut self) {
        // Clean-up on drop: a process already gone and a missing directory are both fine.
        let _ = self.proc.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Child {
    pub(super) async fn start(
        database_url: Option<String>,
        extra_env: &[(&str, &str)],
    ) -> anyhow::Result<Child> {
        // The HTTP clients below use rustls with ring, as the server does.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let dir = std::env::temp_dir().join(format!("bai-bench-{}", Uuid::new_v4().simple()));
        let mut cmd = tokio::process::Command::new(std::env::current_exe()?);
        cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .arg("--data-dir")
            .arg(&dir)
            .env("BAI_ADMIN_PASSWORD", "Bench-pass-1")
            .env("BAI_DOCKER_ENDPOINTS", "")
            .env("BAI_NETWORK_ISOLATION", "false")
            .env("BAI_LOG", "warn")
            .env("BAI_WEB_DIR", dir.join("no-web"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        match &database_url {
            Some(url) => cmd.env("DATABASE_URL", url),
            None => cmd.env_remove("DATABASE_URL"),
        };
        let proc = cmd.spawn().context("starting bai serve")?;
        let base = format!("http://127.0.0.1:{port}");
        let child = Child {
            proc,
            base,
            dir,
            database_url,
        };
        for _ in 0..200 {
            if reqwest::get(format!("{}/health/live", child.base))
                .await
                .is_ok()
            {
                return Ok(child);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("bai serve did not come up")
    }

    pub(super) fn rss_bytes(&self) -> u64 {
        let Some(pid) = self.proc.id() else { return 0 };
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
            .map(|kb| kb * 1024)
            .unwrap_or(0)
    }

    /// CPU time (user + system) the child has used so far.
    pub(super) fn cpu(&self) -> Duration {
        let Some(pid) = self.proc.id() else {
            return Duration::ZERO;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Fields after the command name (which may hold spaces) start after the last ')'.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        // utime and stime are fields 14 and 15 (1-based) of the whole line: 12 and 13 here.
        Duration::from_millis((ticks(11) + ticks(12)) * 10)
    }

    pub(super) async fn gql(
        &self,
        token: Option<&str>,
        query: &str,
    ) -> anyhow::Result<serde_json::Value> {
        let mut req = reqwest::Client::new()
            .post(format!("{}/graphql", self.base))
            .json(&serde_json::json!({ "query": query }));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let body: serde_json::Value = req.send().await?.json().await?;
        anyhow::ensure!(body.get("errors").is_none(), "GraphQL error: {body}");
        Ok(body["data"].clone())
    }

    pub(super) async fn login(&self) -> anyhow::Result<String> {
        let data = self
            .gql(
                None,
                "mutation { login(email: \"admin@bai.local\", password: \"Bench-pass-1\") { token } }",
            )
            .await?;
        data["login"]["token"]
            .as_str()
            .map(str::to_string)
            .context("bench login")
    }

    pub(super) async fn db(&self) -> anyhow::Result<sea_orm::DatabaseConnection> {
        match &self.database_url {
            Some(url) => crate::db::connect_raw(url).await,
            None => {
                crate::db::connect_raw(&format!(
                    "sqlite://{}?mode=rw",
                    self.dir.join("bai.db").display()
                ))
                .await
            }
        }
    }

    pub(super) fn database(&self) -> &'static str {
        if self.database_url.is_some() {
            "PostgreSQL"
        } else {
            "SQLite"
        }
    }
}
