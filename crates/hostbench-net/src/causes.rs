//! A paced sender that fell behind its schedule as a cause of a latency-under-load record's
//! shortfall (`sender_behind`): the net subsystem's answer to `Subsystem::causes`.
//!
//! Only this crate knows what a `net.latency` record's `extra` means (`offered_bps` beside
//! `sent_bps`, `behind_samples`, `sent_share_min`: its under-load client writes them), so the
//! cause is read here and handed to core's diagnosis, which ranks it with the conditions'
//! (issue 53: subsystems own their causes; core holds no benchmark ids).

use hostbench_core::model::{Cause, Diagnosis, Record, Trigger, KEPT_SCHEDULE};
use hostbench_core::units::{format_value, sample_list};

/// The benchmark whose paced sender this reads.
const LATENCY: &str = "net.latency";

/// A latency under load whose paced sender fell behind (`net.latency` with `offered_bps` and
/// `sent_bps`): the load was not offered, and the round trips timed from each message's due
/// time include the sender's wait. The share is the part of the offered rate not sent. Where
/// the median sample kept up but some fell behind or sent late (`behind_samples`), those
/// samples' round trips are the sender's, and so is the spread: named only where there is a
/// spread (or another shortfall), with their share of the samples.
pub fn sender_behind(rec: &Record) -> Option<Diagnosis> {
    if rec.benchmark != LATENCY {
        return None;
    }
    let x = |k: &str| rec.extra.get(k).and_then(|v| v.as_f64());
    let (offered, sent) = (x("offered_bps")?, x("sent_bps")?);
    if !(offered > 0.0 && sent < KEPT_SCHEDULE * offered) {
        let which: Vec<usize> = rec
            .extra
            .get("behind_samples")?
            .as_array()?
            .iter()
            .filter_map(|i| Some(i.as_u64()? as usize))
            .collect();
        if which.is_empty() || Trigger::of(rec).shortfall().is_none() {
            return None;
        }
        let n = rec.samples.len().max(1);
        let least = x("sent_share_min").map_or(String::new(), |s| {
            format!(
                " (the least any sent: {:.0} % of the messages due)",
                100.0 * s
            )
        });
        return Some(Diagnosis::new(
            Cause::SenderBehind,
            which.len() as f64 / n as f64,
            format!(
                "the sender fell behind its schedule or sent late in {} of {n}{least}: those \
                 round trips include its wait, so the spread is the sender's; the median \
                 sample's are not",
                sample_list(&which),
            ),
        ));
    }
    let from_send = x("p50_uncorrected_s").map_or(String::new(), |s| {
        format!(" (timed from the actual send: {})", format_value(s, "s"))
    });
    Some(Diagnosis::new(
        Cause::SenderBehind,
        1.0 - sent / offered,
        format!(
            "the sender fell behind its schedule: it sent {} of the {} offered ({:.0} %), so \
             the round trips timed from each message's due time include its wait{from_send}",
            format_value(sent, "bit/s"),
            format_value(offered, "bit/s"),
            100.0 * sent / offered
        ),
    ))
}

#[cfg(test)]
mod tests {
    use hostbench_core::conditions::diagnose::testdata::{diagnose_as_committed, quiet};
    use hostbench_core::model::{Metric, Record, Work};
    use hostbench_core::runner::{record_from_samples, Case};

    /// What the runner does at commit: this subsystem's causes, then the diagnosis.
    fn diagnose(r: &mut Record) {
        diagnose_as_committed(r, &crate::Net);
    }

    /// A latency under load whose sender fell behind is diagnosed even without a peak to fall
    /// short of: the figure is the sender's, and the summary's one line must say so.
    #[test]
    fn a_sender_behind_its_schedule_is_named_without_a_peak() {
        let under_load = |sent: f64| {
            let case = Case::new("net.latency", Metric::Latency, "s")
                .work(Work::Network)
                .param("proto", "udp")
                .param("load_bps", "90%");
            let mut r = record_from_samples(&case, vec![0.138; 3]);
            for (k, v) in [
                ("offered_bps", 22.9e9),
                ("sent_bps", sent),
                ("p50_uncorrected_s", 175e-6),
            ] {
                r.extra.insert(k.into(), serde_json::json!(v));
            }
            r.conditions = Some(quiet());
            r
        };
        let mut r = under_load(10.67e9);
        diagnose(&mut r);
        let causes: Vec<&str> = r.diagnosis.iter().map(|d| d.cause.as_str()).collect();
        assert_eq!(causes, ["sender_behind", "none_found"], "{:?}", r.diagnosis);
        let d = &r.diagnosis[0];
        assert!((d.share - (1.0 - 10.67 / 22.9)).abs() < 1e-9);
        assert!(
            d.text.starts_with(
                "the sender fell behind its schedule: it sent 10.7 Gbit/s of the 22.9 Gbit/s \
                     offered (47 %)"
            ),
            "{}",
            d.text
        );
        assert!(
            d.text.ends_with("(timed from the actual send: 175 µs)"),
            "{}",
            d.text
        );
        assert!(!d.is_condition());
        // A sender that kept its schedule, or one just behind on a steady record: nothing.
        for sent in [22.5e9, 21.0e9] {
            let mut r = under_load(sent);
            diagnose(&mut r);
            assert!(r.diagnosis.is_empty(), "{sent}: {:?}", r.diagnosis);
        }
        // The median sample kept up, the first fell behind: the spread is the sender's.
        let mut r = under_load(22.8e9);
        r.samples = vec![0.194, 29e-6, 37e-6];
        r.stats = hostbench_core::stats::summarize(&r.samples);
        r.extra
            .insert("behind_samples".into(), serde_json::json!([0]));
        r.extra
            .insert("sent_share_min".into(), serde_json::json!(0.51));
        diagnose(&mut r);
        let d = &r.diagnosis[0];
        assert_eq!(d.cause, "sender_behind", "{:?}", r.diagnosis);
        assert!((d.share - 1.0 / 3.0).abs() < 1e-9);
        assert!(
            d.text.starts_with(
                "the sender fell behind its schedule or sent late in sample 1 of 3 (the least \
                     any sent: 51 % of the messages due)"
            ),
            "{}",
            d.text
        );
        // On a steady record the sample behind made no spread to explain: nothing.
        r.diagnosis.clear();
        r.samples = vec![29e-6; 3];
        r.stats = hostbench_core::stats::summarize(&r.samples);
        diagnose(&mut r);
        assert!(r.diagnosis.is_empty(), "{:?}", r.diagnosis);
    }
}
