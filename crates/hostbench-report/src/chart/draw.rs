//! Drawing a `Chart` with plotters: SVG (with hover titles) and PNG, lines, bars and their
//! legends. Split out of `chart.rs` so the chart builders and the drawing each stay readable
//! (issue 53).

use super::*;

// ---------------------------------------------------------------------------------------------
// Drawing

pub(crate) const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

pub(crate) fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

pub(crate) fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The embedded font is valid TrueType; if registration failed anyway, drawing reports
        // the missing font as a chart error instead of panicking here.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
}

/// Where a line chart's legend goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegendAt {
    /// In a pane of its own on the right of the image: a standalone SVG or PNG, which has no
    /// page around it.
    Pane,
    /// Outside the image: a page lays the legend out as HTML (`legend`) beside the plot on a wide
    /// screen and under it on a narrow one, so on a phone the plot has the whole width.
    Page,
}

/// Pixel size of a chart as a standalone image.
pub fn size(chart: &Chart) -> (u32, u32) {
    size_with(chart, LegendAt::Pane)
}

/// Pixel size of a chart with its legend at `at` (only a line chart's legend can leave it).
pub(crate) fn size_with(chart: &Chart, at: LegendAt) -> (u32, u32) {
    match &chart.kind {
        Kind::Lines(_) if at == LegendAt::Page => (WIDTH - LEGEND_WIDTH, 460),
        Kind::Lines(_) => (WIDTH, 460),
        Kind::Bars(b) => {
            let band = (b.series.len() as u32 * 9 + 8).max(20);
            (
                WIDTH,
                110 + band * b.categories.len() as u32 + 24 * b.series.len() as u32,
            )
        }
        Kind::Heatmap(h) => heatmap::layout(h, &chart.title).size,
    }
}

/// The chart as a standalone SVG document (a line chart's legend in a pane of the image).
pub fn svg(chart: &Chart) -> Result<String, ReportError> {
    svg_with(chart, LegendAt::Pane)
}

/// The chart as an SVG document with its legend at `at`.
pub fn svg_with(chart: &Chart, at: LegendAt) -> Result<String, ReportError> {
    register_font();
    let mut s = String::new();
    let tips = {
        let root = SVGBackend::with_string(&mut s, size_with(chart, at)).into_drawing_area();
        draw(&root, chart, at).map_err(|message| ReportError::Chart {
            chart: chart.title.clone(),
            message,
        })?
    };
    Ok(with_titles(&s, tips))
}

/// `svg` with each tooltip as a `<title>` child of its mark. Plotters writes one element per
/// line, with its position as the first attributes, so a mark is found by where it was drawn;
/// marks drawn at the same place take their tooltips in drawing order.
pub(crate) fn with_titles(svg: &str, tips: Vec<Tip>) -> String {
    if tips.is_empty() {
        return svg.to_string();
    }
    let mut at: HashMap<(bool, i32, i32), Vec<String>> = HashMap::new();
    for t in tips.into_iter().rev() {
        at.entry((t.circle, t.at.0, t.at.1))
            .or_default()
            .push(t.text);
    }
    let attr = |line: &str, name: &str| -> Option<i32> {
        let pat = format!(" {name}=\"");
        let from = line.find(&pat)? + pat.len();
        let len = line[from..].find('"')?;
        line[from..from + len].parse().ok()
    };
    let mut out = String::with_capacity(svg.len() + at.len() * 64);
    for line in svg.split_inclusive('\n') {
        let (circle, tag, x, y) = if line.starts_with("<circle ") {
            (true, "circle", "cx", "cy")
        } else if line.starts_with("<rect ") {
            (false, "rect", "x", "y")
        } else {
            out.push_str(line);
            continue;
        };
        let text = match (attr(line, x), attr(line, y)) {
            (Some(x), Some(y)) => at.get_mut(&(circle, x, y)).and_then(Vec::pop),
            _ => None,
        };
        match (text, line.trim_end().strip_suffix("/>")) {
            (Some(text), Some(open)) => {
                out.push_str(&format!(
                    "{open}><title>{}</title></{tag}>\n",
                    crate::export::html::esc(&text)
                ));
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// The chart as a PNG file.
pub fn png(chart: &Chart, path: &Path) -> Result<(), ReportError> {
    register_font();
    let root = BitMapBackend::new(path, size(chart)).into_drawing_area();
    draw(&root, chart, LegendAt::Pane)
        .map(|_| ())
        .map_err(|message| ReportError::Chart {
            chart: chart.title.clone(),
            message,
        })
}

/// Every chart of a run as `DIR/<id>.png`; returns the files written.
pub fn write_pngs(run: &RunResult, dir: &Path) -> Result<Vec<std::path::PathBuf>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|e| ReportError::io(dir, e))?;
    let mut written = Vec::new();
    for c in charts(run) {
        let path = dir.join(format!("{}.png", c.id));
        png(&c, &path)?;
        written.push(path);
    }
    Ok(written)
}

pub(crate) fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Draws the chart; returns the tooltips of its marks (for SVG).
pub(crate) fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
    at: LegendAt,
) -> Result<Vec<Tip>, String> {
    root.fill(&WHITE).map_err(err)?;
    let tips = match &chart.kind {
        Kind::Lines(l) => draw_lines(root, &chart.title, l, at)?,
        Kind::Bars(b) => {
            draw_bars(root, &chart.title, b)?;
            Vec::new()
        }
        Kind::Heatmap(h) => heatmap::draw(root, &chart.title, h)?,
    };
    root.present().map_err(err)?;
    Ok(tips)
}

/// A tick label with at most three significant digits.
pub(crate) fn tick(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let p = 10f64.powf(2.0 - v.abs().log10().floor());
    let r = (v * p).round() / p;
    format!("{r}")
}

pub(crate) fn draw_lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    l: &Lines,
    at: LegendAt,
) -> Result<Vec<Tip>, String> {
    let xs: Vec<f64> = l
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    // The axis holds the measured points, the theoretical lines and the levels alike.
    let ys: Vec<f64> = l
        .series
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .map(|p| p.1)
                .chain(s.peaks.iter().map(|p| p.1))
        })
        .chain(l.levels.iter().map(|(_, y)| *y))
        .collect();
    let (xmin, xmax) = bounds(&xs);
    let (ymin, ymax) = bounds(&ys);
    let scale = units::scale_for(ymax, &l.unit);
    let (x_scale, x_log, x_desc) = match &l.x {
        XAxis::Quantity(unit) => {
            let s = units::scale_for(xmax, unit);
            let desc = format!("{} ({})", l.x_label, s.label);
            (s, false, desc)
        }
        other => (
            Scale {
                factor: 1.0,
                label: String::new(),
            },
            *other == XAxis::Bytes || (xmin > 0.0 && xmax / xmin >= 8.0),
            l.x_label.clone(),
        ),
    };
    let y_log = ymin > 0.0
        && match l.y {
            YAxis::Auto => ymax / ymin > 100.0,
            YAxis::Log => ymax / ymin >= 10.0,
        };
    let y_desc = format!("{} ({})", what(l.metric, &l.unit), scale.label);
    // The legend has a pane of its own on the right, so it can never cover a point; on a page
    // it is HTML outside the image.
    let plot;
    let root = match at {
        LegendAt::Pane => {
            let (left, pane) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
            draw_legend(&pane, l)?;
            plot = left;
            &plot
        }
        LegendAt::Page => root,
    };
    let (ylo, yhi) = (ymin / scale.factor, ymax / scale.factor);
    let (xmin, xmax) = (xmin / x_scale.factor, xmax / x_scale.factor);
    let x_fmt = |v: &f64| -> String {
        match l.x {
            XAxis::Bytes => units::bytes(*v),
            XAxis::Quantity(_) => tick(*v),
            XAxis::Count if (v - v.round()).abs() < 1e-6 => format!("{v:.0}"),
            XAxis::Count => String::new(),
        }
    };
    let xr_log = (xmin / 1.25)..(xmax * 1.25);
    let xr_lin = if matches!(l.x, XAxis::Quantity(_)) {
        0.0..(xmax * 1.08)
    } else {
        let pad = ((xmax - xmin) * 0.05).max(0.25);
        (xmin - pad).max(0.0)..(xmax + pad)
    };
    let yr_log = (ylo / 1.5)..(yhi * 1.5);
    let yr_lin = 0.0..(yhi * 1.15);
    let axes = Axes {
        title,
        x_desc: &x_desc,
        y_desc: &y_desc,
        x_scale: &x_scale,
        y_scale: &scale,
        x_fmt: &x_fmt,
    };
    // Thread counts and byte sizes both double from point to point.
    let base = 2.0;
    match (x_log, y_log) {
        (true, true) => lines_in(
            root,
            l,
            &axes,
            xr_log.log_scale().base(base),
            yr_log.log_scale(),
        ),
        (true, false) => lines_in(root, l, &axes, xr_log.log_scale().base(base), yr_lin),
        (false, true) => lines_in(root, l, &axes, xr_lin, yr_log.log_scale()),
        (false, false) => lines_in(root, l, &axes, xr_lin, yr_lin),
    }
}

pub(crate) fn bounds(v: &[f64]) -> (f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if lo.is_finite() && hi.is_finite() {
        if hi > lo {
            (lo, hi)
        } else {
            (lo * 0.5, hi * 1.5 + 1e-300)
        }
    } else {
        (1.0, 2.0)
    }
}

/// A line chart's axes: titles, the scales its values are divided by, and x's tick labels.
pub(crate) struct Axes<'a> {
    pub(crate) title: &'a str,
    pub(crate) x_desc: &'a str,
    pub(crate) y_desc: &'a str,
    pub(crate) x_scale: &'a Scale,
    pub(crate) y_scale: &'a Scale,
    pub(crate) x_fmt: &'a dyn Fn(&f64) -> String,
}

pub(crate) fn lines_in<DB, X, Y>(
    root: &DrawingArea<DB, Shift>,
    l: &Lines,
    a: &Axes<'_>,
    xr: X,
    yr: Y,
) -> Result<Vec<Tip>, String>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(a.title, (FONT, 18))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(70)
        .build_cartesian_2d(xr, yr)
        .map_err(err)?;
    let y_fmt = |v: &f64| tick(*v);
    chart
        .configure_mesh()
        .x_desc(a.x_desc)
        .y_desc(a.y_desc)
        .x_label_formatter(a.x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    let (xf, yf) = (a.x_scale.factor, a.y_scale.factor);
    let xr = chart.x_range();
    for (_, y) in &l.levels {
        chart
            .draw_series(DashedLineSeries::new(
                [(xr.start, y / yf), (xr.end, y / yf)],
                2,
                4,
                LEVEL.stroke_width(2),
            ))
            .map_err(err)?;
    }
    let mut tips = Vec::new();
    for (i, s) in l.series.iter().enumerate() {
        let c = color(s.dashed_like.unwrap_or(i));
        let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (p.0 / xf, p.1 / yf)).collect();
        if s.dashed_like.is_some() {
            chart
                .draw_series(DashedLineSeries::new(
                    pts.clone(),
                    6,
                    4,
                    c.mix(0.7).stroke_width(1),
                ))
                .map_err(err)?;
            chart
                .draw_series(
                    pts.iter()
                        .map(|&(x, y)| Circle::new((x, y), 2, c.mix(0.7).filled())),
                )
                .map_err(err)?;
        } else {
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(err)?;
            chart
                .draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 3, c.filled())))
                .map_err(err)?;
        }
        tips.extend(pts.iter().zip(&s.tips).map(|(p, text)| Tip {
            circle: true,
            at: chart.backend_coord(p),
            text: text.clone(),
        }));
        // Rings after the points, so marks at one place take their tooltips in drawing order.
        let ringed: Vec<(&(f64, f64), &String)> = pts
            .iter()
            .zip(&s.rings)
            .filter(|(_, r)| **r)
            .map(|(p, _)| p)
            .zip(
                s.tips
                    .iter()
                    .zip(&s.rings)
                    .filter(|(_, r)| **r)
                    .map(|(t, _)| t),
            )
            .collect();
        chart
            .draw_series(
                ringed
                    .iter()
                    .map(|(&(x, y), _)| Circle::new((x, y), 7, RING.stroke_width(2))),
            )
            .map_err(err)?;
        tips.extend(ringed.iter().map(|(p, text)| Tip {
            circle: true,
            at: chart.backend_coord(p),
            text: (*text).clone(),
        }));
        // Error bars: ± one standard deviation.
        chart
            .draw_series(s.points.iter().filter(|p| p.2 > 0.0).map(|p| {
                let lo = ((p.1 - p.2) / yf).max(p.1 / yf * 0.01);
                let hi = (p.1 + p.2) / yf;
                PathElement::new(vec![(p.0 / xf, lo), (p.0 / xf, hi)], c.stroke_width(1))
            }))
            .map_err(err)?;
        // The theoretical limit at each x (it grows with threads), dashed.
        let peaks: Vec<(f64, f64)> = s.peaks.iter().map(|p| (p.0 / xf, p.1 / yf)).collect();
        if peaks.len() >= 2 {
            chart
                .draw_series(DashedLineSeries::new(peaks, 6, 4, c.stroke_width(1)))
                .map_err(err)?;
        } else if let Some(&(x, y)) = peaks.first() {
            chart
                .draw_series(std::iter::once(Cross::new((x, y), 4, c.stroke_width(1))))
                .map_err(err)?;
        }
    }
    Ok(tips)
}

/// Width of the legend pane beside a line chart.
pub(crate) const LEGEND_WIDTH: u32 = 230;
/// The colour of a line chart's levels (reference lines).
pub(crate) const LEVEL: RGBColor = RGBColor(110, 110, 110);
/// The colour of a ring around a flagged point.
pub(crate) const RING: RGBColor = RGBColor(200, 0, 0);

/// What a line chart's legend says, in order. One list for both renderings: the pane inside a
/// standalone image (`draw_legend`) and the HTML beside the plot on a page (`export::html`).
#[derive(Debug, Clone)]
pub struct Legend {
    /// One entry per series, then per level, then what a ring means (where a point is ringed).
    pub entries: Vec<(Mark, String)>,
    /// What the dashes and the error bars mean (where the chart has them).
    pub keys: Vec<(Mark, String)>,
    /// Lines of text without a mark (`Lines::notes`).
    pub notes: Vec<String>,
}

/// A legend entry's mark: a small drawing of what the entry names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A series' line with its point, in colour `i`.
    Line(usize),
    /// A series drawn dashed, thinner and paler in colour `i` (`Series::dashed_like`).
    DashedLike(usize),
    /// A level: a dotted grey line.
    Level,
    /// A ring around a point.
    Ring,
    /// A theoretical peak: a dashed grey line.
    Peak,
    /// An error bar.
    Deviation,
}

/// Width and height of a mark drawn on its own (`swatch`); it is centred at `SWATCH.1 / 2`.
pub(crate) const SWATCH: (u32, u32) = (30, 20);

/// A line chart's legend.
pub fn legend(l: &Lines) -> Legend {
    let mut entries: Vec<(Mark, String)> = l
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mark = s.dashed_like.map_or(Mark::Line(i), Mark::DashedLike);
            (mark, s.name.clone())
        })
        .collect();
    entries.extend(l.levels.iter().map(|(name, _)| (Mark::Level, name.clone())));
    if let Some(means) = l
        .ring_means
        .as_ref()
        .filter(|_| l.series.iter().any(|s| s.rings.contains(&true)))
    {
        entries.push((Mark::Ring, means.clone()));
    }
    let mut keys = Vec::new();
    if l.series.iter().any(|s| !s.peaks.is_empty()) {
        keys.push((Mark::Peak, "theoretical peak (dashed)".to_string()));
    }
    if l.series.iter().flat_map(|s| &s.points).any(|p| p.2 > 0.0) {
        keys.push((Mark::Deviation, "± 1 standard deviation".to_string()));
    }
    Legend {
        entries,
        keys,
        notes: l.notes.clone(),
    }
}

/// A mark on its own as a small SVG document (`class="swatch"`), for a legend outside the
/// image: drawn by the same code as the pane's marks, so the two legends look alike.
pub fn swatch(mark: Mark) -> Result<String, ReportError> {
    let mut s = String::new();
    {
        let area = SVGBackend::with_string(&mut s, SWATCH).into_drawing_area();
        draw_mark(&area, mark, SWATCH.1 as i32 / 2)
            .and_then(|()| area.present().map_err(err))
            .map_err(|message| ReportError::Chart {
                chart: "legend".into(),
                message,
            })?;
    }
    Ok(s.replacen("<svg ", "<svg class=\"swatch\" aria-hidden=\"true\" ", 1))
}

/// A legend entry's mark, centred at (16, `y`) of `area`.
pub(crate) fn draw_mark<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    mark: Mark,
    y: i32,
) -> Result<(), String> {
    let grey = RGBColor(90, 90, 90);
    match mark {
        Mark::DashedLike(like) => {
            let c = color(like).mix(0.7);
            for x in [6, 16] {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 6, y)],
                    c.stroke_width(1),
                ))
                .map_err(err)?;
            }
            area.draw(&Circle::new((16, y), 2, c.filled()))
                .map_err(err)?;
        }
        Mark::Line(i) => {
            let c = color(i);
            area.draw(&PathElement::new(vec![(6, y), (26, y)], c.stroke_width(2)))
                .map_err(err)?;
            area.draw(&Circle::new((16, y), 3, c.filled()))
                .map_err(err)?;
        }
        Mark::Level => {
            for x in [6, 12, 18, 24] {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 2, y)],
                    LEVEL.stroke_width(2),
                ))
                .map_err(err)?;
            }
        }
        Mark::Ring => {
            area.draw(&Circle::new((16, y), 7, RING.stroke_width(2)))
                .map_err(err)?;
        }
        Mark::Peak => {
            for x in [6, 16] {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 6, y)],
                    grey.stroke_width(1),
                ))
                .map_err(err)?;
            }
        }
        Mark::Deviation => {
            area.draw(&PathElement::new(
                vec![(16, y - 6), (16, y + 6)],
                grey.stroke_width(1),
            ))
            .map_err(err)?;
        }
    }
    Ok(())
}

/// A line chart's legend in its own pane: one entry per series, then what the dashes and the
/// error bars mean.
pub(crate) fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    l: &Lines,
) -> Result<(), String> {
    let legend = legend(l);
    let mut y = 48;
    for (mark, text) in &legend.entries {
        draw_mark(area, *mark, y)?;
        legend_text(area, text, &mut y)?;
    }
    y += 6;
    for (mark, text) in &legend.keys {
        draw_mark(area, *mark, y)?;
        legend_text(area, text, &mut y)?;
    }
    if !legend.notes.is_empty() {
        y += 6;
        let style = TextStyle::from((FONT, 12).into_font())
            .color(&RGBColor(90, 90, 90))
            .pos(Pos::new(HPos::Left, VPos::Center));
        for n in &legend.notes {
            area.draw(&Text::new(n.clone(), (6, y), style.clone()))
                .map_err(err)?;
            y += 18;
        }
    }
    Ok(())
}

/// One legend entry's text beside its mark at `y`, cut to the pane's width; moves `y` down.
pub(crate) fn legend_text<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    y: &mut i32,
) -> Result<(), String> {
    const MAX_CHARS: usize = 30;
    let style = TextStyle::from((FONT, 12).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let text: String = if text.chars().count() > MAX_CHARS {
        text.chars()
            .take(MAX_CHARS - 1)
            .chain(std::iter::once('…'))
            .collect()
    } else {
        text.to_string()
    };
    area.draw(&Text::new(text, (34, *y), style)).map_err(err)?;
    *y += 20;
    Ok(())
}

pub(crate) fn draw_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    b: &Bars,
) -> Result<(), String> {
    let max = b
        .series
        .iter()
        .flat_map(|s| s.values.iter().flatten().copied())
        .fold(0.0f64, f64::max);
    let (scale, x_desc) = if b.unit == "%" {
        (
            Scale {
                factor: 1.0,
                label: "%".into(),
            },
            "Efficiency (% of theoretical)".to_string(),
        )
    } else {
        let s = units::scale_for(max, &b.unit);
        let d = format!("{} ({})", b.quantity, s.label);
        (s, d)
    };
    let xmax = if b.unit == "%" {
        (max * 1.12).max(110.0)
    } else {
        (max / scale.factor * 1.12).max(1e-9)
    };
    let n = b.categories.len();
    // Room for the legend above the first band.
    let legend_rows = b.series.len() as f64 * 0.9 + 0.4;
    let longest = b
        .categories
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(4);
    let label_px = (longest as u32 * 7 + 16).clamp(60, 420);
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 18))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(label_px)
        .build_cartesian_2d(0.0..xmax, 0.0..(n as f64 + legend_rows))
        .map_err(err)?;
    let x_fmt = |v: &f64| tick(*v);
    chart
        .configure_mesh()
        .x_desc(x_desc.as_str())
        .x_label_formatter(&x_fmt)
        .y_labels(0)
        .disable_y_mesh()
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    // Where no category has two values (the series sort the categories into kinds, as the
    // modes of transactions), each bar fills its band in its series' colour.
    let one_each = (0..n).all(|i| {
        b.series
            .iter()
            .filter(|s| s.values.get(i).is_some_and(Option::is_some))
            .count()
            <= 1
    });
    let m = if one_each {
        1.0
    } else {
        b.series.len().max(1) as f64
    };
    let bar_h = 0.8 / m;
    // Category i's band is [n-1-i, n-i) so the first category is on top.
    for (si, s) in b.series.iter().enumerate() {
        let c = color(si);
        let slot = if one_each { 0.0 } else { si as f64 };
        let rects = s.values.iter().enumerate().filter_map(|(i, v)| {
            let v = (*v)? / scale.factor;
            let top = (n - i) as f64 - 0.1 - slot * bar_h;
            Some(Rectangle::new(
                [(0.0, top - bar_h * 0.92), (v, top)],
                c.filled(),
            ))
        });
        chart
            .draw_series(rects)
            .map_err(err)?
            .label(s.name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
    }
    if b.unit == "%" {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(100.0, 0.0), (100.0, n as f64)],
                RGBColor(120, 120, 120).stroke_width(1),
            )))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .label_font((FONT, 12))
        .draw()
        .map_err(err)?;
    let style = TextStyle::from((FONT, 12).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Right, VPos::Center));
    for (i, cat) in b.categories.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(0.0, (n - i) as f64 - 0.5));
        let text: String = if cat.chars().count() > 58 {
            cat.chars().take(57).chain(std::iter::once('…')).collect()
        } else {
            cat.clone()
        };
        root.draw(&Text::new(text, (px - 6, py), style.clone()))
            .map_err(err)?;
    }
    Ok(())
}
