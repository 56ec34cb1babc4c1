//! An engine whose containers are records in memory: the lifecycle (create, start, run, exit,
//! stop, remove) without Docker, so the services' session lifecycle is tested in milliseconds.
//! A test decides what the "containers" do: which images exist, when a container exits and
//! with what code, that the next create fails, what a container logged.
//!
//! It runs no processes: `attach_exec` is refused, `spawn_detached` only records the command.
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr};

use bai_types::slots::ResourceSlots;
use tokio::sync::watch;
use uuid::Uuid;

use crate::{
    AttachedExec, ContainerStats, EngineError, EngineImage, EngineInfo, EngineResult, KernelSpec,
    ManagedContainer,
};

/// One container as the in-memory engine keeps it.
#[derive(Debug, Clone)]
pub struct MemContainer {
    pub spec: KernelSpec,
    pub running: bool,
    /// The exit code once it has ended.
    pub exit_code: Option<i64>,
    pub logs: String,
    /// Files written with `put_files` (full path → contents).
    pub files: HashMap<String, Vec<u8>>,
    /// Commands started with `spawn_detached`.
    pub spawned: Vec<Vec<String>>,
}

#[derive(Default)]
struct Inner {
    containers: HashMap<String, MemContainer>,
    images: HashSet<String>,
    next_id: u64,
    fail_next_create: Option<String>,
    /// Every call, in order (`create <kernel>`, `stop <id>`, …), for assertions.
    calls: Vec<String>,
    /// The engine does not answer (a network down): every call fails `Unreachable`.
    unreachable: bool,
    /// The engine takes calls and never answers (a port whose packets are dropped): pings
    /// and usage samples wait forever.
    silent: bool,
    /// Bootstrap scripts never end (else they end at once).
    hold_bootstraps: bool,
    /// Commits wait until this is false again.
    hold_commits: bool,
    /// Multi-node clusters' peer rules: session → (local, peer) address pairs let through.
    peers: HashMap<Uuid, Vec<(String, String)>>,
    /// What `stats` reports of every running container's CPU (percent of one core).
    cpu_pct: f64,
}

fn unreachable(context: &'static str) -> EngineError {
    EngineError::unreachable(context, "the in-memory engine was told not to answer")
}

impl Inner {
    /// Whether the engine answers `call` (e.g. `stop <id>`); a call it does not answer is
    /// recorded as `<call>: unreachable`.
    fn answers(&mut self, call: String, context: &'static str) -> EngineResult<()> {
        if self.unreachable {
            self.calls.push(format!("{call}: unreachable"));
            return Err(unreachable(context));
        }
        Ok(())
    }
}

/// The in-memory engine. `changes` ticks on every container change so waiters wake.
pub struct MemoryEngine {
    info: EngineInfo,
    inner: Mutex<Inner>,
    changes: watch::Sender<u64>,
}

impl MemoryEngine {
    /// An engine `id` with `capacity` that holds the given images.
    pub fn new(id: &str, capacity: ResourceSlots, images: &[&str]) -> Self {
        let inner = Inner {
            images: images.iter().map(|i| i.to_string()).collect(),
            ..Inner::default()
        };
        Self {
            info: EngineInfo {
                id: id.to_string(),
                engine_id: id.to_string(),
                endpoint: format!("memory://{id}"),
                capacity,
                gpus: Vec::new(),
                architecture: std::env::consts::ARCH.to_string(),
                version: "memory".to_string(),
                session_subnet: None,
            },
            inner: Mutex::new(inner),
            changes: watch::Sender::new(0),
        }
    }

    /// The same engine with these GPUs (its capacity says how many, as a real agent's).
    pub fn with_gpus(mut self, gpus: Vec<crate::gpu::GpuDevice>) -> Self {
        self.info.gpus = gpus;
        self
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let mut guard = self.inner.lock();
        let out = f(&mut guard);
        drop(guard);
        self.changes.send_modify(|n| *n += 1);
        out
    }

    /// The same engine with a routed session subnet of its own (a remote host's).
    pub fn with_session_subnet(mut self, subnet: &str) -> Self {
        self.info.session_subnet = Some(subnet.to_string());
        self
    }

    /// The address pairs a multi-node cluster's peer rules let through here.
    pub fn peers_of(&self, session_id: Uuid) -> Vec<(String, String)> {
        self.inner
            .lock()
            .peers
            .get(&session_id)
            .cloned()
            .unwrap_or_default()
    }

    /// The next `create_and_start` fails with this reason (as the engine refusing it).
    pub fn fail_next_create(&self, reason: &str) {
        self.with(|i| i.fail_next_create = Some(reason.to_string()));
    }

    /// Bootstrap scripts of containers made from now on never end (`true`).
    pub fn hold_bootstraps(&self, hold: bool) {
        self.with(|i| i.hold_bootstraps = hold);
    }

    /// Commits from now on wait (`true`) until released (`false`).
    pub fn hold_commits(&self, hold: bool) {
        self.with(|i| i.hold_commits = hold);
    }

    /// The container ends with `code` (its main process exited), after writing `log`.
    pub fn exit(&self, container_id: &str, code: i64, log: &str) -> bool {
        self.with(|i| match i.containers.get_mut(container_id) {
            Some(c) if c.running => {
                c.running = false;
                c.exit_code = Some(code);
                c.logs.push_str(log);
                true
            }
            _ => false,
        })
    }

    /// A copy of the containers, by id.
    pub fn containers(&self) -> HashMap<String, MemContainer> {
        self.with(|i| i.containers.clone())
    }

    /// The container of one kernel, with its id.
    pub fn container_of(&self, kernel_id: Uuid) -> Option<(String, MemContainer)> {
        self.with(|i| {
            i.containers
                .iter()
                .find(|(_, c)| c.spec.kernel_id == kernel_id)
                .map(|(id, c)| (id.clone(), c.clone()))
        })
    }

    /// The engine stops (true) or starts again (false) answering; containers keep running.
    /// Takes an image away behind bai's back (as `docker rmi` on the host would).
    pub fn forget_image(&self, reference: &str) {
        self.with(|i| i.images.remove(reference));
    }

    /// Pings and usage samples wait forever (see `silent`) while `silent`.
    pub fn set_silent(&self, silent: bool) {
        self.with(|i| i.silent = silent);
    }

    pub fn set_unreachable(&self, down: bool) {
        self.with(|i| i.unreachable = down);
    }

    /// Every call made so far, in order.
    /// Every running container reports this CPU use (percent of one core) from now on.
    pub fn set_cpu_pct(&self, pct: f64) {
        self.with(|i| i.cpu_pct = pct);
    }

    pub fn calls(&self) -> Vec<String> {
        self.with(|i| i.calls.clone())
    }
}

#[async_trait::async_trait]
impl crate::Engine for MemoryEngine {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    async fn ping(&self) -> EngineResult<()> {
        if self.with(|i| i.silent) {
            std::future::pending::<()>().await;
        }
        if self.with(|i| i.unreachable) {
            return Err(unreachable("pinging"));
        }
        Ok(())
    }

    async fn create_and_start(&self, spec: &KernelSpec) -> EngineResult<String> {
        self.with(|i| {
            if i.unreachable {
                return Err(unreachable("creating a container"));
            }
            i.calls.push(format!("create {}", spec.kernel_id));
            if let Some(reason) = i.fail_next_create.take() {
                return Err(EngineError::Refused(format!(
                    "the container engine refused the session: {reason}"
                )));
            }
            if !i.images.contains(&spec.image) {
                return Err(EngineError::Refused(format!(
                    "the container engine refused the session: No such image: {}",
                    spec.image
                )));
            }
            i.next_id += 1;
            let id = format!("mem-{:012}", i.next_id);
            i.containers.insert(
                id.clone(),
                MemContainer {
                    spec: spec.clone(),
                    running: true,
                    exit_code: None,
                    logs: String::new(),
                    // The start wrapper's mark: a bootstrap script "ends" at once here
                    // (unless told to hold them).
                    files: spec
                        .bootstrap
                        .iter()
                        .filter(|_| !i.hold_bootstraps)
                        .map(|_| (crate::BOOTSTRAP_DONE.to_string(), Vec::new()))
                        .chain(
                            spec.home_files
                                .iter()
                                .map(|f| (format!("/home/work/{}", f.path), f.data.clone())),
                        )
                        .collect(),
                    spawned: Vec::new(),
                },
            );
            Ok(id)
        })
    }

    async fn pull(
        &self,
        reference: &str,
        _credentials: Option<(String, String)>,
        progress: crate::Progress<'_>,
    ) -> EngineResult<()> {
        self.with(|i| {
            i.answers(format!("pull {reference}"), "pulling an image")?;
            i.calls.push(format!("pull {reference}"));
            Ok::<_, EngineError>(())
        })?;
        let total = reference.len() as u64;
        progress(total / 2, total);
        progress(total, total);
        self.with(|i| i.images.insert(reference.to_string()));
        Ok(())
    }

    async fn has_image(&self, reference: &str) -> EngineResult<bool> {
        self.with(|i| {
            i.answers(format!("has {reference}"), "reading an image")?;
            Ok(i.images.contains(reference))
        })
    }

    /// The "archive" of an image is its name.
    async fn export_image(&self, reference: &str) -> EngineResult<(u64, crate::ByteStream)> {
        self.with(|i| {
            i.answers(format!("export {reference}"), "exporting an image")?;
            i.calls.push(format!("export {reference}"));
            if !i.images.contains(reference) {
                return Err(EngineError::NotFound {
                    what: "image",
                    key: reference.to_string(),
                });
            }
            Ok(())
        })?;
        let name = bytes::Bytes::from(reference.to_string());
        let size = name.len() as u64;
        let (a, b) = (name.slice(..name.len() / 2), name.slice(name.len() / 2..));
        Ok((size, Box::pin(futures_util::stream::iter([Ok(a), Ok(b)]))))
    }

    async fn load_image(&self, mut archive: crate::ByteStream) -> EngineResult<()> {
        use futures_util::StreamExt;
        self.with(|i| i.answers("load".into(), "loading an image"))?;
        let mut name = Vec::new();
        while let Some(chunk) = archive.next().await {
            name.extend_from_slice(&chunk?);
        }
        let name = String::from_utf8(name)
            .map_err(|_| EngineError::Refused("loading an image failed: not an archive".into()))?;
        self.with(|i| {
            i.calls.push(format!("load {name}"));
            i.images.insert(name)
        });
        Ok(())
    }

    async fn put_files(
        &self,
        container_id: &str,
        parent: &str,
        dir: &str,
        files: &[(&str, u32, &[u8])],
    ) -> EngineResult<()> {
        self.with(|i| {
            let c = running(i, container_id)?;
            for (name, _mode, data) in files {
                let path = [parent, dir, name]
                    .iter()
                    .filter(|p| !p.is_empty())
                    .map(|p| p.trim_end_matches('/'))
                    .collect::<Vec<_>>()
                    .join("/");
                c.files.insert(path, data.to_vec());
            }
            Ok(())
        })
    }

    async fn spawn_detached(&self, container_id: &str, cmd: Vec<String>) -> EngineResult<()> {
        self.with(|i| {
            let c = running(i, container_id)?;
            c.spawned.push(cmd);
            Ok(())
        })
    }

    async fn attach_exec(
        &self,
        _container_id: &str,
        _cmd: Vec<String>,
        _tty: bool,
        _env: Vec<String>,
    ) -> EngineResult<AttachedExec> {
        Err(EngineError::Refused(
            "the in-memory engine runs no processes".to_string(),
        ))
    }

    async fn resize_exec(&self, _exec_id: &str, _rows: u16, _cols: u16) -> EngineResult<()> {
        Ok(())
    }

    async fn exec_exit_code(&self, _exec_id: &str) -> Option<i64> {
        None
    }

    async fn read_file(
        &self,
        container_id: &str,
        path: &str,
        limit: usize,
    ) -> EngineResult<Vec<u8>> {
        self.with(|i| {
            let data = i
                .containers
                .get(container_id)
                .and_then(|c| c.files.get(path))
                .ok_or(EngineError::NotFound {
                    what: "file",
                    key: path.to_string(),
                })?;
            if data.len() > limit {
                return Err(EngineError::Refused(format!("{path} is too large")));
            }
            Ok(data.clone())
        })
    }

    async fn cluster_network(
        &self,
        session_id: Uuid,
        size: usize,
    ) -> EngineResult<crate::ClusterNet> {
        Ok(crate::ClusterNet {
            name: crate::network::cluster_network_name(session_id),
            addresses: (0..size).map(|i| format!("10.250.0.{}", i + 2)).collect(),
        })
    }

    async fn remove_cluster(&self, session_id: Uuid, peers: bool) -> EngineResult<()> {
        self.with(|i| {
            i.answers(format!("remove_cluster {session_id}"), "removing a cluster")?;
            if peers {
                i.peers.remove(&session_id);
            }
            Ok(())
        })
    }

    async fn cluster_sessions(&self) -> EngineResult<Vec<Uuid>> {
        self.with(|i| {
            i.answers("cluster_sessions".into(), "listing clusters")?;
            Ok(i.peers.keys().copied().collect())
        })
    }

    async fn session_addresses(&self, count: usize) -> EngineResult<Vec<String>> {
        let Some(subnet) = &self.info.session_subnet else {
            return Err(EngineError::no_session_subnet(&self.info.id));
        };
        self.with(|i| {
            // Held by a container, or named by a peer rule still there.
            let used: Vec<String> = i
                .containers
                .values()
                .filter_map(|c| c.spec.cluster.as_ref().map(|p| p.address.clone()))
                .chain(
                    i.peers
                        .values()
                        .flatten()
                        .flat_map(|(a, b)| [a.clone(), b.clone()]),
                )
                .collect();
            crate::network::free_from_top(subnet, &used, count)
                .ok_or_else(|| EngineError::Refused("no free session addresses".into()))
        })
    }

    async fn cluster_peers(
        &self,
        session_id: Uuid,
        local: &[String],
        members: &[String],
    ) -> EngineResult<()> {
        self.with(|i| {
            i.answers(format!("cluster_peers {session_id}"), "adding peer rules")?;
            let pairs = local
                .iter()
                .flat_map(|a| {
                    members
                        .iter()
                        .filter(move |b| *b != a)
                        .map(move |b| (a.clone(), b.clone()))
                })
                .collect();
            i.peers.insert(session_id, pairs);
            Ok(())
        })
    }

    async fn read_archive(
        &self,
        container_id: &str,
        path: &str,
        limit: usize,
    ) -> EngineResult<Vec<u8>> {
        let data = self.read_file(container_id, path, limit).await?;
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        let name = path.rsplit('/').next().unwrap_or(path);
        let mut ar = tar::Builder::new(Vec::new());
        ar.append_data(&mut header, name, data.as_slice())
            .and_then(|()| ar.into_inner())
            .map_err(|e| EngineError::failed("archiving a file", e))
    }

    async fn commit(
        &self,
        spec: &crate::CommitSpec,
        progress: crate::Progress<'_>,
    ) -> EngineResult<String> {
        let mut changes = self.changes.subscribe();
        while self.inner.lock().hold_commits {
            if changes.changed().await.is_err() {
                break;
            }
        }
        self.with(|i| {
            i.answers(
                format!("commit {} {}", spec.container_id, spec.reference),
                "committing a container",
            )?;
            if !i.containers.contains_key(&spec.container_id) {
                return Err(EngineError::NotFound {
                    what: "container",
                    key: spec.container_id.clone(),
                });
            }
            i.images.insert(spec.reference.clone());
            Ok(())
        })?;
        progress(0, 0);
        Ok(format!("sha256:{}", Uuid::new_v4().simple()))
    }

    async fn remove_image(&self, reference: &str) -> EngineResult<()> {
        self.with(|i| {
            i.answers(format!("remove_image {reference}"), "removing an image")?;
            i.images.remove(reference);
            Ok(())
        })
    }

    async fn prune_dangling_images(&self) -> EngineResult<(usize, i64)> {
        Ok((0, 0))
    }

    async fn address(&self, container_id: &str) -> Option<IpAddr> {
        self.with(|i| i.containers.contains_key(container_id))
            .then_some(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    async fn logs(&self, container_id: &str) -> EngineResult<String> {
        self.with(|i| {
            i.answers(format!("logs {container_id}"), "reading container logs")?;
            Ok(i.containers
                .get(container_id)
                .map(|c| c.logs.clone())
                .unwrap_or_default())
        })
    }

    async fn wait(&self, container_id: &str) -> EngineResult<i64> {
        let mut changes = self.changes.subscribe();
        loop {
            let state = self.with(|i| {
                i.answers(format!("wait {container_id}"), "waiting for a container")?;
                Ok(i.containers
                    .get(container_id)
                    .map(|c| (c.running, c.exit_code)))
            })?;
            let gone = || EngineError::NotFound {
                what: "container",
                key: container_id.to_string(),
            };
            match state {
                None => return Err(gone()),
                Some((false, code)) => return code.ok_or_else(gone),
                Some((true, _)) => {}
            }
            if changes.changed().await.is_err() {
                return Err(unreachable("waiting for a container"));
            }
        }
    }

    async fn stop(&self, container_id: &str, _grace_secs: i32) -> EngineResult<()> {
        self.with(|i| {
            i.answers(format!("stop {container_id}"), "stopping a container")?;
            i.calls.push(format!("stop {container_id}"));
            if let Some(c) = i.containers.get_mut(container_id)
                && c.running
            {
                c.running = false;
                // SIGTERM's exit code, as Docker reports it.
                c.exit_code = Some(143);
            }
            Ok(())
        })
    }

    async fn remove(&self, container_id: &str, _kernel_id: Uuid) -> EngineResult<()> {
        self.with(|i| {
            i.answers(format!("remove {container_id}"), "removing a container")?;
            i.calls.push(format!("remove {container_id}"));
            i.containers.remove(container_id);
            Ok(())
        })
    }

    async fn managed_containers(&self) -> EngineResult<Vec<ManagedContainer>> {
        if self.with(|i| i.unreachable) {
            return Err(unreachable("listing containers"));
        }
        Ok(self.with(|i| {
            i.containers
                .iter()
                .map(|(id, c)| ManagedContainer {
                    container_id: id.clone(),
                    session_id: Some(c.spec.session_id),
                    kernel_id: Some(c.spec.kernel_id),
                    running: c.running,
                })
                .collect()
        }))
    }

    async fn environment_images(&self) -> EngineResult<Vec<EngineImage>> {
        Ok(self.with(|i| {
            i.images
                .iter()
                .map(|name| EngineImage {
                    id: format!("sha256:{:0>64}", name.len()),
                    repo_tags: vec![name.clone()],
                    labels: [("ai.backend.kernelspec".to_string(), "1".to_string())]
                        .into_iter()
                        .collect(),
                    size: 0,
                })
                .collect()
        }))
    }

    async fn usage_sample(&self) -> Option<(u64, u64, usize)> {
        if self.with(|i| i.silent) {
            std::future::pending::<()>().await;
        }
        let running = self.with(|i| i.containers.values().filter(|c| c.running).count());
        Some((0, 0, running))
    }

    async fn stats(&self, container_id: &str) -> Option<ContainerStats> {
        self.with(|i| {
            i.containers
                .get(container_id)
                .filter(|c| c.running && !i.unreachable)
                .map(|_| ContainerStats {
                    cpu_pct: i.cpu_pct,
                    ..ContainerStats::default()
                })
        })
    }
}

/// A container to run something in: gone is not found, stopped is not running (as Docker's
/// 409).
fn running<'a>(i: &'a mut Inner, container_id: &str) -> EngineResult<&'a mut MemContainer> {
    match i.containers.get_mut(container_id) {
        Some(c) if c.running => Ok(c),
        Some(_) => Err(EngineError::NotRunning),
        None => Err(not_found(container_id)),
    }
}

fn not_found(container_id: &str) -> EngineError {
    EngineError::NotFound {
        what: "container",
        key: container_id.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Engine;

    fn spec(image: &str) -> KernelSpec {
        KernelSpec {
            session_id: Uuid::new_v4(),
            kernel_id: Uuid::new_v4(),
            owner_access_key: "AKIA".into(),
            image: image.into(),
            hostname: "main1".into(),
            cpu: 1.into(),
            mem_bytes: 1 << 30,
            shmem_bytes: 64 << 20,
            gpu_ids: Vec::new(),
            gpu_shares: Vec::new(),
            env: Vec::new(),
            command: None,
            bootstrap: None,
            cluster: None,
            service_ports: String::new(),
            ports: Vec::new(),
            pids_limit: 1024,
            mounts: Vec::new(),
            home_files: Vec::new(),
        }
    }

    #[tokio::test]
    async fn containers_run_exit_and_go() {
        let e = MemoryEngine::new("i-mem", ResourceSlots::new(), &["python:3.11"]);
        let refused = e.create_and_start(&spec("nope:1")).await;
        assert!(matches!(refused, Err(EngineError::Refused(m)) if m.contains("No such image")));
        let id = e.create_and_start(&spec("python:3.11")).await.unwrap();
        assert_eq!(e.managed_containers().await.unwrap().len(), 1);
        e.stop(&id, 10).await.unwrap();
        assert_eq!(e.wait(&id).await, Ok(143), "a stopped container has ended");
        // `wait` wakes when the container exits.
        let e2 = std::sync::Arc::new(MemoryEngine::new(
            "i-mem2",
            ResourceSlots::new(),
            &["python:3.11"],
        ));
        let id2 = e2.create_and_start(&spec("python:3.11")).await.unwrap();
        let w = tokio::spawn({
            let (e2, id2) = (e2.clone(), id2.clone());
            async move { e2.wait(&id2).await }
        });
        tokio::task::yield_now().await;
        assert!(e2.exit(&id2, 3, "bye\n"));
        assert_eq!(w.await.unwrap(), Ok(3));
        assert_eq!(e2.logs(&id2).await.unwrap(), "bye\n");
        e2.remove(&id2, Uuid::nil()).await.unwrap();
        assert!(e2.managed_containers().await.unwrap().is_empty());
        assert!(e2.wait(&id2).await.unwrap_err().is_not_found());
        e2.fail_next_create("out of disk");
        assert!(e2.create_and_start(&spec("python:3.11")).await.is_err());
        assert!(e2.create_and_start(&spec("python:3.11")).await.is_ok());
    }

    #[tokio::test]
    async fn an_engine_that_does_not_answer_says_so_and_concludes_nothing() {
        let e = std::sync::Arc::new(MemoryEngine::new(
            "i-mem",
            ResourceSlots::new(),
            &["python:3.11"],
        ));
        let id = e.create_and_start(&spec("python:3.11")).await.unwrap();
        let w = tokio::spawn({
            let (e, id) = (e.clone(), id.clone());
            async move { e.wait(&id).await }
        });
        tokio::task::yield_now().await;
        e.set_unreachable(true);
        let waited = w.await.unwrap().unwrap_err();
        assert!(waited.is_unreachable(), "{waited:?}");
        assert!(e.ping().await.unwrap_err().is_unreachable());
        assert!(e.stop(&id, 1).await.unwrap_err().is_unreachable());
        assert!(
            e.remove(&id, Uuid::nil())
                .await
                .unwrap_err()
                .is_unreachable()
        );
        e.set_unreachable(false);
        assert!(
            e.containers()[&id].running,
            "nothing was done to the container"
        );
    }
}
