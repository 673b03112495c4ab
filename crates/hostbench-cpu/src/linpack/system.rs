//! The system: what to solve and what came out ([`LinpackConfig`], [`LinpackOutcome`]), the run
//! entry points, the sizing of `n` to the memory available, the generated `A` and `b` in their
//! aligned buffers, and HPL's scaled residual check.
//!
//! The matrix and right-hand side are uniform in `[-0.5, 0.5)`, drawn from a counter-based
//! splitmix64 stream, so a seed always gives the same system whatever the thread count. The
//! figure is HPL's: the operation count `2/3 n³ + 3/2 n²` over the wall time of the
//! factorisation plus the solve only (generating the matrix and checking the answer are not
//! timed), and the scaled residual `‖Ax − b‖∞ / (ε (‖A‖∞ ‖x‖∞ + ‖b‖∞) n)` against the original
//! `A` and `b`, which must stay below 16.
//!
//! The setup (generating both copies, rebuilding the working copy between samples, the
//! residual) runs on the solve's threads, pinned as its workers are (`on_workers`): on one
//! thread it grew to seconds per sample at the memory-sized n of the `full` profile, and each
//! thread's first touch places its share of the working copy's pages on its own NUMA node, so
//! the matrix is spread over the nodes as the workers are.

use std::ops::Range;

use hostbench_core::buffer::{Pages, Region};
use hostbench_core::parallel::MAX_THREADS;
use hostbench_core::rng;
use hostbench_core::BenchError;
use hostbench_core::{affinity, parallel};

use super::lu::{factor_and_solve, Workers, NB};
use super::micro::Backend;

/// What to solve: the order `n`, the worker thread count and the generator seed.
pub struct LinpackConfig {
    pub n: usize,
    pub threads: usize,
    pub seed: u64,
}

/// One timed solve.
pub struct LinpackOutcome {
    pub n: usize,
    pub threads: usize,
    /// Wall time of the factorisation and the solve.
    pub seconds: f64,
    /// HPL operation count, `2/3 n³ + 3/2 n²`.
    pub flops: f64,
    /// HPL scaled residual against the original `A` and `b`.
    pub residual: f64,
    /// `residual < 16`.
    pub passed: bool,
    /// Share of the wall time thread 0 spent factoring panels.
    pub panel_share: f64,
    /// Share of all workers' time spent waiting at the factorisation's step barriers: what the
    /// look-ahead did not hide.
    pub idle_share: f64,
    /// Threads that factored the first panel together (the last, short panels take fewer).
    pub panel_threads: usize,
}

impl LinpackOutcome {
    pub(super) fn new(sys: &System, threads: usize, solved: &super::lu::Solved) -> Self {
        let residual = scaled_residual(&sys.a0, sys.n, &solved.x, &sys.b, threads);
        let seconds = solved.seconds;
        Self {
            n: sys.n,
            threads,
            seconds,
            flops: hpl_flops(sys.n),
            residual,
            passed: residual < THRESHOLD,
            panel_share: solved.panel_s / seconds,
            idle_share: solved.wait_s / (seconds * threads as f64),
            panel_threads: solved.panel_threads,
        }
    }
}

/// HPL's pass threshold for the scaled residual.
pub(in crate::linpack) const THRESHOLD: f64 = 16.0;
/// Share of the measured all-thread FMA rate a solve is expected to reach once n hides the
/// panel (measured 0.84 to 0.98 on 2-CPU VMs); only for sizing n and stating the time.
pub const EXPECTED_OF_FMA_RATE: f64 = 0.85;
/// The least order a time budget of [`FLOOR_AT_SECONDS`] or more chooses: below it the panel and
/// the solve's ends dominate.
const MIN_N: usize = 1024;
const FLOOR_AT_SECONDS: f64 = 2.0;
/// Orders are multiples of this (whole tiles of every micro-kernel).
const N_STEP: usize = 64;

/// How `n` is chosen when it is not given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sizing {
    /// The n whose solve takes about this many seconds at [`EXPECTED_OF_FMA_RATE`] of the
    /// measured FMA rate, within half the memory available.
    Seconds(f64),
    /// The largest n whose run fits in this share of the memory available (HPL's rule of
    /// thumb: fill most of the memory, whatever the time).
    MemoryShare(f64),
}

/// Why a sized `n` is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeLimit {
    /// The time budget at the measured rate.
    Time,
    /// The memory share.
    Memory,
    /// The floor ([`MIN_N`], or the smallest order at all where memory allows no more).
    Floor,
}

/// A chosen order, why, and how long one solve should take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeChoice {
    pub n: usize,
    pub limit: SizeLimit,
    /// Seconds of one solve at [`EXPECTED_OF_FMA_RATE`] of the rate it was sized with.
    pub expected_seconds: f64,
}

/// The memory share a time budget may fill: the other half is the OS's and everyone else's.
pub const BUDGET_MEMORY_SHARE: f64 = 0.5;

/// Choose `n` for `sizing` from the measured all-thread FMA rate (`fma_rate`, FLOP/s) and the
/// memory available (`available_bytes`). Pure, so its rules are tested: n grows with the rate
/// as the cube root of rate × seconds, and stops at the memory share; no fixed cap (a cap of
/// 8000 left a 16-vCPU node a sub-second solve that the panel dominated).
pub fn choose_n(sizing: Sizing, fma_rate: f64, available_bytes: u64) -> SizeChoice {
    let (share, by_time, floor) = match sizing {
        Sizing::Seconds(secs) => {
            let secs = secs.max(0.0);
            let flops = EXPECTED_OF_FMA_RATE * fma_rate.max(0.0) * secs;
            // 2/3 n³ = flops
            let n = (1.5 * flops).cbrt();
            let n = if n.is_finite() {
                n as usize
            } else {
                usize::MAX
            };
            // A budget below the standard 2 s is a `--scale`d run asking for less work: the
            // floor shrinks with it as n does (cube root), down to one step.
            let floor = (MIN_N as f64 * (secs / FLOOR_AT_SECONDS).min(1.0).cbrt()).round() as usize;
            let floor = (floor / N_STEP * N_STEP).max(N_STEP);
            (BUDGET_MEMORY_SHARE, Some(n / N_STEP * N_STEP), floor)
        }
        Sizing::MemoryShare(share) => (share, None, N_STEP),
    };
    let by_memory = n_for_memory(available_bytes, share);
    let (n, limit) = match by_time {
        Some(t) if t <= by_memory && t >= floor => (t, SizeLimit::Time),
        Some(t) if t < floor => (floor.min(by_memory), SizeLimit::Floor),
        _ if by_memory <= N_STEP => (by_memory, SizeLimit::Floor),
        _ => (by_memory, SizeLimit::Memory),
    };
    SizeChoice {
        n,
        limit,
        expected_seconds: expected_seconds(n, fma_rate),
    }
}

/// Seconds one solve of order `n` takes at [`EXPECTED_OF_FMA_RATE`] of `fma_rate`.
pub fn expected_seconds(n: usize, fma_rate: f64) -> f64 {
    hpl_flops(n) / (EXPECTED_OF_FMA_RATE * fma_rate)
}

/// Bytes a run of order `n` allocates: `A` (row-major, padded), the copy of `A` kept for the
/// residual, `b`, `x`, the panel scratch and packing buffers and the pivot bookkeeping. Each
/// worker thread adds a packing buffer of about 0.6 MiB on top, which this does not count.
pub fn memory_needed(n: usize) -> u64 {
    let n64 = n as u64;
    let f = 8u64; // bytes per f64 (and per usize on 64-bit targets)
    let lda = lda_for(n).unwrap_or(usize::MAX) as u64;
    let nb = NB as u64;
    let a = lda.saturating_mul(n64).saturating_mul(f);
    let a0 = n64.saturating_mul(n64).saturating_mul(f);
    // scratch panel + two packed L21 panels + two packed inverses and their source
    let panel = n64
        .saturating_add(8)
        .saturating_mul(nb)
        .saturating_mul(3 * f);
    let inverse = (3 * nb * nb + 3 * nb) * f;
    // b, x, residual vectors, permutations and pivot bookkeeping: about 16 words per row
    let vectors = n64.saturating_mul(16 * f);
    a.saturating_add(a0)
        .saturating_add(panel)
        .saturating_add(inverse)
        .saturating_add(vectors)
}

/// Largest `n` (a multiple of 64, at least 64) whose run fits in `share` of `available_bytes`.
pub fn n_for_memory(available_bytes: u64, share: f64) -> usize {
    let budget = (available_bytes as f64 * share.clamp(0.0, 1.0)) as u64;
    // memory_needed grows as 16 n²: start from that estimate and step down to the exact bound.
    let mut n = ((budget as f64 / 16.0).sqrt() as usize / N_STEP + 1) * N_STEP;
    while n > N_STEP && memory_needed(n) > budget {
        n -= N_STEP;
    }
    n.max(N_STEP)
}

/// Generate the system, time the LU factorisation and solve on `cfg.threads` threads, and check
/// the answer.
pub fn run(cfg: &LinpackConfig) -> Result<LinpackOutcome, BenchError> {
    run_with(cfg, Backend::best())
}

/// One generated system for every sample of a case. The first solve uses it as generated; each
/// later one first rebuilds the working copy from the untouched original (a tiled transpose)
/// instead of generating 2 n² elements and faulting 16 n² bytes in again: at n = 8000 on two
/// CPUs generating each sample's system was about 1.3 s of each 2.9 s sample (generation, page
/// clearing), against 1.6 s of solve.
pub struct Prepared {
    sys: System,
    threads: usize,
    used: bool,
}

impl Prepared {
    pub fn new(cfg: &LinpackConfig) -> Result<Self, BenchError> {
        Ok(Self {
            sys: System::generate(cfg)?,
            threads: cfg.threads,
            used: false,
        })
    }

    /// Factor and solve a fresh copy of the system, timed, and check the answer; `progress`
    /// is told the share of the factorisation done after every panel.
    pub fn solve(
        &mut self,
        progress: Option<&(dyn Fn(f64) + Sync)>,
    ) -> Result<LinpackOutcome, BenchError> {
        if self.used {
            self.sys.restore(self.threads)?;
        }
        self.used = true;
        let solved = factor_and_solve(
            &mut self.sys,
            Workers::new(self.threads),
            Backend::best(),
            progress,
        )?;
        Ok(LinpackOutcome::new(&self.sys, self.threads, &solved))
    }
}

/// HPL's operation count for order `n`.
pub(in crate::linpack) fn hpl_flops(n: usize) -> f64 {
    let n = n as f64;
    2.0 / 3.0 * n * n * n + 1.5 * n * n
}

pub(super) fn run_with(
    cfg: &LinpackConfig,
    backend: Backend,
) -> Result<LinpackOutcome, BenchError> {
    let mut sys = System::generate(cfg)?;
    let solved = factor_and_solve(&mut sys, Workers::new(cfg.threads), backend, None)?;
    Ok(LinpackOutcome::new(&sys, cfg.threads, &solved))
}

// ---------------------------------------------------------------------------------------------
// The system

/// Element `idx` of the stream for `seed`, uniform in [-0.5, 0.5) with 53 random bits.
#[inline]
pub(in crate::linpack) fn uniform(seed: u64, idx: u64) -> f64 {
    // Counter-based splitmix64: element `idx` without the ones before it (see `rng`).
    let bits = rng::mix64(seed.wrapping_add(idx.wrapping_add(1).wrapping_mul(rng::GAMMA)));
    (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64) - 0.5
}

/// Row stride of the working matrix: a multiple of 8 doubles so every row starts on a cache line,
/// and not a multiple of 4 KiB, whose rows would all fall into the same cache sets.
/// `None` when that overflows.
fn lda_for(n: usize) -> Option<usize> {
    stride_for(n, 8)
}

/// The stride of `n` elements of `size` bytes: whole 64-byte lines, and not a multiple of
/// 4 KiB. `None` when that overflows.
pub(in crate::linpack) fn stride_for(n: usize, size: usize) -> Option<usize> {
    let (line, page) = (64 / size, 4096 / size);
    let lda = n.checked_next_multiple_of(line)?;
    if lda.is_multiple_of(page) {
        lda.checked_add(line)
    } else {
        Some(lda)
    }
}

/// Rows of the working copy per tile of its rebuild (a tiled transpose), and the unit in which
/// its rows are shared among the setup threads, so each rebuilds the rows it generated.
const TILE: usize = 64;

/// The generated system: `a` is the working copy (row-major, stride `lda`, factored in place),
/// `a0` the untouched original (column-major) and `b` the right-hand side.
pub(super) struct System {
    pub(super) n: usize,
    pub(super) lda: usize,
    pub(super) a: AlignedBuf,
    pub(super) a0: Vec<f64>,
    pub(super) b: Vec<f64>,
}

impl System {
    pub(super) fn generate(cfg: &LinpackConfig) -> Result<Self, BenchError> {
        check_order(cfg)?;
        let n = cfg.n;
        let too_large = || BenchError::invalid(format!("linpack n {n} is too large"));
        let lda = lda_for(n).ok_or_else(too_large)?;
        let len = lda.checked_mul(n).ok_or_else(too_large)?;
        let seed = cfg.seed;
        // A(i, j) is element j·n + i of the stream whatever the storage order.
        let mut a = AlignedBuf::new(len, true)?;
        let out = Out(a.as_mut_ptr());
        on_workers(cfg.threads, n, TILE, |rows| {
            for i in rows {
                // SAFETY: row i of the lda × n buffer, this thread's alone.
                let row = unsafe { std::slice::from_raw_parts_mut(out.at(i * lda), n) };
                for (j, v) in row.iter_mut().enumerate() {
                    *v = uniform(seed, (j * n + i) as u64);
                }
            }
        })?;
        let (a0, b) = original(cfg)?;
        Ok(Self { n, lda, a, a0, b })
    }

    /// The working copy as [`System::generate`] left it, from the untouched original: row `i`
    /// of `a` is column `i` of `a0`, copied in tiles so that the rows written and the columns
    /// read both stay in cache, and the padding beyond `n` zeroed again. Each of `threads`
    /// threads rebuilds the rows it generated.
    pub(super) fn restore(&mut self, threads: usize) -> Result<(), BenchError> {
        let (n, lda, a0) = (self.n, self.lda, &self.a0);
        let out = Out(self.a.as_mut_ptr());
        on_workers(threads, n, TILE, |rows| {
            for i0 in rows.clone().step_by(TILE) {
                let i1 = (i0 + TILE).min(rows.end);
                for j0 in (0..n).step_by(TILE) {
                    let j1 = (j0 + TILE).min(n);
                    for i in i0..i1 {
                        // SAFETY: row i of the buffer, this thread's alone.
                        let row = unsafe {
                            std::slice::from_raw_parts_mut(out.at(i * lda + j0), j1 - j0)
                        };
                        for (j, v) in (j0..j1).zip(row) {
                            *v = a0[j * n + i];
                        }
                    }
                }
            }
            for i in rows {
                // SAFETY: as above, the padding after the row's n values.
                unsafe { std::slice::from_raw_parts_mut(out.at(i * lda + n), lda - n) }.fill(0.0);
            }
        })?;
        Ok(())
    }
}

/// An order of at least 1 and a thread count within bounds, or the usage error.
pub(in crate::linpack) fn check_order(cfg: &LinpackConfig) -> Result<(), BenchError> {
    if cfg.n == 0 {
        return Err(BenchError::invalid("linpack n must be at least 1, got 0"));
    }
    hostbench_core::parallel::check_threads([cfg.threads], MAX_THREADS, "linpack threads")
}

/// The system as LAPACK takes it: `A` column-major (element `j·n + i` of the stream, the same
/// `A` as the working copy's) and `b`. OpenBLAS's reference solve needs only these, not the
/// row-major working copy.
pub(super) fn original(cfg: &LinpackConfig) -> Result<(Vec<f64>, Vec<f64>), BenchError> {
    let n = cfg.n;
    let len0 = n
        .checked_mul(n)
        .ok_or_else(|| BenchError::invalid(format!("linpack n {n} is too large")))?;
    let mut a0: Vec<f64> = try_vec(len0)?;
    let (out, seed) = (Out(a0.as_mut_ptr()), cfg.seed);
    on_workers(cfg.threads, n, 1, |cols| {
        for idx in cols.start * n..cols.end * n {
            // SAFETY: inside the reserved capacity; columns `cols` are this thread's alone.
            unsafe { out.at(idx).write(uniform(seed, idx as u64)) };
        }
    })?;
    // SAFETY: the threads above wrote every one of the len0 elements.
    unsafe { a0.set_len(len0) };
    let mut b = try_vec(n)?;
    b.extend((0..n).map(|i| uniform(cfg.seed ^ 0x5555_5555_5555_5555, i as u64)));
    Ok((a0, b))
}

/// A buffer the setup threads write through, each to its own disjoint elements.
#[derive(Clone, Copy)]
pub(in crate::linpack) struct Out<T>(pub(in crate::linpack) *mut T);

// SAFETY: the threads that share an `Out` write disjoint elements (`on_workers` gives each its
// own range), and its owner reads them only after they have all finished.
unsafe impl<T> Send for Out<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Out<T> {}

impl<T> Out<T> {
    /// Element `i` (a method, so closures capture the `Out`, not the bare pointer).
    ///
    /// # Safety
    /// `i` is inside the buffer.
    pub(in crate::linpack) unsafe fn at(self, i: usize) -> *mut T {
        // SAFETY: forwarded.
        unsafe { self.0.add(i) }
    }
}

/// Run `work` over `0..len` cut into up to `threads` contiguous ranges (each a multiple of
/// `align` long but the last), each on a thread pinned as the solve's worker of the same index
/// is; their results in order.
pub(in crate::linpack) fn on_workers<R: Send>(
    threads: usize,
    len: usize,
    align: usize,
    work: impl Fn(Range<usize>) -> R + Sync,
) -> Result<Vec<R>, BenchError> {
    let per = len
        .div_ceil(threads.max(1))
        .next_multiple_of(align.max(1))
        .max(1);
    let ranges = len.div_ceil(per).max(1);
    let order = affinity::placement_order();
    let done = parallel::run_pinned(
        ranges,
        &order,
        |t| Ok(work(t * per..((t + 1) * per).min(len))),
        |_| (),
    )?;
    Ok(done.results)
}

pub(in crate::linpack) fn alloc_error(len: usize) -> BenchError {
    BenchError::Failed(format!(
        "linpack: cannot allocate {len} doubles ({} bytes)",
        len.saturating_mul(8)
    ))
}

/// An empty vector with room for `len` values, or an error instead of an abort when memory runs
/// out.
pub(in crate::linpack) fn try_vec<T>(len: usize) -> Result<Vec<T>, BenchError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| alloc_error(len))?;
    Ok(v)
}

/// A zeroed `f64` buffer on the shared aligned mapping (`hostbench_core::buffer::Region`, 2 MiB
/// aligned, so the kernels' aligned loads hold and rows never split a vector across two cache
/// lines).
pub(in crate::linpack) struct AlignedBuf {
    region: Region,
    len: usize,
}

impl AlignedBuf {
    /// `huge`: ask for transparent huge pages, which saves TLB misses when walking down the
    /// columns of a large matrix (numpy does the same for its large arrays); the small per-thread
    /// packing buffers stay on base pages.
    pub(in crate::linpack) fn new(len: usize, huge: bool) -> Result<Self, BenchError> {
        let bytes = len.checked_mul(8).ok_or_else(|| alloc_error(len))?;
        let pages = if huge { Pages::Huge } else { Pages::Small };
        // An anonymous mapping reads as zeros, as the solver's buffers must start.
        let region = Region::new(bytes, pages).map_err(|_| alloc_error(len))?;
        Ok(Self { region, len })
    }
    pub(super) fn as_mut_slice(&mut self) -> &mut [f64] {
        &mut self.region.as_f64_mut()[..self.len]
    }
    #[cfg(test)]
    fn as_slice_for_test(&self) -> &[f64] {
        &self.region.as_f64()[..self.len]
    }
    pub(in crate::linpack) fn as_mut_ptr(&mut self) -> *mut f64 {
        self.as_mut_slice().as_mut_ptr()
    }
}

/// HPL's scaled residual `‖Ax − b‖∞ / (ε (‖A‖∞ ‖x‖∞ + ‖b‖∞) n)` with `a` column-major, its
/// columns shared among `threads` threads. A NaN anywhere makes it NaN, which fails the `< 16`
/// test.
pub(in crate::linpack) fn scaled_residual(
    a: &[f64],
    n: usize,
    x: &[f64],
    b: &[f64],
    threads: usize,
) -> f64 {
    // Each thread's share of `A x` and of the row sums, over its own columns.
    let parts = on_workers(threads, n, 1, |cols| {
        let mut ax = vec![0.0f64; n];
        let mut sums = vec![0.0f64; n];
        for j in cols {
            let (col, xj) = (&a[j * n..(j + 1) * n], x[j]);
            for ((ri, si), &v) in ax.iter_mut().zip(sums.iter_mut()).zip(col) {
                *ri += v * xj;
                *si += v.abs();
            }
        }
        (ax, sums)
    });
    let Ok(parts) = parts else {
        return f64::NAN;
    };
    let mut r = b.to_vec();
    let mut row_sums = vec![0.0f64; n];
    for (ax, sums) in &parts {
        for ((ri, si), (&p, &s)) in r
            .iter_mut()
            .zip(row_sums.iter_mut())
            .zip(ax.iter().zip(sums))
        {
            *ri -= p;
            *si += s;
        }
    }
    norm_inf(&r) / (f64::EPSILON * (norm_inf(&row_sums) * norm_inf(x) + norm_inf(b)) * n as f64)
}

/// `max |v[i]|`, NaN if any element is NaN (`f64::max` would skip it).
pub(in crate::linpack) fn norm_inf(v: &[f64]) -> f64 {
    v.iter().fold(0.0f64, |m, e| {
        if e.is_nan() || e.abs() > m {
            e.abs()
        } else {
            m
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linpack::test_support::{cfg, max_abs};

    #[test]
    fn small_solve_passes_on_one_and_two_threads() {
        for threads in [1, 2] {
            let out = run(&cfg(200, threads)).unwrap();
            assert!(out.passed, "{threads} threads: residual {}", out.residual);
            assert!(out.residual.is_finite() && out.residual < THRESHOLD);
            assert_eq!((out.n, out.threads), (200, threads));
            assert!(out.seconds > 0.0);
            assert_eq!(out.flops, hpl_flops(200));
        }
    }

    /// Every sample of a case solves the same system from scratch: after a solve has factored
    /// the working copy in place, `restore` gives back exactly what generation made (padding
    /// included), and a second solve passes as the first did.
    #[test]
    fn a_prepared_system_is_restored_bit_for_bit_between_solves() {
        // 515 rows: not a multiple of the 64-wide tiles, and a stride with padding.
        let c = cfg(515, 2);
        let mut sys = System::generate(&c).unwrap();
        assert!(sys.lda > sys.n);
        factor_and_solve(&mut sys, Workers::new(2), Backend::best(), None).expect("solve");
        assert_ne!(
            sys.a.as_mut_slice(),
            System::generate(&c).unwrap().a.as_mut_slice()
        );
        sys.restore(2).unwrap();
        let same = sys
            .a
            .as_mut_slice()
            .iter()
            .zip(System::generate(&c).unwrap().a.as_mut_slice().iter())
            .all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(same, "restored working copy differs from the generated one");
        let mut p = Prepared::new(&c).unwrap();
        let (first, second) = (
            p.solve(None).expect("first"),
            p.solve(None).expect("second"),
        );
        assert!(first.passed && second.passed);
        assert_eq!(first.residual.to_bits(), second.residual.to_bits());
    }

    /// The setup runs on the solve's threads: any thread count, even more threads than rows,
    /// generates and restores the same bits, and the residual agrees to rounding.
    #[test]
    fn the_setup_is_the_same_on_any_number_of_threads() {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let mut one = System::generate(&cfg(515, 1)).unwrap();
        let want = (bits(one.a.as_mut_slice()), bits(&one.a0), bits(&one.b));
        for threads in [2, 3, 7, 600] {
            let mut sys = System::generate(&cfg(515, threads)).unwrap();
            let got = (bits(sys.a.as_mut_slice()), bits(&sys.a0), bits(&sys.b));
            assert!(got == want, "{threads} threads generate another system");
            sys.a.as_mut_slice().fill(f64::NAN);
            sys.restore(threads).unwrap();
            assert!(
                bits(sys.a.as_mut_slice()) == want.0,
                "{threads} threads restore"
            );
        }
        let x: Vec<f64> = (0..515).map(|i| (i as f64).sin()).collect();
        let r1 = scaled_residual(&one.a0, 515, &x, &one.b, 1);
        for threads in [2, 5, 600] {
            let r = scaled_residual(&one.a0, 515, &x, &one.b, threads);
            assert!((r - r1).abs() <= 1e-12 * r1, "{threads}: {r} vs {r1}");
        }
    }

    #[test]
    fn corrupted_solution_fails_the_residual_check() {
        let n = 200;
        let mut sys = System::generate(&cfg(n, 1)).unwrap();
        let mut x = factor_and_solve(&mut sys, Workers::new(1), Backend::Faer, None)
            .expect("solve")
            .x;
        assert!(scaled_residual(&sys.a0, n, &x, &sys.b, 2) < THRESHOLD);
        // An error of one part in a million in a single entry is far above rounding level.
        x[n / 2] += 1e-6 * max_abs(x.iter().copied());
        let r = scaled_residual(&sys.a0, n, &x, &sys.b, 2);
        assert!(
            r >= THRESHOLD,
            "corrupted solution still passes: residual {r}"
        );
        x[n / 2] = f64::NAN;
        assert!(scaled_residual(&sys.a0, n, &x, &sys.b, 2).is_nan());
    }

    #[test]
    fn flop_count_is_hpls() {
        // 2/3 · 10⁹ + 3/2 · 10⁶
        assert!((hpl_flops(1000) - 668_166_666.666_666_7).abs() < 1e-3);
        assert!((hpl_flops(8000) - (2.0 / 3.0 * 512e9 + 96e6)).abs() < 1.0);
        assert_eq!(hpl_flops(0), 0.0);
    }

    #[test]
    fn memory_bound_and_memory_needed_are_sane() {
        assert_eq!(n_for_memory(0, 0.5), 64);
        for avail in [
            1u64 << 20,
            100 << 20,
            1 << 30,
            2 << 30,
            3 << 30,
            64 << 30,
            1 << 40,
        ] {
            for share in [0.1, 0.5, 0.9] {
                let n = n_for_memory(avail, share);
                let budget = (avail as f64 * share) as u64;
                assert!(n >= 64 && n.is_multiple_of(64), "{avail}: {n}");
                if n > 64 {
                    assert!(memory_needed(n) <= budget, "{avail}: {n} does not fit");
                }
                assert!(
                    memory_needed(n + 64) > budget,
                    "{avail}: {n} is not the largest"
                );
            }
        }
        // no cap: 1 TiB at half holds n in the hundreds of thousands
        assert!(n_for_memory(1 << 40, 0.5) > 180_000);
        // at least the matrix and its copy, growing with n, saturating instead of overflowing
        assert!(memory_needed(1000) >= 2 * 8 * 1000 * 1000);
        assert!(memory_needed(2000) > memory_needed(1000));
        assert_eq!(memory_needed(usize::MAX), u64::MAX);
    }

    #[test]
    fn chosen_n_grows_with_the_rate_and_stops_at_the_memory_share() {
        let avail = 16u64 << 30;
        let budget = Sizing::Seconds(2.0);
        let mut last = 0;
        let mut limits = Vec::new();
        for rate in [1e8, 1e9, 10e9, 50e9, 100e9, 500e9, 2e12, 10e12, 100e12] {
            let c = choose_n(budget, rate, avail);
            assert!(c.n >= last, "{rate}: {} after {last}", c.n);
            assert!(c.n.is_multiple_of(64) && c.n >= 1024);
            assert!(
                memory_needed(c.n) <= avail / 2,
                "{rate}: {} does not fit",
                c.n
            );
            if c.limit == SizeLimit::Time {
                // a 2 s solve at 85 % of the rate, within one step of 64
                assert!((1.8..=2.0).contains(&c.expected_seconds), "{c:?}");
            }
            limits.push(c.limit);
            last = c.n;
        }
        // slow: the floor; then the time budget; fast: the memory share, and no cap at 8000
        assert_eq!(limits[0], SizeLimit::Floor);
        assert!(limits.contains(&SizeLimit::Time));
        assert_eq!(limits[limits.len() - 1], SizeLimit::Memory);
        assert_eq!(last, n_for_memory(avail, 0.5));
        assert!(last > 8000);
        // 40 GFLOP/s for 2 s: 2/3 n³ = 68 GFLOP at 85 % of it, n = 4672
        assert_eq!(choose_n(budget, 40e9, avail).n, 4672);
        // the memory share ignores the rate but states the time at it
        let full = choose_n(Sizing::MemoryShare(0.5), 80e9, avail);
        assert_eq!(
            (full.n, full.limit),
            (n_for_memory(avail, 0.5), SizeLimit::Memory)
        );
        assert!((full.expected_seconds - expected_seconds(full.n, 80e9)).abs() < 1e-9);
        let smaller = choose_n(Sizing::MemoryShare(0.1), 80e9, avail);
        assert!(smaller.n < full.n);
        // so little memory that even the floor does not fit: what fits, never more
        let tiny = choose_n(budget, 100e9, 40 << 20);
        assert!(tiny.n < 1024 && memory_needed(tiny.n) <= 20 << 20);
        // an unknown rate (0) is the floor, not a panic
        assert_eq!(choose_n(budget, 0.0, avail).n, 1024);
        // a scaled-down budget lowers the floor with n's cube root: 2 ms → 1024 / 10 → 64
        let scaled = choose_n(Sizing::Seconds(0.002), 1e8, avail);
        assert_eq!((scaled.n, scaled.limit), (64, SizeLimit::Floor));
        assert_eq!(choose_n(Sizing::Seconds(0.25), 0.0, avail).n, 512);
    }

    #[test]
    fn invalid_input_is_an_error_not_a_panic() {
        let err = |n, threads| {
            run(&LinpackConfig {
                n,
                threads,
                seed: 1,
            })
            .err()
        };
        match err(0, 1) {
            Some(BenchError::InvalidInput(m)) => assert!(m.contains("n") && m.contains('0'), "{m}"),
            _ => panic!("n = 0 accepted"),
        }
        match err(10, 0) {
            Some(BenchError::InvalidInput(m)) => assert!(m.contains("threads"), "{m}"),
            _ => panic!("threads = 0 accepted"),
        }
        assert!(matches!(
            err(10, MAX_THREADS + 1),
            Some(BenchError::InvalidInput(_))
        ));
        assert!(matches!(
            err(usize::MAX, 1),
            Some(BenchError::InvalidInput(_))
        ));
        // fits in usize but not in any memory: an allocation error, not an abort
        assert!(err(3_000_000_000, 1).is_some());
    }

    #[test]
    fn tiny_orders_and_more_threads_than_work() {
        for n in [1, 2, 7, 64] {
            for threads in [1, 4] {
                let out = run(&cfg(n, threads)).unwrap();
                assert!(
                    out.passed,
                    "n {n}, {threads} threads: residual {}",
                    out.residual
                );
            }
        }
    }

    #[test]
    fn generator_is_deterministic_and_uniform() {
        let a = System::generate(&cfg(50, 1)).unwrap();
        let b = System::generate(&cfg(50, 3)).unwrap();
        assert_eq!(a.a0, b.a0);
        assert_eq!(a.b, b.b);
        let c = System::generate(&LinpackConfig {
            n: 50,
            threads: 1,
            seed: 8,
        })
        .unwrap();
        assert_ne!(a.a0, c.a0);
        assert!(a.a0.iter().all(|v| (-0.5..0.5).contains(v)));
        let mean = a.a0.iter().sum::<f64>() / a.a0.len() as f64;
        assert!(mean.abs() < 0.02, "mean {mean}");
        // the working copy is the same matrix, stored row-major
        let ws = a.a.as_slice_for_test();
        assert_eq!(ws[3 * a.lda + 5], a.a0[5 * 50 + 3]);
    }
}
