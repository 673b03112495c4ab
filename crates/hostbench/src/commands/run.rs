//! `hostbench run`: every benchmark this binary has, with a profile's defaults, written to
//! `<out>/<UTC timestamp>-<host>/run.json` (rewritten after every case, so an interrupted run
//! keeps what it measured).

use std::path::PathBuf;
use std::time::Duration;

use hostbench_core::units::parse_list;
use hostbench_core::{BenchError, Runner};
use hostbench_cpu::{CpuConfig, Dtype, IsaChoice};

use crate::cli::{Profile, RunArgs};
use crate::settings;
use crate::Exit;

/// Subsystems `run` knows, in the order it runs them.
const SUBSYSTEMS: [&str; 2] = ["cpu", "linpack"];

fn subsystem_list(text: &str, flag: &str) -> Result<Vec<String>, BenchError> {
    parse_list(text, flag, |s| {
        let s = s.to_ascii_lowercase();
        if SUBSYSTEMS.contains(&s.as_str()) {
            Ok(s)
        } else {
            Err(BenchError::invalid(format!(
                "--{flag}: unknown subsystem '{s}' (known: {})",
                SUBSYSTEMS.join(", ")
            )))
        }
    })
}

/// Linpack order per profile (never more than memory allows; see `linpack::default_n`).
fn linpack_n(profile: Profile) -> Option<usize> {
    match profile {
        Profile::Quick => Some(2000),
        _ => None,
    }
}

fn cpu_config(profile: Profile, duration: Option<Duration>) -> CpuConfig {
    let mut cfg = CpuConfig::default();
    match profile {
        Profile::Quick => cfg.duration = Duration::from_millis(100),
        Profile::Standard => {}
        Profile::Full => {
            cfg.isas = IsaChoice::All;
            cfg.duration = Duration::from_millis(500);
        }
        Profile::Classic => {
            // The assignment's matrix: QP, HP, SP, DP at 1, 2, 4 and 8 threads.
            cfg.dtypes = vec![Dtype::I8, Dtype::I16, Dtype::F32, Dtype::F64];
            cfg.threads = vec![1, 2, 4, 8];
        }
    }
    if let Some(d) = duration {
        cfg.duration = d;
    }
    cfg
}

pub fn run(args: &RunArgs) -> anyhow::Result<Exit> {
    let mut common = settings::common(&args.common)?;
    let mut selected: Vec<String> = match &args.only {
        Some(list) => subsystem_list(list, "only")?,
        None => SUBSYSTEMS.iter().map(|s| s.to_string()).collect(),
    };
    if let Some(list) = &args.skip {
        let skip = subsystem_list(list, "skip")?;
        selected.retain(|s| !skip.contains(s));
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
    let dir: PathBuf = args.out.join(format!("{stamp}-{host_name}"));
    std::fs::create_dir_all(&dir)
        .map_err(|e| BenchError::invalid(format!("--out {}: {e}", args.out.display())))?;
    let run_json = dir.join("run.json");
    common.runner.partial_path = Some(run_json.clone());

    let mut runner = Runner::new(common.runner.clone(), host.clone());
    for subsystem in &selected {
        match subsystem.as_str() {
            "cpu" => {
                let cfg = cpu_config(args.profile, common.duration);
                hostbench_cpu::run_compute(&mut runner, &cfg, &host, &common.spec)?;
            }
            "linpack" => {
                let threads = hostbench_core::affinity::allowed_cpus().len().max(1);
                hostbench_cpu::run_linpack(
                    &mut runner,
                    linpack_n(args.profile),
                    threads,
                    &host,
                    &common.spec,
                )?;
            }
            _ => {}
        }
    }
    let result = runner.finish()?;
    // `Runner::finish` has already written the final run.json (it is the partial path);
    // `--json` may ask for a second copy.
    let exit = super::emit(&result, &common)?;
    if !common.quiet {
        eprintln!("\nResults written to {}", run_json.display());
    }
    Ok(exit)
}
