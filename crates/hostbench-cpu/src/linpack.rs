//! HPL-style dense solve: LU with partial pivoting of a random `n × n` system, timed and checked
//! the way HPL does it.
//!
//! It is *HPL-style, not HPL*: one process on one machine, no MPI, no process grid and no
//! `HPL.dat` search, our own generator. What it keeps from HPL is what makes the figure
//! comparable with HPL and with an OpenBLAS `dgetrf` + `dgetrs` of the same order:
//!
//! - the operation count `2/3 n³ + 3/2 n²` (HPL's `HPL_pdtest.c`), divided by the wall time of
//!   the factorisation plus the solve only (generating the matrix and checking the answer are
//!   not timed);
//! - the scaled residual `‖Ax − b‖∞ / (ε (‖A‖∞ ‖x‖∞ + ‖b‖∞) n)`, computed against the original
//!   `A` and `b`, which must stay below 16 (HPL's default threshold).
//!
//! The matrix and right-hand side are uniform in `[-0.5, 0.5)`, drawn from a counter-based
//! splitmix64 stream, so a seed always gives the same system whatever the thread count.
//!
//! # Algorithm
//!
//! A right-looking blocked LU (panels of [`NB`] columns) with a look-ahead of one panel, the
//! scheme HPL and OpenBLAS use to hide the panel factorisation, which is latency bound:
//!
//! - In each step thread 0 first brings the *next* panel up to date and factors it, while the
//!   other threads update the rest of the trailing matrix; thread 0 joins them when it is done.
//!   The trailing update is cut into column chunks claimed from an atomic counter, so a thread
//!   slowed down by another process on a shared machine simply takes fewer chunks.
//! - The matrix is stored row-major, so a row interchange moves contiguous memory instead of
//!   touching one cache line per column. Row interchanges are applied as a gather driven by the
//!   panel's permutation, and never to earlier panels' `L` (the LINPACK `dgesl` convention; the
//!   forward substitution applies them as it goes).
//! - The panel is copied to a column-major scratch block and factored there by faer's recursive
//!   partial-pivoting LU.
//! - The triangular solve `U₁₂ = L₁₁⁻¹ A₁₂` multiplies by the inverse of the unit lower
//!   triangle, formed once per panel, so it runs on the same micro-kernel as the trailing
//!   update (`A₂₂ −= L₂₁ U₁₂`), which is where nearly all the time goes.
//! - The micro-kernels are packed register-tile GEMM kernels, BLIS style: AVX-512 (24 × 8 tile)
//!   or AVX2 + FMA (8 × 6), chosen at run time, so the binary still runs on any x86-64. Without
//!   either (or off x86-64) the same blocked algorithm calls faer's `matmul` and triangular solve
//!   instead.
//! - The solve is blocked the same way, with the matrix–vector products split over the threads.
//! - Each worker is pinned to a CPU in the core crate's placement order (DESIGN.md §5); the
//!   calling thread only waits, so its own affinity is left alone.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::lu::partial_pivoting::factor::{
    lu_in_place, lu_in_place_scratch, PartialPivLuParams,
};
use faer::linalg::triangular_solve::solve_unit_lower_triangular_in_place;
use faer::{Accum, Auto, MatMut, MatRef, Par, Spec};
use hostbench_core::buffer::{Pages, Region};
use hostbench_core::rng;
use hostbench_core::{affinity, BenchError};

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
}

/// Panel width. HPL's tuning guide puts NB in 32..256; 256 keeps the update's inner dimension
/// long enough for the micro-kernel while the panel work (which grows with NB) stays small.
const NB: usize = 256;
/// Widest column chunk of the trailing update: the packed `U₁₂` chunk (CHUNK × NB doubles,
/// 576 KiB) stays in a 1 MiB L2 while each packed `L₂₁` micro-panel is reused across it.
const CHUNK: usize = 288;
use hostbench_core::parallel::MAX_THREADS;
/// HPL's pass threshold for the scaled residual.
const THRESHOLD: f64 = 16.0;
/// Cap of [`default_n`]: the default run should take seconds, not minutes, on a 2-core machine.
const DEFAULT_N_CAP: usize = 8000;

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

/// Largest `n` (a multiple of 64, at least 64, at most 8000) whose run fits in half of
/// `available_bytes`, leaving the other half to the OS and everything else.
pub fn default_n(available_bytes: u64) -> usize {
    let budget = available_bytes / 2;
    let mut n = DEFAULT_N_CAP;
    while n > 64 && memory_needed(n) > budget {
        n -= 64;
    }
    n
}

/// Generate the system, time the LU factorisation and solve on `cfg.threads` threads, and check
/// the answer.
pub fn run(cfg: &LinpackConfig) -> Result<LinpackOutcome, BenchError> {
    run_with(cfg, Backend::best())
}

/// HPL's operation count for order `n`.
fn hpl_flops(n: usize) -> f64 {
    let n = n as f64;
    2.0 / 3.0 * n * n * n + 1.5 * n * n
}

fn run_with(cfg: &LinpackConfig, backend: Backend) -> Result<LinpackOutcome, BenchError> {
    let mut sys = System::generate(cfg)?;
    let (x, seconds) = factor_and_solve(&mut sys, cfg.threads, backend)?;
    let residual = scaled_residual(&sys.a0, sys.n, &x, &sys.b);
    Ok(LinpackOutcome {
        n: sys.n,
        threads: cfg.threads,
        seconds,
        flops: hpl_flops(sys.n),
        residual,
        passed: residual < THRESHOLD,
    })
}

// ---------------------------------------------------------------------------------------------
// The system

/// Element `idx` of the stream for `seed`, uniform in [-0.5, 0.5) with 53 random bits.
#[inline]
fn uniform(seed: u64, idx: u64) -> f64 {
    // Counter-based splitmix64: element `idx` without the ones before it (see `rng`).
    let bits = rng::mix64(seed.wrapping_add(idx.wrapping_add(1).wrapping_mul(rng::GAMMA)));
    (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64) - 0.5
}

/// Row stride of the working matrix: a multiple of 8 doubles so every row starts on a cache line,
/// and not a multiple of 4 KiB, whose rows would all fall into the same cache sets.
/// `None` when that overflows.
fn lda_for(n: usize) -> Option<usize> {
    let lda = n.checked_next_multiple_of(8)?;
    if lda % 512 == 0 {
        lda.checked_add(8)
    } else {
        Some(lda)
    }
}

/// The generated system: `a` is the working copy (row-major, stride `lda`, factored in place),
/// `a0` the untouched original (column-major) and `b` the right-hand side.
struct System {
    n: usize,
    lda: usize,
    a: AlignedBuf,
    a0: Vec<f64>,
    b: Vec<f64>,
}

impl System {
    fn generate(cfg: &LinpackConfig) -> Result<Self, BenchError> {
        let n = cfg.n;
        if n == 0 {
            return Err(BenchError::invalid("linpack n must be at least 1, got 0"));
        }
        hostbench_core::parallel::check_threads([cfg.threads], MAX_THREADS, "linpack threads")?;
        let too_large = || BenchError::invalid(format!("linpack n {n} is too large"));
        let lda = lda_for(n).ok_or_else(too_large)?;
        let len = lda.checked_mul(n).ok_or_else(too_large)?;
        let len0 = n.checked_mul(n).ok_or_else(too_large)?;
        let seed = cfg.seed;
        // A(i, j) is element j·n + i of the stream whatever the storage order.
        let mut a = AlignedBuf::new(len, true)?;
        for (i, row) in a.as_mut_slice().chunks_exact_mut(lda).enumerate() {
            for (j, v) in row[..n].iter_mut().enumerate() {
                *v = uniform(seed, (j * n + i) as u64);
            }
        }
        let mut a0 = try_vec(len0)?;
        a0.extend((0..len0).map(|idx| uniform(seed, idx as u64)));
        let mut b = try_vec(n)?;
        b.extend((0..n).map(|i| uniform(seed ^ 0x5555_5555_5555_5555, i as u64)));
        Ok(Self { n, lda, a, a0, b })
    }
}

fn alloc_error(len: usize) -> BenchError {
    BenchError::Failed(format!(
        "linpack: cannot allocate {len} doubles ({} bytes)",
        len.saturating_mul(8)
    ))
}

/// An empty vector with room for `len` values, or an error instead of an abort when memory runs
/// out.
fn try_vec<T>(len: usize) -> Result<Vec<T>, BenchError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| alloc_error(len))?;
    Ok(v)
}

/// A zeroed `f64` buffer on the shared aligned mapping (`hostbench_core::buffer::Region`, 2 MiB
/// aligned, so the kernels' aligned loads hold and rows never split a vector across two cache
/// lines).
struct AlignedBuf {
    region: Region,
    len: usize,
}

impl AlignedBuf {
    /// `huge`: ask for transparent huge pages, which saves TLB misses when walking down the
    /// columns of a large matrix (numpy does the same for its large arrays); the small per-thread
    /// packing buffers stay on base pages.
    fn new(len: usize, huge: bool) -> Result<Self, BenchError> {
        let bytes = len.checked_mul(8).ok_or_else(|| alloc_error(len))?;
        let pages = if huge { Pages::Huge } else { Pages::Small };
        // An anonymous mapping reads as zeros, as the solver's buffers must start.
        let region = Region::new(bytes, pages).map_err(|_| alloc_error(len))?;
        Ok(Self { region, len })
    }
    fn as_mut_slice(&mut self) -> &mut [f64] {
        &mut self.region.as_f64_mut()[..self.len]
    }
    #[cfg(test)]
    fn as_slice_for_test(&self) -> &[f64] {
        &self.region.as_f64()[..self.len]
    }
    fn as_mut_ptr(&mut self) -> *mut f64 {
        self.as_mut_slice().as_mut_ptr()
    }
}

/// HPL's scaled residual `‖Ax − b‖∞ / (ε (‖A‖∞ ‖x‖∞ + ‖b‖∞) n)` with `a` column-major. A NaN
/// anywhere makes it NaN, which fails the `< 16` test.
fn scaled_residual(a: &[f64], n: usize, x: &[f64], b: &[f64]) -> f64 {
    let mut r = b.to_vec();
    let mut row_sums = vec![0.0f64; n];
    for (col, &xj) in a.chunks_exact(n).zip(x) {
        for ((ri, si), &v) in r.iter_mut().zip(row_sums.iter_mut()).zip(col) {
            *ri -= v * xj;
            *si += v.abs();
        }
    }
    norm_inf(&r) / (f64::EPSILON * (norm_inf(&row_sums) * norm_inf(x) + norm_inf(b)) * n as f64)
}

/// `max |v[i]|`, NaN if any element is NaN (`f64::max` would skip it).
fn norm_inf(v: &[f64]) -> f64 {
    v.iter().fold(0.0f64, |m, e| {
        if e.is_nan() || e.abs() > m {
            e.abs()
        } else {
            m
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Micro-kernels

/// Which implementation of the block operations a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    /// faer's `matmul` and triangular solve on the blocks (any target).
    Faer,
    /// Packed 8 × 6 AVX2 + FMA micro-kernel.
    Avx2,
    /// Packed 24 × 8 AVX-512 micro-kernel.
    Avx512,
    /// Packed 4 × 4 scalar micro-kernel: slow, only for testing the packed path anywhere.
    #[cfg(test)]
    Scalar,
}

impl Backend {
    fn best() -> Self {
        if avx512::available() {
            Backend::Avx512
        } else if avx2_available() {
            Backend::Avx2
        } else {
            Backend::Faer
        }
    }
}

fn avx2_available() -> bool {
    hostbench_core::isa::avx2_fma()
}

/// A register-tile GEMM kernel and the matching dot product.
///
/// Packed operands: the "A" side in panels of `MR` rows stored k-major (`MR` values per k step),
/// the "B" side in panels of `NR` columns stored k-major (`NR` values per k step), both
/// zero-padded to whole panels and 64-byte aligned.
trait Micro {
    /// False for the faer fallback, which works on the unpacked blocks.
    const PACKED: bool;
    const MR: usize;
    const NR: usize;

    /// `C[..mr, ..nr] −= A·B` over `kc` k steps, or `C = −A·B` when `store`; `C` column-major
    /// with stride `ldc`. `pf`, when not null, is the next B panel, fetched into L1 meanwhile.
    ///
    /// # Safety
    /// The CPU has the kernel's instruction set; `a` and `b` hold `kc` packed steps (aligned);
    /// `c` is valid for the `mr × nr` tile (`mr ≤ MR`, `nr ≤ NR`) and not accessed concurrently.
    #[allow(clippy::too_many_arguments)] // a BLAS-style micro-kernel signature
    unsafe fn kernel(
        kc: usize,
        a: *const f64,
        b: *const f64,
        c: *mut f64,
        ldc: usize,
        mr: usize,
        nr: usize,
        store: bool,
        pf: *const f64,
    );

    /// `Σ a[i]·b[i]` over the shorter length.
    ///
    /// # Safety
    /// The CPU has the kernel's instruction set.
    unsafe fn dot(a: &[f64], b: &[f64]) -> f64;
}

fn dot_portable(a: &[f64], b: &[f64]) -> f64 {
    // eight partial sums: vectorisable, and more accurate than one long chain
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// The faer fallback: never packs, so it has no micro-kernel.
struct FaerOnly;

impl Micro for FaerOnly {
    const PACKED: bool = false;
    const MR: usize = 8;
    const NR: usize = 8;

    unsafe fn kernel(
        _kc: usize,
        _a: *const f64,
        _b: *const f64,
        _c: *mut f64,
        _ldc: usize,
        _mr: usize,
        _nr: usize,
        _store: bool,
        _pf: *const f64,
    ) {
        // Unreachable: `PACKED` is false, so `update_cols` takes the faer branch.
    }

    unsafe fn dot(a: &[f64], b: &[f64]) -> f64 {
        dot_portable(a, b)
    }
}

#[cfg(test)]
struct Scalar;

#[cfg(test)]
impl Micro for Scalar {
    const PACKED: bool = true;
    const MR: usize = 4;
    const NR: usize = 4;

    unsafe fn kernel(
        kc: usize,
        a: *const f64,
        b: *const f64,
        c: *mut f64,
        ldc: usize,
        mr: usize,
        nr: usize,
        store: bool,
        _pf: *const f64,
    ) {
        let mut acc = [[0.0f64; 4]; 4];
        for kk in 0..kc {
            for (j, col) in acc.iter_mut().enumerate() {
                for (i, v) in col.iter_mut().enumerate() {
                    // SAFETY: the packed panels hold kc steps of MR and NR values.
                    *v += unsafe { *a.add(kk * 4 + i) * *b.add(kk * 4 + j) };
                }
            }
        }
        for (j, col) in acc.iter().enumerate().take(nr) {
            for (i, v) in col.iter().enumerate().take(mr) {
                // SAFETY: the tile is inside C (caller's contract).
                unsafe {
                    let p = c.add(j * ldc + i);
                    *p = if store { -v } else { *p - v };
                }
            }
        }
    }

    unsafe fn dot(a: &[f64], b: &[f64]) -> f64 {
        dot_portable(a, b)
    }
}

#[cfg(target_arch = "x86_64")]
struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Micro for Avx2 {
    const PACKED: bool = true;
    const MR: usize = 8;
    const NR: usize = 6;

    unsafe fn kernel(
        kc: usize,
        a: *const f64,
        b: *const f64,
        c: *mut f64,
        ldc: usize,
        mr: usize,
        nr: usize,
        store: bool,
        pf: *const f64,
    ) {
        // SAFETY: forwarded from the caller.
        unsafe { avx2_kernel(kc, a, b, c, ldc, mr, nr, store, pf) }
    }

    unsafe fn dot(a: &[f64], b: &[f64]) -> f64 {
        // SAFETY: forwarded from the caller.
        unsafe { avx2_dot(a, b) }
    }
}

/// 8 × 6 tile in 12 ymm accumulators, 2 loads of A and 6 broadcasts of B per k step. On
/// Zen 4 (two 256-bit FMA pipes) this reaches the same peak as AVX-512.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)] // fixed-size tile loops unroll
unsafe fn avx2_kernel(
    kc: usize,
    a: *const f64,
    b: *const f64,
    c: *mut f64,
    ldc: usize,
    mr: usize,
    nr: usize,
    store: bool,
    pf: *const f64,
) {
    use std::arch::x86_64::*;
    const MR: usize = 8;
    const NR: usize = 6;
    const MV: usize = MR / 4;
    // SAFETY: the caller guarantees AVX2 + FMA, the packed panels and the C tile (see `Micro`).
    unsafe {
        if !store {
            // C comes from memory far away; ask for it now, it is needed only at the end.
            for j in 0..NR {
                _mm_prefetch::<_MM_HINT_T0>(c.add(j * ldc) as *const i8);
            }
        }
        let mut acc = [[_mm256_setzero_pd(); MV]; NR];
        let (mut a, mut b) = (a, b);
        for kk in 0..kc {
            if !pf.is_null() {
                _mm_prefetch::<_MM_HINT_T0>(pf.add(kk * NR) as *const i8);
            }
            let mut av = [_mm256_setzero_pd(); MV];
            for i in 0..MV {
                av[i] = _mm256_load_pd(a.add(4 * i));
            }
            for j in 0..NR {
                let bj = _mm256_broadcast_sd(&*b.add(j));
                for i in 0..MV {
                    acc[j][i] = _mm256_fmadd_pd(av[i], bj, acc[j][i]);
                }
            }
            a = a.add(MR);
            b = b.add(NR);
        }
        if mr == MR && nr == NR {
            for j in 0..NR {
                for i in 0..MV {
                    let p = c.add(j * ldc + 4 * i);
                    let old = if store {
                        _mm256_setzero_pd()
                    } else {
                        _mm256_loadu_pd(p)
                    };
                    _mm256_storeu_pd(p, _mm256_sub_pd(old, acc[j][i]));
                }
            }
        } else {
            // Edge tile (bottom or right border): go through a small buffer.
            let mut t = [0.0f64; MR * NR];
            for j in 0..NR {
                for i in 0..MV {
                    _mm256_storeu_pd(t.as_mut_ptr().add(j * MR + 4 * i), acc[j][i]);
                }
            }
            for j in 0..nr {
                for i in 0..mr {
                    let p = c.add(j * ldc + i);
                    let old = if store { 0.0 } else { *p };
                    *p = old - t[j * MR + i];
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_dot(a: &[f64], b: &[f64]) -> f64 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    // SAFETY: AVX2 + FMA present (caller); every access is below n.
    unsafe {
        let mut acc = [_mm256_setzero_pd(); 4];
        let mut i = 0;
        while i + 16 <= n {
            for (u, s) in acc.iter_mut().enumerate() {
                let x = _mm256_loadu_pd(pa.add(i + 4 * u));
                *s = _mm256_fmadd_pd(x, _mm256_loadu_pd(pb.add(i + 4 * u)), *s);
            }
            i += 16;
        }
        let s = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
        let mut lanes = [0.0f64; 4];
        _mm256_storeu_pd(lanes.as_mut_ptr(), s);
        let mut sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
        while i < n {
            sum += *pa.add(i) * *pb.add(i);
            i += 1;
        }
        sum
    }
}

/// The AVX-512 kernel (x86-64 only; elsewhere a stub that never reports AVX-512).
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::Micro;
    use std::arch::x86_64::*;

    pub fn available() -> bool {
        hostbench_core::isa::avx512f()
    }

    pub struct Avx512;

    const MV: usize = 3;

    impl Micro for Avx512 {
        const PACKED: bool = true;
        const MR: usize = 8 * MV;
        const NR: usize = 8;

        unsafe fn kernel(
            kc: usize,
            a: *const f64,
            b: *const f64,
            c: *mut f64,
            ldc: usize,
            mr: usize,
            nr: usize,
            store: bool,
            pf: *const f64,
        ) {
            // SAFETY: forwarded from the caller.
            unsafe { kernel(kc, a, b, c, ldc, mr, nr, store, pf) }
        }

        unsafe fn dot(a: &[f64], b: &[f64]) -> f64 {
            // SAFETY: forwarded from the caller.
            unsafe { dot(a, b) }
        }
    }

    /// 24 × 8 tile in 24 zmm accumulators (of 32), 3 loads of A and 8 broadcasts of B per
    /// k step: a B element feeds three FMAs, which keeps the load ports well below the FMA rate.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments, clippy::needless_range_loop)] // fixed-size tile loops
    unsafe fn kernel(
        kc: usize,
        a: *const f64,
        b: *const f64,
        c: *mut f64,
        ldc: usize,
        mr: usize,
        nr: usize,
        store: bool,
        pf: *const f64,
    ) {
        const MR: usize = 8 * MV;
        const NR: usize = 8;
        // SAFETY: the caller guarantees AVX-512F, the packed panels and the C tile.
        unsafe {
            if !store {
                // C comes from memory far away; ask for it now, it is needed only at the end.
                for j in 0..NR {
                    for i in 0..MV {
                        _mm_prefetch::<_MM_HINT_T0>(c.add(j * ldc + 8 * i) as *const i8);
                    }
                }
            }
            let mut acc = [[_mm512_setzero_pd(); MV]; NR];
            let (mut a, mut b) = (a, b);
            for kk in 0..kc {
                if !pf.is_null() {
                    // The next B panel comes from L3; fetching one line of it per k step here
                    // saves the stall on the first call that uses it.
                    _mm_prefetch::<_MM_HINT_T0>(pf.add(kk * NR) as *const i8);
                }
                let mut av = [_mm512_setzero_pd(); MV];
                for i in 0..MV {
                    av[i] = _mm512_load_pd(a.add(8 * i));
                }
                for j in 0..NR {
                    let bj = _mm512_set1_pd(*b.add(j));
                    for i in 0..MV {
                        acc[j][i] = _mm512_fmadd_pd(av[i], bj, acc[j][i]);
                    }
                }
                a = a.add(MR);
                b = b.add(NR);
            }
            let zero = _mm512_setzero_pd();
            if mr == MR && nr == NR {
                for j in 0..NR {
                    for i in 0..MV {
                        let p = c.add(j * ldc + 8 * i);
                        let old = if store { zero } else { _mm512_loadu_pd(p) };
                        _mm512_storeu_pd(p, _mm512_sub_pd(old, acc[j][i]));
                    }
                }
            } else {
                // Edge tile: masked loads and stores cover the rows, a test the columns.
                let mut masks = [0u8; MV];
                for i in 0..MV {
                    let lo = 8 * i;
                    masks[i] = if mr >= lo + 8 {
                        0xff
                    } else if mr <= lo {
                        0
                    } else {
                        ((1u32 << (mr - lo)) - 1) as u8
                    };
                }
                for j in 0..NR {
                    if j < nr {
                        for i in 0..MV {
                            let p = c.add(j * ldc + 8 * i);
                            let old = if store {
                                zero
                            } else {
                                _mm512_maskz_loadu_pd(masks[i], p)
                            };
                            _mm512_mask_storeu_pd(p, masks[i], _mm512_sub_pd(old, acc[j][i]));
                        }
                    }
                }
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn dot(a: &[f64], b: &[f64]) -> f64 {
        let n = a.len().min(b.len());
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        // SAFETY: AVX-512F present (caller); every access is below n.
        unsafe {
            let mut acc = [_mm512_setzero_pd(); 4];
            let mut i = 0;
            while i + 32 <= n {
                for (u, s) in acc.iter_mut().enumerate() {
                    let x = _mm512_loadu_pd(pa.add(i + 8 * u));
                    *s = _mm512_fmadd_pd(x, _mm512_loadu_pd(pb.add(i + 8 * u)), *s);
                }
                i += 32;
            }
            while i + 8 <= n {
                let x = _mm512_loadu_pd(pa.add(i));
                acc[0] = _mm512_fmadd_pd(x, _mm512_loadu_pd(pb.add(i)), acc[0]);
                i += 8;
            }
            if i < n {
                let m = ((1u32 << (n - i)) - 1) as u8;
                let x = _mm512_maskz_loadu_pd(m, pa.add(i));
                acc[1] = _mm512_fmadd_pd(x, _mm512_maskz_loadu_pd(m, pb.add(i)), acc[1]);
            }
            let s = _mm512_add_pd(_mm512_add_pd(acc[0], acc[1]), _mm512_add_pd(acc[2], acc[3]));
            _mm512_reduce_add_pd(s)
        }
    }

    /// Factor and solve with this kernel.
    pub(super) fn factor_and_solve(
        sys: &mut super::System,
        threads: usize,
    ) -> Result<(Vec<f64>, f64), super::BenchError> {
        if !available() {
            return Err(super::BenchError::unsupported("this CPU has no AVX-512"));
        }
        super::factor_and_solve_with::<Avx512>(sys, threads)
    }
}

/// Stand-in for compilers too old for the AVX-512 intrinsics, and for other architectures:
/// it never reports AVX-512, so the run picks AVX2 or faer.
#[allow(unused_macros)] // unused where the real module is built
macro_rules! avx512_stub {
    () => {
        pub fn available() -> bool {
            false
        }

        pub(super) fn factor_and_solve(
            _sys: &mut super::System,
            _threads: usize,
        ) -> Result<(Vec<f64>, f64), super::BenchError> {
            Err(super::BenchError::unsupported(
                "the AVX-512 linpack kernel exists on x86-64 only",
            ))
        }
    };
}

#[cfg(not(target_arch = "x86_64"))]
mod avx512 {
    avx512_stub!();
}

// ---------------------------------------------------------------------------------------------
// The parallel factorisation

/// Factor `sys.a` in place and solve for `sys.b` with `backend`; returns `x` and the wall time
/// of the factorisation plus the solve.
fn factor_and_solve(
    sys: &mut System,
    threads: usize,
    backend: Backend,
) -> Result<(Vec<f64>, f64), BenchError> {
    match backend {
        Backend::Faer => factor_and_solve_with::<FaerOnly>(sys, threads),
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 if avx2_available() => factor_and_solve_with::<Avx2>(sys, threads),
        Backend::Avx2 => Err(BenchError::unsupported("this CPU has no AVX2 + FMA")),
        Backend::Avx512 => avx512::factor_and_solve(sys, threads),
        #[cfg(test)]
        Backend::Scalar => factor_and_solve_with::<Scalar>(sys, threads),
    }
}

/// A barrier that can be poisoned: a worker that panics releases the others instead of leaving
/// them waiting forever. `wait` returns false once poisoned.
struct Barrier {
    parties: usize,
    generation: AtomicUsize,
    state: Mutex<BarrierState>,
    cv: Condvar,
}

struct BarrierState {
    arrived: usize,
    poisoned: bool,
}

impl Barrier {
    fn new(parties: usize) -> Self {
        Self {
            parties,
            generation: AtomicUsize::new(0),
            state: Mutex::new(BarrierState {
                arrived: 0,
                poisoned: false,
            }),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BarrierState> {
        // A panic while holding this lock cannot leave the counters inconsistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait(&self) -> bool {
        let mut st = self.lock();
        if st.poisoned {
            return false;
        }
        let gen = self.generation.load(Ordering::Acquire);
        st.arrived += 1;
        if st.arrived == self.parties {
            st.arrived = 0;
            self.generation
                .store(gen.wrapping_add(1), Ordering::Release);
            self.cv.notify_all();
            return true;
        }
        drop(st);
        // Steps are milliseconds apart and the others are usually just behind: spin briefly
        // before sleeping, which costs a futex wake-up on every step.
        for _ in 0..1000 {
            if self.generation.load(Ordering::Acquire) != gen {
                return true;
            }
            std::hint::spin_loop();
        }
        let mut st = self.lock();
        while self.generation.load(Ordering::Acquire) == gen && !st.poisoned {
            st = self.cv.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        self.generation.load(Ordering::Acquire) != gen
    }

    fn poison(&self) {
        self.lock().poisoned = true;
        self.cv.notify_all();
    }
}

/// Everything the worker threads share.
///
/// The matrix is row-major (`A(i, j)` at `a[i * lda + j]`). Within one step of the
/// factorisation every thread writes a disjoint set of columns (thread 0 the next panel, the
/// others the chunks they claimed), reads only what no one writes in that step (the current
/// panel, its packed copies and its pivots), and steps are separated by the barrier.
struct Shared {
    a: *mut f64,
    lda: usize,
    n: usize,
    threads: usize,
    /// LAPACK-style transpositions: row `i` was swapped with row `ipiv[i] ≥ i`.
    ipiv: Vec<AtomicUsize>,
    /// The same interchanges of panel p as a gather: row `k + r` of the result is row
    /// `src_top[k + r]` of the input for r < kb ...
    src_top: Vec<AtomicUsize>,
    /// ... and the rows below the panel that change get a former panel row:
    /// `mv_dst[k + i] ← mv_src[k + i]` for i < `mv_cnt[p]`.
    mv_dst: Vec<AtomicUsize>,
    mv_src: Vec<AtomicUsize>,
    mv_cnt: Vec<AtomicUsize>,
    /// Packed `L₂₁ᵀ` of panels p (p % 2), double-buffered: thread 0 packs the next panel while
    /// the others read the current one.
    lpack: [*mut f64; 2],
    /// Packed `−L₁₁⁻ᵀ`, double-buffered the same way.
    linv: [*mut f64; 2],
    /// Next unclaimed column chunk of each step.
    counters: Vec<AtomicUsize>,
    barrier: Barrier,
    /// The right-hand side, overwritten with the solution.
    x: *mut f64,
}

// SAFETY: the raw pointers are only dereferenced under the ownership rules documented on
// `Shared` (disjoint columns or rows per thread within a phase, barriers between phases); the
// atomics carry the pivots, and the barrier orders the plain memory accesses between phases.
unsafe impl Sync for Shared {}

impl Shared {
    /// Pointer to `A(i, j)`.
    ///
    /// # Safety
    /// `i < n` and `j ≤ lda`.
    unsafe fn at(&self, i: usize, j: usize) -> *mut f64 {
        // SAFETY: inside the allocation by the caller's bounds.
        unsafe { self.a.add(i * self.lda + j) }
    }

    /// Row-major view of the block at (r, c).
    ///
    /// # Safety
    /// In range, and no thread writes the block while the view lives.
    unsafe fn view<'a>(&self, r: usize, c: usize, nr: usize, nc: usize) -> MatRef<'a, f64> {
        // SAFETY: forwarded from the caller.
        unsafe { MatRef::from_raw_parts(self.at(r, c), nr, nc, self.lda as isize, 1) }
    }

    /// Mutable row-major view of the block at (r, c).
    ///
    /// # Safety
    /// In range, and this thread owns the block while the view lives.
    unsafe fn view_mut<'a>(&self, r: usize, c: usize, nr: usize, nc: usize) -> MatMut<'a, f64> {
        // SAFETY: forwarded from the caller.
        unsafe { MatMut::from_raw_parts_mut(self.at(r, c), nr, nc, self.lda as isize, 1) }
    }

    fn get(v: &[AtomicUsize], i: usize) -> usize {
        v[i].load(Ordering::Relaxed)
    }

    fn set(v: &[AtomicUsize], i: usize, value: usize) {
        v[i].store(value, Ordering::Relaxed);
    }
}

/// Thread 0's private workspace for factoring panels.
struct PanelScratch {
    perm: Vec<usize>,
    perm_inv: Vec<usize>,
    /// The row order while replaying faer's permutation as transpositions, and its inverse.
    order: Vec<usize>,
    place: Vec<usize>,
    targets: Vec<usize>,
    /// Column-major copy of the panel, stride `lds`.
    s: AlignedBuf,
    lds: usize,
    inv: AlignedBuf,
    mem: MemBuffer,
}

fn panel_params() -> PartialPivLuParams {
    // faer's default recursion threshold is 16; 8 measured a little faster on tall panels.
    PartialPivLuParams {
        recursion_threshold: 8,
        ..<PartialPivLuParams as Auto<f64>>::auto()
    }
}

/// Vectors of `len` atomics (pivot bookkeeping shared between the threads).
fn atomics(len: usize) -> Result<Vec<AtomicUsize>, BenchError> {
    let mut v = try_vec(len)?;
    v.extend((0..len).map(|_| AtomicUsize::new(0)));
    Ok(v)
}

fn zeros(len: usize) -> Result<Vec<usize>, BenchError> {
    let mut v = try_vec(len)?;
    v.resize(len, 0);
    Ok(v)
}

fn factor_and_solve_with<K: Micro>(
    sys: &mut System,
    threads: usize,
) -> Result<(Vec<f64>, f64), BenchError> {
    let n = sys.n;
    let npan = n.div_ceil(NB);
    let (lpack_len, linv_len, apack_len) = if K::PACKED {
        (
            n.next_multiple_of(K::NR) * NB,
            NB.next_multiple_of(K::NR) * NB,
            CHUNK.max(NB).next_multiple_of(K::MR) * NB,
        )
    } else {
        (0, 0, 0)
    };
    let mut lpacks = [
        AlignedBuf::new(lpack_len, true)?,
        AlignedBuf::new(lpack_len, true)?,
    ];
    let mut linvs = [
        AlignedBuf::new(linv_len, false)?,
        AlignedBuf::new(linv_len, false)?,
    ];
    let mut apacks = try_vec(threads)?;
    for _ in 0..threads {
        apacks.push(AlignedBuf::new(apack_len, false)?);
    }
    let lds = n.next_multiple_of(8);
    let req = lu_in_place_scratch::<usize, f64>(n, NB.min(n), Par::Seq, Spec::new(panel_params()));
    let mem = MemBuffer::try_new(req).map_err(|_| alloc_error(n))?;
    let ps = PanelScratch {
        perm: zeros(n)?,
        perm_inv: zeros(n)?,
        order: zeros(n)?,
        place: zeros(n)?,
        targets: try_vec(NB)?,
        s: AlignedBuf::new(lds * NB, true)?,
        lds,
        inv: AlignedBuf::new(NB * NB, false)?,
        mem,
    };
    let mut x = try_vec(n)?;
    x.extend_from_slice(&sys.b);
    let sh = Shared {
        a: sys.a.as_mut_ptr(),
        lda: sys.lda,
        n,
        threads,
        ipiv: atomics(n)?,
        src_top: atomics(n)?,
        mv_dst: atomics(n)?,
        mv_src: atomics(n)?,
        mv_cnt: atomics(npan)?,
        lpack: [lpacks[0].as_mut_ptr(), lpacks[1].as_mut_ptr()],
        linv: [linvs[0].as_mut_ptr(), linvs[1].as_mut_ptr()],
        counters: atomics(npan)?,
        barrier: Barrier::new(threads),
        x: x.as_mut_ptr(),
    };
    warm_up_faer();

    let order = affinity::placement_order();
    let gate = Barrier::new(threads + 1);
    let mut ps = Some(ps);
    let seconds = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        let mut spawn_error = None;
        for (tid, apack) in apacks.iter_mut().enumerate() {
            let (sh, gate) = (&sh, &gate);
            let ps = if tid == 0 { ps.take() } else { None };
            let cpu = affinity::cpu_for_thread(&order, tid);
            let spawned = std::thread::Builder::new()
                .name(format!("linpack-{tid}"))
                .spawn_scoped(scope, move || {
                    // One worker per CPU in the core crate's placement order (DESIGN.md §5);
                    // best effort, an unpinned worker still computes the right answer.
                    let _ = affinity::pin_current_thread(cpu);
                    if !gate.wait() {
                        return true;
                    }
                    let run = || worker::<K>(sh, tid, ps, apack.as_mut_slice());
                    let ok = catch_unwind(AssertUnwindSafe(run)).is_ok();
                    if !ok {
                        sh.barrier.poison();
                    }
                    ok
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    spawn_error = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = spawn_error {
            gate.poison();
            for h in handles {
                let _ = h.join();
            }
            return Err(BenchError::Failed(format!(
                "linpack: cannot start {threads} threads: {e}"
            )));
        }
        let t0 = Instant::now();
        gate.wait();
        let mut ok = true;
        for h in handles {
            ok &= h.join().unwrap_or(false);
        }
        let seconds = t0.elapsed().as_secs_f64();
        if ok {
            Ok(seconds)
        } else {
            Err(BenchError::Failed(
                "linpack: a worker thread panicked".into(),
            ))
        }
    })?;
    Ok((x, seconds))
}

/// faer sizes its GEMM blocking from the cache sizes in sysfs the first time it multiplies;
/// do that before the clock starts.
fn warm_up_faer() {
    let mut m = faer::Mat::<f64>::zeros(64, 64);
    let id = faer::Mat::<f64>::identity(64, 64);
    faer::linalg::matmul::matmul(
        m.as_mut(),
        Accum::Add,
        id.as_ref(),
        id.as_ref(),
        1.0,
        Par::Seq,
    );
}

fn worker<K: Micro>(sh: &Shared, tid: usize, mut ps: Option<PanelScratch>, apack: &mut [f64]) {
    let n = sh.n;
    let npan = n.div_ceil(NB);
    if let Some(ps) = ps.as_mut() {
        // SAFETY: the other threads wait at the barrier below.
        unsafe { factor_panel::<K>(sh, 0, ps) };
    }
    if !sh.barrier.wait() {
        return;
    }
    for p in 0..npan {
        let k = p * NB;
        let rest0 = k + NB.min(n - k);
        let next_end = rest0 + NB.min(n - rest0);
        if let Some(ps) = ps.as_mut() {
            if rest0 < n {
                // Look-ahead: the next panel's columns first, then its factorisation, while
                // the other threads work on the columns after it.
                // SAFETY: thread 0 alone owns columns [rest0, next_end) in this step.
                unsafe {
                    update_cols::<K>(sh, p, rest0, next_end, apack);
                    factor_panel::<K>(sh, p + 1, ps);
                }
            }
        }
        if next_end < n {
            // Wide chunks reuse each packed L21 panel more; at least ~4 per thread keep the
            // threads busy until the end of the step.
            let width = ((n - next_end) / (4 * sh.threads))
                .next_multiple_of(K::MR)
                .clamp(4 * K::MR, CHUNK);
            let nchunks = (n - next_end).div_ceil(width);
            loop {
                let c = sh.counters[p].fetch_add(1, Ordering::Relaxed);
                if c >= nchunks {
                    break;
                }
                let j0 = next_end + c * width;
                // SAFETY: the counter hands chunk c to exactly one thread.
                unsafe { update_cols::<K>(sh, p, j0, (j0 + width).min(n), apack) };
            }
        }
        if !sh.barrier.wait() {
            return;
        }
    }
    // SAFETY: the factorisation is complete on all threads (last barrier).
    unsafe { solve::<K>(sh, tid) };
}

/// Factor panel p (rows [k, n), columns [k, k + kb)) in a column-major copy, record its
/// interchanges, prepare the packed operands of the updates and write the panel back.
///
/// # Safety
/// The calling thread owns the panel's columns, and panel buffers p % 2, in this step.
unsafe fn factor_panel<K: Micro>(sh: &Shared, p: usize, ps: &mut PanelScratch) {
    let n = sh.n;
    let k = p * NB;
    let kb = NB.min(n - k);
    let m = n - k;
    let lds = ps.lds;
    let s = ps.s.as_mut_ptr();
    // SAFETY: the panel is owned (caller); S holds lds × NB values.
    unsafe { copy_panel(sh, k, m, kb, s, lds, true) };
    // SAFETY: S is m × kb column-major with stride lds and nothing else refers to it.
    let mut panel = unsafe { MatMut::from_raw_parts_mut(s, m, kb, 1, lds as isize) };
    // faer reports a permutation, never a failure: a zero pivot gives inf/NaN, which the
    // residual check then rejects.
    let _ = lu_in_place(
        panel.as_mut(),
        &mut ps.perm[..m],
        &mut ps.perm_inv[..m],
        Par::Seq,
        MemStack::new(&mut ps.mem),
        Spec::new(panel_params()),
    );

    // Replay faer's permutation as the transpositions that produce it, in order: that is the
    // LAPACK pivot vector the solve needs, and the gather/move lists of the updates.
    let order = &mut ps.order[..m];
    let place = &mut ps.place[..m];
    for (i, (o, pl)) in order.iter_mut().zip(place.iter_mut()).enumerate() {
        *o = i;
        *pl = i;
    }
    ps.targets.clear();
    for i in 0..kb {
        let want = ps.perm[i];
        let at = place[want];
        let here = order[i];
        order[i] = want;
        order[at] = here;
        place[here] = at;
        place[want] = i;
        Shared::set(&sh.ipiv, k + i, k + at);
        if at >= kb {
            ps.targets.push(at);
        }
    }
    for (r, &src) in order[..kb].iter().enumerate() {
        Shared::set(&sh.src_top, k + r, k + src);
    }
    // A row below the panel changes only if a pivot was taken from it, and then it receives a
    // former panel row. Sorted, the moves walk down the matrix.
    ps.targets.sort_unstable();
    ps.targets.dedup();
    for (idx, &t) in ps.targets.iter().enumerate() {
        Shared::set(&sh.mv_dst, k + idx, k + t);
        Shared::set(&sh.mv_src, k + idx, k + order[t]);
    }
    Shared::set(&sh.mv_cnt, p, ps.targets.len());

    if K::PACKED {
        // −L₁₁⁻ᵀ in NR-column panels: U₁₂ᵀ = A₁₂ᵀ L₁₁⁻ᵀ then runs on the micro-kernel. Forming
        // the inverse costs kb³/3 flops once per panel, against kb² per column it saves.
        let inv = &mut ps.inv.as_mut_slice()[..kb * kb];
        let mut im = MatMut::from_column_major_slice_mut(inv, kb, kb);
        for j in 0..kb {
            for i in 0..kb {
                im[(i, j)] = if i == j { 1.0 } else { 0.0 };
            }
        }
        let l11 = panel.as_ref().submatrix(0, 0, kb, kb);
        solve_unit_lower_triangular_in_place(l11, im.as_mut(), Par::Seq);
        let dst = sh.linv[p % 2];
        let nr = K::NR;
        for q in 0..kb.div_ceil(nr) {
            for kk in 0..kb {
                for cc in 0..nr {
                    let c = q * nr + cc;
                    let v = if c < kb { -im[(c, kk)] } else { 0.0 };
                    // SAFETY: linv holds ceil(NB/NR)·NR·NB values; buffer p % 2 is ours.
                    unsafe { *dst.add((q * kb + kk) * nr + cc) = v };
                }
            }
        }
        // L₂₁ᵀ in NR-column panels (rows of L₂₁ become columns): the B operand of the update.
        let dst = sh.lpack[p % 2];
        let m2 = m - kb;
        for q in 0..m2.div_ceil(nr) {
            let i0 = kb + q * nr;
            let rows = nr.min(m - i0);
            for kk in 0..kb {
                // SAFETY: lpack holds ceil(n/NR)·NR·NB values; S covers m × kb.
                unsafe {
                    let d = dst.add((q * kb + kk) * nr);
                    core::ptr::copy_nonoverlapping(s.add(i0 + kk * lds), d, rows);
                    for ii in rows..nr {
                        *d.add(ii) = 0.0;
                    }
                }
            }
        }
    }
    // SAFETY: as for the copy in.
    unsafe { copy_panel(sh, k, m, kb, s, lds, false) };
}

/// Copy the panel between A (row-major) and S (column-major): `S[r + c·lds] = A(k + r, k + c)`
/// when `into_s`, the reverse otherwise. Eight rows at a time, so S is written a cache line at
/// a time and A is read eight rows in parallel.
///
/// # Safety
/// The panel is owned by the caller and S holds `lds × kb` values.
unsafe fn copy_panel(
    sh: &Shared,
    k: usize,
    m: usize,
    kb: usize,
    s: *mut f64,
    lds: usize,
    into_s: bool,
) {
    let mut r0 = 0;
    while r0 < m {
        let rb = 8.min(m - r0);
        for c in 0..kb {
            for rr in 0..rb {
                // SAFETY: r0 + rr < m, c < kb: inside both the panel and S.
                unsafe {
                    let ap = sh.at(k + r0 + rr, k + c);
                    let sp = s.add(r0 + rr + c * lds);
                    if into_s {
                        *sp = *ap;
                    } else {
                        *ap = *sp;
                    }
                }
            }
        }
        r0 += rb;
    }
}

/// Pack rows `src(kk)`, kk < kb, columns [j0, j0 + w) of A into MR-column panels (k-major).
///
/// # Safety
/// The rows and columns are in range; `dst` holds `ceil(w / MR)·MR·kb` values.
unsafe fn pack_rows<K: Micro>(
    dst: *mut f64,
    sh: &Shared,
    kb: usize,
    j0: usize,
    w: usize,
    src: impl Fn(usize) -> usize,
) {
    let mr = K::MR;
    for kk in 0..kb {
        // SAFETY: in range by the caller's contract.
        unsafe {
            let row = sh.at(src(kk), j0);
            for ip in 0..w.div_ceil(mr) {
                let c0 = ip * mr;
                let cols = mr.min(w - c0);
                let d = dst.add((ip * kb + kk) * mr);
                core::ptr::copy_nonoverlapping(row.add(c0), d, cols);
                for c in cols..mr {
                    *d.add(c) = 0.0;
                }
            }
        }
    }
}

/// Apply panel p to columns [j0, j1): row interchanges, `U₁₂ = L₁₁⁻¹ A₁₂`, and the trailing
/// update `A₂₂ −= L₂₁ U₁₂`.
///
/// # Safety
/// The calling thread owns columns [j0, j1) in this step, and `apack` has room for the chunk.
unsafe fn update_cols<K: Micro>(sh: &Shared, p: usize, j0: usize, j1: usize, apack: &mut [f64]) {
    let n = sh.n;
    let k = p * NB;
    let kb = NB.min(n - k);
    let w = j1 - j0;
    let m2 = n - k - kb;
    if !K::PACKED {
        for i in k..k + kb {
            let t = Shared::get(&sh.ipiv, i);
            if t != i {
                // SAFETY: rows i < t are distinct; the columns are ours.
                unsafe { core::ptr::swap_nonoverlapping(sh.at(i, j0), sh.at(t, j0), w) };
            }
        }
        // SAFETY: L₁₁ and L₂₁ are read-only in this step; the column block is ours.
        unsafe {
            let u12 = sh.view_mut(k, j0, kb, w);
            solve_unit_lower_triangular_in_place(sh.view(k, k, kb, kb), u12, Par::Seq);
            if m2 > 0 {
                faer::linalg::matmul::matmul(
                    sh.view_mut(k + kb, j0, m2, w),
                    Accum::Add,
                    sh.view(k + kb, k, m2, kb),
                    sh.view(k, j0, kb, w),
                    -1.0,
                    Par::Seq,
                );
            }
        }
        return;
    }
    let (mr, nr, lda) = (K::MR, K::NR, sh.lda);
    let nap = w.div_ceil(mr);
    let ap = apack.as_mut_ptr();
    // In the kernel's column-major view the chunk is transposed: C(j, i) = A(i, j) with
    // stride lda, the A operand is U₁₂ᵀ (MR columns of A per panel) and B is L₂₁ᵀ.
    // SAFETY: columns [j0, j1) are ours; the panel rows read below are not written by anyone
    // in this step; the packed buffers of panel p were completed before the last barrier.
    unsafe {
        // Interchanges as a gather: the new top rows go straight into the packed buffer, then
        // the rows below that change receive the still untouched former top rows.
        pack_rows::<K>(ap, sh, kb, j0, w, |kk| Shared::get(&sh.src_top, k + kk));
        for idx in 0..Shared::get(&sh.mv_cnt, p) {
            let dst = Shared::get(&sh.mv_dst, k + idx);
            let src = Shared::get(&sh.mv_src, k + idx);
            core::ptr::copy_nonoverlapping(sh.at(src, j0), sh.at(dst, j0), w);
        }
        // U₁₂ᵀ = (swapped A₁₂)ᵀ · L₁₁⁻ᵀ, written over the top rows. L₁₁⁻ᵀ is upper triangular,
        // so panel q of it only needs the first (q + 1)·NR steps.
        let li = sh.linv[p % 2] as *const f64;
        for q in 0..kb.div_ceil(nr) {
            let ncols = nr.min(kb - q * nr);
            for ip in 0..nap {
                K::kernel(
                    q * nr + ncols,
                    ap.add(ip * mr * kb),
                    li.add(q * nr * kb),
                    sh.at(k + q * nr, j0 + ip * mr),
                    lda,
                    mr.min(w - ip * mr),
                    ncols,
                    true,
                    core::ptr::null(),
                );
            }
        }
        if m2 == 0 {
            return;
        }
        pack_rows::<K>(ap, sh, kb, j0, w, |kk| k + kk);
        // A₂₂ −= L₂₁ U₁₂: each packed L₂₁ᵀ panel (NR rows of A) is loaded once into L1 and
        // used against the whole chunk, whose packed U₁₂ᵀ stays in L2.
        let lp = sh.lpack[p % 2] as *const f64;
        let njr = m2.div_ceil(nr);
        let prefetch_at = 1.min(nap - 1);
        for jr in 0..njr {
            let b = lp.add(jr * nr * kb);
            let rows = nr.min(m2 - jr * nr);
            for ip in 0..nap {
                let pf = if ip == prefetch_at && jr + 1 < njr {
                    b.add(nr * kb)
                } else {
                    core::ptr::null()
                };
                K::kernel(
                    kb,
                    ap.add(ip * mr * kb),
                    b,
                    sh.at(k + kb + jr * nr, j0 + ip * mr),
                    lda,
                    mr.min(w - ip * mr),
                    rows,
                    false,
                    pf,
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The solve

/// Rows [lo, hi) split evenly: this thread's share.
fn share(tid: usize, threads: usize, lo: usize, hi: usize) -> (usize, usize) {
    let len = hi - lo;
    (lo + len * tid / threads, lo + len * (tid + 1) / threads)
}

/// `L y = P b` then `U x = y`, block by block. The interchanges were never applied to earlier
/// panels' L, so they are applied to x as the forward substitution reaches them (LINPACK's
/// `dgesl` order). Thread 0 solves each diagonal block; the matrix–vector product with the rest
/// of the block column is split by rows over all threads.
///
/// # Safety
/// Called by every worker once the factorisation is complete. x is written by thread 0 alone
/// (diagonal blocks) or by each thread in its own rows, with barriers between the phases.
unsafe fn solve<K: Micro>(sh: &Shared, tid: usize) {
    let (n, lda, x) = (sh.n, sh.lda, sh.x);
    let npan = n.div_ceil(NB);
    // SAFETY (both closures): the factored matrix is read-only now, and the x block read is
    // final and not written in the phase that reads it.
    let row = |i: usize, j0: usize, j1: usize| unsafe {
        core::slice::from_raw_parts(sh.a.add(i * lda + j0), j1 - j0)
    };
    let xs = |i0: usize, i1: usize| unsafe { core::slice::from_raw_parts(x.add(i0), i1 - i0) };
    // SAFETY (dot): the backend was chosen after detecting its instruction set.
    let dot = |a: &[f64], b: &[f64]| unsafe { K::dot(a, b) };
    for p in 0..npan {
        let k = p * NB;
        let kb = NB.min(n - k);
        if tid == 0 {
            for i in k..k + kb {
                // SAFETY: thread 0 owns x in this phase.
                unsafe { core::ptr::swap(x.add(i), x.add(Shared::get(&sh.ipiv, i))) };
            }
            for r in 1..kb {
                let d = dot(row(k + r, k, k + r), xs(k, k + r));
                // SAFETY: as above.
                unsafe { *x.add(k + r) -= d };
            }
        }
        if !sh.barrier.wait() {
            return;
        }
        let (lo, hi) = share(tid, sh.threads, k + kb, n);
        for i in lo..hi {
            let d = dot(row(i, k, k + kb), xs(k, k + kb));
            // SAFETY: row i is in this thread's share.
            unsafe { *x.add(i) -= d };
        }
        if !sh.barrier.wait() {
            return;
        }
    }
    for p in (0..npan).rev() {
        let k = p * NB;
        let kb = NB.min(n - k);
        if tid == 0 {
            for i in (k..k + kb).rev() {
                let d = dot(row(i, i + 1, k + kb), xs(i + 1, k + kb));
                // SAFETY: thread 0 owns x in this phase; A(i, i) is in range.
                unsafe { *x.add(i) = (*x.add(i) - d) / *sh.at(i, i) };
            }
        }
        if !sh.barrier.wait() {
            return;
        }
        let (lo, hi) = share(tid, sh.threads, 0, k);
        for i in lo..hi {
            let d = dot(row(i, k, k + kb), xs(k, k + kb));
            // SAFETY: row i is in this thread's share.
            unsafe { *x.add(i) -= d };
        }
        if !sh.barrier.wait() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::linalg::solvers::Solve;

    fn cfg(n: usize, threads: usize) -> LinpackConfig {
        LinpackConfig {
            n,
            threads,
            seed: 7,
        }
    }

    /// Every backend this machine can run, plus the portable scalar one for the packed path.
    fn backends() -> Vec<Backend> {
        let mut v = vec![Backend::Faer, Backend::Scalar];
        if avx2_available() {
            v.push(Backend::Avx2);
        }
        if avx512::available() {
            v.push(Backend::Avx512);
        }
        v
    }

    fn max_abs(v: impl IntoIterator<Item = f64>) -> f64 {
        v.into_iter().fold(0.0, |m, e| m.max(e.abs()))
    }

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

    #[test]
    fn every_backend_solves_across_panel_boundaries() {
        // 601 = 2 full panels and a ragged one: partial panels, edge tiles, the look-ahead and
        // the chunk queue all take part.
        for backend in backends() {
            for threads in [1, 3] {
                let out = run_with(&cfg(601, threads), backend).unwrap();
                assert!(
                    out.passed,
                    "{backend:?}, {threads} threads: residual {}",
                    out.residual
                );
            }
        }
    }

    #[test]
    fn every_backend_matches_faers_own_solve() {
        let n = 300;
        let sys = System::generate(&cfg(n, 1)).unwrap();
        let a = MatRef::from_column_major_slice(&sys.a0, n, n).to_owned();
        let b = faer::Mat::from_fn(n, 1, |i, _| sys.b[i]);
        let reference = a.partial_piv_lu().solve(&b);
        let scale = max_abs((0..n).map(|i| reference[(i, 0)]));
        for backend in backends() {
            let mut sys = System::generate(&cfg(n, 2)).unwrap();
            let (x, _) = factor_and_solve(&mut sys, 2, backend).unwrap();
            let diff = max_abs((0..n).map(|i| x[i] - reference[(i, 0)]));
            assert!(
                diff / scale < 1e-10,
                "{backend:?}: relative difference {}",
                diff / scale
            );
        }
    }

    #[test]
    fn corrupted_solution_fails_the_residual_check() {
        let n = 200;
        let mut sys = System::generate(&cfg(n, 1)).unwrap();
        let (mut x, _) = factor_and_solve(&mut sys, 1, Backend::Faer).unwrap();
        assert!(scaled_residual(&sys.a0, n, &x, &sys.b) < THRESHOLD);
        // An error of one part in a million in a single entry is far above rounding level.
        x[n / 2] += 1e-6 * max_abs(x.iter().copied());
        let r = scaled_residual(&sys.a0, n, &x, &sys.b);
        assert!(
            r >= THRESHOLD,
            "corrupted solution still passes: residual {r}"
        );
        x[n / 2] = f64::NAN;
        assert!(scaled_residual(&sys.a0, n, &x, &sys.b).is_nan());
    }

    #[test]
    fn flop_count_is_hpls() {
        // 2/3 · 10⁹ + 3/2 · 10⁶
        assert!((hpl_flops(1000) - 668_166_666.666_666_7).abs() < 1e-3);
        assert!((hpl_flops(8000) - (2.0 / 3.0 * 512e9 + 96e6)).abs() < 1.0);
        assert_eq!(hpl_flops(0), 0.0);
    }

    #[test]
    fn default_n_and_memory_needed_are_sane() {
        assert_eq!(default_n(0), 64);
        assert_eq!(default_n(u64::MAX), 8000);
        for avail in [1u64 << 20, 100 << 20, 1 << 30, 2 << 30, 3 << 30, 64 << 30] {
            let n = default_n(avail);
            assert!(
                (64..=8000).contains(&n) && n.is_multiple_of(64),
                "{avail}: {n}"
            );
            if n > 64 {
                assert!(memory_needed(n) <= avail / 2, "{avail}: {n} does not fit");
            }
            if n < 8000 {
                assert!(
                    memory_needed(n + 64) > avail / 2,
                    "{avail}: {n} is not the largest"
                );
            }
        }
        // at least the matrix and its copy, growing with n, saturating instead of overflowing
        assert!(memory_needed(1000) >= 2 * 8 * 1000 * 1000);
        assert!(memory_needed(2000) > memory_needed(1000));
        assert_eq!(memory_needed(usize::MAX), u64::MAX);
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

    #[test]
    fn barrier_releases_waiters_when_poisoned() {
        let b = Barrier::new(2);
        std::thread::scope(|s| {
            let h = s.spawn(|| (b.wait(), b.wait()));
            assert!(b.wait());
            b.poison();
            assert_eq!(h.join().unwrap(), (true, false));
        });
    }
}
