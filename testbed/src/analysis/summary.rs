//! `summary.json` (issue 6 item 4) and the analysis that fills it.
//!
//! Schema (the keys the issue fixes first, then additions):
//! `{"scenario","mode","variant"?,"duration_s","seed","time_scale","steady_window_s":[a,b],
//!   "flows":[{"name","mean_bps","fair_share_bps","cnm_rx","cnm_window","cnm_per_s","share_ratio",
//!     "weight","rate_feedback_rx"?,"rate_feedback_window"?,"rate_feedback_per_s"?}],
//!   "bottlenecks":[{"name","link","capacity_bps","utilization","queue_mean_bytes",
//!     "queue_std_bytes","queue_p99_bytes","queue_max_bytes","time_above_qhigh_s","drops",
//!     "pause_tx"}],
//!   "jain","jain_rates","convergence_s":[...],"convergence_events":[...],"faithful","warnings",
//!   "ingress_early_share"?, "trace_clock"?: {"clock","t0_ns","realtime_offset_ns"},
//!   "rp_recovery_s"?, "rp_recoveries_in_window"?, "cnm_fb_mean"?, "congestion_points"?:
//!     [{"cp","cnms","cnm_per_s","fb_mean","flows":{name: count}}], "twin"?: {"sim_dir"?,
//!     "sim_seeds", "metrics":[{"metric","netns","sim","sim_sd"?,"deviation","relative","limit",
//!     "ok"}], "faithful"}, "transient_only"?}` (`transient_only`: true when the only failed
//!     check was a steady window as short as the scenario's own, which the twin then decides).
//!
//! `ingress_early_share` (netns) is the share of frames that reached the switches faster than
//! their links could have delivered them; `twin` (netns `--twin`) compares the run with the
//! simulator on the same scenario and seed, and `faithful` includes its verdict
//! ([`super::fidelity`]).
//!
//! Means, fair shares, Jain, queue statistics, utilization, feedback counts and feedback rates
//! are taken over the steady-state window (`cnm_window` and `cnm_per_s` count the same CNMs);
//! `cnm_rx`, `rate_feedback_rx`, `drops` and `pause_tx` count the whole run and say so in the
//! tables. `convergence_s[k]` is measured from marker k (`null` = did not converge before the
//! next marker or the end).
//!
//! Feedback: CNMs are what QCN-family congestion points send (802.1Q clause 33.4), counted at
//! the flow's reaction point; an explicit-rate congestion point sends rate-feedback messages
//! instead (`cp_switch::cp::explicit_rate`), counted from the switches' `rate_feedback` trace
//! events addressed to the flow's source (messages sent: an upper bound of those received).
//! `rate_feedback_*` are left out of the JSON when the run has none.
//!
//! `trace_clock` (when known) says how to read the trace files' times and turn them into the
//! captures' times ([`super::model::TraceClock`]); `rp_recovery_s` and `rp_recoveries_in_window`
//! are the reaction points' longest fast recovery and how many the steady window holds: fewer
//! than [`super::fidelity::FidelityThresholds::rp_recoveries_min`] make the run unfaithful
//! ([`super::fidelity::rp_window_check`]).

use serde::{Deserialize, Serialize};

use super::fidelity::{self, FidelityThresholds, Twin};
use super::metrics::{self, ConvergenceOptions, Epoch};
use super::model::{RunData, TraceClock};

/// One flow in the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowSummary {
    /// Flow name.
    pub name: String,
    /// Mean throughput over the steady-state window (bit/s).
    pub mean_bps: Option<f64>,
    /// Max-min (or given) fair share over the window (bit/s).
    pub fair_share_bps: Option<f64>,
    /// CNMs received over the whole run.
    pub cnm_rx: u64,
    /// CNMs received in the steady-state window (the ones `cnm_per_s` counts).
    #[serde(default)]
    pub cnm_window: u64,
    /// CNMs received per second over the window.
    pub cnm_per_s: f64,
    /// Explicit-rate feedback messages sent to the flow's source over the whole run.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rate_feedback_rx: u64,
    /// Explicit-rate feedback messages in the steady-state window.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rate_feedback_window: u64,
    /// Explicit-rate feedback messages per second over the window.
    #[serde(default, skip_serializing_if = "is_zero_f")]
    pub rate_feedback_per_s: f64,
    /// `mean_bps / fair_share_bps`.
    pub share_ratio: Option<f64>,
    /// Weight (weighted max-min).
    pub weight: f64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_f(x: &f64) -> bool {
    *x == 0.0
}

/// One bottleneck in the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BottleneckSummary {
    /// Bottleneck name.
    pub name: String,
    /// Link it is.
    pub link: String,
    /// Mean capacity over the window (bit/s).
    pub capacity_bps: Option<f64>,
    /// Carried throughput over capacity, over the window.
    pub utilization: Option<f64>,
    /// Mean queue (octets), weighted by time.
    pub queue_mean_bytes: Option<f64>,
    /// Standard deviation of the queue (octets).
    pub queue_std_bytes: Option<f64>,
    /// 99th percentile of the queue (octets).
    pub queue_p99_bytes: Option<f64>,
    /// Largest queue sampled in the window (octets).
    pub queue_max_bytes: Option<u64>,
    /// Time above Qhigh in the window (seconds).
    pub time_above_qhigh_s: Option<f64>,
    /// Frames dropped over the run.
    pub drops: u64,
    /// PAUSE/PFC frames sent over the run.
    pub pause_tx: u64,
}

/// `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// `netns` or `sim`.
    pub mode: String,
    /// CP/RP variant, when the run belongs to a comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// Run length (seconds).
    pub duration_s: f64,
    /// Seed.
    pub seed: u64,
    /// Time scale S (QCN-REFERENCE §5).
    pub time_scale: f64,
    /// Steady-state window `[from, to]` (seconds).
    pub steady_window_s: [f64; 2],
    /// Flows.
    pub flows: Vec<FlowSummary>,
    /// Bottlenecks.
    pub bottlenecks: Vec<BottleneckSummary>,
    /// Jain's index of `mean_bps / fair_share_bps` over flows with a positive share.
    pub jain: Option<f64>,
    /// Jain's index of the raw mean rates.
    pub jain_rates: Option<f64>,
    /// Convergence time after each marker (seconds; `null` = not converged).
    pub convergence_s: Vec<Option<f64>>,
    /// Label and time of each marker, same order as `convergence_s`.
    pub convergence_events: Vec<String>,
    /// Whether the fidelity check passed.
    pub faithful: bool,
    /// Fidelity failures and analysis notes.
    pub warnings: Vec<String>,
    /// Share of frames that reached the switches faster than their links could have
    /// delivered them (netns; `null`: not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_early_share: Option<f64>,
    /// The clock of the run's traces and its offset to the captures' clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_clock: Option<TraceClock>,
    /// Longest fast recovery of the reaction points (run time, seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rp_recovery_s: Option<f64>,
    /// How many such recoveries the steady window holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rp_recoveries_in_window: Option<f64>,
    /// The mean quantized feedback of the CNMs sent in the steady window
    /// ([`metrics::cnm_feedback_mean`]), when the traces hold them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cnm_fb_mean: Option<f64>,
    /// The CNMs each congestion point sent in the steady window, to each flow
    /// ([`metrics::cnms_by_cp`]), when the switches' traces hold them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub congestion_points: Vec<metrics::CpCnms>,
    /// The comparison with the simulator on the same scenario and seed (`--twin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twin: Option<Twin>,
    /// The fidelity check failed on the steady window alone, a transient by the scenario's
    /// design ([`fidelity::Fidelity::transient_only`]): a twin decides instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transient_only: bool,
}

/// Analysis settings.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AnalysisOptions {
    /// Convergence tolerance.
    pub convergence: ConvergenceOptions,
    /// Fidelity limits.
    pub fidelity: FidelityThresholds,
}

/// Everything the report layer needs besides the run itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// The summary.
    pub summary: Summary,
    /// Fair shares over time (empty when they could not be computed).
    pub epochs: Vec<Epoch>,
    /// CNMs per flow (runner counts and attributed trace events).
    pub cnms: metrics::CnmAttribution,
}

/// Analyzes a run.
pub fn analyze(run: &RunData, opts: &AnalysisOptions) -> Analysis {
    let meta = &run.meta;
    let (a, b) = meta.window();
    let mut warnings = run.warnings.clone();
    let epochs = match metrics::fair_share_epochs(run) {
        Ok(e) => e,
        Err(e) => {
            warnings.push(format!("fair shares not computed: {e}"));
            Vec::new()
        }
    };
    let cnms = metrics::attribute_cnms(run);
    if cnms.unattributed > 0 {
        warnings.push(format!(
            "{} CNM trace events ({}-side) matched no single flow (set the flows' host/src_mac)",
            cnms.unattributed, cnms.side
        ));
    }
    if cnms.rate_feedback_unattributed > 0 {
        warnings.push(format!(
            "{} rate-feedback trace events matched no single flow (set the flows' src_mac)",
            cnms.rate_feedback_unattributed
        ));
    }
    let mut flows = Vec::new();
    for (i, f) in run.flows.iter().enumerate() {
        let cnm = &cnms.per_flow[i];
        let rf = &cnms.rate_feedback[i];
        let mean = metrics::mean_rate(f, a, b);
        let share = metrics::mean_share(&epochs, i, a, b);
        if mean.is_none() && f.is_active_at(0.5 * (a + b)) {
            warnings.push(format!(
                "flow {}: no throughput sample in the steady-state window",
                f.name
            ));
        }
        flows.push(FlowSummary {
            name: f.name.clone(),
            mean_bps: mean,
            fair_share_bps: share,
            cnm_rx: cnm.iter().map(|c| c.1).sum(),
            cnm_window: metrics::count_in(cnm, a, b),
            cnm_per_s: metrics::cnm_per_s(cnm, a, b),
            rate_feedback_rx: rf.iter().map(|c| c.1).sum(),
            rate_feedback_window: metrics::count_in(rf, a, b),
            rate_feedback_per_s: metrics::cnm_per_s(rf, a, b),
            share_ratio: match (mean, share) {
                (Some(m), Some(s)) if s > 0.0 => Some(m / s),
                _ => None,
            },
            weight: f.weight,
        });
    }
    let ratios: Vec<f64> = flows.iter().filter_map(|f| f.share_ratio).collect();
    let rates: Vec<f64> = flows.iter().filter_map(|f| f.mean_bps).collect();
    let mut bottlenecks = Vec::new();
    for bn in &run.bottlenecks {
        let q = bn.queue.as_deref().and_then(|n| run.queue(n));
        if let (Some(name), None) = (&bn.queue, q) {
            warnings.push(format!(
                "bottleneck {}: queue {name} has no samples",
                bn.name
            ));
        }
        let qs = q.map(|q| metrics::queue_stats(q, a, b, meta.q_high_bytes));
        let capacity = run.link(&bn.link).map(|l| {
            let steps = 1000;
            let dt = (b - a) / steps as f64;
            if dt > 0.0 {
                (0..steps)
                    .map(|k| l.capacity_at(a + (k as f64 + 0.5) * dt))
                    .sum::<f64>()
                    / steps as f64
            } else {
                l.capacity_at(a)
            }
        });
        if capacity.is_none() {
            warnings.push(format!("bottleneck {}: unknown link {}", bn.name, bn.link));
        }
        bottlenecks.push(BottleneckSummary {
            name: bn.name.clone(),
            link: bn.link.clone(),
            capacity_bps: capacity,
            utilization: metrics::utilization(run, bn, a, b),
            queue_mean_bytes: qs.map(|s| s.mean),
            queue_std_bytes: qs.map(|s| s.std),
            queue_p99_bytes: qs.map(|s| s.p99),
            queue_max_bytes: qs.map(|s| s.max),
            time_above_qhigh_s: qs
                .filter(|_| meta.q_high_bytes.is_some())
                .map(|s| s.time_above_s),
            drops: bn.drops.unwrap_or_else(|| {
                metrics::count_events(run, bn, "drop", f64::NEG_INFINITY, f64::INFINITY)
            }),
            pause_tx: bn.pause_tx.unwrap_or_else(|| {
                metrics::count_events(run, bn, "pause_tx", f64::NEG_INFINITY, f64::INFINITY)
            }),
        });
    }
    let mut markers = meta.markers.clone();
    markers.sort_by(|x, y| x.t_s.total_cmp(&y.t_s));
    let mut convergence_s = Vec::new();
    let mut convergence_events = Vec::new();
    for (k, m) in markers.iter().enumerate() {
        let horizon = markers.get(k + 1).map_or(meta.duration_s, |n| n.t_s);
        convergence_s.push(if epochs.is_empty() {
            None
        } else {
            metrics::convergence_time(run, &epochs, m.t_s, horizon, opts.convergence)
        });
        convergence_events.push(format!("{} @ {:.3} s", m.label, m.t_s));
    }
    let fid = fidelity::check(run, &opts.fidelity);
    warnings.extend(fid.warnings);
    let summary = Summary {
        scenario: meta.scenario.clone(),
        mode: meta.mode.clone(),
        variant: meta.variant.clone(),
        duration_s: meta.duration_s,
        seed: meta.seed,
        time_scale: meta.time_scale,
        steady_window_s: [a, b],
        flows,
        bottlenecks,
        jain: metrics::jain(&ratios),
        jain_rates: metrics::jain(&rates),
        convergence_s,
        convergence_events,
        faithful: fid.faithful,
        warnings,
        ingress_early_share: fid.ingress_early_share,
        trace_clock: meta.trace_clock,
        rp_recovery_s: meta.rp_recovery_s,
        rp_recoveries_in_window: fid.rp_recoveries_in_window,
        cnm_fb_mean: metrics::cnm_feedback_mean(run, a, b),
        congestion_points: metrics::cnms_by_cp(run, a, b),
        twin: None,
        transient_only: fid.transient_only,
    };
    Analysis {
        summary,
        epochs,
        cnms,
    }
}

impl Summary {
    /// Pretty JSON text.
    pub fn to_json(&self) -> String {
        // Serializing plain structs of numbers and strings cannot fail; non-finite floats
        // become null in serde_json.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Parses a summary written by [`Summary::to_json`].
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}
