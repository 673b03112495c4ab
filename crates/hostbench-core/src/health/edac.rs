//! `health.edac`: the kernel's EDAC counts of corrected and uncorrected memory errors, per memory
//! controller and per DIMM (`/sys/devices/system/edac/mc/mcN/{ce_count,ue_count}`, and
//! `dimmM/{dimm_ce_count,dimm_ue_count,dimm_label}`; older drivers lay DIMMs out as `csrowM/`).
//!
//! An uncorrected error is a fault on its own. Corrected errors are counted and left to the
//! expectation file's limit: a healthy DIMM may correct a few a month, and a fixed threshold here
//! would fail nodes that are fine.

use std::path::Path;

use super::source::{at, finding, numbered, put, read_trim, read_u64, reading, Part};
use crate::model::Severity;

const MC: &str = "sys/devices/system/edac/mc";

pub(crate) fn read(root: &Path) -> Part {
    let mcs = numbered(&at(root, MC), "mc");
    if mcs.is_empty() {
        return Err(format!(
            "no EDAC memory controller in /{MC} (no EDAC driver for this platform, or a VM: \
             its memory errors are the hypervisor's to see)"
        ));
    }
    let mut out = Vec::new();
    for (mc, dir) in mcs {
        let mut r = reading("health.edac", &mc, read_trim(&dir.join("mc_name")));
        let ce = read_u64(&dir.join("ce_count"));
        let ue = read_u64(&dir.join("ue_count"));
        put(&mut r, "correctable_errors", ce);
        put(&mut r, "uncorrectable_errors", ue);
        put(
            &mut r,
            "size_bytes",
            read_u64(&dir.join("size_mb")).map(|m| m << 20),
        );
        if let Some(ue) = ue.filter(|&n| n > 0) {
            finding(
                &mut r,
                Severity::Fail,
                format!("{ue} uncorrectable memory error(s) on {mc}"),
            );
        } else if let Some(ce) = ce.filter(|&n| n > 0) {
            finding(
                &mut r,
                Severity::Info,
                format!("{ce} corrected memory error(s) on {mc}"),
            );
        }
        out.push(r);
        for (kind, ce_name, ue_name) in [
            ("dimm", "dimm_ce_count", "dimm_ue_count"),
            ("csrow", "ce_count", "ue_count"),
        ] {
            for (name, d) in numbered(&dir, kind) {
                let label = read_trim(&d.join("dimm_label")).filter(|l| !l.is_empty());
                let device = format!("{mc}/{name}");
                let mut r = reading("health.edac", &device, label.clone());
                let ce = read_u64(&d.join(ce_name));
                let ue = read_u64(&d.join(ue_name));
                if ce.is_none() && ue.is_none() {
                    continue;
                }
                put(&mut r, "correctable_errors", ce);
                put(&mut r, "uncorrectable_errors", ue);
                let what = label.map_or(device.clone(), |l| format!("{device} ({l})"));
                if let Some(ue) = ue.filter(|&n| n > 0) {
                    finding(
                        &mut r,
                        Severity::Fail,
                        format!("{ue} uncorrectable memory error(s) on {what}"),
                    );
                }
                out.push(r);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::test_util::put;
    use super::*;

    #[test]
    fn controllers_and_dimms_are_read_and_an_uncorrected_error_fails_naming_the_dimm() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        put(
            root,
            &format!("{MC}/mc0/mc_name"),
            "Skylake Socket#0 IMC#0\n",
        );
        put(root, &format!("{MC}/mc0/ce_count"), "3\n");
        put(root, &format!("{MC}/mc0/ue_count"), "1\n");
        put(root, &format!("{MC}/mc0/dimm0/dimm_ce_count"), "3\n");
        put(root, &format!("{MC}/mc0/dimm0/dimm_ue_count"), "0\n");
        put(
            root,
            &format!("{MC}/mc0/dimm0/dimm_label"),
            "CPU_SrcID#0_MC#0_Chan#0_DIMM#0\n",
        );
        put(root, &format!("{MC}/mc0/dimm1/dimm_ce_count"), "0\n");
        put(root, &format!("{MC}/mc0/dimm1/dimm_ue_count"), "1\n");
        put(
            root,
            &format!("{MC}/mc0/dimm1/dimm_label"),
            "CPU_SrcID#0_MC#0_Chan#1_DIMM#0\n",
        );
        put(root, &format!("{MC}/mc10/ce_count"), "0\n");
        put(root, &format!("{MC}/mc10/ue_count"), "0\n");
        put(root, &format!("{MC}/mc2/ce_count"), "7\n");
        put(root, &format!("{MC}/mc2/ue_count"), "0\n");
        let r = read(root).expect("read");
        let devices: Vec<&str> = r.iter().map(|r| r.device.as_str()).collect();
        assert_eq!(devices, ["mc0", "mc0/dimm0", "mc0/dimm1", "mc2", "mc10"]);
        assert_eq!(r[0].values["uncorrectable_errors"], 1);
        assert_eq!(r[0].findings[0].severity, Severity::Fail);
        assert_eq!(r[1].findings, vec![], "a DIMM with only corrected errors");
        let dimm = &r[2].findings[0];
        assert_eq!(dimm.severity, Severity::Fail);
        assert!(dimm.text.contains("Chan#1_DIMM#0"), "{}", dimm.text);
        assert_eq!(
            r[3].findings[0].severity,
            Severity::Info,
            "corrected: counted"
        );
        assert!(r[4].findings.is_empty());
    }

    #[test]
    fn an_unreadable_counter_is_left_out_not_zero() {
        let dir = tempfile::tempdir().expect("tempdir");
        put(dir.path(), &format!("{MC}/mc0/ce_count"), "5\n");
        let r = read(dir.path()).expect("read");
        assert_eq!(r[0].values.get("uncorrectable_errors"), None);
        assert_eq!(r[0].values["correctable_errors"], 5);
    }
}
