//! Theoretical CPU peaks: cores × measured clock × operations per cycle per core.
//!
//! Operations per cycle = lanes × instructions per cycle × operations per lane (2 for an FMA).
//! Instructions per cycle ("pipes") is a microarchitectural fact that CPUID does not report. It
//! comes, in order of trust, from the `--spec` file, from a small table of documented values for
//! cores we know, or — for any other core — is inferred from the single-thread measurement and
//! labelled as inferred, so a reader knows that efficiency then shows scaling, not headroom.
//! Hard-coding a table alone is what made other tools fail on every new CPU generation.

use hostbench_core::model::Host;
use hostbench_core::spec::CpuSpec;
use hostbench_core::units::format_value;
use hostbench_core::Peak;

use crate::isa::{Dtype, Isa};
use crate::kernels::OpKind;

/// Instructions of one kind a core retires per cycle, and where that number came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipes {
    pub per_cycle: f64,
    pub source: String,
}

/// Documented instruction throughputs (per core per cycle) for cores we know.
pub fn table(microarch: &str, isa: Isa, kind: OpKind) -> Option<f64> {
    use OpKind::*;
    let wide = isa.width_bits() == 512;
    let ua = microarch;
    let intel_server = [
        "Skylake-SP",
        "Cascade Lake",
        "Ice Lake-SP",
        "Sapphire Rapids",
        "Emerald Rapids",
    ]
    .iter()
    .any(|n| ua.contains(n));
    let intel_skylake_client = ["Skylake", "Kaby Lake", "Coffee Lake", "Comet Lake"]
        .iter()
        .any(|n| ua.contains(n));
    match kind {
        // Zen 4 runs 512-bit FMAs as two 256-bit halves: one per cycle.
        Fma if ua == "Zen 4" => Some(if wide { 1.0 } else { 2.0 }),
        Fma if ["Zen 2", "Zen 3", "Zen 5"].contains(&ua) => Some(2.0),
        Fma if ua.contains("Haswell") || ua.contains("Broadwell") || intel_skylake_client => {
            Some(2.0)
        }
        // Xeon Gold/Platinum have two 512-bit FMA units (some Silver/Bronze parts one).
        Fma if intel_server => Some(2.0),
        Fma if ua.contains("Neoverse N1") || ua.contains("Neoverse N2") => Some(2.0),
        Fma if ua.contains("Neoverse V1") || ua.contains("Neoverse V2") => Some(4.0),
        // Zen: FMUL on two pipes, FADD on two others.
        MulAdd if ["Zen 2", "Zen 3", "Zen 4"].contains(&ua) => Some(4.0),
        // Intel: multiplies and adds share ports 0 and 1.
        MulAdd
            if ua.contains("Haswell")
                || ua.contains("Broadwell")
                || intel_skylake_client
                || intel_server =>
        {
            Some(2.0)
        }
        VecIntAdd if ua == "Zen 4" => Some(if wide { 2.0 } else { 4.0 }),
        VecIntAdd if ua == "Zen 3" => Some(4.0),
        VecIntAdd if ua == "Zen 2" => Some(3.0),
        VecIntAdd if ua.contains("Haswell") || ua.contains("Broadwell") => Some(2.0),
        VecIntAdd if intel_skylake_client => Some(3.0),
        VecIntAdd if intel_server => Some(if wide { 2.0 } else { 3.0 }),
        VecIntAdd if ua.contains("Neoverse N1") || ua.contains("Neoverse N2") => Some(2.0),
        VecIntAdd if ua.contains("Neoverse V1") || ua.contains("Neoverse V2") => Some(4.0),
        ScalarIntAdd if ["Zen 2", "Zen 3", "Zen 4"].contains(&ua) => Some(4.0),
        ScalarIntAdd if ua == "Zen 5" => Some(6.0),
        ScalarIntAdd
            if ua.contains("Haswell")
                || ua.contains("Broadwell")
                || intel_skylake_client
                || ua.contains("Skylake-SP")
                || ua.contains("Cascade Lake") =>
        {
            Some(4.0)
        }
        _ => None,
    }
}

/// Resolve the instruction throughput: spec file, then table, then inference from the measured
/// single-thread instructions per cycle (rounded to the nearest whole pipe).
pub fn pipes(
    host: &Host,
    spec: &CpuSpec,
    isa: Isa,
    kind: OpKind,
    measured_instr_per_cycle: Option<f64>,
) -> Option<Pipes> {
    let from_spec = match kind {
        OpKind::Fma => spec.fma_pipes,
        OpKind::MulAdd => spec.muladd_pipes,
        OpKind::VecIntAdd => spec.int_add_pipes,
        OpKind::ScalarIntAdd => spec.scalar_int_pipes,
    };
    if let Some(p) = from_spec {
        return Some(Pipes {
            per_cycle: p,
            source: "spec file".into(),
        });
    }
    if let Some(ua) = host.cpu.microarch.as_deref() {
        if let Some(p) = table(ua, isa, kind) {
            return Some(Pipes {
                per_cycle: p,
                source: format!("table: {ua}"),
            });
        }
    }
    measured_instr_per_cycle.map(|m| Pipes {
        per_cycle: m.round().max(1.0),
        source: format!(
            "inferred from the 1-thread run ({m:.2}/cycle); no table entry for this CPU"
        ),
    })
}

/// Operations per cycle per core for a kernel.
pub fn ops_per_cycle(isa: Isa, dtype: Dtype, kind: OpKind, pipes: &Pipes) -> f64 {
    isa.lanes(dtype) as f64 * pipes.per_cycle * kind.ops_per_lane()
}

/// The peak with its arithmetic spelled out, e.g.
/// `2 cores x 3.07 GHz (measured) x 16 FLOP/cycle (8 lanes x 1 FMA/cycle [table: Zen 4] x 2)`.
#[allow(clippy::too_many_arguments)]
pub fn cpu_peak(
    cores: usize,
    clock_hz: f64,
    clock_source: &str,
    isa: Isa,
    dtype: Dtype,
    kind: OpKind,
    pipes: &Pipes,
    unit: &str,
) -> Peak {
    let per_cycle = ops_per_cycle(isa, dtype, kind, pipes);
    let op_unit = unit.trim_end_matches("/s");
    let lanes = isa.lanes(dtype);
    let times_two = if kind == OpKind::Fma { " x 2" } else { "" };
    let pipes_txt = if pipes.per_cycle.fract() == 0.0 {
        format!("{:.0}", pipes.per_cycle)
    } else {
        format!("{}", pipes.per_cycle)
    };
    Peak {
        value: cores as f64 * clock_hz * per_cycle,
        basis: format!(
            "{cores} core{} x {} ({clock_source}) x {per_cycle} {op_unit}/cycle ({lanes} lane{} x {pipes_txt} {}/cycle [{}]{times_two})",
            if cores == 1 { "" } else { "s" },
            format_value(clock_hz, "Hz"),
            if lanes == 1 { "" } else { "s" },
            kind.describe(),
            pipes.source,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_pipes(n: f64) -> Pipes {
        Pipes {
            per_cycle: n,
            source: "table: test".into(),
        }
    }

    #[test]
    fn classic_example_two_cores_avx2_fp64() {
        // 2 cores × 2.3 GHz × 16 FLOP/cycle (4 lanes × 2 FMA pipes × 2) = 73.6 GFLOP/s.
        let p = cpu_peak(
            2,
            2.3e9,
            "measured",
            Isa::Avx2Fma,
            Dtype::F64,
            OpKind::Fma,
            &table_pipes(2.0),
            "FLOP/s",
        );
        assert!((p.value - 73.6e9).abs() < 1.0, "{}", p.value);
        assert!(
            p.basis.starts_with(
                "2 cores x 2.30 GHz (measured) x 16 FLOP/cycle (4 lanes x 2 FMA/cycle"
            ),
            "{}",
            p.basis
        );
    }

    #[test]
    fn zen4_avx512_is_double_pumped() {
        assert_eq!(table("Zen 4", Isa::Avx512, OpKind::Fma), Some(1.0));
        assert_eq!(table("Zen 4", Isa::Avx2Fma, OpKind::Fma), Some(2.0));
        // Same FP64 peak per cycle either way: 8 × 1 × 2 = 4 × 2 × 2 = 16.
        let wide = ops_per_cycle(Isa::Avx512, Dtype::F64, OpKind::Fma, &table_pipes(1.0));
        let narrow = ops_per_cycle(Isa::Avx2Fma, Dtype::F64, OpKind::Fma, &table_pipes(2.0));
        assert_eq!(wide, 16.0);
        assert_eq!(narrow, 16.0);
    }

    #[test]
    fn integer_and_muladd_counts() {
        // i8 AVX2: 32 lanes × 4 adds/cycle = 128 OP/cycle; SSE2 f32 mul+add: 4 lanes × 4 = 16.
        assert_eq!(
            ops_per_cycle(
                Isa::Avx2Fma,
                Dtype::I8,
                OpKind::VecIntAdd,
                &table_pipes(4.0)
            ),
            128.0
        );
        assert_eq!(
            ops_per_cycle(Isa::Sse2, Dtype::F32, OpKind::MulAdd, &table_pipes(4.0)),
            16.0
        );
        let p = cpu_peak(
            1,
            3e9,
            "spec file",
            Isa::Scalar,
            Dtype::I64,
            OpKind::ScalarIntAdd,
            &table_pipes(4.0),
            "OP/s",
        );
        assert_eq!(p.value, 12e9);
        assert!(
            p.basis
                .starts_with("1 core x 3.00 GHz (spec file) x 4 OP/cycle (1 lane x 4"),
            "{}",
            p.basis
        );
    }

    #[test]
    fn spec_beats_table_beats_inference() {
        let mut host = Host::default();
        host.cpu.microarch = Some("Zen 4".into());
        let mut spec = CpuSpec::default();
        let t = pipes(&host, &spec, Isa::Avx2Fma, OpKind::Fma, Some(1.7)).unwrap();
        assert_eq!((t.per_cycle, t.source.as_str()), (2.0, "table: Zen 4"));
        spec.fma_pipes = Some(3.0);
        assert_eq!(
            pipes(&host, &spec, Isa::Avx2Fma, OpKind::Fma, None)
                .unwrap()
                .per_cycle,
            3.0
        );
        host.cpu.microarch = Some("Future Core".into());
        spec.fma_pipes = None;
        let inf = pipes(&host, &spec, Isa::Avx2Fma, OpKind::Fma, Some(1.96)).unwrap();
        assert_eq!(inf.per_cycle, 2.0);
        assert!(inf.source.starts_with("inferred"));
        assert!(pipes(&host, &spec, Isa::Avx2Fma, OpKind::Fma, None).is_none());
    }
}
