//! What every health reader shares: a source's outcome (`Part`), building a reading and its
//! findings, and reading sysfs files under a root that may be a fixture tree.
//!
//! A leaf module, so the readers (`edac`, `nvme`, `pcie`…) import it and not their parent, which
//! imports them (issue 53: no circle in `hostbench-core`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::model::{HealthFinding, HealthReading, Params, Severity};

/// What one source yielded: its readings, or why it has none on this host.
pub(crate) type Part = Result<Vec<HealthReading>, String>;

/// A reading with no findings yet.
pub(crate) fn reading(id: &str, device: &str, label: Option<String>) -> HealthReading {
    HealthReading {
        id: id.to_string(),
        device: device.to_string(),
        label,
        values: Params::new(),
        findings: Vec::new(),
    }
}

/// `reading.values[key] = v` where the counter was read; an unread counter is left out, never
/// written as zero.
pub(crate) fn put(r: &mut HealthReading, key: &str, v: Option<impl Into<Value>>) {
    if let Some(v) = v {
        r.values.insert(key.to_string(), v.into());
    }
}

pub(crate) fn finding(r: &mut HealthReading, severity: Severity, text: String) {
    r.findings.push(HealthFinding { severity, text });
}

/// `root` joined with an absolute-looking path ("sys/…").
pub(crate) fn at(root: &Path, rel: &str) -> PathBuf {
    root.join(rel.trim_start_matches('/'))
}

pub(crate) fn read_trim(path: &Path) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

pub(crate) fn read_u64(path: &Path) -> Option<u64> {
    read_trim(path)?.parse().ok()
}

/// The entries of a directory whose names start with `prefix`, sorted by their trailing number
/// (`mc2` before `mc10`).
pub(crate) fn numbered(dir: &Path, prefix: &str) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(u64, String, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let n = name.strip_prefix(prefix)?.parse().ok()?;
            Some((n, name, e.path()))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, n, p)| (n, p)).collect()
}
