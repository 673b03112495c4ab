//! The HTML report's "Conditions" section: what the host did during each record (steal, other
//! processes, run-queue waits, cgroup throttling, clock, temperature, energy) with its
//! diagnosis, and a timeline of the readings over the run, so a low figure can be read beside
//! what was happening when it was measured.

use std::fmt::{self, Write as _};

use hostbench_core::model::Record;
use hostbench_core::RunResult;

use super::html::esc;
use crate::table::param_text;

/// One series of the timeline: its name, unit, and a value per record (None where unread).
struct Series {
    name: &'static str,
    unit: &'static str,
    points: Vec<Option<f64>>,
}

fn pct(x: Option<f64>) -> String {
    x.map_or("—".into(), |v| format!("{:.1} %", v * 100.0))
}

fn label(r: &Record) -> String {
    let params: Vec<String> = r.params.iter().map(|(k, v)| param_text(k, v)).collect();
    format!("{} {}", r.benchmark, params.join(" "))
}

/// Write the section, when any record carries conditions.
pub fn write(o: &mut String, run: &RunResult) -> fmt::Result {
    let recs: Vec<&Record> = run
        .records
        .iter()
        .filter(|r| r.conditions.is_some())
        .collect();
    if recs.is_empty() {
        return Ok(());
    }
    let diagnosed = recs.iter().filter(|r| !r.diagnosis.is_empty()).count();
    writeln!(
        o,
        "<section id=\"conditions\">\n<h2>Conditions and diagnoses</h2>\n<p class=\"common\">What \
         the host did during each record's measured samples. {diagnosed} of {} records fall short \
         or were disturbed and carry a diagnosis: its measured causes, largest first.</p>",
        recs.len()
    )?;
    timeline(o, &recs)?;
    writeln!(
        o,
        "<details class=\"conditions\"{}><summary>Each record's conditions</summary>",
        if diagnosed > 0 { " open" } else { "" }
    )?;
    writeln!(
        o,
        "<div class=\"scroll\"><table class=\"results conditions\">\n<thead><tr><th>record</th>\
         <th>CPUs</th><th>s</th><th>steal</th><th>other processes</th><th>the kernel</th>\
         <th title=\"of the time the measuring threads wanted a CPU, the share they waited for one: \
         for threads that sleep between I/O completions mostly the wait to run after each \
         wake-up (the completion's interrupt work, an idle vCPU resuming), not a neighbour\">run \
         queue</th>\
         <th>throttled</th><th>clock</th><th>°C</th><th>energy</th><th>diagnosis</th></tr></thead>\n<tbody>"
    )?;
    for r in &recs {
        let Some(c) = &r.conditions else { continue };
        let throttled = c.cgroup.as_ref().map_or("—".into(), |g| {
            if g.nr_throttled == 0 {
                "0".into()
            } else {
                format!("{} × ({:.2} s)", g.nr_throttled, g.throttled_s)
            }
        });
        let clock = c.clock_hz.as_ref().map_or("—".into(), |k| {
            if (k.end - k.start).abs() < 0.005 * k.start {
                format!("{:.2} GHz", k.start / 1e9)
            } else {
                format!("{:.2}→{:.2} GHz", k.start / 1e9, k.end / 1e9)
            }
        });
        // The busiest kernel threads, on hover: a kworker's name says which workqueue it served.
        let kernel_title = if c.kernel_threads.is_empty() {
            String::new()
        } else {
            let names: Vec<String> = c
                .kernel_threads
                .iter()
                .map(|t| format!("{} {:.0} %", t.name, t.share * 100.0))
                .collect();
            format!(" title=\"{}\"", esc(&names.join(", ")))
        };
        let diag: Vec<String> = r
            .diagnosis
            .iter()
            .map(|d| {
                if d.share > 0.0 {
                    format!("{} {:.0} %: {}", d.cause, d.share * 100.0, d.text)
                } else {
                    format!("{}: {}", d.cause, d.text)
                }
            })
            .collect();
        writeln!(
            o,
            "<tr{}><td>{}</td><td>{}</td><td class=\"num\">{:.2}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\"{}>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            if r.diagnosis.is_empty() { "" } else { " class=\"diagnosed\"" },
            esc(&label(r)),
            esc(&hostbench_core::conditions::cpu_list(&c.cpus)),
            c.seconds,
            pct(c.steal_share),
            pct(c.other_cpu_share),
            kernel_title,
            pct(c.kernel_share),
            pct(c.run_delay_share),
            esc(&throttled),
            esc(&clock),
            c.temperature_c.map_or("—".into(), |t| format!("{t:.0}")),
            c.energy_j.map_or("—".into(), |j| format!("{j:.1} J")),
            esc(&diag.join("; "))
        )?;
    }
    writeln!(o, "</tbody>\n</table></div>\n</details>")?;
    // The sources this host could not read, once (they are the same for every record).
    let mut missing: Vec<(String, String)> = Vec::new();
    for r in &recs {
        for (k, v) in r.conditions.iter().flat_map(|c| c.unavailable.iter()) {
            if !missing.iter().any(|(mk, _)| mk == k) {
                missing.push((k.clone(), v.clone()));
            }
        }
    }
    if !missing.is_empty() {
        writeln!(
            o,
            "<p class=\"common\">Not readable on this host:</p>\n<ul class=\"notes\">"
        )?;
        for (k, v) in missing {
            writeln!(o, "<li>{}: {}</li>", esc(&k), esc(&v))?;
        }
        writeln!(o, "</ul>")?;
    }
    writeln!(o, "</section>")
}

/// Small multiples over the records in run order: one strip per reading this host had.
fn timeline(o: &mut String, recs: &[&Record]) -> fmt::Result {
    let cond = |f: &dyn Fn(&hostbench_core::conditions::Conditions) -> Option<f64>| {
        recs.iter()
            .map(|r| r.conditions.as_ref().and_then(f))
            .collect::<Vec<_>>()
    };
    let all = [
        Series {
            name: "clock",
            unit: "GHz",
            points: cond(&|c| c.clock_hz.as_ref().map(|k| k.end / 1e9)),
        },
        Series {
            name: "steal",
            unit: "%",
            points: cond(&|c| c.steal_share.map(|s| s * 100.0)),
        },
        Series {
            name: "other processes",
            unit: "%",
            points: cond(&|c| c.other_cpu_share.map(|s| s * 100.0)),
        },
        Series {
            name: "temperature",
            unit: "°C",
            points: cond(&|c| c.temperature_c),
        },
        Series {
            name: "CPU package power",
            unit: "W",
            points: cond(&|c| c.energy_j.map(|j| j / c.seconds.max(1e-9))),
        },
        Series {
            name: "GPU power",
            unit: "W",
            points: cond(&|c| c.gpu.as_ref().and_then(|g| g.power_w)),
        },
    ];
    let series: Vec<&Series> = all
        .iter()
        .filter(|s| s.points.iter().flatten().count() >= 2)
        .collect();
    if series.is_empty() {
        return Ok(());
    }
    let (w, h, pad) = (900.0, 54.0, 6.0);
    writeln!(
        o,
        "<figure class=\"timeline\"><figcaption>Over the run, record by record ({} records)</figcaption>",
        recs.len()
    )?;
    for s in series {
        let vals: Vec<f64> = s.points.iter().flatten().copied().collect();
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let span = if hi > lo { hi - lo } else { 1.0 };
        let n = s.points.len().max(2) as f64 - 1.0;
        let mut path = String::new();
        let mut pen_up = true;
        for (i, p) in s.points.iter().enumerate() {
            match p {
                Some(v) => {
                    let x = pad + (w - 2.0 * pad) * i as f64 / n;
                    let y = h - pad - (h - 2.0 * pad) * (v - lo) / span;
                    let _ = write!(path, "{}{x:.1},{y:.1} ", if pen_up { "M" } else { "L" });
                    pen_up = false;
                }
                None => pen_up = true,
            }
        }
        writeln!(
            o,
            "<div class=\"strip\"><span class=\"strip-label\">{} ({}): {:.2}–{:.2}</span>\
             <svg viewBox=\"0 0 {w} {h}\" width=\"100%\" height=\"{h}\" role=\"img\" \
             aria-label=\"{} over the run\"><path d=\"{}\" fill=\"none\" stroke=\"#1f77b4\" \
             stroke-width=\"1.5\"/></svg></div>",
            esc(s.name),
            esc(s.unit),
            lo,
            hi,
            esc(s.name),
            path.trim_end()
        )?;
    }
    writeln!(o, "</figure>")
}

/// CSS for the section.
pub const STYLE: &str = "
#conditions, .card .cause { overflow-wrap: anywhere; }
.conditions tr.diagnosed td { background: #fff6e5; }
.timeline .strip { margin: 0.2em 0; } .timeline .strip-label { font-size: 0.85em; color: #555; }
";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::synthetic_run;
    use hostbench_core::conditions::diagnose::Diagnosis;
    use hostbench_core::conditions::{ClockSpan, Conditions, KernelThreadShare};

    #[test]
    fn each_record_shows_its_conditions_and_diagnosis_with_a_timeline() {
        let mut run = synthetic_run();
        for (i, r) in run.records.iter_mut().enumerate() {
            r.conditions = Some(Conditions {
                cpus: vec![0, 1],
                seconds: 1.0,
                steal_share: Some(0.01 * i as f64),
                clock_hz: Some(ClockSpan {
                    start: 3.0e9,
                    end: 3.0e9 + 1e7 * i as f64,
                    source: "test".into(),
                }),
                unavailable: [("energy".to_string(), "no RAPL here".to_string())]
                    .into_iter()
                    .collect(),
                ..Conditions::default()
            });
        }
        let c = run.records[1].conditions.as_mut().unwrap();
        c.other_cpu_share = Some(0.05);
        c.kernel_share = Some(0.04);
        c.kernel_threads = vec![KernelThreadShare {
            name: "kworker/1:2+dio/vda".into(),
            share: 0.03,
        }];
        run.records[0].diagnosis = vec![Diagnosis {
            cause: "steal".into(),
            share: 0.31,
            text: "steal 31 % of CPU time on CPUs 8–15".into(),
        }];
        let mut o = String::new();
        write(&mut o, &run).unwrap();
        assert!(o.contains("<h2>Conditions and diagnoses</h2>"));
        assert!(o.contains("steal 31 %: steal 31 % of CPU time on CPUs 8–15"));
        assert!(o.contains("class=\"diagnosed\""));
        assert!(o.contains("energy: no RAPL here"));
        // The kernel's part of the others' time, its threads named on hover.
        assert!(o.contains("<td class=\"num\" title=\"kworker/1:2+dio/vda 3 %\">4.0 %</td>"));
        // Clock and steal vary over the records: two strips, no temperature strip.
        assert_eq!(o.matches("<div class=\"strip\">").count(), 2);
        assert!(!o.contains("temperature ("));
        // A run without conditions (an old file) has no section at all.
        let mut o = String::new();
        write(&mut o, &synthetic_run()).unwrap();
        assert!(o.is_empty());
    }
}
