//! The mode-independent part of a run's [`RunData`]: what the scenario itself says about the
//! run before either world measures anything.
//!
//! * meta: name, mode, duration and steady-state window in the world's schedule, the time
//!   scale, Qeq (and its steps by parameter events) and Qhigh of the bottleneck's switch,
//!   markers for every event and every flow start and stop;
//! * links, both directions, with the capacity steps of the link-rate events;
//! * flows: paths from the [graph](crate::scenario::graph), activity, source MAC, FQCN
//!   weight, demand (patterned generators, UDP) and fair share (given, else computed by the
//!   analysis);
//! * the bottleneck and the key of its output queue.

use super::world::Scaling;
use super::{iperf, Mode};
use crate::analysis::{Bottleneck, FlowSeries, LinkSpec, Marker, QueueSeries, RunData, RunMeta};
use crate::scenario::graph::Graph;
use crate::scenario::Scenario;

/// The mode-independent part of a run's [`RunData`]: meta, links (both directions, with the
/// capacity steps of the events), flows (paths, activity, fair shares), bottleneck, markers.
pub fn skeleton(sc: &Scenario, mode: Mode, k: Scaling, seed: u64) -> (RunData, Graph) {
    let graph = sc.topo.graph();
    let mut run = RunData::new(meta(sc, &graph, mode, k, seed));
    add_links(sc, &graph, k, &mut run);
    add_flows(sc, &graph, mode, k, &mut run);
    if let Some(b) = sc.bottleneck() {
        if let Some(li) = graph.link_index(&b) {
            let l = &graph.links[li];
            let key = QueueSeries::key(Some(&l.a.node), &l.a.port, 3, "output");
            let bott = Bottleneck::new(&b, &b, Some(&key));
            run.add_bottleneck(bott);
        }
    }
    (run, graph)
}

/// Name, mode, schedule, window, Qeq and Qhigh of the bottleneck's switch, markers.
fn meta(sc: &Scenario, graph: &Graph, mode: Mode, k: Scaling, seed: u64) -> RunMeta {
    let duration = k.at(sc.topo.duration);
    let mut meta = RunMeta::new(&sc.name, mode.as_str(), duration, seed);
    meta.time_scale = k.rate_div;
    let (w0, w1) = sc.window_s();
    meta.steady_window = Some((w0 * k.sched_mul, w1 * k.sched_mul));
    let bn = sc.bottleneck();
    // Qeq and Qhigh of the bottleneck's switch.
    if let Some(li) = bn.as_deref().and_then(|b| graph.link_index(b)) {
        let sw = &graph.links[li].a.node;
        if let Some(spec) = sc.topo.switch.get(sw).and_then(|s| s.bridge.as_ref()) {
            let cfg = &spec.config;
            if cfg.cp.placement != cp_switch::Placement::Off {
                meta.q_eq_bytes = Some(cfg.cp.cp_queue_set_point.get());
            }
            if cfg.lossless.mode != cp_switch::config::LosslessMode::None {
                meta.q_high_bytes = Some(cfg.lossless.qhigh.get());
            }
        } else if sc.topo.switch.contains_key(sw) {
            let d = cp_switch::BridgeConfig::default();
            meta.q_eq_bytes = Some(d.cp.cp_queue_set_point.get());
        }
        // Qeq moved by parameter events of that switch.
        for ev in &sc.topo.event {
            if let crate::sim::topo::EventKind::Switch { switch, set } = ev.kind() {
                let qeq = set.patch.cp_queue_set_point;
                if let (true, Some(q)) = (switch == sw.as_str(), qeq) {
                    meta.q_eq_steps.push((k.at(ev.at), q.get()));
                }
            }
        }
        meta.q_eq_steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    // Every timed event: `sw0-r0 → 1gbit`, `sw0 cp_queue_set_point=20KB`, `h0 rp_mode=...`.
    for ev in sc.topo.event.iter().filter(|e| e.at < sc.topo.duration) {
        meta.markers.push(Marker {
            t_s: k.at(ev.at),
            label: ev.label(),
        });
    }
    for (i, f) in sc.topo.flow.iter().enumerate() {
        if f.start > cnm_proto::Duration::ZERO {
            let name = f.name.clone().unwrap_or_else(|| format!("f{i}"));
            meta.markers.push(Marker {
                t_s: k.at(f.start),
                label: format!("{name} starts"),
            });
        }
        if let Some(stop) = f.stop.filter(|s| *s < sc.topo.duration) {
            let name = f.name.clone().unwrap_or_else(|| format!("f{i}"));
            meta.markers.push(Marker {
                t_s: k.at(stop),
                label: format!("{name} stops"),
            });
        }
    }
    meta.markers.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    meta.rp_recovery_s = rp_recovery(sc, k);
    // The same window and recovery in scenario time: what the simulator's run holds.
    let (w0, w1) = sc.window_s();
    let own = (w1.min(sc.topo.duration.as_secs_f64()) - w0).max(0.0);
    meta.rp_recoveries_scenario = rp_recovery(sc, Scaling::ONE)
        .filter(|r| *r > 0.0)
        .map(|r| own / r);
    meta
}

/// The longest fast recovery (run time) of the reaction points that limit the scenario's
/// flows, when some switch sends CNMs (a congestion point placed and not explicit-rate) and
/// some flow's source runs a QCN-family reaction point
/// ([`crate::analysis::fidelity::rp_recovery_s`]). Parameter events later in the run are not
/// considered: the file's settings are the ones the window is judged against.
fn rp_recovery(sc: &Scenario, k: Scaling) -> Option<f64> {
    let cnms_sent = sc.topo.switch.values().any(|s| {
        let cfg = s.bridge_spec().config;
        cfg.cp.placement != cp_switch::Placement::Off
            && cfg.cp.mode != cp_switch::CpMode::ExplicitRate
    });
    if !cnms_sent {
        return None;
    }
    sc.topo
        .flow
        .iter()
        .filter_map(|f| {
            // The world supplies the line rate when the file does not; it does not matter here.
            let cfg = sc
                .topo
                .host
                .get(&f.src)
                .map(|h| h.agent_spec())
                .unwrap_or_default()
                .config;
            (!cfg.rp_mode.explicit_rate()).then(|| {
                crate::analysis::fidelity::rp_recovery_s(
                    cfg.rp.rpg_threshold,
                    cfg.rp.rpg_time_reset.as_secs_f64() * k.loop_mul,
                )
            })
        })
        .reduce(f64::max)
}

/// Both directions of every link, with the capacity steps of the link-rate events.
fn add_links(sc: &Scenario, graph: &Graph, k: Scaling, run: &mut RunData) {
    for (li, l) in sc.topo.link.iter().enumerate() {
        for fwd in [true, false] {
            let name = graph.hop_name((li, fwd));
            let mut spec = LinkSpec::new(&name, cnm_proto::Rate::from_f64(k.rate(l.rate)));
            for ev in &sc.topo.event {
                use crate::sim::topo::{DirSpec, EventKind};
                let EventKind::Link { link, dir, rate } = ev.kind() else {
                    continue;
                };
                let applies = *link == graph.links[li].name
                    && match dir {
                        DirSpec::Both => true,
                        DirSpec::AToB => fwd,
                        DirSpec::BToA => !fwd,
                    };
                if applies {
                    spec = spec.step(k.at(ev.at), cnm_proto::Rate::from_f64(k.rate(*rate)));
                }
            }
            run.add_link(spec);
        }
    }
}

/// Every flow: path, activity, source MAC, FQCN weight, demand, given fair share.
fn add_flows(sc: &Scenario, graph: &Graph, mode: Mode, k: Scaling, run: &mut RunData) {
    let macs = sc.topo.host_macs();
    // FQCN weights (by source MAC) of the switches running FQCN: the fair shares are then the
    // weighted max-min shares (QCN-REFERENCE §4.2).
    let fqcn_weights: Vec<(cnm_proto::wire::EthernetAddress, u32)> = sc
        .topo
        .switch
        .values()
        .filter_map(|s| s.bridge.as_ref())
        .map(|b| b.config.clone())
        .filter(|c| {
            c.cp.mode == cp_switch::CpMode::Fqcn && c.cp.placement != cp_switch::Placement::Off
        })
        .flat_map(|c| c.cp.fqcn_weights)
        .filter_map(|w| Some((w.mac?, w.weight)))
        .collect();
    for (i, f) in sc.topo.flow.iter().enumerate() {
        let name = f.name.clone().unwrap_or_else(|| format!("f{i}"));
        let path: Vec<String> = graph
            .path(&f.src, &f.dst)
            .unwrap_or_default()
            .into_iter()
            .map(|h| graph.hop_name(h))
            .collect();
        let refs: Vec<&str> = path.iter().map(String::as_str).collect();
        let mut fs = FlowSeries::new(&name, &refs)
            .active(k.at(f.start), f.stop.map(|s| k.at(s)))
            .at_host(&f.src, Some(0));
        if let Some(m) = macs.get(&f.src) {
            fs = fs.source_mac(&m.to_string());
            if let Some((_, w)) = fqcn_weights.iter().find(|(mac, _)| mac == m) {
                fs = fs.weight(f64::from(*w));
            }
        }
        {
            let kind = f.kind;
            use crate::sim::topo::FlowKind;
            use rp_agent::gen::Pattern;
            let demand = match kind {
                FlowKind::Gen(Pattern::Greedy) | FlowKind::Tcp => None,
                FlowKind::Gen(Pattern::Cbr(r)) => Some(k.rate(r)),
                FlowKind::Gen(Pattern::OnOff { rate, .. })
                | FlowKind::Gen(Pattern::Poisson { rate, .. }) => Some(k.rate(rate)),
                // Measured as goodput in netns (payload of the wire rate), as frames in sim.
                FlowKind::Udp(r) if mode == Mode::Netns => {
                    Some(iperf::udp_app_rate(k.rate(r), f.frame_len).0)
                }
                FlowKind::Udp(r) => Some(k.rate(r)),
            };
            if let Some(r) = demand {
                fs = fs.demand(cnm_proto::Rate::from_f64(r));
            }
        }
        if let Some(share) = sc.meta.fair_share.get(&name) {
            fs = fs.fair_share(cnm_proto::Rate::from_f64(k.rate(*share)));
        }
        run.add_flow(fs);
    }
}
