//! `hostbench run`: every benchmark this binary has, with a profile's defaults, written to
//! `<out>/<UTC timestamp>-<host>/run.json` (rewritten after every case, so an interrupted run
//! keeps what it measured), then records.csv, report.md and report.html beside it, and the run
//! stored in the history database.
//!
//! The subsystems come from the one registry (`crate::registry`); each owns what the profile and
//! `--scale F` mean for it. One progress bar covers the whole run: every selected subsystem is
//! announced to the runner with its estimate before the first case, and replaced by its real plan
//! when it starts.

use std::path::PathBuf;

use hostbench_core::subsystem::{self, ReferenceScope, RunContext};
use hostbench_core::{BenchError, Runner};

use crate::cli::RunArgs;
use crate::registry::SUBSYSTEMS;
use crate::settings;
use crate::Exit;

pub fn run(args: &RunArgs) -> anyhow::Result<Exit> {
    let mut common = settings::common(&args.common)?;
    let scale = settings::scale(&args.scale)?;
    // Open the history first: a bad --db fails before minutes of measuring, not after.
    let mut store = if args.no_history {
        None
    } else {
        let path = settings::db_path(&args.history)?;
        Some(hostbench_report::history::Store::open(&path)?)
    };
    let selected = subsystem::select(&SUBSYSTEMS, args.only.as_deref(), args.skip.as_deref())?;
    for s in &selected {
        s.prepare();
    }
    let host = super::host_inventory(&common.spec);
    let stamp = hostbench_core::model::now_rfc3339().replace(':', "");
    let host_name: String = host
        .hostname
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // A fleet's node run writes exactly where the fleet directory says (`--run-dir`).
    let (dir, flag): (PathBuf, _) = match &args.run_dir {
        Some(d) => (d.clone(), "--run-dir"),
        None => (args.out.join(format!("{stamp}-{host_name}")), "--out"),
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| BenchError::invalid(format!("{flag} {}: {e}", dir.display())))?;
    let run_json = dir.join("run.json");
    common.runner.partial_path = Some(run_json.clone());
    if let Some(inv) = common.runner.invocation.as_mut() {
        inv.profile = Some(settings::profile(args.profile).name().to_string());
        inv.scale = Some(scale);
    }

    let mut runner = Runner::new(common.runner.clone(), host.clone());
    let ctx = RunContext {
        host: &host,
        spec: &common.spec,
        profile: settings::profile(args.profile),
        scale,
        duration: common.duration,
        scratch_dir: &args.disk_dir,
        reference: reference_scope(args),
    };
    subsystem::run_all(&selected, &mut runner, &ctx)?;
    let result = runner.finish()?;
    // `Runner::finish` has already written the final run.json (it is the partial path);
    // `--json` may ask for a second copy.
    // One screen: the headline figures; the full tables are in report.md/html and --verbose.
    let view: &dyn hostbench_report::Exporter = if args.verbose {
        &hostbench_report::TerminalExporter
    } else {
        &hostbench_report::SummaryExporter
    };
    let exit = super::emit_as(&result, &common, view)?;
    // Stored first, so report.html's trends end with this run.
    let stored = match &mut store {
        Some(s) => Some((
            s.insert(&result, Some(ctx.profile.name()), Some(&dir))?,
            s.path().to_path_buf(),
        )),
        None => None,
    };
    let trends = match &store {
        Some(s) => s.headline_trends(&result, TREND_RUNS)?,
        None => Vec::new(),
    };
    let written = hostbench_report::export::write_results_dir_with(&result, &dir, &trends)?;
    if let Some(png) = &args.png {
        hostbench_report::chart::write_pngs(&result, png)?;
    }
    if !common.quiet {
        eprintln!("\nResults written to {}", dir.display());
        for f in std::iter::once(&run_json).chain(&written) {
            eprintln!("  {}", f.display());
        }
        if let Some(png) = &args.png {
            eprintln!("  {}/*.png (charts)", png.display());
        }
        if let Some((id, path)) = stored {
            eprintln!("Stored as run #{id} in {}", path.display());
        }
    }
    Ok(exit)
}

/// Stored runs a trend chart in report.html reaches back over.
const TREND_RUNS: usize = 30;

/// References in `run`: every case with `--reference` (and for the classic profile, whose
/// reports had the reference beside every row), none with `--no-reference` or in the quick
/// profile (its headline peers, likwid-bench on DRAM-sized arrays and clpeak compiling its
/// kernels, would double its minute), else one headline case per subsystem whose tool is
/// installed.
fn reference_scope(args: &RunArgs) -> ReferenceScope {
    scope_for(args.profile, args.reference, args.no_reference)
}

/// [`reference_scope`] from its three inputs, so `peers` can say what each profile does.
pub(crate) fn scope_for(
    profile: crate::cli::ProfileArg,
    reference: bool,
    no_reference: bool,
) -> ReferenceScope {
    use crate::cli::ProfileArg;
    if no_reference || (profile == ProfileArg::Quick && !reference) {
        ReferenceScope::Off
    } else if reference || profile == ProfileArg::Classic {
        ReferenceScope::All
    } else {
        ReferenceScope::Headline
    }
}
