//! Unit tests of `runner.rs`, kept in their own file so the module itself stays short
//! (issue 53: no source file over 1,000 lines).

use super::*;

#[test]
fn a_fifo_is_written_in_place_not_replaced() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // The read end is opened first without blocking, so the writer's open succeeds at once
    // and a regression (the FIFO renamed over) fails the asserts instead of hanging.
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    write_bytes_atomic(&fifo, b"through the pipe\n").unwrap();
    let mut got = Vec::new();
    let _ = reader.read_to_end(&mut got);
    assert_eq!(got, b"through the pipe\n");
    let ft = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(ft.is_fifo(), "the FIFO was replaced by {ft:?}");
    // Nothing was left beside it either.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn a_symlink_stays_a_link_and_its_target_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("real.json");
    std::fs::write(&target, "old").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    write_bytes_atomic(&link, b"new").unwrap();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
}

fn quiet(partial: Option<PathBuf>) -> RunnerConfig {
    RunnerConfig {
        warmup: 1,
        partial_path: partial,
        ..RunnerConfig::quiet(3)
    }
}

#[test]
fn warmup_is_discarded_and_stats_follow_samples() {
    let mut r = Runner::new(quiet(None), Host::default());
    let mut seq = [100.0, 1.0, 2.0, 3.0].into_iter();
    let case = Case::new("test.x", Metric::Throughput, "OP/s").param("threads", 2);
    let rec = r
        .measure(&case, || {
            Ok(Sample::new(seq.next().unwrap_or(0.0)).with("clock_hz", 3.0))
        })
        .unwrap();
    assert_eq!(rec.samples, vec![1.0, 2.0, 3.0]);
    assert_eq!(rec.value, 2.0);
    assert_eq!(rec.stats.max, 3.0);
    assert_eq!(rec.extra["clock_hz"], serde_json::json!(3.0));
    assert_eq!(rec.params["threads"], serde_json::json!(2));
    // The "noisy" warning is written by the diagnosis, at commit.
    r.commit(rec).unwrap();
    let rec = &r.result().records[0];
    assert!(rec.warnings.iter().any(|w| w.starts_with("noisy")));
}

/// Written at commit by the diagnosis, the "noisy" warning still leads the warnings said of
/// the record before it (a cut case's, the peak's), as it did when written as measured.
#[test]
fn the_noisy_warning_leads_those_said_before_the_commit() {
    let mut r = Runner::new(quiet(None), Host::default());
    let case = Case::new("test.x", Metric::Throughput, "OP/s");
    let mut seq = [1.0, 1.0, 2.0, 3.0].into_iter();
    r.run_case(
        &case,
        || Ok(Sample::new(seq.next().unwrap_or(0.0))),
        |rec| {
            rec.set_peak(Some(crate::model::Peak {
                value: 1.0,
                basis: "test".into(),
            }))
        },
    )
    .unwrap();
    let rec = &r.result().records[0];
    assert_eq!(rec.warnings.len(), 2, "{:?}", rec.warnings);
    assert!(
        rec.warnings[0].starts_with("noisy: CV "),
        "{:?}",
        rec.warnings
    );
    assert!(rec.warnings[1].starts_with("measured 200 % of the theoretical limit"));
}

#[test]
fn steady_samples_are_not_noisy_and_peak_gives_efficiency() {
    let mut r = Runner::new(quiet(None), Host::default());
    let case = Case::new("test.x", Metric::Throughput, "OP/s");
    let mut rec = r.measure(&case, || Ok(Sample::new(50.0))).unwrap();
    assert!(rec.warnings.is_empty());
    rec.set_peak(Some(crate::model::Peak {
        value: 100.0,
        basis: "test".into(),
    }));
    assert_eq!(rec.efficiency, Some(0.5));
}

#[test]
fn failures_are_skipped_and_partial_file_is_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("partial.json");
    let mut r = Runner::new(quiet(Some(path.clone())), Host::default());
    let ok = Case::new("test.ok", Metric::Throughput, "OP/s");
    r.run_case(&ok, || Ok(Sample::new(1.0)), |_| {}).unwrap();
    let saved: RunResult = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(saved.records.len(), 1);

    let bad = Case::new("test.bad", Metric::Throughput, "OP/s");
    r.run_case(&bad, || Err(BenchError::unsupported("no such ISA")), |_| {})
        .unwrap();
    let saved: RunResult = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(saved.skipped.len(), 1);
    assert_eq!(saved.skipped[0].kind, "unsupported");

    let invalid = Case::new("test.invalid", Metric::Throughput, "OP/s");
    assert!(r
        .run_case(&invalid, || Err(BenchError::invalid("nope")), |_| {})
        .is_err());
    let done = r.finish().unwrap();
    assert!(done.finished_at.is_some());
    // No temporary file is left beside the result.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1);
}

#[test]
fn phases_estimate_the_whole_run_and_plans_replace_estimates() {
    let mut cfg = quiet(None);
    cfg.warmup = 1; // 4 samples per case
    let mut r = Runner::new(cfg, Host::default());
    r.announce(&[Phase::new("a", 2, 0.010), Phase::new("b", 5, 0.002)]);
    // a: 2 cases x 4 samples x 10 ms; b: 5 x 4 x 2 ms.
    assert_eq!(r.bar.length(), Some(80 + 40));
    assert_eq!(r.progress.cases_total, 7);
    r.begin_phase("a");
    r.plan(3); // one more case than estimated
    assert_eq!(r.bar.length(), Some(120 + 40));
    let case = Case::new("test.x", Metric::Throughput, "OP/s");
    for _ in 0..3 {
        r.run_case(&case, || Ok(Sample::new(1.0)), |_| {}).unwrap();
    }
    assert_eq!(r.bar.position(), 120);
    r.begin_phase("b");
    r.plan(2); // three fewer than estimated: dropped when the phase ends
    r.run_case(&case, || Ok(Sample::new(1.0)), |_| {}).unwrap();
    // A companion record without samples and a skip each take a whole case's share.
    let rec = record_from_samples(&case, vec![1.0]);
    r.commit(rec).unwrap();
    assert_eq!(r.bar.position(), 120 + 16);
    assert_eq!(r.progress.cases_done, 5);
    r.end_phase();
    assert_eq!(r.bar.length(), Some(120 + 16));
    assert_eq!(r.progress.cases_total, 5);
}

#[test]
fn a_long_sample_moves_the_bar_through_its_own_share() {
    let mut cfg = quiet(None);
    cfg.warmup = 1;
    cfg.repeat = 1;
    let mut r = Runner::new(cfg, Host::default());
    let case = Case::new("test.x", Metric::Throughput, "OP/s");
    r.plan(2);
    // A standalone command's sample is UNANNOUNCED_WEIGHT units: 2 cases x 2 samples.
    assert_eq!(r.bar.length(), Some(4 * UNANNOUNCED_WEIGHT));
    let hook = r.sample_progress();
    let bar = r.bar.clone();
    let mut seen = Vec::new();
    r.run_case(
        &case,
        || {
            seen.push(bar.position());
            hook(0.25);
            seen.push(bar.position());
            hook(0.1); // never back
            seen.push(bar.position());
            hook(7.0); // never past the sample's share
            seen.push(bar.position());
            Ok(Sample::new(1.0))
        },
        |_| {},
    )
    .unwrap();
    let w = UNANNOUNCED_WEIGHT;
    assert_eq!(
        seen,
        [0, w / 4, w / 4, w, w, w + w / 4, w + w / 4, 2 * w],
        "warm-up, then the measured sample"
    );
    assert_eq!(r.bar.position(), 2 * w);
    // A sample that fails half-way: the skipped case still ends at its share's end.
    r.run_case(
        &case,
        || {
            hook(0.5);
            Err(BenchError::Failed("broke".into()))
        },
        |_| {},
    )
    .unwrap();
    assert_eq!(r.bar.position(), 4 * w);
    assert_eq!(r.result().skipped.len(), 1);
}

#[test]
fn a_cut_case_keeps_its_finished_samples_marked_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("partial.json");
    let mut r = Runner::new(quiet(Some(path.clone())), Host::default());
    let case = Case::new("test.cut", Metric::Throughput, "OP/s");
    // Warm-up and one measured sample finish; the second fails.
    let mut n = 0;
    let mut seen = None;
    r.run_case_keeping(
        &case,
        || {
            n += 1;
            match n {
                1..=2 => Ok(Sample::new(5.0)),
                _ => Err(BenchError::Failed("Connection reset by peer".into())),
            }
        },
        |rec| seen = rec.incomplete.clone(),
    )
    .unwrap();
    assert_eq!(n, 3, "no sample after the failed one");
    let saved: RunResult = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert!(saved.skipped.is_empty());
    let rec = &saved.records[0];
    assert_eq!(rec.samples, vec![5.0]);
    let mark = rec.incomplete.as_ref().expect("marked incomplete");
    assert_eq!(mark.error, "Connection reset by peer");
    assert_eq!(mark.samples_planned, 3);
    assert_eq!(seen.as_ref(), Some(mark), "finish sees the mark");
    assert!(rec
        .warnings
        .iter()
        .any(|w| w.starts_with("incomplete: 1 of 3")));

    // Nothing measured yet (the warm-up failed), or bad input: a skip and an error as ever.
    r.run_case_keeping(&case, || Err(BenchError::Failed("gone".into())), |_| {})
        .unwrap();
    assert_eq!(r.result().skipped.len(), 1);
    let mut n = 0;
    let bad = r.run_case_keeping(
        &case,
        || {
            n += 1;
            if n < 3 {
                Ok(Sample::new(1.0))
            } else {
                Err(BenchError::invalid("nope"))
            }
        },
        |_| {},
    );
    assert!(matches!(bad, Err(BenchError::InvalidInput(_))));
    // Plain run_case still drops a case whose sample failed late.
    let mut n = 0;
    r.run_case(
        &case,
        || {
            n += 1;
            if n < 3 {
                Ok(Sample::new(1.0))
            } else {
                Err(BenchError::Failed("broke".into()))
            }
        },
        |_| {},
    )
    .unwrap();
    assert_eq!(r.result().records.len(), 1);
    assert_eq!(r.result().skipped.len(), 2);
}

#[test]
fn exhausted_budget_skips_cases() {
    let mut cfg = quiet(None);
    cfg.budget = Some(Duration::ZERO);
    let mut r = Runner::new(cfg, Host::default());
    let case = Case::new("test.x", Metric::Throughput, "OP/s");
    r.run_case(&case, || Ok(Sample::new(1.0)), |_| {}).unwrap();
    assert!(r.result().records.is_empty());
    assert_eq!(r.result().skipped[0].kind, "budget");
}
