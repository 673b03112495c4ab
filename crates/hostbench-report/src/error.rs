//! Errors of the report crate.
//!
//! The split matters for exit codes: `BadInput` is the user's file or argument (a truncated or
//! foreign JSON file, a database from a newer hostbench, a corrupted database, an unknown run id)
//! and becomes exit code 2 with one line naming the problem; everything else is a runtime failure.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A bad input file, database or argument; the message names it.
    #[error("{0}")]
    BadInput(String),
    /// Reading or writing a file failed. (The I/O error is part of the message, not a source,
    /// so `{:#}` does not print it twice.)
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    /// The history database failed at run time (locked, disk full, …).
    #[error("history database {path}: {message}")]
    Db { path: PathBuf, message: String },
    /// Drawing a chart failed.
    #[error("chart '{chart}': {message}")]
    Chart { chart: String, message: String },
}

impl ReportError {
    pub fn bad(msg: impl Into<String>) -> Self {
        Self::BadInput(msg.into())
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            err: source,
        }
    }

    /// Whether this is the user's input (exit code 2) rather than a runtime failure.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, Self::BadInput(_))
    }
}
