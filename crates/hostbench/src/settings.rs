//! Resolve clap arguments into the plain config structs the library crates take.
//!
//! This is the only place that parses user text; every failure is a `BenchError::InvalidInput`
//! naming the flag and the value, which `main` turns into a one-line message and exit code 2.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use hostbench_core::spec::Spec;
use hostbench_core::units::{parse_count, parse_duration, parse_list, parse_positive};
use hostbench_core::{BenchError, RunnerConfig};
use hostbench_cpu::{CpuConfig, Dtype, Isa, IsaChoice, Scaling};

use crate::cli::{CommonArgs, CpuArgs, LinpackArgs, ScalingArg};

/// Where the JSON result goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonTarget {
    Stdout,
    File(PathBuf),
}

/// Options shared by every measuring command, resolved.
#[derive(Debug, Clone)]
pub struct Common {
    pub runner: RunnerConfig,
    pub duration: Option<Duration>,
    pub json: Option<JsonTarget>,
    pub quiet: bool,
    pub spec: Spec,
}

fn flag<T>(name: &str, r: Result<T, BenchError>) -> Result<T, BenchError> {
    r.map_err(|e| BenchError::invalid(format!("--{name}: {e}")))
}

pub fn common(args: &CommonArgs) -> Result<Common, BenchError> {
    let repeat = flag("repeat", parse_positive(&args.repeat, "repetitions"))?;
    let warmup = flag(
        "warmup",
        args.warmup
            .trim()
            .parse::<usize>()
            .map_err(|_| BenchError::invalid(format!("invalid warm-up count '{}'", args.warmup))),
    )?;
    let duration = args
        .duration
        .as_deref()
        .map(|d| flag("duration", parse_duration(d)))
        .transpose()?;
    let budget = args
        .budget
        .as_deref()
        .map(|d| flag("budget", parse_duration(d)))
        .transpose()?;
    let json = match args.json.as_deref() {
        None => None,
        Some("-") => Some(JsonTarget::Stdout),
        Some("") => return Err(BenchError::invalid("--json: empty file name")),
        Some(path) => Some(JsonTarget::File(PathBuf::from(path))),
    };
    let spec = match &args.spec {
        Some(path) => Spec::load(path)?,
        None => Spec::default(),
    };
    let partial_path = match &json {
        Some(JsonTarget::File(p)) => Some(p.clone()),
        _ => None,
    };
    Ok(Common {
        runner: RunnerConfig {
            repeat,
            warmup,
            budget,
            progress: !args.quiet && std::io::stderr().is_terminal(),
            partial_path,
        },
        duration,
        json,
        quiet: args.quiet,
        spec,
    })
}

pub fn threads_list(text: &str) -> Result<Vec<usize>, BenchError> {
    flag(
        "threads",
        parse_list(text, "threads", |s| parse_positive(s, "thread count")),
    )
}

pub fn cpu(args: &CpuArgs, common: &Common) -> Result<CpuConfig, BenchError> {
    let mut cfg = CpuConfig::default();
    if let Some(d) = &args.dtype {
        cfg.dtypes = flag("dtype", parse_list(d, "dtype", Dtype::parse))?;
    }
    cfg.isas = match args.isa.trim() {
        "auto" | "best" => IsaChoice::Best,
        "all" => IsaChoice::All,
        list => IsaChoice::List(flag("isa", parse_list(list, "isa", Isa::parse))?),
    };
    if let Some(t) = &args.threads {
        cfg.threads = threads_list(t)?;
    }
    cfg.scaling = match args.scaling {
        ScalingArg::Strong => Scaling::Strong,
        ScalingArg::Weak => Scaling::Weak,
    };
    if let Some(o) = &args.ops {
        cfg.ops = Some(flag("ops", parse_count(o))?);
    }
    if let Some(d) = common.duration {
        cfg.duration = d;
    }
    cfg.reference = args.reference;
    flag("isa", cfg.resolve_isas())?;
    cfg.validate()?;
    Ok(cfg)
}

/// Linpack settings: matrix order (None = from memory) and thread count.
#[derive(Debug, Clone)]
pub struct Linpack {
    pub n: Option<usize>,
    pub threads: usize,
}

pub fn linpack(args: &LinpackArgs) -> Result<Linpack, BenchError> {
    let n = args
        .n
        .as_deref()
        .map(|n| flag("n", parse_positive(n, "matrix order")))
        .transpose()?;
    let threads = match &args.threads {
        Some(t) => flag("threads", parse_positive(t, "thread count"))?,
        None => hostbench_core::affinity::allowed_cpus().len().max(1),
    };
    // The upper bound is `run_linpack`'s to enforce, once, for every caller.
    Ok(Linpack { n, threads })
}
