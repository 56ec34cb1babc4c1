//! `bai gpus`: what NVML sees on this host and what an agent here would offer.
use std::fmt::Write as _;

use bai_engine::gpu::{self, Snapshot};
use rust_decimal::Decimal;

const MIB: u64 = 1024 * 1024;

fn yes_no(b: Option<bool>) -> &'static str {
    match b {
        Some(true) => "enabled",
        Some(false) => "disabled",
        None => "not supported",
    }
}

/// The human report: driver, each GPU (UUID, memory, MIG, utilization, processes), the slots
/// in device and shares mode, and how fractions would be enforced.
pub fn report(s: &Snapshot, per_gpu: u32, mps: Option<(&str, Result<(), String>)>) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "NVIDIA driver {}, NVML {}, CUDA {}",
        s.driver_version,
        s.nvml_version,
        s.cuda_version.as_deref().unwrap_or("unknown")
    );
    for g in &s.gpus {
        let _ = writeln!(o, "GPU {}: {} ({})", g.index, g.name, g.uuid);
        let _ = writeln!(
            o,
            "  memory: {} MiB total, {} MiB used",
            g.memory_total / MIB,
            g.memory_used / MIB
        );
        let pct = |v: Option<u32>| v.map_or("unknown".to_string(), |v| format!("{v} %"));
        let _ = writeln!(
            o,
            "  utilization: GPU {}, memory {}",
            pct(g.utilization_gpu),
            pct(g.utilization_memory)
        );
        let _ = writeln!(
            o,
            "  MIG mode: {} (after reset: {})",
            yes_no(g.mig_enabled),
            yes_no(g.mig_pending)
        );
        for m in &g.mig_instances {
            let _ = writeln!(
                o,
                "    MIG instance {} ({}): {} MiB",
                m.name,
                m.uuid,
                m.memory_total / MIB
            );
        }
        if g.processes.is_empty() {
            let _ = writeln!(o, "  compute processes: none");
        }
        for p in &g.processes {
            let _ = writeln!(
                o,
                "  process {}: {} MiB, SM {}",
                p.pid,
                p.used_memory.map_or("?".into(), |b| (b / MIB).to_string()),
                pct(p.sm_util)
            );
        }
        for u in &g.unreadable {
            let _ = writeln!(o, "  unreadable: {u}");
        }
    }
    let devices = gpu::devices(s);
    let _ = writeln!(
        o,
        "An agent on this host would offer {} device{}:",
        devices.len(),
        if devices.len() == 1 { "" } else { "s" }
    );
    for d in &devices {
        let _ = writeln!(o, "  {} = {} ({} MiB)", d.id, d.name, d.memory_bytes / MIB);
    }
    for (slot, n) in gpu::slots(&devices, per_gpu) {
        let mode = if slot == "cuda.device" {
            "device mode"
        } else {
            "shares mode"
        };
        let _ = writeln!(o, "  {mode}: {slot} = {n}");
    }
    if let Some(d) = devices.first()
        && let Some(l) = gpu::mps_limits(&[(d.memory_bytes, Decimal::ONE)], per_gpu)
    {
        let _ = writeln!(
            o,
            "  one share ({} of a GPU) under MPS: {} % of the threads, {} MiB of pinned memory",
            format_args!("1/{}", per_gpu.max(1)),
            l.active_thread_percentage,
            l.pinned_mib.first().map_or(0, |p| p.1)
        );
    }
    match mps {
        None if per_gpu > 1 => {
            let _ = writeln!(
                o,
                "Fractions are counted, not enforced (gpu_mps_dir is not set)."
            );
        }
        None => {}
        Some((dir, Ok(()))) => {
            let _ = writeln!(o, "Fractions are enforced through MPS ({dir}).");
        }
        Some((dir, Err(reason))) => {
            let _ = writeln!(
                o,
                "MPS is configured ({dir}) but not ready, so fractions are not offered: {reason}"
            );
        }
    }
    o
}

/// `bai gpus --mps-env SHARES`: the MPS environment a container granted SHARES of the first
/// device would get, one `KEY=VALUE` a line.
pub fn mps_env(s: &Snapshot, per_gpu: u32, shares: Decimal) -> anyhow::Result<String> {
    let devices = gpu::devices(s);
    let d = devices
        .first()
        .ok_or_else(|| anyhow::anyhow!("no GPU to take a share of"))?;
    if shares <= Decimal::ZERO || shares > Decimal::from(per_gpu.max(1)) {
        anyhow::bail!(
            "a share of one GPU is more than 0 and at most {} (cuda_shares_per_gpu)",
            per_gpu.max(1)
        );
    }
    Ok(
        match gpu::mps_limits(&[(d.memory_bytes, shares)], per_gpu) {
            None => String::new(),
            Some(l) => gpu::mps_env(&l)
                .into_iter()
                .map(|(k, v)| format!("{k}={v}\n"))
                .collect(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bai_engine::gpu::{GpuProcess, GpuReport, MigInstance};

    fn snap() -> Snapshot {
        Snapshot {
            driver_version: "580.159.04".into(),
            nvml_version: "13.580.159.04".into(),
            cuda_version: Some("13.0".into()),
            gpus: vec![
                GpuReport {
                    index: 0,
                    uuid: "GPU-aaaa".into(),
                    name: "NVIDIA H200".into(),
                    memory_total: 143_771 * MIB,
                    memory_used: 600 * MIB,
                    utilization_gpu: Some(97),
                    utilization_memory: Some(40),
                    mig_enabled: Some(false),
                    mig_pending: Some(false),
                    processes: vec![GpuProcess {
                        pid: 42,
                        used_memory: Some(512 * MIB),
                        sm_util: Some(95),
                    }],
                    ..Default::default()
                },
                GpuReport {
                    index: 1,
                    uuid: "GPU-bbbb".into(),
                    name: "NVIDIA A100".into(),
                    memory_total: 81_920 * MIB,
                    mig_enabled: Some(true),
                    mig_pending: Some(true),
                    mig_instances: vec![MigInstance {
                        uuid: "MIG-cccc".into(),
                        name: "NVIDIA A100 MIG 3g.40gb".into(),
                        memory_total: 40_192 * MIB,
                    }],
                    ..Default::default()
                },
            ],
        }
    }

    #[test]
    fn the_report_names_devices_slots_and_enforcement() {
        let r = report(&snap(), 4, None);
        for want in [
            "NVIDIA driver 580.159.04, NVML 13.580.159.04, CUDA 13.0",
            "GPU 0: NVIDIA H200 (GPU-aaaa)",
            "memory: 143771 MiB total, 600 MiB used",
            "utilization: GPU 97 %, memory 40 %",
            "process 42: 512 MiB, SM 95 %",
            "MIG mode: enabled (after reset: enabled)",
            "MIG instance NVIDIA A100 MIG 3g.40gb (MIG-cccc): 40192 MiB",
            "would offer 2 devices",
            "0 = NVIDIA H200 (143771 MiB)",
            "MIG-cccc = NVIDIA A100 MIG 3g.40gb (40192 MiB)",
            "device mode: cuda.device = 2",
            "shares mode: cuda.shares = 8",
            "one share (1/4 of a GPU) under MPS: 25 % of the threads, 35942 MiB",
            "counted, not enforced",
        ] {
            assert!(r.contains(want), "{want:?} missing from:\n{r}");
        }
        let down = report(&snap(), 4, Some(("/run/bai-mps", Err("no daemon".into()))));
        assert!(
            down.contains("not ready, so fractions are not offered: no daemon"),
            "{down}"
        );
        assert!(
            report(&snap(), 4, Some(("/run/bai-mps", Ok(())))).contains("enforced through MPS")
        );
    }

    #[test]
    fn mps_env_for_a_share() {
        let e = mps_env(&snap(), 4, Decimal::ONE).unwrap();
        assert_eq!(
            e,
            "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps\nCUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25\nCUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=35942M\n"
        );
        assert_eq!(
            mps_env(&snap(), 4, Decimal::from(4)).unwrap(),
            "",
            "a whole GPU"
        );
        assert!(mps_env(&snap(), 4, Decimal::from(5)).is_err());
        assert!(mps_env(&snap(), 4, Decimal::ZERO).is_err());
        assert!(mps_env(&Snapshot::default(), 4, Decimal::ONE).is_err());
    }
}
