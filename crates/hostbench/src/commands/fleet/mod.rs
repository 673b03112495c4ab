//! `hostbench fleet run | report | check`.

mod check;
mod report;
mod run;

use crate::cli::{FleetArgs, FleetCommand};
use crate::Exit;

pub fn run(args: &FleetArgs) -> anyhow::Result<Exit> {
    match &args.command {
        FleetCommand::Run(a) => run::run(a),
        FleetCommand::Report(a) => report::run(a),
        FleetCommand::Check(a) => check::run(a),
    }
}
