//! `hostbench fleet report DIR`: the fleet report of a fleet directory — the `hostbench/fleet/v1`
//! document, fleet.md and fleet.html — and the nodes × figures table on the terminal.
//!
//! `fleet run` calls `report` at its end, so a finished fleet run and a later `fleet report` on
//! its directory write the same files. A report of a directory whose job still runs is a
//! snapshot: running nodes show what they have measured so far.

use std::path::Path;

use hostbench_report::export::write_atomic;
use hostbench_report::fleet::layout::FleetDir;
use hostbench_report::fleet::{
    build, render_html, render_json, render_markdown, render_terminal, FleetConfig, FleetDoc,
};
use hostbench_report::ReportError;

use crate::cli::FleetReportArgs;
use crate::settings::{self, JsonTarget};
use crate::Exit;

pub fn run(args: &FleetReportArgs) -> anyhow::Result<Exit> {
    let outlier = settings::percent("outlier", &args.outlier)?;
    if args.json.is_none() && args.md.is_none() && args.html.is_none() {
        return report(&args.dir, outlier, args.quiet);
    }
    let dir = FleetDir::new(&args.dir);
    // Resolve every target before reading or writing anything, so a bad one writes nothing.
    let named = [
        ("json", &args.json, dir.report_json()),
        ("md", &args.md, dir.report_md()),
        ("html", &args.html, dir.report_html()),
    ];
    let mut targets = Vec::new();
    for (name, value, default) in named {
        let target = match value {
            Some(v) => settings::out_target(name, v)?,
            None => JsonTarget::File(default),
        };
        targets.push((name, target));
    }
    let to_stdout = targets.iter().any(|(_, t)| matches!(t, JsonTarget::Stdout));
    let doc = build(&dir, &config(outlier))?;
    for (name, target) in targets {
        let text = render(&doc, name)?;
        match target {
            JsonTarget::Stdout => out!("{text}"),
            JsonTarget::File(path) => write_atomic(&path, &text).map_err(|e| {
                // A file the user named that cannot be written is a bad argument (exit 2).
                if path.starts_with(dir.root()) {
                    e
                } else {
                    ReportError::bad(format!("--{name}: {e}"))
                }
            })?,
        }
    }
    if !args.quiet && !to_stdout {
        out!("{}", render_terminal(&doc));
    }
    Ok(exit(&doc))
}

/// The fleet report of `dir` into `dir/fleet.{json,md,html}`, the table on stdout unless `quiet`:
/// what `fleet run` calls once its nodes and pairs are done. `outlier` is the threshold rule's
/// fraction (0.1 = 10 %). Exit 0 when every planned node and pair is ok, 3 when some failed, were
/// not measured or are unreadable (the rest is reported).
pub fn report(dir: &Path, outlier: f64, quiet: bool) -> anyhow::Result<Exit> {
    let dir = FleetDir::new(dir);
    let doc = build(&dir, &config(outlier))?;
    let written = hostbench_report::fleet::write_reports(&doc, &dir)?;
    if !quiet {
        out!("{}", render_terminal(&doc));
        for p in written {
            eprintln!("wrote {}", p.display());
        }
    }
    Ok(exit(&doc))
}

fn config(outlier: f64) -> FleetConfig {
    FleetConfig {
        outlier,
        ..FleetConfig::default()
    }
}

fn render(doc: &FleetDoc, name: &str) -> Result<String, ReportError> {
    Ok(match name {
        "json" => render_json(doc)?,
        "md" => render_markdown(doc),
        _ => render_html(doc),
    })
}

fn exit(doc: &FleetDoc) -> Exit {
    if doc.complete() {
        Exit::Ok
    } else {
        Exit::Partial
    }
}
