//! What the summary says beside a headline figure: its leading diagnosis, the cause or its
//! absence, the spread mark, the rate per watt, the energy note and a disk record's working file.
//! Split out of `summary.rs` (issue 53: no source file over 1,000 lines); the other exporters
//! (cards, HTML, Markdown) reach these through `summary`'s re-exports.

use hostbench_core::model::{Cause, Diagnosis, Metric, Record, RunResult};

use crate::units::human;

/// The diagnosis a record's line leads with: its first, except the kernel's own I/O work
/// (`kernel_io`), which is context on a disk or network record rather than why it fell short,
/// and leads only where nothing else was said.
pub(super) fn leading(r: &Record) -> Option<&Diagnosis> {
    r.diagnosis
        .iter()
        .find(|d| says_why(&d.cause))
        .or(r.diagnosis.first())
}

/// Whether a cause says why a figure fell short, and may lead its line, rather than being
/// context: the kernel completing a disk or network benchmark's own I/O. Matched in full, so a
/// new cause is placed here when it is added.
fn says_why(c: &Cause) -> bool {
    match c {
        Cause::KernelIo => false,
        Cause::Affinity
        | Cause::CgroupQuota
        | Cause::CpuContention
        | Cause::Steal
        | Cause::SharedCores
        | Cause::ClockDrop
        | Cause::Thermal
        | Cause::PowerCap
        | Cause::MemoryPressure
        | Cause::SolveOverhead
        | Cause::SenderBehind
        | Cause::NoneFound
        | Cause::Other(_) => true,
    }
}

/// Whether a record fell short or varied and the conditions read showed no cause
/// (`none_found` leads its diagnosis): it is marked in its row, not given a line of its own.
pub fn unexplained(r: &Record) -> bool {
    leading(r).is_some_and(|d| d.cause == Cause::NoneFound)
}

/// The first measured cause of a record's shortfall, for the line under its headline; None
/// where no cause was found (that is said once for all such figures, see `no_cause_sentence`).
pub fn first_cause(r: &Record) -> Option<String> {
    let d = leading(r)?;
    if d.cause == Cause::NoneFound {
        return None;
    }
    Some(if d.share > 0.0 {
        format!("{} ({:.0} %): {}", d.cause, d.share * 100.0, d.text)
    } else {
        format!("{}: {}", d.cause, d.text)
    })
}

/// An unexplained record's finding in full, for a hover or a table: why it was looked into and
/// what was: "CV 5.5 %, and no cause found among: steal, …".
pub fn no_cause(r: &Record) -> Option<String> {
    let d = leading(r).filter(|d| d.cause == Cause::NoneFound)?;
    Some(match r.trigger().shortfall() {
        Some(why) => format!("{why}, and {}", d.text),
        None => d.text.clone(),
    })
}

/// The mark beside an unexplained figure whose samples spread beyond the noise threshold:
/// `±5.5 %` (their coefficient of variation).
pub fn spread_mark(r: &Record) -> Option<String> {
    (unexplained(r) && noisy(r)).then(|| format!("±{:.1} %", r.stats.cv * 100.0))
}

pub(super) fn noisy(r: &Record) -> bool {
    r.stats.n > 1 && r.stats.cv > hostbench_core::stats::NOISY_CV
}

/// What a `none_found` text says was read, and what could not be: ("steal, other processes,
/// …", ["clock", "energy"]).
pub(super) fn sources_of(text: &str) -> (String, Vec<String>) {
    let after = text.split_once("among: ").map_or(text, |(_, a)| a);
    match after.split_once(" (not readable here: ") {
        Some((read, rest)) => (
            read.to_string(),
            rest.trim_end_matches(')')
                .split(", ")
                .map(|s| s.replace('_', " "))
                .collect(),
        ),
        None => (after.to_string(), Vec::new()),
    }
}

/// Once for all of `figures` that varied or fell short with no cause found: "10 figures varied
/// more than 5 % between samples; no cause found among steal, other processes, cgroup quota,
/// affinity, memory pressure (clock, energy, temperature not readable on this host)".
pub fn no_cause_sentence(figures: &[&Record]) -> Option<String> {
    let un: Vec<&Record> = figures.iter().copied().filter(|r| unexplained(r)).collect();
    if un.is_empty() {
        return None;
    }
    let varied = un.iter().filter(|r| noisy(r)).count();
    let short = un.len() - varied;
    let n = |k: usize| {
        if k == 1 {
            "1 figure".to_string()
        } else {
            format!("{k} figures")
        }
    };
    let threshold = hostbench_core::stats::NOISY_CV * 100.0;
    let what = match (varied, short) {
        (0, s) => format!("{} fell short", n(s)),
        (v, 0) => format!("{} varied more than {threshold:.0} % between samples", n(v)),
        (v, s) => format!(
            "{} varied more than {threshold:.0} % between samples and {s} fell short",
            n(v)
        ),
    };
    // The sources read are the host's and mostly the same for every record; where they differ
    // (a clock read on the CPU's records, not on the disk's), each is named once.
    let mut read: Vec<String> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    for r in &un {
        let Some(d) = leading(r) else { continue };
        let (rd, ms) = sources_of(&d.text);
        // A record's own remark ("steal … not judged: 0.01 s is too short") is in the report.
        let rd = rd.split(" (").next().unwrap_or_default();
        for x in rd.split(", ").filter(|x| !x.is_empty()) {
            if !read.iter().any(|y| y == x) {
                read.push(x.to_string());
            }
        }
        for m in ms {
            if !missing.contains(&m) {
                missing.push(m);
            }
        }
    }
    missing.retain(|m| !read.contains(m));
    let missing = if missing.is_empty() {
        String::new()
    } else {
        format!(" ({} not readable on this host)", missing.join(", "))
    };
    Some(format!(
        "{what}; no cause found among {}{missing}",
        read.join(", ")
    ))
}

/// A record's work per watt beside its figure: `2.10 GFLOP/s per W` (FLOP/J = FLOP/s per W),
/// from the GPU's energy (NVML) where it was read, else the CPU package's (RAPL).
pub fn per_watt(r: &Record) -> Option<String> {
    if r.metric != Metric::Throughput {
        return None;
    }
    let c = r.conditions.as_ref()?;
    let wpj = c
        .gpu
        .as_ref()
        .and_then(|g| g.work_per_joule)
        .or(c.work_per_joule)
        .filter(|w| w.is_finite() && *w > 0.0)?;
    Some(format!("{} per W", human(wpj, &r.unit)))
}

/// Where a run's records could not read their energy, once for the report: why, and what that
/// leaves (no rate per watt at all, or only the GPU's).
pub fn energy_note(run: &RunResult) -> Option<String> {
    let why = run
        .records
        .iter()
        .find_map(|r| r.conditions.as_ref()?.unavailable.get("energy"))?;
    Some(if run.records.iter().any(|r| per_watt(r).is_some()) {
        format!(
            "CPU package energy is not readable on this host ({why}): rates per watt only where \
             the GPU's energy was read"
        )
    } else {
        format!("Energy is not readable on this host ({why}): no figure has a rate per watt")
    })
}

/// A disk record's working file where it is below the size floor or smaller than asked (issue
/// 55: a 3 MiB file on a nearly full disk read at 20 GB/s), said under its headline: such a
/// figure may be a cache's, not the device's.
pub(super) fn working_file(r: &Record) -> Option<String> {
    let s = r.extra.get("sizing")?;
    let size = crate::units::bytes(s.get("used")?.as_f64()?);
    if s.get("below_floor").and_then(|v| v.as_bool()) == Some(true) {
        let floor = s.get("floor").and_then(|v| v.as_f64()).unwrap_or(0.0);
        return Some(format!(
            "working file {size}, below the {} floor: may be a cache's figure",
            crate::units::bytes(floor)
        ));
    }
    (s.get("limited_by").and_then(|v| v.as_str()) == Some("free_space"))
        .then(|| format!("working file {size}, limited by free space"))
}
