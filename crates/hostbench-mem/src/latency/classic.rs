//! The classic 1-byte sequential and random access latency, the tinymembench way: an all-zero
//! buffer where every address is `next offset + previous loaded byte`, a true data dependency
//! that costs one add.
//!
//! `seq` walks consecutive bytes (mostly the L1 load-to-use time behind the prefetcher);
//! `random` takes its offsets from counter-based permutations, fresh ones for every round, so
//! no sample revisits the previous one's bytes. A walk fails unless every loaded byte was zero.

use std::time::Instant;

use hostbench_core::rng::derive as mix;
use hostbench_core::BenchError;

use super::{region_len, PAD, UNROLL};
use crate::buffer::{Pages, Region};
use crate::order::Permutation;

/// The 1-byte working set: all zeros, so a loaded byte adds nothing to the next address but the
/// dependency.
pub(crate) struct ByteSet {
    /// Invariant: at least `ws + PAD` bytes, all zero.
    pub(super) region: Region,
    pub(super) ws: usize,
    random: bool,
    seed: u64,
    /// Sequential position of chain 0 for the next walk.
    cursor: usize,
    /// Permutations used so far: every round of random offsets draws a fresh one.
    epoch: u64,
}

impl ByteSet {
    pub(super) fn build(
        ws: u64,
        pages: Pages,
        random: bool,
        seed: u64,
    ) -> Result<Self, BenchError> {
        let mut region = Region::new(region_len(ws, pages, PAD)?, pages)?;
        region.touch();
        // `touch` leaves a 1 on every page; the dependency trick needs zeros everywhere.
        region.as_mut_slice().fill(0);
        Ok(Self {
            region,
            ws: ws as usize,
            random,
            seed,
            cursor: 0,
            epoch: 0,
        })
    }

    pub(super) fn walk<const K: usize>(&mut self, blocks: u64) -> Result<f64, BenchError> {
        let steps = blocks * UNROLL;
        let ws = self.ws;
        let t0 = Instant::now();
        let acc = if self.random {
            let mut dep = [0usize; K];
            let mut left = steps;
            let mut any = 0u8;
            while left > 0 {
                // A permutation yields each offset once; a longer walk takes fresh ones, and
                // every sample gets new ones, so no sample revisits the previous one's bytes.
                let take = left.min(ws as u64);
                let (seed, epoch) = (self.seed, self.epoch);
                let perms: [Permutation; K] = std::array::from_fn(|c| {
                    Permutation::new(ws as u64, mix(seed, epoch * K as u64 + c as u64))
                });
                self.epoch += 1;
                let mut its = perms.each_ref().map(|p| p.iter());
                any |= self.random_kernel(&mut its, &mut dep, take);
                left -= take;
            }
            any
        } else {
            let start: [usize; K] = std::array::from_fn(|c| (self.cursor + c * (ws / K)) % ws);
            self.seq_kernel(start, steps)
        };
        let secs = t0.elapsed().as_secs_f64();
        if acc != 0 {
            return Err(BenchError::Validation(format!(
                "1-byte walk loaded non-zero bits {acc:#04x} from a buffer that must be all \
                 zeros: the memory was corrupted"
            )));
        }
        if !self.random {
            self.cursor = ((self.cursor as u64 + steps) % ws as u64) as usize;
        }
        Ok(secs)
    }

    /// Consecutive bytes from `off[c]` (wrapping at the working set); returns the OR of every
    /// byte loaded.
    #[inline(never)]
    fn seq_kernel<const K: usize>(&self, mut off: [usize; K], steps: u64) -> u8 {
        let base = self.region.as_ptr();
        let ws = self.ws;
        let mut dep = [0usize; K];
        let mut acc = 0u8;
        for _ in 0..steps {
            for (o, d) in off.iter_mut().zip(dep.iter_mut()) {
                // SAFETY: `*o < ws` and `*d` is a byte (< PAD), and the region holds at least
                // `ws + PAD` bytes (struct invariant), so the read stays inside it.
                let v = unsafe { base.add(*o + *d).read_volatile() };
                acc |= v;
                *d = usize::from(v);
                *o += 1;
                if *o == ws {
                    *o = 0;
                }
            }
        }
        acc
    }

    /// `steps` bytes per chain at the offsets the iterators yield; returns the OR of every byte
    /// loaded.
    #[inline(never)]
    fn random_kernel<const K: usize, I: Iterator<Item = u64>>(
        &self,
        its: &mut [I; K],
        dep: &mut [usize; K],
        steps: u64,
    ) -> u8 {
        let base = self.region.as_ptr();
        let last = self.ws - 1;
        let mut acc = 0u8;
        for _ in 0..steps {
            for (it, d) in its.iter_mut().zip(dep.iter_mut()) {
                // The caller takes at most one permutation's worth, so `next` always yields; the
                // clamp keeps the read in bounds whatever the iterator does, off the dependent
                // path (it does not involve the loaded byte).
                let o = (it.next().unwrap_or(0) as usize).min(last);
                // SAFETY: `o < ws` and `*d` is a byte (< PAD), and the region holds at least
                // `ws + PAD` bytes (struct invariant), so the read stays inside it.
                let v = unsafe { base.add(o + *d).read_volatile() };
                acc |= v;
                *d = usize::from(v);
            }
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizing::KIB;

    #[test]
    fn byte_walks_run_and_a_non_zero_byte_fails() {
        for random in [false, true] {
            let mut b = ByteSet::build(8 * KIB, Pages::Small, random, 1).unwrap();
            assert!(b.walk::<1>(4).unwrap() > 0.0);
            // More than one permutation's worth in one walk.
            assert!(b.walk::<3>(8 * KIB / UNROLL + 7).unwrap() > 0.0);
            b.region.as_mut_slice()[100] = 1;
            let err = b.walk::<1>(2 * 8 * KIB / UNROLL).unwrap_err();
            assert!(matches!(err, BenchError::Validation(_)), "{err}");
        }
    }
}
