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

use cnm_proto::phy::{self, Port};
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

/// Runs the generator.
pub fn gen(args: GenArgs, term: Arc<AtomicBool>) -> Result<(), DaemonError> {
    let (mut uplink, mac, _mtu) = args.agent.open_uplink()?;
    let cfg = args.agent.agent_config(Some(mac))?;
    let seed = args
        .agent
        .seed
        .unwrap_or_else(|| phy::clock::now().as_nanos());
    let mut rng = Rng::new(seed);
    let mut agent = Agent::new(cfg, rng.fork(1)).map_err(|e| DaemonError::Config(e.to_string()))?;
    let (req_tx, req_rx) = ctl::channel();
    let _ctl = match &args.ctl {
        Some(p) => Some(
            CtlServer::start(p, req_tx.clone(), Command::parse)
                .map_err(|e| DaemonError::Runtime(format!("ctl {}: {e}", p.display())))?,
        ),
        None => None,
    };
    drop(req_tx);
    args.agent.sched.apply()?;
    let start = phy::clock::now();
    let end = args.duration.map(|d| start + d);
    let mut sources: Vec<Source> = (0..args.flows.max(1))
        .map(|i| {
            let s = Source::new(args.pattern, i, args.dst, mac, args.size, start);
            match (args.ip_src, args.ip_dst) {
                (Some(src_ip), Some(dst_ip)) => s.with_udp(UdpEncap {
                    src_ip,
                    dst_ip,
                    src_port: 40_000u16.wrapping_add(i as u16),
                    dst_port: 5001,
                }),
                _ => s,
            }
        })
        .collect();
    let mut buf = vec![0u8; MAX_FRAME_LEN];
    // Frames the agent refused with backpressure, tagged with their source.
    let mut held = HeldFrames::new();
    // Frames and octets each source handed to the agent, with the first and last one's time.
    let mut sent = vec![Activity::default(); sources.len()];
    let mut out = GenReport::new(&args, &agent, seed, sources.len());
    let mut schedule = Schedule::new(start, args.interval, end);
    let mut rr = 0usize;
    let _ = phy::poll::set_timer_slack(Duration::from_nanos(1000));
    let rt = |e: String| DaemonError::Runtime(e);
    while !term.load(Ordering::Relaxed) && end.is_none_or_past(phy::clock::now()) {
        let now = phy::clock::now();
        held.retry(&mut agent, now, &mut |s, n, r| {
            if r.is_ok() {
                if let Some(a) = sent.get_mut(s as usize) {
                    a.on_frame(now, n as u64);
                }
            }
        });
        // Sources, round-robin, at most one batch each per iteration; none while a frame is
        // held (a source stops at its first refused frame).
        for _ in 0..sources.len() {
            if !held.is_empty() {
                break;
            }
            let s = rr % sources.len();
            rr = rr.wrapping_add(1);
            for _ in 0..BATCH {
                let Some(n) = sources[s].next(now, &mut rng, &mut buf) else {
                    break;
                };
                match held.offer(&mut agent, now, s as u64, &buf[..n]) {
                    Offered::Accepted => sent[s].on_frame(now, n as u64),
                    Offered::Held => break,
                    Offered::Refused(_) => {}
                }
            }
        }
        uplink
            .recv_batch(BATCH, &mut |f| agent.handle_uplink(now, f))
            .map_err(|e| rt(format!("uplink: {e}")))?;
        agent.poll_host(now, &mut |_| true);
        let now = phy::clock::now();
        agent.poll_uplink(now, &mut |f| uplink.send(f).unwrap_or(true));
        let _ = uplink.flush();
        agent.drain_events(&mut |_| {});
        ctl::answer_pending(&req_rx, |cmd| answer(&mut agent, phy::clock::now(), cmd, 0));
        if let Some((from, to)) = schedule.tick(now) {
            out.interval(&agent, &sent, from, to);
        }
        let now = phy::clock::now();
        let mut deadline = (now + MAX_SLEEP).min(schedule.due());
        // Pacers and sources are served in quanta of at least PACE_QUANTUM (see there).
        if let Some(t) = agent.poll_timeout() {
            deadline = deadline.min(t.max(now + PACE_QUANTUM));
        }
        if held.is_empty() {
            for s in &sources {
                // A source due now (greedy, or behind) is served at once.
                let due = s.next_due();
                deadline = deadline.min(if due <= now {
                    due
                } else {
                    due.max(now + PACE_QUANTUM)
                });
            }
        }
        if let Some(e) = end {
            deadline = deadline.min(e);
        }
        let timeout = deadline.saturating_since(now);
        if timeout > Duration::ZERO {
            phy::poll::wait(&[uplink.raw_fd().unwrap_or(-1)], Some(timeout))
                .map_err(|e| rt(format!("ppoll: {e}")))?;
        }
    }
    // The last interval: from the previous report to the stop (the end of `--duration`, or
    // the signal).
    if let Some((from, to)) = schedule.finish(phy::clock::now()) {
        out.interval(&agent, &sent, from, to);
    }
    // Drain what the agent still holds (bounded by its queue limits) for up to one second.
    let stop = phy::clock::now() + Duration::from_secs(1);
    loop {
        let now = phy::clock::now();
        agent.poll_uplink(now, &mut |f| uplink.send(f).unwrap_or(true));
        let _ = uplink.flush();
        match agent.poll_timeout() {
            Some(t) if now < stop && !agent.flows().iter().all(|f| f.queued_frames == 0) => {
                let d = t.saturating_since(now).min(MAX_SLEEP);
                std::thread::sleep(d.to_std());
            }
            _ => break,
        }
    }
    out.end(
        &agent,
        &sent,
        start,
        phy::clock::now().saturating_since(start),
    );
    Ok(())
}

trait DeadlineExt {
    fn is_none_or_past(&self, now: Instant) -> bool;
}

impl DeadlineExt for Option<Instant> {
    /// True while the deadline (if any) has not come.
    fn is_none_or_past(&self, now: Instant) -> bool {
        match self {
            None => true,
            Some(e) => now < *e,
        }
    }
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
    /// The agent's CNM and backpressure counts at the previous report.
    agent_prev: (u64, u64),
    /// The sharing of limiters last described (text), so a change is told once.
    told: Vec<(u32, Vec<u32>)>,
}

impl GenReport {
    fn new(args: &GenArgs, agent: &Agent, seed: u64, flows: usize) -> GenReport {
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
        });
        if !args.json {
            let shared = if flow_key == "five-tuple" && udp {
                "each flow has its own reaction point (five-tuple flow key)"
            } else if flows > 1 {
                "the flows share one reaction point (one flow to the agent: same destination and priority)"
            } else {
                "one reaction point"
            };
            outln(&format!(
                "rp-agent gen: {flows} flow(s) to {}, {}, {}-octet frames; {shared}",
                args.dst, args.pattern, args.size
            ));
            outln(report::GEN_HEADER);
        }
        GenReport {
            json: args.json,
            dst: args.dst.to_string(),
            start,
            intervals: Vec::new(),
            last: vec![(0, 0); flows],
            cnm_prev: BTreeMap::new(),
            agent_prev: (0, 0),
            told: Vec::new(),
        }
    }

    /// The agent flow of each generator flow: its own with UDP and a five-tuple key (source
    /// port 40000 + i), otherwise the one (destination, priority) flow.
    fn agent_flows<'a>(
        &self,
        views: &'a [rp_agent::stats::FlowView],
        n: usize,
    ) -> Vec<Option<&'a rp_agent::stats::FlowView>> {
        (0..n)
            .map(|i| {
                let port = format!(":{} >", 40_000 + i);
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

    /// Reports the interval `from`..`to` (seconds since the start).
    fn interval(&mut self, agent: &Agent, sent: &[Activity], from: Duration, to: Duration) {
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
                outln(&format!(
                    "[{i:3}] {}  {:<12}  {:<15}  {frames:7}  {}",
                    report::fmt_interval(from, to),
                    report::fmt_octets(bytes),
                    report::fmt_bps(bps),
                    ids[i].map_or("-".into(), |x| x.to_string()),
                ));
            }
            streams.push(json!({
                "id": i, "frames": frames, "bytes": bytes, "bps": bps, "rp": ids[i],
            }));
        }
        self.last = sent.iter().map(|a| (a.frames, a.bytes)).collect();
        let sum_bps = report::bps(bytes_sum, secs);
        if !self.json && sent.len() > 1 {
            outln(&format!(
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
                    outln(&format!(
                        "[RP{rp:>2}] one limiter for flows {}: its rate is theirs together",
                        report::fmt_flows(flows)
                    ));
                }
            }
            self.told.clone_from(&groups);
        }
        let mut rps = Vec::new();
        for (rp, flows) in &groups {
            let Some(v) = views.iter().find(|v| v.flow == *rp) else {
                continue;
            };
            let prev = self.cnm_prev.insert(*rp, v.cnm_rx).unwrap_or(0);
            let cnms = report::counter_delta(prev, v.cnm_rx);
            if !self.json {
                outln(&format!(
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
        let stats = agent.stats();
        let cnm = report::counter_delta(self.agent_prev.0, stats.cnm_rx);
        let bp = report::counter_delta(self.agent_prev.1, stats.host_backpressure);
        self.agent_prev = (stats.cnm_rx, stats.host_backpressure);
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
    /// each limiter's final state and CNM count.
    fn end(self, agent: &Agent, sent: &[Activity], origin: Instant, elapsed: Duration) {
        let views = agent.flows();
        let of = self.agent_flows(&views, sent.len());
        let ids: Vec<Option<u32>> = of.iter().map(|v| v.map(|v| v.flow)).collect();
        let stats = agent.stats();
        let mut streams = Vec::new();
        if !self.json {
            outln(report::SEPARATOR);
            outln(report::GEN_HEADER);
        }
        for (i, a) in sent.iter().enumerate() {
            let first = a
                .first
                .map_or(Duration::ZERO, |(t, _)| t.saturating_since(origin));
            let last = a.last.saturating_since(origin).max(first);
            let bps = a.active_bps();
            if !self.json {
                outln(&format!(
                    "[{i:3}] {}  {:<12}  {:<15}  {:7}  {}  sender (first to last frame)",
                    report::fmt_interval(first, last),
                    report::fmt_octets(a.bytes),
                    bps.map_or("-".into(), report::fmt_bps),
                    a.frames,
                    ids[i].map_or("-".into(), |x| x.to_string()),
                ));
            }
            streams.push(json!({
                "id": i, "frames": a.frames, "bytes": a.bytes,
                "start": first.as_secs_f64(), "end": last.as_secs_f64(),
                "seconds": last.saturating_sub(first).as_secs_f64(), "bps": bps, "rp": ids[i],
            }));
        }
        let mut rps = Vec::new();
        for (rp, flows) in report::group_by_limiter(&ids) {
            let Some(v) = views.iter().find(|v| v.flow == rp) else {
                continue;
            };
            if !self.json {
                outln(&format!(
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
                "start": self.start,
                "intervals": self.intervals,
                "end": {
                    "elapsed_s": elapsed.as_secs_f64(),
                    "streams": streams,
                    "sum": {"frames": frames, "bytes": bytes},
                    "rps": rps,
                    "cnm_rx": stats.cnm_rx,
                    "backpressure": stats.host_backpressure,
                },
            });
            outln(&serde_json::to_string_pretty(&doc).unwrap_or_default());
        } else {
            outln(&format!(
                "agent: {} CNMs, {} backpressure refusals in {:.2} s",
                stats.cnm_rx,
                stats.host_backpressure,
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

/// Runs the sink.
pub fn sink(args: SinkArgs, term: Arc<AtomicBool>) -> Result<(), DaemonError> {
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
    let mut port = phy::AfPacketPort::open(name, &ring)
        .map_err(|e| DaemonError::Runtime(format!("uplink {name}: {e}")))?;
    let mut sink = Sink::new(args.max_flows);
    args.sched.apply()?;
    let start = phy::clock::now();
    let end = args.duration.map(|d| start + d);
    let mut schedule = Schedule::new(start, args.interval, end);
    let mut out = SinkReport {
        json: args.json,
        intervals: Vec::new(),
        announced: 0,
    };
    if !args.json {
        outln(&format!("rp-agent sink: listening on {name}"));
        outln(report::SINK_HEADER);
    }
    while !term.load(Ordering::Relaxed) && end.is_none_or_past(phy::clock::now()) {
        let now = phy::clock::now();
        port.recv_batch(BATCH, &mut |f| {
            sink.on_frame(now, f);
        })
        .map_err(|e| DaemonError::Runtime(format!("uplink {name}: {e}")))?;
        let now = phy::clock::now();
        if let Some((from, to)) = schedule.tick(now) {
            out.interval(&sink.interval(from, to), from, to);
        }
        let mut deadline = schedule.due().min(now + MAX_SLEEP);
        if let Some(e) = end {
            deadline = deadline.min(e);
        }
        let t = deadline.saturating_since(now);
        if t > Duration::ZERO {
            phy::poll::wait(&[port.raw_fd().unwrap_or(-1)], Some(t))
                .map_err(|e| DaemonError::Runtime(format!("ppoll: {e}")))?;
        }
    }
    let now = phy::clock::now();
    if let Some((from, to)) = schedule.finish(now) {
        out.interval(&sink.interval(from, to), from, to);
    }
    let summary = sink.summary(start);
    let frames: u64 = summary.iter().map(|r| r.frames).sum();
    let bytes: u64 = summary.iter().map(|r| r.bytes).sum();
    let lost: u64 = summary.iter().map(|r| r.lost).sum();
    if args.json {
        let doc = json!({
            "start": {
                "tool": "rp-agent sink",
                "uplink": name,
                "interval_s": args.interval.as_secs_f64(),
                "duration_s": args.duration.map(|d| d.as_secs_f64()),
                "max_flows": args.max_flows,
            },
            "intervals": out.intervals,
            "end": {
                "elapsed_s": now.saturating_since(start).as_secs_f64(),
                "streams": summary,
                "sum": {"frames": frames, "bytes": bytes, "lost": lost},
                "other_frames": sink.other,
                "untracked": sink.untracked,
            },
        });
        outln(&serde_json::to_string_pretty(&doc).unwrap_or_default());
    } else {
        outln(report::SEPARATOR);
        outln(report::SINK_HEADER);
        for r in &summary {
            outln(&format!("{}  receiver (first to last frame)", sink_line(r)));
        }
        outln(&format!(
            "sink: {frames} frames, {lost} lost; {} other frames, {} of untracked flows in {:.2} s",
            sink.other,
            sink.untracked,
            now.saturating_since(start).as_secs_f64()
        ));
    }
    Ok(())
}

/// What `sink` reports: text lines as they happen, or the intervals of the JSON document.
struct SinkReport {
    json: bool,
    intervals: Vec<Value>,
    /// Flows (by id) already introduced with their source and flow id (text).
    announced: u32,
}

impl SinkReport {
    fn interval(&mut self, flows: &[FlowReport], from: Duration, to: Duration) {
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
                outln(&format!("[{:3}] flow {} from {}", r.id, r.flow, r.src));
                self.announced = r.id + 1;
            }
        }
        for r in flows {
            outln(&sink_line(r));
        }
        if flows.len() > 1 {
            outln(&format!(
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
