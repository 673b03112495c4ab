//! The AVX-512 micro-kernel: a 24 × 8 tile in 24 zmm accumulators (of 32), the matching dot
//! product, and the entry point that factors and solves with it once the CPU is known to have
//! AVX-512F. Built on x86-64 only; elsewhere the parent puts a stub in its place that never
//! reports AVX-512.

use std::arch::x86_64::*;

use hostbench_core::BenchError;

use super::Micro;
use crate::linpack::lu::{factor_and_solve_with, Progress, Solved, Workers};
use crate::linpack::system::System;

pub fn available() -> bool {
    hostbench_core::isa::avx512f()
}

pub struct Avx512;

const MV: usize = 3;

impl Micro for Avx512 {
    const PACKED: bool = true;
    const MR: usize = 8 * MV;
    const NR: usize = 8;

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
        unsafe { kernel(kc, a, b, c, ldc, mr, nr, store, pf) }
    }

    unsafe fn dot(a: &[f64], b: &[f64]) -> f64 {
        // SAFETY: forwarded from the caller.
        unsafe { dot(a, b) }
    }
}

/// 24 × 8 tile in 24 zmm accumulators (of 32), 3 loads of A and 8 broadcasts of B per
/// k step: a B element feeds three FMAs, which keeps the load ports well below the FMA rate.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)] // fixed-size tile loops
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
    const MR: usize = 8 * MV;
    const NR: usize = 8;
    // SAFETY: the caller guarantees AVX-512F, the packed panels and the C tile.
    unsafe {
        if !store {
            // C comes from memory far away; ask for it now, it is needed only at the end.
            for j in 0..NR {
                for i in 0..MV {
                    _mm_prefetch::<_MM_HINT_T0>(c.add(j * ldc + 8 * i) as *const i8);
                }
            }
        }
        let mut acc = [[_mm512_setzero_pd(); MV]; NR];
        let (mut a, mut b) = (a, b);
        for kk in 0..kc {
            if !pf.is_null() {
                // The next B panel comes from L3; fetching one line of it per k step here
                // saves the stall on the first call that uses it.
                _mm_prefetch::<_MM_HINT_T0>(pf.add(kk * NR) as *const i8);
            }
            let mut av = [_mm512_setzero_pd(); MV];
            for i in 0..MV {
                av[i] = _mm512_load_pd(a.add(8 * i));
            }
            for j in 0..NR {
                let bj = _mm512_set1_pd(*b.add(j));
                for i in 0..MV {
                    acc[j][i] = _mm512_fmadd_pd(av[i], bj, acc[j][i]);
                }
            }
            a = a.add(MR);
            b = b.add(NR);
        }
        let zero = _mm512_setzero_pd();
        if mr == MR && nr == NR {
            for j in 0..NR {
                for i in 0..MV {
                    let p = c.add(j * ldc + 8 * i);
                    let old = if store { zero } else { _mm512_loadu_pd(p) };
                    _mm512_storeu_pd(p, _mm512_sub_pd(old, acc[j][i]));
                }
            }
        } else {
            // Edge tile: masked loads and stores cover the rows, a test the columns.
            let mut masks = [0u8; MV];
            for i in 0..MV {
                let lo = 8 * i;
                masks[i] = if mr >= lo + 8 {
                    0xff
                } else if mr <= lo {
                    0
                } else {
                    ((1u32 << (mr - lo)) - 1) as u8
                };
            }
            for j in 0..NR {
                if j < nr {
                    for i in 0..MV {
                        let p = c.add(j * ldc + 8 * i);
                        let old = if store {
                            zero
                        } else {
                            _mm512_maskz_loadu_pd(masks[i], p)
                        };
                        _mm512_mask_storeu_pd(p, masks[i], _mm512_sub_pd(old, acc[j][i]));
                    }
                }
            }
        }
    }
}

#[target_feature(enable = "avx512f")]
unsafe fn dot(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    // SAFETY: AVX-512F present (caller); every access is below n.
    unsafe {
        let mut acc = [_mm512_setzero_pd(); 4];
        let mut i = 0;
        while i + 32 <= n {
            for (u, s) in acc.iter_mut().enumerate() {
                let x = _mm512_loadu_pd(pa.add(i + 8 * u));
                *s = _mm512_fmadd_pd(x, _mm512_loadu_pd(pb.add(i + 8 * u)), *s);
            }
            i += 32;
        }
        while i + 8 <= n {
            let x = _mm512_loadu_pd(pa.add(i));
            acc[0] = _mm512_fmadd_pd(x, _mm512_loadu_pd(pb.add(i)), acc[0]);
            i += 8;
        }
        if i < n {
            let m = ((1u32 << (n - i)) - 1) as u8;
            let x = _mm512_maskz_loadu_pd(m, pa.add(i));
            acc[1] = _mm512_fmadd_pd(x, _mm512_maskz_loadu_pd(m, pb.add(i)), acc[1]);
        }
        let s = _mm512_add_pd(_mm512_add_pd(acc[0], acc[1]), _mm512_add_pd(acc[2], acc[3]));
        _mm512_reduce_add_pd(s)
    }
}

/// Factor and solve with this kernel.
pub(in crate::linpack) fn factor_and_solve(
    sys: &mut System,
    workers: Workers,
    progress: Progress<'_>,
) -> Result<Solved, BenchError> {
    if !available() {
        return Err(BenchError::unsupported("this CPU has no AVX-512"));
    }
    factor_and_solve_with::<Avx512>(sys, workers, progress)
}
