//! hostbench: the binary. `main` stays thin: parse, dispatch, map the error to an exit code.

/// `print!` for the binary's output: a closed stdout (`hostbench report a.json | head`) ends the
/// process quietly, as it does any Unix filter, where `print!` would panic.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` through [`out!`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

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
    /// `check` could not judge the node (a quota, a busy neighbour, an unreadable counter the
    /// expectation requires): neither fit nor unfit. node-problem-detector reads any code but 0
    /// and 1 as unknown.
    Unknown = 5,
}

/// Write to stdout; a reader that went away (broken pipe) ends the process with status 0, any
/// other failure (a full disk behind a redirect) with one line and status 1.
pub(crate) fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("hostbench: error: writing to stdout: {e}");
        std::process::exit(Exit::Failure as i32);
    }
}

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let outcome = commands::dispatch(cli);
    // A command that ends while a Ctrl-C handler still writes what it measured waits for it:
    // the handler exits the process (130) itself.
    hostbench_core::interrupt::park_if_interrupted();
    match outcome {
        Ok(code) => ExitCode::from(code as u8),
        // The reader of stdout went away (`| head`): nothing is wrong with the run.
        Err(err)
            if err.chain().any(|e| {
                e.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::SUCCESS
        }
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
