//! GPUs through NVML. Without an NVIDIA driver there are simply no GPUs.
use std::collections::BTreeMap;

use rust_decimal::Decimal;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuDevice {
    /// Index as Docker's DeviceRequests expect it.
    pub id: String,
    pub name: String,
    pub memory_bytes: u64,
}

/// The GPUs NVML reports, or none when the library or driver is missing.
pub fn detect() -> Vec<GpuDevice> {
    let nvml = match nvml_wrapper::Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            tracing::info!(reason = %e, "no NVIDIA GPUs: NVML is not available");
            return Vec::new();
        }
    };
    let count = nvml.device_count().unwrap_or(0);
    let mut out = Vec::new();
    for i in 0..count {
        match nvml.device_by_index(i) {
            Ok(d) => out.push(GpuDevice {
                id: i.to_string(),
                name: d.name().unwrap_or_else(|_| "NVIDIA GPU".into()),
                memory_bytes: d.memory_info().map(|m| m.total).unwrap_or(0),
            }),
            Err(e) => tracing::warn!(index = i, error = %e, "cannot read GPU"),
        }
    }
    tracing::info!(count = out.len(), "NVIDIA GPUs detected");
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(id: &str) -> GpuDevice {
        GpuDevice {
            id: id.into(),
            name: "GPU".into(),
            memory_bytes: 0,
        }
    }

    #[test]
    fn no_driver_means_no_gpus() {
        // This machine has no NVIDIA driver; detection must degrade to an empty list.
        if std::path::Path::new("/proc/driver/nvidia").exists() {
            return;
        }
        assert!(detect().is_empty());
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
}
