//! Counters, per-flow views and trace events of the agent.

use crate::rp::RpState;
use cnm_proto::wire::CpId;
use cnm_proto::Instant;
use serde::Serialize;

fn ser_instant<S: serde::Serializer>(t: &Instant, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(t.as_nanos())
}

fn ser_cpid<S: serde::Serializer>(c: &CpId, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(c)
}

fn ser_opt_cpid<S: serde::Serializer>(c: &Option<CpId>, s: S) -> Result<S::Ok, S::Error> {
    match c {
        Some(c) => s.collect_str(c),
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
