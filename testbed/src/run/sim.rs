//! Sim mode: the scenario in the deterministic simulator, unscaled (the papers' numbers).
//!
//! [`SimWorld`] is the simulator as a [`World`]: built from the topology
//! ([`crate::sim::topo::Topology::build_parts`]), it queues the whole schedule in virtual time
//! when it starts (link-rate and parameter events become engine actions at their instants; the
//! simulated hosts start and stop their flows themselves), then advances in ticks of 1/500 of
//! the run (at most 10 ms, at least 10 µs). After each tick the runner samples every flow's
//! received octets at its sink, every host agent's CNM counter and the bottleneck's
//! transmitted octets. Queue occupancy and events (CNMs, drops, PAUSE) come from the
//! simulator's trace (`trace.jsonl`), read by the analysis when the world finishes.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::Context;
use cnm_proto::{Duration, Instant};

use super::pcapfilter::{self, PcapFilter};
use super::world::{Action, Cadence, Timed, World};
use super::RunOptions;
use crate::analysis::trace::{read_trace_file, TraceOptions};
use crate::analysis::{FlowSeries, RunData};
use crate::scenario::Scenario;
use crate::sim::engine::{self, Direction, LinkId, Sim};
use crate::sim::host::HostNode;
use crate::sim::topo::Built;

/// A capture: link name, file, CNMs only.
type Capture = (String, PathBuf, bool);

/// The simulator as a world.
#[derive(Debug)]
pub struct SimWorld {
    sim: Sim,
    built: Built,
    /// Every `[[event]]` as an engine action, in file order.
    events: Vec<(Instant, engine::Action)>,
    trace_path: PathBuf,
    captures: Vec<Capture>,
    duration: Duration,
    end: Instant,
    step: Duration,
    t: Instant,
    bn_link: Option<LinkId>,
    /// Per flow: previous cumulative (t, bytes).
    prev: Vec<Option<(f64, u64)>>,
    /// Per host: previous CNM count.
    cnm_prev: BTreeMap<String, u64>,
    bn_prev: (f64, u64),
    /// (host, its first flow): the flow its CNMs are credited to.
    firsts: Vec<(String, String)>,
    /// The incast client and its previous cumulative sample.
    incast: Option<(String, Option<(f64, u64)>)>,
    dir: PathBuf,
    wall: std::time::Instant,
}

impl SimWorld {
    /// Builds the simulation of `sc` (seed from `opts`, else the file's). The run writes
    /// `trace.jsonl` (and with `--capture` `bottleneck.pcap`, `cnms.pcap`; with `--capture
    /// all` or a list of links `link-<LINK>.pcap` each, [`super::capture`]) into `dir`.
    pub fn build(
        sc: &Scenario,
        opts: &RunOptions,
        dir: &Path,
        run: &mut RunData,
    ) -> anyhow::Result<SimWorld> {
        let mut topo = sc.topo.clone();
        if let Some(s) = opts.seed {
            topo.seed = s;
        }
        topo.output.trace = None;
        topo.output.summary = None;
        topo.output.pcap.clear();
        // Captures: (link, file, CNMs only). Written through a filter that keeps the first
        // 200 000 frames cut to 128 octets (the bottleneck) or only the CNMs (the first flow's
        // uplink), so that a 10 Gb/s run does not write gigabytes.
        let mut captures = Vec::new();
        let graph = sc.topo.graph();
        for li in opts.capture.links(&graph) {
            let name = graph.links[li].name.clone();
            let file = super::capture::link_file(dir, &name);
            captures.push((name, file, false));
        }
        if opts.capture.bottleneck() {
            if let Some(b) = sc.bottleneck() {
                captures.push((b, dir.join("bottleneck.pcap"), false));
            }
        }
        if opts.capture.cnms() {
            if let Some(li) = sc.topo.flow.first().and_then(|f| graph.uplink(&f.src)) {
                captures.push((graph.links[li].name.clone(), dir.join("cnms.pcap"), true));
            }
        }
        let (sim, built, events) = topo.build_parts()?;
        let mut firsts: Vec<(String, String)> = Vec::new();
        for (name, _, src, ..) in &built.flows {
            if !firsts.iter().any(|f| &f.0 == src) {
                firsts.push((src.clone(), name.clone()));
            }
        }
        // An incast server's CNMs go to `incast`, as the netns run credits its TAP agent's
        // (`netns::cnm_flows`).
        for srv in topo.incast.iter().flat_map(|inc| &inc.servers) {
            if !firsts.iter().any(|f| &f.0 == srv) {
                firsts.push((srv.clone(), "incast".into()));
            }
        }
        let mut incast = None;
        if let Some(inc) = topo.incast.first() {
            let path: Vec<String> = sc.bottleneck().into_iter().collect();
            let refs: Vec<&str> = path.iter().map(String::as_str).collect();
            run.add_flow(FlowSeries::new("incast", &refs));
            incast = Some((inc.client.clone(), Some((0.0, 0))));
        }
        let bn_link = sc.bottleneck().and_then(|b| sim.link_id(&b));
        Ok(SimWorld {
            prev: vec![Some((0.0, 0)); built.flows.len()],
            sim,
            built,
            events,
            trace_path: dir.join("trace.jsonl"),
            captures,
            duration: topo.duration,
            end: Instant::ZERO + topo.duration,
            step: Duration::from_nanos((topo.duration.as_nanos() / 500).clamp(10_000, 10_000_000)),
            t: Instant::ZERO,
            bn_link,
            cnm_prev: BTreeMap::new(),
            bn_prev: (0.0, 0),
            firsts,
            incast,
            dir: dir.to_path_buf(),
            wall: std::time::Instant::now(),
        })
    }

    fn host(&self, name: &str) -> Option<&HostNode> {
        let id = self.built.hosts.iter().find(|(n, _)| n == name)?.1;
        self.sim.host(id)
    }

    /// Drops and PAUSE frames at the bottleneck's switch (all its queues: the simulator
    /// counts per switch).
    fn bottleneck_events(&self, run: &mut RunData) {
        let (Some(b), Some(l)) = (run.bottlenecks.first_mut(), self.bn_link) else {
            return;
        };
        let Some((a, ap, _, _)) = self.sim.link_ends(l) else {
            return;
        };
        let node = self.sim.node_name(a).to_string();
        let port_idx = self
            .sim
            .bridge(a)
            .and_then(|br| br.port_id(ap))
            .map(|p| p.0.to_string());
        let mut ports = vec![ap.to_string()];
        ports.extend(port_idx);
        let refs: Vec<&str> = ports.iter().map(String::as_str).collect();
        *b = b.clone().events_from(Some(&node), &refs);
        if let Some(br) = self.sim.bridge(a) {
            let st = br.stats();
            if let Some(p) = st.ports.iter().find(|p| p.name == ap) {
                b.pause_tx = Some(p.pause_tx);
            }
        }
    }
}

impl World for SimWorld {
    fn span(&self) -> f64 {
        self.end.as_secs_f64()
    }

    fn cadence(&self) -> Cadence {
        Cadence { sample_every: None }
    }

    /// Queues the link-rate and parameter events at their instants (in file order, as
    /// `testbed sim` does); the hosts start their flows themselves. Then the trace and the
    /// captures begin.
    fn start(&mut self, plan: &[Timed], _run: &mut RunData) -> anyhow::Result<bool> {
        let mut events: Vec<usize> = plan
            .iter()
            .filter_map(|t| match t.action {
                Action::Event(i) => Some(i),
                Action::StartFlow(_) | Action::StartIncast(_) => None,
            })
            .collect();
        events.sort_unstable();
        for i in events {
            if let Some((at, a)) = self.events.get(i) {
                self.sim.schedule(*at, a.clone());
            }
        }
        let f = File::create(&self.trace_path)
            .with_context(|| format!("{}", self.trace_path.display()))?;
        self.sim
            .trace_to(Box::new(BufWriter::with_capacity(1 << 16, f)));
        for (link, file, cnms) in &self.captures {
            if let Some(l) = self.sim.link_id(link) {
                let f = File::create(file).with_context(|| format!("{}", file.display()))?;
                let w = BufWriter::with_capacity(1 << 16, f);
                let w: Box<dyn std::io::Write> = if *cnms {
                    Box::new(PcapFilter::new(w, pcapfilter::is_cnm, 256, u64::MAX))
                } else {
                    Box::new(PcapFilter::new(w, pcapfilter::all, 128, 200_000))
                };
                self.sim.capture(l, w)?;
            }
        }
        self.wall = std::time::Instant::now();
        Ok(true)
    }

    fn advance(&mut self) -> anyhow::Result<f64> {
        self.t = (self.t + self.step).min(self.end);
        self.sim.run_until(self.t);
        Ok(self.t.as_secs_f64())
    }

    /// Never called: [`SimWorld::start`] queued the whole plan.
    fn apply(&mut self, _now: f64, _action: &Timed, _run: &mut RunData) -> anyhow::Result<()> {
        Ok(())
    }

    fn sample(&mut self, ts: f64, run: &mut RunData) -> anyhow::Result<()> {
        let t = self.t;
        let flows = crate::sim::cli::flow_reports(&self.sim, &self.built, t);
        for (i, (name, ..)) in self.built.flows.iter().enumerate() {
            let bytes = flows.get(i).map_or(0, |r| r.bytes);
            if let Some(fs) = run.flow_mut(name) {
                fs.push_cumulative(ts, cnm_proto::Bytes::new(bytes), &mut self.prev[i]);
            }
        }
        // CNMs received per host, credited to the host's first flow.
        for (src, name) in &self.firsts {
            let Some(h) = self.host(src) else {
                continue;
            };
            let n = h.agent().stats().cnm_rx;
            let before = self.cnm_prev.insert(src.clone(), n).unwrap_or(0);
            if n > before {
                if let Some(fs) = run.flow_mut(name) {
                    fs.push_cnm_count(ts, n - before);
                }
            }
        }
        if let Some((client, _)) = &self.incast {
            let bytes = self.host(client).map(|h| {
                h.sink()
                    .flows()
                    .map(|(_, c)| c.bytes)
                    .sum::<u64>()
                    .max(tcp_bytes(h, t))
            });
            if let (Some(bytes), Some((_, p))) = (bytes, &mut self.incast) {
                if let Some(fs) = run.flow_mut("incast") {
                    fs.push_cumulative(ts, cnm_proto::Bytes::new(bytes), p);
                }
            }
        }
        if let Some(l) = self.bn_link {
            let st = self.sim.link_stats(l, Direction::AtoB);
            let dt = ts - self.bn_prev.0;
            if dt > 0.0 {
                let bps = st.bytes.saturating_sub(self.bn_prev.1) as f64 * 8.0 / dt;
                if let Some(b) = run.bottlenecks.first_mut() {
                    b.tx_samples.push((ts, bps));
                }
            }
            self.bn_prev = (ts, st.bytes);
        }
        Ok(())
    }

    fn finish(mut self, run: &mut RunData) -> anyhow::Result<()> {
        self.sim.finish()?;
        let summary = self.sim.summary();
        std::fs::write(
            self.dir.join("sim-summary.json"),
            serde_json::to_string_pretty(&summary)?,
        )?;
        self.bottleneck_events(run);
        for (name, id) in &self.built.switches {
            if let Some(br) = self.sim.bridge(*id) {
                let ports = (0..br.num_ports())
                    .map(|i| {
                        let p = cp_switch::PortId(u16::try_from(i).unwrap_or(u16::MAX));
                        br.port_name(p)
                            .map_or_else(|| i.to_string(), str::to_string)
                    })
                    .collect();
                run.switch_ports.insert(name.clone(), ports);
            }
        }
        let trace = read_trace_file(&self.trace_path, &TraceOptions::default());
        run.absorb(trace);
        // Per-flow CNM counts come from the agents; do not count the trace's CNM events again.
        run.cnm_from_trace = false;
        run.meta.trace_clock = Some(crate::analysis::model::TraceClock::VIRTUAL);
        run.warnings.push(format!(
            "simulated {:.3} s in {:.1} s of wall time",
            self.duration.as_secs_f64(),
            self.wall.elapsed().as_secs_f64()
        ));
        Ok(())
    }
}

fn tcp_bytes(h: &HostNode, now: Instant) -> u64 {
    // Rounds completed × SRU × servers is not exposed; the goodput figure times the elapsed
    // time gives the received octets.
    h.tcp()
        .and_then(|t| t.client_goodput(now))
        .map(|(_, bps)| (bps * now.as_secs_f64() / 8.0) as u64)
        .unwrap_or(0)
}
