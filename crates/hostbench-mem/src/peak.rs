//! The theoretical DRAM bandwidth: transfer rate × bytes per transfer × populated channels.
//!
//! The spec file wins (a datasheet figure, or DIMM speed × channels), because only the operator
//! knows a VM's or a SoC's real memory system; otherwise the SMBIOS DIMM table, readable by root.
//! Nothing else: a guess from the CPU model would be the CPU's *maximum* supported configuration,
//! not what is populated, and the research notes show population alone changes STREAM by 3×.
//! Latency has no honest theoretical value, so none is given.

use std::io::ErrorKind;
use std::path::Path;

use hostbench_core::model::Peak;
use hostbench_core::spec::Spec;

/// The DRAM limit and its basis, or `None` (then the reason is [`no_peak_reason`]).
pub fn dram_peak(spec: &Spec) -> Option<Peak> {
    let m = &spec.memory;
    if let Some(bps) = m.bandwidth_bps {
        return Some(Peak {
            value: bps,
            basis: "spec file memory.bandwidth_bps".into(),
        });
    }
    if let (Some(mts), Some(ch)) = (m.dimm_mts, m.channels) {
        return Some(Peak {
            value: mts * 1e6 * 8.0 * f64::from(ch),
            basis: format!("{ch} channels x {mts} MT/s x 8 B (spec file)"),
        });
    }
    dmi_peak()
}

fn dmi_peak() -> Option<Peak> {
    let dimms = crate::dmi::read_dimms()?;
    let p = crate::dmi::dram_peak(&dimms)?;
    Some(Peak {
        value: p.bytes_per_s,
        basis: p.basis,
    })
}

/// Why a DRAM record carries no peak: the SMBIOS table's actual state on this host, so the user
/// knows whether root, another machine or only the spec file can supply it.
pub fn no_peak_reason() -> String {
    no_peak_reason_for(Path::new(crate::dmi::DMI_TABLE))
}

fn no_peak_reason_for(table: &Path) -> String {
    let why = match std::fs::read(table) {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            format!(
                "this host exposes no SMBIOS table ({} is absent, as in many VMs)",
                table.display()
            )
        }
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            format!("{} is readable by root only", table.display())
        }
        Err(e) => format!("{} is unreadable: {e}", table.display()),
        Ok(_) => "the SMBIOS table lists no populated DIMM with a speed".to_string(),
    };
    format!(
        "no DRAM peak: {why}; give memory.dimm_mts and memory.channels (or memory.bandwidth_bps) \
         in --spec"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_supplies_the_peak() {
        let spec = Spec::parse("[memory]\ndimm_mts = 4800\nchannels = 12\n").unwrap();
        let p = dram_peak(&spec).unwrap();
        assert_eq!(p.value, 4800e6 * 8.0 * 12.0);
        assert!(p.basis.contains("12 channels"));
        let spec = Spec::parse("[memory]\nbandwidth_bps = 5e10\n").unwrap();
        assert_eq!(dram_peak(&spec).unwrap().value, 5e10);
    }

    #[test]
    fn no_peak_reason_says_what_the_table_is() {
        let dir = std::env::temp_dir().join(format!("hb-dmi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let absent = no_peak_reason_for(&dir.join("DMI"));
        assert!(absent.contains("no SMBIOS table"), "{absent}");
        assert!(absent.contains("--spec"), "{absent}");
        std::fs::write(dir.join("DMI"), [127u8, 4, 0, 0, 0, 0]).unwrap();
        let empty = no_peak_reason_for(&dir.join("DMI"));
        assert!(empty.contains("no populated DIMM"), "{empty}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
