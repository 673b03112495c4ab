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

//!
//! This file holds the chart model and the choice of charts; each kind's builder lives in its own
//! module (`figures`: scaling, working set, peaks, efficiency, ratios; `load`: loaded latency,
//! rate search, under load, transactions; `heatmap`), and the drawing in `draw` (issue 53).
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

mod draw;
mod figures;
mod heatmap;
mod load;
pub use draw::*;
use figures::*;
pub use heatmap::Heatmap;
use load::*;

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
