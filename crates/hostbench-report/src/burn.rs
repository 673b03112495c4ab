//! `burn.html`: the burn-in's page (issue 51 item 5), one self-contained file in the run report's
//! style: the verdict line, the units table, and the timeline drawn as charts.
//!
//! Why here: the run report's line charts (`chart::Lines`, plotters, the embedded font, the HTML
//! legend) already draw value against a measured quantity with ringed points, so the timeline is
//! built as such charts and drawn by the same code rather than by a second renderer.
//!
//! The timeline charts: each unit's rate over time relative to its first interval (100 %), one
//! line per unit, one chart per resource (cpu, mem, disk), a resource with more than
//! `MAX_LINES` units continued in further charts so no chart is an unreadable tangle; the units
//! the burn warned about (a rate falling more than 10 %) have their last full interval ringed.
//! Under them, the mean CPU clock and the hottest temperature per interval, each drawn only from
//! readings the record holds, and said to be "not readable here" where it holds none.

use std::fmt::Write as _;

use hostbench_core::burn::{TimelinePoint, UnitRun};
use hostbench_core::model::Metric;

use crate::chart::{Chart, Kind, Lines, Series, XAxis, YAxis};
use crate::error::ReportError;
use crate::export::html::{esc, figure, figure_bodies, STYLE};

/// Lines per timeline chart before a resource's units continue in another chart.
const MAX_LINES: usize = 8;
/// The y unit of the rate charts.
const RELATIVE: &str = "% of first interval";

/// What the page shows: the burn record's parts, whichever crate holds the record.
#[derive(Debug, Clone, Copy)]
pub struct BurnPage<'a> {
    /// The verdict line, as printed first (`PASS 123 results checked, 0 wrong`).
    pub verdict_line: &'a str,
    /// What ran where (schema, duration, CPU model, CPUs, an injected fault).
    pub meta: &'a str,
    pub units: &'a [UnitRun],
    pub timeline: &'a [TimelinePoint],
    /// The burn's warning lines, shown as written.
    pub warnings: &'a [String],
    /// The units those warnings are about (a rate that fell): ringed on the chart.
    pub warned: &'a [String],
}

/// The page as HTML.
pub fn html(page: &BurnPage<'_>) -> Result<String, ReportError> {
    let rates = rate_charts(page.timeline, page.units, page.warned);
    let conditions = condition_charts(page.timeline);
    let rate_bodies = figure_bodies(&rates)?;
    let cond_bodies = figure_bodies(&conditions.iter().flatten().cloned().collect::<Vec<_>>())?;
    write_page(page, (&rates, &rate_bodies), &conditions, &cond_bodies)
        .map_err(|e| ReportError::bad(format!("formatting burn.html: {e}")))
}

fn write_page(
    page: &BurnPage<'_>,
    (rates, rate_bodies): (&[Chart], &[String]),
    conditions: &[Option<Chart>; 2],
    cond_bodies: &[String],
) -> Result<String, std::fmt::Error> {
    let mut o = String::new();
    let title = "hostbench burn-in";
    writeln!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>"
    )?;
    writeln!(
        o,
        "<p class=\"verdict\"><strong>{}</strong></p>",
        esc(page.verdict_line)
    )?;
    writeln!(o, "<p class=\"meta\">{}</p>", esc(page.meta))?;
    if !page.warnings.is_empty() {
        writeln!(o, "<ul class=\"notes\">")?;
        for w in page.warnings {
            writeln!(o, "<li>{}</li>", esc(w))?;
        }
        writeln!(o, "</ul>")?;
    }
    units_table(&mut o, page.units)?;
    writeln!(o, "<section id=\"timeline\">\n<h2>Timeline</h2>")?;
    if rates.is_empty() {
        writeln!(o, "<p class=\"common\">No timeline in this record.</p>")?;
    } else {
        writeln!(
            o,
            "<p class=\"common\">Each unit's rate per interval relative to its first interval \
             (100 %); x: seconds since the start of the burn. One chart per resource, one line \
             per unit{}; a ringed point is the last full interval of a unit whose rate fell more \
             than 10 % (a warning).</p>",
            if rates.len() > distinct_resources(rates) {
                format!(
                    " (a resource with more than {MAX_LINES} units is continued in another chart)"
                )
            } else {
                String::new()
            }
        )?;
    }
    for (c, body) in rates.iter().zip(rate_bodies) {
        figure(&mut o, c, body)?;
    }
    let rateless: Vec<&str> = unit_names(page.timeline)
        .into_iter()
        .filter(|n| rate_series(n, page.timeline, false).is_none())
        .collect();
    if !rateless.is_empty() {
        writeln!(
            o,
            "<p class=\"common\">Not drawn (no rate in any interval): {}.</p>",
            esc(&rateless.join(", "))
        )?;
    }
    writeln!(o, "<h2>Clock and temperature</h2>")?;
    let mut bodies = cond_bodies.iter();
    for (c, what) in conditions
        .iter()
        .zip(["Mean CPU clock", "Hottest temperature"])
    {
        match (c, bodies.next().filter(|_| c.is_some())) {
            (Some(c), Some(body)) => figure(&mut o, c, body)?,
            _ => writeln!(
                o,
                "<p class=\"common\">{what}: not readable here (the record holds no reading; \
                 nothing is drawn).</p>"
            )?,
        }
    }
    writeln!(o, "</section>\n</body>\n</html>")?;
    Ok(o)
}

fn distinct_resources(charts: &[Chart]) -> usize {
    let mut r: Vec<&str> = charts.iter().map(|c| c.subsystem.as_str()).collect();
    r.dedup();
    r.len()
}

fn units_table(o: &mut String, units: &[UnitRun]) -> std::fmt::Result {
    writeln!(
        o,
        "<h2>Units</h2>\n<div class=\"scroll\"><table class=\"results\">\n<tr><th>unit</th>\
         <th>place</th><th>phase</th><th>status</th><th>checks</th><th>errors</th><th>rate</th>\
         <th>first wrong value / note</th></tr>"
    )?;
    for u in units {
        let first = u.first_error.as_ref().map_or_else(
            || u.note.clone().unwrap_or_default(),
            |m| {
                format!(
                    "{}: expected {} got {}, bits {:?}",
                    m.location, m.expected, m.got, m.bits
                )
            },
        );
        writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{:.3e} {}</td><td>{}</td></tr>",
            esc(&u.unit),
            esc(&u.place),
            esc(&u.phase),
            u.status.name(),
            u.checks,
            u.errors,
            u.rate,
            esc(&u.rate_unit),
            esc(&first)
        )?;
    }
    writeln!(o, "</table></div>")
}

/// The timeline's units in order of first appearance.
fn unit_names(timeline: &[TimelinePoint]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for p in timeline {
        if !names.contains(&p.unit.as_str()) {
            names.push(&p.unit);
        }
    }
    names
}

fn line_chart(id: String, title: String, resource: &str, unit: &str, series: Vec<Series>) -> Chart {
    Chart {
        id,
        title,
        subsystem: resource.to_string(),
        kind: Kind::Lines(Lines {
            x_label: "Time since start".into(),
            x: XAxis::Quantity("s".into()),
            unit: unit.into(),
            metric: Metric::Throughput,
            series,
            notes: Vec::new(),
            y: YAxis::Auto,
            levels: Vec::new(),
            ring_means: None,
        }),
    }
}

/// A series of one unit's rate relative to its first interval with a rate, the last full
/// interval ringed where the unit was `warned` about. `None` when it never had a rate.
fn rate_series(name: &str, timeline: &[TimelinePoint], warned: bool) -> Option<Series> {
    let pts: Vec<&TimelinePoint> = timeline.iter().filter(|p| p.unit == name).collect();
    let base = pts
        .iter()
        .find(|p| p.rate > 0.0 && p.rate.is_finite())?
        .rate;
    // The burn compares the first and last full intervals (the ends are partial): ring the last
    // full one, or the last where there are too few for that.
    let ringed = pts.len().saturating_sub(if pts.len() >= 4 { 2 } else { 1 });
    let mut s = Series {
        name: name.to_string(),
        points: Vec::new(),
        peaks: Vec::new(),
        tips: Vec::new(),
        dashed_like: None,
        rings: Vec::new(),
    };
    for (i, p) in pts.iter().enumerate() {
        let rel = 100.0 * p.rate / base;
        let ring = warned && i == ringed;
        s.points.push((p.t_s, rel, 0.0));
        s.rings.push(ring);
        s.tips.push(format!(
            "{name} at {:.1} s: {rel:.1} % ({:.3e} {}){}",
            p.t_s,
            p.rate,
            p.rate_unit,
            if ring {
                "; warn: rate fell more than 10 %"
            } else {
                ""
            }
        ));
    }
    Some(s)
}

/// The rate charts: per resource (from `units`; `other` for a unit the table does not name), one
/// line per unit, at most `MAX_LINES` a chart.
pub fn rate_charts(timeline: &[TimelinePoint], units: &[UnitRun], warned: &[String]) -> Vec<Chart> {
    // The memory burn names its timeline units `mem-PATTERN`, its table rows `PATTERN`; the GPU
    // burn `PLACE UNIT`.
    let resource_of = |name: &str| {
        units
            .iter()
            .find(|u| {
                u.unit == name
                    || name
                        .strip_prefix(u.resource.as_str())
                        .and_then(|n| n.strip_prefix('-'))
                        == Some(u.unit.as_str())
                    // The GPU burn names them `PLACE UNIT` (`cuda0 fma-f32`): one line per device.
                    || name
                        .strip_prefix(u.place.as_str())
                        .and_then(|n| n.strip_prefix(' '))
                        == Some(u.unit.as_str())
            })
            .map_or("other", |u| u.resource.as_str())
    };
    let names = unit_names(timeline);
    let mut resources: Vec<&str> = names.iter().map(|n| resource_of(n)).collect();
    resources.dedup();
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for res in resources {
        if seen.contains(&res) {
            continue;
        }
        seen.push(res);
        let series: Vec<Series> = names
            .iter()
            .filter(|n| resource_of(n) == res)
            .filter_map(|n| rate_series(n, timeline, warned.iter().any(|w| w == n)))
            .collect();
        let parts = series.len().div_ceil(MAX_LINES);
        for (k, chunk) in series.chunks(MAX_LINES).enumerate() {
            let part = if parts > 1 {
                format!(" ({} of {parts})", k + 1)
            } else {
                String::new()
            };
            let mut c = line_chart(
                format!("burn-{res}-{k}"),
                format!("{res}: rate over time, relative to the first interval{part}"),
                res,
                RELATIVE,
                chunk.to_vec(),
            );
            if let Kind::Lines(l) = &mut c.kind {
                l.ring_means = Some("rate fell more than 10 % (warn)".into());
            }
            out.push(c);
        }
    }
    out
}

/// The clock and temperature charts, `None` for one the record holds no reading of. The
/// readings are per interval, whichever unit's point carries them: one per distinct time.
pub fn condition_charts(timeline: &[TimelinePoint]) -> [Option<Chart>; 2] {
    let per_time = |get: fn(&TimelinePoint) -> Option<f64>| -> Vec<(f64, f64, f64)> {
        let mut v: Vec<(f64, f64, f64)> = Vec::new();
        for p in timeline {
            if let Some(x) = get(p).filter(|x| x.is_finite()) {
                if !v.iter().any(|q| (q.0 - p.t_s).abs() < 1e-9) {
                    v.push((p.t_s, x, 0.0));
                }
            }
        }
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    };
    let one = |id: &str, title: &str, name: &str, unit: &str, points: Vec<(f64, f64, f64)>| {
        (!points.is_empty()).then(|| {
            let tips = points
                .iter()
                .map(|p| format!("{name} at {:.1} s: {}", p.0, crate::units::human(p.1, unit)))
                .collect();
            line_chart(
                id.into(),
                title.into(),
                "conditions",
                unit,
                vec![Series {
                    name: name.into(),
                    points,
                    peaks: Vec::new(),
                    tips,
                    dashed_like: None,
                    rings: Vec::new(),
                }],
            )
        })
    };
    [
        one(
            "burn-clock",
            "Mean CPU clock per interval",
            "mean CPU clock",
            "Hz",
            per_time(|p| p.clock_mhz.map(|c| c * 1e6)),
        ),
        one(
            "burn-temperature",
            "Hottest temperature per interval",
            "hottest thermal zone",
            "°C",
            per_time(|p| p.temp_c),
        ),
    ]
}

/// How many points of `chart` are ringed (the warned units' last full intervals).
pub fn rings(chart: &Chart) -> usize {
    match &chart.kind {
        Kind::Lines(l) => l
            .series
            .iter()
            .map(|s| s.rings.iter().filter(|r| **r).count())
            .sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t: f64, unit: &str, rate: f64, clock: Option<f64>) -> TimelinePoint {
        TimelinePoint {
            t_s: t,
            unit: unit.into(),
            rate,
            rate_unit: "checks/s".into(),
            clock_mhz: clock,
            temp_c: None,
            power_w: None,
            others_cpus: None,
        }
    }

    fn unit(name: &str, resource: &str) -> UnitRun {
        UnitRun::new(resource, "all", "all", name, "checks/s")
    }

    /// A unit whose rate falls by half, warned about, gets its last full interval ringed in red
    /// with the warning as the ring's tooltip; the steady one gets none.
    #[test]
    fn a_warned_falling_rate_is_ringed_on_the_chart() {
        let mut timeline = Vec::new();
        for (i, t) in [1.0, 2.0, 3.0, 4.0, 5.0].iter().enumerate() {
            timeline.push(point(*t, "fma-chain", 1e9 / (1.0 + i as f64), Some(3000.0)));
            timeline.push(point(*t, "int-lcg", 2e9, Some(3000.0)));
        }
        let units = [unit("fma-chain", "cpu"), unit("int-lcg", "cpu")];
        let warned = vec!["fma-chain".to_string()];
        let page = BurnPage {
            verdict_line: "PASS 10 results checked, 0 wrong",
            meta: "test",
            units: &units,
            timeline: &timeline,
            warnings: &["warn fma-chain: rate fell 60 %".to_string()],
            warned: &warned,
        };
        let html = html(&page).unwrap();
        // A ring on the plot (the legend's swatch has one too, without a tooltip).
        let red = "stroke=\"#C80000\"";
        let ringed: Vec<&str> = html
            .lines()
            .filter(|l| l.starts_with("<circle") && l.contains(red) && l.contains("<title>"))
            .collect();
        assert_eq!(ringed.len(), 1, "{html}");
        assert!(
            ringed[0].contains("<title>fma-chain at 4.0 s: 25.0 %"),
            "{}",
            ringed[0]
        );
        assert!(ringed[0].contains("warn: rate fell"), "{}", ringed[0]);
        assert!(
            html.contains("rate fell more than 10 % (warn)"),
            "legend names the ring"
        );
        // Clock read, temperature not: one drawn, the other said.
        assert!(html.contains("Mean CPU clock per interval"));
        assert!(
            html.contains("Hottest temperature: not readable here"),
            "{html}"
        );

        // Not warned: nothing ringed.
        let page = BurnPage {
            warned: &[],
            ..page
        };
        let html = super::html(&page).unwrap();
        assert!(!html
            .lines()
            .any(|l| l.starts_with("<circle") && l.contains(red)));
    }

    /// Many units of one resource (named `mem-PATTERN` on the timeline, as the memory burn names
    /// them) are split into charts of at most `MAX_LINES` lines, every unit drawn once.
    #[test]
    fn many_units_continue_in_further_charts() {
        let names: Vec<String> = (0..11).map(|i| format!("u{i}")).collect();
        let mut timeline = Vec::new();
        for t in [1.0, 2.0] {
            for n in &names {
                timeline.push(point(t, &format!("mem-{n}"), 5.0, None));
            }
        }
        let units: Vec<UnitRun> = names.iter().map(|n| unit(n, "mem")).collect();
        let charts = rate_charts(&timeline, &units, &[]);
        assert_eq!(charts.len(), 2);
        assert!(charts.iter().all(|c| c.subsystem == "mem"), "{charts:?}");
        let drawn: usize = charts
            .iter()
            .map(|c| match &c.kind {
                Kind::Lines(l) => l.series.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(drawn, 11);
        assert!(charts.iter().all(|c| rings(c) == 0));
        assert!(condition_charts(&timeline).iter().all(Option::is_none));
        assert!(crate::chart::svg(&charts[0]).is_ok());
    }
}
