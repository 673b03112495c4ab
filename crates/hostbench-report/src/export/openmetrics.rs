//! The run's figures in the Prometheus / OpenMetrics text format, for node_exporter's textfile
//! collector (`--openmetrics /var/lib/node_exporter/textfile/hostbench.prom`) or a push gateway.
//!
//! One gauge family per benchmark id and unit, named the Prometheus way: `hostbench_`, the
//! benchmark id in snake case, then the base unit (`hostbench_mem_bandwidth_bytes_per_second`,
//! `hostbench_net_latency_seconds`). Every record is one sample, its median, labelled with the
//! host and every parameter of the record, so a dashboard can select `dtype="f64"` or
//! `threads="2"`. Where the record has a theoretical peak, `…_peak` and `…_efficiency_ratio`
//! families carry it beside the figure, and `hostbench_reference_ratio` the ratio to the
//! reference tool. Skipped cases are left out (a missing sample, not a zero).

use std::collections::BTreeMap;
use std::fmt::Write;

use hostbench_core::model::{Record, RunResult};

use super::Exporter;
use crate::error::ReportError;

pub struct OpenMetricsExporter;

/// The Prometheus base-unit suffix for a record unit.
fn unit_suffix(unit: &str) -> &'static str {
    match unit {
        "B/s" => "bytes_per_second",
        "bit/s" => "bits_per_second",
        "s" => "seconds",
        "FLOP/s" => "flops_per_second",
        "OP/s" => "ops_per_second",
        "IO/s" => "io_per_second",
        "transactions/s" => "transactions_per_second",
        _ => "value",
    }
}

/// A metric or label name: lower case, `[a-z0-9_]` only, not starting with a digit.
fn snake(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `{host="…",dtype="f64",…}` for a record, then any `extra` labels.
fn labels(run: &RunResult, r: &Record, extra: &[(&str, &str)]) -> String {
    let mut pairs = vec![format!("host=\"{}\"", escape(&run.host.hostname))];
    for (k, v) in &r.params {
        let text = match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        pairs.push(format!("{}=\"{}\"", snake(k), escape(&text)));
    }
    for (k, v) in extra {
        pairs.push(format!("{k}=\"{}\"", escape(v)));
    }
    format!("{{{}}}", pairs.join(","))
}

/// A sample value as the format wants it (`NaN`, `+Inf` spelled out).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// One gauge family: name, help, and its samples (labels, value).
struct Family {
    help: String,
    samples: Vec<(String, f64)>,
}

impl Exporter for OpenMetricsExporter {
    fn file_name(&self) -> &'static str {
        "hostbench.prom"
    }

    fn render(&self, run: &RunResult) -> Result<String, ReportError> {
        let mut families: BTreeMap<String, Family> = BTreeMap::new();
        let mut add = |name: String, help: String, labels: String, value: f64| {
            families
                .entry(name)
                .or_insert_with(|| Family {
                    help,
                    samples: Vec::new(),
                })
                .samples
                .push((labels, value));
        };
        for r in &run.records {
            let base = format!("hostbench_{}_{}", snake(&r.benchmark), unit_suffix(&r.unit));
            let l = labels(run, r, &[]);
            add(
                base.clone(),
                format!("{} median of the samples ({})", r.benchmark, r.unit),
                l.clone(),
                r.value,
            );
            if let Some(p) = &r.peak {
                add(
                    format!("{base}_peak"),
                    format!(
                        "{} theoretical peak ({}; the basis is in run.json)",
                        r.benchmark, r.unit
                    ),
                    l.clone(),
                    p.value,
                );
            }
            if let Some(e) = r.efficiency {
                add(
                    format!("hostbench_{}_efficiency_ratio", snake(&r.benchmark)),
                    format!("{} median over its theoretical peak", r.benchmark),
                    l.clone(),
                    e,
                );
            }
            if let Some(reference) = &r.reference {
                add(
                    "hostbench_reference_ratio".into(),
                    "hostbench's figure over the reference tool's, same parameters".into(),
                    labels(run, r, &[("tool", &reference.tool)]),
                    reference.ratio,
                );
            }
        }
        let mut out = String::new();
        for (name, f) in &families {
            let _ = writeln!(out, "# HELP {name} {}", f.help.replace('\n', " "));
            let _ = writeln!(out, "# TYPE {name} gauge");
            for (labels, v) in &f.samples {
                let _ = writeln!(out, "{name}{labels} {}", number(*v));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::synthetic_run;

    #[test]
    fn families_are_named_by_benchmark_and_base_unit() {
        let text = OpenMetricsExporter.render(&synthetic_run()).unwrap();
        assert!(
            text.contains("# TYPE hostbench_cpu_flops_flops_per_second gauge"),
            "{text}"
        );
        assert!(text.contains("hostbench_mem_bandwidth_bytes_per_second{host=\"testhost\""));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, rest) = line.split_once('{').expect("labels");
            assert!(name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'));
            let value = rest.rsplit_once(' ').expect("value").1;
            assert!(value.parse::<f64>().is_ok() || value == "NaN", "{line}");
        }
    }

    #[test]
    fn label_values_are_escaped_and_names_are_snake_case() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(snake("mem.bandwidth"), "mem_bandwidth");
        assert_eq!(snake("4k"), "_4k");
        assert_eq!(number(f64::INFINITY), "+Inf");
    }
}
