//! One device's burn loop: open the session, size the chain launches, then take the units in
//! turns for the duration, each interval ending in one timeline point per unit with the SM
//! clock, temperature and power NVML read then (the CPU's clock and temperature for an OpenCL
//! CPU device: it is the CPU).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use hostbench_core::burn::{IntervalReading, Mismatch, Probe, UnitRun, UnitStatus};
use hostbench_core::BenchError;

use super::{
    check_chains, check_memory, expected_chains, fault_block, inject, place, tensor_reps,
    units_for, BurnKernels, BurnedGpu, GpuBurn, GpuBurnConfig, Kind, Unit, LAUNCH_TARGET,
};
use crate::device::DeviceInfo;
use crate::nvml::Telemetry;
use crate::tensor::Form;
use crate::Backend;

/// Turns of the first calibration launch.
const PROBE_ITERS: u32 = 64;
/// The most turns a launch is given (a slow device's launch then still ends).
const MAX_ITERS: u32 = 1 << 22;

/// The chain launch's size and the answers it must give.
struct Chains {
    iters: u32,
    expected: Vec<u32>,
}

/// Per-device state the units share while they run.
struct Tally {
    by_sm: BTreeMap<String, u64>,
    covered: BTreeSet<u32>,
    pass: u64,
    fault: Option<u64>,
}

pub(super) fn burn_device(info: &DeviceInfo, cfg: &GpuBurnConfig, t0: Instant) -> GpuBurn {
    let mut run = DeviceRun::new(info, cfg);
    let result = (|| -> Result<(), BenchError> {
        let mut s = crate::session::open(info)?;
        let mut telemetry = (info.backend == Backend::Cuda)
            .then(|| Telemetry::open(run.gpu.pci_bus.as_deref(), info.index).ok())
            .flatten();
        let mut probe = (info.kind == "cpu").then(Probe::start);
        let mut k = s.burn()?;
        run.burn(k.as_mut(), cfg, t0, &mut || {
            read_conditions(telemetry.as_mut(), probe.as_mut())
        });
        Ok(())
    })();
    run.finish(info, result)
}

/// One device's units and what they found so far.
pub(super) struct DeviceRun {
    gpu: BurnedGpu,
    units: Vec<Unit>,
    tally: Tally,
    out: GpuBurn,
}

impl DeviceRun {
    pub(super) fn new(info: &DeviceInfo, cfg: &GpuBurnConfig) -> DeviceRun {
        let p = place(info);
        let gpu = BurnedGpu {
            place: p.clone(),
            name: info.name.clone(),
            pci_bus: info
                .facts
                .get("pci_bus_id")
                .and_then(|v| v.as_str())
                .map(String::from),
            sms: info.compute_units,
            ..BurnedGpu::default()
        };
        let (units, absent) = units_for(info);
        let mut out = GpuBurn::default();
        for (name, why) in absent {
            out.units.push(UnitRun::not_run("gpu", &p, &name, why));
        }
        // Only the first device gets the injected fault: one GPU block, not one per GPU.
        let first = cfg
            .devices
            .first()
            .is_some_and(|d| d.backend == info.backend && d.index == info.index);
        let tally = Tally {
            by_sm: BTreeMap::new(),
            covered: BTreeSet::new(),
            pass: 0,
            fault: fault_block(&cfg.fault).filter(|_| first),
        };
        DeviceRun {
            gpu,
            units,
            tally,
            out,
        }
    }

    /// Size the launches, then run the units in turns until `t0 + cfg.duration`, a timeline
    /// point per unit per interval with what `conditions` reads at its end.
    pub(super) fn burn(
        &mut self,
        k: &mut dyn BurnKernels,
        cfg: &GpuBurnConfig,
        t0: Instant,
        conditions: &mut dyn FnMut() -> IntervalReading,
    ) {
        let (gpu, tally) = (&mut self.gpu, &mut self.tally);
        gpu.mem_bytes = k.words() * 4;
        let mut chains: [Option<Chains>; 2] = [None, None];
        let mut reps: BTreeMap<&'static str, (Form, u64)> = BTreeMap::new();
        for u in self.units.iter_mut() {
            match u.kind {
                Kind::Chain { double } => {
                    let c = calibrate(k, double, u, tally);
                    chains[usize::from(double)] = stop_on_error(u, gpu, c);
                }
                Kind::Tensor(t) => {
                    // A precision whose kernel does not build or run here is absent, like
                    // one the GPU lacks; a device fault still shows in the other units.
                    match tensor_reps(k.session(), t) {
                        Ok(r) => {
                            reps.insert(t.name(), r);
                        }
                        Err(why) => u.run.note = Some(why),
                    }
                }
                Kind::Memory => {}
            }
        }
        let slice = cfg.interval / self.units.len().max(1) as u32;
        let end = t0 + cfg.duration;
        while Instant::now() < end && self.units.iter().any(|u| u.run.note.is_none()) {
            for u in self.units.iter_mut().filter(|u| u.run.note.is_none()) {
                let until = (Instant::now() + slice).min(end);
                let r = run_slice(k, u, until, &chains, &reps, tally);
                stop_on_error(u, gpu, r);
            }
            let reading = conditions();
            let t_s = t0.elapsed().as_secs_f64();
            for u in self.units.iter_mut().filter(|u| u.secs > 0.0) {
                self.out.timeline.push(reading.point(
                    t_s,
                    format!("{} {}", gpu.place, u.run.unit),
                    u.work / u.secs,
                    u.run.rate_unit.clone(),
                ));
                u.work = 0.0;
                u.secs = 0.0;
            }
        }
    }

    /// The device's outcome: units settled (one stopped by an error is not a pass, whatever it
    /// checked before; a wrong result still fails it), coverage and errors per SM.
    pub(super) fn finish(mut self, info: &DeviceInfo, result: Result<(), BenchError>) -> GpuBurn {
        if let Err(e) = result {
            self.gpu.stopped.push(e.to_string());
            for u in self.units.iter_mut().filter(|u| u.run.note.is_none()) {
                fail_if_caught(&mut u.run, &e);
                u.run.note = Some(e.to_string());
            }
        }
        self.gpu.errors_by_sm = self.tally.by_sm;
        self.gpu.sms_covered =
            (info.backend == Backend::Cuda).then_some(self.tally.covered.len() as u32);
        for mut u in self.units {
            let stopped = u.run.note.is_some();
            u.run.settle();
            if stopped && u.run.status == UnitStatus::Pass {
                u.run.status = UnitStatus::NotRun;
            }
            if u.run.seconds > 0.0 {
                u.run.rate = u.total / u.run.seconds;
            }
            self.out.units.push(u.run);
        }
        self.out.devices.push(self.gpu);
        self.out
    }
}

/// A wrong result the device caught itself (the driver's uncorrectable ECC error, a
/// `Validation`) fails the unit it stopped, as a wrong checksum does; any other error only stops
/// it.
fn fail_if_caught(run: &mut UnitRun, e: &BenchError) {
    if let BenchError::Validation(why) = e {
        run.record_error(Mismatch::reported("the device", why.clone()));
    }
}

/// `r`'s value, or `None` with the unit stopped and the reason kept on the device.
fn stop_on_error<T>(u: &mut Unit, gpu: &mut BurnedGpu, r: Result<T, BenchError>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            gpu.stopped.push(format!("{}: {e}", u.run.unit));
            fail_if_caught(&mut u.run, &e);
            u.run.note = Some(format!("stopped: {e}"));
            None
        }
    }
}

/// Probe launches (their results checked too), each sized from the last, until one lasts at
/// least half of `LAUNCH_TARGET` (a short probe is mostly launch and readback overhead); then
/// the turns that make a launch last about `LAUNCH_TARGET`, and their answers.
fn calibrate(
    k: &mut dyn BurnKernels,
    double: bool,
    u: &mut Unit,
    tally: &mut Tally,
) -> Result<Chains, BenchError> {
    let target = LAUNCH_TARGET.as_secs_f64();
    let mut iters = PROBE_ITERS;
    for _ in 0..4 {
        let t = Instant::now();
        let mut run = k.chain(double, iters)?;
        let secs = t.elapsed().as_secs_f64().max(1e-6);
        if let (Some(b), false) = (tally.fault, double) {
            inject(&mut run, b);
        }
        let probe = expected_chains(double, iters, k.width(double));
        check_chains(
            &run,
            &probe,
            &mut u.run,
            &mut tally.by_sm,
            &mut tally.covered,
        );
        let next = (f64::from(iters) * target / secs).clamp(1.0, f64::from(MAX_ITERS)) as u32;
        if secs >= target / 2.0 || next <= iters {
            iters = next;
            break;
        }
        iters = next;
    }
    Ok(Chains {
        iters,
        expected: expected_chains(double, iters, k.width(double)),
    })
}

/// Passes of unit `u` until `until` (at least one): each launch or fill-and-check timed, its
/// results checked. A tensor kernel is made once per slice and relaunched.
fn run_slice(
    k: &mut dyn BurnKernels,
    u: &mut Unit,
    until: Instant,
    chains: &[Option<Chains>; 2],
    reps: &BTreeMap<&'static str, (Form, u64)>,
    tally: &mut Tally,
) -> Result<(), BenchError> {
    match u.kind {
        Kind::Chain { double } => {
            let Some(c) = &chains[usize::from(double)] else {
                return Ok(());
            };
            let flop_per_thread = 2.0
                * f64::from(c.iters)
                * f64::from(super::CHAINS * super::UNROLL * k.width(double));
            passes(u, until, |run| {
                let t = Instant::now();
                let mut launch = k.chain(double, c.iters)?;
                let secs = t.elapsed().as_secs_f64();
                if let (Some(b), false) = (tally.fault, double) {
                    inject(&mut launch, b);
                }
                let n = check_chains(
                    &launch,
                    &c.expected,
                    run,
                    &mut tally.by_sm,
                    &mut tally.covered,
                );
                Ok((secs, n as f64 * flop_per_thread))
            })
        }
        Kind::Memory => passes(u, until, |run| {
            tally.pass += 1;
            let mode = (tally.pass % 4) as u32;
            let seed = (tally.pass as u32).wrapping_mul(0x9E37_79B9) ^ 0x5A5A_0F0F;
            let t = Instant::now();
            k.fill(mode, seed)?;
            let records = k.check(mode, seed)?;
            let secs = t.elapsed().as_secs_f64();
            check_memory(&records, k.words(), mode, seed, run);
            Ok((secs, k.words() as f64 * 4.0 / 1e9))
        }),
        Kind::Tensor(ty) => {
            let Some(&(form, n)) = reps.get(ty.name()) else {
                return Ok(());
            };
            let mut tk = k.session().tensor(ty, form)?;
            let fact = |f: &str| tk.fact(f).and_then(|v| v.as_u64()).unwrap_or(1);
            let threads = fact("grid") * fact("block");
            passes(u, until, |run| {
                tally.pass += 1;
                let t = Instant::now();
                tk.prepare(tally.pass)?;
                tk.run(n)?;
                let checked = tk.validate();
                let secs = t.elapsed().as_secs_f64();
                match checked {
                    Ok(()) => {}
                    Err(BenchError::Validation(why)) => {
                        run.record_error(Mismatch::reported(format!("batch {}", tally.pass), why))
                    }
                    Err(e) => return Err(e),
                }
                run.checks += threads;
                Ok((secs, tk.work() * n as f64))
            })
        }
    }
}

/// Passes until `until` (at least one), each `pass` returning its seconds and work, added to
/// the unit's run and to the current interval.
fn passes(
    u: &mut Unit,
    until: Instant,
    mut pass: impl FnMut(&mut UnitRun) -> Result<(f64, f64), BenchError>,
) -> Result<(), BenchError> {
    loop {
        let (secs, work) = pass(&mut u.run)?;
        u.run.seconds += secs;
        u.total += work;
        u.secs += secs;
        u.work += work;
        if Instant::now() >= until {
            return Ok(());
        }
    }
}

/// What the interval ran under: NVML's SM clock, temperature and power for a CUDA device; for
/// an OpenCL CPU device (it is the CPU) the CPU's clock and temperature and the CPU time others
/// took meanwhile, so a rate that fell to a neighbour is told from one that fell to the device;
/// nothing for another OpenCL device.
fn read_conditions(
    telemetry: Option<&mut Telemetry>,
    probe: Option<&mut Probe>,
) -> IntervalReading {
    if let Some(t) = telemetry {
        t.sample();
        let (clock_mhz, temp_c, power_w) = t.latest();
        return IntervalReading {
            clock_mhz,
            temp_c,
            power_w,
            others_cpus: None,
        };
    }
    probe.map(Probe::read).unwrap_or_default()
}
