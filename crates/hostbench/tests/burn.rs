//! `hostbench burn` end to end: a short clean burn passes with every CPU covered and the timeline
//! present (burn.md, and burn.html with its timeline chart); each injected fault (`HOSTBENCH_FAULT`) fails with the first line naming the CPU or
//! address and the unit while the other CPU passes; bad input is one line and exit 2.

use std::process::{Command, Output};

fn burn(args: &[&str], fault: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hostbench"));
    c.arg("burn").args(args).env_remove("HOSTBENCH_FAULT");
    if let Some(f) = fault {
        c.env("HOSTBENCH_FAULT", f);
    }
    c.output().expect("run hostbench")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn allowed_cpus() -> Vec<usize> {
    hostbench_core::affinity::allowed_cpus()
}

#[test]
fn a_short_clean_burn_passes_on_every_cpu_with_a_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    let (o, rec) = burn_record(&["--duration", "3s", "--mem-share", "0.002"], &out);
    let text = stdout(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.lines().next().unwrap().starts_with("PASS "), "{text}");
    for cpu in allowed_cpus() {
        assert!(text.contains(&format!("cpu{cpu}: pass")), "{text}");
    }
    assert!(!text.contains("fault injected"), "{text}");
    assert_eq!(rec["verdict"], "pass");
    assert!(rec.get("fault_injected").is_none());
    let units = rec["units"].as_array().unwrap();
    // Every unit this CPU has ran on every CPU in the each-CPU phase, and none failed.
    let names = |cpu: usize| -> std::collections::BTreeSet<String> {
        units
            .iter()
            .filter(|u| u["cpu"] == cpu && u["phase"] == "each")
            .map(|u| u["unit"].as_str().unwrap().to_string())
            .collect()
    };
    let first = names(allowed_cpus()[0]);
    assert!(
        first.contains("int-lcg") && first.contains("fma-chain"),
        "{first:?}"
    );
    assert!(first.len() >= 3, "{first:?}");
    for cpu in allowed_cpus() {
        assert_eq!(names(cpu), first, "cpu{cpu}");
    }
    for pattern in [
        "walking-ones",
        "walking-zeros",
        "moving-inversions",
        "random",
        "address-in-address",
    ] {
        assert!(
            units
                .iter()
                .any(|u| u["unit"] == pattern && u["status"] == "pass"),
            "{pattern}"
        );
    }
    assert!(units.iter().all(|u| u["errors"] == 0));
    let timeline = rec["timeline"].as_array().unwrap();
    assert!(!timeline.is_empty());
    // The intervals the sampler reached carry the others' CPU time (/proc is always readable
    // here), so a slowdown can be told from a neighbour's.
    assert!(
        timeline
            .iter()
            .any(|p| p["others_cpus"].as_f64().is_some_and(|o| o >= 0.0)),
        "{timeline:?}"
    );
    let md = std::fs::read_to_string(out.join("burn.md")).unwrap();
    assert!(md.contains("## Timeline"), "{md}");
    burn_html_draws_the_timeline(&out, &rec);
    report_renders_the_saved_burn(&out);
}

/// `hostbench report burn.json`: the saved record renders again, the page the same as the one
/// `--out` wrote (the warned units found again from the timeline); a format a burn has not is a
/// one-line error, exit 2.
fn report_renders_the_saved_burn(out: &std::path::Path) {
    let json = out.join("burn.json");
    let again = out.join("again.html");
    let o = Command::new(env!("CARGO_BIN_EXE_hostbench"))
        .args(["report", json.to_str().expect("utf-8"), "--html"])
        .arg(&again)
        .output()
        .expect("run hostbench report");
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.starts_with("PASS "), "{text}");
    assert_eq!(
        std::fs::read_to_string(&again).expect("again.html"),
        std::fs::read_to_string(out.join("burn.html")).expect("burn.html")
    );
    let o = Command::new(env!("CARGO_BIN_EXE_hostbench"))
        .args(["report", json.to_str().expect("utf-8"), "--csv", "-"])
        .output()
        .expect("run hostbench report");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--csv"), "{err}");
}

/// burn.html: the verdict, an inline SVG chart with one drawn line per timeline unit (each
/// point's tooltip names its unit: `UNIT at T s: R % (…)`), and the clock and temperature
/// panels drawn where the record holds readings and said to be "not readable here" where not.
fn burn_html_draws_the_timeline(out: &std::path::Path, rec: &serde_json::Value) {
    let html = std::fs::read_to_string(out.join("burn.html")).expect("burn.html written");
    assert!(html.contains("<strong>PASS "), "{html}");
    assert!(html.contains("<svg"), "{html}");
    let timeline = rec["timeline"].as_array().expect("timeline");
    let expected: std::collections::BTreeSet<&str> = timeline
        .iter()
        .filter(|p| p["rate"].as_f64().expect("rate") > 0.0)
        .map(|p| p["unit"].as_str().expect("unit"))
        .collect();
    let drawn: std::collections::BTreeSet<&str> = html
        .lines()
        .filter(|l| l.starts_with("<circle"))
        .filter_map(|l| {
            let title = l.split("<title>").nth(1)?;
            let (unit, rest) = title.split_once(" at ")?;
            rest.contains(" % (").then_some(unit)
        })
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(drawn, expected, "drawn series vs timeline units");
    for (key, drawn_title, said) in [
        (
            "clock_mhz",
            "Mean CPU clock per interval",
            "Mean CPU clock: not readable here",
        ),
        (
            "temp_c",
            "Hottest temperature per interval",
            "Hottest temperature: not readable here",
        ),
    ] {
        let read = timeline.iter().any(|p| p.get(key).is_some());
        assert_eq!(html.contains(drawn_title), read, "{key}: {html}");
        assert_eq!(html.contains(said), !read, "{key}: {html}");
    }
}

#[test]
fn an_injected_cpu_fault_names_that_cpu_and_unit_first() {
    let cpus = allowed_cpus();
    let bad = *cpus.last().unwrap();
    let fault = format!("cpu:{bad}:fma:after=100");
    let o = burn(&["--duration", "2s", "--only", "cpu"], Some(&fault));
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with(&format!("FAIL cpu{bad} fma-chain:")),
        "{text}"
    );
    assert!(
        text.contains(&format!("fault injected: HOSTBENCH_FAULT={fault}")),
        "{text}"
    );
    assert!(text.contains(&format!("cpu{bad}: fail")), "{text}");
    for cpu in cpus.iter().filter(|c| **c != bad) {
        assert!(text.contains(&format!("cpu{cpu}: pass")), "{text}");
    }
}

#[test]
fn an_injected_integer_fault_names_the_int_unit() {
    let cpu = allowed_cpus()[0];
    let o = burn(
        &["--duration", "1s", "--only", "cpu"],
        Some(&format!("cpu:{cpu}:int")),
    );
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.starts_with(&format!("FAIL cpu{cpu} int-lcg:")),
        "{text}"
    );
}

#[test]
fn an_injected_memory_flip_names_the_address_and_pattern() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("b.json");
    let o = burn(
        &[
            "--duration",
            "1s",
            "--only",
            "mem",
            "--mem-share",
            "0.001",
            "--json",
            json.to_str().unwrap(),
        ],
        Some("mem:flip:after=777"),
    );
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.starts_with("FAIL memory 0x"), "{text}");
    assert!(
        text.lines().next().unwrap().contains("walking-ones"),
        "{text}"
    );
    assert!(text.contains("bits [5]"), "{text}");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert_eq!(rec["fault_injected"], "mem:flip:after=777");
    assert_eq!(rec["verdict"], "fail");
}

#[test]
fn a_planned_unit_that_cannot_run_is_not_a_pass() {
    // No GPU, whatever the host has: CUDA shown no device, the OpenCL loader no vendor.
    let empty = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_hostbench"))
        .args(["burn", "--duration", "1s", "--only", "gpu"])
        .env_remove("HOSTBENCH_FAULT")
        .env("CUDA_VISIBLE_DEVICES", "")
        .env("OCL_ICD_VENDORS", empty.path())
        .output()
        .expect("run hostbench");
    let text = stdout(&o);
    assert_ne!(o.status.code(), Some(0), "{text}");
    assert!(text.starts_with("UNKNOWN not run: gpu"), "{text}");
    assert!(text.contains("\ngpu: not run (no GPU"), "{text}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (args, fault) in [
        (vec!["--duration", "soon"], None),
        (vec!["--duration", "0s"], None),
        (vec!["--only", "cpu,tape"], None),
        (vec!["--mem-share", "1.5"], None),
        (vec!["--mem-share", "x"], None),
        (vec!["--gpu-backend", "metal"], None),
        (vec![], Some("gpu:block:x")),
        (vec![], Some("cpu:one:fma")),
        (vec![], Some("cpu:0:avx2-fma-f64")),
        (vec![], Some("mem:flip:after=-1")),
    ] {
        let o = burn(&args, fault);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?} {fault:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            o.stdout.is_empty(),
            "{args:?}: nothing measured before the check"
        );
    }
}

/// `--disk-dir`: the disk joins the burn (write, read back, verify every checksummed unit) in a
/// scratch directory that is gone afterwards.
#[test]
fn the_disk_burn_verifies_its_file_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = burn(
        &[
            "--duration",
            "2s",
            "--only",
            "disk",
            "--disk-dir",
            dir.path().to_str().expect("utf-8"),
        ],
        None,
    );
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.starts_with("PASS "), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("disk ") && l.contains("write-read-verify: pass")),
        "{text}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
}

/// An EDAC fixture tree (`HOSTBENCH_HEALTH_ROOT`) with one controller and one labelled DIMM, all
/// counts 0, in which the DIMM counter `fifo` (`dimm_ue_count` or `dimm_ce_count`) is a named
/// pipe: the burn's reading of it blocks until the test writes, so the test knows the "before"
/// counters have been read and can raise them with no race against the burn's start.
const LABEL: &str = "CPU_SrcID#0_MC#0_Chan#1_DIMM#0";
const MC0: &str = "sys/devices/system/edac/mc/mc0";

fn edac_fixture(root: &std::path::Path, fifo: &str) {
    let dimm = root.join(MC0).join("dimm0");
    std::fs::create_dir_all(&dimm).expect("mkdir");
    for (file, text) in [
        ("mc_name", "Fixture IMC#0"),
        ("ce_count", "0"),
        ("ue_count", "0"),
        ("size_mb", "16384"),
        ("dimm0/dimm_label", LABEL),
        ("dimm0/dimm_ce_count", "0"),
        ("dimm0/dimm_ue_count", "0"),
    ] {
        std::fs::write(root.join(MC0).join(file), format!("{text}\n")).expect("write");
    }
    let path = dimm.join(fifo);
    std::fs::remove_file(&path).expect("rm");
    let c = std::ffi::CString::new(path.to_str().expect("utf-8")).expect("no NUL");
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Run a short memory burn on the fixture; once it has read `fifo` (as 0), set each of `raise`
/// (path under mc0, new count) by renaming a file over it, and return the burn's output and record.
fn burn_with_edac_rise(fifo: &str, raise: &[(&str, &str)]) -> (Output, serde_json::Value) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = tempfile::tempdir().expect("tmp");
    let root = dir.path().join("root");
    edac_fixture(&root, fifo);
    let json = dir.path().join("burn.json");
    let child = Command::new(env!("CARGO_BIN_EXE_hostbench"))
        .args(["burn", "--only", "mem", "--mem-share", "0.002"])
        .args(["--duration", "1s", "--json", json.to_str().expect("utf-8")])
        .env_remove("HOSTBENCH_FAULT")
        .env("HOSTBENCH_HEALTH_ROOT", &root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn hostbench");
    let pipe = root.join(MC0).join("dimm0").join(fifo);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    // A non-blocking open for writing succeeds only once the burn has the pipe open for reading.
    let mut w = loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&pipe)
        {
            Ok(w) => break w,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if std::time::Instant::now() > deadline {
                    let o = child.wait_with_output().expect("wait");
                    panic!("the burn never read {fifo}: {o:?}");
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => panic!("{e}"),
        }
    };
    w.write_all(b"0\n").expect("write the before count");
    drop(w);
    for (file, count) in raise {
        let tmp = dir.path().join("count");
        std::fs::write(&tmp, format!("{count}\n")).expect("write");
        std::fs::rename(&tmp, root.join(MC0).join(file)).expect("rename");
    }
    let o = child.wait_with_output().expect("wait");
    let rec = serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default())
        .unwrap_or(serde_json::Value::Null);
    (o, rec)
}

/// An uncorrectable EDAC count that rises during a burn fails it, the first line naming the DIMM
/// by its label and the rise, even though every pattern read back right.
#[test]
fn an_uncorrectable_edac_rise_during_the_burn_fails_naming_the_dimm() {
    let (o, rec) = burn_with_edac_rise(
        "dimm_ue_count",
        &[("ue_count", "1"), ("dimm0/dimm_ue_count", "1")],
    );
    let text = stdout(&o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let first = text.lines().next().expect("a first line");
    assert!(
        first.starts_with(&format!(
            "FAIL EDAC uncorrectable errors rose on mc0/dimm0 ({LABEL}): 0 → 1 during the burn"
        )),
        "{text}"
    );
    assert!(
        !first.contains("on mc0 ("),
        "the DIMM is named, not its controller: {first}"
    );
    assert_eq!(rec["verdict"], "fail");
    let rises = rec["edac_rises"].as_array().expect("edac_rises");
    assert!(
        rises.iter().any(|r| r["device"] == "mc0/dimm0"
            && r["label"] == LABEL
            && r["kind"] == "uncorrectable"
            && r["before"] == 0
            && r["after"] == 1),
        "{rises:?}"
    );
    assert!(rises.iter().any(|r| r["device"] == "mc0"), "{rises:?}");
    assert!(rec["units"]
        .as_array()
        .expect("units")
        .iter()
        .all(|u| u["errors"] == 0));
}

/// A corrected EDAC count that rises is a warning naming the DIMM; the burn still passes.
#[test]
fn a_corrected_edac_rise_during_the_burn_is_a_warning_naming_the_dimm() {
    let (o, rec) = burn_with_edac_rise(
        "dimm_ce_count",
        &[("ce_count", "3"), ("dimm0/dimm_ce_count", "3")],
    );
    let text = stdout(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.starts_with("PASS "), "{text}");
    let warn = format!("warn EDAC corrected errors rose on mc0/dimm0 ({LABEL}): 0 → 3");
    assert!(text.lines().any(|l| l.starts_with(&warn)), "{text}");
    assert_eq!(rec["verdict"], "pass");
    assert!(rec["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .any(|w| w.as_str().is_some_and(|w| w.starts_with(&warn))));
    let rises = rec["edac_rises"].as_array().expect("edac_rises");
    assert!(
        rises
            .iter()
            .all(|r| r["kind"] == "corrected" && r["after"] == 3),
        "{rises:?}"
    );
    assert_eq!(rises.len(), 2, "the controller's and the DIMM's: {rises:?}");
}

/// Is an OpenCL device there? Under CI it must be (scripts/test installs PoCL, the CPU as an
/// OpenCL device): the GPU burn's whole path runs on it there.
fn opencl_device() -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_hostbench"))
        .args(["gpu", "--list", "--backend", "opencl"])
        .output()
        .expect("run hostbench");
    let present = out.status.success();
    assert!(
        present || std::env::var_os("CI").is_none(),
        "no OpenCL device in CI (pocl-opencl-icd missing?)"
    );
    present
}

fn gpu_units(rec: &serde_json::Value) -> Vec<&serde_json::Value> {
    rec["units"]
        .as_array()
        .expect("units")
        .iter()
        .filter(|u| u["resource"] == "gpu")
        .collect()
}

/// The GPU burn on an OpenCL device (PoCL's CPU device in CI): the chains and the memory
/// patterns ran, every result checked and right, the device's coverage and timeline recorded and
/// drawn in burn.html.
#[test]
fn the_gpu_burn_checks_every_unit_on_an_opencl_device() {
    if !opencl_device() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    let (o, rec) = burn_record(
        &[
            "--only",
            "gpu",
            "--gpu-backend",
            "opencl",
            "--duration",
            "2s",
        ],
        &out,
    );
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.starts_with("PASS "), "{text}");
    assert!(text.contains("gpu opencl0 fma-f32: pass"), "{text}");
    assert!(text.contains("gpu opencl0 mem-patterns: pass"), "{text}");
    let units = gpu_units(&rec);
    for name in ["fma-f32", "mem-patterns"] {
        let u = units
            .iter()
            .find(|u| u["unit"] == name && u["place"] == "opencl0")
            .unwrap_or_else(|| panic!("{name}: {units:?}"));
        assert_eq!(u["status"], "pass", "{u}");
        assert!(u["checks"].as_u64().unwrap() > 0, "{u}");
        assert!(u["rate"].as_f64().unwrap() > 0.0, "{u}");
    }
    let g = &rec["gpus"][0];
    assert_eq!(g["place"], "opencl0", "{g}");
    assert!(g["mem_bytes"].as_u64().unwrap() > 0, "{g}");
    assert!(g.get("errors_by_sm").is_none(), "{g}");
    let timeline = rec["timeline"].as_array().unwrap();
    for name in ["opencl0 fma-f32", "opencl0 mem-patterns"] {
        assert!(
            timeline.iter().any(|p| p["unit"] == name),
            "{name}: {timeline:?}"
        );
    }
    let html = std::fs::read_to_string(out.join("burn.html")).unwrap();
    assert!(
        html.contains("opencl0 fma-f32"),
        "the GPU's units are drawn"
    );
}

/// `HOSTBENCH_FAULT=gpu:block:3`: block 3's checksum is wrong in every f32 chain launch; the
/// first line names the device, the unit and the block; the other units pass.
#[test]
fn an_injected_gpu_block_fault_names_the_device_unit_and_block_first() {
    if !opencl_device() {
        return;
    }
    let o = burn(
        &[
            "--only",
            "gpu",
            "--gpu-backend",
            "opencl",
            "--duration",
            "1s",
            "--json",
            "-",
        ],
        Some("gpu:block:3"),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let first = err.lines().next().unwrap();
    assert!(first.starts_with("FAIL opencl0 fma-f32: "), "{err}");
    assert!(
        first.contains("block 3, thread 0") && first.contains("bits [0]"),
        "{err}"
    );
    assert!(err.contains("gpu opencl0 mem-patterns: pass"), "{err}");
    let rec: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rec["fault_injected"], "gpu:block:3");
    let wrong = rec["gpus"][0]["errors_by_sm"]["block3"].as_u64().unwrap();
    let f32 = gpu_units(&rec)
        .into_iter()
        .find(|u| u["unit"] == "fma-f32")
        .unwrap();
    assert_eq!(f32["errors"].as_u64(), Some(wrong));
    assert!(
        f32["checks"].as_u64().unwrap() > wrong,
        "only one thread per launch is wrong"
    );
}

/// A burn with `args` saving its record under `out`: the output and the record (a burn that
/// wrote none panics here with its output).
fn burn_record(args: &[&str], out: &std::path::Path) -> (Output, serde_json::Value) {
    let dir = out.to_str().expect("a UTF-8 temp path");
    let o = burn(&[args, &["--out", dir]].concat(), None);
    let text = std::fs::read_to_string(out.join("burn.json")).unwrap_or_else(|e| {
        panic!(
            "burn.json not written ({e}): {}\n{}",
            stdout(&o),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o, serde_json::from_str(&text).expect("burn.json is JSON"))
}

#[test]
fn a_gpu_burn_watches_xids_or_says_why_not_and_a_cpu_burn_says_nothing_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    let (o, rec) = burn_record(&["--duration", "1s", "--only", "gpu"], &out);
    let text = stdout(&o);
    let xid = &rec["xid"];
    let watched = xid["watched"].as_array().expect("xid.watched");
    let not_watched = xid
        .get("not_watched")
        .and_then(|n| n.as_array())
        .cloned()
        .unwrap_or_default();
    // Watched or said why: never silent (a host without NVML, as CI is, says why).
    assert!(!watched.is_empty() || !not_watched.is_empty(), "{xid}");
    if watched.is_empty() {
        assert!(
            text.contains("warn XID events not watched: "),
            "{text}\n{xid}"
        );
        let md = std::fs::read_to_string(out.join("burn.md")).unwrap();
        assert!(md.contains("XID events not watched"), "{md}");
    }
    assert!(rec["gpu_rises"].is_array(), "{rec}");

    let (o, rec) = burn_record(
        &["--duration", "1s", "--only", "cpu"],
        &dir.path().join("cpu"),
    );
    assert!(rec.get("xid").is_none(), "{rec}");
    assert!(!stdout(&o).contains("XID"), "{}", stdout(&o));
}
