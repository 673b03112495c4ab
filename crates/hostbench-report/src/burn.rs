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
    let conditions = condition_charts(page.timeline, page.units);
    let gpu = gpu_condition_charts(page.timeline, page.units);
    let rate_bodies = figure_bodies(&rates)?;
    let cond_bodies = figure_bodies(&conditions.iter().flatten().cloned().collect::<Vec<_>>())?;
    let gpu_bodies = figure_bodies(&gpu)?;
    write_page(
        page,
        (&rates, &rate_bodies),
        (&conditions, &cond_bodies),
        (&gpu, &gpu_bodies),
    )
    .map_err(|e| ReportError::bad(format!("formatting burn.html: {e}")))
}

fn write_page(
    page: &BurnPage<'_>,
    (rates, rate_bodies): (&[Chart], &[String]),
    (conditions, cond_bodies): (&[Option<Chart>; 2], &[String]),
    (gpu, gpu_bodies): (&[Chart], &[String]),
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
    let burned_gpu = page
        .units
        .iter()
        .any(|u| u.resource == "gpu" && u.seconds > 0.0);
    if burned_gpu {
        writeln!(o, "<h2>GPU clock, temperature and power</h2>")?;
        if gpu.is_empty() {
            writeln!(
                o,
                "<p class=\"common\">GPU readings: not readable here (no NVML reading in the \
                 record; nothing is drawn).</p>"
            )?;
        }
        for (c, body) in gpu.iter().zip(gpu_bodies) {
            figure(&mut o, c, body)?;
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
        let first = u
            .first_error
            .as_ref()
            .map_or_else(|| u.note.clone().unwrap_or_default(), |m| m.describe());
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
/// The resource of a timeline unit, from the units table (`other` for one it does not name). The
/// memory burn names its timeline units `mem-PATTERN`, its table rows `PATTERN`; the GPU burn
/// `PLACE UNIT` (`cuda0 fma-f32`: one line per device).
fn resource_of<'a>(units: &'a [UnitRun], name: &str) -> &'a str {
    units
        .iter()
        .find(|u| {
            u.unit == name
                || name
                    .strip_prefix(u.resource.as_str())
                    .and_then(|n| n.strip_prefix('-'))
                    == Some(u.unit.as_str())
                || name
                    .strip_prefix(u.place.as_str())
                    .and_then(|n| n.strip_prefix(' '))
                    == Some(u.unit.as_str())
        })
        .map_or("other", |u| u.resource.as_str())
}

pub fn rate_charts(timeline: &[TimelinePoint], units: &[UnitRun], warned: &[String]) -> Vec<Chart> {
    let resource_of = |name: &str| resource_of(units, name);
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

/// A series' points: (seconds since the start, value, unused spread).
type Points = Vec<(f64, f64, f64)>;

/// One reading per distinct time from `points` (the readings are per interval, whichever unit's
/// point carries them), in time order.
fn per_time<'a>(
    points: impl Iterator<Item = &'a TimelinePoint>,
    get: fn(&TimelinePoint) -> Option<f64>,
) -> Vec<(f64, f64, f64)> {
    let mut v: Vec<(f64, f64, f64)> = Vec::new();
    for p in points {
        if let Some(x) = get(p).filter(|x| x.is_finite()) {
            if !v.iter().any(|q| (q.0 - p.t_s).abs() < 1e-9) {
                v.push((p.t_s, x, 0.0));
            }
        }
    }
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// A chart of readings, one series per source, tooltips naming source, time and value; `None`
/// where no source has a reading.
fn readings_chart(
    id: &str,
    title: &str,
    unit: &str,
    sources: Vec<(String, Points)>,
) -> Option<Chart> {
    let series: Vec<Series> = sources
        .into_iter()
        .filter(|(_, pts)| !pts.is_empty())
        .map(|(name, points)| Series {
            tips: points
                .iter()
                .map(|p| format!("{name} at {:.1} s: {}", p.0, crate::units::human(p.1, unit)))
                .collect(),
            name,
            points,
            peaks: Vec::new(),
            dashed_like: None,
            rings: Vec::new(),
        })
        .collect();
    (!series.is_empty()).then(|| line_chart(id.into(), title.into(), "conditions", unit, series))
}

/// The GPUs' SM clock, temperature and power per interval (NVML's, on the GPU burn's points),
/// one series per device, each chart only where some device has that reading.
pub fn gpu_condition_charts(timeline: &[TimelinePoint], units: &[UnitRun]) -> Vec<Chart> {
    let mut places: Vec<&str> = Vec::new();
    for p in timeline
        .iter()
        .filter(|p| resource_of(units, &p.unit) == "gpu")
    {
        let place = p.unit.split(' ').next().unwrap_or_default();
        if !places.contains(&place) {
            places.push(place);
        }
    }
    let sources = |get: fn(&TimelinePoint) -> Option<f64>| -> Vec<(String, Points)> {
        places
            .iter()
            .map(|place| {
                let mine = timeline
                    .iter()
                    .filter(|p| p.unit.split(' ').next() == Some(place));
                (place.to_string(), per_time(mine, get))
            })
            .collect()
    };
    [
        readings_chart(
            "burn-gpu-clock",
            "GPU SM clock per interval",
            "Hz",
            sources(|p| p.clock_mhz.map(|c| c * 1e6)),
        ),
        readings_chart(
            "burn-gpu-temperature",
            "GPU temperature per interval",
            "°C",
            sources(|p| p.temp_c),
        ),
        readings_chart(
            "burn-gpu-power",
            "GPU power per interval",
            "W",
            sources(|p| p.power_w),
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The CPU's clock and temperature charts, `None` for one the record holds no reading of (the
/// GPU burn's points, which carry the GPU's readings, are left to `gpu_condition_charts`).
pub fn condition_charts(timeline: &[TimelinePoint], units: &[UnitRun]) -> [Option<Chart>; 2] {
    let cpu = || {
        timeline
            .iter()
            .filter(|p| resource_of(units, &p.unit) != "gpu")
    };
    let one =
        |id: &str, title: &str, name: &str, unit: &str, get: fn(&TimelinePoint) -> Option<f64>| {
            readings_chart(
                id,
                title,
                unit,
                vec![(name.to_string(), per_time(cpu(), get))],
            )
        };
    [
        one(
            "burn-clock",
            "Mean CPU clock per interval",
            "mean CPU clock",
            "Hz",
            |p| p.clock_mhz.map(|c| c * 1e6),
        ),
        one(
            "burn-temperature",
            "Hottest temperature per interval",
            "hottest thermal zone",
            "°C",
            |p| p.temp_c,
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
        assert!(condition_charts(&timeline, &units)
            .iter()
            .all(Option::is_none));
        assert!(crate::chart::svg(&charts[0]).is_ok());
    }

    /// The GPU burn's points (`cuda0 fma-f32`) are drawn in the gpu chart, and their NVML
    /// readings in the GPU panel, one series per device: the CPU clock chart holds only the CPU
    /// points' readings.
    #[test]
    fn gpu_points_have_their_own_charts_and_readings() {
        let gpu_unit = |name: &str, place: &str| {
            let mut u = UnitRun::new("gpu", place, "all", name, "FLOP/s");
            u.seconds = 1.0;
            u
        };
        let units = vec![
            unit("fma-chain", "cpu"),
            gpu_unit("fma-f32", "cuda0"),
            gpu_unit("fma-f32", "cuda1"),
        ];
        let mut timeline = Vec::new();
        for t in [1.0, 2.0, 3.0] {
            timeline.push(point(t, "fma-chain", 5.0, Some(2600.0)));
            for (place, watts) in [("cuda0", 650.0), ("cuda1", 640.0)] {
                let mut p = point(t + 10.0, &format!("{place} fma-f32"), 5e13, Some(1980.0));
                p.temp_c = Some(61.0);
                p.power_w = Some(watts);
                timeline.push(p);
            }
        }
        let rates = rate_charts(&timeline, &units, &[]);
        assert_eq!(
            rates
                .iter()
                .map(|c| c.subsystem.as_str())
                .collect::<Vec<_>>(),
            ["cpu", "gpu"]
        );
        let [clock, temp] = condition_charts(&timeline, &units);
        let values = |c: &Chart| -> Vec<f64> {
            match &c.kind {
                Kind::Lines(l) => l
                    .series
                    .iter()
                    .flat_map(|s| s.points.iter().map(|p| p.1))
                    .collect(),
                _ => Vec::new(),
            }
        };
        assert_eq!(values(&clock.unwrap()), [2.6e9; 3], "CPU points only");
        assert!(temp.is_none(), "no CPU temperature in the record");
        let gpu = gpu_condition_charts(&timeline, &units);
        let titles: Vec<&str> = gpu.iter().map(|c| c.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "GPU SM clock per interval",
                "GPU temperature per interval",
                "GPU power per interval"
            ]
        );
        match &gpu[2].kind {
            Kind::Lines(l) => {
                let names: Vec<&str> = l.series.iter().map(|s| s.name.as_str()).collect();
                assert_eq!(names, ["cuda0", "cuda1"]);
                assert_eq!(l.series[1].points.len(), 3);
                assert_eq!(l.series[0].points[0].1, 650.0);
            }
            other => panic!("{other:?}"),
        }
        let html_of = |timeline: &[TimelinePoint]| {
            super::html(&BurnPage {
                verdict_line: "PASS",
                meta: "m",
                units: &units,
                timeline,
                warnings: &[],
                warned: &[],
            })
            .unwrap()
        };
        let html = html_of(&timeline);
        assert!(html.contains("GPU clock, temperature and power"), "{html}");
        assert!(html.contains("GPU power per interval"));
        // Without NVML readings the GPU panel says so.
        for p in timeline.iter_mut() {
            if p.unit.starts_with("cuda") {
                (p.clock_mhz, p.temp_c, p.power_w) = (None, None, None);
            }
        }
        let html = html_of(&timeline);
        assert!(html.contains("GPU readings: not readable here"), "{html}");
    }
}
