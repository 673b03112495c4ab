//! Contention made for real, for the tests of conditions and verdicts: a CPU quota in a child
//! cgroup, a busy loop pinned to a CPU, and the lock that keeps such tests from overlapping
//! (they share the machine's CPUs).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// A shell busy loop pinned to `cpu`, killed when dropped.
pub struct Busy(Child);

impl Busy {
    pub fn on(cpu: usize) -> Busy {
        let child = Command::new("taskset")
            .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
            .spawn()
            .expect("taskset (util-linux) runs a busy loop");
        // Let it reach the CPU before anything is measured.
        std::thread::sleep(std::time::Duration::from_millis(300));
        Busy(child)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A child cgroup with a CPU quota, in whichever hierarchy has the cpu controller (v1 here, v2
/// on other hosts), removed when dropped.
pub struct QuotaGroup {
    dir: PathBuf,
    procs: &'static str,
}

impl QuotaGroup {
    pub fn new(cpus: f64) -> Option<QuotaGroup> {
        let membership = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mount_of = |fstype: &str, opt: Option<&str>| {
            mountinfo.lines().find_map(|l| {
                let (left, right) = l.split_once(" - ")?;
                let r: Vec<&str> = right.split_whitespace().collect();
                let ok = r.first() == Some(&fstype)
                    && opt.is_none_or(|o| r.get(2).is_some_and(|s| s.split(',').any(|x| x == o)));
                ok.then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
            })
        };
        let name = format!("hostbench-test-{}", std::process::id());
        let quota = (cpus * 100_000.0) as u64;
        // v1: a child of our own cgroup in the cpu hierarchy.
        let v1 = membership.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
            ctrls
                .split(',')
                .any(|c| c == "cpu")
                .then(|| path.to_string())
        });
        if let (Some(path), Some(mount)) = (v1, mount_of("cgroup", Some("cpu"))) {
            let dir = mount.join(path.trim_start_matches('/')).join(&name);
            std::fs::create_dir_all(&dir).ok()?;
            std::fs::write(dir.join("cpu.cfs_period_us"), "100000").ok()?;
            std::fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string()).ok()?;
            return Some(QuotaGroup {
                dir,
                procs: "tasks",
            });
        }
        // v2: a child of the hierarchy's root, whose subtree_control may enable cpu.
        let mount = mount_of("cgroup2", None)?;
        let _ = std::fs::write(mount.join("cgroup.subtree_control"), "+cpu");
        let dir = mount.join(&name);
        std::fs::create_dir_all(&dir).ok()?;
        let g = QuotaGroup {
            dir,
            procs: "cgroup.procs",
        };
        std::fs::write(g.dir.join("cpu.max"), format!("{quota} 100000")).ok()?;
        Some(g)
    }

    /// hostbench with `args`, started inside the group.
    pub fn run(&self, args: &[&str]) -> std::process::Output {
        let bin = assert_cmd::cargo::cargo_bin("hostbench");
        let script = format!(
            "echo $$ > {} && exec \"$0\" \"$@\"",
            self.dir.join(self.procs).display()
        );
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(&bin)
            .args(args)
            .env(
                "HOSTBENCH_DB",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("tests-history.sqlite"),
            )
            .output()
            .expect("run hostbench in the group")
    }
}

impl Drop for QuotaGroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}
