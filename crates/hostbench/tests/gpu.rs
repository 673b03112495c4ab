//! GPU integration tests: the OpenCL path runs for real on PoCL (the CPU as an OpenCL device;
//! scripts/test installs it, and under `CI` its absence fails the tests); a machine without any
//! OpenCL driver is simulated by pointing the ICD loader at an empty vendor directory.

mod common;

use common::*;
use serde_json::Value;

/// Is an OpenCL device there? Under CI it must be (scripts/test installs pocl-opencl-icd).
fn opencl_device() -> bool {
    let out = hostbench()
        .args(["gpu", "--list", "--backend", "opencl"])
        .output()
        .expect("run");
    let present = out.status.success();
    if !present {
        assert!(
            std::env::var_os("CI").is_none(),
            "no OpenCL device in CI (pocl-opencl-icd missing?): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    present
}

#[test]
fn list_shows_the_opencl_device() {
    if !opencl_device() {
        return;
    }
    let out = run_ok("gpu --list", &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.starts_with("opencl 0: ")), "{text}");
    // Every backend is accounted for: a device line, or why there is none.
    assert!(text.contains("cuda"), "{text}");
}

/// PoCL's CPU device gets as many workers as hostbench may use CPUs: under `taskset -c 0` it lists
/// one compute unit (PoCL alone starts one per online CPU), unless the user chose a count.
#[test]
fn pocl_gets_the_cpus_of_the_affinity_mask() {
    if !opencl_device() || !on_path("taskset") {
        return;
    }
    let bin = assert_cmd::cargo::cargo_bin("hostbench");
    let list = |env: Option<(&str, &str)>| {
        let mut cmd = std::process::Command::new("taskset");
        cmd.args(["-c", "0"])
            .arg(&bin)
            .args(["gpu", "--list", "--backend", "opencl"])
            .env_remove("POCL_CPU_MAX_CU_COUNT")
            .env_remove("POCL_MAX_PTHREAD_COUNT");
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("taskset");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let cpu_line = |text: &str| {
        text.lines()
            .find(|l| l.contains("(cpu,"))
            .map(str::to_owned)
    };
    let Some(pinned) = cpu_line(&list(None)) else {
        return;
    };
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return;
    }
    assert!(pinned.contains("; 1 compute units"), "{pinned}");
    // A count the user set stands: hostbench sets neither variable then, and PoCL lists what it
    // reads (3, or every online CPU where its version reads the other name), never our 1.
    for var in ["POCL_CPU_MAX_CU_COUNT", "POCL_MAX_PTHREAD_COUNT"] {
        let chosen = cpu_line(&list(Some((var, "3")))).expect("cpu line");
        assert!(!chosen.contains("; 1 compute units"), "{var}: {chosen}");
    }
}

/// The default dtypes are what the device has: one it lacks (f16 without `cl_khr_fp16`, as on
/// PoCL for x86) is left out, so the default run is complete (exit 0); asked for by name, the
/// same dtype is a skipped case (exit 3 beside the others).
#[test]
fn default_gpu_dtypes_are_the_devices_own() {
    if !opencl_device() {
        return;
    }
    let args = "gpu --backend opencl --device 0 --vector-width 1 --duration 5ms --repeat 1 \
                --warmup 0 --json -";
    let out = hostbench()
        .args(args.split_whitespace())
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let doc = json_of(&out);
    assert!(doc["skipped"].as_array().is_none_or(Vec::is_empty), "{doc}");
    let ran: Vec<&str> = records(&doc, "gpu.flops")
        .iter()
        .chain(records(&doc, "gpu.iops").iter())
        .filter_map(|r| r["params"]["dtype"].as_str())
        .collect();
    // f32 and i32 every OpenCL device has; f64 and f16 are extensions.
    assert!(ran.contains(&"f32") && ran.contains(&"i32"), "{ran:?}");
    if !ran.contains(&"f16") {
        let out = hostbench()
            .args(args.split_whitespace())
            .args(["--dtype", "f32,f16"])
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(3));
        let doc = json_of(&out);
        assert_eq!(doc["skipped"][0]["params"]["dtype"], "f16");
    }
}

#[test]
fn opencl_kernels_are_validated_and_records_follow_the_contract() {
    if !opencl_device() {
        return;
    }
    let out = hostbench()
        .args(
            "gpu --backend opencl --device 0 --dtype f64,f32,f16,i32,i8 --vector-width 1,16 \
             --kernel read,write,copy --block 1,1000,1MiB --direction h2d,d2h \
             --host-memory pageable,pinned --transfer-block 4KiB --launch --duration 10ms \
             --repeat 2 --warmup 0 --json -"
                .split_whitespace(),
        )
        .output()
        .expect("run");
    // f16 needs cl_khr_fp16, which PoCL on x86 may lack: then it is skipped (exit 3).
    let code = out.status.code();
    assert!(
        code == Some(0) || code == Some(3),
        "{:?}: {}",
        code,
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_of(&out);
    assert_run_contract(&doc);
    let skipped = doc["skipped"].as_array().cloned().unwrap_or_default();
    for s in &skipped {
        assert_eq!(s["params"]["dtype"], "f16", "only f16 may be skipped: {s}");
        assert!(s["reason"]
            .as_str()
            .expect("reason")
            .contains("cl_khr_fp16"));
    }
    for r in doc["records"].as_array().expect("records") {
        assert_record_contract(r);
        assert_eq!(r["params"]["backend"], "opencl");
        assert_eq!(r["params"]["device"], 0);
        if r["benchmark"] != "gpu.launch" {
            assert_eq!(r["extra"]["validated"], true, "{r}");
        }
        // An OpenCL device has no telemetry to read, and every record says so.
        let why = r["conditions"]["unavailable"]["gpu"].as_str().unwrap_or("");
        assert!(why.contains("OpenCL devices expose no clock"), "{r}");
    }
    let compute: Vec<&Value> = records(&doc, "gpu.flops")
        .into_iter()
        .chain(records(&doc, "gpu.iops"))
        .collect();
    assert_eq!(compute.len() + skipped.len(), 5);
    for r in &compute {
        let (unit, float) = match r["params"]["dtype"].as_str().expect("dtype") {
            "f64" | "f32" | "f16" => ("FLOP/s", true),
            _ => ("OP/s", false),
        };
        assert_eq!(r["unit"], unit);
        assert_eq!(r["benchmark"], if float { "gpu.flops" } else { "gpu.iops" });
        // The FMA pipes, as against the tensor cores (unit=tensor, CUDA only).
        assert_eq!(r["params"]["unit"], "fma");
        let sweep = r["extra"]["width_sweep"].as_object().expect("sweep");
        assert!(sweep.contains_key("1") && sweep.contains_key("16"), "{r}");
        let w = r["extra"]["vector_width"].as_u64().expect("width");
        assert!(w == 1 || w == 16);
        assert!(r["extra"]["chains"].as_u64().expect("chains") >= 4);
        // PoCL's device is the CPU, whose OpenCL attributes (base clock, one FMA pipe's lanes)
        // would make a peak it exceeds: none is given, and the note says where to look.
        assert!(r["peak"].is_null() && r["efficiency"].is_null(), "{r}");
        assert!(r["extra"]["peak_note"]
            .as_str()
            .expect("note")
            .contains("hostbench cpu"));
    }
    let bw = records(&doc, "gpu.bandwidth");
    assert_eq!(bw.len(), 9);
    for r in &bw {
        assert_eq!(r["unit"], "B/s");
        for key in ["kind", "block_bytes"] {
            assert!(r["params"].get(key).is_some(), "{r}");
        }
        // OpenCL reports no memory clock: no invented peak, the reason instead.
        assert!(r["peak"].is_null());
        assert!(r["extra"]["peak_note"]
            .as_str()
            .expect("note")
            .contains("OpenCL"));
    }
    let tiny = bw
        .iter()
        .find(|r| r["params"]["block_bytes"] == 1)
        .expect("1 B block");
    assert!(tiny["extra"]["note"]
        .as_str()
        .expect("note")
        .contains("launch"));
    let xfer = records(&doc, "gpu.transfer");
    assert_eq!(xfer.len(), 4);
    assert!(xfer
        .iter()
        .any(|r| r["params"]["kind"] == "d2h" && r["params"]["host_memory"] == "pinned"));
    let launch = records(&doc, "gpu.launch");
    assert_eq!(launch.len(), 1);
    assert_eq!(launch[0]["unit"], "s");
    assert_eq!(launch[0]["metric"], "latency");
}

#[test]
fn no_opencl_driver_and_no_cuda_driver_is_a_clean_no_device() {
    let empty = tempfile::tempdir().expect("tempdir");
    let cuda_gpu = std::path::Path::new("/dev/nvidia0").exists();
    for args in [&["gpu"][..], &["gpu", "--list"], &["gpu", "--json", "-"]] {
        let out = hostbench()
            .args(args)
            .env("OCL_ICD_VENDORS", empty.path())
            .output()
            .expect("run");
        if cuda_gpu {
            continue;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains("no GPU or OpenCL device found"), "{err}");
        assert!(err.contains("opencl: ") && err.contains("cuda: "), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        if args.contains(&"-") {
            let doc = json_of(&out);
            assert_eq!(doc["skipped"][0]["benchmark"], "gpu");
            assert_eq!(doc["skipped"][0]["kind"], "unsupported");
        }
    }
    // `run` on a host without a GPU: the section is not applicable (with the reason), not
    // skipped, so the run is complete and exits 0.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = hostbench()
        .args("run --only cpu,gpu --duration 5ms --repeat 1 --warmup 0 --out".split(' '))
        .arg(dir.path())
        .env("OCL_ICD_VENDORS", empty.path())
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    let doc = only_run_json(dir.path());
    assert!(!doc["records"].as_array().expect("records").is_empty());
    if !cuda_gpu {
        assert_eq!(out.status.code(), Some(0), "{err}");
        let summary = String::from_utf8_lossy(&out.stdout);
        assert!(summary.contains("Not on this host: gpu: "), "{summary}");
        let na = &doc["not_applicable"][0];
        assert_eq!(na["subsystem"], "gpu");
        assert!(na["reason"]
            .as_str()
            .expect("reason")
            .contains("no OpenCL platform"));
        assert!(doc["skipped"].as_array().is_none_or(|s| s
            .iter()
            .all(|s| !s["benchmark"].as_str().unwrap_or("").starts_with("gpu"))));
        // The report says so too.
        let run_dir = std::fs::read_dir(dir.path())
            .expect("dir")
            .flatten()
            .next()
            .expect("run dir");
        let md = std::fs::read_to_string(run_dir.path().join("report.md")).expect("report.md");
        assert!(
            md.contains("## Not on this host") && md.contains("- gpu: no GPU or OpenCL device"),
            "{md}"
        );
    }
}

#[test]
fn run_includes_the_gpu_section_when_a_device_exists() {
    if !opencl_device() {
        return;
    }
    // The quick profile runs no reference tool unless asked (it would double its minute).
    let quick = tempfile::tempdir().expect("tempdir");
    run_ok(
        "run --only gpu --profile quick --duration 5ms --repeat 1 --warmup 0 --quiet --out",
        &[quick.path().as_ref()],
    );
    let doc = only_run_json(quick.path());
    assert!(referenced(&doc).is_empty());
    let dir = tempfile::tempdir().expect("tempdir");
    run_ok(
        "run --only gpu --duration 5ms --repeat 1 --warmup 0 --quiet --out",
        &[dir.path().as_ref()],
    );
    let doc = only_run_json(dir.path());
    assert_run_contract(&doc);
    for bench in ["gpu.flops", "gpu.bandwidth", "gpu.transfer", "gpu.launch"] {
        assert!(!records(&doc, bench).is_empty(), "no {bench} record");
    }
    // The reference column by default: clpeak's global bandwidth beside the read kernel at the
    // largest block, and beside nothing else (one peer run), on a GPU. A CPU device (PoCL, as
    // in CI) runs none: its headline read is a cache-resident block clpeak does not measure.
    let referenced = referenced(&doc);
    let cpu_device = records(&doc, "gpu.bandwidth")
        .iter()
        .all(|r| r["extra"]["device_kind"] == "cpu");
    if cpu_device {
        assert!(referenced.is_empty(), "{referenced:?}");
    } else if clpeak() {
        assert_eq!(referenced.len(), 1, "{referenced:?}");
        let r = referenced[0];
        assert_eq!(r["benchmark"], "gpu.bandwidth");
        assert_eq!(r["params"]["kind"], "read");
        let largest = records(&doc, "gpu.bandwidth")
            .iter()
            .filter_map(|r| r["params"]["block_bytes"].as_u64())
            .max();
        assert_eq!(r["params"]["block_bytes"].as_u64(), largest);
        assert_eq!(r["reference"]["tool"], "clpeak");
        let cmd = r["extra"]["reference_command"].as_str().expect("command");
        assert!(
            cmd.contains("--global-bandwidth") && cmd.contains("-p 0 -d 0"),
            "{cmd}"
        );
    }
}

/// Is clpeak there? Under CI it must be (scripts/test installs it).
fn clpeak() -> bool {
    let present = on_path("clpeak");
    assert!(
        present || std::env::var_os("CI").is_none(),
        "CI installs clpeak"
    );
    present
}

/// `gpu --reference`: clpeak once, on the same device, its compute beside each dtype it has a
/// test for (f32 here) and its global bandwidth beside the read kernel at the largest block only;
/// the record names the command; without clpeak on PATH the cases are measured and the note says
/// how to install it.
#[test]
fn reference_runs_clpeak_on_the_same_device() {
    if !opencl_device() || !clpeak() {
        return;
    }
    let args = "gpu --backend opencl --device 0 --reference --dtype f32 --vector-width 4 \
                --kernel read --block 1MiB,4MiB --duration 20ms --repeat 1 --warmup 0 --json -";
    let out = run_ok(args, &[]);
    let doc = json_of(&out);
    let flops = records(&doc, "gpu.flops");
    let f32 = flops
        .iter()
        .find(|r| r["params"]["dtype"] == "f32")
        .expect("f32 record");
    assert_eq!(f32["reference"]["tool"], "clpeak", "{f32}");
    assert!(f32["reference"]["value"].as_f64().expect("value") > 0.0);
    assert!(f32["reference"]["ratio"].as_f64().expect("ratio") > 0.0);
    let cmd = f32["extra"]["reference_command"].as_str().expect("command");
    assert!(
        cmd.starts_with("clpeak -p 0 -d 0") && cmd.contains("--compute-sp"),
        "{cmd}"
    );
    let bw = records(&doc, "gpu.bandwidth");
    assert_eq!(bw.len(), 2);
    for r in bw {
        let largest = r["params"]["block_bytes"] == 4 << 20;
        assert_eq!(!r["reference"].is_null(), largest, "{r}");
    }

    // Hidden from PATH: the same cases, a note instead of a figure.
    let doc = run_without_path(
        "gpu --backend opencl --device 0 --reference --dtype f32 --vector-width 4 --compute \
         --duration 5ms --repeat 1 --warmup 0 --json -",
    );
    let r = records(&doc, "gpu.flops")[0];
    assert!(r["reference"].is_null());
    assert!(
        r["warnings"]
            .to_string()
            .contains("clpeak not installed: apt install clpeak"),
        "{}",
        r["warnings"]
    );
}

#[test]
fn gpu_bad_input_is_one_line_and_exit_2() {
    assert_usage_error(&["gpu", "--backend", "vulkan"], "vulkan");
    assert_usage_error(&["gpu", "--dtype", "f128"], "f128");
    assert_usage_error(&["gpu", "--kernel", "triad"], "triad");
    assert_usage_error(&["gpu", "--vector-width", "3"], "'3'");
    assert_usage_error(&["gpu", "--block", "0"], "at least 1 byte");
    assert_usage_error(&["gpu", "--block", "2GiB"], "1 GiB");
    assert_usage_error(&["gpu", "--device", "x"], "'x'");
    assert_usage_error(&["gpu", "--host-memory", "locked"], "locked");
    // OpenCL has no portable tensor instruction: asking for the tensor cores there is refused.
    assert_usage_error(
        &["gpu", "--tensor", "--backend", "opencl"],
        "--backend cuda",
    );
    assert_usage_error(&["gpu", "--tensor-dtype", "fp4"], "fp4");
    if opencl_device() {
        assert_usage_error(
            &["gpu", "--backend", "opencl", "--device", "7"],
            "no device 7",
        );
    }
}

/// `hostbench gpu --tensor` where CUDA has no device: one line saying so and exit 3, nothing
/// panics; through an OpenCL device (PoCL) every precision is a skip with the reason.
#[test]
fn tensor_without_a_cuda_device_is_one_line_and_exit_3() {
    if std::path::Path::new("/dev/nvidia0").exists() {
        return;
    }
    let out = hostbench()
        .args(["gpu", "--tensor", "--backend", "cuda", "--json", "-"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("cuda: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    if !opencl_device() {
        return;
    }
    let out = hostbench()
        .args(["gpu", "--tensor-dtype", "bf16,fp8-e4m3", "--json", "-"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let doc = json_of(&out);
    let skipped = doc["skipped"].as_array().expect("skipped");
    for t in ["bf16", "fp8-e4m3"] {
        let s = skipped
            .iter()
            .find(|s| s["params"]["dtype"] == t && s["params"]["unit"] == "tensor")
            .unwrap_or_else(|| panic!("no skip for {t}: {skipped:?}"));
        assert_eq!(s["benchmark"], "gpu.flops");
        assert!(
            s["reason"]
                .as_str()
                .expect("reason")
                .contains("no portable tensor-core instruction"),
            "{s}"
        );
    }
    // Only the tensor section ran: no FMA or memory records.
    assert!(
        doc["records"].as_array().is_none_or(|r| r.is_empty()),
        "{doc}"
    );
}
