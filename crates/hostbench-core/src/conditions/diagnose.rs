//! From a record's conditions to the causes of its shortfall, each with its measured share.
//!
//! A record is diagnosed when it falls short (below 90 % of its peak, a scaling step below 80 %
//! of linear, samples spread beyond the noise threshold) or when a cause is large on its own
//! (a tenth of the CPU time gone, a quota or an affinity mask smaller than the threads asked).
//! Every cause is measured, never guessed; where none is found the diagnosis says which sources
//! were read, so "none found" is itself a finding.

use super::cpu_list;
// The type is the result schema's (`model`); re-exported so its old path keeps working.
pub use crate::model::{Cause, Diagnosis, Trigger};
use crate::model::{Conditions, Host, Record, Work};

/// Coarsest `/proc/stat` resolution (one tick as a share of a CPU's time over the record) at
/// which its shares are judged: 4 ticks per CPU.
pub const MAX_RESOLUTION: f64 = 0.25;

/// Below this share of its peak a record is a shortfall (the model's, where the trigger is).
pub use crate::model::SHORT_OF_PEAK;
/// A scaling step below this share of linear is a shortfall.
pub const SHORT_OF_LINEAR: f64 = 0.80;
/// A cause this large is reported even on a record that is not short.
pub const LARGE_CAUSE: f64 = 0.10;

/// What the diagnosis needs to know about the host beyond the record.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// CPUs this process may use.
    pub allowed_cpus: usize,
    /// Physical cores among them.
    pub cores: usize,
    /// Measured independent FMA throughput, in CPUs (`host.cpu.effective_cores`).
    pub effective_cores: Option<f64>,
}

impl Context {
    pub fn of(host: &Host) -> Context {
        // The mask and its cores are fixed for the process (`allowed_cpus` keeps its first
        // answer): read the topology once, not at every record.
        static CPUS: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();
        let (allowed_cpus, cores) = *CPUS.get_or_init(|| {
            let allowed = crate::affinity::allowed_cpus();
            (allowed.len(), crate::affinity::physical_cores(&allowed))
        });
        Context {
            allowed_cpus,
            cores,
            effective_cores: host.cpu.effective_cores,
        }
    }
}

/// Samples by their 0-based indices, as a reader counts them (`units`, where net's under-load
/// client says it too).
pub use crate::units::sample_list;

/// A share as a whole percentage: "31 %".
fn pct(x: f64) -> String {
    format!("{:.0} %", x * 100.0)
}

/// "kworker/1:0+dio/vda 15 %, interrupts and the rest 2 %": the kernel's time by who took it.
fn kernel_detail(cond: &Conditions) -> String {
    let mut parts: Vec<String> = cond
        .kernel_threads
        .iter()
        .map(|t| format!("{} {}", t.name, pct(t.share)))
        .collect();
    let named: f64 = cond.kernel_threads.iter().map(|t| t.share).sum();
    let rest = cond.kernel_share.unwrap_or(0.0) - named;
    if rest >= 0.005 {
        parts.push(format!(
            "{} {}",
            if parts.is_empty() {
                "interrupts and kernel threads"
            } else {
                "interrupts and the rest"
            },
            pct(rest)
        ));
    }
    parts.join(", ")
}

/// `threads` where the record's are CPU-bound workers, one per CPU.
fn cpu_threads(rec: &Record) -> Option<usize> {
    let t = rec.params.get("threads")?.as_u64()? as usize;
    rec.work.cpu_bound().then_some(t)
}

/// Every cause the conditions show, with those the record's subsystem found
/// (`Record::subsystem_causes`), largest share first: each of core's causes is its own function
/// over what was read ([`Reading`]), in the order their ties are listed. A subsystem's
/// finding about its benchmark's own work is listed where the solve's overhead always was,
/// after the host's sharing; its conditions (a GPU's clock reasons) after core's.
pub fn causes(rec: &Record, cond: &Conditions, ctx: &Context) -> Vec<Diagnosis> {
    let r = Reading::of(rec, cond, ctx);
    let found = |condition: bool| {
        rec.subsystem_causes
            .iter()
            .filter(move |d| d.is_condition() == condition)
            .cloned()
            .map(Some)
    };
    let mut out: Vec<Diagnosis> = [
        affinity(&r),
        cgroup_quota(&r),
        steal(&r),
        contention(&r),
        kernel_io(&r),
        helpers(&r),
        shared_cores(&r),
    ]
    .into_iter()
    // Threads taking turns on fewer CPUs wait at every step barrier for a thread that is not
    // running: that is the oversubscription's shortfall, named above, and no larger n helps.
    .chain(found(false).filter(|_| !r.oversubscribed))
    .chain([clock_drop(&r), thermal_events(&r), memory_pressure(&r)])
    .chain(found(true))
    .flatten()
    .collect();
    out.sort_by(|a, b| b.share.total_cmp(&a.share));
    out
}

/// What every cause reads: the record, its conditions and host, and the figures several
/// causes share (the threads against the CPUs allowed, whether the ticks resolve a share, the
/// kernel's part).
struct Reading<'a> {
    rec: &'a Record,
    cond: &'a Conditions,
    ctx: &'a Context,
    /// CPU-bound worker threads ([`cpu_threads`]).
    threads: Option<usize>,
    /// CPUs the record could run on (its cgroup's mask, else the process's).
    allowed: usize,
    /// More worker threads than allowed CPUs.
    oversubscribed: bool,
    /// /proc/stat counts in ticks: over a record shorter than a few ticks per CPU its shares
    /// are not findings at all, and within two ticks of zero they are noise.
    ticks_ok: bool,
    /// Two ticks as a share: the least share that is a finding.
    floor: f64,
    /// On a disk or network benchmark the kernel's interrupts and threads mostly complete the
    /// benchmark's own I/O: they are counted apart (`kernel_io`), not as a neighbour.
    io: bool,
    /// The kernel's share of the record's CPUs.
    kernel: f64,
    /// Whether that share is a finding.
    kernel_found: bool,
}

impl<'a> Reading<'a> {
    fn of(rec: &'a Record, cond: &'a Conditions, ctx: &'a Context) -> Reading<'a> {
        let threads = cpu_threads(rec);
        let allowed = cond
            .cgroup
            .as_ref()
            .map_or(ctx.allowed_cpus, |c| c.allowed_cpus);
        let ticks_ok = cond.share_resolution.is_none_or(|r| r <= MAX_RESOLUTION);
        let floor = 2.0 * cond.share_resolution.unwrap_or(0.0);
        let kernel = cond.kernel_share.unwrap_or(0.0);
        Reading {
            rec,
            cond,
            ctx,
            threads,
            allowed,
            oversubscribed: threads.is_some_and(|t| allowed > 0 && t > allowed),
            ticks_ok,
            floor,
            io: rec.work.does_io(),
            kernel,
            kernel_found: ticks_ok && kernel >= 0.02f64.max(floor),
        }
    }

    /// "s" after a count of the record's CPUs other than one.
    fn cpus_plural(&self) -> &'static str {
        if self.cond.cpus.len() == 1 {
            ""
        } else {
            "s"
        }
    }
}

/// More worker threads than the affinity mask allows CPUs: they take turns.
fn affinity(r: &Reading<'_>) -> Option<Diagnosis> {
    let t = r.threads.filter(|_| r.oversubscribed)?;
    let allowed = r.allowed;
    Some(Diagnosis::new(
        Cause::Affinity,
        1.0 - allowed as f64 / t as f64,
        format!(
            "{t} threads on {allowed} allowed CPU{} (the affinity mask: taskset, cpuset or \
             the job's binding): they take turns",
            if allowed == 1 { "" } else { "s" }
        ),
    ))
}

/// A cgroup CPU quota below the worker threads, or the throttling it did.
fn cgroup_quota(r: &Reading<'_>) -> Option<Diagnosis> {
    let (cond, threads) = (r.cond, r.threads);
    let cg = cond.cgroup.as_ref()?;
    let t = threads.unwrap_or(cond.cpus.len()).max(1) as f64;
    // A quota below the threads is a cause for CPU-bound workers; for others (I/O, network)
    // only the throttling it actually did.
    let quota_short = threads.and(cg.quota_cpus.filter(|q| *q < t - 0.01));
    // The kernel sums throttled time over the CPUs' run queues: per CPU-second of the record.
    let cpu_s = cond.seconds.max(1e-9) * cond.cpus.len().max(1) as f64;
    let throttled = cg.throttled_s / cpu_s;
    if !(quota_short.is_some() || (cg.nr_throttled > 0 && throttled >= 0.01)) {
        return None;
    }
    let share = quota_short
        .map_or(0.0, |q| 1.0 - q / t)
        .max(throttled.min(1.0));
    let quota = cg.quota_cpus.map_or("a CPU quota".to_string(), |q| {
        format!("cgroup quota of {q:.1} CPU")
    });
    Some(Diagnosis::new(
        Cause::CgroupQuota,
        share,
        format!(
            "{quota} for {} thread{}: throttled {} times ({:.2} of {:.2} CPU-seconds)",
            t as usize,
            if t as usize == 1 { "" } else { "s" },
            cg.nr_throttled,
            cg.throttled_s,
            cpu_s
        ),
    ))
}

/// Time the hypervisor gave to something else.
fn steal(r: &Reading<'_>) -> Option<Diagnosis> {
    let cond = r.cond;
    let steal = cond
        .steal_share
        .filter(|s| r.ticks_ok && *s >= 0.02f64.max(2.0 * cond.share_resolution.unwrap_or(0.0)))?;
    let cpus: Vec<usize> = cond
        .per_cpu
        .iter()
        .filter(|c| c.steal_share >= 0.01)
        .map(|c| c.cpu)
        .collect();
    let on = if cpus.is_empty() {
        cond.cpus.clone()
    } else {
        cpus
    };
    Some(Diagnosis::new(
        Cause::Steal,
        steal,
        format!(
            "steal {} of CPU time on CPU{} {} (the hypervisor ran something else)",
            pct(steal),
            if on.len() == 1 { "" } else { "s" },
            cpu_list(&on)
        ),
    ))
}

/// Other processes' CPU time on the record's CPUs (on an I/O benchmark, beside the kernel's).
fn contention(r: &Reading<'_>) -> Option<Diagnosis> {
    let (cond, io, floor, kernel) = (r.cond, r.io, r.floor, r.kernel);
    let other = cond.other_cpu_share.unwrap_or(0.0) - if io { kernel } else { 0.0 };
    let other = if r.ticks_ok && other >= floor {
        other
    } else {
        0.0
    };
    let busiest: Vec<(usize, f64)> = cond
        .per_cpu
        .iter()
        .map(|c| (c.cpu, c.other_share - if io { c.kernel_share } else { 0.0 }))
        .filter(|(_, o)| r.ticks_ok && *o >= 0.05f64.max(floor))
        .collect();
    // Run-queue waits alone are no finding: where the benchmark's own threads outnumber the
    // CPUs (a loopback test's clients and servers) they wait for each other. Only CPU time that
    // others took is a cause.
    if other < 0.02 && busiest.is_empty() {
        return None;
    }
    let mut worst = busiest;
    worst.sort_by(|a, b| b.1.total_cmp(&a.1));
    let text = if worst.is_empty() {
        format!(
            "other processes used {} of CPU{} {}",
            pct(other),
            r.cpus_plural(),
            cpu_list(&cond.cpus)
        )
    } else {
        let parts: Vec<String> = worst
            .iter()
            .take(3)
            .map(|(cpu, o)| format!("{} of CPU {cpu}", pct(*o)))
            .collect();
        format!(
            "{} used {}",
            if worst.len() == 1 {
                "another process"
            } else {
                "other processes"
            },
            parts.join(", ")
        )
    };
    // Elsewhere the kernel's time is a neighbour like any other, but one worth naming.
    let text = if !io && r.kernel_found {
        format!(
            "{text} (the kernel's part {}: {})",
            pct(kernel.min(other)),
            kernel_detail(cond)
        )
    } else {
        text
    };
    Some(Diagnosis::new(Cause::CpuContention, other, text))
}

/// The kernel completing a disk or network benchmark's own I/O on its CPUs.
fn kernel_io(r: &Reading<'_>) -> Option<Diagnosis> {
    if !(r.io && r.kernel_found) {
        return None;
    }
    Some(Diagnosis::new(
        Cause::KernelIo,
        r.kernel,
        format!(
            "the kernel's interrupts and threads used {} of CPU{} {} ({}): most likely \
             completing this benchmark's own I/O, a part of what it costs, not a neighbour",
            pct(r.kernel),
            r.cpus_plural(),
            cpu_list(&r.cond.cpus),
            kernel_detail(r.cond)
        ),
    ))
}

/// hostbench's own threads outside the measurement on the record's CPUs.
fn helpers(r: &Reading<'_>) -> Option<Diagnosis> {
    let h = r
        .cond
        .helper_cpu_share
        .filter(|h| r.ticks_ok && *h >= 0.05f64.max(r.floor))?;
    Some(Diagnosis::new(
        Cause::CpuContention,
        h,
        format!(
            "hostbench's own threads outside the measurement (an OpenCL runtime's workers, \
             a reference tool's threads) used {} of CPU{} {}",
            pct(h),
            r.cpus_plural(),
            cpu_list(&r.cond.cpus)
        ),
    ))
}

/// CPUs that give less independent FMA throughput than their count, for computing threads.
fn shared_cores(r: &Reading<'_>) -> Option<Diagnosis> {
    if !r.rec.work.computes() {
        return None;
    }
    let (e, t) = (r.ctx.effective_cores?, r.threads?);
    let used = t.min(r.ctx.cores.max(1));
    (e < used as f64 - 0.25).then(|| {
        Diagnosis::new(
            Cause::SharedCores,
            1.0 - e / used as f64,
            format!(
                "{} CPUs give the FMA rate of {e:.1}: threads on them share execution \
                 units (hidden SMT or an overcommitted host)",
                r.ctx.allowed_cpus
            ),
        )
    })
}

/// The core clock fell during the record.
fn clock_drop(r: &Reading<'_>) -> Option<Diagnosis> {
    let c = r.cond.clock_hz.as_ref()?;
    (c.start > 0.0 && c.end < c.start * 0.95).then(|| {
        Diagnosis::new(
            Cause::ClockDrop,
            1.0 - c.end / c.start,
            format!(
                "the clock fell from {:.2} GHz to {:.2} GHz during the record ({})",
                c.start / 1e9,
                c.end / 1e9,
                c.source
            ),
        )
    })
}

/// Thermal-throttle events on the record's CPUs.
fn thermal_events(r: &Reading<'_>) -> Option<Diagnosis> {
    let n = r.cond.thermal_throttle_events.filter(|n| *n > 0)?;
    Some(Diagnosis::new(
        Cause::Thermal,
        0.0,
        format!("{n} thermal-throttle events on the record's CPUs"),
    ))
}

/// Swap-ins and direct reclaim during the record.
fn memory_pressure(r: &Reading<'_>) -> Option<Diagnosis> {
    let m = r
        .cond
        .memory
        .as_ref()
        .filter(|m| m.swap_in_pages + m.direct_reclaim_pages > 0)?;
    Some(Diagnosis::new(
        Cause::MemoryPressure,
        0.0,
        format!(
            "{} pages swapped in and {} scanned by direct reclaim during the record",
            m.swap_in_pages, m.direct_reclaim_pages
        ),
    ))
}

/// A paced sender that kept this share of its schedule or more offered the load it was asked
/// for (the model's: net's under-load client and the summary judge its records by it too).
pub use crate::model::KEPT_SCHEDULE;

/// Why a record needs a diagnosis, if it does: a shortfall against its peak or its spread
/// ([`Trigger::shortfall`] of its own figures).
pub fn shortfall(rec: &Record) -> Option<String> {
    Trigger::of(rec).shortfall()
}

/// Set `rec.diagnosis` (and `efficiency_effective`) from its conditions: the causes when it is
/// short (or `trigger` names a shortfall found elsewhere, such as a scaling step) or when a cause
/// is large on its own; `none_found` with the sources read when it is short and nothing shows.
/// Then write the "noisy" warning of a record whose samples spread, naming the measured cause
/// where there is one: this is its one writer.
pub fn apply(rec: &mut Record, ctx: &Context, trigger: Option<String>) {
    let cause = diagnose(rec, ctx, trigger);
    rec.note_noise(cause.as_deref());
}

/// [`apply`]'s diagnosis; the cause a "noisy" warning names, where one was measured.
fn diagnose(rec: &mut Record, ctx: &Context, trigger: Option<String>) -> Option<String> {
    set_efficiency_effective(rec, ctx);
    let cond = rec.conditions.clone()?;
    let found = causes(rec, &cond, ctx);
    let why = Trigger {
        elsewhere: trigger,
        ..Trigger::of(rec)
    };
    let short = why.reason();
    // Shared execution units are the host's standing property, measured once per run, and the
    // sharing moves over time (a hypervisor places vCPUs anew): it explains a shortfall, but a
    // record that did not fall short did not meet it. A LINPACK solve's overhead, too, is said
    // only beside a shortfall; a sender far behind its schedule makes the figure the sender's,
    // so it is said even where there is no peak.
    let large = found.iter().any(|d| {
        (d.share >= LARGE_CAUSE && !d.cause.only_beside_a_shortfall())
            || d.cause.counts_at_any_share()
    });
    if short.is_none() && !large {
        return None;
    }
    // Where only the benchmark's own overhead showed, "none found" still says which conditions
    // were read and were clean.
    let clean = !found.iter().any(Diagnosis::is_condition);
    let what = if found.is_empty() {
        "cause"
    } else {
        "condition of the machine"
    };
    rec.diagnosis = found;
    rec.trigger = Some(why);
    if clean {
        rec.diagnosis.push(Diagnosis::new(
            Cause::NoneFound,
            0.0,
            format!("no {what} found among: {}", sources_read(&cond)),
        ));
    }
    // The "noisy" warning names its cause where one was measured.
    let first = rec.diagnosis.iter().find(|d| d.is_condition())?;
    let disturbed = if cond.disturbed_samples.is_empty() {
        String::new()
    } else {
        format!(" ({} disturbed)", sample_list(&cond.disturbed_samples))
    };
    Some(format!("{}{disturbed}", first.text))
}

/// The sources a `none_found` diagnosis looked at, and those it could not.
fn sources_read(c: &Conditions) -> String {
    let mut read = Vec::new();
    let ticks_ok = c.share_resolution.is_none_or(|r| r <= MAX_RESOLUTION);
    for (name, ok) in [
        ("steal", c.steal_share.is_some() && ticks_ok),
        ("other processes", c.other_cpu_share.is_some() && ticks_ok),
        ("cgroup quota", c.cgroup.is_some()),
        ("affinity", true),
        ("clock", c.clock_hz.is_some()),
        ("thermal throttling", c.thermal_throttle_events.is_some()),
        ("memory pressure", c.memory.is_some()),
        ("GPU clock reasons", c.gpu.is_some()),
    ] {
        if ok {
            read.push(name);
        }
    }
    let mut s = read.join(", ");
    if !ticks_ok {
        s.push_str(&format!(
            " (steal and other processes not judged: {:.3} s is too short for /proc/stat's ticks)",
            c.seconds
        ));
    }
    if !c.unavailable.is_empty() {
        let missing: Vec<&str> = c.unavailable.keys().map(String::as_str).collect();
        s.push_str(&format!(" (not readable here: {})", missing.join(", ")));
    }
    s
}

/// For compute records on a host whose CPUs deliver fewer independent FMA units than there are
/// cores: the efficiency against the effective cores, beside the one against the documented
/// peak, so that both readings are shown.
fn set_efficiency_effective(rec: &mut Record, ctx: &Context) {
    if !rec.work.computes() {
        return;
    }
    let (Some(peak), Some(e), Some(t)) = (&rec.peak, ctx.effective_cores, cpu_threads(rec)) else {
        return;
    };
    let used = t.min(ctx.cores.max(1)) as f64;
    if e < used - 0.25 && t as f64 > e && peak.value > 0.0 {
        let eff = rec.value / (peak.value / used * e);
        // Above 105 % the sharing the probe saw was not there during this record.
        if eff <= 1.05 {
            rec.efficiency_effective = Some(eff);
        }
    }
}

/// Scaling steps below 80 % of linear among the records of independent computing threads
/// ([`Work::Compute`]): for each record at more
/// threads than the next lower count of the same case, (index, "2→4 threads gave 1.31×").
pub fn scaling_shortfalls(records: &[Record]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, r) in records.iter().enumerate() {
        if r.work != Work::Compute {
            continue;
        }
        let Some(t) = r.params.get("threads").and_then(|v| v.as_u64()) else {
            continue;
        };
        if r.params.get("scaling").and_then(|v| v.as_str()) == Some("weak") {
            continue;
        }
        let same_case = |o: &Record| {
            o.benchmark == r.benchmark
                && o.params
                    .iter()
                    .filter(|(k, _)| *k != "threads")
                    .all(|(k, v)| r.params.get(k) == Some(v))
                && o.params.len() == r.params.len()
        };
        let prev = records
            .iter()
            .filter(|o| same_case(o))
            .filter_map(|o| Some((o.params.get("threads")?.as_u64()?, o.value)))
            .filter(|(ot, _)| *ot < t)
            .max_by_key(|(ot, _)| *ot);
        if let Some((pt, pv)) = prev.filter(|(_, pv)| *pv > 0.0) {
            let gain = r.value / pv;
            let linear = t as f64 / pt as f64;
            if gain / linear < SHORT_OF_LINEAR {
                out.push((
                    i,
                    format!(
                        "{pt}→{t} threads gave {gain:.2}× ({:.0} % of linear)",
                        gain / linear * 100.0
                    ),
                ));
            }
        }
    }
    out
}

#[doc(hidden)]
pub mod testdata;

#[cfg(test)]
mod tests;
