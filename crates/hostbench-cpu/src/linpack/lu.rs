//! The LU itself: a right-looking blocked LU with partial pivoting and a look-ahead of one
//! panel, and the blocked solve, on whichever micro-kernel the run chose.
//!
//! In each step the threads first bring the next panel up to date, in up to four pieces they
//! claim, then the panel team factors it (in a column-major scratch copy: faer's recursive
//! partial-pivoting LU on thread 0 alone, or `panel`'s LU shared by several threads) while the
//! other threads claim column chunks of the trailing update from an atomic counter. Row interchanges are applied as a
//! gather and never to earlier panels' `L` (the LINPACK `dgesl` convention; the forward
//! substitution applies them as it goes). `U₁₂ = L₁₁⁻¹ A₁₂` multiplies by the inverse of the
//! unit lower triangle, formed once per panel, so it runs on the same micro-kernel as the
//! trailing update `A₂₂ −= L₂₁ U₁₂`. The solve is blocked the same way, with the matrix–vector
//! products split over the threads. The header of the parent module describes the scheme in
//! full.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::lu::partial_pivoting::factor::{
    lu_in_place, lu_in_place_scratch, PartialPivLuParams,
};
use faer::linalg::triangular_solve::solve_unit_lower_triangular_in_place;
use faer::{Accum, Auto, MatMut, Par, Spec};
use hostbench_core::BenchError;

#[cfg(test)]
use super::micro::Scalar;
#[cfg(target_arch = "x86_64")]
use super::micro::{avx2_available, Avx2};
use super::micro::{avx512, Backend, FaerOnly, Micro};
use super::panel::{self, Panel, PanelTeam};
use super::sync::{atomics, team, Barrier, Guided, Shared};
use super::system::{alloc_error, try_vec, AlignedBuf, System};

/// Panel width. HPL's tuning guide puts NB in 32..256; 256 keeps the update's inner dimension
/// long enough for the micro-kernel while the panel work (which grows with NB) stays small.
pub const NB: usize = 256;
/// Widest column chunk of the trailing update: the packed `U₁₂` chunk (CHUNK × NB doubles,
/// 576 KiB) stays in a 1 MiB L2 while each packed `L₂₁` micro-panel is reused across it.
const CHUNK: usize = 288;

// ---------------------------------------------------------------------------------------------
// The parallel factorisation

/// Told the share of the factorisation's work done so far (0 to 1) after every panel, by the
/// thread that factors the panels: a solve at a memory-sized n takes minutes.
pub(in crate::linpack) type Progress<'a> = Option<&'a (dyn Fn(f64) + Sync)>;

/// One factorisation and solve: the answer, its wall time and where the time went.
pub(in crate::linpack) struct Solved {
    pub(super) x: Vec<f64>,
    /// Wall time of the factorisation plus the solve.
    pub(super) seconds: f64,
    /// Time thread 0 spent factoring panels (the latency-bound part the look-ahead hides).
    pub(super) panel_s: f64,
    /// Time all workers together spent waiting at the factorisation's step barriers: work the
    /// look-ahead did not hide (and the load imbalance at the end of each step).
    pub(super) wait_s: f64,
    /// Threads that factored the first panel together (the last, short panels take fewer).
    pub(super) panel_threads: usize,
}

/// The worker threads, and how many of them factor each panel together.
#[derive(Clone, Copy, Debug)]
pub(in crate::linpack) struct Workers {
    pub(super) threads: usize,
    pub(super) panel: usize,
}

impl Workers {
    /// `threads` workers, one panel member per four of them, at most four: on two threads the
    /// panel hides behind the other thread's update and faer's single-threaded LU is the
    /// fastest (it was 1.2 times the team's own code on one thread); on sixteen one thread was
    /// the critical path. `HOSTBENCH_LINPACK_PANEL_THREADS` overrides the choice, for
    /// measuring it; the record states the count used.
    pub(in crate::linpack) fn new(threads: usize) -> Self {
        let chosen = (threads / 4).clamp(1, 4);
        let panel = std::env::var("HOSTBENCH_LINPACK_PANEL_THREADS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|&p| p >= 1)
            .unwrap_or(chosen);
        Self {
            threads,
            panel: panel.min(threads),
        }
    }
}

/// Factor `sys.a` in place and solve for `sys.b` with `backend`.
pub(super) fn factor_and_solve(
    sys: &mut System,
    workers: Workers,
    backend: Backend,
    progress: Progress<'_>,
) -> Result<Solved, BenchError> {
    match backend {
        Backend::Faer => factor_and_solve_with::<FaerOnly>(sys, workers, progress),
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 if avx2_available() => factor_and_solve_with::<Avx2>(sys, workers, progress),
        Backend::Avx2 => Err(BenchError::unsupported("this CPU has no AVX2 + FMA")),
        Backend::Avx512 => avx512::factor_and_solve(sys, workers, progress),
        #[cfg(test)]
        Backend::Scalar => factor_and_solve_with::<Scalar>(sys, workers, progress),
    }
}

/// Thread 0's private workspace for factoring panels.
struct PanelScratch {
    perm: Vec<usize>,
    perm_inv: Vec<usize>,
    /// The row order (while replaying faer's permutation as transpositions, and as the panel's
    /// interchanges leave it), and its inverse.
    order: Vec<usize>,
    place: Vec<usize>,
    targets: Vec<usize>,
    mem: MemBuffer,
}

/// What the threads that factor a panel share: its column-major copy, `L₁₁⁻¹` as it is formed,
/// and their team.
struct PanelShared {
    /// Column-major copy of the panel, stride `lds`.
    s: *mut f64,
    lds: usize,
    /// `L₁₁⁻¹`, NB × NB column-major.
    inv: *mut f64,
    team: PanelTeam,
    members: usize,
}

// SAFETY: the buffers are written by the members of the panel team only, each its own rows or
// columns between the team's barriers (see `factor_panel`), and read by the others only after
// the step barrier.
unsafe impl Sync for PanelShared {}

/// The fewest rows per panel member: on a shorter panel the barriers cost more than the rows.
const MIN_MEMBER_ROWS: usize = 512;

impl PanelShared {
    /// Members that factor a panel of `m` rows (every thread computes the same count).
    fn parties(&self, m: usize) -> usize {
        self.members.min(m / MIN_MEMBER_ROWS).max(1)
    }
}

fn panel_params() -> PartialPivLuParams {
    // faer's default recursion threshold is 16; 8 measured a little faster on tall panels.
    PartialPivLuParams {
        recursion_threshold: 8,
        ..<PartialPivLuParams as Auto<f64>>::auto()
    }
}

fn zeros(len: usize) -> Result<Vec<usize>, BenchError> {
    let mut v = try_vec(len)?;
    v.resize(len, 0);
    Ok(v)
}

pub(super) fn factor_and_solve_with<K: Micro>(
    sys: &mut System,
    workers: Workers,
    progress: Progress<'_>,
) -> Result<Solved, BenchError> {
    let threads = workers.threads;
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
        mem,
    };
    let mut s_buf = AlignedBuf::new(lds * NB, true)?;
    let mut inv_buf = AlignedBuf::new(NB * NB, false)?;
    let pan = PanelShared {
        s: s_buf.as_mut_ptr(),
        lds,
        inv: inv_buf.as_mut_ptr(),
        team: PanelTeam::new(workers.panel, NB)?,
        members: workers.panel,
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
        la_counters: atomics(npan)?,
        la_done: atomics(npan)?,
        barrier: Barrier::new(threads),
        x: x.as_mut_ptr(),
        panel_ns: AtomicU64::new(0),
        wait_ns: AtomicU64::new(0),
        progress,
    };
    warm_up_faer();
    // Thread 0 factors the panels: the panel scratch is its alone.
    let mut ps = Some(ps);
    let states: Vec<_> = apacks.iter_mut().map(|apack| (ps.take(), apack)).collect();
    let seconds = team("linpack", states, &sh.barrier, |tid, (ps, apack)| {
        worker::<K>(&sh, &pan, tid, ps, apack.as_mut_slice())
    })?;
    let secs = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 * 1e-9;
    Ok(Solved {
        panel_s: secs(&sh.panel_ns),
        wait_s: secs(&sh.wait_ns),
        panel_threads: pan.parties(n),
        x,
        seconds,
    })
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

fn worker<K: Micro>(
    sh: &Shared<'_>,
    pan: &PanelShared,
    tid: usize,
    mut ps: Option<PanelScratch>,
    apack: &mut [f64],
) {
    let n = sh.n;
    let npan = n.div_ceil(NB);
    // Where the time goes, for the record (two clock reads per step and thread: nothing next
    // to a step's milliseconds of GEMM). Every panel member times its panels; the record's
    // panel time is thread 0's, whatever the team.
    let (mut panel_s, mut wait_s) = (0.0f64, 0.0f64);
    let timed = |f: &mut dyn FnMut(), acc: &mut f64| {
        let t = Instant::now();
        f();
        *acc += t.elapsed().as_secs_f64();
    };
    let mut ok = true;
    if tid < pan.parties(n) {
        // SAFETY: the other threads wait at the barrier below.
        timed(
            &mut || ok = unsafe { factor_panel::<K>(sh, pan, 0, tid, ps.as_mut()) },
            &mut panel_s,
        );
    }
    if ok {
        timed(&mut || ok = sh.barrier.wait(), &mut wait_s);
    }
    if !ok {
        return;
    }
    for p in 0..npan {
        let k = p * NB;
        let rest0 = k + NB.min(n - k);
        let next_end = rest0 + NB.min(n - rest0);
        // Look-ahead: the next panel's columns first, in pieces every thread claims (on one
        // thread they were as much work as the panel's factorisation, and on sixteen threads
        // that thread was the critical path), then the panel team factors the panel once all
        // pieces are done, while the others go on to the columns after it.
        let pieces = lookahead_pieces::<K>(sh.threads, next_end - rest0);
        if rest0 < n {
            let width = (next_end - rest0).div_ceil(pieces);
            loop {
                let c = sh.la_counters[p].fetch_add(1, Ordering::Relaxed);
                if c >= pieces {
                    break;
                }
                let j0 = rest0 + c * width;
                // SAFETY: the counter hands piece c to exactly one thread.
                unsafe { update_cols::<K>(sh, p, j0, (j0 + width).min(next_end), apack) };
                sh.la_done[p].fetch_add(1, Ordering::Release);
            }
        }
        if rest0 < n && tid < pan.parties(n - rest0) {
            // The pieces' writes happen before the panel is read (Release/Acquire).
            let mut spins = 0u32;
            while sh.la_done[p].load(Ordering::Acquire) < pieces {
                spins += 1;
                if spins.is_multiple_of(1024) {
                    if sh.barrier.is_poisoned() {
                        return;
                    }
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            // SAFETY: the team alone owns columns [rest0, next_end) now: every piece of them
            // is done and no one else touches them in this step.
            timed(
                &mut || ok = unsafe { factor_panel::<K>(sh, pan, p + 1, tid, ps.as_mut()) },
                &mut panel_s,
            );
            if !ok {
                return;
            }
        }
        if tid == 0 {
            if let Some(report) = sh.progress {
                // The work left after this step is the trailing (n - next_end)³ of n³.
                let left = (n - next_end.min(n)) as f64 / n as f64;
                report(1.0 - left * left * left);
            }
        }
        if next_end < n {
            // Guided claims: wide ones first (each packed L21 panel reused across the chunk),
            // narrow ones last, so the threads, the panel team among them, end the step
            // together.
            let claims = Guided::new(sh.threads, K::MR, CHUNK);
            while let Some((at, w)) = claims.claim(&sh.counters[p], n - next_end) {
                let j0 = next_end + at;
                // SAFETY: the counter hands columns [at, at + w) to exactly one thread.
                unsafe { update_cols::<K>(sh, p, j0, j0 + w, apack) };
            }
        }
        timed(&mut || ok = sh.barrier.wait(), &mut wait_s);
        if !ok {
            return;
        }
    }
    let ns = |s: f64| (s * 1e9) as u64;
    if tid == 0 {
        sh.panel_ns.fetch_add(ns(panel_s), Ordering::Relaxed);
    }
    sh.wait_ns.fetch_add(ns(wait_s), Ordering::Relaxed);
    // SAFETY: the factorisation is complete on all threads (last barrier).
    unsafe { solve::<K>(sh, tid) };
}

/// Pieces the next panel's `cols` columns are cut into for the look-ahead: one per thread up to
/// four (more would make pieces too narrow for the micro-kernel's reuse), none narrower than
/// four register tiles.
fn lookahead_pieces<K: Micro>(threads: usize, cols: usize) -> usize {
    threads.min(4).min(cols.div_ceil(4 * K::MR)).max(1)
}

/// Factor panel p (rows [k, n), columns [k, k + kb)) in a column-major copy, record its
/// interchanges, prepare the packed operands of the updates and write the panel back. Called
/// by every member of the panel's team (`tid < pan.parties(m)`; thread 0, which holds `ps`,
/// always among them): the copies, `L₁₁⁻¹` and the packing are split between them, the
/// factorisation is faer's on one member and the team's on several, and thread 0 alone turns
/// the interchanges into the updates' gather lists. False if the solve was poisoned.
///
/// # Safety
/// The team owns the panel's columns, and panel buffers p % 2, in this step.
unsafe fn factor_panel<K: Micro>(
    sh: &Shared<'_>,
    pan: &PanelShared,
    p: usize,
    tid: usize,
    ps: Option<&mut PanelScratch>,
) -> bool {
    let n = sh.n;
    let k = p * NB;
    let kb = NB.min(n - k);
    let m = n - k;
    let parties = pan.parties(m);
    let (lds, s) = (pan.lds, pan.s);
    let wait = || pan.team.wait(parties, &sh.barrier);
    // Rows in whole groups of eight, for the copies.
    let (r0, r1) = {
        let (a, b) = panel::split(tid, parties, 0, m.div_ceil(8));
        (8 * a, (8 * b).min(m))
    };
    // SAFETY: the panel is owned (caller); S holds lds × NB values; each member copies its
    // own rows, and the team's barrier separates the copy from the factorisation.
    unsafe { copy_panel(sh, k, r0, r1, kb, s, lds, true) };
    if !wait() {
        return false;
    }
    let pivots = &pan.team.pivots;
    let mut ps = ps;
    if parties == 1 {
        let ps = ps
            .as_deref_mut()
            .expect("thread 0 is a member of every panel team");
        // SAFETY: S is m × kb column-major with stride lds and only this thread touches it.
        let panel = unsafe { MatMut::from_raw_parts_mut(s, m, kb, 1, lds as isize) };
        // faer reports a permutation, never a failure: a zero pivot gives inf/NaN, which the
        // residual check then rejects.
        let _ = lu_in_place(
            panel,
            &mut ps.perm[..m],
            &mut ps.perm_inv[..m],
            Par::Seq,
            MemStack::new(&mut ps.mem),
            Spec::new(panel_params()),
        );
        panel::transpositions(
            &ps.perm[..m],
            kb,
            &mut ps.order[..m],
            &mut ps.place[..m],
            |i, at| pivots[i].store(at, Ordering::Relaxed),
        );
    } else {
        let view = Panel { s, lds, m, kb };
        // SAFETY: the team alone touches S; every member calls with the same arguments.
        if !unsafe { panel::factor(&pan.team, &sh.barrier, tid, parties, view) } {
            return false;
        }
    }
    if let Some(ps) = ps {
        // SAFETY: thread 0 alone writes the pivot lists; the others read them after the step
        // barrier.
        unsafe { record_interchanges(sh, p, kb, pivots, ps) };
    }

    if K::PACKED {
        // −L₁₁⁻ᵀ in NR-column panels: U₁₂ᵀ = A₁₂ᵀ L₁₁⁻ᵀ then runs on the micro-kernel. Forming
        // the inverse costs kb³/3 flops once per panel, against kb² per column it saves. Each
        // member forms its share of the inverse's columns (they are independent) and writes
        // their entries.
        let (q0, q1) = panel::split(tid, parties, 0, kb);
        let nr = K::NR;
        if q1 > q0 {
            // SAFETY: columns [q0, q1) of the inverse are this member's; L₁₁ in S is read-only
            // now.
            let (mut im, l11) = unsafe {
                (
                    MatMut::from_raw_parts_mut(pan.inv.add(q0 * kb), kb, q1 - q0, 1, kb as isize),
                    faer::MatRef::from_raw_parts(s, kb, kb, 1, lds as isize),
                )
            };
            for j in 0..q1 - q0 {
                for i in 0..kb {
                    im[(i, j)] = if i == j + q0 { 1.0 } else { 0.0 };
                }
            }
            solve_unit_lower_triangular_in_place(l11, im.as_mut(), Par::Seq);
            let dst = sh.linv[p % 2];
            for q in 0..kb.div_ceil(nr) {
                for kk in q0..q1 {
                    for cc in 0..nr {
                        let c = q * nr + cc;
                        let v = if c < kb { -im[(c, kk - q0)] } else { 0.0 };
                        // SAFETY: linv holds ceil(NB/NR)·NR·NB values; buffer p % 2 is the
                        // team's, and entry kk this member's.
                        unsafe { *dst.add((q * kb + kk) * nr + cc) = v };
                    }
                }
            }
        }
        // L₂₁ᵀ in NR-column panels (rows of L₂₁ become columns): the B operand of the update,
        // each member its share of the panels.
        let dst = sh.lpack[p % 2];
        let m2 = m - kb;
        let (g0, g1) = panel::split(tid, parties, 0, m2.div_ceil(nr));
        for q in g0..g1 {
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
    // SAFETY: as for the copy in; S is only read now.
    unsafe { copy_panel(sh, k, r0, r1, kb, s, lds, false) };
    true
}

/// The panel's transpositions (`pivots[i]`: panel row i was swapped with panel row
/// `pivots[i] ≥ i`) as the LAPACK pivot vector the solve needs and the gather and move lists
/// of the updates.
///
/// # Safety
/// Thread 0 alone writes the lists of panel p; the others read them after the step barrier.
unsafe fn record_interchanges(
    sh: &Shared<'_>,
    p: usize,
    kb: usize,
    pivots: &[std::sync::atomic::AtomicUsize],
    ps: &mut PanelScratch,
) {
    let k = p * NB;
    let m = sh.n - k;
    let order = &mut ps.order[..m];
    for (i, o) in order.iter_mut().enumerate() {
        *o = i;
    }
    ps.targets.clear();
    for (i, slot) in pivots[..kb].iter().enumerate() {
        let at = slot.load(Ordering::Relaxed);
        order.swap(i, at);
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
}

/// Copy rows [r0, r1) of the panel between A (row-major) and S (column-major):
/// `S[r + c·lds] = A(k + r, k + c)` when `into_s`, the reverse otherwise. Eight rows at a time,
/// so S is written a cache line at a time and A is read eight rows in parallel.
///
/// # Safety
/// The rows are owned by the caller, `r1 ≤ m`, and S holds `lds × kb` values.
#[allow(clippy::too_many_arguments)]
unsafe fn copy_panel(
    sh: &Shared<'_>,
    k: usize,
    r0: usize,
    r1: usize,
    kb: usize,
    s: *mut f64,
    lds: usize,
    into_s: bool,
) {
    let mut r = r0;
    while r < r1 {
        let rb = 8.min(r1 - r);
        for c in 0..kb {
            for rr in 0..rb {
                // SAFETY: r + rr < m, c < kb: inside both the panel and S.
                unsafe {
                    let ap = sh.at(k + r + rr, k + c);
                    let sp = s.add(r + rr + c * lds);
                    if into_s {
                        *sp = *ap;
                    } else {
                        *ap = *sp;
                    }
                }
            }
        }
        r += rb;
    }
}

/// Pack rows `src(kk)`, kk < kb, columns [j0, j0 + w) of A into MR-column panels (k-major).
///
/// # Safety
/// The rows and columns are in range; `dst` holds `ceil(w / MR)·MR·kb` values.
unsafe fn pack_rows<K: Micro>(
    dst: *mut f64,
    sh: &Shared<'_>,
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
unsafe fn update_cols<K: Micro>(
    sh: &Shared<'_>,
    p: usize,
    j0: usize,
    j1: usize,
    apack: &mut [f64],
) {
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
unsafe fn solve<K: Micro>(sh: &Shared<'_>, tid: usize) {
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
    use crate::linpack::micro::avx2_available;
    use crate::linpack::system::{run_with, LinpackOutcome};
    use crate::linpack::test_support::{cfg, max_abs};
    use faer::linalg::solvers::Solve;
    use faer::MatRef;

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
    fn a_panel_team_solves_with_every_backend() {
        // n = 1540: the first panels are tall enough for three members (at least
        // MIN_MEMBER_ROWS rows each), later ones for two, the last ones fall back to one; more
        // members than CPUs on the test machine, so the team's barriers are oversubscribed.
        // Off x86-64 (under emulation in CI) the scalar kernel takes half a minute at this n:
        // faer's backend runs the team there, and the panel's own tests run everywhere.
        let mut backends = backends();
        if cfg!(not(target_arch = "x86_64")) {
            backends.retain(|b| *b == Backend::Faer);
        }
        for backend in backends {
            for (threads, panel) in [(3, 2), (4, 3)] {
                let mut sys = System::generate(&cfg(1540, threads)).unwrap();
                let solved =
                    factor_and_solve(&mut sys, Workers { threads, panel }, backend, None).unwrap();
                let out = LinpackOutcome::new(&sys, threads, &solved);
                assert!(
                    out.passed,
                    "{backend:?}, {threads} threads, {panel} in the panel team: residual {}",
                    out.residual
                );
                assert_eq!(out.panel_threads, panel);
            }
        }
    }

    #[test]
    fn the_panel_team_grows_with_the_threads() {
        // Without the override in the environment (the tests never set it).
        if std::env::var_os("HOSTBENCH_LINPACK_PANEL_THREADS").is_none() {
            let team = |t| Workers::new(t).panel;
            assert_eq!(
                [team(1), team(2), team(7), team(8), team(16), team(64)],
                [1, 1, 1, 2, 4, 4]
            );
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
            let x = factor_and_solve(&mut sys, Workers::new(2), backend, None)
                .unwrap()
                .x;
            let diff = max_abs((0..n).map(|i| x[i] - reference[(i, 0)]));
            assert!(
                diff / scale < 1e-10,
                "{backend:?}: relative difference {}",
                diff / scale
            );
        }
    }
}
