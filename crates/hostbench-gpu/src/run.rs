//! Running the cases: every configured case on every selected device through the shared runner
//! (compute with its vector-width sweep, device-memory bandwidth, host↔device transfers, launch
//! latency), and the record helpers that attach the device, its facts and the peaks.
//!
//! A device that fails to open, or a case the device cannot run, is recorded as skipped with the
//! reason; the run goes on.

use std::time::Instant;

use hostbench_core::model::{Metric, Peak, Record};
use hostbench_core::reference::{self, Better};
use hostbench_core::subsystem::ReferenceScope;
use hostbench_core::{BenchError, Case, Runner, Sample};
use serde_json::{json, Value};

use crate::config::{Dtype, GpuConfig, MemKernel};
use crate::device::{list_devices, select, DeviceInfo, PeakOr};
use crate::reference::{Peer, Test};
use crate::session::{open, reps_for, Session, Timed};
use crate::tensor::{self, Form, TensorType};
use crate::Backend;
use hostbench_core::units::format_bytes_iec;

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
    // Records are diagnosed with the GPU's clock reasons too.
    runner.diagnose_with(&crate::Gpu);
    // The tensor cases asked for by name on a machine with a CUDA device: the OpenCL devices
    // beside it (NVIDIA's OpenCL view of the same GPU, PoCL) get none rather than a skip each.
    let any_cuda = devices.iter().any(|d| d.backend == Backend::Cuda);
    let mut cfg = cfg.clone();
    if let Some(t) = cfg.tensor.as_mut().filter(|_| any_cuda) {
        t.opencl_skips = false;
    }
    let cfg = &cfg;
    for info in devices {
        let mut cases = 0;
        if let Some(c) = &cfg.compute {
            cases += c.dtypes_for(info).len();
        }
        cases += tensor_types(cfg, info).len();
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

/// `hostbench run`'s GPU section: each GPU once (see `each_gpu_once`), or one skipped entry
/// saying why there is none (the run goes on).
pub fn run_available(runner: &mut Runner, cfg: &GpuConfig) -> Result<(), BenchError> {
    let listing = list_devices(&cfg.backends);
    match select(&listing, cfg) {
        Ok(devices) => {
            let (keep, left_out) = each_gpu_once(devices);
            for (d, why) in left_out {
                let what = format!("{} {} ({})", d.backend.name(), d.index, d.name);
                runner.left_out("gpu", &what, &why)?;
            }
            run_gpu(runner, cfg, &keep)
        }
        Err(BenchError::Unsupported(why)) => {
            let names: Vec<&str> = cfg.backends.iter().map(|b| b.name()).collect();
            let case = Case::new("gpu", Metric::Throughput, "").param("backend", names.join(","));
            runner.skip_with(&case, "unsupported", &why)
        }
        Err(e) => Err(e),
    }
}

/// What `hostbench run` measures of `devices`: each GPU once, and the host CPU's OpenCL device
/// only where there is no GPU. An NVIDIA GPU appears twice, as a CUDA device and through
/// NVIDIA's OpenCL driver, and measuring both doubles the phase for the same hardware (on an
/// H200 the OpenCL figures came to 0.90-1.01 of CUDA's, whose kernels are tuned for the GPU):
/// the OpenCL view of a GPU that CUDA also lists is left out, paired by name in listing order.
/// Among several GPUs of one model, which twin is which is not known without PCI addresses, but
/// the number left out is right. A CPU OpenCL device (PoCL) is the CPU the cpu phase measures;
/// beside a GPU it only lengthens the run. Each device left out comes with why and how to
/// measure it.
pub fn each_gpu_once(devices: Vec<DeviceInfo>) -> (Vec<DeviceInfo>, Vec<(DeviceInfo, String)>) {
    let any_gpu = devices.iter().any(|d| d.kind == "gpu");
    let mut cuda: Vec<(String, usize)> = devices
        .iter()
        .filter(|d| d.backend == Backend::Cuda)
        .map(|d| (d.name.clone(), d.index))
        .collect();
    let (mut keep, mut left_out) = (Vec::new(), Vec::new());
    for d in devices {
        let again = format!(
            "`hostbench gpu --backend {} --device {}` measures it",
            d.backend.name(),
            d.index
        );
        if d.backend == Backend::OpenCl && d.kind == "gpu" {
            if let Some(i) = cuda.iter().position(|(name, _)| *name == d.name) {
                let (_, twin) = cuda.remove(i);
                let why = format!(
                    "the same GPU as cuda {twin}, measured through CUDA; {again} through OpenCL"
                );
                left_out.push((d, why));
                continue;
            }
        }
        if any_gpu && d.kind == "cpu" {
            let why = format!("the host CPU's OpenCL device, left out beside a GPU (the cpu phase measures this CPU); {again}");
            left_out.push((d, why));
            continue;
        }
        keep.push(d);
    }
    (keep, left_out)
}

/// The clpeak tests this device's cases want: its global bandwidth beside the read kernel at the
/// largest block (clpeak reads one large buffer), its compute beside each dtype it has a test
/// for. The headline (`run`'s default) is the bandwidth, else f32 compute.
fn clpeak_tests(cfg: &GpuConfig, info: &DeviceInfo) -> Vec<Test> {
    if info.backend != Backend::OpenCl {
        // clpeak measures OpenCL devices only; a CUDA device's reference is its driver's copy.
        return Vec::new();
    }
    if cfg.reference == ReferenceScope::Headline && info.kind == "cpu" {
        // A CPU device (PoCL) reads fastest from a cache-resident block, which is what the
        // summary shows, and clpeak's one large buffer does not stand beside that; its run took
        // 6 of a 2-CPU host's 11 s gpu phase. The cpu and mem phases measure this CPU against
        // their references; `hostbench gpu --reference` still runs clpeak here.
        return Vec::new();
    }
    let bandwidth = cfg
        .memory
        .as_ref()
        .is_some_and(|m| m.kernels.contains(&MemKernel::Read) && !m.blocks.is_empty())
        .then_some(Test::GlobalBandwidth);
    let compute: Vec<Test> = cfg
        .compute
        .as_ref()
        .map(|c| {
            c.dtypes_for(info)
                .into_iter()
                .filter_map(Test::for_dtype)
                .collect()
        })
        .unwrap_or_default();
    let headline = bandwidth.or_else(|| compute.iter().copied().find(|&t| t == Test::ComputeSp));
    let mut tests: Vec<Test> = bandwidth.into_iter().chain(compute).collect();
    tests.retain(|&t| cfg.reference.wants(Some(t) == headline));
    tests
}

fn run_device(runner: &mut Runner, cfg: &GpuConfig, s: &mut dyn Session) -> Result<(), BenchError> {
    let info = s.info().clone();
    let mut peer = Peer::new(&info, clpeak_tests(cfg, &info));
    if let Some(c) = &cfg.compute {
        for d in c.dtypes_for(&info) {
            run_compute(runner, cfg, s, &info, d, &c.widths, &mut peer)?;
        }
    }
    for t in tensor_types(cfg, &info) {
        run_tensor(runner, cfg, s, &info, t)?;
    }
    if let Some(m) = &cfg.memory {
        let largest = m.blocks.iter().copied().max();
        for &k in &m.kernels {
            for &b in &m.blocks {
                let like_clpeak = k == MemKernel::Read && Some(b) == largest;
                let beside = (k == MemKernel::Copy && cfg.reference.wants(Some(b) == largest))
                    .then(|| driver_copy(runner, cfg, s, b))
                    .flatten();
                let mut case = base_case("gpu.bandwidth", Metric::Throughput, "B/s", &info)
                    .param("kind", k.name())
                    .param("block_bytes", b);
                let level = memory_level(&info, k, b);
                if let Some((level, _)) = &level {
                    case = case.param("level", *level);
                }
                let made = s.memory(k, b);
                run_timed(runner, cfg, &case, &info, made, k.traffic(), |rec| {
                    match &level {
                        Some(("L2", why)) => {
                            rec.extra.insert("peak_note".into(), json!(why));
                        }
                        _ => set_peak_or(rec, Some(&info.mem_peak)),
                    }
                    if k == MemKernel::Read && matches!(level, Some(("DRAM", _))) {
                        short_launch_note(rec);
                    }
                    rec.extra.insert("bytes_counted".into(), json!(match k {
                        MemKernel::Copy => "read + write (2 x block per copy, as bandwidthTest)",
                        MemKernel::Read => "block bytes read (the per-work-item sums written back are not counted)",
                        MemKernel::Write => "block bytes written",
                    }));
                    small_block_note(rec, b);
                    if like_clpeak {
                        peer.attach(rec, Test::GlobalBandwidth);
                    }
                    if let Some((outcome, cmd)) = beside {
                        let r = outcome.and_then(|(tool, version, values)| {
                            reference::reference(&tool, version, &values, rec.value, Better::Higher)
                        });
                        reference::attach(rec, r, &cmd, DRIVER_COPY_APART);
                    }
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
                        link_limit(rec);
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

/// A transfer's limit: the PCIe link's one-direction payload rate at the highest generation and
/// width this GPU can train to in this slot (NVML), so a downtrained link reads as a link below
/// its maximum, with a warning naming both, rather than as a slow copy. Where the backend reports
/// no link (OpenCL, no NVML) the record says there is no limit and why.
fn link_limit(rec: &mut Record) {
    let g = rec.conditions.as_ref().and_then(|c| c.gpu.as_ref());
    let max = g.and_then(|g| g.pcie_max_gen.zip(g.pcie_max_width));
    let Some((gen, width)) = max else {
        rec.extra.insert(
            "peak_note".into(),
            json!("no link limit: the backend does not report the bus (PCIe generation x lanes)"),
        );
        return;
    };
    let under_load = g.and_then(|g| g.pcie_gen.zip(g.pcie_width));
    if let Some(bps) = hostbench_core::health::link_peak_bps(gen, width) {
        rec.set_peak(Some(Peak {
            value: bps,
            basis: format!(
                "PCIe Gen{gen} x{width} (NVML's maximum for this GPU in this slot), one direction \
                 after line encoding, before packet overhead"
            ),
        }));
    }
    if let Some((cur_gen, cur_width)) = under_load {
        rec.extra.insert(
            "pcie_link".into(),
            json!(format!("Gen{cur_gen} x{cur_width}")),
        );
        if cur_gen < gen || cur_width < width {
            rec.warnings.push(format!(
                "the PCIe link ran at Gen{cur_gen} x{cur_width} under load, below the Gen{gen} \
                 x{width} this GPU and slot allow: a downtrained link (reseat the card, check \
                 the slot or riser), not a slow copy"
            ));
        }
    }
}

/// Why the copy kernel and the driver's copy may differ beyond the parity band.
const DRIVER_COPY_APART: &str = "the driver's copy of a small block is one call with its own \
     overhead, and of a large one may use the copy engines or a kernel tuned per GPU; hostbench's \
     is one grid-stride kernel of 16-byte vectors";

/// The backend's own device-to-device copy of `block`, measured as the copy kernel is (the
/// runner's warm-ups and repeat count of batches of the same length, each validated):
/// `(tool, version, bytes moved per second per sample)` and the command, or `None` where the
/// backend has no such copy. Counted as the copy kernel is, read + write.
type DriverCopy = (Result<(String, String, Vec<f64>), BenchError>, String);

fn driver_copy(
    runner: &Runner,
    cfg: &GpuConfig,
    s: &mut dyn Session,
    block: u64,
) -> Option<DriverCopy> {
    if runner.over_budget() {
        // The copy case itself is about to be skipped for the budget: nothing to stand beside.
        return None;
    }
    let mut t = match s.driver_copy(block)? {
        Ok(t) => t,
        Err(e) => return Some((Err(e), String::new())),
    };
    let (tool, version, _) = tool_facts(t.as_ref());
    let measured = measure_beside(runner, cfg, t.as_mut(), 2.0);
    let cmd = match &measured {
        Ok((reps, _)) => format!(
            "{tool}(dst, src, {block}) x {reps} per sample on one stream, host clock around the \
             batch and the stream's synchronisation (in process, as the copy kernel)"
        ),
        Err(_) => format!("{tool}(dst, src, {block})"),
    };
    Some((measured.map(|(_, v)| (tool, version, v)), cmd))
}

/// Why a DRAM read of a block that takes well under a millisecond reads below the large
/// blocks' rate: a fixed cost per launch (measured on an H200, see `cuda::blocks_per_sm`).
fn short_launch_note(rec: &mut Record) {
    let Some(t) = rec.extra.get("seconds_per_op").and_then(Value::as_f64) else {
        return;
    };
    if t < 500e-6 {
        rec.extra.insert(
            "launch_note".into(),
            json!(format!(
                "one launch reads this block in {:.0} µs, and each launch carries a fixed few \
                 microseconds (the gap between launches, the first loads' latency, the last \
                 loads' drain: about 5 µs on an H200), so it reads a few % below a block that \
                 takes a millisecond or more",
                t * 1e6
            )),
        );
    }
}

fn small_block_note(rec: &mut Record, block: u64) {
    if block < (1 << 20) {
        rec.extra.insert(
            "note".into(),
            json!("small block: the time is mostly launch or call overhead, not memory or link bandwidth"),
        );
    }
}

/// The device's telemetry over a case's measured samples, for the record's conditions: NVML
/// for a CUDA device, read after every sample past the warm-up; or why there is none.
struct Watch {
    telemetry: std::cell::RefCell<Result<crate::nvml::Telemetry, String>>,
    warmup: usize,
    samples: std::cell::Cell<usize>,
}

impl Watch {
    fn new(info: &DeviceInfo, warmup: usize) -> Watch {
        let telemetry = match info.backend {
            Backend::Cuda => crate::nvml::Telemetry::open(
                info.facts.get("pci_bus_id").and_then(|v| v.as_str()),
                info.index,
            ),
            Backend::OpenCl => Err(
                "OpenCL devices expose no clock, power or throttle-reason interface to read".into(),
            ),
        };
        Watch {
            telemetry: std::cell::RefCell::new(telemetry),
            warmup,
            samples: std::cell::Cell::new(0),
        }
    }

    /// A sample just ended, while the device's clocks still hold.
    fn sample_done(&self) {
        let n = self.samples.get() + 1;
        self.samples.set(n);
        if n > self.warmup {
            if let Ok(t) = &mut *self.telemetry.borrow_mut() {
                t.sample();
            }
        }
    }

    fn attach(&self, rec: &mut Record, info: &DeviceInfo) {
        let Some(c) = rec.conditions.as_mut() else {
            return;
        };
        match &*self.telemetry.borrow() {
            Ok(t) => {
                let mut g = t.conditions();
                g.sm_clock_max_hz = info.clock_hz;
                if rec.metric == Metric::Throughput {
                    g.work_per_joule = g.power_avg_w.filter(|w| *w > 0.0).map(|w| rec.value / w);
                }
                c.gpu = Some(g);
            }
            Err(why) => {
                c.unavailable.insert("gpu".into(), why.clone());
            }
        }
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
    let watch = Watch::new(info, runner.config().warmup);
    runner.run_case(
        case,
        || {
            n += 1;
            t.prepare(n)?;
            let secs = t.run(reps)?;
            t.validate()?;
            watch.sample_done();
            Ok(Sample::new(work * reps as f64 / secs).with("seconds_per_op", secs / reps as f64))
        },
        |rec| {
            watch.attach(rec, info);
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
    peer: &mut Peer,
) -> Result<(), BenchError> {
    let (bench, unit) = dtype.benchmark();
    let case = base_case(bench, Metric::Throughput, unit, info)
        .param("dtype", dtype.name())
        .param("unit", "fma");
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
    let mut all_unsupported = true;
    let probe = cfg.duration / 4;
    // CUDA threads are scalar (SIMT): the OpenCL vector widths do not apply there, so a profile's
    // width list (quick's 4 and 16) must not leave a CUDA device with nothing to run.
    let widths = if info.backend == Backend::Cuda {
        &[1][..]
    } else {
        widths
    };
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
                all_unsupported &= matches!(e, BenchError::Unsupported(_));
                sweep.insert(w.to_string(), json!(e.to_string()));
                errors.push(format!("width {w}: {e}"));
            }
        }
    }
    let Some((width, _)) = best else {
        // Every width refused by the device is the case unsupported, not failed.
        let why = errors.join("; ");
        let kind = if all_unsupported {
            "unsupported"
        } else {
            "failed"
        };
        return runner.skip_with(&case, kind, &why);
    };
    let made = s.compute(dtype, width);
    let peak = info.peak(dtype).cloned();
    run_timed(runner, cfg, &case, info, made, 1.0, |rec| {
        rec.extra.insert("vector_width".into(), json!(width));
        rec.extra.insert("width_sweep".into(), Value::Object(sweep));
        set_peak_or(rec, peak.as_ref());
        if let Some(t) = Test::for_dtype(dtype) {
            peer.attach(rec, t);
        }
    })
}

/// Where a memory kernel's working set lives: `L2` when it fits in the device's L2 (a copy's
/// source and destination together), else `DRAM`, with why the DRAM limit does not bound an L2
/// figure; `None` where the device does not report its L2.
fn memory_level(info: &DeviceInfo, k: MemKernel, block: u64) -> Option<(&'static str, String)> {
    let l2 = info.facts.get("l2_bytes")?.as_u64()?;
    let set = block * if k == MemKernel::Copy { 2 } else { 1 };
    if set <= l2 {
        Some((
            "L2",
            format!(
                "level=L2: the working set ({}) fits in the {} L2, so the device-memory limit \
                 does not bound it (an L2 figure above the DRAM peak is the cache, not a wrong \
                 basis), and no L2 bandwidth is published to hold it against",
                format_bytes_iec(set),
                format_bytes_iec(l2)
            ),
        ))
    } else {
        Some(("DRAM", String::new()))
    }
}

/// The tensor precisions this device gets cases for: every configured one on a CUDA device;
/// on an OpenCL device none, unless they were asked for by name and no CUDA device is measured
/// (then each is a skip saying why).
fn tensor_types(cfg: &GpuConfig, info: &DeviceInfo) -> Vec<TensorType> {
    match &cfg.tensor {
        Some(t) if info.backend == Backend::Cuda || (t.explicit && t.opencl_skips) => {
            t.types.clone()
        }
        _ => Vec::new(),
    }
}

/// The square size of the cuBLASLt GEMM beside a tensor record: compute-bound on any GPU with
/// tensor cores (8192³ bf16 is 1.1 TFLOP, about 1.4 ms on an H100), 1.5 GiB of f64 matrices.
const GEMM_N: u64 = 8192;

/// The SM clock the tensor peak is taken at: NVML's reading after each sample, else the
/// device's maximum clock attribute, saying which.
fn tensor_clock(rec: &Record, info: &DeviceInfo) -> Option<(f64, &'static str)> {
    let measured = rec
        .conditions
        .as_ref()
        .and_then(|c| c.gpu.as_ref())
        .and_then(|g| g.sm_clock_hz)
        .filter(|&c| c > 0.0);
    match (measured, info.clock_hz) {
        (Some(c), _) => Some((c, "SM clock NVML read after each sample")),
        (None, Some(c)) => Some((
            c,
            "CU_DEVICE_ATTRIBUTE_CLOCK_RATE, the maximum clock: no NVML reading",
        )),
        (None, None) => None,
    }
}

/// Tensor cores: each instruction form written for the device, validated and timed for a
/// quarter of a sample (only the first outside a sweep); then the runner's samples on the
/// fastest; the peak at the SM clock measured over those samples; cuBLASLt beside it where
/// asked.
fn run_tensor(
    runner: &mut Runner,
    cfg: &GpuConfig,
    s: &mut dyn Session,
    info: &DeviceInfo,
    t: TensorType,
) -> Result<(), BenchError> {
    let (bench, unit) = t.benchmark();
    let case = base_case(bench, Metric::Throughput, unit, info)
        .param("dtype", t.name())
        .param("unit", "tensor");
    if info.backend != Backend::Cuda {
        return runner.skip_with(
            &case,
            "unsupported",
            "OpenCL has no portable tensor-core instruction: the tensor cases run on CUDA devices",
        );
    }
    let Some((major, minor)) = info.compute_capability() else {
        return runner.skip_with(
            &case,
            "unsupported",
            "the device reports no compute capability",
        );
    };
    let forms = match tensor::forms(major, minor, t) {
        Ok(f) => f,
        // Asked for by name, a precision the device lacks is a skip; in a run's default list
        // (fp8 on an A100, f64 on an L40S) it is left out with the reason, so the run on a
        // GPU without it is still complete.
        Err(why) if cfg.tensor.as_ref().is_some_and(|c| c.explicit) => {
            return runner.skip_with(&case, "unsupported", &why)
        }
        Err(why) => {
            let what = format!("{} {} {} tensor", info.backend.name(), info.index, t.name());
            return runner.left_out("gpu", &what, &why);
        }
    };
    if runner.over_budget() {
        return runner.skip_with(&case, "budget", "time budget exhausted before this case");
    }
    let sweep = cfg.tensor.as_ref().is_some_and(|c| c.sweep);
    let tried: &[Form] = if sweep { &forms } else { &forms[..1] };
    let mut results = serde_json::Map::new();
    let mut best: Option<(Form, f64)> = None;
    let mut failed = Vec::new();
    for &form in tried {
        let r = (|| -> Result<f64, BenchError> {
            let mut k = s.tensor(t, form)?;
            let reps = reps_for(k.as_mut(), cfg.duration / 4, 1 << 16)?;
            k.prepare(0)?;
            let secs = k.run(reps)?;
            k.validate()?;
            Ok(k.work() * reps as f64 / secs)
        })();
        let name = form.describe(t);
        match r {
            Ok(v) => {
                results.insert(name, json!(v));
                if best.is_none_or(|(_, b)| v > b) {
                    best = Some((form, v));
                }
            }
            Err(e) => {
                results.insert(name.clone(), json!(e.to_string()));
                failed.push(format!("{name}: {e}"));
            }
        }
    }
    let Some((form, _)) = best else {
        return runner.skip(&case, &BenchError::Failed(failed.join("; ")));
    };
    let headline = t == TensorType::Bf16;
    let beside = cfg
        .reference
        .wants(headline)
        .then(|| gemm_beside(runner, cfg, s, t))
        .flatten();
    let made = s.tensor(t, form);
    let sms = info.compute_units;
    let table = tensor::macs_per_sm(major, minor, t, &info.name);
    run_timed(runner, cfg, &case, info, made, 1.0, |rec| {
        rec.extra
            .insert("form_sweep".into(), Value::Object(results));
        for f in &failed {
            rec.warnings.push(format!("instruction form left out: {f}"));
        }
        match (&table, tensor_clock(rec, info)) {
            (Ok((macs, source)), Some((clock, clock_source))) => {
                rec.set_peak(Some(tensor::tensor_peak(
                    sms,
                    clock,
                    clock_source,
                    t,
                    *macs,
                    source,
                )));
                if let Some(max) = info.clock_hz {
                    let at_max = tensor::tensor_peak(sms, max, "maximum", t, *macs, source);
                    rec.extra
                        .insert("peak_at_max_clock".into(), json!(at_max.value));
                }
            }
            (Err(why), _) => {
                rec.extra.insert("peak_note".into(), json!(why));
            }
            (_, None) => {
                rec.extra.insert(
                    "peak_note".into(),
                    json!("no SM clock: neither NVML nor the clock attribute"),
                );
            }
        }
        if let Some((outcome, cmd, note)) = beside {
            let r = outcome.and_then(|(tool, version, values)| {
                reference::reference(&tool, version, &values, rec.value, Better::Higher)
            });
            reference::attach(rec, r, &cmd, GEMM_APART);
            if let Some(n) = note {
                rec.extra.insert("reference_note".into(), json!(n));
            }
        }
    })
}

/// Why the tensor kernel and cuBLASLt's GEMM may differ beyond the parity band.
const GEMM_APART: &str = "the GEMM also loads its matrices from device memory through shared \
     memory and writes D, which the throughput kernel does not; it runs the library's own \
     tiling, and at a lower clock where the extra traffic draws power";

/// cuBLASLt's GEMM of `t` measured as the tensor kernel is (the runner's warm-ups and repeat
/// count, each sample validated): `(tool, version, FLOP/s per sample)`, the command, and what
/// it multiplies where that is not exactly `t`.
type GemmBeside = (
    Result<(String, String, Vec<f64>), BenchError>,
    String,
    Option<&'static str>,
);

fn gemm_beside(
    runner: &Runner,
    cfg: &GpuConfig,
    s: &mut dyn Session,
    t: TensorType,
) -> Option<GemmBeside> {
    if runner.over_budget() {
        return None;
    }
    let note = crate::cublas::Types::for_tensor(t).note;
    let n = GEMM_N;
    let mut g = match s.gemm(t, n)? {
        Ok(g) => g,
        Err(e) => return Some((Err(e), String::new(), note)),
    };
    let measured = measure_beside(runner, cfg, g.as_mut(), 1.0);
    let (tool, version, library) = tool_facts(g.as_ref());
    // Which of the heuristic's algorithms ran, and what each did in its trial (TFLOP/s).
    let facts = g.facts();
    let fact = |k: &str| facts.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let trials: Vec<String> = fact("algorithm_trials")
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(Value::as_f64)
        .map(|r| format!("{:.0}", r / 1e12))
        .collect();
    let chosen = fact("algorithm").and_then(|v| v.as_u64()).unwrap_or(0);
    let cmd = format!(
        "cublasLtMatmul {n}x{n}x{n} {} (A transposed, inputs 1, 32 MiB workspace; the fastest \
         of the heuristic's {} algorithms in a short trial, number {chosen}: [{}] TFLOP/s) on \
         one stream, in process; library {library}",
        t.name(),
        trials.len(),
        trials.join(", ")
    );
    Some((measured.map(|(_, v)| (tool, version, v)), cmd, note))
}

/// `tool`, `version` and `library` facts of a reference's timed operation.
fn tool_facts(t: &dyn Timed) -> (String, String, String) {
    let fact = |k: &str| {
        t.fact(k)
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_else(|| "unknown".into())
    };
    (fact("tool"), fact("version"), fact("library"))
}

/// A reference's timed operation measured as hostbench's own cases are: the runner's warm-ups
/// and repeat count of batches a sample long, each validated; `scale` × work per second.
fn measure_beside(
    runner: &Runner,
    cfg: &GpuConfig,
    t: &mut dyn Timed,
    scale: f64,
) -> Result<(u64, Vec<f64>), BenchError> {
    let (warmup, repeat) = (runner.config().warmup, runner.config().repeat.max(1));
    let reps = reps_for(t, cfg.duration, 1 << 20)?;
    let mut values = Vec::with_capacity(repeat);
    for n in 0..warmup + repeat {
        t.prepare(n as u64)?;
        let secs = t.run(reps)?;
        t.validate()?;
        if n >= warmup {
            values.push(scale * t.work() * reps as f64 / secs);
        }
    }
    Ok((reps, values))
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
    let watch = Watch::new(info, runner.config().warmup);
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
            watch.sample_done();
            lat.sort_by(f64::total_cmp);
            let p = |q: f64| hostbench_core::stats::percentile_sorted(&lat, q);
            Ok(Sample::new(p(50.0))
                .with("p99_s", p(99.0))
                .with("min_s", lat[0])
                .with("round_trips", lat.len() as f64))
        },
        |rec| {
            watch.attach(rec, info);
            device_extra(rec, info, facts);
            rec.extra.insert(
                "measures".into(),
                json!("host wall time of enqueue + wait for one empty kernel (global size 1); value = median round trip of each sample"),
            );
        },
    )
}

#[cfg(test)]
mod tests;
