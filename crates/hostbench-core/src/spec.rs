//! The `--spec FILE` (TOML): datasheet facts that override or supply what detection cannot know.
//!
//! Every section and key is typed and unknown keys are rejected, so a typo (`clok_hz`) is an error
//! that names the key and line rather than a silently ignored override.
//!
//! ```toml
//! [cpu]
//! clock_hz = 3.2e9     # use instead of the measured clock in every CPU peak
//! fma_pipes = 2        # vector FMA instructions per cycle per core
//! llc_bytes = 33554432 # one last-level cache instance (a VM may report another)
//! llc_instances = 8
//! [memory]
//! dimm_mts = 4800      # DIMM transfer rate, MT/s
//! channels = 12
//! [cost]
//! price_per_hour = 2.5 # USD per hour of this node: reports add each figure per dollar-hour
//! ```

use std::path::Path;

use serde::Deserialize;

use crate::error::BenchError;
use crate::model::Host;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    #[serde(default)]
    pub cpu: CpuSpec,
    #[serde(default)]
    pub memory: MemorySpec,
    #[serde(default)]
    pub disk: DiskSpec,
    #[serde(default)]
    pub network: NetworkSpec,
    /// What a healthy node of this type shows, for `hostbench check` (`check::expect`).
    #[serde(default)]
    pub expect: Option<crate::check::expect::ExpectToml>,
    /// What an hour of this node costs (`run --price-per-hour` overrides it).
    #[serde(default)]
    pub cost: CostSpec,
}

/// `[cost]`: a section rather than a top-level key, so a later currency or power price sits
/// beside it without reshaping the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostSpec {
    /// USD per hour: each record's value divided by it is its figure per dollar-hour.
    pub price_per_hour: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuSpec {
    pub vendor: Option<String>,
    pub model: Option<String>,
    pub sockets: Option<u32>,
    pub cores: Option<u32>,
    pub threads: Option<u32>,
    pub nominal_hz: Option<f64>,
    /// Clock used for every CPU peak instead of the measured one.
    pub clock_hz: Option<f64>,
    /// Vector FMA instructions retired per cycle per core (all vector widths).
    pub fma_pipes: Option<f64>,
    /// Vector (or scalar) FP multiply + add instructions per cycle per core, for kernels without FMA.
    pub muladd_pipes: Option<f64>,
    /// Vector integer add instructions per cycle per core.
    pub int_add_pipes: Option<f64>,
    /// Scalar integer add instructions per cycle per core.
    pub scalar_int_pipes: Option<f64>,
    /// Vector dot-product instructions (VNNI, `vdpbf16ps`) per cycle per core.
    pub dot_pipes: Option<f64>,
    /// AMX tile multiplies per cycle per core (1/16 on Sapphire Rapids).
    pub tile_per_cycle: Option<f64>,
    /// Arm matrix multiply-accumulate instructions (`smmla`, `bfmmla`) per cycle per core.
    pub mmla_pipes: Option<f64>,
    /// Size of one last-level cache instance in bytes, where the hypervisor reports another (a
    /// VM often shows one small L3 for a host with many): memory working sets follow it.
    pub llc_bytes: Option<u64>,
    /// How many last-level cache instances there are (one per CCX or per socket).
    pub llc_instances: Option<u32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySpec {
    pub total_bytes: Option<u64>,
    /// DIMM transfer rate in MT/s.
    pub dimm_mts: Option<f64>,
    pub channels: Option<u32>,
    /// Theoretical DRAM bandwidth in B/s, if known directly.
    pub bandwidth_bps: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskSpec {
    pub read_bps: Option<f64>,
    pub write_bps: Option<f64>,
    pub read_iops: Option<f64>,
    pub write_iops: Option<f64>,
    /// The device's or its controller's cache in bytes (a datasheet's DRAM buffer, a RAID
    /// controller's write-back cache), which sysfs does not report: the disk benchmark's working
    /// file must be at least twice it for a figure of the device rather than of the cache.
    pub cache_bytes: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    pub link_bps: Option<f64>,
    pub base_latency_s: Option<f64>,
}

impl Spec {
    /// Read and validate a spec file; every error is one line naming the file and the problem.
    pub fn load(path: &Path) -> Result<Self, BenchError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| BenchError::invalid(format!("spec file {}: {e}", path.display())))?;
        Self::parse(&text)
            .map_err(|msg| BenchError::invalid(format!("spec file {}: {msg}", path.display())))
    }

    /// Parse spec text; the error is a single line with the line number and offending key.
    pub fn parse(text: &str) -> Result<Self, String> {
        let spec: Spec = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            let msg = e.message().replace('\n', " ");
            match line {
                Some(l) => format!("line {l}: {msg}"),
                None => msg,
            }
        })?;
        spec.validate()?;
        Ok(spec)
    }

    fn validate(&self) -> Result<(), String> {
        let positive = [
            ("cpu.nominal_hz", self.cpu.nominal_hz),
            ("cpu.clock_hz", self.cpu.clock_hz),
            ("cpu.fma_pipes", self.cpu.fma_pipes),
            ("cpu.muladd_pipes", self.cpu.muladd_pipes),
            ("cpu.int_add_pipes", self.cpu.int_add_pipes),
            ("cpu.scalar_int_pipes", self.cpu.scalar_int_pipes),
            ("cpu.dot_pipes", self.cpu.dot_pipes),
            ("cpu.tile_per_cycle", self.cpu.tile_per_cycle),
            ("cpu.mmla_pipes", self.cpu.mmla_pipes),
            ("memory.dimm_mts", self.memory.dimm_mts),
            ("memory.bandwidth_bps", self.memory.bandwidth_bps),
            ("disk.read_bps", self.disk.read_bps),
            ("disk.write_bps", self.disk.write_bps),
            ("disk.read_iops", self.disk.read_iops),
            ("disk.write_iops", self.disk.write_iops),
            ("network.link_bps", self.network.link_bps),
            ("network.base_latency_s", self.network.base_latency_s),
            ("cost.price_per_hour", self.cost.price_per_hour),
        ];
        for (key, v) in positive {
            if let Some(v) = v {
                if !(v.is_finite() && v > 0.0) {
                    return Err(format!("{key} must be a positive number, got {v}"));
                }
            }
        }
        let counts = [
            ("cpu.sockets", self.cpu.sockets),
            ("cpu.cores", self.cpu.cores),
            ("cpu.threads", self.cpu.threads),
            ("memory.channels", self.memory.channels),
            ("cpu.llc_instances", self.cpu.llc_instances),
        ];
        for (key, v) in counts {
            if v == Some(0) {
                return Err(format!("{key} must be at least 1"));
            }
        }
        if self.cpu.llc_bytes == Some(0) {
            return Err("cpu.llc_bytes must be at least 1".into());
        }
        Ok(())
    }

    /// Apply the overrides to a detected host inventory.
    pub fn apply(&self, host: &mut Host) {
        let c = &self.cpu;
        if let Some(v) = &c.vendor {
            host.cpu.vendor = v.clone();
        }
        if let Some(v) = &c.model {
            host.cpu.model = v.clone();
        }
        if let Some(v) = c.sockets {
            host.cpu.sockets = v;
        }
        if let Some(v) = c.cores {
            host.cpu.cores = v;
        }
        if let Some(v) = c.threads {
            host.cpu.threads = v;
        }
        if let Some(v) = c.nominal_hz {
            host.cpu.nominal_hz = Some(v);
        }
        if let Some(v) = self.memory.total_bytes {
            host.memory.total_bytes = v;
        }
        if c.llc_bytes.is_some() || c.llc_instances.is_some() {
            apply_llc(&mut host.cpu.caches, c.llc_bytes, c.llc_instances);
        }
    }
}

/// Override the last-level data cache (the highest level that is not instruction-only); with
/// no cache detected at all, a unified L3 of the given size (one instance unless stated).
fn apply_llc(caches: &mut Vec<crate::model::Cache>, bytes: Option<u64>, instances: Option<u32>) {
    let last = caches
        .iter_mut()
        .filter(|c| c.kind != "instruction")
        .max_by_key(|c| c.level);
    match last {
        Some(c) => {
            c.size_bytes = bytes.unwrap_or(c.size_bytes);
            c.instances = instances.unwrap_or(c.instances);
        }
        None => {
            if let Some(size_bytes) = bytes {
                caches.push(crate::model::Cache {
                    level: 3,
                    kind: "unified".into(),
                    size_bytes,
                    instances: instances.unwrap_or(1),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[cost] price_per_hour`: a positive number, anything else one line naming the key.
    #[test]
    fn cost_price_per_hour_is_a_positive_number() {
        let spec = Spec::parse("[cost]\nprice_per_hour = 2.5\n").unwrap();
        assert_eq!(spec.cost.price_per_hour, Some(2.5));
        for bad in ["0", "-1", "\"cheap\""] {
            let err = Spec::parse(&format!("[cost]\nprice_per_hour = {bad}\n")).unwrap_err();
            assert!(
                err.contains("price_per_hour") || err.contains("invalid type"),
                "{err}"
            );
            assert!(!err.contains('\n'), "{err}");
        }
        let err = Spec::parse("[cost]\nprice = 2.5\n").unwrap_err();
        assert!(err.contains("price"), "{err}");
    }

    #[test]
    fn full_spec_parses_and_applies() {
        let spec = Spec::parse(
            "[cpu]\nmodel = \"Test CPU\"\ncores = 64\nclock_hz = 3.0e9\nfma_pipes = 2\n\
             [memory]\ndimm_mts = 4800\nchannels = 12\n[network]\nlink_bps = 1e10\n",
        )
        .unwrap();
        assert_eq!(spec.cpu.clock_hz, Some(3.0e9));
        assert_eq!(spec.memory.channels, Some(12));
        let mut host = Host::default();
        spec.apply(&mut host);
        assert_eq!(host.cpu.cores, 64);
        assert_eq!(host.cpu.model, "Test CPU");
    }

    #[test]
    fn llc_override_replaces_the_last_level_or_adds_one() {
        use crate::model::Cache;
        let spec = Spec::parse("[cpu]\nllc_bytes = 503316480\n").unwrap();
        let mut host = Host::default();
        host.cpu.caches = vec![
            Cache {
                level: 2,
                kind: "unified".into(),
                size_bytes: 2 << 20,
                instances: 2,
            },
            Cache {
                level: 3,
                kind: "unified".into(),
                size_bytes: 32 << 20,
                instances: 1,
            },
        ];
        spec.apply(&mut host);
        assert_eq!(host.cpu.caches[1].size_bytes, 480 << 20);
        assert_eq!(host.cpu.caches[1].instances, 1);
        assert_eq!(host.cpu.caches[0].size_bytes, 2 << 20, "L2 untouched");
        let spec = Spec::parse("[cpu]\nllc_bytes = 1024\nllc_instances = 8\n").unwrap();
        let mut bare = Host::default();
        spec.apply(&mut bare);
        assert_eq!(bare.cpu.caches.len(), 1);
        assert_eq!(
            (bare.cpu.caches[0].level, bare.cpu.caches[0].instances),
            (3, 8)
        );
        assert!(Spec::parse("[cpu]\nllc_bytes = 0\n")
            .unwrap_err()
            .contains("cpu.llc_bytes"));
        assert!(Spec::parse("[cpu]\nllc_instances = 0\n")
            .unwrap_err()
            .contains("cpu.llc_instances"));
    }

    #[test]
    fn empty_spec_is_fine() {
        assert!(Spec::parse("").unwrap().cpu.clock_hz.is_none());
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let err = Spec::parse("[cpu]\ncores = 2\nclok_hz = 3e9\n").unwrap_err();
        assert!(err.contains("clok_hz") && err.contains("line 3"), "{err}");
        assert!(!err.contains('\n'));
    }

    #[test]
    fn wrong_types_and_values_are_named() {
        let err = Spec::parse("[cpu]\ncores = \"many\"\n").unwrap_err();
        assert!(err.contains("line 2"), "{err}");
        let err = Spec::parse("[cpu]\nclock_hz = -1.0\n").unwrap_err();
        assert!(err.contains("cpu.clock_hz"), "{err}");
        let err = Spec::parse("[cpu]\ncores = 0\n").unwrap_err();
        assert!(err.contains("cpu.cores"), "{err}");
        let err = Spec::parse("[gpu_typo]\nx = 1\n").unwrap_err();
        assert!(err.contains("gpu_typo"), "{err}");
        assert!(Spec::parse("[cpu\n").is_err());
    }

    #[test]
    fn missing_file_is_one_line_error() {
        let err = Spec::load(Path::new("/nonexistent/spec.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/nonexistent/spec.toml") && !err.contains('\n'),
            "{err}"
        );
    }
}
