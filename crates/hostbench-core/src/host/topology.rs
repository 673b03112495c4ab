//! Host topology: which logical CPUs exist, where each sits (package and physical core), how many
//! sockets, cores and threads that makes, how many NUMA nodes, and how much memory.
//!
//! The core count feeds the peak calculations (cores × clock × operations per cycle) and
//! [`cpu_place`] lets the affinity code spread threads one per core. Everything is read from sysfs
//! and `/proc/meminfo` under a root, so fixture trees work as well as `/`; a file that cannot be
//! read gives an empty list, `None` or 0, never a panic.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use super::{read_trimmed, CPU_DIR};
use crate::error::BenchError;

/// Largest CPU number a CPU list may name: far above any kernel's NR_CPUS, yet low enough that a
/// hostile list such as `0-4000000000` cannot make us allocate gigabytes.
const MAX_CPU_ID: usize = 1 << 20;

/// Available memory (`MemAvailable` in `/proc/meminfo`) in bytes; 0 if unknown.
pub fn available_memory_bytes() -> u64 {
    meminfo_bytes(Path::new("/"), "MemAvailable").unwrap_or(0)
}

/// Parse a kernel CPU list such as `0-3,8-11` or `5` into sorted, distinct CPU numbers.
///
/// Surrounding whitespace (the trailing newline of a sysfs file) is ignored and an empty string is
/// an empty list (that is how sysfs writes "no CPUs"). The error names the offending text.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, BenchError> {
    let text = s.trim();
    let mut cpus = BTreeSet::new();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let bad = |part: &str, why: &str| {
        BenchError::invalid(format!("invalid CPU list {text:?}: {part:?} {why}"))
    };
    for part in text.split(',') {
        let part = part.trim();
        let parse = |n: &str| -> Result<usize, BenchError> {
            let n = n.trim();
            let v: usize = n
                .parse()
                .map_err(|_| bad(part, "is not a CPU number or range"))?;
            if v > MAX_CPU_ID {
                return Err(bad(part, "names a CPU number beyond any real machine"));
            }
            Ok(v)
        };
        match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (parse(lo)?, parse(hi)?);
                if lo > hi {
                    return Err(bad(part, "is a descending range"));
                }
                cpus.extend(lo..=hi);
            }
            None => {
                cpus.insert(parse(part)?);
            }
        }
    }
    Ok(cpus.into_iter().collect())
}

/// CPU numbers of the `cpuN` directories, for trees without an `online` file.
pub(super) fn cpu_dirs(root: &Path) -> Vec<usize> {
    let Ok(entries) = fs::read_dir(root.join(CPU_DIR)) else {
        return Vec::new();
    };
    let mut cpus: Vec<usize> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("cpu"))
                .and_then(|n| n.parse().ok())
        })
        .collect();
    cpus.sort_unstable();
    cpus
}

/// Identifies a physical core machine-wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum CoreKey {
    /// Lowest CPU number in the core's thread-sibling list.
    Siblings(usize),
    /// (package, die, core_id), when no sibling list is readable. The die is included because
    /// `core_id` is only unique within a die on some multi-die parts.
    Ids(i64, i64, i64),
}

/// Where a logical CPU sits: its package (socket) and physical core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CpuPlace {
    pub(crate) package: Option<i64>,
    pub(crate) core: CoreKey,
}

/// A logical CPU's package and core from sysfs `topology/`; `None` if the core cannot be told.
pub(crate) fn cpu_place(root: &Path, cpu: usize) -> Option<CpuPlace> {
    let dir = format!("{CPU_DIR}/cpu{cpu}/topology");
    let id = |name: &str| {
        read_trimmed(root, &format!("{dir}/{name}")).and_then(|s| s.parse::<i64>().ok())
    };
    let package = id("physical_package_id");
    let siblings = ["thread_siblings_list", "core_cpus_list"]
        .iter()
        .find_map(|name| {
            read_trimmed(root, &format!("{dir}/{name}"))
                .and_then(|s| parse_cpu_list(&s).ok())
                .and_then(|l| l.first().copied())
        });
    let core = match siblings {
        Some(first) => CoreKey::Siblings(first),
        None => CoreKey::Ids(
            package.unwrap_or(-1),
            id("die_id").unwrap_or(0),
            id("core_id")?,
        ),
    };
    Some(CpuPlace { package, core })
}

/// A field of this host's `/proc/meminfo`: bytes for the `kB` ones, a count for the others
/// (`HugePages_Free`).
pub fn meminfo(key: &str) -> Option<u64> {
    meminfo_bytes(Path::new("/"), key)
}

/// A `/proc/meminfo` field in bytes (the file says `kB` and means KiB).
pub(super) fn meminfo_bytes(root: &Path, key: &str) -> Option<u64> {
    let text = read_trimmed(root, "proc/meminfo")?;
    text.lines().find_map(|line| {
        let (k, rest) = line.split_once(':')?;
        if k.trim() != key {
            return None;
        }
        let mut parts = rest.split_whitespace();
        let value: u64 = parts.next()?.parse().ok()?;
        match parts.next() {
            None => Some(value),
            Some(u) if u.eq_ignore_ascii_case("kb") => value.checked_mul(1024),
            Some(_) => None,
        }
    })
}

/// Number of `nodeN` directories, at least 1 (a machine without NUMA is one node).
pub(super) fn numa_nodes(root: &Path) -> u32 {
    let count = fs::read_dir(root.join("sys/devices/system/node"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_prefix("node"))
                        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                })
                .count()
        })
        .unwrap_or(0);
    u32::try_from(count.max(1)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8-11").expect("valid list"),
            vec![0, 1, 2, 3, 8, 9, 10, 11]
        );
        assert_eq!(parse_cpu_list("5").expect("valid list"), vec![5]);
        assert_eq!(parse_cpu_list(" 0-1 \n").expect("valid list"), vec![0, 1]);
        assert_eq!(
            parse_cpu_list("3, 1,1-2").expect("valid list"),
            vec![1, 2, 3]
        );
        assert_eq!(
            parse_cpu_list("\n").expect("valid list"),
            Vec::<usize>::new()
        );
        assert_eq!(parse_cpu_list("7-7").expect("valid list"), vec![7]);
        for bad in [
            "abc",
            "3-1",
            "0-",
            "-1",
            "1-2-3",
            "0,,1",
            "1.5",
            "0-99999999999",
        ] {
            let err = parse_cpu_list(bad).expect_err(bad).to_string();
            assert!(err.contains(bad), "{err} should name {bad}");
        }
    }
}
