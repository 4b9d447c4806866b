//! `rp-agent gen` and `rp-agent sink`: the traffic models of [`rp_agent::gen`] on a real port.
//!
//! `gen` feeds its sources into an [`Agent`] (classify, limiter, reaction point, tagging — the
//! very path host traffic takes) and the agent's output onto the uplink; CNMs and PAUSE frames
//! from the uplink reach the agent. `sink` counts generated frames per flow. Both print one line
//! per interval (iperf-like; one JSON object per line with `--json`) and a final summary.
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
use rp_agent::gen::sink::Sink;
use rp_agent::gen::{Pattern, Source, UdpEncap, MAX_FRAME_LEN};
use rp_agent::held::{HeldFrames, Offered};
use rp_agent::Agent;
use serde_json::json;

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
    /// JSON lines instead of text.
    #[arg(long)]
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
    /// JSON lines instead of text.
    #[arg(long)]
    pub json: bool,
    /// Shut down (as on SIGTERM) when the parent process dies.
    #[arg(long)]
    pub die_with_parent: bool,
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
    let mut sent = vec![(0u64, 0u64); sources.len()];
    let mut last = sent.clone();
    let mut next_report = start + args.interval;
    let mut last_report = start;
    let mut rr = 0usize;
    let _ = phy::poll::set_timer_slack(Duration::from_nanos(1000));
    let rt = |e: String| DaemonError::Runtime(e);
    while !term.load(Ordering::Relaxed) && end.is_none_or_past(phy::clock::now()) {
        let now = phy::clock::now();
        held.retry(&mut agent, now, &mut |s, n, r| {
            if r.is_ok() {
                sent[s as usize].0 += 1;
                sent[s as usize].1 += n as u64;
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
                    Offered::Accepted => {
                        sent[s].0 += 1;
                        sent[s].1 += n as u64;
                    }
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
        if now >= next_report {
            report_gen(
                &args,
                &agent,
                &sent,
                &last,
                now.saturating_since(last_report),
                last_report.saturating_since(start),
                false,
            );
            last.clone_from(&sent);
            last_report = now;
            next_report = now + args.interval;
        }
        let now = phy::clock::now();
        let mut deadline = (now + MAX_SLEEP).min(next_report);
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
    let zero = vec![(0, 0); sent.len()];
    let now = phy::clock::now();
    report_gen(
        &args,
        &agent,
        &sent,
        &zero,
        now.saturating_since(start),
        Duration::ZERO,
        true,
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

fn report_gen(
    args: &GenArgs,
    agent: &Agent,
    sent: &[(u64, u64)],
    last: &[(u64, u64)],
    secs: Duration,
    from: Duration,
    summary: bool,
) {
    let s = secs.as_secs_f64().max(1e-9);
    let views = agent.flows();
    let dst = args.dst.to_string();
    // The agent flow of generator flow i: its own with UDP and a five-tuple key (source port
    // 40000 + i), otherwise the one (destination, priority) flow.
    let agent_flow = |i: usize| {
        let port = format!(":{} >", 40_000 + i);
        views
            .iter()
            .find(|v| v.dst == dst && v.five_tuple.as_deref().is_some_and(|t| t.contains(&port)))
            .or_else(|| views.iter().find(|v| v.dst == dst))
    };
    let stats = agent.stats();
    for (i, (now, before)) in sent.iter().zip(last).enumerate() {
        let cr = agent_flow(i);
        let frames = now.0 - before.0;
        let bytes = now.1 - before.1;
        let bps = bytes as f64 * 8.0 / s;
        if args.json {
            let v = json!({
                "type": if summary { "summary" } else { "interval" },
                "flow": i, "start": from.as_secs_f64(), "secs": s,
                "frames": frames, "bytes": bytes, "bps": bps,
                "cr_bps": cr.map(|c| c.cr_bps), "state": cr.map(|c| c.state),
                "cnm_rx": cr.map(|c| c.cnm_rx), "cnm_rx_total": stats.cnm_rx, "backpressure": stats.host_backpressure,
            });
            outln(&v.to_string());
        } else {
            outln(&format!(
                "[{i:3}] {:7.2}-{:7.2} s  {frames:9} frames  {:10.3} Mbit/s  cr {:>10} Mbit/s  cnm {}{}",
                from.as_secs_f64(),
                from.as_secs_f64() + s,
                bps / 1e6,
                cr.map_or("-".into(), |c| format!("{:.3}", c.cr_bps as f64 / 1e6)),
                cr.map_or(0, |c| c.cnm_rx),
                if summary { "  (summary)" } else { "" }
            ));
        }
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
    let start = phy::clock::now();
    let end = args.duration.map(|d| start + d);
    let mut next_report = start + args.interval;
    while !term.load(Ordering::Relaxed) && end.is_none_or_past(phy::clock::now()) {
        let now = phy::clock::now();
        port.recv_batch(BATCH, &mut |f| {
            sink.on_frame(now, f);
        })
        .map_err(|e| DaemonError::Runtime(format!("uplink {name}: {e}")))?;
        let now = phy::clock::now();
        if now >= next_report {
            for r in sink.interval(now) {
                print_report(&r, args.json, "interval");
            }
            next_report = now + args.interval;
        }
        let mut deadline = next_report.min(now + MAX_SLEEP);
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
    for r in sink.summary(now) {
        print_report(&r, args.json, "summary");
    }
    if args.json {
        outln(
            &json!({"type": "totals", "other_frames": sink.other, "untracked": sink.untracked})
                .to_string(),
        );
    }
    Ok(())
}

fn print_report(r: &rp_agent::gen::sink::FlowReport, json: bool, kind: &str) {
    if json {
        let mut v = serde_json::to_value(r).unwrap_or_default();
        v["type"] = json!(kind);
        outln(&v.to_string());
    } else {
        outln(&format!(
            "[{} #{:3}] {:7.2} s  {:9} frames  {:10.3} Mbit/s  lost {}  reordered {}  delay {:.1}/{:.1}/{:.1} us{}",
            r.src,
            r.flow,
            r.secs,
            r.frames,
            r.bps / 1e6,
            r.lost,
            r.reordered,
            r.delay_min_us,
            r.delay_mean_us,
            r.delay_max_us,
            if kind == "summary" { "  (summary)" } else { "" }
        ));
    }
}
