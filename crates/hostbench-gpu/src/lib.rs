//! hostbench-gpu: GPU (and any OpenCL device) compute throughput, device-memory bandwidth,
//! host↔device transfers and kernel launch latency, through OpenCL and CUDA.
//!
//! Both backends are loaded at run time: OpenCL through the system ICD loader (`libOpenCL.so.1`,
//! dlopen'ed by `opencl3`'s `dynamic` feature) and CUDA through the driver API (`libcuda.so`,
//! dlopen'ed by `cudarc`, probed first because cudarc panics when the library is missing). The
//! binary therefore builds with no SDK and runs where neither library exists; a machine without
//! any device gets a clean "no device" answer, never a panic.
//!
//! Every case goes through the shared runner and every kernel's output is checked on the host:
//! compute chains against a host replay of the same arithmetic (chosen so that every
//! intermediate value is exact, hence bit-identical whether the device fuses the multiply-add or
//! not), memory kernels against the data they read or were asked to write. A kernel whose work a
//! compiler deleted fails its case instead of reporting an impossible figure.
//!
//! * `opencl` / `cuda` — the backends: device listing, sessions, timed operations.
//! * `kernels` — the OpenCL C sources (generated per dtype, vector width and chain count).
//! * `ptx` — the CUDA kernels as PTX text (JIT-compiled by the driver, no NVRTC needed) and the
//!   kernel-argument marshalling.
//! * `replay` — the host side of validation: chain replay and memory patterns.
//! * `peak` — theoretical peaks from device attributes, with their basis.

pub mod cuda;
pub mod kernels;
pub mod opencl;
pub mod peak;
pub mod ptx;
pub mod replay;
pub mod subsystem;

pub use subsystem::Gpu;

use std::time::{Duration, Instant};

use hostbench_core::model::{Metric, Peak, Record};
use hostbench_core::units::format_bytes_iec;
use hostbench_core::{BenchError, Case, Runner, Sample};
use serde_json::{json, Value};

hostbench_core::named_enum! {
    /// A programming interface to the device.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Backend("backend") {
        OpenCl = "opencl" | "ocl" | "cl",
        Cuda = "cuda" | "nvidia",
    }
}

hostbench_core::named_enum! {
    /// Arithmetic types of the compute kernels.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Dtype("dtype") {
        F64 = "f64" | "dp" | "double" | "fp64",
        F32 = "f32" | "sp" | "float" | "fp32",
        F16 = "f16" | "half" | "fp16",
        I32 = "i32" | "int" | "int32",
        I8 = "i8" | "qp" | "char" | "int8",
    }
}

impl Dtype {
    pub fn is_float(self) -> bool {
        matches!(self, Dtype::F64 | Dtype::F32 | Dtype::F16)
    }

    /// `gpu.flops` in FLOP/s for floating point, `gpu.iops` in OP/s for integers.
    pub fn benchmark(self) -> (&'static str, &'static str) {
        if self.is_float() {
            ("gpu.flops", "FLOP/s")
        } else {
            ("gpu.iops", "OP/s")
        }
    }
}

hostbench_core::named_enum! {
    /// Device-memory kernels.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum MemKernel("kernel") {
        /// Every byte read once, reduced into a per-work-item sum that is checked.
        Read = "read",
        /// Every byte written with a per-sample pattern that is checked.
        Write = "write",
        /// Every byte read and written to a second buffer (counted twice, as bandwidthTest does).
        Copy = "copy",
    }
}

impl MemKernel {
    /// Bytes moved per byte of block.
    pub fn traffic(self) -> f64 {
        match self {
            MemKernel::Copy => 2.0,
            _ => 1.0,
        }
    }
}

hostbench_core::named_enum! {
    /// Direction of a host↔device transfer.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Direction("direction") {
        HostToDevice = "h2d" | "htod" | "upload",
        DeviceToHost = "d2h" | "dtoh" | "download",
    }
}

hostbench_core::named_enum! {
    /// Host memory a transfer reads or writes.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum HostMemory("host-memory") {
        /// Ordinary (pageable) process memory: the driver stages it through a pinned bounce buffer.
        Pageable = "pageable",
        /// Page-locked memory the device can DMA directly (CUDA `cuMemHostAlloc`; OpenCL a mapped
        /// `CL_MEM_ALLOC_HOST_PTR` buffer, the vendors' recipe for pinned memory).
        Pinned = "pinned" | "page-locked",
    }
}

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

/// The compute section: dtypes × vector widths (the best width becomes the record).
#[derive(Debug, Clone)]
pub struct ComputeConfig {
    pub dtypes: Vec<Dtype>,
    /// Vector widths tried per dtype (1, 2, 4, 8, 16 as clpeak); the best is the record.
    pub widths: Vec<u32>,
}

/// Device-memory bandwidth: kernels × block sizes.
#[derive(Debug, Clone)]
pub struct MemoryConfig {
    pub kernels: Vec<MemKernel>,
    pub blocks: Vec<u64>,
}

/// Host↔device transfers: directions × host memory × block sizes.
#[derive(Debug, Clone)]
pub struct TransferConfig {
    pub directions: Vec<Direction>,
    pub host: Vec<HostMemory>,
    pub blocks: Vec<u64>,
}

/// Plain configuration of `hostbench gpu`.
#[derive(Debug, Clone)]
pub struct GpuConfig {
    pub backends: Vec<Backend>,
    /// Device indices (within each backend); `None`: every device.
    pub devices: Option<Vec<usize>>,
    pub compute: Option<ComputeConfig>,
    pub memory: Option<MemoryConfig>,
    pub transfer: Option<TransferConfig>,
    pub launch: bool,
    /// Target length of one sample.
    pub duration: Duration,
}

/// Largest block: 1 GiB (the range is 1 B to 1 GiB).
pub const MAX_BLOCK: u64 = 1 << 30;
pub const VECTOR_WIDTHS: [u32; 5] = [1, 2, 4, 8, 16];

/// The classic 1 B, 1 KiB and 1 MiB points, then up to 1 GiB.
pub fn default_mem_blocks() -> Vec<u64> {
    vec![1, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30]
}

pub fn default_transfer_blocks() -> Vec<u64> {
    vec![1 << 10, 1 << 20, 64 << 20]
}

impl Default for GpuConfig {
    fn default() -> Self {
        Self {
            backends: Backend::ALL.to_vec(),
            devices: None,
            compute: Some(ComputeConfig {
                dtypes: Dtype::ALL.to_vec(),
                widths: VECTOR_WIDTHS.to_vec(),
            }),
            memory: Some(MemoryConfig {
                kernels: MemKernel::ALL.to_vec(),
                blocks: default_mem_blocks(),
            }),
            transfer: Some(TransferConfig {
                directions: Direction::ALL.to_vec(),
                host: HostMemory::ALL.to_vec(),
                blocks: default_transfer_blocks(),
            }),
            launch: true,
            duration: Duration::from_millis(200),
        }
    }
}

impl GpuConfig {
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.backends.is_empty() {
            return Err(BenchError::invalid("no GPU backend selected"));
        }
        let blocks = self
            .memory
            .iter()
            .flat_map(|m| m.blocks.iter())
            .chain(self.transfer.iter().flat_map(|t| t.blocks.iter()));
        for &b in blocks {
            if b == 0 || b > MAX_BLOCK {
                return Err(BenchError::invalid(format!(
                    "block size must be between 1 B and 1 GiB, got {b} B"
                )));
            }
        }
        if let Some(c) = &self.compute {
            if let Some(w) = c.widths.iter().find(|w| !VECTOR_WIDTHS.contains(w)) {
                return Err(BenchError::invalid(format!(
                    "vector width must be one of 1, 2, 4, 8, 16, got {w}"
                )));
            }
            if c.dtypes.is_empty() || c.widths.is_empty() {
                return Err(BenchError::invalid("empty dtype or vector-width list"));
            }
        }
        if self.duration.is_zero() {
            return Err(BenchError::invalid("sample duration must be above zero"));
        }
        Ok(())
    }
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

/// One timed operation on a device: a kernel launch, a transfer, or a round trip, ready to run.
pub trait Timed {
    /// Untimed per-sample setup (fresh pattern or seed, cleared output), so each sample's
    /// validation proves that *this* sample did the work.
    fn prepare(&mut self, _sample: u64) -> Result<(), BenchError> {
        Ok(())
    }
    /// Run `reps` operations back to back and wait for the last; wall seconds.
    fn run(&mut self, reps: u64) -> Result<f64, BenchError>;
    /// Check the output of the last `run` on the host.
    fn validate(&mut self) -> Result<(), BenchError>;
    /// Work units per operation: FLOP or OP for compute, bytes for memory and transfers.
    fn work(&self) -> f64;
    /// Facts for `extra` (work sizes, vector width, chains, kernel layout).
    fn facts(&self) -> Vec<(String, Value)>;
}

/// A backend's open device: makes the timed operations.
pub trait Session {
    fn info(&self) -> &DeviceInfo;
    fn compute(&mut self, dtype: Dtype, width: u32) -> Result<Box<dyn Timed + '_>, BenchError>;
    fn memory(&mut self, kernel: MemKernel, block: u64) -> Result<Box<dyn Timed + '_>, BenchError>;
    fn transfer(
        &mut self,
        dir: Direction,
        host: HostMemory,
        block: u64,
    ) -> Result<Box<dyn Timed + '_>, BenchError>;
    fn launch(&mut self) -> Result<Box<dyn Timed + '_>, BenchError>;
}

/// Open a device of either backend.
pub fn open(info: &DeviceInfo) -> Result<Box<dyn Session>, BenchError> {
    match info.backend {
        Backend::OpenCl => Ok(Box::new(opencl::ClSession::open(info)?)),
        Backend::Cuda => Ok(Box::new(cuda::CudaSession::open(info)?)),
    }
}

/// Wall seconds of `reps` calls of `one` (enqueue a launch or a copy) and then `wait` (the
/// queue's finish): launches go back to back, as a real workload issues them.
pub(crate) fn time_batch(
    reps: u64,
    mut one: impl FnMut() -> Result<(), BenchError>,
    wait: impl FnOnce() -> Result<(), BenchError>,
) -> Result<f64, BenchError> {
    let t = Instant::now();
    for _ in 0..reps {
        one()?;
    }
    wait()?;
    Ok(t.elapsed().as_secs_f64())
}

/// Repetitions that fill `target`, from one timed repetition (at least 1, at most `cap`).
fn reps_for(t: &mut dyn Timed, target: Duration, cap: u64) -> Result<u64, BenchError> {
    let one = t.run(1)?.max(1e-9);
    let reps = (target.as_secs_f64() / one).ceil();
    Ok((reps as u64).clamp(1, cap))
}

fn base_case(bench: &str, metric: Metric, unit: &str, info: &DeviceInfo) -> Case {
    Case::new(bench, metric, unit)
        .param("backend", info.backend.name())
        .param("device", info.index)
}

fn device_extra(rec: &mut Record, info: &DeviceInfo, facts: Vec<(String, Value)>) {
    rec.extra.insert("device_name".into(), json!(info.name));
    rec.extra.insert("device_kind".into(), json!(info.kind));
    rec.extra.insert("validated".into(), json!(true));
    for (k, v) in facts {
        rec.extra.insert(k, v);
    }
    if info.kind == "cpu" {
        rec.warnings.push(
            "the OpenCL device is the host CPU (e.g. PoCL): figures are the CPU's, not a GPU's"
                .into(),
        );
    }
}

fn set_peak_or(rec: &mut Record, peak: Option<&PeakOr>) {
    match peak {
        Some(Ok(p)) => rec.set_peak(Some(p.clone())),
        Some(Err(why)) => {
            rec.extra.insert("peak_note".into(), json!(why));
        }
        None => {}
    }
}

/// Run every configured case on every selected device through `runner`. A device that fails to
/// open, or a case the device cannot run, is recorded as skipped with the reason.
pub fn run_gpu(
    runner: &mut Runner,
    cfg: &GpuConfig,
    devices: &[DeviceInfo],
) -> Result<(), BenchError> {
    cfg.validate()?;
    for info in devices {
        let mut cases = 0;
        if let Some(c) = &cfg.compute {
            cases += c.dtypes.len();
        }
        if let Some(m) = &cfg.memory {
            cases += m.kernels.len() * m.blocks.len();
        }
        if let Some(t) = &cfg.transfer {
            cases += t.directions.len() * t.host.len() * t.blocks.len();
        }
        cases += usize::from(cfg.launch);
        runner.plan(cases);
        match open(info) {
            Ok(mut s) => run_device(runner, cfg, s.as_mut())?,
            Err(e) => {
                let case = base_case("gpu", Metric::Throughput, "", info);
                runner.skip(&case, &e)?;
            }
        }
    }
    Ok(())
}

/// `hostbench run`'s GPU section: every device the configured backends find, or one skipped entry
/// saying why there is none (the run goes on).
pub fn run_available(runner: &mut Runner, cfg: &GpuConfig) -> Result<(), BenchError> {
    let listing = list_devices(&cfg.backends);
    match select(&listing, cfg) {
        Ok(devices) => run_gpu(runner, cfg, &devices),
        Err(BenchError::Unsupported(why)) => {
            let names: Vec<&str> = cfg.backends.iter().map(|b| b.name()).collect();
            let case = Case::new("gpu", Metric::Throughput, "").param("backend", names.join(","));
            runner.skip_with(&case, "unsupported", &why)
        }
        Err(e) => Err(e),
    }
}

fn run_device(runner: &mut Runner, cfg: &GpuConfig, s: &mut dyn Session) -> Result<(), BenchError> {
    let info = s.info().clone();
    if let Some(c) = &cfg.compute {
        for &d in &c.dtypes {
            run_compute(runner, cfg, s, &info, d, &c.widths)?;
        }
    }
    if let Some(m) = &cfg.memory {
        for &k in &m.kernels {
            for &b in &m.blocks {
                let case = base_case("gpu.bandwidth", Metric::Throughput, "B/s", &info)
                    .param("kind", k.name())
                    .param("block_bytes", b);
                let made = s.memory(k, b);
                run_timed(runner, cfg, &case, &info, made, k.traffic(), |rec| {
                    set_peak_or(rec, Some(&info.mem_peak));
                    rec.extra.insert("bytes_counted".into(), json!(match k {
                        MemKernel::Copy => "read + write (2 x block per copy, as bandwidthTest)",
                        MemKernel::Read => "block bytes read (the per-work-item sums written back are not counted)",
                        MemKernel::Write => "block bytes written",
                    }));
                    small_block_note(rec, b);
                })?;
            }
        }
    }
    if let Some(t) = &cfg.transfer {
        for &dir in &t.directions {
            for &h in &t.host {
                for &b in &t.blocks {
                    let case = base_case("gpu.transfer", Metric::Throughput, "B/s", &info)
                        .param("kind", dir.name())
                        .param("host_memory", h.name())
                        .param("block_bytes", b);
                    let made = s.transfer(dir, h, b);
                    run_timed(runner, cfg, &case, &info, made, 1.0, |rec| {
                        rec.extra.insert(
                            "peak_note".into(),
                            json!("no link limit: the backend does not report the bus (PCIe generation x lanes)"),
                        );
                        small_block_note(rec, b);
                    })?;
                }
            }
        }
    }
    if cfg.launch {
        run_launch(runner, cfg, s, &info)?;
    }
    Ok(())
}

fn small_block_note(rec: &mut Record, block: u64) {
    if block < (1 << 20) {
        rec.extra.insert(
            "note".into(),
            json!("small block: the time is mostly launch or call overhead, not memory or link bandwidth"),
        );
    }
}

/// Measure a memory or transfer operation: `scale` × work per operation / time.
fn run_timed(
    runner: &mut Runner,
    cfg: &GpuConfig,
    case: &Case,
    info: &DeviceInfo,
    made: Result<Box<dyn Timed + '_>, BenchError>,
    scale: f64,
    finish: impl FnOnce(&mut Record),
) -> Result<(), BenchError> {
    let mut t = match made {
        Ok(t) => t,
        Err(e @ BenchError::InvalidInput(_)) => return Err(e),
        Err(e) => return runner.skip(case, &e),
    };
    let reps = match reps_for(t.as_mut(), cfg.duration, 1 << 20) {
        Ok(r) => r,
        Err(e) => return runner.skip(case, &e),
    };
    let work = t.work() * scale;
    let facts = t.facts();
    let mut n = 0u64;
    runner.run_case(
        case,
        || {
            n += 1;
            t.prepare(n)?;
            let secs = t.run(reps)?;
            t.validate()?;
            Ok(Sample::new(work * reps as f64 / secs).with("seconds_per_op", secs / reps as f64))
        },
        |rec| {
            device_extra(rec, info, facts);
            rec.extra.insert("ops_per_sample".into(), json!(reps));
            finish(rec);
        },
    )
}

/// Compute: a short validated run per vector width, then the runner's samples at the best one.
fn run_compute(
    runner: &mut Runner,
    cfg: &GpuConfig,
    s: &mut dyn Session,
    info: &DeviceInfo,
    dtype: Dtype,
    widths: &[u32],
) -> Result<(), BenchError> {
    let (bench, unit) = dtype.benchmark();
    let case = base_case(bench, Metric::Throughput, unit, info).param("dtype", dtype.name());
    if let Some((_, why)) = info.missing.iter().find(|(d, _)| *d == dtype) {
        return runner.skip_with(&case, "unsupported", why);
    }
    if runner.over_budget() {
        return runner.skip_with(&case, "budget", "time budget exhausted before this case");
    }
    // The sweep: each width validated, timed for a quarter of a sample.
    let mut sweep = serde_json::Map::new();
    let mut best: Option<(u32, f64)> = None;
    let mut errors = Vec::new();
    let probe = cfg.duration / 4;
    for &w in widths {
        let r = (|| -> Result<f64, BenchError> {
            let mut t = s.compute(dtype, w)?;
            let reps = reps_for(t.as_mut(), probe, 1 << 16)?;
            t.prepare(0)?;
            let secs = t.run(reps)?;
            t.validate()?;
            Ok(t.work() * reps as f64 / secs)
        })();
        match r {
            Ok(v) => {
                sweep.insert(w.to_string(), json!(v));
                if best.is_none_or(|(_, b)| v > b) {
                    best = Some((w, v));
                }
            }
            Err(e @ BenchError::Validation(_)) => return runner.skip(&case, &e),
            Err(e) => {
                sweep.insert(w.to_string(), json!(e.to_string()));
                errors.push(format!("width {w}: {e}"));
            }
        }
    }
    let Some((width, _)) = best else {
        return runner.skip(&case, &BenchError::Failed(errors.join("; ")));
    };
    let made = s.compute(dtype, width);
    let peak = info.peak(dtype).cloned();
    run_timed(runner, cfg, &case, info, made, 1.0, |rec| {
        rec.extra.insert("vector_width".into(), json!(width));
        rec.extra.insert("width_sweep".into(), Value::Object(sweep));
        set_peak_or(rec, peak.as_ref());
    })
}

/// Launch latency: an empty kernel, enqueue + wait, one round trip at a time; the sample is the
/// median round trip of a batch.
fn run_launch(
    runner: &mut Runner,
    cfg: &GpuConfig,
    s: &mut dyn Session,
    info: &DeviceInfo,
) -> Result<(), BenchError> {
    let case = base_case("gpu.launch", Metric::Latency, "s", info).param("kind", "roundtrip");
    let mut t = match s.launch() {
        Ok(t) => t,
        Err(e) => return runner.skip(&case, &e),
    };
    let facts = t.facts();
    let reps = match reps_for(t.as_mut(), cfg.duration, 20_000) {
        Ok(r) => r.max(5),
        Err(e) => return runner.skip(&case, &e),
    };
    runner.run_case(
        &case,
        || {
            let mut lat = Vec::with_capacity(reps as usize);
            let started = Instant::now();
            for _ in 0..reps {
                lat.push(t.run(1)?);
                // A slow device must not turn one sample into minutes.
                if started.elapsed() > cfg.duration * 4 {
                    break;
                }
            }
            t.validate()?;
            lat.sort_by(f64::total_cmp);
            let p = |q: f64| hostbench_core::stats::percentile_sorted(&lat, q);
            Ok(Sample::new(p(50.0))
                .with("p99_s", p(99.0))
                .with("min_s", lat[0])
                .with("round_trips", lat.len() as f64))
        },
        |rec| {
            device_extra(rec, info, facts);
            rec.extra.insert(
                "measures".into(),
                json!("host wall time of enqueue + wait for one empty kernel (global size 1); value = median round trip of each sample"),
            );
        },
    )
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
    fn names_parse_back_and_unknowns_are_invalid() {
        for d in Dtype::ALL {
            assert_eq!(Dtype::parse(d.name()).unwrap(), d);
        }
        assert_eq!(Dtype::parse("SP").unwrap(), Dtype::F32);
        assert_eq!(Dtype::parse("qp").unwrap(), Dtype::I8);
        for b in Backend::ALL {
            assert_eq!(Backend::parse(b.name()).unwrap(), b);
        }
        for k in MemKernel::ALL {
            assert_eq!(MemKernel::parse(k.name()).unwrap(), k);
        }
        assert!(matches!(
            Dtype::parse("f128"),
            Err(BenchError::InvalidInput(m)) if m.contains("f128")
        ));
        assert!(matches!(
            Backend::parse("vulkan"),
            Err(BenchError::InvalidInput(m)) if m.contains("vulkan")
        ));
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

    #[test]
    fn config_validation_bounds_blocks_and_widths() {
        let mut cfg = GpuConfig::default();
        assert!(cfg.validate().is_ok());
        cfg.memory = Some(MemoryConfig {
            kernels: vec![MemKernel::Read],
            blocks: vec![(1 << 30) + 1],
        });
        assert!(matches!(cfg.validate(), Err(BenchError::InvalidInput(_))));
        let cfg = GpuConfig {
            compute: Some(ComputeConfig {
                dtypes: vec![Dtype::F32],
                widths: vec![3],
            }),
            ..GpuConfig::default()
        };
        assert!(matches!(cfg.validate(), Err(BenchError::InvalidInput(m)) if m.contains('3')));
    }
}
