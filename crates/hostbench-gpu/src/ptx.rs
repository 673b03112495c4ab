//! CUDA kernels as PTX text, and the marshalling of their arguments for `cuLaunchKernel`.
//!
//! PTX (ISA 6.0, target sm_50) is JIT-compiled by the driver itself (`cuModuleLoadData`), so a
//! machine with only the driver — no toolkit, no NVRTC — runs these kernels, and any newer GPU
//! accepts the old target. The kernels mirror the OpenCL ones (see `kernels` and `replay`):
//! multiply-add chains per thread (scalar, or `f16x2` pairs for f16, sm_53) with one folded
//! checksum, and grid-stride read, write and copy loops over 16-byte vectors of 32-bit words (or
//! bytes, for blocks that are not whole words).
//!
//! `cuLaunchKernel` takes an array of pointers, one per parameter, each pointing at the value;
//! the driver reads as many bytes as the PTX parameter declares. `KernelArgs` keeps every value
//! in its own 8-byte-aligned cell (replaced in place, so a launch's pointers stay valid between
//! samples) and records each value's PTX type so a test can hold it against the kernel's declaration.

use std::ffi::c_void;
use std::fmt::Write as _;

use crate::replay::FNV_PRIME;
use crate::Dtype;

const HEADER: &str = ".version 6.0\n.target sm_50\n.address_size 64\n\n";

/// Multiply-adds per chain written out inside the loop (the loop runs `STEPS / UNROLL` times).
/// 32 × 8 chains = 256 per turn: an SM sub-partition issues one instruction per cycle, and an
/// FP32 or f16x2 multiply-add fills its lanes in one, so the loop's three instructions of
/// counting and branching cost 3/67 of the issue slots at 8 (measured: 93 % of peak on an H200)
/// and 3/259 at 32.
pub const UNROLL: u32 = 32;

/// PTX register type, arithmetic suffix and the hex forms of 0.5 and 2⁻¹⁰ for a compute dtype.
fn compute_types(d: Dtype) -> Option<(&'static str, &'static str, &'static str, &'static str)> {
    match d {
        Dtype::F32 => Some(("f32", "fma.rn.f32", "0f3F000000", "0f3A800000")),
        Dtype::F64 => Some((
            "f64",
            "fma.rn.f64",
            "0d3FE0000000000000",
            "0d3F50000000000000",
        )),
        Dtype::I32 => Some(("s32", "mad.lo.s32", "", "")),
        Dtype::F16 | Dtype::I8 => None,
    }
}

/// The timed loop of a compute kernel: `iters` (%r0) turns of `UNROLL` × `chains` multiply-adds
/// `op x, x, a, b`; then the checksum (%r7) starts at 0.
fn push_chain_loop(s: &mut String, op: &str, chains: u32) {
    s.push_str("\tmov.u32 %r1, 0;\nLOOP:\n");
    for _ in 0..UNROLL {
        for j in 0..chains {
            let _ = writeln!(s, "\t{op} %x{j}, %x{j}, %va, %vb;");
        }
    }
    s.push_str("\tadd.u32 %r1, %r1, 1;\n\tsetp.lt.u32 %p, %r1, %r0;\n\t@%p bra LOOP;\n");
    s.push_str("\tmov.u32 %r7, 0;\n");
}

/// A compute kernel's end: the checksum (%r7) to `out[thread]` (%rd0, thread id in %r4).
const STORE_CHECKSUM: &str = "\tcvta.to.global.u64 %rd0, %rd0;\n\tmul.wide.u32 %rd1, %r4, 4;\n\
                              \tadd.s64 %rd2, %rd0, %rd1;\n\tst.global.u32 [%rd2], %r7;\n\tret;\n}\n";

/// The entry point name of the compute kernel for `d`.
pub fn compute_entry(d: Dtype) -> String {
    format!("compute_{}", d.name())
}

/// Lanes per chain register: f16 runs as `f16x2` pairs (two halves in one 32-bit register, the
/// form in which the hardware issues half-precision arithmetic), every other dtype one.
pub fn lanes(d: Dtype) -> u32 {
    if d == Dtype::F16 {
        2
    } else {
        1
    }
}

/// The f16 kernel's packed `a` and `b`: 1.0 and 2⁻¹⁰ as IEEE halves, in both halves.
pub const HALF2_ONE: u32 = 0x3C00_3C00;
pub const HALF2_STEP: u32 = 0x1400_1400;

/// `compute_<dtype>(out, a, b, iters)`: `chains` chains per thread of `lanes(d)` lanes each;
/// `None` for i8 (an sm_61 dp4a path is not written: its arithmetic differs from the replay's
/// per-lane multiply-add).
pub fn compute_ptx(d: Dtype, chains: u32) -> Option<String> {
    if d == Dtype::F16 {
        return Some(half2_ptx(chains));
    }
    let (ty, op, half, step) = compute_types(d)?;
    let entry = compute_entry(d);
    let mut s = String::from(HEADER);
    let _ = writeln!(
        s,
        ".visible .entry {entry}(\n\t.param .u64 out,\n\t.param .{ty} a,\n\t.param .{ty} b,\n\t.param .u32 iters\n)\n{{"
    );
    let _ = writeln!(
        s,
        "\t.reg .pred %p;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<4>;"
    );
    let _ = writeln!(s, "\t.reg .{ty} %x<{chains}>;\n\t.reg .{ty} %va, %vb;");
    if d == Dtype::F64 {
        s.push_str("\t.reg .b32 %lo, %hi;\n");
    }
    let _ = writeln!(
        s,
        "\tld.param.u64 %rd0, [out];\n\tld.param.{ty} %va, [a];\n\tld.param.{ty} %vb, [b];\n\tld.param.u32 %r0, [iters];"
    );
    s.push_str(
        "\tmov.u32 %r1, %ctaid.x;\n\tmov.u32 %r2, %ntid.x;\n\tmov.u32 %r3, %tid.x;\n\
         \tmad.lo.u32 %r4, %r1, %r2, %r3;\n\tand.b32 %r5, %r4, 1;\n",
    );
    // Start values (see `replay`): float 0.5 + (2j + p)·2⁻¹⁰, integer 2j + p + 1.
    for j in 0..chains {
        if d == Dtype::I32 {
            let _ = writeln!(s, "\tadd.u32 %x{j}, %r5, {};", 2 * j + 1);
        } else {
            let _ = writeln!(s, "\tadd.u32 %r6, %r5, {};", 2 * j);
            let _ = writeln!(s, "\tcvt.rn.{ty}.u32 %x{j}, %r6;");
            let _ = writeln!(s, "\tfma.rn.{ty} %x{j}, %x{j}, {step}, {half};");
        }
    }
    push_chain_loop(&mut s, op, chains);
    for j in 0..chains {
        match d {
            Dtype::F64 => {
                let _ = writeln!(s, "\tmov.b64 {{%lo, %hi}}, %x{j};");
                let _ = writeln!(
                    s,
                    "\tmul.lo.u32 %r7, %r7, {FNV_PRIME};\n\txor.b32 %r7, %r7, %lo;"
                );
                let _ = writeln!(
                    s,
                    "\tmul.lo.u32 %r7, %r7, {FNV_PRIME};\n\txor.b32 %r7, %r7, %hi;"
                );
            }
            Dtype::F32 => {
                let _ = writeln!(s, "\tmov.b32 %r6, %x{j};");
                let _ = writeln!(
                    s,
                    "\tmul.lo.u32 %r7, %r7, {FNV_PRIME};\n\txor.b32 %r7, %r7, %r6;"
                );
            }
            _ => {
                let _ = writeln!(
                    s,
                    "\tmul.lo.u32 %r7, %r7, {FNV_PRIME};\n\txor.b32 %r7, %r7, %x{j};"
                );
            }
        }
    }
    s.push_str(STORE_CHECKSUM);
    Some(s)
}

/// The f16 kernel: `fma.rn.f16x2` (sm_53 and later) on `chains` registers of two halves. Lane l
/// of chain j is the replay's start value k = 2j + l; the checksum folds lane 0, then lane 1, of
/// each chain, as the replay does at width 2. Start values are made in f32 and rounded to half
/// exactly (0.5 + m·2⁻¹⁰, m < 512); after `STEPS` steps every value stays below 2, where a half's
/// step is 2⁻¹⁰, so no intermediate is rounded.
fn half2_ptx(chains: u32) -> String {
    let entry = compute_entry(Dtype::F16);
    let mut s = HEADER.replace("sm_50", "sm_53");
    let _ = writeln!(
        s,
        ".visible .entry {entry}(\n\t.param .u64 out,\n\t.param .u32 a,\n\t.param .u32 b,\n\t.param .u32 iters\n)\n{{"
    );
    let _ = writeln!(
        s,
        "\t.reg .pred %p;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<4>;\n\t.reg .b32 %x<{chains}>;\n\
         \t.reg .b32 %va, %vb;\n\t.reg .f32 %f0;\n\t.reg .b16 %h<2>;"
    );
    s.push_str(
        "\tld.param.u64 %rd0, [out];\n\tld.param.u32 %va, [a];\n\tld.param.u32 %vb, [b];\n\tld.param.u32 %r0, [iters];\n\
         \tmov.u32 %r1, %ctaid.x;\n\tmov.u32 %r2, %ntid.x;\n\tmov.u32 %r3, %tid.x;\n\
         \tmad.lo.u32 %r4, %r1, %r2, %r3;\n\tand.b32 %r5, %r4, 1;\n",
    );
    for j in 0..chains {
        for l in 0..2 {
            // start index 2k + p with k = 2j + l
            let _ = writeln!(s, "\tadd.u32 %r6, %r5, {};", 2 * (2 * j + l));
            let _ = writeln!(s, "\tcvt.rn.f32.u32 %f0, %r6;");
            let _ = writeln!(s, "\tfma.rn.f32 %f0, %f0, 0f3A800000, 0f3F000000;");
            let _ = writeln!(s, "\tcvt.rn.f16.f32 %h{l}, %f0;");
        }
        let _ = writeln!(s, "\tmov.b32 %x{j}, {{%h0, %h1}};");
    }
    push_chain_loop(&mut s, "fma.rn.f16x2", chains);
    for j in 0..chains {
        let _ = writeln!(s, "\tmov.b32 {{%h0, %h1}}, %x{j};");
        for l in 0..2 {
            let _ = writeln!(
                s,
                "\tcvt.u32.u16 %r6, %h{l};\n\tmul.lo.u32 %r7, %r7, {FNV_PRIME};\n\txor.b32 %r7, %r7, %r6;"
            );
        }
    }
    s.push_str(STORE_CHECKSUM);
    s
}

/// Grid-stride memory kernels for elements of `elem` bytes (4 or 1):
/// `bw_read_<e>(src, out, n)`, `bw_write_<e>(dst, n, seed)`, `bw_copy_<e>(src, dst, n)`.
///
/// The 32-bit kernels move 16-byte vectors, four per thread per loop turn with all four loads
/// issued before any is used, then the last vectors one at a time and the last (n mod 4) words
/// singly. Why: a GPU thread issues in order and stalls at the first use of a load, so a loop of
/// one 4-byte load per turn keeps 4 bytes per thread in flight: about 1 MiB over a whole H100
/// (2048 resident threads × 132 SMs), where its HBM needs some 2–3 MB in flight to stream
/// (bandwidth × latency). Four 16-byte loads keep 64 bytes per thread, about 17 MiB.
/// The element order is unchanged (word e holds the same value, the read sums the same words),
/// so the host checks stay as they are.
pub fn memory_ptx(elem: usize) -> String {
    if elem == 4 {
        return vector_memory_ptx();
    }
    let (suffix, ld, st, shift) = (
        "u8",
        "ld.global.u8",
        "st.global.u8",
        "\tmov.b64 %rd5, %rd3;\n",
    );
    // i = global thread id, stride = all threads; %rd6 keeps the id for the read's output.
    let prologue = "\t.reg .pred %p;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<8>;\n";
    let step =
        "\tadd.s64 %rd3, %rd3, %rd4;\n\tsetp.lt.u64 %p, %rd3, %rd2;\n\t@%p bra LOOP;\nDONE:\n";
    let mut s = String::from(HEADER);
    let _ = write!(
        s,
        ".visible .entry bw_read_{suffix}(\n\t.param .u64 src,\n\t.param .u64 out,\n\t.param .u64 n\n)\n{{\n{prologue}\
         \tld.param.u64 %rd0, [src];\n\tld.param.u64 %rd1, [out];\n\tld.param.u64 %rd2, [n];\n\
         \tcvta.to.global.u64 %rd0, %rd0;\n\tcvta.to.global.u64 %rd1, %rd1;\n{INDEX}\
         \tmov.u32 %r4, 0;\n\tsetp.ge.u64 %p, %rd3, %rd2;\n\t@%p bra DONE;\nLOOP:\n{shift}\
         \tadd.s64 %rd5, %rd0, %rd5;\n\t{ld} %r5, [%rd5];\n\tadd.u32 %r4, %r4, %r5;\n{step}\
         \tshl.b64 %rd5, %rd6, 2;\n\tadd.s64 %rd5, %rd1, %rd5;\n\tst.global.u32 [%rd5], %r4;\n\tret;\n}}\n\n"
    );
    let _ = write!(
        s,
        ".visible .entry bw_write_{suffix}(\n\t.param .u64 dst,\n\t.param .u64 n,\n\t.param .u32 seed\n)\n{{\n{prologue}\
         \tld.param.u64 %rd0, [dst];\n\tld.param.u64 %rd2, [n];\n\tld.param.u32 %r6, [seed];\n\
         \tcvta.to.global.u64 %rd0, %rd0;\n{INDEX}\
         \tsetp.ge.u64 %p, %rd3, %rd2;\n\t@%p bra DONE;\nLOOP:\n{shift}\
         \tadd.s64 %rd5, %rd0, %rd5;\n\tcvt.u32.u64 %r5, %rd3;\n\tadd.u32 %r5, %r5, %r6;\n\t{st} [%rd5], %r5;\n{step}\
         \tret;\n}}\n\n"
    );
    let _ = write!(
        s,
        ".visible .entry bw_copy_{suffix}(\n\t.param .u64 src,\n\t.param .u64 dst,\n\t.param .u64 n\n)\n{{\n{prologue}\
         \tld.param.u64 %rd0, [src];\n\tld.param.u64 %rd1, [dst];\n\tld.param.u64 %rd2, [n];\n\
         \tcvta.to.global.u64 %rd0, %rd0;\n\tcvta.to.global.u64 %rd1, %rd1;\n{INDEX}\
         \tsetp.ge.u64 %p, %rd3, %rd2;\n\t@%p bra DONE;\nLOOP:\n{shift}\
         \tadd.s64 %rd7, %rd0, %rd5;\n\t{ld} %r5, [%rd7];\n\tadd.s64 %rd7, %rd1, %rd5;\n\t{st} [%rd7], %r5;\n{step}\
         \tret;\n}}\n"
    );
    s
}

/// Global thread id in %rd3 (and %rd6, kept), all threads (the stride) in %rd4.
const INDEX: &str = "\tmov.u32 %r0, %ctaid.x;\n\tmov.u32 %r1, %ntid.x;\n\tmov.u32 %r2, %tid.x;\n\
                     \tmov.u32 %r3, %nctaid.x;\n\tmul.wide.u32 %rd3, %r0, %r1;\n\tcvt.u64.u32 %rd4, %r2;\n\
                     \tadd.s64 %rd3, %rd3, %rd4;\n\tmov.b64 %rd6, %rd3;\n\tmul.wide.u32 %rd4, %r1, %r3;\n";

/// Vectors (16 bytes) per thread per turn of the main loop.
pub const VECTORS_IN_FLIGHT: usize = 4;

/// The 32-bit kernels (see `memory_ptx`). Registers: %rd0 source, %rd1 destination or output,
/// %rd2 words, %rd3 index, %rd4 threads, %rd6 thread id, %rd8 vectors, %rd9 3 × threads,
/// %rd11 threads × 16 bytes, %rd13 4 × threads; %r8–%r23 the four vectors' words.
fn vector_memory_ptx() -> String {
    const U: usize = VECTORS_IN_FLIGHT;
    let v = |k: usize| {
        format!(
            "{{%r{}, %r{}, %r{}, %r{}}}",
            8 + 4 * k,
            9 + 4 * k,
            10 + 4 * k,
            11 + 4 * k
        )
    };
    let prologue = "\t.reg .pred %p;\n\t.reg .b32 %r<24>;\n\t.reg .b64 %rd<14>;\n";
    let setup =
        "\tshr.u64 %rd8, %rd2, 2;\n\tmul.lo.u64 %rd9, %rd4, 3;\n\tshl.b64 %rd11, %rd4, 4;\n\
                 \tshl.b64 %rd13, %rd4, 2;\n";
    // Address of vector %rd3 of the buffer at `base` into %rd5.
    let at = |base: &str| format!("\tshl.b64 %rd5, %rd3, 4;\n\tadd.s64 %rd5, {base}, %rd5;\n");
    // The value word e gets from the write kernel: e + seed (%r6), for the vector's four words.
    let values = |k: usize| {
        let mut t = format!(
            "\tcvt.u32.u64 %r{}, %rd3;\n\tshl.b32 %r{0}, %r{0}, 2;\n\tadd.u32 %r{0}, %r{0}, %r6;\n",
            8 + 4 * k
        );
        for w in 1..4 {
            let _ = writeln!(t, "\tadd.u32 %r{}, %r{}, {w};", 8 + 4 * k + w, 8 + 4 * k);
        }
        t
    };
    let sum = |k: usize| {
        (0..4)
            .map(|w| format!("\tadd.u32 %r4, %r4, %r{};\n", 8 + 4 * k + w))
            .collect::<String>()
    };
    // One kernel body: `main` does U vectors at %rd3, %rd3 + T, …; `one` does the vector at
    // %rd3; `word` the word at %rd3 (address in %rd5 already set to base + 4·%rd3 by `word_at`).
    let body = |main: &str, one: &str, word: &str| {
        format!(
            "{INDEX}{setup}\
             \tadd.s64 %rd10, %rd3, %rd9;\n\tsetp.ge.u64 %p, %rd10, %rd8;\n\t@%p bra REST;\nMAIN:\n{main}\
             \tadd.s64 %rd3, %rd3, %rd13;\n\tadd.s64 %rd10, %rd3, %rd9;\n\tsetp.lt.u64 %p, %rd10, %rd8;\n\t@%p bra MAIN;\n\
             REST:\n\tsetp.ge.u64 %p, %rd3, %rd8;\n\t@%p bra TAIL;\nONE:\n{one}\
             \tadd.s64 %rd3, %rd3, %rd4;\n\tsetp.lt.u64 %p, %rd3, %rd8;\n\t@%p bra ONE;\n\
             TAIL:\n\tshl.b64 %rd3, %rd8, 2;\n\tadd.s64 %rd3, %rd3, %rd6;\n\tsetp.ge.u64 %p, %rd3, %rd2;\n\t@%p bra DONE;\n\
             WORD:\n{word}\
             \tadd.s64 %rd3, %rd3, %rd4;\n\tsetp.lt.u64 %p, %rd3, %rd2;\n\t@%p bra WORD;\nDONE:\n"
        )
    };
    let word_at = |base: &str| format!("\tshl.b64 %rd5, %rd3, 2;\n\tadd.s64 %rd5, {base}, %rd5;\n");
    // `u` vector loads from %rd5, %rd5 + 16·T, … (all issued before any is used).
    // One instruction per vector k of a turn at `base`, base + 16·T, … (%rd12 walks the turn).
    let each = |base: &str, op: &dyn Fn(usize, &str) -> String| {
        let mut t = String::new();
        for k in 0..U {
            if k > 0 {
                let from = if k == 1 { base } else { "%rd12" };
                let _ = writeln!(t, "\tadd.s64 %rd12, {from}, %rd11;");
            }
            t.push_str(&op(k, if k == 0 { base } else { "%rd12" }));
        }
        t
    };
    // The U vector loads from %rd5 (all issued before any is used).
    let loads = || {
        each("%rd5", &|k, addr| {
            format!("\tld.global.v4.u32 {}, [{addr}];\n", v(k))
        })
    };

    // read: all U loads, then the sums.
    let mut main = at("%rd0");
    main.push_str(&loads());
    for k in 0..U {
        main.push_str(&sum(k));
    }
    let one = format!(
        "{}\tld.global.v4.u32 {}, [%rd5];\n{}",
        at("%rd0"),
        v(0),
        sum(0)
    );
    let word = format!(
        "{}\tld.global.u32 %r5, [%rd5];\n\tadd.u32 %r4, %r4, %r5;\n",
        word_at("%rd0")
    );
    let mut s = String::from(HEADER);
    let _ = write!(
        s,
        ".visible .entry bw_read_u32(\n\t.param .u64 src,\n\t.param .u64 out,\n\t.param .u64 n\n)\n{{\n{prologue}\
         \tld.param.u64 %rd0, [src];\n\tld.param.u64 %rd1, [out];\n\tld.param.u64 %rd2, [n];\n\
         \tcvta.to.global.u64 %rd0, %rd0;\n\tcvta.to.global.u64 %rd1, %rd1;\n\tmov.u32 %r4, 0;\n{}\
         \tshl.b64 %rd5, %rd6, 2;\n\tadd.s64 %rd5, %rd1, %rd5;\n\tst.global.u32 [%rd5], %r4;\n\tret;\n}}\n\n",
        body(&main, &one, &word)
    );

    // write: each vector's values from its own index, U stores per turn.
    let mut main = String::new();
    for k in 0..U {
        main.push_str(&values(k));
        main.push_str(&at("%rd0"));
        let _ = writeln!(main, "\tst.global.v4.u32 [%rd5], {};", v(k));
        if k + 1 < U {
            main.push_str("\tadd.s64 %rd3, %rd3, %rd4;\n");
        }
    }
    // Back to the turn's first vector: the loop's step adds 4 × threads.
    main.push_str("\tsub.s64 %rd3, %rd3, %rd9;\n");
    let one = format!(
        "{}{}\tst.global.v4.u32 [%rd5], {};\n",
        values(0),
        at("%rd0"),
        v(0)
    );
    let word = format!(
        "{}\tcvt.u32.u64 %r5, %rd3;\n\tadd.u32 %r5, %r5, %r6;\n\tst.global.u32 [%rd5], %r5;\n",
        word_at("%rd0")
    );
    let _ = write!(
        s,
        ".visible .entry bw_write_u32(\n\t.param .u64 dst,\n\t.param .u64 n,\n\t.param .u32 seed\n)\n{{\n{prologue}\
         \tld.param.u64 %rd0, [dst];\n\tld.param.u64 %rd2, [n];\n\tld.param.u32 %r6, [seed];\n\
         \tcvta.to.global.u64 %rd0, %rd0;\n{}\tret;\n}}\n\n",
        body(&main, &one, &word)
    );

    // copy: all U loads, then all U stores at the same offsets in the destination.
    let mut main = at("%rd0");
    main.push_str(&loads());
    main.push_str("\tshl.b64 %rd7, %rd3, 4;\n\tadd.s64 %rd7, %rd1, %rd7;\n");
    main.push_str(&each("%rd7", &|k, addr| {
        format!("\tst.global.v4.u32 [{addr}], {};\n", v(k))
    }));
    let one = format!(
        "{}\tld.global.v4.u32 {}, [%rd5];\n\tshl.b64 %rd7, %rd3, 4;\n\tadd.s64 %rd7, %rd1, %rd7;\n\tst.global.v4.u32 [%rd7], {1};\n",
        at("%rd0"),
        v(0)
    );
    let word = format!(
        "{}\tld.global.u32 %r5, [%rd5];\n\tshl.b64 %rd7, %rd3, 2;\n\tadd.s64 %rd7, %rd1, %rd7;\n\tst.global.u32 [%rd7], %r5;\n",
        word_at("%rd0")
    );
    let _ = write!(
        s,
        ".visible .entry bw_copy_u32(\n\t.param .u64 src,\n\t.param .u64 dst,\n\t.param .u64 n\n)\n{{\n{prologue}\
         \tld.param.u64 %rd0, [src];\n\tld.param.u64 %rd1, [dst];\n\tld.param.u64 %rd2, [n];\n\
         \tcvta.to.global.u64 %rd0, %rd0;\n\tcvta.to.global.u64 %rd1, %rd1;\n{}\tret;\n}}\n",
        body(&main, &one, &word)
    );
    s
}

/// The launch-latency kernel.
pub const EMPTY_PTX: &str =
    ".version 6.0\n.target sm_50\n.address_size 64\n\n.visible .entry empty(\n\t.param .u64 p\n)\n{\n\tret;\n}\n";

/// One kernel argument by value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg {
    /// A device pointer or a 64-bit count.
    U64(u64),
    U32(u32),
    I32(i32),
    F32(f32),
    F64(f64),
}

impl Arg {
    /// The PTX parameter type this value matches.
    pub fn ptx_type(&self) -> &'static str {
        match self {
            Arg::U64(_) => "u64",
            Arg::U32(_) => "u32",
            Arg::I32(_) => "s32",
            Arg::F32(_) => "f32",
            Arg::F64(_) => "f64",
        }
    }

    /// The value's bits, zero-extended to 64: its parameter's bytes, little-endian, at the
    /// start of an 8-byte cell.
    pub fn bits(&self) -> u64 {
        match *self {
            Arg::U64(v) => v,
            Arg::U32(v) => u64::from(v),
            Arg::I32(v) => u64::from(v as u32),
            Arg::F32(v) => u64::from(v.to_bits()),
            Arg::F64(v) => v.to_bits(),
        }
    }
}

/// Kernel arguments in the layout `cuLaunchKernel` wants: one stable pointer per value.
#[derive(Debug, Default)]
pub struct KernelArgs {
    args: Vec<Arg>,
    /// One 8-byte, 8-aligned cell per argument.
    cells: Vec<u64>,
}

impl KernelArgs {
    pub fn new(args: &[Arg]) -> Self {
        let mut k = Self::default();
        for &a in args {
            k.push(a);
        }
        k
    }

    pub fn push(&mut self, a: Arg) {
        // Little-endian hosts (x86-64, AArch64): the value's bytes start the cell.
        self.cells.push(a.bits());
        self.args.push(a);
    }

    /// Replace argument `i` in place (its pointer stays the same).
    pub fn set(&mut self, i: usize, a: Arg) {
        if let (Some(slot), Some(cell)) = (self.args.get_mut(i), self.cells.get_mut(i)) {
            *cell = a.bits();
            *slot = a;
        }
    }

    pub fn args(&self) -> &[Arg] {
        &self.args
    }

    /// The `void **kernelParams` array; valid while `self` lives and is not pushed to.
    pub fn pointers(&mut self) -> Vec<*mut c_void> {
        self.cells
            .iter_mut()
            .map(|c| (c as *mut u64).cast::<c_void>())
            .collect()
    }
}

/// The parameter types of `.entry name(...)` in `ptx`, in order (for checking marshalling).
pub fn entry_params(ptx: &str, name: &str) -> Option<Vec<String>> {
    Some(
        entry_param_list(ptx, name)?
            .into_iter()
            .map(|(ty, _)| ty)
            .collect(),
    )
}

/// The parameters of `.entry name(...)` in `ptx`, in order: (type, name), as `("u64", "out")`.
pub fn entry_param_list(ptx: &str, name: &str) -> Option<Vec<(String, String)>> {
    let start = ptx.find(&format!(".entry {name}("))?;
    let rest = &ptx[start..];
    let close = rest.find(')')?;
    Some(
        rest[..close]
            .split(".param")
            .skip(1)
            .filter_map(|p| {
                let mut w = p.split_whitespace();
                let ty = w.next()?.trim_start_matches('.').to_string();
                let name = w.next()?.trim_end_matches(',').to_string();
                Some((ty, name))
            })
            .collect(),
    )
}

/// NVIDIA's assembler for the tests, where one is installed: `HOSTBENCH_PTXAS` or `ptxas` on the
/// PATH (`scripts/test` fetches it from the CUDA compiler's Python wheel). CI on x86-64 must have
/// it; elsewhere a missing ptxas is only said.
#[cfg(test)]
pub(crate) fn ptxas_for_tests() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("HOSTBENCH_PTXAS") {
        return Some(p.into());
    }
    let found = std::process::Command::new("ptxas")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none() || !cfg!(target_arch = "x86_64"),
            "CI needs ptxas (HOSTBENCH_PTXAS): scripts/test installs it"
        );
        eprintln!("ptxas not found: skipped (set HOSTBENCH_PTXAS)");
    }
    found.then(|| "ptxas".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small PTX lint: header, balanced braces, every register used is declared, every branch
    /// target is a label in the same entry.
    fn lint(ptx: &str) -> Result<(), String> {
        for h in [".version 6.0", ".target sm_5", ".address_size 64"] {
            if !ptx.contains(h) {
                return Err(format!("missing {h}"));
            }
        }
        if ptx.matches('{').count() != ptx.matches('}').count() {
            return Err("unbalanced braces".into());
        }
        for entry in ptx.split(".visible .entry").skip(1) {
            let mut declared: Vec<String> = Vec::new();
            let mut labels: Vec<String> = Vec::new();
            for line in entry.lines() {
                let l = line.trim();
                if let Some(decl) = l.strip_prefix(".reg") {
                    for name in decl.trim_end_matches(';').split(',').map(str::trim) {
                        let name = name.split_whitespace().last().unwrap_or(name);
                        match name.split_once('<') {
                            Some((base, n)) => {
                                let n: u32 = n
                                    .trim_end_matches('>')
                                    .parse()
                                    .map_err(|_| name.to_string())?;
                                declared.extend((0..n).map(|i| format!("{base}{i}")));
                            }
                            None => declared.push(name.to_string()),
                        }
                    }
                } else if let Some(label) = l.strip_suffix(':') {
                    labels.push(label.to_string());
                }
            }
            let specials = ["%tid", "%ntid", "%ctaid", "%nctaid"];
            for line in entry
                .lines()
                .map(str::trim)
                .filter(|l| !l.starts_with(".reg"))
            {
                for tok in line.split(|c: char| !(c.is_alphanumeric() || c == '%' || c == '_')) {
                    if tok.starts_with('%')
                        && !specials.contains(&tok)
                        && !declared.iter().any(|d| d == tok)
                    {
                        return Err(format!("undeclared register {tok} in: {line}"));
                    }
                }
                if let Some(target) = line.split("bra ").nth(1) {
                    let t = target.trim_end_matches(';');
                    if !labels.iter().any(|l| l == t) {
                        return Err(format!("branch to unknown label {t}"));
                    }
                }
            }
        }
        Ok(())
    }

    #[test]
    fn every_kernel_passes_the_lint() {
        for d in [Dtype::F32, Dtype::F64, Dtype::I32, Dtype::F16] {
            let p = compute_ptx(d, 8).unwrap();
            lint(&p).unwrap_or_else(|e| panic!("{d:?}: {e}\n{p}"));
            assert_eq!(p.matches("%x7, %x7, %va, %vb").count(), UNROLL as usize);
        }
        assert!(compute_ptx(Dtype::I8, 8).is_none());
        for e in [4, 1] {
            let p = memory_ptx(e);
            lint(&p).unwrap_or_else(|err| panic!("elem {e}: {err}\n{p}"));
        }
        lint(EMPTY_PTX).unwrap();
        // The lint catches what it is for.
        assert!(lint(&EMPTY_PTX.replace("ret;", "mov.u32 %r9, 0;")).is_err());
        assert!(lint(&EMPTY_PTX.replace("ret;", "bra NOWHERE;")).is_err());
    }

    /// Every kernel assembles for its own target and for Hopper (sm_90), as the driver's JIT
    /// would do it: the lint above checks form, this checks the instructions and operand types.
    #[test]
    fn ptxas_accepts_every_kernel() {
        let Some(ptxas) = ptxas_for_tests() else {
            return;
        };
        let dir = std::env::temp_dir().join(format!("hb-ptxas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut kernels: Vec<(String, String)> = [Dtype::F64, Dtype::F32, Dtype::F16, Dtype::I32]
            .iter()
            .map(|&d| (d.name().to_string(), compute_ptx(d, 8).unwrap()))
            .collect();
        kernels.push(("mem4".into(), memory_ptx(4)));
        kernels.push(("mem1".into(), memory_ptx(1)));
        kernels.push(("empty".into(), EMPTY_PTX.into()));
        for (name, text) in &kernels {
            let file = dir.join(format!("{name}.ptx"));
            std::fs::write(&file, text).unwrap();
            let own = text
                .lines()
                .find_map(|l| l.strip_prefix(".target "))
                .unwrap();
            for arch in [own, "sm_90"] {
                let out = std::process::Command::new(&ptxas)
                    .args(["-arch", arch, "-o"])
                    .arg(dir.join(format!("{name}-{arch}.cubin")))
                    .arg(&file)
                    .output()
                    .expect("run ptxas");
                assert!(
                    out.status.success(),
                    "ptxas -arch {arch} {name}: {}\n{text}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn float_constants_are_the_replay_values() {
        let p = compute_ptx(Dtype::F32, 1).unwrap();
        assert_eq!(f32::from_bits(0x3F00_0000), 0.5);
        assert_eq!(
            f64::from(f32::from_bits(0x3A80_0000)),
            crate::replay::FLOAT_B
        );
        assert!(p.contains("fma.rn.f32 %x0, %x0, 0f3A800000, 0f3F000000;"));
        let d = compute_ptx(Dtype::F64, 1).unwrap();
        assert_eq!(
            f64::from_bits(0x3F50_0000_0000_0000),
            crate::replay::FLOAT_B
        );
        assert!(d.contains("0d3F50000000000000, 0d3FE0000000000000"));
    }

    #[test]
    fn marshalled_arguments_match_the_declared_parameters() {
        let ptx = compute_ptx(Dtype::F64, 4).unwrap();
        let declared = entry_params(&ptx, &compute_entry(Dtype::F64)).unwrap();
        let mut args = KernelArgs::new(&[
            Arg::U64(0xDEAD_BEEF_0000),
            Arg::F64(1.0),
            Arg::F64(0.5),
            Arg::U32(128),
        ]);
        let types: Vec<&str> = args.args().iter().map(Arg::ptx_type).collect();
        assert_eq!(types, declared);
        let ptrs = args.pointers();
        assert_eq!(ptrs.len(), 4);
        // SAFETY (test): each pointer addresses a live 8-byte cell of `args`.
        let read = |p: *mut c_void, n: usize| unsafe {
            std::slice::from_raw_parts(p as *const u8, n).to_vec()
        };
        assert_eq!(read(ptrs[0], 8), 0xDEAD_BEEF_0000u64.to_le_bytes());
        assert_eq!(read(ptrs[1], 8), 1.0f64.to_le_bytes());
        assert_eq!(read(ptrs[3], 4), 128u32.to_le_bytes());
        assert_eq!(ptrs[0] as usize % 8, 0);
        // Replacing a value keeps its address.
        args.set(3, Arg::U32(7));
        assert_eq!(args.pointers()[3], ptrs[3]);
        assert_eq!(read(ptrs[3], 4), 7u32.to_le_bytes());
        for (entry, want) in [
            ("bw_read_u32", vec!["u64", "u64", "u64"]),
            ("bw_write_u8", vec!["u64", "u64", "u32"]),
        ] {
            let p = memory_ptx(if entry.ends_with("u32") { 4 } else { 1 });
            assert_eq!(entry_params(&p, entry).unwrap(), want, "{entry}");
        }
        assert_eq!(entry_params(EMPTY_PTX, "empty").unwrap(), vec!["u64"]);
    }
}
