//! The CPU crate's two subsystems for `hostbench run`: compute throughput (`cpu`) and the
//! HPL-style solve (`linpack`), with what each profile and `--scale` mean for them.

use std::time::Duration;

use hostbench_core::model::Host;
use hostbench_core::spec::Spec;
use hostbench_core::subsystem::{PeakLine, Profile, ReferenceTool, RunContext, Subsystem};
use hostbench_core::{affinity, BenchError, Phase, Runner};

use crate::{CpuConfig, Dtype, IsaChoice};

/// Compute throughput per dtype, ISA and thread count.
pub struct Cpu;

/// The HPL-style dense solve on every CPU this process may use.
pub struct Linpack;

/// The compute sweep a profile runs: `quick` and `standard` shorten the samples, `full` adds
/// every ISA, `classic` is the assignment's QP, HP, SP, DP at 1, 2, 4 and 8 threads.
pub fn profile_config(profile: Profile) -> CpuConfig {
    let mut cfg = CpuConfig::default();
    match profile {
        Profile::Quick => cfg.duration = Duration::from_millis(100),
        // 200 ms, not `hostbench cpu`'s 300: interleaved on a 2-vCPU VM, the 22 records'
        // medians came out at 0.997 × the 300 ms ones (median of the ratios) with the same
        // sample CV (0.37 % against 0.32 %), and a standard run of 15 ISA × dtype pairs
        // on two CPUs is some 9 s shorter.
        Profile::Standard => cfg.duration = Duration::from_millis(200),
        Profile::Full => {
            cfg.isas = IsaChoice::All;
            cfg.duration = Duration::from_millis(500);
        }
        Profile::Classic => {
            // QP, HP, SP and DP as the assignment defined them (adds and FMAs on the widest
            // general ISA), plus the half-precision and dot-product units' rows where present.
            cfg.dtypes = vec![
                Dtype::I8,
                Dtype::I16,
                Dtype::F32,
                Dtype::F64,
                Dtype::F16,
                Dtype::BF16,
            ];
            cfg.threads = vec![1, 2, 4, 8];
        }
    }
    cfg
}

fn run_config(ctx: &RunContext<'_>) -> CpuConfig {
    let mut cfg = profile_config(ctx.profile);
    cfg.duration = ctx.sample_length(cfg.duration);
    cfg.ops = cfg.ops.map(|o| o * ctx.scale);
    cfg.reference = ctx.reference;
    cfg
}

/// Cases `run_compute` plans for `cfg`: one per (ISA, dtype) pair and thread count.
pub fn case_count(cfg: &CpuConfig) -> usize {
    cfg.pairs().map_or(1, |v| v.len()) * cfg.threads.len()
}

impl Subsystem for Cpu {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn summary(&self) -> &'static str {
        "FLOP/s and OP/s per dtype, ISA and thread count against cores x clock x ops/cycle"
    }

    fn estimate(&self, ctx: &RunContext<'_>) -> Phase {
        let cfg = run_config(ctx);
        Phase::new(self.name(), case_count(&cfg), cfg.duration.as_secs_f64())
    }

    fn run(&self, runner: &mut Runner, ctx: &RunContext<'_>) -> Result<(), BenchError> {
        crate::run_compute(runner, &run_config(ctx), ctx.host, ctx.spec)
    }

    fn peaks(&self, host: &Host, spec: &Spec) -> Vec<PeakLine> {
        crate::theoretical_peaks(host, spec)
            .into_iter()
            .map(|p| PeakLine {
                subsystem: self.name().into(),
                what: format!("{} {}", p.dtype, p.isa),
                unit: p.unit,
                peak: p.peak,
                note: p.note,
            })
            .collect()
    }

    fn reference_tools(&self) -> &'static [ReferenceTool] {
        &[ReferenceTool {
            name: "likwid-bench",
            package: "likwid",
            serves: "cpu.flops f64/f32 (peakflops, peakflops_sp, _sse, _avx, _avx_fma, _avx512, _avx512_fma kernels)",
            in_run: "the f64 case on the widest ISA it has, at the most threads",
            also: "scripts/bench/cpu-vs-likwid for interleaved rounds",
        }]
    }
}

/// Seconds one linpack solve of the standard profile takes (its n is sized to it).
pub const STANDARD_SOLVE_SECONDS: f64 = 2.0;

/// Linpack's order per profile: `quick` a fixed 2000, `standard` the n of a
/// [`STANDARD_SOLVE_SECONDS`] solve at this host's fp64 peak (`budget`, see
/// `linpack_budget_n`), the others sized from free memory (see `linpack::default_n`); the work
/// (n³) follows `--scale`.
pub fn linpack_n(
    profile: Profile,
    scale: f64,
    budget: impl FnOnce(f64) -> Option<usize>,
) -> Option<usize> {
    let fixed = match profile {
        Profile::Quick => Some(2000),
        Profile::Standard => budget(STANDARD_SOLVE_SECONDS),
        _ => None,
    };
    if scale == 1.0 {
        return fixed;
    }
    let n = fixed.unwrap_or_else(|| {
        crate::linpack::default_n(hostbench_core::host::available_memory_bytes())
    });
    Some(((n as f64 * scale.cbrt()).round() as usize).max(64))
}

impl Subsystem for Linpack {
    fn name(&self) -> &'static str {
        "linpack"
    }

    fn summary(&self) -> &'static str {
        "HPL-style dense solve (blocked LU, HPL residual) against the all-core fp64 peak"
    }

    fn estimate(&self, ctx: &RunContext<'_>) -> Phase {
        // The estimate does not measure the peak: the budget's own length stands for it.
        let n = match ctx.profile {
            Profile::Standard if ctx.scale == 1.0 => {
                return Phase::new(self.name(), 1, 4.0 * STANDARD_SOLVE_SECONDS)
            }
            _ => linpack_n(ctx.profile, ctx.scale, |_| None).unwrap_or(8000) as f64,
        };
        // 2/3 n³ FLOP at a modest 20 GFLOP/s.
        Phase::new(self.name(), 1, 2.0 / 3.0 * n.powi(3) / 20e9)
    }

    fn run(&self, runner: &mut Runner, ctx: &RunContext<'_>) -> Result<(), BenchError> {
        let threads = affinity::allowed_cpus().len().max(1);
        crate::run_linpack(
            runner,
            linpack_n(ctx.profile, ctx.scale, |secs| {
                crate::linpack_budget_n(ctx.host, ctx.spec, secs)
            }),
            threads,
            ctx.host,
            ctx.spec,
            ctx.reference,
        )
    }

    fn reference_tools(&self) -> &'static [ReferenceTool] {
        &[ReferenceTool {
            name: "libopenblas.so.0",
            package: "libopenblas0",
            serves: "cpu.linpack (LAPACK dgesv: dgetrf + dgetrs on the same system, n and threads)",
            in_run: "the linpack solve (same n and threads)",
            also: "loaded at run time (dlopen), no link-time dependency",
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_profile_is_the_assignments_matrix() {
        // QP, HP, SP, DP x 1, 2, 4, 8 threads.
        let cpu = profile_config(Profile::Classic);
        assert_eq!(
            cpu.dtypes[..4],
            [Dtype::I8, Dtype::I16, Dtype::F32, Dtype::F64]
        );
        assert_eq!(cpu.threads, [1, 2, 4, 8]);
    }

    #[test]
    fn linpack_work_follows_the_scale() {
        let none = |_| None;
        assert_eq!(linpack_n(Profile::Quick, 1.0, none), Some(2000));
        assert_eq!(linpack_n(Profile::Quick, 0.125, none), Some(1000));
        assert_eq!(linpack_n(Profile::Full, 1.0, none), None);
        // Standard: the budget's n, scaled like any other.
        assert_eq!(
            linpack_n(Profile::Standard, 1.0, |s| Some((s * 2000.0) as usize)),
            Some(4000)
        );
        assert_eq!(
            linpack_n(Profile::Standard, 0.125, |_| Some(4000)),
            Some(2000)
        );
        assert_eq!(linpack_n(Profile::Standard, 1.0, none), None);
    }
}
