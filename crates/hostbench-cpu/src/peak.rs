//! Theoretical CPU peaks: cores × measured clock × operations per cycle per core.
//!
//! Operations per cycle = lanes × instructions per cycle × operations per lane (2 for an FMA).
//! Instructions per cycle ("pipes") is a microarchitectural fact that CPUID does not report. It
//! comes, in order of trust, from the `--spec` file, from a small table of documented values for
//! cores we know, or — for any other core — is inferred from the single-thread measurement and
//! labelled as inferred, so a reader knows that efficiency then shows scaling, not headroom.
//! Hard-coding a table alone is what made other tools fail on every new CPU generation.

use hostbench_core::model::Host;
use hostbench_core::spec::CpuSpec;
use hostbench_core::units::format_value;
use hostbench_core::Peak;

use crate::isa::{Dtype, Isa};
use crate::kernels::OpKind;

/// Instructions of one kind a core retires per cycle, and where that number came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipes {
    pub per_cycle: f64,
    pub source: String,
}

/// How the source of a rate inferred from the 1-thread run begins.
const INFERRED: &str = "inferred from the 1-thread run";

impl Pipes {
    /// Whether no document (spec file or table) fixes the rate: it was inferred from this host's
    /// own 1-thread run, so a peak built on it measures scaling, not closeness to the hardware.
    pub fn inferred(&self) -> bool {
        self.source.starts_with(INFERRED)
    }
}

/// A documented instruction throughput: one number for the core, or one per SKU family where
/// the part decides (Xeon Scalable 1st–3rd gen have one or two 512-bit FMA units by SKU).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Documented {
    Fixed(f64),
    BySku {
        options: &'static [f64],
        /// Which parts have which, for the basis.
        note: &'static str,
    },
}

const XEON_SP_FMA512: Documented = Documented::BySku {
    options: &[1.0, 2.0],
    note:
        "1 or 2 512-bit FMA units by SKU: Platinum, Gold 6xxx, Gold 5122/5222 and Xeon W have 2, \
           Silver, Bronze and other Gold 5xxx 1",
};
const ICE_LAKE_FMA512: Documented = Documented::BySku {
    options: &[1.0, 2.0],
    note: "Ice Lake-SP has 2 512-bit FMA units, client Ice Lake, Tiger Lake and Rocket Lake 1",
};
const ZEN5_FMA512: Documented = Documented::BySku {
    options: &[1.0, 2.0],
    note:
        "desktop and server Zen 5 have 512-bit FMA pipes, mobile Zen 5 runs 512-bit as two halves",
};

/// Documented instruction throughputs (per core per cycle) for cores we know: vendor optimization
/// manuals (Intel's for Haswell through Granite Rapids, AMD's Software Optimization Guides for
/// Zen 2–5, Arm's Neoverse Software Optimization Guides).
pub fn table(microarch: &str, isa: Isa, kind: OpKind) -> Option<Documented> {
    use Documented::Fixed;
    use OpKind::*;
    let wide = isa.width_bits() == 512;
    let ua = microarch;
    let is = |names: &[&str]| names.contains(&ua);
    let skylake_client = ["Skylake", "Kaby Lake", "Coffee Lake", "Comet Lake"]
        .iter()
        .any(|n| ua.contains(n));
    // Xeon Scalable 1st–3rd generation (Skylake-SP, Cascade Lake, Cooper Lake: Skylake cores).
    let xeon_skx = is(&["Skylake-SP", "Cascade Lake", "Cooper Lake"]);
    // Sunny Cove and later server cores: two 512-bit FMA units on every SKU.
    let xeon_new = is(&[
        "Ice Lake-SP",
        "Sapphire Rapids",
        "Emerald Rapids",
        "Granite Rapids",
    ]);
    // Client cores with AVX-512 and one 512-bit FMA unit (ports 0+1 fused).
    let client_512 = is(&["Tiger Lake", "Rocket Lake"]);
    let golden_cove_or_later = is(&["Sapphire Rapids", "Emerald Rapids", "Granite Rapids"]);
    let intel_server = xeon_skx || xeon_new;
    let haswell = ua.contains("Haswell") || ua.contains("Broadwell");
    let neoverse_2x128 = is(&["Neoverse N1", "Neoverse N2", "Neoverse N3"]);
    let neoverse_4x128 = is(&["Neoverse V1", "Neoverse V2", "Neoverse V3"]);
    Some(match kind {
        // AMX (Intel's optimization manual, "Intel AMX"): the TMUL issues one 16 × 16 × 64 int8 or
        // 16 × 16 × 32 bf16 tile multiply every 16 cycles, i.e. 1024 int8 or 512 bf16
        // multiply-accumulates per cycle per core.
        // AMX-FP16's `tdpfp16ps` (Granite Rapids) has no documented rate: inferred.
        Tile if golden_cove_or_later && isa == Isa::Amx => Fixed(1.0 / 16.0),
        // Arm's `sdot` and `smmla` issue on every 128-bit vector pipe (LLVM's Neoverse scheduling
        // models, written from Arm's Software Optimization Guides: "ASIMD dot product", "ASIMD
        // matrix multiply-accumulate"). `bfmmla` is left to inference: only that model gives its
        // rate, with no second source. Neoverse N1's `sdot` has no entry of its own there.
        Dot | MatMul if isa != Isa::ArmBf16 && is(&["Neoverse N2", "Neoverse N3"]) => Fixed(2.0),
        Dot | MatMul if isa != Isa::ArmBf16 && neoverse_4x128 => Fixed(4.0),
        // Zen 4 runs 512-bit FMAs as two 256-bit halves: one per cycle.
        Fma if ua == "Zen 4" => Fixed(if wide { 1.0 } else { 2.0 }),
        Fma if ua == "Zen 5" && wide => ZEN5_FMA512,
        Fma if is(&["Zen 2", "Zen 3", "Zen 5"]) => Fixed(2.0),
        Fma if haswell || skylake_client => Fixed(2.0),
        Fma if xeon_skx && wide => XEON_SP_FMA512,
        Fma if ua == "Ice Lake" && wide => ICE_LAKE_FMA512,
        Fma if client_512 && wide => Fixed(1.0),
        // Also AVX512-FP16 on Sapphire Rapids and later: the same two 512-bit FMA units, with
        // twice the f32 lanes.
        Fma if intel_server || client_512 || ua == "Ice Lake" => Fixed(2.0),
        Fma if neoverse_2x128 => Fixed(2.0),
        Fma if neoverse_4x128 => Fixed(4.0),
        // Zen: FMUL on two pipes, FADD on two others.
        MulAdd if is(&["Zen 2", "Zen 3", "Zen 4", "Zen 5"]) => Fixed(4.0),
        // Intel up to Sunny Cove: multiplies and adds share ports 0 and 1. (Golden Cove added
        // fast adders on ports 1 and 5; no document fixes the mixed rate, so it is measured.)
        MulAdd if haswell || skylake_client || xeon_skx || is(&["Ice Lake-SP", "Ice Lake"]) => {
            Fixed(2.0)
        }
        MulAdd if client_512 => Fixed(2.0),
        VecIntAdd if ua == "Zen 5" => Fixed(4.0),
        VecIntAdd if ua == "Zen 4" => Fixed(if wide { 2.0 } else { 4.0 }),
        VecIntAdd if ua == "Zen 3" => Fixed(4.0),
        VecIntAdd if ua == "Zen 2" => Fixed(3.0),
        VecIntAdd if haswell => Fixed(2.0),
        VecIntAdd if skylake_client => Fixed(3.0),
        // Ports 0, 1 and 5; at 512 bits ports 0 and 1 are fused into one.
        VecIntAdd if intel_server || client_512 || ua == "Ice Lake" => {
            Fixed(if wide { 2.0 } else { 3.0 })
        }
        VecIntAdd if neoverse_2x128 => Fixed(2.0),
        VecIntAdd if neoverse_4x128 => Fixed(4.0),
        ScalarIntAdd if is(&["Zen 2", "Zen 3", "Zen 4"]) => Fixed(4.0),
        ScalarIntAdd if ua == "Zen 5" => Fixed(6.0),
        // Golden Cove and later: five integer ALUs (ports 0, 1, 5, 6, 10).
        ScalarIntAdd if golden_cove_or_later => Fixed(5.0),
        ScalarIntAdd if haswell || skylake_client || intel_server || client_512 => Fixed(4.0),
        ScalarIntAdd if ua == "Ice Lake" => Fixed(4.0),
        _ => return None,
    })
}

/// The 512-bit FMA unit count a Xeon model name states (Skylake-SP to Cooper Lake), if it does.
fn xeon_sku_fma_units(model: &str) -> Option<f64> {
    let m = model.replace("(R)", "");
    let words: Vec<&str> = m.split_whitespace().collect();
    let after = |w: &str| {
        words
            .iter()
            .position(|x| *x == w)
            .and_then(|i| words.get(i + 1))
            .copied()
    };
    if words.contains(&"Platinum") || m.contains("Xeon W-") {
        return Some(2.0);
    }
    if words.contains(&"Silver") || words.contains(&"Bronze") {
        return Some(1.0);
    }
    let gold = after("Gold")?;
    if gold.starts_with('6') || gold.starts_with("5122") || gold.starts_with("5222") {
        Some(2.0)
    } else if gold.starts_with('5') {
        Some(1.0)
    } else {
        None
    }
}

/// Resolve the instruction throughput: spec file, then table (where the SKU decides: the model
/// name, else the measured rate snapped to the documented options), then inference from the
/// measured single-thread instructions per cycle (rounded to the nearest whole pipe).
pub fn pipes(
    host: &Host,
    spec: &CpuSpec,
    isa: Isa,
    kind: OpKind,
    measured_instr_per_cycle: Option<f64>,
) -> Option<Pipes> {
    let from_spec = match kind {
        OpKind::Fma => spec.fma_pipes,
        OpKind::MulAdd => spec.muladd_pipes,
        OpKind::VecIntAdd => spec.int_add_pipes,
        OpKind::ScalarIntAdd => spec.scalar_int_pipes,
        OpKind::Dot => spec.dot_pipes,
        OpKind::Tile => spec.tile_per_cycle,
        OpKind::MatMul => spec.mmla_pipes,
    };
    if let Some(p) = from_spec {
        return Some(Pipes {
            per_cycle: p,
            source: "spec file".into(),
        });
    }
    let ua = host.cpu.microarch.as_deref();
    match ua.and_then(|ua| table(ua, isa, kind).map(|d| (ua, d))) {
        Some((ua, Documented::Fixed(p))) => {
            return Some(Pipes {
                per_cycle: p,
                source: format!("table: {ua}"),
            })
        }
        Some((ua, Documented::BySku { options, note })) => {
            if let Some(p) = xeon_sku_fma_units(&host.cpu.model).filter(|p| options.contains(p)) {
                return Some(Pipes {
                    per_cycle: p,
                    source: format!("table: {ua}, {note}; this SKU by its model name"),
                });
            }
            if let Some(m) = measured_instr_per_cycle {
                let p = options
                    .iter()
                    .copied()
                    .min_by(|a, b| (a - m).abs().total_cmp(&(b - m).abs()))
                    .unwrap_or(1.0);
                return Some(Pipes {
                    per_cycle: p,
                    source: format!(
                        "table: {ua}, {note}; this part measured {m:.2}/cycle on 1 thread"
                    ),
                });
            }
            return None;
        }
        None => {}
    }
    // Whole instructions per cycle, or for an instruction that takes several cycles (a tile
    // multiply; `vdpbf16ps` on some cores) a whole number of cycles per instruction.
    measured_instr_per_cycle.map(|m| Pipes {
        per_cycle: if m >= 0.75 {
            m.round()
        } else {
            1.0 / (1.0 / m).round()
        },
        source: format!("{INFERRED} ({m:.3}/cycle); no table entry for this CPU"),
    })
}

/// Operations per cycle per core for a kernel.
pub fn ops_per_cycle(isa: Isa, dtype: Dtype, kind: OpKind, pipes: &Pipes) -> f64 {
    isa.lanes(dtype) as f64 * pipes.per_cycle * kind.ops_per_lane()
}

/// The peak with its arithmetic spelled out, e.g.
/// `2 cores x 3.07 GHz (measured) x 16 FLOP/cycle (8 lanes x 1 FMA/cycle [table: Zen 4] x 2)`.
#[allow(clippy::too_many_arguments)]
pub fn cpu_peak(
    cores: usize,
    clock_hz: f64,
    clock_source: &str,
    isa: Isa,
    dtype: Dtype,
    kind: OpKind,
    pipes: &Pipes,
    unit: &str,
) -> Peak {
    let per_cycle = ops_per_cycle(isa, dtype, kind, pipes);
    let op_unit = unit.trim_end_matches("/s");
    let lanes = isa.lanes(dtype);
    let times_two = if kind.ops_per_lane() == 2.0 {
        " x 2"
    } else {
        ""
    };
    let pipes_txt = if pipes.per_cycle.fract() == 0.0 {
        format!("{:.0}", pipes.per_cycle)
    } else if (1.0 / pipes.per_cycle).fract() == 0.0 {
        format!("1/{:.0}", 1.0 / pipes.per_cycle)
    } else {
        format!("{}", pipes.per_cycle)
    };
    // What one instruction's `lanes` are: vector lanes, dot-product input pairs, or a tile
    // multiply's multiply-accumulates.
    let lane_word = match kind {
        OpKind::Dot => "products",
        OpKind::Tile | OpKind::MatMul => "MACs",
        _ if lanes == 1 => "lane",
        _ => "lanes",
    };
    Peak {
        value: cores as f64 * clock_hz * per_cycle,
        basis: format!(
            "{cores} core{} x {} ({clock_source}) x {per_cycle} {op_unit}/cycle ({lanes} {lane_word} x {pipes_txt} {}/cycle [{}]{times_two})",
            if cores == 1 { "" } else { "s" },
            format_value(clock_hz, "Hz"),
            kind.describe(),
            pipes.source,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_pipes(n: f64) -> Pipes {
        Pipes {
            per_cycle: n,
            source: "table: test".into(),
        }
    }

    #[test]
    fn classic_example_two_cores_avx2_fp64() {
        // 2 cores × 2.3 GHz × 16 FLOP/cycle (4 lanes × 2 FMA pipes × 2) = 73.6 GFLOP/s.
        let p = cpu_peak(
            2,
            2.3e9,
            "measured",
            Isa::Avx2Fma,
            Dtype::F64,
            OpKind::Fma,
            &table_pipes(2.0),
            "FLOP/s",
        );
        assert!((p.value - 73.6e9).abs() < 1.0, "{}", p.value);
        assert!(
            p.basis.starts_with(
                "2 cores x 2.30 GHz (measured) x 16 FLOP/cycle (4 lanes x 2 FMA/cycle"
            ),
            "{}",
            p.basis
        );
    }

    #[test]
    fn zen4_avx512_is_double_pumped() {
        assert_eq!(
            table("Zen 4", Isa::Avx512, OpKind::Fma),
            Some(Documented::Fixed(1.0))
        );
        assert_eq!(
            table("Zen 4", Isa::Avx2Fma, OpKind::Fma),
            Some(Documented::Fixed(2.0))
        );
        // Same FP64 peak per cycle either way: 8 × 1 × 2 = 4 × 2 × 2 = 16.
        let wide = ops_per_cycle(Isa::Avx512, Dtype::F64, OpKind::Fma, &table_pipes(1.0));
        let narrow = ops_per_cycle(Isa::Avx2Fma, Dtype::F64, OpKind::Fma, &table_pipes(2.0));
        assert_eq!(wide, 16.0);
        assert_eq!(narrow, 16.0);
    }

    #[test]
    fn integer_and_muladd_counts() {
        // i8 AVX2: 32 lanes × 4 adds/cycle = 128 OP/cycle; SSE2 f32 mul+add: 4 lanes × 4 = 16.
        assert_eq!(
            ops_per_cycle(
                Isa::Avx2Fma,
                Dtype::I8,
                OpKind::VecIntAdd,
                &table_pipes(4.0)
            ),
            128.0
        );
        assert_eq!(
            ops_per_cycle(Isa::Sse2, Dtype::F32, OpKind::MulAdd, &table_pipes(4.0)),
            16.0
        );
        let p = cpu_peak(
            1,
            3e9,
            "spec file",
            Isa::Scalar,
            Dtype::I64,
            OpKind::ScalarIntAdd,
            &table_pipes(4.0),
            "OP/s",
        );
        assert_eq!(p.value, 12e9);
        assert!(
            p.basis
                .starts_with("1 core x 3.00 GHz (spec file) x 4 OP/cycle (1 lane x 4"),
            "{}",
            p.basis
        );
    }

    #[test]
    fn spec_beats_table_beats_inference() {
        let mut host = Host::default();
        host.cpu.microarch = Some("Zen 4".into());
        let mut spec = CpuSpec::default();
        let t = pipes(&host, &spec, Isa::Avx2Fma, OpKind::Fma, Some(1.7)).unwrap();
        assert_eq!((t.per_cycle, t.source.as_str()), (2.0, "table: Zen 4"));
        spec.fma_pipes = Some(3.0);
        assert_eq!(
            pipes(&host, &spec, Isa::Avx2Fma, OpKind::Fma, None)
                .unwrap()
                .per_cycle,
            3.0
        );
        host.cpu.microarch = Some("Future Core".into());
        spec.fma_pipes = None;
        let inf = pipes(&host, &spec, Isa::Avx2Fma, OpKind::Fma, Some(1.96)).unwrap();
        assert_eq!(inf.per_cycle, 2.0);
        assert!(inf.source.starts_with("inferred"));
        assert!(pipes(&host, &spec, Isa::Avx2Fma, OpKind::Fma, None).is_none());
        // Slower than one per cycle: a whole number of cycles per instruction.
        let half = pipes(&host, &spec, Isa::Avx512Bf16, OpKind::Dot, Some(0.497)).unwrap();
        assert_eq!(half.per_cycle, 0.5);
        let tile = pipes(&host, &spec, Isa::Amx, OpKind::Tile, Some(0.0621)).unwrap();
        assert_eq!(tile.per_cycle, 1.0 / 16.0);
        spec.tile_per_cycle = Some(0.125);
        let from_spec = pipes(&host, &spec, Isa::Amx, OpKind::Tile, Some(0.0621)).unwrap();
        assert_eq!(
            (from_spec.per_cycle, from_spec.source.as_str()),
            (0.125, "spec file")
        );
    }

    #[test]
    fn arm_dot_and_matrix_units_issue_on_every_vector_pipe() {
        use Documented::Fixed;
        for (ua, n) in [
            ("Neoverse N2", 2.0),
            ("Neoverse N3", 2.0),
            ("Neoverse V1", 4.0),
            ("Neoverse V2", 4.0),
            ("Neoverse V3", 4.0),
        ] {
            assert_eq!(
                table(ua, Isa::NeonDotprod, OpKind::Dot),
                Some(Fixed(n)),
                "{ua}"
            );
            assert_eq!(table(ua, Isa::I8mm, OpKind::MatMul), Some(Fixed(n)), "{ua}");
            // `bfmmla` has one source only: inferred.
            assert_eq!(table(ua, Isa::ArmBf16, OpKind::MatMul), None, "{ua}");
        }
        assert_eq!(table("Neoverse N1", Isa::NeonDotprod, OpKind::Dot), None);
        // `smmla`: 2 x 2 results of 8 products = 32 MACs, 64 OP per instruction.
        let p = Pipes {
            per_cycle: 4.0,
            source: "t".into(),
        };
        assert_eq!(
            ops_per_cycle(Isa::I8mm, Dtype::I8, OpKind::MatMul, &p),
            256.0
        );
        assert_eq!(
            ops_per_cycle(Isa::NeonDotprod, Dtype::I8, OpKind::Dot, &p),
            128.0
        );
        let spec = CpuSpec {
            mmla_pipes: Some(3.0),
            ..CpuSpec::default()
        };
        let host = Host::default();
        let from_spec = pipes(&host, &spec, Isa::I8mm, OpKind::MatMul, Some(1.0)).unwrap();
        assert_eq!(
            (from_spec.per_cycle, from_spec.source.as_str()),
            (3.0, "spec file")
        );
    }

    #[test]
    fn amx_is_documented_on_sapphire_rapids_and_later() {
        use Documented::Fixed;
        for ua in ["Sapphire Rapids", "Emerald Rapids", "Granite Rapids"] {
            assert_eq!(
                table(ua, Isa::Amx, OpKind::Tile),
                Some(Fixed(1.0 / 16.0)),
                "{ua}"
            );
            assert_eq!(
                table(ua, Isa::Avx512Fp16, OpKind::Fma),
                Some(Fixed(2.0)),
                "{ua}"
            );
        }
        assert_eq!(table("Ice Lake-SP", Isa::Amx, OpKind::Tile), None);
        // AMX-FP16 has no documented rate: inferred, never borrowed from int8/bf16.
        assert_eq!(table("Granite Rapids", Isa::AmxFp16, OpKind::Tile), None);
        // 1024 int8 multiply-accumulates per cycle: 2048 OP/cycle.
        let p = Pipes {
            per_cycle: 1.0 / 16.0,
            source: "t".into(),
        };
        assert_eq!(ops_per_cycle(Isa::Amx, Dtype::I8, OpKind::Tile, &p), 2048.0);
        assert_eq!(
            ops_per_cycle(Isa::Amx, Dtype::BF16, OpKind::Tile, &p),
            1024.0
        );
        let basis = cpu_peak(
            1,
            3.0e9,
            "measured",
            Isa::Amx,
            Dtype::I8,
            OpKind::Tile,
            &p,
            "OP/s",
        )
        .basis;
        assert!(
            basis.contains("16384 MACs x 1/16 tile multiply/cycle"),
            "{basis}"
        );
    }

    #[test]
    fn intel_server_cores_are_documented_for_every_kernel_info_shows() {
        // `hostbench info` shows the widest ISA: FMA for floats, vector adds for integers.
        for ua in [
            "Ice Lake-SP",
            "Sapphire Rapids",
            "Emerald Rapids",
            "Granite Rapids",
        ] {
            for isa in [Isa::Avx512, Isa::Avx2Fma] {
                assert_eq!(
                    table(ua, isa, OpKind::Fma),
                    Some(Documented::Fixed(2.0)),
                    "{ua}"
                );
                assert!(table(ua, isa, OpKind::VecIntAdd).is_some(), "{ua}");
            }
            assert!(
                table(ua, Isa::Scalar, OpKind::ScalarIntAdd).is_some(),
                "{ua}"
            );
        }
        assert_eq!(
            table("Rocket Lake", Isa::Avx512, OpKind::Fma),
            Some(Documented::Fixed(1.0))
        );
    }

    #[test]
    fn where_the_sku_decides_the_model_name_or_the_measurement_does() {
        let mut host = Host::default();
        host.cpu.microarch = Some("Cascade Lake".into());
        host.cpu.model = "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz".into();
        let spec = CpuSpec::default();
        let p = pipes(&host, &spec, Isa::Avx512, OpKind::Fma, None).unwrap();
        assert_eq!(p.per_cycle, 2.0);
        assert!(p.source.contains("by its model name"), "{}", p.source);
        host.cpu.model = "Intel(R) Xeon(R) Silver 4214 CPU @ 2.20GHz".into();
        assert_eq!(
            pipes(&host, &spec, Isa::Avx512, OpKind::Fma, None)
                .unwrap()
                .per_cycle,
            1.0
        );
        // A VM's generic model name: the measured rate picks between the documented options.
        host.cpu.model = "Intel Xeon Processor (Cascadelake)".into();
        assert!(pipes(&host, &spec, Isa::Avx512, OpKind::Fma, None).is_none());
        let m = pipes(&host, &spec, Isa::Avx512, OpKind::Fma, Some(1.93)).unwrap();
        assert_eq!(m.per_cycle, 2.0);
        assert!(m.source.contains("measured 1.93/cycle"), "{}", m.source);
        let one = pipes(&host, &spec, Isa::Avx512, OpKind::Fma, Some(0.97)).unwrap();
        assert_eq!(one.per_cycle, 1.0);
        // 256-bit FMAs are two per cycle on every such SKU.
        assert_eq!(
            pipes(&host, &spec, Isa::Avx2Fma, OpKind::Fma, None)
                .unwrap()
                .per_cycle,
            2.0
        );
    }
}
