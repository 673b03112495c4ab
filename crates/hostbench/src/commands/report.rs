//! `hostbench report FILE.json`: re-render any saved run in every format, without measuring.

use hostbench_report::chart::write_pngs;
use hostbench_report::export::write_atomic;
use hostbench_report::load::load_run;
use hostbench_report::{
    CsvExporter, Exporter, HtmlExporter, MarkdownExporter, ReportError, TerminalExporter,
};

use crate::cli::ReportArgs;
use crate::settings::{self, JsonTarget};
use crate::Exit;

pub fn run(args: &ReportArgs) -> anyhow::Result<Exit> {
    let run = load_run(&args.file)?;
    let outputs: [(&str, &Option<String>, &dyn Exporter); 3] = [
        ("html", &args.html, &HtmlExporter),
        ("md", &args.md, &MarkdownExporter),
        ("csv", &args.csv, &CsvExporter),
    ];
    // Resolve every target before writing anything, so a bad one writes nothing.
    let mut targets = Vec::new();
    for (name, value, exporter) in outputs {
        if let Some(v) = value {
            targets.push((name, settings::out_target(name, v)?, exporter));
        }
    }
    let mut to_stdout = false;
    for (name, target, exporter) in targets {
        let text = exporter.render(&run)?;
        match target {
            JsonTarget::Stdout => {
                print!("{text}");
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
        let files = write_pngs(&run, dir).map_err(|e| match e {
            ReportError::Io { .. } => ReportError::bad(format!("--png: {e}")),
            other => other,
        })?;
        eprintln!("wrote {} chart(s) to {}", files.len(), dir.display());
    }
    if !args.quiet && !to_stdout {
        print!("{}", TerminalExporter.render(&run)?);
    }
    Ok(Exit::Ok)
}
