//! Runs side by side (`hostbench report a.json b.json …`): the same host before and after a
//! change, or several hosts, in one page.
//!
//! How: every run gets a short label (its host name, or where two runs share a host, its results
//! directory), and a merged run carries every record with one more parameter, `run` = label. The
//! chart code already draws one line per value of a varying parameter, so the merged run's charts
//! overlay the runs without knowing about them. Beside that, one table per figure across the runs
//! with the ratio of each run to the first (above 1 is better, for rates and times alike, as the
//! reference column's ratio).

use std::fmt::Write as _;
use std::path::Path;

use hostbench_core::model::{Metric, Record, RunResult};
use serde_json::Value;

use crate::compare::identity;
use crate::error::ReportError;
use crate::export::html::{esc, STYLE};
use crate::export::summary::all_headlines;
use crate::table::{param_text, short_name};
use crate::units::human;
use crate::{chart, export};

/// Runs one page can hold side by side (one line colour each).
pub const MAX_RUNS: usize = 8;

/// The parameter the merged run adds to every record.
pub const RUN_KEY: &str = "run";

/// Runs with their labels, in the order given.
pub struct SideBySide {
    pub runs: Vec<(String, RunResult)>,
}

impl SideBySide {
    /// Label the runs read from `paths`: the host name where it is unique among them, else the
    /// results directory's name (`<UTC time>-<host>`) or the file's, made unique with `#n`.
    pub fn new(runs: Vec<(&Path, RunResult)>) -> Result<Self, ReportError> {
        if runs.len() < 2 || runs.len() > MAX_RUNS {
            return Err(ReportError::bad(format!(
                "side by side takes 2 to {MAX_RUNS} runs, got {}",
                runs.len()
            )));
        }
        let hosts: Vec<&str> = runs.iter().map(|(_, r)| r.host.hostname.as_str()).collect();
        let mut labels: Vec<String> = Vec::new();
        for (path, run) in &runs {
            let host = run.host.hostname.as_str();
            let mut label = if hosts.iter().filter(|h| **h == host).count() == 1 {
                host.to_string()
            } else {
                let named = if path.file_name().is_some_and(|n| n == "run.json") {
                    path.parent().and_then(Path::file_name)
                } else {
                    path.file_stem()
                };
                named.map_or_else(|| host.to_string(), |n| n.to_string_lossy().into_owned())
            };
            let base = label.clone();
            let mut n = 2;
            while labels.contains(&label) {
                label = format!("{base} #{n}");
                n += 1;
            }
            labels.push(label);
        }
        Ok(Self {
            runs: labels
                .into_iter()
                .zip(runs.into_iter().map(|(_, r)| r))
                .collect(),
        })
    }

    /// One run holding every run's records, each with `run` = its label (for charts and CSV).
    pub fn merged(&self) -> RunResult {
        let mut out = self.runs[0].1.clone();
        out.records = self
            .runs
            .iter()
            .flat_map(|(label, run)| {
                run.records.iter().map(move |r| {
                    let mut r = r.clone();
                    r.params
                        .insert(RUN_KEY.into(), Value::String(label.clone()));
                    r
                })
            })
            .collect();
        out.skipped = Vec::new();
        out.not_applicable = Vec::new();
        out
    }

    /// Every figure of the first run that another run also has (by benchmark and parameters),
    /// or only the first run's headlines that another run also has.
    pub fn rows(&self, headlines_only: bool) -> Vec<Row<'_>> {
        let first = &self.runs[0].1;
        let picked: Vec<&Record> = if headlines_only {
            all_headlines(first).into_iter().map(|h| h.record).collect()
        } else {
            first.records.iter().collect()
        };
        let others: Vec<Vec<(String, &Record)>> = self.runs[1..]
            .iter()
            .map(|(_, run)| run.records.iter().map(|r| (identity(r), r)).collect())
            .collect();
        picked
            .into_iter()
            .filter_map(|a| {
                let id = identity(a);
                let mut values = vec![Some(a.value)];
                for o in &others {
                    values.push(o.iter().find(|(i, _)| *i == id).map(|(_, r)| r.value));
                }
                values[1..]
                    .iter()
                    .any(Option::is_some)
                    .then_some(Row { record: a, values })
            })
            .collect()
    }
}

/// One figure across the runs.
pub struct Row<'a> {
    /// The first run's record (its benchmark, parameters, unit and metric).
    pub record: &'a Record,
    /// Each run's value, `None` where a run lacks the figure.
    pub values: Vec<Option<f64>>,
}

impl Row<'_> {
    /// What the row is: benchmark and parameters.
    pub fn label(&self) -> String {
        let params: Vec<String> = self
            .record
            .params
            .iter()
            .map(|(k, v)| param_text(k, v))
            .collect();
        format!(
            "{} {}",
            short_name(&self.record.benchmark),
            params.join(" ")
        )
    }

    /// Run `i`'s figure against the first run's: above 1 is better (a higher rate or a lower
    /// time).
    pub fn ratio(&self, i: usize) -> Option<f64> {
        let (a, b) = (self.values[0]?, self.values[i]?);
        (a > 0.0 && b > 0.0).then(|| match self.record.metric {
            Metric::Throughput => b / a,
            Metric::Latency => a / b,
        })
    }
}

fn cells(sbs: &SideBySide, row: &Row<'_>) -> Vec<String> {
    let mut c = vec![row.label()];
    for (i, v) in row.values.iter().enumerate() {
        c.push(v.map_or("—".into(), |v| human(v, &row.record.unit)));
        if i > 0 {
            c.push(row.ratio(i).map_or("—".into(), |x| format!("×{x:.2}")));
        }
    }
    debug_assert_eq!(c.len(), 2 * sbs.runs.len());
    c
}

fn header(sbs: &SideBySide) -> Vec<String> {
    let first = &sbs.runs[0].0;
    let mut h = vec!["figure".to_string()];
    for (i, (label, _)) in sbs.runs.iter().enumerate() {
        h.push(label.clone());
        if i > 0 {
            h.push(format!("vs {first}"));
        }
    }
    h
}

/// The comparison as aligned text (the terminal's view).
pub fn text(sbs: &SideBySide) -> String {
    let mut rows = vec![header(sbs)];
    rows.extend(sbs.rows(true).iter().map(|r| cells(sbs, r)));
    let mut out = format!(
        "\nSide by side: {} (ratio to {}: above 1 is better)\n\n",
        sbs.runs
            .iter()
            .map(|(l, _)| l.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        sbs.runs[0].0
    );
    out.push_str(&export::aligned(&rows));
    out
}

/// The comparison as Markdown: headlines first, then every common figure.
pub fn markdown(sbs: &SideBySide) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# hostbench: runs side by side\n");
    for (label, run) in &sbs.runs {
        let _ = writeln!(o, "- **{label}**: {}", export::host_line(run));
    }
    let _ = writeln!(
        o,
        "\nRatios are to {} (above 1 is better: a higher rate or a lower time).\n",
        sbs.runs[0].0
    );
    for (title, headlines) in [("Headlines", true), ("Every common figure", false)] {
        let _ = writeln!(o, "## {title}\n");
        let h = header(sbs);
        let _ = writeln!(o, "| {} |", h.join(" | "));
        let _ = writeln!(o, "|{}", "---|".repeat(h.len()));
        for r in sbs.rows(headlines) {
            let _ = writeln!(o, "| {} |", cells(sbs, &r).join(" | "));
        }
        o.push('\n');
    }
    o
}

/// The comparison as one self-contained HTML page: the runs' hosts, the headline table with its
/// ratio columns, the overlaid charts, then every common figure.
pub fn html(sbs: &SideBySide) -> Result<String, ReportError> {
    let merged = sbs.merged();
    let charts = chart::charts(&merged);
    let bodies = export::html::figure_bodies(&charts)?;
    render_html(sbs, &charts, &bodies)
        .map_err(|e| ReportError::bad(format!("formatting HTML: {e}")))
}

fn render_html(
    sbs: &SideBySide,
    charts: &[chart::Chart],
    bodies: &[String],
) -> Result<String, std::fmt::Error> {
    let mut o = String::new();
    let labels: Vec<&str> = sbs.runs.iter().map(|(l, _)| l.as_str()).collect();
    let title = format!("hostbench: {}", labels.join(" vs "));
    writeln!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}{}</style>\n</head>\n<body>\n<h1>{}</h1>",
        esc(&title),
        export::cards::STYLE,
        esc(&title)
    )?;
    writeln!(o, "<div class=\"cards\">")?;
    for (label, run) in &sbs.runs {
        writeln!(
            o,
            "<div class=\"card host\"><h2>{}</h2><p>{}</p><p class=\"meta\">{} to {}</p></div>",
            esc(label),
            esc(&export::host_line(run)),
            esc(&run.started_at),
            esc(run.finished_at.as_deref().unwrap_or("unfinished"))
        )?;
    }
    writeln!(o, "</div>")?;
    writeln!(
        o,
        "<p class=\"meta\">Ratios are to {} (above 1 is better: a higher rate or a lower time).</p>",
        esc(labels[0])
    )?;
    let table = |o: &mut String, headlines: bool| -> std::fmt::Result {
        writeln!(
            o,
            "<div class=\"scroll\"><table class=\"results side\" data-rows=\"{}\">\n<thead><tr>",
            if headlines { "headlines" } else { "all" }
        )?;
        for h in header(sbs) {
            write!(o, "<th>{}</th>", esc(&h))?;
        }
        writeln!(o, "</tr></thead>\n<tbody>")?;
        for r in sbs.rows(headlines) {
            write!(o, "<tr>")?;
            for (i, c) in cells(sbs, &r).iter().enumerate() {
                let class = if i > 0 { " class=\"num\"" } else { "" };
                write!(o, "<td{class}>{}</td>", esc(c))?;
            }
            writeln!(o, "</tr>")?;
        }
        writeln!(o, "</tbody>\n</table></div>")
    };
    writeln!(o, "<h2>Headlines</h2>")?;
    table(&mut o, true)?;
    writeln!(o, "<h2>Charts</h2>")?;
    for (c, body) in charts.iter().zip(bodies) {
        export::html::figure(&mut o, c, body)?;
    }
    writeln!(o, "<h2>Every common figure</h2>")?;
    table(&mut o, false)?;
    writeln!(o, "</body>\n</html>")?;
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::synthetic_run;

    fn two() -> SideBySide {
        let a = synthetic_run();
        let mut b = synthetic_run();
        b.host.hostname = "other".into();
        for r in &mut b.records {
            // The second host is twice as fast: double rates, half times.
            match r.metric {
                Metric::Throughput => r.value *= 2.0,
                Metric::Latency => r.value /= 2.0,
            }
        }
        b.records.pop();
        SideBySide::new(vec![(Path::new("a/run.json"), a), (Path::new("b.json"), b)]).unwrap()
    }

    #[test]
    fn labels_are_hosts_or_directories_and_unique() {
        let s = two();
        assert_eq!(s.runs[0].0, "testhost");
        assert_eq!(s.runs[1].0, "other");
        let same = SideBySide::new(vec![
            (Path::new("r/2026-01-01T00-host/run.json"), synthetic_run()),
            (Path::new("r/2026-01-02T00-host/run.json"), synthetic_run()),
            (Path::new("r/2026-01-02T00-host/run.json"), synthetic_run()),
        ])
        .unwrap();
        let labels: Vec<&str> = same.runs.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(
            labels,
            [
                "2026-01-01T00-host",
                "2026-01-02T00-host",
                "2026-01-02T00-host #2"
            ]
        );
        assert!(SideBySide::new(vec![(Path::new("a"), synthetic_run())]).is_err());
    }

    #[test]
    fn ratios_say_better_above_one_for_rates_and_times() {
        let s = two();
        let rows = s.rows(false);
        assert!(!rows.is_empty());
        for r in &rows {
            if let Some(x) = r.ratio(1) {
                assert!((x - 2.0).abs() < 1e-9, "{} {x}", r.label());
            }
        }
        // A figure the second run lacks is not a common figure.
        let last = identity(s.runs[0].1.records.last().unwrap());
        assert!(rows.iter().all(|r| identity(r.record) != last));
        assert_eq!(rows.len(), s.runs[0].1.records.len() - 1);
    }

    #[test]
    fn merged_charts_overlay_the_runs() {
        let s = two();
        let merged = s.merged();
        assert_eq!(
            merged.records.len(),
            s.runs.iter().map(|(_, r)| r.records.len()).sum::<usize>()
        );
        let overlaid = chart::charts(&merged).into_iter().any(|c| match c.kind {
            chart::Kind::Lines(l) => {
                l.series.iter().any(|x| x.name.contains("testhost"))
                    && l.series.iter().any(|x| x.name.contains("other"))
            }
            chart::Kind::Bars(_) | chart::Kind::Heatmap(_) => false,
        });
        assert!(overlaid, "a line chart with both runs");
        let page = html(&s).unwrap();
        assert!(page.contains("data-rows=\"headlines\"") && page.contains("×2.00"));
        // The overlaid line charts' legends are HTML beside the plot, naming both runs' lines.
        let legends: Vec<&str> = page.split("<div class=\"legend\">").skip(1).collect();
        assert!(!legends.is_empty(), "no HTML legend");
        assert!(legends
            .iter()
            .any(|l| l.contains("testhost") && l.contains("other")));
        assert!(markdown(&s).contains("| figure | testhost | other | vs testhost |"));
        assert!(text(&s).contains("×2.00"));
    }
}
