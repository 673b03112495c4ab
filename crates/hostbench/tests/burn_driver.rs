//! `hostbench burn --only gpu` through its real driver calls on a host without a GPU: stand-ins
//! for the NVIDIA driver's libraries (tests/data/fake_nvml.c, tests/data/fake_cuda.c, built here
//! with the C compiler that links Rust) first on `LD_LIBRARY_PATH`.
//!
//! * NVML alone: one GPU whose uncorrectable ECC count rises during the burn and whose event set
//!   hands out XID 13 and XID 79. The burn must fail naming the GPU, its bus, the counter and the
//!   XID, and warn of the application-caused XID.
//! * CUDA with NVML: a 4-SM GPU (compute capability 6.1, no tensor cores) that runs the burn's
//!   PTX kernels on the host, reading each launch's arguments by the PTX's own parameter list.
//!   A clean burn passes with every SM covered, the pattern buffer halved to what the driver
//!   grants, and NVML's clock, temperature and power in the timeline; a faulty SM, a flipped
//!   memory word and an uncorrectable ECC error from the driver each fail it, named; a device
//!   with no memory to give is `unknown`, never a pass; on two GPUs, the faulty one is named.
//! * The driver's entry points: the stand-in exports exactly those the CUDA backend looks up
//!   first (`hostbench_gpu::cuda::ENTRY_POINTS`), and one built without an entry point (an older
//!   driver) makes CUDA unsupported, naming it, where cudarc would panic at its first call;
//!   `hostbench gpu` runs every section on the stand-in without a call outside them.

use std::path::Path;
use std::process::{Command, Output};

/// The stand-in `src` (under tests/data) built into `dir` as `lib`; None (after saying why)
/// where no C compiler exists outside CI.
fn fake_lib(dir: &Path, src: &str, lib: &str) -> Option<()> {
    fake_lib_with(dir, src, lib, &[])
}

/// `fake_lib` with extra compiler flags (`-DFAKE_CUDA_OLD`).
fn fake_lib_with(dir: &Path, src: &str, lib: &str, flags: &[&str]) -> Option<()> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(src);
    let built = Command::new("cc")
        .args(flags)
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(dir.join(lib))
        .arg(&src)
        .arg("-lm")
        .status();
    match built {
        Ok(s) if s.success() => Some(()),
        Ok(s) => panic!("cc failed on {}: {s}", src.display()),
        Err(e) if std::env::var_os("CI").is_some() => panic!("CI needs cc for this test: {e}"),
        Err(e) => {
            eprintln!("skipped: no C compiler (cc: {e})");
            None
        }
    }
}

fn fake_nvml(dir: &Path) -> Option<()> {
    fake_lib(dir, "fake_nvml.c", "libnvidia-ml.so.1")
}

#[test]
fn an_ecc_rise_and_xid_79_during_the_burn_fail_it_naming_the_gpu_and_xid_13_warns() {
    let dir = tempfile::tempdir().unwrap();
    if fake_nvml(dir.path()).is_none() {
        return;
    }
    let out = dir.path().join("o");
    let o = Command::new(env!("CARGO_BIN_EXE_hostbench"))
        .args(["burn", "--duration", "1s", "--only", "gpu", "--out"])
        .arg(&out)
        .env("LD_LIBRARY_PATH", dir.path())
        .env("FAKE_NVML_MARK", dir.path().join("ecc-read"))
        .env_remove("HOSTBENCH_FAULT")
        .env_remove("HOSTBENCH_HEALTH_ROOT")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{text}\n{err}");
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with(
            "FAIL gpu0 (0000:41:00.0): uncorrectable ECC errors rose 0 → 2 during the burn; \
             gpu0 (0000:41:00.0): XID 79 at "
        ),
        "{text}"
    );
    assert!(first.contains("(GPU has fallen off the bus)"), "{first}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("warn gpu0 (0000:41:00.0): XID 13 at ")
                && l.contains("the burn's own kernel could have caused it")),
        "{text}"
    );
    assert!(!text.contains("not watched"), "{text}");

    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("burn.json")).unwrap()).unwrap();
    assert_eq!(rec["verdict"], "fail");
    let xids: Vec<u64> = rec["xid"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["xid"].as_u64().unwrap())
        .collect();
    assert_eq!(xids, [13, 79], "{}", rec["xid"]);
    assert_eq!(rec["xid"]["watched"], serde_json::json!([0]));
    assert_eq!(rec["xid"]["events"][1]["bus"], "0000:41:00.0");
    let rises = rec["gpu_rises"].as_array().unwrap();
    assert_eq!(rises.len(), 1, "{rises:?}");
    assert_eq!(rises[0]["counter"], "ecc_volatile_uncorrected");
    assert_eq!(rises[0]["severity"], "fail");
    assert_eq!(rises[0]["label"], "Fake GPU");
    assert_eq!(
        (rises[0]["before"].as_u64(), rises[0]["after"].as_u64()),
        (Some(0), Some(2))
    );
}

/// The largest allocation the fake CUDA driver grants: the burn asks for nine tenths of the free
/// 1.5 GiB less 1 GiB (about 358 MiB) and must halve its way down to it.
const MAX_ALLOC: u64 = 100 << 20;

/// A CUDA burn of `duration` against the fake GPU (and the fake NVML, without XIDs), with the
/// fault variables `faults` set: its output and its record.
fn cuda_burn(duration: &str, faults: &[(&str, &str)]) -> Option<(Output, serde_json::Value)> {
    let dir = tempfile::tempdir().expect("temp dir");
    fake_lib(dir.path(), "fake_cuda.c", "libcuda.so")?;
    fake_nvml(dir.path())?;
    let out = dir.path().join("o");
    let o = Command::new(env!("CARGO_BIN_EXE_hostbench"))
        .args(["burn", "--only", "gpu", "--gpu-backend", "cuda"])
        .args(["--duration", duration, "--out"])
        .arg(&out)
        .env("LD_LIBRARY_PATH", dir.path())
        .env("FAKE_NVML_XIDS", "none")
        .env("FAKE_NVML_LOG", dir.path().join("nvml.log"))
        .env("FAKE_CUDA_MAX_ALLOC", MAX_ALLOC.to_string())
        .envs(faults.iter().copied())
        .env_remove("HOSTBENCH_FAULT")
        .env_remove("HOSTBENCH_HEALTH_ROOT")
        .output()
        .expect("run hostbench");
    let rec = std::fs::read_to_string(out.join("burn.json")).unwrap_or_else(|e| {
        panic!(
            "burn.json not written ({e}): {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    // Every NVML initialisation (counters, XID watch, telemetry) was paired with a shutdown.
    let log = std::fs::read_to_string(dir.path().join("nvml.log")).unwrap_or_default();
    let count = |what| log.lines().filter(|l| *l == what).count();
    assert!(count("init") > 0, "NVML was used: {log}");
    assert_eq!(count("init"), count("shutdown"), "{log}");
    Some((o, serde_json::from_str(&rec).expect("burn.json is JSON")))
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A 1 s CUDA burn with `faults` that must fail (exit 1): its first line and its record.
fn failed_burn(faults: &[(&str, &str)]) -> Option<(String, serde_json::Value)> {
    let (o, rec) = cuda_burn("1s", faults)?;
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    Some((text.lines().next().unwrap_or_default().to_string(), rec))
}

/// The record's unit `name` on the fake GPU.
fn unit<'a>(rec: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    rec["units"]
        .as_array()
        .expect("units")
        .iter()
        .find(|u| u["resource"] == "gpu" && u["unit"] == name)
        .unwrap_or_else(|| panic!("no unit {name}: {}", rec["units"]))
}

#[test]
fn a_clean_cuda_burn_covers_every_sm_and_draws_nvml_readings() {
    let Some((o, rec)) = cuda_burn("2s", &[]) else {
        return;
    };
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.starts_with("PASS "), "{text}");
    assert!(
        text.contains("gpu cuda0 tensor: not run (compute capability 6.1 has no tensor cores"),
        "{text}"
    );
    assert!(
        !text.contains("not watched") && !text.contains("not read"),
        "{text}"
    );
    for name in ["fma-f32", "fma-f64", "mem-patterns"] {
        let u = unit(&rec, name);
        assert_eq!(
            (&u["status"], &u["place"]),
            (&"pass".into(), &"cuda0".into()),
            "{u}"
        );
        assert!(u["checks"].as_u64().unwrap() > 0, "{u}");
    }
    let g = &rec["gpus"][0];
    assert_eq!(g["pci_bus"], "00000000:41:00.0", "{g}");
    assert_eq!(
        (g["sms"].as_u64(), g["sms_covered"].as_u64()),
        (Some(4), Some(4)),
        "{g}"
    );
    let mem = g["mem_bytes"].as_u64().unwrap();
    assert!(
        mem <= MAX_ALLOC && mem > MAX_ALLOC / 2,
        "halved to what fits: {g}"
    );
    assert!(
        g.get("errors_by_sm").is_none() && g.get("stopped").is_none(),
        "{g}"
    );
    // Each interval's point carries NVML's readings of the GPU found by its PCI address.
    let points: Vec<_> = rec["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["unit"] == "cuda0 fma-f32")
        .collect();
    assert!(!points.is_empty(), "{}", rec["timeline"]);
    for p in points {
        assert_eq!(
            (
                p["clock_mhz"].as_f64(),
                p["temp_c"].as_f64(),
                p["power_w"].as_f64()
            ),
            (Some(1410.0), Some(47.0), Some(312.0)),
            "{p}"
        );
    }
    assert_eq!(rec["xid"]["watched"], serde_json::json!([0]));
}

#[test]
fn a_faulty_sm_fails_the_burn_naming_the_gpu_sm_and_unit() {
    let Some((first, rec)) = failed_burn(&[("FAKE_CUDA_BAD_SM", "2")]) else {
        return;
    };
    assert!(
        first.starts_with("FAIL cuda0 (00000000:41:00.0) fma-f32: ")
            && first.contains("(SM 2), thread 0")
            && first.contains("bits [3]"),
        "{first}"
    );
    // Only SM 2's blocks were wrong, and the other units passed.
    let by_sm = rec["gpus"][0]["errors_by_sm"].as_object().unwrap();
    assert_eq!(by_sm.keys().collect::<Vec<_>>(), ["sm2"], "{by_sm:?}");
    assert_eq!(unit(&rec, "fma-f32")["errors"], by_sm["sm2"]);
    assert_eq!(unit(&rec, "fma-f64")["status"], "pass");
    assert_eq!(unit(&rec, "mem-patterns")["status"], "pass");
}

#[test]
fn a_flipped_word_in_gpu_memory_fails_the_burn_naming_its_offset() {
    let Some((first, rec)) = failed_burn(&[("FAKE_CUDA_BAD_WORD", "1000")]) else {
        return;
    };
    assert!(
        first.starts_with("FAIL cuda0 (00000000:41:00.0) mem-patterns: ")
            && first.contains("first at offset 0xfa0 (")
            && first.contains("bits [5]"),
        "{first}"
    );
    assert_eq!(unit(&rec, "fma-f32")["status"], "pass");
}

#[test]
fn an_uncorrectable_ecc_error_from_the_driver_fails_and_no_memory_is_unknown() {
    // Launch 5 is a probe of the f32 chains: every call after it fails, as on a real GPU.
    let Some((first, rec)) = failed_burn(&[("FAKE_CUDA_FAIL_LAUNCH", "5")]) else {
        return;
    };
    assert!(
        first.starts_with("FAIL cuda0 (00000000:41:00.0) fma-f32: ")
            && first.contains("cuLaunchKernel: the GPU reported an uncorrectable ECC error"),
        "{first}"
    );
    assert!(!rec["gpus"][0]["stopped"].as_array().unwrap().is_empty());

    let Some((o, rec)) = cuda_burn("1s", &[("FAKE_CUDA_MAX_ALLOC", "1000")]) else {
        return;
    };
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(5), "{text}");
    assert!(
        text.starts_with("UNKNOWN not run: gpu; stopped: cuda0 ")
            && text.contains("out of device memory"),
        "{text}"
    );
    assert_eq!(unit(&rec, "fma-f32")["status"], "not_run");
}

/// The stand-in exports exactly the entry points the backend checks at its probe, so a call
/// the list misses panics in these tests (cudarc resolves it, the stand-in lacks it) instead of
/// on an operator's older driver.
#[test]
fn the_stand_in_driver_exports_exactly_the_entry_points_the_probe_checks() {
    let dir = tempfile::tempdir().unwrap();
    if fake_lib(dir.path(), "fake_cuda.c", "libcuda.so").is_none() {
        return;
    }
    let nm = match Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(dir.path().join("libcuda.so"))
        .output()
    {
        Ok(o) => o,
        Err(e) if std::env::var_os("CI").is_some() => panic!("CI needs nm (binutils): {e}"),
        Err(e) => return eprintln!("skipped: no nm ({e})"),
    };
    assert!(nm.status.success(), "{nm:?}");
    let mut exported: Vec<String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|n| n.starts_with("cu"))
        .map(String::from)
        .collect();
    exported.sort();
    let mut wanted: Vec<String> = hostbench_gpu::cuda::ENTRY_POINTS
        .iter()
        .map(|s| s.to_string())
        .collect();
    wanted.sort();
    assert_eq!(exported, wanted);
}

#[test]
fn a_driver_without_an_entry_point_is_unsupported_naming_it_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    if fake_lib_with(
        dir.path(),
        "fake_cuda.c",
        "libcuda.so",
        &["-DFAKE_CUDA_OLD"],
    )
    .is_none()
    {
        return;
    }
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hostbench"))
            .args(args)
            .env("LD_LIBRARY_PATH", dir.path())
            .env_remove("HOSTBENCH_FAULT")
            .output()
            .unwrap()
    };
    let lacks = "the CUDA driver lacks cuDevicePrimaryCtxRelease_v2";
    let o = run(&["gpu", "--list", "--backend", "cuda"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains(lacks) && !err.contains("panicked"), "{err}");
    let o = run(&[
        "burn",
        "--only",
        "gpu",
        "--gpu-backend",
        "cuda",
        "--duration",
        "1s",
    ]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(5), "{text}");
    assert!(
        text.starts_with("UNKNOWN not run: gpu") && text.contains(lacks),
        "{text}"
    );
}

/// `hostbench gpu` through every section on the stand-in driver: no call outside the checked
/// entry points (it would panic), the transfers measured (the stand-in's copies are real
/// copies), and every kernel the stand-in refuses reported as unsupported, not as a failure.
#[test]
fn every_gpu_section_runs_on_the_stand_in_driver_or_says_it_is_unsupported() {
    let dir = tempfile::tempdir().unwrap();
    if fake_lib(dir.path(), "fake_cuda.c", "libcuda.so").is_none() {
        return;
    }
    let json = dir.path().join("gpu.json");
    let o = Command::new(env!("CARGO_BIN_EXE_hostbench"))
        .args([
            "gpu",
            "--backend",
            "cuda",
            "--compute",
            "--memory",
            "--transfer",
        ])
        .args(["--launch", "--tensor", "--repeat", "1", "--warmup", "0"])
        .args([
            "--duration",
            "20ms",
            "--block",
            "1MiB",
            "--transfer-block",
            "1MiB",
        ])
        .arg("--json")
        .arg(&json)
        .env("LD_LIBRARY_PATH", dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let records = rec["records"].as_array().unwrap();
    assert_eq!(
        records.len(),
        4,
        "h2d and d2h, pageable and pinned: {records:?}"
    );
    assert!(records.iter().all(|r| r["benchmark"] == "gpu.transfer"));
    let skipped = rec["skipped"].as_array().unwrap();
    for b in ["gpu.flops", "gpu.iops", "gpu.bandwidth", "gpu.launch"] {
        assert!(
            skipped.iter().any(|s| s["benchmark"] == b),
            "{b}: {skipped:?}"
        );
    }
    for s in skipped {
        let reason = s["reason"].as_str().unwrap();
        assert_eq!(s["kind"], "unsupported", "{s}");
        assert!(
            reason.contains("CUDA_ERROR_NOT_SUPPORTED") || reason.contains("no tensor cores"),
            "{s}"
        );
    }
}

/// Two GPUs burned at once, one thread each with its own context: a faulty SM on the second
/// names that GPU (its own PCI address) and SM; the first passes, both fully covered.
#[test]
fn on_two_gpus_the_faulty_one_is_named_and_the_other_passes() {
    let Some((first, rec)) = failed_burn(&[
        ("FAKE_CUDA_DEVICES", "2"),
        ("FAKE_CUDA_BAD_DEVICE", "1"),
        ("FAKE_CUDA_BAD_SM", "3"),
    ]) else {
        return;
    };
    assert!(
        first.starts_with("FAIL cuda1 (00000000:42:00.0) fma-f32: ") && first.contains("(SM 3)"),
        "{first}"
    );
    let gpus = rec["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2, "{gpus:?}");
    for g in gpus {
        assert_eq!(g["sms_covered"], 4, "{g}");
    }
    assert!(gpus[0].get("errors_by_sm").is_none(), "{}", gpus[0]);
    let by_sm = gpus[1]["errors_by_sm"].as_object().unwrap();
    assert_eq!(by_sm.keys().collect::<Vec<_>>(), ["sm3"], "{by_sm:?}");
    let on = |place: &str, name: &str| {
        rec["units"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["place"] == place && u["unit"] == name)
            .unwrap_or_else(|| panic!("{place} {name}"))["status"]
            .clone()
    };
    for name in ["fma-f32", "fma-f64", "mem-patterns"] {
        assert_eq!(on("cuda0", name), "pass", "{name}");
    }
    assert_eq!(on("cuda1", "fma-f32"), "fail");
}
