//! Core-to-core latency: a cache line bounced between two pinned CPUs, for every pair.
//!
//! **What moves.** When one core writes a line another core holds, the line (or its ownership)
//! has to travel: from the sibling hyperthread it never leaves the core's L1, within a shared L3
//! it crosses the on-die fabric, between CCXs/tiles or sockets it crosses links whose latency is
//! a property of the part. A matrix of every pair shows that structure; each record's
//! `extra.relation` says which boundary the pair crosses (from sysfs), so a reader can tell an
//! SMT sibling from a socket without knowing the machine.
//!
//! **Two modes, two protocols.**
//! * `one_way`: one shared line holding a counter. CPU A may increment it (compare-and-swap) only
//!   when it is even, CPU B only when it is odd, so every increment needs the line to move from
//!   the other core: the time per increment is one transfer with its ownership request. This is
//!   the figure the core-to-core-latency tools call one-way (they halve a CAS ping-pong's round
//!   trip, which is the same two hand-offs).
//! * `round_trip`: two lines. A writes sequence n to the request line and waits for n on the
//!   reply line; B waits for n on the request line and writes it to the reply line. The time per
//!   exchange is a full request/response, the shape of a lock hand-off or a queue ping-pong.
//!
//! **Why no `pause` in the spin.** The waits are plain load loops: x86's `pause` stalls for up
//! to ~140 cycles on recent Intel cores, which would be added to every bounce and measure the
//! instruction rather than the fabric. Only a wait far longer than any hand-off
//! (16 Ki spins) yields the CPU and checks a deadline, so a lost hand-off (a broken protocol, a
//! CPU taken offline) fails the case instead of hanging the run.
//!
//! **Why it can be trusted.** Both sides wait for exact values, so a skipped or duplicated
//! hand-off stalls (and fails) rather than silently shortening the work; after a sample both
//! threads check that the counter reached exactly the number of bounces they made. Each sample
//! is `BATCHES` timed batches after an untimed warm-up, and its value is the median batch (one
//! preempted batch on a shared machine does not move it); the runner's repetitions then give the
//! median of samples.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hostbench_core::host::{cpu_relation, format_cpu_list, CpuRelation};
use hostbench_core::model::{Metric, Work};
use hostbench_core::{affinity, parallel, BenchError, Case, Runner, Sample};
use serde_json::json;

/// Benchmark id of every record this module produces.
pub const BENCHMARK: &str = "mem.c2c";

/// Timed batches per sample; the sample is their median.
const BATCHES: usize = 15;

/// Untimed bounces before the batches: both threads spinning, caches and clocks settled.
const WARMUP_BOUNCES: u64 = 2_000;

/// A wait that sees no progress for this long fails the case.
const STALL: Duration = Duration::from_secs(2);

/// Most CPUs the standard profile bounces between: `n (n-1)` cases grow fast, and 16 CPUs spread
/// over the placement order already show every boundary the host has.
pub const PROFILE_MAX_CPUS: usize = 16;

hostbench_core::named_enum! {
    /// What one bounce is.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum C2cMode("core-to-core mode") {
        /// One line handed from one core to the other: time per hand-off.
        OneWay = "one_way" | "one-way" | "oneway",
        /// Request on one line, reply on another: time per exchange.
        RoundTrip = "round_trip" | "round-trip" | "roundtrip" | "rtt",
    }
}

/// Plain configuration of the core-to-core matrix.
#[derive(Debug, Clone)]
pub struct C2cConfig {
    /// CPUs to pair (every unordered pair is measured); sorted, distinct.
    pub cpus: Vec<usize>,
    pub modes: Vec<C2cMode>,
    /// Target length of one sample (all its batches).
    pub duration: Duration,
}

impl C2cConfig {
    /// Every CPU this process may use, both modes.
    pub fn for_host() -> Self {
        Self {
            cpus: affinity::allowed_cpus(),
            modes: C2cMode::ALL.to_vec(),
            duration: Duration::from_millis(20),
        }
    }

    /// At most `max` CPUs, taken evenly along the placement order (one per core first, sockets
    /// interleaved), so a subset still spans cores, caches and sockets.
    pub fn spread(mut self, max: usize) -> Self {
        let order = affinity::placement_order();
        if self.cpus.len() > max && max >= 2 {
            let pool: Vec<usize> = order
                .iter()
                .copied()
                .filter(|c| self.cpus.contains(c))
                .collect();
            let step = pool.len() as f64 / max as f64;
            let mut picked: Vec<usize> = (0..max)
                .map(|i| pool[((i as f64 * step) as usize).min(pool.len() - 1)])
                .collect();
            picked.sort_unstable();
            picked.dedup();
            self.cpus = picked;
        }
        self
    }

    /// Unordered pairs, in matrix order.
    pub fn pairs(&self) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        for (i, &a) in self.cpus.iter().enumerate() {
            for &b in &self.cpus[i + 1..] {
                v.push((a, b));
            }
        }
        v
    }

    pub fn case_count(&self) -> usize {
        self.pairs().len() * self.modes.len()
    }

    /// Refuse what cannot run: too few CPUs, a CPU this process may not use, an empty list.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.modes.is_empty() {
            return Err(BenchError::invalid(format!(
                "empty mode list for {BENCHMARK}"
            )));
        }
        if self.duration.is_zero() {
            return Err(BenchError::invalid(
                "core-to-core sample duration must be positive, got 0 s",
            ));
        }
        let allowed = affinity::allowed_cpus();
        if let Some(&c) = self.cpus.iter().find(|c| !allowed.contains(c)) {
            return Err(BenchError::invalid(format!(
                "CPU {c} is not one this process may use (allowed: {})",
                format_cpu_list(&allowed)
            )));
        }
        if self.cpus.len() < 2 {
            return Err(BenchError::unsupported(format!(
                "core-to-core latency needs at least two CPUs, got the CPU list '{}'",
                format_cpu_list(&self.cpus)
            )));
        }
        Ok(())
    }
}

/// A cache line to itself: 128-byte alignment also keeps the adjacent-line prefetcher (which
/// pairs 64-byte lines) from dragging the other line along.
#[repr(C, align(128))]
#[derive(Default)]
struct Line(AtomicU64);

#[derive(Default)]
struct Shared {
    request: Line,
    reply: Line,
}

/// Spin until `line` holds `want`; fail after `STALL` without it.
#[inline(always)]
fn wait_for(line: &AtomicU64, want: u64) -> Result<(), BenchError> {
    let mut spins = 0u32;
    let mut since: Option<Instant> = None;
    loop {
        if line.load(Ordering::Acquire) == want {
            return Ok(());
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(1 << 14) {
            // Far longer than any real hand-off (well under a microsecond): the partner is not
            // running, perhaps on this very CPU (a one-CPU test host), so let it.
            std::thread::yield_now();
            let t = *since.get_or_insert_with(Instant::now);
            if t.elapsed() > STALL {
                return Err(BenchError::Validation(format!(
                    "core-to-core bounce stalled: waited {} s for value {want}, the line holds {} \
                     (a lost hand-off)",
                    STALL.as_secs(),
                    line.load(Ordering::Acquire)
                )));
            }
        }
    }
}

/// `count` bounces starting at bounce `from`; side 0 is CPU A, side 1 CPU B.
#[inline(always)]
fn bounce(
    shared: &Shared,
    mode: C2cMode,
    side: usize,
    from: u64,
    count: u64,
) -> Result<(), BenchError> {
    match mode {
        C2cMode::OneWay => {
            // Bounce k is two hand-offs: A turns 2k into 2k+1, B turns 2k+1 into 2k+2.
            // The claim is a compare-and-swap, as the core-to-core tools do it: one locked
            // read-for-ownership per hand-off, rather than a load that shares the line and a
            // store that must upgrade it in a second step.
            let line = &shared.request.0;
            for k in from..from + count {
                let mine = 2 * k + side as u64;
                wait_for(line, mine)?;
                if let Err(held) =
                    line.compare_exchange(mine, mine + 1, Ordering::AcqRel, Ordering::Acquire)
                {
                    return Err(BenchError::Validation(format!(
                        "core-to-core hand-off lost: the line held {held} instead of {mine}"
                    )));
                }
            }
        }
        C2cMode::RoundTrip => {
            let (req, rep) = (&shared.request.0, &shared.reply.0);
            for k in from + 1..=from + count {
                if side == 0 {
                    req.store(k, Ordering::Release);
                    wait_for(rep, k)?;
                } else {
                    wait_for(req, k)?;
                    rep.store(k, Ordering::Release);
                }
            }
        }
    }
    Ok(())
}

/// Hand-offs one bounce counts in the record's unit (a one-way bounce is two transfers).
fn transfers(mode: C2cMode) -> u64 {
    match mode {
        C2cMode::OneWay => 2,
        C2cMode::RoundTrip => 1,
    }
}

/// One sample between CPUs `a` and `b`: warm-up, then `BATCHES` batches of `per_batch` bounces
/// timed on CPU A; seconds per hand-off (one-way) or exchange (round trip) of the median batch,
/// and of the best.
fn sample(a: usize, b: usize, mode: C2cMode, per_batch: u64) -> Result<(f64, f64), BenchError> {
    let shared = Shared::default();
    let total = WARMUP_BOUNCES + per_batch * BATCHES as u64;
    let t = parallel::run_pinned(
        2,
        &[a, b],
        |side| {
            if affinity::current_cpu().is_some_and(|c| c != [a, b][side]) {
                return Err(BenchError::Failed(format!(
                    "could not pin the thread to CPU {}",
                    [a, b][side]
                )));
            }
            bounce(&shared, mode, side, 0, WARMUP_BOUNCES)?;
            let mut batches = Vec::with_capacity(BATCHES);
            let mut from = WARMUP_BOUNCES;
            for _ in 0..BATCHES {
                let t0 = Instant::now();
                bounce(&shared, mode, side, from, per_batch)?;
                batches.push(t0.elapsed().as_secs_f64());
                from += per_batch;
            }
            Ok(batches)
        },
        |_| (),
    )?;
    // Counted bounces: the lines hold exactly what `total` bounces leave behind.
    let (want_req, want_rep) = match mode {
        C2cMode::OneWay => (2 * total, 0),
        C2cMode::RoundTrip => (total, total),
    };
    let got = (
        shared.request.0.load(Ordering::Acquire),
        shared.reply.0.load(Ordering::Acquire),
    );
    if got != (want_req, want_rep) {
        return Err(BenchError::Validation(format!(
            "core-to-core lines hold {got:?} after {total} bounces instead of \
             {:?}: hand-offs were lost or repeated",
            (want_req, want_rep)
        )));
    }
    let mut batches = t.results.into_iter().next().unwrap_or_default();
    batches.sort_by(f64::total_cmp);
    let per = (per_batch * transfers(mode)) as f64;
    let median = batches.get(batches.len() / 2).copied().unwrap_or(f64::NAN) / per;
    let best = batches.first().copied().unwrap_or(f64::NAN) / per;
    Ok((median, best))
}

/// Bounces per batch so a whole sample lasts about `target`, from a short probe.
fn calibrate(a: usize, b: usize, mode: C2cMode, target: Duration) -> Result<u64, BenchError> {
    let probe = 500u64;
    let (per, _) = sample(a, b, mode, probe)?;
    let per_bounce = (per * transfers(mode) as f64).max(1e-9);
    let want = target.as_secs_f64() / BATCHES as f64 / per_bounce;
    Ok((want as u64).clamp(100, 10_000_000))
}

/// Run the matrix through `runner`: every pair, every mode.
pub fn run_c2c(runner: &mut Runner, cfg: &C2cConfig) -> Result<(), BenchError> {
    cfg.validate()?;
    runner.plan(cfg.case_count());
    for (a, b) in cfg.pairs() {
        let relation = cpu_relation(a, b);
        for &mode in &cfg.modes {
            let case = Case::new(BENCHMARK, Metric::Latency, "s")
                .work(Work::Memory)
                .param("cpu_a", a)
                .param("cpu_b", b)
                .param("mode", mode.name());
            run_pair(runner, &case, a, b, mode, relation, cfg.duration)?;
        }
    }
    Ok(())
}

fn run_pair(
    runner: &mut Runner,
    case: &Case,
    a: usize,
    b: usize,
    mode: C2cMode,
    relation: CpuRelation,
    duration: Duration,
) -> Result<(), BenchError> {
    let per_batch = Cell::new(0u64);
    runner.run_case(
        case,
        || {
            if per_batch.get() == 0 {
                per_batch.set(calibrate(a, b, mode, duration)?);
            }
            let (median, best) = sample(a, b, mode, per_batch.get())?;
            Ok(Sample::new(median).with("best_batch_s", best))
        },
        |rec| {
            rec.extra.insert("relation".into(), json!(relation.name()));
            rec.extra
                .insert("bounces_per_batch".into(), json!(per_batch.get()));
            rec.extra
                .insert("batches_per_sample".into(), json!(BATCHES));
            rec.extra.insert(
                "note".into(),
                json!(match mode {
                    C2cMode::OneWay =>
                        "one shared line, the two CPUs take turns incrementing it: seconds per \
                         hand-off (median batch per sample)",
                    C2cMode::RoundTrip =>
                        "request on one line, reply on another: seconds per exchange (median \
                         batch per sample)",
                }),
            );
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use hostbench_core::RunnerConfig;

    #[test]
    fn pairs_are_unordered_and_spread_keeps_the_count() {
        let cfg = C2cConfig {
            cpus: vec![0, 1, 2, 3],
            modes: vec![C2cMode::RoundTrip],
            duration: Duration::from_millis(1),
        };
        assert_eq!(
            cfg.pairs(),
            [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
        );
        assert_eq!(cfg.case_count(), 6);
        let all = C2cConfig::for_host();
        let n = all.cpus.len();
        let some = all.spread(2);
        assert_eq!(some.cpus.len(), n.min(2));
    }

    #[test]
    fn bad_cpus_are_refused_by_name() {
        let mut cfg = C2cConfig::for_host();
        cfg.cpus = vec![0, 1 << 19];
        let e = cfg.validate().unwrap_err();
        assert!(matches!(e, BenchError::InvalidInput(_)));
        assert!(e.to_string().contains("CPU 524288 is not one"), "{e}");
        cfg.cpus = vec![affinity::allowed_cpus()[0]];
        assert!(matches!(cfg.validate(), Err(BenchError::Unsupported(_))));
    }

    /// Both protocols run and count their bounces on the first two allowed CPUs (on a one-CPU
    /// host both threads share it, which still exercises the protocol).
    #[test]
    fn both_modes_bounce_and_are_counted() {
        let cpus = affinity::allowed_cpus();
        let (a, b) = (cpus[0], *cpus.get(1).unwrap_or(&cpus[0]));
        for mode in C2cMode::ALL {
            let (median, best) = sample(a, b, mode, 200).unwrap();
            assert!(median.is_finite() && median > 0.0, "{mode}: {median}");
            assert!(best <= median, "{best} > {median}");
        }
        if cpus.len() >= 2 {
            let cfg = C2cConfig {
                cpus: cpus[..2].to_vec(),
                modes: C2cMode::ALL.to_vec(),
                duration: Duration::from_millis(2),
            };
            let host = hostbench_core::host::inventory();
            let mut runner = Runner::new(RunnerConfig::quiet(2), host);
            run_c2c(&mut runner, &cfg).unwrap();
            let result = runner.finish().unwrap();
            assert_eq!(result.records.len(), 2, "{:?}", result.skipped);
            for (rec, mode) in result.records.iter().zip(["one_way", "round_trip"]) {
                assert_eq!(rec.benchmark, BENCHMARK);
                assert_eq!(rec.param("mode").as_deref(), Some(mode));
                assert_eq!(rec.param("cpu_a"), Some(cpus[0].to_string()));
                assert!(rec.extra["relation"].is_string());
                assert!(rec.extra["bounces_per_batch"].as_u64().unwrap() >= 100);
            }
        }
    }

    #[test]
    fn a_lost_hand_off_fails_instead_of_hanging() {
        let line = AtomicU64::new(7);
        let t0 = Instant::now();
        let e = wait_for(&line, 8).unwrap_err();
        assert!(matches!(e, BenchError::Validation(_)));
        assert!(e.to_string().contains("stalled"), "{e}");
        assert!(t0.elapsed() >= STALL);
    }
}
