//! The bandwidth kernels, once per instruction set, chosen at run time.
//!
//! Six primitives cover every kernel: `read` (sum of the data, so no load can be dropped), `fill`,
//! `copy` (bytes), and STREAM's `scale`, `add` and `triad` on `f64` with STREAM's exact arithmetic
//! (a multiply and an add, no FMA contraction: the memory traffic is the same and the results stay
//! bit-identical to a scalar replay). Each exists with temporal stores and with non-temporal
//! (streaming) stores, which skip the write-allocate read of the destination line — the 1.5× (copy)
//! and 1.33× (triad) difference the STREAM documentation warns about, so the choice is a labelled
//! parameter, never a silent default.
//!
//! The loop skeleton is written once ([`simd_kernels!`]) and instantiated per ISA with that ISA's
//! handful of vector helpers, each compiled with its `target_feature` so the intrinsics inline.
//! "scalar" means no hand-written SIMD: plain 8-byte words (the compiler may still use the
//! baseline vector unit for it). Non-temporal stores need an aligned destination, so a
//! destination that does not start on a vector boundary gets a short scalar head first.

use hostbench_core::BenchError;

hostbench_core::named_enum! {
    /// Instruction set of the kernels.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Isa("ISA") {
        Scalar = "scalar",
        Avx2 = "avx2",
        Avx512 = "avx512" | "avx-512",
        Neon = "neon",
    }
}

impl Isa {
    /// Whether this CPU can run the kernels (detected at run time, not compile time).
    pub fn available(self) -> bool {
        use hostbench_core::isa as has;
        match self {
            Self::Scalar => true,
            Self::Avx2 => has::avx2(),
            Self::Avx512 => has::avx512f(),
            Self::Neon => has::neon(),
        }
    }

    /// Every ISA this CPU has, narrowest first.
    pub fn detected() -> Vec<Isa> {
        Self::ALL.into_iter().filter(|i| i.available()).collect()
    }

    /// The widest available.
    pub fn best() -> Isa {
        Self::detected().last().copied().unwrap_or(Isa::Scalar)
    }

    /// Whether non-temporal stores exist for this ISA here.
    pub fn has_nontemporal(self) -> bool {
        // Scalar has them on x86-64 only (`movnti`); every vector ISA has them.
        !matches!(self, Self::Scalar) || cfg!(target_arch = "x86_64")
    }

    /// The kernel entry points for this ISA; `Unsupported` when the CPU lacks it.
    pub fn ops(self) -> Result<Ops, BenchError> {
        if !self.available() {
            return Err(BenchError::unsupported(format!(
                "ISA {} is not available on this CPU",
                self.name()
            )));
        }
        match self {
            Self::Scalar => Ok(scalar::OPS),
            #[cfg(target_arch = "x86_64")]
            Self::Avx2 => Ok(avx2::OPS),
            #[cfg(target_arch = "x86_64")]
            Self::Avx512 => Ok(avx512::OPS),
            #[cfg(target_arch = "aarch64")]
            Self::Neon => Ok(neon::OPS),
            #[allow(unreachable_patterns)]
            _ => Err(BenchError::unsupported(format!(
                "ISA {} is not built for this architecture",
                self.name()
            ))),
        }
    }
}

/// Sum of the bytes at `src` taken as 8-byte words, plus trailing bytes one by one (wrapping).
pub type ReadFn = unsafe fn(src: *const u8, len: usize) -> u64;
/// Set `len` bytes to `byte`.
pub type FillFn = unsafe fn(dst: *mut u8, len: usize, byte: u8, nontemporal: bool);
/// Copy `len` bytes (non-overlapping).
pub type CopyFn = unsafe fn(dst: *mut u8, src: *const u8, len: usize, nontemporal: bool);
/// `dst[i] = s * src[i]` over `n` f64 elements.
pub type ScaleFn = unsafe fn(dst: *mut f64, src: *const f64, n: usize, s: f64, nontemporal: bool);
/// `dst[i] = a[i] + b[i]`.
pub type AddFn = unsafe fn(dst: *mut f64, a: *const f64, b: *const f64, n: usize, nt: bool);
/// `dst[i] = b[i] + s * c[i]` (STREAM triad).
pub type TriadFn =
    unsafe fn(dst: *mut f64, b: *const f64, c: *const f64, n: usize, s: f64, nt: bool);

/// One ISA's kernels.
#[derive(Clone, Copy)]
pub struct Ops {
    pub read: ReadFn,
    pub fill: FillFn,
    pub copy: CopyFn,
    pub scale: ScaleFn,
    pub add: AddFn,
    pub triad: TriadFn,
}

/// The expected `read` result over `len` bytes that all hold `byte`: the same word/byte split
/// the kernels use, so validation is exact.
pub fn read_expected(len: usize, byte: u8, vector_bytes: usize) -> u64 {
    let word = u64::from_ne_bytes([byte; 8]);
    let body = len / vector_bytes * vector_bytes;
    (body as u64 / 8)
        .wrapping_mul(word)
        .wrapping_add((len - body) as u64 * u64::from(byte))
}

/// Bytes per vector register for each ISA (the body/tail split of `read`).
pub fn vector_bytes(isa: Isa) -> usize {
    match isa {
        Isa::Scalar => 8,
        Isa::Avx2 => 32,
        Isa::Avx512 => 64,
        Isa::Neon => 16,
    }
}

/// The loop skeletons, instantiated in a module that defines `W` (bytes per vector), `V` and the
/// helpers `ld st nt fence addf mulf splatf splatb addi zero hsum`, all `#[inline]` with the same
/// target features as `$attr`.
macro_rules! simd_kernels {
    ($(#[$attr:meta])*) => {
        /// Bytes from `p` to the next `W` boundary, clamped to `len` (the scalar head that lets
        /// the body use aligned non-temporal stores).
        #[inline(always)]
        fn head_len(p: usize, len: usize, nt: bool) -> usize {
            if !nt {
                return 0;
            }
            ((W - p % W) % W).min(len)
        }

        $(#[$attr])*
        pub unsafe fn read(src: *const u8, len: usize) -> u64 {
            // SAFETY (whole body): the caller guarantees src..src+len is readable.
            unsafe {
                let (mut a0, mut a1, mut a2, mut a3) = (zero(), zero(), zero(), zero());
                let mut o = 0;
                while o + 4 * W <= len {
                    a0 = addi(a0, ld(src.add(o)));
                    a1 = addi(a1, ld(src.add(o + W)));
                    a2 = addi(a2, ld(src.add(o + 2 * W)));
                    a3 = addi(a3, ld(src.add(o + 3 * W)));
                    o += 4 * W;
                }
                while o + W <= len {
                    a0 = addi(a0, ld(src.add(o)));
                    o += W;
                }
                let mut sum = hsum(addi(addi(a0, a1), addi(a2, a3)));
                while o < len {
                    sum = sum.wrapping_add(u64::from(*src.add(o)));
                    o += 1;
                }
                sum
            }
        }

        $(#[$attr])*
        pub unsafe fn fill(dst: *mut u8, len: usize, byte: u8, nontemporal: bool) {
            // SAFETY (whole body): the caller guarantees dst..dst+len is writable.
            unsafe {
                let head = head_len(dst as usize, len, nontemporal);
                for i in 0..head {
                    *dst.add(i) = byte;
                }
                let v = splatb(byte);
                let mut o = head;
                if nontemporal {
                    while o + 4 * W <= len {
                        nt(dst.add(o), v);
                        nt(dst.add(o + W), v);
                        nt(dst.add(o + 2 * W), v);
                        nt(dst.add(o + 3 * W), v);
                        o += 4 * W;
                    }
                    while o + W <= len {
                        nt(dst.add(o), v);
                        o += W;
                    }
                    fence();
                } else {
                    while o + 4 * W <= len {
                        st(dst.add(o), v);
                        st(dst.add(o + W), v);
                        st(dst.add(o + 2 * W), v);
                        st(dst.add(o + 3 * W), v);
                        o += 4 * W;
                    }
                    while o + W <= len {
                        st(dst.add(o), v);
                        o += W;
                    }
                }
                while o < len {
                    *dst.add(o) = byte;
                    o += 1;
                }
            }
        }

        $(#[$attr])*
        pub unsafe fn copy(dst: *mut u8, src: *const u8, len: usize, nontemporal: bool) {
            // SAFETY (whole body): the caller guarantees both ranges are valid and disjoint.
            unsafe {
                let head = head_len(dst as usize, len, nontemporal);
                for i in 0..head {
                    *dst.add(i) = *src.add(i);
                }
                let mut o = head;
                if nontemporal {
                    while o + 4 * W <= len {
                        let (v0, v1) = (ld(src.add(o)), ld(src.add(o + W)));
                        let (v2, v3) = (ld(src.add(o + 2 * W)), ld(src.add(o + 3 * W)));
                        nt(dst.add(o), v0);
                        nt(dst.add(o + W), v1);
                        nt(dst.add(o + 2 * W), v2);
                        nt(dst.add(o + 3 * W), v3);
                        o += 4 * W;
                    }
                    while o + W <= len {
                        nt(dst.add(o), ld(src.add(o)));
                        o += W;
                    }
                    fence();
                } else {
                    while o + 4 * W <= len {
                        let (v0, v1) = (ld(src.add(o)), ld(src.add(o + W)));
                        let (v2, v3) = (ld(src.add(o + 2 * W)), ld(src.add(o + 3 * W)));
                        st(dst.add(o), v0);
                        st(dst.add(o + W), v1);
                        st(dst.add(o + 2 * W), v2);
                        st(dst.add(o + 3 * W), v3);
                        o += 4 * W;
                    }
                    while o + W <= len {
                        st(dst.add(o), ld(src.add(o)));
                        o += W;
                    }
                }
                while o < len {
                    *dst.add(o) = *src.add(o);
                    o += 1;
                }
            }
        }

        $(#[$attr])*
        pub unsafe fn scale(dst: *mut f64, src: *const f64, n: usize, s: f64, nontemporal: bool) {
            // SAFETY (whole body): the caller guarantees n valid, 8-aligned, disjoint elements.
            unsafe {
                let (d, a) = (dst.cast::<u8>(), src.cast::<u8>());
                let len = n * 8;
                let head = head_len(d as usize, len, nontemporal) / 8;
                for i in 0..head {
                    *dst.add(i) = s * *src.add(i);
                }
                let sv = splatf(s);
                let mut o = head * 8;
                if nontemporal {
                    while o + 2 * W <= len {
                        let (v0, v1) = (mulf(sv, ld(a.add(o))), mulf(sv, ld(a.add(o + W))));
                        nt(d.add(o), v0);
                        nt(d.add(o + W), v1);
                        o += 2 * W;
                    }
                    while o + W <= len {
                        nt(d.add(o), mulf(sv, ld(a.add(o))));
                        o += W;
                    }
                    fence();
                } else {
                    while o + 2 * W <= len {
                        let (v0, v1) = (mulf(sv, ld(a.add(o))), mulf(sv, ld(a.add(o + W))));
                        st(d.add(o), v0);
                        st(d.add(o + W), v1);
                        o += 2 * W;
                    }
                    while o + W <= len {
                        st(d.add(o), mulf(sv, ld(a.add(o))));
                        o += W;
                    }
                }
                for i in o / 8..n {
                    *dst.add(i) = s * *src.add(i);
                }
            }
        }

        $(#[$attr])*
        pub unsafe fn add(dst: *mut f64, a: *const f64, b: *const f64, n: usize, nontemporal: bool) {
            // SAFETY (whole body): the caller guarantees n valid, 8-aligned elements in each.
            unsafe {
                let (d, pa, pb) = (dst.cast::<u8>(), a.cast::<u8>(), b.cast::<u8>());
                let len = n * 8;
                let head = head_len(d as usize, len, nontemporal) / 8;
                for i in 0..head {
                    *dst.add(i) = *a.add(i) + *b.add(i);
                }
                let mut o = head * 8;
                if nontemporal {
                    while o + 2 * W <= len {
                        let v0 = addf(ld(pa.add(o)), ld(pb.add(o)));
                        let v1 = addf(ld(pa.add(o + W)), ld(pb.add(o + W)));
                        nt(d.add(o), v0);
                        nt(d.add(o + W), v1);
                        o += 2 * W;
                    }
                    while o + W <= len {
                        nt(d.add(o), addf(ld(pa.add(o)), ld(pb.add(o))));
                        o += W;
                    }
                    fence();
                } else {
                    while o + 2 * W <= len {
                        let v0 = addf(ld(pa.add(o)), ld(pb.add(o)));
                        let v1 = addf(ld(pa.add(o + W)), ld(pb.add(o + W)));
                        st(d.add(o), v0);
                        st(d.add(o + W), v1);
                        o += 2 * W;
                    }
                    while o + W <= len {
                        st(d.add(o), addf(ld(pa.add(o)), ld(pb.add(o))));
                        o += W;
                    }
                }
                for i in o / 8..n {
                    *dst.add(i) = *a.add(i) + *b.add(i);
                }
            }
        }

        $(#[$attr])*
        pub unsafe fn triad(
            dst: *mut f64,
            b: *const f64,
            c: *const f64,
            n: usize,
            s: f64,
            nontemporal: bool,
        ) {
            // SAFETY (whole body): the caller guarantees n valid, 8-aligned elements in each.
            unsafe {
                let (d, pb, pc) = (dst.cast::<u8>(), b.cast::<u8>(), c.cast::<u8>());
                let len = n * 8;
                let head = head_len(d as usize, len, nontemporal) / 8;
                for i in 0..head {
                    *dst.add(i) = *b.add(i) + s * *c.add(i);
                }
                let sv = splatf(s);
                let mut o = head * 8;
                if nontemporal {
                    while o + 2 * W <= len {
                        let v0 = addf(ld(pb.add(o)), mulf(sv, ld(pc.add(o))));
                        let v1 = addf(ld(pb.add(o + W)), mulf(sv, ld(pc.add(o + W))));
                        nt(d.add(o), v0);
                        nt(d.add(o + W), v1);
                        o += 2 * W;
                    }
                    while o + W <= len {
                        nt(d.add(o), addf(ld(pb.add(o)), mulf(sv, ld(pc.add(o)))));
                        o += W;
                    }
                    fence();
                } else {
                    while o + 2 * W <= len {
                        let v0 = addf(ld(pb.add(o)), mulf(sv, ld(pc.add(o))));
                        let v1 = addf(ld(pb.add(o + W)), mulf(sv, ld(pc.add(o + W))));
                        st(d.add(o), v0);
                        st(d.add(o + W), v1);
                        o += 2 * W;
                    }
                    while o + W <= len {
                        st(d.add(o), addf(ld(pb.add(o)), mulf(sv, ld(pc.add(o)))));
                        o += W;
                    }
                }
                for i in o / 8..n {
                    *dst.add(i) = *b.add(i) + s * *c.add(i);
                }
            }
        }

        pub const OPS: super::Ops = super::Ops {
            read,
            fill,
            copy,
            scale,
            add,
            triad,
        };
    };
}

/// Plain 8-byte words; on x86-64 the non-temporal store is `movnti`.
mod scalar {
    const W: usize = 8;
    type V = u64;

    #[inline(always)]
    unsafe fn ld(p: *const u8) -> V {
        // SAFETY: the caller's range covers p..p+8.
        unsafe { p.cast::<u64>().read_unaligned() }
    }
    #[inline(always)]
    unsafe fn st(p: *mut u8, v: V) {
        // SAFETY: as for `ld`.
        unsafe { p.cast::<u64>().write_unaligned(v) }
    }
    #[inline(always)]
    unsafe fn nt(p: *mut u8, v: V) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: p is 8-aligned (the head loop aligned it) and inside the caller's range.
        unsafe {
            std::arch::x86_64::_mm_stream_si64(p.cast::<i64>(), v as i64)
        }
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: as for `st`; callers refuse non-temporal scalar stores off x86-64.
        unsafe {
            st(p, v)
        }
    }
    #[inline(always)]
    unsafe fn fence() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: sfence has no preconditions.
        unsafe {
            std::arch::x86_64::_mm_sfence()
        }
    }
    #[inline(always)]
    unsafe fn addf(a: V, b: V) -> V {
        (f64::from_bits(a) + f64::from_bits(b)).to_bits()
    }
    #[inline(always)]
    unsafe fn mulf(a: V, b: V) -> V {
        (f64::from_bits(a) * f64::from_bits(b)).to_bits()
    }
    #[inline(always)]
    unsafe fn splatf(x: f64) -> V {
        x.to_bits()
    }
    #[inline(always)]
    unsafe fn splatb(b: u8) -> V {
        u64::from_ne_bytes([b; 8])
    }
    #[inline(always)]
    unsafe fn addi(a: V, b: V) -> V {
        a.wrapping_add(b)
    }
    #[inline(always)]
    unsafe fn zero() -> V {
        0
    }
    #[inline(always)]
    unsafe fn hsum(v: V) -> u64 {
        v
    }

    simd_kernels!();
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;
    const W: usize = 32;
    type V = __m256i;

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn ld(p: *const u8) -> V {
        // SAFETY: the caller's range covers p..p+32; unaligned loads are allowed.
        unsafe { _mm256_loadu_si256(p.cast()) }
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn st(p: *mut u8, v: V) {
        // SAFETY: as for `ld`.
        unsafe { _mm256_storeu_si256(p.cast(), v) }
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn nt(p: *mut u8, v: V) {
        // SAFETY: p is 32-aligned (the head loop aligned it) and inside the caller's range.
        unsafe { _mm256_stream_si256(p.cast(), v) }
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn fence() {
        _mm_sfence()
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn addf(a: V, b: V) -> V {
        _mm256_castpd_si256(_mm256_add_pd(
            _mm256_castsi256_pd(a),
            _mm256_castsi256_pd(b),
        ))
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn mulf(a: V, b: V) -> V {
        _mm256_castpd_si256(_mm256_mul_pd(
            _mm256_castsi256_pd(a),
            _mm256_castsi256_pd(b),
        ))
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn splatf(x: f64) -> V {
        _mm256_castpd_si256(_mm256_set1_pd(x))
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn splatb(b: u8) -> V {
        _mm256_set1_epi8(b as i8)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn addi(a: V, b: V) -> V {
        _mm256_add_epi64(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn zero() -> V {
        _mm256_setzero_si256()
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn hsum(v: V) -> u64 {
        let mut lanes = [0u64; 4];
        // SAFETY: `lanes` is 32 writable bytes.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), v) };
        lanes.iter().fold(0u64, |s, &x| s.wrapping_add(x))
    }

    simd_kernels!(#[target_feature(enable = "avx2")]);
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;
    const W: usize = 64;
    type V = __m512i;

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn ld(p: *const u8) -> V {
        // SAFETY: the caller's range covers p..p+64; unaligned loads are allowed.
        unsafe { _mm512_loadu_si512(p.cast()) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn st(p: *mut u8, v: V) {
        // SAFETY: as for `ld`.
        unsafe { _mm512_storeu_si512(p.cast(), v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn nt(p: *mut u8, v: V) {
        // SAFETY: p is 64-aligned (the head loop aligned it) and inside the caller's range.
        unsafe { _mm512_stream_si512(p.cast(), v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn fence() {
        _mm_sfence()
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn addf(a: V, b: V) -> V {
        _mm512_castpd_si512(_mm512_add_pd(
            _mm512_castsi512_pd(a),
            _mm512_castsi512_pd(b),
        ))
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn mulf(a: V, b: V) -> V {
        _mm512_castpd_si512(_mm512_mul_pd(
            _mm512_castsi512_pd(a),
            _mm512_castsi512_pd(b),
        ))
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn splatf(x: f64) -> V {
        _mm512_castpd_si512(_mm512_set1_pd(x))
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn splatb(b: u8) -> V {
        _mm512_set1_epi64(i64::from_ne_bytes([b; 8]))
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn addi(a: V, b: V) -> V {
        _mm512_add_epi64(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn zero() -> V {
        _mm512_setzero_si512()
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn hsum(v: V) -> u64 {
        _mm512_reduce_add_epi64(v) as u64
    }

    simd_kernels!(#[target_feature(enable = "avx512f")]);
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use std::arch::aarch64::*;
    const W: usize = 16;
    type V = uint8x16_t;

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn ld(p: *const u8) -> V {
        // SAFETY: the caller's range covers p..p+16; byte loads have no alignment requirement.
        unsafe { vld1q_u8(p) }
    }
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn st(p: *mut u8, v: V) {
        // SAFETY: as for `ld`.
        unsafe { vst1q_u8(p, v) }
    }
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn nt(p: *mut u8, v: V) {
        let w = vreinterpretq_u64_u8(v);
        let (lo, hi) = (vgetq_lane_u64::<0>(w), vgetq_lane_u64::<1>(w));
        // SAFETY: p is 16-aligned and p..p+16 is inside the caller's range; STNP is a
        // store-pair with a non-temporal hint and touches exactly those 16 bytes.
        unsafe {
            std::arch::asm!("stnp {lo}, {hi}, [{p}]", lo = in(reg) lo, hi = in(reg) hi,
                p = in(reg) p, options(nostack, preserves_flags));
        }
    }
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn fence() {
        // SAFETY: a store barrier has no preconditions; it orders the STNPs before the timer.
        unsafe { std::arch::asm!("dmb ishst", options(nostack, preserves_flags)) }
    }
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn addf(a: V, b: V) -> V {
        vreinterpretq_u8_f64(vaddq_f64(vreinterpretq_f64_u8(a), vreinterpretq_f64_u8(b)))
    }
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn mulf(a: V, b: V) -> V {
        vreinterpretq_u8_f64(vmulq_f64(vreinterpretq_f64_u8(a), vreinterpretq_f64_u8(b)))
    }
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn splatf(x: f64) -> V {
        vreinterpretq_u8_f64(vdupq_n_f64(x))
    }
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn splatb(b: u8) -> V {
        vdupq_n_u8(b)
    }
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn addi(a: V, b: V) -> V {
        vreinterpretq_u8_u64(vaddq_u64(vreinterpretq_u64_u8(a), vreinterpretq_u64_u8(b)))
    }
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn zero() -> V {
        vdupq_n_u8(0)
    }
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn hsum(v: V) -> u64 {
        vaddvq_u64(vreinterpretq_u64_u8(v))
    }

    simd_kernels!(#[target_feature(enable = "neon")]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ISA here, every primitive, temporal and non-temporal, at awkward lengths and
    /// misaligned starts, against a scalar replay.
    #[test]
    fn every_kernel_matches_a_scalar_replay() {
        for isa in Isa::detected() {
            let ops = isa.ops().unwrap();
            let vb = vector_bytes(isa);
            for nt in [false, true] {
                if nt && !isa.has_nontemporal() {
                    continue;
                }
                for len in [0usize, 1, 7, 8, 63, 64, 65, 200, 1000, 4096 + 24] {
                    for off in [0usize, 1, 8, 24] {
                        let src: Vec<u8> = (0..len + off).map(|i| (i * 131 + 7) as u8).collect();
                        let mut dst = vec![0u8; len + off + 8];
                        // SAFETY: ranges are inside the vectors.
                        unsafe {
                            (ops.copy)(dst.as_mut_ptr().add(off), src.as_ptr().add(off), len, nt)
                        };
                        assert_eq!(
                            &dst[off..off + len],
                            &src[off..off + len],
                            "{isa} copy {len}+{off}"
                        );
                        assert!(
                            dst[off + len..].iter().all(|&b| b == 0),
                            "{isa} copy overran"
                        );
                        // SAFETY: as above.
                        unsafe { (ops.fill)(dst.as_mut_ptr().add(off), len, 0xA5, nt) };
                        assert!(dst[off..off + len].iter().all(|&b| b == 0xA5), "{isa} fill");
                        let ones = vec![1u8; len + off];
                        // SAFETY: as above.
                        let sum = unsafe { (ops.read)(ones.as_ptr().add(off), len) };
                        assert_eq!(sum, read_expected(len, 1, vb), "{isa} read {len}+{off}");
                    }
                }
                for n in [0usize, 1, 3, 8, 17, 129, 1000] {
                    for off in [0usize, 1, 3] {
                        let a: Vec<f64> = (0..n + off).map(|i| i as f64 * 0.5).collect();
                        let b: Vec<f64> = (0..n + off).map(|i| 1.0 + i as f64).collect();
                        let mut d = vec![-1.0f64; n + off + 2];
                        let s = 3.0;
                        // SAFETY: ranges are inside the vectors.
                        unsafe {
                            (ops.scale)(d.as_mut_ptr().add(off), a.as_ptr().add(off), n, s, nt)
                        };
                        for i in 0..n {
                            assert_eq!(d[off + i], s * a[off + i], "{isa} scale");
                        }
                        // SAFETY: as above.
                        unsafe {
                            (ops.add)(
                                d.as_mut_ptr().add(off),
                                a.as_ptr().add(off),
                                b.as_ptr().add(off),
                                n,
                                nt,
                            )
                        };
                        for i in 0..n {
                            assert_eq!(d[off + i], a[off + i] + b[off + i], "{isa} add");
                        }
                        // SAFETY: as above.
                        unsafe {
                            (ops.triad)(
                                d.as_mut_ptr().add(off),
                                b.as_ptr().add(off),
                                a.as_ptr().add(off),
                                n,
                                s,
                                nt,
                            )
                        };
                        for i in 0..n {
                            assert_eq!(d[off + i], b[off + i] + s * a[off + i], "{isa} triad");
                        }
                        assert!(d[off + n..].iter().all(|&x| x == -1.0), "{isa} overran");
                    }
                }
            }
        }
    }

    #[test]
    fn isa_names_parse_and_unavailable_is_unsupported() {
        for isa in Isa::ALL {
            assert_eq!(Isa::parse(isa.name()).unwrap(), isa);
            if !isa.available() {
                assert!(matches!(isa.ops(), Err(BenchError::Unsupported(_))));
            }
        }
        assert!(Isa::parse("sse9").is_err());
        assert!(Isa::best().available());
    }
}
