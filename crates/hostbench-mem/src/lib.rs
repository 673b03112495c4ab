//! hostbench-mem: memory bandwidth and latency.
//!
//! * `bandwidth` — STREAM's copy/scale/add/triad with STREAM's arithmetic, plus read, write and
//!   the classic block-wise read+write (`rw`), in sequential or random block order, any block size,
//!   temporal or non-temporal stores, SIMD chosen at run time; every sample validated.
//! * `latency` — a pointer chase over one random cycle of cache lines, with 4 KiB or
//!   transparent huge pages (verified), optional parallel chains, and the classic 1-byte
//!   sequential/random access latency.
//! * `sizing` — STREAM's ≥ 4 × LLC rule, the 1 GiB classic floor, and L1/L2/L3/DRAM labels.
//! * `peak` — the DRAM limit from DMI or the spec file.
//! * `loaded` — loaded latency (MLC's method): a chase while the other CPUs inject traffic at a
//!   series of delays; latency against delivered bandwidth.
//! * `c2c` — core-to-core latency: a cache line bounced between every pair of CPUs.
//! * `numa` — the NUMA matrix: bandwidth and latency from each node's CPUs to each node's memory.

pub mod bandwidth;
pub mod burn;
pub mod c2c;
pub mod dmi;
pub use hostbench_core::buffer;
pub mod kernels;
pub mod latency;
pub mod loaded;
pub mod numa;
pub mod order;
pub mod peak;
pub mod reference;
pub mod sizing;
pub mod subsystem;

pub use subsystem::Mem;

pub use bandwidth::{Block, Kernel, Store};
pub use buffer::{Pages, Region};
pub use kernels::Isa;
pub use order::{Pattern, Permutation};

use hostbench_core::subsystem::ReferenceScope;
use std::time::Duration;

use hostbench_core::model::Host;
use hostbench_core::spec::Spec;
use hostbench_core::units::format_bytes_iec;
use hostbench_core::{affinity, BenchError, Runner};

use bandwidth::{Point, Timing};

/// The STREAM kernels plus plain read and write: the default bandwidth set.
pub const DEFAULT_KERNELS: [Kernel; 6] = [
    Kernel::Read,
    Kernel::Write,
    Kernel::Copy,
    Kernel::Scale,
    Kernel::Add,
    Kernel::Triad,
];

/// The classic assignment's block sizes: 1 B, 1 KiB, 1 MiB, 10 MiB and 8 B, 8 KiB, 8 MiB, 80 MiB.
pub const CLASSIC_BLOCKS: [u64; 8] = [
    1,
    8,
    sizing::KIB,
    8 * sizing::KIB,
    sizing::MIB,
    8 * sizing::MIB,
    10 * sizing::MIB,
    80 * sizing::MIB,
];

/// Bandwidth cases: every combination of the lists.
#[derive(Debug, Clone)]
pub struct BandwidthConfig {
    pub kernels: Vec<Kernel>,
    pub patterns: Vec<Pattern>,
    pub blocks: Vec<Block>,
    pub threads: Vec<usize>,
    pub stores: Vec<Store>,
    pub isas: Vec<Isa>,
    /// Working set of all arrays of all threads; `None`: the DRAM default from `sizing`.
    pub size: Option<u64>,
}

/// The pmbw-style sweep of working-set size.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    pub kernels: Vec<Kernel>,
    pub threads: Vec<usize>,
    pub sizes: Vec<u64>,
    pub store: Store,
    pub isa: Isa,
    pub duration: Duration,
}

/// Everything `hostbench mem` runs.
#[derive(Debug, Clone)]
pub struct MemConfig {
    pub bandwidth: Option<BandwidthConfig>,
    /// The classic read+write matrix, run after `bandwidth`.
    pub classic: Option<BandwidthConfig>,
    /// The latency curve (and the classic 1-byte access latency), run after bandwidth.
    pub latency: Option<latency::LatencyConfig>,
    /// Loaded latency, core-to-core latency and the NUMA matrix, run last, in that order.
    pub loaded: Option<loaded::LoadedConfig>,
    pub c2c: Option<c2c::C2cConfig>,
    pub numa: Option<numa::NumaConfig>,
    pub sweep: Option<SweepConfig>,
    /// Passes over the working set per bandwidth sample; `None`: sized from `duration`.
    pub passes: Option<f64>,
    /// Target length of one bandwidth sample.
    pub duration: Duration,
    /// Page size of bandwidth arrays.
    pub pages: Pages,
    pub seed: u64,
    /// Which bandwidth cases run likwid-bench beside them (the headline: triad at the most
    /// threads).
    pub reference: ReferenceScope,
}

pub use hostbench_core::parallel::{default_threads, MAX_THREADS};

/// Per-thread working set of the classic 1-byte latency: DRAM-sized (4 × the LLC sum) and at
/// least 256 MiB, so even eight threads stay within a small machine's memory.
pub fn classic_latency_bytes(host: &Host) -> u64 {
    (4 * sizing::llc_total(&host.cpu.caches)).max(256 * sizing::MIB)
}

impl BandwidthConfig {
    pub fn for_host() -> Self {
        Self {
            kernels: DEFAULT_KERNELS.to_vec(),
            patterns: vec![Pattern::Seq],
            blocks: vec![Block::Whole],
            threads: default_threads(),
            stores: vec![Store::Temporal, Store::NonTemporal],
            isas: vec![Isa::best()],
            size: None,
        }
    }

    /// The classic read+write matrix (RWS/RWR): `rw`, seq and random, the classic block sizes.
    pub fn classic(threads: Vec<usize>) -> Self {
        Self {
            kernels: vec![Kernel::Rw],
            patterns: vec![Pattern::Seq, Pattern::Random],
            blocks: CLASSIC_BLOCKS.iter().map(|&b| Block::Bytes(b)).collect(),
            threads,
            stores: vec![Store::Temporal],
            isas: vec![Isa::best()],
            size: None,
        }
    }

    /// Every point, in table order (kernel, pattern, block, threads, store, ISA).
    pub fn points(&self, host: &Host) -> Vec<Point> {
        let mut v = Vec::new();
        for &isa in &self.isas {
            for &kernel in &self.kernels {
                let ws = self.size.unwrap_or_else(|| {
                    sizing::dram_working_set(&host.cpu.caches, kernel.arrays() as u64)
                });
                for &pattern in &self.patterns {
                    for &block in &self.blocks {
                        for &threads in &self.threads {
                            let stores: &[Store] = if kernel.stores() {
                                &self.stores
                            } else {
                                &[Store::Temporal]
                            };
                            for &store in stores {
                                v.push(Point {
                                    kernel,
                                    pattern,
                                    block,
                                    working_set: ws,
                                    threads,
                                    store,
                                    isa,
                                });
                            }
                        }
                    }
                }
            }
        }
        v
    }
}

impl SweepConfig {
    pub fn for_host(host: &Host) -> Self {
        let n = affinity::allowed_cpus().len().max(1);
        let mut threads = vec![1];
        if n > 1 {
            threads.push(n);
        }
        Self {
            kernels: vec![Kernel::Read],
            threads,
            sizes: sizing::sweep_sizes(&host.cpu.caches, 256 * sizing::MIB),
            store: Store::Temporal,
            isa: Isa::best(),
            duration: Duration::from_millis(40),
        }
    }

    pub fn points(&self) -> Vec<Point> {
        let mut v = Vec::new();
        for &kernel in &self.kernels {
            for &threads in &self.threads {
                for &ws in &self.sizes {
                    v.push(Point {
                        kernel,
                        pattern: Pattern::Seq,
                        block: Block::Whole,
                        working_set: ws,
                        threads,
                        store: self.store,
                        isa: self.isa,
                    });
                }
            }
        }
        v
    }
}

impl Default for MemConfig {
    fn default() -> Self {
        Self {
            bandwidth: None,
            classic: None,
            latency: None,
            loaded: None,
            c2c: None,
            numa: None,
            sweep: None,
            passes: None,
            duration: Duration::from_millis(200),
            pages: Pages::Huge,
            seed: 0x5EED,
            reference: ReferenceScope::Off,
        }
    }
}

/// Memory a benchmark may take: nine tenths of what is free, less 256 MiB, leaving the rest for
/// the system; `(limit, free)`, or `None` when /proc/meminfo is unreadable (nothing to check).
pub(crate) fn memory_budget() -> Option<(u64, u64)> {
    let avail = hostbench_core::host::available_memory_bytes();
    (avail > 0).then(|| ((avail / 10 * 9).saturating_sub(256 * sizing::MIB), avail))
}

/// Check every point before anything is measured, so bad input costs no measured results.
pub fn validate(points: &[Point], passes: Option<f64>) -> Result<(), BenchError> {
    let budget = memory_budget();
    for p in points {
        hostbench_core::parallel::check_threads([p.threads], MAX_THREADS, "threads")?;
        if p.working_set == 0 {
            return Err(BenchError::invalid(
                "working set size must be at least 1 byte",
            ));
        }
        if let Some((limit, avail)) = budget.filter(|(limit, _)| p.working_set > *limit) {
            return Err(BenchError::invalid(format!(
                "working set {} exceeds the memory available for it ({} of {} free)",
                format_bytes_iec(p.working_set),
                format_bytes_iec(limit),
                format_bytes_iec(avail)
            )));
        }
        p.geometry()?;
    }
    if let Some(x) = passes {
        if !(x.is_finite() && x > 0.0) {
            return Err(BenchError::invalid(format!(
                "passes must be a positive number, got {x}"
            )));
        }
    }
    Ok(())
}

/// Default DRAM sizes that do not fit in memory are shrunk (with a note) rather than refused:
/// the user did not ask for them.
fn fit_default_size(cfg: &mut BandwidthConfig, host: &Host, runner: &Runner) {
    if cfg.size.is_some() {
        return;
    }
    let avail = hostbench_core::host::available_memory_bytes();
    let want = sizing::dram_working_set(&host.cpu.caches, 3);
    if avail > 0 && want > avail / 2 {
        let size = (avail / 2) / (3 * sizing::MIB) * (3 * sizing::MIB);
        runner.note(&format!(
            "memory: default working set {} does not fit in half the free memory; using {}",
            format_bytes_iec(want),
            format_bytes_iec(size)
        ));
        cfg.size = Some(size);
    }
}

/// A section's check before anything runs: bad input ends the run; an unsupported section (a
/// host that cannot run it) comes back to be recorded as skipped with its reason.
fn precheck(check: Option<Result<(), BenchError>>) -> Result<Option<BenchError>, BenchError> {
    match check {
        Some(Err(e @ BenchError::Unsupported(_))) => Ok(Some(e)),
        Some(Err(e)) => Err(e),
        _ => Ok(None),
    }
}

/// The largest region of each page kind the sweep and the latency curve will map, while they fit
/// in the memory budget together (else the larger alone).
fn largest_regions(cfg: &MemConfig, sweep_points: &[bandwidth::Point]) -> Vec<(usize, Pages)> {
    let mut largest: Vec<(usize, Pages)> = Vec::new();
    let mut note = |len: usize, pages: Pages| match largest.iter_mut().find(|(_, p)| *p == pages) {
        Some(l) => l.0 = l.0.max(len),
        None => largest.push((len, pages)),
    };
    if cfg.sweep.is_some() {
        for p in sweep_points {
            if let Ok(g) = p.geometry() {
                note(g.array_bytes as usize, cfg.pages);
            }
        }
    }
    if let Some(l) = &cfg.latency {
        if let Some(&ws) = l.working_sets.iter().max() {
            for &pages in &l.pages {
                if let Ok(len) = latency::region_len(ws, pages, 0) {
                    note(len, pages);
                }
            }
        }
    }
    largest.sort_by_key(|&(len, _)| std::cmp::Reverse(len));
    let budget = memory_budget().map_or(u64::MAX, |(limit, _)| limit);
    let mut total = 0u64;
    largest.retain(|&(len, _)| {
        total += len as u64;
        total <= budget
    });
    largest
}

/// Record a whole latency section as skipped, with why.
fn skip_section(runner: &mut Runner, benchmark: &str, why: &BenchError) -> Result<(), BenchError> {
    let case = hostbench_core::Case::new(benchmark, hostbench_core::model::Metric::Latency, "s")
        .work(hostbench_core::model::Work::Memory);
    runner.skip(&case, why)
}

/// Run the configured memory benchmarks through `runner`.
pub fn run_mem(
    runner: &mut Runner,
    cfg: &MemConfig,
    host: &Host,
    spec: &Spec,
) -> Result<(), BenchError> {
    let timing = Timing {
        passes: cfg.passes,
        duration: cfg.duration,
        pages: cfg.pages,
        seed: cfg.seed,
        reference: None,
    };
    let mut bw_points = Vec::new();
    for b in cfg.bandwidth.iter().chain(cfg.classic.iter()) {
        let mut b = b.clone();
        fit_default_size(&mut b, host, runner);
        bw_points.extend(b.points(host));
    }
    let sweep_points = cfg
        .sweep
        .as_ref()
        .map(SweepConfig::points)
        .unwrap_or_default();
    validate(&bw_points, cfg.passes)?;
    validate(&sweep_points, None)?;
    if let Some(l) = &cfg.latency {
        l.validate()?;
    }
    // One CPU leaves nothing to load memory from and no pair to bounce between: a skip.
    let loaded_unsupported = precheck(cfg.loaded.as_ref().map(|l| l.validate(host)))?;
    let c2c_unsupported = precheck(cfg.c2c.as_ref().map(c2c::C2cConfig::validate))?;
    if let Some(n) = &cfg.numa {
        n.cells(&hostbench_core::host::numa_topology())?;
    }
    runner.plan(bw_points.len() + sweep_points.len());
    // Bandwidth, the sweep and latency map a DRAM-sized set case after case: on one NUMA node
    // (where first touch decides nothing) they reuse each other's mappings instead of faulting
    // fresh ones in. Given back before loaded latency, which sizes itself from free memory.
    let reuse = (hostbench_core::host::numa_topology().len() <= 1)
        .then(hostbench_core::buffer::Reuse::start);
    // The headline likwid-bench stands beside: triad at the most threads, of its store kinds
    // the fastest, known once they all ran.
    let headline = bw_points
        .iter()
        .filter(|p| p.kernel == bandwidth::Kernel::Triad && reference::likwid_kernel(p).is_some())
        .map(|p| p.threads)
        .max();
    for p in &bw_points {
        let t = Timing {
            reference: (cfg.reference == ReferenceScope::All).then(|| runner.config().repeat),
            ..timing
        };
        bandwidth::run_point(runner, p, &t, host, spec)?;
    }
    // Between the bandwidth cases and the sections after them, memory changes hands while it is
    // warm: the kept mappings are given back just before likwid-bench starts (so it gets pages
    // the host still backs), and right after it the sweep's and latency curve's largest regions
    // are mapped and faulted in at once from what it freed. On a VM that reports free pages to
    // its host, memory left free for a few seconds costs a host fault per page again: at a
    // 480 MiB LLC, some 8 GiB of such faults were spread over likwid-bench and the growing 4k
    // curve.
    if let Some(pool) = &reuse {
        pool.release();
    }
    if cfg.reference == ReferenceScope::Headline {
        let candidates: Vec<&bandwidth::Point> = bw_points
            .iter()
            .filter(|p| p.kernel == bandwidth::Kernel::Triad && Some(p.threads) == headline)
            .collect();
        bandwidth::likwid_beside_fastest(runner, &candidates, host)?;
    }
    if let Some(pool) = &reuse {
        for (len, pages) in largest_regions(cfg, &sweep_points) {
            // Only a head start: where it fails, the regions are mapped as they come.
            let _ = pool.prime(len, pages);
        }
    }
    if let Some(s) = &cfg.sweep {
        let t = Timing {
            passes: None,
            duration: s.duration,
            ..timing
        };
        for p in &sweep_points {
            bandwidth::run_point(runner, p, &t, host, spec)?;
        }
    }
    if let Some(l) = &cfg.latency {
        latency::run_latency(runner, l, host)?;
    }
    drop(reuse);
    if let Some(l) = &cfg.loaded {
        match loaded_unsupported {
            Some(e) => skip_section(runner, loaded::BENCHMARK, &e)?,
            None => loaded::run_loaded(runner, l, host)?,
        }
    }
    if let Some(c) = &cfg.c2c {
        match c2c_unsupported {
            Some(e) => skip_section(runner, c2c::BENCHMARK, &e)?,
            None => c2c::run_c2c(runner, c)?,
        }
    }
    if let Some(n) = &cfg.numa {
        numa::run_numa(runner, n, host, spec)?;
    }
    Ok(())
}
