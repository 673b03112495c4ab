//! The theoretical DRAM bandwidth: transfer rate × bytes per transfer × populated channels.
//!
//! The spec file wins (a datasheet figure, or DIMM speed × channels), because only the operator
//! knows a VM's or a SoC's real memory system; otherwise the SMBIOS DIMM table, readable by root.
//! Nothing else: a guess from the CPU model would be the CPU's *maximum* supported configuration,
//! not what is populated, and the research notes show population alone changes STREAM by 3×.
//! Latency has no honest theoretical value, so none is given.

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

/// Why a DRAM record carries no peak.
pub fn no_peak_reason() -> &'static str {
    "no DRAM peak: the SMBIOS DIMM table is unreadable (needs root, absent in many VMs); \
     give memory.dimm_mts and memory.channels (or memory.bandwidth_bps) in --spec"
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
}
