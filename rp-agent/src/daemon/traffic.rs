//! `rp-agent gen` and `rp-agent sink`: the traffic models of [`rp_agent::gen`] on a real port.
//!
//! `gen` feeds its sources into an [`Agent`] (classify, limiter, reaction point, tagging — the
//! very path host traffic takes) and the agent's output onto the uplink; CNMs and PAUSE frames
//! from the uplink reach the agent. `sink` counts generated frames per flow. Both report as
//! iperf3 does: a header line, one line per flow for every interval (the last, partial one
//! included), and each flow's totals over its own active time, first to last frame; with
//! `-J`/`--json` one JSON document at the end instead (`start`, `intervals[]`, `end`). The
//! arithmetic lives in [`rp_agent::gen::report`].
//!
//! A generator's flows and its reaction points are reported apart: a flow line names the agent
//! flow (`RP` column) whose limiter paces it, and each limiter has its own `[RP n]` line with the
//! flows it carries, its current and target rates, the CNMs it took in the interval and its
//! state. With the default `dst-priority` flow key all flows of one `gen` share one limiter, and
//! the output says so once instead of repeating one rate as if it were each flow's.
//!
//! `gen --ctl PATH` serves the daemon's control commands on the generator's agent (`show
//! flows`, `stats`, `set rp ...`), so reaction-point settings can change during a run.
//!
//! All flows of one `gen` go to the same `--dst` at the same priority, so with the default
//! `dst-priority` flow key they share one reaction point, as 802.1Q defines a flow; with
//! `--ip-src/--ip-dst` (UDP) and `--flow-key five-tuple` each flow has its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use cnm_proto::phy::clock::{Clock, Monotonic};
use cnm_proto::phy::{self, Port, PortStats};
use cnm_proto::rng::Rng;
use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Duration, Instant};
use daemon_kit::process::outln;
use rp_agent::gen::report::{self, Activity, Schedule};
use rp_agent::gen::sink::{FlowReport, Sink};
use rp_agent::gen::{Pattern, Source, UdpEncap, MAX_FRAME_LEN};
use rp_agent::held::{HeldFrames, Offered};
use rp_agent::Agent;
use serde_json::{json, Value};
use std::collections::BTreeMap;

use super::ctl::{self, Command, CtlServer};
use super::run::{answer, AgentArgs, BATCH, MAX_SLEEP, PACE_QUANTUM};
use super::DaemonError;

/// `gen` options.
#[derive(Debug, Clone, clap::Args)]
pub struct GenArgs {
    /// Agent options.
    #[command(flatten)]
    pub agent: AgentArgs,
    /// Destination MAC.
    #[arg(long)]
    pub dst: EthernetAddress,
    /// Number of flows (flow ids 0..N).
    #[arg(long, default_value_t = 1)]
    pub flows: u32,
    /// greedy | cbr:R | onoff:R,on=BYTES | poisson:R,pareto-mean=BYTES,shape=S (per flow).
    #[arg(long, default_value = "greedy")]
    pub pattern: Pattern,
    /// Send UDP/IPv4 from this address (with --ip-dst): source port 40000 + flow id, so
    /// `--flow-key five-tuple` gives each flow its own limiter.
    #[arg(long, requires = "ip_dst")]
    pub ip_src: Option<std::net::Ipv4Addr>,
    /// UDP/IPv4 destination address (with --ip-src); destination port 5001.
    #[arg(long, requires = "ip_src")]
    pub ip_dst: Option<std::net::Ipv4Addr>,
    /// Frame size in octets (MAC header and payload).
    #[arg(long, default_value_t = 1500)]
    pub size: usize,
    /// How long to send (default: until SIGINT/SIGTERM).
    #[arg(long)]
    pub duration: Option<Duration>,
    /// Reporting interval.
    #[arg(long, default_value = "1s")]
    pub interval: Duration,
    /// One JSON document at the end (`start`, `intervals`, `end`) instead of text.
    #[arg(short = 'J', long)]
    pub json: bool,
    /// Control socket path (the daemon's commands: `show flows`, `stats`, `set rp ...`).
    #[arg(long)]
    pub ctl: Option<std::path::PathBuf>,
}

/// `sink` options.
#[derive(Debug, Clone, clap::Args)]
pub struct SinkArgs {
    /// Interface to listen on.
    #[arg(long)]
    pub uplink: String,
    /// How long to listen (default: until SIGINT/SIGTERM).
    #[arg(long)]
    pub duration: Option<Duration>,
    /// Reporting interval.
    #[arg(long, default_value = "1s")]
    pub interval: Duration,
    /// Most flows tracked.
    #[arg(long, default_value_t = 1024)]
    pub max_flows: usize,
    /// One JSON document at the end (`start`, `intervals`, `end`) instead of text.
    #[arg(short = 'J', long)]
    pub json: bool,
    /// Shut down (as on SIGTERM) when the parent process dies.
    #[arg(long)]
    pub die_with_parent: bool,
    /// `--sched fifo:PRIO|other` and `--cpu N[,M]` (`daemon_kit::sched`).
    #[command(flatten)]
    pub sched: daemon_kit::sched::SchedArgs,
}

/// Where a host's report goes: standard output (`rp-agent gen`/`sink`) or a file of its own
/// (`rp-agent hosts`, one per host).
#[derive(Debug)]
pub enum Out {
    /// Standard output through [`outln`] (a closed pipe ends the process as it always did).
    Stdout,
    /// A file, written line by line; the first write error is kept and reported at the end
    /// (a host never stops the others because its report cannot be written).
    File {
        /// The file's path, for messages.
        path: std::path::PathBuf,
        /// The open file.
        file: std::io::BufWriter<std::fs::File>,
        /// The first write error.
        error: Option<std::io::Error>,
    },
}

impl Out {
    /// Creates (truncates) `path`.
    pub fn file(path: &std::path::Path) -> Result<Out, DaemonError> {
        let f = std::fs::File::create(path)
            .map_err(|e| DaemonError::Config(format!("report file {}: {e}", path.display())))?;
        Ok(Out::File {
            path: path.to_path_buf(),
            file: std::io::BufWriter::new(f),
            error: None,
        })
    }

    /// Writes one line.
    fn line(&mut self, text: &str) {
        use std::io::Write;
        match self {
            Out::Stdout => outln(text),
            Out::File { file, error, .. } => {
                if error.is_none() {
                    if let Err(e) = writeln!(file, "{text}").and_then(|()| file.flush()) {
                        *error = Some(e);
                    }
                }
            }
        }
    }

    /// The first write error, if any.
    pub fn check(&mut self) -> Result<(), DaemonError> {
        use std::io::Write;
        match self {
            Out::Stdout => Ok(()),
            Out::File { path, file, error } => {
                let flushed = file.flush();
                match error.take().map_or(flushed, Err) {
                    Ok(()) => Ok(()),
                    Err(e) => Err(DaemonError::Runtime(format!(
                        "report file {}: {e}",
                        path.display()
                    ))),
                }
            }
        }
    }
}

/// Where a host is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Sending (gen) or counting (sink).
    Running,
    /// Stopped: the agent's queues drain onto the uplink until they are empty or `until`.
    Draining {
        /// The drain's time limit.
        until: Instant,
    },
    /// Nothing more to do; the report can be written.
    Done,
}

/// How long a stopped generator drains what its agent still holds.
const DRAIN: Duration = Duration::from_secs(1);

/// One generator host: its [`Agent`], its uplink, and the generators sending through them
/// ([`Member`]s: the first one's, and any that joined it on the same port). Driven by
/// [`GenHost::step`] and [`GenHost::deadline`], one host per process (`rp-agent gen`) or many
/// in one loop (`rp-agent hosts`, [`super::hosts`]).
///
/// # Several generators on one host
/// A host of a scenario that sends several generated flows has one agent and one line for all
/// of them, as the simulator's host does: their frames queue in the one agent, its limiters
/// pace each flow, and its line clock serialises them all at the host's line rate. A second
/// generator started on the port of a running one ([`GenHost::join`]) therefore shares the
/// first one's agent, line and port instead of opening its own: two agents on one interface
/// would each send at the full line rate, together more than the link carries (the fan-in
/// victim's h1, a greedy flow and a 7 Gb/s one on a 10 Gb/s link, offered up to 17 Gb/s). A
/// member keeps what is its own: its sources (flow ids after those already on the host, so a
/// sink tells them apart), its duration, its report (its flows, the limiters they use, the
/// backpressure its sources met) and its control socket (which reaches the shared agent). The
/// agent's settings are the first generator's; the joining one's agent options are not applied.
pub struct GenHost {
    agent: Agent,
    uplink: Box<dyn Port>,
    mac: EthernetAddress,
    rng: Rng,
    buf: Vec<u8>,
    /// Every member's sources, members in the order they started.
    sources: Vec<Source>,
    /// Each source's frame the agent refused with backpressure (a source waits on its own
    /// refused frame, as an application blocked in `write(2)`; the others go on).
    held: Vec<HeldFrames>,
    /// Frames and octets each source handed to the agent, with the first and last one's time.
    sent: Vec<Activity>,
    /// The member each source belongs to.
    owner: Vec<usize>,
    members: Vec<Member>,
    rr: usize,
    start: Instant,
    /// Draining the agent after the last member stopped (until then, `Running`).
    phase: Phase,
}

/// One generator of a [`GenHost`]: its sources (`first..first + count` of the host's), its
/// report and its life.
struct Member {
    first: usize,
    count: usize,
    report: GenReport,
    out: Out,
    schedule: Schedule,
    start: Instant,
    end: Option<Instant>,
    /// `Running` while sending; `Draining` once stopped, until its flows' queues in the agent
    /// are empty (or the drain's limit); `Done` once its report is written.
    phase: Phase,
    /// The agent's backpressure refusals of this member's frames so far.
    backpressure: u64,
    req_rx: std::sync::mpsc::Receiver<ctl::Request>,
    _ctl: Option<CtlServer>,
}

impl std::fmt::Debug for GenHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenHost")
            .field("uplink", &self.uplink.name())
            .field("members", &self.members.len())
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}

impl GenHost {
    /// Opens the uplink of `args` (in the calling thread's network namespace) and starts the
    /// generator at `clock`'s now, reporting to `out`.
    pub fn open(args: &GenArgs, out: Out, clock: &dyn Clock) -> Result<GenHost, DaemonError> {
        let (uplink, mac, _mtu) = args.agent.open_uplink()?;
        GenHost::with_port(args, Box::new(uplink), mac, out, clock.now())
    }

    /// The generator of `args` on an open port with the host's MAC `mac`, started at `start`.
    pub fn with_port(
        args: &GenArgs,
        uplink: Box<dyn Port>,
        mac: EthernetAddress,
        out: Out,
        start: Instant,
    ) -> Result<GenHost, DaemonError> {
        let cfg = args.agent.agent_config(Some(mac))?;
        let seed = args
            .agent
            .seed
            .unwrap_or_else(|| phy::clock::now().as_nanos());
        let mut rng = Rng::new(seed);
        let agent = Agent::new(cfg, rng.fork(1)).map_err(|e| DaemonError::Config(e.to_string()))?;
        let mut host = GenHost {
            agent,
            uplink,
            mac,
            rng,
            buf: vec![0u8; MAX_FRAME_LEN],
            sources: Vec::new(),
            held: Vec::new(),
            sent: Vec::new(),
            owner: Vec::new(),
            members: Vec::new(),
            rr: 0,
            start,
            phase: Phase::Running,
        };
        host.add_member(args, out, start, seed)?;
        Ok(host)
    }

    /// Starts the generator of `args` at `now` on this host's port, sharing its agent and
    /// line (see the type's documentation). Refused when `args` names another port or the
    /// host is already draining.
    pub fn join(&mut self, args: &GenArgs, out: Out, now: Instant) -> Result<(), DaemonError> {
        if args.agent.uplink.as_deref() != Some(self.uplink.name()) {
            return Err(DaemonError::Config(format!(
                "--uplink {}: this host sends on {}",
                args.agent.uplink.as_deref().unwrap_or("(none)"),
                self.uplink.name()
            )));
        }
        if self.phase != Phase::Running {
            return Err(DaemonError::Runtime(format!(
                "the generators on {} have stopped",
                self.uplink.name()
            )));
        }
        let seed = args.agent.seed.unwrap_or(0);
        self.add_member(args, out, now, seed)
    }

    fn add_member(
        &mut self,
        args: &GenArgs,
        mut out: Out,
        start: Instant,
        seed: u64,
    ) -> Result<(), DaemonError> {
        let (req_tx, req_rx) = ctl::channel();
        let ctl = match &args.ctl {
            Some(p) => Some(
                CtlServer::start(p, req_tx.clone(), Command::parse)
                    .map_err(|e| DaemonError::Runtime(format!("ctl {}: {e}", p.display())))?,
            ),
            None => None,
        };
        drop(req_tx);
        let end = args.duration.map(|d| start + d);
        let first = self.sources.len();
        let count = args.flows.max(1) as usize;
        let m = self.members.len();
        for i in first..first + count {
            // Flow ids count on from the host's earlier members'.
            let id = i as u32;
            let s = Source::new(args.pattern, id, args.dst, self.mac, args.size, start);
            let s = match (args.ip_src, args.ip_dst) {
                (Some(src_ip), Some(dst_ip)) => s.with_udp(UdpEncap {
                    src_ip,
                    dst_ip,
                    src_port: 40_000u16.wrapping_add(id as u16),
                    dst_port: 5001,
                }),
                _ => s,
            };
            self.sources.push(s);
            self.held.push(HeldFrames::new());
            self.sent.push(Activity::default());
            self.owner.push(m);
        }
        let report = GenReport::new(args, &self.agent, seed, first, count, &mut out);
        self.members.push(Member {
            first,
            count,
            report,
            out,
            schedule: Schedule::new(start, args.interval, end),
            start,
            end,
            phase: Phase::Running,
            backpressure: 0,
            req_rx,
            _ctl: ctl,
        });
        Ok(())
    }

    /// When it started (its first generator).
    pub fn started(&self) -> Instant {
        self.start
    }

    /// The name of its uplink.
    pub fn uplink_name(&self) -> &str {
        self.uplink.name()
    }

    /// Whether a generator of it still sends (one more may join it, [`GenHost::join`]).
    pub fn is_sending(&self) -> bool {
        self.phase == Phase::Running
    }

    /// Whether it has nothing more to do (every generator stopped and drained):
    /// [`GenHost::finish`] is next.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Stops every generator at `now` (a signal): each reports its last interval and the
    /// agent's queues drain for up to [`DRAIN`]. Nothing while stopped.
    pub fn stop(&mut self, now: Instant) {
        for m in 0..self.members.len() {
            self.stop_member(m, now);
        }
    }

    /// Stops member `m` at `now`: its last interval is reported, the frame it was blocked on
    /// (if any) is dropped, and its flows drain.
    fn stop_member(&mut self, m: usize, now: Instant) {
        let Some(mb) = self.members.get_mut(m) else {
            return;
        };
        if mb.phase != Phase::Running {
            return;
        }
        let range = mb.first..mb.first + mb.count;
        // The last interval: from the previous report to the stop.
        if let Some((from, to)) = mb.schedule.finish(now) {
            let sent = &self.sent[range.clone()];
            mb.report
                .interval(&self.agent, sent, mb.backpressure, from, to, &mut mb.out);
        }
        mb.phase = Phase::Draining { until: now + DRAIN };
        for h in self.held.iter_mut().skip(mb.first).take(mb.count) {
            h.clear();
        }
        if self.members.iter().all(|mb| mb.phase != Phase::Running) {
            self.phase = Phase::Draining { until: now + DRAIN };
        }
    }

    /// Whether member `m`'s flows still have frames queued in the agent.
    fn member_queued(&self, m: usize) -> u64 {
        let Some(mb) = self.members.get(m) else {
            return 0;
        };
        let views = self.agent.flows();
        mb.report
            .limiters(&views, mb.count)
            .iter()
            .map(|(v, _)| v.queued_frames)
            .sum()
    }

    /// Ends the members whose time is up and writes the report of those that drained.
    fn members_lifecycle(&mut self, now: Instant) {
        for m in 0..self.members.len() {
            match self.members[m].phase {
                Phase::Running => {
                    if self.members[m].end.is_some_and(|e| now >= e) {
                        self.stop_member(m, now);
                    }
                }
                Phase::Draining { until } => {
                    if now >= until || self.member_queued(m) == 0 {
                        self.finish_member(m, now);
                    }
                }
                Phase::Done => {}
            }
        }
    }

    /// Writes member `m`'s totals (stopping it first if it still runs).
    fn finish_member(&mut self, m: usize, now: Instant) {
        self.stop_member(m, now);
        let port = self.uplink.counters();
        let Some(mb) = self.members.get_mut(m) else {
            return;
        };
        if mb.phase == Phase::Done {
            return;
        }
        mb.phase = Phase::Done;
        let elapsed = now.saturating_since(mb.start);
        let sent = &self.sent[mb.first..mb.first + mb.count];
        mb.report.end(
            &self.agent,
            &port,
            sent,
            mb.backpressure,
            (mb.start, elapsed),
            &mut mb.out,
        );
        self.discard_unsent(m);
    }

    /// Takes back the frames member `m` reported unsent, so that none leaves after its report
    /// while the host's other members go on: the agent discards its flows' queues, except a
    /// flow that a member not yet done shares (its frames are that member's too).
    fn discard_unsent(&mut self, m: usize) {
        let views = self.agent.flows();
        let flows_of = |mb: &Member| -> Vec<u32> {
            mb.report
                .limiters(&views, mb.count)
                .iter()
                .map(|(v, _)| v.flow)
                .collect()
        };
        let Some(mine) = self.members.get(m).map(flows_of) else {
            return;
        };
        let shared: Vec<u32> = self
            .members
            .iter()
            .enumerate()
            .filter(|(k, mb)| *k != m && mb.phase != Phase::Done)
            .flat_map(|(_, mb)| flows_of(mb))
            .collect();
        for f in mine.into_iter().filter(|f| !shared.contains(f)) {
            self.agent.discard_queued(f);
        }
    }

    /// One turn of the loop: sources into the agent, the uplink both ways, control requests,
    /// the reports' intervals. Each generator stops by itself at the end of its `--duration`.
    pub fn step(&mut self, clock: &dyn Clock) -> Result<(), DaemonError> {
        // Members whose time is up report here; their unsent frames leave the agent with the
        // report (`discard_unsent`), so what this turn sends below is only frames still counted
        // by a report to come.
        self.members_lifecycle(clock.now());
        let r = match self.phase {
            Phase::Running => self.run_step(clock),
            Phase::Draining { until } => {
                // Drain what the agent still holds (bounded by its queue limits).
                let now = clock.now();
                let uplink = &mut self.uplink;
                self.agent
                    .poll_uplink(now, &mut |f| uplink.send(f).unwrap_or(true));
                let _ = self.uplink.flush();
                let empty = self.agent.flows().iter().all(|f| f.queued_frames == 0);
                if now >= until || empty || self.agent.poll_timeout().is_none() {
                    for m in 0..self.members.len() {
                        self.finish_member(m, now);
                    }
                }
                Ok(())
            }
            Phase::Done => Ok(()),
        };
        if self.members.iter().all(|m| m.phase == Phase::Done) {
            self.phase = Phase::Done;
        }
        r
    }

    fn run_step(&mut self, clock: &dyn Clock) -> Result<(), DaemonError> {
        let rt = |e: String| DaemonError::Runtime(e);
        let now = clock.now();
        // CNMs and PAUSE frames first, so that they act on the frames taken below (as in
        // `HostLoop::step`).
        let agent = &mut self.agent;
        self.uplink
            .recv_batch(BATCH, &mut |f| agent.handle_uplink(now, f))
            .map_err(|e| rt(format!("uplink: {e}")))?;
        // Sources, round-robin, at most one batch each per iteration, none of a stopped
        // generator. A source whose frame the agent refused offers it again first, and sends
        // nothing new while it stays refused (the others go on).
        for _ in 0..self.sources.len() {
            let s = self.rr % self.sources.len();
            self.rr = self.rr.wrapping_add(1);
            let Some(&m) = self.owner.get(s) else {
                continue;
            };
            if !self
                .members
                .get(m)
                .is_some_and(|mb| mb.phase == Phase::Running)
            {
                continue;
            }
            let (agent, sent, held) = (&mut self.agent, &mut self.sent, &mut self.held[s]);
            if !held.is_empty() {
                held.retry(agent, now, &mut |_, n, r| {
                    if r.is_ok() {
                        sent[s].on_frame(now, n as u64);
                    }
                });
                if !held.is_empty() {
                    self.refused(s);
                    continue;
                }
            }
            for _ in 0..BATCH {
                let Some(n) = self.sources[s].next(now, &mut self.rng, &mut self.buf) else {
                    break;
                };
                match self.held[s].offer(&mut self.agent, now, s as u64, &self.buf[..n]) {
                    Offered::Accepted => self.sent[s].on_frame(now, n as u64),
                    Offered::Held => {
                        self.refused(s);
                        break;
                    }
                    Offered::Refused(_) => {}
                }
            }
        }
        self.agent.poll_host(now, &mut |_| true);
        let now = clock.now();
        let uplink = &mut self.uplink;
        self.agent
            .poll_uplink(now, &mut |f| uplink.send(f).unwrap_or(true));
        let _ = self.uplink.flush();
        self.agent.drain_events(&mut |_| {});
        for mb in &mut self.members {
            let agent = &mut self.agent;
            ctl::answer_pending(&mb.req_rx, |cmd| answer(agent, clock.now(), cmd, 0));
            if mb.phase != Phase::Running {
                continue;
            }
            if let Some((from, to)) = mb.schedule.tick(now) {
                let sent = &self.sent[mb.first..mb.first + mb.count];
                mb.report
                    .interval(&self.agent, sent, mb.backpressure, from, to, &mut mb.out);
            }
        }
        Ok(())
    }

    /// Counts a backpressure refusal against source `s`'s generator.
    fn refused(&mut self, s: usize) {
        if let Some(mb) = self.owner.get(s).and_then(|&m| self.members.get_mut(m)) {
            mb.backpressure += 1;
        }
    }

    /// When the next [`GenHost::step`] is due, seen at `now` (at most [`MAX_SLEEP`] ahead).
    pub fn deadline(&self, now: Instant) -> Instant {
        let mut deadline = now + MAX_SLEEP;
        match self.phase {
            Phase::Done => return deadline,
            Phase::Draining { until } => {
                return match self.agent.poll_timeout() {
                    Some(t) => deadline.min(t.max(now)).min(until),
                    None => now,
                };
            }
            Phase::Running => {}
        }
        // Pacers and sources are served in quanta of at least PACE_QUANTUM (see there).
        if let Some(t) = self.agent.poll_timeout() {
            deadline = deadline.min(t.max(now + PACE_QUANTUM));
        }
        for mb in &self.members {
            match mb.phase {
                Phase::Running => {
                    deadline = deadline.min(mb.schedule.due());
                    if let Some(e) = mb.end {
                        deadline = deadline.min(e);
                    }
                    let range = mb.first..mb.first + mb.count;
                    for (s, h) in self.sources[range.clone()].iter().zip(&self.held[range]) {
                        // One waiting on its refused frame goes on when the agent's queues
                        // move (the agent's own deadline), or within a quantum when nothing
                        // queued is left to move them (`HeldFrames::stranded`).
                        if !h.is_empty() {
                            if h.stranded(&self.agent) {
                                deadline = deadline.min(now + PACE_QUANTUM);
                            }
                            continue;
                        }
                        // A source due now (greedy, or behind) is served at once.
                        let due = s.next_due();
                        deadline = deadline.min(if due <= now {
                            due
                        } else {
                            due.max(now + PACE_QUANTUM)
                        });
                    }
                }
                // Its flows' queues are looked at again within a pacing quantum.
                Phase::Draining { until } => {
                    deadline = deadline.min(until.max(now).min(now + PACE_QUANTUM));
                }
                Phase::Done => {}
            }
        }
        deadline
    }

    /// The descriptor to wait on: the uplink while running (a draining generator only sends).
    pub fn fd(&self) -> Option<std::os::fd::RawFd> {
        match self.phase {
            Phase::Running => self.uplink.raw_fd(),
            _ => None,
        }
    }

    /// Writes every generator's totals (stopping first those still running) and returns the
    /// first write error of their reports.
    pub fn finish(&mut self, now: Instant) -> Result<(), DaemonError> {
        for m in 0..self.members.len() {
            self.finish_member(m, now);
        }
        let mut first = Ok(());
        for mb in &mut self.members {
            let r = mb.out.check();
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

/// Runs the generator.
pub fn gen(args: GenArgs, term: Arc<AtomicBool>) -> Result<(), DaemonError> {
    let clock = Monotonic;
    // The thread's policy and CPUs (a host in `rp-agent hosts` follows the process's own).
    args.agent.sched.apply()?;
    let mut host = GenHost::open(&args, Out::Stdout, &clock)?;
    let _ = phy::poll::set_timer_slack(Duration::from_nanos(1000));
    while !host.is_done() {
        if term.load(Ordering::Relaxed) {
            host.stop(clock.now());
        }
        host.step(&clock)?;
        if host.is_done() {
            break;
        }
        let deadline = host.deadline(clock.now());
        clock
            .wait(&[host.fd().unwrap_or(-1)], deadline)
            .map_err(|e| DaemonError::Runtime(format!("ppoll: {e}")))?;
    }
    host.finish(clock.now())
}

/// What `gen` reports: the text lines as they happen, or the JSON document at the end.
struct GenReport {
    json: bool,
    dst: String,
    start: Value,
    intervals: Vec<Value>,
    /// Each generator flow's frames and octets at the previous report.
    last: Vec<(u64, u64)>,
    /// Each agent flow's CNM count at the previous report.
    cnm_prev: BTreeMap<u32, u64>,
    /// The generator's backpressure refusals at the previous report.
    bp_prev: u64,
    /// The host-wide index (and flow id) of the generator's first flow.
    first: usize,
    /// The sharing of limiters last described (text), so a change is told once.
    told: Vec<(u32, Vec<u32>)>,
}

impl GenReport {
    fn new(
        args: &GenArgs,
        agent: &Agent,
        seed: u64,
        first: usize,
        flows: usize,
        out: &mut Out,
    ) -> GenReport {
        let flow_key = match agent.config().flow_key {
            rp_agent::config::FlowKeyMode::DstPriority => "dst-priority",
            rp_agent::config::FlowKeyMode::FiveTuple => "five-tuple",
        };
        let udp = args.ip_src.is_some();
        let start = json!({
            "tool": "rp-agent gen",
            "dst": args.dst.to_string(),
            "flows": flows,
            "pattern": args.pattern.to_string(),
            "frame_octets": args.size,
            "udp": udp,
            "flow_key": flow_key,
            "interval_s": args.interval.as_secs_f64(),
            "duration_s": args.duration.map(|d| d.as_secs_f64()),
            "seed": seed,
            "first_flow_id": first,
        });
        if !args.json {
            let shared = if flow_key == "five-tuple" && udp {
                "each flow has its own reaction point (five-tuple flow key)"
            } else if flows > 1 {
                "the flows share one reaction point (one flow to the agent: same destination and priority)"
            } else {
                "one reaction point"
            };
            out.line(&format!(
                "rp-agent gen: {flows} flow(s) to {}, {}, {}-octet frames; {shared}",
                args.dst, args.pattern, args.size
            ));
            out.line(report::GEN_HEADER);
        }
        GenReport {
            json: args.json,
            dst: args.dst.to_string(),
            start,
            intervals: Vec::new(),
            last: vec![(0, 0); flows],
            cnm_prev: BTreeMap::new(),
            bp_prev: 0,
            first,
            told: Vec::new(),
        }
    }

    /// The agent flow of each generator flow: its own with UDP and a five-tuple key (source
    /// port 40000 + its flow id), otherwise the one (destination, priority) flow.
    fn agent_flows<'a>(
        &self,
        views: &'a [rp_agent::stats::FlowView],
        n: usize,
    ) -> Vec<Option<&'a rp_agent::stats::FlowView>> {
        (0..n)
            .map(|i| {
                let port = format!(":{} >", 40_000 + self.first + i);
                views
                    .iter()
                    .find(|v| {
                        v.dst == self.dst
                            && v.five_tuple.as_deref().is_some_and(|t| t.contains(&port))
                    })
                    .or_else(|| {
                        views
                            .iter()
                            .find(|v| v.dst == self.dst && v.five_tuple.is_none())
                    })
                    .or_else(|| views.iter().find(|v| v.dst == self.dst))
            })
            .collect()
    }

    /// The limiters (agent flows) that carry this generator's `n` flows, each once, in order of
    /// its first generator flow, with the generator flows it carries
    /// ([`report::group_by_limiter`]).
    fn limiters<'a>(
        &self,
        views: &'a [rp_agent::stats::FlowView],
        n: usize,
    ) -> Vec<(&'a rp_agent::stats::FlowView, Vec<u32>)> {
        let ids: Vec<Option<u32>> = self
            .agent_flows(views, n)
            .iter()
            .map(|v| v.map(|v| v.flow))
            .collect();
        report::group_by_limiter(&ids)
            .into_iter()
            .filter_map(|(rp, flows)| Some((views.iter().find(|v| v.flow == rp)?, flows)))
            .collect()
    }

    /// Reports the interval `from`..`to` (seconds since the start).
    fn interval(
        &mut self,
        agent: &Agent,
        sent: &[Activity],
        backpressure: u64,
        from: Duration,
        to: Duration,
        out: &mut Out,
    ) {
        let secs = to.saturating_sub(from).as_secs_f64();
        let views = agent.flows();
        let of = self.agent_flows(&views, sent.len());
        let ids: Vec<Option<u32>> = of.iter().map(|v| v.map(|v| v.flow)).collect();
        let mut streams = Vec::new();
        let (mut frames_sum, mut bytes_sum) = (0u64, 0u64);
        for (i, a) in sent.iter().enumerate() {
            let (f0, b0) = self.last.get(i).copied().unwrap_or((0, 0));
            let (frames, bytes) = (a.frames - f0, a.bytes - b0);
            frames_sum += frames;
            bytes_sum += bytes;
            let bps = report::bps(bytes, secs);
            if !self.json {
                out.line(&format!(
                    "[{i:3}] {}  {:<12}  {:<15}  {frames:7}  {}",
                    report::fmt_interval(from, to),
                    report::fmt_octets(bytes),
                    report::fmt_bps(bps),
                    ids[i].map_or("-".into(), |x| x.to_string()),
                ));
            }
            streams.push(json!({
                "id": self.first + i, "frames": frames, "bytes": bytes, "bps": bps, "rp": ids[i],
            }));
        }
        self.last = sent.iter().map(|a| (a.frames, a.bytes)).collect();
        let sum_bps = report::bps(bytes_sum, secs);
        if !self.json && sent.len() > 1 {
            out.line(&format!(
                "[SUM] {}  {:<12}  {:<15}  {frames_sum:7}",
                report::fmt_interval(from, to),
                report::fmt_octets(bytes_sum),
                report::fmt_bps(sum_bps),
            ));
        }
        let groups = report::group_by_limiter(&ids);
        if !self.json && groups != self.told {
            for (rp, flows) in &groups {
                if flows.len() > 1 {
                    out.line(&format!(
                        "[RP{rp:>2}] one limiter for flows {}: its rate is theirs together",
                        report::fmt_flows(flows)
                    ));
                }
            }
            self.told.clone_from(&groups);
        }
        let mut rps = Vec::new();
        // CNMs to this generator's limiters (another generator of the host has its own).
        let mut cnm = 0;
        for (rp, flows) in &groups {
            let Some(v) = views.iter().find(|v| v.flow == *rp) else {
                continue;
            };
            let prev = self.cnm_prev.insert(*rp, v.cnm_rx).unwrap_or(0);
            let cnms = report::counter_delta(prev, v.cnm_rx);
            cnm += cnms;
            if !self.json {
                out.line(&format!(
                    "[RP{rp:>2}] {}  flows {:<6} CR {:<15} TR {:<15} CNMs {cnms:5}  {}",
                    report::fmt_interval(from, to),
                    report::fmt_flows(flows),
                    report::fmt_bps(v.cr_bps as f64),
                    report::fmt_bps(v.tr_bps as f64),
                    state_name(v.state),
                ));
            }
            rps.push(json!({
                "rp": rp, "flows": flows, "cr_bps": v.cr_bps, "tr_bps": v.tr_bps,
                "state": v.state, "cnm_rx": cnms, "cnm_rx_total": v.cnm_rx,
            }));
        }
        let bp = report::counter_delta(self.bp_prev, backpressure);
        self.bp_prev = backpressure;
        if self.json {
            self.intervals.push(json!({
                "start": from.as_secs_f64(), "end": to.as_secs_f64(), "seconds": secs,
                "streams": streams,
                "sum": {"frames": frames_sum, "bytes": bytes_sum, "bps": sum_bps},
                "rps": rps, "cnm_rx": cnm, "backpressure": bp,
            }));
        }
    }

    /// The totals: each flow over its active time (first to last frame handed to the agent),
    /// each limiter's final state and CNM count; `(origin, elapsed)` is the generator's start
    /// and how long it ran.
    fn end(
        &mut self,
        agent: &Agent,
        port: &PortStats,
        sent: &[Activity],
        backpressure: u64,
        (origin, elapsed): (Instant, Duration),
        out: &mut Out,
    ) {
        let views = agent.flows();
        let of = self.agent_flows(&views, sent.len());
        let ids: Vec<Option<u32>> = of.iter().map(|v| v.map(|v| v.flow)).collect();
        let stats = agent.stats();
        let mut streams = Vec::new();
        if !self.json {
            out.line(report::SEPARATOR);
            out.line(report::GEN_HEADER);
        }
        for (i, a) in sent.iter().enumerate() {
            let first = a
                .first
                .map_or(Duration::ZERO, |(t, _)| t.saturating_since(origin));
            let last = a.last.saturating_since(origin).max(first);
            let bps = a.active_bps();
            if !self.json {
                out.line(&format!(
                    "[{i:3}] {}  {:<12}  {:<15}  {:7}  {}  sender (first to last frame)",
                    report::fmt_interval(first, last),
                    report::fmt_octets(a.bytes),
                    bps.map_or("-".into(), report::fmt_bps),
                    a.frames,
                    ids[i].map_or("-".into(), |x| x.to_string()),
                ));
            }
            streams.push(json!({
                "id": self.first + i, "frames": a.frames, "bytes": a.bytes,
                "start": first.as_secs_f64(), "end": last.as_secs_f64(),
                "seconds": last.saturating_sub(first).as_secs_f64(), "bps": bps, "rp": ids[i],
            }));
        }
        let mut rps = Vec::new();
        // This generator's limiters: their CNMs, and the accepted frames they still held when
        // the drain ended (counted in `frames`, the generator handed them over, but never sent).
        let (mut cnm_rx, mut unsent) = (0, 0);
        for (v, flows) in self.limiters(&views, sent.len()) {
            let rp = v.flow;
            cnm_rx += v.cnm_rx;
            unsent += v.queued_frames;
            if !self.json {
                out.line(&format!(
                    "[RP{rp:>2}] flows {}: CR {} TR {} at the end, {} CNMs in all, {}",
                    report::fmt_flows(&flows),
                    report::fmt_bps(v.cr_bps as f64),
                    report::fmt_bps(v.tr_bps as f64),
                    v.cnm_rx,
                    state_name(v.state),
                ));
            }
            rps.push(json!({
                "rp": rp, "flows": flows, "cr_bps": v.cr_bps, "tr_bps": v.tr_bps,
                "state": v.state, "cnm_rx": v.cnm_rx,
            }));
        }
        let frames: u64 = sent.iter().map(|a| a.frames).sum();
        let bytes: u64 = sent.iter().map(|a| a.bytes).sum();
        if self.json {
            let doc = json!({
                "start": std::mem::take(&mut self.start),
                "intervals": std::mem::take(&mut self.intervals),
                "end": {
                    "elapsed_s": elapsed.as_secs_f64(),
                    "streams": streams,
                    "sum": {"frames": frames, "bytes": bytes},
                    "rps": rps,
                    "cnm_rx": cnm_rx,
                    "backpressure": backpressure,
                    "unsent": unsent,
                    // How late the agent's frames left after their instants (its loop's
                    // timing; `rp_agent::stats::TxLateness`): the host's, every generator
                    // on its line alike.
                    "tx_late": {
                        "frames": stats.tx_late_frames,
                        "p50_ns": stats.tx_late_p50_ns,
                        "p99_ns": stats.tx_late_p99_ns,
                        "max_ns": stats.tx_late_max_ns,
                    },
                    "uplink": {
                        "tx_frames": port.tx_frames,
                        "tx_errors": port.tx_errors,
                        "tx_oversize": port.tx_oversize,
                    },
                },
            });
            out.line(&serde_json::to_string_pretty(&doc).unwrap_or_default());
        } else {
            out.line(&format!(
                "agent: {cnm_rx} CNMs, {backpressure} backpressure refusals in {:.2} s",
                elapsed.as_secs_f64()
            ));
        }
    }
}

/// A reaction point's state as the text report prints it.
fn state_name(s: rp_agent::rp::RpState) -> &'static str {
    use rp_agent::rp::RpState;
    match s {
        RpState::Fr => "fast-recovery",
        RpState::Ai => "active-increase",
        RpState::Hai => "hyper-active-increase",
        RpState::Er => "explicit-rate",
        RpState::Released => "released",
    }
}

/// How many frames [`SinkHost::finish`] reads at most from a port whose depth it was not
/// told (one not opened by [`SinkHost::open`]): 64 batches.
const UNKNOWN_DEPTH: usize = 64 * BATCH;

/// One sink: its port, its [`Sink`] and its report. Driven as [`GenHost`] is.
pub struct SinkHost {
    port: Box<dyn Port>,
    name: String,
    sink: Sink,
    report: SinkReport,
    out: Out,
    schedule: Schedule,
    start: Instant,
    end: Option<Instant>,
    interval: Duration,
    duration: Option<Duration>,
    max_flows: usize,
    stopped: bool,
    /// The most frames the port can hold unread (its receive ring's slots): what
    /// [`SinkHost::finish`] reads at most before it reports.
    ring_slots: usize,
}

impl std::fmt::Debug for SinkHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkHost")
            .field("port", &self.name)
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

impl SinkHost {
    /// Opens `args.uplink` (in the calling thread's network namespace) and starts counting at
    /// `clock`'s now, reporting to `out`.
    pub fn open(args: &SinkArgs, out: Out, clock: &dyn Clock) -> Result<SinkHost, DaemonError> {
        let (port, slots) = SinkHost::open_port(args)?;
        Ok(SinkHost::on_port(args, port, slots, out, clock.now()))
    }

    /// The sink of `args` on the port [`SinkHost::open_port`] opened (with its ring's
    /// `slots`), started at `start`.
    pub fn on_port(
        args: &SinkArgs,
        port: phy::AfPacketPort,
        slots: usize,
        out: Out,
        start: Instant,
    ) -> SinkHost {
        let mut host = SinkHost::with_port(args, Box::new(port), out, start);
        host.ring_slots = slots;
        host
    }

    /// Opens the uplink of `args` (in the calling thread's network namespace) with a deep
    /// receive ring; returns it with the ring's slots.
    pub fn open_port(args: &SinkArgs) -> Result<(phy::AfPacketPort, usize), DaemonError> {
        let name = &args.uplink;
        if !phy::iface::exists(name) {
            return Err(DaemonError::Config(format!(
                "uplink {name}: no such interface"
            )));
        }
        super::prepare_offloads(name)?;
        let mtu = phy::iface::mtu(name).unwrap_or(1500);
        let mut ring = phy::AfPacketConfig::for_mtu(mtu + 8);
        // A deep receive ring (8× the default) rides out a few milliseconds of descheduling at
        // 1 Gb/s without losing frames.
        ring.rx_blocks *= 8;
        let port = phy::AfPacketPort::open(name, &ring)
            .map_err(|e| DaemonError::Runtime(format!("uplink {name}: {e}")))?;
        Ok((port, ring.rx_slots() as usize))
    }

    /// The sink of `args` on an open port, started at `start`.
    pub fn with_port(
        args: &SinkArgs,
        port: Box<dyn Port>,
        mut out: Out,
        start: Instant,
    ) -> SinkHost {
        let end = args.duration.map(|d| start + d);
        if !args.json {
            out.line(&format!("rp-agent sink: listening on {}", args.uplink));
            out.line(report::SINK_HEADER);
        }
        SinkHost {
            port,
            name: args.uplink.clone(),
            sink: Sink::new(args.max_flows),
            report: SinkReport {
                json: args.json,
                intervals: Vec::new(),
                announced: 0,
            },
            out,
            schedule: Schedule::new(start, args.interval, end),
            start,
            end,
            interval: args.interval,
            duration: args.duration,
            max_flows: args.max_flows,
            stopped: false,
            ring_slots: UNKNOWN_DEPTH,
        }
    }

    /// When it started.
    pub fn started(&self) -> Instant {
        self.start
    }

    /// Whether it has stopped (end of `--duration`, or [`SinkHost::stop`]).
    pub fn is_done(&self) -> bool {
        self.stopped
    }

    /// Stops counting.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// One turn: the frames waiting on the port, the report's intervals. Stops by itself at
    /// the end of `--duration`.
    pub fn step(&mut self, clock: &dyn Clock) -> Result<(), DaemonError> {
        if self.stopped {
            return Ok(());
        }
        if self.end.is_some_and(|e| clock.now() >= e) {
            self.stopped = true;
            return Ok(());
        }
        let now = clock.now();
        let sink = &mut self.sink;
        self.port
            .recv_batch(BATCH, &mut |f| {
                sink.on_frame(now, f);
            })
            .map_err(|e| DaemonError::Runtime(format!("uplink {}: {e}", self.name)))?;
        let now = clock.now();
        if let Some((from, to)) = self.schedule.tick(now) {
            self.report
                .interval(&self.sink.interval(from, to), from, to, &mut self.out);
        }
        Ok(())
    }

    /// When the next [`SinkHost::step`] is due, seen at `now`.
    pub fn deadline(&self, now: Instant) -> Instant {
        let mut deadline = self.schedule.due().min(now + MAX_SLEEP);
        if let Some(e) = self.end {
            deadline = deadline.min(e);
        }
        deadline
    }

    /// The descriptor to wait on while counting.
    pub fn fd(&self) -> Option<std::os::fd::RawFd> {
        if self.stopped {
            None
        } else {
            self.port.raw_fd()
        }
    }

    /// Counts the frames still unread on the port, then reports the last interval and the
    /// totals, and returns the first receive or write error.
    ///
    /// A frame that reached the port before the stop belongs to the run even if the loop was
    /// behind and it still waits in the receive ring: a sink descheduled at the stop left
    /// more than 100 of them unread, and a report that missed them undercounted every flow
    /// (their tail looks neither received nor lost, as no later frame shows the gap). At most
    /// one ring's worth is read, so a sender that never stops cannot hold the report back.
    /// The kernel's own drops (ring full, `PACKET_STATISTICS`) and truncated frames are
    /// reported beside the flows: frames the sink lost itself, not the network.
    pub fn finish(&mut self, now: Instant) -> Result<(), DaemonError> {
        let drained = self.drain(now);
        let counters = self.port.counters();
        let out = &mut self.out;
        if let Some((from, to)) = self.schedule.finish(now) {
            self.report
                .interval(&self.sink.interval(from, to), from, to, out);
        }
        let summary = self.sink.summary(self.start);
        let frames: u64 = summary.iter().map(|r| r.frames).sum();
        let bytes: u64 = summary.iter().map(|r| r.bytes).sum();
        let lost: u64 = summary.iter().map(|r| r.lost).sum();
        let elapsed = now.saturating_since(self.start).as_secs_f64();
        if self.report.json {
            let doc = json!({
                "start": {
                    "tool": "rp-agent sink",
                    "uplink": self.name,
                    "interval_s": self.interval.as_secs_f64(),
                    "duration_s": self.duration.map(|d| d.as_secs_f64()),
                    "max_flows": self.max_flows,
                },
                "intervals": std::mem::take(&mut self.report.intervals),
                "end": {
                    "elapsed_s": elapsed,
                    "streams": summary,
                    "sum": {"frames": frames, "bytes": bytes, "lost": lost},
                    "other_frames": self.sink.other,
                    "untracked": self.sink.untracked,
                    "kernel_dropped": counters.rx_dropped,
                    "truncated": counters.rx_truncated,
                },
            });
            out.line(&serde_json::to_string_pretty(&doc).unwrap_or_default());
        } else {
            out.line(report::SEPARATOR);
            out.line(report::SINK_HEADER);
            for r in &summary {
                out.line(&format!("{}  receiver (first to last frame)", sink_line(r)));
            }
            out.line(&format!(
                "sink: {frames} frames, {lost} lost; {} other frames, {} of untracked flows in {elapsed:.2} s",
                self.sink.other,
                self.sink.untracked,
            ));
            if counters.rx_dropped + counters.rx_truncated > 0 {
                out.line(&format!(
                    "sink: {} frames dropped by the kernel (receive ring full), {} truncated",
                    counters.rx_dropped, counters.rx_truncated
                ));
            }
        }
        drained.and(out.check())
    }

    /// Reads what waits on the port, up to one ring's worth, into the counts at `now`.
    fn drain(&mut self, now: Instant) -> Result<(), DaemonError> {
        let sink = &mut self.sink;
        let mut left = self.ring_slots;
        while left > 0 {
            let n = self
                .port
                .recv_batch(BATCH.min(left), &mut |f| {
                    sink.on_frame(now, f);
                })
                .map_err(|e| DaemonError::Runtime(format!("uplink {}: {e}", self.name)))?;
            if n == 0 {
                break;
            }
            left = left.saturating_sub(n);
        }
        Ok(())
    }
}

/// Runs the sink.
pub fn sink(args: SinkArgs, term: Arc<AtomicBool>) -> Result<(), DaemonError> {
    let clock = Monotonic;
    args.sched.apply()?;
    let mut host = SinkHost::open(&args, Out::Stdout, &clock)?;
    while !term.load(Ordering::Relaxed) {
        host.step(&clock)?;
        if host.is_done() {
            break;
        }
        let deadline = host.deadline(clock.now());
        clock
            .wait(&[host.fd().unwrap_or(-1)], deadline)
            .map_err(|e| DaemonError::Runtime(format!("ppoll: {e}")))?;
    }
    host.finish(clock.now())
}

/// What `sink` reports: text lines as they happen, or the intervals of the JSON document.
struct SinkReport {
    json: bool,
    intervals: Vec<Value>,
    /// Flows (by id) already introduced with their source and flow id (text).
    announced: u32,
}

impl SinkReport {
    fn interval(&mut self, flows: &[FlowReport], from: Duration, to: Duration, out: &mut Out) {
        let secs = to.saturating_sub(from).as_secs_f64();
        let frames: u64 = flows.iter().map(|r| r.frames).sum();
        let bytes: u64 = flows.iter().map(|r| r.bytes).sum();
        let bps = report::bps(bytes, secs);
        if self.json {
            self.intervals.push(json!({
                "start": from.as_secs_f64(), "end": to.as_secs_f64(), "seconds": secs,
                "streams": flows,
                "sum": {"frames": frames, "bytes": bytes, "bps": bps},
            }));
            return;
        }
        for r in flows {
            if r.id >= self.announced {
                out.line(&format!("[{:3}] flow {} from {}", r.id, r.flow, r.src));
                self.announced = r.id + 1;
            }
        }
        for r in flows {
            out.line(&sink_line(r));
        }
        if flows.len() > 1 {
            out.line(&format!(
                "[SUM] {}  {:<12}  {:<15}  {frames:7}",
                report::fmt_interval(from, to),
                report::fmt_octets(bytes),
                report::fmt_bps(bps),
            ));
        }
    }
}

/// One flow's text line under [`report::SINK_HEADER`].
fn sink_line(r: &FlowReport) -> String {
    let d = |s: f64| Duration::from_secs_f64(s);
    format!(
        "[{:3}] {}  {:<12}  {:<15}  {:7}  {:4}  {:5}  {:.1}/{:.1}/{:.1}",
        r.id,
        report::fmt_interval(d(r.start), d(r.end)),
        report::fmt_octets(r.bytes),
        if r.frames > 1 || r.secs > 0.0 {
            report::fmt_bps(r.bps)
        } else {
            "-".into()
        },
        r.frames,
        r.lost,
        r.reordered,
        r.delay_min_us,
        r.delay_mean_us,
        r.delay_max_us,
    )
}
