//! `hostbench history list | show RUN | compare RUN_A RUN_B | import FILE.json`.

use hostbench_report::compare::{compare, render_text, CompareConfig};
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
        println!("stored run #{id} in {}", path.display());
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
                    r.results_dir.unwrap_or_else(|| "-".into()),
                ]);
            }
            print!("{}", hostbench_report::export::aligned(&rows));
            Ok(Exit::Ok)
        }
        HistoryCommand::Show { run } => {
            let id = store.resolve(run)?;
            let (s, result) = store.load(id)?;
            println!(
                "Run #{} on {}, {} to {} (hostbench {}{})",
                s.id,
                s.hostname,
                s.started_at,
                s.finished_at.as_deref().unwrap_or("unfinished"),
                s.tool_version,
                s.profile
                    .map_or(String::new(), |p| format!(", profile {p}"))
            );
            print!("{}", TerminalExporter.render(&result)?);
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
            let (ia, ib) = (store.resolve(a)?, store.resolve(b)?);
            let (_, ra) = store.load(ia)?;
            let (_, rb) = store.load(ib)?;
            let cmp = compare(&ra, &rb, &cfg);
            print!(
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
