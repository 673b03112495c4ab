//! `hostbench check` through the real binary: every verdict path with real conditions where the
//! machine allows them (an expectation written from this host's own run passes; a real cgroup
//! quota and a real busy neighbour make a short figure `unknown`, not `fail`; more CPUs than the
//! host has fail naming the count; a floor above any peak fails naming the figure), the counters'
//! faults from a fixture tree, each exit code, the verdict document against its schema, the
//! OpenMetrics gauges, and bad input (one line, exit 2, nothing measured).
//!
//! The cases measure the same CPUs, so they run one at a time.

mod common;

use std::path::{Path, PathBuf};

use common::contend::{serial, Busy, QuotaGroup};
use common::{hostbench, is_root};
use serde_json::Value;

fn check(args: &[&str], env: &[(&str, &Path)]) -> (Option<i32>, String, String) {
    let mut cmd = hostbench();
    cmd.arg("check").args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("hostbench check");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An expectation written by `--write-expect` from this host's own quick check: written once per
/// test binary, by the first case that needs it (holding `serial()`, so on a quiet host), and
/// shared; writing it takes three passes of the quick level, the longest step of these cases.
fn own_expectation() -> &'static Path {
    static WRITTEN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    WRITTEN.get_or_init(|| {
        // Named node.toml, as an operator's would be: the verdicts cite it by name.
        let file = common::shared_scratch("check-expect").join("node.toml");
        let (code, out, err) = check(
            &["--write-expect", file.to_str().expect("utf-8"), "--quiet"],
            &[],
        );
        assert!(matches!(code, Some(0 | 1 | 5)), "{code:?}: {out}{err}");
        let text = std::fs::read_to_string(&file).expect("written");
        assert!(
            text.contains("[expect]") && text.contains("[[expect.figure]]"),
            "{text}"
        );
        file
    })
}

fn doc(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("json")).expect("valid JSON")
}

/// `hostbench cpu`'s f64 record on every CPU, the case the quick probe measures, as a run.json
/// in `dir`.
fn base_run(dir: &Path) -> PathBuf {
    let run = dir.join("base.json");
    let threads = hostbench_core::affinity::allowed_cpus().len().to_string();
    let made = hostbench()
        .args([
            "cpu",
            "--dtype",
            "f64",
            "--threads",
            &threads,
            "--quiet",
            "--json",
        ])
        .arg(&run)
        .output()
        .expect("cpu");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    run
}

/// The CPU probe's check in a verdict document.
fn cpu_check(d: &Value) -> &Value {
    d["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| {
            c["id"]
                .as_str()
                .is_some_and(|i| i.starts_with("cpu.flops f64"))
        })
        .unwrap_or_else(|| panic!("the CPU probe is judged: {d}"))
}

/// The node is `unknown` for `cause`, and no check fails: the verdict of a short figure whose
/// cause is outside the node's hardware.
fn unknown_for(out: &str, cause: &str) {
    let line = first_line(out);
    assert!(line.starts_with("UNKNOWN "), "{line}");
    assert!(
        line.contains(&format!("({cause}): not the node's hardware")),
        "{line}"
    );
    assert!(
        !out.contains("\n  fail "),
        "nothing fails for {cause}: {out}"
    );
}

fn first_line(out: &str) -> &str {
    out.lines().next().unwrap_or("")
}

#[test]
fn its_own_expectation_passes_and_the_document_follows_its_schema() {
    let _one = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let expect = own_expectation();
    let json = dir.path().join("check.json");
    let prom = dir.path().join("check.prom");
    let (code, out, err) = check(
        &[
            "--expect",
            expect.to_str().expect("utf-8"),
            "--json",
            json.to_str().expect("utf-8"),
            "--openmetrics",
            prom.to_str().expect("utf-8"),
        ],
        &[],
    );
    // A figure that misses once and passes its retry is a warn (exit 0); one that misses twice
    // with a neighbour measured is unknown. A fail on the very host the file came from is the
    // false alarm this test exists to catch.
    assert_ne!(code, Some(1), "a false alarm: {out}{err}");
    let d = doc(&json);
    assert_eq!(d["schema"], "hostbench/check/v1");
    assert_eq!(d["level"], "quick");
    if code == Some(0) {
        assert!(first_line(&out).starts_with("OK "), "{out}");
        assert!(
            matches!(d["verdict"].as_str(), Some("pass" | "warn")),
            "{d}"
        );
    } else {
        assert_eq!(code, Some(5), "{out}{err}");
        assert!(first_line(&out).starts_with("UNKNOWN "), "{out}");
        assert!(
            first_line(&out).contains("not the node's hardware"),
            "{out}"
        );
    }
    let checks = d["checks"].as_array().expect("checks");
    for id in ["inventory.cpus", "inventory.memory", "inventory.cpu_model"] {
        let c = checks
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("{id}: {d}"));
        assert_eq!(c["verdict"], "pass", "{c}");
    }
    let cpu = cpu_check(&d);
    assert!(
        cpu["expected"]["source"]
            .as_str()
            .expect("source")
            .starts_with("expect node.toml:"),
        "{cpu}"
    );
    assert!(
        d["yardsticks"][0]
            .as_str()
            .expect("yardstick")
            .starts_with("expect "),
        "{d}"
    );

    // The document validates against `hostbench schema check`.
    common::assert_valid("check", &d);

    // One gauge per check and the node, and when it ran; no sample timestamps.
    let text = std::fs::read_to_string(&prom).expect("prom");
    let node = if code == Some(0) { 1 } else { 0 };
    assert!(
        text.contains(&format!("check=\"node\"}} {node}\n")),
        "{text}"
    );
    assert!(
        text.contains("hostbench_check_ok{host=") && text.contains("check=\"inventory.cpus\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("hostbench_check_last_run_timestamp_seconds{host="),
        "{text}"
    );
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (_, after) = line.rsplit_once('}').expect("labels");
        assert_eq!(
            after.split_whitespace().count(),
            1,
            "a sample timestamp: {line}"
        );
    }
}

#[test]
fn more_cpus_than_the_host_has_and_a_floor_above_any_peak_fail_naming_them() {
    let _one = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("big.toml");
    std::fs::write(
        &file,
        "[expect]\ncpus = 4096\n\n[[expect.figure]]\nbenchmark = \"cpu.flops\"\nparams = { dtype = \"f64\" }\nmin = 1e18\n",
    )
    .expect("write");
    // The CPU probe alone (the counters and the inventory are always read): the floor is on
    // its figure, and the other probes' seconds would test nothing more here.
    let (code, out, err) = check(
        &["--expect", file.to_str().expect("utf-8"), "--only", "cpu"],
        &[],
    );
    assert_eq!(code, Some(1), "{out}{err}");
    let line = first_line(&out);
    let cpus = hostbench_core::affinity::allowed_cpus().len();
    assert!(line.starts_with("FAIL inventory.cpus: "), "{line}");
    assert!(
        line.contains("logical CPUs online, expected 4096 (expect big.toml:2): missing CPUs"),
        "{line}"
    );
    assert!(cpus < 4096);
    // The floor: both tries below it, named with its file and line.
    assert!(
        line.contains("cpu.flops f64 ") && line.contains("(expect big.toml:4)"),
        "{line}"
    );
    let (code, out, _) = check(
        &[
            "--expect",
            file.to_str().expect("utf-8"),
            "--unknown-is",
            "ok",
            "--only",
            "cpu",
        ],
        &[],
    );
    assert_eq!(code, Some(1), "--unknown-is maps only unknown: {out}");
}

/// A fixture tree with an uncorrected DIMM error (`HOSTBENCH_HEALTH_ROOT`, the documented hook).
fn faulty_root(dir: &Path) -> PathBuf {
    let root = dir.join("root");
    let mc = root.join("sys/devices/system/edac/mc/mc0");
    std::fs::create_dir_all(mc.join("dimm2")).expect("mkdir");
    std::fs::write(mc.join("ce_count"), "0\n").expect("w");
    std::fs::write(mc.join("ue_count"), "1\n").expect("w");
    std::fs::write(mc.join("dimm2/dimm_ue_count"), "1\n").expect("w");
    std::fs::write(mc.join("dimm2/dimm_ce_count"), "0\n").expect("w");
    std::fs::write(mc.join("dimm2/dimm_label"), "CPU1_DIMM_C2\n").expect("w");
    root
}

#[test]
fn an_uncorrected_memory_error_fails_the_node_and_an_unreadable_required_source_is_unknown() {
    let _one = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = faulty_root(dir.path());
    // The counters decide these verdicts; the CPU probe alone stands for the figures.
    let (code, out, err) = check(
        &["--quiet", "--only", "cpu"],
        &[("HOSTBENCH_HEALTH_ROOT", &root)],
    );
    assert_eq!(code, Some(1), "{out}{err}");
    assert_eq!(
        out.lines().count(),
        1,
        "--quiet: the verdict line only: {out}"
    );
    assert!(
        out.starts_with("FAIL 1 uncorrectable memory error(s) on mc0"),
        "{out}"
    );

    // Nothing readable under an empty tree; the file requires EDAC: unknown, exit 5, or 1 / 0
    // as --unknown-is says.
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let file = dir.path().join("req.toml");
    std::fs::write(&file, "[expect]\nrequire = [\"health.edac\"]\n").expect("write");
    let f = file.to_str().expect("utf-8");
    let env = [("HOSTBENCH_HEALTH_ROOT", empty.as_path())];
    let with_floor = |extra: &[&str]| {
        let mut a = vec!["--expect", f, "--peak-share", "0.000001", "--only", "cpu"];
        a.extend_from_slice(extra);
        check(&a, &env)
    };
    let (code, out, err) = with_floor(&[]);
    assert_eq!(code, Some(5), "{out}{err}");
    assert!(
        first_line(&out).starts_with("UNKNOWN health.edac: not readable (")
            && out.contains("required by expect req.toml:2"),
        "{out}"
    );
    assert_eq!(with_floor(&["--unknown-is", "fail"]).0, Some(1));
    assert_eq!(with_floor(&["--unknown-is", "ok"]).0, Some(0));
}

#[test]
fn a_cpu_quota_makes_a_short_figure_unknown_not_fail() {
    let _one = serial();
    if !is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root: the quota test must run"
        );
        eprintln!("needs root: skipped");
        return;
    }
    let cpus = hostbench_core::affinity::allowed_cpus();
    if cpus.len() < 2 {
        eprintln!("needs 2 CPUs: skipped");
        return;
    }
    let expect = own_expectation();
    // A quarter of the CPUs the probe uses: far below the floor written without it.
    let group = QuotaGroup::new(cpus.len() as f64 / 4.0).expect("a cgroup with a CPU quota");
    let out = group.run(&["check", "--expect", expect.to_str().expect("utf-8")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(5),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    unknown_for(&text, "cgroup_quota");
}

#[test]
fn a_busy_neighbour_makes_a_short_figure_unknown_not_fail() {
    let _one = serial();
    let cpus = hostbench_core::affinity::allowed_cpus();
    if cpus.len() < 2 {
        eprintln!("needs 2 CPUs: skipped");
        return;
    }
    let expect = own_expectation();
    // Two busy loops on every CPU the probe uses: each of its threads gets a third of a CPU.
    let _busy: Vec<Busy> = cpus
        .iter()
        .flat_map(|&c| [Busy::on(c), Busy::on(c)])
        .collect();
    let (code, out, err) = check(&["--expect", expect.to_str().expect("utf-8")], &[]);
    assert_eq!(code, Some(5), "{out}{err}");
    unknown_for(&out, "cpu_contention");
}

#[test]
fn bad_input_is_one_line_and_exit_2_before_anything_is_measured() {
    let _one = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let typo = dir.path().join("typo.toml");
    std::fs::write(&typo, "[expect]\ncpus = 2\ncpuz = 4\n").expect("write");
    let malformed = dir.path().join("bad.toml");
    std::fs::write(&malformed, "[expect\ncpus = 2\n").expect("write");
    let bare = dir.path().join("bare.toml");
    std::fs::write(&bare, "[cpu]\nclock_hz = 3e9\n").expect("write");
    // A history with one stored run, so a missing id is the id's fault, not the database's.
    let db = dir.path().join("h.sqlite");
    let run = dir.path().join("run.json");
    let made = hostbench()
        .args("cpu --isa scalar --dtype f64 --threads 1 --ops 1e6 --repeat 1 --warmup 0 --quiet --json".split_whitespace())
        .arg(&run)
        .output()
        .expect("cpu");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let stored = hostbench()
        .args(["history", "import"])
        .arg(&run)
        .arg("--db")
        .arg(&db)
        .output()
        .expect("import");
    assert!(
        stored.status.success(),
        "{}",
        String::from_utf8_lossy(&stored.stderr)
    );
    let s = |p: &Path| p.to_str().expect("utf-8").to_string();
    for (args, needle) in [
        (
            vec!["--expect".into(), s(&typo)],
            "typo.toml: line 3: unknown field `cpuz`",
        ),
        (vec!["--expect".into(), s(&malformed)], "bad.toml: line 1"),
        (vec!["--expect".into(), s(&bare)], "no [expect] section"),
        (
            vec!["--expect".into(), s(&dir.path().join("none.toml"))],
            "none.toml: No such file",
        ),
        (
            vec!["--baseline".into(), "42".into(), "--db".into(), s(&db)],
            "unknown run id '42'",
        ),
        (
            vec![
                "--baseline".into(),
                "1".into(),
                "--db".into(),
                s(&dir.path().join("no.sqlite")),
            ],
            "no history database",
        ),
        (
            vec!["--baseline".into(), "last:0".into(), "--db".into(), s(&db)],
            "N must be a count of runs",
        ),
        (
            vec!["--baseline".into(), s(&dir.path().join("gone.json"))],
            "gone.json",
        ),
        (
            vec!["--peak-share".into(), "1.5".into()],
            "--peak-share: 1.5 is not in (0, 1]",
        ),
        (
            vec!["--tolerance".into(), "x".into()],
            "--tolerance: 'x' is not a number",
        ),
        (
            vec!["--json".into(), s(&dir.path().join("no/such/dir/c.json"))],
            "--json",
        ),
        (vec!["--level".into(), "forever".into()], "forever"),
        (
            vec!["--duration".into(), "4s".into()],
            "--duration 4s: only the long level has a soak",
        ),
        (
            vec![
                "--level".into(),
                "long".into(),
                "--duration".into(),
                "soon".into(),
            ],
            "--duration soon: not a duration",
        ),
        (
            vec!["--mem-share".into(), "0.1".into()],
            "--mem-share 0.1: only the long level has a soak",
        ),
        (
            vec![
                "--level".into(),
                "long".into(),
                "--mem-share".into(),
                "0.95".into(),
            ],
            "--mem-share: \"0.95\" is not a share above 0 and at most 0.9",
        ),
    ] {
        let (code, out, err) = check(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
        assert_eq!(code, Some(2), "{args:?}: {out}{err}");
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(err.contains(needle), "{args:?}: {err}");
        if !args.contains(&"--level".to_string()) {
            assert_eq!(lines.len(), 1, "{args:?}: {err}");
            assert!(out.is_empty(), "nothing measured or printed: {out}");
        }
    }
}

#[test]
fn a_stored_runs_figure_is_the_yardstick_where_the_file_has_none() {
    let _one = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let run = base_run(dir.path());
    let json = dir.path().join("c.json");
    let written = dir.path().join("from-baseline.toml");
    let (code, out, err) = check(
        &[
            "--baseline",
            run.to_str().expect("utf-8"),
            "--tolerance",
            "0.5",
            "--json",
            json.to_str().expect("utf-8"),
            "--write-expect",
            written.to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(matches!(code, Some(0 | 5)), "{out}{err}");
    // The file written beside a baseline takes the baseline's figure where it has one.
    let text = std::fs::read_to_string(&written).expect("written");
    let by = format!("by {}\nbenchmark = \"cpu.flops\"", run.display());
    assert!(text.contains(&by), "{text}");
    assert!(
        text.contains("by this node\nbenchmark = \"mem.bandwidth\""),
        "{text}"
    );
    let d = doc(&json);
    let cpu = cpu_check(&d);
    let source = cpu["expected"]["source"].as_str().expect("source");
    assert!(
        source.starts_with(&format!("baseline {} ", run.display()))
            && source.ends_with("less 50 %"),
        "{source}"
    );
    assert!(
        d["yardsticks"][0]
            .as_str()
            .expect("first")
            .starts_with("baseline "),
        "{d}"
    );
}

#[test]
fn a_fleets_median_node_of_this_cpu_model_is_the_baseline() {
    let _one = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let base = base_run(dir.path());
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(&base).expect("run")).expect("json");
    // Two nodes of this CPU model, and one of another whose figures are a hundred times higher:
    // the median is of the first two only.
    let mut nodes = Vec::new();
    for (node, model, factor) in [
        ("n1", None, 1.0),
        ("n2", None, 1.0),
        ("n3", Some("Another CPU"), 100.0),
    ] {
        let mut r = run.clone();
        if let Some(m) = model {
            r["host"]["cpu"]["model"] = Value::from(m);
        }
        for rec in r["records"].as_array_mut().expect("records") {
            let v = rec["value"].as_f64().expect("value") * factor;
            rec["value"] = Value::from(v);
        }
        let rel = format!("nodes/{node}/run.json");
        let path = dir.path().join(&rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, serde_json::to_string(&r).expect("ser")).expect("write");
        nodes.push(serde_json::json!({"node": node, "status": "ok", "reason": null, "run": rel}));
    }
    let fleet = serde_json::json!({
        "schema": "hostbench/fleet/v1", "fleet_id": "f-test", "started_at": "2026-11-28T00:00:00Z",
        "finished_at": "2026-11-28T00:10:00Z", "generated_at": "2026-11-28T00:10:00Z",
        "profile": "quick", "scale": 1.0, "net_pairs": "none", "outlier_threshold": 0.2,
        "robust_limit": 3.5, "nodes": nodes, "not_measured": [], "figures": [], "pairs": [],
        "net_matrix": []
    });
    let fleet_json = dir.path().join("fleet.json");
    std::fs::write(&fleet_json, fleet.to_string()).expect("write");
    let json = dir.path().join("c.json");
    let (code, out, err) = check(
        &[
            "--baseline",
            fleet_json.to_str().expect("utf-8"),
            "--json",
            json.to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(matches!(code, Some(0 | 5)), "{out}{err}");
    let d = doc(&json);
    let cpu = cpu_check(&d);
    let source = cpu["expected"]["source"].as_str().expect("source");
    assert!(
        source.starts_with("baseline fleet f-test's median of 2 node(s) with this CPU"),
        "{source}"
    );
    let want = run["records"][0]["value"].as_f64().expect("value") * 0.75;
    let bound = cpu["expected"]["value"].as_f64().expect("bound");
    assert!((bound - want).abs() <= want * 1e-9, "{bound} vs {want}");
}

/// Outside Slurm (no scontrol) --drain and --resume refuse before anything is measured, and a
/// scontrol that hangs is cut off by --max-time; a
/// Slurm whose node list does not have this host is refused too (the cluster test in
/// tests/fleet.rs shows it: here scontrol would wait for a controller that is not there).
/// The long level's soak is `hostbench burn`: a wrong result on one CPU (injected through the
/// documented `HOSTBENCH_FAULT` hook) fails the node, and its first line names the CPU and the
/// unit; the standard figures before it pass (their floor at 1 % of peak).
#[test]
fn the_long_level_soaks_and_a_wrong_result_fails_the_node() {
    let _one = serial();
    let out = hostbench()
        .args([
            "check",
            "--level",
            "long",
            "--only",
            "cpu",
            "--peak-share",
            "0.01",
        ])
        // The memory patterns each cover their whole buffer however short the soak: a small one
        // keeps this case to the CPU's fault it is about.
        .args(["--duration", "3s", "--mem-share", "0.02"])
        .env("HOSTBENCH_FAULT", "cpu:1:fma")
        .output()
        .expect("check");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let first = first_line(&text);
    assert!(
        first.starts_with("FAIL burn 3 s: cpu1 fma-chain: ") && first.contains("wrong results"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("pass    cpu.flops")),
        "{text}"
    );
}

#[test]
fn drain_and_resume_outside_slurm_are_one_line_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("bin");
    std::fs::create_dir_all(&empty).expect("mkdir");
    for flag in ["--drain", "--resume"] {
        // No scontrol at all.
        let (code, out, err) = check(&[flag, "--only", "cpu"], &[("PATH", &empty)]);
        assert_eq!(code, Some(2), "{out}{err}");
        assert!(out.is_empty(), "nothing measured: {out}");
        assert_eq!(
            err.trim(),
            format!("hostbench: error: {flag}: not under Slurm: `scontrol` is not on PATH"),
        );
    }
    // A controller that does not answer (scontrol hangs): --max-time still ends the check.
    std::fs::write(empty.join("scontrol"), "#!/bin/sh\nexec sleep 5\n").expect("write");
    std::fs::set_permissions(
        empty.join("scontrol"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let path = format!("{}:/usr/bin:/bin", empty.display());
    let (code, out, err) = check(
        &["--drain", "--only", "cpu", "--max-time", "500ms"],
        &[("PATH", Path::new(&path))],
    );
    assert_eq!(code, Some(5), "{out}{err}");
    assert_eq!(
        out.trim(),
        "UNKNOWN exceeded --max-time 500ms: the check had not finished"
    );
}

#[test]
fn max_time_ends_the_check_unknown() {
    let _one = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    let (code, out, err) = check(
        &[
            "--level",
            "standard",
            "--only",
            "cpu",
            "--max-time",
            "200ms",
        ],
        &[("HOSTBENCH_RUN_DIR", &run)],
    );
    assert_eq!(code, Some(5), "{out}{err}");
    assert_eq!(
        out.trim(),
        "UNKNOWN exceeded --max-time 200ms: the check had not finished"
    );
    let (code, _, _) = check(
        &[
            "--level",
            "standard",
            "--only",
            "cpu",
            "--max-time",
            "200ms",
            "--unknown-is",
            "fail",
        ],
        &[("HOSTBENCH_RUN_DIR", &run)],
    );
    assert_eq!(code, Some(1));
    let (code, out, err) = check(&["--max-time", "soon"], &[]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert_eq!(
        err.trim(),
        "hostbench: error: --max-time soon: not a duration (e.g. 30s, 5m)"
    );
}

/// Two checks that arrive while a third holds the node's lock (here the test holds it, as a
/// check that is measuring would): when it is released one of them measures and the other
/// reuses that verdict, each saying so; neither measures at the same time as the other. One
/// that writes --json measures after its wait.
#[test]
fn concurrent_checks_on_one_node_measure_once() {
    use std::os::fd::AsRawFd as _;
    let _one = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).expect("mkdir");
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    let lock_path = run.join(format!("check-{}.lock", hostname.trim()));
    let lock = std::fs::File::create(&lock_path).expect("lock file");
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(
        unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    let spawn = |extra: &[&str]| {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("hostbench"))
            .args(["check", "--only", "cpu", "--peak-share", "0.01"])
            .args(extra)
            .env("HOSTBENCH_RUN_DIR", &run)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("check")
    };
    let (a, b) = (spawn(&[]), spawn(&[]));
    // Both are waiting once each has the lock file open.
    let has_open = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| {
                d.flatten()
                    .any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l == lock_path))
            })
            .unwrap_or(false)
    };
    let t0 = std::time::Instant::now();
    while !(has_open(a.id()) && has_open(b.id())) {
        assert!(
            t0.elapsed().as_secs() < 120,
            "the checks never opened the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(lock);
    let outs = [a, b].map(|c| c.wait_with_output().expect("wait"));
    let said: Vec<(String, String)> = outs
        .iter()
        .map(|o| {
            (
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        })
        .collect();
    let reused: Vec<&(String, String)> = said
        .iter()
        .filter(|(_, e)| {
            e.contains("reused the verdict of the check that was running on this node")
        })
        .collect();
    let measured: Vec<&(String, String)> = said
        .iter()
        .filter(|(_, e)| e.contains("waited ") && e.contains("this one measures"))
        .collect();
    assert_eq!((reused.len(), measured.len()), (1, 1), "{said:#?}");
    // The reused verdict is the measured one, word for word.
    assert_eq!(
        first_line(&reused[0].0),
        first_line(&measured[0].0),
        "{said:#?}"
    );
    assert!(first_line(&measured[0].0).starts_with("OK "), "{said:#?}");
    assert_eq!(outs[0].status.code(), outs[1].status.code());

    // A check that writes a document of its own (--json) waits but always measures.
    let lock = std::fs::File::create(&lock_path).expect("lock file");
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    let json = dir.path().join("b.json");
    let a = spawn(&[]);
    let b = spawn(&["--json", json.to_str().expect("utf-8")]);
    let t0 = std::time::Instant::now();
    while !(has_open(a.id()) && has_open(b.id())) {
        assert!(
            t0.elapsed().as_secs() < 120,
            "the checks never opened the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(lock);
    let a = a.wait_with_output().expect("wait");
    let b = b.wait_with_output().expect("wait");
    let b_err = String::from_utf8_lossy(&b.stderr);
    assert!(
        b_err.contains("this one measures") && json.exists(),
        "{b_err}\n{}",
        String::from_utf8_lossy(&a.stderr)
    );

    // Nor is a verdict reused for another question: here another counter root, whose
    // uncorrected DIMM error the waiting check finds itself whichever of the two goes first.
    let lock = std::fs::File::create(&lock_path).expect("lock file");
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    let a = spawn(&[]);
    let b = std::process::Command::new(assert_cmd::cargo::cargo_bin("hostbench"))
        .args(["check", "--only", "cpu", "--peak-share", "0.01"])
        .env("HOSTBENCH_RUN_DIR", &run)
        .env("HOSTBENCH_HEALTH_ROOT", faulty_root(dir.path()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("check");
    let t0 = std::time::Instant::now();
    while !(has_open(a.id()) && has_open(b.id())) {
        assert!(
            t0.elapsed().as_secs() < 120,
            "the checks never opened the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(lock);
    let a = a.wait_with_output().expect("wait");
    let b = b.wait_with_output().expect("wait");
    let (b_out, b_err) = (
        String::from_utf8_lossy(&b.stdout),
        String::from_utf8_lossy(&b.stderr),
    );
    assert!(
        b_err.contains("this one measures")
            && b_out.starts_with("FAIL 1 uncorrectable memory error(s) on mc0"),
        "{b_out}{b_err}"
    );
    assert!(
        String::from_utf8_lossy(&a.stdout).starts_with("OK "),
        "{}",
        String::from_utf8_lossy(&a.stderr)
    );
}

/// packaging/kubernetes: the node-problem-detector plugin and the DaemonSet parse, say what
/// README says, and the plugin's own command line gives NPD's three outcomes: exit 0 with an OK
/// line, 1 with a FAIL line (a fixture node with an uncorrected DIMM error), and neither 0 nor 1
/// (NPD's unknown) with an UNKNOWN line (a required counter that cannot be read). For the pass
/// the test adds `--only cpu --peak-share 0.01`: this shared machine's CPU figures are not
/// under test here.
#[test]
fn kubernetes_npd_plugin_and_daemonset() {
    let _one = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let pkg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/kubernetes");
    let npd: Value = serde_json::from_str(
        &std::fs::read_to_string(pkg.join("hostbench-npd-plugin.json")).expect("npd plugin"),
    )
    .expect("the plugin is JSON");
    assert_eq!(npd["plugin"], "custom");
    let rule = &npd["rules"][0];
    assert_eq!(rule["condition"], npd["conditions"][0]["type"]);
    assert_eq!(rule["path"], "/host/usr/local/bin/hostbench");
    let args: Vec<&str> = rule["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string"))
        .collect();
    assert_eq!(args[..3], ["check", "--level", "quick"], "{args:?}");
    assert!(args.contains(&"--quiet") && args.contains(&"--max-time"));

    let ds: Value = serde_json::from_str(
        &std::fs::read_to_string(pkg.join("hostbench-check-daemonset.json")).expect("daemonset"),
    )
    .expect("the DaemonSet is JSON");
    assert_eq!(ds["kind"], "DaemonSet");
    let spec = &ds["spec"]["template"]["spec"];
    assert_eq!(spec["hostNetwork"], true);
    let c = &spec["containers"][0];
    let script = c["args"][0].as_str().expect("script");
    assert!(
        script.contains("hostbench check --level standard")
            && script.contains("--openmetrics /textfile/hostbench.prom.tmp")
            && script.contains("mv /textfile/hostbench.prom.tmp /textfile/hostbench.prom"),
        "{script}"
    );
    let mounts: Vec<(&str, &str)> = c["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .map(|m| {
            (
                m["name"].as_str().expect("name"),
                m["mountPath"].as_str().expect("path"),
            )
        })
        .collect();
    let volume = |name: &str| {
        spec["volumes"]
            .as_array()
            .expect("volumes")
            .iter()
            .find(|v| v["name"] == name)
            .and_then(|v| v["hostPath"]["path"].as_str())
            .unwrap_or_else(|| panic!("no hostPath volume {name}"))
            .to_string()
    };
    for (name, path) in &mounts {
        let host = volume(name);
        match *name {
            "hostbench" => assert_eq!(
                (host.as_str(), *path),
                (
                    "/usr/local/bin/hostbench",
                    rule["path"].as_str().expect("path")
                )
            ),
            "textfile" => assert_eq!(
                (host.as_str(), *path),
                ("/var/lib/node_exporter/textfile_collector", "/textfile")
            ),
            _ => {}
        }
    }

    // The plugin's command line, the binary in place of /host/usr/local/bin/hostbench.
    let run = dir.path().join("run");
    let npd_run = |extra: &[&str], root: &Path| {
        let mut a: Vec<&str> = args[1..].to_vec();
        a.extend_from_slice(extra);
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("hostbench"));
        cmd.arg(args[0])
            .args(&a)
            .env("HOSTBENCH_HEALTH_ROOT", root)
            .env("HOSTBENCH_RUN_DIR", &run);
        let o = cmd.output().expect("plugin command");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let (code, out) = npd_run(&["--only", "cpu", "--peak-share", "0.01"], &empty);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("OK ") && out.lines().count() == 1, "{out}");
    let (code, out) = npd_run(&["--only", "cpu"], &faulty_root(dir.path()));
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.starts_with("FAIL 1 uncorrectable memory error(s) on mc0"),
        "{out}"
    );
    let file = dir.path().join("req.toml");
    std::fs::write(&file, "[expect]\nrequire = [\"health.edac\"]\n").expect("write");
    let f = file.to_str().expect("utf-8");
    let (code, out) = npd_run(
        &["--only", "cpu", "--peak-share", "0.01", "--expect", f],
        &empty,
    );
    assert!(
        !matches!(code, Some(0 | 1)),
        "NPD's unknown: {code:?} {out}"
    );
    assert!(
        out.starts_with("UNKNOWN health.edac: not readable ("),
        "{out}"
    );
}
