//! Summary statistics over a record's samples.
//!
//! `value` in a record is the median: robust against the one sample a neighbour disturbed on a
//! shared machine. Mean ± standard deviation (n − 1) and a Student-t 95 % confidence interval are
//! reported beside it, as the classic reports did, and CV above 5 % marks a record noisy.

use crate::model::Stats;

/// CV above which a record carries a "noisy" warning (DESIGN.md §5); part of the result
/// model, which says when a record is noisy.
pub use crate::model::NOISY_CV;

/// Summarise samples. Empty input gives all-zero stats with n = 0.
pub fn summarize(samples: &[f64]) -> Stats {
    let n = samples.len();
    if n == 0 {
        return Stats::default();
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mean = samples.iter().sum::<f64>() / n as f64;
    let stddev = if n > 1 {
        let ss: f64 = samples.iter().map(|x| (x - mean).powi(2)).sum();
        (ss / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    let half = if n > 1 {
        t95(n - 1) * stddev / (n as f64).sqrt()
    } else {
        0.0
    };
    Stats {
        n,
        mean,
        median: percentile_sorted(&sorted, 50.0),
        stddev,
        min: sorted[0],
        max: sorted[n - 1],
        cv: if mean != 0.0 {
            stddev / mean.abs()
        } else {
            0.0
        },
        ci95: [mean - half, mean + half],
        p50: None,
        p99: None,
        p999: None,
    }
}

/// Percentile `p` (0–100) of sorted data by linear interpolation between closest ranks.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let rank = (p / 100.0).clamp(0.0, 1.0) * (n - 1) as f64;
            let lo = rank.floor() as usize;
            let hi = rank.ceil() as usize;
            sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
        }
    }
}

/// Two-sided 95 % quantile of Student's t with `df` degrees of freedom.
pub fn t95(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[df - 1],
        31..=60 => 2.000,
        61..=120 => 1.980,
        _ => 1.960,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn summary_of_known_samples() {
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.n, 8);
        assert!(close(s.mean, 5.0));
        assert!(close(s.median, 4.5));
        // Sample standard deviation (n − 1) of this classic set is sqrt(32/7).
        assert!(close(s.stddev, (32.0f64 / 7.0).sqrt()));
        assert_eq!((s.min, s.max), (2.0, 9.0));
        assert!(close(s.cv, s.stddev / 5.0));
        let half = 2.365 * s.stddev / 8f64.sqrt();
        assert!(close(s.ci95[0], 5.0 - half) && close(s.ci95[1], 5.0 + half));
    }

    #[test]
    fn three_repetitions_median_is_middle_value() {
        let s = summarize(&[10.0, 30.0, 20.0]);
        assert_eq!(s.median, 20.0);
        assert!(close(s.stddev, 10.0));
        assert!(close(s.ci95[1] - s.mean, 4.303 * 10.0 / 3f64.sqrt()));
    }

    #[test]
    fn degenerate_inputs() {
        assert_eq!(summarize(&[]).n, 0);
        let one = summarize(&[3.0]);
        assert_eq!((one.median, one.stddev, one.ci95), (3.0, 0.0, [3.0, 3.0]));
        assert!(percentile_sorted(&[], 50.0).is_nan());
        assert_eq!(percentile_sorted(&[1.0, 2.0, 3.0, 4.0, 5.0], 99.0), 4.96);
    }

    #[test]
    fn t_quantiles() {
        assert_eq!(t95(2), 4.303);
        assert_eq!(t95(1000), 1.96);
        assert!(t95(0).is_infinite());
    }
}
