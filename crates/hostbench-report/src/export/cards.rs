//! The top of report.html: a host card, then one card per subsystem that answers "how good is
//! this machine?" at a glance — each headline figure (the terminal summary's rule: the best at
//! full concurrency, latency at the largest working set) with an efficiency gauge, its ratio to
//! the reference tool, and a one-line verdict.
//!
//! The gauge is inline SVG (the page has no script), a half circle filled to the share of the
//! theoretical peak; above 100 % it is full and the number says how far (an OpenCL device on the
//! CPU can beat a peak built from its reported clock). A figure without a theoretical limit gets
//! no gauge and says so, rather than an empty dial that reads as 0 %.

use std::fmt::{self, Write as _};

use hostbench_core::model::{Record, RunResult};

use super::html::esc;
use super::summary::{all_headlines, first_cause, no_cause, per_watt, spread_mark, Headline};
use crate::table::{short_name, subsystem, subsystem_title};
use crate::units::{bytes, human};

/// Headlines shown on one card; the rest are in the tables below it.
const PER_CARD: usize = 6;

/// How a figure stands against its limit and its reference tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Standing {
    /// At or near its limit, on par with the reference (or no reference ran).
    Good,
    /// Below its limit, or apart from the reference tool beyond the parity band.
    Fair,
    /// Far below its limit (under 70 %).
    Poor,
    /// No theoretical limit and no reference: nothing to stand against.
    Unknown,
}

impl Standing {
    fn class(self) -> &'static str {
        match self {
            Standing::Good => "good",
            Standing::Fair => "fair",
            Standing::Poor => "poor",
            Standing::Unknown => "unknown",
        }
    }
}

/// The verdict on one headline: its standing and the words for it.
pub fn verdict(r: &Record) -> (Standing, String) {
    let mut words = Vec::new();
    let mut standing = Standing::Unknown;
    if let Some(e) = r.efficiency {
        let (s, w) = match e {
            e if e >= 0.9 => (Standing::Good, "near its theoretical peak"),
            e if e >= 0.7 => (Standing::Fair, "below its theoretical peak"),
            _ => (Standing::Poor, "far below its theoretical peak"),
        };
        standing = s;
        words.push(w.to_string());
    }
    if let Some(x) = &r.reference {
        let band = hostbench_core::reference::PARITY_BAND;
        let (s, w) = if band.contains(&x.ratio) {
            (Standing::Good, format!("on par with {}", x.tool))
        } else if x.ratio > *band.end() {
            (Standing::Good, format!("ahead of {}", x.tool))
        } else {
            (Standing::Fair, format!("behind {}", x.tool))
        };
        standing = if standing == Standing::Unknown {
            s
        } else {
            standing.max(s)
        };
        words.push(w);
    }
    if let (None, Some(scaling)) = (r.efficiency, r.scaling_efficiency()) {
        words.push(format!(
            "no documented peak: {:.1} % of its threads' 1-thread rate (scaling)",
            100.0 * scaling
        ));
    }
    // A figure with neither stands alone: its card says why once (`no_limit_reason`).
    (standing, words.join("; "))
}

/// Why a figure has neither a theoretical limit nor a reference: the reason its subsystem gave
/// (a record's `extra.peak_note`, or its "no DRAM peak: …" / "no link limit: …" note), else a
/// plain "none known". Said once per card, not under every figure.
fn no_limit_reason(r: &Record) -> String {
    let noted = r.extra.get("peak_note").and_then(|v| v.as_str());
    let warned = r
        .warnings
        .iter()
        .find(|w| w.contains("no ") && (w.contains(" peak") || w.contains(" limit")));
    match noted.or(warned.map(String::as_str)) {
        Some(why) => why.to_string(),
        None => "no theoretical limit is known for it".to_string(),
    }
}

/// A half-circle gauge filled to `e` (clamped to 0..=1), its percentage in the middle.
pub fn gauge(e: f64) -> String {
    let f = e.clamp(0.0, 1.0);
    let (cx, cy, r) = (40.0, 40.0, 32.0);
    let angle = std::f64::consts::PI * f;
    let (x, y) = (cx - r * angle.cos(), cy - r * angle.sin());
    let class = match e {
        e if e >= 0.9 => "good",
        e if e >= 0.7 => "fair",
        _ => "poor",
    };
    format!(
        "<svg class=\"gauge\" viewBox=\"0 0 80 48\" width=\"80\" height=\"48\" role=\"img\" \
         aria-label=\"{pct:.0} % of theoretical peak\">\
         <path d=\"M 8 40 A 32 32 0 0 1 72 40\" class=\"track\"/>\
         <path d=\"M 8 40 A 32 32 0 0 1 {x:.2} {y:.2}\" class=\"fill {class}\"/>\
         <text x=\"40\" y=\"38\" text-anchor=\"middle\">{pct:.0}%</text></svg>",
        pct = 100.0 * e
    )
}

/// The host card and one card per subsystem with its headlines.
pub fn write(o: &mut String, run: &RunResult) -> fmt::Result {
    writeln!(o, "<div class=\"cards\">")?;
    host_card(o, run)?;
    // Subsystems in the order of the run (the tables' order).
    let heads = all_headlines(run);
    let mut prefixes: Vec<&str> = Vec::new();
    for h in &heads {
        let p = subsystem(h.benchmark);
        if !prefixes.contains(&p) {
            prefixes.push(p);
        }
    }
    for prefix in prefixes {
        let hs: Vec<&Headline<'_>> = heads
            .iter()
            .filter(|h| subsystem(h.benchmark) == prefix)
            .collect();
        subsystem_card(o, prefix, &hs)?;
    }
    writeln!(o, "</div>")
}

fn host_card(o: &mut String, run: &RunResult) -> fmt::Result {
    let h = &run.host;
    let c = &h.cpu;
    writeln!(
        o,
        "<div class=\"card host\">\n<h2>{}</h2>\n<dl>",
        esc(&h.hostname)
    )?;
    let mut row = |k: &str, v: String| writeln!(o, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(&v));
    row(
        "CPU",
        match &c.microarch {
            Some(m) => format!("{} ({m})", c.model),
            None => c.model.clone(),
        },
    )?;
    row(
        "Cores",
        format!(
            "{} cores, {} threads, {} socket{}",
            c.cores,
            c.threads,
            c.sockets,
            if c.sockets == 1 { "" } else { "s" }
        ),
    )?;
    if let Some(hz) = c.measured_hz.or(c.nominal_hz) {
        let how = if c.measured_hz.is_some() {
            "measured"
        } else {
            "nominal"
        };
        row("Clock", format!("{:.2} GHz ({how})", hz / 1e9))?;
    }
    if let Some(llc) = c
        .caches
        .iter()
        .filter(|x| x.kind != "instruction")
        .max_by_key(|x| x.level)
    {
        row(
            "Last-level cache",
            format!(
                "L{} {} × {}",
                llc.level,
                bytes(llc.size_bytes as f64),
                llc.instances
            ),
        )?;
    }
    if let Some(note) = &c.effective_cores_note {
        row("Effective cores", note.clone())?;
    }
    row("Memory", bytes(h.memory.total_bytes as f64))?;
    row("NUMA nodes", h.numa_nodes.to_string())?;
    row("OS", format!("{}, kernel {}", h.os, h.kernel))?;
    row("Virtualization", h.virtualization.clone())?;
    writeln!(o, "</dl>\n</div>")
}

fn subsystem_card(o: &mut String, prefix: &str, heads: &[&Headline<'_>]) -> fmt::Result {
    let worst = heads
        .iter()
        .map(|h| verdict(h.record).0)
        .filter(|s| *s != Standing::Unknown)
        .max()
        .unwrap_or(Standing::Unknown);
    writeln!(
        o,
        "<div class=\"card subsystem {}\" id=\"card-{}\">\n<h2><a href=\"#sec-{1}\">{}</a></h2>\n<ul class=\"headlines\">",
        worst.class(),
        esc(prefix),
        esc(&subsystem_title(prefix))
    )?;
    for h in heads.iter().take(PER_CARD) {
        let r = h.record;
        let (standing, words) = verdict(r);
        let label = match h.what.as_str() {
            "" => short_name(h.benchmark).to_string(),
            w => format!("{} {w}", short_name(h.benchmark)),
        };
        write!(o, "<li class=\"{}\">", standing.class())?;
        match r.efficiency {
            Some(e) => o.push_str(&gauge(e)),
            None if r.has_inferred_peak() => o.push_str(
                "<span class=\"nogauge\" title=\"no documented peak for this unit\">—</span>",
            ),
            None => {
                o.push_str("<span class=\"nogauge\" title=\"no theoretical limit known\">—</span>")
            }
        }
        write!(
            o,
            "<div><span class=\"what\">{}</span> <span class=\"figure\">{}</span>",
            esc(&label),
            esc(&human(r.value, &r.unit))
        )?;
        // A spread no cause was found for: marked beside the figure, the finding on hover (and
        // in full in the Conditions table), not a paragraph under every such figure.
        if let (Some(mark), Some(why)) = (spread_mark(r), no_cause(r)) {
            write!(
                o,
                " <span class=\"spread\" title=\"{}\">{}</span>",
                esc(&why),
                esc(&mark)
            )?;
        }
        if let Some(w) = per_watt(r) {
            write!(o, " <span class=\"watt\">{}</span>", esc(&w))?;
        }
        if let Some(d) = super::cost::per_dollar(r) {
            write!(o, " <span class=\"dollar\">{}</span>", esc(&d))?;
        }
        if let Some(x) = &r.reference {
            write!(
                o,
                " <span class=\"ratio\">×{:.2} {}{}</span>",
                x.ratio,
                esc(&x.tool),
                esc(&super::summary::like_for_like(r))
            )?;
        }
        write!(o, "<br><span class=\"at\">{}</span>", esc(&h.at))?;
        if !words.is_empty() {
            write!(o, "<br><span class=\"verdict\">{}</span>", esc(&words))?;
        }
        if let Some(cause) = first_cause(r) {
            write!(o, "<br><span class=\"cause\">{}</span>", esc(&cause))?;
        } else if let (None, Some(why)) = (spread_mark(r), no_cause(r)) {
            // Short of its peak with no cause found: the gauge says how far; the finding is on
            // hover.
            write!(
                o,
                " <span class=\"spread\" title=\"{}\">no cause found</span>",
                esc(&why)
            )?;
        }
        writeln!(o, "</div></li>")?;
    }
    writeln!(o, "</ul>")?;
    // The figures with neither a limit nor a reference, and why, once for the card.
    let mut reasons: Vec<(String, usize)> = Vec::new();
    for h in heads.iter().take(PER_CARD) {
        let r = h.record;
        if r.efficiency.is_some() || r.reference.is_some() || r.has_inferred_peak() {
            continue;
        }
        let why = no_limit_reason(r);
        match reasons.iter_mut().find(|(w, _)| *w == why) {
            Some((_, n)) => *n += 1,
            None => reasons.push((why, 1)),
        }
    }
    for (why, n) in &reasons {
        writeln!(
            o,
            "<p class=\"nolimit\">{} without a limit or reference to compare with: {}</p>",
            if *n == 1 {
                "1 figure".to_string()
            } else {
                format!("{n} figures")
            },
            esc(why)
        )?;
    }
    if heads.len() > PER_CARD {
        writeln!(
            o,
            "<p class=\"more\">and {} more headline figures in the tables below</p>",
            heads.len() - PER_CARD
        )?;
    }
    writeln!(o, "</div>")
}

/// The cards' CSS: a grid that is one column on a phone and several on a desktop.
pub const STYLE: &str = "
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 12px;
         margin: 1em 0 2em; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 0.6em 0.9em; background: #fafafa;
        border-top: 4px solid #bbb; }
.card h2 { margin: 0.1em 0 0.4em; font-size: 1.15em; border: none; }
.card h2 a { color: inherit; text-decoration: none; }
.card.good { border-top-color: #2e8b57; } .card.fair { border-top-color: #d4a017; }
.card.poor { border-top-color: #c0392b; }
.card dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; margin: 0;
           font-size: 0.9em; }
.card dt { color: #666; } .card dd { margin: 0; overflow-wrap: anywhere; }
ul.headlines { list-style: none; padding: 0; margin: 0; }
ul.headlines li { display: flex; gap: 8px; align-items: center; padding: 4px 0;
                  border-top: 1px solid #eee; font-size: 0.9em; }
ul.headlines li:first-child { border-top: none; }
.figure { font-weight: bold; } .spread { color: #9a7000; cursor: help; } .watt, .dollar { color: #444; } .ratio { color: #444; } .at, .more { color: #666; font-size: 0.9em; }
.nolimit { color: #666; font-size: 0.9em; margin: 0.3em 0 0; }
.verdict { font-size: 0.9em; } li.good .verdict { color: #2e7d4f; } li.fair .verdict { color: #9a7000; }
li.poor .verdict { color: #b03a2e; }
svg.gauge { flex: none; } svg.gauge text { font-size: 13px; font-family: inherit; }
svg.gauge path { fill: none; stroke-width: 8; } svg.gauge .track { stroke: #e3e3e3; }
svg.gauge .good { stroke: #2e8b57; } svg.gauge .fair { stroke: #d4a017; } svg.gauge .poor { stroke: #c0392b; }
.nogauge { flex: none; width: 80px; text-align: center; color: #999; }
";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::{record, synthetic_run};
    use hostbench_core::model::{Metric, Peak, Reference};

    fn with(eff: Option<f64>, ratio: Option<f64>) -> Record {
        let mut r = record(
            "cpu.flops",
            Metric::Throughput,
            "FLOP/s",
            serde_json::json!({"dtype": "f64", "threads": 2}),
            &[1e9],
        );
        if let Some(e) = eff {
            r.set_peak(Some(Peak {
                value: 1e9 / e,
                basis: "test".into(),
            }));
        }
        r.reference = ratio.map(|x| Reference {
            tool: "likwid-bench".into(),
            version: "5".into(),
            value: 1e9 / x,
            ratio: x,
        });
        r
    }

    #[test]
    fn verdicts_follow_efficiency_and_the_reference() {
        assert_eq!(verdict(&with(Some(0.95), None)).0, Standing::Good);
        assert_eq!(verdict(&with(Some(0.8), None)).0, Standing::Fair);
        assert_eq!(verdict(&with(Some(0.3), None)).0, Standing::Poor);
        let (s, w) = verdict(&with(Some(0.95), Some(0.8)));
        assert_eq!(s, Standing::Fair);
        assert!(w.contains("behind likwid-bench"), "{w}");
        let (s, w) = verdict(&with(None, Some(1.02)));
        assert_eq!(s, Standing::Good);
        assert!(w.contains("on par with likwid-bench"), "{w}");
        let (s, w) = verdict(&with(None, None));
        assert_eq!(s, Standing::Unknown);
        assert!(w.is_empty(), "{w}");
    }

    /// Figures with neither a limit nor a reference stand alone; the card says why once, with
    /// the reason their subsystem gave.
    #[test]
    fn a_card_says_once_why_its_figures_have_no_limit() {
        let mut run = synthetic_run();
        let why =
            "no DRAM peak: this host exposes no SMBIOS table (/sys/firmware/dmi/tables/DMI is \
                   absent, as in many VMs); give memory.dimm_mts and memory.channels in --spec";
        for r in run
            .records
            .iter_mut()
            .filter(|r| r.benchmark.starts_with("mem."))
        {
            r.set_peak(None);
            r.reference = None;
            r.warnings = vec![why.into()];
        }
        let mut o = String::new();
        write(&mut o, &run).unwrap();
        let card = &o[o.find("id=\"card-mem\"").expect("mem card")..];
        let card = &card[..card.find("</div>\n<div").unwrap_or(card.len())];
        assert_eq!(
            card.matches("without a limit or reference").count(),
            1,
            "{card}"
        );
        assert!(
            card.contains("no DRAM peak: this host exposes no SMBIOS table"),
            "{card}"
        );
        assert!(
            !card.contains("no theoretical limit or reference"),
            "{card}"
        );
        assert!(!card.contains("class=\"verdict\""), "{card}");
    }

    /// A unit with no documented rate (Zen 4's bf16): no gauge and no "near its peak", the
    /// scaling given by its name.
    #[test]
    fn an_inferred_peak_gets_no_gauge_and_names_the_scaling() {
        let mut r = with(None, None);
        r.set_inferred_peak(Peak {
            value: 1e9 / 0.993,
            basis: "inferred from the 1-thread run".into(),
        });
        let (s, w) = verdict(&r);
        assert_eq!(s, Standing::Unknown);
        assert!(
            w.contains("no documented peak") && w.contains("99.3 %") && w.contains("scaling"),
            "{w}"
        );
        assert!(!w.contains("near its theoretical peak"), "{w}");
        let mut run = synthetic_run();
        run.records.retain(|x| x.benchmark != "cpu.flops");
        run.records.insert(0, r);
        let mut o = String::new();
        write(&mut o, &run).unwrap();
        let card = &o[o.find("id=\"card-cpu\"").expect("cpu card")..];
        let item = &card[..card.find("</li>").expect("item")];
        assert!(!item.contains("class=\"gauge\""), "{item}");
        assert!(item.contains("no documented peak"), "{item}");
    }

    /// A figure that varied with no cause found gets the mark beside it and the finding on
    /// hover, not a sentence under it; a found cause keeps its line.
    #[test]
    fn no_cause_found_is_a_mark_with_the_finding_on_hover() {
        use hostbench_core::conditions::diagnose::Diagnosis;
        let mut noisy = record(
            "mem.bandwidth",
            Metric::Throughput,
            "B/s",
            serde_json::json!({"kernel": "read", "threads": 2}),
            &[30e9, 40e9, 31e9],
        );
        noisy.diagnosis = vec![Diagnosis {
            cause: "none_found".into(),
            share: 0.0,
            text: "no cause found among: steal".into(),
        }];
        let mut run = crate::testdata::run_of(vec![noisy.clone()]);
        let mut o = String::new();
        write(&mut o, &run).unwrap();
        let mark = super::super::summary::spread_mark(&noisy).unwrap();
        assert!(
            o.contains(&format!(
                "<span class=\"spread\" title=\"{}\">{mark}</span>",
                esc(&super::super::summary::no_cause(&noisy).unwrap())
            )),
            "{o}"
        );
        assert!(!o.contains("class=\"cause\""), "{o}");
        run.records[0].diagnosis = vec![Diagnosis {
            cause: "steal".into(),
            share: 0.3,
            text: "steal 30 % of CPU time".into(),
        }];
        let mut o = String::new();
        write(&mut o, &run).unwrap();
        assert!(o.contains("<span class=\"cause\">steal (30 %): steal 30 % of CPU time</span>"));
        assert!(!o.contains("class=\"spread\""), "{o}");
    }

    #[test]
    fn gauge_fills_to_the_share_and_caps_at_full() {
        let half = gauge(0.5);
        // Half way round the arc is straight above the centre.
        assert!(half.contains("A 32 32 0 0 1 40.00 8.00"), "{half}");
        assert!(half.contains(">50%<"));
        let over = gauge(1.2);
        assert!(
            over.contains("A 32 32 0 0 1 72.00 40.00") && over.contains(">120%<"),
            "{over}"
        );
    }

    #[test]
    fn a_card_per_subsystem_after_the_host() {
        let run = synthetic_run();
        let mut o = String::new();
        write(&mut o, &run).unwrap();
        assert!(o.starts_with("<div class=\"cards\">"));
        let host = o.find("card host").expect("host card");
        let cpu = o.find("id=\"card-cpu\"").expect("cpu card");
        assert!(host < cpu);
        let heads = all_headlines(&run).len();
        let shown = o.matches("<li class=").count();
        assert!(shown > 0 && shown <= heads, "{shown} of {heads}");
        // Every record with an efficiency on a card has a gauge.
        assert!(o.contains("class=\"gauge\""));
    }
}
