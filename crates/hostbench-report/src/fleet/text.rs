//! The fleet report as text: a terminal table (aligned columns) and Markdown (fleet.md), from
//! the same rows.
//!
//! The table is nodes × headline figures, one unit scale per column (chosen from the fleet
//! median, said in the heading), outliers marked ▼ (worse than the fleet) or ▲ (far better —
//! worth a look too: a misconfigured peer, a node the others should match), then the fleet
//! statistics, the outliers with their reason, nodes not measured or failed, and the network
//! pairs.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::doc::{Figure, FleetDoc, Outlier};
use super::layout::Status;
use crate::export::{aligned, md_cell};
use crate::units::{human, percent, scale_for, scaled, Scale};

/// A figure absent on a node.
pub(crate) const MISSING: &str = "–";
pub(crate) const WORSE: &str = "▼";
pub(crate) const BETTER: &str = "▲";
/// The terminal lists every pair only up to this many (fleet.md and fleet.html list them all).
const TERMINAL_PAIRS: usize = 64;

/// One figure's column: its scale and the nodes' values and outliers, looked up by node.
pub(crate) struct Column<'a> {
    pub figure: &'a Figure,
    pub scale: Scale,
    pub values: HashMap<&'a str, f64>,
    pub outliers: HashMap<&'a str, &'a Outlier>,
}

impl<'a> Column<'a> {
    pub fn new(figure: &'a Figure) -> Self {
        Column {
            figure,
            scale: scale_for(figure.summary.median, &figure.unit),
            values: figure
                .values
                .iter()
                .map(|v| (v.node.as_str(), v.value))
                .collect(),
            outliers: figure
                .outliers
                .iter()
                .map(|o| (o.node.as_str(), o))
                .collect(),
        }
    }

    /// `CPU fp64 peak (GFLOP/s)`.
    pub fn heading(&self) -> String {
        format!("{} ({})", self.figure.label, self.scale.label)
    }

    /// The node's value in the column's scale with its outlier mark, or `–`.
    pub fn cell(&self, node: &str) -> String {
        match self.values.get(node) {
            None => MISSING.to_string(),
            Some(v) => {
                let mark = match self.outliers.get(node) {
                    Some(o) if o.worse => format!(" {WORSE}"),
                    Some(_) => format!(" {BETTER}"),
                    None => String::new(),
                };
                format!("{}{mark}", scaled(*v, &self.scale))
            }
        }
    }
}

pub(crate) fn columns(doc: &FleetDoc) -> Vec<Column<'_>> {
    doc.figures.iter().map(Column::new).collect()
}

/// `12 nodes: 10 ok, 1 failed, 1 running; 2 not measured`.
pub(crate) fn counts_line(doc: &FleetDoc) -> String {
    let mut parts = Vec::new();
    for s in [
        Status::Ok,
        Status::Failed,
        Status::Running,
        Status::Pending,
        Status::Skipped,
    ] {
        let n = doc.nodes.iter().filter(|n| n.status == s).count();
        if n > 0 {
            parts.push(format!("{n} {}", s.as_str()));
        }
    }
    let mut line = format!("{} nodes: {}", doc.nodes.len(), parts.join(", "));
    if !doc.not_measured.is_empty() {
        let _ = write!(line, "; {} not measured", doc.not_measured.len());
    }
    line
}

/// The legend of the outlier marks.
pub(crate) fn legend(doc: &FleetDoc) -> String {
    format!(
        "{WORSE} outlier, worse than the fleet median by more than {} or by more than {} robust deviations (1.4826 x MAD, at least 1 % of the median); {BETTER} more than {} robust deviations better; {MISSING} not measured. Spread = (max - min) / median.",
        percent(doc.outlier_threshold),
        doc.robust_limit,
        doc.robust_limit
    )
}

pub(crate) fn meta_line(doc: &FleetDoc) -> String {
    let mut s = format!(
        "profile {}, scale {}, network pairs {}; started {}, {}",
        doc.profile,
        doc.scale,
        doc.net_pairs,
        doc.started_at,
        doc.finished_at
            .as_deref()
            .map_or("not finished".to_string(), |f| format!("finished {f}"))
    );
    if let Some(j) = &doc.job_id {
        let _ = write!(s, "; Slurm job {j}");
    }
    if let Some(p) = &doc.partition {
        let _ = write!(s, ", partition {p}");
    }
    s
}

fn node_rows(doc: &FleetDoc, cols: &[Column<'_>]) -> Vec<Vec<String>> {
    let mut rows = vec![std::iter::once("node".to_string())
        .chain(std::iter::once("status".to_string()))
        .chain(cols.iter().map(Column::heading))
        .collect::<Vec<_>>()];
    for n in &doc.nodes {
        let mut r = vec![n.node.clone(), n.status.as_str().to_string()];
        r.extend(cols.iter().map(|c| c.cell(&n.node)));
        rows.push(r);
    }
    rows
}

fn stats_rows(doc: &FleetDoc) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "figure", "nodes", "median", "min", "max", "spread", "outliers",
    ]
    .map(String::from)
    .to_vec()];
    for f in &doc.figures {
        let better = if f.higher_is_better {
            "higher is better"
        } else {
            "lower is better"
        };
        rows.push(vec![
            format!("{} ({better})", f.label),
            f.summary.n.to_string(),
            human(f.summary.median, &f.unit),
            human(f.summary.min, &f.unit),
            human(f.summary.max, &f.unit),
            percent(f.summary.spread),
            f.outliers.len().to_string(),
        ]);
    }
    rows
}

/// Worse outliers first (the findings), then the better ones as remarks: a node faster than its
/// peers is not what a fleet report is for.
fn outlier_rows(doc: &FleetDoc) -> Vec<Vec<String>> {
    let mut rows = vec![["node", "figure", "value", "why"]
        .map(String::from)
        .to_vec()];
    for worse in [true, false] {
        for f in &doc.figures {
            for o in f.outliers.iter().filter(|o| o.worse == worse) {
                rows.push(vec![
                    o.node.clone(),
                    f.label.clone(),
                    human(o.value, &f.unit),
                    if worse {
                        o.why.clone()
                    } else {
                        format!("{} (a remark: faster than its peers)", o.why)
                    },
                ]);
            }
        }
    }
    rows
}

/// What the network matrix says about slow pairs: the suspect nodes (the finding), pairs no node
/// explains, and what the data cannot separate.
pub(crate) fn network_rows(doc: &FleetDoc) -> Vec<Vec<String>> {
    let mut rows = vec![["figure", "finding"].map(String::from).to_vec()];
    for f in &doc.figures {
        for line in f.attribution.iter().flat_map(|a| a.lines()) {
            rows.push(vec![f.label.clone(), line]);
        }
    }
    rows
}

fn unwell_rows(doc: &FleetDoc) -> Vec<Vec<String>> {
    let mut rows = vec![["node", "status", "reason"].map(String::from).to_vec()];
    for n in doc.nodes_not_ok() {
        rows.push(vec![
            n.node.clone(),
            n.status.as_str().to_string(),
            n.reason.clone().unwrap_or_default(),
        ]);
    }
    for n in &doc.not_measured {
        rows.push(vec![
            n.node.clone(),
            "not measured".to_string(),
            n.reason.clone(),
        ]);
    }
    rows
}

/// Per pair: (from, to) → (throughput, rtt).
pub(crate) type PairValues<'a> = HashMap<(&'a str, &'a str), (Option<f64>, Option<f64>)>;

/// Throughput is keyed by the flow (sender, receiver): a pair's `send` at (client, server), its
/// `recv` at (server, client); the round trip by the pair (client, server).
pub(crate) fn pair_values(doc: &FleetDoc) -> PairValues<'_> {
    let mut m = PairValues::new();
    for e in &doc.net_matrix {
        let (from, to) = (e.from.as_str(), e.to.as_str());
        match (e.metric.as_str(), e.direction.as_deref()) {
            ("throughput", Some("recv")) => m.entry((to, from)).or_default().0 = Some(e.value),
            ("throughput", _) => m.entry((from, to)).or_default().0 = Some(e.value),
            ("rtt", _) => m.entry((from, to)).or_default().1 = Some(e.value),
            _ => {}
        }
    }
    m
}

fn pair_rows(doc: &FleetDoc, all: bool) -> Vec<Vec<String>> {
    let values = pair_values(doc);
    let mut rows = vec![[
        "from",
        "to",
        "TCP throughput",
        "TCP back (to -> from)",
        "round trip",
        "status",
    ]
    .map(String::from)
    .to_vec()];
    for p in &doc.pairs {
        if !all && p.status == Status::Ok {
            continue;
        }
        let (t, r) = values
            .get(&(p.from.as_str(), p.to.as_str()))
            .copied()
            .unwrap_or_default();
        let mut status = p.status.as_str().to_string();
        if let Some(reason) = &p.reason {
            let _ = write!(status, ": {reason}");
        }
        let back = values
            .get(&(p.to.as_str(), p.from.as_str()))
            .and_then(|v| v.0);
        rows.push(vec![
            p.from.clone(),
            p.to.clone(),
            t.map_or(MISSING.to_string(), |v| human(v, "bit/s")),
            back.map_or(MISSING.to_string(), |v| human(v, "bit/s")),
            r.map_or(MISSING.to_string(), |v| human(v, "s")),
            status,
        ]);
    }
    rows
}

/// Rows as a Markdown table (the first row is the header).
fn md_table(rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        let cells: Vec<String> = r.iter().map(|c| md_cell(c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
        if i == 0 {
            let _ = writeln!(out, "|{}", "---|".repeat(r.len()));
        }
    }
    out
}

/// The sections both text formats share: (heading, rows), empty ones left out.
fn sections(doc: &FleetDoc, all_pairs: bool) -> Vec<(String, Vec<Vec<String>>)> {
    let cols = columns(doc);
    let mut out = vec![("Nodes".to_string(), node_rows(doc, &cols))];
    if !doc.figures.is_empty() {
        out.push(("Fleet statistics".to_string(), stats_rows(doc)));
    }
    out.push((
        "Network: slow links and their nodes".to_string(),
        network_rows(doc),
    ));
    out.push(("Outliers".to_string(), outlier_rows(doc)));
    out.push((
        "Nodes not measured, failed or unfinished".to_string(),
        unwell_rows(doc),
    ));
    if !doc.pairs.is_empty() {
        let failed = doc.pairs.iter().filter(|p| p.status != Status::Ok).count();
        let title = format!(
            "Network pairs ({} pairs, {failed} not ok; client -> server)",
            doc.pairs.len()
        );
        out.push((title, pair_rows(doc, all_pairs)));
    }
    out.retain(|(_, rows)| rows.len() > 1);
    out
}

/// The terminal report.
pub fn render_terminal(doc: &FleetDoc) -> String {
    let mut out = format!(
        "\nFleet {}: {}\n{}\n{}\n",
        doc.fleet_id,
        counts_line(doc),
        meta_line(doc),
        legend(doc)
    );
    let all_pairs = doc.pairs.len() <= TERMINAL_PAIRS;
    for (title, rows) in sections(doc, all_pairs) {
        let _ = write!(out, "\n{title}\n{}", aligned(&rows));
    }
    if !all_pairs {
        let _ = writeln!(
            out,
            "\nEvery pair's figures are in fleet.md and fleet.html (the matrix)."
        );
    }
    out
}

/// fleet.md.
pub fn render_markdown(doc: &FleetDoc) -> String {
    let mut out = format!(
        "# hostbench fleet report: {}\n\n- {}\n- {}\n- {}\n",
        md_cell(&doc.fleet_id),
        md_cell(&counts_line(doc)),
        md_cell(&meta_line(doc)),
        md_cell(&legend(doc))
    );
    for (title, rows) in sections(doc, true) {
        let _ = write!(out, "\n## {title}\n\n{}", md_table(&rows));
    }
    out
}
