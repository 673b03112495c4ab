//! Numbers for humans: one scale per figure or axis, chosen from the value, with the unit said.
//!
//! Rates use decimal SI prefixes (GB/s = 1e9 B/s, as STREAM and fio print them), times scale down
//! (ms, µs, ns), and sizes of blocks and working sets use binary prefixes (KiB, MiB), which is what
//! the benchmarks choose them in. One rule everywhere, so a table and a chart never disagree.

use hostbench_core::units::sig3;

/// A display scale: divide by `factor`, print `label`.
#[derive(Debug, Clone, PartialEq)]
pub struct Scale {
    pub factor: f64,
    pub label: String,
}

const SI: [(f64, &str); 5] = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")];

/// The scale that shows `value` (in SI base `unit`) with one to three integer digits.
pub fn scale_for(value: f64, unit: &str) -> Scale {
    let abs = value.abs();
    if unit == "s" {
        let (factor, label) = if abs >= 1.0 || abs == 0.0 || !abs.is_finite() {
            (1.0, "s")
        } else if abs >= 1e-3 {
            (1e-3, "ms")
        } else if abs >= 1e-6 {
            (1e-6, "µs")
        } else {
            (1e-9, "ns")
        };
        return Scale {
            factor,
            label: label.to_string(),
        };
    }
    let (factor, prefix) = SI
        .iter()
        .copied()
        .find(|(f, _)| abs >= *f)
        .unwrap_or((1.0, ""));
    // A symbol takes its prefix (`Gbit/s`); a word keeps it apart (`k transactions/s`).
    let word = unit
        .split('/')
        .next()
        .is_some_and(|u| u.chars().count() > 4);
    let sep = if word && !prefix.is_empty() { " " } else { "" };
    Scale {
        factor,
        label: format!("{prefix}{sep}{unit}"),
    }
}

/// `value` in `scale`'s unit, three significant digits, without the label.
pub fn scaled(value: f64, scale: &Scale) -> String {
    sig3(value / scale.factor)
}

/// `98.0 GFLOP/s`.
pub fn human(value: f64, unit: &str) -> String {
    let s = scale_for(value, unit);
    format!("{} {}", scaled(value, &s), s.label)
}

/// `98.0 ± 1.20 GFLOP/s`: the spread in the mean's scale, so the two read together.
pub fn mean_sd(mean: f64, sd: f64, unit: &str) -> String {
    let s = scale_for(mean, unit);
    format!("{} ± {} {}", scaled(mean, &s), scaled(sd, &s), s.label)
}

/// `b` in powers of 1024: the scaled value and the power, at most `max`.
pub fn iec_scale(b: f64, max: usize) -> (f64, usize) {
    let mut v = b;
    let mut i = 0;
    while v >= 1024.0 && i < max {
        v /= 1024.0;
        i += 1;
    }
    (v, i)
}

/// Sizes of blocks and working sets: `1 B`, `4 KiB`, `10 MiB`, `1.50 GiB`.
pub fn bytes(b: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let (v, i) = iec_scale(b, UNITS.len() - 1);
    if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[i])
    } else {
        format!("{} {}", sig3(v), UNITS[i])
    }
}

/// `98.0 %`.
pub fn percent(fraction: f64) -> String {
    format!("{:.1} %", fraction * 100.0)
}

/// What a unit measures, for axis titles.
pub fn quantity(unit: &str, latency: bool) -> &'static str {
    if latency || unit == "s" {
        return "Latency";
    }
    match unit {
        "B/s" | "bit/s" => "Bandwidth",
        "IO/s" => "IOPS",
        "FLOP/s" | "OP/s" => "Throughput",
        "transactions/s" => "Transaction rate",
        _ => "Value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_are_chosen_from_the_value() {
        assert_eq!(human(9.8e10, "FLOP/s"), "98.0 GFLOP/s");
        assert_eq!(human(2.5e-8, "s"), "25.0 ns");
        assert_eq!(human(1.25e9, "bit/s"), "1.25 Gbit/s");
        assert_eq!(human(8.97e4, "transactions/s"), "89.7 k transactions/s");
        assert_eq!(human(897.0, "transactions/s"), "897 transactions/s");
        assert_eq!(mean_sd(9.8e10, 1.2e9, "FLOP/s"), "98.0 ± 1.20 GFLOP/s");
        assert_eq!(mean_sd(4.2e-3, 1e-5, "s"), "4.20 ± 0.01 ms");
        assert_eq!(bytes(1.0), "1 B");
        assert_eq!(bytes(10.0 * 1024.0 * 1024.0), "10 MiB");
        assert_eq!(bytes(1.5 * 1024.0 * 1024.0 * 1024.0), "1.50 GiB");
        assert_eq!(percent(0.981), "98.1 %");
    }
}
