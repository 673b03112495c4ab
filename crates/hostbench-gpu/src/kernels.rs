//! OpenCL C sources, generated per dtype, vector width and chain count and compiled at run time
//! by the device's own compiler.
//!
//! Compute (`compute_source`): clpeak's design rule — many independent multiply-add chains per
//! work-item, so the pipeline never waits on a result — with the chains' start values made
//! distinct per lane and per work-item parity (a splat or uniform chain could legally be computed
//! once), `a` and `b` passed as arguments (so nothing folds), and one checksum per work-item (see
//! `replay`). Memory (`memory_source`): clpeak's "local offset" layout — each work-item reads
//! `FETCH` vectors `local_size` apart, so neighbouring work-items touch neighbouring addresses
//! (coalesced on a GPU, one vector load per step when PoCL vectorises across work-items on a CPU).

use std::fmt::Write as _;

use crate::replay::{FLOAT_B, FNV_PRIME};
use crate::Dtype;

/// Vectors each memory work-item moves.
pub const FETCH: u64 = 16;
/// Multiply-adds per chain written out inside the loop body (the loop runs `STEPS / UNROLL`).
pub const UNROLL: u32 = 8;

const LANES: &str = "0123456789abcdef";

fn vec_type(scalar: &str, width: u32) -> String {
    if width == 1 {
        scalar.to_string()
    } else {
        format!("{scalar}{width}")
    }
}

/// The C scalar type of a dtype.
pub fn c_type(d: Dtype) -> &'static str {
    match d {
        Dtype::F64 => "double",
        Dtype::F32 => "float",
        Dtype::F16 => "half",
        Dtype::I32 => "int",
        Dtype::I8 => "char",
    }
}

/// `(T)(e0, e1, …)` from per-lane expressions, or the lone expression for width 1.
fn lanes_literal(ty: &str, width: u32, lane: impl Fn(u32) -> String) -> String {
    if width == 1 {
        return lane(0);
    }
    let items: Vec<String> = (0..width).map(lane).collect();
    format!("({ty})({})", items.join(", "))
}

/// Fold every lane's bits into the running checksum `c`, lane 0 first (f64: low half, then high
/// half), exactly as `replay::fold` does.
fn fold_fn(d: Dtype, width: u32) -> String {
    let tv = vec_type(c_type(d), width);
    let (bits_ty, as_fn) = match d {
        Dtype::F64 => ("ulong", "as_ulong"),
        Dtype::F32 | Dtype::I32 => ("uint", "as_uint"),
        Dtype::F16 => ("ushort", "as_ushort"),
        Dtype::I8 => ("uchar", "as_uchar"),
    };
    let bv = vec_type(bits_ty, width);
    let as_v = if width == 1 {
        as_fn.to_string()
    } else {
        format!("{as_fn}{width}")
    };
    let mut s = format!("inline uint fold(uint c, {tv} x) {{\n  {bv} u = {as_v}(x);\n");
    for l in 0..width {
        let lane = if width == 1 {
            "u".to_string()
        } else {
            format!("u.s{}", &LANES[l as usize..=l as usize])
        };
        if d == Dtype::F64 {
            let _ = writeln!(s, "  c = (c * {FNV_PRIME}u) ^ (uint){lane};");
            let _ = writeln!(s, "  c = (c * {FNV_PRIME}u) ^ (uint)({lane} >> 32);");
        } else {
            let _ = writeln!(s, "  c = (c * {FNV_PRIME}u) ^ (uint){lane};");
        }
    }
    s.push_str("  return c;\n}\n");
    s
}

/// The compute kernel `compute(out, a, b, iters)`: `chains` chains of `width`-wide vectors.
pub fn compute_source(d: Dtype, width: u32, chains: u32) -> String {
    let t = c_type(d);
    let tv = vec_type(t, width);
    let mut s = String::new();
    match d {
        Dtype::F64 => s.push_str("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"),
        Dtype::F16 => s.push_str("#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n"),
        _ => {}
    }
    s.push_str(&fold_fn(d, width));
    let (arg_ty, start) = if d.is_float() {
        (
            "float",
            format!("(({t})(0.5f + (float)(2 * (K) + p) * {FLOAT_B:?}f))"),
        )
    } else {
        ("int", format!("(({t})(2 * (K) + p + 1))"))
    };
    let _ = writeln!(s, "#define START(K) {start}");
    let _ = writeln!(
        s,
        "__kernel void compute(__global uint *restrict out, {arg_ty} as, {arg_ty} bs, int iters) {{"
    );
    s.push_str("  const int p = (int)(get_global_id(0) & 1);\n");
    let _ = writeln!(s, "  const {tv} a = ({tv})(({t})as);");
    let _ = writeln!(s, "  const {tv} b = ({tv})(({t})bs);");
    for j in 0..chains {
        let init = lanes_literal(&tv, width, |l| format!("START({})", j * width + l));
        let _ = writeln!(s, "  {tv} x{j} = {init};");
    }
    s.push_str("  for (int i = 0; i < iters; i++) {\n");
    for _ in 0..UNROLL {
        for j in 0..chains {
            if d.is_float() {
                let _ = writeln!(s, "    x{j} = mad(x{j}, a, b);");
            } else {
                let _ = writeln!(s, "    x{j} = x{j} * a + b;");
            }
        }
    }
    s.push_str("  }\n  uint c = 0;\n");
    for j in 0..chains {
        let _ = writeln!(s, "  c = fold(c, x{j});");
    }
    s.push_str("  out[get_global_id(0)] = c;\n}\n");
    s
}

/// Element type of a memory kernel: 32-bit words when the block allows, else bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemLayout {
    /// Bytes per element: 4 (`uint`) or 1 (`uchar`).
    pub elem: usize,
    /// Vector width (elements per load/store).
    pub width: u32,
}

impl MemLayout {
    /// The widest layout (≤ 16 lanes, ≤ `max_width`) that tiles `block` bytes exactly.
    pub fn for_block(block: u64, max_width: u32) -> Self {
        let elem = crate::replay::element_bytes(block);
        let elems = block / elem as u64;
        let width = [16u32, 8, 4, 2, 1]
            .into_iter()
            .find(|&w| w <= max_width && elems.is_multiple_of(u64::from(w)))
            .unwrap_or(1);
        Self { elem, width }
    }

    /// Vectors in a block.
    pub fn vectors(&self, block: u64) -> u64 {
        block / (self.elem as u64 * u64::from(self.width))
    }

    pub fn c_elem(&self) -> &'static str {
        if self.elem == 4 {
            "uint"
        } else {
            "uchar"
        }
    }
}

/// Work-group size and count for `n` vectors at `FETCH` per work-item; `checked` when the last
/// group runs past the end.
pub fn mem_geometry(n: u64, local: u64) -> (u64, u64, bool) {
    let lsz = local.min(n.div_ceil(FETCH)).max(1);
    let groups = n.div_ceil(lsz * FETCH);
    (lsz, groups * lsz, !n.is_multiple_of(lsz * FETCH))
}

/// Which vectors a work-item moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemOrder {
    /// `FETCH` vectors `local_size` apart: neighbouring work-items touch neighbouring addresses
    /// (coalesced on a GPU; clpeak's "local offset").
    Strided,
    /// `FETCH` consecutive vectors: one sequential stream per work-item, what a CPU's caches
    /// and prefetchers want when the work-items of a group run one after another.
    Contiguous,
}

impl MemOrder {
    pub fn name(self) -> &'static str {
        match self {
            MemOrder::Strided => "strided (FETCH vectors local_size apart)",
            MemOrder::Contiguous => "contiguous (FETCH consecutive vectors per work-item)",
        }
    }
}

/// `bw_read(src, out, n)`, `bw_write(dst, n, seed)` and `bw_copy(src, dst, n)` for one layout.
pub fn memory_source(layout: MemLayout, order: MemOrder, checked: bool) -> String {
    let e = layout.c_elem();
    let w = layout.width;
    let ev = vec_type(e, w);
    let uv = vec_type("uint", w);
    let to_u = if layout.elem == 4 {
        String::new()
    } else {
        format!("convert_{uv}")
    };
    let iota = if w == 1 {
        String::new()
    } else {
        format!(
            " + ({ev})({})",
            (0..w).map(|l| l.to_string()).collect::<Vec<_>>().join(", ")
        )
    };
    let sum_lanes = if w == 1 {
        "acc".to_string()
    } else {
        (0..w)
            .map(|l| format!("acc.s{}", &LANES[l as usize..=l as usize]))
            .collect::<Vec<_>>()
            .join(" + ")
    };
    let guard = if checked { "if (i < n) " } else { "" };
    let (start, step) = match order {
        MemOrder::Strided => ("get_group_id(0) * lsz * FETCH + get_local_id(0)", "lsz"),
        MemOrder::Contiguous => ("get_global_id(0) * FETCH", "1"),
    };
    format!(
        "#define FETCH {FETCH}
#define STEP {step}
#define PROLOGUE const size_t lsz = get_local_size(0); \\
  size_t i = {start};
__kernel void bw_read(__global const {ev} *restrict src, __global uint *restrict out, ulong n) {{
  PROLOGUE
  {uv} acc = 0;
  #pragma unroll
  for (int k = 0; k < FETCH; k++, i += STEP) {{
    {guard}acc += {to_u}(src[i]);
  }}
  out[get_global_id(0)] = {sum_lanes};
}}
__kernel void bw_write(__global {ev} *restrict dst, ulong n, uint seed) {{
  PROLOGUE
  #pragma unroll
  for (int k = 0; k < FETCH; k++, i += STEP) {{
    {guard}dst[i] = ({ev})(({e})((uint)(i * {w}) + seed)){iota};
  }}
}}
__kernel void bw_copy(__global const {ev} *restrict src, __global {ev} *restrict dst, ulong n) {{
  PROLOGUE
  #pragma unroll
  for (int k = 0; k < FETCH; k++, i += STEP) {{
    {guard}dst[i] = src[i];
  }}
}}
"
    )
}

/// The launch-latency kernel: nothing to do, one argument so every backend marshals one.
pub const EMPTY_SOURCE: &str = "__kernel void empty(__global uint *p) { }\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_source_has_every_chain_and_lane() {
        let s = compute_source(Dtype::F32, 4, 3);
        assert!(s.contains("float4 x2 = (float4)(START(8), START(9), START(10), START(11));"));
        assert_eq!(s.matches("x1 = mad(x1, a, b);").count(), UNROLL as usize);
        assert!(s.contains("c = (c * 16777619u) ^ (uint)u.s3;"));
        let h = compute_source(Dtype::F16, 16, 1);
        assert!(h.starts_with("#pragma OPENCL EXTENSION cl_khr_fp16 : enable"));
        assert!(h.contains("ushort16 u = as_ushort16(x);") && h.contains("u.sf"));
        let d = compute_source(Dtype::F64, 1, 2);
        assert!(d.contains("c = (c * 16777619u) ^ (uint)(u >> 32);"));
        let c = compute_source(Dtype::I8, 2, 1);
        assert!(c.contains("x0 = x0 * a + b;") && c.contains("int as, int bs"));
    }

    #[test]
    fn layouts_tile_blocks_exactly() {
        assert_eq!(MemLayout::for_block(1, 16), MemLayout { elem: 1, width: 1 });
        assert_eq!(
            MemLayout::for_block(1024, 16),
            MemLayout { elem: 4, width: 16 }
        );
        assert_eq!(
            MemLayout::for_block(12, 16),
            MemLayout { elem: 4, width: 1 }
        );
        assert_eq!(MemLayout::for_block(6, 16), MemLayout { elem: 1, width: 2 });
        let l = MemLayout::for_block(1 << 30, 16);
        assert_eq!(l.vectors(1 << 30), (1 << 30) / 64);
        // 16 vectors fit in one work-item; a ragged count is guarded.
        assert_eq!(mem_geometry(16, 256), (1, 1, false));
        assert_eq!(mem_geometry(1 << 20, 256), (256, 1 << 16, false));
        let (lsz, global, checked) = mem_geometry(1000, 64);
        assert_eq!((lsz, global % lsz, checked), (63, 0, true));
        assert!(global * FETCH >= 1000);
    }

    #[test]
    fn memory_source_guards_only_ragged_blocks() {
        let l = MemLayout { elem: 1, width: 4 };
        let s = memory_source(l, MemOrder::Strided, true);
        assert!(s.contains("if (i < n) acc += convert_uint4(src[i]);"));
        assert!(
            s.contains("dst[i] = (uchar4)((uchar)((uint)(i * 4) + seed)) + (uchar4)(0, 1, 2, 3);")
        );
        assert!(s.contains("#define STEP lsz"));
        let u = memory_source(MemLayout { elem: 4, width: 1 }, MemOrder::Contiguous, false);
        assert!(u.contains("acc += (src[i]);") && !u.contains("if (i < n)"));
        assert!(u.contains("size_t i = get_global_id(0) * FETCH;") && u.contains("#define STEP 1"));
    }
}
