//! `hostbench run`: every benchmark this binary has, with a profile's defaults, written to
//! `<out>/<UTC timestamp>-<host>/run.json` (rewritten after every case, so an interrupted run
//! keeps what it measured).

use std::path::PathBuf;
use std::time::Duration;

use hostbench_core::model::Host;
use hostbench_core::units::parse_list;
use hostbench_core::{BenchError, Runner};
use hostbench_cpu::{CpuConfig, Dtype, IsaChoice};
use hostbench_disk::DiskConfig;
use hostbench_gpu::GpuConfig;
use hostbench_mem::MemConfig;

use crate::cli::{Profile, RunArgs};
use crate::settings;
use crate::Exit;

/// Subsystems `run` knows, in the order it runs them.
const SUBSYSTEMS: [&str; 5] = ["cpu", "linpack", "mem", "disk", "gpu"];

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

pub fn run(args: &RunArgs) -> anyhow::Result<Exit> {
    let mut common = settings::common(&args.common)?;
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
    for subsystem in &selected {
        match subsystem.as_str() {
            "cpu" => {
                let cfg = cpu_config(args.profile, common.duration);
                hostbench_cpu::run_compute(&mut runner, &cfg, &host, &common.spec)?;
            }
            "linpack" => {
                let threads = hostbench_core::affinity::allowed_cpus().len().max(1);
                hostbench_cpu::run_linpack(
                    &mut runner,
                    linpack_n(args.profile),
                    threads,
                    &host,
                    &common.spec,
                )?;
            }
            "mem" => {
                let cfg = mem_config(args.profile, common.duration, &host);
                hostbench_mem::run_mem(&mut runner, &cfg, &host, &common.spec)?;
            }
            "disk" => {
                let cfg = disk_config(args.profile, common.duration, &args.disk_dir);
                hostbench_disk::run_disk(&mut runner, &cfg, &host, &common.spec)?;
            }
            "gpu" => {
                let cfg = gpu_config(args.profile, common.duration);
                hostbench_gpu::run_available(&mut runner, &cfg)?;
            }
            _ => {}
        }
    }
    let result = runner.finish()?;
    // `Runner::finish` has already written the final run.json (it is the partial path);
    // `--json` may ask for a second copy.
    let exit = super::emit(&result, &common)?;
    if !common.quiet {
        eprintln!("\nResults written to {}", run_json.display());
    }
    Ok(exit)
}
