//! `hostbench mem`: memory bandwidth, the cache-hierarchy sweep and the latency curve.

use hostbench_core::Runner;

use crate::cli::MemArgs;
use crate::settings;
use crate::Exit;

pub fn run(args: &MemArgs) -> anyhow::Result<Exit> {
    let common = settings::common(&args.common)?;
    let cfg = settings::mem(args, &common)?;
    let host = super::host_inventory(&common.spec);
    let mut runner = Runner::new(common.runner.clone(), host.clone());
    hostbench_mem::run_mem(&mut runner, &cfg, &host, &common.spec)?;
    let result = runner.finish()?;
    super::emit(&result, &common)
}
