//! Layer 3 of bai, a port: the container engine an agent drives. [`Engine`] is what the
//! services above may ask of an engine — run a kernel's container, run processes in it, read
//! its files, logs and use, list what it manages and the images it has. It takes and returns
//! plain data ([`KernelSpec`] with bind mounts and port numbers; no session or storage types),
//! so the services decide and the engine only does.
//!
//! Two implementations: [`docker::DockerEngine`] (bollard, the real one) and
//! [`memory::MemoryEngine`] (containers as records in memory, for fast lifecycle tests).
pub mod docker;
pub mod gpu;
pub mod memory;
pub mod network;

use std::net::IpAddr;
use std::pin::Pin;

use bai_types::slots::ResourceSlots;
use rust_decimal::Decimal;
use uuid::Uuid;

pub use gpu::GpuDevice;

/// Label marking containers this server manages.
pub const MANAGED_LABEL: &str = "ai.backend.managed-by";
pub const MANAGED_VALUE: &str = "bai";
pub const SESSION_LABEL: &str = "ai.backend.session-id";
pub const KERNEL_LABEL: &str = "ai.backend.kernel-id";
pub const INSTANCE_LABEL: &str = "ai.backend.bai-instance";

/// The most of a container's log read (and kept after the end): its newest part.
pub const MAX_LOG_BYTES: usize = 1024 * 1024;

/// What went wrong in an engine, in the words the services map to their error codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineError {
    /// The object (file, container) is not there.
    NotFound { what: &'static str, key: String },
    /// The engine refused the request for a reason the user can act on (a bad image name,
    /// a file too large); the message is safe to show.
    Refused(String),
    /// The container has stopped (a batch job that ended, a crash): nothing more can run in
    /// it. A normal end, not a failure of the engine.
    NotRunning,
    /// The engine could not be reached or did not answer in time (a network, a restart, a
    /// hang): nothing about the object is known, so nothing may be concluded from it — no
    /// container is taken for gone, no session for finished. `cause` is logged, never shown.
    Unreachable {
        context: &'static str,
        cause: String,
    },
    /// The engine failed; `cause` is logged, never shown.
    Failed {
        context: &'static str,
        cause: String,
    },
}

impl EngineError {
    pub fn failed(context: &'static str, cause: impl std::fmt::Display) -> Self {
        EngineError::Failed {
            context,
            cause: cause.to_string(),
        }
    }

    pub fn unreachable(context: &'static str, cause: impl std::fmt::Display) -> Self {
        EngineError::Unreachable {
            context,
            cause: cause.to_string(),
        }
    }

    /// An agent without a session subnet of its own was asked for a multi-node cluster's place.
    pub fn no_session_subnet(agent: &str) -> Self {
        EngineError::Refused(format!(
            "agent {agent} has no session subnet of its own (session_subnet): it cannot take part in a multi-node cluster session"
        ))
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, EngineError::NotFound { .. })
    }

    pub fn is_unreachable(&self) -> bool {
        matches!(self, EngineError::Unreachable { .. })
    }
}

pub type EngineResult<T> = Result<T, EngineError>;

/// The services' error for an engine's: not found, a refusal the user may read, or a failure
/// logged with a reference.
impl From<EngineError> for bai_core::error::ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::NotFound { what, key } => bai_core::error::ApiError::not_found(what, key),
            EngineError::Refused(m) => bai_core::error::ApiError::bad_request(m),
            EngineError::NotRunning => {
                bai_core::error::ApiError::conflict("The session's container is not running")
            }
            EngineError::Unreachable { context, cause } => bai_core::error::ApiError::new(
                bai_types::error::ErrorCode::Unavailable,
                "The agent's container engine does not answer; try again when it is back",
            )
            .with_source(format!("{context}: {cause}")),
            EngineError::Failed { context, cause } => {
                bai_core::error::ApiError::internal(context, cause)
            }
        }
    }
}

/// A host folder bound into a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    pub host_path: String,
    pub target: String,
    pub read_only: bool,
}

/// What to run: one kernel (container) of a session.
#[derive(Debug, Clone)]
pub struct KernelSpec {
    pub session_id: Uuid,
    pub kernel_id: Uuid,
    pub owner_access_key: String,
    pub image: String,
    pub hostname: String,
    pub cpu: Decimal,
    pub mem_bytes: i64,
    pub shmem_bytes: i64,
    pub gpu_ids: Vec<String>,
    /// The shares of each of `gpu_ids` granted (empty: whole devices).
    pub gpu_shares: Vec<Decimal>,
    pub env: Vec<(String, String)>,
    /// None = interactive (the container idles until terminated).
    pub command: Option<String>,
    /// Backend.AI's `bootstrap_script`: run once by `/bin/sh` before the command (its output
    /// goes to the container's log, its exit status is reported there and otherwise ignored);
    /// [`BOOTSTRAP_DONE`] exists once it has ended.
    pub bootstrap: Option<String>,
    /// A cluster session's private network ([`Engine::cluster_network`]): the container joins
    /// it at its own address, beside the session network.
    pub cluster: Option<ClusterPlace>,
    /// The image's service-port declaration, kept as a label (Backend.AI's format).
    pub service_ports: String,
    /// The container ports its services listen on (exposed, never published on the host).
    pub ports: Vec<u16>,
    pub pids_limit: i64,
    /// Storage folders bound into the container.
    pub mounts: Vec<BindMount>,
    /// Files written into /home/work before the container starts (Backend.AI's dotfiles),
    /// owned by `work`.
    pub home_files: Vec<HomeFile>,
}

/// A file put into a container's /home/work before it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeFile {
    /// Relative to /home/work, checked by the caller: no `..`, no empty component.
    pub path: String,
    /// Permission bits (at most 0o777).
    pub mode: u32,
    pub data: Vec<u8>,
}

/// Where one container of a cluster session sits: on the session's private network (one host),
/// or at a fixed address on its host's session network (a multi-node cluster, whose members
/// reach each other through the routed session subnets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterPlace {
    pub network: String,
    /// This container's address there.
    pub address: String,
    /// Every member's (hostname, address): written into each container's hosts file, so that
    /// `sub1` means this session's sub1 (the engine's own name service would also answer
    /// with other networks' containers of that hostname).
    pub hosts: Vec<(String, String)>,
}

/// A cluster session's network as made: its name and its members' addresses by local rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNet {
    pub name: String,
    pub addresses: Vec<String>,
}

/// The file a container's start wrapper creates once the bootstrap script has ended.
pub const BOOTSTRAP_DONE: &str = "/tmp/.bai-bootstrapped";

/// What an interactive kernel's container does once it is set up: says so in its log (the
/// kernel's log is never empty, as a Backend.AI kernel runner's is not), then idles as PID 1.
/// `$3`: the kernel's id.
const IDLE: &str = "echo \"bai: kernel $3 ready, $(id -un) on $(hostname)\"; exec sleep infinity";

/// The container's command: the bootstrap script first (when there is one), then the batch
/// command or, for an interactive session, an idle process. Script and command travel as
/// arguments, never spliced into the wrapper's text.
pub fn container_command(spec: &KernelSpec) -> Vec<String> {
    let kernel = spec.kernel_id.to_string();
    match (&spec.bootstrap, &spec.command) {
        (None, Some(c)) => vec!["/bin/bash".into(), "-c".into(), c.clone()],
        (None, None) => vec![
            "/bin/sh".into(),
            "-c".into(),
            IDLE.into(),
            "bai-start".into(),
            String::new(),
            String::new(),
            kernel,
        ],
        (Some(script), command) => {
            let wrapper = format!(
                "/bin/sh -c \"$1\" bootstrap; rc=$?; \
                 [ \"$rc\" -eq 0 ] || echo \"bootstrap script exited with $rc\" >&2; \
                 : > {BOOTSTRAP_DONE}; \
                 if [ -n \"$2\" ]; then exec /bin/bash -c \"$2\"; else {IDLE}; fi"
            );
            vec![
                "/bin/sh".into(),
                "-c".into(),
                wrapper,
                "bai-start".into(),
                script.clone(),
                command.clone().unwrap_or_default(),
                kernel,
            ]
        }
    }
}

/// A session's container to be committed as a new image ([`Engine::commit`]).
#[derive(Debug, Clone)]
pub struct CommitSpec {
    pub container_id: String,
    /// The kernel whose scratch volume (`/home/work`) goes into the image.
    pub kernel_id: Uuid,
    /// The new image, `registry/namespace/name:tag`.
    pub reference: String,
    /// Labels the image gets (over the base image's).
    pub labels: std::collections::HashMap<String, String>,
    /// The most bytes of `/home/work` the image may take in.
    pub home_limit: u64,
}

/// A managed container found on an engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedContainer {
    pub container_id: String,
    pub session_id: Option<Uuid>,
    pub kernel_id: Option<Uuid>,
    pub running: bool,
}

/// An environment image an engine holds (those carrying `ai.backend.kernelspec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineImage {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub labels: std::collections::HashMap<String, String>,
    pub size: i64,
}

/// One piece of a process's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecOutput {
    Stdout(bytes::Bytes),
    Stderr(bytes::Bytes),
}

impl ExecOutput {
    pub fn into_bytes(self) -> bytes::Bytes {
        match self {
            ExecOutput::Stdout(b) | ExecOutput::Stderr(b) => b,
        }
    }
}

pub type OutputStream = Pin<Box<dyn futures_util::Stream<Item = EngineResult<ExecOutput>> + Send>>;

/// An image archive (`docker save`) on its way from one engine to another.
pub type ByteStream = Pin<Box<dyn futures_util::Stream<Item = EngineResult<bytes::Bytes>> + Send>>;

/// How far an image's arrival has come: bytes done and bytes in all (0 while unknown).
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Send + Sync);

/// A process running in a container with its streams attached.
pub struct AttachedExec {
    pub id: String,
    pub output: OutputStream,
    pub input: Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
}

/// What an engine is: its identity and what it can hold, measured when it was connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineInfo {
    /// The agent id (`i-<host>`).
    pub id: String,
    /// The engine's own id (Docker's `ID`, kept in its data root): two endpoints that report
    /// one are one engine, or hosts cloned with it.
    pub engine_id: String,
    pub endpoint: String,
    pub capacity: ResourceSlots,
    pub gpus: Vec<GpuDevice>,
    pub architecture: String,
    pub version: String,
    /// The session network's configured subnet, routed between the hosts (remote engines).
    /// Only such an engine takes part in multi-node cluster sessions.
    pub session_subnet: Option<String>,
}

/// One sample of a container's use, as the engine reports it. The byte counters are totals
/// since the container started (block I/O of every device; network of every interface,
/// zero for a container without networking).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ContainerStats {
    /// CPU use in percent of one core (200 = two cores busy).
    pub cpu_pct: f64,
    pub mem_bytes: u64,
    pub io_read_bytes: u64,
    pub io_write_bytes: u64,
    pub net_rx_bytes: u64,
    pub net_tx_bytes: u64,
}

/// The container engine an agent drives.
#[async_trait::async_trait]
pub trait Engine: Send + Sync {
    fn info(&self) -> &EngineInfo;
    /// Whether the engine answers (within the call timeout).
    async fn ping(&self) -> EngineResult<()>;
    /// Creates and starts the container of one kernel; returns its id.
    async fn create_and_start(&self, spec: &KernelSpec) -> EngineResult<String>;
    /// The private network of one cluster session of `size` containers (made if missing):
    /// they reach each other there, and nothing else (no route out, the host refuses it).
    async fn cluster_network(&self, session_id: Uuid, size: usize) -> EngineResult<ClusterNet>;
    /// Removes what a cluster session has on this engine: its private network and, with
    /// `peers` (a multi-node cluster's, or unknown), its peer rules on the host
    /// ([`Engine::cluster_peers`]), whoever put them there; already gone is fine.
    async fn remove_cluster(&self, session_id: Uuid, peers: bool) -> EngineResult<()>;
    /// The sessions with a private network or peer rules of this installation on the engine.
    async fn cluster_sessions(&self) -> EngineResult<Vec<Uuid>>;
    /// `count` free addresses on the session network, from the top of its configured subnet
    /// down (the engine hands out the others from the bottom up): fixed addresses for the
    /// containers of a multi-node cluster, known before any of them starts. Refused on an
    /// engine whose session network has no configured subnet ([`EngineInfo::session_subnet`]).
    async fn session_addresses(&self, count: usize) -> EngineResult<Vec<String>>;
    /// Lets a multi-node cluster's containers on this engine's host (`local`, their session
    /// network addresses) reach every other member of the session (`members`, on any host)
    /// and be reached by them, and nothing more: rules naming both addresses, tagged with the
    /// session, removed by [`Engine::remove_cluster`].
    async fn cluster_peers(
        &self,
        session_id: Uuid,
        local: &[String],
        members: &[String],
    ) -> EngineResult<()>;
    /// Pulls `reference` (`registry/repo:tag`) with optional credentials, telling `progress`
    /// the layers' bytes as they arrive.
    async fn pull(
        &self,
        reference: &str,
        credentials: Option<(String, String)>,
        progress: Progress<'_>,
    ) -> EngineResult<()>;
    /// Whether the engine holds the image `reference` now.
    async fn has_image(&self, reference: &str) -> EngineResult<bool>;
    /// The image `reference` as a `docker save` archive, streamed, with the image's size (the
    /// archive is about as large).
    async fn export_image(&self, reference: &str) -> EngineResult<(u64, ByteStream)>;
    /// Loads a `docker save` archive (the image keeps its name and labels).
    async fn load_image(&self, archive: ByteStream) -> EngineResult<()>;
    /// Writes small files into a running container (owned by uid/gid 1000, `work`) under
    /// `parent`, creating `dir` if needed. Each entry is `(name inside dir, mode, contents)`.
    async fn put_files(
        &self,
        container_id: &str,
        parent: &str,
        dir: &str,
        files: &[(&str, u32, &[u8])],
    ) -> EngineResult<()>;
    /// Starts a process as `work` in /home/work and leaves it running.
    async fn spawn_detached(&self, container_id: &str, cmd: Vec<String>) -> EngineResult<()>;
    /// Starts a process as `work` in /home/work with its streams attached.
    async fn attach_exec(
        &self,
        container_id: &str,
        cmd: Vec<String>,
        tty: bool,
        env: Vec<String>,
    ) -> EngineResult<AttachedExec>;
    /// Resizes an attached process's terminal.
    async fn resize_exec(&self, exec_id: &str, rows: u16, cols: u16) -> EngineResult<()>;
    /// The exit code of a finished process (None while it runs or when unknown).
    async fn exec_exit_code(&self, exec_id: &str) -> Option<i64>;
    /// Reads one regular file (at most `limit` bytes) from a container.
    async fn read_file(
        &self,
        container_id: &str,
        path: &str,
        limit: usize,
    ) -> EngineResult<Vec<u8>>;
    /// A path in a container as the engine archives it (a tar of the file, or of the
    /// directory with what is beneath it; links stay links), at most `limit` bytes.
    async fn read_archive(
        &self,
        container_id: &str,
        path: &str,
        limit: usize,
    ) -> EngineResult<Vec<u8>>;
    /// Commits a running container as a new image: its own changes, then the contents of its
    /// scratch volume (`/home/work`, read through a container that is never started, so the
    /// storage folders bound beneath it stay out) as a layer of their own; `progress` hears
    /// the bytes of `/home/work` copied. Returns the new image's id.
    async fn commit(&self, spec: &CommitSpec, progress: Progress<'_>) -> EngineResult<String>;
    /// Removes the image `reference` (never one a container uses); already gone is fine.
    async fn remove_image(&self, reference: &str) -> EngineResult<()>;
    /// Removes dangling images; returns how many and the bytes reclaimed.
    async fn prune_dangling_images(&self) -> EngineResult<(usize, i64)>;
    /// The container's address, where the server reaches its ports.
    async fn address(&self, container_id: &str) -> Option<IpAddr>;
    /// The container's output so far (stdout and stderr, the newest [`MAX_LOG_BYTES`]).
    async fn logs(&self, container_id: &str) -> EngineResult<String>;
    /// Waits for the container to exit: its exit code; `NotFound` when it is gone,
    /// `Unreachable` when the engine stopped answering (the container may well be running).
    async fn wait(&self, container_id: &str) -> EngineResult<i64>;
    /// Stops (SIGTERM, then SIGKILL after the grace period) without removing; already gone
    /// is fine.
    async fn stop(&self, container_id: &str, grace_secs: i32) -> EngineResult<()>;
    /// Removes the container and its scratch volume; already gone is fine.
    async fn remove(&self, container_id: &str, kernel_id: Uuid) -> EngineResult<()>;
    /// Every container this installation manages on this engine, running or not.
    async fn managed_containers(&self) -> EngineResult<Vec<ManagedContainer>>;
    /// The environment images the engine holds.
    async fn environment_images(&self) -> EngineResult<Vec<EngineImage>>;
    /// Cumulative CPU time (ns) and memory of the running managed containers (each as last
    /// read: one sample reads a bounded share of them), and their count.
    async fn usage_sample(&self) -> Option<(u64, u64, usize)>;
    /// One sample of a running container's use (None: gone, stopped or unreadable).
    async fn stats(&self, container_id: &str) -> Option<ContainerStats>;
    /// What NVML reports of the engine's host now (None: no GPUs there, or unreadable).
    async fn gpu_sample(&self) -> Option<gpu::Snapshot> {
        None
    }
    /// The GPU use of a container's processes (None: the engine has no GPUs).
    async fn gpu_use(&self, container_id: &str) -> Option<gpu::GpuUse> {
        let snap = self.gpu_sample().await?;
        let pids = gpu::pids_in_container(&snap, std::path::Path::new("/proc"), container_id);
        Some(gpu::use_of(&snap, &pids))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(command: Option<&str>, bootstrap: Option<&str>) -> KernelSpec {
        KernelSpec {
            session_id: Uuid::nil(),
            kernel_id: Uuid::nil(),
            owner_access_key: String::new(),
            image: String::new(),
            hostname: "main1".into(),
            cpu: 1.into(),
            mem_bytes: 0,
            shmem_bytes: 0,
            gpu_ids: Vec::new(),
            gpu_shares: Vec::new(),
            env: Vec::new(),
            command: command.map(str::to_string),
            bootstrap: bootstrap.map(str::to_string),
            cluster: None,
            service_ports: String::new(),
            ports: Vec::new(),
            pids_limit: 0,
            mounts: Vec::new(),
            home_files: Vec::new(),
        }
    }

    /// Runs the command as the container would (with the host's shells).
    fn run(cmd: &[String]) -> (String, String) {
        let out = std::process::Command::new(&cmd[0])
            .args(&cmd[1..])
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    #[test]
    fn bootstrap_runs_first_and_its_text_stays_an_argument() {
        let idle = container_command(&spec(None, None));
        assert_eq!(idle[..2], ["/bin/sh", "-c"]);
        assert_eq!(
            idle.last().map(String::as_str),
            Some(Uuid::nil().to_string().as_str())
        );
        // An idle kernel says it is ready in its log, then idles.
        let mut child = std::process::Command::new(&idle[0])
            .args(&idle[1..])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut first,
        )
        .unwrap();
        assert!(
            first.starts_with(&format!("bai: kernel {} ready, ", Uuid::nil())),
            "{first}"
        );
        assert!(child.try_wait().unwrap().is_none(), "the kernel idles");
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            container_command(&spec(Some("echo hi"), None)),
            ["/bin/bash", "-c", "echo hi"]
        );
        // The script's failure is reported, and the job runs after it all the same.
        let _ = std::fs::remove_file(BOOTSTRAP_DONE);
        let (out, err) = run(&container_command(&spec(
            Some("echo job; exit 0"),
            Some("echo 'boot \"$2\"'; exit 3"),
        )));
        assert_eq!(out, "boot \"$2\"\njob\n");
        assert!(err.contains("bootstrap script exited with 3"), "{err}");
        // Quotes and substitutions in the script are the script's own, never the wrapper's.
        let (out, _) = run(&container_command(&spec(
            Some("echo after"),
            Some("echo \"; echo injected; \" | tr -d ';'"),
        )));
        assert_eq!(out, " echo injected \nafter\n");
        assert!(std::path::Path::new(BOOTSTRAP_DONE).exists());
    }
}
