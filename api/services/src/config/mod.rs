//! Configuration: one typed struct. Every setting is declared once below with its TOML key,
//! environment variable and default. Precedence: defaults < TOML file (`--config` /
//! `BAI_CONFIG`) < environment < command-line flags.
pub mod mail;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// A value that can be read from an environment variable.
trait EnvValue: Sized {
    fn from_env(raw: &str) -> anyhow::Result<Self>;
}

macro_rules! env_value_via_fromstr {
    ($($t:ty),*) => {$(
        impl EnvValue for $t {
            fn from_env(raw: &str) -> anyhow::Result<Self> {
                raw.trim().parse::<$t>().map_err(|e| anyhow::anyhow!("{e}"))
            }
        }
    )*};
}
env_value_via_fromstr!(u16, u32, u64, usize, SocketAddr, PathBuf, String);

impl EnvValue for bool {
    fn from_env(raw: &str) -> anyhow::Result<Self> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(true),
            "0" | "false" | "no" | "off" | "" => Ok(false),
            other => anyhow::bail!("expected true/false, got '{other}'"),
        }
    }
}

/// Comma-separated lists.
impl EnvValue for Vec<String> {
    fn from_env(raw: &str) -> anyhow::Result<Self> {
        Ok(raw
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect())
    }
}

/// A container engine on another host (`[[engines]]` in the TOML file; `BAI_ENGINES` holds
/// the same list as JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    /// `tcp://host:2376` (or `unix:///path`).
    pub endpoint: String,
    /// Docker's `--tlsverify` scheme: the CA the engine's certificate must chain to (and the
    /// only one trusted for it), and the client certificate and key bai presents.
    pub tls_ca: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Plain TCP without TLS: anyone who reaches the port is root on that host. Refused
    /// unless set here, and logged as a warning each start.
    #[serde(default)]
    pub insecure: bool,
    /// The resource group this agent joins (default: `agent_scaling_group`).
    pub scaling_group: Option<String>,
    /// The subnet of this host's session network (`10.233.1.0/24`), routed from the manager
    /// through the host (required: the manager reaches the host's sessions there).
    pub session_subnet: Option<String>,
    /// The manager's address as the host sees it, when a NAT is in between (default: the
    /// address this process sends from towards the engine).
    pub manager_address: Option<std::net::IpAddr>,
    /// Where this host sees each storage host (`name = "/mnt/nfs/bai"`): the same export
    /// mounted on every node. A folder on a storage host not listed here is out of reach
    /// for this agent, and the scheduler places its sessions elsewhere.
    #[serde(default)]
    pub storage: std::collections::BTreeMap<String, PathBuf>,
}

/// One engine as the agents start it: where, in which group, its host's network, and where
/// it sees each storage host.
#[derive(Debug, Clone)]
pub struct PlannedEngine {
    pub endpoint: bai_engine::docker::Endpoint,
    pub scaling_group: String,
    pub network: bai_engine::network::HostNetwork,
    /// Storage host name → path on that host; None: this host's own paths (the local engine
    /// sees every storage host where the manager does).
    pub storage: Option<std::collections::BTreeMap<String, PathBuf>>,
}

/// `a.b.c.d/n` (IPv4) or an IPv6 prefix: a subnet as Docker takes it.
fn check_subnet(subnet: &str) -> anyhow::Result<()> {
    let (ip, len) = subnet
        .split_once('/')
        .with_context(|| format!("session_subnet {subnet}: a subnet is address/prefix"))?;
    let ip: std::net::IpAddr = ip
        .parse()
        .with_context(|| format!("session_subnet {subnet}: not an address"))?;
    let len: u8 = len
        .parse()
        .with_context(|| format!("session_subnet {subnet}: not a prefix length"))?;
    let max = if ip.is_ipv4() { 30 } else { 126 };
    anyhow::ensure!(
        (8..=max).contains(&len),
        "session_subnet {subnet}: the prefix length must be 8 to {max}"
    );
    Ok(())
}

/// The host part of `tcp://host:port`.
fn endpoint_host(url: &str) -> String {
    let rest = url.trim_start_matches("tcp://");
    let host = rest.rsplit_once(':').map_or(rest, |(h, _)| h);
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_string()
}

impl EngineConfig {
    /// The engine port's endpoint; TLS needs all three files.
    pub fn endpoint(&self) -> anyhow::Result<bai_engine::docker::Endpoint> {
        let tls = match (&self.tls_ca, &self.tls_cert, &self.tls_key) {
            (Some(ca), Some(cert), Some(key)) => Some(bai_engine::docker::TlsFiles {
                ca: ca.clone(),
                cert: cert.clone(),
                key: key.clone(),
            }),
            (None, None, None) => None,
            _ => anyhow::bail!(
                "{}: tls_ca, tls_cert and tls_key go together",
                self.endpoint
            ),
        };
        let e = bai_engine::docker::Endpoint {
            url: self.endpoint.clone(),
            tls,
            insecure: self.insecure,
        };
        e.check()?;
        Ok(e)
    }
}

impl EnvValue for Vec<EngineConfig> {
    fn from_env(raw: &str) -> anyhow::Result<Self> {
        if raw.trim().is_empty() {
            return Ok(Vec::new());
        }
        serde_json::from_str(raw).map_err(|e| anyhow::anyhow!("a JSON list of engines: {e}"))
    }
}

impl<T: EnvValue> EnvValue for Option<T> {
    fn from_env(raw: &str) -> anyhow::Result<Self> {
        if raw.trim().is_empty() {
            Ok(None)
        } else {
            T::from_env(raw).map(Some)
        }
    }
}

macro_rules! settings {
    ($( $(#[doc = $doc:literal])* $field:ident : $ty:ty = $default:expr, env = $env:literal; )*) => {
        #[derive(Debug, Clone, Serialize, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct Config {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl Default for Config {
            fn default() -> Self {
                Self { $( $field: $default, )* }
            }
        }

        impl Config {
            /// `(TOML key, environment variable, documentation)` of every setting, in declaration
            /// order: the book's configuration table and `deploy/bai.toml` are made from it.
            pub const SETTINGS: &'static [(&'static str, &'static str, &'static str)] =
                &[$( (stringify!($field), $env, concat!($($doc, "\n",)*)), )*];

            fn apply_env(&mut self, get: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<()> {
                $(
                    if let Some(raw) = get($env) {
                        self.$field = <$ty as EnvValue>::from_env(&raw)
                            .with_context(|| format!("invalid value for {}", $env))?;
                    }
                )*
                Ok(())
            }
        }
    };
}

settings! {
    /// Address the HTTP server listens on.
    listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 8090)), env = "BAI_LISTEN";
    /// Directory for the SQLite database, storage folders and other state.
    data_dir: PathBuf = PathBuf::from("data"), env = "BAI_DATA_DIR";
    /// PostgreSQL URL (`postgres://user:pass@host/db`); unset = SQLite file in the data directory.
    database_url: Option<String> = None, env = "DATABASE_URL";
    /// Directory holding the built web console (index.html, web.js, web_bg.wasm).
    web_dir: PathBuf = PathBuf::from("web/dist"), env = "BAI_WEB_DIR";
    /// Log filter in `tracing` syntax.
    log: String = "info,sqlx=warn,sea_orm=warn".to_string(), env = "BAI_LOG";
    /// Address of a listener that serves only `/metrics` (Prometheus), without a token.
    metrics_listen: Option<SocketAddr> = None, env = "BAI_METRICS_LISTEN";
    /// When set, `/metrics` is also served on the main port to `Authorization: Bearer <token>`.
    metrics_token: Option<String> = None, env = "BAI_METRICS_TOKEN";
    /// Seconds a client has to send a request's head: from the connection's first byte, and
    /// again between keep-alive requests (half-sent headers and idle connections are dropped).
    header_read_timeout_secs: u64 = 20, env = "BAI_HEADER_READ_TIMEOUT_SECS";
    /// Connections one client address may hold open on each listener (0 = no cap). Behind a
    /// reverse proxy every client shares the proxy's address: raise it there.
    max_connections_per_addr: usize = 512, env = "BAI_MAX_CONNECTIONS_PER_ADDR";
    /// HTTP/2 streams one connection may run at once.
    http2_max_concurrent_streams: u32 = 128, env = "BAI_HTTP2_MAX_CONCURRENT_STREAMS";
    /// Seconds in-flight requests get after a shutdown signal before the rest is cut.
    shutdown_grace_secs: u64 = 10, env = "BAI_SHUTDOWN_GRACE_SECS";
    /// Log lines as `text` or `json` (one JSON object per line, for log shippers).
    log_format: String = "text".to_string(), env = "BAI_LOG_FORMAT";
    /// Email of the first superadmin, created on first start with an empty database.
    admin_email: String = "admin@bai.local".to_string(), env = "BAI_ADMIN_EMAIL";
    /// Password of the first superadmin; unset = a random one-time password printed once.
    admin_password: Option<String> = None, env = "BAI_ADMIN_PASSWORD";
    /// Whether anonymous visitors may sign up (off by default).
    signup_enabled: bool = false, env = "BAI_SIGNUP_ENABLED";
    /// When set, signup requires this invitation token.
    signup_invitation_token: Option<String> = None, env = "BAI_SIGNUP_INVITATION_TOKEN";
    /// Whether the password rule of sign-up and of users' own changes (8 characters with a
    /// letter, a digit and a special character) also binds the passwords administrators set
    /// (`create_user`, `modify_user`). Off: as Backend.AI's manager, an administrator's
    /// password need only be non-empty and at most 256 bytes.
    password_rule_for_admins: bool = false, env = "BAI_PASSWORD_RULE_FOR_ADMINS";
    /// The address users reach bai at (`https://bai.example.org`), for the links in e-mails
    /// (never taken from a request's Host header). Required with `smtp_host`.
    public_url: Option<String> = None, env = "BAI_PUBLIC_URL";
    /// SMTP server for e-mail (password reset, signup verification); unset = no e-mail, and
    /// both features are off.
    smtp_host: Option<String> = None, env = "BAI_SMTP_HOST";
    /// SMTP port (587 for `starttls`, 465 for `tls`, 25 for `none`).
    smtp_port: u16 = 587, env = "BAI_SMTP_PORT";
    /// SMTP transport security: `starttls` (required, never downgraded), `tls` (implicit TLS
    /// from the first byte) or `none` (plain; only for a relay on this host).
    smtp_tls: String = "starttls".to_string(), env = "BAI_SMTP_TLS";
    /// SMTP login (AUTH PLAIN/LOGIN, only over TLS); unset = no authentication.
    smtp_username: Option<String> = None, env = "BAI_SMTP_USERNAME";
    /// Password of `smtp_username`.
    smtp_password: Option<String> = None, env = "BAI_SMTP_PASSWORD";
    /// PEM file of extra certificate authorities trusted for the SMTP server, besides the
    /// system's.
    smtp_ca_file: Option<PathBuf> = None, env = "BAI_SMTP_CA_FILE";
    /// Sender of bai's e-mails (`bai <noreply@example.org>`).
    mail_from: String = "bai <noreply@bai.local>".to_string(), env = "BAI_MAIL_FROM";
    /// With SMTP configured: signups verify their e-mail address by an e-mailed link before
    /// their first login.
    signup_email_verification: bool = true, env = "BAI_SIGNUP_EMAIL_VERIFICATION";
    /// Seconds a password-reset link stays valid (it works once).
    password_reset_ttl_secs: u64 = 1800, env = "BAI_PASSWORD_RESET_TTL";
    /// Seconds an e-mail verification link stays valid (it works once).
    email_verification_ttl_secs: u64 = 86400, env = "BAI_EMAIL_VERIFICATION_TTL";
    /// E-mail requests (reset or verification links) per hour for one e-mail address, whether
    /// or not an account has it.
    mail_max_per_account_per_hour: u32 = 3, env = "BAI_MAIL_MAX_PER_ACCOUNT_PER_HOUR";
    /// E-mail requests per hour from one client address.
    mail_max_per_addr_per_hour: u32 = 20, env = "BAI_MAIL_MAX_PER_ADDR_PER_HOUR";
    /// Seconds between usage samples for Statistics (1 to 60, dividing a minute; 0 = none
    /// recorded). Every running session on this process's engines is measured each time.
    usage_sample_secs: u64 = 60, env = "BAI_USAGE_SAMPLE_SECS";
    /// Lifetime of a login session (browser cookie or bearer token), in seconds.
    login_session_ttl_secs: u64 = 12 * 3600, env = "BAI_LOGIN_SESSION_TTL";
    /// Mark the session cookie `Secure` (set when served over HTTPS; implied by `tls_cert`).
    cookie_secure: bool = false, env = "BAI_COOKIE_SECURE";
    /// PEM certificate chain: with `tls_key`, the server speaks HTTPS itself (HTTP/2 and
    /// HTTP/1.1), app ports included; login cookies become `Secure` and `__Host-`.
    tls_cert: Option<PathBuf> = None, env = "BAI_TLS_CERT";
    /// PEM file of extra certificate authorities trusted for HTTPS registries (an internal
    /// Harbor, say), besides the system's.
    registry_ca_file: Option<PathBuf> = None, env = "BAI_REGISTRY_CA_FILE";
    /// PEM private key of `tls_cert`.
    tls_key: Option<PathBuf> = None, env = "BAI_TLS_KEY";
    /// With TLS: a plain-HTTP address that only redirects (308) to the HTTPS listener.
    tls_redirect_listen: Option<SocketAddr> = None, env = "BAI_TLS_REDIRECT_LISTEN";
    /// With TLS: `Strict-Transport-Security` max-age in seconds (0 = no header).
    hsts_max_age_secs: u64 = 31_536_000, env = "BAI_HSTS_MAX_AGE";
    /// Accepted clock skew of HMAC-signed requests, in seconds (Backend.AI: 15 minutes).
    hmac_clock_skew_secs: u64 = 15 * 60, env = "BAI_HMAC_CLOCK_SKEW";
    /// Requests per 15 minutes for keypairs created for users (seeds: 1000).
    default_rate_limit: u32 = 1000, env = "BAI_DEFAULT_RATE_LIMIT";
    /// Requests per 15 minutes for keypairs of admins.
    admin_rate_limit: u32 = 30000, env = "BAI_ADMIN_RATE_LIMIT";
    /// Failed logins (or password checks) of one account before it is blocked for
    /// `login_block_secs` (Backend.AI's `login_allowed_fail_count`).
    login_max_failures_per_account: u32 = 10, env = "BAI_LOGIN_MAX_FAILURES_PER_ACCOUNT";
    /// Failed logins from one client address before it is blocked for `login_block_secs`.
    login_max_failures_per_addr: u32 = 30, env = "BAI_LOGIN_MAX_FAILURES_PER_ADDR";
    /// Login attempts from one client address running at the same time.
    login_max_concurrent_per_addr: u32 = 4, env = "BAI_LOGIN_MAX_CONCURRENT_PER_ADDR";
    /// How long failures are remembered and a block lasts, in seconds (Backend.AI's
    /// `login_block_time`).
    login_block_secs: u64 = 1200, env = "BAI_LOGIN_BLOCK_SECS";
    /// Live connections open at once per user: GraphQL WebSockets (per address for anonymous
    /// ones) and Backend.AI's event streams together.
    ws_max_connections_per_user: usize = 16, env = "BAI_WS_MAX_CONNECTIONS_PER_USER";
    /// Operations (subscriptions included) running at once on one GraphQL WebSocket.
    ws_max_operations_per_connection: usize = 32, env = "BAI_WS_MAX_OPERATIONS_PER_CONNECTION";
    /// GraphQL: maximum selection depth.
    graphql_max_depth: usize = 16, env = "BAI_GRAPHQL_MAX_DEPTH";
    /// GraphQL: maximum query complexity (one point per field, lists count 20).
    graphql_max_complexity: usize = 5000, env = "BAI_GRAPHQL_MAX_COMPLEXITY";
    /// GraphQL: maximum number of aliased fields in one document.
    graphql_max_aliases: usize = 30, env = "BAI_GRAPHQL_MAX_ALIASES";
    /// GraphQL: maximum number of fields one document selects, fragments expanded.
    graphql_max_fields: usize = 2000, env = "BAI_GRAPHQL_MAX_FIELDS";
    /// Maximum request body size for GraphQL and JSON endpoints, in bytes.
    max_body_bytes: usize = 1024 * 1024, env = "BAI_MAX_BODY_BYTES";
    /// Container engines on this host, one agent each (`unix:///var/run/docker.sock`). Engines
    /// on other hosts go in `engines` (plain `tcp://` here is refused).
    docker_endpoints: Vec<String> = vec!["unix:///var/run/docker.sock".to_string()], env = "BAI_DOCKER_ENDPOINTS";
    /// Container engines on other hosts, over mutual TLS (`[[engines]]`: endpoint, tls_ca,
    /// tls_cert, tls_key, insecure, scaling_group, session_subnet, manager_address, storage).
    engines: Vec<EngineConfig> = Vec::new(), env = "BAI_ENGINES";
    /// Lablup's consoles (their web server's origin, e.g. `https://console.example.org`) that
    /// may open apps through bai with Backend.AI's app-proxy protocol (their `wsproxy` URL set
    /// to bai's address): CORS for them, and in SESSION mode their web server is asked whose
    /// login it is. Empty: the protocol is off.
    app_proxy_origins: Vec<String> = Vec::new(), env = "BAI_APP_PROXY_ORIGINS";
    /// Seconds an engine call may take to answer before the engine counts as unreachable (a
    /// heartbeat's ping has its own bound: min(`heartbeat_secs`, 10 s)).
    engine_timeout_secs: u64 = 30, env = "BAI_ENGINE_TIMEOUT_SECS";
    /// A static busybox (Debian's busybox-static): bai makes its probe image of it on each
    /// remote engine, to check and install that host's firewall rules.
    probe_busybox: PathBuf = PathBuf::from("/bin/busybox"), env = "BAI_PROBE_BUSYBOX";
    /// Heartbeats an engine may miss in a row before its agent is LOST.
    agent_lost_after_misses: u32 = 3, env = "BAI_AGENT_LOST_AFTER_MISSES";
    /// Region reported by the agents.
    agent_region: String = "local".to_string(), env = "BAI_AGENT_REGION";
    /// Resource group the agents join.
    agent_scaling_group: String = "default".to_string(), env = "BAI_AGENT_SCALING_GROUP";
    /// CPU cores kept back from sessions on each agent.
    agent_reserved_cpu: u32 = 0, env = "BAI_AGENT_RESERVED_CPU";
    /// CPU cores each agent offers per core it has (after `agent_reserved_cpu`), 1 to 8:
    /// 1 offers what the host has; 2 lets sessions of twice as many cores share them
    /// (overcommit: they then compete for CPU time; one container is never given more than
    /// the host's cores). For small test hosts and light interactive use, never for a site
    /// that promises its users their cores.
    agent_cpu_overcommit: u32 = 1, env = "BAI_AGENT_CPU_OVERCOMMIT";
    /// Memory kept back from sessions on each agent (e.g. `1g`).
    agent_reserved_mem: String = "1g".to_string(), env = "BAI_AGENT_RESERVED_MEM";
    /// `cuda.shares` offered per physical GPU (fractional GPU).
    cuda_shares_per_gpu: u32 = 1, env = "BAI_CUDA_SHARES_PER_GPU";
    /// Fractional GPUs enforced through NVIDIA MPS: the directory of the MPS control daemons
    /// `scripts/mps.sh` starts, one per device in `<UUID>/` (its pipes in `pipe/`, its
    /// `/dev/shm` in `shm/`). Empty: fractions are counted, not enforced. Set but a daemon not
    /// answering: only whole GPUs are offered.
    gpu_mps_dir: String = String::new(), env = "BAI_GPU_MPS_DIR";
    /// Seconds between agent heartbeats (see `agent_lost_after_misses`).
    heartbeat_secs: u64 = 5, env = "BAI_HEARTBEAT_SECS";
    /// Several managers (PostgreSQL only): the address other processes and operators know this
    /// `bai serve` by (default: `listen`), shown in `/health/readyz` and the `managers` table.
    advertise_addr: Option<String> = None, env = "BAI_ADVERTISE_ADDR";
    /// Several managers: seconds a lease (the leader's, an engine's) and a process's liveness
    /// last without renewal; renewed every third of it. Another process takes over a dead
    /// one's leases within this time (plus one renewal).
    lease_secs: u64 = 5, env = "BAI_LEASE_SECS";
    /// Seconds between the scheduler's safety ticks (it also wakes on every change).
    scheduler_tick_secs: u64 = 10, env = "BAI_SCHEDULER_TICK_SECS";
    /// Isolate sessions: one bridge network per installation with inter-container traffic
    /// off, plus host firewall rules (iptables, as root) against the host and link-local
    /// addresses. An engine where this cannot be set up runs no sessions.
    network_isolation: bool = true, env = "BAI_NETWORK_ISOLATION";
    /// Docker log rotation per container: the size of one log file (two are kept).
    container_log_max_size: String = "10m".to_string(), env = "BAI_CONTAINER_LOG_MAX_SIZE";
    /// Size limit of a container's writable layer (`storage_opt size`, e.g. `20g`); needs a
    /// storage driver with quotas (overlay2 on xfs with pquota, btrfs, zfs). Unset: none.
    container_disk_size: Option<String> = None, env = "BAI_CONTAINER_DISK_SIZE";
    /// Process limit inside each container.
    container_pids_limit: u32 = 4096, env = "BAI_CONTAINER_PIDS_LIMIT";
    /// Storage hosts for folders: `name=/absolute/path`, or a bare name for a directory under
    /// `<data_dir>/vfolders`.
    storage_hosts: Vec<String> = vec!["local".to_string()], env = "BAI_STORAGE_HOSTS";
    /// Ports for apps served on a port of their own (SSH/SFTP, "try preferred port", public
    /// apps), bound on the listen address: `first-last`.
    app_port_pool: String = "30000-30999".to_string(), env = "BAI_APP_PORT_POOL";
    /// Ports for model-serving endpoints, one each (its URL), bound on the listen address by
    /// every manager that can: `first-last`.
    serving_port_pool: String = "31000-31999".to_string(), env = "BAI_SERVING_PORT_POOL";
    /// The host name in endpoint URLs (default: `advertise_addr`'s host, else the listen
    /// address, else `localhost`).
    serving_host: Option<String> = None, env = "BAI_SERVING_HOST";
    /// The largest request body an endpoint passes to its model.
    serving_max_body_bytes: u64 = 64 * 1024 * 1024, env = "BAI_SERVING_MAX_BODY_BYTES";
    /// Registry name given to local images without one.
    local_registry_name: String = "bai.local".to_string(), env = "BAI_LOCAL_REGISTRY_NAME";
}

impl Config {
    /// The example configuration (`deploy/bai.toml`, `bai config-example`): every setting with
    /// its documentation, environment variable and default, commented out, so the file as it
    /// is changes nothing.
    pub fn example_toml() -> String {
        let defaults = toml::Value::try_from(Config::default())
            .unwrap_or(toml::Value::Table(toml::map::Map::new()));
        let mut out = String::from(
            "# bai's configuration: every setting, its environment variable and its default.\n\
             # Uncomment what you change. The environment overrides this file.\n\
             # Generated by `bai config-example` from api/services/src/config.rs.\n",
        );
        for (key, env, doc) in Self::SETTINGS {
            out.push('\n');
            for line in doc.lines() {
                out.push_str(format!("# {}", line.trim()).trim_end());
                out.push('\n');
            }
            out.push_str(&format!("# Environment: {env}\n"));
            match defaults.get(key) {
                Some(v) => out.push_str(&format!("# {key} = {v}\n")),
                None => out.push_str(&format!("# {key} = \"…\"   (unset by default)\n")),
            }
        }
        out
    }

    /// Checks a configuration file as `bai serve` would read it (the environment left out):
    /// what is wrong, with its line and key.
    /// Also answers how many settings the file gives.
    pub fn check_file(path: &Path) -> anyhow::Result<(Self, usize)> {
        let config = Self::load_with(Some(path), &|_| None)?;
        let given = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.parse::<toml::Table>().ok())
            .map_or(0, |t| t.len());
        Ok((config, given))
    }

    /// Loads the TOML file (if any) and then the process environment.
    pub fn load(file: Option<&Path>) -> anyhow::Result<Self> {
        Self::load_with(file, &|k| std::env::var(k).ok())
    }

    pub fn load_with(
        file: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Self> {
        let mut cfg = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading config file {}", path.display()))?;
                toml::from_str(&text)
                    .with_context(|| format!("parsing config file {}", path.display()))?
            }
            None => Config::default(),
        };
        cfg.apply_env(env)?;
        cfg.all_engines()?;
        cfg.mail()?;
        anyhow::ensure!(
            cfg.usage_sample_secs == 0
                || (cfg.usage_sample_secs <= 60 && 60 % cfg.usage_sample_secs == 0),
            "usage_sample_secs must divide a minute (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 or 60), or be 0 for no statistics"
        );
        Ok(cfg)
    }

    /// Every configured engine: the local ones, then those on other hosts, each with the
    /// resource group its agent joins.
    pub fn all_engines(&self) -> anyhow::Result<Vec<PlannedEngine>> {
        // What sessions must never reach: every remote host's engine and session network
        // (each host's own excepted).
        anyhow::ensure!(
            (1..=8).contains(&self.agent_cpu_overcommit),
            "agent_cpu_overcommit = {}: cores offered per core the host has, 1 (none) to 8",
            self.agent_cpu_overcommit
        );
        let mut remote_targets: Vec<(usize, String)> = Vec::new();
        for (i, c) in self.engines.iter().enumerate() {
            c.endpoint()?;
            let subnet = c.session_subnet.as_deref().with_context(|| {
                format!(
                    "{}: session_subnet is required (the subnet of that host's session network, routed from the manager through the host)",
                    c.endpoint
                )
            })?;
            check_subnet(subnet)?;
            anyhow::ensure!(
                self.network_isolation,
                "{}: remote engines need network_isolation (their sessions are reached through the isolated session network)",
                c.endpoint
            );
            remote_targets.push((i, endpoint_host(&c.endpoint)));
            remote_targets.push((i, subnet.to_string()));
        }
        let forbidden_for = |me: Option<usize>| -> Vec<String> {
            remote_targets
                .iter()
                .filter(|(i, _)| Some(*i) != me)
                .map(|(_, t)| t.clone())
                .collect()
        };
        let mut out = Vec::new();
        for url in &self.docker_endpoints {
            let e = bai_engine::docker::Endpoint::plain(url);
            e.check()?;
            out.push(PlannedEngine {
                endpoint: e,
                scaling_group: self.agent_scaling_group.clone(),
                network: bai_engine::network::HostNetwork {
                    subnet: None,
                    manager: None,
                    forbidden: forbidden_for(None),
                    busybox: self.probe_busybox.clone(),
                },
                storage: None,
            });
        }
        for (i, c) in self.engines.iter().enumerate() {
            out.push(PlannedEngine {
                endpoint: c.endpoint()?,
                scaling_group: c
                    .scaling_group
                    .clone()
                    .unwrap_or_else(|| self.agent_scaling_group.clone()),
                network: bai_engine::network::HostNetwork {
                    subnet: c.session_subnet.clone(),
                    manager: c.manager_address,
                    forbidden: forbidden_for(Some(i)),
                    busybox: self.probe_busybox.clone(),
                },
                storage: Some(c.storage.clone()),
            });
        }
        Ok(out)
    }

    /// The mail settings, checked: None when no SMTP host is configured (no e-mail at all); an error says what is wrong.
    pub fn mail(&self) -> anyhow::Result<Option<mail::Settings>> {
        let cfg = self;
        let Some(host) = cfg.smtp_host.as_deref().map(str::trim) else {
            return Ok(None);
        };
        anyhow::ensure!(
            !host.is_empty() && !host.contains(['/', ':', ' ']),
            "smtp_host {host:?}: a host name or address, without scheme or port (see smtp_port)"
        );
        let security = match cfg.smtp_tls.trim().to_ascii_lowercase().as_str() {
            "starttls" => mail::Security::StartTls,
            "tls" => mail::Security::Tls,
            "none" => mail::Security::None,
            other => anyhow::bail!("smtp_tls {other:?}: expected starttls, tls or none"),
        };
        anyhow::ensure!(cfg.smtp_port != 0, "smtp_port: 0 is not a port");
        let credentials = match (&cfg.smtp_username, &cfg.smtp_password) {
            (Some(u), Some(p)) => Some((u.clone(), p.clone())),
            (None, None) => None,
            _ => anyhow::bail!("smtp_username and smtp_password go together"),
        };
        anyhow::ensure!(
            credentials.is_none() || security != mail::Security::None,
            "smtp_username: credentials are sent only over TLS (smtp_tls = starttls or tls)"
        );
        const WEEK: u64 = 7 * 24 * 3600;
        for (key, secs) in [
            ("password_reset_ttl_secs", cfg.password_reset_ttl_secs),
            (
                "email_verification_ttl_secs",
                cfg.email_verification_ttl_secs,
            ),
        ] {
            anyhow::ensure!(
                (60..=WEEK).contains(&secs),
                "{key} = {secs}: a link lives 60 seconds to 7 days ({WEEK} seconds)"
            );
        }
        let from: lettre::message::Mailbox = cfg
            .mail_from
            .parse()
            .with_context(|| format!("mail_from {:?}: not an e-mail address", cfg.mail_from))?;
        let public_url = cfg
            .public_url
            .as_deref()
            .map(|u| u.trim().trim_end_matches('/').to_string())
            .context("public_url is required with smtp_host: the links in e-mails point there")?;
        let rest = public_url
            .strip_prefix("https://")
            .or_else(|| public_url.strip_prefix("http://"))
            .with_context(|| {
                format!("public_url {public_url:?}: must start with https:// (or http://)")
            })?;
        anyhow::ensure!(
            !rest.is_empty()
                && !rest.contains(['?', '#', ' ', '@', '"', '<', '>', '\\'])
                && !rest.starts_with('/'),
            "public_url {public_url:?}: a scheme, a host and an optional path, nothing else"
        );
        Ok(Some(mail::Settings {
            host: host.to_string(),
            port: cfg.smtp_port,
            security,
            credentials,
            ca_file: cfg.smtp_ca_file.clone(),
            from,
            public_url,
        }))
    }

    /// Whether the database is PostgreSQL (several managers may share it).
    pub fn shares_database(&self) -> bool {
        let url = self.effective_database_url();
        url.starts_with("postgres:") || url.starts_with("postgresql:")
    }

    /// The database URL in effect: `DATABASE_URL`, else an SQLite file in the data directory.
    pub fn effective_database_url(&self) -> String {
        match &self.database_url {
            Some(url) => url.clone(),
            None => format!(
                "sqlite://{}?mode=rwc",
                self.data_dir.join("bai.db").display()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `deploy/bai.toml` is `bai config-example`'s output: it cannot drift from this file.
    #[test]
    fn the_committed_example_configuration_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/bai.toml");
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == Config::example_toml(),
            "deploy/bai.toml is stale: run `cargo run -p bai -- config-example > deploy/bai.toml`"
        );
        // As it is, it is a valid configuration that changes nothing.
        let (cfg, given) = Config::check_file(std::path::Path::new(path)).unwrap();
        assert_eq!(given, 0);
        assert_eq!(cfg.listen, Config::default().listen);
        // Every setting is in it, uncommented it parses to the defaults.
        let uncommented: String = committed
            .lines()
            .filter_map(|l| l.strip_prefix("# "))
            .filter(|l| {
                Config::SETTINGS
                    .iter()
                    .any(|(k, _, _)| l.starts_with(&format!("{k} = ")))
                    && !l.contains("(unset by default)")
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let back: Config = toml::from_str(&uncommented).unwrap();
        assert_eq!(
            toml::to_string(&back).unwrap(),
            toml::to_string(&Config::default()).unwrap()
        );
    }

    #[test]
    fn check_reports_the_line_and_the_key() {
        let dir = std::env::temp_dir().join(format!("bai-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("bad.toml");
        std::fs::write(&file, "listen = \"127.0.0.1:9000\"\n\nlistne = 1\n").unwrap();
        let e = format!("{:#}", Config::check_file(&file).unwrap_err());
        assert!(
            e.contains("line 3") && e.contains("unknown field `listne`"),
            "{e}"
        );
        std::fs::write(&file, "header_read_timeout_secs = \"x\"\n").unwrap();
        let e = format!("{:#}", Config::check_file(&file).unwrap_err());
        assert!(
            e.contains("line 1") && e.contains("header_read_timeout_secs"),
            "{e}"
        );
        std::fs::write(
            &file,
            "listen = \"127.0.0.1:9000\"\nsignup_enabled = true\n",
        )
        .unwrap();
        let (cfg, given) = Config::check_file(&file).unwrap();
        assert_eq!((cfg.listen.port(), given), (9000, 2));
    }

    #[test]
    fn env_overrides_file_and_defaults() {
        let dir = std::env::temp_dir().join(format!("bai-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("bai.toml");
        std::fs::write(&file, "listen = \"0.0.0.0:9000\"\nsignup_enabled = true\n").unwrap();
        let cfg = Config::load_with(Some(&file), &|k| {
            (k == "BAI_SIGNUP_ENABLED").then(|| "false".to_string())
        })
        .unwrap();
        assert_eq!(cfg.listen.port(), 9000);
        assert!(!cfg.signup_enabled);
        assert_eq!(cfg.login_session_ttl_secs, 43200);
        let bad = Config::load_with(None, &|k| (k == "BAI_LISTEN").then(|| "nope".to_string()));
        assert!(format!("{:#}", bad.unwrap_err()).contains("BAI_LISTEN"));
        std::fs::write(&file, "no_such_setting = 1\n").unwrap();
        assert!(Config::load_with(Some(&file), &|_| None).is_err());
    }

    #[test]
    fn cpu_overcommit_is_one_to_eight_cores_per_core() {
        let with = |n: &str| {
            let n = n.to_string();
            Config::load_with(None, &|k| {
                (k == "BAI_AGENT_CPU_OVERCOMMIT").then(|| n.clone())
            })
            .map(|_| ())
            .map_err(|e| format!("{e:#}"))
        };
        assert!(with("1").is_ok());
        assert!(with("8").is_ok());
        let none = with("0").unwrap_err();
        assert!(none.contains("agent_cpu_overcommit = 0"), "{none}");
        assert!(with("9").is_err());
    }

    #[test]
    fn remote_engines_need_tls_or_an_explicit_insecure() {
        let dir = std::env::temp_dir().join(format!("bai-cfg-eng-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("bai.toml");
        let load = |text: &str| {
            std::fs::write(&file, text).unwrap();
            Config::load_with(Some(&file), &|_| None).map_err(|e| format!("{e:#}"))
        };
        let plain = load("[[engines]]\nendpoint = \"tcp://10.0.0.2:2375\"\n").unwrap_err();
        assert!(plain.contains("root on that host"), "{plain}");
        let half = load("[[engines]]\nendpoint = \"tcp://10.0.0.2:2376\"\ntls_ca = \"/ca.pem\"\n")
            .unwrap_err();
        assert!(half.contains("go together"), "{half}");
        let env_plain = Config::load_with(None, &|k| {
            (k == "BAI_DOCKER_ENDPOINTS").then(|| "tcp://10.0.0.2:2375".to_string())
        })
        .map_err(|e| format!("{e:#}"))
        .unwrap_err();
        assert!(env_plain.contains("root on that host"), "{env_plain}");
        let ok = load(
            "[[engines]]\nendpoint = \"tcp://10.0.0.2:2376\"\ntls_ca = \"/ca.pem\"\ntls_cert = \"/c.pem\"\ntls_key = \"/k.pem\"\nscaling_group = \"gpu\"\nsession_subnet = \"10.233.2.0/24\"\n\n[[engines]]\nendpoint = \"tcp://10.0.0.3:2375\"\ninsecure = true\nsession_subnet = \"10.233.3.0/24\"\nstorage = { local = \"/mnt/nfs\" }\n",
        )
        .unwrap();
        let all = ok.all_engines().unwrap();
        assert_eq!(all.len(), 3, "the local engine and two remote ones");
        assert_eq!(all[1].scaling_group, "gpu");
        assert_eq!(all[2].scaling_group, "default");
        // Sessions here reach neither remote host; each remote host's, not the other's.
        assert_eq!(
            all[0].network.forbidden,
            ["10.0.0.2", "10.233.2.0/24", "10.0.0.3", "10.233.3.0/24"]
        );
        assert_eq!(all[1].network.forbidden, ["10.0.0.3", "10.233.3.0/24"]);
        assert_eq!(all[2].network.subnet.as_deref(), Some("10.233.3.0/24"));
        assert_eq!(
            all[2].storage.as_ref().unwrap()["local"],
            PathBuf::from("/mnt/nfs")
        );
        assert!(all[1].storage.as_ref().unwrap().is_empty());
        let no_subnet =
            load("[[engines]]\nendpoint = \"tcp://10.0.0.3:2375\"\ninsecure = true\n").unwrap_err();
        assert!(
            no_subnet.contains("session_subnet is required"),
            "{no_subnet}"
        );
        let bad_subnet = load(
            "[[engines]]\nendpoint = \"tcp://10.0.0.3:2375\"\ninsecure = true\nsession_subnet = \"10.0.0.0\"\n",
        )
        .unwrap_err();
        assert!(bad_subnet.contains("address/prefix"), "{bad_subnet}");
        let json = Config::load_with(None, &|k| {
            (k == "BAI_ENGINES")
                .then(|| r#"[{"endpoint":"tcp://10.0.0.2:2375","insecure":true,"session_subnet":"10.233.2.0/24"}]"#.to_string())
        })
        .unwrap();
        assert!(json.engines[0].insecure);
    }
}
