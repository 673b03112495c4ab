//! Charts of figures under load: latency beside memory traffic, the UDP rate search's offered
//! against delivered curve, round trips under a paced stream, and transactions. Split out of
//! `chart.rs` by chart kind (issue 53).

use super::*;

/// The extra field of a latency record that says how much memory traffic ran beside it (B/s).
pub(crate) const LOAD_EXTRA: &str = "bandwidth";
/// The parameter that throttles that traffic: a point on the curve per value, never a line.
pub(crate) const DELAY_KEY: &str = "delay";
/// The kind of that traffic: always in a line's name, so a lone curve still says it.
pub(crate) const TRAFFIC_KEY: &str = "traffic";

/// Latency against the bandwidth that ran beside it (Intel MLC's loaded-latency curve): one
/// line per remaining workload (traffic kind, threads, working set), points in bandwidth order,
/// each point's delay in its tooltip. Returns whether the benchmark is such a sweep (then its
/// scaling and working-set charts would be noise, even where no line has two points).
pub(crate) fn loaded_latency_charts(
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
pub(crate) fn tipped_series(
    bench: &str,
    name: &[String],
    points: Vec<((f64, f64, f64), String)>,
) -> Series {
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
pub(crate) fn search_curve_chart(
    prefix: &str,
    bench: &str,
    recs: &[&Record],
    out: &mut Vec<Chart>,
) {
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
pub(crate) const LOST_RING: f64 = 0.01;

/// A number in a record's `extra`, by path (`["rtt", "p99"]`).
pub(crate) fn extra_num(r: &Record, path: &[&str]) -> Option<f64> {
    let (first, rest) = path.split_first()?;
    let mut v = r.extra.get(*first)?;
    for k in rest {
        v = v.get(k)?;
    }
    v.as_f64().filter(|x| x.is_finite())
}

/// The load a latency-under-load record came to (bit/s): `extra.offered_bps`, else the asked
/// `load_bps` where it is a number.
pub(crate) fn offered(r: &Record) -> Option<f64> {
    extra_num(r, &["offered_bps"])
        .or_else(|| num(r, LOAD_KEY))
        .filter(|x| *x >= 0.0)
}

/// One latency-under-load point's four round trips: p50 and p99, corrected for coordinated
/// omission (timed from each message's due time) and not (from the actual send).
pub(crate) struct LoadPoint<'a> {
    pub(crate) record: &'a Record,
    pub(crate) x: f64,
    pub(crate) p50: f64,
    pub(crate) p99: Option<f64>,
    pub(crate) p50_uncorrected: Option<f64>,
    pub(crate) p99_uncorrected: Option<f64>,
    pub(crate) lost: f64,
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
pub(crate) fn under_load_charts(prefix: &str, bench: &str, recs: &[&Record], out: &mut Vec<Chart>) {
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
pub(crate) const TRANSACTIONS: &str = "transactions/s";

/// What a request/response mode does, for the legend (unknown modes are said as they are).
pub(crate) const MODES: [(&str, &str); 2] = [
    ("rr", "request/response (RR)"),
    ("crr", "connect, request/response, close (CRR)"),
];

/// Transactions per second, a bar per case: bars of one mode together and in its colour, each
/// named as netperf names the test, with its pairs and requests in flight
/// (`TCP_RR, 2 pairs × 16 in flight`).
pub(crate) fn transaction_charts(
    prefix: &str,
    bench: &str,
    recs: &[&Record],
    out: &mut Vec<Chart>,
) {
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
pub(crate) fn load_tip(r: &Record, bandwidth: f64) -> String {
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
