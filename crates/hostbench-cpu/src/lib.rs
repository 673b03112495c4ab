//! hostbench-cpu: compute throughput per dtype and ISA, and an HPL-style LINPACK.
//!
//! `run_compute` sweeps dtype × ISA × threads through the shared runner: each (ISA, dtype) is
//! tuned once for its chain count on one pinned thread, then every thread count runs the same
//! validated kernel. Each record carries the clock measured under that load, operations per cycle
//! per core, and the peak with its basis, so an efficiency below 100 % can be read for what it is.
//!
//! This file is the crate's facade: the configuration and `pub use` of the drivers, which live in
//! `compute.rs` (the sweep and the peak table) and `linpack/run.rs` (the LINPACK solves), so a
//! reader finds each driver by its name and the root stays short (issue 53).

pub mod amx;
pub mod burn;
mod compute;
pub mod effective;
pub mod engine;
pub mod isa;
#[cfg(target_os = "linux")]
pub mod isolate;
pub mod kernels;
pub mod linpack;
pub mod loadclock;
pub mod peak;
pub mod reference;
pub mod subsystem;

pub use compute::{ensure_effective_cores, run_compute, theoretical_peaks, PeakRow};
pub use linpack::run::{run_linpack, run_linpack_mxp, LinpackSize};
pub use subsystem::{Cpu, Linpack};

use hostbench_core::subsystem::ReferenceScope;
use std::time::Duration;

use hostbench_core::{parallel, BenchError};

pub use isa::{Dtype, Isa};

/// Which ISAs to run (`--isa auto|best|all|LIST`).
pub type IsaChoice = hostbench_core::isa::IsaChoice<Isa>;

/// Strong scaling splits a fixed total amount of work across threads; weak gives each thread
/// the same amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scaling {
    Strong,
    Weak,
}

impl Scaling {
    pub fn name(self) -> &'static str {
        match self {
            Self::Strong => "strong",
            Self::Weak => "weak",
        }
    }
}

/// Plain configuration for `hostbench cpu`, resolved from the CLI once.
#[derive(Debug, Clone)]
pub struct CpuConfig {
    pub dtypes: Vec<Dtype>,
    pub isas: IsaChoice,
    pub threads: Vec<usize>,
    pub scaling: Scaling,
    /// Operations per sample: in total (strong) or per thread (weak). `None`: sized from
    /// `duration` and the tuned single-thread rate.
    pub ops: Option<f64>,
    /// Target time of one single-thread-equivalent sample when `ops` is not given.
    pub duration: Duration,
    /// Run likwid-bench's matching peakflops kernel after each FP case (side by side).
    /// Which cases run likwid-bench beside them (the headline: f64, the widest ISA likwid has,
    /// the most threads).
    pub reference: ReferenceScope,
}

impl Default for CpuConfig {
    fn default() -> Self {
        Self {
            dtypes: Dtype::ALL.to_vec(),
            isas: IsaChoice::Best,
            threads: default_threads(),
            scaling: Scaling::Strong,
            ops: None,
            duration: Duration::from_millis(300),
            reference: ReferenceScope::Off,
        }
    }
}

pub use hostbench_core::parallel::{default_threads, MAX_THREADS};

impl CpuConfig {
    /// Turn the ISA choice into a concrete list, refusing ISAs this CPU lacks. `best` is the widest
    /// general ISA plus every dot-product and matrix unit this CPU has (each runs only its own
    /// dtypes, so the classic i8 and i16 adds stay on the general ISA).
    pub fn resolve_isas(&self) -> Result<Vec<Isa>, BenchError> {
        match &self.isas {
            IsaChoice::Best => Ok(std::iter::once(Isa::best()).chain(Isa::units()).collect()),
            other => hostbench_core::isa::resolve(other, &Isa::detected()),
        }
    }

    /// The (ISA, dtype) pairs to measure, ISA by ISA: every pair with a kernel. A pair without one
    /// (f64 on AMX, bf16 on AVX2) is left out, not skipped; nothing left is a usage error.
    pub fn pairs(&self) -> Result<Vec<(Isa, Dtype)>, BenchError> {
        let isas = self.resolve_isas()?;
        let pairs: Vec<(Isa, Dtype)> = isas
            .iter()
            .flat_map(|&i| {
                self.dtypes
                    .iter()
                    .filter(move |&&d| i.has_kernel(d))
                    .map(move |&d| (i, d))
            })
            .collect();
        if pairs.is_empty() {
            let names = |v: Vec<String>| v.join(", ");
            return Err(BenchError::invalid(format!(
                "no kernel for dtype {} on ISA {} (f16 runs on avx512-fp16 and amx-fp16, bf16 on \
                 avx512-bf16, amx and neon-bf16, the VNNI units run i8 and i16, neon-dotprod and \
                 i8mm run i8)",
                names(self.dtypes.iter().map(ToString::to_string).collect()),
                names(isas.iter().map(ToString::to_string).collect()),
            )));
        }
        Ok(pairs)
    }

    pub fn validate(&self) -> Result<(), BenchError> {
        if self.dtypes.is_empty() || self.threads.is_empty() {
            return Err(BenchError::invalid("empty dtype or thread list"));
        }
        parallel::check_threads(self.threads.iter().copied(), MAX_THREADS, "threads")?;
        if let Some(ops) = self.ops {
            if !(ops.is_finite() && ops >= 1.0) {
                return Err(BenchError::invalid(format!(
                    "ops must be at least 1, got {ops}"
                )));
            }
        }
        self.pairs().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linpack::run::mxp_case;
    use hostbench_core::model::Host;
    use hostbench_core::spec::Spec;
    use hostbench_core::{affinity, Runner};

    use hostbench_core::RunnerConfig;

    #[test]
    fn unavailable_isa_is_refused_with_the_list() {
        // NEON and AVX cannot both exist on one CPU, so one of them is always unavailable here.
        let missing = if Isa::Neon.available() {
            Isa::Avx2Fma
        } else {
            Isa::Neon
        };
        let cfg = CpuConfig {
            isas: IsaChoice::List(vec![missing]),
            ..CpuConfig::default()
        };
        let err = cfg.validate().unwrap_err().to_string();
        assert!(
            err.contains(missing.name()) && err.contains("available:"),
            "{err}"
        );
    }

    #[test]
    fn zero_threads_is_invalid() {
        let cfg = CpuConfig {
            threads: vec![1, 0],
            ..CpuConfig::default()
        };
        assert!(cfg.validate().is_err());
    }

    /// HPL-MxP through the runner: a clean solve is a record beside the f64 one with its
    /// speed-up; factors that break down and a refinement that cannot converge are failed
    /// cases with their reasons, in bounded time, and nothing else is lost.
    #[test]
    fn hpl_mxp_records_a_pass_and_fails_a_broken_solve_with_its_reason() {
        use linpack::mxp::{Hook, Unit};
        let mut runner = Runner::new(RunnerConfig::quiet(1), Host::default());
        let n = 601;
        run_linpack(
            &mut runner,
            LinpackSize::Fixed(n),
            2,
            &Host::default(),
            &Spec::default(),
            ReferenceScope::Off,
        )
        .unwrap();
        // The bf16 path on any CPU (its emulation where there is no bf16 unit): the
        // ill-conditioned hook defeats bf16 factors, not f32 ones.
        let bf16 = Unit::PortableBf16;
        mxp_case(&mut runner, n, 2, Hook::None, Unit::best()).unwrap();
        mxp_case(&mut runner, n, 2, Hook::CorruptPivot, bf16).unwrap();
        mxp_case(&mut runner, n, 2, Hook::IllConditioned, bf16).unwrap();
        let res = runner.finish().unwrap();
        let mxp: Vec<_> = res
            .records
            .iter()
            .filter(|r| r.benchmark == "cpu.linpack_mxp")
            .collect();
        assert_eq!(mxp.len(), 1, "{:?}", res.records);
        assert!(mxp[0].extra["speedup_over_linpack"].as_f64().unwrap() > 0.0);
        let failed: Vec<_> = res
            .skipped
            .iter()
            .filter(|s| s.benchmark == "cpu.linpack_mxp")
            .collect();
        assert_eq!(failed.len(), 2, "{:?}", res.skipped);
        assert!(failed.iter().all(|s| s.kind == "failed"), "{failed:?}");
        assert!(
            failed[0].reason.contains("broke down"),
            "{}",
            failed[0].reason
        );
        assert!(
            failed[1].reason.contains("did not converge"),
            "{}",
            failed[1].reason
        );
    }

    #[test]
    fn default_threads_end_at_cpu_count() {
        let t = default_threads();
        assert_eq!(*t.last().unwrap(), affinity::allowed_cpus().len().max(1));
        assert_eq!(t[0], 1);
    }

    /// `auto` runs the widest general ISA and every dot-product or matrix unit this CPU has, each
    /// unit on its own dtypes only, and every unit's record carries a peak with its basis. (In CI
    /// this also runs for AArch64 under emulation, where the Arm units exist.)
    #[test]
    fn auto_runs_every_unit_here_on_its_own_dtypes() {
        let mut runner = Runner::new(RunnerConfig::quiet(1), Host::default());
        let cfg = CpuConfig {
            dtypes: Dtype::ALL.to_vec(),
            isas: IsaChoice::Best,
            threads: vec![1],
            scaling: Scaling::Strong,
            ops: Some(1e6),
            duration: Duration::from_millis(10),
            reference: ReferenceScope::Off,
        };
        run_compute(&mut runner, &cfg, &Host::default(), &Spec::default()).unwrap();
        let res = runner.finish().unwrap();
        // AMX may be refused by the kernel (skipped with the reason); nothing else may skip.
        assert!(
            res.skipped.iter().all(|s| s.reason.contains("AMX")),
            "{:?}",
            res.skipped
        );
        let general = res
            .records
            .iter()
            .filter(|r| r.param("isa").as_deref() == Some(Isa::best().name()))
            .count();
        assert_eq!(general, Isa::best().dtypes().len());
        for unit in Isa::units() {
            let ran: Vec<_> = res
                .records
                .iter()
                .filter(|r| r.param("isa").as_deref() == Some(unit.name()))
                .collect();
            let skipped = res
                .skipped
                .iter()
                .filter(|s| s.params.get("isa").and_then(|v| v.as_str()) == Some(unit.name()))
                .count();
            // Each of the unit's dtypes: measured, or skipped with the reason.
            assert_eq!(ran.len() + skipped, unit.dtypes().len(), "{unit}");
            for r in ran {
                let dtype = Dtype::parse(&r.param("dtype").unwrap()).unwrap();
                assert!(unit.has_kernel(dtype), "{unit} ran {dtype}");
                assert!(r.value > 0.0);
                if hostbench_core::clock::supported() {
                    // A documented peak, or (Host::default() names no microarchitecture) the
                    // rate inferred from the 1-thread run, kept beside a null peak.
                    let basis = match &r.peak {
                        Some(p) => p.basis.clone(),
                        None => r.extra["inferred_peak"]["basis"].to_string(),
                    };
                    assert!(basis.contains("/cycle"), "{basis}");
                }
            }
        }
    }

    #[test]
    fn small_sweep_produces_checked_records_with_peaks() {
        let mut runner = Runner::new(RunnerConfig::quiet(2), Host::default());
        let cfg = CpuConfig {
            dtypes: vec![Dtype::F64, Dtype::I8],
            isas: IsaChoice::List(vec![Isa::Scalar]),
            threads: vec![1, 3],
            scaling: Scaling::Weak,
            ops: Some(2e6),
            duration: Duration::from_millis(10),
            reference: ReferenceScope::Off,
        };
        run_compute(&mut runner, &cfg, &Host::default(), &Spec::default()).unwrap();
        let res = runner.finish().unwrap();
        assert_eq!(res.records.len(), 4, "{:?}", res.skipped);
        let r = &res.records[0];
        assert_eq!(r.benchmark, "cpu.flops");
        assert_eq!(r.unit, "FLOP/s");
        assert_eq!(r.param("isa").as_deref(), Some("scalar"));
        assert!(r.value > 0.0 && r.samples.len() == 2);
        assert!(r.extra.contains_key("chains"));
        assert_eq!(res.records[2].benchmark, "cpu.iops");
        if hostbench_core::clock::supported() {
            // Unknown microarchitecture: the pipe count is inferred and said to be, so there
            // is no peak and no efficiency, only the inferred rate and the scaling over it.
            assert!(r.peak.is_none() && r.efficiency.is_none(), "{:?}", r.peak);
            let basis = r.extra["inferred_peak"]["basis"].as_str().expect("basis");
            assert!(basis.contains("inferred"), "{basis}");
            assert!(r.scaling_efficiency().expect("scaling") > 0.0);
        }
    }
}
