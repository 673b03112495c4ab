//! The devices: what a backend knows about each one (`DeviceInfo`, with its theoretical peaks),
//! the listing of every asked backend (and why one has none), and the selection `--device` makes.
//!
//! Listing loads each backend's library at run time and never panics, so a machine without any
//! device gets a clean "no device" answer.

use hostbench_core::model::Peak;
use hostbench_core::units::format_bytes_iec;
use hostbench_core::BenchError;
use serde_json::Value;

use crate::config::{Backend, Dtype, GpuConfig};
use crate::{cuda, opencl};

/// A theoretical limit, or the reason there is none.
pub type PeakOr = Result<Peak, String>;

/// What a backend knows about one device.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub backend: Backend,
    /// Index within its backend (the `--device` number; CUDA's ordinal, OpenCL's platform-major
    /// order).
    pub index: usize,
    pub name: String,
    pub vendor: String,
    /// `gpu`, `cpu`, `accelerator` or `other` (PoCL's OpenCL device is the CPU).
    pub kind: String,
    /// Driver / API version text.
    pub version: String,
    pub compute_units: u32,
    /// Maximum clock as the device reports it.
    pub clock_hz: Option<f64>,
    pub global_mem_bytes: u64,
    /// Largest single allocation.
    pub max_alloc_bytes: u64,
    /// Compute dtypes the device has, each with its peak (or the reason there is none).
    pub dtypes: Vec<(Dtype, PeakOr)>,
    /// Why a dtype is missing (e.g. no cl_khr_fp16).
    pub missing: Vec<(Dtype, String)>,
    /// Device-memory peak (bus width × memory clock), or why there is none.
    pub mem_peak: PeakOr,
    /// Backend-specific facts for the record (`extra.device`).
    pub facts: serde_json::Map<String, Value>,
}

impl DeviceInfo {
    /// A device with nothing measured about it yet, for tests of what depends only on who it is.
    #[cfg(test)]
    pub(crate) fn named(backend: Backend, index: usize, name: &str, kind: &str) -> Self {
        Self {
            backend,
            index,
            name: name.into(),
            vendor: String::new(),
            kind: kind.into(),
            version: String::new(),
            compute_units: 1,
            clock_hz: None,
            global_mem_bytes: 0,
            max_alloc_bytes: 0,
            dtypes: vec![],
            missing: vec![],
            mem_peak: Err(String::new()),
            facts: Default::default(),
        }
    }

    /// The compute capability (major, minor) of a CUDA device.
    pub fn compute_capability(&self) -> Option<(u32, u32)> {
        let cc = self.facts.get("compute_capability")?.as_str()?;
        let (major, minor) = cc.split_once('.')?;
        Some((major.parse().ok()?, minor.parse().ok()?))
    }

    pub fn peak(&self, dtype: Dtype) -> Option<&PeakOr> {
        self.dtypes
            .iter()
            .find(|(d, _)| *d == dtype)
            .map(|(_, p)| p)
    }

    /// One line for `--list`.
    pub fn summary(&self) -> String {
        let clock = self.clock_hz.map_or("clock unknown".to_string(), |c| {
            format!("{:.0} MHz", c / 1e6)
        });
        let dtypes: Vec<&str> = self.dtypes.iter().map(|(d, _)| d.name()).collect();
        format!(
            "{} {}: {} ({}, {}; {} compute units, {clock}, {} memory; {})",
            self.backend.name(),
            self.index,
            self.name,
            self.kind,
            self.version,
            self.compute_units,
            format_bytes_iec(self.global_mem_bytes),
            dtypes.join(" ")
        )
    }
}

/// Every device of the asked backends, and why a backend has none.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub devices: Vec<DeviceInfo>,
    pub absent: Vec<(Backend, String)>,
}

impl Listing {
    /// "no GPU or OpenCL device found (opencl: …; cuda: …)".
    pub fn none_reason(&self) -> String {
        let why: Vec<String> = self
            .absent
            .iter()
            .map(|(b, r)| format!("{}: {r}", b.name()))
            .collect();
        format!("no GPU or OpenCL device found ({})", why.join("; "))
    }
}

/// Probe the backends (each one loads its library at run time, and none can panic).
pub fn list_devices(backends: &[Backend]) -> Listing {
    let mut listing = Listing::default();
    for &b in backends {
        let found = match b {
            Backend::OpenCl => opencl::list(),
            Backend::Cuda => cuda::list(),
        };
        match found {
            Ok(devs) if devs.is_empty() => listing
                .absent
                .push((b, "the runtime reports no device".to_string())),
            Ok(devs) => listing.devices.extend(devs),
            Err(BenchError::Unsupported(why)) => listing.absent.push((b, why)),
            Err(e) => listing.absent.push((b, e.to_string())),
        }
    }
    listing
}

/// The devices `cfg` asks for. Bad input (an index no backend has) is `InvalidInput`; no device
/// at all is `Unsupported` with the reason per backend.
pub fn select(listing: &Listing, cfg: &GpuConfig) -> Result<Vec<DeviceInfo>, BenchError> {
    let in_backends: Vec<&DeviceInfo> = listing
        .devices
        .iter()
        .filter(|d| cfg.backends.contains(&d.backend))
        .collect();
    if in_backends.is_empty() {
        return Err(BenchError::unsupported(listing.none_reason()));
    }
    let Some(wanted) = &cfg.devices else {
        return Ok(in_backends.into_iter().cloned().collect());
    };
    for &i in wanted {
        if !in_backends.iter().any(|d| d.index == i) {
            let have: Vec<String> = in_backends
                .iter()
                .map(|d| format!("{} {}", d.backend.name(), d.index))
                .collect();
            return Err(BenchError::invalid(format!(
                "--device: no device {i} (devices: {})",
                have.join(", ")
            )));
        }
    }
    Ok(in_backends
        .into_iter()
        .filter(|d| wanted.contains(&d.index))
        .cloned()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(backend: Backend, index: usize) -> DeviceInfo {
        DeviceInfo {
            backend,
            index,
            name: "test".into(),
            vendor: "v".into(),
            kind: "gpu".into(),
            version: "1".into(),
            compute_units: 1,
            clock_hz: None,
            global_mem_bytes: 1 << 30,
            max_alloc_bytes: 1 << 28,
            dtypes: vec![],
            missing: vec![],
            mem_peak: Err("none".into()),
            facts: Default::default(),
        }
    }

    #[test]
    fn selection_distinguishes_no_device_from_a_bad_index() {
        let cfg = GpuConfig::default();
        let empty = Listing {
            devices: vec![],
            absent: vec![(Backend::OpenCl, "no platform".into())],
        };
        let e = select(&empty, &cfg).unwrap_err();
        assert!(matches!(&e, BenchError::Unsupported(m) if m.contains("opencl: no platform")));
        let listing = Listing {
            devices: vec![dev(Backend::OpenCl, 0), dev(Backend::Cuda, 0)],
            absent: vec![],
        };
        assert_eq!(select(&listing, &cfg).unwrap().len(), 2);
        let only_cuda = GpuConfig {
            backends: vec![Backend::Cuda],
            devices: Some(vec![0]),
            ..GpuConfig::default()
        };
        let picked = select(&listing, &only_cuda).unwrap();
        assert_eq!(picked.len(), 1);
        assert_eq!(picked[0].backend, Backend::Cuda);
        let bad = GpuConfig {
            devices: Some(vec![3]),
            ..GpuConfig::default()
        };
        assert!(matches!(
            select(&listing, &bad),
            Err(BenchError::InvalidInput(m)) if m.contains("no device 3")
        ));
    }
}
