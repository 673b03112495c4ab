//! The burn's kernels as text: one PTX module (CUDA, JIT-compiled by the driver) and one OpenCL C
//! program (compiled by the device's own compiler), each holding the same three kernels:
//!
//! * `burn_chain_f32` / `burn_chain_f64`: `CHAINS` chaotic chains per thread of
//!   `x = fma(x, x, c)`, `UNROLL` steps per turn, `iters` turns, then one checksum of the final
//!   values per thread (the fold of `replay`); thread 0 of each block writes the SM it ran on
//!   (`%smid`; OpenCL has no such register). The host replays the chains with the same correctly
//!   rounded fused multiply-add (`burn::expected_chains`), so every thread's checksum has a known
//!   answer, and a chaotic map turns one wrong bit anywhere into a different end value.
//! * `burn_fill`: every 32-bit word of the buffer gets `pattern(i, mode, seed)`.
//! * `burn_check`: every word is compared with the same pattern; each thread writes its count of
//!   wrong words, the first wrong word's index and the value read (`burn::MemRecord`).
//!
//! Patterns (`burn::pattern` is the host's copy): mode 0 the address (its low word XOR its high
//! word times an odd constant, XOR the seed), mode 1 walking ones (bit `(i + seed) mod 32`), modes
//! 2 and 3 their inverses.

use std::fmt::Write as _;

use crate::ptx::{Arg, KernelArgs};
use crate::replay::FNV_PRIME;

/// Independent chains per thread (two FMA units' latency of 4 cycles is covered by 8).
pub const CHAINS: u32 = 8;
/// Steps per chain written out per loop turn.
pub const UNROLL: u32 = 16;
/// Distinct start vectors: thread `g` starts from vector `g mod STARTS` (the host replays each).
pub const STARTS: u32 = 16;
/// The map's constant: with `c = -1.875` the interval `[c, c² + c]` = `[-1.875, 1.640625]` maps
/// into itself (both ends exact in binary), and rounding is monotone, so no chain can leave it.
pub const C: f64 = -1.875;
/// Start values are `c + k·STEP` for `k = 1 ..= STARTS·CHAINS·16` (16 lanes at the widest): from
/// -1.874 to 0.125, inside the interval, and exact.
pub const STEP: f64 = 1.0 / 1024.0;
/// The widest vector an OpenCL chain runs in (lanes per chain).
pub const MAX_WIDTH: u32 = 16;
/// Multiplier of the address pattern's high word.
pub const HIGH_MUL: u32 = 0x9E37_79B1;

const HEADER: &str = ".version 6.0\n.target sm_50\n.address_size 64\n\n";

/// The chain kernel's entry name for `f32` (`double = false`) or `f64`.
pub fn chain_entry(double: bool) -> &'static str {
    if double {
        "burn_chain_f64"
    } else {
        "burn_chain_f32"
    }
}

/// The PTX module: both chain kernels, fill and check.
pub fn ptx() -> String {
    let mut s = String::from(HEADER);
    for double in [false, true] {
        ptx_chain(&mut s, double);
    }
    ptx_fill(&mut s);
    ptx_check(&mut s);
    s
}

fn ptx_chain(s: &mut String, double: bool) {
    let (ty, bits) = if double { ("f64", 64) } else { ("f32", 32) };
    let entry = chain_entry(double);
    let _ = writeln!(
        s,
        ".visible .entry {entry}(\n\t.param .u64 out,\n\t.param .u64 sm,\n\t.param .{ty} c,\n\t\
         .param .{ty} step,\n\t.param .u32 iters\n)\n{{"
    );
    let _ = writeln!(
        s,
        "\t.reg .pred %p;\n\t.reg .b32 %r<10>;\n\t.reg .b64 %rd<6>;\n\t.reg .{ty} %x<{CHAINS}>;\n\t\
         .reg .{ty} %vc, %vs;"
    );
    if double {
        s.push_str("\t.reg .b32 %lo, %hi;\n");
    }
    let _ = writeln!(
        s,
        "\tld.param.u64 %rd0, [out];\n\tld.param.u64 %rd3, [sm];\n\tld.param.{ty} %vc, [c];\n\t\
         ld.param.{ty} %vs, [step];\n\tld.param.u32 %r0, [iters];"
    );
    // Thread id %r4; thread 0 of the block stores the SM id at sm[block].
    s.push_str(
        "\tmov.u32 %r1, %ctaid.x;\n\tmov.u32 %r2, %ntid.x;\n\tmov.u32 %r3, %tid.x;\n\
         \tmad.lo.u32 %r4, %r1, %r2, %r3;\n\tsetp.ne.u32 %p, %r3, 0;\n\t@%p bra START;\n\
         \tmov.u32 %r8, %smid;\n\tcvta.to.global.u64 %rd3, %rd3;\n\tmul.wide.u32 %rd4, %r1, 4;\n\
         \tadd.s64 %rd4, %rd3, %rd4;\n\tst.global.u32 [%rd4], %r8;\nSTART:\n",
    );
    let _ = writeln!(
        s,
        "\tand.b32 %r5, %r4, {};\n\tmul.lo.u32 %r5, %r5, {CHAINS};",
        STARTS - 1
    );
    for j in 0..CHAINS {
        let _ = writeln!(
            s,
            "\tadd.u32 %r6, %r5, {};\n\tcvt.rn.{ty}.u32 %x{j}, %r6;\n\tfma.rn.{ty} %x{j}, %x{j}, %vs, %vc;",
            j + 1
        );
    }
    s.push_str("\tmov.u32 %r1, 0;\nLOOP:\n");
    for _ in 0..UNROLL {
        for j in 0..CHAINS {
            let _ = writeln!(s, "\tfma.rn.{ty} %x{j}, %x{j}, %x{j}, %vc;");
        }
    }
    s.push_str("\tadd.u32 %r1, %r1, 1;\n\tsetp.lt.u32 %p, %r1, %r0;\n\t@%p bra LOOP;\n");
    s.push_str("\tmov.u32 %r7, 0;\n");
    for j in 0..CHAINS {
        if bits == 64 {
            let _ = writeln!(s, "\tmov.b64 {{%lo, %hi}}, %x{j};");
            for half in ["%lo", "%hi"] {
                let _ = writeln!(
                    s,
                    "\tmul.lo.u32 %r7, %r7, {FNV_PRIME};\n\txor.b32 %r7, %r7, {half};"
                );
            }
        } else {
            let _ = writeln!(
                s,
                "\tmov.b32 %r6, %x{j};\n\tmul.lo.u32 %r7, %r7, {FNV_PRIME};\n\txor.b32 %r7, %r7, %r6;"
            );
        }
    }
    s.push_str(
        "\tcvta.to.global.u64 %rd0, %rd0;\n\tmul.wide.u32 %rd1, %r4, 4;\n\
         \tadd.s64 %rd2, %rd0, %rd1;\n\tst.global.u32 [%rd2], %r7;\n\tret;\n}\n\n",
    );
}

/// The arguments of the PTX chain kernel: the checksum and SM-id buffers, the map's constant and
/// the start step in the kernel's precision, and the turns (at least 1: the loop runs once
/// before it tests).
pub fn ptx_chain_args(double: bool, sums: u64, sms: u64, iters: u32) -> KernelArgs {
    let (c, step) = if double {
        (Arg::F64(C), Arg::F64(STEP))
    } else {
        (Arg::F32(C as f32), Arg::F32(STEP as f32))
    };
    KernelArgs::new(&[
        Arg::U64(sums),
        Arg::U64(sms),
        c,
        step,
        Arg::U32(iters.max(1)),
    ])
}

/// The arguments of `burn_fill` (`records: None`) or `burn_check`.
pub fn ptx_pattern_args(
    buf: u64,
    words: u64,
    mode: u32,
    seed: u32,
    records: Option<u64>,
) -> KernelArgs {
    let mut a = KernelArgs::new(&[
        Arg::U64(buf),
        Arg::U64(words),
        Arg::U32(mode),
        Arg::U32(seed),
    ]);
    if let Some(r) = records {
        a.push(Arg::U64(r));
    }
    a
}

/// Declarations, parameters and the grid-stride start shared by fill and check: the buffer
/// (%rd0, global), word count (%rd1), mode (%r10), seed (%r11); index %rd2, stride %rd3.
fn ptx_stride_head(s: &mut String, entry: &str, extra_param: &str) {
    let _ = writeln!(
        s,
        ".visible .entry {entry}(\n\t.param .u64 buf,\n\t.param .u64 words,\n\t.param .u32 mode,\n\t\
         .param .u32 seed{extra_param}\n)\n{{\n\t.reg .pred %p, %q;\n\t.reg .b32 %r<20>;\n\t.reg .b64 %rd<12>;"
    );
    s.push_str(
        "\tld.param.u64 %rd0, [buf];\n\tld.param.u64 %rd1, [words];\n\tld.param.u32 %r10, [mode];\n\
         \tld.param.u32 %r11, [seed];\n\tcvta.to.global.u64 %rd0, %rd0;\n\
         \tmov.u32 %r1, %ctaid.x;\n\tmov.u32 %r2, %ntid.x;\n\tmov.u32 %r3, %tid.x;\n\
         \tmov.u32 %r4, %nctaid.x;\n\tmul.wide.u32 %rd2, %r1, %r2;\n\tcvt.u64.u32 %rd4, %r3;\n\
         \tadd.u64 %rd2, %rd2, %rd4;\n\tmul.wide.u32 %rd3, %r4, %r2;\n",
    );
}

/// The pattern of word %rd2 under mode %r10 and seed %r11, into %r12 (uses %r5-%r9, %r13, %rd6).
fn ptx_pattern(s: &mut String) {
    let _ = writeln!(
        s,
        "\tcvt.u32.u64 %r5, %rd2;\n\tshr.u64 %rd6, %rd2, 32;\n\tcvt.u32.u64 %r6, %rd6;\n\
         \tmul.lo.u32 %r6, %r6, {HIGH_MUL};\n\txor.b32 %r7, %r5, %r6;\n\txor.b32 %r7, %r7, %r11;\n\
         \tadd.u32 %r8, %r5, %r11;\n\tand.b32 %r8, %r8, 31;\n\tmov.u32 %r9, 1;\n\
         \tshl.b32 %r9, %r9, %r8;\n\tand.b32 %r13, %r10, 1;\n\tsetp.ne.u32 %q, %r13, 0;\n\
         \tselp.b32 %r12, %r9, %r7, %q;\n\tshr.u32 %r13, %r10, 1;\n\tand.b32 %r13, %r13, 1;\n\
         \tneg.s32 %r13, %r13;\n\txor.b32 %r12, %r12, %r13;"
    );
}

fn ptx_fill(s: &mut String) {
    ptx_stride_head(s, "burn_fill", "");
    s.push_str("\tsetp.ge.u64 %p, %rd2, %rd1;\n\t@%p bra DONE;\nLOOP:\n");
    ptx_pattern(s);
    s.push_str(
        "\tshl.b64 %rd4, %rd2, 2;\n\tadd.s64 %rd5, %rd0, %rd4;\n\tst.global.u32 [%rd5], %r12;\n\
         \tadd.u64 %rd2, %rd2, %rd3;\n\tsetp.lt.u64 %p, %rd2, %rd1;\n\t@%p bra LOOP;\nDONE:\n\tret;\n}\n\n",
    );
}

/// Per thread: wrong words (%r14), the first one's index (%rd7, `words` when none) and value
/// read (%r15), stored as four words at out[thread·16]: count, value, index low, index high.
fn ptx_check(s: &mut String) {
    ptx_stride_head(s, "burn_check", ",\n\t.param .u64 out");
    s.push_str(
        "\tmov.u32 %r14, 0;\n\tmov.u32 %r15, 0;\n\tmov.u64 %rd7, %rd1;\n\
         \tmad.lo.u32 %r16, %r1, %r2, %r3;\n\
         \tsetp.ge.u64 %p, %rd2, %rd1;\n\t@%p bra DONE;\nLOOP:\n",
    );
    ptx_pattern(s);
    s.push_str(
        "\tshl.b64 %rd4, %rd2, 2;\n\tadd.s64 %rd5, %rd0, %rd4;\n\tld.global.u32 %r17, [%rd5];\n\
         \tsetp.eq.u32 %p, %r17, %r12;\n\t@%p bra NEXT;\n\tsetp.eq.u32 %q, %r14, 0;\n\
         \t@%q mov.u64 %rd7, %rd2;\n\t@%q mov.u32 %r15, %r17;\n\tadd.u32 %r14, %r14, 1;\nNEXT:\n\
         \tadd.u64 %rd2, %rd2, %rd3;\n\tsetp.lt.u64 %p, %rd2, %rd1;\n\t@%p bra LOOP;\nDONE:\n\
         \tld.param.u64 %rd8, [out];\n\tcvta.to.global.u64 %rd8, %rd8;\n\
         \tmul.wide.u32 %rd9, %r16, 16;\n\tadd.s64 %rd8, %rd8, %rd9;\n\
         \tst.global.u32 [%rd8], %r14;\n\tst.global.u32 [%rd8+4], %r15;\n\
         \tst.global.u64 [%rd8+8], %rd7;\n\tret;\n}\n",
    );
}

/// The words an OpenCL work-item covers: with `per` = 0, every `global size`-th from its id (a
/// GPU's neighbouring work-items then touch neighbouring words); otherwise its own run of `per`
/// words (a CPU device runs a work-group's items one after another, so each streams through
/// its own run).
const RANGE: &str = "#define RANGE \\\n\
    ulong g = get_global_id(0); \\\n\
    ulong start = per ? g * per : g; \\\n\
    ulong end = per ? min(start + per, words) : words; \\\n\
    ulong step = per ? 1 : get_global_size(0);";

/// The OpenCL C program: the same kernels (no SM id: OpenCL does not say which compute unit ran
/// a work-group). `double` adds the f64 chain (devices without `cl_khr_fp64` compile without it).
/// `widths` are the chains' vector widths for f32 and f64: 1 on a GPU (its threads are scalar);
/// on a CPU device, the SIMD width, because PoCL does not vectorise these chains across
/// work-items by itself. Lane l of chain j of start s starts at `k = (s·CHAINS + j)·w + l + 1`.
pub fn opencl(double: bool, widths: [u32; 2]) -> String {
    let mut s = String::new();
    if double {
        s.push_str("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n");
    }
    let types: &[(&str, &str, u32)] = if double {
        &[("float", "f32", widths[0]), ("double", "f64", widths[1])]
    } else {
        &[("float", "f32", widths[0])]
    };
    for &(ty, name, w) in types {
        let tv = if w == 1 {
            ty.to_string()
        } else {
            format!("{ty}{w}")
        };
        let _ = writeln!(
            s,
            "__kernel void burn_chain_{name}(__global uint* out, {ty} c, {ty} step, uint iters) {{\n\
             \tuint g = get_global_id(0);\n\tuint base = (g & {}u) * {}u;\n\
             \t{tv} vc = ({tv})(c), vs = ({tv})(step);",
            STARTS - 1,
            CHAINS * w
        );
        for j in 0..CHAINS {
            let lanes: Vec<String> = (0..w)
                .map(|l| format!("({ty})(base + {}u)", j * w + l + 1))
                .collect();
            let _ = writeln!(
                s,
                "\t{tv} x{j} = fma(({tv})({}), vs, vc);",
                lanes.join(", ")
            );
        }
        s.push_str("\tfor (uint i = 0; i < iters; i++) {\n");
        for _ in 0..UNROLL {
            for j in 0..CHAINS {
                let _ = writeln!(s, "\t\tx{j} = fma(x{j}, x{j}, vc);");
            }
        }
        s.push_str("\t}\n\tuint h = 0;\n");
        for j in 0..CHAINS {
            for l in 0..w {
                let lane = if w == 1 {
                    format!("x{j}")
                } else {
                    format!("x{j}.s{}", &"0123456789abcdef"[l as usize..=l as usize])
                };
                if ty == "double" {
                    let _ = writeln!(
                        s,
                        "\th = (h * {FNV_PRIME}u) ^ (uint)as_ulong({lane});\n\
                         \th = (h * {FNV_PRIME}u) ^ (uint)(as_ulong({lane}) >> 32);"
                    );
                } else {
                    let _ = writeln!(s, "\th = (h * {FNV_PRIME}u) ^ as_uint({lane});");
                }
            }
        }
        s.push_str("\tout[g] = h;\n}\n\n");
    }
    let _ = writeln!(
        s,
        "inline uint pattern(ulong i, uint mode, uint seed) {{\n\
         \tuint lo = (uint)i, hi = (uint)(i >> 32);\n\
         \tuint a = lo ^ (hi * {HIGH_MUL}u) ^ seed;\n\
         \tuint w = 1u << ((lo + seed) & 31u);\n\
         \tuint v = (mode & 1u) ? w : a;\n\
         \treturn v ^ (0u - ((mode >> 1) & 1u));\n}}\n\n\
         {RANGE}\n\n\
         __kernel void burn_fill(__global uint* buf, ulong words, uint mode, uint seed, ulong per) {{\n\
         \tRANGE\n\tfor (ulong i = start; i < end; i += step)\n\
         \t\tbuf[i] = pattern(i, mode, seed);\n}}\n\n\
         __kernel void burn_check(__global const uint* buf, ulong words, uint mode, uint seed, \
         ulong per, __global uint* out) {{\n\
         \tuint errors = 0, got = 0;\n\tulong first = words;\n\tRANGE\n\
         \tfor (ulong i = start; i < end; i += step) {{\n\
         \t\tuint v = buf[i];\n\
         \t\tif (v != pattern(i, mode, seed)) {{\n\
         \t\t\tif (errors == 0) {{ first = i; got = v; }}\n\
         \t\t\terrors++;\n\t\t}}\n\t}}\n\
         \tsize_t o = get_global_id(0) * 4;\n\
         \tout[o] = errors;\n\tout[o + 1] = got;\n\
         \tout[o + 2] = (uint)first;\n\tout[o + 3] = (uint)(first >> 32);\n}}"
    );
    s
}
