//! hostbench-cpu: compute throughput per dtype and ISA, and an HPL-style LINPACK.
//!
//! `run_compute` sweeps dtype × ISA × threads through the shared runner: each (ISA, dtype) is
//! tuned once for its chain count on one pinned thread, then every thread count runs the same
//! validated kernel. Each record carries the clock measured under that load, operations per cycle
//! per core, and the peak with its basis, so an efficiency below 100 % can be read for what it is.

pub mod amx;
pub mod effective;
pub mod engine;
pub mod isa;
pub mod kernels;
pub mod linpack;
pub mod loadclock;
pub mod peak;
pub mod reference;
pub mod subsystem;

pub use subsystem::{Cpu, Linpack};

use hostbench_core::subsystem::ReferenceScope;
use std::time::Duration;

use hostbench_core::model::{Host, Metric, Record};
use hostbench_core::spec::Spec;
use hostbench_core::{affinity, parallel, BenchError, Case, Runner, Sample};
use serde_json::json;

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

/// Physical cores a peak may count: the spec's `cpu.cores` when given, else the distinct cores
/// among the CPUs this process may run on (SMT siblings share one core's pipes).
fn physical_cores(spec: &Spec, cpus: &[usize]) -> usize {
    spec.cpu
        .cores
        .map(|c| c as usize)
        .unwrap_or_else(|| affinity::physical_cores(cpus))
        .max(1)
}

/// The clock a peak is computed with: the spec file's when given, else the measured one
/// (labelled `measured_as` in the basis); `None` when neither exists.
fn peak_clock(spec: &Spec, measured: Option<f64>, measured_as: &str) -> Option<(f64, String)> {
    match (spec.cpu.clock_hz, measured) {
        (Some(hz), _) => Some((hz, "spec file".into())),
        (None, Some(hz)) => Some((hz, measured_as.into())),
        (None, None) => None,
    }
}

/// Measure the host's effective cores (`effective`) into the runner's host, once per run, before
/// the first case that runs more than one thread: every record after it is diagnosed with it.
/// A probe that cannot run leaves the field empty; the figures do not depend on it.
pub fn ensure_effective_cores(runner: &mut Runner, max_threads: usize) {
    let order = affinity::placement_order();
    if max_threads < 2 || order.len() < 2 || runner.host_mut().cpu.effective_cores.is_some() {
        return;
    }
    if let Ok(e) = effective::probe(&order) {
        runner.note(&format!("effective cores: {}", e.summary()));
        let cpu = &mut runner.host_mut().cpu;
        // A probe held down by a neighbour or a quota says so, but its value is that moment's,
        // not the hardware's: records are diagnosed with their own conditions instead.
        cpu.effective_cores = (!e.disturbed()).then_some(e.value);
        cpu.effective_cores_note = Some(e.summary());
        cpu.effective_cores_basis = Some(e.basis);
    }
}

/// Run the compute sweep through `runner`.
pub fn run_compute(
    runner: &mut Runner,
    cfg: &CpuConfig,
    host: &Host,
    spec: &Spec,
) -> Result<(), BenchError> {
    cfg.validate()?;
    let pairs = cfg.pairs()?;
    let order = affinity::placement_order();
    let physical = physical_cores(spec, &order);
    ensure_effective_cores(runner, cfg.threads.iter().copied().max().unwrap_or(1));
    runner.plan(pairs.len() * cfg.threads.len());
    let runner_repeat = runner.config().repeat;
    // The headline likwid-bench stands beside: f64 on the widest ISA it has a kernel for.
    let headline_isa = pairs
        .iter()
        .filter(|&&(i, d)| d == Dtype::F64 && reference::likwid_kernel(d, i).is_some())
        .map(|&(i, _)| i)
        .max();
    for &(isa, dtype) in &pairs {
        let (benchmark, unit) = dtype.benchmark();
        let cases: Vec<(usize, Case)> = cfg
            .threads
            .iter()
            .map(|&t| {
                let case = Case::new(benchmark, Metric::Throughput, unit)
                    .param("dtype", dtype.name())
                    .param("isa", isa.name())
                    .param("threads", t)
                    .param("scaling", cfg.scaling.name());
                (t, case)
            })
            .collect();
        let tuned = match isa
            .supports(dtype)
            .and_then(|()| engine::tune(isa, dtype, &order))
        {
            Ok(t) => t,
            Err(e @ BenchError::InvalidInput(_)) => return Err(e),
            Err(e) => {
                for (_, case) in &cases {
                    runner.skip(case, &e)?;
                }
                continue;
            }
        };
        for (threads, case) in cases {
            let kernel = &tuned.kernel;
            let per_block = kernel.ops_per_block();
            let per_thread_ops = match (cfg.scaling, cfg.ops) {
                (Scaling::Strong, Some(total)) => total / threads as f64,
                (Scaling::Weak, Some(each)) => each,
                (Scaling::Strong, None) => {
                    tuned.rate_1t * cfg.duration.as_secs_f64() / threads as f64
                }
                (Scaling::Weak, None) => tuned.rate_1t * cfg.duration.as_secs_f64(),
            };
            let blocks = (per_thread_ops / per_block).round().max(1.0) as u64;
            let work = blocks as f64 * per_block * threads as f64;
            let cores_used = threads.min(physical);
            runner.run_case(
                &case,
                || {
                    let r = engine::run_threads(kernel, threads, blocks, &order)?;
                    let mut s = Sample::new(work / r.wall_s);
                    if let Some(hz) = r.clock_hz {
                        s = s.with("clock_hz", hz);
                    }
                    if let Some(hz) = r.clock_scalar_hz {
                        s = s.with("clock_scalar_hz", hz);
                    }
                    Ok(s)
                },
                |rec| {
                    finish_record(rec, host, spec, &tuned, cores_used, work);
                    let headline = dtype == Dtype::F64
                        && Some(isa) == headline_isa
                        && Some(&threads) == cfg.threads.iter().max();
                    if cfg.reference.wants(headline)
                        && reference::likwid_kernel(dtype, isa).is_some()
                    {
                        // The headline alone: one peer run, as `run` promises (cheap).
                        let runs = match cfg.reference {
                            ReferenceScope::All => runner_repeat,
                            _ => 1,
                        };
                        attach_reference(rec, dtype, isa, threads, runs);
                    }
                },
            )?;
        }
    }
    Ok(())
}

/// Run likwid-bench beside the record just measured; a missing tool or kernel is a warning on
/// the record, never a failed case.
fn attach_reference(rec: &mut Record, dtype: Dtype, isa: Isa, threads: usize, runs: usize) {
    let (outcome, command) = reference::likwid_reference(dtype, isa, threads, runs, rec.value);
    hostbench_core::reference::attach(
        rec,
        outcome,
        &command,
        "likwid-bench runs after hostbench, at the clock of its own moment: under turbo, a \
         frequency licence or a busy neighbour the two runs see different clocks (hostbench's \
         is extra.clock_hz); a debug build of hostbench is also far slower",
    );
}

fn finish_record(
    rec: &mut Record,
    host: &Host,
    spec: &Spec,
    tuned: &engine::Tuned,
    cores_used: usize,
    work: f64,
) {
    let k = &tuned.kernel;
    rec.extra.insert("chains".into(), json!(k.chains));
    rec.extra.insert("work_ops".into(), json!(work));
    rec.extra.insert(
        "chain_sweep".into(),
        json!(tuned
            .sweep
            .iter()
            .map(|&(c, r)| json!([c, r]))
            .collect::<Vec<_>>()),
    );
    let measured = rec.extra.get("clock_hz").and_then(|v| v.as_f64());
    let load = loadclock::Load::of(k.isa, k.kind);
    rec.extra
        .insert("clock_method".into(), json!(load.method()));
    let source = load.describe();
    let Some((clock, source)) = peak_clock(spec, measured, &source) else {
        rec.warnings
            .push("core clock unknown on this architecture: no peak".into());
        return;
    };
    rec.extra.insert(
        "ops_per_cycle_per_core".into(),
        json!(rec.value / (clock * cores_used as f64)),
    );
    let Some(pipes) = peak::pipes(host, &spec.cpu, k.isa, k.kind, tuned.instr_per_cycle_1t())
    else {
        rec.warnings
            .push("instruction throughput unknown for this CPU: no peak".into());
        return;
    };
    // A table entry that is too low shows up as efficiency above 105 %, which `set_peak` flags
    // from this record's own medians (more robust than the short tuning trials).
    let peak = peak::cpu_peak(
        cores_used, clock, &source, k.isa, k.dtype, k.kind, &pipes, &rec.unit,
    );
    if pipes.inferred() {
        // No document fixes this unit's rate: the "peak" is the 1-thread run times the cores,
        // and a percentage of it is scaling, not headroom (DESIGN §3: never a guess as fact).
        rec.set_inferred_peak(peak);
    } else {
        rec.set_peak(Some(peak));
    }
}

/// One row of `hostbench info`'s peak table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PeakRow {
    pub dtype: String,
    pub isa: String,
    pub unit: String,
    pub peak: Option<hostbench_core::Peak>,
    /// Why there is no peak, when there is none.
    pub note: String,
}

/// Peaks for every dtype on the widest general ISA, and for every dot-product and matrix unit's
/// dtypes, on all physical cores. The clock is read under each
/// kernel's instruction class (one short measurement per class); the pipe count comes from the
/// spec file or the documented table, and only where neither fixes it is the kernel tuned on one
/// core to measure it, labelled as measured or inferred.
pub fn theoretical_peaks(host: &Host, spec: &Spec) -> Vec<PeakRow> {
    let order = affinity::placement_order();
    let cores = physical_cores(spec, &affinity::allowed_cpus());
    let mut clocks: Vec<(loadclock::Load, Option<f64>)> = Vec::new();
    let mut clock_under = |load: loadclock::Load| {
        if let Some((_, hz)) = clocks.iter().find(|(l, _)| *l == load) {
            return *hz;
        }
        let hz = engine::measure_clock_pinned(load, &order).or(host.cpu.measured_hz);
        clocks.push((load, hz));
        hz
    };
    std::iter::once(Isa::best())
        .chain(Isa::units())
        .flat_map(|isa| isa.dtypes().into_iter().map(move |d| (isa, d)))
        .map(|(isa, dtype)| {
            let (_, unit) = dtype.benchmark();
            let kind = kernels::op_kind(isa, dtype);
            let load = loadclock::Load::of(isa, kind);
            let supported = isa.supports(dtype);
            let clock = if spec.cpu.clock_hz.is_some() {
                peak_clock(spec, None, "")
            } else {
                peak_clock(spec, clock_under(load), &load.describe())
            };
            let pipes = peak::pipes(host, &spec.cpu, isa, kind, None).or_else(|| {
                // Not fixed by a document: measure it on one core.
                supported.as_ref().ok()?;
                let tuned = engine::tune(isa, dtype, &order).ok()?;
                peak::pipes(host, &spec.cpu, isa, kind, tuned.instr_per_cycle_1t())
            });
            let (peak, note) = match (clock, pipes, supported) {
                (_, _, Err(e)) => (None, e.to_string()),
                (None, _, _) => (None, "core clock unknown on this architecture".to_string()),
                (_, None, _) => (
                    None,
                    "instruction throughput neither documented nor measurable here".to_string(),
                ),
                (Some((hz, source)), Some(p), Ok(())) => {
                    let peak = peak::cpu_peak(cores, hz, &source, isa, dtype, kind, &p, unit);
                    if p.inferred() {
                        let note = format!(
                            "no documented peak (the 1-thread rate x {cores} cores would be {}: \
                             scaling, not a limit)",
                            hostbench_core::units::format_value(peak.value, unit)
                        );
                        (None, note)
                    } else {
                        (Some(peak), String::new())
                    }
                }
            };
            PeakRow {
                dtype: dtype.name().into(),
                isa: isa.name().into(),
                unit: unit.into(),
                peak,
                note,
            }
        })
        .collect()
}

/// Run the HPL-style solve through `runner`: `n` from free memory when not given, refused with
/// a usage error when it cannot fit; efficiency against the all-core fp64 peak at the clock
/// measured under a full FMA load on the same threads.
pub fn run_linpack(
    runner: &mut Runner,
    n: Option<usize>,
    threads: usize,
    host: &Host,
    spec: &Spec,
    reference: ReferenceScope,
) -> Result<(), BenchError> {
    parallel::check_threads([threads], MAX_THREADS, "linpack threads")?;
    let avail = hostbench_core::host::available_memory_bytes();
    let n = match n {
        Some(n) => {
            let need = linpack::memory_needed(n);
            if avail > 0 && need > avail {
                return Err(BenchError::invalid(format!(
                    "--n {n} needs {} of memory but only {} is available",
                    hostbench_core::units::format_bytes_iec(need),
                    hostbench_core::units::format_bytes_iec(avail)
                )));
            }
            n
        }
        None => linpack::default_n(avail),
    };
    let case = Case::new("cpu.linpack", Metric::Throughput, "FLOP/s")
        .param("n", n)
        .param("threads", threads);
    ensure_effective_cores(runner, threads);
    runner.plan(1);
    let cfg = linpack::LinpackConfig {
        n,
        threads,
        seed: 42,
    };
    let order = affinity::placement_order();
    let physical = physical_cores(spec, &order);
    let cores_used = threads.min(physical);
    // Generated once, by the first (warm-up) sample; every sample solves a fresh copy of it.
    let mut system: Option<linpack::Prepared> = None;
    runner.run_case(
        &case,
        || {
            let prepared = match &mut system {
                Some(p) => p,
                None => system.insert(linpack::Prepared::new(&cfg)?),
            };
            let out = prepared.solve()?;
            if !out.passed {
                return Err(BenchError::Validation(format!(
                    "scaled residual {:.3e} is not below 16: the solve is wrong",
                    out.residual
                )));
            }
            let mut s = Sample::new(out.flops / out.seconds)
                .with("residual", out.residual)
                .with("seconds", out.seconds);
            // The peak's clock, read after every solve rather than once: the record's clock is
            // the median of these readings (one taken while a neighbour or the hypervisor held
            // the CPU cannot move it), and their spread is kept beside it.
            if let Some(hz) = fp64_clock(threads, &order) {
                s = s.with("clock_hz", hz);
            }
            Ok(s)
        },
        |rec| {
            rec.extra.insert("passed".into(), json!(true));
            rec.extra.insert(
                "label".into(),
                json!("HPL-style (blocked LU with partial pivoting, look-ahead, AVX-512/AVX2 GEMM), not HPL"),
            );
            let measured = rec.extra.get("clock_hz").and_then(|v| v.as_f64());
            if let Some((peak, clock, inferred)) =
                fp64_peak_at(host, spec, threads, cores_used, &order, measured)
            {
                rec.extra.insert("clock_hz".into(), json!(clock));
                if inferred {
                    rec.set_inferred_peak(peak);
                } else {
                    rec.set_peak(Some(peak));
                }
            }
            // The one linpack case is the headline: one OpenBLAS solve beside it in `run`, as
            // many as hostbench's samples with --reference.
            let runs = match reference {
                ReferenceScope::Off => 0,
                ReferenceScope::Headline => 1,
                ReferenceScope::All => rec.samples.len().max(1),
            };
            if runs > 0 {
                attach_openblas(rec, &cfg, runs);
            }
        },
    )
}

/// OpenBLAS `dgesv` beside the record just measured (`linpack::openblas`); a missing library or
/// a failed residual is a warning on the record, never a failed case.
fn attach_openblas(rec: &mut Record, cfg: &linpack::LinpackConfig, runs: usize) {
    let outcome = linpack::openblas::OpenBlas::load().and_then(|blas| {
        let values = (0..runs)
            .map(|_| blas.solve(cfg).map(|r| r.flops / r.seconds))
            .collect::<Result<Vec<f64>, _>>()?;
        hostbench_core::reference::reference(
            "OpenBLAS",
            blas.version(),
            &values,
            rec.value,
            hostbench_core::reference::Better::Higher,
        )
    });
    // OPENBLAS_CORETYPE overrides DYNAMIC_ARCH's choice for the whole process (some machines set
    // it for old OpenBLAS builds that crash on new CPUs): the command and the note name it.
    let forced = std::env::var("OPENBLAS_CORETYPE")
        .ok()
        .filter(|c| !c.trim().is_empty());
    let command = format!(
        "{}OpenBLAS dgesv_ (libopenblas.so.0, loaded at run time) on the same system: n={} \
         seed={}, openblas_set_num_threads({}), HPL operation count, residual checked",
        forced.as_ref().map_or(String::new(), |c| format!(
            "OPENBLAS_CORETYPE={c} (from the environment) "
        )),
        cfg.n,
        cfg.seed,
        cfg.threads
    );
    let mut why = String::from(
        "OpenBLAS runs after hostbench in the same process on the same system; its GEMM is \
         tuned per CPU model (DYNAMIC_ARCH picks one at load), and a small n is dominated by the \
         panel factorisation, where the two implementations differ most",
    );
    if let Some(c) = &forced {
        why = format!(
            "OPENBLAS_CORETYPE={c} is set in the environment, so OpenBLAS ran its {c} kernels \
             whatever this CPU is (unset it for OpenBLAS's own choice); {why}"
        );
    }
    hostbench_core::reference::attach(rec, outcome, &command, &why);
}

/// Linpack's order for a time budget: the n whose solve takes about `seconds` at 85 % of the
/// all-core fp64 peak (what a good blocked LU reaches once n is large enough to hide the panel),
/// a multiple of 64 and at most `linpack::default_n` (the memory bound and its cap). Why: a
/// fixed n = 8000 takes 10 s a solve on a 2-core VM and under a second on a large server, so
/// the standard profile sizes n to the machine instead. None where the peak is unknown.
pub fn linpack_budget_n(host: &Host, spec: &Spec, seconds: f64) -> Option<usize> {
    let threads = affinity::allowed_cpus().len().max(1);
    let order = affinity::placement_order();
    let cores_used = threads.min(physical_cores(spec, &order));
    let (peak, _, _) = fp64_peak(host, spec, threads, cores_used, &order)?;
    let cap = linpack::default_n(hostbench_core::host::available_memory_bytes());
    Some(budget_n(peak.value, seconds, cap))
}

/// The order whose HPL operation count (2/3 n³) takes `seconds` at 85 % of `peak` FLOP/s,
/// rounded down to a multiple of 64, between 1024 and `cap`.
fn budget_n(peak: f64, seconds: f64, cap: usize) -> usize {
    let flops = 0.85 * peak * seconds;
    let n = (1.5 * flops).cbrt() as usize / 64 * 64;
    n.clamp(1024.min(cap), cap)
}

/// All-core fp64 peak on the widest ISA, with the clock measured while `threads` threads run
/// the FMA kernel (the clock a dense solve actually gets), and whether its FMA rate was only
/// inferred from a 1-thread run (no document fixes it for this CPU).
fn fp64_peak(
    host: &Host,
    spec: &Spec,
    threads: usize,
    cores_used: usize,
    order: &[usize],
) -> Option<(hostbench_core::Peak, f64, bool)> {
    let measured = fp64_clock(threads, order);
    fp64_peak_at(host, spec, threads, cores_used, order, measured)
}

/// The core clock while `threads` threads run the widest fp64 FMA kernel (50 ms of it, then the
/// clock under the same instruction class on each thread).
fn fp64_clock(threads: usize, order: &[usize]) -> Option<f64> {
    let tuned = engine::tune(Isa::best(), Dtype::F64, order).ok()?;
    let k = &tuned.kernel;
    let blocks = (tuned.rate_1t * 0.05 / k.ops_per_block()).max(1.0) as u64;
    engine::run_threads(k, threads, blocks, order)
        .ok()?
        .clock_hz
}

/// [`fp64_peak`] at a clock already `measured` (the spec file's still wins).
fn fp64_peak_at(
    host: &Host,
    spec: &Spec,
    threads: usize,
    cores_used: usize,
    order: &[usize],
    measured: Option<f64>,
) -> Option<(hostbench_core::Peak, f64, bool)> {
    let isa = Isa::best();
    let tuned = engine::tune(isa, Dtype::F64, order).ok()?;
    let k = &tuned.kernel;
    let under = format!(
        "{} on {threads} thread{}",
        loadclock::Load::of(isa, k.kind).describe(),
        if threads == 1 { "" } else { "s" }
    );
    let (clock, source) = peak_clock(spec, measured, &under)?;
    let pipes = peak::pipes(host, &spec.cpu, isa, k.kind, tuned.instr_per_cycle_1t())?;
    Some((
        peak::cpu_peak(
            cores_used,
            clock,
            &source,
            isa,
            Dtype::F64,
            k.kind,
            &pipes,
            "FLOP/s",
        ),
        clock,
        pipes.inferred(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_clock_holds_with_a_neighbour_on_one_cpu() {
        if !hostbench_core::clock::supported() {
            return;
        }
        let order = affinity::placement_order();
        let threads = order.len().min(4);
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let mut quiet: Vec<f64> = (0..3).filter_map(|_| fp64_clock(threads, &order)).collect();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let busy_cpu = order[threads - 1];
        let mut contended: Vec<f64> = std::thread::scope(|s| {
            s.spawn(|| {
                let _ = affinity::pin_current_thread(busy_cpu);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::black_box(hostbench_core::clock::add_chain(100));
                }
            });
            let v = (0..3).filter_map(|_| fp64_clock(threads, &order)).collect();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            v
        });
        assert!(!quiet.is_empty() && !contended.is_empty());
        let (q, c) = (median(&mut quiet), median(&mut contended));
        // A thread time-sliced with the neighbour reads its clock from the slices it ran: the
        // peak does not drop with the neighbour (a record cannot then exceed 100 % of it).
        assert!(
            c >= q * 0.95,
            "{c} with a neighbour on CPU {busy_cpu}, {q} without"
        );
    }

    #[test]
    fn linpack_budget_sizes_n_to_the_peak_within_the_cap() {
        // 40 GFLOP/s for 2 s: 2/3 n³ = 68 GFLOP at 85 % of it, n = 4672.
        assert_eq!(budget_n(40e9, 2.0, 8000), 4672);
        // A large server hits the memory and time cap; a tiny peak the floor.
        assert_eq!(budget_n(5e12, 2.0, 8000), 8000);
        assert_eq!(budget_n(1e8, 2.0, 8000), 1024);
        assert_eq!(budget_n(1e8, 2.0, 512), 512);
        let n = budget_n(40e9, 2.0, 8000) as f64;
        let secs = 2.0 / 3.0 * n * n * n / (0.85 * 40e9);
        assert!((1.9..=2.0).contains(&secs), "{secs}");
    }
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
