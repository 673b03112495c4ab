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
    // First, before any thread exists: Ctrl-C keeps what was measured (see `keep_interrupted`).
    hostbench_core::interrupt::install();
    let mut common = settings::common(&args.common)?;
    let scale = settings::scale(&args.scale)?;
    let mem_share = args
        .mem_share
        .as_deref()
        .map(settings::mem_share)
        .transpose()?;
    // The flag wins over the spec file's `[cost] price_per_hour` (already checked positive).
    let price = match &args.price_per_hour {
        Some(t) => Some((settings::price_per_hour(t)?, "--price-per-hour".to_string())),
        None => common.spec.cost.price_per_hour.map(|p| {
            let file = args.common.spec.as_ref().map(|f| f.display().to_string());
            (p, format!("spec file {}", file.unwrap_or_default()))
        }),
    };
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

    let kept = Kept {
        dir: dir.clone(),
        run_json: run_json.clone(),
        db: store.as_ref().map(|s| s.path().to_path_buf()),
        profile: settings::profile(args.profile).name(),
    };
    hostbench_core::interrupt::on_interrupt(move |sig| kept.keep(sig));

    let mut runner = Runner::new(common.runner.clone(), host.clone());
    let ctx = RunContext {
        host: &host,
        spec: &common.spec,
        profile: settings::profile(args.profile),
        scale,
        duration: common.duration,
        scratch_dir: &args.disk_dir,
        reference: reference_scope(args),
        mem_share,
    };
    subsystem::run_all(&selected, &mut runner, &ctx)?;
    // Interrupted while the last case ran: the handler keeps the run and exits.
    hostbench_core::interrupt::park_if_interrupted();
    let mut result = runner.finish()?;
    if let Some((p, source)) = &price {
        hostbench_report::export::cost::apply_price(&mut result, *p, source);
        hostbench_core::runner::write_json_atomic(&run_json, &result)?;
    }
    // `Runner::finish` has already written the final run.json (it is the partial path);
    // `--json` may ask for a second copy.
    // One screen: the headline figures; the full tables are in report.md/html and --verbose.
    let summary = hostbench_report::SummaryExporter::new(terminal_width(
        common.json == Some(crate::settings::JsonTarget::Stdout),
    ));
    let view: &dyn hostbench_report::Exporter = if args.verbose {
        &hostbench_report::TerminalExporter
    } else {
        &summary
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

/// The width the summary is laid out for: `COLUMNS` where set, else the width of the terminal
/// it is printed to (stdout, or stderr where the JSON document has stdout), else 100 (a file or
/// a pipe).
fn terminal_width(on_stderr: bool) -> usize {
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return n;
    }
    let fd = if on_stderr {
        libc::STDERR_FILENO
    } else {
        libc::STDOUT_FILENO
    };
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct we own; on a descriptor that is
    // no terminal it fails and writes nothing.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) };
    if rc == 0 && ws.ws_col > 0 {
        usize::from(ws.ws_col)
    } else {
        hostbench_report::SummaryExporter::DEFAULT_WIDTH
    }
}

/// What a Ctrl-C (SIGINT, SIGTERM, SIGHUP) during a run keeps: the records the runner saved
/// after its last finished case, marked interrupted, with their reports and history entry.
struct Kept {
    dir: PathBuf,
    run_json: PathBuf,
    db: Option<PathBuf>,
    profile: &'static str,
}

impl Kept {
    /// Runs on the signal thread's helper while the measuring thread goes on; the runner has
    /// stopped saving (`interrupt::interrupted`), so run.json is this function's alone. Every
    /// step that fails is said in the final line, never a panic: what was measured is on disk.
    fn keep(&self, sig: i32) {
        let signal = hostbench_core::interrupt::signal_name(sig);
        let Ok(mut result) = hostbench_report::load::load_run(&self.run_json) else {
            // Nothing finished yet: leave no empty results directory behind.
            let _ = std::fs::remove_dir(&self.dir);
            eprintln!("\nhostbench: interrupted ({signal}) before any case finished; nothing kept");
            return;
        };
        result.interrupted = Some(hostbench_core::model::Interrupted {
            signal: signal.to_string(),
            at: hostbench_core::model::now_rfc3339(),
        });
        result.finished_at = None;
        let mut problems = Vec::new();
        if let Err(e) = hostbench_core::runner::write_json_atomic(&self.run_json, &result) {
            problems.push(format!("run.json not marked interrupted: {e}"));
        }
        slow_reports_test_hook();
        if let Err(e) = hostbench_report::export::write_results_dir_with(&result, &self.dir, &[]) {
            problems.push(format!("reports not written: {e}"));
        }
        let stored = self.db.as_ref().map(|db| {
            hostbench_report::history::Store::open(db)
                .and_then(|mut s| s.insert(&result, Some(self.profile), Some(&self.dir)))
        });
        let stored = match stored {
            Some(Ok(id)) => format!("; stored as run #{id}"),
            Some(Err(e)) => {
                problems.push(format!("not stored in the history: {e}"));
                String::new()
            }
            None => String::new(),
        };
        let mut phases: Vec<&str> = Vec::new();
        for r in &result.records {
            let p = r.benchmark.split('.').next().unwrap_or_default();
            if !phases.contains(&p) {
                phases.push(p);
            }
        }
        let n = result.records.len();
        eprintln!(
            "\nhostbench: interrupted ({signal}) after {n} record{} ({}); kept in {} with \
             report.md, report.html and records.csv{stored}{}",
            if n == 1 { "" } else { "s" },
            if phases.is_empty() {
                "none".to_string()
            } else {
                phases.join(", ")
            },
            self.run_json.display(),
            problems
                .iter()
                .map(|p| format!("; {p}"))
                .collect::<String>(),
        );
    }
}

/// Test hook, for the test that a second Ctrl-C ends the process while the first one's reports
/// are being written (tests/report.rs): with `HOSTBENCH_TEST_SLOW_REPORTS_MS=N` set, the
/// interrupted run says so on stderr and waits N ms before it writes its reports. Unset (or not
/// a number), nothing happens.
fn slow_reports_test_hook() {
    let Some(ms) = std::env::var("HOSTBENCH_TEST_SLOW_REPORTS_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return;
    };
    eprintln!("hostbench: test hook: writing the reports in {ms} ms");
    std::thread::sleep(std::time::Duration::from_millis(ms));
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
