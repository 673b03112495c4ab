//! Integration tests: drive the real binary with small sizes and check the JSON contract, the
//! reference-tool path, and that bad input gets a one-line error and exit code 2.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

#[test]
fn info_json_has_inventory_and_peaks() {
    let out = hostbench().args(["info", "--json"]).output().expect("run");
    assert!(out.status.success());
    let doc = json_of(&out);
    let cpu = &doc["host"]["cpu"];
    assert!(cpu["threads"].as_u64().expect("threads") >= 1);
    assert!(cpu["cores"].as_u64().expect("cores") >= 1);
    assert!(!cpu["isa"].as_array().expect("isa").is_empty() || cfg!(not(target_arch = "x86_64")));
    assert!(doc["host"]["memory"]["total_bytes"].as_u64().expect("mem") > 0);
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        assert!(cpu["measured_hz"].as_f64().expect("measured clock") > 1e8);
    }
    let peaks: Vec<&Value> = doc["peaks"]
        .as_array()
        .expect("peaks")
        .iter()
        .filter(|p| p["subsystem"] == "cpu")
        .collect();
    // One per dtype (f64, f32, i64, i32, i16, i8) on the widest general ISA, then one per dtype of
    // each dot-product or matrix unit this host has (none on many hosts).
    let unit_dtypes = |isa: &str| -> Option<&[&str]> {
        Some(match isa {
            "avx-vnni" | "avx512-vnni" => &["i16", "i8"],
            "avx512-bf16" => &["bf16"],
            "avx512-fp16" => &["f16"],
            "amx" => &["i8", "bf16"],
            "amx-fp16" => &["f16"],
            "neon-dotprod" | "i8mm" => &["i8"],
            "neon-bf16" => &["bf16"],
            _ => return None,
        })
    };
    let mut general = 0;
    for p in &peaks {
        let what = p["what"].as_str().expect("what");
        let (dtype, isa) = what.split_once(' ').expect("dtype isa");
        match unit_dtypes(isa) {
            Some(dtypes) => assert!(dtypes.contains(&dtype), "{what}"),
            None => general += 1,
        }
    }
    assert_eq!(general, 6, "{peaks:?}");
    for p in peaks {
        // Either a peak with its basis, or the reason there is none; never a bare number.
        match p["peak"].as_object() {
            Some(pk) => assert!(pk["basis"].as_str().expect("basis").contains("cycle")),
            None => assert!(!p["note"].as_str().expect("note").is_empty()),
        }
    }
}

#[test]
fn info_table_is_readable() {
    let out = hostbench().arg("info").output().expect("run");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in ["CPU", "Clock", "Theoretical peaks", "f64"] {
        assert!(text.contains(needle), "{needle} missing: {text}");
    }
}

#[test]
fn cpu_json_records_follow_the_contract() {
    let out = run_ok("cpu --dtype dp,f32,i16,qp --isa scalar --threads 1,2 --ops 2e6 --repeat 2 --warmup 0 --scaling weak --json -", &[]);
    let doc = json_of(&out);
    assert_run_contract(&doc);
    let records = doc["records"].as_array().expect("records");
    assert_eq!(records.len(), 8);
    for r in records {
        assert_record_contract(r);
        let dtype = r["params"]["dtype"].as_str().expect("dtype");
        let (bench, unit) = if dtype.starts_with('f') {
            ("cpu.flops", "FLOP/s")
        } else {
            ("cpu.iops", "OP/s")
        };
        assert_eq!(r["benchmark"], bench);
        assert_eq!(r["unit"], unit);
        assert_eq!(r["params"]["isa"], "scalar");
        assert_eq!(r["params"]["scaling"], "weak");
        assert_eq!(r["stats"]["n"], 2);
        assert!(r["extra"]["chains"].as_u64().expect("chains") >= 2);
        if let Some(peak) = r["peak"].as_object() {
            assert!(peak["value"].as_f64().expect("peak") > 0.0);
            assert!(peak["basis"].as_str().expect("basis").contains("measured"));
            assert!(r["efficiency"].as_f64().expect("efficiency") > 0.0);
        }
    }
    // Aliases resolve to the contract's dtype names.
    let dtypes: Vec<&str> = records
        .iter()
        .filter_map(|r| r["params"]["dtype"].as_str())
        .collect();
    assert!(dtypes.contains(&"f64") && dtypes.contains(&"i8"));
}

#[test]
fn cpu_best_isa_strong_scaling_writes_json_file_and_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cpu.json");
    let out = run_ok(
        "cpu --dtype f64 --threads 1 --ops 1e7 --repeat 1",
        &["--json".as_ref(), path.as_ref()],
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("cpu.flops") && table.contains("FLOP/s"),
        "{table}"
    );
    let doc: Value = serde_json::from_slice(&std::fs::read(&path).expect("file")).expect("json");
    assert_run_contract(&doc);
    let r = &doc["records"][0];
    assert_eq!(r["params"]["scaling"], "strong");
    assert_record_contract(r);
    // The peak's clock is read under the kernel's own instruction class; the plain scalar-chain
    // clock stays beside it for comparison.
    let method = r["extra"]["clock_method"].as_str().expect("clock_method");
    if let Some(basis) = r["peak"]["basis"].as_str() {
        assert!(
            r["extra"]["clock_scalar_hz"]
                .as_f64()
                .expect("scalar clock")
                > 0.0
        );
        if r["params"]["isa"] != "scalar" && cfg!(target_arch = "x86_64") {
            assert!(basis.contains("measured under"), "{basis}");
            assert!(method.contains("interleaved"), "{method}");
        }
    }
}

#[test]
fn cpu_reference_runs_likwid_bench_side_by_side() {
    let have_likwid = std::process::Command::new("likwid-bench")
        .arg("-v")
        .output()
        .is_ok();
    if !have_likwid {
        // scripts/test installs likwid; in CI its absence is a failure, not a skip.
        assert!(
            std::env::var_os("CI").is_none(),
            "likwid-bench missing in CI"
        );
        return;
    }
    let out = run_ok("cpu --dtype f64 --isa auto --threads 1 --ops 1e8 --repeat 1 --warmup 0 --reference --json -", &[]);
    let doc = json_of(&out);
    let r = &doc["records"][0];
    let isa = r["params"]["isa"].as_str().expect("isa");
    if ["avx512", "avx2-fma", "sse2", "scalar"].contains(&isa) {
        let rf = &r["reference"];
        assert_eq!(rf["tool"], "likwid-bench", "{r}");
        assert!(rf["value"].as_f64().expect("ref value") > 0.0);
        let ratio = rf["ratio"].as_f64().expect("ratio");
        let expect = r["value"].as_f64().expect("v") / rf["value"].as_f64().expect("rv");
        assert!((ratio - expect).abs() < 1e-9 * expect);
        assert!(r["extra"]["reference_command"]
            .as_str()
            .expect("cmd")
            .starts_with("likwid-bench -t peakflops"));
    }
}

/// A reference tool hidden from PATH is one note on the record ("… not installed: apt install
/// …"), never a failed case: likwid-bench beside cpu, iperf3 and sockperf beside the network.
#[test]
fn a_reference_tool_missing_from_path_is_a_note() {
    let doc = run_without_path("cpu --dtype f64 --isa scalar --threads 1 --ops 1e7 --repeat 1 --warmup 0 --reference --json -");
    let r = &doc["records"][0];
    assert!(r["reference"].is_null() && r["value"].as_f64().expect("value") > 0.0);
    assert!(
        r["warnings"]
            .to_string()
            .contains("likwid-bench not installed: apt install likwid"),
        "{}",
        r["warnings"]
    );
    let doc = run_without_path("net loopback --throughput --latency --reference --proto tcp --streams 1 --duration 100ms --repeat 1 --warmup 0 --json -");
    for (bench, tool) in [("net.throughput", "iperf3"), ("net.latency", "sockperf")] {
        let r = records(&doc, bench)[0];
        assert!(r["reference"].is_null() && r["value"].as_f64().expect("value") > 0.0);
        let want = format!("{tool} not installed: apt install {tool}");
        assert!(
            r["warnings"].to_string().contains(&want),
            "{}",
            r["warnings"]
        );
    }
}

#[test]
fn linpack_json_reports_hpl_residual() {
    let out = run_ok(
        "linpack --n 256 --threads 2 --repeat 1 --warmup 0 --json -",
        &[],
    );
    let doc = json_of(&out);
    assert_run_contract(&doc);
    let r = &doc["records"][0];
    assert_record_contract(r);
    assert_eq!(r["benchmark"], "cpu.linpack");
    assert_eq!(r["unit"], "FLOP/s");
    assert_eq!(r["params"]["n"], 256);
    assert_eq!(r["params"]["threads"], 2);
    let residual = r["extra"]["residual"].as_f64().expect("residual");
    assert!(residual.is_finite() && residual < 16.0, "{residual}");
    assert_eq!(r["extra"]["passed"], true);
    // what the record keeps beside n: NB, where the time went, how n was chosen, and the ratio
    // to the all-thread FMA rate with its basis (where this host has an FMA kernel)
    assert_eq!(r["extra"]["nb"], 256);
    let share = r["extra"]["panel_share"].as_f64().expect("panel_share");
    assert!((0.0..=1.0).contains(&share), "{share}");
    assert!(r["extra"]["idle_share"].as_f64().is_some());
    assert_eq!(r["extra"]["sizing"]["rule"], "given (--n)");
    // Every host has an f64 FMA kernel (scalar at least), read beside every solve: the ratio is
    // always there, and it is the solve's rate over that reading.
    let of = r["extra"]["of_fma_rate"]
        .as_f64()
        .unwrap_or_else(|| panic!("no of_fma_rate: {}", r["extra"]));
    let fma = r["extra"]["fma_rate"].as_f64().expect("fma_rate");
    let value = r["value"].as_f64().expect("value");
    assert!(
        (of - value / fma).abs() <= 1e-9 * of,
        "{of} vs {value} / {fma}"
    );
    // The FMA reading is the FMA kernel on the solve's threads: never above their peak (the
    // clock in the peak is measured under the same load; 10 % for that clock's spread).
    if let Some(peak) = r["peak"]["value"].as_f64() {
        assert!(
            fma > 0.0 && fma <= 1.1 * peak,
            "fma_rate {fma} against peak {peak}"
        );
    }
    // A solve is made of the FMA kernel's own operations on the same threads, so it cannot
    // outrun it: above 1 only where the reading beside it was held down, which the record then
    // warns of, and never by a factor (a ratio of mismatched units, or inverted, is off by
    // orders of magnitude). Even a 256² solve keeps well above a hundredth of the FMA rate.
    assert!((0.01..2.0).contains(&of), "of_fma_rate {of}");
    if of > 1.0 {
        assert!(
            r["warnings"].to_string().contains("of_fma_rate"),
            "{of} above 1 without its warning: {}",
            r["warnings"]
        );
    }
    assert!(r["extra"]["of_fma_rate_basis"]
        .as_str()
        .is_some_and(|b| b.contains("FMA")));
    // No cpu.flops record in this process: nothing stands in for the run's.
    assert!(r["extra"].get("of_cpu_flops").is_none(), "{r}");
}

/// `linpack --mxp`: the f64 solve, then HPL-MxP at the same n and threads, refined to HPL's
/// residual on whichever unit this CPU has (bf16 with AVX-512 BF16, f32 elsewhere), with the
/// iterations, the speed-up over the f64 record and the rules it followed.
#[test]
fn linpack_mxp_converges_to_passed_beside_the_f64_solve() {
    let out = run_ok(
        "linpack --mxp --n 640 --threads 2 --repeat 1 --warmup 0 --json -",
        &[],
    );
    let doc = json_of(&out);
    assert_run_contract(&doc);
    let records = doc["records"].as_array().expect("records");
    assert_eq!(records.len(), 2, "{records:?}");
    let (f64r, mxp) = (&records[0], &records[1]);
    assert_eq!(f64r["benchmark"], "cpu.linpack");
    assert_eq!(mxp["benchmark"], "cpu.linpack_mxp");
    assert_record_contract(mxp);
    assert_eq!(mxp["unit"], "FLOP/s");
    assert_eq!(mxp["params"]["n"], 640);
    assert_eq!(mxp["params"]["threads"], 2);
    let precision = mxp["params"]["precision"].as_str().expect("precision");
    // Which unit the CPU has comes from the kernel's CPU flags, not from hostbench's own
    // detection: a bf16 unit that fell back to f32 (a self-check or detection fault) fails.
    let bf16_unit = cpu_flags()
        .iter()
        .any(|f| f == "avx512_bf16" || f == "amx_bf16");
    let want = if bf16_unit { "bf16" } else { "f32" };
    assert_eq!(
        precision,
        want,
        "CPU flags {} bf16; the update ran on {} ({})",
        if bf16_unit { "have" } else { "lack" },
        mxp["extra"]["unit"],
        mxp["extra"]["unit_note"]
    );
    assert_eq!(mxp["extra"]["passed"], true);
    let residual = mxp["extra"]["residual"].as_f64().expect("residual");
    assert!(residual.is_finite() && residual < 1.0, "{residual}");
    let iterations = mxp["extra"]["iterations"].as_f64().expect("iterations");
    assert!((1.0..60.0).contains(&iterations), "{iterations}");
    let speedup = mxp["extra"]["speedup_over_linpack"]
        .as_f64()
        .expect("speedup");
    let ratio = mxp["value"].as_f64().unwrap() / f64r["value"].as_f64().unwrap();
    assert!(
        (speedup - ratio).abs() < 1e-9 * ratio,
        "{speedup} vs {ratio}"
    );
    assert!(mxp["extra"]["matrix"]
        .as_str()
        .is_some_and(|m| m.contains("diagonal")));
    assert_eq!(mxp["extra"]["refinement"]["max_iterations"], 60);
    let unit = mxp["extra"]["unit"].as_str().expect("unit");
    assert!(!unit.is_empty());
    // The texts read as sentences (a lost line continuation once left runs of spaces in them).
    for k in ["label", "matrix", "timed"] {
        let text = mxp["extra"][k].as_str().expect(k);
        assert!(!text.contains("  "), "{k}: {text:?}");
    }
    // The line said beside the tables names the kernel that ran.
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&format!("(update {unit}; ")), "{said}");
}

/// The CPU's feature flags as the kernel lists them (/proc/cpuinfo's first `flags` line; none
/// on a kernel that does not list them there).
fn cpu_flags() -> Vec<String> {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("flags").and_then(|r| r.split_once(':')))
        .map(|(_, f)| f.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// `--mxp` with an n whose matrices cannot fit is one line and exit 2, before anything runs.
#[test]
fn linpack_mxp_too_large_for_memory_is_a_usage_error() {
    assert_usage_error(&["linpack", "--mxp", "--n", "10000000"], "10000000");
}

/// The standard profile's linpack sizes n from the FMA rate it measures first (scaled down here
/// to the floor), keeps how it chose in the record, and passes HPL's residual; beside the run's
/// cpu.flops it says its share of that run's f64 rate at the same threads.
#[test]
fn standard_linpack_is_sized_to_the_host_and_passes() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_ok(
        "run --only cpu,linpack --scale 0.01 --repeat 1 --warmup 0 --no-history --no-reference --quiet --out",
        &[dir.path().as_ref()],
    );
    let doc = common::only_run_json(dir.path());
    let records = doc["records"].as_array().expect("records");
    let r = records
        .iter()
        .find(|r| r["benchmark"] == "cpu.linpack")
        .expect("a linpack record");
    // The run's fastest cpu.flops f64 record at the solve's threads is the divisor.
    let flops = records
        .iter()
        .filter(|f| {
            f["benchmark"] == "cpu.flops"
                && f["params"]["dtype"] == "f64"
                && f["params"]["threads"] == r["params"]["threads"]
        })
        .filter_map(|f| f["value"].as_f64())
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
        .expect("cpu.flops f64 at linpack's threads");
    assert_eq!(r["extra"]["cpu_flops_rate"].as_f64(), Some(flops), "{r}");
    let value = r["value"].as_f64().expect("value");
    let of = r["extra"]["of_cpu_flops"].as_f64().expect("of_cpu_flops");
    assert!(
        (of - value / flops).abs() < 1e-9 * of,
        "{of} {value} {flops}"
    );
    // In a run too, the FMA rate read beside each solve, with the bounds of
    // `linpack_json_reports_hpl_residual`.
    let of_fma = r["extra"]["of_fma_rate"].as_f64().expect("of_fma_rate");
    assert!((0.01..2.0).contains(&of_fma), "of_fma_rate {of_fma}");
    assert_eq!(r["extra"]["passed"], true, "{r}");
    assert!(r["extra"]["residual"].as_f64().is_some_and(|x| x < 16.0));
    let sizing = &r["extra"]["sizing"];
    assert_eq!(sizing["rule"], "time budget", "{sizing}");
    // 2 s × 0.01 at this build's rate: a small n, by the budget or its scaled-down floor
    let n = r["params"]["n"].as_u64().expect("n");
    assert!(n.is_multiple_of(64) && (64..=2048).contains(&n), "{n}");
    assert!(
        ["time budget", "smallest order"].contains(&sizing["limited_by"].as_str().unwrap_or("")),
        "{sizing}"
    );
    assert!(sizing["expected_seconds"].as_f64().is_some_and(|s| s > 0.0));
}

/// `--mem-share` is a share of the available memory in (0, 0.9]: anything else is one line and
/// exit 2 before anything runs, for `linpack` and for `run`.
#[test]
fn mem_share_outside_its_range_is_a_usage_error() {
    for bad in ["0", "-0.1", "0.95", "1", "nan", "half"] {
        assert_usage_error(&["linpack", &format!("--mem-share={bad}")], bad);
        assert_usage_error(
            &[
                "run",
                "--only",
                "linpack",
                "--no-history",
                &format!("--mem-share={bad}"),
            ],
            bad,
        );
    }
}

#[test]
fn run_writes_a_results_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_ok(
        "run --only cpu --duration 5ms --repeat 1 --warmup 0 --quiet --out",
        &[dir.path().as_ref()],
    );
    let runs: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .flatten()
        .collect();
    assert_eq!(runs.len(), 1);
    let run_json = runs[0].path().join("run.json");
    assert!(Path::new(&run_json).exists());
    let doc: Value =
        serde_json::from_slice(&std::fs::read(&run_json).expect("read")).expect("json");
    assert_run_contract(&doc);
    assert!(doc["records"].as_array().expect("records").len() >= 6);
    assert!(doc["records"]
        .as_array()
        .expect("records")
        .iter()
        .all(|r| r["benchmark"] == "cpu.flops" || r["benchmark"] == "cpu.iops"));
    // What reproduces the run: the command line, profile and scale, and the settings that move
    // results (THP and the kernel command line where the host shows them).
    let inv = &doc["invocation"];
    let argv: Vec<&str> = inv["command_line"]
        .as_array()
        .expect("command line")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(argv[1..4], ["run", "--only", "cpu"], "{argv:?}");
    assert_eq!(inv["profile"], "standard");
    assert_eq!(inv["scale"], 1.0);
    // Where the time went: one timed phase per subsystem that ran.
    assert_eq!(doc["phases"][0]["name"], "cpu");
    assert!(doc["phases"][0]["seconds"].as_f64().expect("seconds") > 0.0);
    if Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
        let thp = doc["host"]["thp"].as_str().expect("thp");
        assert!(["always", "madvise", "never"].contains(&thp), "{thp}");
    }
    if Path::new("/proc/cmdline").exists() {
        assert!(doc["host"]["kernel_cmdline"].is_string());
    }
    // The reference column, filled by default beside the headline alone: f64 on the widest ISA
    // likwid-bench has, at the most threads (where likwid-bench is installed; CI has it).
    let referenced = referenced(&doc);
    if common::on_path("likwid-bench") {
        assert_eq!(
            referenced.len(),
            1,
            "one headline reference: {referenced:?}"
        );
        let r = referenced[0];
        assert_eq!(r["params"]["dtype"], "f64");
        assert_eq!(r["reference"]["tool"], "likwid-bench");
        assert!(r["extra"]["reference_command"].is_string());
    }
}

#[test]
fn exhausted_budget_records_skips_and_fails() {
    let out = hostbench()
        .args(
            "cpu --dtype f64 --isa scalar --threads 1 --ops 1e6 --budget 1ns --json - --quiet"
                .split(' '),
        )
        .output()
        .expect("run");
    // Nothing measured at all: exit 1, and the JSON says why.
    assert_eq!(out.status.code(), Some(1));
    let doc = json_of(&out);
    assert_eq!(doc["skipped"][0]["kind"], "budget");
}

/// The dot-product and matrix units run, validated, wherever the host has them, and are refused
/// with one line and exit 2 where it does not. What the host has comes from `info`'s CPUID list,
/// not from the units' own detection, so the two are checked against each other.
#[test]
fn cpu_units_run_where_present_and_are_refused_where_absent() {
    let info = json_of(&run_ok("info --json", &[]));
    let host_isa: Vec<&str> = info["host"]["cpu"]["isa"]
        .as_array()
        .expect("isa")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // (unit, the CPUID feature `info` lists for it, its dtypes); AVX-VNNI is not in that list.
    let units: [(&str, Option<&str>, &[&str]); 9] = [
        ("avx512-vnni", Some("avx512vnni"), &["i16", "i8"]),
        ("avx512-bf16", Some("avx512bf16"), &["bf16"]),
        ("avx512-fp16", Some("avx512fp16"), &["f16"]),
        ("amx", Some("amx"), &["i8", "bf16"]),
        ("amx-fp16", Some("amx-fp16"), &["f16"]),
        ("avx-vnni", None, &["i16", "i8"]),
        ("neon-dotprod", Some("dotprod"), &["i8"]),
        ("i8mm", Some("i8mm"), &["i8"]),
        ("neon-bf16", Some("bf16"), &["bf16"]),
    ];
    for (isa, feature, dtypes) in units {
        let out = hostbench()
            .args(["cpu", "--isa", isa, "--threads", "1", "--ops", "2e8"])
            .args(["--repeat", "1", "--warmup", "0", "--json", "-", "--quiet"])
            .output()
            .expect("run");
        let present = feature.map(|f| host_isa.contains(&f));
        if out.status.code() == Some(2) {
            assert_ne!(present, Some(true), "{isa} refused on a host that lists it");
            assert_usage_error(&["cpu", "--isa", isa], isa);
            continue;
        }
        assert_ne!(present, Some(false), "{isa} ran on a host that lacks it");
        let doc = json_of(&out);
        let records = doc["records"].as_array().expect("records");
        let skipped = doc["skipped"].as_array().map_or(0, Vec::len);
        // Every dtype of the unit measured, or skipped with the reason (a kernel that refuses AMX
        // tile state); nothing else.
        assert_eq!(records.len() + skipped, dtypes.len(), "{isa}: {doc}");
        assert!(out.status.success() || skipped > 0, "{isa}: {doc}");
        for r in records {
            assert_record_contract(r);
            let dtype = r["params"]["dtype"].as_str().expect("dtype");
            assert!(dtypes.contains(&dtype), "{isa} ran {dtype}");
            assert_eq!(r["params"]["isa"], isa);
            let bench = if dtype.starts_with('i') {
                "cpu.iops"
            } else {
                "cpu.flops"
            };
            assert_eq!(r["benchmark"], bench);
            assert!(r["value"].as_f64().expect("value") > 0.0);
            if let Some(peak) = r["peak"].as_object() {
                let basis = peak["basis"].as_str().expect("basis");
                assert!(
                    basis.contains("/cycle") && basis.contains("measured"),
                    "{basis}"
                );
            }
        }
    }
    // A dtype only a unit runs, on a general ISA alone: nothing to measure, one line, exit 2.
    assert_usage_error(
        &["cpu", "--dtype", "bf16", "--isa", "scalar"],
        "no kernel for dtype bf16",
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    assert_usage_error(&["cpu", "--threads", "0"], "'0'");
    assert_usage_error(&["cpu", "--threads", "1,,2"], "threads");
    assert_usage_error(&["cpu", "--dtype", "f128"], "f128");
    assert_usage_error(&["cpu", "--isa", "avx9"], "avx9");
    let missing = if cfg!(target_arch = "x86_64") {
        "neon"
    } else {
        "avx2-fma"
    };
    assert_usage_error(&["cpu", "--isa", missing], missing);
    assert_usage_error(&["cpu", "--ops", "lots"], "lots");
    assert_usage_error(&["cpu", "--repeat", "0"], "'0'");
    assert_usage_error(&["cpu", "--duration", "soon"], "soon");
    assert_usage_error(&["linpack", "--n", "10000000"], "10000000");
    assert_usage_error(&["linpack", "--n", "0"], "'0'");
    assert_usage_error(&["linpack", "--threads", "x"], "'x'");
    assert_usage_error(&["run", "--only", "gpu2"], "gpu2");
}

#[test]
fn broken_spec_file_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = dir.path().join("spec.toml");
    std::fs::write(&spec, "[cpu]\ncores = 2\nclok_hz = 3e9\n").expect("write");
    let s = spec.to_str().expect("utf8");
    assert_usage_error(&["info", "--spec", s], "clok_hz");
    assert_usage_error(&["cpu", "--spec", s], "line 3");
    std::fs::write(&spec, "[cpu\n").expect("write");
    assert_usage_error(&["linpack", "--spec", s], "spec.toml");
    assert_usage_error(
        &["info", "--spec", "/nonexistent/x.toml"],
        "/nonexistent/x.toml",
    );
}

#[test]
fn spec_clock_overrides_the_measured_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = dir.path().join("spec.toml");
    std::fs::write(
        &spec,
        "[cpu]\nclock_hz = 1.0e9\nfma_pipes = 2\nmuladd_pipes = 2\n",
    )
    .expect("write");
    let out = run_ok(
        "cpu --dtype f64 --isa scalar --threads 1 --ops 1e6 --repeat 1 --json - --spec",
        &[spec.as_ref()],
    );
    let doc = json_of(&out);
    let peak = &doc["records"][0]["peak"];
    // x86 scalar FP is mul+add: 1 core × 1 GHz × 1 lane × 2 instructions/cycle = 2 GFLOP/s;
    // AArch64 scalar FP is an FMA (2 FLOP each): 4 GFLOP/s. Either way from the spec's numbers.
    let expect = if cfg!(target_arch = "x86_64") {
        2.0e9
    } else {
        4.0e9
    };
    assert_eq!(peak["value"].as_f64(), Some(expect), "{peak}");
    assert!(peak["basis"].as_str().expect("basis").contains("spec file"));
}

#[test]
fn mem_bandwidth_records_follow_the_contract() {
    let out = run_ok(
        "mem --kernel rw,triad,read --pattern seq,random --block 8,1KiB --threads 1,2 \
         --store temporal,nontemporal --size 3MiB --duration 2ms --repeat 2 --warmup 0 --json -",
        &[],
    );
    let doc = json_of(&out);
    assert_run_contract(&doc);
    let records = doc["records"].as_array().expect("records");
    // rw and triad: 2 patterns × 2 blocks × 2 thread counts × 2 stores; read has no stores.
    assert_eq!(records.len(), 16 + 16 + 8, "{:?}", doc["skipped"]);
    for r in records {
        assert_record_contract(r);
        assert_eq!(r["benchmark"], "mem.bandwidth");
        assert_eq!(r["unit"], "B/s");
        for key in [
            "kernel",
            "pattern",
            "block_bytes",
            "working_set_bytes",
            "threads",
            "store",
            "isa",
            "level",
        ] {
            assert!(r["params"].get(key).is_some(), "params lack {key}: {r}");
        }
        assert_eq!(r["extra"]["validated"], true);
    }
    let rw_random_1t = records
        .iter()
        .find(|r| {
            r["params"]["kernel"] == "rw"
                && r["params"]["pattern"] == "random"
                && r["params"]["block_bytes"] == 8
                && r["params"]["threads"] == 1
        })
        .expect("rw random 8 B record");
    assert_eq!(rw_random_1t["params"]["working_set_bytes"], 3 << 20);
}

#[test]
fn mem_spec_peak_gives_dram_efficiency_and_traffic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = dir.path().join("spec.toml");
    std::fs::write(&spec, "[memory]\ndimm_mts = 4800\nchannels = 2\n").expect("write spec");
    // Beyond this host's caches, whatever they are (a 480 MiB L3 holds the old fixed 192 MiB).
    let size = dram_size(&reported_host(), 192 << 20, 6 << 20).to_string();
    let out = run_ok(
        "mem --kernel copy --threads 1 --store temporal --passes 1 --repeat 1 --warmup 0 \
         --json - --spec",
        &[spec.as_os_str(), "--size".as_ref(), size.as_ref()],
    );
    let doc = json_of(&out);
    let r = &doc["records"][0];
    assert_eq!(r["params"]["level"], "DRAM");
    assert_eq!(r["peak"]["value"], 4800e6 * 8.0 * 2.0);
    assert!(r["peak"]["basis"]
        .as_str()
        .expect("basis")
        .contains("2 channels"));
    assert!(r["efficiency"].as_f64().expect("efficiency") > 0.0);
    // Temporal copy really moves 1.5 × the STREAM-counted bytes (write-allocate).
    assert_eq!(r["extra"]["traffic_factor"], 1.5);
}

/// A size given with a section flag sizes that section and adds none: `--latency --size` is one
/// latency point, not the bandwidth section plus the default latency sweep.
#[test]
fn mem_size_stays_in_the_section_it_was_given_for() {
    let out = run_ok(
        "mem --latency --size 8MiB --lat-pattern chase --duration 10ms --repeat 1 --warmup 0 --json -",
        &[],
    );
    let doc = json_of(&out);
    let records = doc["records"].as_array().expect("records");
    assert!(!records.is_empty());
    for r in records {
        assert_eq!(r["benchmark"], "mem.latency", "{r}");
        assert_eq!(r["params"]["working_set_bytes"], 8 << 20, "{r}");
    }
    // Without a section flag, --size is still the bandwidth arrays' size.
    let out = run_ok(
        "mem --size 64MiB --kernel triad --threads 1 --duration 10ms --repeat 1 --warmup 0 --json -",
        &[],
    );
    for r in json_of(&out)["records"].as_array().expect("records") {
        assert_eq!(r["benchmark"], "mem.bandwidth", "{r}");
    }
}

#[test]
fn mem_bad_input_is_one_line_and_exit_2() {
    assert_usage_error(
        &["mem", "--kernel", "rw", "--block", "8MiB", "--size", "4MiB"],
        "larger than the working set",
    );
    assert_usage_error(&["mem", "--size", "900TiB"], "exceeds the memory available");
    assert_usage_error(&["mem", "--size", "0"], "--size");
    assert_usage_error(&["mem", "--block", "0"], "at least 1 byte");
    assert_usage_error(&["mem", "--block=-4"], "-4");
    assert_usage_error(&["mem", "--threads", "0"], "'0'");
    assert_usage_error(&["mem", "--passes=-1"], "-1");
    assert_usage_error(&["mem", "--kernel", "triad2"], "triad2");
    assert_usage_error(
        &["mem", "--kernel", "triad", "--block", "12"],
        "multiple of 8",
    );
    assert_usage_error(&["mem", "--pattern", "zigzag"], "zigzag");
    assert_usage_error(&["mem", "--store", "sometimes"], "sometimes");
    assert_usage_error(&["mem", "--pages", "1g"], "1g");
    let missing = if cfg!(target_arch = "x86_64") {
        "neon"
    } else {
        "avx2"
    };
    assert_usage_error(&["mem", "--isa", missing], missing);
}

/// Loaded latency, the core-to-core matrix and the NUMA matrix run on this host, whatever its
/// CPUs and nodes: the shapes follow from what `hostbench info` and sysfs report.
#[test]
fn mem_loaded_c2c_and_numa_run_with_checked_shapes() {
    let cpus = hostbench_core::affinity::allowed_cpus();
    let nodes = hostbench_core::host::numa_topology();
    let out = hostbench()
        .args(
            "mem --loaded-latency --traffic read,rw --delays 0,800 --size 16MiB \
             --c2c --numa --duration 3ms --repeat 2 --warmup 0 --json -"
                .split_whitespace(),
        )
        .output()
        .expect("run");
    let doc = json_of(&out);
    // Exit 3 only for sections this host cannot run (one CPU, a kernel without NUMA), each
    // recorded as skipped with its reason.
    let skipped = doc["skipped"].as_array().map_or(0, Vec::len);
    let want = if skipped == 0 { 0 } else { 3 };
    assert_eq!(out.status.code(), Some(want), "{}", doc["skipped"]);
    for s in doc["skipped"].as_array().into_iter().flatten() {
        assert_eq!(s["kind"], "unsupported", "{s}");
    }
    assert_run_contract(&doc);
    // Only the named sections ran.
    assert!(records(&doc, "mem.bandwidth").is_empty());
    assert!(records(&doc, "mem.latency").is_empty());

    let loaded = records(&doc, "mem.loaded_latency");
    if cpus.len() >= 2 {
        // 2 traffic kinds x 2 delays, every CPU (one chasing).
        assert_eq!(loaded.len(), 4, "{}", doc["skipped"]);
        for (r, (traffic, delay)) in
            loaded
                .iter()
                .zip([("read", 0), ("read", 800), ("rw", 0), ("rw", 800)])
        {
            assert_record_contract(r);
            assert_eq!(r["metric"], "latency");
            assert_eq!(r["unit"], "s");
            assert_eq!(r["params"]["traffic"], traffic);
            assert_eq!(r["params"]["delay"], delay);
            assert_eq!(r["params"]["threads"], cpus.len());
            assert_eq!(r["params"]["working_set_bytes"], 16u64 << 20);
            assert_eq!(r["extra"]["traffic_threads"], cpus.len() - 1);
            assert_eq!(r["extra"]["validated"], true);
            let bw = r["extra"]["bandwidth"].as_f64().expect("bandwidth");
            assert!(bw > 0.0, "{r}");
            assert!(r["extra"]["delay_s"].as_f64().expect("delay_s") >= 0.0);
            assert!(r["extra"]["idle_latency_s"].as_f64().expect("idle") > 0.0);
        }
    }

    let c2c = records(&doc, "mem.c2c");
    let pairs = cpus.len() * (cpus.len() - 1) / 2;
    assert_eq!(c2c.len(), 2 * pairs, "{}", doc["skipped"]);
    for r in &c2c {
        assert_record_contract(r);
        let (a, b) = (
            r["params"]["cpu_a"].as_u64().expect("cpu_a") as usize,
            r["params"]["cpu_b"].as_u64().expect("cpu_b") as usize,
        );
        assert!(a < b && cpus.contains(&a) && cpus.contains(&b), "{r}");
        assert!(["one_way", "round_trip"].contains(&r["params"]["mode"].as_str().expect("mode")));
        assert!(["smt", "llc", "package", "socket", "unknown"]
            .contains(&r["extra"]["relation"].as_str().expect("relation")));
        assert!(r["value"].as_f64().expect("value") > 0.0);
    }
    if cpus.len() < 2 {
        assert!(doc["skipped"].to_string().contains("at least two CPUs"));
        assert!(doc["skipped"]
            .to_string()
            .contains("loaded latency needs two CPUs"));
    }

    let numa = records(&doc, "mem.numa");
    // A kernel without NUMA support skips the cells (unsupported), naming why.
    let skipped_numa = doc["skipped"].as_array().map_or(0, |s| {
        s.iter().filter(|s| s["benchmark"] == "mem.numa").count()
    });
    let rows = nodes
        .iter()
        .filter(|n| n.cpus.iter().any(|c| cpus.contains(c)))
        .count();
    let cols = nodes
        .iter()
        .filter(|n| n.mem_bytes > 0 || nodes.len() == 1)
        .count();
    assert_eq!(
        numa.len() + skipped_numa,
        rows * cols * 2,
        "{}",
        doc["skipped"]
    );
    for r in &numa {
        assert_record_contract(r);
        let metric = r["params"]["metric"].as_str().expect("metric");
        assert_eq!(r["unit"], if metric == "bandwidth" { "B/s" } else { "s" });
        let note = r["extra"]["note"].as_str().expect("note");
        assert!(note.contains("bound to node"), "{note}");
        if nodes.len() == 1 {
            assert!(note.contains("one NUMA node"), "{note}");
        }
    }
}

#[test]
fn mem_loaded_c2c_and_numa_bad_input_is_one_line_and_exit_2() {
    assert_usage_error(&["mem", "--delays", ""], "empty delay list");
    assert_usage_error(&["mem", "--delays", "-5"], "'-5'");
    assert_usage_error(&["mem", "--delays", "0,,5"], "empty item");
    assert_usage_error(&["mem", "--delays", "100000000"], "delay 100000000");
    assert_usage_error(&["mem", "--traffic", "write"], "'write'");
    if hostbench_core::affinity::allowed_cpus().len() >= 2 {
        // (A one-CPU host cannot run it at all: that is a skip, not bad input.)
        assert_usage_error(
            &["mem", "--loaded-latency", "--threads", "1"],
            "at least 2 threads",
        );
    }
    assert_usage_error(
        &["mem", "--loaded-latency", "--threads", "4097"],
        "--threads",
    );
    assert_usage_error(
        &["mem", "--numa-nodes", "977"],
        "NUMA node 977 does not exist",
    );
    assert_usage_error(&["mem", "--numa-nodes", "x"], "'x'");
    assert_usage_error(&["mem", "--c2c-cpus", "0,100000"], "CPU 100000 is not one");
    assert_usage_error(&["mem", "--c2c-cpus", "3-1"], "descending");
}

#[test]
fn mem_sweep_and_latency_records_are_labelled() {
    // The labels come from this host's caches: the test computes what each size should be called
    // from the inventory the binary reports, and sizes its largest point beyond every cache.
    let host = reported_host();
    let sweep_sizes = [16 << 10, 4 << 20, dram_size(&host, 96 << 20, 1 << 20)];
    let lat_sizes = [16u64 << 10, 4 << 20];
    let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let out = run_ok(
        "mem --sweep --threads 1 --latency --lat-pattern chase,seq,random --chains 1,4 \
         --pages 4k,huge --duration 2ms --repeat 2 --warmup 0 --json -",
        &[
            "--sweep-sizes".as_ref(),
            list(&sweep_sizes).as_ref(),
            "--lat-sizes".as_ref(),
            list(&lat_sizes).as_ref(),
        ],
    );
    let doc = json_of(&out);
    let records = doc["records"].as_array().expect("records");
    let sweep: Vec<&Value> = records
        .iter()
        .filter(|r| r["benchmark"] == "mem.bandwidth")
        .collect();
    assert_eq!(sweep.len(), 3);
    for (r, size) in sweep.iter().zip(sweep_sizes) {
        assert_eq!(r["params"]["working_set_bytes"], size);
        assert_eq!(r["params"]["level"], expected_level(&host, size, 1), "{r}");
    }
    assert_eq!(sweep[2]["params"]["level"], "DRAM");
    let lat: Vec<&Value> = records
        .iter()
        .filter(|r| r["benchmark"] == "mem.latency")
        .collect();
    // 3 patterns × 2 chain counts × (16 KiB on 4 KiB pages; 4 MiB on both page kinds): below
    // one huge page the 4 KiB curve alone measures a set.
    assert_eq!(lat.len(), 18, "{:?}", doc["skipped"]);
    assert!(lat.iter().all(|r| r["params"]["pages"] == "4k"
        || r["params"]["working_set_bytes"].as_u64() >= Some(2 << 20)));
    for r in &lat {
        assert_record_contract(r);
        assert_eq!(r["unit"], "s");
        assert_eq!(r["metric"], "latency");
        assert!(r["peak"].is_null(), "no invented latency peak");
        for key in [
            "pattern",
            "working_set_bytes",
            "threads",
            "pages",
            "chains",
            "level",
        ] {
            assert!(r["params"].get(key).is_some(), "params lack {key}: {r}");
        }
        let ws = r["params"]["working_set_bytes"].as_u64().expect("size");
        assert!(lat_sizes.contains(&ws), "{r}");
        assert_eq!(r["params"]["level"], expected_level(&host, ws, 1), "{r}");
        let huge = r["extra"]["huge_fraction"].as_f64().expect("huge_fraction");
        if r["params"]["pages"] == "4k" {
            assert_eq!(huge, 0.0);
        } else if huge < 0.9 {
            // Not granted (THP off or memory fragmented): the record must say so.
            assert!(
                r["warnings"]
                    .as_array()
                    .expect("warnings")
                    .iter()
                    .any(|w| w.as_str().unwrap_or("").contains("huge pages")),
                "{r}"
            );
        }
    }
}

#[test]
fn run_quick_includes_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_ok(
        // Which records appear, not their values: a tenth of the workload (the sweep's sizes
        // are the host's caches whatever the scale).
        "run --only mem --profile quick --scale 0.1 --repeat 1 --warmup 0 --quiet --no-reference --out",
        &[dir.path().as_ref()],
    );
    let doc = common::only_run_json(dir.path());
    let records = doc["records"].as_array().expect("records");
    for bench in ["mem.bandwidth", "mem.latency"] {
        assert!(
            records.iter().any(|r| r["benchmark"] == bench),
            "no {bench} record"
        );
    }
    // The sweep reaches DRAM and starts in L1.
    let levels: Vec<&str> = records
        .iter()
        .filter_map(|r| r["params"]["level"].as_str())
        .collect();
    assert!(
        levels.contains(&"L1") && levels.contains(&"DRAM"),
        "{levels:?}"
    );
}

/// Completions and manual pages come from the CLI definitions, so every command is in them.
#[test]
fn completions_and_man_pages_cover_every_command() {
    let commands = [
        "run", "info", "cpu", "linpack", "mem", "disk", "net", "gpu", "report", "history",
    ];
    for shell in ["bash", "zsh", "fish"] {
        let out = run_ok(&format!("completions {shell}"), &[]);
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains("hostbench"), "{shell}: {script}");
        for c in commands {
            assert!(script.contains(c), "{shell} completion lacks {c}");
        }
    }
    let out = run_ok("man", &[]);
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains(".TH hostbench 1"), "{page}");
    let dir = tempfile::tempdir().expect("tempdir");
    run_ok("man --out", &[dir.path().as_ref()]);
    for c in commands {
        let sub = std::fs::read_to_string(dir.path().join(format!("hostbench-{c}.1")))
            .unwrap_or_else(|e| panic!("hostbench-{c}.1: {e}"));
        assert!(sub.contains(".TH"), "{c}: {sub}");
    }
    let run_page = std::fs::read_to_string(dir.path().join("hostbench-run.1")).expect("run page");
    assert!(run_page.contains("profile"), "{run_page}");
    // A directory that does not exist yet is made, parents included (`install -d`); a path that
    // exists as a file is refused.
    let fresh = dir.path().join("share/man/man1");
    run_ok("man --out", &[fresh.as_ref()]);
    assert!(fresh.join("hostbench-run.1").is_file());
    let file = dir.path().join("hostbench-run.1");
    assert_usage_error(
        &["man", "--out", file.to_str().expect("utf-8 path")],
        "exists and is not a directory",
    );
}

/// `hostbench schema` is a valid JSON Schema that real documents of several kinds satisfy, and
/// that rejects a document breaking the contract.
#[test]
fn result_documents_validate_against_the_published_schema() {
    let schema = json_of(&run_ok("schema", &[]));
    assert_eq!(schema["$id"], "hostbench/result/v1");
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    let check = |doc: &Value, what: &str| {
        let errors: Vec<String> = validator.iter_errors(doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{what}: {errors:?}");
    };
    // Records with peaks, a latency distribution, a skipped case and an invocation.
    let cpu = json_of(&run_ok(
        "cpu --isa scalar --dtype f64,i8 --threads 1 --ops 1e6 --repeat 2 --warmup 0 --json -",
        &[],
    ));
    check(&cpu, "cpu");
    let mem = json_of(&run_ok(
        "mem --latency --size 1MiB --lat-pattern chase --duration 5ms --repeat 1 --warmup 0 --json -",
        &[],
    ));
    check(&mem, "mem latency");
    let out = hostbench()
        .args("cpu --dtype f64 --isa scalar --threads 1 --ops 1e6 --budget 1ns --json -".split(' '))
        .output()
        .expect("run");
    check(&json_of(&out), "all skipped");
    // What a run left out (a GPU's OpenCL twin), as `hostbench run` writes it; a malformed entry
    // is refused.
    let mut left = cpu.clone();
    left["left_out"] = serde_json::json!([{
        "subsystem": "gpu",
        "what": "opencl 1 (NVIDIA H200)",
        "reason": "the same GPU as cuda 0, measured through CUDA"
    }]);
    check(&left, "left out");
    left["left_out"][0]
        .as_object_mut()
        .expect("entry")
        .remove("reason");
    assert!(!validator.is_valid(&left));
    // A document without its records, or with a wrong schema name, is not one.
    let mut broken = cpu.clone();
    broken.as_object_mut().expect("object").remove("records");
    assert!(!validator.is_valid(&broken));
    let mut renamed = cpu;
    renamed["schema"] = Value::from("hostbench/result/v0");
    assert!(!validator.is_valid(&renamed));
}

/// promtool from PATH, or the copy `scripts/test` unpacks into target/tools.
fn promtool() -> Option<std::path::PathBuf> {
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/promtool");
    if local.is_file() {
        return Some(local);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("promtool"))
            .find(|p| p.is_file())
    })
}

/// `--openmetrics FILE` writes the figures in the Prometheus text format, which Prometheus's own
/// checker accepts, with one sample per record labelled by host and parameters: a measuring
/// command's export, and a short run's with every subsystem this host has (network throughput
/// in bytes per second: promtool rejects a `bits` name).
#[test]
fn openmetrics_output_passes_promtool() {
    let dir = tempfile::tempdir().expect("tempdir");
    let prom = dir.path().join("hostbench.prom");
    let out = run_ok(
        "cpu --isa scalar --dtype f64,i8 --threads 1 --ops 1e6 --repeat 2 --warmup 0 --json - --openmetrics",
        &[prom.as_ref()],
    );
    let doc = json_of(&out);
    let text = std::fs::read_to_string(&prom).expect("openmetrics file");
    let samples: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("hostbench_cpu_flops_flops_per_second{"))
        .collect();
    assert_eq!(samples.len(), 1, "{text}");
    assert!(samples[0].contains("dtype=\"f64\"") && samples[0].contains("isa=\"scalar\""));
    let value: f64 = samples[0]
        .rsplit_once(' ')
        .expect("value")
        .1
        .parse()
        .expect("number");
    let record = records(&doc, "cpu.flops")[0];
    // serde_json's default float parser may land one ulp away from the printed shortest form.
    let want = record["value"].as_f64().expect("value");
    assert!(
        (value - want).abs() <= want.abs() * 1e-15,
        "{value} vs {want}"
    );
    promtool_accepts(&prom);

    // A whole (short) run: every subsystem's families.
    let all = dir.path().join("all.prom");
    let scratch = tempfile::tempdir().expect("scratch");
    let res = hostbench()
        .args(
            "run --profile quick --scale 0.05 --repeat 1 --warmup 0 --quiet --no-history \
             --no-reference --out"
                .split_whitespace(),
        )
        .arg(dir.path().join("out"))
        .arg("--disk-dir")
        .arg(scratch.path())
        .arg("--openmetrics")
        .arg(&all)
        .output()
        .expect("run");
    // A case this host skips at so small a scale (exit 3) still leaves every other figure.
    assert!(
        matches!(res.status.code(), Some(0 | 3)),
        "{:?}: {}",
        res.status,
        String::from_utf8_lossy(&res.stderr)
    );
    let text = std::fs::read_to_string(&all).expect("openmetrics file");
    for family in [
        "hostbench_cpu_flops_flops_per_second",
        "hostbench_cpu_linpack_flops_per_second",
        "hostbench_mem_bandwidth_bytes_per_second",
        "hostbench_disk_iops_io_per_second",
        "hostbench_net_throughput_bytes_per_second",
        "hostbench_net_latency_seconds",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family} gauge")),
            "{family}: {text}"
        );
    }
    assert!(!text.contains("bits"), "{text}");
    promtool_accepts(&all);
    assert_usage_error(
        &["cpu", "--openmetrics", "/nonexistent/dir/x.prom"],
        "--openmetrics",
    );
}

/// `report FILE.json --openmetrics F` writes exactly what the measuring command wrote, so a saved
/// run (or one from another machine) is exported without measuring again; several runs make one
/// exposition with a `run` label; an unwritable target is bad input.
#[test]
fn report_exports_a_saved_run_as_openmetrics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (json, measured, again) = (
        dir.path().join("run.json"),
        dir.path().join("measured.prom"),
        dir.path().join("again.prom"),
    );
    run_ok(
        "cpu --isa scalar --dtype f64,i8 --threads 1 --ops 1e6 --repeat 2 --warmup 0 --quiet --json",
        &[json.as_ref(), "--openmetrics".as_ref(), measured.as_ref()],
    );
    run_ok(
        "report --quiet --openmetrics",
        &[again.as_ref(), json.as_ref()],
    );
    // The same families, labels and values; a value may land one ulp away, as serde_json's
    // default float parser reads run.json back.
    let want = std::fs::read_to_string(&measured).expect("measured");
    let got = std::fs::read_to_string(&again).expect("again");
    assert_eq!(got.lines().count(), want.lines().count(), "{got}");
    for (g, w) in got.lines().zip(want.lines()) {
        match (g.rsplit_once(' '), w.rsplit_once(' ')) {
            (Some((gl, gv)), Some((wl, wv))) if !g.starts_with('#') => {
                assert_eq!(gl, wl);
                let (gv, wv): (f64, f64) = (gv.parse().expect("g"), wv.parse().expect("w"));
                assert!((gv - wv).abs() <= wv.abs() * 1e-15, "{g} vs {w}");
            }
            _ => assert_eq!(g, w),
        }
    }
    let both = run_ok("report --openmetrics -", &[json.as_ref(), json.as_ref()]);
    let both = String::from_utf8_lossy(&both.stdout);
    assert_eq!(
        both.matches("# TYPE hostbench_cpu_flops_flops_per_second gauge")
            .count(),
        1,
        "{both}"
    );
    let samples: Vec<&str> = both
        .lines()
        .filter(|l| l.starts_with("hostbench_cpu_flops_flops_per_second{"))
        .collect();
    assert_eq!(samples.len(), 2, "{both}");
    assert!(samples.iter().all(|l| l.contains(",run=\"")), "{both}");
    let several = dir.path().join("several.prom");
    std::fs::write(&several, both.as_bytes()).expect("write");
    promtool_accepts(&several);
    assert_usage_error(
        &[
            "report",
            json.to_str().expect("utf-8"),
            "--openmetrics",
            "/nonexistent/dir/x.prom",
        ],
        "--openmetrics",
    );
}

/// `promtool check metrics` exits 0 on the file (promtool must exist under CI).
fn promtool_accepts(prom: &Path) {
    match promtool() {
        Some(tool) => {
            let check = std::process::Command::new(tool)
                .args(["check", "metrics"])
                .stdin(std::fs::File::open(prom).expect("open"))
                .output()
                .expect("promtool");
            assert!(
                check.status.success(),
                "promtool: {}{}",
                String::from_utf8_lossy(&check.stdout),
                String::from_utf8_lossy(&check.stderr)
            );
        }
        None if std::env::var_os("CI").is_some() => panic!("promtool missing under CI"),
        None => eprintln!("skipped the promtool check: promtool not found"),
    }
}

/// `run` prints one screen: a headline line per benchmark and "what", not every table; the full
/// tables are behind `--verbose` (and always in report.md).
#[test]
fn run_prints_a_summary_and_verbose_prints_the_tables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = "run --only cpu --duration 5ms --repeat 1 --warmup 0 --no-history --no-reference";
    let out = run_ok(&format!("{args} --out"), &[dir.path().as_ref()]);
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("Summary: "), "{summary}");
    assert!(!summary.contains("Peak basis"), "{summary}");
    assert!(
        summary.contains("Measured in ") && summary.contains("cpu "),
        "{summary}"
    );
    for dtype in ["f64", "f32", "i8"] {
        assert!(
            summary
                .lines()
                .any(|l| l.starts_with("cpu.") && l.split_whitespace().nth(1) == Some(dtype)),
            "no {dtype} headline: {summary}"
        );
    }
    let out = run_ok(&format!("{args} --verbose --out"), &[dir.path().as_ref()]);
    let tables = String::from_utf8_lossy(&out.stdout);
    assert!(
        tables.contains("Peak basis") && !tables.contains("Summary: "),
        "{tables}"
    );
    assert!(summary.lines().count() < tables.lines().count());
}

#[test]
fn peers_lists_every_reference_tool_found_or_not() {
    let out = common::run_ok("peers --json", &[]);
    let peers = common::json_of(&out);
    let names: Vec<&str> = peers
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    for want in ["likwid-bench", "fio", "iperf3", "sockperf", "clpeak"] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    let likwid = &peers[0];
    assert_eq!(likwid["package"], "likwid");
    let subsystems: Vec<&str> = likwid["uses"]
        .as_array()
        .expect("uses")
        .iter()
        .filter_map(|u| u["subsystem"].as_str())
        .collect();
    assert_eq!(subsystems, ["cpu", "mem"]);
    if std::env::var_os("CI").is_some() {
        // scripts/test installs likwid and iperf3: found, with the package's version.
        assert_eq!(likwid["found"], true, "{likwid}");
        assert!(likwid["version"].is_string(), "{likwid}");
    }
    // With PATH hidden every tool is missing, and the text says how to install it.
    let empty = tempfile::tempdir().expect("tmp");
    let out = common::hostbench()
        .env("PATH", empty.path())
        .arg("peers")
        .output()
        .expect("peers");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("not installed (apt install likwid)"),
        "{text}"
    );
    // How each tool is run comes from the code: fio stands beside a standard run's first disk
    // case and every case of `disk --reference`.
    assert!(text.contains("hostbench cpu --reference"), "{text}");
    let fio: String = text
        .lines()
        .skip_while(|l| !l.starts_with("fio "))
        .take_while(|l| l.starts_with("fio ") || l.starts_with(' '))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        fio.contains("run by: hostbench run (profiles standard, full): beside the first case")
            && fio.contains("hostbench disk --reference"),
        "{fio}"
    );
}

#[test]
fn mem_reference_runs_likwid_bench_beside_whole_array_cases() {
    if !common::on_path("likwid-bench") {
        assert!(std::env::var_os("CI").is_none(), "CI installs likwid");
        return;
    }
    let doc = json_of(&run_ok(
        "mem --bandwidth --kernel triad,scale --store temporal --threads 1 --size 8000000 \
         --duration 50ms --repeat 1 --warmup 0 --reference --json -",
        &[],
    ));
    let records = doc["records"].as_array().expect("records");
    let triad = records
        .iter()
        .find(|r| r["params"]["kernel"] == "triad")
        .expect("triad");
    assert_eq!(triad["reference"]["tool"], "likwid-bench", "{triad}");
    assert!(triad["reference"]["ratio"]
        .as_f64()
        .is_some_and(|r| r > 0.0));
    let cmd = triad["extra"]["reference_command"]
        .as_str()
        .expect("command");
    // The same working set as hostbench's arrays (cut to whole cache lines), in likwid's kB.
    let ws = triad["params"]["working_set_bytes"].as_u64().expect("ws");
    // Iterations fixed (`-i`) for about a second of streaming at hostbench's rate, instead of
    // likwid-bench's own search for that count.
    let want = format!("-W N:{}kB:1 -i ", ws / 1000);
    let iterations = cmd.split_once(&want).map(|(_, i)| i.parse::<u64>());
    assert!(
        cmd.starts_with("likwid-bench -t stream") && matches!(iterations, Some(Ok(i)) if i >= 2),
        "{cmd}"
    );
    // scale has no likwid kernel: a note, not a failure.
    let scale = records
        .iter()
        .find(|r| r["params"]["kernel"] == "scale")
        .expect("scale");
    assert!(scale["reference"].is_null());
    assert!(
        scale["warnings"]
            .to_string()
            .contains("likwid-bench has no kernel"),
        "{scale}"
    );
}

#[test]
fn linpack_reference_solves_the_same_system_with_openblas() {
    let found = common::hostbench()
        .args(["peers", "--json"])
        .output()
        .map(|o| json_of(&o))
        .ok()
        .and_then(|p| {
            p.as_array()
                .and_then(|a| a.iter().find(|t| t["name"] == "libopenblas.so.0").cloned())
        })
        .is_some_and(|t| t["found"] == true);
    if !found {
        assert!(std::env::var_os("CI").is_none(), "CI installs libopenblas0");
        return;
    }
    let doc = json_of(&run_ok(
        "linpack --n 256 --threads 1 --repeat 2 --warmup 0 --reference --json -",
        &[],
    ));
    let r = &doc["records"][0];
    assert_eq!(r["reference"]["tool"], "OpenBLAS", "{r}");
    assert!(r["reference"]["version"]
        .as_str()
        .is_some_and(|v| v.contains("OpenBLAS")));
    assert!(r["reference"]["ratio"].as_f64().is_some_and(|x| x > 0.0));
    let cmd = r["extra"]["reference_command"].as_str().expect("command");
    assert!(
        cmd.contains("dgetrf_ + dgetrs_") && cmd.contains("n=256"),
        "{cmd}"
    );
}

/// A reader that goes away (`hostbench peers | head -1`) ends hostbench quietly with status 0:
/// no panic, no error line. Both ways output leaves: the printed tables (`peers`) and the
/// written documents (`completions`).
#[test]
fn a_closed_stdout_ends_quietly() {
    for args in [&["peers"][..], &["completions", "bash"][..]] {
        // The read end is closed before hostbench starts, so its first write fails (EPIPE).
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("hostbench"))
            .args(args)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}
