//! Integration tests of the hardware counters (`host.health`) through the real binary: a fixture
//! tree named by `HOSTBENCH_HEALTH_ROOT` (the documented test hook) with faults in every source
//! the kernel exposes, read by `info` and carried by a measuring command's JSON and OpenMetrics;
//! and the live host, whose every source is read or explained.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

fn put(root: &Path, rel: &str, content: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, content).expect("write");
}

/// A node laid out like `/`: one DIMM with uncorrected errors, an NVMe drive whose health log
/// sets the spare-below-threshold bit, a NIC linked to a PCIe device trained at x8 of x16, and a
/// kernel log with a GPU fallen off the bus; or, with `faulty` false, the same node healthy.
fn node(root: &Path, faulty: bool) {
    let mc = "sys/devices/system/edac/mc/mc0";
    put(root, &format!("{mc}/ce_count"), b"4\n");
    put(
        root,
        &format!("{mc}/ue_count"),
        if faulty { b"2\n" } else { b"0\n" },
    );
    put(root, &format!("{mc}/dimm3/dimm_label"), b"CPU0_DIMM_B1\n");
    put(root, &format!("{mc}/dimm3/dimm_ce_count"), b"4\n");
    put(
        root,
        &format!("{mc}/dimm3/dimm_ue_count"),
        if faulty { b"2\n" } else { b"0\n" },
    );
    let nic = "sys/devices/pci0000:00/0000:00:03.0/0000:17:00.0";
    put(root, &format!("{nic}/class"), b"0x020000\n");
    put(
        root,
        &format!("{nic}/current_link_speed"),
        b"16.0 GT/s PCIe\n",
    );
    put(
        root,
        &format!("{nic}/current_link_width"),
        if faulty { b"8\n" } else { b"16\n" },
    );
    put(root, &format!("{nic}/max_link_speed"), b"16.0 GT/s PCIe\n");
    put(root, &format!("{nic}/max_link_width"), b"16\n");
    std::fs::create_dir_all(root.join("sys/bus/pci/devices")).expect("mkdir");
    std::os::unix::fs::symlink(
        root.join(nic),
        root.join("sys/bus/pci/devices/0000:17:00.0"),
    )
    .expect("symlink");
    put(root, "sys/class/net/ens1/device/vendor", b"0x15b3\n");
    put(root, "sys/class/net/ens1/speed", b"100000\n");
    put(root, "sys/class/net/ens1/duplex", b"full\n");
    put(root, "sys/class/net/ens1/carrier_changes", b"2\n");
    put(root, "sys/class/nvme/nvme0/model", b"Fixture NVMe\n");
    let mut log = vec![0u8; 512];
    log[0] = if faulty { 0x01 } else { 0 };
    log[3] = if faulty { 5 } else { 100 };
    log[4] = 10;
    put(root, "dev/nvme0.smart-log", &log);
    let xid = if faulty {
        "4,2,200,-;NVRM: Xid (PCI:0000:41:00): 79, pid=1, GPU has fallen off the bus.\n"
    } else {
        ""
    };
    put(
        root,
        "dev/kmsg",
        format!("6,1,100,-;Linux version 6.1.0\n{xid}").as_bytes(),
    );
    put(
        root,
        "proc/interrupts",
        b"      CPU0\nMCE:     0   Machine check exceptions\n",
    );
}

fn info_json(root: &Path) -> Value {
    let out = hostbench()
        .args(["info", "--json"])
        .env("HOSTBENCH_HEALTH_ROOT", root)
        .output()
        .expect("info");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(&out)
}

fn fails(health: &Value) -> Vec<String> {
    health["readings"]
        .as_array()
        .expect("readings")
        .iter()
        .flat_map(|r| r["findings"].as_array().cloned().unwrap_or_default())
        .filter(|f| f["severity"] == "fail")
        .map(|f| f["text"].as_str().expect("text").to_string())
        .collect()
}

#[test]
fn a_faulty_fixture_node_fails_in_every_source_the_kernel_exposes() {
    let dir = tempfile::tempdir().expect("tempdir");
    node(dir.path(), true);
    let doc = info_json(dir.path());
    let h = &doc["host"]["health"];
    assert_eq!(h["root"], dir.path().display().to_string());
    let f = fails(h);
    for needle in [
        "2 uncorrectable memory error(s) on mc0/dimm3 (CPU0_DIMM_B1)",
        "0000:17:00.0 (network controller) link trained to x8 of x16",
        "nvme0 critical warning 0x01: available spare below its threshold",
        "GPU 0000:41:00: XID 79 x1 since boot (GPU has fallen off the bus)",
    ] {
        assert!(
            f.iter().any(|t| t.contains(needle)),
            "{needle:?} not in {f:#?}"
        );
    }
    let nic = h["readings"]
        .as_array()
        .expect("readings")
        .iter()
        .find(|r| r["id"] == "health.nic")
        .expect("nic");
    assert_eq!(nic["values"]["speed_bits_per_second"], 1e11);

    let text = hostbench()
        .arg("info")
        .env("HOSTBENCH_HEALTH_ROOT", dir.path())
        .output()
        .expect("info");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Health      FAULTS FOUND; read: edac (2)"),
        "{text}"
    );
    assert!(text.contains("(read from the fixture tree"), "{text}");
    assert!(
        text.contains("  fail  2 uncorrectable memory error(s) on mc0/dimm3"),
        "{text}"
    );
}

#[test]
fn the_same_node_healthy_has_no_fail_and_its_counters_reach_json_and_openmetrics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("root");
    node(&root, false);
    let doc = info_json(&root);
    assert_eq!(fails(&doc["host"]["health"]), Vec::<String>::new());
    let text = hostbench()
        .arg("info")
        .env("HOSTBENCH_HEALTH_ROOT", &root)
        .output()
        .expect("info");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Health      no fault found;"), "{text}");

    // A measuring command carries the same counters in its host section and its export.
    let prom = dir.path().join("h.prom");
    let out = hostbench()
        .args("cpu --isa scalar --dtype f64 --threads 1 --ops 1e6 --repeat 1 --warmup 0 --json - --openmetrics".split_whitespace())
        .arg(&prom)
        .env("HOSTBENCH_HEALTH_ROOT", &root)
        .output()
        .expect("cpu");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = json_of(&out);
    assert_run_contract(&run);
    let readings = run["host"]["health"]["readings"]
        .as_array()
        .expect("readings");
    assert!(
        readings.iter().any(|r| r["id"] == "health.nvme"),
        "{readings:?}"
    );
    let text = std::fs::read_to_string(&prom).expect("prom");
    for line in [
        "hostbench_health_edac_correctable_errors{host=",
        "hostbench_health_nvme_available_spare_pct{host=",
        "hostbench_health_pcie_link_width{host=",
        "hostbench_health_source_readable{host=",
    ] {
        assert!(text.contains(line), "{line} not in {text}");
    }
    assert!(text.contains("device=\"mc0/dimm3\"} 4\n"), "{text}");
}

#[test]
fn the_live_host_reads_or_explains_every_source() {
    let doc = info_json(Path::new("/"));
    // The hook unset: the live system, and the document does not name a fixture.
    let out = hostbench()
        .args(["info", "--json"])
        .env_remove("HOSTBENCH_HEALTH_ROOT")
        .output()
        .expect("info");
    let live = json_of(&out);
    let h = &live["host"]["health"];
    assert!(h.get("root").is_none(), "{h}");
    let mut seen: Vec<&str> = h["readings"]
        .as_array()
        .expect("readings")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .chain(
            h["unavailable"]
                .as_object()
                .expect("unavailable")
                .keys()
                .map(String::as_str),
        )
        .collect();
    seen.sort_unstable();
    seen.dedup();
    for id in [
        "health.edac",
        "health.gpu",
        "health.mce",
        "health.nic",
        "health.nvme",
        "health.pcie",
        "health.xid",
    ] {
        assert!(seen.contains(&id), "{id} neither read nor explained: {h}");
    }
    // "/" named explicitly is read the same way, but the document says it was asked for.
    assert_eq!(doc["host"]["health"]["root"], "/");
}
