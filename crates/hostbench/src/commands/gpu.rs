//! `hostbench gpu`: compute, device-memory bandwidth, transfers and launch latency on every
//! OpenCL and CUDA device (or the ones asked for); `--list` shows them. No device at all is a
//! clear one-line message and exit code 3, not an error.

use hostbench_core::model::Metric;
use hostbench_core::{BenchError, Case, Runner};

use crate::cli::GpuArgs;
use crate::settings;
use crate::Exit;

pub fn run(args: &GpuArgs) -> anyhow::Result<Exit> {
    let common = settings::common(&args.common)?;
    let cfg = settings::gpu(args, &common)?;
    let listing = hostbench_gpu::list_devices(&cfg.backends);
    if args.list {
        if listing.devices.is_empty() {
            eprintln!("hostbench: {}", listing.none_reason());
            return Ok(Exit::Partial);
        }
        for d in &listing.devices {
            outln!("{}", d.summary());
        }
        for (b, why) in &listing.absent {
            outln!("{}: no device ({why})", b.name());
        }
        return Ok(Exit::Ok);
    }
    let devices = match hostbench_gpu::select(&listing, &cfg) {
        Ok(d) => d,
        Err(BenchError::Unsupported(why)) => {
            // Still a result document (one skipped entry) for pipelines that asked for JSON.
            eprintln!("hostbench: {why}");
            let host = super::host_inventory(&common.spec);
            let mut runner = Runner::new(common.runner.clone(), host);
            let names: Vec<&str> = cfg.backends.iter().map(|b| b.name()).collect();
            let case = Case::new("gpu", Metric::Throughput, "").param("backend", names.join(","));
            runner.skip_with(&case, "unsupported", &why)?;
            let result = runner.finish()?;
            let quiet = settings::Common {
                quiet: true,
                ..common
            };
            super::emit(&result, &quiet)?;
            return Ok(Exit::Partial);
        }
        Err(e) => return Err(e.into()),
    };
    let host = super::host_inventory(&common.spec);
    let mut runner = Runner::new(common.runner.clone(), host);
    hostbench_gpu::run_gpu(&mut runner, &cfg, &devices)?;
    let result = runner.finish()?;
    let exit = super::emit(&result, &common)?;
    // Nothing measured because nothing asked for exists here (the tensor cores asked of an
    // OpenCL device): the same answer as no device at all, not a failure.
    let unsupported = |s: &hostbench_core::model::Skipped| s.kind == "unsupported";
    if result.records.is_empty()
        && !result.skipped.is_empty()
        && result.skipped.iter().all(unsupported)
    {
        return Ok(Exit::Partial);
    }
    Ok(exit)
}
