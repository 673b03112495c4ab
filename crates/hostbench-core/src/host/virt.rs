//! Virtualization: `none`, the hypervisor's name, or `unknown`.
//!
//! A guest's numbers are not a bare-metal machine's, so every result says which it was. On the
//! live x86-64 machine the CPUID hypervisor bit and vendor signature decide; otherwise (other
//! architectures, fixture trees, an unrecognised signature) DMI strings, `/sys/hypervisor` and the
//! device tree give a hint. For a fixture only its cpuinfo `hypervisor` flag and files count, so
//! tests are deterministic.

use std::path::Path;

use super::{read_trimmed, Source, UNKNOWN};
#[cfg(target_arch = "x86_64")]
use crate::isa::cpuid;

/// What the CPU (or the fixture's cpuinfo) says about running under a hypervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HvProbe {
    /// The hypervisor bit is clear.
    Absent,
    /// The bit is set; the vendor signature when it was readable and recognised.
    Present(Option<&'static str>),
    /// Nothing to go on.
    Unknown,
}

/// `none`, the hypervisor's name, or `unknown`.
pub(super) fn virtualization(root: &Path, source: Source, flags: Option<&[String]>) -> String {
    let probe = match source {
        Source::Live => live_hypervisor_probe(),
        Source::Fixture => match flags {
            Some(f) if f.iter().any(|x| x == "hypervisor") => HvProbe::Present(None),
            Some(_) => HvProbe::Absent,
            None => HvProbe::Unknown,
        },
    };
    let name = match probe {
        HvProbe::Present(Some(name)) => name,
        HvProbe::Present(None) => dmi_hint(root).unwrap_or(UNKNOWN),
        HvProbe::Absent => dmi_hint(root).unwrap_or("none"),
        HvProbe::Unknown => dmi_hint(root).unwrap_or(UNKNOWN),
    };
    name.to_string()
}

#[cfg(target_arch = "x86_64")]
fn live_hypervisor_probe() -> HvProbe {
    if cpuid(1, 0).ecx & (1 << 31) == 0 {
        return HvProbe::Absent;
    }
    let base = hypervisor_from_signature(&cpuid_signature(0x4000_0000));
    // KVM with Hyper-V enlightenments answers as Hyper-V at the base leaf and as itself 0x100
    // higher; an unsupported leaf returns zeroes or basic-leaf data, never a KVM signature.
    if base == Some("hyperv")
        && hypervisor_from_signature(&cpuid_signature(0x4000_0100)) == Some("kvm")
    {
        return HvProbe::Present(Some("kvm"));
    }
    HvProbe::Present(base)
}

/// Without CPUID the only evidence is DMI and friends; finding none means bare metal.
#[cfg(not(target_arch = "x86_64"))]
fn live_hypervisor_probe() -> HvProbe {
    HvProbe::Absent
}

/// The 12-byte vendor signature in EBX, ECX, EDX of a hypervisor leaf.
#[cfg(target_arch = "x86_64")]
fn cpuid_signature(leaf: u32) -> [u8; 12] {
    let r = cpuid(leaf, 0);
    let mut sig = [0u8; 12];
    sig[..4].copy_from_slice(&r.ebx.to_le_bytes());
    sig[4..8].copy_from_slice(&r.ecx.to_le_bytes());
    sig[8..].copy_from_slice(&r.edx.to_le_bytes());
    sig
}

/// Hypervisor name from a CPUID leaf 0x40000000 signature.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn hypervisor_from_signature(sig: &[u8]) -> Option<&'static str> {
    let end = sig.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    Some(match sig.get(..end)? {
        b"KVMKVMKVM" | b"Linux KVM Hv" => "kvm",
        b"Microsoft Hv" => "hyperv",
        b"VMwareVMware" => "vmware",
        b"XenVMMXenVMM" => "xen",
        b"TCGTCGTCGTCG" => "qemu",
        b"bhyve bhyve " | b"bhyve bhyve" => "bhyve",
        b"VBoxVBoxVBox" => "virtualbox",
        b" lrpepyh  vr" | b"prl hyperv  " | b"prl hyperv" => "parallels",
        b"ACRNACRNACRN" => "acrn",
        b"QNXQVMBSQG" => "qnx",
        b"OpenBSDVMM58" => "openbsd-vmm",
        b"Jailhouse" => "jailhouse",
        b"SRESRESRESRE" => "sre",
        _ => return None,
    })
}

/// A hypervisor named by DMI, `/sys/hypervisor` or the device tree. Only strings that cannot
/// describe bare metal count (an `Amazon EC2` `*.metal` instance is bare metal, for example).
fn dmi_hint(root: &Path) -> Option<&'static str> {
    if let Some(t) = read_trimmed(root, "sys/hypervisor/type") {
        match t.as_str() {
            "xen" => return Some("xen"),
            "s390" | "" => {}
            _ => return Some(UNKNOWN),
        }
    }
    if read_trimmed(root, "proc/device-tree/hypervisor/compatible")
        .is_some_and(|c| c.contains("xen"))
    {
        return Some("xen");
    }
    let vendor = read_trimmed(root, "sys/class/dmi/id/sys_vendor")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let product = read_trimmed(root, "sys/class/dmi/id/product_name")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let either = |s: &str| vendor.contains(s) || product.contains(s);
    Some(if product.contains("kvm") {
        "kvm"
    } else if vendor.contains("qemu") {
        "qemu"
    } else if either("vmware") {
        "vmware"
    } else if either("virtualbox") || vendor.contains("innotek") {
        "virtualbox"
    } else if vendor == "xen" || product.contains("hvm domu") {
        "xen"
    } else if vendor.contains("microsoft") && product.contains("virtual machine") {
        "hyperv"
    } else if either("bhyve") {
        "bhyve"
    } else if either("parallels") {
        "parallels"
    } else if product.contains("google compute engine") {
        "kvm"
    } else if vendor.contains("amazon ec2") && !product.is_empty() && !product.contains("metal") {
        // Nitro is KVM-based; its x86 guests report a KVM signature in CPUID too.
        "kvm"
    } else if product.contains("apple virtualization") {
        "apple"
    } else {
        return None;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypervisor_signatures() {
        assert_eq!(hypervisor_from_signature(b"KVMKVMKVM\0\0\0"), Some("kvm"));
        assert_eq!(hypervisor_from_signature(b"Microsoft Hv"), Some("hyperv"));
        assert_eq!(hypervisor_from_signature(b"VMwareVMware"), Some("vmware"));
        assert_eq!(hypervisor_from_signature(b"XenVMMXenVMM"), Some("xen"));
        assert_eq!(hypervisor_from_signature(b"TCGTCGTCGTCG"), Some("qemu"));
        assert_eq!(hypervisor_from_signature(b"bhyve bhyve "), Some("bhyve"));
        assert_eq!(hypervisor_from_signature(b"NotAHypervsr"), None);
        assert_eq!(hypervisor_from_signature(&[0; 12]), None);
    }
}
