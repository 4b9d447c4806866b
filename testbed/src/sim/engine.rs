//! The event loop: virtual clock, event queue, links and the driving of nodes.
//!
//! See the [module documentation](super) for the model. Costs per frame hop: one pop and one
//! sorted insert for the delivery (`queue`; only the head of each link direction is in the
//! queue, the rest wait in the direction's FIFO, whose arrival times are non-decreasing), no
//! copy (the frame's buffer moves from the sending core onto the link and
//! into the receiving core, each handing a recycled buffer back: `Bridge::poll_transmit_buf`,
//! `Bridge::handle_frame_buf`, `Agent::poll_uplink_buf`, `Agent::handle_uplink_buf`), the
//! core's own `handle_*`, `poll_*` and `poll_timeout`.

use super::host::HostNode;
use super::node::{NoNode, SimNode};
use super::queue::EventQueue;
use super::stats::{QueueHistogram, QueueSummary};
use cnm_proto::line::{self, LineClock, Overheads};
use cnm_proto::phy::pcap::PcapWriter;
use cnm_proto::rng::Rng;
use cnm_proto::{Duration, Instant, Rate};
use cp_switch::{Bridge, BridgeConfig, CpPatch, PortConfig, PortId};
use daemon_kit::trace_record::{ConfigChange, QueueTracker, TraceRecord};
use rp_agent::RpPatch;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::Write;
use std::rc::Rc;

/// Consecutive polls of one node at one instant after which it is pushed 1 ns forward.
pub const SPIN_LIMIT: u32 = 64;

/// The `wake_seq` of a node whose wake-up sits in [`Sim`]'s `ready` slot rather than in the
/// queue (no event ever gets this sequence number: the queue would need 2^64 pushes).
const READY: u64 = u64::MAX;

/// Index of a node, in declaration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub usize);

/// Index of a link, in declaration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub usize);

/// A full-duplex link between the next free port of node `a` and of node `b`.
#[derive(Debug, Clone)]
pub struct LinkSpec {
    /// Line rate of both directions.
    pub rate: Rate,
    /// One-way propagation delay of both directions.
    pub delay: Duration,
    /// Name used in traces, events and summaries. Default `"A-B"` (the node names).
    pub name: Option<String>,
    /// Name of the port at `a` when `a` is a switch. Default: the name of `b`.
    pub a_port: Option<String>,
    /// Name of the port at `b` when `b` is a switch. Default: the name of `a`.
    pub b_port: Option<String>,
}

impl LinkSpec {
    /// A link of this rate and one-way delay, default names.
    pub fn new(rate: Rate, delay: Duration) -> Self {
        LinkSpec {
            rate,
            delay,
            name: None,
            a_port: None,
            b_port: None,
        }
    }
}

/// Which direction(s) of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From `a` to `b`.
    AtoB,
    /// From `b` to `a`.
    BtoA,
    /// Both.
    Both,
}

/// Errors building or finishing a simulation.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A switch's bridge configuration was rejected by the core.
    #[error("switch {node}: {source}")]
    Bridge {
        /// The switch.
        node: String,
        /// The core's complaint.
        source: cp_switch::ConfigError,
    },
    /// Something about the topology is inconsistent.
    #[error("{0}")]
    Topology(String),
    /// Writing a trace or capture failed.
    #[error("{what}: {source}")]
    Io {
        /// Which output.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

/// Periodic outputs.
#[derive(Debug, Clone, Copy)]
pub struct TraceOptions {
    /// Interval of the queue-occupancy records of the trace (and of the draining of events).
    pub trace_interval: Duration,
    /// Interval of the queue samples behind the summary's mean/std/p99.
    pub sample_interval: Duration,
    /// Samples and link counters before this instant are left out of the summary.
    pub warmup: Duration,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            trace_interval: Duration::from_micros(100),
            sample_interval: Duration::from_micros(10),
            warmup: Duration::ZERO,
        }
    }
}

/// Counters of the engine itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SimStats {
    /// Events processed (deliveries, wake-ups, samples, actions).
    pub events: u64,
    /// Frames delivered to a node.
    pub deliveries: u64,
    /// Frames put on a link.
    pub transmissions: u64,
    /// Node polls.
    pub polls: u64,
    /// Times a node reported "due now" [`SPIN_LIMIT`] times at one instant and was moved 1 ns on.
    pub spin_breaks: u64,
    /// Frames a node sent on a port with no link (discarded).
    pub unattached: u64,
}

/// Counters of one link direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DirStats {
    /// Frames put on the wire.
    pub frames: u64,
    /// Their octets (as handed over, without FCS).
    pub bytes: u64,
    /// Octets they occupied on the wire (padding, FCS, preamble, IPG included).
    pub wire_bytes: u64,
    /// Capacity offered so far: ∫ rate dt, in bits.
    pub capacity_bits: u128,
    /// Frames delivered to the far end.
    pub delivered: u64,
}

impl DirStats {
    /// Wire utilisation between `earlier` and `self` (0 when no capacity elapsed).
    pub fn utilization_since(&self, earlier: &DirStats) -> f64 {
        let cap = self.capacity_bits.saturating_sub(earlier.capacity_bits);
        if cap == 0 {
            return 0.0;
        }
        (self.wire_bytes.saturating_sub(earlier.wire_bytes) as f64 * 8.0) / cap as f64
    }
}

/// A cloneable in-memory byte sink (for traces in tests).
#[derive(Debug, Clone, Default)]
pub struct SharedBuf(Rc<RefCell<Vec<u8>>>);

impl SharedBuf {
    /// An empty buffer.
    pub fn new() -> Self {
        SharedBuf::default()
    }
    /// A copy of everything written so far.
    pub fn contents(&self) -> Vec<u8> {
        self.0.borrow().clone()
    }
}

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Builds a [`Sim`]; `X` is the kind of node beyond switches and hosts ([`NoNode`]: none).
pub struct SimBuilder<X: SimNode = NoNode> {
    seed: u64,
    nodes: Vec<(String, Pending<X>)>,
    links: Vec<(NodeId, NodeId, LinkSpec)>,
    opts: TraceOptions,
}

impl<X: SimNode> std::fmt::Debug for SimBuilder<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimBuilder")
            .field("seed", &self.seed)
            .field("nodes", &self.nodes.len())
            .field("links", &self.links.len())
            .finish()
    }
}

type MakeHost = Box<dyn FnOnce(Rng, &[String]) -> Result<HostNode, String>>;
type MakeNode<X> = Box<dyn FnOnce(Rng, &[String]) -> X>;

enum Pending<X> {
    Switch(Box<BridgeConfig>),
    Host(MakeHost),
    Custom(MakeNode<X>),
}

impl SimBuilder {
    /// An empty topology of switches and hosts whose randomness derives from `seed`.
    pub fn new(seed: u64) -> Self {
        SimBuilder::with_custom_nodes(seed)
    }
}

impl<X: SimNode> SimBuilder<X> {
    /// An empty topology whose randomness derives from `seed`, which may also hold nodes of
    /// kind `X` ([`SimBuilder::node`]).
    pub fn with_custom_nodes(seed: u64) -> Self {
        SimBuilder {
            seed,
            nodes: Vec::new(),
            links: Vec::new(),
            opts: TraceOptions::default(),
        }
    }

    /// Sets the periodic-output options.
    pub fn options(&mut self, opts: TraceOptions) -> &mut Self {
        self.opts = opts;
        self
    }

    /// A switch. `cfg.ports` must be empty: the bridge gets one port per attached link, in
    /// link order, with the link's rate (its shaper emulates the line) and no delay (the link
    /// adds it).
    pub fn switch(&mut self, name: impl Into<String>, cfg: BridgeConfig) -> NodeId {
        self.nodes
            .push((name.into(), Pending::Switch(Box::new(cfg))));
        NodeId(self.nodes.len() - 1)
    }

    /// A host, made at build time from its random generator and the names of its peers (one
    /// per port, in link order). A host that cannot be made fails the build with the reason.
    pub fn host(
        &mut self,
        name: impl Into<String>,
        make: impl FnOnce(Rng, &[String]) -> Result<HostNode, String> + 'static,
    ) -> NodeId {
        self.nodes
            .push((name.into(), Pending::Host(Box::new(make))));
        NodeId(self.nodes.len() - 1)
    }

    /// A node of kind `X`, made at build time from its random generator and the names of its
    /// peers (one per port, in link order).
    pub fn node(
        &mut self,
        name: impl Into<String>,
        make: impl FnOnce(Rng, &[String]) -> X + 'static,
    ) -> NodeId {
        self.nodes
            .push((name.into(), Pending::Custom(Box::new(make))));
        NodeId(self.nodes.len() - 1)
    }

    /// A link between the next free ports of `a` and `b`.
    pub fn link(&mut self, a: NodeId, b: NodeId, spec: LinkSpec) -> LinkId {
        self.links.push((a, b, spec));
        LinkId(self.links.len() - 1)
    }

    /// Creates the cores and schedules the periodic events.
    pub fn build(self) -> Result<Sim<X>, SimError> {
        let n = self.nodes.len();
        let mut port_names: Vec<Vec<String>> = vec![Vec::new(); n];
        let mut peers: Vec<Vec<String>> = vec![Vec::new(); n];
        let mut port_cfgs: Vec<Vec<PortConfig>> = vec![Vec::new(); n];
        let mut out_dirs: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut dirs = Vec::with_capacity(self.links.len() * 2);
        let mut links = Vec::with_capacity(self.links.len());
        for (li, (a, b, spec)) in self.links.iter().enumerate() {
            for end in [a, b] {
                if end.0 >= n {
                    return Err(SimError::Topology(format!(
                        "link {li}: no node with index {}",
                        end.0
                    )));
                }
            }
            if a == b {
                return Err(SimError::Topology(format!(
                    "link {li}: both ends on node {}",
                    self.nodes[a.0].0
                )));
            }
            let an = &self.nodes[a.0].0;
            let bn = &self.nodes[b.0].0;
            let name = spec.name.clone().unwrap_or_else(|| format!("{an}-{bn}"));
            let mut pname = |node: usize, explicit: &Option<String>, peer: &str| {
                let base = explicit.clone().unwrap_or_else(|| peer.to_string());
                let mut nm = base.clone();
                let mut k = 1;
                while port_names[node].contains(&nm) {
                    k += 1;
                    nm = format!("{base}.{k}");
                }
                port_names[node].push(nm.clone());
                nm
            };
            let ap = pname(a.0, &spec.a_port, bn);
            let bp = pname(b.0, &spec.b_port, an);
            let a_port = peers[a.0].len() as u32;
            let b_port = peers[b.0].len() as u32;
            peers[a.0].push(bn.clone());
            peers[b.0].push(an.clone());
            for (node, pn) in [(a.0, &ap), (b.0, &bp)] {
                port_cfgs[node].push(PortConfig::new(pn.clone()).with_rate(spec.rate));
            }
            let d0 = dirs.len() as u32;
            out_dirs[a.0].push(d0);
            out_dirs[b.0].push(d0 + 1);
            for (from, fp, to, tp) in [(a.0, a_port, b.0, b_port), (b.0, b_port, a.0, a_port)] {
                dirs.push(Dir {
                    link: li as u32,
                    from: from as u32,
                    from_port: fp,
                    to: to as u32,
                    to_port: tp,
                    line: LineClock::new(spec.rate, Overheads::ETHERNET, Duration::ZERO),
                    delay: spec.delay,
                    paced: matches!(self.nodes[from].1, Pending::Switch(_)),
                    last_frame_time: (Rate::ZERO, usize::MAX, Duration::ZERO),
                    tx_end: Instant::ZERO,
                    head_seq: 0,
                    inflight: VecDeque::new(),
                    stats: DirStats::default(),
                    cap_since: Instant::ZERO,
                    warm: DirStats::default(),
                    pcap: None,
                });
            }
            links.push(LinkMeta {
                name,
                a: a.0 as u32,
                b: b.0 as u32,
                a_port: ap,
                b_port: bp,
            });
        }
        let mut root = Rng::new(self.seed);
        let mut nodes = Vec::with_capacity(n);
        for (i, (name, pending)) in self.nodes.into_iter().enumerate() {
            let rng = root.fork(i as u64);
            let body = match pending {
                Pending::Switch(cfg) => {
                    let mut cfg = *cfg;
                    if !cfg.ports.is_empty() {
                        return Err(SimError::Topology(format!(
                            "switch {name}: ports come from the links, not the bridge settings"
                        )));
                    }
                    cfg.ports = std::mem::take(&mut port_cfgs[i]);
                    let outq = cfg.buffers.output.get();
                    let inq = cfg.buffers.input.get();
                    let b = Bridge::new(cfg, rng).map_err(|source| SimError::Bridge {
                        node: name.clone(),
                        source,
                    })?;
                    let np = b.num_ports();
                    Body::Switch(Box::new(SwitchState {
                        bridge: b,
                        queue_tracker: QueueTracker::default(),
                        out_hist: (0..np).map(|_| QueueHistogram::new(outq * 8)).collect(),
                        in_hist: (0..np).map(|_| QueueHistogram::new(inq * 8)).collect(),
                    }))
                }
                Pending::Host(make) => Body::Host(Box::new(
                    make(rng, &peers[i])
                        .map_err(|e| SimError::Topology(format!("host {name}: {e}")))?,
                )),
                Pending::Custom(make) => Body::Custom(Box::new(make(rng, &peers[i]))),
            };
            nodes.push(NodeState {
                name,
                body,
                ports: std::mem::take(&mut out_dirs[i]),
                wake_seq: None,
                wake_at: Instant::MAX,
                last_poll: Instant::MAX,
                spins: 0,
            });
        }
        let mut sim = Sim {
            now: Instant::ZERO,
            queue: EventQueue::new(),
            nodes,
            dirs,
            links,
            pool: Vec::new(),
            pcaps: Vec::new(),
            trace: None,
            opts: self.opts,
            stats: SimStats::default(),
            warm_at: Instant::ZERO,
            actions: Vec::new(),
            io_error: None,
            ready: None,
        };
        for i in 0..sim.nodes.len() {
            sim.reschedule(i, None);
        }
        if sim.opts.sample_interval > Duration::ZERO {
            sim.push(Instant::ZERO, Kind::Sample);
        }
        if sim.opts.warmup > Duration::ZERO {
            sim.push(Instant::ZERO + sim.opts.warmup, Kind::Warmup);
        }
        Ok(sim)
    }
}

/// A running simulation; `X` is the kind of node beyond switches and hosts ([`NoNode`]: none).
pub struct Sim<X: SimNode = NoNode> {
    now: Instant,
    queue: EventQueue<Kind>,
    nodes: Vec<NodeState<X>>,
    dirs: Vec<Dir>,
    links: Vec<LinkMeta>,
    /// Recycled frame buffers.
    pool: Vec<Vec<u8>>,
    pcaps: Vec<(String, PcapWriter<Box<dyn Write>>)>,
    trace: Option<Box<dyn Write>>,
    opts: TraceOptions,
    stats: SimStats,
    warm_at: Instant,
    actions: Vec<Action>,
    io_error: Option<SimError>,
    /// A node whose wake-up is the very next event (see [`Sim::reschedule`]): polled before
    /// anything is taken from the queue.
    ready: Option<u32>,
}

impl<X: SimNode> std::fmt::Debug for Sim<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("now", &self.now)
            .field("nodes", &self.nodes.len())
            .field("links", &self.links.len())
            .field("stats", &self.stats)
            .finish()
    }
}

/// A change scheduled at an instant.
#[derive(Debug, Clone)]
pub enum Action {
    /// New line rate of a link (both directions or one); a switch end's bridge port follows
    /// through [`Bridge::set_port_rate`].
    SetRate {
        /// The link.
        link: LinkId,
        /// Which direction(s).
        dir: Direction,
        /// The new rate.
        rate: Rate,
    },
    /// New congestion-point settings for every CP of a switch node, through
    /// [`Bridge::apply_cp_patch`].
    SetCp {
        /// The switch.
        node: NodeId,
        /// The settings to change.
        set: CpPatch,
    },
    /// New reaction-point settings (`rp_mode`, `[rp]`) for a host node's agent, through
    /// `rp_agent::Agent::apply_rp_patch`.
    SetRp {
        /// The host.
        node: NodeId,
        /// The settings to change.
        set: RpPatch,
    },
}

/// A parameter change for [`Sim::set_params`]: congestion points of a switch or reaction
/// points of a host.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamPatch {
    /// Every CP of a switch node.
    Cp(CpPatch),
    /// A host node's reaction points.
    Rp(RpPatch),
}

type Entry = super::queue::Entry<Kind>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// The head frame of a link direction arrives.
    Deliver(u32),
    /// A node's poll_timeout is due.
    Wake(u32),
    /// Queue-occupancy samples for the summary.
    Sample,
    /// Trace records.
    Trace,
    /// End of the warm-up period.
    Warmup,
    /// A scheduled [`Action`].
    Action(u32),
}

struct NodeState<X> {
    name: String,
    body: Body<X>,
    /// Outgoing link direction of each port.
    ports: Vec<u32>,
    /// Sequence number of the one valid pending wake-up (older ones are stale).
    wake_seq: Option<u64>,
    wake_at: Instant,
    last_poll: Instant,
    spins: u32,
}

/// What a node is.
enum Body<X> {
    Switch(Box<SwitchState>),
    Host(Box<HostNode>),
    Custom(Box<X>),
}

struct SwitchState {
    bridge: Bridge,
    /// Occupancy at the previous trace record (idle queues are written once when they empty).
    queue_tracker: QueueTracker,
    /// Per port: output queue occupancy (all priorities).
    out_hist: Vec<QueueHistogram>,
    /// Per port: input buffer occupancy (all priorities).
    in_hist: Vec<QueueHistogram>,
}

struct Dir {
    link: u32,
    from: u32,
    from_port: u32,
    to: u32,
    to_port: u32,
    /// The transmitter: rate, 802.3 overheads, when it is free (senders that do not pace
    /// themselves).
    line: LineClock,
    delay: Duration,
    /// The sender paces itself (a bridge's shaper): never refuse a frame.
    paced: bool,
    /// The serialisation time of the last paced frame: `(rate, length, time)`. Frames of a
    /// flow have one length, so the division behind [`LineClock::frame_time`] is done once
    /// per length and rate, not once per frame.
    last_frame_time: (Rate, usize, Duration),
    /// When the last frame put on the link is fully serialised.
    tx_end: Instant,
    /// Sequence number of the one valid delivery event of the head frame (older ones are
    /// stale: a rate change re-timed the head).
    head_seq: u64,
    inflight: VecDeque<(Instant, Vec<u8>)>,
    stats: DirStats,
    cap_since: Instant,
    warm: DirStats,
    pcap: Option<usize>,
}

impl Dir {
    /// [`LineClock::frame_time`] of a frame of `len` octets at the current rate.
    #[inline]
    fn frame_time(&mut self, len: usize) -> Duration {
        let rate = self.line.rate();
        let (r, l, t) = self.last_frame_time;
        if r == rate && l == len {
            return t;
        }
        let t = self.line.frame_time(len);
        self.last_frame_time = (rate, len, t);
        t
    }

    fn accrue(&mut self, now: Instant) {
        let dt = now.saturating_since(self.cap_since).as_nanos();
        self.stats.capacity_bits +=
            u128::from(self.line.rate().bps()) * u128::from(dt) / 1_000_000_000;
        self.cap_since = now;
    }
}

struct LinkMeta {
    name: String,
    a: u32,
    b: u32,
    a_port: String,
    b_port: String,
}

impl<X: SimNode> Sim<X> {
    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Engine counters.
    pub fn stats(&self) -> SimStats {
        self.stats
    }

    /// The node called `name`.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.nodes.iter().position(|n| n.name == name).map(NodeId)
    }

    /// The link called `name`.
    pub fn link_id(&self, name: &str) -> Option<LinkId> {
        self.links.iter().position(|l| l.name == name).map(LinkId)
    }

    /// Name of a node.
    pub fn node_name(&self, id: NodeId) -> &str {
        self.nodes.get(id.0).map_or("", |n| n.name.as_str())
    }

    /// Name of a link.
    pub fn link_name(&self, id: LinkId) -> &str {
        self.links.get(id.0).map_or("", |l| l.name.as_str())
    }

    /// The two ends of a link: (node a, port name at a, node b, port name at b). Port names
    /// are the bridge port names when the end is a switch.
    pub fn link_ends(&self, link: LinkId) -> Option<(NodeId, &str, NodeId, &str)> {
        let l = self.links.get(link.0)?;
        Some((
            NodeId(l.a as usize),
            l.a_port.as_str(),
            NodeId(l.b as usize),
            l.b_port.as_str(),
        ))
    }

    /// The bridge of a switch node.
    pub fn bridge(&self, id: NodeId) -> Option<&Bridge> {
        match &self.nodes.get(id.0)?.body {
            Body::Switch(s) => Some(&s.bridge),
            _ => None,
        }
    }

    /// A host node.
    pub fn host(&self, id: NodeId) -> Option<&HostNode> {
        match &self.nodes.get(id.0)?.body {
            Body::Host(h) => Some(h),
            _ => None,
        }
    }

    /// A host node, mutably.
    pub fn host_mut(&mut self, id: NodeId) -> Option<&mut HostNode> {
        match &mut self.nodes.get_mut(id.0)?.body {
            Body::Host(h) => Some(h),
            _ => None,
        }
    }

    /// A node of kind `X`.
    pub fn custom(&self, id: NodeId) -> Option<&X> {
        match &self.nodes.get(id.0)?.body {
            Body::Custom(x) => Some(x),
            _ => None,
        }
    }

    /// A node of kind `X`, mutably.
    pub fn custom_mut(&mut self, id: NodeId) -> Option<&mut X> {
        match &mut self.nodes.get_mut(id.0)?.body {
            Body::Custom(x) => Some(x),
            _ => None,
        }
    }

    /// Counters of one direction of a link (capacity accrued up to now).
    pub fn link_stats(&mut self, link: LinkId, dir: Direction) -> DirStats {
        let d = link.0 * 2 + usize::from(dir == Direction::BtoA);
        let now = self.now;
        match self.dirs.get_mut(d) {
            Some(x) => {
                x.accrue(now);
                x.stats
            }
            None => DirStats::default(),
        }
    }

    /// Frames currently on the wire (all links).
    pub fn frames_in_flight(&self) -> usize {
        self.dirs.iter().map(|d| d.inflight.len()).sum()
    }

    /// Writes the trace (JSON lines) to `out` from now on; the first queue record is now.
    pub fn trace_to(&mut self, out: Box<dyn Write>) {
        let first = self.trace.is_none();
        self.trace = Some(out);
        if first && self.opts.trace_interval > Duration::ZERO {
            self.push(self.now, Kind::Trace);
        }
    }

    /// Captures both directions of `link` into a pcap stream, timestamped when each frame's
    /// first bit enters the link.
    pub fn capture(&mut self, link: LinkId, out: Box<dyn Write>) -> Result<(), SimError> {
        let name = self.link_name(link).to_string();
        if link.0 >= self.links.len() {
            return Err(SimError::Topology(format!("capture: no link {}", link.0)));
        }
        let w = PcapWriter::new(out).map_err(|source| SimError::Io {
            what: format!("pcap of {name}"),
            source,
        })?;
        self.pcaps.push((name, w));
        let k = self.pcaps.len() - 1;
        self.dirs[link.0 * 2].pcap = Some(k);
        self.dirs[link.0 * 2 + 1].pcap = Some(k);
        Ok(())
    }

    /// Schedules `action` at `at` (not before now).
    pub fn schedule(&mut self, at: Instant, action: Action) {
        self.actions.push(action);
        let k = (self.actions.len() - 1) as u32;
        self.push(at.max(self.now), Kind::Action(k));
    }

    /// Changes the rate of a link now (see [`Action::SetRate`]).
    pub fn set_link_rate(&mut self, link: LinkId, dir: Direction, rate: Rate) {
        if link.0 >= self.links.len() || rate == Rate::ZERO {
            return;
        }
        let now = self.now;
        let which: &[usize] = match dir {
            Direction::AtoB => &[0],
            Direction::BtoA => &[1],
            Direction::Both => &[0, 1],
        };
        for &k in which {
            let d = link.0 * 2 + k;
            let dir = &mut self.dirs[d];
            dir.accrue(now);
            self.retime_dir(d, rate);
            let dir = &self.dirs[d];
            let (from, port) = (dir.from as usize, dir.from_port);
            if let Body::Switch(s) = &mut self.nodes[from].body {
                s.bridge.set_port_rate(now, PortId(port as u16), Some(rate));
            }
            self.reschedule(from, None);
        }
    }

    /// Direction `d` takes `rate` now. What its transmitter still owes (the rest of the frame
    /// being serialised) is re-timed at the new rate, as on a physical line
    /// ([`cnm_proto::line`]), and that frame's arrival with it; frames never overtake.
    fn retime_dir(&mut self, d: usize, rate: Rate) {
        let now = self.now;
        let dir = &mut self.dirs[d];
        let old_end = dir.tx_end;
        if dir.paced {
            dir.tx_end = line::retime(now, old_end, 0, dir.line.rate(), rate).0;
            dir.line.set_next_rate(rate);
        } else {
            dir.line.set_rate(now, rate);
            dir.tx_end = dir.line.next_free();
        }
        if old_end <= now || dir.tx_end == old_end {
            return;
        }
        let n = dir.inflight.len();
        let floor = match n {
            0 => return,
            1 => Instant::ZERO,
            _ => dir.inflight[n - 2].0,
        };
        let arrival = (dir.tx_end + dir.delay).max(floor);
        dir.inflight[n - 1].0 = arrival;
        if n == 1 {
            let s = self.push(arrival, Kind::Deliver(d as u32));
            self.dirs[d].head_seq = s;
        }
    }

    /// Applies congestion-point (`cp`, a switch node) or reaction-point (a host node)
    /// settings now ([`Action::SetCp`], [`Action::SetRp`]) and writes a `cp_config` /
    /// `rp_config` record to the trace with the outcome. A refused change (topology files
    /// check theirs at build) leaves the node as it was; the record then carries the error.
    pub fn set_params(&mut self, node: NodeId, set: &ParamPatch) {
        let now = self.now;
        let cp = matches!(set, ParamPatch::Cp(_));
        let Some(st) = self.nodes.get_mut(node.0) else {
            return;
        };
        let outcome: Result<serde_json::Value, String> = match (&mut st.body, set) {
            (Body::Switch(s), ParamPatch::Cp(set)) => s
                .bridge
                .apply_cp_patch(set)
                .map(|c| json!(c))
                .map_err(|e| e.to_string()),
            (Body::Host(h), ParamPatch::Rp(set)) => h
                .agent_mut()
                .apply_rp_patch(now, set)
                .map(|c| json!(c))
                .map_err(|e| e.to_string()),
            _ => Err(if cp { "not a switch" } else { "not a host" }.into()),
        };
        let (change, error) = match outcome {
            Ok(c) => (Some(c), None),
            Err(e) => (None, Some(e)),
        };
        let rec = ConfigChange {
            t: now.as_nanos(),
            node: Some(st.name.clone()),
            set: match set {
                ParamPatch::Cp(p) => json!(p),
                ParamPatch::Rp(p) => json!(p),
            },
            change,
            error,
        };
        let rec = if cp {
            TraceRecord::<()>::CpConfig(rec)
        } else {
            TraceRecord::RpConfig(rec)
        };
        if let Some(t) = self.trace.as_mut() {
            if let Err(source) = rec
                .to_line()
                .map_err(std::io::Error::other)
                .and_then(|line| t.write_all(line.as_bytes()))
                .and_then(|()| t.write_all(b"\n"))
            {
                self.io_error.get_or_insert(SimError::Io {
                    what: "trace".into(),
                    source,
                });
                self.trace = None;
            }
        }
        self.reschedule(node.0, None);
    }

    /// Runs every event up to and including `end`, then sets the clock to `end`.
    pub fn run_until(&mut self, end: Instant) {
        loop {
            if self.now <= end {
                if let Some(n) = self.ready.take() {
                    self.wake_ready(n as usize);
                    continue;
                }
            }
            let Some(e) = self.queue.pop_until(end) else {
                break;
            };
            self.now = e.t;
            self.stats.events += 1;
            self.dispatch(e);
        }
        self.now = self.now.max(end);
    }

    /// Runs for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        self.run_until(end);
    }

    /// Runs until no frame is in flight and no node has a wake-up pending, or until `limit`;
    /// returns true if the network went idle. Nodes with periodic timers (an agent whose
    /// limiters are engaged runs its RP timer) never go idle: use [`Sim::run_until`] and
    /// [`Sim::frames_in_flight`] for them.
    pub fn run_until_idle(&mut self, limit: Instant) -> bool {
        loop {
            let next = match self.ready {
                Some(_) => Some(self.now),
                None => self.queue.peek_time(),
            };
            let Some(t) = next else {
                return true;
            };
            if t > limit {
                return false;
            }
            let busy =
                self.frames_in_flight() > 0 || self.nodes.iter().any(|n| n.wake_seq.is_some());
            if !busy {
                return true;
            }
            if let Some(n) = self.ready.take() {
                self.wake_ready(n as usize);
                continue;
            }
            let Some(e) = self.queue.pop_until(limit) else {
                return true;
            };
            self.now = e.t;
            self.stats.events += 1;
            self.dispatch(e);
        }
    }

    /// Flushes the trace (draining every node's events) and the captures; returns the first
    /// output error met during the run.
    pub fn finish(&mut self) -> Result<(), SimError> {
        self.write_trace(false);
        if let Some(t) = self.trace.as_mut() {
            if let Err(source) = t.flush() {
                self.io_error.get_or_insert(SimError::Io {
                    what: "trace".into(),
                    source,
                });
            }
        }
        for (name, w) in &mut self.pcaps {
            if let Err(source) = w.flush() {
                self.io_error.get_or_insert(SimError::Io {
                    what: format!("pcap of {name}"),
                    source,
                });
            }
        }
        match self.io_error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Queue statistics of a switch port since the warm-up: (output queue, input buffer),
    /// occupancy summed over priorities.
    pub fn queue_summary(
        &self,
        node: NodeId,
        port: PortId,
    ) -> Option<(QueueSummary, QueueSummary)> {
        match &self.nodes.get(node.0)?.body {
            Body::Switch(s) => Some((
                s.out_hist.get(port.index())?.summary(),
                s.in_hist.get(port.index())?.summary(),
            )),
            _ => None,
        }
    }

    /// The run summary: engine counters, every link direction (frames, utilisation since the
    /// warm-up), every switch (drops by reason, queue statistics per port) and what the other
    /// nodes report.
    pub fn summary(&mut self) -> Value {
        let now = self.now;
        for d in &mut self.dirs {
            d.accrue(now);
        }
        let mut links = Vec::new();
        for d in &self.dirs {
            let l = &self.links[d.link as usize];
            links.push(json!({
                "link": l.name,
                "from": self.nodes[d.from as usize].name,
                "to": self.nodes[d.to as usize].name,
                "rate": d.line.rate(),
                "frames": d.stats.frames,
                "bytes": d.stats.bytes,
                "utilization": d.stats.utilization_since(&d.warm),
                "throughput_bps": throughput(&d.stats, &d.warm, now.saturating_since(self.warm_at)),
            }));
        }
        let mut switches = Vec::new();
        let mut others = Vec::new();
        for n in &self.nodes {
            match &n.body {
                Body::Switch(s) => {
                    let st = s.bridge.stats();
                    let ports: Vec<Value> = st
                        .ports
                        .iter()
                        .enumerate()
                        .map(|(i, p)| {
                            json!({
                                "port": p.name,
                                "rx_frames": p.rx_frames,
                                "tx_frames": p.tx_frames,
                                "drops": p.drops,
                                "drop_reasons": p.drop_reasons,
                                "pause_tx": p.pause_tx,
                                "pause_rx": p.pause_rx,
                                "output_queue": s.out_hist.get(i).map(QueueHistogram::summary),
                                "input_buffer": s.in_hist.get(i).map(QueueHistogram::summary),
                            })
                        })
                        .collect();
                    let drops: u64 = st.ports.iter().map(|p| p.drops).sum();
                    switches.push(json!({
                        "node": n.name, "drops": drops, "ports": ports,
                        "buffers_allocated": st.buffers_allocated,
                    }));
                }
                Body::Host(h) => {
                    let mut v = h.summary(now);
                    if let Some(o) = v.as_object_mut() {
                        o.insert("node".into(), json!(n.name));
                    }
                    others.push(v);
                }
                Body::Custom(x) => {
                    let mut v = x.summary(now);
                    if !v.is_null() {
                        if let Some(o) = v.as_object_mut() {
                            o.insert("node".into(), json!(n.name));
                        }
                        others.push(v);
                    }
                }
            }
        }
        json!({
            "t": now.as_nanos(),
            "warmup_ns": self.warm_at.as_nanos(),
            "engine": self.stats,
            "links": links,
            "switches": switches,
            "nodes": others,
        })
    }

    // ----- internals -----------------------------------------------------------------

    #[inline]
    fn push(&mut self, t: Instant, kind: Kind) -> u64 {
        self.queue.push(t, kind)
    }

    fn dispatch(&mut self, e: Entry) {
        match e.kind {
            Kind::Deliver(d) => {
                if self.dirs[d as usize].head_seq == e.seq {
                    self.deliver(d as usize);
                }
            }
            Kind::Wake(n) => {
                let n = n as usize;
                if self.nodes[n].wake_seq == Some(e.seq) {
                    self.nodes[n].wake_seq = None;
                    self.nodes[n].wake_at = Instant::MAX;
                    self.poll(n);
                }
            }
            Kind::Sample => {
                self.sample();
                if self.trace.is_none() {
                    // Keep the cores' bounded event logs from filling (and counting losses)
                    // when nobody reads them.
                    self.write_trace(false);
                }
                let next = self.now + self.opts.sample_interval;
                self.push(next, Kind::Sample);
            }
            Kind::Trace => {
                self.write_trace(true);
                if self.trace.is_some() {
                    let next = self.now + self.opts.trace_interval;
                    self.push(next, Kind::Trace);
                }
            }
            Kind::Warmup => {
                let now = self.now;
                self.warm_at = now;
                for d in &mut self.dirs {
                    d.accrue(now);
                    d.warm = d.stats;
                }
                for n in &mut self.nodes {
                    if let Body::Switch(s) = &mut n.body {
                        s.out_hist.iter_mut().for_each(QueueHistogram::clear);
                        s.in_hist.iter_mut().for_each(QueueHistogram::clear);
                    }
                }
            }
            Kind::Action(k) => {
                if let Some(a) = self.actions.get(k as usize).cloned() {
                    match a {
                        Action::SetRate { link, dir, rate } => self.set_link_rate(link, dir, rate),
                        Action::SetCp { node, set } => self.set_params(node, &ParamPatch::Cp(set)),
                        Action::SetRp { node, set } => self.set_params(node, &ParamPatch::Rp(set)),
                    }
                }
            }
        }
    }

    /// The head frame of direction `d` reaches the far end.
    fn deliver(&mut self, d: usize) {
        let now = self.now;
        let dir = &mut self.dirs[d];
        let Some((_, mut buf)) = dir.inflight.pop_front() else {
            return;
        };
        dir.stats.delivered += 1;
        let (to, port) = (dir.to as usize, dir.to_port as usize);
        if let Some(&(t, _)) = dir.inflight.front() {
            let s = self.push(t, Kind::Deliver(d as u32));
            self.dirs[d].head_seq = s;
        }
        self.stats.deliveries += 1;
        // A core that keeps the frame takes its buffer and gives a spare back (no copy).
        let node = &mut self.nodes[to];
        let moved = match &mut node.body {
            Body::Switch(s) => {
                s.bridge
                    .handle_frame_buf(now, PortId(port as u16), &mut buf);
                // The deadline is at least the earlier of the old one (not before the wake-up
                // kept for it) and the frame's floor: a floor not before the wake-up leaves it
                // where it is, as the reschedule would (a frame queued behind the head of a
                // busy port, most of a congested switch's arrivals). A switch's wake-up is
                // never later than its deadline: its links are paced by its shaper and never
                // refuse a frame, so no `refused` instant delays it; the spin break's 1 ns
                // (the only other delay) a reschedule at the same instant would repeat.
                match s.bridge.received_due_floor() {
                    None => false,
                    Some(f) => node.wake_seq.is_none() || f < node.wake_at,
                }
            }
            Body::Host(h) => h.handle_frame(now, &mut buf),
            Body::Custom(x) => {
                x.handle_frame(now, port, &buf);
                true
            }
        };
        self.pool.push(buf);
        // A node's wake-up follows its `poll_timeout` as it was at its last reschedule; a
        // host that says its timeout has not moved keeps it (a receiver taking data frames),
        // and so does a switch whose frame made nothing due before its wake-up.
        if moved {
            self.reschedule(to, None);
        }
    }

    /// Polls node `n` and schedules its next wake-up.
    fn poll(&mut self, n: usize) {
        let now = self.now;
        self.stats.polls += 1;
        let Sim {
            nodes,
            dirs,
            pool,
            queue,
            pcaps,
            stats,
            io_error,
            ..
        } = self;
        let NodeState { body, ports, .. } = &mut nodes[n];
        let mut refused: Option<Instant> = None;
        let mut tx = |port: usize, frame: &mut Vec<u8>| -> bool {
            let Some(&d) = ports.get(port) else {
                stats.unattached += 1;
                return true;
            };
            let dir = &mut dirs[d as usize];
            let wire = dir.line.wire_bytes(frame.len()).get();
            dir.tx_end = if dir.paced {
                // The bridge's shaper paced it: the link adds its serialisation latency.
                now + dir.frame_time(frame.len())
            } else {
                if !dir.line.may_start(now) {
                    let free = dir.line.next_free();
                    refused = Some(refused.map_or(free, |r| r.min(free)));
                    return false;
                }
                dir.line.start(now, now, frame.len());
                dir.line.next_free()
            };
            let arrival = dir.tx_end + dir.delay;
            dir.stats.frames += 1;
            dir.stats.bytes += frame.len() as u64;
            dir.stats.wire_bytes += wire;
            stats.transmissions += 1;
            if let Some(k) = dir.pcap {
                if let Some((name, w)) = pcaps.get_mut(k) {
                    if let Err(source) = w.write(now, frame) {
                        io_error.get_or_insert(SimError::Io {
                            what: format!("pcap of {name}"),
                            source,
                        });
                        dir.pcap = None;
                    }
                }
            }
            // The frame's buffer goes on the link; the sender gets a recycled one back.
            let buf = std::mem::replace(frame, pool.pop().unwrap_or_default());
            if dir.inflight.is_empty() {
                dir.head_seq = queue.push(arrival, Kind::Deliver(d));
            }
            dir.inflight.push_back((arrival, buf));
            true
        };
        match body {
            Body::Switch(s) => s
                .bridge
                .poll_transmit_buf(now, &mut |pid, f| tx(pid.index(), f)),
            Body::Host(h) => h.poll(now, &mut |f| tx(0, f)),
            Body::Custom(x) => {
                // Custom nodes hand out borrowed frames: copied once here.
                let mut copy = Vec::new();
                x.poll(now, &mut |port, f| {
                    copy.clear();
                    copy.extend_from_slice(f);
                    tx(port, &mut copy)
                })
            }
        }
        let st = &mut nodes[n];
        if st.last_poll == now {
            st.spins += 1;
        } else {
            st.last_poll = now;
            st.spins = 0;
        }
        self.reschedule(n, refused);
    }

    /// The wake-up of the `ready` slot: counted as an event, as the queue's wake-up it stands
    /// for would have been.
    fn wake_ready(&mut self, n: usize) {
        self.stats.events += 1;
        let st = &mut self.nodes[n];
        st.wake_seq = None;
        st.wake_at = Instant::MAX;
        self.poll(n);
    }

    /// Schedules node `n`'s next wake-up from its `poll_timeout` (`refused`: the earliest
    /// instant a link transmitter that refused a frame frees up).
    ///
    /// A wake-up due now, when no other event is due now (the queue has none and the `ready`
    /// slot is free), would be the very next event the queue hands out: every event pushed
    /// after it has a later sequence number, so it sorts after it, and none sorts before it.
    /// It goes to the `ready` slot instead, and the run loop polls the node before it looks
    /// at the queue again: the order of polls is the queue's, at the cost of no push, no pop
    /// and no dispatch. On the dumbbell this is a sender's poll after each CNM and the switch's
    /// after a frame reaches an idle output (a receiving host needs none: it hands each frame
    /// to its applications on delivery, [`HostNode::handle_frame`]).
    fn reschedule(&mut self, n: usize, refused: Option<Instant>) {
        let now = self.now;
        let st = &mut self.nodes[n];
        let t = match &st.body {
            Body::Switch(s) => s.bridge.poll_timeout(),
            Body::Host(h) => h.poll_timeout(),
            Body::Custom(x) => x.poll_timeout(),
        };
        let Some(mut t) = t else {
            return;
        };
        if t <= now {
            t = match refused {
                Some(r) if r > now => r,
                _ => now,
            };
            if t == now && st.last_poll == now && st.spins >= SPIN_LIMIT {
                t = now + Duration::from_nanos(1);
                self.stats.spin_breaks += 1;
            }
        }
        if st.wake_seq.is_some() && st.wake_at <= t {
            return;
        }
        st.wake_at = t;
        if t == now && self.ready.is_none() && !self.queue.has_due_by(now) {
            st.wake_seq = Some(READY);
            self.ready = Some(n as u32);
            return;
        }
        let s = self.push(t, Kind::Wake(n as u32));
        self.nodes[n].wake_seq = Some(s);
    }

    /// One occupancy sample of every switch port (output queues and input buffers, summed
    /// over priorities).
    fn sample(&mut self) {
        for n in &mut self.nodes {
            if let Body::Switch(s) = &mut n.body {
                for p in 0..s.bridge.num_ports() {
                    let (o, i) = s.bridge.port_queue_bytes(PortId(p as u16));
                    s.out_hist[p].record(o);
                    s.in_hist[p].record(i);
                }
            }
        }
    }

    /// Drains every node's events into the trace (or nowhere) and, when `queues`, writes the
    /// switches' queue-occupancy records — the daemon's record shapes plus a `node` field.
    fn write_trace(&mut self, queues: bool) {
        let now = self.now;
        let Sim {
            nodes,
            trace,
            io_error,
            ..
        } = self;
        let mut lines: Vec<String> = Vec::new();
        for n in nodes.iter_mut() {
            let name = &n.name;
            match &mut n.body {
                Body::Switch(s) => {
                    let tracing = trace.is_some();
                    s.bridge.drain_events(&mut |ev| {
                        if tracing {
                            if let Ok(l) = TraceRecord::event(Some(name), ev).to_line() {
                                lines.push(l);
                            }
                        }
                    });
                    if tracing && queues {
                        let tracker = &mut s.queue_tracker;
                        if let Some(q) = s.bridge.queues_line(tracker, now.as_nanos(), Some(name)) {
                            if let Ok(l) = TraceRecord::<()>::Queues(q).to_line() {
                                lines.push(l);
                            }
                        }
                    }
                }
                Body::Host(h) => {
                    let tracing = trace.is_some();
                    h.drain_events(&mut |ev| {
                        if tracing {
                            if let Ok(l) = TraceRecord::event(Some(name), ev).to_line() {
                                lines.push(l);
                            }
                        }
                    });
                }
                Body::Custom(x) => {
                    let tracing = trace.is_some();
                    x.drain_events(&mut |v| {
                        if tracing {
                            if let Ok(l) = TraceRecord::event(Some(name), v).to_line() {
                                lines.push(l);
                            }
                        }
                    });
                }
            }
        }
        if let Some(t) = trace.as_mut() {
            for l in lines {
                if let Err(source) = t.write_all(l.as_bytes()).and_then(|()| t.write_all(b"\n")) {
                    io_error.get_or_insert(SimError::Io {
                        what: "trace".into(),
                        source,
                    });
                    *trace = None;
                    break;
                }
            }
        }
    }
}

fn throughput(now: &DirStats, warm: &DirStats, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s <= 0.0 {
        return 0.0;
    }
    (now.bytes.saturating_sub(warm.bytes) as f64 * 8.0) / s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A station that logs what it is handed and when it is polled. A sender sends one
    /// 60-octet frame when first polled; a receiver is due at once after a frame arrives, and
    /// its poll takes every frame it holds.
    #[derive(Debug)]
    struct Logger {
        name: &'static str,
        log: Rc<RefCell<Vec<String>>>,
        to_send: bool,
        held: usize,
        last_rx: Instant,
    }

    impl SimNode for Logger {
        fn handle_frame(&mut self, now: Instant, port: usize, _frame: &[u8]) {
            let line = format!("{} rx {} port {port}", now.as_nanos(), self.name);
            self.log.borrow_mut().push(line);
            self.held += 1;
            self.last_rx = now;
        }
        fn poll(&mut self, now: Instant, tx: &mut dyn FnMut(usize, &[u8]) -> bool) {
            let line = format!("{} poll {} ({} held)", now.as_nanos(), self.name, self.held);
            self.log.borrow_mut().push(line);
            self.held = 0;
            if self.to_send && tx(0, &[0u8; 60]) {
                self.to_send = false;
            }
        }
        fn poll_timeout(&self) -> Option<Instant> {
            if self.to_send {
                Some(Instant::ZERO)
            } else if self.held > 0 {
                Some(self.last_rx)
            } else {
                None
            }
        }
    }

    /// Senders `a` and `b` (and `c` when `three`) each linked to the receiver `r` at 1 Gb/s
    /// with 1 µs of delay; no periodic events.
    fn star(three: bool) -> (Sim<Logger>, Rc<RefCell<Vec<String>>>) {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut b = SimBuilder::<Logger>::with_custom_nodes(1);
        b.options(TraceOptions {
            trace_interval: Duration::ZERO,
            sample_interval: Duration::ZERO,
            warmup: Duration::ZERO,
        });
        let node = |b: &mut SimBuilder<Logger>, name: &'static str, to_send: bool| {
            let log = log.clone();
            b.node(name, move |_, _| Logger {
                name,
                log,
                to_send,
                held: 0,
                last_rx: Instant::ZERO,
            })
        };
        let r = node(&mut b, "r", false);
        let mut senders = vec![node(&mut b, "a", true), node(&mut b, "b", true)];
        if three {
            senders.push(node(&mut b, "c", true));
        }
        for s in senders {
            b.link(
                s,
                r,
                LinkSpec::new(Rate::from_gbps(1), Duration::from_micros(1)),
            );
        }
        (b.build().unwrap(), log)
    }

    /// The order of a run is the one the event queue alone gives, whether a wake-up goes
    /// through the queue or the ready slot. Hand-computed: a 60-octet frame occupies 84
    /// octets of wire (FCS, preamble, inter-packet gap) = 672 ns at 1 Gb/s, + 1 µs of delay:
    /// both frames sent at 0 reach `r` at 1672 ns. The first delivery makes `r` due then, but
    /// the second delivery is due at that instant too, so `r`'s wake-up is queued behind it
    /// and its one poll finds both frames. Events: two sender wake-ups, two deliveries, one
    /// receiver wake-up.
    #[test]
    fn a_wake_up_due_now_runs_after_everything_already_due_now() {
        let (mut sim, log) = star(false);
        sim.run_until(Instant::from_nanos(10_000));
        assert_eq!(
            *log.borrow(),
            vec![
                "0 poll a (0 held)",
                "0 poll b (0 held)",
                "1672 rx r port 0",
                "1672 rx r port 1",
                "1672 poll r (2 held)",
            ]
        );
        let st = sim.stats();
        assert_eq!((st.events, st.polls, st.deliveries), (5, 3, 2));
    }

    /// With one frame arriving at an instant, the receiver's wake-up is the very next event:
    /// it is polled from the ready slot right after the delivery, and counted as an event all
    /// the same. The link of `c` is slowed to 100 Mb/s before the run: its frame occupies the
    /// wire for 6720 ns and arrives alone at 7720 ns.
    #[test]
    fn a_lone_delivery_is_followed_by_the_receivers_poll() {
        let (mut sim, log) = star(true);
        sim.set_link_rate(LinkId(2), Direction::Both, Rate::from_mbps(100));
        sim.run_until(Instant::from_nanos(20_000));
        assert_eq!(
            *log.borrow(),
            vec![
                "0 poll a (0 held)",
                "0 poll b (0 held)",
                "0 poll c (0 held)",
                "1672 rx r port 0",
                "1672 rx r port 1",
                "1672 poll r (2 held)",
                "7720 rx r port 2",
                "7720 poll r (1 held)",
            ]
        );
        let st = sim.stats();
        // Three sender wake-ups, three deliveries, two receiver wake-ups.
        assert_eq!((st.events, st.polls, st.deliveries), (8, 5, 3));
    }
}
