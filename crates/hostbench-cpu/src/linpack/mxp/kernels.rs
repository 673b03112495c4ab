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
mod x86;

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
mod tests;
