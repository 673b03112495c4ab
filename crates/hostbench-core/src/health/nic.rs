//! `health.nic`: each physical network interface's link (speed, duplex, state), its carrier
//! changes since boot (link flaps) and its error and drop counters
//! (`/sys/class/net/IF/{speed,duplex,operstate,carrier_changes,statistics/*}`).
//!
//! Interfaces without a `device` link (loopback, bridges, veth, tunnels) are software and left
//! out: their counters say nothing of the hardware. A speed the driver does not know (-1, as
//! virtio reports) is left out, not zero. Only half duplex is judged here; the speed a node must
//! have and the flaps it may show belong to the expectation file.

use std::path::Path;

use super::source::{at, finding, put, read_trim, read_u64, reading, Part};
use crate::model::Severity;

const NET: &str = "sys/class/net";

const STATS: [&str; 7] = [
    "rx_errors",
    "tx_errors",
    "rx_dropped",
    "tx_dropped",
    "rx_crc_errors",
    "rx_missed_errors",
    "tx_carrier_errors",
];

pub(crate) fn read(root: &Path) -> Part {
    let mut names: Vec<_> = std::fs::read_dir(at(root, NET))
        .map_err(|_| format!("no network interfaces in sysfs (/{NET} absent)"))?
        .flatten()
        .filter(|e| e.path().join("device").exists())
        .map(|e| (e.file_name().to_string_lossy().to_string(), e.path()))
        .collect();
    names.sort();
    if names.is_empty() {
        return Err(format!(
            "no physical network interface (/{NET}/*/device absent: loopback, bridges and \
             virtual interfaces only)"
        ));
    }
    let mut out = Vec::new();
    for (name, dir) in names {
        let driver = std::fs::read_link(dir.join("device/driver"))
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().to_string()));
        let mut r = reading("health.nic", &name, driver);
        let speed = read_trim(&dir.join("speed"))
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|&s| s > 0);
        put(
            &mut r,
            "speed_bits_per_second",
            speed.map(|mbit| mbit as f64 * 1e6),
        );
        let duplex = read_trim(&dir.join("duplex")).filter(|d| d != "unknown");
        put(&mut r, "duplex", duplex.clone());
        put(&mut r, "operstate", read_trim(&dir.join("operstate")));
        put(
            &mut r,
            "carrier_changes",
            read_u64(&dir.join("carrier_changes")),
        );
        for s in STATS {
            put(&mut r, s, read_u64(&dir.join("statistics").join(s)));
        }
        if duplex.as_deref() == Some("half") {
            finding(
                &mut r,
                Severity::Warn,
                format!("{name} negotiated half duplex (a failed autonegotiation or a bad cable)"),
            );
        }
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{link, put};
    use super::*;

    #[test]
    fn physical_interfaces_are_read_and_software_ones_left_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let eth = format!("{NET}/eth0");
        put(root, &format!("{eth}/speed"), "25000\n");
        put(root, &format!("{eth}/duplex"), "full\n");
        put(root, &format!("{eth}/operstate"), "up\n");
        put(root, &format!("{eth}/carrier_changes"), "4\n");
        put(root, &format!("{eth}/statistics/rx_errors"), "12\n");
        put(root, &format!("{eth}/statistics/rx_crc_errors"), "12\n");
        put(root, "sys/bus/pci/drivers/mlx5_core/.keep", "");
        link(
            root,
            &format!("{eth}/device/driver"),
            &root
                .join("sys/bus/pci/drivers/mlx5_core")
                .display()
                .to_string(),
        );
        let eth1 = format!("{NET}/eth1");
        put(root, &format!("{eth1}/device/vendor"), "0x1af4\n");
        put(root, &format!("{eth1}/speed"), "-1\n");
        put(root, &format!("{eth1}/duplex"), "half\n");
        put(root, &format!("{NET}/lo/speed"), "-1\n");
        put(root, &format!("{NET}/veth0/speed"), "10000\n");
        let r = read(root).expect("read");
        let names: Vec<&str> = r.iter().map(|r| r.device.as_str()).collect();
        assert_eq!(names, ["eth0", "eth1"]);
        assert_eq!(r[0].label.as_deref(), Some("mlx5_core"));
        assert_eq!(r[0].values["speed_bits_per_second"], 25e9);
        assert_eq!(r[0].values["carrier_changes"], 4);
        assert_eq!(r[0].values["rx_crc_errors"], 12);
        assert!(r[0].findings.is_empty());
        assert_eq!(
            r[1].values.get("speed_bits_per_second"),
            None,
            "-1 is unknown, not zero"
        );
        assert_eq!(r[1].findings[0].severity, Severity::Warn);
    }

    #[test]
    fn only_software_interfaces_is_unavailable_with_why() {
        let dir = tempfile::tempdir().expect("tempdir");
        put(dir.path(), &format!("{NET}/lo/speed"), "-1\n");
        let why = read(dir.path()).expect_err("no physical NIC");
        assert!(why.contains("no physical network interface"), "{why}");
    }
}
