//! The fleet on a real Slurm cluster: three slurmd "nodes", each in its own network namespace on
//! a bridge, one slurmctld, a private munged (tests/slurm/cluster.sh builds and removes it).
//! One test drives every scenario on one cluster, in order: bad requests refused before
//! anything is queued; a fleet with one node's NIC shaped by `tc` (the outlier); busy nodes
//! skipped; a node killed mid-run (its slurmd and everything in its namespace) while the others'
//! results survive; the job cancelled mid-run; two fleets compared in the history.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command as StdCommand, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const SUBNET: &str = "198.51.100";
const NODES: usize = 3;

/// One cluster at a time: two clusters' pairs sharing this machine's CPUs would each measure
/// the other's load (veth throughput is CPU-bound), not the shaped link.
static CLUSTER_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn cluster_turn() -> std::sync::MutexGuard<'static, ()> {
    CLUSTER_TURN.lock().unwrap_or_else(|e| e.into_inner())
}

struct Cluster {
    state: PathBuf,
    prefix: String,
    nodes: usize,
}

impl Cluster {
    fn script() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slurm/cluster.sh")
    }

    /// None (and the reason on stderr) where this machine cannot host the cluster, which CI
    /// must always be able to.
    fn up() -> Option<Self> {
        Self::up_with("hbt", NODES, SUBNET)
    }

    /// A cluster of `nodes` nodes on `subnet`, its namespaces and state named from `tag` and
    /// this process, so two tests of this binary can each have one.
    fn up_with(tag: &str, nodes: usize, subnet: &str) -> Option<Self> {
        Self::up_with_conf(tag, nodes, subnet, |_| String::new())
    }

    /// As `up_with`, with lines added to slurm.conf: `extra` is given the state directory
    /// (created first, so it can hold the test's own files) and returns the lines.
    fn up_with_conf(
        tag: &str,
        nodes: usize,
        subnet: &str,
        extra: impl FnOnce(&Path) -> String,
    ) -> Option<Self> {
        let missing: Vec<&str> = [
            "sbatch",
            "slurmctld",
            "slurmd",
            "munged",
            "mungekey",
            "nsenter",
            "unshare",
            "ip",
            "tc",
        ]
        .into_iter()
        .filter(|t| !common::on_path(t))
        .collect();
        let root = common::is_root();
        if !missing.is_empty() || !root {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the fleet tests: root {root}, missing {missing:?} (scripts/test \
                 installs slurm-wlm and munge)"
            );
            eprintln!("skipping the Slurm fleet test: root {root}, missing {missing:?}");
            return None;
        }
        let pid = std::process::id();
        let me = Cluster {
            state: PathBuf::from(format!("/tmp/{tag}-{pid}")),
            prefix: format!("{tag}{pid}"),
            nodes,
        };
        std::fs::create_dir_all(&me.state).expect("state dir");
        let conf = me.state.join("extra.conf");
        std::fs::write(&conf, extra(&me.state)).expect("extra conf");
        let out = StdCommand::new("bash")
            .arg(Self::script())
            .args(["up", &me.state.display().to_string(), &me.prefix])
            .arg(nodes.to_string())
            .arg(subnet)
            .env("CLUSTER_EXTRA_CONF", &conf)
            .output()
            .expect("cluster.sh runs");
        assert!(
            out.status.success(),
            "cluster up: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Some(me)
    }

    fn ns(&self, node: &str) -> String {
        match node {
            "ctl" => format!("{}ctl", self.prefix),
            n => format!("{}n{}", self.prefix, n.trim_start_matches("node")),
        }
    }

    /// A command run as a Slurm client: in the controller's namespace, with this cluster's
    /// configuration (the root namespace has no route to the cluster's subnet, by design).
    fn client(&self, program: &Path) -> StdCommand {
        let mut c = StdCommand::new("nsenter");
        c.arg(format!("--net=/run/netns/{}", self.ns("ctl")));
        c.arg(program);
        c.env("SLURM_CONF", self.state.join("slurm.conf"));
        c.env("HOSTBENCH_DB", self.state.join("default-history.sqlite"));
        c
    }

    fn hostbench(&self) -> StdCommand {
        self.client(&assert_cmd::cargo::cargo_bin("hostbench"))
    }

    /// `fleet run ARGS` in the background, its stderr kept for `wait_child`.
    fn spawn_fleet(&self, args: &[&str]) -> Child {
        self.hostbench()
            .args(["fleet", "run"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("fleet run")
    }

    fn slurm(&self, tool: &str, args: &[&str]) -> String {
        let out = self
            .client(Path::new(tool))
            .args(args)
            .output()
            .expect("slurm tool");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Every process in `node`'s network namespace: its slurmd, step daemons and their tasks.
    /// `sbatch --wrap CMD` on `node`, its output thrown away: the job id.
    fn job_on(&self, node: &str, cmd: &str) -> String {
        self.slurm(
            "sbatch",
            &["--parsable", "-w", node, "-o", "/dev/null", "--wrap", cmd],
        )
    }

    fn pids_in(&self, node: &str) -> Vec<i32> {
        let want = std::fs::metadata(format!("/run/netns/{}", self.ns(node)))
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .expect("netns");
        let mut pids = Vec::new();
        for e in std::fs::read_dir("/proc").expect("proc").flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let link = std::fs::read_link(format!("/proc/{pid}/ns/net"));
            if link.is_ok_and(|l| l.to_string_lossy() == format!("net:[{want}]")) {
                pids.push(pid);
            }
        }
        pids
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = StdCommand::new("bash")
            .arg(Self::script())
            .args(["down", &self.state.display().to_string(), &self.prefix])
            .arg(self.nodes.to_string())
            .status();
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

/// Each step's time on stderr (seen with `--nocapture`, and in a failing test's output): the
/// cluster tests are the suite's longest, and this says where their time goes.
struct Steps {
    test: &'static str,
    name: &'static str,
    start: Instant,
}

impl Steps {
    fn new(test: &'static str) -> Self {
        Steps {
            test,
            name: "cluster up",
            start: Instant::now(),
        }
    }

    fn next(&mut self, name: &'static str) {
        let took = self.start.elapsed().as_secs_f64();
        eprintln!("[{}] {}: {took:.1} s", self.test, self.name);
        self.name = name;
        self.start = Instant::now();
    }
}

impl Drop for Steps {
    fn drop(&mut self) {
        self.next("");
    }
}

fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn json(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The one fleet directory under `out`.
fn fleet_dir(out: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .expect("fleet out")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

fn status(dir: &Path, rel: &str) -> Value {
    json(&dir.join(rel))
}

/// What a pair's run left out and what its client and server said, for a failed assertion: a
/// pair that exits 3 (a case skipped) counts as measured, so its record can be missing.
fn pair_story(dir: &Path, from: &str, to: &str) -> String {
    let net = dir.join("net");
    let run = std::fs::read(net.join(format!("{from}--{to}.json")))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .unwrap_or_default();
    let log = |side: &str| {
        std::fs::read_to_string(net.join(format!("{from}--{to}.{side}.log"))).unwrap_or_default()
    };
    let skipped = match &run["skipped"] {
        Value::Null => "none".to_string(),
        v => v.to_string(),
    };
    format!(
        "{from}->{to}: skipped {skipped}\nclient log:\n{}\nserver log:\n{}",
        log("client"),
        log("server")
    )
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn wait_child(child: &mut Child, limit: Duration) -> Output {
    let t0 = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("fleet run did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut out = Output {
        status: child.wait().expect("status"),
        stdout: Vec::new(),
        stderr: Vec::new(),
    };
    use std::io::Read as _;
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_end(&mut out.stderr);
    }
    out
}

#[test]
fn fleet_on_a_three_node_slurm_cluster() {
    let _turn = cluster_turn();
    let mut steps = Steps::new("3 nodes");
    let Some(cluster) = Cluster::up() else {
        return;
    };
    let work = tempfile::tempdir().expect("tmp");
    let db = work.path().join("history.sqlite");
    let db_arg = db.display().to_string();

    steps.next("bad requests");
    // Bad requests: refused in one line with exit code 2, before anything is queued.
    for (args, needle) in [
        (vec!["--nodes", "5"], "partition all has 3 nodes"),
        (
            vec!["--nodes", "2", "--partition", "nope"],
            "no such partition",
        ),
        (
            vec!["--nodes", "2", "--out", "/proc/hostbench-fleet"],
            "cannot be written",
        ),
        (
            vec!["--nodes", "2", "--nodelist", "node[2-9]"],
            "not in partition",
        ),
        (vec!["--nodes", "x"], "--nodes 'x'"),
        (
            vec!["--nodes", "2", "--net-pairs", "star"],
            "--net-pairs 'star'",
        ),
    ] {
        let out = cluster
            .hostbench()
            .args(["fleet", "run"])
            .args(&args)
            .args(["--out", &work.path().join("bad").display().to_string()])
            .output()
            .expect("run");
        // The later --out wins; the /proc case repeats its own after ours.
        let out = if args.contains(&"/proc/hostbench-fleet") {
            cluster
                .hostbench()
                .args(["fleet", "run"])
                .args(&args)
                .output()
                .expect("run")
        } else {
            out
        };
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: '{needle}' not in {err}");
    }
    assert!(
        cluster.slurm("squeue", &["-h"]).trim().is_empty(),
        "a refused fleet queued nothing"
    );

    steps.next("1. shaped fleet");
    // 1. Three nodes, node3's NIC shaped to 200 Mbit/s: measured, paired in a ring, reported.
    let shaped = StdCommand::new("ip")
        .args(["netns", "exec", &cluster.ns("node3")])
        .args([
            "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "200mbit",
        ])
        .args(["burst", "64kb", "latency", "50ms"])
        .status()
        .expect("tc");
    assert!(shaped.success());
    let out_a = work.path().join("fleet-a");
    let scratch = cluster.state.join("scratch");
    std::fs::create_dir_all(&scratch).expect("scratch");
    let out = cluster
        .hostbench()
        .args(["fleet", "run", "--nodes", "3"])
        .args([
            "--profile",
            "quick",
            "--only",
            "cpu,disk",
            "--scale",
            "0.05",
        ])
        .args(["--dir", &scratch.display().to_string()])
        .args(["--out", &out_a.display().to_string(), "--db", &db_arg])
        .output()
        .expect("fleet run");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("submitted") && err.contains("nodes 3 done"),
        "{err}"
    );
    let dir_a = fleet_dir(&out_a);
    let plan = json(&dir_a.join("plan.json"));
    assert_eq!(
        plan["nodes"],
        serde_json::json!(["node1", "node2", "node3"])
    );
    assert_eq!(plan["rounds"].as_array().map(Vec::len), Some(3), "{plan}");
    let token = std::fs::metadata(dir_a.join("token")).expect("token");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&token.permissions()) & 0o777,
        0o600
    );
    for n in ["node1", "node2", "node3"] {
        assert_eq!(
            status(&dir_a, &format!("nodes/{n}/status.json"))["status"],
            "ok"
        );
        let run = json(&dir_a.join(format!("nodes/{n}/run.json")));
        common::assert_run_contract(&run);
        assert_eq!(run["host"]["hostname"], n, "each node measured itself");
        // Disk cases ran in the node-local scratch directory, never in the shared fleet dir.
        let argv = run["invocation"]["command_line"].to_string();
        assert!(
            argv.contains(&format!("\"--disk-dir\",\"{}\"", scratch.display())),
            "{argv}"
        );
        let records = run["records"].as_array().expect("records");
        assert!(
            records.iter().any(|r| r["benchmark"] == "disk.throughput"),
            "{n}"
        );
    }
    let leftovers: Vec<_> = std::fs::read_dir(&scratch)
        .expect("scratch")
        .flatten()
        .collect();
    assert!(leftovers.is_empty(), "scratch files removed: {leftovers:?}");
    let mut tput = std::collections::HashMap::new();
    for (from, to) in [("node1", "node2"), ("node2", "node3"), ("node3", "node1")] {
        let st = status(&dir_a, &format!("net/{from}--{to}.status.json"));
        assert_eq!(st["status"], "ok", "{from}->{to}: {st}");
        let run = json(&dir_a.join(format!("net/{from}--{to}.json")));
        assert_eq!(run["host"]["hostname"], from);
        let rec = run["records"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["benchmark"] == "net.throughput"))
            .expect("throughput record")
            .clone();
        let n = to.trim_start_matches("node");
        assert_eq!(
            rec["params"]["target"],
            format!("{SUBNET}.{n}"),
            "over the bridge"
        );
        tput.insert(from, rec["value"].as_f64().expect("value"));
    }
    // The shaper is a hard limit: node3's sends cannot exceed 200 Mbit/s (plus burst).
    assert!(tput["node3"] < 4e8, "{tput:?}");
    // The fleet report: every node ok, the matrix, node3 the network outlier.
    let doc = json(&dir_a.join("fleet.json"));
    assert_eq!(doc["schema"], "hostbench/fleet/v1");
    assert_eq!(
        doc["fleet_id"],
        dir_a.file_name().expect("id").to_string_lossy().as_ref()
    );
    for n in doc["nodes"].as_array().expect("nodes") {
        assert_eq!(n["status"], "ok", "{n}");
        assert!(
            n["run"].as_str().is_some_and(|r| r.ends_with("run.json")),
            "{n}"
        );
    }
    let matrix = doc["net_matrix"].as_array().expect("matrix");
    let cell = |from: &str, to: &str, metric: &str| {
        matrix
            .iter()
            .find(|c| c["from"] == from && c["to"] == to && c["metric"] == metric)
            .and_then(|c| c["value"].as_f64())
    };
    for (from, to) in [("node1", "node2"), ("node2", "node3"), ("node3", "node1")] {
        assert_eq!(
            cell(from, to, "throughput"),
            Some(tput[from]),
            "{}",
            pair_story(&dir_a, from, to)
        );
        assert!(
            cell(from, to, "rtt").is_some_and(|v| v > 0.0),
            "{}",
            pair_story(&dir_a, from, to)
        );
    }
    let net = doc["figures"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["id"] == "net_tcp"))
        .expect("the network figure");
    let outliers = net["outliers"].as_array().expect("outliers");
    let node3 = outliers
        .iter()
        .find(|o| o["node"] == "node3")
        .unwrap_or_else(|| panic!("node3 is the network outlier: {net}"));
    assert!(
        node3["why"].as_str().is_some_and(|w| !w.is_empty()),
        "{node3}"
    );
    // Only node3's egress is shaped, and every pair measured both ways: the matrix pins it on
    // node3, and no healthy node is a worse network outlier.
    // Its sending side for certain; its receiving side too where the shaped egress also holds
    // back the ACKs of what it receives (at this host's veth rates, some runs).
    assert_network_suspect(&dir_a, "node3", &["send", "both"]);
    assert_eq!(
        matrix.iter().filter(|c| c["direction"] == "recv").count(),
        3,
        "the other direction of every pair"
    );

    steps.next("1b-1c. half and third");
    // 1b-1c. The slowdowns operators meet (issue 52): a port at half or a third of its healthy
    // rate (a 25 GbE port trained at 10 GbE is 2.5 ×), shaped from the healthy rate measured
    // just before (the one pair without node3 in run 1), not from a figure written here. On
    // three nodes: half, both ways, every pair measured (`all`), then a third, egress only, in
    // a ring; the five-node test takes the other two corners (a third both ways in a ring, half
    // egress only with all pairs), so each slowdown, each direction and each schedule is
    // tested on both cluster sizes between the two tests.
    tc(&cluster.ns("node3"), &["del", "dev", "eth0", "root"]);
    let healthy = healthy_rate(&dir_a, &["node3"]);
    shape(&cluster, "node2", Some(healthy / 2.0), true);
    let both = fleet_net_run(&cluster, 3, "all", &work.path().join("fleet-half"));
    shape(&cluster, "node2", None, true);
    assert_slow_node_at(&both, "node2", &["both"], 2.0);
    shape(&cluster, "node1", Some(healthy / 3.0), false);
    let egress = fleet_net_run(&cluster, 3, "ring", &work.path().join("fleet-third"));
    shape(&cluster, "node1", None, false);
    // Its sending side for certain; its receiving side too where the shaped egress also holds
    // back the ACKs of what it receives.
    assert_network_suspect(&egress, "node1", &["send", "both"]);

    steps.next("1d. fleet check");
    // 1d. `fleet check` (issue 50): node2's counters from a fixture tree with an uncorrected
    // DIMM error, node3 unable to leave its verdict (a directory where its check.json goes):
    // node2 fails with the same reason its own check gives and is drained with it, node3 is
    // unknown and named, node1 passes.
    let roots = work.path().join("roots");
    edac_fault(&roots, "node2", 3);
    let fc_out = work.path().join("fleet-check");
    std::fs::create_dir_all(fc_out.join("fc3/nodes/node3/check.json")).expect("mkdir");
    let (out, doc) = fleet_check(
        &cluster,
        &roots,
        &fc_out,
        &["--nodes", "3", "--fleet-id", "fc3", "--drain"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    assert_eq!(
        first,
        "FAIL fleet check, level quick, 3 nodes: fail node2; unknown node3",
        "{}",
        text(&out)
    );
    assert_verdicts(
        &doc,
        &[("node1", "pass"), ("node2", "fail"), ("node3", "unknown")],
    );
    let row = |n: &str| {
        doc["nodes"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["node"] == n))
            .cloned()
            .unwrap_or_default()
    };
    assert!(
        row("node2")["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("1 uncorrectable memory error(s) on mc0")),
        "{doc}"
    );
    assert_eq!(row("node3")["basis"], "no answer", "{doc}");
    assert!(
        row("node3")["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("node3: no verdict: ")),
        "{doc}"
    );
    let reasons = cluster.slurm("sinfo", &["-R", "-h", "-o", "%n|%E"]);
    assert!(
        reasons
            .lines()
            .any(|l| l.starts_with("node2|hostbench: 1 uncorrectable memory error(s) on mc0")),
        "{reasons}"
    );
    assert!(
        !reasons.contains("node1|") && !reasons.contains("node3|"),
        "{reasons}"
    );
    let _ = cluster.slurm("scontrol", &["update", "nodename=node2", "state=resume"]);
    wait_for("node2 idle again", Duration::from_secs(60), || {
        cluster
            .slurm("sinfo", &["-h", "-n", "node2", "-o", "%T"])
            .trim()
            == "idle"
    });

    steps.next("2. busy node");
    // 2. A node busy with another job: --busy skip measures the idle ones and says why.
    let blocker = cluster.job_on("node1", "sleep 300");
    let blocker = blocker.trim().to_string();
    wait_for("node1 allocated", Duration::from_secs(30), || {
        cluster
            .slurm("sinfo", &["-h", "-n", "node1", "-o", "%T"])
            .trim()
            .starts_with("alloc")
    });
    let out_busy = work.path().join("fleet-busy");
    let out = cluster
        .hostbench()
        .args([
            "fleet",
            "run",
            "--nodes",
            "3",
            "--busy",
            "skip",
            "--net-pairs",
            "none",
        ])
        .args([
            "--profile",
            "quick",
            "--only",
            "cpu",
            "--scale",
            "0.02",
            "--no-history",
        ])
        .args(["--out", &out_busy.display().to_string()])
        .output()
        .expect("fleet run");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let dir_busy = fleet_dir(&out_busy);
    let plan = json(&dir_busy.join("plan.json"));
    assert_eq!(plan["nodes"], serde_json::json!(["node2", "node3"]));
    let skipped = &plan["not_measured"][0];
    assert_eq!(skipped["node"], "node1");
    assert!(
        skipped["reason"]
            .as_str()
            .is_some_and(|r| r.contains("busy")),
        "{plan}"
    );
    let doc = json(&dir_busy.join("fleet.json"));
    assert_eq!(
        doc["not_measured"][0]["node"], "node1",
        "the report lists it: {doc}"
    );
    cluster.slurm("scancel", &[&blocker]);
    wait_for("node1 idle", Duration::from_secs(30), || {
        cluster
            .slurm("sinfo", &["-h", "-n", "node1", "-o", "%T"])
            .trim()
            == "idle"
    });

    steps.next("3. node dies");
    // 3. node2 dies mid-run (slurmd, step daemon and run killed): the others are kept, exit 3.
    let out_b = work.path().join("fleet-b");
    let mut child = cluster.spawn_fleet(&[
        "--nodes",
        "3",
        "--profile",
        "quick",
        "--only",
        "cpu",
        "--scale",
        "0.1",
        "--out",
        &out_b.display().to_string(),
        "--db",
        &db_arg,
    ]);
    wait_for("node2's first results", Duration::from_secs(120), || {
        std::fs::read_dir(&out_b)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok)
            .is_some_and(|e| e.path().join("nodes/node2/run.json").exists())
    });
    for pid in cluster.pids_in("node2") {
        // SAFETY: kill(2) on pids just read from /proc, all in node2's namespace, which this
        // test created.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    let out = wait_child(&mut child, Duration::from_secs(240));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let dir_b = fleet_dir(&out_b);
    let dead = status(&dir_b, "nodes/node2/status.json");
    assert_eq!(dead["status"], "failed", "{dead}");
    assert!(
        dead["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{dead}"
    );
    assert!(
        dir_b.join("nodes/node2/run.json").exists(),
        "its partial results stay"
    );
    for n in ["node1", "node3"] {
        assert_eq!(
            status(&dir_b, &format!("nodes/{n}/status.json"))["status"],
            "ok"
        );
        let run = json(&dir_b.join(format!("nodes/{n}/run.json")));
        assert!(run["finished_at"].is_string());
    }
    for (from, to) in [("node1", "node2"), ("node2", "node3")] {
        let st = status(&dir_b, &format!("net/{from}--{to}.status.json"));
        assert_eq!(st["status"], "skipped", "{st}");
    }
    assert_eq!(
        status(&dir_b, "net/node3--node1.status.json")["status"],
        "ok"
    );
    let doc = json(&dir_b.join("fleet.json"));
    let node2 = doc["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["node"] == "node2"))
        .expect("node2 row");
    assert_eq!(node2["status"], "failed", "{node2}");
    assert!(
        node2["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{node2}"
    );

    steps.next("4. job cancelled");
    // 4. The job cancelled mid-run: what the nodes measured stays, each node says why it ended.
    //    node2 is down now, so Slurm allocates the other two.
    let out_c = work.path().join("fleet-c");
    let mut child = cluster.spawn_fleet(&[
        "--nodes",
        "2",
        "--profile",
        "quick",
        "--only",
        "cpu",
        "--scale",
        "0.5",
        "--net-pairs",
        "none",
        "--no-history",
        "--out",
        &out_c.display().to_string(),
    ]);
    let mut dir_c = PathBuf::new();
    wait_for("a node's first results", Duration::from_secs(120), || {
        let Some(d) = std::fs::read_dir(&out_c)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok)
        else {
            return false;
        };
        dir_c = d.path();
        ["node1", "node3"]
            .iter()
            .any(|n| dir_c.join(format!("nodes/{n}/run.json")).exists())
    });
    let plan = json(&dir_c.join("plan.json"));
    let job = plan["job_id"].as_str().expect("job id").to_string();
    cluster.slurm("scancel", &[&job]);
    let out = wait_child(&mut child, Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let plan = json(&dir_c.join("plan.json"));
    assert_eq!(plan["nodes"], serde_json::json!(["node1", "node3"]));
    let mut kept = 0;
    for n in ["node1", "node3"] {
        let st = status(&dir_c, &format!("nodes/{n}/status.json"));
        assert_eq!(st["status"], "failed", "{st}");
        assert!(st["reason"].as_str().is_some_and(|r| !r.is_empty()), "{st}");
        if let Ok(bytes) = std::fs::read(dir_c.join(format!("nodes/{n}/run.json"))) {
            let run: Value = serde_json::from_slice(&bytes).expect("a whole run.json");
            kept += run["records"].as_array().map_or(0, Vec::len);
        }
    }
    assert!(kept > 0, "the measured cases survive the cancellation");

    steps.next("5. history");
    // 5. The history holds both fleets per node; they compare node by node and by median.
    let list = common::hostbench()
        .args(["history", "list", "--db", &db_arg])
        .output()
        .expect("list");
    let listed = String::from_utf8_lossy(&list.stdout);
    let (id_a, id_b) = (
        dir_a
            .file_name()
            .expect("id")
            .to_string_lossy()
            .into_owned(),
        dir_b
            .file_name()
            .expect("id")
            .to_string_lossy()
            .into_owned(),
    );
    assert!(listed.contains(&format!("{id_a} / node3")), "{listed}");
    assert!(listed.contains(&format!("{id_b} / node1")), "{listed}");
    let cmp = common::hostbench()
        .args([
            "history",
            "compare",
            &format!("fleet:{id_a}"),
            "fleet:latest",
        ])
        .args(["--db", &db_arg, "--threshold", "1000"])
        .output()
        .expect("compare");
    let shown = String::from_utf8_lossy(&cmp.stdout);
    assert_eq!(cmp.status.code(), Some(0), "{}", text(&cmp));
    assert!(
        shown.contains("node1") && shown.contains("node3"),
        "{shown}"
    );
    assert!(shown.contains("Fleet medians"), "{shown}");
}

/// `tc qdisc ARGS` in network namespace `ns`.
fn tc(ns: &str, args: &[&str]) {
    let ok = StdCommand::new("ip")
        .args(["netns", "exec", ns, "tc", "qdisc"])
        .args(args)
        .status()
        .expect("tc");
    assert!(ok.success(), "tc {args:?} in {ns}");
}

/// Shape `node`'s egress (and with `both`, the bridge port's egress towards it) to `rate` bit/s
/// with a token bucket; `None` takes the shaping off. The bucket holds 4 ms at the rate (at
/// least 64 KiB): a kernel of 250 Hz refills it that often, so a smaller one caps the flow under
/// the rate asked for, and a larger one lets a short test's first burst through above it.
fn shape(cluster: &Cluster, node: &str, rate: Option<f64>, both: bool) {
    let port = format!("vn{}", node.trim_start_matches("node"));
    let mut devs = vec![(cluster.ns(node), "eth0")];
    if both {
        devs.push((cluster.ns("ctl"), port.as_str()));
    }
    for (ns, dev) in devs {
        match rate {
            Some(bps) => {
                let rate = format!("{}kbit", (bps / 1e3).round() as u64);
                let burst = format!("{}", ((bps / 8.0 / 250.0) as u64).max(64 * 1024));
                tc(
                    &ns,
                    &[
                        "add", "dev", dev, "root", "tbf", "rate", &rate, "burst", &burst,
                    ]
                    .into_iter()
                    .chain(["latency", "50ms"])
                    .collect::<Vec<_>>(),
                );
            }
            None => tc(&ns, &["del", "dev", dev, "root"]),
        }
    }
}

/// The healthy TCP rate of fleet `dir`: the median of its measured flows (both directions of
/// every pair) that involve none of `leave_out`, the nodes shaped in that run.
fn healthy_rate(dir: &Path, leave_out: &[&str]) -> f64 {
    let doc = json(&dir.join("fleet.json"));
    let mut v: Vec<f64> = doc["net_matrix"]
        .as_array()
        .expect("matrix")
        .iter()
        .filter(|c| c["metric"] == "throughput")
        .filter(|c| leave_out.iter().all(|n| c["from"] != *n && c["to"] != *n))
        .filter_map(|c| c["value"].as_f64())
        .collect();
    assert!(!v.is_empty(), "no healthy flow in {}", dir.display());
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `fleet run` on the cluster's first `nodes` nodes with the network schedule `pairs` and the
/// least per-node work (the test is of the network phase), into `out`; its fleet directory.
/// Scale 0.4 makes each pair's test 0.2 s: at 0.05 s (scale 0.02) a pair's two directions
/// differed by 20 % here and a shaper's first bucket was a fifth of the test, so a port at half
/// its rate read 1.5 × slow. The per-node phase is the disk's quick cases (under a second of
/// CPU each at this scale): the CPU's took 9 s of CPU per node, and five nodes on two CPUs
/// spent most of each run there.
fn fleet_net_run(cluster: &Cluster, nodes: usize, pairs: &str, out: &Path) -> PathBuf {
    let scratch = cluster.state.join("scratch");
    std::fs::create_dir_all(&scratch).expect("scratch");
    let run = cluster
        .hostbench()
        .args([
            "fleet",
            "run",
            "--nodes",
            &nodes.to_string(),
            "--net-pairs",
            pairs,
        ])
        .args(["--profile", "quick", "--only", "disk", "--scale", "0.4"])
        .args(["--dir", &scratch.display().to_string()])
        .args(["--no-history", "--out", &out.display().to_string()])
        .output()
        .expect("fleet run");
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    fleet_dir(out)
}

/// The fleet report in `dir` names `node` alone as the network suspect, in one of `roles`; no
/// healthy node is a worse network outlier (not even a mild one); fleet.md and fleet.html say so.
fn assert_network_suspect(dir: &Path, node: &str, roles: &[&str]) {
    assert_slow_node(dir, node, roles, None);
}

/// As `assert_network_suspect`, for a node shaped to 1/`slowdown` of the healthy rate: named
/// alone, or, where this run's healthy flows spread too widely to tell that slowdown (the
/// attribution's own statement: "only a slowdown of X × or more can be told", X above the
/// slowdown applied), `undecided` about that node alone, never about or naming another.
fn assert_slow_node_at(dir: &Path, node: &str, roles: &[&str], slowdown: f64) {
    assert_slow_node(dir, node, roles, Some(slowdown));
}

fn assert_slow_node(dir: &Path, node: &str, roles: &[&str], slowdown: Option<f64>) {
    // The matrix as a user reads it, for the log of a failure (shown with --nocapture).
    eprintln!(
        "{}",
        std::fs::read_to_string(dir.join("fleet.md")).unwrap_or_default()
    );
    let doc = json(&dir.join("fleet.json"));
    let net = doc["figures"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["id"] == "net_tcp"))
        .expect("the network figure");
    let named = suspects_of(net);
    let undecided = net["attribution"]["undecided"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    // The smallest slowdown the run's spread could tell, where it says so about `node` alone.
    let could_tell = (named.is_empty() && undecided.len() == 1)
        .then(|| &undecided[0])
        .filter(|u| u["candidates"] == serde_json::json!([node]))
        .and_then(|u| {
            let t = u["text"].as_str()?;
            let after = t.split("only a slowdown of ").nth(1)?;
            after.split(' ').next()?.parse::<f64>().ok()
        });
    match (slowdown, could_tell) {
        (Some(applied), Some(needed)) if needed > applied => {
            eprintln!(
                "{node} at 1/{applied} undecided: this run's spread needed {needed} × ({})",
                undecided[0]["text"]
            );
            return assert_no_healthy_outlier(dir, net, node, "undecided");
        }
        _ => assert!(
            named.len() == 1 && named[0].0 == node && roles.contains(&named[0].1.as_str()),
            "{net}"
        ),
    }
    assert_no_healthy_outlier(dir, net, node, "suspect");
}

/// No node but `node` is a worse network outlier; fleet.md and fleet.html say what the
/// attribution said.
fn assert_no_healthy_outlier(dir: &Path, net: &Value, node: &str, said: &str) {
    // No healthy node is a worse outlier. Where rounds of two pairs share this host's CPUs and
    // read 15-20 % under a lone pair's round, the fleet compares each flow with its own round
    // shape first (the report's measurement, not this check, takes that in).
    let outliers = net["outliers"].as_array().expect("outliers");
    assert!(
        outliers
            .iter()
            .all(|o| o["node"] == node || o["worse"] == false),
        "a healthy node is a worse outlier: {net}"
    );
    assert!(
        outliers
            .iter()
            .any(|o| o["node"] == node && o["worse"] == true),
        "{net}"
    );
    for f in ["fleet.md", "fleet.html"] {
        let text = std::fs::read_to_string(dir.join(f)).expect(f);
        assert!(text.contains(&format!("{said}: {node}")), "{f}: {text}");
    }
}

/// Node ids of a fleet figure's attribution suspects, with their role.
fn suspects_of(net: &Value) -> Vec<(String, String)> {
    net["attribution"]["suspects"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter_map(|x| Some((x["node"].as_str()?.into(), x["role"].as_str()?.into())))
                .collect()
        })
        .unwrap_or_default()
}

/// Issue 37 on a larger ring, at the slowdowns of issue 52: five nodes, first healthy (no
/// suspect, no worse outlier: the rate to shape from), then node2 at a third of that rate both
/// ways in a ring (each node in two pairs, node2's both slow, its neighbours' other pair fast,
/// rounds of two pairs and one of one), then node4 at half the rate on its egress only with
/// every pair measured: each time that node alone is the suspect and no healthy node is a
/// worse network outlier. (The three-node test takes the other corners.)
#[test]
fn fleet_names_a_node_slow_both_ways_on_a_ring_of_five() {
    let _turn = cluster_turn();
    let mut steps = Steps::new("ring of 5");
    let Some(cluster) = Cluster::up_with("hbr", 5, "203.0.113") else {
        return;
    };
    let work = tempfile::tempdir().expect("tmp");
    steps.next("healthy run");
    let healthy = fleet_net_run(&cluster, 5, "ring", &work.path().join("fleet-healthy"));
    let doc = json(&healthy.join("fleet.json"));
    let net = doc["figures"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["id"] == "net_tcp"))
        .expect("the network figure");
    assert!(
        net["attribution"]["suspects"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{net}"
    );
    assert!(
        net["outliers"]
            .as_array()
            .expect("outliers")
            .iter()
            .all(|o| o["worse"] == false),
        "a healthy fleet has no worse network outlier: {net}"
    );
    let rate = healthy_rate(&healthy, &[]);

    steps.next("a third, both ways, ring");
    shape(&cluster, "node2", Some(rate / 3.0), true);
    let third = fleet_net_run(&cluster, 5, "ring", &work.path().join("fleet-third"));
    shape(&cluster, "node2", None, true);
    assert_network_suspect(&third, "node2", &["both"]);

    steps.next("half, egress, all pairs");
    shape(&cluster, "node4", Some(rate / 2.0), false);
    let half = fleet_net_run(&cluster, 5, "all", &work.path().join("fleet-half"));
    shape(&cluster, "node4", None, false);
    assert_slow_node_at(&half, "node4", &["send", "both"], 2.0);

    // `fleet check` on five nodes (issue 50): node4's counters with an uncorrected DIMM error:
    // node4 alone fails, with its own check's reason; the other four pass.
    steps.next("fleet check");
    let roots = work.path().join("roots");
    edac_fault(&roots, "node4", 5);
    let (out, doc) = fleet_check(&cluster, &roots, &work.path().join("fleet-check"), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .starts_with("FAIL fleet check, level quick, 5 nodes: fail node4\n"),
        "{}",
        text(&out)
    );
    assert_verdicts(
        &doc,
        &[
            ("node1", "pass"),
            ("node2", "pass"),
            ("node3", "pass"),
            ("node4", "fail"),
            ("node5", "pass"),
        ],
    );
}

/// A fixture tree per node under `roots` (`roots/nodeN`, empty: nothing to read, nothing
/// judged) for `nodes` nodes, and in `faulty`'s one uncorrected error on DIMM C2 of mc0.
fn edac_fault(roots: &Path, faulty: &str, nodes: usize) {
    for i in 1..=nodes {
        std::fs::create_dir_all(roots.join(format!("node{i}"))).expect("root");
    }
    let mc = roots.join(faulty).join("sys/devices/system/edac/mc/mc0");
    std::fs::create_dir_all(mc.join("dimm2")).expect("mkdir");
    for (file, value) in [
        ("ce_count", "0"),
        ("ue_count", "1"),
        ("dimm2/dimm_ce_count", "0"),
        ("dimm2/dimm_ue_count", "1"),
        ("dimm2/dimm_label", "CPU1_DIMM_C2"),
    ] {
        std::fs::write(mc.join(file), format!("{value}\n")).expect("write");
    }
}

/// `fleet check --level quick --only cpu` with every node's counters from `roots/<its name>`
/// (`HOSTBENCH_HEALTH_ROOT=roots/%n`) and an expectation file that holds only the counters (the
/// figure floors at 1 % of peak: several nodes share this host's two CPUs), into `out`, plus
/// `args`: its output and its table (--json).
fn fleet_check(cluster: &Cluster, roots: &Path, out: &Path, args: &[&str]) -> (Output, Value) {
    let expect = out.with_extension("expect.toml");
    std::fs::write(&expect, "[expect]\npeak_share = 0.01\n").expect("expect");
    let table = out.with_extension("json");
    let run = cluster
        .hostbench()
        .env("HOSTBENCH_HEALTH_ROOT", roots.join("%n"))
        .args(["fleet", "check", "--level", "quick", "--only", "cpu"])
        .args([
            "--max-time",
            "120s",
            "--expect",
            &expect.display().to_string(),
        ])
        .args(["--out", &out.display().to_string()])
        .args(["--json", &table.display().to_string()])
        .args(args)
        .output()
        .expect("fleet check");
    let doc = if table.exists() {
        json(&table)
    } else {
        Value::Null
    };
    if !doc.is_null() {
        common::assert_valid("fleet-check", &doc);
    }
    (run, doc)
}

/// The fleet check table has these nodes with these verdicts, in any order, and no other.
fn assert_verdicts(doc: &Value, want: &[(&str, &str)]) {
    let mut got: Vec<(String, String)> = doc["nodes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    (
                        r["node"].as_str().unwrap_or("").to_string(),
                        r["verdict"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    got.sort();
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(got, want, "{doc}");
}

/// `hostbench check --drain --resume` as the cluster's HealthCheckProgram (every 2 s, the quick
/// level's CPU probe, each node's counters from its own fixture tree): node2 given an
/// uncorrected DIMM error is drained by hostbench with the cause as its reason (in `sinfo -R`)
/// while node1 stays idle; with the fault gone the next check resumes it; node3, drained by
/// hand for another reason, passes its checks and stays drained with that reason.
#[test]
fn check_drains_and_resumes_as_the_health_check_program() {
    let _turn = cluster_turn();
    let bin = assert_cmd::cargo::cargo_bin("hostbench");
    let Some(cluster) = Cluster::up_with_conf("hbh", NODES, "198.51.100", |state| {
        let wrapper = state.join("healthcheck.sh");
        // The node's fixture tree: empty (nothing to read, nothing judged) until the test
        // writes a fault into it. The floor is far below any figure (--peak-share 0.01): three
        // nodes share this machine's CPUs, and only the counters are under test here.
        for i in 1..=NODES {
            std::fs::create_dir_all(state.join(format!("roots/node{i}"))).expect("root");
        }
        let body = format!(
            "#!/bin/sh\n\
             [ -e {s}/hc-off ] && exit 0\n\
             export SLURM_CONF={s}/slurm.conf HOSTBENCH_RUN_DIR={s}/run\n\
             node=${{SLURMD_NODENAME:-$(hostname)}}\n\
             export HOSTBENCH_HEALTH_ROOT={s}/roots/$node\n\
             {{ echo \"run SLURMD_NODENAME=${{SLURMD_NODENAME:-unset}}\"\n\
             {bin} check --level quick --only cpu --peak-share 0.01 --max-time 60s \
             --drain --resume\n\
             echo \"exit $?\"; }} >>{s}/hc-$node.log 2>&1\n",
            s = state.display(),
            bin = bin.display()
        );
        std::fs::write(&wrapper, body).expect("wrapper");
        // The Prolog of docs/slurm-health.md, off until the test turns it on (`prolog-on`), so
        // the jobs before do not wait for it.
        let prolog = state.join("prolog.sh");
        let body = format!(
            "#!/bin/sh\n\
             [ -e {s}/prolog-on ] || exit 0\n\
             export SLURM_CONF={s}/slurm.conf HOSTBENCH_RUN_DIR={s}/run\n\
             export HOSTBENCH_HEALTH_ROOT={s}/roots/$SLURMD_NODENAME\n\
             {bin} check --level quick --only cpu --peak-share 0.01 --max-time 30s --drain \
             >>{s}/prolog-$SLURMD_NODENAME.log 2>&1\n",
            s = state.display(),
            bin = bin.display()
        );
        std::fs::write(&prolog, body).expect("prolog");
        for f in [&wrapper, &prolog] {
            std::fs::set_permissions(f, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .expect("chmod");
        }
        format!(
            "HealthCheckProgram={}\nHealthCheckInterval=2\nHealthCheckNodeState=ANY\n\
             Prolog={}\nPrologEpilogTimeout=120\n",
            wrapper.display(),
            prolog.display()
        )
    }) else {
        return;
    };
    let t0 = Instant::now();
    let state = cluster.state.clone();
    let runs = |node: &str| {
        std::fs::read_to_string(state.join(format!("hc-{node}.log")))
            .unwrap_or_default()
            .matches("\nexit ")
            .count()
    };
    let log = |node: &str| {
        std::fs::read_to_string(state.join(format!("hc-{node}.log"))).unwrap_or_default()
    };
    let node_line = |node: &str| {
        cluster
            .slurm("scontrol", &["show", "node", node, "-o"])
            .trim()
            .to_string()
    };
    let field = |node: &str, key: &str| {
        node_line(node)
            .split(' ')
            .find_map(|f| f.strip_prefix(&format!("{key}=")).map(str::to_string))
            .unwrap_or_default()
    };
    // The checks run and pass on every node before anything is changed.
    wait_for(
        "a first health check on every node",
        Duration::from_secs(120),
        || (1..=NODES).all(|i| runs(&format!("node{i}")) >= 1),
    );
    for i in 1..=NODES {
        let n = format!("node{i}");
        assert!(log(&n).contains("OK "), "{n}: {}", log(&n));
        assert_eq!(field(&n, "State"), "IDLE", "{n}: {}", node_line(&n));
    }

    // An operator drains node3 for something hostbench knows nothing of.
    let _ = cluster.slurm(
        "scontrol",
        &[
            "update",
            "nodename=node3",
            "state=drain",
            "reason=fan swap (ticket 42)",
        ],
    );
    let node3_before = runs("node3");

    // The fault: one uncorrected error on node2's memory controller.
    edac_fault(&state.join("roots"), "node2", NODES);
    let mc = state.join("roots/node2/sys/devices/system/edac/mc/mc0");
    wait_for("node2 drained", Duration::from_secs(120), || {
        field("node2", "State").contains("DRAIN")
    });
    let reasons = cluster.slurm("sinfo", &["-R", "-h", "-o", "%n|%E"]);
    let node2 = reasons
        .lines()
        .find(|l| l.starts_with("node2|"))
        .unwrap_or_else(|| panic!("node2 in sinfo -R: {reasons}"));
    assert!(
        node2.starts_with("node2|hostbench: 1 uncorrectable memory error(s) on mc0"),
        "{reasons}\n{}",
        log("node2")
    );
    assert!(
        log("node2").contains("slurm: node node2 drained: \"hostbench: "),
        "{}",
        log("node2")
    );
    assert_eq!(field("node1", "State"), "IDLE", "{}", node_line("node1"));

    // The fault cleared: the next check passes and resumes node2.
    std::fs::write(mc.join("ue_count"), "0\n").expect("w");
    std::fs::write(mc.join("dimm2/dimm_ue_count"), "0\n").expect("w");
    wait_for("node2 resumed", Duration::from_secs(120), || {
        field("node2", "State") == "IDLE"
    });
    assert!(
        log("node2").contains("slurm: node node2 resumed (was \"hostbench: "),
        "{}",
        log("node2")
    );

    // node3 has passed checks since its drain and is still drained with the operator's reason.
    wait_for("two more checks on node3", Duration::from_secs(120), || {
        runs("node3") >= node3_before + 2
    });
    assert!(
        field("node3", "State").contains("DRAIN"),
        "{}",
        node_line("node3")
    );
    let reasons = cluster.slurm("sinfo", &["-R", "-h", "-o", "%n|%E"]);
    assert!(
        reasons.lines().any(|l| l == "node3|fan swap (ticket 42)"),
        "{reasons}\n{}",
        log("node3")
    );
    assert!(
        log("node3")
            .contains("left drained as it is: drained by someone else (\"fan swap (ticket 42)\")"),
        "{}",
        log("node3")
    );
    assert!(
        !log("node1").contains("slurm: node node1"),
        "{}",
        log("node1")
    );

    // Without SLURMD_NODENAME the node is the one whose NodeAddr is one of this host's
    // addresses: inside node3's namespace, node3 (left as it is); in the controller's namespace,
    // no node at all, which is a one-line error before anything is measured.
    let by_addr = StdCommand::new("nsenter")
        .arg(format!("--net=/run/netns/{}", cluster.ns("node3")))
        .arg(&bin)
        .args(["check", "--only", "cpu", "--peak-share", "0.01", "--resume"])
        .env("SLURM_CONF", state.join("slurm.conf"))
        .env("HOSTBENCH_RUN_DIR", state.join("run"))
        .env("HOSTBENCH_HEALTH_ROOT", state.join("roots/node3"))
        .env_remove("SLURMD_NODENAME")
        .output()
        .expect("check in node3's namespace");
    assert!(
        String::from_utf8_lossy(&by_addr.stderr)
            .contains("slurm: node node3 left drained as it is"),
        "{}",
        text(&by_addr)
    );
    let nowhere = cluster
        .hostbench()
        .args(["check", "--only", "cpu", "--drain"])
        .env_remove("SLURMD_NODENAME")
        .output()
        .expect("check in the controller's namespace");
    assert_eq!(nowhere.status.code(), Some(2), "{}", text(&nowhere));
    assert!(
        nowhere.stdout.is_empty()
            && String::from_utf8_lossy(&nowhere.stderr).contains(
                "--drain: not under Slurm: no node in `scontrol show node` has this host's"
            ),
        "{}",
        text(&nowhere)
    );
    // A Prolog that fails puts hostbench's reason in `sinfo -R`, not "Prolog error": the
    // health check held off (so it neither drains node1 first nor resumes it after), node1's
    // counters given the fault, a job sent to node1.
    std::fs::write(state.join("hc-off"), "").expect("hc-off");
    std::thread::sleep(Duration::from_secs(3));
    edac_fault(&state.join("roots"), "node1", NODES);
    std::fs::write(state.join("prolog-on"), "").expect("prolog-on");
    let job = cluster.job_on("node1", "true");
    wait_for(
        "node1 drained by its Prolog",
        Duration::from_secs(120),
        || field("node1", "State").contains("DRAIN"),
    );
    let reasons = cluster.slurm("sinfo", &["-R", "-h", "-o", "%n|%E"]);
    let prolog_log = std::fs::read_to_string(state.join("prolog-node1.log")).unwrap_or_default();
    assert!(
        reasons
            .lines()
            .any(|l| l.starts_with("node1|hostbench: 1 uncorrectable memory error(s) on mc0")),
        "{reasons}\n{prolog_log}"
    );
    assert!(!reasons.contains("Prolog error"), "{reasons}");
    let _ = cluster.slurm("scancel", &[job.trim()]);
    let _ = std::fs::remove_file(state.join("prolog-on"));

    eprintln!(
        "health-check scenario: {:.1} s (SLURMD_NODENAME as slurmd gave it: {})",
        t0.elapsed().as_secs_f64(),
        log("node1").lines().next().unwrap_or("")
    );
}

#[test]
fn print_script_and_no_slurm() {
    let out = common::hostbench()
        .args([
            "fleet",
            "run",
            "--nodes",
            "4",
            "--partition",
            "batch",
            "--time",
            "20",
        ])
        .args([
            "--profile",
            "quick",
            "--print-script",
            "--out",
            "/shared/fleets",
        ])
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", text(&out));
    let script = String::from_utf8_lossy(&out.stdout);
    for want in [
        "#!/bin/sh",
        "#SBATCH --nodes=4",
        "#SBATCH --exclusive",
        "#SBATCH --no-kill",
        "#SBATCH --partition=batch",
        "#SBATCH --time=20",
        "fleet run --nodes 4 --profile quick",
        "--out /shared/fleets",
    ] {
        assert!(script.contains(want), "{want} in\n{script}");
    }
    // No Slurm on PATH: one line, exit 2, nothing written.
    let empty = tempfile::tempdir().expect("tmp");
    let out = common::hostbench()
        .env("PATH", empty.path())
        .env_remove("SLURM_JOB_ID")
        .args(["fleet", "run", "--nodes", "2", "--out"])
        .arg(empty.path().join("f"))
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no Slurm") && err.contains("sbatch"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!empty.path().join("f").exists());
}
