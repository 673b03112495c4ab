//! Completion-latency histograms (HdrHistogram, 3 significant digits: ≤ 0.1 % error), merged
//! across threads, with percentiles clamped to the observed minimum and maximum.
//!
//! The clamp matters: a bucketed histogram reports a bucket's representative value, which can lie
//! above the largest sample ever recorded (fio #1984 printed a p99.99 above its own max). Values
//! are recorded in nanoseconds from 1 ns up to an hour, so no real completion saturates it (fio's
//! histogram stops at 17 s).

use hdrhistogram::Histogram;

/// Latency distribution of completions, in nanoseconds.
#[derive(Debug, Clone)]
pub struct LatencyHist {
    h: Histogram<u64>,
    /// Exact extremes: the histogram only knows its buckets' bounds.
    min_ns: u64,
    max_ns: u64,
}

/// The summary a record carries (seconds).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

const MAX_NS: u64 = 3_600_000_000_000;

impl Default for LatencyHist {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHist {
    pub fn new() -> Self {
        // 1 ns .. 1 h at 3 significant digits: constant, valid bounds, so this cannot fail.
        let h = Histogram::new_with_bounds(1, MAX_NS, 3).expect("constant histogram bounds");
        Self {
            h,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }

    /// Record one completion latency (clamped into the histogram's range).
    #[inline]
    pub fn record_ns(&mut self, ns: u64) {
        let ns = ns.clamp(1, MAX_NS);
        self.h.saturating_record(ns);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    pub fn merge(&mut self, other: &LatencyHist) {
        // Same bounds on both sides, so adding cannot fail; saturate rather than lose the sample.
        let _ = self.h.add(&other.h);
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    pub fn count(&self) -> u64 {
        self.h.len()
    }

    /// The `p`-th percentile (0–100) in nanoseconds, clamped to [min, max].
    pub fn percentile_ns(&self, p: f64) -> u64 {
        if self.h.is_empty() {
            return 0;
        }
        let v = self.h.value_at_quantile((p / 100.0).clamp(0.0, 1.0));
        v.clamp(self.min_ns, self.max_ns)
    }

    /// Fill a record's percentile fields (seconds) from this distribution.
    pub fn fill_stats(&self, stats: &mut crate::model::Stats) -> LatencySummary {
        let s = self.summary();
        stats.p50 = Some(s.p50);
        stats.p99 = Some(s.p99);
        stats.p999 = Some(s.p999);
        s
    }

    pub fn summary(&self) -> LatencySummary {
        let s = |ns: u64| ns as f64 / 1e9;
        let empty = self.h.is_empty();
        LatencySummary {
            count: self.count(),
            min: s(if empty { 0 } else { self.min_ns }),
            mean: self.h.mean() / 1e9,
            p50: s(self.percentile_ns(50.0)),
            p90: s(self.percentile_ns(90.0)),
            p99: s(self.percentile_ns(99.0)),
            p999: s(self.percentile_ns(99.9)),
            max: s(if empty { 0 } else { self.max_ns }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_follow_the_distribution_and_stay_within_min_max() {
        let mut h = LatencyHist::new();
        for v in 1..=1000u64 {
            h.record_ns(v * 1000); // 1 µs .. 1 ms, uniform
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert!((s.p50 - 500e-6).abs() / 500e-6 < 0.002, "{s:?}");
        assert!((s.p90 - 900e-6).abs() / 900e-6 < 0.002, "{s:?}");
        assert!((s.p99 - 990e-6).abs() / 990e-6 < 0.002, "{s:?}");
        assert!(s.p999 <= s.max && s.min <= s.p50);
        assert_eq!(s.min, 1e-6);
        assert_eq!(s.max, 1e-3);
        // A single odd value: every percentile is that value, never above the max.
        let mut one = LatencyHist::new();
        one.record_ns(123_457);
        assert_eq!(one.percentile_ns(99.99), 123_457);
        assert_eq!(one.percentile_ns(0.0), 123_457);
    }

    #[test]
    fn merging_adds_counts_and_extremes() {
        let (mut a, mut b) = (LatencyHist::new(), LatencyHist::new());
        a.record_ns(10);
        b.record_ns(1_000_000);
        b.record_ns(0); // clamped to 1 ns rather than lost
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.summary().min, 1e-9);
        assert_eq!(a.summary().max, 1e-3);
        assert_eq!(LatencyHist::new().summary().p99, 0.0);
    }
}
