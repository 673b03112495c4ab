//! Theoretical peaks from device attributes, each with the arithmetic that produced it.
//!
//! Compute: compute units × clock × lanes per compute unit × 2 (a multiply-add is two
//! operations). The lanes come from NVIDIA's published per-SM throughput table keyed by compute
//! capability, labelled `table`; an OpenCL CPU device gets no compute peak, and the reason
//! ([`CPU_DEVICE_NO_PEAK`]). Memory: bus width × memory clock × 2 (double data rate), only
//! where the device reports both (CUDA attributes); OpenCL reports neither, so OpenCL records
//! carry the reason instead of a number. The reported clock is the *maximum* (boost) clock, which
//! a device may not hold under load; the basis says so by naming the attribute.

use hostbench_core::model::Peak;
use hostbench_core::units::format_value;

use crate::Dtype;

/// Lanes per compute unit for a dtype, with where the number came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Lanes {
    pub per_cu: u32,
    pub source: String,
}

/// `units x clock (clock_source) x lanes per unit [source] x 2 (multiply-add)`.
pub fn compute_peak(
    units: u32,
    unit_name: &str,
    clock_hz: f64,
    clock_source: &str,
    dtype: Dtype,
    lanes: &Lanes,
) -> Peak {
    let op = if dtype.is_float() { "FLOP" } else { "OP" };
    Peak {
        value: f64::from(units) * clock_hz * f64::from(lanes.per_cu) * 2.0,
        basis: format!(
            "{units} {unit_name}{} x {} ({clock_source}) x {} {} lanes/{unit_name} [{}] x 2 {op} (multiply-add)",
            if units == 1 { "" } else { "s" },
            format_value(clock_hz, "Hz"),
            lanes.per_cu,
            dtype.name(),
            lanes.source
        ),
    }
}

/// Device-memory peak from bus width and memory clock.
pub fn memory_peak(bus_bits: u32, mem_clock_hz: f64, source: &str) -> Peak {
    Peak {
        value: f64::from(bus_bits) / 8.0 * mem_clock_hz * 2.0,
        basis: format!(
            "{bus_bits}-bit bus / 8 x {} memory clock x 2 (double data rate) [{source}]",
            format_value(mem_clock_hz, "Hz")
        ),
    }
}

/// Per-SM lanes for `dtype` on NVIDIA compute capability `major.minor`, from the CUDA C++
/// Programming Guide's arithmetic-throughput table (results per clock per multiprocessor).
pub fn nv_lanes(major: u32, minor: u32, dtype: Dtype) -> Result<Lanes, String> {
    let fp32 = match (major, minor) {
        (3, _) => Some(192),
        (5, _) => Some(128),
        (6, 0) => Some(64),
        (6, _) => Some(128),
        (7, _) | (8, 0) => Some(64),
        (8, _) | (9, 0) | (10, _) | (12, _) => Some(128),
        _ => None,
    };
    let lanes = match dtype {
        Dtype::F32 => fp32,
        Dtype::F64 => match (major, minor) {
            (3, 5) | (3, 7) => Some(64),
            (3, _) => Some(8),
            (5, _) => Some(4),
            (6, 0) | (7, 0) | (8, 0) => Some(32),
            (6, _) | (7, _) | (8, _) | (12, _) => Some(2),
            (9, 0) | (10, 0) => Some(64),
            _ => None,
        },
        // 32-bit integer multiply-add runs natively from Volta on; before, it is emulated.
        Dtype::I32 => match major {
            7.. if fp32.is_some() => Some(64),
            _ => None,
        },
        // Half precision outside the tensor cores, as `fma.rn.f16x2` pairs: NVIDIA's A100 and
        // H100 whitepapers give 4× (78 vs 19.5 TFLOPS) and 2× (133.8 vs 66.9) the FP32 rate.
        // Other generations are left without an entry rather than guessed.
        Dtype::F16 => match (major, minor) {
            (8, 0) | (9, 0) => Some(256),
            _ => None,
        },
        Dtype::I8 => None,
    };
    lanes
        .map(|per_cu| Lanes {
            per_cu,
            source: format!("table: compute capability {major}.{minor}"),
        })
        .ok_or_else(|| {
            format!(
                "no {} lanes-per-SM entry for compute capability {major}.{minor}",
                dtype.name()
            )
        })
}

/// Why an OpenCL CPU device (PoCL) gets no compute peak. Its attributes undercount it twice
/// over: `CL_DEVICE_MAX_CLOCK_FREQUENCY` is the base clock, and the native vector width counts
/// the lanes of one FMA pipe where server cores have two. A peak built from them came out at
/// half of what the device measured (198 % of it on a Zen 5 VM). `hostbench cpu` derives this
/// CPU's peaks from its measured clock and pipes; a second, weaker model here would only mislead.
pub const CPU_DEVICE_NO_PEAK: &str = "no peak for an OpenCL CPU device: its attributes give the \
     base clock and one FMA pipe's lanes, not the clock under load or the pipes, so `hostbench \
     cpu` gives this CPU's peaks";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h100_style_fp32_peak_and_basis() {
        let lanes = nv_lanes(9, 0, Dtype::F32).unwrap();
        let p = compute_peak(
            132,
            "SM",
            1.98e9,
            "CU_DEVICE_ATTRIBUTE_CLOCK_RATE",
            Dtype::F32,
            &lanes,
        );
        assert!((p.value - 132.0 * 1.98e9 * 128.0 * 2.0).abs() < 1.0);
        assert!(p.basis.starts_with("132 SMs x 1.98 GHz (CU_DEVICE_ATTRIBUTE_CLOCK_RATE) x 128 f32 lanes/SM [table: compute capability 9.0] x 2 FLOP"), "{}", p.basis);
        assert_eq!(nv_lanes(8, 6, Dtype::F64).unwrap().per_cu, 2);
        assert!(nv_lanes(6, 1, Dtype::I32).is_err());
        assert!(nv_lanes(99, 0, Dtype::F32).is_err());
        // f16 outside the tensor cores: twice FP32 on Hopper, four times on A100, no guess else.
        assert_eq!(nv_lanes(9, 0, Dtype::F16).unwrap().per_cu, 256);
        assert_eq!(nv_lanes(8, 0, Dtype::F16).unwrap().per_cu, 256);
        assert!(nv_lanes(8, 6, Dtype::F16).is_err());
    }

    #[test]
    fn memory_peak_is_bus_times_double_rate_clock() {
        // A 256-bit GDDR bus at 7 GHz effective (3.5 GHz x 2): 224 GB/s.
        let p = memory_peak(256, 3.5e9, "CUDA attributes");
        assert_eq!(p.value, 224e9);
        assert!(p.basis.contains("256-bit bus"));
    }
}
