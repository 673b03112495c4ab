//! hostbench: the binary. `main` stays thin: parse, dispatch, map the error to an exit code.

mod cli;
mod commands;
mod registry;
mod settings;

use std::process::ExitCode;

use clap::Parser;
use hostbench_core::BenchError;
use hostbench_report::ReportError;

/// Exit codes (DESIGN.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok = 0,
    Failure = 1,
    Usage = 2,
    /// Some benchmarks were skipped or failed while others ran.
    Partial = 3,
    /// `history compare` found a regression beyond the threshold.
    Regressed = 4,
}

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::dispatch(cli) {
        Ok(code) => ExitCode::from(code as u8),
        Err(err) => {
            eprintln!("hostbench: error: {err:#}");
            let usage = err.chain().any(|e| {
                matches!(
                    e.downcast_ref::<BenchError>(),
                    Some(BenchError::InvalidInput(_))
                ) || e
                    .downcast_ref::<ReportError>()
                    .is_some_and(ReportError::is_bad_input)
            });
            ExitCode::from(if usage { Exit::Usage } else { Exit::Failure } as u8)
        }
    }
}
