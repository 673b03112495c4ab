//! The CPU crate's two subsystems for `hostbench run`: compute throughput (`cpu`) and the
//! HPL-style solve (`linpack`), with what each profile and `--scale` mean for them.

use std::time::Duration;

use hostbench_core::model::{Diagnosis, Host, Record};
use hostbench_core::spec::Spec;
use hostbench_core::subsystem::{PeakLine, Profile, ReferenceTool, RunContext, Subsystem};
use hostbench_core::{affinity, BenchError, Phase, Runner};

use crate::linpack::Sizing;
use crate::{CpuConfig, Dtype, IsaChoice, LinpackSize};

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
        // The health probe: the all-CPU f64 FMA rate on the widest general ISA.
        Profile::Check => {
            cfg.dtypes = vec![Dtype::F64];
            cfg.threads = vec![affinity::allowed_cpus().len().max(1)];
            cfg.duration = Duration::from_millis(200);
        }
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

/// Seconds one linpack solve of the standard profile takes (its n is sized to it): the phase
/// keeps the length it had when n was capped at 8000, on hosts where the cap did not bind.
pub const STANDARD_SOLVE_SECONDS: f64 = 2.0;
/// Seconds of the solve `hostbench linpack` and the classic profile size n to: under about 3 s
/// the panel and the solve's start and end weigh on the figure on a large node.
pub const LINPACK_SOLVE_SECONDS: f64 = 3.0;
/// The memory share the full profile sizes n to (HPL's rule of thumb, with room for the copy
/// of `A` that the residual check needs).
pub const FULL_MEMORY_SHARE: f64 = 0.5;
/// Seconds of the quick profile's solve: a smoke test more than a figure, but sized like the
/// others. Its fixed n = 2000 was a 70 ms solve on 2 vCPUs (65 % of the FMA rate, the panel
/// 44 % of the time) and about 10 ms on a 16-vCPU node, where it measured the solve's start
/// and end, not the node.
pub const QUICK_SOLVE_SECONDS: f64 = 0.5;

/// Linpack's order per profile: the n of a [`QUICK_SOLVE_SECONDS`], [`STANDARD_SOLVE_SECONDS`]
/// or (`classic`) [`LINPACK_SOLVE_SECONDS`] solve at the all-thread FMA rate measured before it,
/// within half the memory available; `full` (or any profile given `mem_share`) the largest n
/// that fits in that share of the memory available (default [`FULL_MEMORY_SHARE`]). The work
/// (n³) follows `--scale`: the time budget scales with it, a memory share by its two-thirds
/// power (memory grows as n²).
pub fn linpack_size(profile: Profile, scale: f64, mem_share: Option<f64>) -> Sizing {
    let share = match (profile, mem_share) {
        (_, Some(f)) => Some(f),
        (Profile::Full, None) => Some(FULL_MEMORY_SHARE),
        _ => None,
    };
    if let Some(f) = share {
        return Sizing::MemoryShare(f * scale.powf(2.0 / 3.0));
    }
    let seconds = match profile {
        Profile::Quick => QUICK_SOLVE_SECONDS,
        Profile::Standard => STANDARD_SOLVE_SECONDS,
        _ => LINPACK_SOLVE_SECONDS,
    };
    Sizing::Seconds(seconds * scale)
}

/// Whether a run adds HPL-MxP beside the f64 solve, at its n: `full` always; `standard` only
/// where AMX makes it the figure an AI-cluster buyer asks for (its solve is shorter than the
/// f64 one, so it fits the budget the f64 solve was sized to).
pub fn mxp_in_run(profile: Profile, amx: bool) -> bool {
    match profile {
        Profile::Full => true,
        Profile::Standard => amx,
        _ => false,
    }
}

impl Subsystem for Linpack {
    fn name(&self) -> &'static str {
        "linpack"
    }

    fn summary(&self) -> &'static str {
        "HPL-style dense solve (blocked LU, HPL residual) against the all-core fp64 peak and FMA rate"
    }

    fn estimate(&self, ctx: &RunContext<'_>) -> Phase {
        if ctx.profile == Profile::Check {
            return Phase::new(self.name(), 0, 0.0);
        }
        // The estimate does not measure the FMA rate: a time budget stands for itself, a
        // memory-sized n is costed at a modest 20 GFLOP/s per CPU.
        let per_solve = match linpack_size(ctx.profile, ctx.scale, ctx.mem_share) {
            // The solve, plus restoring the matrix and checking the residual on one thread:
            // about 1.5 × the budget per sample on a 2-vCPU VM.
            Sizing::Seconds(s) => 1.5 * s,
            Sizing::MemoryShare(f) => {
                let n =
                    crate::linpack::n_for_memory(hostbench_core::host::available_memory_bytes(), f);
                let cpus = affinity::allowed_cpus().len().max(1) as f64;
                crate::linpack::expected_seconds(
                    n,
                    20e9 * cpus / crate::linpack::EXPECTED_OF_FMA_RATE,
                )
            }
        };
        // HPL-MxP at the same n, where the run adds it: its LU is about twice as fast as the
        // f64 one on a bf16 unit, plus its refinement; costed at half the f64 solve again.
        let per_solve = if mxp_in_run(ctx.profile, hostbench_core::isa::amx_bf16()) {
            1.5 * per_solve
        } else {
            per_solve
        };
        // The FMA run and the effective-cores probe before it, then warm-up and samples.
        Phase::new(self.name(), 1, per_solve + 0.5)
    }

    fn run(&self, runner: &mut Runner, ctx: &RunContext<'_>) -> Result<(), BenchError> {
        // A health probe has the FMA rate already (`cpu`); a solve is the standard level's.
        if ctx.profile == Profile::Check {
            return Ok(());
        }
        let threads = affinity::allowed_cpus().len().max(1);
        let n = crate::run_linpack(
            runner,
            LinpackSize::Sized(linpack_size(ctx.profile, ctx.scale, ctx.mem_share)),
            threads,
            ctx.host,
            ctx.spec,
            ctx.reference,
        )?;
        if mxp_in_run(ctx.profile, hostbench_core::isa::amx_bf16()) {
            crate::run_linpack_mxp(runner, n, threads)?;
        }
        Ok(())
    }

    /// A solve short of the FMA rate measured beside it names its own overhead.
    fn causes(&self, rec: &Record) -> Vec<Diagnosis> {
        crate::linpack::overhead::solve_overhead(rec)
            .into_iter()
            .collect()
    }

    fn reference_tools(&self) -> &'static [ReferenceTool] {
        &[ReferenceTool {
            name: "libopenblas.so.0",
            package: "libopenblas0",
            serves: "cpu.linpack (LAPACK dgetrf + dgetrs, what dgesv does, on the same system, n \
                     and threads; the core type it ran named, and a fallback core run again \
                     with the right OPENBLAS_CORETYPE; another OpenBLAS found on the system, \
                     e.g. a Python wheel's, used when faster)",
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
    fn hpl_mxp_joins_a_run_in_full_and_in_standard_only_with_amx() {
        assert!(mxp_in_run(Profile::Full, false) && mxp_in_run(Profile::Full, true));
        assert!(mxp_in_run(Profile::Standard, true));
        assert!(!mxp_in_run(Profile::Standard, false));
        assert!(!mxp_in_run(Profile::Quick, true) && !mxp_in_run(Profile::Classic, true));
    }

    #[test]
    fn linpack_work_follows_the_scale() {
        assert_eq!(
            linpack_size(Profile::Quick, 1.0, None),
            Sizing::Seconds(QUICK_SOLVE_SECONDS)
        );
        assert_eq!(
            linpack_size(Profile::Quick, 0.125, None),
            Sizing::Seconds(QUICK_SOLVE_SECONDS / 8.0)
        );
        assert_eq!(
            linpack_size(Profile::Standard, 1.0, None),
            Sizing::Seconds(STANDARD_SOLVE_SECONDS)
        );
        assert_eq!(
            linpack_size(Profile::Standard, 0.5, None),
            Sizing::Seconds(STANDARD_SOLVE_SECONDS / 2.0)
        );
        assert_eq!(
            linpack_size(Profile::Classic, 1.0, None),
            Sizing::Seconds(LINPACK_SOLVE_SECONDS)
        );
        // full: half the memory by default, the share given otherwise, in any profile
        assert_eq!(
            linpack_size(Profile::Full, 1.0, None),
            Sizing::MemoryShare(FULL_MEMORY_SHARE)
        );
        assert_eq!(
            linpack_size(Profile::Standard, 1.0, Some(0.25)),
            Sizing::MemoryShare(0.25)
        );
        // an eighth of the work: a quarter of the memory (n halves)
        match linpack_size(Profile::Full, 0.125, None) {
            Sizing::MemoryShare(f) => assert!((f - 0.125).abs() < 1e-12),
            other => panic!("{other:?}"),
        }
    }
}
