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
use crate::analysis::{IngressBurst, RunData};
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

/// The JSON lines of `p` that read as `T` (a line that does not is skipped).
fn read_json_lines<T: serde::de::DeserializeOwned>(p: &Path) -> Vec<T> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A line of `rp-agent gen --json`: an `interval` report or the `summary`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct GenLine {
    /// `interval` or `summary`.
    #[serde(rename = "type")]
    kind: String,
    /// Start of the interval (seconds since the generator started).
    start: f64,
    /// Length of the interval (or of the whole run).
    secs: f64,
    /// CNMs received so far.
    cnm_rx: u64,
    /// Sending rate (bit/s).
    bps: Option<f64>,
    /// Times the agent's queue pushed back so far.
    backpressure: u64,
    /// The limiter's current rate, when one is engaged (bit/s).
    cr_bps: Option<f64>,
}

/// A line of `rp-agent sink --json`: an `interval` report of one flow or the `summary`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct SinkLine {
    /// `interval` or `summary`.
    #[serde(rename = "type")]
    kind: String,
    /// Length of the interval (or of the whole run, from the first frame).
    secs: f64,
    /// Source MAC of the flow.
    src: String,
    /// Flow id.
    flow: u64,
    /// Octets received in the interval.
    bytes: u64,
    /// Frames counted lost (summary).
    lost: u64,
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
    let lost_total = collect_sinks(sc, graph, k, run, o.sinks);
    let stats = o.stats;
    // Frames the sinks missed that no switch dropped were lost in the kernel.
    let switch_drops: u64 = stats
        .values()
        .filter_map(|v| v["ports"].as_array())
        .flatten()
        .filter_map(|p| p["drops"].as_u64())
        .sum();
    collect_ingress(run, stats);
    if lost_total > switch_drops {
        run.fidelity.unexpected_drops.push((
            "outside the switches (veth, sockets)".into(),
            lost_total - switch_drops,
        ));
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
            run.fidelity.ingress.push(IngressBurst {
                port: format!("{sw} {}", p["name"].as_str().unwrap_or("?")),
                measured: count("measured"),
                early: count("early"),
                longest_run: count("longest_run"),
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
        let lines: Vec<GenLine> = read_json_lines(&g.out);
        let line_rate = graph
            .uplink(&f.src)
            .map(|li| k.rate(sc.topo.link[li].rate))
            .unwrap_or(0.0);
        // Generator flows only (TCP and UDP flows are iperf3's).
        let pattern: Option<Pattern> = match f.kind {
            FlowKind::Gen(p) => Some(p),
            FlowKind::Tcp | FlowKind::Udp(_) => None,
        };
        let mut cnm_prev = 0u64;
        let mut bp_prev = 0u64;
        let (mut want_sum, mut secs_sum) = (0.0, 0.0);
        // What the intervals would owe with held-back ones not excused.
        let (mut owed_sum, mut held) = (0.0, false);
        let mut pacing = Vec::new();
        let Some(fs) = run.flow_mut(&name) else {
            continue;
        };
        for v in &lines {
            let secs = v.secs;
            match v.kind.as_str() {
                "interval" => {
                    let t = g.started_s + v.start + secs;
                    let cnm = v.cnm_rx;
                    if cnm > cnm_prev {
                        fs.push_cnm_count(t, cnm - cnm_prev);
                    }
                    cnm_prev = cnm;
                    let bps = v.bps.unwrap_or(0.0);
                    // A greedy generator is short when it left the agent's queue empty
                    // (no backpressure in the interval) while sending below the limiter's
                    // rate (or the line rate when no limiter is engaged).
                    let bp = v.backpressure;
                    let pressed = bp > bp_prev;
                    bp_prev = bp;
                    // Any generator held back by its reaction point (the agent's queue full:
                    // backpressure) sent what the loop allowed; that is the experiment
                    // working, not a shortfall. Otherwise a patterned generator owes its
                    // pattern's rate, capped by the limiter and the line.
                    let cap = v.cr_bps.unwrap_or(line_rate).min(line_rate);
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
                "summary" => {
                    fs.offered_bps = v.bps;
                }
                _ => {}
            }
        }
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

/// Sinks: each flow's received throughput; returns the frames the sinks counted lost.
fn collect_sinks(
    sc: &Scenario,
    graph: &Graph,
    k: Scaling,
    run: &mut RunData,
    sinks: &[SinkProc],
) -> u64 {
    let macs = sc.topo.host_macs();
    let name_of = |i: usize| {
        sc.topo.flow[i]
            .name
            .clone()
            .unwrap_or_else(|| format!("f{i}"))
    };
    let mut lost_total = 0u64;
    for s in sinks {
        let (host, out, stop_s) = (&s.host, &s.out, s.stop_s);
        let lines: Vec<SinkLine> = read_json_lines(out);
        lost_total += lines
            .iter()
            .filter(|v| v.kind == "summary")
            .map(|v| v.lost)
            .sum::<u64>();
        let downlink = graph
            .uplink(host)
            .map(|li| k.rate(sc.topo.link[li].rate))
            .filter(|r| *r > 0.0);
        for iv in sink_intervals(&lines, stop_s, downlink) {
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
    lost_total
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

/// A sink's `interval` reports on the schedule's clock.
///
/// The reports are anchored at the sink's first frame (its summary's `secs` before
/// `stop_s`) and follow each other by their `secs`; the reports of one interval (one per flow)
/// share their `secs`.
///
/// The sink starts its first interval when it *processes* its first frame, not when that
/// frame arrived: a sink that was descheduled when traffic began finds a backlog in its
/// receive ring, drains it in a fraction of a millisecond and counts it all in a first
/// interval that may be far shorter than the time the frames took to arrive (a 1 Gb/s link
/// then showed 28 Gb/s at t = 0). The octets of that interval crossed the sink's own link
/// (`downlink_bps`), so they took at least `octets × 8 / rate`: the first interval starts no
/// later than that before its end. The intervals after it start where the previous one ended,
/// so a backlog there is counted over the time it took to build.
fn sink_intervals(lines: &[SinkLine], stop_s: f64, downlink_bps: Option<f64>) -> Vec<SinkInterval> {
    let span = lines
        .iter()
        .filter(|v| v.kind == "summary")
        .map(|v| v.secs)
        .fold(0.0, f64::max);
    let mut out = Vec::new();
    let mut t = stop_s - span;
    let mut group_secs = None::<f64>;
    let mut seen: Vec<(String, u64)> = Vec::new();
    let mut groups = 0usize;
    let mut first_group_end = 0;
    for v in lines.iter().filter(|v| v.kind == "interval") {
        let key = (v.src.to_ascii_lowercase(), v.flow);
        let secs = v.secs;
        if group_secs != Some(secs) || seen.contains(&key) {
            t += secs;
            group_secs = Some(secs);
            seen.clear();
            groups += 1;
        }
        if groups == 1 {
            first_group_end = out.len() + 1;
        }
        seen.push(key.clone());
        out.push(SinkInterval {
            src: key.0,
            from_s: t - secs,
            to_s: t,
            bytes: v.bytes,
        });
    }
    // The first interval lasted at least as long as its octets needed on the sink's link.
    let first = &mut out[..first_group_end];
    if let (Some(rate), Some(iv)) = (downlink_bps, first.first()) {
        let bytes: u64 = first.iter().map(|x| x.bytes).sum();
        let need = bytes as f64 * 8.0 / rate;
        let from = iv.to_s - need;
        if from < iv.from_s {
            for x in first.iter_mut() {
                x.from_s = from;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(kind: &str, secs: f64, src: &str, bytes: u64) -> SinkLine {
        SinkLine {
            kind: kind.into(),
            secs,
            src: src.into(),
            flow: 0,
            bytes,
            lost: 0,
        }
    }

    #[test]
    fn a_backlog_drained_at_the_start_is_spread_over_its_arrival() {
        // Two flows into a 1 Gb/s sink link. The first interval lasted 1 ms by the sink's
        // clock but holds 3.5 MB: 28 Gb/s as reported, 28 ms at the link's rate. The second
        // interval (100 ms, 10 MB) is left as it is.
        let lines = [
            line("interval", 0.001, "02:00:00:00:01:00", 2_000_000),
            line("interval", 0.001, "02:00:00:00:01:01", 1_500_000),
            line("interval", 0.1, "02:00:00:00:01:00", 6_000_000),
            line("interval", 0.1, "02:00:00:00:01:01", 4_000_000),
            line("summary", 0.101, "02:00:00:00:01:00", 8_000_000),
        ];
        // Stopped at 1.101 s: the first frame was processed at 1.0 s.
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
        assert!(sink_intervals(&[], 1.0, Some(1e9)).is_empty());
    }
}
