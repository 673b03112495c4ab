//! Output formats behind one trait (as hyperfine's exporters): terminal table, Markdown, CSV,
//! HTML with charts, OpenMetrics text for Prometheus, and the JSON document itself. All render the same `RunResult` (the tables
//! through one `table::Report`), so no two formats can disagree about a number.

pub(crate) mod cards;
mod conditions;
pub mod cost;
mod csv;
pub(crate) mod html;
mod markdown;
mod openmetrics;
pub(crate) mod summary;
mod terminal;

use std::path::{Path, PathBuf};

use hostbench_core::model::RunResult;

use crate::error::ReportError;

pub use self::csv::CsvExporter;
pub use self::html::HtmlExporter;
pub(crate) use self::html::{esc, STYLE};
pub(crate) use self::markdown::cell as md_cell;
pub use self::markdown::MarkdownExporter;
pub use self::openmetrics::{render_many as openmetrics_many, OpenMetricsExporter};
pub use self::summary::{headlines, SummaryExporter};
pub use self::terminal::TerminalExporter;

/// Turns a run into the text of one format.
pub trait Exporter {
    /// The file name this format gets in a results directory.
    fn file_name(&self) -> &'static str;
    fn render(&self, run: &RunResult) -> Result<String, ReportError>;
}

/// The `hostbench/result/v1` JSON document.
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn file_name(&self) -> &'static str {
        "run.json"
    }

    fn render(&self, run: &RunResult) -> Result<String, ReportError> {
        serde_json::to_string_pretty(run)
            .map(|s| s + "\n")
            .map_err(|e| ReportError::bad(format!("serialising the run: {e}")))
    }
}

/// Write `text` to `path` atomically (temporary file + rename), so a reader never sees half.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), ReportError> {
    hostbench_core::runner::write_bytes_atomic(path, text.as_bytes()).map_err(|e| match e {
        hostbench_core::BenchError::Io { path, source } => ReportError::io(path, source),
        other => ReportError::bad(other.to_string()),
    })
}

/// The report files of a results directory beside its `run.json`: records.csv, report.md and
/// report.html. Returns the paths written.
pub fn write_results_dir(run: &RunResult, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    write_results_dir_with(run, dir, &[])
}

/// `write_results_dir` with the headline figures' stored history on this host: report.html
/// gets a trend chart per benchmark.
pub fn write_results_dir_with(
    run: &RunResult,
    dir: &Path,
    trends: &[crate::chart::Trend],
) -> Result<Vec<PathBuf>, ReportError> {
    let exporters: [&dyn Exporter; 2] = [&CsvExporter, &MarkdownExporter];
    let mut written = Vec::new();
    for e in exporters {
        let path = dir.join(e.file_name());
        write_atomic(&path, &e.render(run)?)?;
        written.push(path);
    }
    let path = dir.join(HtmlExporter.file_name());
    write_atomic(&path, &html::render_with_trends(run, trends)?)?;
    written.push(path);
    Ok(written)
}

/// Rows as left-aligned columns separated by two spaces (terminal tables).
pub fn aligned<R: AsRef<[String]>>(rows: &[R]) -> String {
    let cols = rows.iter().map(|r| r.as_ref().len()).max().unwrap_or(0);
    let mut widths = vec![0usize; cols];
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r.as_ref()) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let r = r.as_ref();
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            line.push_str(c);
            if i + 1 < r.len() {
                line.push_str(&" ".repeat(widths[i] - c.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// One line about the host, for report headers.
pub(crate) fn host_line(run: &RunResult) -> String {
    let h = &run.host;
    let mut parts = vec![h.hostname.clone()];
    if !h.cpu.model.is_empty() {
        parts.push(h.cpu.model.clone());
    }
    if h.cpu.threads > 0 {
        parts.push(format!("{} cores / {} threads", h.cpu.cores, h.cpu.threads));
    }
    if h.memory.total_bytes > 0 {
        parts.push(format!(
            "{} RAM",
            crate::units::bytes(h.memory.total_bytes as f64)
        ));
    }
    if !h.os.is_empty() {
        parts.push(format!("{} ({})", h.os, h.kernel));
    }
    if !h.virtualization.is_empty() && h.virtualization != "none" {
        parts.push(format!("virtualization: {}", h.virtualization));
    }
    parts.join(", ")
}

/// `cpu.flops (FLOP/s, higher is better)`.
pub(crate) fn group_heading(g: &crate::table::Group<'_>) -> String {
    let better = match g.metric {
        hostbench_core::model::Metric::Throughput => "higher is better",
        hostbench_core::model::Metric::Latency => "lower is better",
    };
    format!("{} ({}, {better})", g.benchmark, g.unit)
}

/// How a run ended, for the reports' "Run: … to …" line: the finish time, or the signal that
/// stopped it (only what was measured before it is in the report).
pub(crate) fn run_end(run: &RunResult) -> String {
    match (&run.interrupted, &run.finished_at) {
        (Some(i), _) => format!(
            "{}, interrupted by {}: only the {} records measured before it",
            i.at,
            i.signal,
            run.records.len()
        ),
        (None, Some(f)) => f.clone(),
        (None, None) => "unfinished".into(),
    }
}

/// `gpu: no GPU or OpenCL device found (opencl: …; cuda: …)`.
pub(crate) fn not_applicable_line(n: &hostbench_core::model::NotApplicable) -> String {
    format!("{}: {}", n.subsystem, n.reason)
}

/// The heading of the list of subsystems a host does not have.
pub(crate) const NOT_APPLICABLE: &str = "Not on this host";

/// `gpu opencl 1 (NVIDIA H200): the same GPU as cuda 0, …`.
pub(crate) fn left_out_line(l: &hostbench_core::model::LeftOut) -> String {
    format!("{} {}: {}", l.subsystem, l.what, l.reason)
}

/// The heading of the list of what a run chose not to measure.
pub(crate) const LEFT_OUT: &str = "Left out";

/// `cpu.flops isa=avx512 threads=1 (unsupported): reason`.
pub(crate) fn skipped_line(s: &hostbench_core::model::Skipped) -> String {
    let params: Vec<String> = s
        .params
        .iter()
        .map(|(k, v)| crate::table::param_text(k, v))
        .collect();
    format!(
        "{} {} ({}): {}",
        s.benchmark,
        params.join(" "),
        s.kind,
        s.reason
    )
}
