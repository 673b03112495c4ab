//! Reading a fleet directory into a `FleetDoc`: the plan, every node's status and run, every
//! pair's status and result, then the statistics.
//!
//! A fleet directory is read while the job may still run and after it may have been cancelled,
//! so every file may be missing, half-written by an older hostbench, or truncated by a full disk.
//! Only a directory without a readable plan is bad input; a bad node or pair file marks that node
//! or pair and the rest is reported.
//!
//! Nodes and pairs are read on all cores (`std::thread::scope`): at 1,000 nodes the report is
//! parsing a few hundred MB of JSON, and each file is independent.

use std::path::Path;
use std::thread;

use hostbench_core::model::{RunResult, SCHEMA};

use super::attribute::{attribute, Attribution, Flow};
use super::doc::{
    Figure, FleetDoc, MatrixEntry, NodeEntry, NodeValue, Outlier, PairEntry, FLEET_SCHEMA,
};
use super::figures::{extract, Measured, Source, FIGURES, NET_TCP_RECV};
use super::layout::{valid_node_name, FleetDir, Plan, Status, StatusFile, PLAN_SCHEMA};
use super::stats::{self, FleetConfig};
use crate::error::ReportError;
use crate::load::parse_run;

/// What one node's (or pair's) files say.
struct Read {
    status: Status,
    reason: Option<String>,
    /// The run file relative to the fleet directory, when it exists.
    run: Option<String>,
    finished_at: Option<String>,
    /// Per `FIGURES` entry.
    figures: Vec<Option<Measured>>,
    /// A pair's TCP throughput in its other direction (`NET_TCP_RECV`), where measured.
    reverse: Option<Measured>,
}

/// Build the fleet document of `dir`.
pub fn build(dir: &FleetDir, cfg: &FleetConfig) -> Result<FleetDoc, ReportError> {
    let plan = read_plan(dir)?;
    let node_reads = parallel(&plan.nodes, |node| read_node(dir, node));
    let pair_list: Vec<(String, String)> = plan.rounds.iter().flatten().cloned().collect();
    let pair_reads = parallel(&pair_list, |(from, to)| read_pair(dir, from, to));
    // Each pair's round shape: how many pairs were measured at once beside it.
    let shapes: Vec<usize> = plan
        .rounds
        .iter()
        .flat_map(|r| std::iter::repeat_n(r.len(), r.len()))
        .collect();

    let nodes: Vec<NodeEntry> = plan
        .nodes
        .iter()
        .zip(&node_reads)
        .map(|(node, r)| NodeEntry {
            node: node.clone(),
            status: r.status,
            reason: r.reason.clone(),
            run: r.run.clone(),
        })
        .collect();
    // Finished once no node will change any more: the latest of the runs' own finish times.
    let finished_at = if node_reads.iter().all(|r| r.status.is_final()) {
        node_reads
            .iter()
            .filter_map(|r| r.finished_at.clone())
            .max()
    } else {
        None
    };

    let mut net_matrix = Vec::new();
    for ((from, to), r) in pair_list.iter().zip(&pair_reads) {
        for (spec, m) in FIGURES.iter().zip(&r.figures) {
            if let (Some(metric), Some(m)) = (spec.matrix_metric, m) {
                let throughput = metric == "throughput";
                net_matrix.push(MatrixEntry {
                    from: from.clone(),
                    to: to.clone(),
                    proto: "tcp".into(),
                    metric: metric.into(),
                    value: m.value,
                    direction: throughput.then(|| "send".to_string()),
                });
                if let (true, Some(back)) = (throughput, &r.reverse) {
                    net_matrix.push(MatrixEntry {
                        from: from.clone(),
                        to: to.clone(),
                        proto: "tcp".into(),
                        metric: metric.into(),
                        value: back.value,
                        direction: Some("recv".into()),
                    });
                }
            }
        }
    }

    let figures = FIGURES
        .iter()
        .enumerate()
        .filter_map(|(i, spec)| {
            let (per_node, attribution, noise) = match spec.source {
                Source::Node => (
                    plan.nodes
                        .iter()
                        .zip(&node_reads)
                        .filter_map(|(n, r)| r.figures[i].clone().map(|m| (n, m)))
                        .collect(),
                    None,
                    None,
                ),
                Source::Pairs => {
                    let pairs = PairsMeasured {
                        pairs: &pair_list,
                        shapes: &shapes,
                        reads: &pair_reads,
                    };
                    pair_figure(i, spec, &plan.nodes, &pairs, cfg)
                }
            };
            let mut fig = figure(spec, &per_node, noise, cfg)?;
            fig.attribution = attribution;
            Some(fig)
        })
        .collect();

    Ok(FleetDoc {
        schema: FLEET_SCHEMA.into(),
        fleet_id: plan.fleet_id,
        started_at: plan.created_at,
        finished_at,
        generated_at: hostbench_core::model::now_rfc3339(),
        profile: plan.profile,
        scale: plan.scale,
        net_pairs: plan.net_pairs,
        job_id: plan.job_id,
        partition: plan.partition,
        outlier_threshold: cfg.outlier,
        robust_limit: cfg.robust_limit,
        nodes,
        not_measured: plan.not_measured,
        figures,
        pairs: pair_list
            .iter()
            .zip(&pair_reads)
            .map(|((from, to), r)| PairEntry {
                from: from.clone(),
                to: to.clone(),
                status: r.status,
                reason: r.reason.clone(),
            })
            .collect(),
        net_matrix,
    })
}

/// The network phase's pairs in schedule order, each with its round's shape (pairs measured
/// at once) and what was read of it.
pub(crate) struct PairsMeasured<'a> {
    pairs: &'a [(String, String)],
    shapes: &'a [usize],
    reads: &'a [Read],
}

/// A network figure's value per node, and which node (or link) its slow flows belong to.
///
/// A node's value is the median of every flow it is in, as client or server, both directions
/// where measured, leaving out the flows that the attribution pins on another node: in a ring,
/// the neighbours of a slow node have half their flows through it, and with those counted they
/// read half the fleet's rate and become "outliers" for a fault that is not theirs.
///
/// Each flow is first compared with flows of its own round shape: where a round of two pairs
/// shares the nodes' CPUs or uplinks that a round of one has alone (every pair of a test
/// cluster on one host; a switch's shared uplink), its healthy flows read 15-20 % under the
/// lone pair's, and a node measured only in the crowded rounds became a "worse outlier" for
/// it. So a shape measured in two or more pairs is scaled to the level of the shape with most
/// flows (levels: the median of the flows no suspect is in); a shape of one pair stays as read,
/// since its level is that pair alone. With one shape in the fleet nothing changes.
fn pair_figure<'a>(
    i: usize,
    spec: &super::figures::FigureSpec,
    nodes: &'a [String],
    measured: &PairsMeasured<'_>,
    cfg: &FleetConfig,
) -> (
    Vec<(&'a String, Measured)>,
    Option<Attribution>,
    Option<f64>,
) {
    let flows = flows_of(i, measured);
    let Some((_, first, _)) = flows.first() else {
        return (Vec::new(), None, None);
    };
    let (unit, hib) = (first.unit.clone(), first.higher_is_better);
    let plain: Vec<Flow> = flows.iter().map(|(f, _, _)| f.clone()).collect();
    let shown = unit.clone();
    let fmt = move |v: f64| crate::units::human(v, &shown);
    let mut a = attribute(
        &plain,
        hib,
        cfg.outlier,
        spec.matrix_metric == Some("throughput"),
        &fmt,
    );
    if nodes.len() == 2 {
        a.note = Some(
            "two nodes are one link: a slow figure here cannot be pinned on either node (a \
             third node gives a pair to compare with)"
                .into(),
        );
    }
    // Whether a suspect other than `except` explains flow `f` (`None`: any suspect).
    let pinned = |f: &Flow, except: Option<&str>| {
        a.suspects.iter().any(|s| {
            Some(s.node.as_str()) != except
                && match s.role.as_str() {
                    "send" => s.node == f.sender,
                    "receive" => s.node == f.receiver,
                    _ => s.node == f.sender || s.node == f.receiver,
                }
        })
    };
    let shape_of: Vec<usize> = plain.iter().map(|f| f.shape).collect();
    let pair_of: Vec<usize> = flows.iter().map(|(_, _, k)| *k).collect();
    let factors = shape_scale(&plain, &shape_of, &pair_of, |f| pinned(f, None));
    let scale = |k: usize| factors.get(&k).copied().unwrap_or(1.0);
    let per_node = nodes
        .iter()
        .filter_map(|n| {
            let all: Vec<f64> = plain
                .iter()
                .zip(&shape_of)
                .filter(|(f, _)| &f.sender == n || &f.receiver == n)
                .map(|(f, k)| f.value * scale(*k))
                .collect();
            if all.is_empty() {
                return None;
            }
            let own: Vec<f64> = plain
                .iter()
                .zip(&shape_of)
                .filter(|(f, _)| (&f.sender == n || &f.receiver == n) && !pinned(f, Some(n)))
                .map(|(f, k)| f.value * scale(*k))
                .collect();
            let values = if own.is_empty() { all } else { own };
            Some((
                n,
                Measured {
                    value: stats::median(&values),
                    unit: unit.clone(),
                    higher_is_better: hib,
                },
            ))
        })
        .collect();
    // The flows' own spread (those no suspect explains, at their shape's level).
    let unpinned: Vec<f64> = plain
        .iter()
        .filter(|f| !pinned(f, None))
        .map(|f| f.value * scale(f.shape))
        .collect();
    let noise = stats::summarize(&unpinned).map(|s| s.mad);
    (per_node, (!a.is_empty()).then_some(a), noise)
}

/// Per round shape (pairs measured at once), the factor that brings its flows to the level of
/// the shape with most flows; absent (1) for a shape whose level rests on one pair and in a
/// fleet of one shape. Levels are medians of the flows `pinned` does not claim (those a suspect
/// explains); `pair_of` says which pair each flow is of.
fn shape_scale(
    flows: &[Flow],
    shape_of: &[usize],
    pair_of: &[usize],
    pinned: impl Fn(&Flow) -> bool,
) -> std::collections::BTreeMap<usize, f64> {
    type Level = (Vec<f64>, std::collections::BTreeSet<usize>);
    let mut by_shape: std::collections::BTreeMap<usize, Level> = Default::default();
    for ((f, &k), &p) in flows.iter().zip(shape_of).zip(pair_of) {
        if !pinned(f) && f.value > 0.0 {
            let (values, pairs) = by_shape.entry(k).or_default();
            values.push(f.value);
            pairs.insert(p);
        }
    }
    let reference = by_shape
        .iter()
        .max_by_key(|(k, (v, _))| (v.len(), **k))
        .map(|(_, (v, _))| stats::median(v));
    by_shape
        .iter()
        .filter(|(_, (_, pairs))| pairs.len() >= 2)
        .filter_map(|(k, (v, _))| Some((*k, reference? / stats::median(v))))
        .filter(|(_, x)| x.is_finite() && *x > 0.0)
        .collect()
}

/// The flows of network figure `i`: each pair's measurement from its client to its server, and
/// for throughput the other direction too where the pair measured it; with the measurement (for
/// its unit) and the pair's index in schedule order. Round trips are one "flow" per pair.
fn flows_of<'a>(i: usize, measured: &PairsMeasured<'a>) -> Vec<(Flow, &'a Measured, usize)> {
    let mut out = Vec::new();
    let throughput = FIGURES[i].matrix_metric == Some("throughput");
    let pairs = measured.pairs.iter().zip(measured.reads).enumerate();
    for (k, ((from, to), r)) in pairs {
        let shape = measured.shapes.get(k).copied().unwrap_or(1);
        if let Some(m) = &r.figures[i] {
            out.push((
                Flow {
                    sender: from.clone(),
                    receiver: to.clone(),
                    value: m.value,
                    shape,
                },
                m,
                k,
            ));
        }
        if let (true, Some(m)) = (throughput, &r.reverse) {
            out.push((
                Flow {
                    sender: to.clone(),
                    receiver: from.clone(),
                    value: m.value,
                    shape,
                },
                m,
                k,
            ));
        }
    }
    out
}

/// The fleet statistics and outliers of one figure; `None` when no node has it.
///
/// `noise`: for a network figure, the median absolute deviation of the flows themselves. A
/// node's value there is the median of a few flows, and where three of five nodes' medians
/// happen to agree to 0.5 %, a healthy node 4.5 % under them was "4.3 robust deviations below
/// the median" while single flows on this host differ by 10-20 %: robust deviations are counted
/// against the wider of the two spreads. The document's `mad` stays the nodes' own.
fn figure(
    spec: &super::figures::FigureSpec,
    per_node: &[(&String, Measured)],
    noise: Option<f64>,
    cfg: &FleetConfig,
) -> Option<Figure> {
    let (_, first) = per_node.first()?;
    let values: Vec<f64> = per_node.iter().map(|(_, m)| m.value).collect();
    let s = stats::summarize(&values)?;
    let judged = stats::Summary {
        mad: s.mad.max(noise.unwrap_or(0.0)),
        ..s
    };
    let hib = first.higher_is_better;
    let outliers = per_node
        .iter()
        .filter_map(|(n, m)| {
            stats::outlier_why(m.value, &judged, hib, cfg).map(|why| Outlier {
                node: (*n).clone(),
                value: m.value,
                why,
                worse: if hib {
                    m.value < s.median
                } else {
                    m.value > s.median
                },
            })
        })
        .collect();
    Some(Figure {
        id: spec.id.into(),
        label: spec.label.into(),
        benchmark: spec.benchmark.into(),
        params: spec.params(),
        unit: first.unit.clone(),
        higher_is_better: hib,
        summary: s,
        outliers,
        values: per_node
            .iter()
            .map(|(n, m)| NodeValue {
                node: (*n).clone(),
                value: m.value,
            })
            .collect(),
        attribution: None,
    })
}

/// The fleet's `plan.json`, checked (a directory without one is not a fleet directory).
pub fn read_plan(dir: &FleetDir) -> Result<Plan, ReportError> {
    let root = dir.root().display();
    if !dir.root().is_dir() {
        return Err(ReportError::bad(format!("{root}: not a directory")));
    }
    let path = dir.plan();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ReportError::bad(format!(
                "{root}: not a fleet directory (no plan.json)"
            )))
        }
        Err(e) => {
            return Err(ReportError::bad(format!(
                "{}: {}",
                path.display(),
                one_line(&e.to_string())
            )))
        }
    };
    let plan: Plan = serde_json::from_str(&text).map_err(|e| {
        ReportError::bad(format!(
            "{}: not a fleet plan ({})",
            path.display(),
            one_line(&e.to_string())
        ))
    })?;
    if plan.schema != PLAN_SCHEMA {
        return Err(ReportError::bad(format!(
            "{}: schema '{}' is not {PLAN_SCHEMA}",
            path.display(),
            plan.schema
        )));
    }
    Ok(plan)
}

/// `f` over `items` on all cores, results in `items`' order.
fn parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = items.len().div_ceil(threads).max(1);
    if items.len() <= 1 || threads == 1 {
        return items.iter().map(&f).collect();
    }
    let f = &f;
    thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|c| s.spawn(move || c.iter().map(f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| match h.join() {
                Ok(v) => v,
                // A panic while reading is a bug; re-raise it on this thread rather than hide it.
                Err(p) => std::panic::resume_unwind(p),
            })
            .collect()
    })
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A status file: `Ok(None)` when absent, `Err(reason)` when unreadable.
/// A status file: `None` when absent, the reason (naming `rel`) when unreadable.
pub fn read_status(path: &Path, rel: &str) -> Result<Option<StatusFile>, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("{rel} unreadable: {}", one_line(&e.to_string()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{rel} unreadable: {}", one_line(&e.to_string()))),
    }
}

/// A run file: `None` when absent.
fn read_run(path: &Path, rel: &str) -> Option<Result<RunResult, String>> {
    match std::fs::read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(Err(one_line(&e.to_string()))),
        Ok(bytes) => Some(match String::from_utf8(bytes) {
            Ok(text) => parse_node_run(&text, rel),
            Err(_) => Err(format!("{rel}: not UTF-8 text")),
        }),
    }
}

/// A run file's text as a run. Straight into the model first: `parse_run` goes through a JSON
/// tree to name what is wrong with a bad file, which at 1,000 nodes was most of the report's
/// time; a file that fails the direct parse (or names another schema) gets its diagnosis from it.
fn parse_node_run(text: &str, rel: &str) -> Result<RunResult, String> {
    match serde_json::from_str::<RunResult>(text) {
        Ok(run) if run.schema == SCHEMA => Ok(run),
        _ => parse_run(text, rel).map_err(|e| e.to_string()),
    }
}

/// The status of a node or pair from its status file and its run file.
///
/// The status file is the launcher's word, the run file the measurement's: a run file that
/// cannot be read fails the node whatever the status says, and a finished node whose run file
/// never appeared is failed with the likeliest cause (the directory is not shared).
fn resolve(
    status: Result<Option<StatusFile>, String>,
    run: Option<Result<RunResult, String>>,
    run_rel: &str,
    source: Source,
    missing: impl FnOnce() -> String,
) -> Read {
    let mut notes: Vec<String> = Vec::new();
    let status = match status {
        Ok(s) => s,
        Err(why) => {
            notes.push(why);
            None
        }
    };
    let said = status.as_ref().map(|s| s.status);
    if let Some(r) = status.as_ref().and_then(|s| s.reason.clone()) {
        notes.insert(0, r);
    }
    let mut read = Read {
        status: said.unwrap_or(Status::Failed),
        reason: None,
        run: None,
        finished_at: None,
        figures: vec![None; FIGURES.len()],
        reverse: None,
    };
    match run {
        Some(Ok(run)) => {
            read.run = Some(run_rel.to_string());
            read.status = said.unwrap_or(if run.finished_at.is_some() {
                Status::Ok
            } else {
                Status::Running
            });
            read.finished_at = run.finished_at.clone();
            read.figures = extract(&run.records, source);
            if source == Source::Pairs {
                read.reverse = NET_TCP_RECV.measure(&run.records);
            }
        }
        Some(Err(why)) => {
            read.status = Status::Failed;
            notes.push(format!("run.json unreadable: {why}"));
        }
        None => match said {
            Some(Status::Failed | Status::Skipped) => {
                if notes.is_empty() {
                    notes.push("no reason given".into());
                }
            }
            Some(Status::Pending) => notes.push("not started yet".into()),
            Some(Status::Running) => notes.push("no results yet".into()),
            Some(Status::Ok) | None => {
                read.status = Status::Failed;
                notes.push(missing());
            }
        },
    }
    read.reason = (!notes.is_empty()).then(|| notes.join("; "));
    read
}

fn read_node(dir: &FleetDir, node: &str) -> Read {
    if !valid_node_name(node) {
        // Never joined onto a path: a hostile name must not escape the fleet directory.
        return Read {
            status: Status::Failed,
            reason: Some(format!("invalid node name '{node}' in plan.json")),
            run: None,
            finished_at: None,
            figures: vec![None; FIGURES.len()],
            reverse: None,
        };
    }
    let rel = format!("nodes/{node}/run.json");
    let node_dir = dir.node_dir(node);
    resolve(
        read_status(&dir.node_status(node), &format!("nodes/{node}/status.json")),
        read_run(&dir.node_run(node), &rel),
        &rel,
        Source::Node,
        || {
            format!(
                "no run.json appeared in {}: is the fleet directory on a filesystem every node shares?",
                node_dir.display()
            )
        },
    )
}

fn read_pair(dir: &FleetDir, from: &str, to: &str) -> Read {
    if !valid_node_name(from) || !valid_node_name(to) {
        return Read {
            status: Status::Failed,
            reason: Some(format!(
                "invalid node name in pair '{from}--{to}' of plan.json"
            )),
            run: None,
            finished_at: None,
            figures: vec![None; FIGURES.len()],
            reverse: None,
        };
    }
    let rel = format!("net/{from}--{to}.json");
    resolve(
        read_status(
            &dir.pair_status(from, to),
            &format!("net/{from}--{to}.status.json"),
        ),
        read_run(&dir.pair_run(from, to), &rel),
        &rel,
        Source::Pairs,
        || format!("no result appeared in {}", dir.pair_run(from, to).display()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(s: &str, r: &str, value: f64) -> Flow {
        Flow {
            sender: s.into(),
            receiver: r.into(),
            value,
            shape: 1,
        }
    }

    /// A network figure's robust deviations are counted against the flows' own spread: three
    /// of five nodes' medians agreeing to 0.5 % made a healthy node 4.5 % under them an
    /// outlier (a ring of five on this host); with the flows' spread only the slow node is.
    #[test]
    fn network_outliers_are_held_against_the_flows_spread() {
        let spec = FIGURES.iter().find(|f| f.id == "net_tcp").expect("net_tcp");
        let names: Vec<String> = (1..=5).map(|i| format!("node{i}")).collect();
        let per_node: Vec<(&String, Measured)> = names
            .iter()
            .zip([9.72e9, 9.22e9, 9.65e9, 6.27e9, 9.65e9])
            .map(|(n, value)| {
                (
                    n,
                    Measured {
                        value,
                        unit: "bit/s".into(),
                        higher_is_better: true,
                    },
                )
            })
            .collect();
        let cfg = FleetConfig::default();
        let worse = |noise| {
            let fig = figure(spec, &per_node, noise, &cfg).expect("figure");
            fig.outliers
                .iter()
                .filter(|o| o.worse)
                .map(|o| o.node.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(worse(None), ["node2", "node4"], "the premise");
        assert_eq!(worse(Some(0.5e9)), ["node4"]);
    }

    /// Rounds of two pairs read 20 % under rounds of one: scaled to the level of the shape with
    /// most flows; a shape measured in one pair only, or flows a suspect explains, set no level.
    #[test]
    fn round_shapes_are_scaled_to_the_commonest_shape() {
        // Two pairs in rounds of two (4 flows at 16), three lone pairs (6 flows at 19.2).
        let flows = [
            flow("a", "b", 16.0),
            flow("b", "a", 16.0),
            flow("c", "d", 16.0),
            flow("d", "c", 16.0),
            flow("a", "c", 19.2),
            flow("c", "a", 19.2),
            flow("b", "d", 19.2),
            flow("d", "b", 19.2),
            flow("a", "d", 19.2),
            flow("d", "a", 19.2),
        ];
        let shapes = [2, 2, 2, 2, 1, 1, 1, 1, 1, 1];
        let pairs = [0, 0, 1, 1, 2, 2, 3, 3, 4, 4];
        let f = shape_scale(&flows, &shapes, &pairs, |_| false);
        assert!((f[&2] - 1.2).abs() < 1e-12, "{f:?}");
        assert!((f[&1] - 1.0).abs() < 1e-12, "{f:?}");
        // The lone-pair shape down to one pair: its level is that pair's own, so it stays as
        // read and rounds of two become the reference.
        let f = shape_scale(&flows[..6], &shapes[..6], &pairs[..6], |_| false);
        assert_eq!(f.get(&1), None, "{f:?}");
        assert!((f[&2] - 1.0).abs() < 1e-12, "{f:?}");
        // A slow node's flows (pinned on it) do not pull its shape's level down.
        let mut slow = flows;
        slow[0].value = 0.2;
        slow[1].value = 0.2;
        let f = shape_scale(&slow, &shapes, &pairs, |f| {
            f.sender == "b" && f.receiver == "a" || f.sender == "a" && f.receiver == "b"
        });
        assert_eq!(f.get(&2), None, "one unpinned pair left: {f:?}");
        let f = shape_scale(&slow, &shapes, &pairs, |_| false);
        assert!(
            f[&2] > 1.2,
            "unpinned, the slow pair drags its shape's level: {f:?}"
        );
    }
}
