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
//! | CPU saturation | mean busy fraction of each sampled switch process, and of the CPUs the run may use (the runner's affinity) | 0.90 |
//! | generator shortfall | `1 − offered/intended` per flow | 0.05 |
//! | unexpected drops | drops outside CP queues (rings, delay lines, control queues, generators) | 0 |
//! | pacing error | mean relative inter-frame gap error per generator | 0.10 |
//! | ingress bursts | share of frames that reached a switch port faster than its link could have delivered them | 0.05 |
//! | held back, unexplained | generator shortfall counting the intervals its agent held it back, when the ingress bursts are above their limit | 0.05 |
//! | window too short for the RP loop | fast recoveries of the reaction points the steady window holds | at least 3 (when the scenario's own window holds fewer: as many as it, and a twin decides, [`transient_by_design`]) |
//! | senders' timing | median lateness of each generator's frames after their pacers' instants, in frame times of its line ([`sender_timing`]) | 0.5 |
//!
//! # The window and the reaction point's loop
//! A steady-state mean is a mean over the QCN loop's cycles: a CNM cuts a flow's rate, then
//! the reaction point recovers (802.1Q-2011 clause 32.13; QCN-REFERENCE §3; Alizadeh et al.,
//! "Data Center Transport Mechanisms", Allerton 2008, §III: fast recovery). Fast recovery ends
//! after `rpg_threshold` (F = 5) firings of the byte counter or of the timer; the timer fires
//! every `rpg_time_reset` (T = 15 ms at 10 Gb/s) stretched by a jitter of up to 1.15, and the
//! byte counter can only end it sooner. So one recovery lasts at most
//!
//! ```text
//! R = F · T · 1.15 · S        (S: the run's loop time scale; T and R in run time)
//! ```
//!
//! — 86.25 ms with the defaults unscaled, 8.625 s at S = 100. A window shorter than a few R
//! averages over part of one recovery: its mean depends on where the window cuts the cycle,
//! and a slow outcome (fairness between flows, which QCN reaches over many cycles) has not
//! had the time to show. The check asks for [`FidelityThresholds::rp_recoveries_min`] = 3:
//! one for the transient the window may begin in, two to average over. It applies when a
//! flow is limited by a QCN-family reaction point (`RunMeta::rp_recovery_s`; explicit-rate
//! sources follow the advertised rate and have no recovery), see [`rp_window_check`].
//!
//! # Ingress bursts
//! A link cannot deliver frames faster than its rate; a frame a switch received sooner after
//! its predecessor than its own wire time (kernel receive stamps, cp-switch's ingress measure,
//! `cp_switch` daemon module `ingress`) came from a sender that was descheduled and then
//! drained its backlog at memory speed. Such bursts fill the congestion point's queue with an
//! artefact of the emulation, the CP answers with CNMs that cut every flow, and the link
//! idles: the run measures its host's scheduler, not QCN. The check pools every switch port
//! that measured frames (early frames over measured frames) and fails the run above
//! [`FidelityThresholds::ingress_early_max`]. 5 %: a sender at its line's rate on an idle
//! machine delivers well under 1 % of its frames early (its pacer's quantum and the stamp's
//! jitter are inside the measure's tolerance), while a sender that is descheduled every few
//! milliseconds delivers a whole ring early at every wake-up.
//!
//! # Held back by the reaction point
//! A generator whose agent's queue pushed back sent what its reaction point allowed: that is
//! QCN working, not a shortfall — when the CNMs that cut the rate were themselves earned. When
//! the switch saw bursts above the limit, the CNMs are not explained by the emulated network
//! (they answer queues the bursts built), so the held-back intervals owe the limiter's or the
//! line's rate again and a shortfall beyond [`FidelityThresholds::shortfall_max`] fails the run.
//!
//! # Senders' timing
//! A sender emulated by a process sends each frame when its loop runs, which is after the
//! frame's instant by the loop's wake-up and turn; the pacers' catch-up keeps the rate, but
//! the frames leave in bursts, with the other senders' of the same loop. The switch's ingress
//! stage cannot undo this (the frames did reach it together), and the congestion point,
//! whose feedback weighs how fast the queue grows between samples, answers with deeper cuts.
//! The agent measures each frame's lateness (`rp_agent::stats::TxLateness`); the generators
//! report it, and a run whose worst generator is late by more than
//! [`FidelityThresholds::sender_late_median_max`] of a frame time at the median is not
//! faithful (the reasons for half a frame time are at [`sender_timing`]). Measured on the
//! dumbbell: at S = 100 the medians were 0.17-0.20 frame times, at S = 10 1.17 (14 µs of the
//! hosts process's clock against a 12.3 µs frame time at 1 Gb/s), where the CNMs cut 3-4 times
//! deeper than the simulator's.
//!
//! # The twin
//! The strongest check compares the run with its **twin**: the simulator on the same scenario
//! and seed ([`twin`], `testbed run --twin`). The simulator runs the same sans-IO cores on an
//! ideal machine, so a netns run that differs from it by more than the noise of a short window
//! did not emulate the network it claims to. Per metric (netns value, simulator value,
//! deviation, limit):
//!
//! | metric | deviation | limit | why |
//! |---|---|---:|---|
//! | bottleneck utilization | netns − sim (points) | ±0.05 | the issue's goal: ≥ 95 % where the simulator fills the link; an idle link is the first symptom of artefacts |
//! | Jain's index | netns − the simulator's mean over its seeds | ±(0.05 + 3 sd of the simulator's indices over its seeds) | the issue's goal; fairness is what QCN variants are compared on; one run's index is one draw of the shares, so it is judged against the simulator's own spread as the shares are (0.99x on the dumbbell: the limit stays ±0.05; 0.756-0.871 for standard QCN over the FQCN paper's 100 ms window) |
//! | queue mean | (netns − sim) / max(sim, 1500 B) | ±30 % | the issue's goal; the CP acts on the queue, so its level is the loop's state; below one frame both queues are empty |
//! | per-flow share (mean / fair share) | netns − the simulator's mean over its seeds | ±(0.10 + 3 sd of the simulator's shares over its seeds) | one flow a tenth of its fair share off changes conclusions even when Jain's index over all flows barely moves; but a share over one run is one draw (which flow the CP samples is random), and the simulator's own shares spread by 0.07–0.13 (sd) from seed to seed on the dumbbell, so the netns draw is judged against that spread (`--twin-seeds`, default 10) |
//! | queue p99 | relative, as the mean | — (reported) | the tail of a short window is dominated by a few bursts: a symptom to read, not a verdict |
//! | CNMs per flow per second (scenario time) | relative, floor 1/s | — (reported) | CNM sampling is random and per flow sparse; the queue and the rates carry the loop's outcome |
//! | CNM mean QntzFb (steady window, every CP) | relative, floor 1 | — (reported) | how hard each CNM cuts (the decrease is Gd · \|Fb\|, 802.1Q 32.13.2): a queue that swings wider than the simulator's at the sampled arrivals shows here first; on the S = 10 dumbbell it was 3.4–4.3 in netns against 1.1 in the simulator |
//!
//! A netns schedule compressed below S (`scenario.netns.duration`, e.g. the parking lot's 182 s
//! for 7 s at S = 100) gives its steady window a fraction of the loop time the scenario's window
//! holds, and slow outcomes (fairness) differ for that reason alone. So the runner's twin
//! simulates the compressed schedule (`Scenario::schedule_scaled`, the run's schedule factor ÷
//! S), which is the experiment the netns run performed, and says so in a note; a twin given
//! summaries of different lengths notes the difference instead ([`super::twin::twin`]).
//!
//! Time-dependent figures are compared in scenario time: a netns run at scale S sees rates ÷ S
//! and times × S, so its CNMs per second are multiplied by S (its queues in octets, utilization
//! and shares are scale-free, QCN-REFERENCE §5).

use serde::{Deserialize, Serialize};

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
    /// Largest acceptable share of frames that reached the switches faster than their links
    /// could have delivered them.
    pub ingress_early_max: f64,
    /// Fewest fast recoveries of the reaction points the steady window must hold.
    pub rp_recoveries_min: f64,
    /// Largest acceptable median lateness of a generator's frames after their pacers'
    /// instants, in frame times of its line ([`sender_timing`]).
    pub sender_late_median_max: f64,
    /// Largest acceptable share of stamped frames that reached their switch later than their
    /// link's delay allows ([`stamp_placement`]).
    pub stamp_behind_max: f64,
    /// Limits of the comparison with the simulator twin.
    pub twin: TwinThresholds,
}

/// Limits of the comparison of a netns run with its simulator twin (see the module
/// documentation for the reasons).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TwinThresholds {
    /// Bottleneck utilization, absolute (0.05 = 5 points).
    pub utilization: f64,
    /// Jain's index, absolute.
    pub jain: f64,
    /// Queue mean, relative to the simulator's (at least one frame).
    pub queue_mean: f64,
    /// Each flow's mean / fair share, absolute.
    pub share: f64,
}

impl Default for TwinThresholds {
    fn default() -> Self {
        Self {
            utilization: 0.05,
            jain: 0.05,
            queue_mean: 0.30,
            share: 0.10,
        }
    }
}

impl Default for FidelityThresholds {
    fn default() -> Self {
        Self {
            cpu_busy_max: 0.90,
            shortfall_max: 0.05,
            unexpected_drops_max: 0,
            pacing_error_max: 0.10,
            ingress_early_max: 0.05,
            rp_recoveries_min: 3.0,
            sender_late_median_max: 0.5,
            stamp_behind_max: 0.01,
            twin: TwinThresholds::default(),
        }
    }
}

/// Verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Fidelity {
    /// No check failed.
    pub faithful: bool,
    /// One line per failed check (and notes that do not fail the run).
    pub warnings: Vec<String>,
    /// Share of frames that reached the switches faster than their links could have
    /// delivered them (`None`: not measured).
    pub ingress_early_share: Option<f64>,
    /// Fast recoveries of the reaction points the steady window holds (`None`: no QCN-family
    /// reaction point).
    pub rp_recoveries_in_window: Option<f64>,
    /// The one check that failed is the window's, and only because the scenario's own window
    /// is as short ([`transient_by_design`]): a simulator twin of the run may judge it.
    pub transient_only: bool,
}

/// The longest fast recovery of a QCN reaction point (seconds): `threshold` firings of a timer
/// of period `time_reset_s` (already scaled to run time), each up to 1.15 times the period
/// (the timer's jitter, QCN-REFERENCE §3). See the module documentation.
pub fn rp_recovery_s(threshold: u32, time_reset_s: f64) -> f64 {
    f64::from(threshold) * time_reset_s * RP_JITTER_MAX
}

/// Largest stretch of the RP timer's period by its jitter U(0.85, 1.15) (QCN-REFERENCE §3).
pub const RP_JITTER_MAX: f64 = 1.15;

/// Whether a steady window of `window_s` seconds holds at least `min` recoveries of
/// `recovery_s` seconds: `(recoveries held, None)` when it does, `(held, Some(why))` when not.
pub fn rp_window_check(window_s: f64, recovery_s: f64, min: f64) -> (f64, Option<String>) {
    let held = if recovery_s > 0.0 {
        window_s / recovery_s
    } else {
        f64::INFINITY
    };
    if held >= min {
        return (held, None);
    }
    (
        held,
        Some(format!(
            "steady window too short for the reaction points' loop: {window_s:.3} s holds \
             {held:.2} fast recoveries of at most {recovery_s:.3} s each (rpg_threshold × \
             rpg_time_reset × 1.15 at the run's scale), at least {min} are needed; lengthen the \
             run or its window (scenario `window`), or lower the time scale"
        )),
    )
}

/// The verdict on a window too short for the reaction points' loop that is the scenario's own
/// (`None` when the run's window is shorter than the scenario's, or the scenario's is long
/// enough): the scenario's window, in scenario time, holds `scenario` fast recoveries, fewer
/// than the check's minimum, and the run's holds as many (1 % tolerance for rounding). Such an
/// experiment (the fan-in victim's 80 ms with a fifth flow, 0.93 recoveries) measures a
/// transient in the simulator and in the paper alike. On its own the run is not faithful (no
/// steady state to trust); with a simulator twin on the same scenario and seed, the twin's
/// comparison decides instead ([`Fidelity::transient_only`]): a transient that matches the
/// simulator's is what the emulated network does. A run whose compressed schedule holds fewer
/// recoveries than its scenario's window fails as any short window: the compression, not the
/// experiment, cut the loop.
pub fn transient_by_design(
    held: f64,
    scenario: Option<f64>,
    th: &FidelityThresholds,
) -> Option<String> {
    let own = scenario?;
    (own < th.rp_recoveries_min && held >= own * 0.99).then(|| {
        format!(
            "steady window too short for the reaction points' loop, by the scenario's design: \
             its own window holds {own:.2} fast recoveries (in scenario time, as the simulator \
             runs it), fewer than the {} a steady state needs, and this run's holds {held:.2}; \
             the figures are a transient, to be judged against the simulator's (--twin)",
            th.rp_recoveries_min
        )
    })
}

/// The ingress measure pooled over every port that measured frames: `(early share, the
/// port with the largest share)`.
pub fn ingress_share(run: &RunData) -> Option<(f64, &super::model::IngressBurst)> {
    pooled_ingress(run.fidelity.ingress.iter())
}

/// Percent of a port's frames that must carry a departure stamp for the port to count as
/// [`placed_by_stamps`]: a port between two switches also takes the few control frames that
/// travel against the data (CNMs for hosts behind the other switch, LLDP), which carry none.
pub const STAMPED_PORT_MIN_PERCENT: u64 = 99;

/// Whether a port's stage placed its frames by their senders' departure stamps: every frame
/// it took, or all but under 1 % ([`STAMPED_PORT_MIN_PERCENT`]), carried one, so its receive times,
/// bunched or not, did not place them (see [`stamp_placement`]).
pub fn placed_by_stamps(p: &super::model::IngressBurst) -> bool {
    p.stage.as_ref().is_some_and(|s| {
        s.stamped > 0
            && u128::from(s.stamped) * 100
                >= u128::from(s.staged) * u128::from(STAMPED_PORT_MIN_PERCENT)
    })
}

/// The ingress measure pooled over the ports whose frames their receive times placed (not
/// [`placed_by_stamps`]): what the check judges.
pub fn judged_ingress_share(run: &RunData) -> Option<(f64, &super::model::IngressBurst)> {
    pooled_ingress(run.fidelity.ingress.iter().filter(|p| !placed_by_stamps(p)))
}

fn pooled_ingress<'a>(
    ports: impl Iterator<Item = &'a super::model::IngressBurst> + Clone,
) -> Option<(f64, &'a super::model::IngressBurst)> {
    let measured: u64 = ports.clone().map(|p| p.measured).sum();
    if measured == 0 {
        return None;
    }
    let early: u64 = ports.clone().map(|p| p.early).sum();
    let share = |p: &super::model::IngressBurst| p.early as f64 / p.measured.max(1) as f64;
    let worst = ports
        .filter(|p| p.measured > 0)
        .max_by(|a, b| share(a).total_cmp(&share(b)))?;
    Some((early as f64 / measured as f64, worst))
}

/// Drop reasons of the congestion points that are part of the emulated network (drop-tail of
/// a full input buffer or output queue, cp-switch `DropReason`); other reasons are unexpected.
pub const EXPECTED_DROP_REASONS: &[&str] = &["input_full", "output_full"];

/// Checks the run's fidelity inputs, its generators' offered rates and its drop events.
pub fn check(run: &RunData, th: &FidelityThresholds) -> Fidelity {
    let mut warnings = Vec::new();
    let mut faithful = true;
    let mut fail = |v: Vec<String>, warnings: &mut Vec<String>| {
        faithful &= v.is_empty();
        warnings.extend(v);
    };
    fail(cpu_saturation(run, th), &mut warnings);
    fail(generator_shortfall(run, th), &mut warnings);
    let ingress = ingress_share(run);
    let judged = judged_ingress_share(run);
    let bursts = judged.is_some_and(|(s, _)| s > th.ingress_early_max);
    if let (Some((share, worst)), None) = (ingress, judged) {
        // Every port's frames were placed by their departure stamps: the bursts are those of
        // the senders' processes, which the stamps undo (judged below, `stamp_placement`).
        warnings.push(format!(
            "note: ingress bursts: {:.2} % of the frames reached the switches faster than their \
             links could have delivered them, most at {}: {} of {}; the switches placed them by \
             their departure stamps",
            share * 100.0,
            worst.port,
            worst.early,
            worst.measured,
        ));
    }
    if let Some((share, worst)) = judged {
        // Say which ports the share is over when the stamps took some out.
        let measured = |p: &&super::model::IngressBurst| p.measured > 0;
        let all = run.fidelity.ingress.iter().filter(measured).count();
        let judged_ports = run
            .fidelity
            .ingress
            .iter()
            .filter(measured)
            .filter(|p| !placed_by_stamps(p))
            .count();
        let over = if judged_ports < all {
            format!(
                ", on the {judged_ports} of {all} ports whose frames their receive times placed"
            )
        } else {
            String::new()
        };
        let line = format!(
            "ingress bursts: {:.2} % of the frames reached the switches faster than their links \
             could have delivered them (limit {:.1} %){over}; most at {}: {} of {}, up to {} in \
             a row",
            share * 100.0,
            th.ingress_early_max * 100.0,
            worst.port,
            worst.early,
            worst.measured,
            worst.longest_run
        );
        if bursts {
            fail(vec![line], &mut warnings);
        } else {
            warnings.push(format!("note: {line}"));
        }
    }
    if let Some(line) = stage_note(run) {
        warnings.push(line);
    }
    let stamps = stamp_placement(run, th);
    // A sender whose frames its switch port placed by their departure stamps: its lag was
    // absorbed (up to the lookahead, judged by `stamp_placement`); the others are judged.
    let absorbed = |s: &super::model::SenderLateness| {
        s.ingress_port.as_ref().is_some_and(|p| {
            run.fidelity
                .ingress
                .iter()
                .any(|i| &i.port == p && placed_by_stamps(i))
        })
    };
    if let Some((line, late)) = sender_timing_over(run, th, |s| !absorbed(s)) {
        if late {
            fail(vec![line], &mut warnings);
        } else {
            warnings.push(format!("note: {line}"));
        }
    }
    if let Some((line, _)) = sender_timing_over(run, th, absorbed) {
        warnings.push(format!(
            "note: {line}; the switches placed the frames by their departure stamps"
        ));
    }
    let mut stamps_behind = false;
    if let Some((line, behind)) = stamps {
        stamps_behind = behind;
        if behind {
            fail(vec![line], &mut warnings);
        } else {
            warnings.push(format!("note: {line}"));
        }
    }
    // The CNMs are not explained by the emulated network when the switches saw bursts, or
    // bunched stamped frames their senders sent later than the lookahead allows.
    if bursts || stamps_behind {
        fail(held_back_unexplained(run, th), &mut warnings);
    }
    fail(unexpected_drops(run, th), &mut warnings);
    fail(pacing_error(run, th), &mut warnings);
    // The window against the reaction points' loop.
    let (a, b) = run.meta.window();
    let mut rp_recoveries_in_window = None;
    let mut transient = None;
    if let Some(r) = run.meta.rp_recovery_s.filter(|r| *r > 0.0) {
        let (held, why) = rp_window_check(b - a, r, th.rp_recoveries_min);
        rp_recoveries_in_window = Some(held);
        match (
            why,
            transient_by_design(held, run.meta.rp_recoveries_scenario, th),
        ) {
            (Some(_), Some(line)) => transient = Some(line),
            (why, _) => fail(why.into_iter().collect(), &mut warnings),
        }
    }
    // A transient window fails the run on its own account; `transient_only` lets a simulator
    // twin that agrees with the run judge it instead (`Summary::add_twin`).
    let transient_only = transient.is_some() && faithful;
    if let Some(line) = transient {
        faithful = false;
        warnings.push(line);
    }
    Fidelity {
        faithful,
        warnings,
        ingress_early_share: ingress.map(|(s, _)| s),
        rp_recoveries_in_window,
        transient_only,
    }
}

/// What the switches' ingress link-rate stages did, pooled over the ports that have one: a
/// note (the stage corrects the bursts the ingress measure counts, it does not judge the run).
pub fn stage_note(run: &RunData) -> Option<String> {
    let stages: Vec<_> = run
        .fidelity
        .ingress
        .iter()
        .filter_map(|p| Some((p, p.stage.as_ref()?)))
        .collect();
    let staged: u64 = stages.iter().map(|(_, s)| s.staged).sum();
    if staged == 0 {
        return None;
    }
    let held: u64 = stages.iter().map(|(_, s)| s.held).sum();
    let total: u64 = stages.iter().map(|(_, s)| s.delay_total_ns).sum();
    let drops: u64 = stages.iter().map(|(_, s)| s.drops).sum();
    let (worst, max) = stages
        .iter()
        .map(|(p, s)| (p.port.as_str(), s.delay_max_ns))
        .max_by_key(|x| x.1)
        .unwrap_or(("?", 0));
    let mut note = format!(
        "note: ingress stage: {held} of {staged} frames ({:.2} %) held back to their links' \
         rate, mean delay {:.1} µs, max {:.1} µs (at {worst}), {drops} dropped",
        held as f64 * 100.0 / staged as f64,
        total as f64 / staged as f64 / 1e3,
        max as f64 / 1e3,
    );
    // Frames the switch read only after its bridge had run past them (cp-switch
    // `daemon::stage`): their arrival moved later by up to this much.
    let late: u64 = stages.iter().map(|(_, s)| s.late).sum();
    if late > 0 {
        let (worst, max) = stages
            .iter()
            .map(|(p, s)| (p.port.as_str(), s.late_max_ns))
            .max_by_key(|x| x.1)
            .unwrap_or(("?", 0));
        note.push_str(&format!(
            "; {late} ({:.2} %) reached the bridge after their instant, by at most {:.1} µs \
             (at {worst})",
            late as f64 * 100.0 / staged as f64,
            max as f64 / 1e3,
        ));
    }
    Some(note)
}

/// How late the generators' agents sent their frames after their pacers' instants, in frame
/// times of each sender's line (`rp_agent::stats::TxLateness`): the line and whether the
/// worst median is beyond [`FidelityThresholds::sender_late_median_max`].
///
/// A sender late by a good part of a frame time sends what it owes in bursts, with the other
/// senders of its loop: burstier than the network it emulates, and a congestion point answers
/// that with deeper feedback. The simulator measures how much (`testbed::sim::host`: hosts on
/// a poll grid `g` send with a median lateness of `g/2`): on the dumbbell the CNMs' mean
/// QntzFb rose by 3 % on a 1 µs grid (a median of 0.4 frame times at 10 Gb/s), by 20 % on
/// 2.5 µs (1.0) and by 62 % on 5 µs (2.0). Hence the limit, half a frame time. The median is
/// judged, not the 99th percentile: a tail of late polls (a namespace run at S = 100 had 1.1
/// to 3.7 frame times at the 99th percentile with the feedback within 3-15 % of the
/// simulator's) weighs less than the body. Both are printed.
pub fn sender_timing(run: &RunData, th: &FidelityThresholds) -> Option<(String, bool)> {
    sender_timing_over(run, th, |_| true)
}

/// [`sender_timing`] over the senders `keep` selects.
fn sender_timing_over(
    run: &RunData,
    th: &FidelityThresholds,
    keep: impl Fn(&super::model::SenderLateness) -> bool,
) -> Option<(String, bool)> {
    let ratio = |s: &super::model::SenderLateness, ns: u64| ns as f64 / s.frame_time_ns as f64;
    let worst = run
        .fidelity
        .sender_lateness
        .iter()
        .filter(|s| s.frame_time_ns > 0 && keep(s))
        .max_by(|a, b| ratio(a, a.p50_ns).total_cmp(&ratio(b, b.p50_ns)))?;
    let median = ratio(worst, worst.p50_ns);
    let late = median > th.sender_late_median_max;
    Some((
        format!(
            "senders' timing: the frames of {} left {:.1} µs after their pacers' instants at the \
             median ({:.2} frame times of its line, limit {:.2}), {:.1} µs at the 99th \
             percentile ({:.2}), at most {:.1} µs",
            worst.flow,
            worst.p50_ns as f64 / 1e3,
            median,
            th.sender_late_median_max,
            worst.p99_ns as f64 / 1e3,
            ratio(worst, worst.p99_ns),
            worst.max_ns as f64 / 1e3,
        ),
        late,
    ))
}

/// How the switches' ingress stages placed the frames their senders stamped (cp-switch
/// `daemon::stage`): the line, and whether the share of stamped frames that came later than
/// their link's delay allows is beyond [`FidelityThresholds::stamp_behind_max`]. `None` when
/// no frame was placed by a stamp (the stamps are off, or no generator ran).
///
/// A stamped frame that reached its switch within the link's delay of its departure is placed
/// where the link would have delivered it, however late its sender's process sent it: the
/// senders' timing then no longer shapes the switch's queue, and is not judged
/// ([`sender_timing`] becomes a note for the senders on those ports). A frame whose sender
/// lagged by more than the delay arrives when it was received, bunched with its neighbours as
/// without stamps; the run is judged by how many did.
pub fn stamp_placement(run: &RunData, th: &FidelityThresholds) -> Option<(String, bool)> {
    let stages: Vec<_> = run
        .fidelity
        .ingress
        .iter()
        .filter_map(|p| Some((p.port.as_str(), p.stage.as_ref()?)))
        .collect();
    let stamped: u64 = stages.iter().map(|(_, s)| s.stamped).sum();
    if stamped == 0 {
        return None;
    }
    let behind: u64 = stages.iter().map(|(_, s)| s.behind).sum();
    let share = behind as f64 / stamped as f64;
    let mut line = format!(
        "departure stamps: {stamped} frames placed by their senders' departure instants; \
         {behind} ({:.2} %) came later than their link's delay allows (limit {:.1} %)",
        share * 100.0,
        th.stamp_behind_max * 100.0,
    );
    if behind > 0 {
        let (worst, max) = stages
            .iter()
            .map(|(p, s)| (*p, s.behind_max_ns))
            .max_by_key(|x| x.1)
            .unwrap_or(("?", 0));
        line.push_str(&format!(
            ", by at most {:.1} µs (at {worst})",
            max as f64 / 1e3
        ));
    }
    Some((line, share > th.stamp_behind_max))
}

/// CPU saturation, per process or core: one failure per name busy above the limit on average.
fn cpu_saturation(run: &RunData, th: &FidelityThresholds) -> Vec<String> {
    let mut out = Vec::new();
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
            out.push(format!(
                "CPU saturation: {name} busy {:.0} % on average (limit {:.0} %)",
                mean * 100.0,
                th.cpu_busy_max * 100.0
            ));
        }
    }
    out
}

/// Generators that offered less than intended.
fn generator_shortfall(run: &RunData, th: &FidelityThresholds) -> Vec<String> {
    let mut out = Vec::new();
    for f in &run.flows {
        if let (Some(want), Some(got)) = (f.intended_bps, f.offered_bps) {
            if want > 0.0 {
                let short = 1.0 - got / want;
                if short > th.shortfall_max {
                    out.push(format!(
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
    out
}

/// Generators held back by their reaction points, judged when the CNMs behind it are not
/// explained (the caller asks only when ingress bursts are above their limit).
fn held_back_unexplained(run: &RunData, th: &FidelityThresholds) -> Vec<String> {
    let mut out = Vec::new();
    for (name, owed) in &run.fidelity.held_back {
        let got = run
            .flows
            .iter()
            .find(|f| &f.name == name)
            .and_then(|f| f.offered_bps);
        let Some(got) = got.filter(|_| *owed > 0.0) else {
            continue;
        };
        let short = 1.0 - got / owed;
        if short > th.shortfall_max {
            out.push(format!(
                "generator shortfall: {name} was held back by its reaction point, but the \
                 CNMs behind it are not explained (ingress bursts or late senders above the \
                 limit): offered \
                 {} of {} ({:.1} % short, limit {:.1} %)",
                fmt_bps(got),
                fmt_bps(*owed),
                short * 100.0,
                th.shortfall_max * 100.0
            ));
        }
    }
    out
}

/// Drops outside the congestion points: reported by the runner, and trace drop events with
/// other reasons than [`EXPECTED_DROP_REASONS`].
fn unexpected_drops(run: &RunData, th: &FidelityThresholds) -> Vec<String> {
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
    if total <= th.unexpected_drops_max {
        return Vec::new();
    }
    let list: Vec<String> = unexpected
        .iter()
        .map(|(w, n)| format!("{w}: {n}"))
        .collect();
    vec![format!(
        "unexpected drops outside the congestion points: {}",
        list.join(", ")
    )]
}

/// Pacers whose inter-frame gaps were off by more than the limit on average.
fn pacing_error(run: &RunData, th: &FidelityThresholds) -> Vec<String> {
    run.fidelity
        .pacing_error
        .iter()
        .filter(|(_, err)| *err > th.pacing_error_max)
        .map(|(name, err)| {
            format!(
                "pacing error: {name} inter-frame gaps off by {:.1} % on average (limit {:.1} %)",
                err * 100.0,
                th.pacing_error_max * 100.0
            )
        })
        .collect()
}

/// One metric of the twin comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TwinMetric {
    /// What is compared (`utilization sw0-r0`, `share f1`, ...).
    pub metric: String,
    /// The netns run's value (in scenario time).
    pub netns: Option<f64>,
    /// The simulator's value (for a per-flow share compared over several seeds, the mean
    /// over them).
    pub sim: Option<f64>,
    /// The standard deviation of the simulator's value over its seeds, when compared so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim_sd: Option<f64>,
    /// The deviation: absolute, or relative when `relative`.
    pub deviation: Option<f64>,
    /// Whether `deviation` is relative to the simulator's value.
    pub relative: bool,
    /// The largest acceptable |deviation| (`None`: reported, not judged).
    pub limit: Option<f64>,
    /// Within the limit (true when not judged or not comparable).
    pub ok: bool,
}

/// A netns run compared with the simulator on the same scenario and seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Twin {
    /// The simulator's results directory, when written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim_dir: Option<String>,
    /// How many seeds the simulator ran (the run's, then the following ones).
    #[serde(default = "one")]
    pub sim_seeds: usize,
    /// Per metric.
    pub metrics: Vec<TwinMetric>,
    /// Every judged metric within its limit.
    pub faithful: bool,
    /// What limits the comparison (a compressed netns schedule), if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

fn one() -> usize {
    1
}

/// How many of the simulator's standard deviations over its seeds a per-flow share may lie
/// from their mean beyond [`TwinThresholds::share`] ([`super::twin::twin`]). On the dumbbell
/// (seeds 1–24, all 4 flows at once, 4000 random draws) one seed of the simulator judged
/// against 5 others missed somewhere in 3.1 % of the draws, against 10 others in 0.3 %, and
/// against 15 in 0.025 %: an sd over five seeds is a loose estimate of the spread (one flow's
/// came out 0.04 over seeds 1–5, 0.10 over all 24), hence ten twin seeds by default. With the
/// threshold alone, one seed against another missed in 79 % of the seed pairs.
pub const TWIN_SHARE_SPREAD: f64 = 3.0;

/// A queue of less than one full frame is empty for the twin comparison (octets).
pub const TWIN_QUEUE_FLOOR: f64 = 1500.0;
/// CNM rates below one per second are too sparse for a relative deviation (per second).
pub const TWIN_CNM_FLOOR: f64 = 1.0;

impl Twin {
    /// One warning per metric beyond its limit.
    pub fn warnings(&self) -> Vec<String> {
        let notes = self.note.iter().map(|n| format!("note: twin: {n}"));
        notes.chain(self.failures()).collect()
    }

    fn failures(&self) -> impl Iterator<Item = String> + '_ {
        self.metrics.iter().filter(|m| !m.ok).map(|m| {
            format!(
                "twin: {} is {} in netns against {} in the simulator (deviation {}, limit ±{})",
                m.metric,
                fmt_opt(m.netns),
                fmt_opt(m.sim),
                m.fmt_deviation(),
                m.limit.map_or_else(|| "–".into(), |l| m.fmt_amount(l)),
            )
        })
    }
}

impl TwinMetric {
    /// `+12.0 %` (relative) or `-0.031` (absolute); `–` when not comparable.
    pub fn fmt_deviation(&self) -> String {
        self.deviation.map_or_else(
            || "–".into(),
            |d| {
                if self.relative {
                    format!("{:+.1} %", d * 100.0)
                } else {
                    format!("{d:+.3}")
                }
            },
        )
    }

    fn fmt_amount(&self, l: f64) -> String {
        if self.relative {
            format!("{:.0} %", l * 100.0)
        } else {
            format!("{l:.2}")
        }
    }
}

/// A value: whole numbers from 100 up, 4 decimals below; `–` when missing.
pub fn fmt_opt(v: Option<f64>) -> String {
    v.map_or_else(
        || "–".into(),
        |x| {
            if x.abs() >= 100.0 {
                format!("{x:.0}")
            } else {
                format!("{x:.4}")
            }
        },
    )
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
    use crate::analysis::model::{FlowSeries, IngressBurst, IngressStage, RunMeta, SenderLateness};

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

    fn port(name: &str, measured: u64, early: u64) -> IngressBurst {
        IngressBurst {
            port: name.into(),
            measured,
            early,
            longest_run: early.min(7),
            stage: None,
        }
    }

    /// A run whose generator `f0` was held back: it offered 60 Mb/s where the limiter and
    /// line allowed 100 Mb/s in the intervals its agent pushed back.
    fn held_back_run(early_h0: u64) -> RunData {
        let mut run = RunData::new(RunMeta::new("s", "netns", 1.0, 1));
        let mut f = FlowSeries::new("f0", &[]);
        f.intended_bps = Some(60e6);
        f.offered_bps = Some(60e6);
        run.add_flow(f);
        run.fidelity.held_back = vec![("f0".into(), 100e6)];
        run.fidelity.ingress = vec![port("sw0 h0", 1000, early_h0), port("sw0 h1", 3000, 0)];
        run
    }

    #[test]
    fn ingress_bursts_are_pooled_over_ports_and_judged() {
        let th = FidelityThresholds::default();
        // 40 early of 4000 measured: 1 %, a note.
        let v = check(&held_back_run(40), &th);
        assert!(v.faithful, "{:?}", v.warnings);
        assert_eq!(v.ingress_early_share, Some(0.01));
        assert_eq!(v.warnings.len(), 1);
        assert!(
            v.warnings[0].starts_with("note: ingress bursts: 1.00 %"),
            "{:?}",
            v.warnings
        );
        assert!(
            v.warnings[0].contains("sw0 h0: 40 of 1000"),
            "{:?}",
            v.warnings
        );
        // 400 of 4000: 10 %, above the 5 % limit.
        let v = check(&held_back_run(400), &th);
        assert!(!v.faithful);
        assert_eq!(v.ingress_early_share, Some(0.1));
        assert!(
            v.warnings[0].starts_with("ingress bursts: 10.00 %"),
            "{:?}",
            v.warnings
        );
        // Nothing measured: no figure, no verdict.
        let mut run = held_back_run(0);
        run.fidelity.ingress.clear();
        assert_eq!(check(&run, &th).ingress_early_share, None);
    }

    #[test]
    fn the_ingress_stage_is_reported_as_a_note() {
        let th = FidelityThresholds::default();
        let mut run = held_back_run(40);
        // sw0 h0: 1000 frames, 250 held, 6 ms of delay in all, at most 80 µs; sw0 h1: 3000
        // frames, none held, one dropped. Pooled: 250 of 4000 (6.25 %), mean 6 ms / 4000 =
        // 1.5 µs.
        run.fidelity.ingress[0].stage = Some(IngressStage {
            staged: 1000,
            held: 250,
            delay_total_ns: 6_000_000,
            delay_max_ns: 80_000,
            drops: 0,
            ..IngressStage::default()
        });
        run.fidelity.ingress[1].stage = Some(IngressStage {
            staged: 3000,
            drops: 1,
            ..IngressStage::default()
        });
        let v = check(&run, &th);
        assert!(v.faithful, "{:?}", v.warnings);
        assert_eq!(v.warnings.len(), 2, "{:?}", v.warnings);
        assert_eq!(
            v.warnings[1],
            "note: ingress stage: 250 of 4000 frames (6.25 %) held back to their links' rate, \
             mean delay 1.5 µs, max 80.0 µs (at sw0 h0), 1 dropped"
        );
        // Frames late at the bridge: 10 + 30 of 4000 (1.00 %), the worst 2.5 µs at sw0 h1.
        if let Some(s) = run.fidelity.ingress[0].stage.as_mut() {
            (s.late, s.late_max_ns) = (10, 700);
        }
        if let Some(s) = run.fidelity.ingress[1].stage.as_mut() {
            (s.late, s.late_max_ns) = (30, 2_500);
        }
        assert_eq!(
            stage_note(&run).unwrap(),
            "note: ingress stage: 250 of 4000 frames (6.25 %) held back to their links' rate, \
             mean delay 1.5 µs, max 80.0 µs (at sw0 h0), 1 dropped; 40 (1.00 %) reached the \
             bridge after their instant, by at most 2.5 µs (at sw0 h1)"
        );
        // No stage (off, or an older switch): no note.
        run.fidelity.ingress[0].stage = None;
        run.fidelity.ingress[1].stage = None;
        assert_eq!(stage_note(&run), None);
    }

    /// f0: median 6 µs on a 12 µs frame time (0.50, at the limit: a note); f1: 7 µs (0.58,
    /// beyond it: not faithful), 99th percentile 30 µs (2.50), at most 0.5 ms.
    #[test]
    fn senders_late_by_half_a_frame_time_at_the_median_are_not_faithful() {
        let th = FidelityThresholds::default();
        let mut run = held_back_run(40);
        let sender = |flow: &str, p50_ns, p99_ns, max_ns| SenderLateness {
            flow: flow.into(),
            late_frames: 100,
            p50_ns,
            p99_ns,
            max_ns,
            frame_time_ns: 12_000,
            ingress_port: None,
        };
        run.fidelity.sender_lateness = vec![sender("f0", 6_000, 12_000, 20_000)];
        let v = check(&run, &th);
        assert!(v.faithful, "{:?}", v.warnings);
        assert!(
            v.warnings.contains(
                &"note: senders' timing: the frames of f0 left 6.0 µs after their pacers' \
                  instants at the median (0.50 frame times of its line, limit 0.50), 12.0 µs \
                  at the 99th percentile (1.00), at most 20.0 µs"
                    .to_string()
            ),
            "{:?}",
            v.warnings
        );
        run.fidelity
            .sender_lateness
            .push(sender("f1", 7_000, 30_000, 500_000));
        let v = check(&run, &th);
        assert!(!v.faithful);
        assert!(
            v.warnings.contains(
                &"senders' timing: the frames of f1 left 7.0 µs after their pacers' instants at \
                  the median (0.58 frame times of its line, limit 0.50), 30.0 µs at the 99th \
                  percentile (2.50), at most 500.0 µs"
                    .to_string()
            ),
            "{:?}",
            v.warnings
        );
        // Nothing measured (older generators, or iperf3 flows only): no line.
        run.fidelity.sender_lateness.clear();
        assert_eq!(sender_timing(&run, &th), None);
    }

    /// A port counts as placed by stamps when at least 99 % of its frames carried one (a
    /// port between switches also takes the unstamped CNMs and LLDP going the other way).
    #[test]
    fn a_port_is_placed_by_stamps_when_all_but_its_control_frames_carry_one() {
        let port = |staged, stamped| IngressBurst {
            stage: Some(IngressStage {
                staged,
                stamped,
                ..IngressStage::default()
            }),
            ..IngressBurst::default()
        };
        assert!(placed_by_stamps(&port(1000, 1000)));
        assert!(placed_by_stamps(&port(1000, 990)));
        assert!(!placed_by_stamps(&port(1000, 989)));
        assert!(!placed_by_stamps(&port(0, 0)));
        assert!(!placed_by_stamps(&IngressBurst::default()));
    }

    /// Both ports' frames placed by their senders' departure stamps (stamped = staged):
    /// their raw bursts (400 of 4000, 10 %) and the senders' lag (2 frame times at the median)
    /// are notes; what is judged is the share of stamped frames later than the lookahead:
    /// 36 of 4000 (0.90 %) passes, 44 (1.10 %) fails, and then the held-back generator's
    /// CNMs are unexplained too.
    #[test]
    fn stamped_frames_are_judged_by_how_many_came_behind_the_lookahead() {
        let th = FidelityThresholds::default();
        // A warning that starts with `start` and ends with `end`.
        let has = |v: &Fidelity, start: &str, end: &str| {
            let found = v
                .warnings
                .iter()
                .any(|w| w.starts_with(start) && w.ends_with(end));
            assert!(found, "{start:?} … {end:?} in {:?}", v.warnings);
        };
        let run_with = |behind_h1: u64| {
            let mut run = held_back_run(400);
            for (p, behind, max) in [(0, 20, 300_000), (1, behind_h1, 1_500_000)] {
                let staged = run.fidelity.ingress[p].measured;
                run.fidelity.ingress[p].stage = Some(IngressStage {
                    staged,
                    stamped: staged,
                    behind,
                    behind_max_ns: max,
                    ..IngressStage::default()
                });
            }
            run.fidelity.sender_lateness = vec![SenderLateness {
                flow: "f0".into(),
                late_frames: 100,
                p50_ns: 24_000,
                p99_ns: 120_000,
                max_ns: 2_000_000,
                frame_time_ns: 12_000,
                ingress_port: Some("sw0 h0".into()),
            }];
            run
        };
        let v = check(&run_with(16), &th);
        assert!(v.faithful, "{:?}", v.warnings);
        assert_eq!(
            v.ingress_early_share,
            Some(0.1),
            "the raw share is still reported"
        );
        assert!(
            v.warnings.contains(
                &"note: departure stamps: 4000 frames placed by their senders' departure \
                  instants; 36 (0.90 %) came later than their link's delay allows (limit \
                  1.0 %), by at most 1500.0 µs (at sw0 h1)"
                    .to_string()
            ),
            "{:?}",
            v.warnings
        );
        has(
            &v,
            "note: ingress bursts: 10.00 %",
            "the switches placed them by their departure stamps",
        );
        has(
            &v,
            "note: senders' timing",
            "the switches placed the frames by their departure stamps",
        );
        let v = check(&run_with(24), &th);
        assert!(!v.faithful);
        has(
            &v,
            "departure stamps: 4000 frames placed by their senders' departure instants; \
                 44 (1.10 %)",
            "",
        );
        has(&v, "generator shortfall: f0 was held back", "");
        // A port with more than 1 % of its frames unstamped (11 of 1000) is judged by its
        // receive times again.
        let mut run = run_with(16);
        if let Some(st) = run.fidelity.ingress[0].stage.as_mut() {
            st.stamped -= 11;
        }
        let v = check(&run, &th);
        assert!(!v.faithful, "400 early of 1000 at sw0 h0: {:?}", v.warnings);
        has(
            &v,
            "ingress bursts: 40.00 % of the frames reached the switches faster than their \
                 links could have delivered them (limit 5.0 %), on the 1 of 2 ports whose \
                 frames their receive times placed",
            "",
        );
        // And the lag of f0, whose port that is, is judged again.
        has(&v, "senders' timing: the frames of f0", "");
    }

    #[test]
    fn held_back_counts_as_short_only_when_the_cnms_are_unexplained() {
        let th = FidelityThresholds::default();
        // Bursts under the limit: the CNMs are explained, holding back is QCN at work.
        let v = check(&held_back_run(40), &th);
        assert!(
            !v.warnings.iter().any(|w| w.contains("held back")),
            "{:?}",
            v.warnings
        );
        // Bursts above it: 60 of the 100 Mb/s owed is 40 % short.
        let v = check(&held_back_run(400), &th);
        let w: Vec<&String> = v
            .warnings
            .iter()
            .filter(|w| w.contains("held back"))
            .collect();
        assert_eq!(w.len(), 1, "{:?}", v.warnings);
        assert!(
            w[0].contains("f0") && w[0].contains("40.0 % short"),
            "{w:?}"
        );
    }

    #[test]
    fn the_window_must_hold_three_fast_recoveries() {
        // Defaults (F = 5, T = 15 ms): R = 5 × 15 ms × 1.15 = 86.25 ms unscaled.
        assert!((rp_recovery_s(5, 0.015) - 0.08625).abs() < 1e-12);
        // At S = 100 the timer is 1.5 s: R = 8.625 s.
        let r100 = rp_recovery_s(5, 1.5);
        assert!((r100 - 8.625).abs() < 1e-9);
        // A 1 s window unscaled holds 1 / 0.08625 = 11.59 recoveries: enough.
        let (held, why) = rp_window_check(1.0, rp_recovery_s(5, 0.015), 3.0);
        assert!((held - 11.594).abs() < 1e-3, "{held}");
        assert!(why.is_none());
        // The same window at S = 100 with a schedule compressed to ×5 (5 s of run time)
        // holds 5 / 8.625 = 0.58: not enough, and the reason says so.
        let (held, why) = rp_window_check(5.0, r100, 3.0);
        assert!((held - 0.5797).abs() < 1e-3, "{held}");
        let why = why.unwrap();
        assert!(
            why.contains("0.58 fast recoveries") && why.contains("8.625 s"),
            "{why}"
        );
        // Exactly three: 3 × 86.25 ms = 258.75 ms is enough, a microsecond less is not.
        assert!(rp_window_check(0.25875, 0.08625, 3.0).1.is_none());
        assert!(rp_window_check(0.258749, 0.08625, 3.0).1.is_some());
    }

    #[test]
    fn a_run_whose_window_is_too_short_for_the_rp_loop_is_not_faithful() {
        let th = FidelityThresholds::default();
        let mut run = RunData::new(crate::analysis::RunMeta::new("s", "netns", 30.0, 1));
        run.meta.steady_window = Some((10.0, 15.0));
        // No QCN reaction point: no verdict, no figure.
        let v = check(&run, &th);
        assert!(v.faithful && v.rp_recoveries_in_window.is_none());
        // R = 8.625 s (S = 100): 5 s hold 0.58 recoveries.
        run.meta.rp_recovery_s = Some(rp_recovery_s(5, 1.5));
        let v = check(&run, &th);
        assert!(!v.faithful);
        assert!((v.rp_recoveries_in_window.unwrap() - 0.5797).abs() < 1e-3);
        assert!(
            v.warnings.iter().any(|w| w.contains("too short")),
            "{:?}",
            v.warnings
        );
        // R = 86.25 ms (S = 1): 58 recoveries.
        run.meta.rp_recovery_s = Some(rp_recovery_s(5, 0.015));
        assert!(check(&run, &th).faithful);
    }

    #[test]
    fn a_window_as_short_as_the_scenarios_own_is_left_to_the_twin_a_shorter_one_fails() {
        let th = FidelityThresholds::default();
        // The fan-in victim at S = 100, uncompressed: 80 ms of scenario time, 8 s of run time,
        // R = 8.625 s: 0.93 recoveries in either world.
        let mut run = RunData::new(crate::analysis::RunMeta::new("s", "netns", 30.0, 1));
        run.meta.steady_window = Some((12.0, 20.0));
        run.meta.rp_recovery_s = Some(rp_recovery_s(5, 1.5));
        run.meta.rp_recoveries_scenario = Some(0.08 / rp_recovery_s(5, 0.015));
        let v = check(&run, &th);
        assert!(!v.faithful && v.transient_only, "{:?}", v.warnings);
        assert!(
            v.warnings
                .iter()
                .any(|w| w.contains("by the scenario's design") && w.contains("0.93 fast")),
            "{:?}",
            v.warnings
        );
        // Another failure besides: not the window's alone.
        run.fidelity
            .unexpected_drops
            .push(("sw0 h1 ingress stage".into(), 5));
        assert!(!check(&run, &th).transient_only);
        run.fidelity.unexpected_drops.clear();
        // Compressed to half: 4 s hold 0.46, fewer than the scenario's own 0.93: fails, and
        // no twin can judge it.
        run.meta.steady_window = Some((6.0, 10.0));
        let v = check(&run, &th);
        assert!(!v.faithful && !v.transient_only);
        assert!(v.warnings.iter().any(|w| w.contains("too short")));
        // A scenario whose own window holds 11.6 (the dumbbell's 1 s) compressed below 3:
        // fails, as before.
        run.meta.rp_recoveries_scenario = Some(1.0 / rp_recovery_s(5, 0.015));
        assert!(!check(&run, &th).faithful);
        // transient_by_design alone: the tolerance is 1 %.
        assert!(transient_by_design(0.921, Some(0.93), &th).is_some());
        assert!(transient_by_design(0.92, Some(0.93), &th).is_none());
        assert!(transient_by_design(0.5, None, &th).is_none());
    }
}
