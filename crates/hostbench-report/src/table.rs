//! The classic report table, derived generically from the records.
//!
//! Nothing here knows a subsystem. Records are grouped by the prefix of their benchmark id
//! (`cpu.`, `mem.`, `disk.`, `net.`, `gpu.`, or any future one) and then by benchmark id; the
//! columns come from the parameters by role:
//!
//! - *Concurrency*: `threads`, `streams` or `pairs`, with `iodepth` (`4 × QD32`) or
//!   `outstanding` (`2 × 16 in flight`) appended when it is above 1;
//! - *Block size*: `block_bytes`;
//! - *Workload*: the benchmark's short name and every other parameter that varies within it;
//!   parameters equal in all of a benchmark's records are said once above its table instead.
//!   A few read as words rather than `key=value`: a protocol with a request/response mode is
//!   netperf's test name (`TCP_RR`, `TCP_CRR`, `UDP_RR`), and an offered load is `under 10% load`.
//!
//! So a new subsystem's records appear in every format without a change here. Every exporter
//! (terminal, Markdown, HTML) renders this one model, so they cannot disagree.

use std::collections::BTreeMap;

use hostbench_core::model::{Metric, Record, RunResult, Skipped};
use hostbench_core::reference::PARITY_BAND;
use serde_json::Value;

use crate::units;

/// The classic layout's columns.
pub const HEADER: [&str; 8] = [
    "Workload",
    "Concurrency",
    "Block size",
    "Measured (mean ± stddev)",
    "Reference tool measured",
    "Theoretical",
    "Efficiency %",
    "Reference efficiency %",
];

/// Parameters that say how many workers ran, in order of preference (`pairs`: client/server
/// pairs of request/response transactions).
pub const CONCURRENCY_KEYS: [&str; 3] = ["threads", "streams", "pairs"];
/// The parameter that is the block (transfer) size.
pub const BLOCK_KEY: &str = "block_bytes";
/// Queue depth: shown in the concurrency cell when above 1.
pub const DEPTH_KEY: &str = "iodepth";
/// Requests in flight per pair: shown in the concurrency cell when above 1, like the queue depth.
pub const IN_FLIGHT_KEY: &str = "outstanding";
/// The offered load beside a latency measurement (`"10%"` of the path's capacity, or bit/s): the
/// record is a latency under load, said `under 10% load`.
pub const LOAD_KEY: &str = "load_bps";
/// A protocol and a request/response mode: together netperf's test name (`TCP_RR`), which is
/// how people who measure transactions know them.
const TEST_NAME_KEYS: (&str, &str) = ("proto", "mode");

/// The whole report: sections per subsystem, peak bases as numbered footnotes, skipped cases.
#[derive(Debug)]
pub struct Report<'a> {
    pub sections: Vec<Section<'a>>,
    /// Footnotes `[1]`, `[2]`, … of the Theoretical column.
    pub bases: Vec<String>,
    pub skipped: &'a [Skipped],
    /// Subsystems the host does not have (no GPU), with the reason.
    pub not_applicable: &'a [hostbench_core::model::NotApplicable],
    /// What the run chose not to measure, with the reason.
    pub left_out: &'a [hostbench_core::model::LeftOut],
}

/// One subsystem (`cpu`, `mem`, …).
#[derive(Debug)]
pub struct Section<'a> {
    pub subsystem: String,
    pub title: String,
    pub groups: Vec<Group<'a>>,
    /// Record warnings (one shared by several records of a benchmark is said once) and
    /// benchmark-specific facts such as linpack's residual verdict.
    pub notes: Vec<String>,
}

/// One benchmark id's records.
#[derive(Debug)]
pub struct Group<'a> {
    pub benchmark: String,
    pub unit: String,
    pub metric: Metric,
    /// Parameters equal in every record, as `key=value`.
    pub common: Vec<String>,
    pub rows: Vec<Row<'a>>,
}

/// One record in the classic columns (cells already formatted for humans).
#[derive(Debug)]
pub struct Row<'a> {
    pub record: &'a Record,
    pub cells: [String; 8],
    /// Footnote number of the peak's basis (1-based), if there is a peak.
    pub basis: Option<usize>,
}

/// The subsystem of a benchmark id: everything before the first dot.
pub fn subsystem(benchmark: &str) -> &str {
    benchmark.split('.').next().unwrap_or(benchmark)
}

/// A subsystem's heading; unknown prefixes are shown as they are, so new ones need no change.
pub fn subsystem_title(prefix: &str) -> String {
    match prefix {
        "cpu" => "CPU".to_string(),
        "mem" => "Memory".to_string(),
        "disk" => "Disk".to_string(),
        "net" => "Network".to_string(),
        "gpu" => "GPU".to_string(),
        other => other.to_uppercase(),
    }
}

/// The benchmark id without its subsystem prefix (`cpu.flops` → `flops`).
pub fn short_name(benchmark: &str) -> &str {
    benchmark
        .split_once('.')
        .map_or(benchmark, |(_, rest)| rest)
}

/// A parameter's value as text: sizes (`*_bytes`) in binary units, bit rates (`*_bps`) with SI
/// prefixes, strings unquoted.
pub fn value_text(key: &str, v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) if key.ends_with("_bytes") => {
            n.as_f64().map_or_else(|| n.to_string(), units::bytes)
        }
        Value::Number(n) if key.ends_with("_bps") => n
            .as_f64()
            .map_or_else(|| n.to_string(), |b| units::human(b, "bit/s")),
        other => other.to_string(),
    }
}

/// `key=value` with the unit suffix (`_bytes`, `_bps`) dropped: the value says the unit.
pub fn param_text(key: &str, v: &Value) -> String {
    let name = key.trim_end_matches("_bytes").trim_end_matches("_bps");
    format!("{name}={}", value_text(key, v))
}

/// The concurrency parameter of a record, if it has one.
pub fn concurrency_key(r: &Record) -> Option<&'static str> {
    CONCURRENCY_KEYS
        .into_iter()
        .find(|k| r.params.contains_key(*k))
}

/// Keys whose value differs between the records (in first-seen order).
pub fn varying_keys(records: &[&Record]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for r in records {
        for k in r.params.keys() {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    keys.retain(|k| {
        let first = records[0].params.get(k);
        records.iter().any(|r| r.params.get(k) != first)
    });
    keys
}

/// Group records by key in first-seen order.
pub fn group_by<'a, K: PartialEq>(
    records: impl IntoIterator<Item = &'a Record>,
    key: impl Fn(&Record) -> K,
) -> Vec<(K, Vec<&'a Record>)> {
    let mut out: Vec<(K, Vec<&'a Record>)> = Vec::new();
    for r in records {
        let k = key(r);
        match out.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(r),
            None => out.push((k, vec![r])),
        }
    }
    out
}

/// String values that need their key beside them to mean anything.
const VAGUE: [&str; 8] = ["none", "auto", "on", "off", "yes", "no", "default", ""];

/// Values that are phrases written with underscores, said as words in labels. Listed, because
/// not every underscore is a space (`io_uring` is a name).
const PHRASES: [(&str, &str); 2] = [("round_trip", "round trip"), ("one_way", "one way")];

/// A parameter in a label: a name says what it is (`seq`, `avx2`, `tcp`) and stands alone;
/// numbers and vague words (`none`, `auto`) keep their key; an offered load is `under 10% load`
/// (or `under 1.00 Gbit/s load`), requests outstanding `16 in flight`.
pub fn label_part(k: &str, v: &Value) -> String {
    if k == LOAD_KEY {
        return format!("under {} load", value_text(k, v));
    }
    if k == IN_FLIGHT_KEY && v.is_number() {
        return format!("{v} in flight");
    }
    match v {
        Value::String(s) if !VAGUE.contains(&s.as_str()) => PHRASES
            .iter()
            .find(|(raw, _)| raw == s)
            .map_or_else(|| s.clone(), |(_, words)| words.to_string()),
        _ => param_text(k, v),
    }
}

/// Parameters naming the two ends of one measurement, said together in labels: an unordered
/// pair of CPUs (`cpu 0 ↔ cpu 1`), or from a CPU node to a memory node (`cpu node 0 → mem node
/// 1`). `key=value` twice would read as two unrelated settings.
const PAIRS: [(&str, &str, &str, &str, &str); 2] = [
    ("cpu_a", "cpu_b", "cpu", "cpu", "↔"),
    ("cpu_node", "mem_node", "cpu node", "mem node", "→"),
];

/// netperf's name of a request/response test (`TCP_RR`, `TCP_CRR`, `UDP_RR`): the record's
/// protocol and mode, when it has both.
pub fn test_name(r: &Record) -> Option<String> {
    let (kp, km) = TEST_NAME_KEYS;
    let proto = r.params.get(kp)?.as_str()?;
    let mode = r.params.get(km)?.as_str()?;
    Some(format!("{}_{}", proto.to_uppercase(), mode.to_uppercase()))
}

/// The workload label: the short benchmark name and the varying parameters that have no column.
pub fn workload(r: &Record, varying: &[String]) -> String {
    let mut parts = vec![short_name(&r.benchmark).to_string()];
    let mut pair_part: Option<usize> = None;
    let test = test_name(r);
    let mut test_said = false;
    for (k, v) in &r.params {
        let is_column = CONCURRENCY_KEYS.contains(&k.as_str())
            || k == BLOCK_KEY
            || k == DEPTH_KEY
            || k == IN_FLIGHT_KEY;
        // `rate_bps` is the older name of UDP's `rate`: one is enough in a label.
        let alias = k == "rate_bps" && r.params.contains_key("rate");
        if is_column || alias {
            continue;
        }
        if let Some(name) = test
            .as_ref()
            .filter(|_| [TEST_NAME_KEYS.0, TEST_NAME_KEYS.1].contains(&k.as_str()))
        {
            // Both words as one name, once, as soon as either varies.
            let either = varying
                .iter()
                .any(|x| x == TEST_NAME_KEYS.0 || x == TEST_NAME_KEYS.1);
            if either && !test_said {
                parts.push(name.clone());
                test_said = true;
            }
            continue;
        }
        let pair = PAIRS.iter().find(|p| p.0 == k || p.1 == k);
        if let Some(&(ka, kb, na, nb, sep)) = pair {
            // Both ends, once, as soon as either end varies.
            let ends = (r.params.get(ka), r.params.get(kb));
            if let (Some(a), Some(b)) = ends {
                if pair_part.is_none() && (varying.iter().any(|x| x == ka || x == kb)) {
                    pair_part = Some(parts.len());
                    parts.push(format!(
                        "{na} {} {sep} {nb} {}",
                        value_text(ka, a),
                        value_text(kb, b)
                    ));
                }
                continue;
            }
        }
        if !varying.contains(k) {
            continue;
        }
        parts.push(label_part(k, v));
    }
    // `c2c cpu 0 ↔ cpu 1, round trip`: the pair's numbers must not run into what follows.
    if let Some(i) = pair_part.filter(|i| i + 1 < parts.len()) {
        parts[i].push(',');
    }
    parts.join(" ")
}

/// The concurrency cell: `4`, or `4 × QD32` when the queue depth is above 1, or `2 × 16 in
/// flight` when a pair has more than one request outstanding.
pub fn concurrency(r: &Record) -> String {
    let count = concurrency_key(r)
        .and_then(|k| r.params.get(k))
        .map_or(String::new(), |v| value_text("", v));
    match (count.is_empty(), depth(r)) {
        (_, None) => count,
        (true, Some(d)) => d,
        (false, Some(d)) => format!("{count} × {d}"),
    }
}

/// How deep each worker's queue is, where above 1: `QD32`, `16 in flight`.
fn depth(r: &Record) -> Option<String> {
    let above_one = |k: &str| r.params.get(k).and_then(Value::as_u64).filter(|d| *d > 1);
    above_one(DEPTH_KEY)
        .map(|d| format!("QD{d}"))
        .or_else(|| above_one(IN_FLIGHT_KEY).map(|d| format!("{d} in flight")))
}

/// Whether the record is a latency under load: it carries the load offered beside it.
pub fn is_under_load(r: &Record) -> bool {
    r.params.contains_key(LOAD_KEY)
}

/// Parameters a latency under load and its idle counterpart may differ in: the load itself, and
/// the message size and pair count (the idle ping-pong runs small messages, the load large ones).
const IDLE_MAY_DIFFER: [&str; 3] = [LOAD_KEY, BLOCK_KEY, "streams"];

/// The idle measurement of a latency under load among `among`: a record of the same benchmark
/// without a load that matches it in every other parameter it has (protocol, target, …), the
/// one of the same block size if there is one, else of the nearest, then of the fewest streams.
pub fn idle_of<'a>(r: &Record, among: &[&'a Record]) -> Option<&'a Record> {
    if !is_under_load(r) {
        return None;
    }
    let size = |x: &Record| x.params.get(BLOCK_KEY).and_then(Value::as_f64);
    let distance = |x: &Record| match (size(r), size(x)) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => (a / b).ln().abs(),
        (None, None) => 0.0,
        _ => f64::INFINITY,
    };
    let streams = |x: &Record| {
        x.params
            .get("streams")
            .and_then(Value::as_f64)
            .unwrap_or(1.0)
    };
    among
        .iter()
        .copied()
        .filter(|x| {
            x.benchmark == r.benchmark
                && x.metric == r.metric
                && !is_under_load(x)
                && x.value.is_finite()
                && x.value > 0.0
                && r.params
                    .iter()
                    .filter(|(k, _)| !IDLE_MAY_DIFFER.contains(&k.as_str()))
                    .all(|(k, v)| x.params.get(k) == Some(v))
        })
        .min_by(|a, b| {
            distance(a)
                .total_cmp(&distance(b))
                .then(streams(a).total_cmp(&streams(b)))
        })
}

/// The block-size cell.
pub fn block(r: &Record) -> String {
    r.params
        .get(BLOCK_KEY)
        .map_or(String::new(), |v| value_text(BLOCK_KEY, v))
}

/// The reference tool's figure as a fraction of the peak, like `efficiency` for hostbench's.
pub fn reference_efficiency(r: &Record) -> Option<f64> {
    let peak = r.peak.as_ref()?;
    let rf = r.reference.as_ref()?;
    if peak.value <= 0.0 || rf.value <= 0.0 {
        return None;
    }
    Some(match r.metric {
        Metric::Throughput => rf.value / peak.value,
        Metric::Latency => peak.value / rf.value,
    })
}

/// The concurrency in words: `4 threads`, `1 stream × QD32`, `2 pairs × 16 in flight`.
pub fn concurrency_words(r: &Record) -> String {
    let count = concurrency_key(r).and_then(|k| {
        let v = r.params.get(k)?;
        // `threads` → `1 thread`: the keys are plural nouns.
        let noun = match v.as_u64() {
            Some(1) => k.strip_suffix('s').unwrap_or(k),
            _ => k,
        };
        Some(format!("{} {noun}", value_text("", v)))
    });
    match (count, depth(r)) {
        (Some(c), Some(d)) => format!("{c} × {d}"),
        (Some(c), None) => c,
        (None, Some(d)) => d,
        (None, None) => String::new(),
    }
}

/// A short label of a record for notes and chart categories: `bandwidth rw, 4 threads, 1 KiB`.
pub fn row_label(r: &Record, varying: &[String]) -> String {
    let mut s = workload(r, varying);
    let c = concurrency_words(r);
    if !c.is_empty() {
        s.push_str(&format!(", {c}"));
    }
    let b = block(r);
    if !b.is_empty() {
        s.push_str(&format!(", {b}"));
    }
    s
}

const DASH: &str = "—";

impl<'a> Report<'a> {
    pub fn build(run: &'a RunResult) -> Self {
        let mut bases: Vec<String> = Vec::new();
        let mut sections: Vec<Section<'a>> = Vec::new();
        for (prefix, records) in group_by(&run.records, |r| subsystem(&r.benchmark).to_string()) {
            let mut groups = Vec::new();
            let mut notes = Vec::new();
            // A benchmark with two units (a NUMA matrix's bandwidth and latency) gets a table
            // per unit: one heading cannot say both, nor which way is better.
            let tables = group_by(records.iter().copied(), |r| {
                (r.benchmark.clone(), r.unit.clone())
            });
            for ((bench, _), recs) in tables {
                let varying = varying_keys(&recs);
                let common: Vec<String> = if recs.len() > 1 {
                    recs[0]
                        .params
                        .iter()
                        .filter(|(k, _)| !varying.contains(k))
                        .map(|(k, v)| param_text(k, v))
                        .collect()
                } else {
                    Vec::new()
                };
                // A lone record has nothing varying: show all its parameters in the workload.
                let shown: Vec<String> = if recs.len() > 1 {
                    varying.clone()
                } else {
                    recs[0].params.keys().cloned().collect()
                };
                let rows = recs
                    .iter()
                    .map(|r| build_row(r, &shown, &mut bases))
                    .collect();
                notes.extend(group_notes(&recs, &shown));
                groups.push(Group {
                    benchmark: bench,
                    unit: recs[0].unit.clone(),
                    metric: recs[0].metric,
                    common,
                    rows,
                });
            }
            notes.extend(records.iter().filter_map(|r| extra_line(r)));
            sections.push(Section {
                title: subsystem_title(&prefix),
                subsystem: prefix,
                groups,
                notes,
            });
        }
        Report {
            sections,
            bases,
            skipped: &run.skipped,
            not_applicable: &run.not_applicable,
            left_out: &run.left_out,
        }
    }
}

fn build_row<'a>(r: &'a Record, shown: &[String], bases: &mut Vec<String>) -> Row<'a> {
    let unit = r.unit.as_str();
    let basis = r
        .peak
        .as_ref()
        .map(|p| match bases.iter().position(|b| *b == p.basis) {
            Some(i) => i + 1,
            None => {
                bases.push(p.basis.clone());
                bases.len()
            }
        });
    let measured = if r.stats.n > 0 {
        units::mean_sd(r.stats.mean, r.stats.stddev, unit)
    } else {
        units::human(r.value, unit)
    };
    let reference = r.reference.as_ref().map_or(DASH.to_string(), |rf| {
        format!(
            "{} ({}, ×{:.2})",
            units::human(rf.value, unit),
            rf.tool,
            rf.ratio
        )
    });
    let theoretical = match (&r.peak, r.scaling_efficiency()) {
        (Some(p), _) => format!("{} [{}]", units::human(p.value, unit), basis.unwrap_or(0)),
        // A rate inferred from the 1-thread run is no limit: its share is scaling, said so.
        (None, Some(s)) => format!("no documented peak (scaling {})", units::percent(s)),
        (None, None) => DASH.to_string(),
    };
    let pct = |v: Option<f64>| v.map_or(DASH.to_string(), units::percent);
    let or_dash = |s: String| if s.is_empty() { DASH.to_string() } else { s };
    Row {
        record: r,
        cells: [
            workload(r, shown),
            or_dash(concurrency(r)),
            or_dash(block(r)),
            measured,
            reference,
            theoretical,
            pct(r.efficiency),
            pct(reference_efficiency(r)),
        ],
        basis,
    }
}

/// Benchmark-specific facts worth a line (linpack's residual verdict).
pub fn extra_line(r: &Record) -> Option<String> {
    let residual = r.extra.get("residual")?.as_f64()?;
    let passed = r
        .extra
        .get("passed")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let params: Vec<String> = r.params.iter().map(|(k, v)| param_text(k, v)).collect();
    // HPL-MxP's figure rests on its refinement: the iterations it took and the speed-up over
    // the f64 solve beside it are what its readers look for.
    let style = if r.benchmark == "cpu.linpack_mxp" {
        let iterations = r.extra.get("iterations").and_then(|v| v.as_f64());
        let speedup = r.extra.get("speedup_over_linpack").and_then(|v| v.as_f64());
        let mut s = String::new();
        if let Some(i) = iterations {
            s.push_str(&format!(" after {i:.0} GMRES iterations"));
        }
        if let Some(x) = speedup {
            s.push_str(&format!("; {x:.2} x cpu.linpack at the same n"));
        }
        s + "; HPL-MxP-style, not HPL-MxP"
    } else {
        // On a host whose vCPUs share cores the share of the FMA rate measured beside the
        // solve is the honest efficiency; the panel share says where the rest went.
        let x = |k: &str| r.extra.get(k).and_then(|v| v.as_f64());
        let mut s = String::new();
        if let Some(of) = x("of_fma_rate") {
            s.push_str(&format!(
                "; {:.1} % of the f64 FMA rate measured beside it",
                of * 100.0
            ));
            if let Some(p) = x("panel_share") {
                s.push_str(&format!(" (panels {:.0} % of thread 0's time)", p * 100.0));
            }
        }
        if let Some(of) = x("of_cpu_flops") {
            s.push_str(&format!(
                "; {:.1} % of this run's cpu.flops f64 at the same threads",
                of * 100.0
            ));
        }
        s + "; HPL-style, not HPL"
    };
    Some(format!(
        "{} {}: scaled residual {residual:.3e} ({}, threshold 16){style}",
        r.benchmark,
        params.join(" "),
        if passed { "PASSED" } else { "FAILED" }
    ))
}

/// The note of a record whose ratio (hostbench / reference, the right way round for latency) is
/// outside `PARITY_BAND`: from the record (`extra.reference_note`, set by the subsystem that knows
/// the tools' methodological differences), or that no known difference explains it.
pub fn ratio_note(r: &Record) -> Option<String> {
    let rf = r.reference.as_ref()?;
    if PARITY_BAND.contains(&rf.ratio) {
        return None;
    }
    let why = r
        .extra
        .get("reference_note")
        .and_then(Value::as_str)
        .map_or_else(
            || {
                "no known methodological difference explains it: a real gap, or noise (rerun \
                 with a larger --repeat)"
                    .to_string()
            },
            str::to_string,
        );
    Some(format!(
        "×{:.2} {} is outside {:.1}–{:.1}: {why}",
        rf.ratio,
        rf.tool,
        PARITY_BAND.start(),
        PARITY_BAND.end()
    ))
}

/// Where the reference ratio is from hostbench's twin case with the reference's own setting
/// (`extra.like_for_like`): which setting, and the headline's own ratio with why it is higher.
/// The one-screen summary shows the ratio alone; this is where the rest is said.
pub fn like_for_like_note(r: &Record) -> Option<String> {
    let l = r.extra.get("like_for_like")?;
    let rf = r.reference.as_ref()?;
    let mut s = format!(
        "×{:.2} {} is like for like ({})",
        rf.ratio,
        rf.tool,
        l.get("setting")
            .and_then(Value::as_str)
            .unwrap_or("the reference's setting")
    );
    if let Some(h) = l.get("headline_ratio").and_then(Value::as_f64) {
        s.push_str(&format!("; the headline figure is ×{h:.2} {}", rf.tool));
    }
    if let Some(why) = l.get("why_higher").and_then(Value::as_str) {
        s.push_str(&format!(": {why}"));
    }
    Some(s)
}

/// Warnings of a benchmark's records; one carried by several records is said once, with a count.
fn group_notes(recs: &[&Record], shown: &[String]) -> Vec<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in recs {
        for w in &r.warnings {
            *counts.entry(w.as_str()).or_default() += 1;
        }
    }
    let mut notes = Vec::new();
    for r in recs {
        if let Some(n) = ratio_note(r) {
            notes.push(format!("{} {}: {n}", r.benchmark, row_label(r, shown)));
        }
        if let Some(n) = like_for_like_note(r) {
            notes.push(format!("{} {}: {n}", r.benchmark, row_label(r, shown)));
        }
    }
    let mut said: Vec<&str> = Vec::new();
    for r in recs {
        for w in &r.warnings {
            match counts.get(w.as_str()) {
                Some(&n) if n > 1 => {
                    if !said.contains(&w.as_str()) {
                        said.push(w);
                        notes.push(format!("{} ({n} records): {w}", r.benchmark));
                    }
                }
                _ => notes.push(format!("{} {}: {w}", r.benchmark, row_label(r, shown))),
            }
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::synthetic_run;
    use serde_json::json;

    #[test]
    fn linpack_lines_say_the_verdict_and_hpl_mxp_its_iterations_and_speed_up() {
        let run = synthetic_run();
        let mut r = run.records[0].clone();
        r.benchmark = "cpu.linpack".into();
        r.extra.insert("residual".into(), json!(0.0021));
        r.extra.insert("passed".into(), json!(true));
        let line = extra_line(&r).expect("a line");
        assert!(
            line.contains("PASSED") && line.ends_with("HPL-style, not HPL"),
            "{line}"
        );
        assert!(!line.contains("FMA rate"), "{line}");
        r.extra.insert("of_fma_rate".into(), json!(0.8734));
        r.extra.insert("panel_share".into(), json!(0.152));
        let line = extra_line(&r).expect("a line");
        assert!(
            line.contains(
                "; 87.3 % of the f64 FMA rate measured beside it (panels 15 % of thread 0's \
                 time); HPL-style"
            ),
            "{line}"
        );
        r.extra.insert("of_cpu_flops".into(), json!(0.8831));
        let line = extra_line(&r).expect("a line");
        assert!(
            line.contains("; 88.3 % of this run's cpu.flops f64 at the same threads; HPL-style"),
            "{line}"
        );
        r.benchmark = "cpu.linpack_mxp".into();
        r.extra.insert("iterations".into(), json!(3.0));
        r.extra.insert("speedup_over_linpack".into(), json!(2.456));
        let line = extra_line(&r).expect("a line");
        assert!(line.contains("after 3 GMRES iterations"), "{line}");
        assert!(line.contains("2.46 x cpu.linpack at the same n"), "{line}");
        assert!(line.ends_with("HPL-MxP-style, not HPL-MxP"), "{line}");
    }

    #[test]
    fn sizes_and_rates_are_said_in_their_units() {
        assert_eq!(
            param_text("block_bytes", &json!(32768)),
            format!("block={}", units::bytes(32768.0))
        );
        assert_eq!(
            param_text("rate_bps", &json!(1e9)),
            format!("rate={}", units::human(1e9, "bit/s"))
        );
        assert_eq!(param_text("rate_bps", &json!("unpaced")), "rate=unpaced");
        assert_eq!(param_text("threads", &json!(4)), "threads=4");
    }

    #[test]
    fn every_subsystem_prefix_gets_a_section_in_first_seen_order() {
        let run = synthetic_run();
        let rep = Report::build(&run);
        let subs: Vec<&str> = rep.sections.iter().map(|s| s.subsystem.as_str()).collect();
        assert_eq!(subs, ["cpu", "mem", "disk", "net", "gpu", "fpga"]);
        assert_eq!(rep.sections[5].title, "FPGA");
    }

    #[test]
    fn columns_come_from_params_by_role() {
        let run = synthetic_run();
        let rep = Report::build(&run);
        let net = &rep.sections[3];
        let tput = &net.groups[0];
        assert_eq!(tput.benchmark, "net.throughput");
        // direction and target are equal in all records: said once above the table.
        assert!(
            tput.common.contains(&"direction=send".to_string()),
            "{:?}",
            tput.common
        );
        let row = &tput.rows[0].cells;
        assert_eq!(row[0], "throughput tcp");
        assert_eq!(row[1], "1");
        assert_eq!(row[2], "1 KiB");
        assert!(row[3].contains("Gbit/s"), "{row:?}");
        let disk = &rep.sections[2].groups[0];
        assert_eq!(disk.rows[1].cells[1], "4 × QD32");
        let gpu = &rep.sections[4].groups[0];
        assert_eq!(gpu.rows[0].cells[1], "—");
        let cpu = &rep.sections[0].groups[0];
        assert!(
            cpu.rows[0].cells[4].starts_with("95.0 GFLOP/s (likwid-bench, ×"),
            "{}",
            cpu.rows[0].cells[4]
        );
        assert_eq!(cpu.rows[0].cells[6], "98.0 %");
        assert_eq!(cpu.rows[0].cells[7], "95.0 %");
        assert_eq!(cpu.rows[0].cells[5], "100 GFLOP/s [1]");
        assert_eq!(rep.bases[0], "2 cores x 3.0 GHz x 16 FLOP/cycle");
    }

    #[test]
    fn a_ratio_outside_the_band_gets_a_note() {
        let run = synthetic_run();
        let mut r = run
            .records
            .iter()
            .find(|r| r.reference.is_some())
            .expect("a record with a reference")
            .clone();
        assert!(ratio_note(&r).is_none(), "in band: no note");
        if let Some(rf) = r.reference.as_mut() {
            rf.ratio = 2.05;
        }
        let generic = ratio_note(&r).expect("a note");
        assert!(
            generic.starts_with("×2.05 ") && generic.contains("outside 0.9–1.1"),
            "{generic}"
        );
        assert!(
            generic.contains("no known methodological difference"),
            "{generic}"
        );
        r.extra.insert(
            "reference_note".into(),
            json!("fio's buffers were 4 KiB pages"),
        );
        let known = ratio_note(&r).expect("a note");
        assert!(
            known.ends_with(": fio's buffers were 4 KiB pages"),
            "{known}"
        );
    }

    #[test]
    fn memory_matrix_rows_name_their_pair_in_words() {
        use crate::testdata::{c2c, loaded_latency, numa, run_of};
        let mut recs = c2c(3, &["round_trip", "one_way"]);
        recs.extend(numa(2));
        recs.extend(loaded_latency(&["read"], &[0, 200], 2));
        let run = run_of(recs);
        let rep = Report::build(&run);
        let mem = &rep.sections[0];
        let heads: Vec<(&str, &str)> = mem
            .groups
            .iter()
            .map(|g| (g.benchmark.as_str(), g.unit.as_str()))
            .collect();
        // A NUMA matrix's bandwidth and latency are two tables: one unit, one "better" each.
        assert_eq!(
            heads,
            [
                ("mem.c2c", "s"),
                ("mem.numa", "B/s"),
                ("mem.numa", "s"),
                ("mem.loaded_latency", "s")
            ]
        );
        let labels =
            |g: &Group<'_>| -> Vec<String> { g.rows.iter().map(|r| r.cells[0].clone()).collect() };
        assert_eq!(
            labels(&mem.groups[0])[1..4],
            [
                "c2c cpu 0 ↔ cpu 2, round trip",
                "c2c cpu 1 ↔ cpu 2, round trip",
                "c2c cpu 0 ↔ cpu 1, one way"
            ]
        );
        assert_eq!(labels(&mem.groups[1])[1], "numa cpu node 0 → mem node 1");
        assert_eq!(mem.groups[1].common, ["metric=bandwidth"]);
        assert_eq!(
            labels(&mem.groups[3]),
            ["loaded_latency delay=0", "loaded_latency delay=200"]
        );
        // One pair in two modes: the pair is said once above the table.
        let two = run_of(c2c(2, &["round_trip", "one_way"]));
        let rep = Report::build(&two);
        let g = &rep.sections[0].groups[0];
        assert_eq!(labels(g), ["c2c round trip", "c2c one way"]);
        assert_eq!(g.common, ["cpu_a=0", "cpu_b=1"]);
        // A lone pair says all it is.
        let one = run_of(c2c(2, &["one_way"]));
        let rep = Report::build(&one);
        assert_eq!(
            rep.sections[0].groups[0].rows[0].cells[0],
            "c2c cpu 0 ↔ cpu 1, one way"
        );
    }

    #[test]
    fn transactions_say_the_test_and_the_requests_in_flight() {
        use crate::testdata::{net_transactions, run_of};
        let run = run_of(net_transactions(&[
            ("tcp", "rr", 1, 1, 90e3),
            ("tcp", "rr", 2, 16, 400e3),
            ("udp", "rr", 1, 1, 120e3),
            ("tcp", "crr", 2, 1, 25e3),
        ]));
        let rep = Report::build(&run);
        let g = &rep.sections[0].groups[0];
        let cells: Vec<(&str, &str)> = g
            .rows
            .iter()
            .map(|r| (r.cells[0].as_str(), r.cells[1].as_str()))
            .collect();
        assert_eq!(
            cells,
            [
                ("transactions TCP_RR", "1"),
                ("transactions TCP_RR", "2 × 16 in flight"),
                ("transactions UDP_RR", "1"),
                ("transactions TCP_CRR", "2"),
            ]
        );
        assert_eq!(g.common, ["block=1 B", "target=loopback"]);
        assert!(
            g.rows[0].cells[3].ends_with(" k transactions/s"),
            "{}",
            g.rows[0].cells[3]
        );
        let shown = varying_keys(&run.records.iter().collect::<Vec<_>>());
        assert_eq!(
            row_label(&run.records[1], &shown),
            "transactions TCP_RR, 2 pairs × 16 in flight, 1 B"
        );
        assert_eq!(
            row_label(&run.records[0], &shown),
            "transactions TCP_RR, 1 pair, 1 B"
        );
        // One protocol, two modes: still the test's name, the protocol said above the table.
        let tcp = run_of(net_transactions(&[
            ("tcp", "rr", 1, 1, 90e3),
            ("tcp", "crr", 1, 1, 14e3),
        ]));
        let rep = Report::build(&tcp);
        let g = &rep.sections[0].groups[0];
        assert_eq!(g.rows[1].cells[0], "transactions TCP_CRR");
        assert!(
            g.common.contains(&"proto=tcp".to_string()),
            "{:?}",
            g.common
        );
        // A lone record says all it is.
        let one = run_of(net_transactions(&[("udp", "rr", 1, 1, 120e3)]));
        let rep = Report::build(&one);
        assert_eq!(
            rep.sections[0].groups[0].rows[0].cells[0],
            "transactions UDP_RR loopback"
        );
    }

    #[test]
    fn latency_under_load_rows_say_the_load_as_share_or_rate() {
        use crate::testdata::{net_idle_latency, net_under_load, run_of};
        let mut recs = net_under_load("udp", 32768, &[json!("10%"), json!(5e9)]);
        recs.push(net_idle_latency("udp", 1, 14e-6));
        let run = run_of(recs);
        let rep = Report::build(&run);
        let g = &rep.sections[0].groups[0];
        let labels: Vec<&str> = g.rows.iter().map(|r| r.cells[0].as_str()).collect();
        assert_eq!(
            labels,
            [
                "latency under 10% load",
                "latency under 5.00 Gbit/s load",
                "latency"
            ]
        );
        assert_eq!(g.rows[0].cells[1], "1");
        // The idle ping-pong of a loaded record: same protocol and target, any size.
        let all: Vec<&Record> = run.records.iter().collect();
        let idle = idle_of(&run.records[0], &all).expect("the idle record");
        assert!(!is_under_load(idle));
        assert!(idle_of(idle, &all).is_none(), "idle has no idle of its own");
        let tcp = net_under_load("tcp", 32768, &[json!("10%")]);
        assert!(idle_of(&tcp[0], &all).is_none(), "not UDP's");
    }

    #[test]
    fn shared_warnings_are_said_once() {
        let run = synthetic_run();
        let rep = Report::build(&run);
        let mem = &rep.sections[1];
        let shared: Vec<&String> = mem
            .notes
            .iter()
            .filter(|n| n.contains("no DRAM peak"))
            .collect();
        assert_eq!(shared.len(), 1, "{:?}", mem.notes);
        assert!(shared[0].contains("records)"));
    }
}
