//! Exporters: every output format renders the same `RunResult`, behind one trait (as hyperfine's
//! exporters do), so the terminal table and the JSON file can never disagree.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hostbench_core::model::{Metric, Record, RunResult};
use hostbench_core::units::format_value;

/// Turns a run into bytes of one format.
pub trait Exporter {
    fn render(&self, run: &RunResult) -> anyhow::Result<String>;
}

/// The `hostbench/result/v1` JSON document.
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn render(&self, run: &RunResult) -> anyhow::Result<String> {
        Ok(serde_json::to_string_pretty(run)? + "\n")
    }
}

/// Aligned terminal tables, one per benchmark id, followed by the peak bases and warnings.
pub struct TableExporter;

impl Exporter for TableExporter {
    fn render(&self, run: &RunResult) -> anyhow::Result<String> {
        let mut out = String::new();
        let mut groups: Vec<(&str, Vec<&Record>)> = Vec::new();
        for r in &run.records {
            match groups.iter_mut().find(|(b, _)| *b == r.benchmark) {
                Some((_, v)) => v.push(r),
                None => groups.push((&r.benchmark, vec![r])),
            }
        }
        let mut bases: BTreeMap<String, usize> = BTreeMap::new();
        let mut basis_order: Vec<String> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        // Warnings that every record of a benchmark shares (no DRAM peak, …) are said once.
        let mut shared: Vec<(String, String, usize)> = Vec::new();
        for (bench, records) in groups {
            let unit = &records[0].unit;
            let better = match records[0].metric {
                Metric::Throughput => "higher is better",
                Metric::Latency => "lower is better",
            };
            writeln!(out, "\n{bench} ({unit}, {better}; k/M/G/T = 10^3/6/9/12)")?;
            let keys: Vec<String> = records[0].params.keys().cloned().collect();
            let with_ref = records.iter().any(|r| r.reference.is_some());
            let mut header: Vec<String> = keys.clone();
            header.extend(
                ["median", "mean ± stddev", "CV", "peak", "efficiency"]
                    .iter()
                    .map(|s| s.to_string()),
            );
            if with_ref {
                header.push("reference".into());
                header.push("ratio".into());
            }
            let mut rows = vec![header];
            for r in records {
                let mut row: Vec<String> = keys
                    .iter()
                    .map(|k| r.param(k).unwrap_or_default())
                    .collect();
                row.push(format_value(r.value, unit));
                row.push(format!(
                    "{} ± {}",
                    format_value(r.stats.mean, unit),
                    format_value(r.stats.stddev, unit)
                ));
                row.push(format!("{:.1} %", r.stats.cv * 100.0));
                row.push(match &r.peak {
                    Some(p) => {
                        let idx = *bases.entry(p.basis.clone()).or_insert_with(|| {
                            basis_order.push(p.basis.clone());
                            basis_order.len()
                        });
                        format!("{} [{idx}]", format_value(p.value, unit))
                    }
                    None => "—".into(),
                });
                row.push(
                    r.efficiency
                        .map_or("—".into(), |e| format!("{:.1} %", e * 100.0)),
                );
                if with_ref {
                    match &r.reference {
                        Some(rf) => {
                            row.push(format!(
                                "{} ({} {})",
                                format_value(rf.value, unit),
                                rf.tool,
                                rf.version
                            ));
                            row.push(format!("{:.3}", rf.ratio));
                        }
                        None => row.extend(["—".to_string(), "—".to_string()]),
                    }
                }
                for w in &r.warnings {
                    let count = run
                        .records
                        .iter()
                        .filter(|o| o.benchmark == r.benchmark && o.warnings.contains(w))
                        .count();
                    if count > 1 {
                        if !shared.iter().any(|(b, t, _)| *b == r.benchmark && t == w) {
                            shared.push((r.benchmark.clone(), w.clone(), count));
                        }
                    } else {
                        notes.push(format!("{} {}: {w}", r.benchmark, short_params(r)));
                    }
                }
                if let Some(extra) = extra_line(r) {
                    notes.push(extra);
                }
                rows.push(row);
            }
            write_aligned(&mut out, &rows)?;
        }
        if !basis_order.is_empty() {
            writeln!(out, "\nPeak basis:")?;
            for (i, b) in basis_order.iter().enumerate() {
                writeln!(out, "  [{}] {b}", i + 1)?;
            }
        }
        for (bench, w, count) in shared {
            notes.push(format!("{bench} ({count} records): {w}"));
        }
        if !notes.is_empty() {
            writeln!(out, "\nNotes:")?;
            for n in notes {
                writeln!(out, "  {n}")?;
            }
        }
        if !run.skipped.is_empty() {
            writeln!(out, "\nSkipped:")?;
            for s in &run.skipped {
                let params: Vec<String> = s
                    .params
                    .iter()
                    .map(|(k, v)| {
                        format!("{k}={}", v.as_str().map_or(v.to_string(), str::to_string))
                    })
                    .collect();
                writeln!(
                    out,
                    "  {} {} ({}): {}",
                    s.benchmark,
                    params.join(" "),
                    s.kind,
                    s.reason
                )?;
            }
        }
        Ok(out)
    }
}

fn short_params(r: &Record) -> String {
    r.params
        .iter()
        .map(|(k, _)| format!("{k}={}", r.param(k).unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Benchmark-specific facts worth a line (linpack's residual verdict).
fn extra_line(r: &Record) -> Option<String> {
    let residual = r.extra.get("residual")?.as_f64()?;
    let passed = r
        .extra
        .get("passed")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    Some(format!(
        "{} {}: scaled residual {residual:.3e} ({}, threshold 16); HPL-style, not HPL",
        r.benchmark,
        short_params(r),
        if passed { "PASSED" } else { "FAILED" }
    ))
}

fn write_aligned(out: &mut String, rows: &[Vec<String>]) -> std::fmt::Result {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = widths[c].saturating_sub(cell.chars().count());
            line.push_str(cell);
            if c + 1 < row.len() {
                line.push_str(&" ".repeat(pad + 2));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hostbench_core::model::{Host, Peak};
    use hostbench_core::{Case, Runner, RunnerConfig, Sample};

    fn sample_run() -> RunResult {
        let mut r = Runner::new(RunnerConfig::quiet(3), Host::default());
        let case = Case::new("cpu.flops", Metric::Throughput, "FLOP/s")
            .param("dtype", "f64")
            .param("threads", 2);
        let mut v = [9.7e10, 9.8e10, 9.9e10].into_iter();
        let mut rec = r
            .measure(&case, || Ok(Sample::new(v.next().unwrap_or(0.0))))
            .unwrap();
        rec.set_peak(Some(Peak {
            value: 1.0e11,
            basis: "2 cores x test".into(),
        }));
        r.commit(rec).unwrap();
        r.finish().unwrap()
    }

    #[test]
    fn table_and_json_come_from_the_same_records() {
        let run = sample_run();
        let table = TableExporter.render(&run).unwrap();
        assert!(table.contains("cpu.flops (FLOP/s"), "{table}");
        assert!(table.contains("98.0 GFLOP/s"), "{table}");
        assert!(table.contains("98.0 %"), "{table}");
        assert!(table.contains("[1] 2 cores x test"), "{table}");
        let json: serde_json::Value =
            serde_json::from_str(&JsonExporter.render(&run).unwrap()).unwrap();
        assert_eq!(json["records"][0]["value"], serde_json::json!(9.8e10));
        assert_eq!(json["schema"], "hostbench/result/v1");
    }
}
