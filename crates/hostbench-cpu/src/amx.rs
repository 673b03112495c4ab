//! AMX tile multiplies (Sapphire Rapids and later Xeons): `tdpbssd` (int8) and `tdpbf16ps` (bf16)
//! into up to six independent accumulator tiles, and `tdpfp16ps` (fp16, AMX-FP16: Granite Rapids
//! and later) the same way.
//!
//! Why this shape: one tile multiply is 16 × 16 results, each a dot product of 64 i8 (or 32 bf16)
//! pairs, which the TMUL unit takes 16 cycles to issue; its latency is several times that, so a
//! single accumulator would leave the unit idle. Independent accumulators (tmm0…tmm5) with shared
//! sources (tmm6, tmm7) keep it busy, and the count is tuned at run time like the vector chains.
//! The sources stay in their tiles, so the figure is the unit's own rate, not a GEMM's (which also
//! loads tiles): BENCHMARKS sets a framework's GEMM beside it.
//!
//! Why asm: the AMX intrinsics and target features are not stable in Rust. The tile registers are
//! architectural state the compiler never allocates, so consecutive `asm!` statements see the
//! tiles the previous one left.
//!
//! Permission: Linux hands out the 8 KiB tile-data state only on request
//! (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`, once per process); without it the first
//! tile instruction kills the process. A kernel or hypervisor that refuses makes every AMX case a
//! skip with that reason.
//!
//! Validation: all-ones sources, so each instruction adds exactly 64 (int8, wrapping i32) or 32
//! (bf16 or fp16 into f32, exact while below 2^24) to every element of its accumulator; every
//! element of every accumulator is compared with that closed form after each call.

use hostbench_core::BenchError;

use crate::isa::Dtype;
use crate::kernels::KernelCall;

/// Accumulator-tile counts worth trying.
pub const CHAINS: &[usize] = &[1, 2, 4, 6];

/// Blocks per validated call: bf16 and fp16 accumulators gain 32 per instruction and must stay
/// below 2^24 to be exact (2^16 blocks × 4 × 32 = 2^23); int8 wraps exactly in i32 whatever the
/// count.
pub fn max_blocks(dtype: Dtype) -> u64 {
    match dtype {
        Dtype::BF16 | Dtype::F16 => 1 << 16,
        _ => crate::kernels::MAX_BLOCKS_PER_CALL,
    }
}

/// A validated tile kernel with `chains` accumulators.
pub fn kernel(dtype: Dtype, chains: usize) -> Result<KernelCall, BenchError> {
    #[cfg(target_arch = "x86_64")]
    return x86::kernel(dtype, chains);
    #[allow(unreachable_code)]
    Err(BenchError::unsupported(format!(
        "AMX {dtype} with {chains} accumulators on this architecture"
    )))
}

/// Ask Linux for the tile-data state, once per process; the refusal, if any, is the reason every
/// AMX case is skipped.
pub fn permission() -> Result<(), BenchError> {
    // arch_prctl exists on x86 only: AMX is an x86 unit.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static GRANTED: OnceLock<Result<(), String>> = OnceLock::new();
        return GRANTED
            .get_or_init(|| {
                const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
                const XFEATURE_XTILEDATA: libc::c_long = 18;
                // SAFETY: this arch_prctl only widens the XSAVE features this process may use; it
                // touches no memory of ours.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_arch_prctl,
                        ARCH_REQ_XCOMP_PERM,
                        XFEATURE_XTILEDATA,
                    )
                };
                if r == 0 {
                    Ok(())
                } else {
                    Err(format!(
                        "the kernel refused AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: {})",
                        std::io::Error::last_os_error()
                    ))
                }
            })
            .clone()
            .map_err(BenchError::unsupported);
    }
    #[allow(unreachable_code)]
    Err(BenchError::unsupported(
        "AMX needs Linux's tile-state permission",
    ))
}

/// The clock chain under AMX load: 128 dependent adds per block with a tile multiply after every
/// 32, rotating over four accumulators so that no multiply waits for another's result (a waiting
/// one would fill the reorder buffer and hold the adds back). Returns the adds run, or `None`
/// where AMX is unusable.
pub fn clock_chain() -> Option<fn(u64) -> u64> {
    #[cfg(target_arch = "x86_64")]
    return x86::clock_chain();
    #[allow(unreachable_code)]
    None
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::sync::Arc;

    use hostbench_core::BenchError;

    use super::permission;
    use crate::isa::Dtype;
    use crate::kernels::{Elem, KernelCall, UNROLL};

    /// Bytes in one row of a full tile, and rows per tile.
    const ROW: usize = 64;
    const ROWS: usize = 16;

    /// One full tile's memory image (16 rows of 64 bytes).
    #[repr(C, align(64))]
    #[derive(Clone, Copy)]
    struct TileMem([u8; ROW * ROWS]);

    /// Palette 1 with tiles 0–7 at 16 rows × 64 bytes, the largest shape.
    #[repr(C, align(64))]
    struct TileConfig([u8; 64]);

    impl TileConfig {
        fn full() -> Self {
            let mut c = [0u8; 64];
            c[0] = 1; // palette
            for t in 0..8 {
                c[16 + 2 * t] = ROW as u8; // colsb, little-endian u16
                c[48 + t] = ROWS as u8;
            }
            Self(c)
        }
    }

    /// The instruction for accumulator tile `j` (0–5) with sources tmm6 and tmm7; asm! needs the
    /// register in the template, so each tile is its own arm.
    macro_rules! per_tile {
        ($j:expr, $pre:literal, $post:literal, $($rest:tt)*) => {
            match $j {
                0 => core::arch::asm!(concat!($pre, "tmm0", $post), $($rest)*),
                1 => core::arch::asm!(concat!($pre, "tmm1", $post), $($rest)*),
                2 => core::arch::asm!(concat!($pre, "tmm2", $post), $($rest)*),
                3 => core::arch::asm!(concat!($pre, "tmm3", $post), $($rest)*),
                4 => core::arch::asm!(concat!($pre, "tmm4", $post), $($rest)*),
                _ => core::arch::asm!(concat!($pre, "tmm5", $post), $($rest)*),
            }
        };
    }

    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Op {
        /// `tdpbssd`: s8 × s8 → i32, 64 products per result.
        Int8,
        /// `tdpbf16ps`: bf16 × bf16 → f32, 32 products per result.
        Bf16,
        /// `tdpfp16ps` (AMX-FP16): fp16 × fp16 → f32, 32 products per result.
        Fp16,
    }

    impl Op {
        fn name(self) -> &'static str {
            match self {
                Op::Int8 => "i8",
                Op::Bf16 => "bf16",
                Op::Fp16 => "f16",
            }
        }
    }

    /// Run `blocks × UNROLL` rounds of one multiply into each of `C` accumulators loaded from
    /// `acc`, with `a` and `b` as sources, and store the accumulators back into `acc`.
    ///
    /// # Safety
    /// The CPU must have AMX with `op`'s multiply, and this process the tile permission.
    unsafe fn run_tiles<const C: usize>(
        op: Op,
        blocks: u64,
        acc: &mut [TileMem],
        a: &TileMem,
        b: &TileMem,
    ) {
        let cfg = TileConfig::full();
        let stride = ROW;
        // SAFETY (every asm! below): the caller guarantees AMX and the permission; loads read and
        // stores write one 1 KiB tile image of ours, with the configured 64-byte stride.
        unsafe {
            core::arch::asm!("ldtilecfg [{c}]", c = in(reg) cfg.0.as_ptr(), options(nostack, readonly));
            core::arch::asm!("tileloadd tmm6, [{p} + {s}*1]", p = in(reg) a.0.as_ptr(), s = in(reg) stride, options(nostack, readonly));
            core::arch::asm!("tileloadd tmm7, [{p} + {s}*1]", p = in(reg) b.0.as_ptr(), s = in(reg) stride, options(nostack, readonly));
            for (j, t) in acc.iter().enumerate().take(C) {
                per_tile!(j, "tileloadd ", ", [{p} + {s}*1]", p = in(reg) t.0.as_ptr(), s = in(reg) stride, options(nostack, readonly));
            }
            for _ in 0..blocks {
                for _ in 0..UNROLL {
                    for j in 0..C {
                        match op {
                            Op::Int8 => {
                                per_tile!(j, "tdpbssd ", ", tmm6, tmm7", options(nomem, nostack))
                            }
                            Op::Bf16 => {
                                per_tile!(j, "tdpbf16ps ", ", tmm6, tmm7", options(nomem, nostack))
                            }
                            Op::Fp16 => {
                                per_tile!(j, "tdpfp16ps ", ", tmm6, tmm7", options(nomem, nostack))
                            }
                        }
                    }
                }
            }
            for (j, t) in acc.iter_mut().enumerate().take(C) {
                per_tile!(j, "tilestored [{p} + {s}*1], ", "", p = in(reg) t.0.as_mut_ptr(), s = in(reg) stride, options(nostack));
            }
            core::arch::asm!("tilerelease", options(nomem, nostack));
        }
    }

    type RawTiles = unsafe fn(Op, u64, &mut [TileMem], &TileMem, &TileMem);

    /// A tile image whose every 4-byte element is `word`.
    fn filled(word: u32) -> TileMem {
        let mut t = TileMem([0; ROW * ROWS]);
        for c in t.0.chunks_exact_mut(4) {
            c.copy_from_slice(&word.to_le_bytes());
        }
        t
    }

    /// Check accumulator tile `j` after `n` multiplies: every element (i32 or f32 by `op`) must be
    /// its start value plus `n` times the multiply's gain, bit for bit.
    fn check(op: Op, j: usize, t: &TileMem, n: u64) -> Result<(), BenchError> {
        let words =
            t.0.chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        let (expect, shown) = match op {
            Op::Int8 => {
                let e = i32::from_index(j).advanced(n * 64);
                (e as u32, format!("{e}"))
            }
            Op::Bf16 | Op::Fp16 => {
                let e = f32::from_index(j).advanced(n * 32);
                (e.to_bits(), format!("{e}"))
            }
        };
        match words.enumerate().find(|(_, w)| *w != expect) {
            None => Ok(()),
            Some((i, w)) => {
                let got = match op {
                    Op::Int8 => format!("{}", w as i32),
                    Op::Bf16 | Op::Fp16 => format!("{}", f32::from_bits(w)),
                };
                Err(BenchError::Validation(format!(
                    "amx {} kernel: tile {j} element {i} ended at {got}, expected {shown} after {n} multiplies",
                    op.name(),
                )))
            }
        }
    }

    pub(super) fn kernel(dtype: Dtype, chains: usize) -> Result<KernelCall, BenchError> {
        permission()?;
        // Sources of ones: s8 1 in every byte, or bf16 1.0 (0x3f80) or fp16 1.0 (0x3c00) in every
        // half-word.
        let (op, ones) = match dtype {
            Dtype::I8 => (Op::Int8, 0x0101_0101),
            Dtype::BF16 => (Op::Bf16, 0x3f80_3f80),
            Dtype::F16 => (Op::Fp16, 0x3c00_3c00),
            other => return Err(BenchError::invalid(format!("amx has no {other} kernel"))),
        };
        let raw: RawTiles = match chains {
            1 => run_tiles::<1>,
            2 => run_tiles::<2>,
            4 => run_tiles::<4>,
            6 => run_tiles::<6>,
            other => {
                return Err(BenchError::invalid(format!(
                    "amx {dtype}: unsupported accumulator count {other}"
                )))
            }
        };
        let (a, b) = (filled(ones), filled(ones));
        Ok(Arc::new(move |blocks: u64| {
            let mut acc: Vec<TileMem> = (0..chains)
                .map(|j| match op {
                    Op::Int8 => filled(i32::from_index(j) as u32),
                    Op::Bf16 | Op::Fp16 => filled(f32::from_index(j).to_bits()),
                })
                .collect();
            // SAFETY: `Kernel::new` builds this only after `Isa::supports` confirmed AMX and the
            // multiply for `dtype`, and `permission()` above succeeded; `acc` holds `chains` tiles.
            unsafe { raw(op, blocks, &mut acc, &a, &b) };
            let n = blocks * UNROLL;
            acc.iter()
                .enumerate()
                .try_for_each(|(j, t)| check(op, j, t, n))
        }))
    }

    /// See [`super::clock_chain`].
    pub(super) fn clock_chain() -> Option<fn(u64) -> u64> {
        use hostbench_core::isa as has;
        if permission().is_err() {
            return None;
        }
        if has::amx_int8() {
            // SAFETY (both): AMX with the multiply named is present and the permission granted.
            Some(|b| unsafe { loaded::<false>(b) })
        } else if has::amx_bf16() {
            Some(|b| unsafe { loaded::<true>(b) })
        } else {
            None
        }
    }

    /// # Safety
    /// AMX with the multiply `BF16` selects, and the tile permission.
    unsafe fn loaded<const BF16: bool>(blocks: u64) -> u64 {
        let cfg = TileConfig::full();
        let mut x: u64 = 0;
        let one: u64 = std::hint::black_box(1);
        // SAFETY (every asm! below): the caller guarantees AMX and the permission; the zeroed
        // tiles are register state only.
        unsafe {
            core::arch::asm!("ldtilecfg [{c}]", c = in(reg) cfg.0.as_ptr(), options(nostack, readonly));
            core::arch::asm!(
                "tilezero tmm0",
                "tilezero tmm1",
                "tilezero tmm2",
                "tilezero tmm3",
                "tilezero tmm6",
                "tilezero tmm7",
                options(nomem, nostack),
            );
            // One block: 4 × (32 dependent adds, then a multiply into the next accumulator).
            macro_rules! block {
                ($tdp:literal) => {
                    core::arch::asm!(
                        ".rept 32", "add {x}, {one}", ".endr", concat!($tdp, " tmm0, tmm6, tmm7"),
                        ".rept 32", "add {x}, {one}", ".endr", concat!($tdp, " tmm1, tmm6, tmm7"),
                        ".rept 32", "add {x}, {one}", ".endr", concat!($tdp, " tmm2, tmm6, tmm7"),
                        ".rept 32", "add {x}, {one}", ".endr", concat!($tdp, " tmm3, tmm6, tmm7"),
                        x = inout(reg) x, one = in(reg) one, options(nomem, nostack),
                    )
                };
            }
            for _ in 0..blocks {
                if BF16 {
                    block!("tdpbf16ps");
                } else {
                    block!("tdpbssd");
                }
            }
            core::arch::asm!("tilerelease", options(nomem, nostack));
        }
        x
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn amx(dtype: Dtype) -> bool {
            let isa = if dtype == Dtype::F16 {
                crate::isa::Isa::AmxFp16
            } else {
                crate::isa::Isa::Amx
            };
            isa.supports(dtype).is_ok() && permission().is_ok()
        }

        #[test]
        fn tile_kernels_validate_at_every_accumulator_count() {
            for dtype in [Dtype::I8, Dtype::BF16, Dtype::F16] {
                if !amx(dtype) {
                    eprintln!("skipped: AMX {dtype} not usable on this host");
                    continue;
                }
                for &c in super::super::CHAINS {
                    kernel(dtype, c).unwrap()(50).unwrap();
                }
            }
        }

        #[test]
        fn a_tile_kernel_that_skips_work_fails() {
            if !amx(Dtype::I8) {
                eprintln!("skipped: AMX int8 not usable on this host");
                return;
            }
            let (a, b) = (filled(0x0101_0101), filled(0x0101_0101));
            let mut acc = vec![filled(0); 2];
            // SAFETY: AMX int8 and the permission were checked above.
            unsafe { run_tiles::<2>(Op::Int8, 9, &mut acc, &a, &b) };
            // Nine blocks ran; the check expects ten.
            let err = check(Op::Int8, 0, &acc[0], 10 * UNROLL)
                .unwrap_err()
                .to_string();
            assert!(err.contains("expected"), "{err}");
            // And the work that did run is exact: 9 blocks x UNROLL multiplies of 64 each.
            assert!(check(Op::Int8, 0, &acc[0], 9 * UNROLL).is_ok());
        }

        #[test]
        fn the_loaded_clock_chain_counts_its_adds() {
            if let Some(chain) = clock_chain() {
                assert_eq!(chain(10), 10 * 128);
            }
        }
    }
}
