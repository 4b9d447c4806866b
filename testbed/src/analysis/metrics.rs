//! Metrics of QCN-REFERENCE §6.
//!
//! - Jain's fairness index (Jain, Chiu & Hawe, DEC-TR-301, 1984):
//!   `J = (Σx_i)² / (n·Σx_i²)`, 1 when all `x_i` are equal, `1/n` when one flow takes all. For
//!   multi-bottleneck topologies `x_i = rate_i / maxmin_share_i`, so that J = 1 means "every flow
//!   at its max-min share" rather than "every flow at the same rate".
//! - Fair shares over time: the run is cut into epochs at every flow start/stop, capacity step
//!   and demand change, and weighted max-min ([`super::maxmin`]) is solved in each epoch.
//! - Convergence time after a marked event: the time until every active flow's throughput
//!   stays within ±`tolerance` (10 %) of its max-min share up to the next marker (or the end).
//! - Queue statistics: mean, standard deviation and p99 weighted by the time each sampled
//!   value held (sample and hold), time above Qhigh.
//! - Link utilization: carried throughput over capacity, both averaged over the window.
//! - CNM rate: CNMs received per second per flow.

use super::maxmin::{max_min, MmFlow};
use super::model::{normalize_mac, Bottleneck, Event, FlowSeries, QueueSeries, RunData};
use serde::{Deserialize, Serialize};

/// The mean quantized feedback (`qntz_fb`, 802.1Q 33.4.7: |Fb| quantized to 6 bits) of the
/// CNMs the congestion points sent in `[a, b]` (seconds of the run), over every congestion
/// point; `None` when none sent one there. It says how hard the loop was pushed: the rate
/// decrease a CNM asks for is `Gd · |Fb|` (32.13.2, Gd = 1/128), so with the same number of
/// CNMs a mean twice as large cuts twice as deep.
pub fn cnm_feedback_mean(run: &RunData, a: f64, b: f64) -> Option<f64> {
    let (mut sum, mut n) = (0u64, 0u64);
    for e in &run.events {
        if e.kind != "cnm" || e.t_s < a || e.t_s > b {
            continue;
        }
        // Switch-side records carry the feedback and the congestion point's id.
        if e.fields.get("cpid").is_none() {
            continue;
        }
        if let Some(fb) = e.fields.get("qntz_fb").and_then(|v| v.as_u64()) {
            sum += fb;
            n += 1;
        }
    }
    (n > 0).then(|| sum as f64 / n as f64)
}

/// Jain's index of `xs`; `None` for an empty vector or all zeros.
pub fn jain(xs: &[f64]) -> Option<f64> {
    let n = xs.len() as f64;
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    (!xs.is_empty() && s2 > 0.0).then(|| s * s / (n * s2))
}

/// Fair shares in force during `[from, to)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Epoch {
    /// Start (seconds).
    pub from: f64,
    /// End (seconds).
    pub to: f64,
    /// Share of each flow of [`RunData::flows`] (bit/s); `None` while the flow is inactive.
    pub shares: Vec<Option<f64>>,
}

/// The run's fair shares over time. Flows with a given [`FlowSeries::fair_share_bps`] keep it
/// while active; the others get weighted max-min shares over [`RunData::links`] (a flow whose
/// path names an unknown link gets an error message and no share).
pub fn fair_share_epochs(run: &RunData) -> Result<Vec<Epoch>, String> {
    let end = run.meta.duration_s.max(0.0);
    let mut cuts = vec![0.0, end];
    for l in &run.links {
        cuts.extend(l.changes.iter().map(|c| c.0));
    }
    for f in &run.flows {
        cuts.push(f.start_s);
        cuts.extend(f.stop_s);
        cuts.extend(f.demand_changes.iter().map(|c| c.0));
    }
    cuts.retain(|t| t.is_finite() && *t >= 0.0 && *t <= end);
    cuts.sort_by(f64::total_cmp);
    cuts.dedup_by(|a, b| (*a - *b).abs() < 1e-12);
    let mut link_index = std::collections::HashMap::new();
    for (i, l) in run.links.iter().enumerate() {
        link_index.insert(l.name.as_str(), i);
    }
    let mut epochs = Vec::new();
    for w in cuts.windows(2) {
        let (from, to) = (w[0], w[1]);
        let caps: Vec<f64> = run.links.iter().map(|l| l.capacity_at(from)).collect();
        let mut mm = Vec::new();
        let mut who = Vec::new();
        for (i, f) in run.flows.iter().enumerate() {
            if !f.is_active_at(from) || f.fair_share_bps.is_some() {
                continue;
            }
            let mut links = Vec::new();
            for name in &f.path {
                match link_index.get(name.as_str()) {
                    Some(&l) => links.push(l),
                    None => return Err(format!("flow {} crosses unknown link {name}", f.name)),
                }
            }
            mm.push(MmFlow {
                links,
                weight: f.weight,
                demand: f.demand_at(from),
            });
            who.push(i);
        }
        let rates = max_min(&caps, &mm).map_err(|e| {
            // Name the flow instead of its index among the active ones.
            match e {
                super::maxmin::MaxMinError::Unbounded(k)
                | super::maxmin::MaxMinError::BadWeight(k) => {
                    format!("flow {}: {e}", run.flows[who[k]].name)
                }
                super::maxmin::MaxMinError::NoSuchLink(k, _) => {
                    format!("flow {}: {e}", run.flows[who[k]].name)
                }
            }
        })?;
        let mut shares: Vec<Option<f64>> = run
            .flows
            .iter()
            .map(|f| {
                if f.is_active_at(from) {
                    f.fair_share_bps
                } else {
                    None
                }
            })
            .collect();
        for (k, &i) in who.iter().enumerate() {
            shares[i] = Some(rates[k]);
        }
        epochs.push(Epoch { from, to, shares });
    }
    Ok(epochs)
}

/// Share of flow `i` at `t` from `epochs`.
pub fn share_at(epochs: &[Epoch], i: usize, t: f64) -> Option<f64> {
    epochs
        .iter()
        .find(|e| t >= e.from && t < e.to)
        .or_else(|| epochs.last().filter(|e| t >= e.to))
        .and_then(|e| e.shares.get(i).copied().flatten())
}

/// Time-weighted mean share of flow `i` over `[a, b)`, counting only time where it is active.
pub fn mean_share(epochs: &[Epoch], i: usize, a: f64, b: f64) -> Option<f64> {
    let (mut num, mut den) = (0.0, 0.0);
    for e in epochs {
        let dt = e.to.min(b) - e.from.max(a);
        if dt > 0.0 {
            if let Some(s) = e.shares.get(i).copied().flatten() {
                num += s * dt;
                den += dt;
            }
        }
    }
    (den > 0.0).then(|| num / den)
}

/// Mean of interval samples `(from, to, value)` over `[a, b)`, over the covered time only.
fn interval_mean(iter: impl Iterator<Item = (f64, f64, f64)>, a: f64, b: f64) -> Option<f64> {
    let (mut num, mut den) = (0.0, 0.0);
    for (from, to, v) in iter {
        let dt = to.min(b) - from.max(a);
        if dt > 0.0 {
            num += v * dt;
            den += dt;
        }
    }
    (den > 0.0).then(|| num / den)
}

/// Mean throughput of a flow over `[a, b)` (bit/s), `None` when no sample covers the window.
pub fn mean_rate(flow: &FlowSeries, a: f64, b: f64) -> Option<f64> {
    interval_mean(flow.intervals(), a, b)
}

/// Mean of `(t, bps)` interval samples starting at `origin` over `[a, b)`.
pub fn mean_of_samples(origin: f64, samples: &[(f64, f64)], a: f64, b: f64) -> Option<f64> {
    let mut prev = origin;
    interval_mean(
        samples.iter().map(|&(t, v)| {
            let from = prev;
            prev = t;
            (from, t, v)
        }),
        a,
        b,
    )
}

/// Convergence settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConvergenceOptions {
    /// Allowed relative deviation from the share (QCN-REFERENCE §6: 0.1).
    pub tolerance: f64,
    /// Shares below this (bit/s) are skipped (a flow whose share is 0).
    pub min_share_bps: f64,
    /// Judge the mean over the last `smooth_s` seconds ending at each sample instead of the
    /// sample alone (0 = raw samples). Short sink intervals on a real network are noisy; a
    /// window of a few sampling intervals keeps noise from reading as "not converged".
    pub smooth_s: f64,
}

impl Default for ConvergenceOptions {
    fn default() -> Self {
        Self {
            tolerance: 0.1,
            min_share_bps: 1.0,
            smooth_s: 0.0,
        }
    }
}

/// Time from `t_event` until every flow active in `[t_event, horizon)` stays within tolerance of
/// its share until `horizon`. `None` when some flow never settles (its last sample before the
/// horizon is out of tolerance) or has no sample in the period.
pub fn convergence_time(
    run: &RunData,
    epochs: &[Epoch],
    t_event: f64,
    horizon: f64,
    opts: ConvergenceOptions,
) -> Option<f64> {
    let mut settle = t_event;
    let mut any = false;
    for (i, f) in run.flows.iter().enumerate() {
        let mut last_bad: Option<f64> = None;
        let mut seen_good_after_bad = false;
        let mut seen = false;
        let smooth = Smoother::new(f);
        for (from, to, raw) in f.intervals() {
            let v = if opts.smooth_s > 0.0 {
                smooth.mean(to - opts.smooth_s, to).unwrap_or(raw)
            } else {
                raw
            };
            if to <= t_event || from >= horizon {
                continue;
            }
            let mid = 0.5 * (from.max(t_event) + to.min(horizon));
            let Some(share) = share_at(epochs, i, mid) else {
                continue;
            };
            if share < opts.min_share_bps {
                continue;
            }
            seen = true;
            if (v - share).abs() > opts.tolerance * share {
                last_bad = Some(to.min(horizon));
                seen_good_after_bad = false;
            } else {
                seen_good_after_bad = true;
            }
        }
        let active = epochs.iter().any(|e| {
            e.to > t_event
                && e.from < horizon
                && e.shares
                    .get(i)
                    .copied()
                    .flatten()
                    .is_some_and(|s| s >= opts.min_share_bps)
        });
        if !active {
            continue;
        }
        if !seen {
            return None;
        }
        any = true;
        if let Some(t) = last_bad {
            if !seen_good_after_bad {
                return None;
            }
            settle = settle.max(t);
        }
    }
    any.then_some(settle - t_event)
}

/// Windowed means of a flow's throughput in O(log n) per query (prefix integrals).
struct Smoother {
    /// `(from, to, v)` intervals.
    iv: Vec<(f64, f64, f64)>,
    /// Integral of rate and covered time up to the end of each interval.
    acc: Vec<(f64, f64)>,
}

impl Smoother {
    fn new(f: &FlowSeries) -> Self {
        let iv: Vec<(f64, f64, f64)> = f.intervals().collect();
        let mut acc = Vec::with_capacity(iv.len());
        let (mut bits, mut time) = (0.0, 0.0);
        for &(a, b, v) in &iv {
            bits += v * (b - a);
            time += b - a;
            acc.push((bits, time));
        }
        Self { iv, acc }
    }

    /// Integral of rate and covered time over `(-inf, t]`.
    fn upto(&self, t: f64) -> (f64, f64) {
        // First interval ending after t.
        let j = self.iv.partition_point(|x| x.1 <= t);
        let (mut bits, mut time) = if j == 0 { (0.0, 0.0) } else { self.acc[j - 1] };
        if let Some(&(a, _, v)) = self.iv.get(j) {
            if t > a {
                bits += v * (t - a);
                time += t - a;
            }
        }
        (bits, time)
    }

    fn mean(&self, a: f64, b: f64) -> Option<f64> {
        let (b1, t1) = self.upto(b);
        let (b0, t0) = self.upto(a);
        let dt = t1 - t0;
        (dt > 0.0).then(|| (b1 - b0) / dt)
    }
}

/// How the CNM trace events of a run were attributed to flows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CnmAttribution {
    /// Per flow (same order as [`RunData::flows`]): `(t_s, count)`, the runner's own counts
    /// ([`FlowSeries::cnm`]) followed by the attributed trace events, in time order.
    pub per_flow: Vec<Vec<(f64, u64)>>,
    /// Events counted from the reaction-point side (received CNMs).
    pub rp_side: u64,
    /// Events counted from the congestion-point side (sent CNMs).
    pub cp_side: u64,
    /// CNM events that matched no single flow on the side used.
    pub unattributed: u64,
    /// `"rp"`, `"cp"` or `"none"`: the side used.
    pub side: &'static str,
    /// Per flow: explicit-rate feedback messages `(t_s, count)`, from the congestion points'
    /// `rate_feedback` trace events addressed to the flow's source (explicit-rate runs send
    /// these instead of CNMs).
    pub rate_feedback: Vec<Vec<(f64, u64)>>,
    /// `rate_feedback` events that matched no single flow.
    pub rate_feedback_unattributed: u64,
}

/// Attributes CNM trace events (`cnm`, `cnm_rx`) to flows, when [`RunData::cnm_from_trace`].
///
/// Reaction-point events (written by a host: the event's node is a flow's
/// [`FlowSeries::host`], or its string `"flow"` field is a flow's name) count CNMs received and
/// are preferred. Only when the run has none are congestion-point events used: those carry the
/// sampled frame's source address in `"dst"`, matched against [`FlowSeries::src_mac`] (a CNM
/// sent is not always received, so CP-side counts are an upper bound). Using one side only
/// keeps a CNM from being counted twice when both daemons trace it.
pub fn attribute_cnms(run: &RunData) -> CnmAttribution {
    let mut per_flow: Vec<Vec<(f64, u64)>> = run.flows.iter().map(|f| f.cnm.clone()).collect();
    let mut out = CnmAttribution {
        side: "none",
        ..Default::default()
    };
    if run.cnm_from_trace {
        let cnm_events = || {
            run.events
                .iter()
                .filter(|e| e.kind == "cnm" || e.kind == "cnm_rx")
        };
        let rp_match = |e: &Event| -> Option<usize> {
            if let Some(name) = &e.flow {
                if let Some(i) = run.flows.iter().position(|f| &f.name == name) {
                    return Some(i);
                }
            }
            let node = e.node.as_deref()?;
            let id = e.fields.get("flow").and_then(|v| v.as_u64());
            let mut it = run.flows.iter().enumerate().filter(|(_, f)| {
                f.host.as_deref() == Some(node)
                    && (f.rp_flow.is_none() || id.is_none() || f.rp_flow == id)
            });
            match (it.next(), it.next()) {
                (Some((i, _)), None) => Some(i),
                _ => None,
            }
        };
        let is_rp_side = |e: &Event| {
            e.flow.is_some()
                || e.node
                    .as_deref()
                    .is_some_and(|n| run.flows.iter().any(|f| f.host.as_deref() == Some(n)))
        };
        if cnm_events().any(&is_rp_side) {
            out.side = "rp";
            for e in cnm_events().filter(|e| is_rp_side(e)) {
                match rp_match(e) {
                    Some(i) => {
                        per_flow[i].push((e.t_s, 1));
                        out.rp_side += 1;
                    }
                    None => out.unattributed += 1,
                }
            }
        } else if cnm_events().any(|e| e.str_field("dst").is_some()) {
            out.side = "cp";
            for e in cnm_events().filter(|e| e.str_field("dst").is_some()) {
                match cp_match(run, e) {
                    Some(i) => {
                        per_flow[i].push((e.t_s, 1));
                        out.cp_side += 1;
                    }
                    None => out.unattributed += 1,
                }
            }
        }
    }
    for v in &mut per_flow {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out.per_flow = per_flow;
    // Explicit-rate feedback: only the congestion points trace every message they send (a
    // reaction point traces the ones that changed its rate), so the CP side is used, matched
    // on the destination like CP-side CNMs. Events are in time order (`RunData::absorb`).
    out.rate_feedback = vec![Vec::new(); run.flows.len()];
    for e in run
        .events
        .iter()
        .filter(|e| e.kind == "rate_feedback" && e.str_field("dst").is_some())
    {
        match cp_match(run, e) {
            Some(i) => out.rate_feedback[i].push((e.t_s, 1)),
            None => out.rate_feedback_unattributed += 1,
        }
    }
    out
}

/// The flow whose source address is the event's `"dst"`, when exactly one flow has it.
fn cp_match(run: &RunData, e: &Event) -> Option<usize> {
    let dst = normalize_mac(e.str_field("dst")?);
    let mut it = run
        .flows
        .iter()
        .enumerate()
        .filter(|(_, f)| f.src_mac.as_deref() == Some(dst.as_str()));
    match (it.next(), it.next()) {
        (Some((i, _)), None) => Some(i),
        _ => None,
    }
}

/// The CNMs one congestion point sent in a window, in all and to each flow.
///
/// Which congestion points cut which flows, and how hard, is where a multi-bottleneck run
/// shows how it differs from its model: on the parking lot, the same share of a one-hop flow
/// can come from the cuts of its own bottleneck or from an upstream switch's queue that the
/// model never filled. [`FlowSummary::cnm_per_s`](super::summary::FlowSummary) adds them up;
/// this keeps them apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpCnms {
    /// `switch:port`: the switch and the port of the congestion point's queue (the output
    /// port, or the input port of an input congestion point, 802.1Q 32.8), named after the
    /// node at its far end (`switch:N` when the run does not know the port's name).
    pub cp: String,
    /// CNMs sent in the window.
    pub cnms: u64,
    /// CNMs sent per second over the window.
    pub cnm_per_s: f64,
    /// Their mean quantized feedback (`qntz_fb`, 802.1Q 33.4.7), `None` with no CNM.
    pub fb_mean: Option<f64>,
    /// CNMs sent in the window to each flow's source, by flow name (flows with none left
    /// out; a CNM whose destination is no single flow's source is counted under `?`).
    pub flows: std::collections::BTreeMap<String, u64>,
}

/// The CNMs each congestion point sent in `[a, b)` (seconds of the run), from the switches'
/// `cnm` trace events (those carrying the congestion point's `cpid` and `cp_port`), in
/// `cp` order. A CNM is counted where it was sent whether or not it arrived.
pub fn cnms_by_cp(run: &RunData, a: f64, b: f64) -> Vec<CpCnms> {
    let mut by: std::collections::BTreeMap<String, (u64, u64, CpCnms)> = Default::default();
    for e in &run.events {
        if e.kind != "cnm" || e.t_s < a || e.t_s >= b || e.fields.get("cpid").is_none() {
            continue;
        }
        let Some(port) = e.fields.get("cp_port").and_then(|v| v.as_u64()) else {
            continue;
        };
        let node = e.node.as_deref().unwrap_or("?");
        let name = run
            .switch_ports
            .get(node)
            .and_then(|ports| ports.get(usize::try_from(port).ok()?));
        let cp = match name {
            Some(n) => format!("{node}:{n}"),
            None => format!("{node}:{port}"),
        };
        let (fb_sum, fb_n, row) = by.entry(cp.clone()).or_insert_with(|| {
            (
                0,
                0,
                CpCnms {
                    cp,
                    cnms: 0,
                    cnm_per_s: 0.0,
                    fb_mean: None,
                    flows: Default::default(),
                },
            )
        });
        row.cnms += 1;
        if let Some(fb) = e.fields.get("qntz_fb").and_then(|v| v.as_u64()) {
            *fb_sum += fb;
            *fb_n += 1;
        }
        let flow = cp_match(run, e)
            .and_then(|i| run.flows.get(i))
            .map_or("?", |f| f.name.as_str());
        *row.flows.entry(flow.to_string()).or_insert(0) += 1;
    }
    by.into_values()
        .map(|(fb_sum, fb_n, mut row)| {
            row.cnm_per_s = if b > a {
                row.cnms as f64 / (b - a)
            } else {
                0.0
            };
            row.fb_mean = (fb_n > 0).then(|| fb_sum as f64 / fb_n as f64);
            row
        })
        .collect()
}

/// Time-weighted queue statistics over a window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QueueStats {
    /// Mean occupancy (octets).
    pub mean: f64,
    /// Standard deviation (octets).
    pub std: f64,
    /// 99th percentile of occupancy weighted by time (octets).
    pub p99: f64,
    /// Largest sampled occupancy in the window (octets).
    pub max: u64,
    /// Time spent above the threshold (seconds).
    pub time_above_s: f64,
    /// Fraction of the window spent above the threshold.
    pub frac_above: f64,
}

/// Statistics of `q` over `[a, b)` with each sample holding until the next; `above` is the
/// threshold for [`QueueStats::time_above_s`] (Qhigh).
pub fn queue_stats(q: &QueueSeries, a: f64, b: f64, above: Option<u64>) -> QueueStats {
    let span = b - a;
    if span <= 0.0 {
        return QueueStats::default();
    }
    // (value, duration) pieces covering [a, b).
    let mut pieces: Vec<(u64, f64)> = Vec::new();
    let mut cur_t = a;
    let mut cur_v = q.value_at(a);
    for &(t, v) in q.samples.iter().filter(|s| s.0 > a && s.0 < b) {
        pieces.push((cur_v, t - cur_t));
        cur_t = t;
        cur_v = v;
    }
    pieces.push((cur_v, b - cur_t));
    let mean = pieces.iter().map(|&(v, d)| v as f64 * d).sum::<f64>() / span;
    let var = pieces
        .iter()
        .map(|&(v, d)| (v as f64 - mean).powi(2) * d)
        .sum::<f64>()
        / span;
    let time_above_s = above.map_or(0.0, |th| {
        // Folded from +0.0: an empty f64 sum is -0.0.
        pieces
            .iter()
            .filter(|p| p.0 > th)
            .fold(0.0, |acc, p| acc + p.1)
    });
    let max = pieces.iter().map(|p| p.0).max().unwrap_or(0);
    pieces.sort_by_key(|p| p.0);
    let target = 0.99 * span;
    let mut acc = 0.0;
    let mut p99 = max as f64;
    for &(v, d) in &pieces {
        acc += d;
        if acc >= target - 1e-12 * span {
            p99 = v as f64;
            break;
        }
    }
    QueueStats {
        mean,
        std: var.max(0.0).sqrt(),
        p99,
        max,
        time_above_s,
        frac_above: time_above_s / span,
    }
}

/// Mean throughput carried by bottleneck `b` over `[a, b)` (bit/s): its measured samples, or the
/// sum of the mean rates of the flows crossing its link.
pub fn carried_bps(run: &RunData, bn: &Bottleneck, a: f64, b: f64) -> Option<f64> {
    if !bn.tx_samples.is_empty() {
        return mean_of_samples(a.min(bn.tx_samples[0].0), &bn.tx_samples, a, b);
    }
    let mut sum = None;
    for f in run.flows.iter().filter(|f| f.path.contains(&bn.link)) {
        if let Some(r) = mean_rate(f, a, b) {
            *sum.get_or_insert(0.0) += r;
        }
    }
    sum
}

/// Utilization of bottleneck `bn` over `[a, b)`: carried throughput over mean capacity.
pub fn utilization(run: &RunData, bn: &Bottleneck, a: f64, b: f64) -> Option<f64> {
    let link = run.link(&bn.link)?;
    let steps = 1000;
    let dt = (b - a) / steps as f64;
    if dt <= 0.0 {
        return None;
    }
    let cap = (0..steps)
        .map(|k| link.capacity_at(a + (k as f64 + 0.5) * dt))
        .sum::<f64>()
        / steps as f64;
    let carried = carried_bps(run, bn, a, b)?;
    (cap > 0.0).then(|| carried / cap)
}

/// Events of `kind` attributed to bottleneck `bn` in `[a, b)`.
pub fn count_events(run: &RunData, bn: &Bottleneck, kind: &str, a: f64, b: f64) -> u64 {
    run.events
        .iter()
        .filter(|e| e.kind == kind && e.t_s >= a && e.t_s < b && bn.matches(e))
        .count() as u64
}

/// Sum of the counts of a `(t, count)` list over `[a, b)`.
pub fn count_in(counts: &[(f64, u64)], a: f64, b: f64) -> u64 {
    counts
        .iter()
        .filter(|c| c.0 >= a && c.0 < b)
        .map(|c| c.1)
        .sum()
}

/// CNMs (or any counted messages) per second over `[a, b)` of a `(t, count)` list: the
/// [`count_in`] of the same window over its length.
pub fn cnm_per_s(cnm: &[(f64, u64)], a: f64, b: f64) -> f64 {
    let n = count_in(cnm, a, b);
    if b > a {
        n as f64 / (b - a)
    } else {
        0.0
    }
}

/// CNMs per second of a `(t, count)` list in bins of `bin_s` over `[0, end)`:
/// `(bin middle, rate)`.
pub fn cnm_rate_series(cnm: &[(f64, u64)], bin_s: f64, end: f64) -> Vec<(f64, f64)> {
    if bin_s.is_nan() || end.is_nan() || bin_s <= 0.0 || end <= 0.0 {
        return Vec::new();
    }
    let bins = ((end / bin_s).ceil() as usize).clamp(1, 1_000_000);
    let mut counts = vec![0u64; bins];
    for &(t, n) in cnm {
        if t >= 0.0 && t < end {
            let k = ((t / bin_s) as usize).min(bins - 1);
            counts[k] += n;
        }
    }
    counts
        .iter()
        .enumerate()
        .map(|(k, &c)| ((k as f64 + 0.5) * bin_s, c as f64 / bin_s))
        .collect()
}

#[cfg(test)]
mod tests {
    /// The CNM feedback mean counts switch-side `cnm` records (with a `cpid`) inside the
    /// window only: 10, 20 and 33 within [1, 3] s give 21; the agent's record, the one at
    /// 0.5 s and the drop are not counted.
    #[test]
    fn cnm_feedback_mean_counts_the_switches_cnms_in_the_window() {
        let ev = |t: f64, kind: &str, fields: serde_json::Value| Event {
            t_s: t,
            node: Some("sw0".into()),
            kind: kind.into(),
            port: None,
            priority: None,
            flow: None,
            fields,
        };
        let mut run = RunData::new(super::super::model::RunMeta::new("s", "netns", 1.0, 1));
        run.events = vec![
            ev(0.5, "cnm", serde_json::json!({"cpid": "a", "qntz_fb": 63})),
            ev(1.0, "cnm", serde_json::json!({"cpid": "a", "qntz_fb": 10})),
            ev(2.0, "cnm", serde_json::json!({"cpid": "a", "qntz_fb": 20})),
            ev(2.5, "cnm", serde_json::json!({"flow": 0, "qntz_fb": 50})),
            ev(2.6, "drop", serde_json::json!({"cpid": "a", "qntz_fb": 50})),
            ev(3.0, "cnm", serde_json::json!({"cpid": "b", "qntz_fb": 33})),
        ];
        assert_eq!(cnm_feedback_mean(&run, 1.0, 3.0), Some(21.0));
        assert_eq!(cnm_feedback_mean(&run, 3.5, 4.0), None);
    }

    /// Two congestion points of a parking lot: CNMs are kept apart by switch and port (named
    /// through the run's port list, or numbered), counted in `[a, b)`, given to the flow whose
    /// source they went to, and their QntzFb averaged per point; a CNM to no flow's source is
    /// counted under `?`; a reaction point's record (no `cpid`) is not a congestion point's.
    #[test]
    fn cnms_are_counted_per_congestion_point_and_flow() {
        let ev = |t: f64, node: &str, fields: serde_json::Value| Event {
            t_s: t,
            node: Some(node.into()),
            kind: "cnm".into(),
            port: None,
            priority: None,
            flow: None,
            fields,
        };
        let cnm = |port: u64, dst: &str, fb: u64| serde_json::json!({"cpid": "x", "cp_port": port, "dst": dst, "qntz_fb": fb});
        let (a, b) = ("02:00:00:00:01:02", "02:00:00:00:01:04");
        let mut run = RunData::new(super::super::model::RunMeta::new("s", "netns", 1.0, 1));
        run.add_flow(FlowSeries::new("f2", &[]).source_mac(a));
        run.add_flow(FlowSeries::new("f4", &[]).source_mac(b));
        run.switch_ports
            .insert("sw1".into(), vec!["h3".into(), "h4".into(), "r1".into()]);
        run.events = vec![
            ev(0.5, "sw1", cnm(2, a, 9)),
            ev(1.0, "sw1", cnm(2, a, 1)),
            ev(1.5, "sw1", cnm(2, b, 3)),
            ev(1.6, "sw1", cnm(2, "02:00:00:00:09:09", 2)),
            ev(1.7, "sw0", cnm(1, a, 4)),
            ev(1.8, "h2", serde_json::json!({"flow": 0, "qntz_fb": 50})),
            ev(2.0, "sw1", cnm(2, b, 7)),
        ];
        let got = cnms_by_cp(&run, 1.0, 2.0);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].cp, "sw0:1");
        assert_eq!((got[0].cnms, got[0].fb_mean), (1, Some(4.0)));
        assert_eq!(got[0].flows.get("f2"), Some(&1));
        assert_eq!(got[1].cp, "sw1:r1");
        assert_eq!(got[1].cnms, 3);
        assert_eq!(got[1].cnm_per_s, 3.0);
        assert_eq!(got[1].fb_mean, Some(2.0));
        let flows: Vec<(&str, u64)> = got[1].flows.iter().map(|(f, n)| (f.as_str(), *n)).collect();
        assert_eq!(flows, [("?", 1), ("f2", 1), ("f4", 1)]);
        assert!(cnms_by_cp(&run, 3.0, 4.0).is_empty());
    }

    use super::*;

    #[test]
    fn jain_edges() {
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0, 0.0]), None);
        assert!((jain(&[5.0]).unwrap() - 1.0).abs() < 1e-12);
    }
}
