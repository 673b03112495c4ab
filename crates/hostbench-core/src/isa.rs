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

/// Advanced SIMD on AArch64.
pub fn neon() -> bool {
    #[cfg(target_arch = "aarch64")]
    return std::arch::is_aarch64_feature_detected!("neon");
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
