//! Helpers shared by the integration test files: run the real binary, parse its JSON, and check
//! the result contract and the one-line bad-input rule.
#![allow(dead_code)]

pub mod contend;

use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;

/// A directory `NAME-PID` in Cargo's scratch directory for integration tests, for what a test
/// binary makes once and shares through a static (a static is never dropped, so a temporary
/// directory would be left in /tmp); earlier processes' `NAME-*` directories are removed first.
pub fn shared_scratch(name: &str) -> std::path::PathBuf {
    let scratch = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let prefix = format!("{name}-");
    for e in std::fs::read_dir(scratch).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    let dir = scratch.join(format!("{prefix}{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    dir
}

/// The binary, with the history database pointed away from the user's data directory (a test
/// that cares about the database passes its own `--db`).
pub fn hostbench() -> Command {
    let mut cmd = Command::cargo_bin("hostbench").expect("binary built");
    cmd.env(
        "HOSTBENCH_DB",
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("tests-history.sqlite"),
    );
    cmd
}

/// Run `hostbench` with whitespace-separated `args` plus `extra`, require success.
pub fn run_ok(args: &str, extra: &[&std::ffi::OsStr]) -> Output {
    let out = hostbench()
        .args(args.split_whitespace())
        .args(extra)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Records that carry a reference tool's figure.
pub fn referenced(doc: &Value) -> Vec<&Value> {
    doc["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| !r["reference"].is_null())
        .collect()
}

/// Run `hostbench` with `args` and an empty PATH (every reference tool hidden), require exit 0
/// and return its JSON.
pub fn run_without_path(args: &str) -> Value {
    let empty = tempfile::tempdir().expect("tmp");
    let out = hostbench()
        .args(args.split_whitespace())
        .env("PATH", empty.path())
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(&out)
}

pub fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Fields DESIGN.md §2 names for every record.
pub fn assert_record_contract(r: &Value) {
    for key in [
        "benchmark",
        "params",
        "metric",
        "unit",
        "value",
        "stats",
        "samples",
        "peak",
        "efficiency",
        "reference",
        "warnings",
    ] {
        assert!(r.get(key).is_some(), "record lacks {key}: {r}");
    }
    for key in [
        "n", "mean", "median", "stddev", "min", "max", "cv", "ci95", "p50", "p99", "p999",
    ] {
        assert!(r["stats"].get(key).is_some(), "stats lack {key}: {r}");
    }
    let samples = r["samples"].as_array().expect("samples");
    assert_eq!(samples.len() as u64, r["stats"]["n"].as_u64().expect("n"));
    assert_eq!(r["value"], r["stats"]["median"]);
    assert!(r["value"].as_f64().expect("value") > 0.0);
}

pub fn assert_run_contract(doc: &Value) {
    assert_eq!(doc["schema"], "hostbench/result/v1");
    assert_eq!(doc["tool"]["name"], "hostbench");
    for key in [
        "hostname",
        "os",
        "kernel",
        "virtualization",
        "cpu",
        "memory",
        "numa_nodes",
    ] {
        assert!(doc["host"].get(key).is_some(), "host lacks {key}");
    }
    assert!(doc["started_at"]
        .as_str()
        .expect("started_at")
        .ends_with('Z'));
    assert!(doc["finished_at"].is_string());
}

/// Expect exit code 2 and a single-line error naming `needle`.
pub fn assert_usage_error(args: &[&str], needle: &str) {
    let out = hostbench().args(args).output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: stderr {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {err}"
    );
    assert!(err.contains(needle), "{args:?}: '{needle}' not in: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// The `run.json` of the one run directory `hostbench run --out DIR` made, checked against the
/// run contract.
pub fn only_run_json(out: &std::path::Path) -> Value {
    let run_dir = std::fs::read_dir(out)
        .expect("dir")
        .flatten()
        .next()
        .expect("a run directory");
    let doc: Value =
        serde_json::from_slice(&std::fs::read(run_dir.path().join("run.json")).expect("run.json"))
            .expect("json");
    assert_run_contract(&doc);
    doc
}

/// The records of one benchmark id in a result document.
pub fn records<'a>(doc: &'a Value, bench: &str) -> Vec<&'a Value> {
    doc["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["benchmark"] == bench)
        .collect()
}

/// The host inventory exactly as the binary reports it (`hostbench info --json`), so a test can
/// derive its expectations from this machine's caches and cores instead of assuming them.
pub fn reported_host() -> hostbench_core::model::Host {
    let out = run_ok("info --json", &[]);
    serde_json::from_value(json_of(&out)["host"].clone()).expect("host inventory")
}

/// The hierarchy level the binary should label a working set of `bytes` on `threads` threads
/// with, computed from the reported inventory by the same rule the binary uses.
pub fn expected_level(host: &hostbench_core::model::Host, bytes: u64, threads: usize) -> String {
    hostbench_mem::sizing::level_for(host, bytes, threads)
}

/// A working set (a whole number of `align` bytes, at least `floor`) that lies in DRAM on this
/// host: twice the sum of every last-level cache instance, so hosts with large L3s (hundreds of
/// MiB on current server parts) get a working set that really leaves the caches.
pub fn dram_size(host: &hostbench_core::model::Host, floor: u64, align: u64) -> u64 {
    let llc = hostbench_mem::sizing::llc_total(&host.cpu.caches);
    let size = (2 * llc).max(floor).div_ceil(align) * align;
    assert_eq!(
        expected_level(host, size, 1),
        "DRAM",
        "{size} B should be beyond every cache of this host"
    );
    size
}

/// Whether the tests run as root (namespaces, mounts and Slurm need it; CI always is).
/// `doc` validates against `hostbench schema KIND` (check, fleet-check, …).
pub fn assert_valid(kind: &str, doc: &Value) {
    let schema: Value = serde_json::from_slice(
        &hostbench()
            .args(["schema", kind])
            .output()
            .expect("schema")
            .stdout,
    )
    .expect("schema JSON");
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    assert!(
        validator.is_valid(doc),
        "{:?}",
        validator
            .iter_errors(doc)
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
    );
}

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Whether `tool` is an executable file on PATH.
pub fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}
