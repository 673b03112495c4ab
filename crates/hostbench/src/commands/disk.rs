//! `hostbench disk`: throughput, IOPS and latency percentiles in a scratch directory.

use hostbench_core::Runner;

use crate::cli::DiskArgs;
use crate::settings;
use crate::Exit;

pub fn run(args: &DiskArgs) -> anyhow::Result<Exit> {
    // Before any thread exists, so every thread inherits the blocked signals and Ctrl-C reaches
    // the cleanup thread, which removes the scratch directory.
    hostbench_disk::place::install_signal_cleanup();
    let common = settings::common(&args.common)?;
    let cfg = settings::disk(args, &common)?;
    let host = super::host_inventory(&common.spec);
    let mut runner = Runner::new(common.runner.clone(), host.clone());
    hostbench_disk::run_disk(&mut runner, &cfg, &host, &common.spec)?;
    let result = runner.finish()?;
    super::emit(&result, &common)
}
