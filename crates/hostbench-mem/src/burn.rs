//! Memory burn-in: pattern tests over a share of the available memory from every allowed CPU at
//! once, every word read back and compared.
//!
//! Why these patterns (memtester's and memtest86's classics): walking ones and zeros catch stuck
//! and coupled data bits, moving inversions catch cells disturbed by writes to their neighbours in
//! either address order, random data catches pattern-sensitive faults, and address-in-address
//! catches address-line faults (two addresses aliasing one cell). Each pass is split between
//! threads pinned one per CPU so the test runs at the memory's bandwidth rather than one core's.
//! A wrong word is named by its virtual address and, where `/proc/self/pagemap` is readable
//! (root), its physical address, which the EDAC counters and the DIMM map relate to a module.
//! `HOSTBENCH_FAULT=mem:flip:after=N` flips one bit of word N (modulo the buffer) after the fill
//! and before the read-back, so the detection path tested is the real one.

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

    /// The value word `i` (at virtual address `addr`) holds in pass `pass`.
    #[inline(always)]
    fn value(self, pass: u64, i: usize, addr: usize) -> u64 {
        match self {
            Pattern::WalkingOnes | Pattern::MovingInversions => 1u64.rotate_left(pass as u32),
            Pattern::WalkingZeros => !1u64.rotate_left(pass as u32),
            Pattern::Random => mix64(pass.wrapping_mul(0x1_0000_0001) ^ i as u64),
            Pattern::AddressInAddress => addr as u64 ^ pass,
        }
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

/// Compare every word with `want(index)`: the wrong words' count and the first (address, expected,
/// got). Generic so the expected value is computed inline and the compare loop vectorises; an OR of
/// XORs per block, and only a bad block is searched word by word.
#[inline(always)]
fn check<F: Fn(usize) -> u64>(words: &[u64], want: F) -> (u64, Option<(usize, u64, u64)>) {
    let addr0 = words.as_ptr() as usize;
    let mut bad = 0;
    let mut first = None;
    for (b, block) in words.chunks(512).enumerate() {
        let off = b * 512;
        let diff = block
            .iter()
            .enumerate()
            .fold(0u64, |acc, (k, &w)| acc | (w ^ want(off + k)));
        if diff != 0 {
            for (k, &w) in block.iter().enumerate() {
                let e = want(off + k);
                if w != e {
                    bad += 1;
                    first.get_or_insert((addr0 + (off + k) * 8, e, w));
                }
            }
        }
    }
    (bad, first)
}

/// Write `want(i)` into every word, flip the injected fault's bit, and compare every word.
#[inline(always)]
fn fill_and_check<F: Fn(usize) -> u64 + Copy>(
    words: &mut [u64],
    flip: Option<usize>,
    want: F,
) -> (u64, Option<(usize, u64, u64)>) {
    for (i, w) in words.iter_mut().enumerate() {
        *w = want(i);
    }
    inject(words, flip);
    check(words, want)
}

/// The injected fault (`HOSTBENCH_FAULT=mem:flip`): one bit of one word changes after it was
/// written.
fn inject(words: &mut [u64], flip: Option<usize>) {
    if let Some(i) = flip {
        words[i] ^= 1 << 5;
    }
}

/// (bytes moved, wrong words, the first wrong one as (virtual address, expected, got)).
type ChunkResult = (u64, u64, Option<(usize, u64, u64)>);

/// Fill `words` with the pattern, then (for moving inversions, with the inverse written back in
/// both directions) read every word and compare. Returns (bytes moved, wrong words, first).
fn pass_chunk(
    p: Pattern,
    pass: u64,
    words: &mut [u64],
    base: usize,
    flip: Option<usize>,
) -> ChunkResult {
    let addr0 = words.as_ptr() as usize;
    let at = |i: usize| addr0 + i * 8;
    // Constant patterns fill and compare with one splatted value (memset speed); the others
    // compute each word's value inline.
    let constant = match p {
        Pattern::WalkingOnes | Pattern::WalkingZeros | Pattern::MovingInversions => {
            Some(p.value(pass, 0, 0))
        }
        Pattern::Random | Pattern::AddressInAddress => None,
    };
    let mut moved = 2 * words.len() as u64 * 8;
    let mut bad = 0u64;
    let mut first = None;
    let mut tally = |(b, f): (u64, Option<(usize, u64, u64)>)| {
        bad += b;
        if first.is_none() {
            first = f;
        }
    };
    // One loop per pattern, its value function known to the compiler: matched once here rather
    // than per word, the fill and the compare vectorise (address-in-address and random ran at a
    // third and a fifth of the constant patterns' rate with the match inside the loop).
    tally(match p {
        Pattern::WalkingOnes | Pattern::WalkingZeros | Pattern::MovingInversions => {
            // A constant fills at memset speed.
            let v = p.value(pass, 0, 0);
            words.fill(v);
            inject(words, flip);
            check(words, |_| v)
        }
        // The pattern a constant in each closure: `value`'s match folds away.
        Pattern::Random => {
            fill_and_check(words, flip, |i| Pattern::Random.value(pass, base + i, 0))
        }
        Pattern::AddressInAddress => fill_and_check(words, flip, |i| {
            Pattern::AddressInAddress.value(pass, 0, at(i))
        }),
    });
    if let Some(v) = constant.filter(|_| p == Pattern::MovingInversions) {
        // Up: write the inverse; down: read it and restore the pattern, checking both ways.
        for w in words.iter_mut() {
            *w = !*w;
        }
        tally(check(words, |_| !v));
        for w in words.iter_mut().rev() {
            *w = !*w;
        }
        tally(check(words, |_| v));
        moved += 6 * words.len() as u64 * 8;
    }
    (moved, bad, first)
}

/// Run the pattern passes over `bytes` until the duration is spent (at least one pass each).
pub fn run(cfg: &MemBurnConfig) -> Result<MemBurn, BenchError> {
    let words_total = (cfg.bytes / 8).max(cfg.cpus.len().max(1) * 512);
    let mut region = Region::new(words_total * 8, Pages::Huge)?;
    region.touch();
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
    let threads = cfg.cpus.len().max(1);
    let per = words_total.div_ceil(threads);
    let place = format!("{} MiB", (words_total * 8) >> 20);
    let mut runs: Vec<UnitRun> = PATTERNS
        .iter()
        .map(|p| UnitRun::new("mem", &place, "all", p.name(), "GB/s"))
        .collect();
    let mut busy = [Duration::ZERO; 5];
    let mut moved = [0u64; 5];
    // Per timeline interval and pattern: (bytes moved, seconds), so the rate is the pattern's own.
    let mut buckets: Vec<[(f64, f64); 5]> = Vec::new();
    let flip_at = match cfg.fault {
        Some(Fault::MemFlip { after }) => Some((after % words_total as u64) as usize),
        _ => None,
    };
    let start = Instant::now();
    let sampler = hostbench_core::burn::Sampler::start(start, cfg.interval);
    let mut pass = 0u64;
    let mut flipped = false;
    loop {
        for (k, &p) in PATTERNS.iter().enumerate() {
            let began = Instant::now();
            let results: Vec<ChunkResult> = std::thread::scope(|s| {
                let handles: Vec<_> = words
                    .chunks_mut(per)
                    .enumerate()
                    .map(|(t, chunk)| {
                        let cpu = affinity::cpu_for_thread(&cfg.cpus, t);
                        let base = t * per;
                        let flip = flip_at
                            .filter(|&f| !flipped && f >= base && f < base + chunk.len())
                            .map(|f| f - base);
                        s.spawn(move || {
                            let _ = affinity::pin_current_thread(cpu);
                            pass_chunk(p, pass, chunk, base, flip)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or((0, 1, None)))
                    .collect()
            });
            flipped |= flip_at.is_some();
            let el = began.elapsed();
            busy[k] += el;
            let run = &mut runs[k];
            let moved_before = moved[k];
            for (m, bad, first) in results {
                moved[k] += m;
                run.checks += m / 16;
                if bad > 0 {
                    if let Some((addr, e, g)) = first {
                        let mut mm = Mismatch::of_bits(format!("{addr:#x}"), e, g);
                        mm.detail = Some(match physical_address(addr) {
                            Some(pa) => format!("physical {pa:#x}; DIMM unknown (no EDAC map)"),
                            None => "physical address unreadable (pagemap)".into(),
                        });
                        run.record_error(mm);
                        run.errors += bad - 1;
                    }
                }
            }
            let b = (start.elapsed().as_secs_f64() / cfg.interval.as_secs_f64()) as usize;
            if buckets.len() <= b {
                buckets.resize(b + 1, [(0.0, 0.0); 5]);
            }
            buckets[b][k].0 += (moved[k] - moved_before) as f64;
            buckets[b][k].1 += el.as_secs_f64();
        }
        pass += 1;
        if start.elapsed() >= cfg.duration {
            break;
        }
    }
    // Each interval's own clock and temperature, read while it ran.
    let readings = sampler.finish();
    for (k, p) in PATTERNS.iter().enumerate() {
        for (b, row) in buckets.iter().enumerate() {
            let (bytes, secs) = row[k];
            if secs > 0.0 {
                let (clock_mhz, temp_c) = hostbench_core::burn::reading_at(&readings, b);
                out.timeline.push(TimelinePoint {
                    t_s: (b + 1) as f64 * cfg.interval.as_secs_f64(),
                    unit: format!("mem-{}", p.name()),
                    rate: bytes / secs / 1e9,
                    rate_unit: "GB/s".into(),
                    clock_mhz,
                    temp_c,
                    power_w: None,
                });
            }
        }
        let run = &mut runs[k];
        run.seconds = busy[k].as_secs_f64();
        run.rate = moved[k] as f64 / run.seconds.max(1e-9) / 1e9;
        run.settle();
    }
    out.units = runs;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_chunk_passes_and_a_flipped_word_is_found() {
        let mut v = vec![0u64; 4096];
        for p in PATTERNS {
            assert_eq!(pass_chunk(p, 3, &mut v, 0, None).1, 0, "{p:?}");
            let (_, bad, first) = pass_chunk(p, 3, &mut v, 0, Some(1000));
            assert_eq!(
                bad,
                if p == Pattern::MovingInversions { 3 } else { 1 },
                "{p:?}"
            );
            let (addr, e, g) = first.unwrap();
            assert_eq!(addr, v.as_ptr() as usize + 8000);
            assert_eq!(e ^ g, 1 << 5);
        }
    }
}
