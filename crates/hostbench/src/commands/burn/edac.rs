//! The EDAC counts that rose while `hostbench burn` ran, from the health readings taken before and
//! after it (`health.edac`, per memory controller and per DIMM).
//!
//! A burn stresses memory harder than a node's normal work, so a count that rises during it is the
//! burn's finding even when every pattern read back right: ECC corrected or caught the error
//! before the pattern check could see it. An uncorrectable error is a fault on its own and fails
//! the burn; corrected ones are a warning, because a healthy DIMM corrects a few and the limit
//! belongs to the node's expectation file, not to a fixed threshold here.

use hostbench_core::model::Health;
use serde::{Deserialize, Serialize};

use crate::Exit;

const EDAC: &str = "health.edac";
const UNCORRECTABLE: &str = "uncorrectable";
const CORRECTED: &str = "corrected";

/// One EDAC counter that rose during the burn (`edac_rises` in the burn record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EdacRise {
    /// The controller or DIMM as `health.edac` names it: `mc0`, `mc0/dimm3`, `mc1/csrow2`.
    pub device: String,
    /// The DIMM's label (the board's silk-screen name where the driver knows it) or the
    /// controller's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `uncorrectable` or `corrected`.
    pub kind: String,
    pub before: u64,
    pub after: u64,
}

impl EdacRise {
    /// "mc0/dimm0 (CPU_SrcID#0_MC#0_Chan#0_DIMM#0)".
    fn what(&self) -> String {
        match &self.label {
            Some(l) => format!("{} ({l})", self.device),
            None => self.device.clone(),
        }
    }

    fn line(&self) -> String {
        format!(
            "EDAC {} errors rose on {}: {} → {} during the burn",
            self.kind,
            self.what(),
            self.before,
            self.after
        )
    }
}

/// Every EDAC counter read both before and after that is higher after, uncorrectable before
/// corrected for each device, in the readers' device order. A counter read only once (a driver
/// loaded or gone mid-burn) or that fell (a driver reloaded) is no rise.
pub(crate) fn rises(before: &Health, after: &Health) -> Vec<EdacRise> {
    let mut out = Vec::new();
    for a in after.readings.iter().filter(|r| r.id == EDAC) {
        let Some(b) = before
            .readings
            .iter()
            .find(|r| r.id == EDAC && r.device == a.device)
        else {
            continue;
        };
        for (key, kind) in [
            ("uncorrectable_errors", UNCORRECTABLE),
            ("correctable_errors", CORRECTED),
        ] {
            let count = |r: &hostbench_core::model::HealthReading| {
                r.values.get(key).and_then(serde_json::Value::as_u64)
            };
            if let (Some(was), Some(now)) = (count(b), count(a)) {
                if now > was {
                    out.push(EdacRise {
                        device: a.device.clone(),
                        label: a.label.clone().or_else(|| b.label.clone()),
                        kind: kind.to_string(),
                        before: was,
                        after: now,
                    });
                }
            }
        }
    }
    out
}

/// The rises of `kind` to name: each DIMM's, and a controller's only where none of its DIMMs
/// rose (drivers without per-DIMM counts), since the DIMM is the part to replace.
fn named<'a>(rises: &'a [EdacRise], kind: &str) -> Vec<&'a EdacRise> {
    let of_kind: Vec<&EdacRise> = rises.iter().filter(|r| r.kind == kind).collect();
    of_kind
        .iter()
        .copied()
        .filter(|r| {
            r.device.contains('/')
                || !of_kind
                    .iter()
                    .any(|d| d.device.starts_with(&format!("{}/", r.device)))
        })
        .collect()
}

/// The burn's verdict with the uncorrectable rises folded in: any makes it `fail` (exit 1),
/// named on the first line after a pattern failure's own reason, or before the rest otherwise.
pub(crate) fn fold(
    (verdict, reason, exit): (String, String, Exit),
    rises: &[EdacRise],
) -> (String, String, Exit) {
    let ue = named(rises, UNCORRECTABLE);
    if ue.is_empty() {
        return (verdict, reason, exit);
    }
    let lines: Vec<String> = ue.iter().map(|r| r.line()).collect();
    let lines = lines.join("; ");
    let reason = if verdict == "fail" {
        format!("{reason}; {lines}")
    } else {
        format!("{lines}; {reason}")
    };
    ("fail".into(), reason, Exit::Failure)
}

/// A warning line for each corrected rise.
pub(crate) fn warnings(rises: &[EdacRise]) -> Vec<String> {
    named(rises, CORRECTED)
        .into_iter()
        .map(|r| {
            format!(
                "warn {} (corrected: the expectation's limit decides)",
                r.line()
            )
        })
        .collect()
}

/// The Markdown section listing every rise, controllers included; empty when none rose.
pub(crate) fn markdown(rises: &[EdacRise]) -> String {
    if rises.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n\n## EDAC counts that rose during the burn\n\n| device | label | errors | before | after |\n|---|---|---|---:|---:|\n",
    );
    for r in rises {
        s += &format!(
            "| {} | {} | {} | {} | {} |\n",
            r.device,
            r.label.as_deref().unwrap_or("-"),
            r.kind,
            r.before,
            r.after
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use hostbench_core::model::HealthReading;

    fn edac(device: &str, label: Option<&str>, ce: Option<u64>, ue: Option<u64>) -> HealthReading {
        let mut values = hostbench_core::model::Params::new();
        if let Some(ce) = ce {
            values.insert("correctable_errors".into(), ce.into());
        }
        if let Some(ue) = ue {
            values.insert("uncorrectable_errors".into(), ue.into());
        }
        HealthReading {
            id: EDAC.into(),
            device: device.into(),
            label: label.map(str::to_string),
            values,
            findings: Vec::new(),
        }
    }

    fn health(readings: Vec<HealthReading>) -> Health {
        Health {
            readings,
            ..Health::default()
        }
    }

    #[test]
    fn rises_are_found_per_device_and_the_dimm_is_named_over_its_controller() {
        let before = health(vec![
            edac("mc0", Some("IMC#0"), Some(3), Some(0)),
            edac("mc0/dimm0", Some("DIMM_A1"), Some(3), Some(0)),
            edac("mc0/dimm1", Some("DIMM_B1"), Some(0), Some(0)),
            edac("mc1", None, Some(5), Some(2)),
            edac("mc2", None, None, Some(0)),
        ]);
        let after = health(vec![
            edac("mc0", Some("IMC#0"), Some(4), Some(1)),
            edac("mc0/dimm0", Some("DIMM_A1"), Some(3), Some(1)),
            edac("mc0/dimm1", Some("DIMM_B1"), Some(1), Some(0)),
            // Fell (a reloaded driver): no rise. Read only after: no rise.
            edac("mc1", None, Some(0), Some(0)),
            edac("mc2", None, Some(9), Some(0)),
            edac("mc3", None, Some(1), Some(1)),
        ]);
        let r = rises(&before, &after);
        let got: Vec<(&str, &str, u64, u64)> = r
            .iter()
            .map(|r| (r.device.as_str(), r.kind.as_str(), r.before, r.after))
            .collect();
        assert_eq!(
            got,
            [
                ("mc0", "uncorrectable", 0, 1),
                ("mc0", "corrected", 3, 4),
                ("mc0/dimm0", "uncorrectable", 0, 1),
                ("mc0/dimm1", "corrected", 0, 1),
            ]
        );
        let pass = (
            "pass".to_string(),
            "9 results checked, 0 wrong".to_string(),
            Exit::Ok,
        );
        let (verdict, reason, exit) = fold(pass, &r);
        assert_eq!((verdict.as_str(), exit), ("fail", Exit::Failure));
        assert_eq!(
            reason,
            "EDAC uncorrectable errors rose on mc0/dimm0 (DIMM_A1): 0 → 1 during the burn; \
             9 results checked, 0 wrong"
        );
        let w = warnings(&r);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("warn EDAC corrected errors rose on mc0/dimm1 (DIMM_B1): 0 → 1"));
        let md = markdown(&r);
        assert_eq!(md.matches("\n| mc0").count(), 4, "{md}");
    }

    #[test]
    fn a_controller_without_dimm_counts_is_named_and_a_pattern_failure_stays_first() {
        let before = health(vec![edac("mc1", Some("IMC#1"), Some(0), Some(0))]);
        let after = health(vec![edac("mc1", Some("IMC#1"), Some(0), Some(2))]);
        let r = rises(&before, &after);
        let fail = (
            "fail".to_string(),
            "memory 0x7f00 random: 1 wrong results".to_string(),
            Exit::Failure,
        );
        let (_, reason, _) = fold(fail, &r);
        assert_eq!(
            reason,
            "memory 0x7f00 random: 1 wrong results; \
             EDAC uncorrectable errors rose on mc1 (IMC#1): 0 → 2 during the burn"
        );
        assert!(warnings(&r).is_empty());
    }

    #[test]
    fn corrected_rises_alone_leave_the_verdict_and_no_rise_leaves_everything() {
        let before = health(vec![edac("mc0/dimm0", None, Some(1), Some(0))]);
        let after = health(vec![edac("mc0/dimm0", None, Some(2), Some(0))]);
        let unknown = (
            "unknown".to_string(),
            "not run: gpu".to_string(),
            Exit::Unknown,
        );
        let r = rises(&before, &after);
        assert_eq!(fold(unknown.clone(), &r), unknown);
        assert_eq!(warnings(&r).len(), 1);
        let same = rises(&before, &before);
        assert!(same.is_empty());
        assert_eq!(markdown(&same), "");
        assert!(warnings(&same).is_empty());
    }
}
