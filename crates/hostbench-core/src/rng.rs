//! The one pseudo-random generator every subsystem uses: splitmix64.
//!
//! Benchmarks need randomness that is cheap (it sits beside the measured loop), well mixed (random
//! offsets must not alias into a few cache sets or disk stripes, and data must not compress), and
//! reproducible per seed (a run's access order can be replayed). splitmix64 has all three in four
//! lines, passes BigCrush, and its finaliser alone (`mix64`) is a counter-based generator: element
//! `i` of a stream is `mix64(seed + (i + 1)·γ)`, drawn independently of the others, which lets
//! threads fill disjoint parts of one array without sharing state. Not for anything secret: the
//! network's authentication uses the OS's randomness.

/// The golden-ratio increment of splitmix64 (an odd constant, so the counter visits all 2^64).
pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64's output function: a bijective, statistically strong 64-bit mix.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// An independent seed derived from two values (a run seed and a thread or block index).
#[inline]
pub fn derive(a: u64, b: u64) -> u64 {
    SplitMix64::new(a ^ b.wrapping_mul(0xD1B5_4A32_D192_ED03)).next_u64()
}

/// The splitmix64 generator.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        mix64(self.0)
    }

    /// Uniform in `[0, n)` for `n ≥ 1`: Lemire's multiply-shift with the rejection step, so no
    /// value is favoured (plain `% n` would be, slightly).
    pub fn below(&mut self, n: u64) -> u64 {
        let n = n.max(1);
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }

    /// Fill `buf` with generator output (incompressible bytes).
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }

    /// Shuffle `v` in place (Fisher–Yates, unbiased through `below`).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_splitmix64_stream() {
        // The first outputs of splitmix64 seeded with 1234567 (Vigna's reference implementation).
        let mut r = SplitMix64::new(1234567);
        assert_eq!(r.next_u64(), 6457827717110365317);
        assert_eq!(r.next_u64(), 3203168211198807973);
        assert_eq!(r.next_u64(), 9817491932198370423);
    }

    #[test]
    fn counter_form_equals_the_stream() {
        let seed = 99;
        let mut r = SplitMix64::new(seed);
        for i in 0..5u64 {
            assert_eq!(
                r.next_u64(),
                mix64(seed.wrapping_add((i + 1).wrapping_mul(GAMMA)))
            );
        }
    }

    #[test]
    fn below_stays_in_range_and_shuffle_is_a_permutation() {
        let mut r = SplitMix64::new(7);
        for n in [1u64, 2, 3, 1000, u64::MAX] {
            for _ in 0..100 {
                assert!(r.below(n) < n);
            }
        }
        let mut v: Vec<u32> = (0..1000).collect();
        r.shuffle(&mut v);
        assert_ne!(v, (0..1000).collect::<Vec<_>>());
        v.sort_unstable();
        assert_eq!(v, (0..1000).collect::<Vec<_>>());
        let mut buf = [0u8; 13];
        r.fill(&mut buf);
        assert!(buf.iter().any(|&b| b != 0));
    }
}
