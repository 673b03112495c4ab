//! The fleet directory: the one contract between `fleet run` (which writes it, from many nodes at
//! once, on a filesystem they all share) and `fleet report` (which reads it, possibly while the
//! job still runs, possibly after it was cancelled).
//!
//! ```text
//! DIR/<fleet id>/
//!   plan.json                    what was asked for: nodes, profile, pairs; nodes not measured
//!   token                        the network phase's pre-shared token (mode 0600)
//!   nodes/<node>/run.json        the node's `hostbench run` (rewritten after every case)
//!   nodes/<node>/status.json     pending | running | ok | failed | skipped, with the reason
//!   nodes/<node>/stderr.log      the node step's stderr (why it failed, when it did)
//!   net/<from>--<to>.json        `net client` on <from> against `net server` on <to>
//!   net/<from>--<to>.status.json the pair's status (failed pairs carry the reason)
//!   fleet.json, fleet.md, fleet.html   the fleet report (`hostbench/fleet/v1`)
//! ```
//!
//! Every file is written atomically (temporary file + rename), so a reader sees the previous
//! version or the next, never half of one.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The plan's schema tag.
pub const PLAN_SCHEMA: &str = "hostbench/fleet-plan/v1";

/// Where a node or a pair stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Allocated, not started yet.
    Pending,
    /// Its step is running.
    Running,
    /// Finished with exit code 0 (or 3: some cases skipped, the rest measured).
    Ok,
    /// Its step or run failed; `reason` says how.
    Failed,
    /// Not measured on purpose (busy with other jobs, down, drained); `reason` says which.
    Skipped,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Running => "running",
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
        }
    }

    /// Whether the node (or pair) will not change any more.
    pub fn is_final(self) -> bool {
        matches!(self, Status::Ok | Status::Failed | Status::Skipped)
    }
}

/// `nodes/<node>/status.json` and `net/<from>--<to>.status.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StatusFile {
    pub status: Status,
    /// Why it failed or was skipped, one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The step's exit code, when it ended by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

impl StatusFile {
    pub fn new(status: Status) -> Self {
        StatusFile {
            status,
            reason: None,
            exit_code: None,
            started_at: None,
            finished_at: None,
        }
    }
}

/// A node that was asked for but not measured, and why (busy, down, drained, not allocated).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NotMeasured {
    pub node: String,
    pub reason: String,
}

/// `plan.json`: what this fleet run set out to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Plan {
    pub schema: String,
    pub fleet_id: String,
    pub created_at: String,
    /// The nodes measured (allocated), in Slurm's order.
    pub nodes: Vec<String>,
    /// Nodes of the partition (or `--nodelist`) left out, with the reason.
    #[serde(default)]
    pub not_measured: Vec<NotMeasured>,
    /// The pair schedule: ring, all, none, random:K.
    pub net_pairs: String,
    /// The rounds of the network phase: each a list of (client, server) pairs, disjoint.
    #[serde(default)]
    pub rounds: Vec<Vec<(String, String)>>,
    pub profile: String,
    pub scale: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
}

/// Paths inside one fleet directory.
#[derive(Debug, Clone)]
pub struct FleetDir {
    root: PathBuf,
}

impl FleetDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FleetDir { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn plan(&self) -> PathBuf {
        self.root.join("plan.json")
    }

    pub fn token(&self) -> PathBuf {
        self.root.join("token")
    }

    pub fn nodes_dir(&self) -> PathBuf {
        self.root.join("nodes")
    }

    pub fn node_dir(&self, node: &str) -> PathBuf {
        self.nodes_dir().join(node)
    }

    pub fn node_run(&self, node: &str) -> PathBuf {
        self.node_dir(node).join("run.json")
    }

    /// The node's verdict document (`fleet check`; hostbench/check/v1).
    pub fn node_check(&self, node: &str) -> PathBuf {
        self.node_dir(node).join("check.json")
    }

    pub fn node_status(&self, node: &str) -> PathBuf {
        self.node_dir(node).join("status.json")
    }

    pub fn node_stderr(&self, node: &str) -> PathBuf {
        self.node_dir(node).join("stderr.log")
    }

    pub fn net_dir(&self) -> PathBuf {
        self.root.join("net")
    }

    /// The client's result of `from` measuring against the server on `to`.
    pub fn pair_run(&self, from: &str, to: &str) -> PathBuf {
        self.net_dir().join(format!("{from}--{to}.json"))
    }

    pub fn pair_status(&self, from: &str, to: &str) -> PathBuf {
        self.net_dir().join(format!("{from}--{to}.status.json"))
    }

    /// Where the pair's server writes its listening address once bound.
    pub fn pair_ready(&self, from: &str, to: &str) -> PathBuf {
        self.net_dir().join(format!("{from}--{to}.ready"))
    }

    pub fn report_json(&self) -> PathBuf {
        self.root.join("fleet.json")
    }

    pub fn report_md(&self) -> PathBuf {
        self.root.join("fleet.md")
    }

    pub fn report_html(&self) -> PathBuf {
        self.root.join("fleet.html")
    }
}

/// Whether `name` is safe as a node directory name (Slurm node names are; a hostile one with
/// `/` or `..` must not escape the fleet directory).
pub fn valid_node_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}
