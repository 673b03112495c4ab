//! The GPU's matrix units (tensor cores): precisions, their dense peaks per SM, and the PTX
//! throughput kernels, with the model that predicts every kernel's result exactly.
//!
//! Two instruction families, chosen by compute capability:
//! * `wgmma.mma_async` (Hopper, sm_90a): a warpgroup (four warps) multiplies a 64×K tile of A by
//!   a K×N tile of B into accumulators held in registers, with B (and A in the `ss` form) read
//!   from shared memory through matrix descriptors. On Hopper this is the only path to the
//!   tensor cores' full rate: the published microbenchmarks, and NVIDIA's own libraries, find
//!   `mma.sync` topping out near half of it.
//! * `mma.sync` (Volta to Ada, and f64 on Hopper): one warp, operands in registers.
//!
//! Every operand is 1 (in the precision's own encoding), so every element of a product tile is
//! K and an accumulator after S chained instructions holds S·K, whatever the fragment layout or
//! the descriptor's strides: a layout mistake cannot change a result, and a skipped instruction
//! always does. Each chunk of S instructions starts from zero (the first instruction's scale-d
//! predicate is false), so S·K stays at about 2¹¹, exact in any accumulator (Hopper's FP8 path
//! keeps only about 14 bits of the sum, DeepSeek-V3 §3.3.2); after each chunk each thread adds
//! its accumulators into a 32-bit checksum, and the host compares every thread's checksum with
//! [`Kernel::expected`]. [`model`] reads a kernel's PTX text back and recomputes that value from
//! the instructions it finds, so a kernel that loses an instruction fails its test.
//!
//! Peaks: dense multiply-accumulates per clock per SM ([`macs_per_sm`], never the sparse
//! figure) × SMs × the SM clock measured during the sample × 2.

use std::fmt::Write as _;

use hostbench_core::model::Peak;
use hostbench_core::units::format_value;

hostbench_core::named_enum! {
    /// A tensor-core input precision (the accumulator is f32, i32 for i8, f64 for f64).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum TensorType("tensor precision") {
        F16 = "f16" | "half" | "fp16",
        Bf16 = "bf16" | "bfloat16",
        Tf32 = "tf32",
        E4m3 = "fp8-e4m3" | "e4m3" | "fp8",
        E5m2 = "fp8-e5m2" | "e5m2",
        I8 = "i8" | "int8" | "s8",
        F64 = "f64" | "fp64" | "dp",
    }
}

impl TensorType {
    pub fn is_float(self) -> bool {
        self != TensorType::I8
    }

    /// `gpu.flops` (FLOP/s) for floating point, `gpu.iops` (OP/s) for i8.
    pub fn benchmark(self) -> (&'static str, &'static str) {
        if self.is_float() {
            ("gpu.flops", "FLOP/s")
        } else {
            ("gpu.iops", "OP/s")
        }
    }

    /// The PTX type of the inputs.
    pub fn ptx(self) -> &'static str {
        match self {
            TensorType::F16 => "f16",
            TensorType::Bf16 => "bf16",
            TensorType::Tf32 => "tf32",
            TensorType::E4m3 => "e4m3",
            TensorType::E5m2 => "e5m2",
            TensorType::I8 => "s8",
            TensorType::F64 => "f64",
        }
    }

    /// The accumulator's PTX type.
    pub fn accumulate(self) -> &'static str {
        match self {
            TensorType::I8 => "s32",
            TensorType::F64 => "f64",
            _ => "f32",
        }
    }

    /// Bytes per input element.
    pub fn bytes(self) -> u32 {
        match self {
            TensorType::F16 | TensorType::Bf16 => 2,
            TensorType::Tf32 => 4,
            TensorType::E4m3 | TensorType::E5m2 | TensorType::I8 => 1,
            TensorType::F64 => 8,
        }
    }

    /// A 32-bit word of inputs that are all 1 in this encoding.
    pub fn ones_word(self) -> u32 {
        match self {
            TensorType::F16 => 0x3C00_3C00,
            TensorType::Bf16 => 0x3F80_3F80,
            TensorType::Tf32 => 0x3F80_0000,
            TensorType::E4m3 => 0x3838_3838, // sign 0, exponent 0111 (bias 7), mantissa 000
            TensorType::E5m2 => 0x3C3C_3C3C, // sign 0, exponent 01111 (bias 15), mantissa 00
            TensorType::I8 => 0x0101_0101,
            TensorType::F64 => 0, // f64 operands are 64-bit registers: see `ONE_F64`
        }
    }
}

/// 1.0 as a PTX f64 literal.
const ONE_F64: &str = "0d3FF0000000000000";

/// Dense multiply-accumulates per clock per SM for `t` on compute capability `major.minor`,
/// with the source of the number. NVIDIA's whitepapers give the per-SM rates (V100, A100,
/// GA102, AD102, H100): e.g. H100 2048 f16, 1024 tf32, 4096 fp8 and i8, 128 f64 (989.4 TFLOP/s
/// f16 = 132 SMs × 1.83 GHz × 2048 × 2). GeForce parts of sm_86 and sm_89 run the floating-point
/// inputs with f32 accumulation at half rate (GA102 and AD102 whitepapers), which the
/// device's name decides.
pub fn macs_per_sm(
    major: u32,
    minor: u32,
    t: TensorType,
    device_name: &str,
) -> Result<(u32, String), String> {
    use TensorType::*;
    let full = match ((major, minor), t) {
        ((7, 0) | (7, 2), F16) => Some(512),
        ((7, 5), F16) => Some(512),
        ((7, 5), I8) => Some(1024),
        ((8, 0), F16 | Bf16) => Some(1024),
        ((8, 0), Tf32) => Some(512),
        ((8, 0), I8) => Some(2048),
        ((8, 0), F64) => Some(64),
        ((8, 6), F16 | Bf16) => Some(512),
        ((8, 6), Tf32) => Some(256),
        ((8, 6), I8) => Some(1024),
        ((8, 9), F16 | Bf16) => Some(512),
        ((8, 9), Tf32) => Some(256),
        ((8, 9), E4m3 | E5m2 | I8) => Some(1024),
        ((9, 0), F16 | Bf16) => Some(2048),
        ((9, 0), Tf32) => Some(1024),
        ((9, 0), E4m3 | E5m2 | I8) => Some(4096),
        ((9, 0), F64) => Some(128),
        _ => None,
    };
    let Some(full) = full else {
        return Err(format!(
            "no {} tensor-core rate for compute capability {major}.{minor} in the table",
            t.name()
        ));
    };
    let mut source = format!("table: compute capability {major}.{minor}, dense");
    if (major, minor) != (9, 0) {
        // Only Hopper's kernels (wgmma, and f64's mma.sync) have run on a GPU (an H200,
        // BENCHMARKS.md); the others are checked by `model` and assembled by ptxas for their
        // target. Said in the record until one runs.
        source.push_str(&format!(
            "; the mma.sync kernels for compute capability {major}.{minor} have not yet run on \
             hardware (only Hopper's have)"
        ));
    }
    let geforce = device_name.contains("GeForce") && matches!((major, minor), (8, 6) | (8, 9));
    if geforce && t.is_float() {
        return Ok((
            full / 2,
            format!("{source}, GeForce: f32 accumulation at half rate"),
        ));
    }
    Ok((full, source))
}

/// `SMs x clock (source) x MACs/SM/clock [table] x 2`.
pub fn tensor_peak(
    sms: u32,
    clock_hz: f64,
    clock_source: &str,
    t: TensorType,
    macs: u32,
    source: &str,
) -> Peak {
    let op = if t.is_float() { "FLOP" } else { "OP" };
    Peak {
        value: f64::from(sms) * clock_hz * f64::from(macs) * 2.0,
        basis: format!(
            "{sms} SMs x {} ({clock_source}) x {macs} dense {} tensor MACs/SM/clock [{source}] x 2 {op} (multiply-accumulate)",
            format_value(clock_hz, "Hz"),
            t.name()
        ),
    }
}

/// One `mma.sync` shape: registers per operand fragment (32-bit, or f64 for f64) and the
/// multiply-accumulates one warp's instruction does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmaShape {
    pub shape: &'static str,
    pub k: u32,
    pub a: u32,
    pub b: u32,
    pub d: u32,
    pub macs: u32,
}

const fn mma(shape: &'static str, m: u32, n: u32, k: u32, a: u32, b: u32, d: u32) -> MmaShape {
    MmaShape {
        shape,
        k,
        a,
        b,
        d,
        macs: m * n * k,
    }
}

/// How a kernel drives the tensor cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `wgmma.mma_async` m64nNkK; `a_in_regs`: A from registers (`rs`), else shared memory (`ss`).
    Wgmma { n: u32, a_in_regs: bool },
    /// `mma.sync` with `chains` independent accumulators per warp.
    Mma { shape: MmaShape, chains: u32 },
}

impl Form {
    /// A short name for records ("wgmma m64n256k16 ss", "mma.sync m16n8k16 x8").
    pub fn describe(&self, t: TensorType) -> String {
        match *self {
            Form::Wgmma { n, a_in_regs } => format!(
                "wgmma.mma_async m64n{n}k{} {}",
                wgmma_k(t),
                if a_in_regs { "rs" } else { "ss" }
            ),
            Form::Mma { shape, chains } => {
                format!("mma.sync {} x{chains} accumulators", shape.shape)
            }
        }
    }
}

/// K of the wgmma shape: 32 bytes of K per instruction for every input type.
pub fn wgmma_k(t: TensorType) -> u32 {
    32 / t.bytes()
}

/// Instructions per inner-loop turn.
const UNROLL: u32 = 8;
/// Target value of an accumulator at the end of a chunk (S·K ≈ 2¹¹, see the module header).
const CHUNK_VALUE: u32 = 2048;
/// Threads per block of the mma.sync kernels (8 warps).
const MMA_BLOCK: u32 = 256;
/// Threads per block of the wgmma kernels: one warpgroup; the occupancy decides how many
/// warpgroups share an SM.
const WGMMA_BLOCK: u32 = 128;
/// Shared memory of a wgmma block: A (64 rows × 32 bytes) and B (up to 256 rows × 32 bytes).
const WGMMA_SMEM: u32 = 2048 + 8192;

/// A generated kernel and what the host needs to run and check it.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub t: TensorType,
    pub form: Form,
    pub entry: String,
    pub ptx: String,
    pub block: u32,
    /// Instructions per chunk (the first resets the accumulators).
    pub per_chunk: u32,
    /// Accumulator registers per thread.
    pub acc_regs: u32,
    /// K per instruction.
    pub k: u32,
    /// Multiply-accumulates per instruction for the whole warp or warpgroup.
    pub macs: u64,
    /// Threads that issue one instruction together (32 or 128).
    pub issuers: u32,
    /// Independent accumulators (instructions per step) of each warp or warpgroup.
    pub chains: u32,
}

impl Kernel {
    /// Every thread's checksum after `chunks` chunks: the sum of its accumulators at the end of
    /// each chunk (each S·K), modulo 2³².
    pub fn expected(&self, chunks: u32) -> u32 {
        let per_chunk = u64::from(self.acc_regs) * u64::from(self.per_chunk) * u64::from(self.k);
        (per_chunk.wrapping_mul(u64::from(chunks)) & 0xFFFF_FFFF) as u32
    }

    /// Multiply-accumulates of one launch of `grid` blocks running `chunks` chunks.
    pub fn macs_per_launch(&self, grid: u32, chunks: u32) -> f64 {
        let groups = f64::from(grid) * f64::from(self.block / self.issuers);
        groups * f64::from(chunks) * f64::from(self.per_chunk * self.chains) * self.macs as f64
    }
}

/// The forms to try for `t` on compute capability `major.minor`, best guess first; empty with
/// the reason where no kernel is written for it.
pub fn forms(major: u32, minor: u32, t: TensorType) -> Result<Vec<Form>, String> {
    use TensorType::*;
    let cc = (major, minor);
    let mmas = |shapes: &[MmaShape]| -> Vec<Form> {
        shapes
            .iter()
            .flat_map(|&shape| [8, 4, 2, 1].map(|chains| Form::Mma { shape, chains }))
            .collect()
    };
    // Hopper's f64 tensor rate (measured on an H200, BENCHMARKS.md): every m16n8kK shape with
    // 1 to 8 accumulators reached 98-100 % of the peak, m8n8k4 half of it.
    let f16 = mma("m16n8k16", 16, 8, 16, 4, 2, 4);
    let tf32 = mma("m16n8k8", 16, 8, 8, 4, 2, 4);
    let int8 = mma("m16n8k32", 16, 8, 32, 4, 2, 4);
    let out = match (cc, t) {
        ((9, 0), F64) => mmas(&[
            mma("m16n8k16", 16, 8, 16, 8, 4, 4),
            mma("m16n8k8", 16, 8, 8, 4, 2, 4),
            mma("m16n8k4", 16, 8, 4, 2, 1, 4),
            mma("m8n8k4", 8, 8, 4, 1, 1, 2),
        ]),
        ((9, 0), _) => [256, 128]
            .iter()
            .flat_map(|&n| [false, true].map(|a_in_regs| Form::Wgmma { n, a_in_regs }))
            .collect(),
        ((8, 0), F64) => mmas(&[mma("m8n8k4", 8, 8, 4, 1, 1, 2)]),
        ((8, _), F16 | Bf16) => mmas(&[f16]),
        ((8, _), Tf32) => mmas(&[tf32]),
        ((8, _), I8) => mmas(&[int8]),
        ((8, 9), E4m3 | E5m2) => mmas(&[int8]),
        ((7, 5), F16) => mmas(&[mma("m16n8k8", 16, 8, 8, 2, 1, 4)]),
        ((7, 5), I8) => mmas(&[mma("m8n8k16", 8, 8, 16, 1, 1, 2)]),
        // m8n8k4 on Volta is four 8×8×4 products per warp.
        ((7, 0) | (7, 2), F16) => mmas(&[mma("m8n8k4", 32, 8, 4, 2, 2, 8)]),
        _ => Vec::new(),
    };
    if out.is_empty() {
        let why = if major >= 10 {
            format!(
                "no tensor kernel for compute capability {major}.{minor}: Blackwell's tcgen05 \
                 instructions are not written"
            )
        } else if major < 7 {
            format!("compute capability {major}.{minor} has no tensor cores (they came with 7.0)")
        } else {
            format!(
                "the tensor cores of compute capability {major}.{minor} have no {} inputs",
                t.name()
            )
        };
        return Err(why);
    }
    Ok(out)
}

/// The kernel for `t` in `form`: `tensor(out, chunks)`.
pub fn kernel(t: TensorType, form: Form) -> Kernel {
    match form {
        Form::Wgmma { n, a_in_regs } => wgmma_kernel(t, n, a_in_regs),
        Form::Mma { shape, chains } => mma_kernel(t, shape, chains),
    }
}

fn entry_name(t: TensorType, form: &Form) -> String {
    let suffix = match *form {
        Form::Wgmma { n, a_in_regs } => {
            format!("wgmma_n{n}_{}", if a_in_regs { "rs" } else { "ss" })
        }
        Form::Mma { shape, chains } => format!("mma_{}_c{chains}", shape.shape),
    };
    format!("tensor_{}_{suffix}", t.ptx())
}

/// Instructions per chunk for K: one reset, then whole turns of `UNROLL` (S·K just above 2¹¹).
fn chunk_turns(k: u32) -> u32 {
    (CHUNK_VALUE / (k * UNROLL)).max(1)
}

/// `%r0` thread id, `%r4` chunks, `%r5` chunk counter, `%r6` checksum; the chunk loop's head.
const PROLOGUE_REGS: &str =
    "\t.reg .pred %pz, %pt, %p;\n\t.reg .b32 %r<12>;\n\t.reg .b64 %rd<8>;\n";

/// The kernel's end: the checksum (%r6) to `out[global thread id]`.
const STORE: &str = "\tld.param.u64 %rd3, [out];\n\tcvta.to.global.u64 %rd3, %rd3;\n\
     \tmov.u32 %r7, %ctaid.x;\n\tmov.u32 %r8, %ntid.x;\n\tmad.lo.u32 %r7, %r7, %r8, %r0;\n\
     \tmul.wide.u32 %rd4, %r7, 4;\n\tadd.s64 %rd3, %rd3, %rd4;\n\tst.global.u32 [%rd3], %r6;\n\tret;\n}\n";

/// Head of the chunk loop (after `%pz` false and `%pt` true are set).
const CHUNK_HEAD: &str =
    "\tld.param.u32 %r4, [chunks];\n\tmov.u32 %r5, 0;\n\tmov.u32 %r6, 0;\nCHUNK:\n";

/// Tail of the chunk loop.
const CHUNK_TAIL: &str = "\tadd.u32 %r5, %r5, 1;\n\tsetp.lt.u32 %p, %r5, %r4;\n\t@%p bra CHUNK;\n";

/// Add the accumulators `%d0..` (`regs` of them, of type `acc`) into the checksum %r6: four
/// partial sums (exact: integers below 2²⁴), converted to an integer.
fn push_fold(s: &mut String, acc: &str, regs: u32) {
    let (ty, cvt) = match acc {
        "s32" => ("s32", None),
        "f64" => ("f64", Some("cvt.rzi.u32.f64")),
        _ => ("f32", Some("cvt.rzi.u32.f32")),
    };
    for p in 0..4.min(regs) {
        let _ = writeln!(
            s,
            "\tmov.b{} %q{p}, %d{p};",
            if ty == "f64" { 64 } else { 32 }
        );
    }
    for i in 4..regs {
        let _ = writeln!(s, "\tadd.{ty} %q{}, %q{}, %d{i};", i % 4, i % 4);
    }
    for p in 1..4.min(regs) {
        let _ = writeln!(s, "\tadd.{ty} %q0, %q0, %q{p};");
    }
    match cvt {
        Some(c) => {
            let _ = writeln!(s, "\t{c} %r9, %q0;");
        }
        None => s.push_str("\tmov.b32 %r9, %q0;\n"),
    }
    s.push_str("\tadd.u32 %r6, %r6, %r9;\n");
}

/// The inner loop: `turns` turns (%r10 counts them) of `UNROLL` copies of `step`, kept a loop
/// (ptxas would otherwise unroll it whole, 23 s for one tf32 kernel).
fn push_turns(s: &mut String, step: &str, turns: u32) {
    s.push_str("\tmov.u32 %r10, 0;\nTURN:\n\t.pragma \"nounroll\";\n");
    for _ in 0..UNROLL {
        s.push_str(step);
    }
    let _ = writeln!(
        s,
        "\tadd.u32 %r10, %r10, 1;\n\tsetp.lt.u32 %p, %r10, {turns};\n\t@%p bra TURN;"
    );
}

/// A chunk's end and the kernel's: the accumulators into the checksum, the next chunk, the
/// checksum stored.
fn push_end(s: &mut String, acc: &str, regs: u32) {
    push_fold(s, acc, regs);
    s.push_str(CHUNK_TAIL);
    s.push_str(STORE);
}

fn wgmma_kernel(t: TensorType, n: u32, a_in_regs: bool) -> Kernel {
    let form = Form::Wgmma { n, a_in_regs };
    let entry = entry_name(t, &form);
    let k = wgmma_k(t);
    let regs = n / 2;
    let acc = t.accumulate();
    let turns = chunk_turns(k);
    let mut s = String::from(".version 8.0\n.target sm_90a\n.address_size 64\n\n");
    let _ = writeln!(
        s,
        ".visible .entry {entry}(\n\t.param .u64 out,\n\t.param .u32 chunks\n)\n{{"
    );
    s.push_str(PROLOGUE_REGS);
    let _ = writeln!(
        s,
        "\t.reg .{acc} %d<{regs}>;\n\t.reg .{acc} %q<4>;\n\t.reg .b32 %a<4>;"
    );
    let _ = writeln!(s, "\t.shared .align 1024 .b8 smem[{WGMMA_SMEM}];");
    // Fill A and B with ones: each of the 128 threads writes every 128th word.
    let words = WGMMA_SMEM / 4;
    let _ = writeln!(
        s,
        "\tmov.u32 %r0, %tid.x;\n\tmov.u32 %r1, smem;\n\tshl.b32 %r2, %r0, 2;\n\tadd.u32 %r2, %r2, %r1;\n\
         \tmov.u32 %r3, 0;\nFILL:\n\tst.shared.u32 [%r2], {:#x};\n\tadd.u32 %r2, %r2, {};\n\
         \tadd.u32 %r3, %r3, 1;\n\tsetp.lt.u32 %p, %r3, {};\n\t@%p bra FILL;",
        t.ones_word(),
        WGMMA_BLOCK * 4,
        words / WGMMA_BLOCK
    );
    // The stores are generic-proxy writes; wgmma reads through the async proxy.
    s.push_str("\tbar.sync 0;\n\tfence.proxy.async.shared::cta;\n");
    // Descriptors (no swizzle): start address >> 4, leading byte offset 128 >> 4 at bit 16,
    // stride byte offset 256 >> 4 at bit 32. With every operand 1 the strides only decide
    // which bytes of the filled tiles are read, never a result.
    s.push_str(
        "\tcvt.u64.u32 %rd1, %r1;\n\tshr.u64 %rd1, %rd1, 4;\n\tand.b64 %rd1, %rd1, 16383;\n\
         \tor.b64 %rd1, %rd1, 68719476736;\n\tor.b64 %rd1, %rd1, 524288;\n\tadd.s64 %rd2, %rd1, 128;\n",
    );
    for i in 0..4 {
        let _ = writeln!(s, "\tmov.b32 %a{i}, {:#x};", t.ones_word());
    }
    s.push_str("\tsetp.ne.u32 %pz, %r0, %r0;\n\tsetp.eq.u32 %pt, %r0, %r0;\n");
    s.push_str(CHUNK_HEAD);
    let d = format!(
        "{{{}}}",
        (0..regs)
            .map(|i| format!("%d{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let a = if a_in_regs {
        "{%a0, %a1, %a2, %a3}"
    } else {
        "%rd1"
    };
    // Trailing immediates: scale-a and scale-b (floating point), then transpose flags for the
    // 16-bit types (A's only in the shared-memory form); integer wgmma has none of them.
    let imm = match t {
        TensorType::F16 | TensorType::Bf16 if a_in_regs => ", 1, 1, 0",
        TensorType::F16 | TensorType::Bf16 => ", 1, 1, 0, 0",
        TensorType::I8 => "",
        _ => ", 1, 1",
    };
    let op = format!(
        "wgmma.mma_async.sync.aligned.m64n{n}k{k}.{acc}.{p}.{p}",
        p = t.ptx()
    );
    s.push_str("\twgmma.fence.sync.aligned;\n");
    let _ = writeln!(s, "\t{op} {d}, {a}, %rd2, %pz{imm};");
    push_turns(
        &mut s,
        &format!("\t{op} {d}, {a}, %rd2, %pt{imm};\n"),
        turns,
    );
    s.push_str("\twgmma.commit_group.sync.aligned;\n\twgmma.wait_group.sync.aligned 0;\n");
    push_end(&mut s, acc, regs);
    Kernel {
        t,
        form,
        entry,
        ptx: s,
        block: WGMMA_BLOCK,
        per_chunk: 1 + turns * UNROLL,
        acc_regs: regs,
        k,
        macs: 64 * u64::from(n) * u64::from(k),
        issuers: WGMMA_BLOCK,
        chains: 1,
    }
}

fn mma_kernel(t: TensorType, shape: MmaShape, chains: u32) -> Kernel {
    let form = Form::Mma { shape, chains };
    let entry = entry_name(t, &form);
    let acc = t.accumulate();
    let turns = chunk_turns(shape.k);
    // fp8 mma.sync is PTX 8.4 (sm_89); f64 shapes beyond m8n8k4 are PTX 7.8 (sm_90).
    let target = match (t, shape.shape) {
        (TensorType::E4m3 | TensorType::E5m2, _) => ".version 8.4\n.target sm_89",
        (TensorType::F64, "m8n8k4") => ".version 8.0\n.target sm_80",
        (TensorType::F64, _) => ".version 8.0\n.target sm_90",
        (TensorType::Bf16 | TensorType::Tf32, _) => ".version 8.0\n.target sm_80",
        (_, "m16n8k16" | "m16n8k32") => ".version 8.0\n.target sm_80",
        (_, "m8n8k4") => ".version 8.0\n.target sm_70",
        _ => ".version 8.0\n.target sm_75",
    };
    let mut s = format!("{target}\n.address_size 64\n\n");
    let _ = writeln!(
        s,
        ".visible .entry {entry}(\n\t.param .u64 out,\n\t.param .u32 chunks\n)\n{{"
    );
    s.push_str(PROLOGUE_REGS);
    let dregs = chains * shape.d;
    let in_ty = if t == TensorType::F64 { "f64" } else { "b32" };
    let _ = writeln!(
        s,
        "\t.reg .{acc} %d<{dregs}>;\n\t.reg .{acc} %q<4>;\n\t.reg .{acc} %z;\n\t.reg .{in_ty} %a<{}>, %b<{}>;",
        shape.a, shape.b
    );
    s.push_str("\tmov.u32 %r0, %tid.x;\n");
    let one = if t == TensorType::F64 {
        ONE_F64.to_string()
    } else {
        format!("{:#x}", t.ones_word())
    };
    for i in 0..shape.a {
        let _ = writeln!(s, "\tmov.{in_ty} %a{i}, {one};");
    }
    for i in 0..shape.b {
        let _ = writeln!(s, "\tmov.{in_ty} %b{i}, {one};");
    }
    let zero = match acc {
        "f64" => "0d0000000000000000",
        "f32" => "0f00000000",
        _ => "0",
    };
    let _ = writeln!(s, "\tmov.{acc} %z, {zero};");
    // The predicates are unused here (mma.sync takes C as registers) but keep one prologue.
    s.push_str("\tsetp.ne.u32 %pz, %r0, %r0;\n\tsetp.eq.u32 %pt, %r0, %r0;\n");
    s.push_str(CHUNK_HEAD);
    let list = |base: &str, from: u32, n: u32| {
        format!(
            "{{{}}}",
            (from..from + n)
                .map(|i| format!("%{base}{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let zeros = format!("{{{}}}", vec!["%z"; shape.d as usize].join(", "));
    let a = list("a", 0, shape.a);
    let b = list("b", 0, shape.b);
    let op = format!(
        "mma.sync.aligned.{}.row.col.{acc}.{p}.{p}.{acc}",
        shape.shape,
        p = t.ptx()
    );
    for c in 0..chains {
        let d = list("d", c * shape.d, shape.d);
        let _ = writeln!(s, "\t{op} {d}, {a}, {b}, {zeros};");
    }
    let step: String = (0..chains)
        .map(|c| {
            let d = list("d", c * shape.d, shape.d);
            format!("\t{op} {d}, {a}, {b}, {d};\n")
        })
        .collect();
    push_turns(&mut s, &step, turns);
    push_end(&mut s, acc, dregs);
    Kernel {
        t,
        form,
        entry,
        ptx: s,
        block: MMA_BLOCK,
        per_chunk: 1 + turns * UNROLL,
        acc_regs: dregs,
        k: shape.k,
        macs: u64::from(shape.macs),
        issuers: 32,
        chains,
    }
}

/// The PTX read back: every thread's checksum after `chunks` chunks, recomputed from the tensor
/// instructions the text holds (which accumulators each writes, whether it starts from zero,
/// how often the inner loop runs) under D = A·B + C with every input 1, how many
/// instructions each warp or warpgroup issues and the multiply-accumulates they do (M, N and K
/// read from each instruction's opcode). Independent of the generator's bookkeeping:
/// `Kernel::expected` and `Kernel::macs_per_launch` (the work a record counts) must agree.
pub fn model(ptx: &str, chunks: u32) -> Result<Model, String> {
    let body = ptx.split("CHUNK:\n").nth(1).ok_or("no chunk loop")?;
    let (before, rest) = body.split_once("TURN:\n").ok_or("no inner loop")?;
    let (inner, after) = rest
        .split_once("\t@%p bra TURN;")
        .ok_or("no inner loop end")?;
    let trips: u64 = inner
        .lines()
        .find_map(|l| l.trim().strip_prefix("setp.lt.u32 %p, %r10, "))
        .and_then(|n| n.trim_end_matches(';').parse().ok())
        .ok_or("no inner trip count")?;
    // Each tensor instruction as (destination registers, K, starts from zero, its
    // multiply-accumulates for the whole warp or warpgroup).
    type Ins = (Vec<String>, u64, bool, u64);
    let parse = |text: &str| -> Result<Vec<Ins>, String> {
        let mut out = Vec::new();
        for l in text.lines().map(str::trim) {
            let wg = l.starts_with("wgmma.mma_async");
            if !wg && !l.starts_with("mma.sync") {
                continue;
            }
            let op = l.split_whitespace().next().unwrap_or_default();
            let (m, n, k) = op
                .split('.')
                .find_map(shape_of)
                .ok_or_else(|| format!("no shape in {op}"))?;
            // Volta's f16 m8n8k4 is executed by the warp's four quad-pairs, each its own
            // 8×8×4 product (PTX ISA, "Matrix shape" of mma.m8n8k4 with .f16); f64's m8n8k4
            // is one product per warp.
            let products = if (m, n, k) == (8, 8, 4) && op.contains(".f16") {
                4
            } else {
                1
            };
            let groups: Vec<&str> = l
                .split('{')
                .skip(1)
                .filter_map(|g| g.split('}').next())
                .collect();
            let d = groups
                .first()
                .ok_or("no destination")?
                .split(',')
                .map(|r| r.trim().to_string())
                .collect();
            let reset = if wg {
                l.contains(", %pz")
            } else {
                groups.last().is_some_and(|c| c.contains("%z"))
            };
            out.push((d, k, reset, products * m * n * k));
        }
        Ok(out)
    };
    let (head, inner, tail) = (parse(before)?, parse(inner)?, parse(after)?);
    // Products of ones: each output element of one instruction gains K (Volta's m8n8k4 does
    // four independent 8×8×4 products, each element still gains K). Accumulators carry over
    // from one chunk to the next unless an instruction starts them from zero.
    let mut acc: std::collections::BTreeMap<&str, u64> = Default::default();
    let mut checksum = 0u64;
    let per_chunk = head.len() as u64 + trips * inner.len() as u64 + tail.len() as u64;
    let mut instructions = 0u64;
    let mut macs = 0u64;
    for _ in 0..chunks {
        instructions += per_chunk;
        let turns = std::iter::repeat_n(&inner, trips as usize);
        for ins in std::iter::once(&head)
            .chain(turns)
            .chain(std::iter::once(&tail))
        {
            for (d, k, reset, work) in ins {
                macs += work;
                for r in d {
                    let v = acc.entry(r.as_str()).or_insert(0);
                    *v = if *reset { *k } else { *v + k };
                }
            }
        }
        checksum = checksum.wrapping_add(acc.values().sum::<u64>());
    }
    Ok(Model {
        checksum: (checksum & 0xFFFF_FFFF) as u32,
        instructions,
        macs,
    })
}

/// M, N and K of an opcode part such as `m16n8k16` or `m64n256k16`.
fn shape_of(part: &str) -> Option<(u64, u64, u64)> {
    let (m, rest) = part.strip_prefix('m')?.split_once('n')?;
    let (n, k) = rest.split_once('k')?;
    Some((m.parse().ok()?, n.parse().ok()?, k.parse().ok()?))
}

/// What [`model`] finds a kernel does per thread group (warp or warpgroup).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Model {
    /// Every thread's checksum.
    pub checksum: u32,
    /// Tensor instructions the group issues over all chunks.
    pub instructions: u64,
    /// Multiply-accumulates the group's instructions do over all chunks: M×N×K of each
    /// instruction's shape, read from its opcode.
    pub macs: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_kernels() -> Vec<Kernel> {
        let mut out = Vec::new();
        for cc in [(7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0)] {
            for t in TensorType::ALL {
                for f in forms(cc.0, cc.1, t).unwrap_or_default() {
                    let k = kernel(t, f);
                    if !out
                        .iter()
                        .any(|o: &Kernel| o.entry == k.entry && o.ptx == k.ptx)
                    {
                        out.push(k);
                    }
                }
            }
        }
        out
    }

    #[test]
    fn the_model_of_every_kernel_agrees_with_its_expected_checksum() {
        let kernels = all_kernels();
        assert!(kernels.len() >= 20, "{}", kernels.len());
        for k in &kernels {
            for chunks in [1, 3, 7] {
                let m = model(&k.ptx, chunks).expect("model");
                assert_eq!(m.checksum, k.expected(chunks), "{}", k.entry);
                // The work a record counts is what the instructions do (M×N×K of each opcode
                // the PTX holds, not the generator's own figure): one block, one group.
                let groups = f64::from(k.block / k.issuers);
                let macs = m.macs as f64 * groups;
                assert_eq!(k.macs_per_launch(1, chunks), macs, "{}", k.entry);
            }
            // Every chunk ends just above 2¹¹ per accumulator: exact in any accumulator.
            let value = k.per_chunk * k.k;
            assert!(
                (2048..2048 + 8 * 64).contains(&value),
                "{}: {value}",
                k.entry
            );
        }
    }

    #[test]
    fn a_kernel_that_skips_an_instruction_or_a_reset_fails_the_check() {
        let k = kernel(
            TensorType::F16,
            Form::Wgmma {
                n: 256,
                a_in_regs: false,
            },
        );
        let want = k.expected(3);
        // One instruction of the inner loop deleted.
        let turn = "TURN:\n\t.pragma \"nounroll\";\n";
        let first = k.ptx.find(turn).expect("loop") + turn.len();
        let end = first + k.ptx[first..].find('\n').expect("line") + 1;
        let short = format!("{}{}", &k.ptx[..first], &k.ptx[end..]);
        assert_ne!(model(&short, 3).map(|m| m.checksum), Ok(want));
        // The chunk's reset turned into an accumulate: values grow past the chunk.
        let no_reset = k.ptx.replacen(", %pz", ", %pt", 1);
        assert_ne!(model(&no_reset, 3).map(|m| m.checksum), Ok(want));
        let m = kernel(
            TensorType::Tf32,
            Form::Mma {
                shape: mma("m16n8k8", 16, 8, 8, 4, 2, 4),
                chains: 4,
            },
        );
        let one_chain_less = m.ptx.replacen(
            "%d12, %d13, %d14, %d15}, {%a0",
            "%d0, %d1, %d2, %d3}, {%a0",
            1,
        );
        assert_ne!(
            model(&one_chain_less, 2).map(|m| m.checksum),
            Ok(m.expected(2))
        );
        // A generator that counts a shape's M×N wrong (m16n8k16 as 16×16×16, or Volta's
        // m8n8k4 as one 8×8×4 product per warp): its checksum still agrees, its work does not.
        for (t, shape) in [
            (TensorType::F16, mma("m16n8k16", 16, 16, 16, 4, 2, 4)),
            (TensorType::F16, mma("m8n8k4", 8, 8, 4, 2, 2, 8)),
        ] {
            let wrong = kernel(t, Form::Mma { shape, chains: 2 });
            let m = model(&wrong.ptx, 2).expect("model");
            assert_eq!(m.checksum, wrong.expected(2), "{}", wrong.entry);
            let groups = f64::from(wrong.block / wrong.issuers);
            assert_ne!(
                wrong.macs_per_launch(1, 2),
                m.macs as f64 * groups,
                "{}",
                wrong.entry
            );
        }
    }

    #[test]
    fn peaks_come_from_the_dense_table() {
        let (macs, src) = macs_per_sm(9, 0, TensorType::Bf16, "NVIDIA H100 80GB HBM3").unwrap();
        assert_eq!(macs, 2048);
        // NVIDIA's H100 SXM figure: 989.4 TFLOP/s at 1.83 GHz.
        let p = tensor_peak(132, 1.83e9, "NVML", TensorType::Bf16, macs, &src);
        assert!((p.value / 1e12 - 989.4).abs() < 0.5, "{}", p.value);
        assert!(
            p.basis.contains("2048 dense bf16 tensor MACs/SM/clock"),
            "{}",
            p.basis
        );
        assert!(!src.contains("not yet run"), "{src}");
        let (_, ampere) = macs_per_sm(8, 0, TensorType::F16, "A100").unwrap();
        assert!(ampere.contains("have not yet run on hardware"), "{ampere}");
        assert_eq!(macs_per_sm(9, 0, TensorType::E4m3, "H100").unwrap().0, 4096);
        assert_eq!(macs_per_sm(8, 0, TensorType::F64, "A100").unwrap().0, 64);
        // A100: 312 TFLOP/s f16 = 108 × 1.41 GHz × 1024 × 2.
        let a100 = f64::from(macs_per_sm(8, 0, TensorType::F16, "A100").unwrap().0);
        assert!((108.0 * 1.41e9 * a100 * 2.0 / 1e12 - 311.9).abs() < 0.5);
        let (g, why) = macs_per_sm(8, 9, TensorType::F16, "NVIDIA GeForce RTX 4090").unwrap();
        assert_eq!(g, 256);
        assert!(why.contains("GeForce"));
        assert_eq!(
            macs_per_sm(8, 9, TensorType::I8, "NVIDIA GeForce RTX 4090")
                .unwrap()
                .0,
            1024
        );
        assert!(macs_per_sm(8, 6, TensorType::F64, "A40").is_err());
        assert!(macs_per_sm(8, 0, TensorType::E4m3, "A100").is_err());
    }

    #[test]
    fn forms_follow_the_instruction_sets() {
        assert!(matches!(
            forms(9, 0, TensorType::F16).unwrap()[0],
            Form::Wgmma { n: 256, .. }
        ));
        assert!(matches!(
            forms(9, 0, TensorType::F64).unwrap()[0],
            Form::Mma { .. }
        ));
        assert!(forms(8, 6, TensorType::F64).is_err());
        assert!(forms(8, 0, TensorType::E5m2).is_err());
        assert!(forms(8, 9, TensorType::E5m2).is_ok());
        let e = forms(10, 0, TensorType::F16).unwrap_err();
        assert!(e.contains("tcgen05"), "{e}");
        assert_eq!(TensorType::parse("e4m3").unwrap(), TensorType::E4m3);
        assert_eq!(TensorType::E4m3.name(), "fp8-e4m3");
    }

    /// NVIDIA's assembler, where installed (`scripts/test` fetches it): every kernel assembles
    /// for the target it is written for, without serialised wgmma or spilled accumulators.
    #[test]
    fn ptxas_assembles_every_tensor_kernel_for_its_target() {
        let Some(ptxas) = crate::ptx::ptxas_for_tests() else {
            return;
        };
        let dir = std::env::temp_dir().join(format!("hb-tensor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        for k in all_kernels() {
            let file = dir.join(format!("{}.ptx", k.entry));
            std::fs::write(&file, &k.ptx).expect("write ptx");
            let arch = k
                .ptx
                .lines()
                .find_map(|l| l.strip_prefix(".target "))
                .expect("target")
                .to_string();
            let out = std::process::Command::new(&ptxas)
                .args(["-v", "-arch", &arch, "-o"])
                .arg(dir.join(format!("{}.cubin", k.entry)))
                .arg(&file)
                .output()
                .expect("run ptxas");
            assert!(
                out.status.success(),
                "ptxas -arch {arch} {}: {}",
                k.entry,
                String::from_utf8_lossy(&out.stderr)
            );
            // ptxas says when it must wait for each wgmma before the next (a loss of most of
            // the rate), and when accumulators spill to local memory.
            let info = String::from_utf8_lossy(&out.stderr);
            assert!(!info.contains("serialized"), "{}: {info}", k.entry);
            assert!(
                info.contains(" 0 bytes spill stores"),
                "{}: {info}",
                k.entry
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
