//! The Docker engine behind [`crate::Engine`]: capacity, container lifecycle, logs and stats,
//! through bollard. Containers are never privileged, never see the Docker socket, drop all
//! capabilities but a small allowlist, and always have CPU, memory and pids limits.
//! What is asked of Docker (a container's settings, a network's) is made by the pure
//! functions of `docker/config.rs`; this file sends it.
use std::collections::HashMap;

use bai_types::slots::{ResourceSlots, parse_binary_size};
use bollard::Docker;
use bollard::models::Mount;
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, ListImagesOptionsBuilder,
    LogsOptionsBuilder, RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder,
    StatsOptionsBuilder, StopContainerOptionsBuilder,
};
use futures_util::StreamExt;
use rust_decimal::Decimal;
use uuid::Uuid;

mod config;
mod usage;

use crate::gpu;
use crate::{
    AttachedExec, ContainerStats, EngineError, EngineImage, EngineInfo, EngineResult, ExecOutput,
    INSTANCE_LABEL, KERNEL_LABEL, KernelSpec, MANAGED_LABEL, MANAGED_VALUE, MAX_LOG_BYTES,
    ManagedContainer, SESSION_LABEL,
};

/// Where a Docker engine listens and how to prove who we are to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `unix:///path` or `tcp://host:port`.
    pub url: String,
    /// Docker's own TLS scheme (`--tlsverify`): the engine's certificate must chain to `ca`
    /// (and only to it), and bai presents `cert`/`key`.
    pub tls: Option<TlsFiles>,
    /// Plain `tcp://` without TLS, allowed only when the operator names the endpoint so.
    pub insecure: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: std::path::PathBuf,
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

impl Endpoint {
    /// A local socket or an endpoint without TLS settings.
    pub fn plain(url: &str) -> Self {
        Endpoint {
            url: url.to_string(),
            tls: None,
            insecure: false,
        }
    }

    /// Whether bai may speak to it: a unix socket, TLS, or an explicit `insecure`. A plain TCP
    /// Docker socket is root on its host for anyone who reaches it.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.url.starts_with("unix://") {
            anyhow::ensure!(
                self.tls.is_none(),
                "{}: TLS settings are for tcp:// endpoints",
                self.url
            );
            return Ok(());
        }
        anyhow::ensure!(
            self.url.starts_with("tcp://"),
            "{}: a container engine endpoint is unix:///path or tcp://host:port",
            self.url
        );
        anyhow::ensure!(
            self.tls.is_some() || self.insecure,
            "{}: plain tcp:// gives root on that host to anyone who reaches it; give tls_ca, tls_cert and tls_key (Docker's --tlsverify), or name the endpoint insecure",
            self.url
        );
        Ok(())
    }
}

type HttpsConnector =
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>;

/// HTTPS with mutual TLS that trusts `files.ca` alone (bollard's own TLS connector also
/// trusts the system's public roots).
fn tls_connector(files: &TlsFiles) -> anyhow::Result<HttpsConnector> {
    use anyhow::Context;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let read_certs = |path: &std::path::Path| -> anyhow::Result<Vec<CertificateDer<'static>>> {
        let certs = CertificateDer::pem_file_iter(path)
            .with_context(|| format!("reading {}", path.display()))?
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("parsing the certificates in {}", path.display()))?;
        anyhow::ensure!(!certs.is_empty(), "{} holds no certificate", path.display());
        Ok(certs)
    };
    let mut roots = rustls::RootCertStore::empty();
    for ca in read_certs(&files.ca)? {
        roots
            .add(ca)
            .with_context(|| format!("the CA in {}", files.ca.display()))?;
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .with_context(|| format!("reading the private key {}", files.key.display()))?;
    let chain = read_certs(&files.cert)?;
    // Docker's scheme: one CA signs the engine's certificate and bai's. A client certificate
    // of another CA would only be refused at the handshake, as an engine "unreachable".
    let roots = std::sync::Arc::new(roots);
    let verifier = rustls::server::WebPkiClientVerifier::builder(roots.clone())
        .build()
        .context("the CA cannot verify client certificates")?;
    let now = rustls::pki_types::UnixTime::now();
    if let Some((leaf, intermediates)) = chain.split_first() {
        verifier
            .verify_client_cert(leaf, intermediates, now)
            .map_err(|e| {
                anyhow::anyhow!(
                    "the client certificate {} is not signed by the CA {}: {e}",
                    files.cert.display(),
                    files.ca.display()
                )
            })?;
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .context("the client certificate and key do not belong together")?;
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1()
        .build())
}

/// Containers whose use one usage sample asks the engine for at once, and how long one
/// answer may take (a container that does not answer keeps its last reading).
const SAMPLE_AT_ONCE: usize = 8;
const SAMPLE_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// The longest an image may take to arrive on an engine (a load of a copied image).
const IMAGE_TRANSFER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// How a Docker engine is set up (from the server's configuration).
#[derive(Debug, Clone)]
pub struct DockerSettings {
    /// Memory kept for the host (a binary size such as `1g`).
    pub reserved_mem: String,
    /// CPU cores kept for the host.
    pub reserved_cpu: u32,
    /// Cores offered per core left after `reserved_cpu` (1: none overcommitted).
    pub cpu_overcommit: u32,
    /// Sessions join the isolated session network (fail closed when it cannot be set up).
    pub network_isolation: bool,
    /// fGPU shares one GPU is split into.
    pub cuda_shares_per_gpu: u32,
    /// Where the MPS control daemons keep their pipes (`<UUID>/pipe/`) and shared memory
    /// (`<UUID>/shm/`) on the local host, one per device ([`gpu::mps_device_dir`]): fractional
    /// GPUs are then enforced through MPS ([`gpu::mps_limits`]).
    /// None: fractions are counted, not enforced.
    pub mps_dir: Option<std::path::PathBuf>,
    /// Docker log rotation: size of one json-file log (two are kept).
    pub log_max_size: String,
    /// Writable-layer size limit (`storage_opt size`), where the storage driver has one.
    pub disk_size: Option<String>,
    /// Seconds an engine call may take to answer (streams — a wait, a pull, logs — then run
    /// as long as they need).
    pub timeout_secs: u64,
}

pub struct DockerEngine {
    info: EngineInfo,
    docker: Docker,
    /// The installation this agent belongs to.
    pub instance: String,
    /// The isolated session network (None when isolation is switched off).
    pub network: Option<String>,
    /// A bounded cache of this process's (one entry per multi-node session with rules on the
    /// host; None until the host was first listed, which finds rules from before a restart):
    /// the sessions whose peer rules the sweep looks at. Never trusted for removal or for
    /// free addresses, which ask the host: another `bai serve` may have put rules there.
    peer_sessions: parking_lot::Mutex<Option<std::collections::HashSet<Uuid>>>,
    /// Docker log rotation: size of one json-file log (two are kept).
    pub log_max_size: String,
    /// Writable-layer size limit (`storage_opt size`), where the storage driver has one.
    pub disk_size: Option<String>,
    /// The host's cores (one container's most, whatever the agent offers in all).
    host_cpus: Decimal,
    /// MPS for fractional GPUs: the daemon's directory and the shares one GPU is split into.
    mps: Option<(std::path::PathBuf, u32)>,
    /// The last NVML reading and when it was taken: a bounded per-process cache (one entry;
    /// NVML describes this host only, so there is nothing to share with other managers). Every
    /// `session_stats` subscriber, the heartbeat and the utilization sampler read through it.
    gpu_cache: tokio::sync::Mutex<Option<(std::time::Instant, gpu::Snapshot)>>,
    /// The running containers' last usage readings (a sample reads a bounded share).
    usage: parking_lot::Mutex<usage::UsageBook>,
}

/// An engine's answer is a failure (or a refusal the caller maps itself); anything that kept
/// the answer from arriving — a connection refused or reset, TLS, a timeout — is `Unreachable`,
/// from which nothing about the container may be concluded.
fn engine_err(context: &'static str, e: bollard::errors::Error) -> EngineError {
    use bollard::errors::Error as E;
    match e {
        E::DockerResponseServerError {
            status_code: 409,
            ref message,
        } if message.contains("is not running") => EngineError::NotRunning,
        E::DockerResponseServerError { .. }
        | E::DockerContainerWaitError { .. }
        | E::DockerStreamError { .. }
        | E::JsonDataError { .. }
        | E::JsonSerdeError { .. } => EngineError::failed(context, e),
        _ => EngineError::unreachable(context, e),
    }
}

fn is_not_found(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// An agent's id, the same whatever the order of the configuration: `i-<host>` for the host's
/// own engine at Docker's default socket, `i-<host>-<engine id>` for any other (engines in
/// network namespaces share their host's name; the engine id is Docker's own, kept in its
/// data root).
pub fn agent_id(host: &str, engine_id: &str, endpoint: &str) -> String {
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if endpoint == "unix:///var/run/docker.sock" || endpoint == "unix:///run/docker.sock" {
        return format!("i-{host}");
    }
    let short: String = engine_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(12)
        .collect::<String>()
        .to_ascii_lowercase();
    format!("i-{host}-{short}")
}

pub fn scratch_volume(kernel_id: Uuid) -> String {
    format!("bai-scratch-{kernel_id}")
}

impl DockerEngine {
    /// The MPS limits and the daemon directory of a container holding a fraction of a GPU
    /// (None for whole GPUs, no GPU, or MPS not configured). Each device has a daemon of its
    /// own (`scripts/mps.sh`), so a fraction can only be had alone: a grant of whole devices
    /// plus a fraction is refused, as is a fraction whose device is unknown or whose daemon
    /// does not answer — never run unlimited.
    fn mps_for(
        &self,
        spec: &KernelSpec,
    ) -> EngineResult<Option<(gpu::MpsLimits, std::path::PathBuf)>> {
        let Some((dir, per_gpu)) = &self.mps else {
            return Ok(None);
        };
        if spec.gpu_shares.is_empty() {
            return Ok(None);
        }
        let mut grants = Vec::with_capacity(spec.gpu_ids.len());
        for (id, shares) in spec.gpu_ids.iter().zip(&spec.gpu_shares) {
            let Some(d) = self.info.gpus.iter().find(|d| &d.id == id) else {
                return Err(EngineError::Refused(format!(
                    "GPU {id} is not on this agent"
                )));
            };
            grants.push((d, *shares));
        }
        let sizes: Vec<(u64, Decimal)> = grants.iter().map(|(d, s)| (d.memory_bytes, *s)).collect();
        let Some(limits) = gpu::mps_limits(&sizes, *per_gpu) else {
            return Ok(None);
        };
        let [(device, _)] = grants.as_slice() else {
            return Err(EngineError::Refused(
                "with fractional GPUs enforced through MPS, a session takes either whole GPUs or a fraction of one GPU".into(),
            ));
        };
        gpu::mps_ready(dir, &device.uuid).map_err(|reason| {
            EngineError::Refused(format!(
                "a fractional GPU cannot be enforced on this agent now: {reason}"
            ))
        })?;
        let device_dir = gpu::mps_device_dir(dir, &device.uuid)
            .ok_or_else(|| EngineError::Refused(format!("GPU {} has no usable UUID", device.id)))?;
        Ok(Some((limits, device_dir)))
    }

    /// Connects to `endpoint`, negotiates the API version and measures capacity.
    pub async fn connect(
        target: &Endpoint,
        config: &DockerSettings,
        instance: &str,
        net: &crate::network::HostNetwork,
    ) -> anyhow::Result<Self> {
        use anyhow::Context;
        target.check()?;
        let endpoint = target.url.as_str();
        let timeout = config.timeout_secs.max(1);
        let docker = if let Some(path) = endpoint.strip_prefix("unix://") {
            Docker::connect_with_unix(path, timeout, bollard::API_DEFAULT_VERSION)
        } else if let Some(files) = &target.tls {
            let connector =
                tls_connector(files).with_context(|| format!("TLS settings of {endpoint}"))?;
            let client =
                hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                    .pool_max_idle_per_host(0)
                    .build(connector);
            let transport = move |req: bollard::BollardRequest| {
                let response = client.request(req);
                async move {
                    response
                        .await
                        .map_err(|err| bollard::errors::Error::HyperLegacyError { err })
                }
            };
            let addr = endpoint.replacen("tcp://", "https://", 1);
            Docker::connect_with_custom_transport(
                transport,
                Some(addr),
                timeout,
                bollard::API_DEFAULT_VERSION,
            )
        } else {
            tracing::warn!(
                endpoint,
                "speaking to a container engine over plain TCP, without authentication (insecure)"
            );
            let addr = endpoint.replacen("tcp://", "http://", 1);
            Docker::connect_with_http(&addr, timeout, bollard::API_DEFAULT_VERSION)
        }
        .with_context(|| format!("connecting to the container engine at {endpoint}"))?;
        let docker = docker
            .negotiate_version()
            .await
            .with_context(|| format!("talking to the container engine at {endpoint}"))?;
        let info = docker
            .info()
            .await
            .with_context(|| format!("reading engine info from {endpoint}"))?;
        let id = agent_id(
            info.name.as_deref().unwrap_or("localhost"),
            info.id.as_deref().unwrap_or(""),
            endpoint,
        );
        let reserved_mem = parse_binary_size(&config.reserved_mem)
            .with_context(|| format!("invalid BAI_AGENT_RESERVED_MEM '{}'", config.reserved_mem))?;
        let ncpu = Decimal::from(info.ncpu.unwrap_or(1));
        let cpu = (ncpu - Decimal::from(config.reserved_cpu)).max(Decimal::ONE)
            * Decimal::from(config.cpu_overcommit.max(1));
        let mem = (Decimal::from(info.mem_total.unwrap_or(0)) - reserved_mem).max(Decimal::ZERO);
        // Sessions are isolated on a network of this installation; an engine where that
        // cannot be set up runs no sessions (fail closed). A remote engine's host is checked
        // through the engine: its rules, the manager reaching its sessions.
        let remote = endpoint.strip_prefix("tcp://");
        let network = if config.network_isolation || remote.is_some() {
            Some(
                crate::network::ensure(&docker, remote, net)
                    .await
                    .with_context(|| format!("isolating sessions on {endpoint}"))?,
            )
        } else {
            None
        };
        // The manager's own GPUs are those of the local engine only; a remote host's are its
        // own (not discovered yet: none are offered there).
        let gpus = if endpoint.starts_with("unix://") {
            gpu::detect()
        } else {
            if info
                .runtimes
                .as_ref()
                .is_some_and(|r| r.contains_key("nvidia"))
            {
                tracing::warn!(
                    endpoint,
                    "this host's engine has the NVIDIA runtime, but GPUs of remote hosts are not discovered yet: none are offered there"
                );
            }
            Vec::new()
        };
        let mut capacity = ResourceSlots::new().with("cpu", cpu).with("mem", mem);
        // Fractions are offered where they are enforced, or where the admin chose counting.
        let mps = config.mps_dir.clone().filter(|_| !gpus.is_empty());
        let shares_ok = match &mps {
            Some(dir) => match gpu::mps_all_ready(dir, &gpus) {
                Ok(()) => {
                    tracing::info!(dir = %dir.display(), "fractional GPUs enforced through MPS (a daemon per device)");
                    true
                }
                Err(reason) => {
                    tracing::error!(%reason, "fractional GPUs are not offered: MPS is configured but not running (whole GPUs still are)");
                    false
                }
            },
            None => {
                if !gpus.is_empty() && config.cuda_shares_per_gpu > 1 {
                    tracing::warn!(
                        "fractional GPUs are counted, not enforced: set gpu_mps_dir to enforce them through MPS"
                    );
                }
                true
            }
        };
        for (slot, n) in gpu::slots(&gpus, config.cuda_shares_per_gpu) {
            if slot != "cuda.shares" || shares_ok {
                capacity.set(slot, n);
            }
        }
        Ok(Self {
            info: EngineInfo {
                id,
                engine_id: info.id.clone().unwrap_or_default(),
                endpoint: endpoint.to_string(),
                capacity,
                gpus,
                architecture: info
                    .architecture
                    .unwrap_or_else(|| std::env::consts::ARCH.to_string()),
                version: info.server_version.unwrap_or_default(),
                session_subnet: network.as_ref().and(net.subnet.clone()),
            },
            docker,
            instance: instance.to_string(),
            network,
            peer_sessions: parking_lot::Mutex::new(None),
            gpu_cache: tokio::sync::Mutex::new(None),
            usage: parking_lot::Mutex::default(),
            log_max_size: config.log_max_size.clone(),
            disk_size: config.disk_size.clone(),
            host_cpus: ncpu,
            mps: mps.map(|dir| (dir, config.cuda_shares_per_gpu)),
        })
    }

    /// A running container's cumulative CPU time (ns) and memory now, within
    /// [`SAMPLE_CALL_TIMEOUT`] (None: no answer in time).
    async fn use_of(&self, id: &str) -> Option<(u64, u64)> {
        let opts = StatsOptionsBuilder::default()
            .stream(false)
            .one_shot(true)
            .build();
        let mut stream = self.docker.stats(id, Some(opts));
        match tokio::time::timeout(SAMPLE_CALL_TIMEOUT, stream.next()).await {
            Ok(Some(Ok(s))) => Some((
                s.cpu_stats
                    .and_then(|x| x.cpu_usage)
                    .and_then(|u| u.total_usage)
                    .unwrap_or(0),
                s.memory_stats.and_then(|m| m.usage).unwrap_or(0),
            )),
            _ => None,
        }
    }

    /// Runs a rules script on the engine's host (given 30 s, and 50 ms more per rule it
    /// changes); its output, or a failure with it.
    async fn rules_script(
        &self,
        body: &str,
        context: &'static str,
        rules: usize,
    ) -> EngineResult<String> {
        let remote = self.info.endpoint.starts_with("tcp://");
        let limit = std::time::Duration::from_secs(30)
            + std::time::Duration::from_millis(50 * u64::try_from(rules).unwrap_or(u64::MAX / 100));
        match crate::network::run_rules_script(&self.docker, remote, body, limit).await {
            Ok((0, out)) => Ok(out),
            Ok((code, out)) => Err(EngineError::failed(
                context,
                format!("exit {code}: {}", out.trim()),
            )),
            Err(e) => Err(EngineError::failed(context, format!("{e:#}"))),
        }
    }

    /// Every peer rule on the host: this installation's sessions with rules there (added to
    /// what this process knows), and every address a rule of any installation names.
    async fn list_peers(
        &self,
    ) -> EngineResult<(
        std::collections::HashSet<Uuid>,
        std::collections::HashSet<String>,
    )> {
        let out = self
            .rules_script(
                &crate::network::list_peers_script(),
                "listing the cluster peer rules",
                0,
            )
            .await?;
        let prefix = crate::network::peer_tag_prefix(&self.instance);
        let (found, addresses) = crate::network::parse_peer_rules(&out, &prefix);
        let mut slot = self.peer_sessions.lock();
        let all = slot.get_or_insert_with(Default::default);
        all.extend(found);
        Ok((all.clone(), addresses))
    }

    /// The sessions whose private networks this installation has on the engine.
    async fn cluster_networks(&self) -> EngineResult<Vec<Uuid>> {
        let filters = HashMap::from([(
            "label",
            vec![
                format!("{MANAGED_LABEL}={MANAGED_VALUE}"),
                format!("{INSTANCE_LABEL}={}", self.instance),
            ],
        )]);
        let opts = bollard::query_parameters::ListNetworksOptionsBuilder::default()
            .filters(&filters)
            .build();
        let list = self
            .docker
            .list_networks(Some(opts))
            .await
            .map_err(|e| engine_err("listing networks", e))?;
        Ok(list
            .into_iter()
            .filter(|n| {
                n.name
                    .as_deref()
                    .is_some_and(|name| name.starts_with("bai-cluster-"))
            })
            .filter_map(|n| {
                n.labels
                    .and_then(|l| l.get(SESSION_LABEL).and_then(|v| Uuid::parse_str(v).ok()))
            })
            .collect())
    }

    /// Creates a process in the container as `work` in /home/work; returns its exec id.
    async fn create_exec_as_work(
        &self,
        container_id: &str,
        cmd: Vec<String>,
        attach: bool,
        tty: bool,
        env: Vec<String>,
    ) -> EngineResult<String> {
        let exec = self
            .docker
            .create_exec(
                container_id,
                bollard::exec::CreateExecOptions {
                    attach_stdin: Some(attach),
                    attach_stdout: Some(attach),
                    attach_stderr: Some(attach),
                    tty: Some(tty),
                    env: (!env.is_empty()).then_some(env),
                    cmd: Some(cmd),
                    user: Some("work".to_string()),
                    working_dir: Some("/home/work".to_string()),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| engine_err("starting a process in a container", e))?;
        Ok(exec.id)
    }

    async fn remove_scratch(&self, kernel_id: Uuid) {
        let opts = RemoveVolumeOptionsBuilder::default().force(true).build();
        if let Err(e) = self
            .docker
            .remove_volume(&scratch_volume(kernel_id), Some(opts))
            .await
            && !is_not_found(&e)
        {
            tracing::warn!(kernel = %kernel_id, error = %e, "removing a scratch volume failed");
        }
    }

    /// Creates (never starts) a container of `image` without network, for its file system
    /// only; `mounts` as given.
    async fn create_inert(
        &self,
        image: &str,
        name: &str,
        start: (Option<Vec<String>>, Option<Vec<String>>),
        mounts: Vec<Mount>,
    ) -> EngineResult<String> {
        let body = config::inert_container(image, start, mounts);
        self.docker
            .create_container(
                Some(CreateContainerOptionsBuilder::default().name(name).build()),
                body,
            )
            .await
            .map(|c| c.id)
            .map_err(|e| engine_err("creating a container for a commit", e))
    }

    /// Removes a container but never a named volume it mounts; already gone is fine.
    async fn discard(&self, container_id: &str) {
        let opts = RemoveContainerOptionsBuilder::default().force(true).build();
        if let Err(e) = self.docker.remove_container(container_id, Some(opts)).await
            && !is_not_found(&e)
        {
            // It carries the session's labels (inherited from the committed image): the
            // reconciliation removes it with the session.
            tracing::warn!(container = %container_id, error = %e, "removing a commit's helper container failed");
        }
    }

    /// Copies the scratch volume's contents (read through `reader`, where it is mounted at
    /// `/bai-home`) into `/home/work` of `writer`, both never started.
    async fn copy_home(
        &self,
        reader: &str,
        writer: &str,
        limit: u64,
        progress: crate::Progress<'_>,
    ) -> EngineResult<()> {
        let slow = self.docker.clone().with_timeout(IMAGE_TRANSFER_TIMEOUT);
        let opts = bollard::query_parameters::DownloadFromContainerOptionsBuilder::default()
            .path("/bai-home/.")
            .build();
        let copied = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = copied.clone();
        let archive = slow
            .download_from_container(reader, Some(opts))
            .map(move |chunk| {
                let chunk =
                    chunk.map_err(|e| std::io::Error::other(format!("reading /home/work: {e}")))?;
                let total = counter
                    .fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed)
                    + chunk.len() as u64;
                if total > limit {
                    return Err(std::io::Error::other("over the limit"));
                }
                Ok(chunk)
            });
        let opts = bollard::query_parameters::UploadToContainerOptionsBuilder::default()
            .path("/home/work")
            .build();
        let upload =
            slow.upload_to_container(writer, Some(opts), bollard::body_try_stream(archive));
        tokio::pin!(upload);
        // Progress while the bytes flow (the upload answers once all are in).
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(500));
        let result = loop {
            tokio::select! {
                r = &mut upload => break r,
                _ = tick.tick() => progress(copied.load(std::sync::atomic::Ordering::Relaxed), 0),
            }
        };
        let done = copied.load(std::sync::atomic::Ordering::Relaxed);
        if done > limit {
            return Err(EngineError::Refused(format!(
                "/home/work holds more than {} MiB, the most a commit takes in",
                limit / (1024 * 1024)
            )));
        }
        result.map_err(|e| engine_err("copying /home/work into the image", e))?;
        progress(done, done);
        Ok(())
    }

    /// Writes `files` into a created container's /home/work (its scratch volume, already
    /// filled from the image), before anything in it runs.
    async fn write_home_files(
        &self,
        container_id: &str,
        files: &[crate::HomeFile],
    ) -> EngineResult<()> {
        let what = "writing dotfiles into a container";
        let archive = home_archive(files).map_err(|e| EngineError::failed(what, e))?;
        self.upload(container_id, "/home/work", archive, what).await
    }

    /// Unpacks the tar `archive` at `path` in the container.
    async fn upload(
        &self,
        container_id: &str,
        path: &str,
        archive: Vec<u8>,
        what: &'static str,
    ) -> EngineResult<()> {
        let opts = bollard::query_parameters::UploadToContainerOptionsBuilder::default()
            .path(path)
            .build();
        self.docker
            .upload_to_container(
                container_id,
                Some(opts),
                bollard::body_full(bytes::Bytes::from(archive)),
            )
            .await
            .map_err(|e| engine_err(what, e))
    }
}

#[async_trait::async_trait]
impl crate::Engine for DockerEngine {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    async fn ping(&self) -> EngineResult<()> {
        self.docker
            .ping()
            .await
            .map(drop)
            .map_err(|e| engine_err("pinging the container engine", e))
    }

    /// Creates and starts the container of one kernel; returns its id.
    async fn create_and_start(&self, spec: &KernelSpec) -> EngineResult<String> {
        let mps = self.mps_for(spec)?;
        let config::KernelContainer {
            volume,
            name,
            body,
            join,
        } = config::kernel_container(
            spec,
            &config::Settings {
                instance: &self.instance,
                network: self.network.as_deref(),
                log_max_size: &self.log_max_size,
                disk_size: self.disk_size.as_deref(),
                host_cpus: self.host_cpus,
            },
            mps.as_ref(),
        );
        self.docker
            .create_volume(volume)
            .await
            .map_err(|e| engine_err("creating a scratch volume", e))?;
        let created = self
            .docker
            .create_container(
                Some(CreateContainerOptionsBuilder::default().name(&name).build()),
                body,
            )
            .await
            .map_err(|e| match &e {
                bollard::errors::Error::DockerResponseServerError { message, .. } => {
                    EngineError::Refused(format!(
                        "the container engine refused the session: {message}"
                    ))
                }
                _ => engine_err("creating a container", e),
            })?;
        if let Some(place) = join {
            let joined = self
                .docker
                .connect_network(
                    &place.network,
                    bollard::models::NetworkConnectRequest {
                        container: created.id.clone(),
                        endpoint_config: Some(config::endpoint_at(&place.address)),
                    },
                )
                .await;
            if let Err(e) = joined {
                if let Err(cleanup) = self.remove(&created.id, spec.kernel_id).await {
                    tracing::warn!(container = %created.id, error = ?cleanup, "removing a container that could not join its cluster network failed");
                }
                return Err(engine_err("joining the cluster network", e));
            }
        }
        if !spec.home_files.is_empty()
            && let Err(e) = self.write_home_files(&created.id, &spec.home_files).await
        {
            if let Err(cleanup) = self.remove(&created.id, spec.kernel_id).await {
                tracing::warn!(container = %created.id, error = ?cleanup, "removing a container whose dotfiles could not be written failed");
            }
            return Err(e);
        }
        if let Err(e) = self.docker.start_container(&created.id, None).await {
            if let Err(cleanup) = self.remove(&created.id, spec.kernel_id).await {
                // The reconciliation removes a container of no live session.
                tracing::warn!(container = %created.id, error = ?cleanup, "removing a container that failed to start failed");
            }
            return Err(engine_err("starting a container", e));
        }
        Ok(created.id)
    }

    /// Pulls `reference` (`registry/repo:tag`) with optional credentials.
    async fn pull(
        &self,
        reference: &str,
        credentials: Option<(String, String)>,
        progress: crate::Progress<'_>,
    ) -> EngineResult<()> {
        let opts = bollard::query_parameters::CreateImageOptionsBuilder::default()
            .from_image(reference)
            .build();
        let creds = credentials.map(|(username, password)| bollard::auth::DockerCredentials {
            username: Some(username),
            password: Some(password),
            ..Default::default()
        });
        let refused = |message: String| {
            EngineError::Refused(format!("pulling {reference} failed: {message}"))
        };
        let mut stream = self.docker.create_image(Some(opts), None, creds);
        // Each layer's (done, size) as the engine reports it.
        let mut layers: HashMap<String, (u64, u64)> = HashMap::new();
        while let Some(step) = stream.next().await {
            let info = step.map_err(|e| match e {
                bollard::errors::Error::DockerResponseServerError { message, .. } => {
                    refused(message)
                }
                bollard::errors::Error::DockerStreamError { error } => refused(error),
                other => engine_err("pulling an image", other),
            })?;
            if let Some(detail) = info.error_detail {
                return Err(refused(detail.message.unwrap_or_default()));
            }
            let (Some(layer), Some(status)) = (info.id, info.status) else {
                continue;
            };
            let entry = layers.entry(layer).or_default();
            let detail = info.progress_detail.unwrap_or_default();
            match status.as_str() {
                "Downloading" => {
                    let total = u64::try_from(detail.total.unwrap_or(0)).unwrap_or(0);
                    let current = u64::try_from(detail.current.unwrap_or(0)).unwrap_or(0);
                    *entry = (current.min(total), total.max(entry.1));
                }
                "Download complete" | "Pull complete" | "Already exists" => entry.0 = entry.1,
                _ => continue,
            }
            let (done, total) = layers
                .values()
                .fold((0, 0), |(d, t), (ld, lt)| (d + ld, t + lt));
            progress(done, total);
        }
        Ok(())
    }

    async fn has_image(&self, reference: &str) -> EngineResult<bool> {
        match self.docker.inspect_image(reference).await {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(engine_err("reading an image", e)),
        }
    }

    async fn export_image(&self, reference: &str) -> EngineResult<(u64, crate::ByteStream)> {
        let inspected = self.docker.inspect_image(reference).await.map_err(|e| {
            if is_not_found(&e) {
                EngineError::NotFound {
                    what: "image",
                    key: reference.to_string(),
                }
            } else {
                engine_err("reading an image", e)
            }
        })?;
        let size = u64::try_from(inspected.size.unwrap_or(0)).unwrap_or(0);
        let stream = self
            .docker
            .export_image(reference)
            .map(|chunk| chunk.map_err(|e| engine_err("exporting an image", e)));
        Ok((size, Box::pin(stream)))
    }

    async fn load_image(&self, archive: crate::ByteStream) -> EngineResult<()> {
        let opts = bollard::query_parameters::ImportImageOptionsBuilder::default()
            .quiet(true)
            .build();
        // What fails on the way in (the exporting engine went away) fails the load.
        let archive =
            archive.map(|chunk| chunk.map_err(|e| std::io::Error::other(format!("{e:?}"))));
        // The engine answers once the whole archive is in: the call timeout is for answers,
        // not for moving an image, which gets its own bound.
        let mut answers = self
            .docker
            .clone()
            .with_timeout(IMAGE_TRANSFER_TIMEOUT)
            .import_image_stream(opts, archive, None);
        while let Some(answer) = answers.next().await {
            let info = answer.map_err(|e| match e {
                bollard::errors::Error::DockerResponseServerError { message, .. }
                | bollard::errors::Error::DockerStreamError { error: message } => {
                    EngineError::Refused(format!("loading an image failed: {message}"))
                }
                other => engine_err("loading an image", other),
            })?;
            if let Some(detail) = info.error_detail {
                return Err(EngineError::Refused(format!(
                    "loading an image failed: {}",
                    detail.message.unwrap_or_default()
                )));
            }
        }
        Ok(())
    }

    /// Writes small files into a running container (owned by uid/gid 1000, `work`), creating
    /// `dir` if needed. Each entry is `(name inside dir, mode, contents)`.
    async fn put_files(
        &self,
        container_id: &str,
        parent: &str,
        dir: &str,
        files: &[(&str, u32, &[u8])],
    ) -> EngineResult<()> {
        let what = "writing files into a container";
        let archive = tar_of(dir, files).map_err(|e| EngineError::failed(what, e))?;
        self.upload(container_id, parent, archive, what).await
    }

    /// Starts a process in the container as `work` in /home/work and leaves it running.
    async fn spawn_detached(&self, container_id: &str, cmd: Vec<String>) -> EngineResult<()> {
        let id = self
            .create_exec_as_work(container_id, cmd, false, false, Vec::new())
            .await?;
        self.docker
            .start_exec(
                &id,
                Some(bollard::exec::StartExecOptions {
                    detach: true,
                    tty: false,
                    output_capacity: None,
                }),
            )
            .await
            .map_err(|e| engine_err("starting a process in a container", e))?;
        Ok(())
    }

    /// Starts a process in the container as `work` in /home/work with stdin, stdout and stderr
    /// attached (a pseudo-terminal with `tty`).
    async fn attach_exec(
        &self,
        container_id: &str,
        cmd: Vec<String>,
        tty: bool,
        env: Vec<String>,
    ) -> EngineResult<AttachedExec> {
        let id = self
            .create_exec_as_work(container_id, cmd, true, tty, env)
            .await?;
        let started = self
            .docker
            .start_exec(
                &id,
                Some(bollard::exec::StartExecOptions {
                    detach: false,
                    tty,
                    output_capacity: None,
                }),
            )
            .await
            .map_err(|e| engine_err("starting a process in a container", e))?;
        match started {
            bollard::exec::StartExecResults::Attached { output, input } => {
                let output = output.map(|item| match item {
                    Ok(bollard::container::LogOutput::StdErr { message }) => {
                        Ok(ExecOutput::Stderr(message))
                    }
                    Ok(other) => Ok(ExecOutput::Stdout(other.into_bytes())),
                    Err(e) => Err(engine_err("reading a process's output", e)),
                });
                Ok(AttachedExec {
                    id,
                    output: Box::pin(output),
                    input,
                })
            }
            bollard::exec::StartExecResults::Detached => Err(EngineError::failed(
                "starting a process in a container",
                "not attached",
            )),
        }
    }

    async fn cluster_network(
        &self,
        session_id: Uuid,
        size: usize,
    ) -> EngineResult<crate::ClusterNet> {
        let name = crate::network::cluster_network_name(session_id);
        let addresses = |third: &str| -> Vec<String> {
            (0..size)
                .map(|i| format!("10.250.{third}.{}", i + 2))
                .collect()
        };
        // Made already (a launch tried again): its subnet says the addresses.
        let third_of = |net: &bollard::models::NetworkInspect| {
            net.ipam
                .as_ref()
                .and_then(|i| i.config.as_ref())
                .and_then(|c| c.first())
                .and_then(|c| c.subnet.as_ref())
                .and_then(|s| s.split('.').nth(2).map(str::to_string))
        };
        if let Ok(existing) = self.docker.inspect_network(&name, None).await
            && let Some(third) = third_of(&existing)
        {
            return Ok(crate::ClusterNet {
                addresses: addresses(&third),
                name,
            });
        }
        let mut last = None;
        // A subnet another network holds is refused by the engine: the next one is tried.
        for third in crate::network::cluster_subnet_candidates(session_id).take(32) {
            let created = self
                .docker
                .create_network(config::cluster_network(
                    &name,
                    &self.instance,
                    session_id,
                    third,
                ))
                .await;
            match created {
                Ok(_) => {
                    return Ok(crate::ClusterNet {
                        name,
                        addresses: addresses(&third.to_string()),
                    });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(match last {
            Some(e) => engine_err("creating a cluster network", e),
            None => EngineError::Refused("no free subnet for a cluster network".into()),
        })
    }

    async fn remove_cluster(&self, session_id: Uuid, peers: bool) -> EngineResult<()> {
        // The rules first: an address they name must not be let through once its container
        // is gone. The host is asked whatever this process knows: another `bai serve` may
        // have put them there.
        if peers && self.network.is_some() {
            let tag = crate::network::peer_tag(&self.instance, session_id);
            self.rules_script(
                &crate::network::remove_peers_script(&tag),
                "removing a cluster's peer rules",
                // A bound for the largest cluster's (one process per rule).
                2000,
            )
            .await?;
            if let Some(s) = self.peer_sessions.lock().as_mut() {
                s.remove(&session_id);
            }
        }
        let name = crate::network::cluster_network_name(session_id);
        match self.docker.remove_network(&name).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(engine_err("removing a cluster network", e)),
        }
    }

    async fn cluster_sessions(&self) -> EngineResult<Vec<Uuid>> {
        let mut sessions = self.cluster_networks().await?;
        let known = self.peer_sessions.lock().clone();
        let peers = match known {
            Some(known) => known,
            None if self.network.is_some() => self.list_peers().await?.0,
            None => Default::default(),
        };
        sessions.extend(peers);
        sessions.sort();
        sessions.dedup();
        Ok(sessions)
    }

    async fn session_addresses(&self, count: usize) -> EngineResult<Vec<String>> {
        let (Some(network), Some(subnet)) = (&self.network, &self.info.session_subnet) else {
            return Err(EngineError::no_session_subnet(&self.info.id));
        };
        let inspect = self
            .docker
            .inspect_network(network, None)
            .await
            .map_err(|e| engine_err("reading the session network", e))?;
        let mut used: Vec<String> = inspect
            .containers
            .unwrap_or_default()
            .into_values()
            .filter_map(|c| c.ipv4_address)
            .map(|a| a.split('/').next().unwrap_or_default().to_string())
            .collect();
        // Nor an address a peer rule still names (a member that exited, a session whose rules
        // are not removed yet, another installation's): its new holder would be let through.
        used.extend(self.list_peers().await?.1);
        crate::network::free_from_top(subnet, &used, count).ok_or_else(|| {
            EngineError::Refused(format!(
                "the session network of agent {} has fewer than {count} free addresses",
                self.info.id
            ))
        })
    }

    async fn cluster_peers(
        &self,
        session_id: Uuid,
        local: &[String],
        members: &[String],
    ) -> EngineResult<()> {
        if self.network.is_none() {
            return Err(EngineError::Refused(
                "multi-node cluster sessions need network isolation".into(),
            ));
        }
        // What the host holds from before is known first (else it would never be swept), and
        // this session before its first rule goes in (a half-made set is still removed).
        if self.peer_sessions.lock().is_none() {
            self.list_peers().await?;
        }
        self.peer_sessions
            .lock()
            .get_or_insert_with(Default::default)
            .insert(session_id);
        let tag = crate::network::peer_tag(&self.instance, session_id);
        let rules = crate::network::peer_rules(crate::network::BRIDGE, &tag, local, members);
        self.rules_script(
            &crate::network::peer_rules_script(&rules),
            "letting a cluster's containers reach each other",
            rules.len(),
        )
        .await
        .map(drop)
    }

    /// Reads one regular file (at most `limit` bytes) from a container.
    async fn read_file(
        &self,
        container_id: &str,
        path: &str,
        limit: usize,
    ) -> EngineResult<Vec<u8>> {
        let archive = self.read_archive(container_id, path, limit + 4096).await?;
        first_file_of_tar(&archive).ok_or_else(|| EngineError::NotFound {
            what: "file",
            key: path.to_string(),
        })
    }

    async fn read_archive(
        &self,
        container_id: &str,
        path: &str,
        limit: usize,
    ) -> EngineResult<Vec<u8>> {
        let opts = bollard::query_parameters::DownloadFromContainerOptionsBuilder::default()
            .path(path)
            .build();
        let mut stream = self
            .docker
            .download_from_container(container_id, Some(opts));
        let mut archive = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| match e {
                bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                } => EngineError::NotFound {
                    what: "file",
                    key: path.to_string(),
                },
                other => engine_err("reading a file from a container", other),
            })?;
            archive.extend_from_slice(&chunk);
            if archive.len() > limit {
                return Err(EngineError::Refused(format!("{path} is too large")));
            }
        }
        Ok(archive)
    }

    async fn commit(
        &self,
        spec: &crate::CommitSpec,
        progress: crate::Progress<'_>,
    ) -> EngineResult<String> {
        let slow = self.docker.clone().with_timeout(IMAGE_TRANSFER_TIMEOUT);
        let (repo, tag) = match spec.reference.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r.to_string(), t.to_string()),
            _ => (spec.reference.clone(), "latest".to_string()),
        };
        let config = || bollard::models::ContainerConfig {
            labels: Some(spec.labels.clone()),
            ..Default::default()
        };
        let not_found = |e: bollard::errors::Error, context| match e {
            bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            } => EngineError::NotFound {
                what: "container",
                key: spec.container_id.clone(),
            },
            other => engine_err(context, other),
        };
        // The new image starts as its base does (the session's container ran bai's command).
        let base = self
            .docker
            .inspect_container(&spec.container_id, None)
            .await
            .map_err(|e| not_found(e, "reading a container"))?
            .config
            .and_then(|c| c.image)
            .unwrap_or_default();
        let start = match self.docker.inspect_image(&base).await {
            Ok(i) => i.config.map(|c| (c.entrypoint, c.cmd)).unwrap_or_default(),
            Err(_) => (None, None),
        };
        // The container's own changes, as an image without a name (the final one's parent).
        // Not paused: freezing the container while the engine starts a process in it (an
        // execution, the SSH daemon) deadlocks the engine on that container (seen with
        // runc and fuse-overlayfs); the files are taken as they are at that moment.
        let opts = bollard::query_parameters::CommitContainerOptionsBuilder::default()
            .container(&spec.container_id)
            .pause(false)
            .build();
        let changes = slow
            .commit_container(opts, config())
            .await
            .map_err(|e| not_found(e, "committing a container"))?
            .id;
        // /home/work is a volume, which a commit leaves out: read it through one container
        // that mounts only it (the folders bound beneath /home/work in the session are other
        // mounts, so they stay out), written into the file system of another.
        let prefix = format!(
            "bai-{}-commit-{}",
            &self.instance[..8.min(self.instance.len())],
            Uuid::new_v4().simple()
        );
        let reader = self
            .create_inert(
                &changes,
                &format!("{prefix}-r"),
                (None, Some(vec!["/bin/true".into()])),
                vec![config::home_reader_mount(spec.kernel_id)],
            )
            .await?;
        let writer = match self
            .create_inert(&changes, &format!("{prefix}-w"), start, Vec::new())
            .await
        {
            Ok(w) => w,
            Err(e) => {
                self.discard(&reader).await;
                return Err(e);
            }
        };
        let made = async {
            self.copy_home(&reader, &writer, spec.home_limit, progress)
                .await?;
            let opts = bollard::query_parameters::CommitContainerOptionsBuilder::default()
                .container(&writer)
                .repo(&repo)
                .tag(&tag)
                .pause(false)
                .build();
            slow.commit_container(opts, config())
                .await
                .map(|r| r.id)
                .map_err(|e| engine_err("committing the image", e))
        }
        .await;
        self.discard(&reader).await;
        self.discard(&writer).await;
        made
    }

    async fn remove_image(&self, reference: &str) -> EngineResult<()> {
        match self
            .docker
            .remove_image(
                reference,
                None::<bollard::query_parameters::RemoveImageOptions>,
                None,
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409,
                message,
            }) => Err(EngineError::Refused(format!(
                "the image is in use: {message}"
            ))),
            Err(e) => Err(engine_err("removing an image", e)),
        }
    }

    /// Removes dangling images (untagged and unused by any container); returns how many and
    /// the bytes reclaimed.
    async fn prune_dangling_images(&self) -> EngineResult<(usize, i64)> {
        let mut filters = HashMap::new();
        filters.insert("dangling".to_string(), vec!["true".to_string()]);
        let opts = bollard::query_parameters::PruneImagesOptionsBuilder::default()
            .filters(&filters)
            .build();
        let r = self
            .docker
            .prune_images(Some(opts))
            .await
            .map_err(|e| engine_err("cleaning up images", e))?;
        Ok((
            r.images_deleted.map(|d| d.len()).unwrap_or(0),
            r.space_reclaimed.unwrap_or(0),
        ))
    }

    /// The container's address on its network (the session network when it has one), where
    /// the server reaches its ports.
    async fn address(&self, container_id: &str) -> Option<std::net::IpAddr> {
        let info = self
            .docker
            .inspect_container(container_id, None)
            .await
            .ok()?;
        let networks = info.network_settings?.networks?;
        let preferred = self.network.as_ref().and_then(|n| networks.get(n));
        preferred
            .into_iter()
            .chain(networks.values())
            .filter_map(|n| n.ip_address.as_deref())
            .find_map(|ip| ip.parse().ok())
    }

    /// The container's output so far (stdout and stderr, interleaved).
    async fn logs(&self, container_id: &str) -> EngineResult<String> {
        let opts = LogsOptionsBuilder::default()
            .stdout(true)
            .stderr(true)
            .follow(false)
            .build();
        let mut stream = self.docker.logs(container_id, Some(opts));
        // The newest part only: never more than twice the bound in memory.
        let mut out: Vec<u8> = Vec::new();
        let mut dropped = false;
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(c) => {
                    out.extend_from_slice(&c.into_bytes());
                    if out.len() > 2 * MAX_LOG_BYTES {
                        out.drain(..out.len() - MAX_LOG_BYTES);
                        dropped = true;
                    }
                }
                Err(e) if is_not_found(&e) => break,
                Err(e) => return Err(engine_err("reading container logs", e)),
            }
        }
        if out.len() > MAX_LOG_BYTES {
            out.drain(..out.len() - MAX_LOG_BYTES);
            dropped = true;
        }
        let text = String::from_utf8_lossy(&out).into_owned();
        Ok(if dropped {
            format!(
                "[bai: earlier output dropped; the newest {} KiB are kept]\n{text}",
                MAX_LOG_BYTES / 1024
            )
        } else {
            text
        })
    }

    /// Waits for the container to exit; returns its exit code.
    async fn wait(&self, container_id: &str) -> EngineResult<i64> {
        let mut stream = self.docker.wait_container(container_id, None);
        match stream.next().await {
            Some(Ok(r)) => Ok(r.status_code),
            // bollard reports a non-zero exit as an error carrying the code.
            Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => Ok(code),
            Some(Err(e)) if is_not_found(&e) => Err(EngineError::NotFound {
                what: "container",
                key: container_id.to_string(),
            }),
            Some(Err(e)) => Err(engine_err("waiting for a container", e)),
            // The answer ended without a status: the connection dropped.
            None => Err(EngineError::unreachable(
                "waiting for a container",
                "the engine closed the wait without an exit status",
            )),
        }
    }

    /// Stops (SIGTERM, then SIGKILL after a grace period) without removing.
    async fn stop(&self, container_id: &str, grace_secs: i32) -> EngineResult<()> {
        let opts = StopContainerOptionsBuilder::default().t(grace_secs).build();
        match self.docker.stop_container(container_id, Some(opts)).await {
            Err(e) if !is_not_found(&e) => Err(engine_err("stopping a container", e)),
            _ => Ok(()),
        }
    }

    /// Removes the container and its scratch volume (`/home/work`); already gone is fine.
    async fn remove(&self, container_id: &str, kernel_id: Uuid) -> EngineResult<()> {
        let opts = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        if let Err(e) = self.docker.remove_container(container_id, Some(opts)).await
            && !is_not_found(&e)
        {
            return Err(engine_err("removing a container", e));
        }
        self.remove_scratch(kernel_id).await;
        Ok(())
    }

    /// Every container this server manages on this engine, running or not.
    async fn managed_containers(&self) -> EngineResult<Vec<ManagedContainer>> {
        let mut filters = HashMap::new();
        filters.insert(
            "label",
            vec![
                format!("{MANAGED_LABEL}={MANAGED_VALUE}"),
                format!("{INSTANCE_LABEL}={}", self.instance),
            ],
        );
        let opts = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let list = self
            .docker
            .list_containers(Some(opts))
            .await
            .map_err(|e| engine_err("listing containers", e))?;
        Ok(list
            .into_iter()
            .filter_map(|c| {
                let labels = c.labels.unwrap_or_default();
                let parse = |k: &str| labels.get(k).and_then(|v| Uuid::parse_str(v).ok());
                Some(ManagedContainer {
                    container_id: c.id?,
                    session_id: parse(SESSION_LABEL),
                    kernel_id: parse(KERNEL_LABEL),
                    // Paused is alive: a commit pauses the container for a moment.
                    running: c
                        .state
                        .map(|s| matches!(s.to_string().as_str(), "running" | "paused"))
                        .unwrap_or(false),
                })
            })
            .collect())
    }

    /// Images carrying Backend.AI's `ai.backend.kernelspec` label.
    async fn environment_images(&self) -> EngineResult<Vec<EngineImage>> {
        let mut filters = HashMap::new();
        filters.insert("label", vec!["ai.backend.kernelspec".to_string()]);
        let opts = ListImagesOptionsBuilder::default()
            .filters(&filters)
            .build();
        let list = self
            .docker
            .list_images(Some(opts))
            .await
            .map_err(|e| engine_err("listing images", e))?;
        Ok(list
            .into_iter()
            .map(|i| EngineImage {
                id: i.id,
                repo_tags: i.repo_tags,
                // A committed session's image keeps its container's management labels
                // (Docker's commit merges them in); they describe a container, not the image.
                labels: i
                    .labels
                    .into_iter()
                    .filter(|(k, _)| {
                        ![
                            MANAGED_LABEL,
                            INSTANCE_LABEL,
                            SESSION_LABEL,
                            KERNEL_LABEL,
                            "ai.backend.owner",
                        ]
                        .contains(&k.as_str())
                    })
                    .collect(),
                size: i.size,
            })
            .collect())
    }

    async fn resize_exec(&self, exec_id: &str, rows: u16, cols: u16) -> EngineResult<()> {
        let opts = bollard::query_parameters::ResizeExecOptionsBuilder::new()
            .h(i32::from(rows))
            .w(i32::from(cols))
            .build();
        self.docker
            .resize_exec(exec_id, opts)
            .await
            .map_err(|e| engine_err("resizing a terminal", e))
    }

    async fn exec_exit_code(&self, exec_id: &str) -> Option<i64> {
        self.docker.inspect_exec(exec_id).await.ok()?.exit_code
    }

    /// Cumulative CPU time (ns) and current memory of this installation's running
    /// containers, and how many there are (for the agent's live use).
    async fn usage_sample(&self) -> Option<(u64, u64, usize)> {
        let containers = self.managed_containers().await.ok()?;
        let running: Vec<_> = containers.into_iter().filter(|c| c.running).collect();
        // A bounded share of them, a few at a time, each answer bounded: a sample costs at
        // most usage::SAMPLE_MAX calls whatever the engine holds (the others' last readings
        // count meanwhile).
        let ids: Vec<String> = running.iter().map(|c| c.container_id.clone()).collect();
        let due = self.usage.lock().due(&ids, usage::SAMPLE_MAX);
        let read: Vec<(String, Option<(u64, u64)>)> = futures_util::stream::iter(due)
            .map(|id| async move {
                let figures = self.use_of(&id).await;
                (id, figures)
            })
            .buffer_unordered(SAMPLE_AT_ONCE)
            .collect()
            .await;
        let (cpu, mem) = {
            let mut book = self.usage.lock();
            let now = std::time::Instant::now();
            for (id, figures) in read {
                if let Some((cpu, mem)) = figures {
                    book.record(id, cpu, mem, now);
                }
            }
            book.totals()
        };
        Some((cpu, mem, running.len()))
    }

    /// NVML's view of this host: only an engine on this host has GPUs ([`gpu::detect`]).
    async fn gpu_sample(&self) -> Option<gpu::Snapshot> {
        if self.info.gpus.is_empty() {
            return None;
        }
        // NVML samples utilization about once a second: a fresher reading says nothing new.
        let mut cache = self.gpu_cache.lock().await;
        if let Some((at, snap)) = cache.as_ref()
            && at.elapsed() < std::time::Duration::from_secs(1)
        {
            return Some(snap.clone());
        }
        let snap = tokio::task::spawn_blocking(gpu::read).await.ok()?.ok()?;
        *cache = Some((std::time::Instant::now(), snap.clone()));
        Some(snap)
    }

    /// One CPU/memory sample: (CPU % of one core × cores used, memory bytes).
    async fn stats(&self, container_id: &str) -> Option<ContainerStats> {
        let opts = StatsOptionsBuilder::default()
            .stream(false)
            .one_shot(false)
            .build();
        let mut stream = self.docker.stats(container_id, Some(opts));
        let s = stream.next().await?.ok()?;
        container_stats(&s)
    }
}

/// What Docker's stats answer says of a container's use: CPU over the sample's interval
/// (against the host's CPU time, times its cores), memory now, and the block and network
/// byte counters summed over devices and interfaces (cgroup v1 writes "Read"/"Write", v2
/// "read"/"write"). None without CPU figures (a stopped container's answer).
fn container_stats(s: &bollard::models::ContainerStatsResponse) -> Option<ContainerStats> {
    let cpu = s.cpu_stats.as_ref()?;
    let pre = s.precpu_stats.as_ref()?;
    let total = cpu.cpu_usage.as_ref()?.total_usage? as f64;
    let pre_total = pre.cpu_usage.as_ref()?.total_usage.unwrap_or(0) as f64;
    let sys = cpu.system_cpu_usage.unwrap_or(0) as f64;
    let pre_sys = pre.system_cpu_usage.unwrap_or(0) as f64;
    let cpus = cpu.online_cpus.unwrap_or(1) as f64;
    let pct = if sys > pre_sys {
        (total - pre_total) / (sys - pre_sys) * cpus * 100.0
    } else {
        0.0
    };
    let mut out = ContainerStats {
        cpu_pct: pct.max(0.0),
        mem_bytes: s.memory_stats.as_ref().and_then(|m| m.usage).unwrap_or(0),
        ..ContainerStats::default()
    };
    let entries = s
        .blkio_stats
        .as_ref()
        .and_then(|b| b.io_service_bytes_recursive.as_deref())
        .unwrap_or_default();
    for e in entries {
        let v = e.value.unwrap_or(0);
        match e.op.as_deref().map(str::to_ascii_lowercase).as_deref() {
            Some("read") => out.io_read_bytes = out.io_read_bytes.saturating_add(v),
            Some("write") => out.io_write_bytes = out.io_write_bytes.saturating_add(v),
            _ => {}
        }
    }
    for n in s.networks.iter().flat_map(|m| m.values()) {
        out.net_rx_bytes = out.net_rx_bytes.saturating_add(n.rx_bytes.unwrap_or(0));
        out.net_tx_bytes = out.net_tx_bytes.saturating_add(n.tx_bytes.unwrap_or(0));
    }
    Some(out)
}

/// A tar header for an entry owned by `work` (uid/gid 1000), dated now.
fn work_header(mode: u32, size: u64, kind: tar::EntryType) -> tar::Header {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_uid(1000);
    h.set_gid(1000);
    h.set_mtime(now);
    h.set_size(size);
    h
}

/// A tar archive (the `tar` crate: names of any length through GNU long-name entries) of one
/// directory `dir` (unless empty) and the given regular files in it, all owned by uid/gid 1000.
fn tar_of(dir: &str, files: &[(&str, u32, &[u8])]) -> Result<Vec<u8>, String> {
    let mut b = tar::Builder::new(Vec::new());
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        let mut h = work_header(0o700, 0, tar::EntryType::Directory);
        b.append_data(&mut h, format!("{dir}/"), std::io::empty())
            .map_err(|e| e.to_string())?;
        format!("{dir}/")
    };
    for (name, mode, data) in files {
        let mut h = work_header(*mode, data.len() as u64, tar::EntryType::Regular);
        b.append_data(&mut h, format!("{prefix}{name}"), *data)
            .map_err(|e| e.to_string())?;
    }
    b.into_inner().map_err(|e| e.to_string())
}

/// A tar archive of `files` under /home/work, each with its parent directories (owned by
/// `work`, 0755) so that nested paths such as `.config/app/rc` are the user's to change.
fn home_archive(files: &[crate::HomeFile]) -> Result<Vec<u8>, String> {
    let header = |mode: u32, size: u64, kind| work_header(mode & 0o777, size, kind);
    let mut b = tar::Builder::new(Vec::new());
    let mut dirs = std::collections::BTreeSet::new();
    for f in files {
        let parts: Vec<&str> = f.path.split('/').collect();
        for depth in 1..parts.len() {
            let dir = parts[..depth].join("/");
            if dirs.insert(dir.clone()) {
                let mut h = header(0o755, 0, tar::EntryType::Directory);
                b.append_data(&mut h, format!("{dir}/"), std::io::empty())
                    .map_err(|e| e.to_string())?;
            }
        }
        let mut h = header(f.mode, f.data.len() as u64, tar::EntryType::Regular);
        b.append_data(&mut h, &f.path, f.data.as_slice())
            .map_err(|e| e.to_string())?;
    }
    b.into_inner().map_err(|e| e.to_string())
}

/// The contents of the first entry of a tar archive, if it is a regular file.
fn first_file_of_tar(archive: &[u8]) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut ar = tar::Archive::new(archive);
    let mut first = ar.entries().ok()?.next()?.ok()?;
    if first.header().entry_type() != tar::EntryType::Regular {
        return None;
    }
    let mut out = Vec::new();
    first.read_to_end(&mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    /// Docker's stats answers as it writes them (cgroup v2, then v1 with two devices and
    /// interfaces); the figures come out summed, ops of either case.
    #[test]
    fn container_stats_sums_block_and_network_io() {
        let v2: bollard::models::ContainerStatsResponse = serde_json::from_value(serde_json::json!({
            "cpu_stats": {"cpu_usage": {"total_usage": 3_000_000_000u64}, "system_cpu_usage": 20_000_000_000u64, "online_cpus": 2},
            "precpu_stats": {"cpu_usage": {"total_usage": 2_000_000_000u64}, "system_cpu_usage": 18_000_000_000u64},
            "memory_stats": {"usage": 52_428_800u64},
            "blkio_stats": {"io_service_bytes_recursive": [
                {"major": 8, "minor": 0, "op": "read", "value": 4096},
                {"major": 8, "minor": 0, "op": "write", "value": 1_048_576}
            ]},
            "networks": {"eth0": {"rx_bytes": 1500, "tx_bytes": 700}}
        }))
        .unwrap();
        let st = super::container_stats(&v2).unwrap();
        assert_eq!(st.cpu_pct, 100.0);
        assert_eq!(st.mem_bytes, 52_428_800);
        assert_eq!((st.io_read_bytes, st.io_write_bytes), (4096, 1_048_576));
        assert_eq!((st.net_rx_bytes, st.net_tx_bytes), (1500, 700));

        let v1: bollard::models::ContainerStatsResponse = serde_json::from_value(serde_json::json!({
            "cpu_stats": {"cpu_usage": {"total_usage": 10u64}, "system_cpu_usage": 10u64},
            "precpu_stats": {"cpu_usage": {"total_usage": 10u64}, "system_cpu_usage": 10u64},
            "blkio_stats": {"io_service_bytes_recursive": [
                {"major": 8, "minor": 0, "op": "Read", "value": 10},
                {"major": 8, "minor": 16, "op": "Read", "value": 5},
                {"major": 8, "minor": 0, "op": "Write", "value": 7},
                {"major": 8, "minor": 0, "op": "Total", "value": 22},
                {"major": 8, "minor": 0, "op": "Sync", "value": u64::MAX}
            ]},
            "networks": {"eth0": {"rx_bytes": 1, "tx_bytes": 2}, "eth1": {"rx_bytes": 30, "tx_bytes": 40}}
        }))
        .unwrap();
        let st = super::container_stats(&v1).unwrap();
        assert_eq!(st.cpu_pct, 0.0, "no time passed: no CPU use");
        assert_eq!((st.io_read_bytes, st.io_write_bytes), (15, 7));
        assert_eq!((st.net_rx_bytes, st.net_tx_bytes), (31, 42));

        // A stopped container's answer has no CPU figures: no sample.
        let stopped: bollard::models::ContainerStatsResponse =
            serde_json::from_value(serde_json::json!({"memory_stats": {}})).unwrap();
        assert!(super::container_stats(&stopped).is_none());
    }

    /// `openssl` in `dir`, failing the test when it fails.
    fn openssl(dir: &std::path::Path, args: &[&str]) {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl must be installed");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A CA `name`.pem and a client certificate `name`-client.pem (key: -client-key.pem).
    fn ca_with_client(dir: &std::path::Path, name: &str) {
        let (ca, ca_key) = (format!("{name}.pem"), format!("{name}-key.pem"));
        let (cert, key, csr) = (
            format!("{name}-client.pem"),
            format!("{name}-client-key.pem"),
            format!("{name}.csr"),
        );
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        let subject = format!("/CN={name} CA");
        openssl(
            dir,
            &[
                &["req", "-x509"][..],
                &ec,
                &[
                    "-days", "2", "-subj", &subject, "-keyout", &ca_key, "-out", &ca,
                ],
            ]
            .concat(),
        );
        openssl(
            dir,
            &[
                &["req"][..],
                &ec,
                &["-subj", "/CN=bai", "-keyout", &key, "-out", &csr],
            ]
            .concat(),
        );
        std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &ca,
                "-CAkey",
                &ca_key,
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                "client.ext",
                "-out",
                &cert,
            ],
        );
    }

    #[test]
    fn a_client_certificate_of_another_ca_is_refused_before_any_connection() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = std::env::temp_dir().join(format!("bai-engine-tls-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        ca_with_client(&dir, "hosts");
        ca_with_client(&dir, "rogue");
        let files = |client: &str| super::TlsFiles {
            ca: dir.join("hosts.pem"),
            cert: dir.join(format!("{client}-client.pem")),
            key: dir.join(format!("{client}-client-key.pem")),
        };
        assert!(super::tls_connector(&files("hosts")).is_ok());
        let refused = format!("{:#}", super::tls_connector(&files("rogue")).err().unwrap());
        assert!(refused.contains("is not signed by the CA"), "{refused}");
        // A key that is not the certificate's.
        let mixed = super::TlsFiles {
            key: dir.join("rogue-client-key.pem"),
            ..files("hosts")
        };
        assert!(super::tls_connector(&mixed).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tar_archive_lists_with_owner_and_mode() {
        let data =
            super::tar_of("config", &[("key", 0o600, b"secret\n"), ("b", 0o644, b"")]).unwrap();
        assert_eq!(data.len() % 512, 0);
        let dir = std::env::temp_dir().join(format!("bai-tar-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a.tar");
        std::fs::write(&file, &data).unwrap();
        let out = std::process::Command::new("tar")
            .arg("--numeric-owner")
            .arg("-tvf")
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let listing = String::from_utf8_lossy(&out.stdout);
        assert!(listing.contains("drwx------ 1000/1000"), "{listing}");
        assert!(
            listing.contains("-rw------- 1000/1000         7"),
            "{listing}"
        );
        assert!(listing.contains("config/key"), "{listing}");
        std::fs::remove_dir_all(&dir).unwrap();
        let only = super::tar_of("", &[("id", 0o600, b"abc")]).unwrap();
        assert_eq!(super::first_file_of_tar(&only).unwrap(), b"abc");
        assert_eq!(
            super::first_file_of_tar(&data),
            None,
            "a directory comes first"
        );
        // Long names (the official CLI's `--exec` uploads keep their relative paths).
        let long = format!("{}/file.py", "d".repeat(150));
        let data = super::tar_of("", &[(long.as_str(), 0o644, b"print(1)")]).unwrap();
        let mut ar = tar::Archive::new(data.as_slice());
        let entry = ar.entries().unwrap().next().unwrap().unwrap();
        assert_eq!(entry.path().unwrap().to_str().unwrap(), long);
    }
}
