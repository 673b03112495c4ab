//! Peak-throughput kernels: `C` independent chains of one arithmetic instruction per ISA and dtype.
//!
//! Why this shape: a chain of dependent FMAs retires one result per *latency* cycles, so a core
//! with `p` FMA pipes of latency `l` needs at least `p × l` independent chains to keep every pipe
//! busy (8 on Zen 3/4 AVX2). The right count differs per core, so it is a const generic here and
//! `engine::tune_chains` picks it at run time by measuring, rather than from a table.
//!
//! Why inline `asm!` per instruction rather than intrinsics: an integer add chain has a closed form
//! (`acc + n·c`) that LLVM's scalar evolution happily substitutes, deleting the loop. Each asm
//! statement is opaque and has side effects as far as the optimiser knows, so every instruction
//! written here is executed, in this order, while LLVM still allocates the registers.
//!
//! Every call is validated: the chains start at distinct values, step by exactly 1 (FP values stay
//! small integers, exactly representable in f32 for the ≤ 2^22 iterations of one call) and the
//! final value of every lane of every chain is compared with its closed form. A kernel that did
//! not run, ran too few iterations or computed wrongly fails the case.

use std::sync::Arc;

use hostbench_core::BenchError;

use crate::isa::{Dtype, Isa};

/// Each loop iteration runs every chain this many times (amortises the loop's own instructions).
pub const UNROLL: u64 = 4;
/// Blocks per kernel call at most (fewer where a chain would leave its type's exact range, see
/// `Step::max_blocks`): a validated call every few milliseconds.
pub const MAX_BLOCKS_PER_CALL: u64 = 1 << 20;
/// Blocks a half-precision chain climbs before it turns and descends: from -2048 (plus the chain's
/// index) to at most +2048, binary16's exact range for integers, and back. Turning inside the
/// kernel keeps calls as long as the other dtypes' (a per-call check every few microseconds, as
/// capping the call at one climb would need, cost 5 % of the rate).
pub const F16_LEG: u64 = 1000;

/// Blocks a turning chain is above its start after `n` blocks: a triangle wave of legs `leg`.
pub fn leg_position(n: u64, leg: u64) -> u64 {
    let phase = n % (2 * leg);
    if phase <= leg {
        phase
    } else {
        2 * leg - phase
    }
}

/// What one kernel instruction is, for the peak formula.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// Fused multiply-add: 2 operations per lane.
    Fma,
    /// Separate multiply and add instructions (ISAs without FMA): 1 operation per lane each.
    MulAdd,
    /// Vector integer add: 1 operation per lane.
    VecIntAdd,
    /// Scalar integer add in a general-purpose register.
    ScalarIntAdd,
    /// Dot-product instruction (VNNI, `vdpbf16ps`): each input element takes part in one
    /// multiply-accumulate, counted as 2 operations like an FMA.
    Dot,
    /// AMX tile multiply: 16 × 16 results, each a dot product of 64 i8 or 32 bf16 pairs; every
    /// multiply-accumulate counts 2 operations.
    Tile,
    /// Arm matrix multiply-accumulate (`smmla`, `bfmmla`): 2 × 2 results in one 128-bit register,
    /// each a dot product of 8 i8 or 4 bf16 pairs; every multiply-accumulate counts 2 operations.
    MatMul,
}

impl OpKind {
    pub fn ops_per_lane(self) -> f64 {
        match self {
            Self::Fma | Self::Dot | Self::Tile | Self::MatMul => 2.0,
            Self::MulAdd | Self::VecIntAdd | Self::ScalarIntAdd => 1.0,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Self::Fma => "FMA",
            Self::MulAdd => "mul+add",
            Self::VecIntAdd => "vector int add",
            Self::ScalarIntAdd => "scalar int add",
            Self::Dot => "dot product",
            Self::Tile => "tile multiply",
            Self::MatMul => "matrix multiply",
        }
    }
}

/// Element types the kernels run on, with the closed form a chain must reach.
pub trait Elem: Copy + PartialEq + std::fmt::Debug + Send + Sync + 'static {
    /// Integers below this bound are exact in the type (2^24 for f32); `None` where a chain
    /// never leaves its exact range however long it climbs (integers wrap exactly, half
    /// precision turns).
    const EXACT_BELOW: Option<u64> = None;
    fn from_index(j: usize) -> Self;
    fn one() -> Self;
    fn zero() -> Self;
    /// `self + n` (wrapping for integers).
    fn advanced(self, n: u64) -> Self;
}

macro_rules! float_elem {
    ($t:ty) => {
        impl Elem for $t {
            const EXACT_BELOW: Option<u64> = Some(1 << <$t>::MANTISSA_DIGITS);
            fn from_index(j: usize) -> Self {
                j as $t
            }
            fn one() -> Self {
                1.0
            }
            fn zero() -> Self {
                0.0
            }
            fn advanced(self, n: u64) -> Self {
                self + n as $t
            }
        }
    };
}
float_elem!(f64);
float_elem!(f32);

macro_rules! int_elem {
    ($t:ty) => {
        impl Elem for $t {
            fn from_index(j: usize) -> Self {
                (j as u64).wrapping_mul(37) as $t
            }
            fn one() -> Self {
                1
            }
            fn zero() -> Self {
                0
            }
            fn advanced(self, n: u64) -> Self {
                (self as i64 as u64).wrapping_add(n) as $t
            }
        }
    };
}
int_elem!(i64);
int_elem!(i32);
int_elem!(i16);
int_elem!(i8);

/// IEEE binary16 as its bits: Rust has no stable `f16`. The half-precision chains hold integers
/// of magnitude at most 2048, every one of which binary16 represents exactly.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub struct F16(pub u16);

impl F16 {
    /// Largest magnitude up to which every integer is exact in binary16 (11 significant bits).
    pub const EXACT: i64 = 2048;

    /// The binary16 encoding of an integer with `|v| <= EXACT`.
    pub fn from_int(v: i64) -> F16 {
        debug_assert!(v.abs() <= Self::EXACT, "{v} is not exact in binary16");
        if v == 0 {
            return F16(0);
        }
        let sign: u16 = if v < 0 { 0x8000 } else { 0 };
        let m = v.unsigned_abs();
        let e = 63 - m.leading_zeros() as u64; // floor(log2 m), at most 11
        let mantissa = ((m << 10) >> e) & 0x3ff;
        F16(sign | ((e + 15) << 10) as u16 | mantissa as u16)
    }

    /// The value of an integral binary16 number (what `from_int` makes).
    pub fn to_int(self) -> i64 {
        let exp = i32::from((self.0 >> 10) & 0x1f);
        let mantissa = f64::from(self.0 & 0x3ff);
        let magnitude = if exp == 0 {
            mantissa * 2f64.powi(-24)
        } else {
            (1024.0 + mantissa) * 2f64.powi(exp - 25)
        };
        let v = magnitude as i64;
        if self.0 & 0x8000 != 0 {
            -v
        } else {
            v
        }
    }
}

impl std::fmt::Debug for F16 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (f16 {:#06x})", self.to_int(), self.0)
    }
}

impl Elem for F16 {
    /// Chains start at the bottom of the exact range and climb through it.
    fn from_index(j: usize) -> Self {
        F16::from_int(j as i64 - F16::EXACT)
    }
    fn one() -> Self {
        F16(0x3c00)
    }
    fn zero() -> Self {
        F16(0)
    }
    fn advanced(self, n: u64) -> Self {
        F16::from_int(self.to_int() + n as i64)
    }
}

/// Signature shared by every generated kernel: run `blocks × UNROLL` iterations of `init.len()`
/// chains; `step` is added (or FMA'd with multiplier `mul`) each iteration; results go to `out`.
type RawKernel<T> = unsafe fn(blocks: u64, init: &[T], step: T, mul: T, out: &mut [T]);

/// Generate one kernel over const-generic chain count `C`. `$even`/`$odd` are the instruction
/// templates for even and odd chains (the same for FMA and add kernels; multiply on even and add
/// on odd chains for mul+add kernels, so both port groups are fed). Unused operands are named in
/// an assembler comment because `asm!` rejects unused operands.
macro_rules! kernel {
    ($name:ident, $feat:literal, $V:ty, $T:ty, $L:literal, $class:ident, $even:literal, $odd:literal) => {
        #[target_feature(enable = $feat)]
        pub(super) fn $name<const C: usize>(blocks: u64, init: &[$T], step: $T, mul: $T, out: &mut [$T]) {
            // SAFETY: `[$T; $L]` and `$V` have the same size and every bit pattern is valid.
            let splat = |x: $T| unsafe { core::mem::transmute::<[$T; $L], $V>([x; $L]) };
            let m = splat(mul);
            let a = splat(step);
            let mut acc: [$V; C] = core::array::from_fn(|j| splat(init[j]));
            for _ in 0..blocks {
                for _ in 0..UNROLL {
                    for (j, acc) in acc.iter_mut().enumerate() {
                        if j % 2 == 0 {
                            // SAFETY: register-only arithmetic the enabled target feature provides.
                            unsafe {
                                core::arch::asm!($even, acc = inout($class) *acc,
                                    m = in($class) m, a = in($class) a, options(nomem, nostack))
                            }
                        } else {
                            // SAFETY: as above.
                            unsafe {
                                core::arch::asm!($odd, acc = inout($class) *acc,
                                    m = in($class) m, a = in($class) a, options(nomem, nostack))
                            }
                        }
                    }
                }
            }
            for (j, v) in acc.iter().enumerate() {
                // SAFETY: same-size plain-data reinterpretation, as in `splat`.
                let lanes = unsafe { core::mem::transmute::<$V, [$T; $L]>(*v) };
                out[j * $L..(j + 1) * $L].copy_from_slice(&lanes);
            }
        }
    };
}

// The instantiations, one file per architecture.
#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(target_arch = "aarch64")]
mod arm;

/// One validated call of a kernel: run that many blocks, then check every chain's result.
pub type KernelCall = Arc<dyn Fn(u64) -> Result<(), BenchError> + Send + Sync>;

/// A runnable, validated kernel for one (ISA, dtype, chain count).
#[derive(Clone)]
pub struct Kernel {
    pub isa: Isa,
    pub dtype: Dtype,
    pub chains: usize,
    pub lanes: usize,
    pub kind: OpKind,
    /// The most blocks one validated call may run before its values leave the exact range.
    max_blocks: u64,
    call: KernelCall,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Kernel({} {} x{} chains)",
            self.isa, self.dtype, self.chains
        )
    }
}

impl Kernel {
    /// Operations one iteration (every chain once) performs.
    pub fn ops_per_iteration(&self) -> f64 {
        (self.chains * self.lanes) as f64 * self.kind.ops_per_lane()
    }

    /// Operations one block (`UNROLL` iterations) performs: the unit work is counted in.
    pub fn ops_per_block(&self) -> f64 {
        self.ops_per_iteration() * UNROLL as f64
    }

    /// Run `blocks × UNROLL` iterations, validating every call's result.
    pub fn run(&self, blocks: u64) -> Result<(), BenchError> {
        let mut left = blocks;
        while left > 0 {
            let now = left.min(self.max_blocks);
            (self.call)(now)?;
            left -= now;
        }
        Ok(())
    }
}

/// Chain counts worth trying: enough to cover latency × pipes, few enough to stay in registers.
pub fn chain_candidates(isa: Isa, dtype: Dtype) -> &'static [usize] {
    match isa {
        // Accumulator tiles: eight tile registers hold at most six besides the two sources.
        Isa::Amx | Isa::AmxFp16 => crate::amx::CHAINS,
        // 32 vector registers on AVX-512 and AArch64.
        Isa::Avx512
        | Isa::Neon
        | Isa::Avx512Vnni
        | Isa::Avx512Bf16
        | Isa::Avx512Fp16
        | Isa::NeonDotprod
        | Isa::I8mm
        | Isa::ArmBf16 => &[4, 8, 12, 16, 20, 24],
        Isa::Scalar if !dtype.is_float() && cfg!(target_arch = "x86_64") => &[2, 4, 6, 8],
        Isa::Scalar if !dtype.is_float() => &[2, 4, 6, 8, 12],
        _ => &[2, 4, 6, 8, 10, 12],
    }
}

/// What one instruction of this kernel is.
pub fn op_kind(isa: Isa, dtype: Dtype) -> OpKind {
    match isa {
        Isa::Amx | Isa::AmxFp16 => return OpKind::Tile,
        Isa::AvxVnni | Isa::Avx512Vnni | Isa::Avx512Bf16 | Isa::NeonDotprod => return OpKind::Dot,
        Isa::I8mm | Isa::ArmBf16 => return OpKind::MatMul,
        _ => {}
    }
    match (isa, dtype.is_float()) {
        (Isa::Scalar, false) => OpKind::ScalarIntAdd,
        (_, false) => OpKind::VecIntAdd,
        (Isa::Sse2, true) => OpKind::MulAdd,
        (Isa::Scalar, true) if cfg!(target_arch = "x86_64") => OpKind::MulAdd,
        (_, true) => OpKind::Fma,
    }
}

/// What every instruction of a kernel does: both sources are splats of `operand`, after which each
/// accumulator lane (there are `acc_lanes` per chain) has advanced by `gain`. For the adds and
/// FMAs the operand is 1 and the gain 1; a dot product of all-ones elements gains the number of
/// products it sums into one lane (4 for `vpdpbusd`, 2 for `vpdpwssd` and `vdpbf16ps`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Step<T> {
    pub operand: T,
    pub gain: u64,
    pub acc_lanes: usize,
    /// Chains that turn every this many blocks (half precision), instead of climbing for ever.
    pub leg: Option<u64>,
}

fn wrap<T: Elem>(
    raw: RawKernel<T>,
    isa: Isa,
    dtype: Dtype,
    chains: usize,
    step: Step<T>,
) -> KernelCall {
    let mul_chains = op_kind(isa, dtype) == OpKind::MulAdd;
    let lanes = step.acc_lanes;
    Arc::new(move |blocks: u64| {
        let init: Vec<T> = (0..chains).map(T::from_index).collect();
        let mut out = vec![T::zero(); chains * lanes];
        // SAFETY: `Kernel::new` only builds kernels whose ISA `Isa::supports` confirmed at run
        // time, and `init`/`out` have the lengths the kernel indexes (chains, chains × lanes).
        unsafe { raw(blocks, &init, step.operand, step.operand, &mut out) };
        let n = blocks * UNROLL;
        // Instructions' worth of climb: all of them, or where the triangle wave stands.
        let climbed = match step.leg {
            Some(leg) => leg_position(blocks, leg) * UNROLL,
            None => n,
        };
        for j in 0..chains {
            // Multiply chains (×1.0) keep their start value; every other chain advanced by the
            // climbed instructions' gain.
            let expect = if mul_chains && j % 2 == 0 {
                init[j]
            } else {
                init[j].advanced(climbed * step.gain)
            };
            if let Some(bad) = out[j * lanes..(j + 1) * lanes]
                .iter()
                .find(|v| **v != expect)
            {
                return Err(BenchError::Validation(format!(
                    "{isa} {dtype} kernel: chain {j} ended at {bad:?}, expected {expect:?} after {n} iterations"
                )));
            }
        }
        Ok(())
    })
}

impl<T: Elem> Step<T> {
    /// Blocks one validated call may run: where the accumulator type is exact only below a
    /// bound, a chain (starting below 32) climbs at most half of it in one call. For f32 that is
    /// 2^23: 2^20 blocks of single steps, 2^19 of `bfmmla`'s 4 per lane (beyond 2^24 its
    /// round-to-odd shows).
    fn max_blocks(&self) -> u64 {
        match T::EXACT_BELOW {
            Some(bound) => MAX_BLOCKS_PER_CALL.min(bound / 2 / (UNROLL * self.gain)),
            None => MAX_BLOCKS_PER_CALL,
        }
    }
}

/// Pick the monomorphised kernel for a chain count from `chain_candidates`.
macro_rules! by_chains {
    ($m:ident :: $f:ident, $chains:expr, $isa:expr, $dtype:expr) => {
        match $chains {
            2 => $m::$f::<2> as RawKernel<_>,
            4 => $m::$f::<4> as RawKernel<_>,
            6 => $m::$f::<6> as RawKernel<_>,
            8 => $m::$f::<8> as RawKernel<_>,
            10 => $m::$f::<10> as RawKernel<_>,
            12 => $m::$f::<12> as RawKernel<_>,
            16 => $m::$f::<16> as RawKernel<_>,
            20 => $m::$f::<20> as RawKernel<_>,
            24 => $m::$f::<24> as RawKernel<_>,
            other => {
                return Err(BenchError::invalid(format!(
                    "{} {}: unsupported chain count {other}",
                    $isa, $dtype
                )))
            }
        }
    };
}

impl Kernel {
    /// Build the kernel for (isa, dtype, chains), refusing what this CPU cannot run.
    pub fn new(isa: Isa, dtype: Dtype, chains: usize) -> Result<Self, BenchError> {
        isa.supports(dtype)?;
        let lanes = isa.lanes(dtype);
        macro_rules! make {
            ($m:ident :: $f:ident, $t:ty) => {
                make!($m::$f, $t, <$t as Elem>::one(), 1, lanes, None)
            };
            ($m:ident :: $f:ident, $t:ty, $operand:expr, $gain:expr, $acc_lanes:expr) => {
                make!($m::$f, $t, $operand, $gain, $acc_lanes, None)
            };
            ($m:ident :: $f:ident, $t:ty, $operand:expr, $gain:expr, $acc_lanes:expr, $leg:expr) => {{
                let raw: RawKernel<$t> = by_chains!($m::$f, chains, isa, dtype);
                let step = Step {
                    operand: $operand,
                    gain: $gain,
                    acc_lanes: $acc_lanes,
                    leg: $leg,
                };
                (step.max_blocks(), wrap::<$t>(raw, isa, dtype, chains, step))
            }};
        }
        #[cfg(target_arch = "x86_64")]
        let (max_blocks, call) = match (isa, dtype) {
            (Isa::Avx2Fma, Dtype::F64) => make!(x86::avx2_f64, f64),
            (Isa::Avx2Fma, Dtype::F32) => make!(x86::avx2_f32, f32),
            (Isa::Avx2Fma, Dtype::I64) => make!(x86::avx2_i64, i64),
            (Isa::Avx2Fma, Dtype::I32) => make!(x86::avx2_i32, i32),
            (Isa::Avx2Fma, Dtype::I16) => make!(x86::avx2_i16, i16),
            (Isa::Avx2Fma, Dtype::I8) => make!(x86::avx2_i8, i8),
            (Isa::Avx512, Dtype::F64) => make!(x86::avx512_f64, f64),
            (Isa::Avx512, Dtype::F32) => make!(x86::avx512_f32, f32),
            (Isa::Avx512, Dtype::I64) => make!(x86::avx512_i64, i64),
            (Isa::Avx512, Dtype::I32) => make!(x86::avx512_i32, i32),
            (Isa::Avx512, Dtype::I16) => make!(x86::avx512_i16, i16),
            (Isa::Avx512, Dtype::I8) => make!(x86::avx512_i8, i8),
            (Isa::Sse2, Dtype::F64) => make!(x86::sse2_f64, f64),
            (Isa::Sse2, Dtype::F32) => make!(x86::sse2_f32, f32),
            (Isa::Sse2, Dtype::I64) => make!(x86::sse2_i64, i64),
            (Isa::Sse2, Dtype::I32) => make!(x86::sse2_i32, i32),
            (Isa::Sse2, Dtype::I16) => make!(x86::sse2_i16, i16),
            (Isa::Sse2, Dtype::I8) => make!(x86::sse2_i8, i8),
            (Isa::Scalar, Dtype::F64) => make!(x86::scalar_f64, f64),
            (Isa::Scalar, Dtype::F32) => make!(x86::scalar_f32, f32),
            (Isa::Scalar, Dtype::I64) => make!(x86::scalar_i64, i64),
            (Isa::Scalar, Dtype::I32) => make!(x86::scalar_i32, i32),
            (Isa::Scalar, Dtype::I16) => make!(x86::scalar_i16, i16),
            (Isa::Scalar, Dtype::I8) => make!(x86::scalar_i8, i8),
            // u8 x s8 products of ones, four summed into each i32 lane.
            (Isa::Avx512Vnni, Dtype::I8) => make!(x86::vnni512_i8, i32, 0x0101_0101, 4, 16),
            // i16 x i16 products of ones, two summed into each i32 lane.
            (Isa::Avx512Vnni, Dtype::I16) => make!(x86::vnni512_i16, i32, 0x0001_0001, 2, 16),
            (Isa::AvxVnni, Dtype::I8) => make!(x86::vnni256_i8, i32, 0x0101_0101, 4, 8),
            (Isa::AvxVnni, Dtype::I16) => make!(x86::vnni256_i16, i32, 0x0001_0001, 2, 8),
            // Pairs of bf16 ones (0x3f80) summed into each f32 lane.
            (Isa::Avx512Bf16, Dtype::BF16) => {
                make!(x86::bf16_dot, f32, f32::from_bits(0x3f80_3f80), 2, 16)
            }
            (Isa::Avx512Fp16, Dtype::F16) => {
                make!(x86::fp16_fma, F16, F16::one(), 1, 32, Some(F16_LEG))
            }
            (Isa::Amx | Isa::AmxFp16, _) => (
                crate::amx::max_blocks(dtype),
                crate::amx::kernel(dtype, chains)?,
            ),
            (other, _) => {
                return Err(BenchError::unsupported(format!(
                    "no {dtype} kernel for {other} on x86-64"
                )))
            }
        };
        #[cfg(target_arch = "aarch64")]
        let (max_blocks, call) = match (isa, dtype) {
            (Isa::Neon, Dtype::F64) => make!(arm::neon_f64, f64),
            (Isa::Neon, Dtype::F32) => make!(arm::neon_f32, f32),
            (Isa::Neon, Dtype::I64) => make!(arm::neon_i64, i64),
            (Isa::Neon, Dtype::I32) => make!(arm::neon_i32, i32),
            (Isa::Neon, Dtype::I16) => make!(arm::neon_i16, i16),
            (Isa::Neon, Dtype::I8) => make!(arm::neon_i8, i8),
            (Isa::Scalar, Dtype::F64) => make!(arm::scalar_f64, f64),
            (Isa::Scalar, Dtype::F32) => make!(arm::scalar_f32, f32),
            (Isa::Scalar, Dtype::I64) => make!(arm::scalar_i64, i64),
            (Isa::Scalar, Dtype::I32) => make!(arm::scalar_i32, i32),
            (Isa::Scalar, Dtype::I16) => make!(arm::scalar_i16, i16),
            (Isa::Scalar, Dtype::I8) => make!(arm::scalar_i8, i8),
            // s8 x s8 products of ones: four summed into each i32 lane by `sdot`, eight by
            // `smmla`.
            (Isa::NeonDotprod, Dtype::I8) => make!(arm::dot_i8, i32, 0x0101_0101, 4, 4),
            (Isa::I8mm, Dtype::I8) => make!(arm::mmla_i8, i32, 0x0101_0101, 8, 4),
            // bf16 ones (0x3f80), four products summed into each f32 lane.
            (Isa::ArmBf16, Dtype::BF16) => {
                make!(arm::mmla_bf16, f32, f32::from_bits(0x3f80_3f80), 4, 4)
            }
            (other, _) => return Err(BenchError::unsupported(format!("{other} on AArch64"))),
        };
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let (max_blocks, call): (u64, KernelCall) = {
            let _ = lanes;
            return Err(BenchError::unsupported(
                "no CPU kernels for this architecture",
            ));
        };
        Ok(Self {
            isa,
            dtype,
            chains,
            lanes,
            kind: op_kind(isa, dtype),
            max_blocks,
            call,
        })
    }
}

#[cfg(test)]
mod tests;
