//! `hostbench fleet report` on synthetic fleet directories made from a real node run
//! (tests/data/fleet-node-run.json, a trimmed `hostbench run --profile quick`): a slow node found
//! as an outlier with its reason, a truncated node file flagged while the rest is reported (exit
//! 3), the network matrix, the HTML page's strip charts and heatmaps, and bad input (exit 2, one
//! line).

mod common;

use std::path::Path;

use common::*;
use hostbench_report::fleet::layout::{
    FleetDir, NotMeasured, Plan, Status, StatusFile, PLAN_SCHEMA,
};
use serde_json::Value;

const TEMPLATE: &str = include_str!("data/fleet-node-run.json");

fn write(path: &Path, v: &impl serde::Serialize) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, serde_json::to_string_pretty(v).expect("json")).expect("write");
}

/// The template run as `node`, every figure times `factor` (`cpu_factor` for the CPU records).
fn node_run(node: &str, factor: f64, cpu_factor: f64) -> Value {
    let mut run: Value = serde_json::from_str(TEMPLATE).expect("template");
    run["host"]["hostname"] = Value::from(node);
    for r in run["records"].as_array_mut().expect("records") {
        let f = if r["benchmark"]
            .as_str()
            .is_some_and(|b| b.starts_with("cpu."))
        {
            cpu_factor
        } else {
            factor
        };
        let v = r["value"].as_f64().expect("value");
        r["value"] = Value::from(v * f);
    }
    run
}

/// `net client` on `from` against `to`: the template's network records.
fn pair_run(from: &str, to: &str) -> Value {
    let mut run: Value = serde_json::from_str(TEMPLATE).expect("template");
    run["host"]["hostname"] = Value::from(from);
    let recs: Vec<Value> = run["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| {
            r["benchmark"]
                .as_str()
                .is_some_and(|b| b.starts_with("net."))
        })
        .cloned()
        .map(|mut r| {
            r["params"]["target"] = Value::from(to);
            r
        })
        .collect();
    run["records"] = Value::from(recs);
    run
}

fn plan(nodes: &[String], rounds: Vec<Vec<(String, String)>>, pairs: &str) -> Plan {
    Plan {
        schema: PLAN_SCHEMA.into(),
        fleet_id: "20260101T000000Z-4242".into(),
        created_at: "2026-01-01T00:00:00Z".into(),
        nodes: nodes.to_vec(),
        not_measured: vec![],
        net_pairs: pairs.into(),
        rounds,
        profile: "quick".into(),
        scale: 1.0,
        job_id: Some("4242".into()),
        partition: Some("batch".into()),
    }
}

/// Eight nodes in a ring: node03's CPU at 60 % of the others, node05's run.json truncated,
/// node07 skipped (busy), node09 not measured; the pair node05 -> node06 failed.
fn troubled_fleet(root: &Path) -> FleetDir {
    let dir = FleetDir::new(root);
    let nodes: Vec<String> = (1..=8).map(|i| format!("node{i:02}")).collect();
    let ring: Vec<(String, String)> = (0..8)
        .map(|i| (nodes[i].clone(), nodes[(i + 1) % 8].clone()))
        .collect();
    let rounds = vec![
        ring.iter().step_by(2).cloned().collect(),
        ring.iter().skip(1).step_by(2).cloned().collect(),
    ];
    let mut p = plan(&nodes, rounds, "ring");
    p.not_measured.push(NotMeasured {
        node: "node09".into(),
        reason: "drained: memory errors".into(),
    });
    write(&dir.plan(), &p);
    for (i, n) in nodes.iter().enumerate() {
        if n == "node07" {
            let s = StatusFile {
                reason: Some("busy with job 977 (--busy skip)".into()),
                ..StatusFile::new(Status::Skipped)
            };
            write(&dir.node_status(n), &s);
            continue;
        }
        write(&dir.node_status(n), &StatusFile::new(Status::Ok));
        let jitter = 1.0 + 0.003 * (i % 3) as f64;
        let cpu = if n == "node03" { 0.6 } else { jitter };
        write(&dir.node_run(n), &node_run(n, jitter, cpu));
    }
    let full = std::fs::read_to_string(dir.node_run("node05")).expect("read");
    std::fs::write(dir.node_run("node05"), &full[..full.len() / 3]).expect("truncate");
    for (from, to) in &ring {
        if from == "node05" {
            let s = StatusFile {
                reason: Some("server on node06 never became ready".into()),
                ..StatusFile::new(Status::Failed)
            };
            write(&dir.pair_status(from, to), &s);
            continue;
        }
        write(&dir.pair_status(from, to), &StatusFile::new(Status::Ok));
        write(&dir.pair_run(from, to), &pair_run(from, to));
    }
    dir
}

fn figure<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["figures"]
        .as_array()
        .expect("figures")
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("figure {id} in {doc}"))
}

#[test]
fn a_troubled_fleet_is_reported_with_outliers_flagged_nodes_and_the_matrix() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = troubled_fleet(tmp.path());
    let out = hostbench()
        .args(["fleet", "report"])
        .arg(dir.root())
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Some nodes failed or were not measured, the rest reported: exit 3.
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(
            "Fleet 20260101T000000Z-4242: 8 nodes: 6 ok, 1 failed, 1 skipped; 1 not measured"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("CPU fp64 peak (GFLOP/s)"), "{stdout}");
    assert!(stdout.contains("▼"), "outlier marked: {stdout}");

    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.report_json()).expect("fleet.json"))
            .expect("fleet.json is JSON");
    assert_eq!(doc["schema"], "hostbench/fleet/v1");
    assert_eq!(doc["fleet_id"], "20260101T000000Z-4242");
    let status = |n: &str| {
        doc["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .find(|x| x["node"] == n)
            .cloned()
            .expect("node")
    };
    assert_eq!(status("node01")["status"], "ok");
    assert_eq!(status("node01")["run"], "nodes/node01/run.json");
    let n5 = status("node05");
    assert_eq!(n5["status"], "failed");
    let reason = n5["reason"].as_str().expect("reason");
    assert!(
        reason.starts_with("run.json unreadable: nodes/node05/run.json: truncated JSON"),
        "{reason}"
    );
    assert_eq!(status("node07")["status"], "skipped");
    assert_eq!(doc["not_measured"][0]["node"], "node09");

    // The slow CPU: an outlier of both CPU figures, with its reason.
    for id in ["cpu_fp64", "linpack"] {
        let f = figure(&doc, id);
        let outliers = f["outliers"].as_array().expect("outliers");
        assert_eq!(outliers.len(), 1, "{f}");
        assert_eq!(outliers[0]["node"], "node03");
        let why = outliers[0]["why"].as_str().expect("why");
        assert!(
            why.starts_with("40.") && why.contains("% below the fleet median"),
            "{why}"
        );
        assert_eq!(f["n"], 6, "node05 unreadable, node07 skipped");
        for k in ["benchmark", "params", "median", "min", "max", "spread"] {
            assert!(f.get(k).is_some(), "{k} in {f}");
        }
    }
    assert_eq!(figure(&doc, "dram_latency")["higher_is_better"], false);
    assert!(figure(&doc, "dram_triad")["outliers"]
        .as_array()
        .expect("o")
        .is_empty());

    // Seven of eight ring pairs measured, throughput and round trip each.
    let matrix = doc["net_matrix"].as_array().expect("matrix");
    assert_eq!(matrix.len(), 14);
    assert!(matrix.iter().any(|e| e["from"] == "node01"
        && e["to"] == "node02"
        && e["proto"] == "tcp"
        && e["metric"] == "throughput"
        && e["value"].as_f64().is_some_and(|v| v > 0.0)));
    assert!(matrix.iter().any(|e| e["metric"] == "rtt"));
    let failed_pairs: Vec<&Value> = doc["pairs"]
        .as_array()
        .expect("pairs")
        .iter()
        .filter(|p| p["status"] != "ok")
        .collect();
    assert_eq!(failed_pairs.len(), 1);
    assert_eq!(failed_pairs[0]["from"], "node05");

    let html = std::fs::read_to_string(dir.report_html()).expect("fleet.html");
    assert!(html.contains("id=\"node-table\""));
    assert!(html.contains("<figure class=\"chart strip\" id=\"strip-cpu_fp64\""));
    assert!(
        html.contains("<title>node03: "),
        "strip chart dots name the node"
    );
    assert!(html.contains("id=\"heatmap-throughput\"") && html.contains("id=\"heatmap-rtt\""));
    for banned in ["<script", "<link", "src=\"http", "href=\"http"] {
        assert!(!html.contains(banned), "{banned}");
    }
    let md = std::fs::read_to_string(dir.report_md()).expect("fleet.md");
    assert!(
        md.contains("drained: memory errors") && md.contains("busy with job 977"),
        "{md}"
    );
}

#[test]
fn json_to_stdout_and_other_targets() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = troubled_fleet(&tmp.path().join("f"));
    let md = tmp.path().join("elsewhere.md");
    let out = hostbench()
        .args(["fleet", "report", "--json", "-", "--outlier", "50%", "--md"])
        .arg(&md)
        .arg(dir.root())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(3));
    let doc = json_of(&out);
    assert_eq!(doc["outlier_threshold"], 0.5);
    // 40 % below is within a 50 % threshold: only the robust rule can still name node03.
    let why = figure(&doc, "cpu_fp64")["outliers"][0]["why"]
        .as_str()
        .unwrap_or("");
    assert!(!why.contains("% below"), "{why}");
    assert!(md.is_file());
    assert!(
        dir.report_html().is_file(),
        "unnamed targets keep their default"
    );
    assert!(!dir.report_json().exists(), "json went to stdout");
}

#[test]
fn a_healthy_fleet_exits_zero() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = FleetDir::new(tmp.path());
    let nodes: Vec<String> = (1..=3).map(|i| format!("n{i}")).collect();
    write(&dir.plan(), &plan(&nodes, vec![], "none"));
    for n in &nodes {
        write(&dir.node_status(n), &StatusFile::new(Status::Ok));
        write(&dir.node_run(n), &node_run(n, 1.0, 1.0));
    }
    let out = hostbench()
        .args(["fleet", "report", "-q"])
        .arg(dir.root())
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    assert!(
        dir.report_json().is_file() && dir.report_md().is_file() && dir.report_html().is_file()
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cases: [(Vec<String>, &str); 4] = [
        (
            vec![tmp.path().display().to_string()],
            "not a fleet directory (no plan.json)",
        ),
        (
            vec![tmp.path().join("absent").display().to_string()],
            "not a directory",
        ),
        (
            vec![
                "--outlier".into(),
                "ten".into(),
                tmp.path().display().to_string(),
            ],
            "--outlier: invalid percentage 'ten'",
        ),
        (
            vec!["--html".into(), "".into(), tmp.path().display().to_string()],
            "--html: empty file name",
        ),
    ];
    for (args, want) in cases {
        let out = hostbench()
            .args(["fleet", "report"])
            .args(&args)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    // A plan that is not JSON is bad input too.
    std::fs::write(tmp.path().join("plan.json"), "{\"schema\": \"hostb").expect("write");
    let out = hostbench()
        .args(["fleet", "report"])
        .arg(tmp.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a fleet plan"));
}

/// `hostbench schema fleet` is a valid JSON Schema that a real fleet document satisfies, and that
/// rejects one breaking the contract.
#[test]
fn fleet_documents_validate_against_the_published_schema() {
    let schema = json_of(&run_ok("schema fleet", &[]));
    assert_eq!(schema["$id"], "hostbench/fleet/v1");
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = troubled_fleet(&tmp.path().join("f"));
    let out = hostbench()
        .args(["fleet", "report", "--json", "-"])
        .arg(dir.root())
        .output()
        .expect("run");
    let doc = json_of(&out);
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let mut broken = doc.clone();
    broken.as_object_mut().expect("object").remove("nodes");
    assert!(!validator.is_valid(&broken));
    let mut renamed = doc;
    renamed["schema"] = Value::from("hostbench/result/v1");
    assert!(!validator.is_valid(&renamed));
}
