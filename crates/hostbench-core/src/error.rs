//! The error type shared by every subsystem crate.
//!
//! `Unsupported` is deliberate and distinct: a missing ISA, GPU or kernel feature makes a case
//! *skipped* (exit code 3 when others ran), whereas `InvalidInput` is the user's mistake (exit
//! code 2) and everything else is a runtime failure (exit code 1).

use std::path::PathBuf;

/// Errors a benchmark or the runner can return.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Bad argument or input file; the message names the offending value.
    #[error("{0}")]
    InvalidInput(String),
    /// The machine cannot run this case (missing ISA, device, permission…).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A kernel produced a wrong result: the measurement cannot be trusted.
    #[error("validation failed: {0}")]
    Validation(String),
    /// An I/O error, with the path it concerns.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Any other runtime failure.
    #[error("{0}")]
    Failed(String),
}

impl BenchError {
    pub fn invalid(msg: impl Into<String>) -> Self {
        Self::InvalidInput(msg.into())
    }

    pub fn unsupported(msg: impl Into<String>) -> Self {
        Self::Unsupported(msg.into())
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
