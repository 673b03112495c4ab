//! The JSON result contract `hostbench/result/v1` (DESIGN.md §2).
//!
//! Field names here *are* the contract: add fields freely, never rename. Every number is in SI
//! base units (`B/s`, `bit/s`, `FLOP/s`, `OP/s`, `IO/s`, `s`); scaling for humans happens only in
//! formatters. Tables and JSON are both rendered from these structs, so they cannot disagree.

mod conditions;
mod diagnosis;
mod record;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use conditions::{
    CgroupConditions, ClockSpan, Conditions, CpuShare, GpuConditions, KernelThreadShare,
    MemoryPressure,
};
pub use diagnosis::{Cause, Diagnosis, Trigger, SHORT_OF_PEAK};
pub use record::{
    Incomplete, Metric, Peak, Record, Reference, Stats, Work, KEPT_SCHEDULE, NOISY_CV,
    PAGES_GRANTED,
};

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

/// A case that produced no record.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Skipped {
    pub benchmark: String,
    pub params: Params,
    /// `unsupported`, `failed`, `invalid` or `budget`.
    pub kind: String,
    pub reason: String,
}
