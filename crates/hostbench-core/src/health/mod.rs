//! Hardware error and link counters (`health.*`), read from the kernel's own files without extra
//! tools: EDAC memory errors, machine checks, PCIe links and AER, NICs, NVMe's health log and the
//! GPU driver's XID lines in the kernel log. GPUs' NVML counters come from the GPU crate through
//! the subsystem contract (`Subsystem::health`) and join the same `Health` document.
//!
//! Why without tools: a health check runs on every node every few minutes (Slurm's
//! `HealthCheckProgram`), where `nvme-cli`, `edac-util` or `rasdaemon` may not be installed and a
//! fork per counter costs more than the reading. Why every source is either read or named as
//! unavailable: a counter that could not be read must never pass for a zero (a VM has no EDAC, a
//! container may not read `/dev/kmsg`), so `check` can say `unknown` rather than `pass`.
//!
//! Every reader takes the directory to read in place of `/`, so each is tested on a fixture tree;
//! `HOSTBENCH_HEALTH_ROOT` names such a tree for the whole binary (a documented test hook: the
//! scheduler tests give one node a fixture with uncorrectable errors), and the document then says
//! which root it was read from.

mod edac;
mod kmsg;
mod nic;
mod nvme;
mod pcie;
mod source;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::model::{Health, Severity};

pub use self::kmsg::xid_meaning;
pub use self::nvme::parse_smart_log;
pub use self::pcie::{lane_payload_bps, link_peak_bps};
pub(crate) use self::source::Part;

/// The environment variable that points every reader at a fixture tree instead of `/`.
pub const ROOT_ENV: &str = "HOSTBENCH_HEALTH_ROOT";

/// Read every source under `/` (or `HOSTBENCH_HEALTH_ROOT` where set).
pub fn read() -> Health {
    match fixture_root() {
        Some(root) => read_from(&root, true),
        None => read_from(Path::new("/"), false),
    }
}

/// `HOSTBENCH_HEALTH_ROOT` where set, with `%n` replaced by this node's name, as Slurm's own
/// paths write it (`SLURMD_NODENAME` under Slurm, else the host name): one setting gives each
/// node of a test cluster its own tree, the way `fleet check` runs one command on every node.
pub fn fixture_root() -> Option<PathBuf> {
    let root = std::env::var(ROOT_ENV).ok().filter(|v| !v.is_empty())?;
    if !root.contains("%n") {
        return Some(PathBuf::from(root));
    }
    let node = std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_default();
    Some(PathBuf::from(root.replace("%n", &node)))
}

/// Read every source under `root`; `fixture` marks the document as read from a tree other than
/// the live system's.
pub fn read_from(root: &Path, fixture: bool) -> Health {
    let mut h = Health {
        root: fixture.then(|| root.display().to_string()),
        ..Health::default()
    };
    let log = kmsg::read(root);
    let parts: [(&str, Part); 6] = [
        ("health.edac", edac::read(root)),
        ("health.mce", kmsg::machine_checks(root, log.as_ref().ok())),
        ("health.pcie", pcie::read(root)),
        ("health.nic", nic::read(root)),
        ("health.nvme", nvme::read(root)),
        ("health.xid", log.map(|l| kmsg::xids(&l))),
    ];
    for (id, part) in parts {
        h.add(id, part);
    }
    h
}

/// Adding a source's outcome to the document.
pub trait HealthExt {
    /// Its readings, or the reason it has none.
    fn add(&mut self, id: &str, part: Part);
    /// The worst finding of every reading, in order of severity.
    fn worst(&self) -> Option<Severity>;
}

impl HealthExt for Health {
    fn add(&mut self, id: &str, part: Part) {
        match part {
            Ok(r) => self.readings.extend(r),
            Err(why) => {
                self.unavailable.insert(id.to_string(), why);
            }
        }
    }

    fn worst(&self) -> Option<Severity> {
        self.readings
            .iter()
            .flat_map(|r| r.findings.iter().map(|f| f.severity))
            .max()
    }
}

/// Every numeric value of the document by (source, key), for exporters that need one series per
/// counter: `(id, device, key, value)`.
pub fn numeric_values(h: &Health) -> Vec<(&str, &str, &str, f64)> {
    let mut out = Vec::new();
    for r in &h.readings {
        for (k, v) in &r.values {
            if let Some(x) = v.as_f64() {
                out.push((r.id.as_str(), r.device.as_str(), k.as_str(), x));
            }
        }
    }
    out
}

/// Counts of findings by severity, for a one-line summary.
pub fn tally(h: &Health) -> BTreeMap<Severity, usize> {
    let mut t = BTreeMap::new();
    for f in h.readings.iter().flat_map(|r| &r.findings) {
        *t.entry(f.severity).or_insert(0) += 1;
    }
    t
}

#[cfg(test)]
pub(crate) mod test_util {
    use std::path::Path;

    pub(crate) fn put(root: &Path, rel: &str, content: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, content).expect("write");
    }

    pub(crate) fn link(root: &Path, rel: &str, target: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::os::unix::fs::symlink(target, p).expect("symlink");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_tree_reads_nothing_and_names_every_source_as_unavailable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let h = read_from(dir.path(), true);
        assert!(h.readings.is_empty(), "{:?}", h.readings);
        for id in [
            "health.edac",
            "health.mce",
            "health.pcie",
            "health.nic",
            "health.nvme",
            "health.xid",
        ] {
            let why = h
                .unavailable
                .get(id)
                .unwrap_or_else(|| panic!("{id}: {h:?}"));
            assert!(!why.is_empty() && !why.contains('\n'), "{id}: {why:?}");
        }
        assert_eq!(h.root.as_deref(), Some(&*dir.path().display().to_string()));
        assert_eq!(h.worst(), None);
    }

    #[test]
    fn the_live_system_reads_or_explains_every_source() {
        // Whatever this host has, each source is read or named with why: never silently absent.
        let h = read_from(Path::new("/"), false);
        let ids: std::collections::BTreeSet<&str> = h
            .readings
            .iter()
            .map(|r| r.id.as_str())
            .chain(h.unavailable.keys().map(String::as_str))
            .collect();
        for id in ["health.edac", "health.pcie", "health.nic", "health.nvme"] {
            assert!(ids.contains(id), "{id} neither read nor explained: {h:?}");
        }
        assert_eq!(h.root, None);
    }
}
