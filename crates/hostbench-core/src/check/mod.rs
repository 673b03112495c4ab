//! `hostbench check`: whether a node is fit for service, and if not, why, in one line.
//!
//! The verdict document `hostbench/check/v1` (`CheckDoc`) and the rules that turn figures,
//! hardware counters and the inventory into verdicts. Pure: the binary measures (the subsystems'
//! `check` profile, or the standard run), reads the counters and the expectation file, and hands
//! them here; nothing in this module measures or prints.
//!
//! The rules follow what operators of DCGM, NHC and gpu-burn asked for, and what those tools got
//! wrong: a figure is held against the expectation file, else a baseline, else a share of its
//! documented peak, and the yardstick is named; a figure that misses once and passes its retry is
//! a `warn` (no single disturbed sample fails a node); a miss whose measured cause is outside the
//! node's hardware (a cgroup quota, a busy neighbour, stolen time, shared cores) is `unknown`
//! with that cause, never `fail`; a hardware cause (error counters, a downtrained link, a clock
//! held by heat or the power brake, missing CPUs, memory or GPUs) is `fail`; and a check that
//! could not run is never `pass`.
//!
//! * `expect` — the expectation file (the `[expect]` section of a `--spec` TOML file).
//! * `judge` — figures, counters and inventory into `Check`s; the node's verdict and reason.

pub mod expect;
pub mod judge;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::conditions::diagnose::Diagnosis;
use crate::model::{Host, Tool};

/// Schema identifier of the verdict document.
pub const CHECK_SCHEMA: &str = "hostbench/check/v1";

/// A check's (and the node's) outcome. Ordered by what the node's verdict takes first: any
/// `fail` fails the node; else any `unknown` leaves it unjudged; else it passes (warnings
/// allowed).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Warn,
    Unknown,
    Fail,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Unknown => "unknown",
            Verdict::Fail => "fail",
        }
    }

    /// The first word of the output's first line.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Pass | Verdict::Warn => "OK",
            Verdict::Unknown => "UNKNOWN",
            Verdict::Fail => "FAIL",
        }
    }
}

/// What a measured value was held against, and where that came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Expected {
    /// The bound (a number in the record's unit) or the expected value (a count, a pattern).
    pub value: Value,
    /// How the measured value must relate to it: `>=`, `<=`, `==`, `matches`.
    pub op: String,
    /// Where it came from: `expect FILE:LINE`, `baseline run #12`, `baseline median of 5 runs`,
    /// `0.85 x peak (…)`, `the reader's own finding`.
    pub source: String,
}

/// A figure that missed once: both tries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Retry {
    pub first: f64,
    pub second: f64,
}

/// One check: a figure, a counter source, or an inventory item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Check {
    /// `cpu.flops f64 avx512 x2`, `health.gpu`, `inventory.cpus`.
    pub id: String,
    /// `figure`, `health` or `inventory`.
    pub kind: String,
    /// The measured value (a number in `unit`, a count, a model name); null where nothing was
    /// measured.
    pub measured: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Expected>,
    pub verdict: Verdict,
    /// One line, naming the check: what was measured against what, and why it is not a pass.
    pub reason: String,
    /// For a figure short of its yardstick: the record's diagnosis (the causes measured).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnosis: Vec<Diagnosis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
}

/// A figure measured with nothing to hold it against: reported, not judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Reported {
    pub id: String,
    pub measured: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Why it was not judged.
    pub note: String,
}

/// The verdict document `hostbench/check/v1`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckDoc {
    pub schema: String,
    pub tool: Tool,
    /// The node's name (the hostname, or Slurm's name for it where known).
    pub node: String,
    /// `quick`, `standard` or `long`.
    pub level: String,
    pub started_at: String,
    pub finished_at: String,
    /// Wall time of the whole check, in seconds.
    pub seconds: f64,
    /// What the figures were held against, in the order tried: the expectation file, a
    /// baseline, a share of the documented peak.
    pub yardsticks: Vec<String>,
    pub verdict: Verdict,
    /// The node's verdict in one line (the output's first line without its first word).
    pub reason: String,
    pub checks: Vec<Check>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reported: Vec<Reported>,
    /// The inventory and counters the checks read.
    pub host: Host,
}

/// The JSON Schema of a `hostbench/check/v1` document (`hostbench schema check`).
pub fn check_schema() -> Value {
    let mut schema = schemars::schema_for!(CheckDoc).to_value();
    schema["$id"] = Value::from(CHECK_SCHEMA);
    schema["title"] = Value::from("hostbench check verdict document");
    schema["properties"]["schema"] = serde_json::json!({ "const": CHECK_SCHEMA });
    schema
}
