//! Snapshots (insta) of what a reader sees, each on a fixed input so it is the same on any host
//! (issue 53): the one-screen summary of the synthetic run with every subsystem, the HTML
//! report's conditions table of the stored 2-vCPU run, and `fleet report`'s terminal text of a
//! stored fleet document. The check's verdict text is snapshotted beside its renderer
//! (`commands/check/tests.rs`), which the binary keeps private. A layout change shows as a
//! snapshot diff to review; `cargo insta review` (or `INSTA_UPDATE=always`) accepts it.
//!
//! `data/fleet-report.json` is the `fleet.json` that `hostbench fleet report` wrote for the
//! troubled fleet of `fleet_report.rs` (node03's CPU at 60 %, node05's run.json truncated,
//! node07 skipped, node09 not measured, the pair node05 -> node06 failed) with node03's two
//! links at a third of the others, so every section of the report is there.

mod common;

use std::path::{Path, PathBuf};

use common::run_ok;
use hostbench_report::fleet::{render_terminal, FleetDoc};
use hostbench_report::Exporter;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[test]
fn the_summary_of_the_synthetic_run() {
    let run = hostbench_report::testdata::synthetic_run();
    let text = hostbench_report::SummaryExporter::new(100)
        .render(&run)
        .expect("summary");
    insta::assert_snapshot!("summary_synthetic_100", text);
}

/// The conditions section of the HTML report, without its timeline chart (the charts have their
/// own tests): the heading, the count of diagnosed records and the table, one row per record.
#[test]
fn the_conditions_table_of_a_stored_run() {
    let file = data("quick-run-2vcpu.json");
    let out = run_ok(&format!("report {} --quiet --html -", file.display()), &[]);
    let html = String::from_utf8(out.stdout).expect("utf-8 html");
    let start = html
        .find("<section id=\"conditions\">")
        .expect("a conditions section: every record of the fixture carries conditions");
    let end = start + html[start..].find("</section>").expect("section end") + "</section>".len();
    let section = &html[start..end];
    let chart_start = section
        .find("<figure class=\"timeline\">")
        .expect("timeline");
    let chart_end = chart_start
        + section[chart_start..]
            .find("</figure>")
            .expect("figure end");
    let table = format!(
        "{}{}",
        &section[..chart_start],
        &section[chart_end + "</figure>".len()..]
    );
    assert!(
        table.contains("<table class=\"results conditions\">"),
        "{table}"
    );
    insta::assert_snapshot!("conditions_table_2vcpu", table);
}

#[test]
fn the_fleet_report_text_of_a_stored_fleet() {
    let text = std::fs::read_to_string(data("fleet-report.json")).expect("fixture");
    let doc: FleetDoc = serde_json::from_str(&text).expect("a hostbench/fleet/v1 document");
    insta::assert_snapshot!("fleet_report_troubled", render_terminal(&doc));
}
