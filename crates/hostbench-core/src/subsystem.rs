//! The subsystem contract: what every measuring crate (cpu, linpack, mem, disk, net, gpu) tells
//! the binary, so that `run`, `--only`/`--skip`, `info` and the fleet iterate one registry and never
//! read a subsystem's config fields.
//!
//! A subsystem owns what its profiles mean (quick, standard, full, classic), how `--scale` shrinks
//! its workload, its plan for the whole-run progress bar (the same case count its own runner
//! announces), running itself through the shared runner, its theoretical peaks for `info`, and the
//! reference tools it runs beside its cases. Whether the host has it at all is separate from
//! skipping: a host without a GPU is "not applicable", which is not a failure.
//!
//! Adding a subsystem is its crate, implementing [`Subsystem`], plus one line in the binary's
//! registry.

use std::path::Path;
use std::time::Duration;

use crate::error::BenchError;
use crate::model::{Diagnosis, HealthReading, Host, Peak, Record};
use crate::runner::{Phase, Runner};
use crate::spec::Spec;
use crate::units::parse_list;

/// How much `hostbench run` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    /// About a minute: the headline cases, short samples.
    Quick,
    /// The default: every section at moderate length.
    Standard,
    /// Every ISA, engine and direction the subsystem has.
    Full,
    /// The classic cloud-benchmarking assignment's complete matrix.
    Classic,
    /// `hostbench check --level quick`: each subsystem's headline figure as a health probe, a
    /// second or two each (all-CPU f64 FMA, triad, loopback TCP, disk random read, GPU FMA and
    /// device bandwidth), judged rather than reported.
    Check,
}

impl Profile {
    pub const ALL: [Profile; 5] = [
        Profile::Quick,
        Profile::Standard,
        Profile::Full,
        Profile::Classic,
        Profile::Check,
    ];

    /// The profile's name as stored in the history and shown in reports.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Quick => "quick",
            Profile::Standard => "standard",
            Profile::Full => "full",
            Profile::Classic => "classic",
            Profile::Check => "check",
        }
    }
}

/// What one `run` asks of every subsystem.
#[derive(Debug, Clone, Copy)]
pub struct RunContext<'a> {
    pub host: &'a Host,
    pub spec: &'a Spec,
    pub profile: Profile,
    /// Multiplies every workload (sample lengths, amounts, linpack's n³).
    pub scale: f64,
    /// A `--duration` from the command line: every sample's length, before scaling.
    pub duration: Option<Duration>,
    /// Where disk cases may write (node-local scratch).
    pub scratch_dir: &'a Path,
    /// Which cases run their reference tool beside them.
    pub reference: ReferenceScope,
    /// `--mem-share`: the share of the available memory a memory-sized workload fills (the
    /// linpack matrix); `None` leaves it to the profile.
    pub mem_share: Option<f64>,
}

/// Which cases run their reference tool (likwid-bench, fio, iperf3, sockperf…) beside them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReferenceScope {
    #[default]
    Off,
    /// One headline case per subsystem: what `run` does by default, so the first report already
    /// shows the reference column filled where the tool is installed, for about one peer run each.
    Headline,
    /// Every case the tool can express (`--reference`).
    All,
}

impl ReferenceScope {
    /// Whether a case (the subsystem's headline case, or not) runs the reference.
    pub fn wants(self, headline: bool) -> bool {
        match self {
            ReferenceScope::Off => false,
            ReferenceScope::Headline => headline,
            ReferenceScope::All => true,
        }
    }
}

impl RunContext<'_> {
    /// A profile's sample length with the command line's override and the scale applied.
    pub fn sample_length(&self, profile_default: Duration) -> Duration {
        scaled(self.duration.unwrap_or(profile_default), self.scale)
    }
}

/// `d × scale`, never below 1 ms (a zero-length sample measures nothing).
pub fn scaled(d: Duration, scale: f64) -> Duration {
    d.mul_f64(scale).max(Duration::from_millis(1))
}

/// Whether a host has a subsystem at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applicable {
    Yes,
    /// Not on this host, and why (e.g. "no OpenCL or CUDA device"): not run, not a skip.
    No(String),
}

/// One line of `hostbench info`'s peak table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PeakLine {
    /// The subsystem it belongs to.
    pub subsystem: String,
    /// What the peak is of, e.g. "f64 avx2-fma" or "DRAM bandwidth".
    pub what: String,
    pub unit: String,
    pub peak: Option<Peak>,
    /// Why there is no peak, when there is none.
    pub note: String,
}

/// A reference tool a subsystem runs beside its cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ReferenceTool {
    /// The executable's name.
    pub name: &'static str,
    /// The Debian package that provides it.
    pub package: &'static str,
    /// The benchmark ids it stands beside, with its kernels or modes.
    pub serves: &'static str,
    /// The case of a `hostbench run` it stands beside by default (the subsystem's headline, the
    /// case whose `ReferenceScope::wants(true)` call runs it); empty where a run never runs it.
    /// Which commands take `--reference` and which profiles run the headline are not written
    /// here: `hostbench peers` reads them from the CLI definition and the run's own scope rule,
    /// so its "run by" lines follow the code.
    pub in_run: &'static str,
    /// Anything else that runs it (a side-by-side script, an in-process call); empty if none.
    pub also: &'static str,
}

/// One measuring subsystem (see the module header).
pub trait Subsystem: Sync {
    /// The name `--only`/`--skip` take and records are grouped under, e.g. "cpu".
    fn name(&self) -> &'static str;

    /// One line for `--help` and `info`: what it measures.
    fn summary(&self) -> &'static str;

    /// Whether this host has the subsystem at all.
    fn applicable(&self, _host: &Host) -> Applicable {
        Applicable::Yes
    }

    /// Process-wide set-up that must happen before any thread of the run exists, called once for
    /// every selected subsystem before the runner starts (disk installs its Ctrl-C cleanup here:
    /// the signal mask it sets is inherited only by threads created after it).
    fn prepare(&self) {}

    /// Cases and seconds per sample this run will take, before it starts: the same case count
    /// `run` announces to the runner.
    fn estimate(&self, ctx: &RunContext<'_>) -> Phase;

    /// Measure, recording through `runner`.
    fn run(&self, runner: &mut Runner, ctx: &RunContext<'_>) -> Result<(), BenchError>;

    /// Theoretical peaks for `info` (empty where there are none to state).
    fn peaks(&self, _host: &Host, _spec: &Spec) -> Vec<PeakLine> {
        Vec::new()
    }

    /// Reference tools this subsystem can run beside its cases.
    fn reference_tools(&self) -> &'static [ReferenceTool] {
        &[]
    }

    /// Hardware error and link counters only this subsystem can read (the GPU's through NVML),
    /// each source's readings or why it has none: `(id, readings)`, added to the host's `health`.
    fn health(&self) -> Vec<(&'static str, Result<Vec<HealthReading>, String>)> {
        Vec::new()
    }

    /// Causes of a record's shortfall that only this subsystem knows how to read (a LINPACK
    /// solve's own overhead, a paced sender's schedule, a GPU's clock reasons), each measured
    /// from the record: the diagnosis ranks them with the conditions' own. Called on every
    /// record a runner commits once the subsystem has registered with it
    /// ([`Runner::diagnose_with`]), so it returns nothing for records not its own.
    fn causes(&self, _rec: &Record) -> Vec<Diagnosis> {
        Vec::new()
    }
}

impl Runner {
    /// Have every record committed from now on diagnosed with `subsystem`'s
    /// [`Subsystem::causes`] too (once per subsystem, however often it registers). A driver
    /// registers its own subsystem where it starts, so a direct command (`hostbench linpack`)
    /// and a whole run get the same diagnosis; `check`'s judge re-diagnoses the record with
    /// what was found here.
    pub fn diagnose_with(&mut self, subsystem: &'static dyn Subsystem) {
        self.add_cause_hook(subsystem.name(), Box::new(move |r| subsystem.causes(r)));
    }
}

/// The names in a registry, comma-separated (for help and error messages).
pub fn names(registry: &[&dyn Subsystem]) -> String {
    registry
        .iter()
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The subsystems `--only LIST` and `--skip LIST` leave, in registry order; an unknown name is a
/// usage error naming it and the known ones.
pub fn select<'r>(
    registry: &[&'r dyn Subsystem],
    only: Option<&str>,
    skip: Option<&str>,
) -> Result<Vec<&'r dyn Subsystem>, BenchError> {
    let list = |text: &str, flag: &str| {
        parse_list(text, flag, |s| {
            let s = s.to_ascii_lowercase();
            match registry.iter().find(|sub| sub.name() == s) {
                Some(sub) => Ok(sub.name()),
                None => Err(BenchError::invalid(format!(
                    "--{flag}: unknown subsystem '{s}' (known: {})",
                    names(registry)
                ))),
            }
        })
    };
    let only = only.map(|t| list(t, "only")).transpose()?;
    let skip = skip
        .map(|t| list(t, "skip"))
        .transpose()?
        .unwrap_or_default();
    Ok(registry
        .iter()
        .copied()
        .filter(|s| only.as_ref().is_none_or(|o| o.contains(&s.name())))
        .filter(|s| !skip.contains(&s.name()))
        .collect())
}

/// Run `selected` in order through `runner`, the one orchestration `run` and the fleet share:
/// every applicable subsystem is announced with its estimate before the first case (one progress
/// bar for the whole run), then each runs in its phase. A subsystem this host does not have is
/// recorded as not applicable (`RunResult::not_applicable`), neither run nor skipped.
pub fn run_all(
    selected: &[&dyn Subsystem],
    runner: &mut Runner,
    ctx: &RunContext<'_>,
) -> Result<(), BenchError> {
    let mut runnable = Vec::new();
    for &s in selected {
        match s.applicable(ctx.host) {
            Applicable::Yes => runnable.push(s),
            Applicable::No(why) => runner.not_applicable(s.name(), &why)?,
        }
    }
    let phases: Vec<Phase> = runnable.iter().map(|s| s.estimate(ctx)).collect();
    runner.announce(&phases);
    for s in runnable {
        runner.begin_phase(s.name());
        s.run(runner, ctx)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str);

    impl Subsystem for Named {
        fn name(&self) -> &'static str {
            self.0
        }
        fn summary(&self) -> &'static str {
            "test"
        }
        fn estimate(&self, _ctx: &RunContext<'_>) -> Phase {
            Phase::new(self.0, 1, 0.0)
        }
        fn run(&self, _runner: &mut Runner, _ctx: &RunContext<'_>) -> Result<(), BenchError> {
            Ok(())
        }
    }

    #[test]
    fn only_and_skip_keep_registry_order_and_refuse_unknown_names() {
        let (a, b, c) = (Named("cpu"), Named("mem"), Named("gpu"));
        let reg: [&dyn Subsystem; 3] = [&a, &b, &c];
        let pick = |only, skip| -> Vec<&str> {
            select(&reg, only, skip)
                .unwrap()
                .iter()
                .map(|s| s.name())
                .collect()
        };
        assert_eq!(pick(None, None), ["cpu", "mem", "gpu"]);
        assert_eq!(pick(Some("gpu,CPU"), None), ["cpu", "gpu"]);
        assert_eq!(pick(None, Some("mem")), ["cpu", "gpu"]);
        let e = select(&reg, Some("gpu2"), None).err().unwrap().to_string();
        assert!(e.contains("'gpu2'") && e.contains("cpu, mem, gpu"), "{e}");
        assert!(select(&reg, None, Some("disk")).is_err());
    }

    /// A subsystem that records one case per planned point, as a real one does, and says what the
    /// context asked of it.
    struct Mock {
        name: &'static str,
        cases: usize,
        have: bool,
        fail: bool,
    }

    impl Subsystem for Mock {
        fn name(&self) -> &'static str {
            self.name
        }
        fn summary(&self) -> &'static str {
            "mock"
        }
        fn applicable(&self, _host: &Host) -> Applicable {
            if self.have {
                Applicable::Yes
            } else {
                Applicable::No("no such device".into())
            }
        }
        fn estimate(&self, ctx: &RunContext<'_>) -> Phase {
            let len = ctx.sample_length(Duration::from_millis(100));
            Phase::new(self.name, self.cases, len.as_secs_f64())
        }
        fn run(&self, runner: &mut Runner, ctx: &RunContext<'_>) -> Result<(), BenchError> {
            runner.plan(self.cases);
            for i in 0..self.cases {
                let case = crate::Case::new(self.name, crate::model::Metric::Throughput, "OP/s")
                    .param("i", i)
                    .param("profile", ctx.profile.name());
                if self.fail && i == 0 {
                    runner.skip(&case, &BenchError::unsupported("unit missing"))?;
                    continue;
                }
                let len = ctx.sample_length(Duration::from_millis(100));
                runner.run_case(
                    &case,
                    || Ok(crate::Sample::new(1.0 / len.as_secs_f64())),
                    |_| {},
                )?;
            }
            Ok(())
        }
    }

    #[test]
    fn run_all_runs_in_order_leaves_out_what_the_host_lacks_and_keeps_skips() {
        let a = Mock {
            name: "a",
            cases: 2,
            have: true,
            fail: false,
        };
        let b = Mock {
            name: "b",
            cases: 3,
            have: false,
            fail: false,
        };
        let c = Mock {
            name: "c",
            cases: 2,
            have: true,
            fail: true,
        };
        let reg: [&dyn Subsystem; 3] = [&a, &b, &c];
        let host = Host::default();
        let spec = Spec::default();
        let ctx = RunContext {
            host: &host,
            spec: &spec,
            profile: Profile::Quick,
            scale: 0.5,
            duration: Some(Duration::from_millis(40)),
            scratch_dir: Path::new("."),
            reference: ReferenceScope::Off,
            mem_share: None,
        };
        let mut runner = Runner::new(crate::RunnerConfig::quiet(2), host.clone());
        let selected = select(&reg, None, Some("a")).unwrap();
        run_all(&selected, &mut runner, &ctx).unwrap();
        let result = runner.finish().unwrap();
        // Each phase that ran is timed, in order.
        let phases: Vec<&str> = result.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(phases, ["c"]);
        assert!(result.phases[0].seconds > 0.0);
        // b is not on this host: recorded as such, not as a skip.
        assert_eq!(
            result.not_applicable,
            vec![crate::model::NotApplicable {
                subsystem: "b".into(),
                reason: "no such device".into()
            }]
        );
        // Only c ran: its first case skipped with the reason, its second measured with the
        // command line's duration scaled (40 ms x 0.5 = 20 ms: 50 per second).
        assert_eq!(result.records.len(), 1);
        let r = &result.records[0];
        assert_eq!(r.benchmark, "c");
        assert_eq!(r.value, 50.0);
        assert_eq!(
            r.params.get("profile").map(|v| v.to_string()),
            Some("\"quick\"".into())
        );
        assert_eq!(result.skipped.len(), 1);
        assert_eq!(result.skipped[0].kind, "unsupported");
        // With nothing selected, nothing runs and nothing is left out.
        let mut runner = Runner::new(crate::RunnerConfig::quiet(1), host.clone());
        run_all(&[], &mut runner, &ctx).unwrap();
        let empty = runner.finish().unwrap();
        assert!(empty.records.is_empty() && empty.not_applicable.is_empty());
    }

    #[test]
    fn scaling_never_reaches_zero() {
        assert_eq!(
            scaled(Duration::from_millis(100), 0.1),
            Duration::from_millis(10)
        );
        assert_eq!(
            scaled(Duration::from_millis(10), 1e-9),
            Duration::from_millis(1)
        );
    }
}
