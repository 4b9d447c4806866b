//! The simulator reproduction tests (`sim_repro.rs`, `sim_repro2.rs`): editing a scenario of
//! `scenarios/repro/`, its links and paths for the analysis model, the bottleneck switch's
//! counters, and the results directories written with `REPRO_RESULTS=DIR`.

use cnm_proto::wire::EthernetAddress;
use cnm_proto::Rate;
use rp_agent::gen::sink::FlowCounters;
use std::path::{Path, PathBuf};
use testbed::analysis::RunData;
use testbed::report::{write_run, ReportOptions};
use testbed::sim::topo::Built;
use testbed::sim::{NodeId, Sim};

/// A scenario of `scenarios/repro/` as a TOML table, to be edited before the run.
pub fn scenario(name: &str) -> toml::Table {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/repro")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap()
        .parse::<toml::Table>()
        .unwrap()
}

/// The table `key` of `t`, created empty when missing.
pub fn table<'a>(t: &'a mut toml::Table, key: &str) -> &'a mut toml::Table {
    t.entry(key.to_string())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        .as_table_mut()
        .unwrap()
}

/// Sets `cp.<key>` in the bridge of every switch.
pub fn set_cp(t: &mut toml::Table, key: &str, v: toml::Value) {
    for (_, sw) in table(t, "switch").iter_mut() {
        let sw = sw.as_table_mut().unwrap();
        let cp = table(table(sw, "bridge"), "cp");
        cp.insert(key.to_string(), v.clone());
    }
}

pub fn s(v: &str) -> toml::Value {
    toml::Value::String(v.to_string())
}

pub fn gbps(x: f64) -> String {
    format!("{:.3}", x / 1e9)
}

/// Links of the scenario: (name, a, b, rate).
pub fn links_of(t: &toml::Table) -> Vec<(String, String, String, Rate)> {
    t["link"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let l = l.as_table().unwrap();
            let (a, b) = (l["a"].as_str().unwrap(), l["b"].as_str().unwrap());
            let name = l
                .get("name")
                .and_then(|v| v.as_str())
                .map_or_else(|| format!("{a}-{b}"), str::to_string);
            let rate = l["rate"].as_str().unwrap().parse().unwrap();
            (name, a.to_string(), b.to_string(), rate)
        })
        .collect()
}

/// Names of the links on the shortest path from `src` to `dst` (breadth-first), for the
/// analysis library's max-min shares.
pub fn path_of(links: &[(String, String, String, Rate)], src: &str, dst: &str) -> Vec<String> {
    let mut prev: std::collections::HashMap<String, (String, String)> = Default::default();
    let mut queue = std::collections::VecDeque::from([src.to_string()]);
    let mut seen = std::collections::HashSet::from([src.to_string()]);
    while let Some(u) = queue.pop_front() {
        for (name, a, b, _) in links {
            let v = if *a == u {
                b
            } else if *b == u {
                a
            } else {
                continue;
            };
            if seen.insert(v.clone()) {
                prev.insert(v.clone(), (u.clone(), name.clone()));
                queue.push_back(v.clone());
            }
        }
    }
    let mut path = Vec::new();
    let mut at = dst.to_string();
    while let Some((p, link)) = prev.get(&at) {
        path.push(link.clone());
        at = p.clone();
    }
    path.reverse();
    path
}

/// The congestion point settings the analysis model needs, from the first switch whose CP is
/// not off: its set point (octets) and the FQCN weights by source MAC (lower case).
pub fn cp_settings(t: &toml::Table) -> (Option<u64>, Vec<(String, f64)>) {
    let cp = t["switch"]
        .as_table()
        .unwrap()
        .values()
        .filter_map(|s| s.get("bridge")?.get("cp")?.as_table())
        .find(|cp| cp.get("placement").and_then(|v| v.as_str()) != Some("off"));
    let q_eq = cp
        .and_then(|cp| {
            cp.get("cp_queue_set_point")?
                .as_str()?
                .parse::<cnm_proto::Bytes>()
                .ok()
        })
        .map(cnm_proto::Bytes::get);
    let weights = cp
        .and_then(|cp| cp.get("fqcn_weights")?.as_array())
        .map(|ws| {
            ws.iter()
                .filter_map(|w| {
                    Some((
                        w.get("mac")?.as_str()?.to_lowercase(),
                        w.get("weight")?.as_integer()? as f64,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    (q_eq, weights)
}

/// MAC address of every flow's source host, in flow order.
pub fn source_macs(sim: &Sim, built: &Built) -> Vec<EthernetAddress> {
    built
        .flows
        .iter()
        .map(|f| {
            let id = built.hosts.iter().find(|(n, _)| *n == f.2).unwrap().1;
            sim.host(id).unwrap().mac()
        })
        .collect()
}

/// Frames dropped by every switch so far.
pub fn switch_drops(sim: &Sim, built: &Built) -> u64 {
    built
        .switches
        .iter()
        .map(|(_, id)| {
            let b = sim.bridge(*id).unwrap();
            b.stats().ports.iter().map(|p| p.drops).sum::<u64>()
        })
        .sum()
}

/// `REPRO_RESULTS` when set and `seed` is 1: where the results directories go.
pub fn results_dir(seed: u64) -> Option<PathBuf> {
    std::env::var_os("REPRO_RESULTS")
        .filter(|_| seed == 1)
        .map(PathBuf::from)
}

/// Writes `rd` to `<dir>/<label>-s<seed>/` with the analysis library's report writer.
pub fn write_results(dir: &Path, label: &str, seed: u64, rd: &RunData) {
    let d = dir.join(format!("{label}-s{seed}"));
    write_run(&d, rd, &ReportOptions::default()).unwrap();
}

/// The bottleneck link's switch, the node at its other end and the switch port facing it.
pub fn bottleneck(sim: &Sim, built: &Built) -> (NodeId, String, cp_switch::PortId) {
    let bn = built.bottleneck.unwrap();
    let (sw, peer, _, _) = sim.link_ends(bn).unwrap();
    let peer = peer.to_string();
    let bn_port = sim.bridge(sw).unwrap().port_id(&peer).unwrap();
    (sw, peer, bn_port)
}

/// `f` of what the receiving sink has counted of every flow so far (`None` before its first
/// frame), in flow order; `macs` are the flows' source MACs.
pub fn per_flow<T>(
    sim: &Sim,
    built: &Built,
    macs: &[EthernetAddress],
    f: impl Fn(Option<&FlowCounters>) -> T,
) -> Vec<T> {
    built
        .flows
        .iter()
        .zip(macs)
        .map(|((_, id, _, dst, _, _), mac)| {
            let d = built.hosts.iter().find(|(n, _)| n == dst).unwrap().1;
            f(sim
                .host(d)
                .unwrap()
                .sink()
                .flows()
                .find(|((m, fid), _)| m == mac && fid == id)
                .map(|(_, c)| c))
        })
        .collect()
}
