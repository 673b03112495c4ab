//! `hostbench fleet report DIR`.

use crate::cli::FleetReportArgs;
use crate::Exit;

pub fn run(_args: &FleetReportArgs) -> anyhow::Result<Exit> {
    Err(hostbench_core::BenchError::Unsupported("fleet report: not built yet".into()).into())
}
