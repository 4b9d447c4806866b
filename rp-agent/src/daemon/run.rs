//! The agent daemon: TAP ⇄ [`Agent`] ⇄ uplink (AF_PACKET), the loop in [`HostLoop`].
//!
//! The TAP's MTU is set 8 octets below the uplink's, leaving room for the 802.1Q tag and the
//! CN-TAG the agent adds.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use cnm_proto::phy::clock::{Clock, Monotonic};
use cnm_proto::phy::{self, AfPacketConfig, AfPacketPort, Port, PortStats, TapPort};
use cnm_proto::rng::Rng;
use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Duration, Instant, Rate};
use daemon_kit::reopen::{AfPacketOpener, Reopened, Reopener};
use daemon_kit::trace_record::TraceRecord;
use daemon_kit::trace_writer::TraceWriter;
use rp_agent::held::{HeldFrames, Offered};
use rp_agent::{Agent, AgentConfig, FlowKeyMode, RpMode};
use serde_json::{json, Value};

use super::ctl::{self, Command, CtlServer};
use super::{prepare_offloads, DaemonError};

/// Frames taken from one descriptor per loop iteration.
pub const BATCH: usize = 64;
/// Longest sleep, so control requests and signals are seen promptly.
pub const MAX_SLEEP: Duration = Duration::from_millis(10);
/// Shortest sleep towards a pacer's deadline. Frames due within this much of each other leave
/// in one wakeup (the pacers' `catch_up` back-dates them, so the long-run rate stays exact)
/// instead of one wakeup, one `ppoll` and one ring flush per frame: at 1 Gb/s, 50 us is about
/// six 1000-octet frames, a burst the line would have carried back to back anyway after a
/// scheduling delay of that size. Ports and control requests still wake the loop at once.
pub const PACE_QUANTUM: Duration = Duration::from_micros(50);
/// Octets the agent adds to a host frame: 802.1Q tag and CN-TAG.
pub const TAG_OVERHEAD: u32 = 8;

/// Options shared by every mode that runs an agent.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AgentArgs {
    /// Uplink interface (towards the switch).
    #[arg(long, required = true)]
    pub uplink: Option<String>,
    /// Line rate of the uplink (e.g. 100mbit, 1gbit).
    #[arg(long)]
    pub line_rate: Option<Rate>,
    /// PCP of the 802.1Q tag on frames sent up.
    #[arg(long)]
    pub priority: Option<u8>,
    /// VID of that tag (0 = priority-tagged).
    #[arg(long)]
    pub vid: Option<u16>,
    /// Flow key: dst-priority (802.1Q) or five-tuple.
    #[arg(long, value_parser = parse_flow_key)]
    pub flow_key: Option<FlowKeyMode>,
    /// Reaction point: qcn, adaptive-bc, qcn-bs, adaptive-bc+qcn-bs or explicit-rate.
    #[arg(long)]
    pub rp_mode: Option<RpMode>,
    /// Send no CN-TAG on rate-limited flows (for receivers that are not CN-aware).
    #[arg(long)]
    pub no_cn_tag: bool,
    /// TOML file with the agent configuration (flags override it).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Seed of the random generator (default: the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Shut down (as on SIGTERM) when the parent process dies, e.g. a test runner killed
    /// with SIGKILL.
    #[arg(long)]
    pub die_with_parent: bool,
    /// `--sched fifo:PRIO|other` and `--cpu N[,M]` of the dataplane thread.
    #[command(flatten)]
    pub sched: daemon_kit::sched::SchedArgs,
}

fn parse_flow_key(s: &str) -> Result<FlowKeyMode, String> {
    match s {
        "dst-priority" => Ok(FlowKeyMode::DstPriority),
        "five-tuple" => Ok(FlowKeyMode::FiveTuple),
        _ => Err(format!("{s:?}: expected dst-priority or five-tuple")),
    }
}

impl AgentArgs {
    /// The agent configuration: the file (or defaults tuned for veth), then the flags.
    /// Without a file the pacers count only the frame's own octets (veth has no preamble, FCS
    /// or padding), as the switch daemon's line emulation does.
    pub fn agent_config(&self, mac: Option<EthernetAddress>) -> Result<AgentConfig, DaemonError> {
        let mut cfg = match &self.config {
            Some(p) => {
                let text = daemon_kit::config_file::read(p)
                    .map_err(|e| DaemonError::Config(format!("config {}: {e}", p.display())))?;
                toml::from_str::<AgentConfig>(&text)
                    .map_err(|e| DaemonError::Config(format!("config {}: {e}", p.display())))?
            }
            None => AgentConfig {
                wire_overhead: false,
                // A user-space process on a shared machine is sometimes descheduled for a few
                // milliseconds; back-dating by up to 5 ms keeps the long-run rate exact at the
                // cost of a short burst (as the switch daemon's line emulation does).
                catch_up: Duration::from_millis(5),
                ..AgentConfig::default()
            },
        };
        if let Some(r) = self.line_rate {
            cfg.line_rate = r;
        }
        if let Some(p) = self.priority {
            cfg.priority = p;
        }
        if let Some(v) = self.vid {
            cfg.vid = v;
        }
        if let Some(k) = self.flow_key {
            cfg.flow_key = k;
        }
        if let Some(m) = self.rp_mode {
            cfg.rp_mode = m;
        }
        if self.no_cn_tag {
            cfg.cn_tag = false;
        }
        if cfg.mac.is_none() {
            cfg.mac = mac;
        }
        if cfg.rp.rpg_min_rate > cfg.max_rate() {
            // Slow emulated lines (scaled experiments): the standard 5 Mb/s floor would exceed
            // the line itself; keep the floor at 1 % of the ceiling instead.
            let floor = Rate::from_bps((cfg.max_rate().bps() / 100).max(1));
            tracing::warn!(
                "rpg_min_rate {} exceeds the line rate; using {floor}",
                cfg.rp.rpg_min_rate
            );
            cfg.rp.rpg_min_rate = floor;
        }
        cfg.validate()
            .map_err(|e| DaemonError::Config(e.to_string()))?;
        Ok(cfg)
    }

    /// The uplink's name (clap makes the flag required).
    pub fn uplink_name(&self) -> &str {
        self.uplink.as_deref().unwrap_or_default()
    }

    /// Opens the uplink with its offloads off.
    pub fn open_uplink(&self) -> Result<(AfPacketPort, EthernetAddress, u32), DaemonError> {
        let name = self.uplink_name();
        if !phy::iface::exists(name) {
            return Err(DaemonError::Config(format!(
                "uplink {name}: no such interface"
            )));
        }
        prepare_offloads(name)?;
        let mtu = phy::iface::mtu(name).unwrap_or(1500);
        let mac = phy::iface::mac(name)
            .map_err(|e| DaemonError::Runtime(format!("uplink {name}: {e}")))?;
        let port = AfPacketPort::open(name, &AfPacketConfig::for_mtu(mtu + TAG_OVERHEAD))
            .map_err(|e| DaemonError::Runtime(format!("uplink {name}: {e}")))?;
        Ok((port, EthernetAddress(mac), mtu))
    }
}

/// The daemon's own options.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunArgs {
    /// Agent options.
    #[command(flatten)]
    pub agent: AgentArgs,
    /// Name of the TAP device for the host stack.
    #[arg(long, default_value = "qcn0")]
    pub tap: String,
    /// Open the TAP without offloads: the host stack then segments and checksums every frame
    /// itself and the agent reads and writes one frame per system call. By default the TAP
    /// offers checksum and TCP segmentation offload and the agent cuts the host's large TCP
    /// segments into wire frames, and merges in-order TCP segments towards the host
    /// (`cnm_proto::wire::segment`).
    #[arg(long)]
    pub no_tap_offloads: bool,
    /// Address to put on the TAP (CIDR, e.g. 10.0.0.1/24).
    #[arg(long)]
    pub tap_ip: Option<String>,
    /// Control socket path.
    #[arg(long)]
    pub ctl: Option<PathBuf>,
    /// JSON-lines trace of every rate change and CNM.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics (loopback unless --metrics-allow-remote).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Allow a non-loopback --metrics address.
    #[arg(long)]
    pub metrics_allow_remote: bool,
}

/// How often the reopening thread tries a lost uplink again.
const RETRY: std::time::Duration = std::time::Duration::from_millis(500);

/// Runs the daemon until `term` is set.
pub fn run(args: RunArgs, term: Arc<AtomicBool>) -> Result<(), DaemonError> {
    let (uplink, uplink_mac, mtu) = args.agent.open_uplink()?;
    quiet_uplink_arp(args.agent.uplink_name());
    let rt = |what: String| DaemonError::Runtime(what);
    let tap = if args.no_tap_offloads {
        TapPort::create(&args.tap)
    } else {
        TapPort::create_offload(&args.tap)
    }
    .map_err(|e| rt(format!("tap {}: {e}", args.tap)))?;
    let tap_name = tap.name().to_string();
    phy::iface::set_mtu(&tap_name, mtu.saturating_sub(TAG_OVERHEAD).max(576))
        .map_err(|e| rt(format!("tap {tap_name}: set mtu: {e}")))?;
    tap.set_up(true)
        .map_err(|e| rt(format!("tap {tap_name}: up: {e}")))?;
    if let Some(cidr) = &args.tap_ip {
        let st = std::process::Command::new("ip")
            .args(["addr", "replace", cidr, "dev", &tap_name])
            .status()
            .map_err(|e| rt(format!("ip addr: {e}")))?;
        if !st.success() {
            return Err(DaemonError::Config(format!(
                "tap-ip {cidr:?}: `ip addr replace` failed"
            )));
        }
    }
    let tap_mac = EthernetAddress(tap.mac().map_err(|e| rt(format!("tap {tap_name}: {e}")))?);
    let cfg = args.agent.agent_config(Some(tap_mac))?;
    // The host's MAC is the TAP's: a configured `mac` is put on the TAP, so the frames the
    // agent takes for the host and the host's own source address agree by construction.
    let host_mac = cfg.mac.unwrap_or(tap_mac);
    if host_mac != tap_mac {
        tap.set_mac(host_mac.0)
            .map_err(|e| rt(format!("tap {tap_name}: set MAC {host_mac}: {e}")))?;
    }
    let _uplink_mac = UplinkMac::keep_apart(args.agent.uplink_name(), uplink_mac, host_mac)?;
    let clock = Monotonic;
    let seed = args.agent.seed.unwrap_or_else(|| clock.now().as_nanos());
    let agent = Agent::new(cfg, Rng::new(seed)).map_err(|e| DaemonError::Config(e.to_string()))?;
    tracing::info!(
        "tap {tap_name} ({host_mac}) <-> uplink {} at {}, priority {}",
        args.agent.uplink_name(),
        agent.config().line_rate,
        agent.config().priority
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
            let m =
                super::metrics::MetricsServer::start(a, args.metrics_allow_remote, req_tx.clone())
                    .map_err(|e| DaemonError::Config(format!("metrics {a}: {e}")))?;
            tracing::info!("metrics at http://{}/metrics", m.local_addr());
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
    let ring = uplink.config().clone();
    let reopener = Reopener::start(
        AfPacketOpener {
            role: "uplink",
            ring,
        },
        RETRY,
    )
    .map_err(|e| rt(format!("reopening thread: {e}")))?;
    let _ = phy::poll::set_timer_slack(Duration::from_nanos(1000));

    let mut host = HostLoop::new(
        agent,
        tap,
        Some(uplink),
        args.agent.uplink_name(),
        reopener,
        clock,
        req_rx,
    );
    host.trace = trace;
    // Only this (the dataplane) thread: the helper threads above stay time-shared.
    args.agent.sched.apply()?;
    let r = host.run(&term);
    if let Some(t) = host.trace.take() {
        let lost = t.lost();
        match t.finish() {
            Ok(n) => tracing::info!("trace: {n} lines, {lost} lost"),
            Err(e) => tracing::error!("trace: {e}"),
        }
    }
    r
}

/// The daemon's dataplane loop over any host-side [`Port`] (the TAP), any uplink [`Port`] and
/// any [`Clock`]: a TAP, an AF_PACKET uplink and the monotonic clock in production; in-memory
/// pipes and a warped clock in the tests below.
///
/// One thread, run to completion: take host frames (only while the agent accepts them: a
/// refused frame is held in [`HeldFrames`], at most one batch of them, and the host port is not
/// read again until the agent has room — backpressure, never a silent drop), take frames from
/// the uplink, read the clock, let the agent transmit what its pacers allow, flush, record
/// trace events, answer control requests, then sleep until a port is readable or the agent's
/// next deadline ([`Agent::poll_timeout`]).
///
/// An uplink that disappears or goes down is closed and watched by the [`Reopener`] thread;
/// meanwhile the agent keeps its flows (rates, queues, timers) and the host is slowed by the
/// full queues, and the loop takes the uplink back when it can be opened again.
pub struct HostLoop<T: Port, U: Port + Send + 'static, C: Clock> {
    agent: Agent,
    tap: T,
    uplink: Option<U>,
    uplink_name: String,
    /// Why the uplink is down.
    uplink_down: Option<String>,
    /// Counters of the uplink's earlier, closed incarnations.
    uplink_io_closed: PortStats,
    reopener: Reopener<U>,
    clock: C,
    requests: Receiver<ctl::Request>,
    trace: Option<TraceWriter>,
    held: HeldFrames,
    host_dropped: u64,
    errors: u64,
}

impl<T: Port, U: Port + Send + 'static, C: Clock> std::fmt::Debug for HostLoop<T, U, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostLoop")
            .field("uplink", &self.uplink_name)
            .finish_non_exhaustive()
    }
}

impl<T: Port, U: Port + Send + 'static, C: Clock> HostLoop<T, U, C> {
    /// A loop between `tap` and `uplink` (`None`: down at start, watched by `reopener`).
    pub fn new(
        agent: Agent,
        tap: T,
        uplink: Option<U>,
        uplink_name: &str,
        reopener: Reopener<U>,
        clock: C,
        requests: Receiver<ctl::Request>,
    ) -> Self {
        let uplink_down = if uplink.is_none() {
            reopener.watch(0, uplink_name);
            Some("not open".to_string())
        } else {
            None
        };
        HostLoop {
            agent,
            tap,
            uplink,
            uplink_name: uplink_name.to_owned(),
            uplink_down,
            uplink_io_closed: PortStats::default(),
            reopener,
            clock,
            requests,
            trace: None,
            held: HeldFrames::new(),
            host_dropped: 0,
            errors: 0,
        }
    }

    /// Runs until `term` is set; fails only if the host port (the TAP) goes away.
    pub fn run(&mut self, term: &AtomicBool) -> Result<(), DaemonError> {
        while !term.load(Ordering::Relaxed) {
            if self.step()? {
                continue;
            }
            let now = self.clock.now();
            let (deadline, read_tap) = self.next_wake(now);
            let tap_fd = if read_tap {
                self.tap.raw_fd().unwrap_or(-1)
            } else {
                -1
            };
            let up_fd = self.uplink.as_ref().and_then(|u| u.raw_fd()).unwrap_or(-1);
            if deadline > now {
                self.clock
                    .wait(&[tap_fd, up_fd], deadline)
                    .map_err(|e| DaemonError::Runtime(format!("ppoll: {e}")))?;
            }
        }
        Ok(())
    }

    /// The latest instant the loop sleeps to, seen at `now`, and whether a readable host port
    /// wakes it earlier (not while frames are held: it is not read then).
    ///
    /// Held frames wait for room in the agent's queues, which only the agent's departures
    /// make: its own deadline covers them while it has frames queued, and
    /// [`HeldFrames::stranded`] when it has none.
    fn next_wake(&self, now: Instant) -> (Instant, bool) {
        let mut deadline = now + MAX_SLEEP;
        if let Some(t) = self.agent.poll_timeout() {
            // Without an uplink the pacers' deadlines cannot be met: only the host side
            // and housekeeping wake the loop.
            if self.uplink.is_some() || t > now {
                deadline = deadline.min(t.max(now + PACE_QUANTUM));
            }
        }
        if self.held.stranded(&self.agent) {
            deadline = deadline.min(now + PACE_QUANTUM);
        }
        (deadline, self.held.may_offer(&self.agent))
    }

    /// One iteration without the sleep; true when a port had more to give or take.
    fn step(&mut self) -> Result<bool, DaemonError> {
        let now = self.clock.now();
        let mut busy = false;
        // Network → agent first: a CNM or PAUSE that arrived while the agent slept or worked is
        // applied before the next host frames are classified and paced (the reaction point
        // reacts within one iteration, not after a host batch).
        let mut lost = None;
        if let Some(uplink) = self.uplink.as_mut() {
            let agent = &mut self.agent;
            match uplink.recv_batch(BATCH, &mut |f| agent.handle_uplink(now, f)) {
                Ok(n) => busy |= n == BATCH,
                Err(e) if e.is_link_gone() => lost = Some(e.to_string()),
                Err(e) => transient(
                    &mut self.errors,
                    &format!("uplink {}: {e}", self.uplink_name),
                ),
            }
        }
        // Host → agent: held frames first; the host port only while the agent accepts.
        let dropped = &mut self.host_dropped;
        self.held.retry(&mut self.agent, now, &mut |_, _, r| {
            if r.is_err() {
                *dropped += 1;
            }
        });
        if self.held.may_offer(&self.agent) {
            let (agent, held) = (&mut self.agent, &mut self.held);
            let r = self.tap.recv_batch(BATCH, &mut |f| {
                if let Offered::Refused(_) = held.offer(agent, now, 0, f) {
                    *dropped += 1;
                }
            });
            match r {
                // A TAP with offloads may give more frames than asked for (one read, many
                // segments).
                Ok(n) => busy |= n >= BATCH,
                Err(e) if e.is_link_gone() => {
                    return Err(DaemonError::Runtime(format!(
                        "tap {}: {e}",
                        self.tap.name()
                    )))
                }
                Err(e) => transient(&mut self.errors, &format!("tap {}: {e}", self.tap.name())),
            }
        }
        let now = self.clock.now();
        if let Some(uplink) = self.uplink.as_mut() {
            // The socket copies the frame into its ring: the agent keeps its buffer.
            self.agent
                .poll_uplink_buf(now, &mut |f| match uplink.send(f) {
                    Ok(true) => true,
                    Ok(false) => {
                        busy = true;
                        false
                    }
                    Err(e) if e.is_link_gone() => {
                        lost.get_or_insert_with(|| e.to_string());
                        false
                    }
                    // A frame this port can never send (longer than its MTU, ...): dropped rather
                    // than wedging the flow, and counted by the port (`uplink.io` in `stats`).
                    Err(_) => true,
                });
            if let Err(e) = uplink.flush() {
                if e.is_link_gone() {
                    lost.get_or_insert_with(|| e.to_string());
                }
            }
        }
        // A frame the TAP refuses with an error is dropped (counted by the TAP port).
        let tap = &mut self.tap;
        self.agent
            .poll_host(now, &mut |f| tap.send(f).unwrap_or(true));
        let _ = self.tap.flush();
        if let Some(why) = lost {
            self.uplink_lost(why);
        }
        while let Some(ev) = self.reopener.poll() {
            match ev {
                Reopened::Open { port, .. } => {
                    tracing::info!("uplink {} back up", self.uplink_name);
                    self.uplink = Some(port);
                    self.uplink_down = None;
                }
                Reopened::Waiting { why, .. } => self.uplink_down = Some(why.reason()),
            }
        }

        if let Some(t) = self.trace.as_mut() {
            self.agent
                .drain_events(&mut |ev| t.write(&TraceRecord::event(None, ev)));
        } else {
            self.agent.drain_events(&mut |_| {});
        }
        let now = self.clock.now();
        let (agent, host_dropped) = (&mut self.agent, self.host_dropped);
        let (uplink, closed) = (&mut self.uplink, &self.uplink_io_closed);
        let (name, down) = (&self.uplink_name, &self.uplink_down);
        ctl::answer_pending(&self.requests, |cmd| {
            let stats = matches!(cmd, Command::Stats);
            let mut r = answer(agent, now, cmd, host_dropped);
            if let (true, Ok(v)) = (stats, r.as_mut()) {
                // The uplink's own counters: kernel ring drops, truncated frames, frames
                // refused for the MTU, across its reopenings.
                let mut io = *closed;
                if let Some(u) = uplink.as_mut() {
                    io.accumulate(&u.counters());
                }
                v["uplink"] = json!({
                    "name": name,
                    "up": uplink.is_some(),
                    "down_reason": down,
                    "io": serde_json::to_value(io).unwrap_or(Value::Null),
                });
            }
            r
        });
        Ok(busy)
    }

    fn uplink_lost(&mut self, why: String) {
        if let Some(mut port) = self.uplink.take() {
            tracing::warn!("uplink {} down ({why}); waiting for it", self.uplink_name);
            self.uplink_io_closed.accumulate(&port.counters());
            self.uplink_down = Some(why);
            self.reopener.close(port);
            self.reopener.watch(0, &self.uplink_name);
        }
    }
}

/// A receive error that is not the interface going away: reported (the first ten, then every
/// thousandth) and survived.
fn transient(count: &mut u64, what: &str) {
    *count += 1;
    if *count <= 10 || *count % 1000 == 0 {
        tracing::warn!("{what} (error #{count})");
    }
}

/// Answers a control command from the agent's state (`set rp` changes it at `now`).
pub fn answer(
    agent: &mut Agent,
    now: Instant,
    cmd: Command,
    host_dropped: u64,
) -> Result<Value, String> {
    match cmd {
        Command::ShowFlows => serde_json::to_value(agent.flows()).map_err(|e| e.to_string()),
        Command::Stats => {
            let mut v = serde_json::to_value(agent.stats()).map_err(|e| e.to_string())?;
            v["host_dropped"] = json!(host_dropped);
            // The loop's thread (commands are answered there): its policy and CPUs.
            v["sched"] = daemon_kit::sched::current();
            Ok(v)
        }
        Command::SetRp { set } => set_rp(agent, now, &set),
        Command::SetRate(rate) => {
            agent.set_line_rate(now, rate).map_err(|e| e.to_string())?;
            Ok(json!({ "line_rate": rate.to_string() }))
        }
    }
}

/// `set rp`: applies the overrides; answers what was set, what happened to the limiters, and
/// the reaction-point settings now in force.
pub fn set_rp(agent: &mut Agent, now: Instant, set: &[(String, String)]) -> Result<Value, String> {
    let patch = daemon_kit::patch::from_pairs::<rp_agent::RpPatch>(set)
        .map_err(|e| rp_agent::RpPatch::key_error(&e.key, e.reason).to_string())?;
    let change = agent
        .apply_rp_patch(now, &patch)
        .map_err(|e| e.to_string())?;
    let table = daemon_kit::patch::table(set);
    let rp = toml::Table::try_from(agent.config().rp).map_err(|e| e.to_string())?;
    Ok(json!({
        "set": table,
        "limiters": change,
        "rp_mode": agent.config().rp_mode,
        "rp": rp,
    }))
}

/// The uplink's MAC address, kept apart from the host's while the agent runs.
///
/// The host stack must see the network only through the TAP. The kernel also hands every frame
/// that arrives on the uplink to its own stack (the agent's AF_PACKET socket is only a tap
/// beside it), and it keeps a frame for itself when the destination is the interface's own
/// address (`eth_type_trans` sets `PACKET_HOST`; `ip_rcv` and `arp_rcv` drop only
/// `PACKET_OTHERHOST`). A frame without a CN-TAG (a priority-tagged frame with VID 0 is taken
/// as untagged, `__netif_receive_skb_core`) addressed to the host's MAC would then reach the
/// host twice: through the TAP and through the uplink. UDP applications count every datagram
/// twice; TCP sees every segment and acknowledgment twice. The agent therefore gives the
/// uplink an address of its own when it carries the host's ([`uplink_mac_for`]), receives the
/// host's frames in promiscuous mode, and gives the uplink its address back on exit.
/// Broadcast and multicast frames still reach the uplink's stack; `arp_ignore = 8` keeps it
/// from answering ([`quiet_uplink_arp`]).
#[derive(Debug)]
struct UplinkMac {
    name: String,
    original: EthernetAddress,
}

impl UplinkMac {
    /// Moves the uplink off `host` when it carries it; `None` when it already has another.
    fn keep_apart(
        name: &str,
        uplink: EthernetAddress,
        host: EthernetAddress,
    ) -> Result<Option<UplinkMac>, DaemonError> {
        if uplink != host {
            return Ok(None);
        }
        let own = uplink_mac_for(host);
        phy::iface::set_mac(name, own.0).map_err(|e| {
            DaemonError::Config(format!(
                "uplink {name} carries the host's MAC {host} and cannot take another ({e}): \
                 the host would receive every untagged frame twice; give the uplink or the \
                 host (`mac`) another address"
            ))
        })?;
        tracing::info!(
            "uplink {name}: MAC {host} is the host's (on the TAP); the uplink uses {own}"
        );
        Ok(Some(UplinkMac {
            name: name.to_owned(),
            original: uplink,
        }))
    }
}

impl Drop for UplinkMac {
    fn drop(&mut self) {
        if let Err(e) = phy::iface::set_mac(&self.name, self.original.0) {
            tracing::warn!(
                "uplink {}: could not restore MAC {}: {e}",
                self.name,
                self.original
            );
        }
    }
}

/// The address the uplink takes when it carries the host's MAC `host`: the same octets with
/// the locally administered bit set (IEEE 802-2014 clause 8.2.2, the U/L bit, 0x02 of the
/// first octet) and the 0x04 bit flipped, so it differs from `host` whatever `host` was; the
/// individual/group bit (0x01) is kept, so it stays a unicast address.
pub fn uplink_mac_for(host: EthernetAddress) -> EthernetAddress {
    let mut m = host.0;
    m[0] = (m[0] | 0x02) ^ 0x04;
    EthernetAddress(m)
}

/// The host stack now speaks through the TAP; the uplink only carries the agent's frames. With
/// Linux's default `arp_ignore = 0` the kernel would also answer ARP requests arriving on the
/// uplink for the TAP's addresses, with the uplink's MAC, and peers would then send to an
/// address the agent does not deliver to the host. `arp_ignore = 8` (ip-sysctl.rst: "do not
/// reply for all local addresses") stops that on the uplink only.
fn quiet_uplink_arp(uplink: &str) {
    let path = format!("/proc/sys/net/ipv4/conf/{uplink}/arp_ignore");
    match std::fs::write(&path, "8") {
        Ok(()) => {}
        Err(e) => tracing::warn!(
            "could not set {path} to 8 ({e}); set it by hand, or peers may resolve \
             the TAP's address to the uplink's MAC"
        ),
    }
}

#[cfg(test)]
mod loop_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uplinks_own_mac_differs_from_the_hosts_and_stays_unicast() {
        let m = |o: [u8; 6]| uplink_mac_for(EthernetAddress(o)).0;
        // Locally administered already (the testbed's hosts): 0x02 kept, 0x04 set.
        assert_eq!(m([0x02, 0, 0, 0, 1, 2]), [0x06, 0, 0, 0, 1, 2]);
        // 0x04 already set: it is cleared instead.
        assert_eq!(m([0x06, 0, 0, 0, 1, 2]), [0x02, 0, 0, 0, 1, 2]);
        // A NIC's universal address: U/L bit set, 0x04 flipped.
        assert_eq!(m([0x00, 0x1b, 0x21, 1, 2, 3]), [0x06, 0x1b, 0x21, 1, 2, 3]);
        assert_eq!(m([0xa4, 0xbf, 1, 2, 3, 4]), [0xa2, 0xbf, 1, 2, 3, 4]);
        for first in 0..=255u8 {
            let host = [first & !1, 7, 7, 7, 7, 7];
            let own = m(host);
            assert_ne!(own, host);
            assert_eq!(own[0] & 1, 0, "unicast");
            assert_eq!(own[0] & 2, 2, "locally administered");
        }
    }

    #[test]
    fn set_rp_answers_the_settings_in_force_or_an_error() {
        let mut agent = Agent::new(AgentConfig::default(), Rng::new(1)).unwrap();
        let now = Instant::from_nanos(1);
        let cmd = Command::parse(&["set", "rp", "rp_mode=adaptive-bc", "rpg_ai_rate=10mbit"]);
        let v = answer(&mut agent, now, cmd.unwrap(), 0).unwrap();
        assert_eq!(v["rp_mode"], "adaptive-bc");
        assert_eq!(v["limiters"]["change"], "updated");
        assert_eq!(v["set"]["rpg_ai_rate"], "10mbit");
        assert_eq!(agent.config().rp.rpg_ai_rate, Rate::from_mbps(10));
        let cmd = Command::parse(&["set", "rp", "rpg_gd", "40"]).unwrap();
        let e = answer(&mut agent, now, cmd, 0).unwrap_err();
        assert!(e.contains("rp.rpg_gd"), "{e}");
        let cmd = Command::parse(&["set", "rp", "line_rate", "1mbit"]).unwrap();
        let e = answer(&mut agent, now, cmd, 0).unwrap_err();
        assert!(e.contains("line_rate") && e.contains("run time"), "{e}");
    }
}
