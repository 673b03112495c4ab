//! The JSON result contract `hostbench/result/v1` (DESIGN.md §2).
//!
//! Field names here *are* the contract: add fields freely, never rename. Every number is in SI
//! base units (`B/s`, `bit/s`, `FLOP/s`, `OP/s`, `IO/s`, `s`); scaling for humans happens only in
//! formatters. Tables and JSON are both rendered from these structs, so they cannot disagree.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Schema identifier written into every result file.
pub const SCHEMA: &str = "hostbench/result/v1";

/// A case's parameters, in insertion order (the order a table shows them in).
pub type Params = Map<String, Value>;

/// One complete run: the host, when, and every record measured.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunResult {
    pub schema: String,
    pub tool: Tool,
    pub host: Host,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub records: Vec<Record>,
    /// Cases that did not produce a record, with the reason (unsupported, failed, over budget).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
    /// The command that produced this result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation: Option<Invocation>,
    /// Wall time of each subsystem's phase of a `run`, in order: where the run's time went.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseTime>,
    /// Subsystems this host does not have (no GPU): neither run nor skipped, so they do not make
    /// the run partial.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_applicable: Vec<NotApplicable>,
    /// What a run found and chose not to measure, and why (the OpenCL view of a GPU that CUDA
    /// measures): neither run nor skipped, so it does not make the run partial either.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOut>,
    /// Set when a signal (Ctrl-C) stopped the run: `records` is what was measured before it, and
    /// `finished_at` stays null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interrupted>,
}

/// A run stopped by a signal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Interrupted {
    /// "SIGINT", "SIGTERM" or "SIGHUP".
    pub signal: String,
    /// When it arrived (RFC 3339).
    pub at: String,
}

/// One phase of a run (a subsystem) and its wall time in seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseTime {
    pub name: String,
    pub seconds: f64,
}

/// A subsystem the host does not have, and why (e.g. "no GPU or OpenCL device found (…)").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NotApplicable {
    pub subsystem: String,
    pub reason: String,
}

/// A part of a subsystem a run chose not to measure: `what` (e.g. "opencl 1: NVIDIA H200") and
/// why, with the command that would measure it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LeftOut {
    pub subsystem: String,
    pub what: String,
    pub reason: String,
}

impl RunResult {
    pub fn new(host: Host) -> Self {
        Self {
            schema: SCHEMA.to_string(),
            tool: Tool::default(),
            host,
            started_at: now_rfc3339(),
            finished_at: None,
            records: Vec::new(),
            skipped: Vec::new(),
            invocation: None,
            phases: Vec::new(),
            not_applicable: Vec::new(),
            left_out: Vec::new(),
            interrupted: None,
        }
    }
}

/// The JSON Schema (draft 2020-12) of a `hostbench/result/v1` document, generated from these very
/// types, so it cannot drift from what hostbench writes. `hostbench schema` prints it.
pub fn result_schema() -> Value {
    let mut schema = schemars::schema_for!(RunResult).to_value();
    schema["$id"] = Value::from(SCHEMA);
    schema["title"] = Value::from("hostbench result document");
    // The one fixed value of the contract: a document names its schema.
    schema["properties"]["schema"] = serde_json::json!({ "const": SCHEMA });
    schema
}

/// The current UTC time as RFC 3339 with second precision.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Tool {
    pub name: String,
    pub version: String,
    /// The git commit hostbench was built from, when the build had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

impl Default for Tool {
    fn default() -> Self {
        Self {
            name: "hostbench".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            revision: crate::build_info::REVISION.map(str::to_string),
        }
    }
}

/// How a result was produced, so that it can be produced again: the command line, and for
/// `run` the profile and scale.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Invocation {
    pub command_line: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
    /// The node's price in USD per hour (`run --price-per-hour`, else the spec file's
    /// `[cost] price_per_hour`): every record then has `extra.per_dollar_hour`, its value
    /// divided by this price (FLOP/s per USD/h, the Phoronix Test Suite's perf-per-dollar).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<f64>,
    /// Where the price came from: `--price-per-hour` or `spec file <path>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_source: Option<String>,
}

/// Host inventory as stored in a result (see `host::inventory`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Host {
    pub hostname: String,
    pub os: String,
    pub kernel: String,
    /// `none`, `kvm`, `vmware`, `xen`, `hyperv`, … or `unknown`.
    pub virtualization: String,
    pub cpu: Cpu,
    pub memory: Memory,
    pub numa_nodes: u32,
    /// cpufreq scaling governor of CPU 0, when the kernel exposes one.
    #[serde(default)]
    pub governor: Option<String>,
    /// Transparent huge pages mode (`always`, `madvise`, `never`): it decides what the memory and
    /// disk buffers get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thp: Option<String>,
    /// The kernel command line (mitigations, isolcpus, hugepages… change results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_cmdline: Option<String>,
    /// Hardware error and link counters (`health.*`) read when the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<Health>,
}

/// Hardware error and link counters, read from the kernel's files and NVML without extra tools
/// (`hostbench_core::health`). Each source is either read or named in `unavailable` with why:
/// a counter that could not be read is never taken for a zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Health {
    /// The directory read in place of `/` when it is not `/` (a fixture tree named by
    /// `HOSTBENCH_HEALTH_ROOT`), so a record made from one says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    pub readings: Vec<HealthReading>,
    /// Each source (`health.edac`, …) that has no reading on this host, and why.
    #[serde(default)]
    pub unavailable: std::collections::BTreeMap<String, String>,
}

/// One device's counters: a memory controller or DIMM, a PCIe function, a NIC, an NVMe
/// controller, a GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HealthReading {
    /// `health.edac`, `health.mce`, `health.pcie`, `health.nic`, `health.nvme`, `health.gpu`,
    /// `health.xid`.
    pub id: String,
    /// What was read: `mc0`, `mc0/dimm3`, `0000:41:00.0`, `eth0`, `nvme0`, `gpu0`.
    pub device: String,
    /// What that is, for a person: the DIMM's label, the PCI class and driver, the GPU's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The counters and states read, by name: counts as integers, rates in SI units
    /// (`*_transfers_per_second`), states as strings.
    pub values: Params,
    /// What the readings show on their own, before any expectation file is applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<HealthFinding>,
}

/// A reader's finding: `fail` is a fault of the hardware on its own (an uncorrectable error, a
/// pending row remap, a link trained below its width), `warn` worth a look, `info` context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HealthFinding {
    pub severity: Severity,
    pub text: String,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warn,
    Fail,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Fail => "fail",
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cpu {
    pub vendor: String,
    pub model: String,
    pub sockets: u32,
    /// Physical cores in all sockets.
    pub cores: u32,
    /// Logical CPUs (hardware threads) online.
    pub threads: u32,
    /// ISA features detected at run time (not compile time).
    pub isa: Vec<String>,
    /// Advertised clock (cpufreq max, or the model string's "@ x GHz"), when known.
    pub nominal_hz: Option<f64>,
    /// Core clock measured with a dependent-add chain (see `clock`).
    pub measured_hz: Option<f64>,
    pub caches: Vec<Cache>,
    /// CPUID family/model (x86) or MIDR implementer/part (Arm), for microarchitecture tables.
    #[serde(default)]
    pub family: Option<u32>,
    #[serde(default)]
    pub model_id: Option<u32>,
    /// Microarchitecture name when recognised (e.g. "Zen 4"), used to label peak bases.
    #[serde(default)]
    pub microarch: Option<String>,
    /// The evidence the microarchitecture was identified from (CPUID family/model, or the feature
    /// set where the model number is implausible for it, as some hypervisors report).
    #[serde(default)]
    pub microarch_basis: Option<String>,
    /// Microcode revision (`/proc/cpuinfo`), where the kernel shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub microcode: Option<String>,
    /// Independent FMA throughput the allowed CPUs deliver together, in CPUs (one CPU's rate =
    /// 1): below the CPU count where vCPUs share execution units (hidden SMT, an overcommitted
    /// host). Measured by the effective-cores probe; null where it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_cores: Option<f64>,
    /// How `effective_cores` was measured, and what the CPU pairs showed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_cores_basis: Option<String>,
    /// The probe's finding in one sentence, for reports: "16 CPUs; FMA throughput of 8.3 CPUs
    /// measured: pairs share execution units (hidden SMT or an overcommitted host)".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_cores_note: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cache {
    pub level: u32,
    /// `data`, `instruction` or `unified`.
    pub kind: String,
    pub size_bytes: u64,
    /// How many separate copies of this cache exist (distinct `shared_cpu_list`s).
    pub instances: u32,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Memory {
    pub total_bytes: u64,
}

/// Whether larger or smaller values are better; decides which of min/max is "best".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    Throughput,
    Latency,
}

/// `extra` key a memory record sets to `"mixed"` when it asked for huge pages (`pages=huge`)
/// and the kernel backed too little of its memory with them, even after a second request: its
/// figure is not a huge-page figure, and no headline may present it as one.
pub const PAGES_GRANTED: &str = "pages_granted";

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
    /// What the host did during the measured samples (see `conditions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<crate::conditions::Conditions>,
    /// The measured causes of a shortfall, largest first (see `conditions::diagnose`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnosis: Vec<crate::conditions::diagnose::Diagnosis>,
    /// Efficiency against the effective cores (`host.cpu.effective_cores`) where the record ran
    /// more threads than the host delivers independent FMA throughput for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency_effective: Option<f64>,
    /// Set when the case ended before all its measured samples (its network peer went away):
    /// `samples` holds the ones that finished, and this says why the rest are missing. Such a
    /// record is kept, not trusted as complete: the run's exit code counts it as a failed case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<Incomplete>,
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

/// A case that produced no record.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Skipped {
    pub benchmark: String,
    pub params: Params,
    /// `unsupported`, `failed`, `invalid` or `budget`.
    pub kind: String,
    pub reason: String,
}
