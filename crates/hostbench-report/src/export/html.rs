//! `report.html`: one self-contained file (inline CSS and SVG, no script, no network): the
//! summary cards (the host, and per subsystem its headline figures with gauges, ratios to the
//! reference and a verdict), then the charts and the classic tables of every subsystem.

use std::fmt::Write as _;

use hostbench_core::model::RunResult;

use super::{
    group_heading, host_line, left_out_line, not_applicable_line, skipped_line, Exporter, LEFT_OUT,
    NOT_APPLICABLE,
};
use crate::chart;
use crate::error::ReportError;
use crate::table::{Report, HEADER};

pub struct HtmlExporter;

/// The report pages' CSS (the fleet report uses it too, so the two pages look alike).
pub(crate) const STYLE: &str = "
body { font-family: DejaVu Sans, Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1200px;
       color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
h3 { font-size: 1.05em; margin-bottom: 0.3em; }
.meta { color: #555; }
.common { color: #555; font-size: 0.9em; margin: 0.2em 0 0.5em; }
table.results { border-collapse: collapse; font-size: 0.88em; margin-bottom: 1em; }
table.results th, table.results td { border: 1px solid #ddd; padding: 3px 8px; }
table.results th { background: #f2f2f2; text-align: left; }
table.results td.num { text-align: right; white-space: nowrap; }
.scroll { overflow-x: auto; max-width: 100%; }
nav ul { padding-left: 1.2em; }
figure.chart { margin: 1em 0; }
figure.chart svg:not(.swatch) { max-width: 100%; height: auto; border: 1px solid #eee; }
.lined { display: flex; flex-wrap: wrap; align-items: flex-start; gap: 0.5em 1em; }
.lined > svg { flex: 0 1 auto; min-width: 0; }
.legend { flex: 1 1 14em; font-size: 0.85em; }
.legend ul { list-style: none; margin: 0 0 0.5em; padding: 0; }
.legend li { display: flex; align-items: center; gap: 0.2em; margin: 0.15em 0; }
.legend svg.swatch { flex: none; }
.legend p { color: #5a5a5a; margin: 0.2em 0; }
ol.bases, ul.notes { font-size: 0.9em; color: #444; }
";

/// Text for HTML element content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

impl Exporter for HtmlExporter {
    fn file_name(&self) -> &'static str {
        "report.html"
    }

    fn render(&self, run: &RunResult) -> Result<String, ReportError> {
        render_with_trends(run, &[])
    }
}

/// The page with a trend chart per benchmark of the headline figures' stored history on this
/// host (after the cards; none when no figure has two stored runs).
pub fn render_with_trends(run: &RunResult, trends: &[chart::Trend]) -> Result<String, ReportError> {
    let charts = chart::charts(run);
    let trend_charts = chart::trend_charts(trends);
    let bodies = figure_bodies(&charts)?;
    let trend_bodies = figure_bodies(&trend_charts)?;
    render(run, (&charts, &bodies), (&trend_charts, &trend_bodies))
        .map_err(|e| ReportError::bad(format!("formatting HTML: {e}")))
}

/// Charts with the inside of their page figures (`figure_bodies`).
type Drawn<'a> = (&'a [chart::Chart], &'a [String]);

/// Each chart as the inside of its page figure, in order: the drawing, and for a line chart its
/// legend as HTML after the plot (`chart::LegendAt::Page`). The page's CSS puts the legend beside
/// the plot where there is room and under it where there is not, so on a phone the plot keeps
/// the whole width and the legend never covers a point.
pub(crate) fn figure_bodies(charts: &[chart::Chart]) -> Result<Vec<String>, ReportError> {
    charts
        .iter()
        .map(|c| {
            let svg = chart::svg_with(c, chart::LegendAt::Page)?;
            match &c.kind {
                chart::Kind::Lines(l) => Ok(format!(
                    "<div class=\"lined\">\n{svg}{}</div>",
                    legend_html(&chart::legend(l))?
                )),
                chart::Kind::Bars(_) | chart::Kind::Heatmap(_) => Ok(svg),
            }
        })
        .collect()
}

/// A line chart's legend as HTML: the entries with their marks, the keys to the dashes and
/// error bars, then the notes; the same list as the image's legend pane, uncut.
fn legend_html(legend: &chart::Legend) -> Result<String, ReportError> {
    let mut o = String::from("<div class=\"legend\">\n");
    for list in [&legend.entries, &legend.keys] {
        if list.is_empty() {
            continue;
        }
        o.push_str("<ul>\n");
        for (mark, text) in list {
            o.push_str("<li>");
            o.push_str(chart::swatch(*mark)?.trim_end());
            o.push_str(&format!("<span>{}</span></li>\n", esc(text)));
        }
        o.push_str("</ul>\n");
    }
    for n in &legend.notes {
        o.push_str(&format!("<p>{}</p>\n", esc(n)));
    }
    o.push_str("</div>\n");
    Ok(o)
}

/// One chart as a page figure, around its body (`figure_bodies`).
pub(crate) fn figure(o: &mut String, c: &chart::Chart, body: &str) -> std::fmt::Result {
    writeln!(
        o,
        "<figure class=\"chart\" id=\"chart-{}\" aria-label=\"{}\">\n{body}\n</figure>",
        esc(&c.id),
        esc(&c.title)
    )
}

/// Beside a table's measured figure: its rate per watt where the energy was read, and the mark
/// of a spread no cause was found for, the finding on hover.
fn measured_extras(o: &mut String, r: &hostbench_core::model::Record) -> std::fmt::Result {
    if let Some(w) = super::summary::per_watt(r) {
        write!(o, "<br><span class=\"watt\">{}</span>", esc(&w))?;
    }
    if let Some(d) = super::cost::per_dollar(r) {
        write!(o, "<br><span class=\"dollar\">{}</span>", esc(&d))?;
    }
    if let (Some(mark), Some(why)) = (super::summary::spread_mark(r), super::summary::no_cause(r)) {
        write!(
            o,
            " <span class=\"spread\" title=\"{}\">{}</span>",
            esc(&why),
            esc(&mark)
        )?;
    }
    Ok(())
}

fn render(
    run: &RunResult,
    (charts, bodies): Drawn<'_>,
    (trends, trend_bodies): Drawn<'_>,
) -> Result<String, std::fmt::Error> {
    let rep = Report::build(run);
    let mut o = String::new();
    let title = format!("hostbench report: {}", run.host.hostname);
    writeln!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">"
    )?;
    writeln!(
        o,
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    )?;
    writeln!(
        o,
        "<title>{}</title>\n<style>{STYLE}{}</style>\n</head>\n<body>",
        esc(&title),
        format_args!("{}{}", super::cards::STYLE, super::conditions::STYLE)
    )?;
    writeln!(o, "<h1>{}</h1>", esc(&title))?;
    writeln!(o, "<p class=\"meta\">{}<br>", esc(&host_line(run)))?;
    writeln!(
        o,
        "Run {} to {} with {} {}. Rates in decimal prefixes (1 GB/s = 10<sup>9</sup> B/s), sizes in binary (1 MiB = 2<sup>20</sup> B).</p>",
        esc(&run.started_at),
        esc(&super::run_end(run)),
        esc(&run.tool.name),
        esc(&run.tool.version)
    )?;
    super::cards::write(&mut o, run)?;
    if let Some(n) = super::summary::energy_note(run) {
        writeln!(o, "<p class=\"common\">{}.</p>", esc(&n))?;
    }
    if let Some(n) = super::cost::price_note(run) {
        writeln!(o, "<p class=\"common\">Price: {}.</p>", esc(&n))?;
    }
    if !trends.is_empty() {
        writeln!(o, "<section id=\"trends\">\n<h2>Trends on this host</h2>")?;
        for (c, body) in trends.iter().zip(trend_bodies) {
            figure(&mut o, c, body)?;
        }
        writeln!(o, "</section>")?;
    }
    if !rep.sections.is_empty() {
        writeln!(o, "<nav><ul>")?;
        for s in &rep.sections {
            writeln!(
                o,
                "<li><a href=\"#sec-{0}\">{1}</a></li>",
                esc(&s.subsystem),
                esc(&s.title)
            )?;
        }
        writeln!(o, "</ul></nav>")?;
    }
    for s in &rep.sections {
        writeln!(
            o,
            "<section id=\"sec-{}\">\n<h2>{}</h2>",
            esc(&s.subsystem),
            esc(&s.title)
        )?;
        for (c, body) in charts
            .iter()
            .zip(bodies)
            .filter(|(c, _)| c.subsystem == s.subsystem)
        {
            figure(&mut o, c, body)?;
        }
        for g in &s.groups {
            writeln!(o, "<h3>{}</h3>", esc(&group_heading(g)))?;
            if !g.common.is_empty() {
                writeln!(o, "<p class=\"common\">{}</p>", esc(&g.common.join(", ")))?;
            }
            // Each table scrolls sideways in its own box on a narrow screen; the page does not.
            writeln!(
                o,
                "<div class=\"scroll\"><table class=\"results\" data-benchmark=\"{}\">\n<thead><tr>",
                esc(&g.benchmark)
            )?;
            for h in HEADER {
                write!(o, "<th>{}</th>", esc(h))?;
            }
            writeln!(o, "</tr></thead>\n<tbody>")?;
            for r in &g.rows {
                write!(o, "<tr>")?;
                for (i, c) in r.cells.iter().enumerate() {
                    let title = match (i, &r.record.peak) {
                        (5, Some(p)) => format!(" title=\"{}\"", esc(&p.basis)),
                        _ => String::new(),
                    };
                    let class = if i >= 3 { " class=\"num\"" } else { "" };
                    write!(o, "<td{class}{title}>{}", esc(c))?;
                    if i == 3 {
                        measured_extras(&mut o, r.record)?;
                    }
                    write!(o, "</td>")?;
                }
                writeln!(o, "</tr>")?;
            }
            writeln!(o, "</tbody>\n</table></div>")?;
        }
        if !s.notes.is_empty() {
            writeln!(o, "<h3>Notes</h3>\n<ul class=\"notes\">")?;
            for n in &s.notes {
                writeln!(o, "<li>{}</li>", esc(n))?;
            }
            writeln!(o, "</ul>")?;
        }
        writeln!(o, "</section>")?;
    }
    super::conditions::write(&mut o, run)?;
    if !rep.bases.is_empty() {
        writeln!(o, "<h2>Theoretical peaks</h2>\n<ol class=\"bases\">")?;
        for b in &rep.bases {
            writeln!(o, "<li>{}</li>", esc(b))?;
        }
        writeln!(o, "</ol>")?;
    }
    if !rep.not_applicable.is_empty() {
        writeln!(o, "<h2>{NOT_APPLICABLE}</h2>\n<ul class=\"notes\">")?;
        for n in rep.not_applicable {
            writeln!(o, "<li>{}</li>", esc(&not_applicable_line(n)))?;
        }
        writeln!(o, "</ul>")?;
    }
    if !rep.left_out.is_empty() {
        writeln!(o, "<h2>{LEFT_OUT}</h2>\n<ul class=\"notes\">")?;
        for l in rep.left_out {
            writeln!(o, "<li>{}</li>", esc(&left_out_line(l)))?;
        }
        writeln!(o, "</ul>")?;
    }
    if !rep.skipped.is_empty() {
        writeln!(o, "<h2>Skipped</h2>\n<ul class=\"notes\">")?;
        for s in rep.skipped {
            writeln!(o, "<li>{}</li>", esc(&skipped_line(s)))?;
        }
        writeln!(o, "</ul>")?;
    }
    writeln!(o, "</body>\n</html>")?;
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::synthetic_run;

    #[test]
    fn html_is_self_contained_with_charts_and_tables() {
        let run = synthetic_run();
        let html = HtmlExporter.render(&run).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>"));
        // No external resources: no scripts, links or remote URLs.
        for banned in ["<script", "<link", "src=\"http", "href=\"http", "url(http"] {
            assert!(!html.contains(banned), "{banned}");
        }
        let charts = chart::charts(&run).len();
        assert_eq!(html.matches("<figure class=\"chart\"").count(), charts);
        let gauges = html.matches("<svg class=\"gauge\"").count();
        assert!(gauges > 0, "the summary cards have gauges");
        let swatches = html.matches("<svg class=\"swatch\"").count();
        assert!(swatches > 0, "the line charts' legends have marks");
        assert_eq!(html.matches("<svg").count() - gauges - swatches, charts);
        // The cards come first: the host, then a card per subsystem, before any chart.
        let cards = html.find("<div class=\"cards\">").expect("cards");
        assert!(cards < html.find("<figure").expect("a chart"));
        for bench in [
            "cpu.flops",
            "net.throughput",
            "net.latency",
            "gpu.transfer",
            "fpga.kernels",
        ] {
            assert!(
                html.contains(&format!("data-benchmark=\"{bench}\"")),
                "{bench}"
            );
        }
        assert!(html.contains("Reference efficiency %"));
    }

    /// The `<svg …>…</svg>` documents in `html`, in order.
    fn svgs_in(html: &str) -> Vec<&str> {
        html.match_indices("<svg ")
            .map(|(at, _)| {
                let end = html[at..].find("</svg>").expect("closed") + "</svg>".len();
                &html[at..at + end]
            })
            .collect()
    }

    #[test]
    fn a_line_chart_on_the_page_is_the_plot_alone_then_its_legend_as_html() {
        let run = synthetic_run();
        let charts = chart::charts(&run);
        let bodies = figure_bodies(&charts).unwrap();
        let mut lines = 0;
        for (c, body) in charts.iter().zip(&bodies) {
            let chart::Kind::Lines(l) = &c.kind else {
                assert!(!body.contains("class=\"legend\""), "{}", c.title);
                continue;
            };
            lines += 1;
            let svgs = svgs_in(body);
            let plot = svgs[0];
            // The plot takes the whole image: no legend pane, so none of the legend's text.
            assert!(
                plot.starts_with("<svg width=\"730\" height=\"460\""),
                "{plot:.60}"
            );
            assert!(!plot.contains("class=\"swatch\""));
            for s in &l.series {
                assert!(!plot.contains(&format!(">{}<", esc(&s.name))), "{}", s.name);
            }
            // The legend follows the plot as HTML: every series named beside its mark.
            let legend = &body[body.find("<div class=\"legend\">").expect("legend")..];
            assert!(body.find(plot).expect("plot") < body.len() - legend.len());
            for s in &l.series {
                assert!(
                    legend.contains(&format!("<span>{}</span>", esc(&s.name))),
                    "{}: {}",
                    c.title,
                    s.name
                );
            }
            let legend_of = chart::legend(l);
            assert_eq!(
                svgs.len() - 1,
                legend_of.entries.len() + legend_of.keys.len(),
                "a mark per entry"
            );
            assert!(svgs[1..]
                .iter()
                .all(|s| s.starts_with("<svg class=\"swatch\"")));
            // The standalone image keeps its pane, with the series named in it.
            let standalone = chart::svg(c).unwrap();
            assert!(standalone.starts_with("<svg width=\"960\""));
            assert!(l
                .series
                .iter()
                .all(|s| standalone.contains(&esc(&s.name)) || s.name.chars().count() > 30));
        }
        assert!(lines > 0, "no line chart");
        let html = HtmlExporter.render(&run).unwrap();
        assert_eq!(
            html.matches("<div class=\"lined\">").count(),
            lines,
            "every line chart's figure is the plot and its legend"
        );
    }

    #[test]
    fn the_html_legend_keeps_levels_rings_keys_and_notes() {
        use crate::testdata::{net_idle_latency, net_under_load, run_of};
        use serde_json::json;
        let mut recs = net_under_load("udp", 32768, &[json!("90%"), json!("10%"), json!("50%")]);
        recs.push(net_idle_latency("udp", 32768, 14e-6));
        let charts: Vec<chart::Chart> = chart::charts(&run_of(recs))
            .into_iter()
            .filter(|c| c.title.contains("offered load"))
            .collect();
        assert_eq!(charts.len(), 1);
        let chart::Kind::Lines(l) = &charts[0].kind else {
            panic!("lines")
        };
        let legend = chart::legend(l);
        let marks: Vec<chart::Mark> = legend.entries.iter().map(|e| e.0).collect();
        assert!(marks.contains(&chart::Mark::Ring), "{marks:?}");
        assert!(marks.contains(&chart::Mark::DashedLike(0)), "{marks:?}");
        let body = &figure_bodies(&charts).unwrap()[0];
        for (_, text) in legend.entries.iter().chain(&legend.keys) {
            assert!(
                body.contains(&format!("<span>{}</span>", esc(text))),
                "{text}"
            );
        }
        for n in &legend.notes {
            assert!(body.contains(&format!("<p>{}</p>", esc(n))), "{n}");
        }
    }

    #[test]
    fn memory_matrices_are_inline_heatmaps_with_tooltips() {
        use crate::testdata::{c2c, loaded_latency, numa, run_of};
        let mut recs = c2c(4, &["round_trip", "one_way"]);
        recs.extend(numa(2));
        recs.extend(loaded_latency(&["read", "rw"], &[0, 100, 1000], 4));
        let run = run_of(recs);
        let html = HtmlExporter.render(&run).unwrap();
        let charts = chart::charts(&run);
        assert_eq!(charts.len(), 5);
        assert_eq!(html.matches("<figure class=\"chart\"").count(), 5);
        assert!(html.contains("<title>CPU 0 ↔ CPU 3: 90.0 ns (shared last-level cache)</title>"));
        assert!(html.contains("<title>delay 1000 (400 ns): "));
        for id in [
            "mem-c2c-core-to-core-latency-one-way",
            "mem-numa-latency-by-cpu-node-and-memory-node",
        ] {
            assert!(html.contains(&format!("id=\"chart-{id}\"")), "{id}");
        }
    }
}
