//! Unit tests of `conditions`, kept in their own file so the module itself stays short
//! (issue 53: no source file over 1,000 lines).

use super::*;

#[test]
fn cpu_lists_read_as_ranges() {
    assert_eq!(cpu_list(&[8, 9, 10, 11, 12, 13, 14, 15]), "8–15");
    assert_eq!(cpu_list(&[0, 2, 5]), "0, 2, 5");
    assert_eq!(cpu_list(&[1, 0]), "0, 1");
    assert_eq!(cpu_list(&[3, 0, 1, 2, 7]), "0–3, 7");
    assert_eq!(cpu_list(&[]), "");
}

/// The tally of two measuring threads that each lived 1 s, pinned to CPUs 0 and 1, with
/// their on-CPU times and their run-queue wait together (ns).
fn two_threads(on0: u64, on1: u64, run_delay_ns: u64) -> track::Tally {
    track::Tally {
        threads: 2,
        wall_ns: 2_000_000_000,
        on_cpu_ns: on0 + on1,
        run_delay_ns,
        by_cpu: [(0, on0), (1, on1)].into_iter().collect(),
        schedstat: true,
    }
}

fn ticks(busy: u64, idle: u64, steal: u64) -> CpuTicks {
    CpuTicks {
        busy,
        idle,
        steal,
        interrupt: 0,
    }
}

#[test]
fn spans_split_cpu_time_into_ours_others_and_stolen() {
    // Two CPUs over 1 s at 100 ticks/s. CPU 0: our thread ran 0.9 s, 0.1 s stolen.
    // CPU 1: busy all the time, our thread only 0.5 s of it: another process took 0.5 s.
    let tally = two_threads(900_000_000, 500_000_000, 600_000_000);
    let span = Span {
        seconds: 1.0,
        stat: [(0, ticks(90, 0, 10)), (1, ticks(100, 0, 0))]
            .into_iter()
            .collect(),
        stat_ok: true,
        own_ns: 1_400_000_000,
        tally: Some(tally),
        tasks: (0, 0),
        tasks_ran: 0,
        throttle: cgroup::Throttle::default(),
        vm: VmCounters::default(),
    };
    let s = span.shares(&[0, 1], 100.0);
    assert!((s.steal - 0.05).abs() < 1e-9, "{s:?}");
    assert!((s.other - 0.25).abs() < 1e-9, "{s:?}");
    assert!((s.waited - 0.3).abs() < 1e-9, "{s:?}");
    assert_eq!(s.by_cpu[&0], (0.1, 0.0));
    assert_eq!(s.by_cpu[&1], (0.0, 0.5));
}

#[test]
fn a_sample_loses_to_the_run_queue_only_what_its_threads_lifetimes_waited() {
    // Two I/O threads over 1 s that mostly sleep: 60 ms on a CPU and 30 ms waiting for one,
    // each wake-up's wait to run. Of the time they wanted a CPU a third went
    // waiting (run_delay_share's measure), of their lifetimes 1.5 %: not a disturbance.
    let idle = |tally: Option<track::Tally>, tasks: (u64, u64), tasks_ran: usize| Span {
        seconds: 1.0,
        stat: [(0, ticks(5, 95, 0)), (1, ticks(5, 95, 0))]
            .into_iter()
            .collect(),
        stat_ok: true,
        own_ns: 60_000_000,
        tally,
        tasks,
        tasks_ran,
        throttle: cgroup::Throttle::default(),
        vm: VmCounters::default(),
    };
    let tally = two_threads(30_000_000, 30_000_000, 30_000_000);
    let s = idle(Some(tally), (0, 0), 0).shares(&[0, 1], 100.0);
    assert!((s.waited - 0.015).abs() < 1e-9, "{s:?}");
    assert!(s.waited < DISTURBED_SHARE);
    // Without a tally, the live tasks that ran in the span stand for the lifetimes.
    let s = idle(None, (60_000_000, 30_000_000), 2).shares(&[0, 1], 100.0);
    assert!((s.waited - 0.015).abs() < 1e-9, "{s:?}");
    // Threads that computed throughout and waited 0.3 s of 1 s each: a disturbed sample.
    let s = idle(None, (1_400_000_000, 600_000_000), 2).shares(&[0, 1], 100.0);
    assert!((s.waited - 0.3).abs() < 1e-9, "{s:?}");
    // No task ran: nothing to share out.
    assert_eq!(idle(None, (0, 0), 0).shares(&[0, 1], 100.0).waited, 0.0);
}

#[test]
fn an_io_samples_own_interrupts_and_wake_up_waits_do_not_disturb_it() {
    // Disk threads on two idle CPUs over 1 s: 20 % of their lifetimes waiting to run after
    // completions, and CPU 1 busy 25 ticks of which 20 interrupts (completions) and 5 a
    // neighbour's.
    let span = |irq: u64, other: u64| Span {
        seconds: 1.0,
        stat: [
            (0, ticks(10, 90, 0)),
            (
                1,
                CpuTicks {
                    interrupt: irq,
                    ..ticks(10 + irq + other, 90 - irq - other, 0)
                },
            ),
        ]
        .into_iter()
        .collect(),
        stat_ok: true,
        own_ns: 200_000_000,
        tally: Some(two_threads(100_000_000, 100_000_000, 400_000_000)),
        tasks: (0, 0),
        tasks_ran: 0,
        throttle: cgroup::Throttle::default(),
        vm: VmCounters::default(),
    };
    let quiet = span(20, 5);
    let sh = quiet.shares(&[0, 1], 100.0);
    assert!((sh.waited - 0.2).abs() < 1e-9, "{sh:?}");
    assert!((sh.interrupt - 0.1).abs() < 1e-9, "{sh:?}");
    // A compute record would count both as lost; an I/O record counts neither.
    assert!(quiet.disturbed(&sh, 2, false));
    assert!(!quiet.disturbed(&sh, 2, true));
    // A neighbour's 25 ticks on CPU 1 beside the interrupts disturb either.
    let busy = span(20, 25);
    let sh = busy.shares(&[0, 1], 100.0);
    assert!(busy.disturbed(&sh, 2, true), "{sh:?}");
    use crate::model::Work;
    assert!(Work::Storage.does_io() && Work::Network.does_io() && !Work::Memory.does_io());
}

#[test]
fn our_time_beyond_a_cpus_busy_ticks_is_not_read_as_a_neighbour_elsewhere() {
    // An I/O thread pinned to CPU 0 ran 0.9 s by the scheduler's clock, but CPU 0's ticks
    // saw 0.5 s busy; CPU 1 was busy 0.6 s, 0.1 s of it ours. Per CPU, CPU 1 would read
    // 0.5 s of others; all the busy ticks leave only 0.1 s beside our 1.0 s.
    let tally = two_threads(900_000_000, 100_000_000, 0);
    let span = Span {
        seconds: 1.0,
        stat: [(0, ticks(50, 50, 0)), (1, ticks(60, 40, 0))]
            .into_iter()
            .collect(),
        stat_ok: true,
        own_ns: 1_000_000_000,
        tally: Some(tally),
        tasks: (0, 0),
        tasks_ran: 0,
        throttle: cgroup::Throttle::default(),
        vm: VmCounters::default(),
    };
    let s = span.shares(&[0, 1], 100.0);
    assert!((s.other - 0.05).abs() < 1e-9, "{s:?}");
    assert!((s.by_cpu[&1].1 - 0.1).abs() < 1e-9, "{s:?}");
    assert_eq!(s.by_cpu[&0].1, 0.0);
}

#[test]
fn the_kernels_part_is_its_interrupts_and_its_threads_on_the_records_cpus() {
    let span = |irq0: u64, irq1: u64| Span {
        seconds: 1.0,
        stat: [
            (
                0,
                CpuTicks {
                    interrupt: irq0,
                    ..ticks(100, 0, 0)
                },
            ),
            (
                1,
                CpuTicks {
                    interrupt: irq1,
                    ..ticks(50, 50, 0)
                },
            ),
        ]
        .into_iter()
        .collect(),
        stat_ok: true,
        own_ns: 0,
        tally: None,
        tasks: (0, 0),
        tasks_ran: 0,
        throttle: cgroup::Throttle::default(),
        vm: VmCounters::default(),
    };
    let kt = |name: &str, cpu: usize, ticks: u64| procfs::KernelThread {
        name: name.into(),
        cpu,
        ticks,
    };
    let start: KernelThreads = [
        (10, kt("kworker/1:0+dio/vda", 1, 500)),
        (11, kt("ksoftirqd/0", 0, 7)),
        (12, kt("kworker/5:1", 5, 0)),
    ]
    .into_iter()
    .collect();
    // 20 ticks for the dio worker, 5 for ksoftirqd, one on a CPU outside the record, and
    // one that started during it (no start to count from).
    let end: KernelThreads = [
        (10, kt("kworker/1:0+dio/vda", 1, 520)),
        (11, kt("ksoftirqd/0", 0, 12)),
        (12, kt("kworker/5:1", 5, 90)),
        (13, kt("kworker/0:2", 0, 40)),
    ]
    .into_iter()
    .collect();
    let k = KernelPart::of(
        &[span(2, 0), span(1, 3)],
        &[0, 1],
        100.0,
        Some((&start, &end)),
    );
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(k.by_cpu[&0], 0.03 + 0.05), "{k:?}");
    assert!(close(k.by_cpu[&1], 0.03 + 0.20), "{k:?}");
    assert!(close(k.cpu_s[&1], 2.0), "{k:?}");
    let names: Vec<&str> = k.threads.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(names, ["kworker/1:0+dio/vda", "ksoftirqd/0"]);
    // Without the threads (a /proc that cannot be listed), the interrupts alone.
    let k = KernelPart::of(&[span(2, 0)], &[0, 1], 100.0, None);
    assert!(close(k.by_cpu[&0], 0.02) && k.threads.is_empty(), "{k:?}");
}

#[test]
fn the_live_host_gives_conditions_with_reasons_for_what_it_lacks() {
    let probe = Probe::live();
    let mut r = probe.begin();
    let t = Instant::now();
    while t.elapsed().as_millis() < 50 {
        std::hint::black_box(0u64);
    }
    r.sample_done();
    let c = r.finish(None, Some(1.0));
    assert!(c.seconds >= 0.05);
    assert!(!c.cpus.is_empty());
    // Every telemetry source is either read or explained.
    for (key, read) in [
        ("thermal_throttle", c.thermal_throttle_events.is_some()),
        ("temperature", c.temperature_c.is_some()),
        ("energy", c.energy_j.is_some()),
        ("clock", c.clock_hz.is_some()),
        ("cgroup", c.cgroup.is_some()),
        ("steal", c.steal_share.is_some()),
    ] {
        assert!(
            read || c.unavailable.get(key).is_some_and(|w| !w.is_empty()),
            "{key}: neither read nor explained in {c:?}"
        );
    }
    let json = serde_json::to_value(&c).unwrap();
    let back: Conditions = serde_json::from_value(json).unwrap();
    assert_eq!(back, c);
}
