//! The LINPACK drivers (`cpu.linpack`, `cpu.linpack_mxp`): sizing n, the solve through the
//! runner, the FMA readings beside it, and the OpenBLAS reference. Moved out of `lib.rs` so the
//! crate root is a facade (issue 53).

use hostbench_core::model::{Host, Metric, Record, RunResult, Work};
use hostbench_core::spec::Spec;
use hostbench_core::subsystem::ReferenceScope;
use hostbench_core::{affinity, parallel, BenchError, Case, Runner, Sample};
use serde_json::json;

use crate::compute::{peak_clock, physical_cores};
use crate::*;

/// How linpack's order is given: fixed (`--n`), or sized to this host (see
/// [`linpack::choose_n`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LinpackSize {
    Fixed(usize),
    Sized(linpack::Sizing),
}

/// Length of the FMA run that sizes n before the solve: long enough for every thread to be
/// running at once.
const FMA_SIZING_RUN: f64 = 0.2;
/// Each of the two FMA readings beside a solve (`extra.of_fma_rate`'s basis) lasts this share of
/// the solve, within [`FMA_SAMPLE_RUN`, `FMA_BESIDE_MAX`]: on the 16-vCPU device, whose vCPUs
/// share execution units with work that comes and goes, back-to-back 50 ms all-thread readings
/// moved between 368 and 871 GFLOP/s while 1 s ones read 635-651, so a fixed 50 ms reading
/// beside a 3 s solve read anything from 410 to 1149.
const FMA_BESIDE_SHARE: f64 = 0.05;
const FMA_SAMPLE_RUN: f64 = 0.05;
const FMA_BESIDE_MAX: f64 = 0.25;
/// A sized solve expected to take longer than this is announced on stderr before it starts.
const ANNOUNCE_ABOVE_S: f64 = 20.0;

/// Run the HPL-style solve through `runner`: `n` fixed or sized to the measured all-thread FMA
/// rate and the memory available (a fixed n that cannot fit is a usage error); efficiency
/// against the all-core fp64 peak at the clock measured under a full FMA load on the same
/// threads, and `extra.of_fma_rate` against the FMA rate itself, measured beside every solve.
pub fn run_linpack(
    runner: &mut Runner,
    size: LinpackSize,
    threads: usize,
    host: &Host,
    spec: &Spec,
    reference: ReferenceScope,
) -> Result<usize, BenchError> {
    parallel::check_threads([threads], MAX_THREADS, "linpack threads")?;
    // The solve's records are diagnosed with its own overhead too.
    runner.diagnose_with(&crate::Linpack);
    let avail = hostbench_core::host::available_memory_bytes();
    let order = affinity::placement_order();
    if let LinpackSize::Fixed(n) = size {
        check_fits(&format!("--n {n}"), linpack::memory_needed(n), avail)?;
    }
    ensure_effective_cores(runner, threads);
    // n, how it was chosen, and how long a solve was expected to take (sized n only).
    let (n, sizing, expected_s) = match size {
        LinpackSize::Fixed(n) => (n, json!({"rule": "given (--n)"}), None),
        LinpackSize::Sized(rule) => {
            let rate = fp64_fma(threads, &order, FMA_SIZING_RUN).map(|r| r.rate);
            // Without a measured rate (no FMA kernel here) a modest 20 GFLOP/s stands in.
            let rate_used = rate.unwrap_or(20e9);
            let c = linpack::choose_n(rule, rate_used, avail);
            let samples = runner.config().warmup + runner.config().repeat.max(1);
            let what = match rule {
                linpack::Sizing::Seconds(s) => format!("a {} solve", format_duration(s)),
                linpack::Sizing::MemoryShare(f) => format!("{f} of the available memory"),
            };
            if matches!(rule, linpack::Sizing::MemoryShare(_))
                || c.expected_seconds > ANNOUNCE_ABOVE_S
            {
                runner.say(&format!(
                    "linpack: n = {} ({what}: {} needed of {} available), about {} per solve \
                     at {} ({:.0} % of the measured FMA rate), {samples} solve{}: about {} in all",
                    c.n,
                    hostbench_core::units::format_bytes_iec(linpack::memory_needed(c.n)),
                    hostbench_core::units::format_bytes_iec(avail),
                    format_duration(c.expected_seconds),
                    hostbench_core::units::format_value(
                        linpack::EXPECTED_OF_FMA_RATE * rate_used,
                        "FLOP/s"
                    ),
                    linpack::EXPECTED_OF_FMA_RATE * 100.0,
                    if samples == 1 { "" } else { "s" },
                    format_duration(c.expected_seconds * samples as f64),
                ));
            }
            let limit = match c.limit {
                linpack::SizeLimit::Time => "time budget",
                linpack::SizeLimit::Memory => "memory share",
                linpack::SizeLimit::Floor => "smallest order",
            };
            let rule = match rule {
                linpack::Sizing::Seconds(s) => json!({"rule": "time budget", "seconds": s,
                    "memory_share": linpack::BUDGET_MEMORY_SHARE}),
                linpack::Sizing::MemoryShare(f) => {
                    json!({"rule": "memory share", "memory_share": f})
                }
            };
            let mut j = rule;
            j["limited_by"] = json!(limit);
            j["fma_rate"] = json!(rate);
            j["available_bytes"] = json!(avail);
            j["expected_seconds"] = json!(c.expected_seconds);
            (c.n, j, Some(c.expected_seconds))
        }
    };
    let case = Case::new("cpu.linpack", Metric::Throughput, "FLOP/s")
        .work(Work::Solve)
        .param("n", n)
        .param("threads", threads);
    // The issue's own yardstick where this run has it: cpu.flops f64 at the same threads, whose
    // 1 s samples a moving capacity disturbs less than the short readings beside each solve.
    let run_fma = same_run_fp64_flops(runner.result(), threads);
    // The FMA readings' length follows the solve: the sizing's estimate, then the last solve.
    let mut solve_s = expected_s;
    runner.plan(1);
    let cfg = linpack::LinpackConfig {
        n,
        threads,
        seed: 42,
    };
    let physical = physical_cores(spec, &order);
    let cores_used = threads.min(physical);
    let progress = runner.sample_progress();
    // Generated once, by the first (warm-up) sample; every sample solves a fresh copy of it.
    let mut system: Option<linpack::Prepared> = None;
    runner.run_case(
        &case,
        || {
            let prepared = match &mut system {
                Some(p) => p,
                None => system.insert(linpack::Prepared::new(&cfg)?),
            };
            let reading = beside_reading_secs(solve_s);
            let before = fp64_fma(threads, &order, reading);
            let out = prepared.solve(Some(&progress))?;
            solve_s = Some(out.seconds);
            if !out.passed {
                return Err(BenchError::Validation(format!(
                    "scaled residual {:.3e} is not below 16: the solve is wrong",
                    out.residual
                )));
            }
            let mut s = Sample::new(out.flops / out.seconds)
                .with("residual", out.residual)
                .with("seconds", out.seconds)
                .with("panel_share", out.panel_share)
                .with("idle_share", out.idle_share)
                .with("panel_threads", out.panel_threads as f64);
            // The peak's clock and the FMA rate, read beside every solve rather than once: the
            // record's are the medians of these readings (one taken while a neighbour or the
            // hypervisor held the CPU cannot move them), and the clock's spread is kept. Each
            // solve's is the mean of the readings just before and right after it, which
            // bracket it: where the capacity moves both ways (shared execution units), the
            // higher of the two read the moments the solve mostly did not have.
            if let Some(fma) = bracket(before, fp64_fma(threads, &order, reading)) {
                s = s.with("fma_rate", fma.rate);
                if let Some(hz) = fma.clock_hz {
                    s = s.with("clock_hz", hz);
                }
            }
            Ok(s)
        },
        |rec| {
            rec.extra.insert("passed".into(), json!(true));
            rec.extra.insert(
                "label".into(),
                json!("HPL-style (blocked LU with partial pivoting, look-ahead, AVX-512/AVX2 GEMM), not HPL"),
            );
            rec.extra.insert("nb".into(), json!(linpack::NB));
            rec.extra.insert("sizing".into(), sizing);
            if let Some(fma) = rec.extra.get("fma_rate").and_then(|v| v.as_f64()) {
                let (of_fma, warning) = of_fma_rate(rec.value, fma);
                rec.extra.insert("of_fma_rate".into(), json!(of_fma));
                rec.warnings.extend(warning);
                rec.extra.insert(
                    "of_fma_rate_basis".into(),
                    json!(format!(
                        "median solve rate over the median of the all-thread f64 FMA rates \
                         ({} kernel, the cpu.flops f64 one, {threads} thread{} pinned as the \
                         solve's; the mean of a reading just before and one right after each \
                         solve, each {:.0} % of the solve, {:.0}-{:.0} ms) in this process",
                        Isa::best().name(),
                        if threads == 1 { "" } else { "s" },
                        FMA_BESIDE_SHARE * 100.0,
                        FMA_SAMPLE_RUN * 1e3,
                        FMA_BESIDE_MAX * 1e3,
                    )),
                );
            }
            if let Some(flops) = run_fma {
                rec.extra.insert("cpu_flops_rate".into(), json!(flops));
                rec.extra
                    .insert("of_cpu_flops".into(), json!(rec.value / flops));
            }
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
    )?;
    Ok(n)
}

/// HPL-MxP at order `n` on `threads` threads (`linpack::mxp`): the LU in bf16 with f32 sums
/// where the CPU has a bf16 unit (f32 elsewhere), GMRES refinement in f64, HPL's residual.
/// Beside the `cpu.linpack` record of the same n and threads, when this run has one, the
/// speed-up over it is recorded and said. Refinement that fails is a failed case with its
/// reason.
pub fn run_linpack_mxp(runner: &mut Runner, n: usize, threads: usize) -> Result<(), BenchError> {
    use linpack::mxp::{Hook, Unit};
    mxp_case(runner, n, threads, Hook::None, Unit::best())
}

/// [`run_linpack_mxp`] on a given unit, with a fault a test can force.
pub(crate) fn mxp_case(
    runner: &mut Runner,
    n: usize,
    threads: usize,
    hook: linpack::mxp::Hook,
    unit: linpack::mxp::Unit,
) -> Result<(), BenchError> {
    use linpack::mxp;
    parallel::check_threads([threads], MAX_THREADS, "linpack threads")?;
    let avail = hostbench_core::host::available_memory_bytes();
    check_fits(&format!("--mxp at n {n}"), mxp::memory_needed(n), avail)?;
    let case = Case::new("cpu.linpack_mxp", Metric::Throughput, "FLOP/s")
        .work(Work::Solve)
        .param("n", n)
        .param("threads", threads)
        .param("precision", unit.precision().name());
    runner.plan(1);
    let cfg = mxp::MxpConfig {
        n,
        threads,
        seed: 42,
        hook,
    };
    let f64_rate = runner
        .result()
        .records
        .iter()
        .rev()
        .find(|r| {
            r.benchmark == "cpu.linpack"
                && r.params.get("n").and_then(|v| v.as_u64()) == Some(n as u64)
                && r.params.get("threads").and_then(|v| v.as_u64()) == Some(threads as u64)
        })
        .map(|r| r.value);
    let progress = runner.sample_progress();
    let mut system: Option<mxp::Prepared> = None;
    runner.run_case(
        &case,
        || {
            let prepared = match &mut system {
                Some(p) => p,
                None => system.insert(mxp::Prepared::with_unit(&cfg, unit)?),
            };
            let out = prepared.solve(Some(&progress))?;
            if let Some(why) = out.failure {
                return Err(BenchError::Validation(why));
            }
            Ok(Sample::new(out.flops / out.seconds)
                .with("residual", out.residual)
                .with("seconds", out.seconds)
                .with("factor_seconds", out.factor_s)
                .with("refine_seconds", out.seconds - out.factor_s)
                .with("iterations", out.iterations as f64)
                .with("gmres_cycles", out.cycles as f64)
                .with("diag_share", out.diag_share)
                .with("idle_share", out.idle_share))
        },
        |rec| {
            rec.extra.insert("passed".into(), json!(true));
            rec.extra.insert(
                "label".into(),
                json!(format!(
                    "HPL-MxP-style (LU without pivoting, {} update, GMRES refinement in f64, \
                     HPL-MxP's diagonally dominant matrix), not HPL-MxP",
                    unit.precision().name()
                )),
            );
            rec.extra.insert("unit".into(), json!(unit.name()));
            if let Some(why) = mxp::Unit::choose().1.filter(|_| unit == mxp::Unit::best()) {
                rec.extra.insert("unit_note".into(), json!(why));
            }
            rec.extra.insert("nb".into(), json!(mxp::NB));
            rec.extra.insert(
                "matrix".into(),
                json!(
                    "HPL-MxP's: off-diagonal entries uniform in [-0.5, 0.5), each diagonal \
                     entry the sum of the absolute values of the others in its row; b uniform"
                ),
            );
            rec.extra.insert(
                "refinement".into(),
                json!({
                    "method": "restarted GMRES, right-preconditioned by the low-precision LU, in f64",
                    "restart": 30,
                    "target_scaled_residual": mxp::TARGET,
                    "max_iterations": mxp::MAX_ITERATIONS,
                }),
            );
            rec.extra.insert(
                "timed".into(),
                json!(
                    "factorisation + first solve + refinement; generation, rounding to f32 \
                     and the final residual check are not"
                ),
            );
            if let Some(f64_rate) = f64_rate {
                rec.extra.insert("linpack_flops".into(), json!(f64_rate));
                rec.extra
                    .insert("speedup_over_linpack".into(), json!(rec.value / f64_rate));
            }
        },
    )?;
    if let (Some(rec), Some(f64_rate)) = (
        runner
            .result()
            .records
            .last()
            .filter(|r| r.benchmark == "cpu.linpack_mxp"),
        f64_rate,
    ) {
        let line = format!(
            "linpack: HPL-MxP {} (update {}; {:.0} GMRES iterations) is {:.2} x the f64 solve's {} \
             at n = {n}",
            hostbench_core::units::format_value(rec.value, "FLOP/s"),
            unit.name(),
            rec.extra
                .get("iterations")
                .and_then(|v| v.as_f64())
                .unwrap_or(f64::NAN),
            rec.value / f64_rate,
            hostbench_core::units::format_value(f64_rate, "FLOP/s"),
        );
        runner.say(&line);
    }
    Ok(())
}

/// A fixed `n` that cannot fit in the memory available is a usage error, before anything runs.
fn check_fits(what: &str, need: u64, avail: u64) -> Result<(), BenchError> {
    if avail > 0 && need > avail {
        return Err(BenchError::invalid(format!(
            "{what} needs {} of memory but only {} is available",
            hostbench_core::units::format_bytes_iec(need),
            hostbench_core::units::format_bytes_iec(avail)
        )));
    }
    Ok(())
}

/// "42 s", "7.5 min", "2.1 h".
fn format_duration(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else if s < 90.0 {
        format!("{s:.0} s")
    } else if s < 5400.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

/// Most wheel-bundled OpenBLAS copies tried beside the system's (each costs a solve).
const MAX_WHEEL_BLAS: usize = 3;

/// OpenBLAS `dgetrf` + `dgetrs` beside the record just measured (`linpack::openblas`): the
/// system library as it loads; where it fell back to a core below this CPU's, the same library
/// again with the right `OPENBLAS_CORETYPE`; and the OpenBLAS builds Python wheels bundle. The
/// fastest is the reference, named; every one tried is listed in `extra.blas`. A missing
/// library or a failed residual is a warning on the record, never a failed case.
fn attach_openblas(rec: &mut Record, cfg: &linpack::LinpackConfig, runs: usize) {
    use linpack::openblas::{fell_back, right_cores, wheel_libraries, CpuFeatures, OpenBlas};
    // OPENBLAS_CORETYPE overrides DYNAMIC_ARCH's choice for the whole process (some machines set
    // it for old OpenBLAS builds that crash on new CPUs): the command and the note name it, and
    // hostbench then forces no other core.
    let env_forced = std::env::var("OPENBLAS_CORETYPE")
        .ok()
        .filter(|c| !c.trim().is_empty());
    let cpu = CpuFeatures::detect();
    let mut tried: Vec<serde_json::Value> = Vec::new();
    // (median FLOP/s, the runs, the library's description)
    let mut best: Option<(f64, Vec<f64>, String)> = None;
    let mut first_error: Option<BenchError> = None;
    let mut measure = |blas: &OpenBlas, tried: &mut Vec<serde_json::Value>| {
        let (entry, ran) = blas_runs(blas, cfg, runs);
        tried.push(entry);
        match ran {
            Ok((median, v)) => {
                if best.as_ref().is_none_or(|b| median > b.0) {
                    best = Some((median, v, blas.describe()));
                }
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    };
    let mut libs = vec![OpenBlas::load()];
    libs.extend(
        wheel_libraries()
            .into_iter()
            .take(MAX_WHEEL_BLAS)
            .map(|(path, origin)| OpenBlas::load_path(&path, origin)),
    );
    for (i, lib) in libs.into_iter().enumerate() {
        let blas = match lib {
            Ok(b) => b,
            Err(e) => {
                tried.push(json!({"error": e.to_string()}));
                continue;
            }
        };
        measure(&blas, &mut tried);
        let core = blas.corename().unwrap_or_default();
        if i == 0 {
            rec.extra
                .insert("openblas_corename".into(), json!(core.clone()));
        }
        if env_forced.is_some() || !fell_back(&core, cpu) {
            continue;
        }
        let want = right_cores(cpu);
        let forced = want.iter().find_map(|c| blas.load_forced(c).transpose());
        match forced {
            Some(Ok(f)) => measure(&f, &mut tried),
            Some(Err(e)) => tried.push(json!({"library": blas.origin, "error": e.to_string()})),
            None => tried.push(json!({
                "library": blas.origin,
                "error": format!("this OpenBLAS takes none of OPENBLAS_CORETYPE={}", want.join(", ")),
            })),
        }
    }
    if !tried.is_empty() {
        rec.extra.insert("blas".into(), json!(tried));
    }
    let outcome = match &best {
        Some((_, values, described)) => hostbench_core::reference::reference(
            "OpenBLAS",
            described.clone(),
            values,
            rec.value,
            hostbench_core::reference::Better::Higher,
        ),
        None => Err(first_error.unwrap_or_else(|| {
            BenchError::unsupported("OpenBLAS not installed: apt install libopenblas0")
        })),
    };
    let which = best
        .as_ref()
        .map_or("libopenblas.so.0".to_string(), |b| b.2.clone());
    let command = format!(
        "{}OpenBLAS dgetrf_ + dgetrs_ ({which}, loaded at run time) on the same system: n={} \
         seed={}, openblas_set_num_threads({}), HPL operation count, residual checked; the \
         fastest of {} OpenBLAS librar{} tried (extra.blas)",
        env_forced.as_ref().map_or(String::new(), |c| format!(
            "OPENBLAS_CORETYPE={c} (from the environment) "
        )),
        cfg.n,
        cfg.seed,
        cfg.threads,
        tried.len().max(1),
        if tried.len() == 1 { "y" } else { "ies" },
    );
    let mut why = String::from(
        "OpenBLAS runs after hostbench in the same process on the same system; its GEMM is \
         tuned per CPU model (DYNAMIC_ARCH picks one at load), and a small n is dominated by the \
         panel factorisation, where the two implementations differ most",
    );
    if let Some(c) = &env_forced {
        why = format!(
            "OPENBLAS_CORETYPE={c} is set in the environment, so OpenBLAS ran its {c} kernels \
             whatever this CPU is (unset it for OpenBLAS's own choice); {why}"
        );
    }
    hostbench_core::reference::attach(rec, outcome, &command, &why);
}

/// The all-thread f64 FMA rate and the core clock under it.
struct FmaRun {
    /// FLOP/s of `threads` threads together, counted as `cpu.flops` counts them.
    rate: f64,
    clock_hz: Option<f64>,
}

/// `threads` threads running the widest fp64 FMA kernel (the `cpu.flops` one) for about
/// `seconds`, then the clock under the same instruction class on each thread.
fn fp64_fma(threads: usize, order: &[usize], seconds: f64) -> Option<FmaRun> {
    let tuned = engine::tune(Isa::best(), Dtype::F64, order).ok()?;
    let k = &tuned.kernel;
    let blocks = (tuned.rate_1t * seconds / k.ops_per_block()).max(1.0) as u64;
    let r = engine::run_threads(k, threads, blocks, order).ok()?;
    let work = blocks as f64 * k.ops_per_block() * threads as f64;
    Some(FmaRun {
        rate: work / r.wall_s,
        clock_hz: r.clock_hz,
    })
}

/// The FMA rate over a solve from the readings that bracket it: their mean (rate and clock), or
/// the one that ran.
fn bracket(a: Option<FmaRun>, b: Option<FmaRun>) -> Option<FmaRun> {
    match (a, b) {
        (Some(a), Some(b)) => Some(FmaRun {
            rate: (a.rate + b.rate) / 2.0,
            clock_hz: engine::mean([a.clock_hz, b.clock_hz].into_iter()),
        }),
        (a, b) => a.or(b),
    }
}

/// How long each FMA reading beside a solve of `solve_s` runs (50 ms before the first solve of
/// a fixed n).
fn beside_reading_secs(solve_s: Option<f64>) -> f64 {
    solve_s.map_or(FMA_SAMPLE_RUN, |s| {
        (s * FMA_BESIDE_SHARE).clamp(FMA_SAMPLE_RUN, FMA_BESIDE_MAX)
    })
}

/// This run's `cpu.flops` f64 rate at `threads` threads, on the fastest ISA it measured.
fn same_run_fp64_flops(run: &RunResult, threads: usize) -> Option<f64> {
    run.records
        .iter()
        .filter(|r| {
            r.benchmark == "cpu.flops"
                && r.params.get("dtype").and_then(|v| v.as_str()) == Some("f64")
                && r.params.get("threads").and_then(|v| v.as_u64()) == Some(threads as u64)
        })
        .map(|r| r.value)
        .filter(|v| *v > 0.0)
        .max_by(f64::total_cmp)
}

/// The solve's share of the FMA rate, and a warning where it is above 1: a solve cannot outrun
/// the FMA kernel on the same threads, so the readings were lowered by other work.
fn of_fma_rate(solve: f64, fma: f64) -> (f64, Option<String>) {
    let of = solve / fma;
    let warning = (of > 1.0).then(|| {
        format!(
            "of_fma_rate {of:.2} is above 1: the FMA rate read beside the solves was lower than the \
             solves had (other work on these CPUs, or capacity that moves; see the record's \
             conditions), so the ratio overstates the solve"
        )
    });
    (of, warning)
}

/// The core clock while `threads` threads run the widest fp64 FMA kernel (50 ms of it).
#[cfg(test)]
fn fp64_clock(threads: usize, order: &[usize]) -> Option<f64> {
    fp64_fma(threads, order, FMA_SAMPLE_RUN)?.clock_hz
}

/// `runs` solves of `cfg` with `blas`: the entry for `extra.blas`, and the median FLOP/s with
/// the runs sorted, or why it gave none.
fn blas_runs(
    blas: &linpack::openblas::OpenBlas,
    cfg: &linpack::LinpackConfig,
    runs: usize,
) -> (serde_json::Value, Result<(f64, Vec<f64>), BenchError>) {
    let mut entry = json!({
        "library": blas.origin,
        "config": blas.version(),
        "corename": blas.corename(),
        "forced_coretype": blas.forced,
    });
    let outcome = (0..runs.max(1))
        .map(|_| blas.solve(cfg).map(|r| r.flops / r.seconds))
        .collect::<Result<Vec<f64>, _>>()
        .map(|mut v| {
            v.sort_by(f64::total_cmp);
            (v[v.len() / 2], v)
        });
    match &outcome {
        Ok((median, _)) => entry["flops_per_second"] = json!(median),
        Err(e) => entry["error"] = json!(e.to_string()),
    }
    (entry, outcome)
}

/// All-core fp64 peak on the widest ISA at a clock already `measured` (the spec file's still
/// wins) while `threads` threads ran the FMA kernel (the clock a dense solve actually gets),
/// and whether its FMA rate was only inferred from a 1-thread run (no document fixes it for
/// this CPU).
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
    fn the_fma_basis_brackets_the_solve_and_a_ratio_above_one_is_flagged() {
        let run = |rate, hz: Option<f64>| Some(FmaRun { rate, clock_hz: hz });
        // The readings before and after a solve are averaged, clock with rate: a capacity that
        // moves both ways is met half-way, not at its best moment.
        let b = bracket(run(410e9, Some(2.4e9)), run(870e9, Some(2.6e9))).unwrap();
        assert_eq!((b.rate, b.clock_hz), (640e9, Some(2.5e9)));
        let b = bracket(run(600e9, None), run(700e9, Some(2.4e9))).unwrap();
        assert_eq!((b.rate, b.clock_hz), (650e9, Some(2.4e9)));
        assert_eq!(bracket(None, run(90e9, None)).unwrap().rate, 90e9);
        assert_eq!(bracket(run(80e9, None), None).unwrap().rate, 80e9);
        assert!(bracket(None, None).is_none());
        // A reading lasts 5 % of the solve, from 50 ms to a quarter second; 50 ms before the
        // first solve of a fixed n.
        assert_eq!(beside_reading_secs(None), FMA_SAMPLE_RUN);
        assert_eq!(beside_reading_secs(Some(0.2)), FMA_SAMPLE_RUN);
        assert!((beside_reading_secs(Some(3.0)) - 0.15).abs() < 1e-12);
        assert_eq!(beside_reading_secs(Some(600.0)), FMA_BESIDE_MAX);
        // 0.86 is a ratio; 1.7 is a disturbed reading, said as such.
        let (of, w) = of_fma_rate(97e9, 113e9);
        assert!((of - 0.858).abs() < 1e-3 && w.is_none(), "{of} {w:?}");
        let (of, w) = of_fma_rate(98e9, 57e9);
        assert!(of > 1.7);
        assert!(w.unwrap().starts_with("of_fma_rate 1.72 is above 1"));
    }

    /// `extra.of_cpu_flops` divides by this run's cpu.flops f64 at the solve's threads, the
    /// fastest ISA's; nothing else stands in for it.
    #[test]
    fn the_same_runs_fp64_flops_at_the_solves_threads_is_found() {
        let rec = |bench: &str, dtype: &str, isa: &str, threads: usize, value: f64| {
            let case = Case::new(bench, Metric::Throughput, "FLOP/s")
                .param("dtype", dtype)
                .param("isa", isa)
                .param("threads", threads);
            hostbench_core::runner::record_from_samples(&case, vec![value; 3])
        };
        let mut run = RunResult::new(Host::default());
        assert_eq!(same_run_fp64_flops(&run, 16), None);
        run.records = vec![
            rec("cpu.flops", "f64", "avx512", 16, 665e9),
            rec("cpu.flops", "f64", "avx2-fma", 16, 400e9),
            rec("cpu.flops", "f64", "avx512", 8, 500e9),
            rec("cpu.flops", "f32", "avx512", 16, 1330e9),
            rec("cpu.iops", "f64", "avx512", 16, 900e9),
        ];
        assert_eq!(same_run_fp64_flops(&run, 16), Some(665e9));
        assert_eq!(same_run_fp64_flops(&run, 8), Some(500e9));
        assert_eq!(same_run_fp64_flops(&run, 2), None);
    }

    #[test]
    fn the_peak_clock_holds_with_a_neighbour_on_one_cpu() {
        if !hostbench_core::clock::supported() {
            return;
        }
        let order = affinity::placement_order();
        let threads = order.len().min(4);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let busy_cpu = order[threads - 1];
        let contended = || {
            stop.store(false, std::sync::atomic::Ordering::Relaxed);
            std::thread::scope(|s| {
                s.spawn(|| {
                    let _ = affinity::pin_current_thread(busy_cpu);
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::black_box(hostbench_core::clock::add_chain(100));
                    }
                });
                let c = fp64_clock(threads, &order);
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                c
            })
        };
        // Quiet and contended readings alternate, and each pair is compared on its own: a shared
        // host's clock drifts by several per cent over seconds, which separate medians would
        // read as the neighbour's doing.
        let mut ratios: Vec<f64> = (0..4)
            .filter_map(|_| Some(contended()? / fp64_clock(threads, &order)?))
            .collect();
        assert!(!ratios.is_empty());
        ratios.sort_by(f64::total_cmp);
        let r = ratios[ratios.len() / 2];
        // A thread time-sliced with the neighbour reads its clock from the slices it ran: the
        // peak does not drop with the neighbour (a record cannot then exceed 100 % of it). A
        // reading taken over the neighbour's slices too would be half the clock on that thread.
        assert!(
            r >= 0.85,
            "contended/quiet clock {r:.3} with a neighbour on CPU {busy_cpu} ({ratios:?})"
        );
    }
}
