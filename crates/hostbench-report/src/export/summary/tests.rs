//! Unit tests of `summary.rs`, kept in their own file so the module itself stays short
//! (issue 53: no source file over 1,000 lines).

use super::*;
use crate::testdata::synthetic_run;

#[test]
fn what_a_run_left_out_is_in_every_human_format() {
    let mut run = synthetic_run();
    run.left_out.push(hostbench_core::model::LeftOut {
        subsystem: "gpu".into(),
        what: "opencl 1 (NVIDIA H200)".into(),
        reason: "the same GPU as cuda 0, measured through CUDA".into(),
    });
    let line = "gpu opencl 1 (NVIDIA H200): the same GPU as cuda 0, measured through CUDA";
    let exporters: [&dyn Exporter; 4] = [
        &SummaryExporter::default(),
        &super::super::TerminalExporter,
        &super::super::MarkdownExporter,
        &super::super::HtmlExporter,
    ];
    for e in exporters {
        let text = e.render(&run).unwrap();
        assert!(
            text.contains(LEFT_OUT) && text.contains(line),
            "{}: {text}",
            e.file_name()
        );
    }
    // Nothing left out: no such heading.
    let text = SummaryExporter::default().render(&synthetic_run()).unwrap();
    assert!(!text.contains(LEFT_OUT), "{text}");
}

/// A headline whose rate is only inferred from the 1-thread run shows no percentage of
/// peak, only "no documented peak" and its scaling by name.
#[test]
fn an_inferred_peak_is_shown_as_scaling_not_as_of_peak() {
    let mut run = synthetic_run();
    let i = {
        let all = all_headlines(&run);
        let h = all
            .iter()
            .find(|h| h.record.benchmark == "cpu.flops" && h.record.efficiency.is_some())
            .expect("a cpu headline with a peak");
        run.records
            .iter()
            .position(|r| std::ptr::eq(r, h.record))
            .expect("its record")
    };
    let r = &mut run.records[i];
    let inferred = hostbench_core::model::Peak {
        value: r.value / 0.993,
        basis: "inferred from the 1-thread run".into(),
    };
    r.set_inferred_peak(inferred);
    let dtype = run.records[i].param("dtype").expect("dtype");
    // Wide enough, said in full; narrow, the dash of "no peak" and the scaling by name.
    for (width, said) in [
        (200, "no documented peak (scaling 99.3 %)"),
        (80, "scaling 99.3 %"),
    ] {
        let text = SummaryExporter::new(width).render(&run).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("cpu.flops") && l.contains(&format!(" {dtype} ")))
            .expect("the headline line");
        assert!(line.contains(said), "{line}");
    }
}

/// "No cause found" is no line under a figure: the figure is marked with its spread, the
/// full finding (why it was looked into, what was read) is there on request, and the
/// sentence is said once for all such figures.
#[test]
fn no_cause_found_is_a_mark_not_a_line() {
    use crate::testdata::record;
    use hostbench_core::conditions::diagnose::Diagnosis;
    let none = Diagnosis {
        cause: "none_found".into(),
        share: 0.0,
        text: "no cause found among: steal, other processes (not readable here: clock, \
                   thermal_throttle)"
            .into(),
    };
    let params = serde_json::json!({"kernel": "read", "threads": 2});
    let mut noisy = record(
        "mem.bandwidth",
        Metric::Throughput,
        "B/s",
        params.clone(),
        &[30e9, 40e9, 31e9],
    );
    noisy.diagnosis = vec![none.clone()];
    assert_eq!(first_cause(&noisy), None);
    let mark = spread_mark(&noisy).expect("a mark");
    assert!(mark.starts_with('±') && mark.ends_with(" %"), "{mark}");
    let full = no_cause(&noisy).unwrap();
    assert!(full.starts_with("CV "), "{full}");
    assert!(
        full.ends_with(
            " %, and no cause found among: steal, other processes (not readable \
                            here: clock, thermal_throttle)"
        ),
        "{full}"
    );
    // Diagnosed for a reason the record alone does not show (a scaling step): no spread to
    // mark, the text alone on request, and counted as having fallen short.
    let mut steady = record(
        "mem.bandwidth",
        Metric::Throughput,
        "B/s",
        params,
        &[30e9; 3],
    );
    steady.diagnosis = vec![none.clone()];
    assert_eq!(spread_mark(&steady), None);
    assert_eq!(no_cause(&steady).unwrap(), none.text);
    assert_eq!(
        no_cause_sentence(&[&noisy, &noisy, &steady]).unwrap(),
        "2 figures varied more than 5 % between samples and 1 fell short; no cause found \
             among steal, other processes (clock, thermal throttle not readable on this host)"
    );
    assert_eq!(no_cause_sentence(&[]), None);
    // The kernel completing a disk's I/O is context, not why it was noisy: still no cause.
    let mut disk = noisy.clone();
    disk.diagnosis = vec![
        Diagnosis {
            cause: "kernel_io".into(),
            share: 0.05,
            text: "the kernel's interrupts and threads used 5 % of CPUs 0, 1".into(),
        },
        none,
    ];
    assert!(unexplained(&disk));
    assert_eq!(first_cause(&disk), None);
    disk.diagnosis.pop();
    assert!(first_cause(&disk).unwrap().starts_with("kernel_io (5 %): "));
    assert_eq!(spread_mark(&disk), None);
    // In the summary: the mark in the row, no `↳` line, the sentence once, and no
    // "diagnosis" counted for it.
    let mut run = crate::testdata::run_of(vec![noisy]);
    run.records[0].diagnosis[0].text = "no cause found among: steal".into();
    let text = render(&run, 100).unwrap();
    assert!(text.contains(&format!("GB/s {mark}")), "{text}");
    assert!(!text.contains('↳'), "{text}");
    assert!(
        text.contains("1 figure varied more than 5 % between samples; no cause found among steal."),
        "{text}"
    );
    assert!(!text.contains("carry a diagnosis"), "{text}");
}

/// Whatever the run and the width, no line is wider: the synthetic run (every subsystem,
/// latencies under load, transactions) from 40 to 160 columns.
#[test]
fn no_line_is_wider_than_the_width() {
    let mut run = synthetic_run();
    run.host.cpu.model = "AMD EPYC 9R14 96-Core Processor with a long marketing name".into();
    run.records.extend(crate::testdata::net_transactions(&[
        ("tcp", "rr", 2, 16, 400e3),
        ("tcp", "crr", 1, 1, 14e3),
    ]));
    for width in (40..=160).step_by(7) {
        let text = SummaryExporter::new(width).render(&run).unwrap();
        for l in text.lines() {
            assert!(l.chars().count() <= width, "{width}: {l}\n{text}");
        }
    }
    // Narrower than the least it lays out for: that least.
    let text = SummaryExporter::new(10).render(&run).unwrap();
    assert!(
        text.lines().all(|l| l.chars().count() <= MIN_WIDTH),
        "{text}"
    );
}

/// Abbreviated, every row alike, with the short names explained once.
#[test]
fn at_parameters_are_abbreviated_alike_with_a_legend() {
    let run = synthetic_run();
    let wide = SummaryExporter::new(400).render(&run).unwrap();
    assert!(
        wide.contains("threads=2") && !wide.contains("t=2"),
        "{wide}"
    );
    assert!(!wide.contains("at: t threads"), "{wide}");
    let narrow = SummaryExporter::new(80).render(&run).unwrap();
    assert!(!narrow.contains("threads="), "{narrow}");
    assert!(narrow.contains(" t=2"), "{narrow}");
    assert!(narrow.contains("at: t threads"), "{narrow}");
    assert_eq!(short_bytes(4096.0), "4K");
    assert_eq!(short_bytes(1.5 * 1024.0 * 1024.0 * 1024.0), "1.5G");
    assert_eq!(short_bytes(1.0), "1B");
}

/// The rate per watt: from the GPU's energy where read, else the CPU package's; a column of
/// the summary only where the width has room; in report.md and report.html beside the
/// figure; and where energy was not readable, said once.
#[test]
fn the_rate_per_watt_is_beside_the_figure_where_energy_was_read() {
    use hostbench_core::conditions::{Conditions, GpuConditions};
    let mut run = synthetic_run();
    let i = run
        .records
        .iter()
        .position(|r| r.benchmark == "cpu.flops" && r.metric == Metric::Throughput)
        .unwrap();
    for r in run
        .records
        .iter_mut()
        .filter(|r| r.benchmark == "cpu.flops")
    {
        r.conditions = Some(Conditions {
            work_per_joule: Some(2.1e9),
            ..Conditions::default()
        });
    }
    assert_eq!(
        per_watt(&run.records[i]).as_deref(),
        Some("2.10 GFLOP/s per W")
    );
    let mut gpu = run.records[i].clone();
    gpu.conditions.as_mut().unwrap().gpu = Some(GpuConditions {
        work_per_joule: Some(5e10),
        ..GpuConditions::default()
    });
    assert_eq!(per_watt(&gpu).as_deref(), Some("50.0 GFLOP/s per W"));
    let wide = SummaryExporter::new(400).render(&run).unwrap();
    assert!(
        wide.contains("per W") && wide.contains("2.10 GFLOP/s"),
        "{wide}"
    );
    let narrow = SummaryExporter::new(80).render(&run).unwrap();
    assert!(!narrow.contains("per W"), "{narrow}");
    let md = super::super::MarkdownExporter.render(&run).unwrap();
    assert!(md.contains("(2.10 GFLOP/s per W)"), "{md}");
    let html = super::super::HtmlExporter.render(&run).unwrap();
    assert!(html.contains("2.10 GFLOP/s per W"));
    assert_eq!(energy_note(&run), None);
    // No energy anywhere: said once, not per figure.
    for r in &mut run.records {
        r.conditions = Some(Conditions {
            unavailable: [("energy".to_string(), "no RAPL in this VM".to_string())]
                .into_iter()
                .collect(),
            ..Conditions::default()
        });
    }
    let md = super::super::MarkdownExporter.render(&run).unwrap();
    assert_eq!(md.matches("not readable on this host").count(), 1, "{md}");
    assert!(md.contains("no RAPL in this VM"), "{md}");
    assert!(!md.contains("per W)"), "{md}");
    let html = super::super::HtmlExporter.render(&run).unwrap();
    assert!(html.contains("Energy is not readable on this host (no RAPL in this VM)"));
}

/// A like-for-like reference ratio reads `1.02 × fio` in the summary; the setting, the
/// headline's own ratio and why are in the report's notes.
#[test]
fn like_for_like_detail_is_in_the_report_not_the_summary() {
    let mut run = synthetic_run();
    let r = run
        .records
        .iter_mut()
        .find(|r| r.reference.is_some())
        .expect("a record with a reference");
    r.reference.as_mut().unwrap().ratio = 1.02;
    r.extra.insert(
        "like_for_like".into(),
        serde_json::json!({"setting": "pages=4k", "headline_ratio": 2.46,
                               "why_higher": "huge-page buffers the tool could not have"}),
    );
    let tool = r.reference.as_ref().unwrap().tool.clone();
    let summary = SummaryExporter::new(200).render(&run).unwrap();
    assert!(summary.contains(&format!("1.02 × {tool}")), "{summary}");
    assert!(!summary.contains("like for like"), "{summary}");
    let md = super::super::MarkdownExporter.render(&run).unwrap();
    assert!(
        md.contains(&format!(
            "×1.02 {tool} is like for like (pages=4k); the headline figure is ×2.46 {tool}: \
                 huge-page buffers the tool could not have"
        )),
        "{md}"
    );
}

#[test]
fn a_small_working_file_is_said_under_its_headline() {
    let mut run = synthetic_run();
    let mut r = crate::testdata::record(
        "disk.throughput",
        Metric::Throughput,
        "B/s",
        serde_json::json!({"op": "read", "block_bytes": 1u64 << 20, "threads": 1}),
        &[20.3e9],
    );
    r.extra.insert(
        "sizing".into(),
        serde_json::json!({"used": 4u64 << 20, "floor": 256u64 << 20, "below_floor": true,
                               "limited_by": null}),
    );
    run.records = vec![r];
    let text = render(&run, 100).unwrap();
    assert!(
        text.contains("↳ working file 4 MiB, below the 256 MiB floor"),
        "{text}"
    );
}

#[test]
fn one_line_per_benchmark_and_what_at_full_concurrency() {
    let run = synthetic_run();
    let text = SummaryExporter::default().render(&run).unwrap();
    let full = super::super::TerminalExporter.render(&run).unwrap();
    assert!(text.lines().count() < full.lines().count(), "{text}");
    assert!(text.contains("Summary: testhost"), "{text}");
    for r in &run.records {
        let recs: Vec<&Record> = run
            .records
            .iter()
            .filter(|x| x.benchmark == r.benchmark)
            .collect();
        let what_key = what_key(&recs);
        let what = |x: &Record| what_key.and_then(|k| x.params.get(k)).cloned();
        for h in headlines(&recs) {
            // Nothing of the same "what" ran at a larger concurrency.
            if let Some(k) = concurrency_key(h) {
                assert!(recs
                    .iter()
                    .filter(|x| what(x) == what(h))
                    .all(|x| num(x, k) <= num(h, k)));
            }
        }
    }
}

#[test]
fn latency_headline_is_the_largest_working_set() {
    use crate::testdata::record;
    let l1 = record(
        "mem.latency",
        Metric::Latency,
        "s",
        serde_json::json!({"pattern": "chase", "working_set_bytes": 4096, "threads": 1}),
        &[1e-9],
    );
    let dram = record(
        "mem.latency",
        Metric::Latency,
        "s",
        serde_json::json!({"pattern": "chase", "working_set_bytes": 1u64 << 30, "threads": 1}),
        &[90e-9],
    );
    let picked = headlines(&[&l1, &dram]);
    assert_eq!(picked.len(), 1);
    assert_eq!(picked[0].value, 90e-9);
}

/// A `pages=huge` latency that ran mostly on base pages (the kernel refused huge pages,
/// even after MADV_COLLAPSE) is not the headline, however low it reads.
#[test]
fn a_huge_page_record_on_base_pages_is_no_headline() {
    use crate::testdata::record;
    let mk = |pages: &str, v: f64| {
        record(
            "mem.latency",
            Metric::Latency,
            "s",
            serde_json::json!({"pattern": "chase", "working_set_bytes": 1u64 << 30,
                                   "threads": 1, "pages": pages}),
            &[v],
        )
    };
    let small = mk("4k", 110e-9);
    let mut huge = mk("huge", 88e-9);
    huge.extra.insert(
        hostbench_core::model::PAGES_GRANTED.into(),
        serde_json::json!("mixed"),
    );
    let picked = headlines(&[&small, &huge]);
    assert_eq!(picked.len(), 1);
    assert_eq!(picked[0].param("pages").as_deref(), Some("4k"));
    // Granted in full, the huge-page figure is the headline again.
    huge.extra.clear();
    assert_eq!(headlines(&[&small, &huge])[0].value, 88e-9);
}

#[test]
fn the_gpus_tensor_cores_and_fma_pipes_are_separate_headlines() {
    use crate::testdata::record;
    let mk = |unit: &str, v: f64| {
        record(
            "gpu.flops",
            Metric::Throughput,
            "FLOP/s",
            serde_json::json!({"backend": "cuda", "device": 0, "dtype": "f16", "unit": unit}),
            &[v],
        )
    };
    let (fma, tensor) = (mk("fma", 1.3e14), mk("tensor", 9.0e14));
    let heads = headlines(&[&fma, &tensor]);
    assert_eq!(heads.len(), 2);
    assert_eq!(what_of(heads[1], Some("dtype")), "f16 tensor");
    assert_eq!(what_of(heads[0], Some("dtype")), "f16");
}

#[test]
fn a_memory_bandwidth_headline_is_the_dram_figure_not_the_l1_peak() {
    use crate::testdata::record;
    let bw = |ws: u64, level: &str, v: f64| {
        record(
            "mem.bandwidth",
            Metric::Throughput,
            "B/s",
            serde_json::json!({"kernel": "read", "working_set_bytes": ws, "threads": 2,
                    "level": level}),
            &[v],
        )
    };
    let (l1, l3, dram) = (
        bw(32 << 10, "L1", 900e9),
        bw(64 << 20, "L3", 200e9),
        bw(2 << 30, "DRAM", 47e9),
    );
    let picked = headlines(&[&l1, &l3, &dram]);
    assert_eq!(picked.len(), 1);
    assert_eq!(picked[0].value, 47e9);
    // A sweep that stays in the caches still has a headline: its largest set.
    assert_eq!(headlines(&[&l1, &l3])[0].value, 200e9);
    // Without a level (disk, network), the best block size is the headline.
    let disk = |block: u64, v: f64| {
        record(
            "disk.throughput",
            Metric::Throughput,
            "B/s",
            serde_json::json!({"op": "read", "block_bytes": block, "threads": 1}),
            &[v],
        )
    };
    let (small, large) = (disk(1 << 20, 3e9), disk(64 << 20, 2e9));
    assert_eq!(headlines(&[&small, &large])[0].value, 3e9);
}

#[test]
fn memory_matrices_have_a_headline_per_mode_and_per_unit() {
    use crate::testdata::{c2c, numa, run_of};
    let mut recs = c2c(4, &["round_trip", "one_way"]);
    recs.extend(numa(2));
    let run = run_of(recs);
    let got: Vec<(&str, String, &str)> = all_headlines(&run)
        .into_iter()
        .map(|h| (h.benchmark, h.what, h.record.unit.as_str()))
        .collect();
    let want = [
        ("mem.c2c", "round_trip", "s"),
        ("mem.c2c", "one_way", "s"),
        ("mem.numa", "bandwidth", "B/s"),
        ("mem.numa", "latency", "s"),
    ];
    assert_eq!(got.len(), want.len(), "{got:?}");
    for ((b, w, u), (wb, ww, wu)) in got.iter().zip(want) {
        assert_eq!((*b, w.as_str(), *u), (wb, ww, wu));
    }
}

#[test]
fn latency_under_load_headline_is_the_loaded_end_beside_the_idle_one() {
    use crate::testdata::{net_idle_latency, net_under_load, run_of};
    use serde_json::json;
    let mut recs = vec![net_idle_latency("udp", 1, 14e-6)];
    recs.extend(net_under_load(
        "udp",
        32768,
        &[json!("10%"), json!("90%"), json!("50%")],
    ));
    let run = run_of(recs);
    let heads = all_headlines(&run);
    let whats: Vec<&str> = heads.iter().map(|h| h.what.as_str()).collect();
    assert_eq!(whats, ["udp", "udp under load"]);
    assert_eq!(
        heads[0].record.value, 14e-6,
        "the idle one is still the idle one"
    );
    let loaded = &heads[1];
    assert_eq!(loaded.record.params["load_bps"], json!("90%"));
    assert_eq!(
        loaded.at,
        "block=32 KiB streams=1 under 90% load (31.0 Gbit/s) (69.1 x idle 14.0 µs at 1 B)"
    );
    let text = SummaryExporter::default().render(&run).unwrap();
    assert!(text.contains("udp under load  968 µs"), "{text}");
}

/// A sender that fell behind: what it sent beside what was offered, and a multiple of
/// the idle figure in whole numbers where a tenth would be noise.
#[test]
fn a_sender_behind_shows_what_it_sent() {
    use crate::testdata::{net_idle_latency, net_under_load, run_of};
    use serde_json::json;
    let mut recs = vec![net_idle_latency("udp", 1, 10.4e-6)];
    recs.extend(net_under_load("udp", 32768, &[json!("10%"), json!("90%")]));
    let behind = recs.last_mut().unwrap();
    behind.value = 0.138;
    behind.extra.insert("sent_bps".into(), json!(10.7e9));
    let run = run_of(recs);
    let loaded = &all_headlines(&run)[1];
    assert_eq!(
        loaded.at,
        "block=32 KiB streams=1 under 90% load (31.0 Gbit/s offered, 10.7 Gbit/s sent) \
             (13269 x idle 10.4 µs at 1 B)"
    );
}

#[test]
fn a_load_in_bit_per_second_is_said_as_a_rate_and_compared_with_the_least_load() {
    use crate::testdata::{net_under_load, run_of};
    use serde_json::json;
    let run = run_of(net_under_load("tcp", 131072, &[json!(5e9), json!(31e9)]));
    let heads = all_headlines(&run);
    assert_eq!(heads.len(), 1);
    assert_eq!(heads[0].what, "tcp under load");
    assert_eq!(
            heads[0].at,
            "block=128 KiB streams=1 under 31.0 Gbit/s load (56.3 x the 17.2 µs under 5.00 Gbit/s load)"
        );
}

#[test]
fn transactions_have_a_headline_per_test() {
    use crate::testdata::{net_transactions, run_of};
    let run = run_of(net_transactions(&[
        ("tcp", "rr", 1, 1, 90e3),
        ("tcp", "rr", 2, 16, 400e3),
        ("tcp", "rr", 2, 1, 160e3),
        ("udp", "rr", 1, 1, 120e3),
        ("tcp", "crr", 1, 1, 14e3),
    ]));
    let got: Vec<(String, f64, String)> = all_headlines(&run)
        .into_iter()
        .map(|h| (h.what, h.record.value, h.at))
        .collect();
    assert_eq!(
        got,
        [
            (
                "TCP_RR".to_string(),
                400e3,
                "pairs=2 outstanding=16 block=1 B".to_string()
            ),
            (
                "UDP_RR".to_string(),
                120e3,
                "pairs=1 outstanding=1 block=1 B".to_string()
            ),
            (
                "TCP_CRR".to_string(),
                14e3,
                "pairs=1 outstanding=1 block=1 B".to_string()
            ),
        ]
    );
    let text = SummaryExporter::default().render(&run).unwrap();
    assert!(text.contains("TCP_CRR  14.0 k transactions/s"), "{text}");
}

#[test]
fn loaded_latency_headline_is_the_loaded_end_with_its_bandwidth() {
    use crate::testdata::{loaded_latency, run_of};
    let run = run_of(loaded_latency(&["read", "rw"], &[0, 100, 400, 1600], 4));
    let heads = all_headlines(&run);
    assert_eq!(heads.len(), 2);
    for h in &heads {
        // Delay 0 delivers the most bandwidth and has the highest latency.
        assert_eq!(h.record.params["delay"], serde_json::json!(0), "{}", h.what);
        let ctx = context(h.record);
        assert!(
            ctx.contains("threads=4") && ctx.contains("under ") && ctx.contains("GB/s"),
            "{ctx}"
        );
    }
    assert_eq!(heads[0].what, "read");
}
