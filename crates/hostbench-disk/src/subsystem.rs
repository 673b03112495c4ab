//! The disk subsystem for `hostbench run`, in the run's scratch directory: the fio presets
//! (standard), two of them (quick), every op with both engines (full), or the classic matrix.
//! The data file stays within a tenth of the free space, never below the floor of `size_file`:
//! where the scratch directory cannot hold that, the disk's cases are skipped as refused.

use std::path::Path;
use std::time::Duration;

use hostbench_core::subsystem::{scaled, Profile, ReferenceTool, RunContext, Subsystem};
use hostbench_core::{BenchError, Phase, Runner};

use crate::{cases_from, classic_cases, default_cases, DiskConfig, EngineChoice, EngineKind, Op};

/// Sequential and random I/O through io_uring or psync.
pub struct Disk;

/// The classic profile's thread counts for the large-block matrix (its 1 KiB random cases run
/// 1–128 threads; see [`classic_cases`]).
pub const CLASSIC_THREADS: [usize; 3] = [1, 2, 4];

/// What a profile runs in `dir`, before `--duration` and `--scale`.
pub fn profile_config(profile: Profile, dir: &Path) -> DiskConfig {
    let mut cfg = DiskConfig {
        dir: dir.to_path_buf(),
        ..DiskConfig::default()
    };
    match profile {
        // The health probe: 4 KiB random reads at queue depth 32 (fio's randread preset).
        Profile::Check => {
            cfg.cases = default_cases()
                .into_iter()
                .filter(|c| c.op == Op::RandRead)
                .take(1)
                .collect();
            cfg.duration = Duration::from_millis(700);
        }
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
            cfg.cases = classic_cases(&CLASSIC_THREADS);
            cfg.duration = Duration::from_secs(1);
        }
    }
    cfg
}

fn run_config(ctx: &RunContext<'_>) -> DiskConfig {
    let mut cfg = profile_config(ctx.profile, ctx.scratch_dir);
    cfg.duration = ctx.sample_length(cfg.duration);
    if !cfg.ramp.is_zero() {
        cfg.ramp = scaled(cfg.ramp, ctx.scale);
    }
    cfg.io_bytes = cfg.io_bytes.map(|b| ((b as f64 * ctx.scale) as u64).max(1));
    cfg.reference = ctx.reference;
    // Too little free space for an honest file skips the disk, not the whole run.
    cfg.refusal_skips = true;
    cfg
}

/// Records `run_disk` plans: throughput, IOPS and latency for every case on every engine.
pub fn record_count(cfg: &DiskConfig) -> usize {
    let engines = match &cfg.engines {
        EngineChoice::List(v) => v.len(),
        EngineChoice::Auto => 1,
    };
    cfg.cases.len() * engines * 3
}

impl Subsystem for Disk {
    fn name(&self) -> &'static str {
        "disk"
    }

    fn prepare(&self) {
        // Scratch directories are removed on Ctrl-C too; see `place::install_signal_cleanup`.
        crate::place::install_signal_cleanup();
    }

    fn summary(&self) -> &'static str {
        "sequential and random read/write throughput, IOPS and latency against the interface limit"
    }

    fn estimate(&self, ctx: &RunContext<'_>) -> Phase {
        let cfg = run_config(ctx);
        // Three records per measured case share one sample length.
        Phase::new(
            self.name(),
            record_count(&cfg),
            cfg.duration.as_secs_f64() / 3.0,
        )
    }

    fn run(&self, runner: &mut Runner, ctx: &RunContext<'_>) -> Result<(), BenchError> {
        crate::run_disk(runner, &run_config(ctx), ctx.host, ctx.spec)
    }

    fn reference_tools(&self) -> &'static [ReferenceTool] {
        &[ReferenceTool {
            name: "fio",
            package: "fio",
            serves: "disk.throughput, disk.iops, disk.latency (same op, block, iodepth, engine, O_DIRECT)",
            in_run: "the first case (SEQ1M Q8T1 read in the standard profile), on the same file",
            also: "scripts/bench/disk-vs-fio for interleaved rounds",
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_profile_is_the_assignments_matrix() {
        // Four ops x 1, 10, 100 MB x 1, 2, 4 threads, and 1 KB random x 1-128 threads.
        let mib = 1 << 20;
        let disk = profile_config(Profile::Classic, Path::new("."));
        for op in [Op::Read, Op::Write, Op::RandRead, Op::RandWrite] {
            for block in [mib, 10 * mib, 100 * mib] {
                for threads in CLASSIC_THREADS {
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
        assert_eq!(record_count(&disk), disk.cases.len() * 3);
    }
}
