//! Short plain-text tables for the terminal (the demo prints one at the end of a run).

use std::fmt::Write as _;

use crate::analysis::fidelity::{fmt_bps, fmt_opt, Twin};
use crate::analysis::Summary;

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
    let _ = writeln!(
        o,
        "{:<12} {:>14} {:>14} {:>7} {:>9} {:>10}",
        "flow", "mean", "fair share", "ratio", "CNMs", "CNMs/s"
    );
    for f in &s.flows {
        let _ = writeln!(
            o,
            "{:<12} {:>14} {:>14} {:>7} {:>9} {:>10.1}",
            f.name,
            opt_bps(f.mean_bps),
            opt_bps(f.fair_share_bps),
            opt_f(f.share_ratio, 3),
            f.cnm_rx,
            f.cnm_per_s
        );
    }
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
    if let Some(t) = &s.twin {
        o.push_str(&twin_table(t));
    }
    let _ = writeln!(o, "faithful: {}", if s.faithful { "yes" } else { "NO" });
    for w in &s.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    o
}

/// The twin comparison: per metric the netns value, the simulator's, the deviation and the
/// limit.
pub fn twin_table(t: &Twin) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "twin (simulator, same scenario and seed){}:",
        t.sim_dir
            .as_deref()
            .map(|d| format!(" {d}"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        o,
        "  {:<22} {:>12} {:>12} {:>10} {:>8}  ok",
        "metric", "netns", "sim", "deviation", "limit"
    );
    for m in &t.metrics {
        let limit = m.limit.map_or_else(
            || "-".to_string(),
            |l| {
                if m.relative {
                    format!("±{:.0}%", l * 100.0)
                } else {
                    format!("±{l:.2}")
                }
            },
        );
        let _ = writeln!(
            o,
            "  {:<22} {:>12} {:>12} {:>10} {:>8}  {}",
            m.metric,
            fmt_opt(m.netns),
            fmt_opt(m.sim),
            m.fmt_deviation(),
            limit,
            match (m.ok, m.limit) {
                (true, Some(_)) => "yes",
                (true, None) => "",
                (false, _) => "NO",
            }
        );
    }
    o
}

/// One line per run: the comparison table printed by `testbed compare`.
pub fn compare_table(runs: &[(String, Summary)]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<14} {:>7} {:>7} {:>11} {:>11} {:>8} {:>8} {:>9} {:>12} {:>9}",
        "run", "Jain", "util", "q mean", "q p99", "drops", "PAUSE", "CNMs", "converge", "faithful"
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
            s.flows.iter().map(|f| f.cnm_rx).sum::<u64>(),
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
