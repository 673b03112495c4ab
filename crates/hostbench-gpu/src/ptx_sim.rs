//! A test-only interpreter for the part of PTX that hostbench's burn module is written in, so the
//! module's arithmetic, indexing and stores are checked against the host's replay on a machine
//! without a GPU (`ptxas` checks only that the text assembles).
//!
//! It follows the PTX ISA's definitions, not the kernels' intent: `mad.lo`/`mul.lo` keep the low
//! half, `mul.wide.u32` the full 64-bit product, `shl` by 32 or more gives 0, `cvt.rn.f32.u32`
//! rounds to nearest, `fma.rn` is the correctly rounded fused multiply-add, `selp d, a, b, p` is
//! `p ? a : b`, and `mov.b64 {lo, hi}, x` unpacks the low word first. Threads run one after
//! another (the burn's kernels share nothing between threads and never synchronise), global
//! memory is a set of buffers whose every access is bounds-checked (a store outside them panics),
//! and `%smid` is whatever the test says block b ran on. An instruction outside the subset panics
//! naming it, so a kernel that grows past the interpreter fails its test instead of passing it.

use std::collections::HashMap;

use crate::ptx::{Arg, KernelArgs};

/// One parsed instruction: optional guard predicate (negated?), the opcode split at dots, the
/// operands as written.
#[derive(Debug, Clone)]
struct Inst {
    guard: Option<(bool, String)>,
    op: Vec<String>,
    operands: Vec<String>,
}

/// One `.entry` of a module.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// Parameters in order: PTX type (`u64`, `f32`, ...) and name (`ptx::entry_param_list`).
    params: Vec<(String, String)>,
    body: Vec<Inst>,
    labels: HashMap<String, usize>,
}

impl Kernel {
    /// The entry `name` of the PTX `module`.
    pub fn parse(module: &str, name: &str) -> Kernel {
        let params =
            crate::ptx::entry_param_list(module, name).unwrap_or_else(|| panic!("no entry {name}"));
        let head = format!(".entry {name}(");
        let rest = &module[module.find(&head).expect("entry") + head.len()..];
        let open = rest.find('{').expect("body opens");
        let end = rest[open..].find("\n}").expect("body closes") + open;
        let mut body = Vec::new();
        let mut labels = HashMap::new();
        for line in rest[open + 1..end].lines().map(str::trim) {
            if line.is_empty() || line.starts_with(".reg") {
                continue;
            }
            if let Some(label) = line.strip_suffix(':') {
                labels.insert(label.to_string(), body.len());
                continue;
            }
            body.push(parse_inst(line));
        }
        Kernel {
            params,
            body,
            labels,
        }
    }
}

fn parse_inst(line: &str) -> Inst {
    let line = line.strip_suffix(';').unwrap_or_else(|| panic!("{line:?}"));
    let (guard, line) = match line.strip_prefix('@') {
        Some(g) => {
            let (p, rest) = g.split_once(char::is_whitespace).expect("guarded op");
            let (neg, p) = p.strip_prefix('!').map_or((false, p), |p| (true, p));
            (Some((neg, p.to_string())), rest.trim())
        }
        None => (None, line),
    };
    let (op, args) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    // Operands split at commas outside braces (`{%lo, %hi}` is one operand).
    let mut operands = Vec::new();
    let (mut depth, mut cur) = (0, String::new());
    for c in args.chars() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                operands.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        operands.push(cur.trim().to_string());
    }
    Inst {
        guard,
        op: op.split('.').map(String::from).collect(),
        operands,
    }
}

/// Global memory: buffers at distinct addresses, each access bounds-checked.
#[derive(Debug, Default)]
pub struct Memory {
    bufs: Vec<(u64, Vec<u8>)>,
}

impl Memory {
    /// A zeroed buffer of `bytes`; returns its device address.
    pub fn alloc(&mut self, bytes: usize) -> u64 {
        let base = self.bufs.last().map_or(0x1000_0000, |(b, v)| {
            (b + v.len() as u64 + 0xFFFF) & !0xFFFF
        });
        self.bufs.push((base, vec![0; bytes]));
        base
    }

    /// The buffer at `addr`.
    pub fn buf(&mut self, addr: u64) -> &mut Vec<u8> {
        &mut self
            .bufs
            .iter_mut()
            .find(|(b, _)| *b == addr)
            .expect("a buffer")
            .1
    }

    fn slice(&mut self, addr: u64, len: usize) -> &mut [u8] {
        for (base, v) in &mut self.bufs {
            if addr >= *base && addr + len as u64 <= *base + v.len() as u64 {
                let off = (addr - *base) as usize;
                return &mut v[off..off + len];
            }
        }
        panic!("access of {len} bytes at {addr:#x} outside every buffer");
    }
}

/// One thread's registers, predicates and ids.
struct Thread<'a> {
    regs: HashMap<&'a str, u64>,
    ctaid: u32,
    ntid: u32,
    tid: u32,
    nctaid: u32,
    smid: u32,
}

impl<'a> Thread<'a> {
    /// An operand's value: a register, a special register or an integer immediate.
    fn get(&self, o: &str) -> u64 {
        match o {
            "%ctaid.x" => u64::from(self.ctaid),
            "%ntid.x" => u64::from(self.ntid),
            "%tid.x" => u64::from(self.tid),
            "%nctaid.x" => u64::from(self.nctaid),
            "%smid" => u64::from(self.smid),
            r if r.starts_with('%') => *self
                .regs
                .get(r)
                .unwrap_or_else(|| panic!("{r} read before it was written")),
            imm => imm
                .parse::<i64>()
                .unwrap_or_else(|_| panic!("operand {imm:?}")) as u64,
        }
    }

    fn set(&mut self, r: &'a str, v: u64) {
        assert!(r.starts_with('%'), "destination {r:?}");
        self.regs.insert(r, v);
    }

    /// `[reg+off]` or `[reg]`: the address.
    fn address(&self, o: &str) -> u64 {
        let inner = o
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
            .unwrap_or_else(|| panic!("address {o:?}"));
        match inner.split_once('+') {
            Some((r, off)) => self
                .get(r)
                .wrapping_add(off.parse::<u64>().expect("offset")),
            None => self.get(inner),
        }
    }
}

fn width(ty: &str) -> u32 {
    ty[1..].parse().unwrap_or_else(|_| panic!("type {ty}"))
}

fn mask(v: u64, bits: u32) -> u64 {
    if bits >= 64 {
        v
    } else {
        v & ((1u64 << bits) - 1)
    }
}

fn f32_of(v: u64) -> f32 {
    f32::from_bits(v as u32)
}

fn f64_of(v: u64) -> f64 {
    f64::from_bits(v)
}

/// The bits an argument is passed as, after checking it against the parameter's declared type.
fn arg_bits(a: &Arg, ty: &str, name: &str) -> u64 {
    assert_eq!(
        a.ptx_type(),
        ty,
        "argument {name}: {a:?} for a .{ty} parameter"
    );
    a.bits()
}

/// Run `k` over `grid` blocks of `block` threads with `args`, block b on SM `smid(b)`.
pub fn launch(
    k: &Kernel,
    grid: u32,
    block: u32,
    args: &KernelArgs,
    mem: &mut Memory,
    smid: impl Fn(u32) -> u32,
) {
    assert_eq!(args.args().len(), k.params.len(), "argument count");
    let params: HashMap<&str, u64> = k
        .params
        .iter()
        .zip(args.args())
        .map(|((ty, name), a)| (name.as_str(), arg_bits(a, ty, name)))
        .collect();
    for b in 0..grid {
        for t in 0..block {
            let mut th = Thread {
                regs: HashMap::new(),
                ctaid: b,
                ntid: block,
                tid: t,
                nctaid: grid,
                smid: smid(b),
            };
            run_thread(k, &params, &mut th, mem);
        }
    }
}

fn run_thread<'a>(
    k: &'a Kernel,
    params: &HashMap<&str, u64>,
    th: &mut Thread<'a>,
    mem: &mut Memory,
) {
    let mut pc = 0;
    while pc < k.body.len() {
        let inst = &k.body[pc];
        pc += 1;
        if let Some((neg, p)) = &inst.guard {
            if (th.get(p) != 0) == *neg {
                continue;
            }
        }
        let op: Vec<&str> = inst.op.iter().map(String::as_str).collect();
        let o: Vec<&'a str> = inst.operands.iter().map(String::as_str).collect();
        let ty = *op.last().expect("opcode");
        match op.as_slice() {
            ["ret"] => return,
            ["bra"] => pc = k.labels[o[0]],
            ["ld", "param", _] => {
                let name = o[1].trim_matches(|c| c == '[' || c == ']');
                th.set(o[0], params[name]);
            }
            ["ld", "global", _] => {
                let bytes = (width(ty) / 8) as usize;
                let mut b = [0u8; 8];
                b[..bytes].copy_from_slice(mem.slice(th.address(o[1]), bytes));
                th.set(o[0], u64::from_le_bytes(b));
            }
            ["st", "global", _] => {
                let bytes = (width(ty) / 8) as usize;
                let v = th.get(o[1]).to_le_bytes();
                mem.slice(th.address(o[0]), bytes)
                    .copy_from_slice(&v[..bytes]);
            }
            ["mov", "b64"] if o[0].starts_with('{') => {
                let v = th.get(o[1]);
                let halves: Vec<&'a str> = o[0]
                    .trim_matches(|c| c == '{' || c == '}')
                    .split(',')
                    .map(str::trim)
                    .collect();
                th.set(halves[0], v & 0xFFFF_FFFF);
                th.set(halves[1], v >> 32);
            }
            ["mov", _] => th.set(o[0], mask(th.get(o[1]), width(ty))),
            ["cvta", "to", "global", "u64"] => th.set(o[0], th.get(o[1])),
            ["mad", "lo", "u32"] => {
                let v = th
                    .get(o[1])
                    .wrapping_mul(th.get(o[2]))
                    .wrapping_add(th.get(o[3]));
                th.set(o[0], mask(v, 32));
            }
            ["mul", "lo", "u32"] => th.set(o[0], mask(th.get(o[1]).wrapping_mul(th.get(o[2])), 32)),
            ["mul", "wide", "u32"] => th.set(o[0], mask(th.get(o[1]), 32) * mask(th.get(o[2]), 32)),
            ["add", _] => {
                let w = width(ty);
                th.set(o[0], mask(th.get(o[1]).wrapping_add(th.get(o[2])), w));
            }
            ["and", _] => th.set(o[0], mask(th.get(o[1]) & th.get(o[2]), width(ty))),
            ["xor", _] => th.set(o[0], mask(th.get(o[1]) ^ th.get(o[2]), width(ty))),
            ["shl", _] | ["shr", _] => {
                let w = width(ty);
                let (a, n) = (mask(th.get(o[1]), w), mask(th.get(o[2]), 32));
                let v = match (op[0], n >= u64::from(w)) {
                    (_, true) => 0,
                    ("shl", false) => a << n,
                    (_, false) => a >> n,
                };
                th.set(o[0], mask(v, w));
            }
            ["neg", "s32"] => th.set(o[0], mask((th.get(o[1]) as u32).wrapping_neg().into(), 32)),
            ["selp", _] => {
                let v = if th.get(o[3]) != 0 {
                    th.get(o[1])
                } else {
                    th.get(o[2])
                };
                th.set(o[0], v);
            }
            ["setp", cmp, t] => {
                let w = width(t);
                let (a, b) = (mask(th.get(o[1]), w), mask(th.get(o[2]), w));
                let r = match *cmp {
                    "eq" => a == b,
                    "ne" => a != b,
                    "lt" => a < b,
                    "ge" => a >= b,
                    other => panic!("setp.{other}"),
                };
                th.set(o[0], u64::from(r));
            }
            ["cvt", "rn", "f32", "u32"] => {
                th.set(o[0], u64::from((th.get(o[1]) as u32 as f32).to_bits()))
            }
            ["cvt", "rn", "f64", "u32"] => th.set(o[0], f64::from(th.get(o[1]) as u32).to_bits()),
            ["cvt", "u32", "u64"] => th.set(o[0], mask(th.get(o[1]), 32)),
            ["cvt", "u64", "u32"] => th.set(o[0], mask(th.get(o[1]), 32)),
            ["fma", "rn", "f32"] => {
                let (a, b, c) = (
                    f32_of(th.get(o[1])),
                    f32_of(th.get(o[2])),
                    f32_of(th.get(o[3])),
                );
                th.set(o[0], u64::from(a.mul_add(b, c).to_bits()));
            }
            ["fma", "rn", "f64"] => {
                let (a, b, c) = (
                    f64_of(th.get(o[1])),
                    f64_of(th.get(o[2])),
                    f64_of(th.get(o[3])),
                );
                th.set(o[0], a.mul_add(b, c).to_bits());
            }
            _ => panic!(
                "instruction outside the interpreted subset: {}",
                inst.op.join(".")
            ),
        }
    }
}
