//! The core clock under the instruction class of a sample, not after it.
//!
//! Why: Intel cores run wide and "heavy" vector code under a lower frequency licence (AVX2 heavy:
//! L1, AVX-512 heavy, i.e. FP and FMA: L2; light 512-bit integer work: L1) and keep it for about
//! 2 ms after the last such instruction. A plain add chain timed after a sample reads the scalar
//! (L0) clock once the licence has lapsed, so a 512-bit FMA peak computed with it is too high and
//! the kernel looks 9 % slower than it is (seen on a Sapphire Rapids-class Xeon: 4.09 GHz scalar,
//! ~3.74 GHz under 512-bit FMAs, where likwid-bench reaches the same rate as hostbench).
//!
//! How: the same dependent add chain as `hostbench_core::clock` (one add per cycle on every core we
//! know), with independent vector instructions of the sample's own width and kind interleaved, 3
//! for every 4 adds. That density is above the one-per-two-cycles at which heavy instructions move
//! the licence, so the core runs under the same licence as the sample, and below one per cycle, so
//! even a core with a single pipe for that width (Zen 4 and Rocket Lake at 512 bits) keeps up and
//! the add chain, not the vector work, sets the pace. The vector instructions use their own
//! registers on zeros (no denormals, no overflow); the adds are counted and checked.
//!
//! On cores without frequency licences (AMD, Arm) this reads the same clock as the scalar chain;
//! the CPU tests check that agreement where it can be seen. AArch64 has no licence mechanism we
//! know of, so there the scalar chain is used and the basis says so.

use std::time::Duration;

use hostbench_core::clock;

use crate::isa::Isa;
use crate::kernels::OpKind;

/// Adds per block of every loaded chain: 16 groups of 8 adds and 6 vector instructions.
#[cfg(target_arch = "x86_64")]
const ADDS_PER_BLOCK: u64 = 128;

/// The instruction class a clock is read under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Load {
    /// Scalar code: the plain add chain.
    Scalar,
    /// Floating-point multiply-add work (FMA, or mul and add) of this many bits.
    Float(u16),
    /// Vector integer adds of this many bits.
    Int(u16),
    /// AMX tile multiplies.
    Tile,
}

impl Load {
    /// The class of a kernel's instructions.
    pub fn of(isa: Isa, kind: OpKind) -> Load {
        let bits = isa.width_bits() as u16;
        match kind {
            OpKind::ScalarIntAdd => Load::Scalar,
            _ if isa == Isa::Scalar || !cfg!(target_arch = "x86_64") => Load::Scalar,
            OpKind::Tile => Load::Tile,
            // Dot products run on the FMA units, and count as heavy for the licence as FMAs do.
            OpKind::Fma | OpKind::MulAdd | OpKind::Dot | OpKind::MatMul => Load::Float(bits),
            OpKind::VecIntAdd => Load::Int(bits),
        }
    }

    /// How the clock was measured, for a peak's basis.
    pub fn describe(self) -> String {
        match self {
            Load::Scalar => "measured".into(),
            Load::Float(b) => format!("measured under {b}-bit FP load"),
            Load::Int(b) => format!("measured under {b}-bit integer load"),
            Load::Tile => "measured under AMX tile load".into(),
        }
    }

    /// What the measurement ran, for a record's `extra.clock_method`.
    pub fn method(self) -> String {
        match self {
            Load::Scalar => "dependent scalar add chain".into(),
            Load::Float(b) => format!(
                "dependent scalar add chain interleaved with {b}-bit FP {} (3 per 4 adds)",
                if b >= 256 {
                    "FMAs"
                } else {
                    "multiplies and adds"
                }
            ),
            Load::Int(b) => {
                format!("dependent scalar add chain interleaved with {b}-bit integer adds (3 per 4 adds)")
            }
            Load::Tile => {
                "dependent scalar add chain with an AMX tile multiply every 32 adds".into()
            }
        }
    }

    /// Whether this host can run the load's instructions.
    pub fn available(self) -> bool {
        use hostbench_core::isa as has;
        match self {
            Load::Scalar => clock::supported(),
            Load::Float(128) | Load::Int(128) => has::sse2(),
            Load::Float(256) => has::avx2_fma(),
            Load::Int(256) => has::avx2(),
            Load::Float(512) | Load::Int(512) => has::avx512f(),
            Load::Tile => has::amx_int8() || has::amx_bf16(),
            _ => false,
        }
    }
}

/// Clock of the core this thread runs on, under `load`, over about `window`; `None` where the
/// architecture has no chain or the host lacks the load's instructions.
pub fn measure_hz(load: Load, window: Duration) -> Option<f64> {
    if !load.available() {
        return None;
    }
    match load {
        Load::Scalar => clock::measure_hz(window),
        #[cfg(target_arch = "x86_64")]
        _ => {
            let chain = x86::chain_for(load)?;
            clock::measure_hz_with(window, chain, ADDS_PER_BLOCK)
        }
        #[cfg(not(target_arch = "x86_64"))]
        _ => None,
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Load;

    /// One block: 16 × (8 dependent adds with 6 independent vector instructions between them).
    /// Six accumulators, so each is written once per 8 cycles, past any vector latency; two
    /// zeroed sources. `$vec` is the instruction template with `{d}` for the accumulator.
    macro_rules! loaded_chain {
        ($name:ident, $feat:literal, $zero:literal, [$($reg:tt),*], $v0:literal, $v1:literal,
         $v2:literal, $v3:literal, $v4:literal, $v5:literal) => {
            #[target_feature(enable = $feat)]
            fn $name(blocks: u64) -> u64 {
                let mut x: u64 = 0;
                let one: u64 = std::hint::black_box(1);
                for _ in 0..blocks {
                    // SAFETY: register-only arithmetic of the enabled target feature on registers
                    // declared clobbered; no memory, no stack.
                    unsafe {
                        core::arch::asm!(
                            $zero,
                            ".rept 16",
                            "add {x}, {one}", $v0, "add {x}, {one}", $v1,
                            "add {x}, {one}", $v2, "add {x}, {one}", $v3,
                            "add {x}, {one}", $v4, "add {x}, {one}", $v5,
                            "add {x}, {one}", "add {x}, {one}",
                            ".endr",
                            x = inout(reg) x,
                            one = in(reg) one,
                            $(out($reg) _,)*
                            options(nomem, nostack),
                        );
                    }
                }
                x
            }
        };
    }

    loaded_chain!(
        fma512, "avx512f",
        "vpxord zmm0, zmm0, zmm0\nvmovaps zmm1, zmm0\nvmovaps zmm2, zmm0\nvmovaps zmm3, zmm0\nvmovaps zmm4, zmm0\nvmovaps zmm5, zmm0\nvmovaps zmm6, zmm0\nvmovaps zmm7, zmm0",
        ["zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7"],
        "vfmadd231pd zmm0, zmm6, zmm7", "vfmadd231pd zmm1, zmm6, zmm7",
        "vfmadd231pd zmm2, zmm6, zmm7", "vfmadd231pd zmm3, zmm6, zmm7",
        "vfmadd231pd zmm4, zmm6, zmm7", "vfmadd231pd zmm5, zmm6, zmm7"
    );
    loaded_chain!(
        int512, "avx512f",
        "vpxord zmm0, zmm0, zmm0\nvmovaps zmm1, zmm0\nvmovaps zmm2, zmm0\nvmovaps zmm3, zmm0\nvmovaps zmm4, zmm0\nvmovaps zmm5, zmm0\nvmovaps zmm6, zmm0",
        ["zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6"],
        "vpaddq zmm0, zmm0, zmm6", "vpaddq zmm1, zmm1, zmm6",
        "vpaddq zmm2, zmm2, zmm6", "vpaddq zmm3, zmm3, zmm6",
        "vpaddq zmm4, zmm4, zmm6", "vpaddq zmm5, zmm5, zmm6"
    );
    loaded_chain!(
        fma256, "avx,fma",
        "vxorpd ymm0, ymm0, ymm0\nvmovaps ymm1, ymm0\nvmovaps ymm2, ymm0\nvmovaps ymm3, ymm0\nvmovaps ymm4, ymm0\nvmovaps ymm5, ymm0\nvmovaps ymm6, ymm0\nvmovaps ymm7, ymm0",
        ["ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7"],
        "vfmadd231pd ymm0, ymm6, ymm7", "vfmadd231pd ymm1, ymm6, ymm7",
        "vfmadd231pd ymm2, ymm6, ymm7", "vfmadd231pd ymm3, ymm6, ymm7",
        "vfmadd231pd ymm4, ymm6, ymm7", "vfmadd231pd ymm5, ymm6, ymm7"
    );
    loaded_chain!(
        int256, "avx2",
        "vpxor ymm0, ymm0, ymm0\nvmovaps ymm1, ymm0\nvmovaps ymm2, ymm0\nvmovaps ymm3, ymm0\nvmovaps ymm4, ymm0\nvmovaps ymm5, ymm0\nvmovaps ymm6, ymm0",
        ["ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6"],
        "vpaddq ymm0, ymm0, ymm6", "vpaddq ymm1, ymm1, ymm6",
        "vpaddq ymm2, ymm2, ymm6", "vpaddq ymm3, ymm3, ymm6",
        "vpaddq ymm4, ymm4, ymm6", "vpaddq ymm5, ymm5, ymm6"
    );
    // SSE2 has no FMA: multiplies and adds alternate, as in the mul+add kernels.
    loaded_chain!(
        float128, "sse2",
        "xorpd xmm0, xmm0\nmovaps xmm1, xmm0\nmovaps xmm2, xmm0\nmovaps xmm3, xmm0\nmovaps xmm4, xmm0\nmovaps xmm5, xmm0\nmovaps xmm6, xmm0",
        ["xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6"],
        "mulpd xmm0, xmm6", "addpd xmm1, xmm6", "mulpd xmm2, xmm6",
        "addpd xmm3, xmm6", "mulpd xmm4, xmm6", "addpd xmm5, xmm6"
    );
    loaded_chain!(
        int128, "sse2",
        "pxor xmm0, xmm0\nmovaps xmm1, xmm0\nmovaps xmm2, xmm0\nmovaps xmm3, xmm0\nmovaps xmm4, xmm0\nmovaps xmm5, xmm0\nmovaps xmm6, xmm0",
        ["xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6"],
        "paddq xmm0, xmm6", "paddq xmm1, xmm6", "paddq xmm2, xmm6",
        "paddq xmm3, xmm6", "paddq xmm4, xmm6", "paddq xmm5, xmm6"
    );

    /// The chain for `load`, once its instructions are known to exist (`Load::available`).
    pub(super) fn chain_for(load: Load) -> Option<fn(u64) -> u64> {
        // SAFETY (each closure): the caller checked `Load::available`, so the target feature the
        // chain was compiled for is present on this CPU.
        Some(match load {
            Load::Float(512) => |b| unsafe { fma512(b) },
            Load::Int(512) => |b| unsafe { int512(b) },
            Load::Float(256) => |b| unsafe { fma256(b) },
            Load::Int(256) => |b| unsafe { int256(b) },
            Load::Float(128) => |b| unsafe { float128(b) },
            Load::Int(128) => |b| unsafe { int128(b) },
            Load::Tile => return crate::amx::clock_chain(),
            _ => return None,
        })
    }

    #[cfg(test)]
    pub(super) fn run(load: Load, blocks: u64) -> Option<u64> {
        chain_for(load).map(|c| c(blocks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Load; 7] = [
        Load::Scalar,
        Load::Float(128),
        Load::Int(128),
        Load::Float(256),
        Load::Int(256),
        Load::Float(512),
        Load::Int(512),
    ];

    #[test]
    fn every_available_chain_does_the_adds_it_claims() {
        #[cfg(target_arch = "x86_64")]
        for load in ALL
            .into_iter()
            .filter(|l| *l != Load::Scalar && l.available())
        {
            assert_eq!(x86::run(load, 3), Some(3 * ADDS_PER_BLOCK), "{load:?}");
        }
    }

    #[test]
    fn loaded_clock_is_plausible_and_missing_isa_reads_none() {
        for load in ALL {
            let hz = measure_hz(load, Duration::from_millis(10));
            if load.available() {
                let hz = hz.unwrap_or_else(|| panic!("{load:?}: no clock"));
                // A deleted or shortened chain would read far above any real clock.
                assert!((1e8..1e10).contains(&hz), "{load:?}: {hz}");
            } else {
                assert_eq!(hz, None, "{load:?}");
            }
        }
    }

    #[test]
    fn kernels_map_to_their_instruction_class() {
        assert_eq!(Load::of(Isa::Scalar, OpKind::ScalarIntAdd), Load::Scalar);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(Load::of(Isa::Avx512, OpKind::Fma), Load::Float(512));
            assert_eq!(Load::of(Isa::Avx2Fma, OpKind::VecIntAdd), Load::Int(256));
            assert_eq!(Load::of(Isa::Sse2, OpKind::MulAdd), Load::Float(128));
        }
        assert!(Load::Float(512)
            .describe()
            .starts_with("measured under 512-bit"));
    }
}
