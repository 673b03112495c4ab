//! Running the cases: every configured case on every selected device through the shared runner
//! (compute with its vector-width sweep, device-memory bandwidth, host↔device transfers, launch
//! latency), and the record helpers that attach the device, its facts and the peaks.
//!
//! A device that fails to open, or a case the device cannot run, is recorded as skipped with the
//! reason; the run goes on.

use std::time::Instant;

use hostbench_core::model::{Metric, Record};
use hostbench_core::{BenchError, Case, Runner, Sample};
use serde_json::{json, Value};

use crate::config::{Dtype, GpuConfig, MemKernel};
use crate::device::{list_devices, select, DeviceInfo, PeakOr};
use crate::reference::{Peer, Test};
use crate::session::{open, reps_for, Session, Timed};

fn base_case(bench: &str, metric: Metric, unit: &str, info: &DeviceInfo) -> Case {
    Case::new(bench, metric, unit)
        .param("backend", info.backend.name())
        .param("device", info.index)
}

fn device_extra(rec: &mut Record, info: &DeviceInfo, facts: Vec<(String, Value)>) {
    rec.extra.insert("device_name".into(), json!(info.name));
    rec.extra.insert("device_kind".into(), json!(info.kind));
    rec.extra.insert("validated".into(), json!(true));
    for (k, v) in facts {
        rec.extra.insert(k, v);
    }
    if info.kind == "cpu" {
        rec.warnings.push(
            "the OpenCL device is the host CPU (e.g. PoCL): figures are the CPU's, not a GPU's"
                .into(),
        );
    }
}

fn set_peak_or(rec: &mut Record, peak: Option<&PeakOr>) {
    match peak {
        Some(Ok(p)) => rec.set_peak(Some(p.clone())),
        Some(Err(why)) => {
            rec.extra.insert("peak_note".into(), json!(why));
        }
        None => {}
    }
}

/// Run every configured case on every selected device through `runner`. A device that fails to
/// open, or a case the device cannot run, is recorded as skipped with the reason.
pub fn run_gpu(
    runner: &mut Runner,
    cfg: &GpuConfig,
    devices: &[DeviceInfo],
) -> Result<(), BenchError> {
    cfg.validate()?;
    for info in devices {
        let mut cases = 0;
        if let Some(c) = &cfg.compute {
            cases += c.dtypes_for(info).len();
        }
        if let Some(m) = &cfg.memory {
            cases += m.kernels.len() * m.blocks.len();
        }
        if let Some(t) = &cfg.transfer {
            cases += t.directions.len() * t.host.len() * t.blocks.len();
        }
        cases += usize::from(cfg.launch);
        runner.plan(cases);
        match open(info) {
            Ok(mut s) => run_device(runner, cfg, s.as_mut())?,
            Err(e) => {
                let case = base_case("gpu", Metric::Throughput, "", info);
                runner.skip(&case, &e)?;
            }
        }
    }
    Ok(())
}

/// `hostbench run`'s GPU section: every device the configured backends find, or one skipped entry
/// saying why there is none (the run goes on).
pub fn run_available(runner: &mut Runner, cfg: &GpuConfig) -> Result<(), BenchError> {
    let listing = list_devices(&cfg.backends);
    match select(&listing, cfg) {
        Ok(devices) => run_gpu(runner, cfg, &devices),
        Err(BenchError::Unsupported(why)) => {
            let names: Vec<&str> = cfg.backends.iter().map(|b| b.name()).collect();
            let case = Case::new("gpu", Metric::Throughput, "").param("backend", names.join(","));
            runner.skip_with(&case, "unsupported", &why)
        }
        Err(e) => Err(e),
    }
}

/// The clpeak tests this device's cases want: its global bandwidth beside the read kernel at the
/// largest block (clpeak reads one large buffer), its compute beside each dtype it has a test
/// for. The headline (`run`'s default) is the bandwidth, else f32 compute.
fn clpeak_tests(cfg: &GpuConfig, info: &DeviceInfo) -> Vec<Test> {
    let bandwidth = cfg
        .memory
        .as_ref()
        .is_some_and(|m| m.kernels.contains(&MemKernel::Read) && !m.blocks.is_empty())
        .then_some(Test::GlobalBandwidth);
    let compute: Vec<Test> = cfg
        .compute
        .as_ref()
        .map(|c| {
            c.dtypes_for(info)
                .into_iter()
                .filter_map(Test::for_dtype)
                .collect()
        })
        .unwrap_or_default();
    let headline = bandwidth.or_else(|| compute.iter().copied().find(|&t| t == Test::ComputeSp));
    let mut tests: Vec<Test> = bandwidth.into_iter().chain(compute).collect();
    tests.retain(|&t| cfg.reference.wants(Some(t) == headline));
    tests
}

fn run_device(runner: &mut Runner, cfg: &GpuConfig, s: &mut dyn Session) -> Result<(), BenchError> {
    let info = s.info().clone();
    let mut peer = Peer::new(&info, clpeak_tests(cfg, &info));
    if let Some(c) = &cfg.compute {
        for d in c.dtypes_for(&info) {
            run_compute(runner, cfg, s, &info, d, &c.widths, &mut peer)?;
        }
    }
    if let Some(m) = &cfg.memory {
        let largest = m.blocks.iter().copied().max();
        for &k in &m.kernels {
            for &b in &m.blocks {
                let like_clpeak = k == MemKernel::Read && Some(b) == largest;
                let case = base_case("gpu.bandwidth", Metric::Throughput, "B/s", &info)
                    .param("kind", k.name())
                    .param("block_bytes", b);
                let made = s.memory(k, b);
                run_timed(runner, cfg, &case, &info, made, k.traffic(), |rec| {
                    set_peak_or(rec, Some(&info.mem_peak));
                    rec.extra.insert("bytes_counted".into(), json!(match k {
                        MemKernel::Copy => "read + write (2 x block per copy, as bandwidthTest)",
                        MemKernel::Read => "block bytes read (the per-work-item sums written back are not counted)",
                        MemKernel::Write => "block bytes written",
                    }));
                    small_block_note(rec, b);
                    if like_clpeak {
                        peer.attach(rec, Test::GlobalBandwidth);
                    }
                })?;
            }
        }
    }
    if let Some(t) = &cfg.transfer {
        for &dir in &t.directions {
            for &h in &t.host {
                for &b in &t.blocks {
                    let case = base_case("gpu.transfer", Metric::Throughput, "B/s", &info)
                        .param("kind", dir.name())
                        .param("host_memory", h.name())
                        .param("block_bytes", b);
                    let made = s.transfer(dir, h, b);
                    run_timed(runner, cfg, &case, &info, made, 1.0, |rec| {
                        rec.extra.insert(
                            "peak_note".into(),
                            json!("no link limit: the backend does not report the bus (PCIe generation x lanes)"),
                        );
                        small_block_note(rec, b);
                    })?;
                }
            }
        }
    }
    if cfg.launch {
        run_launch(runner, cfg, s, &info)?;
    }
    Ok(())
}

fn small_block_note(rec: &mut Record, block: u64) {
    if block < (1 << 20) {
        rec.extra.insert(
            "note".into(),
            json!("small block: the time is mostly launch or call overhead, not memory or link bandwidth"),
        );
    }
}

/// Measure a memory or transfer operation: `scale` × work per operation / time.
fn run_timed(
    runner: &mut Runner,
    cfg: &GpuConfig,
    case: &Case,
    info: &DeviceInfo,
    made: Result<Box<dyn Timed + '_>, BenchError>,
    scale: f64,
    finish: impl FnOnce(&mut Record),
) -> Result<(), BenchError> {
    let mut t = match made {
        Ok(t) => t,
        Err(e @ BenchError::InvalidInput(_)) => return Err(e),
        Err(e) => return runner.skip(case, &e),
    };
    let reps = match reps_for(t.as_mut(), cfg.duration, 1 << 20) {
        Ok(r) => r,
        Err(e) => return runner.skip(case, &e),
    };
    let work = t.work() * scale;
    let facts = t.facts();
    let mut n = 0u64;
    runner.run_case(
        case,
        || {
            n += 1;
            t.prepare(n)?;
            let secs = t.run(reps)?;
            t.validate()?;
            Ok(Sample::new(work * reps as f64 / secs).with("seconds_per_op", secs / reps as f64))
        },
        |rec| {
            device_extra(rec, info, facts);
            rec.extra.insert("ops_per_sample".into(), json!(reps));
            finish(rec);
        },
    )
}

/// Compute: a short validated run per vector width, then the runner's samples at the best one.
fn run_compute(
    runner: &mut Runner,
    cfg: &GpuConfig,
    s: &mut dyn Session,
    info: &DeviceInfo,
    dtype: Dtype,
    widths: &[u32],
    peer: &mut Peer,
) -> Result<(), BenchError> {
    let (bench, unit) = dtype.benchmark();
    let case = base_case(bench, Metric::Throughput, unit, info).param("dtype", dtype.name());
    if let Some((_, why)) = info.missing.iter().find(|(d, _)| *d == dtype) {
        return runner.skip_with(&case, "unsupported", why);
    }
    if runner.over_budget() {
        return runner.skip_with(&case, "budget", "time budget exhausted before this case");
    }
    // The sweep: each width validated, timed for a quarter of a sample.
    let mut sweep = serde_json::Map::new();
    let mut best: Option<(u32, f64)> = None;
    let mut errors = Vec::new();
    let probe = cfg.duration / 4;
    for &w in widths {
        let r = (|| -> Result<f64, BenchError> {
            let mut t = s.compute(dtype, w)?;
            let reps = reps_for(t.as_mut(), probe, 1 << 16)?;
            t.prepare(0)?;
            let secs = t.run(reps)?;
            t.validate()?;
            Ok(t.work() * reps as f64 / secs)
        })();
        match r {
            Ok(v) => {
                sweep.insert(w.to_string(), json!(v));
                if best.is_none_or(|(_, b)| v > b) {
                    best = Some((w, v));
                }
            }
            Err(e @ BenchError::Validation(_)) => return runner.skip(&case, &e),
            Err(e) => {
                sweep.insert(w.to_string(), json!(e.to_string()));
                errors.push(format!("width {w}: {e}"));
            }
        }
    }
    let Some((width, _)) = best else {
        return runner.skip(&case, &BenchError::Failed(errors.join("; ")));
    };
    let made = s.compute(dtype, width);
    let peak = info.peak(dtype).cloned();
    run_timed(runner, cfg, &case, info, made, 1.0, |rec| {
        rec.extra.insert("vector_width".into(), json!(width));
        rec.extra.insert("width_sweep".into(), Value::Object(sweep));
        set_peak_or(rec, peak.as_ref());
        if let Some(t) = Test::for_dtype(dtype) {
            peer.attach(rec, t);
        }
    })
}

/// Launch latency: an empty kernel, enqueue + wait, one round trip at a time; the sample is the
/// median round trip of a batch.
fn run_launch(
    runner: &mut Runner,
    cfg: &GpuConfig,
    s: &mut dyn Session,
    info: &DeviceInfo,
) -> Result<(), BenchError> {
    let case = base_case("gpu.launch", Metric::Latency, "s", info).param("kind", "roundtrip");
    let mut t = match s.launch() {
        Ok(t) => t,
        Err(e) => return runner.skip(&case, &e),
    };
    let facts = t.facts();
    let reps = match reps_for(t.as_mut(), cfg.duration, 20_000) {
        Ok(r) => r.max(5),
        Err(e) => return runner.skip(&case, &e),
    };
    runner.run_case(
        &case,
        || {
            let mut lat = Vec::with_capacity(reps as usize);
            let started = Instant::now();
            for _ in 0..reps {
                lat.push(t.run(1)?);
                // A slow device must not turn one sample into minutes.
                if started.elapsed() > cfg.duration * 4 {
                    break;
                }
            }
            t.validate()?;
            lat.sort_by(f64::total_cmp);
            let p = |q: f64| hostbench_core::stats::percentile_sorted(&lat, q);
            Ok(Sample::new(p(50.0))
                .with("p99_s", p(99.0))
                .with("min_s", lat[0])
                .with("round_trips", lat.len() as f64))
        },
        |rec| {
            device_extra(rec, info, facts);
            rec.extra.insert(
                "measures".into(),
                json!("host wall time of enqueue + wait for one empty kernel (global size 1); value = median round trip of each sample"),
            );
        },
    )
}
