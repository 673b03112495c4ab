//! The one-screen summary `hostbench run` prints: per benchmark the headline figures with their
//! share of the theoretical peak and the ratio to the reference tool, then what was not measured
//! and why. The full tables stay in report.md / report.html, `hostbench report`, and `--verbose`.
//!
//! Why a rule, not a list per subsystem: the headline of a benchmark is the same question
//! everywhere — what is the best this machine did at full concurrency? So, per benchmark id and
//! per value of its first "what" parameter (dtype, kernel, op, proto, kind), the records at the
//! largest concurrency (threads or streams) are kept, and of those the best: the highest
//! throughput, or for latency the figure at the largest working set or block (the DRAM point of a
//! cache sweep is the memory's latency; the L1 point is not) and the lowest among those. A
//! throughput placed in the memory hierarchy (a `level`) is taken at the largest working set too:
//! a memory bandwidth is the DRAM one, not the L1 peak of the cache sweep.
//!
//! A latency under load is a "what" of its own beside the idle one (`udp under load`), and its
//! headline is the loaded end, said with the load and its multiple of the idle figure; a
//! request/response test is named as netperf names it (`TCP_RR`, `TCP_CRR`).

use std::fmt::Write as _;

use hostbench_core::model::{Cause, Metric, Record, RunResult, KEPT_SCHEDULE};

use super::{aligned, left_out_line, not_applicable_line, Exporter, LEFT_OUT, NOT_APPLICABLE};
use crate::error::ReportError;
use crate::table::{
    concurrency_key, idle_of, is_under_load, label_part, param_text, test_name, LOAD_KEY,
};
use crate::units::human;

mod notes;
#[cfg(test)]
use notes::unexplained;
pub use notes::{energy_note, first_cause, no_cause, no_cause_sentence, per_watt, spread_mark};
use notes::{leading, working_file};

/// The parameters that say *what* a record measures, in the order they are looked for. The last
/// three are the memory matrices' and the loaded-latency sweep's: a core-to-core matrix has a
/// headline per mode, a NUMA matrix one for bandwidth and one for latency (two units, which one
/// "best" cannot compare), a loaded-latency sweep one per traffic kind.
const WHAT_KEYS: [&str; 9] = [
    "dtype", "kernel", "op", "proto", "kind", "pattern", "mode", "metric", "traffic",
];
/// The parameters that size a latency measurement (the largest is the headline).
const SIZE_KEYS: [&str; 2] = ["working_set_bytes", "block_bytes"];
/// The parameter that places a record in the memory hierarchy (`L1` … `DRAM`).
const LEVEL_KEY: &str = "level";
/// The parameters a summary line names beside the figure: where it was reached, in few words.
/// The rest (engine, file size, target, …) is in the report.
const CONTEXT_KEYS: [&str; 15] = [
    "isa",
    "threads",
    "streams",
    "pairs",
    "iodepth",
    "outstanding",
    "block_bytes",
    "level",
    "store",
    "direction",
    "pages",
    "n",
    // `backend=cuda device=0`: a device number means nothing without its backend.
    "backend",
    "device",
    "host_memory",
];

/// The summary, laid out for a terminal `width` characters wide: no line is wider. The width
/// is a plain value (the binary reads the terminal's); the exporter never probes a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SummaryExporter {
    pub width: usize,
}

impl SummaryExporter {
    /// The width where there is no terminal to ask (output to a file or a pipe).
    pub const DEFAULT_WIDTH: usize = 100;

    pub fn new(width: usize) -> Self {
        Self { width }
    }
}

impl Default for SummaryExporter {
    fn default() -> Self {
        Self::new(Self::DEFAULT_WIDTH)
    }
}

impl Exporter for SummaryExporter {
    fn file_name(&self) -> &'static str {
        "summary.txt"
    }

    fn render(&self, run: &RunResult) -> Result<String, ReportError> {
        render(run, self.width)
            .map_err(|e| ReportError::bad(format!("formatting the summary: {e}")))
    }
}

fn num(r: &Record, key: &str) -> f64 {
    r.params.get(key).and_then(|v| v.as_f64()).unwrap_or(0.0)
}

/// The parameter that says what one benchmark's records measure: the first of `WHAT_KEYS` any
/// of them has.
fn what_key(records: &[&Record]) -> Option<&'static str> {
    WHAT_KEYS
        .into_iter()
        .find(|k| records.iter().any(|r| r.params.contains_key(*k)))
}

/// What a record measures, in a word or two: the value of its benchmark's "what" parameter
/// (`f64`, `triad`, `tcp`), or netperf's test name (`TCP_RR`), and `under load` for a latency
/// under load.
fn what_of(r: &Record, what_key: Option<&str>) -> String {
    let base = test_name(r)
        .or_else(|| {
            what_key
                .and_then(|k| r.params.get(k))
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
        })
        .unwrap_or_default();
    // The GPU's tensor cores and its FMA pipes measure the same dtype on different units.
    let base = if r.params.get("unit").and_then(|v| v.as_str()) == Some("tensor") {
        format!("{base} tensor")
    } else {
        base
    };
    if is_under_load(r) {
        format!("{base} under load").trim_start().to_string()
    } else {
        base
    }
}

/// The headline records of one benchmark id, in first-seen order of their "what".
pub fn headlines<'a>(records: &[&'a Record]) -> Vec<&'a Record> {
    let what_key = what_key(records);
    let what = |r: &Record| what_of(r, what_key);
    let mut order: Vec<String> = Vec::new();
    for r in records {
        let w = what(r);
        if !order.contains(&w) {
            order.push(w);
        }
    }
    order
        .into_iter()
        .filter_map(|w| {
            let same: Vec<&Record> = records.iter().copied().filter(|r| what(r) == w).collect();
            let conc = |r: &Record| concurrency_key(r).map_or(1.0, |k| num(r, k));
            let top = same.iter().map(|r| conc(r)).fold(f64::MIN, f64::max);
            let mut at_top: Vec<&Record> = same.into_iter().filter(|r| conc(r) == top).collect();
            // A huge-page request the kernel did not meet, even when asked again, ran on base
            // pages: it is no huge-page figure, and a headline labelled `pages=huge` must not
            // be made of it.
            if at_top.iter().any(|r| !r.pages_mixed()) {
                at_top.retain(|r| !r.pages_mixed());
            }
            if at_top.first()?.metric == Metric::Latency
                && at_top.iter().all(|r| load_level(r).is_some())
            {
                // A latency-under-load curve: its headline is the loaded end (the most bandwidth
                // delivered, the most load offered), not the idle end that "lowest latency"
                // would pick.
                at_top.into_iter().max_by(|a, b| {
                    load_level(a)
                        .unwrap_or(0.0)
                        .total_cmp(&load_level(b).unwrap_or(0.0))
                })
            } else if at_top.first()?.metric == Metric::Latency {
                keep_largest(&mut at_top);
                at_top
                    .into_iter()
                    .min_by(|a, b| a.value.total_cmp(&b.value))
            } else {
                if at_top.iter().any(|r| r.params.contains_key(LEVEL_KEY)) {
                    // A bandwidth across the memory hierarchy: the L1 point of a cache sweep is
                    // the core's bandwidth to its L1, not the memory's; the largest working set
                    // (DRAM, where the DIMMs' peak applies) is, as STREAM sizes it.
                    keep_largest(&mut at_top);
                }
                at_top
                    .into_iter()
                    .max_by(|a, b| a.value.total_cmp(&b.value))
            }
        })
        .collect()
}

/// The records of the largest working set (or block) among `recs`.
fn keep_largest(recs: &mut Vec<&Record>) {
    let size = |r: &Record| SIZE_KEYS.iter().map(|k| num(r, k)).fold(0.0, f64::max);
    let largest = recs.iter().map(|r| size(r)).fold(f64::MIN, f64::max);
    recs.retain(|r| size(r) == largest);
}

/// One headline figure: its benchmark id, what it measured (the value of the benchmark's "what"
/// parameter: f64, triad, randread, tcp…, `TCP_RR`, `udp under load`), the record, and where it
/// was reached (`context`, and for a latency under load its multiple of the idle figure).
pub struct Headline<'a> {
    pub benchmark: &'a str,
    pub what: String,
    pub record: &'a Record,
    pub at: String,
    /// `at` with its parameters abbreviated (`t=2 qd=32 bs=1 MiB`), for a narrow terminal: the
    /// summary uses one form or another for every row alike.
    pub at_short: String,
    /// `at_short` with only the parameters that size the work (`ESSENTIAL_KEYS`), for the
    /// narrowest.
    pub at_brief: String,
}

/// Every benchmark's headlines, benchmarks in the order they first appear in the run.
pub fn all_headlines(run: &RunResult) -> Vec<Headline<'_>> {
    let mut benches: Vec<&str> = Vec::new();
    for r in &run.records {
        if !benches.contains(&r.benchmark.as_str()) {
            benches.push(&r.benchmark);
        }
    }
    let mut out = Vec::new();
    for b in benches {
        let recs: Vec<&Record> = run.records.iter().filter(|r| r.benchmark == b).collect();
        let what_key = what_key(&recs);
        for r in headlines(&recs) {
            let mut at = context(r);
            let mut at_short = context_of(r, Form::Short);
            let mut at_brief = context_of(r, Form::Brief);
            if let Some(vs) = versus_unloaded(r, &recs) {
                for a in [&mut at, &mut at_short, &mut at_brief] {
                    *a = format!("{a} {vs}").trim_start().to_string();
                }
            }
            out.push(Headline {
                benchmark: b,
                what: what_of(r, what_key),
                record: r,
                at,
                at_short,
                at_brief,
            });
        }
    }
    out
}

/// The bandwidth a latency-under-load record was measured at (`extra.bandwidth`, B/s).
fn loaded_bw(r: &Record) -> Option<f64> {
    r.extra.get("bandwidth").and_then(|v| v.as_f64())
}

/// The load a network latency-under-load record came to (`extra.offered_bps`, bit/s), or the
/// asked `load_bps` where it is a number.
fn offered(r: &Record) -> Option<f64> {
    if !is_under_load(r) {
        return None;
    }
    r.extra
        .get("offered_bps")
        .and_then(|v| v.as_f64())
        .or_else(|| r.params.get(LOAD_KEY).and_then(|v| v.as_f64()))
}

/// How loaded a latency-under-load record was, to find a curve's loaded end: the bandwidth
/// beside it, or the load offered.
fn load_level(r: &Record) -> Option<f64> {
    loaded_bw(r).or_else(|| offered(r))
}

/// A latency under load against the same path unloaded: `(64.5 x idle 15.0 µs)`, from the idle
/// ping-pong among `records` (`at 1 B` where its messages were of another size), else from the
/// least loaded point of the same curve (`(63.6 x the 15.2 µs under 10% load)`).
fn versus_unloaded(r: &Record, records: &[&Record]) -> Option<String> {
    if !is_under_load(r) || r.metric != Metric::Latency {
        return None;
    }
    let ratio =
        |base: &Record| (base.value > 0.0 && base.value.is_finite()).then(|| r.value / base.value);
    if let Some(idle) = idle_of(r, records) {
        let block = crate::table::block(idle);
        let size = if block != crate::table::block(r) && !block.is_empty() {
            format!(" at {block}")
        } else {
            String::new()
        };
        return Some(format!(
            "({} idle {}{size})",
            times(ratio(idle)?),
            human(idle.value, &idle.unit)
        ));
    }
    // The same curve: every parameter but the load equal.
    let same = |x: &Record| {
        x.params.len() == r.params.len()
            && r.params
                .iter()
                .all(|(k, v)| k == LOAD_KEY || x.params.get(k) == Some(v))
    };
    let least = records
        .iter()
        .copied()
        .filter(|x| is_under_load(x) && same(x) && offered(x).is_some())
        .min_by(|a, b| {
            offered(a)
                .unwrap_or(0.0)
                .total_cmp(&offered(b).unwrap_or(0.0))
        })?;
    if std::ptr::eq(least, r) {
        return None;
    }
    let load = least
        .params
        .get(LOAD_KEY)
        .map_or(String::new(), |l| format!(" {}", label_part(LOAD_KEY, l)));
    Some(format!(
        "({} the {}{load})",
        times(ratio(least)?),
        human(least.value, &least.unit)
    ))
}

/// "64.5 x", and "13194 x" where a tenth would be noise.
fn times(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0} x")
    } else {
        format!("{x:.1} x")
    }
}

/// Where the record's figure was reached: its `CONTEXT_KEYS` parameters, in the record's order,
/// and for a latency under load the bandwidth it was under and its multiple of the idle latency.
pub fn context(r: &Record) -> String {
    context_of(r, Form::Full)
}

/// How `context` names a record's parameters.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `isa=avx512 threads=2`.
    Full,
    /// `avx512 t=2`.
    Short,
    /// `t=2`: only `ESSENTIAL_KEYS`.
    Brief,
}

/// The parameters that size the work, kept in the briefest `at`: the rest (the ISA, the level of
/// the memory hierarchy, the page size, the direction) is in the report and in `-v`.
/// In this order: the concurrency first, so that a cut column keeps it.
const ESSENTIAL_KEYS: [&str; 9] = [
    "backend",
    "device",
    "threads",
    "streams",
    "pairs",
    "iodepth",
    "outstanding",
    "n",
    "block_bytes",
];

/// The short names of the `at` parameters (`short`), with what they stand for in the legend
/// under an abbreviated table. `isa`, `level`, `store`, `direction` and `host_memory` say what
/// they are by their value alone; `backend` and `device` read `cuda:0`.
const SHORT_KEYS: [(&str, &str, &str); 7] = [
    ("threads", "t", "threads"),
    ("streams", "s", "streams"),
    ("pairs", "p", "pairs"),
    ("iodepth", "qd", "queue depth"),
    ("outstanding", "out", "in flight"),
    ("block_bytes", "bs", "block (K, M, G: KiB, MiB, GiB)"),
    ("pages", "pg", "pages"),
];
const BY_VALUE: [&str; 5] = ["isa", "level", "store", "direction", "host_memory"];

/// One `at` parameter, abbreviated: `t=2`, `bs=1 MiB`, `avx512`, `cuda:0`; None where it is said
/// with another (a device with its backend).
fn short_param(r: &Record, k: &str, v: &serde_json::Value) -> Option<String> {
    let value = match v.as_f64() {
        Some(b) if k.ends_with("_bytes") => short_bytes(b),
        _ => crate::table::value_text(k, v),
    };
    if let Some((_, short, _)) = SHORT_KEYS.iter().find(|(key, _, _)| *key == k) {
        return Some(format!("{short}={value}"));
    }
    // A word that needs its key to mean anything (`store=none`) keeps it.
    if BY_VALUE.contains(&k) && !["none", "auto", "default", ""].contains(&value.as_str()) {
        return Some(value);
    }
    match k {
        "backend" => Some(match r.params.get("device") {
            Some(d) => format!("{value}:{}", crate::table::value_text("device", d)),
            None => value,
        }),
        "device" if r.params.contains_key("backend") => None,
        _ => Some(param_text(k, v)),
    }
}

/// A size as fio writes it: `4K`, `1M`, `512M`, `1.5G` (binary multiples), `1B`.
fn short_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let (v, i) = crate::units::iec_scale(b, UNITS.len() - 1);
    if v.fract() == 0.0 {
        format!("{v:.0}{}", UNITS[i])
    } else {
        format!("{:.1}{}", v, UNITS[i])
    }
}

/// `context` in one of its forms.
fn context_of(r: &Record, form: Form) -> String {
    let mut params: Vec<(&String, &serde_json::Value)> = r.params.iter().collect();
    if form == Form::Brief {
        let rank = |k: &str| ESSENTIAL_KEYS.iter().position(|e| *e == k);
        params.sort_by_key(|(k, _)| rank(k));
    }
    let mut parts: Vec<String> = params
        .into_iter()
        .filter(|(k, _)| CONTEXT_KEYS.contains(&k.as_str()))
        .filter(|(k, _)| form != Form::Brief || ESSENTIAL_KEYS.contains(&k.as_str()))
        .filter_map(|(k, v)| match form {
            Form::Full => Some(param_text(k, v)),
            Form::Short | Form::Brief => short_param(r, k, v),
        })
        .collect();
    if r.metric == Metric::Latency {
        if let Some(bw) = loaded_bw(r) {
            parts.push(format!("under {}", human(bw, "B/s")));
            if let Some(x) = r.extra.get("vs_idle").and_then(|v| v.as_f64()) {
                parts.push(format!("({x:.2} x idle)"));
            }
        } else if let Some(load) = r.params.get(LOAD_KEY) {
            // `under 90% load (31.0 Gbit/s)`, or `under 1.00 Gbit/s load` where it was asked in
            // bit/s.
            parts.push(label_part(LOAD_KEY, load));
            // A sender that fell behind did not offer the load: what it sent beside it.
            let sent = r.extra.get("sent_bps").and_then(|v| v.as_f64());
            match (offered(r), sent) {
                (Some(o), Some(s)) if s < KEPT_SCHEDULE * o => parts.push(format!(
                    "({} offered, {} sent)",
                    human(o, "bit/s"),
                    human(s, "bit/s")
                )),
                (Some(o), _) if load.is_string() => parts.push(format!("({})", human(o, "bit/s"))),
                _ => {}
            }
        }
    }
    parts.join(" ")
}

/// " like for like (pages=4k; the headline 1.93 x with huge pages)" where the reference ratio
/// is from hostbench's twin case with the reference's own setting; empty otherwise.
pub fn like_for_like(r: &Record) -> String {
    let Some(l) = r.extra.get("like_for_like") else {
        return String::new();
    };
    format!(
        " like for like ({}; the headline {:.2} x with huge pages)",
        l["setting"].as_str().unwrap_or("the reference's setting"),
        l["headline_ratio"].as_f64().unwrap_or(f64::NAN)
    )
}

/// Where the probe saw shared units but an all-CPU compute record later ran near its peak, the
/// sharing moved (a hypervisor places vCPUs anew): "; it moves: cpu.flops f64 at 2 threads
/// reached 99.2 % of its peak in this run".
fn sharing_moved(run: &RunResult) -> String {
    let c = &run.host.cpu;
    let Some(e) = c.effective_cores else {
        return String::new();
    };
    if e >= c.threads as f64 * 0.9 {
        return String::new();
    }
    let best = run
        .records
        .iter()
        .filter(|r| r.benchmark == "cpu.flops")
        .filter(|r| r.params.get("threads").and_then(|t| t.as_u64()) >= Some(u64::from(c.threads)))
        .filter_map(|r| Some((r, r.efficiency?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    match best {
        Some((r, eff)) if eff >= 0.9 => format!(
            "; it moves: cpu.flops {} at {} threads reached {:.1} % of its peak in this run",
            r.param("dtype").unwrap_or_default(),
            c.threads,
            eff * 100.0
        ),
        _ => String::new(),
    }
}

/// The narrowest width the summary lays itself out for; a narrower terminal gets this.
const MIN_WIDTH: usize = 40;

/// `text` cut to `n` characters, an ellipsis where it was cut.
fn clip(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        return text.to_string();
    }
    let mut s: String = text.chars().take(n.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// Prose broken at spaces into lines of at most `width` characters, the first after `first`,
/// the rest after `rest` (a hanging indent); a word longer than a line is cut across lines.
fn wrap(text: &str, width: usize, first: &str, rest: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let len = |s: &str| s.chars().count();
        if !empty && len(&line) + 1 + len(word) > width {
            lines.push(std::mem::replace(&mut line, rest.to_string()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        let mut w = word;
        // A word wider than the line on its own: as much as fits, then the rest on the next.
        while len(&line) + len(w) > width && len(w) > 1 {
            let room = width.saturating_sub(len(&line)).max(1);
            let cut = w.char_indices().nth(room).map_or(w.len(), |(i, _)| i);
            line.push_str(&w[..cut]);
            lines.push(std::mem::replace(&mut line, rest.to_string()));
            w = &w[cut..];
        }
        line.push_str(w);
        empty = false;
    }
    lines.push(line);
    lines
}

/// One headline's cells, in each of their forms.
struct Row {
    benchmark: String,
    what: String,
    figure: String,
    peak: String,
    peak_short: String,
    reference: String,
    per_watt: Option<String>,
    at: String,
    at_short: String,
    at_brief: String,
    /// The `↳` line under it: a found cause, a small working file.
    note: Option<String>,
}

fn row_of(h: Headline<'_>) -> Row {
    let r = h.record;
    let (peak, peak_short) = match (r.efficiency, r.scaling_efficiency()) {
        (Some(e), _) if r.efficiency_effective.is_some() => {
            let eff = 100.0 * r.efficiency_effective.unwrap_or(0.0);
            (
                format!("{:.1} % ({eff:.1} % of effective)", 100.0 * e),
                format!("{:.1} % (eff. {eff:.1} %)", 100.0 * e),
            )
        }
        (Some(e), _) => (format!("{:.1} %", 100.0 * e), format!("{:.1} %", 100.0 * e)),
        // An inferred rate is not a limit: its percentage is scaling, named as such.
        (None, Some(s)) => (
            format!("no documented peak (scaling {:.1} %)", 100.0 * s),
            format!("scaling {:.1} %", 100.0 * s),
        ),
        (None, None) => (DASH.to_string(), DASH.to_string()),
    };
    let reference = r
        .reference
        .as_ref()
        .map_or(DASH.to_string(), |x| format!("{:.2} × {}", x.ratio, x.tool));
    let figure = match spread_mark(r) {
        Some(m) => format!("{} {m}", human(r.value, &r.unit)),
        None => human(r.value, &r.unit),
    };
    let note = match (working_file(r), first_cause(r)) {
        (Some(w), Some(c)) => Some(format!("{w}; {c}")),
        (w, c) => w.or(c),
    };
    Row {
        benchmark: h.benchmark.to_string(),
        what: h.what,
        figure,
        peak,
        peak_short,
        reference,
        per_watt: per_watt(r).map(|w| w.trim_end_matches(" per W").to_string()),
        at: h.at,
        at_short: h.at_short,
        at_brief: h.at_brief,
        note,
    }
}

const DASH: &str = "—";

/// One way of laying the table out; `fit` tries them from the fullest to the most compact and
/// uses the first that fits, the same for every row.
#[derive(Clone, Copy)]
struct Layout {
    /// Short names in the `of peak` cell and the `at` column (`t=2`, `scaling 96.4 %`).
    short: bool,
    /// Only the parameters that size the work in the `at` column.
    brief: bool,
    /// The share of the peak and the reference ratio in one column: a row rarely has both,
    /// so two mostly empty columns become one.
    merged: bool,
    /// A column with the rate per watt.
    watts: bool,
}

impl Layout {
    fn at<'a>(&self, r: &'a Row) -> &'a str {
        match (self.brief, self.short) {
            (true, _) => &r.at_brief,
            (false, true) => &r.at_short,
            (false, false) => &r.at,
        }
    }
}

/// The table's lines (header first) in `layout`, the `at` column cut to `at_max` characters.
fn table(rows: &[Row], layout: Layout, at_max: Option<usize>) -> Vec<String> {
    let mut header = vec!["benchmark", "what", "figure"];
    if layout.merged {
        header.push("of peak, vs ref");
    } else {
        header.push("of peak");
        header.push(if layout.short {
            "vs ref"
        } else {
            "vs reference"
        });
    }
    if layout.watts {
        header.push("per W");
    }
    header.push("at");
    let mut cells: Vec<Vec<String>> = vec![header.into_iter().map(str::to_string).collect()];
    for r in rows {
        let peak = if layout.short { &r.peak_short } else { &r.peak };
        let mut c = vec![r.benchmark.clone(), r.what.clone(), r.figure.clone()];
        if layout.merged {
            let both: Vec<&str> = [peak.as_str(), r.reference.as_str()]
                .into_iter()
                .filter(|x| *x != DASH)
                .collect();
            c.push(if both.is_empty() {
                DASH.to_string()
            } else {
                both.join(", ")
            });
        } else {
            c.push(peak.clone());
            c.push(r.reference.clone());
        }
        if layout.watts {
            c.push(r.per_watt.clone().unwrap_or_else(|| DASH.into()));
        }
        let at = layout.at(r);
        c.push(at_max.map_or_else(|| at.to_string(), |n| clip(at, n)));
        cells.push(c);
    }
    aligned(&cells).lines().map(str::to_string).collect()
}

fn widest(lines: &[String]) -> usize {
    lines.iter().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// The table at `width`: the full layout where it fits, else the same shortenings for every
/// row — the per-watt column dropped, the parameters abbreviated, the share of the peak and the
/// reference ratio in one column or only the parameters that size the work, then both — then
/// the `at` column cut, and only as a last resort each line cut. Returns the lines and the
/// layout.
fn fit(rows: &[Row], width: usize) -> (Vec<String>, Layout) {
    let watts = rows.iter().any(|r| r.per_watt.is_some());
    let l = |short, brief, merged, watts| Layout {
        short,
        brief,
        merged,
        watts,
    };
    let mut tries = Vec::new();
    for (short, brief, merged) in [
        (false, false, false),
        (true, false, false),
        (true, false, true),
        (true, true, false),
        (true, true, true),
    ] {
        if watts {
            tries.push(l(short, brief, merged, true));
        }
        tries.push(l(short, brief, merged, false));
    }
    for &layout in &tries {
        let lines = table(rows, layout, None);
        if widest(&lines) <= width {
            return (lines, layout);
        }
    }
    // The `at` column (the last) gets what the others leave.
    let narrowest = l(true, true, true, false);
    let fixed = widest(&table(rows, narrowest, Some(0)));
    let lines = if width > fixed + 8 {
        table(rows, narrowest, Some(width - fixed))
    } else {
        table(rows, narrowest, None)
    };
    (lines.iter().map(|l| clip(l, width)).collect(), narrowest)
}

fn render(run: &RunResult, width: usize) -> Result<String, std::fmt::Error> {
    let width = width.max(MIN_WIDTH);
    let mut out = String::new();
    let say = |out: &mut String, text: &str, first: &str, rest: &str| -> std::fmt::Result {
        for l in wrap(text, width, first, rest) {
            writeln!(out, "{}", l.trim_end())?;
        }
        Ok(())
    };
    let c = &run.host.cpu;
    writeln!(out)?;
    say(
        &mut out,
        &format!(
            "Summary: {} — {} ({}), {} cores / {} threads",
            run.host.hostname,
            c.model,
            c.microarch
                .as_deref()
                .unwrap_or("microarchitecture unknown"),
            c.cores,
            c.threads
        ),
        "",
        "  ",
    )?;
    if let Some(note) = &c.effective_cores_note {
        say(
            &mut out,
            &format!("Effective cores: {note}{}.", sharing_moved(run)),
            "",
            "  ",
        )?;
    }
    let heads = all_headlines(run);
    let figures: Vec<&Record> = heads.iter().map(|h| h.record).collect();
    let rows: Vec<Row> = heads.into_iter().map(row_of).collect();
    if rows.is_empty() {
        writeln!(out, "\nNo figures measured.")?;
    } else {
        out.push('\n');
        let (lines, layout) = fit(&rows, width);
        let mut lines = lines.into_iter();
        if let Some(header) = lines.next() {
            writeln!(out, "{header}")?;
        }
        for (line, row) in lines.zip(&rows) {
            writeln!(out, "{line}")?;
            if let Some(n) = &row.note {
                say(&mut out, n, "    ↳ ", "      ")?;
            }
        }
        if layout.short {
            // What the short names stand for, those used only.
            let used: Vec<String> = SHORT_KEYS
                .iter()
                .filter(|(_, s, _)| {
                    let tag = format!("{s}=");
                    rows.iter()
                        .any(|r| layout.at(r).split(' ').any(|p| p.starts_with(&tag)))
                })
                .map(|(_, s, long)| format!("{s} {long}"))
                .collect();
            if !used.is_empty() {
                say(&mut out, &format!("at: {}.", used.join(", ")), "", "  ")?;
            }
        }
    }
    if let Some(s) = no_cause_sentence(&figures) {
        writeln!(out)?;
        say(&mut out, &format!("{s}."), "", "  ")?;
    }
    if !run.phases.is_empty() {
        let total: f64 = run.phases.iter().map(|p| p.seconds).sum();
        let each: Vec<String> = run
            .phases
            .iter()
            .map(|p| format!("{} {:.0} s", p.name, p.seconds))
            .collect();
        writeln!(out)?;
        say(
            &mut out,
            &format!("Measured in {total:.0} s: {}.", each.join(", ")),
            "",
            "  ",
        )?;
    }
    let warned = run
        .records
        .iter()
        .filter(|r| !r.warnings.is_empty())
        .count();
    if warned > 0 {
        writeln!(out)?;
        say(
            &mut out,
            &format!(
                "{warned} of {} records carry notes (noisy samples, missing peaks): see the \
                 report.",
                run.records.len()
            ),
            "",
            "  ",
        )?;
    }
    // A diagnosis that found nothing is no diagnosis: those figures are counted above.
    let mut by_cause: Vec<(&Cause, usize)> = Vec::new();
    for r in &run.records {
        let Some(c) = leading(r).map(|d| &d.cause) else {
            continue;
        };
        if *c == Cause::NoneFound {
            continue;
        }
        match by_cause.iter_mut().find(|(k, _)| *k == c) {
            Some((_, n)) => *n += 1,
            None => by_cause.push((c, 1)),
        }
    }
    if !by_cause.is_empty() {
        by_cause.sort_by_key(|c| std::cmp::Reverse(c.1));
        let n: usize = by_cause.iter().map(|c| c.1).sum();
        let list: Vec<String> = by_cause.iter().map(|(c, n)| format!("{c} {n}")).collect();
        say(
            &mut out,
            &format!(
                "{n} record{} a diagnosis (first cause: {}).",
                if n == 1 { " carries" } else { "s carry" },
                list.join(", ")
            ),
            "",
            "  ",
        )?;
    }
    for n in &run.not_applicable {
        say(
            &mut out,
            &format!("{NOT_APPLICABLE}: {}", not_applicable_line(n)),
            "",
            "  ",
        )?;
    }
    for l in &run.left_out {
        say(
            &mut out,
            &format!("{LEFT_OUT}: {}", left_out_line(l)),
            "",
            "  ",
        )?;
    }
    if !run.skipped.is_empty() {
        say(
            &mut out,
            &format!(
                "{} cases skipped (the report lists each with its reason).",
                run.skipped.len()
            ),
            "",
            "  ",
        )?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
