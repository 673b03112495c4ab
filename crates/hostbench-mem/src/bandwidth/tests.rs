//! Unit tests of `bandwidth.rs`, kept in their own file so the module itself stays short
//! (issue 53: no source file over 1,000 lines).

use super::*;
use hostbench_core::model::RunResult;
use hostbench_core::RunnerConfig;

fn runner() -> Runner {
    Runner::new(RunnerConfig::quiet(2), Host::default())
}

fn timing() -> Timing {
    Timing {
        passes: None,
        duration: Duration::from_millis(2),
        pages: Pages::Small,
        seed: 1,
        reference: None,
    }
}

fn point(kernel: Kernel, pattern: Pattern, block: Block, ws: u64, threads: usize) -> Point {
    Point {
        kernel,
        pattern,
        block,
        working_set: ws,
        threads,
        store: Store::Temporal,
        isa: Isa::best(),
    }
}

fn run(points: &[Point], t: &Timing) -> RunResult {
    let mut r = runner();
    for p in points {
        run_point(&mut r, p, t, &Host::default(), &Spec::default()).unwrap();
    }
    r.finish().unwrap()
}

/// The headline reference goes beside the fastest of the candidates once all have run, and
/// beside no other: likwid-bench's figure where it is installed, else the reason it is not.
#[test]
fn the_headline_reference_stands_beside_the_fastest_candidate_alone() {
    let mut r = runner();
    let mut points = Vec::new();
    for store in [Store::Temporal, Store::NonTemporal] {
        if store == Store::NonTemporal && !Isa::best().has_nontemporal() {
            continue;
        }
        points.push(Point {
            store,
            ..point(Kernel::Triad, Pattern::Seq, Block::Whole, 3 << 20, 1)
        });
    }
    for p in &points {
        run_point(&mut r, p, &timing(), &Host::default(), &Spec::default()).unwrap();
    }
    // A record the candidates do not include, faster than both, is left alone.
    let read = point(Kernel::Read, Pattern::Seq, Block::Whole, 1 << 20, 1);
    run_point(&mut r, &read, &timing(), &Host::default(), &Spec::default()).unwrap();
    let candidates: Vec<&Point> = points.iter().collect();
    likwid_beside_fastest(&mut r, &candidates, &Host::default()).unwrap();
    let res = r.finish().unwrap();
    let triads: Vec<_> = res
        .records
        .iter()
        .filter(|rec| rec.params["kernel"] == "triad")
        .collect();
    assert_eq!(triads.len(), points.len());
    let fastest = triads
        .iter()
        .max_by(|a, b| a.value.total_cmp(&b.value))
        .unwrap();
    let beside = |rec: &Record| {
        rec.reference.is_some()
            || rec.extra.contains_key("reference_command")
            || rec.warnings.iter().any(|w| w.contains("likwid-bench"))
    };
    for rec in &res.records {
        assert_eq!(
            beside(rec),
            std::ptr::eq(rec, *fastest),
            "{:?}: {:?} {:?}",
            rec.params,
            rec.reference,
            rec.warnings
        );
    }
}

#[test]
fn every_kernel_pattern_store_and_isa_measures_and_validates() {
    let mut points = Vec::new();
    for isa in Isa::detected() {
        for kernel in Kernel::ALL {
            for pattern in [Pattern::Seq, Pattern::Random] {
                for store in [Store::Temporal, Store::NonTemporal] {
                    if store == Store::NonTemporal && !isa.has_nontemporal() {
                        continue;
                    }
                    let block = if kernel.element_bytes() == 8 {
                        24
                    } else {
                        1000
                    };
                    let mut p = point(kernel, pattern, Block::Bytes(block), 96 * 1024, 2);
                    p.store = store;
                    p.isa = isa;
                    points.push(p);
                }
            }
        }
    }
    let res = run(&points, &timing());
    assert!(res.skipped.is_empty(), "{:?}", res.skipped);
    assert_eq!(res.records.len(), points.len());
    for r in &res.records {
        assert_eq!(r.benchmark, "mem.bandwidth");
        assert!(r.value > 0.0 && r.value.is_finite());
        assert_eq!(r.extra["validated"], json!(true));
    }
}

#[test]
fn whole_blocks_and_passes_cover_the_array() {
    let t = Timing {
        passes: Some(2.0),
        ..timing()
    };
    let res = run(
        &[point(Kernel::Triad, Pattern::Seq, Block::Whole, 3 << 20, 1)],
        &t,
    );
    let r = &res.records[0];
    assert_eq!(r.extra["passes_per_sample"], json!(2.0));
    assert_eq!(r.params["block_bytes"], json!(1 << 20));
    assert_eq!(r.params["working_set_bytes"], json!(3 << 20));
    assert_eq!(r.params["store"], json!("temporal"));
    // The whole array was covered, so the full scalar replay ran and passed.
    assert_eq!(
        r.extra["bytes_per_sample"],
        json!(2.0 * 3.0 * (1 << 20) as f64)
    );
}

#[test]
fn arrays_filled_on_every_cpu_hold_what_their_own_thread_fills() {
    let ops = Isa::Scalar.ops().unwrap();
    let cpus = affinity::placement_order();
    for kernel in [Kernel::Read, Kernel::Copy, Kernel::Triad, Kernel::Rw] {
        let p = point(kernel, Pattern::Seq, Block::Bytes(4096), 3 << 20, 2);
        let g = p.geometry().unwrap();
        let map = |fill| -> Vec<Vec<Region>> {
            (0..2)
                .map(|_| init_arrays(kernel, &g, Pages::Small, &ops, None, fill).unwrap())
                .collect()
        };
        let (own, mut shared) = (map(true), map(false));
        // Pieces that end inside pages, so every boundary case is crossed.
        init_in_parallel(kernel, &mut shared, &ops, &cpus, 40 * 1024 + 8).unwrap();
        for (t, (own, shared)) in own.iter().zip(&shared).enumerate() {
            for (a, (o, s)) in own.iter().zip(shared).enumerate() {
                if matches!(init_of(kernel, a), Init::Touch) {
                    continue; // contents the kernel overwrites before reading
                }
                assert!(
                    o.as_slice() == s.as_slice(),
                    "{kernel:?} thread {t} array {a}"
                );
            }
        }
    }
}

#[test]
fn a_kernel_that_skips_its_work_fails_validation() {
    unsafe fn lazy_copy(_d: *mut u8, _s: *const u8, _l: usize, _nt: bool) {}
    unsafe fn lazy_triad(
        _d: *mut f64,
        _b: *const f64,
        _c: *const f64,
        _n: usize,
        _s: f64,
        _nt: bool,
    ) {
    }
    unsafe fn lazy_read(_s: *const u8, _l: usize) -> u64 {
        0
    }
    let mut ops = Isa::Scalar.ops().unwrap();
    ops.copy = lazy_copy;
    ops.triad = lazy_triad;
    ops.read = lazy_read;
    for kernel in [Kernel::Rw, Kernel::Triad, Kernel::Read, Kernel::Copy] {
        for pattern in [Pattern::Seq, Pattern::Random] {
            let p = point(kernel, pattern, Block::Bytes(64), 64 * 1024, 1);
            let g = p.geometry().unwrap();
            let case = p.case(&g, &Host::default());
            let mut r = runner();
            let t = Timing {
                passes: Some(0.5),
                ..timing()
            };
            measure(
                &mut r,
                &p,
                &g,
                &case,
                ops,
                &t,
                &Host::default(),
                &Spec::default(),
                &Placement::default(),
                &|_| {},
            )
            .unwrap();
            let res = r.finish().unwrap();
            assert!(res.records.is_empty(), "{kernel:?} passed without work");
            assert!(
                res.skipped[0].reason.contains("validation failed"),
                "{:?}",
                res.skipped
            );
        }
    }
}

#[test]
fn geometry_refuses_blocks_that_do_not_fit_or_split_elements() {
    let p = point(Kernel::Rw, Pattern::Seq, Block::Bytes(1 << 20), 1 << 20, 1);
    let e = p.geometry().unwrap_err();
    assert!(matches!(e, BenchError::InvalidInput(_)));
    assert!(e.to_string().contains("larger than the working set"), "{e}");
    let p = point(Kernel::Triad, Pattern::Seq, Block::Bytes(12), 1 << 20, 1);
    assert!(p
        .geometry()
        .unwrap_err()
        .to_string()
        .contains("multiple of 8"));
    let p = point(Kernel::Rw, Pattern::Seq, Block::Bytes(0), 1 << 20, 1);
    assert!(p.geometry().is_err());
    // 1 B blocks are fine for byte kernels; the array is a whole number of blocks.
    let p = point(Kernel::Rw, Pattern::Random, Block::Bytes(1000), 1 << 20, 2);
    let g = p.geometry().unwrap();
    assert_eq!(g.array_bytes % 1000, 0);
    assert_eq!(g.blocks, g.array_bytes / 1000);
}

#[test]
fn traffic_counts_write_allocate_only_for_temporal_stores() {
    assert_eq!(Kernel::Copy.traffic_factor(Store::Temporal), 1.5);
    assert_eq!(Kernel::Triad.traffic_factor(Store::Temporal), 4.0 / 3.0);
    assert_eq!(Kernel::Write.traffic_factor(Store::Temporal), 2.0);
    assert_eq!(Kernel::Triad.traffic_factor(Store::NonTemporal), 1.0);
    assert_eq!(Kernel::Read.traffic_factor(Store::Temporal), 1.0);
}
