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

/// The Prometheus base unit of a record unit: the family's suffix, and the factor from the
/// record's value to it. Prometheus counts data in bytes, never bits (promtool rejects a `bits`
/// name), so network throughput is exported in bytes per second; run.json keeps bit/s.
fn base_unit(unit: &str) -> (&'static str, f64) {
    match unit {
        "B/s" => ("bytes_per_second", 1.0),
        "bit/s" => ("bytes_per_second", 1.0 / 8.0),
        "s" => ("seconds", 1.0),
        "FLOP/s" => ("flops_per_second", 1.0),
        "OP/s" => ("ops_per_second", 1.0),
        "IO/s" => ("io_per_second", 1.0),
        "transactions/s" => ("transactions_per_second", 1.0),
        "Hz" => ("hertz", 1.0),
        _ => ("value", 1.0),
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
        Ok(render_runs(&[(None, run)]))
    }
}

/// Several saved runs in one exposition (`hostbench report a.json b.json --openmetrics F`): each
/// family once, every sample labelled with its own run's host and, where given, a `run` label
/// (the side-by-side label), so two runs of one host stay apart.
pub fn render_many(runs: &[(&str, &RunResult)]) -> String {
    let runs: Vec<(Option<&str>, &RunResult)> = runs
        .iter()
        .map(|(label, run)| (Some(*label), *run))
        .collect();
    render_runs(&runs)
}

fn render_runs(runs: &[(Option<&str>, &RunResult)]) -> String {
    {
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
        for (label, r, run) in runs
            .iter()
            .flat_map(|&(label, run)| run.records.iter().map(move |r| (label, r, run)))
        {
            let (suffix, factor) = base_unit(&r.unit);
            let base = format!("hostbench_{}_{suffix}", snake(&r.benchmark));
            let unit = suffix.replace('_', " ");
            let run_label: Vec<(&str, &str)> = label.map(|l| ("run", l)).into_iter().collect();
            let l = labels(run, r, &run_label);
            add(
                base.clone(),
                format!("{} median of the samples ({unit})", r.benchmark),
                l.clone(),
                r.value * factor,
            );
            if let Some(p) = &r.peak {
                add(
                    format!("{base}_peak"),
                    format!(
                        "{} theoretical peak ({unit}; the basis is in run.json)",
                        r.benchmark
                    ),
                    l.clone(),
                    p.value * factor,
                );
            }
            // Work per joule (= the rate per watt): the GPU's own energy (NVML) where the record
            // has it, else the CPU package's (RAPL).
            let per_joule = r.conditions.as_ref().and_then(|c| {
                c.gpu
                    .as_ref()
                    .and_then(|g| g.work_per_joule)
                    .or(c.work_per_joule)
            });
            if let Some(j) = per_joule {
                let per = suffix.strip_suffix("_per_second").unwrap_or(suffix);
                add(
                    format!("hostbench_{}_{per}_per_joule", snake(&r.benchmark)),
                    format!(
                        "{} work per joule of measured energy (= the rate per watt)",
                        r.benchmark
                    ),
                    l.clone(),
                    j * factor,
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
                let mut with_tool = run_label.clone();
                with_tool.push(("tool", &reference.tool));
                add(
                    "hostbench_reference_ratio".into(),
                    "hostbench's figure over the reference tool's, same parameters".into(),
                    labels(run, r, &with_tool),
                    reference.ratio,
                );
            }
        }
        for &(label, run) in runs {
            if let Some(h) = &run.host.health {
                health_families(run, label, h, &mut add);
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
        out
    }
}

/// The hardware counters (`host.health`): one family per source and counter,
/// `hostbench_health_<source>_<counter>{host,device}`, plus the findings per severity
/// (`hostbench_health_findings{severity}`) and each unreadable source as
/// `hostbench_health_source_readable{source} 0`, so an alert can tell "no errors" from "not read".
fn health_families(
    run: &RunResult,
    label: Option<&str>,
    h: &hostbench_core::model::Health,
    add: &mut impl FnMut(String, String, String, f64),
) {
    let base = |extra: &[(&str, &str)]| {
        let mut pairs = vec![format!("host=\"{}\"", escape(&run.host.hostname))];
        if let Some(l) = label {
            pairs.push(format!("run=\"{}\"", escape(l)));
        }
        for (k, v) in extra {
            pairs.push(format!("{k}=\"{}\"", escape(v)));
        }
        format!("{{{}}}", pairs.join(","))
    };
    for (id, device, key, v) in hostbench_core::health::numeric_values(h) {
        add(
            format!("hostbench_{}_{}", snake(id), snake(key)),
            format!("{id} {key}, as read when the run started"),
            base(&[("device", device)]),
            v,
        );
    }
    for (sev, n) in hostbench_core::health::tally(h) {
        add(
            "hostbench_health_findings".into(),
            "hardware findings by severity (fail, warn, info)".into(),
            base(&[("severity", sev.name())]),
            n as f64,
        );
    }
    let mut sources: Vec<&str> = h.readings.iter().map(|r| r.id.as_str()).collect();
    sources.dedup();
    for (id, readable) in sources
        .into_iter()
        .map(|s| (s, 1.0))
        .chain(h.unavailable.keys().map(|s| (s.as_str(), 0.0)))
    {
        add(
            "hostbench_health_source_readable".into(),
            "1 where the counter source was read, 0 where it could not be (the reason is in run.json)".into(),
            base(&[("source", id)]),
            readable,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::synthetic_run;

    #[test]
    fn health_counters_are_families_and_an_unread_source_reads_zero() {
        let mut run = synthetic_run();
        let mut r = hostbench_core::model::HealthReading {
            id: "health.edac".into(),
            device: "mc0".into(),
            label: None,
            values: Default::default(),
            findings: vec![hostbench_core::model::HealthFinding {
                severity: hostbench_core::model::Severity::Fail,
                text: "2 uncorrectable memory error(s) on mc0".into(),
            }],
        };
        r.values.insert("uncorrectable_errors".into(), 2.into());
        r.values.insert("mc_name".into(), "IMC#0".into());
        let mut h = hostbench_core::model::Health {
            readings: vec![r],
            ..Default::default()
        };
        h.unavailable
            .insert("health.gpu".into(), "NVML not found".into());
        run.host.health = Some(h);
        let text = OpenMetricsExporter.render(&run).expect("render");
        assert!(
            text.contains(
                "hostbench_health_edac_uncorrectable_errors{host=\"testhost\",device=\"mc0\"} 2\n"
            ),
            "{text}"
        );
        assert!(!text.contains("mc_name"), "strings are not samples");
        assert!(text.contains("hostbench_health_findings{host=\"testhost\",severity=\"fail\"} 1\n"));
        assert!(text.contains(
            "hostbench_health_source_readable{host=\"testhost\",source=\"health.edac\"} 1\n"
        ));
        assert!(text.contains(
            "hostbench_health_source_readable{host=\"testhost\",source=\"health.gpu\"} 0\n"
        ));
    }

    #[test]
    fn work_per_joule_is_exported_beside_the_rate_from_the_gpus_energy_first() {
        let mut run = synthetic_run();
        let r = &mut run.records[0];
        let c = r.conditions.get_or_insert_with(Default::default);
        c.work_per_joule = Some(1e9);
        let name = format!("hostbench_{}_", snake(&r.benchmark));
        let text = OpenMetricsExporter.render(&run).expect("render");
        let line = |t: &str| {
            t.lines()
                .find(|l| l.starts_with(&name) && l.contains("_per_joule{"))
                .map(str::to_string)
        };
        assert!(
            line(&text).expect("per joule").ends_with(" 1000000000"),
            "{text}"
        );
        let c = run.records[0].conditions.as_mut().expect("conditions");
        c.gpu = Some(hostbench_core::conditions::GpuConditions {
            work_per_joule: Some(5e10),
            ..Default::default()
        });
        let text = OpenMetricsExporter.render(&run).expect("render");
        assert!(
            line(&text).expect("per joule").ends_with(" 50000000000"),
            "{text}"
        );
    }

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

    /// Why promtool's `check metrics` (client_golang's promlint) would reject a gauge family
    /// name, if it would: the rules it applies to names, so a new unit or benchmark id cannot
    /// bring back a name like `…_bits_per_second` without this test failing.
    fn promlint(name: &str) -> Option<String> {
        const NON_BASE: [(&str, &str); 9] = [
            ("bits", "bytes"),
            ("percent", "ratio"),
            ("minutes", "seconds"),
            ("hours", "seconds"),
            ("days", "seconds"),
            ("weeks", "seconds"),
            ("months", "seconds"),
            ("years", "seconds"),
            ("fahrenheit", "celsius"),
        ];
        const BASE: [&str; 10] = [
            "amperes", "bytes", "celsius", "grams", "joules", "kelvin", "meters", "metres",
            "seconds", "volts",
        ];
        const PREFIXES: [&str; 17] = [
            "pico", "nano", "micro", "milli", "centi", "deci", "deca", "hecto", "kilo", "kila",
            "mega", "giga", "tera", "peta", "exa", "zetta", "yotta",
        ];
        const ABBREVIATIONS: [&str; 14] = [
            "s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d",
        ];
        let valid = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Some("not a lower-case metric name without reserved characters".into());
        }
        for part in name.split('_') {
            if let Some((_, base)) = NON_BASE.iter().find(|(u, _)| *u == part) {
                return Some(format!("use base unit \"{base}\" instead of \"{part}\""));
            }
            if PREFIXES.iter().any(|p| {
                part.strip_prefix(p)
                    .is_some_and(|rest| BASE.contains(&rest))
            }) {
                return Some(format!("use the base unit instead of \"{part}\""));
            }
            if ABBREVIATIONS.contains(&part) {
                return Some(format!(
                    "metric names should not contain abbreviated units: {part}"
                ));
            }
            if ["counter", "gauge", "histogram", "summary", "untyped"].contains(&part) {
                return Some(format!("metric name should not include type '{part}'"));
            }
        }
        ["_total", "_count", "_sum", "_bucket"]
            .iter()
            .find(|s| name.ends_with(*s))
            .map(|s| format!("a gauge should not end in {s}"))
    }

    #[test]
    fn every_family_name_follows_the_prometheus_naming_rules() {
        assert!(promlint("hostbench_net_throughput_bits_per_second").is_some());
        assert!(promlint("hostbench_net_latency_milliseconds").is_some());
        assert!(promlint("hostbench_net_latency_ms").is_some());
        let mut run = synthetic_run();
        // One record of every unit a subsystem writes, with a peak and a reference.
        for unit in [
            "B/s",
            "bit/s",
            "s",
            "FLOP/s",
            "OP/s",
            "IO/s",
            "transactions/s",
            "Hz",
        ] {
            let mut r = crate::testdata::record(
                "net.throughput",
                hostbench_core::model::Metric::Throughput,
                unit,
                serde_json::json!({"proto": "tcp"}),
                &[8e9],
            );
            r.set_peak(Some(hostbench_core::model::Peak {
                value: 1.6e10,
                basis: "link".into(),
            }));
            run.records.push(r);
        }
        let text = OpenMetricsExporter.render(&run).unwrap();
        let names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert!(names.len() > 10, "{names:?}");
        for name in names {
            assert_eq!(promlint(name), None, "{name}");
        }
        // Network throughput in bytes per second: 8 Gbit/s is 1 GB/s, its peak 2 GB/s.
        assert!(
            text.contains("hostbench_net_throughput_bytes_per_second{host=\"testhost\",proto=\"tcp\"} 1000000000\n"),
            "{text}"
        );
        assert!(text.contains(
            "hostbench_net_throughput_bytes_per_second_peak{host=\"testhost\",proto=\"tcp\"} 2000000000\n"
        ));
        assert!(!text.contains("bits"), "{text}");
    }

    #[test]
    fn label_values_are_escaped_and_names_are_snake_case() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(snake("mem.bandwidth"), "mem_bandwidth");
        assert_eq!(snake("4k"), "_4k");
        assert_eq!(number(f64::INFINITY), "+Inf");
    }
}
