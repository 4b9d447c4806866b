//! Side-by-side comparison of several runs of one scenario (issue 6 item 5): e.g. standard QCN
//! against FQCN, or the same scenario in namespaces and in the simulator.
//!
//! Writes into one directory: `summary.json` (`{"scenario","runs":[{"label", ...summary}]}`),
//! `compare.md` with a table and the plots, `throughput.{png,svg}` (one panel per run, common
//! axes), `queues.{png,svg}` (bottleneck queues overlaid, one colour per run) and
//! `cnms.{png,svg}` (one panel per run, common axes).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::plot::{self, ChartSpec, Line, PALETTE};
use super::table::compare_table;
use super::ReportOptions;
use crate::analysis::{analyze, Analysis, RunData, Summary};

/// One run of a comparison in `compare/summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabeledSummary {
    /// Run label (its variant, else its mode).
    pub label: String,
    /// The run's summary.
    #[serde(flatten)]
    pub summary: Summary,
}

/// `compare/summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareSummary {
    /// Scenario name (of the first run).
    pub scenario: String,
    /// The runs, in the order given.
    pub runs: Vec<LabeledSummary>,
}

/// What [`write_compare`] produced.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareReport {
    /// The comparison summary.
    pub summary: CompareSummary,
    /// The terminal table.
    pub table: String,
    /// Files written.
    pub files: Vec<PathBuf>,
    /// Why the plots are missing, if they are.
    pub plot_error: Option<plot::PlotError>,
}

/// The label of a run: its variant, else its mode, made unique by the caller's order.
pub fn run_label(run: &RunData) -> String {
    run.meta
        .variant
        .clone()
        .unwrap_or_else(|| run.meta.mode.clone())
}

/// Compares `runs` (labels from [`run_label`]; repeated labels get `#2`, `#3`).
pub fn write_compare(
    dir: &Path,
    runs: &[RunData],
    opts: &ReportOptions,
) -> std::io::Result<CompareReport> {
    std::fs::create_dir_all(dir)?;
    let mut labels: Vec<String> = Vec::new();
    for r in runs {
        let base = run_label(r);
        let n = labels
            .iter()
            .filter(|l| **l == base || l.starts_with(&format!("{base}#")))
            .count();
        labels.push(if n == 0 {
            base
        } else {
            format!("{base}#{}", n + 1)
        });
    }
    let analyses: Vec<Analysis> = runs.iter().map(|r| analyze(r, &opts.analysis)).collect();
    let mut files = Vec::new();
    let mut plot_error = None;
    let mut plotted = false;
    if !opts.no_plots && !runs.is_empty() {
        match compare_plots(dir, runs, &analyses, &labels) {
            Ok(p) => {
                files.extend(p);
                plotted = true;
            }
            Err(e) => plot_error = Some(e),
        }
    }
    let summary = CompareSummary {
        scenario: runs
            .first()
            .map(|r| r.meta.scenario.clone())
            .unwrap_or_default(),
        runs: labels
            .iter()
            .zip(&analyses)
            .map(|(l, a)| LabeledSummary {
                label: l.clone(),
                summary: a.summary.clone(),
            })
            .collect(),
    };
    let pairs: Vec<(String, Summary)> = summary
        .runs
        .iter()
        .map(|r| (r.label.clone(), r.summary.clone()))
        .collect();
    let table = compare_table(&pairs);
    let json = serde_json::to_string_pretty(&summary).map_err(std::io::Error::other)?;
    let p = dir.join("summary.json");
    std::fs::write(&p, json)?;
    files.push(p);
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# {}: comparison of {} runs\n",
        summary.scenario,
        runs.len()
    );
    let _ = writeln!(md, "```\n{table}```\n");
    if let Some(e) = &plot_error {
        let _ = writeln!(md, "Plots not drawn: {e}\n");
    }
    if plotted {
        for (name, what) in [
            (
                "throughput",
                "Per-flow throughput per run (dashed: fair shares)",
            ),
            ("queues", "Bottleneck queue of each run, overlaid"),
            (
                "cnms",
                "Feedback per second per flow, per run (CNMs; explicit-rate feedback dashed)",
            ),
        ] {
            let _ = writeln!(md, "{what} ([SVG]({name}.svg)):\n\n![{what}]({name}.png)\n");
        }
    }
    for ls in &summary.runs {
        let _ = writeln!(md, "## {}\n", ls.label);
        md.push_str(&super::summary_markdown(&ls.summary));
        for w in &ls.summary.warnings {
            let _ = writeln!(md, "- warning: {w}");
        }
        md.push('\n');
    }
    let p = dir.join("compare.md");
    std::fs::write(&p, md)?;
    files.push(p);
    Ok(CompareReport {
        summary,
        table,
        files,
        plot_error,
    })
}

fn compare_plots(
    dir: &Path,
    runs: &[RunData],
    analyses: &[Analysis],
    labels: &[String],
) -> Result<Vec<PathBuf>, plot::PlotError> {
    let cols = runs.len().min(3);
    let size = (760, 480);
    // Common y axes so that panels compare at a glance, each robust to its run's spikes.
    let top_bps = runs
        .iter()
        .zip(analyses)
        .map(|(r, a)| plot::throughput_top_bps(r, a))
        .fold(0.0, f64::max);
    let panels: Vec<ChartSpec> = runs
        .iter()
        .zip(analyses)
        .zip(labels)
        .map(|((r, a), l)| {
            let mut c = plot::throughput_chart(r, a, Some(top_bps));
            c.title = plot::run_title_as(r, "per-flow throughput", Some(l));
            c
        })
        .collect();
    let mut out = plot::render(&panels, cols, &dir.join("throughput"), size)?;
    // Queues overlaid: each run's first plotted queue.
    let end = runs.iter().map(|r| r.meta.duration_s).fold(0.0, f64::max);
    let mut q = plot::queue_chart(&runs[0], None);
    q.title = format!(
        "{}: bottleneck queue ({})",
        runs[0].meta.scenario,
        labels.join(" vs ")
    );
    q.x_range = (0.0, end);
    q.lines.clear();
    for (k, (r, l)) in runs.iter().zip(labels).enumerate() {
        let single = plot::queue_chart(r, None);
        if let Some(first) = single.lines.into_iter().next().filter(|l| !l.dashed) {
            q.lines.push(Line {
                label: Some(l.clone()),
                color: PALETTE[k % PALETTE.len()],
                ..first
            });
        }
    }
    for (v, label, color) in [
        (
            runs[0].meta.q_eq_bytes,
            "Qeq",
            plotters::style::RGBColor(0, 150, 0),
        ),
        (
            runs[0].meta.q_high_bytes,
            "Qhigh",
            plotters::style::RGBColor(200, 0, 0),
        ),
    ] {
        if let Some(v) = v {
            let kb = v as f64 / 1000.0;
            q.lines.push(Line {
                label: Some(format!("{label} = {kb:.1} kB")),
                color,
                points: vec![(0.0, kb), (end, kb)],
                dashed: true,
                width: 2,
            });
        }
    }
    out.extend(plot::render(&[q], 1, &dir.join("queues"), (1000, 560))?);
    let top_cnm = runs
        .iter()
        .zip(analyses)
        .map(|(r, a)| plot::cnm_chart(r, a, None).robust_y_top())
        .fold(1.0, f64::max);
    let panels: Vec<ChartSpec> = runs
        .iter()
        .zip(analyses)
        .zip(labels)
        .map(|((r, a), l)| {
            let mut c = plot::cnm_chart(r, a, Some(top_cnm));
            let what = if a.cnms.rate_feedback.iter().any(|c| !c.is_empty()) {
                "Feedback per flow (CNMs; rate feedback dashed)"
            } else {
                "CNMs received per flow"
            };
            c.title = plot::run_title_as(r, what, Some(l));
            c
        })
        .collect();
    out.extend(plot::render(&panels, cols, &dir.join("cnms"), size)?);
    Ok(out)
}
