//! One module per verb; each resolves its settings, runs through the shared runner and hands the
//! result to `emit`, which prints the table and writes the JSON the same way for every verb.

mod burn;
mod check;
mod cpu;
mod disk;
mod docs;
mod fleet;
mod gpu;
mod history;
mod info;
mod linpack;
mod mem;
mod net;
mod peers;
mod report;
mod run;

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use hostbench_core::health::{self, HealthExt};
use hostbench_core::model::{Health, Host, RunResult};
use hostbench_core::runner::write_json_atomic;
use hostbench_core::spec::Spec;
use hostbench_core::{clock, host};

use crate::cli::{Cli, Command};
use crate::registry::SUBSYSTEMS;
use crate::settings::{Common, JsonTarget};
use crate::Exit;
use hostbench_report::{Exporter, JsonExporter, OpenMetricsExporter, TerminalExporter};

pub fn dispatch(cli: Cli) -> anyhow::Result<Exit> {
    match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Info(args) => info::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Cpu(args) => cpu::run(&args),
        Command::Linpack(args) => linpack::run(&args),
        Command::Mem(args) => mem::run(&args),
        Command::Disk(args) => disk::run(&args),
        Command::Net(args) => net::run(&args),
        Command::Gpu(args) => gpu::run(&args),
        Command::Report(args) => report::run(&args),
        Command::History(args) => history::run(&args),
        Command::Fleet(args) => fleet::run(&args),
        Command::Peers(args) => peers::run(&args),
        Command::Completions(args) => docs::completions(&args),
        Command::Man(args) => docs::man(&args),
        Command::Schema(args) => docs::schema(&args),
        Command::Burn(args) => burn::run(&args),
    }
}

/// The live inventory with the spec's overrides and a measured clock.
pub fn host_inventory(spec: &Spec) -> Host {
    let mut h = host::inventory();
    spec.apply(&mut h);
    h.cpu.measured_hz = clock::measure_hz(Duration::from_millis(40));
    h.health = Some(health_counters());
    h
}

/// The hardware error and link counters: the kernel's (core) and each subsystem's own (NVML).
pub fn health_counters() -> Health {
    let mut h = health::read();
    for s in SUBSYSTEMS {
        for (id, part) in s.health() {
            h.add(id, part);
        }
    }
    h
}

/// Print the full tables (stdout, or stderr when JSON goes to stdout) and write the JSON; decide
/// the exit code: 3 when some cases were skipped or cut short while others ran, 1 when no case
/// could be measured in full.
pub fn emit(run: &RunResult, common: &Common) -> anyhow::Result<Exit> {
    emit_as(run, common, &TerminalExporter)
}

/// `emit` with another view of the run on the terminal (`run` prints the one-screen summary).
pub fn emit_as(run: &RunResult, common: &Common, view: &dyn Exporter) -> anyhow::Result<Exit> {
    if !common.quiet {
        let table = view.render(run)?;
        if common.json == Some(JsonTarget::Stdout) {
            eprint!("{table}");
        } else {
            out!("{table}");
        }
    }
    match &common.json {
        Some(JsonTarget::Stdout) => {
            let body = JsonExporter.render(run)?;
            std::io::stdout().write_all(body.as_bytes())?;
        }
        Some(JsonTarget::File(path)) => {
            write_json_atomic(path, run).with_context(|| format!("writing {}", path.display()))?;
        }
        None => {}
    }
    if let Some(path) = &common.openmetrics {
        let text = OpenMetricsExporter.render(run)?;
        hostbench_report::export::write_atomic(path, &text)?;
    }
    Ok(exit_for(run))
}

pub fn exit_for(run: &RunResult) -> Exit {
    // A record cut short (its finished samples kept, marked incomplete) is a failed case, not a
    // completed one: a run whose only records are such is a failure.
    let completed = run.records.iter().any(|r| r.incomplete.is_none());
    let failed = !run.skipped.is_empty() || run.records.iter().any(|r| r.incomplete.is_some());
    match (completed, failed) {
        (_, false) => Exit::Ok,
        (true, true) => Exit::Partial,
        (false, true) => Exit::Failure,
    }
}
