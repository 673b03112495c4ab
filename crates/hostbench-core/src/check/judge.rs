//! From measured figures, hardware counters and the inventory to verdicts, and from the checks
//! to the node's verdict and its one-line reason (see the module header of `check`).

use serde_json::Value;

use super::expect::{glob, Bound, Expectation};
use super::{Check, Expected, Reported, Retry, Verdict};
use crate::conditions::diagnose::{self, Diagnosis};
use crate::model::{Cause, Health, Host, Metric, Params, Record, Severity, Work};
use crate::units::{format_bytes_iec, format_value};

/// The default share of its documented peak a figure must reach where nothing else is known.
pub const PEAK_SHARE: f64 = 0.85;
/// How far a figure may fall below its baseline before it misses.
pub const TOLERANCE: f64 = 0.25;

/// What a figure is held against.
#[derive(Debug, Clone, PartialEq)]
pub struct Yardstick {
    /// The bound in the record's unit.
    pub bound: f64,
    /// The record must be at least `bound` (throughput) or at most it (latency).
    pub at_least: bool,
    /// `expect FILE:LINE`, `baseline run #12`, `0.85 x peak (…)`.
    pub source: String,
}

/// One figure of a baseline: a stored run's (or the median of several) for the same case.
#[derive(Debug, Clone, PartialEq)]
pub struct BaselineFigure {
    pub benchmark: String,
    pub params: Params,
    pub value: f64,
}

/// The baseline a check may be held against: its label (`run #12`, `median of 5 runs`,
/// `fleet f-123's median node`) and its figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Baseline {
    pub label: String,
    pub figures: Vec<BaselineFigure>,
}

impl Baseline {
    /// The median of each figure over `runs` (one run: its figures), keyed by benchmark and
    /// parameters; a figure some runs lack takes the median of those that have it.
    pub fn median_of(label: String, runs: &[&crate::model::RunResult]) -> Baseline {
        let mut groups: Vec<(String, Params, Vec<f64>)> = Vec::new();
        for r in runs.iter().flat_map(|run| &run.records) {
            if r.incomplete.is_some() {
                continue;
            }
            match groups
                .iter_mut()
                .find(|(b, p, _)| *b == r.benchmark && *p == r.params)
            {
                Some(g) => g.2.push(r.value),
                None => groups.push((r.benchmark.clone(), r.params.clone(), vec![r.value])),
            }
        }
        let figures = groups
            .into_iter()
            .map(|(benchmark, params, mut v)| {
                v.sort_by(f64::total_cmp);
                let n = v.len();
                let value = if n % 2 == 1 {
                    v[n / 2]
                } else {
                    (v[n / 2 - 1] + v[n / 2]) / 2.0
                };
                BaselineFigure {
                    benchmark,
                    params,
                    value,
                }
            })
            .collect();
        Baseline { label, figures }
    }
}

/// How the yardsticks are chosen: the expectation file, else the baseline, else a share of
/// the documented peak.
#[derive(Debug, Clone, Default)]
pub struct Yardsticks<'a> {
    pub expect: Option<&'a Expectation>,
    pub baseline: Option<&'a Baseline>,
    /// The share of the peak, and where it was set (`--peak-share`, the file, the default).
    pub peak_share: (f64, String),
    pub tolerance: f64,
}

/// `value` equals the record's parameter of the same name (numbers as numbers).
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

impl Yardsticks<'_> {
    /// The list the verdict document names, in the order they are tried.
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(e) = self.expect {
            out.push(format!("expect {}", e.file));
        }
        if let Some(b) = self.baseline {
            out.push(format!(
                "baseline {} (a figure may fall {:.0} % below it)",
                b.label,
                self.tolerance * 100.0
            ));
        }
        out.push(format!(
            "{} x the documented peak ({})",
            self.peak_share.0, self.peak_share.1
        ));
        out
    }

    /// The first yardstick that applies to `rec`, or why none does.
    pub fn for_record(&self, rec: &Record) -> Result<Yardstick, String> {
        let at_least = rec.metric == Metric::Throughput;
        if let Some(e) = self.expect {
            let hit = e.figures.iter().find(|f| {
                f.value.benchmark == rec.benchmark
                    && f.value
                        .params
                        .iter()
                        .all(|(k, v)| rec.params.get(k).is_some_and(|r| same(r, v)))
            });
            if let Some(f) = hit {
                return match f.value.bound {
                    Bound::Min(x) => Ok(Yardstick {
                        bound: x,
                        at_least: true,
                        source: f.source.clone(),
                    }),
                    Bound::Max(x) => Ok(Yardstick {
                        bound: x,
                        at_least: false,
                        source: f.source.clone(),
                    }),
                    Bound::ShareOfPeak(s) => match &rec.peak {
                        Some(p) => Ok(Yardstick {
                            bound: s * p.value,
                            at_least,
                            source: format!("{} ({s} x peak)", f.source),
                        }),
                        None => Err(format!(
                            "{} asks for a share of a peak this figure does not have",
                            f.source
                        )),
                    },
                };
            }
        }
        if let Some(b) = self.baseline {
            let hit = b.figures.iter().find(|f| {
                f.benchmark == rec.benchmark
                    && f.params.len() == rec.params.len()
                    && f.params
                        .iter()
                        .all(|(k, v)| rec.params.get(k).is_some_and(|r| same(r, v)))
            });
            if let Some(f) = hit {
                let bound = if at_least {
                    f.value * (1.0 - self.tolerance)
                } else {
                    f.value * (1.0 + self.tolerance)
                };
                return Ok(Yardstick {
                    bound,
                    at_least,
                    source: format!(
                        "baseline {} {} {} {:.0} %",
                        b.label,
                        format_value(f.value, &rec.unit),
                        if at_least { "less" } else { "plus" },
                        self.tolerance * 100.0
                    ),
                });
            }
        }
        match (&rec.peak, at_least) {
            (Some(p), true) => Ok(Yardstick {
                bound: self.peak_share.0 * p.value,
                at_least: true,
                // The basis is the record's (run.json); the line stays one line.
                source: format!("{} x its peak", self.peak_share.0),
            }),
            _ => Err(if self.baseline.is_some() || self.expect.is_some() {
                "no figure of the expectation or the baseline matches it, and it has no peak".into()
            } else {
                "no peak, no expectation file and no baseline to hold it against".into()
            }),
        }
    }
}

/// A short, stable name for a figure: the benchmark and its parameters' values
/// (`cpu.flops f64 avx512 x2 strong`, `mem.bandwidth triad seq 1 GiB x2`).
pub fn figure_id(rec: &Record) -> String {
    let mut parts = vec![rec.benchmark.clone()];
    for (k, v) in &rec.params {
        let text = match (k.as_str(), v) {
            ("threads" | "streams", Value::Number(n)) => format!("x{n}"),
            (k, Value::Number(n)) if k.ends_with("_bytes") => {
                n.as_u64().map_or_else(|| n.to_string(), format_bytes_iec)
            }
            (_, Value::String(s)) => s.clone(),
            (_, other) => other.to_string(),
        };
        parts.push(text);
    }
    parts.join(" ")
}

/// Parameters a subsystem sizes at run time from what it measured first (linpack's `n`, from
/// the FMA rate): a retry of the same case may choose another.
const SIZED_AT_RUN_TIME: [&str; 1] = ["n"];

/// Whether `a` and `b` measure the same case: the same benchmark and parameters, but for those
/// sized at run time.
pub fn same_case(a: &Record, b: &Record) -> bool {
    let keys = |r: &Record| -> Vec<(String, Value)> {
        r.params
            .iter()
            .filter(|(k, _)| !SIZED_AT_RUN_TIME.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    a.benchmark == b.benchmark && keys(a) == keys(b)
}

/// How a cause bears on the node: outside its hardware (the verdict is `unknown`), of its
/// hardware (`fail`), or neither (nothing found, the benchmark's own overhead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bearing {
    Environment,
    Hardware,
    Neither,
}

/// The bearing of a diagnosis's cause. A CPU clock that fell with no thermal event, and a GPU's
/// software power cap, are the site's or the hypervisor's settings, not faults; heat is the
/// hardware's (a GPU's hardware slowdown and power brake are read from its clock reasons).
pub fn bearing(cause: &Cause) -> Bearing {
    match cause {
        Cause::CgroupQuota
        | Cause::CpuContention
        | Cause::Steal
        | Cause::SharedCores
        | Cause::Affinity
        | Cause::MemoryPressure
        | Cause::PowerCap
        | Cause::ClockDrop => Bearing::Environment,
        Cause::Thermal => Bearing::Hardware,
        // An id this build does not know is not judged either way.
        Cause::SolveOverhead
        | Cause::SenderBehind
        | Cause::KernelIo
        | Cause::NoneFound
        | Cause::Other(_) => Bearing::Neither,
    }
}

/// The GPU clock reasons that are the hardware's own (NVML's hardware slowdown, hardware thermal
/// slowdown and power brake): a figure short while one was set is a fault of the board or its
/// power delivery.
fn hardware_clock_reasons(rec: &Record) -> Vec<String> {
    rec.conditions
        .as_ref()
        .and_then(|c| c.gpu.as_ref())
        .map(|g| {
            g.clock_reasons
                .iter()
                .filter(|r| matches!(r.as_str(), "hw_slowdown" | "hw_thermal" | "hw_power_brake"))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// What a virtual machine shares with other guests that it cannot measure, for a figure that
/// depends on it: memory bandwidth and the last-level cache (no counter inside a guest shows
/// another guest's traffic; on the 2-vCPU Zen 4 VM triad read 43-45 GB/s and 75 GB/s from one
/// minute to the next, with no steal, no other process and no reclaim), the host's storage and
/// its network path. A shortfall there with no cause found is not evidence against the node.
/// CPU figures are not in it: stolen time and the clock are visible from inside.
fn unseen_sharing(rec: &Record, host: &Host) -> Option<&'static str> {
    if matches!(host.virtualization.as_str(), "none" | "unknown" | "") {
        return None;
    }
    match rec.work {
        Work::Memory => Some("memory bandwidth and the last-level cache"),
        Work::Storage => Some("the host's storage"),
        Work::Network => Some("the host's network path and memory"),
        Work::Other | Work::Compute | Work::Solve => None,
    }
}

fn meets(v: f64, y: &Yardstick) -> bool {
    if y.at_least {
        v >= y.bound
    } else {
        v <= y.bound
    }
}

/// Judge one figure: its first measurement, and its retry where the first missed.
pub fn figure(first: &Record, retry: Option<&Record>, y: &Yardstick, host: &Host) -> Check {
    let id = figure_id(first);
    let unit = &first.unit;
    let op = if y.at_least { ">=" } else { "<=" };
    let fmt = |v: f64| format_value(v, unit);
    let mut check = Check {
        id: id.clone(),
        kind: "figure".into(),
        measured: Value::from(first.value),
        unit: Some(unit.clone()),
        expected: Some(Expected {
            value: Value::from(y.bound),
            op: op.into(),
            source: y.source.clone(),
        }),
        verdict: Verdict::Pass,
        reason: format!(
            "{id}: {} {op} {} ({})",
            fmt(first.value),
            fmt(y.bound),
            y.source
        ),
        diagnosis: Vec::new(),
        retry: None,
    };
    if let Some(inc) = &first.incomplete {
        check.verdict = Verdict::Unknown;
        check.reason = format!("{id}: could not be measured in full ({})", inc.error);
        return check;
    }
    if meets(first.value, y) {
        return check;
    }
    let miss = if y.at_least { "<" } else { ">" };
    let Some(second) = retry else {
        check.verdict = Verdict::Unknown;
        check.reason = format!(
            "{id}: {} {miss} {} ({}) and its retry could not run",
            fmt(first.value),
            fmt(y.bound),
            y.source
        );
        return check;
    };
    check.retry = Some(Retry {
        first: first.value,
        second: second.value,
    });
    check.measured = Value::from(second.value);
    if second.incomplete.is_none() && meets(second.value, y) {
        check.verdict = Verdict::Warn;
        check.reason = format!(
            "{id}: {} {miss} {} ({}) on the first try, {} on the retry",
            fmt(first.value),
            fmt(y.bound),
            y.source,
            fmt(second.value)
        );
        return check;
    }
    // Missed twice: the causes measured on either try decide between the node and its
    // surroundings.
    let ctx = diagnose::Context::of(host);
    let mut causes: Vec<Diagnosis> = Vec::new();
    for r in [first, second] {
        let mut r = r.clone();
        diagnose::apply(
            &mut r,
            &ctx,
            Some(format!("below its yardstick ({})", y.source)),
        );
        for d in r.diagnosis {
            if !causes.iter().any(|c| c.cause == d.cause) {
                causes.push(d);
            }
        }
    }
    let hw_reasons: Vec<String> = [first, second]
        .iter()
        .flat_map(|r| hardware_clock_reasons(r))
        .collect();
    let head = format!(
        "{id}: {} and {} {miss} {} ({})",
        fmt(first.value),
        fmt(second.value),
        fmt(y.bound),
        y.source
    );
    let of = |b: Bearing| -> Vec<&Diagnosis> {
        causes.iter().filter(|d| bearing(&d.cause) == b).collect()
    };
    let hardware = of(Bearing::Hardware);
    let environment = of(Bearing::Environment);
    // A floor above the figure's own peak cannot be met by this hardware on any day: the node
    // is not what the yardstick describes, whatever else was running.
    let beyond_peak = first
        .peak
        .as_ref()
        .filter(|p| y.at_least && p.value < y.bound)
        .map(|p| fmt(p.value));
    (check.verdict, check.reason) = if let Some(peak) = beyond_peak {
        (
            Verdict::Fail,
            format!("{head}; the floor is above this node's peak of {peak}: not the hardware it expects"),
        )
    } else if !hw_reasons.is_empty() {
        (
            Verdict::Fail,
            format!("{head}; GPU clock held by {}", {
                let mut r = hw_reasons.clone();
                r.dedup();
                r.join(", ")
            }),
        )
    } else if let Some(h) = hardware.first() {
        (Verdict::Fail, format!("{head}; {}", h.text))
    } else if let Some(e) = environment.first() {
        (
            Verdict::Unknown,
            format!(
                "{head}, but {} ({}): not the node's hardware",
                e.text, e.cause
            ),
        )
    } else if let Some(what) = unseen_sharing(first, host) {
        (
            Verdict::Unknown,
            format!("{head} with no cause visible; on a virtual machine ({}) other guests' use of {what} cannot be seen from inside: not judged", host.virtualization),
        )
    } else {
        (
            Verdict::Fail,
            format!("{head}; no condition of the machine explains it"),
        )
    };
    check.diagnosis = causes;
    check
}

/// A figure with no yardstick: reported, not judged.
pub fn reported(rec: &Record, why: String) -> Reported {
    Reported {
        id: figure_id(rec),
        measured: Value::from(rec.value),
        unit: Some(rec.unit.clone()),
        note: why,
    }
}

/// The hardware counters: one check per source read (its worst finding, and the file's limits),
/// `unknown` for a source the file requires but this host could not read, and a source merely
/// unreadable reported, not judged. `nvidia_on_bus`: NVIDIA GPUs seen on the PCI bus, so NVML
/// missing where a GPU exists is `unknown`, never silence.
pub fn health(
    h: &Health,
    expect: Option<&Expectation>,
    nvidia_on_bus: usize,
) -> (Vec<Check>, Vec<Reported>) {
    let mut checks = Vec::new();
    let mut reported = Vec::new();
    let mut ids: Vec<&str> = h.readings.iter().map(|r| r.id.as_str()).collect();
    ids.dedup();
    for id in ids {
        let readings: Vec<_> = h.readings.iter().filter(|r| r.id == id).collect();
        let mut worst = Verdict::Pass;
        let mut reasons: Vec<(Verdict, String)> = Vec::new();
        for f in readings.iter().flat_map(|r| &r.findings) {
            let v = match f.severity {
                Severity::Fail => Verdict::Fail,
                Severity::Warn => Verdict::Warn,
                Severity::Info => continue,
            };
            worst = worst.max(v);
            reasons.push((v, f.text.clone()));
        }
        let mut expected = None;
        for (key, limit) in expect.map(|e| e.limits.as_slice()).unwrap_or_default() {
            let Some(counter) = key.strip_prefix(id).and_then(|k| k.strip_prefix('.')) else {
                continue;
            };
            for r in &readings {
                let Some(v) = r.values.get(counter).and_then(Value::as_f64) else {
                    continue;
                };
                let over = |l: Option<f64>| l.is_some_and(|l| v > l);
                let hit = if over(limit.value.fail) {
                    Some((Verdict::Fail, limit.value.fail))
                } else if over(limit.value.warn) {
                    Some((Verdict::Warn, limit.value.warn))
                } else {
                    None
                };
                if let Some((verdict, Some(l))) = hit {
                    worst = worst.max(verdict);
                    reasons.push((
                        verdict,
                        format!("{}: {counter} {v} > {l} ({})", r.device, limit.source),
                    ));
                }
                expected.get_or_insert_with(|| Expected {
                    value: serde_json::json!({"warn": limit.value.warn, "fail": limit.value.fail}),
                    op: "<=".into(),
                    source: limit.source.clone(),
                });
            }
        }
        // The fails first: the node's one line leads with them.
        reasons.sort_by_key(|r| std::cmp::Reverse(r.0));
        let devices: Vec<&str> = readings.iter().map(|r| r.device.as_str()).collect();
        let reason = match reasons.len() {
            0 => format!("{id}: {} read, no fault", devices.join(", ")),
            1 => reasons[0].1.clone(),
            n => format!("{} (and {} more)", reasons[0].1, n - 1),
        };
        checks.push(Check {
            id: id.to_string(),
            kind: "health".into(),
            measured: Value::from(devices.len()),
            unit: Some("devices read".into()),
            expected: expected.or_else(|| {
                Some(Expected {
                    value: Value::from("no fault"),
                    op: "==".into(),
                    source: "the reader's own findings".into(),
                })
            }),
            verdict: worst,
            reason,
            diagnosis: Vec::new(),
            retry: None,
        });
    }
    for (id, why) in &h.unavailable {
        let required = expect.and_then(|e| e.require.iter().find(|r| &r.value == id));
        let gpu_unread = id == "health.gpu" && nvidia_on_bus > 0;
        if required.is_some() || gpu_unread {
            let source = match required {
                Some(r) => r.source.clone(),
                None => format!("{nvidia_on_bus} NVIDIA GPU(s) on the PCI bus"),
            };
            checks.push(Check {
                id: id.clone(),
                kind: "health".into(),
                measured: Value::Null,
                unit: None,
                expected: Some(Expected {
                    value: Value::from("readable"),
                    op: "==".into(),
                    source: source.clone(),
                }),
                verdict: Verdict::Unknown,
                reason: format!("{id}: not readable ({why}), required by {source}"),
                diagnosis: Vec::new(),
                retry: None,
            });
        } else {
            reported.push(Reported {
                id: id.clone(),
                measured: Value::Null,
                unit: None,
                note: format!("not readable here: {why}"),
            });
        }
    }
    (checks, reported)
}

fn inventory_check(
    id: &str,
    measured: Value,
    expected: Value,
    op: &str,
    source: &str,
    verdict: Verdict,
    reason: String,
) -> Check {
    Check {
        id: id.into(),
        kind: "inventory".into(),
        measured,
        unit: None,
        expected: Some(Expected {
            value: expected,
            op: op.into(),
            source: source.into(),
        }),
        verdict,
        reason,
        diagnosis: Vec::new(),
        retry: None,
    }
}

/// The inventory against the expectation: CPUs, memory and GPUs missing are `fail` (the node
/// lost hardware); more than expected is a `warn` (another node type, or a file to update).
pub fn inventory(host: &Host, e: &Expectation) -> Vec<Check> {
    let mut out = Vec::new();
    let h = host.health.as_ref();
    if let Some(c) = &e.cpus {
        let n = host.cpu.threads;
        let (verdict, how) = match n.cmp(&c.value) {
            std::cmp::Ordering::Less => (Verdict::Fail, "missing CPUs"),
            std::cmp::Ordering::Greater => (Verdict::Warn, "more than expected"),
            std::cmp::Ordering::Equal => (Verdict::Pass, "as expected"),
        };
        out.push(inventory_check(
            "inventory.cpus",
            Value::from(n),
            Value::from(c.value),
            "==",
            &c.source,
            verdict,
            format!(
                "inventory.cpus: {n} logical CPUs online, expected {} ({}): {how}",
                c.value, c.source
            ),
        ));
    }
    if let Some(m) = &e.cpu_model {
        let ok = glob(&m.value, &host.cpu.model);
        out.push(inventory_check(
            "inventory.cpu_model",
            Value::from(host.cpu.model.clone()),
            Value::from(m.value.clone()),
            "matches",
            &m.source,
            if ok { Verdict::Pass } else { Verdict::Fail },
            format!(
                "inventory.cpu_model: '{}' {} '{}' ({})",
                host.cpu.model,
                if ok { "matches" } else { "does not match" },
                m.value,
                m.source
            ),
        ));
    }
    if let Some(m) = &e.memory_gib {
        let gib = host.memory.total_bytes as f64 / (1u64 << 30) as f64;
        let low = m.value * (1.0 - e.memory_tolerance);
        let (verdict, how) = if gib < low {
            (Verdict::Fail, format!("below {low:.1} GiB: missing memory"))
        } else if gib > m.value * (1.0 + e.memory_tolerance) {
            (Verdict::Warn, "more than expected".to_string())
        } else {
            (Verdict::Pass, "as expected".to_string())
        };
        out.push(inventory_check(
            "inventory.memory",
            Value::from((gib * 10.0).round() / 10.0),
            Value::from(m.value),
            ">=",
            &m.source,
            verdict,
            format!(
                "inventory.memory: {gib:.1} GiB, expected {} GiB ({}): {how}",
                m.value, m.source
            ),
        ));
    }
    let gpus: Vec<&crate::model::HealthReading> = h
        .map(|h| h.readings.iter().filter(|r| r.id == "health.gpu").collect())
        .unwrap_or_default();
    let nvml_why = h.and_then(|h| h.unavailable.get("health.gpu"));
    if let Some(g) = &e.gpus {
        let n = gpus.len() as u32;
        let (verdict, reason) = match (nvml_why, n.cmp(&g.value)) {
            (Some(why), _) if g.value > 0 => (
                Verdict::Unknown,
                format!(
                    "inventory.gpus: {} expected ({}), but the GPUs cannot be counted: {why}",
                    g.value, g.source
                ),
            ),
            (_, std::cmp::Ordering::Less) => (
                Verdict::Fail,
                format!(
                    "inventory.gpus: {n} GPU(s) found, expected {} ({}): missing GPUs",
                    g.value, g.source
                ),
            ),
            (_, std::cmp::Ordering::Greater) => (
                Verdict::Warn,
                format!(
                    "inventory.gpus: {n} GPU(s) found, expected {} ({})",
                    g.value, g.source
                ),
            ),
            _ => (
                Verdict::Pass,
                format!("inventory.gpus: {n} as expected ({})", g.source),
            ),
        };
        out.push(inventory_check(
            "inventory.gpus",
            Value::from(n),
            Value::from(g.value),
            "==",
            &g.source,
            verdict,
            reason,
        ));
    }
    if let Some(m) = &e.gpu_model {
        let names: Vec<&str> = gpus.iter().filter_map(|r| r.label.as_deref()).collect();
        let wrong: Vec<&&str> = names.iter().filter(|n| !glob(&m.value, n)).collect();
        let (verdict, reason) = if names.is_empty() {
            (
                Verdict::Unknown,
                format!(
                    "inventory.gpu_model: no GPU named by NVML to match '{}' ({})",
                    m.value, m.source
                ),
            )
        } else if let Some(w) = wrong.first() {
            (
                Verdict::Fail,
                format!(
                    "inventory.gpu_model: '{w}' does not match '{}' ({})",
                    m.value, m.source
                ),
            )
        } else {
            (
                Verdict::Pass,
                format!(
                    "inventory.gpu_model: every GPU matches '{}' ({})",
                    m.value, m.source
                ),
            )
        };
        out.push(inventory_check(
            "inventory.gpu_model",
            Value::from(names.join(", ")),
            Value::from(m.value.clone()),
            "matches",
            &m.source,
            verdict,
            reason,
        ));
    }
    if let Some(min) = &e.nic_min_gbps {
        let nics: Vec<_> = h
            .map(|h| h.readings.iter().filter(|r| r.id == "health.nic").collect())
            .unwrap_or_default();
        let mut verdict = if nics.is_empty() {
            Verdict::Unknown
        } else {
            Verdict::Pass
        };
        let mut notes = Vec::new();
        for r in &nics {
            match r
                .values
                .get("speed_bits_per_second")
                .and_then(Value::as_f64)
            {
                Some(bps) if bps < min.value * 1e9 => {
                    verdict = verdict.max(Verdict::Fail);
                    notes.push(format!("{} at {} Gbit/s", r.device, bps / 1e9));
                }
                Some(_) => {}
                None => {
                    verdict = verdict.max(Verdict::Unknown);
                    notes.push(format!("{}'s speed unknown", r.device));
                }
            }
        }
        let reason = if nics.is_empty() {
            format!(
                "inventory.nic: no physical NIC read to hold to {} Gbit/s ({})",
                min.value, min.source
            )
        } else if notes.is_empty() {
            format!(
                "inventory.nic: every NIC at {} Gbit/s or more ({})",
                min.value, min.source
            )
        } else {
            format!(
                "inventory.nic: {} (expected at least {} Gbit/s, {})",
                notes.join(", "),
                min.value,
                min.source
            )
        };
        out.push(inventory_check(
            "inventory.nic",
            Value::from(nics.len()),
            Value::from(min.value * 1e9),
            ">=",
            &min.source,
            verdict,
            reason,
        ));
    }
    for p in &e.pcie {
        out.push(pcie(h, p));
    }
    out
}

/// Every PCIe device of a class against its expected generation and width. GPUs are held to
/// what NVML says they can train to in their slot (their link idles at a lower speed); the
/// others to their link as it is now.
fn pcie(h: Option<&Health>, p: &super::expect::At<super::expect::PcieExpect>) -> Check {
    let want = &p.value;
    let mut seen = 0;
    let mut short = Vec::new();
    let class_of = |c: &str| -> &'static str {
        let n = u32::from_str_radix(c.trim_start_matches("0x"), 16).unwrap_or(0);
        match n >> 16 {
            0x03 | 0x12 => "gpu",
            0x02 => "nic",
            0x01 if n >> 8 == 0x0108 => "nvme",
            _ => "other",
        }
    };
    for r in h.map(|h| h.readings.as_slice()).unwrap_or_default() {
        let (gen, width) = match r.id.as_str() {
            "health.gpu" if want.class == "gpu" || want.class == "any" => (
                r.values.get("pcie_max_link_gen").and_then(Value::as_f64),
                r.values.get("pcie_max_link_width").and_then(Value::as_f64),
            ),
            "health.pcie" => {
                let class = r
                    .values
                    .get("class")
                    .and_then(Value::as_str)
                    .map_or("other", class_of);
                // GPUs are judged from NVML's readings above where it has them.
                if class == "gpu" || (want.class != "any" && class != want.class) {
                    continue;
                }
                (
                    r.values
                        .get("link_speed_transfers_per_second")
                        .and_then(Value::as_f64)
                        .and_then(|t| crate::health::lane_payload_bps(t / 1e9))
                        .map(|(g, _)| f64::from(g)),
                    r.values.get("link_width").and_then(Value::as_f64),
                )
            }
            _ => continue,
        };
        seen += 1;
        let low_gen = want.gen.zip(gen).filter(|(w, g)| g < &f64::from(*w));
        let low_width = want.width.zip(width).filter(|(w, g)| g < &f64::from(*w));
        if low_gen.is_some() || low_width.is_some() || gen.is_none() && want.gen.is_some() {
            short.push(format!(
                "{} at Gen{} x{}",
                r.device,
                gen.map_or("?".into(), |g| g.to_string()),
                width.map_or("?".into(), |w| w.to_string())
            ));
        }
    }
    let wanted = format!(
        "{}{}",
        want.gen.map_or(String::new(), |g| format!("Gen{g} ")),
        want.width.map_or(String::new(), |w| format!("x{w}"))
    );
    let id = format!("inventory.pcie.{}", want.class);
    let (verdict, reason) = if seen == 0 {
        (
            Verdict::Unknown,
            format!(
                "{id}: no {} device's link could be read to hold to {wanted} ({})",
                want.class, p.source
            ),
        )
    } else if short.is_empty() {
        (
            Verdict::Pass,
            format!(
                "{id}: {seen} device(s) at {wanted} or better ({})",
                p.source
            ),
        )
    } else {
        (
            Verdict::Fail,
            format!("{id}: {} below {wanted} ({})", short.join(", "), p.source),
        )
    };
    inventory_check(
        &id,
        Value::from(seen),
        Value::from(wanted.trim().to_string()),
        ">=",
        &p.source,
        verdict,
        reason,
    )
}

/// The node's verdict and its one-line reason: every `fail`'s reason (then every `unknown`'s),
/// or how many passed and which warned.
pub fn node(checks: &[Check]) -> (Verdict, String) {
    let worst = checks
        .iter()
        .map(|c| c.verdict)
        .max()
        .unwrap_or(Verdict::Unknown);
    let of = |v: Verdict| -> Vec<&str> {
        checks
            .iter()
            .filter(|c| c.verdict == v)
            .map(|c| c.reason.as_str())
            .collect()
    };
    match worst {
        _ if checks.is_empty() => (Verdict::Unknown, "nothing could be checked".into()),
        Verdict::Fail => (Verdict::Fail, of(Verdict::Fail).join("; ")),
        Verdict::Unknown => (Verdict::Unknown, of(Verdict::Unknown).join("; ")),
        Verdict::Warn | Verdict::Pass => {
            let warned = of(Verdict::Warn);
            let n = checks.len();
            if warned.is_empty() {
                (Verdict::Pass, format!("{n} checks passed"))
            } else {
                (
                    Verdict::Warn,
                    format!(
                        "{n} checks passed ({} warned: {})",
                        warned.len(),
                        warned.join("; ")
                    ),
                )
            }
        }
    }
}

/// NVIDIA GPUs on the PCI bus under `root` (vendor 0x10de, a display or 3D controller): where
/// there are some and NVML cannot be read, the GPUs cannot be judged.
pub fn nvidia_on_bus(root: &std::path::Path) -> usize {
    std::fs::read_dir(root.join("sys/bus/pci/devices"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let read = |f: &str| std::fs::read_to_string(e.path().join(f)).unwrap_or_default();
            read("vendor").trim() == "0x10de" && read("class").trim().starts_with("0x03")
        })
        .count()
}

#[cfg(test)]
mod tests;
