//! Outside an allocation: choose the nodes, make the fleet directory, submit the batch script
//! and follow the job until it leaves the queue, printing progress (job state, then nodes done /
//! running / failed, then the network rounds) as it changes.
//!
//! Bad requests are refused here, before anything is queued: no Slurm, an unknown partition,
//! more nodes than the partition (or `--nodelist`) has or has up, a fleet directory that cannot
//! be written. When the job ends, any node whose status never became final gets the reason (the
//! job was cancelled, hit its time limit or lost the node): its partial run.json stays.

use std::time::{Duration, Instant};

use hostbench_core::BenchError;
use hostbench_report::fleet::layout::{FleetDir, NotMeasured, Status, StatusFile};

use crate::slurm::{self, Availability};
use crate::{
    new_fleet_id, new_plan, open_fleet_dir, read_plan, read_status, script, write_plan,
    write_status, Busy, FleetConfig, Outcome, Tally,
};

/// How often the queue and the fleet directory are looked at.
const POLL: Duration = Duration::from_millis(500);
/// How long `squeue` may keep failing (slurmctld restarting, or too loaded to answer) before the
/// submitter stops watching a job it can no longer see.
const SQUEUE_PATIENCE: Duration = Duration::from_secs(60);

/// The nodes to ask for: `Some(list)` to name them in the job, `None` to let Slurm choose; and
/// the nodes left out with the reason.
pub type Choice = (Option<Vec<String>>, Vec<NotMeasured>);

/// Decide which nodes to submit for (see the module header for what is refused).
pub fn choose_nodes(cfg: &FleetConfig) -> Result<(String, Choice), BenchError> {
    let (partition, nodes) = slurm::partition_nodes(cfg.partition.as_deref())?;
    let candidates: Vec<slurm::NodeState> = match &cfg.nodelist {
        None => nodes,
        Some(list) => {
            let names = slurm::hostnames(list)?;
            let mut picked = Vec::with_capacity(names.len());
            for n in names {
                let state = nodes.iter().find(|s| s.name == n).cloned().ok_or_else(|| {
                    BenchError::invalid(format!(
                        "--nodelist: node '{n}' is not in partition {partition}"
                    ))
                })?;
                picked.push(state);
            }
            picked
        }
    };
    let source = match &cfg.nodelist {
        Some(l) => format!("--nodelist {l}"),
        None => format!("partition {partition}"),
    };
    if cfg.nodes > candidates.len() {
        return Err(BenchError::invalid(format!(
            "--nodes {}: {source} has {} node{}",
            cfg.nodes,
            candidates.len(),
            if candidates.len() == 1 { "" } else { "s" }
        )));
    }
    let mut not_measured = Vec::new();
    let mut idle = Vec::new();
    let mut busy = Vec::new();
    for n in &candidates {
        match n.availability() {
            Availability::Idle => idle.push(n.name.clone()),
            Availability::Busy => busy.push(n.name.clone()),
            Availability::Unavailable(why) => not_measured.push(NotMeasured {
                node: n.name.clone(),
                reason: why,
            }),
        }
    }
    let up = idle.len() + busy.len();
    if cfg.nodes > up {
        let down: Vec<String> = not_measured
            .iter()
            .map(|m| format!("{}: {}", m.node, m.reason))
            .collect();
        return Err(BenchError::invalid(format!(
            "--nodes {}: only {up} of {source}'s {} nodes are up ({})",
            cfg.nodes,
            candidates.len(),
            down.join("; ")
        )));
    }
    let named = match cfg.busy {
        Busy::Skip => {
            if idle.is_empty() {
                return Err(BenchError::Failed(format!(
                    "--busy skip: no node of {source} is idle now ({} busy); --busy wait queues \
                     for them",
                    busy.len()
                )));
            }
            let take = cfg.nodes.min(idle.len());
            if take < cfg.nodes {
                // The fleet comes up short: the busy nodes are the ones it did not measure.
                not_measured.extend(busy.iter().map(|n| NotMeasured {
                    node: n.clone(),
                    reason: "busy: other jobs hold it (--busy skip)".into(),
                }));
            } else if cfg.nodelist.is_none() {
                not_measured.clear();
            }
            Some(idle[..take].to_vec())
        }
        // Slurm picks among the nodes that are up; with --nodelist, the first N of it that are.
        Busy::Wait => {
            if cfg.nodelist.is_none() {
                not_measured.clear();
            }
            cfg.nodelist.as_ref().map(|_| {
                let mut usable: Vec<String> = candidates
                    .iter()
                    .filter(|n| !matches!(n.availability(), Availability::Unavailable(_)))
                    .map(|n| n.name.clone())
                    .collect();
                usable.truncate(cfg.nodes);
                usable
            })
        }
    };
    Ok((partition, (named, not_measured)))
}

pub fn submit_and_wait(cfg: &FleetConfig) -> Result<Outcome, BenchError> {
    for tool in ["sbatch", "sinfo", "squeue", "scontrol"] {
        slurm::require(tool)?;
    }
    let (partition, (named, not_measured)) = choose_nodes(cfg)?;
    let id = cfg.fleet_id.clone().unwrap_or_else(|| new_fleet_id(None));
    let dir = open_fleet_dir(&cfg.out, &id)?;
    let mut plan = new_plan(cfg, &id);
    plan.partition = Some(partition.clone());
    plan.not_measured = not_measured;
    if let Some(n) = &named {
        plan.nodes.clone_from(n);
    }
    write_plan(&dir, &plan)?;
    let text = script::batch_script(cfg, Some((&id, dir.root())), named.as_deref());
    // From here the plan is the driver's: it adds the job id and the rounds itself, so the
    // submitter never writes it again (a read-modify-write here could undo the driver's).
    let job = slurm::submit(&text)?;
    say(
        cfg,
        &format!(
            "fleet {id}: job {job} submitted ({} node{}, partition {partition}); results in {}",
            cfg.nodes,
            if cfg.nodes == 1 { "" } else { "s" },
            dir.root().display()
        ),
    );
    // A job the submitter lost sight of may still be running: its nodes are not marked failed.
    if follow(cfg, &dir, &job) {
        finalize(&dir, &job);
    }
    // The job's own `fleet run` reports its errors into Slurm's output file: pass them on.
    let out = dir.root().join(format!("slurm-{job}.out"));
    let error = std::fs::read_to_string(&out).ok().and_then(|t| {
        t.lines()
            .rev()
            .find(|l| l.starts_with("hostbench: error:") || l.starts_with("error:"))
            .map(str::to_string)
    });
    if read_plan(&dir).is_none_or(|p| p.nodes.is_empty()) {
        return Err(BenchError::Failed(format!(
            "job {job} ended before it measured any node: {} (see {})",
            error.as_deref().unwrap_or("no error reported"),
            out.display()
        )));
    }
    if let Some(line) = error {
        say(cfg, &format!("job {job}: {line} (in {})", out.display()));
    }
    Ok(Outcome {
        dir,
        job_id: Some(job),
    })
}

fn say(cfg: &FleetConfig, line: &str) {
    if !cfg.quiet {
        eprintln!("{line}");
    }
}

/// Follow the job until it leaves the queue; print a line whenever what it shows changes. A
/// failing `squeue` is asked again: only [`SQUEUE_PATIENCE`] of failures in a row end the watch,
/// and then the job is said to be unknown rather than over (it may still be running). True when
/// the job ended.
fn follow(cfg: &FleetConfig, dir: &FleetDir, job: &str) -> bool {
    let mut last = String::new();
    let t0 = Instant::now();
    let mut failing_since: Option<Instant> = None;
    loop {
        let (state, reason) = match slurm::job_state(job) {
            Ok(slurm::JobState::Queued(state, reason)) => {
                failing_since = None;
                (state, reason)
            }
            Ok(slurm::JobState::Ended) => break,
            Err(e) => {
                let since = *failing_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= SQUEUE_PATIENCE {
                    say(
                        cfg,
                        &format!(
                            "job {job}: squeue has failed for {} s ({e}); stopped watching, the job \
                             may still be running (squeue -j {job})",
                            SQUEUE_PATIENCE.as_secs()
                        ),
                    );
                    return false;
                }
                std::thread::sleep(POLL);
                continue;
            }
        };
        let line = match state.as_str() {
            "PENDING" if reason.is_empty() || reason == "None" => format!("job {job}: pending"),
            "PENDING" => format!("job {job}: pending ({reason})"),
            _ => progress_line(dir, job, &state),
        };
        if line != last {
            say(
                cfg,
                &format!("[{:>5.0} s] {line}", t0.elapsed().as_secs_f64()),
            );
            last = line;
        }
        std::thread::sleep(POLL);
    }
    let line = progress_line(dir, job, "ended").replacen(
        &format!("job {job}:"),
        &format!("job {job} ended:"),
        1,
    );
    say(
        cfg,
        &format!("[{:>5.0} s] {line}", t0.elapsed().as_secs_f64()),
    );
    true
}

fn progress_line(dir: &FleetDir, job: &str, state: &str) -> String {
    let Some(plan) = read_plan(dir) else {
        return format!("job {job}: {}", state.to_lowercase());
    };
    let t = Tally::of(dir, &plan.nodes);
    let mut line = format!(
        "job {job}: nodes {} done, {} running, {} failed of {}",
        t.ok,
        t.running + t.pending,
        t.failed,
        plan.nodes.len()
    );
    let total: usize = plan.rounds.iter().map(Vec::len).sum();
    if t.running + t.pending == 0 && total > 0 {
        let done = plan
            .rounds
            .iter()
            .flatten()
            .filter(|(a, b)| {
                read_status(&dir.pair_status(a, b)).is_some_and(|s| s.status.is_final())
            })
            .count();
        line.push_str(&format!("; network pairs {done} of {total}"));
    }
    line
}

/// After the job: every node (and pair) still pending or running ended with the job.
pub fn finalize(dir: &FleetDir, job: &str) {
    let Some(plan) = read_plan(dir) else {
        return;
    };
    let why = format!(
        "the job ({job}) ended before this finished: cancelled, out of time, or the driver's node \
         failed (see {}/slurm-{job}.out)",
        dir.root().display()
    );
    let mut end = StatusFile::new(Status::Failed);
    end.reason = Some(why);
    end.finished_at = Some(hostbench_core::model::now_rfc3339());
    for n in &plan.nodes {
        if !read_status(&dir.node_status(n)).is_some_and(|s| s.status.is_final()) {
            let _ = write_status(&dir.node_status(n), &end);
        }
    }
    for (a, b) in plan.rounds.iter().flatten() {
        if let Some(s) = read_status(&dir.pair_status(a, b)) {
            if !s.status.is_final() {
                let _ = write_status(&dir.pair_status(a, b), &end);
            }
        }
    }
}
