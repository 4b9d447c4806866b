//! Plots of a run, as PNG and SVG, drawn with `plotters`.
//!
//! Text needs a TrueType font. The PNG renderer is plotters' pure-Rust `ab_glyph` path, so no
//! fontconfig is needed at build time; at run time a font file is loaded from the usual system
//! locations (Debian/Ubuntu: `apt-get install fonts-dejavu-core`). Without one, plotting fails
//! with [`PlotError::NoFont`] naming the package to install; the rest of the report (summary,
//! CSV, `report.md`) is still written.
//!
//! Charts: per-flow throughput with the max-min fair shares dashed in dark grey (a style no flow
//! uses), also on a logarithmic axis (`throughput-log`) so that a 1 Gb/s phase after a 10 Gb/s
//! one does not lie on the floor; queue occupancy with Qeq and Qhigh; CNMs received per second
//! per flow, in bins sized to the run. Scenario events are thin grey vertical lines labelled with
//! what happened; the steady-state window the summary averages over is shaded.
//!
//! The y axis is robust to start-up and step spikes: unless fixed by the caller, its top is set
//! from the 95th percentile of the plotted data (and the reference lines: fair shares, Qeq,
//! Qhigh), not from the maximum, so that a 0.1 s burst to 150 kB does not flatten a 25-40 kB
//! signal. Data above the top is drawn at the top, and the legend notes the peak and its time.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::analysis::metrics::cnm_rate_series;
use crate::analysis::{Analysis, RunData};

/// Why a plot was not drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlotError {
    /// No TrueType font was found in any of these paths.
    NoFont(Vec<PathBuf>),
    /// The drawing backend failed (I/O, encoding).
    Draw(String),
}

impl std::fmt::Display for PlotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoFont(paths) => write!(
                f,
                "no TrueType font found for plot text (install fonts-dejavu-core, or pass a font path); looked in {}",
                paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            ),
            Self::Draw(e) => write!(f, "plot drawing failed: {e}"),
        }
    }
}

impl std::error::Error for PlotError {}

/// Font files tried, in order, when none is given.
pub const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
];

static FONT: OnceLock<Result<PathBuf, PlotError>> = OnceLock::new();

/// Reads the first readable TrueType font among `candidates`: its path and bytes.
pub fn find_font(candidates: &[PathBuf]) -> Result<(PathBuf, Vec<u8>), PlotError> {
    for p in candidates {
        if let Ok(bytes) = std::fs::read(p) {
            if ab_glyph_ok(&bytes) {
                return Ok((p.clone(), bytes));
            }
        }
    }
    Err(PlotError::NoFont(candidates.to_vec()))
}

/// Whether `bytes` start like a TrueType/OpenType font (sfnt version 1.0, `true` or `OTTO`).
fn ab_glyph_ok(bytes: &[u8]) -> bool {
    matches!(
        bytes.get(..4),
        Some([0, 1, 0, 0]) | Some(b"true") | Some(b"OTTO")
    )
}

/// Loads and registers the plot font once per process (`extra` is tried first). Later calls
/// return the first outcome.
pub fn ensure_font(extra: Option<&Path>) -> Result<PathBuf, PlotError> {
    FONT.get_or_init(|| {
        let candidates: Vec<PathBuf> = extra
            .map(Path::to_path_buf)
            .into_iter()
            .chain(FONT_CANDIDATES.iter().map(PathBuf::from))
            .collect();
        let (path, bytes) = find_font(&candidates)?;
        // The font registry keeps `&'static` data for the life of the process; one font file
        // is leaked once (OnceLock).
        let data: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, data)
            .map_err(|_| PlotError::NoFont(vec![path.clone()]))?;
        let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, data);
        Ok(path)
    })
    .clone()
}

/// Ten colours that stay apart on white (the "tab10" palette).
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Legend text (`None` = not in the legend).
    pub label: Option<String>,
    /// Colour.
    pub color: RGBColor,
    /// Points in chart units.
    pub points: Vec<(f64, f64)>,
    /// Dashed.
    pub dashed: bool,
    /// Stroke width (pixels).
    pub width: u32,
}

/// One chart panel.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartSpec {
    /// Title.
    pub title: String,
    /// X axis description with unit.
    pub x_label: String,
    /// Y axis description with unit.
    pub y_label: String,
    /// Unit of the y values as printed in the peak note (`"Mb/s"`, `"kB"`).
    pub y_unit: String,
    /// X range.
    pub x_range: (f64, f64),
    /// Y maximum (the minimum is 0, or on a log axis a little below the data); `None` = from
    /// the data ([`ChartSpec::robust_y_top`]).
    pub y_max: Option<f64>,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// Lines; solid ones are data, dashed ones references (fair share, thresholds).
    pub lines: Vec<Line>,
    /// Vertical event markers: x position and what happened.
    pub vlines: Vec<(f64, String)>,
    /// Shaded x interval (the steady-state window), with its legend text.
    pub shade: Option<(f64, f64)>,
}

/// Fraction of the data points that may lie above a data-derived y axis.
pub const Y_PERCENTILE: f64 = 0.95;

/// The `q`-quantile (0..=1) of `v` (sorted in place; nearest rank).
pub fn quantile(v: &mut [f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let i = ((v.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
    Some(v[i])
}

impl ChartSpec {
    /// Largest y of the lines.
    pub fn data_y_max(&self) -> f64 {
        self.lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .filter(|y| y.is_finite())
            .fold(0.0, f64::max)
    }

    /// The data's highest point `(x, y)` (solid lines only).
    pub fn peak(&self) -> Option<(f64, f64)> {
        self.lines
            .iter()
            .filter(|l| !l.dashed)
            .flat_map(|l| l.points.iter().copied())
            .filter(|p| p.1.is_finite())
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The top of a data-derived y axis: 1.3 × the larger of the data's 95th percentile
    /// (solid lines) and the highest reference line (dashed), or 1.15 × the peak when that is
    /// lower (nothing is cut off then).
    pub fn robust_y_top(&self) -> f64 {
        let mut data: Vec<f64> = self
            .lines
            .iter()
            .filter(|l| !l.dashed)
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .filter(|y| y.is_finite())
            .collect();
        let refs = self
            .lines
            .iter()
            .filter(|l| l.dashed)
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .filter(|y| y.is_finite())
            .fold(0.0, f64::max);
        let peak = data.iter().copied().fold(0.0, f64::max);
        let robust = quantile(&mut data, Y_PERCENTILE).unwrap_or(0.0).max(refs) * 1.3;
        let all = peak.max(refs) * 1.15;
        let top = if all <= robust { all } else { robust };
        if top > 0.0 {
            top
        } else {
            1.0
        }
    }

    fn y_top(&self) -> f64 {
        match self.y_max {
            Some(m) if m > 0.0 => m,
            _ => self.robust_y_top(),
        }
    }

    /// Bottom of a log axis: half the smallest positive data point's 1st percentile, at least
    /// 1/10^4 of the top.
    fn y_log_bottom(&self, top: f64) -> f64 {
        let mut pos: Vec<f64> = self
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .filter(|y| y.is_finite() && *y > 0.0)
            .collect();
        let low = quantile(&mut pos, 0.01).unwrap_or(top / 100.0) / 2.0;
        low.clamp(top / 1e4, top / 2.0)
    }

    /// The note for data above the axis: `peak 148.1 kB at 0.10 s (off scale)`.
    pub fn peak_note(&self) -> Option<String> {
        let top = self.y_top();
        let (t, y) = self.peak()?;
        (y > top).then(|| format!("peak {y:.1} {} at {t:.2} s (off the axis)", self.y_unit))
    }
}

fn err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// Keeps at most about `max` points, preserving each bucket's minimum and maximum in order.
pub fn decimate(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max || max < 4 {
        return points.to_vec();
    }
    let buckets = max / 2;
    let per = points.len().div_ceil(buckets);
    let mut out = Vec::with_capacity(max + 2);
    for chunk in points.chunks(per) {
        let (mut lo, mut hi) = (0, 0);
        for (i, p) in chunk.iter().enumerate() {
            if p.1 < chunk[lo].1 {
                lo = i;
            }
            if p.1 > chunk[hi].1 {
                hi = i;
            }
        }
        let (a, b) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        out.push(chunk[a]);
        if b != a {
            out.push(chunk[b]);
        }
    }
    out
}

/// Tick label with as many decimals as the ticks of an axis spanning `span` need (about ten
/// ticks per axis).
fn tick(v: f64, span: f64) -> String {
    let step = span / 10.0;
    let d = if step > 0.0 && step.is_finite() {
        (-step.log10().floor()).clamp(0.0, 6.0) as usize
    } else {
        0
    };
    format!("{v:.d$}")
}

/// Draws one chart on `area`.
pub fn draw_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    spec: &ChartSpec,
) -> Result<(), PlotError> {
    let (x0, mut x1) = spec.x_range;
    if x1.is_nan() || x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = spec.y_top();
    let y0 = if spec.log_y {
        spec.y_log_bottom(y1)
    } else {
        0.0
    };
    // Data beyond the axis is drawn at its edge.
    let clamp = |pts: Vec<(f64, f64)>| -> Vec<(f64, f64)> {
        pts.into_iter().map(|(x, y)| (x, y.clamp(y0, y1))).collect()
    };
    let note = spec.peak_note();
    // The title first, so that the room for the event labels lies between it and the plot.
    let area = &area.titled(&spec.title, ("sans-serif", 20)).map_err(err)?;
    let mut builder = ChartBuilder::on(area);
    builder
        .margin(12)
        .margin_right(28)
        .margin_top(if spec.vlines.iter().any(|v| !v.1.is_empty()) {
            36
        } else {
            8
        })
        .x_label_area_size(48)
        .y_label_area_size(72);
    // The same body for the linear and the logarithmic axis (two coordinate types).
    macro_rules! body {
        ($chart:ident, $ylab:expr) => {{
            $chart
                .configure_mesh()
                .x_label_formatter(&|v| tick(*v, x1 - x0))
                .y_label_formatter(&$ylab)
                .x_desc(spec.x_label.as_str())
                .y_desc(spec.y_label.as_str())
                .label_style(("sans-serif", 14))
                .axis_desc_style(("sans-serif", 16))
                .light_line_style(RGBColor(238, 238, 238))
                .bold_line_style(RGBColor(215, 215, 215))
                .draw()
                .map_err(err)?;
            if let Some((a, b)) = spec.shade {
                let (a, b) = (a.max(x0), b.min(x1));
                if b > a {
                    $chart
                        .draw_series(std::iter::once(Rectangle::new(
                            [(a, y0), (b, y1)],
                            RGBColor(255, 243, 205).mix(0.6).filled(),
                        )))
                        .map_err(err)?
                        .label("steady window (summary)")
                        .legend(|(x, y)| {
                            Rectangle::new(
                                [(x, y - 5), (x + 20, y + 5)],
                                RGBColor(255, 243, 205).filled(),
                            )
                        });
                }
            }
            let grey = RGBColor(120, 120, 120);
            for (k, (x, label)) in spec.vlines.iter().enumerate() {
                $chart
                    .draw_series(LineSeries::new(
                        vec![(*x, y0), (*x, y1)],
                        ShapeStyle::from(grey).stroke_width(1),
                    ))
                    .map_err(err)?;
                if !label.is_empty() {
                    // Above the plot, under the title; neighbouring events alternate rows.
                    let (px, py) = $chart.backend_coord(&(*x, y1));
                    let (bx, by) = area.get_base_pixel();
                    let row = if k % 2 == 0 { 32 } else { 17 };
                    area.draw(&Text::new(
                        label.clone(),
                        (px - bx + 3, py - by - row),
                        ("sans-serif", 13).into_font().color(&grey),
                    ))
                    .map_err(err)?;
                }
            }
            for line in &spec.lines {
                let style = ShapeStyle::from(line.color).stroke_width(line.width.max(1));
                let pts = clamp(decimate(&line.points, 6000));
                let anno = if line.dashed {
                    $chart
                        .draw_series(DashedLineSeries::new(pts, 9, 6, style))
                        .map_err(err)?
                } else {
                    $chart
                        .draw_series(LineSeries::new(pts, style))
                        .map_err(err)?
                };
                if let Some(label) = &line.label {
                    let dashed = line.dashed;
                    anno.label(label.as_str()).legend(move |(x, y)| {
                        if dashed {
                            PathElement::new(vec![(x, y), (x + 7, y)], style)
                        } else {
                            PathElement::new(vec![(x, y), (x + 20, y)], style)
                        }
                    });
                }
            }
            if let Some(note) = &note {
                // In the legend, whose background keeps it readable.
                let red = RGBColor(170, 0, 0);
                $chart
                    .draw_series(LineSeries::new(Vec::<(f64, f64)>::new(), red))
                    .map_err(err)?
                    .label(note.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x + 8, y - 6), (x + 8, y + 2)], red.stroke_width(2))
                    });
            }
            if spec.lines.iter().any(|l| l.label.is_some())
                || spec.shade.is_some()
                || note.is_some()
            {
                $chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::UpperRight)
                    .background_style(WHITE.mix(0.85))
                    .border_style(RGBColor(150, 150, 150))
                    .label_font(("sans-serif", 14))
                    .draw()
                    .map_err(err)?;
            }
        }};
    }
    if spec.log_y {
        let mut chart = builder
            .build_cartesian_2d(x0..x1, (y0..y1).log_scale())
            .map_err(err)?;
        body!(chart, |v: &f64| log_tick(*v));
    } else {
        let mut chart = builder.build_cartesian_2d(x0..x1, y0..y1).map_err(err)?;
        body!(chart, |v: &f64| tick(*v, y1));
    }
    Ok(())
}

/// Tick label of a log axis: as many decimals as the value's magnitude needs.
fn log_tick(v: f64) -> String {
    let d = if v > 0.0 && v < 1.0 {
        (-v.log10().floor()).clamp(0.0, 6.0) as usize
    } else {
        0
    };
    format!("{v:.d$}")
}

/// Draws panels side by side (`cols` per row) into `base.png` and `base.svg`; `size` is the
/// size of one panel in pixels. Returns the two paths.
pub fn render(
    panels: &[ChartSpec],
    cols: usize,
    base: &Path,
    size: (u32, u32),
) -> Result<Vec<PathBuf>, PlotError> {
    ensure_font(None)?;
    let cols = cols.clamp(1, panels.len().max(1));
    let rows = panels.len().div_ceil(cols).max(1);
    let total = (size.0 * cols as u32, size.1 * rows as u32);
    let png = base.with_extension("png");
    let svg = base.with_extension("svg");
    {
        let root = BitMapBackend::new(&png, total).into_drawing_area();
        draw_panels(&root, panels, rows, cols)?;
        root.present().map_err(err)?;
    }
    {
        let root = SVGBackend::new(&svg, total).into_drawing_area();
        draw_panels(&root, panels, rows, cols)?;
        root.present().map_err(err)?;
    }
    Ok(vec![png, svg])
}

fn draw_panels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    panels: &[ChartSpec],
    rows: usize,
    cols: usize,
) -> Result<(), PlotError> {
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((rows, cols));
    for (area, spec) in areas.iter().zip(panels) {
        draw_chart(area, spec)?;
    }
    Ok(())
}

/// Unit for a rate axis: `(divisor, "Mb/s")`.
pub fn rate_unit(max_bps: f64) -> (f64, &'static str) {
    if max_bps >= 2e9 {
        (1e9, "Gb/s")
    } else if max_bps >= 2e6 {
        (1e6, "Mb/s")
    } else if max_bps >= 2e3 {
        (1e3, "kb/s")
    } else {
        (1.0, "b/s")
    }
}

/// `scenario: what (mode, variant, S=…)`: the full title every panel carries.
pub fn run_title(run: &RunData, what: &str) -> String {
    run_title_as(run, what, run.meta.variant.as_deref())
}

/// [`run_title`] with `label` (a comparison's run label) in place of the variant.
pub fn run_title_as(run: &RunData, what: &str, label: Option<&str>) -> String {
    let m = &run.meta;
    let variant = label.map(|v| format!(", {v}")).unwrap_or_default();
    let scale = if (m.time_scale - 1.0).abs() > f64::EPSILON {
        format!(", S={}", m.time_scale)
    } else {
        String::new()
    };
    format!("{}: {what} ({}{variant}{scale})", m.scenario, m.mode)
}

/// The style of every fair-share line: dark grey dashes, a colour no flow has.
pub const FAIR_SHARE_COLOR: RGBColor = RGBColor(40, 40, 40);

fn markers(run: &RunData) -> Vec<(f64, String)> {
    run.meta
        .markers
        .iter()
        .map(|m| (m.t_s, m.label.clone()))
        .collect()
}

/// The shaded steady window, when the run sets one.
fn steady_shade(run: &RunData) -> Option<(f64, f64)> {
    run.meta.steady_window.map(|_| run.meta.window())
}

/// The throughput lines in units of `div` bit/s: each flow's interval means as steps, then the
/// max-min fair shares dashed in [`FAIR_SHARE_COLOR`].
fn throughput_lines(run: &RunData, analysis: &Analysis, div: f64) -> Vec<Line> {
    let mut lines = Vec::new();
    for (i, f) in run.flows.iter().enumerate() {
        let mut pts = Vec::new();
        for (from, to, v) in f.intervals() {
            pts.push((from, v / div));
            pts.push((to, v / div));
        }
        lines.push(Line {
            label: Some(f.name.clone()),
            color: PALETTE[i % PALETTE.len()],
            points: pts,
            dashed: false,
            width: 2,
        });
    }
    let mut any_share = false;
    for i in 0..run.flows.len() {
        let mut share_pts: Vec<(f64, f64)> = Vec::new();
        let mut segs: Vec<Vec<(f64, f64)>> = Vec::new();
        for e in &analysis.epochs {
            match e.shares.get(i).copied().flatten() {
                Some(s) => {
                    share_pts.push((e.from, s / div));
                    share_pts.push((e.to, s / div));
                }
                None => {
                    if !share_pts.is_empty() {
                        segs.push(std::mem::take(&mut share_pts));
                    }
                }
            }
        }
        if !share_pts.is_empty() {
            segs.push(share_pts);
        }
        for seg in segs {
            // One legend entry for all of them.
            let label = (!any_share).then(|| "max-min fair share".to_string());
            any_share = true;
            lines.push(Line {
                label,
                color: FAIR_SHARE_COLOR,
                points: seg,
                dashed: true,
                width: 2,
            });
        }
    }
    lines
}

/// The top of a throughput axis in bit/s: [`ChartSpec::robust_y_top`] of the run's lines.
pub fn throughput_top_bps(run: &RunData, analysis: &Analysis) -> f64 {
    let spec = ChartSpec {
        lines: throughput_lines(run, analysis, 1.0),
        ..empty_spec(run)
    };
    spec.robust_y_top()
}

fn empty_spec(run: &RunData) -> ChartSpec {
    ChartSpec {
        title: String::new(),
        x_label: "time (s)".into(),
        y_label: String::new(),
        y_unit: String::new(),
        x_range: (0.0, run.meta.duration_s),
        y_max: None,
        log_y: false,
        lines: Vec::new(),
        vlines: markers(run),
        shade: steady_shade(run),
    }
}

/// Per-flow throughput with the fair shares dashed. `y_max_bps` fixes the axis top (for
/// comparisons); otherwise it comes from the data, robust to spikes.
pub fn throughput_chart(run: &RunData, analysis: &Analysis, y_max_bps: Option<f64>) -> ChartSpec {
    let top = y_max_bps.unwrap_or_else(|| throughput_top_bps(run, analysis));
    let (div, unit) = rate_unit(top / 1.3);
    ChartSpec {
        title: run_title(run, "per-flow throughput"),
        y_label: format!("throughput ({unit})"),
        y_unit: unit.into(),
        y_max: Some(top / div),
        lines: throughput_lines(run, analysis, div),
        ..empty_spec(run)
    }
}

/// [`throughput_chart`] on a logarithmic axis, nothing cut off: phases at very different rates
/// (10 Gb/s, then 1 Gb/s) are all readable.
pub fn throughput_log_chart(run: &RunData, analysis: &Analysis) -> ChartSpec {
    let mut c = throughput_chart(run, analysis, None);
    let peak = c.data_y_max();
    c.log_y = true;
    c.y_max = Some(peak.max(c.y_max.unwrap_or(1.0)) * 1.5);
    c.title = run_title(run, "per-flow throughput, log scale");
    c
}

/// Names of the queues to plot: the bottlenecks' queues, else up to 8 busiest queues.
pub fn plotted_queues(run: &RunData) -> Vec<String> {
    let mut names: Vec<String> = run
        .bottlenecks
        .iter()
        .filter_map(|b| b.queue.clone())
        .filter(|n| run.queue(n).is_some())
        .collect();
    names.dedup();
    if names.is_empty() {
        let mut qs: Vec<(u64, &str)> = run
            .queues
            .iter()
            .map(|q| {
                (
                    q.samples.iter().map(|s| s.1).max().unwrap_or(0),
                    q.name.as_str(),
                )
            })
            .filter(|q| q.0 > 0)
            .collect();
        qs.sort_by_key(|q| std::cmp::Reverse(q.0));
        names = qs.iter().take(8).map(|q| q.1.to_string()).collect();
    }
    names
}

/// Queue occupancy (sample and hold) with Qeq and Qhigh. `y_max_bytes` fixes the axis top;
/// otherwise it comes from the data, robust to spikes.
pub fn queue_chart(run: &RunData, y_max_bytes: Option<f64>) -> ChartSpec {
    let end = run.meta.duration_s;
    let mut lines = Vec::new();
    for (i, name) in plotted_queues(run).iter().enumerate() {
        let Some(q) = run.queue(name) else { continue };
        let mut pts = vec![(0.0, 0.0)];
        let mut prev = 0.0;
        for &(t, b) in &q.samples {
            let v = b as f64 / 1000.0;
            pts.push((t, prev));
            pts.push((t, v));
            prev = v;
        }
        pts.push((end.max(pts.last().map_or(0.0, |p| p.0)), prev));
        let width = if pts.len() > 2000 { 1 } else { 2 };
        let label = run
            .bottlenecks
            .iter()
            .find(|b| b.queue.as_deref() == Some(name))
            .map_or(name.clone(), |b| format!("{} ({name})", b.name));
        lines.push(Line {
            label: Some(label),
            color: PALETTE[i % PALETTE.len()],
            points: pts,
            dashed: false,
            width,
        });
    }
    for (v, steps, label, color) in [
        (
            run.meta.q_eq_bytes,
            &run.meta.q_eq_steps[..],
            "Qeq",
            RGBColor(0, 150, 0),
        ),
        (run.meta.q_high_bytes, &[][..], "Qhigh", RGBColor(200, 0, 0)),
    ] {
        if let Some(v) = v {
            let kb = v as f64 / 1000.0;
            // A step line when parameter events move the threshold.
            let mut points = vec![(0.0, kb)];
            let mut last = kb;
            for &(t, b) in steps.iter().filter(|s| s.0 < end) {
                let nb = b as f64 / 1000.0;
                points.push((t, last));
                points.push((t, nb));
                last = nb;
            }
            points.push((end, last));
            let text = if steps.is_empty() {
                format!("{label} = {kb:.1} kB")
            } else {
                format!("{label} (set by events)")
            };
            lines.push(Line {
                label: Some(text),
                color,
                points,
                dashed: true,
                width: 2,
            });
        }
    }
    ChartSpec {
        title: run_title(run, "queue length"),
        y_label: "queue (kB, 1 kB = 1000 octets)".into(),
        y_unit: "kB".into(),
        x_range: (0.0, end),
        y_max: y_max_bytes.map(|m| m / 1000.0),
        lines,
        ..empty_spec(run)
    }
}

/// Bin width for CNM rates, sized to the run: about one bin per 5 CNMs of the busiest flow,
/// between 40 and 200 bins over the run, rounded down to 1, 2 or 5 × 10^k seconds. Fewer bins
/// would hide the reaction to a step (a 23 s run in 10 bins has 2.3 s bins); more would leave
/// most bins with 0 or 1 CNM.
pub fn cnm_bin(run: &RunData, analysis: &Analysis) -> f64 {
    let d = run.meta.duration_s;
    if d <= 0.0 || !d.is_finite() {
        return 1.0;
    }
    let busiest = analysis
        .cnms
        .per_flow
        .iter()
        .chain(&analysis.cnms.rate_feedback)
        .map(|c| c.iter().map(|x| x.1).sum::<u64>())
        .max()
        .unwrap_or(0);
    let bins = (busiest / 5).clamp(40, 200);
    nice_floor(d / bins as f64)
}

/// The largest 1, 2 or 5 × 10^k not above `v` (`v` > 0).
pub fn nice_floor(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    let m = v / p;
    let n = if m >= 5.0 {
        5.0
    } else if m >= 2.0 {
        2.0
    } else {
        1.0
    };
    n * p
}

fn fmt_bin(bin: f64) -> String {
    let d = if bin >= 1.0 {
        0
    } else {
        (-bin.log10().floor()).clamp(0.0, 9.0) as usize
    };
    format!("{bin:.d$}")
}

/// Feedback per second per flow: CNMs received and, in explicit-rate runs, rate-feedback
/// messages sent to the flow's source (labelled "rate fb"; dashed when the run has CNMs too).
/// `y_max` fixes the axis top.
pub fn cnm_chart(run: &RunData, analysis: &Analysis, y_max: Option<f64>) -> ChartSpec {
    let bin = cnm_bin(run, analysis);
    let empty = Vec::new();
    let steps = |counts: &[(f64, u64)]| {
        let mut pts = Vec::new();
        for (t, v) in cnm_rate_series(counts, bin, run.meta.duration_s) {
            pts.push((t - bin / 2.0, v));
            pts.push((t + bin / 2.0, v));
        }
        pts
    };
    let has_cnm = analysis.cnms.per_flow.iter().any(|c| !c.is_empty());
    let has_rf = analysis.cnms.rate_feedback.iter().any(|c| !c.is_empty());
    let mut lines = Vec::new();
    for (i, f) in run.flows.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        if has_cnm || !has_rf {
            lines.push(Line {
                label: Some(f.name.clone()),
                color,
                points: steps(analysis.cnms.per_flow.get(i).unwrap_or(&empty)),
                dashed: false,
                width: 2,
            });
        }
        if has_rf {
            lines.push(Line {
                label: Some(format!("{} rate fb", f.name)),
                color,
                points: steps(analysis.cnms.rate_feedback.get(i).unwrap_or(&empty)),
                dashed: has_cnm,
                width: 2,
            });
        }
    }
    let (what, unit) = match (has_cnm, has_rf) {
        (_, false) => ("CNMs received per flow", "CNMs"),
        (false, true) => (
            "Explicit-rate feedback per flow (messages sent to its source)",
            "messages",
        ),
        (true, true) => (
            "Feedback per flow: CNMs received, rate feedback sent (dashed)",
            "messages",
        ),
    };
    ChartSpec {
        title: run_title(run, what),
        y_label: format!("{unit} per second ({} s bins)", fmt_bin(bin)),
        y_unit: format!("{unit}/s"),
        y_max,
        lines,
        ..empty_spec(run)
    }
}

/// Writes `throughput`, `throughput-log`, `queues` and `cnms` charts (PNG + SVG) into `dir`.
pub fn plot_run(dir: &Path, run: &RunData, analysis: &Analysis) -> Result<Vec<PathBuf>, PlotError> {
    let size = (1000, 560);
    let mut out = render(
        &[throughput_chart(run, analysis, None)],
        1,
        &dir.join("throughput"),
        size,
    )?;
    out.extend(render(
        &[throughput_log_chart(run, analysis)],
        1,
        &dir.join("throughput-log"),
        size,
    )?);
    out.extend(render(
        &[queue_chart(run, None)],
        1,
        &dir.join("queues"),
        size,
    )?);
    out.extend(render(
        &[cnm_chart(run, analysis, None)],
        1,
        &dir.join("cnms"),
        size,
    )?);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_font_is_a_clear_error() {
        let e = find_font(&[PathBuf::from("/nonexistent/font.ttf")]).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("fonts-dejavu-core") && msg.contains("/nonexistent/font.ttf"),
            "{msg}"
        );
    }

    #[test]
    fn non_font_file_is_skipped() {
        let p = std::env::temp_dir().join(format!("not-a-font-{}.ttf", std::process::id()));
        std::fs::write(&p, b"hello").unwrap();
        assert!(matches!(
            find_font(std::slice::from_ref(&p)),
            Err(PlotError::NoFont(_))
        ));
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn tick_decimals_follow_the_span() {
        assert_eq!(tick(0.05, 0.1), "0.05");
        assert_eq!(tick(2.0, 6.0), "2.0");
        assert_eq!(tick(4000.0, 4200.0), "4000");
    }

    fn line(points: Vec<(f64, f64)>, dashed: bool) -> Line {
        Line {
            label: None,
            color: PALETTE[0],
            points,
            dashed,
            width: 1,
        }
    }

    fn spec(lines: Vec<Line>) -> ChartSpec {
        ChartSpec {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            y_unit: "kB".into(),
            x_range: (0.0, 10.0),
            y_max: None,
            log_y: false,
            lines,
            vlines: Vec::new(),
            shade: None,
        }
    }

    #[test]
    fn quantile_is_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        v.reverse();
        assert_eq!(quantile(&mut v, 0.95), Some(95.0));
        assert_eq!(quantile(&mut v, 0.0), Some(1.0));
        assert_eq!(quantile(&mut v, 1.0), Some(100.0));
        assert_eq!(quantile(&mut [], 0.5), None);
    }

    /// A 25-40 kB signal with a start-up burst to 190 kB: the axis follows the signal and the
    /// peak is noted.
    #[test]
    fn y_axis_ignores_a_start_up_spike_and_notes_it() {
        let mut pts: Vec<(f64, f64)> = (0..1000)
            .map(|i| (f64::from(i) / 100.0, 25.0 + f64::from(i % 16)))
            .collect();
        pts[3] = (0.03, 190.0);
        pts[4] = (0.04, 150.0);
        let c = spec(vec![
            line(pts, false),
            line(vec![(0.0, 33.0), (10.0, 33.0)], true),
        ]);
        // 25..=40 kB, each value about 62 times: the 95th percentile is 40, the top 1.3 × 40.
        let top = c.robust_y_top();
        assert!((top - 52.0).abs() < 1e-9, "{top}");
        assert_eq!(
            c.peak_note().as_deref(),
            Some("peak 190.0 kB at 0.03 s (off the axis)")
        );
        // Without a spike nothing is cut off: 1.15 × the peak.
        let flat = spec(vec![line(vec![(0.0, 10.0), (1.0, 20.0)], false)]);
        assert!((flat.robust_y_top() - 23.0).abs() < 1e-9);
        assert_eq!(flat.peak_note(), None);
        // A reference line above the data stays visible.
        let c = spec(vec![
            line(vec![(0.0, 1.0), (1.0, 2.0)], false),
            line(vec![(0.0, 50.0), (1.0, 50.0)], true),
        ]);
        assert!((c.robust_y_top() - 57.5).abs() < 1e-9);
        // Empty charts still get an axis.
        assert_eq!(spec(Vec::new()).robust_y_top(), 1.0);
    }

    #[test]
    fn log_axis_bottom_stays_below_the_data() {
        let c = ChartSpec {
            log_y: true,
            ..spec(vec![line(
                vec![(0.0, 0.0), (1.0, 2.0), (2.0, 2000.0)],
                false,
            )])
        };
        let top = c.y_top();
        let bottom = c.y_log_bottom(top);
        assert!(bottom > 0.0 && bottom <= 1.0, "{bottom}");
    }

    #[test]
    fn nice_bins() {
        assert_eq!(nice_floor(0.25), 0.2);
        assert_eq!(nice_floor(0.575), 0.5);
        assert_eq!(nice_floor(1.9), 1.0);
        assert_eq!(nice_floor(0.0), 1.0);
        assert!((nice_floor(0.0031) - 0.002).abs() < 1e-12);
        assert_eq!(fmt_bin(0.2), "0.2");
        assert_eq!(fmt_bin(0.005), "0.005");
        assert_eq!(fmt_bin(2.0), "2");
    }

    #[test]
    fn fair_share_colour_is_no_flow_colour() {
        assert!(!PALETTE.contains(&FAIR_SHARE_COLOR));
    }

    #[test]
    fn decimate_keeps_extremes() {
        let pts: Vec<(f64, f64)> = (0..10_000)
            .map(|i| (i as f64, if i == 5000 { 99.0 } else { 1.0 }))
            .collect();
        let d = decimate(&pts, 100);
        assert!(d.len() <= 102);
        assert!(d.iter().any(|p| p.1 == 99.0));
    }
}
