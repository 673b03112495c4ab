//! `health.pcie`: every PCIe function's link (current against maximum speed and width, the
//! maximum being the lower of the device's and its upstream port's, since a Gen5 card in a Gen4
//! slot is not downtrained) and its AER counters (`aer_dev_{correctable,nonfatal,fatal}`).
//!
//! Why speed and width are judged apart: GPUs, and some NICs, drop their link to 2.5 GT/s while
//! idle and raise it under load, so a slow link read at rest is context (the GPU crate reads it
//! under load through NVML); a narrower link than both ends support does not recover by itself and
//! halves every transfer, so it is a fault. Bridges are listed only when their AER counters are
//! not zero: their links mirror the endpoints'.

use std::path::Path;

use super::source::{at, finding, put, read_trim, reading, Part};
use crate::model::{HealthReading, Severity};

const DEVICES: &str = "sys/bus/pci/devices";

/// PCIe per-lane payload rate after line encoding (8b/10b for gen 1–2, 128b/130b for 3–5,
/// FLIT for 6), by generation.
const GENS: [(u32, f64, f64); 6] = [
    (1, 2.5, 0.25e9),
    (2, 5.0, 0.5e9),
    (3, 8.0, 0.985e9),
    (4, 16.0, 1.969e9),
    (5, 32.0, 3.938e9),
    (6, 64.0, 7.563e9),
];

/// Payload bytes per second of one lane at `gts` GT/s, and the generation; None for a rate no
/// generation has.
pub fn lane_payload_bps(gts: f64) -> Option<(u32, f64)> {
    GENS.iter()
        .find(|(_, r, _)| (r - gts).abs() < 0.05)
        .map(|&(g, _, b)| (g, b))
}

/// One direction's payload limit of a link of generation `gen` and `width` lanes, in B/s.
pub fn link_peak_bps(gen: u32, width: u32) -> Option<f64> {
    GENS.iter()
        .find(|(g, _, _)| *g == gen)
        .map(|&(_, _, b)| b * f64::from(width))
}

/// "16.0 GT/s PCIe" → 16.0; None for "Unknown" or a link that is down.
fn gts(s: &str) -> Option<f64> {
    s.split_whitespace()
        .next()?
        .parse()
        .ok()
        .filter(|v: &f64| *v > 0.0)
}

fn class_name(class: u32) -> &'static str {
    match class >> 8 {
        0x0108 => "NVMe controller",
        0x0604 => "PCI bridge",
        0x0302 | 0x0300 => "GPU",
        0x1200 => "accelerator",
        0x0207 => "InfiniBand controller",
        _ => match class >> 16 {
            0x01 => "storage controller",
            0x02 => "network controller",
            0x03 => "display controller",
            0x06 => "bridge",
            0x0c => "serial bus controller",
            0x12 => "accelerator",
            _ => "device",
        },
    }
}

/// A link's speed (GT/s) and width as sysfs shows them under `dir` with `prefix` ("current" or
/// "max").
fn link(dir: &Path, prefix: &str) -> (Option<f64>, Option<u32>) {
    let speed = read_trim(&dir.join(format!("{prefix}_link_speed"))).and_then(|s| gts(&s));
    let width = read_trim(&dir.join(format!("{prefix}_link_width")))
        .and_then(|w| w.parse().ok())
        .filter(|&w: &u32| w > 0);
    (speed, width)
}

/// The total of one AER file: its `TOTAL_*` line where the kernel writes one, else the sum.
fn aer_total(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut sum = 0;
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(name), Some(n)) = (f.next(), f.next().and_then(|n| n.parse::<u64>().ok())) else {
            continue;
        };
        if name.starts_with("TOTAL_") {
            return Some(n);
        }
        sum += n;
    }
    Some(sum)
}

pub(crate) fn read(root: &Path) -> Part {
    let mut entries: Vec<_> = std::fs::read_dir(at(root, DEVICES))
        .map_err(|_| format!("no PCI bus in sysfs (/{DEVICES} absent)"))?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    let mut out = Vec::new();
    let mut any_link = false;
    for path in entries {
        let Some(r) = one(&path, &mut any_link) else {
            continue;
        };
        out.push(r);
    }
    if !any_link {
        return Err(format!(
            "no PCI device shows a link speed (/{DEVICES}/*/current_link_speed absent: an \
             emulated or conventional PCI bus, as in most VMs)"
        ));
    }
    Ok(out)
}

fn one(path: &Path, any_link: &mut bool) -> Option<HealthReading> {
    let addr = path.file_name()?.to_string_lossy().to_string();
    let class = read_trim(&path.join("class"))
        .and_then(|c| u32::from_str_radix(c.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0);
    let (cur_speed, cur_width) = link(path, "current");
    let (max_speed, max_width) = link(path, "max");
    if cur_speed.is_some() || cur_width.is_some() {
        *any_link = true;
    }
    let aer = [
        (
            "aer_correctable",
            aer_total(&path.join("aer_dev_correctable")),
        ),
        ("aer_nonfatal", aer_total(&path.join("aer_dev_nonfatal"))),
        ("aer_fatal", aer_total(&path.join("aer_dev_fatal"))),
    ];
    let aer_seen = aer.iter().any(|(_, n)| n.is_some_and(|n| n > 0));
    let bridge = class >> 16 == 0x06;
    if (cur_speed.is_none() && cur_width.is_none()) || (bridge && !aer_seen) {
        return None;
    }
    // The upstream port: the parent directory of the device's real path, when it is a PCI
    // function itself (a root complex's `pci0000:00` is not).
    let port = std::fs::canonicalize(path)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .filter(|p| p.join("max_link_speed").exists());
    let (port_speed, port_width) = port.as_deref().map_or((None, None), |p| link(p, "max"));
    let driver = std::fs::read_link(path.join("driver"))
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().to_string()));
    let kind = class_name(class);
    let label = match &driver {
        Some(d) => format!("{kind} ({d})"),
        None => kind.to_string(),
    };
    let mut r = reading("health.pcie", &addr, Some(label));
    put(&mut r, "class", Some(format!("0x{class:06x}")));
    put(
        &mut r,
        "link_speed_transfers_per_second",
        cur_speed.map(|g| g * 1e9),
    );
    put(&mut r, "link_width", cur_width);
    put(
        &mut r,
        "max_link_speed_transfers_per_second",
        max_speed.map(|g| g * 1e9),
    );
    put(&mut r, "max_link_width", max_width);
    put(
        &mut r,
        "port_max_link_speed_transfers_per_second",
        port_speed.map(|g| g * 1e9),
    );
    put(&mut r, "port_max_link_width", port_width);
    for (k, n) in aer {
        put(&mut r, k, n);
    }
    let gpu_like = matches!(class >> 16, 0x03 | 0x12);
    let lower = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let want_width = lower(max_width.map(f64::from), port_width.map(f64::from));
    if let (Some(cur), Some(want)) = (cur_width, want_width) {
        if f64::from(cur) < want {
            finding(
                &mut r,
                Severity::Fail,
                format!("{addr} ({kind}) link trained to x{cur} of x{want} (every transfer at {:.0} % of the link's rate)", 100.0 * f64::from(cur) / want),
            );
        }
    }
    if let (Some(cur), Some(want)) = (cur_speed, lower(max_speed, port_speed)) {
        if cur + 0.05 < want {
            let (severity, why) = if gpu_like {
                (
                    Severity::Info,
                    "; GPUs lower their link speed while idle, so this is read again under load",
                )
            } else {
                (Severity::Warn, "")
            };
            finding(
                &mut r,
                severity,
                format!("{addr} ({kind}) link at {cur} GT/s of {want} GT/s{why}"),
            );
        }
    }
    let [(_, cor), (_, nonfatal), (_, fatal)] = aer;
    for (n, severity, what) in [
        (fatal, Severity::Fail, "fatal"),
        (nonfatal, Severity::Warn, "non-fatal"),
        (cor, Severity::Info, "correctable"),
    ] {
        if let Some(n) = n.filter(|&n| n > 0) {
            finding(
                &mut r,
                severity,
                format!("{addr} ({kind}): {n} {what} AER error(s) since boot"),
            );
        }
    }
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{link as symlink, put};
    use super::*;

    /// A root port (Gen5 x16) with a GPU below it, an NVMe drive below another port, laid out as
    /// sysfs does: real directories under `sys/devices`, symlinks in `sys/bus/pci/devices`.
    fn fixture(root: &Path, gpu: (&str, &str), nvme_width: &str) {
        let port = "sys/devices/pci0000:00/0000:00:01.0";
        put(root, &format!("{port}/class"), "0x060400\n");
        put(root, &format!("{port}/max_link_speed"), "32.0 GT/s PCIe\n");
        put(root, &format!("{port}/max_link_width"), "16\n");
        put(
            root,
            &format!("{port}/current_link_speed"),
            "32.0 GT/s PCIe\n",
        );
        put(root, &format!("{port}/current_link_width"), "16\n");
        let gpu_dir = format!("{port}/0000:01:00.0");
        put(root, &format!("{gpu_dir}/class"), "0x030200\n");
        put(
            root,
            &format!("{gpu_dir}/max_link_speed"),
            "32.0 GT/s PCIe\n",
        );
        put(root, &format!("{gpu_dir}/max_link_width"), "16\n");
        put(
            root,
            &format!("{gpu_dir}/current_link_speed"),
            &format!("{}\n", gpu.0),
        );
        put(
            root,
            &format!("{gpu_dir}/current_link_width"),
            &format!("{}\n", gpu.1),
        );
        put(
            root,
            &format!("{gpu_dir}/aer_dev_correctable"),
            "RxErr 2\nBadTLP 1\nTOTAL_ERR_COR 3\n",
        );
        put(
            root,
            &format!("{gpu_dir}/aer_dev_fatal"),
            "Undefined 0\nTOTAL_ERR_FATAL 0\n",
        );
        let nport = "sys/devices/pci0000:00/0000:00:02.0";
        put(root, &format!("{nport}/class"), "0x060400\n");
        // A Gen4 x4 slot: the Gen5 drive in it is not downtrained at 16 GT/s.
        put(root, &format!("{nport}/max_link_speed"), "16.0 GT/s PCIe\n");
        put(root, &format!("{nport}/max_link_width"), "4\n");
        let nvme = format!("{nport}/0000:02:00.0");
        put(root, &format!("{nvme}/class"), "0x010802\n");
        put(root, &format!("{nvme}/max_link_speed"), "32.0 GT/s PCIe\n");
        put(root, &format!("{nvme}/max_link_width"), "4\n");
        put(
            root,
            &format!("{nvme}/current_link_speed"),
            "16.0 GT/s PCIe\n",
        );
        put(
            root,
            &format!("{nvme}/current_link_width"),
            &format!("{nvme_width}\n"),
        );
        put(
            root,
            &format!("{nvme}/aer_dev_nonfatal"),
            "TOTAL_ERR_NONFATAL 0\n",
        );
        for (addr, dir) in [
            ("0000:00:01.0", port.to_string()),
            ("0000:01:00.0", gpu_dir),
            ("0000:00:02.0", nport.to_string()),
            ("0000:02:00.0", nvme),
        ] {
            symlink(
                root,
                &format!("{DEVICES}/{addr}"),
                &root.join(dir).display().to_string(),
            );
        }
    }

    #[test]
    fn a_narrow_link_fails_a_slow_idle_gpu_link_is_context_and_the_slot_bounds_the_maximum() {
        let dir = tempfile::tempdir().expect("tempdir");
        fixture(dir.path(), ("2.5 GT/s PCIe", "16"), "2");
        let r = read(dir.path()).expect("read");
        let devices: Vec<&str> = r.iter().map(|r| r.device.as_str()).collect();
        assert_eq!(
            devices,
            ["0000:01:00.0", "0000:02:00.0"],
            "bridges without AER left out"
        );
        let gpu = &r[0];
        assert_eq!(gpu.values["link_speed_transfers_per_second"], 2.5e9);
        assert_eq!(gpu.values["aer_correctable"], 3);
        let sev: Vec<Severity> = gpu.findings.iter().map(|f| f.severity).collect();
        assert_eq!(sev, [Severity::Info, Severity::Info], "{:?}", gpu.findings);
        let nvme = &r[1];
        assert_eq!(nvme.values["port_max_link_width"], 4);
        assert_eq!(
            nvme.findings.len(),
            1,
            "16 GT/s in a Gen4 slot is no fault: {:?}",
            nvme.findings
        );
        assert_eq!(nvme.findings[0].severity, Severity::Fail);
        assert!(
            nvme.findings[0].text.contains("x2 of x4"),
            "{}",
            nvme.findings[0].text
        );
    }

    #[test]
    fn a_healthy_tree_has_no_finding_above_info() {
        let dir = tempfile::tempdir().expect("tempdir");
        fixture(dir.path(), ("32.0 GT/s PCIe", "16"), "4");
        let r = read(dir.path()).expect("read");
        assert!(
            r.iter()
                .flat_map(|r| &r.findings)
                .all(|f| f.severity == Severity::Info),
            "{r:?}"
        );
    }

    #[test]
    fn payload_rates_follow_the_encoding_of_each_generation() {
        assert_eq!(lane_payload_bps(16.0), Some((4, 1.969e9)));
        assert_eq!(lane_payload_bps(3.0), None);
        assert_eq!(link_peak_bps(5, 16), Some(3.938e9 * 16.0));
        assert_eq!(gts("Unknown"), None);
        assert_eq!(gts("8.0 GT/s PCIe"), Some(8.0));
    }
}
