//! Charts of one run's figures: scaling with threads or block size, bandwidth over the working
//! set, the figure against its peak, efficiency and the ratio to a reference tool. Split out of
//! `chart.rs` by chart kind (issue 53).

use super::*;

pub(crate) fn scaling_charts(prefix: &str, bench: &str, recs: &[&Record], out: &mut Vec<Chart>) {
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

pub(crate) fn working_set_chart(prefix: &str, bench: &str, recs: &[&Record], out: &mut Vec<Chart>) {
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

pub(crate) fn versus_peak_charts(
    prefix: &str,
    bench: &str,
    recs: &[&Record],
    out: &mut Vec<Chart>,
) {
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
pub(crate) fn push_part(
    out: &mut Vec<Chart>,
    prefix: &str,
    title: &str,
    (i, n): (usize, usize),
    bars: Bars,
) {
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

pub(crate) fn efficiency_charts(prefix: &str, recs: &[&Record], out: &mut Vec<Chart>) {
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
pub(crate) fn ratio_charts(prefix: &str, recs: &[&Record], out: &mut Vec<Chart>) {
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
