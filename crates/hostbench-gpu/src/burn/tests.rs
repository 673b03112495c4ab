use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use hostbench_core::burn::{Fault, IntervalReading, UnitRun, UnitStatus};

use super::*;

#[test]
fn patterns_are_what_their_names_say() {
    for i in [0u64, 5, 31, 1 << 20, (7 << 32) | 9] {
        let seed = 0x1234_5678;
        let a = pattern(i, 0, seed);
        assert_eq!(pattern(i, 2, seed), !a, "inverse of the address at {i}");
        let w = pattern(i, 1, seed);
        assert_eq!(w.count_ones(), 1, "walking ones at {i}");
        assert_eq!(pattern(i, 3, seed), !w, "walking zeros at {i}");
    }
    // The high word of the index counts: an address line above 2³² words is not aliased.
    assert_ne!(pattern(9, 0, 0), pattern((1 << 32) | 9, 0, 0));
    // Neighbouring words differ, and a new seed changes every word.
    assert_ne!(pattern(8, 0, 1), pattern(9, 0, 1));
    assert_ne!(pattern(8, 0, 1), pattern(8, 0, 2));
    assert_eq!(pattern(0, 1, 0), 1);
    assert_eq!(pattern(1, 1, 0), 2);
}

/// The replay's chains stay inside [c, c² + c] (so nothing overflows on any device) and their
/// end value depends on every step: one more turn changes every start's checksum.
#[test]
fn chains_stay_bounded_and_every_step_counts() {
    let (lo, hi) = (C, C * C + C);
    for k in 1..=(source::STARTS * CHAINS * MAX_WIDTH) {
        let mut x = (k as f32).mul_add(STEP as f32, C as f32);
        let mut y = f64::from(k).mul_add(STEP, C);
        for _ in 0..20_000 {
            x = x.mul_add(x, C as f32);
            y = y.mul_add(y, C);
            assert!((lo..=hi).contains(&f64::from(x)), "f32 start {k}: {x}");
            assert!((lo..=hi).contains(&y), "f64 start {k}: {y}");
        }
    }
    for double in [false, true] {
        let a = expected_chains(double, 3, 1);
        let b = expected_chains(double, 4, 1);
        assert_eq!(a.len(), source::STARTS as usize);
        assert!(a.iter().zip(&b).all(|(x, y)| x != y), "{a:x?} {b:x?}");
        // Distinct starts give distinct answers, so a thread that ran another start's chain
        // (a wrong index) is caught too.
        let distinct: BTreeSet<u32> = a.iter().copied().collect();
        assert_eq!(distinct.len(), a.len());
        assert_eq!(
            expected_chains(double, 3, 1),
            a,
            "the replay is deterministic"
        );
    }
    assert_ne!(expected_chains(false, 3, 1), expected_chains(true, 3, 1));
    // Two lanes per chain fold twice the chains: another answer, so a kernel built for one
    // width cannot pass against the replay of another.
    assert_ne!(expected_chains(false, 3, 2), expected_chains(false, 3, 1));
}

fn launch(expected: &[u32], blocks: usize, block: u32) -> ChainRun {
    let threads = blocks * block as usize;
    ChainRun {
        sums: (0..threads).map(|g| expected[g % expected.len()]).collect(),
        sms: Some((0..blocks as u32).map(|b| b % 4 + 10).collect()),
        block,
    }
}

#[test]
fn a_wrong_chain_result_is_named_by_block_thread_and_sm() {
    let expected = expected_chains(false, 2, 1);
    let mut unit = UnitRun::new("gpu", "cuda0", "all", "fma-f32", "FLOP/s");
    let (mut by_sm, mut covered) = (BTreeMap::new(), BTreeSet::new());
    let clean = launch(&expected, 8, 64);
    assert_eq!(
        check_chains(&clean, &expected, &mut unit, &mut by_sm, &mut covered),
        512
    );
    assert_eq!((unit.errors, unit.checks), (0, 512));
    assert_eq!(covered, BTreeSet::from([10, 11, 12, 13]));
    // The documented fault: block 3's first thread, bit 0; block 11 wraps to block 3.
    for block in [3, 11] {
        let mut bad = launch(&expected, 8, 64);
        inject(&mut bad, block);
        check_chains(&bad, &expected, &mut unit, &mut by_sm, &mut covered);
    }
    assert_eq!((unit.errors, unit.checks), (2, 1536));
    let m = unit.first_error.clone().unwrap();
    assert_eq!(m.location, "block 3 (SM 13), thread 0");
    assert_eq!(m.bits, vec![0]);
    assert_eq!(
        m.expected,
        format!("{:#010x}", expected[(3 * 64) % expected.len()])
    );
    assert_eq!(by_sm, BTreeMap::from([("sm13".to_string(), 2)]));
    // Without SM ids (OpenCL) the block is the place.
    let mut cl = launch(&expected, 4, 32);
    cl.sms = None;
    cl.sums[2 * 32 + 5] ^= 1 << 30;
    let mut u = UnitRun::new("gpu", "opencl0", "all", "fma-f32", "FLOP/s");
    let mut by = BTreeMap::new();
    check_chains(&cl, &expected, &mut u, &mut by, &mut covered);
    assert_eq!(u.first_error.unwrap().location, "block 2, thread 5");
    assert_eq!(by, BTreeMap::from([("block2".to_string(), 1)]));
}

#[test]
fn wrong_words_are_counted_and_the_lowest_is_named_by_offset() {
    let words = 1 << 20;
    let (mode, seed) = (1, 77);
    let clean = MemRecord {
        errors: 0,
        got: 0,
        first: words,
    };
    let mut records = vec![clean; 16];
    records[5] = MemRecord {
        errors: 3,
        got: 0xdead_beef,
        first: 4000,
    };
    records[9] = MemRecord {
        errors: 2,
        got: 0,
        first: 1000,
    };
    let mut unit = UnitRun::new("gpu", "cuda0", "all", "mem-patterns", "GB/s");
    check_memory(&records, words, mode, seed, &mut unit);
    assert_eq!((unit.errors, unit.checks), (5, words));
    let m = unit.first_error.unwrap();
    assert_eq!(m.location, "offset 0xfa0 (walking-ones)");
    assert_eq!(m.expected, format!("{:#010x}", pattern(1000, mode, seed)));
    assert_eq!(m.got, "0x00000000");
    let mut ok = UnitRun::new("gpu", "cuda0", "all", "mem-patterns", "GB/s");
    check_memory(&[clean; 4], words, mode, seed, &mut ok);
    assert_eq!((ok.errors, ok.checks), (0, words));
}

#[test]
fn check_records_parse_from_the_kernels_layout() {
    let mut bytes = Vec::new();
    for (e, g, f) in [(0u32, 0u32, 9u64), (2, 0xabcd, (3 << 32) | 17)] {
        bytes.extend(e.to_le_bytes());
        bytes.extend(g.to_le_bytes());
        bytes.extend(f.to_le_bytes());
    }
    let r = MemRecord::parse(&bytes);
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[1].errors, r[1].got, r[1].first),
        (2, 0xabcd, (3 << 32) | 17)
    );
}

#[test]
fn a_refused_allocation_is_halved_down_to_64_mib() {
    let mut asked = Vec::new();
    let got = alloc_halving(1 << 30, |b| {
        asked.push(b);
        if b > 300 << 20 {
            Err(BenchError::unsupported("out of device memory"))
        } else {
            Ok(b)
        }
    });
    assert_eq!(got.unwrap(), (256 << 20, 256 << 20));
    assert_eq!(asked, [1 << 30, 512 << 20, 256 << 20]);
    let none = alloc_halving(256 << 20, |_| -> Result<(), _> {
        Err(BenchError::unsupported("out of device memory"))
    });
    assert!(none.is_err());
}

#[test]
fn only_a_gpu_block_fault_reaches_the_gpu_burn() {
    assert_eq!(fault_block(&Some(Fault::GpuBlock { block: 4 })), Some(4));
    assert_eq!(fault_block(&Some(Fault::MemFlip { after: 1 })), None);
    assert_eq!(fault_block(&None), None);
}

/// The module's kernels: every entry the backends look up is there, with the parameters they
/// pass, and the constants are the host's.
#[test]
fn the_kernel_texts_hold_what_the_backends_launch() {
    let ptx = ptx_source();
    for (entry, params) in [
        ("burn_chain_f32", 5),
        ("burn_chain_f64", 5),
        ("burn_fill", 4),
        ("burn_check", 5),
    ] {
        let got = crate::ptx::entry_params(&ptx, entry).unwrap_or_else(|| panic!("{entry}"));
        assert_eq!(got.len(), params, "{entry}: {got:?}");
    }
    // What the CUDA side passes is what each entry declares, type by type.
    let types = |a: crate::ptx::KernelArgs| -> Vec<String> {
        a.args().iter().map(|x| x.ptx_type().to_string()).collect()
    };
    for double in [false, true] {
        let declared = crate::ptx::entry_params(&ptx, chain_entry(double)).unwrap();
        assert_eq!(types(ptx_chain_args(double, 1, 2, 0)), declared, "{double}");
    }
    let fill = crate::ptx::entry_params(&ptx, "burn_fill").unwrap();
    assert_eq!(types(ptx_pattern_args(1, 2, 3, 4, None)), fill);
    let check = crate::ptx::entry_params(&ptx, "burn_check").unwrap();
    assert_eq!(types(ptx_pattern_args(1, 2, 3, 4, Some(5))), check);
    assert!(ptx.contains("%smid"));
    assert_eq!(
        ptx.matches("fma.rn.f32 %x7, %x7, %x7, %vc;").count(),
        UNROLL as usize
    );
    let cl = opencl_source(true, [1, 1]);
    for k in [
        "burn_chain_f32",
        "burn_chain_f64",
        "burn_fill",
        "burn_check",
    ] {
        assert!(cl.contains(&format!("__kernel void {k}(")), "{k}");
    }
    assert!(!opencl_source(false, [1, 1]).contains("double"));
    let wide = opencl_source(true, [16, 8]);
    assert!(
        wide.contains("float16 x7") && wide.contains("double8 x7"),
        "{wide}"
    );
    assert!(wide.contains("x7.sf"), "every lane of a float16 is folded");
    assert!(cl.contains(&format!("{HIGH_MUL}u")));
}

/// The PTX module assembles for its own target and for Hopper, as the driver's JIT would.
#[test]
fn ptxas_accepts_the_burn_module() {
    let Some(ptxas) = crate::ptx::ptxas_for_tests() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("hb-burn-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("burn.ptx");
    std::fs::write(&file, ptx_source()).unwrap();
    for arch in ["sm_50", "sm_90"] {
        let out = std::process::Command::new(&ptxas)
            .args(["-arch", arch, "-o"])
            .arg(dir.join(format!("burn-{arch}.cubin")))
            .arg(&file)
            .output()
            .expect("run ptxas");
        assert!(
            out.status.success(),
            "ptxas -arch {arch}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A device without hardware: chain launches that give the replay's answers (less one block when
/// asked: a block that never ran), and a pattern check that fails like a lost device after a
/// few passes when asked.
struct FakeDevice {
    info: DeviceInfo,
    drop_block: Option<usize>,
    checks_before_error: Option<u32>,
    checks: u32,
    answers: BTreeMap<(bool, u32), Vec<u32>>,
}

const FAKE_BLOCKS: usize = 4;
const FAKE_BLOCK: u32 = 32;

impl Session for FakeDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn compute(&mut self, _: Dtype, _: u32) -> Result<Box<dyn crate::Timed + '_>, BenchError> {
        Err(BenchError::unsupported("fake"))
    }
    fn memory(
        &mut self,
        _: crate::MemKernel,
        _: u64,
    ) -> Result<Box<dyn crate::Timed + '_>, BenchError> {
        Err(BenchError::unsupported("fake"))
    }
    fn transfer(
        &mut self,
        _: crate::Direction,
        _: crate::HostMemory,
        _: u64,
    ) -> Result<Box<dyn crate::Timed + '_>, BenchError> {
        Err(BenchError::unsupported("fake"))
    }
    fn launch(&mut self) -> Result<Box<dyn crate::Timed + '_>, BenchError> {
        Err(BenchError::unsupported("fake"))
    }
}

impl BurnKernels for FakeDevice {
    fn session(&mut self) -> &mut dyn Session {
        self
    }
    fn chain(&mut self, double: bool, iters: u32) -> Result<ChainRun, BenchError> {
        // Long enough that the calibration settles on a few thousand turns.
        std::thread::sleep(Duration::from_millis(15));
        let want = self
            .answers
            .entry((double, iters))
            .or_insert_with(|| expected_chains(double, iters, 1));
        let mut run = launch(want, FAKE_BLOCKS, FAKE_BLOCK);
        run.sms = Some((0..FAKE_BLOCKS as u32).map(|b| b % 2).collect());
        if let Some(b) = self.drop_block {
            let n = FAKE_BLOCK as usize;
            run.sums[b * n..(b + 1) * n].fill(0);
            run.sms.as_mut().unwrap()[b] = u32::MAX;
        }
        Ok(run)
    }
    fn words(&self) -> u64 {
        1 << 10
    }
    fn fill(&mut self, _: u32, _: u32) -> Result<(), BenchError> {
        Ok(())
    }
    fn check(&mut self, _: u32, _: u32) -> Result<Vec<MemRecord>, BenchError> {
        std::thread::sleep(Duration::from_millis(5));
        self.checks += 1;
        if self.checks_before_error.is_some_and(|n| self.checks > n) {
            return Err(BenchError::Failed(
                "cuLaunchKernel: CUDA_ERROR_LAUNCH_FAILED".into(),
            ));
        }
        let clean = MemRecord {
            errors: 0,
            got: 0,
            first: self.words(),
        };
        Ok(vec![clean; 8])
    }
}

/// A 2-SM CUDA device and a burn of it for `duration` in `interval`s.
fn fake_gpu(duration: Duration, interval: Duration) -> (DeviceInfo, GpuBurnConfig) {
    let mut info = DeviceInfo::named(Backend::Cuda, 0, "fake", "gpu");
    info.compute_units = 2;
    let cfg = GpuBurnConfig {
        devices: vec![info.clone()],
        duration,
        interval,
        fault: None,
    };
    (info, cfg)
}

fn fake_burn(drop_block: Option<usize>, checks_before_error: Option<u32>) -> GpuBurn {
    let (info, cfg) = fake_gpu(Duration::from_millis(1500), Duration::from_millis(300));
    let mut dev = FakeDevice {
        info: info.clone(),
        drop_block,
        checks_before_error,
        checks: 0,
        answers: BTreeMap::new(),
    };
    let mut run = device::DeviceRun::new(&info, &cfg);
    run.burn(
        &mut dev,
        &cfg,
        Instant::now(),
        &mut IntervalReading::default,
    );
    run.finish(&info, Ok(()))
}

fn unit<'a>(b: &'a GpuBurn, name: &str) -> &'a UnitRun {
    b.units.iter().find(|u| u.unit == name).unwrap()
}

/// A unit stopped by a device error midway is `not run` with the error, and the device lists it
/// as stopped (the burn's verdict is then unknown), even though its earlier passes were right;
/// the other units run on, each with a timeline point per interval.
#[test]
fn a_device_error_midway_stops_the_unit_and_is_never_a_pass() {
    let b = fake_burn(None, Some(2));
    let mem = unit(&b, "mem-patterns");
    assert_eq!(mem.status, UnitStatus::NotRun, "{mem:?}");
    assert!(mem.checks > 0, "{mem:?}");
    assert!(
        mem.note.as_deref().unwrap().contains("LAUNCH_FAILED"),
        "{mem:?}"
    );
    let g = &b.devices[0];
    assert_eq!(g.stopped.len(), 1, "{g:?}");
    assert!(g.stopped[0].starts_with("mem-patterns: "), "{g:?}");
    for name in ["fma-f32", "fma-f64"] {
        let u = unit(&b, name);
        assert_eq!((u.status, u.errors), (UnitStatus::Pass, 0), "{u:?}");
        assert!(u.rate > 0.0, "{u:?}");
        let points = b
            .timeline
            .iter()
            .filter(|p| p.unit == format!("cuda0 {name}"))
            .count();
        assert!(points >= 2, "{name}: {:?}", b.timeline);
    }
    assert_eq!(g.sms_covered, Some(2));
}

/// A block that never ran (its SM id and checksums left cleared) is wrong on every thread and
/// covers no SM.
#[test]
fn a_block_that_never_ran_is_wrong_and_covers_no_sm() {
    let b = fake_burn(Some(2), None);
    let u = unit(&b, "fma-f32");
    assert_eq!(u.status, UnitStatus::Fail, "{u:?}");
    assert_eq!(u.errors % u64::from(FAKE_BLOCK), 0, "{u:?}");
    assert_eq!(
        u.first_error.as_ref().unwrap().location,
        "block 2, thread 0"
    );
    let g = &b.devices[0];
    assert_eq!(g.sms_covered, Some(2), "{g:?}");
    assert_eq!(
        g.errors_by_sm.keys().collect::<Vec<_>>(),
        ["block2"],
        "{g:?}"
    );
    assert!(g.stopped.is_empty(), "{g:?}");
    assert_eq!(unit(&b, "mem-patterns").status, UnitStatus::Pass);
}

/// The PTX chain kernels, interpreted (`ptx_sim`): every thread's checksum is the host replay's
/// for its start, over more threads than starts and more than one turn, and thread 0 of each
/// block stores the SM it ran on at its block's slot; nothing is stored outside the buffers.
#[test]
fn the_ptx_chain_kernels_compute_the_host_replay() {
    let module = ptx_source();
    let (grid, block, iters) = (3u32, 32u32, 3u32);
    for double in [false, true] {
        let k = crate::ptx_sim::Kernel::parse(&module, chain_entry(double));
        let mut mem = crate::ptx_sim::Memory::default();
        let sums = mem.alloc((grid * block * 4) as usize);
        let sms = mem.alloc((grid * 4) as usize);
        let args = ptx_chain_args(double, sums, sms, iters);
        crate::ptx_sim::launch(&k, grid, block, &args, &mut mem, |b| 7 + 2 * b);
        let want = expected_chains(double, iters, 1);
        let got = crate::replay::words(mem.buf(sums));
        for (g, &v) in got.iter().enumerate() {
            assert_eq!(v, want[g % want.len()], "double {double}, thread {g}");
        }
        assert_eq!(crate::replay::words(mem.buf(sms)), [7, 9, 11]);
        // One more turn is another answer: the loop count is the argument's.
        let mut other = crate::ptx_sim::Memory::default();
        let (s2, m2) = (other.alloc((grid * block * 4) as usize), other.alloc(12));
        let args = ptx_chain_args(double, s2, m2, iters + 1);
        crate::ptx_sim::launch(&k, grid, block, &args, &mut other, |_| 0);
        assert_ne!(crate::replay::words(other.buf(s2))[0], want[0]);
    }
}

/// The PTX fill and check kernels, interpreted: a grid-stride fill writes every word's pattern
/// (in each mode, and no word past the end), and the check finds exactly one flipped word,
/// reported by the thread that read it with its index and the value read; every other thread
/// reports none, its first index the word count.
#[test]
fn the_ptx_pattern_kernels_fill_and_find_a_flipped_word() {
    let module = ptx_source();
    let fill = crate::ptx_sim::Kernel::parse(&module, "burn_fill");
    let check = crate::ptx_sim::Kernel::parse(&module, "burn_check");
    let (grid, block, words) = (2u32, 32u32, 1000u64);
    let threads = u64::from(grid * block);
    for mode in 0..4 {
        let seed = 0xC0FF_EE00 ^ mode;
        let mut mem = crate::ptx_sim::Memory::default();
        let buf = mem.alloc(words as usize * 4);
        let out = mem.alloc(threads as usize * 16);
        let args = ptx_pattern_args(buf, words, mode, seed, None);
        crate::ptx_sim::launch(&fill, grid, block, &args, &mut mem, |_| 0);
        let filled = crate::replay::words(mem.buf(buf));
        for (i, &v) in filled.iter().enumerate() {
            assert_eq!(v, pattern(i as u64, mode, seed), "mode {mode}, word {i}");
        }
        let bad = 777usize;
        mem.buf(buf)[bad * 4 + 1] ^= 1 << 1;
        let args = ptx_pattern_args(buf, words, mode, seed, Some(out));
        crate::ptx_sim::launch(&check, grid, block, &args, &mut mem, |_| 0);
        let records = MemRecord::parse(mem.buf(out));
        assert_eq!(records.len() as u64, threads);
        for (t, r) in records.iter().enumerate() {
            if t as u64 == bad as u64 % threads {
                let want = MemRecord {
                    errors: 1,
                    got: pattern(bad as u64, mode, seed) ^ (1 << 9),
                    first: bad as u64,
                };
                assert_eq!(*r, want, "mode {mode}");
            } else {
                assert_eq!((r.errors, r.first), (0, words), "mode {mode}, thread {t}");
            }
        }
    }
}

/// An error that is itself a wrong result the device caught (the driver's uncorrectable ECC
/// error, a `Validation`) fails every unit it kept from running, even at setup; any other setup
/// error leaves them `not run`.
#[test]
fn a_device_caught_error_at_setup_fails_the_units_and_another_error_leaves_them_not_run() {
    let (info, cfg) = fake_gpu(Duration::from_millis(10), Duration::from_millis(10));
    let ecc =
        BenchError::Validation("cuMemsetD8: the GPU reported an uncorrectable ECC error".into());
    let b = device::DeviceRun::new(&info, &cfg).finish(&info, Err(ecc));
    for name in ["fma-f32", "fma-f64", "mem-patterns"] {
        let u = unit(&b, name);
        assert_eq!((u.status, u.errors), (UnitStatus::Fail, 1), "{u:?}");
        let first = u.first_error.as_ref().unwrap().describe();
        assert_eq!(
            first,
            "the device: cuMemsetD8: the GPU reported an uncorrectable ECC error"
        );
    }
    let lost = BenchError::Failed("cuCtxSetCurrent: CUDA_ERROR_DEVICE_UNAVAILABLE".into());
    let b = device::DeviceRun::new(&info, &cfg).finish(&info, Err(lost));
    for name in ["fma-f32", "fma-f64", "mem-patterns"] {
        let u = unit(&b, name);
        assert_eq!((u.status, u.errors), (UnitStatus::NotRun, 0), "{u:?}");
    }
    assert_eq!(b.devices[0].stopped.len(), 1);
}
