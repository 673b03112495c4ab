//! `hostbench fleet run`: resolve the flags into a `FleetConfig`, let hostbench-fleet submit or
//! drive the job, then write the fleet report from the fleet directory and store every node's
//! run in the history with the fleet id (only where the user started it: the job's own driver
//! leaves that to the submitter that waits for it).

use hostbench_core::subsystem;
use hostbench_fleet::{Busy, FleetConfig, PairSchedule};
use hostbench_report::fleet::layout::FleetDir;

use crate::cli::{BusyArg, FleetRunArgs};
use crate::registry::SUBSYSTEMS;
use crate::settings;
use crate::Exit;

pub fn run(args: &FleetRunArgs) -> anyhow::Result<Exit> {
    let cfg = config(args)?;
    let outlier = settings::percent("outlier", &args.outlier)?;
    if args.print_script {
        out!(
            "{}",
            hostbench_fleet::script::batch_script(&cfg, None, None)
        );
        return Ok(Exit::Ok);
    }
    // A bad --db fails before the job is queued, not after it ran.
    let mut store = if args.no_history {
        None
    } else {
        let path = settings::db_path(&args.history)?;
        Some(hostbench_report::history::Store::open(&path)?)
    };
    let outcome = hostbench_fleet::run(&cfg)?;
    let exit = super::report::report(outcome.dir.root(), outlier, args.quiet)?;
    if let Some(store) = store.as_mut() {
        let stored = store_runs(store, &outcome.dir, &cfg.profile)?;
        if !args.quiet && stored > 0 {
            eprintln!(
                "Stored {stored} node run{} in {} (fleet {})",
                if stored == 1 { "" } else { "s" },
                store.path().display(),
                fleet_id(&outcome.dir)
            );
        }
    }
    Ok(exit)
}

fn fleet_id(dir: &FleetDir) -> String {
    dir.root()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Every node run of the fleet directory that parses, tagged with the fleet id and node.
fn store_runs(
    store: &mut hostbench_report::history::Store,
    dir: &FleetDir,
    profile: &str,
) -> anyhow::Result<usize> {
    let id = fleet_id(dir);
    let Some(plan) = hostbench_fleet::read_plan(dir) else {
        return Ok(0);
    };
    let mut n = 0;
    for node in &plan.nodes {
        // A node with no (or a truncated) run.json is in the report as such; nothing to store.
        let Ok(run) = hostbench_report::load::load_run(&dir.node_run(node)) else {
            continue;
        };
        store.insert_tagged(
            &run,
            Some(profile),
            Some(&dir.node_dir(node)),
            Some((&id, node)),
        )?;
        n += 1;
    }
    Ok(n)
}

fn config(args: &FleetRunArgs) -> anyhow::Result<FleetConfig> {
    use hostbench_core::BenchError;
    let nodes = match args.nodes.trim().parse::<usize>() {
        Ok(n) if n > 0 => n,
        _ => {
            return Err(BenchError::invalid(format!(
                "--nodes '{}': expected a node count of at least 1",
                args.nodes
            ))
            .into())
        }
    };
    let scale = settings::scale(&args.scale)?;
    // Unknown subsystem names fail here, not on every node.
    subsystem::select(&SUBSYSTEMS, args.only.as_deref(), args.skip.as_deref())?;
    let pairs = PairSchedule::parse(&args.net_pairs)?;
    settings::percent("outlier", &args.outlier)?;
    let out = std::path::absolute(&args.out)
        .map_err(|e| BenchError::invalid(format!("--out {}: {e}", args.out.display())))?;
    let scratch = node_path("--dir", args.dir.as_ref())?;
    let exe = std::env::current_exe()
        .map_err(|e| BenchError::Failed(format!("this binary's path: {e}")))?;
    let profile = settings::profile(args.profile).name().to_string();

    let mut run_args = Vec::new();
    for (flag, v) in [("--only", &args.only), ("--skip", &args.skip)] {
        if let Some(v) = v {
            run_args.extend([flag.to_string(), v.clone()]);
        }
    }
    // What the job's own `fleet run` must repeat: everything that shapes the measurement.
    let mut forward = vec!["--nodes".to_string(), nodes.to_string()];
    forward.extend(["--profile".into(), profile.clone()]);
    forward.extend(["--scale".into(), scale.to_string()]);
    forward.extend(run_args.iter().cloned());
    forward.extend(["--net-pairs".into(), pairs.name()]);
    forward.extend(["--out".into(), out.display().to_string()]);
    forward.extend(["--outlier".into(), args.outlier.clone()]);
    if let Some(p) = &args.partition {
        forward.extend(["--partition".into(), p.clone()]);
    }
    if let Some(d) = &scratch {
        forward.extend(["--dir".into(), d.display().to_string()]);
    }
    if let Some(db) = &args.history.db {
        let db = std::path::absolute(db).unwrap_or_else(|_| db.clone());
        forward.extend(["--db".into(), db.display().to_string()]);
    }
    if args.no_history {
        forward.push("--no-history".into());
    }
    if args.quiet {
        forward.push("--quiet".into());
    }
    Ok(FleetConfig {
        nodes,
        nodelist: args.nodelist.clone(),
        partition: args.partition.clone(),
        time: args.time.clone(),
        profile,
        scale,
        pairs,
        busy: match args.busy {
            BusyArg::Wait => Busy::Wait,
            BusyArg::Skip => Busy::Skip,
        },
        out,
        fleet_id: args.fleet_id.clone(),
        scratch,
        run_args,
        forward_args: forward,
        exe,
        quiet: args.quiet,
        job: hostbench_fleet::NodeJob::Run,
    })
}

/// A node-local path given on the submitting host: absolute, since every node resolves it.
pub(super) fn node_path(
    flag: &str,
    p: Option<&std::path::PathBuf>,
) -> Result<Option<std::path::PathBuf>, hostbench_core::BenchError> {
    p.map(|d| {
        if d.is_absolute() {
            Ok(d.clone())
        } else {
            Err(hostbench_core::BenchError::invalid(format!(
                "{flag} {}: give an absolute path (it is resolved on every node)",
                d.display()
            )))
        }
    })
    .transpose()
}
