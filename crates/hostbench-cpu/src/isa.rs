//! Data types and instruction sets, and which of them this CPU can run.
//!
//! Detection is at run time (`is_x86_feature_detected!` / `is_aarch64_feature_detected!`), never
//! at compile time: one binary runs the widest kernels each machine has.

use hostbench_core::BenchError;

hostbench_core::named_enum! {
    /// Element type of a kernel. The classic reports' QP/HP/SP/DP are i8/i16/f32/f64.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Dtype("dtype") {
        F64 = "f64" | "dp" | "double",
        F32 = "f32" | "sp" | "float",
        I64 = "i64",
        I32 = "i32",
        I16 = "i16" | "hp",
        I8 = "i8" | "qp",
        F16 = "f16" | "fp16" | "half",
        BF16 = "bf16",
    }
}

impl Dtype {
    pub fn bytes(self) -> usize {
        match self {
            Self::F64 | Self::I64 => 8,
            Self::F32 | Self::I32 => 4,
            Self::I16 | Self::F16 | Self::BF16 => 2,
            Self::I8 => 1,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Self::F64 | Self::F32 | Self::F16 | Self::BF16)
    }

    /// Benchmark id and unit this dtype reports under.
    pub fn benchmark(self) -> (&'static str, &'static str) {
        if self.is_float() {
            ("cpu.flops", "FLOP/s")
        } else {
            ("cpu.iops", "OP/s")
        }
    }
}

hostbench_core::named_enum! {
    /// Instruction set a kernel is written for: the general vector ISAs (every dtype from i8 to
    /// f64), then the dot-product and matrix units, which run only their own low-precision dtypes.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Isa("ISA") {
        Scalar = "scalar",
        Sse2 = "sse2" | "sse",
        Avx2Fma = "avx2-fma" | "avx2" | "avx-fma" | "fma",
        Avx512 = "avx512" | "avx-512" | "avx512f",
        Neon = "neon" | "asimd",
        AvxVnni = "avx-vnni" | "avxvnni",
        Avx512Vnni = "avx512-vnni" | "avx512vnni" | "vnni",
        Avx512Bf16 = "avx512-bf16" | "avx512bf16",
        Avx512Fp16 = "avx512-fp16" | "avx512fp16",
        Amx = "amx",
        AmxFp16 = "amx-fp16" | "amxfp16",
        NeonDotprod = "neon-dotprod" | "dotprod" | "asimd-dotprod",
        I8mm = "i8mm" | "neon-i8mm",
        ArmBf16 = "neon-bf16" | "bf16",
    }
}

impl Isa {
    /// Vector register width in bits (64 for scalar: one element of any dtype; a tile's 8192 for
    /// AMX).
    pub fn width_bits(self) -> usize {
        match self {
            Self::Scalar => 64,
            Self::Sse2 | Self::Neon | Self::NeonDotprod | Self::I8mm | Self::ArmBf16 => 128,
            Self::Avx2Fma | Self::AvxVnni => 256,
            Self::Avx512 | Self::Avx512Vnni | Self::Avx512Bf16 | Self::Avx512Fp16 => 512,
            Self::Amx | Self::AmxFp16 => 8192,
        }
    }

    /// Elements of `dtype` one instruction works on: lanes for the vector ISAs, input elements
    /// (each in one multiply-accumulate) for the dot products, and multiply-accumulates for a
    /// tile multiply (16 × 16 results of 64 i8 or 32 bf16 products each) or an Arm matrix
    /// multiply (2 × 2 results of 8 i8 products for `smmla`, of 4 bf16 products for `bfmmla`).
    pub fn lanes(self, dtype: Dtype) -> usize {
        match self {
            Self::Scalar => 1,
            Self::Amx | Self::AmxFp16 => 16 * 16 * (64 / dtype.bytes()),
            Self::I8mm | Self::ArmBf16 => 2 * 2 * (16 / dtype.bytes() / 2),
            _ => self.width_bits() / 8 / dtype.bytes(),
        }
    }

    /// A dot-product or matrix unit: runs only its own dtypes, and is not what "the widest ISA"
    /// means for the classic adds and FMAs.
    pub fn is_unit(self) -> bool {
        matches!(
            self,
            Self::AvxVnni
                | Self::Avx512Vnni
                | Self::Avx512Bf16
                | Self::Avx512Fp16
                | Self::Amx
                | Self::AmxFp16
                | Self::NeonDotprod
                | Self::I8mm
                | Self::ArmBf16
        )
    }

    /// Whether this build has a kernel for `dtype` on this ISA at all (whatever the CPU).
    pub fn has_kernel(self, dtype: Dtype) -> bool {
        match self {
            Self::AvxVnni | Self::Avx512Vnni => matches!(dtype, Dtype::I8 | Dtype::I16),
            Self::Avx512Bf16 => dtype == Dtype::BF16,
            Self::Avx512Fp16 => dtype == Dtype::F16,
            Self::Amx => matches!(dtype, Dtype::I8 | Dtype::BF16),
            Self::AmxFp16 => dtype == Dtype::F16,
            Self::NeonDotprod | Self::I8mm => dtype == Dtype::I8,
            Self::ArmBf16 => dtype == Dtype::BF16,
            _ => !matches!(dtype, Dtype::F16 | Dtype::BF16),
        }
    }

    /// The dtypes this ISA has kernels for.
    pub fn dtypes(self) -> Vec<Dtype> {
        Dtype::ALL
            .iter()
            .copied()
            .filter(|&d| self.has_kernel(d))
            .collect()
    }

    /// Can this CPU run this ISA at all?
    pub fn available(self) -> bool {
        use hostbench_core::isa as has;
        match self {
            Self::Scalar => cfg!(any(target_arch = "x86_64", target_arch = "aarch64")),
            Self::Sse2 => has::sse2(),
            Self::Avx2Fma => has::avx2_fma(),
            Self::Avx512 => has::avx512f(),
            Self::Neon => has::neon(),
            Self::AvxVnni => has::avx_vnni(),
            Self::Avx512Vnni => has::avx512vnni(),
            Self::Avx512Bf16 => has::avx512bf16(),
            Self::Avx512Fp16 => has::avx512fp16(),
            Self::Amx => has::amx_int8() || has::amx_bf16(),
            Self::AmxFp16 => has::amx_fp16(),
            Self::NeonDotprod => has::neon_dotprod(),
            Self::I8mm => has::i8mm(),
            Self::ArmBf16 => has::arm_bf16(),
        }
    }

    /// Can this CPU run this ISA's kernel for `dtype`? (512-bit byte/word adds need AVX-512BW;
    /// AMX's int8 and bf16 multiplies are separate features.)
    pub fn supports(self, dtype: Dtype) -> Result<(), BenchError> {
        if !self.has_kernel(dtype) {
            let theirs: Vec<&str> = self.dtypes().iter().map(|d| d.name()).collect();
            return Err(BenchError::invalid(format!(
                "ISA {self} has no {dtype} kernel (it runs {})",
                theirs.join(", ")
            )));
        }
        if !self.available() {
            return Err(BenchError::unsupported(format!(
                "ISA {} is not available on this CPU",
                self.name()
            )));
        }
        let missing = match (self, dtype) {
            (Self::Avx512, Dtype::I8 | Dtype::I16) if !hostbench_core::isa::avx512bw() => {
                Some("AVX-512BW")
            }
            (Self::Amx, Dtype::I8) if !hostbench_core::isa::amx_int8() => Some("AMX-INT8"),
            (Self::Amx, Dtype::BF16) if !hostbench_core::isa::amx_bf16() => Some("AMX-BF16"),
            _ => None,
        };
        match missing {
            Some(feature) => Err(BenchError::unsupported(format!(
                "{dtype} on {self} needs {feature}, which this CPU lacks"
            ))),
            None => Ok(()),
        }
    }

    /// Every ISA this build knows, narrowest first, the units after the general ISAs.
    pub fn all() -> &'static [Isa] {
        &[
            Self::Scalar,
            Self::Sse2,
            Self::Avx2Fma,
            Self::Avx512,
            Self::Neon,
            Self::AvxVnni,
            Self::Avx512Vnni,
            Self::Avx512Bf16,
            Self::Avx512Fp16,
            Self::Amx,
            Self::AmxFp16,
            Self::NeonDotprod,
            Self::I8mm,
            Self::ArmBf16,
        ]
    }

    /// The ISAs this CPU can run, narrowest first.
    pub fn detected() -> Vec<Isa> {
        Self::all()
            .iter()
            .copied()
            .filter(|i| i.available())
            .collect()
    }

    /// The widest general vector ISA this CPU runs (the default for the classic dtypes).
    pub fn best() -> Isa {
        Self::detected()
            .into_iter()
            .rfind(|i| !i.is_unit())
            .unwrap_or(Self::Scalar)
    }

    /// The dot-product and matrix units this CPU has.
    pub fn units() -> Vec<Isa> {
        Self::detected()
            .into_iter()
            .filter(|i| i.is_unit())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_map_to_classic_precisions() {
        assert_eq!(Dtype::parse("dp").unwrap(), Dtype::F64);
        assert_eq!(Dtype::parse("SP").unwrap(), Dtype::F32);
        assert_eq!(Dtype::parse("hp").unwrap(), Dtype::I16);
        assert_eq!(Dtype::parse("qp").unwrap(), Dtype::I8);
        let err = Dtype::parse("f128").unwrap_err().to_string();
        assert!(err.contains("f128"), "{err}");
    }

    #[test]
    fn lanes_follow_register_width() {
        assert_eq!(Isa::Avx2Fma.lanes(Dtype::F64), 4);
        assert_eq!(Isa::Avx512.lanes(Dtype::F32), 16);
        assert_eq!(Isa::Avx512.lanes(Dtype::I8), 64);
        assert_eq!(Isa::Sse2.lanes(Dtype::I16), 8);
        assert_eq!(Isa::Neon.lanes(Dtype::F64), 2);
        assert_eq!(Isa::Scalar.lanes(Dtype::I8), 1);
        assert_eq!(Isa::Avx512Fp16.lanes(Dtype::F16), 32);
        assert_eq!(Isa::Avx512Vnni.lanes(Dtype::I8), 64);
        assert_eq!(Isa::AvxVnni.lanes(Dtype::I16), 16);
        assert_eq!(Isa::Avx512Bf16.lanes(Dtype::BF16), 32);
        // One tile multiply: 16 x 16 results of 64 i8 (or 32 bf16) products each.
        assert_eq!(Isa::Amx.lanes(Dtype::I8), 16384);
        assert_eq!(Isa::Amx.lanes(Dtype::BF16), 8192);
        assert_eq!(Isa::AmxFp16.lanes(Dtype::F16), 8192);
        // Arm: `sdot` takes 16 s8 pairs; `smmla` makes 2 x 2 results of 8 products, `bfmmla`
        // 2 x 2 results of 4.
        assert_eq!(Isa::NeonDotprod.lanes(Dtype::I8), 16);
        assert_eq!(Isa::I8mm.lanes(Dtype::I8), 32);
        assert_eq!(Isa::ArmBf16.lanes(Dtype::BF16), 16);
    }

    #[test]
    fn units_run_only_their_dtypes() {
        assert_eq!(Isa::Amx.dtypes(), vec![Dtype::I8, Dtype::BF16]);
        assert_eq!(Isa::Avx512Vnni.dtypes(), vec![Dtype::I16, Dtype::I8]);
        assert_eq!(Isa::Avx512Fp16.dtypes(), vec![Dtype::F16]);
        assert_eq!(Isa::AmxFp16.dtypes(), vec![Dtype::F16]);
        assert_eq!(Isa::NeonDotprod.dtypes(), vec![Dtype::I8]);
        assert_eq!(Isa::I8mm.dtypes(), vec![Dtype::I8]);
        assert_eq!(Isa::ArmBf16.dtypes(), vec![Dtype::BF16]);
        // `--isa bf16` names Arm's bf16 unit (FEAT_BF16), as Linux's HWCAP does.
        assert_eq!(Isa::parse("bf16").unwrap(), Isa::ArmBf16);
        assert_eq!(Isa::ArmBf16.name(), "neon-bf16");
        assert!(!Isa::Avx512.has_kernel(Dtype::BF16));
        let e = Isa::Amx.supports(Dtype::F64).unwrap_err();
        assert!(matches!(e, BenchError::InvalidInput(_)), "{e}");
        assert!(e.to_string().contains("i8, bf16"), "{e}");
        assert!(!Isa::best().is_unit());
        assert!(Isa::units().iter().all(|u| u.is_unit() && u.available()));
    }

    #[test]
    fn detection_is_consistent() {
        let detected = Isa::detected();
        assert!(detected.contains(&Isa::Scalar));
        assert_eq!(
            Isa::best(),
            detected.iter().copied().rfind(|i| !i.is_unit()).unwrap()
        );
        assert!(Isa::parse("avx9").is_err());
    }
}
