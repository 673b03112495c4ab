//! Bandwidth: one kernel over private per-thread arrays, block by block, timed by the runner.
//!
//! A case is (kernel, block order, block size, working set, threads, store flavour, ISA). Each
//! thread gets its own arrays, mapped and first-touched on its pinned CPU (on a one-node host,
//! filled by every CPU: see `fill_cpus`), sized so all arrays of all threads add up to the
//! working set. The arrays are cut into blocks of the block size, and a
//! sample walks a number of blocks in sequential or permuted order, continuing where the previous
//! sample stopped, so a small-block case still covers the whole working set over its samples and
//! `--passes` can ask for the classic "N passes over 1 GiB".
//!
//! Bytes are counted the STREAM way (every array element the kernel names, read or written, once);
//! with temporal stores the hardware also reads each destination line before writing it
//! (write-allocate), so DRAM records carry that real traffic too. `rw` (the classic assignment's
//! RWS/RWR) is a byte-granular block copy and is counted like STREAM's copy: read + write.
//!
//! Validation, as STREAM does it, by replaying the arithmetic: before each sample a spread of
//! positions in the blocks about to be processed is poisoned; afterwards each must hold exactly
//! what a scalar replay gives, so a kernel that skipped work fails the case. `read` is checked by
//! its exact checksum, and once a case has covered every block its output arrays are checked in
//! full. Only positions the sample processed are poisoned, so a failure can only mean the kernel
//! did not do its work.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hostbench_core::model::{Host, Metric, Record, Work};
use hostbench_core::spec::Spec;
use hostbench_core::units::format_bytes_iec;
use hostbench_core::{affinity, parallel, BenchError, Case, Runner, Sample};
use serde_json::json;

use crate::buffer::{Pages, Region};
use crate::kernels::{read_expected, vector_bytes, Isa, Ops};
use crate::order::{Pattern, Permutation};
use crate::{peak, sizing};

hostbench_core::named_enum! {
    /// What a bandwidth kernel does to its arrays.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Kernel("kernel") {
        /// Sum every byte (as 8-byte words): loads only.
        Read = "read",
        /// Fill with a byte: stores only.
        Write = "write",
        /// STREAM copy `c = a`.
        Copy = "copy",
        /// STREAM scale `b = s·c`.
        Scale = "scale",
        /// STREAM add `c = a + b`.
        Add = "add",
        /// STREAM triad `a = b + s·c`.
        Triad = "triad",
        /// The classic read+write: copy each block from one region to another, any block size.
        Rw = "rw",
    }
}

/// STREAM's scalar.
pub const SCALAR: f64 = 3.0;
/// Initial array values (STREAM uses 1, 2, 0; `c` is 0.5 here so that every kernel's result
/// differs from its destination's initial value, and a skipped block cannot pass validation).
const INIT_A: f64 = 1.0;
const INIT_B: f64 = 2.0;
const INIT_C: f64 = 0.5;
/// The byte `read` sums.
const READ_BYTE: u8 = 1;

impl Kernel {
    /// Arrays the kernel names; also the STREAM byte count per byte of block.
    pub fn arrays(self) -> usize {
        match self {
            Self::Read | Self::Write => 1,
            Self::Copy | Self::Scale | Self::Rw => 2,
            Self::Add | Self::Triad => 3,
        }
    }

    pub fn stores(self) -> bool {
        self != Self::Read
    }

    /// STREAM's kernels work on 8-byte elements; the others on bytes.
    pub fn element_bytes(self) -> u64 {
        match self {
            Self::Copy | Self::Scale | Self::Add | Self::Triad => 8,
            _ => 1,
        }
    }

    /// Real DRAM traffic per STREAM-counted byte: a temporal store first reads the line it writes.
    pub fn traffic_factor(self, store: Store) -> f64 {
        if self.stores() && store == Store::Temporal {
            (self.arrays() + 1) as f64 / self.arrays() as f64
        } else {
            1.0
        }
    }

    /// (output array, initial value of each array) — `None` output for `read`.
    fn layout(self) -> (Option<usize>, &'static [f64]) {
        match self {
            Self::Read | Self::Write => (if self == Self::Write { Some(0) } else { None }, &[]),
            Self::Copy => (Some(1), &[INIT_A, INIT_C]),
            Self::Scale => (Some(0), &[INIT_B, INIT_C]),
            Self::Add => (Some(2), &[INIT_A, INIT_B, INIT_C]),
            Self::Triad => (Some(0), &[INIT_A, INIT_B, INIT_C]),
            Self::Rw => (Some(1), &[]),
        }
    }

    /// The value the output holds at f64 element `i` after the kernel, by scalar replay.
    fn expected_f64(self) -> f64 {
        match self {
            Self::Copy => INIT_A,
            Self::Scale => SCALAR * INIT_C,
            Self::Add => INIT_A + INIT_B,
            Self::Triad => INIT_B + SCALAR * INIT_C,
            _ => f64::NAN,
        }
    }
}

hostbench_core::named_enum! {
    /// Store flavour.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Store("store kind") {
        Temporal = "temporal" | "t" | "normal",
        NonTemporal = "nontemporal" | "nt" | "streaming",
    }
}

/// Block size: the whole per-thread array (plain streaming) or a fixed number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Block {
    Whole,
    Bytes(u64),
}

/// One point: everything that identifies a `mem.bandwidth` record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub kernel: Kernel,
    pub pattern: Pattern,
    pub block: Block,
    /// All arrays of all threads together.
    pub working_set: u64,
    pub threads: usize,
    pub store: Store,
    pub isa: Isa,
}

/// How a case is sized and timed.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Passes over the working set per sample; `None`: as many blocks as fill `duration`.
    pub passes: Option<f64>,
    pub duration: Duration,
    pub pages: Pages,
    pub seed: u64,
    /// Run likwid-bench's matching kernel this many times beside the case (None: not at all).
    pub reference: Option<usize>,
}

/// The per-thread geometry a point resolves to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes of each array on each thread (a whole number of blocks).
    pub array_bytes: u64,
    pub block_bytes: u64,
    pub blocks: u64,
}

impl Point {
    /// Cut the working set into per-thread arrays of whole blocks; refuse what cannot be cut.
    pub fn geometry(&self) -> Result<Geometry, BenchError> {
        let k = self.kernel;
        let per_array = self.working_set / (self.threads as u64 * k.arrays() as u64);
        let elem = k.element_bytes();
        let (block, array) = match self.block {
            Block::Whole => {
                // Whole cache lines, so every thread's arrays start and end on a line.
                let a = per_array / 64 * 64;
                (a, a)
            }
            Block::Bytes(b) => {
                if b == 0 {
                    return Err(BenchError::invalid("block size must be at least 1 byte"));
                }
                if b % elem != 0 {
                    return Err(BenchError::invalid(format!(
                        "kernel {} works on {elem}-byte elements: block size {b} B is not a \
                         multiple of {elem}",
                        k.name()
                    )));
                }
                (b, per_array / b * b)
            }
        };
        if block == 0 || array < block {
            return Err(BenchError::invalid(format!(
                "block size {} is larger than the working set allows: {} over {} thread(s) x {} \
                 array(s) leaves {} per array",
                match self.block {
                    Block::Whole => "(whole array)".to_string(),
                    Block::Bytes(b) => format_bytes_iec(b),
                },
                format_bytes_iec(self.working_set),
                self.threads,
                k.arrays(),
                format_bytes_iec(per_array)
            )));
        }
        Ok(Geometry {
            array_bytes: array,
            block_bytes: block,
            blocks: array / block,
        })
    }

    fn case(&self, g: &Geometry, host: &Host) -> Case {
        let ws = g.array_bytes * self.kernel.arrays() as u64 * self.threads as u64;
        Case::new("mem.bandwidth", Metric::Throughput, "B/s")
            .work(Work::Memory)
            .param("kernel", self.kernel.name())
            .param("pattern", self.pattern.name())
            .param("block_bytes", g.block_bytes)
            .param("working_set_bytes", ws)
            .param("threads", self.threads)
            .param(
                "store",
                if self.kernel.stores() {
                    self.store.name()
                } else {
                    "none"
                },
            )
            .param("isa", self.isa.name())
            .param("level", sizing::level_for(host, ws, self.threads))
    }
}

/// Where a thread is in the block order, and what it owns.
struct ThreadState {
    arrays: Vec<Region>,
    /// Next counter in the order (block index for `seq`, permutation counter for `random`).
    cursor: u64,
    /// Blocks processed since the case began.
    processed: u64,
    fully_checked: bool,
    perm: Permutation,
}

/// The order of one thread's blocks: sequential positions or permutation counters.
fn order_domain(pattern: Pattern, g: &Geometry, perm: &Permutation) -> u64 {
    match pattern {
        Pattern::Seq => g.blocks,
        Pattern::Random => perm.domain(),
    }
}

fn block_at(pattern: Pattern, perm: &Permutation, c: u64) -> Option<u64> {
    match pattern {
        Pattern::Seq => Some(c),
        Pattern::Random => perm.at(c),
    }
}

/// Apply the kernel to one block at byte offset `off`; returns `read`'s checksum (0 otherwise).
///
/// # Safety
/// `off + len` must lie within every array of `ptrs`, and for f64 kernels `off` and `len` must be
/// multiples of 8.
#[inline(always)]
unsafe fn apply(
    kernel: Kernel,
    ops: &Ops,
    ptrs: &[*mut u8; 3],
    off: usize,
    len: usize,
    nt: bool,
    fill: u8,
) -> u64 {
    // SAFETY: the caller guarantees the ranges; the arrays of one thread never overlap.
    unsafe {
        let p = |i: usize| ptrs[i].add(off);
        let f = |i: usize| ptrs[i].add(off).cast::<f64>();
        match kernel {
            Kernel::Read => (ops.read)(p(0), len),
            Kernel::Write => {
                (ops.fill)(p(0), len, fill, nt);
                0
            }
            Kernel::Copy | Kernel::Rw => {
                (ops.copy)(p(1), p(0), len, nt);
                0
            }
            Kernel::Scale => {
                (ops.scale)(f(0), f(1), len / 8, SCALAR, nt);
                0
            }
            Kernel::Add => {
                (ops.add)(f(2), f(0), f(1), len / 8, nt);
                0
            }
            Kernel::Triad => {
                (ops.triad)(f(0), f(1), f(2), len / 8, SCALAR, nt);
                0
            }
        }
    }
}

/// The source byte `rw` copies at offset `j`: varied, so a misplaced copy is caught.
#[inline(always)]
fn rw_byte(j: usize) -> u8 {
    (j.wrapping_mul(131).wrapping_add(7) % 251) as u8
}

/// Expected output byte/element at byte offset `pos` of the output array.
fn expected_at(kernel: Kernel, pos: usize, fill: u8) -> Expected {
    match kernel {
        Kernel::Write => Expected::Byte(fill),
        Kernel::Rw => Expected::Byte(rw_byte(pos)),
        Kernel::Read => Expected::None,
        k => Expected::F64(k.expected_f64()),
    }
}

#[derive(Debug, Clone, Copy)]
enum Expected {
    None,
    Byte(u8),
    F64(f64),
}

/// Positions (byte offsets in the output array) checked after a sample: first, middle and last
/// element of up to 32 blocks spread over the counters the sample will certainly process.
fn check_positions(
    pattern: Pattern,
    perm: &Permutation,
    g: &Geometry,
    cursor: u64,
    blocks: u64,
    elem: u64,
) -> Vec<usize> {
    let domain = order_domain(pattern, g, perm);
    let n = blocks.min(domain);
    let picks = n.min(32);
    let mut out = Vec::new();
    for q in 0..picks {
        let c = (cursor + q * n / picks) % domain;
        if let Some(b) = block_at(pattern, perm, c) {
            let start = b * g.block_bytes;
            let last = start + g.block_bytes - elem;
            let mid = start + (g.block_bytes / 2) / elem * elem;
            out.extend([start, mid, last].map(|x| x as usize));
        }
    }
    out
}

/// Write the bitwise opposite of the expected value at each position (so it cannot pass by luck).
fn poison(region: &mut Region, positions: &[usize], kernel: Kernel, fill: u8) {
    let bytes = region.as_mut_slice();
    for &p in positions {
        match expected_at(kernel, p, fill) {
            Expected::Byte(b) => bytes[p] = !b,
            Expected::F64(x) => {
                bytes[p..p + 8].copy_from_slice(&(!x.to_bits()).to_ne_bytes());
            }
            Expected::None => {}
        }
    }
}

fn verify(region: &Region, positions: &[usize], kernel: Kernel, fill: u8) -> Result<(), String> {
    let bytes = region.as_slice();
    for &p in positions {
        match expected_at(kernel, p, fill) {
            Expected::Byte(b) if bytes[p] != b => {
                return Err(format!("byte {p}: {} instead of {b}", bytes[p]));
            }
            Expected::F64(x) => {
                let mut w = [0u8; 8];
                w.copy_from_slice(&bytes[p..p + 8]);
                let got = f64::from_ne_bytes(w);
                if got.to_bits() != x.to_bits() {
                    return Err(format!("element {}: {got} instead of {x}", p / 8));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Check an idempotent kernel's whole output array against the scalar replay.
fn verify_full(region: &Region, kernel: Kernel) -> Result<(), String> {
    match kernel {
        Kernel::Rw => match region
            .as_slice()
            .iter()
            .enumerate()
            .find(|&(j, &b)| b != rw_byte(j))
        {
            Some((j, &b)) => Err(format!("byte {j}: {b} instead of {}", rw_byte(j))),
            None => Ok(()),
        },
        Kernel::Copy | Kernel::Scale | Kernel::Add | Kernel::Triad => {
            let want = kernel.expected_f64();
            match region.as_f64().iter().position(|&x| x != want) {
                Some(i) => Err(format!(
                    "element {i}: {} instead of {want}",
                    region.as_f64()[i]
                )),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// What an array holds before a case's first sample.
#[derive(Debug, Clone, Copy)]
enum Init {
    /// Every byte this value (`read`'s arrays).
    Bytes(u8),
    /// Pages faulted in only; the kernel writes every byte before any is read.
    Touch,
    /// `rw_byte(j)` at byte j (`rw`'s source).
    RwPattern,
    /// Every f64 element this value (the STREAM kernels').
    Value(f64),
}

fn init_of(kernel: Kernel, array: usize) -> Init {
    let (_, inits) = kernel.layout();
    match kernel {
        Kernel::Read => Init::Bytes(READ_BYTE),
        Kernel::Write => Init::Touch,
        Kernel::Rw if array == 0 => Init::RwPattern,
        Kernel::Rw => Init::Touch,
        _ => Init::Value(inits.get(array).copied().unwrap_or(0.0)),
    }
}

/// Write `init` over bytes `[off, off + len)` of the array that starts at `base`.
///
/// # Safety
/// `[base + off, base + off + len)` lies in a live, writable mapping that nothing else accesses
/// for the call; for `Init::Value`, `base + off` is 8-byte aligned and `len` a multiple of 8.
unsafe fn init_range(base: *mut u8, off: usize, len: usize, init: Init, ops: &Ops) {
    // SAFETY: the caller's contract: the range is live, writable, exclusive and aligned.
    unsafe {
        let p = base.add(off);
        match init {
            Init::Bytes(b) => (ops.fill)(p, len, b, false),
            Init::Touch => {
                let mut i = 0;
                while i < len {
                    *p.add(i) = 1;
                    i += 4096;
                }
                if len > 0 {
                    *p.add(len - 1) = 1;
                }
            }
            Init::RwPattern => {
                for i in 0..len {
                    *p.add(i) = rw_byte(off + i);
                }
            }
            Init::Value(v) => std::slice::from_raw_parts_mut(p.cast::<f64>(), len / 8).fill(v),
        }
    }
}

/// Map one thread's arrays, and unless `fill` is false (the caller fills them, see
/// [`init_in_parallel`]) first-touch them with the kernel's initial contents on this thread.
fn init_arrays(
    kernel: Kernel,
    g: &Geometry,
    pages: Pages,
    ops: &Ops,
    node: Option<usize>,
    fill: bool,
) -> Result<Vec<Region>, BenchError> {
    let mut arrays = Vec::with_capacity(kernel.arrays());
    for a in 0..kernel.arrays() {
        // Every byte is written (a fill, or the kernel's own writes after a touch) before any
        // is read.
        let mut r = Region::new_for_overwrite(g.array_bytes as usize, pages)?;
        if let Some(node) = node {
            r.bind_node(node)?;
        }
        if fill {
            // SAFETY: the whole of a region this thread owns; a Region is 2 MiB-aligned and the
            // arrays of f64 kernels hold whole elements.
            unsafe { init_range(r.as_mut_ptr(), 0, r.len(), init_of(kernel, a), ops) };
        }
        arrays.push(r);
    }
    Ok(arrays)
}

/// The CPUs that fill a case's arrays together when the case itself runs on fewer: on a host
/// with one NUMA node and no placement asked for, where the CPU that first touches a page
/// decides nothing. A one-thread case on two CPUs then fills its gigabytes twice as fast (the
/// fill of a triad's 5.6 GiB on one thread was some 2 s of a 3.4–4.2 s case on two CPUs of a
/// Sapphire Rapids VM). `None`: each thread fills its own arrays.
fn fill_cpus<'a>(
    host: &Host,
    place: &Placement,
    threads: usize,
    order: &'a [usize],
) -> Option<&'a [usize]> {
    let placed = host.numa_nodes > 1 || place.cpus.is_some() || place.mem_node.is_some();
    (!placed && order.len() > threads).then_some(order)
}

/// The share of an array one CPU fills at a time in [`init_in_parallel`]: a whole number of huge
/// pages, so no page is faulted by two CPUs.
const FILL_PIECE: usize = 64 << 20;

/// Fill every thread's arrays (mapped, untouched) with the kernel's initial contents on all of
/// `cpus`, each taking every n-th piece of `piece` bytes (a multiple of 8).
fn init_in_parallel(
    kernel: Kernel,
    arrays: &mut [Vec<Region>],
    ops: &Ops,
    cpus: &[usize],
    piece: usize,
) -> Result<(), BenchError> {
    // (array start, offset, length, contents); addresses as integers, to cross threads.
    let mut pieces: Vec<(usize, usize, usize, Init)> = Vec::new();
    for thread in arrays.iter_mut() {
        for (a, r) in thread.iter_mut().enumerate() {
            let (base, len, init) = (r.as_mut_ptr() as usize, r.len(), init_of(kernel, a));
            pieces.extend(
                (0..len)
                    .step_by(piece)
                    .map(|off| (base, off, piece.min(len - off), init)),
            );
        }
    }
    let n = cpus.len();
    parallel::run_pinned(
        n,
        cpus,
        |h| {
            for &(base, off, len, init) in pieces.iter().skip(h).step_by(n) {
                // SAFETY: `arrays` is borrowed mutably for the call, so these regions live and
                // nothing else touches them; each piece lies inside its array, no two overlap,
                // and offsets are multiples of `piece` (of 8) from a 2 MiB-aligned start.
                unsafe { init_range(base as *mut u8, off, len, init, ops) };
            }
            Ok(())
        },
        |_| (),
    )?;
    Ok(())
}

/// Where a point's threads run and its arrays live, when not the defaults (the NUMA matrix).
#[derive(Debug, Clone, Default)]
pub struct Placement {
    /// CPUs the threads are pinned to, in order; `None`: the placement order of all CPUs.
    pub cpus: Option<Vec<usize>>,
    /// NUMA node every array is bound to before its first touch; `None`: first touch decides.
    pub mem_node: Option<usize>,
}

/// Measure one point through the runner.
pub fn run_point(
    runner: &mut Runner,
    point: &Point,
    timing: &Timing,
    host: &Host,
    spec: &Spec,
) -> Result<(), BenchError> {
    let g = point.geometry()?;
    let case = point.case(&g, host);
    run_point_as(
        runner,
        point,
        timing,
        host,
        spec,
        &case,
        &Placement::default(),
        &|_| {},
    )
}

/// Measure one point through the runner under another benchmark's case (the NUMA matrix), its
/// threads and memory placed as `place` says, `more` adding to the record.
#[allow(clippy::too_many_arguments)]
pub fn run_point_as(
    runner: &mut Runner,
    point: &Point,
    timing: &Timing,
    host: &Host,
    spec: &Spec,
    case: &Case,
    place: &Placement,
    more: &dyn Fn(&mut Record),
) -> Result<(), BenchError> {
    let g = point.geometry()?;
    match point.isa.ops() {
        Ok(ops) => measure(
            runner, point, &g, case, ops, timing, host, spec, place, more,
        ),
        Err(e) => runner.skip(case, &e),
    }
}

#[allow(clippy::too_many_arguments)]
fn measure(
    runner: &mut Runner,
    point: &Point,
    g: &Geometry,
    case: &Case,
    ops: Ops,
    timing: &Timing,
    host: &Host,
    spec: &Spec,
    place: &Placement,
    more: &dyn Fn(&mut Record),
) -> Result<(), BenchError> {
    let (g, case) = (*g, case.clone());
    let kernel = point.kernel;
    let nt = point.store == Store::NonTemporal && kernel.stores();
    if nt && !point.isa.has_nontemporal() {
        let e = BenchError::unsupported(format!(
            "non-temporal stores are not available for ISA {} on this architecture",
            point.isa
        ));
        return runner.skip(&case, &e);
    }
    let order = place.cpus.clone().unwrap_or_else(affinity::placement_order);
    let threads = point.threads;
    let pattern = point.pattern;

    // Map and first-touch on the pinned threads that will use the arrays, or map there and fill
    // on every CPU where that places the pages no differently.
    let fill_on = fill_cpus(host, place, threads, &order);
    let setup = parallel::run_pinned(
        threads,
        &order,
        |_| {
            init_arrays(
                kernel,
                &g,
                timing.pages,
                &ops,
                place.mem_node,
                fill_on.is_none(),
            )
        },
        |_| (),
    )
    .and_then(|mut s| {
        if let Some(cpus) = fill_on {
            init_in_parallel(kernel, &mut s.results, &ops, cpus, FILL_PIECE)?;
        }
        Ok(s.results)
    });
    let per_thread = match setup {
        Ok(s) => s,
        Err(e @ BenchError::InvalidInput(_)) => return Err(e),
        Err(e) => return runner.skip(&case, &e),
    };
    let huge_of = |arrays: &[Vec<Region>]| -> u64 {
        arrays.iter().flatten().filter_map(Region::huge_bytes).sum()
    };
    let mut huge_bytes = huge_of(&per_thread);
    let wanted: u64 = per_thread.iter().flatten().map(|r| r.len() as u64).sum();
    // A huge-page request the first touch left short (the kernel fell back to base pages) is
    // asked again before anything is timed, as the latency curve does; what stays short is
    // marked below and is no huge-page figure.
    let mut collapse = None;
    if timing.pages == Pages::Huge && huge_bytes < wanted {
        let before = huge_bytes as f64 / wanted.max(1) as f64;
        // Every region is asked; the last refusal (if any) speaks for them.
        let mut refused = None;
        for r in per_thread.iter().flatten() {
            if let Err(why) = r.collapse() {
                refused = Some(why);
            }
        }
        huge_bytes = huge_of(&per_thread);
        collapse = Some(json!({
            "before": before,
            "after": huge_bytes as f64 / wanted.max(1) as f64,
            "refused": refused,
        }));
    }
    let shares: Vec<f64> = place
        .mem_node
        .map(|n| {
            per_thread
                .iter()
                .flatten()
                .filter_map(|r| r.share_on_node(n, 64))
                .collect()
        })
        .unwrap_or_default();
    let on_node = (!shares.is_empty()).then(|| shares.iter().sum::<f64>() / shares.len() as f64);
    let states: Vec<Mutex<ThreadState>> = per_thread
        .into_iter()
        .enumerate()
        .map(|(i, arrays)| {
            Mutex::new(ThreadState {
                arrays,
                cursor: 0,
                processed: 0,
                fully_checked: false,
                perm: Permutation::new(g.blocks, timing.seed.wrapping_add(i as u64)),
            })
        })
        .collect();
    let total_bytes = g.array_bytes * kernel.arrays() as u64 * threads as u64;
    let huge_fraction = huge_bytes as f64 / total_bytes.max(1) as f64;
    let vb = vector_bytes(point.isa);
    let out_array = kernel.layout().0;
    let fill_counter = AtomicU64::new(0);

    // One sample: `blocks` blocks on every thread, poisoned check positions verified after.
    let sample_blocks = |blocks: u64| -> Result<f64, BenchError> {
        let fill = 2 + (fill_counter.fetch_add(1, Ordering::Relaxed) % 200) as u8;
        let mut checks = Vec::with_capacity(threads);
        for st in &states {
            let mut st = st
                .lock()
                .map_err(|_| BenchError::Failed("state lock".into()))?;
            let pos = check_positions(
                pattern,
                &st.perm,
                &g,
                st.cursor,
                blocks,
                kernel.element_bytes(),
            );
            if let Some(o) = out_array {
                poison(&mut st.arrays[o], &pos, kernel, fill);
            }
            checks.push(pos);
        }
        let t = parallel::run_pinned(
            threads,
            &order,
            |i| {
                let mut st = states[i]
                    .lock()
                    .map_err(|_| BenchError::Failed("state lock".into()))?;
                let mut ptrs = [std::ptr::null_mut::<u8>(); 3];
                for (p, r) in ptrs.iter_mut().zip(st.arrays.iter_mut()) {
                    *p = r.as_mut_ptr();
                }
                let domain = order_domain(pattern, &g, &st.perm);
                let (mut c, mut done, mut sum) = (st.cursor, 0u64, 0u64);
                let bb = g.block_bytes as usize;
                while done < blocks {
                    if let Some(b) = block_at(pattern, &st.perm, c) {
                        // SAFETY: b < g.blocks, so the block lies inside every array.
                        sum = sum.wrapping_add(unsafe {
                            apply(kernel, &ops, &ptrs, b as usize * bb, bb, nt, fill)
                        });
                        done += 1;
                    }
                    c += 1;
                    if c == domain {
                        c = 0;
                    }
                }
                st.cursor = c;
                st.processed += blocks;
                if kernel == Kernel::Read {
                    let want = read_expected(bb, READ_BYTE, vb).wrapping_mul(blocks);
                    if sum != want {
                        return Err(BenchError::Validation(format!(
                            "read checksum {sum:#x} instead of {want:#x}"
                        )));
                    }
                }
                Ok(())
            },
            |i| -> Result<(), String> {
                let Some(o) = out_array else { return Ok(()) };
                let mut st = states[i].lock().map_err(|_| "state lock".to_string())?;
                verify(&st.arrays[o], &checks[i], kernel, fill)?;
                if !st.fully_checked && st.processed >= g.blocks && kernel != Kernel::Write {
                    verify_full(&st.arrays[o], kernel)?;
                    st.fully_checked = true;
                }
                Ok(())
            },
        )?;
        for (i, a) in t.after.into_iter().enumerate() {
            a.map_err(|e| BenchError::Validation(format!("{} thread {i}: {e}", kernel.name())))?;
        }
        Ok(t.wall_s)
    };

    // Blocks per sample: from --passes, else grown until a sample lasts the target duration.
    let blocks = match timing.passes {
        Some(p) => ((p * g.blocks as f64).round() as u64).max(1),
        None => {
            let target = timing.duration.as_secs_f64().max(1e-4);
            let mut b = g.blocks.clamp(1, 1 << 16);
            let began = Instant::now();
            loop {
                let t = match sample_blocks(b) {
                    Ok(t) => t,
                    Err(e @ BenchError::InvalidInput(_)) => return Err(e),
                    Err(e) => return runner.skip(&case, &e),
                };
                if t >= target / 4.0 || began.elapsed() > Duration::from_secs(5) {
                    break ((b as f64 * target / t.max(1e-9)).ceil() as u64).max(1);
                }
                b = b.saturating_mul(8);
            }
        }
    };
    let counted = (blocks * g.block_bytes * kernel.arrays() as u64 * threads as u64) as f64;
    let passes = blocks as f64 / g.blocks as f64;
    let factor = kernel.traffic_factor(point.store);
    let level = sizing::level_for(host, total_bytes, threads);
    let dram_peak = (level == "DRAM").then(|| peak::dram_peak(spec)).flatten();
    runner.run_case(
        &case,
        || Ok(Sample::new(counted / sample_blocks(blocks)?)),
        |rec: &mut Record| {
            rec.extra.insert("passes_per_sample".into(), json!(passes));
            rec.extra.insert("bytes_per_sample".into(), json!(counted));
            rec.extra.insert("pages".into(), json!(timing.pages.name()));
            rec.extra
                .insert("huge_fraction".into(), json!(huge_fraction));
            if let Some(c) = &collapse {
                rec.extra.insert("huge_collapse".into(), c.clone());
            }
            if timing.pages == Pages::Huge && huge_fraction < 1.0 {
                rec.extra
                    .insert(hostbench_core::model::PAGES_GRANTED.into(), json!("mixed"));
                let why = collapse
                    .as_ref()
                    .and_then(|c| c["refused"].as_str())
                    .map_or(String::new(), |w| format!(" ({w})"));
                rec.warnings.push(format!(
                    "huge pages requested but only {:.1} % of the arrays were backed by them, \
                     even after MADV_COLLAPSE{why}: not a huge-page figure",
                    huge_fraction * 100.0
                ));
            }
            rec.extra.insert("validated".into(), json!(true));
            if let Some(share) = on_node {
                rec.extra.insert("mem_node_share".into(), json!(share));
            }
            more(rec);
            if let Some(runs) = timing.reference {
                attach_likwid(rec, point, total_bytes, threads, runs);
            }
            if level == "DRAM" {
                rec.extra.insert("traffic_factor".into(), json!(factor));
                rec.extra
                    .insert("traffic_bytes_per_s".into(), json!(rec.value * factor));
                match &dram_peak {
                    Some(p) => {
                        rec.set_peak(Some(p.clone()));
                        rec.extra.insert(
                            "traffic_efficiency".into(),
                            json!(rec.value * factor / p.value),
                        );
                    }
                    None => rec.warnings.push(peak::no_peak_reason()),
                }
            }
        },
    )
}

/// likwid-bench beside the fastest record of `points` already measured: the figure the summary
/// shows for them (its rule: the highest throughput at the most threads), so a run that promises
/// one peer run beside each headline runs one, where running it beside every candidate cost a
/// DRAM-sized likwid-bench each (some 5 s at a large last-level cache).
pub fn likwid_beside_fastest(
    runner: &mut Runner,
    points: &[&Point],
    host: &Host,
) -> Result<(), BenchError> {
    let cases: Vec<(&Point, Case)> = points
        .iter()
        .filter_map(|p| Some((*p, p.case(&p.geometry().ok()?, host))))
        .collect();
    let fastest = runner
        .result()
        .records
        .iter()
        .filter_map(|r| {
            let (p, c) = cases
                .iter()
                .find(|(_, c)| c.benchmark == r.benchmark && c.params == r.params)?;
            Some((*p, c, r.value))
        })
        .max_by(|a, b| a.2.total_cmp(&b.2));
    let Some((point, case, _)) = fastest else {
        return Ok(());
    };
    let Some(ws) = case
        .params
        .get("working_set_bytes")
        .and_then(|v| v.as_u64())
    else {
        return Ok(());
    };
    let (benchmark, params) = (case.benchmark.clone(), case.params.clone());
    runner.amend(
        |r| r.benchmark == benchmark && r.params == params,
        |rec| attach_likwid(rec, point, ws, point.threads, 1),
    )?;
    Ok(())
}

/// likwid-bench beside the record just measured; a point without a likwid kernel, or a missing
/// tool, is a warning on the record, never a failed case.
fn attach_likwid(rec: &mut Record, point: &Point, working_set: u64, threads: usize, runs: usize) {
    let Some(kernel) = crate::reference::likwid_kernel(point) else {
        rec.warnings.push(
            "reference: likwid-bench has no kernel for this point (only whole-array sequential \
             read, write, copy and triad)"
                .into(),
        );
        return;
    };
    let iterations = crate::reference::likwid_iterations(working_set, rec.value);
    let args = crate::reference::likwid_args(&kernel, working_set, threads, iterations);
    hostbench_core::reference::attach(
        rec,
        crate::reference::likwid_reference(&args, runs, rec.value),
        &format!("likwid-bench {}", args.join(" ")),
        "likwid-bench pins its threads itself and runs after hostbench; on a shared or virtual \
         machine DRAM bandwidth moves by more than 10 % from one run to the next \
         (BENCHMARKS.md: per-round ratios 0.74–1.71)",
    );
}

#[cfg(test)]
mod tests;
