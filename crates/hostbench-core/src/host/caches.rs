//! CPU caches: one entry per (level, kind) with its size and number of instances, from sysfs
//! `cpuN/cache/indexM/`.
//!
//! Cache sizes drive working-set sizing (STREAM arrays must dwarf the last-level cache), so every
//! result records them. Only the first CPU of each sharing group is read, which keeps a many-core
//! machine at a few reads per core; unreadable entries become size 0 rather than errors.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::topology::parse_cpu_list;
use super::{parse_u32, read_trimmed, CPU_DIR};
use crate::model::Cache;

/// Parse a sysfs cache size (`32K`, `1024K`, `32M`, also `1G`, `512`, `32KiB`, `32 KB`) into
/// bytes; units are binary, as the kernel means them. `None` for anything else.
pub fn parse_cache_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(digits_end);
    let value: u64 = num.parse().ok()?;
    let unit = unit.trim().to_ascii_uppercase();
    let unit = unit
        .strip_suffix("IB")
        .or_else(|| unit.strip_suffix('B'))
        .unwrap_or(&unit);
    let scale: u64 = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    value.checked_mul(scale)
}

/// One entry per (level, kind), sorted by level then kind.
pub(super) fn caches(root: &Path, cpus: &[usize]) -> Vec<Cache> {
    #[derive(Default)]
    struct Seen {
        size: Option<u64>,
        instances: BTreeSet<Vec<usize>>,
    }
    let mut seen: BTreeMap<(u32, String), Seen> = BTreeMap::new();
    // CPUs already known to share index i with an earlier CPU need not be read again: this
    // keeps a many-core machine at a few reads per core rather than per thread.
    let mut covered: Vec<BTreeSet<usize>> = Vec::new();
    for &cpu in cpus {
        for index in 0..64usize {
            if covered.get(index).is_some_and(|c| c.contains(&cpu)) {
                continue;
            }
            let dir = format!("{CPU_DIR}/cpu{cpu}/cache/index{index}");
            let Some(level) =
                read_trimmed(root, &format!("{dir}/level")).and_then(|s| parse_u32(&s))
            else {
                break;
            };
            let kind = match read_trimmed(root, &format!("{dir}/type"))
                .map(|t| t.to_ascii_lowercase())
                .as_deref()
            {
                Some("data") => "data",
                Some("instruction") => "instruction",
                Some("unified") => "unified",
                _ => continue,
            };
            let entry = seen.entry((level, kind.to_string())).or_default();
            if entry.size.is_none() {
                entry.size =
                    read_trimmed(root, &format!("{dir}/size")).and_then(|s| parse_cache_size(&s));
            }
            if let Some(shared) = read_trimmed(root, &format!("{dir}/shared_cpu_list"))
                .and_then(|s| parse_cpu_list(&s).ok())
                .filter(|l| !l.is_empty())
            {
                if covered.len() <= index {
                    covered.resize_with(index + 1, BTreeSet::new);
                }
                if let Some(c) = covered.get_mut(index) {
                    c.extend(shared.iter().copied());
                }
                entry.instances.insert(shared);
            }
        }
    }
    seen.into_iter()
        .map(|((level, kind), s)| Cache {
            level,
            kind,
            size_bytes: s.size.unwrap_or(0),
            instances: u32::try_from(s.instances.len()).unwrap_or(u32::MAX),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes() {
        assert_eq!(parse_cache_size("32K"), Some(32 * 1024));
        assert_eq!(parse_cache_size("1024K\n"), Some(1024 * 1024));
        assert_eq!(parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(parse_cache_size("1G"), Some(1 << 30));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("48 KiB"), Some(48 * 1024));
        assert_eq!(parse_cache_size("2MB"), Some(2 << 20));
        for bad in [
            "",
            "K",
            "abc",
            "-1K",
            "32X",
            "1.5M",
            "99999999999999999999G",
            "18014398509481984G",
        ] {
            assert_eq!(parse_cache_size(bad), None, "{bad}");
        }
    }
}
