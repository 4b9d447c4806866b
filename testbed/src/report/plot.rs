//! Plots of a run, as PNG and SVG, drawn with `plotters`.
//!
//! Text needs a TrueType font. The PNG renderer is plotters' pure-Rust `ab_glyph` path, so no
//! fontconfig is needed at build time; at run time a font file is loaded from the usual system
//! locations (Debian/Ubuntu: `apt-get install fonts-dejavu-core`). Without one, plotting fails
//! with [`PlotError::NoFont`] naming the package to install; the rest of the report (summary,
//! CSV, `report.md`) is still written.
//!
//! Charts: per-flow throughput with the max-min fair shares dashed in the flow's colour; queue
//! occupancy with Qeq and Qhigh; CNMs received per second per flow. Scenario markers are thin
//! grey vertical lines.

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
    /// X range.
    pub x_range: (f64, f64),
    /// Y maximum (the minimum is 0); `None` = from the data, with room for the legend.
    pub y_max: Option<f64>,
    /// Lines.
    pub lines: Vec<Line>,
    /// Vertical markers (x positions).
    pub vlines: Vec<f64>,
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

    fn y_top(&self) -> f64 {
        let m = self.y_max.unwrap_or_else(|| self.data_y_max() * 1.3);
        if m > 0.0 {
            m
        } else {
            1.0
        }
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
    let mut chart = ChartBuilder::on(area)
        .caption(&spec.title, ("sans-serif", 20))
        .margin(12)
        .margin_right(28)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x0..x1, 0f64..y1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| tick(*v, x1 - x0))
        .y_label_formatter(&|v| tick(*v, y1))
        .x_desc(spec.x_label.as_str())
        .y_desc(spec.y_label.as_str())
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .light_line_style(RGBColor(238, 238, 238))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(err)?;
    for &x in &spec.vlines {
        chart
            .draw_series(LineSeries::new(
                vec![(x, 0.0), (x, y1)],
                ShapeStyle::from(RGBColor(160, 160, 160)).stroke_width(1),
            ))
            .map_err(err)?;
    }
    for line in &spec.lines {
        let style = ShapeStyle::from(line.color).stroke_width(line.width.max(1));
        let pts = decimate(&line.points, 6000);
        let anno = if line.dashed {
            chart
                .draw_series(DashedLineSeries::new(pts, 9, 6, style))
                .map_err(err)?
        } else {
            chart
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
    if spec.lines.iter().any(|l| l.label.is_some()) {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(150, 150, 150))
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(err)?;
    }
    Ok(())
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

fn run_title(run: &RunData, what: &str) -> String {
    let m = &run.meta;
    let variant = m
        .variant
        .as_deref()
        .map(|v| format!(", {v}"))
        .unwrap_or_default();
    let scale = if (m.time_scale - 1.0).abs() > f64::EPSILON {
        format!(", S={}", m.time_scale)
    } else {
        String::new()
    };
    format!("{}: {what} ({}{variant}{scale})", m.scenario, m.mode)
}

/// Per-flow throughput with fair shares dashed. `y_max_bps` fixes the axis (for comparisons).
pub fn throughput_chart(run: &RunData, analysis: &Analysis, y_max_bps: Option<f64>) -> ChartSpec {
    let mut max = y_max_bps.unwrap_or(0.0);
    if y_max_bps.is_none() {
        for f in &run.flows {
            max = f.samples.iter().map(|s| s.1).fold(max, f64::max);
        }
        for e in &analysis.epochs {
            max = e.shares.iter().flatten().copied().fold(max, f64::max);
        }
    }
    let (div, unit) = rate_unit(max);
    let mut lines = Vec::new();
    for (i, f) in run.flows.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        // Interval means drawn as steps.
        let mut pts = Vec::new();
        for (from, to, v) in f.intervals() {
            pts.push((from, v / div));
            pts.push((to, v / div));
        }
        lines.push(Line {
            label: Some(f.name.clone()),
            color,
            points: pts,
            dashed: false,
            width: 2,
        });
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
            lines.push(Line {
                label: None,
                color,
                points: seg,
                dashed: true,
                width: 2,
            });
        }
    }
    if !analysis.epochs.is_empty() {
        // One legend entry explains the dashes.
        lines.push(Line {
            label: Some("fair share (dashed)".into()),
            color: RGBColor(60, 60, 60),
            points: Vec::new(),
            dashed: true,
            width: 2,
        });
    }
    ChartSpec {
        title: run_title(run, "per-flow throughput"),
        x_label: "time (s)".into(),
        y_label: format!("throughput ({unit})"),
        x_range: (0.0, run.meta.duration_s),
        y_max: y_max_bps.map(|m| m * 1.3 / div),
        lines,
        vlines: run.meta.markers.iter().map(|m| m.t_s).collect(),
    }
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

/// Queue occupancy (sample and hold) with Qeq and Qhigh. `y_max_bytes` fixes the axis.
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
        x_label: "time (s)".into(),
        y_label: "queue (kB, 1 kB = 1000 octets)".into(),
        x_range: (0.0, end),
        y_max: y_max_bytes.map(|m| m * 1.3 / 1000.0),
        lines,
        vlines: run.meta.markers.iter().map(|m| m.t_s).collect(),
    }
}

/// Bin width for CNM rates: 100 bins over the run, fewer (down to 10) when the busiest flow
/// would average under 10 CNMs per bin, so that the rates are not mostly 0 or 1 per bin.
pub fn cnm_bin(run: &RunData, analysis: &Analysis) -> f64 {
    let d = run.meta.duration_s;
    if d <= 0.0 {
        return 1.0;
    }
    let busiest = analysis
        .cnms
        .per_flow
        .iter()
        .map(|c| c.iter().map(|x| x.1).sum::<u64>())
        .max()
        .unwrap_or(0);
    let bins = (busiest / 10).clamp(10, 100);
    d / bins as f64
}

/// CNMs received per second per flow.
pub fn cnm_chart(run: &RunData, analysis: &Analysis, y_max: Option<f64>) -> ChartSpec {
    let bin = cnm_bin(run, analysis);
    let lines = run
        .flows
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let empty = Vec::new();
            let cnm = analysis.cnms.per_flow.get(i).unwrap_or(&empty);
            let series = cnm_rate_series(cnm, bin, run.meta.duration_s);
            let mut pts = Vec::new();
            for (t, v) in series {
                pts.push((t - bin / 2.0, v));
                pts.push((t + bin / 2.0, v));
            }
            Line {
                label: Some(f.name.clone()),
                color: PALETTE[i % PALETTE.len()],
                points: pts,
                dashed: false,
                width: 2,
            }
        })
        .collect();
    ChartSpec {
        title: run_title(run, "CNMs received per flow"),
        x_label: "time (s)".into(),
        y_label: format!("CNMs per second ({:.3} s bins)", bin),
        x_range: (0.0, run.meta.duration_s),
        y_max: y_max.map(|m| m * 1.3),
        lines,
        vlines: run.meta.markers.iter().map(|m| m.t_s).collect(),
    }
}

/// Writes `throughput`, `queues` and `cnms` charts (PNG + SVG) into `dir`.
pub fn plot_run(dir: &Path, run: &RunData, analysis: &Analysis) -> Result<Vec<PathBuf>, PlotError> {
    let size = (1000, 560);
    let mut out = render(
        &[throughput_chart(run, analysis, None)],
        1,
        &dir.join("throughput"),
        size,
    )?;
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
