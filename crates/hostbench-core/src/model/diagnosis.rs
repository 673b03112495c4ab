//! A record's diagnosis as stored in the result: each measured cause of its shortfall, with its
//! share and what was measured (`Record::diagnosis`, `hostbench/result/v1`, additive).
//!
//! Plain data with serde; the inference that produces it (`crate::conditions::diagnose`) imports
//! it, never the other way round (issue 53).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Record;

/// One cause of a shortfall (cause ids: add, never rename).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Diagnosis {
    /// `cgroup_quota`, `cpu_contention`, `steal`, `shared_cores`, `clock_drop`, `thermal`,
    /// `power_cap`, `affinity`, `memory_pressure`, `solve_overhead` (a LINPACK solve's own
    /// overhead), `sender_behind` (a paced stream's sender that did not keep its schedule; like
    /// `solve_overhead` the benchmark's, not a condition of the machine), `kernel_io` (the
    /// kernel's interrupts and threads on a disk or network benchmark's CPUs: its own I/O being
    /// completed, also the benchmark's) or `none_found`.
    #[schemars(with = "String")]
    pub cause: Cause,
    /// The share of the record's CPU time (or throughput) the cause accounts for, 0–1; 0 where
    /// the source counts events but cannot size them (thermal throttling, reclaim).
    pub share: f64,
    /// What was measured, naming the figure: "steal 31 % of CPU time on CPUs 8–15".
    pub text: String,
}

impl Diagnosis {
    /// A cause with its share clamped to 0–1.
    pub fn new(cause: Cause, share: f64, text: String) -> Self {
        Self {
            cause,
            share: share.clamp(0.0, 1.0),
            text,
        }
    }

    /// A condition the record was measured under (what `compare` may excuse a difference by,
    /// and a noisy record's warning may name), rather than "none found" or the benchmark's own
    /// overhead.
    pub fn is_condition(&self) -> bool {
        self.cause.is_condition()
    }
}

/// Below this share of its peak a record is a shortfall.
pub const SHORT_OF_PEAK: f64 = 0.90;

/// Why a record was diagnosed: its shortfalls. Kept on the record by the diagnosis
/// (`Record::trigger`) so the reports say why a record was looked into without inferring it
/// again; not written to the result (the JSON is unchanged), and for a record read back from a
/// file its own figures give all but `elsewhere` ([`Trigger::of`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trigger {
    /// Its efficiency, where below [`SHORT_OF_PEAK`].
    pub below_peak: Option<f64>,
    /// Its samples' coefficient of variation, where beyond [`super::NOISY_CV`].
    pub noisy: Option<f64>,
    /// A shortfall only other records show: a scaling step below linear ("2→4 threads gave
    /// 1.31× (55 % of linear)"), or `check`'s yardstick.
    pub elsewhere: Option<String>,
}

impl Trigger {
    /// The shortfalls a record's own figures show: below its peak, samples spread.
    pub fn of(rec: &Record) -> Trigger {
        Trigger {
            below_peak: rec.efficiency.filter(|e| *e < SHORT_OF_PEAK),
            noisy: (rec.stats.n > 1 && rec.stats.cv > super::NOISY_CV).then_some(rec.stats.cv),
            elsewhere: None,
        }
    }

    /// The record's own shortfall in words, against its peak first: "62 % of its peak",
    /// "CV 5.5 %".
    pub fn shortfall(&self) -> Option<String> {
        if let Some(e) = self.below_peak {
            return Some(format!("{:.0} % of its peak", e * 100.0));
        }
        self.noisy.map(|cv| format!("CV {:.1} %", cv * 100.0))
    }

    /// Why the record was looked into: a shortfall found elsewhere, else its own.
    pub fn reason(&self) -> Option<String> {
        self.elsewhere.clone().or_else(|| self.shortfall())
    }
}

/// What a diagnosis names, serialised as its id (`cgroup_quota`, `steal`…). Ids are the
/// contract: a new cause adds a variant and an id, none is ever renamed. An id this build does
/// not know (a newer hostbench's, read from its run.json) is kept as `Other` and written back
/// unchanged, so an older build still loads and re-renders such a file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Cause {
    /// Threads beyond the CPUs the affinity mask allows.
    Affinity,
    /// A cgroup CPU quota below the threads, or its throttling.
    CgroupQuota,
    /// Other processes' (or hostbench's own helpers') CPU time on the record's CPUs.
    CpuContention,
    /// Time the hypervisor gave to something else.
    Steal,
    /// CPUs that share execution units (hidden SMT, an overcommitted host).
    SharedCores,
    /// The core clock fell during the record.
    ClockDrop,
    /// Thermal throttling (CPU events or a GPU held down for temperature).
    Thermal,
    /// A GPU clock held by its power cap.
    PowerCap,
    /// Swap-ins or direct reclaim during the record.
    MemoryPressure,
    /// A LINPACK solve's own overhead (the benchmark's, not the machine's).
    SolveOverhead,
    /// A paced sender that did not keep its schedule (the benchmark's).
    SenderBehind,
    /// The kernel completing a disk or network benchmark's own I/O (the benchmark's).
    KernelIo,
    /// Nothing among the sources read explains the shortfall.
    NoneFound,
    /// An id this build does not know, kept as read.
    Other(String),
}

impl Cause {
    /// The id written to the result.
    pub fn as_str(&self) -> &str {
        match self {
            Cause::Affinity => "affinity",
            Cause::CgroupQuota => "cgroup_quota",
            Cause::CpuContention => "cpu_contention",
            Cause::Steal => "steal",
            Cause::SharedCores => "shared_cores",
            Cause::ClockDrop => "clock_drop",
            Cause::Thermal => "thermal",
            Cause::PowerCap => "power_cap",
            Cause::MemoryPressure => "memory_pressure",
            Cause::SolveOverhead => "solve_overhead",
            Cause::SenderBehind => "sender_behind",
            Cause::KernelIo => "kernel_io",
            Cause::NoneFound => "none_found",
            Cause::Other(id) => id,
        }
    }

    /// The cause an id names (`Other` for one this build does not know).
    pub fn from_id(id: &str) -> Cause {
        const KNOWN: [Cause; 13] = [
            Cause::Affinity,
            Cause::CgroupQuota,
            Cause::CpuContention,
            Cause::Steal,
            Cause::SharedCores,
            Cause::ClockDrop,
            Cause::Thermal,
            Cause::PowerCap,
            Cause::MemoryPressure,
            Cause::SolveOverhead,
            Cause::SenderBehind,
            Cause::KernelIo,
            Cause::NoneFound,
        ];
        KNOWN
            .into_iter()
            .find(|c| c.as_str() == id)
            .unwrap_or_else(|| Cause::Other(id.to_string()))
    }

    /// A condition the record was measured under, rather than "none found" or the benchmark's
    /// own work (its solve's overhead, its sender, the kernel completing its I/O). An unknown
    /// id counts as a condition, as it did when ids were plain strings.
    pub fn is_condition(&self) -> bool {
        match self {
            Cause::NoneFound | Cause::SolveOverhead | Cause::SenderBehind | Cause::KernelIo => {
                false
            }
            Cause::Affinity
            | Cause::CgroupQuota
            | Cause::CpuContention
            | Cause::Steal
            | Cause::SharedCores
            | Cause::ClockDrop
            | Cause::Thermal
            | Cause::PowerCap
            | Cause::MemoryPressure
            | Cause::Other(_) => true,
        }
    }

    /// A cause that matters whatever its share: fewer CPUs than threads (the mask or the
    /// quota) make them take turns, which no measured share sizes fully.
    pub fn counts_at_any_share(&self) -> bool {
        match self {
            Cause::Affinity | Cause::CgroupQuota => true,
            Cause::CpuContention
            | Cause::Steal
            | Cause::SharedCores
            | Cause::ClockDrop
            | Cause::Thermal
            | Cause::PowerCap
            | Cause::MemoryPressure
            | Cause::SolveOverhead
            | Cause::SenderBehind
            | Cause::KernelIo
            | Cause::NoneFound
            | Cause::Other(_) => false,
        }
    }

    /// A cause that explains a shortfall but is no finding on a record that did not fall
    /// short, however large: the host's standing sharing of execution units, and the
    /// benchmark's own overhead or I/O.
    pub fn only_beside_a_shortfall(&self) -> bool {
        match self {
            Cause::SharedCores | Cause::SolveOverhead | Cause::KernelIo => true,
            Cause::Affinity
            | Cause::CgroupQuota
            | Cause::CpuContention
            | Cause::Steal
            | Cause::ClockDrop
            | Cause::Thermal
            | Cause::PowerCap
            | Cause::MemoryPressure
            | Cause::SenderBehind
            | Cause::NoneFound
            | Cause::Other(_) => false,
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Cause {
    fn from(id: &str) -> Cause {
        Cause::from_id(id)
    }
}

/// Compared with an id as written: `d.cause == "steal"`.
impl PartialEq<&str> for Cause {
    fn eq(&self, id: &&str) -> bool {
        self.as_str() == *id
    }
}

impl PartialEq<str> for Cause {
    fn eq(&self, id: &str) -> bool {
        self.as_str() == id
    }
}

impl Serialize for Cause {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Cause {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Cause, D::Error> {
        let id = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(Cause::from_id(&id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_id_round_trips_and_an_unknown_one_is_kept_as_read() {
        for id in [
            "affinity",
            "cgroup_quota",
            "cpu_contention",
            "steal",
            "shared_cores",
            "clock_drop",
            "thermal",
            "power_cap",
            "memory_pressure",
            "solve_overhead",
            "sender_behind",
            "kernel_io",
            "none_found",
        ] {
            let c = Cause::from_id(id);
            assert!(!matches!(c, Cause::Other(_)), "{id} is known");
            assert_eq!(serde_json::to_value(&c).unwrap(), serde_json::json!(id));
        }
        // A newer build's cause, in an older build: loaded, judged a condition, written back.
        let text = r#"{"cause":"numa_remote","share":0.2,"text":"x"}"#;
        let d: Diagnosis = serde_json::from_str(text).unwrap();
        assert_eq!(d.cause, Cause::Other("numa_remote".into()));
        assert!(d.is_condition());
        assert_eq!(serde_json::to_string(&d).unwrap(), text);
        // Anything but a string is refused, as it was.
        assert!(serde_json::from_str::<Diagnosis>(r#"{"cause":3,"share":0,"text":""}"#).is_err());
    }

    fn noisy_record() -> Record {
        let case =
            crate::runner::Case::new("mem.bandwidth", super::super::Metric::Throughput, "B/s");
        crate::runner::record_from_samples(&case, vec![1.0, 2.0, 3.0])
    }

    #[test]
    fn the_trigger_is_stored_by_the_diagnosis_and_read_back_from_a_record_s_own_figures() {
        let mut r = noisy_record();
        r.conditions = Some(super::super::Conditions::default());
        let ctx = crate::conditions::diagnose::Context::default();
        crate::conditions::diagnose::apply(&mut r, &ctx, Some("2→4 threads gave 1.10×".into()));
        let stored = r.trigger.clone().expect("stored by the diagnosis");
        assert_eq!(stored.elsewhere.as_deref(), Some("2→4 threads gave 1.10×"));
        assert_eq!(stored.reason().as_deref(), Some("2→4 threads gave 1.10×"));
        assert_eq!(
            stored.shortfall(),
            Some(format!("CV {:.1} %", r.stats.cv * 100.0))
        );
        // Not written: read back, the record's own figures give the same shortfall.
        let back: Record = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert!(back.trigger.is_none());
        assert_eq!(back.trigger().shortfall(), stored.shortfall());
        assert_eq!(back.trigger().elsewhere, None);
        // A record at its peak and steady has no trigger of its own.
        let case =
            crate::runner::Case::new("cpu.flops", super::super::Metric::Throughput, "FLOP/s");
        let steady = crate::runner::record_from_samples(&case, vec![2.0; 3]);
        assert_eq!(steady.trigger(), Trigger::default());
    }

    #[test]
    fn the_noisy_warning_is_written_once_and_names_its_cause_in_place() {
        let mut r = noisy_record();
        r.warnings.push("another".into());
        // Not written as measured: the diagnosis writes it, first among the warnings.
        assert_eq!(r.warnings, ["another"]);
        r.note_noise(None);
        let plain = r.warnings[0].clone();
        assert!(
            plain.starts_with("noisy: CV ")
                && plain.ends_with("; rerun on a quiet machine or raise --repeat")
        );
        r.note_noise(None);
        assert_eq!(r.warnings.len(), 2, "not written twice");
        r.note_noise(Some("steal 12 %"));
        assert!(
            r.warnings[0].ends_with(" (> 5 %): steal 12 %"),
            "{}",
            r.warnings[0]
        );
        assert_eq!(r.warnings[1], "another");
        // A second diagnosis (check's, with its yardstick) keeps the first one's words.
        r.note_noise(Some("other"));
        assert!(r.warnings[0].ends_with(": steal 12 %"));
        assert_eq!(
            r.warnings
                .iter()
                .filter(|w| w.starts_with("noisy:"))
                .count(),
            1
        );
        // A diagnosis that measured a cause at once writes the warning naming it.
        let mut r = noisy_record();
        r.note_noise(Some("steal 12 %"));
        assert!(r.warnings[0].ends_with(" (> 5 %): steal 12 %"));
        assert_eq!(r.warnings.len(), 1);
    }

    #[test]
    fn the_schema_still_says_a_cause_is_a_string() {
        let s = schemars::schema_for!(Diagnosis).to_value();
        assert_eq!(s["properties"]["cause"]["type"], "string");
    }
}
