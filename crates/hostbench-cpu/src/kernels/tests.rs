//! Unit tests of `kernels.rs`, kept in their own file so the module itself stays short
//! (issue 53: no source file over 1,000 lines).

use super::*;

/// Every kernel variant this machine supports, at every chain count, computes exactly.
#[test]
fn every_supported_kernel_validates() {
    let mut ran = 0;
    for &isa in Isa::all() {
        for dtype in Dtype::ALL {
            if !isa.has_kernel(dtype) {
                continue;
            }
            if let Err(why) = isa.supports(dtype) {
                eprintln!("skipped {isa} {dtype}: {why}");
                continue;
            }
            for &chains in chain_candidates(isa, dtype) {
                let k = Kernel::new(isa, dtype, chains).unwrap();
                // 300 blocks = 1200 iterations: i8 chains wrap several times.
                k.run(300).unwrap();
                ran += 1;
            }
        }
    }
    assert!(ran >= 6 * 2, "only {ran} kernels ran");
}

/// The check can fail: a wrong expectation is reported, not ignored.
#[test]
fn validation_detects_wrong_results() {
    let raw: RawKernel<i32> = |_blocks, init, _step, _mul, out| {
        // A "kernel" that did no work: every lane still holds its start value.
        for (j, v) in init.iter().enumerate() {
            out[j] = *v;
        }
    };
    let step = Step {
        operand: 1,
        gain: 1,
        acc_lanes: 1,
        leg: None,
    };
    let call = wrap::<i32>(raw, Isa::Scalar, Dtype::I32, 4, step);
    let err = call(10).unwrap_err().to_string();
    assert!(
        err.contains("validation failed") && err.contains("expected"),
        "{err}"
    );
}

#[test]
fn half_precision_integers_round_trip_exactly() {
    assert_eq!(F16::from_int(1).0, 0x3c00);
    assert_eq!(F16::from_int(-2).0, 0xc000);
    assert_eq!(F16::from_int(2048).0, 0x6800);
    assert_eq!(F16::from_int(1000).0, 0x63d0);
    for v in -F16::EXACT..=F16::EXACT {
        assert_eq!(F16::from_int(v).to_int(), v);
    }
    // A chain's start values and the top of its climb stay inside the exact range.
    let top = F16::from_index(23).to_int() + (F16_LEG * UNROLL) as i64;
    assert!(top <= F16::EXACT, "{top}");
    // The climb turns: up one leg, back down the next, then up again.
    assert_eq!(leg_position(0, 10), 0);
    assert_eq!(leg_position(10, 10), 10);
    assert_eq!(leg_position(13, 10), 7);
    assert_eq!(leg_position(20, 10), 0);
    assert_eq!(leg_position(25, 10), 5);
}

/// The dot-product units' kernels report a lane that did not advance by the documented
/// gain, not only the plain adds.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_unit_kernel_that_skips_work_fails() {
    if Isa::Avx512Vnni.supports(Dtype::I8).is_err() {
        eprintln!("skipped: no AVX512-VNNI on this host");
        return;
    }
    // The real instruction, one gain short: the check expects 5 per instruction, vpdpbusd
    // of all-ones bytes adds 4.
    let step = Step {
        operand: 0x0101_0101,
        gain: 5,
        acc_lanes: 16,
        leg: None,
    };
    let raw: RawKernel<i32> = x86::vnni512_i8::<4>;
    let err = wrap::<i32>(raw, Isa::Avx512Vnni, Dtype::I8, 4, step)(10)
        .unwrap_err()
        .to_string();
    assert!(err.contains("expected"), "{err}");
    let ok = Step { gain: 4, ..step };
    wrap::<i32>(raw, Isa::Avx512Vnni, Dtype::I8, 4, ok)(10).unwrap();
}

/// The same on AArch64: `sdot` of all-ones bytes adds 4 to each lane, `smmla` 8; a check
/// that expects one more fails.
#[cfg(target_arch = "aarch64")]
#[test]
fn an_arm_unit_kernel_that_skips_work_fails() {
    let cases: [(Isa, RawKernel<i32>, u64); 2] = [
        (Isa::NeonDotprod, arm::dot_i8::<4>, 4),
        (Isa::I8mm, arm::mmla_i8::<4>, 8),
    ];
    for (isa, raw, gain) in cases {
        if isa.supports(Dtype::I8).is_err() {
            eprintln!("skipped: no {isa} on this host");
            continue;
        }
        let step = |gain| Step {
            operand: 0x0101_0101,
            gain,
            acc_lanes: 4,
            leg: None,
        };
        let err = wrap::<i32>(raw, isa, Dtype::I8, 4, step(gain + 1))(10)
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected"), "{isa}: {err}");
        wrap::<i32>(raw, isa, Dtype::I8, 4, step(gain))(10).unwrap();
    }
}

/// Half-precision chains turn at the top of the exact range and come back down, and the
/// check follows them over several legs.
#[test]
fn half_precision_chains_turn_and_validate() {
    if Isa::Avx512Fp16.supports(Dtype::F16).is_err() {
        eprintln!("skipped: no AVX512-FP16 on this host");
        return;
    }
    let k = Kernel::new(Isa::Avx512Fp16, Dtype::F16, 8).unwrap();
    k.run(2 * F16_LEG + F16_LEG / 2).unwrap();
}

/// The per-call cap follows the accumulator type and the gain: f32 chains climb at most 2^23
/// a call, integers and f64 take the general cap.
#[test]
fn calls_are_capped_where_a_chain_would_leave_its_exact_range() {
    let step = |gain| Step {
        operand: 1.0f32,
        gain,
        acc_lanes: 4,
        leg: None,
    };
    assert_eq!(step(1).max_blocks(), MAX_BLOCKS_PER_CALL);
    assert_eq!(step(2).max_blocks(), MAX_BLOCKS_PER_CALL);
    assert_eq!(step(4).max_blocks(), MAX_BLOCKS_PER_CALL / 2);
    let wide = Step {
        operand: 1i32,
        gain: 64,
        acc_lanes: 1,
        leg: None,
    };
    assert_eq!(wide.max_blocks(), MAX_BLOCKS_PER_CALL);
    let dp = Step {
        operand: 1.0f64,
        gain: 1,
        acc_lanes: 1,
        leg: None,
    };
    assert_eq!(dp.max_blocks(), MAX_BLOCKS_PER_CALL);
}

/// A float unit's chains stay exact over the longest call it is given: the per-call cap
/// keeps every f32 (or turning f16) accumulator inside its exact integer range.
#[test]
fn float_units_stay_exact_over_a_full_call() {
    let mut ran = 0;
    for &isa in Isa::all().iter().filter(|i| i.is_unit()) {
        for dtype in isa.dtypes().into_iter().filter(|d| d.is_float()) {
            if isa.supports(dtype).is_err() {
                eprintln!("skipped {isa} {dtype}: not on this host");
                continue;
            }
            // The most chains: the highest start value.
            let chains = *chain_candidates(isa, dtype).last().unwrap();
            let k = Kernel::new(isa, dtype, chains).unwrap();
            k.run(k.max_blocks).unwrap();
            ran += 1;
        }
    }
    eprintln!("{ran} float units ran a full call");
}

#[test]
fn unknown_chain_count_is_refused() {
    assert!(Kernel::new(Isa::Scalar, Dtype::F64, 3).is_err());
}

#[test]
fn ops_per_iteration_counts_fma_twice() {
    let k = Kernel::new(Isa::Scalar, Dtype::I64, 4).unwrap();
    assert_eq!(k.ops_per_iteration(), 4.0);
    if Isa::Avx2Fma.available() {
        let k = Kernel::new(Isa::Avx2Fma, Dtype::F64, 8).unwrap();
        assert_eq!(k.ops_per_iteration(), 8.0 * 4.0 * 2.0);
    }
}
