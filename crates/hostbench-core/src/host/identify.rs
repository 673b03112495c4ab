//! CPU identity: vendor, model name, family / model numbers, microarchitecture and the advertised
//! (nominal) clock.
//!
//! A number means little without the processor that produced it, and the peak calculations need
//! the nominal clock. x86 is identified from `/proc/cpuinfo` (vendor, family, model, stepping,
//! flags, then [`crate::microarch`]); Arm from the MIDR implementer and part, from cpuinfo or
//! sysfs, through the tables below. Anything unreadable is `"unknown"` or `None`.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::{parse_u32, read_trimmed, CPU_DIR, UNKNOWN};
use crate::microarch;

/// The key/value pairs of the first processor block of `/proc/cpuinfo`.
///
/// Only the first block is read: the others repeat it, and on large machines generating all of
/// them costs the kernel real time.
pub(super) fn cpuinfo_first_block(root: &Path) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let Ok(file) = fs::File::open(root.join("proc/cpuinfo")) else {
        return map;
    };
    for line in BufReader::with_capacity(8192, file).lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            if map.is_empty() {
                continue;
            }
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            map.entry(k.trim().to_string())
                .or_insert_with(|| v.trim().to_string());
        }
    }
    map
}

/// Who made the CPU and what it is.
#[derive(Debug, Default)]
pub(super) struct Ident {
    pub(super) vendor: String,
    pub(super) model: String,
    pub(super) family: Option<u32>,
    pub(super) model_id: Option<u32>,
    pub(super) microarch: Option<String>,
    pub(super) microarch_basis: Option<String>,
}

pub(super) fn identify(root: &Path, info: &BTreeMap<String, String>) -> Ident {
    if let Some(vendor) = info.get("vendor_id").filter(|v| !v.is_empty()) {
        // x86 (the key also appears on s390, where the table below simply finds nothing).
        let family = info.get("cpu family").and_then(|s| parse_u32(s));
        let model_id = info.get("model").and_then(|s| parse_u32(s));
        let stepping = info.get("stepping").and_then(|s| parse_u32(s));
        let model = info
            .get("model name")
            .map(|m| m.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| UNKNOWN.to_string());
        let flags: Vec<&str> = info
            .get("flags")
            .map(|f| f.split_whitespace().collect())
            .unwrap_or_default();
        let id = microarch::identify_x86(vendor, family, model_id, stepping, &flags);
        return Ident {
            vendor: vendor.clone(),
            model,
            family,
            model_id,
            microarch: id.as_ref().map(|i| i.name.to_string()),
            microarch_basis: id.map(|i| i.basis),
        };
    }
    // Arm: the MIDR fields, from cpuinfo or (when cpuinfo is terse) from sysfs.
    let from_cpuinfo = info
        .get("CPU implementer")
        .and_then(|s| parse_u32(s))
        .zip(info.get("CPU part").and_then(|s| parse_u32(s)));
    let midr = || {
        let raw = read_trimmed(
            root,
            &format!("{CPU_DIR}/cpu0/regs/identification/midr_el1"),
        )?;
        let hex = raw.strip_prefix("0x").unwrap_or(&raw);
        let v = u64::from_str_radix(hex, 16).ok()?;
        Some((((v >> 24) & 0xff) as u32, ((v >> 4) & 0xfff) as u32))
    };
    if let Some((implementer, part)) = from_cpuinfo.or_else(midr) {
        let vendor = arm_implementer(implementer)
            .map(str::to_string)
            .unwrap_or_else(|| format!("0x{implementer:02x}"));
        let model = arm_part(implementer, part)
            .map(str::to_string)
            .unwrap_or_else(|| format!("0x{part:03x}"));
        return Ident {
            vendor,
            model,
            family: Some(implementer),
            model_id: Some(part),
            microarch: arm_microarch(implementer, part).map(str::to_string),
            microarch_basis: arm_microarch(implementer, part)
                .map(|_| format!("MIDR implementer 0x{implementer:02x} part 0x{part:03x}")),
        };
    }
    Ident {
        vendor: UNKNOWN.to_string(),
        model: info
            .get("model name")
            .filter(|m| !m.is_empty())
            .cloned()
            .unwrap_or_else(|| UNKNOWN.to_string()),
        ..Ident::default()
    }
}

fn arm_implementer(implementer: u32) -> Option<&'static str> {
    Some(match implementer {
        0x41 => "ARM",
        0x42 => "Broadcom",
        0x43 => "Cavium",
        0x46 => "Fujitsu",
        0x48 => "HiSilicon",
        0x4e => "NVIDIA",
        0x50 => "APM",
        0x51 => "Qualcomm",
        0x61 => "Apple",
        0x6d => "Microsoft",
        0xc0 => "Ampere",
        _ => return None,
    })
}

fn arm_part(implementer: u32, part: u32) -> Option<&'static str> {
    Some(match (implementer, part) {
        (0x41, 0xd03) => "Cortex-A53",
        (0x41, 0xd05) => "Cortex-A55",
        (0x41, 0xd07) => "Cortex-A57",
        (0x41, 0xd08) => "Cortex-A72",
        (0x41, 0xd0b) => "Cortex-A76",
        (0x41, 0xd41) => "Cortex-A78",
        (0x41, 0xd0c) => "Neoverse N1",
        (0x41, 0xd40) => "Neoverse V1",
        (0x41, 0xd49) => "Neoverse N2",
        (0x41, 0xd4f) => "Neoverse V2",
        (0x41, 0xd8e) => "Neoverse N3",
        (0x41, 0xd84) => "Neoverse V3",
        (0x43, 0x0af) => "ThunderX2",
        (0x46, 0x001) => "A64FX",
        (0x48, 0xd01) => "Kunpeng 920",
        (0xc0, 0xac3) => "AmpereOne",
        _ => return None,
    })
}

fn arm_microarch(implementer: u32, part: u32) -> Option<&'static str> {
    match (implementer, part) {
        (0x41, 0xd0c | 0xd40 | 0xd49 | 0xd4f | 0xd8e | 0xd84) => arm_part(implementer, part),
        _ => None,
    }
}

/// Advertised clock: cpufreq's `cpuinfo_max_freq`, else the model string's `@ x GHz`.
///
/// cpuinfo's `cpu MHz` is deliberately not used: it is a snapshot of a moving clock, and in VMs
/// often the host's TSC rate rather than anything the guest runs at.
pub(super) fn nominal_hz(root: &Path, model: &str) -> Option<f64> {
    read_trimmed(root, &format!("{CPU_DIR}/cpu0/cpufreq/cpuinfo_max_freq"))
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|&khz| khz > 0)
        .map(|khz| khz as f64 * 1e3)
        .or_else(|| model_name_hz(model))
}

/// The clock in a model name such as `Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz`.
fn model_name_hz(model: &str) -> Option<f64> {
    let (_, after) = model.rsplit_once('@')?;
    let after = after.trim_start();
    let end = after
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(after.len());
    let (num, unit) = after.split_at(end);
    let value: f64 = num.parse().ok()?;
    let scale = match unit
        .trim_start()
        .get(..3)
        .map(str::to_ascii_lowercase)?
        .as_str()
    {
        "ghz" => 1e9,
        "mhz" => 1e6,
        _ => return None,
    };
    Some(value * scale).filter(|hz| hz.is_finite() && *hz > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_microarch_table() {
        assert_eq!(arm_microarch(0x41, 0xd4f), Some("Neoverse V2"));
        assert_eq!(arm_microarch(0x41, 0xd08), None);
    }

    #[test]
    fn clock_from_model_name() {
        assert_eq!(
            model_name_hz("Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz"),
            Some(2.4e9)
        );
        assert_eq!(model_name_hz("Some CPU @ 2450MHz"), Some(2.45e9));
        assert_eq!(model_name_hz("AMD EPYC 7763 64-Core Processor"), None);
        assert_eq!(model_name_hz("odd @ fast"), None);
        assert_eq!(model_name_hz("odd @ 3.0"), None);
    }
}
