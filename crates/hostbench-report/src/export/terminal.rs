//! Aligned plain-text tables for the terminal, in the classic layout.

use std::fmt::Write as _;

use hostbench_core::model::RunResult;

use super::{
    group_heading, left_out_line, not_applicable_line, skipped_line, Exporter, LEFT_OUT,
    NOT_APPLICABLE,
};
use crate::error::ReportError;
use crate::table::{Report, HEADER};

pub struct TerminalExporter;

impl Exporter for TerminalExporter {
    fn file_name(&self) -> &'static str {
        "report.txt"
    }

    fn render(&self, run: &RunResult) -> Result<String, ReportError> {
        render(run).map_err(|e| ReportError::bad(format!("formatting the table: {e}")))
    }
}

fn render(run: &RunResult) -> Result<String, std::fmt::Error> {
    let rep = Report::build(run);
    let mut out = String::new();
    let mut notes = Vec::new();
    for s in &rep.sections {
        writeln!(out, "\n== {} ==", s.title)?;
        for g in &s.groups {
            writeln!(out, "\n{}", group_heading(g))?;
            if !g.common.is_empty() {
                writeln!(out, "  {}", g.common.join(", "))?;
            }
            let mut rows: Vec<Vec<String>> = vec![HEADER.iter().map(|h| h.to_string()).collect()];
            rows.extend(g.rows.iter().map(|r| r.cells.to_vec()));
            out.push_str(&super::aligned(&rows));
        }
        notes.extend(s.notes.iter().cloned());
    }
    if !rep.bases.is_empty() {
        writeln!(out, "\nPeak basis:")?;
        for (i, b) in rep.bases.iter().enumerate() {
            writeln!(out, "  [{}] {b}", i + 1)?;
        }
    }
    if !notes.is_empty() {
        writeln!(out, "\nNotes:")?;
        for n in notes {
            writeln!(out, "  {n}")?;
        }
    }
    if !rep.not_applicable.is_empty() {
        writeln!(out, "\n{NOT_APPLICABLE}:")?;
        for n in rep.not_applicable {
            writeln!(out, "  {}", not_applicable_line(n))?;
        }
    }
    if !rep.left_out.is_empty() {
        writeln!(out, "\n{LEFT_OUT}:")?;
        for l in rep.left_out {
            writeln!(out, "  {}", left_out_line(l))?;
        }
    }
    if !rep.skipped.is_empty() {
        writeln!(out, "\nSkipped:")?;
        for s in rep.skipped {
            writeln!(out, "  {}", skipped_line(s))?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::synthetic_run;

    #[test]
    fn sections_tables_bases_and_skips() {
        let text = TerminalExporter.render(&synthetic_run()).unwrap();
        for needle in [
            "== CPU ==",
            "== Network ==",
            "== GPU ==",
            "== FPGA ==",
            "cpu.flops (FLOP/s, higher is better)",
            "Workload",
            "Reference efficiency %",
            "98.0 ± 1.00 GFLOP/s",
            "[1] 2 cores x 3.0 GHz x 16 FLOP/cycle",
            "avx512 not supported",
        ] {
            assert!(text.contains(needle), "{needle} missing:\n{text}");
        }
    }
}
