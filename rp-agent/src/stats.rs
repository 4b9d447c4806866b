//! Counters, per-flow views and trace events of the agent.

use crate::rp::RpState;
use cnm_proto::wire::CpId;
use cnm_proto::Instant;
use serde::Serialize;

fn ser_instant<S: serde::Serializer>(t: &Instant, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(t.as_nanos())
}

fn ser_cpid<S: serde::Serializer>(c: &CpId, s: S) -> Result<S::Ok, S::Error> {
    c.serialize(s)
}

fn ser_opt_cpid<S: serde::Serializer>(c: &Option<CpId>, s: S) -> Result<S::Ok, S::Error> {
    match c {
        Some(c) => c.serialize(s),
        None => s.serialize_none(),
    }
}

/// Monotonic counters of one agent (a snapshot).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AgentStats {
    /// Host frames accepted into a flow queue.
    pub host_rx_frames: u64,
    /// Octets of those.
    pub host_rx_bytes: u64,
    /// Host frames refused because their flow queue was full (the caller keeps them).
    pub host_backpressure: u64,
    /// Host frames refused as malformed (shorter than a MAC header).
    pub host_malformed: u64,
    /// Host frames refused as longer than the largest frame.
    pub host_too_long: u64,
    /// Host frames refused because the flow table was full of active flows.
    pub host_flow_table_full: u64,
    /// Frames sent up.
    pub uplink_tx_frames: u64,
    /// Octets sent up (with tags).
    pub uplink_tx_bytes: u64,
    /// Frames received from the network.
    pub uplink_rx_frames: u64,
    /// Frames from the network that could not be parsed, or longer than the largest frame
    /// (dropped).
    pub uplink_malformed: u64,
    /// Unicast frames from the network addressed to another station (not delivered).
    pub uplink_not_for_host: u64,
    /// Frames delivered to the host.
    pub host_tx_frames: u64,
    /// Frames from the network dropped because the host queue was full.
    pub host_queue_full: u64,
    /// CNMs received and applied to at least one flow.
    pub cnm_rx: u64,
    /// CNMs addressed to another station.
    pub cnm_not_for_us: u64,
    /// CNMs with a version other than 0 (802.1Q clause 33.4.1).
    pub cnm_bad_version: u64,
    /// CNMs that did not parse, or carried QntzFb 0.
    pub cnm_malformed: u64,
    /// CNMs matching no flow of this host.
    pub cnm_unmatched: u64,
    /// CNMs ignored because the reaction-point mode does not use them (`explicit-rate`).
    pub cnm_mode_ignored: u64,
    /// CNMs ignored because their CPID names no bridge of `cnm_bridges` (when it is set).
    pub cnm_unknown_cp: u64,
    /// QCN/BS entries displaced because a flow's table already held `rpg_bs_max_cps` entries.
    pub bs_cp_overflow: u64,
    /// PAUSE/PFC frames received.
    pub pause_rx: u64,
    /// MAC Control frames with an unknown opcode.
    pub mac_control_unknown: u64,
    /// Explicit-rate feedback messages received (EtherType 0x88B5; always consumed).
    pub rate_feedback_rx: u64,
    /// Rate-feedback messages that matched at least one flow in `explicit-rate` mode.
    pub rate_feedback_matched: u64,
    /// Rate-feedback messages addressed to another station.
    pub rate_feedback_not_for_us: u64,
    /// Rate-feedback messages with a version other than 0.
    pub rate_feedback_bad_version: u64,
    /// Rate-feedback messages that did not parse.
    pub rate_feedback_malformed: u64,
    /// Rate-feedback messages matching no flow of this host.
    pub rate_feedback_unmatched: u64,
    /// Rate-feedback messages ignored because the mode is not `explicit-rate`.
    pub rate_feedback_mode_ignored: u64,
    /// Per flow: feedback ignored by the CPID rule (a higher rate from another CP).
    pub rate_feedback_overridden: u64,
    /// Explicit-rate limiters released by `rp_er_timeout`.
    pub er_timeouts: u64,
    /// Limiters created by a CNM (or rate feedback in `explicit-rate` mode).
    pub limiters_created: u64,
    /// Limiters released at line rate.
    pub limiters_released: u64,
    /// Flows currently tracked.
    pub flows: u64,
    /// Flows currently rate limited.
    pub limited_flows: u64,
    /// Events lost because the event log was full.
    pub events_lost: u64,
    /// Frame buffers allocated (constant in steady state).
    pub buffers_allocated: u64,
    /// Frames sent up after their instant: later than their pacers (line, and the flow's
    /// limiter) and any PAUSE let them start ([`TxLateness`]).
    pub tx_late_frames: u64,
    /// Median lateness of the frames sent up, on time ones included (ns, the upper bound of
    /// its [`TxLateness`] bucket).
    pub tx_late_p50_ns: u64,
    /// 99th percentile of the same (ns).
    pub tx_late_p99_ns: u64,
    /// Largest lateness (ns).
    pub tx_late_max_ns: u64,
}

/// How late the frames sent up left: for each frame, `now − due`, where `due` is the instant
/// its pacers and PAUSE let it start (the line's `next_free`, the flow limiter's, the end of a
/// PAUSE) and `now` the poll that sent it. The core sends a frame as soon as it is polled
/// after `due`; what is left is the driver's timing: zero in the simulator, whose hosts are
/// polled at their instants (unless on a poll grid), and in a daemon the lateness of its loop's
/// wake-ups and turns. The pacers' `catch_up` back-dates such a frame, so the long-run rate
/// holds, but its neighbours see it late and with others: the emulated sender is burstier than
/// the one it stands for, and a congestion point answers that with deeper feedback
/// (`testbed::sim::host` measures how much).
///
/// A log-linear histogram: exact below 4 ns, then four buckets per power of two (each at most
/// 25 % wide), up to 2^40 ns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxLateness {
    buckets: [u64; TxLateness::BUCKETS],
    count: u64,
    max_ns: u64,
}

impl Default for TxLateness {
    fn default() -> Self {
        TxLateness {
            buckets: [0; TxLateness::BUCKETS],
            count: 0,
            max_ns: 0,
        }
    }
}

impl TxLateness {
    const BUCKETS: usize = 4 + 4 * 39;

    /// The bucket of `ns`.
    fn index(ns: u64) -> usize {
        if ns < 4 {
            return ns as usize;
        }
        let k = 63 - ns.leading_zeros() as usize; // floor(log2 ns) >= 2
        let m = ((ns >> (k - 2)) & 3) as usize;
        (4 + 4 * (k - 2) + m).min(Self::BUCKETS - 1)
    }

    /// The largest value of bucket `i`.
    fn upper(i: usize) -> u64 {
        if i < 4 {
            return i as u64;
        }
        let (k, m) = ((i - 4) / 4 + 2, (i - 4) % 4);
        ((5 + m as u64) << (k - 2)) - 1
    }

    /// One frame sent `ns` after its instant.
    pub fn record(&mut self, ns: u64) {
        self.buckets[Self::index(ns)] += 1;
        self.count += 1;
        self.max_ns = self.max_ns.max(ns);
    }

    /// Frames recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Frames that left after their instant.
    pub fn late(&self) -> u64 {
        // Bucket 0 holds exactly the frames on time.
        self.count - self.buckets[0]
    }

    /// The largest lateness recorded.
    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }

    /// The `q` quantile (0..=1) as the upper bound of its bucket, never above the largest
    /// value recorded; 0 when nothing was recorded.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Self::upper(i).min(self.max_ns);
            }
        }
        self.max_ns
    }
}

/// One flow as shown by `ctl show flows`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowView {
    /// Flow index (stable while the flow exists).
    pub flow: u32,
    /// Destination MAC.
    pub dst: String,
    /// Priority.
    pub priority: u8,
    /// IP 5-tuple in `five-tuple` mode (`proto src:port > dst:port`).
    pub five_tuple: Option<String>,
    /// RPID carried in its CN-TAG while limited (never 0).
    pub rpid: u16,
    /// Current rate (the line rate when released).
    pub cr_bps: u64,
    /// Target rate (the line rate when released).
    pub tr_bps: u64,
    /// Rate-control phase (QCN/BS: the selected, minimum-CR entry's).
    pub state: RpState,
    /// QCN/BS: every congestion point's entry (absent in other modes and when released).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cps: Vec<CpView>,
    /// Explicit rate: the congestion point followed (absent while none).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser_opt_cpid"
    )]
    pub er_cpid: Option<CpId>,
    /// CNMs applied to this flow.
    pub cnm_rx: u64,
    /// Rate-feedback messages applied to this flow (explicit-rate mode).
    pub rate_feedback_rx: u64,
    /// Frames sent up.
    pub tx_frames: u64,
    /// Octets sent up.
    pub tx_bytes: u64,
    /// Octets queued now.
    pub queued_bytes: u64,
    /// Frames queued now.
    pub queued_frames: u64,
    /// Host frames refused with backpressure.
    pub backpressure: u64,
}

/// One QCN/BS entry of a flow, as shown by `ctl show flows` (`"cps"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CpView {
    /// The congestion point (16 hex digits).
    #[serde(serialize_with = "ser_cpid")]
    pub cpid: CpId,
    /// The entry's current rate.
    pub cr_bps: u64,
    /// The entry's target rate.
    pub tr_bps: u64,
}

/// Why a CNM was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CnmIgnored {
    /// Addressed to another station.
    NotForUs,
    /// Version ≠ 0.
    BadVersion,
    /// Did not parse, or QntzFb 0.
    Malformed,
    /// No flow of this host matches.
    Unmatched,
    /// The reaction-point mode does not use CNMs (`explicit-rate`).
    Mode,
    /// The CPID names a bridge not listed in `cnm_bridges` (the check is on).
    UnknownCp,
}

/// Something worth tracing.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A CNM was applied to a flow (after the decrease).
    Cnm {
        /// When (ns).
        #[serde(serialize_with = "ser_instant")]
        at: Instant,
        /// Flow index.
        flow: u32,
        /// Its RPID.
        rpid: u16,
        /// Congestion point that sent it.
        #[serde(serialize_with = "ser_cpid")]
        cpid: CpId,
        /// Quantized feedback.
        qntz_fb: u8,
        /// New current rate.
        cr_bps: u64,
        /// Target rate.
        tr_bps: u64,
    },
    /// A CNM was not applied.
    CnmIgnored {
        /// When (ns).
        #[serde(serialize_with = "ser_instant")]
        at: Instant,
        /// Why.
        reason: CnmIgnored,
    },
    /// The rate of a flow rose (byte counter or timer expiry).
    RateChange {
        /// When (ns).
        #[serde(serialize_with = "ser_instant")]
        at: Instant,
        /// Flow index.
        flow: u32,
        /// Its RPID.
        rpid: u16,
        /// New current rate.
        cr_bps: u64,
        /// Target rate.
        tr_bps: u64,
        /// Phase.
        state: RpState,
    },
    /// A rate-feedback message changed a flow's rate or congestion point (explicit-rate mode).
    RateFeedback {
        /// When (ns).
        #[serde(serialize_with = "ser_instant")]
        at: Instant,
        /// Flow index.
        flow: u32,
        /// Its RPID.
        rpid: u16,
        /// Congestion point that advertised the rate.
        #[serde(serialize_with = "ser_cpid")]
        cpid: CpId,
        /// The advertised rate, as received.
        rate_bps: u64,
        /// The flow's rate after it (clamped to [`rpg_min_rate`, ceiling]).
        cr_bps: u64,
    },
    /// A limiter was released at line rate.
    Released {
        /// When (ns).
        #[serde(serialize_with = "ser_instant")]
        at: Instant,
        /// Flow index.
        flow: u32,
        /// Its RPID.
        rpid: u16,
    },
    /// A PAUSE/PFC frame was received.
    PauseRx {
        /// When (ns).
        #[serde(serialize_with = "ser_instant")]
        at: Instant,
        /// Priorities affected (bit p = priority p).
        priorities: u8,
        /// Largest pause time, in quanta (0 = resume).
        quanta: u16,
    },
}

#[cfg(test)]
mod tests {
    use super::TxLateness;

    /// Hand-computed buckets: 0-3 exact; 4 = 100b → [4, 5); 13 = 1101b: k = 3, the two bits
    /// after the leading one are 10 → [12, 14); 1000 = 1111101000b: k = 9, bits 11 →
    /// [896, 1024).
    #[test]
    fn buckets_are_log_linear() {
        for (ns, idx, upper) in [
            (0u64, 0usize, 0u64),
            (3, 3, 3),
            (4, 4, 4),
            (13, 10, 13),
            (1000, 35, 1023),
        ] {
            assert_eq!(TxLateness::index(ns), idx, "{ns}");
            assert_eq!(TxLateness::upper(idx), upper, "{ns}");
        }
        // Every value falls in a bucket whose range holds it.
        for ns in (0..5000).chain([u64::MAX / 2, u64::MAX]) {
            let i = TxLateness::index(ns);
            assert!(
                ns <= TxLateness::upper(i) || i == TxLateness::BUCKETS - 1,
                "{ns}"
            );
            assert!(i == 0 || ns > TxLateness::upper(i - 1), "{ns}");
        }
    }

    /// 98 frames on time, one 1000 ns late and one 50 000 ns late: the median is 0, the 99th
    /// percentile (rank 99) the bucket of 1000 (up to 1023), the largest 50 000.
    #[test]
    fn quantiles_over_every_frame() {
        let mut l = TxLateness::default();
        assert_eq!(l.quantile_ns(0.99), 0);
        for _ in 0..98 {
            l.record(0);
        }
        l.record(1000);
        l.record(50_000);
        assert_eq!((l.count(), l.late(), l.max_ns()), (100, 2, 50_000));
        assert_eq!(l.quantile_ns(0.5), 0);
        assert_eq!(l.quantile_ns(0.99), 1023);
        assert_eq!(l.quantile_ns(1.0), 50_000);
    }
}
