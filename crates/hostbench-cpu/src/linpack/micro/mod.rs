//! The micro-kernels per ISA: packed register-tile GEMM kernels, BLIS style, behind the
//! [`Micro`] trait, and the choice between them at run time ([`Backend`]).
//!
//! AVX-512 (24 × 8 tile, `avx512`) or AVX2 + FMA (8 × 6, `avx2`), chosen at run time, so the
//! binary still runs on any x86-64. Without either (or off x86-64) the same blocked algorithm
//! calls faer's `matmul` and triangular solve instead ([`FaerOnly`]). A slow portable 4 × 4
//! kernel (`Scalar`) exists in tests only, to exercise the packed path on any machine.

#[cfg(target_arch = "x86_64")]
mod avx2;
/// The AVX-512 kernel (x86-64 only; elsewhere a stub that never reports AVX-512).
#[cfg(target_arch = "x86_64")]
pub(super) mod avx512;

#[cfg(target_arch = "x86_64")]
pub(super) use avx2::Avx2;

/// Which implementation of the block operations a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Backend {
    /// faer's `matmul` and triangular solve on the blocks (any target).
    Faer,
    /// Packed 8 × 6 AVX2 + FMA micro-kernel.
    Avx2,
    /// Packed 24 × 8 AVX-512 micro-kernel.
    Avx512,
    /// Packed 4 × 4 scalar micro-kernel: slow, only for testing the packed path anywhere.
    #[cfg(test)]
    Scalar,
}

impl Backend {
    pub(super) fn best() -> Self {
        if avx512::available() {
            Backend::Avx512
        } else if avx2_available() {
            Backend::Avx2
        } else {
            Backend::Faer
        }
    }
}

pub(super) fn avx2_available() -> bool {
    hostbench_core::isa::avx2_fma()
}

/// A register-tile GEMM kernel and the matching dot product.
///
/// Packed operands: the "A" side in panels of `MR` rows stored k-major (`MR` values per k step),
/// the "B" side in panels of `NR` columns stored k-major (`NR` values per k step), both
/// zero-padded to whole panels and 64-byte aligned.
pub(super) trait Micro {
    /// False for the faer fallback, which works on the unpacked blocks.
    const PACKED: bool;
    const MR: usize;
    const NR: usize;

    /// `C[..mr, ..nr] −= A·B` over `kc` k steps, or `C = −A·B` when `store`; `C` column-major
    /// with stride `ldc`. `pf`, when not null, is the next B panel, fetched into L1 meanwhile.
    ///
    /// # Safety
    /// The CPU has the kernel's instruction set; `a` and `b` hold `kc` packed steps (aligned);
    /// `c` is valid for the `mr × nr` tile (`mr ≤ MR`, `nr ≤ NR`) and not accessed concurrently.
    #[allow(clippy::too_many_arguments)] // a BLAS-style micro-kernel signature
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
    );

    /// `Σ a[i]·b[i]` over the shorter length.
    ///
    /// # Safety
    /// The CPU has the kernel's instruction set.
    unsafe fn dot(a: &[f64], b: &[f64]) -> f64;
}

fn dot_portable(a: &[f64], b: &[f64]) -> f64 {
    // eight partial sums: vectorisable, and more accurate than one long chain
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// The faer fallback: never packs, so it has no micro-kernel.
pub(super) struct FaerOnly;

impl Micro for FaerOnly {
    const PACKED: bool = false;
    const MR: usize = 8;
    const NR: usize = 8;

    unsafe fn kernel(
        _kc: usize,
        _a: *const f64,
        _b: *const f64,
        _c: *mut f64,
        _ldc: usize,
        _mr: usize,
        _nr: usize,
        _store: bool,
        _pf: *const f64,
    ) {
        // Unreachable: `PACKED` is false, so `update_cols` takes the faer branch.
    }

    unsafe fn dot(a: &[f64], b: &[f64]) -> f64 {
        dot_portable(a, b)
    }
}

#[cfg(test)]
pub(super) struct Scalar;

#[cfg(test)]
impl Micro for Scalar {
    const PACKED: bool = true;
    const MR: usize = 4;
    const NR: usize = 4;

    unsafe fn kernel(
        kc: usize,
        a: *const f64,
        b: *const f64,
        c: *mut f64,
        ldc: usize,
        mr: usize,
        nr: usize,
        store: bool,
        _pf: *const f64,
    ) {
        let mut acc = [[0.0f64; 4]; 4];
        for kk in 0..kc {
            for (j, col) in acc.iter_mut().enumerate() {
                for (i, v) in col.iter_mut().enumerate() {
                    // SAFETY: the packed panels hold kc steps of MR and NR values.
                    *v += unsafe { *a.add(kk * 4 + i) * *b.add(kk * 4 + j) };
                }
            }
        }
        for (j, col) in acc.iter().enumerate().take(nr) {
            for (i, v) in col.iter().enumerate().take(mr) {
                // SAFETY: the tile is inside C (caller's contract).
                unsafe {
                    let p = c.add(j * ldc + i);
                    *p = if store { -v } else { *p - v };
                }
            }
        }
    }

    unsafe fn dot(a: &[f64], b: &[f64]) -> f64 {
        dot_portable(a, b)
    }
}

/// Stand-in for compilers too old for the AVX-512 intrinsics, and for other architectures:
/// it never reports AVX-512, so the run picks AVX2 or faer.
#[allow(unused_macros)] // unused where the real module is built
macro_rules! avx512_stub {
    () => {
        pub fn available() -> bool {
            false
        }

        pub(in crate::linpack) fn factor_and_solve(
            _sys: &mut crate::linpack::system::System,
            _workers: crate::linpack::lu::Workers,
            _progress: crate::linpack::lu::Progress<'_>,
        ) -> Result<crate::linpack::lu::Solved, hostbench_core::BenchError> {
            Err(hostbench_core::BenchError::unsupported(
                "the AVX-512 linpack kernel exists on x86-64 only",
            ))
        }
    };
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) mod avx512 {
    avx512_stub!();
}
