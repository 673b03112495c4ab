//! The pointer-chase working set: one uniformly random cycle of cache lines, linked in cycle
//! order, and the hand-written dependent-load loop that follows `K` chains through it.
//!
//! A random single cycle defeats stride prefetchers and visits every line once per lap; the
//! loads are `asm!` (`mov r, [r]`, `ldr x, [x]`) so no base+index addressing cycle is added to an
//! L1 hit; and since the cycle's order is kept, every walk checks where each chain must have
//! ended. The module documentation of `latency` gives the full reasoning.

use std::sync::Arc;
use std::time::Instant;

use hostbench_core::rng::SplitMix64;
use hostbench_core::BenchError;

use super::{region_len, LINE, MAX_LINES, UNROLL};
use crate::buffer::{Pages, Region};

/// Repeat a block 16 times (the unroll factor of the chase loop).
macro_rules! x16 {
    ($b:block) => {
        $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b
    };
}

/// The pointer-chase working set: a region whose lines form one random cycle.
pub(crate) struct ChainSet {
    pub(super) region: Region,
    /// Exposed address of line 0; links hold `base + line × 64`.
    base: usize,
    /// `order[k]`: the line at position k of the cycle (position 0 is line 0).
    pub(super) order: Arc<Vec<u32>>,
    /// Cycle position where chain 0 starts the next walk; chain c starts `c × n / k` further.
    cursor: u64,
}

/// A uniformly random cycle over the lines of a `ws`-byte working set, in walk order (see
/// `walk_order`).
pub(super) fn random_cycle(ws: u64, seed: u64) -> Result<Arc<Vec<u32>>, BenchError> {
    let n = u32::try_from(ws / LINE)
        .ok()
        .filter(|&n| n >= 2)
        .ok_or_else(|| {
            BenchError::invalid(format!(
                "working set {ws} B must hold between 2 and {MAX_LINES} cache lines"
            ))
        })?;
    Ok(Arc::new(walk_order(n, seed)))
}

impl ChainSet {
    /// Map and first-touch a region for `ws` bytes and link its lines along `order`.
    pub(super) fn build(ws: u64, pages: Pages, order: Arc<Vec<u32>>) -> Result<Self, BenchError> {
        Self::build_on(ws, pages, order, None)
    }

    /// As [`ChainSet::build`], with the region bound to NUMA node `node` before the first touch.
    pub(super) fn build_on(
        ws: u64,
        pages: Pages,
        order: Arc<Vec<u32>>,
        node: Option<usize>,
    ) -> Result<Self, BenchError> {
        if order.len() as u64 != ws / LINE {
            return Err(BenchError::Failed(format!(
                "cycle of {} lines does not fit a working set of {ws} B",
                order.len()
            )));
        }
        // Only the link words are ever read, and `link` writes every line's.
        let mut region = Region::new_for_overwrite(region_len(ws, pages, 0)?, pages)?;
        if let Some(node) = node {
            region.bind_node(node)?;
        }
        // First touch from this (pinned) thread places every page on its NUMA node.
        #[cfg(test)]
        if ws == tests::BASE_PAGES_WS.load(std::sync::atomic::Ordering::SeqCst) {
            // A test's working set: left on base pages, as a fragmented machine leaves it.
            region.touch_on_base_pages();
        } else {
            region.touch();
        }
        #[cfg(not(test))]
        region.touch();
        let base = link(&mut region, &order);
        Ok(Self {
            region,
            base,
            order,
            cursor: 0,
        })
    }

    fn addr_at(&self, pos: u64) -> usize {
        let n = self.order.len() as u64;
        self.base + self.order[(pos % n) as usize] as usize * LINE as usize
    }

    pub(super) fn walk<const K: usize>(&mut self, blocks: u64) -> Result<f64, BenchError> {
        let n = self.order.len() as u64;
        let spacing = n / K as u64;
        if spacing < 2 {
            return Err(BenchError::invalid(format!(
                "{K} chains need at least {} cache lines, the cycle has {n}",
                2 * K
            )));
        }
        let steps = blocks * UNROLL;
        let starts: [usize; K] =
            std::array::from_fn(|c| self.addr_at(self.cursor + c as u64 * spacing));
        let t0 = Instant::now();
        // SAFETY: every start is the address of a line of `self.region`; `link` made every
        // line's first word the address of another line of the same region, later changes only
        // ever store such addresses, and the region lives (borrowed by `self`) for the call.
        let ends = unsafe { chase::<K>(starts, blocks) };
        let secs = t0.elapsed().as_secs_f64();
        for (c, &end) in ends.iter().enumerate() {
            let want = self.addr_at(self.cursor + c as u64 * spacing + steps);
            if end != want {
                return Err(BenchError::Validation(format!(
                    "pointer chase chain {c} ended at byte offset {} instead of {} after {steps} \
                     loads: the chain is corrupt or the loop did not run as written",
                    end.wrapping_sub(self.base),
                    want.wrapping_sub(self.base)
                )));
            }
        }
        self.cursor = (self.cursor + steps) % n;
        Ok(secs)
    }
}

/// One random cycle through lines `0..n`, as the order a walk visits them: line 0, then lines
/// `1..n` shuffled by Fisher–Yates. A cycle read from line 0 is exactly one such order, so each
/// of the (n − 1)! cycles is drawn equally often: the distribution of Sattolo's algorithm.
/// Sattolo gives `next[line]`, and the walk order then has to be read off it by following the
/// cycle, one dependent cache miss per line: on a multi-GiB set that pass alone took seconds per
/// size, where the shuffle's misses are independent and overlap.
///
/// The swap partners come from the random stream alone, not from the data, so they are drawn a
/// batch ahead and their elements prefetched: the swaps' cache misses then overlap instead of
/// coming one after the other. The swaps themselves run in the same order as before, so the
/// permutation is the same, element for element.
fn walk_order(n: u32, seed: u64) -> Vec<u32> {
    let mut order: Vec<u32> = (0..n).collect();
    let mut rng = SplitMix64::new(seed);
    let mut js = [0usize; BATCH];
    let mut i = n as usize;
    while i > 2 {
        // Steps i-1 down to max(2, i - BATCH), as the plain loop takes them.
        let lo = i.saturating_sub(BATCH).max(2);
        for (slot, step) in js.iter_mut().zip((lo..i).rev()) {
            // j uniform in [1, step]: position 0 keeps line 0.
            *slot = 1 + rng.below(step as u64) as usize;
            prefetch(&order, *slot);
        }
        for (&j, step) in js.iter().zip((lo..i).rev()) {
            order.swap(step, j);
        }
        i = lo;
    }
    order
}

/// Swaps or writes issued ahead of time by [`walk_order`] and [`link`]: enough independent misses
/// in flight to cover DRAM latency on one core.
const BATCH: usize = 32;

/// A hint that `v[i]` is about to be used (no effect where the target has no prefetch we use).
#[inline(always)]
fn prefetch<T>(v: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(e) = v.get(i) {
        // SAFETY: a prefetch of an address inside a live slice; it never faults or writes.
        unsafe {
            std::arch::x86_64::_mm_prefetch(
                (e as *const T).cast::<i8>(),
                std::arch::x86_64::_MM_HINT_T0,
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (v, i);
}

/// Write the links: each line's first word gets the address of the next line in `order`. They
/// are written in cycle order so that what stays cached afterwards is the end of the lap, each
/// batch's lines prefetched before it is written.
/// Returns the (exposed) address of line 0.
fn link(region: &mut Region, order: &[u32]) -> usize {
    let base = region.as_mut_ptr().expose_provenance();
    let words = words_mut(region);
    let per_line = LINE as usize / std::mem::size_of::<usize>();
    for (c, batch) in order.chunks(BATCH).enumerate() {
        for &line in batch {
            prefetch(words, line as usize * per_line);
        }
        for (idx, &line) in (c * BATCH..).zip(batch) {
            // The last line links back to the first: one cycle.
            let to = order.get(idx + 1).copied().unwrap_or(order[0]);
            words[line as usize * per_line] = base + to as usize * LINE as usize;
        }
    }
    base
}

/// The region as machine words.
fn words_mut(region: &mut Region) -> &mut [usize] {
    let len = region.len() / std::mem::size_of::<usize>();
    // SAFETY: a Region starts on an ALIGN (2 MiB) boundary, so it is aligned for usize; `len`
    // whole words lie inside it; every bit pattern is a valid usize; and the `&mut` borrow of the
    // region makes this the only access for the slice's lifetime.
    unsafe { std::slice::from_raw_parts_mut(region.as_mut_ptr().cast::<usize>(), len) }
}

/// Follow `K` chains for `blocks` × 16 dependent loads each, interleaved so their misses overlap;
/// returns where each chain ended.
///
/// # Safety
/// Every `p[c]` must be the address of a readable, aligned `usize` that holds the address
/// of another such word, and so on for every word reached: a closed chain in live memory.
#[inline(never)]
unsafe fn chase<const K: usize>(mut p: [usize; K], blocks: u64) -> [usize; K] {
    for _ in 0..blocks {
        x16!({
            for q in p.iter_mut() {
                // SAFETY: by this function's contract `*q` is a link word of a closed chain, so
                // it is readable and the address it holds is one too.
                *q = unsafe { load_link(*q) };
            }
        });
    }
    p
}

/// One dependent load with simple addressing: `p = *p`.
///
/// # Safety
/// `p` must be the address of a readable, aligned `usize`.
#[inline(always)]
unsafe fn load_link(p: usize) -> usize {
    let mut p = p;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller guarantees `p` addresses a readable word; the instruction reads exactly
    // that word and writes only the register.
    unsafe {
        core::arch::asm!(
            "mov {p}, qword ptr [{p}]",
            p = inout(reg) p,
            options(nostack, readonly, preserves_flags)
        );
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above; `ldr x, [x]` reads the 8-byte word at `p` into the same register.
    unsafe {
        core::arch::asm!(
            "ldr {p}, [{p}]",
            p = inout(reg) p,
            options(nostack, readonly, preserves_flags)
        );
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // SAFETY: the caller guarantees `p` addresses a readable, aligned word, derived from a
        // region whose provenance `link` exposed.
        p = unsafe { std::ptr::read_volatile(std::ptr::with_exposed_provenance::<usize>(p)) };
    }
    p
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A working set whose chase regions are first-touched on base pages (`build_on`): only a
    /// test that sets it builds that size, so tests running beside it are unaffected.
    pub(crate) static BASE_PAGES_WS: std::sync::atomic::AtomicU64 =
        std::sync::atomic::AtomicU64::new(u64::MAX);

    use hostbench_core::rng::derive as mix;

    use crate::latency::sweep::Walker;
    use crate::latency::MAX_CHAINS;
    use crate::sizing::KIB;

    /// The batched shuffle draws the same permutation as the plain Fisher–Yates loop it
    /// replaced, element for element.
    #[test]
    fn batched_walk_order_is_the_plain_shuffle() {
        fn plain(n: u32, seed: u64) -> Vec<u32> {
            let mut order: Vec<u32> = (0..n).collect();
            let mut rng = SplitMix64::new(seed);
            for i in (2..n as usize).rev() {
                let j = 1 + rng.below(i as u64) as usize;
                order.swap(i, j);
            }
            order
        }
        for n in [2u32, 3, 4, 31, 32, 33, 34, 64, 65, 1000, 65_537] {
            for seed in [0, 1, 0x6C61_7465] {
                assert_eq!(walk_order(n, seed), plain(n, seed), "n={n} seed={seed}");
            }
        }
    }

    #[test]
    fn walk_order_is_one_cycle_through_every_line_from_line_0() {
        for n in [2u32, 3, 4, 5, 16, 17, 255, 1000, 4096, 65_537] {
            for seed in 0..3 {
                let order = walk_order(n, seed);
                assert_eq!(order.len(), n as usize);
                assert_eq!(order[0], 0);
                let mut seen = vec![false; n as usize];
                for &line in &order {
                    assert!(!seen[line as usize], "n={n}: line {line} twice");
                    seen[line as usize] = true;
                }
            }
        }
    }

    #[test]
    fn walk_order_draws_every_cycle_equally_often() {
        // n = 4 has (4 - 1)! = 6 cycles; 6000 draws give each about 1000 (σ ≈ 29).
        let mut counts: HashMap<Vec<u32>, usize> = HashMap::new();
        for seed in 0..6000 {
            *counts.entry(walk_order(4, mix(99, seed))).or_default() += 1;
        }
        assert_eq!(counts.len(), 6);
        assert!(
            counts.values().all(|&c| (850..1150).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn chase_is_positive_and_lands_where_the_cycle_says() {
        let mut c =
            ChainSet::build(64 * KIB, Pages::Small, random_cycle(64 * KIB, 3).unwrap()).unwrap();
        let n = c.order.len() as u64;
        // Links follow the order, in memory.
        for k in 0..n {
            let word = c.addr_at(k) as *const usize;
            // SAFETY: addr_at is the address of a line of c.region, which is alive.
            assert_eq!(unsafe { word.read() }, c.addr_at(k + 1));
        }
        // A partial lap, a whole lap and more, with one chain and with several.
        for blocks in [1, n / UNROLL, 3 * n / UNROLL + 1] {
            let t = c.walk::<1>(blocks).unwrap();
            assert!(t.is_finite() && t > 0.0);
        }
        let t = c.walk::<4>(5).unwrap();
        assert!(t.is_finite() && t > 0.0);
        let t = c.walk::<MAX_CHAINS>(2).unwrap();
        assert!(t.is_finite() && t > 0.0);
    }

    #[test]
    fn a_broken_link_fails_validation() {
        let mut c =
            ChainSet::build(16 * KIB, Pages::Small, random_cycle(16 * KIB, 5).unwrap()).unwrap();
        c.walk::<1>(3).unwrap();
        // Make the line after chain 0's start point at itself: the chase gets stuck there.
        let stuck = c.order[((c.cursor + 1) % c.order.len() as u64) as usize] as usize;
        let base = c.base;
        words_mut(&mut c.region)[stuck * (LINE as usize / std::mem::size_of::<usize>())] =
            base + stuck * LINE as usize;
        let err = c.walk::<1>(c.order.len() as u64 / UNROLL).unwrap_err();
        assert!(matches!(err, BenchError::Validation(_)), "{err}");
        assert!(err.to_string().contains("chain 0"), "{err}");
        // Walker::walk dispatches too, and rejects chain counts without a loop.
        let mut w = Walker::Chase(c);
        assert!(matches!(w.walk(2, 1), Err(BenchError::Validation(_))));
        assert!(matches!(w.walk(0, 1), Err(BenchError::InvalidInput(_))));
        assert!(matches!(
            w.walk(MAX_CHAINS + 1, 1),
            Err(BenchError::InvalidInput(_))
        ));
    }
}
