//! The fleet document `hostbench/fleet/v1` (fleet.json): what `fleet report` found in a fleet
//! directory, in one file a pipeline reads. The Markdown and HTML reports render this document
//! and nothing else, so no two formats can disagree about a number.
//!
//! The names DESIGN.md §2 fixes (nodes [{node, status, reason, run}], figures [{benchmark, params,
//! median, min, max, spread, outliers [{node, value, why}]}], net_matrix [{from, to, proto, metric,
//! value}]) are never renamed; everything else is added beside them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::layout::{NotMeasured, Status};
use super::stats::Summary;

/// The fleet document's schema tag.
pub const FLEET_SCHEMA: &str = "hostbench/fleet/v1";

/// The JSON Schema of the fleet document (`hostbench schema fleet`), generated from the very types
/// fleet.json is written from.
pub fn fleet_schema() -> serde_json::Value {
    let mut schema = schemars::schema_for!(FleetDoc).to_value();
    schema["$id"] = serde_json::Value::from(FLEET_SCHEMA);
    schema["title"] = serde_json::Value::from("hostbench fleet document");
    schema["properties"]["schema"] = serde_json::json!({ "const": FLEET_SCHEMA });
    schema
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FleetDoc {
    pub schema: String,
    pub fleet_id: String,
    /// When the fleet run was planned (the plan's `created_at`).
    pub started_at: String,
    /// The latest `finished_at` of the nodes' runs once every node is final (ok, failed,
    /// skipped); `None` while any node is pending or running.
    pub finished_at: Option<String>,
    /// When this report was made (a report of a running fleet is a snapshot).
    pub generated_at: String,
    pub profile: String,
    pub scale: f64,
    /// The plan's pair schedule (ring, all, random:K, none).
    pub net_pairs: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// The threshold rule's fraction (0.1 = a node 10 % worse than the median is an outlier).
    pub outlier_threshold: f64,
    /// The robust rule's limit, in robust deviations (1.4826 · MAD).
    pub robust_limit: f64,
    /// Every node of the plan, in the plan's order.
    pub nodes: Vec<NodeEntry>,
    /// Nodes of the partition (or node list) the plan left out, with the reason.
    pub not_measured: Vec<NotMeasured>,
    /// The headline figures measured on at least one node.
    pub figures: Vec<Figure>,
    /// Every pair of the network phase with its status.
    pub pairs: Vec<PairEntry>,
    pub net_matrix: Vec<MatrixEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeEntry {
    pub node: String,
    pub status: Status,
    /// Why the node is not `ok` (or what is odd about it), one line.
    pub reason: Option<String>,
    /// Its run.json relative to the fleet directory, when one exists.
    pub run: Option<String>,
}

/// One headline figure over the fleet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Figure {
    /// Stable short name (`cpu_fp64`, `dram_triad`, …).
    pub id: String,
    /// Column heading for a person (`CPU fp64 peak`).
    pub label: String,
    pub benchmark: String,
    /// The parameters that select the figure's records (e.g. `{"dtype": "f64"}`).
    pub params: Map<String, Value>,
    /// SI base unit of every value (FLOP/s, B/s, s, IO/s, bit/s).
    pub unit: String,
    pub higher_is_better: bool,
    /// n (nodes with this figure), median, min, max, spread (`(max − min) / median`) and mad
    /// (median absolute deviation; the robust deviation is 1.4826 · mad), flat in the JSON.
    #[serde(flatten)]
    pub summary: Summary,
    pub outliers: Vec<Outlier>,
    /// Every node's value, in the plan's order.
    pub values: Vec<NodeValue>,
    /// Network figures: which node (or link) the slow pairs belong to, from the whole matrix
    /// (`fleet::attribute`). The suspects are the finding; a node faster than the median is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<super::attribute::Attribution>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Outlier {
    pub node: String,
    pub value: f64,
    /// One line: `12.3 % below the fleet median`, `5.1 robust deviations below the median`.
    pub why: String,
    /// Whether the node is on the bad side of the median (slower, or higher latency).
    pub worse: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeValue {
    pub node: String,
    pub value: f64,
}

/// One pair of the network phase: `from` ran the client against the server on `to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PairEntry {
    pub from: String,
    pub to: String,
    pub status: Status,
    pub reason: Option<String>,
}

/// One cell of the node × node network matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MatrixEntry {
    pub from: String,
    pub to: String,
    pub proto: String,
    /// `throughput` (bit/s) or `rtt` (s, round trip).
    pub metric: String,
    pub value: f64,
    /// For throughput: `send` (`from` sent to `to`) or `recv` (`to` sent to `from`), where the
    /// pair measured both; absent for round trips and in older documents (then `send`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
}

impl FleetDoc {
    /// Whether every planned node and pair is `ok` and no node was left out: exit code 0 rather
    /// than 3.
    pub fn complete(&self) -> bool {
        self.nodes.iter().all(|n| n.status == Status::Ok)
            && self.pairs.iter().all(|p| p.status == Status::Ok)
            && self.not_measured.is_empty()
    }

    /// Nodes whose status is not `ok`.
    pub fn nodes_not_ok(&self) -> impl Iterator<Item = &NodeEntry> {
        self.nodes.iter().filter(|n| n.status != Status::Ok)
    }
}
