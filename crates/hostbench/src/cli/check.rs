//! `hostbench check`'s command line: its levels, yardsticks and what an unknown exits with (clap
//! types only, as the rest of `cli`).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::HistoryDbArgs;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// quick (about 20 s: the counters, the inventory and a short probe per subsystem), standard
    /// (the standard run's figures, about 2 minutes) or long (standard, then the burn-in soak of
    /// `hostbench burn` for --duration).
    #[arg(long, value_enum, default_value = "quick")]
    pub level: LevelArg,
    /// The long level's burn-in soak (CPU and memory, with --disk-dir the disk too): e.g. 10m,
    /// 1h. Default 10m. Only with --level long.
    #[arg(long, value_name = "D")]
    pub duration: Option<String>,
    /// The long level's memory soak covers this share of min(MemAvailable, cgroup limit), as
    /// `hostbench burn --mem-share` (0 to 0.9, default 0.5). Only with --level long.
    #[arg(long, value_name = "F")]
    pub mem_share: Option<String>,
    /// Expectation file: a --spec TOML file with an [expect] section (inventory, figure floors,
    /// counter limits, required sources); the figures are held against it first.
    #[arg(long, value_name = "FILE")]
    pub expect: Option<PathBuf>,
    /// What figures without a floor in the file are held against: a stored run (id, latest,
    /// latest~N), `last:N` (the median of this host's last N stored runs), or a run.json or
    /// fleet.json (its median node of this CPU model).
    #[arg(long, value_name = "REF")]
    pub baseline: Option<String>,
    /// Share of its documented peak a figure with no other yardstick must reach, in (0, 1]
    /// (default: the file's peak_share, else 0.85).
    #[arg(long, value_name = "F")]
    pub peak_share: Option<String>,
    /// How far below a baseline figure a measurement may fall, in [0, 1) (default: the file's
    /// tolerance, else 0.25); also the margin --write-expect leaves under each figure.
    #[arg(long, value_name = "F")]
    pub tolerance: Option<String>,
    /// Also write an expectation file from this node's inventory and figures (each floor the
    /// figure less the tolerance), for an operator to edit and give to --expect.
    #[arg(long, value_name = "FILE")]
    pub write_expect: Option<PathBuf>,
    /// Probe the disk in DIR (random 4 KiB reads; the standard level's disk cases). Without it the
    /// disk is not measured.
    #[arg(long, value_name = "DIR")]
    pub disk_dir: Option<PathBuf>,
    /// Write the verdict document (hostbench/check/v1, `hostbench schema check`) to FILE, or `-`
    /// for stdout (the verdict lines then go to stderr).
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<String>,
    /// Write hostbench_check_ok per check and for the node, and
    /// hostbench_check_last_run_timestamp_seconds, for node_exporter's textfile collector.
    #[arg(long, value_name = "FILE")]
    pub openmetrics: Option<PathBuf>,
    /// The exit code of an `unknown` verdict for callers that understand only two outcomes:
    /// fail (1) or ok (0). Default: 5.
    #[arg(long, value_enum, value_name = "fail|ok")]
    pub unknown_is: Option<UnknownIs>,
    /// Measure only these subsystems (the counters and the inventory are always read), e.g.
    /// `--only cpu` for a probe of a few seconds as a Slurm HealthCheckProgram.
    #[arg(long, value_name = "LIST")]
    pub only: Option<String>,
    /// Under Slurm: on a fail (or an unknown with --unknown-is fail), drain this node with the
    /// reason "hostbench: <the verdict's reason>". A node drained for another reason is left as
    /// it is. Outside Slurm it is an error (exit 2).
    #[arg(long)]
    pub drain: bool,
    /// Under Slurm: a node that hostbench drained (its reason starts "hostbench:") and that now
    /// passes is resumed. A node drained for any other reason is never touched.
    #[arg(long)]
    pub resume: bool,
    /// End with the verdict unknown ("exceeded --max-time") if the check has not finished in D
    /// (e.g. 30s, 5m), rather than hang a Prolog or a health check.
    #[arg(long, value_name = "D")]
    pub max_time: Option<String>,
    #[command(flatten)]
    pub history: HistoryDbArgs,
    /// Only the verdict's first line.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LevelArg {
    Quick,
    Standard,
    Long,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UnknownIs {
    Fail,
    Ok,
}
