//! The CPU quota of the cgroup hostbench runs in, and how often it was throttled.
//!
//! A container's `--cpus 1`, a Slurm job's or a systemd unit's CPUQuota is a CFS bandwidth limit:
//! the threads run at full speed and then all stop until the next period, so a 2-thread case under
//! a 1-CPU quota reads half its peak and looks like a slow machine. The limit may sit on any
//! ancestor of our cgroup (a pod's limit above its container's), so every level up to the
//! hierarchy's root is read and the tightest quota wins; throttling is counted at every level that
//! has a quota. Both hierarchies are read: v1 (`cpu.cfs_quota_us`, `cpu.stat` throttled_time in
//! ns) and v2 (`cpu.max`, `cpu.stat` throttled_usec).

use std::path::{Path, PathBuf};

/// The directories of our cgroup and its ancestors in the hierarchy that has the CPU controller.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuCgroup {
    pub version: u8,
    /// Our cgroup's path inside the hierarchy (as `/proc/self/cgroup` names it).
    pub path: String,
    /// Our cgroup's directory first, then each parent up to the mount point.
    levels: Vec<PathBuf>,
}

/// Throttling counters summed over the levels that have a quota.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Throttle {
    pub nr_throttled: u64,
    pub throttled_s: f64,
}

impl CpuCgroup {
    /// Find it from `/proc/self/cgroup` and `/proc/self/mountinfo` under `proc_root`; mount points
    /// under `/sys` are looked up under `sys_root` (so tests can use a fixture tree).
    pub fn locate(proc_root: &Path, sys_root: &Path) -> Result<CpuCgroup, String> {
        let membership = std::fs::read_to_string(proc_root.join("self/cgroup"))
            .map_err(|e| format!("/proc/self/cgroup unreadable: {e}"))?;
        let mountinfo = std::fs::read_to_string(proc_root.join("self/mountinfo"))
            .map_err(|e| format!("/proc/self/mountinfo unreadable: {e}"))?;
        let mounts = parse_mountinfo(&mountinfo);
        let under_sys = |p: &str| match p.strip_prefix("/sys") {
            Some(rest) => sys_root.join(rest.trim_start_matches('/')),
            None => PathBuf::from(p),
        };
        // v1 first: where a v1 cpu hierarchy is mounted, the v2 one has no cpu controller.
        for line in membership.lines() {
            let mut f = line.splitn(3, ':');
            let (_, ctrls, path) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
            if !ctrls.split(',').any(|c| c == "cpu") {
                continue;
            }
            if let Some(m) = mounts
                .iter()
                .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == "cpu"))
            {
                return Ok(Self::at(1, path, &under_sys(&m.mount_point), &m.root));
            }
        }
        let v2 = membership.lines().find_map(|l| l.strip_prefix("0::"));
        match (v2, mounts.iter().find(|m| m.fstype == "cgroup2")) {
            (Some(path), Some(m)) => {
                let cg = Self::at(2, path, &under_sys(&m.mount_point), &m.root);
                let root = cg.levels.last().cloned().unwrap_or_default();
                let controllers =
                    std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
                if controllers.split_whitespace().any(|c| c == "cpu") {
                    Ok(cg)
                } else {
                    Err("the cgroup v2 hierarchy has no cpu controller".into())
                }
            }
            _ => Err("no cgroup hierarchy with the cpu controller is mounted".into()),
        }
    }

    fn at(version: u8, path: &str, mount_point: &Path, mount_root: &str) -> CpuCgroup {
        let rel = path
            .strip_prefix(mount_root.trim_end_matches('/'))
            .unwrap_or(path)
            .trim_start_matches('/');
        let mut levels = Vec::new();
        let mut dir = mount_point.join(rel);
        loop {
            levels.push(dir.clone());
            if dir == mount_point || !dir.pop() || !dir.starts_with(mount_point) {
                break;
            }
        }
        CpuCgroup {
            version,
            path: path.to_string(),
            levels,
        }
    }

    /// The tightest quota on the way up, in CPUs (quota / period); `None` when no level limits.
    pub fn quota_cpus(&self) -> Option<f64> {
        self.levels
            .iter()
            .filter_map(|d| self.quota_at(d))
            .min_by(f64::total_cmp)
    }

    fn quota_at(&self, dir: &Path) -> Option<f64> {
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
        let (quota, period) = if self.version == 1 {
            let q: f64 = read("cpu.cfs_quota_us")?.trim().parse().ok()?;
            let p: f64 = read("cpu.cfs_period_us")?.trim().parse().ok()?;
            (q, p)
        } else {
            let text = read("cpu.max")?;
            let mut f = text.split_whitespace();
            let q: f64 = f.next()?.parse().ok()?; // "max" does not parse: no limit
            (q, f.next()?.parse().ok()?)
        };
        (quota > 0.0 && period > 0.0).then(|| quota / period)
    }

    /// Throttling so far, summed over the levels that carry a quota.
    pub fn throttle(&self) -> Throttle {
        let mut t = Throttle::default();
        for dir in self.levels.iter().filter(|d| self.quota_at(d).is_some()) {
            let Ok(text) = std::fs::read_to_string(dir.join("cpu.stat")) else {
                continue;
            };
            for line in text.lines() {
                let mut f = line.split_whitespace();
                let (Some(k), Some(v)) = (f.next(), f.next().and_then(|v| v.parse::<f64>().ok()))
                else {
                    continue;
                };
                match (self.version, k) {
                    (_, "nr_throttled") => t.nr_throttled += v as u64,
                    (1, "throttled_time") => t.throttled_s += v / 1e9,
                    (2, "throttled_usec") => t.throttled_s += v / 1e6,
                    _ => {}
                }
            }
        }
        t
    }
}

#[derive(Debug)]
struct Mount {
    root: String,
    mount_point: String,
    fstype: String,
    options: String,
}

fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let l: Vec<&str> = left.split_whitespace().collect();
            let r: Vec<&str> = right.split_whitespace().collect();
            Some(Mount {
                root: l.get(3)?.to_string(),
                mount_point: l.get(4)?.to_string(),
                fstype: r.first()?.to_string(),
                options: r.get(2).unwrap_or(&"").to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::tests::put as write;

    #[test]
    fn v1_quota_is_the_tightest_ancestor_and_throttling_is_summed() {
        let d = tempfile::tempdir().unwrap();
        let (proc, sys) = (d.path().join("proc"), d.path().join("sys"));
        write(
            &proc,
            "self/cgroup",
            "4:memory:/x\n2:cpuacct:/\n1:cpu:/job/step\n0::/\n",
        );
        write(
            &proc,
            "self/mountinfo",
            "30 25 0:26 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n\
             31 25 0:27 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
             32 25 0:28 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
        );
        let cpu = sys.join("fs/cgroup/cpu");
        write(&cpu, "cpu.cfs_quota_us", "-1\n");
        write(&cpu, "cpu.cfs_period_us", "100000\n");
        write(&cpu, "job/cpu.cfs_quota_us", "150000\n");
        write(&cpu, "job/cpu.cfs_period_us", "100000\n");
        write(
            &cpu,
            "job/cpu.stat",
            "nr_periods 9\nnr_throttled 3\nthrottled_time 500000000\n",
        );
        write(&cpu, "job/step/cpu.cfs_quota_us", "400000\n");
        write(&cpu, "job/step/cpu.cfs_period_us", "100000\n");
        write(
            &cpu,
            "job/step/cpu.stat",
            "nr_throttled 1\nthrottled_time 250000000\n",
        );
        let cg = CpuCgroup::locate(&proc, &sys).unwrap();
        assert_eq!(cg.version, 1);
        assert_eq!(cg.levels.len(), 3);
        assert_eq!(cg.quota_cpus(), Some(1.5));
        let t = cg.throttle();
        assert_eq!(t.nr_throttled, 4);
        assert!((t.throttled_s - 0.75).abs() < 1e-9);
    }

    #[test]
    fn v2_quota_reads_cpu_max_and_unlimited_is_none() {
        let d = tempfile::tempdir().unwrap();
        let (proc, sys) = (d.path().join("proc"), d.path().join("sys"));
        write(&proc, "self/cgroup", "0::/user.slice/run-1.scope\n");
        write(
            &proc,
            "self/mountinfo",
            "25 22 0:23 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
        );
        let root = sys.join("fs/cgroup");
        write(&root, "cgroup.controllers", "cpuset cpu io memory pids\n");
        write(&root, "user.slice/cpu.max", "max 100000\n");
        write(&root, "user.slice/run-1.scope/cpu.max", "50000 100000\n");
        write(
            &root,
            "user.slice/run-1.scope/cpu.stat",
            "usage_usec 10\nnr_periods 20\nnr_throttled 12\nthrottled_usec 300000\n",
        );
        let cg = CpuCgroup::locate(&proc, &sys).unwrap();
        assert_eq!(cg.version, 2);
        assert_eq!(cg.quota_cpus(), Some(0.5));
        assert_eq!(cg.throttle().nr_throttled, 12);
        assert!((cg.throttle().throttled_s - 0.3).abs() < 1e-9);
        // The same tree without a limit anywhere.
        write(&root, "user.slice/run-1.scope/cpu.max", "max 100000\n");
        assert_eq!(cg.quota_cpus(), None);
        assert_eq!(cg.throttle(), Throttle::default());
    }

    #[test]
    fn a_container_namespace_reads_the_mount_point_itself() {
        let d = tempfile::tempdir().unwrap();
        let (proc, sys) = (d.path().join("proc"), d.path().join("sys"));
        write(&proc, "self/cgroup", "0::/\n");
        write(
            &proc,
            "self/mountinfo",
            "900 800 0:40 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup rw\n",
        );
        let root = sys.join("fs/cgroup");
        write(&root, "cgroup.controllers", "cpu memory\n");
        write(&root, "cpu.max", "200000 100000\n");
        let cg = CpuCgroup::locate(&proc, &sys).unwrap();
        assert_eq!(cg.quota_cpus(), Some(2.0));
        // No cpu controller: an explanation, not an error.
        write(&root, "cgroup.controllers", "memory\n");
        assert!(CpuCgroup::locate(&proc, &sys)
            .unwrap_err()
            .contains("no cpu controller"));
    }
}
