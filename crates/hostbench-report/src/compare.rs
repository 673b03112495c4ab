//! Two runs compared record by record, with a verdict a CI pipeline can act on.
//!
//! Records match by identity: benchmark id plus parameters (key order ignored), so a record of a
//! new subsystem matches its counterpart without any code here knowing it. For each pair the
//! verdict uses both runs' samples: the change must be statistically significant (Welch's
//! unequal-variance t-test, two-sided, α = 0.05 by default) *and* larger than a noise floor
//! (2 % by default: on a shared machine a significant 0.5 % is still noise to a person). A pair
//! with fewer than two samples on a side cannot be tested and is judged by the noise floor
//! alone. A regression larger than `threshold` is what `history compare` turns into exit code 4.

use std::fmt::Write as _;

use hostbench_core::model::{Metric, Record, RunResult};
use serde_json::Value;

use crate::table::{param_text, HEADER};
use crate::units;

/// How strict the comparison is.
#[derive(Debug, Clone, Copy)]
pub struct CompareConfig {
    /// Relative change below which a difference is noise whatever the test says.
    pub noise: f64,
    /// Relative regression that fails the comparison (exit code 4).
    pub threshold: f64,
    /// Significance level of the t-test.
    pub alpha: f64,
}

impl Default for CompareConfig {
    fn default() -> Self {
        Self {
            noise: 0.02,
            threshold: 0.05,
            alpha: 0.05,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Improved,
    Regressed,
    WithinNoise,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::WithinNoise => "within noise",
        }
    }
}

/// One matched pair.
#[derive(Debug, Clone)]
pub struct Change {
    pub benchmark: String,
    pub params: String,
    pub unit: String,
    pub metric: Metric,
    pub mean_a: f64,
    pub mean_b: f64,
    /// (b − a) / a.
    pub relative: f64,
    /// Two-sided p-value of Welch's test, when both sides have two or more samples.
    pub p_value: Option<f64>,
    pub verdict: Verdict,
    /// A regression larger than the threshold (and not explained by the conditions).
    pub fails: bool,
    /// Where the two runs' conditions differ in a cause that explains the change: "run B: cgroup
    /// quota of 1.0 CPU for 2 threads: throttled 412 times". A regression with a measured cause
    /// is not a regression of the machine, so it does not fail the comparison.
    pub conditions: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Comparison {
    pub changes: Vec<Change>,
    /// Identities present in only one run.
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
}

impl Comparison {
    pub fn count(&self, v: Verdict) -> usize {
        self.changes.iter().filter(|c| c.verdict == v).count()
    }

    pub fn failures(&self) -> usize {
        self.changes.iter().filter(|c| c.fails).count()
    }
}

/// A record's identity across runs: benchmark id and parameters with sorted keys.
pub fn identity(r: &Record) -> String {
    let mut keys: Vec<&String> = r.params.keys().collect();
    keys.sort();
    let mut s = r.benchmark.clone();
    for k in keys {
        let v = &r.params[k.as_str()];
        let v = match v {
            Value::String(x) => x.clone(),
            other => other.to_string(),
        };
        s.push_str(&format!(" {k}={v}"));
    }
    s
}

pub fn compare(a: &RunResult, b: &RunResult, cfg: &CompareConfig) -> Comparison {
    let mut out = Comparison::default();
    let b_ids: Vec<String> = b.records.iter().map(identity).collect();
    let a_ids: Vec<String> = a.records.iter().map(identity).collect();
    for (ra, id) in a.records.iter().zip(&a_ids) {
        match b_ids.iter().position(|x| x == id) {
            Some(j) => out.changes.push(change(ra, &b.records[j], cfg)),
            None => out.only_a.push(id.clone()),
        }
    }
    for (id, _) in b_ids.iter().zip(&b.records) {
        if !a_ids.contains(id) {
            out.only_b.push(id.clone());
        }
    }
    out
}

/// A fleet as one run: per record identity the median over the nodes that have it (a figure
/// from fewer than half the nodes is left out: its median would speak for a minority). The
/// samples are dropped, so comparing two of these judges each median by the noise floor alone;
/// the per-node comparisons carry the statistics.
pub fn fleet_medians(runs: &[RunResult]) -> Option<RunResult> {
    let first = runs.first()?;
    let mut order: Vec<String> = Vec::new();
    let mut by_id: std::collections::HashMap<String, (Record, Vec<f64>)> =
        std::collections::HashMap::new();
    for run in runs {
        for r in &run.records {
            let id = identity(r);
            by_id
                .entry(id.clone())
                .or_insert_with(|| {
                    order.push(id);
                    (r.clone(), Vec::new())
                })
                .1
                .push(r.value);
        }
    }
    let mut out = first.clone();
    out.records = order
        .into_iter()
        .filter_map(|id| by_id.remove(&id))
        .filter(|(_, v)| 2 * v.len() >= runs.len())
        .map(|(mut r, mut v)| {
            v.sort_by(f64::total_cmp);
            let m = v.len();
            let median = if m % 2 == 1 {
                v[m / 2]
            } else {
                (v[m / 2 - 1] + v[m / 2]) / 2.0
            };
            r.value = median;
            r.samples.clear();
            r.stats.n = m;
            r.stats.mean = median;
            r.stats.median = median;
            r.stats.min = v[0];
            r.stats.max = v[m - 1];
            r
        })
        .collect();
    out.host.hostname = format!("{} nodes (median)", runs.len());
    Some(out)
}

fn change(a: &Record, b: &Record, cfg: &CompareConfig) -> Change {
    let (ma, mb) = (mean_of(a), mean_of(b));
    let relative = if ma != 0.0 { (mb - ma) / ma } else { 0.0 };
    let gain = match a.metric {
        Metric::Throughput => relative,
        Metric::Latency => -relative,
    };
    let p_value = welch_p(&a.samples, &b.samples);
    let significant = p_value.is_none_or(|p| p < cfg.alpha);
    let verdict = if !significant || relative.abs() <= cfg.noise {
        Verdict::WithinNoise
    } else if gain > 0.0 {
        Verdict::Improved
    } else {
        Verdict::Regressed
    };
    // A cause that only the slower side shows explains the change.
    let (slower, faster, side) = if gain < 0.0 { (b, a, "B") } else { (a, b, "A") };
    let conditions = (verdict != Verdict::WithinNoise)
        .then(|| condition_difference(slower, faster))
        .flatten()
        .map(|d| format!("run {side}: {d}"));
    Change {
        conditions: conditions.clone(),
        benchmark: a.benchmark.clone(),
        params: a
            .params
            .iter()
            .map(|(k, v)| param_text(k, v))
            .collect::<Vec<_>>()
            .join(" "),
        unit: a.unit.clone(),
        metric: a.metric,
        mean_a: ma,
        mean_b: mb,
        relative,
        p_value,
        verdict,
        fails: verdict == Verdict::Regressed && gain.abs() > cfg.threshold && conditions.is_none(),
    }
}

/// The first measured condition `slower` carries and `faster` does not (none_found is no cause,
/// and a LINPACK solve's own overhead is the benchmark's, not the machine's).
fn condition_difference(slower: &Record, faster: &Record) -> Option<String> {
    let d = slower.diagnosis.iter().find(|d| {
        d.is_condition()
            && (d.share >= 0.05 || d.cause.counts_at_any_share())
            && !faster.diagnosis.iter().any(|f| f.cause == d.cause)
    })?;
    Some(format!("{} ({})", d.text, d.cause))
}

fn mean_of(r: &Record) -> f64 {
    if r.samples.is_empty() {
        r.value
    } else {
        r.samples.iter().sum::<f64>() / r.samples.len() as f64
    }
}

/// Two-sided p-value of Welch's t-test; `None` when a side has fewer than two samples.
pub fn welch_p(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let stats = |x: &[f64]| {
        let n = x.len() as f64;
        let m = x.iter().sum::<f64>() / n;
        let v = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0);
        (n, m, v)
    };
    let (na, ma, va) = stats(a);
    let (nb, mb, vb) = stats(b);
    let (sa, sb) = (va / na, vb / nb);
    let se2 = sa + sb;
    if se2 <= 0.0 {
        // No spread on either side: any difference is certain, none is none.
        return Some(if ma == mb { 1.0 } else { 0.0 });
    }
    let t = (mb - ma) / se2.sqrt();
    let df = se2 * se2 / (sa * sa / (na - 1.0) + sb * sb / (nb - 1.0));
    Some(student_t_two_sided_p(t, df))
}

/// P(|T| ≥ |t|) for Student's t with `df` degrees of freedom: I_{df/(df+t²)}(df/2, 1/2).
pub fn student_t_two_sided_p(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    let x = df / (df + t * t);
    incomplete_beta(x, df / 2.0, 0.5).clamp(0.0, 1.0)
}

/// Regularised incomplete beta I_x(a, b) by its continued fraction (Numerical Recipes §6.4).
fn incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(x, a, b) / a
    } else {
        1.0 - front * beta_cf(1.0 - x, b, a) / b
    }
}

fn beta_cf(x: f64, a: f64, b: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    // One modified-Lentz step: the factor the fraction's value changes by.
    let mut step = |aa: f64| {
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        d * c
    };
    for m in 1..300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        h *= step(m * (b - m) * x / ((qam + m2) * (a + m2)));
        let del = step(-(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)));
        h *= del;
        if (del - 1.0).abs() < 1e-12 {
            break;
        }
    }
    h
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut s = G[0];
    for (i, g) in G.iter().enumerate().skip(1) {
        s += g / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + s.ln()
}

/// The comparison as a table for the terminal.
pub fn render_text(cmp: &Comparison, cfg: &CompareConfig, a_name: &str, b_name: &str) -> String {
    let mut rows: Vec<[String; 6]> = vec![[
        HEADER[0].to_string(),
        a_name.to_string(),
        b_name.to_string(),
        "Change".into(),
        "p (Welch)".into(),
        "Verdict".into(),
    ]];
    for c in &cmp.changes {
        let sign = if c.relative >= 0.0 { "+" } else { "" };
        rows.push([
            format!("{} {}", c.benchmark, c.params),
            units::human(c.mean_a, &c.unit),
            units::human(c.mean_b, &c.unit),
            format!("{sign}{:.1} %", c.relative * 100.0),
            c.p_value.map_or("—".into(), |p| format!("{p:.3}")),
            if c.conditions.is_some() && c.verdict == Verdict::Regressed {
                format!("{} (conditions differ)", c.verdict.as_str())
            } else if c.fails {
                format!(
                    "{} (beyond {:.0} %)",
                    c.verdict.as_str(),
                    cfg.threshold * 100.0
                )
            } else {
                c.verdict.as_str().to_string()
            },
        ]);
    }
    let mut out = crate::export::aligned(&rows);
    let explained: Vec<&Change> = cmp
        .changes
        .iter()
        .filter(|c| c.conditions.is_some())
        .collect();
    if !explained.is_empty() {
        let _ = writeln!(
            out,
            "\nConditions differ (a change with a measured cause is not the machine's):"
        );
        for c in explained {
            let _ = writeln!(
                out,
                "  {} {}: {}",
                c.benchmark,
                c.params,
                c.conditions.as_deref().unwrap_or("")
            );
        }
    }
    if !cmp.only_a.is_empty() {
        let _ = writeln!(out, "\nOnly in {a_name}:");
        for id in &cmp.only_a {
            let _ = writeln!(out, "  {id}");
        }
    }
    if !cmp.only_b.is_empty() {
        let _ = writeln!(out, "\nOnly in {b_name}:");
        for id in &cmp.only_b {
            let _ = writeln!(out, "  {id}");
        }
    }
    let _ = writeln!(
        out,
        "\n{} improved, {} regressed ({} beyond {:.0} %), {} within noise (noise floor {:.0} %, Welch's t-test at α = {})",
        cmp.count(Verdict::Improved),
        cmp.count(Verdict::Regressed),
        cmp.failures(),
        cfg.threshold * 100.0,
        cmp.count(Verdict::WithinNoise),
        cfg.noise * 100.0,
        cfg.alpha
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::{record, synthetic_run};
    use serde_json::json;

    #[test]
    fn t_distribution_matches_tables() {
        // Two-sided 5 % critical values: df 10 → 2.228, df 2 → 4.303, df 30 → 2.042.
        for (t, df) in [(2.228, 10.0), (4.303, 2.0), (2.042, 30.0)] {
            let p = student_t_two_sided_p(t, df);
            assert!((p - 0.05).abs() < 5e-4, "t={t} df={df}: p={p}");
        }
        assert!((student_t_two_sided_p(0.0, 5.0) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn verdicts_use_samples_noise_floor_and_direction() {
        let cfg = CompareConfig::default();
        let tp = |s: &[f64]| record("x.t", Metric::Throughput, "B/s", json!({"threads": 1}), s);
        let lat = |s: &[f64]| record("x.l", Metric::Latency, "s", json!({"threads": 1}), s);
        // 10 % lower throughput, tight samples: regressed beyond 5 %.
        let c = change(&tp(&[100.0, 101.0, 99.0]), &tp(&[90.0, 91.0, 89.0]), &cfg);
        assert_eq!(c.verdict, Verdict::Regressed);
        assert!(c.fails);
        // 10 % lower latency is an improvement.
        let c = change(&lat(&[100.0, 101.0, 99.0]), &lat(&[90.0, 91.0, 89.0]), &cfg);
        assert_eq!(c.verdict, Verdict::Improved);
        // Same mean shift but samples all over the place: not significant.
        let c = change(&tp(&[60.0, 140.0, 100.0]), &tp(&[50.0, 130.0, 90.0]), &cfg);
        assert_eq!(c.verdict, Verdict::WithinNoise);
        // Significant but below the noise floor.
        let c = change(&tp(&[100.0, 100.1, 99.9]), &tp(&[99.0, 99.1, 98.9]), &cfg);
        assert_eq!(c.verdict, Verdict::WithinNoise);
        // A 3 % regression is reported but does not fail a 5 % threshold.
        let c = change(&tp(&[100.0, 100.1, 99.9]), &tp(&[97.0, 97.1, 96.9]), &cfg);
        assert_eq!(c.verdict, Verdict::Regressed);
        assert!(!c.fails);
        // One sample each: judged by the noise floor.
        let c = change(&tp(&[100.0]), &tp(&[80.0]), &cfg);
        assert_eq!((c.verdict, c.p_value), (Verdict::Regressed, None));
    }

    #[test]
    fn a_regression_with_a_measured_cause_says_so_and_does_not_fail() {
        use hostbench_core::conditions::diagnose::Diagnosis;
        let cfg = CompareConfig::default();
        let tp = |s: &[f64]| {
            record(
                "cpu.flops",
                Metric::Throughput,
                "FLOP/s",
                json!({"threads": 2}),
                s,
            )
        };
        let a = tp(&[100.0, 101.0, 99.0]);
        let mut b = tp(&[50.0, 51.0, 49.0]);
        b.diagnosis = vec![Diagnosis {
            cause: "cgroup_quota".into(),
            share: 0.5,
            text: "cgroup quota of 1.0 CPU for 2 threads: throttled 412 times".into(),
        }];
        let c = change(&a, &b, &cfg);
        assert_eq!(c.verdict, Verdict::Regressed);
        assert!(!c.fails);
        assert_eq!(
            c.conditions.as_deref(),
            Some(
                "run B: cgroup quota of 1.0 CPU for 2 threads: throttled 412 times (cgroup_quota)"
            )
        );
        let cmp = Comparison {
            changes: vec![c],
            ..Comparison::default()
        };
        let text = render_text(&cmp, &cfg, "A", "B");
        assert!(text.contains("regressed (conditions differ)"), "{text}");
        assert!(text.contains("Conditions differ"), "{text}");
        // The same cause on both sides explains nothing: the regression fails.
        let mut a2 = a.clone();
        a2.diagnosis = b.diagnosis.clone();
        let c = change(&a2, &b, &cfg);
        assert!(c.fails && c.conditions.is_none());
        // Nor does a LINPACK solve's own overhead, which is the benchmark's, not the machine's:
        // a slower solver must fail the comparison.
        let mut b3 = b.clone();
        b3.diagnosis = vec![Diagnosis {
            cause: "solve_overhead".into(),
            share: 0.5,
            text: "the solve reached 50 % of the FMA rate measured beside it".into(),
        }];
        let c = change(&a, &b3, &cfg);
        assert!(c.fails && c.conditions.is_none());
    }

    #[test]
    fn records_match_by_identity_whatever_the_key_order() {
        let a = synthetic_run();
        let mut b = synthetic_run();
        b.records.retain(|r| r.benchmark != "gpu.launch");
        // Same parameters, other insertion order.
        let r = &mut b.records[0];
        let mut rev = serde_json::Map::new();
        for (k, v) in r.params.iter().rev() {
            rev.insert(k.clone(), v.clone());
        }
        r.params = rev;
        let cmp = compare(&a, &b, &CompareConfig::default());
        assert_eq!(cmp.changes.len(), a.records.len() - 1);
        assert_eq!(cmp.only_a.len(), 1);
        assert!(cmp.only_b.is_empty());
        assert_eq!(cmp.count(Verdict::WithinNoise), cmp.changes.len());
        let text = render_text(&cmp, &CompareConfig::default(), "#1", "#2");
        assert!(text.contains("Only in #1:"), "{text}");
        assert!(text.contains("0 regressed"), "{text}");
    }
}
