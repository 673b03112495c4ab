//! `hostbench burn` through its real NVML calls on a host without a GPU: a stand-in
//! `libnvidia-ml.so.1` (tests/data/fake_nvml.c, built here with the C compiler that links Rust)
//! first on `LD_LIBRARY_PATH` answers one GPU whose uncorrectable ECC count rises during the burn
//! and whose event set hands out XID 13 and XID 79. The burn must fail naming the GPU, its bus, the
//! counter and the XID, and warn of the application-caused XID.

use std::path::Path;
use std::process::Command;

/// The fake NVML built into `dir`; None (after saying why) where no C compiler exists outside CI.
fn fake_nvml(dir: &Path) -> Option<()> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fake_nvml.c");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.join("libnvidia-ml.so.1"))
        .arg(&src)
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
