//! The sans-IO bridge core: a CIOQ Ethernet switch with emulated line rates, propagation delay
//! and PAUSE/PFC.
//!
//! # The path of a frame
//! 1. [`Bridge::handle_frame`] classifies the frame ([`crate::forward`]): malformed frames are
//!    counted drops; MAC-control frames (EtherType 0x8808) are consumed, PAUSE/PFC stopping the
//!    port's transmitter; the source is learned in the [`crate::fdb`]; the destination gives one
//!    output or a flood to every other port that is up.
//! 2. For each output, the frame is copied into a pooled buffer (or, handed over in the caller's
//!    buffer through [`Bridge::handle_frame_buf`] to a single output, moved there without a
//!    copy, the caller getting a spare buffer back) and appended to the VOQ for that
//!    output in the input buffer of (ingress port, priority) ([`crate::voq`]), or dropped if the
//!    shared buffer is full or, in drop-tail mode, that VOQ is over its dynamic share of it (in
//!    lossless mode the buffer sends XOFF upstream at Qhigh so that, with an honouring peer, it
//!    never fills). *Input congestion point hook:* every
//!    enqueue here passes `(now, frame length, buffer occupancy)` through
//!    `Bridge::input_enqueued`, where an input congestion point ([`crate::cp`], placement
//!    `input`) samples.
//! 3. The fabric ([`crate::sched`]) moves frames from VOQs into the output queue of (output,
//!    priority) round-robin across inputs, **only when the frame fits**: a full output queue
//!    holds frames in their VOQs (backpressure), which is what fills input buffers and fires
//!    PAUSE, while frames for other outputs in the same input buffer keep moving (no
//!    head-of-line blocking). The output queues therefore never drop. (With
//!    `buffers.on_output_full = "drop"` the fabric instead drops a frame that does not fit,
//!    counted `output_full`: the VOQs then never hold frames and the bridge behaves as the
//!    output-queued drop-tail switch of the QCN papers.) *Output congestion point
//!    hook:* every enqueue passes through `Bridge::output_enqueued`, where the standard output
//!    congestion point ([`crate::cp`]) samples.
//!
//!    A congestion point that finds `Fb < 0` in a sample makes the bridge build a CNM from the
//!    sampled frame (`cnm_proto::wire::build_cnm`, into a stack buffer) and queue it on the
//!    control queue of the port the sampled frame arrived on.
//! 4. [`Bridge::poll_transmit`] serves each port: control frames (PAUSE/PFC, CNMs) first
//!    and never paused; then frames whose propagation delay ([`crate::delay`]) has elapsed; then
//!    data, chosen among the priorities not stopped by a received PAUSE/PFC (strict or DWRR,
//!    [`crate::sched`]), paced by the port's [`crate::shaper`]. A frame leaves its queue only if
//!    the caller's `tx` accepts it.
//!
//! # Timing model
//! A frame is handed to `tx` when its first bit enters the link (plus the propagation delay);
//! the next frame of that port may start one serialisation time later. [`Bridge::poll_timeout`]
//! gives the next instant anything is due, so a driver that sleeps until then and polls again
//! reproduces the emulated line exactly; a driver that polls late gets the backlog sent in a
//! burst of at most `shaper.catch_up`.
//!
//! # Run-time changes
//! Link parameters change through [`Bridge::set_port_rate`], [`Bridge::set_port_delay`] and
//! [`Bridge::set_port_up`]; the congestion points' settings through
//! [`Bridge::set_cp_config`] / [`Bridge::apply_cp_patch`] (scaling parameters in place,
//! structural ones by rebuilding the CPs; see [`crate::cp::CpConfig`]).
//!
//! # Cost
//! Per frame: one header walk (its result travels with the frame: a port removing CN-TAGs
//! cuts at the offset found on arrival), two FDB hash operations, one copy into a recycled
//! buffer (none for a frame handed over in the caller's buffer and taken out the same way,
//! [`Bridge::poll_transmit_buf`]), and O(1) queue operations. [`Bridge::poll_transmit`] and
//! [`Bridge::poll_timeout`] visit only the *busy* ports: a port is marked busy whenever
//! something may give it work (a MAC-control or LLDP frame received on it, a frame entering
//! one of its output queues or its control queue, a change of its input buffers' PAUSE state,
//! any run-time change), and unmarked by `poll_transmit` once it has nothing queued, no PAUSE
//! to refresh or watch and no neighbour entry to expire; the busy ports are a bitmap
//! ([`crate::portset`]), so idle ports cost one word test per 64.
//! A data frame received on a port gives that port's transmitter nothing to do unless
//! lossless mode is on (its input buffer may then cross Qhigh/Qlow): without it, the ingress
//! port stays as it was and only the output the frame goes to is marked. No heap allocation
//! once the buffers and queues have grown to the largest backlog seen.

use crate::config::{
    alternate_priority, BridgeConfig, CndDefense, ConfigError, LosslessMode, OutputFullPolicy,
    LLDP_TTL_SECS, LLDP_TX_INTERVAL, NUM_PRIORITIES,
};
use crate::cp::flows::HDR_LEN;
use crate::cp::{
    Arrival, CongestionPoint, CpConfig, CpPatch, CpStats, Feedback, Placement, NO_FLOW,
};
use crate::delay::DelayLine;
use crate::fdb::{Fdb, FdbEntryView};
use crate::forward::{classify, decide, is_reserved_group, Classified, Decision};
use crate::outq::OutputQueue;
use crate::pause::{PauseAction, PauseGen, PauseRx};
use crate::pool::{Frame, FramePool};
use crate::portset::PortSet;
use crate::sched::{InputRing, PrioritySelector};
use crate::shaper::Shaper;
use crate::stats::{
    BridgeStats, DropReason, Event, NeighbourCn, PortCounters, PortStats, QueueCounters, QueueKind,
    QueueStats,
};
use crate::voq::InputBuffer;
use crate::PortId;
use cnm_proto::rng::Rng;
use cnm_proto::wire::generated;
use cnm_proto::wire::rate_feedback::build_rate_feedback_frame;
use cnm_proto::wire::{
    build_cnm, build_pause_frame, quantize_queue, CnmParams, EthernetAddress, MacControlRepr,
    RateFeedbackRepr, VlanInfo,
};
use cnm_proto::{Duration, Instant, Rate};
use daemon_kit::trace_record::{QueueEntry, QueueTracker, Queues};
use std::collections::VecDeque;

const P: usize = NUM_PRIORITIES;

/// `cp_slot` value of a queue without a congestion point.
const NO_CP: u16 = u16::MAX;

/// Room for the largest CNM: Ethernet header (14) + two VLAN tags (8) + CN-TAG (4) + CNM PDU
/// with a 64-octet MSDU (24 + 64) = 114 octets.
const CNM_BUF: usize = 128;

/// Octets of a CN-TAG: EtherType 0x22E9 and the RPID (802.1Q clause 33.3; QCN-REFERENCE §1).
const CN_TAG_LEN: usize = 4;

/// Interval between sweeps of the FDB for aged entries (lookups ignore expired entries in
/// between, so this only bounds how long they occupy room).
const FDB_SWEEP: Duration = Duration::from_secs(1);

/// A received frame: borrowed (copied if queued) or in a buffer of the caller's (moved into
/// the queue if queued, the caller getting a spare in exchange).
#[derive(Debug)]
enum Bytes<'a> {
    Shared(&'a [u8]),
    Owned(&'a mut Vec<u8>),
}

impl Bytes<'_> {
    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            Bytes::Shared(b) => b,
            Bytes::Owned(b) => b,
        }
    }
}

/// Where the frame a congestion point sampled sits: the back of a VOQ (input buffer `q`, VOQ
/// for output `o`) or of an output queue `q`.
#[derive(Debug, Clone, Copy)]
enum QueueRef {
    Input(usize, usize),
    Output(usize),
    /// A frame that arrived but was dropped (queue full): a copy of its first octets, how many,
    /// and the port it arrived on.
    Dropped([u8; HDR_LEN], usize, u16),
}

/// The bridge.
#[derive(Debug)]
pub struct Bridge {
    pvid: u16,
    max_frame: usize,
    nominal_rate: Rate,
    /// Detection time of the PAUSE/PFC storm watchdog (zero: off).
    watchdog: Duration,
    control_frames: usize,
    /// `buffers.on_output_full == Drop`: the fabric drops instead of holding frames.
    drop_at_output: bool,
    ports: Vec<Port>,
    /// The ports that may have work for `poll_transmit` or a deadline for `poll_timeout`
    /// (see "Cost" above; a port leaves the set only when found [`Port::idle`] after being
    /// served).
    busy: PortSet,
    /// Input buffers, index `input * 8 + priority`.
    inbufs: Vec<InputBuffer>,
    /// Rings of inputs with frames for (output, priority), index `output * 8 + priority`.
    rings: Vec<InputRing>,
    /// Output queues, index `output * 8 + priority`.
    outqs: Vec<OutputQueue>,
    fdb: Fdb,
    pool: FramePool,
    events: VecDeque<Event>,
    event_capacity: usize,
    events_lost: u64,
    last_now: Instant,
    next_sweep: Instant,
    /// Draws the congestion points' sampling jitter.
    rng: Rng,
    /// Congestion points, by port then priority.
    cps: Vec<CongestionPoint>,
    /// Index into `cps` of the CP of queue `port * 8 + priority` (input buffers or output
    /// queues, per `cp_placement`), or [`NO_CP`].
    cp_slot: Vec<u16>,
    cp_placement: Placement,
    /// PCP of the CNMs' VLAN tag.
    cnm_priority: u8,
    /// Encapsulated MSDU octets per CNM.
    cnm_msdu: usize,
    /// Some CP runs a timer (explicit-rate).
    cp_timers: bool,
    /// The earliest instant anything the frame being received made due can be due: `None`
    /// while it made nothing due. See [`Bridge::received_due_floor`].
    due_floor: Option<Instant>,
    /// Some CP accounts per-flow occupancy of its queue (occupancy culprits).
    cp_occupancy: bool,
    /// Base MAC (the MAC part of every CPID).
    base_mac: EthernetAddress,
    /// The congestion-point settings in force.
    cp_cfg: CpConfig,
    /// Room for a frame rewritten on its way in (edge remapping) or out (CN-TAG removal).
    scratch: Vec<u8>,
    /// Ports with congestion points (CND defence not `disabled`), by port.
    cp_ports: Vec<bool>,
    /// What the line emulation charges per frame (explicit-rate CPs count arrivals so).
    line_cost: crate::cp::explicit_rate::LineCost,
    /// Some port is a CND edge port (its priority remapping follows the CNPVs).
    has_edge: bool,
    /// When the `auto` ports advertise next (`None`: no port is `auto`).
    lldp_due: Option<Instant>,
}

/// How [`Bridge::set_cp_config`] applied a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpChange {
    /// The CPs were updated in place (their state kept).
    InPlace,
    /// The CPs were rebuilt (their sampling state and flow tables reset).
    Rebuilt,
}

/// The CPs of `cfg` on ports running at `rates` (one per port, the explicit-rate C), and the
/// slot table `port * 8 + priority` → index into them ([`NO_CP`] where there is none).
/// Ports whose `cp_ports` entry is false (CND defence `disabled`) get none; explicit-rate CPs
/// count arrivals at `line_cost`.
fn build_cps(
    cfg: &CpConfig,
    mac: EthernetAddress,
    rates: &[Rate],
    cp_ports: &[bool],
    line_cost: crate::cp::explicit_rate::LineCost,
    rng: &mut Rng,
) -> (Vec<CongestionPoint>, Vec<u16>) {
    let cnpv = cfg.cnpv_mask();
    let mut cps = Vec::new();
    let mut cp_slot = vec![NO_CP; rates.len() * P];
    if cfg.placement != Placement::Off {
        for (i, slot) in cp_slot.chunks_mut(P).enumerate() {
            if !cp_ports.get(i).copied().unwrap_or(false) {
                continue;
            }
            for (p, s) in slot.iter_mut().enumerate() {
                if cnpv & (1 << p) != 0 {
                    // At most MAX_PORTS × 8 = 2048 CPs: the index fits a u16 below NO_CP.
                    *s = cps.len() as u16;
                    cps.push(CongestionPoint::new(
                        cfg,
                        mac,
                        PortId(i as u16),
                        p as u8,
                        cfg.placement,
                        rates[i],
                        rng,
                    ));
                    if let Some(cp) = cps.last_mut() {
                        cp.set_line_cost(line_cost);
                    }
                }
            }
        }
    }
    (cps, cp_slot)
}

#[derive(Debug)]
struct Port {
    name: String,
    up: bool,
    mac: EthernetAddress,
    default_priority: u8,
    shaper: Shaper,
    delay: DelayLine,
    selector: PrioritySelector,
    pause_gen: PauseGen,
    pause_rx: PauseRx,
    /// Control frames waiting to go out ahead of data.
    ctl: VecDeque<Frame>,
    /// The CN TLV of the last LLDPDU received on the port.
    neighbour_cn: Option<NeighbourCn>,
    /// Bit p set: the output queue of priority p holds frames.
    backlog: u8,
    counters: PortCounters,
    /// CND defence, as configured.
    cnd: CndDefense,
    /// Bit p: frames of priority p leave without their CN-TAG (from `cnd` and
    /// `neighbour_cn`, [`CndDefense::strip_mask`]).
    strip_mask: u8,
    /// Until when `neighbour_cn` holds (its LLDPDU's TTL).
    neighbour_until: Instant,
    /// The Ready indicators last advertised (`auto` ports).
    advertised: Option<u8>,
    /// Priority a frame received with priority p is queued at: p itself, or the alternate
    /// priority for a CNPV on an `edge` port (`crate::cnd::CndDefense`).
    remap: [u8; P],
    /// Generated frames leave with their departure instant written in
    /// ([`PortConfig::stamp_departures`]).
    stamp_departures: bool,
}

impl Port {
    /// Nothing for `poll_transmit` to do or for `poll_timeout` to report until something
    /// reaches the port: no frame queued (control, delay line, data), no PAUSE to refresh,
    /// no PAUSE received being watched, no neighbour entry to expire.
    fn idle(&self) -> bool {
        self.ctl.is_empty()
            && self.backlog == 0
            && self.delay.next_due().is_none()
            && self.pause_gen.refresh_at().is_none()
            && self.pause_rx.at_rest()
            && self.neighbour_cn.is_none()
    }

    /// When the port may start the head of its priority-`p` output queue, queued at `ts`: not
    /// before it arrived, nor before a PAUSE or PFC received for its priority ends (802.3-2018
    /// clause 31B.3.1; 802.1Q-2018 clause 36), nor before the port's shaper frees the emulated
    /// line. What [`Bridge::poll_timeout`] reports for a backlogged port (the earliest over its
    /// priorities) and [`Bridge::received_due_floor`] for a frame that becomes a head.
    #[inline]
    fn head_ready(&self, p: usize, ts: Instant) -> Instant {
        ts.max(self.pause_rx.until(p))
            .max(self.shaper.next_free().unwrap_or(Instant::ZERO))
    }
}

impl Bridge {
    /// A bridge for `cfg` (validated first). `rng` seeds the FDB hash and the congestion
    /// points' sampling.
    pub fn new(cfg: BridgeConfig, mut rng: Rng) -> Result<Bridge, ConfigError> {
        cfg.validate()?;
        let n = cfg.ports.len();
        let max_frame = cfg.max_frame.get();
        let cnpv = cfg.cp.cnpv_mask();
        let mut fdb = Fdb::new(cfg.fdb.ageing, cfg.fdb.max_entries, rng.next_u64());
        let ports = cfg
            .ports
            .iter()
            .enumerate()
            .map(|(i, pc)| {
                let mac = pc.mac.unwrap_or_else(|| {
                    let mut m = cfg.mac.0;
                    let v = u16::from_be_bytes([m[4], m[5]]).wrapping_add(i as u16);
                    m[4..6].copy_from_slice(&v.to_be_bytes());
                    EthernetAddress(m)
                });
                Port {
                    name: pc.name.clone(),
                    up: true,
                    mac,
                    default_priority: pc.default_priority.unwrap_or(cfg.default_priority),
                    shaper: Shaper::new(pc.rate, &cfg.shaper.for_port(pc)),
                    delay: DelayLine::new(pc.delay, cfg.buffers.delay_line.get()),
                    selector: PrioritySelector::new(&cfg.scheduler, max_frame),
                    pause_gen: PauseGen::new(
                        cfg.lossless.mode,
                        cfg.lossless.qhigh,
                        cfg.lossless.qlow,
                        cfg.lossless.quanta,
                    ),
                    pause_rx: PauseRx::default(),
                    ctl: VecDeque::with_capacity(cfg.buffers.control_frames),
                    neighbour_cn: None,
                    backlog: 0,
                    counters: PortCounters::default(),
                    cnd: pc.cnd_defense,
                    strip_mask: pc.cnd_defense.strip_mask(None),
                    neighbour_until: Instant::ZERO,
                    advertised: None,
                    remap: std::array::from_fn(|p| {
                        let p = p as u8;
                        if pc.cnd_defense == CndDefense::Edge && cnpv & (1 << p) != 0 {
                            // Validated: an edge port has a non-CNPV priority to remap to.
                            pc.alternate_priority
                                .or_else(|| alternate_priority(cnpv, p))
                                .unwrap_or(p)
                        } else {
                            p
                        }
                    }),
                    stamp_departures: pc.stamp_departures,
                }
            })
            .collect();
        for s in &cfg.fdb.static_entries {
            if let Some(i) = cfg.ports.iter().position(|p| p.name == s.port) {
                fdb.add_static(s.mac, s.vid.unwrap_or(cfg.pvid), PortId(i as u16));
            }
        }
        let rates: Vec<Rate> = cfg
            .ports
            .iter()
            .map(|p| p.rate.unwrap_or(cfg.lossless.nominal_rate))
            .collect();
        let cp_ports: Vec<bool> = cfg
            .ports
            .iter()
            .map(|p| p.cnd_defense != CndDefense::Disabled)
            .collect();
        let line_cost = cfg.shaper.overheads();
        let (cps, cp_slot) = build_cps(&cfg.cp, cfg.mac, &rates, &cp_ports, line_cost, &mut rng);
        let has_edge = cfg.ports.iter().any(|p| p.cnd_defense == CndDefense::Edge);
        // Ports in `auto` mode advertise at the first poll.
        let lldp_due = cfg
            .ports
            .iter()
            .any(|p| p.cnd_defense == CndDefense::Auto)
            .then_some(Instant::ZERO);
        Ok(Bridge {
            pvid: cfg.pvid,
            max_frame: max_frame as usize,
            nominal_rate: cfg.lossless.nominal_rate,
            watchdog: cfg.lossless.watchdog,
            control_frames: cfg.buffers.control_frames,
            drop_at_output: cfg.buffers.on_output_full == OutputFullPolicy::Drop,
            busy: PortSet::new(n, true),
            ports,
            inbufs: (0..n * P)
                .map(|_| {
                    // Lossless mode never drops below the shared size (crate::voq).
                    let alpha = if cfg.lossless.mode == LosslessMode::None {
                        cfg.buffers.voq_alpha
                    } else {
                        0.0
                    };
                    InputBuffer::new(n, cfg.buffers.input.get()).with_alpha(alpha)
                })
                .collect(),
            rings: (0..n * P).map(|_| InputRing::new(n)).collect(),
            outqs: (0..n * P)
                .map(|_| OutputQueue::new(cfg.buffers.output.get()))
                .collect(),
            fdb,
            pool: FramePool::new(),
            events: VecDeque::with_capacity(cfg.event_capacity),
            event_capacity: cfg.event_capacity,
            events_lost: 0,
            last_now: Instant::ZERO,
            next_sweep: Instant::ZERO,
            rng,
            cps,
            cp_slot,
            cp_placement: cfg.cp.placement,
            cnm_priority: cfg.cp.cnm_priority,
            cnm_msdu: cfg.cp.cp_min_header_octets,
            cp_timers: cfg.cp.mode == crate::cp::CpMode::ExplicitRate,
            due_floor: None,
            cp_occupancy: cfg.cp.culprit.uses_occupancy(),
            scratch: Vec::with_capacity(max_frame as usize),
            cp_ports,
            line_cost,
            has_edge,
            lldp_due,
            base_mac: cfg.mac,
            cp_cfg: cfg.cp,
        })
    }

    /// The congestion-point settings in force.
    pub fn cp_config(&self) -> &CpConfig {
        &self.cp_cfg
    }

    /// Replaces the congestion-point settings at run time (see [`CpConfig`], "Changes at run
    /// time"). `cfg` is checked as at load ([`CpConfig::validate`]; errors name `cp.FIELD`) and
    /// nothing changes when it is refused. Scaling parameters change in place; a change of
    /// placement, mode, culprit, CNPVs, flow-table size or FQCN weights rebuilds the CPs
    /// (their sampling state and flow tables start afresh; a CP keeping its CPID keeps its
    /// counters). Frames queued at that moment may carry a flow index of the old tables:
    /// their departure is then accounted against the new table, saturating at zero, which
    /// only blurs occupancy culprits until those frames have left.
    pub fn set_cp_config(&mut self, cfg: CpConfig) -> Result<CpChange, ConfigError> {
        cfg.validate().map_err(|e| e.within("cp"))?;
        if self.has_edge && cfg.cnpv_mask() != self.cp_cfg.cnpv_mask() {
            // Edge ports remap CNPV priorities (802.1Q-2011 32.4.4) by a table built at start.
            return Err(ConfigError::new(
                "cp.cnpv",
                "cannot change at run time on a bridge with CND edge ports",
            ));
        }
        let change = if self.cp_cfg.needs_rebuild(&cfg) {
            let rates: Vec<Rate> = self
                .ports
                .iter()
                .map(|p| p.shaper.rate().unwrap_or(self.nominal_rate))
                .collect();
            let (mut cps, cp_slot) = build_cps(
                &cfg,
                self.base_mac,
                &rates,
                &self.cp_ports,
                self.line_cost,
                &mut self.rng,
            );
            for cp in &mut cps {
                if let Some(old) = self.cps.iter().find(|o| o.id() == cp.id()) {
                    cp.inherit_counters(old);
                }
            }
            self.cps = cps;
            self.cp_slot = cp_slot;
            CpChange::Rebuilt
        } else {
            for cp in &mut self.cps {
                cp.set_params(&cfg);
            }
            CpChange::InPlace
        };
        self.cp_placement = cfg.placement;
        self.cnm_priority = cfg.cnm_priority;
        self.cnm_msdu = cfg.cp_min_header_octets;
        self.cp_timers = cfg.mode == crate::cp::CpMode::ExplicitRate;
        self.cp_occupancy = cfg.culprit.uses_occupancy();
        self.cp_cfg = cfg;
        Ok(change)
    }

    /// [`Bridge::set_cp_config`] with `patch` applied to the settings in force
    /// ([`CpConfig::apply`]); errors name the field under `cp.`.
    pub fn apply_cp_patch(&mut self, patch: &CpPatch) -> Result<CpChange, ConfigError> {
        let mut cfg = self.cp_cfg.clone();
        cfg.apply(patch);
        self.set_cp_config(cfg)
    }

    /// Number of ports.
    pub fn num_ports(&self) -> usize {
        self.ports.len()
    }

    /// The port called `name`.
    pub fn port_id(&self, name: &str) -> Option<PortId> {
        self.ports
            .iter()
            .position(|p| p.name == name)
            .map(|i| PortId(i as u16))
    }

    /// The name of `port`.
    pub fn port_name(&self, port: PortId) -> Option<&str> {
        self.ports.get(port.index()).map(|p| p.name.as_str())
    }

    /// One received frame (its bytes are copied into the bridge's own bounded buffers): the
    /// borrowed form of [`Bridge::handle_frame_buf`], for a driver whose frames live in its
    /// receive ring.
    pub fn handle_frame(&mut self, now: Instant, ingress: PortId, frame: &[u8]) {
        self.receive(now, ingress, Bytes::Shared(frame));
    }

    /// One received frame in a buffer of the caller's. A frame the bridge queues moves into
    /// the queue without a copy and `frame` gets a spare buffer in exchange (contents
    /// unspecified, possibly without capacity) for the caller to receive into next; a frame
    /// the bridge does not keep (dropped, consumed, or flooded: flooding copies) leaves `frame`
    /// as it is, possibly rewritten (an edge port's priority remapping is done in place).
    pub fn handle_frame_buf(&mut self, now: Instant, ingress: PortId, frame: &mut Vec<u8>) {
        self.receive(now, ingress, Bytes::Owned(frame));
    }

    /// After [`Bridge::handle_frame`] or [`Bridge::handle_frame_buf`]: a lower bound on
    /// anything that frame made due, or `None` when it made nothing due. The deadline of
    /// [`Bridge::poll_timeout`] is then at least the earlier of what it was before the frame and
    /// this bound; with `None` it did not move earlier. A driver that keeps its wake-up at or
    /// before the last deadline it read may keep it when the bound is not earlier than the
    /// wake-up, without asking for the deadline again (the simulator does, after each delivery).
    ///
    /// What a received frame can make due, and the bound each gives:
    /// * a frame that becomes the head of its output queue: the instant that queue's port may
    ///   send it (its arrival, its priority's PAUSE, the port's shaper), exactly as
    ///   `poll_timeout` reads it; a frame behind another changes no head, and no deadline;
    /// * a control frame queued (a CNM, PAUSE/PFC, rate feedback), a PAUSE/PFC or LLDP frame
    ///   received, an input buffer of a lossless port changed (its refresh timer), a CP
    ///   arrival when CPs run timers: [`Instant::ZERO`], "anything, even now", so the driver
    ///   reads the deadline again.
    pub fn received_due_floor(&self) -> Option<Instant> {
        self.due_floor
    }

    /// Lowers the bound [`Bridge::received_due_floor`] reports to `t`.
    #[inline]
    fn note_due(&mut self, t: Instant) {
        self.due_floor = Some(self.due_floor.map_or(t, |f| f.min(t)));
    }

    /// [`Bridge::handle_frame`] and [`Bridge::handle_frame_buf`].
    fn receive(&mut self, now: Instant, ingress: PortId, frame: Bytes<'_>) {
        self.last_now = self.last_now.max(now);
        // A CP with a timer may arm it on any arrival.
        self.due_floor = self.cp_timers.then_some(Instant::ZERO);
        let i = ingress.index();
        let Some(port) = self.ports.get_mut(i) else {
            return;
        };
        let len = frame.bytes().len();
        port.counters.rx_frames += 1;
        port.counters.rx_bytes += len as u64;
        if !port.up {
            self.drop_frame(now, ingress, None, DropReason::PortDown);
            return;
        }
        if len > self.max_frame {
            self.drop_frame(now, ingress, None, DropReason::TooLong);
            return;
        }
        let c = match classify(frame.bytes(), port.default_priority, self.pvid) {
            Ok(c) => c,
            Err(r) => {
                self.drop_frame(now, ingress, None, r);
                return;
            }
        };
        if let Some(mc) = c.mac_control {
            // PAUSE/PFC received: the port's transmitter stops, and its timers run.
            self.busy.insert(i);
            self.note_due(Instant::ZERO);
            self.mac_control(now, i, &mc);
            return;
        }
        if is_reserved_group(c.dst) {
            // LLDP: a neighbour entry to expire, maybe an LLDPDU to send.
            self.busy.insert(i);
            self.note_due(Instant::ZERO);
            self.reserved_group(now, i, frame.bytes(), &c);
            return;
        }
        if c.src.is_unicast() {
            self.fdb.learn(now, c.src, c.vid, ingress);
        }
        let mut p = usize::from(c.priority);
        // An edge port keeps frames from outside the domain out of the CNPV queues; a tagged
        // frame carries its new priority in the PCP (802.1Q clause 32.4, CND defence).
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut frame = frame;
        let q = usize::from(self.ports[i].remap[p]);
        if q != p {
            p = q;
            self.ports[i].counters.cn_remapped += 1;
            if let Some(off) = c.vlan_offset {
                let buf = match frame {
                    Bytes::Owned(ref mut b) => &mut **b,
                    Bytes::Shared(b) => {
                        scratch.clear();
                        scratch.extend_from_slice(b);
                        &mut scratch
                    }
                };
                // walk() checked the tag: the TCI follows the TPID.
                if let Some(b) = buf.get_mut(off + 2) {
                    *b = (*b & 0x1f) | ((q as u8) << 5);
                }
                if let Bytes::Shared(_) = frame {
                    frame = Bytes::Shared(&scratch);
                }
            }
        }
        self.forward(now, i, p, frame, &c);
        self.scratch = scratch;
    }

    /// The forwarding decision for a received frame, queued at priority `p`.
    #[inline]
    fn forward(&mut self, now: Instant, i: usize, p: usize, frame: Bytes<'_>, c: &Classified) {
        let ingress = PortId(i as u16);
        match decide(&self.fdb, now, ingress, c.dst, c.vid) {
            Decision::Unicast(o) => {
                if self.storm_shut(o.index(), p) {
                    self.drop_frame(now, o, Some(p), DropReason::PauseStorm);
                } else if self.ports[o.index()].up {
                    self.enqueue(now, i, p, o.index(), frame, c);
                } else {
                    self.drop_frame(now, ingress, Some(p), DropReason::PortDown);
                }
            }
            Decision::Filter => {
                self.drop_frame(now, ingress, Some(p), DropReason::NoRoute);
            }
            Decision::Flood => {
                self.ports[i].counters.flooded += 1;
                let mut any = false;
                for o in 0..self.ports.len() {
                    if o != i && self.ports[o].up {
                        any = true;
                        if self.storm_shut(o, p) {
                            self.drop_frame(now, PortId(o as u16), Some(p), DropReason::PauseStorm);
                        } else {
                            // Every copy but none of the caller's buffer.
                            self.enqueue(now, i, p, o, Bytes::Shared(frame.bytes()), c);
                        }
                    }
                }
                if !any {
                    self.drop_frame(now, ingress, Some(p), DropReason::NoRoute);
                }
            }
        }
    }

    /// The storm watchdog has shut priority `p` of output `o`.
    #[inline]
    fn storm_shut(&self, o: usize, p: usize) -> bool {
        self.ports[o].pause_rx.storm() & (1 << p) != 0
    }

    /// Runs the storm watchdog of output `o` at `now` ([`crate::pause`]): a priority entering a
    /// storm has its output queue and the VOQs for it emptied (counted `pause_storm`), one
    /// leaving it is served again.
    fn run_watchdog(&mut self, now: Instant, o: usize) {
        if self.watchdog == Duration::ZERO {
            return;
        }
        let c = self.ports[o].pause_rx.watchdog(now, self.watchdog);
        if c.started != 0 {
            let mut flushed = 0;
            for p in (0..P).filter(|p| c.started & (1 << p) != 0) {
                flushed += self.flush_output(now, o, p);
            }
            let pt = &mut self.ports[o];
            pt.counters.pause_storms += u64::from(c.started.count_ones());
            pt.counters.drops.pause_storm += flushed;
            self.event(Event::PauseStorm {
                at: now,
                port: PortId(o as u16),
                priorities: c.started,
                on: true,
                flushed,
            });
        }
        if c.ended != 0 {
            self.event(Event::PauseStorm {
                at: now,
                port: PortId(o as u16),
                priorities: c.ended,
                on: false,
                flushed: 0,
            });
        }
    }

    /// Empties the output queue (`o`, `p`) and the VOQs for `o` at priority `p` of every input;
    /// returns the frames dropped (the caller counts them). Inputs whose buffers shrink get
    /// their XON check.
    fn flush_output(&mut self, now: Instant, o: usize, p: usize) -> u64 {
        let r = o * P + p;
        let mut dropped = 0u64;
        while let Some(mut f) = self.outqs[r].pop() {
            self.outqs[r].counters.drops += 1;
            self.cp_departure(r, &mut f);
            self.pool.recycle(f);
            dropped += 1;
        }
        self.ports[o].backlog &= !(1 << p);
        for j in 0..self.ports.len() {
            let q = j * P + p;
            let mut n = 0;
            while let Some(mut f) = self.inbufs[q].pop(o) {
                self.cp_departure(q, &mut f);
                self.pool.recycle(f);
                n += 1;
            }
            if n > 0 {
                let ib = &mut self.inbufs[q];
                ib.counters.drops += n;
                dropped += n;
                let bytes = ib.bytes();
                self.after_input_dequeue(now, j, p, bytes);
            }
        }
        self.rings[r] = InputRing::new(self.ports.len());
        dropped
    }

    /// Frames ready to go on the wire now. `tx` returns false if that port cannot take a frame
    /// right now (ring full); the frame stays queued and that port is skipped for this call.
    /// The borrowed form of [`Bridge::poll_transmit_buf`].
    pub fn poll_transmit(&mut self, now: Instant, tx: &mut dyn FnMut(PortId, &[u8]) -> bool) {
        self.poll_transmit_buf(now, &mut |port, frame| tx(port, frame));
    }

    /// Frames ready to go on the wire now, each in the bridge's buffer: `tx` may keep the
    /// frame's buffer by swapping in a spare of its own (any `Vec`; the bridge reuses it), so
    /// a driver that recycles buffers moves frames without copying them. `tx` returns false
    /// if that port cannot take a frame right now (ring full); it must then leave the buffer
    /// as it was: the frame stays queued and that port is skipped for this call.
    pub fn poll_transmit_buf(
        &mut self,
        now: Instant,
        tx: &mut dyn FnMut(PortId, &mut Vec<u8>) -> bool,
    ) {
        self.last_now = self.last_now.max(now);
        if now >= self.next_sweep {
            self.fdb.age(now);
            self.next_sweep = now + FDB_SWEEP;
        }
        if self.cp_timers {
            self.run_cp_timers(now);
        }
        if self.lldp_due.is_some() {
            self.run_lldp(now);
        }
        // Serving a port may give another work (a PAUSE or CNM for an input): the flags are
        // read as the loop reaches each port, as the ports themselves were before.
        let mut from = 0;
        while let Some(o) = self.busy.next_from(from) {
            self.transmit_port(now, o, tx);
            if self.ports[o].idle() {
                self.busy.remove(o);
            }
            from = o + 1;
        }
    }

    /// Earliest instant at which `poll_transmit` or the internal timers have work (shaper
    /// departure, delay line, PAUSE expiry or refresh), `None` if idle. An instant at or before
    /// the last `now` means "poll again now" (e.g. after `tx` refused a frame).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut best: Option<Instant> = None;
        let mut consider = |t: Instant| {
            best = Some(best.map_or(t, |b| b.min(t)));
        };
        if self.cp_timers {
            for cp in &self.cps {
                if let Some(t) = cp.timer_due() {
                    consider(t);
                }
            }
        }
        if let Some(t) = self.lldp_due {
            consider(t);
        }
        for o in self.busy.iter() {
            let port = &self.ports[o];
            if let Some(t) = port.pause_gen.refresh_at() {
                consider(t);
            }
            if port.neighbour_cn.is_some() && port.cnd == CndDefense::Auto {
                consider(port.neighbour_until);
            }
            if let Some(t) = port.pause_rx.watchdog_due(self.watchdog) {
                consider(t);
            }
            if !port.up {
                continue;
            }
            if !port.ctl.is_empty() {
                consider(self.last_now);
            }
            if let Some(t) = port.delay.next_due() {
                consider(t);
            }
            if port.backlog != 0 {
                let mut ready = Instant::MAX;
                let mut backlog = port.backlog;
                while backlog != 0 {
                    let p = backlog.trailing_zeros() as usize;
                    backlog &= backlog - 1;
                    if let Some(f) = self.outqs[o * P + p].front() {
                        ready = ready.min(port.head_ready(p, f.ts));
                    }
                }
                if ready != Instant::MAX {
                    consider(ready);
                }
            }
        }
        best
    }

    /// Changes the emulated line rate of `port` (`None` = unshaped). The frame being
    /// serialised finishes at the old rate. A zero rate is ignored (take the port down with
    /// [`Bridge::set_port_up`] instead).
    pub fn set_port_rate(&mut self, now: Instant, port: PortId, rate: Option<Rate>) {
        let Some(pt) = self.ports.get_mut(port.index()) else {
            return;
        };
        self.busy.insert(port.index());
        if rate == Some(Rate::ZERO) {
            return;
        }
        pt.shaper.set_rate(now, rate);
        let c = rate.unwrap_or(self.nominal_rate);
        for cp in self.cps.iter_mut().filter(|cp| cp.port() == port) {
            cp.set_capacity(c);
        }
        self.event(Event::RateChange {
            at: now,
            port,
            rate,
        });
    }

    /// Changes the propagation delay of `port`.
    pub fn set_port_delay(&mut self, now: Instant, port: PortId, delay: Duration) {
        let Some(pt) = self.ports.get_mut(port.index()) else {
            return;
        };
        self.busy.insert(port.index());
        pt.delay.set_delay(delay);
        self.event(Event::DelayChange {
            at: now,
            port,
            delay,
        });
    }

    /// Marks `port` up or down. Going down drops everything queued for it (counted
    /// `port_down`), flushes its learned FDB entries (802.1Q-2018 clause 8.8.3 leaves this to
    /// the implementation; a moved station is relearned at once) and forgets PAUSE state.
    pub fn set_port_up(&mut self, now: Instant, port: PortId, up: bool) {
        let o = port.index();
        let Some(pt) = self.ports.get_mut(o) else {
            return;
        };
        if pt.up == up {
            return;
        }
        // Inputs draining their frames for `o` may send XON: every port is looked at.
        self.busy.fill();
        pt.up = up;
        // Whatever the neighbour said is void once the link goes down (802.1AB clause
        // 9.2.7.7: the remote systems' data of a port whose link is lost are deleted).
        pt.neighbour_cn = None;
        self.event(Event::Link { at: now, port, up });
        if up {
            self.ports[o].shaper.reset(now);
            self.neighbour_changed(now, o, true);
            return;
        }
        self.neighbour_changed(now, o, false);
        let mut dropped = 0u64;
        for p in 0..P {
            let r = o * P + p;
            while let Some(mut f) = self.outqs[r].pop() {
                self.outqs[r].counters.drops += 1;
                self.cp_departure(r, &mut f);
                self.pool.recycle(f);
                dropped += 1;
            }
            for j in 0..self.ports.len() {
                let q = j * P + p;
                let mut n = 0;
                while let Some(mut f) = self.inbufs[q].pop(o) {
                    self.cp_departure(q, &mut f);
                    self.pool.recycle(f);
                    n += 1;
                }
                let ib = &mut self.inbufs[q];
                ib.counters.drops += n;
                dropped += n;
                let bytes = ib.bytes();
                if n > 0 {
                    self.after_input_dequeue(now, j, p, bytes);
                }
            }
            self.rings[r] = InputRing::new(self.ports.len());
        }
        let pt = &mut self.ports[o];
        pt.backlog = 0;
        while let Some(f) = pt.ctl.pop_front() {
            self.pool.recycle(f);
            dropped += 1;
        }
        while let Some(f) = pt.delay.pop() {
            self.pool.recycle(f);
            dropped += 1;
        }
        pt.counters.drops.port_down += dropped;
        pt.pause_rx = PauseRx::default();
        pt.pause_gen.reset();
        self.fdb.flush_port(port);
        if dropped > 0 {
            self.event(Event::Drop {
                at: now,
                port,
                priority: None,
                reason: DropReason::PortDown,
            });
        }
    }

    /// Reports that `port`'s interface refused for good a frame of `len` octets that
    /// [`Bridge::poll_transmit`] handed out and `tx` accepted (an I/O error that is not the
    /// link going away, such as a frame longer than the interface's MTU): it is taken back
    /// out of the port's transmit counters and counted as a [`DropReason::TxRefused`] drop, so
    /// `tx_frames` holds only frames the interface took.
    pub fn tx_refused(&mut self, now: Instant, port: PortId, len: usize) {
        let Some(pt) = self.ports.get_mut(port.index()) else {
            return;
        };
        self.busy.insert(port.index());
        pt.counters.tx_frames = pt.counters.tx_frames.saturating_sub(1);
        pt.counters.tx_bytes = pt.counters.tx_bytes.saturating_sub(len as u64);
        self.drop_frame(now, port, None, DropReason::TxRefused);
    }

    /// Removes FDB entries older than the ageing time (also done once a second inside
    /// `poll_transmit`; lookups never use expired entries).
    pub fn age_fdb(&mut self, now: Instant) {
        self.fdb.age(now);
    }

    /// Snapshot of every counter.
    pub fn stats(&self) -> BridgeStats {
        let now = self.last_now;
        let ports = self
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| PortStats {
                name: p.name.clone(),
                index: i as u16,
                up: p.up,
                rate: p.shaper.rate(),
                delay: p.delay.delay(),
                rx_frames: p.counters.rx_frames,
                tx_frames: p.counters.tx_frames,
                rx_bytes: p.counters.rx_bytes,
                tx_bytes: p.counters.tx_bytes,
                drops: p.counters.drops.total(),
                pause_tx: p.counters.pause_tx,
                pause_rx: p.counters.pause_rx,
                cnm_tx: p.counters.cnm_tx,
                rate_fb_tx: p.counters.rate_fb_tx,
                flooded: p.counters.flooded,
                cn_remapped: p.counters.cn_remapped,
                cn_tag_stripped: p.counters.cn_tag_stripped,
                lldp_rx: p.counters.lldp_rx,
                lldp_tx: p.counters.lldp_tx,
                cnd_defense: p.cnd,
                cn_tag_kept: !p.strip_mask,
                pause_storms: p.counters.pause_storms,
                storm_priorities: p.pause_rx.storm(),
                neighbour_cn: p.neighbour_cn,
                drop_reasons: p.counters.drops,
                pause_asserted: p.pause_gen.asserted(),
                paused_by_peer: p.pause_rx.paused_mask(now),
                in_flight_bytes: p.delay.bytes(),
            })
            .collect();
        let mut queues = Vec::with_capacity(self.inbufs.len() * 2);
        let q = |port: &Port, p: usize, kind, bytes, max, frames, c: &QueueCounters| QueueStats {
            port: port.name.clone(),
            priority: p as u8,
            kind,
            bytes,
            max_bytes: max,
            frames,
            drops: c.drops,
            enqueued: c.enq_frames,
            enqueued_bytes: c.enq_bytes,
            dequeued: c.deq_frames,
            peak_bytes: c.peak_bytes,
        };
        for (i, port) in self.ports.iter().enumerate() {
            for p in 0..P {
                let b = &self.inbufs[i * P + p];
                queues.push(q(
                    port,
                    p,
                    QueueKind::Input,
                    b.bytes(),
                    b.max(),
                    b.frames() as u64,
                    &b.counters,
                ));
            }
        }
        for (o, port) in self.ports.iter().enumerate() {
            for p in 0..P {
                let b = &self.outqs[o * P + p];
                queues.push(q(
                    port,
                    p,
                    QueueKind::Output,
                    b.bytes(),
                    b.max(),
                    b.frames() as u64,
                    &b.counters,
                ));
            }
        }
        BridgeStats {
            at: now,
            ports,
            queues,
            fdb: self.fdb.stats(),
            cps: self.cp_stats(),
            buffers_allocated: self.pool.allocated(),
            events_lost: self.events_lost,
        }
    }

    /// The trace's `queues` line for the occupancies now ([`QueueTracker::line`] over the
    /// queues of [`Bridge::stats`], input buffers then output queues, by port then priority),
    /// built without taking the snapshot: only the entries the line lists are made.
    pub fn queues_line(
        &self,
        tracker: &mut QueueTracker,
        t: u64,
        node: Option<&str>,
    ) -> Option<Queues> {
        let inputs = self.inbufs.len();
        let bytes = |k: usize| match k.checked_sub(inputs) {
            None => self.inbufs[k].bytes(),
            Some(o) => self.outqs[o].bytes(),
        };
        let entry = |k: usize, bytes: u64| {
            let (kind, q) = match k.checked_sub(inputs) {
                None => (QueueKind::Input, k),
                Some(o) => (QueueKind::Output, o),
            };
            QueueEntry {
                port: self.ports[q / P].name.clone(),
                priority: (q % P) as u8,
                kind: kind.name().to_string(),
                bytes,
            }
        };
        tracker.line_by(t, node, inputs + self.outqs.len(), bytes, entry)
    }

    /// Snapshot of the congestion points, by port then priority.
    pub fn cp_stats(&self) -> Vec<CpStats> {
        self.cps
            .iter()
            .map(|cp| {
                let q = cp.port().index() * P + usize::from(cp.priority());
                let qlen = match self.cp_placement {
                    Placement::Input => self.inbufs[q].bytes(),
                    _ => self.outqs[q].bytes(),
                };
                let name = self.ports[cp.port().index()].name.as_str();
                cp.stats(name, qlen)
            })
            .collect()
    }

    /// The filtering database.
    pub fn fdb_entries(&self) -> Vec<FdbEntryView> {
        self.fdb.entries(self.last_now)
    }

    /// Hands every recorded event to `f`, oldest first, and clears the log.
    pub fn drain_events(&mut self, f: &mut dyn FnMut(&Event)) {
        while let Some(e) = self.events.pop_front() {
            f(&e);
        }
    }

    /// Occupancy of the input buffer of (`port`, `priority`) in octets.
    #[inline]
    pub fn input_queue_bytes(&self, port: PortId, priority: u8) -> u64 {
        self.inbufs
            .get(port.index() * P + usize::from(priority & 7))
            .map_or(0, InputBuffer::bytes)
    }

    /// Occupancy of the output queue of (`port`, `priority`) in octets.
    #[inline]
    pub fn output_queue_bytes(&self, port: PortId, priority: u8) -> u64 {
        self.outqs
            .get(port.index() * P + usize::from(priority & 7))
            .map_or(0, OutputQueue::bytes)
    }

    /// Occupancy of `port`'s output queues and of its input buffers, each summed over the eight
    /// priorities, in octets: `(output, input)`; `(0, 0)` for a port the bridge does not have.
    /// The simulator samples every port this way each 10 µs for its queue histograms, where
    /// sixteen calls of [`Bridge::output_queue_bytes`] and [`Bridge::input_queue_bytes`] per
    /// port had cost about 1 % of its instructions.
    #[inline]
    pub fn port_queue_bytes(&self, port: PortId) -> (u64, u64) {
        let r = port.index() * P..(port.index() + 1) * P;
        let out = self
            .outqs
            .get(r.clone())
            .map_or(0, |qs| qs.iter().map(OutputQueue::bytes).sum());
        let inp = self
            .inbufs
            .get(r)
            .map_or(0, |bs| bs.iter().map(InputBuffer::bytes).sum());
        (out, inp)
    }

    // ----- internals -------------------------------------------------------------------

    /// Appends `bytes` (a copy, or the caller's buffer itself) to the VOQ for `o` in input
    /// buffer (`i`, `p`), then lets the fabric move what fits. The frame keeps what of its
    /// classification `c` later stages need (CN exemption, CN-TAG offset).
    #[inline]
    fn enqueue(
        &mut self,
        now: Instant,
        i: usize,
        p: usize,
        o: usize,
        bytes: Bytes<'_>,
        c: &Classified,
    ) {
        let exempt = c.cn_exempt;
        let ib = &mut self.inbufs[i * P + p];
        if !ib.admits(o, bytes.bytes().len()) {
            ib.counters.drops += 1;
            let qlen = ib.bytes();
            self.drop_frame(now, PortId(i as u16), Some(p), DropReason::InputFull);
            if !exempt {
                let b = bytes.bytes();
                self.cp_dropped_arrival(now, i * P + p, Placement::Input, b, i as u16, qlen);
            }
            return;
        }
        let f = match bytes {
            Bytes::Shared(b) => self.pool.frame(b, now, i as u16),
            Bytes::Owned(b) => self.pool.take(b, now, i as u16),
        };
        let Some(mut f) = f else {
            self.drop_frame(now, PortId(i as u16), Some(p), DropReason::TooLong);
            return;
        };
        f.cn_exempt = exempt;
        // The offset is within the headers walk() accepts (at most two VLAN tags): it fits.
        f.cn_tag = c
            .cn_tag_offset
            .and_then(|o| u16::try_from(o).ok())
            .unwrap_or(0);
        // Cut-through: no input has a frame waiting for (`o`, `p`) (its ring is empty, and so
        // is every VOQ for it) and nothing watches this input buffer's contents (no PAUSE
        // thresholds, no input CP), so the frame would enter the VOQ and `fabric` would take
        // it straight out again, into the output queue if it fits, or dropped (drop mode).
        // It goes there directly, counted through the input buffer ([`InputBuffer::pass`]).
        // If it neither fits nor may be dropped, it waits in its VOQ as usual.
        let r = o * P + p;
        if self.rings[r].is_empty()
            && self.cp_placement != Placement::Input
            && !self.ports[i].pause_gen.enabled()
        {
            let fits = self.outqs[r].fits(f.len());
            if fits || self.drop_at_output {
                self.inbufs[i * P + p].pass(f.len());
                self.enter_output(now, o, p, f, fits);
                return;
            }
        }
        let ib = &mut self.inbufs[i * P + p];
        let was_empty = ib.push(o, f);
        let qlen = ib.bytes();
        if was_empty {
            self.rings[o * P + p].join(i as u16);
        }
        self.input_enqueued(now, i, p, o, qlen);
        self.fabric(now, o, p);
    }

    /// Input congestion point hook: a frame entered the VOQ for `o` in the input buffer of
    /// (`i`, `p`), which now holds `qlen` octets. Lossless mode checks Qhigh here; an input
    /// CP samples here.
    #[inline]
    fn input_enqueued(&mut self, now: Instant, i: usize, p: usize, o: usize, qlen: u64) {
        if self.ports[i].pause_gen.enabled() {
            self.busy.insert(i);
            self.note_due(Instant::ZERO);
            if let PauseAction::Send { on } = self.ports[i].pause_gen.update(p, qlen) {
                self.send_pause(now, i, p, on);
            }
        }
        // Tested here, inline: the common case (no input CP) costs no call.
        if self.cp_placement == Placement::Input {
            self.cp_enqueued(now, QueueRef::Input(i * P + p, o), qlen);
        }
    }

    /// Output congestion point hook: a frame entered the output queue of (`o`, `p`), which now
    /// holds `qlen` octets. The standard (output) CP samples here.
    #[inline]
    fn output_enqueued(&mut self, now: Instant, o: usize, p: usize, qlen: u64) {
        if self.cp_placement == Placement::Output {
            self.cp_enqueued(now, QueueRef::Output(o * P + p), qlen);
        }
    }

    /// The frame at the back of `at` (the one just enqueued there), if any. An associated
    /// function over the two queue sets, so the caller can keep borrowing the CPs and the RNG.
    #[inline]
    fn back_of<'a>(
        inbufs: &'a [InputBuffer],
        outqs: &'a [OutputQueue],
        at: QueueRef,
    ) -> Option<&'a Frame> {
        match at {
            QueueRef::Input(q, o) => inbufs[q].back(o),
            QueueRef::Output(q) => outqs[q].back(),
            QueueRef::Dropped(..) => None,
        }
    }

    /// The congestion point of the queue `at` (if the configured placement puts one there)
    /// sees the arrival of the frame just enqueued at its back, with the queue now holding
    /// `qlen` octets; occupancy culprits tag the frame with its flow; `Fb < 0` sends CNMs.
    /// Inlined into each hook, where `at`'s kind is known, so the matches on it fold away.
    #[inline(always)]
    fn cp_enqueued(&mut self, now: Instant, at: QueueRef, qlen: u64) {
        let (placement, q) = match at {
            QueueRef::Input(q, _) => (Placement::Input, q),
            QueueRef::Output(q) => (Placement::Output, q),
            QueueRef::Dropped(..) => return,
        };
        if self.cp_placement != placement {
            return;
        }
        let k = self.cp_slot[q];
        if k == NO_CP {
            return;
        }
        let Some(f) = Self::back_of(&self.inbufs, &self.outqs, at) else {
            return;
        };
        if f.cn_exempt {
            return;
        }
        let k = usize::from(k);
        let a = Arrival {
            now,
            frame: &f.buf,
            qlen,
            ingress: PortId(f.ingress),
        };
        let fb = self.cps[k].arrival(&a, &mut self.rng);
        if self.cp_occupancy {
            let back = match at {
                QueueRef::Input(q, o) => self.inbufs[q].back_mut(o),
                QueueRef::Output(q) => self.outqs[q].back_mut(),
                QueueRef::Dropped(..) => None,
            };
            if let Some(f) = back {
                f.flow = self.cps[k].last_flow();
            }
        }
        if let Some(fb) = fb {
            self.congestion_feedback(now, k, at, fb);
        }
    }

    /// A frame that reached the CP's queue but was dropped because the queue was full is
    /// still an arrival for the congestion point: QCN samples every arrival, after the enqueue
    /// decision (802.1Q-2011 32.8; QCN-REFERENCE §2), so a full queue keeps producing CNMs at
    /// its arrival rate rather than at its (much slower) admission rate. The CNM is built from
    /// the dropped frame itself.
    #[cold]
    #[inline(never)]
    fn cp_dropped_arrival(
        &mut self,
        now: Instant,
        q: usize,
        placement: Placement,
        frame: &[u8],
        ingress: u16,
        qlen: u64,
    ) {
        if self.cp_placement != placement {
            return;
        }
        let k = self.cp_slot[q];
        if k == NO_CP {
            return;
        }
        let k = usize::from(k);
        let a = Arrival {
            now,
            frame,
            qlen,
            ingress: PortId(ingress),
        };
        let fb = self.cps[k].arrival(&a, &mut self.rng);
        // The frame never occupies the queue: undo the occupancy the CP just counted.
        let flow = self.cps[k].last_flow();
        if flow != NO_FLOW {
            self.cps[k].departure(flow, frame.len());
        }
        if let Some(fb) = fb {
            let mut hdr = [0u8; HDR_LEN];
            let n = frame.len().min(HDR_LEN);
            hdr[..n].copy_from_slice(&frame[..n]);
            self.congestion_feedback(now, k, QueueRef::Dropped(hdr, n, ingress), fb);
        }
    }

    /// CP `k` sampled the frame last enqueued at `at` with `Fb < 0`: builds one CNM per target
    /// the CP chose (802.1Q-2011 32.8, 33.4) — from the sampled frame (standard) or from the
    /// stored header of the culprit flow (FQCN, occupancy culprits) — and queues it on the
    /// control queue of the port that frame arrived on.
    #[cold]
    #[inline(never)]
    fn congestion_feedback(&mut self, now: Instant, k: usize, at: QueueRef, fb: Feedback) {
        let now = now.max(self.last_now);
        for t in 0..self.cps[k].targets().len() {
            let target = self.cps[k].targets()[t];
            let mut hdr = [0u8; HDR_LEN];
            let (len, egress) = if target.flow == NO_FLOW {
                if let QueueRef::Dropped(h, n, ingress) = at {
                    self.send_cnm(now, k, &h[..n], usize::from(ingress), target.qntz_fb, fb);
                    continue;
                }
                let Some(f) = Self::back_of(&self.inbufs, &self.outqs, at) else {
                    continue;
                };
                let n = f.len().min(HDR_LEN);
                hdr[..n].copy_from_slice(&f.buf[..n]);
                (n, usize::from(f.ingress))
            } else {
                let Some(e) = self.cps[k].flows().and_then(|t| t.get(target.flow)) else {
                    continue;
                };
                let h = e.header();
                hdr[..h.len()].copy_from_slice(h);
                (h.len(), e.ingress.index())
            };
            self.send_cnm(now, k, &hdr[..len], egress, target.qntz_fb, fb);
        }
    }

    /// Builds the CNM of CP `k` about `sampled` (at least its first 86 octets) with `qntz_fb`
    /// and queues it on port `egress`.
    fn send_cnm(
        &mut self,
        now: Instant,
        k: usize,
        sampled: &[u8],
        egress: usize,
        qntz_fb: u8,
        fb: Feedback,
    ) {
        let cp = &mut self.cps[k];
        let Some(pt) = self.ports.get(egress).filter(|pt| pt.up) else {
            cp.cnm_dropped();
            return;
        };
        let params = CnmParams {
            cp_mac: pt.mac,
            cpid: cp.id(),
            qntz_fb,
            q_offset: quantize_queue(fb.q_offset),
            q_delta: quantize_queue(fb.q_delta),
            cnm_priority: self.cnm_priority,
            default_priority: pt.default_priority,
            max_msdu: self.cnm_msdu,
        };
        let mut buf = [0u8; CNM_BUF];
        let Ok(n) = build_cnm(sampled, &params, &mut buf) else {
            cp.cnm_dropped();
            return;
        };
        let mut dst = [0u8; 6];
        dst.copy_from_slice(&buf[..6]);
        let dst = EthernetAddress(dst);
        let (cpid, cp_port, priority) = (cp.id(), cp.port(), cp.priority());
        let cnm = &buf[..n];
        if self.queue_control(now, egress, n, |b| {
            b.copy_from_slice(cnm);
            true
        }) {
            self.cps[k].cnm_sent(dst);
            self.ports[egress].counters.cnm_tx += 1;
            self.event(Event::Cnm {
                at: now,
                port: PortId(egress as u16),
                priority,
                cp_port,
                dst,
                qntz_fb: params.qntz_fb,
                q_offset: params.q_offset,
                q_delta: params.q_delta,
                cpid,
            });
        } else {
            self.cps[k].cnm_dropped();
        }
    }

    /// A frame tagged with a flow of the CP of queue `q` left that queue (occupancy culprits).
    #[inline]
    fn cp_departure(&mut self, q: usize, f: &mut crate::pool::Frame) {
        if f.flow == NO_FLOW {
            return;
        }
        let k = self.cp_slot[q];
        if let Some(cp) = self.cps.get_mut(usize::from(k)) {
            cp.departure(f.flow, f.len());
        }
        f.flow = NO_FLOW;
    }

    /// Runs the CPs' timers due at `now` (explicit-rate measurement intervals) and sends the
    /// advertised rate to the sources active in each interval that ended.
    fn run_cp_timers(&mut self, now: Instant) {
        for k in 0..self.cps.len() {
            if !self.cps[k].timer_due().is_some_and(|t| t <= now) {
                continue;
            }
            let q = self.cps[k].port().index() * P + usize::from(self.cps[k].priority());
            let qlen = match self.cp_placement {
                Placement::Input => self.inbufs[q].bytes(),
                _ => self.outqs[q].bytes(),
            };
            let Some(rate) = self.cps[k].timer(now, qlen) else {
                continue;
            };
            let slots = self.cps[k].flows().map_or(0, |t| t.entries().len());
            for i in 0..slots {
                self.send_rate_feedback(now, k, i as u16, rate);
            }
            self.cps[k].end_interval();
        }
    }

    /// Sends the advertised `rate` of CP `k` to flow `flow` if it sent frames in the interval:
    /// a rate-feedback message (EtherType 0x88B5, `cnm_proto::wire::rate_feedback`) addressed
    /// to the flow's source, from the egress port's MAC, VLAN tagged like the flow with PCP =
    /// the CNM priority, out of the port the flow arrives on.
    fn send_rate_feedback(&mut self, now: Instant, k: usize, flow: u16, rate: Rate) {
        let cp = &self.cps[k];
        let Some(e) = cp.flows().and_then(|t| t.get(flow)).filter(|e| e.bytes > 0) else {
            return;
        };
        let h = e.header();
        if h.len() < 14 {
            return;
        }
        let egress = e.ingress.index();
        let tpid = u16::from_be_bytes([h[12], h[13]]);
        let vlan = (tpid == 0x8100 || tpid == 0x88A8).then_some(VlanInfo {
            pcp: self.cnm_priority,
            dei: false,
            vid: e.id.vid,
        });
        let mut encap_dst = [0u8; 6];
        encap_dst.copy_from_slice(&h[..6]);
        let repr = RateFeedbackRepr {
            version: 0,
            encap_priority: cp.priority(),
            cpid: cp.id(),
            rate,
            encap_dst: EthernetAddress(encap_dst),
        };
        let dst = e.id.src;
        let (cpid, cp_port, priority) = (cp.id(), cp.port(), cp.priority());
        let Some(pt) = self.ports.get(egress).filter(|pt| pt.up) else {
            self.cps[k].rate_fb_dropped();
            return;
        };
        let src = pt.mac;
        let mut buf = [0u8; CNM_BUF];
        let Ok(n) = build_rate_feedback_frame(dst, src, vlan, &repr, &mut buf) else {
            self.cps[k].rate_fb_dropped();
            return;
        };
        let msg = &buf[..n];
        if self.queue_control(now, egress, n, |b| {
            b.copy_from_slice(msg);
            true
        }) {
            self.cps[k].rate_fb_sent(dst);
            self.ports[egress].counters.rate_fb_tx += 1;
            self.event(Event::RateFeedback {
                at: now,
                port: PortId(egress as u16),
                priority,
                cp_port,
                dst,
                rate,
                cpid,
            });
        } else {
            self.cps[k].rate_fb_dropped();
        }
    }

    /// The input buffer (`j`, `p`) shrank to `bytes`: lossless mode checks Qlow. Without
    /// lossless mode port `j` gets no work from it (see "Cost" above).
    #[inline]
    fn after_input_dequeue(&mut self, now: Instant, j: usize, p: usize, bytes: u64) {
        if !self.ports[j].pause_gen.enabled() {
            return;
        }
        self.busy.insert(j);
        self.note_due(Instant::ZERO);
        if let PauseAction::Send { on } = self.ports[j].pause_gen.update(p, bytes) {
            self.send_pause(now, j, p, on);
        }
    }

    /// Moves frames from the VOQs for `o` into the output queue (`o`, `p`), round-robin across
    /// inputs, while the head frame of the input whose turn it is fits. Moved frames are
    /// stamped `at` (the instant the room appeared).
    #[inline]
    fn fabric(&mut self, at: Instant, o: usize, p: usize) {
        let r = o * P + p;
        while let Some(j) = self.rings[r].current() {
            let j = usize::from(j);
            let ib = &mut self.inbufs[j * P + p];
            let Some(len) = ib.head_len(o) else {
                self.rings[r].advance(false);
                continue;
            };
            let fits = self.outqs[r].fits(len);
            if !fits && !self.drop_at_output {
                break;
            }
            let Some(mut f) = ib.pop(o) else {
                break;
            };
            let still = !ib.voq_is_empty(o);
            let in_bytes = ib.bytes();
            if f.flow != NO_FLOW {
                self.cp_departure(j * P + p, &mut f);
            }
            self.rings[r].advance(still);
            self.enter_output(at, o, p, f, fits);
            self.after_input_dequeue(at, j, p, in_bytes);
        }
    }

    /// A frame out of its VOQ (or cut through it, [`Bridge::enqueue`]) enters the output queue
    /// (`o`, `p`) stamped `at` if it `fits`, or is dropped (`buffers.on_output_full = "drop"`).
    #[inline]
    fn enter_output(&mut self, at: Instant, o: usize, p: usize, mut f: Frame, fits: bool) {
        let r = o * P + p;
        if !fits {
            // Output-queued drop-tail (`buffers.on_output_full = "drop"`).
            if !f.cn_exempt {
                let qlen = self.outqs[r].bytes();
                self.cp_dropped_arrival(at, r, Placement::Output, &f.buf, f.ingress, qlen);
            }
            self.pool.recycle(f);
            self.outqs[r].counters.drops += 1;
            self.drop_frame(at, PortId(o as u16), Some(p), DropReason::OutputFull);
            return;
        }
        f.ts = at;
        let q = &mut self.outqs[r];
        let head = q.is_empty();
        q.push(f);
        let qlen = q.bytes();
        let port = &mut self.ports[o];
        port.backlog |= 1 << p;
        if head {
            let ready = port.head_ready(p, at);
            self.note_due(ready);
        }
        self.busy.insert(o);
        self.output_enqueued(at, o, p, qlen);
    }

    /// Queues a control frame of `len` octets built by `build` to leave `port` ahead of data.
    /// Returns false (and counts a `control_full` drop) if the port's control queue is full.
    pub(crate) fn queue_control(
        &mut self,
        now: Instant,
        port: usize,
        len: usize,
        build: impl FnOnce(&mut [u8]) -> bool,
    ) -> bool {
        if self.ports[port].ctl.len() >= self.control_frames {
            self.drop_frame(now, PortId(port as u16), None, DropReason::ControlFull);
            return false;
        }
        let Some(mut f) = self.pool.blank(len, now) else {
            return false;
        };
        if !build(&mut f.buf) {
            self.pool.recycle(f);
            return false;
        }
        self.ports[port].ctl.push_back(f);
        self.busy.insert(port);
        self.note_due(Instant::ZERO);
        true
    }

    /// Sends the current XOFF/XON state of input port `i` upstream (out of port `i`).
    fn send_pause(&mut self, now: Instant, i: usize, p: usize, on: bool) {
        // The fabric may report a change at a back-dated instant; the frame leaves at the
        // latest `now` the bridge has seen, and that is when the peer's timer starts.
        let now = now.max(self.last_now);
        let pt = &self.ports[i];
        if !pt.up {
            return;
        }
        let repr = pt.pause_gen.repr();
        let mac = pt.mac;
        let mode = pt.pause_gen.mode();
        if self.queue_control(now, i, 60, |buf| build_pause_frame(mac, &repr, buf).is_ok()) {
            let rate = self.link_rate(i);
            let pt = &mut self.ports[i];
            pt.counters.pause_tx += 1;
            pt.pause_gen.sent(now, rate);
            self.event(Event::PauseTx {
                at: now,
                port: PortId(i as u16),
                priority: (mode == LosslessMode::Pfc).then_some(p as u8),
                on,
            });
        }
    }

    /// Re-sends XOFF before the peer's pause timer runs out.
    fn refresh_pause(&mut self, now: Instant, i: usize) {
        let pt = &self.ports[i];
        let repr = pt.pause_gen.repr();
        let mac = pt.mac;
        if self.queue_control(now, i, 60, |buf| build_pause_frame(mac, &repr, buf).is_ok()) {
            let rate = self.link_rate(i);
            let pt = &mut self.ports[i];
            pt.counters.pause_tx += 1;
            pt.pause_gen.sent(now, rate);
        } else {
            // Control queue full: retry in one quantum-ish interval rather than spinning.
            let rate = self.link_rate(i);
            self.ports[i].pause_gen.sent(now, rate);
        }
    }

    /// The rate that converts pause quanta to time on port `i`: its emulated line rate, or the
    /// nominal rate for an unshaped port.
    fn link_rate(&self, i: usize) -> Rate {
        self.ports[i].shaper.rate().unwrap_or(self.nominal_rate)
    }

    /// A MAC-control frame received on port `i`.
    fn mac_control(&mut self, now: Instant, i: usize, mc: &MacControlRepr) {
        match mc {
            MacControlRepr::Pause { .. } | MacControlRepr::Pfc { .. } => {
                let rate = self.link_rate(i);
                let pt = &mut self.ports[i];
                pt.counters.pause_rx += 1;
                let (priorities, quanta) = pt.pause_rx.apply(now, mc, rate);
                self.event(Event::PauseRx {
                    at: now,
                    port: PortId(i as u16),
                    priorities,
                    quanta,
                });
            }
            MacControlRepr::Unknown { .. } => {
                self.ports[i].counters.mac_control_other += 1;
            }
        }
    }

    /// A frame to a reserved group address received on port `i` (never relayed, never learned
    /// from; [`crate::forward`]): LLDP is consumed and its CN TLV remembered as the port's
    /// neighbour's; anything else is a counted `reserved_group` drop.
    #[cold]
    fn reserved_group(&mut self, now: Instant, i: usize, frame: &[u8], c: &Classified) {
        if c.ethertype != cnm_proto::wire::EtherType::Lldp {
            self.drop_frame(now, PortId(i as u16), None, DropReason::ReservedGroup);
            return;
        }
        let body = frame.get(c.payload_offset..).unwrap_or(&[]);
        let parsed = cnm_proto::wire::lldp::find_cn_tlv(body)
            .and_then(|tlv| Ok((tlv, cnm_proto::wire::lldp::find_ttl(body)?)));
        match parsed {
            Ok((tlv, ttl)) => {
                let pt = &mut self.ports[i];
                pt.counters.lldp_rx += 1;
                // An LLDPDU without a CN TLV comes from a neighbour that is not CN-aware; a
                // TTL of 0 is a shutdown LLDPDU (802.1AB clause 9.2.7.7).
                let ttl = ttl.unwrap_or(0);
                pt.neighbour_cn = tlv.filter(|_| ttl > 0).map(|t| NeighbourCn {
                    cnpv: t.cnpv,
                    ready: t.ready,
                });
                pt.neighbour_until = now + Duration::from_secs(u64::from(ttl));
                self.neighbour_changed(now, i, false);
            }
            Err(_) => self.drop_frame(now, PortId(i as u16), None, DropReason::Malformed),
        }
    }

    /// Recomputes port `o`'s CN-TAG removal from its neighbour's announcement and, for an
    /// `auto` port, advertises again when what it advertises changed (or `always`): the
    /// neighbour learns at once that this port is ready for its CN-TAGs (802.1AB clause
    /// 9.2.7.1, `somethingChangedLocal`).
    fn neighbour_changed(&mut self, now: Instant, o: usize, always: bool) {
        let cnpv = self.cp_cfg.cnpv_mask();
        let pt = &mut self.ports[o];
        pt.strip_mask = pt.cnd.strip_mask(pt.neighbour_cn);
        let ready = pt.cnd.advertised_ready(cnpv, pt.neighbour_cn);
        if ready.is_some() && (always || ready != pt.advertised) && pt.up {
            self.send_lldp(now, o);
        }
    }

    /// Queues an LLDPDU with the bridge's CN TLV on `auto` port `o` (Chassis ID: the bridge's
    /// MAC; Port ID: the port's name; TTL [`LLDP_TTL_SECS`]; CNPV indicators: the bridge's
    /// CNPVs; Ready indicators: [`CndDefense::advertised_ready`]).
    fn send_lldp(&mut self, now: Instant, o: usize) {
        let cnpv = self.cp_cfg.cnpv_mask();
        let pt = &mut self.ports[o];
        let Some(ready) = pt.cnd.advertised_ready(cnpv, pt.neighbour_cn) else {
            return;
        };
        pt.advertised = Some(ready);
        let cn = cnm_proto::wire::lldp::LldpCnTlvRepr { cnpv, ready };
        let (src, name) = (pt.mac, pt.name.clone());
        let mut frame = [0u8; 128];
        // Port names are interface names (at most 15 octets): the frame fits.
        let Ok(len) = cnm_proto::wire::lldp::build_lldp_frame(
            src,
            name.as_bytes(),
            LLDP_TTL_SECS,
            &cn,
            &mut frame,
        ) else {
            return;
        };
        if self.queue_control(now, o, len, |b| {
            b.copy_from_slice(&frame[..len]);
            true
        }) {
            self.ports[o].counters.lldp_tx += 1;
        }
    }

    /// The `auto` ports' LLDP duties: advertise every [`LLDP_TX_INTERVAL`] on every port that
    /// is up, and forget a neighbour whose announcement outlived its TTL.
    fn run_lldp(&mut self, now: Instant) {
        for o in 0..self.ports.len() {
            let pt = &mut self.ports[o];
            if pt.cnd == CndDefense::Auto && pt.neighbour_cn.is_some() && pt.neighbour_until <= now
            {
                pt.neighbour_cn = None;
                self.neighbour_changed(now, o, false);
            }
        }
        let Some(due) = self.lldp_due else {
            return;
        };
        if now < due {
            return;
        }
        self.lldp_due = Some(now + LLDP_TX_INTERVAL);
        for o in 0..self.ports.len() {
            if self.ports[o].cnd == CndDefense::Auto && self.ports[o].up {
                self.send_lldp(now, o);
            }
        }
    }

    /// Sends output port `o`'s control frames: ahead of data, never paused, but they occupy the
    /// line. False when the port took no more (`tx` refused).
    fn transmit_control(
        &mut self,
        now: Instant,
        o: usize,
        tx: &mut dyn FnMut(PortId, &mut Vec<u8>) -> bool,
    ) -> bool {
        let id = PortId(o as u16);
        loop {
            let pt = &mut self.ports[o];
            let Some(f) = pt.ctl.front_mut() else {
                break;
            };
            let len = f.len();
            if pt.delay.bypass() {
                if !tx(id, &mut f.buf) {
                    return false;
                }
                pt.counters.count_tx(len);
                pt.shaper.charge_now(now, len);
                if let Some(f) = pt.ctl.pop_front() {
                    self.pool.recycle(f);
                }
            } else {
                pt.shaper.charge_now(now, len);
                if let Some(f) = pt.ctl.pop_front() {
                    if let Err(f) = pt.delay.push(now, f) {
                        self.pool.recycle(f);
                        self.drop_frame(now, id, None, DropReason::DelayLineFull);
                    }
                }
            }
        }
        true
    }

    /// Sends output port `o`'s frames whose propagation delay has elapsed. False when the port
    /// took no more (`tx` refused).
    fn transmit_delayed(
        &mut self,
        now: Instant,
        o: usize,
        tx: &mut dyn FnMut(PortId, &mut Vec<u8>) -> bool,
    ) -> bool {
        let id = PortId(o as u16);
        let pt = &mut self.ports[o];
        while let Some(len) = pt.delay.front_due(now).map(Frame::len) {
            let Some(f) = pt.delay.pop_due_if(now, |f| tx(id, &mut f.buf)) else {
                return false;
            };
            pt.counters.count_tx(len);
            self.pool.recycle(f);
        }
        true
    }

    /// Serves output port `o`.
    fn transmit_port(
        &mut self,
        now: Instant,
        o: usize,
        tx: &mut dyn FnMut(PortId, &mut Vec<u8>) -> bool,
    ) {
        let id = PortId(o as u16);
        self.run_watchdog(now, o);
        if let Some(t) = self.ports[o].pause_gen.refresh_at() {
            if t <= now && self.ports[o].up {
                self.refresh_pause(now, o);
            }
        }
        if !self.ports[o].up {
            return;
        }
        if !self.transmit_control(now, o, tx) {
            return;
        }
        loop {
            if !self.transmit_delayed(now, o, tx) {
                return;
            }
            // One data frame.
            let pt = &mut self.ports[o];
            if pt.backlog == 0 {
                return;
            }
            if let Some(nf) = pt.shaper.next_free() {
                if nf > now {
                    return;
                }
            }
            let outqs = &self.outqs;
            let backlog = pt.backlog;
            let pause_rx = &pt.pause_rx;
            let Some(p) = pt.selector.select(|p| {
                if backlog & (1 << p) != 0 && pause_rx.until(p) <= now {
                    outqs[o * P + p].front().map(Frame::len)
                } else {
                    None
                }
            }) else {
                return;
            };
            let r = o * P + p;
            let Some(head) = self.outqs[r].front() else {
                pt.backlog &= !(1 << p);
                continue;
            };
            let ready = head.ts.max(pt.pause_rx.until(p));
            if !pt.shaper.may_start(now, ready) {
                return;
            }
            // An edge or interior port sends the frame without its CN-TAG (QCN-REFERENCE §1;
            // 802.1Q clause 32.4): 4 octets fewer on the line. The queue and its congestion
            // point keep accounting the frame as it was queued.
            let strip = if pt.strip_mask & (1 << p) != 0 && head.cn_tag != 0 {
                Some(usize::from(head.cn_tag))
            } else {
                None
            };
            let queued = head.len();
            let len = queued - if strip.is_some() { CN_TAG_LEN } else { 0 };
            // The departure stamp: when the emulated line starts the frame (the shaper's start,
            // which a late poll back-dates by at most the catch-up), after the port's delay.
            let stamp = pt
                .stamp_departures
                .then(|| pt.shaper.start_instant(now, ready) + pt.delay.delay());
            let start;
            if pt.delay.bypass() {
                let sent = match strip {
                    None => self.outqs[r].pop_if(|f| {
                        if let Some(at) = stamp {
                            generated::set_departure(&mut f.buf, at);
                        }
                        tx(id, &mut f.buf)
                    }),
                    Some(off) => {
                        let b = &mut self.scratch;
                        b.clear();
                        b.extend_from_slice(&head.buf[..off]);
                        b.extend_from_slice(&head.buf[off + CN_TAG_LEN..]);
                        if let Some(at) = stamp {
                            generated::set_departure(b, at);
                        }
                        if tx(id, b) {
                            self.outqs[r].pop()
                        } else {
                            None
                        }
                    }
                };
                let Some(mut f) = sent else {
                    return;
                };
                pt.counters.count_tx(len);
                pt.counters.cn_tag_stripped += u64::from(strip.is_some());
                start = pt.shaper.start(now, ready, len);
                if f.flow != NO_FLOW {
                    // Its buffer may have left with `tx`: the CP accounts the queued length.
                    let k = self.cp_slot[r];
                    if let Some(cp) = self.cps.get_mut(usize::from(k)) {
                        cp.departure(f.flow, queued);
                    }
                    f.flow = NO_FLOW;
                }
                self.pool.recycle(f);
            } else {
                start = pt.shaper.start(now, ready, len);
                if let Some(mut f) = self.outqs[r].pop() {
                    if f.flow != NO_FLOW {
                        let k = self.cp_slot[r];
                        if let Some(cp) = self.cps.get_mut(usize::from(k)) {
                            cp.departure(f.flow, f.len());
                        }
                        f.flow = NO_FLOW;
                    }
                    if let Some(off) = strip {
                        f.buf.drain(off..off + CN_TAG_LEN);
                        pt.counters.cn_tag_stripped += 1;
                    }
                    if let Some(at) = stamp {
                        generated::set_departure(&mut f.buf, at);
                    }
                    if let Err(f) = pt.delay.push(start, f) {
                        self.pool.recycle(f);
                        self.outqs[r].counters.drops += 1;
                        self.drop_frame(now, id, Some(p), DropReason::DelayLineFull);
                    }
                }
            }
            let pt = &mut self.ports[o];
            let emptied = self.outqs[r].is_empty();
            pt.selector.sent(p, len, emptied);
            if emptied {
                pt.backlog &= !(1 << p);
            }
            // Room appeared in the output queue: the fabric moves what waits for it, if
            // anything does (with `on_output_full = "drop"` nothing ever waits).
            if !self.rings[r].is_empty() {
                self.fabric(start, o, p);
            }
        }
    }

    /// Counts a drop attributed to `port` and records an event.
    #[inline]
    fn drop_frame(&mut self, now: Instant, port: PortId, priority: Option<usize>, r: DropReason) {
        if let Some(pt) = self.ports.get_mut(port.index()) {
            pt.counters.drops.count(r);
        }
        self.event(Event::Drop {
            at: now,
            port,
            priority: priority.map(|p| p as u8),
            reason: r,
        });
    }

    #[inline]
    fn event(&mut self, e: Event) {
        if self.events.len() >= self.event_capacity {
            self.events_lost += 1;
        } else {
            self.events.push_back(e);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Hand-computed deadlines of `poll_timeout` after changes that move them earlier and
    //! later, and the CN-TAG offset a queued frame keeps from its classification.
    use super::*;
    use crate::config::PortConfig;
    use cnm_proto::wire::build_pause_frame;

    const T0: Instant = Instant::from_nanos(1_000_000_000);

    fn mac(n: u8) -> [u8; 6] {
        [0x02, 0, 0, 0, 0x10, n]
    }

    /// An untagged frame of `len` octets (local experimental EtherType).
    fn frame(dst: [u8; 6], src: [u8; 6], len: usize) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&src);
        f.extend_from_slice(&[0x88, 0xB6]);
        f.resize(len, 0xA5);
        f
    }

    fn pause(src: [u8; 6], quanta: u16) -> Vec<u8> {
        let mut b = [0u8; 60];
        let n = build_pause_frame(
            EthernetAddress(src),
            &MacControlRepr::Pause { quanta },
            &mut b,
        )
        .unwrap_or(0);
        b[..n].to_vec()
    }

    /// p0 and p1 unshaped, p2 at 8 Mb/s (one octet per microsecond; a 100-octet frame costs
    /// 100 + 4 FCS + 20 preamble/IPG = 124 µs on its line, a pause quantum 512 bit times =
    /// 64 µs).
    fn bridge() -> Bridge {
        let mut cfg = BridgeConfig::with_ports(vec![
            PortConfig::new("p0"),
            PortConfig::new("p1"),
            PortConfig::new("p2").with_rate(Rate::from_mbps(8)),
        ]);
        cfg.lossless.watchdog = Duration::ZERO;
        let b = Bridge::new(cfg, Rng::new(1));
        assert!(b.is_ok(), "{b:?}");
        b.unwrap_or_else(|_| unreachable!())
    }

    fn poll(b: &mut Bridge, now: Instant) -> Vec<(PortId, usize)> {
        let mut sent = Vec::new();
        b.poll_transmit(now, &mut |p, f| {
            sent.push((p, f.len()));
            true
        });
        sent
    }

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn deadline_follows_every_change_earlier_and_later() {
        let mut b = bridge();
        // Station 2 announces itself on p2: flooded to the unshaped p0 and p1, due at once.
        b.handle_frame(T0, PortId(2), &frame([0xff; 6], mac(2), 100));
        assert_eq!(b.poll_timeout(), Some(T0));
        assert_eq!(poll(&mut b, T0), vec![(PortId(0), 100), (PortId(1), 100)]);
        assert_eq!(b.poll_timeout(), None, "all sent: idle");
        assert_eq!(b.poll_timeout(), None, "asked again: same answer");

        // Two frames for station 2 from p0: the first leaves at once, the second when the
        // 8 Mb/s line is free again, 124 µs later.
        let to2 = frame(mac(2), mac(0), 100);
        b.handle_frame(T0, PortId(0), &to2);
        b.handle_frame(T0, PortId(0), &to2);
        assert_eq!(b.poll_timeout(), Some(T0));
        assert_eq!(poll(&mut b, T0), vec![(PortId(2), 100)]);
        assert_eq!(b.poll_timeout(), Some(T0 + us(124)));

        // Earlier, through another port: a flood reaches the unshaped p1 (and queues behind
        // the second frame on p2). Due at once again.
        b.handle_frame(T0 + us(10), PortId(0), &frame(mac(7), mac(0), 100));
        assert_eq!(b.poll_timeout(), Some(T0 + us(10)));
        assert_eq!(poll(&mut b, T0 + us(10)), vec![(PortId(1), 100)]);
        assert_eq!(b.poll_timeout(), Some(T0 + us(124)), "back to p2's line");

        // Later, through a PAUSE received on p2: 10 quanta from T0 + 20 µs stop priority 0
        // until T0 + 20 + 640 µs.
        b.handle_frame(T0 + us(20), PortId(2), &pause(mac(2), 10));
        assert_eq!(b.poll_timeout(), Some(T0 + us(660)));
        // Earlier again: the peer lifts the pause at T0 + 30 µs (quanta 0).
        b.handle_frame(T0 + us(30), PortId(2), &pause(mac(2), 0));
        assert_eq!(b.poll_timeout(), Some(T0 + us(124)));

        // Earlier through a run-time change: taking p2 down drops its queue; p0 and p1 are
        // idle, so nothing is due.
        b.set_port_up(T0 + us(40), PortId(2), false);
        let _ = poll(&mut b, T0 + us(40));
        assert_eq!(b.poll_timeout(), None);
    }

    #[test]
    fn the_due_floor_bounds_what_a_received_frame_made_due() {
        let mut b = bridge();
        // The flood reaches the idle, unshaped p0 and p1: heads due at once.
        b.handle_frame(T0, PortId(2), &frame([0xff; 6], mac(2), 100));
        assert_eq!(b.received_due_floor(), Some(T0));
        assert_eq!(poll(&mut b, T0).len(), 2);
        assert_eq!(b.poll_timeout(), None);

        // A frame for the idle p2 is its queue's head, due at once; sent, it holds the 8 Mb/s
        // line for 124 µs.
        let to2 = frame(mac(2), mac(0), 100);
        b.handle_frame(T0, PortId(0), &to2);
        assert_eq!(b.received_due_floor(), Some(T0));
        assert_eq!(poll(&mut b, T0), vec![(PortId(2), 100)]);
        // The next one is the head again, but the shaper holds it: the floor is the deadline.
        b.handle_frame(T0 + us(1), PortId(0), &to2);
        assert_eq!(b.received_due_floor(), Some(T0 + us(124)));
        assert_eq!(b.poll_timeout(), Some(T0 + us(124)));
        // One behind it changes no head: nothing new is due, the deadline stays.
        b.handle_frame(T0 + us(2), PortId(0), &to2);
        assert_eq!(b.received_due_floor(), None);
        assert_eq!(b.poll_timeout(), Some(T0 + us(124)));
        // A frame the bridge does not keep (unknown destination, flooded: copies enter the
        // idle p1 at once, and p2 behind its head) makes p1's copy due now.
        b.handle_frame(T0 + us(3), PortId(0), &frame(mac(9), mac(0), 100));
        assert_eq!(b.received_due_floor(), Some(T0 + us(3)));
        assert_eq!(b.poll_timeout(), Some(T0 + us(3)));
        let _ = poll(&mut b, T0 + us(3));
        // A PAUSE received moves the port's timers: "anything", the driver asks again.
        b.handle_frame(T0 + us(4), PortId(2), &pause(mac(2), 10));
        assert_eq!(b.received_due_floor(), Some(Instant::ZERO));

        // Lossless mode: a data frame changes its input buffer's PAUSE state and timers.
        let mut cfg = BridgeConfig::with_ports(vec![PortConfig::new("p0"), PortConfig::new("p1")]);
        cfg.lossless.mode = LosslessMode::Pause;
        let b = Bridge::new(cfg, Rng::new(1));
        assert!(b.is_ok(), "{b:?}");
        let mut b = b.unwrap_or_else(|_| unreachable!());
        b.handle_frame(T0, PortId(0), &frame(mac(1), mac(0), 100));
        assert_eq!(b.received_due_floor(), Some(Instant::ZERO));
    }

    #[test]
    fn a_data_frame_marks_its_ingress_port_busy_only_in_lossless_mode() {
        for mode in [LosslessMode::None, LosslessMode::Pause] {
            let mut cfg = BridgeConfig::with_ports(vec![
                PortConfig::new("p0"),
                PortConfig::new("p1"),
                PortConfig::new("p2").with_rate(Rate::from_mbps(8)),
            ]);
            cfg.lossless.watchdog = Duration::ZERO;
            cfg.lossless.mode = mode;
            let b = Bridge::new(cfg, Rng::new(1));
            assert!(b.is_ok(), "{b:?}");
            let mut b = b.unwrap_or_else(|_| unreachable!());
            b.handle_frame(T0, PortId(2), &frame([0xff; 6], mac(2), 100));
            let _ = poll(&mut b, T0);
            let busy = |b: &Bridge| [0, 1, 2].map(|i| b.busy.contains(i));
            assert_eq!(busy(&b), [false; 3], "{mode:?}: all idle");
            // One frame p0 -> p2: p2 has it queued; p0's input buffer only matters to PAUSE.
            b.handle_frame(T0, PortId(0), &frame(mac(2), mac(0), 100));
            let lossless = mode != LosslessMode::None;
            assert_eq!(busy(&b), [lossless, false, true], "{mode:?}");
            assert_eq!(poll(&mut b, T0), vec![(PortId(2), 100)]);
            assert_eq!(busy(&b), [false; 3], "{mode:?}: sent, idle again");
            // A PAUSE received on p1 stops its transmitter: watched from then on.
            b.handle_frame(T0, PortId(1), &pause(mac(1), 10));
            assert_eq!(busy(&b), [false, true, false], "{mode:?}");
        }
    }

    /// `frame(dst, src, len)` with a VLAN tag (PCP 3, VID 1) and a CN-TAG (RPID 0x0101)
    /// inserted after the addresses: the CN-TAG's EtherType at offset 16.
    fn cn_tagged(dst: [u8; 6], src: [u8; 6], len: usize) -> Vec<u8> {
        let mut f = frame(dst, src, len);
        f.splice(12..12, [0x81, 0x00, 0x60, 0x01, 0x22, 0xE9, 0x01, 0x01]);
        f
    }

    #[test]
    fn a_queued_frame_keeps_the_cn_tag_offset_found_on_arrival() {
        let mut cfg = BridgeConfig::with_ports(vec![
            PortConfig::new("p0"),
            PortConfig::new("p1").with_rate(Rate::from_mbps(8)),
        ]);
        cfg.ports[1].cnd_defense = CndDefense::Interior;
        let b = Bridge::new(cfg, Rng::new(1));
        assert!(b.is_ok(), "{b:?}");
        let mut b = b.unwrap_or_else(|_| unreachable!());
        b.handle_frame(T0, PortId(1), &frame([0xff; 6], mac(1), 100));
        let _ = poll(&mut b, T0);
        // Two CN-tagged frames and a plain one for station 1: the first leaves at once, the
        // others wait behind the 8 Mb/s line with what classification found.
        let tagged = cn_tagged(mac(1), mac(0), 100);
        b.handle_frame(T0, PortId(0), &tagged);
        b.handle_frame(T0, PortId(0), &tagged);
        b.handle_frame(T0, PortId(0), &frame(mac(1), mac(0), 100));
        let q = &b.outqs[P + 3];
        assert_eq!(q.front().map(|f| f.cn_tag), Some(16));
        assert_eq!(b.outqs[P].front().map(|f| f.cn_tag), Some(0));
        // An interior port sends them without the CN-TAG: 4 octets fewer, cut at offset 16.
        let mut out = Vec::new();
        for t in [0, 124, 248, 372] {
            b.poll_transmit(T0 + us(t), &mut |_, f| {
                out.push(f.to_vec());
                true
            });
        }
        let mut stripped = tagged.clone();
        stripped.drain(16..20);
        assert_eq!(out.len(), 3);
        assert_eq!(out[0], stripped);
        assert_eq!(out[1], stripped);
        assert_eq!(out[2], frame(mac(1), mac(0), 100));
        assert_eq!(b.stats().ports[1].cn_tag_stripped, 2);
    }

    #[test]
    fn control_frames_are_due_at_the_latest_now() {
        // A control frame the line refuses stays queued: due "at once", which is the latest
        // instant the bridge has seen, even when that instant moved without the port changing.
        let mut b = bridge();
        b.handle_frame(T0, PortId(2), &frame([0xff; 6], mac(2), 100));
        let _ = poll(&mut b, T0);
        let cnm = frame(mac(2), mac(9), 60);
        assert!(b.queue_control(T0, 1, cnm.len(), |buf| {
            buf.copy_from_slice(&cnm);
            true
        }));
        b.poll_transmit(T0, &mut |_, _| false);
        assert_eq!(b.poll_timeout(), Some(T0));
        // A frame on p2 for station 2 is filtered (counted), moving only the bridge's `now`.
        b.handle_frame(T0 + us(5), PortId(2), &frame(mac(2), mac(3), 100));
        assert_eq!(b.poll_timeout(), Some(T0 + us(5)));
        assert_eq!(poll(&mut b, T0 + us(5)), vec![(PortId(1), 60)]);
        assert_eq!(b.poll_timeout(), None);
    }
}
