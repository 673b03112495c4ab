//! The EDAC counts that rose while `hostbench burn` ran, from the health readings taken before and
//! after it (`health.edac`, per memory controller and per DIMM).
//!
//! A burn stresses memory harder than a node's normal work, so a count that rises during it is the
//! burn's finding even when every pattern read back right: ECC corrected or caught the error
//! before the pattern check could see it. An uncorrectable error is a fault on its own and fails
//! the burn; corrected ones are a warning, because a healthy DIMM corrects a few and the limit
//! belongs to the node's expectation file, not to a fixed threshold here.
//!
//! The GPU's NVML counters (`health.gpu`, per GPU) and the XID events watched during the burn
//! (`hostbench_gpu::xid`) are judged the same way: an uncorrectable ECC error, a row remap or page
//! retirement that became pending or failed, or a hardware XID fails the burn naming the GPU and
//! its PCI address; corrected counts and application-caused XIDs warn. Where NVML could not be
//! read or watched, the burn says so rather than pass the counters.

use std::collections::BTreeMap;

use hostbench_core::model::{Health, HealthReading, Severity};
use hostbench_gpu::xid::{self, XidReport};
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
    let keys = ["uncorrectable_errors", "correctable_errors"];
    rose(before, after, EDAC, &keys)
        .into_iter()
        .map(|(b, a, key, was, now)| EdacRise {
            device: a.device.clone(),
            label: a.label.clone().or_else(|| b.label.clone()),
            kind: if key == keys[0] {
                UNCORRECTABLE
            } else {
                CORRECTED
            }
            .to_string(),
            before: was,
            after: now,
        })
        .collect()
}

/// A counter that rose: the reading before, the one after, the counter's key, its two values.
type Rose<'a> = (&'a HealthReading, &'a HealthReading, &'a str, u64, u64);

/// Each counter of `keys` in source `id`'s readings that was read for the same device both
/// before and after and is higher after, in the after-readings' device order and `keys`' order.
fn rose<'a>(before: &'a Health, after: &'a Health, id: &str, keys: &[&'a str]) -> Vec<Rose<'a>> {
    let mut out = Vec::new();
    for a in after.readings.iter().filter(|r| r.id == id) {
        let Some(b) = before
            .readings
            .iter()
            .find(|r| r.id == id && r.device == a.device)
        else {
            continue;
        };
        for &key in keys {
            let count = |r: &HealthReading| r.values.get(key).and_then(serde_json::Value::as_u64);
            if let (Some(was), Some(now)) = (count(b), count(a)) {
                if now > was {
                    out.push((b, a, key, was, now));
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
pub(crate) fn fold(verdict: (String, String, Exit), rises: &[EdacRise]) -> (String, String, Exit) {
    let lines: Vec<String> = named(rises, UNCORRECTABLE)
        .iter()
        .map(|r| r.line())
        .collect();
    fail_with(verdict, &lines)
}

/// `verdict` failed by `lines` where there are any: after a failure's own reason (a wrong result
/// stays the first thing named), before any other verdict's.
fn fail_with(
    (verdict, reason, exit): (String, String, Exit),
    lines: &[String],
) -> (String, String, Exit) {
    if lines.is_empty() {
        return (verdict, reason, exit);
    }
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

const GPU: &str = "health.gpu";

/// The `health.gpu` counters a burn watches, what each counts, and what a rise means: a count
/// the hardware could not correct, or a repair it could not finish, fails; a corrected one warns.
const GPU_COUNTERS: [(&str, &str, Severity); 9] = [
    (
        "ecc_volatile_uncorrected",
        "uncorrectable ECC errors",
        Severity::Fail,
    ),
    (
        "remapped_rows_uncorrectable",
        "rows remapped after uncorrectable errors",
        Severity::Fail,
    ),
    ("remap_pending", "pending row remaps", Severity::Fail),
    ("remap_failed", "failed row remaps", Severity::Fail),
    (
        "retired_pages_dbe",
        "pages retired after double-bit errors",
        Severity::Fail,
    ),
    (
        "retired_pages_pending",
        "pending page retirements",
        Severity::Fail,
    ),
    (
        "ecc_volatile_corrected",
        "corrected ECC errors",
        Severity::Warn,
    ),
    (
        "remapped_rows_correctable",
        "rows remapped after correctable errors",
        Severity::Warn,
    ),
    (
        "retired_pages_sbe",
        "pages retired after single-bit errors",
        Severity::Warn,
    ),
];

/// One GPU counter that rose during the burn (`gpu_rises` in the burn record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GpuRise {
    /// The GPU as `health.gpu` names it: `gpu0` (NVML's index).
    pub device: String,
    /// Its PCI address, "0000:41:00.0", where NVML told it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
    /// The GPU's model, "NVIDIA H100 80GB HBM3".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The counter's key in `health.gpu`: `ecc_volatile_uncorrected`, `remap_pending`, ….
    pub counter: String,
    /// `fail` or `warn`.
    pub severity: Severity,
    pub before: u64,
    pub after: u64,
}

impl GpuRise {
    /// "gpu0 (0000:41:00.0): uncorrectable ECC errors rose 0 → 2 during the burn".
    fn line(&self) -> String {
        let what = GPU_COUNTERS
            .iter()
            .find(|(k, _, _)| *k == self.counter)
            .map_or(self.counter.as_str(), |(_, w, _)| w);
        let who = match &self.bus {
            Some(b) => format!("{} ({b})", self.device),
            None => self.device.clone(),
        };
        format!(
            "{who}: {what} rose {} → {} during the burn",
            self.before, self.after
        )
    }
}

/// Every watched GPU counter read both before and after that is higher after, per GPU in the
/// reader's order, failing counters first. As for EDAC, a counter read only once (NVML refused it
/// once) or that fell (a driver reload resets the volatile counts) is no rise.
pub(crate) fn gpu_rises(before: &Health, after: &Health) -> Vec<GpuRise> {
    let keys: Vec<&str> = GPU_COUNTERS.iter().map(|(k, _, _)| *k).collect();
    let text = |r: &HealthReading| {
        r.values
            .get("pci_bus")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    let mut out: Vec<GpuRise> = rose(before, after, GPU, &keys)
        .into_iter()
        .map(|(b, a, key, was, now)| GpuRise {
            device: a.device.clone(),
            bus: text(a).or_else(|| text(b)),
            label: a.label.clone().or_else(|| b.label.clone()),
            counter: key.to_string(),
            severity: GPU_COUNTERS
                .iter()
                .find(|(k, _, _)| *k == key)
                .map_or(Severity::Warn, |(_, _, s)| *s),
            before: was,
            after: now,
        })
        .collect();
    out.sort_by_key(|r| r.severity != Severity::Fail);
    out
}

/// The XID verdict lines: NVML's events where the watch ran; where it watched no GPU (no NVML, no
/// permission, events not supported), the XIDs the driver logged in the kernel log meanwhile
/// (`health.xid` before and after); none where the GPU was not burned.
fn xid_lines(xid: Option<&XidReport>, before: &Health, after: &Health) -> Vec<(Severity, String)> {
    match xid {
        None => Vec::new(),
        Some(x) if x.watched.is_empty() => kernel_log_xids(before, after),
        Some(x) => xid::judge(&x.events),
    }
}

const XID_LOG: &str = "health.xid";

/// Per code, the count in a `health.xid` reading (its `xid_<code>` values).
fn xid_counts(r: &HealthReading) -> BTreeMap<u64, u64> {
    r.values
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("xid_")?.parse().ok()?, v.as_u64()?)))
        .collect()
}

/// The XIDs whose count in the kernel log rose between the two readings, per GPU as the driver
/// names it (its PCI address), judged as NVML's events are (`xid::burn_severity`). Nothing where
/// the log was not read before the burn: then no count can have risen.
pub(crate) fn kernel_log_xids(before: &Health, after: &Health) -> Vec<(Severity, String)> {
    if !before.readings.iter().any(|r| r.id == XID_LOG) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for a in after.readings.iter().filter(|r| r.id == XID_LOG) {
        let was = before
            .readings
            .iter()
            .find(|r| r.id == XID_LOG && r.device == a.device)
            .map(xid_counts)
            .unwrap_or_default();
        for (code, now) in xid_counts(a) {
            let then = was.get(&code).copied().unwrap_or(0);
            if now > then {
                let (severity, what) = xid::burn_severity(code);
                out.push((
                    severity,
                    format!(
                        "GPU {}: XID {code} x{} in the kernel log during the burn ({what})",
                        a.device,
                        now - then
                    ),
                ));
            }
        }
    }
    out
}

/// The burn's verdict with the GPU's failing rises and hardware XIDs folded in, as `fold` does
/// for EDAC: any makes it `fail` (exit 1), a wrong result's own reason staying first. `xid` is
/// the watch's report where the GPU was burned.
pub(crate) fn gpu_fold(
    verdict: (String, String, Exit),
    (before, after): (&Health, &Health),
    rises: &[GpuRise],
    xid: Option<&XidReport>,
) -> (String, String, Exit) {
    let mut lines: Vec<String> = rises
        .iter()
        .filter(|r| r.severity == Severity::Fail)
        .map(GpuRise::line)
        .collect();
    lines.extend(
        xid_lines(xid, before, after)
            .into_iter()
            .filter(|(s, _)| *s == Severity::Fail)
            .map(|(_, l)| l),
    );
    fail_with(verdict, &lines)
}

/// A warning line for each corrected GPU rise and application-caused XID; where the GPU was
/// burned (`xid` given), also each part that was not watched: the XIDs (no NVML, no permission)
/// and the counters (`health.gpu` unavailable), so a missing NVML never reads as a clean GPU.
pub(crate) fn gpu_warnings(
    before: &Health,
    after: &Health,
    rises: &[GpuRise],
    xid: Option<&XidReport>,
) -> Vec<String> {
    let mut out: Vec<String> = rises
        .iter()
        .filter(|r| r.severity != Severity::Fail)
        .map(|r| {
            format!(
                "warn {} (corrected: the expectation's limit decides)",
                r.line()
            )
        })
        .collect();
    out.extend(
        xid_lines(xid, before, after)
            .into_iter()
            .filter(|(s, _)| *s != Severity::Fail)
            .map(|(_, l)| format!("warn {l}")),
    );
    if let Some(x) = xid {
        // The kernel log stood in for the watch where it was read before the burn.
        let log_read = x.watched.is_empty() && before.readings.iter().any(|r| r.id == XID_LOG);
        out.extend(x.not_watched.iter().map(|w| {
            if log_read {
                format!("warn {w}; the kernel log's XID lines were compared instead")
            } else {
                format!("warn {w}")
            }
        }));
        let unread = [before, after]
            .into_iter()
            .find_map(|h| h.unavailable.get(GPU));
        if let Some(why) = unread {
            out.push(format!("warn GPU error counters not read: {why}"));
        }
    }
    out
}

/// The Markdown section listing every GPU rise and XID, and what was watched; empty when nothing
/// rose and the GPU was not burned.
pub(crate) fn gpu_markdown(
    rises: &[GpuRise],
    xid: Option<&XidReport>,
    (before, after): (&Health, &Health),
) -> String {
    if rises.is_empty() && xid.is_none() {
        return String::new();
    }
    let mut s = String::from("\n\n## GPU counters and XIDs during the burn\n\n");
    if !rises.is_empty() {
        s += "| GPU | bus | model | counter | severity | before | after |\n|---|---|---|---|---|---:|---:|\n";
        for r in rises {
            s += &format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                r.device,
                r.bus.as_deref().unwrap_or("-"),
                r.label.as_deref().unwrap_or("-"),
                r.counter,
                r.severity.name(),
                r.before,
                r.after
            );
        }
        s += "\n";
    }
    if let Some(x) = xid {
        if !x.watched.is_empty() {
            let gpus: Vec<String> = x.watched.iter().map(|g| format!("gpu{g}")).collect();
            s += &format!(
                "XID events watched on {}: {} seen.\n",
                gpus.join(", "),
                x.events.len()
            );
        }
        for (sev, l) in xid_lines(xid, before, after) {
            s += &format!("\n- {} {l}", sev.name());
        }
        for w in &x.not_watched {
            s += &format!("\n- {w}");
        }
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

    fn gpu(device: &str, bus: Option<&str>, counters: &[(&str, u64)]) -> HealthReading {
        let mut values = hostbench_core::model::Params::new();
        if let Some(b) = bus {
            values.insert("pci_bus".into(), b.into());
        }
        for (k, v) in counters {
            values.insert((*k).into(), (*v).into());
        }
        HealthReading {
            id: GPU.into(),
            device: device.into(),
            label: Some("NVIDIA H100 80GB HBM3".into()),
            values,
            findings: Vec::new(),
        }
    }

    fn pass() -> (String, String, Exit) {
        (
            "pass".to_string(),
            "9 results checked, 0 wrong".to_string(),
            Exit::Ok,
        )
    }

    #[test]
    fn an_uncorrectable_gpu_rise_fails_naming_the_gpu_and_its_bus() {
        let bus = Some("0000:41:00.0");
        let before = health(vec![gpu(
            "gpu0",
            bus,
            &[
                ("ecc_volatile_uncorrected", 0),
                ("ecc_volatile_corrected", 3),
            ],
        )]);
        let after = health(vec![gpu(
            "gpu0",
            bus,
            &[
                ("ecc_volatile_uncorrected", 2),
                ("ecc_volatile_corrected", 5),
            ],
        )]);
        let r = gpu_rises(&before, &after);
        assert_eq!(r.len(), 2, "{r:?}");
        let (verdict, reason, exit) = gpu_fold(pass(), (&before, &after), &r, None);
        assert_eq!((verdict.as_str(), exit), ("fail", Exit::Failure));
        assert_eq!(
            reason,
            "gpu0 (0000:41:00.0): uncorrectable ECC errors rose 0 → 2 during the burn; \
             9 results checked, 0 wrong"
        );
        let w = gpu_warnings(&before, &after, &r, None);
        assert_eq!(
            w,
            [
                "warn gpu0 (0000:41:00.0): corrected ECC errors rose 3 → 5 during the burn \
              (corrected: the expectation's limit decides)"
            ]
        );
        let md = gpu_markdown(&r, None, (&before, &after));
        assert!(
            md.contains("| gpu0 | 0000:41:00.0 | NVIDIA H100 80GB HBM3 | ecc_volatile_uncorrected | fail | 0 | 2 |"),
            "{md}"
        );
    }

    #[test]
    fn remaps_and_retirements_that_became_pending_or_failed_fail_and_a_wrong_result_stays_first() {
        for key in [
            "remap_pending",
            "remap_failed",
            "retired_pages_pending",
            "remapped_rows_uncorrectable",
            "retired_pages_dbe",
        ] {
            let before = health(vec![gpu("gpu1", None, &[(key, 0)])]);
            let after = health(vec![gpu("gpu1", None, &[(key, 1)])]);
            let r = gpu_rises(&before, &after);
            assert_eq!(r.len(), 1, "{key}");
            assert_eq!(r[0].severity, Severity::Fail, "{key}");
            let wrong = (
                "fail".to_string(),
                "gpu1 fp32: 1 wrong results".to_string(),
                Exit::Failure,
            );
            let (_, reason, exit) = gpu_fold(wrong, (&before, &after), &r, None);
            assert_eq!(exit, Exit::Failure);
            assert!(
                reason.starts_with("gpu1 fp32: 1 wrong results; gpu1: "),
                "{key}: {reason}"
            );
            assert!(reason.ends_with("rose 0 → 1 during the burn"), "{reason}");
        }
    }

    #[test]
    fn a_gpu_counter_read_once_or_that_fell_is_no_rise_and_corrected_ones_only_warn() {
        let before = health(vec![
            gpu("gpu0", None, &[("ecc_volatile_corrected", 7)]),
            gpu("gpu1", None, &[("remapped_rows_correctable", 1)]),
        ]);
        let after = health(vec![
            // Fell: the driver reloaded. Read only after: NVML refused it before.
            gpu(
                "gpu0",
                None,
                &[
                    ("ecc_volatile_corrected", 0),
                    ("ecc_volatile_uncorrected", 4),
                ],
            ),
            gpu("gpu1", None, &[("remapped_rows_correctable", 2)]),
            gpu("gpu2", None, &[("remap_pending", 1)]),
        ]);
        let r = gpu_rises(&before, &after);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(
            (r[0].device.as_str(), r[0].counter.as_str(), r[0].severity),
            ("gpu1", "remapped_rows_correctable", Severity::Warn)
        );
        assert_eq!(gpu_fold(pass(), (&before, &after), &r, None), pass());
        assert_eq!(gpu_warnings(&before, &after, &r, None).len(), 1);
        assert!(gpu_rises(&before, &before).is_empty());
        assert_eq!(gpu_markdown(&[], None, (&before, &after)), "");
    }

    #[test]
    fn hardware_xids_fail_the_burn_application_ones_and_an_unwatched_gpu_warn() {
        let event = |xid, at_s| hostbench_gpu::xid::XidEvent {
            gpu: 0,
            bus: Some("0000:41:00.0".into()),
            xid,
            at_s,
        };
        let seen = XidReport {
            watched: vec![0],
            events: vec![event(13, 1.0), event(79, 2.0)],
            not_watched: Vec::new(),
        };
        let empty = Health::default();
        let (verdict, reason, _) = gpu_fold(pass(), (&empty, &empty), &[], Some(&seen));
        assert_eq!(verdict, "fail");
        assert!(
            reason.starts_with("gpu0 (0000:41:00.0): XID 79 at 2.0 s during the burn"),
            "{reason}"
        );
        let w = gpu_warnings(&empty, &empty, &[], Some(&seen));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("warn gpu0 (0000:41:00.0): XID 13 at 1.0 s"),
            "{}",
            w[0]
        );
        let md = gpu_markdown(&[], Some(&seen), (&empty, &empty));
        assert!(md.contains("XID events watched on gpu0: 2 seen."), "{md}");

        // No NVML: neither XIDs nor counters pass; both are named as not watched.
        let mut unread = Health::default();
        unread.unavailable.insert(
            GPU.into(),
            "NVML not found (libnvidia-ml.so.1, installed with the NVIDIA driver)".into(),
        );
        let none = XidReport::unwatched("NVML not found".into());
        assert_eq!(
            gpu_fold(pass(), (&unread, &unread), &[], Some(&none)),
            pass()
        );
        let w = gpu_warnings(&unread, &unread, &[], Some(&none));
        assert_eq!(
            w,
            [
                "warn XID events not watched: NVML not found",
                "warn GPU error counters not read: NVML not found (libnvidia-ml.so.1, installed with the NVIDIA driver)",
            ]
        );
        assert!(
            gpu_markdown(&[], Some(&none), (&unread, &unread)).contains("XID events not watched")
        );
        // A burn without the GPU says nothing of it.
        assert!(gpu_warnings(&unread, &unread, &[], None).is_empty());
    }

    /// Where NVML watched no GPU, the XIDs the driver logged during the burn count instead: a
    /// hardware one fails it naming the GPU's PCI address, an application-caused one warns; a
    /// count that did not rise, or a log unread before the burn, says nothing.
    #[test]
    fn unwatched_by_nvml_the_kernel_logs_xids_that_rose_count() {
        let log = |device: &str, xids: &[(u64, u64)]| {
            let mut values = hostbench_core::model::Params::new();
            for (code, n) in xids {
                values.insert(format!("xid_{code}"), (*n).into());
            }
            HealthReading {
                id: XID_LOG.into(),
                device: device.into(),
                label: None,
                values,
                findings: Vec::new(),
            }
        };
        let before = health(vec![log("0000:41:00", &[(13, 2)])]);
        let after = health(vec![
            log("0000:41:00", &[(13, 3), (79, 1)]),
            log("0000:42:00", &[(31, 1)]),
        ]);
        let none = XidReport::unwatched("NVML not found".into());
        let (verdict, reason, exit) = gpu_fold(pass(), (&before, &after), &[], Some(&none));
        assert_eq!((verdict.as_str(), exit), ("fail", Exit::Failure));
        assert!(
            reason.starts_with("GPU 0000:41:00: XID 79 x1 in the kernel log during the burn ("),
            "{reason}"
        );
        let w = gpu_warnings(&before, &after, &[], Some(&none));
        assert!(
            w.contains(&"warn XID events not watched: NVML not found; the kernel log's XID lines were compared instead".to_string()),
            "{w:?}"
        );
        let xids: Vec<&String> = w
            .iter()
            .filter(|l| l.contains("in the kernel log"))
            .collect();
        assert_eq!(xids.len(), 2, "{w:?}");
        assert!(
            xids[0].starts_with("warn GPU 0000:41:00: XID 13 x1 in the kernel log"),
            "{w:?}"
        );
        assert!(
            xids[1].starts_with("warn GPU 0000:42:00: XID 31 x1"),
            "{w:?}"
        );
        // Nothing rose: nothing said.
        assert_eq!(gpu_fold(pass(), (&after, &after), &[], Some(&none)), pass());
        // The log unread before the burn: no count can have risen.
        let (v, _, _) = gpu_fold(pass(), (&Health::default(), &after), &[], Some(&none));
        assert_eq!(v, "pass");
        // NVML watched: its events decide, the log is not read twice over.
        let watched = XidReport {
            watched: vec![0],
            ..XidReport::default()
        };
        assert_eq!(
            gpu_fold(pass(), (&before, &after), &[], Some(&watched)),
            pass()
        );
    }
}
