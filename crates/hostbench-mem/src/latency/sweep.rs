//! The latency sweep: pattern × threads × working set × pages × chains through the runner.
//!
//! Each working set is built (and first-touched) on the pinned thread that walks it, then every
//! chain count is calibrated on its first sample so a sample lasts about the configured duration
//! and, for cache-sized sets, covers a whole lap. The record says what the reader needs to
//! interpret the figure: the pages the kernel actually granted, the loop's shape, and for the
//! 1-byte patterns the cost of the same loop over an L1-resident set.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hostbench_core::model::{Host, Metric, Record, Work};
use hostbench_core::rng::derive as mix;
use hostbench_core::{affinity, parallel, BenchError, Case, Runner, Sample};
use serde_json::json;

use super::chase::{random_cycle, ChainSet};
use super::classic::ByteSet;
use super::{LatPattern, LatencyConfig, BENCHMARK, LINE, MAX_CHAINS, UNROLL};
use crate::buffer::{Pages, Region};
use crate::sizing;

/// Size of the L1-resident set the 1-byte loops are also timed on.
const L1_PROBE_BYTES: u64 = 4096;

/// Upper bound on blocks per sample, far beyond any sensible duration.
const MAX_BLOCKS: u64 = 1 << 36;

/// Above `1 - HUGE_ENOUGH` of its region on huge pages, a 4 KiB-page record gets a warning (a
/// huge-page record gets one for any shortfall left after `MADV_COLLAPSE`).
const HUGE_ENOUGH: f64 = 0.9;

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
                    if !cfg.measures(ws, pages) {
                        continue;
                    }
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
                .work(Work::Memory)
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
    let notes = notes_for(&walkers, p.pattern, p.pages)?;
    for &(chains, ref case) in &cases {
        let floor = match p.pattern {
            LatPattern::Chase => None,
            pattern => *floors
                .entry((pattern, chains))
                .or_insert_with(|| l1_floor(pattern, chains, cfg.duration, order)),
        };
        let notes = Notes {
            floor,
            ..notes.clone()
        };
        measure(
            runner,
            case,
            &walkers,
            order,
            chains,
            cfg.duration,
            notes,
            &|_| {},
        )?;
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
#[derive(Debug, Clone)]
pub(crate) struct Notes {
    pattern: LatPattern,
    pages: Pages,
    /// Share of the regions backed by huge pages; `None` when smaps could not be read.
    pub(crate) granted: Option<f64>,
    /// Where the first touch left a huge-page request short: the share before `MADV_COLLAPSE`
    /// was asked, and the kernel's refusal if it refused.
    collapse: Option<(f64, Option<String>)>,
    /// Lines in the cycle (chase) or bytes in the working set (1-byte patterns).
    units: u64,
    /// Seconds per load of the same 1-byte loop over an L1-resident set.
    floor: Option<f64>,
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn measure(
    runner: &mut Runner,
    case: &Case,
    walkers: &[Mutex<Walker>],
    order: &[usize],
    chains: usize,
    duration: Duration,
    notes: Notes,
    more: &dyn Fn(&mut Record),
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
        |rec| {
            annotate(rec, &notes, chains, blocks.get());
            more(rec);
        },
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
pub(crate) fn probe(w: &mut Walker, chains: usize, target: Duration) -> Result<f64, BenchError> {
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
pub(crate) fn blocks_for(target: Duration, per_block: f64, units: u64, chains: usize) -> u64 {
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
    if let Some((before, refused)) = &notes.collapse {
        rec.extra.insert(
            "huge_collapse".into(),
            json!({
                "before": before,
                "after": notes.granted,
                "refused": refused,
            }),
        );
    }
    match (notes.pages, notes.granted) {
        (Pages::Huge, Some(g)) if g < 1.0 => {
            // Not a huge-page figure, however little is missing (the walk crosses the base-page
            // part on every lap): a headline must not carry `pages=huge` for it.
            rec.extra
                .insert(hostbench_core::model::PAGES_GRANTED.into(), json!("mixed"));
            let asked = match &notes.collapse {
                Some((_, Some(why))) => format!(" even after MADV_COLLAPSE ({why})"),
                Some((_, None)) => " even after MADV_COLLAPSE".to_string(),
                None => String::new(),
            };
            rec.warnings.push(format!(
                "huge pages requested but only {:.1} % of the memory was backed by them{asked} \
                 (transparent_hugepage/enabled: {}); the rest ran on base pages, so this is \
                 not a huge-page figure",
                g * 100.0,
                hostbench_core::buffer::thp_setting()
            ))
        }
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
pub(crate) fn huge_fraction(walkers: &[Mutex<Walker>]) -> Option<f64> {
    let mut huge = 0u64;
    let mut total = 0u64;
    for w in walkers {
        let w = lock(w).ok()?;
        huge += w.region().huge_bytes()?;
        total += w.region().len() as u64;
    }
    (total > 0).then(|| huge as f64 / total as f64)
}

pub(crate) fn lock(w: &Mutex<Walker>) -> Result<MutexGuard<'_, Walker>, BenchError> {
    w.lock()
        .map_err(|_| BenchError::Failed("latency worker state poisoned by an earlier panic".into()))
}

/// A per-thread seed, so threads never share a cycle shape.
fn thread_seed(seed: u64, thread: usize) -> u64 {
    mix(seed, thread as u64)
}

/// A single-chain pointer chase of `ws` bytes for the other memory benchmarks (loaded latency,
/// NUMA cells), built and first-touched on the calling (pinned) thread, its region bound to NUMA
/// node `node` first when one is given.
pub(crate) fn chase_walker(
    ws: u64,
    pages: Pages,
    seed: u64,
    node: Option<usize>,
) -> Result<Walker, BenchError> {
    ChainSet::build_on(ws, pages, random_cycle(ws, seed)?, node).map(Walker::Chase)
}

/// What a chase's record says about itself (pages granted, cycle length).
pub(crate) fn chase_notes(walkers: &[Mutex<Walker>], pages: Pages) -> Result<Notes, BenchError> {
    notes_for(walkers, LatPattern::Chase, pages)
}

/// The case's notes, after making sure a huge-page request is met where the kernel can meet it:
/// a region that came back partly on base pages (the first touch fell back: memory fragmented
/// at that moment, as on a freshly booted VM) is collapsed into huge pages before anything is
/// measured, its contents kept, and only if the kernel refuses is it measured as it is, and
/// said so (`annotate`).
fn notes_for(
    walkers: &[Mutex<Walker>],
    pattern: LatPattern,
    pages: Pages,
) -> Result<Notes, BenchError> {
    let mut granted = huge_fraction(walkers);
    let mut collapse = None;
    if let (Pages::Huge, Some(before)) = (pages, granted) {
        // Any shortfall, not only a large one: a set that starts on a kept mapping two huge
        // pages short reads 0.94 at 64 MiB and 0.98 at 256 MiB, the headline's size.
        if before < 1.0 {
            let mut refused = None;
            for w in walkers {
                if let Err(why) = lock(w)?.region().collapse() {
                    refused = Some(why);
                }
            }
            granted = huge_fraction(walkers);
            collapse = Some((before, refused));
        }
    }
    Ok(Notes {
        pattern,
        pages,
        granted,
        collapse,
        units: lock(&walkers[0])?.units(),
        floor: None,
    })
}

/// One thread's built working set.
pub(crate) enum Walker {
    Chase(ChainSet),
    Bytes(ByteSet),
}

impl Walker {
    /// One working set from scratch (the sweep shares chase cycles across page sizes instead).
    fn build(pattern: LatPattern, ws: u64, pages: Pages, seed: u64) -> Result<Self, BenchError> {
        match pattern {
            LatPattern::Chase => chase_walker(ws, pages, seed, None),
            LatPattern::Seq => ByteSet::build(ws, pages, false, seed).map(Self::Bytes),
            LatPattern::Random => ByteSet::build(ws, pages, true, seed).map(Self::Bytes),
        }
    }

    pub(crate) fn region(&self) -> &Region {
        match self {
            Self::Chase(c) => &c.region,
            Self::Bytes(b) => &b.region,
        }
    }

    /// Lines (chase) or bytes (1-byte patterns) one lap visits.
    pub(crate) fn units(&self) -> u64 {
        match self {
            Self::Chase(c) => c.order.len() as u64,
            Self::Bytes(b) => b.ws as u64,
        }
    }

    /// Walk `blocks` × 16 dependent loads on each of `chains` chains, validated; the seconds the
    /// loop took.
    pub(crate) fn walk(&mut self, chains: usize, blocks: u64) -> Result<f64, BenchError> {
        with_chains!(chains, K => match self {
            Self::Chase(c) => c.walk::<K>(blocks),
            Self::Bytes(b) => b.walk::<K>(blocks),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::tests::{host, quiet, small};

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
        // One huge page: below it the huge-page curve is left to the 4 KiB one.
        cfg.working_sets = vec![2 * sizing::MIB];
        cfg.pages = vec![Pages::Small, Pages::Huge];
        cfg.threads = vec![2];
        cfg.chains = vec![2];
        let mut runner = Runner::new(quiet(), host());
        run_latency(&mut runner, &cfg, &host()).unwrap();
        let result = runner.finish().unwrap();
        assert_eq!(result.records.len(), 2, "{:?}", result.skipped);
        // Both page sizes walk the same cycles (drawn once per working set).
        assert_eq!(result.records[0].extra["cycle_lines"], json!(32768));
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
                assert_eq!(warned, g < 1.0, "{g} {:?}", rec.warnings);
            }
            None => assert!(warned, "{:?}", rec.warnings),
        }
    }

    /// A huge-page chase whose regions the first touch left on base pages (as the first run on
    /// a freshly booted VM found them) is collapsed into huge pages before it is measured; where
    /// the kernel refuses, the record says so, carries `pages_granted = "mixed"` and is no
    /// huge-page figure.
    #[test]
    fn a_short_huge_page_chase_is_collapsed_before_it_is_measured() {
        // 6 MiB and a line: a size no other test builds (regions round up to 8 MiB).
        let ws = 6 * sizing::MIB + 64;
        super::super::chase::tests::BASE_PAGES_WS.store(ws, std::sync::atomic::Ordering::SeqCst);
        let mut cfg = small(vec![LatPattern::Chase]);
        cfg.working_sets = vec![ws];
        cfg.pages = vec![Pages::Huge];
        let mut runner = Runner::new(quiet(), host());
        run_latency(&mut runner, &cfg, &host()).unwrap();
        let result = runner.finish().unwrap();
        let rec = &result.records[0];
        let Some(c) = rec.extra.get("huge_collapse") else {
            // Only where the kernel does not say how a region is backed, or where khugepaged
            // collapsed the region on its own between the touch and the check (it scans
            // madvised regions in the background): then nothing was short any more.
            let g = rec.extra.get("huge_fraction").and_then(|v| v.as_f64());
            assert!(g.is_none_or(|g| g >= 1.0), "{:?}", rec.extra);
            return;
        };
        // Touched on base pages; khugepaged may have collapsed part of it in the background
        // before the check (a CI run found 0.75): short is what matters.
        let before = c["before"].as_f64().expect("before");
        assert!(before < 1.0, "{c}");
        let after = c["after"].as_f64().expect("after");
        // Whether the kernel made it whole is the kernel's business (the pool's own test,
        // tests/huge_pages.rs, checks a refusal-free collapse in a binary of its own; here other
        // tests share the process and its kept mappings): the record must say which it was.
        if after >= 1.0 {
            assert!(c["refused"].is_null(), "{c}");
            assert!(!rec.pages_mixed());
            assert!(
                !rec.warnings
                    .iter()
                    .any(|w| w.contains("huge pages requested")),
                "{:?}",
                rec.warnings
            );
        } else {
            assert!(rec.pages_mixed(), "{:?}", rec.extra);
            assert!(
                rec.warnings
                    .iter()
                    .any(|w| w.contains("even after MADV_COLLAPSE")),
                "{:?}",
                rec.warnings
            );
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
}
