//! Inside the allocation: the two phases, each a set of `srun` steps started from here.
//!
//! Phase 1 starts one step per node at the same time: this binary's `run`, writing into
//! `nodes/<node>/` as it goes, its disk cases in node-local scratch. Phase 2 measures node pairs
//! round by round (`schedule`): in each pair one node's step is `net server` bound to its Slurm
//! `NodeAddr` on a port the kernel picks (announced through a ready file), the other's is
//! `net client` against it, both with this fleet's token.
//!
//! Steps use `--no-kill` (a node that dies must not take the job and every other node's run
//! with it) and whole nodes (`--whole`: the step gets every CPU of the node, which a run needs;
//! `--overlap` in phase 2, where a finishing step must not hold the next one back). A node is ok
//! only when its step ended well *and* its run.json is complete: srun itself exits 0 after
//! "Node failure", so its exit status alone would call a dead node measured.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use hostbench_core::BenchError;
use hostbench_report::fleet::layout::{valid_node_name, FleetDir, Status, StatusFile};

use crate::{
    new_fleet_id, new_plan, open_fleet_dir, read_plan, slurm, write_plan, write_status,
    FleetConfig, Outcome,
};

/// How long a pair's server may take to start listening (a step launch on a loaded cluster).
const SERVER_START: Duration = Duration::from_secs(60);
/// How long a pair's server may take to exit after its client is done.
const SERVER_EXIT: Duration = Duration::from_secs(15);
/// The environment variable carrying `--dir` to the node steps.
const SCRATCH_ENV: &str = "HOSTBENCH_FLEET_SCRATCH";

pub fn drive(cfg: &FleetConfig, job: &str) -> Result<Outcome, BenchError> {
    slurm::require("srun")?;
    let list = std::env::var("SLURM_JOB_NODELIST")
        .ok()
        .filter(|l| !l.is_empty())
        .ok_or_else(|| {
            BenchError::invalid(format!(
                "SLURM_JOB_ID={job} is set but SLURM_JOB_NODELIST is not: not inside a Slurm \
                 allocation?"
            ))
        })?;
    let allocated = slurm::hostnames(&list)?;
    if cfg.nodes > allocated.len() {
        return Err(BenchError::invalid(format!(
            "--nodes {}: this allocation (job {job}) has {} node{} ({list})",
            cfg.nodes,
            allocated.len(),
            if allocated.len() == 1 { "" } else { "s" }
        )));
    }
    let nodes: Vec<String> = allocated[..cfg.nodes].to_vec();
    if let Some(bad) = nodes.iter().find(|n| !valid_node_name(n)) {
        return Err(BenchError::Failed(format!(
            "node name '{bad}' cannot name a directory"
        )));
    }
    let id = cfg
        .fleet_id
        .clone()
        .unwrap_or_else(|| new_fleet_id(Some(job)));
    let dir = open_fleet_dir(&cfg.out, &id)?;
    let mut plan = read_plan(&dir).unwrap_or_else(|| new_plan(cfg, &id));
    plan.nodes.clone_from(&nodes);
    plan.job_id = Some(job.to_string());
    let seed = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    plan.rounds = cfg
        .pairs
        .rounds(nodes.len(), seed)
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|(a, b)| (nodes[a].clone(), nodes[b].clone()))
                .collect()
        })
        .collect();
    write_plan(&dir, &plan)?;
    for n in &nodes {
        std::fs::create_dir_all(dir.node_dir(n)).map_err(|e| BenchError::io(dir.node_dir(n), e))?;
        write_status(&dir.node_status(n), &StatusFile::new(Status::Pending))?;
    }

    log(
        cfg,
        &format!(
            "fleet {id}: job {job}, {} nodes; phase 1: one `hostbench {}` per node",
            nodes.len(),
            cfg.job.verb()
        ),
    );
    let phase1: Vec<(String, StatusFile)> = std::thread::scope(|s| {
        let handles: Vec<_> = nodes
            .iter()
            .map(|n| (n, s.spawn(|| run_node(cfg, &dir, n))))
            .collect();
        handles
            .into_iter()
            .map(|(n, h)| {
                let st = h
                    .join()
                    .unwrap_or_else(|_| failed("the driver's thread panicked"));
                (n.clone(), st)
            })
            .collect()
    });
    for (n, st) in &phase1 {
        let _ = write_status(&dir.node_status(n), st);
        log(
            cfg,
            &format!(
                "  {n}: {}{}",
                st.status.as_str(),
                st.reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ),
        );
    }
    let failed_nodes: Vec<&String> = phase1
        .iter()
        .filter(|(_, s)| s.status != Status::Ok)
        .map(|(n, _)| n)
        .collect();

    let test_len = net_test_length(&cfg.profile, cfg.scale);
    for (r, round) in plan.rounds.iter().enumerate() {
        log(
            cfg,
            &format!(
                "phase 2, round {}/{}: {} pair{}",
                r + 1,
                plan.rounds.len(),
                round.len(),
                if round.len() == 1 { "" } else { "s" }
            ),
        );
        std::thread::scope(|s| {
            for (from, to) in round {
                let down = failed_nodes.iter().find(|n| **n == from || **n == to);
                if let Some(down) = down {
                    let mut st = StatusFile::new(Status::Skipped);
                    st.reason = Some(format!("{down} failed in phase 1"));
                    let _ = write_status(&dir.pair_status(from, to), &st);
                    continue;
                }
                let dir = &dir;
                s.spawn(move || {
                    let st = run_pair(cfg, dir, from, to, test_len);
                    log(
                        cfg,
                        &format!(
                            "  {from} -> {to}: {}{}",
                            st.status.as_str(),
                            st.reason
                                .as_deref()
                                .map(|r| format!(" ({r})"))
                                .unwrap_or_default()
                        ),
                    );
                    let _ = write_status(&dir.pair_status(from, to), &st);
                });
            }
        });
    }
    Ok(Outcome {
        dir,
        job_id: Some(job.to_string()),
    })
}

/// A line of the job's log (Slurm's output file), stamped with the time since the driver began.
fn log(cfg: &FleetConfig, line: &str) {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let t = START.get_or_init(Instant::now).elapsed().as_secs_f64();
    if !cfg.quiet {
        println!("[{t:>7.1} s] {line}");
    }
}

fn failed(reason: &str) -> StatusFile {
    let mut st = StatusFile::new(Status::Failed);
    st.reason = Some(reason.to_string());
    st.finished_at = Some(hostbench_core::model::now_rfc3339());
    st
}

/// One pair's test length: the profile's network sample, as `run` would use it.
fn net_test_length(profile: &str, scale: f64) -> Duration {
    let base = match profile {
        "quick" => 0.5,
        "full" => 2.0,
        _ => 1.0,
    };
    Duration::from_secs_f64((base * scale).max(0.05))
}

/// `srun` for one task on `node`, with every CPU of it.
fn srun(node: &str, overlap: bool) -> Command {
    let mut c = Command::new("srun");
    c.args(["--no-kill", "--nodes=1", "--ntasks=1", "--whole"]);
    if overlap {
        c.arg("--overlap");
    }
    c.arg(format!("--nodelist={node}"));
    c.arg(format!("--job-name=hostbench:{node}"));
    c.stdin(Stdio::null());
    c
}

fn log_file(path: &Path) -> Stdio {
    File::create(path).map_or_else(|_| Stdio::null(), Stdio::from)
}

fn run_node(cfg: &FleetConfig, dir: &FleetDir, node: &str) -> StatusFile {
    if cfg.job == crate::NodeJob::Check {
        return check_node(cfg, dir, node);
    }
    let mut st = StatusFile::new(Status::Running);
    st.started_at = Some(hostbench_core::model::now_rfc3339());
    let _ = write_status(&dir.node_status(node), &st);
    let mut cmd = srun(node, false);
    // The scratch directory is the node's own: `$TMPDIR` as the node sets it, resolved there.
    cmd.args([
        "sh",
        "-c",
        &format!("exec \"$@\" --disk-dir \"${{{SCRATCH_ENV}:-${{TMPDIR:-/tmp}}}}\""),
        "sh",
    ]);
    cmd.arg(&cfg.exe);
    cmd.arg("run").arg("--run-dir").arg(dir.node_dir(node));
    cmd.args(["--no-history", "--quiet", "--profile", &cfg.profile]);
    cmd.args(["--scale", &cfg.scale.to_string()]);
    cmd.args(&cfg.run_args);
    if let Some(s) = &cfg.scratch {
        cmd.env(SCRATCH_ENV, s);
    }
    let stderr = dir.node_stderr(node);
    cmd.stdout(Stdio::null()).stderr(log_file(&stderr));
    let status = cmd.status();
    let run = hostbench_report::load::load_run(&dir.node_run(node));
    let complete = run.as_ref().is_ok_and(|r| r.finished_at.is_some());
    let mut end = classify(status.as_ref().ok(), complete, &stderr, "its run");
    if let Err(e) = &status {
        end = failed(&format!("srun could not be started: {e}"));
    }
    let exited_well = status
        .as_ref()
        .is_ok_and(|s| matches!(s.code(), Some(0 | 3)));
    if exited_well && !dir.node_run(node).exists() {
        // The run finished where it ran, but its file is not here: the fleet directory is not
        // the same directory on that node.
        end = failed(&format!(
            "its run finished, but no run.json appeared in {}: is the fleet directory on a \
             filesystem every node shares?",
            dir.node_dir(node).display()
        ));
    } else if end.status == Status::Failed && run.is_err() {
        let why = end.reason.take().unwrap_or_default();
        end.reason = Some(format!("{why}; no complete run.json"));
    }
    end.started_at = st.started_at;
    end
}

/// `hostbench check --json nodes/NODE/check.json` on `node`: ok when it left a verdict document,
/// whatever the verdict (a fail is the node's answer, not the step's failure); failed, with the
/// telling line of its stderr, when it left none (it could not run, was killed, or the node is
/// gone), which `fleet check` reports as unknown, never as a pass.
fn check_node(cfg: &FleetConfig, dir: &FleetDir, node: &str) -> StatusFile {
    let mut st = StatusFile::new(Status::Running);
    st.started_at = Some(hostbench_core::model::now_rfc3339());
    let _ = write_status(&dir.node_status(node), &st);
    let doc = dir.node_check(node);
    let _ = std::fs::remove_file(&doc);
    let mut cmd = srun(node, false);
    cmd.arg(&cfg.exe).arg("check").arg("--json").arg(&doc);
    cmd.args(&cfg.run_args);
    if let Some(s) = &cfg.scratch {
        cmd.arg("--disk-dir").arg(s);
    }
    let stderr = dir.node_stderr(node);
    cmd.stdout(Stdio::null()).stderr(log_file(&stderr));
    let status = cmd.status();
    let answered = std::fs::read(&doc)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|v| v["verdict"].is_string());
    let mut end = if answered {
        let mut ok = StatusFile::new(Status::Ok);
        ok.exit_code = status.as_ref().ok().and_then(ExitStatus::code);
        ok.finished_at = Some(hostbench_core::model::now_rfc3339());
        ok
    } else {
        // Its exit code is no answer (2 is also a bad argument): the stderr line says why.
        let mut no = classify(status.as_ref().ok(), false, &stderr, "its check");
        if let Err(e) = &status {
            no = failed(&format!("srun could not be started: {e}"));
        }
        no
    };
    end.started_at = st.started_at;
    end
}

/// A step's end: ok when it exited 0 (or 3: some cases skipped, the rest measured) and left a
/// complete result; otherwise failed with the most telling line of its stderr.
fn classify(status: Option<&ExitStatus>, complete: bool, stderr: &Path, what: &str) -> StatusFile {
    use std::os::unix::process::ExitStatusExt as _;
    let code = status.and_then(ExitStatus::code);
    if complete && matches!(code, Some(0 | 3)) {
        let mut st = StatusFile::new(Status::Ok);
        st.exit_code = code;
        st.finished_at = Some(hostbench_core::model::now_rfc3339());
        return st;
    }
    let err_line = std::fs::read_to_string(stderr)
        .ok()
        .and_then(|t| slurm::first_error_line(&t));
    let reason = match (err_line, code, status.and_then(ExitStatus::signal)) {
        (Some(line), _, _) => line,
        (None, Some(c), _) => format!("{what} exited with code {c}"),
        (None, None, Some(sig)) => format!("{what} was killed by signal {sig}"),
        (None, None, None) => format!("{what} ended without a result"),
    };
    let mut st = failed(&reason);
    st.exit_code = code;
    st
}

fn run_pair(cfg: &FleetConfig, dir: &FleetDir, from: &str, to: &str, len: Duration) -> StatusFile {
    let mut st = StatusFile::new(Status::Running);
    st.started_at = Some(hostbench_core::model::now_rfc3339());
    let _ = write_status(&dir.pair_status(from, to), &st);
    let ip = match slurm::node_addr(to).and_then(|a| resolve(&a)) {
        Ok(ip) => ip,
        Err(e) => return failed(&format!("{to}'s address: {e}")),
    };
    let ready = dir.pair_ready(from, to);
    let _ = std::fs::remove_file(&ready);
    let server_log = dir.net_dir().join(format!("{from}--{to}.server.log"));
    let client_log = dir.net_dir().join(format!("{from}--{to}.client.log"));
    let mut server = srun(to, true);
    server
        .arg(&cfg.exe)
        .args([
            "net", "server", "--bind", &ip, "--port", "0", "--once", "--quiet",
        ])
        .arg("--token-file")
        .arg(dir.token())
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(log_file(&server_log));
    let mut server = match server.spawn() {
        Ok(c) => c,
        Err(e) => return failed(&format!("srun could not be started: {e}")),
    };
    let listen = match wait_ready(&mut server, &ready) {
        Ok(addr) => addr,
        Err(why) => {
            stop(&mut server, Duration::ZERO);
            let line = std::fs::read_to_string(&server_log)
                .ok()
                .and_then(|t| slurm::first_error_line(&t));
            return failed(&format!("net server on {to}: {}", line.unwrap_or(why)));
        }
    };
    let out = dir.pair_run(from, to);
    let mut client = srun(from, true);
    client
        .arg(&cfg.exe)
        // Throughput both ways and the round trip per pair: the matrix's figures. Both ways, so
        // that a node whose egress (or ingress) is slow can be told from its partner: one
        // direction of a pair is shared evidence against both nodes. (Under load and
        // transactions would add a capacity search and three cases to every pair's budget.)
        .args(["net", "client", &listen, "--proto", "tcp", "--streams", "1"])
        .args(["--throughput", "--latency", "--direction", "send,recv"])
        .args(["--duration", &format!("{}ms", len.as_millis().max(1))])
        .arg("--token-file")
        .arg(dir.token())
        .arg("--json")
        .arg(&out)
        .arg("--quiet")
        .stdout(Stdio::null())
        .stderr(log_file(&client_log));
    let status = client.status();
    stop(&mut server, SERVER_EXIT);
    let complete = hostbench_report::load::load_run(&out).is_ok_and(|r| r.finished_at.is_some());
    let mut end = classify(status.as_ref().ok(), complete, &client_log, "net client");
    end.started_at = st.started_at;
    if let Some(r) = end.reason.as_mut() {
        *r = format!("{from} -> {to}: {r}");
    }
    end
}

/// The server's listening address from its ready file, or why it never came.
fn wait_ready(server: &mut Child, ready: &PathBuf) -> Result<String, String> {
    let t0 = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(ready) {
            let addr = text.trim();
            if !addr.is_empty() {
                return Ok(addr.to_string());
            }
        }
        if let Ok(Some(st)) = server.try_wait() {
            return Err(format!("ended before it listened ({st})"));
        }
        if t0.elapsed() > SERVER_START {
            return Err(format!(
                "did not listen within {} s",
                SERVER_START.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Let an `srun` end by itself for up to `grace`, then ask it to cancel its step (SIGTERM: srun
/// forwards it and cleans the step up; SIGKILL would orphan the step).
fn stop(child: &mut Child, grace: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) on our own child's pid, which we have not reaped yet.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let t1 = Instant::now();
    while t1.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A NodeAddr as an IP address: as is, or the first address its name resolves to.
fn resolve(addr: &str) -> Result<String, BenchError> {
    use std::net::ToSocketAddrs as _;
    if addr.parse::<std::net::IpAddr>().is_ok() {
        return Ok(addr.to_string());
    }
    (addr, 0)
        .to_socket_addrs()
        .map_err(|e| BenchError::Failed(format!("cannot resolve '{addr}': {e}")))?
        .next()
        .map(|a| a.ip().to_string())
        .ok_or_else(|| BenchError::Failed(format!("'{addr}' resolves to no address")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt as _;

    #[test]
    fn a_step_is_ok_only_with_a_complete_result() {
        let tmp = tempfile::tempdir().expect("tmp");
        let log = tmp.path().join("stderr.log");
        std::fs::write(
            &log,
            "srun: error: Node failure on node2\nsrun: got SIGCONT\n",
        )
        .expect("write");
        let zero = ExitStatus::from_raw(0);
        assert_eq!(classify(Some(&zero), true, &log, "x").status, Status::Ok);
        let three = ExitStatus::from_raw(3 << 8);
        assert_eq!(classify(Some(&three), true, &log, "x").status, Status::Ok);
        // srun exits 0 after a node failure: the missing result decides.
        let st = classify(Some(&zero), false, &log, "x");
        assert_eq!(st.status, Status::Failed);
        assert_eq!(
            st.reason.as_deref(),
            Some("srun: error: Node failure on node2")
        );
        let quiet = tmp.path().join("none.log");
        let one = ExitStatus::from_raw(1 << 8);
        let st = classify(Some(&one), true, &quiet, "its run");
        assert_eq!(st.reason.as_deref(), Some("its run exited with code 1"));
        let killed = ExitStatus::from_raw(9);
        let st = classify(Some(&killed), false, &quiet, "its run");
        assert_eq!(st.reason.as_deref(), Some("its run was killed by signal 9"));
    }

    #[test]
    fn test_length_follows_profile_and_scale() {
        assert_eq!(net_test_length("quick", 1.0), Duration::from_millis(500));
        assert_eq!(net_test_length("standard", 0.5), Duration::from_millis(500));
        assert_eq!(net_test_length("quick", 0.0001), Duration::from_millis(50));
    }

    #[test]
    fn node_addresses_resolve() {
        assert_eq!(
            resolve("198.51.100.7").ok().as_deref(),
            Some("198.51.100.7")
        );
        assert!(resolve("localhost").is_ok());
    }
}
