//! The sans-IO agent core: host frames in, paced and tagged frames up; network frames in,
//! feedback consumed and the rest handed to the host.
//!
//! ```text
//! handle_host ─ classify ─► flow queue (bounded, backpressure) ─┐
//!                                                              ├─ round-robin, per-flow
//!                                                              │  limiter at CR, PAUSE/PFC,
//!                                                              ▼  line pacer ─► poll_uplink
//! handle_uplink ─► CNM ─► flow's reaction point (rate)          (802.1Q tag + CN-TAG,
//!                                                                in place when the host frame
//!                                                                came with headroom)
//!               ─► rate feedback (0x88B5) ─► flow's explicit-rate source
//!               ─► PAUSE/PFC ─► pause state
//!               ─► other ─► strip tags ─► host queue ─► poll_host
//! ```
//!
//! The reaction-point settings can change while the agent runs ([`Agent::set_rp_config`],
//! [`Agent::apply_rp_patch`]); the rest of the configuration is fixed at construction.
//!
//! Time enters as `now` and randomness through the [`Rng`] given to [`Agent::new`]; the
//! daemon, the tests and the simulator drive this same code.

use crate::classify::{classify_walked, ClassKey};
use crate::config::{AgentConfig, ConfigError, FlowKeyMode, RpPatch, MAX_FRAME};
use crate::limiter::Pacer;
use crate::pause::PauseState;
use crate::pool::BufPool;
use crate::rp::{CnmOutcome, ErOutcome, Rp, RpState};
use crate::stats::{AgentStats, CnmIgnored, CpView, Event, FlowView, TxLateness};
use crate::tagger::{
    strip_in_place, tag_for_uplink, tag_in_place, tag_walked_in_place, TagLayout, UPLINK_HEADROOM,
};
use cnm_proto::rng::Rng;
use cnm_proto::wire::{
    self, cnm, generated, walk, EtherType, EthernetAddress, FlowKey, L2Info, MacControl,
    MacControlRepr, RateFeedback, RateFeedbackRepr,
};
use cnm_proto::{Instant, Rate};
use std::collections::{HashMap, VecDeque};

/// A frame handed in: borrowed (copied if kept) or in a buffer of the caller's (taken over if
/// kept, the caller getting a spare in exchange).
enum Src<'a> {
    Shared(&'a [u8]),
    Owned(&'a mut Vec<u8>),
    /// A host frame in a buffer of the caller's, starting at the given offset (the octets
    /// before it are headroom for the tags, [`UPLINK_HEADROOM`]).
    OwnedAt(&'a mut Vec<u8>, usize),
}

impl Src<'_> {
    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            Src::Shared(b) => b,
            Src::Owned(b) => b,
            Src::OwnedAt(b, start) => b.get(*start..).unwrap_or_default(),
        }
    }
}

/// Why a host frame was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// The flow's queue is full: keep the frame, stop reading the host until
    /// [`Agent::can_accept`].
    #[error("flow queue full")]
    Backpressure,
    /// Shorter than an Ethernet header.
    #[error("malformed frame")]
    Malformed,
    /// Longer than the largest frame the agent queues.
    #[error("frame too long")]
    TooLong,
    /// Every flow slot holds an active flow; the frame cannot be classified into one.
    #[error("flow table full")]
    FlowTableFull,
}

/// What [`Agent::set_rp_config`] did to the live limiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "change")]
pub enum RpChange {
    /// They took the new parameters and kept their state.
    Updated {
        /// How many.
        limiters: usize,
    },
    /// The mode needs another kind of limiter: they were released.
    Released {
        /// How many.
        limiters: usize,
    },
}

#[derive(Debug)]
struct Flow {
    key: ClassKey,
    rpid: u16,
    /// Host frames, each with the offset it starts at in its buffer (the octets before are
    /// headroom for tagging in place, [`crate::tagger::tag_in_place`]) and where its tags lie
    /// (it was walked when classified; tagging it need not walk it again).
    queue: VecDeque<(usize, Vec<u8>, Option<TagLayout>)>,
    qbytes: u64,
    pacer: Pacer,
    rp: Option<Rp>,
    in_ring: bool,
    last_active: Instant,
    cnm_rx: u64,
    fb_rx: u64,
    tx_frames: u64,
    tx_bytes: u64,
    backpressure: u64,
}

/// The rp-agent core.
#[derive(Debug)]
pub struct Agent {
    cfg: AgentConfig,
    rng: Rng,
    flows: Vec<Option<Flow>>,
    /// The occupied slots of `flows`, ascending: the per-poll work (timers, the next
    /// deadline) visits these rather than every slot of the table. Slots are only ever filled
    /// (a full table's idle flow is replaced in place), so this list only grows.
    live: Vec<usize>,
    index: HashMap<ClassKey, usize>,
    /// The slot of the last host frame's flow: a host sends runs of frames of one flow, and
    /// comparing keys costs less than hashing one (checked against the slot's key, so a
    /// replaced flow is never mistaken for it).
    last_flow: usize,
    /// Backlogged flows in round-robin order.
    ring: VecDeque<usize>,
    backlog_frames: usize,
    line: Pacer,
    pause: PauseState,
    pool: BufPool,
    /// Frames for the host, each with the offset it starts at in its buffer (tags removed in
    /// place, [`strip_in_place`]).
    host_q: VecDeque<(usize, Vec<u8>)>,
    host_bytes: u64,
    blocked: Option<(usize, usize)>,
    txbuf: Vec<u8>,
    matches: Vec<usize>,
    stats: AgentStats,
    /// How late the frames sent up left ([`TxLateness`]).
    tx_late: TxLateness,
    events: VecDeque<Event>,
    /// The last host frame's header and what it classified to.
    memo: HeaderMemo,
}

/// Octets of L2 header a [`HeaderMemo`] holds: addresses, two VLAN tags, a CN-TAG and the
/// EtherType are 26 (see [`TagLayout`]).
const MEMO_LEN: usize = 32;

/// The L2 header of the last host frame classified, with the flow slot it went to and its tag
/// layout.
///
/// A host sends runs of frames with one header (a generator's flow, a TCP connection's
/// segments; a producer refused with backpressure offers the same frame again), and comparing
/// up to 26 octets costs less than walking and classifying them again. It is used only where
/// the key is read off the L2 header alone ([`FlowKeyMode::DstPriority`]): [`walk`] reads
/// nothing past the payload's EtherType, so a frame whose octets up to there are the same
/// walks to the same result, and its key and layout are the same.
///
/// It names the slot rather than the key: a hit goes to its flow without comparing keys (48
/// octets) or hashing one. A slot changes flows only when [`Agent::new_flow`] gives it to
/// another key, which forgets the memo; on the dumbbell of the simulator this took the
/// key comparison (about 1 % of the instructions) off every host frame.
#[derive(Debug, Default)]
struct HeaderMemo {
    /// The header's octets, `len` of them.
    header: [u8; MEMO_LEN],
    len: usize,
    /// The slot of its flow; `None`: nothing held.
    flow: Option<usize>,
    layout: Option<TagLayout>,
}

impl HeaderMemo {
    /// The flow slot and layout of `frame` if its header is the one held.
    #[inline]
    fn get(&self, frame: &[u8]) -> Option<(usize, Option<TagLayout>)> {
        let flow = self.flow?;
        let head = frame.get(..self.len)?;
        // An untagged header (14 octets) is compared as one fixed-size array: the slice
        // comparison of a length known only at run time calls `memcmp` (2.4 % of the
        // simulator's samples on the 10 Gb/s dumbbell, most of them here).
        let same = match (head.first_chunk::<14>(), self.header.first_chunk::<14>()) {
            (Some(a), Some(b)) if self.len == 14 => a == b,
            _ => head == self.header.get(..self.len)?,
        };
        same.then_some((flow, self.layout))
    }

    /// Holds the header of a frame walked to `info` that went to the flow in slot `flow`.
    #[inline]
    fn put(&mut self, frame: &[u8], info: &L2Info, flow: usize, layout: Option<TagLayout>) {
        let n = info.payload_offset;
        match (frame.get(..n), self.header.get_mut(..n)) {
            (Some(src), Some(dst)) => {
                dst.copy_from_slice(src);
                (self.len, self.flow, self.layout) = (n, Some(flow), layout);
            }
            _ => self.flow = None,
        }
    }

    /// Holds nothing (a flow slot changed hands).
    fn forget(&mut self) {
        self.flow = None;
    }
}

impl Agent {
    /// A new agent; the configuration is validated first.
    pub fn new(cfg: AgentConfig, rng: Rng) -> Result<Agent, ConfigError> {
        cfg.validate()?;
        let mut flows = Vec::new();
        flows.resize_with(cfg.max_flows, || None);
        Ok(Agent {
            line: Pacer::new(cfg.line_rate, cfg.wire_overhead, cfg.catch_up),
            rng,
            index: HashMap::with_capacity(cfg.max_flows),
            ring: VecDeque::with_capacity(cfg.max_flows),
            live: Vec::with_capacity(cfg.max_flows),
            last_flow: 0,
            flows,
            backlog_frames: 0,
            pause: PauseState::default(),
            pool: BufPool::default(),
            host_q: VecDeque::new(),
            host_bytes: 0,
            blocked: None,
            txbuf: Vec::with_capacity(MAX_FRAME + 16),
            matches: Vec::with_capacity(cfg.max_flows),
            stats: AgentStats::default(),
            tx_late: TxLateness::default(),
            events: VecDeque::with_capacity(cfg.event_capacity.min(1 << 16)),
            memo: HeaderMemo::default(),
            cfg,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &AgentConfig {
        &self.cfg
    }

    /// Changes the reaction-point algorithm and parameters at run time: `rp_mode` and `rp` of
    /// `cfg` replace the ones in force (the rest of `cfg` is ignored: line rate, flow key and
    /// queues stay as built). Checked as at load ([`AgentConfig::validate`]); nothing changes
    /// when refused. Every live limiter takes the new parameters and keeps its state
    /// ([`Rp::set_params`]: CR, TR and stages, clamped into the new bounds), and its pacer
    /// follows its rate — unless the new mode needs another kind of limiter (QCN, QCN/BS,
    /// explicit rate; see [`Rp::same_kind`]): then every limiter is released (the flows return
    /// to the line rate, their state reset) and the next feedback creates one of the new kind.
    /// Limiters created later use the new settings either way.
    pub fn set_rp_config(
        &mut self,
        now: Instant,
        cfg: &AgentConfig,
    ) -> Result<RpChange, ConfigError> {
        let mut next = self.cfg.clone();
        next.rp_mode = cfg.rp_mode;
        next.rp = cfg.rp;
        next.validate()?;
        let keep = Rp::same_kind(self.cfg.rp_mode, next.rp_mode);
        self.cfg = next;
        let mut n = 0;
        for idx in 0..self.flows.len() {
            let Some(f) = self.flows[idx].as_mut() else {
                continue;
            };
            let Some(rp) = f.rp.as_mut() else {
                continue;
            };
            n += 1;
            if keep && rp.set_params(&self.cfg, now) {
                self.after_increase(now, idx);
            } else {
                f.rp = None;
                f.pacer.set_rate(self.cfg.line_rate);
                let (flow, rpid) = (idx as u32, f.rpid);
                self.stats.limiters_released += 1;
                self.push_event(Event::Released {
                    at: now,
                    flow,
                    rpid,
                });
            }
        }
        Ok(if keep {
            RpChange::Updated { limiters: n }
        } else {
            RpChange::Released { limiters: n }
        })
    }

    /// The host's line rate changes at `now` (a link-rate event: the emulated uplink got
    /// slower or faster). The rest of the frame on the line is sent at the new rate; reaction points
    /// keep their current rate and are released when they climb back to the new line rate.
    pub fn set_line_rate(&mut self, now: Instant, rate: Rate) -> Result<(), ConfigError> {
        if rate.bps() == 0 {
            return Err(ConfigError::new("line_rate", "must be positive"));
        }
        self.cfg.line_rate = rate;
        self.line.set_line_rate(now, rate);
        self.line.wake(now);
        Ok(())
    }

    /// [`Agent::set_rp_config`] with `patch` applied to the settings in force
    /// ([`AgentConfig::apply`]): `rp_mode` and the `[rp]` parameters it sets.
    pub fn apply_rp_patch(
        &mut self,
        now: Instant,
        patch: &RpPatch,
    ) -> Result<RpChange, ConfigError> {
        let mut cfg = self.cfg.clone();
        cfg.apply(patch);
        self.set_rp_config(now, &cfg)
    }

    /// A frame from the host stack (TAP) or a generator. `Err(Backpressure)` if the flow's
    /// queue is full: the caller keeps the frame and stops reading the host until
    /// [`Agent::can_accept`]. Other errors are counted refusals (drop the frame).
    pub fn handle_host(&mut self, now: Instant, frame: &[u8]) -> Result<(), HostError> {
        self.host_frame(now, Src::Shared(frame))
    }

    /// [`Agent::handle_host`] for a frame in a buffer of the caller's: a frame the agent takes
    /// moves into its flow queue without a copy and `frame` gets a spare buffer in exchange
    /// (contents unspecified, possibly without capacity) to produce the next frame into; a
    /// frame refused (backpressure or for good) stays in `frame` as it was.
    pub fn handle_host_buf(&mut self, now: Instant, frame: &mut Vec<u8>) -> Result<(), HostError> {
        self.host_frame(now, Src::OwnedAt(frame, 0))
    }

    /// [`Agent::handle_host_buf`] for the frame `frame[start..]`, the octets before it being
    /// free: with [`UPLINK_HEADROOM`] octets there, an untagged frame of a rate-limited flow
    /// is tagged in its own buffer and that buffer goes up, the frame never copied. A `start`
    /// beyond the buffer is a malformed frame.
    pub fn handle_host_buf_at(
        &mut self,
        now: Instant,
        frame: &mut Vec<u8>,
        start: usize,
    ) -> Result<(), HostError> {
        if start > frame.len() {
            self.stats.host_malformed += 1;
            return Err(HostError::Malformed);
        }
        self.host_frame(now, Src::OwnedAt(frame, start))
    }

    /// [`Agent::handle_host`] and [`Agent::handle_host_buf`].
    fn host_frame(&mut self, now: Instant, src: Src<'_>) -> Result<(), HostError> {
        let frame = src.bytes();
        if frame.len() > MAX_FRAME {
            self.stats.host_too_long += 1;
            return Err(HostError::TooLong);
        }
        // One walk, or none when the header is the last one's: the flow's slot and the tag
        // layout are read off the memo, or the key off the walk (then kept where it is and
        // read by reference: moved through the stack as a value, its 48 octets were stored in
        // pieces and loaded whole, a stalled store forwarding that took half of this
        // function's samples).
        let (idx, layout) = match self.memo.get(frame) {
            Some(known) => known,
            None => {
                let Ok(info) = walk(frame) else {
                    self.stats.host_malformed += 1;
                    return Err(HostError::Malformed);
                };
                let mode = self.cfg.flow_key;
                let Ok(key) = classify_walked(frame, &info, mode, self.cfg.priority) else {
                    self.stats.host_malformed += 1;
                    return Err(HostError::Malformed);
                };
                let layout = TagLayout::of(&info);
                let same = self
                    .flows
                    .get(self.last_flow)
                    .and_then(Option::as_ref)
                    .is_some_and(|f| f.key == key);
                let idx = if same {
                    self.last_flow
                } else {
                    match self.index.get(&key) {
                        Some(&i) => i,
                        None => match self.new_flow(now, key) {
                            Some(i) => i,
                            None => {
                                self.stats.host_flow_table_full += 1;
                                return Err(HostError::FlowTableFull);
                            }
                        },
                    }
                };
                self.last_flow = idx;
                if mode == FlowKeyMode::DstPriority {
                    self.memo.put(frame, &info, idx, layout);
                }
                (idx, layout)
            }
        };
        let limit = self.cfg.queue_limit.get();
        let Some(f) = self.flows[idx].as_mut() else {
            // `index` only names occupied slots.
            return Err(HostError::FlowTableFull);
        };
        if f.qbytes + frame.len() as u64 > limit {
            f.backpressure += 1;
            self.stats.host_backpressure += 1;
            self.blocked = Some((idx, frame.len()));
            return Err(HostError::Backpressure);
        }
        self.blocked = None;
        if self.backlog_frames == 0 {
            self.line.wake(now);
        }
        if f.queue.is_empty() {
            f.pacer.wake(now);
        }
        let len = frame.len();
        f.queue.push_back(match src {
            // Copied anyway: with headroom, so that it need not be copied again to be tagged.
            Src::Shared(b) => (
                UPLINK_HEADROOM,
                self.pool.take_with_headroom(b, UPLINK_HEADROOM),
                layout,
            ),
            Src::Owned(b) => (0, self.pool.exchange(b), layout),
            Src::OwnedAt(b, start) => (start, self.pool.exchange_frame_of(b, len), layout),
        });
        f.qbytes += len as u64;
        f.last_active = now;
        if !f.in_ring {
            f.in_ring = true;
            self.ring.push_back(idx);
        }
        self.backlog_frames += 1;
        self.stats.host_rx_frames += 1;
        self.stats.host_rx_bytes += len as u64;
        Ok(())
    }

    /// Host frames queued on the flows, not yet sent up.
    pub fn queued_frames(&self) -> usize {
        self.backlog_frames
    }

    /// False after a `Backpressure` refusal until the refused frame's flow has room for it.
    pub fn can_accept(&self) -> bool {
        match self.blocked {
            None => true,
            Some((i, len)) => match self.flows[i].as_ref() {
                Some(f) => f.qbytes + len as u64 <= self.cfg.queue_limit.get(),
                None => true,
            },
        }
    }

    /// A frame from the network. CNMs, PAUSE/PFC and rate-feedback messages are consumed;
    /// others are queued for the host with the priority tag and any CN-TAG removed (see
    /// [`Agent::poll_host`]).
    pub fn handle_uplink(&mut self, now: Instant, frame: &[u8]) {
        let _ = self.uplink_frame(now, Src::Shared(frame));
    }

    /// [`Agent::handle_uplink`] for a frame in a buffer of the caller's: a frame queued for the
    /// host moves into the queue without a copy (its tags are removed in place) and `frame`
    /// gets a spare buffer in exchange (contents unspecified, possibly without capacity) to
    /// receive the next frame into; any other frame is left in `frame` as it was.
    ///
    /// Returns whether the frame was queued for the host, that is whether `frame` now holds a
    /// spare. A frame queued for the host changes nothing [`Agent::poll_timeout`] reads once
    /// [`Agent::poll_host`] has taken it; a consumed control frame (CNM, PAUSE, rate feedback)
    /// may move it.
    pub fn handle_uplink_buf(&mut self, now: Instant, frame: &mut Vec<u8>) -> bool {
        self.uplink_frame(now, Src::Owned(frame))
    }

    /// [`Agent::handle_uplink`] and [`Agent::handle_uplink_buf`]: whether the frame was
    /// queued for the host.
    fn uplink_frame(&mut self, now: Instant, src: Src<'_>) -> bool {
        let frame = src.bytes();
        self.stats.uplink_rx_frames += 1;
        let Ok(info) = walk(frame) else {
            self.stats.uplink_malformed += 1;
            return false;
        };
        match info.ethertype {
            EtherType::Cnm => self.handle_cnm(now, frame),
            EtherType::MacControl => {
                let pdu = frame.get(info.payload_offset..).unwrap_or(&[]);
                let repr = MacControl::new_checked(pdu).and_then(|m| MacControlRepr::parse(&m));
                match repr {
                    Ok(r) => match self.pause.on_frame(now, &r, self.cfg.line_rate) {
                        Some((priorities, quanta)) => {
                            self.stats.pause_rx += 1;
                            self.push_event(Event::PauseRx {
                                at: now,
                                priorities,
                                quanta,
                            });
                        }
                        None => self.stats.mac_control_unknown += 1,
                    },
                    Err(_) => self.stats.uplink_malformed += 1,
                }
            }
            EtherType::RateFeedback => self.handle_rate_feedback(now, frame, &info),
            // Like a NIC without promiscuous mode: unicast frames for other stations stay out.
            _ if info.dst.is_unicast() && self.cfg.mac.is_some_and(|m| m != info.dst) => {
                self.stats.uplink_not_for_host += 1;
            }
            _ => {
                if frame.len() > MAX_FRAME {
                    self.stats.uplink_malformed += 1;
                    return false;
                }
                if self.host_bytes + frame.len() as u64 > self.cfg.host_queue_limit.get() {
                    self.stats.host_queue_full += 1;
                    return false;
                }
                let mut b = match src {
                    Src::Shared(f) => self.pool.take(f),
                    Src::Owned(f) | Src::OwnedAt(f, _) => self.pool.exchange(f),
                };
                let start = strip_in_place(&mut b, &info, self.cfg.vid);
                self.host_bytes += (b.len() - start) as u64;
                self.host_q.push_back((start, b));
                return true;
            }
        }
        false
    }

    /// Frames due on the uplink now, paced per flow by its limiter and across flows by the
    /// line rate, round-robin; `tx` returns false when there is no room (the frame stays).
    /// The borrowed form of [`Agent::poll_uplink_buf`].
    pub fn poll_uplink(&mut self, now: Instant, tx: &mut dyn FnMut(&[u8]) -> bool) {
        self.poll_uplink_buf(now, &mut |f| tx(f));
    }

    /// [`Agent::poll_uplink`] handing each frame out in the agent's buffer: `tx` may keep the
    /// buffer by swapping in a spare of its own (any `Vec`; the agent reuses it), so a driver
    /// that recycles buffers takes frames without copying them. A `tx` that returns false
    /// must leave the buffer as it was.
    pub fn poll_uplink_buf(&mut self, now: Instant, tx: &mut dyn FnMut(&mut Vec<u8>) -> bool) {
        self.run_timers(now);
        'send: while self.line.may_start(now) && !self.ring.is_empty() {
            let n = self.ring.len();
            for _ in 0..n {
                let Some(idx) = self.ring.pop_front() else {
                    break 'send;
                };
                let Some(f) = self.flows[idx].as_mut() else {
                    continue;
                };
                let eligible = !self.pause.paused(f.key.priority, now)
                    && (f.rp.is_none() || f.pacer.may_start(now));
                let Some((start, head, layout)) = f.queue.front_mut().filter(|_| eligible) else {
                    if f.queue.is_empty() {
                        f.in_ring = false;
                    } else {
                        self.ring.push_back(idx);
                    }
                    continue;
                };
                let start = *start;
                let host_len = head.len() - start;
                let rpid = f.rp.as_ref().filter(|_| self.cfg.cn_tag).map(|_| f.rpid);
                let (pcp, vid) = (f.key.priority, self.cfg.vid);
                // When this frame became ready for the line: its PAUSE ended, and its flow's
                // pacer let it go. A flow with no limiter never starts its pacer, which then
                // holds the instant its queue last went from empty to backlogged (`wake`), the
                // earliest its head can have been ready.
                let ready = self.pause.until(pcp).max(f.pacer.next_free());
                // When its pacers and PAUSE let this frame start (before they are charged).
                let due = self.line.next_free().max(ready);
                // The departure stamp: when the line starts the frame, back-dated by at most
                // the catch-up (`LineClock::start`), and not before the frame was ready. The
                // line's own `next_free` moves on only when the whole agent was idle, so while
                // one flow waits on its limiter the line may sit idle unseen: a frame of
                // another flow arriving then was stamped up to the catch-up before it existed
                // (5 ms early on the fan-in victim's h1 at S = 100, where every frame of its
                // unlimited f6 was stamped late at the switch). The line itself is still
                // charged from its `next_free`: starting it at a later flow's `ready` instead
                // would throw away the catch-up of another flow's frames that were ready
                // earlier and waited on a late loop (the round-robin serves flows in turn, not
                // in ready order), which at S = 10 cut the fan-in victim's f6 from 700 to
                // 380-460 Mb/s on a 1 Gb/s line it shares with f1.
                let stamp = self
                    .cfg
                    .departure_stamps
                    .then(|| due.max(now - self.cfg.catch_up));
                let len;
                let tagged = match layout {
                    Some(l) => tag_walked_in_place(head, start, l, pcp, vid, rpid),
                    None => tag_in_place(head, start, pcp, vid, rpid),
                };
                if let Some(untag) = tagged {
                    // The frame's own buffer goes up; a refused frame is put back untagged.
                    len = head.len();
                    if let Some(at) = stamp {
                        generated::set_departure(head, at);
                    }
                    if !tx(head) {
                        untag.restore(head);
                        self.ring.push_front(idx);
                        break 'send;
                    }
                } else {
                    let frame = &head[start..];
                    if tag_for_uplink(frame, pcp, vid, rpid, &mut self.txbuf).is_err() {
                        // Host frames were walked when classified; keep them as they are.
                        self.txbuf.clear();
                        self.txbuf.extend_from_slice(frame);
                    }
                    len = self.txbuf.len();
                    if let Some(at) = stamp {
                        generated::set_departure(&mut self.txbuf, at);
                    }
                    if !tx(&mut self.txbuf) {
                        self.ring.push_front(idx);
                        break 'send;
                    }
                }
                self.tx_late.record(now.saturating_since(due).as_nanos());
                // The buffer left is the frame's or the spare `tx` swapped in for it.
                if let Some((_, b, _)) = f.queue.pop_front() {
                    f.qbytes -= host_len as u64;
                    self.pool.give_frame_of(b, host_len);
                }
                self.backlog_frames -= 1;
                self.line.start(now, len);
                f.tx_frames += 1;
                f.tx_bytes += len as u64;
                f.last_active = now;
                self.stats.uplink_tx_frames += 1;
                self.stats.uplink_tx_bytes += len as u64;
                if let Some(rp) = f.rp.as_mut() {
                    f.pacer.start(now, len);
                    let before = rp.rate();
                    rp.on_bytes_sent(now, len as u64, &mut self.rng);
                    if rp.rate() != before {
                        self.after_increase(now, idx);
                    }
                }
                if let Some(f) = self.flows[idx].as_mut() {
                    if f.queue.is_empty() {
                        f.in_ring = false;
                    } else {
                        self.ring.push_back(idx);
                    }
                }
                continue 'send;
            }
            break;
        }
    }

    /// Frames for the host, oldest first; `tx` returns false when there is no room.
    pub fn poll_host(&mut self, _now: Instant, tx: &mut dyn FnMut(&[u8]) -> bool) {
        while let Some((start, b)) = self.host_q.front() {
            if !tx(&b[*start..]) {
                break;
            }
            if let Some((start, b)) = self.host_q.pop_front() {
                self.host_bytes -= (b.len() - start) as u64;
                self.pool.give_frame(b);
                self.stats.host_tx_frames += 1;
            }
        }
    }

    /// The next instant something is due: a limiter or the line frees up for a backlogged flow,
    /// an RP timer fires, a PAUSE ends; `Instant::ZERO` when frames for the host are waiting.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.host_q.is_empty() {
            return Some(Instant::ZERO);
        }
        let mut t: Option<Instant> = None;
        let mut earliest = |x: Instant| t = Some(t.map_or(x, |t: Instant| t.min(x)));
        for f in self.live.iter().filter_map(|&i| self.flows[i].as_ref()) {
            if let Some(rp) = &f.rp {
                earliest(rp.next_timer());
            }
            if !f.queue.is_empty() {
                let mut due = self.line.next_free().max(self.pause.until(f.key.priority));
                if f.rp.is_some() {
                    due = due.max(f.pacer.next_free());
                }
                earliest(due);
            }
        }
        t
    }

    /// Discards the host frames queued on flow `flow` (a [`FlowView::flow`]) and returns how
    /// many there were: an application that stopped and reported them unsent takes them back,
    /// so that none leaves after its report. The flow itself, its limiter and its counters
    /// stay; an unknown flow has none.
    pub fn discard_queued(&mut self, flow: u32) -> u64 {
        let Agent {
            flows,
            pool,
            backlog_frames,
            ..
        } = self;
        let Some(f) = flows.get_mut(flow as usize).and_then(Option::as_mut) else {
            return 0;
        };
        let n = f.queue.len();
        for (start, b, _) in f.queue.drain(..) {
            let len = b.len() - start;
            pool.give_frame_of(b, len);
        }
        f.qbytes = 0;
        // The round-robin ring drops the flow when it next comes round to its empty queue.
        *backlog_frames -= n;
        n as u64
    }

    /// Every flow, for `ctl show flows`.
    pub fn flows(&self) -> Vec<FlowView> {
        let line = self.cfg.line_rate.bps();
        self.flows
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.as_ref().map(|f| (i, f)))
            .map(|(i, f)| FlowView {
                flow: i as u32,
                dst: f.key.dst.to_string(),
                priority: f.key.priority,
                five_tuple: f.key.l4.map(|t| {
                    format!(
                        "{} {}:{} > {}:{}",
                        t.proto, t.src_ip, t.src_port, t.dst_ip, t.dst_port
                    )
                }),
                rpid: f.rpid,
                cr_bps: f.rp.as_ref().map_or(line, |r| r.rate().bps()),
                tr_bps: f.rp.as_ref().map_or(line, |r| r.target().bps()),
                state: f.rp.as_ref().map_or(RpState::Released, |r| r.state()),
                cps: f.rp.as_ref().map_or_else(Vec::new, |r| {
                    r.cps()
                        .into_iter()
                        .map(|c| CpView {
                            cpid: c.cpid,
                            cr_bps: c.cr.bps(),
                            tr_bps: c.tr.bps(),
                        })
                        .collect()
                }),
                er_cpid: f.rp.as_ref().and_then(|r| r.er_cpid()),
                cnm_rx: f.cnm_rx,
                rate_feedback_rx: f.fb_rx,
                tx_frames: f.tx_frames,
                tx_bytes: f.tx_bytes,
                queued_bytes: f.qbytes,
                queued_frames: f.queue.len() as u64,
                backpressure: f.backpressure,
            })
            .collect()
    }

    /// The current rate of the flow with this RPID (`None` if no such flow; line rate if
    /// released).
    pub fn flow_rate(&self, rpid: u16) -> Option<Rate> {
        let f = self
            .flows
            .get(usize::from(rpid).checked_sub(1)?)?
            .as_ref()?;
        Some(f.rp.as_ref().map_or(self.cfg.line_rate, |r| r.rate()))
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> AgentStats {
        let mut s = self.stats.clone();
        s.flows = self.index.len() as u64;
        s.limited_flows = self
            .flows
            .iter()
            .flatten()
            .filter(|f| f.rp.is_some())
            .count() as u64;
        s.buffers_allocated = self.pool.allocated();
        s.tx_late_frames = self.tx_late.late();
        s.tx_late_p50_ns = self.tx_late.quantile_ns(0.5);
        s.tx_late_p99_ns = self.tx_late.quantile_ns(0.99);
        s.tx_late_max_ns = self.tx_late.max_ns();
        s
    }

    /// Hands every pending event to `f`, oldest first.
    pub fn drain_events(&mut self, f: &mut dyn FnMut(&Event)) {
        while let Some(e) = self.events.pop_front() {
            f(&e);
        }
    }

    fn push_event(&mut self, e: Event) {
        if self.events.len() >= self.cfg.event_capacity {
            self.stats.events_lost += 1;
        } else {
            self.events.push_back(e);
        }
    }

    /// A slot for a new flow: a free one, or the longest-idle released flow with nothing
    /// queued that has been idle for `flow_idle_timeout`.
    fn new_flow(&mut self, now: Instant, key: ClassKey) -> Option<usize> {
        let idx = match self.flows.iter().position(Option::is_none) {
            Some(i) => {
                if let Err(at) = self.live.binary_search(&i) {
                    self.live.insert(at, i);
                }
                i
            }
            None => {
                let timeout = self.cfg.flow_idle_timeout;
                let (i, _) = self
                    .flows
                    .iter()
                    .enumerate()
                    .filter_map(|(i, f)| f.as_ref().map(|f| (i, f)))
                    .filter(|(_, f)| {
                        f.rp.is_none()
                            && f.queue.is_empty()
                            && now.saturating_since(f.last_active) >= timeout
                    })
                    .min_by_key(|(_, f)| f.last_active)?;
                if let Some(old) = self.flows[i].take() {
                    self.index.remove(&old.key);
                }
                // The memo may name the slot for the flow that held it.
                self.memo.forget();
                i
            }
        };
        self.flows[idx] = Some(Flow {
            key,
            // Slots are fewer than 4096 (validated), so the RPID fits and is never 0.
            rpid: (idx + 1) as u16,
            queue: VecDeque::new(),
            qbytes: 0,
            pacer: Pacer::new(
                self.cfg.line_rate,
                self.cfg.wire_overhead,
                self.cfg.catch_up,
            ),
            rp: None,
            in_ring: false,
            last_active: now,
            cnm_rx: 0,
            fb_rx: 0,
            tx_frames: 0,
            tx_bytes: 0,
            backpressure: 0,
        });
        self.index.insert(key, idx);
        Some(idx)
    }

    fn run_timers(&mut self, now: Instant) {
        for k in 0..self.live.len() {
            let idx = self.live[k];
            let Some(rp) = self.flows[idx].as_mut().and_then(|f| f.rp.as_mut()) else {
                continue;
            };
            if rp.next_timer() <= now {
                let before = rp.rate();
                rp.on_timer(now, &mut self.rng);
                if matches!(rp, Rp::Er(e) if e.expired()) {
                    self.stats.er_timeouts += 1;
                }
                if rp.rate() != before || rp.released() {
                    self.after_increase(now, idx);
                }
            }
        }
    }

    /// The RP of flow `idx` raised its rate: follow it with the pacer, trace, and release the
    /// limiter at line rate.
    fn after_increase(&mut self, now: Instant, idx: usize) {
        let Some(f) = self.flows[idx].as_mut() else {
            return;
        };
        let Some(rp) = f.rp.as_ref() else {
            return;
        };
        let (rate, target, state, released) = (rp.rate(), rp.target(), rp.state(), rp.released());
        f.pacer.set_rate(rate);
        let (flow, rpid) = (idx as u32, f.rpid);
        if released {
            f.rp = None;
            self.stats.limiters_released += 1;
            self.push_event(Event::Released {
                at: now,
                flow,
                rpid,
            });
        } else {
            self.push_event(Event::RateChange {
                at: now,
                flow,
                rpid,
                cr_bps: rate.bps(),
                tr_bps: target.bps(),
                state,
            });
        }
    }

    fn ignore_cnm(&mut self, now: Instant, reason: CnmIgnored) {
        match reason {
            CnmIgnored::NotForUs => self.stats.cnm_not_for_us += 1,
            CnmIgnored::BadVersion => self.stats.cnm_bad_version += 1,
            CnmIgnored::Malformed => self.stats.cnm_malformed += 1,
            CnmIgnored::Unmatched => self.stats.cnm_unmatched += 1,
            CnmIgnored::Mode => self.stats.cnm_mode_ignored += 1,
            CnmIgnored::UnknownCp => self.stats.cnm_unknown_cp += 1,
        }
        self.push_event(Event::CnmIgnored { at: now, reason });
    }

    /// A CNM (802.1Q clause 33.4) from the network: find the flow(s) it is about by the
    /// encapsulated DA and priority — narrowed by the RPID of its CN-TAG when present, and by
    /// the encapsulated IP header in `five-tuple` mode — and feed their reaction points.
    fn handle_cnm(&mut self, now: Instant, frame: &[u8]) {
        let Ok((info, repr)) = cnm::parse_frame(frame) else {
            return self.ignore_cnm(now, CnmIgnored::Malformed);
        };
        if self.cfg.mac.is_some_and(|m| m != info.dst) {
            return self.ignore_cnm(now, CnmIgnored::NotForUs);
        }
        if repr.version != 0 {
            return self.ignore_cnm(now, CnmIgnored::BadVersion);
        }
        if repr.qntz_fb == 0 {
            return self.ignore_cnm(now, CnmIgnored::Malformed);
        }
        if self.cfg.rp_mode.explicit_rate() {
            return self.ignore_cnm(now, CnmIgnored::Mode);
        }
        // Optional origin check (`cnm_bridges`): QCN itself authenticates nothing.
        if !self.cfg.cnm_bridges.is_empty() && !self.cfg.cnm_bridges.contains(&repr.cpid.mac()) {
            return self.ignore_cnm(now, CnmIgnored::UnknownCp);
        }
        let (dst, prio) = (repr.encap_dst, repr.encap_priority);
        // RPID: the CNM's own copied CN-TAG, or the one at the start of the encapsulated MSDU.
        let msdu = repr.encap_msdu;
        let rpid = info.rpid.filter(|r| *r != 0).or_else(|| {
            (msdu.len() >= 4 && msdu[..2] == u16::from(EtherType::CnTag).to_be_bytes())
                .then(|| u16::from_be_bytes([msdu[2], msdu[3]]))
                .filter(|r| *r != 0)
        });
        self.matches.clear();
        let by_rpid = rpid
            .and_then(|r| usize::from(r).checked_sub(1))
            .filter(|&i| {
                self.flows
                    .get(i)
                    .and_then(Option::as_ref)
                    .is_some_and(|f| f.key.dst == dst && f.key.priority == prio)
            });
        if let Some(i) = by_rpid {
            self.matches.push(i);
        } else {
            let l4 = encap_five_tuple(dst, msdu, prio);
            for (i, f) in self.flows.iter().enumerate() {
                if let Some(f) = f {
                    if f.key.dst == dst && f.key.priority == prio {
                        self.matches.push(i);
                    }
                }
            }
            if let Some(l4) = l4 {
                let exact: Option<usize> = self
                    .matches
                    .iter()
                    .copied()
                    .find(|&i| self.flows[i].as_ref().is_some_and(|f| f.key.l4 == Some(l4)));
                if let Some(i) = exact {
                    self.matches.clear();
                    self.matches.push(i);
                }
            }
        }
        if self.matches.is_empty() {
            return self.ignore_cnm(now, CnmIgnored::Unmatched);
        }
        self.stats.cnm_rx += 1;
        for k in 0..self.matches.len() {
            let idx = self.matches[k];
            let Some(f) = self.flows[idx].as_mut() else {
                continue;
            };
            let rp = match f.rp.as_mut() {
                Some(rp) => rp,
                None => {
                    self.stats.limiters_created += 1;
                    f.pacer.wake(now);
                    f.rp.insert(Rp::new(&self.cfg, now, &mut self.rng))
                }
            };
            if let CnmOutcome::Displaced(_) = rp.on_cnm(now, repr.qntz_fb, repr.cpid, &mut self.rng)
            {
                self.stats.bs_cp_overflow += 1;
            }
            let (cr, tr, released) = (rp.rate(), rp.target(), rp.released());
            f.pacer.set_rate(cr);
            f.cnm_rx += 1;
            let ev = Event::Cnm {
                at: now,
                flow: idx as u32,
                rpid: f.rpid,
                cpid: repr.cpid,
                qntz_fb: repr.qntz_fb,
                cr_bps: cr.bps(),
                tr_bps: tr.bps(),
            };
            self.push_event(ev);
            if released {
                // Only when the decrease cannot go below the line rate (`rpg_min_rate` equal
                // to it), which empties a QCN/BS table at once: release now rather than wait
                // for a timer such a table no longer has.
                self.after_increase(now, idx);
            }
        }
    }
}

impl Agent {
    /// An explicit-rate feedback message (EtherType 0x88B5, `cnm_proto::wire::rate_feedback`)
    /// from the network: checked like a CNM (addressed to us, version 0), matched to the flows
    /// with its encapsulated DA and priority (it carries neither RPID nor MSDU, so in
    /// `five-tuple` mode every flow to that destination and priority follows it), and fed to
    /// their explicit-rate sources. Other modes count and drop it.
    fn handle_rate_feedback(&mut self, now: Instant, frame: &[u8], info: &L2Info) {
        self.stats.rate_feedback_rx += 1;
        let pdu = frame.get(info.payload_offset..).unwrap_or(&[]);
        let Ok(repr) = RateFeedback::new_checked(pdu).and_then(|m| RateFeedbackRepr::parse(&m))
        else {
            self.stats.rate_feedback_malformed += 1;
            return;
        };
        if self.cfg.mac.is_some_and(|m| m != info.dst) {
            self.stats.rate_feedback_not_for_us += 1;
            return;
        }
        if repr.version != 0 {
            self.stats.rate_feedback_bad_version += 1;
            return;
        }
        if !self.cfg.rp_mode.explicit_rate() {
            self.stats.rate_feedback_mode_ignored += 1;
            return;
        }
        self.matches.clear();
        for (i, f) in self.flows.iter().enumerate() {
            if let Some(f) = f {
                if f.key.dst == repr.encap_dst && f.key.priority == repr.encap_priority {
                    self.matches.push(i);
                }
            }
        }
        if self.matches.is_empty() {
            self.stats.rate_feedback_unmatched += 1;
            return;
        }
        self.stats.rate_feedback_matched += 1;
        for k in 0..self.matches.len() {
            let idx = self.matches[k];
            let Some(f) = self.flows[idx].as_mut() else {
                continue;
            };
            f.fb_rx += 1;
            let created = f.rp.is_none();
            let rp =
                f.rp.get_or_insert_with(|| Rp::new(&self.cfg, now, &mut self.rng));
            let before = (rp.rate(), rp.er_cpid());
            if rp.on_rate_feedback(now, repr.rate, repr.cpid) == ErOutcome::Ignored {
                self.stats.rate_feedback_overridden += 1;
            }
            let (cr, released) = (rp.rate(), rp.released());
            let changed = created || (cr, rp.er_cpid()) != before;
            if released {
                if created {
                    // Feedback at or above the line rate for an unlimited flow: stays unlimited.
                    f.rp = None;
                } else {
                    self.after_increase(now, idx);
                }
                continue;
            }
            if created {
                self.stats.limiters_created += 1;
                f.pacer.wake(now);
            }
            f.pacer.set_rate(cr);
            if changed {
                let ev = Event::RateFeedback {
                    at: now,
                    flow: idx as u32,
                    rpid: f.rpid,
                    cpid: repr.cpid,
                    rate_bps: repr.rate.bps(),
                    cr_bps: cr.bps(),
                };
                self.push_event(ev);
            }
        }
    }
}

/// The IP 5-tuple of a CNM's encapsulated MSDU (which starts at the sampled frame's EtherType
/// after its VLAN tag), if it holds one.
fn encap_five_tuple(
    dst: EthernetAddress,
    msdu: &[u8],
    prio: u8,
) -> Option<cnm_proto::wire::FiveTuple> {
    let mut buf = [0u8; 12 + wire::cnm::MAX_MSDU_LEN];
    let n = msdu.len().min(wire::cnm::MAX_MSDU_LEN);
    if n < 2 {
        return None;
    }
    buf[..6].copy_from_slice(&dst.0);
    buf[12..12 + n].copy_from_slice(&msdu[..n]);
    FlowKey::extract(&buf[..12 + n], prio).ok()?.l4
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Release, RpParams};
    use cnm_proto::wire::{build_cnm, CnmParams, CpId};
    use cnm_proto::{Bytes, Duration};

    const HOST: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
    const PEER: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
    const PEER2: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 3]);
    const SWITCH: EthernetAddress = EthernetAddress([2, 0xee, 0, 0, 0, 1]);

    fn frame(dst: EthernetAddress, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[..6].copy_from_slice(&dst.0);
        f[6..12].copy_from_slice(&HOST.0);
        f[12..14].copy_from_slice(&[0x88, 0xb6]);
        f
    }

    fn cfg(line: Rate) -> AgentConfig {
        AgentConfig {
            line_rate: line,
            mac: Some(HOST),
            rp: RpParams {
                rp_jitter: 0.0,
                ..RpParams::default()
            },
            ..AgentConfig::default()
        }
    }

    /// A CNM as a CP would send it about `sampled` (a frame as sent up by the agent).
    fn cnm_about(sampled: &[u8], fb: u8) -> Vec<u8> {
        let mut out = vec![0u8; 128];
        let p = CnmParams {
            cp_mac: SWITCH,
            cpid: CpId::output(SWITCH, 1, 3),
            qntz_fb: fb,
            q_offset: 10,
            q_delta: 2,
            cnm_priority: 6,
            default_priority: 0,
            max_msdu: 64,
        };
        let n = build_cnm(sampled, &p, &mut out).unwrap();
        out.truncate(n);
        out
    }

    /// Three 1000-octet frames handed over at t0 on a 1 Gb/s line, sent up with a 4-octet
    /// priority tag (1004 + 4 + 20 = 1028 octets = 8224 ns each with the wire overhead): the
    /// first may start at t0, the second at t0 + 8224, the third at t0 + 16 448. Polled at
    /// t0 + 30 µs, all three leave then, 30 000, 21 776 and 13 552 ns late (the catch-up
    /// back-dates them; their lateness is the poll's). Then one frame polled on time: 0.
    /// Median of the four is the second smallest's bucket (13 552 → [12 288, 14 336), upper
    /// 14 335), the 99th percentile the largest, 30 000.
    #[test]
    fn frames_sent_after_their_instant_are_counted_late() {
        let mut c = cfg(Rate::from_gbps(1));
        c.catch_up = Duration::from_millis(1);
        let mut a = Agent::new(c, Rng::new(1)).unwrap();
        let t0 = Instant::from_nanos(1_000_000);
        for _ in 0..3 {
            a.handle_host(t0, &frame(PEER, 1000)).unwrap();
        }
        assert_eq!(send_all(&mut a, t0 + Duration::from_micros(30)).len(), 3);
        let t1 = Instant::from_nanos(2_000_000);
        a.handle_host(t1, &frame(PEER, 1000)).unwrap();
        assert_eq!(send_all(&mut a, t1).len(), 1);
        let s = a.stats();
        assert_eq!(s.tx_late_frames, 3);
        assert_eq!(s.tx_late_max_ns, 30_000);
        assert_eq!(s.tx_late_p50_ns, 14_335);
        assert_eq!(s.tx_late_p99_ns, 30_000);
    }

    /// The same three frames, generated ones (magic at the payload's start), with departure
    /// stamps on: each carries the instant it could start (t0, t0 + 8224, t0 + 16 448 ns),
    /// not the poll's t0 + 30 µs; a frame that is not generated is left as it was, and with
    /// the stamps off nothing is written. A frame polled 3 ms after it could start is stamped
    /// as the line charges it, back-dated by the catch-up (1 ms) only: t1 + 2 ms.
    #[test]
    fn departure_stamps_carry_each_frames_instant() {
        let generated_frame = || {
            let mut f = frame(PEER, 1000);
            f[14..18].copy_from_slice(&generated::MAGIC.to_be_bytes());
            f
        };
        let t0 = Instant::from_nanos(1_000_000);
        let mut c = cfg(Rate::from_gbps(1));
        c.catch_up = Duration::from_millis(1);
        c.departure_stamps = true;
        let mut a = Agent::new(c.clone(), Rng::new(1)).unwrap();
        for _ in 0..3 {
            a.handle_host(t0, &generated_frame()).unwrap();
        }
        a.handle_host(t0, &frame(PEER, 1000)).unwrap();
        let out = send_all(&mut a, t0 + Duration::from_micros(30));
        let stamps: Vec<_> = out.iter().map(|f| generated::departure(f)).collect();
        assert_eq!(
            stamps,
            [
                Some(t0),
                Some(t0 + Duration::from_nanos(8224)),
                Some(t0 + Duration::from_nanos(16_448)),
                None
            ]
        );
        // The stamp is the only change: the frame as sent up with the field cleared is the
        // frame sent with the stamps off.
        c.departure_stamps = false;
        let mut b = Agent::new(c, Rng::new(1)).unwrap();
        b.handle_host(t0, &generated_frame()).unwrap();
        let plain = send_all(&mut b, t0 + Duration::from_micros(30));
        assert_eq!(generated::departure(&plain[0]), None);
        let mut first = out[0].clone();
        let at = generated::departure_offset(&first).unwrap();
        first[at..at + 8].fill(0);
        assert_eq!(first, plain[0]);
        let t1 = Instant::from_nanos(10_000_000);
        a.handle_host(t1, &generated_frame()).unwrap();
        let late = send_all(&mut a, t1 + Duration::from_millis(3));
        assert_eq!(
            generated::departure(&late[0]),
            Some(t1 + Duration::from_millis(2))
        );
        assert_eq!(
            a.stats().tx_late_max_ns,
            3_000_000,
            "the lateness is the pacers'"
        );
    }

    /// A flow held back by its limiter keeps the agent backlogged, so the uplink line is not
    /// woken when a frame of another, unlimited flow arrives after the line sat idle. That
    /// frame is stamped when it arrived, t1 + 100 µs = t0 + 600 µs, not back-dated into the
    /// idle time to just after the limited flow's last frame (the line's own `next_free`,
    /// t0 + 16.48 µs: that frame was itself back-dated to its pacer's instant), as the 1 ms
    /// catch-up allowed before the stamp took the frame's ready time.
    #[test]
    fn a_frame_is_not_back_dated_into_line_idle_time_another_flow_waited_through() {
        let generated_frame = |dst| {
            let mut f = frame(dst, 1000);
            f[14..18].copy_from_slice(&generated::MAGIC.to_be_bytes());
            f
        };
        let mut c = cfg(Rate::from_gbps(1));
        c.catch_up = Duration::from_millis(1);
        c.departure_stamps = true;
        let mut a = Agent::new(c, Rng::new(1)).unwrap();
        let t0 = Instant::from_nanos(1_000_000);
        a.handle_host(t0, &generated_frame(PEER)).unwrap();
        let sent = send_all(&mut a, t0);
        // Ten CNMs of the largest feedback: the flow to PEER at 10 Mb/s or less (5 Mb/s at
        // least, `rpg_min_rate`), a 1000-octet frame every 0.8 ms or more.
        for _ in 0..10 {
            a.handle_uplink(t0, &cnm_about(&sent[0], 63));
        }
        let limited = a.flows()[0].cr_bps;
        assert!(limited <= 10_000_000, "CR {limited}");
        for _ in 0..10 {
            a.handle_host(t0, &generated_frame(PEER)).unwrap();
        }
        let t1 = t0 + Duration::from_micros(500);
        let first = send_all(&mut a, t1);
        assert_eq!(first.len(), 1, "one frame of the limited flow");
        let tb = t1 + Duration::from_micros(100);
        a.handle_host(tb, &generated_frame(PEER2)).unwrap();
        let out = send_all(&mut a, tb);
        assert_eq!(out.len(), 1, "the unlimited flow's frame only");
        assert_eq!(&out[0][..6], &PEER2.0);
        assert_eq!(generated::departure(&out[0]), Some(tb));
    }

    fn send_all(a: &mut Agent, now: Instant) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        a.poll_uplink(now, &mut |f| {
            out.push(f.to_vec());
            true
        });
        out
    }

    /// Discarded frames never leave: the flow's queue is empty, its limit free again, and the
    /// agent has nothing due; another flow's frames are untouched.
    #[test]
    fn discarded_frames_never_leave() {
        let mut a = Agent::new(cfg(Rate::from_gbps(1)), Rng::new(1)).unwrap();
        let t = Instant::from_nanos(1_000_000);
        for _ in 0..3 {
            a.handle_host(t, &frame(PEER, 100)).unwrap();
        }
        // The line takes one frame at t; two wait for it.
        assert_eq!(send_all(&mut a, t).len(), 1);
        let views = a.flows();
        assert_eq!(views.len(), 1);
        assert_eq!(views[0].queued_frames, 2);
        assert_eq!(a.discard_queued(views[0].flow + 1), 0);
        assert_eq!(a.discard_queued(views[0].flow), 2);
        assert_eq!(a.flows()[0].queued_frames, 0);
        assert_eq!(a.flows()[0].queued_bytes, 0);
        assert_eq!(a.poll_timeout(), None);
        assert!(send_all(&mut a, t + Duration::from_millis(1)).is_empty());
        // The flow goes on: a new frame is taken and sent.
        a.handle_host(t, &frame(PEER, 100)).unwrap();
        assert_eq!(send_all(&mut a, t + Duration::from_millis(2)).len(), 1);
        assert_eq!(a.flows()[0].tx_frames, 2);
    }

    /// `handle_uplink_buf` says which frames it queued for the host (their buffer moved and a
    /// spare came back) and which it consumed or dropped (the buffer is the caller's still),
    /// and a queued frame leaves `poll_timeout` as it was once the host has taken it.
    #[test]
    fn uplink_buf_says_whether_the_frame_went_to_the_host() {
        let mut a = Agent::new(cfg(Rate::from_gbps(1)), Rng::new(1)).unwrap();
        let t = Instant::from_nanos(1_000_000);
        let f = frame(PEER, 100);
        a.handle_host(t, &f).unwrap();
        let up = send_all(&mut a, t);
        let before = a.poll_timeout();
        let mut down = Vec::new();
        tag_for_uplink(&frame(HOST, 80), 3, 0, Some(5), &mut down).unwrap();
        let mut buf = down.clone();
        assert!(a.handle_uplink_buf(t, &mut buf));
        assert_eq!(a.poll_timeout(), Some(Instant::ZERO));
        let mut got = Vec::new();
        a.poll_host(t, &mut |f| {
            got.push(f.to_vec());
            true
        });
        assert_eq!(got, vec![frame(HOST, 80)]);
        assert_eq!(a.poll_timeout(), before);
        // Consumed (a CNM: the flow gets a limiter) or not for this host: the buffer stays.
        let cnm = cnm_about(&up[0], 32);
        let mut buf = cnm.clone();
        assert!(!a.handle_uplink_buf(t, &mut buf));
        assert_eq!(buf, cnm);
        assert_eq!(a.stats().limiters_created, 1);
        let other = frame(PEER, 80);
        let mut buf = other.clone();
        assert!(!a.handle_uplink_buf(t, &mut buf));
        assert_eq!(buf, other);
        let mut buf = vec![0u8; 3];
        assert!(!a.handle_uplink_buf(t, &mut buf));
        assert_eq!(a.stats().uplink_malformed, 1);
    }

    #[test]
    fn tags_up_untags_down_and_consumes_feedback() {
        let mut a = Agent::new(cfg(Rate::from_gbps(1)), Rng::new(1)).unwrap();
        let t = Instant::from_nanos(1_000_000);
        let f = frame(PEER, 100);
        a.handle_host(t, &f).unwrap();
        let up = send_all(&mut a, t);
        assert_eq!(up.len(), 1);
        let info = walk(&up[0]).unwrap();
        assert_eq!(info.priority(0), 3);
        assert_eq!(info.vlan.unwrap().vid, 0);
        assert_eq!(info.rpid, None);
        // A CNM about it creates a limiter: the next frames carry a CN-TAG with the RPID.
        a.handle_uplink(t, &cnm_about(&up[0], 32));
        assert_eq!(a.stats().cnm_rx, 1);
        assert_eq!(a.stats().limiters_created, 1);
        assert_eq!(a.flow_rate(1), Some(Rate::from_mbps(750)));
        let v = a.flows();
        assert_eq!(v[0].rpid, 1);
        assert_eq!(v[0].state, RpState::Fr);
        assert_eq!(v[0].cr_bps, 750_000_000);
        assert_eq!(v[0].tr_bps, 1_000_000_000);
        a.handle_host(t, &f).unwrap();
        let up2 = send_all(&mut a, t + Duration::from_millis(1));
        assert_eq!(walk(&up2[0]).unwrap().rpid, Some(1));
        a.cfg.cn_tag = false;
        a.handle_host(t, &f).unwrap();
        let plain = send_all(&mut a, t + Duration::from_millis(2));
        assert_eq!(walk(&plain[0]).unwrap().rpid, None);
        a.cfg.cn_tag = true;
        // A second CNM, now carrying the RPID.
        a.handle_uplink(t, &cnm_about(&up2[0], 32));
        assert_eq!(a.flow_rate(1), Some(Rate::from_bps(562_500_000)));
        // Frames from the network: tags removed before the host sees them.
        let mut down = Vec::new();
        tag_for_uplink(&frame(HOST, 80), 3, 0, Some(5), &mut down).unwrap();
        a.handle_uplink(t, &down);
        // Unicast for another station: not delivered.
        a.handle_uplink(t, &frame(PEER, 80));
        assert_eq!(a.stats().uplink_not_for_host, 1);
        let mut got = Vec::new();
        a.poll_host(t, &mut |f| {
            got.push(f.to_vec());
            true
        });
        assert_eq!(got, vec![frame(HOST, 80)]);
        let mut ev = Vec::new();
        a.drain_events(&mut |e| ev.push(*e));
        assert!(matches!(
            ev[0],
            Event::Cnm {
                qntz_fb: 32,
                cr_bps: 750_000_000,
                ..
            }
        ));
        assert_eq!(a.stats().host_tx_frames, 1);
    }

    /// A host frame handed over with headroom is tagged in its own buffer and that buffer goes
    /// up (a refused frame is put back as it was); without the matching headroom the frame
    /// is copied. The octets on the wire are the same either way.
    #[test]
    fn frames_with_headroom_go_up_in_their_own_buffer() {
        let mut a = Agent::new(cfg(Rate::from_gbps(1)), Rng::new(1)).unwrap();
        let t = Instant::from_nanos(1_000_000);
        let f = frame(PEER, 100);
        // Sends the frame handed over after `room` octets; returns what went up and whether
        // it went up in the buffer handed over. The first offer to `tx` is refused.
        let send = |a: &mut Agent, at: Instant, room: usize| {
            let mut buf = vec![0xaa; room];
            buf.extend_from_slice(&f);
            let ptr = buf.as_ptr();
            a.handle_host_buf_at(at, &mut buf, room).unwrap();
            let mut offered = Vec::new();
            a.poll_uplink_buf(at, &mut |b| {
                offered.push(b.clone());
                false
            });
            let mut sent = Vec::new();
            a.poll_uplink_buf(at, &mut |b| {
                offered.push(b.clone());
                sent.push(std::mem::take(b));
                true
            });
            assert_eq!(offered.len(), 2);
            assert_eq!(
                offered[0], offered[1],
                "a refused frame is offered again unchanged"
            );
            assert_eq!(sent.len(), 1);
            (sent[0].clone(), sent[0].as_ptr() == ptr)
        };
        let mut expect = Vec::new();
        tag_for_uplink(&f, 3, 0, None, &mut expect).unwrap();
        // No limiter yet: the 802.1Q tag fills 4 octets of room.
        let ms = |n: u64| t + Duration::from_millis(n);
        assert_eq!(send(&mut a, ms(0), 4), (expect.clone(), true));
        assert_eq!(send(&mut a, ms(1), 8), (expect.clone(), false));
        assert_eq!(send(&mut a, ms(2), 0), (expect.clone(), false));
        a.handle_uplink(ms(2), &cnm_about(&expect, 32));
        assert_eq!(a.stats().limiters_created, 1);
        // Rate-limited: the tag and the CN-TAG fill 8.
        tag_for_uplink(&f, 3, 0, Some(1), &mut expect).unwrap();
        assert_eq!(send(&mut a, ms(3), UPLINK_HEADROOM), (expect.clone(), true));
        assert_eq!(send(&mut a, ms(4), 4), (expect, false));
        let s = a.stats();
        assert_eq!((s.host_rx_frames, s.uplink_tx_frames), (5, 5));
        assert!(a.handle_host_buf_at(t, &mut vec![0; 20], 21).is_err());
        assert_eq!(a.stats().host_malformed, 1);
    }

    #[test]
    fn the_line_rate_changes_at_run_time() {
        // 100 frames of 1000 octets queued at once; the line paces them. At 100 Mb/s one
        // frame takes 80 us (wire overhead aside), at 10 Mb/s 800 us.
        let mut a = Agent::new(cfg(Rate::from_mbps(100)), Rng::new(1)).unwrap();
        let t = Instant::from_nanos(1_000_000);
        for _ in 0..100 {
            a.handle_host(t, &frame(PEER, 1000)).unwrap();
        }
        let sent_in = |a: &mut Agent, from: Instant, ms: u64| {
            let mut n = 0;
            for us in (0..ms * 1000).step_by(10) {
                n += send_all(a, from + Duration::from_micros(us)).len();
            }
            n
        };
        let fast = sent_in(&mut a, t, 4);
        assert!(
            (45..=55).contains(&fast),
            "{fast} frames in 4 ms at 100 Mb/s"
        );
        let t2 = t + Duration::from_millis(4);
        a.set_line_rate(t2, Rate::from_mbps(10)).unwrap();
        assert_eq!(a.config().line_rate, Rate::from_mbps(10));
        let slow = sent_in(&mut a, t2 + Duration::from_millis(1), 4);
        assert!((4..=7).contains(&slow), "{slow} frames in 4 ms at 10 Mb/s");
        assert!(a.set_line_rate(t2, Rate::from_bps(0)).is_err());
    }

    #[test]
    fn hostile_cnms_are_counted() {
        let mut a = Agent::new(cfg(Rate::from_gbps(1)), Rng::new(1)).unwrap();
        let t = Instant::from_nanos(1);
        a.handle_host(t, &frame(PEER, 100)).unwrap();
        let up = send_all(&mut a, t);
        let good = cnm_about(&up[0], 10);
        // Not for us.
        let mut x = good.clone();
        x[..6].copy_from_slice(&PEER2.0);
        a.handle_uplink(t, &x);
        // Wrong version (top 4 bits of the first PDU octet; PDU after VLAN tag at 18).
        let mut x = good.clone();
        x[18] |= 0x30;
        a.handle_uplink(t, &x);
        // QntzFb 0.
        let mut x = good.clone();
        x[19] &= 0xc0;
        a.handle_uplink(t, &x);
        // Truncated, and an encapsulated MSDU length beyond the frame.
        a.handle_uplink(t, &good[..25]);
        let mut x = good.clone();
        x[40..42].copy_from_slice(&200u16.to_be_bytes());
        a.handle_uplink(t, &x);
        // About a flow we do not have.
        let mut x = good.clone();
        x[34..40].copy_from_slice(&PEER2.0);
        a.handle_uplink(t, &x);
        // An RPID we never gave out: falls back to DA + priority matching.
        a.handle_uplink(t, &[0u8; 3]);
        let s = a.stats();
        assert_eq!(s.cnm_not_for_us, 1);
        assert_eq!(s.cnm_bad_version, 1);
        assert_eq!(s.cnm_malformed, 3);
        assert_eq!(s.cnm_unmatched, 1);
        assert_eq!(s.uplink_malformed, 1);
        assert_eq!(s.cnm_rx, 0);
        assert_eq!(s.limited_flows, 0);
        // Maximal feedback is bounded by rpg_min_dec_fac; repeated, by rpg_min_rate.
        for _ in 0..100 {
            a.handle_uplink(t, &cnm_about(&up[0], 63));
        }
        assert_eq!(a.flow_rate(1), Some(Rate::from_mbps(5)));
        // Random bytes never panic.
        let mut rng = Rng::new(3);
        for _ in 0..2000 {
            let len = rng.below(100) as usize;
            let mut b: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            if len > 14 && rng.below(2) == 0 {
                b[12..14].copy_from_slice(&[0x22, 0xe7]);
            }
            a.handle_uplink(t, &b);
            let _ = a.handle_host(t, &b);
        }
    }

    #[test]
    fn backpressure_without_silent_drop() {
        let c = AgentConfig {
            queue_limit: Bytes::new(10_000),
            ..cfg(Rate::from_mbps(100))
        };
        let mut a = Agent::new(c, Rng::new(1)).unwrap();
        let t = Instant::from_nanos(1);
        let f = frame(PEER, 1000);
        for _ in 0..10 {
            a.handle_host(t, &f).unwrap();
        }
        assert_eq!(a.handle_host(t, &f), Err(HostError::Backpressure));
        assert!(!a.can_accept());
        // Another flow is unaffected, but the caller holds the refused frame first.
        a.handle_host(t, &frame(PEER2, 1000)).unwrap();
        let mut sent = 0;
        a.poll_uplink(t, &mut |_| {
            sent += 1;
            true
        });
        assert_eq!(sent, 1);
        assert!(a.can_accept() || a.flows()[0].queued_frames == 10);
        let mut now = t;
        let mut total = sent;
        while !a.can_accept() {
            now = a.poll_timeout().unwrap();
            a.poll_uplink(now, &mut |_| {
                total += 1;
                true
            });
        }
        a.handle_host(now, &f).unwrap();
        while let Some(d) = a.poll_timeout() {
            now = d;
            a.poll_uplink(now, &mut |_| {
                total += 1;
                true
            });
        }
        // 10 + 1 + 1 frames in, all out.
        assert_eq!(total, 12);
        assert_eq!(a.stats().uplink_tx_frames, 12);
        // A refusing transmitter keeps the frame.
        a.handle_host(now, &f).unwrap();
        a.poll_uplink(now + Duration::from_secs(1), &mut |_| false);
        assert_eq!(a.flows().iter().map(|v| v.queued_frames).sum::<u64>(), 1);
    }

    #[test]
    fn pause_stops_traffic_for_the_requested_time() {
        let mut a = Agent::new(cfg(Rate::from_gbps(1)), Rng::new(1)).unwrap();
        let t = Instant::from_nanos(1_000_000);
        let mut p = vec![0u8; 60];
        let n = wire::build_pause_frame(SWITCH, &MacControlRepr::Pause { quanta: 1000 }, &mut p)
            .unwrap();
        a.handle_uplink(t, &p[..n]);
        assert_eq!(a.stats().pause_rx, 1);
        a.handle_host(t, &frame(PEER, 100)).unwrap();
        // 1000 quanta × 512 bit times at 1 Gb/s = 512 µs.
        let end = t + Duration::from_micros(512);
        assert!(send_all(&mut a, t).is_empty());
        assert!(send_all(&mut a, end - Duration::from_nanos(1)).is_empty());
        assert_eq!(a.poll_timeout(), Some(end));
        assert_eq!(send_all(&mut a, end).len(), 1);
        // PFC on another priority does not stop priority 3; on priority 3 it does.
        let mut times = [0u16; 8];
        times[3] = 100;
        times[4] = 100;
        let r = MacControlRepr::Pfc {
            class_enable: 1 << 4,
            times,
        };
        let n = wire::build_pause_frame(SWITCH, &r, &mut p).unwrap();
        a.handle_uplink(end, &p[..n]);
        a.handle_host(end, &frame(PEER, 100)).unwrap();
        assert_eq!(send_all(&mut a, end + Duration::from_micros(2)).len(), 1);
        let r = MacControlRepr::Pfc {
            class_enable: 1 << 3,
            times,
        };
        let n = wire::build_pause_frame(SWITCH, &r, &mut p).unwrap();
        let t2 = end + Duration::from_micros(10);
        a.handle_uplink(t2, &p[..n]);
        a.handle_host(t2, &frame(PEER, 100)).unwrap();
        assert!(send_all(&mut a, t2 + Duration::from_nanos(51_199)).is_empty());
        assert_eq!(send_all(&mut a, t2 + Duration::from_nanos(51_200)).len(), 1);
    }

    #[test]
    fn idle_flow_recovers_by_timer_and_is_released() {
        // As rp::qcn's idle_flow_is_released_at_max_rate_in_7_and_8_expiries and
        // released_at_line_rate: 7 timer expiries from 750 Mb/s under the default
        // `rp_release = "max-rate"`, 28 under `line-rate`.
        for (release, expiries) in [(Release::MaxRate, 7), (Release::LineRate, 28)] {
            let mut c = cfg(Rate::from_gbps(1));
            c.rp.rp_release = release;
            idle_flow_released_after(c, expiries);
        }
    }

    fn idle_flow_released_after(c: AgentConfig, expiries: usize) {
        let mut a = Agent::new(c, Rng::new(1)).unwrap();
        let t = Instant::from_nanos(1);
        a.handle_host(t, &frame(PEER, 100)).unwrap();
        let up = send_all(&mut a, t);
        a.handle_uplink(t, &cnm_about(&up[0], 32));
        let mut now = t;
        let mut steps = 0;
        while a.stats().limited_flows > 0 {
            now = a.poll_timeout().unwrap();
            a.poll_uplink(now, &mut |_| true);
            steps += 1;
            assert!(steps < 100);
        }
        assert_eq!(steps, expiries);
        assert_eq!(a.stats().limiters_released, 1);
        assert_eq!(a.flows()[0].state, RpState::Released);
        assert_eq!(a.poll_timeout(), None);
        a.handle_host(now, &frame(PEER, 100)).unwrap();
        assert_eq!(walk(&send_all(&mut a, now)[0]).unwrap().rpid, None);
    }

    /// Runs a greedy host for `secs` and returns the largest relative error of the rate
    /// measured over 100 ms windows against `expect` (in the pacer's wire octets).
    fn pacing_error(a: &mut Agent, len: usize, expect: Rate, secs: u64, rng: &mut Rng) -> f64 {
        let f = frame(PEER, len);
        let start = Instant::from_nanos(1_000_000_000);
        let end = start + Duration::from_secs(secs);
        let win = Duration::from_millis(100);
        let nwin = (secs * 10) as usize;
        let mut bytes = vec![0u64; nwin];
        let mut now = start;
        let wire = Pacer::new(expect, true, Duration::ZERO);
        while now < end {
            while a.handle_host(now, &f).is_ok() {}
            // Polls come up to 50 µs late, as a real event loop's would.
            let due = a.poll_timeout().unwrap_or(now).max(now);
            now = due + Duration::from_nanos(rng.below(50_000));
            let w = (now.saturating_since(start).as_nanos() / win.as_nanos()) as usize;
            a.poll_uplink(now, &mut |fr| {
                if let Some(b) = bytes.get_mut(w) {
                    *b += wire.wire_bytes(fr.len()).get();
                }
                true
            });
        }
        let want = expect.bytes_in(win).get() as f64;
        // Skip the first window (start-up burst of at most `catch_up`).
        bytes[1..]
            .iter()
            .map(|b| (*b as f64 - want).abs() / want)
            .fold(0.0, f64::max)
    }

    #[test]
    fn pacing_error_within_two_percent() {
        let mut rng = Rng::new(9);
        for (rate, len) in [
            (Rate::from_mbps(1), 100),
            (Rate::from_mbps(10), 1000),
            (Rate::from_mbps(100), 1500),
            (Rate::from_gbps(1), 1500),
        ] {
            // Unlimited flow: paced by the line.
            let c = AgentConfig {
                rp: RpParams {
                    rpg_min_rate: Rate::from_kbps(100),
                    ..RpParams::default()
                },
                ..cfg(rate)
            };
            let mut a = Agent::new(c, Rng::new(1)).unwrap();
            let e = pacing_error(&mut a, len, rate, 1, &mut rng);
            assert!(e <= 0.02, "line {rate}: error {e}");
            println!("pacing {rate}: line-rate error {:.3} %", e * 100.0);
            // Limited flow at CR on a 10 Gb/s line: a CNM (QntzFb 32) sets CR = 0.75 × the
            // ceiling; byte counter and timer so long that CR stays put.
            let max = Rate::from_bps(rate.bps() * 4 / 3);
            let c = AgentConfig {
                rp: RpParams {
                    rpg_max_rate: Some(max),
                    rpg_min_rate: Rate::from_kbps(100),
                    rpg_byte_reset: Bytes::new(1 << 50),
                    rpg_time_reset: Duration::from_secs(1000),
                    rp_jitter: 0.0,
                    ..RpParams::default()
                },
                ..cfg(Rate::from_gbps(10))
            };
            let mut a = Agent::new(c, Rng::new(1)).unwrap();
            let t = Instant::from_nanos(1);
            a.handle_host(t, &frame(PEER, len)).unwrap();
            let up = send_all(&mut a, t);
            a.handle_uplink(t, &cnm_about(&up[0], 32));
            let cr = a.flow_rate(1).unwrap();
            assert!((cr.as_f64() / rate.as_f64() - 1.0).abs() < 1e-5);
            let e = pacing_error(&mut a, len, cr, 1, &mut rng);
            assert!(e <= 0.02, "limited {rate}: error {e}");
            println!("pacing {rate}: limited-flow error {:.3} %", e * 100.0);
        }
    }

    #[test]
    fn no_allocation_in_steady_state() {
        let mut a = Agent::new(cfg(Rate::from_gbps(1)), Rng::new(1)).unwrap();
        let mut now = Instant::from_nanos(1);
        let f1 = frame(PEER, 1500);
        let f2 = frame(PEER2, 64);
        let mut down = Vec::new();
        tag_for_uplink(&frame(HOST, 1500), 3, 0, None, &mut down).unwrap();
        let run = |a: &mut Agent, now: &mut Instant, n: usize| {
            for _ in 0..n {
                while a.handle_host(*now, &f1).is_ok() && a.handle_host(*now, &f2).is_ok() {}
                a.handle_uplink(*now, &down);
                a.poll_host(*now, &mut |_| true);
                *now = a.poll_timeout().unwrap_or(*now).max(*now);
                a.poll_uplink(*now, &mut |_| true);
            }
        };
        run(&mut a, &mut now, 2000);
        let warm = a.stats().buffers_allocated;
        run(&mut a, &mut now, 20_000);
        assert_eq!(a.stats().buffers_allocated, warm);
        // Bounded by the queue limits: 256 KB per flow of 64..1500-octet frames plus the host
        // queue.
        assert!(warm < 2 * 256_000 / 64 + 1_000_000 / 1500 + 16, "{warm}");
    }

    #[test]
    fn five_tuple_flows_matched_by_encapsulated_ip_header() {
        let udp = |port: u16| {
            let mut f = frame(PEER, 100);
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            let ip = &mut f[14..];
            ip[0] = 0x45;
            ip[9] = 17;
            ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
            ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
            ip[20..22].copy_from_slice(&5000u16.to_be_bytes());
            ip[22..24].copy_from_slice(&port.to_be_bytes());
            f
        };
        let c = AgentConfig {
            flow_key: crate::FlowKeyMode::FiveTuple,
            ..cfg(Rate::from_gbps(1))
        };
        let mut a = Agent::new(c, Rng::new(1)).unwrap();
        let t = Instant::from_nanos(1);
        a.handle_host(t, &udp(1)).unwrap();
        a.handle_host(t, &udp(2)).unwrap();
        let mut up = Vec::new();
        let mut now = t;
        while up.len() < 2 {
            a.poll_uplink(now, &mut |f| {
                up.push(f.to_vec());
                true
            });
            now += Duration::from_micros(10);
        }
        // No CN-TAG yet: the CNM is matched by the encapsulated UDP header of flow 2.
        a.handle_uplink(now, &cnm_about(&up[1], 32));
        let v = a.flows();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].state, RpState::Released);
        assert_eq!(v[1].state, RpState::Fr);
        assert!(v[1].five_tuple.as_deref().unwrap().ends_with(":2"));
    }

    #[test]
    fn round_robin_across_flows() {
        let mut a = Agent::new(cfg(Rate::from_mbps(100)), Rng::new(1)).unwrap();
        let t = Instant::from_nanos(1);
        for _ in 0..5 {
            a.handle_host(t, &frame(PEER, 500)).unwrap();
            a.handle_host(t, &frame(PEER2, 500)).unwrap();
        }
        let mut order = Vec::new();
        let mut now = t;
        while let Some(d) = a.poll_timeout() {
            now = d.max(now);
            a.poll_uplink(now, &mut |f| {
                order.push(f[5]);
                true
            });
        }
        assert_eq!(order, [2, 3, 2, 3, 2, 3, 2, 3, 2, 3]);
    }

    /// The header memo: frames with the header of the one before (other payloads, other
    /// lengths) go to its flow; a header that differs in one octet (the PCP, the destination)
    /// or in its tags is walked again. Every frame lands where a fresh walk puts it.
    #[test]
    fn a_repeated_header_is_classified_like_a_walked_one() {
        let mut a = Agent::new(cfg(Rate::from_gbps(10)), Rng::new(1)).unwrap();
        let t = Instant::from_nanos(1);
        let untagged = frame(PEER, 200);
        let mut tagged = Vec::new();
        crate::tagger::tag_for_uplink(&untagged, 5, 0, None, &mut tagged).unwrap();
        let mut pcp6 = Vec::new();
        crate::tagger::tag_for_uplink(&untagged, 6, 0, None, &mut pcp6).unwrap();
        let mut longer = frame(PEER, 900);
        longer[100] = 0xff;
        // A header cut short: the memo's header is longer than the frame.
        let stub = untagged[..13].to_vec();
        let other = frame(PEER2, 64);
        let sequence: Vec<&[u8]> = vec![
            &untagged, &longer, &untagged, &tagged, &tagged, &pcp6, &stub, &other, &untagged,
        ];
        for f in &sequence {
            let fresh = crate::classify::classify(f, FlowKeyMode::DstPriority, a.cfg.priority);
            let r = a.handle_host(t, f);
            match fresh {
                Err(_) => assert_eq!(r, Err(HostError::Malformed)),
                Ok(key) => {
                    assert_eq!(r, Ok(()));
                    let idx = a.index[&key];
                    assert_eq!(a.flows[idx].as_ref().map(|f| f.key), Some(key));
                    // The frame joined that flow's queue: it is its newest.
                    let newest = a.flows[idx].as_ref().and_then(|f| f.queue.back());
                    let (start, buf, _) = newest.unwrap();
                    assert_eq!(&buf[*start..], *f);
                }
            }
        }
        // Flows: PEER untagged (default priority), PEER at PCP 5, PEER at PCP 6, PEER2.
        assert_eq!(a.flows().len(), 4);
        let mut prios: Vec<(String, u8)> =
            a.flows().into_iter().map(|f| (f.dst, f.priority)).collect();
        prios.sort();
        assert_eq!(prios.len(), 4);
        assert_eq!(a.stats().host_malformed, 1);
    }

    /// An agent with room for two flows (idle after 1 s), holding a frame for PEER and PEER2.
    fn two_flows_of_two() -> (Agent, Instant) {
        let c = AgentConfig {
            max_flows: 2,
            flow_idle_timeout: Duration::from_secs(1),
            ..cfg(Rate::from_gbps(1))
        };
        let mut a = Agent::new(c, Rng::new(1)).unwrap();
        let t = Instant::from_nanos(1);
        a.handle_host(t, &frame(PEER, 100)).unwrap();
        a.handle_host(t, &frame(PEER2, 100)).unwrap();
        (a, t)
    }

    #[test]
    fn flow_table_bounded() {
        let (mut a, t) = two_flows_of_two();
        let third = EthernetAddress([2, 0, 0, 0, 0, 9]);
        assert_eq!(
            a.handle_host(t, &frame(third, 100)),
            Err(HostError::FlowTableFull)
        );
        send_all(&mut a, t);
        let later = t + Duration::from_secs(2);
        a.handle_host(later, &frame(third, 100)).unwrap();
        assert_eq!(a.stats().flows, 2);
        assert_eq!(a.handle_host(t, &[0u8; 9]), Err(HostError::Malformed));
        assert_eq!(
            a.handle_host(t, &vec![0u8; 10_000]),
            Err(HostError::TooLong)
        );
    }

    #[test]
    fn a_replaced_flow_slot_is_not_taken_for_its_old_flow() {
        let (mut a, t) = two_flows_of_two();
        send_all(&mut a, t);
        // 2 s later PEER's flow is idle with nothing queued: its slot goes to a third
        // destination, right after a frame of PEER2 (the last flow a frame came for).
        let third = EthernetAddress([2, 0, 0, 0, 0, 9]);
        let later = t + Duration::from_secs(2);
        a.handle_host(later, &frame(PEER2, 100)).unwrap();
        a.handle_host(later, &frame(third, 100)).unwrap();
        let dsts: Vec<String> = a.flows().into_iter().map(|f| f.dst).collect();
        assert_eq!(dsts, [third.to_string(), PEER2.to_string()]);
        // PEER's frames are a new flow again, not the third one's slot: the table is full
        // of flows that are not idle.
        assert_eq!(
            a.handle_host(later, &frame(PEER, 100)),
            Err(HostError::FlowTableFull)
        );
        // The third flow holds its frame; PEER2 both of its own (the line took only PEER's
        // frame at `t`).
        let queued: Vec<u64> = a.flows().into_iter().map(|f| f.queued_frames).collect();
        assert_eq!(queued, [1, 2]);
    }
}
