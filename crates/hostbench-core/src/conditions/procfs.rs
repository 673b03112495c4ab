//! The few `/proc` counters a record's conditions come from: per-CPU time (busy, idle, stolen),
//! the process's own CPU time, its live tasks' run-queue waits, and swap-in and reclaim counts.
//! Parsers take text so that tests feed them fixtures.

use std::collections::BTreeMap;
use std::path::Path;

/// One CPU's accumulated time from `/proc/stat`, in clock ticks (USER_HZ).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy: u64,
    /// idle + iowait.
    pub idle: u64,
    /// Time the hypervisor ran something else while this vCPU wanted to run.
    pub steal: u64,
}

impl CpuTicks {
    pub fn total(&self) -> u64 {
        self.busy + self.idle + self.steal
    }

    pub fn since(&self, earlier: &CpuTicks) -> CpuTicks {
        CpuTicks {
            busy: self.busy.saturating_sub(earlier.busy),
            idle: self.idle.saturating_sub(earlier.idle),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }
}

/// The per-CPU lines (`cpuN ...`) of `/proc/stat`; the aggregate `cpu` line is left out.
pub fn parse_stat(text: &str) -> BTreeMap<usize, CpuTicks> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let cpu: usize = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = f.map(|x| x.parse().unwrap_or(0)).collect();
            let at = |i: usize| v.get(i).copied().unwrap_or(0);
            Some((
                cpu,
                CpuTicks {
                    busy: at(0) + at(1) + at(2) + at(5) + at(6),
                    idle: at(3) + at(4),
                    steal: at(7),
                },
            ))
        })
        .collect()
}

pub fn read_stat(proc_root: &Path) -> Option<BTreeMap<usize, CpuTicks>> {
    let text = std::fs::read_to_string(proc_root.join("stat")).ok()?;
    let m = parse_stat(&text);
    (!m.is_empty()).then_some(m)
}

/// Clock ticks per second of `/proc/stat`.
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Pages swapped in and pages scanned by direct reclaim (an allocation that had to wait for
/// memory), from `/proc/vmstat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VmCounters {
    pub swap_in: u64,
    pub direct_reclaim: u64,
}

pub fn parse_vmstat(text: &str) -> VmCounters {
    let mut c = VmCounters::default();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(k), Some(v)) = (f.next(), f.next().and_then(|v| v.parse::<u64>().ok())) else {
            continue;
        };
        if k == "pswpin" {
            c.swap_in += v;
        } else if k.starts_with("pgscan_direct") && k != "pgscan_direct_throttle" {
            c.direct_reclaim += v;
        }
    }
    c
}

pub fn read_vmstat(proc_root: &Path) -> Option<VmCounters> {
    std::fs::read_to_string(proc_root.join("vmstat"))
        .ok()
        .map(|t| parse_vmstat(&t))
}

/// CPU time of this whole process, every thread it ever had included, in ns.
pub fn own_cpu_ns() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (us(ru.ru_utime) + us(ru.ru_stime)) * 1000
}

/// (on-CPU ns, run-queue wait ns) of each live task of this process, by thread id: the fallback
/// for benchmarks whose threads outlive a sample (network streams, I/O workers).
pub fn task_schedstats(proc_root: &Path) -> BTreeMap<u32, (u64, u64)> {
    let Ok(dir) = std::fs::read_dir(proc_root.join("self/task")) else {
        return BTreeMap::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let tid: u32 = e.file_name().to_str()?.parse().ok()?;
            let text = std::fs::read_to_string(e.path().join("schedstat")).ok()?;
            Some((tid, super::track::parse_schedstat(&text)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_split_into_busy_idle_and_steal() {
        let text = "cpu  10 0 0 0 0 0 0 0 0 0\n\
                    cpu0 590565 61 87043 645828 9231 0 5615 798 0 0\n\
                    cpu1 1 2 3 4 5 6 7 8 9 10\n\
                    intr 1 2 3\n";
        let m = parse_stat(text);
        assert_eq!(m.len(), 2);
        assert_eq!(m[&0].busy, 590565 + 61 + 87043 + 5615);
        assert_eq!(m[&0].idle, 645828 + 9231);
        assert_eq!(m[&0].steal, 798);
        assert_eq!(
            m[&1],
            CpuTicks {
                busy: 1 + 2 + 3 + 6 + 7,
                idle: 9,
                steal: 8
            }
        );
        // An old kernel without the steal column still parses.
        let m = parse_stat("cpu3 1 1 1 1\n");
        assert_eq!(m[&3].steal, 0);
    }

    #[test]
    fn vmstat_counts_swap_in_and_direct_reclaim() {
        let c = parse_vmstat(
            "pswpin 7\npswpout 100\npgscan_direct 5\npgscan_direct_throttle 9\n\
             pgscan_direct_normal 2\npgscan_kswapd 1000\n",
        );
        assert_eq!(
            c,
            VmCounters {
                swap_in: 7,
                direct_reclaim: 7
            }
        );
    }

    #[test]
    fn this_process_has_cpu_time_and_tasks() {
        let t = std::time::Instant::now();
        while t.elapsed().as_millis() < 20 {
            std::hint::black_box(0u64);
        }
        assert!(own_cpu_ns() > 0);
        if Path::new("/proc/self/task").exists() {
            assert!(!task_schedstats(Path::new("/proc")).is_empty());
        }
    }
}
