//! The measuring threads' own account: which CPUs they ran on, how long they ran there, and how
//! long they waited on a run queue.
//!
//! Why in-thread: worker threads live for one sample and are gone before anyone could read
//! `/proc/self/task/<tid>/schedstat`, and the kernel does not fold a dead thread's run delay into
//! the process. So each worker reads its own `/proc/thread-self/schedstat` when it starts and
//! when it ends (two small reads per thread per sample) and adds the difference to one process-wide
//! tally, which the runner takes at every sample boundary.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

/// What the measuring threads did since the last [`take`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    /// Threads that ended.
    pub threads: usize,
    /// Their lifetimes, summed (ns).
    pub wall_ns: u64,
    /// Time they ran on a CPU, summed (ns; excludes stolen time where the kernel accounts it).
    pub on_cpu_ns: u64,
    /// Time they were runnable but waited on a run queue, summed (ns).
    pub run_delay_ns: u64,
    /// On-CPU time by the CPU each thread was pinned to (or found on).
    pub by_cpu: BTreeMap<usize, u64>,
    /// Whether every thread could read its schedstat (`CONFIG_SCHED_INFO`).
    pub schedstat: bool,
}

static TALLY: Mutex<Option<Tally>> = Mutex::new(None);

/// Held by a measuring thread for the span of its work; adds to the tally when dropped.
#[derive(Debug)]
pub struct Measuring {
    cpu: Option<usize>,
    start: Instant,
    sched: Option<(u64, u64)>,
}

impl Measuring {
    /// Start accounting the calling thread, which runs on `cpu` (its pin), or wherever
    /// `sched_getcpu` finds it.
    pub fn start(cpu: Option<usize>) -> Self {
        Self {
            cpu: cpu.or_else(crate::affinity::current_cpu),
            sched: own_schedstat(),
            start: Instant::now(),
        }
    }
}

impl Drop for Measuring {
    fn drop(&mut self) {
        let wall = self.start.elapsed().as_nanos() as u64;
        let end = own_schedstat();
        let mut guard = TALLY.lock().unwrap_or_else(|p| p.into_inner());
        let t = guard.get_or_insert_with(|| Tally {
            schedstat: true,
            ..Tally::default()
        });
        t.threads += 1;
        t.wall_ns += wall;
        match (self.sched, end) {
            (Some((c0, d0)), Some((c1, d1))) => {
                let on = c1.saturating_sub(c0);
                t.on_cpu_ns += on;
                t.run_delay_ns += d1.saturating_sub(d0);
                if let Some(cpu) = self.cpu {
                    *t.by_cpu.entry(cpu).or_default() += on;
                }
            }
            _ => {
                t.schedstat = false;
                if let Some(cpu) = self.cpu {
                    t.by_cpu.entry(cpu).or_default();
                }
            }
        }
    }
}

/// The tally since the last call, and a fresh one started; `None` when no measuring thread ended
/// in between (the benchmark ran on threads of its own: the caller falls back to the process).
pub fn take() -> Option<Tally> {
    TALLY.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// (on-CPU ns, run-queue wait ns) of the calling thread.
fn own_schedstat() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    parse_schedstat(&text)
}

/// The first two fields of a schedstat line: time on CPU and time waiting to run, in ns.
pub fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut it = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some((it.next()??, it.next()??))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_lines_parse() {
        assert_eq!(
            parse_schedstat("353325989 84856 101\n"),
            Some((353325989, 84856))
        );
        assert_eq!(parse_schedstat("garbage"), None);
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn a_measuring_thread_is_tallied_with_its_cpu() {
        // Runner tests in this binary take the tally too; a tally another test took is retried.
        for _ in 0..20 {
            std::thread::spawn(|| {
                let m = Measuring::start(Some(4242));
                let t = Instant::now();
                while t.elapsed().as_millis() < 30 {
                    std::hint::black_box(0u64);
                }
                drop(m);
            })
            .join()
            .unwrap();
            let Some(t) = take().filter(|t| t.by_cpu.contains_key(&4242)) else {
                continue;
            };
            assert!(t.threads >= 1);
            assert!(t.wall_ns >= 30_000_000);
            if t.schedstat {
                assert!(t.by_cpu[&4242] > 10_000_000, "{t:?}");
            }
            return;
        }
        panic!("the measuring thread never reached the tally");
    }
}
