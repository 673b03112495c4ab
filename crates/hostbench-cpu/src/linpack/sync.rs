//! The synchronisation of the worker threads: a barrier that a panicking worker poisons
//! instead of leaving the others waiting forever, and the state all workers share (the matrix,
//! the pivots carried in atomics, the double-buffered packed operands, the chunk counters),
//! with the ownership rules that make sharing it sound.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use faer::{MatMut, MatRef};
use hostbench_core::{affinity, BenchError};

use super::lu::Progress;
use super::system::try_vec;

/// A barrier that can be poisoned: a worker that panics releases the others instead of leaving
/// them waiting forever. `wait` returns false once poisoned.
pub(in crate::linpack) struct Barrier {
    parties: usize,
    generation: AtomicUsize,
    state: Mutex<BarrierState>,
    cv: Condvar,
    /// Set under the lock (so a sleeping waiter cannot miss it), read without it by the panel
    /// team's spinning barrier.
    poisoned: AtomicBool,
}

struct BarrierState {
    arrived: usize,
}

impl Barrier {
    pub(in crate::linpack) fn new(parties: usize) -> Self {
        Self {
            parties,
            generation: AtomicUsize::new(0),
            state: Mutex::new(BarrierState { arrived: 0 }),
            cv: Condvar::new(),
            poisoned: AtomicBool::new(false),
        }
    }

    pub(in crate::linpack) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    fn lock(&self) -> MutexGuard<'_, BarrierState> {
        // A panic while holding this lock cannot leave the counters inconsistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(in crate::linpack) fn wait(&self) -> bool {
        let mut st = self.lock();
        if self.is_poisoned() {
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
        while self.generation.load(Ordering::Acquire) == gen && !self.is_poisoned() {
            st = self.cv.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        self.generation.load(Ordering::Acquire) != gen
    }

    pub(in crate::linpack) fn poison(&self) {
        let _st = self.lock();
        self.poisoned.store(true, Ordering::Release);
        self.cv.notify_all();
    }
}

/// Everything the worker threads share.
///
/// The matrix is row-major (`A(i, j)` at `a[i * lda + j]`). Within one step of the
/// factorisation every thread writes a disjoint set of columns (the look-ahead pieces and the
/// chunks it claimed; thread 0 then the next panel, once every piece of it is done), reads only
/// what no one writes in that step (the current panel, its packed copies and its pivots), and
/// steps are separated by the barrier.
pub(super) struct Shared<'a> {
    pub(super) a: *mut f64,
    pub(super) lda: usize,
    pub(super) n: usize,
    pub(super) threads: usize,
    /// LAPACK-style transpositions: row `i` was swapped with row `ipiv[i] ≥ i`.
    pub(super) ipiv: Vec<AtomicUsize>,
    /// The same interchanges of panel p as a gather: row `k + r` of the result is row
    /// `src_top[k + r]` of the input for r < kb ...
    pub(super) src_top: Vec<AtomicUsize>,
    /// ... and the rows below the panel that change get a former panel row:
    /// `mv_dst[k + i] ← mv_src[k + i]` for i < `mv_cnt[p]`.
    pub(super) mv_dst: Vec<AtomicUsize>,
    pub(super) mv_src: Vec<AtomicUsize>,
    pub(super) mv_cnt: Vec<AtomicUsize>,
    /// Packed `L₂₁ᵀ` of panels p (p % 2), double-buffered: thread 0 packs the next panel while
    /// the others read the current one.
    pub(super) lpack: [*mut f64; 2],
    /// Packed `−L₁₁⁻ᵀ`, double-buffered the same way.
    pub(super) linv: [*mut f64; 2],
    /// The first unclaimed column of each step's trailing update, from the first column after
    /// the next panel (`Guided::claim`).
    pub(super) counters: Vec<AtomicUsize>,
    /// Next unclaimed piece of each step's look-ahead (the next panel's columns), and the
    /// pieces done, which thread 0 waits for before it factors that panel.
    pub(super) la_counters: Vec<AtomicUsize>,
    pub(super) la_done: Vec<AtomicUsize>,
    pub(super) barrier: Barrier,
    /// The right-hand side, overwritten with the solution.
    pub(super) x: *mut f64,
    /// Thread 0's time factoring panels and all workers' time at the step barriers, in ns,
    /// added by each worker once it has factored.
    pub(super) panel_ns: AtomicU64,
    pub(super) wait_ns: AtomicU64,
    /// Told how far the factorisation is, by thread 0.
    pub(super) progress: Progress<'a>,
}

// SAFETY: the raw pointers are only dereferenced under the ownership rules documented on
// `Shared` (disjoint columns or rows per thread within a phase, barriers between phases); the
// atomics carry the pivots, and the barrier orders the plain memory accesses between phases.
unsafe impl Sync for Shared<'_> {}

impl Shared<'_> {
    /// Pointer to `A(i, j)`.
    ///
    /// # Safety
    /// `i < n` and `j ≤ lda`.
    pub(super) unsafe fn at(&self, i: usize, j: usize) -> *mut f64 {
        // SAFETY: inside the allocation by the caller's bounds.
        unsafe { self.a.add(i * self.lda + j) }
    }

    /// Row-major view of the block at (r, c).
    ///
    /// # Safety
    /// In range, and no thread writes the block while the view lives.
    pub(super) unsafe fn view<'a>(
        &self,
        r: usize,
        c: usize,
        nr: usize,
        nc: usize,
    ) -> MatRef<'a, f64> {
        // SAFETY: forwarded from the caller.
        unsafe { MatRef::from_raw_parts(self.at(r, c), nr, nc, self.lda as isize, 1) }
    }

    /// Mutable row-major view of the block at (r, c).
    ///
    /// # Safety
    /// In range, and this thread owns the block while the view lives.
    pub(super) unsafe fn view_mut<'a>(
        &self,
        r: usize,
        c: usize,
        nr: usize,
        nc: usize,
    ) -> MatMut<'a, f64> {
        // SAFETY: forwarded from the caller.
        unsafe { MatMut::from_raw_parts_mut(self.at(r, c), nr, nc, self.lda as isize, 1) }
    }

    pub(super) fn get(v: &[AtomicUsize], i: usize) -> usize {
        v[i].load(Ordering::Relaxed)
    }

    pub(super) fn set(v: &[AtomicUsize], i: usize, value: usize) {
        v[i].store(value, Ordering::Relaxed);
    }
}

/// Run `work(tid, state)` on one worker thread per element of `states`, each pinned to a CPU
/// in the core crate's placement order (DESIGN.md §5; best effort, an unpinned worker still
/// computes the right answer), and return the wall time from the moment all of them are ready
/// until the last has finished. The calling thread only waits, so its own affinity is left
/// alone. A worker that panics poisons `barrier`, which the workers synchronise on, so the
/// others are released instead of waiting forever, and the run fails.
pub(in crate::linpack) fn team<S: Send>(
    name: &str,
    states: Vec<S>,
    barrier: &Barrier,
    work: impl Fn(usize, S) + Sync,
) -> Result<f64, BenchError> {
    let threads = states.len();
    let order = affinity::placement_order();
    let gate = Barrier::new(threads + 1);
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        let mut spawn_error = None;
        for (tid, state) in states.into_iter().enumerate() {
            let (gate, work) = (&gate, &work);
            let cpu = affinity::cpu_for_thread(&order, tid);
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{tid}"))
                .spawn_scoped(scope, move || {
                    let _ = affinity::pin_current_thread(cpu);
                    if !gate.wait() {
                        return true;
                    }
                    // The worker's CPU time and run-queue waits, for the record's conditions.
                    let _measuring = hostbench_core::conditions::track::Measuring::start(Some(cpu));
                    let ok = catch_unwind(AssertUnwindSafe(|| work(tid, state))).is_ok();
                    if !ok {
                        barrier.poison();
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
                "{name}: cannot start {threads} threads: {e}"
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
            Err(BenchError::Failed(format!(
                "{name}: a worker thread panicked"
            )))
        }
    })
}

/// How a step's trailing columns are claimed: guided self-scheduling (OpenMP's `guided`).
///
/// Each claim takes about a `1 / (2·threads)` share of the columns still unclaimed, in whole
/// `unit`s (the update kernel's tile), at least `min` and at most `max` (the packed buffer).
/// Early claims are wide, for the packed operand's reuse; the last ones are narrow, so the
/// threads finish a step within one narrow claim of each other. Claims of a fixed width, four
/// per thread, left a thread idle for half a claim on average at the end of every step: an
/// eighth of the step at any thread count (on two threads the buffer's cap made the claims
/// shorter than that). The panel team, which joins the update late, is absorbed the same way.
#[derive(Clone, Copy, Debug)]
pub(in crate::linpack) struct Guided {
    threads: usize,
    unit: usize,
    min: usize,
    max: usize,
    /// The least width of the claim at offset 0 (HPL-MxP's next diagonal block lies in it).
    first: usize,
}

impl Guided {
    /// The narrowest claim: 48 columns (two AVX-512 tiles of the f64 update, eight of the
    /// AVX2 one) rounded up to whole units, so that each packed panel of `L₂₁` is still used
    /// against a few tiles before the next is loaded.
    const MIN_COLS: usize = 48;

    /// `threads` claiming in whole `unit`s of at most `max` columns.
    pub(in crate::linpack) fn new(threads: usize, unit: usize, max: usize) -> Self {
        let min = Self::MIN_COLS.next_multiple_of(unit).min(max);
        Self {
            threads: threads.max(1),
            unit,
            min,
            max,
            first: 0,
        }
    }

    /// The same, with the claim at offset 0 at least `first` columns wide.
    pub(in crate::linpack) fn with_first(self, first: usize) -> Self {
        Self { first, ..self }
    }

    /// Width of the claim at offset `at` of `total` columns.
    fn width(&self, at: usize, total: usize) -> usize {
        let left = total - at;
        let w = left
            .div_ceil(2 * self.threads)
            .next_multiple_of(self.unit)
            .clamp(self.min, self.max);
        let w = if at == 0 { w.max(self.first) } else { w };
        w.min(left)
    }

    /// Claim the next columns of `total` from `next` (the step's counter, from 0): their
    /// offset and width, or None once all are claimed.
    pub(in crate::linpack) fn claim(
        &self,
        next: &AtomicUsize,
        total: usize,
    ) -> Option<(usize, usize)> {
        let mut at = next.load(Ordering::Relaxed);
        loop {
            if at >= total {
                return None;
            }
            let w = self.width(at, total);
            match next.compare_exchange_weak(at, at + w, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some((at, w)),
                Err(now) => at = now,
            }
        }
    }
}

/// Vectors of `len` atomics (pivot bookkeeping shared between the threads).
pub(in crate::linpack) fn atomics(len: usize) -> Result<Vec<AtomicUsize>, BenchError> {
    let mut v = try_vec(len)?;
    v.extend((0..len).map(|_| AtomicUsize::new(0)));
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The claims of `total` columns, in order.
    fn claims(g: &Guided, total: usize) -> Vec<(usize, usize)> {
        let next = AtomicUsize::new(0);
        std::iter::from_fn(|| g.claim(&next, total)).collect()
    }

    #[test]
    fn guided_claims_cover_the_columns_once_and_narrow_towards_the_end() {
        for (threads, unit, max, first) in [
            (2, 24, 288, 0),
            (16, 24, 288, 0),
            (16, 8, 288, 0),
            (16, 6, 384, 258),
            (3, 32, 384, 256),
            (1, 4, 384, 256),
        ] {
            for total in [1, 5, 47, 48, 300, 1000, 6144, 13_312] {
                let g = Guided::new(threads, unit, max).with_first(first);
                let c = claims(&g, total);
                let ctx = format!("{threads} threads, unit {unit}, {total} columns: {c:?}");
                // Contiguous from 0 to total: every column exactly once.
                assert_eq!(c[0].0, 0, "{ctx}");
                for w in c.windows(2) {
                    assert_eq!(w[0].0 + w[0].1, w[1].0, "{ctx}");
                }
                let (last_at, last_w) = *c.last().unwrap();
                assert_eq!(last_at + last_w, total, "{ctx}");
                for (i, &(at, w)) in c.iter().enumerate() {
                    assert!(w >= 1 && w <= max.max(first), "{ctx}");
                    if i + 1 < c.len() {
                        // Whole tiles except where the columns run out.
                        assert_eq!(w % unit, 0, "{ctx}");
                        assert!(w >= g.min, "{ctx}");
                    }
                    if at == 0 {
                        assert!(w >= first.min(total), "{ctx}");
                    }
                }
                // Never wider later, except the first claim's floor.
                for w in c[1..].windows(2) {
                    assert!(w[1].1 <= w[0].1, "{ctx}");
                }
            }
        }
        // Sixteen threads on a 13 312-column step: wide claims first (the buffer's 288), the
        // last ones the narrowest, and several per thread.
        let c = claims(&Guided::new(16, 24, 288), 13_312);
        assert_eq!(c[0].1, 288);
        assert_eq!(c[c.len() - 2].1, 48);
        assert!(c.len() >= 3 * 16, "{}", c.len());
    }

    #[test]
    fn concurrent_guided_claims_hand_each_column_to_one_thread() {
        let g = Guided::new(4, 8, 64);
        let total = 20_000;
        let next = AtomicUsize::new(0);
        let owners: Vec<AtomicUsize> = (0..total).map(|_| AtomicUsize::new(0)).collect();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    while let Some((at, w)) = g.claim(&next, total) {
                        for o in &owners[at..at + w] {
                            o.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert!(owners.iter().all(|o| o.load(Ordering::Relaxed) == 1));
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
