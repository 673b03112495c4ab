//! The fleet statistics of one figure: median, range, spread and the robust deviation, and which
//! nodes are outliers.
//!
//! Why the median and the median absolute deviation (MAD) rather than mean and standard
//! deviation: in a fleet the interesting nodes are the few bad ones, and a mean and a standard
//! deviation are pulled towards exactly those nodes, hiding them. The median and the MAD ignore
//! up to half the fleet being odd. 1.4826 · MAD estimates the standard deviation of a normal
//! population, so "3.5 robust deviations" reads like a z-score (Iglewicz and Hoaglin's modified
//! z-score, whose customary limit is 3.5).
//!
//! Two rules, either makes an outlier:
//! - *threshold*: worse than the median by more than the threshold (default 10 %): for a
//!   higher-is-better figure `value < median · (1 − t)`, for a lower-is-better one (latency)
//!   `value > median · (1 + t)`. Only the bad side: a node faster than its peers is not a problem
//!   this rule is meant to find.
//! - *robust*: `|value − median| / max(1.4826 · MAD, 1 % of the median) > 3.5`, either side,
//!   when MAD > 0 (when more than half the nodes agree exactly, MAD is 0 and this rule says
//!   nothing; the threshold rule still does). The floor is the repeatability of a measurement on
//!   a real machine: three nodes at 8.190, 8.191 and 8.205 GFLOP/s have a MAD of almost nothing,
//!   and without the floor the third would be "dozens of robust deviations" away for a 0.2 %
//!   difference no benchmark can resolve.
//!
//! Spread is `(max − min) / median`: the fleet's range as a fraction of its typical node, so
//! 0.05 reads "the slowest and the fastest node are 5 % of a typical node apart".

use serde::{Deserialize, Serialize};

/// The default threshold of the threshold rule: 10 % worse than the fleet median.
pub const DEFAULT_OUTLIER: f64 = 0.10;
/// The robust rule's limit in robust deviations (the modified z-score's customary 3.5).
pub const ROBUST_LIMIT: f64 = 3.5;
/// Scales the MAD to estimate a normal population's standard deviation.
pub const MAD_SCALE: f64 = 1.4826;
/// The least robust deviation, as a fraction of the median: differences below a benchmark's
/// repeatability (about 1 % on a quiet machine) are not evidence of an odd node.
pub const NOISE_FLOOR: f64 = 0.01;

/// One robust deviation of `s`: 1.4826 · MAD, at least `NOISE_FLOOR` of the median.
pub fn robust_scale(s: &Summary) -> f64 {
    (MAD_SCALE * s.mad).max(NOISE_FLOOR * s.median.abs())
}

/// How outliers are found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FleetConfig {
    /// The threshold rule's fraction (0.10 = 10 %).
    pub outlier: f64,
    /// The robust rule's limit in robust deviations.
    pub robust_limit: f64,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            outlier: DEFAULT_OUTLIER,
            robust_limit: ROBUST_LIMIT,
        }
    }
}

/// Median, range, spread and MAD of one figure over the nodes that have it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// `(max − min) / median` (0 when the median is 0).
    pub spread: f64,
    /// Median absolute deviation from the median.
    pub mad: f64,
}

/// The median of `values` (the mean of the middle two for an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    hostbench_core::stats::percentile_sorted(&sorted, 50.0)
}

/// The summary of `values`, or `None` when there are none.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    if values.is_empty() {
        return None;
    }
    let med = median(values);
    let deviations: Vec<f64> = values.iter().map(|v| (v - med).abs()).collect();
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some(Summary {
        n: values.len(),
        median: med,
        min,
        max,
        spread: if med != 0.0 {
            (max - min) / med.abs()
        } else {
            0.0
        },
        mad: median(&deviations),
    })
}

/// Why `value` is an outlier of a figure with summary `s`, or `None` when it is not.
pub fn outlier_why(
    value: f64,
    s: &Summary,
    higher_is_better: bool,
    cfg: &FleetConfig,
) -> Option<String> {
    let mut why = Vec::new();
    if s.median != 0.0 {
        let rel = (value - s.median) / s.median.abs();
        if higher_is_better && value < s.median * (1.0 - cfg.outlier) {
            why.push(format!("{:.1} % below the fleet median", -100.0 * rel));
        } else if !higher_is_better && value > s.median * (1.0 + cfg.outlier) {
            why.push(format!(
                "{:.1} % above the fleet median (lower is better)",
                100.0 * rel
            ));
        }
    }
    if s.mad > 0.0 {
        let scale = robust_scale(s);
        let z = (value - s.median) / scale;
        if z.abs() > cfg.robust_limit {
            let side = if z < 0.0 { "below" } else { "above" };
            // Just past the limit must not read as the limit itself ("3.5" for 3.52).
            let digits = if (z.abs() * 10.0).round() / 10.0 <= cfg.robust_limit {
                2
            } else {
                1
            };
            why.push(format!(
                "{:.digits$} robust deviations {side} the median",
                z.abs()
            ));
        }
    }
    (!why.is_empty()).then(|| why.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> FleetConfig {
        FleetConfig::default()
    }

    #[test]
    fn median_and_mad() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        // Deviations from 3: 2, 1, 0, 1, 97 -> median 1.
        let s = summarize(&[1.0, 2.0, 3.0, 4.0, 100.0]).unwrap();
        assert_eq!(s.median, 3.0);
        assert_eq!(s.mad, 1.0);
        assert_eq!((s.min, s.max), (1.0, 100.0));
        assert_eq!(s.spread, 99.0 / 3.0);
        assert!(summarize(&[]).is_none());
    }

    #[test]
    fn differences_below_the_noise_floor_are_not_outliers() {
        let s = summarize(&[8.190, 8.191, 8.205]).unwrap();
        assert!(s.mad > 0.0);
        assert!(outlier_why(8.205, &s, true, &cfg()).is_none());
        // 10 % off is still far outside 1 % repeatability.
        assert!(outlier_why(9.0, &s, true, &cfg()).is_some());
    }

    #[test]
    fn one_node_is_never_an_outlier() {
        let s = summarize(&[5.0]).unwrap();
        assert_eq!((s.median, s.mad, s.spread), (5.0, 0.0, 0.0));
        assert!(outlier_why(5.0, &s, true, &cfg()).is_none());
        assert!(outlier_why(5.0, &s, false, &cfg()).is_none());
    }

    #[test]
    fn threshold_rule_looks_at_the_bad_side_only() {
        // Ten nodes at 100 and one at 85: MAD is 0, so only the threshold rule speaks.
        let mut v = vec![100.0; 10];
        v.push(85.0);
        let s = summarize(&v).unwrap();
        assert_eq!(s.mad, 0.0);
        let why = outlier_why(85.0, &s, true, &cfg()).unwrap();
        assert_eq!(why, "15.0 % below the fleet median");
        // Exactly at the threshold is not beyond it.
        assert!(outlier_why(90.0, &s, true, &cfg()).is_none());
        // Faster than the fleet: not flagged by the threshold rule.
        assert!(outlier_why(150.0, &s, true, &cfg()).is_none());
        // Latency: higher is worse.
        let why = outlier_why(115.0, &s, false, &cfg()).unwrap();
        assert_eq!(why, "15.0 % above the fleet median (lower is better)");
        assert!(outlier_why(85.0, &s, false, &cfg()).is_none());
        // A wider threshold lets 85 pass.
        let wide = FleetConfig {
            outlier: 0.2,
            ..cfg()
        };
        assert!(outlier_why(85.0, &s, true, &wide).is_none());
    }

    #[test]
    fn robust_rule_catches_both_sides_within_the_threshold() {
        // Tight fleet: 100 ± 0.1; a node 5 % off is within the 10 % threshold but far outside
        // the fleet's own scatter.
        let mut v: Vec<f64> = (0..20)
            .map(|i| 100.0 + 0.1 * (i % 3) as f64 - 0.1)
            .collect();
        v.push(95.0);
        v.push(105.0);
        let s = summarize(&v).unwrap();
        assert!(s.mad > 0.0);
        let low = outlier_why(95.0, &s, true, &cfg()).unwrap();
        assert!(low.ends_with("robust deviations below the median"), "{low}");
        let high = outlier_why(105.0, &s, true, &cfg()).unwrap();
        assert!(
            high.ends_with("robust deviations above the median"),
            "{high}"
        );
        assert!(outlier_why(100.0, &s, true, &cfg()).is_none());
        // Just past the limit is printed with the digit that shows it is past.
        let edge = s.median - 3.52 * robust_scale(&s);
        let why = outlier_why(edge, &s, true, &cfg()).unwrap();
        assert!(why.starts_with("3.52 robust"), "{why}");
    }

    #[test]
    fn both_rules_are_named_when_both_apply() {
        let mut v: Vec<f64> = (0..20).map(|i| 100.0 + (i % 2) as f64).collect();
        v.push(50.0);
        let s = summarize(&v).unwrap();
        let why = outlier_why(50.0, &s, true, &cfg()).unwrap();
        assert!(
            why.starts_with("50.") && why.contains("% below the fleet median; "),
            "{why}"
        );
        assert!(why.contains("robust deviations below"), "{why}");
    }

    #[test]
    fn ties_at_the_median_are_not_outliers() {
        let s = summarize(&[7.0, 7.0, 7.0, 7.0]).unwrap();
        assert_eq!((s.median, s.mad, s.spread), (7.0, 0.0, 0.0));
        assert!(outlier_why(7.0, &s, true, &cfg()).is_none());
    }
}
