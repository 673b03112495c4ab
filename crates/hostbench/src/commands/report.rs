//! `hostbench report FILE.json …`: re-render any saved run in every format, without measuring
//! (OpenMetrics too, so a saved run or one from another machine reaches node_exporter without
//! measuring again); two to eight runs render side by side (hostbench-report's `side`); a saved
//! burn record renders as the burn's own page (`burn::report`).

use hostbench_core::model::RunResult;
use hostbench_report::chart::write_pngs;
use hostbench_report::export::write_atomic;
use hostbench_report::load::load_run;
use hostbench_report::side::{self, SideBySide};
use hostbench_report::{
    CsvExporter, Exporter, HtmlExporter, MarkdownExporter, OpenMetricsExporter, ReportError,
    TerminalExporter,
};

use crate::cli::ReportArgs;
use crate::settings::{self, JsonTarget};
use crate::Exit;

/// What is rendered: one run as it is, or several side by side.
enum Subject {
    One(Box<RunResult>),
    Several(SideBySide),
}

impl Subject {
    fn render(&self, format: &str) -> Result<String, ReportError> {
        match (self, format) {
            (Subject::One(run), "html") => HtmlExporter.render(run),
            (Subject::One(run), "md") => MarkdownExporter.render(run),
            (Subject::One(run), "csv") => CsvExporter.render(run),
            (Subject::One(run), "openmetrics") => OpenMetricsExporter.render(run),
            (Subject::Several(s), "openmetrics") => {
                let runs: Vec<(&str, &RunResult)> =
                    s.runs.iter().map(|(l, r)| (l.as_str(), r)).collect();
                Ok(hostbench_report::export::openmetrics_many(&runs))
            }
            (Subject::One(run), _) => TerminalExporter.render(run),
            (Subject::Several(s), "html") => side::html(s),
            (Subject::Several(s), "md") => Ok(side::markdown(s)),
            // One CSV row per record of every run, each with its run's label.
            (Subject::Several(s), "csv") => CsvExporter.render(&s.merged()),
            (Subject::Several(s), _) => Ok(side::text(s)),
        }
    }

    /// The run whose charts the PNGs are (several: the merged run, the runs overlaid).
    fn chart_run(&self) -> std::borrow::Cow<'_, RunResult> {
        match self {
            Subject::One(run) => std::borrow::Cow::Borrowed(&**run),
            Subject::Several(s) => std::borrow::Cow::Owned(s.merged()),
        }
    }
}

pub fn run(args: &ReportArgs) -> anyhow::Result<Exit> {
    // A saved burn record (`hostbench/burn/v1`) has its own page.
    if let [only] = args.files.as_slice() {
        if let Some(exit) = super::burn::report(only, args)? {
            return Ok(exit);
        }
    }
    let mut runs = Vec::with_capacity(args.files.len());
    for f in &args.files {
        runs.push((f.as_path(), load_run(f)?));
    }
    let subject = if runs.len() == 1 {
        Subject::One(Box::new(runs.remove(0).1))
    } else {
        Subject::Several(SideBySide::new(runs)?)
    };
    let outputs: [(&str, &Option<String>); 4] = [
        ("html", &args.html),
        ("md", &args.md),
        ("csv", &args.csv),
        ("openmetrics", &args.openmetrics),
    ];
    // Resolve every target before writing anything, so a bad one writes nothing.
    let mut targets = Vec::new();
    for (name, value) in outputs {
        if let Some(v) = value {
            targets.push((name, settings::out_target(name, v)?));
        }
    }
    let mut to_stdout = false;
    for (name, target) in targets {
        let text = subject.render(name)?;
        match target {
            JsonTarget::Stdout => {
                out!("{text}");
                to_stdout = true;
            }
            JsonTarget::File(path) => {
                // An output the user named that cannot be written is a bad argument (exit 2).
                write_atomic(&path, &text)
                    .map_err(|e| ReportError::bad(format!("--{name}: {e}")))?;
                eprintln!("wrote {}", path.display());
            }
        }
    }
    if let Some(dir) = &args.png {
        let files = write_pngs(&subject.chart_run(), dir).map_err(|e| match e {
            ReportError::Io { .. } => ReportError::bad(format!("--png: {e}")),
            other => other,
        })?;
        eprintln!("wrote {} chart(s) to {}", files.len(), dir.display());
    }
    if !args.quiet && !to_stdout {
        out!("{}", subject.render("terminal")?);
    }
    Ok(Exit::Ok)
}
