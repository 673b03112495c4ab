//! Memory burn-in: pattern tests over a share of the available memory from every allowed CPU at
//! once, every word read back and compared.
//!
//! Why these patterns (memtester's and memtest86's classics): walking ones and zeros catch stuck
//! and coupled data bits, moving inversions catch cells disturbed by writes to their neighbours in
//! either address order, random data catches pattern-sensitive faults, and address-in-address
//! catches address-line faults (two addresses aliasing one cell).
//!
//! How it runs at the memory's bandwidth: the buffer is split between threads pinned one per CPU,
//! and each sweep over it checks the state the previous sweep wrote while writing the next one,
//! block by block (with streaming stores when the buffer is small enough that a cache could hold
//! its lines until the read-back). A sweep that only writes and one that only reads each
//! leave half the memory system idle; checking one state and writing the next together keeps both
//! directions busy, as a copy does, and every state is still written whole before any of it is
//! read back. The expected values of a block sit in an L1-sized stage, so the computed patterns
//! (random, address) cost what the constant ones do.
//!
//! A wrong word is named by its virtual address and, where `/proc/self/pagemap` is readable
//! (root), its physical address and, where the SMBIOS table maps it (`dmi::dimm_at_physical`), the
//! DIMM or its interleaved set; `hostbench burn` also fails on an EDAC count that rose meanwhile.
//! `HOSTBENCH_FAULT=mem:flip:after=N` flips one bit of word N (modulo the buffer) after the first
//! state is written and before it is read back, so the detection path tested is the real one.

use std::time::{Duration, Instant};

use hostbench_core::affinity;
use hostbench_core::buffer::{Pages, Region};
use hostbench_core::burn::{Fault, Mismatch, TimelinePoint, UnitRun};
use hostbench_core::rng::mix64;
use hostbench_core::BenchError;

/// What to burn.
#[derive(Debug, Clone)]
pub struct MemBurnConfig {
    pub bytes: usize,
    pub cpus: Vec<usize>,
    pub duration: Duration,
    pub interval: Duration,
    pub fault: Option<Fault>,
    /// The sum of the last-level caches (0 when unknown): below 4 × this the fill streams past
    /// the caches, so a read-back never comes from one.
    pub llc_bytes: u64,
}

#[derive(Debug, Default)]
pub struct MemBurn {
    pub units: Vec<UnitRun>,
    pub timeline: Vec<TimelinePoint>,
    /// Whether the kernel granted huge pages for the buffer.
    pub huge_bytes: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pattern {
    WalkingOnes,
    WalkingZeros,
    MovingInversions,
    Random,
    AddressInAddress,
}

const PATTERNS: [Pattern; 5] = [
    Pattern::WalkingOnes,
    Pattern::WalkingZeros,
    Pattern::MovingInversions,
    Pattern::Random,
    Pattern::AddressInAddress,
];

impl Pattern {
    fn name(self) -> &'static str {
        match self {
            Pattern::WalkingOnes => "walking-ones",
            Pattern::WalkingZeros => "walking-zeros",
            Pattern::MovingInversions => "moving-inversions",
            Pattern::Random => "random",
            Pattern::AddressInAddress => "address-in-address",
        }
    }

    /// The value word `i` (at virtual address `addr`) holds in pass `pass`: the pattern's definition,
    /// which [`Stage`] computes a block at a time.
    ///
    /// Random data is a per-pass table of [`BLOCK`] hashed words, XORed per block with a hashed
    /// salt: every word of a block differs from its neighbours and every block from the others, at
    /// the cost of one hash per block rather than per word. A hash per word held the random pass to
    /// a quarter of the constant patterns' rate (it was compute-bound, not memory-bound).
    fn value(self, pass: u64, i: usize, addr: usize) -> u64 {
        match self {
            Pattern::WalkingOnes | Pattern::MovingInversions => 1u64.rotate_left(pass as u32),
            Pattern::WalkingZeros => !1u64.rotate_left(pass as u32),
            Pattern::Random => random_word(pass, i % BLOCK) ^ random_salt(pass, i / BLOCK),
            Pattern::AddressInAddress => addr as u64 ^ pass,
        }
    }
}

/// Words per block (8 KiB): the unit the fill streams and the check compares, small enough that
/// the expected values stay in the L1 cache beside the data streaming through it.
const BLOCK: usize = 1024;

fn random_word(pass: u64, k: usize) -> u64 {
    mix64(pass.wrapping_mul(0x1_0000_0001) ^ k as u64)
}

fn random_salt(pass: u64, block: usize) -> u64 {
    mix64((block as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ !pass)
}

/// One pass's expected values, a block at a time, in an L1-resident buffer: the fill streams a
/// block from it and the check compares a block with it, so both run at memory speed whatever the
/// pattern (the per-word formula is [`Pattern::value`]).
struct Stage {
    p: Pattern,
    pass: u64,
    /// Random's per-pass table (empty for the other patterns).
    table: Vec<u64>,
    buf: Vec<u64>,
}

impl Stage {
    fn new(State { p, pass, inverted }: State) -> Self {
        let table = match p {
            Pattern::Random => (0..BLOCK).map(|k| random_word(pass, k)).collect(),
            _ => Vec::new(),
        };
        // A constant pattern's block never changes: filled once here.
        let v = p.value(pass, 0, 0);
        let buf = vec![if inverted { !v } else { v }; BLOCK];
        Self {
            p,
            pass,
            table,
            buf,
        }
    }

    /// The expected words of the block of `len` words starting at word `g0` of the whole buffer
    /// (a multiple of [`BLOCK`]), at virtual address `addr`.
    #[inline]
    fn block(&mut self, g0: usize, addr: usize, len: usize, simd: Simd) -> &[u64] {
        let out = &mut self.buf[..len];
        match self.p {
            // Constant (or moving inversions' inverse): filled once in `new`.
            Pattern::WalkingOnes | Pattern::WalkingZeros | Pattern::MovingInversions => {}
            Pattern::Random => {
                simd.xor(out, &self.table, random_salt(self.pass, g0 / BLOCK));
            }
            Pattern::AddressInAddress => {
                simd.iota(out, addr as u64, self.pass);
            }
        }
        out
    }
}

/// The physical address of a virtual one, from `/proc/self/pagemap` (root only shows PFNs).
pub fn physical_address(virt: usize) -> Option<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let page = 4096usize;
    let mut f = std::fs::File::open("/proc/self/pagemap").ok()?;
    f.seek(SeekFrom::Start((virt / page * 8) as u64)).ok()?;
    let mut b = [0u8; 8];
    f.read_exact(&mut b).ok()?;
    let entry = u64::from_le_bytes(b);
    let pfn = entry & ((1 << 55) - 1);
    (entry >> 63 == 1 && pfn != 0).then(|| pfn * page as u64 + (virt % page) as u64)
}

/// Compare every word with its expected value: the wrong words' count and the first (address,
/// expected, got). An OR of XORs over the block (it vectorises), and only a bad block is searched
/// word by word.
#[inline]
fn compare(words: &[u64], want: &[u64], simd: Simd) -> Found {
    if simd.diff(words, want) == 0 {
        return (0, None);
    }
    let addr0 = words.as_ptr() as usize;
    let mut bad = 0;
    let mut first = None;
    for (k, (&w, &e)) in words.iter().zip(want).enumerate() {
        if w != e {
            bad += 1;
            first.get_or_insert((addr0 + k * 8, e, w));
        }
    }
    (bad, first)
}

/// Wrong words found and the first as (virtual address, expected, got).
type Found = (u64, Option<(usize, u64, u64)>);

/// The injected fault (`HOSTBENCH_FAULT=mem:flip`): one bit of one word changes after it was
/// written.
fn inject(words: &mut [u64], flip: Option<usize>) {
    if let Some(i) = flip {
        words[i] ^= 1 << 5;
    }
}

/// The loops over a block, as wide as this CPU's vectors: the build's baseline is SSE2, and at 2
/// × 8 bytes per instruction comparing and computing a block cost more time than moving it (the
/// computed patterns ran at about half the constant ones' rate). Each is the same generic body
/// compiled once per vector width and chosen at run time.
mod lanes {
    #[inline(always)]
    pub fn diff(a: &[u64], b: &[u64]) -> u64 {
        a.iter().zip(b).fold(0u64, |acc, (&x, &y)| acc | (x ^ y))
    }

    #[inline(always)]
    pub fn xor(out: &mut [u64], table: &[u64], salt: u64) {
        for (o, &t) in out.iter_mut().zip(table) {
            *o = t ^ salt;
        }
    }

    #[inline(always)]
    pub fn iota(out: &mut [u64], addr: u64, pass: u64) {
        for (k, o) in out.iter_mut().enumerate() {
            *o = (addr + 8 * k as u64) ^ pass;
        }
    }

    /// One vector width's instances, as (diff, xor, iota).
    pub type Set = (
        unsafe fn(&[u64], &[u64]) -> u64,
        unsafe fn(&mut [u64], &[u64], u64),
        unsafe fn(&mut [u64], u64, u64),
    );

    macro_rules! width {
        ($name:ident, $($feature:literal),*) => {
            pub mod $name {
                $(#[target_feature(enable = $feature)])*
                pub unsafe fn diff(a: &[u64], b: &[u64]) -> u64 {
                    super::diff(a, b)
                }
                $(#[target_feature(enable = $feature)])*
                pub unsafe fn xor(out: &mut [u64], table: &[u64], salt: u64) {
                    super::xor(out, table, salt)
                }
                $(#[target_feature(enable = $feature)])*
                pub unsafe fn iota(out: &mut [u64], addr: u64, pass: u64) {
                    super::iota(out, addr, pass)
                }
                pub const SET: super::Set = (diff, xor, iota);
            }
        };
    }
    width!(baseline,);
    #[cfg(target_arch = "x86_64")]
    width!(avx2, "avx2");
    #[cfg(target_arch = "x86_64")]
    width!(avx512, "avx512f");

    /// The widest set this CPU runs.
    pub fn best() -> Set {
        #[cfg(target_arch = "x86_64")]
        {
            if hostbench_core::isa::avx512f() {
                return avx512::SET;
            }
            if hostbench_core::isa::avx2() {
                return avx2::SET;
            }
        }
        baseline::SET
    }
}

/// How a block is compared, computed and written: the loops of [`lanes`] at this CPU's width, and
/// the bandwidth kernels' copy, with streaming stores where the ISA has them and `run` wants them
/// (a small buffer: the next sweep's check then reads the memory, not a cache).
#[derive(Clone, Copy)]
struct Simd {
    copy: crate::kernels::CopyFn,
    nontemporal: bool,
    lanes: lanes::Set,
}

impl Simd {
    fn best() -> Self {
        let isa = crate::kernels::Isa::best();
        match isa.ops() {
            Ok(ops) => Self {
                copy: ops.copy,
                nontemporal: isa.has_nontemporal(),
                lanes: lanes::best(),
            },
            Err(_) => Self::plain(),
        }
    }

    /// Plain stores and baseline loops (the tests' reference path, and the fallback).
    fn plain() -> Self {
        unsafe fn copy(dst: *mut u8, src: *const u8, len: usize, _nt: bool) {
            // SAFETY: the caller's contract, as for the kernels' copy.
            unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
        }
        Self {
            copy,
            nontemporal: false,
            lanes: lanes::baseline::SET,
        }
    }

    fn diff(self, a: &[u64], b: &[u64]) -> u64 {
        // SAFETY: `lanes` holds the instances for features this CPU has (`lanes::best`).
        unsafe { (self.lanes.0)(a, b) }
    }

    fn xor(self, out: &mut [u64], table: &[u64], salt: u64) {
        // SAFETY: as in `diff`.
        unsafe { (self.lanes.1)(out, table, salt) }
    }

    fn iota(self, out: &mut [u64], addr: u64, pass: u64) {
        // SAFETY: as in `diff`.
        unsafe { (self.lanes.2)(out, addr, pass) }
    }

    fn put(self, dst: &mut [u64], src: &[u64]) {
        let len = dst.len().min(src.len());
        // SAFETY: both slices hold at least `len` words and are distinct borrows (the stage
        // buffer and the burn region never overlap).
        unsafe {
            (self.copy)(
                dst.as_mut_ptr().cast(),
                src.as_ptr().cast(),
                len * 8,
                self.nontemporal,
            )
        }
    }
}

/// What the memory holds between two sweeps: a pattern in a pass, or moving inversions' inverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct State {
    p: Pattern,
    pass: u64,
    inverted: bool,
}

/// The states one pass writes, in order: each is written over the whole buffer by one sweep and
/// checked by the next. Moving inversions is its pattern, the inverse (the up sweep checks the
/// pattern and writes the inverse), and the pattern again (the down sweep checks the inverse and
/// restores it, walking down), memtest86's order.
fn states(pass: u64) -> Vec<State> {
    let at = |p, inverted| State { p, pass, inverted };
    PATTERNS
        .iter()
        .flat_map(|&p| match p {
            Pattern::MovingInversions => vec![at(p, false), at(p, true), at(p, false)],
            _ => vec![at(p, false)],
        })
        .collect()
}

/// One sweep over a thread's share `words` (word `base` of the whole buffer, a multiple of
/// [`BLOCK`]), block by block: compare the block with `check`'s values, then write `write`'s.
///
/// Checking one state and writing the next in the same sweep keeps reads and writes in flight
/// together, as a copy does: a sweep that only wrote and another that only read ran at about
/// 60 % of the copy bandwidth on the Zen 5 host of BENCHMARKS.md, the two overlapped at its
/// copy rate. Each state is still written over the whole buffer before any of it is read back,
/// so two addresses that alias one cell are still caught (the later write changes what the earlier
/// address reads).
fn sweep(
    words: &mut [u64],
    base: usize,
    check: Option<State>,
    write: Option<State>,
    down: bool,
    simd: Simd,
) -> Found {
    let mut check = check.map(Stage::new);
    let mut write = write.map(Stage::new);
    let mut bad = 0u64;
    let mut first = None;
    let n = words.len();
    let blocks = n.div_ceil(BLOCK);
    for b in 0..blocks {
        let b = if down { blocks - 1 - b } else { b };
        let block = &mut words[b * BLOCK..((b + 1) * BLOCK).min(n)];
        let (g0, addr, len) = (base + b * BLOCK, block.as_ptr() as usize, block.len());
        if let Some(stage) = check.as_mut() {
            let (n, f) = compare(block, stage.block(g0, addr, len, simd), simd);
            bad += n;
            if first.is_none() {
                first = f;
            }
        }
        if let Some(stage) = write.as_mut() {
            simd.put(block, stage.block(g0, addr, len, simd));
        }
    }
    (bad, first)
}

/// A pattern's share of the sweeps: bytes moved and seconds.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    bytes: f64,
    secs: f64,
}

/// Fault `buf` in from one thread per CPU of `cpus`, each writing one byte per page of its own
/// `per`-byte part (the part its sweeps will use) while pinned to its CPU: the kernel zeroes
/// every page at its first touch, and one thread doing that for hundreds of GiB takes minutes.
fn touch_in_parallel(buf: &mut [u8], per: usize, cpus: &[usize]) {
    std::thread::scope(|s| {
        for (t, chunk) in buf.chunks_mut(per.max(1)).enumerate() {
            let cpu = affinity::cpu_for_thread(cpus, t);
            s.spawn(move || {
                let _ = affinity::pin_current_thread(cpu);
                for page in chunk.chunks_mut(4096) {
                    page[0] = 1;
                }
            });
        }
    });
}

/// Run the pattern passes over `bytes` until the duration is spent (at least one pass each),
/// the allocation and first touch of the buffer included.
pub fn run(cfg: &MemBurnConfig) -> Result<MemBurn, BenchError> {
    // Whole blocks, and each thread's share a whole number of them, so a block's values depend
    // on its place in the buffer only.
    let threads = cfg.cpus.len().max(1);
    let words_total = (cfg.bytes / 8 / BLOCK).max(threads) * BLOCK;
    let per = words_total.div_ceil(threads).next_multiple_of(BLOCK);
    // The duration counts from before the allocation: faulting in (and, for huge pages,
    // compacting) the share of memory takes seconds per 10 GiB, and the burn is bounded by the
    // time it was given, not by the time after its setup.
    let start = Instant::now();
    let mut region = Region::new(words_total * 8, Pages::Huge)?;
    touch_in_parallel(region.as_mut_slice(), per * 8, &cfg.cpus);
    let mut out = MemBurn {
        huge_bytes: region.huge_bytes(),
        ..MemBurn::default()
    };
    let words: &mut [u64] = {
        let bytes = region.as_mut_slice();
        // SAFETY: the region is 2 MiB aligned (buffer::ALIGN) and its length is a multiple of 8,
        // so reinterpreting it as u64 words is aligned and in bounds; `bytes` is not used again.
        unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<u64>(), words_total) }
    };
    // Streaming stores unless the buffer is at least 4 × the caches (STREAM's rule): then every
    // block is evicted long before the next sweep reads it, whatever the stores, and writing into
    // the lines the check just read cost less than streaming past them (about 15 % more bytes
    // moved on the Zen 5 host, three rounds of each).
    let best = Simd::best();
    let simd = Simd {
        nontemporal: best.nontemporal
            && (cfg.llc_bytes == 0 || (words_total as u64 * 8) < 4 * cfg.llc_bytes),
        ..best
    };
    let place = format!("{} MiB", (words_total * 8) >> 20);
    let mut runs: Vec<UnitRun> = PATTERNS
        .iter()
        .map(|p| UnitRun::new("mem", &place, "all", p.name(), "GB/s"))
        .collect();
    let index = |p: Pattern| PATTERNS.iter().position(|&q| q == p).unwrap_or(0);
    let mut totals = [Tally::default(); 5];
    // Per timeline interval and pattern, so each interval's rate is the pattern's own.
    let mut buckets: Vec<[Tally; 5]> = Vec::new();
    let mut flip_at = match cfg.fault {
        Some(Fault::MemFlip { after }) => Some((after % words_total as u64) as usize),
        _ => None,
    };
    let bytes = (words_total * 8) as f64;
    let sampler = hostbench_core::burn::Sampler::start(start, cfg.interval);
    let mut pass = 0u64;
    // The state the memory holds: none before the first sweep writes one.
    let mut held: Option<State> = None;
    let mut last = false;
    loop {
        // The pass's sweeps: write each state while checking the one before; after the last
        // pass, one more sweep only checks.
        let steps: Vec<(Option<State>, Option<State>)> = if last {
            vec![(held, None)]
        } else {
            states(pass)
                .into_iter()
                .map(|w| (held.replace(w), Some(w)))
                .collect()
        };
        for (check, write) in steps {
            // Moving inversions' down sweep: checking its inverse, walking down.
            let down = check.is_some_and(|c| c.inverted);
            let began = Instant::now();
            let results: Vec<Found> = std::thread::scope(|s| {
                let handles: Vec<_> = words
                    .chunks_mut(per)
                    .enumerate()
                    .map(|(t, chunk)| {
                        let cpu = affinity::cpu_for_thread(&cfg.cpus, t);
                        s.spawn(move || {
                            let _ = affinity::pin_current_thread(cpu);
                            sweep(chunk, t * per, check, write, down, simd)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or((1, None)))
                    .collect()
            });
            // The injected fault: one bit of the first state written flips before it is read.
            if let Some(f) = flip_at.take() {
                inject(words, Some(f));
            }
            let secs = began.elapsed().as_secs_f64();
            // The sweep's bytes and time go half to the pattern checked and half to the one
            // written (all of it to one pattern when it did one thing or both were its own).
            let parts: Vec<Pattern> = [check, write].iter().flatten().map(|s| s.p).collect();
            let b = (start.elapsed().as_secs_f64() / cfg.interval.as_secs_f64()) as usize;
            if buckets.len() <= b {
                buckets.resize(b + 1, [Tally::default(); 5]);
            }
            for &p in &parts {
                for t in [&mut totals[index(p)], &mut buckets[b][index(p)]] {
                    t.bytes += bytes;
                    t.secs += secs / parts.len() as f64;
                }
            }
            if let Some(c) = check {
                let run = &mut runs[index(c.p)];
                run.checks += words_total as u64;
                for (bad, first) in results {
                    if let Some((addr, e, g)) = first.filter(|_| bad > 0) {
                        let mut mm = Mismatch::of_bits(format!("{addr:#x}"), e, g);
                        mm.detail = Some(match physical_address(addr) {
                            Some(pa) => format!(
                                "physical {pa:#x}; {}",
                                crate::dmi::dimm_at_physical(pa).unwrap_or_else(|| {
                                    "DIMM unknown (no SMBIOS address map)".into()
                                })
                            ),
                            None => "physical address unreadable (pagemap)".into(),
                        });
                        run.record_error(mm);
                        run.errors += bad - 1;
                    }
                }
            }
        }
        if last {
            break;
        }
        pass += 1;
        last = start.elapsed() >= cfg.duration;
    }
    // Each interval's own clock and temperature, read while it ran.
    let readings = sampler.finish();
    let ended_s = start.elapsed().as_secs_f64();
    for (k, p) in PATTERNS.iter().enumerate() {
        for (b, row) in buckets.iter().enumerate() {
            let Tally { bytes, secs } = row[k];
            if secs > 0.0 {
                out.timeline
                    .push(hostbench_core::burn::reading_at(&readings, b).point(
                        hostbench_core::burn::interval_end(b, cfg.interval, ended_s),
                        format!("mem-{}", p.name()),
                        bytes / secs / 1e9,
                        "GB/s".into(),
                    ));
            }
        }
        let run = &mut runs[k];
        run.seconds = totals[k].secs;
        run.rate = totals[k].bytes / run.seconds.max(1e-9) / 1e9;
        run.settle();
    }
    out.units = runs;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pass's sweeps over `v` as `run` chains them, the flip after the first fill: the wrong
    /// words found per sweep.
    fn chain(v: &mut [u64], base: usize, flip: Option<usize>, simd: Simd) -> Vec<u64> {
        let mut held = None;
        let mut found = Vec::new();
        let mut steps: Vec<_> = states(3)
            .into_iter()
            .map(|w| (held.replace(w), Some(w)))
            .collect();
        steps.push((held, None));
        for (k, (check, write)) in steps.into_iter().enumerate() {
            let down = check.is_some_and(|c| c.inverted);
            let (bad, first) = sweep(v, base, check, write, down, simd);
            if bad > 0 {
                let (addr, e, g) = first.unwrap();
                assert_eq!(addr, v.as_ptr() as usize + 8 * flip.unwrap());
                assert_eq!(e ^ g, 1 << 5);
            }
            found.push(bad);
            if k == 0 {
                inject(v, flip);
            }
        }
        found
    }

    #[test]
    fn a_clean_buffer_passes_and_a_flipped_word_is_found_once() {
        let mut v = vec![0u64; 4 * BLOCK + 24];
        for simd in [Simd::plain(), Simd::best()] {
            assert!(chain(&mut v, 0, None, simd).iter().all(|&n| n == 0));
            // The flip happens once, after the first fill: the next sweep finds it and writes
            // the next pattern over it.
            let found = chain(&mut v, 0, Some(1000), simd);
            assert_eq!(found[1], 1);
            assert_eq!(found.iter().sum::<u64>(), 1, "{found:?}");
        }
    }

    #[test]
    fn each_sweep_writes_the_states_defined_values() {
        let mut v = vec![0u64; 3 * BLOCK + 100];
        let base = 5 * BLOCK;
        for w in states(7) {
            sweep(&mut v, base, None, Some(w), w.inverted, Simd::best());
            let addr0 = v.as_ptr() as usize;
            for (i, &x) in v.iter().enumerate() {
                let want = w.p.value(7, base + i, addr0 + 8 * i);
                assert_eq!(x, if w.inverted { !want } else { want }, "{w:?} word {i}");
            }
        }
        // Random data differs between neighbours, between blocks and between passes.
        let r = |pass, i| Pattern::Random.value(pass, i, 0);
        assert_ne!(r(1, 0), r(1, 1));
        assert_ne!(r(1, 0), r(1, BLOCK));
        assert_ne!(r(1, 0), r(2, 0));
    }

    #[test]
    fn a_short_run_checks_every_pattern_and_names_the_flipped_word() {
        let cfg = |fault| MemBurnConfig {
            bytes: 1 << 20,
            cpus: vec![0],
            duration: Duration::ZERO,
            interval: Duration::from_secs(1),
            fault,
            llc_bytes: 0,
        };
        let clean = run(&cfg(None)).unwrap();
        assert_eq!(clean.units.len(), PATTERNS.len());
        for u in &clean.units {
            assert_eq!(u.errors, 0, "{}", u.unit);
            // Each state is checked once per pass (moving inversions three times).
            let per_pass = if u.unit == "moving-inversions" { 3 } else { 1 };
            assert_eq!(u.checks, per_pass * (1 << 17), "{}", u.unit);
        }
        let bad = run(&cfg(Some(Fault::MemFlip { after: 7 }))).unwrap();
        let failed: Vec<_> = bad.units.iter().filter(|u| u.errors > 0).collect();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].unit, "walking-ones");
    }
}
