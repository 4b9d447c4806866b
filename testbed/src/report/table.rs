//! Tables of a run's summary, for the terminal (the demo prints one at the end of a run) and
//! for `report.md`.
//!
//! A table whose rows both outputs show is built once, as a [`Table`] (header, alignment,
//! cells), and rendered by [`Table::plain`] (aligned columns) or [`Table::markdown`]: the flow
//! table ([`flow_table`]) and the twin comparison ([`twin_rows`]).

use std::fmt::Write as _;

use crate::analysis::fidelity::{fmt_bps, fmt_opt, Twin};
use crate::analysis::Summary;

/// The line under [`flow_table`].
pub const FLOW_TABLE_LEGEND: &str =
    "win: counted over the steady window (the same CNMs the rate counts); run: the whole run";

/// Cell text of a missing value.
pub const NONE: &str = "-";

/// A table: a header, which columns are right-aligned, rows of cells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    /// Column titles.
    pub header: Vec<String>,
    /// Per column: right-aligned (numbers) or left-aligned (names).
    pub right: Vec<bool>,
    /// Rows, as many cells as the header.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns (`true`: right-aligned) and no rows.
    pub fn new(columns: &[(&str, bool)]) -> Table {
        Table {
            header: columns.iter().map(|c| c.0.to_string()).collect(),
            right: columns.iter().map(|c| c.1).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Aligned columns, two spaces apart, each line starting with `indent`.
    pub fn plain(&self, indent: &str) -> String {
        let n = self.header.len();
        let mut w: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut o = String::new();
        let mut line = |cells: &[String]| {
            let mut l = String::from(indent);
            for (i, c) in cells.iter().enumerate().take(n) {
                if i > 0 {
                    l.push_str("  ");
                }
                // Width in characters (`±`, `–` are one column each).
                let width = w[i];
                let _ = if self.right[i] {
                    write!(l, "{c:>width$}")
                } else {
                    write!(l, "{c:<width$}")
                };
            }
            let _ = writeln!(o, "{}", l.trim_end());
        };
        line(&self.header);
        for r in &self.rows {
            line(r);
        }
        o
    }

    /// A Markdown table (pipes; numbers right-aligned).
    pub fn markdown(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "| {} |", self.header.join(" | "));
        let align: Vec<&str> = self
            .right
            .iter()
            .map(|r| if *r { "---:" } else { "---" })
            .collect();
        let _ = writeln!(o, "|{}|", align.join("|"));
        for r in &self.rows {
            let _ = writeln!(o, "| {} |", r.join(" | "));
        }
        o
    }
}

/// The flow table: mean rate, fair share, ratio, and the feedback each flow received — CNMs
/// (and explicit-rate feedback messages, `rate fb`, when the run has any) counted over the
/// steady window (`win`), per second over the same window, and over the whole run (`run`);
/// [`FLOW_TABLE_LEGEND`] says so under the table.
pub fn flow_table(s: &Summary) -> Table {
    let rf = s.flows.iter().any(|f| f.rate_feedback_rx > 0);
    let mut cols = vec![
        ("flow", false),
        ("weight", true),
        ("mean", true),
        ("fair share", true),
        ("ratio", true),
        ("CNMs win", true),
        ("CNMs/s win", true),
        ("CNMs run", true),
    ];
    if rf {
        cols.extend([
            ("rate fb win", true),
            ("rate fb/s win", true),
            ("rate fb run", true),
        ]);
    }
    let mut t = Table::new(&cols);
    for f in &s.flows {
        let mut r = vec![
            f.name.clone(),
            format!("{}", f.weight),
            opt_bps(f.mean_bps),
            opt_bps(f.fair_share_bps),
            opt_f(f.share_ratio, 3),
            f.cnm_window.to_string(),
            format!("{:.1}", f.cnm_per_s),
            f.cnm_rx.to_string(),
        ];
        if rf {
            r.extend([
                f.rate_feedback_window.to_string(),
                format!("{:.1}", f.rate_feedback_per_s),
                f.rate_feedback_rx.to_string(),
            ]);
        }
        t.row(r);
    }
    t
}

fn opt_bps(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), fmt_bps)
}

fn opt_kb(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |b| format!("{:.1} kB", b / 1000.0))
}

fn opt_f(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.digits$}"))
}

/// The table of one run: per-flow rates and shares, Jain, utilization, queue statistics,
/// drops, PAUSE frames, CNMs, convergence, fidelity.
pub fn summary_table(s: &Summary) -> String {
    let mut o = String::new();
    let variant = s
        .variant
        .as_deref()
        .map(|v| format!(", {v}"))
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "{} ({}{variant}, S={}, seed {}) — steady window {:.3}–{:.3} s of {:.3} s",
        s.scenario,
        s.mode,
        s.time_scale,
        s.seed,
        s.steady_window_s[0],
        s.steady_window_s[1],
        s.duration_s
    );
    o.push_str(&flow_table(s).plain(""));
    let _ = writeln!(o, "({FLOW_TABLE_LEGEND})");
    let _ = writeln!(
        o,
        "Jain index {} (of rate/share), {} (of raw rates)",
        opt_f(s.jain, 4),
        opt_f(s.jain_rates, 4)
    );
    if !s.bottlenecks.is_empty() {
        let _ = writeln!(
            o,
            "{:<12} {:>7} {:>11} {:>11} {:>11} {:>11} {:>8} {:>8}",
            "bottleneck", "util", "q mean", "q std", "q p99", "q max", "drops", "PAUSE"
        );
        for b in &s.bottlenecks {
            let _ = writeln!(
                o,
                "{:<12} {:>7} {:>11} {:>11} {:>11} {:>11} {:>8} {:>8}",
                b.name,
                b.utilization
                    .map_or_else(|| "-".into(), |u| format!("{:.1} %", u * 100.0)),
                opt_kb(b.queue_mean_bytes),
                opt_kb(b.queue_std_bytes),
                opt_kb(b.queue_p99_bytes),
                opt_kb(b.queue_max_bytes.map(|m| m as f64)),
                b.drops,
                b.pause_tx
            );
        }
    }
    for (c, e) in s.convergence_s.iter().zip(&s.convergence_events) {
        let _ = writeln!(
            o,
            "converged after {e}: {}",
            c.map_or_else(|| "no".to_string(), |c| format!("{c:.3} s"))
        );
    }
    if let Some(e) = s.ingress_early_share {
        let _ = writeln!(
            o,
            "ingress: {:.2} % of the frames reached the switches faster than their links allow",
            e * 100.0
        );
    }
    if let Some(line) = rp_loop_line(s) {
        let _ = writeln!(o, "{line}");
    }
    if let Some(t) = &s.twin {
        o.push_str(&twin_table(t));
    }
    let _ = writeln!(o, "faithful: {}", if s.faithful { "yes" } else { "NO" });
    for w in &s.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    o
}

/// `RP loop: the window holds N fast recoveries of at most R s`, when the run has
/// QCN-family reaction points ([`crate::analysis::fidelity::rp_window_check`]).
pub fn rp_loop_line(s: &Summary) -> Option<String> {
    let (r, n) = (s.rp_recovery_s?, s.rp_recoveries_in_window?);
    Some(format!(
        "RP loop: the steady window holds {n:.1} fast recoveries of at most {r:.3} s"
    ))
}

/// The twin comparison's rows: per metric the netns value, the simulator's, the deviation,
/// the limit and whether it is within (`NO` when not; `-` when not judged).
pub fn twin_rows(t: &Twin) -> Table {
    let mut tab = Table::new(&[
        ("metric", false),
        ("netns", true),
        ("simulator", true),
        ("deviation", true),
        ("limit", true),
        ("within", false),
    ]);
    for m in &t.metrics {
        let limit = m.limit.map_or_else(
            || NONE.to_string(),
            |l| {
                if m.relative {
                    format!("±{:.0} %", l * 100.0)
                } else {
                    format!("±{l:.2}")
                }
            },
        );
        let sim = match m.sim_sd {
            Some(sd) => format!("{} ± {sd:.3} sd", fmt_opt(m.sim)),
            None => fmt_opt(m.sim),
        };
        tab.row(vec![
            m.metric.clone(),
            fmt_opt(m.netns),
            sim,
            m.fmt_deviation(),
            limit,
            match (m.ok, m.limit) {
                (_, None) => NONE,
                (true, _) => "yes",
                (false, _) => "NO",
            }
            .to_string(),
        ]);
    }
    tab
}

/// The twin comparison for the terminal ([`twin_rows`] under a title line).
pub fn twin_table(t: &Twin) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "twin (simulator, same scenario and seed{}){}:",
        if t.sim_seeds > 1 {
            format!("; shares: mean and sd over {} seeds from it", t.sim_seeds)
        } else {
            String::new()
        },
        t.sim_dir
            .as_deref()
            .map(|d| format!(" {d}"))
            .unwrap_or_default()
    );
    o.push_str(&twin_rows(t).plain("  "));
    o
}

/// One line per run: the comparison table printed by `testbed compare`. `feedback` counts the
/// CNMs and explicit-rate feedback messages of every flow in the steady window.
pub fn compare_table(runs: &[(String, Summary)]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<14} {:>7} {:>7} {:>11} {:>11} {:>8} {:>8} {:>9} {:>12} {:>9}",
        "run",
        "Jain",
        "util",
        "q mean",
        "q p99",
        "drops",
        "PAUSE",
        "feedback",
        "converge",
        "faithful"
    );
    for (label, s) in runs {
        let b = s.bottlenecks.first();
        let conv = s
            .convergence_s
            .iter()
            .copied()
            .flatten()
            .fold(None::<f64>, |m, c| Some(m.map_or(c, |m| m.max(c))));
        let all_conv = s.convergence_s.iter().all(Option::is_some);
        let _ = writeln!(
            o,
            "{:<14} {:>7} {:>7} {:>11} {:>11} {:>8} {:>8} {:>9} {:>12} {:>9}",
            label,
            opt_f(s.jain, 3),
            b.and_then(|b| b.utilization)
                .map_or_else(|| "-".into(), |u| format!("{:.1}%", u * 100.0)),
            opt_kb(b.and_then(|b| b.queue_mean_bytes)),
            opt_kb(b.and_then(|b| b.queue_p99_bytes)),
            s.bottlenecks.iter().map(|b| b.drops).sum::<u64>(),
            s.bottlenecks.iter().map(|b| b.pause_tx).sum::<u64>(),
            s.flows
                .iter()
                .map(|f| f.cnm_window + f.rate_feedback_window)
                .sum::<u64>(),
            match (s.convergence_s.is_empty(), all_conv, conv) {
                (true, _, _) => "-".to_string(),
                (false, true, Some(c)) => format!("{c:.3} s"),
                _ => "no".to_string(),
            },
            if s.faithful { "yes" } else { "NO" }
        );
    }
    // Per-flow mean rates side by side (rate / fair share in brackets).
    let mut names: Vec<&str> = Vec::new();
    for (_, s) in runs {
        for f in &s.flows {
            if !names.contains(&f.name.as_str()) {
                names.push(&f.name);
            }
        }
    }
    if !names.is_empty() {
        let _ = write!(o, "{:<14}", "flow mean");
        for (label, _) in runs {
            let _ = write!(o, " {label:>22}");
        }
        let _ = writeln!(o);
        for n in names {
            let _ = write!(o, "{n:<14}");
            for (_, s) in runs {
                let cell = s.flows.iter().find(|f| f.name == n).map_or_else(
                    || "-".to_string(),
                    |f| match f.share_ratio {
                        Some(r) => format!("{} ({r:.2})", opt_bps(f.mean_bps)),
                        None => opt_bps(f.mean_bps),
                    },
                );
                let _ = write!(o, " {cell:>22}");
            }
            let _ = writeln!(o);
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fidelity::TwinMetric;

    fn twin() -> Twin {
        let m = |metric: &str, n, s, dev, rel, limit, ok| TwinMetric {
            metric: metric.into(),
            netns: Some(n),
            sim: Some(s),
            sim_sd: None,
            deviation: Some(dev),
            relative: rel,
            limit,
            ok,
        };
        Twin {
            sim_dir: Some("twin-sim".into()),
            sim_seeds: 1,
            metrics: vec![
                m(
                    "utilization sw0-r0",
                    0.95,
                    0.984,
                    -0.034,
                    false,
                    Some(0.05),
                    true,
                ),
                m(
                    "queue mean sw0-r0",
                    40_000.0,
                    29_700.0,
                    0.35,
                    true,
                    Some(0.30),
                    false,
                ),
                m("CNMs/s f0", 120.0, 100.0, 0.2, true, None, true),
            ],
            faithful: false,
            note: None,
        }
    }

    #[test]
    fn one_twin_table_two_renderings() {
        let rows = twin_rows(&twin());
        assert_eq!(rows.rows.len(), 3);
        // The same cells in both: limits, verdicts.
        assert_eq!(rows.rows[0][4], "±0.05");
        assert_eq!(rows.rows[1][4], "±30 %");
        assert_eq!(rows.rows[1][5], "NO");
        assert_eq!(rows.rows[2][4], NONE);
        assert_eq!(rows.rows[2][5], NONE);
        let md = crate::report::twin_markdown(&twin());
        assert!(md.contains("| metric | netns | simulator | deviation | limit | within |"));
        assert!(md.contains("|---|---:|---:|---:|---:|---|"));
        assert!(md.contains("| queue mean sw0-r0 |"), "{md}");
        let plain = twin_table(&twin());
        assert!(plain.starts_with("twin (simulator, same scenario and seed) twin-sim:\n"));
        // Aligned: every line of the table has the header's width or less, right-aligned
        // numbers end in the same column.
        let lines: Vec<&str> = plain.lines().skip(1).collect();
        assert_eq!(lines.len(), 4);
        let col = lines[0].find("simulator").unwrap() + "simulator".len();
        for l in &lines[1..] {
            assert_eq!(&l[..2], "  ");
            assert_ne!(l.as_bytes()[col - 1], b' ', "{plain}");
        }
    }

    #[test]
    fn plain_and_markdown_layouts() {
        let mut t = Table::new(&[("name", false), ("n", true)]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["long".into(), "100".into()]);
        assert_eq!(t.plain(""), "name    n\na       1\nlong  100\n");
        assert_eq!(
            t.markdown(),
            "| name | n |\n|---|---:|\n| a | 1 |\n| long | 100 |\n"
        );
    }
}
