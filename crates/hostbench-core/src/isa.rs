//! Instruction-set features, detected once at run time, and the `--isa auto|best|all|LIST` choice.
//!
//! Every kernel crate dispatches on the same few features (SSE2, AVX2 with FMA, AVX-512F and BW,
//! NEON) and every ISA flag takes the same words. Detection is at run time (the binary is built
//! for baseline x86-64 or AArch64), through `std`'s cached feature macros; compile-time `cfg`s only
//! decide which kernels exist on an architecture at all.

use crate::error::BenchError;
use crate::units::parse_list;

/// SSE2 (every x86-64).
pub fn sse2() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("sse2");
    #[allow(unreachable_code)]
    false
}

/// AVX2 together with FMA3 (the 256-bit kernels use both).
pub fn avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma");
    #[allow(unreachable_code)]
    false
}

/// AVX2 alone (integer and memory kernels).
pub fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx2");
    #[allow(unreachable_code)]
    false
}

/// AVX-512 Foundation.
pub fn avx512f() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512f");
    #[allow(unreachable_code)]
    false
}

/// AVX-512 byte and word instructions (512-bit i8/i16 adds).
pub fn avx512bw() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512bw");
    #[allow(unreachable_code)]
    false
}

/// AVX-512 VNNI (512-bit int8/int16 dot products).
pub fn avx512vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vnni");
    #[allow(unreachable_code)]
    false
}

/// AVX-512 BF16 (`vdpbf16ps`).
pub fn avx512bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512bf16");
    #[allow(unreachable_code)]
    false
}

/// AVX-512 FP16 (half-precision arithmetic, `vfmadd*ph`).
pub fn avx512fp16() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512fp16");
    #[allow(unreachable_code)]
    false
}

/// AVX-VNNI: the VEX-encoded 256-bit dot products of cores without (or besides) AVX-512.
/// CPUID.(7,1):EAX bit 4, read by hand: its detection macro is not stable.
pub fn avx_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    return avx2() && cpuid(0, 0).eax >= 7 && cpuid(7, 1).eax & (1 << 4) != 0;
    #[allow(unreachable_code)]
    false
}

/// AMX tiles present and enabled by the OS (CPUID.7:EDX bit 24, and XCR0 bits 17 and 18 for the
/// tile configuration and data). Done by hand because the AMX detection macros are not stable.
/// The kernel must still grant the process its tile state (`arch_prctl`), which the CPU crate asks
/// for before the first tile instruction.
pub fn amx_tile() -> bool {
    #[cfg(target_arch = "x86_64")]
    return amx_leaf_bit(24) && xcr0() & (0b11 << 17) == 0b11 << 17;
    #[allow(unreachable_code)]
    false
}

/// AMX int8 tile multiplies (`tdpbssd` and kin), CPUID.7:EDX bit 25.
pub fn amx_int8() -> bool {
    #[cfg(target_arch = "x86_64")]
    return amx_tile() && amx_leaf_bit(25);
    #[allow(unreachable_code)]
    false
}

/// AMX bf16 tile multiplies (`tdpbf16ps`), CPUID.7:EDX bit 22.
pub fn amx_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    return amx_tile() && amx_leaf_bit(22);
    #[allow(unreachable_code)]
    false
}

/// AMX fp16 tile multiplies (`tdpfp16ps`, Granite Rapids and later), CPUID.(7,1):EAX bit 21.
pub fn amx_fp16() -> bool {
    #[cfg(target_arch = "x86_64")]
    return amx_tile() && cpuid(7, 1).eax & (1 << 21) != 0;
    #[allow(unreachable_code)]
    false
}

#[cfg(target_arch = "x86_64")]
fn amx_leaf_bit(bit: u32) -> bool {
    cpuid(0, 0).eax >= 7 && cpuid(7, 0).edx & (1 << bit) != 0
}

/// XCR0, the state components the OS enabled; 0 where the OS does not expose XGETBV.
#[cfg(target_arch = "x86_64")]
fn xcr0() -> u64 {
    if cpuid(1, 0).ecx & (1 << 27) == 0 {
        return 0;
    }
    let (lo, hi): (u32, u32);
    // SAFETY: CPUID.1:ECX.OSXSAVE (checked above) means the OS enabled XGETBV; reading XCR0 has
    // no side effects and touches no memory.
    unsafe {
        core::arch::asm!(
            "xgetbv",
            in("ecx") 0u32,
            out("eax") lo,
            out("edx") hi,
            options(nomem, nostack, preserves_flags),
        );
    }
    u64::from(hi) << 32 | u64::from(lo)
}

/// One CPUID leaf and subleaf.
#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)] // `__cpuid_count` became a safe function in newer Rust releases.
pub fn cpuid(leaf: u32, subleaf: u32) -> core::arch::x86_64::CpuidResult {
    // SAFETY: CPUID exists on every x86-64 processor and only reads identification registers.
    unsafe { core::arch::x86_64::__cpuid_count(leaf, subleaf) }
}

/// Advanced SIMD on AArch64.
pub fn neon() -> bool {
    #[cfg(target_arch = "aarch64")]
    return std::arch::is_aarch64_feature_detected!("neon");
    #[allow(unreachable_code)]
    false
}

/// Advanced SIMD int8 dot products (`sdot`/`udot`, FEAT_DotProd: Cortex-A76, Neoverse N1 and
/// later).
pub fn neon_dotprod() -> bool {
    #[cfg(target_arch = "aarch64")]
    return std::arch::is_aarch64_feature_detected!("dotprod");
    #[allow(unreachable_code)]
    false
}

/// Advanced SIMD int8 matrix multiplies (`smmla` and kin, FEAT_I8MM: Neoverse V1, N2 and later).
pub fn i8mm() -> bool {
    #[cfg(target_arch = "aarch64")]
    return std::arch::is_aarch64_feature_detected!("i8mm");
    #[allow(unreachable_code)]
    false
}

/// Advanced SIMD bfloat16 dot products and matrix multiplies (`bfdot`, `bfmmla`, FEAT_BF16).
pub fn arm_bf16() -> bool {
    #[cfg(target_arch = "aarch64")]
    return std::arch::is_aarch64_feature_detected!("bf16");
    #[allow(unreachable_code)]
    false
}

/// Which instruction sets a benchmark runs: the widest, every one detected, or a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IsaChoice<T> {
    /// The widest this CPU has (`auto` or `best`).
    Best,
    /// Every one this CPU has (`all`).
    All,
    /// Exactly these; each must be available.
    List(Vec<T>),
}

/// Parse `--isa`: `auto`/`best`, `all`, or a comma-separated list parsed by `parse`.
pub fn parse_choice<T>(
    text: &str,
    parse: impl Fn(&str) -> Result<T, BenchError>,
) -> Result<IsaChoice<T>, BenchError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "auto" | "best" => Ok(IsaChoice::Best),
        "all" => Ok(IsaChoice::All),
        _ => Ok(IsaChoice::List(parse_list(text, "isa", parse)?)),
    }
}

/// Turn a choice into the ISAs to run, given what this CPU has (`detected`, narrowest first, never
/// empty in practice). A listed ISA the CPU lacks is a usage error naming it and the available ones.
pub fn resolve<T>(choice: &IsaChoice<T>, detected: &[T]) -> Result<Vec<T>, BenchError>
where
    T: Copy + PartialEq + std::fmt::Display,
{
    match choice {
        IsaChoice::Best => Ok(detected.last().copied().into_iter().collect()),
        IsaChoice::All => Ok(detected.to_vec()),
        IsaChoice::List(list) => {
            if let Some(bad) = list.iter().find(|i| !detected.contains(i)) {
                let have: Vec<String> = detected.iter().map(ToString::to_string).collect();
                return Err(BenchError::invalid(format!(
                    "ISA '{bad}' is not available on this CPU (available: {})",
                    have.join(", ")
                )));
            }
            Ok(list.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_and_resolve_against_what_the_cpu_has() {
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| BenchError::invalid(format!("unknown ISA '{s}'")))
        };
        assert_eq!(parse_choice(" Auto", num).unwrap(), IsaChoice::Best);
        assert_eq!(parse_choice("best", num).unwrap(), IsaChoice::Best);
        assert_eq!(parse_choice("all", num).unwrap(), IsaChoice::All);
        assert_eq!(
            parse_choice("1,3", num).unwrap(),
            IsaChoice::List(vec![1, 3])
        );
        assert!(parse_choice("x", num).is_err());
        let have = [1u32, 2, 3];
        assert_eq!(resolve(&IsaChoice::Best, &have).unwrap(), vec![3]);
        assert_eq!(resolve(&IsaChoice::All, &have).unwrap(), vec![1, 2, 3]);
        let e = resolve(&IsaChoice::List(vec![4]), &have)
            .unwrap_err()
            .to_string();
        assert!(e.contains("'4'") && e.contains("available: 1, 2, 3"), "{e}");
    }

    #[test]
    fn features_imply_their_prerequisites() {
        if avx512f() || avx2_fma() {
            assert!(sse2());
        }
        if avx2_fma() {
            assert!(avx2());
        }
        assert!(!(neon() && sse2()), "one architecture at a time");
    }
}
