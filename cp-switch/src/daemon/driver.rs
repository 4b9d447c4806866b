//! The daemon's dataplane loop: ports ⇄ the sans-IO [`Bridge`].
//!
//! One thread, run to completion (ARCHITECTURE.md rule 7): receive a batch from every port,
//! read the clock, let the bridge transmit what is due, flush every port once, record trace
//! events, answer control requests, then sleep until a port is readable, the bridge's next
//! departure ([`Bridge::poll_timeout`]) or the next delivery of an ingress stage, with
//! nanosecond precision. Each received frame's kernel receive time feeds its port's ingress
//! burst measure ([`super::ingress`], `stats` → `ports[].ingress`).
//!
//! With the ingress link-rate stage on ([`Dataplane::with_ingress_stage`], the daemon's
//! default; [`super::stage`]), the frames of a port with a rate (or an ingress delay, or
//! departure stamps) are copied into its stage and reach the bridge at the instants the port's
//! link would have delivered them: the due frames of all ports in delivery order, each after
//! the departures due before it, the bridge's time never going back. Frames of a port without
//! any of these (or with the stage off) go straight from the receive ring into the bridge at
//! the batch's `now`.
//!
//! The loop ([`Dataplane`]) is generic over the [`Port`] and the [`Clock`]: [`run`] gives it
//! AF_PACKET ports and the monotonic clock; the tests below give it in-memory pipes and a
//! warped clock, so batching, deadlines, control commands, port loss and return and the stop
//! flag are tested without root.
//!
//! # The wake quantum
//! Each sleep costs the loop a timer armed and a wake-up; on a virtual machine both are exits
//! to the hypervisor. At S = 10 (1 Gb/s, a 1500-octet frame every 12 µs out of the bottleneck
//! and as many deliveries of the ingress stages) the switch woke for nearly every frame, and a
//! profile of its process (`perf record -g -p`, 8 s of the mixed on/off scenario) had half of
//! its samples in the kernel re-enabling interrupts, 39 % of all under `ppoll`'s timed sleep:
//! the process was 96-98 % busy, mostly waking up (54-69 % with a quantum of 25 µs). With a quantum `q`
//! ([`Dataplane::with_wake_quantum`], `--wake-quantum`) the loop runs at most once every `q`,
//! with one sleep per quantum: what fell due meanwhile is done at once, in the order the
//! instants say (the stages' frames in delivery order, each after the departures due before
//! it; the shaper back-dates a late start by up to its catch-up, and a port that stamps
//! departures writes the line's instant).
//!
//! Reading frames up to `q` late moves nothing on a port with a stage and kernel receive
//! stamps: a frame's delivery lies in `[r_i, r_i + D]`, computed from its receive stamp `r_i`,
//! and every frame read in an iteration was received after the previous iteration's `now`,
//! which is as far as the bridge's time went. What a quantum moves is wall-clock: a frame
//! leaves up to `q` after its instant, and so does a CNM. Towards a host that lengthens the
//! loop by `q / 2` on average; towards a switch that places frames by this switch's departure
//! stamps it is sender lag, which the next stage's lookahead must absorb. So the daemon takes
//! a quantum only when every port has the stage and an ingress delay `D ≥ 2q` (a conservative
//! rule: the delay that matters is the next switch's), and at most [`MAX_SLEEP`], so that
//! control requests and signals are not kept waiting.
//!
//! A `ctl set cp` that succeeds is also written to the trace as a `{"type": "cp_config", "t",
//! "set", "change"}` record, so a run's analysis sees when the congestion points changed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use cnm_proto::line::Overheads;
use cnm_proto::phy::clock::{Clock, Monotonic};
use cnm_proto::phy::{self, AfPacketConfig, AfPacketPort, Port, PortStats};
use cnm_proto::rng::Rng;
use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Duration, Instant};
use cp_switch::config::StaticEntry;
use cp_switch::{Bridge, BridgeConfig, LosslessMode, PortConfig, PortId};
use daemon_kit::offload::prepare_offloads;
use daemon_kit::reopen::{AfPacketOpener, Reopened, Reopener};
use daemon_kit::trace_record::{ConfigChange, QueueTracker, TraceRecord};
use daemon_kit::trace_writer::TraceWriter;
pub use daemon_kit::DaemonError;
use serde_json::{json, Value};

use super::cli::{self, RunArgs};
use super::ctl::{self, Command, CtlServer};
use super::ingress::IngressMeter;
use super::metrics::MetricsServer;
use super::stage::{self, LinkStage, STAGE_LIMIT};

/// Frames taken from one port per loop iteration (ARCHITECTURE.md rule 6: batches of 32-64).
const BATCH: usize = 64;
/// Batches a port with an ingress stage may give in one iteration: its whole receive ring
/// (2048 slots with the default ring of `cnm_proto::phy::af_packet`), read before the bridge's
/// time moves on (see [`super::stage`]: a frame left behind would reach the bridge late).
const STAGED_BATCHES: usize = 32;
/// Longest sleep, so control requests and signals are seen promptly.
const MAX_SLEEP: Duration = Duration::from_millis(10);
/// Builds the bridge configuration from the resolved flags and file.
pub fn bridge_config(args: &RunArgs) -> Result<BridgeConfig, DaemonError> {
    let cfgerr = DaemonError::Config;
    let explicit_bridge = args.bridge.is_some();
    let mut cfg = args.bridge.clone().unwrap_or_default();
    if !args.ports.is_empty() {
        cfg.ports = args
            .ports
            .iter()
            .map(|p| {
                let mut pc = PortConfig::new(p.name.clone());
                pc.rate = p.rate;
                pc.delay = p.delay.unwrap_or(Duration::ZERO);
                pc.cnd_defense = p.cnd_defense.unwrap_or_default();
                pc.alternate_priority = p.alternate_priority;
                pc.stamp_departures = p.stamp_departures.unwrap_or(false);
                pc.catch_up = p.catch_up;
                pc
            })
            .collect();
    }
    if cfg.ports.is_empty() {
        return Err(cfgerr(
            "port: no ports configured (give --port IF at least once)".into(),
        ));
    }
    if let Some(r) = args.default_rate {
        for p in cfg.ports.iter_mut().filter(|p| p.rate.is_none()) {
            p.rate = Some(r);
        }
    }
    if let Some(m) = args.lossless {
        cfg.lossless.mode = match m {
            cli::LosslessMode::Pause => LosslessMode::Pause,
            cli::LosslessMode::Pfc => LosslessMode::Pfc,
        };
    }
    if let Some(b) = args.buffer {
        cfg.buffers.input = b;
        cfg.buffers.output = b;
    }
    if let Some(q) = args.q_high {
        cfg.lossless.qhigh = q;
    }
    if let Some(q) = args.q_low {
        cfg.lossless.qlow = q;
    }
    if let Some(p) = args.default_priority {
        cfg.default_priority = p;
    }
    if let Some(a) = args.ageing {
        cfg.fdb.ageing = a;
    }
    if !explicit_bridge {
        // On veth there is no preamble, FCS or minimum size: by default the emulated line
        // carries the frame's own octets, so the rate a receiver measures on its interface is
        // the configured rate. `--ifg` adds the 20-octet preamble + inter-frame gap.
        cfg.shaper.wire_overhead = false;
        cfg.shaper.fcs = false;
        cfg.shaper.pad = false;
        // A user-space dataplane on a shared 2-core machine is sometimes descheduled for a few
        // milliseconds; letting the emulated line send what it would have sent meanwhile keeps
        // the long-run rate exact at the cost of a short burst.
        cfg.shaper.catch_up = Duration::from_millis(5);
    }
    if args.ifg {
        cfg.shaper.wire_overhead = true;
    }
    if let Some(p) = args.cp {
        cfg.cp.placement = p;
    }
    if let Some(v) = &args.cnpv {
        cfg.cp.cnpv = v.clone();
    }
    if let Some(b) = args.cp_set_point {
        cfg.cp.cp_queue_set_point = b;
    }
    if let Some(w) = args.cp_weight {
        cfg.cp.cp_feedback_weight = w;
    }
    if let Some(m) = args.cp_mode {
        cfg.cp.mode = m;
    }
    if let Some(c) = args.culprit {
        cfg.cp.culprit = c;
    }
    if let Some(t) = args.er_interval {
        cfg.cp.er_interval = Some(t);
    }
    if let Some(b) = args.cp_sample_base {
        cfg.cp.cp_min_sample_base = b;
    }
    if let Some(p) = args.cnm_priority {
        cfg.cp.cnm_priority = p;
    }
    for (i, s) in args.static_fdb.iter().enumerate() {
        let mac: EthernetAddress = s
            .mac
            .parse()
            .map_err(|_| cfgerr(format!("static_fdb[{i}].mac: invalid MAC {:?}", s.mac)))?;
        cfg.fdb.static_entries.push(StaticEntry {
            mac,
            vid: Some(s.vid),
            port: s.port.clone(),
        });
    }
    cfg.validate().map_err(|e| cfgerr(e.to_string()))?;
    Ok(cfg)
}

/// One port of the loop: open, or down with the reason.
struct PortSlot<P> {
    name: String,
    port: Option<P>,
    /// Why the port is down (`"missing"`, `"admin-down"`, the error that took it down).
    down_reason: Option<String>,
    /// Counters of this port's earlier, closed incarnations.
    io_closed: PortStats,
    /// Frames that arrived faster than the port's link could have delivered them.
    ingress: IngressMeter,
    /// The ingress link-rate stage (`None`: turned off).
    stage: Option<LinkStage>,
    /// How long the port's transmit ring refused frames ([`TxBlocked`]).
    tx_blocked: TxBlocked,
    /// Frames the emulated line started that wait for room in the ring ([`Wire`]).
    wire: Wire,
}

/// Octets of started frames a port keeps while its transmit ring is full: 2 MB, 16 ms at
/// 1 Gb/s (the spells measured at a 1 Gb/s bottleneck lasted up to 7 ms, [`TxBlocked`]).
const WIRE_LIMIT: usize = 2_000_000;

/// The frames the emulated line of a port has started but its transmit ring had no room
/// for, in order. The bridge charged them at their instants (its shaper's), so its queue
/// drains as the emulated link does while the kernel holds the ring's slots; the frames reach
/// the interface when the ring has room again, late by the spell ([`TxBlocked`]). A frame
/// that would take the FIFO past [`WIRE_LIMIT`] is refused to the bridge instead, which keeps
/// it at the head of its queue: a receiver that cannot keep up at all still holds the
/// emulated line back.
#[derive(Debug, Default)]
struct Wire {
    frames: std::collections::VecDeque<Vec<u8>>,
    bytes: usize,
    spare: Vec<Vec<u8>>,
    /// Frames that waited here.
    deferred: u64,
    /// Most octets held at once.
    max_bytes: usize,
}

impl Wire {
    /// Keeps a copy of `frame` behind the others; false when it does not fit.
    fn hold(&mut self, frame: &[u8]) -> bool {
        if self.bytes + frame.len() > WIRE_LIMIT {
            return false;
        }
        let mut b = self.spare.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(frame);
        self.frames.push_back(b);
        self.bytes += frame.len();
        self.deferred += 1;
        self.max_bytes = self.max_bytes.max(self.bytes);
        true
    }

    /// Forgets the front frame, which the ring took or the port refused for good.
    fn pop(&mut self) {
        if let Some(b) = self.frames.pop_front() {
            self.bytes -= b.len();
            self.spare.push(b);
        }
    }

    /// Drops every held frame (the port went down).
    fn clear(&mut self) {
        self.bytes = 0;
        self.spare.extend(self.frames.drain(..));
    }
}

impl<P: Port> PortSlot<P> {
    /// Sends the frames that wait in the port's [`Wire`] in order until the ring refuses one;
    /// true when some remain. A frame the port cannot send at all is dropped, counted by the
    /// port and reported in `refused` (as in [`transmit`]); a port whose link is gone is
    /// reported in `gone` and its frames are dropped with it.
    fn drain_wire(
        &mut self,
        pid: PortId,
        now: Instant,
        refused: &mut Vec<(PortId, usize)>,
        gone: &mut Option<String>,
    ) -> bool {
        let Some(port) = self.port.as_mut() else {
            self.wire.clear();
            return false;
        };
        while let Some(f) = self.wire.frames.front() {
            match port.send(f) {
                Ok(false) => {
                    self.tx_blocked.refused(now);
                    return true;
                }
                Ok(true) => self.tx_blocked.took(now),
                Err(e) if e.is_link_gone() => {
                    *gone = Some(e.to_string());
                    self.wire.clear();
                    return false;
                }
                Err(e) => {
                    tracing::debug!(port = %self.name, "send: {e}");
                    refused.push((pid, f.len()));
                }
            }
            self.wire.pop();
        }
        false
    }
}

/// Spells of a full transmit ring: from the first frame a port refuses (`Ok(false)`: the kernel
/// has not yet released the ring's slots) to the next it takes. Had the bridge kept the frame
/// at the head of its queue meanwhile, the emulated line would stand still while arrivals
/// went on: at a 1 Gb/s bottleneck fed at its rate, 125 kB of queue per millisecond that the
/// emulated link never had, sampled by the congestion point. On the dumbbell at S = 10 the
/// bottleneck port's spells lasted up to 1.3-7.0 ms per run (the queue filled, the CNMs cut
/// every flow). So the frames wait in the port's [`Wire`] instead, and the report gives the
/// spells' number, total and longest: how late those frames reached the interface.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
struct TxBlocked {
    /// Spells ended.
    spells: u64,
    /// Their total length (ns).
    total_ns: u64,
    /// The longest (ns).
    max_ns: u64,
    /// Start of the spell going on, if any.
    #[serde(skip)]
    since: Option<Instant>,
}

impl TxBlocked {
    /// The port refused a frame at `now`.
    fn refused(&mut self, now: Instant) {
        self.since.get_or_insert(now);
    }

    /// The port took a frame at `now`: the spell going on, if any, ends.
    fn took(&mut self, now: Instant) {
        if let Some(since) = self.since.take() {
            let d = now.saturating_since(since).as_nanos();
            self.spells += 1;
            self.total_ns = self.total_ns.saturating_add(d);
            self.max_ns = self.max_ns.max(d);
        }
    }
}

/// How often the reopening thread tries a down port again.
const RETRY: std::time::Duration = std::time::Duration::from_millis(500);

/// The ports' link settings against what applies them, before any interface is opened:
/// what only the ingress stage does needs the stage, departure stamps need an ingress delay
/// (their lookahead), and a wake quantum needs every port's stage to hold twice it and may
/// not exceed [`MAX_SLEEP`] (see the module documentation, "The wake quantum").
fn check_link_settings(args: &RunArgs, stage_on: bool) -> Result<(), DaemonError> {
    if let Some(p) = args.ports.iter().find(|p| p.needs_stage() && !stage_on) {
        return Err(DaemonError::Config(format!(
            "port {}: ingress_delay and departure_stamps are applied by the ingress stage, \
             which is off (ingress_stage = false)",
            p.name
        )));
    }
    if let Some(p) = args.ports.iter().find(|p| {
        p.departure_stamps == Some(true)
            && p.ingress_delay.unwrap_or(Duration::ZERO) == Duration::ZERO
    }) {
        return Err(DaemonError::Config(format!(
            "port {}: departure_stamps needs an ingress_delay: the link's delay is the lookahead \
             within which a stamped frame can be placed",
            p.name
        )));
    }
    if let Some(q) = args.wake_quantum.filter(|q| *q > MAX_SLEEP) {
        return Err(DaemonError::Config(format!(
            "wake_quantum {q}: at most {MAX_SLEEP} (control requests and signals wait for it)"
        )));
    }
    if let Some(q) = args.wake_quantum.filter(|q| *q > Duration::ZERO) {
        let short = args
            .ports
            .iter()
            .find(|p| p.ingress_delay.unwrap_or(Duration::ZERO) < q + q);
        if !stage_on || args.ports.is_empty() || short.is_some() {
            return Err(DaemonError::Config(format!(
                "wake_quantum {q}: every port (given as --port or [[port]]) needs the ingress \
                 stage and an ingress_delay of at least twice the quantum, the lookahead that \
                 absorbs a frame sent up to a quantum after its instant{}",
                short.map_or(String::new(), |p| format!(
                    "; port {} has {}",
                    p.name,
                    p.ingress_delay.unwrap_or(Duration::ZERO)
                ))
            )));
        }
    }
    Ok(())
}

/// Runs the daemon until `term` is set (SIGINT/SIGTERM). Returns after flushing traces.
pub fn run(args: RunArgs, term: Arc<AtomicBool>) -> Result<(), DaemonError> {
    let mut cfg = bridge_config(&args)?;
    let stage_on = args.ingress_stage.unwrap_or(true);
    check_link_settings(&args, stage_on)?;
    let ring = AfPacketConfig::default();

    // Every port must exist, with its offloads off (frames larger than the MTU and partial
    // checksums would otherwise reach the switch), before anything starts.
    let mut ports = Vec::with_capacity(cfg.ports.len());
    for pc in cfg.ports.iter_mut() {
        let name = pc.name.clone();
        if !phy::iface::exists(&name) {
            return Err(DaemonError::Config(format!(
                "port {name}: no such interface"
            )));
        }
        prepare_offloads("port", &name)?;
        // At start a switch brings its own ports up (AF_PACKET refuses a link that is down).
        // Later, a port an operator sets down stays down (see `Dataplane`).
        if !phy::iface::is_up(&name).unwrap_or(false) {
            phy::iface::set_up(&name, true)
                .map_err(|e| DaemonError::Runtime(format!("port {name}: set up: {e}")))?;
        }
        if pc.mac.is_none() {
            if let Ok(m) = phy::iface::mac(&name) {
                pc.mac = Some(EthernetAddress(m));
            }
        }
        if cfg.mac == BridgeConfig::default().mac {
            // The bridge MAC is the MAC part of every CPID: take the first port's address so
            // that switches in one network have distinct CPIDs.
            if let Ok(m) = phy::iface::mac(&name) {
                cfg.mac = EthernetAddress(m);
            }
        }
        let port = AfPacketPort::open(&name, &ring)
            .map_err(|e| DaemonError::Runtime(format!("port {name}: {e}")))?;
        ports.push(Some(port));
    }

    let clock = Monotonic;
    let overheads = cfg.shaper.overheads();
    let seed = args.seed.unwrap_or_else(|| clock.now().as_nanos());
    let bridge =
        Bridge::new(cfg, Rng::new(seed)).map_err(|e| DaemonError::Config(e.to_string()))?;
    tracing::info!(
        ports = ?(0..bridge.num_ports()).filter_map(|i| bridge.port_name(PortId(i as u16))).collect::<Vec<_>>(),
        seed,
        "cp-switch running"
    );

    let (req_tx, req_rx) = ctl::channel();
    let _ctl = match &args.ctl {
        Some(p) => Some(
            CtlServer::start(p, req_tx.clone(), Command::parse)
                .map_err(|e| DaemonError::Config(format!("ctl {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let _metrics = match args.metrics {
        Some(a) => {
            let m = MetricsServer::start(a, args.metrics_allow_remote, req_tx.clone())
                .map_err(|e| DaemonError::Config(format!("metrics {a}: {e}")))?;
            tracing::info!(addr = %m.local_addr(), "metrics served");
            Some(m)
        }
        None => None,
    };
    drop(req_tx);
    let trace = match &args.trace {
        Some(p) => Some(
            TraceWriter::create(p)
                .map_err(|e| DaemonError::Config(format!("trace {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let reopener = Reopener::start(AfPacketOpener { role: "port", ring }, RETRY)
        .map_err(|e| DaemonError::Runtime(format!("reopening thread: {e}")))?;

    // Sleeps end when the next departure is due, not up to 50 us later (the default timer slack).
    if let Err(e) = phy::poll::set_timer_slack(Duration::from_nanos(1000)) {
        tracing::debug!("timer slack: {e}");
    }
    let mut dp =
        Dataplane::new(bridge, ports, reopener, clock, req_rx).with_line_overheads(overheads);
    if stage_on {
        dp = dp.with_ingress_stage(Arrivals::KernelStamps);
        for p in &args.ports {
            dp.set_ingress_link(
                &p.name,
                p.ingress_delay.unwrap_or(Duration::ZERO),
                p.departure_stamps.unwrap_or(false),
            );
        }
    }
    if let Some(t) = trace {
        dp = dp.with_trace(t, args.trace_interval.unwrap_or(Duration::from_millis(1)));
    }
    if let Some(q) = args.wake_quantum {
        dp = dp.with_wake_quantum(q);
    }
    // Only this (the dataplane) thread: the helper threads above stay time-shared.
    daemon_kit::sched::SchedArgs {
        sched: args.sched,
        cpu: args.cpu.clone(),
    }
    .apply()?;
    dp.run(&term)?;
    tracing::info!("signal received: shutting down");
    dp.finish();
    Ok(())
}

/// The dataplane loop over any [`Port`] and any [`Clock`]: AF_PACKET ports and the monotonic
/// clock in production, in-memory pipes and a warped clock in tests.
///
/// A port whose interface disappears or goes down is marked down in the bridge (its queues are
/// flushed and counted), closed and watched by the [`Reopener`] thread, which hands it back
/// once it can be opened again; an operator's `ip link set P down` keeps it down (reported as
/// `admin-down` in `stats`) until the operator sets it up. None of this runs on the loop's
/// thread, so the other ports never wait for it.
pub struct Dataplane<P: Port + Send + 'static, C: Clock> {
    bridge: Bridge,
    slots: Vec<PortSlot<P>>,
    reopener: Reopener<P>,
    clock: C,
    requests: Receiver<ctl::Request>,
    trace: Option<TraceWriter>,
    trace_interval: Duration,
    next_trace: Instant,
    queue_tracker: QueueTracker,
    /// Frames an interface refused for good during one `step` (port, octets), reported to the
    /// bridge after `poll_transmit` ([`Bridge::tx_refused`]).
    refused: Vec<(PortId, usize)>,
    /// Where the ingress stage takes a frame's arrival time from.
    arrivals: Arrivals,
    /// The latest time handed to the bridge (it must never go back).
    bridge_time: Instant,
    /// Least time between two iterations ([`Dataplane::with_wake_quantum`]; zero: none).
    wake_quantum: Duration,
    /// When the last iteration began (`None`: none yet).
    last_step: Option<Instant>,
}

/// Where the ingress link-rate stage ([`super::stage`]) takes a frame's arrival time from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrivals {
    /// The kernel's receive stamp, mapped onto the loop's clock with the offset between that
    /// clock and `CLOCK_REALTIME` sampled once per iteration (the daemon on real ports).
    KernelStamps,
    /// The time the loop read the frame (a clock the stamps are not on, as a test's warped
    /// clock).
    ReadTime,
    /// The port's stamp as it is: the ports stamp on the loop's own clock (a test's pipes,
    /// stamped with `PipePort::send_stamped` on the warped clock).
    #[cfg_attr(not(test), allow(dead_code))]
    LoopStamps,
}

impl<P: Port + Send + 'static, C: Clock> std::fmt::Debug for Dataplane<P, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataplane")
            .field(
                "ports",
                &self.slots.iter().map(|s| &s.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl<P: Port + Send + 'static, C: Clock> Dataplane<P, C> {
    /// A loop over `bridge` with `ports[i]` as bridge port `i` (`None`: down at start and
    /// watched by `reopener`), answering control requests from `requests`.
    pub fn new(
        mut bridge: Bridge,
        ports: Vec<Option<P>>,
        reopener: Reopener<P>,
        clock: C,
        requests: Receiver<ctl::Request>,
    ) -> Self {
        let now = clock.now();
        let rates: Vec<_> = bridge.stats().ports.iter().map(|p| p.rate).collect();
        let slots = ports
            .into_iter()
            .enumerate()
            .map(|(i, port)| {
                let name = bridge
                    .port_name(PortId(i as u16))
                    .unwrap_or_default()
                    .to_owned();
                let mut down_reason = None;
                if port.is_none() {
                    bridge.set_port_up(now, PortId(i as u16), false);
                    reopener.watch(i, &name);
                    down_reason = Some("not open".to_string());
                }
                PortSlot {
                    name,
                    port,
                    down_reason,
                    io_closed: PortStats::default(),
                    ingress: IngressMeter::new(rates.get(i).copied().flatten(), Overheads::FRAME),
                    stage: None,
                    tx_blocked: TxBlocked::default(),
                    wire: Wire::default(),
                }
            })
            .collect();
        Dataplane {
            bridge,
            slots,
            reopener,
            clock,
            requests,
            trace: None,
            trace_interval: Duration::from_millis(1),
            next_trace: now,
            queue_tracker: QueueTracker::default(),
            refused: Vec::new(),
            arrivals: Arrivals::ReadTime,
            bridge_time: now,
            wake_quantum: Duration::ZERO,
            last_step: None,
        }
    }

    /// Runs the loop at most once every `q` (see the module documentation, "The wake
    /// quantum"); zero runs it whenever something is due or readable.
    pub fn with_wake_quantum(mut self, q: Duration) -> Self {
        self.wake_quantum = q;
        self
    }

    /// Turns on the ingress link-rate stage ([`super::stage`]) of every port, each frame
    /// arriving at the time `arrivals` says. Call after [`Dataplane::with_line_overheads`].
    pub fn with_ingress_stage(mut self, arrivals: Arrivals) -> Self {
        let rates: Vec<_> = self.bridge.stats().ports.iter().map(|p| p.rate).collect();
        for (i, s) in self.slots.iter_mut().enumerate() {
            let rate = rates.get(i).copied().flatten().filter(|r| r.bps() > 0);
            s.stage = Some(LinkStage::new(rate, s.ingress.overheads(), STAGE_LIMIT));
        }
        self.arrivals = arrivals;
        self
    }

    /// The link into port `name` has propagation delay `delay` and its sender's departure
    /// stamps are trusted when `stamps` ([`LinkStage::with_link`]); nothing without a stage.
    pub fn set_ingress_link(&mut self, name: &str, delay: Duration, stamps: bool) {
        for s in self.slots.iter_mut().filter(|s| s.name == name) {
            if let Some(st) = s.stage.take() {
                s.stage = Some(st.with_link(delay, stamps));
            }
        }
    }

    /// What a frame costs on the ports' lines (the bridge's `shaper` settings), for the
    /// ingress burst measure ([`super::ingress`]); the frame's own octets until told.
    pub fn with_line_overheads(mut self, overheads: Overheads) -> Self {
        for s in &mut self.slots {
            s.ingress.set_overheads(overheads);
            if let Some(st) = &mut s.stage {
                st.set_overheads(overheads);
            }
        }
        self
    }

    /// Writes the JSON-lines trace to `trace`, queue snapshots every `interval`.
    pub fn with_trace(mut self, trace: TraceWriter, interval: Duration) -> Self {
        self.trace = Some(trace);
        self.trace_interval = interval;
        self
    }

    /// Runs until `term` is set.
    pub fn run(&mut self, term: &AtomicBool) -> Result<(), DaemonError> {
        let mut fds: Vec<i32> = Vec::with_capacity(self.slots.len());
        let mut gone: Vec<(usize, String)> = Vec::new();
        while !term.load(Ordering::Relaxed) {
            if self.wake_quantum > Duration::ZERO {
                self.sleep_out_the_quantum(term)?;
                self.last_step = Some(self.clock.now());
            }
            let busy = self.step(&mut gone);
            // Sleep until a port is readable, the bridge has a departure due, or a
            // housekeeping deadline passes.
            if busy {
                continue;
            }
            let now = self.clock.now();
            let mut deadline = now + MAX_SLEEP;
            if let Some(t) = self.bridge.poll_timeout() {
                deadline = deadline.min(t);
            }
            // The earliest frame an ingress stage holds.
            for t in self
                .slots
                .iter()
                .filter_map(|s| s.stage.as_ref()?.next_due())
            {
                deadline = deadline.min(t);
            }
            if self.trace.is_some() {
                deadline = deadline.min(self.next_trace);
            }
            if let Some(end) = self.quantum_end() {
                if deadline <= end {
                    // Nothing is due before the quantum is over: its sleep is the only one.
                    continue;
                }
                // One sleep to the quantum's end, then the ports: at once if a frame came
                // meanwhile (no timer armed), so that a quantum costs one wake-up under load.
                self.sleep_out_the_quantum(term)?;
            }
            fds.clear();
            fds.extend(
                self.slots
                    .iter()
                    .map(|s| s.port.as_ref().and_then(|p| p.raw_fd()).unwrap_or(-1)),
            );
            if deadline > now {
                self.clock
                    .wait(&fds, deadline)
                    .map_err(|e| DaemonError::Runtime(format!("ppoll: {e}")))?;
            }
        }
        Ok(())
    }

    /// When the current quantum ends (`None`: no quantum, or no iteration yet).
    fn quantum_end(&self) -> Option<Instant> {
        let start = self
            .last_step
            .filter(|_| self.wake_quantum > Duration::ZERO)?;
        Some(start + self.wake_quantum)
    }

    /// Sleeps, with no port to wake it, until the current quantum ends (or `term` is set).
    fn sleep_out_the_quantum(&self, term: &AtomicBool) -> Result<(), DaemonError> {
        let Some(end) = self.quantum_end() else {
            return Ok(());
        };
        while self.clock.now() < end && !term.load(Ordering::Relaxed) {
            self.clock
                .wait(&[], end)
                .map_err(|e| DaemonError::Runtime(format!("ppoll: {e}")))?;
        }
        Ok(())
    }

    /// One iteration without the sleep; true when a port had more to give or take.
    ///
    /// Ports with an ingress stage are read first and their due frames handed to the bridge
    /// in delivery order, each after the departures due before it; then the other ports are
    /// read and their frames handed at `now`; then the bridge transmits what is due at `now`.
    fn step(&mut self, gone: &mut Vec<(usize, String)>) -> bool {
        let now = self.clock.now();
        let offset = match self.arrivals {
            Arrivals::KernelStamps => Some(stage::realtime_offset(now, realtime_ns())),
            Arrivals::ReadTime => None,
            Arrivals::LoopStamps => Some(0),
        };
        let mut busy = false;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let (Some(port), Some(stage)) = (slot.port.as_mut(), slot.stage.as_mut()) else {
                continue;
            };
            if !stage.active() {
                continue;
            }
            let meter = &mut slot.ingress;
            let mut rx = |f: &[u8], t: Option<u64>| {
                meter.record(t, f.len());
                // A full stage drops the frame and counts it (`ingress.stage.overflow_drops`).
                let _ = stage.admit(stage::arrival(t, offset, now), now, f);
            };
            // Everything waiting, before any of it reaches the bridge: a frame left in the
            // ring would be handed over after the bridge has run on to `now`.
            for k in 1..=STAGED_BATCHES {
                match port.recv_batch_stamped(BATCH, &mut rx) {
                    Ok(n) if n < BATCH => break,
                    Ok(_) => busy |= k == STAGED_BATCHES,
                    Err(e) if e.is_link_gone() => {
                        gone.push((i, e.to_string()));
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(port = %slot.name, "receive: {e}");
                        break;
                    }
                }
            }
        }
        self.release_staged(now, gone, &mut busy);
        let bridge = &mut self.bridge;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let Some(port) = slot.port.as_mut() else {
                continue;
            };
            if slot.stage.as_ref().is_some_and(LinkStage::active) {
                continue;
            }
            let pid = PortId(i as u16);
            let meter = &mut slot.ingress;
            let mut rx = |f: &[u8], t: Option<u64>| {
                meter.record(t, f.len());
                bridge.handle_frame(now, pid, f);
            };
            match port.recv_batch_stamped(BATCH, &mut rx) {
                Ok(n) => busy |= n == BATCH,
                Err(e) if e.is_link_gone() => gone.push((i, e.to_string())),
                Err(e) => tracing::warn!(port = %slot.name, "receive: {e}"),
            }
        }
        // Departures up to the instant the ports were read, not a later one: a frame that
        // reached a ring after the reads is stamped after that instant, and the bridge's time
        // must not pass it before it is read (it would be handed over late; see
        // `super::stage`). What falls due meanwhile is sent by the next iteration (at once, or
        // when the wake quantum is over).
        let now = now.max(self.bridge_time);
        self.bridge_time = now;
        busy |= transmit(
            &mut self.bridge,
            &mut self.slots,
            &mut self.refused,
            now,
            gone,
        );
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if let Some(port) = slot.port.as_mut() {
                if let Err(e) = port.flush() {
                    if e.is_link_gone() {
                        gone.push((i, e.to_string()));
                    } else {
                        tracing::debug!(port = %slot.name, "flush: {e}");
                    }
                }
            }
        }
        for (i, why) in gone.drain(..) {
            self.port_gone(i, now, why);
        }
        while let Some(ev) = self.reopener.poll() {
            self.reopened(ev, now);
        }

        let now = self.clock.now();
        if let Some(t) = self.trace.as_mut() {
            self.bridge
                .drain_events(&mut |ev| t.write(&TraceRecord::event(None, ev)));
            if now >= self.next_trace {
                let tracker = &mut self.queue_tracker;
                if let Some(line) = self.bridge.queues_line(tracker, now.as_nanos(), None) {
                    t.write(&TraceRecord::<()>::Queues(line));
                }
                self.next_trace = now + self.trace_interval;
            }
        } else {
            self.bridge.drain_events(&mut |_| {});
        }

        let (bridge, slots, trace) = (&mut self.bridge, &mut self.slots, &mut self.trace);
        ctl::answer_pending(&self.requests, |cmd| {
            let r = handle_command(bridge, slots, now, &cmd);
            if let (Command::SetCp { .. }, Ok(v), Some(t)) = (&cmd, &r, trace.as_mut()) {
                // The change in the trace, beside the queue records it affects.
                t.write(&TraceRecord::<()>::CpConfig(ConfigChange {
                    t: now.as_nanos(),
                    node: None,
                    set: v["set"].clone(),
                    change: Some(v["change"].clone()),
                    error: None,
                }));
            }
            r
        });
        busy
    }

    /// Hands the frames the ingress stages hold that are due at `now` to the bridge, all
    /// ports merged in delivery order; before each, the bridge transmits what is due up to
    /// the frame's delivery, so arrivals and departures interleave as they would have on the
    /// links however late this loop ran. The bridge's time never goes back.
    fn release_staged(&mut self, now: Instant, gone: &mut Vec<(usize, String)>, busy: &mut bool) {
        loop {
            let next = self
                .slots
                .iter()
                .enumerate()
                .filter_map(|(i, s)| Some((s.stage.as_ref()?.next_due()?, i)))
                .min();
            let Some((due, i)) = next.filter(|(due, _)| *due <= now) else {
                return;
            };
            let t = due.max(self.bridge_time);
            if self.bridge.poll_timeout().is_some_and(|d| d <= t) {
                *busy |= transmit(
                    &mut self.bridge,
                    &mut self.slots,
                    &mut self.refused,
                    t,
                    gone,
                );
            }
            let Some(stage) = self.slots[i].stage.as_mut() else {
                return;
            };
            let Some((_, mut frame)) = stage.pop_due(now) else {
                return;
            };
            stage.note_late(t.saturating_since(due));
            self.bridge
                .handle_frame_buf(t, PortId(i as u16), &mut frame);
            stage.recycle(frame);
            self.bridge_time = t;
        }
    }

    fn port_gone(&mut self, i: usize, now: Instant, why: String) {
        let slot = &mut self.slots[i];
        if let Some(mut port) = slot.port.take() {
            tracing::warn!(port = %slot.name, "port down: {why}");
            slot.io_closed.accumulate(&port.counters());
            slot.ingress.restart();
            slot.wire.clear();
            if let Some(st) = &mut slot.stage {
                st.port_down();
            }
            self.bridge.set_port_up(now, PortId(i as u16), false);
            slot.down_reason = Some(why);
            self.reopener.close(port);
            self.reopener.watch(i, &slot.name);
        }
    }

    fn reopened(&mut self, ev: Reopened<P>, now: Instant) {
        match ev {
            Reopened::Open { index, port } => {
                let Some(slot) = self.slots.get_mut(index) else {
                    return;
                };
                tracing::info!(port = %slot.name, "port back up");
                slot.port = Some(port);
                slot.down_reason = None;
                slot.ingress.restart();
                self.bridge.set_port_up(now, PortId(index as u16), true);
            }
            Reopened::Waiting { index, why } => {
                if let Some(slot) = self.slots.get_mut(index) {
                    tracing::info!(port = %slot.name, "port stays down: {}", why.reason());
                    slot.down_reason = Some(why.reason());
                }
            }
        }
    }

    /// Flushes the trace (at exit).
    pub fn finish(&mut self) {
        if let Some(t) = self.trace.take() {
            let lost = t.lost();
            match t.finish() {
                Ok(n) => tracing::info!(lines = n, lost, "trace flushed"),
                Err(e) => tracing::warn!("trace: {e}"),
            }
        }
    }
}

/// Lets the bridge transmit what is due at `now` on the open ports, after the frames that wait
/// for room in a port's ring ([`Wire`]); true when a port had no room for a frame (the loop
/// should come back at once). A port whose link is gone is pushed
/// on `gone`; a frame a port refuses for good is recorded in `refused` and reported to the
/// bridge.
fn transmit<P: Port>(
    bridge: &mut Bridge,
    slots: &mut [PortSlot<P>],
    refused: &mut Vec<(PortId, usize)>,
    now: Instant,
    gone: &mut Vec<(usize, String)>,
) -> bool {
    let mut busy = false;
    // First the frames started earlier that wait for room in a ring, in order.
    for (i, slot) in slots.iter_mut().enumerate() {
        if slot.wire.frames.is_empty() {
            continue;
        }
        let mut lost = None;
        let pid = PortId(u16::try_from(i).unwrap_or(u16::MAX));
        busy |= slot.drain_wire(pid, now, refused, &mut lost);
        if let Some(why) = lost {
            gone.push((i, why));
        }
    }
    // The socket copies the frame into its ring: the bridge keeps its buffer.
    bridge.poll_transmit_buf(now, &mut |pid, frame| {
        let Some(slot) = slots.get_mut(pid.index()) else {
            return false;
        };
        let Some(port) = slot.port.as_mut() else {
            return false;
        };
        if !slot.wire.frames.is_empty() {
            // Behind the frames that wait for the ring: in order, or back to the bridge.
            busy = true;
            return slot.wire.hold(frame);
        }
        match port.send(frame) {
            Ok(true) => {
                slot.tx_blocked.took(now);
                true
            }
            Ok(false) => {
                // The emulated line has started the frame; only the ring has no room.
                slot.tx_blocked.refused(now);
                busy = true;
                slot.wire.hold(frame)
            }
            Err(e) if e.is_link_gone() => {
                gone.push((pid.index(), e.to_string()));
                false
            }
            Err(e) => {
                tracing::debug!(port = %slot.name, "send: {e}");
                // The frame cannot be sent by this port at all (longer than its MTU, ...):
                // drop it rather than wedging the queue; the port counts it
                // (`io.tx_oversize`, `io.tx_errors` in `stats`) and the bridge takes it
                // back out of its transmit counters (a `tx_refused` drop).
                refused.push((pid, frame.len()));
                true
            }
        }
    });
    for (pid, len) in refused.drain(..) {
        bridge.tx_refused(now, pid, len);
    }
    busy
}

/// Now on `CLOCK_REALTIME`, in nanoseconds since the Unix epoch (the clock of the kernel's
/// receive stamps; 0 if the clock is before the epoch).
fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn stats_json<P: Port>(bridge: &Bridge, slots: &mut [PortSlot<P>]) -> Value {
    let mut v = serde_json::to_value(bridge.stats()).unwrap_or(Value::Null);
    // The dataplane thread's policy and CPUs, as the kernel applies them (commands are
    // answered on that thread).
    v["sched"] = daemon_kit::sched::current();
    if let Some(ports) = v["ports"].as_array_mut() {
        for (p, slot) in ports.iter_mut().zip(slots.iter_mut()) {
            if let Some(reason) = &slot.down_reason {
                p["down_reason"] = json!(reason);
            }
            // The port's own counters: kernel ring drops (`rx_dropped`), truncated frames,
            // frames refused for the MTU (`tx_oversize`), ...
            let mut io = slot.io_closed;
            if let Some(port) = slot.port.as_mut() {
                io.accumulate(&port.counters());
            }
            p["io"] = serde_json::to_value(io).unwrap_or(Value::Null);
            // Frames that reached the port faster than its link could have carried them.
            let ing = slot.ingress.stats();
            p["ingress"] = serde_json::to_value(ing).unwrap_or(Value::Null);
            p["ingress"]["early_share"] = json!(ing.early_share());
            // What the ingress link-rate stage held back (null: the stage is off).
            p["ingress"]["stage"] = slot
                .stage
                .as_ref()
                .and_then(|st| serde_json::to_value(st.stats()).ok())
                .unwrap_or(Value::Null);
            // Spells of a full transmit ring: how late the frames that waited reached the port.
            p["io"]["tx_blocked"] = serde_json::to_value(slot.tx_blocked).unwrap_or(Value::Null);
            // The frames that waited for room meanwhile, the emulated line going on.
            p["io"]["tx_deferred"] = json!(slot.wire.deferred);
            p["io"]["tx_deferred_max_bytes"] = json!(slot.wire.max_bytes);
        }
    }
    v
}

fn port_by_name(bridge: &Bridge, name: &str) -> Result<PortId, String> {
    bridge
        .port_id(name)
        .ok_or_else(|| format!("no port named {name:?}"))
}

fn handle_command<P: Port>(
    bridge: &mut Bridge,
    slots: &mut [PortSlot<P>],
    now: Instant,
    cmd: &Command,
) -> Result<Value, String> {
    match cmd {
        Command::Stats => Ok(stats_json(bridge, slots)),
        Command::ShowPorts => {
            let mut v = stats_json(bridge, slots);
            Ok(v["ports"].take())
        }
        Command::ShowQueues => {
            let mut v = stats_json(bridge, slots);
            Ok(v["queues"].take())
        }
        Command::ShowCps => serde_json::to_value(bridge.cp_stats()).map_err(|e| e.to_string()),
        Command::ShowFdb => serde_json::to_value(bridge.fdb_entries()).map_err(|e| e.to_string()),
        Command::SetRate { port, rate } => {
            let p = port_by_name(bridge, port)?;
            bridge.set_port_rate(now, p, *rate);
            // The bridge ignores a zero rate; so does the ingress measure.
            if let (Some(slot), false) =
                (slots.get_mut(p.index()), rate.is_some_and(|r| r.bps() == 0))
            {
                slot.ingress.set_rate(*rate);
                if let Some(st) = &mut slot.stage {
                    st.set_rate(now, *rate);
                }
            }
            Ok(json!({"port": port, "rate": rate}))
        }
        Command::SetDelay { port, delay } => {
            let p = port_by_name(bridge, port)?;
            bridge.set_port_delay(now, p, *delay);
            Ok(json!({"port": port, "delay": delay}))
        }
        Command::SetCp { set } => set_cp(bridge, set),
    }
}

/// `set cp`: applies the overrides; answers what changed, how, and the `[cp]` settings now in
/// force.
fn set_cp(bridge: &mut Bridge, set: &[(String, String)]) -> Result<Value, String> {
    let patch = daemon_kit::patch::from_pairs::<cp_switch::CpPatch>(set)
        .map_err(|e| cp_switch::CpPatch::key_error(&e.key, e.reason).to_string())?;
    let change = bridge.apply_cp_patch(&patch).map_err(|e| e.to_string())?;
    let table = daemon_kit::patch::table(set);
    let now = toml::Table::try_from(bridge.cp_config()).map_err(|e| e.to_string())?;
    Ok(json!({"set": table, "change": change, "cp": now}))
}

#[cfg(test)]
mod loop_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// A spell runs from the first refusal to the next frame taken; refusals within it do
    /// not restart it, and a frame taken outside a spell ends none.
    #[test]
    fn transmit_ring_spells_are_timed_from_the_first_refusal_to_the_next_frame_taken() {
        let t = |us: u64| Instant::from_nanos(us * 1_000);
        let mut b = TxBlocked::default();
        b.took(t(1));
        b.refused(t(10));
        b.refused(t(40));
        b.took(t(310));
        b.took(t(320));
        b.refused(t(400));
        b.took(t(450));
        assert_eq!((b.spells, b.total_ns, b.max_ns), (2, 350_000, 300_000));
        let v = serde_json::to_value(b).unwrap();
        assert_eq!(
            v,
            json!({"spells": 2, "total_ns": 350_000, "max_ns": 300_000})
        );
    }
    use cnm_proto::Bytes;
    use cp_switch::Placement;

    #[test]
    fn congestion_point_settings_reach_the_bridge() {
        let args = RunArgs {
            ports: vec!["p1".parse().unwrap(), "p2".parse().unwrap()],
            ..Default::default()
        };
        let cfg = bridge_config(&args).unwrap();
        assert_eq!(cfg.cp.placement, Placement::Output);
        assert_eq!(cfg.cp.cnpv, vec![3]);
        assert_eq!(cfg.cp.cp_queue_set_point, Bytes::new(26_000));

        let args = RunArgs {
            cp: Some(Placement::Input),
            cnpv: Some(vec![3, 5]),
            cp_set_point: Some(Bytes::new(33_000)),
            cp_weight: Some(4),
            cp_sample_base: Some(Bytes::new(75_000)),
            cnm_priority: Some(7),
            ..args
        };
        let cfg = bridge_config(&args).unwrap();
        assert_eq!(cfg.cp.placement, Placement::Input);
        assert_eq!(cfg.cp.cnpv_mask(), 0b10_1000);
        assert_eq!(cfg.cp.cp_queue_set_point, Bytes::new(33_000));
        assert_eq!(cfg.cp.cp_feedback_weight, 4);
        assert_eq!(cfg.cp.cp_min_sample_base, Bytes::new(75_000));
        assert_eq!(cfg.cp.cnm_priority, 7);

        let bad = RunArgs {
            cp_weight: Some(3),
            ..args.clone()
        };
        let e = bridge_config(&bad).unwrap_err().to_string();
        assert!(e.contains("cp.cp_feedback_weight"), "{e}");
        let bad = RunArgs {
            cnpv: Some(vec![9]),
            ..args
        };
        let e = bridge_config(&bad).unwrap_err().to_string();
        assert!(e.contains("cp.cnpv[0]"), "{e}");
    }

    #[test]
    fn set_cp_answers_the_settings_in_force_or_an_error() {
        let args = RunArgs {
            ports: vec!["p1".parse().unwrap(), "p2".parse().unwrap()],
            ..Default::default()
        };
        let cfg = bridge_config(&args).unwrap();
        let mut bridge = Bridge::new(cfg, cnm_proto::rng::Rng::new(1)).unwrap();
        let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
            p.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let v = set_cp(
            &mut bridge,
            &pairs(&[("cp_queue_set_point", "20KB"), ("cp_feedback_weight", "4")]),
        )
        .unwrap();
        assert_eq!(v["change"], "in-place");
        assert_eq!(v["set"]["cp_feedback_weight"], 4);
        assert_eq!(v["cp"]["cp_feedback_weight"], 4);
        assert!(bridge.cp_stats().iter().all(|c| c.qeq == 20_000));
        let v = set_cp(&mut bridge, &pairs(&[("mode", "fqcn")])).unwrap();
        assert_eq!(v["change"], "rebuilt");
        let e = set_cp(&mut bridge, &pairs(&[("cp_feedback_weight", "3")])).unwrap_err();
        assert!(e.contains("cp.cp_feedback_weight"), "{e}");
        let e = set_cp(&mut bridge, &pairs(&[("nonsense", "3")])).unwrap_err();
        assert!(e.contains("nonsense"), "{e}");
        assert_eq!(bridge.cp_config().cp_feedback_weight, 4);
    }

    #[test]
    fn variant_modes_reach_the_bridge_and_nonsense_is_refused() {
        use cnm_proto::Duration;
        use cp_switch::{CpMode, Culprit};
        let args = RunArgs {
            ports: vec!["p1".parse().unwrap(), "p2".parse().unwrap()],
            cp: Some(Placement::Input),
            culprit: Some(Culprit::OccupancyRandom),
            ..Default::default()
        };
        let cfg = bridge_config(&args).unwrap();
        assert_eq!(cfg.cp.culprit, Culprit::OccupancyRandom);
        let args = RunArgs {
            cp_mode: Some(CpMode::ExplicitRate),
            culprit: None,
            er_interval: Some(Duration::from_millis(3)),
            ..args
        };
        let cfg = bridge_config(&args).unwrap();
        assert_eq!(cfg.cp.mode, CpMode::ExplicitRate);
        assert_eq!(cfg.cp.er_interval, Some(Duration::from_millis(3)));
        let bad = RunArgs {
            cp_mode: Some(CpMode::Fqcn),
            culprit: Some(Culprit::OccupancyDeterministic),
            ..args
        };
        let e = bridge_config(&bad).unwrap_err().to_string();
        assert!(e.contains("cp.culprit") && e.contains("fqcn"), "{e}");
    }
}
