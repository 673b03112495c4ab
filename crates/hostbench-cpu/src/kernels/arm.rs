//! The aarch64 kernels: `kernel!` (defined in the parent) instantiated per ISA and dtype for
//! NEON, scalar, and the dot-product and matrix units (`sdot`, `smmla`, `bfmmla`). One file per
//! architecture so each instruction table reads on its own and the parent keeps the selection
//! and validation logic.

use super::UNROLL;
use core::arch::aarch64::*;

// NEON (Advanced SIMD), 128-bit. `fmla` accumulates: acc += m × a.
kernel!(
    neon_f64,
    "neon",
    float64x2_t,
    f64,
    2,
    vreg,
    "fmla {acc:v}.2d, {m:v}.2d, {a:v}.2d",
    "fmla {acc:v}.2d, {m:v}.2d, {a:v}.2d"
);
kernel!(
    neon_f32,
    "neon",
    float32x4_t,
    f32,
    4,
    vreg,
    "fmla {acc:v}.4s, {m:v}.4s, {a:v}.4s",
    "fmla {acc:v}.4s, {m:v}.4s, {a:v}.4s"
);
kernel!(
    neon_i64,
    "neon",
    int64x2_t,
    i64,
    2,
    vreg,
    "add {acc:v}.2d, {acc:v}.2d, {a:v}.2d // {m:v}",
    "add {acc:v}.2d, {acc:v}.2d, {a:v}.2d // {m:v}"
);
kernel!(
    neon_i32,
    "neon",
    int32x4_t,
    i32,
    4,
    vreg,
    "add {acc:v}.4s, {acc:v}.4s, {a:v}.4s // {m:v}",
    "add {acc:v}.4s, {acc:v}.4s, {a:v}.4s // {m:v}"
);
kernel!(
    neon_i16,
    "neon",
    int16x8_t,
    i16,
    8,
    vreg,
    "add {acc:v}.8h, {acc:v}.8h, {a:v}.8h // {m:v}",
    "add {acc:v}.8h, {acc:v}.8h, {a:v}.8h // {m:v}"
);
kernel!(
    neon_i8,
    "neon",
    int8x16_t,
    i8,
    16,
    vreg,
    "add {acc:v}.16b, {acc:v}.16b, {a:v}.16b // {m:v}",
    "add {acc:v}.16b, {acc:v}.16b, {a:v}.16b // {m:v}"
);

// Scalar: FP `fmadd` (AArch64 always has it) and general-purpose register adds.
kernel!(
    scalar_f64,
    "neon",
    f64,
    f64,
    1,
    vreg,
    "fmadd {acc:d}, {acc:d}, {m:d}, {a:d}",
    "fmadd {acc:d}, {acc:d}, {m:d}, {a:d}"
);
kernel!(
    scalar_f32,
    "neon",
    f32,
    f32,
    1,
    vreg,
    "fmadd {acc:s}, {acc:s}, {m:s}, {a:s}",
    "fmadd {acc:s}, {acc:s}, {m:s}, {a:s}"
);
kernel!(
    scalar_i64,
    "neon",
    i64,
    i64,
    1,
    reg,
    "add {acc:x}, {acc:x}, {a:x} // {m:x}",
    "add {acc:x}, {acc:x}, {a:x} // {m:x}"
);
kernel!(
    scalar_i32,
    "neon",
    i32,
    i32,
    1,
    reg,
    "add {acc:w}, {acc:w}, {a:w} // {m:w}",
    "add {acc:w}, {acc:w}, {a:w} // {m:w}"
);
kernel!(
    scalar_i16,
    "neon",
    i16,
    i16,
    1,
    reg,
    "add {acc:w}, {acc:w}, {a:w} // {m:w}",
    "add {acc:w}, {acc:w}, {a:w} // {m:w}"
);
kernel!(
    scalar_i8,
    "neon",
    i8,
    i8,
    1,
    reg,
    "add {acc:w}, {acc:w}, {a:w} // {m:w}",
    "add {acc:w}, {acc:w}, {a:w} // {m:w}"
);

// Dot-product and matrix units. Both sources are splats of the kernel's operand (all-ones
// elements), so each instruction advances every accumulator lane by a known amount.
// `sdot`: each i32 lane gains the sum of 4 s8 products.
kernel!(
    dot_i8,
    "neon,dotprod",
    int32x4_t,
    i32,
    4,
    vreg,
    "sdot {acc:v}.4s, {m:v}.16b, {a:v}.16b",
    "sdot {acc:v}.4s, {m:v}.16b, {a:v}.16b"
);
// `smmla`: a 2 × 8 by 8 × 2 s8 matrix product into 2 × 2 i32 lanes, 8 products each.
kernel!(
    mmla_i8,
    "neon,i8mm",
    int32x4_t,
    i32,
    4,
    vreg,
    "smmla {acc:v}.4s, {m:v}.16b, {a:v}.16b",
    "smmla {acc:v}.4s, {m:v}.16b, {a:v}.16b"
);
// `bfmmla`: a 2 × 4 by 4 × 2 bf16 matrix product into 2 × 2 f32 lanes, 4 products each.
kernel!(
    mmla_bf16,
    "neon,bf16",
    float32x4_t,
    f32,
    4,
    vreg,
    "bfmmla {acc:v}.4s, {m:v}.8h, {a:v}.8h",
    "bfmmla {acc:v}.4s, {m:v}.8h, {a:v}.8h"
);
