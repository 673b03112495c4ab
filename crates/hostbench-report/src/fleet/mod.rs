//! Fleets: the directory `hostbench fleet run` fills from many nodes at once (`layout`), and the
//! fleet report made from it: the document (`doc`, `hostbench/fleet/v1`), read from the directory
//! by `build` with the headline figures of `figures` and the statistics of `stats`, and rendered
//! as a terminal or Markdown table (`text`) and an HTML page (`html`); `verdicts` is `fleet
//! check`'s table of node verdicts.

pub mod attribute;
mod build;
pub mod doc;
pub mod figures;
mod html;
pub mod layout;
pub mod stats;
mod text;
pub mod verdicts;

use std::path::PathBuf;

pub use build::{build, read_plan, read_status};
pub use doc::{fleet_schema, FleetDoc, FLEET_SCHEMA};
pub use html::render_html;
pub use stats::{FleetConfig, DEFAULT_OUTLIER};
pub use text::{render_markdown, render_terminal};

use crate::error::ReportError;
use crate::export::write_atomic;
use layout::FleetDir;

/// The fleet document as JSON text.
pub fn render_json(doc: &FleetDoc) -> Result<String, ReportError> {
    serde_json::to_string_pretty(doc)
        .map(|s| s + "\n")
        .map_err(|e| ReportError::bad(format!("serialising the fleet document: {e}")))
}

/// fleet.json, fleet.md and fleet.html in the fleet directory, each written atomically (a report
/// of a running fleet may be read while the next one is written). Returns the paths written.
pub fn write_reports(doc: &FleetDoc, dir: &FleetDir) -> Result<Vec<PathBuf>, ReportError> {
    let outputs = [
        (dir.report_json(), render_json(doc)?),
        (dir.report_md(), render_markdown(doc)),
        (dir.report_html(), render_html(doc)),
    ];
    let mut written = Vec::new();
    for (path, text) in outputs {
        write_atomic(&path, &text)?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::layout::{NotMeasured, Plan, Status, StatusFile, PLAN_SCHEMA};
    use super::*;
    use crate::testdata::synthetic_run;
    use hostbench_core::model::RunResult;

    fn write_json(path: &std::path::Path, v: &impl serde::Serialize) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
    }

    /// A node's run: the synthetic run with every figure times `factor`.
    fn node_run(factor: f64) -> RunResult {
        let mut run = synthetic_run();
        for r in &mut run.records {
            r.value *= factor;
        }
        run
    }

    /// Six nodes n1..n6 in a ring: n2 slow, n4 truncated, n5 skipped (no run), n6 ok by status
    /// but without a run; one node not measured; the pair n4->n5 failed.
    fn fixture(root: &std::path::Path) -> FleetDir {
        let dir = FleetDir::new(root);
        let nodes: Vec<String> = (1..=6).map(|i| format!("n{i}")).collect();
        let ring: Vec<(String, String)> = (0..6)
            .map(|i| (nodes[i].clone(), nodes[(i + 1) % 6].clone()))
            .collect();
        let plan = Plan {
            schema: PLAN_SCHEMA.into(),
            fleet_id: "f1".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            nodes: nodes.clone(),
            not_measured: vec![NotMeasured {
                node: "n7".into(),
                reason: "drained: bad DIMM".into(),
            }],
            net_pairs: "ring".into(),
            rounds: vec![
                ring.iter().step_by(2).cloned().collect(),
                ring.iter().skip(1).step_by(2).cloned().collect(),
            ],
            profile: "quick".into(),
            scale: 1.0,
            job_id: Some("42".into()),
            partition: None,
        };
        write_json(&dir.plan(), &plan);
        for (i, n) in nodes.iter().enumerate() {
            let status = match i {
                4 => StatusFile {
                    reason: Some("busy with job 7".into()),
                    ..StatusFile::new(Status::Skipped)
                },
                _ => StatusFile::new(Status::Ok),
            };
            write_json(&dir.node_status(n), &status);
            if i < 4 {
                let factor = if i == 1 { 0.5 } else { 1.0 + 0.001 * i as f64 };
                write_json(&dir.node_run(n), &node_run(factor));
            }
        }
        let full = std::fs::read_to_string(dir.node_run("n4")).unwrap();
        std::fs::write(dir.node_run("n4"), &full[..full.len() / 2]).unwrap();
        for (from, to) in &ring {
            if from == "n4" {
                write_json(
                    &dir.pair_status(from, to),
                    &StatusFile {
                        reason: Some("server on n5 never became ready".into()),
                        ..StatusFile::new(Status::Failed)
                    },
                );
                continue;
            }
            write_json(&dir.pair_status(from, to), &StatusFile::new(Status::Ok));
            write_json(&dir.pair_run(from, to), &synthetic_run());
        }
        dir
    }

    #[test]
    fn a_fleet_with_a_slow_a_truncated_and_a_missing_node() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = fixture(tmp.path());
        let doc = build(&dir, &FleetConfig::default()).unwrap();
        assert_eq!(doc.schema, FLEET_SCHEMA);
        let st: Vec<(&str, Status)> = doc
            .nodes
            .iter()
            .map(|n| (n.node.as_str(), n.status))
            .collect();
        assert_eq!(
            st,
            [
                ("n1", Status::Ok),
                ("n2", Status::Ok),
                ("n3", Status::Ok),
                ("n4", Status::Failed),
                ("n5", Status::Skipped),
                ("n6", Status::Failed)
            ]
        );
        let reason = |n: usize| doc.nodes[n].reason.clone().unwrap_or_default();
        assert!(
            reason(3).starts_with("run.json unreadable: nodes/n4/run.json: truncated JSON"),
            "{}",
            reason(3)
        );
        assert_eq!(reason(4), "busy with job 7");
        assert!(reason(5).contains("no run.json appeared in") && reason(5).contains("shares?"));
        assert_eq!(doc.nodes[0].run.as_deref(), Some("nodes/n1/run.json"));
        assert!(doc.nodes[5].run.is_none());
        assert_eq!(doc.not_measured.len(), 1);
        assert!(!doc.complete());

        let cpu = doc.figures.iter().find(|f| f.id == "cpu_fp64").unwrap();
        assert_eq!(cpu.summary.n, 3);
        assert_eq!(cpu.outliers.len(), 1);
        assert_eq!(cpu.outliers[0].node, "n2");
        assert!(cpu.outliers[0].worse);
        assert!(
            cpu.outliers[0]
                .why
                .starts_with("50.0 % below the fleet median"),
            "{}",
            cpu.outliers[0].why
        );
        // Latency halves on the "slow" node: better, and beyond no threshold on the bad side.
        let lat = doc.figures.iter().find(|f| f.id == "dram_latency").unwrap();
        assert!(!lat.higher_is_better);
        assert!(lat.outliers.iter().all(|o| !o.worse));
        // Absent on every node: omitted.
        assert!(doc.figures.iter().all(|f| f.id != "linpack"));

        // Ring of six, one pair failed: five pairs x (throughput, rtt).
        assert_eq!(doc.pairs.len(), 6);
        let failed: Vec<&str> = doc
            .pairs
            .iter()
            .filter(|p| p.status != Status::Ok)
            .map(|p| p.from.as_str())
            .collect();
        assert_eq!(failed, ["n4"]);
        assert_eq!(doc.net_matrix.len(), 10);
        assert!(doc
            .net_matrix
            .iter()
            .any(|e| e.from == "n1" && e.to == "n2" && e.metric == "rtt" && e.proto == "tcp"));
        let tcp = doc.figures.iter().find(|f| f.id == "net_tcp").unwrap();
        // Every node is in an ok pair, as client or server: each has a network figure.
        assert_eq!((tcp.summary.n, tcp.unit.as_str()), (6, "bit/s"));

        // The document reads back.
        let text = render_json(&doc).unwrap();
        let back: FleetDoc = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (back.nodes, back.pairs),
            (doc.nodes.clone(), doc.pairs.clone())
        );
        assert_eq!(back.figures.len(), doc.figures.len());
        // Every node is final (ok, failed or skipped): the fleet has finished.
        assert_eq!(doc.finished_at.as_deref(), Some("2025-01-02T03:09:05Z"));
    }

    /// The fleet: three nodes, c2's link at 200 Mbit/s both ways, every pair measured
    /// both ways (`all`). c2 is named the suspect, no healthy node is an outlier, the matrix
    /// holds both directions, and the reports say it.
    #[test]
    fn a_node_slow_both_ways_is_the_suspect_and_no_healthy_node_an_outlier() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = FleetDir::new(tmp.path());
        let nodes: Vec<String> = (1..=3).map(|i| format!("c{i}")).collect();
        let pairs: Vec<(String, String)> = vec![
            ("c1".into(), "c2".into()),
            ("c1".into(), "c3".into()),
            ("c2".into(), "c3".into()),
        ];
        let plan = Plan {
            schema: PLAN_SCHEMA.into(),
            fleet_id: "f2".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            nodes: nodes.clone(),
            not_measured: Vec::new(),
            net_pairs: "all".into(),
            rounds: pairs.iter().map(|p| vec![p.clone()]).collect(),
            profile: "quick".into(),
            scale: 1.0,
            job_id: None,
            partition: None,
        };
        write_json(&dir.plan(), &plan);
        for n in &nodes {
            write_json(&dir.node_status(n), &StatusFile::new(Status::Ok));
            write_json(&dir.node_run(n), &node_run(1.0));
        }
        let tput = |dir: &str, v: f64| {
            crate::testdata::record(
                "net.throughput",
                hostbench_core::model::Metric::Throughput,
                "bit/s",
                serde_json::json!({"proto": "tcp", "block_bytes": 131072, "streams": 1,
                                   "direction": dir, "target": "10.0.0.1"}),
                &[v],
            )
        };
        for (k, (from, to)) in pairs.iter().enumerate() {
            let slow = from == "c2" || to == "c2";
            let v = if slow { 1.91e8 } else { 18.27e9 } * (1.0 + 0.001 * k as f64);
            let mut run = RunResult::new(Default::default());
            run.records = vec![tput("send", v), tput("recv", v * 1.002)];
            run.finished_at = Some("2026-01-01T00:01:00Z".into());
            write_json(&dir.pair_status(from, to), &StatusFile::new(Status::Ok));
            write_json(&dir.pair_run(from, to), &run);
        }
        let doc = build(&dir, &FleetConfig::default()).unwrap();
        assert_eq!(doc.net_matrix.len(), 6, "both directions of three pairs");
        let tcp = doc.figures.iter().find(|f| f.id == "net_tcp").unwrap();
        let a = tcp.attribution.as_ref().expect("an attribution");
        let named: Vec<&str> = a.suspects.iter().map(|s| s.node.as_str()).collect();
        assert_eq!(named, ["c2"], "{a:?}");
        assert_eq!(a.suspects[0].role, "both");
        assert!(
            tcp.outliers.iter().all(|o| o.node == "c2" && o.worse),
            "{:?}",
            tcp.outliers
        );
        let text = render_terminal(&doc);
        assert!(
            text.contains("suspect: c2: all 4 flows, both ways,"),
            "{text}"
        );
        let html = render_html(&doc);
        assert!(html.contains("id=\"net-findings\"") && html.contains("suspect: c2"));
    }

    #[test]
    fn renderers_show_table_outliers_strip_charts_and_heatmaps() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = fixture(tmp.path());
        let doc = build(&dir, &FleetConfig::default()).unwrap();
        let term = render_terminal(&doc);
        assert!(term.contains("CPU fp64 peak (GFLOP/s)"), "{term}");
        assert!(term.contains("49.0 ▼"), "{term}");
        assert!(term.contains("drained: bad DIMM"), "{term}");
        assert!(term.contains("server on n5 never became ready"), "{term}");
        let md = render_markdown(&doc);
        assert!(md.starts_with("# hostbench fleet report: f1"));
        assert!(md.contains("| n2 | ok | 49.0 ▼ |"), "{md}");
        let html = render_html(&doc);
        for banned in ["<script", "<link", "src=\"http", "href=\"http"] {
            assert!(!html.contains(banned), "{banned}");
        }
        assert_eq!(
            html.matches("<figure class=\"chart strip\"").count(),
            doc.figures.len()
        );
        assert!(html.contains("id=\"heatmap-throughput\"") && html.contains("id=\"heatmap-rtt\""));
        assert!(
            html.contains("<title>n2: 49.0 GFLOP/s</title>"),
            "strip dot with the node name"
        );
        assert!(html.contains("<title>n1 → n2: "));
        assert!(
            html.contains("<h2>Outliers (3)</h2>"),
            "cpu, disk and the latency's better side"
        );
        let written = write_reports(&doc, &dir).unwrap();
        assert_eq!(written.len(), 3);
        assert!(written.iter().all(|p| p.is_file()));
    }

    #[test]
    fn not_a_fleet_directory_is_bad_input() {
        let tmp = tempfile::tempdir().unwrap();
        let e = build(&FleetDir::new(tmp.path()), &FleetConfig::default()).unwrap_err();
        assert!(e.is_bad_input());
        assert!(
            e.to_string()
                .ends_with("not a fleet directory (no plan.json)"),
            "{e}"
        );
        let e = build(
            &FleetDir::new(tmp.path().join("nope")),
            &FleetConfig::default(),
        )
        .unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().ends_with("not a directory"),
            "{e}"
        );
        std::fs::write(tmp.path().join("plan.json"), "{\"schema\": 1").unwrap();
        let e = build(&FleetDir::new(tmp.path()), &FleetConfig::default()).unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("not a fleet plan"),
            "{e}"
        );
        assert!(!e.to_string().contains('\n'));
    }

    #[test]
    fn a_running_node_reports_its_partial_records() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = FleetDir::new(tmp.path());
        let plan = Plan {
            schema: PLAN_SCHEMA.into(),
            fleet_id: "f2".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            nodes: vec!["a".into(), "b".into(), "../x".into()],
            not_measured: vec![],
            net_pairs: "none".into(),
            rounds: vec![],
            profile: "quick".into(),
            scale: 1.0,
            job_id: None,
            partition: None,
        };
        write_json(&dir.plan(), &plan);
        let mut run = node_run(1.0);
        run.finished_at = None;
        write_json(&dir.node_run("a"), &run);
        write_json(&dir.node_status("b"), &StatusFile::new(Status::Pending));
        let doc = build(&dir, &FleetConfig::default()).unwrap();
        assert_eq!(doc.nodes[0].status, Status::Running);
        assert_eq!(doc.nodes[1].status, Status::Pending);
        assert_eq!(doc.nodes[2].status, Status::Failed);
        assert!(doc.nodes[2]
            .reason
            .as_deref()
            .unwrap()
            .contains("invalid node name"));
        assert!(doc.finished_at.is_none());
        assert_eq!(
            doc.figures
                .iter()
                .find(|f| f.id == "cpu_fp64")
                .unwrap()
                .summary
                .n,
            1
        );
        assert!(render_html(&doc).contains("No network phase"));
    }
}
