//! One measured case (`Record`) and the figures it carries: its statistics, peak and reference.
//!
//! Part of the result contract (`model`): plain data with serde. The conditions a record was
//! measured under and its diagnosis are typed in sibling modules, so the schema is read in one
//! place and the code that samples or infers them (`conditions`, `conditions::diagnose`) imports
//! it, never the other way round (issue 53).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::conditions::Conditions;
use super::diagnosis::{Diagnosis, Trigger};
use super::Params;

/// Whether larger or smaller values are better; decides which of min/max is "best".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    Throughput,
    Latency,
}

/// What a case's threads do, as its subsystem says on its `Case` (`Case::work`): the diagnosis
/// reads it to know which shortfalls a condition can explain (threads one per CPU, the kernel's
/// I/O), so that it never reads a subsystem's benchmark ids. Not part of the result: a record
/// read back from a file has `Other`, and nothing that reads a file diagnoses it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Work {
    /// Nothing the diagnosis treats apart (a GPU's kernels, a test's case).
    #[default]
    Other,
    /// Independent computing threads, one per CPU, whose rate follows the cores they get and
    /// whose thread-count sweep should scale linearly (`cpu.flops`, `cpu.iops`).
    Compute,
    /// Computing threads that cooperate on one solve (LINPACK): they follow the cores too, but
    /// their steps are not judged against linear scaling.
    Solve,
    /// CPU-bound threads whose rate follows memory (`mem.*`).
    Memory,
    /// Storage I/O: the kernel's interrupts and threads complete the benchmark's own work.
    Storage,
    /// Network I/O, as storage.
    Network,
}

impl Work {
    /// The threads compute: their rate follows the cores they get.
    pub fn computes(self) -> bool {
        matches!(self, Work::Compute | Work::Solve)
    }

    /// The `threads` parameter counts CPU-bound workers, one per CPU.
    pub fn cpu_bound(self) -> bool {
        matches!(self, Work::Compute | Work::Solve | Work::Memory)
    }

    /// The kernel's interrupts and threads do part of the work (disk, network).
    pub fn does_io(self) -> bool {
        matches!(self, Work::Storage | Work::Network)
    }
}

/// `extra` key a memory record sets to `"mixed"` when it asked for huge pages (`pages=huge`)
/// and the kernel backed too little of its memory with them, even after a second request: its
/// figure is not a huge-page figure, and no headline may present it as one.
pub const PAGES_GRANTED: &str = "pages_granted";

/// CV above which a record carries a "noisy" warning (DESIGN.md §5).
pub const NOISY_CV: f64 = 0.05;

/// A paced sender (`extra.offered_bps` beside `extra.sent_bps`) that kept this share of its
/// schedule or more offered the load it was asked for: below it the figure times the sender.
pub const KEPT_SCHEDULE: f64 = 0.97;

/// One measured case.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Record {
    pub benchmark: String,
    pub params: Params,
    pub metric: Metric,
    pub unit: String,
    /// Median of the samples.
    pub value: f64,
    pub stats: Stats,
    pub samples: Vec<f64>,
    pub peak: Option<Peak>,
    /// `value / peak.value` for throughput, `peak.value / value` for latency.
    pub efficiency: Option<f64>,
    pub reference: Option<Reference>,
    pub warnings: Vec<String>,
    /// Benchmark-specific results that are not the headline value (residual, chains, clock…).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
    /// What the host did during the measured samples (see `crate::conditions`, which samples them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Conditions>,
    /// The measured causes of a shortfall, largest first (see `crate::conditions::diagnose`, which infers them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnosis: Vec<Diagnosis>,
    /// Efficiency against the effective cores (`host.cpu.effective_cores`) where the record ran
    /// more threads than the host delivers independent FMA throughput for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency_effective: Option<f64>,
    /// Set when the case ended before all its measured samples (its network peer went away):
    /// `samples` holds the ones that finished, and this says why the rest are missing. Such a
    /// record is kept, not trusted as complete: the run's exit code counts it as a failed case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<Incomplete>,
    /// Why `diagnosis` was made, set by the diagnosis; not part of the result (a record read
    /// back has none: [`Record::trigger`] then reads its own figures).
    #[serde(skip)]
    pub trigger: Option<Trigger>,
    /// What its threads did (its case's [`Work`]); not part of the result.
    #[serde(skip)]
    pub work: Work,
    /// The causes its subsystem found in what only it knows how to read (a LINPACK solve's
    /// overhead, a paced sender's schedule, a GPU's clock reasons), by `Subsystem::causes` when
    /// the runner committed it; the diagnosis ranks them with its own. Not part of the result:
    /// kept for a re-diagnosis of the same record (`check`'s judge).
    #[serde(skip)]
    pub subsystem_causes: Vec<Diagnosis>,
}

/// Why a record holds fewer samples than its case asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Incomplete {
    /// The error that ended the case, as the failed sample reported it.
    pub error: String,
    /// Measured samples the case asked for (`samples` has the ones that finished).
    pub samples_planned: usize,
}

impl Record {
    /// Attach a theoretical limit and derive the efficiency from it.
    pub fn set_peak(&mut self, peak: Option<Peak>) {
        self.efficiency = peak.as_ref().and_then(|p| {
            if p.value <= 0.0 || self.value <= 0.0 {
                return None;
            }
            Some(match self.metric {
                Metric::Throughput => self.value / p.value,
                Metric::Latency => p.value / self.value,
            })
        });
        if let Some(e) = self.efficiency {
            // Above the limit means the limit (or the clock under it) is wrong: say so.
            if e > 1.05 {
                self.warnings.push(format!(
                    "measured {:.0} % of the theoretical limit: the limit's basis is likely wrong",
                    e * 100.0
                ));
            }
        }
        self.peak = peak;
    }

    /// A rate that no document fixes, only this host's own one-thread run (a unit with no
    /// documented throughput: Zen 4's VNNI and BF16, AMX-FP16, Arm's `bfmmla`…). It is not a
    /// theoretical limit: `peak` and `efficiency` stay null, the rate is kept with its basis in
    /// `extra.inferred_peak`, and the record's value over it is `extra.scaling_efficiency`:
    /// how well the threads scale from one, which cannot come out low the way a distance from
    /// the hardware's limit can, and is named for what it is.
    pub fn set_inferred_peak(&mut self, inferred: Peak) {
        self.set_peak(None);
        if inferred.value > 0.0 && self.value > 0.0 {
            let scaling = match self.metric {
                Metric::Throughput => self.value / inferred.value,
                Metric::Latency => inferred.value / self.value,
            };
            self.extra
                .insert("scaling_efficiency".into(), Value::from(scaling));
        }
        self.extra.insert(
            "inferred_peak".into(),
            serde_json::json!({"value": inferred.value, "basis": inferred.basis}),
        );
    }

    /// The scaling figure of a record whose only limit is inferred ([`Record::set_inferred_peak`]).
    pub fn scaling_efficiency(&self) -> Option<f64> {
        self.extra.get("scaling_efficiency").and_then(Value::as_f64)
    }

    /// Whether the record asked for huge pages and ran largely on base pages ([`PAGES_GRANTED`]).
    pub fn pages_mixed(&self) -> bool {
        self.extra.get(PAGES_GRANTED).and_then(Value::as_str) == Some("mixed")
    }

    /// Whether the record's limit was inferred from its own host's run rather than documented.
    pub fn has_inferred_peak(&self) -> bool {
        self.extra.contains_key("inferred_peak")
    }

    /// Why the record was diagnosed: as the diagnosis stored it, or for a record read back
    /// from a file (which does not store it) the shortfalls its own figures show.
    pub fn trigger(&self) -> Trigger {
        self.trigger.clone().unwrap_or_else(|| Trigger::of(self))
    }

    /// Write the "noisy" warning of a record whose samples spread beyond [`NOISY_CV`], the one
    /// place its words are made; the diagnosis calls it once it has looked for a cause
    /// (`conditions::diagnose::apply`, at the runner's commit). Where it measured one, the
    /// warning names it in place of the advice (rerun, raise `--repeat`). The warning comes
    /// first among the record's warnings, as the first thing said of its samples. A second
    /// diagnosis (a scaling step's, `check`'s) names a cause in a warning written without one,
    /// and leaves one that names a cause as it is.
    pub fn note_noise(&mut self, cause: Option<&str>) {
        if !(self.stats.n > 1 && self.stats.cv > NOISY_CV) {
            return;
        }
        let head = format!(
            "noisy: CV {:.1} % over {} samples (> {:.0} %)",
            self.stats.cv * 100.0,
            self.stats.n,
            NOISY_CV * 100.0
        );
        let plain = format!("{head}; rerun on a quiet machine or raise --repeat");
        let said = cause.map_or_else(|| plain.clone(), |c| format!("{head}: {c}"));
        match self.warnings.iter().position(|w| w.starts_with(&head)) {
            None => self.warnings.insert(0, said),
            Some(i) if self.warnings[i] == plain => self.warnings[i] = said,
            // Named a cause already.
            Some(_) => {}
        }
    }

    /// A parameter as a display string (strings unquoted).
    pub fn param(&self, key: &str) -> Option<String> {
        self.params.get(key).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }
}

/// Summary statistics of a record's samples (see `stats::summarize`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stats {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    pub stddev: f64,
    pub min: f64,
    pub max: f64,
    /// Coefficient of variation, stddev / mean.
    pub cv: f64,
    /// 95 % confidence interval of the mean (Student's t).
    pub ci95: [f64; 2],
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
}

/// A theoretical limit with the arithmetic that produced it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Peak {
    pub value: f64,
    pub basis: String,
}

/// A reference tool's figure measured side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Reference {
    pub tool: String,
    pub version: String,
    pub value: f64,
    /// hostbench / reference for throughput; reference / hostbench for latency.
    pub ratio: f64,
}
