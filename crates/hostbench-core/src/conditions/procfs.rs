//! The few `/proc` counters a record's conditions come from: per-CPU time (busy, idle, stolen,
//! interrupts), the process's own CPU time, its live tasks' run-queue waits, the kernel's own
//! threads' CPU time, and swap-in and reclaim counts.
//! Parsers take text so that tests feed them fixtures.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// A short `/proc` file (a task's `stat` or `schedstat`) into `buf`: one open, one read and a
/// close. `read_to_string` adds a `statx` for a size hint (0 for `/proc`) and a second read for
/// the end of file; the kernel threads' scan reads one file per thread, twice per record, a few
/// thousand on a large node, and these syscalls were a third of its time (10 → 7 µs a file on
/// a KVM guest).
fn read_short<'b>(path: &Path, buf: &'b mut Vec<u8>) -> Option<&'b str> {
    let mut file = std::fs::File::open(path).ok()?;
    buf.clear();
    buf.resize(SHORT_FILE, 0);
    let got = file.read(buf).ok()?;
    buf.truncate(got);
    if got == SHORT_FILE {
        // Longer than a task's stat line ever is: read the rest as it comes.
        file.read_to_end(buf).ok()?;
    }
    std::str::from_utf8(buf).ok()
}

/// Bytes [`read_short`] reads at once: a `stat` line is under 400 bytes.
const SHORT_FILE: usize = 1024;

/// One CPU's accumulated time from `/proc/stat`, in clock ticks (USER_HZ).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy: u64,
    /// idle + iowait.
    pub idle: u64,
    /// Time the hypervisor ran something else while this vCPU wanted to run.
    pub steal: u64,
    /// irq + softirq, counted inside `busy` too: time the kernel spent on interrupts (a disk's
    /// completions, a network's receive path), which no task is charged for.
    pub interrupt: u64,
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
            interrupt: self.interrupt.saturating_sub(earlier.interrupt),
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
                    interrupt: at(5) + at(6),
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

/// A kernel thread (a kworker, ksoftirqd, jbd2…): its name, the CPU it last ran on, and its
/// CPU time in clock ticks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelThread {
    /// `comm`, which for a kworker names the workqueue it serves ("kworker/1:0+dio/vda").
    pub name: String,
    pub cpu: usize,
    pub ticks: u64,
}

/// `PF_KTHREAD` in the flags of `/proc/<pid>/stat`.
const PF_KTHREAD: u64 = 0x0020_0000;

/// A `/proc/<pid>/stat` line, if it is a kernel thread's.
pub fn parse_kernel_thread(stat: &str) -> Option<KernelThread> {
    // The name may hold spaces and parentheses: it runs from the first '(' to the last ')'.
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let f: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // After the name: state, ppid, pgrp, session, tty_nr, tpgid, flags (6), …, utime (11),
    // stime (12), …, processor (36).
    let num = |i: usize| f.get(i)?.parse::<u64>().ok();
    if num(6)? & PF_KTHREAD == 0 {
        return None;
    }
    Some(KernelThread {
        name: stat.get(open + 1..close)?.to_string(),
        cpu: num(36)? as usize,
        ticks: num(11)? + num(12)?,
    })
}

/// The kernel threads this `/proc` lists, by pid (none inside a PID namespace, which hides
/// them); `None` when `/proc` cannot be listed. Kernel threads are processes of one thread
/// each, so the top level is all there is to read.
pub fn kernel_threads(proc_root: &Path) -> Option<BTreeMap<u32, KernelThread>> {
    // kthreadd (pid 2) is every other kernel thread's parent: where the kernel lists its
    // children (CONFIG_PROC_CHILDREN), only those are read, not every process of the host,
    // twice per record. Each candidate's flags still decide.
    let pids: Vec<u32> = match std::fs::read_to_string(proc_root.join("2/task/2/children")) {
        Ok(list) => std::iter::once(2)
            .chain(list.split_whitespace().filter_map(|p| p.parse().ok()))
            .collect(),
        Err(_) => std::fs::read_dir(proc_root)
            .ok()?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect(),
    };
    let mut buf = Vec::new();
    Some(
        pids.into_iter()
            .filter_map(|pid| {
                let text = read_short(&proc_root.join(format!("{pid}/stat")), &mut buf)?;
                Some((pid, parse_kernel_thread(text)?))
            })
            .collect(),
    )
}

/// (on-CPU ns, run-queue wait ns) of each live task of this process, by thread id: the fallback
/// for benchmarks whose threads outlive a sample (network streams, I/O workers).
pub fn task_schedstats(proc_root: &Path) -> BTreeMap<u32, (u64, u64)> {
    let Ok(dir) = std::fs::read_dir(proc_root.join("self/task")) else {
        return BTreeMap::new();
    };
    let mut buf = Vec::new();
    dir.flatten()
        .filter_map(|e| {
            let tid: u32 = e.file_name().to_str()?.parse().ok()?;
            let text = read_short(&e.path().join("schedstat"), &mut buf)?;
            Some((tid, super::track::parse_schedstat(text)?))
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
                steal: 8,
                interrupt: 6 + 7,
            }
        );
        // An old kernel without the steal column still parses.
        let m = parse_stat("cpu3 1 1 1 1\n");
        assert_eq!(m[&3].steal, 0);
    }

    #[test]
    fn short_files_read_whole_at_any_length() {
        let dir = tempfile::tempdir().unwrap();
        let mut buf = Vec::new();
        for len in [
            0,
            1,
            SHORT_FILE - 1,
            SHORT_FILE,
            SHORT_FILE + 1,
            3 * SHORT_FILE + 7,
        ] {
            let text: String = (0..len)
                .map(|i| char::from(b'a' + (i % 26) as u8))
                .collect();
            let path = dir.path().join(format!("f{len}"));
            std::fs::write(&path, &text).unwrap();
            assert_eq!(
                read_short(&path, &mut buf),
                Some(text.as_str()),
                "{len} bytes"
            );
        }
        assert_eq!(read_short(&dir.path().join("absent"), &mut buf), None);
    }

    #[test]
    fn kernel_threads_are_told_from_processes_by_their_flags() {
        // A kworker naming its workqueue, on CPU 1, 3 + 511 ticks.
        let k = parse_kernel_thread(
            "17169 (kworker/1:0+dio/vda) I 2 0 0 0 -1 69238880 0 0 0 0 3 511 0 0 20 0 1 0 \
             7994 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0 0 0 0",
        )
        .expect("a kernel thread");
        assert_eq!(
            k,
            KernelThread {
                name: "kworker/1:0+dio/vda".into(),
                cpu: 1,
                ticks: 514
            }
        );
        // A process (flags without PF_KTHREAD), even one whose name has parentheses.
        assert!(parse_kernel_thread(
            "29345 (a (b) c) R 29300 29300 14524 0 -1 4194304 102 0 0 0 7 9 0 0 20 0 1 0 \
             8151644 3133440 405 18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0"
        )
        .is_none());
        assert!(parse_kernel_thread("garbage").is_none());
        // A fixture /proc: with kthreadd's children listed only those are read, without the
        // list every process is; either way the flags decide.
        let dir = std::env::temp_dir().join(format!("hostbench-kthreads-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let stat = |pid: u32, name: &str, flags: u64| {
            std::fs::create_dir_all(dir.join(pid.to_string())).unwrap();
            std::fs::write(
                dir.join(format!("{pid}/stat")),
                format!(
                    "{pid} ({name}) S 2 0 0 0 -1 {flags} 0 0 0 0 1 2 0 0 20 0 1 0 9 0 0 1 0 0 0 \
                     0 0 0 0 0 0 0 0 0 17 3 0 0"
                ),
            )
            .unwrap();
        };
        stat(2, "kthreadd", 0x0020_8040);
        stat(7, "kworker/3:1-events", 0x0420_8060);
        stat(9, "kworker/u8:0", 0x0420_8060);
        stat(300, "bash", 0x0040_0100);
        let found = |d: &Path| kernel_threads(d).unwrap().into_keys().collect::<Vec<_>>();
        assert_eq!(found(&dir), [2, 7, 9]);
        std::fs::create_dir_all(dir.join("2/task/2")).unwrap();
        std::fs::write(dir.join("2/task/2/children"), "7 300").unwrap();
        assert_eq!(found(&dir), [2, 7]);
        assert_eq!(kernel_threads(&dir).unwrap()[&7].cpu, 3);
        std::fs::remove_dir_all(&dir).unwrap();
        // The live /proc lists (inside a PID namespace: possibly no) kernel threads, each named.
        let live = kernel_threads(Path::new("/proc")).expect("/proc lists");
        assert!(live.values().all(|k| !k.name.is_empty()));
        assert!(!live.contains_key(&std::process::id()));
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
