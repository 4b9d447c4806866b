//! Property tests over the configuration types: every field of `BridgeConfig`, `AgentConfig`
//! and a scenario file set to its extremes (0, 1, the type's maximum, huge, negative, NaN, the
//! largest rates, durations and sizes the units spell) must give a clean refusal naming a field,
//! or a core that builds and runs a bounded stretch of traffic — never a panic or an abort.
//!
//! The fields are not listed by hand: each case serialises a fully populated configuration to
//! TOML, walks its leaves, and replaces a few of them (chosen by proptest) by extremes chosen by
//! the leaf's kind (an integer, a float, a rate `…bit`, a duration `…s`, a size `…B`, a MAC
//! address, an enum name, an array). A field added to a configuration type is covered by
//! construction.
#![allow(clippy::unwrap_used)]

use cnm_proto::rng::Rng;
use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Duration, Instant, Rate};
use cp_switch::{Bridge, BridgeConfig, PortConfig, PortId};
use proptest::prelude::*;
use rp_agent::config::AgentConfig;
use rp_agent::Agent;
use toml::Value;

/// Extremes for a leaf whose default value is `v`.
fn extremes(v: &Value) -> Vec<Value> {
    let ints = [
        0i64,
        1,
        -1,
        2,
        7,
        8,
        255,
        4094,
        4095,
        65_535,
        65_536,
        1 << 32,
        i64::MAX,
    ];
    match v {
        Value::Integer(_) => ints.iter().map(|&i| Value::Integer(i)).collect(),
        Value::Float(_) => [0.0, -1.0, 1e-300, 1.0, 1e300, f64::INFINITY, f64::NAN]
            .iter()
            .map(|&f| Value::Float(f))
            .collect(),
        Value::Boolean(_) => vec![Value::Boolean(true), Value::Boolean(false)],
        Value::Array(a) => {
            let mut out = vec![
                Value::Array(vec![]),
                Value::Array(vec![Value::Integer(0)]),
                Value::Array((0..9).map(Value::Integer).collect()),
                Value::Array(vec![Value::Integer(i64::MAX)]),
                Value::Array(vec![Value::Integer(-1)]),
            ];
            if let Some(first) = a.first() {
                out.extend(extremes(first).into_iter().map(|x| Value::Array(vec![x])));
            }
            out
        }
        Value::String(s) => {
            let strs: &[&str] = if s.ends_with("bit") {
                &[
                    "0bit",
                    "1bit",
                    "1kbit",
                    "10tbit",
                    "11tbit",
                    "18446744073709551615bit",
                    "1e30bit",
                    "-1bit",
                ]
            } else if s.ends_with('B') {
                &[
                    "0B",
                    "1B",
                    "64B",
                    "1GiB",
                    "16GiB",
                    "18446744073709551615B",
                    "1e30B",
                ]
            } else if s.ends_with('s') && s.starts_with(|c: char| c.is_ascii_digit()) {
                &[
                    "0s",
                    "1ns",
                    "1s",
                    "18446744073709551615ns",
                    "1000000000h",
                    "1e30s",
                    "-1s",
                ]
            } else if s.matches(':').count() == 5 {
                &[
                    "00:00:00:00:00:00",
                    "ff:ff:ff:ff:ff:ff",
                    "01:80:c2:00:00:0e",
                ]
            } else {
                &["", "bogus"]
            };
            strs.iter()
                .map(|s| Value::String((*s).to_string()))
                .collect()
        }
        _ => vec![],
    }
}

/// Every leaf path of a TOML tree (table keys and array indices).
fn leaves(v: &Value, path: &mut Vec<Key>, out: &mut Vec<Vec<Key>>) {
    match v {
        Value::Table(t) => {
            for (k, x) in t {
                path.push(Key::Name(k.clone()));
                leaves(x, path, out);
                path.pop();
            }
        }
        Value::Array(a) if a.iter().any(|x| x.is_table()) => {
            for (i, x) in a.iter().enumerate() {
                path.push(Key::Index(i));
                leaves(x, path, out);
                path.pop();
            }
        }
        _ => out.push(path.clone()),
    }
}

#[derive(Debug, Clone)]
enum Key {
    Name(String),
    Index(usize),
}

fn at<'a>(v: &'a mut Value, path: &[Key]) -> &'a mut Value {
    path.iter().fold(v, |v, k| match k {
        Key::Name(n) => &mut v.as_table_mut().unwrap()[n.as_str()],
        Key::Index(i) => &mut v.as_array_mut().unwrap()[*i],
    })
}

/// The base document with `picks` (leaf index, extreme index) applied.
fn mutate(base: &Value, picks: &[(usize, usize)]) -> String {
    let mut ls = Vec::new();
    leaves(base, &mut Vec::new(), &mut ls);
    let mut doc = base.clone();
    for &(l, e) in picks {
        let path = &ls[l % ls.len()];
        let slot = at(&mut doc, path);
        let xs = extremes(slot);
        if !xs.is_empty() {
            *slot = xs[e % xs.len()].clone();
        }
    }
    toml::to_string(&doc).unwrap_or_default()
}

fn picks() -> impl Strategy<Value = Vec<(usize, usize)>> {
    prop::collection::vec((0usize..10_000, 0usize..100), 1..4)
}

const A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0xa1]);
const B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0xb2]);

/// A priority-3 tagged frame `src → dst` of `len` octets.
fn frame(src: EthernetAddress, dst: EthernetAddress, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(64)];
    f[..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..16].copy_from_slice(&[0x81, 0x00, 0x60, 0x01]);
    f[16..18].copy_from_slice(&[0x88, 0xb6]);
    f
}

/// A fully populated bridge configuration: every optional field set.
fn bridge_base() -> Value {
    let mut p0 = PortConfig::new("p0").with_rate(Rate::from_gbps(1));
    p0.default_priority = Some(0);
    p0.mac = Some(EthernetAddress([0x02, 0, 0, 0, 1, 0]));
    p0.delay = Duration::from_micros(5);
    let mut p1 = PortConfig::new("p1").with_rate(Rate::from_mbps(100));
    p1.cnd_defense = cp_switch::config::CndDefense::Edge;
    p1.alternate_priority = Some(2);
    let cfg = BridgeConfig::with_ports(vec![p0, p1, PortConfig::new("p2")]);
    let mut v = Value::try_from(&cfg).unwrap();
    // One static FDB entry, so its fields are leaves too.
    v["fdb"]["static_entries"] = toml::toml! { [[e]]
        mac = "02:00:00:00:00:b2"
        port = "p1"
        vid = 1
    }["e"]
        .clone();
    v
}

/// Builds and runs the bridge for a bounded stretch: 200 frames both ways, polled.
fn run_bridge(text: &str) -> bool {
    let Ok(cfg) = toml::from_str::<BridgeConfig>(text) else {
        return false;
    };
    if let Err(e) = cfg.validate() {
        assert!(!e.to_string().is_empty());
        return false;
    }
    let Ok(mut b) = Bridge::new(cfg, Rng::new(1)) else {
        return false;
    };
    let mut now = Instant::from_nanos(1_000);
    let (ab, ba) = (frame(A, B, 1500), frame(B, A, 64));
    for i in 0..200u64 {
        b.handle_frame(now, PortId(0), &ab);
        if i % 10 == 0 {
            b.handle_frame(now, PortId(1), &ba);
        }
        now += Duration::from_micros(10);
        b.poll_transmit(now, &mut |_, f| !f.is_empty());
        if let Some(t) = b.poll_timeout() {
            // Deadlines far in the future are fine (a 1bit line); only never-ending polls are not.
            if t <= now {
                b.poll_transmit(now, &mut |_, _| true);
            }
        }
    }
    let _ = b.stats();
    b.drain_events(&mut |_| {});
    true
}

fn agent_base() -> Value {
    let mut cfg = AgentConfig {
        mac: Some(A),
        ..AgentConfig::default()
    };
    cfg.rp.rpg_max_rate = Some(Rate::from_mbps(900));
    cfg.cnm_bridges = vec![EthernetAddress([0x02, 0, 0, 0, 0, 0x10])];
    Value::try_from(&cfg).unwrap()
}

/// Builds and runs the agent for a bounded stretch: host frames up, a CNM down, polled.
fn run_agent(text: &str) -> bool {
    let Ok(cfg) = toml::from_str::<AgentConfig>(text) else {
        return false;
    };
    if let Err(e) = cfg.validate() {
        assert!(!e.to_string().is_empty());
        return false;
    }
    let Ok(mut a) = Agent::new(cfg, Rng::new(1)) else {
        return false;
    };
    let mut now = Instant::from_nanos(1_000);
    let f = frame(A, B, 1000);
    let mut sent = Vec::new();
    for i in 0..200u64 {
        if a.can_accept() {
            let _ = a.handle_host(now, &f);
        }
        a.poll_uplink(now, &mut |x| {
            if sent.is_empty() {
                sent = x.to_vec();
            }
            true
        });
        if i == 50 && !sent.is_empty() {
            let mut out = vec![0u8; 256];
            let p = cnm_proto::wire::CnmParams {
                cp_mac: EthernetAddress([0x02, 0, 0, 0, 0, 0x10]),
                cpid: cnm_proto::wire::CpId::new(EthernetAddress([0x02, 0, 0, 0, 0, 0x10]), 11),
                qntz_fb: 63,
                q_offset: 10,
                q_delta: 2,
                cnm_priority: 6,
                default_priority: 0,
                max_msdu: 64,
            };
            if let Ok(n) = cnm_proto::wire::build_cnm(&sent, &p, &mut out) {
                a.handle_uplink(now, &out[..n]);
            }
        }
        a.poll_host(now, &mut |_| true);
        let _ = a.poll_timeout();
        now += Duration::from_micros(10);
    }
    let _ = a.stats();
    let _ = a.flows();
    a.drain_events(&mut |_| {});
    true
}

fn scenario_base() -> Value {
    let text = r#"
seed = 1
duration = "2ms"
[scenario]
window = ["1ms", "2ms"]
scale = 100
[output]
warmup = "1ms"
trace_interval = "1ms"
[switch.sw0.bridge]
event_capacity = 64
[host.h0.agent]
line_rate = "1gbit"
[host.r0]
[[link]]
a = "h0"
b = "sw0"
rate = "1gbit"
delay = "1us"
[[link]]
a = "sw0"
b = "r0"
rate = "500mbit"
delay = "1us"
[[flow]]
src = "h0"
dst = "r0"
pattern = "greedy"
frame_len = 1500
start = "0s"
"#;
    toml::from_str(text).unwrap()
}

/// Parses a scenario and, when it is valid and short, runs it in the simulator for at most
/// 2 ms of virtual time.
fn run_scenario(text: &str) -> bool {
    if testbed::scenario::parse(text, "props.toml", "props", &[]).is_err() {
        return false;
    }
    let Ok(topo) = testbed::sim::topo::Topology::parse(text, "props.toml") else {
        return false;
    };
    let Ok((mut sim, _built)) = topo.build() else {
        return false;
    };
    sim.run_until(Instant::ZERO + Duration::from_millis(2));
    true
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        .. ProptestConfig::default()
    })]

    #[test]
    fn bridge_config_extremes_refuse_or_run(p in picks()) {
        run_bridge(&mutate(&bridge_base(), &p));
    }

    #[test]
    fn agent_config_extremes_refuse_or_run(p in picks()) {
        run_agent(&mutate(&agent_base(), &p));
    }

    #[test]
    fn scenario_extremes_refuse_or_run(p in picks()) {
        run_scenario(&mutate(&scenario_base(), &p));
    }
}

/// Every leaf of the populated bases is reached and has extremes (the walk is not vacuous).
#[test]
fn every_field_has_extremes() {
    for base in [bridge_base(), agent_base(), scenario_base()] {
        let mut ls = Vec::new();
        leaves(&base, &mut Vec::new(), &mut ls);
        assert!(ls.len() > 10, "{} leaves", ls.len());
        let mut doc = base.clone();
        for l in &ls {
            let v = at(&mut doc, l);
            assert!(!extremes(v).is_empty() || v.is_array(), "{l:?}: {v:?}");
        }
    }
}

/// Each field at each extreme, one at a time (the exhaustive single-field sweep behind the
/// random combinations above).
#[test]
fn each_field_at_each_extreme() {
    for (base, run) in [
        (bridge_base(), run_bridge as fn(&str) -> bool),
        (agent_base(), run_agent as fn(&str) -> bool),
        (scenario_base(), run_scenario as fn(&str) -> bool),
    ] {
        // The bases themselves are valid and run: the properties are not vacuous.
        assert!(run(&toml::to_string(&base).unwrap()));
        let mut ls = Vec::new();
        leaves(&base, &mut Vec::new(), &mut ls);
        let (mut ran, mut refused) = (0, 0);
        for l in 0..ls.len() {
            for e in 0..16 {
                if run(&mutate(&base, &[(l, e)])) {
                    ran += 1;
                } else {
                    refused += 1;
                }
            }
        }
        assert!(ran > 0 && refused > 0, "ran {ran}, refused {refused}");
    }
}
