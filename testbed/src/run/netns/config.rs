//! The daemons' configuration files in netns mode, scaled by S (QCN-REFERENCE §5), built from
//! the scenario's typed settings ([`crate::scenario::settings`]) and written as TOML listing
//! only what differs from the configuration types' defaults.
//!
//! * [`switch_config`]: the `cp-switch --config` text of a switch: the scenario's bridge
//!   settings with every rate ÷ S and time × S (`BridgeSpec`'s `Scale`), the veth line
//!   emulation where the scenario gives none (no preamble/FCS/padding, 5 ms catch-up), static
//!   FDB entries from the [graph](crate::scenario::graph), one `[[port]]` per link with `rate`
//!   = link rate ÷ S and `delay`; a switch port towards a host carries the delay of *both*
//!   directions of the link (2 × delay × S: a veth pair has no delay of its own, and the
//!   feedback loop must see the simulator's round trip), ports between switches one direction
//!   each. Between two switches that both place frames by their departure stamps, each
//!   direction's delay sits in the receiving port's ingress stage instead (`ingress_delay`,
//!   `departure_stamps`), the sending port's catch-up stops at that lookahead (`catch_up`,
//!   see [`veth_agent_catch_up`]) and the sending port writes its shaper's departure into each
//!   generated frame (`stamp_departures`). With departure stamps (the default,
//!   `[switch.NAME] departure_stamps`) a host port
//!   carries those 2 × delay × S in its ingress stage (`ingress_delay`), none on its egress:
//!   every round trip through the switch stays the simulator's (a CNM's loop, a TCP flow's
//!   data and acknowledgements), and the stage gets the longest lookahead the link can give
//!   for the host's lagging process: at S = 10 on the dumbbell, 250 µs instead of 125 µs
//!   took the stamped frames that came too late from 0.55-0.74 % to 0.42-0.46 % (3 runs
//!   each). What moves is a one-way delay between hosts whose links' delays differ: frames
//!   from host A to host B take 2 × d_A instead of d_A + d_B (equal on the built-ins).
//! * [`agent_config`]: the `rp-agent --config` text of a host: its agent settings with every
//!   rate ÷ S and every time × S (`AgentSpec`'s `Scale`), the uplink's rate ÷ S and the host's
//!   MAC unless the scenario gives them, and the veth pacing defaults (no wire overhead; the
//!   agent's own catch-up × S, at most 5 ms and at most the lookahead its switch port gives
//!   the host's departure stamps: [`veth_agent_catch_up`]).
//! * [`agent_config_at`]: the same for a generator starting later, with the patch of every
//!   earlier host event applied and the uplink-rate changes folded in.

use std::path::Path;

use cnm_proto::{Duration, Rate, Scale};
use cp_switch::config::{ShaperConfig, StaticEntry};
use rp_agent::gen::Pattern;

use super::super::world::Scaling;
use crate::scenario::graph::Graph;
use crate::scenario::settings::{AgentGiven, AgentSpec};
use crate::scenario::Scenario;
use crate::sim::topo::EventKind;

/// The `--pattern` argument of a generator with its rates ÷ `s`.
pub fn scaled_pattern(p: &Pattern, s: f64) -> String {
    let r = |x: Rate| crate::scenario::scale_rate(x, s);
    match p {
        Pattern::Greedy => "greedy".into(),
        Pattern::Cbr(x) => format!("cbr:{}", r(*x)),
        Pattern::OnOff { rate, on } => format!("onoff:{},on={on}", r(*rate)),
        Pattern::Poisson { rate, mean, shape } => {
            format!("poisson:{},pareto-mean={mean},shape={shape}", r(*rate))
        }
    }
}

fn s(v: impl std::fmt::Display) -> toml::Value {
    toml::Value::String(v.to_string())
}

/// A daemon's pacing on a veth pair where the scenario says nothing (not scaled: a property
/// of the lab). A veth pair carries a frame's own octets, without preamble, FCS or padding, so
/// the rate a receiver measures on its interface is the configured rate; and a user-space
/// daemon on a busy machine is sometimes descheduled for a few milliseconds, which a 5 ms
/// catch-up absorbs at the cost of a short burst (as the daemons' own defaults without a
/// file).
const VETH_CATCH_UP: Duration = Duration::from_millis(5);

/// An agent's catch-up on veth where the scenario gives none: the agent's own default
/// (`AgentConfig::default().catch_up`, 200 µs) × S like every loop time, at most
/// [`VETH_CATCH_UP`], and at most `lookahead`, what the host's switch port can place of a
/// back-dated frame ([`stamp_lookahead`]).
///
/// Catch-up bounds the burst a pacer woken late may send: `catch_up × rate` octets. × S keeps
/// that burst what the agent allows on the emulated network itself (200 µs × 10 Gb/s =
/// 250 kB at any S), where the lab's fixed 5 ms let a host descheduled at S = 10 send 625 kB
/// at 1 Gb/s into the switch, which then cut every flow for it. Measured on an idle 2-CPU
/// machine (`testbed run dumbbell --mode netns --set scenario.scale=10 --twin`): in 3
/// alternating pairs, bottleneck utilization 0.944 / 0.917 / 0.936 with 2 ms against
/// 0.931 / 0.860 / 0.782 with 5 ms; over all runs, a median of 0.936 (9 runs) against 0.896
/// (6); 200 µs left the generators 5–8 % short. The cap keeps large S (20 ms at S = 100) at the
/// lab's descheduling allowance.
///
/// Since the hosts stamp their frames' departures, the switch places a frame where the
/// emulated link would have delivered it only if it arrives within its port's lookahead of
/// that departure; a frame back-dated further is placed on arrival, together with every
/// other one the late poll released. One hosts process serves every host, so one stall
/// back-dates every flow at once: at S = 10 on the dumbbell (2 ms catch-up, 250 µs
/// lookahead) a stall released about 2 ms of every flow's sending within 0.3 ms, the
/// bottleneck queue went from 36 kB to the full 150 kB with 40 drops, the CNMs sampled in it
/// carried QntzFb 38-63 and cut two flows from 216 Mb/s to 37-55 Mb/s, where standard QCN's
/// additive increase left them for the rest of the window (Jain 0.80; in another run the
/// bottleneck fell to 87 % utilization). A physical host never stalls: the burst is the
/// emulation's, so the catch-up stops at the lookahead, and a longer stall costs the flows
/// their sending time (a dip the fidelity check sees in the utilization) instead of a burst
/// the switch cannot place.
fn veth_agent_catch_up(loop_mul: f64, lookahead: Option<Duration>) -> Duration {
    let c = crate::scenario::scale_dur(rp_agent::AgentConfig::default().catch_up, loop_mul)
        .min(VETH_CATCH_UP);
    lookahead.map_or(c, |l| c.min(l))
}

/// The lookahead the switch port at the far end of `host`'s uplink gives the host's departure
/// stamps (its ingress stage holds both directions' delay, 2 × delay × S: see the module
/// docs), or `None` when that switch places the host's frames by their receive times.
fn stamp_lookahead(sc: &Scenario, host: &str, k: Scaling) -> Option<Duration> {
    let graph = sc.topo.graph();
    let li = graph.uplink(host)?;
    let l = graph.links.get(li)?;
    let peer = if l.a.node == host { &l.b } else { &l.a };
    let delay = sc.topo.link.get(li)?.delay;
    (graph.is_switch(&peer.node) && places_by_stamps(sc, &peer.node) && delay > Duration::ZERO)
        .then(|| host_port_stage(delay, k))
}

/// Whether switch `node` places arriving frames by their senders' departure stamps (its
/// `ingress_stage` and `departure_stamps` settings, both on by default).
fn places_by_stamps(sc: &Scenario, node: &str) -> bool {
    sc.topo
        .switch
        .get(node)
        .map_or(true, |x| x.ingress_stage && x.departure_stamps)
}

/// The delay a switch's port towards a host emulates for a host link of `delay`: both
/// directions' (2 × delay × S), all of it on the port's receiving side (see the module docs).
/// Where the switch places by stamps this is also their lookahead ([`stamp_lookahead`]).
fn host_port_stage(delay: Duration, k: Scaling) -> Duration {
    crate::scenario::scale_dur(delay, k.loop_mul * 2.0)
}

/// The switches' line emulation on veth (see [`VETH_CATCH_UP`]).
fn veth_line() -> ShaperConfig {
    ShaperConfig {
        wire_overhead: false,
        fcs: false,
        pad: false,
        catch_up: VETH_CATCH_UP,
    }
}

/// `value` as a TOML table listing only the settings that differ from `default`, the
/// configuration type's defaults: what a daemon reading it fills in is what was left out, and
/// a reader of the file sees what the scenario changed.
fn sparse_toml<T: serde::Serialize>(value: &T, default: &T) -> anyhow::Result<toml::Table> {
    fn diff(path: &str, v: &toml::Table, d: &toml::Table) -> anyhow::Result<toml::Table> {
        if let Some(k) = d.keys().find(|k| !v.contains_key(*k)) {
            // An unset `Option` whose default is set cannot be written by leaving it out.
            anyhow::bail!("{path}{k}: unset, and the default is set");
        }
        let mut out = toml::Table::new();
        for (k, x) in v {
            match (x, d.get(k)) {
                (_, Some(y)) if x == y => {}
                (toml::Value::Table(xt), Some(toml::Value::Table(yt))) => {
                    out.insert(
                        k.clone(),
                        toml::Value::Table(diff(&format!("{path}{k}."), xt, yt)?),
                    );
                }
                _ => {
                    out.insert(k.clone(), x.clone());
                }
            }
        }
        Ok(out)
    }
    diff(
        "",
        &toml::Table::try_from(value)?,
        &toml::Table::try_from(default)?,
    )
}

/// The `rp-agent --config` text of a host: [`agent_text`] of its `[host.X.agent]` settings.
pub fn agent_config(
    sc: &Scenario,
    host: &str,
    line_rate: Rate,
    k: Scaling,
) -> anyhow::Result<String> {
    let spec = sc
        .topo
        .host
        .get(host)
        .map(|h| h.agent_spec())
        .unwrap_or_default();
    agent_text(sc, host, &spec, line_rate, k)
}

/// The `rp-agent --config` text of a host with settings `spec`: every rate ÷ S and every
/// time × S (`AgentSpec`'s `Scale`: line rate, the RP rates, timer, adaptive byte counter's
/// time constant, explicit-rate timeout, idle timeout, a given catch-up), the line rate
/// `line_rate` ÷ S and the host's MAC unless the scenario gives them, and the veth pacing
/// defaults.
fn agent_text(
    sc: &Scenario,
    host: &str,
    spec: &AgentSpec,
    line_rate: Rate,
    k: Scaling,
) -> anyhow::Result<String> {
    // netns scales rates and loop times by the same S.
    let mut cfg = spec.scale(k.loop_mul).config_in(AgentGiven {
        line_rate: Some(line_rate.scale(k.loop_mul)),
        mac: sc.topo.host_macs().get(host).copied(),
        catch_up: Some(veth_agent_catch_up(
            k.loop_mul,
            stamp_lookahead(sc, host, k),
        )),
        wire_overhead: Some(false),
    });
    // The lab's hosts stamp their generated frames; a switch that trusts the stamps places
    // them by their departure (`cp-switch` `[[port]] departure_stamps`).
    cfg.departure_stamps = true;
    Ok(toml::to_string(&sparse_toml(
        &cfg,
        &rp_agent::AgentConfig::default(),
    )?)?)
}

/// The `[bridge]` table of a switch's configuration: its `[switch.X.bridge]` settings with
/// every rate ÷ S and time × S (`BridgeSpec`'s `Scale`: PAUSE quanta are 512 bit times at the
/// nominal rate, so ÷ S keeps their duration × S; the explicit-rate CP's interval and floor,
/// the ageing time, the watchdog and a given catch-up follow too), the veth line where the
/// scenario gives none, and the graph's static FDB entries.
fn bridge_config(
    sc: &Scenario,
    graph: &Graph,
    sw: &str,
    k: Scaling,
) -> anyhow::Result<toml::Table> {
    let spec = sc.topo.switch.get(sw);
    // netns scales rates and loop times by the same S.
    let mut bridge = spec
        .map(|x| x.bridge_spec())
        .unwrap_or_default()
        .scale(k.loop_mul)
        .config_on(&veth_line());
    if spec.map_or(true, |x| x.static_fdb) {
        let macs = sc.topo.host_macs();
        for (h, port) in graph.fdb(sw) {
            if let Some(m) = macs.get(&h) {
                bridge.fdb.static_entries.push(StaticEntry {
                    mac: *m,
                    vid: None,
                    port,
                });
            }
        }
    }
    sparse_toml(&bridge, &cp_switch::BridgeConfig::default())
}

/// The `cp-switch --config` text of a switch.
pub fn switch_config(
    sc: &Scenario,
    graph: &Graph,
    sw: &str,
    k: Scaling,
    ctl: &Path,
    trace: &Path,
    seed: u64,
) -> anyhow::Result<String> {
    let bridge = bridge_config(sc, graph, sw, k)?;
    let mut top = toml::Table::new();
    top.insert("ctl".into(), s(ctl.display()));
    top.insert("trace".into(), s(trace.display()));
    let ti = sc
        .topo
        .output
        .trace_interval
        .map(|d| crate::scenario::scale_dur(d, k.loop_mul))
        .unwrap_or(Duration::from_millis(1))
        .min(Duration::from_millis(5))
        .max(Duration::from_millis(1));
    top.insert("trace_interval".into(), s(ti));
    top.insert("seed".into(), toml::Value::Integer(seed as i64 & i64::MAX));
    let stage = sc.topo.switch.get(sw).map_or(true, |x| x.ingress_stage);
    top.insert("ingress_stage".into(), toml::Value::Boolean(stage));
    // Whether a switch places frames by their departure stamps (its ingress stage on and
    // `departure_stamps` not turned off).
    let stamps = places_by_stamps(sc, sw);
    let mut ports = Vec::new();
    // The shortest link delay any port holds in its ingress stage (zero: a port holds none).
    let mut least_ingress: Option<Duration> = None;
    for (li, l) in graph.links.iter().enumerate() {
        let link = &sc.topo.link[li];
        for (me, peer) in [(&l.a, &l.b), (&l.b, &l.a)] {
            if me.node != sw {
                continue;
            }
            let mut p = toml::Table::new();
            p.insert("name".into(), s(&me.port));
            p.insert(
                "rate".into(),
                s(crate::scenario::scale_rate(link.rate, k.rate_div)),
            );
            let d = crate::scenario::scale_dur(link.delay, k.loop_mul);
            // Stamps need a lookahead: a link without delay gives none, and its frames are
            // placed by their receive times.
            let stamps = stamps && d > Duration::ZERO;
            if graph.is_switch(&peer.node) {
                if stamps && places_by_stamps(sc, &peer.node) {
                    // Each direction's delay in the receiving switch's ingress stage, the
                    // lookahead for the sending switch's stamps (written as its shaper starts
                    // each frame): both switches' process timing leaves the link's.
                    p.insert("ingress_delay".into(), s(d));
                    p.insert("departure_stamps".into(), toml::Value::Boolean(true));
                    p.insert("stamp_departures".into(), toml::Value::Boolean(true));
                    // This port's late polls back-date its stamps no further than the peer's
                    // stage can place them (`veth_agent_catch_up` has the reason).
                    p.insert("catch_up".into(), s(d.min(VETH_CATCH_UP)));
                    least_ingress = Some(least_ingress.map_or(d, |x| x.min(d)));
                } else {
                    p.insert("delay".into(), s(d));
                    least_ingress = Some(Duration::ZERO);
                }
            } else if stamps {
                // Both directions' delay in the ingress stage, where it is the lookahead for
                // the host's departure stamps (twice the link's: see the module docs).
                let both = host_port_stage(link.delay, k);
                p.insert("ingress_delay".into(), s(both));
                p.insert("departure_stamps".into(), toml::Value::Boolean(true));
                least_ingress = Some(least_ingress.map_or(both, |x| x.min(both)));
            } else {
                p.insert("delay".into(), s(host_port_stage(link.delay, k)));
                least_ingress = Some(Duration::ZERO);
            }
            ports.push(toml::Value::Table(p));
        }
    }
    top.insert("port".into(), toml::Value::Array(ports));
    // The loop's wake quantum, where every port's stage holds a link delay of at least twice
    // it (the daemon refuses it otherwise: see `cp-switch`'s dataplane loop).
    let q = sc
        .topo
        .switch
        .get(sw)
        .map_or(crate::sim::topo::DEFAULT_WAKE_QUANTUM, |x| x.wake_quantum);
    if stage && q > Duration::ZERO && least_ingress.is_some_and(|d| d >= q + q) {
        top.insert("wake_quantum".into(), s(q));
    }
    top.insert("bridge".into(), toml::Value::Table(bridge));
    Ok(toml::to_string(&top)?)
}

/// The uplink rate of `host` (its first link; 1 Gb/s without one), as the runner uses it.
pub fn uplink_rate(sc: &Scenario, graph: &Graph, host: &str) -> Rate {
    graph
        .uplink(host)
        .map(|li| sc.topo.link[li].rate)
        .unwrap_or(Rate::from_gbps(1))
}

/// The `rp-agent --config` text of `host` for a generator starting at scenario time `start`:
/// [`agent_text`] of the host's settings with the patch of every host event at or before
/// `start` applied (in time order) and the uplink rate in force then.
pub fn agent_config_at(
    sc: &Scenario,
    host: &str,
    line_rate: Rate,
    k: Scaling,
    start: Duration,
) -> anyhow::Result<String> {
    let mut evs: Vec<_> = sc.topo.event.iter().filter(|e| e.at <= start).collect();
    evs.sort_by_key(|e| e.at);
    let mut spec = sc
        .topo
        .host
        .get(host)
        .map(|h| h.agent_spec())
        .unwrap_or_default();
    let mut line_rate = line_rate;
    for e in evs {
        match e.kind() {
            EventKind::Host { host: h, set } if h == host => spec.config.apply(&set.patch),
            // A rate change of the host's own uplink before the agent starts: the agent starts
            // at the new line rate (the runner tells running agents with `ctl set rate`).
            EventKind::Link { link, dir, rate } => {
                use crate::sim::topo::DirSpec;
                let sends = sc.topo.link.iter().any(|l| {
                    let name = l.name.clone().unwrap_or_else(|| format!("{}-{}", l.a, l.b));
                    name == *link
                        && ((l.a == host && matches!(dir, DirSpec::AToB | DirSpec::Both))
                            || (l.b == host && matches!(dir, DirSpec::BToA | DirSpec::Both)))
                });
                if sends {
                    line_rate = *rate;
                }
            }
            _ => {}
        }
    }
    agent_text(sc, host, &spec, line_rate, k)
}

#[cfg(test)]
mod tests {
    //! The typed writer against the table writer it replaced: for every shipped scenario (the
    //! built-ins, `scenarios/repro`, `scenarios/sim`), with and without the mode flags, every
    //! switch's and every host's configuration text must load (as the daemons load it) to the
    //! same settings as the text the table writer produced.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::run::modes::{self, CpModeArg, CulpritArg, ModeFlags, RpModeArg};

    /// The table writer as it was, reading the scenario's tables from [`Scenario::tree`].
    mod table_writer {
        use super::*;

        fn s(v: impl std::fmt::Display) -> toml::Value {
            toml::Value::String(v.to_string())
        }

        fn table_at(sc: &Scenario, kind: &str, node: &str, key: &str) -> toml::Table {
            sc.tree
                .get(kind)
                .and_then(|v| v.get(node))
                .and_then(|v| v.get(key))
                .and_then(|v| v.as_table())
                .cloned()
                .unwrap_or_default()
        }

        fn overlay(t: &mut toml::Table, a: &toml::Table, b: &toml::Table) {
            for (k, vb) in b {
                match (a.get(k), vb) {
                    (Some(va), _) if va == vb => {}
                    (Some(toml::Value::Table(ta)), toml::Value::Table(tb)) => {
                        let sub = t
                            .entry(k.clone())
                            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                        overlay(sub.as_table_mut().unwrap(), ta, tb);
                    }
                    _ => {
                        t.insert(k.clone(), vb.clone());
                    }
                }
            }
        }

        fn overlay_scaled<T: serde::Serialize>(t: &mut toml::Table, parsed: &T, scaled: &T) {
            let a = toml::Table::try_from(parsed).unwrap();
            let b = toml::Table::try_from(scaled).unwrap();
            overlay(t, &a, &b);
        }

        fn agent_text(
            sc: &Scenario,
            mut t: toml::Table,
            host: &str,
            line: Rate,
            k: Scaling,
        ) -> String {
            if !t.contains_key("line_rate") {
                t.insert("line_rate".into(), s(line));
            }
            if let Some(m) = sc.topo.host_macs().get(host) {
                t.entry("mac").or_insert_with(|| s(m));
            }
            let cfg: rp_agent::AgentConfig = t.clone().try_into().unwrap();
            let given_catch_up = t.contains_key("catch_up");
            overlay_scaled(&mut t, &cfg, &cfg.scale(k.loop_mul));
            t.entry("wire_overhead")
                .or_insert(toml::Value::Boolean(false));
            // Since the reference was frozen: the lab's hosts stamp their generated frames.
            t.insert("departure_stamps".into(), toml::Value::Boolean(true));
            if !given_catch_up {
                // Since the reference was frozen: the agents' catch-up follows S, up to the
                // lookahead of the host's switch port.
                let c = veth_agent_catch_up(k.loop_mul, stamp_lookahead(sc, host, k));
                t.insert("catch_up".into(), s(c));
            }
            toml::to_string(&t).unwrap()
        }

        fn merge_rp(agent: &mut toml::Table, set: &toml::Table) {
            for (k, v) in set {
                let k = k.strip_prefix("rp.").unwrap_or(k);
                if k == rp_agent::config::RP_MODE_KEY {
                    agent.insert(k.to_string(), v.clone());
                } else {
                    let rp = agent
                        .entry("rp")
                        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                    rp.as_table_mut().unwrap().insert(k.to_string(), v.clone());
                }
            }
        }

        pub fn agent_at(
            sc: &Scenario,
            host: &str,
            line: Rate,
            k: Scaling,
            start: Duration,
        ) -> String {
            let mut t = table_at(sc, "host", host, "agent");
            let mut evs: Vec<_> = sc.topo.event.iter().filter(|e| e.at <= start).collect();
            evs.sort_by_key(|e| e.at);
            let mut line = line;
            for e in evs {
                match e.kind() {
                    EventKind::Host { host: h, set } if h == host => {
                        merge_rp(&mut t, &daemon_kit::patch::table(&set.operands));
                    }
                    EventKind::Link { link, dir, rate } => {
                        use crate::sim::topo::DirSpec;
                        let sends = sc.topo.link.iter().any(|l| {
                            let name = l.name.clone().unwrap_or_else(|| format!("{}-{}", l.a, l.b));
                            name == *link
                                && ((l.a == host && matches!(dir, DirSpec::AToB | DirSpec::Both))
                                    || (l.b == host
                                        && matches!(dir, DirSpec::BToA | DirSpec::Both)))
                        });
                        if sends {
                            line = *rate;
                        }
                    }
                    _ => {}
                }
            }
            agent_text(sc, t, host, line, k)
        }

        /// The `[bridge]` table of the switch's text (the rest of the file is not typed).
        pub fn bridge(sc: &Scenario, graph: &Graph, sw: &str, k: Scaling) -> String {
            let mut bridge = table_at(sc, "switch", sw, "bridge");
            let given_shaper = bridge
                .get("shaper")
                .and_then(|v| v.as_table())
                .cloned()
                .unwrap_or_default();
            let parsed: cp_switch::BridgeConfig = bridge.clone().try_into().unwrap();
            overlay_scaled(&mut bridge, &parsed, &parsed.scale(k.loop_mul));
            let mut shaper = bridge
                .get("shaper")
                .and_then(|v| v.as_table())
                .cloned()
                .unwrap_or_default();
            for (key, v) in [
                ("wire_overhead", toml::Value::Boolean(false)),
                ("fcs", toml::Value::Boolean(false)),
                ("pad", toml::Value::Boolean(false)),
                ("catch_up", s("5ms")),
            ] {
                if !given_shaper.contains_key(key) {
                    shaper.insert(key.into(), v);
                }
            }
            bridge.insert("shaper".into(), toml::Value::Table(shaper));
            if sc.topo.switch.get(sw).map_or(true, |x| x.static_fdb) {
                let macs = sc.topo.host_macs();
                let mut fdb = bridge
                    .get("fdb")
                    .and_then(|v| v.as_table())
                    .cloned()
                    .unwrap_or_default();
                let mut entries = fdb
                    .get("static_entries")
                    .and_then(|v| v.as_array())
                    .cloned()
                    .unwrap_or_default();
                for (h, port) in graph.fdb(sw) {
                    if let Some(m) = macs.get(&h) {
                        let mut e = toml::Table::new();
                        e.insert("mac".into(), s(m));
                        e.insert("port".into(), s(port));
                        entries.push(toml::Value::Table(e));
                    }
                }
                fdb.insert("static_entries".into(), toml::Value::Array(entries));
                bridge.insert("fdb".into(), toml::Value::Table(fdb));
            }
            toml::to_string(&bridge).unwrap()
        }
    }

    /// Every shipped scenario, as loaded and with a few mode flags applied.
    fn shipped() -> Vec<Scenario> {
        let mut specs: Vec<String> = crate::scenario::list()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        for sub in ["", "repro", "sim"] {
            let mut files: Vec<_> = std::fs::read_dir(root.join(sub))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            files.sort();
            specs.extend(files.iter().map(|p| p.display().to_string()));
        }
        let flags = [
            ModeFlags::default(),
            ModeFlags {
                cp_mode: Some(CpModeArg::Fqcn),
                culprit: None,
                rp_mode: Some(RpModeArg::AdaptiveBcQcnBs),
            },
            ModeFlags {
                cp_mode: Some(CpModeArg::Qcn),
                culprit: Some(CulpritArg::OccupancyRandom),
                rp_mode: Some(RpModeArg::QcnBs),
            },
        ];
        let mut out = Vec::new();
        for spec in specs {
            let sc = crate::scenario::load(&spec, &[]).unwrap_or_else(|e| panic!("{spec}: {e}"));
            for f in &flags {
                // Combinations the mode check refuses are not run.
                if let Ok(v) = modes::apply(&sc, f) {
                    out.push(v);
                }
            }
        }
        out
    }

    /// A switch file's `[bridge]` as the daemon reads it, and the rest of the file.
    fn switch_parts(text: &str) -> (String, toml::Table) {
        let mut top: toml::Table = text.parse().unwrap();
        let bridge = top.remove("bridge").unwrap();
        let cfg: cp_switch::BridgeConfig = bridge.try_into().unwrap();
        (format!("{cfg:?}"), top)
    }

    fn agent_settings(text: &str) -> String {
        let cfg: rp_agent::AgentConfig = toml::from_str(text).unwrap();
        format!("{cfg:?}")
    }

    #[derive(serde::Serialize)]
    struct Inner {
        a: u32,
        b: Option<Duration>,
    }

    #[derive(serde::Serialize)]
    struct Outer {
        x: bool,
        list: Vec<u32>,
        inner: Inner,
    }

    #[test]
    fn the_agents_catch_up_follows_the_scale_up_to_the_labs_allowance() {
        // 200 µs (the agent's default) × S, at most 5 ms.
        assert_eq!(veth_agent_catch_up(1.0, None), Duration::from_micros(200));
        assert_eq!(veth_agent_catch_up(10.0, None), Duration::from_millis(2));
        assert_eq!(veth_agent_catch_up(25.0, None), Duration::from_millis(5));
        assert_eq!(veth_agent_catch_up(100.0, None), Duration::from_millis(5));
        // No further than the switch port can place a back-dated frame.
        let ms = Duration::from_millis;
        assert_eq!(veth_agent_catch_up(10.0, Some(ms(3))), ms(2));
        assert_eq!(
            veth_agent_catch_up(10.0, Some(Duration::from_micros(250))),
            Duration::from_micros(250)
        );
    }

    /// The `catch_up` of host `host`'s agent in the built-in `scenario` at its netns scale,
    /// with `sets` applied.
    fn agent_catch_up(scenario: &str, host: &str, sets: &[String]) -> String {
        let sc = crate::scenario::load(scenario, sets).unwrap();
        let k = Scaling::netns(&sc);
        let text = agent_config(&sc, host, Rate::from_gbps(1), k).unwrap();
        let t: toml::Table = toml::from_str(&text).unwrap();
        t["catch_up"].as_str().unwrap().to_string()
    }

    /// A back-dated frame is placed on its link's time only within its switch port's
    /// lookahead (2 × delay × S), so the catch-up stops there: 250 µs on the dumbbell at
    /// S = 10 (12.5 µs links; 2 ms before), 2 ms on the parking lot at S = 100 (10 µs links;
    /// 5 ms before); a switch placing frames by their receive times leaves the scaled
    /// default.
    #[test]
    fn the_agents_catch_up_stops_at_what_the_switch_can_place() {
        assert_eq!(agent_catch_up("dumbbell", "h0", &[]), "250us");
        assert_eq!(agent_catch_up("parking-lot", "h5", &[]), "2ms");
        let off = ["switch.sw0.departure_stamps=false".to_string()];
        assert_eq!(agent_catch_up("dumbbell", "h0", &off), "2ms");
        // A catch-up the scenario gives is its own (× S).
        let given = ["host.h0.agent.catch_up=\"100us\"".to_string()];
        assert_eq!(agent_catch_up("dumbbell", "h0", &given), "1ms");
    }

    #[test]
    fn sparse_toml_lists_what_differs_from_the_defaults() {
        let default = Outer {
            x: true,
            list: vec![1, 2],
            inner: Inner { a: 1, b: None },
        };
        let same = sparse_toml(&default, &default).unwrap();
        assert!(same.is_empty(), "{same:?}");
        let changed = Outer {
            x: true,
            list: vec![1, 2, 3],
            inner: Inner {
                a: 1,
                b: Some(Duration::from_millis(5)),
            },
        };
        let t = sparse_toml(&changed, &default).unwrap();
        assert_eq!(
            toml::to_string(&t).unwrap(),
            "list = [1, 2, 3]\n\n[inner]\nb = \"5ms\"\n"
        );
        // A default that is set cannot be returned to unset by leaving the key out.
        let e = sparse_toml(&default, &changed).unwrap_err().to_string();
        assert!(e.contains("inner.b"), "{e}");
    }

    #[test]
    fn typed_writer_matches_the_table_writer_on_every_shipped_scenario() {
        let dir = Path::new("sw.ctl");
        let mut checked = (0, 0);
        for sc in shipped() {
            let k = Scaling::netns(&sc);
            let graph = sc.topo.graph();
            for sw in &graph.switches {
                let text = switch_config(&sc, &graph, sw, k, dir, dir, 7).unwrap();
                let (cfg, rest) = switch_parts(&text);
                let old: cp_switch::BridgeConfig =
                    toml::from_str(&table_writer::bridge(&sc, &graph, sw, k)).unwrap();
                assert_eq!(cfg, format!("{old:?}"), "{}: switch {sw}", sc.file);
                assert!(rest.contains_key("port") && rest.contains_key("seed"));
                checked.0 += 1;
            }
            let mut starts: Vec<Duration> = sc.topo.flow.iter().map(|f| f.start).collect();
            starts.extend(sc.topo.event.iter().map(|e| e.at));
            starts.push(Duration::ZERO);
            for h in &graph.hosts {
                let line = uplink_rate(&sc, &graph, h);
                for &at in &starts {
                    let new = agent_config_at(&sc, h, line, k, at).unwrap();
                    let old = table_writer::agent_at(&sc, h, line, k, at);
                    assert_eq!(
                        agent_settings(&new),
                        agent_settings(&old),
                        "{}: host {h} at {at}",
                        sc.file
                    );
                    checked.1 += 1;
                }
            }
        }
        println!(
            "{} switch and {} agent files compared",
            checked.0, checked.1
        );
        assert!(checked.0 > 20 && checked.1 > 100, "{checked:?}");
    }

    /// The configuration of switch `sw` of the built-in `scenario` at scaling `k`, with `sets`
    /// applied.
    fn switch_file(scenario: &str, sw: &str, sets: &[String], k: Scaling) -> toml::Table {
        let sc = crate::scenario::load(scenario, sets).unwrap();
        let graph = sc.topo.graph();
        let (ctl, trace) = (format!("{sw}.ctl"), format!("trace-{sw}.jsonl"));
        let text =
            switch_config(&sc, &graph, sw, k, Path::new(&ctl), Path::new(&trace), 1).unwrap();
        toml::from_str(&text).unwrap()
    }

    /// The dumbbell's switch configuration (links of 12.5 µs, S = 1) with `sets` applied.
    fn dumbbell_switch(sets: &[String]) -> toml::Table {
        switch_file("dumbbell", "sw0", sets, Scaling::ONE)
    }

    /// The switch's `ingress_stage` in its daemon configuration: on unless the scenario says.
    fn stage_of(sets: &[String]) -> Option<bool> {
        dumbbell_switch(sets)
            .get("ingress_stage")
            .and_then(toml::Value::as_bool)
    }

    /// The `[[port]]` entries of the dumbbell's switch.
    fn ports_of(sets: &[String]) -> Vec<toml::Table> {
        dumbbell_switch(sets)["port"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_table().unwrap().clone())
            .collect()
    }

    #[test]
    fn host_ports_take_both_delays_at_ingress_with_stamps_and_at_egress_without() {
        let ports = ports_of(&[]);
        assert!(!ports.is_empty());
        for p in &ports {
            assert_eq!(p.get("delay"), None, "{p:?}");
            assert_eq!(p["ingress_delay"].as_str(), Some("25us"), "{p:?}");
            assert_eq!(p["departure_stamps"].as_bool(), Some(true), "{p:?}");
        }
        for off in [
            "switch.sw0.departure_stamps=false",
            "switch.sw0.ingress_stage=false",
        ] {
            for p in ports_of(&[off.to_string()]) {
                assert_eq!(p["delay"].as_str(), Some("25us"), "{off}: {p:?}");
                assert_eq!(p.get("ingress_delay"), None, "{off}: {p:?}");
                assert_eq!(p.get("departure_stamps"), None, "{off}: {p:?}");
            }
        }
    }

    /// The parking lot's `sw1` ports towards `sw0` and `sw2` (links of 10 µs, S = 1), with
    /// `sets` applied.
    fn parking_lot_trunks(sets: &[String]) -> Vec<toml::Table> {
        switch_file("parking-lot", "sw1", sets, Scaling::ONE)["port"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_table().unwrap().clone())
            .filter(|p| matches!(p["name"].as_str(), Some("sw0" | "sw2")))
            .collect()
    }

    /// Between two switches that both place frames by their stamps, each direction's delay
    /// sits in the receiving switch's ingress stage and the sending port stamps its frames;
    /// a switch with stamps off keeps both ends of its links on the egress delay.
    #[test]
    fn switch_links_carry_stamps_when_both_switches_place_by_them() {
        let trunks = parking_lot_trunks(&[]);
        assert_eq!(trunks.len(), 2, "{trunks:?}");
        for p in &trunks {
            assert_eq!(p.get("delay"), None, "{p:?}");
            assert_eq!(p["ingress_delay"].as_str(), Some("10us"), "{p:?}");
            assert_eq!(p["departure_stamps"].as_bool(), Some(true), "{p:?}");
            assert_eq!(p["stamp_departures"].as_bool(), Some(true), "{p:?}");
            // Its stamps back-dated no further than the peer's lookahead.
            assert_eq!(p["catch_up"].as_str(), Some("10us"), "{p:?}");
        }
        for off in [
            "switch.sw0.departure_stamps=false",
            "switch.sw0.ingress_stage=false",
        ] {
            for p in parking_lot_trunks(&[off.to_string()]) {
                let towards_sw0 = p["name"].as_str() == Some("sw0");
                if towards_sw0 {
                    assert_eq!(p["delay"].as_str(), Some("10us"), "{off}: {p:?}");
                    assert_eq!(p.get("ingress_delay"), None, "{off}: {p:?}");
                    assert_eq!(p.get("stamp_departures"), None, "{off}: {p:?}");
                } else {
                    assert_eq!(p["stamp_departures"].as_bool(), Some(true), "{off}: {p:?}");
                }
            }
        }
    }

    /// A link without delay gives no lookahead: its ports keep the (zero) egress delay and
    /// place frames by their receive times, which the daemon accepts (stamps without an
    /// ingress delay it refuses).
    #[test]
    fn links_without_delay_carry_no_stamps() {
        let ports = ports_of(&["link.0.delay=0s".to_string()]);
        let h0 = ports
            .iter()
            .find(|p| p["name"].as_str() == Some("h0"))
            .unwrap();
        assert_eq!(h0["delay"].as_str(), Some("0s"), "{h0:?}");
        assert_eq!(h0.get("ingress_delay"), None, "{h0:?}");
        assert_eq!(h0.get("departure_stamps"), None, "{h0:?}");
        let sc = crate::scenario::load("parking-lot", &[]).unwrap();
        let trunk = sc
            .topo
            .link
            .iter()
            .position(|l| l.a == "sw0" && l.b == "sw1")
            .unwrap();
        for p in parking_lot_trunks(&[format!("link.{trunk}.delay=0s")]) {
            let towards_sw0 = p["name"].as_str() == Some("sw0");
            assert_eq!(p.get("stamp_departures").is_none(), towards_sw0, "{p:?}");
            assert_eq!(p.get("ingress_delay").is_none(), towards_sw0, "{p:?}");
        }
    }

    /// The switch's wake quantum (25 µs by default) is given when every port's stage holds
    /// at least twice it (the dumbbell's host ports, 25 µs both ways at S = 1, hold 25 µs:
    /// not enough; × 10: 250 µs), and never when the scenario turns it off or a port holds no
    /// delay.
    #[test]
    fn the_wake_quantum_is_given_where_every_port_holds_twice_it() {
        let quantum = |sets: &[&str], k: Scaling| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            switch_file("dumbbell", "sw0", &sets, k)
                .get("wake_quantum")
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        let ten = Scaling {
            rate_div: 10.0,
            loop_mul: 10.0,
            sched_mul: 10.0,
        };
        assert_eq!(quantum(&[], ten), Some("25us".into()));
        assert_eq!(quantum(&[], Scaling::ONE), None);
        assert_eq!(quantum(&["switch.sw0.wake_quantum=\"0s\""], ten), None);
        assert_eq!(
            quantum(&["switch.sw0.wake_quantum=\"100us\""], ten),
            Some("100us".into())
        );
        assert_eq!(quantum(&["switch.sw0.wake_quantum=\"200us\""], ten), None);
        assert_eq!(quantum(&["link.0.delay=\"0s\""], ten), None);
        assert_eq!(quantum(&["switch.sw0.departure_stamps=false"], ten), None);
    }

    #[test]
    fn the_ingress_stage_is_on_unless_the_scenario_turns_it_off() {
        assert_eq!(stage_of(&[]), Some(true));
        assert_eq!(
            stage_of(&["switch.sw0.ingress_stage=false".to_string()]),
            Some(false)
        );
    }
}
