//! Fidelity check of a run (issue 6 item 6): can its numbers be trusted?
//!
//! A user-space dataplane on a small machine stops emulating the intended network when it runs
//! out of CPU: queues then build in kernel rings instead of the congestion points, generators
//! fall short of their intended rates, frames are lost outside the emulated buffers, and pacing
//! jitters. Each symptom is checked against a threshold; any breach makes the run unfaithful
//! and says why in a warning.
//!
//! | check | measure | default limit |
//! |---|---|---|
//! | CPU saturation | mean busy fraction of each sampled process or core | 0.90 |
//! | generator shortfall | `1 − offered/intended` per flow | 0.05 |
//! | unexpected drops | drops outside CP queues (rings, delay lines, control queues, generators) | 0 |
//! | pacing error | mean relative inter-frame gap error per generator | 0.10 |

use super::model::RunData;

/// Limits of the fidelity check.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FidelityThresholds {
    /// Largest acceptable mean busy fraction of a process or core.
    pub cpu_busy_max: f64,
    /// Largest acceptable relative generator shortfall.
    pub shortfall_max: f64,
    /// Largest acceptable number of unexpected drops.
    pub unexpected_drops_max: u64,
    /// Largest acceptable relative pacing error.
    pub pacing_error_max: f64,
}

impl Default for FidelityThresholds {
    fn default() -> Self {
        Self {
            cpu_busy_max: 0.90,
            shortfall_max: 0.05,
            unexpected_drops_max: 0,
            pacing_error_max: 0.10,
        }
    }
}

/// Verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fidelity {
    /// No check failed.
    pub faithful: bool,
    /// One line per failed check (and notes that do not fail the run).
    pub warnings: Vec<String>,
}

/// Drop reasons of the congestion points that are part of the emulated network (drop-tail of
/// a full input buffer or output queue, cp-switch `DropReason`); other reasons are unexpected.
pub const EXPECTED_DROP_REASONS: &[&str] = &["input_full", "output_full"];

/// Checks the run's fidelity inputs, its generators' offered rates and its drop events.
pub fn check(run: &RunData, th: &FidelityThresholds) -> Fidelity {
    let mut warnings = Vec::new();
    let mut faithful = true;
    // CPU saturation, per process or core.
    let mut names: Vec<&str> = run.fidelity.cpu.iter().map(|c| c.0.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let v: Vec<f64> = run
            .fidelity
            .cpu
            .iter()
            .filter(|c| c.0 == name)
            .map(|c| c.2)
            .filter(|x| x.is_finite())
            .collect();
        if v.is_empty() {
            continue;
        }
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        if mean > th.cpu_busy_max {
            faithful = false;
            warnings.push(format!(
                "CPU saturation: {name} busy {:.0} % on average (limit {:.0} %)",
                mean * 100.0,
                th.cpu_busy_max * 100.0
            ));
        }
    }
    // Generator shortfall.
    for f in &run.flows {
        if let (Some(want), Some(got)) = (f.intended_bps, f.offered_bps) {
            if want > 0.0 {
                let short = 1.0 - got / want;
                if short > th.shortfall_max {
                    faithful = false;
                    warnings.push(format!(
                        "generator shortfall: {} offered {} of the intended {} ({:.1} % short, limit {:.1} %)",
                        f.name,
                        fmt_bps(got),
                        fmt_bps(want),
                        short * 100.0,
                        th.shortfall_max * 100.0
                    ));
                }
            }
        }
    }
    // Unexpected drops: reported by the runner, and trace drop events with other reasons.
    let mut unexpected: Vec<(String, u64)> = run
        .fidelity
        .unexpected_drops
        .iter()
        .filter(|d| d.1 > 0)
        .cloned()
        .collect();
    let mut by_reason: std::collections::BTreeMap<String, u64> = Default::default();
    for e in run.events.iter().filter(|e| e.kind == "drop") {
        if let Some(r) = e.str_field("reason") {
            if !EXPECTED_DROP_REASONS.contains(&r) {
                *by_reason
                    .entry(format!("{} ({r})", e.node.as_deref().unwrap_or("switch")))
                    .or_default() += 1;
            }
        }
    }
    unexpected.extend(by_reason);
    let total: u64 = unexpected.iter().map(|d| d.1).sum();
    if total > th.unexpected_drops_max {
        faithful = false;
        let list: Vec<String> = unexpected
            .iter()
            .map(|(w, n)| format!("{w}: {n}"))
            .collect();
        warnings.push(format!(
            "unexpected drops outside the congestion points: {}",
            list.join(", ")
        ));
    }
    // Pacing error.
    for (name, err) in &run.fidelity.pacing_error {
        if *err > th.pacing_error_max {
            faithful = false;
            warnings.push(format!(
                "pacing error: {name} inter-frame gaps off by {:.1} % on average (limit {:.1} %)",
                err * 100.0,
                th.pacing_error_max * 100.0
            ));
        }
    }
    Fidelity { faithful, warnings }
}

/// A rate in the largest unit that keeps it ≥ 1: `9.87 Gb/s`, `512 Mb/s`.
pub fn fmt_bps(bps: f64) -> String {
    let a = bps.abs();
    if a >= 1e9 {
        format!("{:.3} Gb/s", bps / 1e9)
    } else if a >= 1e6 {
        format!("{:.2} Mb/s", bps / 1e6)
    } else if a >= 1e3 {
        format!("{:.1} kb/s", bps / 1e3)
    } else {
        format!("{bps:.0} b/s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::model::{FlowSeries, RunMeta};

    #[test]
    fn clean_run_is_faithful() {
        let run = RunData::new(RunMeta::new("s", "netns", 1.0, 1));
        let f = check(&run, &FidelityThresholds::default());
        assert!(f.faithful);
        assert!(f.warnings.is_empty());
    }

    #[test]
    fn each_check_fires() {
        let mut run = RunData::new(RunMeta::new("s", "netns", 1.0, 1));
        run.fidelity.cpu = vec![
            ("cp-switch".into(), 0.0, 0.99),
            ("cp-switch".into(), 1.0, 0.97),
        ];
        let mut f = FlowSeries::new("f1", &[]);
        f.intended_bps = Some(100e6);
        f.offered_bps = Some(80e6);
        run.add_flow(f);
        run.fidelity.unexpected_drops = vec![("h1 tx ring".into(), 3)];
        run.fidelity.pacing_error = vec![("f1".into(), 0.3)];
        let v = check(&run, &FidelityThresholds::default());
        assert!(!v.faithful);
        assert_eq!(v.warnings.len(), 4, "{:?}", v.warnings);
    }
}
