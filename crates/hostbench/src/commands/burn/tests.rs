//! The slowdown rule of the burn's timeline: a fall of more than 10 % is a warning, one
//! disturbed interval is not, and a fall while neighbours took the CPUs is a note.

use super::*;

fn series(rates: &[f64], others: &[Option<f64>]) -> Vec<TimelinePoint> {
    rates
        .iter()
        .zip(others)
        .enumerate()
        .map(|(i, (&rate, &others_cpus))| TimelinePoint {
            t_s: i as f64,
            unit: "fma".into(),
            rate,
            rate_unit: "GFLOP/s".into(),
            clock_mhz: Some(3000.0),
            temp_c: None,
            power_w: None,
            others_cpus,
        })
        .collect()
}

#[test]
fn a_steady_fall_is_a_warning_with_the_conditions() {
    let t = series(
        &[5.0, 10.0, 10.0, 10.0, 7.0, 7.0, 7.0, 3.0],
        &[Some(0.0); 8],
    );
    let s = slowdowns(&t);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].0.as_deref(), Some("fma"));
    assert!(s[0].1.starts_with("warn fma: rate fell 30 %"), "{}", s[0].1);
    assert!(s[0].1.contains("clock 3000 MHz"), "{}", s[0].1);
}

#[test]
fn one_disturbed_interval_is_not_a_slowdown() {
    // The last full interval alone fell by half; the medians of the thirds did not move.
    let t = series(&[5.0, 10.0, 10.0, 10.0, 10.0, 10.0, 5.0, 3.0], &[None; 8]);
    assert!(slowdowns(&t).is_empty());
    // Too few full intervals to judge: nothing.
    assert!(slowdowns(&series(&[1.0, 9.0, 1.0], &[None; 3])).is_empty());
}

#[test]
fn a_fall_while_neighbours_took_the_cpus_is_a_note_not_a_warning() {
    let busy = [
        None,
        Some(0.0),
        Some(0.0),
        Some(0.1),
        Some(0.9),
        Some(0.9),
        Some(0.9),
        None,
    ];
    let t = series(&[5.0, 10.0, 10.0, 10.0, 6.0, 6.0, 6.0, 3.0], &busy);
    let s = slowdowns(&t);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].0, None, "{}", s[0].1);
    assert!(s[0].1.starts_with("note fma: rate fell 40 %"), "{}", s[0].1);
    assert!(s[0].1.contains("took 0.90 CPUs"), "{}", s[0].1);
    // Without the others' readings (an old record, or /proc unreadable) it stays a warning.
    let t = series(&[5.0, 10.0, 10.0, 10.0, 6.0, 6.0, 6.0, 3.0], &[None; 8]);
    assert_eq!(slowdowns(&t)[0].0.as_deref(), Some("fma"));
}
