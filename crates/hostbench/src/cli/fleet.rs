//! The fleet's command line: `fleet run`, `fleet check` and `fleet report` (clap types only, as
//! the rest of `cli`).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use super::{HistoryDbArgs, LevelArg, ProfileArg, UnknownIs};

#[derive(Debug, Args)]
pub struct FleetArgs {
    #[command(subcommand)]
    pub command: FleetCommand,
}

#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Measure N nodes at once (inside an allocation with srun, else submitted with sbatch and
    /// waited for), then the network between node pairs; write the fleet report.
    Run(FleetRunArgs),
    /// The fleet report of a fleet directory (also written by `fleet run`): nodes x headline
    /// figures with outliers marked, the node x node network matrix.
    Report(FleetReportArgs),
    /// `hostbench check` on every node at once (through sbatch, or srun inside an allocation):
    /// one table of verdicts and reasons; without --expect, each figure also held against the
    /// fleet's own median; --drain drains the nodes that fail.
    Check(FleetCheckArgs),
}

#[derive(Debug, Args)]
pub struct FleetCheckArgs {
    /// quick, standard or long (as for `check`).
    #[arg(long, value_enum, default_value = "quick")]
    pub level: LevelArg,
    /// Nodes to check (default: every node of --nodelist, else of the partition).
    #[arg(long, value_name = "N")]
    pub nodes: Option<String>,
    /// Only these nodes (Slurm's syntax, e.g. node[1-4],gpu7).
    #[arg(long, value_name = "LIST")]
    pub nodelist: Option<String>,
    /// Slurm partition (default: the cluster's default partition).
    #[arg(long, value_name = "P")]
    pub partition: Option<String>,
    /// Time limit of the job (Slurm's syntax, e.g. 30, 1:00:00). Default: the partition's.
    #[arg(long, value_name = "T")]
    pub time: Option<String>,
    /// Expectation file every node is held against (as for `check`). Without one, each figure is
    /// also held against the fleet's median: a node --fleet-margin under the median of its peers
    /// (same CPU model, three or more) fails.
    #[arg(long, value_name = "FILE")]
    pub expect: Option<PathBuf>,
    /// How far under the fleet's median a figure may fall without an expectation file.
    #[arg(long, value_name = "PCT", default_value = "30%")]
    pub fleet_margin: String,
    /// As for `check`: the share of its documented peak a figure must reach, in (0, 1].
    #[arg(long, value_name = "F")]
    pub peak_share: Option<String>,
    /// As for `check`: measure only these subsystems on every node (the counters are always read).
    #[arg(long, value_name = "LIST")]
    pub only: Option<String>,
    /// As for `check`: end any node's check with `unknown` after D.
    #[arg(long, value_name = "D")]
    pub max_time: Option<String>,
    /// Probe the disk in DIR on every node (an absolute path, node-local).
    #[arg(long, value_name = "DIR")]
    pub disk_dir: Option<PathBuf>,
    /// Drain every node that fails, with the reason "hostbench: <reason>" (never a node drained
    /// for another reason). Resuming is the HealthCheckProgram's `check --resume`: Slurm runs no
    /// job, so no fleet check, on a drained node.
    #[arg(long)]
    pub drain: bool,
    /// The exit code of an `unknown` fleet for callers that understand only two outcomes.
    #[arg(long, value_enum, value_name = "fail|ok")]
    pub unknown_is: Option<UnknownIs>,
    /// Nodes busy with other jobs: wait for them, or check the idle ones now.
    #[arg(long, value_enum, default_value = "wait")]
    pub busy: BusyArg,
    /// Directory of fleets (shared by every node): the check goes into DIR/<fleet id>/.
    #[arg(long, value_name = "DIR", default_value = "fleet")]
    pub out: PathBuf,
    /// Write the table (hostbench/fleet-check/v1) to FILE, or `-` for stdout.
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<String>,
    /// The fleet id (default: made from the time).
    #[arg(long, value_name = "ID")]
    pub fleet_id: Option<String>,
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct FleetRunArgs {
    /// Nodes to measure (one `hostbench run` per node, all at the same time).
    #[arg(long, value_name = "N")]
    pub nodes: String,
    /// Only these nodes (Slurm's syntax, e.g. node[1-4],gpu7).
    #[arg(long, value_name = "LIST")]
    pub nodelist: Option<String>,
    /// Slurm partition (default: the cluster's default partition).
    #[arg(long, value_name = "P")]
    pub partition: Option<String>,
    /// Time limit of the job (Slurm's syntax, e.g. 30, 1:00:00). Default: the partition's.
    #[arg(long, value_name = "T")]
    pub time: Option<String>,
    /// Profile of every node's run (as for `run`).
    #[arg(long, value_enum, default_value = "standard")]
    pub profile: ProfileArg,
    /// As for `run`: multiplies every workload.
    #[arg(long, value_name = "F", default_value = "1")]
    pub scale: String,
    #[arg(long, value_name = "LIST", help = crate::registry::list_help("Only these subsystems on every node"))]
    pub only: Option<String>,
    #[arg(long, value_name = "LIST", help = crate::registry::list_help("Skip these subsystems on every node"))]
    pub skip: Option<String>,
    /// Network phase: ring (each node to its successor), all (every pair, N-1 rounds), random:K
    /// (K random partners per node), none.
    #[arg(long, value_name = "SCHEDULE", default_value = "ring")]
    pub net_pairs: String,
    /// Nodes busy with other jobs: wait for them (Slurm queues the job), or skip them and measure
    /// the idle ones (the report lists the nodes not measured and why).
    #[arg(long, value_enum, default_value = "wait")]
    pub busy: BusyArg,
    /// Directory of fleets, on a filesystem every node shares; the run goes into DIR/<fleet id>/.
    #[arg(long, value_name = "DIR", default_value = "fleet")]
    pub out: PathBuf,
    /// Node-local directory the disk benchmark writes in (default: $TMPDIR on the node, else /tmp).
    /// Never the shared fleet directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// A node whose figure is this far below the fleet median is an outlier (also: more than 3.5
    /// robust deviations away).
    #[arg(long, value_name = "PCT", default_value = "10%")]
    pub outlier: String,
    /// Print the batch script instead of submitting it (for sites that submit by hand).
    #[arg(long)]
    pub print_script: bool,
    /// Name of this fleet run (default: UTC time and job id). Set by the batch script.
    #[arg(long, value_name = "ID")]
    pub fleet_id: Option<String>,
    #[command(flatten)]
    pub history: HistoryDbArgs,
    /// Do not store the nodes' runs in the history database.
    #[arg(long)]
    pub no_history: bool,
    /// No progress; errors only.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BusyArg {
    Wait,
    Skip,
}

#[derive(Debug, Args)]
pub struct FleetReportArgs {
    /// A fleet directory (DIR/<fleet id>, with plan.json and nodes/).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Write the HTML report to FILE (default: DIR/fleet.html), or `-` for stdout.
    #[arg(long, value_name = "FILE|-")]
    pub html: Option<String>,
    /// Write the Markdown report to FILE (default: DIR/fleet.md), or `-` for stdout.
    #[arg(long, value_name = "FILE|-")]
    pub md: Option<String>,
    /// Write the `hostbench/fleet/v1` document to FILE (default: DIR/fleet.json), or `-`.
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<String>,
    /// A node whose figure is this far below the fleet median is an outlier (also: more than 3.5
    /// robust deviations away).
    #[arg(long, value_name = "PCT", default_value = "10%")]
    pub outlier: String,
    /// No terminal table.
    #[arg(long, short)]
    pub quiet: bool,
}
