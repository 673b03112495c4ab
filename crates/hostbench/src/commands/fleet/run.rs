//! `hostbench fleet run`.

use crate::cli::FleetRunArgs;
use crate::Exit;

pub fn run(_args: &FleetRunArgs) -> anyhow::Result<Exit> {
    Err(hostbench_core::BenchError::Unsupported("fleet run: not built yet".into()).into())
}
