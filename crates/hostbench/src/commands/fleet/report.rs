//! `hostbench fleet report DIR`.

use std::path::Path;

use crate::cli::FleetReportArgs;
use crate::Exit;

pub fn run(_args: &FleetReportArgs) -> anyhow::Result<Exit> {
    Err(hostbench_core::BenchError::Unsupported("fleet report: not built yet".into()).into())
}

/// Stand-in until the fleet report lands: counts nodes.
pub fn report(dir: &Path, _outlier: f64, _quiet: bool) -> anyhow::Result<Exit> {
    let d = hostbench_report::fleet::layout::FleetDir::new(dir);
    let plan = hostbench_fleet::read_plan(&d);
    let ok = plan.as_ref().is_some_and(|p| {
        p.not_measured.is_empty()
            && p.nodes.iter().all(|n| {
                hostbench_fleet::read_status(&d.node_status(n))
                    .is_some_and(|s| s.status == hostbench_report::fleet::layout::Status::Ok)
            })
    });
    Ok(if ok { Exit::Ok } else { Exit::Partial })
}
