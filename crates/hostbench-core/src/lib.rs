//! hostbench-core: everything the subsystem crates share.
//!
//! The result model (`model`) is the JSON contract `hostbench/result/v1`; the runner (`runner`) is
//! the one place where warm-up, repetitions, statistics, progress and partial saving happen, so
//! every benchmark reports the same way. Host facts (`host`), the measured core clock (`clock`),
//! thread pinning (`affinity`), units (`units`) and the `--spec` file (`spec`) live here too.

pub mod affinity;
pub mod buffer;
pub mod build_info;
pub mod burn;
pub mod check;
pub mod clock;
pub mod conditions;
pub mod error;
pub mod health;
pub mod histogram;
pub mod host;
pub mod interrupt;
pub mod isa;
pub mod microarch;
pub mod model;
pub mod named;
pub mod parallel;
pub mod reference;
pub mod rng;
pub mod runner;
pub mod spec;
pub mod stats;
pub mod subsystem;
pub mod units;

pub use error::BenchError;
pub use model::{Params, Peak, Record, Reference, RunResult, Stats};
pub use runner::{Case, Phase, Runner, RunnerConfig, Sample};
