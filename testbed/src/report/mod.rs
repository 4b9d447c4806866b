//! Results directory of a run and comparisons of runs (issue 6 items 4 and 5).
//!
//! [`write_run`] analyzes a [`RunData`] and writes into one directory:
//! `summary.json`, `flows.csv`, `queues.csv`, `cnms.csv` (`rate_feedback.csv` for
//! explicit-rate runs), `throughput.{png,svg}`,
//! `throughput-log.{png,svg}`, `queues.{png,svg}`, `cnms.{png,svg}` and `report.md` embedding
//! the plots and the summary
//! tables. [`compare::write_compare`] does the same for several runs of one scenario under
//! different modes or variants, side by side. [`table`] prints the terminal tables.

pub mod compare;
pub mod plot;
pub mod table;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::analysis::csv;
use crate::analysis::fidelity::fmt_bps;
use crate::analysis::model::{TraceClock, TraceClockKind};
use crate::analysis::{analyze, Analysis, AnalysisOptions, RunData, Summary};

/// Settings of [`write_run`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ReportOptions {
    /// Analysis settings.
    pub analysis: AnalysisOptions,
    /// Skip the plots (summary, CSV and report only).
    pub no_plots: bool,
}

/// What [`write_run`] produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    /// The summary as written to `summary.json` (plot failures appended to its warnings).
    pub summary: Summary,
    /// The analysis (fair-share epochs).
    pub analysis: Analysis,
    /// Every file written.
    pub files: Vec<PathBuf>,
    /// Why the plots are missing, if they are.
    pub plot_error: Option<plot::PlotError>,
}

impl RunReport {
    /// Path of `report.md`.
    pub fn report_md(&self) -> Option<&Path> {
        self.files
            .iter()
            .find(|p| p.file_name().is_some_and(|n| n == "report.md"))
            .map(PathBuf::as_path)
    }
}

fn write(dir: &Path, name: &str, text: &str, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let p = dir.join(name);
    std::fs::write(&p, text)?;
    files.push(p);
    Ok(())
}

/// Analyzes `run` and writes its results directory `dir` (created if missing).
pub fn write_run(dir: &Path, run: &RunData, opts: &ReportOptions) -> std::io::Result<RunReport> {
    write_run_with_twin(dir, run, opts, None)
}

/// The simulator twin of a netns run: its summary (same scenario and seed), those of the
/// further seeds it ran, and its results directory.
#[derive(Debug, Clone, Copy)]
pub struct TwinRef<'a> {
    /// The simulator on the run's seed.
    pub sim: &'a Summary,
    /// The simulator on the following seeds.
    pub others: &'a [Summary],
    /// Where the twin's results are.
    pub dir: Option<&'a str>,
    /// How the twin's schedule differs from the scenario as written (a compressed netns
    /// schedule), if it does.
    pub note: Option<&'a str>,
}

/// As [`write_run`], the summary compared with the simulator twin's
/// ([`crate::analysis::twin::twin`]).
pub fn write_run_with_twin(
    dir: &Path,
    run: &RunData,
    opts: &ReportOptions,
    twin: Option<TwinRef<'_>>,
) -> std::io::Result<RunReport> {
    std::fs::create_dir_all(dir)?;
    let mut analysis = analyze(run, &opts.analysis);
    if let Some(t) = twin {
        analysis.summary.add_twin(
            t.sim,
            t.others,
            &opts.analysis.fidelity.twin,
            t.dir.map(str::to_owned),
            t.note.map(str::to_owned),
        );
    }
    let mut files = Vec::new();
    let mut plot_error = None;
    let mut plots = Vec::new();
    if !opts.no_plots {
        match plot::plot_run(dir, run, &analysis) {
            Ok(p) => plots = p,
            Err(e) => {
                analysis
                    .summary
                    .warnings
                    .push(format!("plots not drawn: {e}"));
                plot_error = Some(e);
            }
        }
    }
    write(dir, "summary.json", &analysis.summary.to_json(), &mut files)?;
    write(
        dir,
        "flows.csv",
        &csv::flows_csv(run, &analysis.epochs),
        &mut files,
    )?;
    write(dir, "queues.csv", &csv::queues_csv(run), &mut files)?;
    write(
        dir,
        "cnms.csv",
        &csv::cnms_csv(run, &analysis.cnms.per_flow),
        &mut files,
    )?;
    if analysis.cnms.rate_feedback.iter().any(|v| !v.is_empty()) {
        write(
            dir,
            "rate_feedback.csv",
            &csv::cnms_csv(run, &analysis.cnms.rate_feedback),
            &mut files,
        )?;
    }
    files.extend(plots.iter().cloned());
    let md = report_markdown(&analysis.summary, !plots.is_empty());
    write(dir, "report.md", &md, &mut files)?;
    Ok(RunReport {
        summary: analysis.summary.clone(),
        analysis,
        files,
        plot_error,
    })
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "–".to_string(), f)
}

/// Markdown tables of one summary (flows, bottlenecks, convergence).
pub fn summary_markdown(s: &Summary) -> String {
    let mut o = String::new();
    o.push_str(&table::flow_table(s).markdown());
    let _ = writeln!(o, "\n{}.", table::FLOW_TABLE_LEGEND);
    let _ = writeln!(
        o,
        "\nJain's index: **{}** over rate / fair share ({} over raw rates).\n",
        opt(s.jain, |j| format!("{j:.4}")),
        opt(s.jain_rates, |j| format!("{j:.4}"))
    );
    if !s.bottlenecks.is_empty() {
        let _ = writeln!(o, "| bottleneck | capacity | utilization | queue mean | queue std | queue p99 | queue max | above Qhigh | drops | PAUSE sent |");
        let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        let kb = |b: f64| format!("{:.1} kB", b / 1000.0);
        for b in &s.bottlenecks {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                b.name,
                opt(b.capacity_bps, fmt_bps),
                opt(b.utilization, |u| format!("{:.1} %", u * 100.0)),
                opt(b.queue_mean_bytes, kb),
                opt(b.queue_std_bytes, kb),
                opt(b.queue_p99_bytes, kb),
                opt(b.queue_max_bytes.map(|m| m as f64), kb),
                opt(b.time_above_qhigh_s, |t| format!("{t:.3} s")),
                b.drops,
                b.pause_tx
            );
        }
        o.push('\n');
    }
    if s.congestion_points.len() > 1 {
        let _ = writeln!(
            o,
            "| congestion point | CNMs win | CNMs/s win | mean QntzFb | CNMs win per flow |"
        );
        let _ = writeln!(o, "|---|---:|---:|---:|---|");
        for c in &s.congestion_points {
            let per_flow: Vec<String> = c.flows.iter().map(|(f, n)| format!("{f} {n}")).collect();
            let _ = writeln!(
                o,
                "| {} | {} | {:.1} | {} | {} |",
                c.cp,
                c.cnms,
                c.cnm_per_s,
                opt(c.fb_mean, |f| format!("{f:.2}")),
                per_flow.join(", ")
            );
        }
        let _ = writeln!(
            o,
            "\ncongestion point: switch:port of the queue, the port named after the node at \
             its far end; CNMs as sent, in the steady window.\n"
        );
    }
    if !s.convergence_s.is_empty() {
        let _ = writeln!(o, "| event | convergence to ±10 % of the fair shares |");
        let _ = writeln!(o, "|---|---:|");
        for (c, e) in s.convergence_s.iter().zip(&s.convergence_events) {
            let _ = writeln!(
                o,
                "| {e} | {} |",
                c.map_or_else(|| "not converged".to_string(), |c| format!("{c:.3} s"))
            );
        }
        o.push('\n');
    }
    o
}

/// The twin comparison as a Markdown table.
pub fn twin_markdown(t: &crate::analysis::fidelity::Twin) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## Twin\n");
    let _ = writeln!(
        o,
        "The simulator on the same scenario and seed{}; rates and times in scenario time. \
         Within limits: **{}**.\n",
        t.sim_dir
            .as_deref()
            .map(|d| format!(" (`{d}`)"))
            .unwrap_or_default(),
        if t.faithful { "yes" } else { "no" }
    );
    o.push_str(&table::twin_rows(t).markdown());
    o.push('\n');
    o
}

/// `report.md` of one run.
pub fn report_markdown(s: &Summary, with_plots: bool) -> String {
    let mut o = String::new();
    let variant = s
        .variant
        .as_deref()
        .map(|v| format!(", {v}"))
        .unwrap_or_default();
    let _ = writeln!(o, "# {} ({}{variant})\n", s.scenario, s.mode);
    let _ = writeln!(
        o,
        "Duration {:.3} s, seed {}, time scale S = {} (rates divided by S, times multiplied by S), \
         steady-state window {:.3}–{:.3} s. Faithful: **{}**.\n",
        s.duration_s,
        s.seed,
        s.time_scale,
        s.steady_window_s[0],
        s.steady_window_s[1],
        if s.faithful { "yes" } else { "no" }
    );
    if !s.warnings.is_empty() {
        let _ = writeln!(o, "Warnings:\n");
        for w in &s.warnings {
            let _ = writeln!(o, "- {w}");
        }
        o.push('\n');
    }
    let _ = writeln!(o, "## Summary\n");
    o.push_str(&summary_markdown(s));
    if let Some(e) = s.ingress_early_share {
        let _ = writeln!(
            o,
            "Ingress: {:.2} % of the frames reached the switches faster than their links could \
             have delivered them (kernel receive times).\n",
            e * 100.0
        );
    }
    if let Some(line) = table::rp_loop_line(s) {
        let _ = writeln!(o, "{line}.\n");
    }
    if let Some(t) = &s.twin {
        o.push_str(&twin_markdown(t));
    }
    if let Some(c) = &s.trace_clock {
        o.push_str(&trace_clock_markdown(c));
    }
    if with_plots {
        let _ = writeln!(o, "## Plots\n");
        for (name, what) in [
            (
                "throughput",
                "Per-flow throughput; dashed: max-min fair shares; grey: scenario events; \
                 shaded: the steady window the summary averages over",
            ),
            (
                "throughput-log",
                "The same on a logarithmic axis (low-rate phases readable)",
            ),
            ("queues", "Queue length with Qeq and Qhigh"),
            (
                "cnms",
                "Feedback per second per flow: CNMs received; explicit-rate feedback messages \
                 sent to the flow's source (\"rate fb\", dashed beside CNMs)",
            ),
        ] {
            let _ = writeln!(o, "{what} ([SVG]({name}.svg)):\n\n![{what}]({name}.png)\n");
        }
    }
    let _ =
        writeln!(
        o,
        "## Files\n\n`summary.json`, `flows.csv` (t_s, flow, bps, fair_share_bps), `queues.csv` \
         (t_s, queue, bytes), `cnms.csv` (t_s, flow, count){}{}.",
        if s.flows.iter().any(|f| f.rate_feedback_rx > 0) {
            ", `rate_feedback.csv` (t_s, flow, count)"
        } else {
            ""
        },
        if with_plots { ", plots as PNG and SVG" } else { "" }
    );
    o
}

/// How to read the traces' times and turn them into the captures' ([`TraceClock`]).
pub fn trace_clock_markdown(c: &TraceClock) -> String {
    match c.clock {
        TraceClockKind::Monotonic => format!(
            "## Trace time\n\nTrace times (`t` in `queues` and config records, `at` in `event` \
             records) are `CLOCK_MONOTONIC` nanoseconds; the run's t = 0 is {} ns. The pcaps are \
             stamped with `CLOCK_REALTIME`: pcap time (ns since the epoch) = trace time + {} ns \
             (`trace_clock.realtime_offset_ns` in `summary.json`, read when the run started).\n\n",
            c.t0_ns, c.realtime_offset_ns
        ),
        TraceClockKind::Virtual => "## Trace time\n\nTrace times (`t` in `queues` and config \
             records, `at` in `event` records) are the simulator's virtual nanoseconds from the \
             run's start; its pcaps carry the same time from the epoch (pcap time = trace \
             time).\n\n"
            .to_string(),
    }
}
