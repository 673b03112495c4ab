//! `hostbench cpu`: the compute-throughput sweep.

use hostbench_core::Runner;

use crate::cli::CpuArgs;
use crate::settings;
use crate::Exit;

pub fn run(args: &CpuArgs) -> anyhow::Result<Exit> {
    let common = settings::common(&args.common)?;
    let cfg = settings::cpu(args, &common)?;
    let host = super::host_inventory(&common.spec);
    let mut runner = Runner::new(common.runner.clone(), host.clone());
    hostbench_cpu::run_compute(&mut runner, &cfg, &host, &common.spec)?;
    let result = runner.finish()?;
    super::emit(&result, &common)
}
