//! The x86-64 kernels behind [`Gemm`](super::Gemm): AVX-512F f32 and AVX-512 BF16
//! (32 × 12 register tiles), AVX2 + FMA f32 (16 × 6), and AMX bf16 (32 × 32 of C in four
//! 16 × 16 tiles) with its plain-code emulation for the tests. One file for the intrinsics and
//! tile instructions, so the parent holds the packing, the portable kernel and the self-check.

use core::arch::x86_64::*;

use super::{bf16_pair, write_tile, Gemm};

/// A register-tile kernel: per packed step, two vectors of A (`2 × LANES` rows) and each
/// of the `NR` B elements broadcast, into `2 × NR` accumulators; then the tile is stored
/// or subtracted, full tiles straight to memory and partial ones through a spill.
macro_rules! tile_kernel {
    ($name:ident, $feat:literal, $p:ty, $v:ty, $lanes:literal, $nr:literal,
     $zero:path, $load:path, $set1:path, $fma:path,
     $loadc:path, $storec:path, $subc:path) => {
        #[target_feature(enable = $feat)]
        #[allow(clippy::too_many_arguments)] // a BLAS-style micro-kernel signature
        unsafe fn $name(
            ks: usize,
            a: *const $p,
            b: *const $p,
            c: *mut f32,
            ldc: usize,
            mr: usize,
            nr: usize,
            store: bool,
        ) {
            let mut acc: [$v; 2 * $nr] = [$zero(); 2 * $nr];
            // SAFETY: the packed panels hold ks steps; the tile is inside C.
            unsafe {
                for s in 0..ks {
                    let a0 = $load(a.add(s * 2 * $lanes));
                    let a1 = $load(a.add(s * 2 * $lanes + $lanes));
                    let bp = b.add(s * $nr);
                    for j in 0..$nr {
                        let bj = $set1(*bp.add(j));
                        acc[2 * j] = $fma(acc[2 * j], a0, bj);
                        acc[2 * j + 1] = $fma(acc[2 * j + 1], a1, bj);
                    }
                }
                if mr == 2 * $lanes && nr == $nr {
                    for j in 0..$nr {
                        for v in 0..2 {
                            let p = c.add(j * ldc + v * $lanes);
                            let x = if store {
                                acc[2 * j + v]
                            } else {
                                $subc($loadc(p), acc[2 * j + v])
                            };
                            $storec(p, x);
                        }
                    }
                } else {
                    let mut spill = [0.0f32; 2 * $lanes * $nr];
                    for (i, x) in acc.iter().enumerate() {
                        $storec(spill.as_mut_ptr().add(i * $lanes), *x);
                    }
                    write_tile::<{ 2 * $lanes }>(&spill, c, ldc, mr, nr, store);
                }
            }
        }
    };
}

/// The [`Gemm`] face of a kernel: its tile, its packing and a call that forwards.
macro_rules! gemm {
    ($(#[$doc:meta])* $ty:ident, $p:ty, $mr:literal, $nr:literal, $kp:literal,
     $label:literal, $pack:path, $kernel:ident) => {
        $(#[$doc])*
        pub(in crate::linpack) struct $ty;

        impl Gemm for $ty {
            type P = $p;
            const MR: usize = $mr;
            const NR: usize = $nr;
            const KP: usize = $kp;
            const NAME: &'static str = $label;

            fn pack(v: &[f32]) -> $p {
                $pack(v)
            }

            unsafe fn kernel(
                ks: usize,
                a: *const $p,
                b: *const $p,
                c: *mut f32,
                ldc: usize,
                mr: usize,
                nr: usize,
                store: bool,
            ) {
                // SAFETY: forwarded from the caller, who checked the instruction set.
                unsafe { $kernel(ks, a, b, c, ldc, mr, nr, store) }
            }
        }
    };
}

fn first(v: &[f32]) -> f32 {
    v[0]
}

#[target_feature(enable = "avx512f")]
fn fma512(acc: __m512, a: __m512, b: __m512) -> __m512 {
    _mm512_fmadd_ps(a, b, acc)
}

#[target_feature(enable = "avx2,fma")]
fn fma256(acc: __m256, a: __m256, b: __m256) -> __m256 {
    _mm256_fmadd_ps(a, b, acc)
}

#[target_feature(enable = "avx512f")]
unsafe fn load_bh(p: *const u32) -> __m512bh {
    // SAFETY: 64 readable bytes at p (caller); a __m512i and a __m512bh are the same 64
    // bytes.
    unsafe { core::mem::transmute(_mm512_loadu_si512(p as *const __m512i)) }
}

#[target_feature(enable = "avx512f")]
fn set1_bh(pair: u32) -> __m512bh {
    // SAFETY: as above.
    unsafe { core::mem::transmute(_mm512_set1_epi32(pair as i32)) }
}

#[target_feature(enable = "avx512f,avx512bf16")]
fn dpbf16(acc: __m512, a: __m512bh, b: __m512bh) -> __m512 {
    _mm512_dpbf16_ps(acc, a, b)
}

tile_kernel!(
    f32_avx512,
    "avx512f",
    f32,
    __m512,
    16,
    12,
    _mm512_setzero_ps,
    _mm512_loadu_ps,
    _mm512_set1_ps,
    fma512,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_sub_ps
);
tile_kernel!(
    bf16_avx512,
    "avx512f,avx512bf16",
    u32,
    __m512,
    16,
    12,
    _mm512_setzero_ps,
    load_bh,
    set1_bh,
    dpbf16,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_sub_ps
);
tile_kernel!(
    f32_avx2,
    "avx2,fma",
    f32,
    __m256,
    8,
    6,
    _mm256_setzero_ps,
    _mm256_loadu_ps,
    _mm256_set1_ps,
    fma256,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_sub_ps
);

gemm!(
    /// AVX-512F f32, 32 × 12.
    F32Avx512, f32, 32, 12, 1, "f32 (AVX-512F)", first, f32_avx512
);
gemm!(
    /// AVX-512 BF16, 32 × 12: `vdpbf16ps` with two vectors of A pairs per step and each B
    /// pair broadcast as one 32-bit value; products summed in f32.
    Bf16Avx512,
    u32,
    32,
    12,
    2,
    "bf16 → f32 (AVX-512 BF16, vdpbf16ps)",
    bf16_pair,
    bf16_avx512
);
gemm!(
    /// AVX2 + FMA f32, 16 × 6.
    F32Avx2, f32, 16, 6, 1, "f32 (AVX2 + FMA)", first, f32_avx2
);

/// AMX bf16 (`tdpbf16ps`), 32 × 32 of C as 2 × 2 tiles of 16 × 16 f32, computed
/// transposed: a tile row is one column of the column-major C (64 contiguous bytes), so C
/// loads and stores with stride `ldc` and no shuffle. Then `Cᵀ += Bᵀ Aᵀ`: the "A" tile of
/// the multiply is B's columns, each column's bf16 pairs contiguous (B packed lane-major),
/// and the "B" tile (pairs of k by 16 lanes, the VNNI layout) is exactly the k-major packed
/// A panel read with a stride of its 32 lanes. Tiles only accumulate, so B is packed
/// negated and the update `C −= A·B` is `C += A·(−B)`. Tiles are configured once per run
/// of calls ([`Gemm::begin`]).
pub(in crate::linpack) struct Bf16Amx;

/// Palette 1, tiles 0–7 at 16 rows × 64 bytes.
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

fn neg_pair(v: &[f32]) -> u32 {
    let neg = [-v[0], v.get(1).map_or(0.0, |x| -x)];
    bf16_pair(&neg)
}

impl Gemm for Bf16Amx {
    type P = u32;
    const MR: usize = 32;
    const NR: usize = 32;
    const KP: usize = 2;
    const NAME: &'static str = "bf16 → f32 (AMX, tdpbf16ps)";
    const KS_ALIGN: usize = 16;
    const B_LANE_MAJOR: bool = true;

    fn pack(v: &[f32]) -> u32 {
        bf16_pair(v)
    }

    fn pack_b_elem(v: &[f32]) -> u32 {
        neg_pair(v)
    }

    unsafe fn begin() {
        let mut c = [0u8; 64];
        c[0] = 1;
        for t in 0..8 {
            c[16 + 2 * t] = 64;
            c[48 + t] = 16;
        }
        let cfg = TileConfig(c);
        // SAFETY: the caller checked AMX; the process holds the tile permission
        // (`amx::permission`, asked before this unit is chosen).
        unsafe {
            core::arch::asm!("ldtilecfg [{c}]", c = in(reg) cfg.0.as_ptr(), options(nostack, readonly))
        };
    }

    unsafe fn end() {
        // SAFETY: after begin on this thread.
        unsafe { core::arch::asm!("tilerelease", options(nomem, nostack)) };
    }

    unsafe fn kernel(
        ks: usize,
        a: *const u32,
        b: *const u32,
        c: *mut f32,
        ldc: usize,
        mr: usize,
        nr: usize,
        store: bool,
    ) {
        // SAFETY: forwarded from the caller, who checked AMX and configured the tiles.
        unsafe { amx_kernel(amx_tiles, ks, a, b, c, ldc, mr, nr, store) }
    }
}

/// `Cᵀ(32 × 32) += …` over `ks` packed steps, as [`amx_tiles`] does it.
type Tiles = unsafe fn(usize, *const u32, *const u32, *mut f32, usize);

/// The AMX kernel around its tile routine: full 32 × 32 blocks straight from C, edges (and
/// the tests' store mode) through a scratch block.
///
/// # Safety
/// As [`Gemm::kernel`], and `tiles` may run (AMX configured, or the tests' emulation).
#[inline(always)]
#[allow(clippy::too_many_arguments)] // the micro-kernel signature and its tile routine
unsafe fn amx_kernel(
    tiles: Tiles,
    ks: usize,
    a: *const u32,
    b: *const u32,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    nr: usize,
    store: bool,
) {
    if mr == 32 && nr == 32 && !store {
        // SAFETY: forwarded from the caller; a full tile block.
        unsafe { tiles(ks, a, b, c, ldc) };
        return;
    }
    // C in, the full-tile routine, C out (negated back for a store, whose B was packed
    // negated).
    let mut t = [0.0f32; 32 * 32];
    for j in 0..nr {
        for i in 0..mr {
            // SAFETY: inside the caller's tile.
            t[j * 32 + i] = if store {
                0.0
            } else {
                unsafe { *c.add(j * ldc + i) }
            };
        }
    }
    // SAFETY: the scratch is a full 32 × 32 block with stride 32; the packed operands are
    // zero beyond mr and nr.
    unsafe { tiles(ks, a, b, t.as_mut_ptr(), 32) };
    for j in 0..nr {
        for i in 0..mr {
            let v = t[j * 32 + i];
            // SAFETY: as above.
            unsafe { *c.add(j * ldc + i) = if store { -v } else { v } };
        }
    }
}

/// Where the tiles of one block live, for the instructions and for the tests' emulation
/// of them alike: C's four 16 × 16 tiles (tile rows are C's columns, `ldc` floats apart):
/// rows 0–15 and 16–31 of columns 0–15, then the same of columns 16–31.
fn c_tiles(c: *mut f32, ldc: usize) -> [*mut f32; 4] {
    [
        c,
        c.wrapping_add(16),
        c.wrapping_add(16 * ldc),
        c.wrapping_add(16 * ldc + 16),
    ]
}

/// B's two tiles (lanes 0–15 and 16–31, a lane's steps contiguous, rows `ks` pairs apart)
/// and A's two (lanes 0–15 and 16–31 of the 16 steps from `s0`, rows
/// [`A_ROW_BYTES`] apart) of one 16-step slice. Block tile `2·bi + ai` gains B tile `bi`
/// times A tile `ai`.
fn step_tiles(ks: usize, a: *const u32, b: *const u32, s0: usize) -> [[*const u32; 2]; 2] {
    [
        [b.wrapping_add(s0), b.wrapping_add(16 * ks + s0)],
        [a.wrapping_add(s0 * 32), a.wrapping_add(s0 * 32 + 16)],
    ]
}

/// A packed A step: 32 lanes of bf16 pairs.
const A_ROW_BYTES: usize = 32 * 4;

/// `Cᵀ(32 × 32) += …` over `ks` packed steps (a multiple of 16), tiles configured.
///
/// # Safety
/// AMX with tiles configured by `Bf16Amx::begin`; `a` a k-major panel of 32 lanes and `b` a
/// lane-major panel of 32 lanes, both of `ks` steps; `c` a 32 × 32 block with stride `ldc`.
unsafe fn amx_tiles(ks: usize, a: *const u32, b: *const u32, c: *mut f32, ldc: usize) {
    let cs = ldc * 4;
    let [c0, c1, c2, c3] = c_tiles(c, ldc);
    // SAFETY (every asm! below): tile loads and stores of 16 rows of 64 bytes inside the
    // caller's buffers, with the strides documented above.
    unsafe {
        core::arch::asm!(
            "tileloadd tmm0, [{c0} + {s}*1]",
            "tileloadd tmm1, [{c1} + {s}*1]",
            "tileloadd tmm2, [{c2} + {s}*1]",
            "tileloadd tmm3, [{c3} + {s}*1]",
            c0 = in(reg) c0, c1 = in(reg) c1, c2 = in(reg) c2, c3 = in(reg) c3,
            s = in(reg) cs, options(nostack, readonly)
        );
        let bs = ks * 4;
        for s0 in (0..ks).step_by(16) {
            let [[b0, b1], [a0, a1]] = step_tiles(ks, a, b, s0);
            // Intel operand order: tdpbf16ps dst, src1 (rows × pairs), src2 (pairs × lanes).
            core::arch::asm!(
                "tileloadd tmm4, [{b0} + {bs}*1]",
                "tileloadd tmm5, [{b1} + {bs}*1]",
                "tileloadd tmm6, [{a0} + {as_}*1]",
                "tileloadd tmm7, [{a1} + {as_}*1]",
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6",
                "tdpbf16ps tmm3, tmm5, tmm7",
                b0 = in(reg) b0,
                b1 = in(reg) b1,
                a0 = in(reg) a0,
                a1 = in(reg) a1,
                bs = in(reg) bs,
                as_ = in(reg) A_ROW_BYTES,
                options(nostack, readonly)
            );
        }
        core::arch::asm!(
            "tilestored [{c0} + {s}*1], tmm0",
            "tilestored [{c1} + {s}*1], tmm1",
            "tilestored [{c2} + {s}*1], tmm2",
            "tilestored [{c3} + {s}*1], tmm3",
            c0 = in(reg) c0, c1 = in(reg) c1, c2 = in(reg) c2, c3 = in(reg) c3,
            s = in(reg) cs, options(nostack)
        );
    }
}

/// The AMX kernel with its tile instructions emulated in plain code, from the same tile
/// addresses, packing and edge handling: the tests run the whole AMX data path (packing
/// negated and lane-major, steps padded to 16, the transposed product) on any x86-64.
/// What it cannot show is the instructions' own encoding and operand order, which the self-
/// check on an AMX machine does.
#[cfg(test)]
pub(in crate::linpack) struct Bf16AmxEmulated;

#[cfg(test)]
impl Gemm for Bf16AmxEmulated {
    type P = u32;
    const MR: usize = Bf16Amx::MR;
    const NR: usize = Bf16Amx::NR;
    const KP: usize = Bf16Amx::KP;
    const NAME: &'static str = "bf16 → f32 (AMX tiles, emulated)";
    const KS_ALIGN: usize = Bf16Amx::KS_ALIGN;
    const B_LANE_MAJOR: bool = Bf16Amx::B_LANE_MAJOR;

    fn pack(v: &[f32]) -> u32 {
        Bf16Amx::pack(v)
    }

    fn pack_b_elem(v: &[f32]) -> u32 {
        Bf16Amx::pack_b_elem(v)
    }

    unsafe fn kernel(
        ks: usize,
        a: *const u32,
        b: *const u32,
        c: *mut f32,
        ldc: usize,
        mr: usize,
        nr: usize,
        store: bool,
    ) {
        // SAFETY: forwarded; the emulation needs no instruction set.
        unsafe { amx_kernel(emulated_tiles, ks, a, b, c, ldc, mr, nr, store) }
    }
}

/// `tileloadd`, `tdpbf16ps` (each f32 lane gains the two products of a bf16 pair) and
/// `tilestored` as the Intel SDM defines them, on [`amx_tiles`]' addresses.
#[cfg(test)]
unsafe fn emulated_tiles(ks: usize, a: *const u32, b: *const u32, c: *mut f32, ldc: usize) {
    let half = |p: u32, hi: bool| f32::from_bits(if hi { p & 0xffff_0000 } else { p << 16 });
    let ct = c_tiles(c, ldc);
    let mut acc = [[[0.0f32; 16]; 16]; 4];
    // SAFETY (all reads and writes): the addresses amx_tiles loads and stores.
    unsafe {
        for (tile, &base) in acc.iter_mut().zip(&ct) {
            for (r, row) in tile.iter_mut().enumerate() {
                for (col, v) in row.iter_mut().enumerate() {
                    *v = *base.add(r * ldc + col);
                }
            }
        }
        for s0 in (0..ks).step_by(16) {
            let [bt, at] = step_tiles(ks, a, b, s0);
            for (bi, &src1) in bt.iter().enumerate() {
                for (ai, &src2) in at.iter().enumerate() {
                    let dst = &mut acc[2 * bi + ai];
                    for (m, row) in dst.iter_mut().enumerate() {
                        for k in 0..16 {
                            let x = *src1.add(m * ks + k);
                            let y = src2.add(k * A_ROW_BYTES / 4);
                            for (n, v) in row.iter_mut().enumerate() {
                                let y = *y.add(n);
                                *v +=
                                    half(x, false) * half(y, false) + half(x, true) * half(y, true);
                            }
                        }
                    }
                }
            }
        }
        for (tile, &base) in acc.iter().zip(&ct) {
            for (r, row) in tile.iter().enumerate() {
                for (col, v) in row.iter().enumerate() {
                    *base.add(r * ldc + col) = *v;
                }
            }
        }
    }
}
