//! Heatmaps: one value per (row, column) cell, for the benchmarks whose records are the cells of
//! a matrix: the core-to-core latency of every pair of CPUs (`cpu_a`, `cpu_b`) and the bandwidth
//! or latency from every CPU node to every memory node (`cpu_node`, `mem_node`).
//!
//! A matrix is read by its structure (which blocks are fast, which cross a boundary), so the
//! colour carries the value on one sequential scale: darker is larger, viridis reversed
//! (perceptually even, readable when printed grey), with a legend in the cells' unit. Where the
//! matrix is small enough to read, the value is printed in the cell too, in dark or white ink
//! whichever contrasts more with the cell. A 192-CPU host gets 3-pixel cells, thinned labels and
//! no cell text; every measured cell keeps its exact value as an SVG `<title>` (a tooltip).

use std::collections::HashMap;

use hostbench_core::model::{Metric, Record};
use hostbench_core::units::sig3;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;

use super::{err, tick, what, Chart, Kind, Tip, FONT, WIDTH};
use crate::table::{group_by, label_part, value_text, varying_keys};
use crate::units::{self, Scale};

/// A value per (row, column) cell.
#[derive(Debug, Clone)]
pub struct Heatmap {
    /// What the rows and the columns are: `CPU`, `Memory node`.
    pub row_title: String,
    pub col_title: String,
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    /// `cells[row][col]` in the records' SI unit; `None` where nothing was measured.
    pub cells: Vec<Vec<Option<f64>>>,
    /// What a cell is beside its value (the boundary a CPU pair crosses), for its tooltip.
    pub notes: Vec<Vec<Option<String>>>,
    pub unit: String,
    pub metric: Metric,
    /// The cells are unordered pairs (cell (i, j) is cell (j, i)): said `↔` in the tooltips.
    pub symmetric: bool,
    /// What an empty cell means, for the legend (`same CPU`).
    pub empty: String,
}

/// Parameters that make a benchmark's records the cells of a matrix.
struct Matrix {
    row: &'static str,
    col: &'static str,
    /// Only pairs `row < col` are measured: the other half mirrors them.
    symmetric: bool,
    row_title: &'static str,
    col_title: &'static str,
    empty: &'static str,
    /// The chart's name around the quantity: `core-to-core` latency.
    before: &'static str,
    after: &'static str,
    /// Parameters the title always names, varying or not: a lone matrix must still say whether
    /// it is one-way or round-trip.
    named: &'static [&'static str],
}

const MATRICES: [Matrix; 2] = [
    Matrix {
        row: "cpu_a",
        col: "cpu_b",
        symmetric: true,
        row_title: "CPU",
        col_title: "CPU",
        empty: "same CPU",
        before: "core-to-core ",
        after: "",
        named: &["mode"],
    },
    Matrix {
        row: "cpu_node",
        col: "mem_node",
        symmetric: false,
        row_title: "CPU node",
        col_title: "Memory node",
        empty: "not measured",
        before: "",
        after: " by CPU node and memory node",
        named: &[],
    },
];

/// The heatmaps of a benchmark whose records name matrix cells: one per unit (a NUMA matrix has
/// bandwidth and latency) and per value of every other parameter that varies (the mode of a
/// core-to-core matrix, a run of several side by side). `None` when its records are not cells.
pub(super) fn matrix_charts(prefix: &str, bench: &str, recs: &[&Record]) -> Option<Vec<Chart>> {
    let has = |r: &Record, m: &Matrix| r.params.contains_key(m.row) && r.params.contains_key(m.col);
    let m = MATRICES.iter().find(|m| recs.iter().any(|r| has(r, m)))?;
    let recs: Vec<&Record> = recs.iter().copied().filter(|r| has(r, m)).collect();
    let mut out = Vec::new();
    for (_, same) in group_by(recs.iter().copied(), |r| (r.unit.clone(), r.metric)) {
        // A parameter that follows from the cell (a per-pair label) would split the matrix into
        // single cells: only what varies per cell's record splits.
        let mut split: Vec<String> = m
            .named
            .iter()
            .filter(|k| same.iter().any(|r| r.params.contains_key(**k)))
            .map(|k| k.to_string())
            .collect();
        for k in varying_keys(&same) {
            if k != m.row && k != m.col && !split.contains(&k) && !follows_cell(&same, m, &k) {
                split.push(k);
            }
        }
        let groups = group_by(same.iter().copied(), |r| {
            split
                .iter()
                .map(|k| r.params.get(k).cloned())
                .collect::<Vec<_>>()
        });
        for (values, group) in groups {
            let (unit, metric) = (group[0].unit.clone(), group[0].metric);
            let mut title = format!(
                "{bench}: {}{}{}",
                m.before,
                what(metric, &unit).to_lowercase(),
                m.after
            );
            for (k, v) in split.iter().zip(&values) {
                if let Some(v) = v {
                    title.push_str(", ");
                    title.push_str(&label_part(k, v));
                }
            }
            out.push(Chart {
                id: String::new(),
                title,
                subsystem: prefix.to_string(),
                kind: Kind::Heatmap(build(m, &group)),
            });
        }
    }
    Some(out)
}

/// Whether `key` has one value per cell: records of the same cell never differ in it. (A map,
/// not a search per record: a 192-CPU matrix has 18 336 cells per mode.)
fn follows_cell(recs: &[&Record], m: &Matrix, key: &str) -> bool {
    let mut seen: HashMap<(String, String), Option<&Value>> = HashMap::new();
    recs.iter().all(|r| {
        let cell = |k: &str| r.params.get(k).map_or(String::new(), Value::to_string);
        let v = r.params.get(key);
        *seen.entry((cell(m.row), cell(m.col))).or_insert(v) == v
    })
}

/// Numbers in numeric order (CPU 10 after CPU 9), anything else after them as text.
fn value_order(a: &Value, b: &Value) -> std::cmp::Ordering {
    let key = |v: &Value| {
        (
            v.as_f64().is_none(),
            v.as_f64().unwrap_or(0.0),
            v.to_string(),
        )
    };
    let (ka, kb) = (key(a), key(b));
    ka.0.cmp(&kb.0)
        .then(ka.1.total_cmp(&kb.1))
        .then(ka.2.cmp(&kb.2))
}

fn distinct(values: impl Iterator<Item = Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out.sort_by(value_order);
    out
}

/// The figure a cell shows: the mean, as the tables and the line charts show it.
fn figure(r: &Record) -> Option<f64> {
    let v = if r.stats.n > 0 { r.stats.mean } else { r.value };
    v.is_finite().then_some(v)
}

/// Which boundary a CPU pair crosses (the core-to-core records' `extra.relation`), in words.
fn relation(r: &Record) -> Option<String> {
    let s = r.extra.get("relation")?.as_str()?;
    Some(
        match s {
            "smt" => "SMT siblings",
            "llc" => "shared last-level cache",
            "package" => "same package, another last-level cache",
            "socket" => "different sockets",
            "unknown" | "" => return None,
            other => other,
        }
        .to_string(),
    )
}

fn build(m: &Matrix, recs: &[&Record]) -> Heatmap {
    let of = |key: &'static str| recs.iter().filter_map(move |r| r.params.get(key).cloned());
    let rows = if m.symmetric {
        distinct(of(m.row).chain(of(m.col)))
    } else {
        distinct(of(m.row))
    };
    let cols = if m.symmetric {
        rows.clone()
    } else {
        distinct(of(m.col))
    };
    let mut cells = vec![vec![None; cols.len()]; rows.len()];
    let mut notes = vec![vec![None; cols.len()]; rows.len()];
    for r in recs {
        let at = |key: &str, axis: &[Value]| {
            r.params
                .get(key)
                .and_then(|v| axis.iter().position(|a| a == v))
        };
        if let (Some(i), Some(j)) = (at(m.row, &rows), at(m.col, &cols)) {
            if cells[i][j].is_none() {
                cells[i][j] = figure(r);
                notes[i][j] = relation(r);
            }
        }
    }
    if m.symmetric {
        for i in 0..rows.len() {
            for j in 0..i {
                if cells[i][j].is_none() {
                    cells[i][j] = cells[j][i];
                    notes[i][j] = notes[j][i].clone();
                } else if cells[j][i].is_none() {
                    cells[j][i] = cells[i][j];
                    notes[j][i] = notes[i][j].clone();
                }
            }
        }
    }
    let names = |axis: &[Value], key: &str| axis.iter().map(|v| value_text(key, v)).collect();
    Heatmap {
        row_title: m.row_title.into(),
        col_title: m.col_title.into(),
        rows: names(&rows, m.row),
        cols: names(&cols, m.col),
        cells,
        notes,
        unit: recs[0].unit.clone(),
        metric: recs[0].metric,
        symmetric: m.symmetric,
        empty: m.empty.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// Drawing

const MARGIN: i32 = 12;
/// Top of the matrix: below the caption.
const TOP: i32 = 52;
/// Cells are square, at most this big (a 2×2 matrix) and at least this small (hundreds of CPUs).
const MAX_CELL: i32 = 64;
const MIN_CELL: i32 = 2;
/// The colour legend's pane on the right.
const LEGEND_W: i32 = 170;
/// Matrices up to this many rows and columns get their values printed in the cells.
pub const MAX_LABELLED: usize = 24;
const EMPTY: RGBColor = RGBColor(226, 226, 226);
const GREY: RGBColor = RGBColor(120, 120, 120);
/// Slices of the legend's colour bar.
const BAR_SLICES: i32 = 64;

/// Where everything goes; `size` and `draw` share it, so the picture fits its canvas.
pub(super) struct Layout {
    pub size: (u32, u32),
    x0: i32,
    cell: i32,
    gap: i32,
    /// Font size of the values in the cells; `None`: too many or too small cells to print them.
    value_font: Option<u32>,
    row_step: usize,
    col_step: usize,
    legend_x: i32,
    bar_top: i32,
    bar_h: i32,
    scale: Scale,
    /// The colour scale's ends, in the records' unit.
    lo: f64,
    hi: f64,
}

fn chars(s: &str) -> i32 {
    s.chars().count() as i32
}

/// Every `step`-th label, the step a power of two (CPU 0, 8, 16, …) wide enough for `px`.
fn label_step(cell: i32, px: i32) -> usize {
    let mut step = 1;
    while (step as i32) * cell < px {
        step *= 2;
    }
    step
}

pub(super) fn layout(h: &Heatmap, title: &str) -> Layout {
    let values: Vec<f64> = h.cells.iter().flatten().flatten().copied().collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 0.0) };
    // One scale for every cell and the legend, from the middle of the range: 20 ns to 2 µs
    // reads as 20 … 2000 ns, 0.5 to 150 GB/s as 0.50 … 150 GB/s.
    let mid = if lo > 0.0 { (lo * hi).sqrt() } else { hi };
    let scale = units::scale_for(mid, &h.unit);
    let widest = values
        .iter()
        .map(|v| chars(&units::scaled(*v, &scale)))
        .max()
        .unwrap_or(1);
    let (nr, nc) = (h.rows.len().max(1), h.cols.len().max(1));
    let row_label_w = h.rows.iter().map(|r| chars(r)).max().unwrap_or(1) * 8 + 8;
    let x0 = MARGIN + 26 + row_label_w;
    let room = WIDTH as i32 - x0 - LEGEND_W - MARGIN;
    let cell = (room / nr.max(nc) as i32).clamp(MIN_CELL, MAX_CELL);
    let gap = i32::from(cell >= 12);
    let value_font = (nr <= MAX_LABELLED && nc <= MAX_LABELLED)
        .then(|| {
            let fit = f64::from(cell - gap - 4) / (f64::from(widest) * 0.62);
            fit.min(f64::from(cell) * 0.42).min(14.0)
        })
        .filter(|f| *f >= 9.0)
        .map(|f| f as u32);
    let (mw, mh) = (cell * nc as i32, cell * nr as i32);
    let col_label_w = h.cols.iter().map(|c| chars(c)).max().unwrap_or(1) * 8 + 6;
    let legend_x = x0 + mw + 28;
    let bar_top = TOP + 24;
    let bar_h = mh.clamp(100, 320);
    let below_matrix = TOP + mh + 20 + 26 + MARGIN;
    let any_empty = h.cells.iter().flatten().any(Option::is_none);
    let below_legend = bar_top + bar_h + if any_empty { 40 } else { 12 } + MARGIN;
    let width = (legend_x + LEGEND_W)
        .max(chars(title) * 10 + 2 * MARGIN)
        .max(420);
    Layout {
        size: (width as u32, below_matrix.max(below_legend) as u32),
        x0,
        cell,
        gap,
        value_font,
        row_step: label_step(cell, 16),
        col_step: label_step(cell, col_label_w),
        legend_x,
        bar_top,
        bar_h,
        scale,
        lo,
        hi,
    }
}

/// Viridis at nine stops, dark (0) to light (1).
const VIRIDIS: [(u8, u8, u8); 9] = [
    (68, 1, 84),
    (72, 40, 120),
    (62, 73, 137),
    (49, 104, 142),
    (38, 130, 142),
    (31, 158, 137),
    (53, 183, 121),
    (110, 206, 88),
    (253, 231, 37),
];

/// The colour of `t` in 0..=1: light for the smallest value, dark for the largest.
pub(super) fn shade(t: f64) -> RGBColor {
    let x = (1.0 - t.clamp(0.0, 1.0)) * (VIRIDIS.len() - 1) as f64;
    let i = (x.floor() as usize).min(VIRIDIS.len() - 2);
    let f = x - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    let mix = |p: u8, q: u8| (f64::from(p) + (f64::from(q) - f64::from(p)) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Text on `c`: black or white, whichever contrasts more (WCAG's relative luminance).
pub(super) fn ink(c: RGBColor) -> &'static RGBColor {
    let lin = |v: u8| {
        let s = f64::from(v) / 255.0;
        if s <= 0.04045 {
            s / 12.92
        } else {
            ((s + 0.055) / 1.055).powf(2.4)
        }
    };
    let l = 0.2126 * lin(c.0) + 0.7152 * lin(c.1) + 0.0722 * lin(c.2);
    if (l + 0.05) / 0.05 >= 1.05 / (l + 0.05) {
        &BLACK
    } else {
        &WHITE
    }
}

fn position(v: f64, lo: f64, hi: f64) -> f64 {
    if hi > lo {
        (v - lo) / (hi - lo)
    } else {
        // One value (a 2-CPU host's only pair): the middle of the scale.
        0.5
    }
}

/// Tick values for the legend: about five round numbers inside lo..=hi.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    if hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / 4.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|s| s * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut out = Vec::new();
    let mut v = (lo / step).ceil() * step;
    while v <= hi + step * 1e-9 {
        out.push(v);
        v += step;
    }
    out
}

fn text_style(size: u32, color: &'static RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font())
        .color(color)
        .pos(Pos::new(h, v))
}

/// The tooltip of cell (i, j).
fn tip(h: &Heatmap, i: usize, j: usize, v: f64) -> String {
    let sep = if h.symmetric { "↔" } else { "→" };
    let mut s = format!(
        "{} {} {sep} {} {}: {}",
        h.row_title,
        h.rows[i],
        h.col_title,
        h.cols[j],
        units::human(v, &h.unit)
    );
    if let Some(n) = h
        .notes
        .get(i)
        .and_then(|r| r.get(j))
        .and_then(Option::as_ref)
    {
        s.push_str(&format!(" ({n})"));
    }
    s
}

pub(super) fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    h: &Heatmap,
) -> Result<Vec<Tip>, String> {
    let l = layout(h, title);
    let (width, _) = l.size;
    root.draw(&Text::new(
        title.to_string(),
        (width as i32 / 2, MARGIN),
        text_style(18, &BLACK, HPos::Center, VPos::Top),
    ))
    .map_err(err)?;
    let (mw, mh) = (l.cell * h.cols.len() as i32, l.cell * h.rows.len() as i32);
    let mut tips = Vec::new();
    for (i, row) in h.cells.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            let (x, y) = (l.x0 + j as i32 * l.cell, TOP + i as i32 * l.cell);
            let fill = v.map_or(EMPTY, |v| shade(position(v, l.lo, l.hi)));
            let (x1, y1) = (x + l.cell - l.gap, y + l.cell - l.gap);
            // Touching cells (no gap) reach a pixel into the next, which covers it: a
            // scaled-down SVG would show hairline seams between them otherwise.
            let reach = |last: bool| i32::from(l.gap == 0 && !last);
            let (rx, ry) = (reach(j + 1 == row.len()), reach(i + 1 == h.cells.len()));
            root.draw(&Rectangle::new([(x, y), (x1 + rx, y1 + ry)], fill.filled()))
                .map_err(err)?;
            let Some(v) = *v else { continue };
            tips.push(Tip {
                circle: false,
                at: (x, y),
                text: tip(h, i, j, v),
            });
            if let Some(size) = l.value_font {
                root.draw(&Text::new(
                    units::scaled(v, &l.scale),
                    ((x + x1) / 2, (y + y1) / 2),
                    text_style(size, ink(fill), HPos::Center, VPos::Center),
                ))
                .map_err(err)?;
            }
        }
    }
    // Labels: rows on the left, columns below, thinned to every 2nd, 4th, … when cells are small.
    let label = text_style(12, &BLACK, HPos::Right, VPos::Center);
    for (i, r) in h.rows.iter().enumerate().step_by(l.row_step) {
        let y = TOP + i as i32 * l.cell + l.cell / 2;
        root.draw(&Text::new(r.clone(), (l.x0 - 6, y), label.clone()))
            .map_err(err)?;
    }
    let label = text_style(12, &BLACK, HPos::Center, VPos::Top);
    for (j, c) in h.cols.iter().enumerate().step_by(l.col_step) {
        let x = l.x0 + j as i32 * l.cell + l.cell / 2;
        root.draw(&Text::new(c.clone(), (x, TOP + mh + 5), label.clone()))
            .map_err(err)?;
    }
    let axis = text_style(14, &BLACK, HPos::Center, VPos::Top);
    root.draw(&Text::new(
        h.col_title.clone(),
        (l.x0 + mw / 2, TOP + mh + 24),
        axis.clone(),
    ))
    .map_err(err)?;
    root.draw(&Text::new(
        h.row_title.clone(),
        (MARGIN, TOP + mh / 2),
        axis.transform(FontTransform::Rotate270),
    ))
    .map_err(err)?;
    draw_legend(root, h, &l)?;
    Ok(tips)
}

/// The colour bar: largest value on top, ticks in the cells' scale, and the empty cells' grey.
fn draw_legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    h: &Heatmap,
    l: &Layout,
) -> Result<(), String> {
    let x = l.legend_x;
    root.draw(&Text::new(
        format!("{} ({})", what(h.metric, &h.unit), l.scale.label),
        (x, TOP + 2),
        text_style(13, &BLACK, HPos::Left, VPos::Top),
    ))
    .map_err(err)?;
    let bar_w = 18;
    for k in 0..BAR_SLICES {
        // Each slice reaches into the next, which covers it: a scaled-down SVG shows no seams.
        let (ya, yb) = (
            l.bar_top + k * l.bar_h / BAR_SLICES,
            l.bar_top + ((k + 1) * l.bar_h / BAR_SLICES + i32::from(k + 1 < BAR_SLICES)),
        );
        let t = if l.hi > l.lo {
            1.0 - (f64::from(k) + 0.5) / f64::from(BAR_SLICES)
        } else {
            0.5
        };
        root.draw(&Rectangle::new(
            [(x, ya), (x + bar_w, yb)],
            shade(t).filled(),
        ))
        .map_err(err)?;
    }
    root.draw(&Rectangle::new(
        [(x, l.bar_top), (x + bar_w, l.bar_top + l.bar_h)],
        GREY.stroke_width(1),
    ))
    .map_err(err)?;
    let (lo, hi) = (l.lo / l.scale.factor, l.hi / l.scale.factor);
    let style = text_style(12, &BLACK, HPos::Left, VPos::Center);
    for v in ticks(lo, hi) {
        let y = l.bar_top + l.bar_h - (position(v, lo, hi) * f64::from(l.bar_h)).round() as i32;
        root.draw(&PathElement::new(
            vec![(x + bar_w, y), (x + bar_w + 4, y)],
            GREY.stroke_width(1),
        ))
        .map_err(err)?;
        // One value: said as in its cells; a range: round ticks.
        let text = if hi > lo { tick(v) } else { sig3(v) };
        root.draw(&Text::new(text, (x + bar_w + 8, y), style.clone()))
            .map_err(err)?;
    }
    if h.cells.iter().flatten().any(Option::is_none) {
        let y = l.bar_top + l.bar_h + 16;
        root.draw(&Rectangle::new([(x, y), (x + 14, y + 14)], EMPTY.filled()))
            .map_err(err)?;
        root.draw(&Rectangle::new(
            [(x, y), (x + 14, y + 14)],
            GREY.stroke_width(1),
        ))
        .map_err(err)?;
        root.draw(&Text::new(h.empty.clone(), (x + 22, y + 7), style))
            .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::{charts, svg};
    use crate::testdata::{c2c, numa, run_of};

    fn heatmaps(records: Vec<Record>) -> Vec<(String, Heatmap)> {
        charts(&run_of(records))
            .into_iter()
            .map(|c| match c.kind {
                Kind::Heatmap(h) => (c.title, h),
                other => panic!("{}: a heatmap, not {other:?}", c.title),
            })
            .collect()
    }

    fn chart(title: &str, h: &Heatmap) -> Chart {
        Chart {
            id: "x".into(),
            title: title.into(),
            subsystem: "mem".into(),
            kind: Kind::Heatmap(h.clone()),
        }
    }

    #[test]
    fn two_cpus_make_a_two_by_two_matrix_with_one_pair() {
        let hs = heatmaps(c2c(2, &["round_trip", "one_way"]));
        let titles: Vec<&str> = hs.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            titles,
            [
                "mem.c2c: core-to-core latency, round trip",
                "mem.c2c: core-to-core latency, one way"
            ]
        );
        let (title, h) = &hs[1];
        assert_eq!(h.rows, ["0", "1"]);
        assert_eq!(h.cols, ["0", "1"]);
        let v = Some(20e-9);
        let near = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => (a - b).abs() < 1e-15,
            (a, b) => a.is_none() && b.is_none(),
        };
        for (i, j, want) in [(0, 0, None), (0, 1, v), (1, 0, v), (1, 1, None)] {
            assert!(near(h.cells[i][j], want), "{i},{j}: {:?}", h.cells);
        }
        let s = svg(&chart(title, h)).unwrap();
        assert!(s.contains(title.as_str()));
        // The value in both cells, its tooltip with the pair's relation, the legend, the grey.
        assert_eq!(
            s.matches(">\n20.0\n</text>").count(),
            3,
            "two cells and a tick"
        );
        assert_eq!(
            s.matches("<title>CPU 0 ↔ CPU 1: 20.0 ns (SMT siblings)</title></rect>")
                .count()
                + s.matches("<title>CPU 1 ↔ CPU 0: 20.0 ns (SMT siblings)</title></rect>")
                    .count(),
            2
        );
        for text in ["Latency (ns)", "same CPU", ">\nCPU\n</text>"] {
            assert!(s.contains(text), "{text}");
        }
        let (w, hgt) = layout(h, title).size;
        assert!(
            (420..=960).contains(&w) && (200..=500).contains(&hgt),
            "{w}×{hgt}"
        );
    }

    #[test]
    fn eight_cpus_print_every_value_and_mirror_the_pairs() {
        let hs = heatmaps(c2c(8, &["round_trip", "one_way"]));
        assert_eq!(hs.len(), 2);
        let (title, h) = &hs[0];
        assert_eq!(h.rows.len(), 8);
        assert_eq!(h.cols, ["0", "1", "2", "3", "4", "5", "6", "7"]);
        for i in 0..8 {
            assert!(h.cells[i][i].is_none(), "diagonal {i}");
            for j in 0..8 {
                assert_eq!(h.cells[i][j], h.cells[j][i], "{i},{j}");
            }
        }
        // Round trip: SMT siblings 40 ns, one cache 90 ns, another 180 ns.
        let ns = |i: usize, j: usize| h.cells[i][j].map(|v| (v * 1e9).round());
        assert_eq!(
            (ns(0, 1), ns(0, 2), ns(0, 4)),
            (Some(40.0), Some(90.0), Some(180.0))
        );
        assert_eq!(
            h.notes[4][0].as_deref(),
            Some("same package, another last-level cache")
        );
        let l = layout(h, title);
        assert!(l.value_font.is_some(), "8 CPUs: values in the cells");
        let s = svg(&chart(title, h)).unwrap();
        assert_eq!(s.matches("</title></rect>").count(), 56);
        assert_eq!(s.matches(">\n180\n</text>").count(), 32, "{s}");
    }

    #[test]
    fn a_large_host_gets_small_cells_thinned_labels_and_no_cell_text() {
        let cpus = 192;
        let hs = heatmaps(c2c(cpus, &["one_way"]));
        let (title, h) = &hs[0];
        assert_eq!(title, "mem.c2c: core-to-core latency, one way");
        assert_eq!(h.rows.len(), 192);
        // Numeric order: 10 after 9, not after 1.
        assert_eq!(&h.rows[8..12], ["8", "9", "10", "11"]);
        let l = layout(h, title);
        assert!(l.value_font.is_none());
        assert!(l.cell >= MIN_CELL && l.cell <= 4, "{}", l.cell);
        assert!(
            l.col_step >= 8 && l.row_step >= 4,
            "{} {}",
            l.col_step,
            l.row_step
        );
        let (w, hgt) = l.size;
        assert!(w <= 1000 && hgt <= 900, "{w}×{hgt}");
        let s = svg(&chart(title, h)).unwrap();
        assert_eq!(s.matches("</title></rect>").count(), 192 * 191);
        // No cell text: the texts are the title, thinned labels, axis titles and the legend.
        assert!(
            s.matches("<text").count() < 120,
            "{}",
            s.matches("<text").count()
        );
    }

    #[test]
    fn numa_matrices_have_a_heatmap_per_unit_with_every_cell() {
        let hs = heatmaps(numa(1));
        let titles: Vec<&str> = hs.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            titles,
            [
                "mem.numa: bandwidth by CPU node and memory node",
                "mem.numa: latency by CPU node and memory node"
            ]
        );
        assert_eq!(hs[0].1.cells.len(), 1);
        assert_eq!(hs[0].1.cells[0].len(), 1);
        let s = svg(&chart(&hs[0].0, &hs[0].1)).unwrap();
        assert!(s.contains(">\n20.0\n</text>") && s.contains("Bandwidth (GB/s)"));
        assert!(s.contains("<title>CPU node 0 → Memory node 0: 20.0 GB/s</title>"));
        assert!(
            !s.contains("not measured"),
            "a full matrix has no empty cells"
        );

        let hs = heatmaps(numa(2));
        assert_eq!(hs.len(), 2);
        let (title, h) = &hs[1];
        assert_eq!(
            (h.row_title.as_str(), h.col_title.as_str()),
            ("CPU node", "Memory node")
        );
        assert_eq!(h.unit, "s");
        assert!(h.cells.iter().flatten().all(Option::is_some));
        let ns = |i: usize, j: usize| h.cells[i][j].map(|v| (v * 1e9).round());
        assert_eq!(
            (ns(0, 0), ns(0, 1), ns(1, 0)),
            (Some(90.0), Some(140.0), Some(140.0))
        );
        let s = svg(&chart(title, h)).unwrap();
        assert_eq!(
            s.matches(">\n140\n</text>").count(),
            3,
            "two cells and a tick"
        );
        assert!(s.contains("Memory node") && s.contains("Latency (ns)"));
    }

    #[test]
    fn a_parameter_of_the_cell_does_not_split_the_matrix() {
        let mut recs = c2c(4, &["one_way"]);
        for r in &mut recs {
            let rel = r.extra["relation"].clone();
            r.params.insert("relation".into(), rel);
        }
        let hs = heatmaps(recs);
        assert_eq!(
            hs.len(),
            1,
            "{:?}",
            hs.iter().map(|h| &h.0).collect::<Vec<_>>()
        );
        assert_eq!(hs[0].0, "mem.c2c: core-to-core latency, one way");
    }

    #[test]
    fn cell_text_contrasts_with_its_cell() {
        assert_eq!(*ink(shade(0.0)), BLACK, "the lightest cell");
        assert_eq!(*ink(shade(1.0)), WHITE, "the darkest cell");
        assert_eq!(*ink(EMPTY), BLACK);
        // Darker is larger, all the way.
        let luma = |c: RGBColor| {
            0.2126 * f64::from(c.0) + 0.7152 * f64::from(c.1) + 0.0722 * f64::from(c.2)
        };
        let steps: Vec<f64> = (0..=10).map(|i| luma(shade(f64::from(i) / 10.0))).collect();
        assert!(steps.windows(2).all(|w| w[0] > w[1]), "{steps:?}");
    }
}
