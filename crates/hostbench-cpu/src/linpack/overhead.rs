//! A LINPACK solve's own overhead as a cause of its shortfall (`solve_overhead`): the linpack
//! subsystem's answer to `Subsystem::causes`.
//!
//! Only this crate knows what a `cpu.linpack` record's `extra` means (`of_fma_rate`, measured
//! beside every solve; `panel_share` and `idle_share`, where the threads' time went), so the
//! cause is read here and handed to core's diagnosis, which ranks it with the conditions'
//! (issue 53: subsystems own their causes; core holds no benchmark ids).

use hostbench_core::model::{Cause, Diagnosis, Record};

/// The solve's benchmark id.
const LINPACK: &str = "cpu.linpack";

/// A LINPACK solve below this share of the FMA rate measured beside it names its own overhead.
pub const SHORT_OF_FMA: f64 = 0.90;

/// A share as a whole percentage: "31 %".
fn pct(x: f64) -> String {
    format!("{:.0} %", x * 100.0)
}

/// The share of the FMA rate measured beside it that the solve did not reach, with where its
/// threads' time went (thread 0 factoring panels, every thread waiting at the step barriers).
/// Both shrink as n grows, so at a small n (a quick profile's) this, not the machine, is the
/// shortfall. The diagnosis says it only beside a shortfall, and not where the threads
/// outnumber the CPUs (their taking turns is then the cause).
pub fn solve_overhead(rec: &Record) -> Option<Diagnosis> {
    if rec.benchmark != LINPACK {
        return None;
    }
    let x = |k: &str| rec.extra.get(k).and_then(|v| v.as_f64());
    // Above 1 the FMA reading was disturbed (the record warns); that is no overhead.
    let of = x("of_fma_rate").filter(|of| *of > 0.0 && *of < SHORT_OF_FMA)?;
    let n = rec
        .params
        .get("n")
        .and_then(|v| v.as_u64())
        .map_or(String::new(), |n| format!(" at n = {n}"));
    let mut parts = Vec::new();
    if let Some(p) = x("panel_share") {
        parts.push(format!("the panels took {} of thread 0's time", pct(p)));
    }
    if let Some(i) = x("idle_share") {
        parts.push(format!(
            "the threads waited {} of theirs at the step barriers",
            pct(i)
        ));
    }
    let parts = if parts.is_empty() {
        String::new()
    } else {
        format!(": {}", parts.join(" and "))
    };
    Some(Diagnosis::new(
        Cause::SolveOverhead,
        1.0 - of,
        format!(
            "the solve reached {} of the FMA rate measured beside it{n}{parts}; both shrink as \
             n grows (`hostbench linpack --n` or `--mem-share`, or the full profile, whose n \
             fills half the available memory)",
            pct(of)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use hostbench_core::conditions::diagnose::testdata::{diagnose_as_committed, quiet, short};
    use hostbench_core::model::{Metric, Record, Work};
    use hostbench_core::runner::{record_from_samples, Case};

    /// What the runner does at commit: this subsystem's causes, then the diagnosis.
    fn diagnose(r: &mut Record) {
        diagnose_as_committed(r, &crate::Linpack);
    }

    /// A quick profile's small LINPACK: its shortfall is the solve's own overhead, measured in
    /// the record, beside clean conditions; a neighbour is still the condition a noisy warning
    /// names; and a disturbed FMA reading (of_fma_rate above 1) is no overhead.
    #[test]
    fn a_small_linpack_names_its_own_overhead_beside_the_conditions() {
        let linpack_on = |threads: u64, of: f64, samples: Vec<f64>| {
            let case = Case::new("cpu.linpack", Metric::Throughput, "FLOP/s")
                .work(Work::Solve)
                .param("n", 2000)
                .param("threads", threads);
            let mut r = record_from_samples(&case, samples);
            for (k, v) in [
                ("of_fma_rate", of),
                ("panel_share", 0.35),
                ("idle_share", 0.12),
            ] {
                r.extra.insert(k.into(), serde_json::json!(v));
            }
            r
        };
        let linpack = |of, samples| linpack_on(2, of, samples);
        let mut r = short(linpack(0.53, vec![62e9; 3]), quiet());
        diagnose(&mut r);
        let causes: Vec<&str> = r.diagnosis.iter().map(|d| d.cause.as_str()).collect();
        assert_eq!(
            causes,
            ["solve_overhead", "none_found"],
            "{:?}",
            r.diagnosis
        );
        let d = &r.diagnosis[0];
        assert!((d.share - 0.47).abs() < 1e-9);
        assert_eq!(
            d.text,
            "the solve reached 53 % of the FMA rate measured beside it at n = 2000: the panels \
                 took 35 % of thread 0's time and the threads waited 12 % of theirs at the step \
                 barriers; both shrink as n grows (`hostbench linpack --n` or `--mem-share`, or the \
                 full profile, whose n fills half the available memory)"
        );
        assert!(!d.is_condition());
        assert!(r.diagnosis[1]
            .text
            .starts_with("no condition of the machine found among: steal"));
        // With a neighbour: both, no "none found", and the noisy warning names the neighbour.
        let mut c = quiet();
        c.other_cpu_share = Some(0.2);
        let mut r = short(linpack(0.53, vec![40e9, 62e9, 80e9]), c);
        diagnose(&mut r);
        assert!(r.warnings.iter().any(|w| w.starts_with("noisy:")));
        let causes: Vec<&str> = r.diagnosis.iter().map(|d| d.cause.as_str()).collect();
        assert_eq!(causes, ["solve_overhead", "cpu_contention"]);
        let noisy = r.warnings.iter().find(|w| w.starts_with("noisy:")).unwrap();
        assert!(
            noisy.ends_with(": other processes used 20 % of CPUs 0, 1"),
            "{noisy}"
        );
        // A disturbed FMA reading, or a solve close to the FMA rate: no overhead named.
        for of in [1.7, 0.93] {
            let mut r = short(linpack(of, vec![62e9; 3]), quiet());
            diagnose(&mut r);
            let causes: Vec<&str> = r.diagnosis.iter().map(|d| d.cause.as_str()).collect();
            assert_eq!(causes, ["none_found"], "{of}");
        }
        // Sixteen threads taking turns on two CPUs: the oversubscription is the cause, and no
        // larger n would help.
        let mut r = short(linpack_on(16, 0.16, vec![18e9; 3]), quiet());
        diagnose(&mut r);
        let causes: Vec<&str> = r.diagnosis.iter().map(|d| d.cause.as_str()).collect();
        assert_eq!(causes, ["affinity"], "{:?}", r.diagnosis);
    }
}
