//! CPU burn-in: every unit this CPU has, on each logical CPU in turn and then on all at once, every
//! result compared bit for bit with its known answer.
//!
//! Why these units: the peak kernels (`kernels.rs`) already drive each ISA × dtype at its tuned
//! peak and compare every lane of every chain with its closed form, so the burn reuses them (the
//! FMA units run at the standalone `cpu` rate by construction). Two scalar units add what the peak
//! kernels lack: an integer multiply-add chain (`int-lcg`, closed form by jump-ahead) and a long
//! dependent FP chain of FMA, square root and division (`fma-chain`, chaotic so one flipped bit
//! changes the end value; compared with the same work done on the first CPU), because reported
//! silent corruptions concentrate in such transcendental-style sequences. These two are the units
//! `HOSTBENCH_FAULT=cpu:N:UNIT` can corrupt: the fault flips one bit of a computed value before it
//! is compared, so the detection path is the real one.

use std::time::{Duration, Instant};

use hostbench_core::affinity;
use hostbench_core::burn::{Fault, Mismatch, TimelinePoint, UnitRun};
use hostbench_core::BenchError;

use crate::engine;
use crate::isa::{Dtype, Isa};
use crate::kernels::{chain_candidates, Kernel, OpKind};

/// Units a `cpu:N:UNIT` fault can name.
pub const INJECTABLE: &[&str] = &["int-lcg", "fma-chain"];

/// How long one step of a unit runs before the round-robin moves on.
const QUANTUM: Duration = Duration::from_millis(20);

/// Independent chains of `fma-chain` (instruction-level parallelism) and steps per chain per call.
const FP_CHAINS: usize = 8;
const FP_STEPS: usize = 4096;
const LCG_STEPS: u64 = 1 << 16;
const LCG_A: u64 = 6_364_136_223_846_793_005;
const LCG_C: u64 = 1_442_695_040_888_963_407;

/// What to burn.
#[derive(Debug, Clone)]
pub struct CpuBurnConfig {
    pub cpus: Vec<usize>,
    /// Time for the each-CPU-in-turn phase (split between the CPUs) and the all-CPU phase.
    pub each: Duration,
    pub all: Duration,
    /// Timeline interval.
    pub interval: Duration,
    pub fault: Option<Fault>,
    /// LINPACK order for the all-CPU phase's solve (0: none).
    pub linpack_n: usize,
}

/// What the burn found.
#[derive(Debug, Default)]
pub struct CpuBurn {
    pub units: Vec<UnitRun>,
    pub timeline: Vec<TimelinePoint>,
}

#[derive(Clone)]
enum Work {
    Peak(Kernel, u64),
    IntLcg,
    FmaChain(std::sync::Arc<Vec<[u64; FP_CHAINS]>>),
}

#[derive(Clone)]
struct Unit {
    name: String,
    work: Work,
    rate_unit: &'static str,
    ops_per_check: f64,
}

/// Check the fault names a unit that can be injected.
pub fn validate_fault(fault: &Option<Fault>) -> Result<(), BenchError> {
    if let Some(Fault::Cpu { unit, .. }) = fault {
        if !INJECTABLE.iter().any(|u| matches_unit(unit, u)) {
            return Err(BenchError::invalid(format!(
                "HOSTBENCH_FAULT: CPU unit {unit:?} cannot be injected (use int or fma)"
            )));
        }
    }
    Ok(())
}

/// `fma` names `fma-chain`, `int` names `int-lcg`, a full name names itself.
fn matches_unit(token: &str, unit: &str) -> bool {
    unit == token || unit.split('-').next() == Some(token)
}

fn unit_name(isa: Isa, dtype: Dtype) -> String {
    format!("{isa}-{dtype}").to_lowercase()
}

/// Every unit this CPU runs, plus the ISA × dtype pairs it lacks (listed, not run).
fn plan(cpus: &[usize]) -> Result<(Vec<Unit>, Vec<UnitRun>), BenchError> {
    let mut units = vec![
        Unit {
            name: "int-lcg".into(),
            work: Work::IntLcg,
            rate_unit: "OP/s",
            ops_per_check: 2.0 * LCG_STEPS as f64,
        },
        Unit {
            name: "fma-chain".into(),
            work: Work::FmaChain(std::sync::Arc::new(fp_reference(cpus)?)),
            rate_unit: "FLOP/s",
            ops_per_check: 6.0 * FP_STEPS as f64,
        },
    ];
    let mut absent = Vec::new();
    for &isa in Isa::all() {
        for dtype in isa.dtypes() {
            let name = unit_name(isa, dtype);
            if let Err(e) = isa.supports(dtype) {
                if !foreign(isa) {
                    absent.push(UnitRun::not_run("cpu", "all", &name, e.to_string()));
                }
                continue;
            }
            // The FMA units are tuned (the same chain count `hostbench cpu` picks) so they run at
            // its peak; the rest take a middle chain count, enough to keep their pipes busy.
            let kernel = if engine_kind(isa, dtype) == OpKind::Fma {
                engine::tune(isa, dtype, cpus)?.kernel
            } else {
                let c = chain_candidates(isa, dtype);
                Kernel::new(isa, dtype, c[c.len() / 2])?
            };
            let blocks = engine::calibrate(&kernel, QUANTUM / 4)?;
            let checks = (kernel.chains * kernel.lanes) as f64;
            units.push(Unit {
                name,
                rate_unit: if dtype.is_float() { "FLOP/s" } else { "OP/s" },
                ops_per_check: blocks as f64 * kernel.ops_per_block() / checks,
                work: Work::Peak(kernel, blocks),
            });
        }
    }
    Ok((units, absent))
}

/// An ISA of another architecture than this build's: not a unit this CPU could have.
fn foreign(isa: Isa) -> bool {
    let arm = matches!(isa, Isa::Neon | Isa::NeonDotprod | Isa::I8mm | Isa::ArmBf16);
    if cfg!(target_arch = "aarch64") {
        !arm && isa != Isa::Scalar
    } else {
        arm
    }
}

fn engine_kind(isa: Isa, dtype: Dtype) -> OpKind {
    crate::kernels::op_kind(isa, dtype)
}

/// `fma-chain`'s expected end values for a few seeds, computed on the first CPU.
fn fp_reference(cpus: &[usize]) -> Result<Vec<[u64; FP_CHAINS]>, BenchError> {
    let first = cpus.first().copied().unwrap_or(0);
    std::thread::scope(|s| {
        s.spawn(move || {
            let _ = affinity::pin_current_thread(first);
            (0..SEEDS).map(fp_chain).collect()
        })
        .join()
        .map_err(|_| BenchError::Failed("reference thread panicked".into()))
    })
}

const SEEDS: u64 = 4;

/// A chaotic chain (logistic map through an FMA, then a square root and a division) per lane.
fn fp_chain(seed: u64) -> [u64; FP_CHAINS] {
    let mut x = [0.0f64; FP_CHAINS];
    for (j, v) in x.iter_mut().enumerate() {
        *v = 0.1 + 0.1 * j as f64 + 0.01 * seed as f64;
    }
    let r = std::hint::black_box(3.99f64);
    for _ in 0..FP_STEPS {
        for v in x.iter_mut() {
            let rx = r * *v;
            let y = (-rx).mul_add(*v, rx);
            *v = (y + y.sqrt()) / (1.0 + y);
        }
    }
    x.map(f64::to_bits)
}

/// `x_{n}` of the LCG from `x0` by jump-ahead (binary powers of the affine map).
fn lcg_closed_form(x0: u64, n: u64) -> u64 {
    let (mut acc_a, mut acc_c) = (1u64, 0u64);
    let (mut a, mut c) = (LCG_A, LCG_C);
    let mut k = n;
    while k > 0 {
        if k & 1 == 1 {
            acc_a = acc_a.wrapping_mul(a);
            acc_c = acc_c.wrapping_mul(a).wrapping_add(c);
        }
        c = c.wrapping_mul(a.wrapping_add(1));
        a = a.wrapping_mul(a);
        k >>= 1;
    }
    acc_a.wrapping_mul(x0).wrapping_add(acc_c)
}

/// One unit's running tally on one thread.
struct Tally {
    run: UnitRun,
    busy: Duration,
    ops: f64,
    /// Per timeline interval: (ops, seconds busy), so the rate is the unit's while it ran.
    buckets: Vec<(f64, f64)>,
}

/// Run one step of `unit`; `corrupt` says whether to flip a bit of the value before comparing.
fn step(unit: &Unit, call: u64, corrupt: &dyn Fn(u64) -> bool, t: &mut Tally) {
    match &unit.work {
        Work::Peak(k, blocks) => {
            t.run.checks += (k.chains * k.lanes) as u64;
            if let Err(e) = k.run(*blocks) {
                t.run.record_error(Mismatch {
                    location: "kernel chains".into(),
                    expected: "closed form".into(),
                    got: e.to_string(),
                    bits: Vec::new(),
                    detail: None,
                });
            }
        }
        Work::IntLcg => {
            let x0 = std::hint::black_box(call.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut x = x0;
            for _ in 0..std::hint::black_box(LCG_STEPS) {
                x = x.wrapping_mul(LCG_A).wrapping_add(LCG_C);
            }
            t.run.checks += 1;
            if corrupt(t.run.checks) {
                x ^= 1 << 17;
            }
            let want = lcg_closed_form(x0, LCG_STEPS);
            if x != want {
                t.run
                    .record_error(Mismatch::of_bits(format!("call {call}"), want, x));
            }
        }
        Work::FmaChain(reference) => {
            let seed = call % SEEDS;
            let mut got = fp_chain(std::hint::black_box(seed));
            let want = reference[seed as usize];
            for (j, g) in got.iter_mut().enumerate() {
                t.run.checks += 1;
                if corrupt(t.run.checks) {
                    *g ^= 1 << 40;
                }
                if *g != want[j] {
                    t.run.record_error(Mismatch::of_bits(
                        format!("call {call} chain {j}"),
                        want[j],
                        *g,
                    ));
                }
            }
        }
    }
}

/// Round-robin every unit on this (pinned) thread until `until`.
fn burn_thread(
    cpu: usize,
    phase: &str,
    units: &[Unit],
    start: Instant,
    until: Instant,
    cfg: &CpuBurnConfig,
) -> Vec<Tally> {
    let pinned = affinity::pin_current_thread(cpu);
    let place = if phase == "each" {
        format!("cpu{cpu}")
    } else {
        "all".into()
    };
    let mut tallies: Vec<Tally> = units
        .iter()
        .map(|u| {
            let mut run = UnitRun::new("cpu", &place, phase, &u.name, u.rate_unit);
            run.cpu = Some(cpu);
            run.place = format!("cpu{cpu}");
            if let Err(e) = &pinned {
                run.note = Some(format!("not pinned: {e}"));
            }
            Tally {
                run,
                busy: Duration::ZERO,
                ops: 0.0,
                buckets: Vec::new(),
            }
        })
        .collect();
    let mut call = 0u64;
    loop {
        for (u, t) in units.iter().zip(tallies.iter_mut()) {
            let began = Instant::now();
            let checks_before = t.run.checks;
            while began.elapsed() < QUANTUM / 2 {
                let corrupt = |checks: u64| fault_due(cfg, cpu, &u.name, checks);
                step(u, call, &corrupt, t);
                call += 1;
            }
            let done = (t.run.checks - checks_before) as f64 * u.ops_per_check;
            t.busy += began.elapsed();
            t.ops += done;
            // The timeline follows the all-CPU phase only: the each-CPU phase runs one thread, so
            // its rate is not comparable with the all-CPU phase's (it is in the unit's record).
            if phase != "all" {
                continue;
            }
            let bucket = (start.elapsed().as_secs_f64() / cfg.interval.as_secs_f64()) as usize;
            if t.buckets.len() <= bucket {
                t.buckets.resize(bucket + 1, (0.0, 0.0));
            }
            t.buckets[bucket].0 += done;
            t.buckets[bucket].1 += began.elapsed().as_secs_f64();
        }
        if Instant::now() >= until {
            break;
        }
    }
    for t in &mut tallies {
        t.run.seconds = t.busy.as_secs_f64();
        t.run.rate = t.ops / t.busy.as_secs_f64().max(1e-9);
        t.run.settle();
    }
    tallies
}

/// Whether the configured fault fires for this check (`checks` already counted this one).
fn fault_due(cfg: &CpuBurnConfig, cpu: usize, unit: &str, checks: u64) -> bool {
    match &cfg.fault {
        Some(Fault::Cpu {
            cpu: c,
            unit: u,
            after,
        }) => *c == cpu && matches_unit(u, unit) && checks > *after,
        _ => false,
    }
}

/// Run the burn: each CPU in turn, then all at once (with a LINPACK solve alongside).
pub fn run(cfg: &CpuBurnConfig) -> Result<CpuBurn, BenchError> {
    validate_fault(&cfg.fault)?;
    let (units, absent) = plan(&cfg.cpus)?;
    let start = Instant::now();
    let sampler = hostbench_core::burn::Sampler::start(start, cfg.interval);
    let mut out = CpuBurn::default();
    let mut timeline_tallies: Vec<Vec<Tally>> = Vec::new();
    let slice = cfg.each / cfg.cpus.len().max(1) as u32;
    for &cpu in &cfg.cpus {
        let until = Instant::now() + slice;
        let units = &units;
        let t = std::thread::scope(|s| {
            s.spawn(move || burn_thread(cpu, "each", units, start, until, cfg))
                .join()
        })
        .map_err(|_| BenchError::Failed(format!("burn thread for CPU {cpu} panicked")))?;
        timeline_tallies.push(t);
    }
    let until = Instant::now() + cfg.all;
    let mut linpack = None;
    let all: Vec<Vec<Tally>> = std::thread::scope(|s| {
        let handles: Vec<_> = cfg
            .cpus
            .iter()
            .map(|&cpu| {
                let units = &units;
                s.spawn(move || burn_thread(cpu, "all", units, start, until, cfg))
            })
            .collect();
        if cfg.linpack_n > 0 {
            linpack = Some(crate::linpack::run(&crate::linpack::LinpackConfig {
                n: cfg.linpack_n,
                threads: cfg.cpus.len(),
                seed: 51,
            }));
        }
        handles
            .into_iter()
            .map(|h| h.join())
            .collect::<Result<Vec<_>, _>>()
    })
    .map_err(|_| BenchError::Failed("an all-CPU burn thread panicked".into()))?;
    timeline_tallies.extend(all);
    if let Some(lp) = linpack {
        let mut run = UnitRun::new("cpu", "all", "all", "linpack", "FLOP/s");
        match lp {
            Ok(o) => {
                run.checks = 1;
                run.seconds = o.seconds;
                run.rate = o.flops / o.seconds.max(1e-9);
                run.note = Some(format!("n={} scaled residual {:.3e}", o.n, o.residual));
                if !o.passed {
                    run.record_error(Mismatch {
                        location: format!("n={}", o.n),
                        expected: "scaled residual < 16".into(),
                        got: format!("{:.3e}", o.residual),
                        bits: Vec::new(),
                        detail: None,
                    });
                }
                run.settle();
            }
            Err(e) => run.note = Some(e.to_string()),
        }
        out.units.push(run);
    }
    // The timeline: per interval and unit, the ops summed over the threads that ran it.
    // Each interval's own clock and temperature, read while it ran.
    let readings = sampler.finish();
    let ended_s = start.elapsed().as_secs_f64();
    for (i, u) in units.iter().enumerate() {
        let n = timeline_tallies
            .iter()
            .map(|t| t[i].buckets.len())
            .max()
            .unwrap_or(0);
        for b in 0..n {
            // Threads run side by side: their rates add.
            let rate: f64 = timeline_tallies
                .iter()
                .filter_map(|t| t[i].buckets.get(b))
                .filter(|(_, busy)| *busy > 0.0)
                .map(|(ops, busy)| ops / busy)
                .sum();
            if rate > 0.0 {
                out.timeline
                    .push(hostbench_core::burn::reading_at(&readings, b).point(
                        hostbench_core::burn::interval_end(b, cfg.interval, ended_s),
                        u.name.clone(),
                        rate,
                        u.rate_unit.into(),
                    ));
            }
        }
    }
    for ts in timeline_tallies {
        out.units.extend(ts.into_iter().map(|t| t.run));
    }
    out.units.extend(absent);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcg_closed_form_matches_the_loop() {
        let mut x = 12345u64;
        for _ in 0..1000 {
            x = x.wrapping_mul(LCG_A).wrapping_add(LCG_C);
        }
        assert_eq!(lcg_closed_form(12345, 1000), x);
        assert_eq!(lcg_closed_form(7, 0), 7);
    }

    #[test]
    fn fma_chain_is_deterministic_and_seed_dependent() {
        assert_eq!(fp_chain(1), fp_chain(1));
        assert_ne!(fp_chain(1), fp_chain(2));
    }

    #[test]
    fn fault_tokens_name_units() {
        assert!(matches_unit("fma", "fma-chain"));
        assert!(matches_unit("int", "int-lcg"));
        assert!(!matches_unit("fma", "avx2fma-f64"));
        assert!(validate_fault(&Some(Fault::Cpu {
            cpu: 0,
            unit: "avx2fma-f64".into(),
            after: 0
        }))
        .is_err());
    }

    #[test]
    fn an_injected_fault_is_caught_on_its_cpu_only() {
        let cpu = affinity::allowed_cpus().first().copied().unwrap_or(0);
        let cfg = CpuBurnConfig {
            cpus: vec![cpu],
            each: Duration::from_millis(50),
            all: Duration::ZERO,
            interval: Duration::from_millis(50),
            fault: Some(Fault::Cpu {
                cpu,
                unit: "int".into(),
                after: 3,
            }),
            linpack_n: 0,
        };
        let unit = Unit {
            name: "int-lcg".into(),
            work: Work::IntLcg,
            rate_unit: "OP/s",
            ops_per_check: 1.0,
        };
        let until = Instant::now() + Duration::from_millis(100);
        let t = burn_thread(cpu, "each", &[unit], Instant::now(), until, &cfg);
        let r = &t[0].run;
        assert!(r.checks > 3, "{r:?}");
        assert_eq!(r.errors, r.checks - 3, "{r:?}");
        assert_eq!(
            r.first_error.as_ref().map(|m| m.bits.clone()),
            Some(vec![17])
        );
        let clean = CpuBurnConfig { fault: None, ..cfg };
        let unit = Unit {
            name: "int-lcg".into(),
            work: Work::IntLcg,
            rate_unit: "OP/s",
            ops_per_check: 1.0,
        };
        let t = burn_thread(cpu, "each", &[unit], Instant::now(), Instant::now(), &clean);
        // A fault on another CPU changes nothing here either.
        assert_eq!(t[0].run.errors, 0);
        assert!(t[0].run.checks > 0);
    }
}
