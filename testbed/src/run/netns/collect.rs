//! After a netns run: the generators' and sinks' reports, the iperf3 and incast clients'
//! outputs, the switches' traces and final statistics, read into the run data.
//!
//! * A generator's intervals give its CNMs, its offered rate and what it *should* have sent
//!   (`intended_bps`: a greedy generator owes the limiter's or the line's rate unless its
//!   agent pushed back; a patterned one its pattern's rate, capped), and for CBR the pacing
//!   error.
//! * Each switch port's ingress burst measure (its final `stats` → `ports[].ingress`): the
//!   frames that reached it faster than its link could have delivered them.
//! * A sink's reports are anchored at its first frame (its summary's `secs` before the stop)
//!   and follow each other by their `secs`; frames it counted lost that no switch dropped were
//!   lost in the kernel (a fidelity figure).
//! * iperf3: the receiver's intervals, anchored at the client's start, as the flow's goodput;
//!   incast: the `incast` flow's goodput per round.

use std::collections::BTreeMap;
use std::path::Path;

use cnm_proto::Bytes;
use rp_agent::gen::Pattern;
use serde_json::Value;

use super::super::world::Scaling;
use super::daemons::SinkProc;
use super::endpoints::{ClientProc, GenProc};
use crate::analysis::trace::{read_trace_file, TraceOptions};
use crate::analysis::{IngressBurst, IngressStage, RunData, SenderLateness};
use crate::run::{incast, iperf};
use crate::scenario::graph::Graph;
use crate::scenario::Scenario;
use crate::sim::topo::FlowKind;

/// iperf3 reports: each flow's goodput series (the receiver's intervals, anchored at the
/// client's start), the client's sending rate as `offered_bps`, retransmissions and losses as
/// notes.
pub fn collect_iperf(sc: &Scenario, run: &mut RunData, clients: &[ClientProc]) {
    for c in clients {
        let f = &sc.topo.flow[c.index];
        let name = f.name.clone().unwrap_or_else(|| format!("f{}", c.index));
        let text = std::fs::read_to_string(&c.out).unwrap_or_default();
        let r = match iperf::parse_report(&text) {
            Ok(r) => r,
            Err(e) => {
                run.warnings.push(format!("flow {name}: {e}"));
                continue;
            }
        };
        let mut note = format!(
            "flow {name}: iperf3 {} goodput {:.2} Mb/s ({} octets received, {} sent)",
            r.protocol,
            r.goodput_bps() / 1e6,
            r.received_bytes,
            r.sent_bytes
        );
        if let Some(x) = r.retransmits {
            note.push_str(&format!(", {x} retransmissions"));
        }
        if let (Some(l), Some(p)) = (r.lost_packets, r.packets) {
            note.push_str(&format!(", {l} of {p} datagrams lost"));
        }
        run.warnings.push(note);
        if let Some(fs) = run.flow_mut(&name) {
            for &(a, b, bytes) in &r.intervals {
                fs.push_interval(c.started_s + a, c.started_s + b, Bytes::new(bytes));
            }
            fs.offered_bps = Some(r.sent_bps());
        }
    }
}

/// Incast clients: the `incast` flow's goodput per round, rounds and octets per server as a
/// note (and `incast-N.jsonl` in the results directory).
pub fn collect_incast(sc: &Scenario, run: &mut RunData, clients: &[ClientProc]) {
    for c in clients {
        let text = std::fs::read_to_string(&c.out).unwrap_or_default();
        let r = incast::parse_client_output(&text);
        let inc = &sc.topo.incast[c.index];
        if let Some(fs) = run.flow_mut("incast") {
            for x in &r.rounds {
                fs.push_interval(
                    c.started_s + x.start_s,
                    c.started_s + x.start_s + x.secs,
                    Bytes::new(x.bytes),
                );
            }
        }
        let times: Vec<String> = r
            .rounds
            .iter()
            .map(|x| format!("{:.1}", x.secs * 1000.0))
            .collect();
        run.warnings.push(format!(
            "incast {}: {} servers, SRU {}, {} rounds completed, goodput {:.2} Mb/s; \
             round times (ms): [{}]; octets per server: {:?}{}",
            c.index,
            inc.servers.len(),
            inc.sru,
            r.rounds.len(),
            r.goodput_bps() / 1e6,
            times.join(", "),
            r.per_server,
            r.error.map(|e| format!("; error: {e}")).unwrap_or_default()
        ));
    }
}

/// The JSON document of `p` as `T` (the default when it is missing or does not parse: a
/// daemon that did not get to write it contributes nothing).
fn read_json_doc<T: serde::de::DeserializeOwned + Default>(p: &Path) -> T {
    std::fs::read_to_string(p)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// The document of `rp-agent gen --json` (the parts read here).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct GenDoc {
    intervals: Vec<GenInterval>,
    end: GenEnd,
}

/// One reporting interval of a generator.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct GenInterval {
    /// Start of the interval (seconds since the generator started).
    start: f64,
    /// Length of the interval.
    seconds: f64,
    /// All flows of the generator together.
    sum: GenSum,
    /// Its reaction points (limiters) at the interval's end.
    rps: Vec<GenRp>,
    /// CNMs the agent took in the interval.
    cnm_rx: u64,
    /// Times the agent's queue pushed back in the interval.
    backpressure: u64,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct GenSum {
    /// Sending rate (bit/s).
    bps: f64,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct GenRp {
    /// The limiter's current rate (bit/s; the line rate when released).
    cr_bps: Option<f64>,
}

/// A generator's totals.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct GenEnd {
    streams: Vec<GenStream>,
    /// Frames the generator handed to its agent that the agent still held when its drain
    /// ended (counted in the generator's frames, never sent).
    unsent: u64,
    /// How late its agent sent the frames (absent from older reports).
    tx_late: Option<GenLate>,
}

/// `end.tx_late` of a generator report.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct GenLate {
    frames: u64,
    p50_ns: u64,
    p99_ns: u64,
    max_ns: u64,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct GenStream {
    /// Rate over the flow's active time, first to last frame (bit/s).
    bps: Option<f64>,
}

/// The document of `rp-agent sink --json` (the parts read here).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct SinkDoc {
    intervals: Vec<SinkDocInterval>,
    end: SinkEnd,
}

/// One reporting interval of a sink: every flow seen so far.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct SinkDocInterval {
    /// Start and end (seconds since the sink started).
    start: f64,
    end: f64,
    streams: Vec<SinkStream>,
}

/// One flow of a sink's interval or totals.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct SinkStream {
    /// Source MAC of the flow.
    src: String,
    /// Octets received in the period.
    bytes: u64,
    /// Frames counted lost (in the period; in all, in the totals).
    lost: u64,
}

/// A sink's totals.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct SinkEnd {
    /// The sink's lifetime (seconds from its start to its stop).
    elapsed_s: f64,
    streams: Vec<SinkStream>,
    /// Frames the kernel dropped because the sink's receive ring was full.
    kernel_dropped: u64,
}

/// What the daemons wrote, read after they stopped.
#[derive(Debug)]
pub struct Outputs<'a> {
    /// The generators.
    pub gens: &'a [GenProc],
    /// The sinks.
    pub sinks: &'a [SinkProc],
    /// Each switch's final `stats`.
    pub stats: &'a BTreeMap<String, Value>,
    /// The monotonic clock (ns) at the schedule's start: the traces' time origin.
    pub t0_mono: u64,
    /// The bottleneck's (switch, port).
    pub bn: &'a Option<(String, String)>,
}

/// Generator and sink reports, traces and final statistics into `run`.
pub fn collect(
    sc: &Scenario,
    graph: &Graph,
    k: Scaling,
    run: &mut RunData,
    dir: &Path,
    o: &Outputs<'_>,
) {
    collect_gens(sc, graph, k, run, o.gens);
    let (lost_total, ring_drops) = collect_sinks(sc, graph, k, run, o.sinks);
    let stats = o.stats;
    // Frames the sinks missed that no switch dropped and no sink's ring dropped (those are
    // told per sink) were lost in the kernel on the way.
    let switch_drops: u64 = stats
        .values()
        .filter_map(|v| v["ports"].as_array())
        .flatten()
        .filter_map(|p| p["drops"].as_u64())
        .sum();
    collect_ingress(run, stats);
    if lost_total > switch_drops + ring_drops {
        run.fidelity.unexpected_drops.push((
            "outside the switches (veth, sockets)".into(),
            lost_total - switch_drops - ring_drops,
        ));
    }
    // Each switch's port names by number, for the congestion points' `cp_port`.
    for (sw, st) in stats {
        let mut ports: Vec<String> = Vec::new();
        for p in st["ports"].as_array().into_iter().flatten() {
            let (Some(i), Some(name)) = (p["index"].as_u64(), p["name"].as_str()) else {
                continue;
            };
            let Ok(i) = usize::try_from(i) else {
                continue;
            };
            if ports.len() <= i {
                ports.resize(i + 1, String::new());
            }
            ports[i] = name.to_string();
        }
        for (i, p) in ports.iter_mut().enumerate() {
            if p.is_empty() {
                *p = i.to_string();
            }
        }
        run.switch_ports.insert(sw.clone(), ports);
    }
    // Traces.
    for sw in &graph.switches {
        let p = dir.join(format!("trace-{sw}.jsonl"));
        if p.exists() {
            let t = read_trace_file(
                &p,
                &TraceOptions {
                    node: Some(sw.clone()),
                    t0_ns: o.t0_mono,
                },
            );
            run.absorb(t);
        }
    }
    if let (Some((sw, port)), Some(b)) = (o.bn, run.bottlenecks.first_mut()) {
        let st = stats.get(sw);
        let p = st
            .and_then(|v| v["ports"].as_array())
            .and_then(|ps| ps.iter().find(|x| x["name"] == port.as_str()));
        let idx = p.and_then(|x| x["index"].as_u64()).map(|i| i.to_string());
        let mut ports = vec![port.clone()];
        ports.extend(idx);
        let refs: Vec<&str> = ports.iter().map(String::as_str).collect();
        *b = b.clone().events_from(Some(sw), &refs);
        b.drops = p.and_then(|x| x["drops"].as_u64());
        b.pause_tx = st.and_then(|v| v["ports"].as_array()).map(|ps| {
            ps.iter()
                .filter_map(|x| x["pause_tx"].as_u64())
                .sum::<u64>()
        });
    }
    run.cnm_from_trace = false;
    run.warnings.push(format!(
        "netns run at time scale S = {} (rates ÷ S, loop times × S), schedule × {:.3}",
        k.rate_div, k.sched_mul
    ));
    // A simulator setting: the real hosts' timing is the machine's.
    let grids: Vec<&str> = (sc.topo.host.iter())
        .filter(|(_, h)| h.poll_grid.is_some())
        .map(|(n, _)| n.as_str())
        .collect();
    if !grids.is_empty() {
        run.warnings.push(format!(
            "note: poll_grid of {} applies in the simulator only (a twin runs with it)",
            grids.join(", ")
        ));
    }
}

/// Each switch port's ingress burst measure, from the switches' final `stats`.
fn collect_ingress(run: &mut RunData, stats: &BTreeMap<String, Value>) {
    for (sw, v) in stats {
        for p in v["ports"].as_array().into_iter().flatten() {
            let ing = &p["ingress"];
            let count = |k: &str| ing[k].as_u64().unwrap_or(0);
            if count("measured") == 0 {
                continue;
            }
            let port = format!("{sw} {}", p["name"].as_str().unwrap_or("?"));
            let st = &ing["stage"];
            let stage = st.is_object().then(|| {
                let n = |k: &str| st[k].as_u64().unwrap_or(0);
                IngressStage {
                    staged: n("staged"),
                    held: n("held"),
                    delay_total_ns: n("delay_total_ns"),
                    delay_max_ns: n("delay_max_ns"),
                    drops: n("overflow_drops") + n("down_drops"),
                    late: n("late"),
                    late_max_ns: n("late_max_ns"),
                    stamped: n("stamped"),
                    behind: n("behind"),
                    behind_max_ns: n("behind_max_ns"),
                }
            });
            // Frames the stage dropped never reached the bridge: drops outside the
            // congestion points' queues.
            if let Some(d) = stage.as_ref().map(|s| s.drops).filter(|d| *d > 0) {
                run.fidelity
                    .unexpected_drops
                    .push((format!("{port} ingress stage"), d));
            }
            run.fidelity.ingress.push(IngressBurst {
                port,
                measured: count("measured"),
                early: count("early"),
                longest_run: count("longest_run"),
                stage,
            });
        }
    }
}

/// Generators: offered rate, current rate of the limiter, CNMs, pacing error.
fn collect_gens(sc: &Scenario, graph: &Graph, k: Scaling, run: &mut RunData, gens: &[GenProc]) {
    let name_of = |i: usize| {
        sc.topo.flow[i]
            .name
            .clone()
            .unwrap_or_else(|| format!("f{i}"))
    };
    for g in gens {
        let f = &sc.topo.flow[g.flow];
        let name = name_of(g.flow);
        let doc: GenDoc = read_json_doc(&g.out);
        if doc.end.unsent > 0 {
            run.warnings.push(format!(
                "note: {name}: {} frames were still queued in its agent when the drain after \
                 the run ended (the reaction point's rate held them); the generator's count \
                 includes them, no link carried them",
                doc.end.unsent
            ));
        }
        let line_rate = graph
            .uplink(&f.src)
            .map(|li| k.rate(sc.topo.link[li].rate))
            .unwrap_or(0.0);
        if let Some(l) = &doc.end.tx_late {
            // The flow's frame with the agent's tags (802.1Q, CN-TAG: 8 octets) and the
            // line's FCS, preamble and gap (24), on the sender's line.
            let wire_bits = (f.frame_len as f64 + 32.0) * 8.0;
            let frame_time_ns = if line_rate > 0.0 {
                (wire_bits / line_rate * 1e9).round() as u64
            } else {
                0
            };
            // The switch end of the sender's uplink.
            let ingress_port = graph.uplink(&f.src).and_then(|li| {
                let l = &graph.links[li];
                [&l.a, &l.b]
                    .into_iter()
                    .find(|e| graph.is_switch(&e.node))
                    .map(|e| format!("{} {}", e.node, e.port))
            });
            run.fidelity.sender_lateness.push(SenderLateness {
                flow: name.clone(),
                late_frames: l.frames,
                p50_ns: l.p50_ns,
                p99_ns: l.p99_ns,
                max_ns: l.max_ns,
                frame_time_ns,
                ingress_port,
            });
        }
        // Generator flows only (TCP and UDP flows are iperf3's).
        let pattern: Option<Pattern> = match f.kind {
            FlowKind::Gen(p) => Some(p),
            FlowKind::Tcp | FlowKind::Udp(_) => None,
        };
        let (mut want_sum, mut secs_sum) = (0.0, 0.0);
        // What the intervals would owe with held-back ones not excused.
        let (mut owed_sum, mut held) = (0.0, false);
        let mut pacing = Vec::new();
        let Some(fs) = run.flow_mut(&name) else {
            continue;
        };
        for v in &doc.intervals {
            let secs = v.seconds;
            let t = g.started_s + v.start + secs;
            if v.cnm_rx > 0 {
                fs.push_cnm_count(t, v.cnm_rx);
            }
            let bps = v.sum.bps;
            // A greedy generator is short when it left the agent's queue empty (no
            // backpressure in the interval) while sending below the limiter's rate (or the
            // line rate when no limiter is engaged).
            let pressed = v.backpressure > 0;
            // Any generator held back by its reaction point (the agent's queue full:
            // backpressure) sent what the loop allowed; that is the experiment working, not a
            // shortfall. Otherwise a patterned generator owes its pattern's rate, capped by the
            // limiter and the line.
            let cr = v.rps.iter().filter_map(|r| r.cr_bps).reduce(f64::min);
            let cap = cr.unwrap_or(line_rate).min(line_rate);
            let owed = match pattern {
                Some(Pattern::Greedy) | None => cap,
                Some(Pattern::Cbr(r))
                | Some(Pattern::OnOff { rate: r, .. })
                | Some(Pattern::Poisson { rate: r, .. }) => k.rate(r).min(cap),
            };
            let want = if pressed { bps } else { owed };
            held |= pressed;
            want_sum += want * secs;
            owed_sum += owed * secs;
            secs_sum += secs;
            // Pacing of a CBR generator, measured where nothing else set its pace.
            if let Some(Pattern::Cbr(r)) = pattern {
                let r = k.rate(r);
                if !pressed && r > 0.0 && r <= cap {
                    pacing.push(((bps - r) / r).abs());
                }
            }
        }
        // The offered rate: over the flow's own active time, first to last frame.
        fs.offered_bps = doc.end.streams.first().and_then(|s| s.bps);
        if secs_sum > 0.0 {
            fs.intended_bps = Some(want_sum / secs_sum);
            if held {
                run.fidelity
                    .held_back
                    .push((name.clone(), owed_sum / secs_sum));
            }
        }
        if !pacing.is_empty() {
            let e = pacing.iter().sum::<f64>() / pacing.len() as f64;
            run.fidelity.pacing_error.push((name.clone(), e));
        }
    }
}

/// Sinks: each flow's received throughput; returns the frames the sinks counted lost and
/// those their kernel receive rings dropped.
fn collect_sinks(
    sc: &Scenario,
    graph: &Graph,
    k: Scaling,
    run: &mut RunData,
    sinks: &[SinkProc],
) -> (u64, u64) {
    let macs = sc.topo.host_macs();
    let name_of = |i: usize| {
        sc.topo.flow[i]
            .name
            .clone()
            .unwrap_or_else(|| format!("f{i}"))
    };
    let (mut lost_total, mut ring_drops) = (0u64, 0u64);
    for s in sinks {
        let (host, out, stop_s) = (&s.host, &s.out, s.stop_s);
        let doc: SinkDoc = read_json_doc(out);
        lost_total += doc.end.streams.iter().map(|v| v.lost).sum::<u64>();
        ring_drops += doc.end.kernel_dropped;
        if doc.end.kernel_dropped > 0 {
            run.fidelity.unexpected_drops.push((
                format!("receive ring of the sink on {host}"),
                doc.end.kernel_dropped,
            ));
        }
        let downlink = graph
            .uplink(host)
            .map(|li| k.rate(sc.topo.link[li].rate))
            .filter(|r| *r > 0.0);
        for iv in sink_intervals(&doc, stop_s, downlink) {
            let flow = sc.topo.flow.iter().enumerate().find(|(_, f)| {
                &f.dst == host
                    && macs
                        .get(&f.src)
                        .is_some_and(|m| m.to_string().to_ascii_lowercase() == iv.src)
            });
            if let Some((i, _)) = flow {
                if let Some(fs) = run.flow_mut(&name_of(i)) {
                    fs.push_interval(iv.from_s, iv.to_s, Bytes::new(iv.bytes));
                }
            }
        }
    }
    (lost_total, ring_drops)
}

/// One flow's octets over one reporting interval of a sink, on the schedule's clock.
#[derive(Debug, Clone, PartialEq)]
struct SinkInterval {
    /// Source MAC (lower case).
    src: String,
    from_s: f64,
    to_s: f64,
    bytes: u64,
}

/// A sink's interval reports on the schedule's clock.
///
/// The sink names each interval's start and end in seconds since it started, and its lifetime
/// (`end.elapsed_s`); it was stopped at `stop_s`, so it started at `stop_s − elapsed_s`.
///
/// A sink that was descheduled when traffic began finds a backlog in its receive ring and
/// counts it in the interval in which it drains it; when that interval is shorter than the time
/// its octets needed on the sink's own link (`downlink_bps`) — a short first interval showed
/// 28 Gb/s on a 1 Gb/s link — the first interval with octets is taken to start no later than
/// `octets × 8 / rate` before its end. The intervals after it are left as they are.
fn sink_intervals(doc: &SinkDoc, stop_s: f64, downlink_bps: Option<f64>) -> Vec<SinkInterval> {
    let origin = stop_s - doc.end.elapsed_s;
    let mut out = Vec::new();
    let mut first_busy: Option<(usize, usize)> = None;
    for iv in &doc.intervals {
        let at = out.len();
        for st in &iv.streams {
            out.push(SinkInterval {
                src: st.src.to_ascii_lowercase(),
                from_s: origin + iv.start,
                to_s: origin + iv.end,
                bytes: st.bytes,
            });
        }
        if first_busy.is_none() && iv.streams.iter().any(|s| s.bytes > 0) {
            first_busy = Some((at, out.len()));
        }
    }
    // The first interval with octets lasted at least as long as they needed on the link.
    if let (Some(rate), Some((a, b))) = (downlink_bps, first_busy) {
        let first = &mut out[a..b];
        let bytes: u64 = first.iter().map(|x| x.bytes).sum();
        let need = bytes as f64 * 8.0 / rate;
        if let Some(iv) = first.first() {
            let from = iv.to_s - need;
            if from < iv.from_s {
                for x in first.iter_mut() {
                    x.from_s = from;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(src: &str, bytes: u64) -> SinkStream {
        SinkStream {
            src: src.into(),
            bytes,
            lost: 0,
        }
    }

    fn interval(start: f64, end: f64, streams: Vec<SinkStream>) -> SinkDocInterval {
        SinkDocInterval {
            start,
            end,
            streams,
        }
    }

    #[test]
    fn a_backlog_drained_at_the_start_is_spread_over_its_arrival() {
        // Two flows into a 1 Gb/s sink link. The first interval lasted 1 ms by the sink's
        // clock but holds 3.5 MB: 28 Gb/s as reported, 28 ms at the link's rate. The second
        // interval (100 ms, 10 MB) is left as it is.
        // An empty interval before the traffic is left alone.
        let lines = SinkDoc {
            intervals: vec![
                interval(0.0, 0.5, vec![]),
                interval(
                    0.5,
                    0.501,
                    vec![
                        stream("02:00:00:00:01:00", 2_000_000),
                        stream("02:00:00:00:01:01", 1_500_000),
                    ],
                ),
                interval(
                    0.501,
                    0.601,
                    vec![
                        stream("02:00:00:00:01:00", 6_000_000),
                        stream("02:00:00:00:01:01", 4_000_000),
                    ],
                ),
            ],
            end: SinkEnd {
                elapsed_s: 0.601,
                ..SinkEnd::default()
            },
        };
        // Stopped at 1.101 s after 0.601 s: started at 0.5 s, the first octets counted in
        // the interval from 1.0 s.
        let got = sink_intervals(&lines, 1.101, Some(1e9));
        assert_eq!(got.len(), 4);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(got[0].from_s, 1.001 - 0.028), "{got:?}");
        assert!(close(got[1].from_s, 1.001 - 0.028), "{got:?}");
        assert!(close(got[0].to_s, 1.001) && close(got[1].to_s, 1.001));
        assert!(close(got[2].from_s, 1.001) && close(got[2].to_s, 1.101));
        assert_eq!(got[3].src, "02:00:00:00:01:01");
        // Both flows together never exceed the link in the first interval.
        let first: u64 = got[..2].iter().map(|x| x.bytes).sum();
        assert!(first as f64 * 8.0 / (got[0].to_s - got[0].from_s) <= 1e9 + 1.0);
        // Without a known rate, or when the interval was long enough, nothing moves.
        let plain = sink_intervals(&lines, 1.101, None);
        assert!(close(plain[0].from_s, 1.0));
        let slow = sink_intervals(&lines, 1.101, Some(100e9));
        assert!(close(slow[0].from_s, 1.0));
        assert!(sink_intervals(&SinkDoc::default(), 1.0, Some(1e9)).is_empty());
    }
}
