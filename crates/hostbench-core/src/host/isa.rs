//! Run-time ISA: the extensions the live CPU and OS support, in the contract's fixed order.
//!
//! This always describes the live CPU, even for a fixture inventory: it comes from CPUID / HWCAP
//! through `is_x86_feature_detected!` and friends, and no file can stand in for it. AMX is checked
//! by hand (CPUID plus XCR0, in `crate::isa`) because its detection macro is still unstable.

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
            ("amx", crate::isa::amx_tile()),
            ("amx-fp16", crate::isa::amx_fp16()),
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
            "amx-fp16",
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
