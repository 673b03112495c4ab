//! Burn-in records and the fault-injection hook shared by the CPU, memory and GPU burns.
//!
//! Why here: every burn unit reports the same shape (where it ran, how many results were checked,
//! how many were wrong, the first wrong value with its differing bits), and the verdict and the
//! JSON are built from that one shape whichever crate ran the unit. The fault hook
//! (`HOSTBENCH_FAULT`) lives here too so each crate parses it the same way; it only ever changes a
//! value inside hostbench's own buffers, after it was computed or written, so the detection path is
//! exercised end to end without touching anything else on the machine.

use serde::{Deserialize, Serialize};

use crate::BenchError;

/// The environment variable that injects one fault (see `docs/burn.md`).
pub const FAULT_ENV: &str = "HOSTBENCH_FAULT";

/// One injected fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Make unit `unit`'s result wrong on logical CPU `cpu` once `after` results were checked there.
    Cpu {
        cpu: usize,
        unit: String,
        after: u64,
    },
    /// Flip one bit of the word at index `after` (modulo the buffer) after it was written.
    MemFlip { after: u64 },
    /// Make GPU block `block`'s checksum wrong.
    GpuBlock { block: u64 },
}

impl Fault {
    /// Parse `cpu:N:UNIT[:after=K]`, `mem:flip[:after=N]` or `gpu:block:N`.
    pub fn parse(text: &str) -> Result<Fault, BenchError> {
        let bad = |why: &str| BenchError::invalid(format!("{FAULT_ENV}={text:?}: {why}"));
        let parts: Vec<&str> = text.split(':').collect();
        let after = |part: Option<&&str>| -> Result<u64, BenchError> {
            match part {
                None => Ok(0),
                Some(p) => p
                    .strip_prefix("after=")
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| bad("expected after=N with N a whole number")),
            }
        };
        match parts.as_slice() {
            ["cpu", cpu, unit, rest @ ..] if rest.len() <= 1 => {
                let cpu = cpu
                    .parse()
                    .map_err(|_| bad("the CPU must be a whole number"))?;
                if unit.is_empty() {
                    return Err(bad("the unit is empty"));
                }
                Ok(Fault::Cpu {
                    cpu,
                    unit: (*unit).to_string(),
                    after: after(rest.first())?,
                })
            }
            ["mem", "flip", rest @ ..] if rest.len() <= 1 => Ok(Fault::MemFlip {
                after: after(rest.first())?,
            }),
            ["gpu", "block", n] => Ok(Fault::GpuBlock {
                block: n
                    .parse()
                    .map_err(|_| bad("the block must be a whole number"))?,
            }),
            _ => Err(bad(
                "expected cpu:CPU:UNIT[:after=N], mem:flip[:after=N] or gpu:block:N",
            )),
        }
    }

    /// The fault named by `HOSTBENCH_FAULT`, `None` when it is unset or empty.
    pub fn from_env() -> Result<Option<Fault>, BenchError> {
        match std::env::var(FAULT_ENV) {
            Ok(v) if !v.trim().is_empty() => Fault::parse(v.trim()).map(Some),
            Ok(_) | Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(BenchError::invalid(format!("{FAULT_ENV}: not valid UTF-8")))
            }
        }
    }

    /// The fault as written in `HOSTBENCH_FAULT`.
    pub fn describe(&self) -> String {
        match self {
            Fault::Cpu { cpu, unit, after } => format!("cpu:{cpu}:{unit}:after={after}"),
            Fault::MemFlip { after } => format!("mem:flip:after={after}"),
            Fault::GpuBlock { block } => format!("gpu:block:{block}"),
        }
    }
}

/// The first wrong value a unit produced: what the closed form (or the reference CPU) says, what
/// came back, and which bits differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Mismatch {
    /// Where: `chain 3`, `word 0x7f..` (virtual address), `block 12`.
    pub location: String,
    /// The expected value's bits, in hex.
    pub expected: String,
    /// The value read, in hex.
    pub got: String,
    /// Bit positions (0 = least significant) where the two differ.
    pub bits: Vec<u32>,
    /// Anything else that places the error: the physical address, the DIMM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Mismatch {
    pub fn of_bits(location: impl Into<String>, expected: u64, got: u64) -> Mismatch {
        let diff = expected ^ got;
        Mismatch {
            location: location.into(),
            expected: format!("{expected:#018x}"),
            got: format!("{got:#018x}"),
            bits: (0..64).filter(|b| diff >> b & 1 == 1).collect(),
            detail: None,
        }
    }

    /// An error the device reported itself (an uncorrectable ECC error from the driver), where
    /// no value was read: `detail` says what it reported.
    pub fn reported(location: impl Into<String>, detail: impl Into<String>) -> Mismatch {
        Mismatch {
            location: location.into(),
            expected: String::new(),
            got: String::new(),
            bits: Vec::new(),
            detail: Some(detail.into()),
        }
    }

    /// `location: expected E got G, bits [..]; detail`, or `location: detail` for an error the
    /// device reported.
    pub fn describe(&self) -> String {
        let detail = self.detail.as_deref();
        if self.expected.is_empty() && self.got.is_empty() {
            return format!("{}: {}", self.location, detail.unwrap_or("-"));
        }
        format!(
            "{}: expected {} got {}, bits {:?}{}",
            self.location,
            self.expected,
            self.got,
            self.bits,
            detail.map_or(String::new(), |d| format!("; {d}"))
        )
    }
}

/// How a burn unit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UnitStatus {
    /// Every result checked was right.
    Pass,
    /// At least one result was wrong.
    Fail,
    /// The unit did not run (absent, refused, killed): never counted as passed.
    NotRun,
}

impl UnitStatus {
    pub fn name(self) -> &'static str {
        match self {
            UnitStatus::Pass => "pass",
            UnitStatus::Fail => "fail",
            UnitStatus::NotRun => "not run",
        }
    }
}

/// One unit's burn on one place (a CPU, all CPUs, a memory range, a GPU).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UnitRun {
    /// `cpu`, `mem`, `disk`, `gpu`.
    pub resource: String,
    /// Where it ran: `cpu1`, `all`, a memory size, `gpu0`.
    pub place: String,
    /// The logical CPU when it ran pinned to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// `each` (one CPU at a time) or `all` (every CPU at once).
    pub phase: String,
    /// The unit: `avx512-f64`, `int-lcg`, `fma-chain`, `walking-ones`, …
    pub unit: String,
    pub status: UnitStatus,
    /// Results compared with their expected value.
    pub checks: u64,
    pub errors: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<Mismatch>,
    /// Work per second while it ran (`rate_unit` says of what).
    pub rate: f64,
    pub rate_unit: String,
    pub seconds: f64,
    /// Why it did not run, or other notes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl UnitRun {
    pub fn new(resource: &str, place: &str, phase: &str, unit: &str, rate_unit: &str) -> UnitRun {
        UnitRun {
            resource: resource.into(),
            place: place.into(),
            cpu: None,
            phase: phase.into(),
            unit: unit.into(),
            status: UnitStatus::NotRun,
            checks: 0,
            errors: 0,
            first_error: None,
            rate: 0.0,
            rate_unit: rate_unit.into(),
            seconds: 0.0,
            note: None,
        }
    }

    pub fn not_run(resource: &str, place: &str, unit: &str, why: impl Into<String>) -> UnitRun {
        let mut u = UnitRun::new(resource, place, "-", unit, "-");
        u.note = Some(why.into());
        u
    }

    /// Count one wrong result, keeping the first.
    pub fn record_error(&mut self, m: Mismatch) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(m);
        }
    }

    /// Set the status from what ran: fail on any error, pass when something was checked.
    pub fn settle(&mut self) {
        self.status = if self.errors > 0 {
            UnitStatus::Fail
        } else if self.checks > 0 {
            UnitStatus::Pass
        } else {
            UnitStatus::NotRun
        };
    }
}

/// One point of the timeline: a unit's rate over one interval, with the conditions beside it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimelinePoint {
    /// Seconds from the start of the burn to the interval's end.
    pub t_s: f64,
    pub unit: String,
    pub rate: f64,
    pub rate_unit: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    /// CPUs' worth of time other processes and the hypervisor (steal) took from the burn's CPUs
    /// during the interval: a rate that falls while this rises fell to a neighbour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_cpus: Option<f64>,
}

/// What one interval ran under, each where readable.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct IntervalReading {
    /// Mean clock of the allowed CPUs, MHz.
    pub clock_mhz: Option<f64>,
    /// Hottest thermal zone, °C.
    pub temp_c: Option<f64>,
    /// CPUs' worth of time taken by others (see [`TimelinePoint::others_cpus`]).
    pub others_cpus: Option<f64>,
    /// The device's power draw, W (the GPU's, from NVML).
    pub power_w: Option<f64>,
}

impl IntervalReading {
    /// The timeline point of a unit's `rate` over the interval ending at `t_s`, with this reading.
    pub fn point(self, t_s: f64, unit: String, rate: f64, rate_unit: String) -> TimelinePoint {
        TimelinePoint {
            t_s,
            unit,
            rate,
            rate_unit,
            clock_mhz: self.clock_mhz,
            temp_c: self.temp_c,
            power_w: self.power_w,
            others_cpus: self.others_cpus,
        }
    }
}

/// Reads what an interval ran under: the clock and temperature now, and the others' CPU time since
/// the previous read (or the start). For a burn whose intervals end when its passes do (the disk's)
/// rather than on a clock ([`Sampler`]).
pub struct Probe {
    cpus: Vec<usize>,
    ticks: Option<Ticks>,
}

impl Probe {
    pub fn start() -> Probe {
        let cpus = crate::affinity::allowed_cpus();
        let ticks = ticks_now(&cpus);
        Probe { cpus, ticks }
    }

    /// The reading for the interval since the previous read.
    pub fn read(&mut self) -> IntervalReading {
        let now = ticks_now(&self.cpus);
        let others = self
            .ticks
            .zip(now)
            .and_then(|(a, b)| others_between(a, b, self.cpus.len()));
        self.ticks = now;
        IntervalReading {
            clock_mhz: clock_mhz_now(),
            temp_c: temperature_c_now(),
            others_cpus: others,
            power_w: None,
        }
    }
}

/// Clock ticks on the burn's CPUs: (busy including steal, total, this process's own).
type Ticks = (u64, u64, u64);

/// The ticks now: the allowed CPUs' lines of /proc/stat and this process's utime + stime (both in
/// the kernel's USER_HZ ticks). `None` where /proc is not readable.
fn ticks_now(cpus: &[usize]) -> Option<Ticks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let (mut busy, mut total) = (0u64, 0u64);
    for line in stat.lines() {
        let mut f = line.split_whitespace();
        let Some(cpu) = f
            .next()
            .and_then(|n| n.strip_prefix("cpu")?.parse::<usize>().ok())
        else {
            continue;
        };
        if !cpus.contains(&cpu) {
            continue;
        }
        let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        if v.len() >= 8 {
            let b = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
            busy += b;
            total += b + v[3] + v[4];
        }
    }
    let own = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command's closing parenthesis: state is the first, utime the 12th.
    let rest: Vec<&str> = own.rsplit_once(')')?.1.split_whitespace().collect();
    let mine = rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?;
    (total > 0).then_some((busy, total, mine))
}

/// CPUs' worth of others' time between two tick readings over `cpus` CPUs.
fn others_between(a: Ticks, b: Ticks, cpus: usize) -> Option<f64> {
    let total = b.1.checked_sub(a.1).filter(|&t| t > 0)?;
    let others =
        b.0.saturating_sub(a.0)
            .saturating_sub(b.2.saturating_sub(a.2));
    Some(others as f64 / total as f64 * cpus as f64)
}

/// The clock, the hottest temperature and the others' CPU time read once per timeline interval
/// while a burn runs, on a thread of its own that sleeps between readings (four file reads an
/// interval), so each interval's point carries its own reading, not one taken when the phase
/// ended.
pub struct Sampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<Vec<IntervalReading>>>,
}

impl Sampler {
    /// Start reading at the middle of each `interval` counted from `start`.
    pub fn start(start: std::time::Instant, interval: std::time::Duration) -> Sampler {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut readings = Vec::new();
            let mut probe = Probe::start();
            let step = std::time::Duration::from_millis(20).min(interval / 2);
            loop {
                let due = start + interval * readings.len() as u32 + interval / 2;
                while std::time::Instant::now() < due {
                    if flag.load(Ordering::Relaxed) {
                        return readings;
                    }
                    std::thread::sleep(step.max(std::time::Duration::from_millis(1)));
                }
                readings.push(probe.read());
            }
        });
        Sampler {
            stop,
            handle: Some(handle),
        }
    }

    /// Stop and hand back one reading per interval reached, in order.
    pub fn finish(mut self) -> Vec<IntervalReading> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

/// When interval `b` of `interval` ended, in seconds from the phase's start: its full end, or
/// `ended_s` (when the phase ended) for the last, partial one, so no point is drawn after the
/// run.
pub fn interval_end(b: usize, interval: std::time::Duration, ended_s: f64) -> f64 {
    ((b + 1) as f64 * interval.as_secs_f64()).min(ended_s)
}

/// Interval `b`'s reading, or one taken now where the sampler never reached it (an interval
/// shorter than the reading's half-interval delay at the end of a phase; its others' time is
/// then unknown).
pub fn reading_at(readings: &[IntervalReading], b: usize) -> IntervalReading {
    readings.get(b).copied().unwrap_or_else(|| IntervalReading {
        clock_mhz: clock_mhz_now(),
        temp_c: temperature_c_now(),
        others_cpus: None,
        power_w: None,
    })
}

/// The current mean clock of the allowed CPUs (`cpu MHz` in /proc/cpuinfo), where the kernel
/// reports one.
pub fn clock_mhz_now() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let mhz: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse().ok())
        .collect();
    (!mhz.is_empty()).then(|| mhz.iter().sum::<f64>() / mhz.len() as f64)
}

/// The hottest thermal zone in °C, where one is readable.
pub fn temperature_c_now() -> Option<f64> {
    let dir = std::fs::read_dir("/sys/class/thermal").ok()?;
    dir.filter_map(|e| {
        let p = e.ok()?.path().join("temp");
        let milli: f64 = std::fs::read_to_string(p).ok()?.trim().parse().ok()?;
        Some(milli / 1000.0)
    })
    .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full interval's point sits at its end; the last, partial one at the phase's end, never
    /// after the run.
    #[test]
    fn a_partial_last_interval_ends_when_the_phase_did() {
        let ten = std::time::Duration::from_secs(10);
        assert_eq!(interval_end(0, ten, 25.5), 10.0);
        assert_eq!(interval_end(1, ten, 25.5), 20.0);
        assert_eq!(interval_end(2, ten, 25.5), 25.5);
    }

    #[test]
    fn the_sampler_reads_once_per_interval_reached() {
        let start = std::time::Instant::now();
        let sampler = Sampler::start(start, std::time::Duration::from_millis(40));
        std::thread::sleep(std::time::Duration::from_millis(130));
        let readings = sampler.finish();
        let elapsed = start.elapsed().as_millis() as usize;
        // One reading at the middle of each interval begun (20, 60, 100 ms, …): never more than
        // the intervals whose middle has passed, and the first one well before the end.
        assert!(
            !readings.is_empty() && readings.len() <= (elapsed + 20) / 40,
            "{} readings in {elapsed} ms",
            readings.len()
        );
        let clock = clock_mhz_now().is_some();
        assert!(readings.iter().all(|r| r.clock_mhz.is_some() == clock));
        assert_eq!(reading_at(&readings, 0), readings[0]);
    }

    #[test]
    fn a_busy_neighbour_process_shows_as_others_cpu_time() {
        let cpus = crate::affinity::allowed_cpus();
        let a = ticks_now(&cpus).expect("/proc/stat and /proc/self/stat are readable");
        // Another process spinning on the burn's CPUs for 400 ms: at least a share of one CPU
        // is its (it competes only with this test binary's threads, which count as our own).
        let mut spin = std::process::Command::new("sh")
            .args([
                "-c",
                "end=$(($(date +%s%N) + 400000000)); while [ $(date +%s%N) -lt $end ]; do :; done",
            ])
            .spawn()
            .expect("sh runs");
        spin.wait().expect("sh ends");
        let b = ticks_now(&cpus).unwrap();
        let others = others_between(a, b, cpus.len()).unwrap();
        assert!(
            others >= 0.2,
            "others took {others:.2} CPUs while a neighbour spun"
        );
        // This process's own time is counted as its own, and is not others' time: 200 busy
        // ticks of 200 on 2 CPUs, all of them ours, is no neighbour; half of them is one CPU's.
        let c = ticks_now(&cpus).unwrap();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let d = ticks_now(&cpus).unwrap();
        assert!(
            d.2 - c.2 >= 10,
            "own ticks {} after 300 ms of spinning",
            d.2 - c.2
        );
        assert_eq!(
            others_between((100, 1000, 50), (300, 1200, 250), 2),
            Some(0.0)
        );
        assert_eq!(
            others_between((100, 1000, 50), (300, 1200, 150), 2),
            Some(1.0)
        );
        assert_eq!(others_between((100, 1000, 50), (100, 1000, 50), 2), None);
    }

    #[test]
    fn parses_every_fault_form() {
        assert_eq!(
            Fault::parse("cpu:1:fma:after=1000").unwrap(),
            Fault::Cpu {
                cpu: 1,
                unit: "fma".into(),
                after: 1000
            }
        );
        assert_eq!(
            Fault::parse("mem:flip").unwrap(),
            Fault::MemFlip { after: 0 }
        );
        assert_eq!(
            Fault::parse("gpu:block:7").unwrap(),
            Fault::GpuBlock { block: 7 }
        );
        for bad in [
            "cpu:x:fma",
            "cpu:1:",
            "mem:flip:after=z",
            "disk",
            "gpu:block",
            "",
        ] {
            assert!(
                matches!(Fault::parse(bad), Err(BenchError::InvalidInput(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn mismatch_names_the_differing_bits() {
        let m = Mismatch::of_bits("chain 0", 0b1010, 0b0011);
        assert_eq!(m.bits, vec![0, 3]);
        assert_eq!(m.expected, "0x000000000000000a");
    }

    #[test]
    fn a_unit_with_nothing_checked_is_not_passed() {
        let mut u = UnitRun::new("cpu", "cpu0", "each", "int-lcg", "checks/s");
        u.settle();
        assert_eq!(u.status, UnitStatus::NotRun);
        u.checks = 3;
        u.settle();
        assert_eq!(u.status, UnitStatus::Pass);
        u.record_error(Mismatch::of_bits("x", 1, 0));
        u.settle();
        assert_eq!(u.status, UnitStatus::Fail);
    }
}
