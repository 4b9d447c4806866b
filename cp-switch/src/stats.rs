//! Counters, snapshots and events (ARCHITECTURE.md rule 4: monotonically increasing counters
//! read through a snapshot).
//!
//! [`BridgeStats`] is what `cp-switch ctl stats --json` prints: `ports`, `queues` and `cps`
//! (congestion points) arrays whose listed keys are stable; more keys may be added. [`Event`]s
//! (drops, PAUSE on/off, CNMs, rate and delay changes, link changes) are kept in a bounded log
//! the daemon drains into its trace.

pub use crate::cnd::NeighbourCn;
use crate::cp::CpStats;
use crate::fdb::FdbStats;
use crate::PortId;
use cnm_proto::wire::{CpId, EthernetAddress};
use cnm_proto::{Duration, Instant, Rate};
use serde::Serialize;

/// Instants serialise as nanoseconds since the bridge's epoch.
fn ser_instant<S: serde::Serializer>(t: &Instant, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(t.as_nanos())
}

/// Why a frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The input buffer of (ingress port, priority) had no room (drop-tail), or the frame's
    /// VOQ was over its dynamic share of that buffer (`buffers.voq_alpha`, [`crate::voq`]).
    InputFull,
    /// The output queue was full and `buffers.on_output_full` is `drop`.
    OutputFull,
    /// No port to send it to: a unicast destination learned on the ingress port itself
    /// (802.1Q-2018 clause 8.6.1: never back out of the reception port) or no other port up.
    NoRoute,
    /// Shorter than an Ethernet header, truncated or malformed VLAN tag, or a MAC-control frame
    /// that could not be parsed.
    Malformed,
    /// Longer than `max_frame`.
    TooLong,
    /// Received on, or queued for, a port that is down.
    PortDown,
    /// The propagation delay line of the egress port was full.
    DelayLineFull,
    /// A control frame (PAUSE/PFC, CNM) could not be queued: the port's control queue was full.
    ControlFull,
    /// Addressed to a reserved group address 01-80-C2-00-00-00..0F other than LLDP's, which a
    /// bridge never relays (802.1Q-2018 clause 8.6.3, Table 8-1): STP, LACP, 802.1X, ...
    ReservedGroup,
    /// Queued for, or arriving for, an output priority the PFC storm watchdog has shut while
    /// its peer keeps it paused ([`crate::pause::PauseRx`]).
    PauseStorm,
    /// The egress port refused the frame for good (longer than the interface's MTU, or another
    /// send error that is not the link going away): reported by the port's owner through
    /// [`crate::Bridge::tx_refused`], and not counted as transmitted.
    TxRefused,
}

/// Drops by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DropCounters {
    /// [`DropReason::InputFull`].
    pub input_full: u64,
    /// [`DropReason::OutputFull`].
    pub output_full: u64,
    /// [`DropReason::NoRoute`].
    pub no_route: u64,
    /// [`DropReason::Malformed`].
    pub malformed: u64,
    /// [`DropReason::TooLong`].
    pub too_long: u64,
    /// [`DropReason::PortDown`].
    pub port_down: u64,
    /// [`DropReason::DelayLineFull`].
    pub delay_line_full: u64,
    /// [`DropReason::ControlFull`].
    pub control_full: u64,
    /// [`DropReason::ReservedGroup`].
    pub reserved_group: u64,
    /// [`DropReason::PauseStorm`].
    pub pause_storm: u64,
    /// [`DropReason::TxRefused`].
    pub tx_refused: u64,
}

impl DropCounters {
    /// Counts one drop.
    #[inline]
    pub fn count(&mut self, r: DropReason) {
        let c = match r {
            DropReason::InputFull => &mut self.input_full,
            DropReason::OutputFull => &mut self.output_full,
            DropReason::NoRoute => &mut self.no_route,
            DropReason::Malformed => &mut self.malformed,
            DropReason::TooLong => &mut self.too_long,
            DropReason::PortDown => &mut self.port_down,
            DropReason::DelayLineFull => &mut self.delay_line_full,
            DropReason::ControlFull => &mut self.control_full,
            DropReason::ReservedGroup => &mut self.reserved_group,
            DropReason::PauseStorm => &mut self.pause_storm,
            DropReason::TxRefused => &mut self.tx_refused,
        };
        *c += 1;
    }
    /// All drops.
    pub fn total(&self) -> u64 {
        self.input_full
            + self.output_full
            + self.no_route
            + self.malformed
            + self.too_long
            + self.port_down
            + self.delay_line_full
            + self.control_full
            + self.reserved_group
            + self.pause_storm
            + self.tx_refused
    }
}

/// Running counters of one queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// Frames enqueued.
    pub enq_frames: u64,
    /// Octets enqueued.
    pub enq_bytes: u64,
    /// Frames dequeued (moved on or transmitted).
    pub deq_frames: u64,
    /// Frames dropped at or in this queue.
    pub drops: u64,
    /// Highest occupancy seen (octets).
    pub peak_bytes: u64,
}

/// Per-port counters kept by the bridge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Frames received (all, including dropped and MAC-control).
    pub rx_frames: u64,
    /// Octets received.
    pub rx_bytes: u64,
    /// Frames transmitted (data and control).
    pub tx_frames: u64,
    /// Octets transmitted.
    pub tx_bytes: u64,
    /// Frames received whose destination was flooded.
    pub flooded: u64,
    /// Frames received with a CNPV priority on an `edge` port and queued at the alternate
    /// priority (`crate::cnd::CndDefense`).
    pub cn_remapped: u64,
    /// Frames sent without the CN-TAG they were received with (`edge`/`interior` port).
    pub cn_tag_stripped: u64,
    /// PAUSE/PFC frames sent.
    pub pause_tx: u64,
    /// PAUSE/PFC frames received.
    pub pause_rx: u64,
    /// CNMs sent (by the congestion points whose sampled frames arrived on this port).
    pub cnm_tx: u64,
    /// Rate-feedback messages sent (explicit-rate CPs, to sources reached through this port).
    pub rate_fb_tx: u64,
    /// MAC-control frames received that are neither PAUSE nor PFC (consumed, not forwarded).
    pub mac_control_other: u64,
    /// LLDP frames received (consumed, never forwarded).
    pub lldp_rx: u64,
    /// LLDP frames sent (`auto` CND defence).
    pub lldp_tx: u64,
    /// Storms the PAUSE/PFC watchdog detected on this output (per priority).
    pub pause_storms: u64,
    /// Drops attributed to this port.
    pub drops: DropCounters,
}

impl PortCounters {
    /// One frame of `len` octets handed to the port's line (data or control).
    #[inline]
    pub fn count_tx(&mut self, len: usize) {
        self.tx_frames += 1;
        self.tx_bytes += len as u64;
    }
}

/// Snapshot of one port (`stats --json` → `ports[]`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortStats {
    /// Port name.
    pub name: String,
    /// Port index.
    pub index: u16,
    /// Link up.
    pub up: bool,
    /// Emulated rate (`null` = unshaped).
    pub rate: Option<Rate>,
    /// Propagation delay.
    pub delay: Duration,
    /// Frames received.
    pub rx_frames: u64,
    /// Frames transmitted.
    pub tx_frames: u64,
    /// Octets received.
    pub rx_bytes: u64,
    /// Octets transmitted.
    pub tx_bytes: u64,
    /// All drops attributed to the port.
    pub drops: u64,
    /// PAUSE/PFC frames sent.
    pub pause_tx: u64,
    /// PAUSE/PFC frames received.
    pub pause_rx: u64,
    /// CNMs sent from this port.
    pub cnm_tx: u64,
    /// Rate-feedback messages sent from this port.
    pub rate_fb_tx: u64,
    /// Frames whose destination was flooded.
    pub flooded: u64,
    /// Frames received with a CNPV priority on an `edge` port, queued at the alternate one.
    pub cn_remapped: u64,
    /// Frames sent without their CN-TAG (`edge`/`interior` port, or an `auto` port whose
    /// neighbour did not declare their priority Ready).
    pub cn_tag_stripped: u64,
    /// LLDP frames received (consumed).
    pub lldp_rx: u64,
    /// LLDP frames sent (`auto` CND defence).
    pub lldp_tx: u64,
    /// The CND defence configured (`crate::cnd::CndDefense`).
    pub cnd_defense: crate::cnd::CndDefense,
    /// Priorities whose frames leave with their CN-TAG now (bit p = priority p): what the
    /// defence mode and the neighbour's CN TLV allow.
    pub cn_tag_kept: u8,
    /// Storms the PAUSE/PFC watchdog detected on this output (per priority).
    pub pause_storms: u64,
    /// Priorities of this output shut by the storm watchdog now (bit p = priority p).
    pub storm_priorities: u8,
    /// The CN TLV of the neighbour's last LLDPDU: its CNPV and Ready bits (`null`: none seen).
    pub neighbour_cn: Option<NeighbourCn>,
    /// Drops by reason.
    pub drop_reasons: DropCounters,
    /// Priorities whose input buffer has XOFF asserted upstream (bit p = priority p).
    pub pause_asserted: u8,
    /// Priorities of this output stopped by a received PAUSE/PFC (bit p = priority p).
    pub paused_by_peer: u8,
    /// Octets in flight on the delay line.
    pub in_flight_bytes: u64,
}

/// Input or output queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueKind {
    /// Shared input buffer of (input port, priority), holding one VOQ per output.
    Input,
    /// Output queue of (output port, priority).
    Output,
}

/// Snapshot of one queue (`stats --json` → `queues[]`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueStats {
    /// Port name.
    pub port: String,
    /// Priority 0..=7.
    pub priority: u8,
    /// Input or output.
    pub kind: QueueKind,
    /// Occupancy now (octets).
    pub bytes: u64,
    /// Capacity (octets).
    pub max_bytes: u64,
    /// Frames queued now.
    pub frames: u64,
    /// Frames dropped.
    pub drops: u64,
    /// Frames enqueued.
    pub enqueued: u64,
    /// Octets enqueued.
    pub enqueued_bytes: u64,
    /// Frames dequeued.
    pub dequeued: u64,
    /// Highest occupancy seen (octets).
    pub peak_bytes: u64,
}

impl QueueKind {
    /// The name in snapshots and traces: `input` or `output`.
    pub fn name(self) -> &'static str {
        match self {
            QueueKind::Input => "input",
            QueueKind::Output => "output",
        }
    }
}

impl QueueStats {
    /// This queue in a trace's `queues` line.
    pub fn trace_entry(&self) -> daemon_kit::trace_record::QueueEntry {
        daemon_kit::trace_record::QueueEntry {
            port: self.port.clone(),
            priority: self.priority,
            kind: self.kind.name().to_string(),
            bytes: self.bytes,
        }
    }
}

/// A full snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BridgeStats {
    /// When the snapshot was taken (the last `now` the bridge saw), in nanoseconds.
    #[serde(serialize_with = "ser_instant")]
    pub at: Instant,
    /// One entry per port.
    pub ports: Vec<PortStats>,
    /// Input queues then output queues, by port then priority.
    pub queues: Vec<QueueStats>,
    /// Filtering database counters.
    pub fdb: FdbStats,
    /// Congestion points, by port then priority (empty when `cp.placement` is `off`).
    pub cps: Vec<CpStats>,
    /// Frame buffers allocated so far (stops growing in steady state).
    pub buffers_allocated: u64,
    /// Events lost because the event log was full.
    pub events_lost: u64,
}

/// Something worth tracing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A frame was dropped.
    Drop {
        /// When (nanoseconds).
        #[serde(serialize_with = "ser_instant")]
        at: Instant,
        /// Port the drop is attributed to.
        port: PortId,
        /// Priority, when known.
        priority: Option<u8>,
        /// Why.
        reason: DropReason,
    },
    /// This bridge asserted (`on`) or released XOFF towards the peer of `port`.
    PauseTx {
        /// When (nanoseconds).
        #[serde(serialize_with = "ser_instant")]
        at: Instant,
        /// Port the PAUSE/PFC left from.
        port: PortId,
        /// Priority for PFC; `None` for 802.3x PAUSE (whole link).
        priority: Option<u8>,
        /// XOFF (true) or XON (false).
        on: bool,
    },
    /// A PAUSE/PFC frame was received on `port` (its transmitter stops or resumes).
    PauseRx {
        /// When (nanoseconds).
        #[serde(serialize_with = "ser_instant")]
        at: Instant,
        /// Port.
        port: PortId,
        /// Priorities affected (bit p = priority p).
        priorities: u8,
        /// Largest pause time requested, in quanta (0 = resume).
        quanta: u16,
    },
    /// The storm watchdog shut (`on`) or restored priorities of an output its peer keeps
    /// paused ([`crate::pause`]).
    PauseStorm {
        /// When (nanoseconds).
        #[serde(serialize_with = "ser_instant")]
        at: Instant,
        /// Output port.
        port: PortId,
        /// Priorities (bit p = priority p).
        priorities: u8,
        /// Storm began (true) or ended.
        on: bool,
        /// Frames dropped from the queues when it began.
        flushed: u64,
    },
    /// A congestion point sent a CNM (802.1Q-2011 32.8 / 33.4).
    Cnm {
        /// When (nanoseconds).
        #[serde(serialize_with = "ser_instant")]
        at: Instant,
        /// Port the CNM left from: the one the sampled frame arrived on.
        port: PortId,
        /// Priority of the sampled frame (the CP's CNPV).
        priority: u8,
        /// Port of the CP's queue (the output port, or the input port for an input CP).
        cp_port: PortId,
        /// Destination: the sampled frame's source.
        dst: EthernetAddress,
        /// QntzFb, 1..=63.
        qntz_fb: u8,
        /// cnmQOffset as sent (64-octet units).
        q_offset: i16,
        /// cnmQDelta as sent (64-octet units).
        q_delta: i16,
        /// The CP.
        cpid: CpId,
    },
    /// An explicit-rate congestion point advertised its rate to a source (rate-feedback
    /// message, EtherType 0x88B5).
    RateFeedback {
        /// When (nanoseconds).
        #[serde(serialize_with = "ser_instant")]
        at: Instant,
        /// Port the message left from: the one the source's frames arrive on.
        port: PortId,
        /// Priority of the CP's queue.
        priority: u8,
        /// Port of the CP's queue.
        cp_port: PortId,
        /// Destination: the source.
        dst: EthernetAddress,
        /// The advertised rate.
        rate: Rate,
        /// The CP.
        cpid: CpId,
    },
    /// Emulated rate changed.
    RateChange {
        /// When (nanoseconds).
        #[serde(serialize_with = "ser_instant")]
        at: Instant,
        /// Port.
        port: PortId,
        /// New rate (`None` = unshaped).
        rate: Option<Rate>,
    },
    /// Propagation delay changed.
    DelayChange {
        /// When (nanoseconds).
        #[serde(serialize_with = "ser_instant")]
        at: Instant,
        /// Port.
        port: PortId,
        /// New delay.
        delay: Duration,
    },
    /// Link went up or down.
    Link {
        /// When (nanoseconds).
        #[serde(serialize_with = "ser_instant")]
        at: Instant,
        /// Port.
        port: PortId,
        /// New state.
        up: bool,
    },
}
