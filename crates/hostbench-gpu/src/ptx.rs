//! CUDA kernels as PTX text, and the marshalling of their arguments for `cuLaunchKernel`.
//!
//! PTX (ISA 6.0, target sm_50) is JIT-compiled by the driver itself (`cuModuleLoadData`), so a
//! machine with only the driver — no toolkit, no NVRTC — runs these kernels, and any newer GPU
//! accepts the old target. The kernels mirror the OpenCL ones (see `kernels` and `replay`):
//! scalar multiply-add chains per thread with one folded checksum, and grid-stride read, write and
//! copy loops over 32-bit words or bytes.
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
pub const UNROLL: u32 = 8;

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

/// The entry point name of the compute kernel for `d`.
pub fn compute_entry(d: Dtype) -> String {
    format!("compute_{}", d.name())
}

/// `compute_<dtype>(out, a, b, iters)`: `chains` scalar chains per thread; `None` for dtypes
/// without a PTX kernel (f16 and i8 need sm_53 half2 / sm_61 dp4a paths not written here).
pub fn compute_ptx(d: Dtype, chains: u32) -> Option<String> {
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
    s.push_str("\tmov.u32 %r1, 0;\nLOOP:\n");
    for _ in 0..UNROLL {
        for j in 0..chains {
            let _ = writeln!(s, "\t{op} %x{j}, %x{j}, %va, %vb;");
        }
    }
    s.push_str("\tadd.u32 %r1, %r1, 1;\n\tsetp.lt.u32 %p, %r1, %r0;\n\t@%p bra LOOP;\n");
    s.push_str("\tmov.u32 %r7, 0;\n");
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
    s.push_str(
        "\tcvta.to.global.u64 %rd0, %rd0;\n\tmul.wide.u32 %rd1, %r4, 4;\n\tadd.s64 %rd2, %rd0, %rd1;\n\
         \tst.global.u32 [%rd2], %r7;\n\tret;\n}\n",
    );
    Some(s)
}

/// Grid-stride memory kernels for elements of `elem` bytes (4 or 1):
/// `bw_read_<e>(src, out, n)`, `bw_write_<e>(dst, n, seed)`, `bw_copy_<e>(src, dst, n)`.
pub fn memory_ptx(elem: usize) -> String {
    let (suffix, ld, st, shift) = if elem == 4 {
        (
            "u32",
            "ld.global.u32",
            "st.global.u32",
            "\tshl.b64 %rd5, %rd3, 2;\n",
        )
    } else {
        (
            "u8",
            "ld.global.u8",
            "st.global.u8",
            "\tmov.b64 %rd5, %rd3;\n",
        )
    };
    // i = global thread id, stride = all threads; %rd6 keeps the id for the read's output.
    let prologue = "\t.reg .pred %p;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<8>;\n";
    let index = "\tmov.u32 %r0, %ctaid.x;\n\tmov.u32 %r1, %ntid.x;\n\tmov.u32 %r2, %tid.x;\n\
                 \tmov.u32 %r3, %nctaid.x;\n\tmul.wide.u32 %rd3, %r0, %r1;\n\tcvt.u64.u32 %rd4, %r2;\n\
                 \tadd.s64 %rd3, %rd3, %rd4;\n\tmov.b64 %rd6, %rd3;\n\tmul.wide.u32 %rd4, %r1, %r3;\n";
    let step =
        "\tadd.s64 %rd3, %rd3, %rd4;\n\tsetp.lt.u64 %p, %rd3, %rd2;\n\t@%p bra LOOP;\nDONE:\n";
    let mut s = String::from(HEADER);
    let _ = write!(
        s,
        ".visible .entry bw_read_{suffix}(\n\t.param .u64 src,\n\t.param .u64 out,\n\t.param .u64 n\n)\n{{\n{prologue}\
         \tld.param.u64 %rd0, [src];\n\tld.param.u64 %rd1, [out];\n\tld.param.u64 %rd2, [n];\n\
         \tcvta.to.global.u64 %rd0, %rd0;\n\tcvta.to.global.u64 %rd1, %rd1;\n{index}\
         \tmov.u32 %r4, 0;\n\tsetp.ge.u64 %p, %rd3, %rd2;\n\t@%p bra DONE;\nLOOP:\n{shift}\
         \tadd.s64 %rd5, %rd0, %rd5;\n\t{ld} %r5, [%rd5];\n\tadd.u32 %r4, %r4, %r5;\n{step}\
         \tshl.b64 %rd5, %rd6, 2;\n\tadd.s64 %rd5, %rd1, %rd5;\n\tst.global.u32 [%rd5], %r4;\n\tret;\n}}\n\n"
    );
    let _ = write!(
        s,
        ".visible .entry bw_write_{suffix}(\n\t.param .u64 dst,\n\t.param .u64 n,\n\t.param .u32 seed\n)\n{{\n{prologue}\
         \tld.param.u64 %rd0, [dst];\n\tld.param.u64 %rd2, [n];\n\tld.param.u32 %r6, [seed];\n\
         \tcvta.to.global.u64 %rd0, %rd0;\n{index}\
         \tsetp.ge.u64 %p, %rd3, %rd2;\n\t@%p bra DONE;\nLOOP:\n{shift}\
         \tadd.s64 %rd5, %rd0, %rd5;\n\tcvt.u32.u64 %r5, %rd3;\n\tadd.u32 %r5, %r5, %r6;\n\t{st} [%rd5], %r5;\n{step}\
         \tret;\n}}\n\n"
    );
    let _ = write!(
        s,
        ".visible .entry bw_copy_{suffix}(\n\t.param .u64 src,\n\t.param .u64 dst,\n\t.param .u64 n\n)\n{{\n{prologue}\
         \tld.param.u64 %rd0, [src];\n\tld.param.u64 %rd1, [dst];\n\tld.param.u64 %rd2, [n];\n\
         \tcvta.to.global.u64 %rd0, %rd0;\n\tcvta.to.global.u64 %rd1, %rd1;\n{index}\
         \tsetp.ge.u64 %p, %rd3, %rd2;\n\t@%p bra DONE;\nLOOP:\n{shift}\
         \tadd.s64 %rd7, %rd0, %rd5;\n\t{ld} %r5, [%rd7];\n\tadd.s64 %rd7, %rd1, %rd5;\n\t{st} [%rd7], %r5;\n{step}\
         \tret;\n}}\n"
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

    fn bytes(&self) -> Vec<u8> {
        match *self {
            Arg::U64(v) => v.to_le_bytes().to_vec(),
            Arg::U32(v) => v.to_le_bytes().to_vec(),
            Arg::I32(v) => v.to_le_bytes().to_vec(),
            Arg::F32(v) => v.to_le_bytes().to_vec(),
            Arg::F64(v) => v.to_le_bytes().to_vec(),
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
        let mut cell = [0u8; 8];
        let b = a.bytes();
        cell[..b.len()].copy_from_slice(&b);
        // Little-endian hosts (x86-64, AArch64): the value's bytes start the cell.
        self.cells.push(u64::from_le_bytes(cell));
        self.args.push(a);
    }

    /// Replace argument `i` in place (its pointer stays the same).
    pub fn set(&mut self, i: usize, a: Arg) {
        if let (Some(slot), Some(cell)) = (self.args.get_mut(i), self.cells.get_mut(i)) {
            let mut bytes = [0u8; 8];
            let b = a.bytes();
            bytes[..b.len()].copy_from_slice(&b);
            *cell = u64::from_le_bytes(bytes);
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
    let start = ptx.find(&format!(".entry {name}("))?;
    let rest = &ptx[start..];
    let close = rest.find(')')?;
    Some(
        rest[..close]
            .split(".param")
            .skip(1)
            .filter_map(|p| p.split_whitespace().next())
            .map(|t| t.trim_start_matches('.').to_string())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small PTX lint: header, balanced braces, every register used is declared, every branch
    /// target is a label in the same entry.
    fn lint(ptx: &str) -> Result<(), String> {
        for h in [".version 6.0", ".target sm_50", ".address_size 64"] {
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
        for d in [Dtype::F32, Dtype::F64, Dtype::I32] {
            let p = compute_ptx(d, 8).unwrap();
            lint(&p).unwrap_or_else(|e| panic!("{d:?}: {e}\n{p}"));
            assert_eq!(p.matches("%x7, %x7, %va, %vb").count(), UNROLL as usize);
        }
        assert!(compute_ptx(Dtype::F16, 8).is_none() && compute_ptx(Dtype::I8, 8).is_none());
        for e in [4, 1] {
            let p = memory_ptx(e);
            lint(&p).unwrap_or_else(|err| panic!("elem {e}: {err}\n{p}"));
        }
        lint(EMPTY_PTX).unwrap();
        // The lint catches what it is for.
        assert!(lint(&EMPTY_PTX.replace("ret;", "mov.u32 %r9, 0;")).is_err());
        assert!(lint(&EMPTY_PTX.replace("ret;", "bra NOWHERE;")).is_err());
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
