//! `hostbench run`: every benchmark this binary has, with a profile's defaults, written to
//! `<out>/<UTC timestamp>-<host>/run.json` (rewritten after every case, so an interrupted run
//! keeps what it measured), then records.csv, report.md and report.html beside it, and the run
//! stored in the history database.
//!
//! One progress bar covers the whole run: every selected subsystem is announced to the runner
//! with an estimate (`estimate`) before the first case, and replaced by its real plan when it
//! starts. `--scale F` multiplies every subsystem's workload (`scaled_*`).

use std::path::PathBuf;
use std::time::Duration;

use hostbench_core::model::Host;
use hostbench_core::units::parse_list;
use hostbench_core::{BenchError, Phase, Runner};
use hostbench_cpu::{CpuConfig, Dtype, IsaChoice};
use hostbench_disk::DiskConfig;
use hostbench_gpu::GpuConfig;
use hostbench_mem::MemConfig;

use crate::cli::{Profile, RunArgs};
use crate::settings::{self, Common};
use crate::Exit;

/// Subsystems `run` knows, in the order it runs them.
const SUBSYSTEMS: [&str; 6] = ["cpu", "linpack", "mem", "disk", "net", "gpu"];

fn subsystem_list(text: &str, flag: &str) -> Result<Vec<String>, BenchError> {
    parse_list(text, flag, |s| {
        let s = s.to_ascii_lowercase();
        if SUBSYSTEMS.contains(&s.as_str()) {
            Ok(s)
        } else {
            Err(BenchError::invalid(format!(
                "--{flag}: unknown subsystem '{s}' (known: {})",
                SUBSYSTEMS.join(", ")
            )))
        }
    })
}

/// Linpack order per profile (never more than memory allows; see `linpack::default_n`).
fn linpack_n(profile: Profile) -> Option<usize> {
    match profile {
        Profile::Quick => Some(2000),
        _ => None,
    }
}

fn cpu_config(profile: Profile, duration: Option<Duration>) -> CpuConfig {
    let mut cfg = CpuConfig::default();
    match profile {
        Profile::Quick => cfg.duration = Duration::from_millis(100),
        Profile::Standard => {}
        Profile::Full => {
            cfg.isas = IsaChoice::All;
            cfg.duration = Duration::from_millis(500);
        }
        Profile::Classic => {
            // The assignment's matrix: QP, HP, SP, DP at 1, 2, 4 and 8 threads.
            cfg.dtypes = vec![Dtype::I8, Dtype::I16, Dtype::F32, Dtype::F64];
            cfg.threads = vec![1, 2, 4, 8];
        }
    }
    if let Some(d) = duration {
        cfg.duration = d;
    }
    cfg
}

/// Memory per profile: `standard` (about a minute) is bandwidth of the STREAM kernels, read and
/// write with both store kinds, the cache sweep and the latency curve; `quick` trims each;
/// `classic` is the assignment's rw matrix and 1-byte latency; `full` adds every ISA, the classic
/// blocks and memory-level parallelism.
fn mem_config(profile: Profile, duration: Option<Duration>, host: &Host) -> MemConfig {
    use hostbench_mem::latency::{LatPattern, LatencyConfig};
    use hostbench_mem::{sizing, BandwidthConfig, Isa, Kernel, Pages, Pattern, SweepConfig};
    let mut cfg = MemConfig::default();
    let mut bw = BandwidthConfig::for_host();
    let mut sweep = SweepConfig::for_host(host);
    let mut lat = LatencyConfig::for_host(host);
    match profile {
        Profile::Quick => {
            bw.kernels = vec![Kernel::Read, Kernel::Copy, Kernel::Triad];
            bw.threads = vec![*bw.threads.last().unwrap_or(&1)];
            cfg.duration = Duration::from_millis(60);
            sweep.threads = vec![1];
            sweep.duration = Duration::from_millis(15);
            lat.pages = vec![Pages::Huge];
            lat.working_sets = sizing::sweep_sizes(&host.cpu.caches, 256 * sizing::MIB);
            lat.duration = Duration::from_millis(15);
        }
        Profile::Standard => {
            // About a minute: scale and add move the same streams as copy and triad.
            bw.kernels = vec![Kernel::Read, Kernel::Write, Kernel::Copy, Kernel::Triad];
            if bw.threads.len() > 2 {
                bw.threads = vec![1, *bw.threads.last().unwrap_or(&1)];
            }
            cfg.duration = Duration::from_millis(100);
            sweep.duration = Duration::from_millis(15);
            // Beyond 8 x LLC the curve is flat DRAM; `hostbench mem` goes on to 1 GiB and more.
            lat.working_sets = sizing::sweep_sizes(&host.cpu.caches, 256 * sizing::MIB);
            lat.duration = Duration::from_millis(20);
        }
        Profile::Full => {
            bw.isas = Isa::detected();
            bw.patterns = vec![Pattern::Seq, Pattern::Random];
            let mut classic = BandwidthConfig::classic(bw.threads.clone());
            classic.isas = vec![Isa::best()];
            cfg.classic = Some(classic);
            sweep.kernels = vec![Kernel::Read, Kernel::Write, Kernel::Copy, Kernel::Triad];
            lat.chains = vec![1, 2, 4, 8, 16];
            lat.patterns = vec![LatPattern::Chase, LatPattern::Seq, LatPattern::Random];
        }
        Profile::Classic => {
            let threads = vec![1, 2, 4, 8];
            let mut classic = BandwidthConfig::classic(threads.clone());
            classic.blocks = [1, sizing::KIB, sizing::MIB, 10 * sizing::MIB]
                .map(hostbench_mem::Block::Bytes)
                .to_vec();
            cfg.bandwidth = None;
            cfg.classic = Some(classic);
            cfg.sweep = None;
            lat.patterns = vec![LatPattern::Seq, LatPattern::Random];
            lat.working_sets = vec![hostbench_mem::classic_latency_bytes(host)];
            lat.pages = vec![Pages::Small];
            lat.threads = threads;
            cfg.latency = Some(lat);
            if let Some(d) = duration {
                cfg.duration = d;
            }
            return cfg;
        }
    }
    if let Some(d) = duration {
        cfg.duration = d;
        sweep.duration = d;
        lat.duration = d;
    }
    cfg.bandwidth = Some(bw);
    cfg.sweep = Some(sweep);
    cfg.latency = Some(lat);
    cfg
}

/// Disk per profile, in `--disk-dir`: the fio presets (standard), two of them (quick), every op
/// with both engines (full), or the classic matrix. The data file stays within a tenth of the
/// free space unless the profile's classic 10 GiB fits in it.
fn disk_config(profile: Profile, duration: Option<Duration>, dir: &std::path::Path) -> DiskConfig {
    use hostbench_disk::{cases_from, default_cases, EngineChoice, EngineKind, Op};
    let mut cfg = DiskConfig {
        dir: dir.to_path_buf(),
        ..DiskConfig::default()
    };
    match profile {
        Profile::Quick => {
            cfg.cases = vec![default_cases()[0], default_cases()[3]];
            cfg.duration = Duration::from_millis(700);
        }
        Profile::Standard => {
            cfg.duration = Duration::from_secs(2);
        }
        Profile::Full => {
            cfg.cases = default_cases();
            cfg.cases
                .extend(cases_from(&[Op::RandRw, Op::Rw], None, &[1], &[16]));
            cfg.engines = EngineChoice::List(vec![EngineKind::IoUring, EngineKind::Psync]);
            cfg.duration = Duration::from_secs(3);
        }
        Profile::Classic => {
            cfg.cases = hostbench_disk::classic_cases(&[1, 2, 4]);
            cfg.duration = Duration::from_secs(1);
        }
    }
    if let Some(d) = duration {
        cfg.duration = d;
    }
    cfg
}

/// Network per profile, on loopback (a second host needs `hostbench net client`): `standard`
/// is TCP and UDP at 1 and all streams plus TCP/UDP ping-pong, about half a minute; `quick` one
/// stream each; `full` every direction and three block sizes; `classic` the assignment's matrix.
fn net_config(profile: Profile, duration: Option<Duration>) -> hostbench_net::NetConfig {
    use hostbench_net::{Direction, NetConfig, Target};
    let target = Target::Loopback { v6: false };
    let mut cfg = match profile {
        Profile::Classic => NetConfig::classic(target),
        _ => NetConfig {
            target,
            ..NetConfig::default()
        },
    };
    match profile {
        Profile::Quick => {
            cfg.streams = vec![1];
            cfg.duration = Duration::from_millis(300);
        }
        Profile::Standard => {
            if cfg.streams.len() > 2 {
                cfg.streams = vec![1, *cfg.streams.last().unwrap_or(&1)];
            }
            cfg.duration = Duration::from_secs(1);
        }
        Profile::Full => {
            cfg.directions = vec![Direction::Send, Direction::Recv, Direction::Bidir];
            cfg.tcp_blocks = vec![1000, 32_000, hostbench_net::DEFAULT_TCP_BLOCK];
            cfg.pairs = vec![1, 2];
        }
        Profile::Classic => cfg.duration = Duration::from_secs(1),
    }
    if let Some(d) = duration {
        cfg.duration = d;
    }
    cfg
}

/// GPU per profile, on every OpenCL and CUDA device found (none: one skipped entry with the
/// reason): `standard` runs every dtype, the three memory kernels at 1 B, 1 KiB, 1 MiB and
/// 256 MiB, transfers of 1 MiB and 64 MiB and the launch latency; `quick` trims each; `full` is
/// `hostbench gpu`'s default (blocks up to 1 GiB); `classic` the 1 B / 1 KiB / 1 MiB points.
fn gpu_config(profile: Profile, duration: Option<Duration>) -> GpuConfig {
    use hostbench_gpu::{Dtype, MemKernel};
    let mut cfg = GpuConfig::default();
    let (mem, xfer) = match profile {
        Profile::Quick => {
            if let Some(c) = cfg.compute.as_mut() {
                c.dtypes = vec![Dtype::F64, Dtype::F32];
                c.widths = vec![4, 16];
            }
            if let Some(m) = cfg.memory.as_mut() {
                m.kernels = vec![MemKernel::Read, MemKernel::Copy];
            }
            cfg.duration = Duration::from_millis(50);
            (vec![1 << 20, 64 << 20], vec![64 << 20])
        }
        Profile::Standard => {
            cfg.duration = Duration::from_millis(100);
            (
                vec![1, 1 << 10, 1 << 20, 256 << 20],
                vec![1 << 20, 64 << 20],
            )
        }
        Profile::Full => (
            hostbench_gpu::default_mem_blocks(),
            hostbench_gpu::default_transfer_blocks(),
        ),
        Profile::Classic => (vec![1, 1 << 10, 1 << 20], vec![1 << 10, 1 << 20]),
    };
    if let Some(m) = cfg.memory.as_mut() {
        m.blocks = mem;
    }
    if let Some(t) = cfg.transfer.as_mut() {
        t.blocks = xfer;
    }
    if let Some(d) = duration {
        cfg.duration = d;
    }
    cfg
}

/// The profile's name as stored in the history.
fn profile_name(profile: Profile) -> &'static str {
    match profile {
        Profile::Quick => "quick",
        Profile::Standard => "standard",
        Profile::Full => "full",
        Profile::Classic => "classic",
    }
}

fn scale_duration(d: &mut Duration, scale: f64) {
    *d = d.mul_f64(scale).max(Duration::from_millis(1));
}

fn scaled_cpu(args: &RunArgs, common: &Common, scale: f64) -> CpuConfig {
    let mut cfg = cpu_config(args.profile, common.duration);
    scale_duration(&mut cfg.duration, scale);
    cfg.ops = cfg.ops.map(|o| o * scale);
    cfg
}

/// The linpack order: the work (n³) follows the scale.
fn scaled_linpack_n(profile: Profile, scale: f64) -> Option<usize> {
    if scale == 1.0 {
        return linpack_n(profile);
    }
    let n = linpack_n(profile).unwrap_or_else(|| {
        hostbench_cpu::linpack::default_n(hostbench_core::host::available_memory_bytes())
    });
    Some(((n as f64 * scale.cbrt()).round() as usize).max(64))
}

fn scaled_mem(args: &RunArgs, common: &Common, host: &Host, scale: f64) -> MemConfig {
    let mut cfg = mem_config(args.profile, common.duration, host);
    scale_duration(&mut cfg.duration, scale);
    cfg.passes = cfg.passes.map(|p| p * scale);
    if let Some(s) = &mut cfg.sweep {
        scale_duration(&mut s.duration, scale);
    }
    if let Some(l) = &mut cfg.latency {
        scale_duration(&mut l.duration, scale);
    }
    cfg
}

fn scaled_disk(args: &RunArgs, common: &Common, scale: f64) -> DiskConfig {
    let mut cfg = disk_config(args.profile, common.duration, &args.disk_dir);
    scale_duration(&mut cfg.duration, scale);
    if !cfg.ramp.is_zero() {
        scale_duration(&mut cfg.ramp, scale);
    }
    cfg.io_bytes = cfg.io_bytes.map(|b| ((b as f64 * scale) as u64).max(1));
    cfg
}

fn scaled_net(args: &RunArgs, common: &Common, scale: f64) -> hostbench_net::NetConfig {
    let mut cfg = net_config(args.profile, common.duration);
    scale_duration(&mut cfg.duration, scale);
    cfg.bytes = cfg.bytes.map(|b| ((b as f64 * scale) as u64).max(1));
    cfg.count = cfg.count.map(|c| ((c as f64 * scale) as u64).max(1));
    cfg
}

fn scaled_gpu(args: &RunArgs, common: &Common, scale: f64) -> GpuConfig {
    let mut cfg = gpu_config(args.profile, common.duration);
    scale_duration(&mut cfg.duration, scale);
    cfg
}

/// A subsystem's expected cases and sample length, for the whole-run progress bar. Subsystems
/// without an estimate here get a rough one, corrected when they `plan` their cases.
fn estimate(subsystem: &str, args: &RunArgs, common: &Common, host: &Host, scale: f64) -> Phase {
    match subsystem {
        "cpu" => {
            let cfg = scaled_cpu(args, common, scale);
            let isas = cfg.resolve_isas().map_or(1, |v| v.len());
            let cases = isas * cfg.dtypes.len() * cfg.threads.len();
            Phase::new(subsystem, cases, cfg.duration.as_secs_f64())
        }
        "linpack" => {
            let n = scaled_linpack_n(args.profile, scale).unwrap_or(8000) as f64;
            // 2/3 n³ FLOP at a modest 20 GFLOP/s.
            Phase::new(subsystem, 1, 2.0 / 3.0 * n.powi(3) / 20e9)
        }
        "mem" => {
            let cfg = scaled_mem(args, common, host, scale);
            let bw: usize = cfg
                .bandwidth
                .iter()
                .chain(cfg.classic.iter())
                .map(|b| b.points(host).len())
                .sum();
            let sweep = cfg.sweep.as_ref().map_or(0, |s| s.points().len());
            let lat = cfg.latency.as_ref().map_or(0, |l| {
                l.patterns.len()
                    * l.pages.len()
                    * l.threads.len()
                    * l.working_sets.len()
                    * l.chains.len()
            });
            let secs = bw as f64 * cfg.duration.as_secs_f64()
                + sweep as f64 * cfg.sweep.as_ref().map_or(0.0, |s| s.duration.as_secs_f64())
                + lat as f64
                    * cfg
                        .latency
                        .as_ref()
                        .map_or(0.0, |l| l.duration.as_secs_f64());
            let cases = bw + sweep + lat;
            Phase::new(subsystem, cases, secs / cases.max(1) as f64)
        }
        "disk" => {
            let cfg = scaled_disk(args, common, scale);
            let engines = match &cfg.engines {
                hostbench_disk::EngineChoice::List(v) => v.len(),
                _ => 1,
            };
            // Three records (throughput, IOPS, latency) per measured case, one sample length.
            let cases = cfg.cases.len() * engines * 3;
            Phase::new(subsystem, cases, cfg.duration.as_secs_f64() / 3.0)
        }
        "net" => {
            let cfg = scaled_net(args, common, scale);
            let blocks = cfg
                .tcp_blocks
                .len()
                .max(cfg.udp_blocks.as_ref().map_or(1, Vec::len));
            let tp = cfg.protos.len() * cfg.directions.len() * blocks * cfg.streams.len();
            let lat = cfg.protos.len() * cfg.msg_sizes.len() * cfg.pairs.len();
            let cases = usize::from(cfg.throughput) * tp + usize::from(cfg.latency) * lat;
            // Each sample also sets up its connections (a few ms on loopback).
            Phase::new(subsystem, cases, cfg.duration.as_secs_f64() + 0.02)
        }
        "gpu" => {
            let cfg = scaled_gpu(args, common, scale);
            // Devices are not known before probing: one device's worth, corrected by `plan`.
            let compute = cfg.compute.as_ref().map_or(0, |c| c.dtypes.len());
            let memory = cfg
                .memory
                .as_ref()
                .map_or(0, |m| m.kernels.len() * m.blocks.len());
            let transfer = cfg.transfer.as_ref().map_or(0, |t| t.blocks.len() * 4);
            let cases = compute + memory + transfer + 1;
            Phase::new(subsystem, cases, cfg.duration.as_secs_f64())
        }
        _ => Phase::new(subsystem, 10, 1.0),
    }
}

pub fn run(args: &RunArgs) -> anyhow::Result<Exit> {
    let mut common = settings::common(&args.common)?;
    let scale = settings::scale(&args.scale)?;
    // Open the history first: a bad --db fails before minutes of measuring, not after.
    let mut store = if args.no_history {
        None
    } else {
        let path = settings::db_path(&args.history)?;
        Some(hostbench_report::history::Store::open(&path)?)
    };
    let mut selected: Vec<String> = match &args.only {
        Some(list) => subsystem_list(list, "only")?,
        None => SUBSYSTEMS.iter().map(|s| s.to_string()).collect(),
    };
    if let Some(list) = &args.skip {
        let skip = subsystem_list(list, "skip")?;
        selected.retain(|s| !skip.contains(s));
    }
    if selected.iter().any(|s| s == "disk") {
        // Before any worker thread exists (see `target::install_signal_cleanup`).
        hostbench_disk::target::install_signal_cleanup();
    }
    let host = super::host_inventory(&common.spec);
    let stamp = hostbench_core::model::now_rfc3339().replace(':', "");
    let host_name: String = host
        .hostname
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let dir: PathBuf = args.out.join(format!("{stamp}-{host_name}"));
    std::fs::create_dir_all(&dir)
        .map_err(|e| BenchError::invalid(format!("--out {}: {e}", args.out.display())))?;
    let run_json = dir.join("run.json");
    common.runner.partial_path = Some(run_json.clone());

    let mut runner = Runner::new(common.runner.clone(), host.clone());
    let phases: Vec<Phase> = selected
        .iter()
        .map(|s| estimate(s, args, &common, &host, scale))
        .collect();
    runner.announce(&phases);
    for subsystem in &selected {
        runner.begin_phase(subsystem);
        match subsystem.as_str() {
            "cpu" => {
                let cfg = scaled_cpu(args, &common, scale);
                hostbench_cpu::run_compute(&mut runner, &cfg, &host, &common.spec)?;
            }
            "linpack" => {
                let threads = hostbench_core::affinity::allowed_cpus().len().max(1);
                hostbench_cpu::run_linpack(
                    &mut runner,
                    scaled_linpack_n(args.profile, scale),
                    threads,
                    &host,
                    &common.spec,
                )?;
            }
            "mem" => {
                let cfg = scaled_mem(args, &common, &host, scale);
                hostbench_mem::run_mem(&mut runner, &cfg, &host, &common.spec)?;
            }
            "disk" => {
                let cfg = scaled_disk(args, &common, scale);
                hostbench_disk::run_disk(&mut runner, &cfg, &host, &common.spec)?;
            }
            "net" => {
                let cfg = scaled_net(args, &common, scale);
                hostbench_net::run_net(&mut runner, &cfg, &host, &common.spec)?;
            }
            "gpu" => {
                let cfg = scaled_gpu(args, &common, scale);
                hostbench_gpu::run_available(&mut runner, &cfg)?;
            }
            _ => {}
        }
    }
    let result = runner.finish()?;
    // `Runner::finish` has already written the final run.json (it is the partial path);
    // `--json` may ask for a second copy.
    let exit = super::emit(&result, &common)?;
    let written = hostbench_report::write_results_dir(&result, &dir)?;
    if let Some(png) = &args.png {
        hostbench_report::chart::write_pngs(&result, png)?;
    }
    let stored = match &mut store {
        Some(s) => Some((
            s.insert(&result, Some(profile_name(args.profile)), Some(&dir))?,
            s.path().to_path_buf(),
        )),
        None => None,
    };
    if !common.quiet {
        eprintln!("\nResults written to {}", dir.display());
        for f in std::iter::once(&run_json).chain(&written) {
            eprintln!("  {}", f.display());
        }
        if let Some(png) = &args.png {
            eprintln!("  {}/*.png (charts)", png.display());
        }
        if let Some((id, path)) = stored {
            eprintln!("Stored as run #{id} in {}", path.display());
        }
    }
    Ok(exit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hostbench_disk::Op;

    #[test]
    fn classic_profile_is_the_assignments_matrix() {
        // CPU: QP, HP, SP, DP x 1, 2, 4, 8 threads.
        let cpu = cpu_config(Profile::Classic, None);
        assert_eq!(cpu.dtypes, [Dtype::I8, Dtype::I16, Dtype::F32, Dtype::F64]);
        assert_eq!(cpu.threads, [1, 2, 4, 8]);
        // Memory: rw seq/random x 1 B, 1 KB, 1 MB, 10 MB x 1, 2, 4, 8 threads, plus latency.
        let host = hostbench_core::host::inventory();
        let mem = mem_config(Profile::Classic, None, &host);
        let rw = mem.classic.expect("classic matrix");
        assert_eq!(rw.kernels, [hostbench_mem::Kernel::Rw]);
        assert_eq!(
            rw.patterns,
            [hostbench_mem::Pattern::Seq, hostbench_mem::Pattern::Random]
        );
        let mib = 1 << 20;
        assert_eq!(
            rw.blocks,
            [1, 1024, mib, 10 * mib].map(hostbench_mem::Block::Bytes)
        );
        assert_eq!(rw.threads, [1, 2, 4, 8]);
        assert_eq!(mem.latency.expect("latency").threads, [1, 2, 4, 8]);
        // Disk: four ops x 1, 10, 100 MB x 1, 2, 4 threads, and 1 KB random x 1-128 threads.
        let disk = disk_config(Profile::Classic, None, std::path::Path::new("."));
        for op in [Op::Read, Op::Write, Op::RandRead, Op::RandWrite] {
            for block in [mib, 10 * mib, 100 * mib] {
                for threads in [1, 2, 4] {
                    assert!(disk
                        .cases
                        .iter()
                        .any(|c| c.op == op && c.block == block && c.threads == threads));
                }
            }
        }
        for op in [Op::RandRead, Op::RandWrite] {
            for threads in [1, 2, 4, 8, 16, 32, 64, 128] {
                assert!(disk
                    .cases
                    .iter()
                    .any(|c| c.op == op && c.block == 1024 && c.threads == threads));
            }
        }
        assert_eq!(disk.cases.len(), 4 * 3 * 3 + 2 * 8);
    }

    #[test]
    fn scale_multiplies_durations() {
        let mut d = Duration::from_millis(100);
        scale_duration(&mut d, 0.1);
        assert_eq!(d, Duration::from_millis(10));
        scale_duration(&mut d, 1e-9);
        assert_eq!(d, Duration::from_millis(1));
        assert_eq!(scaled_linpack_n(Profile::Quick, 0.125), Some(1000));
    }
}
