//! Apps inside sessions: the launcher's list (the image's `ai.backend.service-ports` plus the
//! built-in terminal), starting an app on demand (`start_service`; Jupyter Notebook with a
//! per-launch token and its base URL under the proxy), and the app proxy at
//! `/apps/{session}/{app}/…`, which only the session's owner (or a superadmin) may use.
//! Container ports are not published on the host: the proxy reaches each container at its
//! address on the session network (the host may; the containers may not reach the host).
use uuid::Uuid;

pub mod defs;
pub mod started;
pub use started::{AppEntry, SSH_SETUP_WAIT, StartedApps};

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::store::Runtime;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    pub name: String,
    /// http, tcp, pty or preopen.
    pub protocol: String,
    pub container_port: Option<u16>,
}

/// An app's name as bai takes it from a label: it names files, URL paths and cookies, so only
/// letters, digits, `-` and `_`, starting with a letter or digit, at most 64 characters.
pub fn app_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// `jupyter:http:8080,ssh:tcp:2200` → ports (malformed entries, and names that are not
/// [`app_name_ok`], are skipped).
pub fn parse_service_ports(label: &str) -> Vec<ServicePort> {
    label
        .split(',')
        .filter_map(|entry| {
            let mut parts = entry.trim().split(':');
            let (name, protocol, port) = (parts.next()?, parts.next()?, parts.next()?);
            let port: u16 = port
                .trim_matches(|c| c == '[' || c == ']')
                .split('|')
                .next()?
                .parse()
                .ok()?;
            app_name_ok(name).then(|| ServicePort {
                name: name.to_string(),
                protocol: protocol.to_string(),
                container_port: Some(port),
            })
        })
        .collect()
}

/// Built-in SSH/SFTP daemon's port inside every container (as Backend.AI's agents add it).
pub const SSHD_PORT: u16 = 2200;

/// The launcher's apps: the image's service ports, the built-in SSH/SFTP daemon and the
/// built-in web terminal.
pub fn apps(label: &str) -> Vec<ServicePort> {
    let mut out = parse_service_ports(label);
    if !out.iter().any(|p| p.name == "sshd") {
        out.push(ServicePort {
            name: "sshd".into(),
            protocol: "tcp".into(),
            container_port: Some(SSHD_PORT),
        });
    }
    out.push(ServicePort {
        name: "terminal".into(),
        protocol: "pty".into(),
        container_port: None,
    });
    out
}

/// Container ports to publish for a kernel (the image's and the SSH daemon's).
pub fn container_ports(label: &str) -> Vec<u16> {
    let mut ports: Vec<u16> = apps(label)
        .into_iter()
        .filter_map(|p| p.container_port)
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// A cluster session's SSH setup: its own keypair, shared by its containers, and its
/// hostnames.
pub struct ClusterSsh {
    pub public: String,
    pub private: String,
    pub hosts: Vec<String>,
}

pub fn cluster_ssh(session_name: &str, hosts: Vec<String>) -> ApiResult<ClusterSsh> {
    let (public, private) = crate::auth::ssh::generate(&format!("cluster@{session_name}"))?;
    Ok(ClusterSsh {
        public,
        private,
        hosts,
    })
}

/// How a cluster session's containers reach each other over SSH (`ssh sub1`): port 2200, the
/// cluster key, no host-key prompts — for the session's own hostnames only (a pattern such as
/// `sub*` would also match outside hosts and switch their host-key checks off).
fn cluster_ssh_config(hosts: &[String]) -> String {
    format!(
        "Host {}\n  Port 2200\n  User work\n  IdentityFile /home/config/ssh/id_cluster\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n",
        hosts.join(" ")
    )
}

/// Gives a fresh container its SSH setup and starts the daemon: a new keypair for the
/// session (private key at `/home/work/id_container`, public key authorized), a host key,
/// and `sshd` on port 2200 as `work`. A `.ssh` automount folder's `authorized_keys` is
/// honoured too. In a cluster session, `cluster` (the session's own keypair) is authorized
/// and given to every container with the client settings to use it.
pub async fn install_ssh(
    agent: &crate::agents::Agent,
    container: &str,
    session_name: &str,
    cluster: Option<&ClusterSsh>,
) -> ApiResult<()> {
    let (public, private) = crate::auth::ssh::generate(&format!("work@{session_name}"))?;
    let (_, host_key) = crate::auth::ssh::generate("bai-session-host")?;
    let authorized = match cluster {
        Some(c) => format!("{}\n{}\n", public.trim_end(), c.public.trim_end()),
        None => public.clone(),
    };
    agent
        .put_files(
            container,
            "/home",
            "config",
            &[
                ("authorized_keys", 0o600, authorized.as_bytes()),
                ("ssh_host_ed25519_key", 0o600, host_key.as_bytes()),
            ],
        )
        .await?;
    if let Some(c) = cluster {
        let config = cluster_ssh_config(&c.hosts);
        agent
            .put_files(
                container,
                "/home/config",
                "ssh",
                &[
                    ("id_cluster", 0o600, c.private.as_bytes()),
                    ("id_cluster.pub", 0o644, c.public.as_bytes()),
                ],
            )
            .await?;
        agent
            .put_files(
                container,
                "/etc/ssh",
                "ssh_config.d",
                &[("bai-cluster.conf", 0o644, config.as_bytes())],
            )
            .await?;
    }
    agent
        .put_files(
            container,
            "/home/work",
            "",
            &[("id_container", 0o600, private.as_bytes())],
        )
        .await?;
    agent
        .spawn_detached(
            container,
            [
                "/usr/sbin/sshd",
                "-D",
                "-e",
                "-p",
                &SSHD_PORT.to_string(),
                "-h",
                "/home/config/ssh_host_ed25519_key",
                "-o",
                "AuthorizedKeysFile=.ssh/authorized_keys /home/config/authorized_keys",
                "-o",
                "PidFile=none",
                // Automount folders are owned by the server's user, not `work`.
                "-o",
                "StrictModes=no",
                "-o",
                "UsePAM=no",
                "-o",
                "PasswordAuthentication=no",
                "-o",
                "KbdInteractiveAuthentication=no",
            ]
            .iter()
            .map(|a| a.to_string())
            .collect(),
        )
        .await?;
    Ok(())
}

/// The session's SSH private key (`/home/work/id_container`), for the console's download.
pub async fn ssh_private_key(
    state: &impl Runtime,
    principal: &Principal,
    id: Uuid,
) -> ApiResult<String> {
    let (_, k) = owned_running(state, principal, id).await?;
    state.started_apps().ssh_setup_done(id).await;
    let (agent, container) = super::kernels::container_of(state, &k).await?;
    // Several managers: the setup may be going on through the manager that launched the
    // session, unseen here; the key is read again until it is there (bounded).
    let deadline = tokio::time::Instant::now() + SSH_SETUP_WAIT;
    let data = loop {
        match agent
            .read_file(&container, "/home/work/id_container", 64 * 1024)
            .await
        {
            Ok(data) => break data,
            // Only a key not there yet is waited for; any other failure answers at once.
            Err(bai_engine::EngineError::NotFound { .. })
                if state.cluster().is_shared() && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    String::from_utf8(data).map_err(|_| ApiError::bad_request("id_container is not a key file"))
}

fn route_stmt(sql: &str, values: Vec<sea_orm::Value>) -> sea_orm::Statement {
    sea_orm::Statement::from_sql_and_values(sea_orm::DbBackend::Postgres, sql, values)
}

/// What is known of an app started in a session through this manager or, with several
/// managers, through any (then without a port here: [`StartedApps::entry`] has it once this
/// manager serves the app too).
///
/// With several managers the visibility is always the database's: an app made private
/// through one manager is private on every manager's port at once.
pub async fn known(state: &impl Runtime, session: Uuid, app: &str) -> ApiResult<Option<AppEntry>> {
    let here = state.started_apps().entry(session, app);
    if !state.cluster().is_shared() {
        return Ok(here);
    }
    use sea_orm::ConnectionTrait as _;
    let row = state
        .read()
        .query_one(route_stmt(
            "SELECT token, public FROM app_routes WHERE session_id = $1 AND app = $2",
            vec![session.into(), app.to_string().into()],
        ))
        .await?;
    Ok(match row {
        Some(r) => Some(AppEntry {
            token: r.try_get("", "token")?,
            public: r.try_get("", "public")?,
            pool_port: here.as_ref().and_then(|e| e.pool_port),
            listener: here.and_then(|e| e.listener),
        }),
        // Not (or no longer) recorded: the session ended; nothing is served.
        None => None,
    })
}

/// Several managers: records an app's token and visibility where every manager finds it.
/// An app already recorded keeps its first token (two managers starting it at once agree on
/// one); the returned token is the one in force.
pub async fn share_route(
    state: &impl Runtime,
    session: Uuid,
    app: &str,
    token: &str,
    public: bool,
) -> ApiResult<String> {
    if !state.cluster().is_shared() {
        return Ok(token.to_string());
    }
    use sea_orm::ConnectionTrait as _;
    let row = state
        .db()
        .query_one(route_stmt(
            "INSERT INTO app_routes (session_id, app, token, public) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (session_id, app) DO UPDATE SET public = EXCLUDED.public \
             RETURNING token",
            vec![
                session.into(),
                app.to_string().into(),
                token.to_string().into(),
                public.into(),
            ],
        ))
        .await?
        .ok_or_else(|| ApiError::internal("recording an app", "no row returned"))?;
    Ok(row.try_get("", "token")?)
}

/// The leader's cleanup: routes of sessions no longer running.
pub async fn expire_routes(state: &impl Runtime) -> ApiResult<()> {
    use sea_orm::ConnectionTrait as _;
    state
        .db()
        .execute(route_stmt(
            "DELETE FROM app_routes WHERE session_id NOT IN \
             (SELECT id FROM sessions WHERE status = 'RUNNING')",
            vec![],
        ))
        .await?;
    Ok(())
}

/// Where the server reaches `port` of the session's container (its address on the session
/// network), cached after the first lookup.
pub async fn upstream(
    state: &impl Runtime,
    session: Uuid,
    k: &entity::kernels::Model,
    port: u16,
) -> ApiResult<Option<std::net::SocketAddr>> {
    if let Some(p) = state.started_apps().port(session, port) {
        return Ok(Some(p));
    }
    let (agent, container) = super::kernels::container_of(state, k).await?;
    let found = agent
        .address(&container)
        .await
        .map(|ip| std::net::SocketAddr::new(ip, port));
    if let Some(p) = found {
        state.started_apps().remember_port(session, port, p);
    }
    Ok(found)
}

pub async fn owned_running(
    state: &impl Runtime,
    principal: &Principal,
    id: Uuid,
) -> ApiResult<(entity::sessions::Model, entity::kernels::Model)> {
    let caller = principal.caller()?;
    // Ownership first: a stranger learns nothing (not even the status) about the session.
    let s = super::access::find_own(state, caller, id).await?;
    running(state, s).await
}

/// `s` (already authorized) with its main kernel, when it is running.
pub async fn running(
    state: &impl Runtime,
    s: entity::sessions::Model,
) -> ApiResult<(entity::sessions::Model, entity::kernels::Model)> {
    let id = s.id;
    if s.status != entity::enums::SessionStatus::Running {
        return Err(ApiError::bad_request(format!(
            "Session '{}' is not running ({})",
            s.name, s.status
        )));
    }
    let k = super::kernels::main_kernel(state.db(), id).await?;
    Ok((s, k))
}

/// How to start `app` in the kernel's container: the image's service definition
/// (`/etc/backend.ai/service-defs/<app>.json`, read from the container), else — for images
/// without one — bai's built-in Jupyter Notebook. None for an app that needs no process.
pub async fn launch_of(
    state: &impl Runtime,
    k: &entity::kernels::Model,
    app: &str,
    base_url: &str,
    token: &str,
) -> ApiResult<Option<defs::Launch>> {
    let (agent, container) = crate::sessions::kernels::container_of(state, k).await?;
    let path = format!("{}/{app}.json", defs::DIR);
    let raw = match agent.read_file(&container, &path, defs::MAX_BYTES).await {
        Ok(raw) => Some(raw),
        Err(bai_engine::EngineError::NotFound { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let Some(raw) = raw else {
        if app == "jupyter" {
            return Ok(Some(defs::Launch {
                mkdirs: Vec::new(),
                argv: vec![
                    "jupyter-notebook".into(),
                    "--no-browser".into(),
                    "--ip=0.0.0.0".into(),
                    format!("--port={}", port_of(k, app)?),
                    format!("--NotebookApp.token={token}"),
                    format!("--NotebookApp.base_url={base_url}"),
                    "--NotebookApp.allow_remote_access=True".into(),
                    "--notebook-dir=/home/work".into(),
                ],
                env: Vec::new(),
            }));
        }
        return Err(ApiError::bad_request(format!(
            "The image declares '{app}' but has no service definition for it ({path}); bai starts only apps an image defines (and Jupyter Notebook)"
        )));
    };
    let def = defs::ServiceDef::parse(app, &raw)?;
    let image = crate::images::resolve(state.db(), &k.image, Some(&k.architecture)).await?;
    let runtime_path = image
        .labels
        .get("ai.backend.runtime-path")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_string();
    let ports = parse_service_ports(k.service_ports.as_str().unwrap_or_default())
        .into_iter()
        .filter(|p| p.name == app)
        .filter_map(|p| p.container_port)
        .collect();
    def.launch(
        app,
        &defs::Variables {
            ports,
            runtime_path,
            base_url: base_url.to_string(),
            token: token.to_string(),
        },
    )
}

pub fn app_of(k: &entity::kernels::Model, app: &str) -> ApiResult<ServicePort> {
    apps(k.service_ports.as_str().unwrap_or_default())
        .into_iter()
        .find(|p| p.name == app && p.container_port.is_some())
        .ok_or_else(|| ApiError::not_found("app", app))
}

pub fn port_of(k: &entity::kernels::Model, app: &str) -> ApiResult<u16> {
    app_of(k, app)?
        .container_port
        .ok_or_else(|| ApiError::not_found("app", app))
}

/// `"30000-30999"` → the inclusive range.
pub fn parse_port_range(s: &str) -> Option<(u16, u16)> {
    let (a, b) = s.trim().split_once('-')?;
    let (a, b): (u16, u16) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
    (a > 0 && a <= b).then_some((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_ports() {
        let hostile = parse_service_ports(
            "../../home/work/x:http:1,a/b:http:2,.hidden:http:3,-x:http:4,ok-app_2:http:5",
        );
        assert_eq!(
            hostile.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["ok-app_2"]
        );
        assert!(!app_name_ok(&"a".repeat(65)));
        let p = parse_service_ports("jupyter:http:8080,ssh:tcp:2200,bad,x:http:notaport");
        assert_eq!(p.len(), 2);
        assert_eq!(
            p[0],
            ServicePort {
                name: "jupyter".into(),
                protocol: "http".into(),
                container_port: Some(8080)
            }
        );
        assert_eq!(container_ports("jupyter:http:8080"), vec![2200, 8080]);
        assert_eq!(container_ports("sshd:tcp:2200"), vec![2200]);
        assert_eq!(apps("").last().unwrap().name, "terminal");
    }
}
