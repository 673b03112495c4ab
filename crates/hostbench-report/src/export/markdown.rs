//! Markdown report (`report.md`): the classic tables per subsystem, readable as text and on any
//! forge.

use std::fmt::Write as _;

use hostbench_core::model::RunResult;

use super::{
    group_heading, host_line, left_out_line, not_applicable_line, skipped_line, Exporter, LEFT_OUT,
    NOT_APPLICABLE,
};
use crate::error::ReportError;
use crate::table::{Report, HEADER};

pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn file_name(&self) -> &'static str {
        "report.md"
    }

    fn render(&self, run: &RunResult) -> Result<String, ReportError> {
        render(run).map_err(|e| ReportError::bad(format!("formatting Markdown: {e}")))
    }
}

/// A table cell: pipes escaped, no line breaks.
pub(crate) fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn render(run: &RunResult) -> Result<String, std::fmt::Error> {
    let rep = Report::build(run);
    let mut out = String::new();
    writeln!(out, "# hostbench report: {}", cell(&run.host.hostname))?;
    writeln!(out)?;
    writeln!(out, "- Host: {}", cell(&host_line(run)))?;
    writeln!(
        out,
        "- Run: {} to {} ({} {})",
        run.started_at,
        super::run_end(run),
        run.tool.name,
        run.tool.version
    )?;
    writeln!(
        out,
        "- Units: rates in decimal prefixes (1 GB/s = 10^9 B/s), sizes in binary (1 MiB = 2^20 B)"
    )?;
    if let Some(n) = super::summary::energy_note(run) {
        writeln!(out, "- Energy: {}", cell(&n))?;
    }
    if let Some(n) = super::cost::price_note(run) {
        writeln!(out, "- Price: {}", cell(&n))?;
    }
    for s in &rep.sections {
        writeln!(out, "\n## {}", s.title)?;
        for g in &s.groups {
            writeln!(out, "\n### {}\n", group_heading(g))?;
            if !g.common.is_empty() {
                writeln!(out, "Common parameters: {}\n", cell(&g.common.join(", ")))?;
            }
            writeln!(out, "| {} |", HEADER.join(" | "))?;
            writeln!(out, "|{}", "---|".repeat(HEADER.len()))?;
            for r in &g.rows {
                let mut cells: Vec<String> = r.cells.iter().map(|c| cell(c)).collect();
                // The rate per watt beside the figure, where the energy was read.
                if let Some(w) = super::summary::per_watt(r.record) {
                    cells[3] = format!("{} ({})", cells[3], cell(&w));
                }
                if let Some(d) = super::cost::per_dollar(r.record) {
                    cells[3] = format!("{} ({})", cells[3], cell(&d));
                }
                writeln!(out, "| {} |", cells.join(" | "))?;
            }
        }
        if !s.notes.is_empty() {
            writeln!(out, "\nNotes:\n")?;
            for n in &s.notes {
                writeln!(out, "- {}", cell(n))?;
            }
        }
    }
    if !rep.bases.is_empty() {
        writeln!(out, "\n## Theoretical peaks\n")?;
        for (i, b) in rep.bases.iter().enumerate() {
            writeln!(out, "{}. {}", i + 1, cell(b))?;
        }
    }
    if !rep.not_applicable.is_empty() {
        writeln!(out, "\n## {NOT_APPLICABLE}\n")?;
        for n in rep.not_applicable {
            writeln!(out, "- {}", cell(&not_applicable_line(n)))?;
        }
    }
    if !rep.left_out.is_empty() {
        writeln!(out, "\n## {LEFT_OUT}\n")?;
        for l in rep.left_out {
            writeln!(out, "- {}", cell(&left_out_line(l)))?;
        }
    }
    if !rep.skipped.is_empty() {
        writeln!(out, "\n## Skipped\n")?;
        for s in rep.skipped {
            writeln!(out, "- {}", cell(&skipped_line(s)))?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::synthetic_run;

    #[test]
    fn markdown_snapshot() {
        insta::assert_snapshot!(MarkdownExporter.render(&synthetic_run()).unwrap());
    }
}
