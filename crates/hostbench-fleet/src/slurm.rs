//! Slurm's command-line tools, asked and driven: `sinfo` for the partition's nodes and their
//! states, `scontrol` for host lists and node addresses, `sbatch` to submit, `squeue` to follow
//! the job, `srun` (in `driver`) for the steps. Slurm is the launcher; nothing here starts a
//! process on another node by itself.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use hostbench_core::BenchError;

/// A node as `sinfo` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    pub name: String,
    /// Slurm's long state name, e.g. idle, mixed, allocated, down*, drained.
    pub state: String,
    /// The reason an administrator or Slurm gave (down, drain), if any.
    pub reason: Option<String>,
}

/// How a node stands for a fleet run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    Idle,
    /// Running other jobs: `--busy wait` waits for it, `--busy skip` leaves it out.
    Busy,
    /// Down, drained, failing or reserved: never measured, with Slurm's reason.
    Unavailable(String),
}

impl NodeState {
    pub fn availability(&self) -> Availability {
        let s = self
            .state
            .trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']);
        // "*" = not responding: the node is in no state to run anything.
        let unresponsive = self.state.ends_with('*');
        let why = |what: &str| {
            let reason = self
                .reason
                .as_deref()
                .filter(|r| !r.is_empty() && *r != "none");
            Availability::Unavailable(match reason {
                Some(r) => format!("{what} in Slurm ({}: {r})", self.state),
                None => format!("{what} in Slurm ({})", self.state),
            })
        };
        if unresponsive || s.starts_with("down") || s.starts_with("fail") {
            why("down")
        } else if s.starts_with("drain") {
            why("drained")
        } else if s.starts_with("maint")
            || s.starts_with("reserved")
            || s.starts_with("future")
            || s.starts_with("unknown")
            || s.starts_with("inval")
            || s.starts_with("power")
        {
            why("not usable")
        } else if s == "idle" {
            Availability::Idle
        } else {
            // allocated, mixed, completing, planned: other jobs hold it now, it comes back.
            Availability::Busy
        }
    }
}

/// The path of a Slurm client tool, or a bad-input error saying Slurm is not here.
pub fn require(tool: &str) -> Result<PathBuf, BenchError> {
    hostbench_core::reference::locate(tool).ok_or_else(|| {
        BenchError::invalid(format!(
            "no Slurm on this machine: `{tool}` is not on PATH (fleet run submits through Slurm; \
             install the Slurm client tools or run it where they are)"
        ))
    })
}

/// Run a Slurm tool to completion; its stdout, or its first stderr line as the error.
pub fn output(cmd: &mut Command) -> Result<String, BenchError> {
    let prog = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| BenchError::Failed(format!("{prog}: {e}")))?;
    if !out.status.success() {
        return Err(BenchError::Failed(format!(
            "{prog} failed: {}",
            first_error_line(&String::from_utf8_lossy(&out.stderr))
                .unwrap_or_else(|| format!("exit status {}", out.status))
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The most telling line of a Slurm tool's stderr: the last `error:` line, else the last line.
pub fn first_error_line(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines
        .iter()
        .rev()
        .find(|l| l.contains("error:") || l.contains("fatal:"))
        .or(lines.last())
        .map(|l| l.to_string())
}

/// The partition's name and nodes (`partition` None: the cluster's default partition).
pub fn partition_nodes(partition: Option<&str>) -> Result<(String, Vec<NodeState>), BenchError> {
    let mut cmd = Command::new("sinfo");
    cmd.args(["-h", "-N", "-o", "%N|%P|%T|%E"]);
    let text = output(&mut cmd)?;
    let mut parts: Vec<(String, bool, NodeState)> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.splitn(4, '|').collect();
        if f.len() < 3 {
            continue;
        }
        let (name, default) = match f[1].strip_suffix('*') {
            Some(p) => (p, true),
            None => (f[1], false),
        };
        parts.push((
            name.to_string(),
            default,
            NodeState {
                name: f[0].to_string(),
                state: f[2].to_string(),
                reason: f.get(3).map(|r| r.trim().to_string()),
            },
        ));
    }
    let want = match partition {
        Some(p) => p.to_string(),
        None => parts
            .iter()
            .find(|(_, d, _)| *d)
            .map(|(p, _, _)| p.clone())
            .ok_or_else(|| {
                BenchError::invalid(
                    "this cluster has no default partition: give --partition".to_string(),
                )
            })?,
    };
    let nodes: Vec<NodeState> = parts
        .iter()
        .filter(|(p, _, _)| *p == want)
        .map(|(_, _, n)| n.clone())
        .collect();
    if nodes.is_empty() {
        // sinfo prints a partition once per node state: keep each name once, in sinfo's order.
        let mut known: Vec<&str> = Vec::new();
        for (p, _, _) in &parts {
            if !known.contains(&p.as_str()) {
                known.push(p);
            }
        }
        return Err(BenchError::invalid(format!(
            "--partition {want}: no such partition (this cluster has: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )));
    }
    Ok((want, nodes))
}

/// Expand a Slurm host list (`node[1-3],gpu7`) into names.
pub fn hostnames(list: &str) -> Result<Vec<String>, BenchError> {
    let text = output(Command::new("scontrol").args(["show", "hostnames", list]))
        .map_err(|e| BenchError::invalid(format!("node list '{list}': {e}")))?;
    Ok(text
        .split_whitespace()
        .map(str::to_string)
        .collect::<Vec<_>>())
}

/// The address Slurm reaches `node` on (its `NodeAddr`): the cluster network, which is the one
/// the network phase measures.
pub fn node_addr(node: &str) -> Result<String, BenchError> {
    let text = output(Command::new("scontrol").args(["show", "node", node, "-o"]))?;
    text.split_whitespace()
        .find_map(|f| f.strip_prefix("NodeAddr="))
        .map(str::to_string)
        .ok_or_else(|| BenchError::Failed(format!("scontrol show node {node}: no NodeAddr")))
}

/// Submit a batch script (on stdin); the job id.
pub fn submit(script: &str) -> Result<String, BenchError> {
    use std::io::Write as _;
    let mut child = Command::new("sbatch")
        .arg("--parsable")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| BenchError::Failed(format!("sbatch: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .map_err(|e| BenchError::Failed(format!("sbatch: writing the script: {e}")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| BenchError::Failed(format!("sbatch: {e}")))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // sbatch refuses what the partition cannot satisfy: the user's request, exit 2.
        return Err(BenchError::invalid(format!(
            "sbatch refused the job: {}",
            first_error_line(&stderr).unwrap_or_else(|| format!("exit status {}", out.status))
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .split(';')
        .next()
        .filter(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_string)
        .ok_or_else(|| BenchError::Failed(format!("sbatch printed no job id: '{}'", text.trim())))
}

/// Where `squeue` says a job is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Still queued or running: the state and reason (`PENDING`, `Resources`).
    Queued(String, String),
    /// Out of the queue, or in a final state (`COMPLETED`, `CANCELLED`, `NODE_FAIL`, ...).
    Ended,
}

/// Slurm's final job states: `squeue -j` keeps showing a job in one of these until slurmctld
/// purges it (MinJobAge, 300 s by default), so they mean the job is over.
const FINAL_STATES: &[&str] = &[
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "TIMEOUT",
];

/// The job's state. An error is `squeue` itself failing (slurmctld restarting or too busy to
/// answer): the caller asks again rather than taking it for the job's end.
pub fn job_state(job: &str) -> Result<JobState, BenchError> {
    match output(Command::new("squeue").args(["-h", "-j", job, "-o", "%T|%r"])) {
        Ok(text) => Ok(parse_job_state(&text)),
        // A purged job id is the one failure that says where the job is.
        Err(BenchError::Failed(e)) if e.contains("Invalid job id") => Ok(JobState::Ended),
        Err(e) => Err(e),
    }
}

fn parse_job_state(text: &str) -> JobState {
    let Some(line) = text.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return JobState::Ended;
    };
    let (state, reason) = line.split_once('|').unwrap_or((line, ""));
    if FINAL_STATES.contains(&state) {
        JobState::Ended
    } else {
        JobState::Queued(state.to_string(), reason.to_string())
    }
}

/// A node as `scontrol show node -o` describes it: what `hostbench check --drain/--resume` needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeRecord {
    pub name: String,
    pub addr: String,
    pub hostname: String,
    /// Slurm's state flags, e.g. `IDLE`, `IDLE+DRAIN`, `MIXED+DRAIN`, `DOWN*`.
    pub state: String,
    /// The drain/down reason as it was set, without Slurm's `[user@time]` suffix.
    pub reason: Option<String>,
}

impl NodeRecord {
    /// Drained or draining (the DRAIN flag), whatever else the node is doing.
    pub fn drained(&self) -> bool {
        self.state.split('+').any(|f| f.starts_with("DRAIN"))
    }
}

/// Every node `scontrol show node -o` lists (`node` None), or that one node.
pub fn show_nodes(node: Option<&str>) -> Result<Vec<NodeRecord>, BenchError> {
    let mut cmd = Command::new("scontrol");
    cmd.args(["show", "node"]);
    if let Some(n) = node {
        cmd.arg(n);
    }
    cmd.arg("-o");
    Ok(parse_show_node(&output(&mut cmd)?))
}

/// `scontrol show node -o` lines: `Key=value` fields separated by spaces, where a value may hold
/// spaces itself (`OS=Linux 6.1.0 #1 SMP ...`, `Reason=bad dimm [root@2026-11-28T05:00:00]`): a
/// word that does not start a `Key=` continues the value before it.
pub fn parse_show_node(text: &str) -> Vec<NodeRecord> {
    let mut nodes = Vec::new();
    for line in text.lines().filter(|l| l.contains("NodeName=")) {
        let mut fields: Vec<(String, String)> = Vec::new();
        for word in line.split(' ').filter(|w| !w.is_empty()) {
            let key = word.split_once('=').map(|(k, _)| k).filter(|k| {
                !k.is_empty()
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && k.starts_with(|c: char| c.is_ascii_uppercase())
            });
            match (key, fields.last_mut()) {
                (Some(k), _) => fields.push((k.to_string(), word[k.len() + 1..].to_string())),
                (None, Some((_, v))) => {
                    v.push(' ');
                    v.push_str(word);
                }
                (None, None) => {}
            }
        }
        let get = |k: &str| {
            fields
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.trim().to_string())
        };
        let reason = get("Reason").map(|r| match r.rfind(" [") {
            Some(i) if r.ends_with(']') && r[i..].contains('@') => r[..i].to_string(),
            _ => r,
        });
        nodes.push(NodeRecord {
            name: get("NodeName").unwrap_or_default(),
            addr: get("NodeAddr").unwrap_or_default(),
            hostname: get("NodeHostName").unwrap_or_default(),
            state: get("State").unwrap_or_default(),
            reason: reason.filter(|r| !r.is_empty() && r != "none" && r != "(null)"),
        });
    }
    nodes
}

/// The longest drain reason kept: slurmdbd stores a node event's reason in a TINYTEXT column
/// (255 bytes), so a longer one is cut there (or refused) anyway.
pub const REASON_MAX: usize = 255;

/// `reason` cut to `REASON_MAX` bytes on a character boundary, its beginning kept, `...` where
/// it was cut.
pub fn fit_reason(reason: &str) -> String {
    let one_line = reason.replace(['\n', '\r'], " ");
    if one_line.len() <= REASON_MAX {
        return one_line;
    }
    let mut end = REASON_MAX - 3;
    while !one_line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", one_line[..end].trim_end())
}

/// `scontrol update nodename=NODE state=drain reason=REASON` (the reason fitted to Slurm's limit).
pub fn drain(node: &str, reason: &str) -> Result<(), BenchError> {
    output(Command::new("scontrol").args([
        "update",
        &format!("nodename={node}"),
        "state=drain",
        &format!("reason={}", fit_reason(reason)),
    ]))
    .map(drop)
}

/// `scontrol update nodename=NODE state=resume`.
pub fn resume(node: &str) -> Result<(), BenchError> {
    output(Command::new("scontrol").args(["update", &format!("nodename={node}"), "state=resume"]))
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(state: &str, reason: Option<&str>) -> NodeState {
        NodeState {
            name: "n1".into(),
            state: state.into(),
            reason: reason.map(str::to_string),
        }
    }

    #[test]
    fn job_state_from_squeue_lines() {
        assert_eq!(
            parse_job_state("PENDING|Resources\n"),
            JobState::Queued("PENDING".into(), "Resources".into())
        );
        assert_eq!(
            parse_job_state("RUNNING|None"),
            JobState::Queued("RUNNING".into(), "None".into())
        );
        assert_eq!(parse_job_state(""), JobState::Ended);
        assert_eq!(parse_job_state("COMPLETED|None"), JobState::Ended);
        assert_eq!(parse_job_state("NODE_FAIL|None"), JobState::Ended);
    }

    #[test]
    fn availability_from_slurm_states() {
        assert_eq!(node("idle", None).availability(), Availability::Idle);
        assert_eq!(node("mixed", None).availability(), Availability::Busy);
        assert_eq!(node("allocated", None).availability(), Availability::Busy);
        assert_eq!(node("completing", None).availability(), Availability::Busy);
        let Availability::Unavailable(why) = node("down*", Some("Not responding")).availability()
        else {
            panic!("down is unavailable")
        };
        assert!(
            why.contains("down") && why.contains("Not responding"),
            "{why}"
        );
        assert!(matches!(
            node("idle*", None).availability(),
            Availability::Unavailable(_)
        ));
        assert!(matches!(
            node("drained", Some("bad dimm")).availability(),
            Availability::Unavailable(w) if w.contains("bad dimm")
        ));
    }

    #[test]
    fn show_node_fields_with_spaces() {
        let text = "NodeName=node2 Arch=x86_64 CoresPerSocket=1 NodeAddr=198.51.100.2 \
            NodeHostName=node2 Version=22.05.8 OS=Linux 6.1.0-27-amd64 #1 SMP PREEMPT_DYNAMIC \
            State=IDLE+DRAIN ThreadsPerCore=1 Partitions=all \
            Reason=hostbench: FAIL health.edac: mc0 1 uncorrected [root@2026-11-28T05:30:01]\n\
            NodeName=node3 NodeAddr=198.51.100.3 NodeHostName=node3 State=IDLE ThreadsPerCore=1\n";
        let n = parse_show_node(text);
        assert_eq!(n.len(), 2);
        assert_eq!(n[0].name, "node2");
        assert_eq!(n[0].addr, "198.51.100.2");
        assert_eq!(n[0].state, "IDLE+DRAIN");
        assert!(n[0].drained());
        assert_eq!(
            n[0].reason.as_deref(),
            Some("hostbench: FAIL health.edac: mc0 1 uncorrected")
        );
        assert_eq!(n[1].reason, None);
        assert!(!n[1].drained());
    }

    #[test]
    fn a_long_reason_keeps_its_beginning() {
        let long = format!("hostbench: {}", "é".repeat(300));
        let f = fit_reason(&long);
        assert!(f.len() <= REASON_MAX, "{}", f.len());
        assert!(f.starts_with("hostbench: é") && f.ends_with("..."), "{f}");
        assert_eq!(
            fit_reason("hostbench: short\nline"),
            "hostbench: short line"
        );
    }

    #[test]
    fn error_line_is_the_last_error() {
        let e = "srun: Job step aborted\nsrun: error: Node failure on node2\nsrun: got SIGCONT\n";
        assert_eq!(
            first_error_line(e).as_deref(),
            Some("srun: error: Node failure on node2")
        );
        assert_eq!(first_error_line("a\nb\n").as_deref(), Some("b"));
        assert_eq!(first_error_line("  \n"), None);
    }

    #[test]
    fn missing_tool_is_bad_input() {
        let e = require("hostbench-no-such-tool")
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|m| m.contains("no Slurm")));
    }
}
