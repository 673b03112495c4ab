//! Run-time ISA: the extensions the live CPU and OS support, in the contract's fixed order.
//!
//! This always describes the live CPU, even for a fixture inventory: it comes from CPUID / HWCAP
//! through `is_x86_feature_detected!` and friends, and no file can stand in for it. AMX is checked
//! by hand (CPUID plus XCR0) because its detection macro is still unstable.

#[cfg(target_arch = "x86_64")]
use super::virt::cpuid;

/// ISA extensions the live CPU and OS support, in the contract's fixed order.
pub(super) fn live_isa() -> Vec<String> {
    #[allow(unused_mut)]
    let mut isa: Vec<&str> = Vec::new();
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        let checks = [
            ("sse2", is_x86_feature_detected!("sse2")),
            ("sse4.2", is_x86_feature_detected!("sse4.2")),
            ("avx", is_x86_feature_detected!("avx")),
            ("avx2", is_x86_feature_detected!("avx2")),
            ("fma", is_x86_feature_detected!("fma")),
            ("avx512f", is_x86_feature_detected!("avx512f")),
            ("avx512bw", is_x86_feature_detected!("avx512bw")),
            ("avx512vl", is_x86_feature_detected!("avx512vl")),
            ("avx512vnni", is_x86_feature_detected!("avx512vnni")),
            ("avx512bf16", is_x86_feature_detected!("avx512bf16")),
            ("avx512fp16", is_x86_feature_detected!("avx512fp16")),
            ("amx", amx_usable()),
        ];
        isa.extend(checks.iter().filter(|(_, on)| *on).map(|(name, _)| *name));
    }
    #[cfg(target_arch = "aarch64")]
    {
        use std::arch::is_aarch64_feature_detected;
        let checks = [
            ("neon", is_aarch64_feature_detected!("neon")),
            ("fp16", is_aarch64_feature_detected!("fp16")),
            ("dotprod", is_aarch64_feature_detected!("dotprod")),
            ("sve", is_aarch64_feature_detected!("sve")),
            ("sve2", is_aarch64_feature_detected!("sve2")),
            ("i8mm", is_aarch64_feature_detected!("i8mm")),
            ("bf16", is_aarch64_feature_detected!("bf16")),
        ];
        isa.extend(checks.iter().filter(|(_, on)| *on).map(|(name, _)| *name));
    }
    isa.into_iter().map(str::to_string).collect()
}

/// AMX tiles present and enabled by the OS (XCR0 bits 17 and 18). Done by hand because
/// `is_x86_feature_detected!("amx-tile")` is still unstable.
#[cfg(target_arch = "x86_64")]
fn amx_usable() -> bool {
    if cpuid(0, 0).eax < 7 || cpuid(1, 0).ecx & (1 << 27) == 0 || cpuid(7, 0).edx & (1 << 24) == 0 {
        return false;
    }
    let (lo, _hi): (u32, u32);
    // SAFETY: CPUID.1:ECX.OSXSAVE (checked above) means the OS enabled XGETBV; reading XCR0 has
    // no side effects and touches no memory.
    unsafe {
        core::arch::asm!(
            "xgetbv",
            in("ecx") 0u32,
            out("eax") lo,
            out("edx") _hi,
            options(nomem, nostack, preserves_flags),
        );
    }
    lo & (0b11 << 17) == 0b11 << 17
}

#[cfg(target_arch = "x86")]
fn amx_usable() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isa_order_is_fixed() {
        let order = [
            "sse2",
            "sse4.2",
            "avx",
            "avx2",
            "fma",
            "avx512f",
            "avx512bw",
            "avx512vl",
            "avx512vnni",
            "avx512bf16",
            "avx512fp16",
            "amx",
            "neon",
            "fp16",
            "dotprod",
            "sve",
            "sve2",
            "i8mm",
            "bf16",
        ];
        let isa = live_isa();
        let positions: Vec<usize> = isa
            .iter()
            .map(|f| order.iter().position(|o| o == f).expect("known feature"))
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{isa:?}");
    }
}
