//! The host side of validation, shared by both backends.
//!
//! Compute: every work-item runs `chains × width` independent multiply-add recurrences
//! `x = x·a + b` for `STEPS` steps and writes one checksum of the bit patterns of its final
//! values, folded in order as `c = c·FNV_PRIME ^ bits` (a plain XOR cancels out over the regular
//! start values). Floating-point chains start at `0.5 + k·2⁻¹⁰` with `a = 1`, `b = 2⁻¹⁰`: every
//! intermediate value is a multiple of 2⁻¹⁰ below 2, which f16, f32 and f64 hold exactly, so the
//! result is bit-identical whether the device fuses the multiply-add or rounds twice, and the
//! host knows it in closed form. Integer chains use `a = 3`, `b = 7` and wrap; the host replays
//! them step by step. `a` and `b` are kernel arguments, so no compiler can fold the chain; the
//! start value depends on the work-item's parity so no compiler can treat it as uniform; and a
//! chain that was skipped or shortened changes the checksum.
//!
//! Memory: the read kernel's source and the copy source hold `pattern_u32` (or its top byte for
//! byte-granular blocks); the write kernel stores `element index + seed`; transfers carry
//! `pattern_byte` with a per-sample seed. Large buffers are checked in `windows`.

use hostbench_core::BenchError;

use crate::Dtype;

/// Multiply-adds per chain per launch. Bounded by f16: `0.999 + STEPS·2⁻¹⁰` must stay below 2.
pub const STEPS: u32 = 1024;
/// Largest `chains × width` (start values must stay below 1.0: `2k + 1 < 512`).
pub const MAX_LANES: u32 = 256;
/// The step `b` of floating-point chains, 2⁻¹⁰.
pub const FLOAT_B: f64 = 1.0 / 1024.0;
pub const INT_A: i32 = 3;
pub const INT_B: i32 = 7;

/// Start value number `k` (chain j, lane l: `k = j·width + l`) of a work-item of parity `p`.
pub fn start_index(k: u32, parity: u32) -> u32 {
    2 * k + parity
}

pub fn float_start(k: u32, parity: u32) -> f64 {
    0.5 + f64::from(start_index(k, parity)) * FLOAT_B
}

pub fn int_start(k: u32, parity: u32) -> i32 {
    start_index(k, parity) as i32 + 1
}

/// Bits of an exactly representable positive normal f64 as IEEE half.
fn f16_bits(x: f64) -> Result<u32, BenchError> {
    if !(6.2e-5..65504.0).contains(&x) {
        return Err(BenchError::Failed(format!("{x} is not a normal half")));
    }
    let e = x.log2().floor() as i32;
    let mant = x / 2f64.powi(e) - 1.0;
    let m = mant * 1024.0;
    if m.fract() != 0.0 {
        return Err(BenchError::Failed(format!("{x} is not exact in half")));
    }
    Ok((((e + 15) as u32) << 10) | m as u32)
}

/// The multiplier of the checksum fold (FNV-1's 32-bit prime).
pub const FNV_PRIME: u32 = 0x0100_0193;

pub fn fold(c: u32, bits: u32) -> u32 {
    c.wrapping_mul(FNV_PRIME) ^ bits
}

/// The checksum words of one final chain value of `dtype` (f64: low half, then high half).
fn final_bits(dtype: Dtype, k: u32, parity: u32, steps: u32) -> Result<Vec<u32>, BenchError> {
    Ok(match dtype {
        Dtype::F64 => {
            let x = float_start(k, parity) + f64::from(steps) * FLOAT_B;
            let b = x.to_bits();
            vec![b as u32, (b >> 32) as u32]
        }
        Dtype::F32 => {
            vec![((float_start(k, parity) + f64::from(steps) * FLOAT_B) as f32).to_bits()]
        }
        Dtype::F16 => vec![f16_bits(
            float_start(k, parity) + f64::from(steps) * FLOAT_B,
        )?],
        Dtype::I32 => {
            let mut x = int_start(k, parity);
            for _ in 0..steps {
                x = x.wrapping_mul(INT_A).wrapping_add(INT_B);
            }
            vec![x as u32]
        }
        Dtype::I8 => {
            let mut x = int_start(k, parity) as i8;
            for _ in 0..steps {
                x = x.wrapping_mul(INT_A as i8).wrapping_add(INT_B as i8);
            }
            vec![u32::from(x as u8)]
        }
    })
}

/// The two checksums a compute kernel may write: `[even work-items, odd work-items]`.
pub fn expected_checksums(
    dtype: Dtype,
    chains: u32,
    width: u32,
    steps: u32,
) -> Result<[u32; 2], BenchError> {
    if chains * width > MAX_LANES {
        return Err(BenchError::Failed(format!(
            "{chains} chains x {width} lanes exceed {MAX_LANES}"
        )));
    }
    let mut out = [0u32; 2];
    for (parity, slot) in out.iter_mut().enumerate() {
        for k in 0..chains * width {
            for w in final_bits(dtype, k, parity as u32, steps)? {
                *slot = fold(*slot, w);
            }
        }
    }
    Ok(out)
}

/// Little-endian 32-bit words of a buffer read back from a device (checksums, SM ids).
pub fn words(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Check every work-item's checksum.
pub fn check_checksums(out: &[u32], expected: [u32; 2], what: &str) -> Result<(), BenchError> {
    for (g, &v) in out.iter().enumerate() {
        let want = expected[g & 1];
        if v != want {
            return Err(BenchError::Validation(format!(
                "{what}: work-item {g} wrote {v:#010x}, the host replay gives {want:#010x}"
            )));
        }
    }
    Ok(())
}

/// The source data of the read and copy kernels, per 32-bit element.
pub fn pattern_u32(e: u64) -> u32 {
    (e as u32).wrapping_mul(0x9E37_79B1) ^ 0x5BD1_E995
}

/// The same data for byte-granular buffers.
pub fn pattern_u8(e: u64) -> u8 {
    (pattern_u32(e) >> 24) as u8
}

/// The element the memory kernels move for a block: 32-bit words where the block is whole words,
/// else bytes.
pub fn element_bytes(block: u64) -> usize {
    if block.is_multiple_of(4) {
        4
    } else {
        1
    }
}

/// Fill a byte buffer with the read/copy source: 32-bit elements when `elem == 4`, else bytes.
pub fn fill_source(buf: &mut [u8], elem: usize) {
    if elem == 4 {
        for (e, c) in buf.chunks_exact_mut(4).enumerate() {
            c.copy_from_slice(&pattern_u32(e as u64).to_le_bytes());
        }
    } else {
        for (e, b) in buf.iter_mut().enumerate() {
            *b = pattern_u8(e as u64);
        }
    }
}

/// Wrapping sum of all elements of the source, as the read kernel's per-work-item sums add up.
pub fn source_sum(elems: u64, elem: usize) -> u32 {
    (0..elems).fold(0u32, |acc, e| {
        acc.wrapping_add(if elem == 4 {
            pattern_u32(e)
        } else {
            u32::from(pattern_u8(e))
        })
    })
}

/// What the write kernel stores in element `e`: `e + seed`, truncated to the element width.
pub fn written(e: u64, seed: u32, elem: usize) -> u32 {
    let v = (e as u32).wrapping_add(seed);
    if elem == 4 {
        v
    } else {
        v & 0xFF
    }
}

/// Check bytes `[offset, offset + got.len())` of a written buffer.
pub fn check_written(got: &[u8], offset: u64, seed: u32, elem: usize) -> Result<(), BenchError> {
    let first = offset / elem as u64;
    for (i, c) in got.chunks_exact(elem).enumerate() {
        let v = if elem == 4 {
            u32::from_le_bytes([c[0], c[1], c[2], c[3]])
        } else {
            u32::from(c[0])
        };
        let e = first + i as u64;
        let want = written(e, seed, elem);
        if v != want {
            return Err(BenchError::Validation(format!(
                "write kernel: element {e} holds {v:#x}, expected {want:#x}"
            )));
        }
    }
    Ok(())
}

/// Check bytes of a copy destination against the source pattern.
pub fn check_source(got: &[u8], offset: u64, elem: usize, what: &str) -> Result<(), BenchError> {
    let mut want = vec![0u8; got.len()];
    if elem == 4 {
        let first = offset / 4;
        for (i, c) in want.chunks_exact_mut(4).enumerate() {
            c.copy_from_slice(&pattern_u32(first + i as u64).to_le_bytes());
        }
    } else {
        for (i, b) in want.iter_mut().enumerate() {
            *b = pattern_u8(offset + i as u64);
        }
    }
    match got.iter().zip(&want).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(i) => Err(BenchError::Validation(format!(
            "{what}: byte {} is {:#04x}, expected {:#04x}",
            offset + i as u64,
            got[i],
            want[i]
        ))),
    }
}

/// Transfer payload byte `e` for sample `seed`.
pub fn pattern_byte(e: u64, seed: u32) -> u8 {
    ((e as u32)
        .wrapping_mul(0x9E37_79B1)
        .wrapping_add(seed.wrapping_mul(0x85EB_CA6B))
        >> 24) as u8
}

pub fn fill_bytes(buf: &mut [u8], offset: u64, seed: u32) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern_byte(offset + i as u64, seed);
    }
}

pub fn check_bytes(got: &[u8], offset: u64, seed: u32, what: &str) -> Result<(), BenchError> {
    match got
        .iter()
        .enumerate()
        .find(|(i, &b)| b != pattern_byte(offset + *i as u64, seed))
    {
        None => Ok(()),
        Some((i, &b)) => Err(BenchError::Validation(format!(
            "{what}: byte {} is {b:#04x}, expected {:#04x}",
            offset + i as u64,
            pattern_byte(offset + i as u64, seed)
        ))),
    }
}

/// Byte ranges to read back from a buffer of `len` bytes: all of it up to 64 MiB, else 64
/// windows of 64 KiB spread over it plus the last window (aligned to `align`).
pub fn windows(len: u64, align: u64) -> Vec<(u64, u64)> {
    const FULL: u64 = 64 << 20;
    const WIN: u64 = 64 << 10;
    if len <= FULL {
        return vec![(0, len)];
    }
    let mut v: Vec<(u64, u64)> = (0..64)
        .map(|i| {
            let off = (len - WIN) / 64 * i / align * align;
            (off, WIN)
        })
        .collect();
    v.push((
        (len - WIN) / align * align,
        len - (len - WIN) / align * align,
    ));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_bits_are_ieee() {
        assert_eq!(f16_bits(1.0).unwrap(), 0x3C00);
        assert_eq!(f16_bits(0.5).unwrap(), 0x3800);
        assert_eq!(f16_bits(1.0 + 1.0 / 1024.0).unwrap(), 0x3C01);
        assert!(f16_bits(1.0 + 1.0 / 4096.0).is_err());
    }

    #[test]
    fn float_chains_stay_exact_in_every_precision() {
        // The largest value any chain reaches must be exact in f16 (11 significant bits).
        let top = float_start(MAX_LANES - 1, 1) + f64::from(STEPS) * FLOAT_B;
        assert!(top < 2.0, "{top}");
        assert!(f16_bits(top).is_ok());
        // A float replay step by step agrees with the closed form, fused or not.
        let mut x = float_start(5, 1) as f32;
        for _ in 0..STEPS {
            x = x.mul_add(1.0, FLOAT_B as f32);
        }
        let closed = final_bits(Dtype::F32, 5, 1, STEPS).unwrap()[0];
        assert_eq!(x.to_bits(), closed);
        let mut y = float_start(5, 1) as f32;
        for _ in 0..STEPS {
            y = y * 1.0 + FLOAT_B as f32;
        }
        assert_eq!(y.to_bits(), closed);
    }

    #[test]
    fn checksums_detect_a_short_chain_and_differ_by_parity() {
        for d in Dtype::ALL {
            let full = expected_checksums(d, 8, 4, STEPS).unwrap();
            let short = expected_checksums(d, 8, 4, STEPS - 1).unwrap();
            assert_ne!(full, short, "{d:?}");
            assert_ne!(full[0], full[1], "{d:?}");
        }
        let e = expected_checksums(Dtype::F32, 2, 1, STEPS).unwrap();
        assert!(check_checksums(&[e[0], e[1], e[0]], e, "t").is_ok());
        assert!(matches!(
            check_checksums(&[e[0], e[0]], e, "t"),
            Err(BenchError::Validation(m)) if m.contains("work-item 1")
        ));
        assert!(expected_checksums(Dtype::F32, 32, 16, STEPS).is_err());
    }

    #[test]
    fn memory_patterns_round_trip() {
        let mut b = vec![0u8; 64];
        fill_source(&mut b, 4);
        assert!(check_source(&b, 0, 4, "copy").is_ok());
        assert!(check_source(&b[8..], 8, 4, "copy").is_ok());
        b[9] ^= 1;
        assert!(check_source(&b, 0, 4, "copy").is_err());
        let sum: u32 = (0..16u64).fold(0, |a, e| a.wrapping_add(pattern_u32(e)));
        assert_eq!(source_sum(16, 4), sum);
        let w: Vec<u8> = (0..8u64).map(|e| written(e, 250, 1) as u8).collect();
        assert!(check_written(&w, 0, 250, 1).is_ok());
        assert_eq!(w[7], 1); // 7 + 250 wraps in a byte
        let mut t = vec![0u8; 100];
        fill_bytes(&mut t, 1000, 3);
        assert!(check_bytes(&t, 1000, 3, "h2d").is_ok());
        assert!(check_bytes(&t, 1000, 4, "h2d").is_err());
    }

    #[test]
    fn large_buffers_are_checked_in_aligned_windows_to_the_end() {
        assert_eq!(windows(1000, 4), vec![(0, 1000)]);
        let len = (1u64 << 30) + 12;
        let w = windows(len, 64);
        assert_eq!(w.len(), 65);
        assert!(w.iter().all(|(o, _)| o % 64 == 0));
        let (o, l) = w[64];
        assert_eq!(o + l, len);
    }
}
