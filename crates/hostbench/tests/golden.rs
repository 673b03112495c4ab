//! Golden re-render of a stored run (issue 53): the saved `quick-run-2vcpu.json` read back and
//! written again as JSON, Markdown, CSV, OpenMetrics, HTML, the terminal tables and the
//! one-screen summary must equal, byte
//! for byte, the outputs stored in `tests/data/golden/` from the code before the result schema
//! was moved. A refactor of the model, conditions or diagnosis that changes any output fails here.
//! `HOSTBENCH_BLESS=1` rewrites the stored outputs (only for a deliberate, reviewed change).

mod common;

use std::path::{Path, PathBuf};

use common::run_ok;
use hostbench_core::model::RunResult;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// Compare `got` with the stored golden `name`, or store it when blessing.
fn golden(name: &str, got: &[u8]) {
    let path = data().join("golden").join(name);
    if std::env::var_os("HOSTBENCH_BLESS").is_some() {
        std::fs::write(&path, got).expect("write golden");
        return;
    }
    let want = std::fs::read(&path).expect("golden file");
    assert!(
        want == got,
        "{name} differs from {}:\n--- want\n{}\n--- got\n{}",
        path.display(),
        String::from_utf8_lossy(&want),
        String::from_utf8_lossy(got)
    );
}

#[test]
fn stored_run_rerenders_identically() {
    let file = data().join("quick-run-2vcpu.json");
    let text = std::fs::read_to_string(&file).expect("fixture");
    let run: RunResult = serde_json::from_str(&text).expect("parse fixture");
    let json = serde_json::to_string_pretty(&run).expect("json");
    golden("run.json", json.as_bytes());
    let f = file.to_str().expect("utf-8 path");
    for (name, flag) in [
        ("report.md", "--md"),
        ("records.csv", "--csv"),
        ("metrics.txt", "--openmetrics"),
    ] {
        let out = run_ok(&format!("report {f} --quiet {flag} -"), &[]);
        golden(name, &out.stdout);
    }
    let table = run_ok(&format!("report {f}"), &[]);
    golden("tables.txt", &table.stdout);
    // The one-screen summary reads the stored diagnosis and (today) the inference's trigger.
    use hostbench_report::Exporter;
    let summary = hostbench_report::SummaryExporter::new(100)
        .render(&run)
        .expect("summary");
    golden("summary.txt", summary.as_bytes());
    let html = run_ok(&format!("report {f} --quiet --html -"), &[]);
    golden("report.html", &html.stdout);
}
