//! fleet.html: one self-contained page (inline CSS and SVG, no script, no network) with the node
//! table, a strip chart per figure and the network matrix as heatmaps.
//!
//! Drawn by hand as SVG rather than with plotters: a strip chart is one circle per node, and at
//! 1,000 nodes × 8 figures a hand-written `<circle>` with its `<title>` (the node's name on
//! hover) is a fraction of the bytes and the time a plotting library spends per element.
//!
//! The heatmap draws only the pairs that exist (a ring or random:K schedule fills N or K·N of the
//! N² cells) over a grey grid, and only up to `MATRIX_MAX` nodes: beyond that a cell is under
//! four pixels on a laptop screen and the picture says nothing a list cannot, so the page lists
//! the slowest pairs instead (every pair stays in fleet.json and fleet.md).

use std::collections::HashMap;
use std::fmt::Write as _;

use super::doc::{Figure, FleetDoc};
use super::layout::Status;
use super::text::{
    columns, counts_line, legend, meta_line, pair_values, PairValues, BETTER, WORSE,
};
use crate::export::{esc, STYLE};
use crate::units::{human, percent, scale_for, scaled};

/// Nodes in a drawn matrix; above this the page lists pairs instead.
const MATRIX_MAX: usize = 200;
/// Pairs listed when the matrix is not drawn.
const PAIR_LIST_MAX: usize = 500;
const WIDTH: f64 = 900.0;

const FLEET_STYLE: &str = "
td.w { background: #f8d0cc; } td.b { background: #cfeedd; } td.bad { color: #b00; }
table.results td.node { font-family: monospace; }
.wrap { max-height: 36em; overflow: auto; }
.wrap thead th { position: sticky; top: 0; }
svg.strip circle { fill: #4575b4; fill-opacity: 0.6; } svg.strip circle.w { fill: #d73027; fill-opacity: 1; }
svg.strip circle.b { fill: #1a9850; fill-opacity: 1; }
svg text { font: 11px sans-serif; fill: #333; } svg line.med { stroke: #222; stroke-width: 1.5; }
svg line.ax { stroke: #999; } svg rect.bg { fill: #f4f4f4; }
";

/// The fleet report page.
pub fn render_html(doc: &FleetDoc) -> String {
    let mut o = String::with_capacity(64 * 1024 + doc.nodes.len() * 2048);
    let title = format!("hostbench fleet report: {}", doc.fleet_id);
    let _ = writeln!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{0}</title>\n<style>{STYLE}{FLEET_STYLE}</style>\n</head>\n<body>\n<h1>{0}</h1>",
        esc(&title)
    );
    let _ = writeln!(
        o,
        "<p class=\"meta\">{}<br>{}<br>{}</p>",
        esc(&counts_line(doc)),
        esc(&meta_line(doc)),
        esc(&legend(doc))
    );
    let _ = writeln!(
        o,
        "<nav><ul><li><a href=\"#nodes\">Nodes</a></li><li><a href=\"#figures\">Figures</a></li>\
         <li><a href=\"#network\">Network</a></li></ul></nav>"
    );
    node_table(doc, &mut o);
    network_findings(doc, &mut o);
    outliers(doc, &mut o);
    unwell(doc, &mut o);
    let _ = writeln!(
        o,
        "<section id=\"figures\">\n<h2>Figures across the fleet</h2>"
    );
    let _ = writeln!(
        o,
        "<p class=\"common\">One dot per node; the line is the fleet median; red: worse outliers, green: better outliers. Hover a dot for the node.</p>"
    );
    for f in &doc.figures {
        strip_chart(f, &mut o);
    }
    let _ = writeln!(o, "</section>");
    network(doc, &mut o);
    let _ = writeln!(o, "</body>\n</html>");
    o
}

fn node_table(doc: &FleetDoc, o: &mut String) {
    let cols = columns(doc);
    let _ = writeln!(
        o,
        "<section id=\"nodes\">\n<h2>Nodes</h2>\n<div class=\"wrap\">\n<table class=\"results\" id=\"node-table\">\n<thead><tr><th>node</th><th>status</th>"
    );
    for c in &cols {
        let better = if c.figure.higher_is_better {
            "higher is better"
        } else {
            "lower is better"
        };
        let _ = write!(
            o,
            "<th title=\"{}\">{}</th>",
            esc(better),
            esc(&c.heading())
        );
    }
    let _ = writeln!(o, "</tr></thead>\n<tbody>");
    for n in &doc.nodes {
        let status_class = if n.status == Status::Ok {
            ""
        } else {
            " class=\"bad\""
        };
        let status_title = n
            .reason
            .as_deref()
            .map_or(String::new(), |r| format!(" title=\"{}\"", esc(r)));
        let _ = write!(
            o,
            "<tr><td class=\"node\">{}</td><td{status_class}{status_title}>{}</td>",
            esc(&n.node),
            n.status.as_str()
        );
        for c in &cols {
            let (class, title) = match c.outliers.get(n.node.as_str()) {
                Some(out) => (
                    if out.worse { "num w" } else { "num b" },
                    format!(" title=\"{}\"", esc(&out.why)),
                ),
                None => ("num", String::new()),
            };
            let _ = write!(
                o,
                "<td class=\"{class}\"{title}>{}</td>",
                esc(&c.cell(&n.node))
            );
        }
        let _ = writeln!(o, "</tr>");
    }
    let _ = writeln!(o, "</tbody>\n</table>\n</div>");
    let _ = writeln!(
        o,
        "<p class=\"common\">{WORSE} red: worse outlier; {BETTER} green: better outlier (hover a cell for why).</p>\n</section>"
    );
}

/// The network matrix's finding: which node (or link) the slow pairs belong to.
fn network_findings(doc: &FleetDoc, o: &mut String) {
    let rows = super::text::network_rows(doc);
    if rows.len() < 2 {
        return;
    }
    let _ = writeln!(
        o,
        "<h2>Network: slow links and their nodes</h2>\n<ul class=\"findings\" id=\"net-findings\">"
    );
    for r in &rows[1..] {
        let _ = writeln!(o, "<li>{}: {}</li>", esc(&r[0]), esc(&r[1]));
    }
    let _ = writeln!(o, "</ul>");
}

/// Every outlier with its reason: in a table of 1,000 nodes the marked cells are easy to miss.
fn outliers(doc: &FleetDoc, o: &mut String) {
    let n: usize = doc.figures.iter().map(|f| f.outliers.len()).sum();
    if n == 0 {
        return;
    }
    let _ = writeln!(
        o,
        "<h2>Outliers ({n})</h2>\n<div class=\"wrap\">\n<table class=\"results\" id=\"outliers\">\n<thead><tr><th>node</th><th>figure</th><th>value</th><th>why</th></tr></thead>\n<tbody>"
    );
    for f in &doc.figures {
        for out in &f.outliers {
            let _ = writeln!(
                o,
                "<tr><td class=\"node\">{}</td><td>{}</td><td class=\"num {}\">{}</td><td>{}</td></tr>",
                esc(&out.node),
                esc(&f.label),
                if out.worse { "w" } else { "b" },
                esc(&human(out.value, &f.unit)),
                esc(&out.why)
            );
        }
    }
    let _ = writeln!(o, "</tbody>\n</table>\n</div>");
}

fn unwell(doc: &FleetDoc, o: &mut String) {
    let rows: Vec<(String, String, String)> = doc
        .nodes_not_ok()
        .map(|n| {
            (
                n.node.clone(),
                n.status.as_str().to_string(),
                n.reason.clone().unwrap_or_default(),
            )
        })
        .chain(
            doc.not_measured
                .iter()
                .map(|n| (n.node.clone(), "not measured".into(), n.reason.clone())),
        )
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "<h2>Nodes not measured, failed or unfinished</h2>\n<table class=\"results\" id=\"unwell\">\n<thead><tr><th>node</th><th>status</th><th>reason</th></tr></thead>\n<tbody>"
    );
    for (n, s, r) in rows {
        let _ = writeln!(
            o,
            "<tr><td class=\"node\">{}</td><td class=\"bad\">{}</td><td>{}</td></tr>",
            esc(&n),
            esc(&s),
            esc(&r)
        );
    }
    let _ = writeln!(o, "</tbody>\n</table>");
}

/// A deterministic vertical jitter in [0, 1) for the i-th dot, so overlapping nodes spread out
/// and the page is the same every time it is rendered.
fn jitter(i: usize) -> f64 {
    ((i as u64).wrapping_mul(2654435761) % 1000) as f64 / 1000.0
}

/// `(lo, hi)` of an axis over `min..=max` with a margin; a single value gets ±5 %.
fn axis_range(min: f64, max: f64) -> (f64, f64) {
    if max > min {
        let pad = 0.04 * (max - min);
        (min - pad, max + pad)
    } else {
        let pad = if min != 0.0 { 0.05 * min.abs() } else { 1.0 };
        (min - pad, max + pad)
    }
}

fn strip_chart(f: &Figure, o: &mut String) {
    let (left, right, top, band) = (10.0, 10.0, 22.0, 60.0);
    let height = top + band + 30.0;
    let scale = scale_for(f.summary.median, &f.unit);
    let (lo, hi) = axis_range(f.summary.min, f.summary.max);
    let x = |v: f64| left + (v - lo) / (hi - lo) * (WIDTH - left - right);
    let outliers: HashMap<&str, bool> = f
        .outliers
        .iter()
        .map(|o| (o.node.as_str(), o.worse))
        .collect();
    let better = if f.higher_is_better {
        "higher is better"
    } else {
        "lower is better"
    };
    let _ = writeln!(
        o,
        "<h3>{} ({}, {better})</h3>\n<p class=\"common\">median {}, min {}, max {}, spread {}, {} of {} nodes outliers</p>",
        esc(&f.label),
        esc(&scale.label),
        esc(&human(f.summary.median, &f.unit)),
        esc(&human(f.summary.min, &f.unit)),
        esc(&human(f.summary.max, &f.unit)),
        esc(&percent(f.summary.spread)),
        f.outliers.len(),
        f.summary.n
    );
    let _ = writeln!(
        o,
        "<figure class=\"chart strip\" id=\"strip-{0}\"><svg class=\"strip\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"{1} of every node\">",
        esc(&f.id),
        esc(&f.label)
    );
    let axis_y = top + band + 6.0;
    let _ = writeln!(
        o,
        "<line class=\"ax\" x1=\"{left}\" y1=\"{axis_y}\" x2=\"{}\" y2=\"{axis_y}\"/>",
        WIDTH - right
    );
    // One label when every node has the same value (two would print on top of each other).
    let ends: &[(f64, &str)] = if f.summary.max > f.summary.min {
        &[(f.summary.min, "start"), (f.summary.max, "end")]
    } else {
        &[]
    };
    for &(v, anchor) in ends {
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"{anchor}\">{} {}</text>",
            x(v),
            axis_y + 16.0,
            scaled(v, &scale),
            esc(&scale.label)
        );
    }
    let mx = x(f.summary.median);
    // The median's label stays inside the chart when the median sits near an edge.
    let anchor = if mx > 0.8 * WIDTH {
        "end"
    } else if mx < 0.2 * WIDTH {
        "start"
    } else {
        "middle"
    };
    let _ = writeln!(
        o,
        "<line class=\"med\" x1=\"{mx:.1}\" y1=\"{}\" x2=\"{mx:.1}\" y2=\"{}\"/><text x=\"{mx:.1}\" y=\"{}\" text-anchor=\"{anchor}\">median {} {}</text>",
        top - 4.0,
        top + band + 4.0,
        top - 8.0,
        scaled(f.summary.median, &scale),
        esc(&scale.label)
    );
    for (i, v) in f.values.iter().enumerate() {
        let class = match outliers.get(v.node.as_str()) {
            Some(true) => " class=\"w\"",
            Some(false) => " class=\"b\"",
            None => "",
        };
        let _ = writeln!(
            o,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\"{class}><title>{}: {} {}</title></circle>",
            x(v.value),
            top + 4.0 + jitter(i) * (band - 8.0),
            esc(&v.node),
            scaled(v.value, &scale),
            esc(&scale.label)
        );
    }
    let _ = writeln!(o, "</svg></figure>");
}

/// `hsl()` from red (0, worst) to green (1, best).
fn goodness_colour(g: f64) -> String {
    format!("hsl({:.0},70%,45%)", 120.0 * g.clamp(0.0, 1.0))
}

fn network(doc: &FleetDoc, o: &mut String) {
    let _ = writeln!(o, "<section id=\"network\">\n<h2>Network</h2>");
    if doc.pairs.is_empty() {
        let _ = writeln!(
            o,
            "<p class=\"common\">No network phase (pairs: {}).</p>\n</section>",
            esc(&doc.net_pairs)
        );
        return;
    }
    // Nodes in the matrix: those in a pair, in the plan's order.
    let in_pairs: std::collections::HashSet<&str> = doc
        .pairs
        .iter()
        .flat_map(|p| [p.from.as_str(), p.to.as_str()])
        .collect();
    let order: Vec<&str> = doc
        .nodes
        .iter()
        .map(|n| n.node.as_str())
        .filter(|n| in_pairs.contains(n))
        .collect();
    let values = pair_values(doc);
    if order.len() <= MATRIX_MAX {
        let index: HashMap<&str, usize> = order.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        heatmap(doc, &order, &index, &values, true, o);
        heatmap(doc, &order, &index, &values, false, o);
    } else {
        pair_list(doc, &values, order.len(), o);
    }
    let _ = writeln!(o, "</section>");
}

fn heatmap(
    doc: &FleetDoc,
    order: &[&str],
    index: &HashMap<&str, usize>,
    values: &PairValues<'_>,
    throughput: bool,
    o: &mut String,
) {
    let pick = |v: &(Option<f64>, Option<f64>)| if throughput { v.0 } else { v.1 };
    // Every measured cell: a pair's own (client, server) and, for throughput, its other
    // direction at (server, client) where the pair measured both.
    let mut cells: Vec<(usize, usize, f64, &str, &str)> = values
        .iter()
        .filter_map(|(&(from, to), v)| {
            let v = pick(v)?;
            Some((*index.get(from)?, *index.get(to)?, v, from, to))
        })
        .collect();
    cells.sort_by_key(|c| (c.0, c.1));
    let (name, unit, id) = if throughput {
        ("TCP throughput", "bit/s", "heatmap-throughput")
    } else {
        ("TCP round trip", "s", "heatmap-rtt")
    };
    let axes = if throughput {
        "row: sender, column: receiver"
    } else {
        "row: client, column: server"
    };
    let _ = writeln!(o, "<h3>{name} ({axes})</h3>");
    if cells.is_empty() {
        let _ = writeln!(o, "<p class=\"common\">No pair measured {name}.</p>");
        return;
    }
    let min = cells.iter().map(|c| c.2).fold(f64::INFINITY, f64::min);
    let max = cells.iter().map(|c| c.2).fold(f64::NEG_INFINITY, f64::max);
    let values: Vec<f64> = cells.iter().map(|c| c.2).collect();
    let median = super::stats::median(&values);
    let _ = writeln!(
        o,
        "<p class=\"common\">{} of {} pairs, median {}, range {} to {}; green: at or better than the median, shading to red at {} (grey: not a pair). Hover a cell for the pair.</p>",
        cells.len(),
        doc.pairs.len(),
        esc(&human(median, unit)),
        esc(&human(min, unit)),
        esc(&human(max, unit)),
        if throughput {
            "half the median or less"
        } else {
            "twice the median or more"
        },
    );
    let n = order.len() as f64;
    let cell = (720.0 / n).clamp(4.0, 24.0);
    // Names beside the grid only where a row is tall enough to read them.
    let label = if cell >= 10.0 { 90.0 } else { 0.0 };
    let size = label + n * cell + 2.0;
    let _ = writeln!(
        o,
        "<figure class=\"chart heatmap\" id=\"{id}\"><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{size:.0}\" height=\"{size:.0}\" viewBox=\"0 0 {size:.0} {size:.0}\" role=\"img\" aria-label=\"{name} between node pairs\">\n<rect class=\"bg\" x=\"{label}\" y=\"{label}\" width=\"{0:.1}\" height=\"{0:.1}\"/>",
        n * cell
    );
    if label > 0.0 {
        for (i, node) in order.iter().enumerate() {
            let c = label + (i as f64 + 0.5) * cell;
            let _ = writeln!(
                o,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" dominant-baseline=\"middle\">{2}</text><text transform=\"translate({3:.1},{4:.1}) rotate(-90)\" dominant-baseline=\"middle\">{2}</text>",
                label - 4.0,
                c,
                esc(node),
                c,
                label - 4.0
            );
        }
    }
    for (r, c, v, from, to) in cells {
        // Against the fleet's median, not its range: in a healthy fleet the range is noise, and
        // min-to-max colouring would paint a 1 % slower link red.
        let ratio = match (throughput, v > 0.0) {
            (true, _) => v / median,
            (false, true) => median / v,
            (false, false) => 1.0,
        };
        // A zero median (every link dead) has no ratio: a neutral colour rather than NaN.
        let g = if ratio.is_finite() {
            (ratio - 0.5) / 0.5
        } else {
            0.5
        };
        let _ = writeln!(
            o,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{cell:.1}\" height=\"{cell:.1}\" fill=\"{}\"><title>{} → {}: {}</title></rect>",
            label + c as f64 * cell,
            label + r as f64 * cell,
            goodness_colour(g),
            esc(from),
            esc(to),
            esc(&human(v, unit))
        );
    }
    let _ = writeln!(o, "</svg></figure>");
}

/// Above `MATRIX_MAX` nodes: the slowest pairs as a table.
fn pair_list(doc: &FleetDoc, values: &PairValues<'_>, nodes: usize, o: &mut String) {
    let mut rows: Vec<_> = doc
        .pairs
        .iter()
        .map(|p| {
            let (t, r) = values
                .get(&(p.from.as_str(), p.to.as_str()))
                .copied()
                .unwrap_or_default();
            (p.from.as_str(), p.to.as_str(), t, r, p.status.as_str())
        })
        .collect();
    // Failed pairs (no throughput) first, then the slowest.
    rows.sort_by(|a, b| {
        a.2.unwrap_or(f64::NEG_INFINITY)
            .total_cmp(&b.2.unwrap_or(f64::NEG_INFINITY))
    });
    let shown = rows.len().min(PAIR_LIST_MAX);
    let _ = writeln!(
        o,
        "<p class=\"common\">{nodes} nodes in {} pairs: too many for a readable matrix, so the {shown} slowest pairs are listed (every pair is in fleet.json and fleet.md).</p>\n<table class=\"results\" id=\"pair-list\">\n<thead><tr><th>client</th><th>server</th><th>TCP throughput</th><th>round trip</th><th>status</th></tr></thead>\n<tbody>",
        rows.len()
    );
    for (from, to, t, r, s) in rows.into_iter().take(shown) {
        let _ = writeln!(
            o,
            "<tr><td class=\"node\">{}</td><td class=\"node\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            esc(from),
            esc(to),
            esc(&t.map_or("–".into(), |v| human(v, "bit/s"))),
            esc(&r.map_or("–".into(), |v| human(v, "s"))),
            esc(s)
        );
    }
    let _ = writeln!(o, "</tbody>\n</table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_and_axes() {
        assert_eq!(goodness_colour(1.0), "hsl(120,70%,45%)");
        assert_eq!(goodness_colour(-3.0), "hsl(0,70%,45%)");
        assert_eq!(goodness_colour(9.0), "hsl(120,70%,45%)");
        assert_eq!(axis_range(10.0, 20.0), (9.6, 20.4));
        assert_eq!(axis_range(10.0, 10.0), (9.5, 10.5));
        assert_eq!(axis_range(0.0, 0.0), (-1.0, 1.0));
        // Jitter stays inside the band.
        assert!((0..5000).map(jitter).all(|j| (0.0..1.0).contains(&j)));
    }
}
