//! A host of the simulator: the production [`rp_agent::Agent`] core between the host's
//! applications and its uplink, driven as the rp-agent daemon drives it.
//!
//! Applications are the agent's own sans-IO traffic models ([`rp_agent::gen::Source`], one per
//! configured flow, active between its start and stop instants), its
//! [`rp_agent::gen::sink::Sink`] for every generated frame that arrives, and optionally the
//! simulator's TCP-like endpoints ([`super::tcp`]). Host frames enter the agent through
//! [`Agent::handle_host`]; a `Backpressure` refusal keeps the frame in the application until
//! the agent has room (a blocking socket write) — each application holds its refused frame in
//! the agent's shared [`HeldFrames`], as the daemon's generator and TAP reader do; uplink frames
//! enter through
//! [`Agent::handle_uplink`], and frames the agent hands to the host ([`Agent::poll_host`]) go
//! to the sink and the TCP endpoints as soon as the agent has them (within the delivery of the
//! frame that brought them).
//!
//! One poll, in order: frames for the host → applications; applications → `handle_host`;
//! `poll_uplink` onto the link.
//!
//! # The poll grid: a model of a daemon's loop
//! By default a host is polled at the very instant its agent or an application is due, as no
//! process on a real machine is. [`HostNode::with_poll_grid`] makes the host's timers fire only
//! at multiples of a period `g` (a timer due at `t` fires at `⌈t/g⌉·g`; frames for the host
//! are still taken when they arrive, and the frames a late wake-up lets go leave back to back
//! as the link takes them, as a daemon's burst leaves through its ring): the agent's pacers
//! then back-date the late start (`catch_up`, as in the daemon), and every host on the same
//! grid sends at the same instants,
//! as the hosts of one `rp-agent hosts` loop do, whose wake-ups come in quanta (its
//! `PACE_QUANTUM`) and late. It measures how much of a namespace run's congestion feedback
//! comes from its senders' timing. On the built-in dumbbell (4 greedy flows, 10 Gb/s, seed 1;
//! `testbed run dumbbell --mode sim --set host.hN.poll_grid=G` for the four senders):
//!
//! | grid | none | 0.5 µs | 1 µs | 2.5 µs | 5 µs | 10 µs | 20 µs |
//! |---|---|---|---|---|---|---|---|
//! | CNMs' mean QntzFb | 1.13 | 1.13 | 1.16 | 1.36 | 1.83 | 2.66 | 3.66 |
//! | queue mean (kB) | 29.7 | 29.7 | 29.7 | 28.6 | 27.6 | 21.8 | 19.5 |
//!
//! With no grid and every link's delay four times longer (the loop's latency, not its
//! timing) the mean QntzFb was 1.15. Namespace runs at S = 10 showed 3.8–5.3 with the queue
//! 17–31 % below the simulator's: the simulator's hosts on a 10–20 µs grid, 100–200 µs of
//! the hosts process's wall clock.

use super::tcp::{TcpEvent, TcpHost};
use cnm_proto::rng::Rng;
use cnm_proto::wire::EthernetAddress;
use cnm_proto::Instant;
use rp_agent::gen::sink::Sink;
use rp_agent::gen::{Pattern, Source};
use rp_agent::held::{HeldFrames, Offered};
use rp_agent::{Agent, AgentConfig};
use serde_json::{json, Value};

/// A host's trace event: its agent's or its TCP endpoints'. Both carry their own `event` tag
/// and `at`; the engine writes them as trace `event` lines of the host's node.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum HostEvent {
    /// The agent's (`rp_agent::Event`).
    Agent(rp_agent::Event),
    /// The TCP endpoints' ([`TcpEvent`]).
    Tcp(TcpEvent),
}

/// Most flows the host's sink tracks.
const SINK_FLOWS: usize = 1024;

/// One generated flow of a host.
#[derive(Debug, Clone)]
pub struct FlowSpec {
    /// Flow id carried in every frame's payload header (unique per run).
    pub id: u32,
    /// Name, for the summary.
    pub name: String,
    /// Destination MAC.
    pub dst: EthernetAddress,
    /// Traffic model.
    pub pattern: Pattern,
    /// Frame length in octets (without FCS).
    pub frame_len: usize,
    /// First instant the flow may send.
    pub start: Instant,
    /// The flow stops generating at this instant.
    pub stop: Instant,
}

#[derive(Debug)]
struct App {
    spec: FlowSpec,
    src: Source,
    /// A frame refused with backpressure waits here for room (at most one: the application
    /// stops producing while it holds one).
    held: HeldFrames,
    /// Octets of the buffer a frame is generated into.
    buf_len: usize,
    refused: u64,
    /// Past its stop instant with nothing held: never due again.
    done: bool,
}

/// A simulated host.
#[derive(Debug)]
pub struct HostNode {
    agent: Agent,
    mac: EthernetAddress,
    rng: Rng,
    apps: Vec<App>,
    sink: Sink,
    tcp: Option<TcpHost>,
    /// Generated frames the agent refused for good (malformed, too long, flow table full).
    refused: u64,
    /// Timers fire on multiples of this (nanoseconds; 0: when due). See the module
    /// documentation.
    grid_ns: u64,
}

impl HostNode {
    /// A host whose agent runs `cfg`; `rng` is split between the agent and the generators.
    pub fn new(
        cfg: AgentConfig,
        mac: EthernetAddress,
        mut rng: Rng,
        flows: Vec<FlowSpec>,
    ) -> Result<HostNode, rp_agent::ConfigError> {
        let agent_rng = rng.fork(0);
        let agent = Agent::new(cfg, agent_rng)?;
        let apps = flows
            .into_iter()
            .map(|spec| App {
                src: Source::new(
                    spec.pattern,
                    spec.id,
                    spec.dst,
                    mac,
                    spec.frame_len,
                    spec.start,
                ),
                buf_len: spec.frame_len.max(64),
                held: HeldFrames::new(),
                refused: 0,
                done: false,
                spec,
            })
            .collect();
        Ok(HostNode {
            agent,
            mac,
            rng,
            apps,
            sink: Sink::new(SINK_FLOWS),
            tcp: None,
            refused: 0,
            grid_ns: 0,
        })
    }

    /// Fires the host's timers only at multiples of `grid` (zero: when due); see the module
    /// documentation.
    pub fn with_poll_grid(mut self, grid: cnm_proto::Duration) -> Self {
        self.grid_ns = grid.as_nanos();
        self
    }

    /// Adds TCP-like endpoints (senders and receivers) to this host.
    pub fn with_tcp(mut self, tcp: TcpHost) -> Self {
        self.tcp = Some(tcp);
        self
    }

    /// The agent core.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// The agent core, to change its reaction-point settings at run time.
    pub fn agent_mut(&mut self) -> &mut Agent {
        &mut self.agent
    }

    /// The sink.
    pub fn sink(&self) -> &Sink {
        &self.sink
    }

    /// The TCP endpoints, if any.
    pub fn tcp(&self) -> Option<&TcpHost> {
        self.tcp.as_ref()
    }

    /// The host's MAC address.
    pub fn mac(&self) -> EthernetAddress {
        self.mac
    }

    /// Frames generated by flow `id` so far.
    pub fn generated(&self, id: u32) -> u64 {
        self.apps
            .iter()
            .filter(|a| a.spec.id == id)
            .map(|a| a.src.sent() - a.held.len() as u64)
            .sum()
    }

    fn run_apps(&mut self, now: Instant) {
        let (agent, rng) = (&mut self.agent, &mut self.rng);
        for app in &mut self.apps {
            if now < app.spec.start {
                continue;
            }
            let refused = &mut app.refused;
            let total = &mut self.refused;
            app.held.retry(agent, now, &mut |_, _, r| {
                if r.is_err() {
                    *refused += 1;
                    *total += 1;
                }
            });
            if !app.held.is_empty() {
                continue;
            }
            loop {
                if now >= app.spec.stop {
                    app.done = true;
                    break;
                }
                let src = &mut app.src;
                let offered = app
                    .held
                    .offer_from(agent, now, 0, app.buf_len, |buf| src.next(now, rng, buf));
                match offered {
                    None | Some(Offered::Held) => break,
                    Some(Offered::Accepted) => {}
                    Some(Offered::Refused(_)) => {
                        app.refused += 1;
                        self.refused += 1;
                    }
                }
            }
        }
        if let Some(tcp) = self.tcp.as_mut() {
            tcp.send(now, &mut |f| self.agent.handle_host(now, f));
        }
    }
}

/// How the engine drives a host (the shape of [`super::SimNode`], one port).
impl HostNode {
    /// A frame fully arrived on the uplink at `now`, in the caller's buffer: the agent may
    /// take it and leave a spare in its place ([`Agent::handle_uplink_buf`]).
    ///
    /// A frame the agent queues for the host goes on to the applications at once, as
    /// [`HostNode::poll`] would hand it at this very instant: the host then has no wake-up to
    /// schedule for it (a receiver of the dumbbell is polled only when its own timers are due).
    ///
    /// Returns whether [`HostNode::poll_timeout`] may have moved. It has not when the agent
    /// queued the frame for the host and no TCP endpoint was there to take it: the agent's
    /// timers and queues towards the network are as they were (only its queue for the host
    /// changed, and the sink emptied it), and so are the generators. A control frame (CNM,
    /// PAUSE, rate feedback) or a segment for a TCP endpoint may move it.
    pub fn handle_frame(&mut self, now: Instant, frame: &mut Vec<u8>) -> bool {
        let for_host = self.agent.handle_uplink_buf(now, frame);
        self.hand_to_apps(now);
        !for_host || self.tcp.is_some()
    }

    /// Frames the agent has for the host to the TCP endpoints, or else to the sink.
    fn hand_to_apps(&mut self, now: Instant) {
        let sink = &mut self.sink;
        let tcp = &mut self.tcp;
        self.agent.poll_host(now, &mut |f| {
            let consumed = match tcp.as_mut() {
                Some(t) => t.receive(now, f),
                None => false,
            };
            if !consumed {
                sink.on_frame(now, f);
            }
            true
        });
    }

    /// Frames for the host to the applications, the applications' frames to the agent, and
    /// every uplink frame due at `now` to `tx` (false: the link is busy, the frame stays; `tx`
    /// may keep the frame's buffer by swapping in a spare, [`Agent::poll_uplink_buf`]).
    pub fn poll(&mut self, now: Instant, tx: &mut dyn FnMut(&mut Vec<u8>) -> bool) {
        self.hand_to_apps(now);
        self.run_apps(now);
        self.agent.poll_uplink_buf(now, tx);
    }

    /// The next instant the host has work; `None` when idle until a frame arrives.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = self.agent.poll_timeout();
        let mut earliest = |x: Instant| t = Some(t.map_or(x, |t: Instant| t.min(x)));
        for app in &self.apps {
            // A held frame is retried whenever the agent's queue moves (its own timeout), or
            // at once when nothing queued is left to move it.
            if app.held.stranded(&self.agent) {
                earliest(Instant::ZERO);
            }
            if app.held.is_empty() && !app.done {
                let due = app.src.next_due().max(app.spec.start);
                if due < app.spec.stop {
                    earliest(due);
                }
            }
        }
        if let Some(x) = self.tcp.as_ref().and_then(TcpHost::poll_timeout) {
            earliest(x);
        }
        // `Instant::ZERO` is "frames for the host are waiting": taken at once.
        match t {
            Some(x) if self.grid_ns > 0 && x > Instant::ZERO => {
                let n = x.as_nanos().div_ceil(self.grid_ns);
                Some(Instant::from_nanos(n.saturating_mul(self.grid_ns)))
            }
            t => t,
        }
    }

    /// Trace events of the agent and the TCP endpoints since the last call, agent first.
    pub fn drain_events(&mut self, f: &mut dyn FnMut(HostEvent)) {
        self.agent.drain_events(&mut |e| f(HostEvent::Agent(*e)));
        if let Some(tcp) = self.tcp.as_mut() {
            tcp.drain_events(&mut |e| f(HostEvent::Tcp(e)));
        }
    }

    /// What the host reports in the run summary.
    pub fn summary(&self, now: Instant) -> Value {
        let sent: Vec<Value> = self
            .apps
            .iter()
            .map(|a| {
                json!({
                    "flow": a.spec.id, "name": a.spec.name, "pattern": a.spec.pattern.to_string(),
                    "dst": a.spec.dst.to_string(), "generated": a.src.sent(),
                    "refused": a.refused,
                })
            })
            .collect();
        let received: Vec<Value> = self
            .sink
            .flows()
            .map(|((src, id), c)| {
                json!({
                    "flow": id, "src": src.to_string(), "frames": c.frames, "bytes": c.bytes,
                    "lost": c.lost, "reordered": c.reordered,
                    "delay_mean_ns": c.delay_mean_ns(), "delay_max_ns": c.delay_max_ns,
                })
            })
            .collect();
        json!({
            "mac": self.mac.to_string(),
            "agent": self.agent.stats(),
            "limiters": self.agent.flows(),
            "sent": sent,
            "received": received,
            "tcp": self.tcp.as_ref().map(|t| t.summary(now)),
        })
    }
}
