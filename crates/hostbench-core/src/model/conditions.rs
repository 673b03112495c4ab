//! What the host did during a record's measured samples, as stored in the result: the schema
//! of `Record::conditions` (`hostbench/result/v1`, additive).
//!
//! Plain data with serde. The readers that fill it (`crate::conditions`) and the diagnosis that
//! reads it (`crate::conditions::diagnose`) import these types; this module imports nothing of
//! theirs, so the schema sits below the code that samples and infers (issue 53).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the host did during a record's measured samples (schema `hostbench/result/v1`, additive).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Conditions {
    /// The CPUs the measuring threads ran on (all allowed CPUs when the benchmark's threads are
    /// its own and not pinned).
    pub cpus: Vec<usize>,
    /// Seconds of measured samples these conditions cover.
    pub seconds: f64,
    /// CPU time stolen by the hypervisor on those CPUs, as a share of their time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_share: Option<f64>,
    /// Share of the time the measuring threads wanted to run that they waited on a run queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_delay_share: Option<f64>,
    /// CPU time of other processes on those CPUs, as a share of their time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cpu_share: Option<f64>,
    /// CPU time of hostbench's own threads outside the measurement (an OpenCL runtime's
    /// workers, a reference tool's threads) as a share of those CPUs' time: only known where the
    /// measuring threads account for themselves (pinned workers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helper_cpu_share: Option<f64>,
    /// The kernel's time on those CPUs, as a share of their time: interrupts (irq, softirq) and
    /// kernel threads (kworkers, ksoftirqd, jbd2…). It is within `other_cpu_share` as far as
    /// ticks can tell, and may exceed it where they under-read (the threads' times are the
    /// scheduler's). On a disk or network benchmark most of it is the kernel completing the
    /// benchmark's own I/O.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_share: Option<f64>,
    /// The kernel threads that took at least 1 % of those CPUs' time, busiest first (a
    /// kworker's name says the workqueue it served: `kworker/1:0+dio/vda`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_threads: Vec<KernelThreadShare>,
    /// One `/proc/stat` tick as a share of one CPU's time over these samples: the shares above
    /// are counted in ticks, so a share below about twice this is within their noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_resolution: Option<f64>,
    /// The CPUs where steal or other processes took at least 1 %, worst first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_cpu: Vec<CpuShare>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupConditions>,
    /// The core clock at the record's first and last sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_hz: Option<ClockSpan>,
    /// Core and package thermal-throttle events during the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thermal_throttle_events: Option<u64>,
    /// The hottest CPU sensor at the record's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<f64>,
    /// Package energy (RAPL) over the measured samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// The record's work per joule (FLOP/J, B/J…): its value × seconds / energy_j.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_per_joule: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryPressure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuConditions>,
    /// Measured samples (0-based) that lost at least 10 % of their CPU time to steal, other
    /// processes, run-queue waits (as a share of the measuring threads' lifetimes) or cgroup
    /// throttling. On a disk or network record the kernel's interrupts and the threads' waits
    /// to run after each completion are the benchmark's own and do not count.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disturbed_samples: Vec<usize>,
    /// Sources that could not be read, and why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unavailable: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuShare {
    pub cpu: usize,
    pub steal_share: f64,
    pub other_share: f64,
    /// The kernel's share of this CPU (interrupts and kernel threads), as `kernel_share`.
    #[serde(default)]
    pub kernel_share: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KernelThreadShare {
    pub name: String,
    /// Its CPU time as a share of the record's CPUs' time.
    pub share: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CgroupConditions {
    /// 1 or 2.
    pub version: u8,
    pub path: String,
    /// The tightest CPU quota from our cgroup up, in CPUs; null when none limits.
    pub quota_cpus: Option<f64>,
    pub nr_throttled: u64,
    /// Time the group's run queues spent throttled, summed over the CPUs (CPU-seconds).
    pub throttled_s: f64,
    /// CPUs in this process's affinity mask (its cpuset, taskset or Slurm binding).
    pub allowed_cpus: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClockSpan {
    pub start: f64,
    pub end: f64,
    /// Where it was read: the sample's own measurement, or cpufreq.
    pub source: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryPressure {
    pub swap_in_pages: u64,
    pub direct_reclaim_pages: u64,
}

/// A GPU's telemetry over a record's samples (NVML for CUDA devices).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GpuConditions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_hz: Option<f64>,
    /// The device's maximum SM clock (its attribute), against which a held clock is measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_max_hz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_clock_hz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_limit_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// Average power over the case (warm-ups and samples) from the energy counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_avg_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<f64>,
    /// Why the clock was held down during the samples (`sw_power_cap`, `hw_slowdown`,
    /// `sw_thermal`, `hw_thermal`, `hw_power_brake`…).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clock_reasons: Vec<String>,
    /// The record's work per joule of the GPU's energy (FLOP/J = FLOP/s per W): its value over
    /// `power_avg_w`. Throughput records only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_per_joule: Option<f64>,
    /// The PCIe link during the samples: the lowest generation and width read after any sample
    /// (a link drops its speed at rest, so only readings under load count), and the maximum NVML
    /// gives for this GPU in this slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gen: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_max_gen: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_max_width: Option<u32>,
}
