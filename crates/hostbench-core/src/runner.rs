//! The one runner every benchmark goes through.
//!
//! A benchmark describes a *case* (benchmark id, parameters, unit) and hands the runner a closure
//! that takes one sample. The runner does the rest, identically for every subsystem: warm-up
//! samples that are thrown away, `repeat` measured samples, statistics, the "noisy" warning, a
//! progress bar on stderr (only when stderr is a terminal), the time budget, and an atomic
//! rewrite of the partial result file after every case, so Ctrl-C or a crash keeps what was
//! already measured. Failures of one case become `skipped` entries and the run goes on; a case
//! that something outside the host can cut short (`run_case_keeping`: a network server that
//! dies) keeps the samples it finished as a record marked `incomplete`, saved the same way.
//!
//! Progress is one bar for everything the runner does. A whole run (`hostbench run`) announces
//! its phases (subsystems) up front with estimated case counts and sample lengths, so the bar's
//! length and ETA cover the whole run from the first case; when a phase starts, the cases its
//! subsystem actually `plan`s replace the estimate. The bar counts estimated milliseconds, not
//! cases, so a 2-second disk sample and a 50 ms CPU sample weigh what they take; a case that
//! ends early (skipped, or a companion record committed without samples) jumps past its share.
//! A long sample (a linpack solve at the memory-sized n of `full` takes minutes) moves the bar
//! through its own share as it reports how far it has got, so the bar and its ETA do not stand
//! still for the length of one sample.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Map, Value};

use crate::error::BenchError;
use crate::model::{
    now_rfc3339, Diagnosis, Host, Metric, Params, Record, RunResult, Skipped, Work,
};
use crate::stats::summarize;

/// How the runner measures; resolved once from the CLI.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Measured samples per case (≥ 1).
    pub repeat: usize,
    /// Discarded samples before measuring (caches, clocks, page faults settle).
    pub warmup: usize,
    /// Whole-run time budget; cases that would start after it are skipped.
    pub budget: Option<Duration>,
    /// Draw progress bars (the caller decides: stderr is a TTY and not `--quiet`).
    pub progress: bool,
    /// Where to rewrite the partial result after every case.
    pub partial_path: Option<PathBuf>,
    /// The command being run, stored in the result (partial files included) so that it can be
    /// run again.
    pub invocation: Option<crate::model::Invocation>,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        Self {
            repeat: 3,
            warmup: 1,
            budget: None,
            progress: std::io::stderr().is_terminal(),
            partial_path: None,
            invocation: None,
        }
    }
}

impl RunnerConfig {
    /// `repeat` samples, no warm-up, no progress bar, no partial file: for tests and for callers
    /// that embed a run in something else.
    pub fn quiet(repeat: usize) -> Self {
        Self {
            repeat,
            warmup: 0,
            budget: None,
            progress: false,
            partial_path: None,
            invocation: None,
        }
    }
}

/// One point of a benchmark's parameter space.
#[derive(Debug, Clone)]
pub struct Case {
    pub benchmark: String,
    pub params: Params,
    pub metric: Metric,
    pub unit: String,
    /// What its threads do, for the diagnosis (`Work::Other` unless the subsystem says).
    pub work: Work,
}

impl Case {
    pub fn new(benchmark: &str, metric: Metric, unit: &str) -> Self {
        Self {
            benchmark: benchmark.to_string(),
            params: Params::new(),
            metric,
            unit: unit.to_string(),
            work: Work::Other,
        }
    }

    /// Builder-style [`Work`]: what the case's threads do, which decides the conditions that
    /// can explain its shortfall.
    pub fn work(mut self, work: Work) -> Self {
        self.work = work;
        self
    }

    /// Builder-style parameter, kept in insertion order.
    pub fn param(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.params.insert(key.to_string(), value.into());
        self
    }

    /// `cpu.flops dtype=f64 isa=avx2-fma threads=2` — for progress and messages.
    pub fn label(&self) -> String {
        let mut s = self.benchmark.clone();
        for (k, v) in &self.params {
            let v = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            s.push_str(&format!(" {k}={v}"));
        }
        s
    }
}

/// One sample: the headline value in the case's SI unit plus named side values (clock, residual…)
/// whose medians land in the record's `extra`.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub value: f64,
    pub extra: Vec<(String, f64)>,
}

impl Sample {
    pub fn new(value: f64) -> Self {
        Self {
            value,
            extra: Vec::new(),
        }
    }

    pub fn with(mut self, key: &str, value: f64) -> Self {
        self.extra.push((key.to_string(), value));
        self
    }
}

/// One phase of a whole run (a subsystem), announced before anything runs.
#[derive(Debug, Clone)]
pub struct Phase {
    pub name: String,
    /// Estimated cases (records or skips) the phase will produce.
    pub cases: usize,
    /// Estimated seconds per sample (warm-up or measured) of its cases.
    pub sample_secs: f64,
}

impl Phase {
    pub fn new(name: &str, cases: usize, sample_secs: f64) -> Self {
        Self {
            name: name.to_string(),
            cases,
            sample_secs,
        }
    }
}

/// Progress bookkeeping behind the one bar.
#[derive(Debug, Default)]
struct Progress {
    phases: Vec<PhaseState>,
    current: Option<usize>,
    /// Bar units per sample in the current phase (estimated ms; [`UNANNOUNCED_WEIGHT`] outside
    /// announced phases).
    weight: u64,
    /// Where the current case's share of the bar begins.
    case_start: u64,
    /// Units the current case has advanced so far.
    slot_used: u64,
    cases_done: usize,
    cases_total: usize,
}

/// Bar units per sample outside an announced phase: a standalone command's samples count as a
/// second each, so a sample that reports its progress has units to move through.
const UNANNOUNCED_WEIGHT: u64 = 1000;

/// The running sample's share of the bar, shared with the progress hook a sample calls from
/// its own threads.
#[derive(Debug, Default)]
struct SampleSpan {
    start: AtomicU64,
    width: AtomicU64,
}

#[derive(Debug)]
struct PhaseState {
    name: String,
    weight: u64,
    /// Estimated cases and bar units not yet claimed by `plan`.
    cases_left: usize,
    units_left: u64,
}

/// A subsystem's causes of a record's shortfall (`Subsystem::causes`, registered by
/// `Runner::diagnose_with`).
pub(crate) type CauseHook = Box<dyn Fn(&Record) -> Vec<Diagnosis> + Send + Sync>;

/// Runs cases and owns the growing result.
pub struct Runner {
    config: RunnerConfig,
    result: RunResult,
    started: Instant,
    bar: ProgressBar,
    progress: Progress,
    span: Arc<SampleSpan>,
    /// The phase being timed (`begin_phase`) and when it began.
    phase_clock: Option<(String, Instant)>,
    /// The conditions of the last measurement, for records made from its samples.
    last_conditions: Option<crate::conditions::Conditions>,
    /// The subsystems whose causes every committed record gets, by name, in the order they
    /// registered.
    cause_hooks: Vec<(&'static str, CauseHook)>,
}

impl Runner {
    pub fn new(config: RunnerConfig, host: Host) -> Self {
        let bar = if config.progress {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {percent:>3}% ETA {eta} {wide_msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar
        } else {
            // Hidden, but with a length, so the bookkeeping is the same (and testable).
            ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden())
        };
        let mut result = RunResult::new(host);
        result.invocation = config.invocation.clone();
        Self {
            config,
            result,
            started: Instant::now(),
            phase_clock: None,
            last_conditions: None,
            cause_hooks: Vec::new(),
            bar,
            progress: Progress {
                weight: UNANNOUNCED_WEIGHT,
                ..Progress::default()
            },
            span: Arc::default(),
        }
    }

    pub fn config(&self) -> &RunnerConfig {
        &self.config
    }

    /// Give every record committed from now on the causes `hook` finds, once per `name`
    /// (`Runner::diagnose_with` in `subsystem`, which imports this module, registers a
    /// subsystem's).
    pub(crate) fn add_cause_hook(&mut self, name: &'static str, hook: CauseHook) {
        if !self.cause_hooks.iter().any(|(n, _)| *n == name) {
            self.cause_hooks.push((name, hook));
        }
    }

    fn samples_per_case(&self) -> u64 {
        (self.config.warmup + self.config.repeat.max(1)) as u64
    }

    /// Announce the phases of a whole run with estimates, before the first case, so the one
    /// progress bar shows the whole run's length and ETA. Enter each with [`Runner::begin_phase`].
    pub fn announce(&mut self, phases: &[Phase]) {
        let per_case = self.samples_per_case();
        for p in phases {
            let weight = ((p.sample_secs * 1000.0).round() as u64).max(1);
            let units = p.cases as u64 * per_case * weight;
            self.bar.inc_length(units);
            self.progress.cases_total += p.cases;
            self.progress.phases.push(PhaseState {
                name: p.name.clone(),
                weight,
                cases_left: p.cases,
                units_left: units,
            });
        }
    }

    /// Enter an announced phase: the cases its subsystem `plan`s now replace the estimate, and
    /// whatever estimate the previous phase did not use is dropped from the bar.
    pub fn begin_phase(&mut self, name: &str) {
        self.end_phase();
        self.phase_clock = Some((name.to_string(), Instant::now()));
        let progress = &mut self.progress;
        progress.current = progress.phases.iter().position(|p| p.name == name);
        progress.weight = progress
            .current
            .map_or(UNANNOUNCED_WEIGHT, |i| progress.phases[i].weight);
    }

    fn end_phase(&mut self) {
        if let Some((name, t)) = self.phase_clock.take() {
            self.result.phases.push(crate::model::PhaseTime {
                name,
                seconds: t.elapsed().as_secs_f64(),
            });
        }
        let Some(i) = self.progress.current.take() else {
            return;
        };
        let phase = &mut self.progress.phases[i];
        let (units, cases) = (phase.units_left, phase.cases_left);
        phase.units_left = 0;
        phase.cases_left = 0;
        self.progress.cases_total -= cases.min(self.progress.cases_total);
        if let Some(len) = self.bar.length() {
            self.bar.set_length(len.saturating_sub(units));
        }
    }

    /// Announce `cases` more cases so the progress bar's length and ETA are right. Inside an
    /// announced phase they are first taken from its estimate.
    pub fn plan(&mut self, cases: usize) {
        let units = cases as u64 * self.samples_per_case() * self.progress.weight;
        let (mut extra_units, mut extra_cases) = (units, cases);
        if let Some(i) = self.progress.current {
            let phase = &mut self.progress.phases[i];
            let take = units.min(phase.units_left);
            phase.units_left -= take;
            extra_units -= take;
            let take = cases.min(phase.cases_left);
            phase.cases_left -= take;
            extra_cases -= take;
        }
        self.bar.inc_length(extra_units);
        self.progress.cases_total += extra_cases;
    }

    /// A sample of the current case starts: its share of the bar is the next `weight` units,
    /// through which [`Runner::sample_progress`] moves the bar.
    fn sample_starts(&self) {
        let p = &self.progress;
        self.span
            .start
            .store(p.case_start + p.slot_used, Ordering::Relaxed);
        self.span.width.store(p.weight, Ordering::Relaxed);
    }

    /// Move the bar to the end of one sample of the current case (wherever the sample's own
    /// progress left it).
    fn tick(&mut self) {
        self.progress.slot_used += self.progress.weight;
        self.bar
            .set_position(self.progress.case_start + self.progress.slot_used);
    }

    /// A case is done (committed or skipped): move the bar to the end of its share.
    fn case_done(&mut self) {
        let slot = self.samples_per_case() * self.progress.weight;
        let p = &mut self.progress;
        p.case_start += slot.max(p.slot_used);
        p.slot_used = 0;
        p.cases_done += 1;
        self.bar.set_position(p.case_start);
    }

    fn case_message(&self, case: &Case) -> String {
        let p = &self.progress;
        let total = p.cases_total.max(p.cases_done + 1);
        let phase = p
            .current
            .map_or(String::new(), |i| format!("{}: ", p.phases[i].name));
        format!("{phase}case {}/{total} {}", p.cases_done + 1, case.label())
    }

    /// Print a line above the progress bar (or plainly when there is none).
    pub fn note(&self, line: &str) {
        if self.config.progress {
            self.bar.println(line);
        }
    }

    /// A line the user should read before something long starts (a memory-sized solve's
    /// expected time): above the bar when there is one, else a plain line on stderr.
    pub fn say(&self, line: &str) {
        if self.config.progress {
            self.bar.println(line);
        } else {
            eprintln!("{line}");
        }
    }

    /// A hook that shows how far one long sample has got (0 to 1): the bar moves through the
    /// sample's share and the case's message says the share (drawn only where there is a bar).
    /// Made before `run_case`, called from the sample, from any thread.
    pub fn sample_progress(&self) -> impl Fn(f64) + Send + Sync + 'static {
        let bar = self.bar.clone();
        let span = Arc::clone(&self.span);
        move |done: f64| {
            let (start, width) = (
                span.start.load(Ordering::Relaxed),
                span.width.load(Ordering::Relaxed),
            );
            // Within the sample's share only, and never back: `tick` ends the share.
            let at = start + (done.clamp(0.0, 1.0) * width as f64) as u64;
            if at > bar.position() {
                bar.set_position(at);
            }
            if bar.is_hidden() {
                return;
            }
            let msg = bar.message();
            let base = msg.split(" · ").next().unwrap_or_default().to_string();
            bar.set_message(format!("{base} · {:.0} % of this sample", done * 100.0));
        }
    }

    /// Has the whole-run budget been spent?
    pub fn over_budget(&self) -> bool {
        self.config
            .budget
            .is_some_and(|b| self.started.elapsed() >= b)
    }

    /// Take warm-up and measured samples of `case` and summarise them into a record. The record
    /// is not yet part of the result: the caller may attach a peak, then `commit` it.
    pub fn measure(
        &mut self,
        case: &Case,
        sample: impl FnMut() -> Result<Sample, BenchError>,
    ) -> Result<Record, BenchError> {
        self.measure_or_keep(case, sample, false)
    }

    /// [`Runner::measure`]; with `keep`, a measured sample that fails at run time (not bad
    /// input, not a failed validation) after others finished ends the case with a record of
    /// the finished ones, marked incomplete with the error.
    fn measure_or_keep(
        &mut self,
        case: &Case,
        mut sample: impl FnMut() -> Result<Sample, BenchError>,
        keep: bool,
    ) -> Result<Record, BenchError> {
        self.bar.set_message(self.case_message(case));
        for _ in 0..self.config.warmup {
            self.sample_starts();
            sample()?;
            self.tick();
        }
        let mut values = Vec::with_capacity(self.config.repeat);
        let mut extras: Vec<(String, Vec<f64>)> = Vec::new();
        let mut conditions = crate::conditions::Probe::live()
            .begin()
            .does_io(case.work.does_io());
        let mut clocks = Vec::new();
        let mut cut: Option<BenchError> = None;
        for _ in 0..self.config.repeat.max(1) {
            self.sample_starts();
            let s = match sample() {
                Ok(s) => s,
                Err(e @ (BenchError::Failed(_) | BenchError::Io { .. }))
                    if keep && !values.is_empty() =>
                {
                    cut = Some(e);
                    break;
                }
                Err(e) => return Err(e),
            };
            conditions.sample_done();
            if !s.value.is_finite() {
                return Err(BenchError::Failed(format!(
                    "{}: non-finite sample {}",
                    case.label(),
                    s.value
                )));
            }
            values.push(s.value);
            for (k, v) in s.extra {
                if k == "clock_hz" {
                    clocks.push(v);
                }
                match extras.iter_mut().find(|(name, _)| *name == k) {
                    Some((_, vs)) => vs.push(v),
                    None => extras.push((k, vec![v])),
                }
            }
            self.tick();
        }
        let mut record = build_record(case, values, extras);
        if let Some(e) = cut {
            let planned = self.config.repeat.max(1);
            record.warnings.push(format!(
                "incomplete: {} of {planned} samples; the case ended with: {e}",
                record.samples.len()
            ));
            record.incomplete = Some(crate::model::Incomplete {
                error: e.to_string(),
                samples_planned: planned,
            });
        }
        let clock = clocks.first().zip(clocks.last()).map(|(a, b)| (*a, *b));
        let rate = (record.metric == Metric::Throughput).then_some(record.value);
        let conditions = conditions.finish(clock, rate);
        self.last_conditions = Some(conditions.clone());
        record.conditions = Some(conditions);
        Ok(record)
    }

    /// Add a finished record to the result and rewrite the partial file. The record is
    /// diagnosed here, once its peak is known, with the causes its subsystems find beside the
    /// conditions'; a record made from another measurement's samples (`record_from_samples`)
    /// takes that measurement's conditions.
    pub fn commit(&mut self, mut record: Record) -> Result<(), BenchError> {
        if record.conditions.is_none() {
            record.conditions = self.last_conditions.clone();
        }
        record.subsystem_causes = self
            .cause_hooks
            .iter()
            .flat_map(|(_, hook)| hook(&record))
            .collect();
        let ctx = crate::conditions::diagnose::Context::of(&self.result.host);
        crate::conditions::diagnose::apply(&mut record, &ctx, None);
        self.result.records.push(record);
        self.case_done();
        self.save_partial()
    }

    /// Change the last committed record that `pick` accepts and rewrite the partial file; false
    /// where none matches. For what is known only once later cases ran: which of several
    /// records a reference tool belongs beside.
    pub fn amend(
        &mut self,
        pick: impl Fn(&Record) -> bool,
        change: impl FnOnce(&mut Record),
    ) -> Result<bool, BenchError> {
        match self.result.records.iter_mut().rev().find(|r| pick(r)) {
            Some(r) => {
                change(r);
                self.save_partial()?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Record that a case produced nothing, and why; the run goes on.
    pub fn skip(&mut self, case: &Case, err: &BenchError) -> Result<(), BenchError> {
        let kind = match err {
            BenchError::Unsupported(_) => "unsupported",
            BenchError::InvalidInput(_) => "invalid",
            _ => "failed",
        };
        self.skip_with(case, kind, &err.to_string())
    }

    /// Record a skipped case with an explicit kind (`unsupported`, `failed`, `budget`, …), e.g. to
    /// skip the companions of a case for the same reason.
    pub fn skip_with(&mut self, case: &Case, kind: &str, reason: &str) -> Result<(), BenchError> {
        // Jump the bar past the samples this case will not take.
        self.case_done();
        self.note(&format!("skipped {}: {reason}", case.label()));
        self.result.skipped.push(Skipped {
            benchmark: case.benchmark.clone(),
            params: case.params.clone(),
            kind: kind.to_string(),
            reason: reason.to_string(),
        });
        self.save_partial()
    }

    /// Record a subsystem this host does not have: not a skip, so the run stays complete.
    pub fn not_applicable(&mut self, subsystem: &str, reason: &str) -> Result<(), BenchError> {
        self.result
            .not_applicable
            .push(crate::model::NotApplicable {
                subsystem: subsystem.to_string(),
                reason: reason.to_string(),
            });
        self.save_partial()
    }

    /// Record a part of a subsystem this run chose not to measure (not a skip: the run stays
    /// complete), and say so above the progress bar.
    pub fn left_out(
        &mut self,
        subsystem: &str,
        what: &str,
        reason: &str,
    ) -> Result<(), BenchError> {
        self.note(&format!("left out {what}: {reason}"));
        self.result.left_out.push(crate::model::LeftOut {
            subsystem: subsystem.to_string(),
            what: what.to_string(),
            reason: reason.to_string(),
        });
        self.save_partial()
    }

    /// Measure, let `finish` attach peaks and extras, and commit; an unsupported or failing case
    /// is recorded as skipped and the run continues. Only bad input stops the run.
    pub fn run_case(
        &mut self,
        case: &Case,
        sample: impl FnMut() -> Result<Sample, BenchError>,
        finish: impl FnOnce(&mut Record),
    ) -> Result<(), BenchError> {
        self.run_case_or_keep(case, sample, finish, false)
    }

    /// [`Runner::run_case`] for a case that something outside this host can cut short (a
    /// network server that dies mid-case): when a measured sample fails at run time after
    /// others finished, the finished ones are committed (and saved like any record) as a
    /// record marked `incomplete` with the error, instead of the whole case becoming a skip.
    /// `finish` sees the mark. With no measured sample finished, the case is skipped as usual.
    pub fn run_case_keeping(
        &mut self,
        case: &Case,
        sample: impl FnMut() -> Result<Sample, BenchError>,
        finish: impl FnOnce(&mut Record),
    ) -> Result<(), BenchError> {
        self.run_case_or_keep(case, sample, finish, true)
    }

    fn run_case_or_keep(
        &mut self,
        case: &Case,
        sample: impl FnMut() -> Result<Sample, BenchError>,
        finish: impl FnOnce(&mut Record),
        keep: bool,
    ) -> Result<(), BenchError> {
        if self.over_budget() {
            return self.skip_with(case, "budget", "time budget exhausted before this case");
        }
        match self.measure_or_keep(case, sample, keep) {
            Ok(mut record) => {
                finish(&mut record);
                self.commit(record)
            }
            Err(e @ BenchError::InvalidInput(_)) => Err(e),
            Err(e) => self.skip(case, &e),
        }
    }

    pub fn result(&self) -> &RunResult {
        &self.result
    }

    /// The host inventory the result carries, for facts measured during the run (the
    /// effective-cores probe).
    pub fn host_mut(&mut self) -> &mut Host {
        &mut self.result.host
    }

    /// Diagnose the scaling steps below linear, which only the whole set of records shows.
    fn diagnose_scaling(&mut self) {
        use crate::conditions::diagnose;
        let ctx = diagnose::Context::of(&self.result.host);
        for (i, why) in diagnose::scaling_shortfalls(&self.result.records) {
            let r = &mut self.result.records[i];
            if r.diagnosis.is_empty() {
                diagnose::apply(r, &ctx, Some(why));
            }
        }
    }

    /// Stamp the end time, write the final partial file, and hand the result over.
    pub fn finish(mut self) -> Result<RunResult, BenchError> {
        self.diagnose_scaling();
        self.end_phase();
        self.bar.finish_and_clear();
        self.result.finished_at = Some(now_rfc3339());
        self.save_partial()?;
        Ok(self.result)
    }

    fn save_partial(&self) -> Result<(), BenchError> {
        // After a signal the interrupt handler owns the file: it marks the run interrupted and
        // writes its reports, and a case that ends meanwhile must not overwrite that.
        if crate::interrupt::interrupted() {
            return Ok(());
        }
        match &self.config.partial_path {
            Some(path) => write_json_atomic(path, &self.result),
            None => Ok(()),
        }
    }
}

/// A record for `case` from samples taken by another case's measurement: one run that yields
/// several figures (disk throughput, IOPS and latency of the same I/O) gives each its own record
/// under the same statistics rules. Commit it with [`Runner::commit`].
pub fn record_from_samples(case: &Case, samples: Vec<f64>) -> Record {
    build_record(case, samples, Vec::new())
}

fn build_record(case: &Case, samples: Vec<f64>, extras: Vec<(String, Vec<f64>)>) -> Record {
    let stats = summarize(&samples);
    let mut extra = Map::new();
    for (k, mut vs) in extras {
        vs.sort_by(f64::total_cmp);
        let med = crate::stats::percentile_sorted(&vs, 50.0);
        // A peak's clock is a median of per-sample readings; its spread is kept beside it.
        if k == "clock_hz" && vs.len() > 1 {
            extra.insert("clock_hz_min".into(), serde_json::json!(vs[0]));
            extra.insert("clock_hz_max".into(), serde_json::json!(vs[vs.len() - 1]));
        }
        extra.insert(k, serde_json::json!(med));
    }
    // The "noisy" warning is the diagnosis's to write (at commit), with its cause where one
    // was measured.
    Record {
        benchmark: case.benchmark.clone(),
        params: case.params.clone(),
        metric: case.metric,
        unit: case.unit.clone(),
        value: stats.median,
        stats,
        samples,
        peak: None,
        efficiency: None,
        reference: None,
        warnings: Vec::new(),
        extra,
        conditions: None,
        diagnosis: Vec::new(),
        efficiency_effective: None,
        incomplete: None,
        trigger: None,
        work: case.work,
        subsystem_causes: Vec::new(),
    }
}

/// Write JSON to `path` atomically: a temporary file in the same directory, fsync, rename.
pub fn write_json_atomic(path: &Path, value: &impl serde::Serialize) -> Result<(), BenchError> {
    let mut body = serde_json::to_vec_pretty(value)
        .map_err(|e| BenchError::Failed(format!("serialising results: {e}")))?;
    body.push(b'\n');
    write_bytes_atomic(path, &body)
}

/// Write `body` to `path` atomically: a temporary file in the same directory, fsync, rename, so
/// a reader (or a crash) never sees half a file.
///
/// Only a regular file is replaced. A device, FIFO or socket (`--json /dev/null`,
/// `/dev/stdout`, a pipe from `<(...)`) is written in place: renaming over it would, as root,
/// turn `/dev/null` into a regular file that every later reader of /dev/null gets back (cargo's
/// own compiler probe among them). A symlink is followed, so the link stays and its target is
/// what gets replaced.
pub fn write_bytes_atomic(path: &Path, body: &[u8]) -> Result<(), BenchError> {
    let io = |e| BenchError::io(path, e);
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() && !m.is_dir() => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io)?;
            return f.write_all(body).map_err(io);
        }
        _ => {}
    }
    let resolved = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).ok(),
        _ => None,
    };
    let path = resolved.as_deref().unwrap_or(path);
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "result.json".to_string());
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(body)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        BenchError::io(path, e)
    })
}

#[cfg(test)]
mod tests;
