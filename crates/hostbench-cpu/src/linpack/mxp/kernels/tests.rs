//! Every kernel this CPU runs, and the portable and emulated bf16 ones, against a plain f64
//! product on ragged edges; the self-check passing right kernels and catching a wrong one; bf16
//! rounding to nearest even.

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
