//! Fixtures of the diagnosis's tests, here and in the subsystems whose causes it ranks
//! (`Subsystem::causes`: cpu's solve overhead, net's sender, the GPU's clock reasons), so each
//! crate's tests diagnose a record on the same quiet two-CPU host as core's own.
//! Not part of the API (hidden from the docs).

use super::Context;
use crate::model::{CgroupConditions, Conditions, MemoryPressure, Peak, Record};
use crate::subsystem::Subsystem;

/// A quiet two-CPU host as read during a record: nothing stolen, no neighbour, no quota.
pub fn quiet() -> Conditions {
    Conditions {
        cpus: vec![0, 1],
        seconds: 1.0,
        steal_share: Some(0.0),
        run_delay_share: Some(0.0),
        other_cpu_share: Some(0.0),
        cgroup: Some(CgroupConditions {
            version: 1,
            path: "/".into(),
            quota_cpus: None,
            allowed_cpus: 2,
            ..CgroupConditions::default()
        }),
        memory: Some(MemoryPressure::default()),
        ..Conditions::default()
    }
}

/// Two CPUs allowed, two cores, each with its own FMA units.
pub fn ctx() -> Context {
    Context {
        allowed_cpus: 2,
        cores: 2,
        effective_cores: Some(2.0),
    }
}

/// `r` at half its peak, measured under `c`.
pub fn short(mut r: Record, c: Conditions) -> Record {
    r.set_peak(Some(Peak {
        value: r.value * 2.0,
        basis: "test".into(),
    }));
    r.conditions = Some(c);
    r
}

/// What the runner does at commit, on [`ctx`]'s host: `subsystem`'s causes
/// (`Subsystem::causes`), then the diagnosis.
pub fn diagnose_as_committed(r: &mut Record, subsystem: &dyn Subsystem) {
    r.subsystem_causes = subsystem.causes(r);
    super::apply(r, &ctx(), None);
}
