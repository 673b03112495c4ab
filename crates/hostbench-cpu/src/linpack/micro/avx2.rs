//! The AVX2 + FMA micro-kernel: an 8 × 6 tile in 12 ymm accumulators, and the matching dot
//! product. On Zen 4 (two 256-bit FMA pipes) it reaches the same peak as AVX-512. Built on
//! x86-64 only (the parent declares the module for that target alone).

use super::Micro;

pub(in crate::linpack) struct Avx2;

impl Micro for Avx2 {
    const PACKED: bool = true;
    const MR: usize = 8;
    const NR: usize = 6;

    unsafe fn kernel(
        kc: usize,
        a: *const f64,
        b: *const f64,
        c: *mut f64,
        ldc: usize,
        mr: usize,
        nr: usize,
        store: bool,
        pf: *const f64,
    ) {
        // SAFETY: forwarded from the caller.
        unsafe { avx2_kernel(kc, a, b, c, ldc, mr, nr, store, pf) }
    }

    unsafe fn dot(a: &[f64], b: &[f64]) -> f64 {
        // SAFETY: forwarded from the caller.
        unsafe { avx2_dot(a, b) }
    }
}

/// 8 × 6 tile in 12 ymm accumulators, 2 loads of A and 6 broadcasts of B per k step. On
/// Zen 4 (two 256-bit FMA pipes) this reaches the same peak as AVX-512.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)] // fixed-size tile loops unroll
unsafe fn avx2_kernel(
    kc: usize,
    a: *const f64,
    b: *const f64,
    c: *mut f64,
    ldc: usize,
    mr: usize,
    nr: usize,
    store: bool,
    pf: *const f64,
) {
    use std::arch::x86_64::*;
    const MR: usize = 8;
    const NR: usize = 6;
    const MV: usize = MR / 4;
    // SAFETY: the caller guarantees AVX2 + FMA, the packed panels and the C tile (see `Micro`).
    unsafe {
        if !store {
            // C comes from memory far away; ask for it now, it is needed only at the end.
            for j in 0..NR {
                _mm_prefetch::<_MM_HINT_T0>(c.add(j * ldc) as *const i8);
            }
        }
        let mut acc = [[_mm256_setzero_pd(); MV]; NR];
        let (mut a, mut b) = (a, b);
        for kk in 0..kc {
            if !pf.is_null() {
                _mm_prefetch::<_MM_HINT_T0>(pf.add(kk * NR) as *const i8);
            }
            let mut av = [_mm256_setzero_pd(); MV];
            for i in 0..MV {
                av[i] = _mm256_load_pd(a.add(4 * i));
            }
            for j in 0..NR {
                let bj = _mm256_broadcast_sd(&*b.add(j));
                for i in 0..MV {
                    acc[j][i] = _mm256_fmadd_pd(av[i], bj, acc[j][i]);
                }
            }
            a = a.add(MR);
            b = b.add(NR);
        }
        if mr == MR && nr == NR {
            for j in 0..NR {
                for i in 0..MV {
                    let p = c.add(j * ldc + 4 * i);
                    let old = if store {
                        _mm256_setzero_pd()
                    } else {
                        _mm256_loadu_pd(p)
                    };
                    _mm256_storeu_pd(p, _mm256_sub_pd(old, acc[j][i]));
                }
            }
        } else {
            // Edge tile (bottom or right border): go through a small buffer.
            let mut t = [0.0f64; MR * NR];
            for j in 0..NR {
                for i in 0..MV {
                    _mm256_storeu_pd(t.as_mut_ptr().add(j * MR + 4 * i), acc[j][i]);
                }
            }
            for j in 0..nr {
                for i in 0..mr {
                    let p = c.add(j * ldc + i);
                    let old = if store { 0.0 } else { *p };
                    *p = old - t[j * MR + i];
                }
            }
        }
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_dot(a: &[f64], b: &[f64]) -> f64 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    // SAFETY: AVX2 + FMA present (caller); every access is below n.
    unsafe {
        let mut acc = [_mm256_setzero_pd(); 4];
        let mut i = 0;
        while i + 16 <= n {
            for (u, s) in acc.iter_mut().enumerate() {
                let x = _mm256_loadu_pd(pa.add(i + 4 * u));
                *s = _mm256_fmadd_pd(x, _mm256_loadu_pd(pb.add(i + 4 * u)), *s);
            }
            i += 16;
        }
        let s = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
        let mut lanes = [0.0f64; 4];
        _mm256_storeu_pd(lanes.as_mut_ptr(), s);
        let mut sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
        while i < n {
            sum += *pa.add(i) * *pb.add(i);
            i += 1;
        }
        sum
    }
}
