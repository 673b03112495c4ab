//! The order blocks are visited in: sequential, or a pseudo-random permutation that visits every
//! block exactly once per pass without storing the permutation.
//!
//! A stored permutation of 1-byte blocks over a 1 GiB working set would itself be 8 GiB, so the
//! random order is computed: a bijective integer mix on the next power of two above the block
//! count, with "cycle walking" past values that fall outside the range (on average fewer than two
//! tries). Each position is computed from the counter alone, not from the previous position, so
//! the CPU can overlap the misses of consecutive random blocks the way the hardware would for any
//! independent random accesses — this measures random-access *throughput*; the dependent case is
//! the latency benchmark's job.

hostbench_core::named_enum! {
    /// Block visit order.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Pattern("pattern") {
        Seq = "seq" | "sequential",
        Random = "random" | "rand",
    }
}

/// A permutation of `0..n` computed position by position.
#[derive(Debug, Clone, Copy)]
pub struct Permutation {
    n: u64,
    bits: u32,
    mask: u64,
    key: u64,
}

impl Permutation {
    /// A permutation of `0..n` (n ≥ 1) chosen by `seed`.
    pub fn new(n: u64, seed: u64) -> Self {
        let n = n.max(1);
        let bits = (64 - (n - 1).leading_zeros()).max(2);
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        Self {
            n,
            bits,
            mask,
            key: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        }
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// A bijection of `0..2^bits`: xor-shift, odd multiply and add modulo 2^bits are each
    /// invertible, so their composition is too.
    #[inline(always)]
    fn mix(&self, mut x: u64) -> u64 {
        let half = self.bits / 2;
        x = (x ^ self.key) & self.mask;
        x = (x ^ (x >> half)) & self.mask;
        x = x.wrapping_mul(0xD6E8_FEB8_6659_FD93) & self.mask;
        x = (x ^ (x >> (half + 1).min(self.bits - 1))) & self.mask;
        x = x.wrapping_add(self.key >> 7) & self.mask;
        x = x.wrapping_mul(0x9FB2_1C65_1E98_DF25) & self.mask;
        (x ^ (x >> half)) & self.mask
    }

    /// Size of the counter domain (the power of two the mix permutes); positions are counters in
    /// `0..domain()`, and only those mapping below `len()` are blocks.
    pub fn domain(&self) -> u64 {
        self.mask.wrapping_add(1)
    }

    /// The block at counter `c` (taken modulo the domain), or `None` when the counter maps
    /// outside `0..n` and is skipped.
    #[inline(always)]
    pub fn at(&self, c: u64) -> Option<u64> {
        let v = self.mix(c & self.mask);
        (v < self.n).then_some(v)
    }

    /// Iterate the permutation: every value of `0..n` exactly once.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let domain = self.mask.wrapping_add(1);
        let end = if domain == 0 { u64::MAX } else { domain };
        (0..end).map(|i| self.mix(i)).filter(|&v| v < self.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_block_is_visited_exactly_once() {
        for n in [1u64, 2, 3, 7, 64, 1000, 4097, 65_536] {
            let p = Permutation::new(n, 42);
            let mut seen = vec![false; n as usize];
            let mut count = 0;
            for v in p.iter() {
                assert!(!seen[v as usize], "n={n}: {v} twice");
                seen[v as usize] = true;
                count += 1;
            }
            assert_eq!(count, n, "n={n}");
        }
    }

    #[test]
    fn random_order_is_not_sequential() {
        let p = Permutation::new(1 << 16, 7);
        let v: Vec<u64> = p.iter().take(1000).collect();
        let ascending = v.windows(2).filter(|w| w[1] == w[0] + 1).count();
        assert!(ascending < 10, "{ascending} sequential steps");
        // Jumps span the whole range, not a neighbourhood.
        let far = v
            .windows(2)
            .filter(|w| w[0].abs_diff(w[1]) > 1 << 12)
            .count();
        assert!(far > 800, "{far}");
        assert_ne!(Permutation::new(1 << 16, 8).iter().next(), p.iter().next());
    }
}
