//! Conditions and diagnoses created for real: a cgroup CPU quota, a busy process on one of the
//! measured CPUs, an affinity mask smaller than the threads, and the effective-cores probe with
//! and without a neighbour. Each case runs the real binary and reads its JSON.
//!
//! The cases share the machine's CPUs, so they run one at a time.

mod common;

use std::path::Path;
use std::process::Command;

use common::contend::{serial, Busy, QuotaGroup};
use common::{hostbench, is_root};
use serde_json::Value;

fn cpus() -> Vec<usize> {
    hostbench_core::affinity::allowed_cpus()
}

fn json_out(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

fn record_at(doc: &Value, bench: &str, threads: u64) -> Value {
    doc["records"]
        .as_array()
        .expect("present")
        .iter()
        .find(|r| r["benchmark"] == bench && r["params"]["threads"] == threads)
        .unwrap_or_else(|| panic!("no {bench} threads={threads} in {doc}"))
        .clone()
}

fn causes(r: &Value) -> Vec<String> {
    r["diagnosis"]
        .as_array()
        .map(|d| {
            d.iter()
                .map(|x| x["cause"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

const CPU_ARGS: &[&str] = &[
    "cpu",
    "--dtype",
    "f64",
    "--threads",
    "2",
    "--repeat",
    "3",
    "--json",
    "-",
    "--quiet",
];

#[test]
fn a_cpu_quota_of_half_the_threads_is_diagnosed_with_its_throttling() {
    let _one = serial();
    if !is_root() {
        // As the fleet, gpu and net tests: CI runs as root (scripts/test), so there a skip
        // would hide the quota's diagnosis untested.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root: the cgroup quota test must run"
        );
        eprintln!("needs root: skipped");
        return;
    }
    if cpus().len() < 2 {
        eprintln!("needs 2 CPUs: skipped");
        return;
    }
    let group = QuotaGroup::new(1.0).expect("a cgroup with a CPU quota (root, cgroup v1 or v2)");
    let doc = json_out(&group.run(CPU_ARGS));
    let r = record_at(&doc, "cpu.flops", 2);
    // The quota is named; on a host where other processes also take the CPUs (a build beside
    // the tests), their share may rank first, and is named too.
    let at = causes(&r)
        .iter()
        .position(|c| c == "cgroup_quota")
        .unwrap_or_else(|| panic!("no cgroup_quota in {}", r["diagnosis"]));
    let cg = &r["conditions"]["cgroup"];
    assert!(
        (cg["quota_cpus"].as_f64().expect("present") - 1.0).abs() < 1e-9,
        "{cg}"
    );
    let n = cg["nr_throttled"].as_u64().expect("present");
    assert!(n > 0, "{cg}");
    let text = r["diagnosis"][at]["text"].as_str().expect("present");
    assert!(
        text.starts_with("cgroup quota of 1.0 CPU for 2 threads: throttled")
            && text.contains(&format!("{n} times")),
        "{text}"
    );
    // The quota held the effective-cores probe too: it is not taken for shared execution units.
    assert!(!causes(&r).contains(&"shared_cores".to_string()));
}

#[test]
fn a_busy_process_on_a_measured_cpu_is_named() {
    let _one = serial();
    let cpus = cpus();
    if cpus.len() < 2 {
        eprintln!("needs 2 CPUs: skipped");
        return;
    }
    let order = hostbench_core::affinity::placement_order();
    let busy_cpu = order[1];
    let _busy = Busy::on(busy_cpu);
    let out = hostbench().args(CPU_ARGS).output().expect("present");
    let doc = json_out(&out);
    let r = record_at(&doc, "cpu.flops", 2);
    assert_eq!(causes(&r)[0], "cpu_contention", "{}", r["diagnosis"]);
    let text = r["diagnosis"][0]["text"].as_str().expect("present");
    assert!(text.contains(&format!("of CPU {busy_cpu}")), "{text}");
    let per_cpu = r["conditions"]["per_cpu"].as_array().expect("present");
    assert_eq!(per_cpu[0]["cpu"], busy_cpu as u64, "{per_cpu:?}");
    assert!(
        per_cpu[0]["other_share"].as_f64().expect("present") > 0.2,
        "{per_cpu:?}"
    );
    // The probe ran beside the same neighbour: it says so, and no record is diagnosed with it.
    let note = doc["host"]["cpu"]["effective_cores_note"]
        .as_str()
        .unwrap_or("");
    assert!(note.contains(&format!("CPU {busy_cpu}")), "{note}");
    assert!(doc["host"]["cpu"]["effective_cores"].is_null());
}

#[test]
fn threads_beyond_the_affinity_mask_are_diagnosed() {
    let _one = serial();
    let bin = assert_cmd::cargo::cargo_bin("hostbench");
    let cpu0 = cpus()[0];
    let out = Command::new("taskset")
        .args(["-c", &cpu0.to_string()])
        .arg(&bin)
        .args(CPU_ARGS)
        .env(
            "HOSTBENCH_DB",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("tests-history.sqlite"),
        )
        .output()
        .expect("present");
    let doc = json_out(&out);
    let r = record_at(&doc, "cpu.flops", 2);
    assert_eq!(causes(&r), ["affinity"], "{}", r["diagnosis"]);
    assert!(r["diagnosis"][0]["text"]
        .as_str()
        .expect("present")
        .starts_with("2 threads on 1 allowed CPU"));
    assert_eq!(r["conditions"]["cpus"], serde_json::json!([cpu0]));
}

fn effective(doc: &Value) -> (f64, String) {
    let c = &doc["host"]["cpu"];
    (
        c["effective_cores"].as_f64().expect("effective_cores"),
        c["effective_cores_note"].as_str().unwrap_or("").to_string(),
    )
}

/// What the probe measured of its CPU pairs, from its basis ("…; 1 CPU pair: median 1.02 x, 1
/// below 1.7 …"): the median pair's throughput in CPUs, how many pairs read below the
/// threshold, and the threshold. None where the basis holds no pair figures.
fn pairs_measured(basis: &str) -> Option<(f64, usize, f64)> {
    let rest = basis
        .split_once(" pair: median ")
        .or_else(|| basis.split_once(" pairs: median "))?
        .1;
    let (median, rest) = rest.split_once(" x, ")?;
    let (below, rest) = rest.split_once(" below ")?;
    let threshold = rest
        .split(|c: char| c != '.' && !c.is_ascii_digit())
        .next()?;
    Some((
        median.parse().ok()?,
        below.parse().ok()?,
        threshold.parse().ok()?,
    ))
}

/// An idle reading of two CPUs: two CPUs' worth, or a low one that the probe's own pair
/// measurement shows as shared units (the pair delivered less than two CPUs' worth). A low
/// reading whose pair delivered two CPUs' worth is a fault of the probe, whatever its note says.
fn idle_reading_holds(idle: f64, note: &str, basis: &str) -> Result<(), String> {
    if idle >= 1.8 {
        return Ok(());
    }
    let Some((median, below, threshold)) = pairs_measured(basis) else {
        return Err(format!("{idle} with no pair measured: {note} ({basis})"));
    };
    if below == 0 || median >= threshold {
        return Err(format!(
            "{idle} on an idle host while its CPU pair delivered {median} CPUs' worth: \
             no sharing measured ({note}; {basis})"
        ));
    }
    if note.contains("each CPU delivers its own") {
        return Err(format!("{idle} read low without saying why: {note}"));
    }
    // A pair held down by a neighbour, a quota or the hypervisor is no evidence of shared units
    // (and the host was not idle).
    let disturbed = [
        "other processes kept",
        "cgroup quota",
        "hostbench's own threads",
        "the hypervisor took time",
    ];
    if let Some(d) = disturbed.iter().find(|d| note.contains(*d)) {
        return Err(format!("{idle} on a host that was not idle ({d}): {note}"));
    }
    Ok(())
}

/// The idle check's logic on readings written out: a low reading passes only with its pair's
/// rate below the threshold, not with the probe's fallback sentences.
#[test]
fn a_low_idle_reading_needs_its_pairs_to_have_shared() {
    let basis = |pair: f64, below: usize| {
        format!(
            "avx512 f64 FMA on all 2 CPUs at once: 1.01 x one CPU's rate (58.4 GFLOP/s; median \
             of 7 all-CPU runs of 20 ms over the best one-CPU run); 1 CPU pair: median \
             {pair:.2} x, {below} below 1.7; the median round's threads, GFLOP/s: 29.3 on CPU \
             0, 29.3 on CPU 1"
        )
    };
    let shared = "2 CPUs; FMA throughput of 1.0 CPUs measured: pairs share execution units \
                  (hidden SMT or an overcommitted host)";
    let unsteady = "2 CPUs; FMA throughput of 1.0 CPUs measured: every pair of CPUs delivered \
                    two CPUs' worth a moment later: something the guest cannot see (another \
                    tenant on the host's cores) held the all-CPU runs down";
    assert_eq!(pairs_measured(&basis(1.02, 1)), Some((1.02, 1, 1.7)));
    assert!(idle_reading_holds(1.99, "2 CPUs; …: each CPU delivers its own", "").is_ok());
    assert!(idle_reading_holds(1.01, shared, &basis(1.02, 1)).is_ok());
    // The sentences alone, with the pair at two CPUs' worth, or no pair figure at all: fail.
    assert!(idle_reading_holds(1.01, shared, &basis(1.98, 0)).is_err());
    assert!(idle_reading_holds(1.01, unsteady, &basis(1.98, 0)).is_err());
    assert!(idle_reading_holds(1.01, shared, "avx512 f64 FMA on all 2 CPUs at once").is_err());
    // A pair read low beside a busy neighbour: the neighbour's, not the units'.
    let busy = "2 CPUs; FMA throughput of 1.4 CPUs measured: other processes kept CPU 1 (72 %) \
                busy during the probe";
    assert!(idle_reading_holds(1.37, busy, &basis(1.44, 1)).is_err());
}

#[test]
fn the_effective_cores_probe_reads_two_cpus_idle_and_names_a_neighbour() {
    let _one = serial();
    let order = hostbench_core::affinity::placement_order();
    if order.len() != 2 {
        // The thresholds below are for one CPU of two kept busy.
        eprintln!("needs exactly 2 CPUs: skipped");
        return;
    }
    let info = || {
        json_out(
            &hostbench()
                .args(["info", "--json"])
                .output()
                .expect("present"),
        )
    };
    // Idle, on a shared VM: a low reading is taken again, up to three times, so that a passing
    // disturbance (a neighbour VM's burst) is not read as the hardware; units that are really
    // shared read low every time.
    let mut idle = (0.0, String::new(), String::new());
    for _ in 0..3 {
        let doc = info();
        let (value, note) = effective(&doc);
        let basis = doc["host"]["cpu"]["effective_cores_basis"]
            .as_str()
            .unwrap_or("")
            .to_string();
        idle = (value, note, basis);
        if idle.0 >= 1.8 {
            break;
        }
    }
    let (idle, note, basis) = idle;
    // This VM's two vCPUs sometimes share one core for minutes (BENCHMARKS.md, issue 32):
    // then the probe reads low every time, its pair too, and it must say why; that is the
    // behaviour, not a fault. A low reading whose pair delivered two CPUs' worth is not.
    if let Err(e) = idle_reading_holds(idle, &note, &basis) {
        panic!("{e}");
    }
    let _busy = Busy::on(order[1]);
    let (busy, note) = effective(&info());
    assert!(busy < 1.7, "{busy}: {note}");
    assert!(
        note.contains(&format!("other processes kept CPU {}", order[1])),
        "{note}"
    );
}

#[test]
fn every_record_of_a_run_carries_its_conditions_and_says_what_it_could_not_read() {
    let _one = serial();
    let out = hostbench()
        .args([
            "cpu",
            "--dtype",
            "f64",
            "--threads",
            "1",
            "--repeat",
            "2",
            "--json",
            "-",
            "-q",
        ])
        .output()
        .expect("present");
    let doc = json_out(&out);
    for r in doc["records"].as_array().expect("present") {
        let c = &r["conditions"];
        assert!(c["seconds"].as_f64().expect("present") > 0.0, "{c}");
        assert!(!c["cpus"].as_array().expect("present").is_empty(), "{c}");
        // Each telemetry source is read or explained.
        for (key, field) in [
            ("energy", "energy_j"),
            ("temperature", "temperature_c"),
            ("thermal_throttle", "thermal_throttle_events"),
            ("cgroup", "cgroup"),
            ("clock", "clock_hz"),
        ] {
            assert!(
                !c[field].is_null() || c["unavailable"][key].is_string(),
                "{key}: {c}"
            );
        }
    }
}
