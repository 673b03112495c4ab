//! `hostbench fleet check`: `hostbench check` on every node at once through the fleet's Slurm
//! machinery (sbatch, then one srun step per node writing nodes/NODE/check.json), then one
//! table of verdicts from the fleet directory (`hostbench_report::fleet::verdicts`), and with
//! --drain the failing nodes drained through scontrol with their reason.
//!
//! The drain is the submitter's: the batch job re-runs this command inside its allocation to
//! drive the nodes and is not given --drain, so each node is drained once, by the process that
//! saw every verdict.

use std::path::{Path, PathBuf};

use hostbench_core::check::Verdict;
use hostbench_core::BenchError;
use hostbench_fleet::{Busy, FleetConfig, NodeJob, PairSchedule};
use hostbench_report::fleet::layout::FleetDir;
use hostbench_report::fleet::verdicts::{self, Answer, FleetCheck, NodeVerdict};

use crate::cli::{BusyArg, FleetCheckArgs, UnknownIs};
use crate::settings;
use crate::Exit;

pub fn run(args: &FleetCheckArgs) -> anyhow::Result<Exit> {
    let margin = settings::percent("fleet-margin", &args.fleet_margin)?;
    if !(0.0..1.0).contains(&margin) {
        return Err(BenchError::invalid(format!(
            "--fleet-margin {}: expected a share under 100 %",
            args.fleet_margin
        ))
        .into());
    }
    let json = match args.json.as_deref() {
        Some("") => return Err(BenchError::invalid("--json: empty file name").into()),
        Some(t) => Some(settings::out_target("json", t)?),
        None => None,
    };
    let inside = inside_allocation();
    if args.drain && !inside {
        hostbench_fleet::slurm::require("scontrol")?;
    }
    let cfg = config(args)?;
    let outcome = hostbench_fleet::run(&cfg)?;
    let dir = &outcome.dir;
    let level = super::super::check::level_name(args.level);
    let answers = answers(dir)?;
    let nodes = verdicts::judge(&answers, args.expect.is_none().then_some(margin));
    let worst = nodes
        .iter()
        .map(|n| n.verdict)
        .max()
        .unwrap_or(Verdict::Unknown);
    let doc = FleetCheck {
        schema: verdicts::FLEET_CHECK_SCHEMA.into(),
        fleet_id: dir
            .root()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        level: level.into(),
        verdict: worst,
        yardstick: match &args.expect {
            Some(f) => format!("the expectation file {}", f.display()),
            None => format!(
                "each node's own check, and the fleet median ({:.0} % margin, peers of the same \
                 CPU model)",
                100.0 * margin
            ),
        },
        nodes,
    };
    let text = serde_json::to_string_pretty(&doc)? + "\n";
    let path = dir.root().join("fleet-check.json");
    std::fs::write(&path, &text).map_err(|e| BenchError::io(&path, e))?;
    let to_stdout = matches!(json, Some(settings::JsonTarget::Stdout));
    let say = |line: &str| {
        if to_stdout {
            eprintln!("{line}");
        } else {
            outln!("{line}");
        }
    };
    for line in table(&doc) {
        say(&line);
    }
    if !inside {
        for n in &doc.nodes {
            let treat_as_fail = n.verdict == Verdict::Fail
                || (n.verdict == Verdict::Unknown
                    && args.unknown_is == Some(UnknownIs::Fail)
                    && n.basis != "no answer");
            for line in super::super::check::slurm::act(
                &n.node,
                n.verdict,
                &n.reason,
                treat_as_fail,
                args.drain,
                false,
            ) {
                say(&line);
            }
        }
    }
    match json {
        Some(settings::JsonTarget::Stdout) => out!("{text}"),
        Some(settings::JsonTarget::File(p)) => {
            std::fs::write(&p, &text).map_err(|e| BenchError::io(&p, e))?
        }
        None => {}
    }
    Ok(match (worst, args.unknown_is) {
        (Verdict::Pass | Verdict::Warn, _) => Exit::Ok,
        (Verdict::Unknown, Some(UnknownIs::Ok)) => Exit::Ok,
        (Verdict::Unknown, None) => Exit::Unknown,
        _ => Exit::Failure,
    })
}

/// Inside a Slurm allocation (the batch job re-running this command), not its submitter.
fn inside_allocation() -> bool {
    std::env::var("SLURM_JOB_ID").is_ok_and(|j| !j.is_empty())
}

/// The terminal table: a first line with the finding (the failing nodes named, or "every node
/// passes"), then one line a node, worst first.
fn table(doc: &FleetCheck) -> Vec<String> {
    let mut rows: Vec<&NodeVerdict> = doc.nodes.iter().collect();
    rows.sort_by_key(|n| std::cmp::Reverse(n.verdict));
    let named = |v: Verdict| -> Vec<String> {
        rows.iter()
            .filter(|n| n.verdict == v)
            .map(|n| n.node.clone())
            .collect()
    };
    let (fails, unknown) = (named(Verdict::Fail), named(Verdict::Unknown));
    let mut first = format!(
        "{} fleet check, level {}, {} node{}",
        doc.verdict.word(),
        doc.level,
        doc.nodes.len(),
        if doc.nodes.len() == 1 { "" } else { "s" }
    );
    if !fails.is_empty() {
        first += &format!(": fail {}", fails.join(", "));
    }
    if !unknown.is_empty() {
        first += &format!(
            "{} unknown {}",
            if fails.is_empty() { ":" } else { ";" },
            unknown.join(", ")
        );
    }
    if fails.is_empty() && unknown.is_empty() {
        first += ": every node passes";
    }
    let width = rows.iter().map(|n| n.node.len()).max().unwrap_or(4).max(4);
    let mut out = vec![first, format!("  {:width$}  verdict  reason", "node")];
    for n in rows {
        out.push(format!(
            "  {:width$}  {:7}  {}{}",
            n.node,
            n.verdict.name(),
            n.reason,
            if n.basis == "fleet median" {
                " [fleet median]"
            } else {
                ""
            }
        ));
    }
    out.push(format!("held against: {}", doc.yardstick));
    out
}

/// Every node of the plan with its verdict document or why it has none; nodes Slurm would not
/// run it on (down, drained) are listed with Slurm's reason.
fn answers(dir: &FleetDir) -> anyhow::Result<Vec<Answer>> {
    let plan = hostbench_fleet::read_plan(dir)
        .ok_or_else(|| BenchError::Failed(format!("{}: no plan.json", dir.root().display())))?;
    let mut out: Vec<Answer> = plan
        .nodes
        .iter()
        .map(|node| Answer {
            node: node.clone(),
            doc: read_answer(dir, node),
        })
        .collect();
    out.extend(plan.not_measured.iter().map(|m| Answer {
        node: m.node.clone(),
        doc: Err(format!("not checked: {}", m.reason)),
    }));
    Ok(out)
}

fn read_answer(dir: &FleetDir, node: &str) -> Result<serde_json::Value, String> {
    let doc = std::fs::read(dir.node_check(node))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .filter(|v| v["verdict"].is_string());
    if let Some(doc) = doc {
        return Ok(doc);
    }
    let why = hostbench_report::fleet::read_status(&dir.node_status(node), "status.json")
        .ok()
        .flatten()
        .and_then(|s| s.reason)
        .unwrap_or_else(|| "its check left no verdict".into());
    Err(why)
}

fn config(args: &FleetCheckArgs) -> anyhow::Result<FleetConfig> {
    let out = std::path::absolute(&args.out)
        .map_err(|e| BenchError::invalid(format!("--out {}: {e}", args.out.display())))?;
    let absolute = |flag: &str, p: &Path| -> Result<PathBuf, BenchError> {
        let p = std::path::absolute(p)
            .map_err(|e| BenchError::invalid(format!("{flag} {}: {e}", p.display())))?;
        Ok(p)
    };
    let expect = args
        .expect
        .as_ref()
        .map(|p| {
            if !p.is_file() {
                return Err(BenchError::invalid(format!(
                    "--expect {}: no such file",
                    p.display()
                )));
            }
            absolute("--expect", p)
        })
        .transpose()?;
    let disk = super::run::node_path("--disk-dir", args.disk_dir.as_ref())?;
    let inside = inside_allocation();
    let nodes = match &args.nodes {
        Some(n) => match n.trim().parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(BenchError::invalid(format!(
                    "--nodes '{n}': expected a node count of at least 1"
                ))
                .into())
            }
        },
        None if inside => std::env::var("SLURM_JOB_NUM_NODES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(1),
        None => up_nodes(args)?,
    };
    let exe = std::env::current_exe()
        .map_err(|e| BenchError::Failed(format!("this binary's path: {e}")))?;
    let level = super::super::check::level_name(args.level);
    // Each node's `hostbench check` arguments.
    let mut run_args = vec!["--level".to_string(), level.to_string()];
    if let Some(e) = &expect {
        run_args.extend(["--expect".into(), e.display().to_string()]);
    }
    for (flag, v) in [
        ("--peak-share", &args.peak_share),
        ("--only", &args.only),
        ("--max-time", &args.max_time),
    ] {
        if let Some(v) = v {
            run_args.extend([flag.to_string(), v.clone()]);
        }
    }
    // What the job's own `fleet check` repeats: everything but the acting (--drain, --json),
    // which stays with this submitter.
    let mut forward = vec!["--nodes".to_string(), nodes.to_string()];
    forward.extend(run_args.iter().cloned());
    forward.extend(["--fleet-margin".into(), args.fleet_margin.clone()]);
    forward.extend(["--out".into(), out.display().to_string()]);
    if let Some(p) = &args.partition {
        forward.extend(["--partition".into(), p.clone()]);
    }
    if let Some(d) = &disk {
        forward.extend(["--disk-dir".into(), d.display().to_string()]);
    }
    forward.push("--quiet".into());
    Ok(FleetConfig {
        nodes,
        nodelist: args.nodelist.clone(),
        partition: args.partition.clone(),
        time: args.time.clone(),
        profile: format!("check-{level}"),
        scale: 1.0,
        pairs: PairSchedule::None,
        busy: match args.busy {
            BusyArg::Wait => Busy::Wait,
            BusyArg::Skip => Busy::Skip,
        },
        out,
        fleet_id: args.fleet_id.clone(),
        scratch: disk,
        run_args,
        forward_args: forward,
        exe,
        quiet: args.quiet,
        job: NodeJob::Check,
    })
}

/// Without --nodes: every node of --nodelist (else of the partition) that Slurm would run a job
/// on; the others are listed by the fleet as not measured, and here as unknown.
fn up_nodes(args: &FleetCheckArgs) -> anyhow::Result<usize> {
    use hostbench_fleet::slurm::{self, Availability};
    let (partition, nodes) = slurm::partition_nodes(args.partition.as_deref())?;
    let names = match &args.nodelist {
        Some(l) => slurm::hostnames(l)?,
        None => nodes.iter().map(|n| n.name.clone()).collect(),
    };
    let up = nodes
        .iter()
        .filter(|n| names.contains(&n.name))
        .filter(|n| !matches!(n.availability(), Availability::Unavailable(_)))
        .count();
    if up == 0 {
        return Err(BenchError::invalid(format!(
            "no node of {} is up to check",
            args.nodelist
                .as_deref()
                .map_or(format!("partition {partition}"), |l| format!(
                    "--nodelist {l}"
                ))
        ))
        .into());
    }
    Ok(up)
}
