//! Unit tests of `judge.rs`, kept in their own file so the module itself stays short
//! (issue 53: no source file over 1,000 lines).

use super::super::expect::{resolve, ExpectToml};
use super::*;
use crate::conditions::{CgroupConditions, Conditions, GpuConditions};
use crate::model::{HealthFinding, HealthReading, Peak, Work};
use crate::runner::{record_from_samples, Case};

fn rec(value: f64, cond: Conditions) -> Record {
    let case = Case::new("cpu.flops", Metric::Throughput, "FLOP/s")
        .work(Work::Compute)
        .param("dtype", "f64")
        .param("threads", 2);
    let mut r = record_from_samples(&case, vec![value; 3]);
    r.set_peak(Some(Peak {
        value: 100e9,
        basis: "2 cores x 3 GHz x 16".into(),
    }));
    r.conditions = Some(cond);
    r
}

fn quiet() -> Conditions {
    Conditions {
        cpus: vec![0, 1],
        seconds: 1.0,
        steal_share: Some(0.0),
        run_delay_share: Some(0.0),
        other_cpu_share: Some(0.0),
        cgroup: Some(CgroupConditions {
            version: 2,
            path: "/".into(),
            quota_cpus: None,
            allowed_cpus: 2,
            ..CgroupConditions::default()
        }),
        ..Conditions::default()
    }
}

fn floor(bound: f64) -> Yardstick {
    Yardstick {
        bound,
        at_least: true,
        source: "expect nd.toml:9".into(),
    }
}

fn expectation(text: &str) -> Expectation {
    let spec = crate::spec::Spec::parse(text).expect("spec");
    let raw: ExpectToml = spec.expect.unwrap_or_default();
    resolve(&raw, text, std::path::Path::new("nd.toml")).expect("expect")
}

#[test]
fn a_figure_above_its_floor_passes_and_one_that_recovers_on_retry_warns() {
    let host = Host::default();
    let c = figure(&rec(90e9, quiet()), None, &floor(80e9), &host);
    assert_eq!(c.verdict, Verdict::Pass);
    assert_eq!(
        c.reason,
        "cpu.flops f64 x2: 90.0 GFLOP/s >= 80.0 GFLOP/s (expect nd.toml:9)"
    );
    let c = figure(
        &rec(70e9, quiet()),
        Some(&rec(85e9, quiet())),
        &floor(80e9),
        &host,
    );
    assert_eq!(c.verdict, Verdict::Warn);
    assert_eq!(
        c.retry,
        Some(Retry {
            first: 70e9,
            second: 85e9
        })
    );
    assert!(
        c.reason
            .contains("on the first try, 85.0 GFLOP/s on the retry"),
        "{}",
        c.reason
    );
}

#[test]
fn a_miss_twice_under_a_quota_is_unknown_and_with_nothing_found_it_fails() {
    let host = Host::default();
    let mut q = quiet();
    let cg = q.cgroup.as_mut().expect("cgroup");
    cg.quota_cpus = Some(1.0);
    cg.nr_throttled = 300;
    cg.throttled_s = 0.4;
    let c = figure(
        &rec(45e9, q.clone()),
        Some(&rec(46e9, q)),
        &floor(80e9),
        &host,
    );
    assert_eq!(c.verdict, Verdict::Unknown, "{c:?}");
    assert!(
        c.reason.contains("(cgroup_quota): not the node's hardware"),
        "{}",
        c.reason
    );
    assert!(c.diagnosis.iter().any(|d| d.cause == "cgroup_quota"));

    let c = figure(
        &rec(45e9, quiet()),
        Some(&rec(46e9, quiet())),
        &floor(80e9),
        &host,
    );
    assert_eq!(c.verdict, Verdict::Fail, "{c:?}");
    assert!(
        c.reason
            .ends_with("no condition of the machine explains it"),
        "{}",
        c.reason
    );
    assert!(c
        .reason
        .starts_with("cpu.flops f64 x2: 45.0 GFLOP/s and 46.0 GFLOP/s < 80.0 GFLOP/s"));
}

#[test]
fn heat_and_the_gpus_hardware_brake_fail_and_its_software_cap_does_not() {
    let host = Host::default();
    let mut hot = quiet();
    hot.thermal_throttle_events = Some(12);
    let c = figure(
        &rec(45e9, hot.clone()),
        Some(&rec(45e9, hot)),
        &floor(80e9),
        &host,
    );
    assert_eq!(c.verdict, Verdict::Fail);
    assert!(c.reason.contains("thermal-throttle events"), "{}", c.reason);
    for (reason, want) in [
        ("hw_power_brake", Verdict::Fail),
        ("sw_power_cap", Verdict::Unknown),
    ] {
        let mut g = quiet();
        g.gpu = Some(GpuConditions {
            clock_reasons: vec![reason.into()],
            sm_clock_hz: Some(1.2e9),
            sm_clock_max_hz: Some(1.98e9),
            ..GpuConditions::default()
        });
        // The cause the gpu subsystem found in the clock reasons when the runner committed
        // the record (`Subsystem::causes`; its own crate tests the words).
        let capped = |g: Conditions| {
            let mut r = rec(45e9, g);
            r.subsystem_causes = vec![Diagnosis::new(
                Cause::PowerCap,
                1.0 - 1.2 / 1.98,
                "GPU clock held at 1200 MHz by its power cap".into(),
            )];
            r
        };
        let c = figure(&capped(g.clone()), Some(&capped(g)), &floor(80e9), &host);
        assert_eq!(c.verdict, want, "{reason}: {}", c.reason);
    }
}

#[test]
fn a_memory_shortfall_with_no_cause_is_unknown_on_a_vm_and_fails_on_bare_metal() {
    let case = Case::new("mem.bandwidth", Metric::Throughput, "B/s")
        .work(Work::Memory)
        .param("kernel", "triad");
    let mem = |v: f64| {
        let mut r = record_from_samples(&case, vec![v; 3]);
        r.conditions = Some(quiet());
        r
    };
    let mut host = Host {
        virtualization: "kvm".into(),
        ..Host::default()
    };
    let c = figure(&mem(44e9), Some(&mem(43e9)), &floor(56e9), &host);
    assert_eq!(c.verdict, Verdict::Unknown, "{}", c.reason);
    assert!(
        c.reason
            .contains("on a virtual machine (kvm) other guests' use of memory bandwidth"),
        "{}",
        c.reason
    );
    // The CPU's figures stay judged on a VM: its stolen time and clock are visible.
    assert_eq!(
        figure(
            &rec(45e9, quiet()),
            Some(&rec(46e9, quiet())),
            &floor(80e9),
            &host
        )
        .verdict,
        Verdict::Fail
    );
    host.virtualization = "none".into();
    assert_eq!(
        figure(&mem(44e9), Some(&mem(43e9)), &floor(56e9), &host).verdict,
        Verdict::Fail
    );
}

#[test]
fn a_retry_is_the_same_case_even_where_linpack_sized_another_n() {
    let solve = |n: u64| {
        let case = Case::new("cpu.linpack", Metric::Throughput, "FLOP/s")
            .param("n", n)
            .param("threads", 2);
        record_from_samples(&case, vec![1e9; 3])
    };
    assert!(same_case(&solve(6976), &solve(7040)));
    assert!(!same_case(&solve(6976), &rec(1e9, quiet())));
}

#[test]
fn a_floor_above_the_peak_fails_whatever_else_was_running() {
    let host = Host::default();
    let mut q = quiet();
    q.other_cpu_share = Some(0.6);
    let c = figure(
        &rec(45e9, q.clone()),
        Some(&rec(46e9, q)),
        &floor(200e9),
        &host,
    );
    assert_eq!(c.verdict, Verdict::Fail, "{}", c.reason);
    assert!(
        c.reason.contains("above this node's peak of 100 GFLOP/s"),
        "{}",
        c.reason
    );
}

#[test]
fn a_cut_measurement_or_a_retry_that_could_not_run_is_never_a_pass() {
    let host = Host::default();
    let mut r = rec(90e9, quiet());
    r.incomplete = Some(crate::model::Incomplete {
        error: "peer gone".into(),
        samples_planned: 3,
    });
    assert_eq!(
        figure(&r, None, &floor(80e9), &host).verdict,
        Verdict::Unknown
    );
    assert_eq!(
        figure(&rec(10e9, quiet()), None, &floor(80e9), &host).verdict,
        Verdict::Unknown
    );
}

#[test]
fn yardsticks_are_tried_in_order_file_baseline_peak() {
    let e = expectation(
        "[[expect.figure]]\nbenchmark = \"cpu.flops\"\nparams = { dtype = \"f64\" }\nmin = 7e10\n",
    );
    let mut params = Params::new();
    params.insert("dtype".into(), "f64".into());
    params.insert("threads".into(), 2.into());
    let b = Baseline {
        label: "run #4".into(),
        figures: vec![BaselineFigure {
            benchmark: "cpu.flops".into(),
            params,
            value: 96e9,
        }],
    };
    let r = rec(90e9, quiet());
    let mut y = Yardsticks {
        expect: Some(&e),
        baseline: Some(&b),
        peak_share: (0.85, "default".into()),
        tolerance: 0.25,
    };
    assert_eq!(y.for_record(&r).expect("file").source, "expect nd.toml:1");
    y.expect = None;
    let by_base = y.for_record(&r).expect("baseline");
    assert_eq!(by_base.bound, 96e9 * 0.75);
    assert!(
        by_base
            .source
            .starts_with("baseline run #4 96.0 GFLOP/s less 25 %"),
        "{}",
        by_base.source
    );
    y.baseline = None;
    let by_peak = y.for_record(&r).expect("peak");
    assert!((by_peak.bound - 85e9).abs() < 1.0);
    let mut bare = r.clone();
    bare.peak = None;
    assert!(y
        .for_record(&bare)
        .expect_err("nothing")
        .contains("no peak"));
}

fn health(findings: &[(&str, Severity)], unavailable: &[(&str, &str)]) -> Health {
    let mut h = Health::default();
    for (id, sev) in findings {
        h.readings.push(HealthReading {
            id: (*id).into(),
            device: "mc0".into(),
            label: None,
            values: Params::new(),
            findings: vec![HealthFinding {
                severity: *sev,
                text: format!("{id} finding"),
            }],
        });
    }
    for (id, why) in unavailable {
        h.unavailable.insert((*id).into(), (*why).into());
    }
    h
}

#[test]
fn counters_fail_on_a_fault_and_a_required_or_present_but_unread_source_is_unknown() {
    let h = health(
        &[
            ("health.edac", Severity::Fail),
            ("health.nic", Severity::Info),
        ],
        &[
            ("health.gpu", "NVML not found"),
            ("health.nvme", "no NVMe controller"),
        ],
    );
    let (checks, reported) = super::health(&h, None, 0);
    let v: Vec<(&str, Verdict)> = checks.iter().map(|c| (c.id.as_str(), c.verdict)).collect();
    assert_eq!(
        v,
        [
            ("health.edac", Verdict::Fail),
            ("health.nic", Verdict::Pass)
        ]
    );
    assert_eq!(reported.len(), 2, "unreadable and not required: reported");
    let (checks, _) = super::health(&h, None, 8);
    assert!(checks
        .iter()
        .any(|c| c.id == "health.gpu" && c.verdict == Verdict::Unknown));
    let e = expectation("[expect]\nrequire = [\"health.nvme\"]\n");
    let (checks, _) = super::health(&h, Some(&e), 0);
    let nvme = checks.iter().find(|c| c.id == "health.nvme").expect("nvme");
    assert_eq!(nvme.verdict, Verdict::Unknown);
    assert!(
        nvme.reason.contains("required by expect nd.toml:2"),
        "{}",
        nvme.reason
    );
}

#[test]
fn a_counter_over_its_limit_warns_or_fails() {
    let mut h = health(&[], &[]);
    let mut r = HealthReading {
        id: "health.gpu".into(),
        device: "gpu0".into(),
        label: None,
        values: Params::new(),
        findings: Vec::new(),
    };
    r.values
        .insert("sram_aggregate_corrected".into(), 12000.into());
    h.readings.push(r);
    let e = expectation("[expect.limits]\n\"health.gpu.sram_aggregate_corrected\" = { warn = 1000, fail = 10000 }\n");
    let (checks, _) = super::health(&h, Some(&e), 0);
    assert_eq!(checks[0].verdict, Verdict::Fail);
    assert_eq!(
        checks[0].reason,
        "gpu0: sram_aggregate_corrected 12000 > 10000 (expect nd.toml:2)"
    );
}

#[test]
fn missing_cpus_fail_naming_the_count_and_the_node_line_leads_with_the_fails() {
    let mut host = Host::default();
    host.cpu.threads = 2;
    host.memory.total_bytes = 24 << 30;
    let e = expectation("[expect]\ncpus = 64\nmemory_gib = 24\n");
    let checks = inventory(&host, &e);
    assert_eq!(checks[0].verdict, Verdict::Fail);
    assert_eq!(
        checks[0].reason,
        "inventory.cpus: 2 logical CPUs online, expected 64 (expect nd.toml:2): missing CPUs"
    );
    assert_eq!(checks[1].verdict, Verdict::Pass);
    let (v, line) = node(&checks);
    assert_eq!(v, Verdict::Fail);
    assert_eq!(line, checks[0].reason);
    let (v, line) = node(&checks[1..]);
    assert_eq!((v, line.as_str()), (Verdict::Pass, "1 checks passed"));
    assert_eq!(
        node(&[]).0,
        Verdict::Unknown,
        "nothing checked is never a pass"
    );
}

#[test]
fn expected_gpus_that_cannot_be_counted_are_unknown_and_missing_ones_fail() {
    let mut host = Host::default();
    let e = expectation("[expect]\ngpus = 8\n");
    host.health = Some(health(&[], &[("health.gpu", "NVML not found")]));
    assert_eq!(inventory(&host, &e)[0].verdict, Verdict::Unknown);
    let mut h = Health::default();
    h.readings.push(HealthReading {
        id: "health.gpu".into(),
        device: "gpu0".into(),
        label: Some("NVIDIA H100".into()),
        values: Params::new(),
        findings: Vec::new(),
    });
    host.health = Some(h);
    let c = &inventory(&host, &e)[0];
    assert_eq!(c.verdict, Verdict::Fail);
    assert!(
        c.reason.contains("1 GPU(s) found, expected 8"),
        "{}",
        c.reason
    );
}
