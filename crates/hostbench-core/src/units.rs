//! Parsing and formatting of sizes, counts, durations, lists and scaled values.
//!
//! Input follows the conventions fio and dd users already know: `KiB/MiB/GiB` are powers of two,
//! `KB/MB/GB` are powers of ten, and a bare `k/M/G` (as in fio's `bs=4k`) is a power of two.
//! Output always says which it uses: decimal SI prefixes for rates (GB/s = 1e9 B/s, as STREAM
//! and fio's "MB/s" do), binary prefixes for sizes of memory and caches (KiB, MiB, GiB).

use std::time::Duration;

use crate::error::BenchError;

/// Parse a byte size such as `64`, `4k`, `4KiB`, `1MB`, `1.5GiB`.
pub fn parse_size(text: &str) -> Result<u64, BenchError> {
    let bad = || {
        BenchError::invalid(format!(
            "invalid size '{text}' (expected e.g. 4096, 4KiB, 1MB, 1GiB)"
        ))
    };
    let s = text.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let num: f64 = num.replace('_', "").parse().map_err(|_| bad())?;
    let mult: f64 = match suffix.trim() {
        "" | "B" | "b" => 1.0,
        "k" | "K" | "KiB" | "kiB" | "Ki" => 1024.0,
        "M" | "m" | "MiB" | "Mi" => 1024.0 * 1024.0,
        "G" | "g" | "GiB" | "Gi" => 1024.0 * 1024.0 * 1024.0,
        "T" | "t" | "TiB" | "Ti" => 1024f64.powi(4),
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        _ => return Err(bad()),
    };
    let bytes = num * mult;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 || bytes.fract() != 0.0 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// Parse a count such as `1000`, `1e12`, `2.5G` or `100M` (decimal SI suffixes).
pub fn parse_count(text: &str) -> Result<f64, BenchError> {
    let bad = || {
        BenchError::invalid(format!(
            "invalid count '{text}' (expected e.g. 1000000, 1e12, 2.5G)"
        ))
    };
    let s = text.trim().replace('_', "");
    let (num, mult) = match s.chars().last() {
        Some('k') | Some('K') => (&s[..s.len() - 1], 1e3),
        Some('M') => (&s[..s.len() - 1], 1e6),
        Some('G') => (&s[..s.len() - 1], 1e9),
        Some('T') => (&s[..s.len() - 1], 1e12),
        _ => (s.as_str(), 1.0),
    };
    let v: f64 = num.parse().map_err(|_| bad())?;
    let v = v * mult;
    if !v.is_finite() || v <= 0.0 {
        return Err(bad());
    }
    Ok(v)
}

/// Parse a duration such as `2s`, `500ms`, `1.5m`, `250us`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, BenchError> {
    let bad = || {
        BenchError::invalid(format!(
            "invalid duration '{text}' (expected e.g. 2s, 500ms, 1m)"
        ))
    };
    let s = text.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let v: f64 = num.parse().map_err(|_| bad())?;
    let secs = match suffix.trim() {
        "" | "s" | "sec" => v,
        "ms" => v * 1e-3,
        "us" | "µs" => v * 1e-6,
        "ns" => v * 1e-9,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(bad()),
    };
    if !secs.is_finite() || secs <= 0.0 || secs > 1e9 {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parse a comma-separated list with `item`, rejecting empty lists and empty items.
pub fn parse_list<T>(
    text: &str,
    what: &str,
    item: impl Fn(&str) -> Result<T, BenchError>,
) -> Result<Vec<T>, BenchError> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(BenchError::invalid(format!(
                "empty item in {what} list '{text}'"
            )));
        }
        out.push(item(part)?);
    }
    Ok(out)
}

/// Parse a positive integer (threads, repetitions, n), naming `what` in the error.
pub fn parse_positive(text: &str, what: &str) -> Result<usize, BenchError> {
    match text.trim().replace('_', "").parse::<usize>() {
        Ok(0) => Err(BenchError::invalid(format!(
            "{what} must be at least 1, got '{text}'"
        ))),
        Ok(v) => Ok(v),
        Err(_) => Err(BenchError::invalid(format!(
            "invalid {what} '{text}' (expected a positive integer)"
        ))),
    }
}

const SI_PREFIXES: [(f64, &str); 5] = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")];

/// Samples by their 0-based indices, as a reader counts them: "sample 1", "samples 1, 3".
pub fn sample_list(indices: &[usize]) -> String {
    let list: Vec<String> = indices.iter().map(|i| (i + 1).to_string()).collect();
    format!(
        "sample{} {}",
        if list.len() == 1 { "" } else { "s" },
        list.join(", ")
    )
}

/// Scale a value in an SI base unit for humans: `9.8e10 FLOP/s` → `98.0 GFLOP/s`.
/// Seconds scale downwards (ms, µs, ns); everything else upwards with decimal prefixes.
pub fn format_value(value: f64, unit: &str) -> String {
    if !value.is_finite() {
        return format!("{value} {unit}");
    }
    if unit == "s" {
        return format_seconds(value);
    }
    let abs = value.abs();
    for (scale, prefix) in SI_PREFIXES {
        if abs >= scale {
            return format!("{} {prefix}{unit}", sig3(value / scale));
        }
    }
    format!("{} {unit}", sig3(value))
}

/// Seconds with a readable sub-unit.
pub fn format_seconds(s: f64) -> String {
    let abs = s.abs();
    if abs >= 1.0 || abs == 0.0 {
        format!("{} s", sig3(s))
    } else if abs >= 1e-3 {
        format!("{} ms", sig3(s * 1e3))
    } else if abs >= 1e-6 {
        format!("{} µs", sig3(s * 1e6))
    } else {
        format!("{} ns", sig3(s * 1e9))
    }
}

/// Bytes with binary prefixes (for memory and cache sizes): `33554432` → `32 MiB`.
pub fn format_bytes_iec(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    format!("{} {}", sig3(v), UNITS[i])
}

/// Three significant digits without trailing zeros noise: 98.04 → "98.0", 1234.5 → "1235".
pub fn sig3(v: f64) -> String {
    let abs = v.abs();
    if abs >= 100.0 {
        format!("{v:.0}")
    } else if abs >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_fio_and_si_conventions() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("1KB").unwrap(), 1000);
        assert_eq!(parse_size("1MB").unwrap(), 1_000_000);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size(" 8 B ").unwrap(), 8);
        for bad in ["", "abc", "4XB", "-1", "1.3", "1e400"] {
            assert!(parse_size(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn counts_and_durations() {
        assert_eq!(parse_count("1e12").unwrap(), 1e12);
        assert_eq!(parse_count("2.5G").unwrap(), 2.5e9);
        assert_eq!(parse_count("1_000").unwrap(), 1000.0);
        assert!(parse_count("0").is_err());
        assert!(parse_count("x").is_err());
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn lists_and_positive_numbers() {
        let v = parse_list("1, 2,4,8", "threads", |s| parse_positive(s, "threads")).unwrap();
        assert_eq!(v, vec![1, 2, 4, 8]);
        assert!(parse_list("1,,2", "threads", |s| parse_positive(s, "threads")).is_err());
        let err = parse_positive("0", "threads").unwrap_err().to_string();
        assert!(err.contains("threads") && err.contains("'0'"), "{err}");
        assert!(parse_positive("two", "threads").is_err());
    }

    #[test]
    fn formatting_scales_and_says_the_unit() {
        assert_eq!(format_value(9.8e10, "FLOP/s"), "98.0 GFLOP/s");
        assert_eq!(format_value(73.6e9, "FLOP/s"), "73.6 GFLOP/s");
        assert_eq!(format_value(1.5e6, "B/s"), "1.50 MB/s");
        assert_eq!(format_value(12.0, "OP/s"), "12.0 OP/s");
        assert_eq!(format_value(2.5e-8, "s"), "25.0 ns");
        assert_eq!(format_value(0.0042, "s"), "4.20 ms");
        assert_eq!(format_bytes_iec(32 << 20), "32.0 MiB");
        assert_eq!(format_bytes_iec(512), "512 B");
    }
}
