//! The GPU burn-in (`hostbench burn --only gpu`): every SM kept busy for the duration with work
//! whose every result is checked, and most of the device memory under pattern tests.
//!
//! Units, per device, taking turns within each timeline interval (so each unit's rate is seen
//! over the whole run, and one that slows as the device heats shows in the timeline):
//!
//! * `fma-f32`, `fma-f64`: chaotic fused multiply-add chains on every thread of a full wave of
//!   blocks; every thread's checksum is compared with the host's replay of the same correctly
//!   rounded arithmetic (`expected_chains`), and each block says which SM ran it, so a wrong
//!   result names the block, the thread and the SM, and the record counts errors per SM and the
//!   SMs covered.
//! * `tensor-<type>`: the tensor-core kernels of `hostbench gpu` (wgmma / mma.sync, CUDA only),
//!   whose every thread's checksum has a closed form and is checked after each batch.
//! * `mem-patterns`: as much of the free device memory as the driver grants (nine tenths of it,
//!   less a margin), filled and checked on the device in four patterns in turn (address, walking
//!   ones, and their inverses, each pass with a new seed); every thread reports its count of
//!   wrong words, the first one's index and value, so a wrong word is named by its offset.
//!
//! The fault hook `HOSTBENCH_FAULT=gpu:block:N` flips bit 0 of the checksum the first thread of
//! block N wrote in every `fma-f32` launch, after it was read back and before it is compared:
//! the detection path from the readback on is exercised on any device, PoCL's included.
//!
//! Why the chains are chaotic: the benchmark chains (`replay`) are exact by construction
//! (`x·1 + 2⁻¹⁰`) so their answer is a closed form, which also means the multiplier only ever
//! sees 1.0. `x² + c` with `c = -1.875` uses every mantissa bit of both factors, its orbit stays
//! in `[-1.875, 1.640625]`, and any wrong bit changes the end value; the host replays it with
//! Rust's `mul_add`, the same IEEE fused multiply-add the device's `fma.rn` computes.

mod device;
mod source;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use hostbench_core::burn::{Fault, Mismatch, TimelinePoint, UnitRun};
use hostbench_core::BenchError;
use serde::{Deserialize, Serialize};

use crate::device::{list_devices, DeviceInfo};
use crate::replay::fold;
use crate::session::{reps_for, Session};
use crate::tensor::{self, Form, TensorType};
use crate::{Backend, Dtype};

pub use source::{
    chain_entry, opencl as opencl_source, ptx as ptx_source, ptx_chain_args, ptx_pattern_args, C,
    CHAINS, HIGH_MUL, MAX_WIDTH, STEP, UNROLL,
};

/// The device side of the burn, one per open session (`Session::burn`).
pub trait BurnKernels {
    /// The session itself, for the tensor kernels.
    fn session(&mut self) -> &mut dyn Session;
    /// One launch of the chain kernel (`double`: f64) with `iters` turns, waited for and read
    /// back.
    fn chain(&mut self, double: bool, iters: u32) -> Result<ChainRun, BenchError>;
    /// Lanes per chain of the chain kernel (`expected_chains`' width): 1 but on OpenCL CPUs.
    fn width(&self, _double: bool) -> u32 {
        1
    }
    /// 32-bit words in the pattern buffer.
    fn words(&self) -> u64;
    /// Fill the buffer with `pattern(i, mode, seed)`.
    fn fill(&mut self, mode: u32, seed: u32) -> Result<(), BenchError>;
    /// Compare the buffer with the pattern on the device: one record per thread.
    fn check(&mut self, mode: u32, seed: u32) -> Result<Vec<MemRecord>, BenchError>;
}

/// What one chain launch wrote.
#[derive(Debug, Clone)]
pub struct ChainRun {
    /// Every thread's checksum.
    pub sums: Vec<u32>,
    /// The SM each block ran on, where the backend tells (CUDA's `%smid`).
    pub sms: Option<Vec<u32>>,
    /// Threads per block.
    pub block: u32,
}

/// One thread's part of a pattern check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemRecord {
    pub errors: u32,
    /// The first wrong word's value.
    pub got: u32,
    /// The first wrong word's index (the word count when none was wrong).
    pub first: u64,
}

impl MemRecord {
    /// Records from the check kernel's output: four little-endian words per thread.
    pub fn parse(bytes: &[u8]) -> Vec<MemRecord> {
        let w = |c: &[u8], i: usize| u32::from_le_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
        bytes
            .chunks_exact(16)
            .map(|c| MemRecord {
                errors: w(c, 0),
                got: w(c, 4),
                first: u64::from(w(c, 8)) | (u64::from(w(c, 12)) << 32),
            })
            .collect()
    }
}

/// The patterns, by mode.
pub const PATTERNS: [&str; 4] = [
    "address",
    "walking-ones",
    "inverse-address",
    "walking-zeros",
];

/// Word `i`'s value under `mode` and `seed` (the kernels compute the same).
pub fn pattern(i: u64, mode: u32, seed: u32) -> u32 {
    let (lo, hi) = (i as u32, (i >> 32) as u32);
    let address = lo ^ hi.wrapping_mul(source::HIGH_MUL) ^ seed;
    let walking = 1u32 << (lo.wrapping_add(seed) & 31);
    let v = if mode & 1 == 1 { walking } else { address };
    v ^ 0u32.wrapping_sub((mode >> 1) & 1)
}

/// Every start vector's checksum after `iters` turns of the chain kernel with `width` lanes per
/// chain, replayed on the host with the same fused multiply-add (lane l of chain j of start s
/// starts at `k = (s·CHAINS + j)·width + l + 1`, folded chain by chain, lane by lane); the starts
/// are spread over the host's CPUs.
pub fn expected_chains(double: bool, iters: u32, width: u32) -> Vec<u32> {
    let steps = u64::from(iters) * u64::from(UNROLL);
    let one = |start: u32| -> u32 {
        let mut h = 0u32;
        for j in 0..CHAINS {
            for l in 0..width {
                let k = (start * CHAINS + j) * width + l + 1;
                if double {
                    let mut x = f64::from(k).mul_add(source::STEP, source::C);
                    for _ in 0..steps {
                        x = x.mul_add(x, source::C);
                    }
                    let b = x.to_bits();
                    h = fold(fold(h, b as u32), (b >> 32) as u32);
                } else {
                    let (c, step) = (source::C as f32, source::STEP as f32);
                    let mut x = (k as f32).mul_add(step, c);
                    for _ in 0..steps {
                        x = x.mul_add(x, c);
                    }
                    h = fold(h, x.to_bits());
                }
            }
        }
        h
    };
    let starts: Vec<u32> = (0..source::STARTS).collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut out = vec![0u32; starts.len()];
    std::thread::scope(|s| {
        let per = starts.len().div_ceil(threads.max(1));
        for (chunk, slots) in starts.chunks(per).zip(out.chunks_mut(per)) {
            s.spawn(move || {
                for (&st, slot) in chunk.iter().zip(slots.iter_mut()) {
                    *slot = one(st);
                }
            });
        }
    });
    out
}

/// What the GPU burn is asked to do.
#[derive(Debug, Clone)]
pub struct GpuBurnConfig {
    pub devices: Vec<DeviceInfo>,
    pub duration: Duration,
    pub interval: Duration,
    pub fault: Option<Fault>,
}

/// One device's coverage: which SMs ran checked work, and where the errors were.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BurnedGpu {
    /// `cuda0`, `opencl0`: the units' place.
    pub place: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus: Option<String>,
    /// SMs (CUDA) or compute units (OpenCL).
    pub sms: u32,
    /// SMs that ran at least one checked chain block; none where the backend does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sms_covered: Option<u32>,
    /// Wrong chain results per SM (`sm12`), or per block where the SM is unknown.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors_by_sm: BTreeMap<String, u64>,
    /// Bytes under the pattern test.
    pub mem_bytes: u64,
    /// Why a part did not run or stopped (an error from the driver mid-burn): such a device is
    /// not a pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stopped: Vec<String>,
}

/// The GPU burn's outcome.
#[derive(Debug, Clone, Default)]
pub struct GpuBurn {
    pub units: Vec<UnitRun>,
    pub timeline: Vec<TimelinePoint>,
    pub devices: Vec<BurnedGpu>,
}

/// The devices `hostbench burn` plans for: with `backend` given, every device of it (OpenCL's
/// CPU devices too: how the burn is tried on a machine without a GPU); else the CUDA devices,
/// or where there is none, OpenCL's GPUs. `Err` says why there is none.
pub fn plan(backend: Option<Backend>) -> Result<Vec<DeviceInfo>, String> {
    let listed = |b: Backend| list_devices(&[b]);
    if let Some(b) = backend {
        let l = listed(b);
        return if l.devices.is_empty() {
            Err(l.none_reason())
        } else {
            Ok(l.devices)
        };
    }
    let cuda = listed(Backend::Cuda);
    if !cuda.devices.is_empty() {
        return Ok(cuda.devices);
    }
    let cl = listed(Backend::OpenCl);
    let gpus: Vec<DeviceInfo> = cl
        .devices
        .iter()
        .filter(|d| d.kind == "gpu")
        .cloned()
        .collect();
    if !gpus.is_empty() {
        return Ok(gpus);
    }
    let mut why: Vec<String> = cuda
        .absent
        .iter()
        .chain(&cl.absent)
        .map(|(b, r)| format!("{}: {r}", b.name()))
        .collect();
    if !cl.devices.is_empty() {
        why.push("opencl: CPU devices only (--gpu-backend opencl burns them)".into());
    }
    Err(format!("no GPU ({})", why.join("; ")))
}

/// Burn every configured device at once (one thread each) for the duration.
pub fn run(cfg: &GpuBurnConfig) -> GpuBurn {
    let t0 = Instant::now();
    let outcomes: Vec<GpuBurn> = std::thread::scope(|s| {
        let handles: Vec<_> = cfg
            .devices
            .iter()
            .map(|info| s.spawn(move || device::burn_device(info, cfg, t0)))
            .collect();
        handles
            .into_iter()
            .zip(&cfg.devices)
            .map(|(h, info)| {
                h.join().unwrap_or_else(|_| GpuBurn {
                    devices: vec![BurnedGpu {
                        place: place(info),
                        name: info.name.clone(),
                        stopped: vec!["the burn thread panicked".into()],
                        ..BurnedGpu::default()
                    }],
                    ..GpuBurn::default()
                })
            })
            .collect()
    });
    let mut all = GpuBurn::default();
    for o in outcomes {
        all.units.extend(o.units);
        all.timeline.extend(o.timeline);
        all.devices.extend(o.devices);
    }
    all.timeline.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    all
}

/// `cuda0`, `opencl1`.
fn place(info: &DeviceInfo) -> String {
    format!("{}{}", info.backend.name(), info.index)
}

/// One unit of a device's burn, with its running totals.
struct Unit {
    kind: Kind,
    run: UnitRun,
    /// Work done over the whole run (the run's rate is this over its seconds).
    total: f64,
    /// Work done and seconds spent in the current interval.
    work: f64,
    secs: f64,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Chain { double: bool },
    Tensor(TensorType),
    Memory,
}

/// Launch-sized work: a chain launch lasts about this long once calibrated.
const LAUNCH_TARGET: Duration = Duration::from_millis(50);

/// The units a device runs: its chains, its tensor types (CUDA), the memory patterns.
fn units_for(info: &DeviceInfo) -> (Vec<Unit>, Vec<(String, String)>) {
    let p = place(info);
    let unit = |kind: Kind, name: &str, rate_unit: &str| Unit {
        kind,
        run: UnitRun::new("gpu", &p, "all", name, rate_unit),
        total: 0.0,
        work: 0.0,
        secs: 0.0,
    };
    let mut out = vec![unit(Kind::Chain { double: false }, "fma-f32", "FLOP/s")];
    let mut absent = Vec::new();
    let has_f64 =
        info.backend == Backend::Cuda || info.dtypes.iter().any(|(d, _)| *d == Dtype::F64);
    if has_f64 {
        out.push(unit(Kind::Chain { double: true }, "fma-f64", "FLOP/s"));
    } else {
        absent.push((
            "fma-f64".to_string(),
            "the device has no double precision".to_string(),
        ));
    }
    if info.backend == Backend::Cuda {
        if let Some((major, minor)) = info.compute_capability() {
            let mut missing = Vec::new();
            for t in TensorType::ALL {
                match tensor::forms(major, minor, t) {
                    Ok(f) if !f.is_empty() => out.push(unit(
                        Kind::Tensor(t),
                        &format!("tensor-{}", t.name()),
                        "FLOP/s",
                    )),
                    Ok(_) => {}
                    Err(why) => missing.push((format!("tensor-{}", t.name()), why)),
                }
            }
            // A GPU with no tensor kernel at all for one reason (no tensor cores) is one line.
            match missing.first() {
                Some((_, why))
                    if missing.len() == TensorType::ALL.len()
                        && missing.iter().all(|(_, w)| w == why) =>
                {
                    absent.push(("tensor".to_string(), why.clone()))
                }
                _ => absent.extend(missing),
            }
        }
    }
    out.push(unit(Kind::Memory, "mem-patterns", "GB/s"));
    (out, absent)
}

/// The chain results of one launch compared with the replay: errors counted on the unit and per
/// SM (or block), SMs seen added to `covered`. Returns the results checked.
fn check_chains(
    run: &ChainRun,
    expected: &[u32],
    unit: &mut UnitRun,
    by_sm: &mut BTreeMap<String, u64>,
    covered: &mut BTreeSet<u32>,
) -> u64 {
    // A block that never ran leaves its SM id at the cleared value (all ones): not a coverage,
    // and its threads' checksums (cleared too) are wrong below.
    if let Some(sms) = &run.sms {
        covered.extend(sms.iter().copied().filter(|&s| s != u32::MAX));
    }
    let block = run.block.max(1) as usize;
    for (g, &got) in run.sums.iter().enumerate() {
        let want = expected[g % expected.len()];
        if got == want {
            continue;
        }
        let b = g / block;
        let sm = run
            .sms
            .as_ref()
            .and_then(|s| s.get(b))
            .copied()
            .filter(|&s| s != u32::MAX);
        let key = sm.map_or(format!("block{b}"), |s| format!("sm{s}"));
        *by_sm.entry(key).or_default() += 1;
        let mut m = Mismatch::of_bits(
            format!(
                "block {b}{}, thread {}",
                sm.map_or(String::new(), |s| format!(" (SM {s})")),
                g % block
            ),
            u64::from(want),
            u64::from(got),
        );
        m.expected = format!("{want:#010x}");
        m.got = format!("{got:#010x}");
        unit.record_error(m);
    }
    unit.checks += run.sums.len() as u64;
    run.sums.len() as u64
}

/// The pattern check's records folded into the unit: every wrong word counted, the first named
/// by its byte offset in the buffer with the expected and read values.
fn check_memory(records: &[MemRecord], words: u64, mode: u32, seed: u32, unit: &mut UnitRun) {
    let first = records
        .iter()
        .filter(|r| r.errors > 0 && r.first < words)
        .min_by_key(|r| r.first);
    let wrong: u64 = records.iter().map(|r| u64::from(r.errors)).sum();
    if let Some(r) = first {
        let want = pattern(r.first, mode, seed);
        let mut m = Mismatch::of_bits(
            format!(
                "offset {:#x} ({})",
                r.first * 4,
                PATTERNS[mode as usize % 4]
            ),
            u64::from(want),
            u64::from(r.got),
        );
        m.expected = format!("{want:#010x}");
        m.got = format!("{:#010x}", r.got);
        unit.record_error(m);
        unit.errors += wrong - 1;
    } else if wrong > 0 {
        // Counted, but no record named a word inside the buffer: say so rather than drop it.
        unit.record_error(Mismatch::of_bits("offset unknown", 0, 0));
        unit.errors += wrong - 1;
    }
    unit.checks += words;
}

/// Bit 0 of the first thread of block `block` (modulo the launch's blocks) flipped: the
/// `gpu:block:N` fault, applied to the readback before it is compared.
fn inject(run: &mut ChainRun, block: u64) {
    let blocks = (run.sums.len() / run.block.max(1) as usize).max(1) as u64;
    let g = (block % blocks) as usize * run.block as usize;
    if let Some(v) = run.sums.get_mut(g) {
        *v ^= 1;
    }
}

/// The fault's block when it is a GPU fault.
fn fault_block(fault: &Option<Fault>) -> Option<u64> {
    match fault {
        Some(Fault::GpuBlock { block }) => Some(*block),
        _ => None,
    }
}

/// The first of the device's instruction forms for `t` whose kernel builds and runs (as `hostbench
/// gpu` falls back), and the repetitions of it that fill `LAUNCH_TARGET`; why none where none
/// does.
fn tensor_reps(s: &mut dyn Session, t: TensorType) -> Result<(Form, u64), String> {
    let (major, minor) = s.info().compute_capability().unwrap_or((0, 0));
    let mut why = Vec::new();
    for form in tensor::forms(major, minor, t)? {
        let r = s
            .tensor(t, form)
            .and_then(|mut k| reps_for(k.as_mut(), LAUNCH_TARGET, 1 << 12));
        match r {
            Ok(n) => return Ok((form, n)),
            Err(e) => why.push(format!("{}: {e}", form.describe(t))),
        }
    }
    Err(format!("no tensor kernel ran ({})", why.join("; ")))
}

/// The pattern buffer: `want` bytes, halved (to no less than 64 MiB, in whole words) while the
/// device refuses: another process may hold memory meanwhile. The buffer and its size.
pub(crate) fn alloc_halving<B>(
    want: u64,
    mut alloc: impl FnMut(u64) -> Result<B, BenchError>,
) -> Result<(B, u64), BenchError> {
    let mut bytes = want & !3;
    loop {
        match alloc(bytes) {
            Ok(b) => return Ok((b, bytes)),
            Err(_) if bytes > (64 << 20) => bytes = (bytes / 2) & !3,
            Err(e) => return Err(e),
        }
    }
}
