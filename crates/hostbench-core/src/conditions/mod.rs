//! What the host did while a record's samples were taken: the conditions every figure carries.
//!
//! A low figure has many possible owners — the hardware, the hypervisor (stolen time), a
//! neighbour process, a container's CPU quota, a throttled clock, a swapping host — and without
//! a reading of each the user cannot tell them apart. The runner reads them around every measured
//! sample (not the warm-up, not the whole run) for the CPUs the measuring threads ran on:
//!
//! - per-CPU busy, idle and stolen time from `/proc/stat`, minus hostbench's own CPU time, which
//!   leaves what other processes took (`other_cpu_share`) and what the hypervisor took
//!   (`steal_share`);
//! - the measuring threads' own run-queue waits (`track`, from their schedstat);
//! - the cgroup's CPU quota and its throttling (`cgroup`);
//! - swap-ins and direct reclaim (`/proc/vmstat`);
//! - at the record's start and end only, the slower sysfs telemetry where it exists: the cpufreq
//!   clock, thermal-throttle counters, hwmon temperature and RAPL energy (`sensors`).
//!
//! Nothing here needs root except RAPL on kernels that restrict it; a source that cannot be read
//! is listed under `unavailable` with the reason, never an error. `diagnose` turns conditions into
//! causes.

pub mod cgroup;
pub mod diagnose;
pub mod procfs;
pub mod sensors;
pub mod track;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use procfs::{CpuTicks, VmCounters};

// The types are the result schema's (`model`); re-exported so their old paths keep working.
pub use crate::model::{
    CgroupConditions, ClockSpan, Conditions, CpuShare, GpuConditions, KernelThreadShare,
    MemoryPressure,
};

/// A sample is "disturbed" when at least this share of its CPU time went elsewhere.
pub const DISTURBED_SHARE: f64 = 0.10;

/// Where the readers look, and what was found there once.
#[derive(Debug)]
pub struct Probe {
    proc: PathBuf,
    cgroup: Result<cgroup::CpuCgroup, String>,
    sensors: sensors::Sensors,
    allowed: Vec<usize>,
    tick_hz: f64,
}

/// The light counters read at every sample boundary.
#[derive(Debug, Clone)]
struct Snapshot {
    at: Instant,
    stat: Option<BTreeMap<usize, CpuTicks>>,
    own_ns: u64,
    tasks: BTreeMap<u32, (u64, u64)>,
    throttle: Option<cgroup::Throttle>,
    vm: Option<VmCounters>,
}

/// The slow sysfs readings taken at a record's start and end.
#[derive(Debug, Clone)]
struct Telemetry {
    cpufreq_hz: Option<f64>,
    throttle_events: Option<u64>,
    energy_uj: Option<Vec<u64>>,
    /// Read here, not at every sample: a large host has thousands of kernel threads.
    kthreads: Option<BTreeMap<u32, procfs::KernelThread>>,
}

/// One measured sample's share of the conditions.
#[derive(Debug, Clone)]
struct Span {
    seconds: f64,
    stat: BTreeMap<usize, CpuTicks>,
    stat_ok: bool,
    own_ns: u64,
    tally: Option<track::Tally>,
    /// (on-CPU, run delay) of live tasks, for benchmarks without a tally.
    tasks: (u64, u64),
    /// How many of those tasks ran during the span (their lifetimes, for the share waited).
    tasks_ran: usize,
    throttle: cgroup::Throttle,
    vm: VmCounters,
}

impl Probe {
    /// The live host's, found once per process.
    pub fn live() -> &'static Probe {
        static LIVE: OnceLock<Probe> = OnceLock::new();
        LIVE.get_or_init(|| {
            Probe::at(
                Path::new("/proc"),
                Path::new("/sys"),
                crate::affinity::allowed_cpus(),
            )
        })
    }

    /// Readers rooted at `proc` and `sys` (fixture trees in tests).
    pub fn at(proc: &Path, sys: &Path, allowed: Vec<usize>) -> Probe {
        Probe {
            proc: proc.to_path_buf(),
            cgroup: cgroup::CpuCgroup::locate(proc, sys),
            sensors: sensors::Sensors::find(sys),
            allowed,
            tick_hz: procfs::ticks_per_second(),
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            at: Instant::now(),
            stat: procfs::read_stat(&self.proc),
            own_ns: procfs::own_cpu_ns(),
            tasks: procfs::task_schedstats(&self.proc),
            throttle: self.cgroup.as_ref().ok().map(|c| c.throttle()),
            vm: procfs::read_vmstat(&self.proc),
        }
    }

    fn telemetry(&self) -> Telemetry {
        Telemetry {
            cpufreq_hz: self.sensors.cpufreq_hz(&self.allowed),
            throttle_events: self.sensors.throttle_events(&self.allowed),
            energy_uj: self.sensors.energy_uj(),
            kthreads: procfs::kernel_threads(&self.proc),
        }
    }

    /// Start reading conditions for one record: call [`Recorder::sample_done`] after each
    /// measured sample and [`Recorder::finish`] at the end.
    pub fn begin(&self) -> Recorder<'_> {
        // Warm-up threads' tallies are not the record's.
        let _ = track::take();
        Recorder {
            probe: self,
            start: self.telemetry(),
            last: self.snapshot(),
            spans: Vec::new(),
            io: false,
        }
    }
}

/// Conditions of one record in the making.
#[derive(Debug)]
pub struct Recorder<'a> {
    probe: &'a Probe,
    start: Telemetry,
    last: Snapshot,
    spans: Vec<Span>,
    /// The record's work is I/O ([`crate::model::Work::does_io`]).
    io: bool,
}

impl Recorder<'_> {
    /// The record's work is I/O ([`crate::model::Work::does_io`]): a sample is not counted disturbed for the
    /// kernel's interrupts on its CPUs or for its threads' waits to run after each completion.
    /// Both are the benchmark's own on a disk or network record: its threads woke thousands of
    /// times a second and each waited to run (the completion's interrupt work on that CPU, or
    /// an idle vCPU resuming), 18 % of their lifetimes on an idle 2-vCPU VM, and every sample of
    /// such a record read "disturbed".
    pub fn does_io(mut self, io: bool) -> Self {
        self.io = io;
        self
    }

    /// A measured sample just ended.
    pub fn sample_done(&mut self) {
        let now = self.probe.snapshot();
        let tally = track::take();
        let prev = &self.last;
        let (stat, stat_ok) = match (&prev.stat, &now.stat) {
            (Some(a), Some(b)) => (
                b.iter()
                    .filter_map(|(c, t)| Some((*c, t.since(a.get(c)?))))
                    .collect(),
                true,
            ),
            _ => (BTreeMap::new(), false),
        };
        let (mut tasks, mut tasks_ran) = ((0, 0), 0);
        for (tid, (on, delay)) in &now.tasks {
            if let Some((on0, delay0)) = prev.tasks.get(tid) {
                tasks.0 += on.saturating_sub(*on0);
                tasks.1 += delay.saturating_sub(*delay0);
                tasks_ran += usize::from(on > on0);
            }
        }
        let throttle = match (&prev.throttle, &now.throttle) {
            (Some(a), Some(b)) => cgroup::Throttle {
                nr_throttled: b.nr_throttled.saturating_sub(a.nr_throttled),
                throttled_s: (b.throttled_s - a.throttled_s).max(0.0),
            },
            _ => cgroup::Throttle::default(),
        };
        let vm = match (&prev.vm, &now.vm) {
            (Some(a), Some(b)) => VmCounters {
                swap_in: b.swap_in.saturating_sub(a.swap_in),
                direct_reclaim: b.direct_reclaim.saturating_sub(a.direct_reclaim),
            },
            _ => VmCounters::default(),
        };
        self.spans.push(Span {
            seconds: now.at.duration_since(prev.at).as_secs_f64(),
            stat,
            stat_ok,
            own_ns: now.own_ns.saturating_sub(prev.own_ns),
            tally,
            tasks,
            tasks_ran,
            throttle,
            vm,
        });
        self.last = now;
    }

    /// The record's conditions. `clock` is the sample's own clock at the first and last sample
    /// (the CPU benchmarks read it under the kernel's instruction class); without it cpufreq's
    /// is used where it exists. `work_rate` is the record's throughput in its unit per second,
    /// for work per joule.
    pub fn finish(self, clock: Option<(f64, f64)>, work_rate: Option<f64>) -> Conditions {
        let end = self.probe.telemetry();
        let p = self.probe;
        let mut c = Conditions::default();
        let mut why = |k: &str, v: &str| {
            c.unavailable.insert(k.to_string(), v.to_string());
        };
        let spans = &self.spans;
        let tallied: BTreeSet<usize> = spans
            .iter()
            .filter_map(|s| s.tally.as_ref())
            .flat_map(|t| t.by_cpu.keys().copied())
            .collect();
        let cpus: Vec<usize> = if tallied.is_empty() {
            p.allowed.clone()
        } else {
            tallied.into_iter().collect()
        };
        let seconds: f64 = spans.iter().map(|s| s.seconds).sum();
        let per_span: Vec<Shares> = spans.iter().map(|s| s.shares(&cpus, p.tick_hz)).collect();
        if spans.iter().all(|s| s.stat_ok) && !spans.is_empty() {
            let total = Shares::combine(&per_span);
            c.steal_share = Some(total.steal);
            c.share_resolution = Some(1.0 / (seconds * p.tick_hz).max(1.0));
            c.other_cpu_share = Some(total.other);
            let tallied_all = spans.iter().all(|s| s.tally.is_some());
            if tallied_all && total.ticks > 0.0 {
                let helper: f64 = spans.iter().map(|s| s.helper_s()).sum();
                c.helper_cpu_share = Some((helper / total.ticks).clamp(0.0, 1.0));
            }
            let mut per_cpu: Vec<CpuShare> = cpus
                .iter()
                .filter_map(|&cpu| {
                    let (steal, other) = total.by_cpu.get(&cpu).copied()?;
                    (steal >= 0.01 || other >= 0.01).then_some(CpuShare {
                        cpu,
                        steal_share: steal,
                        other_share: other,
                        kernel_share: 0.0,
                    })
                })
                .collect();
            let k = KernelPart::of(
                spans,
                &cpus,
                p.tick_hz,
                self.start.kthreads.as_ref().zip(end.kthreads.as_ref()),
            );
            if total.ticks > 0.0 {
                // Not capped at the others' share: that is counted in ticks, which under-read a
                // CPU that sleeps and wakes at a high rate (an I/O thread's), while the kernel
                // threads' own times are the scheduler's.
                c.kernel_share = Some(k.by_cpu.values().sum::<f64>() / total.ticks);
                c.kernel_threads = k
                    .threads
                    .iter()
                    .map(|(name, secs)| KernelThreadShare {
                        name: name.clone(),
                        share: secs / total.ticks,
                    })
                    .filter(|t| t.share >= 0.01)
                    .take(3)
                    .collect();
            }
            for pc in &mut per_cpu {
                if let (Some(ks), Some(cs)) = (k.by_cpu.get(&pc.cpu), k.cpu_s.get(&pc.cpu)) {
                    if *cs > 0.0 {
                        pc.kernel_share = ks / cs;
                    }
                }
            }
            if self.start.kthreads.is_none() || end.kthreads.is_none() {
                why("kernel_threads", "/proc cannot be listed");
            }
            per_cpu.sort_by(|a, b| {
                (b.steal_share + b.other_share).total_cmp(&(a.steal_share + a.other_share))
            });
            c.per_cpu = per_cpu;
        } else {
            why("steal", "/proc/stat unreadable");
        }
        let (mut on, mut delay, mut schedstat) = (0u64, 0u64, true);
        for s in spans {
            match &s.tally {
                Some(t) => {
                    on += t.on_cpu_ns;
                    delay += t.run_delay_ns;
                    schedstat &= t.schedstat;
                }
                None => {
                    on += s.tasks.0;
                    delay += s.tasks.1;
                }
            }
        }
        if schedstat && on + delay > 0 {
            c.run_delay_share = Some(delay as f64 / (on + delay) as f64);
        } else {
            why(
                "run_delay",
                "no schedstat for the measuring threads (kernel without CONFIG_SCHED_INFO)",
            );
        }
        match &p.cgroup {
            Ok(cg) => {
                c.cgroup = Some(CgroupConditions {
                    version: cg.version,
                    path: cg.path.clone(),
                    quota_cpus: cg.quota_cpus(),
                    nr_throttled: spans.iter().map(|s| s.throttle.nr_throttled).sum(),
                    throttled_s: spans.iter().map(|s| s.throttle.throttled_s).sum(),
                    allowed_cpus: p.allowed.len(),
                })
            }
            Err(e) => why("cgroup", e),
        }
        match (clock, self.start.cpufreq_hz, end.cpufreq_hz) {
            (Some((start, end)), _, _) => {
                c.clock_hz = Some(ClockSpan {
                    start,
                    end,
                    source: "the samples' own clock (dependent add chain)".into(),
                })
            }
            (None, Some(start), Some(end)) => {
                c.clock_hz = Some(ClockSpan {
                    start,
                    end,
                    source: "cpufreq scaling_cur_freq".into(),
                })
            }
            _ => why(
                "clock",
                p.sensors
                    .cpufreq
                    .as_ref()
                    .err()
                    .map_or("cpufreq unreadable", |s| s.as_str()),
            ),
        }
        match (self.start.throttle_events, end.throttle_events) {
            (Some(a), Some(b)) => c.thermal_throttle_events = Some(b.saturating_sub(a)),
            _ => why(
                "thermal_throttle",
                p.sensors.thermal.as_ref().err().map_or("unreadable", |s| s),
            ),
        }
        match p.sensors.temperature_c() {
            Some(t) => c.temperature_c = Some(t),
            None => why(
                "temperature",
                p.sensors.temps.as_ref().err().map_or("unreadable", |s| s),
            ),
        }
        match (&self.start.energy_uj, &end.energy_uj) {
            (Some(a), Some(b)) => {
                c.energy_j = p.sensors.energy_delta_j(a, b);
                if let (Some(j), Some(rate)) = (c.energy_j, work_rate) {
                    if j > 0.0 {
                        c.work_per_joule = Some(rate * seconds / j);
                    }
                }
            }
            _ => why(
                "energy",
                p.sensors.energy.as_ref().err().map_or("unreadable", |s| s),
            ),
        }
        let vm = spans.iter().fold(VmCounters::default(), |a, s| VmCounters {
            swap_in: a.swap_in + s.vm.swap_in,
            direct_reclaim: a.direct_reclaim + s.vm.direct_reclaim,
        });
        c.memory = Some(MemoryPressure {
            swap_in_pages: vm.swap_in,
            direct_reclaim_pages: vm.direct_reclaim,
        });
        c.disturbed_samples = per_span
            .iter()
            .zip(spans)
            .enumerate()
            .filter(|(_, (sh, s))| s.disturbed(sh, cpus.len(), self.io))
            .map(|(i, _)| i)
            .collect();
        c.cpus = cpus;
        c.seconds = seconds;
        c
    }
}

/// The kernel's time on a record's CPUs: interrupts from every span's `/proc/stat`, and kernel
/// threads from the record's start and end (each placed on the CPU it last ran on: exact for
/// the per-CPU kworkers and ksoftirqd, near enough for the unbound ones).
#[derive(Debug, Default)]
struct KernelPart {
    /// Kernel seconds per CPU.
    by_cpu: BTreeMap<usize, f64>,
    /// Each CPU's own seconds over the spans.
    cpu_s: BTreeMap<usize, f64>,
    /// Kernel threads' seconds by name, busiest first.
    threads: Vec<(String, f64)>,
}

type KernelThreads = BTreeMap<u32, procfs::KernelThread>;

impl KernelPart {
    fn of(
        spans: &[Span],
        cpus: &[usize],
        tick_hz: f64,
        kthreads: Option<(&KernelThreads, &KernelThreads)>,
    ) -> KernelPart {
        let mut k = KernelPart::default();
        for s in spans {
            for cpu in cpus {
                if let Some(t) = s.stat.get(cpu) {
                    *k.by_cpu.entry(*cpu).or_default() += t.interrupt as f64 / tick_hz;
                    *k.cpu_s.entry(*cpu).or_default() += t.total() as f64 / tick_hz;
                }
            }
        }
        let mut names: BTreeMap<String, f64> = BTreeMap::new();
        let (start, end) = kthreads.unzip();
        // A thread born during the record has no start to count from.
        let pairs = end
            .into_iter()
            .flatten()
            .filter_map(|(pid, e)| Some((start?.get(pid)?, e)));
        for (s, e) in pairs {
            let secs = e.ticks.saturating_sub(s.ticks) as f64 / tick_hz;
            if secs > 0.0 && cpus.contains(&e.cpu) {
                *k.by_cpu.entry(e.cpu).or_default() += secs;
                *names.entry(e.name.clone()).or_default() += secs;
            }
        }
        k.threads = names.into_iter().collect();
        k.threads.sort_by(|a, b| b.1.total_cmp(&a.1));
        k
    }
}

/// Shares of CPU time of one span (or of a whole record, when combined).
#[derive(Debug, Clone, Default)]
struct Shares {
    steal: f64,
    other: f64,
    /// The measuring threads' run-queue wait as a share of their lifetimes: the time a
    /// sample lost waiting for a CPU. Not of the time they wanted one (`run_delay_share`): an
    /// I/O thread that sleeps between completions waits at every wake-up (for the completion's
    /// interrupt work on that CPU, or for an idle vCPU to resume), a large share of the little
    /// CPU time it wants though nothing else ran; a disk record read 0.41 that way with no
    /// other process on its CPUs, and every sample was flagged disturbed. For a thread that
    /// computes throughout the two agree.
    waited: f64,
    /// The kernel's interrupts (irq + softirq) on the CPUs, as a share of their time (inside
    /// `other`: no task is charged for them).
    interrupt: f64,
    /// Per CPU: (steal share, other share).
    by_cpu: BTreeMap<usize, (f64, f64)>,
    /// Ticks behind the shares, for weighting when combining.
    ticks: f64,
}

impl Span {
    /// Seconds of CPU the process spent outside its measuring threads (with a tally only).
    fn helper_s(&self) -> f64 {
        let tracked = self
            .tally
            .as_ref()
            .map_or(0, |t| t.by_cpu.values().sum::<u64>());
        self.own_ns.saturating_sub(tracked) as f64 / 1e9
    }

    fn shares(&self, cpus: &[usize], tick_hz: f64) -> Shares {
        let mut s = Shares::default();
        let ticks: Vec<(usize, CpuTicks)> = cpus
            .iter()
            .filter_map(|c| Some((*c, *self.stat.get(c)?)))
            .collect();
        let busy_all: u64 = ticks.iter().map(|(_, t)| t.busy).sum();
        // Our own CPU time on each CPU: the tally's per-CPU time, plus whatever the process
        // spent outside it (the runner, I/O threads) spread in proportion to busy time.
        let untracked = self.helper_s();
        let (mut steal, mut other, mut total, mut mine_all) = (0.0, 0.0, 0.0, 0.0);
        for (cpu, t) in &ticks {
            let secs = t.total() as f64 / tick_hz;
            let mine = self
                .tally
                .as_ref()
                .and_then(|tl| tl.by_cpu.get(cpu))
                .map_or(0.0, |ns| *ns as f64 / 1e9)
                + if busy_all > 0 {
                    untracked * t.busy as f64 / busy_all as f64
                } else {
                    0.0
                };
            let o = (t.busy as f64 / tick_hz - mine).max(0.0);
            let st = t.steal as f64 / tick_hz;
            if secs > 0.0 {
                s.by_cpu.insert(*cpu, (st / secs, (o / secs).min(1.0)));
            }
            steal += st;
            other += o;
            total += secs;
            mine_all += mine;
        }
        // Where our time exceeds a CPU's busy ticks, it was not all there: ticks sample a CPU
        // that sleeps and wakes thousands of times a second (an I/O thread) short of the
        // scheduler's exact time, and a migrating thread's time is placed on one CPU. The
        // others' time cannot then exceed what all the CPUs' busy ticks leave beside ours, so the
        // per-CPU shares are scaled down to that: clipped one CPU at a time, a disk benchmark's
        // own time read as a neighbour's (19 % of two CPUs where 5 % was not ours).
        let beside_ours = (busy_all as f64 / tick_hz - mine_all).max(0.0);
        if other > beside_ours {
            let f = beside_ours / other;
            for v in s.by_cpu.values_mut() {
                v.1 *= f;
            }
            other = beside_ours;
        }
        if total > 0.0 {
            s.steal = steal / total;
            s.other = (other / total).min(1.0);
            let irq: u64 = ticks.iter().map(|(_, t)| t.interrupt).sum();
            s.interrupt = (irq as f64 / tick_hz / total).min(s.other);
        }
        s.ticks = total;
        let (delay, lifetimes_ns) = match &self.tally {
            Some(t) => (t.run_delay_ns, t.wall_ns as f64),
            None => (self.tasks.1, self.seconds * 1e9 * self.tasks_ran as f64),
        };
        if lifetimes_ns > 0.0 {
            s.waited = (delay as f64 / lifetimes_ns).min(1.0);
        }
        s
    }

    /// Whether this sample lost [`DISTURBED_SHARE`] or more of its time to steal, other
    /// processes, run-queue waits or throttling, with its `shares` over `cpus` CPUs; for an
    /// I/O record ([`Recorder::does_io`]) the kernel's interrupts and the waits are its own.
    fn disturbed(&self, sh: &Shares, cpus: usize, io: bool) -> bool {
        // Summed over the CPUs' run queues by the kernel.
        let throttled = self.throttle.throttled_s / (self.seconds.max(1e-9) * cpus.max(1) as f64);
        let (other, waited) = if io {
            ((sh.other - sh.interrupt).max(0.0), 0.0)
        } else {
            (sh.other, sh.waited)
        };
        sh.steal.max(other).max(waited).max(throttled) >= DISTURBED_SHARE
    }
}

impl Shares {
    /// A record's shares from its spans', weighted by the CPU time behind each.
    fn combine(parts: &[Shares]) -> Shares {
        let mut out = Shares::default();
        let total: f64 = parts.iter().map(|p| p.ticks).sum();
        if total <= 0.0 {
            return out;
        }
        let mut by_cpu: BTreeMap<usize, (f64, f64, f64)> = BTreeMap::new();
        for p in parts {
            let w = p.ticks / total;
            out.steal += p.steal * w;
            out.other += p.other * w;
            out.waited += p.waited * w;
            out.interrupt += p.interrupt * w;
            let n = p.by_cpu.len().max(1) as f64;
            for (cpu, (st, o)) in &p.by_cpu {
                let e = by_cpu.entry(*cpu).or_default();
                let cw = p.ticks / n;
                e.0 += st * cw;
                e.1 += o * cw;
                e.2 += cw;
            }
        }
        out.by_cpu = by_cpu
            .into_iter()
            .filter(|(_, e)| e.2 > 0.0)
            .map(|(c, e)| (c, (e.0 / e.2, e.1 / e.2)))
            .collect();
        out.ticks = total;
        out
    }
}

/// "8–15", "0, 2, 5": CPU numbers as a user reads them — the kernel's list
/// (`host::format_cpu_list`) with an en dash for a range of three or more and two
/// neighbours named apart.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut v: Vec<usize> = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    if v.is_empty() {
        return String::new();
    }
    crate::host::format_cpu_list(&v)
        .split(',')
        .map(|part| match part.split_once('-') {
            Some((a, b)) if b.parse::<usize>().ok() == a.parse::<usize>().ok().map(|a| a + 1) => {
                format!("{a}, {b}")
            }
            Some((a, b)) => format!("{a}–{b}"),
            None => part.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
