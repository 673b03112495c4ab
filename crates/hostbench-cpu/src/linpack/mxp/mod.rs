//! HPL-MxP (formerly HPL-AI): the mixed-precision solve beside HPL on the Top500's mixed
//! precision list. The LU runs in low precision on the fastest unit the CPU has for it, then
//! GMRES in f64, preconditioned by the low-precision factors, brings the solution to the
//! accuracy HPL demands, checked with HPL's scaled residual (PASSED below 16).
//!
//! What it keeps of HPL-MxP's rules (its reference implementation and the list's rules):
//!
//! - the matrix: off-diagonal entries uniform in `[-0.5, 0.5)`, each diagonal entry the sum of
//!   the absolute values of the others in its row, so `A` is diagonally dominant and the LU
//!   needs no pivoting; `b` uniform in `[-0.5, 0.5)`;
//! - the LU without pivoting on a low-precision copy of `A` (f32 storage), its trailing update
//!   in bf16 with f32 sums where the CPU has a bf16 unit, in f32 elsewhere (`precision`);
//! - refinement by GMRES in f64 against the f64 `A`, until HPL's scaled residual is below a
//!   sixteenth of its threshold, with a bounded number of iterations;
//! - the figure: `(2/3 n³ + 3/2 n²)` over the wall time of the factorisation, the first solve
//!   and the refinement together. Generating the matrix, rounding it to f32 and the final
//!   check are not timed (the reference generates each precision directly).
//!
//! What it does not: one process, no MPI grid, our own generator (the same counter-based
//! stream as the f64 solve).

mod kernels;
mod lu;
mod refine;

use std::time::Instant;

use faer::linalg::triangular_solve::{
    solve_unit_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::{Accum, MatMut, MatRef, Par};
use hostbench_core::BenchError;

use super::system::{
    check_order, hpl_flops, on_workers, original, scaled_residual, Out, THRESHOLD,
};
use super::LinpackConfig;
#[cfg(target_arch = "x86_64")]
use kernels::{Bf16Amx, Bf16Avx512, F32Avx2, F32Avx512};
use kernels::{F32Portable, Gemm};
use lu::Buf;

pub use lu::NB;
pub use refine::{MAX_ITERATIONS, TARGET};

/// The precision of the factorisation's trailing update, the record's `precision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// bf16 products summed in f32.
    Bf16,
    /// f32 throughout.
    F32,
}

impl Precision {
    pub fn name(self) -> &'static str {
        match self {
            Precision::Bf16 => "bf16",
            Precision::F32 => "f32",
        }
    }
}

/// The kernels a run uses: the trailing update's, with an f32 kernel of the same ISA for the
/// triangular multiplies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// AMX bf16 tiles (`tdpbf16ps`).
    AmxBf16,
    /// AVX-512 BF16 (`vdpbf16ps`).
    Avx512Bf16,
    Avx512F32,
    Avx2F32,
    PortableF32,
    /// Portable emulation of the bf16 kernel, to test the bf16 path on any CPU.
    #[cfg(test)]
    PortableBf16,
    /// The AMX kernel with its tile instructions emulated, to test the AMX data path on any
    /// x86-64.
    #[cfg(all(test, target_arch = "x86_64"))]
    EmulatedAmx,
}

impl Unit {
    /// The fastest this CPU has: AMX, else an AVX-512 bf16 unit, else the widest f32 FMA.
    pub fn best() -> Self {
        Self::choose().0
    }

    /// [`Unit::best`], and why a faster unit this CPU has was passed over: each candidate must
    /// pass its exact self-check on this CPU first, and AMX its trial (see `amx_check`), whose
    /// figures the note gives. Decided once per process.
    pub fn choose() -> (Self, Option<String>) {
        static CHOICE: std::sync::OnceLock<(Unit, Option<String>)> = std::sync::OnceLock::new();
        CHOICE.get_or_init(Self::decide).clone()
    }

    /// The units with a vector or matrix kernel this CPU may run, fastest first, each with its
    /// check.
    fn vector_candidates() -> Vec<(Unit, Check)> {
        #[allow(unused_mut)] // nothing to add off x86-64
        let mut candidates: Vec<(Unit, Check)> = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            use hostbench_core::isa;
            #[cfg(target_os = "linux")]
            if isa::avx512f() && isa::amx_bf16() && !kernels::amx_declined() {
                candidates.push((Unit::AmxBf16, amx_check));
            }
            if isa::avx512f() && isa::avx512bf16() {
                candidates.push((Unit::Avx512Bf16, || {
                    kernels::self_check::<Bf16Avx512>().map(|()| None)
                }));
            }
            if isa::avx512f() {
                candidates.push((Unit::Avx512F32, || {
                    kernels::self_check::<F32Avx512>().map(|()| None)
                }));
            }
            if isa::avx2_fma() {
                candidates.push((Unit::Avx2F32, || {
                    kernels::self_check::<F32Avx2>().map(|()| None)
                }));
            }
        }
        candidates
    }

    fn decide() -> (Self, Option<String>) {
        let mut candidates = Self::vector_candidates();
        candidates.push((Unit::PortableF32, || {
            kernels::self_check::<F32Portable>().map(|()| None)
        }));
        let mut notes = Vec::new();
        #[cfg(target_arch = "x86_64")]
        if hostbench_core::isa::amx_bf16() && kernels::amx_declined() {
            notes.push("AMX not used: HOSTBENCH_MXP_AMX=0".to_string());
        }
        let why = |p: &Vec<String>| (!p.is_empty()).then(|| p.join("; "));
        for (unit, check) in candidates {
            match check() {
                Ok(note) => {
                    notes.extend(note);
                    return (unit, why(&notes));
                }
                Err(e) => notes.push(format!("{} not used: {e}", unit.name())),
            }
        }
        // Not even the portable kernel checks out: the solve's own residual check is all
        // that is left, and the record says why.
        (Unit::PortableF32, why(&notes))
    }

    pub fn precision(self) -> Precision {
        match self {
            Unit::AmxBf16 | Unit::Avx512Bf16 => Precision::Bf16,
            #[cfg(test)]
            Unit::PortableBf16 => Precision::Bf16,
            #[cfg(all(test, target_arch = "x86_64"))]
            Unit::EmulatedAmx => Precision::Bf16,
            _ => Precision::F32,
        }
    }

    /// The update kernel, for the record.
    pub fn name(self) -> &'static str {
        match self {
            #[cfg(target_arch = "x86_64")]
            Unit::AmxBf16 => Bf16Amx::NAME,
            #[cfg(target_arch = "x86_64")]
            Unit::Avx512Bf16 => Bf16Avx512::NAME,
            #[cfg(target_arch = "x86_64")]
            Unit::Avx512F32 => F32Avx512::NAME,
            #[cfg(target_arch = "x86_64")]
            Unit::Avx2F32 => F32Avx2::NAME,
            #[cfg(test)]
            Unit::PortableBf16 => kernels::Bf16Portable::NAME,
            #[cfg(all(test, target_arch = "x86_64"))]
            Unit::EmulatedAmx => kernels::Bf16AmxEmulated::NAME,
            _ => F32Portable::NAME,
        }
    }
}

/// A unit's check on this CPU: its note for the record (if any), or why it is passed over.
type Check = fn() -> Result<Option<String>, String>;

/// AMX's check. Its kernel was written without AMX hardware at hand, so before this process
/// relies on it, a child process (`isolate`) runs its exact self-check and a small solve
/// through the whole LU, then times it against the unit that would run without it; a fault
/// there (a tile configuration the CPU rejects, a load outside its buffer) passes AMX over
/// with the reason instead of ending the run. AMX is chosen only where it is the faster.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn amx_check() -> Result<Option<String>, String> {
    crate::amx::permission().map_err(|e| e.to_string())?;
    let next: (&str, fn(std::time::Duration) -> f64) = if hostbench_core::isa::avx512bf16() {
        (Bf16Avx512::NAME, kernels::rate::<Bf16Avx512>)
    } else {
        (F32Avx512::NAME, kernels::rate::<F32Avx512>)
    };
    trial::<Bf16Amx>(Unit::AmxBf16, next).map(Some)
}

/// The trial of `G` (run as `unit`) in a child process: its exact self-check, a solve of order
/// 2·NB + 37 (ragged against every block) on two threads, then the rates of `G` and of the
/// unit `next` names, on one thread. The note with both rates where `G` is the faster.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn trial<G: Gemm>(
    unit: Unit,
    (next, next_rate): (&str, fn(std::time::Duration) -> f64),
) -> Result<String, String> {
    use std::time::Duration;
    const RATE_FOR: Duration = Duration::from_millis(90);
    let what = format!("the {} kernel's trial", G::NAME);
    let report = crate::isolate::in_child(&what, Duration::from_secs(60), || {
        kernels::self_check::<G>()?;
        let cfg = MxpConfig {
            n: 2 * NB + 37,
            threads: 2,
            seed: 11,
            hook: Hook::None,
        };
        let out = Prepared::with_unit(&cfg, unit)
            .and_then(|mut p| p.solve(None))
            .map_err(|e| e.to_string())?;
        if let Some(why) = out.failure {
            return Err(format!("a trial solve at n = {}: {why}", cfg.n));
        }
        Ok(format!(
            "{} {}",
            kernels::rate::<G>(RATE_FOR),
            next_rate(RATE_FOR)
        ))
    })?;
    let rates: Vec<f64> = report.split(' ').filter_map(|x| x.parse().ok()).collect();
    let [own, other] = rates[..] else {
        return Err(format!("{what} reported {report:?}"));
    };
    faster(G::NAME, own, next, other)
}

/// The note of a unit whose kernel beat the next one's, or why it is passed over.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn faster(name: &str, own: f64, next: &str, other: f64) -> Result<String, String> {
    let g = |r: f64| format!("{:.1} GFLOP/s", r / 1e9);
    if own > other {
        Ok(format!(
            "{name} chosen after its trial in a child process (an exact self-check and a small \
             solve): its kernel ran at {} on one thread, {next}'s at {}",
            g(own),
            g(other)
        ))
    } else {
        Err(format!(
            "its kernel ran at {} on one thread, not above {next}'s {}",
            g(own),
            g(other)
        ))
    }
}

/// Faults a test can force, to show they end in a failed record and its reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Hook {
    #[default]
    None,
    /// Zero one pivot of the factors after the factorisation.
    CorruptPivot,
    /// Shrink the diagonal to a thousandth of HPL-MxP's: no longer dominant, so the bf16 LU
    /// without pivoting loses all accuracy and its factors are no preconditioner (GMRES makes
    /// no progress in its iterations). f32 factors still precondition it: GMRES converges in
    /// about 20. A singular `A` would not do either: an answer of enormous norm has a small
    /// HPL residual.
    IllConditioned,
}

/// What to solve.
#[derive(Debug, Clone)]
pub struct MxpConfig {
    pub n: usize,
    pub threads: usize,
    pub seed: u64,
    pub hook: Hook,
}

/// One timed HPL-MxP solve.
#[derive(Debug, Clone)]
pub struct MxpOutcome {
    pub n: usize,
    pub threads: usize,
    pub precision: Precision,
    /// The update kernel.
    pub unit: &'static str,
    /// Wall time of the factorisation, the first solve and the refinement.
    pub seconds: f64,
    /// Of which the factorisation.
    pub factor_s: f64,
    /// Share of the factorisation spent on the diagonal blocks (the first while the others
    /// wait, each later one beside the previous step's update), and share of all workers'
    /// factorisation time spent at the step barriers.
    pub diag_share: f64,
    pub idle_share: f64,
    /// HPL-MxP's operation count, `2/3 n³ + 3/2 n²`.
    pub flops: f64,
    /// GMRES iterations and cycles.
    pub iterations: usize,
    pub cycles: usize,
    /// HPL's scaled residual of the refined solution, computed afresh against `A` and `b`.
    pub residual: f64,
    /// Refinement converged and `residual < 16`.
    pub passed: bool,
    /// Why it did not pass.
    pub failure: Option<String>,
}

/// Bytes a run of order `n` allocates: the f64 matrix (kept for the refinement and the check),
/// its f32 copy that is factored, the packed `L₂₁`, GMRES's two bases and the vectors. Each
/// worker adds about 0.9 MiB of packing buffers, which this does not count.
pub fn memory_needed(n: usize) -> u64 {
    let n64 = n as u64;
    let lda = lda_for(n).unwrap_or(usize::MAX) as u64;
    let a0 = n64.saturating_mul(n64).saturating_mul(8);
    let a = lda.saturating_mul(n64).saturating_mul(4);
    let lpack = n64.saturating_add(256).saturating_mul(NB as u64 * 4);
    let krylov = n64.saturating_mul((2 * refine::RESTART as u64 + 8) * 8);
    a0.saturating_add(a)
        .saturating_add(lpack)
        .saturating_add(krylov)
}

/// Column stride of the f32 copy: whole cache lines, and not a multiple of 4 KiB.
fn lda_for(n: usize) -> Option<usize> {
    super::system::stride_for(n, 4)
}

/// The generated system, kept for every sample of a case: each solve rounds a fresh f32 copy.
pub struct Prepared {
    n: usize,
    threads: usize,
    hook: Hook,
    unit: Unit,
    /// `A` column-major, f64.
    a0: Vec<f64>,
    b: Vec<f64>,
    norm_a: f64,
    lda: usize,
    a: Buf<f32>,
}

impl Prepared {
    /// Generate HPL-MxP's system for `cfg`, to be solved on the best unit of this CPU.
    pub fn new(cfg: &MxpConfig) -> Result<Self, BenchError> {
        Self::with_unit(cfg, Unit::best())
    }

    pub fn with_unit(cfg: &MxpConfig, unit: Unit) -> Result<Self, BenchError> {
        let n = cfg.n;
        // The f64 solve's system (the same A off the diagonal and the same b for a seed), then
        // HPL-MxP's diagonal.
        let base = LinpackConfig {
            n,
            threads: cfg.threads,
            seed: cfg.seed,
        };
        check_order(&base)?;
        let too_large = || BenchError::invalid(format!("linpack n {n} is too large"));
        let lda = lda_for(n).ok_or_else(too_large)?;
        let f32_len = lda.checked_mul(n).ok_or_else(too_large)?;
        let (mut a0, b) = original(&base)?;
        // The diagonal: the sum of the row's other absolute values.
        let mut sums = vec![0.0f64; n];
        for (j, col) in a0.chunks_exact(n).enumerate() {
            for (i, (s, v)) in sums.iter_mut().zip(col).enumerate() {
                if i != j {
                    *s += v.abs();
                }
            }
        }
        for (i, s) in sums.iter().enumerate() {
            a0[i * n + i] = *s;
        }
        if cfg.hook == Hook::IllConditioned {
            for i in 0..n {
                a0[i * n + i] *= 1e-3;
            }
        }
        // ‖A‖∞, the largest row sum, in one pass down the columns (a pass along the rows of a
        // column-major matrix would miss the cache on every element).
        let mut rows = vec![0.0f64; n];
        for col in a0.chunks_exact(n) {
            for (r, v) in rows.iter_mut().zip(col) {
                *r += v.abs();
            }
        }
        let norm_a = rows.iter().copied().fold(0.0, f64::max);
        Ok(Self {
            n,
            threads: cfg.threads,
            hook: cfg.hook,
            unit,
            a0,
            b,
            norm_a,
            lda,
            a: Buf::new(f32_len, true)?,
        })
    }

    pub fn unit(&self) -> Unit {
        self.unit
    }

    /// Round `A` to f32, then time the factorisation, the first solve and the refinement;
    /// check the answer with HPL's scaled residual.
    pub fn solve(&mut self, progress: super::lu::Progress<'_>) -> Result<MxpOutcome, BenchError> {
        let (n, lda, threads) = (self.n, self.lda, self.threads);
        let ap = self.a.as_mut_ptr();
        // Rounded on the solve's threads, each first touching its columns' pages.
        let (out, a0) = (Out(ap), &self.a0);
        on_workers(threads, n, 1, |cols| {
            for j in cols {
                for (i, v) in a0[j * n..(j + 1) * n].iter().enumerate() {
                    // SAFETY: the f32 copy holds lda × n values, lda ≥ n; column j is this
                    // thread's alone.
                    unsafe { *out.at(j * lda + i) = *v as f32 };
                }
            }
        })?;
        let t0 = Instant::now();
        let fac = match self.unit {
            #[cfg(target_arch = "x86_64")]
            Unit::AmxBf16 => {
                lu::factor::<F32Avx512, Bf16Amx>(&mut self.a, lda, n, threads, progress)
            }
            #[cfg(target_arch = "x86_64")]
            Unit::Avx512Bf16 => {
                lu::factor::<F32Avx512, Bf16Avx512>(&mut self.a, lda, n, threads, progress)
            }
            #[cfg(target_arch = "x86_64")]
            Unit::Avx512F32 => {
                lu::factor::<F32Avx512, F32Avx512>(&mut self.a, lda, n, threads, progress)
            }
            #[cfg(target_arch = "x86_64")]
            Unit::Avx2F32 => lu::factor::<F32Avx2, F32Avx2>(&mut self.a, lda, n, threads, progress),
            #[cfg(test)]
            Unit::PortableBf16 => lu::factor::<F32Portable, kernels::Bf16Portable>(
                &mut self.a,
                lda,
                n,
                threads,
                progress,
            ),
            #[cfg(all(test, target_arch = "x86_64"))]
            Unit::EmulatedAmx => lu::factor::<F32Portable, kernels::Bf16AmxEmulated>(
                &mut self.a,
                lda,
                n,
                threads,
                progress,
            ),
            _ => lu::factor::<F32Portable, F32Portable>(&mut self.a, lda, n, threads, progress),
        }?;
        if self.hook == Hook::CorruptPivot {
            let p = n / 2;
            // SAFETY: inside the f32 copy.
            unsafe { *ap.add(p * lda + p) = 0.0 };
        }
        let factor_s = t0.elapsed().as_secs_f64();
        let factors = Factors {
            a: ap as *const f32,
            lda,
            n,
        };
        let precond = |v: &mut [f64]| {
            let mut t: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            factors.solve(&mut t, threads);
            for (vi, ti) in v.iter_mut().zip(&t) {
                *vi = *ti as f64;
            }
        };
        // Refinement is timed, and the calling thread does its vector work: accounted as a
        // measuring thread, or a record would read its own refinement as hostbench's threads
        // outside the measurement.
        let measuring = hostbench_core::conditions::track::Measuring::start(None);
        let mut x = self.b.clone();
        precond(&mut x);
        let sys = refine::System {
            a: &self.a0,
            n,
            b: &self.b,
            norm_a: self.norm_a,
            threads,
        };
        let refined = refine::gmres(&sys, &mut x, &precond);
        let seconds = t0.elapsed().as_secs_f64();
        drop(measuring);
        let residual = scaled_residual(&self.a0, n, &x, &self.b, threads);
        let failure = match refined.failure {
            Some(why) => Some(why),
            // NaN fails too
            None if residual.partial_cmp(&THRESHOLD) != Some(std::cmp::Ordering::Less) => {
                Some(format!(
                    "scaled residual {residual:.3e} is not below {THRESHOLD}: the solve is wrong"
                ))
            }
            None => None,
        };
        Ok(MxpOutcome {
            n,
            threads,
            precision: self.unit.precision(),
            unit: self.unit.name(),
            seconds,
            factor_s,
            diag_share: fac.diag_s / fac.seconds,
            idle_share: fac.wait_s / (fac.seconds * threads as f64),
            flops: hpl_flops(n),
            iterations: refined.iterations,
            cycles: refined.cycles,
            residual,
            passed: failure.is_none(),
            failure,
        })
    }
}

/// The f32 factors, `L` unit lower and `U` upper in one column-major `n × n` block.
struct Factors {
    a: *const f32,
    lda: usize,
    n: usize,
}

// SAFETY: read-only once factored; `solve` writes only its vector.
unsafe impl Sync for Factors {}

/// A vector the solve's threads share: each writes only its own rows in a phase, and phases
/// are separated by the barrier.
struct SharedVec(*mut f32);

// SAFETY: as documented on the type.
unsafe impl Sync for SharedVec {}

impl SharedVec {
    // A method, so closures capture the whole (Sync) wrapper rather than its raw field.
    fn ptr(&self) -> *mut f32 {
        self.0
    }
}

impl Factors {
    /// Block `rows × cols` at (r, c).
    ///
    /// # Safety
    /// In range.
    unsafe fn block(&self, r: usize, c: usize, rows: usize, cols: usize) -> MatRef<'_, f32> {
        // SAFETY: forwarded from the caller.
        unsafe {
            MatRef::from_raw_parts(
                self.a.add(c * self.lda + r),
                rows,
                cols,
                1,
                self.lda as isize,
            )
        }
    }

    /// `v ← U⁻¹ L⁻¹ v`, blocked by [`NB`]: thread 0 solves each diagonal block, then the
    /// product with the rest of its block column is split over the threads by rows. Each
    /// solve reads the whole f32 matrix once, so it is memory-bound like the f64 product
    /// beside it, and one thread alone would leave most of the bandwidth unused.
    fn solve(&self, v: &mut [f32], threads: usize) {
        let n = self.n;
        let threads = threads.min(n.div_ceil(NB)).max(1);
        if threads == 1 {
            // SAFETY: the whole factor block.
            let lu = unsafe { self.block(0, 0, n, n) };
            let mut vm = MatMut::from_column_major_slice_mut(v, n, 1);
            solve_unit_lower_triangular_in_place(lu, vm.as_mut(), Par::Seq);
            solve_upper_triangular_in_place(lu, vm.as_mut(), Par::Seq);
            return;
        }
        let barrier = super::sync::Barrier::new(threads);
        let x = SharedVec(v.as_mut_ptr());
        let npan = n.div_ceil(NB);
        let states = vec![(); threads];
        // SAFETY (all blocks below): in range; within a phase thread 0 alone writes the
        // diagonal block's rows and each thread its own rows below or above it, which nobody
        // else reads in that phase.
        let vec_at = |i: usize, len: usize| unsafe {
            MatMut::from_column_major_slice_mut(
                core::slice::from_raw_parts_mut(x.ptr().add(i), len),
                len,
                1,
            )
        };
        let rows = |tid: usize, lo: usize, hi: usize| {
            let len = hi - lo;
            (lo + len * tid / threads, lo + len * (tid + 1) / threads)
        };
        // One step of the forward (`lower`) or backward substitution; false once poisoned.
        let step = |tid: usize, p: usize, lower: bool| {
            let (k, kb) = (p * NB, NB.min(n - p * NB));
            if tid == 0 {
                // SAFETY: the diagonal block, in range.
                let d = unsafe { self.block(k, k, kb, kb) };
                if lower {
                    solve_unit_lower_triangular_in_place(d, vec_at(k, kb), Par::Seq);
                } else {
                    solve_upper_triangular_in_place(d, vec_at(k, kb), Par::Seq);
                }
            }
            if !barrier.wait() {
                return false;
            }
            let (lo, hi) = if lower {
                rows(tid, k + kb, n)
            } else {
                rows(tid, 0, k)
            };
            if hi > lo {
                // SAFETY: the block column's rows of this thread, in range.
                let off = unsafe { self.block(lo, k, hi - lo, kb) };
                let xk = vec_at(k, kb);
                faer::linalg::matmul::matmul(
                    vec_at(lo, hi - lo),
                    Accum::Add,
                    off,
                    xk.as_ref(),
                    -1.0,
                    Par::Seq,
                );
            }
            barrier.wait()
        };
        let solved = super::sync::team("linpack-mxp-solve", states, &barrier, |tid, ()| {
            let _ = (0..npan).all(|p| step(tid, p, true))
                && (0..npan).rev().all(|p| step(tid, p, false));
        });
        if solved.is_err() {
            // Threads that could not start (or a panic): a NaN answer, which the refinement
            // reports as a breakdown rather than using half a solve.
            v.fill(f32::NAN);
        }
    }
}

/// Generate, solve once and check.
pub fn run(cfg: &MxpConfig) -> Result<MxpOutcome, BenchError> {
    Prepared::new(cfg)?.solve(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(n: usize, threads: usize, hook: Hook) -> MxpConfig {
        MxpConfig {
            n,
            threads,
            seed: 7,
            hook,
        }
    }

    /// Every unit this machine runs, plus the portable bf16 emulation and (on x86-64) the
    /// emulated AMX kernel.
    fn units() -> Vec<Unit> {
        let mut v = vec![Unit::PortableF32, Unit::PortableBf16];
        #[cfg(target_arch = "x86_64")]
        v.push(Unit::EmulatedAmx);
        if hostbench_core::isa::avx2_fma() {
            v.push(Unit::Avx2F32);
        }
        if hostbench_core::isa::avx512f() {
            v.push(Unit::Avx512F32);
            if hostbench_core::isa::avx512bf16() {
                v.push(Unit::Avx512Bf16);
            }
        }
        if Unit::best() == Unit::AmxBf16 {
            v.push(Unit::AmxBf16);
        }
        v
    }

    #[test]
    fn every_unit_converges_to_passed_across_panel_boundaries() {
        // 601: two full panels and a ragged one; rows and chunks ragged too.
        for unit in units() {
            for threads in [1, 3] {
                let out = Prepared::with_unit(&cfg(601, threads, Hook::None), unit)
                    .unwrap()
                    .solve(None)
                    .unwrap();
                assert!(
                    out.passed,
                    "{unit:?}, {threads} threads: {:?}, residual {}",
                    out.failure, out.residual
                );
                assert!(out.residual < 1.0 && out.iterations >= 1, "{out:?}");
                assert!(out.iterations < MAX_ITERATIONS, "{out:?}");
                assert_eq!(out.precision, unit.precision());
            }
        }
    }

    #[test]
    fn the_low_precision_factors_are_what_the_refinement_needs() {
        // Without refinement the bf16 factors solve to about bf16's precision, far from
        // HPL's threshold: the refinement does the rest, in a few iterations.
        let n = 300;
        for unit in [Unit::PortableBf16, Unit::PortableF32] {
            let mut p = Prepared::with_unit(&cfg(n, 2, Hook::None), unit).unwrap();
            let out = p.solve(None).unwrap();
            assert!(out.passed, "{unit:?}: {out:?}");
            // LU·x = A·x for a random x, to the precision of the update
            let lu = unsafe { MatRef::from_raw_parts(p.a.as_mut_ptr(), n, n, 1, p.lda as isize) };
            let x: Vec<f64> = (0..n)
                .map(|i| crate::linpack::system::uniform(3, i as u64))
                .collect();
            let mut worst = 0.0f64;
            for i in 0..n {
                let mut lux = 0.0f64;
                for j in 0..n {
                    // (L U)(i, j) = Σ_k L(i, k) U(k, j), k ≤ min(i, j), L(i, i) = 1
                    let mut e = 0.0f64;
                    for k in 0..=i.min(j) {
                        let l = if k == i { 1.0 } else { lu[(i, k)] as f64 };
                        e += l * lu[(k, j)] as f64;
                    }
                    lux += e * x[j];
                }
                let ax: f64 = (0..n).map(|j| p.a0[j * n + i] * x[j]).sum();
                worst = worst.max((lux - ax).abs() / p.norm_a);
            }
            let bound = if unit.precision() == Precision::Bf16 {
                1e-2
            } else {
                1e-5
            };
            assert!(worst < bound, "{unit:?}: ‖LUx − Ax‖ / ‖A‖ = {worst}");
            assert!(worst > 0.0);
        }
    }

    #[test]
    fn a_corrupted_factor_fails_with_its_reason() {
        for unit in [Unit::PortableBf16, Unit::best()] {
            let out = Prepared::with_unit(&cfg(300, 2, Hook::CorruptPivot), unit)
                .unwrap()
                .solve(None)
                .unwrap();
            assert!(!out.passed, "{unit:?}: corrupted factors passed: {out:?}");
            let why = out.failure.unwrap();
            assert!(why.contains("broke down"), "{why}");
        }
    }

    #[test]
    fn refinement_that_cannot_converge_ends_with_the_reason() {
        let t = Instant::now();
        let out = Prepared::with_unit(&cfg(601, 2, Hook::IllConditioned), Unit::PortableBf16)
            .unwrap()
            .solve(None)
            .unwrap();
        assert!(!out.passed, "an ill-conditioned system passed: {out:?}");
        let why = out.failure.unwrap();
        assert!(why.contains("did not converge"), "{why}");
        assert_eq!(out.iterations, MAX_ITERATIONS);
        // bounded work, not a hang (a generous bound: this is a correctness test)
        assert!(t.elapsed().as_secs() < 60);
    }

    #[test]
    fn the_matrix_is_hpl_mxps() {
        let n = 40;
        let p = Prepared::with_unit(&cfg(n, 1, Hook::None), Unit::PortableF32).unwrap();
        for i in 0..n {
            let off: f64 = (0..n)
                .filter(|&j| j != i)
                .map(|j| p.a0[j * n + i].abs())
                .sum();
            assert_eq!(p.a0[i * n + i], off, "row {i}");
            for j in (0..n).filter(|&j| j != i) {
                assert!((-0.5..0.5).contains(&p.a0[j * n + i]));
            }
        }
        assert!(
            (p.norm_a - (0..n).map(|i| 2.0 * p.a0[i * n + i]).fold(0.0, f64::max)).abs() < 1e-12
        );
        assert!(p.b.iter().all(|v| (-0.5..0.5).contains(v)));
    }

    /// AMX's trial, run here on the AMX kernel's data path with its tile instructions
    /// emulated: the child's self-check and solve pass; the kernel is chosen only where it
    /// beats the next unit, with both rates in the note.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    #[test]
    fn a_matrix_unit_is_chosen_after_its_trial_and_only_where_it_is_faster() {
        use kernels::Bf16AmxEmulated;
        let never: fn(std::time::Duration) -> f64 = |_| 0.0;
        let note = trial::<Bf16AmxEmulated>(Unit::EmulatedAmx, ("a slower unit", never)).unwrap();
        assert!(
            note.starts_with(&format!(
                "{} chosen after its trial in a child process",
                Bf16AmxEmulated::NAME
            )),
            "{note}"
        );
        assert!(note.ends_with("a slower unit's at 0.0 GFLOP/s"), "{note}");
        // The emulation (scalar loops) against the portable f32 kernel's rate times a thousand.
        let quick: fn(std::time::Duration) -> f64 = |d| 1e3 * kernels::rate::<F32Portable>(d);
        let why = trial::<Bf16AmxEmulated>(Unit::EmulatedAmx, ("a faster unit", quick));
        let why = why.unwrap_err();
        assert!(why.starts_with("its kernel ran at "), "{why}");
        assert!(why.contains(", not above a faster unit's "), "{why}");
        assert_eq!(
            faster("amx-bf16", 2e12, "avx512-bf16", 0.5e12),
            Ok(
                "amx-bf16 chosen after its trial in a child process (an exact self-check and a \
                small solve): its kernel ran at 2000.0 GFLOP/s on one thread, avx512-bf16's at \
                500.0 GFLOP/s"
                    .to_string()
            )
        );
        // A trial whose solve fails in the child: the reason comes back.
        let wrong =
            trial::<kernels::WrongSign>(Unit::PortableF32, ("a slower unit", never)).unwrap_err();
        assert!(wrong.contains("expected"), "{wrong}");
    }

    #[test]
    fn memory_needed_counts_both_copies() {
        assert!(memory_needed(1000) >= 12 * 1000 * 1000);
        assert!(memory_needed(2000) > memory_needed(1000));
        assert_eq!(memory_needed(usize::MAX), u64::MAX);
        assert!(Prepared::new(&cfg(0, 1, Hook::None)).is_err());
        assert!(Prepared::new(&cfg(10, 0, Hook::None)).is_err());
    }
}
