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
    }
}

impl Dtype {
    pub fn bytes(self) -> usize {
        match self {
            Self::F64 | Self::I64 => 8,
            Self::F32 | Self::I32 => 4,
            Self::I16 => 2,
            Self::I8 => 1,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Self::F64 | Self::F32)
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
    /// Instruction set a kernel is written for.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Isa("ISA") {
        Scalar = "scalar",
        Sse2 = "sse2" | "sse",
        Avx2Fma = "avx2-fma" | "avx2" | "avx-fma" | "fma",
        Avx512 = "avx512" | "avx-512" | "avx512f",
        Neon = "neon" | "asimd",
    }
}

impl Isa {
    /// Vector register width in bits (64 for scalar: one element of any dtype).
    pub fn width_bits(self) -> usize {
        match self {
            Self::Scalar => 64,
            Self::Sse2 | Self::Neon => 128,
            Self::Avx2Fma => 256,
            Self::Avx512 => 512,
        }
    }

    /// Elements per instruction for `dtype`.
    pub fn lanes(self, dtype: Dtype) -> usize {
        match self {
            Self::Scalar => 1,
            _ => self.width_bits() / 8 / dtype.bytes(),
        }
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
        }
    }

    /// Can this CPU run this ISA's kernel for `dtype`? (512-bit byte/word adds need AVX-512BW.)
    pub fn supports(self, dtype: Dtype) -> Result<(), BenchError> {
        if !self.available() {
            return Err(BenchError::unsupported(format!(
                "ISA {} is not available on this CPU",
                self.name()
            )));
        }
        if self == Self::Avx512
            && matches!(dtype, Dtype::I8 | Dtype::I16)
            && !hostbench_core::isa::avx512bw()
        {
            return Err(BenchError::unsupported(format!(
                "{dtype} on avx512 needs AVX-512BW, which this CPU lacks"
            )));
        }
        Ok(())
    }

    /// Every ISA this build knows, narrowest first.
    pub fn all() -> &'static [Isa] {
        &[
            Self::Scalar,
            Self::Sse2,
            Self::Avx2Fma,
            Self::Avx512,
            Self::Neon,
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

    /// The widest ISA this CPU runs (the default).
    pub fn best() -> Isa {
        Self::detected().last().copied().unwrap_or(Self::Scalar)
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
    }

    #[test]
    fn detection_is_consistent() {
        let detected = Isa::detected();
        assert!(detected.contains(&Isa::Scalar));
        assert_eq!(Isa::best(), *detected.last().unwrap());
        assert!(Isa::parse("avx9").is_err());
    }
}
