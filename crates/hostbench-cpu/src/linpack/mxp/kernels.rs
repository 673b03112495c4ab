//! The packed GEMM kernels of the low-precision LU, BLIS style, behind [`Gemm`]: an f32 kernel
//! for the triangular multiplies (`L₂₁ = A₂₁ U₁₁⁻¹`, `U₁₂ = L₁₁⁻¹ A₁₂`) and, for the trailing
//! update, either the same f32 kernel or a bf16 one whose products are summed in f32.
//!
//! Packed operands: the "A" side in panels of `MR` rows stored k-major (`MR` elements per
//! packed k step), the "B" side in panels of `NR` columns stored k-major (`NR` elements per
//! step), zero-padded to whole panels. An element holds `KP` consecutive k values: one f32, or
//! a pair of bf16 in one `u32` (the low half the first), which is the operand layout of
//! `vdpbf16ps`: each f32 lane gains `a₀b₀ + a₁b₁` from the pair in the same lane of each source.
//! `C` is f32, column-major with stride `ldc`.
//!
//! Kernels: AVX-512F f32 (32 × 12 tile) and AVX-512 BF16 (32 × 12, `vdpbf16ps` with the B pair
//! broadcast), AVX2 + FMA f32 (16 × 6), and a portable f32 one (8 × 4, plain loops) for every
//! other CPU. Tests add a portable emulation of the bf16 kernel, so the bf16 algorithm is
//! exercised on CPUs without the instruction.

/// A packed GEMM kernel: `C[..mr, ..nr] −= A·B`, or `C = A·B` when `store`.
pub(in crate::linpack) trait Gemm: Sync {
    /// Packed element: an f32, or two bf16 in a u32.
    type P: Copy + Default + Send + Sync;
    const MR: usize;
    const NR: usize;
    /// k values per packed element.
    const KP: usize;
    /// The instruction set and data type, for the record.
    const NAME: &'static str;
    /// Packed steps are padded to a multiple of this (AMX tiles take 16 steps at a time).
    const KS_ALIGN: usize = 1;
    /// The B side stored lane-major (each column's steps contiguous, as an AMX tile row wants)
    /// instead of k-major.
    const B_LANE_MAJOR: bool = false;

    /// `KP` consecutive k values (missing ones are zero) as one packed element.
    fn pack(v: &[f32]) -> Self::P;

    /// The same for the B side (AMX packs B negated, since its tiles only accumulate).
    fn pack_b_elem(v: &[f32]) -> Self::P {
        Self::pack(v)
    }

    /// Called by a thread before a run of [`Gemm::kernel`] calls, and [`Gemm::end`] after
    /// (AMX configures and releases its tiles there).
    ///
    /// # Safety
    /// The CPU has the kernel's instruction set.
    unsafe fn begin() {}
    /// # Safety
    /// After [`Gemm::begin`] on the same thread.
    unsafe fn end() {}

    /// # Safety
    /// The CPU has the kernel's instruction set; `a` and `b` hold `ks` packed steps of `MR`
    /// and `NR` elements; `c` is valid for the `mr × nr` tile (`mr ≤ MR`, `nr ≤ NR`) with
    /// stride `ldc` and not accessed concurrently.
    #[allow(clippy::too_many_arguments)] // a BLAS-style micro-kernel signature
    unsafe fn kernel(
        ks: usize,
        a: *const Self::P,
        b: *const Self::P,
        c: *mut f32,
        ldc: usize,
        mr: usize,
        nr: usize,
        store: bool,
    );
}

/// `f32` → bf16 bits, rounding to nearest even (what `vcvtneps2bf16` does; a NaN stays a NaN).
/// Only the x86-64 bf16 kernel (and the tests' emulation) packs bf16.
#[cfg(any(target_arch = "x86_64", test))]
pub(in crate::linpack) fn bf16_bits(v: f32) -> u16 {
    let bits = v.to_bits();
    if v.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    let round = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(round) >> 16) as u16
}

/// Packed steps covering `kc` k values.
pub(in crate::linpack) fn steps<G: Gemm>(kc: usize) -> usize {
    kc.div_ceil(G::KP).next_multiple_of(G::KS_ALIGN)
}

/// Pack `extent` lanes (rows of an A operand, columns of a B one) × k values [0, kc) into
/// panels of `width` lanes, k-major: element `(lane, kk)` is `at(lane, kk)`, zero beyond the
/// edges.
///
/// # Safety
/// `at` reads inside its block for lane < extent and kk < kc; `dst` holds
/// `ceil(extent / width)·width·steps(kc)` elements.
unsafe fn pack_panels<G: Gemm>(
    dst: *mut G::P,
    width: usize,
    extent: usize,
    kc: usize,
    b_side: bool,
    at: impl Fn(usize, usize) -> f32,
) {
    let lane_major = b_side && G::B_LANE_MAJOR;
    let (kp, ks) = (G::KP, steps::<G>(kc));
    let mut v = [0.0f32; 2];
    for ip in 0..extent.div_ceil(width) {
        let l0 = ip * width;
        let lanes = width.min(extent - l0);
        for s in 0..ks {
            for l in 0..width {
                for (t, x) in v[..kp].iter_mut().enumerate() {
                    let kk = s * kp + t;
                    *x = if l < lanes && kk < kc {
                        at(l0 + l, kk)
                    } else {
                        0.0
                    };
                }
                let at = if lane_major {
                    (ip * width + l) * ks + s
                } else {
                    (ip * ks + s) * width + l
                };
                let e = if b_side {
                    G::pack_b_elem(&v[..kp])
                } else {
                    G::pack(&v[..kp])
                };
                // SAFETY: in range by the caller's contract.
                unsafe { *dst.add(at) = e };
            }
        }
    }
}

/// Pack rows [0, rows) × k values [0, kc) of the column-major block at `src` (stride `ld`) into
/// `MR`-row panels: `src(i, kk) = src[kk·ld + i]`.
///
/// # Safety
/// `src` covers the block; `dst` holds `ceil(rows / MR)·MR·steps(kc)` elements.
pub(in crate::linpack) unsafe fn pack_a<G: Gemm>(
    dst: *mut G::P,
    src: *const f32,
    ld: usize,
    rows: usize,
    kc: usize,
) {
    // SAFETY: forwarded from the caller.
    unsafe { pack_panels::<G>(dst, G::MR, rows, kc, false, |i, kk| *src.add(kk * ld + i)) }
}

/// Pack k values [0, kc) × columns [0, cols) of the column-major block at `src` (stride `ld`)
/// into `NR`-column panels: `src(kk, j) = src[j·ld + kk]`.
///
/// # Safety
/// `src` covers the block; `dst` holds `ceil(cols / NR)·NR·steps(kc)` elements.
pub(in crate::linpack) unsafe fn pack_b<G: Gemm>(
    dst: *mut G::P,
    src: *const f32,
    ld: usize,
    kc: usize,
    cols: usize,
) {
    // SAFETY: forwarded from the caller.
    unsafe { pack_panels::<G>(dst, G::NR, cols, kc, true, |j, kk| *src.add(j * ld + kk)) }
}

/// `HOSTBENCH_MXP_AMX=0`: leave the AMX kernel out of the choice (to measure the next unit on
/// an AMX CPU, or to rule it out).
#[cfg(target_arch = "x86_64")]
pub(in crate::linpack) fn amx_declined() -> bool {
    std::env::var("HOSTBENCH_MXP_AMX").is_ok_and(|v| v == "0")
}

/// `G`'s rate on this thread, FLOP/s: a 384 × 384 update over 256 k values (the LU's panel
/// width), repeated for about `budget`, the best of three. It compares kernels, not a solve.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(in crate::linpack) fn rate<G: Gemm>(budget: std::time::Duration) -> f64 {
    let (m, k, n) = (384, 256, 384);
    let val = |x: usize| ((x * 2_654_435_761) % 1000) as f32 / 1000.0 - 0.5;
    let a: Vec<f32> = (0..m * k).map(val).collect();
    let b: Vec<f32> = (0..k * n).map(|x| val(x + 7)).collect();
    let ks = steps::<G>(k);
    let mut ap = vec![G::P::default(); m.div_ceil(G::MR) * G::MR * ks];
    let mut bp = vec![G::P::default(); n.div_ceil(G::NR) * G::NR * ks];
    let mut c = vec![0.0f32; m * n];
    // SAFETY: the buffers are sized as the packers require.
    unsafe {
        pack_a::<G>(ap.as_mut_ptr(), a.as_ptr(), m, m, k);
        pack_b::<G>(bp.as_mut_ptr(), b.as_ptr(), k, k, n);
    }
    let mut best: f64 = 0.0;
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let mut calls = 0u32;
        while calls == 0 || t.elapsed() < budget / 3 {
            // SAFETY: as above, and the caller chose G for this CPU.
            unsafe {
                every_tile::<G>(
                    ks,
                    ap.as_ptr(),
                    bp.as_ptr(),
                    c.as_mut_ptr(),
                    m,
                    (m, n),
                    false,
                )
            };
            calls += 1;
        }
        best = best.max(f64::from(calls) * 2.0 * (m * n * k) as f64 / t.elapsed().as_secs_f64());
    }
    // The sums are used, so the updates cannot be left out.
    if !c.iter().all(|x| x.is_finite()) {
        return 0.0;
    }
    best
}

/// Every tile of the `m × n` column-major C (stride `ldc`) through `G`, from packed operands of
/// `ks` steps, between [`Gemm::begin`] and [`Gemm::end`].
///
/// # Safety
/// The CPU has `G`'s instruction set; `ap` and `bp` hold the packed panels of the whole
/// operands; `c` holds the `m × n` block.
unsafe fn every_tile<G: Gemm>(
    ks: usize,
    ap: *const G::P,
    bp: *const G::P,
    c: *mut f32,
    ldc: usize,
    (m, n): (usize, usize),
    store: bool,
) {
    // SAFETY: forwarded from the caller; each tile is inside C.
    unsafe {
        G::begin();
        for ip in 0..m.div_ceil(G::MR) {
            for jp in 0..n.div_ceil(G::NR) {
                G::kernel(
                    ks,
                    ap.add(ip * G::MR * ks),
                    bp.add(jp * G::NR * ks),
                    c.add(jp * G::NR * ldc + ip * G::MR),
                    ldc,
                    G::MR.min(m - ip * G::MR),
                    G::NR.min(n - jp * G::NR),
                    store,
                );
            }
        }
        G::end();
    }
}

/// Run `G` on this CPU against the exact answer before a solve relies on it: a 64 × 64 update
/// over 96 k values (ragged against every tile) of small integers, whose bf16 products and f32
/// sums are all exact, compared bit for bit. A kernel whose tiles, layouts or signs are wrong
/// is caught here, not in a refinement that quietly needs more iterations.
pub(in crate::linpack) fn self_check<G: Gemm>() -> Result<(), String> {
    let (m, k, n) = (64, 96, 64);
    let val = |i: usize, j: usize, salt: usize| ((i * 7 + j * 3 + salt) % 9) as f32 - 4.0;
    let a: Vec<f32> = (0..m * k).map(|x| val(x % m, x / m, 1)).collect();
    let b: Vec<f32> = (0..k * n).map(|x| val(x % k, x / k, 2)).collect();
    let ks = steps::<G>(k);
    let mut ap = vec![G::P::default(); m.div_ceil(G::MR) * G::MR * ks];
    let mut bp = vec![G::P::default(); n.div_ceil(G::NR) * G::NR * ks];
    let mut c: Vec<f32> = (0..m * n).map(|x| (x % 5) as f32).collect();
    let c0 = c.clone();
    // SAFETY: the buffers are sized as the packers and the kernel require; the caller chose
    // G for this CPU.
    unsafe {
        pack_a::<G>(ap.as_mut_ptr(), a.as_ptr(), m, m, k);
        pack_b::<G>(bp.as_mut_ptr(), b.as_ptr(), k, k, n);
        every_tile::<G>(
            ks,
            ap.as_ptr(),
            bp.as_ptr(),
            c.as_mut_ptr(),
            m,
            (m, n),
            false,
        );
    }
    for j in 0..n {
        for i in 0..m {
            let want = c0[j * m + i] - (0..k).map(|kk| a[kk * m + i] * b[j * k + kk]).sum::<f32>();
            let got = c[j * m + i];
            if got.to_bits() != want.to_bits() {
                return Err(format!(
                    "{}: C({i}, {j}) = {got} after the update, expected {want}",
                    G::NAME
                ));
            }
        }
    }
    Ok(())
}

/// Write an `MR × NR` accumulator tile (column `j` at `acc[j·MR..]`) to `C`.
///
/// # Safety
/// `c` is valid for the `mr × nr` tile with stride `ldc`.
#[inline(always)]
unsafe fn write_tile<const MR: usize>(
    acc: &[f32],
    c: *mut f32,
    ldc: usize,
    mr: usize,
    nr: usize,
    store: bool,
) {
    for j in 0..nr {
        for i in 0..mr {
            // SAFETY: inside the tile by the caller's contract.
            unsafe {
                let p = c.add(j * ldc + i);
                *p = if store {
                    acc[j * MR + i]
                } else {
                    *p - acc[j * MR + i]
                };
            }
        }
    }
}

/// Plain-loop f32 kernel for any CPU (the compiler vectorises the inner loop).
pub(in crate::linpack) struct F32Portable;

impl Gemm for F32Portable {
    type P = f32;
    const MR: usize = 8;
    const NR: usize = 4;
    const KP: usize = 1;
    const NAME: &'static str = "f32 (portable)";

    fn pack(v: &[f32]) -> f32 {
        v[0]
    }

    unsafe fn kernel(
        ks: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        mr: usize,
        nr: usize,
        store: bool,
    ) {
        let mut acc = [0.0f32; 32];
        for s in 0..ks {
            for j in 0..4 {
                // SAFETY: the packed panels hold ks steps.
                let bj = unsafe { *b.add(s * 4 + j) };
                for i in 0..8 {
                    acc[j * 8 + i] += unsafe { *a.add(s * 8 + i) } * bj;
                }
            }
        }
        // SAFETY: forwarded from the caller.
        unsafe { write_tile::<8>(&acc, c, ldc, mr, nr, store) };
    }
}

/// Portable emulation of the bf16 kernel: the same packed pairs, each product of two bf16
/// exact in f32, summed in f32. Only for exercising the bf16 path on any CPU in tests.
#[cfg(test)]
pub(in crate::linpack) struct Bf16Portable;

/// Two consecutive k values as one bf16 pair, the first in the low half.
#[cfg(any(target_arch = "x86_64", test))]
fn bf16_pair(v: &[f32]) -> u32 {
    let lo = bf16_bits(v[0]) as u32;
    let hi = v.get(1).map_or(0, |&x| bf16_bits(x) as u32);
    lo | hi << 16
}

#[cfg(test)]
impl Gemm for Bf16Portable {
    type P = u32;
    const MR: usize = 8;
    const NR: usize = 4;
    const KP: usize = 2;
    const NAME: &'static str = "bf16 (portable emulation)";

    fn pack(v: &[f32]) -> u32 {
        bf16_pair(v)
    }

    unsafe fn kernel(
        ks: usize,
        a: *const u32,
        b: *const u32,
        c: *mut f32,
        ldc: usize,
        mr: usize,
        nr: usize,
        store: bool,
    ) {
        let f = |bits: u32| f32::from_bits(bits << 16);
        let mut acc = [0.0f32; 32];
        for s in 0..ks {
            for j in 0..4 {
                // SAFETY: the packed panels hold ks steps.
                let bj = unsafe { *b.add(s * 4 + j) };
                for i in 0..8 {
                    let ai = unsafe { *a.add(s * 8 + i) };
                    acc[j * 8 + i] += f(ai & 0xffff) * f(bj & 0xffff) + f(ai >> 16) * f(bj >> 16);
                }
            }
        }
        // SAFETY: forwarded from the caller.
        unsafe { write_tile::<8>(&acc, c, ldc, mr, nr, store) };
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
pub(in crate::linpack) use x86::Bf16AmxEmulated;
#[cfg(target_arch = "x86_64")]
pub(in crate::linpack) use x86::{Bf16Amx, Bf16Avx512, F32Avx2, F32Avx512};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;

    use super::{bf16_pair, write_tile, Gemm};

    /// A register-tile kernel: per packed step, two vectors of A (`2 × LANES` rows) and each
    /// of the `NR` B elements broadcast, into `2 × NR` accumulators; then the tile is stored
    /// or subtracted, full tiles straight to memory and partial ones through a spill.
    macro_rules! tile_kernel {
        ($name:ident, $feat:literal, $p:ty, $v:ty, $lanes:literal, $nr:literal,
         $zero:path, $load:path, $set1:path, $fma:path,
         $loadc:path, $storec:path, $subc:path) => {
            #[target_feature(enable = $feat)]
            #[allow(clippy::too_many_arguments)] // a BLAS-style micro-kernel signature
            unsafe fn $name(
                ks: usize,
                a: *const $p,
                b: *const $p,
                c: *mut f32,
                ldc: usize,
                mr: usize,
                nr: usize,
                store: bool,
            ) {
                let mut acc: [$v; 2 * $nr] = [$zero(); 2 * $nr];
                // SAFETY: the packed panels hold ks steps; the tile is inside C.
                unsafe {
                    for s in 0..ks {
                        let a0 = $load(a.add(s * 2 * $lanes));
                        let a1 = $load(a.add(s * 2 * $lanes + $lanes));
                        let bp = b.add(s * $nr);
                        for j in 0..$nr {
                            let bj = $set1(*bp.add(j));
                            acc[2 * j] = $fma(acc[2 * j], a0, bj);
                            acc[2 * j + 1] = $fma(acc[2 * j + 1], a1, bj);
                        }
                    }
                    if mr == 2 * $lanes && nr == $nr {
                        for j in 0..$nr {
                            for v in 0..2 {
                                let p = c.add(j * ldc + v * $lanes);
                                let x = if store {
                                    acc[2 * j + v]
                                } else {
                                    $subc($loadc(p), acc[2 * j + v])
                                };
                                $storec(p, x);
                            }
                        }
                    } else {
                        let mut spill = [0.0f32; 2 * $lanes * $nr];
                        for (i, x) in acc.iter().enumerate() {
                            $storec(spill.as_mut_ptr().add(i * $lanes), *x);
                        }
                        write_tile::<{ 2 * $lanes }>(&spill, c, ldc, mr, nr, store);
                    }
                }
            }
        };
    }

    /// The [`Gemm`] face of a kernel: its tile, its packing and a call that forwards.
    macro_rules! gemm {
        ($(#[$doc:meta])* $ty:ident, $p:ty, $mr:literal, $nr:literal, $kp:literal,
         $label:literal, $pack:path, $kernel:ident) => {
            $(#[$doc])*
            pub(in crate::linpack) struct $ty;

            impl Gemm for $ty {
                type P = $p;
                const MR: usize = $mr;
                const NR: usize = $nr;
                const KP: usize = $kp;
                const NAME: &'static str = $label;

                fn pack(v: &[f32]) -> $p {
                    $pack(v)
                }

                unsafe fn kernel(
                    ks: usize,
                    a: *const $p,
                    b: *const $p,
                    c: *mut f32,
                    ldc: usize,
                    mr: usize,
                    nr: usize,
                    store: bool,
                ) {
                    // SAFETY: forwarded from the caller, who checked the instruction set.
                    unsafe { $kernel(ks, a, b, c, ldc, mr, nr, store) }
                }
            }
        };
    }

    fn first(v: &[f32]) -> f32 {
        v[0]
    }

    #[target_feature(enable = "avx512f")]
    fn fma512(acc: __m512, a: __m512, b: __m512) -> __m512 {
        _mm512_fmadd_ps(a, b, acc)
    }

    #[target_feature(enable = "avx2,fma")]
    fn fma256(acc: __m256, a: __m256, b: __m256) -> __m256 {
        _mm256_fmadd_ps(a, b, acc)
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn load_bh(p: *const u32) -> __m512bh {
        // SAFETY: 64 readable bytes at p (caller); a __m512i and a __m512bh are the same 64
        // bytes.
        unsafe { core::mem::transmute(_mm512_loadu_si512(p as *const __m512i)) }
    }

    #[target_feature(enable = "avx512f")]
    fn set1_bh(pair: u32) -> __m512bh {
        // SAFETY: as above.
        unsafe { core::mem::transmute(_mm512_set1_epi32(pair as i32)) }
    }

    #[target_feature(enable = "avx512f,avx512bf16")]
    fn dpbf16(acc: __m512, a: __m512bh, b: __m512bh) -> __m512 {
        _mm512_dpbf16_ps(acc, a, b)
    }

    tile_kernel!(
        f32_avx512,
        "avx512f",
        f32,
        __m512,
        16,
        12,
        _mm512_setzero_ps,
        _mm512_loadu_ps,
        _mm512_set1_ps,
        fma512,
        _mm512_loadu_ps,
        _mm512_storeu_ps,
        _mm512_sub_ps
    );
    tile_kernel!(
        bf16_avx512,
        "avx512f,avx512bf16",
        u32,
        __m512,
        16,
        12,
        _mm512_setzero_ps,
        load_bh,
        set1_bh,
        dpbf16,
        _mm512_loadu_ps,
        _mm512_storeu_ps,
        _mm512_sub_ps
    );
    tile_kernel!(
        f32_avx2,
        "avx2,fma",
        f32,
        __m256,
        8,
        6,
        _mm256_setzero_ps,
        _mm256_loadu_ps,
        _mm256_set1_ps,
        fma256,
        _mm256_loadu_ps,
        _mm256_storeu_ps,
        _mm256_sub_ps
    );

    gemm!(
        /// AVX-512F f32, 32 × 12.
        F32Avx512, f32, 32, 12, 1, "f32 (AVX-512F)", first, f32_avx512
    );
    gemm!(
        /// AVX-512 BF16, 32 × 12: `vdpbf16ps` with two vectors of A pairs per step and each B
        /// pair broadcast as one 32-bit value; products summed in f32.
        Bf16Avx512,
        u32,
        32,
        12,
        2,
        "bf16 → f32 (AVX-512 BF16, vdpbf16ps)",
        bf16_pair,
        bf16_avx512
    );
    gemm!(
        /// AVX2 + FMA f32, 16 × 6.
        F32Avx2, f32, 16, 6, 1, "f32 (AVX2 + FMA)", first, f32_avx2
    );

    /// AMX bf16 (`tdpbf16ps`), 32 × 32 of C as 2 × 2 tiles of 16 × 16 f32, computed
    /// transposed: a tile row is one column of the column-major C (64 contiguous bytes), so C
    /// loads and stores with stride `ldc` and no shuffle. Then `Cᵀ += Bᵀ Aᵀ`: the "A" tile of
    /// the multiply is B's columns, each column's bf16 pairs contiguous (B packed lane-major),
    /// and the "B" tile (pairs of k by 16 lanes, the VNNI layout) is exactly the k-major packed
    /// A panel read with a stride of its 32 lanes. Tiles only accumulate, so B is packed
    /// negated and the update `C −= A·B` is `C += A·(−B)`. Tiles are configured once per run
    /// of calls ([`Gemm::begin`]).
    pub(in crate::linpack) struct Bf16Amx;

    /// Palette 1, tiles 0–7 at 16 rows × 64 bytes.
    #[repr(C, align(64))]
    struct TileConfig([u8; 64]);

    fn neg_pair(v: &[f32]) -> u32 {
        let neg = [-v[0], v.get(1).map_or(0.0, |x| -x)];
        bf16_pair(&neg)
    }

    impl Gemm for Bf16Amx {
        type P = u32;
        const MR: usize = 32;
        const NR: usize = 32;
        const KP: usize = 2;
        const NAME: &'static str = "bf16 → f32 (AMX, tdpbf16ps)";
        const KS_ALIGN: usize = 16;
        const B_LANE_MAJOR: bool = true;

        fn pack(v: &[f32]) -> u32 {
            bf16_pair(v)
        }

        fn pack_b_elem(v: &[f32]) -> u32 {
            neg_pair(v)
        }

        unsafe fn begin() {
            let mut c = [0u8; 64];
            c[0] = 1;
            for t in 0..8 {
                c[16 + 2 * t] = 64;
                c[48 + t] = 16;
            }
            let cfg = TileConfig(c);
            // SAFETY: the caller checked AMX; the process holds the tile permission
            // (`amx::permission`, asked before this unit is chosen).
            unsafe {
                core::arch::asm!("ldtilecfg [{c}]", c = in(reg) cfg.0.as_ptr(), options(nostack, readonly))
            };
        }

        unsafe fn end() {
            // SAFETY: after begin on this thread.
            unsafe { core::arch::asm!("tilerelease", options(nomem, nostack)) };
        }

        unsafe fn kernel(
            ks: usize,
            a: *const u32,
            b: *const u32,
            c: *mut f32,
            ldc: usize,
            mr: usize,
            nr: usize,
            store: bool,
        ) {
            // SAFETY: forwarded from the caller, who checked AMX and configured the tiles.
            unsafe { amx_kernel(amx_tiles, ks, a, b, c, ldc, mr, nr, store) }
        }
    }

    /// `Cᵀ(32 × 32) += …` over `ks` packed steps, as [`amx_tiles`] does it.
    type Tiles = unsafe fn(usize, *const u32, *const u32, *mut f32, usize);

    /// The AMX kernel around its tile routine: full 32 × 32 blocks straight from C, edges (and
    /// the tests' store mode) through a scratch block.
    ///
    /// # Safety
    /// As [`Gemm::kernel`], and `tiles` may run (AMX configured, or the tests' emulation).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)] // the micro-kernel signature and its tile routine
    unsafe fn amx_kernel(
        tiles: Tiles,
        ks: usize,
        a: *const u32,
        b: *const u32,
        c: *mut f32,
        ldc: usize,
        mr: usize,
        nr: usize,
        store: bool,
    ) {
        if mr == 32 && nr == 32 && !store {
            // SAFETY: forwarded from the caller; a full tile block.
            unsafe { tiles(ks, a, b, c, ldc) };
            return;
        }
        // C in, the full-tile routine, C out (negated back for a store, whose B was packed
        // negated).
        let mut t = [0.0f32; 32 * 32];
        for j in 0..nr {
            for i in 0..mr {
                // SAFETY: inside the caller's tile.
                t[j * 32 + i] = if store {
                    0.0
                } else {
                    unsafe { *c.add(j * ldc + i) }
                };
            }
        }
        // SAFETY: the scratch is a full 32 × 32 block with stride 32; the packed operands are
        // zero beyond mr and nr.
        unsafe { tiles(ks, a, b, t.as_mut_ptr(), 32) };
        for j in 0..nr {
            for i in 0..mr {
                let v = t[j * 32 + i];
                // SAFETY: as above.
                unsafe { *c.add(j * ldc + i) = if store { -v } else { v } };
            }
        }
    }

    /// Where the tiles of one block live, for the instructions and for the tests' emulation
    /// of them alike: C's four 16 × 16 tiles (tile rows are C's columns, `ldc` floats apart):
    /// rows 0–15 and 16–31 of columns 0–15, then the same of columns 16–31.
    fn c_tiles(c: *mut f32, ldc: usize) -> [*mut f32; 4] {
        [
            c,
            c.wrapping_add(16),
            c.wrapping_add(16 * ldc),
            c.wrapping_add(16 * ldc + 16),
        ]
    }

    /// B's two tiles (lanes 0–15 and 16–31, a lane's steps contiguous, rows `ks` pairs apart)
    /// and A's two (lanes 0–15 and 16–31 of the 16 steps from `s0`, rows
    /// [`A_ROW_BYTES`] apart) of one 16-step slice. Block tile `2·bi + ai` gains B tile `bi`
    /// times A tile `ai`.
    fn step_tiles(ks: usize, a: *const u32, b: *const u32, s0: usize) -> [[*const u32; 2]; 2] {
        [
            [b.wrapping_add(s0), b.wrapping_add(16 * ks + s0)],
            [a.wrapping_add(s0 * 32), a.wrapping_add(s0 * 32 + 16)],
        ]
    }

    /// A packed A step: 32 lanes of bf16 pairs.
    const A_ROW_BYTES: usize = 32 * 4;

    /// `Cᵀ(32 × 32) += …` over `ks` packed steps (a multiple of 16), tiles configured.
    ///
    /// # Safety
    /// AMX with tiles configured by `Bf16Amx::begin`; `a` a k-major panel of 32 lanes and `b` a
    /// lane-major panel of 32 lanes, both of `ks` steps; `c` a 32 × 32 block with stride `ldc`.
    unsafe fn amx_tiles(ks: usize, a: *const u32, b: *const u32, c: *mut f32, ldc: usize) {
        let cs = ldc * 4;
        let [c0, c1, c2, c3] = c_tiles(c, ldc);
        // SAFETY (every asm! below): tile loads and stores of 16 rows of 64 bytes inside the
        // caller's buffers, with the strides documented above.
        unsafe {
            core::arch::asm!(
                "tileloadd tmm0, [{c0} + {s}*1]",
                "tileloadd tmm1, [{c1} + {s}*1]",
                "tileloadd tmm2, [{c2} + {s}*1]",
                "tileloadd tmm3, [{c3} + {s}*1]",
                c0 = in(reg) c0, c1 = in(reg) c1, c2 = in(reg) c2, c3 = in(reg) c3,
                s = in(reg) cs, options(nostack, readonly)
            );
            let bs = ks * 4;
            for s0 in (0..ks).step_by(16) {
                let [[b0, b1], [a0, a1]] = step_tiles(ks, a, b, s0);
                // Intel operand order: tdpbf16ps dst, src1 (rows × pairs), src2 (pairs × lanes).
                core::arch::asm!(
                    "tileloadd tmm4, [{b0} + {bs}*1]",
                    "tileloadd tmm5, [{b1} + {bs}*1]",
                    "tileloadd tmm6, [{a0} + {as_}*1]",
                    "tileloadd tmm7, [{a1} + {as_}*1]",
                    "tdpbf16ps tmm0, tmm4, tmm6",
                    "tdpbf16ps tmm1, tmm4, tmm7",
                    "tdpbf16ps tmm2, tmm5, tmm6",
                    "tdpbf16ps tmm3, tmm5, tmm7",
                    b0 = in(reg) b0,
                    b1 = in(reg) b1,
                    a0 = in(reg) a0,
                    a1 = in(reg) a1,
                    bs = in(reg) bs,
                    as_ = in(reg) A_ROW_BYTES,
                    options(nostack, readonly)
                );
            }
            core::arch::asm!(
                "tilestored [{c0} + {s}*1], tmm0",
                "tilestored [{c1} + {s}*1], tmm1",
                "tilestored [{c2} + {s}*1], tmm2",
                "tilestored [{c3} + {s}*1], tmm3",
                c0 = in(reg) c0, c1 = in(reg) c1, c2 = in(reg) c2, c3 = in(reg) c3,
                s = in(reg) cs, options(nostack)
            );
        }
    }

    /// The AMX kernel with its tile instructions emulated in plain code, from the same tile
    /// addresses, packing and edge handling: the tests run the whole AMX data path (packing
    /// negated and lane-major, steps padded to 16, the transposed product) on any x86-64.
    /// What it cannot show is the instructions' own encoding and operand order, which the self-
    /// check on an AMX machine does.
    #[cfg(test)]
    pub(in crate::linpack) struct Bf16AmxEmulated;

    #[cfg(test)]
    impl Gemm for Bf16AmxEmulated {
        type P = u32;
        const MR: usize = Bf16Amx::MR;
        const NR: usize = Bf16Amx::NR;
        const KP: usize = Bf16Amx::KP;
        const NAME: &'static str = "bf16 → f32 (AMX tiles, emulated)";
        const KS_ALIGN: usize = Bf16Amx::KS_ALIGN;
        const B_LANE_MAJOR: bool = Bf16Amx::B_LANE_MAJOR;

        fn pack(v: &[f32]) -> u32 {
            Bf16Amx::pack(v)
        }

        fn pack_b_elem(v: &[f32]) -> u32 {
            Bf16Amx::pack_b_elem(v)
        }

        unsafe fn kernel(
            ks: usize,
            a: *const u32,
            b: *const u32,
            c: *mut f32,
            ldc: usize,
            mr: usize,
            nr: usize,
            store: bool,
        ) {
            // SAFETY: forwarded; the emulation needs no instruction set.
            unsafe { amx_kernel(emulated_tiles, ks, a, b, c, ldc, mr, nr, store) }
        }
    }

    /// `tileloadd`, `tdpbf16ps` (each f32 lane gains the two products of a bf16 pair) and
    /// `tilestored` as the Intel SDM defines them, on [`amx_tiles`]' addresses.
    #[cfg(test)]
    unsafe fn emulated_tiles(ks: usize, a: *const u32, b: *const u32, c: *mut f32, ldc: usize) {
        let half = |p: u32, hi: bool| f32::from_bits(if hi { p & 0xffff_0000 } else { p << 16 });
        let ct = c_tiles(c, ldc);
        let mut acc = [[[0.0f32; 16]; 16]; 4];
        // SAFETY (all reads and writes): the addresses amx_tiles loads and stores.
        unsafe {
            for (tile, &base) in acc.iter_mut().zip(&ct) {
                for (r, row) in tile.iter_mut().enumerate() {
                    for (col, v) in row.iter_mut().enumerate() {
                        *v = *base.add(r * ldc + col);
                    }
                }
            }
            for s0 in (0..ks).step_by(16) {
                let [bt, at] = step_tiles(ks, a, b, s0);
                for (bi, &src1) in bt.iter().enumerate() {
                    for (ai, &src2) in at.iter().enumerate() {
                        let dst = &mut acc[2 * bi + ai];
                        for (m, row) in dst.iter_mut().enumerate() {
                            for k in 0..16 {
                                let x = *src1.add(m * ks + k);
                                let y = src2.add(k * A_ROW_BYTES / 4);
                                for (n, v) in row.iter_mut().enumerate() {
                                    let y = *y.add(n);
                                    *v += half(x, false) * half(y, false)
                                        + half(x, true) * half(y, true);
                                }
                            }
                        }
                    }
                }
            }
            for (tile, &base) in acc.iter().zip(&ct) {
                for (r, row) in tile.iter().enumerate() {
                    for (col, v) in row.iter().enumerate() {
                        *base.add(r * ldc + col) = *v;
                    }
                }
            }
        }
    }
}

/// The portable f32 kernel with B's sign flipped, so it adds where it should subtract: what
/// the self-check must catch.
#[cfg(test)]
pub(in crate::linpack) struct WrongSign;

#[cfg(test)]
impl Gemm for WrongSign {
    type P = f32;
    const MR: usize = F32Portable::MR;
    const NR: usize = F32Portable::NR;
    const KP: usize = 1;
    const NAME: &'static str = "wrong";
    fn pack(v: &[f32]) -> f32 {
        v[0]
    }
    fn pack_b_elem(v: &[f32]) -> f32 {
        -v[0]
    }
    unsafe fn kernel(
        ks: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        mr: usize,
        nr: usize,
        store: bool,
    ) {
        // SAFETY: forwarded.
        unsafe { F32Portable::kernel(ks, a, b, c, ldc, mr, nr, store) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// C = A·B and C −= A·B through packing and the kernel, against a plain f64 product of the
    /// values as the kernel sees them (bf16-rounded for the bf16 kernels), on ragged edges.
    fn check<G: Gemm>() {
        let (m, k, n) = (G::MR + 3, 2 * G::KP + 5, G::NR + 1);
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 5 % 11) as f32 - 5.0) / 4.0)
            .collect();
        let round = |x: f32| {
            if G::KP == 2 {
                f32::from_bits((bf16_bits(x) as u32) << 16)
            } else {
                x
            }
        };
        let ks = steps::<G>(k);
        let mut ap = vec![G::P::default(); m.div_ceil(G::MR) * G::MR * ks];
        let mut bp = vec![G::P::default(); n.div_ceil(G::NR) * G::NR * ks];
        let ldc = m + 2;
        let mut c = vec![1.0f32; ldc * n];
        // SAFETY: buffers sized as the packers and the kernel require.
        unsafe {
            pack_a::<G>(ap.as_mut_ptr(), a.as_ptr(), m, m, k);
            pack_b::<G>(bp.as_mut_ptr(), b.as_ptr(), k, k, n);
            for store in [true, false] {
                every_tile::<G>(
                    ks,
                    ap.as_ptr(),
                    bp.as_ptr(),
                    c.as_mut_ptr(),
                    ldc,
                    (m, n),
                    store,
                );
            }
        }
        // store then subtract: every element ends at 0, and the padding rows keep their 1.
        for j in 0..n {
            for i in 0..ldc {
                let v = c[j * ldc + i];
                if i < m {
                    assert_eq!(v, 0.0, "{}: C({i}, {j}) = {v}", G::NAME);
                } else {
                    assert_eq!(v, 1.0, "{}: padding row {i} written", G::NAME);
                }
            }
        }
        // and one product on its own, against the f64 sum
        let mut c1 = vec![0.0f32; m * n];
        // SAFETY: as above; one tile at the origin.
        unsafe {
            let one = (G::MR.min(m), G::NR.min(n));
            every_tile::<G>(ks, ap.as_ptr(), bp.as_ptr(), c1.as_mut_ptr(), m, one, true);
        }
        for j in 0..G::NR.min(n) {
            for i in 0..G::MR.min(m) {
                let want: f64 = (0..k)
                    .map(|kk| round(a[kk * m + i]) as f64 * round(b[j * k + kk]) as f64)
                    .sum();
                let got = c1[j * m + i] as f64;
                assert!(
                    (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                    "{}: ({i}, {j}) {got} vs {want}",
                    G::NAME
                );
            }
        }
    }

    #[test]
    fn every_kernel_this_cpu_runs_multiplies_packed_operands() {
        check::<F32Portable>();
        check::<Bf16Portable>();
        #[cfg(target_arch = "x86_64")]
        {
            check::<Bf16AmxEmulated>();
            if hostbench_core::isa::avx2_fma() {
                check::<F32Avx2>();
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                check::<F32Avx512>();
            }
            if hostbench_core::isa::avx512bf16() {
                check::<Bf16Avx512>();
            }
            // In this process only once its trial in a child process passed (`Unit::choose`).
            if super::super::Unit::best() == super::super::Unit::AmxBf16 {
                check::<Bf16Amx>();
            }
        }
    }

    #[test]
    fn the_self_check_passes_right_kernels_and_catches_a_wrong_one() {
        assert_eq!(self_check::<F32Portable>(), Ok(()));
        assert_eq!(self_check::<Bf16Portable>(), Ok(()));
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(self_check::<Bf16AmxEmulated>(), Ok(()));
            if hostbench_core::isa::avx512bf16() {
                assert_eq!(self_check::<Bf16Avx512>(), Ok(()));
            }
            // In this process only once its trial in a child process passed (`Unit::choose`).
            if super::super::Unit::best() == super::super::Unit::AmxBf16 {
                assert_eq!(self_check::<Bf16Amx>(), Ok(()));
            }
        }
        // A kernel that adds where it should subtract.
        let err = self_check::<WrongSign>().unwrap_err();
        assert!(err.starts_with("wrong: C("), "{err}");
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(bf16_bits(1.0), 0x3f80);
        // 1 + 2⁻⁸ is halfway between 1 and 1 + 2⁻⁷: ties to even (1.0)
        assert_eq!(bf16_bits(1.0 + 1.0 / 256.0), 0x3f80);
        // 1 + 3·2⁻⁸ is halfway between 1 + 2⁻⁷ and 1 + 2⁻⁶: ties to even (1 + 2⁻⁶)
        assert_eq!(bf16_bits(1.0 + 3.0 / 256.0), 0x3f82);
        assert_eq!(bf16_bits(-2.0), 0xc000);
        assert!(f32::from_bits((bf16_bits(f32::NAN) as u32) << 16).is_nan());
    }
}
