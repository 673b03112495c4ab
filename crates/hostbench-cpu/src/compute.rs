//! The compute sweep (`cpu.flops`/`cpu.iops`): dtype × ISA × threads through the shared runner,
//! each record with its clock, operations per cycle and peak; and the peak table `info` prints.
//! Its own module so `lib.rs` stays the crate's facade (issue 53).

use hostbench_core::model::{Host, Metric, Record, Work};
use hostbench_core::spec::Spec;
use hostbench_core::subsystem::ReferenceScope;
use hostbench_core::{affinity, BenchError, Case, Runner, Sample};
use serde_json::json;

use crate::*;

/// Physical cores a peak may count: the spec's `cpu.cores` when given, else the distinct cores
/// among the CPUs this process may run on (SMT siblings share one core's pipes).
pub(crate) fn physical_cores(spec: &Spec, cpus: &[usize]) -> usize {
    spec.cpu
        .cores
        .map(|c| c as usize)
        .unwrap_or_else(|| affinity::physical_cores(cpus))
        .max(1)
}

/// The clock a peak is computed with: the spec file's when given, else the measured one
/// (labelled `measured_as` in the basis); `None` when neither exists.
pub(crate) fn peak_clock(
    spec: &Spec,
    measured: Option<f64>,
    measured_as: &str,
) -> Option<(f64, String)> {
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
                    .work(Work::Compute)
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
