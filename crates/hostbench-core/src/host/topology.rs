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

/// Available memory in bytes: `MemAvailable` in `/proc/meminfo`, or less where our cgroup (or
/// an ancestor) has a memory limit closer than that (a container's `--memory`, a Slurm job's
/// allocation: exceeding it gets the process killed however much the host has free); 0 if
/// unknown.
pub fn available_memory_bytes() -> u64 {
    let root = Path::new("/");
    let host = meminfo_bytes(root, "MemAvailable").unwrap_or(0);
    match cgroup_memory_headroom(root) {
        Some(h) if host == 0 || h < host => h,
        _ => host,
    }
}

/// Limits at or above this are "no limit" (v1 writes 2^63 rounded down to a page).
const NO_LIMIT: u64 = 1 << 62;

/// How much more memory our cgroup may use before its limit (or the tightest ancestor's), with
/// the inactive page cache counted as free (the kernel reclaims it before it kills anyone);
/// `None` without a limit or a memory controller. Read under `root` (`/proc/self/cgroup`, then
/// `sys/fs/cgroup/memory/…` for v1 or `sys/fs/cgroup/…` for v2).
pub fn cgroup_memory_headroom(root: &Path) -> Option<u64> {
    let membership = read_trimmed(root, "proc/self/cgroup")?;
    // (hierarchy directory, limit file, usage file, inactive-cache key in memory.stat)
    let (base, path, files) = membership.lines().find_map(|line| {
        let mut f = line.splitn(3, ':');
        let (id, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        if ctrls.split(',').any(|c| c == "memory") {
            Some((
                "sys/fs/cgroup/memory",
                path,
                (
                    "memory.limit_in_bytes",
                    "memory.usage_in_bytes",
                    "total_inactive_file",
                ),
            ))
        } else if id == "0" && ctrls.is_empty() {
            Some((
                "sys/fs/cgroup",
                path,
                ("memory.max", "memory.current", "inactive_file"),
            ))
        } else {
            None
        }
    })?;
    let (limit_file, usage_file, inactive_key) = files;
    let mut dir = std::path::PathBuf::from(base).join(path.trim_start_matches('/'));
    let mut best: Option<u64> = None;
    loop {
        let at = |file: &str| read_trimmed(root, &dir.join(file).to_string_lossy());
        let limit = at(limit_file).and_then(|v| v.parse::<u64>().ok());
        if let Some(limit) = limit.filter(|&l| l < NO_LIMIT) {
            let usage = at(usage_file)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            let inactive = at("memory.stat")
                .and_then(|stat| {
                    stat.lines().find_map(|l| {
                        let (k, v) = l.split_once(' ')?;
                        (k == inactive_key).then(|| v.trim().parse::<u64>().ok())?
                    })
                })
                .unwrap_or(0);
            let room = limit.saturating_sub(usage.saturating_sub(inactive));
            best = Some(best.map_or(room, |b| b.min(room)));
        }
        if dir.as_path() == Path::new(base) || !dir.pop() {
            break;
        }
    }
    best
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

/// The kernel's text for a sorted, distinct CPU list (`0-3,8`), the inverse of
/// [`parse_cpu_list`]; `none` for an empty one.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if j == i {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(",")
    }
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
    u32::try_from(numa_topology_from(root).len().max(1)).unwrap_or(u32::MAX)
}

/// One NUMA node: its CPUs (possibly none: a memory-only node such as CXL or HBM) and memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaNode {
    pub id: usize,
    pub cpus: Vec<usize>,
    /// `MemTotal` of the node's `meminfo`; 0 for a node without memory (CPUs only).
    pub mem_bytes: u64,
}

/// This host's NUMA nodes (see [`numa_topology_from`]).
pub fn numa_topology() -> Vec<NumaNode> {
    numa_topology_from(Path::new("/"))
}

/// The `nodeN` directories under `root`, in node order, with their CPU lists and memory. A kernel
/// without NUMA support has no such directories: that host is one node 0 holding every CPU and
/// all of `MemTotal`, which is what it is.
pub fn numa_topology_from(root: &Path) -> Vec<NumaNode> {
    let base = "sys/devices/system/node";
    let mut ids: Vec<usize> = fs::read_dir(root.join(base))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_prefix("node"))
                        .and_then(|n| n.parse().ok())
                })
                .collect()
        })
        .unwrap_or_default();
    ids.sort_unstable();
    if ids.is_empty() {
        let cpus = read_trimmed(root, &format!("{CPU_DIR}/online"))
            .and_then(|s| parse_cpu_list(&s).ok())
            .unwrap_or_else(|| cpu_dirs(root));
        return vec![NumaNode {
            id: 0,
            cpus,
            mem_bytes: meminfo_bytes(root, "MemTotal").unwrap_or(0),
        }];
    }
    ids.into_iter()
        .map(|id| {
            let cpus = read_trimmed(root, &format!("{base}/node{id}/cpulist"))
                .and_then(|s| parse_cpu_list(&s).ok())
                .unwrap_or_default();
            // "Node 0 MemTotal:       16384 kB"
            let mem_bytes = read_trimmed(root, &format!("{base}/node{id}/meminfo"))
                .and_then(|text| {
                    text.lines().find_map(|line| {
                        let rest = line.split_once("MemTotal:")?.1;
                        let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
                        kb.checked_mul(1024)
                    })
                })
                .unwrap_or(0);
            NumaNode {
                id,
                cpus,
                mem_bytes,
            }
        })
        .collect()
}

/// How close two logical CPUs sit, nearest first: what a core-to-core latency depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CpuRelation {
    /// SMT siblings of one physical core.
    Smt,
    /// Different cores sharing the last-level cache (a CCX, a monolithic die's L3).
    Llc,
    /// The same package but different last-level caches (another CCX/CCD or tile).
    Package,
    /// Different packages (sockets).
    Socket,
    /// The topology files do not tell.
    Unknown,
}

impl CpuRelation {
    pub fn name(self) -> &'static str {
        match self {
            Self::Smt => "smt",
            Self::Llc => "llc",
            Self::Package => "package",
            Self::Socket => "socket",
            Self::Unknown => "unknown",
        }
    }
}

/// The relation of two distinct CPUs on this host (see [`cpu_relation_in`]).
pub fn cpu_relation(a: usize, b: usize) -> CpuRelation {
    cpu_relation_in(Path::new("/"), a, b)
}

/// The relation of CPUs `a` and `b` from the sysfs tree under `root`: sibling lists for SMT, the
/// highest-level cache's `shared_cpu_list` for a shared LLC, `physical_package_id` for sockets.
pub fn cpu_relation_in(root: &Path, a: usize, b: usize) -> CpuRelation {
    let (Some(pa), Some(pb)) = (cpu_place(root, a), cpu_place(root, b)) else {
        return CpuRelation::Unknown;
    };
    if pa.core == pb.core {
        return CpuRelation::Smt;
    }
    if let (Some(x), Some(y)) = (pa.package, pb.package) {
        if x != y {
            return CpuRelation::Socket;
        }
    }
    match llc_sharers(root, a) {
        Some(list) if list.contains(&b) => CpuRelation::Llc,
        Some(_) if pa.package.is_some() => CpuRelation::Package,
        _ => CpuRelation::Unknown,
    }
}

/// CPUs sharing `cpu`'s highest-level unified or data cache.
fn llc_sharers(root: &Path, cpu: usize) -> Option<Vec<usize>> {
    let dir = format!("{CPU_DIR}/cpu{cpu}/cache");
    let mut best: Option<(u32, Vec<usize>)> = None;
    for entry in fs::read_dir(root.join(&dir)).ok()?.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(idx) = name.to_str().filter(|n| n.starts_with("index")) else {
            continue;
        };
        let get = |f: &str| read_trimmed(root, &format!("{dir}/{idx}/{f}"));
        if get("type").as_deref() == Some("Instruction") {
            continue;
        }
        let (Some(level), Some(list)) = (
            get("level").and_then(|l| l.parse::<u32>().ok()),
            get("shared_cpu_list").and_then(|l| parse_cpu_list(&l).ok()),
        ) else {
            continue;
        };
        if best.as_ref().is_none_or(|(l, _)| level > *l) {
            best = Some((level, list));
        }
    }
    best.map(|(_, list)| list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_print_as_ranges_and_parse_back() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8]), "0-3,8");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[]), "none");
        assert_eq!(format_cpu_list(&[0, 2, 3]), "0,2-3");
        let cpus = vec![0, 1, 4, 5, 6, 9];
        assert_eq!(
            parse_cpu_list(&format_cpu_list(&cpus)).expect("parses"),
            cpus
        );
    }

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

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, text).expect("write");
    }

    /// Two packages; package 0 has two LLC domains (CCXs) of two SMT cores each.
    fn numa_tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        let r = d.path();
        write(r, "sys/devices/system/node/node0/cpulist", "0-3\n");
        write(
            r,
            "sys/devices/system/node/node0/meminfo",
            "Node 0 MemTotal:       16384 kB\nNode 0 MemFree: 1 kB\n",
        );
        write(r, "sys/devices/system/node/node1/cpulist", "\n");
        write(
            r,
            "sys/devices/system/node/node1/meminfo",
            "Node 1 MemTotal:       8 kB\n",
        );
        write(r, "sys/devices/system/node/online", "0-1\n");
        // cpu: (package, sibling list, llc list)
        let cpus = [
            (0, "0,1", "0-1"),
            (0, "0,1", "0-1"),
            (0, "2,3", "2-3"),
            (0, "2,3", "2-3"),
            (1, "4", "4"),
        ];
        for (cpu, (pkg, sib, llc)) in cpus.iter().enumerate() {
            let t = format!("{CPU_DIR}/cpu{cpu}");
            write(
                r,
                &format!("{t}/topology/physical_package_id"),
                &pkg.to_string(),
            );
            write(r, &format!("{t}/topology/thread_siblings_list"), sib);
            write(r, &format!("{t}/cache/index0/level"), "1");
            write(r, &format!("{t}/cache/index0/type"), "Data");
            write(r, &format!("{t}/cache/index0/shared_cpu_list"), sib);
            write(r, &format!("{t}/cache/index3/level"), "3");
            write(r, &format!("{t}/cache/index3/type"), "Unified");
            write(r, &format!("{t}/cache/index3/shared_cpu_list"), llc);
        }
        d
    }

    #[test]
    fn numa_nodes_with_cpus_and_memory() {
        let d = numa_tree();
        let nodes = numa_topology_from(d.path());
        assert_eq!(
            nodes,
            vec![
                NumaNode {
                    id: 0,
                    cpus: vec![0, 1, 2, 3],
                    mem_bytes: 16384 * 1024
                },
                NumaNode {
                    id: 1,
                    cpus: vec![],
                    mem_bytes: 8 * 1024
                },
            ]
        );
        // Without node directories: one node with every online CPU and all memory.
        let e = tempfile::tempdir().expect("tempdir");
        write(e.path(), &format!("{CPU_DIR}/online"), "0-2\n");
        write(e.path(), "proc/meminfo", "MemTotal:  1024 kB\n");
        let one = numa_topology_from(e.path());
        assert_eq!(
            one,
            vec![NumaNode {
                id: 0,
                cpus: vec![0, 1, 2],
                mem_bytes: 1024 * 1024
            }]
        );
        assert!(!numa_topology().is_empty());
    }

    #[test]
    fn cpu_relations_from_siblings_llc_and_packages() {
        let d = numa_tree();
        let r = d.path();
        assert_eq!(cpu_relation_in(r, 0, 1), CpuRelation::Smt);
        assert_eq!(cpu_relation_in(r, 1, 2), CpuRelation::Package);
        assert_eq!(cpu_relation_in(r, 2, 4), CpuRelation::Socket);
        assert_eq!(cpu_relation_in(r, 0, 9), CpuRelation::Unknown);
        let e = tempfile::tempdir().expect("tempdir");
        for cpu in 0..2 {
            let t = format!("{CPU_DIR}/cpu{cpu}");
            write(e.path(), &format!("{t}/topology/physical_package_id"), "0");
            write(
                e.path(),
                &format!("{t}/topology/thread_siblings_list"),
                &cpu.to_string(),
            );
            write(e.path(), &format!("{t}/cache/index3/level"), "3");
            write(
                e.path(),
                &format!("{t}/cache/index3/shared_cpu_list"),
                "0-1",
            );
        }
        assert_eq!(cpu_relation_in(e.path(), 0, 1), CpuRelation::Llc);
        assert_eq!(CpuRelation::Llc.name(), "llc");
    }

    #[test]
    fn cgroup_memory_headroom_takes_the_tightest_limit_less_usage() {
        use crate::host::tests::put;
        // v1: a job's limit (4 GiB, 1 GiB used of which 256 MiB inactive cache) under an
        // unlimited parent.
        let d = tempfile::tempdir().expect("tempdir");
        let r = d.path();
        put(
            r,
            "proc/self/cgroup",
            "5:cpu,cpuacct:/\n4:memory:/slurm/job1\n0::/\n",
        );
        let job = "sys/fs/cgroup/memory/slurm/job1";
        put(r, &format!("{job}/memory.limit_in_bytes"), "4294967296\n");
        put(r, &format!("{job}/memory.usage_in_bytes"), "1073741824\n");
        put(
            r,
            &format!("{job}/memory.stat"),
            "cache 1\ntotal_inactive_file 268435456\n",
        );
        put(
            r,
            "sys/fs/cgroup/memory/slurm/memory.limit_in_bytes",
            "9223372036854771712\n",
        );
        put(
            r,
            "sys/fs/cgroup/memory/memory.limit_in_bytes",
            "9223372036854771712\n",
        );
        assert_eq!(
            cgroup_memory_headroom(r),
            Some((4 << 30) - (1 << 30) + (256 << 20))
        );
        // a tighter ancestor wins
        put(
            r,
            "sys/fs/cgroup/memory/slurm/memory.limit_in_bytes",
            "2147483648\n",
        );
        put(
            r,
            "sys/fs/cgroup/memory/slurm/memory.usage_in_bytes",
            "1073741824\n",
        );
        assert_eq!(cgroup_memory_headroom(r), Some(1 << 30));

        // v2: "max" is no limit; a container's memory.max is.
        let e = tempfile::tempdir().expect("tempdir");
        let r = e.path();
        put(r, "proc/self/cgroup", "0::/box\n");
        put(r, "sys/fs/cgroup/box/memory.max", "max\n");
        assert_eq!(cgroup_memory_headroom(r), None);
        put(r, "sys/fs/cgroup/box/memory.max", "8589934592\n");
        put(r, "sys/fs/cgroup/box/memory.current", "1073741824\n");
        put(
            r,
            "sys/fs/cgroup/box/memory.stat",
            "anon 1\ninactive_file 0\n",
        );
        assert_eq!(cgroup_memory_headroom(r), Some(7 << 30));
        // no cgroup file at all: no limit known
        let f = tempfile::tempdir().expect("tempdir");
        assert_eq!(cgroup_memory_headroom(f.path()), None);
    }
}
