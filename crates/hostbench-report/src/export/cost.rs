//! Figures per dollar-hour (issue 54, part 3), as the Phoronix Test Suite's perf-per-dollar: with
//! a node's price in USD per hour (`run --price-per-hour`, or the spec file's `[cost]
//! price_per_hour`) every throughput record gets `extra.per_dollar_hour`, its value divided by
//! the price (FLOP/s per USD/h), and the reports say once what the price was and where it came
//! from. A latency has no per-dollar figure: less of it per dollar is not a rate.

use hostbench_core::model::{Invocation, Metric, Record, RunResult};
use serde_json::Value;

use crate::units::human;

/// The `extra` key of a record's figure per dollar-hour.
pub const PER_DOLLAR_HOUR: &str = "per_dollar_hour";

/// Record the price on the run (`invocation.price_per_hour`, `.price_source`) and each
/// throughput record's figure per dollar-hour. `price` must be positive and finite (the flag
/// and the spec file check it before measuring); anything else changes nothing.
pub fn apply_price(run: &mut RunResult, price: f64, source: &str) {
    if !(price.is_finite() && price > 0.0) {
        return;
    }
    let inv = run.invocation.get_or_insert_with(Invocation::default);
    inv.price_per_hour = Some(price);
    inv.price_source = Some(source.to_string());
    for r in &mut run.records {
        if r.metric == Metric::Throughput && r.value.is_finite() {
            if let Some(n) = serde_json::Number::from_f64(r.value / price) {
                r.extra.insert(PER_DOLLAR_HOUR.into(), Value::Number(n));
            }
        }
    }
}

/// A record's figure per dollar-hour for a table cell: `480 MFLOP/s per $/h`.
pub fn per_dollar(r: &Record) -> Option<String> {
    let v = r.extra.get(PER_DOLLAR_HOUR)?.as_f64()?;
    Some(format!("{} per $/h", human(v, &r.unit)))
}

/// Once per report: the price and where it came from.
pub fn price_note(run: &RunResult) -> Option<String> {
    let inv = run.invocation.as_ref()?;
    let price = inv.price_per_hour?;
    let source = inv.price_source.as_deref().unwrap_or("unknown source");
    Some(format!(
        "{price} USD per hour (from {source}): each throughput figure is also given per dollar-hour \
         (its value divided by the price)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::synthetic_run;

    #[test]
    fn a_price_divides_every_throughput_figure_and_is_said_once() {
        let mut run = synthetic_run();
        assert_eq!(price_note(&run), None);
        assert!(run.records.iter().all(|r| per_dollar(r).is_none()));
        apply_price(&mut run, 2.5, "--price-per-hour");
        let inv = run.invocation.as_ref().unwrap();
        assert_eq!(inv.price_per_hour, Some(2.5));
        assert_eq!(inv.price_source.as_deref(), Some("--price-per-hour"));
        let mut seen = 0;
        for r in &run.records {
            let got = r.extra.get(PER_DOLLAR_HOUR).and_then(Value::as_f64);
            match r.metric {
                Metric::Throughput => {
                    let got = got.expect("a throughput record has a figure per dollar-hour");
                    assert!((got - r.value / 2.5).abs() <= 1e-9 * r.value.abs());
                    assert!(per_dollar(r).unwrap().ends_with(" per $/h"));
                    seen += 1;
                }
                Metric::Latency => assert_eq!(got, None),
            }
        }
        assert!(seen > 0);
        let note = price_note(&run).unwrap();
        assert!(
            note.starts_with("2.5 USD per hour (from --price-per-hour)"),
            "{note}"
        );
        // It reaches the JSON document.
        let json = serde_json::to_value(&run).unwrap();
        assert_eq!(json["invocation"]["price_per_hour"], 2.5);
    }

    #[test]
    fn no_price_or_a_bad_one_changes_nothing() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let mut run = synthetic_run();
            apply_price(&mut run, bad, "--price-per-hour");
            assert_eq!(price_note(&run), None);
            assert!(run.records.iter().all(|r| per_dollar(r).is_none()));
        }
    }

    #[test]
    fn the_reports_carry_the_price_and_the_figures_per_dollar() {
        use crate::export::Exporter;
        let mut run = synthetic_run();
        apply_price(&mut run, 2.5, "spec file node.toml");
        let md = crate::MarkdownExporter.render(&run).unwrap();
        assert!(
            md.contains("- Price: 2.5 USD per hour (from spec file node.toml)"),
            "{md}"
        );
        assert!(md.contains(" per $/h"));
        let html = crate::HtmlExporter.render(&run).unwrap();
        assert!(html.contains("2.5 USD per hour (from spec file node.toml)"));
        assert!(html.contains("class=\"dollar\""));
    }
}
