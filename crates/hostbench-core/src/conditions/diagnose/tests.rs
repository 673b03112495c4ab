//! Unit tests of `diagnose.rs`, kept in their own file so the module itself stays short
//! (issue 53: no source file over 1,000 lines).

use super::testdata::{ctx, quiet, short};
use super::*;
use crate::conditions::{ClockSpan, CpuShare, KernelThreadShare};
use crate::model::{Metric, Peak, Work};
use crate::runner::{record_from_samples, Case};

/// What the subsystem owning `benchmark` says its threads do (`Case::work`).
fn work_of(benchmark: &str) -> Work {
    match benchmark.split('.').next() {
        Some("cpu") => Work::Compute,
        Some("mem") => Work::Memory,
        Some("disk") => Work::Storage,
        Some("net") => Work::Network,
        _ => Work::Other,
    }
}

fn rec(benchmark: &str, threads: u64, value: f64) -> Record {
    let case = Case::new(benchmark, Metric::Throughput, "FLOP/s")
        .work(work_of(benchmark))
        .param("dtype", "f64")
        .param("threads", threads);
    record_from_samples(&case, vec![value; 3])
}

#[test]
fn a_quota_below_the_threads_is_named_with_its_throttling() {
    let mut c = quiet();
    let cg = c.cgroup.as_mut().unwrap();
    cg.quota_cpus = Some(1.0);
    cg.nr_throttled = 412;
    cg.throttled_s = 0.45;
    let mut r = short(rec("cpu.flops", 2, 1e9), c);
    apply(&mut r, &ctx(), None);
    let d = &r.diagnosis[0];
    assert_eq!(d.cause, "cgroup_quota");
    assert!((d.share - 0.5).abs() < 1e-9);
    assert!(
        d.text
            .contains("cgroup quota of 1.0 CPU for 2 threads: throttled 412 times"),
        "{}",
        d.text
    );
}

#[test]
fn a_busy_neighbour_is_named_by_its_cpu_and_steal_by_its_cpus() {
    let mut c = quiet();
    c.other_cpu_share = Some(0.24);
    c.steal_share = Some(0.31);
    c.per_cpu = vec![
        CpuShare {
            cpu: 1,
            steal_share: 0.0,
            other_share: 0.48,
            kernel_share: 0.0,
        },
        CpuShare {
            cpu: 8,
            steal_share: 0.3,
            other_share: 0.0,
            kernel_share: 0.0,
        },
        CpuShare {
            cpu: 9,
            steal_share: 0.32,
            other_share: 0.0,
            kernel_share: 0.0,
        },
    ];
    let mut r = short(rec("cpu.flops", 2, 1e9), c);
    apply(&mut r, &ctx(), None);
    let causes: Vec<&str> = r.diagnosis.iter().map(|d| d.cause.as_str()).collect();
    assert_eq!(causes, ["steal", "cpu_contention"]);
    assert_eq!(
        r.diagnosis[0].text,
        "steal 31 % of CPU time on CPUs 8, 9 (the hypervisor ran something else)"
    );
    assert_eq!(r.diagnosis[1].text, "another process used 48 % of CPU 1");
}

#[test]
fn the_kernel_completing_a_disk_benchmarks_io_is_no_neighbour() {
    // 30 % of the CPUs' time went elsewhere; 25 % of it to the kernel, 20 % to the
    // direct-I/O completion worker.
    let with_kernel = |mut c: Conditions| {
        c.other_cpu_share = Some(0.30);
        c.kernel_share = Some(0.25);
        c.kernel_threads = vec![KernelThreadShare {
            name: "kworker/1:0+dio/vda".into(),
            share: 0.20,
        }];
        c
    };
    let mut c = with_kernel(quiet());
    c.per_cpu = vec![CpuShare {
        cpu: 1,
        steal_share: 0.0,
        other_share: 0.55,
        kernel_share: 0.45,
    }];
    let mut r = short(rec("disk.throughput", 1, 1e9), c.clone());
    apply(&mut r, &ctx(), None);
    let causes: Vec<&str> = r.diagnosis.iter().map(|d| d.cause.as_str()).collect();
    // The kernel's part is the benchmark's; what is left (5 %, 10 % of CPU 1) a neighbour's.
    assert_eq!(causes, ["kernel_io", "cpu_contention"], "{:?}", r.diagnosis);
    assert_eq!(
        r.diagnosis[0].text,
        "the kernel's interrupts and threads used 25 % of CPUs 0, 1 (kworker/1:0+dio/vda \
             20 %, interrupts and the rest 5 %): most likely completing this benchmark's own \
             I/O, a part of what it costs, not a neighbour"
    );
    assert!(!r.diagnosis[0].is_condition());
    assert_eq!(r.diagnosis[1].text, "another process used 10 % of CPU 1");
    assert!((r.diagnosis[1].share - 0.05).abs() < 1e-9);
    // All of it the kernel's: no neighbour, and "none found" says so.
    let mut all_kernel = c.clone();
    all_kernel.other_cpu_share = Some(0.25);
    all_kernel.per_cpu[0].other_share = 0.45;
    let mut r = short(rec("disk.throughput", 1, 1e9), all_kernel);
    apply(&mut r, &ctx(), None);
    let causes: Vec<&str> = r.diagnosis.iter().map(|d| d.cause.as_str()).collect();
    assert_eq!(causes, ["kernel_io", "none_found"], "{:?}", r.diagnosis);
    // Not short, the kernel's work alone is no finding, however large.
    let mut r = rec("disk.throughput", 1, 1e9);
    r.conditions = Some(c);
    apply(&mut r, &ctx(), None);
    assert!(r.diagnosis.iter().all(|d| d.cause != "kernel_io"));
    // On a CPU benchmark the kernel is a neighbour like any other, named.
    let mut r = short(rec("cpu.flops", 2, 1e9), with_kernel(quiet()));
    apply(&mut r, &ctx(), None);
    assert_eq!(r.diagnosis[0].cause, "cpu_contention");
    assert_eq!(
        r.diagnosis[0].text,
        "other processes used 30 % of CPUs 0, 1 (the kernel's part 25 %: kworker/1:0+dio/vda \
             20 %, interrupts and the rest 5 %)"
    );
}

#[test]
fn threads_beyond_the_mask_are_an_affinity_cause_even_at_full_efficiency() {
    let mut c = quiet();
    c.cgroup.as_mut().unwrap().allowed_cpus = 1;
    c.run_delay_share = Some(0.5); // the two threads wait for each other: not a neighbour
    let mut r = rec("cpu.flops", 2, 1e9);
    r.conditions = Some(c);
    apply(&mut r, &ctx(), None);
    assert_eq!(r.diagnosis.len(), 1, "{:?}", r.diagnosis);
    assert_eq!(r.diagnosis[0].cause, "affinity");
    assert!(r.diagnosis[0]
        .text
        .starts_with("2 threads on 1 allowed CPU "));
}

#[test]
fn shared_cores_give_a_second_efficiency_and_a_cause() {
    let ctx = Context {
        allowed_cpus: 16,
        cores: 16,
        effective_cores: Some(8.3),
    };
    let mut c = quiet();
    c.cgroup.as_mut().unwrap().allowed_cpus = 16;
    let mut r = short(rec("cpu.flops", 16, 592e9), c.clone());
    r.set_peak(Some(Peak {
        value: 1243e9,
        basis: "test".into(),
    }));
    apply(&mut r, &ctx, None);
    assert_eq!(r.diagnosis[0].cause, "shared_cores");
    assert!(r.diagnosis[0]
        .text
        .starts_with("16 CPUs give the FMA rate of 8.3"));
    let e = r.efficiency_effective.unwrap();
    assert!((e - 592.0 / (1243.0 / 16.0 * 8.3)).abs() < 1e-9, "{e}");
    // Below the effective cores there is nothing to add.
    let mut r = short(rec("cpu.flops", 8, 500e9), c.clone());
    apply(&mut r, &ctx, None);
    assert_eq!(r.efficiency_effective, None);
    // At its peak, a record did not meet the sharing the probe saw: no cause, no second
    // efficiency above 100 %.
    let mut r = rec("cpu.flops", 16, 1200e9);
    r.set_peak(Some(Peak {
        value: 1243e9,
        basis: "test".into(),
    }));
    r.conditions = Some(c);
    apply(&mut r, &ctx, None);
    assert!(r.diagnosis.is_empty(), "{:?}", r.diagnosis);
    assert_eq!(r.efficiency_effective, None);
}

#[test]
fn a_short_record_with_nothing_found_says_what_was_read() {
    let mut c = quiet();
    c.unavailable.insert("energy".into(), "no RAPL".into());
    let mut r = short(rec("cpu.flops", 2, 1e9), c);
    apply(&mut r, &ctx(), None);
    assert_eq!(r.diagnosis.len(), 1);
    assert_eq!(r.diagnosis[0].cause, "none_found");
    assert!(r.diagnosis[0]
        .text
        .starts_with("no cause found among: steal, other processes"));
    assert!(r.diagnosis[0].text.ends_with("(not readable here: energy)"));
    // A record at its peak with quiet conditions carries no diagnosis at all.
    let mut r = rec("cpu.flops", 2, 1e9);
    r.conditions = Some(quiet());
    apply(&mut r, &ctx(), None);
    assert!(r.diagnosis.is_empty());
}

#[test]
fn a_record_shorter_than_a_few_ticks_is_not_judged_by_them() {
    // 3 ms of samples: one /proc/stat tick is the whole record.
    let mut c = quiet();
    c.seconds = 0.003;
    c.share_resolution = Some(1.0);
    c.other_cpu_share = Some(0.82);
    c.per_cpu = vec![CpuShare {
        cpu: 1,
        steal_share: 0.0,
        other_share: 0.82,
        kernel_share: 0.0,
    }];
    let mut r = short(rec("gpu.bandwidth", 1, 1e9), c.clone());
    apply(&mut r, &ctx(), None);
    assert_eq!(r.diagnosis[0].cause, "none_found", "{:?}", r.diagnosis);
    assert!(r.diagnosis[0]
        .text
        .contains("too short for /proc/stat's ticks"));
    // Long enough, the same share is a finding.
    c.seconds = 1.0;
    c.share_resolution = Some(0.01);
    let mut r = short(rec("gpu.bandwidth", 1, 1e9), c);
    apply(&mut r, &ctx(), None);
    assert_eq!(r.diagnosis[0].cause, "cpu_contention");
}

#[test]
fn hostbench_s_own_helper_threads_are_named_apart_from_other_processes() {
    let mut c = quiet();
    c.share_resolution = Some(0.01);
    c.helper_cpu_share = Some(0.4);
    let mut r = short(rec("cpu.flops", 2, 1e9), c);
    apply(&mut r, &ctx(), None);
    assert_eq!(r.diagnosis[0].cause, "cpu_contention");
    assert!(r.diagnosis[0]
        .text
        .starts_with("hostbench's own threads outside the measurement"));
}

#[test]
fn the_noisy_warning_names_its_measured_cause() {
    let case = Case::new("mem.bandwidth", Metric::Throughput, "B/s")
        .work(Work::Memory)
        .param("threads", 1);
    let mut r = record_from_samples(&case, vec![1.0, 2.0, 3.0]);
    let mut c = quiet();
    c.steal_share = Some(0.12);
    c.disturbed_samples = vec![0, 2];
    c.clock_hz = Some(ClockSpan {
        start: 3e9,
        end: 3e9,
        source: "x".into(),
    });
    r.conditions = Some(c);
    apply(&mut r, &ctx(), None);
    assert_eq!(r.diagnosis[0].cause, "steal");
    assert!(r.warnings[0].starts_with("noisy:"));
    assert!(
            r.warnings[0].ends_with(": steal 12 % of CPU time on CPUs 0, 1 (the hypervisor ran something else) (samples 1, 3 disturbed)"),
            "{}",
            r.warnings[0]
        );
}

#[test]
fn scaling_steps_below_linear_are_found_per_case() {
    let records = vec![
        rec("cpu.flops", 1, 84.0),
        rec("cpu.flops", 2, 160.0),
        rec("cpu.flops", 8, 563.0),
        rec("cpu.flops", 16, 592.0),
        rec("mem.bandwidth", 2, 10.0),
    ];
    let found = scaling_shortfalls(&records);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, 3);
    assert_eq!(found[0].1, "8→16 threads gave 1.05× (53 % of linear)");
}
