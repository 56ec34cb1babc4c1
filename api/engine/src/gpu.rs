//! GPUs through NVML. Without an NVIDIA driver there are simply no GPUs.
//!
//! Reading ([`read`], the only code that calls NVML) is kept apart from deciding (pure
//! functions over a [`Snapshot`]: which devices an agent offers, what a fractional share may
//! use under MPS, which session uses how much), so the decisions are tested over made-up
//! snapshots on machines that have no GPU.
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use serde::Serialize;

/// One device a container can be given: a whole GPU, or a MIG instance an admin created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuDevice {
    /// As Docker's DeviceRequests take it: the GPU's index, or a MIG instance's UUID.
    pub id: String,
    /// The GPU's (or MIG instance's) UUID; NVML's handle for its processes.
    pub uuid: String,
    pub name: String,
    pub memory_bytes: u64,
}

/// What NVML reports of this host at one moment.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Snapshot {
    pub driver_version: String,
    pub nvml_version: String,
    /// The CUDA version the driver supports, `major.minor`.
    pub cuda_version: Option<String>,
    pub gpus: Vec<GpuReport>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct GpuReport {
    pub index: u32,
    pub uuid: String,
    pub name: String,
    pub memory_total: u64,
    pub memory_used: u64,
    /// Percent of the last sample period a kernel ran (None: NVML cannot say).
    pub utilization_gpu: Option<u32>,
    pub utilization_memory: Option<u32>,
    /// MIG mode now and after the next reset (None: the GPU has no MIG).
    pub mig_enabled: Option<bool>,
    pub mig_pending: Option<bool>,
    pub mig_instances: Vec<MigInstance>,
    /// Compute processes on this GPU (host PIDs), with their memory and SM use.
    pub processes: Vec<GpuProcess>,
    /// What NVML refused to tell (field: reason); the rest is still reported.
    pub unreadable: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct MigInstance {
    pub uuid: String,
    pub name: String,
    pub memory_total: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct GpuProcess {
    pub pid: u32,
    pub used_memory: Option<u64>,
    /// SM utilization over the last sample period, percent of the GPU.
    pub sm_util: Option<u32>,
}

/// Reads every GPU NVML sees; Err with the reason when NVML or the driver is missing.
pub fn read() -> Result<Snapshot, String> {
    // One NVML session for the process: samples are taken every few seconds.
    static NVML: std::sync::OnceLock<Result<nvml_wrapper::Nvml, String>> =
        std::sync::OnceLock::new();
    let nvml = NVML
        .get_or_init(|| nvml_wrapper::Nvml::init().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(Clone::clone)?;
    let mut snap = Snapshot {
        driver_version: nvml.sys_driver_version().unwrap_or_default(),
        nvml_version: nvml.sys_nvml_version().unwrap_or_default(),
        cuda_version: nvml
            .sys_cuda_driver_version()
            .ok()
            .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10)),
        gpus: Vec::new(),
    };
    let count = nvml.device_count().map_err(|e| e.to_string())?;
    for index in 0..count {
        let d = match nvml.device_by_index(index) {
            Ok(d) => d,
            Err(e) => {
                snap.gpus.push(GpuReport {
                    index,
                    unreadable: vec![format!("device: {e}")],
                    ..Default::default()
                });
                continue;
            }
        };
        let mut g = GpuReport {
            index,
            ..Default::default()
        };
        let note = |what: &str, e: nvml_wrapper::error::NvmlError| format!("{what}: {e}");
        let mut unreadable = Vec::new();
        match d.uuid() {
            Ok(u) => g.uuid = u,
            Err(e) => unreadable.push(note("uuid", e)),
        }
        g.name = d.name().unwrap_or_else(|_| "NVIDIA GPU".into());
        match d.memory_info() {
            Ok(m) => {
                g.memory_total = m.total;
                g.memory_used = m.used;
            }
            Err(e) => unreadable.push(note("memory", e)),
        }
        match d.utilization_rates() {
            Ok(u) => {
                g.utilization_gpu = Some(u.gpu);
                g.utilization_memory = Some(u.memory);
            }
            Err(e) => unreadable.push(note("utilization", e)),
        }
        match d.mig_mode() {
            Ok(m) => {
                g.mig_enabled = Some(m.current == 1);
                g.mig_pending = Some(m.pending == 1);
            }
            // Not an error: most GPUs have no MIG.
            Err(nvml_wrapper::error::NvmlError::NotSupported) => {}
            Err(e) => unreadable.push(note("mig mode", e)),
        }
        if g.mig_enabled == Some(true) {
            // NVML: the most MIG devices this GPU can hold; unused slots answer NotFound.
            let n = d.mig_device_count().unwrap_or(0);
            for i in 0..n {
                // Unused slots answer NotFound.
                if let Ok(m) = d.mig_device_by_index(i) {
                    g.mig_instances.push(MigInstance {
                        uuid: m.uuid().unwrap_or_default(),
                        name: m.name().unwrap_or_default(),
                        memory_total: m.memory_info().map(|x| x.total).unwrap_or(0),
                    });
                }
            }
        }
        match d.running_compute_processes() {
            Ok(ps) => {
                g.processes = ps
                    .into_iter()
                    .map(|p| GpuProcess {
                        pid: p.pid,
                        used_memory: match p.used_gpu_memory {
                            nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => Some(b),
                            nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => None,
                        },
                        sm_util: None,
                    })
                    .collect()
            }
            Err(e) => unreadable.push(note("processes", e)),
        }
        // Per-process SM use over the last samples (NotFound: no process ran lately).
        if let Ok(samples) = d.process_utilization_stats(None) {
            for s in samples {
                if let Some(p) = g.processes.iter_mut().find(|p| p.pid == s.pid) {
                    p.sm_util = Some(p.sm_util.unwrap_or(0).max(s.sm_util));
                }
            }
        }
        g.unreadable = unreadable;
        snap.gpus.push(g);
    }
    Ok(snap)
}

/// The devices an agent offers: each GPU wholly, except that a GPU in MIG mode offers its MIG
/// instances instead (none while the admin has created none).
pub fn devices(s: &Snapshot) -> Vec<GpuDevice> {
    let mut out = Vec::new();
    for g in &s.gpus {
        if g.uuid.is_empty() {
            continue; // unreadable: never offered
        }
        if g.mig_enabled == Some(true) {
            out.extend(g.mig_instances.iter().map(|m| GpuDevice {
                id: m.uuid.clone(),
                uuid: m.uuid.clone(),
                name: m.name.clone(),
                memory_bytes: m.memory_total,
            }));
        } else {
            out.push(GpuDevice {
                id: g.index.to_string(),
                uuid: g.uuid.clone(),
                name: g.name.clone(),
                memory_bytes: g.memory_total,
            });
        }
    }
    out
}

/// The GPUs NVML reports, or none when the library or driver is missing.
pub fn detect() -> Vec<GpuDevice> {
    match read() {
        Ok(s) => {
            for g in &s.gpus {
                if g.mig_enabled == Some(true) && g.mig_instances.is_empty() {
                    tracing::warn!(
                        gpu = g.index,
                        "GPU in MIG mode without MIG instances: not offered"
                    );
                }
                if !g.unreadable.is_empty() {
                    tracing::warn!(gpu = g.index, unreadable = ?g.unreadable, "NVML could not read all of a GPU");
                }
            }
            let out = devices(&s);
            tracing::info!(count = out.len(), driver = %s.driver_version, "NVIDIA GPUs detected");
            out
        }
        Err(reason) => {
            tracing::info!(%reason, "no NVIDIA GPUs: NVML is not available");
            Vec::new()
        }
    }
}

/// The GPU slots an agent with these devices advertises: `cuda.device` (whole devices) and
/// `cuda.shares` (`per_gpu` shares of each).
pub fn slots(devices: &[GpuDevice], per_gpu: u32) -> Vec<(&'static str, Decimal)> {
    if devices.is_empty() {
        return Vec::new();
    }
    let n = Decimal::from(devices.len());
    vec![
        ("cuda.device", n),
        ("cuda.shares", n * Decimal::from(per_gpu.max(1))),
    ]
}

/// Picks devices for a request: `cuda.device = n` takes n wholly free devices; `cuda.shares =
/// s` takes one device with `s` free shares, or ⌈s / per_gpu⌉ wholly free devices when `s` is
/// larger than one device. `used` maps device id → shares in use. None = does not fit.
pub fn allocate(
    devices: &[GpuDevice],
    used: &BTreeMap<String, Decimal>,
    per_gpu: Decimal,
    whole_devices: Decimal,
    shares: Decimal,
) -> Option<Vec<(String, Decimal)>> {
    let free = |d: &GpuDevice| per_gpu - used.get(&d.id).copied().unwrap_or_default();
    let wholly_free: Vec<&GpuDevice> = devices.iter().filter(|d| free(d) == per_gpu).collect();
    if whole_devices > Decimal::ZERO {
        let n = usize::try_from(whole_devices.ceil().mantissa()).ok()?;
        if wholly_free.len() < n {
            return None;
        }
        return Some(
            wholly_free
                .iter()
                .take(n)
                .map(|d| (d.id.clone(), per_gpu))
                .collect(),
        );
    }
    if shares <= Decimal::ZERO {
        return Some(Vec::new());
    }
    if shares <= per_gpu {
        // Fill the fullest device that still fits, keeping whole devices free for others.
        return devices
            .iter()
            .filter(|d| free(d) >= shares)
            .min_by_key(|d| free(d))
            .map(|d| vec![(d.id.clone(), shares)]);
    }
    let n = usize::try_from((shares / per_gpu).ceil().mantissa()).ok()?;
    if wholly_free.len() < n {
        return None;
    }
    let mut left = shares;
    let mut out = Vec::new();
    for d in wholly_free.iter().take(n) {
        let take = left.min(per_gpu);
        out.push((d.id.clone(), take));
        left -= take;
    }
    Some(out)
}

/// Where a session finds the MPS control daemon's pipes.
pub const MPS_PIPE_IN_CONTAINER: &str = "/tmp/nvidia-mps";

/// What MPS lets one container use: a share of each device's threads (SMs) and pinned memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MpsLimits {
    /// `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`: one figure for all the container's devices.
    pub active_thread_percentage: u32,
    /// `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`: (device index inside the container, MiB), for the
    /// devices the container holds a fraction of.
    pub pinned_mib: Vec<(usize, u64)>,
}

/// The MPS limits of a container given `grants` (each device's memory in bytes and the shares
/// of it granted, in the container's device order), `per_gpu` shares to a device. None when
/// every grant is a whole device (nothing to limit).
pub fn mps_limits(grants: &[(u64, Decimal)], per_gpu: u32) -> Option<MpsLimits> {
    let per_gpu = Decimal::from(per_gpu.max(1));
    let mut pct = 0u32;
    let mut pinned = Vec::new();
    for (i, (memory, shares)) in grants.iter().enumerate() {
        let fraction = (*shares / per_gpu).min(Decimal::ONE).max(Decimal::ZERO);
        // Threads round up (a sliver of a GPU still runs), memory down (never over its share).
        let p = (fraction * Decimal::ONE_HUNDRED)
            .ceil()
            .to_u32()
            .unwrap_or(100)
            .clamp(1, 100);
        pct = pct.max(p);
        if fraction < Decimal::ONE {
            let mib = (Decimal::from(*memory / (1024 * 1024)) * fraction)
                .floor()
                .to_u64()
                .unwrap_or(0)
                .max(1);
            pinned.push((i, mib));
        }
    }
    (!pinned.is_empty()).then_some(MpsLimits {
        active_thread_percentage: pct,
        pinned_mib: pinned,
    })
}

/// The environment that makes a container an MPS client under `limits`.
pub fn mps_env(limits: &MpsLimits) -> Vec<(String, String)> {
    let pinned = limits
        .pinned_mib
        .iter()
        .map(|(i, mib)| format!("{i}={mib}M"))
        .collect::<Vec<_>>()
        .join(",");
    vec![
        (
            "CUDA_MPS_PIPE_DIRECTORY".into(),
            MPS_PIPE_IN_CONTAINER.into(),
        ),
        (
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".into(),
            limits.active_thread_percentage.to_string(),
        ),
        ("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT".into(), pinned),
    ]
}

/// The directory of `device`'s MPS control daemon under `dir` (`scripts/mps.sh`: one daemon per
/// device, in `dir/<UUID>`); None for a UUID that is no plain name.
pub fn mps_device_dir(dir: &Path, uuid: &str) -> Option<std::path::PathBuf> {
    let plain = !uuid.is_empty()
        && uuid.len() <= 128
        && uuid.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    plain.then(|| dir.join(uuid))
}

/// Whether `device`'s MPS control daemon is set up the way bai expects under `dir`
/// ([`mps_device_dir`]): its `pipe/control` socket answers a connection (a daemon that died
/// leaves the socket file behind) and its `/dev/shm` is there as `shm`.
pub fn mps_ready(dir: &Path, uuid: &str) -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    let Some(dir) = mps_device_dir(dir, uuid) else {
        return Err(format!("device UUID {uuid:?} is no plain name"));
    };
    let control = dir.join("pipe").join("control");
    match std::fs::symlink_metadata(&control) {
        Ok(m) if m.file_type().is_socket() => {}
        Ok(_) => return Err(format!("{} is not a socket", control.display())),
        Err(e) => {
            return Err(format!(
                "no MPS control daemon for {uuid}: {} ({e})",
                control.display()
            ));
        }
    }
    // The daemon listens on a SOCK_SEQPACKET socket, which a stream connection reaches only
    // as far as the kernel's type check: EPROTOTYPE means a listener is bound there (seen on
    // an H200), ECONNREFUSED that none is (a daemon that died leaves the file).
    const EPROTOTYPE: i32 = 91; // Linux
    match std::os::unix::net::UnixStream::connect(&control) {
        Ok(_) => {}
        Err(e) if e.raw_os_error() == Some(EPROTOTYPE) => {}
        Err(e) => {
            return Err(format!(
                "the MPS control daemon for {uuid} does not answer at {} ({e})",
                control.display()
            ));
        }
    }
    let shm = dir.join("shm");
    match std::fs::symlink_metadata(&shm) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!("{} is not a directory", shm.display())),
        Err(e) => Err(format!("no MPS shared memory: {} ({e})", shm.display())),
    }
}

/// Whether every device has its MPS daemon ready (the first that has not, with why).
pub fn mps_all_ready(dir: &Path, devices: &[GpuDevice]) -> Result<(), String> {
    devices.iter().try_for_each(|d| mps_ready(dir, &d.uuid))
}

/// GPU use of one container (or agent): SM utilization (percent of one GPU, summed over its
/// devices) and device memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct GpuUse {
    pub util_pct: f64,
    pub mem_bytes: u64,
}

/// The GPU use of the processes `pids` (host PIDs) in a snapshot. NVML does not attribute SM
/// use to every process — never to MPS clients (their server holds it; seen on an H200), nor to
/// a process that ran no kernel lately — so a process without a figure counts its device's
/// whole utilization: an upper bound, which keeps a busy MPS session from looking idle and is 0
/// on a device nobody uses. At most 100 % per device.
pub fn use_of(s: &Snapshot, pids: &HashSet<u32>) -> GpuUse {
    let mut u = GpuUse::default();
    for g in &s.gpus {
        let mut util = 0.0;
        for p in g.processes.iter().filter(|p| pids.contains(&p.pid)) {
            util += f64::from(p.sm_util.or(g.utilization_gpu).unwrap_or(0));
            u.mem_bytes += p.used_memory.unwrap_or(0);
        }
        u.util_pct += util.min(100.0);
    }
    u
}

/// The PIDs among a snapshot's GPU processes that run in the container `container_id`, read
/// from `proc_root` (`/proc`): a process of a Docker container names the container's full id
/// in its cgroup path (cgroup v1 and v2, systemd and cgroupfs drivers alike).
pub fn pids_in_container(s: &Snapshot, proc_root: &Path, container_id: &str) -> HashSet<u32> {
    // A short or empty id would match too much.
    if container_id.len() < 32 || !container_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return HashSet::new();
    }
    s.gpus
        .iter()
        .flat_map(|g| &g.processes)
        .map(|p| p.pid)
        .filter(|pid| {
            // Bounded: a cgroup file is a few lines.
            std::fs::read(proc_root.join(pid.to_string()).join("cgroup"))
                .ok()
                .filter(|b| b.len() < 64 * 1024)
                .is_some_and(|b| String::from_utf8_lossy(&b).contains(container_id))
        })
        .collect()
}

/// Each device's utilization and memory, for an agent's live statistics.
pub fn device_use(s: &Snapshot) -> Vec<(String, GpuUse, u64)> {
    s.gpus
        .iter()
        .map(|g| {
            (
                g.uuid.clone(),
                GpuUse {
                    util_pct: f64::from(g.utilization_gpu.unwrap_or(0)),
                    mem_bytes: g.memory_used,
                },
                g.memory_total,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1024 * 1024 * 1024;

    fn dev(id: &str) -> GpuDevice {
        GpuDevice {
            id: id.into(),
            uuid: format!("GPU-{id}"),
            name: "GPU".into(),
            memory_bytes: 0,
        }
    }

    fn gpu(index: u32) -> GpuReport {
        GpuReport {
            index,
            uuid: format!("GPU-{index:08x}-aaaa"),
            name: "NVIDIA H200".into(),
            memory_total: 141 * GIB,
            mig_enabled: Some(false),
            mig_pending: Some(false),
            ..Default::default()
        }
    }

    fn snapshot(gpus: Vec<GpuReport>) -> Snapshot {
        Snapshot {
            driver_version: "580.159.04".into(),
            nvml_version: "13.580.159.04".into(),
            cuda_version: Some("13.0".into()),
            gpus,
        }
    }

    #[test]
    fn no_driver_means_no_gpus() {
        // This machine has no NVIDIA driver; detection must degrade to an empty list.
        if std::path::Path::new("/proc/driver/nvidia").exists() {
            return;
        }
        assert!(read().is_err());
        assert!(detect().is_empty());
    }

    #[test]
    fn whole_gpus_mig_instances_and_unreadable_gpus_are_offered_as_they_should() {
        let mut mig = gpu(1);
        mig.mig_enabled = Some(true);
        mig.mig_instances = vec![
            MigInstance {
                uuid: "MIG-1111".into(),
                name: "NVIDIA H200 MIG 3g.71gb".into(),
                memory_total: 71 * GIB,
            },
            MigInstance {
                uuid: "MIG-2222".into(),
                name: "NVIDIA H200 MIG 1g.18gb".into(),
                memory_total: 18 * GIB,
            },
        ];
        let mut empty_mig = gpu(2);
        empty_mig.mig_enabled = Some(true);
        let broken = GpuReport {
            index: 3,
            unreadable: vec!["device: Unknown".into()],
            ..Default::default()
        };
        let d = devices(&snapshot(vec![gpu(0), mig, empty_mig, broken]));
        let ids: Vec<&str> = d.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["0", "MIG-1111", "MIG-2222"]);
        assert_eq!(d[2].memory_bytes, 18 * GIB);
        assert_eq!(
            slots(&d, 10),
            vec![
                ("cuda.device", Decimal::from(3)),
                ("cuda.shares", Decimal::from(30))
            ]
        );
        assert!(slots(&[], 10).is_empty());
    }

    #[test]
    fn allocation() {
        let devs = [dev("0"), dev("1")];
        let one = Decimal::ONE;
        let mut used = BTreeMap::new();
        assert_eq!(
            allocate(&devs, &used, one, Decimal::from(2), Decimal::ZERO)
                .unwrap()
                .len(),
            2
        );
        assert!(allocate(&devs, &used, one, Decimal::from(3), Decimal::ZERO).is_none());
        used.insert("0".to_string(), Decimal::new(5, 1));
        let frac = allocate(&devs, &used, one, Decimal::ZERO, Decimal::new(3, 1)).unwrap();
        assert_eq!(
            frac,
            vec![("0".to_string(), Decimal::new(3, 1))],
            "packs onto the partly used device"
        );
        assert!(
            allocate(&devs, &used, one, Decimal::ZERO, Decimal::new(15, 1)).is_none(),
            "needs two free devices"
        );
        assert_eq!(
            allocate(&devs, &used, one, Decimal::ONE, Decimal::ZERO).unwrap(),
            vec![("1".to_string(), one)]
        );
    }

    #[test]
    fn shares_beyond_one_device_take_whole_devices_and_the_rest() {
        let devs = [dev("0"), dev("1"), dev("2")];
        let ten = Decimal::from(10);
        let got = allocate(
            &devs,
            &BTreeMap::new(),
            ten,
            Decimal::ZERO,
            Decimal::from(15),
        );
        assert_eq!(
            got.unwrap(),
            vec![("0".into(), ten), ("1".into(), Decimal::from(5))]
        );
    }

    #[test]
    fn mps_limits_follow_the_share() {
        // A quarter of a 141 GiB GPU: 25 % of its threads, a quarter of its memory (MiB).
        let l = mps_limits(&[(141 * GIB, Decimal::new(25, 1))], 10).unwrap();
        assert_eq!(l.active_thread_percentage, 25);
        assert_eq!(l.pinned_mib, vec![(0, 141 * 1024 / 4)]);
        assert_eq!(
            mps_env(&l),
            vec![
                (
                    "CUDA_MPS_PIPE_DIRECTORY".to_string(),
                    "/tmp/nvidia-mps".to_string()
                ),
                ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".into(), "25".into()),
                ("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT".into(), "0=36096M".into()),
            ]
        );
        // Threads round up, memory down: a third is 34 %, never more memory than a third.
        let third = mps_limits(&[(3 * GIB + 2 * 1024 * 1024, Decimal::ONE)], 3).unwrap();
        assert_eq!(third.active_thread_percentage, 34);
        assert_eq!(third.pinned_mib, vec![(0, 1024)]);
        // A sliver still runs; nothing is ever zero.
        let sliver = mps_limits(&[(GIB, Decimal::new(1, 2))], 100).unwrap();
        assert_eq!(sliver.active_thread_percentage, 1);
        assert_eq!(sliver.pinned_mib, vec![(0, 1)]);
        // A whole device needs no limit; 1.5 devices limit the second device's memory only
        // and let the threads run on the whole first device.
        assert_eq!(mps_limits(&[(GIB, Decimal::from(10))], 10), None);
        let one_and_half =
            mps_limits(&[(GIB, Decimal::from(10)), (GIB, Decimal::from(5))], 10).unwrap();
        assert_eq!(one_and_half.active_thread_percentage, 100);
        assert_eq!(one_and_half.pinned_mib, vec![(1, 512)]);
        assert_eq!(
            mps_env(&one_and_half)[2].1,
            "1=512M",
            "device indices are the container's own"
        );
    }

    #[test]
    fn mps_readiness_needs_a_live_daemon_per_device_and_its_shared_memory() {
        let root = std::env::temp_dir().join(format!("bai-mps-{}", std::process::id()));
        let uuid = "GPU-c43923dc-3b61-0950-edba-8dc554994af9";
        let dir = root.join(uuid);
        std::fs::create_dir_all(dir.join("pipe")).unwrap();
        assert!(
            mps_ready(&root, uuid)
                .unwrap_err()
                .contains("no MPS control daemon")
        );
        // A regular file named control is not a daemon.
        std::fs::write(dir.join("pipe/control"), b"").unwrap();
        assert!(mps_ready(&root, uuid).unwrap_err().contains("not a socket"));
        std::fs::remove_file(dir.join("pipe/control")).unwrap();
        // A daemon that died leaves its socket behind: nobody answers there.
        drop(std::os::unix::net::UnixListener::bind(dir.join("pipe/control")).unwrap());
        assert!(
            mps_ready(&root, uuid)
                .unwrap_err()
                .contains("does not answer")
        );
        std::fs::remove_file(dir.join("pipe/control")).unwrap();
        let _l = std::os::unix::net::UnixListener::bind(dir.join("pipe/control")).unwrap();
        assert!(
            mps_ready(&root, uuid)
                .unwrap_err()
                .contains("shared memory")
        );
        std::fs::create_dir(dir.join("shm")).unwrap();
        assert_eq!(mps_ready(&root, uuid), Ok(()));
        // Another device has no daemon: not all are ready.
        let mut other = dev("1");
        other.uuid = "GPU-other".into();
        let mut this = dev("0");
        this.uuid = uuid.into();
        assert_eq!(mps_all_ready(&root, std::slice::from_ref(&this)), Ok(()));
        assert!(
            mps_all_ready(&root, &[this, other])
                .unwrap_err()
                .contains("GPU-other")
        );
        // A UUID is a plain name, never a path.
        for odd in ["", "../GPU-x", "GPU/x", "."] {
            assert!(mps_device_dir(&root, odd).is_none(), "{odd}");
            assert!(mps_ready(&root, odd).is_err());
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_containers_gpu_use_is_that_of_its_own_processes() {
        let id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let other = "f".repeat(64);
        let root = std::env::temp_dir().join(format!("bai-proc-{}", std::process::id()));
        for (pid, cg) in [
            (100, format!("0::/system.slice/docker-{id}.scope\n")),
            (101, format!("12:memory:/docker/{id}\n0::/docker/{id}\n")),
            (200, format!("0::/system.slice/docker-{other}.scope\n")),
        ] {
            std::fs::create_dir_all(root.join(pid.to_string())).unwrap();
            std::fs::write(root.join(pid.to_string()).join("cgroup"), cg).unwrap();
        }
        let mut g0 = gpu(0);
        g0.processes = vec![
            GpuProcess {
                pid: 100,
                used_memory: Some(2 * GIB),
                sm_util: Some(30),
            },
            GpuProcess {
                pid: 200,
                used_memory: Some(5 * GIB),
                sm_util: Some(60),
            },
            // Gone since the sample: no cgroup file.
            GpuProcess {
                pid: 300,
                used_memory: Some(GIB),
                sm_util: None,
            },
        ];
        let mut g1 = gpu(1);
        g1.processes = vec![GpuProcess {
            pid: 101,
            used_memory: None,
            sm_util: Some(15),
        }];
        let s = snapshot(vec![g0.clone(), g1.clone()]);
        let pids = pids_in_container(&s, &root, id);
        assert_eq!(pids, HashSet::from([100, 101]));
        assert_eq!(
            use_of(&s, &pids),
            GpuUse {
                util_pct: 45.0,
                mem_bytes: 2 * GIB
            }
        );
        // An MPS client has no SM figure of its own: it counts its device's (an upper bound),
        // never more than the whole device however many of its processes are there.
        g0.utilization_gpu = Some(80);
        g0.processes[0].sm_util = None;
        g0.processes.push(GpuProcess {
            pid: 102,
            used_memory: Some(GIB),
            sm_util: None,
        });
        let mps = snapshot(vec![g0, g1]);
        let both = HashSet::from([100, 101, 102]);
        assert_eq!(use_of(&mps, &both).util_pct, 115.0);
        assert_eq!(use_of(&mps, &both).mem_bytes, 3 * GIB);
        // Ids that would match too much match nothing.
        assert!(pids_in_container(&s, &root, "").is_empty());
        assert!(pids_in_container(&s, &root, "0123").is_empty());
        assert!(
            pids_in_container(&s, &root, "../../etc/passwd/xxxxxxxxxxxxxxxxxxxxxxxxxx").is_empty()
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
