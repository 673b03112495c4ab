//! `hostbench completions SHELL`, `hostbench man` and `hostbench schema`: shell completion and
//! manual pages generated from the CLI definitions, so they can never disagree with `--help`, and
//! the result document's JSON Schema generated from the result types, so it can never disagree
//! with what hostbench writes.

use std::io::Write;

use anyhow::Context;
use hostbench_core::BenchError;

use crate::cli::{self, CompletionsArgs, ManArgs};
use crate::Exit;

pub fn completions(args: &CompletionsArgs) -> anyhow::Result<Exit> {
    // Generated into memory first: clap_complete panics when its writer fails (a closed pipe);
    // stdout's own error is an error like any other.
    let mut script = Vec::new();
    cli::completions(args.shell, &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(Exit::Ok)
}

pub fn man(args: &ManArgs) -> anyhow::Result<Exit> {
    let pages = cli::man_pages()?;
    match &args.out {
        None => {
            let (_, main) = &pages[0];
            std::io::stdout().write_all(main)?;
        }
        Some(dir) => {
            // As `install -d` would: a fresh system may not have the man1 directory yet; only a
            // path that exists as something other than a directory is refused.
            if dir.exists() && !dir.is_dir() {
                return Err(BenchError::invalid(format!(
                    "--out {}: exists and is not a directory",
                    dir.display()
                ))
                .into());
            }
            std::fs::create_dir_all(dir).map_err(|e| {
                BenchError::invalid(format!("--out {}: cannot create it: {e}", dir.display()))
            })?;
            for (name, page) in &pages {
                let path = dir.join(name);
                std::fs::write(&path, page)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            eprintln!("{} manual pages written to {}", pages.len(), dir.display());
        }
    }
    Ok(Exit::Ok)
}

pub fn schema(args: &crate::cli::SchemaArgs) -> anyhow::Result<Exit> {
    let schema = match args.document {
        crate::cli::SchemaDoc::Result => hostbench_core::model::result_schema(),
        crate::cli::SchemaDoc::Fleet => hostbench_report::fleet::fleet_schema(),
        crate::cli::SchemaDoc::Check => hostbench_core::check::check_schema(),
        crate::cli::SchemaDoc::FleetCheck => {
            hostbench_report::fleet::verdicts::fleet_check_schema()
        }
    };
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &schema)?;
    writeln!(out)?;
    Ok(Exit::Ok)
}
