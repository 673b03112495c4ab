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
    let n = hostbench_cpu::run_linpack(
        &mut runner,
        lp.size,
        lp.threads,
        &host,
        &common.spec,
        settings::reference_scope(args.reference),
    )?;
    if args.mxp {
        // HPL-MxP at the same n and threads, so the speed-up over f64 is measured and said.
        hostbench_cpu::run_linpack_mxp(&mut runner, n, lp.threads)?;
    }
    let result = runner.finish()?;
    super::emit(&result, &common)
}
