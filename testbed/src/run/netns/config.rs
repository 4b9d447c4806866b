//! The daemons' configuration files in netns mode, scaled by S (QCN-REFERENCE §5).
//!
//! * [`switch_config`]: the `cp-switch --config` text of a switch: the scenario's bridge table,
//!   the veth line emulation (no preamble/FCS/padding, 5 ms catch-up), static FDB entries from
//!   the [graph](crate::scenario::graph), one `[[port]]` per link with `rate` = link rate ÷ S
//!   and `delay`; a switch port towards a host carries the delay of *both* directions of the
//!   link (2 × delay × S: a veth pair has no delay of its own, and the feedback loop must see
//!   the simulator's round trip), ports between switches one direction each.
//! * [`agent_config`]: the `rp-agent --config` text of a host: its `[host.X.agent]` table with
//!   rates ÷ S and the loop's times × S, and the veth pacing defaults.
//! * [`agent_config_at`]: the same for a generator starting later, with every earlier host
//!   event and uplink-rate change folded in.

use std::path::Path;

use cnm_proto::{Duration, Rate};
use rp_agent::gen::Pattern;

use super::super::world::Scaling;
use crate::scenario::graph::Graph;
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

/// The `rp-agent --config` text of a host: its `[host.X.agent]` table with the rates ÷ S, the
/// RP timer, the adaptive byte counter's time constant and the explicit-rate timeout × S, and
/// the veth pacing defaults.
pub fn agent_config(
    sc: &Scenario,
    host: &str,
    line_rate: Rate,
    k: Scaling,
) -> anyhow::Result<String> {
    let mut t = sc
        .topo
        .host
        .get(host)
        .and_then(|h| h.agent.clone())
        .unwrap_or_default();
    let macs = sc.topo.host_macs();
    if !t.contains_key("line_rate") {
        t.insert("line_rate".into(), s(line_rate));
    }
    if let Some(m) = macs.get(host) {
        t.entry("mac").or_insert_with(|| s(m));
    }
    let cfg: rp_agent::AgentConfig = t
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| anyhow::anyhow!("host.{host}.agent: {}", e.message()))?;
    let sr = |x: Rate| s(crate::scenario::scale_rate(x, k.rate_div));
    let sd = |x: Duration| s(crate::scenario::scale_dur(x, k.loop_mul));
    t.insert("line_rate".into(), sr(cfg.line_rate));
    t.entry("wire_overhead")
        .or_insert(toml::Value::Boolean(false));
    t.entry("catch_up").or_insert_with(|| s("5ms"));
    let mut rp = t
        .get("rp")
        .and_then(|v| v.as_table())
        .cloned()
        .unwrap_or_default();
    rp.insert("rpg_time_reset".into(), sd(cfg.rp.rpg_time_reset));
    rp.insert("rpg_ai_rate".into(), sr(cfg.rp.rpg_ai_rate));
    rp.insert("rpg_hai_rate".into(), sr(cfg.rp.rpg_hai_rate));
    rp.insert("rpg_min_rate".into(), sr(cfg.rp.rpg_min_rate));
    rp.insert("rpg_adaptive_k".into(), sd(cfg.rp.rpg_adaptive_k));
    rp.insert("rp_er_timeout".into(), sd(cfg.rp.rp_er_timeout));
    if let Some(m) = cfg.rp.rpg_max_rate {
        rp.insert("rpg_max_rate".into(), sr(m));
    }
    t.insert("rp".into(), toml::Value::Table(rp));
    Ok(toml::to_string(&t)?)
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
    let mut bridge = sc
        .topo
        .switch
        .get(sw)
        .and_then(|x| x.bridge.clone())
        .unwrap_or_default();
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
        shaper.entry(key).or_insert(v);
    }
    bridge.insert("shaper".into(), toml::Value::Table(shaper));
    // PAUSE quanta are 512 bit times at the nominal rate: ÷ S keeps their duration × S.
    let parsed: cp_switch::BridgeConfig = bridge
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| anyhow::anyhow!("switch.{sw}.bridge: {}", e.message()))?;
    // The explicit-rate CP's interval and floor, when given, follow the time scale too.
    if let Some(cp) = bridge.get_mut("cp").and_then(|v| v.as_table_mut()) {
        if let Some(d) = parsed.cp.er_interval {
            cp.insert(
                "er_interval".into(),
                s(crate::scenario::scale_dur(d, k.loop_mul)),
            );
        }
        if let Some(r) = parsed.cp.er_min_rate {
            cp.insert(
                "er_min_rate".into(),
                s(crate::scenario::scale_rate(r, k.rate_div)),
            );
        }
    }
    let mut lossless = bridge
        .get("lossless")
        .and_then(|v| v.as_table())
        .cloned()
        .unwrap_or_default();
    lossless.insert(
        "nominal_rate".into(),
        s(crate::scenario::scale_rate(
            parsed.lossless.nominal_rate,
            k.rate_div,
        )),
    );
    bridge.insert("lossless".into(), toml::Value::Table(lossless));
    let static_fdb = sc.topo.switch.get(sw).map_or(true, |x| x.static_fdb);
    if static_fdb {
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
    let mut ports = Vec::new();
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
            let both = if graph.is_switch(&peer.node) {
                1.0
            } else {
                2.0
            };
            let d = crate::scenario::scale_dur(link.delay, k.loop_mul * both);
            p.insert("delay".into(), s(d));
            ports.push(toml::Value::Table(p));
        }
    }
    top.insert("port".into(), toml::Value::Array(ports));
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

/// Puts reaction-point overrides into a host's `[host.X.agent]` table (`rp_mode` at the top,
/// the rest, with or without an `rp.` prefix, under `rp`).
fn merge_rp(agent: &mut toml::Table, set: &toml::Table) {
    for (k, v) in set {
        let k = k.strip_prefix("rp.").unwrap_or(k);
        if k == rp_agent::config::RP_MODE_KEY {
            agent.insert(k.to_string(), v.clone());
        } else {
            let rp = agent
                .entry("rp")
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let Some(t) = rp.as_table_mut() {
                t.insert(k.to_string(), v.clone());
            }
        }
    }
}

/// The scenario with `set` folded into host `host`'s agent table.
pub fn with_host_set(sc: &Scenario, host: &str, set: &toml::Table) -> Scenario {
    let mut sc = sc.clone();
    if let Some(h) = sc.topo.host.get_mut(host) {
        let mut agent = h.agent.clone().unwrap_or_default();
        merge_rp(&mut agent, set);
        h.agent = Some(agent);
    }
    sc
}

/// The `rp-agent --config` text of `host` for a generator starting at scenario time `start`:
/// [`agent_config`] of the host's table with every host event at or before `start` folded in
/// (in time order).
pub fn agent_config_at(
    sc: &Scenario,
    host: &str,
    line_rate: Rate,
    k: Scaling,
    start: Duration,
) -> anyhow::Result<String> {
    let mut evs: Vec<_> = sc.topo.event.iter().filter(|e| e.at <= start).collect();
    evs.sort_by_key(|e| e.at);
    let mut now = sc.clone();
    let mut line_rate = line_rate;
    for e in evs {
        match e.kind() {
            Ok(EventKind::Host { host: h, set }) if h == host => {
                now = with_host_set(&now, host, set);
            }
            // A rate change of the host's own uplink before the agent starts: the agent starts
            // at the new line rate (the runner tells running agents with `ctl set rate`).
            Ok(EventKind::Link { link, dir, rate }) => {
                use crate::sim::topo::DirSpec;
                let sends = sc.topo.link.iter().any(|l| {
                    let name = l.name.clone().unwrap_or_else(|| format!("{}-{}", l.a, l.b));
                    name == link
                        && ((l.a == host && matches!(dir, DirSpec::AToB | DirSpec::Both))
                            || (l.b == host && matches!(dir, DirSpec::BToA | DirSpec::Both)))
                });
                if sends {
                    line_rate = rate;
                }
            }
            _ => {}
        }
    }
    agent_config(&now, host, line_rate, k)
}
