//! `hostbench linpack`: the HPL-style solve.

use hostbench_core::Runner;

use crate::cli::LinpackArgs;
use crate::settings;
use crate::Exit;

pub fn run(args: &LinpackArgs) -> anyhow::Result<Exit> {
    let common = settings::common(&args.common)?;
    let lp = settings::linpack(args)?;
    let host = super::host_inventory(&common.spec);
    let mut runner = Runner::new(common.runner.clone(), host.clone());
    hostbench_cpu::run_linpack(
        &mut runner,
        lp.size,
        lp.threads,
        &host,
        &common.spec,
        settings::reference_scope(args.reference),
    )?;
    let result = runner.finish()?;
    super::emit(&result, &common)
}
