//! The panel factorisation with partial pivoting, shared by a small team of threads.
//!
//! On sixteen threads one thread factoring each panel was the critical path (the panel took
//! 62 % of the wall time on the device's Emerald Rapids, the other threads idle for 30 %): the
//! panel is latency and memory bound, and the trailing update it must hide shrinks with every
//! thread added. So, as HPL does, a few threads factor it together, each owning a contiguous
//! share of the panel's rows:
//!
//! - Recursively (LAPACK's `dgetrf2` split): factor the left half, apply its interchanges to
//!   the right half and solve `U₁₂ = L₁₁⁻¹ A₁₂` (both split by columns), update `A₂₂ −= L₂₁ U₁₂`
//!   (each member its own rows, on faer's GEMM), factor the right half, and apply its
//!   interchanges to the left half.
//! - Below [`NBMIN`] columns, column by column with one barrier per column: each member
//!   proposes the largest entry of its rows together with a copy of that row (and the owner of
//!   the diagonal row a copy of it), so after the barrier every member knows the pivot row and
//!   the row it displaces without reading a row that another member is writing. The owners of
//!   the two rows write them swapped, and each member eliminates its own rows.
//!
//! The candidates are double-buffered by column parity: a member that has passed the barrier
//! of column j + 1 cannot overwrite what a slower member still reads for column j, because
//! that member had to reach the barrier first. The pivot is the first largest magnitude, as
//! LAPACK's `idamax` picks it, so the factors are the ones a single-threaded LU gives.
//!
//! The team synchronises on a spinning barrier (one per column: a sleeping barrier's wake-up
//! would cost more than the column's work), which yields after a while so that a team larger
//! than the free CPUs (the tests oversubscribe) still progresses, and gives up once the
//! solve's main barrier is poisoned by a member that panicked.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use faer::linalg::triangular_solve::solve_unit_lower_triangular_in_place;
use faer::{Accum, MatMut, MatRef, Par};

use super::sync::{atomics, Barrier};
use super::system::try_vec;
use hostbench_core::BenchError;

/// Columns below which the recursion stops and columns are eliminated one at a time (HPL's
/// `NBMIN`; also the size of the row copies the members exchange).
pub(super) const NBMIN: usize = 16;

/// One member's proposal for the pivot of the column in hand: the magnitude, its row and that
/// row's entries in the base block's columns. Padded to its own cache lines.
#[repr(align(128))]
struct Candidate {
    magnitude: AtomicU64,
    row: AtomicUsize,
    values: [AtomicU64; NBMIN],
}

impl Candidate {
    fn new() -> Self {
        Self {
            magnitude: AtomicU64::new(0),
            row: AtomicUsize::new(0),
            values: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// A row's entries in the base block's columns, as exchanged between the members.
#[repr(align(128))]
struct RowCopy([AtomicU64; NBMIN]);

/// What the members of a panel team share: their barrier, the pivot candidates and the copy of
/// the diagonal row (both double-buffered by column parity), and the panel's pivots.
pub(super) struct PanelTeam {
    arrived: AtomicUsize,
    generation: AtomicUsize,
    candidates: [Vec<Candidate>; 2],
    diagonal: [RowCopy; 2],
    /// Panel-relative LAPACK transpositions: row j was swapped with row `pivots[j] ≥ j`.
    pub(super) pivots: Vec<AtomicUsize>,
}

impl PanelTeam {
    /// A team of up to `members` threads factoring panels of up to `width` columns.
    pub(super) fn new(members: usize, width: usize) -> Result<Self, BenchError> {
        let slots = || -> Result<Vec<Candidate>, BenchError> {
            let mut v = try_vec(members)?;
            v.extend((0..members).map(|_| Candidate::new()));
            Ok(v)
        };
        let row = || RowCopy(std::array::from_fn(|_| AtomicU64::new(0)));
        Ok(Self {
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            candidates: [slots()?, slots()?],
            diagonal: [row(), row()],
            pivots: atomics(width)?,
        })
    }

    /// Wait for all `parties` members. False once `main` is poisoned (a member panicked).
    pub(super) fn wait(&self, parties: usize, main: &Barrier) -> bool {
        if parties == 1 {
            return !main.is_poisoned();
        }
        let gen = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == parties {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation
                .store(gen.wrapping_add(1), Ordering::Release);
            return true;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == gen {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) {
                if main.is_poisoned() {
                    return false;
                }
                if spins >= 1 << 14 {
                    std::thread::yield_now();
                }
            }
            std::hint::spin_loop();
        }
        true
    }
}

/// A column-major `m × kb` panel with stride `lds`, as the team sees it.
#[derive(Clone, Copy)]
pub(super) struct Panel {
    pub(super) s: *mut f64,
    pub(super) lds: usize,
    pub(super) m: usize,
    pub(super) kb: usize,
}

impl Panel {
    /// # Safety
    /// `i < m`, `j < kb`.
    unsafe fn at(&self, i: usize, j: usize) -> *mut f64 {
        // SAFETY: inside the panel by the caller's bounds.
        unsafe { self.s.add(i + j * self.lds) }
    }

    /// # Safety
    /// In range, and no member writes the block while the view lives.
    unsafe fn view<'a>(&self, r: usize, c: usize, nr: usize, nc: usize) -> MatRef<'a, f64> {
        // SAFETY: forwarded from the caller.
        unsafe { MatRef::from_raw_parts(self.at(r, c), nr, nc, 1, self.lds as isize) }
    }

    /// # Safety
    /// In range, and this member alone touches the block while the view lives.
    unsafe fn view_mut<'a>(&self, r: usize, c: usize, nr: usize, nc: usize) -> MatMut<'a, f64> {
        // SAFETY: forwarded from the caller.
        unsafe { MatMut::from_raw_parts_mut(self.at(r, c), nr, nc, 1, self.lds as isize) }
    }
}

/// The transpositions that produce the row permutation `perm` (row i of the result is row
/// `perm[i]` of the input), in order, for its first `kb` rows: `swap(i, t)`, t ≥ i, for each
/// (LAPACK's pivot vector, as faer's LU reports a permutation instead). `order` and `place`
/// are scratch of `perm`'s length.
pub(super) fn transpositions(
    perm: &[usize],
    kb: usize,
    order: &mut [usize],
    place: &mut [usize],
    mut swap: impl FnMut(usize, usize),
) {
    for (i, (o, pl)) in order.iter_mut().zip(place.iter_mut()).enumerate() {
        *o = i;
        *pl = i;
    }
    for i in 0..kb {
        let want = perm[i];
        let at = place[want];
        let here = order[i];
        order[i] = want;
        order[at] = here;
        place[here] = at;
        place[want] = i;
        swap(i, at);
    }
}

/// `[lo, hi)` cut into `parts` near-equal contiguous shares: share `i`.
pub(super) fn split(i: usize, parts: usize, lo: usize, hi: usize) -> (usize, usize) {
    let len = hi - lo;
    (lo + len * i / parts, lo + len * (i + 1) / parts)
}

/// One member's view of the factorisation.
struct Member<'a> {
    team: &'a PanelTeam,
    main: &'a Barrier,
    tid: usize,
    parties: usize,
    p: Panel,
    /// The rows this member owns.
    rows: (usize, usize),
    pass: ColumnPass,
}

impl Member<'_> {
    fn wait(&self) -> bool {
        self.team.wait(self.parties, self.main)
    }

    /// This member's rows from `from` on.
    fn rows_from(&self, from: usize) -> (usize, usize) {
        (self.rows.0.max(from), self.rows.1.max(from))
    }

    fn owns(&self, row: usize) -> bool {
        (self.rows.0..self.rows.1).contains(&row)
    }

    /// Apply the interchanges of columns [j0, j1) to this member's share of columns [c0, c1).
    ///
    /// # Safety
    /// The team is between barriers in which only this call touches those columns.
    unsafe fn swap_columns(&self, j0: usize, j1: usize, c0: usize, c1: usize) {
        let (q0, q1) = split(self.tid, self.parties, c0, c1);
        for c in q0..q1 {
            for j in j0..j1 {
                let t = self.team.pivots[j].load(Ordering::Relaxed);
                if t != j {
                    // SAFETY: rows j < t < m, column c is this member's.
                    unsafe { core::ptr::swap(self.p.at(j, c), self.p.at(t, c)) };
                }
            }
        }
    }

    /// Factor columns [c0, c0 + w) (rows [c0, m)), recursively.
    ///
    /// # Safety
    /// As [`factor`]; on return every member has passed the same barriers.
    unsafe fn factor(&self, c0: usize, w: usize) -> bool {
        if w <= NBMIN {
            // SAFETY: forwarded.
            return unsafe { self.base(c0, w) };
        }
        let left = w / 2;
        let (cl, cr, wr) = (c0 + left, c0 + w, w - left);
        // SAFETY (this block): the barriers separate the phases; within a phase each member
        // writes only its own columns (interchanges, U₁₂) or its own rows (the update).
        unsafe {
            if !self.factor(c0, left) || !self.wait() {
                return false;
            }
            // The left half's interchanges and U₁₂ = L₁₁⁻¹ A₁₂ on this member's columns of
            // the right half (the same split for both, so no barrier between them).
            self.swap_columns(c0, cl, cl, cr);
            let (q0, q1) = split(self.tid, self.parties, cl, cr);
            if q1 > q0 {
                solve_unit_lower_triangular_in_place(
                    self.p.view(c0, c0, left, left),
                    self.p.view_mut(c0, q0, left, q1 - q0),
                    Par::Seq,
                );
            }
            if !self.wait() {
                return false;
            }
            // A₂₂ −= L₂₁ U₁₂ on this member's rows below the left half.
            let (r0, r1) = self.rows_from(cl);
            if r1 > r0 {
                faer::linalg::matmul::matmul(
                    self.p.view_mut(r0, cl, r1 - r0, wr),
                    Accum::Add,
                    self.p.view(r0, c0, r1 - r0, left),
                    self.p.view(c0, cl, left, wr),
                    -1.0,
                    Par::Seq,
                );
            }
            if !self.factor(cl, wr) || !self.wait() {
                return false;
            }
            self.swap_columns(cl, cr, c0, cl);
        }
        true
    }

    /// Eliminate columns [c0, c0 + w), w ≤ NBMIN, one at a time, left-looking: column j is
    /// brought up to date with the block's earlier columns in the same pass over the rows that
    /// scales column j − 1 into multipliers and finds column j's pivot candidate, so each row
    /// is read once per column and written twice (right-looking rewrites every later column of
    /// the block for every pivot). Interchanges reach only these columns (the recursion applies
    /// them to the others).
    ///
    /// The block's top rows (the pivot rows) are not updated in place while the block runs:
    /// every member keeps the copies it received at each pivot and derives the column of `U`
    /// it needs by a forward substitution over them (at most NBMIN² / 2 flops), so no member
    /// ever reads a row another is writing; their owners write the finished rows back at the
    /// end.
    ///
    /// # Safety
    /// As [`factor`].
    unsafe fn base(&self, c0: usize, w: usize) -> bool {
        let (team, p) = (self.team, self.p);
        let bits = |v: f64| v.to_bits();
        let value = |a: &AtomicU64| f64::from_bits(a.load(Ordering::Relaxed));
        // top[k]: the row that became row c0 + k, as received (columns < k its multipliers,
        // column k the pivot, columns > k not yet updated); ucols[c]: column c0 + c of U.
        let mut top = [[0.0f64; NBMIN]; NBMIN];
        let mut ucols = [[0.0f64; NBMIN]; NBMIN];
        let mut inv = 1.0;
        for j in c0..c0 + w {
            let jj = j - c0;
            let parity = j & 1;
            // U(c0..j, j) from the pivot rows received so far.
            let mut u = [0.0f64; NBMIN];
            for k in 0..jj {
                let mut v = top[k][jj];
                for (kk, &uk) in u[..k].iter().enumerate() {
                    v -= top[k][kk] * uk;
                }
                u[k] = v;
            }
            ucols[jj] = u;
            // SAFETY (this block): before the barrier each member reads and writes only its
            // own rows and its own candidate slot; after it, the pivot row and the diagonal row
            // are read from the slots, each of the two rows is written by its owner alone.
            unsafe {
                let (r0, r1) = self.rows_from(j);
                let mine = &team.candidates[parity][self.tid];
                if r1 > r0 {
                    let col = Column {
                        c0,
                        j,
                        rows: (r0, r1),
                        inv,
                    };
                    let (best, at) = (self.pass)(p, col, &u[..jj]);
                    mine.magnitude.store(bits(best), Ordering::Relaxed);
                    mine.row.store(at, Ordering::Relaxed);
                    for c in 0..w {
                        mine.values[c].store(bits(*p.at(at, c0 + c)), Ordering::Relaxed);
                    }
                } else {
                    mine.magnitude.store(bits(-1.0), Ordering::Relaxed);
                }
                if self.owns(j) {
                    for c in 0..w {
                        team.diagonal[parity].0[c].store(bits(*p.at(j, c0 + c)), Ordering::Relaxed);
                    }
                }
                if !self.wait() {
                    return false;
                }
                // The first largest magnitude: members own increasing rows, so a later member
                // wins only with a strictly larger one.
                let mut winner = 0;
                let mut best = f64::NEG_INFINITY;
                for (t, cand) in team.candidates[parity][..self.parties].iter().enumerate() {
                    let v = value(&cand.magnitude);
                    if v > best {
                        best = v;
                        winner = t;
                    }
                }
                let cand = &team.candidates[parity][winner];
                let piv = cand.row.load(Ordering::Relaxed);
                for (t, v) in top[jj][..w].iter_mut().zip(&cand.values) {
                    *t = value(v);
                }
                if self.tid == 0 {
                    team.pivots[j].store(piv, Ordering::Relaxed);
                }
                if piv != j && self.owns(piv) {
                    for c in 0..w {
                        *p.at(piv, c0 + c) = value(&team.diagonal[parity].0[c]);
                    }
                }
                // A zero pivot gives inf/NaN multipliers, which the residual check rejects.
                let pivot = top[jj][jj];
                inv = 1.0 / pivot;
            }
        }
        // SAFETY: the last column's multipliers and the pivot rows are this member's rows.
        unsafe {
            let (e0, e1) = self.rows_from(c0 + w);
            let last = core::slice::from_raw_parts_mut(p.at(e0, c0 + w - 1), e1 - e0);
            last.iter_mut().for_each(|v| *v *= inv);
            for k in 0..w {
                if self.owns(c0 + k) {
                    for c in 0..w {
                        let v = if c <= k { top[k][c] } else { ucols[c][k] };
                        *p.at(c0 + k, c0 + c) = v;
                    }
                }
            }
        }
        true
    }
}

/// The column in hand in the base case: column `j` of the block starting at column `c0`, a
/// member's `rows` of it, and the reciprocal of the previous column's pivot.
#[derive(Clone, Copy)]
struct Column {
    c0: usize,
    j: usize,
    rows: (usize, usize),
    inv: f64,
}

/// One column's pass over a member's rows of the panel in the base case: column j − 1 scaled
/// into multipliers (by `inv`, when j is not the block's first column), column j −= the block's
/// earlier columns times `u`, and the first row of largest magnitude in column j.
type ColumnPass = unsafe fn(Panel, Column, &[f64]) -> (f64, usize);

/// The column pass for this CPU: the same loop compiled for AVX-512 or AVX2 + FMA where the
/// CPU has them (the binary is built for baseline x86-64), with fused multiply-adds.
fn column_pass() -> ColumnPass {
    #[cfg(target_arch = "x86_64")]
    {
        if hostbench_core::isa::avx512f() {
            return pass_avx512;
        }
        if hostbench_core::isa::avx2_fma() {
            return pass_avx2;
        }
    }
    // Every AArch64 CPU has fused multiply-add.
    pass_body::<{ cfg!(target_arch = "aarch64") }>
}

/// [`pass_body`] compiled for an instruction set the binary's baseline lacks.
macro_rules! pass_for {
    ($name:ident, $features:literal) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name(p: Panel, col: Column, u: &[f64]) -> (f64, usize) {
            // SAFETY: forwarded; the CPU has the features (checked by `column_pass`).
            unsafe { pass_body::<true>(p, col, u) }
        }
    };
}

pass_for!(pass_avx512, "avx512f,avx2,fma");
pass_for!(pass_avx2, "avx2,fma");

/// The pass itself, eight rows at a time (vectorised by the compiler within the target's
/// features): each lane keeps its own first maximum, and the lanes' maxima are reduced to the
/// first row at the end.
///
/// # Safety
/// Rows [r0, r1) and columns [c0, j] are inside the panel and this member's alone.
#[inline(always)]
unsafe fn pass_body<const FMA: bool>(p: Panel, col: Column, u: &[f64]) -> (f64, usize) {
    const L: usize = 8;
    let Column {
        c0,
        j,
        rows: (r0, r1),
        inv,
    } = col;
    let fms = |acc: f64, a: f64, b: f64| {
        if FMA {
            (-a).mul_add(b, acc)
        } else {
            acc - a * b
        }
    };
    let nk = u.len();
    let mut best = [-1.0f64; L];
    let mut at = [usize::MAX; L];
    let mut i = r0;
    // SAFETY (both loops): in range by the caller's contract.
    unsafe {
        while i + L <= r1 {
            let mut acc = [0.0f64; L];
            let cj = p.at(i, j);
            if nk > 0 {
                let prev = p.at(i, j - 1);
                for l in 0..L {
                    *prev.add(l) *= inv;
                }
            }
            for (l, a) in acc.iter_mut().enumerate() {
                *a = *cj.add(l);
            }
            for (k, &uk) in u.iter().enumerate() {
                let col = p.at(i, c0 + k);
                for (l, a) in acc.iter_mut().enumerate() {
                    *a = fms(*a, *col.add(l), uk);
                }
            }
            for l in 0..L {
                *cj.add(l) = acc[l];
                let v = acc[l].abs();
                if v > best[l] {
                    best[l] = v;
                    at[l] = i + l;
                }
            }
            i += L;
        }
        for i in i..r1 {
            if nk > 0 {
                *p.at(i, j - 1) *= inv;
            }
            let mut acc = *p.at(i, j);
            for (k, &uk) in u.iter().enumerate() {
                acc = fms(acc, *p.at(i, c0 + k), uk);
            }
            *p.at(i, j) = acc;
            let v = acc.abs();
            let lane = i % L;
            if v > best[lane] || (v == best[lane] && i < at[lane]) {
                best[lane] = v;
                at[lane] = i;
            }
        }
    }
    let mut out = (-1.0f64, usize::MAX);
    for l in 0..L {
        if best[l] > out.0 || (best[l] == out.0 && at[l] < out.1) {
            out = (best[l], at[l]);
        }
    }
    if out.1 == usize::MAX {
        // A column of NaNs: propose its first row (the residual check rejects the result).
        out = (0.0, r0);
    }
    out
}

/// Factor the panel in place: `P·A = L·U` with L unit lower triangular below the diagonal and U
/// on and above it, the transpositions in `team.pivots[..kb]`. Called by each of `parties`
/// members (`tid < parties`) with the same arguments; returns false if the solve was poisoned.
/// On return every member has passed the final barrier, so the factors are complete.
///
/// # Safety
/// `p` describes a valid panel (`m ≥ kb`, `kb ≤ ` the team's width) that only the team touches
/// during the call, and `parties` is at most the team's size.
pub(super) unsafe fn factor(
    team: &PanelTeam,
    main: &Barrier,
    tid: usize,
    parties: usize,
    p: Panel,
) -> bool {
    let me = Member {
        team,
        main,
        tid,
        parties,
        p,
        rows: split(tid, parties, 0, p.m),
        pass: column_pass(),
    };
    // SAFETY: forwarded.
    unsafe { me.factor(0, p.kb) && me.wait() }
}

#[cfg(test)]
mod tests_support {
    use super::*;
    use faer::linalg::lu::partial_pivoting::factor::{lu_in_place, lu_in_place_scratch};
    use faer::Mat;

    pub(super) fn random(m: usize, kb: usize, seed: u64) -> Vec<f64> {
        let mut state = seed;
        (0..m * kb)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            })
            .collect()
    }

    /// Factor with `parties` members on real threads; returns the factors and the pivots.
    pub(super) fn team_factor(
        a: &[f64],
        m: usize,
        kb: usize,
        parties: usize,
    ) -> (Vec<f64>, Vec<usize>) {
        let mut s = a.to_vec();
        let piv = team_factor_in(&mut s, m, kb, parties);
        (s, piv)
    }

    /// The same, in place.
    pub(super) fn team_factor_in(s: &mut [f64], m: usize, kb: usize, parties: usize) -> Vec<usize> {
        let team = PanelTeam::new(parties, kb).unwrap();
        let main = Barrier::new(1);
        let panel = Panel {
            s: s.as_mut_ptr(),
            lds: m,
            m,
            kb,
        };
        struct Send(Panel);
        // SAFETY: the members touch the panel under the ownership rules of `factor`.
        unsafe impl Sync for Send {}
        let shared = Send(panel);
        std::thread::scope(|scope| {
            for tid in 0..parties {
                let (team, main, shared) = (&team, &main, &shared);
                // SAFETY: the panel is valid and only the team touches it.
                scope.spawn(move || assert!(unsafe { factor(team, main, tid, parties, shared.0) }));
            }
        });
        team.pivots
            .iter()
            .map(|v| v.load(Ordering::Relaxed))
            .collect()
    }

    /// The transpositions faer's own LU implies, and its factors.
    pub(super) fn faer_factor(a: &[f64], m: usize, kb: usize) -> (Vec<f64>, Vec<usize>) {
        let mut s = a.to_vec();
        let piv = faer_factor_in(&mut s, m, kb);
        (s, piv)
    }

    /// The same, in place.
    pub(super) fn faer_factor_in(s: &mut [f64], m: usize, kb: usize) -> Vec<usize> {
        let (mut perm, mut inv) = (vec![0usize; m], vec![0usize; m]);
        let mut mem = faer::dyn_stack::MemBuffer::new(lu_in_place_scratch::<usize, f64>(
            m,
            kb,
            Par::Seq,
            Default::default(),
        ));
        lu_in_place(
            MatMut::from_column_major_slice_mut(s, m, kb),
            &mut perm,
            &mut inv,
            Par::Seq,
            faer::dyn_stack::MemStack::new(&mut mem),
            Default::default(),
        );
        let (mut order, mut place) = (vec![0; m], vec![0; m]);
        let mut piv = vec![0; kb];
        transpositions(&perm, kb, &mut order, &mut place, |i, at| piv[i] = at);
        piv
    }

    /// ‖P·A − L·U‖ / ‖A‖ over the panel.
    pub(super) fn backward_error(a: &[f64], f: &[f64], piv: &[usize], m: usize, kb: usize) -> f64 {
        let mut pa = Mat::from_fn(m, kb, |i, j| a[i + j * m]);
        for (j, &t) in piv.iter().enumerate() {
            for c in 0..kb {
                let tmp = pa[(j, c)];
                pa[(j, c)] = pa[(t, c)];
                pa[(t, c)] = tmp;
            }
        }
        let l = Mat::from_fn(m, kb, |i, j| match i.cmp(&j) {
            std::cmp::Ordering::Greater => f[i + j * m],
            std::cmp::Ordering::Equal => 1.0,
            std::cmp::Ordering::Less => 0.0,
        });
        let u = Mat::from_fn(kb, kb, |i, j| if i <= j { f[i + j * m] } else { 0.0 });
        let lu = &l * &u;
        let mut worst = 0.0f64;
        for i in 0..m {
            for j in 0..kb {
                worst = worst.max((pa[(i, j)] - lu[(i, j)]).abs());
            }
        }
        worst
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::*;
    use super::*;

    #[test]
    fn team_factors_match_a_single_threaded_lu() {
        // Ragged sizes: odd recursion splits, base blocks narrower than NBMIN, members whose
        // rows run out before the panel's last column (m = kb).
        for (m, kb) in [(700, 256), (301, 37), (64, 64), (40, 9)] {
            let a = random(m, kb, (m * kb) as u64);
            let (reference, ref_piv) = faer_factor(&a, m, kb);
            for parties in [1, 2, 3, 5] {
                let (f, piv) = team_factor(&a, m, kb, parties);
                assert_eq!(piv, ref_piv, "m={m} kb={kb} parties={parties}: pivots");
                let diff = f
                    .iter()
                    .zip(&reference)
                    .fold(0.0f64, |d, (x, y)| d.max((x - y).abs()));
                assert!(diff < 1e-10, "m={m} kb={kb} parties={parties}: {diff}");
                let err = backward_error(&a, &f, &piv, m, kb);
                assert!(
                    err < 1e-12,
                    "m={m} kb={kb} parties={parties}: ‖PA − LU‖ {err}"
                );
            }
        }
    }

    #[test]
    fn the_first_largest_entry_is_the_pivot_across_members() {
        // Column 0's largest magnitude appears twice, in different members' rows: the first
        // (LAPACK's idamax) is taken, whoever proposes it.
        let (m, kb) = (90, 4);
        let mut a = random(m, kb, 3);
        a[20] = -2.0;
        a[70] = 2.0;
        for parties in [1, 2, 3] {
            let (_, piv) = team_factor(&a, m, kb, parties);
            assert_eq!(piv[0], 20, "parties={parties}");
        }
    }

    #[test]
    fn a_zero_column_gives_non_finite_factors_not_a_hang() {
        let (m, kb) = (50, 8);
        let mut a = random(m, kb, 5);
        a[2 * m..3 * m].iter_mut().for_each(|v| *v = 0.0);
        let (f, _) = team_factor(&a, m, kb, 2);
        assert!(f.iter().any(|v| !v.is_finite()));
    }

    #[test]
    fn a_poisoned_solve_releases_the_team() {
        let team = PanelTeam::new(2, 8).unwrap();
        let main = Barrier::new(1);
        main.poison();
        assert!(!team.wait(2, &main));
    }
}

#[cfg(test)]
mod timing {
    //! `cargo test --release -p hostbench-cpu --lib panel_timing -- --ignored --nocapture`:
    //! the team's panel against faer's single-threaded LU (a measurement, not a test; the
    //! copy of the panel into place is not timed). `HOSTBENCH_PANEL_ONLY=<parties>` runs that
    //! team alone at m = 8192, for a profiler.
    use super::tests_support::*;
    use std::time::Instant;

    #[test]
    #[ignore]
    fn panel_timing() {
        let kb = 256;
        let only: Option<usize> = std::env::var("HOSTBENCH_PANEL_ONLY")
            .ok()
            .and_then(|v| v.parse().ok());
        let sizes: &[usize] = if only.is_some() {
            &[8192]
        } else {
            &[2048, 4096, 8192, 16384]
        };
        for &m in sizes {
            let a = random(m, kb, 1);
            let mut s = a.clone();
            let mut med = |f: &dyn Fn(&mut [f64])| {
                let mut t: Vec<f64> = (0..if only.is_some() { 60 } else { 9 })
                    .map(|_| {
                        s.copy_from_slice(&a);
                        let t0 = Instant::now();
                        f(&mut s);
                        t0.elapsed().as_secs_f64() * 1e3
                    })
                    .collect();
                t.sort_by(f64::total_cmp);
                t[t.len() / 2]
            };
            if let Some(parties) = only {
                let t = med(&|s| drop(team_factor_in(s, m, kb, parties)));
                println!("m={m}: team of {parties} {t:.2} ms");
                continue;
            }
            let faer = med(&|s| drop(faer_factor_in(s, m, kb)));
            let t1 = med(&|s| drop(team_factor_in(s, m, kb, 1)));
            let t2 = med(&|s| drop(team_factor_in(s, m, kb, 2)));
            println!("m={m}: faer {faer:.2} ms, team of 1 {t1:.2} ms, team of 2 {t2:.2} ms");
        }
    }
}
