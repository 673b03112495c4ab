//! A record's diagnosis as stored in the result: each measured cause of its shortfall, with its
//! share and what was measured (`Record::diagnosis`, `hostbench/result/v1`, additive).
//!
//! Plain data with serde; the inference that produces it (`crate::conditions::diagnose`) imports
//! it, never the other way round (issue 53).

use serde::{Deserialize, Serialize};

/// One cause of a shortfall (cause ids: add, never rename).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Diagnosis {
    /// `cgroup_quota`, `cpu_contention`, `steal`, `shared_cores`, `clock_drop`, `thermal`,
    /// `power_cap`, `affinity`, `memory_pressure`, `solve_overhead` (a LINPACK solve's own
    /// overhead), `sender_behind` (a paced stream's sender that did not keep its schedule; like
    /// `solve_overhead` the benchmark's, not a condition of the machine), `kernel_io` (the
    /// kernel's interrupts and threads on a disk or network benchmark's CPUs: its own I/O being
    /// completed, also the benchmark's) or `none_found`.
    pub cause: String,
    /// The share of the record's CPU time (or throughput) the cause accounts for, 0–1; 0 where
    /// the source counts events but cannot size them (thermal throttling, reclaim).
    pub share: f64,
    /// What was measured, naming the figure: "steal 31 % of CPU time on CPUs 8–15".
    pub text: String,
}

impl Diagnosis {
    /// A cause with its share clamped to 0–1.
    pub fn new(cause: &str, share: f64, text: String) -> Self {
        Self {
            cause: cause.into(),
            share: share.clamp(0.0, 1.0),
            text,
        }
    }

    /// A condition the record was measured under (what `compare` may excuse a difference by,
    /// and a noisy record's warning may name), rather than "none found" or the benchmark's own
    /// overhead.
    pub fn is_condition(&self) -> bool {
        !matches!(
            self.cause.as_str(),
            "none_found" | "solve_overhead" | "sender_behind" | "kernel_io"
        )
    }
}
