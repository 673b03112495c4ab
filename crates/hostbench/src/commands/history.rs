//! `hostbench history list | show RUN | compare RUN_A RUN_B | import FILE.json`.
//!
//! `compare fleet:A fleet:B` compares two fleet runs: node by node (matched by node name), then
//! the fleet medians.

use hostbench_report::compare::{compare, fleet_medians, render_text, CompareConfig, Verdict};
use hostbench_report::history::Store;
use hostbench_report::load::load_run;
use hostbench_report::{Exporter, ReportError, TerminalExporter};

use crate::cli::{HistoryArgs, HistoryCommand};
use crate::settings;
use crate::Exit;

pub fn run(args: &HistoryArgs) -> anyhow::Result<Exit> {
    let path = settings::db_path(&args.db)?;
    if let HistoryCommand::Import { file } = &args.command {
        let run = load_run(file)?;
        let mut store = Store::open(&path)?;
        let dir = file.parent().filter(|d| !d.as_os_str().is_empty());
        let id = store.insert(&run, None, dir)?;
        outln!("stored run #{id} in {}", path.display());
        return Ok(Exit::Ok);
    }
    if !path.exists() {
        if matches!(args.command, HistoryCommand::List) {
            eprintln!("no runs stored yet (no database at {})", path.display());
            return Ok(Exit::Ok);
        }
        return Err(ReportError::bad(format!(
            "{}: no history database (run `hostbench run` first, or give --db)",
            path.display()
        ))
        .into());
    }
    let store = Store::open(&path)?;
    match &args.command {
        HistoryCommand::List => {
            let runs = store.list()?;
            if runs.is_empty() {
                eprintln!("no runs stored yet in {}", path.display());
                return Ok(Exit::Ok);
            }
            let mut rows = vec![[
                "ID".to_string(),
                "Started (UTC)".into(),
                "Host".into(),
                "Profile".into(),
                "Records".into(),
                "Skipped".into(),
                "Status".into(),
                "Fleet / node".into(),
                "Results".into(),
            ]];
            for r in runs {
                rows.push([
                    r.id.to_string(),
                    r.started_at,
                    r.hostname,
                    r.profile.unwrap_or_else(|| "-".into()),
                    r.records.to_string(),
                    r.skipped.to_string(),
                    match (&r.interrupted, &r.finished_at) {
                        (Some(sig), _) => format!("interrupted ({sig})"),
                        (None, None) => "partial".into(),
                        (None, Some(_)) => "complete".into(),
                    },
                    match (&r.fleet, &r.node) {
                        (Some(f), Some(n)) => format!("{f} / {n}"),
                        (Some(f), None) => f.clone(),
                        _ => "-".into(),
                    },
                    r.results_dir.unwrap_or_else(|| "-".into()),
                ]);
            }
            out!("{}", hostbench_report::export::aligned(&rows));
            Ok(Exit::Ok)
        }
        HistoryCommand::Show { run } => {
            let id = store.resolve(run)?;
            let (s, result) = store.load(id)?;
            outln!(
                "Run #{} on {}, {} to {} (hostbench {}{})",
                s.id,
                s.hostname,
                s.started_at,
                s.finished_at.as_deref().unwrap_or("unfinished"),
                s.tool_version,
                s.profile
                    .map_or(String::new(), |p| format!(", profile {p}"))
            );
            out!("{}", TerminalExporter.render(&result)?);
            Ok(Exit::Ok)
        }
        HistoryCommand::Compare {
            a,
            b,
            threshold,
            noise,
        } => {
            let cfg = CompareConfig {
                threshold: settings::percent("threshold", threshold)?,
                noise: settings::percent("noise", noise)?,
                ..CompareConfig::default()
            };
            if let (Some(fa), Some(fb)) = (a.strip_prefix("fleet:"), b.strip_prefix("fleet:")) {
                return compare_fleets(&store, fa, fb, &cfg);
            }
            let (ia, ib) = (store.resolve(a)?, store.resolve(b)?);
            let (_, ra) = store.load(ia)?;
            let (_, rb) = store.load(ib)?;
            let cmp = compare(&ra, &rb, &cfg);
            out!(
                "{}",
                render_text(&cmp, &cfg, &format!("#{ia}"), &format!("#{ib}"))
            );
            if cmp.changes.is_empty() {
                eprintln!("runs #{ia} and #{ib} have no record in common");
            }
            Ok(if cmp.failures() > 0 {
                Exit::Regressed
            } else {
                Exit::Ok
            })
        }
        HistoryCommand::Import { .. } => Ok(Exit::Ok),
    }
}

/// Two fleet runs: a line per node present in both (its verdict counts and worst change), the
/// nodes in only one, then the medians record by record. Exit code 4 when a node or a median
/// regressed beyond the threshold.
fn compare_fleets(store: &Store, a: &str, b: &str, cfg: &CompareConfig) -> anyhow::Result<Exit> {
    let (ida, nodes_a) = store.fleet_runs(a)?;
    let (idb, nodes_b) = store.fleet_runs(b)?;
    let load = |nodes: &[(String, i64)]| -> anyhow::Result<Vec<(String, hostbench_core::model::RunResult)>> {
        nodes
            .iter()
            .map(|(n, id)| Ok((n.clone(), store.load(*id)?.1)))
            .collect()
    };
    let (runs_a, runs_b) = (load(&nodes_a)?, load(&nodes_b)?);
    let mut rows = vec![[
        "Node".to_string(),
        "Regressed".into(),
        "Improved".into(),
        "Within noise".into(),
        "Worst change".into(),
    ]];
    let mut failures = 0;
    for (node, ra) in &runs_a {
        let Some((_, rb)) = runs_b.iter().find(|(n, _)| n == node) else {
            continue;
        };
        let cmp = compare(ra, rb, cfg);
        failures += cmp.failures();
        let worst = cmp
            .changes
            .iter()
            .filter(|c| c.verdict == Verdict::Regressed)
            .max_by(|x, y| x.relative.abs().total_cmp(&y.relative.abs()))
            .map_or("-".to_string(), |c| {
                format!("{:+.1} % {} {}", c.relative * 100.0, c.benchmark, c.params)
            });
        rows.push([
            node.clone(),
            cmp.count(Verdict::Regressed).to_string(),
            cmp.count(Verdict::Improved).to_string(),
            cmp.count(Verdict::WithinNoise).to_string(),
            worst,
        ]);
    }
    outln!(
        "Fleet {ida} ({} nodes) -> fleet {idb} ({} nodes), node by node:",
        runs_a.len(),
        runs_b.len()
    );
    out!("{}", hostbench_report::export::aligned(&rows));
    for (side, mine, other) in [("A", &runs_a, &runs_b), ("B", &runs_b, &runs_a)] {
        let only: Vec<&str> = mine
            .iter()
            .filter(|(n, _)| !other.iter().any(|(m, _)| m == n))
            .map(|(n, _)| n.as_str())
            .collect();
        if !only.is_empty() {
            outln!("Only in fleet {side}: {}", only.join(", "));
        }
    }
    let strip = |v: &[(String, hostbench_core::model::RunResult)]| {
        v.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>()
    };
    if let (Some(ma), Some(mb)) = (
        fleet_medians(&strip(&runs_a)),
        fleet_medians(&strip(&runs_b)),
    ) {
        let cmp = compare(&ma, &mb, cfg);
        failures += cmp.failures();
        outln!("\nFleet medians (judged by the noise floor; the node lines carry the statistics):");
        out!(
            "{}",
            render_text(&cmp, cfg, &format!("fleet {ida}"), &format!("fleet {idb}"))
        );
    }
    Ok(if failures > 0 {
        Exit::Regressed
    } else {
        Exit::Ok
    })
}
