//! Memory latency: a pointer chase over one random cycle of cache lines (Sattolo), with 4 KiB or
//! verified transparent huge pages and optional parallel chains, plus the classic 1-byte
//! sequential and random access latency.
//!
//! **Why a random single cycle.** Latency is the time of a load whose address comes out of the
//! previous load, so exactly one miss is in flight. A constant-stride walk (lmbench's default
//! `lat_mem_rd`) is what stride prefetchers are built to catch: it reports prefetch-hidden
//! latency, not the memory's. A random order defeats them, but a random *permutation* read as
//! "line i links to line p(i)" has about ln n cycles, and a chase that starts in a short one spins
//! inside the cache. Sattolo's algorithm (Fisher–Yates with j strictly below i) draws uniformly
//! from the permutations with exactly one cycle, so every line is visited once per lap. There is
//! one link per 64-byte line: the line is what the memory moves, randomising inside it buys
//! nothing (on 128-byte-line cores two links share a line, which a random cycle almost never
//! turns into a hit).
//!
//! **Why hand-written loads.** The loop is `mov r, [r]` (x86-64) or `ldr x, [x]` (AArch64) in
//! `asm!`, unrolled 16 times: many x86 cores take an extra cycle for base+index addresses, which
//! a compiled `next = a[next]` would add to every L1 hit (the Chips and Cheese lesson). Other
//! targets use a volatile read, which is correct but may carry that cycle.
//!
//! **Why pages matter.** With 4 KiB pages a random walk over more than the second-level TLB's
//! reach (a few MiB) pays a page walk on most loads, so a DRAM point measures DRAM plus
//! translation. Transparent huge pages (2 MiB) take most of that away. Both are measured, and a
//! huge-page request is checked against `/proc/self/smaps`: the record says what the kernel
//! granted and never claims huge pages it did not get.
//!
//! **Why several chains.** k independent chains interleaved in one loop put k misses in flight.
//! Little's law ties the three numbers together: loads per second ≈ misses in flight / latency,
//! so the loads/s reached with k chains shows how many misses a core overlaps, and that
//! concurrency × 64 B / latency is what bounds one core's bandwidth.
//!
//! **Why the result can be trusted.** The order of the cycle is kept, so after any number of
//! loads the position every chain must have reached is known; a sample whose final pointers
//! differ (corrupt link, a loop the compiler shortened) fails with a validation error. Samples
//! continue where the previous one stopped, so a large set is walked lap by lap rather than the
//! same prefix over and over (which a big L3 would keep hot), and links are written in cycle
//! order, so the lines still cached after building are the ones the chase reaches last, the
//! state a lap leaves behind, not a random cache-sized subset that would flatter the first lap.
//!
//! **The 1-byte patterns** reproduce the classic assignment's access latency the tinymembench
//! way: the buffer is all zeros and every address is `next offset + previous loaded byte`, a
//! true data dependency that costs one add. `seq` walks consecutive bytes (64 per line, so it is
//! mostly the L1 load-to-use time behind the prefetcher); `random` takes offsets from the
//! counter-based [`Permutation`], whose arithmetic may sit on the dependent path on a narrow
//! core, so it is an upper bound; `l1_loop_s` reports the same loop over a 4 KiB L1-resident
//! set for comparison. A sample is checked by requiring that every loaded byte was zero.
//!
//! With several threads each thread builds, first-touches and chases its own private region on
//! its pinned CPU; a sample's value is the mean of the threads' own seconds per load.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hostbench_core::host::available_memory_bytes;
use hostbench_core::model::{Host, Metric, Record};
use hostbench_core::rng::{derive as mix, SplitMix64};
use hostbench_core::units::format_bytes_iec;
use hostbench_core::{affinity, parallel, BenchError, Case, Runner, Sample};
use serde_json::json;

use crate::buffer::{Pages, Region, ALIGN};
use crate::order::Permutation;
use crate::sizing;

/// Benchmark id of every record this module produces.
pub const BENCHMARK: &str = "mem.latency";

/// Bytes per cache line: one link per line.
pub const LINE: u64 = 64;

/// Most chains one thread may interleave (Chips and Cheese's MLP test goes to 32 as well; each
/// count is a separately compiled loop).
pub const MAX_CHAINS: usize = 32;

pub use hostbench_core::parallel::MAX_THREADS;

/// Dependent loads per chain in one unrolled block.
const UNROLL: u64 = 16;

/// Bytes past the working set that the 1-byte walks may reach (offset + a loaded byte ≤ 255).
const PAD: usize = 256;

/// Cycle positions are stored as `u32`, which bounds one thread's chain at 2^32 lines (256 GiB).
const MAX_LINES: u64 = u32::MAX as u64;

/// Size of the L1-resident set the 1-byte loops are also timed on.
const L1_PROBE_BYTES: u64 = 4096;

/// Upper bound on blocks per sample, far beyond any sensible duration.
const MAX_BLOCKS: u64 = 1 << 36;

/// Below this share of the region backed by huge pages, a huge-page record gets a warning.
const HUGE_ENOUGH: f64 = 0.9;

/// Repeat a block 16 times (the unroll factor of the chase loop).
macro_rules! x16 {
    ($b:block) => {
        $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b
    };
}

/// Turn a run-time chain count into the const generic `$K` for `$body`: each count gets its own
/// loop, with the chains in registers as far as the ISA has them (about 13 on x86-64; beyond
/// that some live on the stack, adding a store-forwarding delay that is small next to a miss).
macro_rules! with_chains {
    (@arms $k:expr, $K:ident, $body:expr, $($n:literal)*) => {
        match $k {
            $($n => {
                const $K: usize = $n;
                $body
            })*
            other => Err(BenchError::invalid(format!(
                "chains must be between 1 and {MAX_CHAINS}, got {other}"
            ))),
        }
    };
    ($k:expr, $K:ident => $body:expr) => {
        with_chains!(@arms $k, $K, $body,
            1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32)
    };
}

hostbench_core::named_enum! {
    /// Access pattern of a latency case.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum LatPattern("latency pattern") {
        /// Pointer chase over one random cycle of cache lines.
        Chase = "chase" | "pointer-chase",
        /// 1-byte dependent loads over consecutive bytes.
        Seq = "seq" | "sequential",
        /// 1-byte dependent loads at permuted offsets.
        Random = "random" | "rand",
    }
}

/// Plain configuration for the latency benchmark, resolved from the CLI once.
#[derive(Debug, Clone)]
pub struct LatencyConfig {
    pub patterns: Vec<LatPattern>,
    /// Working set of each thread, in bytes.
    pub working_sets: Vec<u64>,
    pub pages: Vec<Pages>,
    /// Independent chains per thread (memory-level parallelism).
    pub chains: Vec<usize>,
    pub threads: Vec<usize>,
    /// Target length of one sample.
    pub duration: Duration,
    pub seed: u64,
}

impl LatencyConfig {
    /// Cases `run_latency` plans: every pattern, page size, thread count, size and chain count.
    pub fn case_count(&self) -> usize {
        self.patterns.len()
            * self.pages.len()
            * self.threads.len()
            * self.working_sets.len()
            * self.chains.len()
    }

    /// Seed of the default configuration (any fixed value: runs are reproducible).
    pub const DEFAULT_SEED: u64 = 0x6C61_7465_6E63_7921;

    /// The default sweep: a pointer chase from 4 KiB to beyond 8 × the LLC (at least 1 GiB),
    /// two points per octave, with 4 KiB and huge pages, one chain, one thread.
    pub fn for_host(host: &Host) -> Self {
        Self {
            patterns: vec![LatPattern::Chase],
            working_sets: sizing::sweep_sizes(&host.cpu.caches, sizing::GIB),
            pages: vec![Pages::Small, Pages::Huge],
            chains: vec![1],
            threads: vec![1],
            duration: Duration::from_millis(50),
            seed: Self::DEFAULT_SEED,
        }
    }

    pub fn validate(&self) -> Result<(), BenchError> {
        let lists = [
            ("pattern", self.patterns.is_empty()),
            ("working set", self.working_sets.is_empty()),
            ("page size", self.pages.is_empty()),
            ("chains", self.chains.is_empty()),
            ("thread", self.threads.is_empty()),
        ];
        if let Some((what, _)) = lists.iter().find(|(_, empty)| *empty) {
            return Err(BenchError::invalid(format!(
                "empty {what} list for {BENCHMARK}"
            )));
        }
        if self.duration.is_zero() {
            return Err(BenchError::invalid(
                "latency sample duration must be positive, got 0 s",
            ));
        }
        for &ws in &self.working_sets {
            if ws < 2 * LINE {
                return Err(BenchError::invalid(format!(
                    "working set {ws} B is smaller than two cache lines ({} B)",
                    2 * LINE
                )));
            }
            if ws / LINE > MAX_LINES {
                return Err(BenchError::invalid(format!(
                    "working set {} ({ws} B) is larger than one thread's chain can be ({})",
                    format_bytes_iec(ws),
                    format_bytes_iec(MAX_LINES * LINE)
                )));
            }
        }
        if let Some(&k) = self.chains.iter().find(|&&k| k == 0 || k > MAX_CHAINS) {
            return Err(BenchError::invalid(format!(
                "chains must be between 1 and {MAX_CHAINS}, got {k}"
            )));
        }
        hostbench_core::parallel::check_threads(
            self.threads.iter().copied(),
            MAX_THREADS,
            "threads",
        )?;
        let min_ws = self.working_sets.iter().copied().min().unwrap_or(0);
        let max_chains = self.chains.iter().copied().max().unwrap_or(1) as u64;
        if 2 * max_chains > min_ws / LINE {
            return Err(BenchError::invalid(format!(
                "{max_chains} chains need at least {} cache lines per thread, but working set \
                 {min_ws} B has {}",
                2 * max_chains,
                min_ws / LINE
            )));
        }
        let max_ws = self.working_sets.iter().copied().max().unwrap_or(0);
        let max_threads = self.threads.iter().copied().max().unwrap_or(1) as u64;
        let need = per_thread_bytes(max_ws).saturating_mul(max_threads);
        let available = available_memory_bytes();
        // 0 means /proc/meminfo was unreadable: nothing to check against.
        if available > 0 {
            let headroom = (available / 8).max(256 * sizing::MIB);
            if need > available.saturating_sub(headroom) {
                return Err(BenchError::invalid(format!(
                    "working set {} ({max_ws} B) × {max_threads} threads needs about {} of \
                     memory, but only {} is available (keeping {} free)",
                    format_bytes_iec(max_ws),
                    format_bytes_iec(need),
                    format_bytes_iec(available),
                    format_bytes_iec(headroom)
                )));
            }
        }
        Ok(())
    }
}

/// Memory one thread needs for a working set: the region (rounded up to a huge page) plus the
/// two 4-byte-per-line index arrays alive while a chain is built.
fn per_thread_bytes(ws: u64) -> u64 {
    ws.saturating_add(ws / LINE * 8)
        .saturating_add(ALIGN as u64)
        .saturating_add(PAD as u64)
}

/// Run the latency sweep through `runner`: pattern × threads × working set × pages × chains.
///
/// Each (pattern, threads, working set, pages) is built once, on the pinned threads that will
/// use it, and reused for every chain count; a chase's cycle is drawn once per (threads, working
/// set) and shared by both page sizes, which also makes the 4 KiB and huge-page figures compare
/// the very same access sequence.
pub fn run_latency(
    runner: &mut Runner,
    cfg: &LatencyConfig,
    host: &Host,
) -> Result<(), BenchError> {
    cfg.validate()?;
    let order = affinity::placement_order();
    runner.plan(cfg.case_count());
    let mut floors: HashMap<(LatPattern, usize), Option<f64>> = HashMap::new();
    for &pattern in &cfg.patterns {
        for &threads in &cfg.threads {
            for &ws in &cfg.working_sets {
                // Each thread's cycle, drawn when the first page size needs it.
                let mut cycles: Option<Vec<Arc<Vec<u32>>>> = None;
                for &pages in &cfg.pages {
                    let point = Point {
                        pattern,
                        pages,
                        threads,
                        ws,
                    };
                    run_point(runner, cfg, host, &order, point, &mut cycles, &mut floors)?;
                }
            }
        }
    }
    Ok(())
}

/// One built working set: everything but the chain count.
#[derive(Debug, Clone, Copy)]
struct Point {
    pattern: LatPattern,
    pages: Pages,
    threads: usize,
    ws: u64,
}

fn run_point(
    runner: &mut Runner,
    cfg: &LatencyConfig,
    host: &Host,
    order: &[usize],
    p: Point,
    cycles: &mut Option<Vec<Arc<Vec<u32>>>>,
    floors: &mut HashMap<(LatPattern, usize), Option<f64>>,
) -> Result<(), BenchError> {
    let level = sizing::level_for(host, p.ws.saturating_mul(p.threads as u64), p.threads);
    let cases: Vec<(usize, Case)> = cfg
        .chains
        .iter()
        .map(|&chains| {
            let case = Case::new(BENCHMARK, Metric::Latency, "s")
                .param("pattern", p.pattern.name())
                .param("working_set_bytes", p.ws)
                .param("threads", p.threads)
                .param("pages", p.pages.name())
                .param("chains", chains)
                .param("level", level.as_str());
            (chains, case)
        })
        .collect();
    if runner.over_budget() {
        // The runner records each case as skipped for the budget without sampling; building a
        // gigabyte chain first would only waste the time that is already gone.
        for (_, case) in &cases {
            runner.run_case(case, || Err(BenchError::Failed("not run".into())), |_| {})?;
        }
        return Ok(());
    }
    let built = build_point(cfg, order, p, cycles);
    let walkers: Vec<Mutex<Walker>> = match built {
        Ok(w) => w.into_iter().map(Mutex::new).collect(),
        Err(e @ BenchError::InvalidInput(_)) => return Err(e),
        Err(e) => {
            for (_, case) in &cases {
                runner.skip(case, &e)?;
            }
            return Ok(());
        }
    };
    let notes = Notes {
        pattern: p.pattern,
        pages: p.pages,
        granted: huge_fraction(&walkers),
        units: lock(&walkers[0])?.units(),
        floor: None,
    };
    for &(chains, ref case) in &cases {
        let floor = match p.pattern {
            LatPattern::Chase => None,
            pattern => *floors
                .entry((pattern, chains))
                .or_insert_with(|| l1_floor(pattern, chains, cfg.duration, order)),
        };
        let notes = Notes { floor, ..notes };
        measure(runner, case, &walkers, order, chains, cfg.duration, notes)?;
    }
    Ok(())
}

/// Build every thread's working set on its pinned thread (first touch there), drawing the
/// threads' cycles first if this is the first page size of a chase point.
fn build_point(
    cfg: &LatencyConfig,
    order: &[usize],
    p: Point,
    cycles: &mut Option<Vec<Arc<Vec<u32>>>>,
) -> Result<Vec<Walker>, BenchError> {
    let built = match p.pattern {
        LatPattern::Chase => {
            let shapes = match cycles.take() {
                Some(c) => c,
                None => {
                    parallel::run_pinned(
                        p.threads,
                        order,
                        |i| random_cycle(p.ws, thread_seed(cfg.seed, i)),
                        |_| (),
                    )?
                    .results
                }
            };
            let built = parallel::run_pinned(
                p.threads,
                order,
                |i| ChainSet::build(p.ws, p.pages, Arc::clone(&shapes[i])).map(Walker::Chase),
                |_| (),
            );
            *cycles = Some(shapes);
            built
        }
        pattern => parallel::run_pinned(
            p.threads,
            order,
            |i| {
                let random = pattern == LatPattern::Random;
                ByteSet::build(p.ws, p.pages, random, thread_seed(cfg.seed, i)).map(Walker::Bytes)
            },
            |_| (),
        ),
    };
    Ok(built?.results)
}

/// Facts about a case that its record carries.
#[derive(Debug, Clone, Copy)]
struct Notes {
    pattern: LatPattern,
    pages: Pages,
    /// Share of the regions backed by huge pages; `None` when smaps could not be read.
    granted: Option<f64>,
    /// Lines in the cycle (chase) or bytes in the working set (1-byte patterns).
    units: u64,
    /// Seconds per load of the same 1-byte loop over an L1-resident set.
    floor: Option<f64>,
}

fn measure(
    runner: &mut Runner,
    case: &Case,
    walkers: &[Mutex<Walker>],
    order: &[usize],
    chains: usize,
    duration: Duration,
    notes: Notes,
) -> Result<(), BenchError> {
    // Calibrated on the first sample (the warm-up when there is one), under the same threads.
    let blocks = Cell::new(0u64);
    runner.run_case(
        case,
        || {
            if blocks.get() == 0 {
                blocks.set(calibrate(walkers, order, chains, duration, notes.units)?);
            }
            take_sample(walkers, order, chains, blocks.get())
        },
        |rec| annotate(rec, &notes, chains, blocks.get()),
    )
}

/// One sample: every thread walks `blocks` blocks of its own chains, timing itself.
fn take_sample(
    walkers: &[Mutex<Walker>],
    order: &[usize],
    chains: usize,
    blocks: u64,
) -> Result<Sample, BenchError> {
    let t = parallel::run_pinned(
        walkers.len(),
        order,
        |i| lock(&walkers[i])?.walk(chains, blocks),
        |_| (),
    )?;
    let loads = (blocks * UNROLL * chains as u64) as f64;
    let threads = t.results.len().max(1) as f64;
    let per_load = t.results.iter().sum::<f64>() / threads / loads;
    let mut s = Sample::new(per_load);
    if t.wall_s > 0.0 {
        s = s.with("loads_per_s", loads * threads / t.wall_s);
    }
    Ok(s)
}

/// Blocks per sample so that one sample lasts about `target`, from a probe on every thread.
fn calibrate(
    walkers: &[Mutex<Walker>],
    order: &[usize],
    chains: usize,
    target: Duration,
    units: u64,
) -> Result<u64, BenchError> {
    let t = parallel::run_pinned(
        walkers.len(),
        order,
        |i| probe(&mut *lock(&walkers[i])?, chains, target),
        |_| (),
    )?;
    let per_block = t.results.iter().sum::<f64>() / t.results.len().max(1) as f64;
    Ok(blocks_for(target, per_block, units, chains))
}

/// Seconds per block, from walks that grow until one lasts an eighth of `target`. The probe
/// walks are validated like any other.
fn probe(w: &mut Walker, chains: usize, target: Duration) -> Result<f64, BenchError> {
    let goal = (target.as_secs_f64() / 8.0).max(100e-6);
    let mut blocks = 1u64;
    loop {
        let t = w.walk(chains, blocks)?;
        if t >= goal || blocks >= MAX_BLOCKS {
            return Ok(t / blocks as f64);
        }
        // Aim a little past the goal, but grow at most 16× per try: the first, cold walk is slow.
        let grow = if t > 0.0 {
            (goal / t * 1.25).clamp(2.0, 16.0)
        } else {
            16.0
        };
        blocks = ((blocks as f64 * grow).ceil() as u64).min(MAX_BLOCKS);
    }
}

/// Blocks for one sample of about `target`. When a whole lap (every line or byte visited once
/// across the chains) costs at most 4 × the target, the sample covers at least one lap, so a
/// cache-sized set is measured over all of it rather than a part.
fn blocks_for(target: Duration, per_block: f64, units: u64, chains: usize) -> u64 {
    let want = target.as_secs_f64() / per_block.max(1e-12);
    let blocks = (want.ceil() as u64).clamp(1, MAX_BLOCKS);
    let lap = units.div_ceil(chains.max(1) as u64).div_ceil(UNROLL);
    if lap as f64 * per_block <= 4.0 * target.as_secs_f64() {
        blocks.max(lap)
    } else {
        blocks
    }
}

/// Seconds per load of a 1-byte loop over a 4 KiB (L1-resident) set: what the loop itself
/// costs when every load hits L1. `None` when it could not be measured.
fn l1_floor(
    pattern: LatPattern,
    chains: usize,
    duration: Duration,
    order: &[usize],
) -> Option<f64> {
    let target = (duration / 4).clamp(Duration::from_micros(500), Duration::from_millis(10));
    let t = parallel::run_pinned(
        1,
        order,
        |_| {
            let mut w = Walker::build(
                pattern,
                L1_PROBE_BYTES,
                Pages::Small,
                LatencyConfig::DEFAULT_SEED,
            )?;
            let per_block = probe(&mut w, chains, target)?;
            let blocks = blocks_for(target, per_block, w.units(), chains);
            let loads = (blocks * UNROLL * chains as u64) as f64;
            let mut best = f64::INFINITY;
            for _ in 0..3 {
                best = best.min(w.walk(chains, blocks)? / loads);
            }
            Ok(best)
        },
        |_| (),
    )
    .ok()?;
    t.results
        .first()
        .copied()
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// Attach what a reader needs to interpret the record: page grant, loop shape, notes.
fn annotate(rec: &mut Record, notes: &Notes, chains: usize, blocks: u64) {
    rec.extra.insert(
        "loads_per_sample".into(),
        json!(blocks * UNROLL * chains as u64),
    );
    match notes.pattern {
        LatPattern::Chase => {
            rec.extra.insert("cycle_lines".into(), json!(notes.units));
            rec.extra.insert("line_bytes".into(), json!(LINE));
            // Every load brings in one whole line: with several chains this is the
            // concurrency-limited bandwidth of Little's law.
            if let Some(lps) = rec.extra.get("loads_per_s").and_then(|v| v.as_f64()) {
                rec.extra
                    .insert("line_bytes_per_s".into(), json!(lps * LINE as f64));
            }
        }
        LatPattern::Seq => {
            rec.extra.insert(
                "note".into(),
                json!(
                    "1-byte loads over consecutive bytes, each address = offset + previous \
                     loaded (zero) byte; 64 loads per line behind the prefetcher, so this is \
                     mostly the L1 load-to-use time plus one add, not the memory's latency"
                ),
            );
        }
        LatPattern::Random => {
            rec.extra.insert(
                "note".into(),
                json!(
                    "1-byte loads at permuted offsets, each address = offset + previous loaded \
                     (zero) byte; the add and, where the core cannot run it ahead, the \
                     permutation arithmetic are on the dependent path, so this is an upper \
                     bound on load latency (l1_loop_s: the same loop over a 4 KiB L1 set)"
                ),
            );
        }
    }
    if let Some(f) = notes.floor {
        rec.extra.insert("l1_loop_s".into(), json!(f));
    }
    if let Some(g) = notes.granted {
        rec.extra.insert("huge_fraction".into(), json!(g));
    }
    match (notes.pages, notes.granted) {
        (Pages::Huge, Some(g)) if g < HUGE_ENOUGH => rec.warnings.push(format!(
            "huge pages requested but only {:.0} % of the memory was backed by them \
             (transparent_hugepage/enabled: {}); the rest ran on base pages",
            g * 100.0,
            thp_setting()
        )),
        (Pages::Huge, None) => rec.warnings.push(
            "huge pages requested but /proc/self/smaps is unreadable: whether they were \
             granted is unknown"
                .into(),
        ),
        (Pages::Small, Some(g)) if g > 1.0 - HUGE_ENOUGH => rec.warnings.push(format!(
            "4 KiB pages requested but {:.0} % of the memory was backed by huge pages",
            g * 100.0
        )),
        _ => {}
    }
}

/// Share of all threads' regions backed by transparent huge pages; `None` when smaps is
/// unreadable.
fn huge_fraction(walkers: &[Mutex<Walker>]) -> Option<f64> {
    let mut huge = 0u64;
    let mut total = 0u64;
    for w in walkers {
        let w = lock(w).ok()?;
        huge += w.region().huge_bytes()?;
        total += w.region().len() as u64;
    }
    (total > 0).then(|| huge as f64 / total as f64)
}

/// The THP policy line (`always [madvise] never`), to explain a refused huge-page request.
fn thp_setting() -> String {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unreadable".into())
}

fn lock(w: &Mutex<Walker>) -> Result<MutexGuard<'_, Walker>, BenchError> {
    w.lock()
        .map_err(|_| BenchError::Failed("latency worker state poisoned by an earlier panic".into()))
}

/// A per-thread seed, so threads never share a cycle shape.
fn thread_seed(seed: u64, thread: usize) -> u64 {
    mix(seed, thread as u64)
}

/// One thread's built working set.
enum Walker {
    Chase(ChainSet),
    Bytes(ByteSet),
}

impl Walker {
    /// One working set from scratch (the sweep shares chase cycles across page sizes instead).
    fn build(pattern: LatPattern, ws: u64, pages: Pages, seed: u64) -> Result<Self, BenchError> {
        match pattern {
            LatPattern::Chase => {
                ChainSet::build(ws, pages, random_cycle(ws, seed)?).map(Self::Chase)
            }
            LatPattern::Seq => ByteSet::build(ws, pages, false, seed).map(Self::Bytes),
            LatPattern::Random => ByteSet::build(ws, pages, true, seed).map(Self::Bytes),
        }
    }

    fn region(&self) -> &Region {
        match self {
            Self::Chase(c) => &c.region,
            Self::Bytes(b) => &b.region,
        }
    }

    /// Lines (chase) or bytes (1-byte patterns) one lap visits.
    fn units(&self) -> u64 {
        match self {
            Self::Chase(c) => c.order.len() as u64,
            Self::Bytes(b) => b.ws as u64,
        }
    }

    /// Walk `blocks` × 16 dependent loads on each of `chains` chains, validated; the seconds the
    /// loop took.
    fn walk(&mut self, chains: usize, blocks: u64) -> Result<f64, BenchError> {
        with_chains!(chains, K => match self {
            Self::Chase(c) => c.walk::<K>(blocks),
            Self::Bytes(b) => b.walk::<K>(blocks),
        })
    }
}

/// Map a region length for `pages`: huge-page regions are rounded up to whole 2 MiB pages, so a
/// small working set can still sit in one huge page instead of being refused one.
fn region_len(ws: u64, pages: Pages, pad: usize) -> Result<usize, BenchError> {
    let len = usize::try_from(ws)
        .ok()
        .and_then(|l| l.checked_add(pad))
        .ok_or_else(|| BenchError::invalid(format!("working set {ws} B does not fit in memory")))?;
    Ok(match pages {
        Pages::Small => len,
        Pages::Huge => len.div_ceil(ALIGN) * ALIGN,
    })
}

/// The pointer-chase working set: a region whose lines form one Sattolo cycle.
struct ChainSet {
    region: Region,
    /// Exposed address of line 0; links hold `base + line × 64`.
    base: usize,
    /// `order[k]`: the line at position k of the cycle (position 0 is line 0).
    order: Arc<Vec<u32>>,
    /// Cycle position where chain 0 starts the next walk; chain c starts `c × n / k` further.
    cursor: u64,
}

/// A Sattolo cycle over the lines of a `ws`-byte working set, in walk order (see `cycle_order`).
fn random_cycle(ws: u64, seed: u64) -> Result<Arc<Vec<u32>>, BenchError> {
    let n = u32::try_from(ws / LINE)
        .ok()
        .filter(|&n| n >= 2)
        .ok_or_else(|| {
            BenchError::invalid(format!(
                "working set {ws} B must hold between 2 and {MAX_LINES} cache lines"
            ))
        })?;
    cycle_order(&sattolo(n, seed)).map(Arc::new)
}

impl ChainSet {
    /// Map and first-touch a region for `ws` bytes and link its lines along `order`.
    fn build(ws: u64, pages: Pages, order: Arc<Vec<u32>>) -> Result<Self, BenchError> {
        if order.len() as u64 != ws / LINE {
            return Err(BenchError::Failed(format!(
                "cycle of {} lines does not fit a working set of {ws} B",
                order.len()
            )));
        }
        let mut region = Region::new(region_len(ws, pages, 0)?, pages)?;
        // First touch from this (pinned) thread places every page on its NUMA node.
        region.touch();
        let base = link(&mut region, &order);
        Ok(Self {
            region,
            base,
            order,
            cursor: 0,
        })
    }

    fn addr_at(&self, pos: u64) -> usize {
        let n = self.order.len() as u64;
        self.base + self.order[(pos % n) as usize] as usize * LINE as usize
    }

    fn walk<const K: usize>(&mut self, blocks: u64) -> Result<f64, BenchError> {
        let n = self.order.len() as u64;
        let spacing = n / K as u64;
        if spacing < 2 {
            return Err(BenchError::invalid(format!(
                "{K} chains need at least {} cache lines, the cycle has {n}",
                2 * K
            )));
        }
        let steps = blocks * UNROLL;
        let starts: [usize; K] =
            std::array::from_fn(|c| self.addr_at(self.cursor + c as u64 * spacing));
        let t0 = Instant::now();
        // SAFETY: every start is the address of a line of `self.region`; `link` made every
        // line's first word the address of another line of the same region, later changes only
        // ever store such addresses, and the region lives (borrowed by `self`) for the call.
        let ends = unsafe { chase::<K>(starts, blocks) };
        let secs = t0.elapsed().as_secs_f64();
        for (c, &end) in ends.iter().enumerate() {
            let want = self.addr_at(self.cursor + c as u64 * spacing + steps);
            if end != want {
                return Err(BenchError::Validation(format!(
                    "pointer chase chain {c} ended at byte offset {} instead of {} after {steps} \
                     loads: the chain is corrupt or the loop did not run as written",
                    end.wrapping_sub(self.base),
                    want.wrapping_sub(self.base)
                )));
            }
        }
        self.cursor = (self.cursor + steps) % n;
        Ok(secs)
    }
}

/// Sattolo's algorithm: a uniformly random cyclic permutation of `0..n` as `next[line]`. With
/// `j` drawn from `[0, i)` (never `i` itself, which is what separates it from Fisher–Yates) the
/// result is always a single cycle through every line.
fn sattolo(n: u32, seed: u64) -> Vec<u32> {
    let mut next: Vec<u32> = (0..n).collect();
    let mut rng = SplitMix64::new(seed);
    for i in (1..n as usize).rev() {
        let j = rng.below(i as u64) as usize;
        next.swap(i, j);
    }
    next
}

/// The lines of `next`'s cycle through line 0, in walk order. Fails unless it is one cycle
/// through every line: this is the build-time check of the chain's shape.
fn cycle_order(next: &[u32]) -> Result<Vec<u32>, BenchError> {
    let n = next.len();
    let mut order = Vec::with_capacity(n);
    let mut x = 0u32;
    for _ in 0..n {
        order.push(x);
        x = *next.get(x as usize).ok_or_else(|| {
            BenchError::Validation(format!("chain links to line {x}, beyond its {n} lines"))
        })?;
        if x == 0 {
            break;
        }
    }
    if x != 0 || order.len() != n {
        return Err(BenchError::Validation(format!(
            "chain is not one cycle through all {n} lines (the cycle through line 0 has {})",
            order.len()
        )));
    }
    Ok(order)
}

/// Write the links: each line's first word gets the address of the next line in `order`. They
/// are written in cycle order so that what stays cached afterwards is the end of the lap.
/// Returns the (exposed) address of line 0.
fn link(region: &mut Region, order: &[u32]) -> usize {
    let base = region.as_mut_ptr().expose_provenance();
    let words = words_mut(region);
    let per_line = LINE as usize / std::mem::size_of::<usize>();
    let successors = order.iter().skip(1).chain(order.first());
    for (&line, &to) in order.iter().zip(successors) {
        words[line as usize * per_line] = base + to as usize * LINE as usize;
    }
    base
}

/// The region as machine words.
fn words_mut(region: &mut Region) -> &mut [usize] {
    let len = region.len() / std::mem::size_of::<usize>();
    // SAFETY: a Region starts on an ALIGN (2 MiB) boundary, so it is aligned for usize; `len`
    // whole words lie inside it; every bit pattern is a valid usize; and the `&mut` borrow of the
    // region makes this the only access for the slice's lifetime.
    unsafe { std::slice::from_raw_parts_mut(region.as_mut_ptr().cast::<usize>(), len) }
}

/// Follow `K` chains for `blocks` × 16 dependent loads each, interleaved so their misses overlap;
/// returns where each chain ended.
///
/// # Safety
/// Every `p[c]` must be the address of a readable, aligned `usize` that holds the address
/// of another such word, and so on for every word reached: a closed chain in live memory.
#[inline(never)]
unsafe fn chase<const K: usize>(mut p: [usize; K], blocks: u64) -> [usize; K] {
    for _ in 0..blocks {
        x16!({
            for q in p.iter_mut() {
                // SAFETY: by this function's contract `*q` is a link word of a closed chain, so
                // it is readable and the address it holds is one too.
                *q = unsafe { load_link(*q) };
            }
        });
    }
    p
}

/// One dependent load with simple addressing: `p = *p`.
///
/// # Safety
/// `p` must be the address of a readable, aligned `usize`.
#[inline(always)]
unsafe fn load_link(p: usize) -> usize {
    let mut p = p;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller guarantees `p` addresses a readable word; the instruction reads exactly
    // that word and writes only the register.
    unsafe {
        core::arch::asm!(
            "mov {p}, qword ptr [{p}]",
            p = inout(reg) p,
            options(nostack, readonly, preserves_flags)
        );
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above; `ldr x, [x]` reads the 8-byte word at `p` into the same register.
    unsafe {
        core::arch::asm!(
            "ldr {p}, [{p}]",
            p = inout(reg) p,
            options(nostack, readonly, preserves_flags)
        );
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // SAFETY: the caller guarantees `p` addresses a readable, aligned word, derived from a
        // region whose provenance `link` exposed.
        p = unsafe { std::ptr::read_volatile(std::ptr::with_exposed_provenance::<usize>(p)) };
    }
    p
}

/// The 1-byte working set: all zeros, so a loaded byte adds nothing to the next address but the
/// dependency.
struct ByteSet {
    /// Invariant: at least `ws + PAD` bytes, all zero.
    region: Region,
    ws: usize,
    random: bool,
    seed: u64,
    /// Sequential position of chain 0 for the next walk.
    cursor: usize,
    /// Permutations used so far: every round of random offsets draws a fresh one.
    epoch: u64,
}

impl ByteSet {
    fn build(ws: u64, pages: Pages, random: bool, seed: u64) -> Result<Self, BenchError> {
        let mut region = Region::new(region_len(ws, pages, PAD)?, pages)?;
        region.touch();
        // `touch` leaves a 1 on every page; the dependency trick needs zeros everywhere.
        region.as_mut_slice().fill(0);
        Ok(Self {
            region,
            ws: ws as usize,
            random,
            seed,
            cursor: 0,
            epoch: 0,
        })
    }

    fn walk<const K: usize>(&mut self, blocks: u64) -> Result<f64, BenchError> {
        let steps = blocks * UNROLL;
        let ws = self.ws;
        let t0 = Instant::now();
        let acc = if self.random {
            let mut dep = [0usize; K];
            let mut left = steps;
            let mut any = 0u8;
            while left > 0 {
                // A permutation yields each offset once; a longer walk takes fresh ones, and
                // every sample gets new ones, so no sample revisits the previous one's bytes.
                let take = left.min(ws as u64);
                let (seed, epoch) = (self.seed, self.epoch);
                let perms: [Permutation; K] = std::array::from_fn(|c| {
                    Permutation::new(ws as u64, mix(seed, epoch * K as u64 + c as u64))
                });
                self.epoch += 1;
                let mut its = perms.each_ref().map(|p| p.iter());
                any |= self.random_kernel(&mut its, &mut dep, take);
                left -= take;
            }
            any
        } else {
            let start: [usize; K] = std::array::from_fn(|c| (self.cursor + c * (ws / K)) % ws);
            self.seq_kernel(start, steps)
        };
        let secs = t0.elapsed().as_secs_f64();
        if acc != 0 {
            return Err(BenchError::Validation(format!(
                "1-byte walk loaded non-zero bits {acc:#04x} from a buffer that must be all \
                 zeros: the memory was corrupted"
            )));
        }
        if !self.random {
            self.cursor = ((self.cursor as u64 + steps) % ws as u64) as usize;
        }
        Ok(secs)
    }

    /// Consecutive bytes from `off[c]` (wrapping at the working set); returns the OR of every
    /// byte loaded.
    #[inline(never)]
    fn seq_kernel<const K: usize>(&self, mut off: [usize; K], steps: u64) -> u8 {
        let base = self.region.as_ptr();
        let ws = self.ws;
        let mut dep = [0usize; K];
        let mut acc = 0u8;
        for _ in 0..steps {
            for (o, d) in off.iter_mut().zip(dep.iter_mut()) {
                // SAFETY: `*o < ws` and `*d` is a byte (< PAD), and the region holds at least
                // `ws + PAD` bytes (struct invariant), so the read stays inside it.
                let v = unsafe { base.add(*o + *d).read_volatile() };
                acc |= v;
                *d = usize::from(v);
                *o += 1;
                if *o == ws {
                    *o = 0;
                }
            }
        }
        acc
    }

    /// `steps` bytes per chain at the offsets the iterators yield; returns the OR of every byte
    /// loaded.
    #[inline(never)]
    fn random_kernel<const K: usize, I: Iterator<Item = u64>>(
        &self,
        its: &mut [I; K],
        dep: &mut [usize; K],
        steps: u64,
    ) -> u8 {
        let base = self.region.as_ptr();
        let last = self.ws - 1;
        let mut acc = 0u8;
        for _ in 0..steps {
            for (it, d) in its.iter_mut().zip(dep.iter_mut()) {
                // The caller takes at most one permutation's worth, so `next` always yields; the
                // clamp keeps the read in bounds whatever the iterator does, off the dependent
                // path (it does not involve the loaded byte).
                let o = (it.next().unwrap_or(0) as usize).min(last);
                // SAFETY: `o < ws` and `*d` is a byte (< PAD), and the region holds at least
                // `ws + PAD` bytes (struct invariant), so the read stays inside it.
                let v = unsafe { base.add(o + *d).read_volatile() };
                acc |= v;
                *d = usize::from(v);
            }
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hostbench_core::model::Cache;
    use hostbench_core::RunnerConfig;

    use crate::sizing::KIB;

    fn quiet() -> RunnerConfig {
        RunnerConfig::quiet(2)
    }

    fn host() -> Host {
        let mut h = Host::default();
        h.cpu.cores = 2;
        h.cpu.caches = vec![
            Cache {
                level: 1,
                kind: "data".into(),
                size_bytes: 32 * KIB,
                instances: 2,
            },
            Cache {
                level: 2,
                kind: "unified".into(),
                size_bytes: 1024 * KIB,
                instances: 2,
            },
        ];
        h
    }

    fn small(patterns: Vec<LatPattern>) -> LatencyConfig {
        LatencyConfig {
            patterns,
            working_sets: vec![16 * KIB, 256 * KIB],
            pages: vec![Pages::Small],
            chains: vec![1],
            threads: vec![1],
            duration: Duration::from_millis(5),
            seed: 7,
        }
    }

    #[test]
    fn sattolo_is_one_cycle_through_every_line() {
        for n in [2u32, 3, 4, 5, 16, 17, 255, 1000, 4096, 65_537] {
            for seed in 0..3 {
                let next = sattolo(n, seed);
                assert!(next.iter().enumerate().all(|(i, &j)| i as u32 != j));
                let order = cycle_order(&next).unwrap();
                assert_eq!(order.len(), n as usize);
                let mut seen = vec![false; n as usize];
                for &line in &order {
                    assert!(!seen[line as usize], "n={n}: line {line} twice");
                    seen[line as usize] = true;
                }
            }
        }
    }

    #[test]
    fn sattolo_draws_every_cycle_equally_often() {
        // n = 4 has (4 - 1)! = 6 cycles; 6000 draws give each about 1000 (σ ≈ 29).
        let mut counts: HashMap<Vec<u32>, usize> = HashMap::new();
        for seed in 0..6000 {
            *counts.entry(sattolo(4, mix(99, seed))).or_default() += 1;
        }
        assert_eq!(counts.len(), 6);
        assert!(
            counts.values().all(|&c| (850..1150).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn several_cycles_are_rejected() {
        assert!(matches!(
            cycle_order(&[1, 0, 3, 2]),
            Err(BenchError::Validation(_))
        ));
        assert!(matches!(
            cycle_order(&[0, 1]),
            Err(BenchError::Validation(_))
        ));
        assert!(cycle_order(&[1, 2, 0]).is_ok());
    }

    #[test]
    fn chase_is_positive_and_lands_where_the_cycle_says() {
        let mut c =
            ChainSet::build(64 * KIB, Pages::Small, random_cycle(64 * KIB, 3).unwrap()).unwrap();
        let n = c.order.len() as u64;
        // Links follow the order, in memory.
        for k in 0..n {
            let word = c.addr_at(k) as *const usize;
            // SAFETY: addr_at is the address of a line of c.region, which is alive.
            assert_eq!(unsafe { word.read() }, c.addr_at(k + 1));
        }
        // A partial lap, a whole lap and more, with one chain and with several.
        for blocks in [1, n / UNROLL, 3 * n / UNROLL + 1] {
            let t = c.walk::<1>(blocks).unwrap();
            assert!(t.is_finite() && t > 0.0);
        }
        let t = c.walk::<4>(5).unwrap();
        assert!(t.is_finite() && t > 0.0);
        let t = c.walk::<MAX_CHAINS>(2).unwrap();
        assert!(t.is_finite() && t > 0.0);
    }

    #[test]
    fn a_broken_link_fails_validation() {
        let mut c =
            ChainSet::build(16 * KIB, Pages::Small, random_cycle(16 * KIB, 5).unwrap()).unwrap();
        c.walk::<1>(3).unwrap();
        // Make the line after chain 0's start point at itself: the chase gets stuck there.
        let stuck = c.order[((c.cursor + 1) % c.order.len() as u64) as usize] as usize;
        let base = c.base;
        words_mut(&mut c.region)[stuck * (LINE as usize / std::mem::size_of::<usize>())] =
            base + stuck * LINE as usize;
        let err = c.walk::<1>(c.order.len() as u64 / UNROLL).unwrap_err();
        assert!(matches!(err, BenchError::Validation(_)), "{err}");
        assert!(err.to_string().contains("chain 0"), "{err}");
        // Walker::walk dispatches too, and rejects chain counts without a loop.
        let mut w = Walker::Chase(c);
        assert!(matches!(w.walk(2, 1), Err(BenchError::Validation(_))));
        assert!(matches!(w.walk(0, 1), Err(BenchError::InvalidInput(_))));
        assert!(matches!(
            w.walk(MAX_CHAINS + 1, 1),
            Err(BenchError::InvalidInput(_))
        ));
    }

    #[test]
    fn byte_walks_run_and_a_non_zero_byte_fails() {
        for random in [false, true] {
            let mut b = ByteSet::build(8 * KIB, Pages::Small, random, 1).unwrap();
            assert!(b.walk::<1>(4).unwrap() > 0.0);
            // More than one permutation's worth in one walk.
            assert!(b.walk::<3>(8 * KIB / UNROLL + 7).unwrap() > 0.0);
            b.region.as_mut_slice()[100] = 1;
            let err = b.walk::<1>(2 * 8 * KIB / UNROLL).unwrap_err();
            assert!(matches!(err, BenchError::Validation(_)), "{err}");
        }
    }

    #[test]
    fn calibration_covers_a_lap_of_small_sets_only() {
        let d = Duration::from_millis(10);
        // 1 ns per block: 10 M blocks; a 4096-line lap is far shorter.
        assert_eq!(blocks_for(d, 1e-9, 4096, 1), 10_000_000);
        // 1 ms per block: 10 blocks, but a lap of 32 blocks costs 32 ms ≤ 40 ms, so a lap.
        assert_eq!(blocks_for(d, 1e-3, 512, 1), 32);
        // A lap of 4096 blocks at 1 ms would take seconds: stay at the target.
        assert_eq!(blocks_for(d, 1e-3, 65_536, 1), 10);
        assert_eq!(blocks_for(d, 1e-3, 512, 2), 16);
    }

    #[test]
    fn every_pattern_produces_records_through_the_runner() {
        let mut cfg = small(vec![LatPattern::Chase, LatPattern::Seq, LatPattern::Random]);
        cfg.chains = vec![1, 3];
        let mut runner = Runner::new(quiet(), host());
        run_latency(&mut runner, &cfg, &host()).unwrap();
        let result = runner.finish().unwrap();
        assert!(result.skipped.is_empty(), "{:?}", result.skipped);
        assert_eq!(result.records.len(), 3 * 2 * 2);
        for rec in &result.records {
            assert_eq!(rec.benchmark, "mem.latency");
            assert_eq!(rec.unit, "s");
            assert_eq!(rec.metric, Metric::Latency);
            let keys: Vec<&str> = rec.params.keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                [
                    "pattern",
                    "working_set_bytes",
                    "threads",
                    "pages",
                    "chains",
                    "level"
                ]
            );
            assert_eq!(rec.samples.len(), 2);
            assert!(rec.value.is_finite() && rec.value > 0.0, "{}", rec.value);
            assert!(rec.peak.is_none());
            let lps = rec.extra["loads_per_s"].as_f64().unwrap();
            assert!(lps.is_finite() && lps > 0.0);
            if rec.param("pattern").as_deref() == Some("chase") {
                assert!(rec.extra["cycle_lines"].as_u64().unwrap() >= 256);
            } else {
                assert!(rec.extra["note"].is_string());
            }
        }
        let first = &result.records[0];
        assert_eq!(first.param("level").as_deref(), Some("L1"));
        assert_eq!(first.param("pages").as_deref(), Some("4k"));
        assert_eq!(result.records[2].param("level").as_deref(), Some("L2"));
    }

    #[test]
    fn threads_and_huge_pages_report_what_was_granted() {
        let mut cfg = small(vec![LatPattern::Chase]);
        cfg.working_sets = vec![16 * KIB];
        cfg.pages = vec![Pages::Small, Pages::Huge];
        cfg.threads = vec![2];
        cfg.chains = vec![2];
        let mut runner = Runner::new(quiet(), host());
        run_latency(&mut runner, &cfg, &host()).unwrap();
        let result = runner.finish().unwrap();
        assert_eq!(result.records.len(), 2, "{:?}", result.skipped);
        // Both page sizes walk the same cycles (drawn once per working set).
        assert_eq!(result.records[0].extra["cycle_lines"], json!(256));
        assert_eq!(result.records[0].param("pages").as_deref(), Some("4k"));
        let rec = &result.records[1];
        assert_eq!(rec.param("threads").as_deref(), Some("2"));
        assert_eq!(rec.param("pages").as_deref(), Some("huge"));
        assert!(rec.value.is_finite() && rec.value > 0.0);
        let warned = rec
            .warnings
            .iter()
            .any(|w| w.contains("huge pages requested"));
        match rec.extra.get("huge_fraction").and_then(|v| v.as_f64()) {
            Some(g) => {
                assert!((0.0..=1.0).contains(&g));
                assert_eq!(warned, g < HUGE_ENOUGH, "{g} {:?}", rec.warnings);
            }
            None => assert!(warned, "{:?}", rec.warnings),
        }
    }

    #[test]
    fn small_pages_are_reported_as_such() {
        let mut w = Walker::build(LatPattern::Chase, 4 * sizing::MIB, Pages::Small, 1).unwrap();
        w.walk(1, 4).unwrap();
        let walkers = [Mutex::new(w)];
        if let Some(g) = huge_fraction(&walkers) {
            assert_eq!(g, 0.0);
        }
    }

    #[test]
    fn patterns_parse_and_name() {
        for p in [LatPattern::Chase, LatPattern::Seq, LatPattern::Random] {
            assert_eq!(LatPattern::parse(p.name()).unwrap(), p);
        }
        assert_eq!(LatPattern::parse(" Sequential ").unwrap(), LatPattern::Seq);
        let err = LatPattern::parse("stride").unwrap_err();
        assert!(matches!(err, BenchError::InvalidInput(_)));
        assert!(err.to_string().contains("'stride'"), "{err}");
    }

    #[test]
    fn defaults_follow_the_host() {
        let cfg = LatencyConfig::for_host(&host());
        assert_eq!(cfg.patterns, vec![LatPattern::Chase]);
        assert_eq!(cfg.pages, vec![Pages::Small, Pages::Huge]);
        assert_eq!(
            (cfg.chains.clone(), cfg.threads.clone()),
            (vec![1], vec![1])
        );
        assert_eq!(cfg.working_sets.first(), Some(&(4 * KIB)));
        assert_eq!(cfg.working_sets.last(), Some(&sizing::GIB));
        assert_eq!(cfg.duration, Duration::from_millis(50));
    }

    #[test]
    fn bad_configs_are_rejected_with_the_value() {
        let ok = small(vec![LatPattern::Chase]);
        ok.validate().unwrap();
        let check = |f: &dyn Fn(&mut LatencyConfig), needle: &str| {
            let mut cfg = ok.clone();
            f(&mut cfg);
            let err = cfg.validate().unwrap_err();
            assert!(matches!(err, BenchError::InvalidInput(_)), "{err:?}");
            assert!(err.to_string().contains(needle), "{err} lacks {needle}");
            // run_latency refuses before measuring anything.
            let mut runner = Runner::new(quiet(), host());
            assert!(run_latency(&mut runner, &cfg, &host()).is_err());
            assert!(runner.result().records.is_empty());
        };
        check(&|c| c.patterns.clear(), "pattern");
        check(&|c| c.working_sets.clear(), "working set");
        check(&|c| c.pages.clear(), "page");
        check(&|c| c.chains.clear(), "chains");
        check(&|c| c.threads.clear(), "thread");
        check(&|c| c.working_sets.push(100), "100 B");
        check(&|c| c.chains = vec![0], "got 0");
        check(&|c| c.chains = vec![MAX_CHAINS + 1], "got 33");
        check(&|c| c.threads = vec![0], "got 0");
        check(
            &|c| {
                c.working_sets = vec![256];
                c.chains = vec![3];
            },
            "256 B",
        );
        check(&|c| c.duration = Duration::ZERO, "duration");
        if available_memory_bytes() > 0 {
            check(
                &|c| {
                    c.working_sets = vec![sizing::GIB];
                    c.threads = vec![MAX_THREADS];
                },
                "1073741824 B",
            );
        }
        check(&|c| c.working_sets = vec![1 << 40 << 8], "256 TiB");
    }
}
