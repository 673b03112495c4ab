//! Run one piece of work on N pinned threads released together, and time it the honest way.
//!
//! Every multi-threaded benchmark (compute, memory, disk, network streams) needs the same shape:
//! threads pinned in `affinity::placement_order` (one per physical core first), held at a barrier
//! until all exist, then released at once; the sample's time runs from the *first* thread's start
//! to the *last* thread's end, so a straggler counts against the result instead of being averaged
//! away. After a second barrier each thread may run an `after` step while all are still alive
//! (the CPU benchmark times the core clock there, under the same thread count).
//!
//! A panic inside the work is caught on its thread, so the others are never left waiting at a
//! barrier forever; it comes back as an error.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Barrier;
use std::time::Instant;

use crate::affinity;
use crate::error::BenchError;

/// Most threads one compute or memory case may ask for (oversubscription beyond this is a typo,
/// not a test). Disk keeps its own, lower bound: each of its threads holds I/O buffers.
pub const MAX_THREADS: usize = 4096;

/// The default thread sweep: 1, 2, 4, … up to and including the CPUs this process may use.
pub fn default_threads() -> Vec<usize> {
    thread_sweep(affinity::allowed_cpus().len())
}

/// 1, 2, 4, … below `n`, then `n` itself (so a 6-CPU host ends at 6, not 4).
pub fn thread_sweep(n: usize) -> Vec<usize> {
    let n = n.max(1);
    let mut v: Vec<usize> = std::iter::successors(Some(1usize), |t| Some(t * 2))
        .take_while(|&t| t < n)
        .collect();
    v.push(n);
    v
}

/// Refuse a thread count outside 1..=`max`, naming it (`what` says whose threads they are).
pub fn check_threads(
    threads: impl IntoIterator<Item = usize>,
    max: usize,
    what: &str,
) -> Result<(), BenchError> {
    match threads.into_iter().find(|&t| t == 0 || t > max) {
        Some(t) => Err(BenchError::invalid(format!(
            "{what} must be between 1 and {max}, got {t}"
        ))),
        None => Ok(()),
    }
}

/// What `run_pinned` measured.
#[derive(Debug)]
pub struct Timed<R, A> {
    /// First start to last end, in seconds.
    pub wall_s: f64,
    /// Each thread's work result, in thread order.
    pub results: Vec<R>,
    /// Each thread's `after` result, in thread order.
    pub after: Vec<A>,
}

/// Run `work(i)` on `threads` threads pinned per `order` (wrapping round when oversubscribed;
/// an empty `order` leaves them to the scheduler, as I/O threads that mostly sleep want),
/// then `after(i)` once every thread has finished its work.
pub fn run_pinned<R, A>(
    threads: usize,
    order: &[usize],
    work: impl Fn(usize) -> Result<R, BenchError> + Sync,
    after: impl Fn(usize) -> A + Sync,
) -> Result<Timed<R, A>, BenchError>
where
    R: Send,
    A: Send,
{
    if threads == 0 {
        return Err(BenchError::invalid("thread count must be at least 1"));
    }
    let start_line = Barrier::new(threads);
    let after_line = Barrier::new(threads);
    type Span<R, A> = (Instant, Instant, Result<R, BenchError>, A);
    let spans: Vec<Span<R, A>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (start_line, after_line, work, after) =
                    (&start_line, &after_line, &work, &after);
                let cpu = (!order.is_empty()).then(|| affinity::cpu_for_thread(order, i));
                s.spawn(move || {
                    // Pinning can fail in restricted containers; the measurement is still valid,
                    // merely unpinned, so carry on rather than refuse.
                    if let Some(cpu) = cpu {
                        let _ = affinity::pin_current_thread(cpu);
                    }
                    start_line.wait();
                    // The thread's run-queue waits and CPU for the record's conditions.
                    let _measuring = crate::conditions::track::Measuring::start(cpu);
                    let t0 = Instant::now();
                    let outcome = catch_unwind(AssertUnwindSafe(|| work(i))).unwrap_or_else(|_| {
                        Err(BenchError::Failed(format!("worker thread {i} panicked")))
                    });
                    let t1 = Instant::now();
                    after_line.wait();
                    (t0, t1, outcome, after(i))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| BenchError::Failed("worker thread panicked".into()))
            })
            .collect::<Result<Vec<_>, _>>()
    })?;
    let first = spans.iter().map(|s| s.0).min();
    let last = spans.iter().map(|s| s.1).max();
    let wall_s = match (first, last) {
        (Some(f), Some(l)) => l.duration_since(f).as_secs_f64(),
        _ => return Err(BenchError::Failed("no threads ran".into())),
    };
    let mut results = Vec::with_capacity(threads);
    let mut afters = Vec::with_capacity(threads);
    for (_, _, outcome, a) in spans {
        results.push(outcome?);
        afters.push(a);
    }
    Ok(Timed {
        wall_s,
        results,
        after: afters,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn thread_sweeps_double_and_end_at_the_count() {
        assert_eq!(thread_sweep(0), vec![1]);
        assert_eq!(thread_sweep(1), vec![1]);
        assert_eq!(thread_sweep(6), vec![1, 2, 4, 6]);
        assert_eq!(thread_sweep(8), vec![1, 2, 4, 8]);
        assert!(check_threads([1, 4096], MAX_THREADS, "threads").is_ok());
        let e = check_threads([2, 0], MAX_THREADS, "linpack threads").unwrap_err();
        assert_eq!(
            e.to_string(),
            BenchError::invalid("linpack threads must be between 1 and 4096, got 0").to_string()
        );
    }

    #[test]
    fn every_thread_works_then_runs_after() {
        let order = affinity::placement_order();
        let done = AtomicUsize::new(0);
        let t = run_pinned(
            5,
            &order,
            |i| {
                done.fetch_add(1, Ordering::SeqCst);
                Ok(i * 10)
            },
            // Every thread's work is finished before any `after` runs.
            |_| done.load(Ordering::SeqCst),
        )
        .unwrap();
        assert_eq!(t.results, vec![0, 10, 20, 30, 40]);
        assert_eq!(t.after, vec![5; 5]);
        assert!(t.wall_s >= 0.0);
    }

    #[test]
    fn errors_and_panics_come_back_without_hanging() {
        let order = affinity::placement_order();
        let err = run_pinned(
            3,
            &order,
            |i| {
                if i == 1 {
                    Err(BenchError::Failed("boom".into()))
                } else {
                    Ok(())
                }
            },
            |_| (),
        )
        .unwrap_err();
        assert!(err.to_string().contains("boom"));
        let err = run_pinned(
            3,
            &order,
            |i| {
                if i == 2 {
                    panic!("worker failure under test");
                }
                Ok(())
            },
            |_| (),
        )
        .unwrap_err();
        assert!(err.to_string().contains("panicked"), "{err}");
        assert!(run_pinned(0, &order, |_| Ok(()), |_| ()).is_err());
        // No placement: the threads run unpinned and still all complete.
        let t = run_pinned(3, &[], Ok, |_| ()).unwrap();
        assert_eq!(t.results, vec![0, 1, 2]);
    }
}
