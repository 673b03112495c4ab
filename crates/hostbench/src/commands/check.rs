//! `hostbench check`: is this node fit for service, and if not, why, in one line.
//!
//! Reads the inventory and the hardware counters, measures (each subsystem's `check` profile at
//! the quick level, the standard run at the others), retries once every figure that missed its
//! yardstick, and hands everything to `hostbench_core::check` for the verdicts. The first line
//! on stdout is the node's verdict and reason (what node-problem-detector and a Slurm health
//! check read), one line per check follows; `--json` writes the verdict document and
//! `--openmetrics` the gauges for node_exporter. Bad input (the file, the baseline, a flag) is
//! refused before anything is measured. `--drain`/`--resume` act on the verdict in Slurm (`slurm`);
//! `--max-time` bounds the whole check (a watchdog gives `unknown`); one check runs at a time
//! per node (`lock`).

mod lock;
pub(crate) mod slurm;

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hostbench_core::check::expect::{self, Bound, Expectation};
use hostbench_core::check::judge::{self, Baseline, Yardsticks};
use hostbench_core::check::{Check, CheckDoc, Reported, Verdict, CHECK_SCHEMA};
use hostbench_core::model::{now_rfc3339, Host, Record, RunResult, Tool};
use hostbench_core::runner::write_json_atomic;
use hostbench_core::spec::Spec;
use hostbench_core::subsystem::{self, Profile, ReferenceScope, RunContext, Subsystem};
use hostbench_core::{BenchError, Runner, RunnerConfig};

use crate::cli::{CheckArgs, LevelArg, UnknownIs};
use crate::registry::SUBSYSTEMS;
use crate::Exit;

pub fn run(args: &CheckArgs) -> anyhow::Result<Exit> {
    let started = Instant::now();
    let started_at = now_rfc3339();
    // Everything the user gave is read before a second is spent measuring.
    let (spec, expectation) = match &args.expect {
        Some(p) => load_expect(p)?,
        None => (Spec::default(), None),
    };
    let peak_share = match (
        &args.peak_share,
        expectation.as_ref().and_then(|e| e.peak_share.as_ref()),
    ) {
        (Some(t), _) => (share(t, "--peak-share", true)?, "--peak-share".to_string()),
        (None, Some(s)) => (s.value, s.source.clone()),
        (None, None) => (judge::PEAK_SHARE, "the default".to_string()),
    };
    let tolerance = match (
        &args.tolerance,
        expectation.as_ref().and_then(|e| e.tolerance.as_ref()),
    ) {
        (Some(t), _) => share(t, "--tolerance", false)?,
        (None, Some(s)) => s.value,
        (None, None) => judge::TOLERANCE,
    };
    if let Some(p) = &args.openmetrics {
        writable("--openmetrics", p)?;
    }
    if let Some(p) = &args.write_expect {
        writable("--write-expect", p)?;
    }
    let json = match args.json.as_deref() {
        Some("") => return Err(BenchError::invalid("--json: empty file name").into()),
        Some("-") => Some(None),
        Some(p) => {
            writable("--json", Path::new(p))?;
            Some(Some(Path::new(p).to_path_buf()))
        }
        None => None,
    };
    if let Some(d) = &args.disk_dir {
        if !d.is_dir() {
            return Err(BenchError::invalid(format!(
                "--disk-dir {}: not a directory",
                d.display()
            ))
            .into());
        }
    }
    let max_time = match &args.max_time {
        Some(t) => Some(hostbench_core::units::parse_duration(t).map_err(|_| {
            BenchError::invalid(format!("--max-time {t}: not a duration (e.g. 30s, 5m)"))
        })?),
        None => None,
    };
    if let Some(d) = &args.duration {
        if args.level != LevelArg::Long {
            return Err(BenchError::invalid(format!(
                "--duration {d}: only the long level has a soak (--level long)"
            ))
            .into());
        }
        match hostbench_core::units::parse_duration(d) {
            Ok(t) if !t.is_zero() => {}
            _ => {
                return Err(BenchError::invalid(format!(
                    "--duration {d}: not a duration above zero (e.g. 10m, 1h)"
                ))
                .into())
            }
        }
    }
    if let Some(m) = &args.mem_share {
        if args.level != LevelArg::Long {
            return Err(BenchError::invalid(format!(
                "--mem-share {m}: only the long level has a soak (--level long)"
            ))
            .into());
        }
        super::burn::mem_share(m)?;
    }
    let chosen = subsystem::select(&SUBSYSTEMS, args.only.as_deref(), None)?;
    // The bound covers everything from here, asking scontrol included.
    if let Some(d) = max_time {
        watchdog(d, args);
    }
    // Outside Slurm, --drain/--resume is an error before anything is measured.
    let slurm_node = if args.drain || args.resume {
        Some(slurm::this_node(if args.drain {
            "--drain"
        } else {
            "--resume"
        })?)
    } else {
        None
    };
    if let Some(n) = &slurm_node {
        let _ = SLURM_NODE.set(n.clone());
    }
    let lvl = level_name(args.level);
    // Slurm's name for this node where a step or a health check runs it: nodes that share a
    // host name (a test cluster of namespaces, a container per node) are still told apart.
    let node_key = slurm_node
        .clone()
        .or_else(|| {
            std::env::var("SLURMD_NODENAME")
                .ok()
                .filter(|n| !n.is_empty())
        })
        .unwrap_or_else(slurm::own_hostname);
    let question = format!(
        "level={lvl} only={:?} expect={:?} baseline={:?} peak_share={:?} tolerance={:?} \
         disk_dir={:?} health_root={:?}",
        args.only,
        args.expect,
        args.baseline,
        args.peak_share,
        args.tolerance,
        args.disk_dir,
        hostbench_core::health::fixture_root()
    );
    let bound = max_time.unwrap_or(lock::WAIT_DEFAULT);
    let may_reuse =
        args.json.is_none() && args.openmetrics.is_none() && args.write_expect.is_none();
    let held = match lock::enter(&node_key, lvl, &question, bound, may_reuse)? {
        Ok(lock::Entry::Own { held, waited }) => {
            if let Some((w, pid)) = waited {
                eprintln!(
                    "hostbench check: waited {:.1} s for the check already running on this node \
                     (pid {pid}); this one measures (the other answered another question: level, --only, \
                     yardsticks or counter root; or this one writes --json, --openmetrics or \
                     --write-expect)",
                    w.as_secs_f64()
                );
            }
            held
        }
        Ok(lock::Entry::Reuse { last, waited }) => {
            if !decide() {
                park();
            }
            outln!("{}", last.first_line);
            eprintln!(
                "hostbench check: reused the verdict of the check that was running on this node \
                 (pid {}, level {}), after waiting {:.1} s for it; nothing measured twice",
                last.pid,
                last.level,
                waited.as_secs_f64()
            );
            return Ok(conclude(
                last.verdict,
                &last.reason,
                args,
                slurm_node.as_deref(),
            ));
        }
        Err(why) => {
            if !decide() {
                park();
            }
            outln!("UNKNOWN {why}");
            return Ok(conclude(
                Verdict::Unknown,
                &why,
                args,
                slurm_node.as_deref(),
            ));
        }
    };
    let host = super::host_inventory(&spec);
    let baseline = match &args.baseline {
        Some(b) => Some(load_baseline(b, args, &host)?),
        None => None,
    };

    // Measure: one subsystem at a time, so a figure that misses is retried with its own.
    let profile = match args.level {
        LevelArg::Quick => Profile::Check,
        LevelArg::Standard | LevelArg::Long => Profile::Standard,
    };
    let scratch = args.disk_dir.clone().unwrap_or_else(|| ".".into());
    let selected: Vec<&dyn Subsystem> = chosen
        .iter()
        .copied()
        .filter(|s| s.name() != "disk" || args.disk_dir.is_some())
        .collect();
    let ctx = RunContext {
        host: &host,
        spec: &spec,
        profile,
        scale: 1.0,
        duration: None,
        scratch_dir: &scratch,
        reference: ReferenceScope::Off,
        mem_share: None,
    };
    for s in &selected {
        s.prepare();
    }
    let config = RunnerConfig {
        progress: !args.quiet && RunnerConfig::default().progress,
        ..RunnerConfig::default()
    };
    let mut runner = Runner::new(config.clone(), host.clone());
    let mut owner: Vec<&dyn Subsystem> = Vec::new();
    for s in &selected {
        subsystem::run_all(&[*s], &mut runner, &ctx)?;
        let made = runner.result().records.len() - owner.len();
        owner.extend(std::iter::repeat_n(*s, made));
    }
    let first = runner.finish()?;

    let yard = Yardsticks {
        expect: expectation.as_ref(),
        baseline: baseline.as_ref(),
        peak_share,
        tolerance,
    };
    // Which figures missed, and the subsystems to measure again for them.
    let mut again: Vec<&dyn Subsystem> = Vec::new();
    for (r, s) in first.records.iter().zip(&owner) {
        if let Ok(y) = yard.for_record(r) {
            let met = if y.at_least {
                r.value >= y.bound
            } else {
                r.value <= y.bound
            };
            if !met && !again.iter().any(|a| a.name() == s.name()) {
                again.push(*s);
            }
        }
    }
    let retried = if again.is_empty() {
        None
    } else {
        let mut runner = Runner::new(config.clone(), host.clone());
        for s in &again {
            subsystem::run_all(&[*s], &mut runner, &ctx)?;
        }
        Some(runner.finish()?)
    };
    // An expectation is written from the worst of three passes: a shared host's figures move
    // between levels from one minute to the next (triad on the 2-vCPU VM: 43-45 GB/s or 75),
    // and a floor under the better level alone fails the node at the other.
    let floors_from = if args.write_expect.is_some() {
        let mut runner = Runner::new(config, host.clone());
        for _ in 0..WRITE_PASSES - 1 {
            subsystem::run_all(&selected, &mut runner, &ctx)?;
        }
        let more = runner.finish()?;
        worst_of(
            &first.records,
            more.records
                .iter()
                .chain(retried.iter().flat_map(|r| &r.records)),
        )
    } else {
        Vec::new()
    };

    let mut checks: Vec<Check> = Vec::new();
    let mut reported: Vec<Reported> = Vec::new();
    if let Some(e) = &expectation {
        checks.extend(judge::inventory(&host, e));
    }
    if let Some(h) = &host.health {
        let (c, r) = judge::health(
            h,
            expectation.as_ref(),
            judge::nvidia_on_bus(Path::new("/")),
        );
        checks.extend(c);
        reported.extend(r);
    }
    for r in &first.records {
        match yard.for_record(r) {
            Ok(y) => {
                let id = judge::figure_id(r);
                let second = retried.as_ref().and_then(|run| {
                    run.records
                        .iter()
                        .find(|x| judge::figure_id(x) == id)
                        .or_else(|| run.records.iter().find(|x| judge::same_case(x, r)))
                });
                let met = if y.at_least {
                    r.value >= y.bound
                } else {
                    r.value <= y.bound
                };
                checks.push(judge::figure(
                    r,
                    if met { None } else { second },
                    &y,
                    &first.host,
                ));
            }
            Err(why) => reported.push(judge::reported(r, why)),
        }
    }
    // The long level's soak: every result of the burn checked; a wrong one fails the node.
    if args.level == LevelArg::Long {
        let d = args.duration.as_deref().unwrap_or(LONG_SOAK);
        let share = args.mem_share.as_deref().unwrap_or(LONG_MEM_SHARE);
        checks.push(super::burn::soak_check(d, share, args.disk_dir.as_deref())?);
    }
    // A case that could not run is never a pass.
    for s in &first.skipped {
        checks.push(Check {
            id: s.benchmark.clone(),
            kind: "figure".into(),
            measured: serde_json::Value::Null,
            unit: None,
            expected: None,
            verdict: Verdict::Unknown,
            reason: format!("{}: could not run ({})", s.benchmark, s.reason),
            diagnosis: Vec::new(),
            retry: None,
        });
    }
    for n in &first.not_applicable {
        reported.push(Reported {
            id: n.subsystem.clone(),
            measured: serde_json::Value::Null,
            unit: None,
            note: format!("not on this host: {}", n.reason),
        });
    }
    let (verdict, reason) = judge::node(&checks);
    let level = level_name(args.level);
    let doc = CheckDoc {
        schema: CHECK_SCHEMA.into(),
        tool: Tool::default(),
        node: first.host.hostname.clone(),
        level: level.into(),
        started_at,
        finished_at: now_rfc3339(),
        seconds: started.elapsed().as_secs_f64(),
        yardsticks: yard.describe(),
        verdict,
        reason,
        checks,
        reported,
        host: first.host.clone(),
    };

    // The watchdog may have answered already (--max-time): then it ends the process.
    if !decide() {
        park();
    }
    let text = render(&doc, args.quiet, args.level == LevelArg::Long);
    match &json {
        Some(None) => {
            eprint!("{text}");
            let body = serde_json::to_string_pretty(&doc)?;
            outln!("{body}");
        }
        Some(Some(path)) => {
            out!("{text}");
            write_json_atomic(path, &doc).with_context(|| format!("writing {}", path.display()))?;
        }
        None => out!("{text}"),
    }
    if let Some(p) = &args.openmetrics {
        std::fs::write(p, openmetrics(&doc)).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &args.write_expect {
        let body = write_expect(
            &first.host,
            &floors_from,
            baseline.as_ref(),
            tolerance,
            level,
        );
        std::fs::write(p, body).with_context(|| format!("writing {}", p.display()))?;
        if !args.quiet {
            eprintln!(
                "Expectation written to {} (each figure's floor: its lowest of {WRITE_PASSES} passes less {:.0} %)",
                p.display(),
                tolerance * 100.0
            );
        }
    }
    held.leave(&lock::Last {
        level: lvl.into(),
        question,
        verdict,
        reason: doc.reason.clone(),
        first_line: format!("{} {}", verdict.word(), doc.reason),
        pid: std::process::id(),
        finished_unix: lock::now_unix(),
    });
    Ok(conclude(verdict, &doc.reason, args, slurm_node.as_deref()))
}

pub(crate) fn level_name(l: LevelArg) -> &'static str {
    match l {
        LevelArg::Quick => "quick",
        LevelArg::Standard => "standard",
        LevelArg::Long => "long",
    }
}

/// This node's Slurm name once known, for the watchdog (--drain with --unknown-is fail).
static SLURM_NODE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Set once, by whichever answers first: the check or the --max-time watchdog.
static DECIDED: AtomicBool = AtomicBool::new(false);

/// True for the first caller only.
fn decide() -> bool {
    !DECIDED.swap(true, Ordering::SeqCst)
}

/// The other side answered and is ending the process.
fn park() -> ! {
    loop {
        std::thread::park();
    }
}

/// After `d`, unless the check has answered: the verdict `unknown` ("exceeded --max-time"), acted
/// on as any unknown (a drain only with --unknown-is fail), and the process ends.
fn watchdog(d: Duration, args: &CheckArgs) {
    let given = args.max_time.clone().unwrap_or_default();
    let (unknown_is, drain, resume) = (args.unknown_is, args.drain, args.resume);
    std::thread::spawn(move || {
        std::thread::sleep(d);
        if !decide() {
            return;
        }
        let reason = format!("exceeded --max-time {given}: the check had not finished");
        outln!("UNKNOWN {reason}");
        let exit = conclude_with(
            Verdict::Unknown,
            &reason,
            unknown_is,
            drain,
            resume,
            SLURM_NODE.get().map(String::as_str),
        );
        std::process::exit(exit as i32);
    });
}

/// The exit code for `verdict`, after acting on it in Slurm (--drain/--resume).
fn conclude(verdict: Verdict, reason: &str, args: &CheckArgs, node: Option<&str>) -> Exit {
    conclude_with(
        verdict,
        reason,
        args.unknown_is,
        args.drain,
        args.resume,
        node,
    )
}

fn conclude_with(
    verdict: Verdict,
    reason: &str,
    unknown_is: Option<UnknownIs>,
    drain: bool,
    resume: bool,
    node: Option<&str>,
) -> Exit {
    let treat_as_fail = verdict == Verdict::Fail
        || (verdict == Verdict::Unknown && unknown_is == Some(UnknownIs::Fail));
    if let Some(node) = node {
        for line in slurm::act(node, verdict, reason, treat_as_fail, drain, resume) {
            eprintln!("{line}");
        }
    }
    match (verdict, unknown_is) {
        (Verdict::Pass | Verdict::Warn, _) => Exit::Ok,
        (Verdict::Fail, _) | (Verdict::Unknown, Some(UnknownIs::Fail)) => Exit::Failure,
        (Verdict::Unknown, Some(UnknownIs::Ok)) => Exit::Ok,
        (Verdict::Unknown, None) => Exit::Unknown,
    }
}

/// How many passes of the probes an expectation is written from (see `worst_of`).
const WRITE_PASSES: usize = 3;

/// The long level's soak when --duration is not given: DCGM's level 3 is about 15 minutes, and
/// ten minutes of every unit at its peak is the shortest soak that heats a node to its steady
/// state.
const LONG_SOAK: &str = "10m";
/// The long level's memory soak covers what `hostbench burn` covers by default.
const LONG_MEM_SHARE: &str = "0.5";

/// Each figure of `first` at its worst over `first` and `more` (the lowest throughput, the
/// highest latency): the level a healthy node may be found at.
fn worst_of<'a>(first: &[Record], more: impl Iterator<Item = &'a Record> + Clone) -> Vec<Record> {
    first
        .iter()
        .map(|r| {
            let id = judge::figure_id(r);
            let mut w = r.clone();
            for m in more
                .clone()
                .filter(|m| m.incomplete.is_none() && judge::figure_id(m) == id)
            {
                let worse = if r.metric == hostbench_core::model::Metric::Throughput {
                    m.value < w.value
                } else {
                    m.value > w.value
                };
                if worse {
                    w.value = m.value;
                }
            }
            w
        })
        .collect()
}

/// The expectation file: a spec file whose `[expect]` section is resolved to lines.
fn load_expect(path: &Path) -> Result<(Spec, Option<Expectation>), BenchError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BenchError::invalid(format!("--expect {}: {e}", path.display())))?;
    let bad = |msg: String| BenchError::invalid(format!("--expect {}: {msg}", path.display()));
    let spec = Spec::parse(&text).map_err(bad)?;
    let Some(raw) = &spec.expect else {
        return Err(bad(
            "no [expect] section (see `hostbench check --write-expect`)".into(),
        ));
    };
    let e = expect::resolve(raw, &text, path).map_err(bad)?;
    Ok((spec, Some(e)))
}

/// A share flag: a number in (0, 1] (`open_low`) or [0, 1).
fn share(text: &str, flag: &str, open_low: bool) -> Result<f64, BenchError> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| BenchError::invalid(format!("{flag}: '{text}' is not a number")))?;
    let ok = if open_low {
        v > 0.0 && v <= 1.0
    } else {
        (0.0..1.0).contains(&v)
    };
    if !ok {
        let range = if open_low { "(0, 1]" } else { "[0, 1)" };
        return Err(BenchError::invalid(format!(
            "{flag}: {v} is not in {range}"
        )));
    }
    Ok(v)
}

/// Refuse an output path whose directory does not exist, before measuring.
fn writable(flag: &str, path: &Path) -> Result<(), BenchError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if path.as_os_str().is_empty() || !dir.is_dir() {
        return Err(BenchError::invalid(format!(
            "{flag} {}: no such directory",
            path.display()
        )));
    }
    Ok(())
}

/// `--baseline`: a stored run (`12`, `latest`, `latest~N`), `last:N` (the median of this host's
/// last N stored runs), or a file: a run.json, or a fleet.json whose nodes of this CPU model
/// give their median.
fn load_baseline(text: &str, args: &CheckArgs, host: &Host) -> anyhow::Result<Baseline> {
    let path = Path::new(text);
    if text.ends_with(".json") || path.is_file() {
        let body = std::fs::read_to_string(path)
            .map_err(|e| BenchError::invalid(format!("--baseline {text}: {e}")))?;
        let schema = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("schema").and_then(|s| s.as_str()).map(str::to_string));
        if schema.as_deref() == Some(hostbench_report::fleet::FLEET_SCHEMA) {
            return fleet_baseline(path, &body, host);
        }
        let run = hostbench_report::load::parse_run(&body, text)
            .map_err(|e| BenchError::invalid(format!("--baseline {e}")))?;
        return Ok(Baseline::median_of(text.to_string(), &[&run]));
    }
    let db = crate::settings::db_path(&args.history)?;
    if !db.exists() {
        return Err(BenchError::invalid(format!(
            "--baseline {text}: no history database at {} (runs are stored by `hostbench run`)",
            db.display()
        ))
        .into());
    }
    let store = hostbench_report::history::Store::open(&db)?;
    if let Some(n) = text.strip_prefix("last:") {
        let n: usize = n.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
            BenchError::invalid(format!("--baseline {text}: N must be a count of runs"))
        })?;
        let mine: Vec<i64> = store
            .list()?
            .into_iter()
            .rev()
            .filter(|s| s.hostname == host.hostname && s.interrupted.is_none())
            .take(n)
            .map(|s| s.id)
            .collect();
        if mine.is_empty() {
            return Err(BenchError::invalid(format!(
                "--baseline {text}: no stored run of {} in {}",
                host.hostname,
                db.display()
            ))
            .into());
        }
        let runs: Vec<RunResult> = mine
            .iter()
            .map(|id| store.load(*id).map(|r| r.1))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&RunResult> = runs.iter().collect();
        return Ok(Baseline::median_of(
            format!("median of this host's last {} stored runs", runs.len()),
            &refs,
        ));
    }
    let id = store
        .resolve(text)
        .map_err(|e| BenchError::invalid(format!("--baseline: {e}")))?;
    let (_, run) = store.load(id)?;
    Ok(Baseline::median_of(format!("run #{id}"), &[&run]))
}

/// A fleet report's nodes of this host's CPU model, their median per figure.
/// The GPU models NVML named on a host, sorted; None where its counters were not read.
fn gpu_models(host: &Host) -> Option<Vec<String>> {
    let h = host.health.as_ref()?;
    let mut v: Vec<String> = h
        .readings
        .iter()
        .filter(|r| r.id == "health.gpu")
        .filter_map(|r| r.label.clone())
        .collect();
    v.sort();
    Some(v)
}

fn fleet_baseline(path: &Path, body: &str, host: &Host) -> anyhow::Result<Baseline> {
    let doc: hostbench_report::fleet::FleetDoc = serde_json::from_str(body)
        .map_err(|e| BenchError::invalid(format!("--baseline {}: {e}", path.display())))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut runs = Vec::new();
    for n in &doc.nodes {
        let Some(rel) = &n.run else { continue };
        if let Ok(run) = hostbench_report::load::load_run(&dir.join(rel)) {
            // The same node type: the CPU model, and the GPU models where both runs read them.
            let same_gpus = match (gpu_models(&run.host), gpu_models(host)) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            };
            if run.host.cpu.model == host.cpu.model && same_gpus {
                runs.push(run);
            }
        }
    }
    if runs.is_empty() {
        return Err(BenchError::invalid(format!(
            "--baseline {}: no node of the fleet has this CPU model ({}) and GPUs",
            path.display(),
            host.cpu.model
        ))
        .into());
    }
    let refs: Vec<&RunResult> = runs.iter().collect();
    Ok(Baseline::median_of(
        format!(
            "fleet {}'s median of {} node(s) with this CPU",
            doc.fleet_id,
            runs.len()
        ),
        &refs,
    ))
}

/// The verdict as text: the node's line, one line per check, the figures only reported.
fn render(doc: &CheckDoc, quiet: bool, long: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{} {}", doc.verdict.word(), doc.reason);
    if quiet {
        return o;
    }
    let mut checks: Vec<&Check> = doc.checks.iter().collect();
    // The worst first, in the order they were made within each verdict.
    checks.sort_by_key(|c| std::cmp::Reverse(c.verdict));
    for c in checks {
        let _ = writeln!(o, "  {:<7} {}", c.verdict.name(), c.reason);
    }
    for r in &doc.reported {
        let value = match (r.measured.as_f64(), &r.unit) {
            (Some(v), Some(u)) => format!(": {}", hostbench_core::units::format_value(v, u)),
            _ => String::new(),
        };
        let _ = writeln!(o, "  {:<7} {}{value} (not judged: {})", "-", r.id, r.note);
    }
    let _ = writeln!(
        o,
        "level {} in {:.1} s; held against: {}",
        doc.level,
        doc.seconds,
        doc.yardsticks.join(", then ")
    );
    if long {
        let _ = writeln!(
            o,
            "long: the standard level's figures, then the burn-in soak (`hostbench burn`)"
        );
    }
    o
}

/// `hostbench_check_ok` (1 pass or warn, 0 fail or unknown) and `hostbench_check_unknown` per
/// check and for the node (`check="node"`), and when the check ran. No sample timestamps:
/// node_exporter's textfile collector drops files that carry them.
fn openmetrics(doc: &CheckDoc) -> String {
    let esc = |v: &str| {
        v.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    };
    let host = esc(&doc.node);
    let mut rows: Vec<(String, Verdict)> = vec![("node".into(), doc.verdict)];
    rows.extend(doc.checks.iter().map(|c| (c.id.clone(), c.verdict)));
    let mut o = String::new();
    for (name, help, f) in [
        (
            "hostbench_check_ok",
            "1 where the check (or the node, check=\"node\") passed or warned, 0 where it failed or could not be judged",
            (|v: Verdict| matches!(v, Verdict::Pass | Verdict::Warn)) as fn(Verdict) -> bool,
        ),
        (
            "hostbench_check_unknown",
            "1 where the check (or the node) could not be judged",
            |v: Verdict| v == Verdict::Unknown,
        ),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}");
        let _ = writeln!(o, "# TYPE {name} gauge");
        for (check, v) in &rows {
            let _ = writeln!(o, "{name}{{host=\"{host}\",check=\"{}\"}} {}", esc(check), u8::from(f(*v)));
        }
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let _ = writeln!(o, "# HELP hostbench_check_last_run_timestamp_seconds When hostbench check last finished (Unix time)");
    let _ = writeln!(o, "# TYPE hostbench_check_last_run_timestamp_seconds gauge");
    let _ = writeln!(
        o,
        "hostbench_check_last_run_timestamp_seconds{{host=\"{host}\"}} {now:.0}"
    );
    o
}

/// An expectation file from this node: its inventory, and a floor under each figure (its
/// value less `tolerance`; a latency's ceiling its value plus it), for an operator to edit.
/// With a baseline (a fleet's median node, the median of stored runs) a figure it has is taken
/// from it rather than from this node, so one good fleet writes the file for its node type.
fn write_expect(
    host: &Host,
    records: &[Record],
    baseline: Option<&Baseline>,
    tolerance: f64,
    level: &str,
) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# hostbench check expectations, written by `hostbench check --level {level} --write-expect` on {}\n\
         # at {}. Each figure's floor is its lowest of {WRITE_PASSES} passes here (or the baseline's)\n\
         # less {:.0} %; edit to taste.\n",
        host.hostname,
        now_rfc3339(),
        tolerance * 100.0
    );
    let _ = writeln!(o, "[expect]");
    let _ = writeln!(o, "cpu_model = {}", toml_str(&host.cpu.model));
    let _ = writeln!(o, "cpus = {}", host.cpu.threads);
    let gib = host.memory.total_bytes as f64 / (1u64 << 30) as f64;
    let _ = writeln!(o, "memory_gib = {:.1}", (gib * 10.0).floor() / 10.0);
    if let Some(h) = &host.health {
        let gpus: Vec<&str> = h
            .readings
            .iter()
            .filter(|r| r.id == "health.gpu")
            .filter_map(|r| r.label.as_deref())
            .collect();
        if !gpus.is_empty() {
            let _ = writeln!(o, "gpus = {}", gpus.len());
            let _ = writeln!(o, "gpu_model = {}", toml_str(gpus[0]));
        }
        let readable: Vec<String> = expect::SOURCES
            .iter()
            .filter(|s| h.readings.iter().any(|r| r.id == **s))
            .map(|s| toml_str(s))
            .collect();
        let _ = writeln!(
            o,
            "# the counter sources this node could read; a later check that cannot is `unknown`"
        );
        let _ = writeln!(o, "require = [{}]", readable.join(", "));
    }
    for r in records.iter().filter(|r| r.incomplete.is_none()) {
        let from = baseline.and_then(|b| {
            b.figures
                .iter()
                .find(|f| f.benchmark == r.benchmark && f.params == r.params)
                .map(|f| (f.value, b.label.as_str()))
        });
        let (value, whose) = from.unwrap_or((r.value, "this node"));
        let at_least = r.metric == hostbench_core::model::Metric::Throughput;
        let bound = if at_least {
            Bound::Min(value * (1.0 - tolerance))
        } else {
            Bound::Max(value * (1.0 + tolerance))
        };
        let params: Vec<String> = r
            .params
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k} = {}",
                    match v {
                        serde_json::Value::String(s) => toml_str(s),
                        other => other.to_string(),
                    }
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "\n[[expect.figure]]  # {} by {whose}",
            hostbench_core::units::format_value(value, &r.unit)
        );
        let _ = writeln!(o, "benchmark = {}", toml_str(&r.benchmark));
        let _ = writeln!(o, "params = {{ {} }}", params.join(", "));
        match bound {
            Bound::Min(x) => {
                let _ = writeln!(o, "min = {x:.6e}");
            }
            Bound::Max(x) => {
                let _ = writeln!(o, "max = {x:.6e}");
            }
            Bound::ShareOfPeak(_) => {}
        }
    }
    o
}

/// A TOML basic string: quotes and backslashes escaped, control characters as `\uXXXX`.
fn toml_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

#[cfg(test)]
mod tests;
