//! Congestion-point settings changed while the bridge runs: in-place updates keep the CPs'
//! state and take effect at the next sample, structural changes rebuild the CPs, refused
//! changes leave everything as it was.
#![allow(clippy::unwrap_used)]

mod core_support;

use cnm_proto::rng::Rng;
use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Bytes, Instant, Rate};
use core_support::*;
use cp_switch::config::StaticEntry;
use cp_switch::{
    Bridge, BridgeConfig, ConfigError, CpChange, CpMode, CpPatch, Placement, PortConfig, PortId,
};

/// h1 on p0 sends to h3 behind p1 (100 Mb/s); output CPs on priority 3, sampled every 10 KB,
/// Qeq so large that no queue is ever above it.
fn bridge() -> Bridge {
    let mut cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0"),
        PortConfig::new("p1").with_rate(Rate::from_mbps(100)),
    ]);
    cfg.default_priority = 3;
    cfg.cp.placement = Placement::Output;
    cfg.cp.cp_min_sample_base = Bytes::new(10_000);
    cfg.cp.cp_queue_set_point = Bytes::new(1 << 30);
    cfg.fdb.static_entries.push(StaticEntry {
        mac: EthernetAddress(mac(3)),
        vid: None,
        port: "p1".into(),
    });
    Bridge::new(cfg, Rng::new(7)).unwrap()
}

/// Sends `n` frames of 1000 octets from h1 at 1 µs spacing from `t` (nothing is transmitted:
/// the output queue of p1 only grows). Returns the time after the last one.
fn send(b: &mut Bridge, t: Instant, n: u32) -> Instant {
    let f = frame(mac(3), mac(1), None, 1000);
    let mut t = t;
    for _ in 0..n {
        b.handle_frame(t, PortId(0), &f);
        t += cnm_proto::Duration::from_micros(1);
    }
    t
}

fn cnms(b: &Bridge) -> u64 {
    b.cp_stats().iter().map(|c| c.cnm_tx).sum()
}

fn samples(b: &Bridge) -> u64 {
    b.cp_stats().iter().map(|c| c.samples).sum()
}

/// `ctl set cp` as the daemon reads it: `KEY=VALUE` operands → [`CpPatch`] (a key the patch
/// refuses is named `cp.KEY`) → [`Bridge::apply_cp_patch`].
fn set(b: &mut Bridge, operands: &[&str]) -> Result<CpChange, ConfigError> {
    let patch = daemon_kit::patch::parse_pairs::<CpPatch, _>(operands)
        .map_err(|e| CpPatch::key_error(&e.key, e.reason))?;
    b.apply_cp_patch(&patch)
}

#[test]
fn a_lower_set_point_takes_effect_at_the_next_sample() {
    let mut b = bridge();
    let t = send(&mut b, Instant::from_nanos(1), 40);
    let n = samples(&b);
    assert!(n >= 2, "{n}");
    assert_eq!(cnms(&b), 0, "Q far below Qeq: Fb > 0");
    let change = set(&mut b, &["cp_queue_set_point=5KB"]).unwrap();
    assert_eq!(change, CpChange::InPlace);
    assert!(b.cp_stats().iter().all(|c| c.qeq == 5_000));
    assert_eq!(samples(&b), n, "state kept");
    send(&mut b, t, 40);
    assert!(cnms(&b) >= 2, "{}", cnms(&b));
    assert_eq!(b.cp_config().cp_queue_set_point, Bytes::new(5_000));
}

#[test]
fn weight_and_sample_base_change_in_place() {
    let mut b = bridge();
    set(&mut b, &["cp_feedback_weight=8", "cp_min_sample_base=3KB"]).unwrap();
    for st in b.cp_stats() {
        assert_eq!((st.weight, st.sample_base), (8, 3_000));
        assert!(st.next_sample_in <= 3_000, "{}", st.next_sample_in);
    }
}

#[test]
fn structural_changes_rebuild_and_keep_counters() {
    let mut b = bridge();
    let t = send(&mut b, Instant::from_nanos(1), 40);
    let n = samples(&b);
    assert!(n > 0);
    let change = set(&mut b, &["mode=fqcn"]).unwrap();
    assert_eq!(change, CpChange::Rebuilt);
    assert!(b.cp_stats().iter().all(|c| c.mode == CpMode::Fqcn));
    assert_eq!(samples(&b), n, "same CPIDs keep their counters");
    send(&mut b, t, 10);
    // Input placement: other CPIDs, fresh counters; CNPVs 3 and 5: two CPs per port.
    set(&mut b, &["placement=input", "cnpv=[3,5]"]).unwrap();
    let st = b.cp_stats();
    assert_eq!(st.len(), 4);
    assert!(st
        .iter()
        .all(|c| c.placement == Placement::Input && c.samples == 0));
    set(&mut b, &["placement=off"]).unwrap();
    assert!(b.cp_stats().is_empty());
}

#[test]
fn refused_changes_name_the_field_and_change_nothing() {
    let mut b = bridge();
    let before = b.cp_config().clone();
    for (ops, field) in [
        (&["cp_feedback_weight=3"][..], "cp.cp_feedback_weight"),
        (&["bogus=1"], "cp.bogus"),
        (&["cp_queue_set_point=lots"], "cp.cp_queue_set_point"),
        (&["mode=fast"], "cp.mode"),
        (&["cnpv=[9]"], "cp.cnpv[0]"),
        (&["mode=fqcn", "culprit=occupancy-random"], "cp.culprit"),
    ] {
        let e = set(&mut b, ops).unwrap_err();
        assert_eq!(e.field, field, "{ops:?}: {e}");
        assert_eq!(b.cp_config(), &before);
    }
    let e = set(&mut b, &["bogus=1"]).unwrap_err().to_string();
    assert!(
        e.contains("bogus") && e.contains("cp_queue_set_point"),
        "{e}"
    );
}

#[test]
fn rebuilds_respect_cnd_defence() {
    use cp_switch::config::CndDefense;
    let mut cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0"),
        PortConfig::new("p1"),
        PortConfig::new("p2"),
    ]);
    cfg.ports[1].cnd_defense = CndDefense::Disabled;
    cfg.ports[2].cnd_defense = CndDefense::Edge;
    let mut b = Bridge::new(cfg, Rng::new(1)).unwrap();
    let ports = |b: &Bridge| {
        b.cp_stats()
            .iter()
            .map(|c| c.port.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ports(&b), ["p0", "p2"]);
    set(&mut b, &["mode=fqcn"]).unwrap();
    assert_eq!(ports(&b), ["p0", "p2"], "a disabled port stays without CPs");
    let e = set(&mut b, &["cnpv=[3,5]"]).unwrap_err();
    assert_eq!(e.field, "cp.cnpv", "{e}");
}
