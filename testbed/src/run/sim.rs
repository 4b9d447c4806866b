//! Sim mode: the scenario in the deterministic simulator, unscaled (the papers' numbers).
//!
//! The simulation advances in steps of 1/500 of the run (at most 10 ms, at least 10 µs); after
//! each step the runner reads every flow's received octets at its sink, every host agent's CNM
//! counter and the bottleneck's transmitted octets. Queue occupancy and events (CNMs, drops,
//! PAUSE) come from the simulator's trace (`trace.jsonl`), read by the analysis.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use anyhow::Context;
use cnm_proto::{Duration, Instant};

use super::pcapfilter::{self, PcapFilter};
use super::progress::Progress;
use super::{skeleton, Mode, RunOptions, Scaling};
use crate::analysis::trace::{read_trace_file, TraceOptions};
use crate::analysis::{FlowSeries, RunData};
use crate::scenario::Scenario;
use crate::sim::engine::Direction;
use crate::sim::host::HostNode;

/// Runs `sc` in the simulator, writing `trace.jsonl` (and `bottleneck.pcap` with `--capture`)
/// into `dir`.
pub fn run(sc: &Scenario, opts: &RunOptions, dir: &Path) -> anyhow::Result<RunData> {
    let mut topo = sc.topo.clone();
    if let Some(s) = opts.seed {
        topo.seed = s;
    }
    let trace_path = dir.join("trace.jsonl");
    topo.output.trace = Some(trace_path.clone());
    topo.output.summary = None;
    topo.output.pcap.clear();
    // Captures: (link, file, CNMs only). Written through a filter that keeps the first 200 000
    // frames cut to 128 octets (the bottleneck) or only the CNMs (the first flow's uplink), so
    // that a 10 Gb/s run does not write gigabytes.
    let mut captures: Vec<(String, std::path::PathBuf, bool)> = Vec::new();
    if opts.capture {
        if let Some(b) = sc.bottleneck() {
            captures.push((b, dir.join("bottleneck.pcap"), false));
        }
        let shape = super::shape::Shape::of(&sc.topo);
        if let Some(li) = sc.topo.flow.first().and_then(|f| shape.uplink(&f.src)) {
            captures.push((shape.links[li].name.clone(), dir.join("cnms.pcap"), true));
        }
    }
    let (mut run, _shape) = skeleton(sc, Mode::Sim, Scaling::ONE, topo.seed);
    let (mut sim, built) = topo.build()?;
    let f = File::create(&trace_path).with_context(|| format!("{}", trace_path.display()))?;
    sim.trace_to(Box::new(BufWriter::with_capacity(1 << 16, f)));
    for (link, file, cnms) in &captures {
        if let Some(l) = sim.link_id(link) {
            let f = File::create(file).with_context(|| format!("{}", file.display()))?;
            let w = BufWriter::with_capacity(1 << 16, f);
            let w: Box<dyn std::io::Write> = if *cnms {
                Box::new(PcapFilter::new(w, pcapfilter::is_cnm, 256, u64::MAX))
            } else {
                Box::new(PcapFilter::new(w, pcapfilter::all, 128, 200_000))
            };
            sim.capture(l, w)?;
        }
    }
    let end = Instant::ZERO + topo.duration;
    let step = Duration::from_nanos((topo.duration.as_nanos() / 500).clamp(10_000, 10_000_000));
    let bn_link = sc.bottleneck().and_then(|b| sim.link_id(&b));
    let host_id = |name: &str| built.hosts.iter().find(|(n, _)| n == name).map(|x| x.1);
    // Per flow: previous cumulative (t, bytes); per host: previous CNM count.
    let mut prev: Vec<Option<(f64, u64)>> = vec![Some((0.0, 0)); built.flows.len()];
    let mut cnm_prev: std::collections::BTreeMap<String, u64> = Default::default();
    let mut bn_prev = (0.0, 0u64);
    let mut firsts: Vec<(String, String)> = Vec::new();
    for (name, _, src, ..) in &built.flows {
        if !firsts.iter().any(|f| &f.0 == src) {
            firsts.push((src.clone(), name.clone()));
        }
    }
    let mut incast: Option<(String, Option<(f64, u64)>)> = None;
    if let Some(inc) = topo.incast.first() {
        let mut fs = FlowSeries::new("incast", &[]);
        if let Some(b) = sc.bottleneck() {
            fs = FlowSeries::new("incast", &[b.as_str()]);
        }
        run.add_flow(fs);
        incast = Some((inc.client.clone(), Some((0.0, 0))));
    }
    let mut progress = Progress::new(
        &format!("sim {}", sc.name),
        topo.duration.as_secs_f64(),
        opts.quiet,
    );
    let wall = std::time::Instant::now();
    let mut t = Instant::ZERO;
    while t < end {
        if crate::signals::requested() {
            anyhow::bail!("interrupted");
        }
        t = (t + step).min(end);
        sim.run_until(t);
        let ts = t.as_secs_f64();
        let flows = crate::sim::cli::flow_summary(&sim, &built, t);
        for (i, (name, ..)) in built.flows.iter().enumerate() {
            let bytes = flows.get(i).and_then(|v| v["bytes"].as_u64()).unwrap_or(0);
            if let Some(fs) = run.flow_mut(name) {
                fs.push_cumulative(ts, cnm_proto::Bytes::new(bytes), &mut prev[i]);
            }
        }
        // CNMs received per host, credited to the host's first flow.
        for (src, name) in &firsts {
            let Some(h) = host_id(src).and_then(|id| sim.node::<HostNode>(id)) else {
                continue;
            };
            let n = h.agent().stats().cnm_rx;
            let before = cnm_prev.insert(src.clone(), n).unwrap_or(0);
            if n > before {
                if let Some(fs) = run.flow_mut(name) {
                    fs.push_cnm_count(ts, n - before);
                }
            }
        }
        if let Some((client, p)) = &mut incast {
            if let Some(h) = host_id(client).and_then(|id| sim.node::<HostNode>(id)) {
                let bytes = h
                    .sink()
                    .flows()
                    .map(|(_, c)| c.bytes)
                    .sum::<u64>()
                    .max(tcp_bytes(h, t));
                if let Some(fs) = run.flow_mut("incast") {
                    fs.push_cumulative(ts, cnm_proto::Bytes::new(bytes), p);
                }
            }
        }
        if let Some(l) = bn_link {
            let st = sim.link_stats(l, Direction::AtoB);
            let dt = ts - bn_prev.0;
            if dt > 0.0 {
                let bps = st.bytes.saturating_sub(bn_prev.1) as f64 * 8.0 / dt;
                if let Some(b) = run.bottlenecks.first_mut() {
                    b.tx_samples.push((ts, bps));
                }
            }
            bn_prev = (ts, st.bytes);
        }
        progress.set(ts);
    }
    progress.finish();
    sim.finish()?;
    let summary = sim.summary();
    std::fs::write(
        dir.join("sim-summary.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    // Drops at the bottleneck's switch (all its queues: the sim counts per switch).
    if let (Some(b), Some(l)) = (run.bottlenecks.first_mut(), bn_link) {
        if let Some((a, ap, _, _)) = sim.link_ends(l) {
            let node = sim.node_name(a).to_string();
            let port_idx = sim
                .bridge(a)
                .and_then(|br| br.port_id(ap))
                .map(|p| p.0.to_string());
            let mut ports = vec![ap.to_string()];
            ports.extend(port_idx);
            let refs: Vec<&str> = ports.iter().map(String::as_str).collect();
            *b = b.clone().events_from(Some(&node), &refs);
            if let Some(br) = sim.bridge(a) {
                let st = br.stats();
                if let Some(p) = st.ports.iter().find(|p| p.name == ap) {
                    b.pause_tx = Some(p.pause_tx);
                }
            }
        }
    }
    let trace = read_trace_file(&trace_path, &TraceOptions::default());
    run.absorb(trace);
    // Per-flow CNM counts come from the agents; do not count the trace's CNM events again.
    run.cnm_from_trace = false;
    run.warnings.push(format!(
        "simulated {:.3} s in {:.1} s of wall time",
        topo.duration.as_secs_f64(),
        wall.elapsed().as_secs_f64()
    ));
    Ok(run)
}

fn tcp_bytes(h: &HostNode, now: Instant) -> u64 {
    // Rounds completed × SRU × servers is not exposed; the goodput figure times the elapsed
    // time gives the received octets.
    h.tcp()
        .and_then(|t| t.client_goodput(now))
        .map(|(_, bps)| (bps * now.as_secs_f64() / 8.0) as u64)
        .unwrap_or(0)
}
