//! Memory latency: a pointer chase over one random cycle of cache lines, with 4 KiB or
//! verified transparent huge pages and optional parallel chains, plus the classic 1-byte
//! sequential and random access latency.
//!
//! **Why a random single cycle.** Latency is the time of a load whose address comes out of the
//! previous load, so exactly one miss is in flight. A constant-stride walk (lmbench's default
//! `lat_mem_rd`) is what stride prefetchers are built to catch: it reports prefetch-hidden
//! latency, not the memory's. A random order defeats them, but a random *permutation* read as
//! "line i links to line p(i)" has about ln n cycles, and a chase that starts in a short one spins
//! inside the cache. The chase draws uniformly from the permutations with exactly one cycle (the
//! distribution of Sattolo's algorithm), built directly as the walk order: line 0, then the
//! other lines in Fisher–Yates order. So every line is visited once per lap. There is
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
//! [`Permutation`]: crate::order::Permutation
//!
//! With several threads each thread builds, first-touches and chases its own private region on
//! its pinned CPU; a sample's value is the mean of the threads' own seconds per load.
//!
//! * `sweep` — the run: building every working set on its pinned threads, calibration, samples
//!   and what each record says.
//! * `chase` — the pointer-chase working set: the random cycle, its links and the `asm!` loop.
//! * `classic` — the 1-byte sequential and random working set.

mod chase;
mod classic;
mod sweep;

use std::time::Duration;

use hostbench_core::host::available_memory_bytes;
use hostbench_core::model::Host;
use hostbench_core::units::format_bytes_iec;
use hostbench_core::BenchError;

use crate::buffer::{Pages, ALIGN};
use crate::sizing;

pub use sweep::run_latency;
pub(crate) use sweep::{blocks_for, chase_notes, chase_walker, lock, measure, probe, Walker};

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
        let points: usize = self
            .working_sets
            .iter()
            .map(|&ws| self.pages.iter().filter(|&&p| self.measures(ws, p)).count())
            .sum();
        self.patterns.len() * points * self.threads.len() * self.chains.len()
    }

    /// Whether the sweep measures working set `ws` on `pages`. A set smaller than one huge page
    /// is left out of the huge-page curve where the 4 KiB curve measures it: it fits in one
    /// huge page, so the pair says nothing about page size that its 4 KiB point does not (its
    /// TLB reach is the same), and a huge page it is not granted read as "huge pages requested
    /// but 0 %" beside a figure that is the 4 KiB one.
    pub fn measures(&self, ws: u64, pages: Pages) -> bool {
        pages == Pages::Small || ws >= ALIGN as u64 || !self.pages.contains(&Pages::Small)
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
pub(crate) fn per_thread_bytes(ws: u64) -> u64 {
    ws.saturating_add(ws / LINE * 8)
        .saturating_add(ALIGN as u64)
        .saturating_add(PAD as u64)
}

/// Map a region length for `pages`: huge-page regions are rounded up to whole 2 MiB pages, so a
/// small working set can still sit in one huge page instead of being refused one.
pub(crate) fn region_len(ws: u64, pages: Pages, pad: usize) -> Result<usize, BenchError> {
    let len = usize::try_from(ws)
        .ok()
        .and_then(|l| l.checked_add(pad))
        .ok_or_else(|| BenchError::invalid(format!("working set {ws} B does not fit in memory")))?;
    Ok(match pages {
        Pages::Small => len,
        Pages::Huge => len.div_ceil(ALIGN) * ALIGN,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hostbench_core::model::Cache;
    use hostbench_core::{Runner, RunnerConfig};

    use crate::sizing::KIB;

    pub(super) fn quiet() -> RunnerConfig {
        RunnerConfig::quiet(2)
    }

    pub(super) fn host() -> Host {
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

    pub(super) fn small(patterns: Vec<LatPattern>) -> LatencyConfig {
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

    /// Below one huge page the 4 KiB curve alone measures a set; asked for huge pages only,
    /// every size is measured on them.
    #[test]
    fn sets_below_one_huge_page_are_left_out_of_the_huge_page_curve() {
        let mut cfg = small(vec![LatPattern::Chase]);
        cfg.working_sets = vec![16 * KIB, ALIGN as u64, 8 * ALIGN as u64];
        cfg.pages = vec![Pages::Small, Pages::Huge];
        assert!(!cfg.measures(16 * KIB, Pages::Huge));
        assert!(cfg.measures(ALIGN as u64, Pages::Huge) && cfg.measures(16 * KIB, Pages::Small));
        assert_eq!(cfg.case_count(), 5);
        let mut runner = Runner::new(quiet(), host());
        run_latency(&mut runner, &cfg, &host()).unwrap();
        let res = runner.finish().unwrap();
        assert_eq!(res.records.len(), 5, "{:?}", res.skipped);
        assert!(res
            .records
            .iter()
            .all(|r| r.param("pages").as_deref() == Some("4k")
                || r.params["working_set_bytes"].as_u64() >= Some(ALIGN as u64)));
        cfg.pages = vec![Pages::Huge];
        assert!(cfg.measures(16 * KIB, Pages::Huge));
        assert_eq!(cfg.case_count(), 3);
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
