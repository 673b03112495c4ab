//! Charts, derived generically from the records and drawn with plotters as SVG (inlined in
//! report.html) or PNG (`--png DIR`), from the same drawing code.
//!
//! Which charts a run gets follows from its parameters, never from a subsystem's name:
//!
//! - *scaling*: a benchmark whose records vary in `threads` or `streams` gets value against
//!   concurrency, one line per remaining workload and block size (throughput vs threads per
//!   block size; latency vs threads);
//! - *working-set curve*: one whose records take three or more `working_set_bytes` gets value
//!   against working-set size on a log axis (the memory latency curve, the cache sweep);
//! - *measured vs theoretical*: one with peaks or reference figures gets horizontal bars of
//!   measured, theoretical and reference per record;
//! - *efficiency*: each subsystem gets bars of its records' efficiency (and the reference's);
//! - *latency vs bandwidth*: a latency benchmark whose records carry the traffic that ran beside
//!   them (`extra.bandwidth`, a loaded-latency sweep) gets latency against that bandwidth on a
//!   linear axis, one line per remaining workload and a point per `delay`: the curve whose knee
//!   is quoted;
//! - *matrix*: one whose records name a cell (`cpu_a`/`cpu_b`, `cpu_node`/`mem_node`) gets a
//!   heatmap per unit and mode (see `heatmap`);
//! - *latency vs offered load*: latency records that carry the load offered beside them
//!   (`load_bps`, sockperf's under-load mode) get, per protocol, block size and target, p50 and
//!   p99 against the load they came to (`extra.offered_bps`), the uncorrected figures dashed, the
//!   idle ping-pong as a level, and the points where the load itself was lost ringed;
//! - *transactions*: records counted in transactions/s (request/response tests) get a bar per
//!   case, grouped by mode, named as netperf names them (`TCP_RR, 2 pairs × 16 in flight`).
//!
//! The latency-vs-bandwidth curve and the matrix replace the scaling and working-set charts of
//! their benchmark: a line per delay against threads, or per CPU pair, would be noise. Records
//! under load are left out of their benchmark's other charts for the same reason.
//!
//! A line chart's legend is one list (`legend`) drawn two ways: as a pane on the right of a
//! standalone image, or, on an HTML page, left out of the image and written as HTML beside the
//! plot (`LegendAt::Page`), so that on a phone the plot has the whole width.
//!
//! Text is measured and, in PNGs, drawn with an embedded DejaVu Sans, so a machine without fonts
//! draws the same picture.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Once;

use hostbench_core::model::{Metric, Record, RunResult};
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;

use crate::error::ReportError;
use crate::table::{
    block, concurrency_key, concurrency_words, group_by, idle_of, is_under_load, label_part,
    reference_efficiency, row_label, short_name, subsystem, subsystem_title, test_name, value_text,
    varying_keys, BLOCK_KEY, IN_FLIGHT_KEY, LOAD_KEY,
};
use crate::units::{self, Scale};

mod heatmap;
pub use heatmap::Heatmap;

const WS_KEY: &str = "working_set_bytes";
/// Lines per chart before a chart is split by workload.
const MAX_SERIES: usize = 8;
/// Bars (categories) per chart before it is continued in another.
const MAX_CATEGORIES: usize = 24;
const WIDTH: u32 = 960;
const FONT: &str = "sans-serif";

/// One chart, ready to draw.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Unique within a run; used for file names and HTML anchors.
    pub id: String,
    pub title: String,
    pub subsystem: String,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Lines(Lines),
    Bars(Bars),
    Heatmap(Heatmap),
}

/// Value against a numeric parameter (or measured quantity), one line per series.
#[derive(Debug, Clone)]
pub struct Lines {
    pub x_label: String,
    pub x: XAxis,
    pub unit: String,
    pub metric: Metric,
    pub series: Vec<Series>,
    /// Lines of text under the legend: what a point is where the series names do not say.
    pub notes: Vec<String>,
    pub y: YAxis,
    /// Horizontal reference lines (name, value), drawn dotted grey across the plot and named in
    /// the legend (the idle latency under a latency-vs-load curve).
    pub levels: Vec<(String, f64)>,
    /// What a ringed point means (a legend entry), where a series rings some (`Series::rings`).
    pub ring_means: Option<String>,
}

/// When a line chart's y axis is logarithmic (only ever for positive values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YAxis {
    /// When the values span more than 100×.
    Auto,
    /// As soon as they span 10×: a curve whose overload points jump a hundredfold, where a
    /// linear axis would flatten everything before the jump onto zero.
    Log,
}

/// What a line chart's x values are, which decides the axis.
#[derive(Debug, Clone, PartialEq)]
pub enum XAxis {
    /// Counts (threads, streams, a stored run's place): log₂ when they span 8× or more.
    Count,
    /// Byte sizes: log₂, binary units.
    Bytes,
    /// A measured quantity in this SI unit (`B/s`): linear from zero, scaled like a value (GB/s),
    /// because a curve's knee is only where it is on a linear axis.
    Quantity(String),
}

#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    /// (x, mean, standard deviation).
    pub points: Vec<(f64, f64, f64)>,
    /// (x, theoretical peak) where the records have one: drawn dashed in the series' colour.
    pub peaks: Vec<(f64, f64)>,
    /// A tooltip per point (in the order of `points`), or none: what the point is beyond x and y
    /// (the delay of a loaded-latency point).
    pub tips: Vec<String>,
    /// Drawn dashed and thinner in the colour of series `i`: the same figure measured another way
    /// (a round trip not corrected for coordinated omission beside the corrected one).
    pub dashed_like: Option<usize>,
    /// Per point (in the order of `points`), whether it is ringed; empty: none is.
    pub rings: Vec<bool>,
}

/// A tooltip of one drawn mark. SVG gets it as a `<title>` child, which a browser shows on
/// hover (plotters' SVG backend has no element for it); a PNG has none.
pub(crate) struct Tip {
    /// A circle (a line chart's point) or else a rectangle (a heatmap's cell).
    circle: bool,
    /// Where the mark is drawn: a circle's centre, a rectangle's upper-left corner.
    at: (i32, i32),
    text: String,
}

/// Horizontal bars: one band per category, one bar per series.
#[derive(Debug, Clone)]
pub struct Bars {
    /// Unit of the values; `%` for efficiency.
    pub unit: String,
    pub quantity: String,
    pub categories: Vec<String>,
    pub series: Vec<BarSeries>,
}

#[derive(Debug, Clone)]
pub struct BarSeries {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

/// Every chart of a run, in table order (per subsystem).
pub fn charts(run: &RunResult) -> Vec<Chart> {
    let mut out: Vec<Chart> = Vec::new();
    for (prefix, recs) in group_by(&run.records, |r| subsystem(&r.benchmark).to_string()) {
        for (bench, brecs) in group_by(recs.iter().copied(), |r| r.benchmark.clone()) {
            // Records under load have their own chart; among the idle ones a point per load
            // would be noise.
            let idle: Vec<&Record> = brecs
                .iter()
                .copied()
                .filter(|r| !is_under_load(r))
                .collect();
            if !idle.is_empty() {
                let curve = loaded_latency_charts(&prefix, &bench, &idle, &mut out);
                let matrix = match heatmap::matrix_charts(&prefix, &bench, &idle) {
                    Some(cs) => {
                        out.extend(cs);
                        true
                    }
                    None => false,
                };
                search_curve_chart(&prefix, &bench, &idle, &mut out);
                if !curve && !matrix {
                    scaling_charts(&prefix, &bench, &idle, &mut out);
                    working_set_chart(&prefix, &bench, &idle, &mut out);
                }
            }
            under_load_charts(&prefix, &bench, &brecs, &mut out);
            transaction_charts(&prefix, &bench, &brecs, &mut out);
            versus_peak_charts(&prefix, &bench, &brecs, &mut out);
        }
        efficiency_charts(&prefix, &recs, &mut out);
        ratio_charts(&prefix, &recs, &mut out);
    }
    let mut seen: Vec<String> = Vec::new();
    for c in &mut out {
        let base = slug(&c.title);
        let mut id = base.clone();
        let mut n = 2;
        while seen.contains(&id) {
            id = format!("{base}-{n}");
            n += 1;
        }
        seen.push(id.clone());
        c.id = id;
    }
    out
}

/// One headline figure's stored history on this host, for a trend chart.
#[derive(Debug, Clone)]
pub struct Trend {
    pub benchmark: String,
    /// What the figure is (its "what" and where it was reached), the line's name.
    pub label: String,
    pub metric: Metric,
    pub unit: String,
    /// (run start time, value, standard deviation), oldest first.
    pub points: Vec<(String, f64, f64)>,
}

/// A trend chart per benchmark: one line per headline figure with two or more stored runs,
/// against the stored runs in time order (x = the run's place among every run shown).
pub fn trend_charts(trends: &[Trend]) -> Vec<Chart> {
    let mut benches: Vec<(&str, &str)> = Vec::new();
    for t in trends.iter().filter(|t| t.points.len() >= 2) {
        if !benches.contains(&(t.benchmark.as_str(), t.unit.as_str())) {
            benches.push((&t.benchmark, &t.unit));
        }
    }
    let mut out = Vec::new();
    for (bench, unit) in benches {
        let these: Vec<&Trend> = trends
            .iter()
            .filter(|t| t.benchmark == bench && t.unit == unit && t.points.len() >= 2)
            .collect();
        let mut times: Vec<&str> = these
            .iter()
            .flat_map(|t| t.points.iter().map(|p| p.0.as_str()))
            .collect();
        times.sort_unstable();
        times.dedup();
        let series = these
            .iter()
            .take(MAX_SERIES)
            .map(|t| Series {
                name: t.label.clone(),
                points: t
                    .points
                    .iter()
                    .filter_map(|(at, v, sd)| {
                        let x = times.iter().position(|x| x == at)? as f64 + 1.0;
                        Some((x, *v, *sd))
                    })
                    .collect(),
                peaks: Vec::new(),
                tips: Vec::new(),
                dashed_like: None,
                rings: Vec::new(),
            })
            .collect();
        let metric = these[0].metric;
        out.push(Chart {
            id: format!("trend-{}", slug(bench)),
            title: format!(
                "{bench}: {} over this host's last {} stored runs",
                what(metric, unit),
                times.len()
            ),
            subsystem: subsystem(bench).to_string(),
            kind: Kind::Lines(Lines {
                x_label: format!(
                    "Stored run (1 = {}, {} = {})",
                    times[0].get(..10).unwrap_or(times[0]),
                    times.len(),
                    times[times.len() - 1]
                        .get(..10)
                        .unwrap_or(times[times.len() - 1])
                ),
                x: XAxis::Count,
                unit: unit.to_string(),
                metric,
                series,
                notes: Vec::new(),
                y: YAxis::Auto,
                levels: Vec::new(),
                ring_means: None,
            }),
        });
    }
    out
}

fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

fn num(r: &Record, key: &str) -> Option<f64> {
    r.params.get(key).and_then(Value::as_f64)
}

/// Whether `key`'s value is a function of `x_key`'s (like a cache level of a working-set size):
/// such a key only relabels the x axis and must not split lines. With fewer than three x values
/// any key looks like a function of x, so then nothing counts as one.
fn depends_on(recs: &[&Record], x_key: &str, key: &str) -> bool {
    let mut xs: Vec<&Value> = recs.iter().filter_map(|r| r.params.get(x_key)).collect();
    xs.dedup();
    xs.sort_by_key(|v| v.to_string());
    xs.dedup();
    if xs.len() < 3 {
        return false;
    }
    recs.iter().all(|a| {
        recs.iter()
            .filter(|b| b.params.get(x_key) == a.params.get(x_key))
            .all(|b| b.params.get(key) == a.params.get(key))
    })
}

/// Series of `value against x_key`. Records are split by the keys in `line_keys` (in order) only
/// where needed: a group whose remaining varying keys are all functions of x within the group
/// (a cache level, a per-thread block of a working set) is one curve already. Series with fewer
/// than two points are dropped: a lone point is no line.
fn series_of(recs: &[&Record], x_key: &str, line_keys: &[String]) -> Vec<Series> {
    let mut series = Vec::new();
    split_series(recs, x_key, line_keys, &mut Vec::new(), &mut series);
    series
}

fn split_series(
    recs: &[&Record],
    x_key: &str,
    keys: &[String],
    path: &mut Vec<String>,
    out: &mut Vec<Series>,
) {
    let varies = |k: &String| {
        recs.iter()
            .any(|r| r.params.get(k) != recs[0].params.get(k))
    };
    // Concurrency always splits: points of different thread counts are never one curve.
    let split = keys.iter().position(|k| {
        varies(k)
            && (crate::table::CONCURRENCY_KEYS.contains(&k.as_str()) || !depends_on(recs, x_key, k))
    });
    if let Some(i) = split {
        let key = &keys[i];
        for (v, rs) in group_by(recs.iter().copied(), |r| r.params.get(key).cloned()) {
            path.push(v.map_or("—".into(), |v| label_part(key, &v)));
            split_series(&rs, x_key, &keys[i + 1..], path, out);
            path.pop();
        }
        return;
    }
    let mut points: Vec<(f64, f64, f64)> = recs
        .iter()
        .filter_map(|r| Some((num(r, x_key)?, r.stats.mean, r.stats.stddev)))
        .filter(|p| p.1.is_finite() && p.1 > 0.0)
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    points.dedup_by(|a, b| a.0 == b.0);
    let mut peaks: Vec<(f64, f64)> = recs
        .iter()
        .filter_map(|r| Some((num(r, x_key)?, r.peak.as_ref()?.value)))
        .filter(|p| p.1.is_finite() && p.1 > 0.0)
        .collect();
    peaks.sort_by(|a, b| a.0.total_cmp(&b.0));
    peaks.dedup_by(|a, b| a.0 == b.0);
    if points.len() >= 2 {
        let name = if path.is_empty() {
            short_name(&recs[0].benchmark).to_string()
        } else {
            with_test_name(recs, path).join(" ")
        };
        out.push(Series {
            name,
            points,
            peaks,
            tips: Vec::new(),
            dashed_like: None,
            rings: Vec::new(),
        });
    }
}

/// A line's name parts with its protocol and mode said as netperf's test name (`TCP_RR`, not
/// `tcp rr`), where every record of the line is one test and the name tells lines apart.
fn with_test_name(recs: &[&Record], path: &[String]) -> Vec<String> {
    let Some(name) =
        test_name(recs[0]).filter(|n| recs.iter().all(|r| test_name(r).as_ref() == Some(n)))
    else {
        return path.to_vec();
    };
    let words: Vec<String> = ["proto", "mode"]
        .iter()
        .filter_map(|k| recs[0].params.get(*k).map(|v| label_part(k, v)))
        .collect();
    let Some(at) = path.iter().position(|p| words.contains(p)) else {
        return path.to_vec();
    };
    let mut out: Vec<String> = path
        .iter()
        .filter(|p| !words.contains(p))
        .cloned()
        .collect();
    out.insert(at.min(out.len()), name);
    out
}

fn x_title(key: &str) -> String {
    match key {
        "threads" => "Threads".into(),
        "streams" => "Streams".into(),
        "pairs" => "Pairs".into(),
        WS_KEY => "Working-set size".into(),
        other => other.to_string(),
    }
}

fn what(metric: Metric, unit: &str) -> &'static str {
    units::quantity(unit, metric == Metric::Latency)
}

fn scaling_charts(prefix: &str, bench: &str, recs: &[&Record], out: &mut Vec<Chart>) {
    let Some(ck) = concurrency_key(recs[0]) else {
        return;
    };
    let recs: Vec<&Record> = recs
        .iter()
        .copied()
        .filter(|r| num(r, ck).is_some())
        .collect();
    let varying = varying_keys(&recs);
    if !varying.iter().any(|k| k == ck) {
        return;
    }
    let line_keys: Vec<String> = varying.iter().filter(|k| *k != ck).cloned().collect();
    let (unit, metric) = (recs[0].unit.clone(), recs[0].metric);
    let title = format!(
        "{bench}: {} vs {}",
        what(metric, &unit),
        x_title(ck).to_lowercase()
    );
    let all = series_of(&recs, ck, &line_keys);
    // Too many lines: one chart per workload, lines per block size (the classic plots).
    let split_keys: Vec<String> = line_keys
        .iter()
        .filter(|k| *k != crate::table::BLOCK_KEY)
        .cloned()
        .collect();
    let parts: Vec<(String, Vec<Series>)> = if all.len() > MAX_SERIES && !split_keys.is_empty() {
        let key = |r: &Record| -> String {
            split_keys
                .iter()
                .filter_map(|k| r.params.get(k).map(|v| value_text(k, v)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let inner: Vec<String> = line_keys
            .iter()
            .filter(|k| !split_keys.contains(k))
            .cloned()
            .collect();
        group_by(recs.iter().copied(), key)
            .into_iter()
            .map(|(w, rs)| (format!("{title} ({w})"), series_of(&rs, ck, &inner)))
            .collect()
    } else {
        vec![(title, all)]
    };
    for (title, series) in parts {
        if series.is_empty() {
            continue;
        }
        out.push(Chart {
            id: String::new(),
            title,
            subsystem: prefix.to_string(),
            kind: Kind::Lines(Lines {
                x_label: x_title(ck),
                x: XAxis::Count,
                unit: unit.clone(),
                metric,
                series,
                notes: Vec::new(),
                y: YAxis::Auto,
                levels: Vec::new(),
                ring_means: None,
            }),
        });
    }
}

fn working_set_chart(prefix: &str, bench: &str, recs: &[&Record], out: &mut Vec<Chart>) {
    let recs: Vec<&Record> = recs
        .iter()
        .copied()
        .filter(|r| num(r, WS_KEY).is_some())
        .collect();
    let mut sizes: Vec<f64> = recs.iter().filter_map(|r| num(r, WS_KEY)).collect();
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    if sizes.len() < 3 {
        return;
    }
    let line_keys: Vec<String> = varying_keys(&recs)
        .into_iter()
        .filter(|k| k != WS_KEY)
        .collect();
    let series = series_of(&recs, WS_KEY, &line_keys);
    if series.is_empty() {
        return;
    }
    let (unit, metric) = (recs[0].unit.clone(), recs[0].metric);
    out.push(Chart {
        id: String::new(),
        title: format!("{bench}: {} vs working-set size", what(metric, &unit)),
        subsystem: prefix.to_string(),
        kind: Kind::Lines(Lines {
            x_label: x_title(WS_KEY),
            x: XAxis::Bytes,
            unit,
            metric,
            series: series.into_iter().take(MAX_SERIES * 2).collect(),
            notes: Vec::new(),
            y: YAxis::Auto,
            levels: Vec::new(),
            ring_means: None,
        }),
    });
}

/// The extra field of a latency record that says how much memory traffic ran beside it (B/s).
const LOAD_EXTRA: &str = "bandwidth";
/// The parameter that throttles that traffic: a point on the curve per value, never a line.
const DELAY_KEY: &str = "delay";
/// The kind of that traffic: always in a line's name, so a lone curve still says it.
const TRAFFIC_KEY: &str = "traffic";

/// Latency against the bandwidth that ran beside it (Intel MLC's loaded-latency curve): one
/// line per remaining workload (traffic kind, threads, working set), points in bandwidth order,
/// each point's delay in its tooltip. Returns whether the benchmark is such a sweep (then its
/// scaling and working-set charts would be noise, even where no line has two points).
fn loaded_latency_charts(
    prefix: &str,
    bench: &str,
    recs: &[&Record],
    out: &mut Vec<Chart>,
) -> bool {
    let load = |r: &Record| {
        r.extra
            .get(LOAD_EXTRA)
            .and_then(Value::as_f64)
            .filter(|b| b.is_finite() && *b >= 0.0)
    };
    let recs: Vec<&Record> = recs
        .iter()
        .copied()
        .filter(|r| r.metric == Metric::Latency && load(r).is_some())
        .collect();
    if recs.is_empty() {
        return false;
    }
    let mut line_keys: Vec<String> = Vec::new();
    if recs.iter().any(|r| r.params.contains_key(TRAFFIC_KEY)) {
        line_keys.push(TRAFFIC_KEY.into());
    }
    for k in varying_keys(&recs) {
        if k != DELAY_KEY && !line_keys.contains(&k) {
            line_keys.push(k);
        }
    }
    let mut series = Vec::new();
    let lines = group_by(recs.iter().copied(), |r| {
        line_keys
            .iter()
            .map(|k| r.params.get(k).cloned())
            .collect::<Vec<_>>()
    });
    for (values, rs) in lines {
        let mut points: Vec<((f64, f64, f64), String)> = rs
            .iter()
            .filter_map(|r| {
                let bw = load(r)?;
                let (mean, sd) = (r.stats.mean, r.stats.stddev);
                (mean.is_finite() && mean > 0.0).then(|| ((bw, mean, sd), load_tip(r, bw)))
            })
            .collect();
        points.sort_by(|a, b| a.0 .0.total_cmp(&b.0 .0));
        if points.len() < 2 {
            continue;
        }
        let name: Vec<String> = line_keys
            .iter()
            .zip(&values)
            .filter_map(|(k, v)| v.as_ref().map(|v| label_part(k, v)))
            .collect();
        series.push(tipped_series(bench, &name, points));
    }
    let mut delays: Vec<f64> = recs.iter().filter_map(|r| num(r, DELAY_KEY)).collect();
    delays.sort_by(f64::total_cmp);
    let notes = match (delays.first(), delays.last()) {
        (Some(lo), Some(hi)) if hi > lo => vec![
            "A point per delay (spins per".to_string(),
            format!("line of traffic): {} … {}", tick(*lo), tick(*hi)),
        ],
        _ => Vec::new(),
    };
    let title = format!("{bench}: {} vs bandwidth", what(Metric::Latency, "s"));
    let n = series.len().div_ceil(MAX_SERIES);
    for (i, part) in series.chunks(MAX_SERIES).enumerate() {
        out.push(Chart {
            id: String::new(),
            title: if n > 1 {
                format!("{title} ({}/{n})", i + 1)
            } else {
                title.clone()
            },
            subsystem: prefix.to_string(),
            kind: Kind::Lines(Lines {
                x_label: "Bandwidth".into(),
                x: XAxis::Quantity("B/s".into()),
                unit: recs[0].unit.clone(),
                metric: Metric::Latency,
                series: part.to_vec(),
                notes: notes.clone(),
                y: YAxis::Auto,
                levels: Vec::new(),
                ring_means: None,
            }),
        });
    }
    true
}

/// A line of points with a tooltip each, named by its label parts (or the benchmark).
fn tipped_series(bench: &str, name: &[String], points: Vec<((f64, f64, f64), String)>) -> Series {
    let (points, tips) = points.into_iter().unzip();
    Series {
        name: if name.is_empty() {
            short_name(bench).to_string()
        } else {
            name.join(" ")
        },
        points,
        peaks: Vec::new(),
        tips,
        dashed_like: None,
        rings: Vec::new(),
    }
}

/// The UDP capacity search's trials (`extra.search_curve`: offered vs delivered rate), one line
/// per searched record: where delivered leaves the diagonal, loss begins.
fn search_curve_chart(prefix: &str, bench: &str, recs: &[&Record], out: &mut Vec<Chart>) {
    let mut series = Vec::new();
    let varying = varying_keys(recs);
    for r in recs {
        let Some(curve) = r.extra.get("search_curve").and_then(Value::as_array) else {
            continue;
        };
        let mut points: Vec<((f64, f64, f64), String)> = curve
            .iter()
            .filter_map(|t| {
                let offered = t.get("offered_bps")?.as_f64()?;
                let delivered = t.get("delivered_bps")?.as_f64()?;
                let loss = t
                    .get("lost_fraction")
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0);
                let tip = format!(
                    "offered {}: delivered {}, loss {:.3} %",
                    units::human(offered, "bit/s"),
                    units::human(delivered, "bit/s"),
                    loss * 100.0
                );
                Some(((offered, delivered, 0.0), tip))
            })
            .collect();
        if points.len() < 2 {
            continue;
        }
        points.sort_by(|a, b| a.0 .0.total_cmp(&b.0 .0));
        let name: Vec<String> = varying
            .iter()
            .filter_map(|k| r.params.get(k).map(|v| label_part(k, v)))
            .collect();
        series.push(tipped_series(bench, &name, points));
    }
    let n = series.len().div_ceil(MAX_SERIES);
    for (i, part) in series.chunks(MAX_SERIES).enumerate() {
        let title = format!("{bench}: UDP capacity search, delivered vs offered");
        out.push(Chart {
            id: String::new(),
            title: if n > 1 {
                format!("{title} ({}/{n})", i + 1)
            } else {
                title
            },
            subsystem: prefix.to_string(),
            kind: Kind::Lines(Lines {
                x_label: "Offered".into(),
                x: XAxis::Quantity("bit/s".into()),
                unit: "bit/s".into(),
                metric: Metric::Throughput,
                series: part.to_vec(),
                notes: vec![
                    "A point per trial of the last".to_string(),
                    "sample; loss in the tooltip".to_string(),
                ],
                y: YAxis::Auto,
                levels: Vec::new(),
                ring_means: None,
            }),
        });
    }
}

/// The fraction of its load a latency-under-load point may lose before it is ringed: beyond it
/// the path is past its capacity, and the round trips time a queue that overflows.
const LOST_RING: f64 = 0.01;

/// A number in a record's `extra`, by path (`["rtt", "p99"]`).
fn extra_num(r: &Record, path: &[&str]) -> Option<f64> {
    let (first, rest) = path.split_first()?;
    let mut v = r.extra.get(*first)?;
    for k in rest {
        v = v.get(k)?;
    }
    v.as_f64().filter(|x| x.is_finite())
}

/// The load a latency-under-load record came to (bit/s): `extra.offered_bps`, else the asked
/// `load_bps` where it is a number.
fn offered(r: &Record) -> Option<f64> {
    extra_num(r, &["offered_bps"])
        .or_else(|| num(r, LOAD_KEY))
        .filter(|x| *x >= 0.0)
}

/// One latency-under-load point's four round trips: p50 and p99, corrected for coordinated
/// omission (timed from each message's due time) and not (from the actual send).
struct LoadPoint<'a> {
    record: &'a Record,
    x: f64,
    p50: f64,
    p99: Option<f64>,
    p50_uncorrected: Option<f64>,
    p99_uncorrected: Option<f64>,
    lost: f64,
}

impl<'a> LoadPoint<'a> {
    fn of(r: &'a Record) -> Option<Self> {
        let positive = |v: Option<f64>| v.filter(|x| *x > 0.0);
        Some(LoadPoint {
            record: r,
            x: offered(r)?,
            p50: positive(Some(r.value))?,
            p99: positive(extra_num(r, &["p99_s"]).or_else(|| extra_num(r, &["rtt", "p99"]))),
            p50_uncorrected: positive(
                extra_num(r, &["p50_uncorrected_s"])
                    .or_else(|| extra_num(r, &["rtt_uncorrected", "p50"])),
            ),
            p99_uncorrected: positive(
                extra_num(r, &["p99_uncorrected_s"])
                    .or_else(|| extra_num(r, &["rtt_uncorrected", "p99"])),
            ),
            lost: extra_num(r, &["load_lost_fraction"]).unwrap_or(0.0),
        })
    }

    /// `p99 33.4 µs under 10% load: offered 3.44 Gbit/s, delivered 3.44 Gbit/s, 0.00 % lost`.
    fn tip(&self, figure: &str, v: f64) -> String {
        let load = self
            .record
            .params
            .get(LOAD_KEY)
            .map_or(String::new(), |l| format!(" {}", label_part(LOAD_KEY, l)));
        let delivered = extra_num(self.record, &["delivered_bps"]).map_or(String::new(), |d| {
            format!(", delivered {}", units::human(d, "bit/s"))
        });
        format!(
            "{figure} {}{load}: offered {}{delivered}, {:.2} % of the load lost",
            units::human(v, "s"),
            units::human(self.x, "bit/s"),
            self.lost * 100.0
        )
    }
}

/// Round trip against the load offered beside it (sockperf's under-load mode): a chart per
/// protocol, block size and target (and any other parameter but the load), a point per load in
/// the order of the load it came to. Lines of p50 and p99, corrected for coordinated omission;
/// the uncorrected ones dashed in the same colours (where they part, the sender fell behind its
/// schedule); the idle ping-pong of the same protocol and target as a level; points whose load
/// lost more than 1 % ringed. The y axis goes logarithmic early: past capacity the round trip
/// jumps a hundredfold.
fn under_load_charts(prefix: &str, bench: &str, recs: &[&Record], out: &mut Vec<Chart>) {
    let loaded: Vec<&Record> = recs
        .iter()
        .copied()
        .filter(|r| r.metric == Metric::Latency && is_under_load(r))
        .collect();
    if loaded.is_empty() {
        return;
    }
    // A chart per protocol, block and target: what the curve is of.
    let chart_keys: Vec<String> = ["proto", BLOCK_KEY, "target"]
        .iter()
        .map(|k| k.to_string())
        .collect();
    // Whatever else varies (a side-by-side run's label, the streams) splits the lines.
    let line_keys: Vec<String> = varying_keys(&loaded)
        .into_iter()
        .filter(|k| k != LOAD_KEY && !chart_keys.contains(k))
        .collect();
    let key_of = |r: &Record, keys: &[String]| -> Vec<Option<Value>> {
        keys.iter().map(|k| r.params.get(k).cloned()).collect()
    };
    for (_, crecs) in group_by(loaded.iter().copied(), |r| key_of(r, &chart_keys)) {
        let lines = group_by(crecs.iter().copied(), |r| key_of(r, &line_keys));
        // More than one line set: the uncorrected lines would crowd the chart out.
        let uncorrected = lines.len() == 1;
        let mut series: Vec<Series> = Vec::new();
        let mut levels: Vec<(String, f64)> = Vec::new();
        for (values, rs) in &lines {
            let mut points: Vec<LoadPoint<'_>> =
                rs.iter().filter_map(|r| LoadPoint::of(r)).collect();
            if points.is_empty() {
                continue;
            }
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            let name: Vec<String> = line_keys
                .iter()
                .zip(values)
                .filter_map(|(k, v)| v.as_ref().map(|v| label_part(k, v)))
                .collect();
            let named = |figure: &str| -> Vec<String> {
                name.iter().cloned().chain([figure.to_string()]).collect()
            };
            let rings: Vec<bool> = points.iter().map(|p| p.lost > LOST_RING).collect();
            let mut line = |figure: &str,
                            get: &dyn Fn(&LoadPoint<'_>) -> Option<f64>,
                            dashed_like: Option<usize>| {
                let mut pts = Vec::new();
                let mut ring = Vec::new();
                for (p, r) in points.iter().zip(&rings) {
                    if let Some(v) = get(p) {
                        // The error bar is the p50's spread over the samples; the other figures
                        // come from one pooled histogram.
                        let sd = if figure == "p50" {
                            p.record.stats.stddev
                        } else {
                            0.0
                        };
                        pts.push(((p.x, v, sd), p.tip(figure, v)));
                        ring.push(*r && dashed_like.is_none());
                    }
                }
                if pts.is_empty() {
                    return None;
                }
                let mut s = tipped_series(bench, &named(figure), pts);
                s.dashed_like = dashed_like;
                s.rings = ring;
                series.push(s);
                Some(series.len() - 1)
            };
            let p50 = line("p50", &|p| Some(p.p50), None);
            let p99 = line("p99", &|p| p.p99, None);
            if uncorrected {
                line("p50 uncorrected", &|p| p.p50_uncorrected, p50);
                line("p99 uncorrected", &|p| p.p99_uncorrected, p99);
            }
            if let Some(idle) = idle_of(rs[0], recs) {
                let size = match (block(idle), block(rs[0])) {
                    (a, b) if a != b && !a.is_empty() => format!(" ({a})"),
                    _ => String::new(),
                };
                let mut label = named("idle");
                label.push(format!("{}{size}", units::human(idle.value, "s")));
                levels.push((label.join(" "), idle.value));
            }
        }
        if series.is_empty() {
            continue;
        }
        let first = crecs[0];
        let about: Vec<String> = chart_keys
            .iter()
            .filter_map(|k| first.params.get(k).map(|v| value_text(k, v)))
            .collect();
        let title = format!(
            "{bench}: {} vs offered load ({})",
            what(Metric::Latency, "s"),
            about.join(", ")
        );
        let mut notes = vec![
            "p50, p99: timed from each".to_string(),
            "message's due time (corrected);".to_string(),
        ];
        if uncorrected {
            notes.push("dashed: from its actual send".to_string());
        }
        out.push(Chart {
            id: String::new(),
            title,
            subsystem: prefix.to_string(),
            kind: Kind::Lines(Lines {
                x_label: "Offered load".into(),
                x: XAxis::Quantity("bit/s".into()),
                unit: first.unit.clone(),
                metric: Metric::Latency,
                series: series.into_iter().take(MAX_SERIES).collect(),
                notes,
                y: YAxis::Log,
                levels,
                ring_means: Some(format!("> {:.0} % of the load lost", LOST_RING * 100.0)),
            }),
        });
    }
}

/// The unit of request/response transaction rates.
const TRANSACTIONS: &str = "transactions/s";

/// What a request/response mode does, for the legend (unknown modes are said as they are).
const MODES: [(&str, &str); 2] = [
    ("rr", "request/response (RR)"),
    ("crr", "connect, request/response, close (CRR)"),
];

/// Transactions per second, a bar per case: bars of one mode together and in its colour, each
/// named as netperf names the test, with its pairs and requests in flight
/// (`TCP_RR, 2 pairs × 16 in flight`).
fn transaction_charts(prefix: &str, bench: &str, recs: &[&Record], out: &mut Vec<Chart>) {
    let recs: Vec<&Record> = recs
        .iter()
        .copied()
        .filter(|r| r.unit == TRANSACTIONS)
        .collect();
    if recs.is_empty() {
        return;
    }
    let varying = varying_keys(&recs);
    // Said by the test name and the concurrency.
    let said = ["proto", "mode", "pairs", IN_FLIGHT_KEY, BLOCK_KEY];
    // Whether a test's cases differ in requests in flight: then its `1 in flight` is said too,
    // beside the `16 in flight` it is against.
    let in_flight_varies = |r: &Record| {
        let same: Vec<&Record> = recs
            .iter()
            .copied()
            .filter(|x| test_name(x) == test_name(r))
            .collect();
        varying_keys(&same).iter().any(|k| k == IN_FLIGHT_KEY)
    };
    let label = |r: &Record| -> String {
        let mut parts = vec![test_name(r).unwrap_or_else(|| short_name(bench).to_string())];
        parts.extend(
            r.params
                .iter()
                .filter(|(k, _)| varying.contains(k) && !said.contains(&k.as_str()))
                .map(|(k, v)| label_part(k, v)),
        );
        let mut s = parts.join(" ");
        let mut c = concurrency_words(r);
        let one = r.params.get(IN_FLIGHT_KEY).and_then(Value::as_u64) == Some(1);
        if one && in_flight_varies(r) {
            c = if c.is_empty() {
                "1 in flight".into()
            } else {
                format!("{c} × 1 in flight")
            };
        }
        if !c.is_empty() {
            s.push_str(&format!(", {c}"));
        }
        if varying.iter().any(|k| k == BLOCK_KEY) {
            s.push_str(&format!(", {}", block(r)));
        }
        s
    };
    let mode = |r: &Record| r.params.get("mode").map(|v| value_text("mode", v));
    let num_or = |r: &Record, k: &str| num(r, k).unwrap_or(0.0);
    let mut ordered: Vec<&Record> = Vec::new();
    let modes = group_by(recs.iter().copied(), mode);
    for (_, mut rs) in modes.iter().cloned() {
        // Within a mode: each protocol's cases together, the least concurrency first.
        let protos: Vec<Option<Value>> =
            group_by(rs.iter().copied(), |r| r.params.get("proto").cloned())
                .into_iter()
                .map(|(p, _)| p)
                .collect();
        rs.sort_by(|a, b| {
            let p = |r: &Record| {
                protos
                    .iter()
                    .position(|x| *x == r.params.get("proto").cloned())
            };
            p(a).cmp(&p(b))
                .then(num_or(a, "pairs").total_cmp(&num_or(b, "pairs")))
                .then(num_or(a, IN_FLIGHT_KEY).total_cmp(&num_or(b, IN_FLIGHT_KEY)))
        });
        ordered.extend(rs);
    }
    let title = format!(
        "{bench}: {} per test",
        what(Metric::Throughput, TRANSACTIONS).to_lowercase()
    );
    let chunks: Vec<&[&Record]> = ordered.chunks(MAX_CATEGORIES).collect();
    let n = chunks.len();
    for (i, chunk) in chunks.into_iter().enumerate() {
        let series = modes
            .iter()
            .map(|(m, _)| BarSeries {
                name: m.as_deref().map_or_else(
                    || "Measured (mean)".to_string(),
                    |m| {
                        MODES
                            .iter()
                            .find(|(raw, _)| *raw == m)
                            .map_or_else(|| m.to_string(), |(_, words)| words.to_string())
                    },
                ),
                values: chunk
                    .iter()
                    .map(|r| (mode(r) == *m).then_some(r.stats.mean))
                    .collect(),
            })
            .collect();
        let bars = Bars {
            unit: TRANSACTIONS.into(),
            quantity: what(Metric::Throughput, TRANSACTIONS).to_string(),
            categories: chunk.iter().map(|r| label(r)).collect(),
            series,
        };
        push_part(out, prefix, &title, (i, n), bars);
    }
}

/// A loaded-latency point's tooltip: `delay 200 (1.20 µs): 12.3 GB/s, 95.0 ns`.
fn load_tip(r: &Record, bandwidth: f64) -> String {
    let delay = r
        .params
        .get(DELAY_KEY)
        .map_or("—".to_string(), |v| value_text(DELAY_KEY, v));
    let time = r
        .extra
        .get("delay_s")
        .and_then(Value::as_f64)
        .filter(|t| t.is_finite() && *t > 0.0)
        .map_or(String::new(), |t| format!(" ({})", units::human(t, "s")));
    format!(
        "{DELAY_KEY} {delay}{time}: {}, {}",
        units::human(bandwidth, "B/s"),
        units::human(r.stats.mean, &r.unit)
    )
}

fn versus_peak_charts(prefix: &str, bench: &str, recs: &[&Record], out: &mut Vec<Chart>) {
    let recs: Vec<&Record> = recs
        .iter()
        .copied()
        .filter(|r| r.peak.is_some() || r.reference.is_some())
        .collect();
    if recs.is_empty() {
        return;
    }
    let varying = varying_keys(&recs);
    let has_peak = recs.iter().any(|r| r.peak.is_some());
    let tools: Vec<String> = recs
        .iter()
        .filter_map(|r| r.reference.as_ref().map(|x| x.tool.clone()))
        .fold(Vec::new(), |mut v, t| {
            if !v.contains(&t) {
                v.push(t);
            }
            v
        });
    let title = match (has_peak, tools.is_empty()) {
        (true, true) => format!("{bench}: measured vs theoretical"),
        (true, false) => format!("{bench}: measured vs theoretical vs reference"),
        _ => format!("{bench}: measured vs reference"),
    };
    let chunks: Vec<&[&Record]> = recs.chunks(MAX_CATEGORIES).collect();
    let n = chunks.len();
    for (i, chunk) in chunks.into_iter().enumerate() {
        let mut series = vec![BarSeries {
            name: "Measured (mean)".into(),
            values: chunk.iter().map(|r| Some(r.stats.mean)).collect(),
        }];
        if has_peak {
            series.push(BarSeries {
                name: "Theoretical".into(),
                values: chunk
                    .iter()
                    .map(|r| r.peak.as_ref().map(|p| p.value))
                    .collect(),
            });
        }
        if !tools.is_empty() {
            series.push(BarSeries {
                name: format!("Reference ({})", tools.join(", ")),
                values: chunk
                    .iter()
                    .map(|r| r.reference.as_ref().map(|x| x.value))
                    .collect(),
            });
        }
        let bars = Bars {
            unit: recs[0].unit.clone(),
            quantity: what(recs[0].metric, &recs[0].unit).to_string(),
            categories: chunk.iter().map(|r| row_label(r, &varying)).collect(),
            series,
        };
        push_part(out, prefix, &title, (i, n), bars);
    }
}

/// Part `i` of `n` of a bar chart split for length.
fn push_part(out: &mut Vec<Chart>, prefix: &str, title: &str, (i, n): (usize, usize), bars: Bars) {
    out.push(Chart {
        id: String::new(),
        title: if n > 1 {
            format!("{title} ({}/{n})", i + 1)
        } else {
            title.to_string()
        },
        subsystem: prefix.to_string(),
        kind: Kind::Bars(bars),
    });
}

fn efficiency_charts(prefix: &str, recs: &[&Record], out: &mut Vec<Chart>) {
    let recs: Vec<&Record> = recs
        .iter()
        .copied()
        .filter(|r| r.efficiency.is_some())
        .collect();
    if recs.is_empty() {
        return;
    }
    let any_ref = recs.iter().any(|r| reference_efficiency(r).is_some());
    let labels: Vec<String> = group_by(recs.iter().copied(), |r| r.benchmark.clone())
        .into_iter()
        .flat_map(|(_, rs)| {
            let varying = varying_keys(&rs);
            rs.iter()
                .map(|r| row_label(r, &varying))
                .collect::<Vec<_>>()
        })
        .collect();
    let ordered: Vec<&Record> = group_by(recs.iter().copied(), |r| r.benchmark.clone())
        .into_iter()
        .flat_map(|(_, rs)| rs)
        .collect();
    let title = format!("{}: efficiency (% of theoretical)", subsystem_title(prefix));
    let n = ordered.len().div_ceil(MAX_CATEGORIES);
    for (i, (chunk, names)) in ordered
        .chunks(MAX_CATEGORIES)
        .zip(labels.chunks(MAX_CATEGORIES))
        .enumerate()
    {
        let mut series = vec![BarSeries {
            name: "hostbench".into(),
            values: chunk
                .iter()
                .map(|r| r.efficiency.map(|e| e * 100.0))
                .collect(),
        }];
        if any_ref {
            series.push(BarSeries {
                name: "Reference tool".into(),
                values: chunk
                    .iter()
                    .map(|r| reference_efficiency(r).map(|e| e * 100.0))
                    .collect(),
            });
        }
        let bars = Bars {
            unit: "%".into(),
            quantity: "Efficiency".into(),
            categories: names.to_vec(),
            series,
        };
        push_part(out, prefix, &title, (i, n), bars);
    }
}

/// hostbench / reference tool per record that has a reference (above 1: hostbench did better,
/// for latency too): the like-for-like comparison at a glance, 1.0 being parity.
fn ratio_charts(prefix: &str, recs: &[&Record], out: &mut Vec<Chart>) {
    let with_ref: Vec<&Record> = recs
        .iter()
        .copied()
        .filter(|r| r.reference.is_some())
        .collect();
    if with_ref.is_empty() {
        return;
    }
    let grouped: Vec<(String, Vec<&Record>)> =
        group_by(with_ref.iter().copied(), |r| r.benchmark.clone());
    let mut labels = Vec::new();
    let mut values = Vec::new();
    for (_, rs) in &grouped {
        let varying = varying_keys(rs);
        for r in rs {
            let tool = r.reference.as_ref().map_or("", |x| x.tool.as_str());
            labels.push(format!("{} ({tool})", row_label(r, &varying)));
            values.push(r.reference.as_ref().map(|x| x.ratio));
        }
    }
    let title = format!(
        "{}: hostbench / reference tool (1 = parity)",
        subsystem_title(prefix)
    );
    let n = labels.len().div_ceil(MAX_CATEGORIES);
    for (i, (names, vals)) in labels
        .chunks(MAX_CATEGORIES)
        .zip(values.chunks(MAX_CATEGORIES))
        .enumerate()
    {
        let bars = Bars {
            unit: "x".into(),
            quantity: "Ratio hostbench / reference".into(),
            categories: names.to_vec(),
            series: vec![BarSeries {
                name: "hostbench / reference".into(),
                values: vals.to_vec(),
            }],
        };
        push_part(out, prefix, &title, (i, n), bars);
    }
}

// ---------------------------------------------------------------------------------------------
// Drawing

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The embedded font is valid TrueType; if registration failed anyway, drawing reports
        // the missing font as a chart error instead of panicking here.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
}

/// Where a line chart's legend goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegendAt {
    /// In a pane of its own on the right of the image: a standalone SVG or PNG, which has no
    /// page around it.
    Pane,
    /// Outside the image: a page lays the legend out as HTML (`legend`) beside the plot on a wide
    /// screen and under it on a narrow one, so on a phone the plot has the whole width.
    Page,
}

/// Pixel size of a chart as a standalone image.
pub fn size(chart: &Chart) -> (u32, u32) {
    size_with(chart, LegendAt::Pane)
}

/// Pixel size of a chart with its legend at `at` (only a line chart's legend can leave it).
fn size_with(chart: &Chart, at: LegendAt) -> (u32, u32) {
    match &chart.kind {
        Kind::Lines(_) if at == LegendAt::Page => (WIDTH - LEGEND_WIDTH, 460),
        Kind::Lines(_) => (WIDTH, 460),
        Kind::Bars(b) => {
            let band = (b.series.len() as u32 * 9 + 8).max(20);
            (
                WIDTH,
                110 + band * b.categories.len() as u32 + 24 * b.series.len() as u32,
            )
        }
        Kind::Heatmap(h) => heatmap::layout(h, &chart.title).size,
    }
}

/// The chart as a standalone SVG document (a line chart's legend in a pane of the image).
pub fn svg(chart: &Chart) -> Result<String, ReportError> {
    svg_with(chart, LegendAt::Pane)
}

/// The chart as an SVG document with its legend at `at`.
pub fn svg_with(chart: &Chart, at: LegendAt) -> Result<String, ReportError> {
    register_font();
    let mut s = String::new();
    let tips = {
        let root = SVGBackend::with_string(&mut s, size_with(chart, at)).into_drawing_area();
        draw(&root, chart, at).map_err(|message| ReportError::Chart {
            chart: chart.title.clone(),
            message,
        })?
    };
    Ok(with_titles(&s, tips))
}

/// `svg` with each tooltip as a `<title>` child of its mark. Plotters writes one element per
/// line, with its position as the first attributes, so a mark is found by where it was drawn;
/// marks drawn at the same place take their tooltips in drawing order.
fn with_titles(svg: &str, tips: Vec<Tip>) -> String {
    if tips.is_empty() {
        return svg.to_string();
    }
    let mut at: HashMap<(bool, i32, i32), Vec<String>> = HashMap::new();
    for t in tips.into_iter().rev() {
        at.entry((t.circle, t.at.0, t.at.1))
            .or_default()
            .push(t.text);
    }
    let attr = |line: &str, name: &str| -> Option<i32> {
        let pat = format!(" {name}=\"");
        let from = line.find(&pat)? + pat.len();
        let len = line[from..].find('"')?;
        line[from..from + len].parse().ok()
    };
    let mut out = String::with_capacity(svg.len() + at.len() * 64);
    for line in svg.split_inclusive('\n') {
        let (circle, tag, x, y) = if line.starts_with("<circle ") {
            (true, "circle", "cx", "cy")
        } else if line.starts_with("<rect ") {
            (false, "rect", "x", "y")
        } else {
            out.push_str(line);
            continue;
        };
        let text = match (attr(line, x), attr(line, y)) {
            (Some(x), Some(y)) => at.get_mut(&(circle, x, y)).and_then(Vec::pop),
            _ => None,
        };
        match (text, line.trim_end().strip_suffix("/>")) {
            (Some(text), Some(open)) => {
                out.push_str(&format!(
                    "{open}><title>{}</title></{tag}>\n",
                    crate::export::html::esc(&text)
                ));
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// The chart as a PNG file.
pub fn png(chart: &Chart, path: &Path) -> Result<(), ReportError> {
    register_font();
    let root = BitMapBackend::new(path, size(chart)).into_drawing_area();
    draw(&root, chart, LegendAt::Pane)
        .map(|_| ())
        .map_err(|message| ReportError::Chart {
            chart: chart.title.clone(),
            message,
        })
}

/// Every chart of a run as `DIR/<id>.png`; returns the files written.
pub fn write_pngs(run: &RunResult, dir: &Path) -> Result<Vec<std::path::PathBuf>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|e| ReportError::io(dir, e))?;
    let mut written = Vec::new();
    for c in charts(run) {
        let path = dir.join(format!("{}.png", c.id));
        png(&c, &path)?;
        written.push(path);
    }
    Ok(written)
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Draws the chart; returns the tooltips of its marks (for SVG).
fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
    at: LegendAt,
) -> Result<Vec<Tip>, String> {
    root.fill(&WHITE).map_err(err)?;
    let tips = match &chart.kind {
        Kind::Lines(l) => draw_lines(root, &chart.title, l, at)?,
        Kind::Bars(b) => {
            draw_bars(root, &chart.title, b)?;
            Vec::new()
        }
        Kind::Heatmap(h) => heatmap::draw(root, &chart.title, h)?,
    };
    root.present().map_err(err)?;
    Ok(tips)
}

/// A tick label with at most three significant digits.
fn tick(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let p = 10f64.powf(2.0 - v.abs().log10().floor());
    let r = (v * p).round() / p;
    format!("{r}")
}

fn draw_lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    l: &Lines,
    at: LegendAt,
) -> Result<Vec<Tip>, String> {
    let xs: Vec<f64> = l
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    // The axis holds the measured points, the theoretical lines and the levels alike.
    let ys: Vec<f64> = l
        .series
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .map(|p| p.1)
                .chain(s.peaks.iter().map(|p| p.1))
        })
        .chain(l.levels.iter().map(|(_, y)| *y))
        .collect();
    let (xmin, xmax) = bounds(&xs);
    let (ymin, ymax) = bounds(&ys);
    let scale = units::scale_for(ymax, &l.unit);
    let (x_scale, x_log, x_desc) = match &l.x {
        XAxis::Quantity(unit) => {
            let s = units::scale_for(xmax, unit);
            let desc = format!("{} ({})", l.x_label, s.label);
            (s, false, desc)
        }
        other => (
            Scale {
                factor: 1.0,
                label: String::new(),
            },
            *other == XAxis::Bytes || (xmin > 0.0 && xmax / xmin >= 8.0),
            l.x_label.clone(),
        ),
    };
    let y_log = ymin > 0.0
        && match l.y {
            YAxis::Auto => ymax / ymin > 100.0,
            YAxis::Log => ymax / ymin >= 10.0,
        };
    let y_desc = format!("{} ({})", what(l.metric, &l.unit), scale.label);
    // The legend has a pane of its own on the right, so it can never cover a point; on a page
    // it is HTML outside the image.
    let plot;
    let root = match at {
        LegendAt::Pane => {
            let (left, pane) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
            draw_legend(&pane, l)?;
            plot = left;
            &plot
        }
        LegendAt::Page => root,
    };
    let (ylo, yhi) = (ymin / scale.factor, ymax / scale.factor);
    let (xmin, xmax) = (xmin / x_scale.factor, xmax / x_scale.factor);
    let x_fmt = |v: &f64| -> String {
        match l.x {
            XAxis::Bytes => units::bytes(*v),
            XAxis::Quantity(_) => tick(*v),
            XAxis::Count if (v - v.round()).abs() < 1e-6 => format!("{v:.0}"),
            XAxis::Count => String::new(),
        }
    };
    let xr_log = (xmin / 1.25)..(xmax * 1.25);
    let xr_lin = if matches!(l.x, XAxis::Quantity(_)) {
        0.0..(xmax * 1.08)
    } else {
        let pad = ((xmax - xmin) * 0.05).max(0.25);
        (xmin - pad).max(0.0)..(xmax + pad)
    };
    let yr_log = (ylo / 1.5)..(yhi * 1.5);
    let yr_lin = 0.0..(yhi * 1.15);
    let axes = Axes {
        title,
        x_desc: &x_desc,
        y_desc: &y_desc,
        x_scale: &x_scale,
        y_scale: &scale,
        x_fmt: &x_fmt,
    };
    // Thread counts and byte sizes both double from point to point.
    let base = 2.0;
    match (x_log, y_log) {
        (true, true) => lines_in(
            root,
            l,
            &axes,
            xr_log.log_scale().base(base),
            yr_log.log_scale(),
        ),
        (true, false) => lines_in(root, l, &axes, xr_log.log_scale().base(base), yr_lin),
        (false, true) => lines_in(root, l, &axes, xr_lin, yr_log.log_scale()),
        (false, false) => lines_in(root, l, &axes, xr_lin, yr_lin),
    }
}

fn bounds(v: &[f64]) -> (f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if lo.is_finite() && hi.is_finite() {
        if hi > lo {
            (lo, hi)
        } else {
            (lo * 0.5, hi * 1.5 + 1e-300)
        }
    } else {
        (1.0, 2.0)
    }
}

/// A line chart's axes: titles, the scales its values are divided by, and x's tick labels.
struct Axes<'a> {
    title: &'a str,
    x_desc: &'a str,
    y_desc: &'a str,
    x_scale: &'a Scale,
    y_scale: &'a Scale,
    x_fmt: &'a dyn Fn(&f64) -> String,
}

fn lines_in<DB, X, Y>(
    root: &DrawingArea<DB, Shift>,
    l: &Lines,
    a: &Axes<'_>,
    xr: X,
    yr: Y,
) -> Result<Vec<Tip>, String>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(a.title, (FONT, 18))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(70)
        .build_cartesian_2d(xr, yr)
        .map_err(err)?;
    let y_fmt = |v: &f64| tick(*v);
    chart
        .configure_mesh()
        .x_desc(a.x_desc)
        .y_desc(a.y_desc)
        .x_label_formatter(a.x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    let (xf, yf) = (a.x_scale.factor, a.y_scale.factor);
    let xr = chart.x_range();
    for (_, y) in &l.levels {
        chart
            .draw_series(DashedLineSeries::new(
                [(xr.start, y / yf), (xr.end, y / yf)],
                2,
                4,
                LEVEL.stroke_width(2),
            ))
            .map_err(err)?;
    }
    let mut tips = Vec::new();
    for (i, s) in l.series.iter().enumerate() {
        let c = color(s.dashed_like.unwrap_or(i));
        let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (p.0 / xf, p.1 / yf)).collect();
        if s.dashed_like.is_some() {
            chart
                .draw_series(DashedLineSeries::new(
                    pts.clone(),
                    6,
                    4,
                    c.mix(0.7).stroke_width(1),
                ))
                .map_err(err)?;
            chart
                .draw_series(
                    pts.iter()
                        .map(|&(x, y)| Circle::new((x, y), 2, c.mix(0.7).filled())),
                )
                .map_err(err)?;
        } else {
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(err)?;
            chart
                .draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 3, c.filled())))
                .map_err(err)?;
        }
        tips.extend(pts.iter().zip(&s.tips).map(|(p, text)| Tip {
            circle: true,
            at: chart.backend_coord(p),
            text: text.clone(),
        }));
        // Rings after the points, so marks at one place take their tooltips in drawing order.
        let ringed: Vec<(&(f64, f64), &String)> = pts
            .iter()
            .zip(&s.rings)
            .filter(|(_, r)| **r)
            .map(|(p, _)| p)
            .zip(
                s.tips
                    .iter()
                    .zip(&s.rings)
                    .filter(|(_, r)| **r)
                    .map(|(t, _)| t),
            )
            .collect();
        chart
            .draw_series(
                ringed
                    .iter()
                    .map(|(&(x, y), _)| Circle::new((x, y), 7, RING.stroke_width(2))),
            )
            .map_err(err)?;
        tips.extend(ringed.iter().map(|(p, text)| Tip {
            circle: true,
            at: chart.backend_coord(p),
            text: (*text).clone(),
        }));
        // Error bars: ± one standard deviation.
        chart
            .draw_series(s.points.iter().filter(|p| p.2 > 0.0).map(|p| {
                let lo = ((p.1 - p.2) / yf).max(p.1 / yf * 0.01);
                let hi = (p.1 + p.2) / yf;
                PathElement::new(vec![(p.0 / xf, lo), (p.0 / xf, hi)], c.stroke_width(1))
            }))
            .map_err(err)?;
        // The theoretical limit at each x (it grows with threads), dashed.
        let peaks: Vec<(f64, f64)> = s.peaks.iter().map(|p| (p.0 / xf, p.1 / yf)).collect();
        if peaks.len() >= 2 {
            chart
                .draw_series(DashedLineSeries::new(peaks, 6, 4, c.stroke_width(1)))
                .map_err(err)?;
        } else if let Some(&(x, y)) = peaks.first() {
            chart
                .draw_series(std::iter::once(Cross::new((x, y), 4, c.stroke_width(1))))
                .map_err(err)?;
        }
    }
    Ok(tips)
}

/// Width of the legend pane beside a line chart.
const LEGEND_WIDTH: u32 = 230;
/// The colour of a line chart's levels (reference lines).
const LEVEL: RGBColor = RGBColor(110, 110, 110);
/// The colour of a ring around a flagged point.
const RING: RGBColor = RGBColor(200, 0, 0);

/// What a line chart's legend says, in order. One list for both renderings: the pane inside a
/// standalone image (`draw_legend`) and the HTML beside the plot on a page (`export::html`).
#[derive(Debug, Clone)]
pub struct Legend {
    /// One entry per series, then per level, then what a ring means (where a point is ringed).
    pub entries: Vec<(Mark, String)>,
    /// What the dashes and the error bars mean (where the chart has them).
    pub keys: Vec<(Mark, String)>,
    /// Lines of text without a mark (`Lines::notes`).
    pub notes: Vec<String>,
}

/// A legend entry's mark: a small drawing of what the entry names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A series' line with its point, in colour `i`.
    Line(usize),
    /// A series drawn dashed, thinner and paler in colour `i` (`Series::dashed_like`).
    DashedLike(usize),
    /// A level: a dotted grey line.
    Level,
    /// A ring around a point.
    Ring,
    /// A theoretical peak: a dashed grey line.
    Peak,
    /// An error bar.
    Deviation,
}

/// Width and height of a mark drawn on its own (`swatch`); it is centred at `SWATCH.1 / 2`.
const SWATCH: (u32, u32) = (30, 20);

/// A line chart's legend.
pub fn legend(l: &Lines) -> Legend {
    let mut entries: Vec<(Mark, String)> = l
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mark = s.dashed_like.map_or(Mark::Line(i), Mark::DashedLike);
            (mark, s.name.clone())
        })
        .collect();
    entries.extend(l.levels.iter().map(|(name, _)| (Mark::Level, name.clone())));
    if let Some(means) = l
        .ring_means
        .as_ref()
        .filter(|_| l.series.iter().any(|s| s.rings.contains(&true)))
    {
        entries.push((Mark::Ring, means.clone()));
    }
    let mut keys = Vec::new();
    if l.series.iter().any(|s| !s.peaks.is_empty()) {
        keys.push((Mark::Peak, "theoretical peak (dashed)".to_string()));
    }
    if l.series.iter().flat_map(|s| &s.points).any(|p| p.2 > 0.0) {
        keys.push((Mark::Deviation, "± 1 standard deviation".to_string()));
    }
    Legend {
        entries,
        keys,
        notes: l.notes.clone(),
    }
}

/// A mark on its own as a small SVG document (`class="swatch"`), for a legend outside the
/// image: drawn by the same code as the pane's marks, so the two legends look alike.
pub fn swatch(mark: Mark) -> Result<String, ReportError> {
    let mut s = String::new();
    {
        let area = SVGBackend::with_string(&mut s, SWATCH).into_drawing_area();
        draw_mark(&area, mark, SWATCH.1 as i32 / 2)
            .and_then(|()| area.present().map_err(err))
            .map_err(|message| ReportError::Chart {
                chart: "legend".into(),
                message,
            })?;
    }
    Ok(s.replacen("<svg ", "<svg class=\"swatch\" aria-hidden=\"true\" ", 1))
}

/// A legend entry's mark, centred at (16, `y`) of `area`.
fn draw_mark<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    mark: Mark,
    y: i32,
) -> Result<(), String> {
    let grey = RGBColor(90, 90, 90);
    match mark {
        Mark::DashedLike(like) => {
            let c = color(like).mix(0.7);
            for x in [6, 16] {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 6, y)],
                    c.stroke_width(1),
                ))
                .map_err(err)?;
            }
            area.draw(&Circle::new((16, y), 2, c.filled()))
                .map_err(err)?;
        }
        Mark::Line(i) => {
            let c = color(i);
            area.draw(&PathElement::new(vec![(6, y), (26, y)], c.stroke_width(2)))
                .map_err(err)?;
            area.draw(&Circle::new((16, y), 3, c.filled()))
                .map_err(err)?;
        }
        Mark::Level => {
            for x in [6, 12, 18, 24] {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 2, y)],
                    LEVEL.stroke_width(2),
                ))
                .map_err(err)?;
            }
        }
        Mark::Ring => {
            area.draw(&Circle::new((16, y), 7, RING.stroke_width(2)))
                .map_err(err)?;
        }
        Mark::Peak => {
            for x in [6, 16] {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 6, y)],
                    grey.stroke_width(1),
                ))
                .map_err(err)?;
            }
        }
        Mark::Deviation => {
            area.draw(&PathElement::new(
                vec![(16, y - 6), (16, y + 6)],
                grey.stroke_width(1),
            ))
            .map_err(err)?;
        }
    }
    Ok(())
}

/// A line chart's legend in its own pane: one entry per series, then what the dashes and the
/// error bars mean.
fn draw_legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, l: &Lines) -> Result<(), String> {
    let legend = legend(l);
    let mut y = 48;
    for (mark, text) in &legend.entries {
        draw_mark(area, *mark, y)?;
        legend_text(area, text, &mut y)?;
    }
    y += 6;
    for (mark, text) in &legend.keys {
        draw_mark(area, *mark, y)?;
        legend_text(area, text, &mut y)?;
    }
    if !legend.notes.is_empty() {
        y += 6;
        let style = TextStyle::from((FONT, 12).into_font())
            .color(&RGBColor(90, 90, 90))
            .pos(Pos::new(HPos::Left, VPos::Center));
        for n in &legend.notes {
            area.draw(&Text::new(n.clone(), (6, y), style.clone()))
                .map_err(err)?;
            y += 18;
        }
    }
    Ok(())
}

/// One legend entry's text beside its mark at `y`, cut to the pane's width; moves `y` down.
fn legend_text<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    y: &mut i32,
) -> Result<(), String> {
    const MAX_CHARS: usize = 30;
    let style = TextStyle::from((FONT, 12).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let text: String = if text.chars().count() > MAX_CHARS {
        text.chars()
            .take(MAX_CHARS - 1)
            .chain(std::iter::once('…'))
            .collect()
    } else {
        text.to_string()
    };
    area.draw(&Text::new(text, (34, *y), style)).map_err(err)?;
    *y += 20;
    Ok(())
}

fn draw_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    b: &Bars,
) -> Result<(), String> {
    let max = b
        .series
        .iter()
        .flat_map(|s| s.values.iter().flatten().copied())
        .fold(0.0f64, f64::max);
    let (scale, x_desc) = if b.unit == "%" {
        (
            Scale {
                factor: 1.0,
                label: "%".into(),
            },
            "Efficiency (% of theoretical)".to_string(),
        )
    } else {
        let s = units::scale_for(max, &b.unit);
        let d = format!("{} ({})", b.quantity, s.label);
        (s, d)
    };
    let xmax = if b.unit == "%" {
        (max * 1.12).max(110.0)
    } else {
        (max / scale.factor * 1.12).max(1e-9)
    };
    let n = b.categories.len();
    // Room for the legend above the first band.
    let legend_rows = b.series.len() as f64 * 0.9 + 0.4;
    let longest = b
        .categories
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(4);
    let label_px = (longest as u32 * 7 + 16).clamp(60, 420);
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 18))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(label_px)
        .build_cartesian_2d(0.0..xmax, 0.0..(n as f64 + legend_rows))
        .map_err(err)?;
    let x_fmt = |v: &f64| tick(*v);
    chart
        .configure_mesh()
        .x_desc(x_desc.as_str())
        .x_label_formatter(&x_fmt)
        .y_labels(0)
        .disable_y_mesh()
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    // Where no category has two values (the series sort the categories into kinds, as the
    // modes of transactions), each bar fills its band in its series' colour.
    let one_each = (0..n).all(|i| {
        b.series
            .iter()
            .filter(|s| s.values.get(i).is_some_and(Option::is_some))
            .count()
            <= 1
    });
    let m = if one_each {
        1.0
    } else {
        b.series.len().max(1) as f64
    };
    let bar_h = 0.8 / m;
    // Category i's band is [n-1-i, n-i) so the first category is on top.
    for (si, s) in b.series.iter().enumerate() {
        let c = color(si);
        let slot = if one_each { 0.0 } else { si as f64 };
        let rects = s.values.iter().enumerate().filter_map(|(i, v)| {
            let v = (*v)? / scale.factor;
            let top = (n - i) as f64 - 0.1 - slot * bar_h;
            Some(Rectangle::new(
                [(0.0, top - bar_h * 0.92), (v, top)],
                c.filled(),
            ))
        });
        chart
            .draw_series(rects)
            .map_err(err)?
            .label(s.name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
    }
    if b.unit == "%" {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(100.0, 0.0), (100.0, n as f64)],
                RGBColor(120, 120, 120).stroke_width(1),
            )))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .label_font((FONT, 12))
        .draw()
        .map_err(err)?;
    let style = TextStyle::from((FONT, 12).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Right, VPos::Center));
    for (i, cat) in b.categories.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(0.0, (n - i) as f64 - 0.5));
        let text: String = if cat.chars().count() > 58 {
            cat.chars().take(57).chain(std::iter::once('…')).collect()
        } else {
            cat.clone()
        };
        root.draw(&Text::new(text, (px - 6, py), style.clone()))
            .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_udp_search_gets_its_offered_vs_delivered_chart() {
        use crate::testdata::{record, run_of};
        let mut r = record(
            "net.throughput",
            Metric::Throughput,
            "bit/s",
            serde_json::json!({"proto": "udp", "rate": "search", "max_loss": 0.001, "streams": 1}),
            &[9e9, 9.1e9, 9.2e9],
        );
        r.extra.insert(
            "search_curve".into(),
            serde_json::json!([
                {"offered_bps": 20e9, "delivered_bps": 10e9, "lost_fraction": 0.5, "passed": false},
                {"offered_bps": 10e9, "delivered_bps": 9.5e9, "lost_fraction": 0.05, "passed": false},
                {"offered_bps": 9e9, "delivered_bps": 9e9, "lost_fraction": 0.0, "passed": true}
            ]),
        );
        let all = charts(&run_of(vec![r]));
        let c = all
            .iter()
            .find(|c| c.title == "net.throughput: UDP capacity search, delivered vs offered")
            .expect("search chart");
        let Kind::Lines(l) = &c.kind else {
            panic!("not a line chart")
        };
        assert_eq!(l.series.len(), 1);
        let xs: Vec<f64> = l.series[0].points.iter().map(|p| p.0).collect();
        assert_eq!(xs, [9e9, 10e9, 20e9]);
        assert!(
            l.series[0].tips[2].contains("loss 50.000 %"),
            "{:?}",
            l.series[0].tips
        );
        assert!(svg(c).expect("svg").contains("Offered"));
    }

    #[test]
    fn trend_charts_put_runs_in_time_order_per_benchmark() {
        let t = |label: &str, pts: &[(&str, f64)]| Trend {
            benchmark: "cpu.flops".into(),
            label: label.into(),
            metric: Metric::Throughput,
            unit: "FLOP/s".into(),
            points: pts.iter().map(|(a, v)| (a.to_string(), *v, 0.0)).collect(),
        };
        let trends = [
            t("f64", &[("2026-01-01T00", 1.0), ("2026-01-03T00", 3.0)]),
            t("f32", &[("2026-01-02T00", 2.0), ("2026-01-03T00", 4.0)]),
            t("lonely", &[("2026-01-03T00", 5.0)]),
        ];
        let charts = trend_charts(&trends);
        assert_eq!(charts.len(), 1);
        let Kind::Lines(l) = &charts[0].kind else {
            panic!("a line chart")
        };
        // A line needs two stored runs; x is the run's place among all three.
        assert_eq!(l.series.len(), 2);
        let xs: Vec<f64> = l.series[0].points.iter().map(|p| p.0).collect();
        assert_eq!(xs, [1.0, 3.0]);
        let xs: Vec<f64> = l.series[1].points.iter().map(|p| p.0).collect();
        assert_eq!(xs, [2.0, 3.0]);
        assert!(
            charts[0].title.contains("last 3 stored runs"),
            "{}",
            charts[0].title
        );
        svg(&charts[0]).unwrap();
    }
    use crate::testdata::synthetic_run;

    #[test]
    fn charts_follow_from_params_for_every_subsystem() {
        let run = synthetic_run();
        let cs = charts(&run);
        let titles: Vec<&str> = cs.iter().map(|c| c.title.as_str()).collect();
        for want in [
            "cpu.flops: Throughput vs threads",
            "cpu.flops: measured vs theoretical vs reference",
            "CPU: efficiency (% of theoretical)",
            "mem.bandwidth: Bandwidth vs threads",
            "mem.latency: Latency vs working-set size",
            "net.throughput: Bandwidth vs streams",
            "net.throughput: measured vs reference",
            "disk.throughput: measured vs theoretical",
            "gpu.flops: measured vs theoretical",
            "CPU: hostbench / reference tool (1 = parity)",
            "Network: hostbench / reference tool (1 = parity)",
        ] {
            assert!(titles.contains(&want), "{want} not in {titles:#?}");
        }
        // The level follows from the working set: it must not split the latency curve.
        let curve = cs
            .iter()
            .find(|c| c.title == "mem.latency: Latency vs working-set size")
            .unwrap();
        match &curve.kind {
            Kind::Lines(l) => {
                assert_eq!(l.series.len(), 1);
                assert_eq!(l.series[0].points.len(), 5);
            }
            Kind::Bars(_) | Kind::Heatmap(_) => panic!("a curve"),
        }
        // Per block size: tcp and udp × 1 KiB and 32 KiB.
        let net = cs
            .iter()
            .find(|c| c.title == "net.throughput: Bandwidth vs streams")
            .unwrap();
        match &net.kind {
            Kind::Lines(l) => assert_eq!(l.series.len(), 4),
            Kind::Bars(_) | Kind::Heatmap(_) => panic!("lines"),
        }
        let ids: Vec<&str> = cs.iter().map(|c| c.id.as_str()).collect();
        let mut unique = ids.clone();
        unique.dedup();
        assert_eq!(ids.len(), unique.len());
    }

    #[test]
    fn a_classic_disk_matrix_gets_one_scaling_chart_per_op_with_lines_per_block() {
        use crate::testdata::record;
        use serde_json::json;
        let mut run = synthetic_run();
        run.records.clear();
        let mib = 1u64 << 20;
        for op in ["read", "write", "randread", "randwrite"] {
            for (blocks, threads) in [
                (vec![mib, 10 * mib, 100 * mib], vec![1, 2, 4]),
                (vec![1024], vec![1, 2, 4, 8, 16, 32, 64, 128]),
            ] {
                if blocks[0] == 1024 && !op.starts_with("rand") {
                    continue;
                }
                for &b in &blocks {
                    for &t in &threads {
                        run.records.push(record(
                            "disk.throughput",
                            Metric::Throughput,
                            "B/s",
                            json!({"op": op, "block_bytes": b, "threads": t, "iodepth": 1,
                                   "engine": "io_uring", "direct": true}),
                            &[1e8 * t as f64, 1.1e8 * t as f64],
                        ));
                    }
                }
            }
        }
        let cs = charts(&run);
        let scaling: Vec<&Chart> = cs
            .iter()
            .filter(|c| c.title.contains("vs threads"))
            .collect();
        assert_eq!(
            scaling.len(),
            4,
            "{:#?}",
            cs.iter().map(|c| &c.title).collect::<Vec<_>>()
        );
        for c in scaling {
            let Kind::Lines(l) = &c.kind else {
                panic!("lines")
            };
            let want = if c.title.contains("(rand") { 4 } else { 3 };
            assert_eq!(l.series.len(), want, "{}", c.title);
            assert!(
                l.series.iter().any(|s| s.name.contains("MiB")),
                "{:?}",
                l.series
            );
        }
    }

    #[test]
    fn svg_has_axes_labels_and_data() {
        let run = synthetic_run();
        for c in charts(&run) {
            let s = svg(&c).unwrap();
            assert!(s.starts_with("<svg"), "{}", &s[..40]);
            assert!(s.contains(&c.title.replace('&', "&amp;")), "{}", c.title);
            match &c.kind {
                Kind::Lines(l) => {
                    assert!(s.contains(&l.x_label), "{}", c.title);
                    assert!(
                        s.contains("<polyline") || s.contains("<path"),
                        "{}",
                        c.title
                    );
                }
                Kind::Bars(_) | Kind::Heatmap(_) => assert!(s.contains("<rect"), "{}", c.title),
            }
        }
    }

    /// The charts of a run of `records`, by title.
    fn titled(records: Vec<Record>) -> Vec<Chart> {
        charts(&crate::testdata::run_of(records))
    }

    #[test]
    fn a_loaded_latency_sweep_is_latency_against_bandwidth_per_traffic_kind() {
        use crate::testdata::loaded_latency;
        let delays = [0, 50, 200, 1000, 5000];
        let cs = titled(loaded_latency(&["read", "rw"], &delays, 4));
        let titles: Vec<&str> = cs.iter().map(|c| c.title.as_str()).collect();
        // The curve alone: a scaling or working-set chart of this sweep would be noise.
        assert_eq!(titles, ["mem.loaded_latency: Latency vs bandwidth"]);
        let Kind::Lines(l) = &cs[0].kind else {
            panic!("lines")
        };
        assert_eq!(l.x, XAxis::Quantity("B/s".into()));
        let names: Vec<&str> = l.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["read", "rw"]);
        for s in &l.series {
            assert_eq!(s.points.len(), 5);
            assert_eq!(s.tips.len(), 5);
            // In bandwidth order: the largest delay (least traffic) first.
            assert!(s.points.windows(2).all(|w| w[0].0 < w[1].0), "{s:?}");
            assert!(
                s.tips[0].starts_with("delay 5000 (2.00 µs): "),
                "{}",
                s.tips[0]
            );
            assert!(s.tips[4].starts_with("delay 0: "), "{}", s.tips[4]);
        }
        assert!(l.notes.join(" ").contains("0 … 5000"), "{:?}", l.notes);
        let svg = svg(&cs[0]).unwrap();
        assert!(svg.contains("Bandwidth (GB/s)"), "x axis in GB/s");
        assert!(svg.contains("Latency (ns)"));
        // Every point carries its delay as a tooltip (two more circles mark the legend).
        assert_eq!(svg.matches("<circle").count(), 12);
        assert_eq!(svg.matches("</title></circle>").count(), 10);
        assert!(
            svg.contains("<title>delay 200 (80.0 ns): 6.67 GB/s, "),
            "{svg}"
        );
        // Linear from zero: the axis starts at a tick labelled 0.
        assert!(
            svg.contains(">\n0\n</text>"),
            "a zero tick on the bandwidth axis"
        );
    }

    #[test]
    fn a_loaded_latency_sweep_over_threads_is_still_one_curve_per_workload() {
        use crate::testdata::loaded_latency;
        let mut recs = loaded_latency(&["read"], &[0, 100, 1000], 2);
        recs.extend(loaded_latency(&["read"], &[0, 100, 1000], 4));
        // A lone point is no line, but the benchmark still gets no scaling chart.
        recs.extend(loaded_latency(&["rw"], &[0], 8));
        let cs = titled(recs);
        assert_eq!(
            cs.len(),
            1,
            "{:?}",
            cs.iter().map(|c| &c.title).collect::<Vec<_>>()
        );
        let Kind::Lines(l) = &cs[0].kind else {
            panic!("lines")
        };
        let names: Vec<&str> = l.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["read threads=2", "read threads=4"]);
    }

    #[test]
    fn memory_matrices_get_heatmaps_and_nothing_senseless() {
        use crate::testdata::{c2c, loaded_latency, numa};
        let mut recs = loaded_latency(&["read", "rw"], &[0, 50, 200, 1000, 5000], 4);
        recs.extend(c2c(8, &["round_trip", "one_way"]));
        recs.extend(numa(2));
        let run = crate::testdata::run_of(recs);
        let cs = charts(&run);
        let titles: Vec<&str> = cs.iter().map(|c| c.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "mem.loaded_latency: Latency vs bandwidth",
                "mem.c2c: core-to-core latency, round trip",
                "mem.c2c: core-to-core latency, one way",
                "mem.numa: bandwidth by CPU node and memory node",
                "mem.numa: latency by CPU node and memory node",
            ]
        );
        for c in &cs {
            let s = svg(c).unwrap();
            assert!(s.starts_with("<svg") && s.contains(&c.title), "{}", c.title);
        }
        let dir = tempfile::tempdir().unwrap();
        let files = write_pngs(&run, dir.path()).unwrap();
        assert_eq!(files.len(), cs.len());
        for f in files {
            let bytes = std::fs::read(&f).unwrap();
            assert_eq!(&bytes[1..4], b"PNG", "{}", f.display());
        }
    }

    #[test]
    fn side_by_side_matrices_get_a_heatmap_per_run() {
        use crate::side::SideBySide;
        use crate::testdata::{c2c, run_of};
        let a = run_of(c2c(4, &["one_way"]));
        let mut b = a.clone();
        b.host.hostname = "other".into();
        let sbs =
            SideBySide::new(vec![(Path::new("a.json"), a), (Path::new("b.json"), b)]).unwrap();
        let titles: Vec<String> = charts(&sbs.merged()).into_iter().map(|c| c.title).collect();
        assert_eq!(
            titles,
            [
                "mem.c2c: core-to-core latency, one way, testhost",
                "mem.c2c: core-to-core latency, one way, other"
            ]
        );
    }

    #[test]
    fn latency_under_load_is_p50_and_p99_against_the_offered_load() {
        use crate::testdata::{net_idle_latency, net_under_load, NET_CAPACITY_BPS};
        use serde_json::json;
        // Out of order, as a run that was given `--load 90%,10%,50%` would record them.
        let mut recs = net_under_load("udp", 32768, &[json!("90%"), json!("10%"), json!("50%")]);
        recs.push(net_idle_latency("udp", 1, 14e-6));
        recs.push(net_idle_latency("tcp", 1, 18e-6));
        let cs = titled(recs);
        let titles: Vec<&str> = cs.iter().map(|c| c.title.as_str()).collect();
        let want = "net.latency: Latency vs offered load (udp, 32 KiB, loopback)";
        assert_eq!(
            titles.iter().filter(|t| t.contains("offered load")).count(),
            1,
            "{titles:?}"
        );
        let c = cs.iter().find(|c| c.title == want).expect("the curve");
        let Kind::Lines(l) = &c.kind else {
            panic!("lines")
        };
        assert_eq!(l.x, XAxis::Quantity("bit/s".into()));
        assert_eq!(l.y, YAxis::Log);
        let names: Vec<&str> = l.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["p50", "p99", "p50 uncorrected", "p99 uncorrected"]);
        let xs: Vec<f64> = l.series[0].points.iter().map(|p| p.0).collect();
        let want_xs = [0.1, 0.5, 0.9].map(|f| f * NET_CAPACITY_BPS);
        assert_eq!(xs.len(), 3);
        for (x, w) in xs.iter().zip(want_xs) {
            assert!((x - w).abs() < 1.0, "{xs:?}");
        }
        for s in &l.series {
            assert!(s.points.windows(2).all(|w| w[0].0 < w[1].0), "{s:?}");
        }
        // p50 is the record's value; p99 the histogram's, from extra.
        assert!((l.series[0].points[2].1 - 968e-6).abs() < 1e-12);
        assert!((l.series[1].points[2].1 - 968e-6 * 2.2).abs() < 1e-12);
        // The uncorrected lines are dashed in their corrected line's colour.
        assert_eq!(l.series[2].dashed_like, Some(0));
        assert_eq!(l.series[3].dashed_like, Some(1));
        // Only the overloaded point (6.7 % of its load lost) is ringed.
        assert_eq!(l.series[0].rings, [false, false, true]);
        // The idle ping-pong of the same protocol and target, not TCP's.
        assert_eq!(l.levels.len(), 1);
        assert_eq!(l.levels[0].1, 14e-6);
        assert_eq!(l.levels[0].0, "idle 14.0 µs (1 B)");
        let svg = svg(c).unwrap();
        assert!(svg.contains("Offered load (Gbit/s)"), "x in Gbit/s");
        assert!(svg.contains("&gt; 1 % of the load lost"));
        assert!(
            svg.contains("<title>p50 968 µs under 90% load: offered 31.0 Gbit/s"),
            "{svg}"
        );
        // The idle records keep their charts; no under-load point joins them.
        for other in cs.iter().filter(|c| c.title != want) {
            if let Kind::Lines(l) = &other.kind {
                assert!(l.series.iter().all(|s| s.points.iter().all(|p| p.1 < 1e-4)));
            }
        }
    }

    #[test]
    fn a_run_without_loads_gets_no_offered_load_chart() {
        let cs = charts(&synthetic_run());
        assert!(
            cs.iter().all(|c| !c.title.contains("offered load")),
            "{:?}",
            cs.iter().map(|c| &c.title).collect::<Vec<_>>()
        );
        let transactions = cs
            .iter()
            .filter(|c| c.title.contains("transaction"))
            .count();
        assert_eq!(transactions, 0);
    }

    #[test]
    fn a_load_in_bit_per_second_is_a_point_like_a_share() {
        use crate::testdata::net_under_load;
        use serde_json::json;
        let mut recs = net_under_load("tcp", 131072, &[json!(5e9), json!("10%")]);
        // Without offered_bps (an older record), the asked rate stands in.
        recs[0].extra.remove("offered_bps");
        let cs = titled(recs);
        assert_eq!(
            cs.len(),
            1,
            "{:?}",
            cs.iter().map(|c| &c.title).collect::<Vec<_>>()
        );
        let Kind::Lines(l) = &cs[0].kind else {
            panic!("lines")
        };
        let xs: Vec<f64> = l.series[0].points.iter().map(|p| p.0).collect();
        assert_eq!(xs.len(), 2);
        assert!((xs[0] - 3.44e9).abs() < 1.0 && xs[1] == 5e9, "{xs:?}");
        assert!(l.levels.is_empty(), "no idle record: no level");
        assert!(
            l.series[0].tips[1].starts_with("p50 ")
                && l.series[0].tips[1].contains("under 5.00 Gbit/s load"),
            "{:?}",
            l.series[0].tips
        );
        svg(&cs[0]).unwrap();
    }

    #[test]
    fn transactions_are_bars_per_test_grouped_by_mode() {
        use crate::testdata::net_transactions;
        let recs = net_transactions(&[
            ("tcp", "rr", 1, 1, 90e3),
            ("tcp", "crr", 2, 1, 25e3),
            ("tcp", "rr", 2, 16, 400e3),
            ("tcp", "rr", 2, 1, 160e3),
            ("udp", "rr", 1, 1, 120e3),
            ("tcp", "crr", 1, 1, 14e3),
        ]);
        let cs = titled(recs);
        let c = cs
            .iter()
            .find(|c| c.title == "net.transactions: transaction rate per test")
            .expect("the bars");
        let Kind::Bars(b) = &c.kind else {
            panic!("bars")
        };
        assert_eq!(
            b.categories,
            [
                "TCP_RR, 1 pair × 1 in flight",
                "TCP_RR, 2 pairs × 1 in flight",
                "TCP_RR, 2 pairs × 16 in flight",
                "UDP_RR, 1 pair",
                "TCP_CRR, 1 pair",
                "TCP_CRR, 2 pairs",
            ]
        );
        // A series per mode, each bar in its mode's.
        let names: Vec<&str> = b.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "request/response (RR)",
                "connect, request/response, close (CRR)"
            ]
        );
        assert!(b.series[0].values[..4].iter().all(Option::is_some));
        assert!(b.series[0].values[4..].iter().all(Option::is_none));
        assert!(b.series[1].values[4..].iter().all(Option::is_some));
        let svg = svg(c).unwrap();
        assert!(svg.contains("Transaction rate (k transactions/s)"), "{svg}");
        // Pairs vary: transactions against pairs, a line per test, named as the bars are.
        let lines = cs
            .iter()
            .find(|c| c.title == "net.transactions: Transaction rate vs pairs")
            .expect("the scaling chart");
        let Kind::Lines(l) = &lines.kind else {
            panic!("lines")
        };
        let names: Vec<&str> = l.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["TCP_RR 1 in flight", "TCP_CRR"], "{names:?}");
    }

    #[test]
    fn png_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_pngs(&synthetic_run(), dir.path()).unwrap();
        assert!(!files.is_empty());
        for f in files {
            let bytes = std::fs::read(&f).unwrap();
            assert_eq!(&bytes[1..4], b"PNG", "{}", f.display());
        }
    }
}
