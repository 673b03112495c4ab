//! Running a reference tool (likwid-bench, iperf3, sockperf, fio, clpeak) beside a case: one way
//! to start it, bound its time, read its output, find its version and turn its figures into a
//! record's `reference`, for every subsystem.
//!
//! Why one runner: a reference run is a child process that may hang (a server that never
//! answers, a kernel likwid cannot pin), fill a pipe (iperf3's JSON), or be missing. Each case
//! must come back within a deadline with either a figure or a reason, and a server started for it
//! must die with it, whatever path the case leaves by.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::BenchError;
use crate::model::Reference;
use crate::stats::percentile_sorted;

/// A child process that is killed and reaped when dropped (a reference server, or a client past
/// its deadline).
#[derive(Debug)]
pub struct Background(pub Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `tool` with `args`, no stdin; stdout and stderr piped (`piped`) or discarded. A tool
/// that cannot be started is `Unsupported`: a note on the record, never a failed case.
pub fn spawn(tool: &str, args: &[String], piped: bool) -> Result<Background, BenchError> {
    let io = || if piped { Stdio::piped() } else { Stdio::null() };
    Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .stdout(io())
        .stderr(io())
        .spawn()
        .map(Background)
        .map_err(|e| BenchError::unsupported(format!("{tool} not runnable ({e})")))
}

/// What a finished tool printed.
#[derive(Debug, Clone, Default)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    pub success: bool,
}

impl Output {
    /// Both streams, stdout first.
    pub fn text(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Run `tool` to completion within `limit`, reading both pipes while it runs (a long report would
/// otherwise fill a pipe and stall it). Past the limit it is killed and the case fails, naming it.
pub fn run(tool: &str, args: &[String], limit: Duration) -> Result<Output, BenchError> {
    let mut child = spawn(tool, args, true)?;
    let drain = |p: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut t = String::new();
            if let Some(mut p) = p {
                let _ = p.read_to_string(&mut t);
            }
            t
        })
    };
    let out = drain(
        child
            .0
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .0
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.0.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => break None,
        }
    };
    drop(child);
    let output = Output {
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        success: status.is_some_and(|s| s.success()),
    };
    if status.is_none() {
        return Err(BenchError::Failed(format!(
            "{tool} did not finish in {limit:?}"
        )));
    }
    Ok(output)
}

/// The tool's version: `pick` applied to each line `tool ARGS` prints (within 5 s), first match;
/// "unknown" when it prints none.
pub fn version(tool: &str, args: &[&str], pick: impl Fn(&str) -> Option<String>) -> String {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    run(tool, &args, Duration::from_secs(5))
        .ok()
        .and_then(|o| o.text().lines().find_map(&pick))
        .unwrap_or_else(|| "unknown".into())
}

/// Which way round a ratio goes: hostbench / reference for rates (higher is better), reference /
/// hostbench for times (lower is better), so that above 1 always means hostbench did better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
}

/// The record's `reference`: the median of the tool's `values` and the ratio the right way round.
pub fn reference(
    tool: &str,
    version: String,
    values: &[f64],
    ours: f64,
    better: Better,
) -> Result<Reference, BenchError> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return Err(BenchError::Failed(format!("{tool} gave no figure")));
    }
    v.sort_by(f64::total_cmp);
    let value = percentile_sorted(&v, 50.0);
    let ratio = match better {
        Better::Higher => ours / value,
        Better::Lower => value / ours,
    };
    Ok(Reference {
        tool: tool.into(),
        version,
        value,
        ratio,
    })
}

/// Like for like, hostbench and a reference tool agree within this band of the ratio; outside it
/// a record carries the known methodological difference (`extra.reference_note`).
pub const PARITY_BAND: std::ops::RangeInclusive<f64> = 0.9..=1.1;

/// Put a reference run's outcome on its record: the figure and ratio, the exact `command`
/// (`extra.reference_command`), and `why_apart` as `extra.reference_note` when the ratio is
/// outside `PARITY_BAND`. A tool that could not run is a warning, never a failed case.
pub fn attach(
    rec: &mut crate::model::Record,
    outcome: Result<Reference, BenchError>,
    command: &str,
    why_apart: &str,
) {
    match outcome {
        Ok(r) => {
            rec.extra.insert("reference_command".into(), command.into());
            if !PARITY_BAND.contains(&r.ratio) {
                rec.extra.insert("reference_note".into(), why_apart.into());
            }
            rec.reference = Some(r);
        }
        Err(e) => rec.warnings.push(format!("reference not measured: {e}")),
    }
}

/// likwid-bench's version (`likwid-bench -v` → "likwid-bench -- Version 5.2.2"); not installed is
/// `Unsupported` (a note on the record), found before any kernel is tried.
pub fn likwid_version() -> Result<String, BenchError> {
    spawn(LIKWID, &["-v".into()], false)
        .map_err(|_| BenchError::unsupported("likwid-bench not installed: apt install likwid"))?;
    Ok(version(LIKWID, &["-v"], |l| {
        l.split("Version").nth(1).map(|v| v.trim().to_string())
    }))
}

/// likwid-bench's executable.
pub const LIKWID: &str = "likwid-bench";

/// One figure of a likwid-bench report: the number after `key` (`MFlops/s:`, `MByte/s:`), in
/// the report's unit (mega: × 1e6 gives base units).
pub fn likwid_figure(report: &str, key: &str) -> Option<f64> {
    report
        .lines()
        .find_map(|l| l.trim().strip_prefix(key))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|m| m * 1e6)
}

/// How long a likwid-bench run given `-i` should stream: likwid-bench's own minimum run time.
/// Without `-i` it finds an iteration count itself by running ever longer trials, which took most
/// of each run (13 of 18 s for a 6 GiB triad, 4.7 of 6.5 s for a peakflops kernel).
pub const LIKWID_RUN_S: f64 = 1.0;

/// The seconds a likwid-bench report says its measured run took (`Time:  1.84e+00 sec`).
pub fn likwid_seconds(report: &str) -> Option<f64> {
    report
        .lines()
        .find_map(|l| l.trim().strip_prefix("Time:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
}

/// One likwid-bench run of `args`, the figure `read` finds in its report (`key` names it in the
/// error when the report has none, with likwid-bench's first complaint).
pub fn likwid_read(
    args: &[String],
    key: &str,
    read: impl Fn(&str) -> Option<f64>,
) -> Result<f64, BenchError> {
    // A run lasts its one-second minimum plus start-up; a hang is cut off, not waited for.
    let out = run(LIKWID, args, Duration::from_secs(60))?;
    read(&out.stdout).ok_or_else(|| {
        BenchError::Failed(format!(
            "{LIKWID} {} gave no {key} line: {}",
            args.join(" "),
            out.stderr.lines().next().unwrap_or("no output")
        ))
    })
}

/// likwid-bench `args` run `runs` times; each run's `key` figure in base units (a run that prints
/// none fails, naming the kernel).
pub fn likwid_runs(args: &[String], runs: usize, key: &str) -> Result<Vec<f64>, BenchError> {
    (0..runs.max(1))
        .map(|_| likwid_read(args, key, |r| likwid_figure(r, key)))
        .collect()
}

/// Where a tool is: an executable on PATH, or for a shared library (`libopenblas.so.0`) the file
/// the dynamic loader would open, from `ldconfig -p`.
pub fn locate(tool: &str) -> Option<std::path::PathBuf> {
    if tool.starts_with("lib") && tool.contains(".so") {
        let out = Command::new("ldconfig")
            .arg("-p")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        // `libfoo.so` without a version stands for any of its sonames (`libfoo.so.12`, `.13`).
        let any_version = tool.ends_with(".so").then(|| format!("{tool}."));
        return text.lines().find_map(|l| {
            let (name, path) = l.trim().split_once(" => ")?;
            let name = name.split_whitespace().next()?;
            let hit = name == tool || any_version.as_ref().is_some_and(|p| name.starts_with(p));
            hit.then(|| path.trim().into())
        });
    }
    locate_program(tool)
}

fn locate_program(tool: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// The version of an installed Debian package (`dpkg-query`), or None where dpkg does not know
/// it (not installed, not Debian). Tools print their versions in a dozen ways; the package's is
/// one format, and it names what `apt install` gave.
pub fn package_version(package: &str) -> Option<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${db:Status-Status} ${Version}", package])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.strip_prefix("installed ")
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn output_is_read_and_a_hung_tool_is_killed_at_its_deadline() {
        let o = run(
            "sh",
            &args(&["-c", "echo out; echo err >&2"]),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!((o.stdout.as_str(), o.stderr.as_str()), ("out\n", "err\n"));
        assert!(o.success);
        let t = Instant::now();
        let e = run("sleep", &args(&["30"]), Duration::from_millis(200)).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(e.to_string().contains("did not finish"), "{e}");
        let missing = run("no-such-tool-hostbench", &[], Duration::from_secs(1)).unwrap_err();
        assert!(matches!(missing, BenchError::Unsupported(_)), "{missing}");
        assert_eq!(
            version("sh", &["-c", "echo 'tool 1.2'"], |l| l
                .strip_prefix("tool ")
                .map(str::to_string)),
            "1.2"
        );
    }

    #[test]
    fn ratios_go_the_right_way_round() {
        let r = reference("t", "1".into(), &[1.0, 4.0, 2.0], 3.0, Better::Higher).unwrap();
        assert_eq!((r.value, r.ratio), (2.0, 1.5));
        let r = reference("t", "1".into(), &[2.0], 1.0, Better::Lower).unwrap();
        assert_eq!(r.ratio, 2.0);
        assert!(reference("t", "1".into(), &[f64::NAN], 1.0, Better::Higher).is_err());
    }
}
