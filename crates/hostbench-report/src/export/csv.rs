//! `records.csv`: one row per record, one column per parameter (the union over all records, in
//! first-seen order, empty where a record lacks it), so a spreadsheet or pandas can filter by
//! any parameter. Numbers are in SI base units, unscaled, as in the JSON.

use hostbench_core::model::{Metric, RunResult};
use serde_json::Value;

use super::Exporter;
use crate::error::ReportError;
use crate::table::{reference_efficiency, subsystem};

pub struct CsvExporter;

const FIXED: [&str; 24] = [
    "mean",
    "stddev",
    "median",
    "min",
    "max",
    "cv",
    "n",
    "ci95_low",
    "ci95_high",
    "p50",
    "p99",
    "p999",
    "peak",
    "peak_basis",
    "efficiency",
    "reference_tool",
    "reference_version",
    "reference_value",
    "reference_ratio",
    "reference_efficiency",
    "samples",
    "warnings",
    "host",
    "started_at",
];

/// RFC 4180 quoting where needed.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(v: f64) -> String {
    format!("{v}")
}

fn opt(v: Option<f64>) -> String {
    v.map(num).unwrap_or_default()
}

impl Exporter for CsvExporter {
    fn file_name(&self) -> &'static str {
        "records.csv"
    }

    fn render(&self, run: &RunResult) -> Result<String, ReportError> {
        let mut keys: Vec<&str> = Vec::new();
        for r in &run.records {
            for k in r.params.keys() {
                if !keys.contains(&k.as_str()) {
                    keys.push(k);
                }
            }
        }
        let mut header: Vec<String> = ["subsystem", "benchmark"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        // A parameter named like a fixed column is prefixed so no column name repeats.
        let fixed_tail = ["metric", "unit", "value"];
        header.extend(keys.iter().map(|k| {
            if FIXED.contains(k) || fixed_tail.contains(k) || ["subsystem", "benchmark"].contains(k)
            {
                format!("param_{k}")
            } else {
                k.to_string()
            }
        }));
        header.extend(fixed_tail.iter().map(|s| s.to_string()));
        header.extend(FIXED.iter().map(|s| s.to_string()));
        let mut out = header
            .iter()
            .map(|h| field(h))
            .collect::<Vec<_>>()
            .join(",")
            + "\n";
        for r in &run.records {
            let mut row: Vec<String> =
                vec![subsystem(&r.benchmark).to_string(), r.benchmark.clone()];
            row.extend(keys.iter().map(|k| match r.params.get(*k) {
                None => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
            }));
            let metric = match r.metric {
                Metric::Throughput => "throughput",
                Metric::Latency => "latency",
            };
            let s = &r.stats;
            let rf = r.reference.as_ref();
            row.extend([
                metric.to_string(),
                r.unit.clone(),
                num(r.value),
                num(s.mean),
                num(s.stddev),
                num(s.median),
                num(s.min),
                num(s.max),
                num(s.cv),
                s.n.to_string(),
                num(s.ci95[0]),
                num(s.ci95[1]),
                opt(s.p50),
                opt(s.p99),
                opt(s.p999),
                opt(r.peak.as_ref().map(|p| p.value)),
                r.peak.as_ref().map(|p| p.basis.clone()).unwrap_or_default(),
                opt(r.efficiency),
                rf.map(|x| x.tool.clone()).unwrap_or_default(),
                rf.map(|x| x.version.clone()).unwrap_or_default(),
                opt(rf.map(|x| x.value)),
                opt(rf.map(|x| x.ratio)),
                opt(reference_efficiency(r)),
                r.samples
                    .iter()
                    .map(|v| num(*v))
                    .collect::<Vec<_>>()
                    .join(";"),
                r.warnings.join("; "),
                run.host.hostname.clone(),
                run.started_at.clone(),
            ]);
            out.push_str(&row.iter().map(|c| field(c)).collect::<Vec<_>>().join(","));
            out.push('\n');
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::synthetic_run;

    #[test]
    fn csv_snapshot() {
        insta::assert_snapshot!(CsvExporter.render(&synthetic_run()).unwrap());
    }

    #[test]
    fn every_row_has_every_column() {
        let text = CsvExporter.render(&synthetic_run()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let cols = lines[0].split(',').count();
        assert!(lines[0].starts_with("subsystem,benchmark,dtype,isa,threads"));
        for l in &lines[1..] {
            // No field of the fixture contains a comma inside quotes except warnings.
            if !l.contains('"') {
                assert_eq!(l.split(',').count(), cols, "{l}");
            }
        }
        assert_eq!(lines.len(), 1 + synthetic_run().records.len());
    }
}
