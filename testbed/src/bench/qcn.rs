//! `testbed bench qcn`: five measurements of the QCN loop on namespaces, printed side by side
//! (numbers only, nothing asserted).
//!
//! 1. **Reaction latency** — from the moment the congestion point sends a CNM to the moment the
//!    reaction point has applied the new rate. Topology `h1:eth0 — sw:p1 [cp-switch] sw:p2 —
//!    h2:eth0`, p2 shaped to 100 Mb/s, output CP on priority 3 (sample base 30 KB for many
//!    CNMs); `rp-agent` in h1 (line rate 1 Gb/s, TAP `qcn0`); a writer in h1 pushes frames for
//!    h2 into the TAP as fast as the agent takes them. Both daemons run with `--trace`: cp-switch
//!    writes an `"event":"cnm"` record per CNM and rp-agent a `"event":"cnm"` record once the
//!    decrease is applied, both stamped `at` in CLOCK_MONOTONIC nanoseconds of the same machine.
//!    Each switch CNM is paired with the first unused agent record at or after it that carries
//!    the same QntzFb (CNMs travel one FIFO path, so order is kept); the latency distribution
//!    is over the pairs (p50, p99, max).
//! 2. **Forwarding cost of CP sampling** — the forwarding benchmark's blaster and counter
//!    ([`super::blast`]) through `cp-switch --default-priority 3` (the blaster's untagged test
//!    frames are priority 3, a CNPV) with `--cp output` and with `--cp off`, interleaved for
//!    `rounds` rounds; the median of each and the ratio.
//! 3. **rp-agent throughput TAP → uplink** — `h1:qcn0 [rp-agent] h1:eth0 — h2:eth0` (a veth
//!    pair, no switch). A writer in h1 sends frames of [`AGENT_FRAME`] octets into
//!    the TAP, cycling over 1 or 64 destination MACs (the agent's flow key is (DA, priority), so
//!    that is 1 or 64 flows). Each flow is made rate-limited first: h2 answers the first frame
//!    of every flow with a CNM (QntzFb 1), which sets its limiter a little below
//!    `rpg_max_rate` ([`AGENT_LINE`] 10 Gb/s, max 9 Gb/s: far above what the agent forwards,
//!    so the figure is the agent's per-frame cost with every frame going through a limiter).
//!    A limiter is released when its rate climbs back to `rpg_max_rate` (802.1Q 32.14), which
//!    the byte counter would do within five expiries of 150 KB (a few milliseconds for one
//!    flow); the RP timer (60 s) and byte counter (`rpg_byte_reset` 1000 GB) are set so that
//!    neither expires during the run, and the row gives the flows still limited at the end of
//!    the window. Frames are counted at h2's end of the uplink (`rx_packets` of its veth).
//! 4. **Pacing error** — `h1 [rp-agent] h1:eth0 — h2:eth0` with the agent's line rate
//!    [`PACING_RATE`]: once with the TAP writer offering more than that (the agent's pacer
//!    sets the rate), once with `rp-agent gen` (greedy, [`AGENT_FRAME`]-octet frames: the
//!    generator's pacer). A thread in h2 reads the octets received on `eth0`
//!    (`/proc/thread-self/net/dev`) every [`PACING_WINDOW`], timing each read; each window's
//!    rate is its octets over its measured length, and its error is the distance from the
//!    target in percent. The report gives the mean, p50, p99 and largest error over the windows
//!    after the warm-up.
//!
//!    What the windows measure: a veth's receive octets are counted in the sender's context,
//!    when its `sendto` hands the frame to the pair (`veth_xmit`, drivers/net/veth.c), so they
//!    are counted at the pacer's own send, with no receive-side scheduling in between.
//!    The clock is CLOCK_MONOTONIC, stamped just before and after each read and taken at the
//!    midpoint, so a counter thread descheduled before or after a read shifts nothing; only
//!    a delay *inside* the read does, by at most half the read's length at each end. The
//!    longest read is reported as `read bound` (percent of a window): a window's error below
//!    it is not resolved. The counter thread runs at `SCHED_FIFO` [`COUNTER_PRIORITY`] when
//!    the kernel allows, so its reads are not what is measured. In the agent row the offered
//!    load is the TAP writer's, a time-shared thread of the bench: a window it starves shows
//!    as a shortfall of the agent.
//! 5. **Cost of the ingress link-rate stage** — part 2's blaster through `cp-switch --cp off`
//!    with both ports rated [`STAGE_RATE`] (the stage is on every frame's path but never holds
//!    one back), `--ingress-stage true` and `false` interleaved; medians and the ratio.
//!
//! Parts 1 and 4 run the daemons with `--sched fifo:50` unless told otherwise ([`Config::sched`],
//! `--sched other` for time-shared daemons) and, with [`Config::pin`], the switch on CPU 0 and
//! the agent or generator on the last CPU.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use cnm_proto::phy::{self, AfPacketConfig, AfPacketPort, Port};
use cnm_proto::wire::{build_cnm, walk, CnmParams, CpId, EthernetAddress};
use cnm_proto::Duration;
use serde::Serialize;
use serde_json::Value;

use super::blast::{self, Endpoint};
use super::lab::{cps_sum, ctl_json, line, other, pair, sleep, wait_for_socket, WorkDir};
use super::report::Measurement;
use super::BenchError;
use crate::netns::{self, Child, Lab, Namespace};

/// Frame size of the TAP writer (octets, as the host stack would hand them to the TAP).
pub const AGENT_FRAME: usize = 1000;
/// The agent's line rate in part 3.
pub const AGENT_LINE: &str = "10gbit";
/// The paced rate of part 4.
pub const PACING_RATE: &str = "1gbit";
/// [`PACING_RATE`] in bit/s.
pub const PACING_BPS: f64 = 1e9;
/// The window of part 4.
pub const PACING_WINDOW: std::time::Duration = std::time::Duration::from_millis(100);
/// `SCHED_FIFO` priority of part 4's counter thread (above any daemon's `--sched`
/// the bench passes).
pub const COUNTER_PRIORITY: u8 = 90;
/// Frame size of the sampling-cost blaster.
pub const SAMPLING_FRAME: usize = 1500;

/// Settings of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Traffic time of the latency part and measurement window of parts 2 and 3.
    pub duration: Duration,
    /// Warm-up before each window.
    pub warmup: Duration,
    /// Rounds of part 2 (each round measures `--cp output` then `--cp off`).
    pub rounds: usize,
    /// The cp-switch binary.
    pub cp_switch: PathBuf,
    /// The rp-agent binary.
    pub rp_agent: PathBuf,
    /// `--sched` of the daemons of parts 1 and 4 (switch, agent, generator; `None`: the
    /// default, time-shared).
    pub sched: Option<daemon_kit::sched::SchedPolicy>,
    /// Pin those daemons apart: the switch on CPU 0, the agent or generator on the last CPU.
    pub pin: bool,
    /// The parts to run (1-4).
    pub parts: Vec<u8>,
}

impl Config {
    /// The `--sched`/`--cpu` flags of a daemon of parts 1 and 4: `cpu` is where `pin` puts it.
    fn sched_flags(&self, cpu: usize) -> Vec<std::ffi::OsString> {
        let mut v = Vec::new();
        if let Some(p) = self.sched {
            v.push("--sched".into());
            v.push(p.to_string().into());
        }
        if self.pin {
            v.push("--cpu".into());
            v.push(cpu.to_string().into());
        }
        v
    }

    /// CPU of the agent or generator when pinned: the last one (the switch takes CPU 0).
    fn host_cpu() -> usize {
        std::thread::available_parallelism()
            .map_or(1, usize::from)
            .saturating_sub(1)
    }

    fn runs(&self, part: u8) -> bool {
        self.parts.is_empty() || self.parts.contains(&part)
    }
}

/// Part 1.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    /// CNMs the switch traced towards the agent.
    pub cnms_sent: usize,
    /// CNMs the agent traced as applied.
    pub cnms_applied: usize,
    /// Pairs (switch record, agent record) found.
    pub pairs: usize,
    /// Latency percentiles over the pairs, microseconds.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Smallest.
    pub min_us: f64,
    /// Largest.
    pub max_us: f64,
}

/// Part 2.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Sampling {
    /// Received frames/s per round with `--cp output`.
    pub cp_output_fps: Vec<f64>,
    /// Received frames/s per round with `--cp off`.
    pub cp_off_fps: Vec<f64>,
    /// Medians.
    pub cp_output_median_fps: f64,
    /// Median with `--cp off`.
    pub cp_off_median_fps: f64,
    /// `cp_output_median_fps / cp_off_median_fps`.
    pub ratio: f64,
    /// CP samples taken during the last `--cp output` round.
    pub samples: u64,
}

/// Part 5.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StageCost {
    /// Received frames/s per round with `--ingress-stage true`.
    pub stage_on_fps: Vec<f64>,
    /// Received frames/s per round with `--ingress-stage false`.
    pub stage_off_fps: Vec<f64>,
    /// Median with the stage.
    pub stage_on_median_fps: f64,
    /// Median without.
    pub stage_off_median_fps: f64,
    /// `stage_on_median_fps / stage_off_median_fps`.
    pub ratio: f64,
}

/// The ports' rate in part 5: above anything a veth pair carries, so the stage is on the path
/// of every frame but never delays one.
pub const STAGE_RATE: &str = "100gbit";

/// Part 3, one row.
#[derive(Debug, Clone, Serialize)]
pub struct AgentRow {
    /// Rate-limited flows.
    pub flows: usize,
    /// Flows the agent reported limited at the end of the window (none is limited anew during
    /// it: these were limited throughout).
    pub limited: usize,
    /// Frames/s at the far end of the uplink.
    pub fps: f64,
    /// Gb/s of those frames (uplink frames carry the 802.1Q tag and a CN-TAG: 8 octets more).
    pub gbps: f64,
    /// Frames/s the writer handed to the TAP.
    pub offered_fps: f64,
}

/// Part 4, one row.
#[derive(Debug, Clone, Serialize)]
pub struct PacingRow {
    /// `agent` (TAP writer through the agent) or `generator` (`rp-agent gen`).
    pub source: String,
    /// The rate the pacer was given, Gb/s.
    pub target_gbps: f64,
    /// Windows measured.
    pub windows: usize,
    /// Mean rate over the windows, Gb/s.
    pub mean_gbps: f64,
    /// Mean absolute error per window, percent of the target.
    pub mean_error_pct: f64,
    /// Median error per window.
    pub p50_error_pct: f64,
    /// 99th percentile of the error per window.
    pub p99_error_pct: f64,
    /// Largest error per window.
    pub max_error_pct: f64,
    /// The measurement's own uncertainty: the longest counter read (its two clock stamps
    /// apart) as a percent of the window. A window's two ends are each placed within half a
    /// read of the counter's true instant, so no window's error is known better than this.
    pub read_bound_pct: f64,
}

/// The whole report; a part that failed carries its error instead.
#[derive(Debug, Clone, Default, Serialize)]
pub struct QcnReport {
    /// Part 1.
    pub latency: Option<Latency>,
    /// Part 1's error.
    pub latency_error: Option<String>,
    /// Part 2.
    pub sampling: Option<Sampling>,
    /// Part 2's error.
    pub sampling_error: Option<String>,
    /// Part 3.
    pub agent: Vec<AgentRow>,
    /// Part 3's error.
    pub agent_error: Option<String>,
    /// fps(64 flows) / fps(1 flow).
    pub agent_ratio: Option<f64>,
    /// Part 4.
    pub pacing: Vec<PacingRow>,
    /// Part 4's errors.
    pub pacing_error: Option<String>,
    /// Part 5.
    pub stage: Option<StageCost>,
    /// Part 5's error.
    pub stage_error: Option<String>,
    /// CPUs of the machine.
    pub cpus: usize,
    /// The daemons' scheduling in parts 1 and 4 (`default`, or the `--sched`/`--cpu` given).
    pub sched: String,
}

impl QcnReport {
    /// The printed table.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "QCN benchmarks ({} CPUs; daemons of parts 1 and 4: {})",
            self.cpus, self.sched
        );
        if self.latency.is_some() || self.latency_error.is_some() {
            let _ = writeln!(
                s,
                "\n1. reaction latency (CP sends CNM -> agent applied rate)"
            );
        }
        match (&self.latency, &self.latency_error) {
            (Some(l), _) => {
                let _ = writeln!(
                    s,
                    "   CNMs sent {} applied {} paired {}: p50 {:.1} us  p99 {:.1} us  min {:.1} us  max {:.1} us",
                    l.cnms_sent, l.cnms_applied, l.pairs, l.p50_us, l.p99_us, l.min_us, l.max_us
                );
            }
            (None, Some(e)) => {
                let _ = writeln!(s, "   failed: {e}");
            }
            _ => {}
        }
        if self.sampling.is_some() || self.sampling_error.is_some() {
            let _ = writeln!(
                s,
                "\n2. cp-switch forwarding, {SAMPLING_FRAME} B priority-3 frames, CP on vs off"
            );
        }
        match (&self.sampling, &self.sampling_error) {
            (Some(m), _) => {
                let _ = writeln!(
                    s,
                    "   --cp output {:>10.0} fps (rounds {:?}, {} samples)\n   --cp off    {:>10.0} fps (rounds {:?})\n   ratio output/off {:.3}",
                    m.cp_output_median_fps,
                    m.cp_output_fps.iter().map(|x| x.round()).collect::<Vec<_>>(),
                    m.samples,
                    m.cp_off_median_fps,
                    m.cp_off_fps.iter().map(|x| x.round()).collect::<Vec<_>>(),
                    m.ratio
                );
            }
            (None, Some(e)) => {
                let _ = writeln!(s, "   failed: {e}");
            }
            _ => {}
        }
        if !self.agent.is_empty() || self.agent_error.is_some() {
            let _ = writeln!(
            s,
            "\n3. rp-agent TAP -> uplink, {AGENT_FRAME} B frames, rate-limited flows (line {AGENT_LINE})"
        );
        }
        for r in &self.agent {
            let _ = writeln!(
                s,
                "   {:>3} flows ({} limited): {:>10.0} fps  {:.3} Gb/s  (offered {:.0} fps)",
                r.flows, r.limited, r.fps, r.gbps, r.offered_fps
            );
        }
        if let Some(r) = self.agent_ratio {
            let _ = writeln!(s, "   ratio 64/1 flows {r:.3}");
        }
        if let Some(e) = &self.agent_error {
            let _ = writeln!(s, "   failed: {e}");
        }
        if !self.pacing.is_empty() || self.pacing_error.is_some() {
            let _ = writeln!(
                s,
                "\n4. pacing error at {PACING_RATE}, {} ms windows, {AGENT_FRAME} B frames",
                PACING_WINDOW.as_millis()
            );
        }
        for r in &self.pacing {
            let _ = writeln!(
                s,
                "   {:<9} {} windows: mean {:.4} Gb/s  error mean {:.2} %  p50 {:.2} %  p99 {:.2} %  max {:.2} %  (read bound {:.3} %)",
                r.source,
                r.windows,
                r.mean_gbps,
                r.mean_error_pct,
                r.p50_error_pct,
                r.p99_error_pct,
                r.max_error_pct,
                r.read_bound_pct
            );
        }
        if let Some(e) = &self.pacing_error {
            let _ = writeln!(s, "   failed: {e}");
        }
        if self.stage.is_some() || self.stage_error.is_some() {
            let _ = writeln!(
                s,
                "\n5. cp-switch ingress link-rate stage, {SAMPLING_FRAME} B frames, ports at {STAGE_RATE}, --cp off"
            );
        }
        match (&self.stage, &self.stage_error) {
            (Some(m), _) => {
                let _ = writeln!(
                    s,
                    "   stage on  {:>10.0} fps (rounds {:?})\n   stage off {:>10.0} fps (rounds {:?})\n   ratio on/off {:.3}",
                    m.stage_on_median_fps,
                    m.stage_on_fps.iter().map(|x| x.round()).collect::<Vec<_>>(),
                    m.stage_off_median_fps,
                    m.stage_off_fps.iter().map(|x| x.round()).collect::<Vec<_>>(),
                    m.ratio
                );
            }
            (None, Some(e)) => {
                let _ = writeln!(s, "   failed: {e}");
            }
            _ => {}
        }
        s
    }
}

/// Runs the three parts.
pub fn run(cfg: &Config) -> Result<QcnReport, BenchError> {
    if !netns::is_root() {
        return Err(BenchError::NotRoot);
    }
    let mut sched = cfg
        .sched
        .map_or("default".to_string(), |p| format!("--sched {p}"));
    if cfg.pin {
        sched.push_str(&format!(
            ", switch on CPU 0, agent/generator on CPU {}",
            Config::host_cpu()
        ));
    }
    let mut report = QcnReport {
        cpus: std::thread::available_parallelism().map_or(1, usize::from),
        sched,
        ..QcnReport::default()
    };
    if cfg.runs(1) {
        match latency(cfg) {
            Ok(l) => report.latency = Some(l),
            Err(BenchError::Interrupted(i)) => return Err(BenchError::Interrupted(i)),
            Err(e) => report.latency_error = Some(e.to_string()),
        }
    }
    if cfg.runs(2) {
        match sampling(cfg) {
            Ok(m) => report.sampling = Some(m),
            Err(BenchError::Interrupted(i)) => return Err(BenchError::Interrupted(i)),
            Err(e) => report.sampling_error = Some(e.to_string()),
        }
    }
    for flows in [1usize, 64].into_iter().filter(|_| cfg.runs(3)) {
        match agent_throughput(cfg, flows) {
            Ok(r) => report.agent.push(r),
            Err(BenchError::Interrupted(i)) => return Err(BenchError::Interrupted(i)),
            Err(e) => {
                report.agent_error = Some(format!("{flows} flows: {e}"));
                break;
            }
        }
    }
    if let [a, b] = report.agent.as_slice() {
        if a.fps > 0.0 {
            report.agent_ratio = Some(b.fps / a.fps);
        }
    }
    for source in ["agent", "generator"].into_iter().filter(|_| cfg.runs(4)) {
        match pacing(cfg, source) {
            Ok(r) => report.pacing.push(r),
            Err(BenchError::Interrupted(i)) => return Err(BenchError::Interrupted(i)),
            Err(e) => {
                let e = format!("{source}: {e}");
                match report.pacing_error.as_mut() {
                    Some(all) => *all = format!("{all}; {e}"),
                    None => report.pacing_error = Some(e),
                }
            }
        }
    }
    if cfg.runs(5) {
        match stage_cost(cfg) {
            Ok(m) => report.stage = Some(m),
            Err(BenchError::Interrupted(i)) => return Err(BenchError::Interrupted(i)),
            Err(e) => report.stage_error = Some(e.to_string()),
        }
    }
    Ok(report)
}

/// Frames the TAP writer hands to the kernel per `sendto` ([`tap_writer`]).
///
/// The kernel sends a flushed transmit ring in one go inside the syscall, about a microsecond
/// per frame into the TAP, and does not preempt it there: the writer keeps its CPU until the
/// batch is through, however urgent the task it woke. With 256 frames per flush that was
/// 235-245 µs, and on the agent's CPU it was the whole tail of the reaction latency: `perf
/// sched timehist` of part 1 showed the agent (SCHED_FIFO) woken by its CNM and then waiting
/// 0.18-0.20 ms for the writer's syscall to end, again and again, while its own iterations
/// took 20-30 µs. Sixteen frames bound that wait to about 16 µs; the writer still offers far
/// more than the agent's line rate (a syscall per sixteen frames).
const TAP_WRITER_BATCH: usize = 16;

/// Writes frames into the TAP `ifname` of `ns` (from the host side) until `stop`, cycling over
/// `dsts`, at most [`TAP_WRITER_BATCH`] per syscall; counts frames handed over in `sent`.
fn tap_writer(
    ns: &Namespace,
    ifname: &str,
    src: [u8; 6],
    dsts: &[[u8; 6]],
    stop: &AtomicBool,
    sent: &AtomicU64,
) -> Result<(), BenchError> {
    let role = "tap writer";
    if let Some(name) = ns.name() {
        phy::netns::enter(name).map_err(|source| BenchError::Io { role, source })?;
    }
    let cfg = AfPacketConfig {
        rx_blocks: 1,
        tx_blocks: 64,
        promiscuous: false,
        ..AfPacketConfig::default()
    };
    let mut port =
        AfPacketPort::open(ifname, &cfg).map_err(|source| BenchError::Port { role, source })?;
    let mut frames: Vec<Vec<u8>> = dsts
        .iter()
        .map(|d| {
            let mut f = vec![0u8; AGENT_FRAME];
            super::frame::build(&mut f, *d, src, 0x5143_4e31, super::frame::Kind::Data, 0);
            f
        })
        .collect();
    let mut seq = 0u64;
    let mut drain = |_: &[u8]| {};
    while !stop.load(Ordering::Relaxed) {
        let mut queued = 0;
        loop {
            let k = (seq % frames.len() as u64) as usize;
            let f = &mut frames[k];
            super::frame::set_seq(f, seq);
            if !port
                .send(f)
                .map_err(|source| BenchError::Port { role, source })?
            {
                break;
            }
            seq += 1;
            queued += 1;
            if queued >= TAP_WRITER_BATCH {
                break;
            }
        }
        port.flush()
            .map_err(|source| BenchError::Port { role, source })?;
        sent.store(seq, Ordering::Relaxed);
        port.recv_batch(64, &mut drain)
            .map_err(|source| BenchError::Port { role, source })?;
        if queued == 0 {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
    Ok(())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn read_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "cnm")
        .collect()
}

/// Part 1.
fn latency(cfg: &Config) -> Result<Latency, BenchError> {
    let lab = Lab::new("qlat")?;
    let work = WorkDir::new(&lab)?;
    let (h1, sw, h2) = line(&lab, ["h1", "sw", "h2"])?;
    let h2_mac = h2.mac("eth0")?;

    let sw_trace = work.path("sw.jsonl");
    let sw_ctl = work.path("sw.sock");
    let sw_log = work.path("sw.log");
    let sw_sched = cfg.sched_flags(0);
    let mut sw_args: Vec<&OsStr> = vec![
        cfg.cp_switch.as_os_str(),
        "--port".as_ref(),
        "p1".as_ref(),
        "--port".as_ref(),
        "p2,rate=100mbit".as_ref(),
        "--cp".as_ref(),
        "output".as_ref(),
        "--cp-sample-base".as_ref(),
        "30KB".as_ref(),
        "--trace".as_ref(),
        sw_trace.as_os_str(),
        "--ctl".as_ref(),
        sw_ctl.as_os_str(),
    ];
    sw_args.extend(sw_sched.iter().map(|a| a.as_os_str()));
    let mut switch = sw.spawn_logged(&sw_args, &sw_log)?;
    wait_for_socket(&mut switch, &sw_ctl, &sw_log)?;

    let a_trace = work.path("agent.jsonl");
    let (mut agent, _) = start_agent(
        cfg,
        &h1,
        &work,
        "line_rate = \"1gbit\"\n[rp]\nrpg_ai_rate = \"0.5mbit\"\nrpg_hai_rate = \"5mbit\"\nrpg_min_rate = \"1mbit\"\n",
        Some(&a_trace),
    )?;
    let tap_mac = h1.mac("qcn0")?;

    let stop = AtomicBool::new(false);
    let sent = AtomicU64::new(0);
    std::thread::scope(|s| -> Result<(), BenchError> {
        let w = s.spawn(|| tap_writer(&h1, "qcn0", tap_mac, &[h2_mac], &stop, &sent));
        let r = sleep((cfg.warmup + cfg.duration).to_std());
        stop.store(true, Ordering::Relaxed);
        w.join().map_err(|_| BenchError::Panicked("tap writer"))??;
        r
    })?;
    let _ = agent.stop(std::time::Duration::from_secs(3));
    let _ = switch.stop(std::time::Duration::from_secs(3));

    let tap = netns::format_mac(tap_mac);
    let sw_events: Vec<Value> = read_events(&sw_trace)
        .into_iter()
        .filter(|v| v["dst"] == tap.as_str())
        .collect();
    let a_events = read_events(&a_trace);
    let key = |v: &Value| Some((v["at"].as_u64()?, v["qntz_fb"].as_u64()?));
    let sent: Vec<(u64, u64)> = sw_events.iter().filter_map(key).collect();
    let applied: Vec<(u64, u64)> = a_events.iter().filter_map(key).collect();
    let mut lat = pair_latencies(&sent, &applied);
    lat.sort_by(f64::total_cmp);
    Ok(Latency {
        cnms_sent: sw_events.len(),
        cnms_applied: a_events.len(),
        pairs: lat.len(),
        p50_us: percentile(&lat, 0.5),
        p99_us: percentile(&lat, 0.99),
        min_us: lat.first().copied().unwrap_or(f64::NAN),
        max_us: lat.last().copied().unwrap_or(f64::NAN),
    })
}

/// Latencies in microseconds between CNMs sent `(at_ns, qntz_fb)` and CNMs applied
/// `(at_ns, qntz_fb)`, both in time order: each sent CNM is paired with the first unused applied
/// record at or after it, within [`PAIR_WINDOW_NS`], that carries the same QntzFb.
pub fn pair_latencies(sent: &[(u64, u64)], applied: &[(u64, u64)]) -> Vec<f64> {
    let mut used = vec![false; applied.len()];
    let mut lat = Vec::new();
    let mut first = 0;
    for &(t, q) in sent {
        while first < applied.len() && applied[first].0 < t {
            first += 1;
        }
        for (j, &(at, qa)) in applied.iter().enumerate().skip(first) {
            if at > t.saturating_add(PAIR_WINDOW_NS) {
                break;
            }
            if !used[j] && qa == q {
                used[j] = true;
                lat.push((at - t) as f64 / 1e3);
                break;
            }
        }
    }
    lat
}

/// Longest CNM latency considered a match (a larger gap means the CNM was lost).
pub const PAIR_WINDOW_NS: u64 = 100_000_000;

/// Blasts [`SAMPLING_FRAME`]-octet frames h1 → `cp-switch` → h2 in a fresh lab `lab`, through
/// one switch daemon per variant and round, the variants interleaved within each round (so a
/// slow stretch of the machine hits every variant alike). Each variant is `(label, extra
/// cp-switch arguments)`; `seen` gets the label, the measurement and the switch's control
/// socket while it still runs.
fn blast_variants(
    cfg: &Config,
    lab: &str,
    variants: &[(&str, &[&str])],
    seen: &mut dyn FnMut(&str, &Measurement, &Path),
) -> Result<(), BenchError> {
    let lab = Lab::new(lab)?;
    let work = WorkDir::new(&lab)?;
    let (h1, sw, h2) = line(&lab, ["h1", "sw", "h2"])?;
    let ep = |ns: &Namespace| -> Result<Endpoint, BenchError> {
        Ok(Endpoint {
            ns: ns.clone(),
            ifname: "eth0".to_owned(),
            mac: ns.mac("eth0")?,
        })
    };
    let (tx, rx) = (ep(&h1)?, ep(&h2)?);
    let spec = blast::Spec {
        size: SAMPLING_FRAME,
        warmup: cfg.warmup,
        window: cfg.duration,
    };
    for _ in 0..cfg.rounds.max(1) {
        for (label, extra) in variants {
            let ctl = work.path(&format!("sw-{label}.sock"));
            let log = work.path(&format!("sw-{label}.log"));
            let mut args: Vec<&OsStr> = vec![
                cfg.cp_switch.as_os_str(),
                "--port".as_ref(),
                "p1".as_ref(),
                "--port".as_ref(),
                "p2".as_ref(),
                "--ctl".as_ref(),
                ctl.as_os_str(),
            ];
            args.extend(extra.iter().map(OsStr::new));
            let mut child = sw.spawn_logged(&args, &log)?;
            wait_for_socket(&mut child, &ctl, &log)?;
            let m: Measurement = blast::measure(&tx, &rx, &spec)?;
            seen(label, &m, &ctl);
            let _ = child.stop(std::time::Duration::from_secs(3));
            let _ = std::fs::remove_file(&ctl);
        }
    }
    Ok(())
}

/// Part 2.
fn sampling(cfg: &Config) -> Result<Sampling, BenchError> {
    let mut out = Sampling::default();
    let variants: [(&str, &[&str]); 2] = [
        ("output", &["--default-priority", "3", "--cp", "output"]),
        ("off", &["--default-priority", "3", "--cp", "off"]),
    ];
    blast_variants(cfg, "qsmp", &variants, &mut |label, m, ctl| {
        if label == "output" {
            out.cp_output_fps.push(m.rx_fps);
            out.samples = cps_sum(&cfg.cp_switch, ctl, "samples");
        } else {
            out.cp_off_fps.push(m.rx_fps);
        }
    })?;
    out.cp_output_median_fps = median(&out.cp_output_fps);
    out.cp_off_median_fps = median(&out.cp_off_fps);
    out.ratio = out.cp_output_median_fps / out.cp_off_median_fps;
    Ok(out)
}

/// Part 5: the sampling part's blaster through `cp-switch --cp off` with both ports rated
/// [`STAGE_RATE`] (far above what a veth carries, so the stage never holds a frame back and
/// the difference is its own cost per frame), `--ingress-stage true` and `false` interleaved.
fn stage_cost(cfg: &Config) -> Result<StageCost, BenchError> {
    let mut out = StageCost::default();
    let with = |on: &'static str| -> [&'static str; 6] {
        [
            "--default-rate",
            STAGE_RATE,
            "--cp",
            "off",
            "--ingress-stage",
            on,
        ]
    };
    let (on, off) = (with("true"), with("false"));
    let variants: [(&str, &[&str]); 2] = [("true", &on), ("false", &off)];
    blast_variants(cfg, "qstg", &variants, &mut |label, m, _| {
        if label == "true" {
            out.stage_on_fps.push(m.rx_fps);
        } else {
            out.stage_off_fps.push(m.rx_fps);
        }
    })?;
    out.stage_on_median_fps = median(&out.stage_on_fps);
    out.stage_off_median_fps = median(&out.stage_off_fps);
    out.ratio = out.stage_on_median_fps / out.stage_off_median_fps;
    Ok(out)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn rx_packets(ns: &Namespace, ifname: &str) -> Result<u64, BenchError> {
    let text = ns.exec(&[
        "cat",
        &format!("/sys/class/net/{ifname}/statistics/rx_packets"),
    ])?;
    text.trim()
        .parse()
        .map_err(|_| other("counter", format!("rx_packets: {text:?}")))
}

/// Part 3 for `flows` flows.
fn agent_throughput(cfg: &Config, flows: usize) -> Result<AgentRow, BenchError> {
    let lab = Lab::new("qagt")?;
    let work = WorkDir::new(&lab)?;
    let (h1, h2) = pair(&lab)?;
    // Neither the RP timer nor the byte counter expires during the run: the rate a CNM set stays
    // below rpg_max_rate, so the limiter is never released (see the module documentation).
    let (mut agent, ctl) = start_agent(
        cfg,
        &h1,
        &work,
        &format!(
            "line_rate = \"{AGENT_LINE}\"\nmax_flows = 256\n[rp]\nrpg_max_rate = \"9gbit\"\nrpg_time_reset = \"60s\"\nrpg_byte_reset = \"1000GB\"\n"
        ),
        None,
    )?;
    let tap_mac = h1.mac("qcn0")?;
    let dsts: Vec<[u8; 6]> = (0..flows)
        .map(|i| [0x02, 0x71, 0x61, 0x67, (i >> 8) as u8, i as u8])
        .collect();

    // h2 answers the first frame of every flow with a CNM, until told to stop.
    let stop_cnm = Arc::new(AtomicBool::new(false));
    let cnm_thread = {
        let h2 = h2.clone();
        let stop = Arc::clone(&stop_cnm);
        let dsts = dsts.clone();
        std::thread::spawn(move || cnm_responder(&h2, &dsts, &stop))
    };
    let stop = AtomicBool::new(false);
    let sent = AtomicU64::new(0);
    let result = std::thread::scope(|s| -> Result<AgentRow, BenchError> {
        let w = s.spawn(|| tap_writer(&h1, "qcn0", tap_mac, &dsts, &stop, &sent));
        let measure = || -> Result<AgentRow, BenchError> {
            // Every flow limited (or give up after 5 s), then the warm-up, then the window.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            let mut limited = 0;
            while std::time::Instant::now() < deadline {
                limited = limited_flows(&cfg.rp_agent, &ctl);
                if limited >= flows {
                    break;
                }
                sleep(std::time::Duration::from_millis(100))?;
            }
            stop_cnm.store(true, Ordering::Relaxed);
            sleep(cfg.warmup.to_std())?;
            let (r0, s0, t0) = (
                rx_packets(&h2, "eth0")?,
                sent.load(Ordering::Relaxed),
                phy::clock::now(),
            );
            sleep(cfg.duration.to_std())?;
            let (r1, s1, t1) = (
                rx_packets(&h2, "eth0")?,
                sent.load(Ordering::Relaxed),
                phy::clock::now(),
            );
            let secs = t1.saturating_since(t0).as_secs_f64();
            let fps = r1.saturating_sub(r0) as f64 / secs;
            // Limited before the window and still at its end: limited throughout.
            let limited = limited.min(limited_flows(&cfg.rp_agent, &ctl));
            Ok(AgentRow {
                flows,
                limited,
                fps,
                gbps: fps * (AGENT_FRAME + 8) as f64 * 8.0 / 1e9,
                offered_fps: s1.saturating_sub(s0) as f64 / secs,
            })
        };
        let r = measure();
        stop.store(true, Ordering::Relaxed);
        w.join().map_err(|_| BenchError::Panicked("tap writer"))??;
        r
    });
    stop_cnm.store(true, Ordering::Relaxed);
    cnm_thread
        .join()
        .map_err(|_| BenchError::Panicked("cnm responder"))??;
    let _ = agent.stop(std::time::Duration::from_secs(3));
    result
}

/// Received octets of `ifname` from `/proc/thread-self/net/dev` (the calling thread's
/// namespace).
fn rx_octets(ifname: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev").ok()?;
    text.lines().find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        if name.trim() != ifname {
            return None;
        }
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// In `ns`, the rate received on `ifname` in consecutive windows of [`PACING_WINDOW`] for
/// `total` (bit/s per window, each over its measured length).
fn window_rates(
    ns: &Namespace,
    ifname: &str,
    total: std::time::Duration,
) -> Result<(Vec<f64>, f64), BenchError> {
    let role = "pacing counter";
    if let Some(name) = ns.name() {
        phy::netns::enter(name).map_err(|source| BenchError::Io { role, source })?;
    }
    // The counter's own timing must not be what is measured: a read delayed between its two
    // stamps widens the window's uncertainty (reported as the read bound). Above the daemons'
    // real-time priorities, the thread runs a few microseconds every window; where the
    // kernel refuses, the bound still reports what the reads cost.
    let _ = phy::process::set_policy(phy::process::Policy::Fifo(COUNTER_PRIORITY));
    // The longest read, seconds.
    let mut longest = 0f64;
    let mut read = || -> Result<(u64, f64), BenchError> {
        let t0 = phy::clock::now();
        let b =
            rx_octets(ifname).ok_or_else(|| other(role, format!("no counters for {ifname}")))?;
        let t1 = phy::clock::now();
        longest = longest.max(t1.as_nanos().saturating_sub(t0.as_nanos()) as f64 / 1e9);
        // The read's midpoint, in seconds.
        Ok((b, (t0.as_nanos() as f64 + t1.as_nanos() as f64) / 2e9))
    };
    let n = (total.as_secs_f64() / PACING_WINDOW.as_secs_f64()).floor() as usize;
    let mut rates = Vec::with_capacity(n);
    let (mut b0, mut t0) = read()?;
    let start = std::time::Instant::now();
    for i in 1..=n {
        let due = start + PACING_WINDOW * i as u32;
        if let Some(d) = due.checked_duration_since(std::time::Instant::now()) {
            sleep(d)?;
        }
        let (b1, t1) = read()?;
        if t1 > t0 {
            rates.push(b1.saturating_sub(b0) as f64 * 8.0 / (t1 - t0));
        }
        (b0, t0) = (b1, t1);
    }
    Ok((rates, longest / PACING_WINDOW.as_secs_f64() * 100.0))
}

/// The row of part 4 from the window rates.
pub fn pacing_row(source: &str, target_bps: f64, rates: &[f64], read_bound_pct: f64) -> PacingRow {
    let mut err: Vec<f64> = rates
        .iter()
        .map(|r| (r - target_bps).abs() / target_bps * 100.0)
        .collect();
    err.sort_by(f64::total_cmp);
    let n = rates.len().max(1) as f64;
    PacingRow {
        source: source.to_owned(),
        target_gbps: target_bps / 1e9,
        windows: rates.len(),
        mean_gbps: rates.iter().sum::<f64>() / n / 1e9,
        mean_error_pct: err.iter().sum::<f64>() / n,
        p50_error_pct: percentile(&err, 0.5),
        read_bound_pct,
        p99_error_pct: percentile(&err, 0.99),
        max_error_pct: err.last().copied().unwrap_or(f64::NAN),
    }
}

/// Part 4 for `source` (`agent` or `generator`).
fn pacing(cfg: &Config, source: &str) -> Result<PacingRow, BenchError> {
    let lab = Lab::new("qpac")?;
    let work = WorkDir::new(&lab)?;
    let (h1, h2) = pair(&lab)?;
    let h2_mac = h2.mac("eth0")?;
    let toml =
        format!("line_rate = \"{PACING_RATE}\"\nwire_overhead = false\ncatch_up = \"5ms\"\n");
    let total = cfg.warmup + cfg.duration;
    let windows = |skip: usize| -> Result<(Vec<f64>, f64), BenchError> {
        let (r, bound) = std::thread::scope(|s| {
            s.spawn(|| window_rates(&h2, "eth0", total.to_std()))
                .join()
                .map_err(|_| BenchError::Panicked("pacing counter"))
        })??;
        Ok((r.into_iter().skip(skip).collect(), bound))
    };
    let skip = (cfg.warmup.as_secs_f64() / PACING_WINDOW.as_secs_f64()).ceil() as usize;
    let host_sched = cfg.sched_flags(Config::host_cpu());
    let (rates, bound) = if source == "agent" {
        let (mut agent, _) = start_agent(cfg, &h1, &work, &toml, None)?;
        let tap_mac = h1.mac("qcn0")?;
        let stop = AtomicBool::new(false);
        let sent = AtomicU64::new(0);
        let r = std::thread::scope(|s| -> Result<(Vec<f64>, f64), BenchError> {
            let w = s.spawn(|| tap_writer(&h1, "qcn0", tap_mac, &[h2_mac], &stop, &sent));
            let r = windows(skip);
            stop.store(true, Ordering::Relaxed);
            w.join().map_err(|_| BenchError::Panicked("tap writer"))??;
            r
        });
        let _ = agent.stop(std::time::Duration::from_secs(3));
        r?
    } else {
        let conf = work.write_config("gen.toml", &toml)?;
        let log = work.path("gen.log");
        let dst = netns::format_mac(h2_mac);
        let size = AGENT_FRAME.to_string();
        let mut gen_args: Vec<&OsStr> = vec![
            cfg.rp_agent.as_os_str(),
            "gen".as_ref(),
            "--uplink".as_ref(),
            "eth0".as_ref(),
            "--config".as_ref(),
            conf.as_os_str(),
            "--dst".as_ref(),
            dst.as_ref(),
            "--size".as_ref(),
            size.as_ref(),
        ];
        gen_args.extend(host_sched.iter().map(|a| a.as_os_str()));
        let mut gen = h1.spawn_logged(&gen_args, &log)?;
        let r = windows(skip);
        let running = gen.is_running();
        let _ = gen.stop(std::time::Duration::from_secs(3));
        if !running {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(other("generator", format!("exited: {text}")));
        }
        r?
    };
    if rates.is_empty() {
        return Err(other("pacing counter", "no window measured"));
    }
    Ok(pacing_row(source, PACING_BPS, &rates, bound))
}

/// Flows of the agent whose limiter is engaged.
fn limited_flows(bin: &Path, ctl: &Path) -> usize {
    ctl_json(bin, ctl, &["show", "flows"])
        .and_then(|v| {
            v.as_array()
                .map(|a| a.iter().filter(|f| f["state"] != "released").count())
        })
        .unwrap_or(0)
}

/// In `ns`, answers the first frame seen for each of `dsts` with a CNM (QntzFb 1) to its
/// source, until `stop`.
fn cnm_responder(ns: &Namespace, dsts: &[[u8; 6]], stop: &AtomicBool) -> Result<(), BenchError> {
    let role = "cnm responder";
    if let Some(name) = ns.name() {
        phy::netns::enter(name).map_err(|source| BenchError::Io { role, source })?;
    }
    let mut port = AfPacketPort::open("eth0", &AfPacketConfig::default())
        .map_err(|source| BenchError::Port { role, source })?;
    let me = EthernetAddress([0x02, 0x71, 0x63, 0x70, 0, 1]);
    let mut answered = vec![false; dsts.len()];
    let mut out = [0u8; 128];
    while !stop.load(Ordering::Relaxed) {
        let mut pending: Vec<Vec<u8>> = Vec::new();
        port.recv_batch(256, &mut |f| {
            let Ok(info) = walk(f) else { return };
            let Some(k) = dsts.iter().position(|d| *d == info.dst.0) else {
                return;
            };
            if answered[k] {
                return;
            }
            let p = CnmParams {
                cp_mac: me,
                cpid: CpId::output(me, 1, 3),
                qntz_fb: 1,
                q_offset: 1,
                q_delta: 0,
                cnm_priority: 6,
                default_priority: 3,
                max_msdu: 64,
            };
            if let Ok(n) = build_cnm(f, &p, &mut out) {
                answered[k] = true;
                pending.push(out[..n].to_vec());
            }
        })
        .map_err(|source| BenchError::Port { role, source })?;
        for f in &pending {
            let _ = port
                .send(f)
                .map_err(|source| BenchError::Port { role, source })?;
        }
        port.flush()
            .map_err(|source| BenchError::Port { role, source })?;
        // Answer again later if a CNM was lost before the flow became limited.
        if answered.iter().all(|a| *a) {
            std::thread::sleep(std::time::Duration::from_millis(200));
            answered.iter_mut().for_each(|a| *a = false);
        } else {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    Ok(())
}

/// Starts `rp-agent` in `h1` on `eth0` with a TAP `qcn0` (brought up), the agent configuration
/// `toml`, a control socket and optionally a trace; returns the guard and the socket path once
/// the socket answers.
fn start_agent(
    cfg: &Config,
    h1: &Namespace,
    work: &WorkDir,
    toml: &str,
    trace: Option<&Path>,
) -> Result<(Child, PathBuf), BenchError> {
    let conf = work.write_config("agent.toml", toml)?;
    let ctl = work.path("agent.sock");
    let log = work.path("agent.log");
    let mut args: Vec<&OsStr> = vec![
        cfg.rp_agent.as_os_str(),
        "--uplink".as_ref(),
        "eth0".as_ref(),
        "--tap".as_ref(),
        "qcn0".as_ref(),
        "--config".as_ref(),
        conf.as_os_str(),
        "--ctl".as_ref(),
        ctl.as_os_str(),
    ];
    if let Some(t) = trace {
        args.extend(["--trace".as_ref(), t.as_os_str()]);
    }
    let sched = cfg.sched_flags(Config::host_cpu());
    args.extend(sched.iter().map(|a| a.as_os_str()));
    let mut agent = h1.spawn_logged(&args, &log)?;
    wait_for_socket(&mut agent, &ctl, &log)?;
    h1.set_up("qcn0")?;
    Ok((agent, ctl))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_in_order_by_qntz_fb() {
        let sent = [(1_000, 10), (2_000, 20), (3_000, 10), (500_000_000, 5)];
        // The CNM at 2 000 ns was lost (nothing applied with QntzFb 20) and the one at 0.5 s is
        // never applied; the record with QntzFb 7 matches nothing.
        let applied = [(1_040, 10), (3_100, 10), (3_200, 7)];
        assert_eq!(pair_latencies(&sent, &applied), vec![0.04, 0.1]);
        assert!(pair_latencies(&[], &applied).is_empty());
        assert!(pair_latencies(&sent, &[]).is_empty());
    }

    #[test]
    fn pacing_errors_per_window() {
        // Windows at 0.99, 1.00, 1.02 and 1.00 Gb/s against 1 Gb/s: errors 1, 0, 2, 0 %.
        let r = pacing_row("agent", 1e9, &[0.99e9, 1e9, 1.02e9, 1e9], 0.01);
        assert_eq!(r.windows, 4);
        assert!((r.mean_gbps - 1.0025).abs() < 1e-12);
        assert!((r.mean_error_pct - 0.75).abs() < 1e-9);
        assert!((r.max_error_pct - 2.0).abs() < 1e-9);
        assert!((r.p99_error_pct - 2.0).abs() < 1e-9);
        // Sorted errors 0, 0, 1, 2: the median is the rounded middle index (2), 1 %.
        assert!((r.p50_error_pct - 1.0).abs() < 1e-9);
        assert_eq!(r.read_bound_pct, 0.01);
        assert!(pacing_row("generator", 1e9, &[], 0.0)
            .max_error_pct
            .is_nan());
    }

    #[test]
    fn percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 51.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
