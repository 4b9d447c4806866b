//! `testbed bench app`: an application (iperf3 TCP) through the agents, against the Linux
//! bridge on the same topology, side by side (numbers only, nothing asserted).
//!
//! Three labs are built once, in unique namespaces, and kept up for the whole run:
//!
//! * **bridge** — `b1:eth0 — br:p1 [Linux bridge br0] br:p2 — b2:eth0`; the hosts' stacks
//!   speak on `eth0` directly.
//! * **agents** — `a1:qcn0 [rp-agent] a1:eth0 — sw:p1 [cp-switch] sw:p2 — a2:eth0 [rp-agent]
//!   a2:qcn0`, the way the namespace runner wires a host whose stack sends through its
//!   agent: the host's address is on the TAP, the agent carries its frames to the uplink and
//!   back. Nothing is shaped: the agents' line rate is [`UNSHAPED_LINE`], far above what
//!   either path forwards, and the switch's ports have no rate.
//! * **agents, TAP offloads off** — the same with `rp-agent --no-tap-offloads` and the TAPs'
//!   offloads off as well: the host stack segments and checksums every frame and the agent
//!   moves one frame per system call (the A/B of the offload path).
//! * **shaped** — the agents' topology with the switch's egress towards the receiver shaped to
//!   [`SHAPED_RATE`] and an output congestion point on it (QCN active: the switch samples,
//!   sends CNMs, the sending agent limits its flow). The agents' line rate is
//!   [`SHAPED_LINE`], so the switch, not the agent, is the bottleneck. The switch's port
//!   towards the sender is given that rate too (`p1,rate=`[`SHAPED_LINE`]): the link from the
//!   sending agent is a 10 Gb/s link of the emulated network, and a port that knows its link's
//!   rate measures (and, where the switch daemon corrects it, spaces) frames that reach it
//!   faster than that link could have delivered them ([`AppReport::shaped_ingress_early`]).
//!   The agents back-date a late poll by at most [`SHAPED_CATCH_UP`] (see below).
//!
//! Every veth end has its offloads off (`ethtool -K … tso gso gro tx rx sg off`), so every
//! link between two hosts' interfaces carries frames of at most one MTU on both paths: what
//! differs is the forwarding element. The agents' TAP is the host's NIC; by default it offers
//! checksum and TCP segmentation offload, and the agent does the NIC's work (segments to
//! the MTU before its frames reach the uplink, merges in order segments towards the host);
//! the "TAP offloads off" lab shows the same path without it. (The agents' TAP MTU is 8
//! octets below the uplink's, for the 802.1Q tag and CN-TAG; the bridge's hosts keep 1500.)
//!
//! Each round runs one `iperf3 -J` TCP test on the bridge, then on each agents' lab in turn;
//! the report gives every round, the medians and the ratio agents / bridge. Goodput is
//! iperf3's receiver-side `bits_per_second` (TCP payload), with the first `warmup` seconds
//! omitted (`iperf3 -O`). Every test uses the client namespace's TCP congestion control (the
//! machine's default, printed with the report) unless `congestion` names one (`iperf3 -C`):
//! a rate-based one (BBR) and a loss-based one (CUBIC) meet a reaction point differently.
//!
//! # The shaped bottleneck: what limits it
//! TCP payload can fill at most `1440 / 1514` of the bottleneck here (1492-octet TAP MTU less
//! 52 octets of IPv4 and TCP headers with timestamps, against the 1514 octets the agent puts on
//! the wire with its tags; the switch's line emulation charges neither preamble nor gap), so
//! 0.951 Gb/s at 1 Gb/s. The algorithm reaches it: the simulator's model of this lab
//! (`testbed sim testbed/scenarios/sim/app_shaped.toml`: one TCP flow, 10 Gb/s access, a
//! 1 Gb/s egress with the standard's default CP and RP) keeps the bottleneck 99.9 % busy with
//! the output queue at 24 kB (mean, for a set point of 26 kB) and no drops. The namespace lab fell short for the emulation's sake, measured on a
//! 2-core machine: the switch, the two agents and iperf3 saturate both cores; the switch's
//! output queue averaged 9 kB and was empty in 6.5 % of 100 µs samples; every CNM with the
//! largest feedback (|Fb| quantized 56-63, which halves the rate, twice or thrice in one
//! batch) came after the switch had not run for 0.3-4 ms and then took the whole backlog of
//! its receive ring in one batch (the queue jumping from a few kB to 90 kB at one instant); and
//! the sending agent, back-dating a late poll by up to 5 ms, could put 5 ms of its rate on the
//! wire at once (up to its 256 kB queue: ten times the set point). Neither burst is one the
//! emulated network could produce, and both feed the congestion point feedback the
//! algorithm would not otherwise get. Hence [`SHAPED_CATCH_UP`], and the rate on the
//! sender's port, so the switch can date arrivals by the link rather than by its own batches:
//! with it, the switch daemon's ingress stage hands the sender's frames to the bridge at the
//! instants a 10 Gb/s link would have delivered them, departures interleaved. Side by side on
//! a busy machine (load 6 on 2 cores, 4 s tests, alternating), the rate on the sender's port
//! took the goodput from 0.44-0.56 Gb/s to 0.67-0.82, and the stage turned off
//! (`--ingress-stage false`) brought it back to 0.47-0.60.

use std::ffi::OsStr;
use std::path::PathBuf;

use cnm_proto::Duration;
use serde::Serialize;
use serde_json::Value;

use super::lab::{cps_sum, ctl_json, line, other, sleep, wait_for_socket, WorkDir};
use super::BenchError;
use crate::netns::{self, Child, Lab, Namespace};

/// The agents' line rate when nothing is shaped.
pub const UNSHAPED_LINE: &str = "40gbit";
/// The switch egress rate of the shaped lab.
pub const SHAPED_RATE: &str = "1gbit";
/// [`SHAPED_RATE`] in Gb/s, for the goodput ratio.
pub const SHAPED_GBPS: f64 = 1.0;
/// The agents' line rate in the shaped lab (above the bottleneck).
pub const SHAPED_LINE: &str = "10gbit";
/// The agents' largest back-dating of a late poll in the shaped lab: the agent's own default
/// (`AgentConfig::catch_up`), not the 5 ms of the unshaped labs. A late poll sends up to
/// `catch_up × CR` octets back to back; at CR ≈ 1 Gb/s, 200 µs is 25 kB, about the congestion
/// point's set point (26 kB), where 5 ms would be up to 625 kB, ten times the set point and
/// four times the switch's 150 kB output buffer. Back-dating further buys the bottleneck
/// nothing: a link whose queue ran dry while the sender was not scheduled does not get that
/// time back when the late frames arrive.
pub const SHAPED_CATCH_UP: &str = "200us";
/// The agents' back-dating in the unshaped labs (the daemon's default).
const UNSHAPED_CATCH_UP: &str = "5ms";
/// The iperf3 server port.
const PORT: &str = "5201";

/// Settings of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Measured time of each iperf3 test (whole seconds, at least 1).
    pub duration: Duration,
    /// Omitted start of each test (whole seconds, `iperf3 -O`).
    pub warmup: Duration,
    /// Rounds (each runs bridge, agents, shaped in turn).
    pub rounds: usize,
    /// Skip the shaped lab.
    pub no_shaped: bool,
    /// The cp-switch binary.
    pub cp_switch: PathBuf,
    /// The rp-agent binary.
    pub rp_agent: PathBuf,
    /// The iperf3 binary.
    pub iperf3: PathBuf,
    /// TCP congestion control of every test (`iperf3 -C`); `None`: the client namespace's
    /// default.
    pub congestion: Option<String>,
}

/// One iperf3 test.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Test {
    /// Receiver-side goodput, Gb/s.
    pub gbps: f64,
    /// Sender retransmissions.
    pub retransmits: u64,
}

/// One path over the rounds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PathRun {
    /// Every round's test.
    pub rounds: Vec<Test>,
    /// Median goodput, Gb/s.
    pub median_gbps: f64,
    /// The first failure, if any round failed.
    pub error: Option<String>,
}

/// The whole report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AppReport {
    /// h1 — Linux bridge — h2.
    pub bridge: PathRun,
    /// h1 — rp-agent — cp-switch — rp-agent — h2, nothing shaped.
    pub agents: PathRun,
    /// The same with the TAPs' offloads off.
    pub agents_no_offload: PathRun,
    /// `agents_no_offload.median_gbps / bridge.median_gbps`.
    pub ratio_no_offload: Option<f64>,
    /// `agents.median_gbps / bridge.median_gbps`.
    pub ratio: Option<f64>,
    /// The shaped 1 Gb/s bottleneck through the agents, QCN active.
    pub shaped: Option<PathRun>,
    /// `shaped.median_gbps / SHAPED_GBPS`.
    pub shaped_share: Option<f64>,
    /// CNMs the shaped lab's switch sent over the whole run.
    pub shaped_cnms: u64,
    /// CNMs the shaped lab's sending agent took (received for its flow) over the whole run.
    pub shaped_sender_cnms: u64,
    /// Share of the frames from the sending agent that reached the shaped lab's switch faster
    /// than their [`SHAPED_LINE`] link could have delivered them (the switch's ingress measure
    /// on kernel receive stamps, `stats` → `ports[0].ingress.early_share`); `None` when the
    /// switch measured nothing.
    pub shaped_ingress_early: Option<f64>,
    /// What the shaped lab's switch's ingress link-rate stage did with the sender's frames
    /// over the whole run (`None`: the stage is off or the switch could not be asked).
    pub shaped_stage: Option<SenderStage>,
    /// The TCP congestion control the tests used.
    pub congestion: Option<String>,
    /// Building a lab failed.
    pub error: Option<String>,
    /// CPUs of the machine.
    pub cpus: usize,
}

impl AppReport {
    /// The printed table.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Application benchmark: iperf3 TCP ({}), one stream, links' offloads off ({} CPUs)",
            self.congestion
                .as_deref()
                .unwrap_or("congestion control unknown"),
            self.cpus
        );
        let row = |s: &mut String, name: &str, p: &PathRun| {
            let r: Vec<String> = p.rounds.iter().map(|t| format!("{:.3}", t.gbps)).collect();
            let rt: u64 = p.rounds.iter().map(|t| t.retransmits).sum();
            let _ = writeln!(
                s,
                "   {name:<34} {:>7.3} Gb/s  (rounds [{}], retransmits {rt})",
                p.median_gbps,
                r.join(", ")
            );
            if let Some(e) = &p.error {
                let _ = writeln!(s, "   {name}: failed: {e}");
            }
        };
        row(&mut s, "h1 - Linux bridge - h2", &self.bridge);
        row(&mut s, "h1 - agent - cp-switch - agent - h2", &self.agents);
        row(
            &mut s,
            "  the same, TAP offloads off",
            &self.agents_no_offload,
        );
        if let Some(r) = self.ratio {
            let _ = writeln!(s, "   ratio agents/bridge {r:.3}");
        }
        if let Some(r) = self.ratio_no_offload {
            let _ = writeln!(s, "   ratio agents (TAP offloads off)/bridge {r:.3}");
        }
        if let Some(p) = &self.shaped {
            let _ = writeln!(
                s,
                "\n   shaped {SHAPED_RATE} bottleneck, QCN active ({} CNMs sent, {} taken by the \
                 sender's agent)",
                self.shaped_cnms, self.shaped_sender_cnms
            );
            if let Some(e) = self.shaped_ingress_early {
                let _ = writeln!(
                    s,
                    "   frames reaching the switch faster than their {SHAPED_LINE} link: {:.1} %",
                    e * 100.0
                );
            }
            if let Some(st) = &self.shaped_stage {
                let _ = writeln!(
                    s,
                    "   ingress stage on the sender's port: {} of {} frames held back, delay mean \
                     {:.1} us, max {:.1} us, {} dropped",
                    st.held, st.staged, st.mean_delay_us, st.max_delay_us, st.drops
                );
            }
            row(&mut s, "h1 - agent - cp-switch - agent - h2", p);
            if let Some(r) = self.shaped_share {
                let _ = writeln!(s, "   goodput / bottleneck {r:.3}");
            }
        }
        if let Some(e) = &self.error {
            let _ = writeln!(s, "   failed: {e}");
        }
        s
    }
}

/// The ingress link-rate stage of the switch's port towards the sender (`stats` →
/// `ports[0].ingress.stage`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SenderStage {
    /// Frames that went through the stage.
    pub staged: u64,
    /// Of those, frames held back (due later than the switch read them).
    pub held: u64,
    /// Mean stage delay over the staged frames, µs.
    pub mean_delay_us: f64,
    /// Largest stage delay, µs.
    pub max_delay_us: f64,
    /// Frames the stage dropped (full, or the port went down).
    pub drops: u64,
}

impl SenderStage {
    /// From a cp-switch `stats` answer; `None` when the first port has no stage.
    pub fn from_stats(stats: &Value) -> Option<SenderStage> {
        let st = stats["ports"].as_array()?.first()?["ingress"]["stage"].as_object()?;
        let n = |k: &str| st.get(k).and_then(Value::as_u64).unwrap_or(0);
        let staged = n("staged");
        Some(SenderStage {
            staged,
            held: n("held"),
            mean_delay_us: if staged == 0 {
                0.0
            } else {
                n("delay_total_ns") as f64 / staged as f64 / 1e3
            },
            max_delay_us: n("delay_max_ns") as f64 / 1e3,
            drops: n("overflow_drops") + n("down_drops"),
        })
    }
}

/// Whole seconds of `d`, at least `min`.
fn secs(d: Duration, min: u64) -> u64 {
    (d.as_secs_f64().ceil() as u64).max(min)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A built path: its namespaces, daemons and the address of the receiver.
struct Built {
    client: Namespace,
    server_ip: String,
    _daemons: Vec<Child>,
    _server: Child,
    /// The switch's control socket (agents' labs).
    switch_ctl: Option<PathBuf>,
    /// The sending agent's control socket (agents' labs).
    sender_ctl: Option<PathBuf>,
}

/// Runs the benchmark.
pub fn run(cfg: &Config) -> Result<AppReport, BenchError> {
    if !netns::is_root() {
        return Err(BenchError::NotRoot);
    }
    let mut report = AppReport {
        cpus: std::thread::available_parallelism().map_or(1, usize::from),
        ..AppReport::default()
    };
    let lab = Lab::new("app")?;
    let work = WorkDir::new(&lab)?;
    report.congestion = cfg.congestion.clone();
    let built = (|| -> Result<_, BenchError> {
        let bridge = build_bridge(cfg, &lab, &work)?;
        let agents = build_agents(cfg, &lab, &work, "a", None, UNSHAPED_LINE, true)?;
        let plain = build_agents(cfg, &lab, &work, "o", None, UNSHAPED_LINE, false)?;
        let shaped = if cfg.no_shaped {
            None
        } else {
            Some(build_agents(
                cfg,
                &lab,
                &work,
                "s",
                Some(SHAPED_RATE),
                SHAPED_LINE,
                true,
            )?)
        };
        Ok((bridge, agents, plain, shaped))
    })();
    let (bridge, agents, plain, shaped) = match built {
        Ok(b) => {
            if report.congestion.is_none() {
                report.congestion =
                    b.0.client
                        .exec(&["cat", "/proc/sys/net/ipv4/tcp_congestion_control"])
                        .ok()
                        .map(|s| s.trim().to_owned())
                        .filter(|s| !s.is_empty());
            }
            b
        }
        Err(BenchError::Interrupted(i)) => return Err(BenchError::Interrupted(i)),
        Err(e) => {
            report.error = Some(e.to_string());
            return Ok(report);
        }
    };
    let mut shaped_path = shaped.as_ref().map(|_| PathRun::default());
    for _ in 0..cfg.rounds.max(1) {
        measure(cfg, &bridge, &mut report.bridge)?;
        measure(cfg, &agents, &mut report.agents)?;
        measure(cfg, &plain, &mut report.agents_no_offload)?;
        if let (Some(b), Some(p)) = (&shaped, shaped_path.as_mut()) {
            measure(cfg, b, p)?;
        }
    }
    let med = |p: &mut PathRun| {
        let v: Vec<f64> = p.rounds.iter().map(|t| t.gbps).collect();
        p.median_gbps = median(&v);
    };
    med(&mut report.bridge);
    med(&mut report.agents);
    med(&mut report.agents_no_offload);
    if report.bridge.median_gbps > 0.0 {
        let b = report.bridge.median_gbps;
        report.ratio = Some(report.agents.median_gbps / b).filter(|r| r.is_finite());
        report.ratio_no_offload =
            Some(report.agents_no_offload.median_gbps / b).filter(|r| r.is_finite());
    }
    if let Some(p) = shaped_path.as_mut() {
        med(p);
        if p.median_gbps.is_finite() {
            report.shaped_share = Some(p.median_gbps / SHAPED_GBPS);
        }
    }
    if let Some(ctl) = shaped.as_ref().and_then(|b| b.switch_ctl.as_deref()) {
        report.shaped_cnms = cps_sum(&cfg.cp_switch, ctl, "cnm_tx");
        let stats = ctl_json(&cfg.cp_switch, ctl, &["stats"]);
        report.shaped_ingress_early = stats.as_ref().and_then(sender_port_early_share);
        report.shaped_stage = stats.as_ref().and_then(SenderStage::from_stats);
    }
    if let Some(ctl) = shaped.as_ref().and_then(|b| b.sender_ctl.as_deref()) {
        report.shaped_sender_cnms = ctl_json(&cfg.rp_agent, ctl, &["stats"])
            .and_then(|v| v["cnm_rx"].as_u64())
            .unwrap_or(0);
    }
    report.shaped = shaped_path;
    drop((bridge, agents, plain, shaped));
    Ok(report)
}

/// One iperf3 test on `b`, appended to `p` (a failure is recorded, the run goes on).
fn measure(cfg: &Config, b: &Built, p: &mut PathRun) -> Result<(), BenchError> {
    match iperf(cfg, b) {
        Ok(t) => p.rounds.push(t),
        Err(BenchError::Interrupted(i)) => return Err(BenchError::Interrupted(i)),
        Err(e) => {
            p.error.get_or_insert(e.to_string());
        }
    }
    Ok(())
}

fn iperf(cfg: &Config, b: &Built) -> Result<Test, BenchError> {
    let t = secs(cfg.duration, 1).to_string();
    let omit = secs(cfg.warmup, 0).to_string();
    let mut args: Vec<&OsStr> = vec![
        cfg.iperf3.as_os_str(),
        "-c".as_ref(),
        b.server_ip.as_ref(),
        "-p".as_ref(),
        PORT.as_ref(),
        "-t".as_ref(),
        t.as_ref(),
        "-O".as_ref(),
        omit.as_ref(),
        "-J".as_ref(),
    ];
    if let Some(cc) = &cfg.congestion {
        args.push("-C".as_ref());
        args.push(cc.as_ref());
    }
    let out = b.client.exec_output(&args)?;
    if crate::signals::requested() {
        return Err(crate::signals::Interrupted.into());
    }
    parse_iperf(&out.stdout)
}

/// Goodput and retransmissions from `iperf3 -J` client output.
pub fn parse_iperf(json: &[u8]) -> Result<Test, BenchError> {
    let v: Value = serde_json::from_slice(json)
        .map_err(|e| other("iperf3", format!("unreadable output: {e}")))?;
    if let Some(e) = v["error"].as_str() {
        return Err(other("iperf3", e.to_owned()));
    }
    let bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or_else(|| other("iperf3", "no end.sum_received.bits_per_second"))?;
    Ok(Test {
        gbps: bps / 1e9,
        retransmits: v["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0),
    })
}

/// The ingress early share of the switch's port towards the sender (`ports[0]`, `p1`) in a
/// cp-switch `stats` answer; `None` when that port measured no frame.
pub fn sender_port_early_share(stats: &Value) -> Option<f64> {
    let ingress = &stats["ports"].as_array()?.first()?["ingress"];
    if ingress["measured"].as_u64()? == 0 {
        return None;
    }
    ingress["early_share"].as_f64().filter(|e| e.is_finite())
}

/// The two hosts of the lab `tag` and the namespace between them (`{tag}1`, `{tag}sw`,
/// `{tag}2`).
fn hosts(lab: &Lab, tag: &str) -> Result<(Namespace, Namespace, Namespace), BenchError> {
    line(
        lab,
        [&format!("{tag}1"), &format!("{tag}sw"), &format!("{tag}2")],
    )
}

fn iperf_server(
    cfg: &Config,
    ns: &Namespace,
    work: &WorkDir,
    tag: &str,
) -> Result<Child, BenchError> {
    let log = work.path(&format!("iperf3-{tag}.log"));
    let server = ns.spawn_logged(
        &[
            cfg.iperf3.as_os_str(),
            "-s".as_ref(),
            "-p".as_ref(),
            PORT.as_ref(),
        ],
        &log,
    )?;
    // The listening socket (state 0A) appears in the namespace's /proc/net/tcp or tcp6 (a
    // dual-stack socket) as port 5201 = 0x1451.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let tcp = ns
            .exec(&["cat", "/proc/net/tcp", "/proc/net/tcp6"])
            .unwrap_or_default();
        if tcp
            .lines()
            .any(|l| l.contains(":1451 ") && l.contains(" 0A "))
        {
            return Ok(server);
        }
        if std::time::Instant::now() > deadline {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(other("iperf3 server", format!("not listening: {text}")));
        }
        sleep(std::time::Duration::from_millis(50))?;
    }
}

fn build_bridge(cfg: &Config, lab: &Lab, work: &WorkDir) -> Result<Built, BenchError> {
    let (h1, br, h2) = hosts(lab, "b")?;
    br.add_bridge("br0", &["p1", "p2"])?;
    h1.add_addr("eth0", "10.78.0.1/24")?;
    h2.add_addr("eth0", "10.78.0.2/24")?;
    let server = iperf_server(cfg, &h2, work, "b")?;
    Ok(Built {
        client: h1,
        server_ip: "10.78.0.2".into(),
        _daemons: Vec::new(),
        _server: server,
        switch_ctl: None,
        sender_ctl: None,
    })
}

/// The agents' lab `tag` (`a`, `o` or `s`): cp-switch in the middle (egress towards the
/// receiver shaped to `shaped` with an output CP when given), an agent with line rate `line`
/// on each host, its TAP with offloads or without.
fn build_agents(
    cfg: &Config,
    lab: &Lab,
    work: &WorkDir,
    tag: &str,
    shaped: Option<&str>,
    line: &str,
    tap_offloads: bool,
) -> Result<Built, BenchError> {
    let (h1, sw, h2) = hosts(lab, tag)?;
    let ctl = work.path(&format!("{tag}-sw.sock"));
    let log = work.path(&format!("{tag}-sw.log"));
    // Shaped: the egress towards the receiver at the bottleneck's rate, the port towards the
    // sender at the sender's line rate (its link into the switch).
    let (p1, p2) = match shaped {
        Some(r) => (format!("p1,rate={line}"), format!("p2,rate={r}")),
        None => ("p1".to_owned(), "p2".to_owned()),
    };
    let catch_up = if shaped.is_some() {
        SHAPED_CATCH_UP
    } else {
        UNSHAPED_CATCH_UP
    };
    let cp = if shaped.is_some() { "output" } else { "off" };
    let mut switch = sw.spawn_logged(
        &[
            cfg.cp_switch.as_os_str(),
            "--port".as_ref(),
            p1.as_ref(),
            "--port".as_ref(),
            p2.as_ref(),
            "--cp".as_ref(),
            cp.as_ref(),
            "--ctl".as_ref(),
            ctl.as_os_str(),
        ],
        &log,
    )?;
    wait_for_socket(&mut switch, &ctl, &log)?;
    let subnet = match tag {
        "a" => 1,
        "o" => 2,
        _ => 3,
    };
    let mut daemons = vec![switch];
    let sender_ctl = work.path(&format!("{tag}1.sock"));
    for (i, ns) in [&h1, &h2].into_iter().enumerate() {
        let me = format!("{tag}{}", i + 1);
        let conf = work.write_config(
            &format!("{me}.toml"),
            &format!("line_rate = \"{line}\"\nwire_overhead = false\ncatch_up = \"{catch_up}\"\n"),
        )?;
        let actl = work.path(&format!("{me}.sock"));
        let alog = work.path(&format!("{me}.log"));
        let ip = format!("10.78.{subnet}.{}/24", i + 1);
        let mut args: Vec<&OsStr> = vec![
            cfg.rp_agent.as_os_str(),
            "--uplink".as_ref(),
            "eth0".as_ref(),
            "--tap".as_ref(),
            "qcn0".as_ref(),
            "--tap-ip".as_ref(),
            ip.as_ref(),
            "--config".as_ref(),
            conf.as_os_str(),
            "--ctl".as_ref(),
            actl.as_os_str(),
        ];
        if !tap_offloads {
            args.push("--no-tap-offloads".as_ref());
        }
        let mut agent = ns.spawn_logged(&args, &alog)?;
        wait_for_socket(&mut agent, &actl, &alog)?;
        if !tap_offloads {
            // The TAP's offloads as the veths': off (features the tun driver fixes are
            // tolerated).
            ns.offloads_off("qcn0")?;
        }
        daemons.push(agent);
    }
    let server = iperf_server(cfg, &h2, work, tag)?;
    Ok(Built {
        client: h1,
        server_ip: format!("10.78.{subnet}.2"),
        _daemons: daemons,
        _server: server,
        switch_ctl: Some(ctl),
        sender_ctl: Some(sender_ctl),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_seconds() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(secs(Duration::from_millis(1500), 1), 2);
        assert_eq!(secs(Duration::ZERO, 1), 1);
        assert_eq!(secs(Duration::ZERO, 0), 0);
    }

    #[test]
    fn the_senders_port_early_share_is_read_when_measured() {
        let stats = |measured: u64, share: f64| {
            serde_json::json!({"ports": [
                {"name": "p1", "ingress": {"measured": measured, "early": 3, "early_share": share}},
                {"name": "p2", "ingress": {"measured": 50, "early": 50, "early_share": 1.0}},
            ]})
        };
        // The first port's (p1, towards the sender), not the receiver's.
        assert_eq!(sender_port_early_share(&stats(12, 0.25)), Some(0.25));
        // Nothing measured (an unshaped port): no share, not 0.
        assert_eq!(sender_port_early_share(&stats(0, 0.0)), None);
        assert_eq!(
            sender_port_early_share(&serde_json::json!({"ports": []})),
            None
        );
        assert_eq!(sender_port_early_share(&serde_json::json!({})), None);
    }

    #[test]
    fn the_senders_stage_is_read_from_the_first_port() {
        let stats = serde_json::json!({"ports": [
            {"ingress": {"stage": {"staged": 4, "held": 3, "delay_total_ns": 10_000,
                                   "delay_max_ns": 6_000, "overflow_drops": 1, "down_drops": 2}}},
            {"ingress": {"stage": null}},
        ]});
        // 10 000 ns over 4 frames: 2.5 us mean; 6 us max; 1 + 2 drops.
        let st = SenderStage::from_stats(&stats).unwrap();
        assert_eq!(
            st,
            SenderStage {
                staged: 4,
                held: 3,
                mean_delay_us: 2.5,
                max_delay_us: 6.0,
                drops: 3,
            }
        );
        // The stage off (null) or no ports: nothing.
        let off = serde_json::json!({"ports": [{"ingress": {"stage": null}}]});
        assert_eq!(SenderStage::from_stats(&off), None);
        assert_eq!(SenderStage::from_stats(&serde_json::json!({})), None);
        // Nothing staged yet: a zero mean, not a division by zero.
        let none = serde_json::json!({"ports": [{"ingress": {"stage": {"staged": 0}}}]});
        assert_eq!(SenderStage::from_stats(&none).unwrap().mean_delay_us, 0.0);
    }

    #[test]
    fn the_table_names_the_congestion_control_and_the_shaped_labs_feedback() {
        let r = AppReport {
            congestion: Some("cubic".into()),
            shaped: Some(PathRun {
                rounds: vec![Test {
                    gbps: 0.9,
                    retransmits: 2,
                }],
                median_gbps: 0.9,
                error: None,
            }),
            shaped_share: Some(0.9),
            shaped_cnms: 120,
            shaped_sender_cnms: 118,
            shaped_ingress_early: Some(0.125),
            shaped_stage: Some(SenderStage {
                staged: 1000,
                held: 40,
                mean_delay_us: 1.5,
                max_delay_us: 120.0,
                drops: 0,
            }),
            cpus: 2,
            ..AppReport::default()
        };
        let t = r.table();
        assert!(t.contains("iperf3 TCP (cubic)"), "{t}");
        assert!(t.contains("120 CNMs sent, 118 taken"), "{t}");
        assert!(t.contains("faster than their 10gbit link: 12.5 %"), "{t}");
        assert!(t.contains("goodput / bottleneck 0.900"), "{t}");
        assert!(
            t.contains("40 of 1000 frames held back, delay mean 1.5 us, max 120.0 us, 0 dropped"),
            "{t}"
        );
    }

    #[test]
    fn iperf_output_is_read_or_refused() {
        let ok =
            br#"{"end":{"sum_sent":{"retransmits":7},"sum_received":{"bits_per_second":2.5e9}}}"#;
        let t = parse_iperf(ok).unwrap();
        assert_eq!(t.gbps, 2.5);
        assert_eq!(t.retransmits, 7);
        let e = parse_iperf(br#"{"error":"unable to connect to server"}"#).unwrap_err();
        assert!(e.to_string().contains("unable to connect"), "{e}");
        assert!(parse_iperf(b"not json").is_err());
        assert!(parse_iperf(b"{}").is_err());
    }
}
