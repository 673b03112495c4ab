//! `fleet check`'s table: every node's own verdict (its check.json), and where no expectation
//! file was given, each figure held against the fleet's own median.
//!
//! Why the fleet's median: a file of floors is written once, for one node type; without one, a
//! node's identical peers measured in the same minutes are the best yardstick there is (NHC and
//! DCGM compare with fixed numbers and cannot tell a slow node from a slow fleet). Peers are the
//! nodes of the same CPU model; a figure is held against them only where three or more measured
//! it (two cannot say which of them is off). A figure the node itself found `unknown` (a quota, a
//! busy neighbour: a measured cause that is not the hardware) stays unknown: the median does not
//! turn a cause into a fault. A node that left no verdict is `unknown`, named with why, never
//! dropped and never a pass.

use std::collections::BTreeMap;

use hostbench_core::check::Verdict;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The schema id of `fleet-check.json`.
pub const FLEET_CHECK_SCHEMA: &str = "hostbench/fleet-check/v1";

/// What one node left: its verdict document, or why there is none.
#[derive(Debug, Clone)]
pub struct Answer {
    pub node: String,
    pub doc: Result<Value, String>,
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeVerdict {
    pub node: String,
    pub verdict: Verdict,
    /// One line: the node's own reason, or the figure the fleet's median failed.
    pub reason: String,
    /// What decided it: `node` (its own check), `fleet median` or `no answer`.
    pub basis: String,
}

/// The whole document (`fleet-check.json`, `--json`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FleetCheck {
    pub schema: String,
    pub fleet_id: String,
    pub level: String,
    /// The worst node verdict.
    pub verdict: Verdict,
    /// "the expectation file" or "the fleet median (30 % margin)".
    pub yardstick: String,
    pub nodes: Vec<NodeVerdict>,
}

/// The JSON Schema of `fleet-check.json` (`hostbench schema fleet-check`).
pub fn fleet_check_schema() -> Value {
    let mut schema = schemars::schema_for!(FleetCheck).to_value();
    schema["$id"] = Value::from(FLEET_CHECK_SCHEMA);
    schema["title"] = Value::from("hostbench fleet check table");
    schema["properties"]["schema"] = serde_json::json!({ "const": FLEET_CHECK_SCHEMA });
    schema
}

/// One measured figure of a node's check document.
struct Figure<'a> {
    id: &'a str,
    value: f64,
    unit: &'a str,
    lower_is_better: bool,
    own: Verdict,
}

/// A verdict as a check document writes it; anything else (absent, misspelt) is unknown.
fn verdict_of(v: &Value) -> Verdict {
    Verdict::deserialize(v).unwrap_or(Verdict::Unknown)
}

fn figures(doc: &Value) -> Vec<Figure<'_>> {
    doc["checks"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter(|c| c["kind"] == "figure")
                .filter_map(|c| {
                    Some(Figure {
                        id: c["id"].as_str()?,
                        value: c["measured"]
                            .as_f64()
                            .filter(|v| v.is_finite() && *v > 0.0)?,
                        unit: c["unit"].as_str().unwrap_or(""),
                        lower_is_better: c["expected"]["op"] == "<=",
                        own: verdict_of(&c["verdict"]),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The table: each node's own verdict, and with `margin` (no expectation file) each figure
/// `margin` or more worse than the median of its peers (same CPU model, three or more) a fail.
pub fn judge(answers: &[Answer], margin: Option<f64>) -> Vec<NodeVerdict> {
    let model = |doc: &Value| {
        doc["host"]["cpu"]["model"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    // Per (CPU model, figure id): every node's value.
    let mut peers: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for a in answers {
        if let Ok(doc) = &a.doc {
            for f in figures(doc) {
                peers
                    .entry((model(doc), f.id.to_string()))
                    .or_default()
                    .push(f.value);
            }
        }
    }
    answers
        .iter()
        .map(|a| {
            let doc = match &a.doc {
                Ok(d) => d,
                Err(why) => {
                    return NodeVerdict {
                        node: a.node.clone(),
                        verdict: Verdict::Unknown,
                        reason: format!("{}: no verdict: {why}", a.node),
                        basis: "no answer".into(),
                    }
                }
            };
            let own = NodeVerdict {
                node: a.node.clone(),
                verdict: verdict_of(&doc["verdict"]),
                reason: doc["reason"].as_str().unwrap_or("").to_string(),
                basis: "node".into(),
            };
            let Some(margin) = margin else {
                return own;
            };
            let below: Vec<String> = figures(doc)
                .into_iter()
                .filter(|f| f.own != Verdict::Unknown)
                .filter_map(|f| {
                    let values = peers.get(&(model(doc), f.id.to_string()))?;
                    if values.len() < 3 {
                        return None;
                    }
                    let median = crate::fleet::stats::median(values);
                    let worse = if f.lower_is_better {
                        f.value > median / (1.0 - margin)
                    } else {
                        f.value < median * (1.0 - margin)
                    };
                    worse.then(|| {
                        let off = 100.0 * (f.value - median).abs() / median;
                        format!(
                            "{}: {} is {off:.0} % {} the fleet median {} ({} nodes of {})",
                            f.id,
                            crate::units::human(f.value, f.unit),
                            if f.lower_is_better { "above" } else { "under" },
                            crate::units::human(median, f.unit),
                            values.len(),
                            if model(doc).is_empty() {
                                "its CPU model".to_string()
                            } else {
                                model(doc)
                            },
                        )
                    })
                })
                .collect();
            match below.first() {
                Some(first) if own.verdict < Verdict::Fail => NodeVerdict {
                    verdict: Verdict::Fail,
                    reason: if below.len() == 1 {
                        first.clone()
                    } else {
                        format!("{first} (and {} more)", below.len() - 1)
                    },
                    basis: "fleet median".into(),
                    ..own
                },
                _ => own,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(verdict: &str, value: f64, own: &str) -> Value {
        json!({
            "verdict": verdict,
            "reason": format!("own {verdict}"),
            "host": {"cpu": {"model": "EPYC"}},
            "checks": [
                {"id": "cpu.flops f64", "kind": "figure", "measured": value, "unit": "FLOP/s",
                 "expected": {"op": ">="}, "verdict": own},
                {"id": "health.edac", "kind": "health", "measured": 1, "verdict": "pass"}
            ]
        })
    }

    fn answers(values: &[(f64, &str)]) -> Vec<Answer> {
        values
            .iter()
            .enumerate()
            .map(|(i, (v, own))| Answer {
                node: format!("n{}", i + 1),
                doc: Ok(doc(
                    if *own == "unknown" { "unknown" } else { "pass" },
                    *v,
                    own,
                )),
            })
            .collect()
    }

    /// A node 35 % under three identical peers fails on the fleet's median, naming the figure
    /// and the median; the peers pass; at 20 % under, nobody fails.
    #[test]
    fn a_node_well_under_its_peers_fails_on_the_fleet_median() {
        let t = judge(
            &answers(&[
                (100.0, "pass"),
                (98.0, "pass"),
                (65.0, "pass"),
                (101.0, "pass"),
            ]),
            Some(0.30),
        );
        let v: Vec<Verdict> = t.iter().map(|n| n.verdict).collect();
        use Verdict::{Fail, Pass};
        assert_eq!(v, [Pass, Pass, Fail, Pass], "{t:?}");
        assert_eq!(t[2].basis, "fleet median");
        assert!(
            t[2].reason.contains("cpu.flops f64") && t[2].reason.contains("under the fleet median")
        );
        let t = judge(
            &answers(&[
                (100.0, "pass"),
                (98.0, "pass"),
                (80.0, "pass"),
                (101.0, "pass"),
            ]),
            Some(0.30),
        );
        assert!(t.iter().all(|n| n.verdict == Verdict::Pass), "{t:?}");
        // With an expectation file, the node's own verdict alone.
        let t = judge(
            &answers(&[(100.0, "pass"), (98.0, "pass"), (65.0, "pass")]),
            None,
        );
        assert!(t.iter().all(|n| n.verdict == Verdict::Pass), "{t:?}");
    }

    /// A figure the node found unknown (a quota, a neighbour) stays unknown under the median;
    /// two nodes are no fleet to hold a figure against; a node with no answer is unknown, named.
    #[test]
    fn causes_stay_unknown_and_silence_is_never_a_pass() {
        let t = judge(
            &answers(&[(100.0, "pass"), (98.0, "pass"), (40.0, "unknown")]),
            Some(0.30),
        );
        assert_eq!(t[2].verdict, Verdict::Unknown, "{t:?}");
        assert_eq!(t[2].basis, "node");
        let t = judge(&answers(&[(100.0, "pass"), (40.0, "pass")]), Some(0.30));
        assert!(t.iter().all(|n| n.verdict == Verdict::Pass), "{t:?}");
        let mut a = answers(&[(100.0, "pass"), (98.0, "pass")]);
        a.push(Answer {
            node: "n3".into(),
            doc: Err("its check exited with code 137".into()),
        });
        let t = judge(&a, Some(0.30));
        assert_eq!(t[2].verdict, Verdict::Unknown);
        assert!(
            t[2].reason.starts_with("n3: no verdict: its check exited"),
            "{t:?}"
        );
        // A node's own fail stands, whatever the median says.
        let mut a = answers(&[(100.0, "pass"), (98.0, "pass"), (99.0, "pass")]);
        a[1].doc = Ok(doc("fail", 98.0, "pass"));
        let t = judge(&a, Some(0.30));
        assert_eq!((t[1].verdict, t[1].basis.as_str()), (Verdict::Fail, "node"));
    }
}
