//! The x86-64 kernels: `kernel!` (defined in the parent) instantiated per ISA and dtype for
//! AVX2 + FMA, AVX-512 (F, BW, VNNI, BF16), SSE2, scalar and AVX-VNNI, and the hand-written
//! AVX-512 FP16 chain whose alternating addend the macro's shape does not fit. One file per
//! architecture so each instruction table reads on its own and the parent keeps the selection
//! and validation logic.

use super::UNROLL;
use core::arch::x86_64::*;

// AVX2 + FMA, 256-bit.
kernel!(
    avx2_f64,
    "avx2,fma",
    __m256d,
    f64,
    4,
    ymm_reg,
    "vfmadd213pd {acc}, {m}, {a}",
    "vfmadd213pd {acc}, {m}, {a}"
);
kernel!(
    avx2_f32,
    "avx2,fma",
    __m256,
    f32,
    8,
    ymm_reg,
    "vfmadd213ps {acc}, {m}, {a}",
    "vfmadd213ps {acc}, {m}, {a}"
);
kernel!(
    avx2_i64,
    "avx2,fma",
    __m256i,
    i64,
    4,
    ymm_reg,
    "vpaddq {acc}, {acc}, {a} # {m}",
    "vpaddq {acc}, {acc}, {a} # {m}"
);
kernel!(
    avx2_i32,
    "avx2,fma",
    __m256i,
    i32,
    8,
    ymm_reg,
    "vpaddd {acc}, {acc}, {a} # {m}",
    "vpaddd {acc}, {acc}, {a} # {m}"
);
kernel!(
    avx2_i16,
    "avx2,fma",
    __m256i,
    i16,
    16,
    ymm_reg,
    "vpaddw {acc}, {acc}, {a} # {m}",
    "vpaddw {acc}, {acc}, {a} # {m}"
);
kernel!(
    avx2_i8,
    "avx2,fma",
    __m256i,
    i8,
    32,
    ymm_reg,
    "vpaddb {acc}, {acc}, {a} # {m}",
    "vpaddb {acc}, {acc}, {a} # {m}"
);

// AVX-512, 512-bit (byte and word adds need AVX-512BW).
kernel!(
    avx512_f64,
    "avx512f",
    __m512d,
    f64,
    8,
    zmm_reg,
    "vfmadd213pd {acc}, {m}, {a}",
    "vfmadd213pd {acc}, {m}, {a}"
);
kernel!(
    avx512_f32,
    "avx512f",
    __m512,
    f32,
    16,
    zmm_reg,
    "vfmadd213ps {acc}, {m}, {a}",
    "vfmadd213ps {acc}, {m}, {a}"
);
kernel!(
    avx512_i64,
    "avx512f",
    __m512i,
    i64,
    8,
    zmm_reg,
    "vpaddq {acc}, {acc}, {a} # {m}",
    "vpaddq {acc}, {acc}, {a} # {m}"
);
kernel!(
    avx512_i32,
    "avx512f",
    __m512i,
    i32,
    16,
    zmm_reg,
    "vpaddd {acc}, {acc}, {a} # {m}",
    "vpaddd {acc}, {acc}, {a} # {m}"
);
kernel!(
    avx512_i16,
    "avx512f,avx512bw",
    __m512i,
    i16,
    32,
    zmm_reg,
    "vpaddw {acc}, {acc}, {a} # {m}",
    "vpaddw {acc}, {acc}, {a} # {m}"
);
kernel!(
    avx512_i8,
    "avx512f,avx512bw",
    __m512i,
    i8,
    64,
    zmm_reg,
    "vpaddb {acc}, {acc}, {a} # {m}",
    "vpaddb {acc}, {acc}, {a} # {m}"
);

// SSE2, 128-bit: no FMA, so multiply chains and add chains side by side.
kernel!(
    sse2_f64,
    "sse2",
    __m128d,
    f64,
    2,
    xmm_reg,
    "mulpd {acc}, {m} # {a}",
    "addpd {acc}, {a} # {m}"
);
kernel!(
    sse2_f32,
    "sse2",
    __m128,
    f32,
    4,
    xmm_reg,
    "mulps {acc}, {m} # {a}",
    "addps {acc}, {a} # {m}"
);
kernel!(
    sse2_i64,
    "sse2",
    __m128i,
    i64,
    2,
    xmm_reg,
    "paddq {acc}, {a} # {m}",
    "paddq {acc}, {a} # {m}"
);
kernel!(
    sse2_i32,
    "sse2",
    __m128i,
    i32,
    4,
    xmm_reg,
    "paddd {acc}, {a} # {m}",
    "paddd {acc}, {a} # {m}"
);
kernel!(
    sse2_i16,
    "sse2",
    __m128i,
    i16,
    8,
    xmm_reg,
    "paddw {acc}, {a} # {m}",
    "paddw {acc}, {a} # {m}"
);
kernel!(
    sse2_i8,
    "sse2",
    __m128i,
    i8,
    16,
    xmm_reg,
    "paddb {acc}, {a} # {m}",
    "paddb {acc}, {a} # {m}"
);

// Scalar: SSE2 scalar FP (the x86-64 baseline) and general-purpose register adds.
kernel!(
    scalar_f64,
    "sse2",
    f64,
    f64,
    1,
    xmm_reg,
    "mulsd {acc}, {m} # {a}",
    "addsd {acc}, {a} # {m}"
);
kernel!(
    scalar_f32,
    "sse2",
    f32,
    f32,
    1,
    xmm_reg,
    "mulss {acc}, {m} # {a}",
    "addss {acc}, {a} # {m}"
);
kernel!(
    scalar_i64,
    "sse2",
    i64,
    i64,
    1,
    reg,
    "add {acc}, {a} # {m}",
    "add {acc}, {a} # {m}"
);
kernel!(
    scalar_i32,
    "sse2",
    i32,
    i32,
    1,
    reg,
    "add {acc:e}, {a:e} # {m:e}",
    "add {acc:e}, {a:e} # {m:e}"
);
kernel!(
    scalar_i16,
    "sse2",
    i16,
    i16,
    1,
    reg,
    "add {acc:x}, {a:x} # {m:x}",
    "add {acc:x}, {a:x} # {m:x}"
);
kernel!(
    scalar_i8,
    "sse2",
    i8,
    i8,
    1,
    reg_byte,
    "add {acc}, {a} # {m}",
    "add {acc}, {a} # {m}"
);

// Dot-product and half-precision units. Both sources are splats of the kernel's operand
// (all-ones elements), so each instruction advances every accumulator lane by a known amount.
kernel!(
    vnni512_i8,
    "avx512f,avx512vnni",
    __m512i,
    i32,
    16,
    zmm_reg,
    "vpdpbusd {acc}, {m}, {a}",
    "vpdpbusd {acc}, {m}, {a}"
);
kernel!(
    vnni512_i16,
    "avx512f,avx512vnni",
    __m512i,
    i32,
    16,
    zmm_reg,
    "vpdpwssd {acc}, {m}, {a}",
    "vpdpwssd {acc}, {m}, {a}"
);
// AVX-VNNI: the same dot products VEX-encoded on 256 bits (`{vex}` picks that encoding where
// the CPU also has the EVEX one).
kernel!(
    vnni256_i8,
    "avx2",
    __m256i,
    i32,
    8,
    ymm_reg,
    "{{vex}} vpdpbusd {acc}, {m}, {a}",
    "{{vex}} vpdpbusd {acc}, {m}, {a}"
);
kernel!(
    vnni256_i16,
    "avx2",
    __m256i,
    i32,
    8,
    ymm_reg,
    "{{vex}} vpdpwssd {acc}, {m}, {a}",
    "{{vex}} vpdpwssd {acc}, {m}, {a}"
);
kernel!(
    bf16_dot,
    "avx512f,avx512bf16",
    __m512,
    f32,
    16,
    zmm_reg,
    "vdpbf16ps {acc}, {m}, {a}",
    "vdpbf16ps {acc}, {m}, {a}"
);
/// Half-precision FMA chains (`acc = acc × 1 + a`) whose addend flips between +1 and -1 every
/// `F16_LEG` blocks, so the values stay in binary16's exact integer range however long the
/// call (see `F16_LEG`); otherwise the shape of `kernel!`.
#[target_feature(enable = "avx512f,avx512fp16")]
pub(super) fn fp16_fma<const C: usize>(
    blocks: u64,
    init: &[super::F16],
    step: super::F16,
    mul: super::F16,
    out: &mut [super::F16],
) {
    use super::{F16, F16_LEG};
    // SAFETY: `[F16; 32]` and `__m512i` have the same size and every bit pattern is valid.
    let splat = |x: F16| unsafe { core::mem::transmute::<[F16; 32], __m512i>([x; 32]) };
    let m = splat(mul);
    let up = splat(step);
    let down = splat(F16(step.0 ^ 0x8000));
    let mut acc: [__m512i; C] = core::array::from_fn(|j| splat(init[j]));
    let (mut rising, mut left) = (true, F16_LEG);
    for _ in 0..blocks {
        if left == 0 {
            (rising, left) = (!rising, F16_LEG);
        }
        left -= 1;
        let a = if rising { up } else { down };
        for _ in 0..UNROLL {
            for acc in acc.iter_mut() {
                // SAFETY: register-only arithmetic the enabled target feature provides.
                unsafe {
                    core::arch::asm!("vfmadd213ph {acc}, {m}, {a}", acc = inout(zmm_reg) *acc,
                        m = in(zmm_reg) m, a = in(zmm_reg) a, options(nomem, nostack))
                }
            }
        }
    }
    for (j, v) in acc.iter().enumerate() {
        // SAFETY: same-size plain-data reinterpretation, as in `splat`.
        let lanes = unsafe { core::mem::transmute::<__m512i, [F16; 32]>(*v) };
        out[j * 32..(j + 1) * 32].copy_from_slice(&lanes);
    }
}
