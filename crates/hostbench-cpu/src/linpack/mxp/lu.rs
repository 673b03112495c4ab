//! The low-precision LU: right-looking, blocked, without pivoting (HPL-MxP's matrix is
//! diagonally dominant, which makes that stable), on an f32 matrix stored column-major.
//!
//! Each step of [`NB`] columns runs in two phases separated by barriers, on a diagonal block
//! already factored:
//!
//! 1. every thread claims blocks of rows below the diagonal block and computes
//!    `L₂₁ = A₂₁ U₁₁⁻¹` on the f32 kernel, then packs those rows of `L₂₁` for the update kernel
//!    (bf16 pairs or f32);
//! 2. every thread claims column chunks to its right: `U₁₂ = L₁₁⁻¹ A₁₂` on the f32 kernel,
//!    packed for the update kernel, then the trailing update `A₂₂ −= L₂₁ U₁₂` of the chunk. The
//!    first chunk holds the next step's diagonal block: the thread that updates it goes on to
//!    factor that block (faer's blocked kernels, in f32) and form its `L₁₁⁻¹` and `U₁₁⁻¹`,
//!    packed for the f32 kernel, while the others update the rest (a look-ahead of one
//!    diagonal block; the inverses are double-buffered). Only the first diagonal block is
//!    factored while the others wait: on sixteen threads a serial block per step would have
//!    been a sixth of the time.
//!
//! Multiplying by the triangular inverses (formed once per step, `kb³/3` flops each) instead
//! of substituting puts nearly all the work on the packed kernels; their zero halves are
//! skipped. The update is where the low precision buys its speed: `L₂₁` and `U₁₂` are rounded
//! to bf16 once, as they are packed, and the products are summed in f32 into the f32 matrix,
//! as HPL-MxP's reference does with its half-precision GEMM.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_unit_lower_triangular_in_place,
    solve_upper_triangular_in_place,
};
use faer::{Accum, MatMut, Par};
use hostbench_core::BenchError;

use super::super::lu::Progress;
use super::super::sync::{atomics, team, Barrier, Guided};
use super::super::system::{try_vec, AlignedBuf};
use super::kernels::{pack_a, pack_b, steps, Gemm};

/// Panel width (HPL-MxP's reference runs NB in the hundreds for its GEMM's sake).
pub const NB: usize = 256;
/// Rows of `L₂₁` one claim computes: a whole number of every kernel's `MR`.
const ROWS: usize = 192;
/// The most columns of the trailing matrix one claim updates: a whole number of every kernel's
/// `NR`; its packed `U₁₂` (`NB × CHUNK` bf16, 192 KiB) stays in L2 while each packed panel of
/// `L₂₁` is used against all of it.
const CHUNK: usize = 384;

/// How a step's columns are claimed (`Guided`): in whole tiles of the update kernel (the f32
/// kernel's `U₁₂` is a sliver beside the update, and takes partial tiles), at most CHUNK,
/// narrowing towards the end of the step; the claim at offset 0, which holds the next diagonal
/// block, at least NB. (Fixed claims of a quarter of a thread's share left a thread idle for
/// half a claim on average at the end of every step.)
fn column_claims<U: Gemm>(threads: usize) -> Guided {
    // The next diagonal block must fit the first claim's packed buffers.
    const { assert!(CHUNK >= NB.next_multiple_of(U::NR)) };
    Guided::new(threads, U::NR, CHUNK).with_first(NB.next_multiple_of(U::NR))
}

/// The factorisation's wall time and where it went.
pub(super) struct Factored {
    pub(super) seconds: f64,
    /// Time spent on the diagonal blocks (the first one the others wait for; the others
    /// overlap the previous step's update).
    pub(super) diag_s: f64,
    /// All workers' time at the step barriers.
    pub(super) wait_s: f64,
}

/// What the workers share. Within a phase every thread writes a disjoint block (the rows or
/// columns it claimed) and reads only what nobody writes in that phase; phases are separated
/// by the barrier.
struct Shared<'a, P> {
    a: *mut f32,
    lda: usize,
    n: usize,
    /// `L₁₁⁻¹` in the f32 kernel's A panels and `U₁₁⁻¹` in its B panels, of step p in buffer
    /// p % 2: written by the thread that factors the diagonal block, during the previous step.
    linv: [*mut f32; 2],
    uinv: [*mut f32; 2],
    /// The factoring thread's room for the two inverses before they are packed.
    diag: *mut f32,
    /// `L₂₁` of the current step in the update kernel's A panels.
    lpack: *mut P,
    rows: Vec<AtomicUsize>,
    cols: Vec<AtomicUsize>,
    threads: usize,
    barrier: Barrier,
    diag_ns: AtomicU64,
    wait_ns: AtomicU64,
    progress: Progress<'a>,
}

// SAFETY: the pointers are dereferenced only under the rules above.
unsafe impl<P> Sync for Shared<'_, P> {}

impl<P> Shared<'_, P> {
    /// Pointer to `A(i, j)`.
    ///
    /// # Safety
    /// `i ≤ lda`, `j ≤ n`.
    unsafe fn at(&self, i: usize, j: usize) -> *mut f32 {
        // SAFETY: inside the allocation by the caller's bounds.
        unsafe { self.a.add(j * self.lda + i) }
    }
}

/// A buffer of `len` elements of `T` (f32 or packed u32) on the aligned mapping.
pub(super) struct Buf<T> {
    raw: AlignedBuf,
    _t: core::marker::PhantomData<T>,
}

impl<T: Copy> Buf<T> {
    pub(super) fn new(len: usize, huge: bool) -> Result<Self, BenchError> {
        const { assert!(core::mem::size_of::<T>() == 4) };
        Ok(Self {
            raw: AlignedBuf::new(len.div_ceil(2).max(1), huge)?,
            _t: core::marker::PhantomData,
        })
    }
    pub(super) fn as_mut_ptr(&mut self) -> *mut T {
        self.raw.as_mut_ptr().cast()
    }
}

/// Factor the `n × n` column-major f32 matrix at `a` (stride `lda`) in place into unit lower
/// `L` and upper `U`, on `threads` workers: `F` multiplies by the triangular inverses, `U`
/// does the trailing update.
pub(super) fn factor<F: Gemm<P = f32>, U: Gemm>(
    a: &mut Buf<f32>,
    lda: usize,
    n: usize,
    threads: usize,
    progress: Progress<'_>,
) -> Result<Factored, BenchError> {
    debug_assert!(ROWS.is_multiple_of(F::MR) && ROWS.is_multiple_of(U::MR));
    debug_assert!(CHUNK.is_multiple_of(F::NR) && CHUNK.is_multiple_of(U::NR));
    let npan = n.div_ceil(NB);
    let ks = steps::<U>(NB);
    let mut linv = [
        Buf::<f32>::new(NB.next_multiple_of(F::MR) * NB, false)?,
        Buf::<f32>::new(NB.next_multiple_of(F::MR) * NB, false)?,
    ];
    let mut uinv = [
        Buf::<f32>::new(NB.next_multiple_of(F::NR) * NB, false)?,
        Buf::<f32>::new(NB.next_multiple_of(F::NR) * NB, false)?,
    ];
    let mut diag_scratch = Buf::<f32>::new(2 * NB * NB, false)?;
    let mut lpack = Buf::<U::P>::new(n.next_multiple_of(ROWS) * ks, true)?;
    let sh = Shared {
        a: a.as_mut_ptr(),
        lda,
        n,
        linv: [linv[0].as_mut_ptr(), linv[1].as_mut_ptr()],
        uinv: [uinv[0].as_mut_ptr(), uinv[1].as_mut_ptr()],
        diag: diag_scratch.as_mut_ptr(),
        lpack: lpack.as_mut_ptr(),
        rows: atomics(npan)?,
        cols: atomics(npan)?,
        threads,
        barrier: Barrier::new(threads),
        diag_ns: AtomicU64::new(0),
        wait_ns: AtomicU64::new(0),
        progress,
    };
    let mut states = try_vec(threads)?;
    for _ in 0..threads {
        states.push(Scratch {
            apack: Buf::new(ROWS * NB, false)?,
            bpack: Buf::new(NB * CHUNK, false)?,
            upack: Buf::new(ks * CHUNK, false)?,
        });
    }
    let seconds = team("linpack-mxp", states, &sh.barrier, |tid, mut s| {
        worker::<F, U>(&sh, tid, &mut s)
    })?;
    let secs = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 * 1e-9;
    Ok(Factored {
        seconds,
        diag_s: secs(&sh.diag_ns),
        wait_s: secs(&sh.wait_ns),
    })
}

/// A worker's own packing buffers.
struct Scratch<P> {
    apack: Buf<f32>,
    bpack: Buf<f32>,
    upack: Buf<P>,
}

fn worker<F: Gemm<P = f32>, U: Gemm>(sh: &Shared<'_, U::P>, tid: usize, s: &mut Scratch<U::P>) {
    let n = sh.n;
    let npan = n.div_ceil(NB);
    let mut wait_s = 0.0f64;
    let wait = |wait_s: &mut f64| {
        let t = Instant::now();
        let ok = sh.barrier.wait();
        *wait_s += t.elapsed().as_secs_f64();
        ok
    };
    if tid == 0 {
        // SAFETY: the others wait at the barrier below; the block is in range.
        unsafe { diag::<F, _>(sh, 0) };
    }
    if !wait(&mut wait_s) {
        return;
    }
    for p in 0..npan {
        let k = p * NB;
        let kb = NB.min(n - k);
        // SAFETY: each claim is a disjoint block of rows, then of columns, of this step; the
        // diagonal block was factored before the last barrier.
        unsafe { lower_rows::<F, U>(sh, p, k, kb, s.apack.as_mut_ptr()) };
        if !wait(&mut wait_s) {
            return;
        }
        // SAFETY: as above.
        unsafe { right_cols::<F, U>(sh, p, k, kb, s.bpack.as_mut_ptr(), s.upack.as_mut_ptr()) };
        if !wait(&mut wait_s) {
            return;
        }
        if tid == 0 {
            if let Some(f) = sh.progress {
                let done = (k + kb) as f64 / n as f64;
                f(1.0 - (1.0 - done).powi(3));
            }
        }
    }
    sh.wait_ns
        .fetch_add((wait_s * 1e9) as u64, Ordering::Relaxed);
}

/// Factor step p's diagonal block without pivoting and pack its triangular inverses into
/// buffers p % 2, timed for the record.
///
/// # Safety
/// The caller alone touches the block (it is fully updated), the scratch and buffers p % 2.
unsafe fn diag<F: Gemm<P = f32>, P>(sh: &Shared<'_, P>, p: usize) {
    let t = Instant::now();
    let k = p * NB;
    let kb = NB.min(sh.n - k);
    // SAFETY: the block is kb × kb at (k, k), column-major with stride lda.
    let mut blk = unsafe { MatMut::from_raw_parts_mut(sh.at(k, k), kb, kb, 1, sh.lda as isize) };
    lu_nopiv(blk.as_mut());
    let (li, ui) = (sh.diag, unsafe { sh.diag.add(NB * NB) });
    // SAFETY: the scratch holds two NB × NB blocks.
    let (mut linv, mut uinv) = unsafe {
        (
            MatMut::from_raw_parts_mut(li, kb, kb, 1, kb as isize),
            MatMut::from_raw_parts_mut(ui, kb, kb, 1, kb as isize),
        )
    };
    for j in 0..kb {
        for i in 0..kb {
            let v = if i == j { 1.0 } else { 0.0 };
            linv[(i, j)] = v;
            uinv[(i, j)] = v;
        }
    }
    let blk = blk.as_ref();
    solve_unit_lower_triangular_in_place(blk, linv.as_mut(), Par::Seq);
    solve_upper_triangular_in_place(blk, uinv.as_mut(), Par::Seq);
    // SAFETY: linv and uinv hold a kb × kb block each; the packed buffers hold NB panels.
    unsafe {
        pack_a::<F>(sh.linv[p % 2], li, kb, kb, kb);
        pack_b::<F>(sh.uinv[p % 2], ui, kb, kb, kb);
    }
    sh.diag_ns
        .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

/// In-place LU without pivoting of a small square block: recursive halves on faer's triangular
/// solves and matmul, unblocked below 16 columns. A zero pivot gives inf/NaN, which the
/// refinement then reports.
pub(super) fn lu_nopiv(mut a: MatMut<'_, f32>) {
    let n = a.nrows();
    if n <= 16 {
        for j in 0..n {
            let inv = 1.0 / a[(j, j)];
            for i in j + 1..n {
                a[(i, j)] *= inv;
            }
            for c in j + 1..n {
                let u = a[(j, c)];
                for i in j + 1..n {
                    let l = a[(i, j)];
                    a[(i, c)] -= l * u;
                }
            }
        }
        return;
    }
    let h = n / 2;
    let (mut a11, mut a12, mut a21, mut a22) = a.as_mut().split_at_mut(h, h);
    lu_nopiv(a11.as_mut());
    solve_unit_lower_triangular_in_place(a11.as_ref(), a12.as_mut(), Par::Seq);
    // A₂₁ U₁₁⁻¹: (U₁₁ᵀ)⁻¹ applied to A₂₁ᵀ.
    solve_lower_triangular_in_place(
        a11.as_ref().transpose(),
        a21.as_mut().transpose_mut(),
        Par::Seq,
    );
    faer::linalg::matmul::matmul(
        a22.as_mut(),
        Accum::Add,
        a21.as_ref(),
        a12.as_ref(),
        -1.0,
        Par::Seq,
    );
    lu_nopiv(a22);
}

/// Phase 1: claimed blocks of rows below the diagonal block: `L₂₁ = A₂₁ U₁₁⁻¹`, then packed
/// for the update.
///
/// # Safety
/// Called by every worker in phase 1 of step p; `apack` holds `ROWS × NB` values.
unsafe fn lower_rows<F: Gemm<P = f32>, U: Gemm>(
    sh: &Shared<'_, U::P>,
    p: usize,
    k: usize,
    kb: usize,
    apack: *mut f32,
) {
    let (n, lda) = (sh.n, sh.lda);
    let first = k + kb;
    let ks = steps::<U>(kb);
    loop {
        let r0 = first + sh.rows[p].fetch_add(1, Ordering::Relaxed) * ROWS;
        if r0 >= n {
            return;
        }
        let rows = ROWS.min(n - r0);
        // SAFETY: rows [r0, r0 + rows) of the panel are this thread's claim; U₁₁⁻¹ is
        // read-only in this phase; lpack has room for every row below the diagonal block.
        unsafe {
            pack_a::<F>(apack, sh.at(r0, k), lda, rows, kb);
            for q in 0..kb.div_ceil(F::NR) {
                // Column q·NR.. of U₁₁⁻¹ is zero below row (q + 1)·NR.
                let kc = kb.min((q + 1) * F::NR);
                for ip in 0..rows.div_ceil(F::MR) {
                    F::kernel(
                        kc,
                        apack.add(ip * F::MR * kb),
                        sh.uinv[p % 2].add(q * F::NR * kb),
                        sh.at(r0 + ip * F::MR, k + q * F::NR),
                        lda,
                        F::MR.min(rows - ip * F::MR),
                        F::NR.min(kb - q * F::NR),
                        true,
                    );
                }
            }
            let panel = (r0 - first) / U::MR;
            pack_a::<U>(
                sh.lpack.add(panel * U::MR * ks),
                sh.at(r0, k),
                lda,
                rows,
                kb,
            );
        }
    }
}

/// Phase 2: claimed column chunks right of the diagonal block: `U₁₂ = L₁₁⁻¹ A₁₂`, packed, and
/// the trailing update `A₂₂ −= L₂₁ U₁₂` of the chunk; the thread with the first chunk then
/// factors the next step's diagonal block, which lies in it.
///
/// # Safety
/// Called by every worker in phase 2 of step p; `bpack` holds `NB × CHUNK` values and
/// `upack` `steps(NB) × CHUNK` elements.
unsafe fn right_cols<F: Gemm<P = f32>, U: Gemm>(
    sh: &Shared<'_, U::P>,
    p: usize,
    k: usize,
    kb: usize,
    bpack: *mut f32,
    upack: *mut U::P,
) {
    let (n, lda) = (sh.n, sh.lda);
    let first = k + kb;
    let m2 = n - first;
    let ks = steps::<U>(kb);
    let claims = column_claims::<U>(sh.threads);
    while let Some((at, w)) = claims.claim(&sh.cols[p], n - first) {
        let j0 = first + at;
        // SAFETY: columns [j0, j0 + w) are this thread's claim; L₁₁⁻¹ and L₂₁ are read-only
        // in this phase.
        unsafe {
            pack_b::<F>(bpack, sh.at(k, j0), lda, kb, w);
            for ip in 0..kb.div_ceil(F::MR) {
                // Row ip·MR.. of L₁₁⁻¹ is zero right of column (ip + 1)·MR.
                let kc = kb.min((ip + 1) * F::MR);
                for jp in 0..w.div_ceil(F::NR) {
                    F::kernel(
                        kc,
                        sh.linv[p % 2].add(ip * F::MR * kb),
                        bpack.add(jp * F::NR * kb),
                        sh.at(k + ip * F::MR, j0 + jp * F::NR),
                        lda,
                        F::MR.min(kb - ip * F::MR),
                        F::NR.min(w - jp * F::NR),
                        true,
                    );
                }
            }
            if m2 == 0 {
                // The last step: nothing below, nothing after.
                continue;
            }
            pack_b::<U>(upack, sh.at(k, j0), lda, kb, w);
            U::begin();
            // Each packed panel of L₂₁ (MR rows, in L1) against the whole packed chunk (in L2).
            for ir in 0..m2.div_ceil(U::MR) {
                let a = sh.lpack.add(ir * U::MR * ks);
                for jp in 0..w.div_ceil(U::NR) {
                    U::kernel(
                        ks,
                        a,
                        upack.add(jp * U::NR * ks),
                        sh.at(first + ir * U::MR, j0 + jp * U::NR),
                        lda,
                        U::MR.min(m2 - ir * U::MR),
                        U::NR.min(w - jp * U::NR),
                        false,
                    );
                }
            }
            U::end();
            if at == 0 {
                // The next diagonal block (rows and columns [first, first + NB)) is in this
                // chunk, now fully updated; buffers (p + 1) % 2 were last read in the previous
                // step, before its closing barrier.
                diag::<F, _>(sh, p + 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::kernels::{Bf16Portable, F32Portable};
    use super::*;

    /// Kernels with the AMX, AVX-512 and AVX2 tile widths (32, 12, 6), for the claim
    /// arithmetic.
    struct Nr<const W: usize>;
    impl<const W: usize> Gemm for Nr<W> {
        type P = f32;
        const MR: usize = 32;
        const NR: usize = W;
        const KP: usize = 1;
        const NAME: &'static str = "test";
        fn pack(v: &[f32]) -> f32 {
            v[0]
        }
        unsafe fn kernel(
            _: usize,
            _: *const f32,
            _: *const f32,
            _: *mut f32,
            _: usize,
            _: usize,
            _: usize,
            _: bool,
        ) {
        }
    }

    #[test]
    fn column_claims_are_whole_tiles_and_the_first_holds_the_next_diagonal_block() {
        fn check<U: Gemm>() {
            for threads in [1, 2, 3, 16, 64] {
                let claims = column_claims::<U>(threads);
                for m2 in [1, 100, 1000, 3000, 13_000, 50_000] {
                    let next = AtomicUsize::new(0);
                    let c: Vec<_> = std::iter::from_fn(|| claims.claim(&next, m2)).collect();
                    assert!(c[0].1 >= NB.min(m2), "{threads} threads, {m2}: {c:?}");
                    for &(_, w) in &c[..c.len() - 1] {
                        assert!(w <= CHUNK && w % U::NR == 0, "{w}");
                    }
                }
            }
        }
        check::<F32Portable>();
        check::<Bf16Portable>();
        check::<Nr<32>>();
        check::<Nr<12>>();
        check::<Nr<6>>();
    }
}
