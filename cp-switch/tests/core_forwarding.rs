//! Forwarding: learning, ageing, flooding, no hairpin, VLAN separation, static entries,
//! malformed and MAC-control frames.
#![allow(clippy::unwrap_used)]

mod core_support;

use cnm_proto::{Duration, Instant};
use core_support::*;
use cp_switch::config::StaticEntry;
use cp_switch::{BridgeConfig, PortId};

fn four_ports() -> Harness {
    Harness::new(BridgeConfig::with_ports(Harness::ports(4)))
}

#[test]
fn unknown_unicast_and_broadcast_flood_to_all_but_ingress() {
    let mut h = four_ports();
    h.rx(1, &frame(mac(9), mac(1), None, 100));
    h.rx(2, &frame([0xff; 6], mac(2), None, 100));
    h.rx(3, &frame([0x01, 0, 0x5e, 0, 0, 1], mac(3), None, 100));
    h.poll();
    let ports = |src: [u8; 6]| {
        let mut v: Vec<u16> = h
            .sent
            .iter()
            .filter(|s| s.bytes[6..12] == src)
            .map(|s| s.port.0)
            .collect();
        v.sort();
        v
    };
    assert_eq!(ports(mac(1)), vec![0, 2, 3]);
    assert_eq!(ports(mac(2)), vec![0, 1, 3]);
    assert_eq!(ports(mac(3)), vec![0, 1, 2]);
    let st = h.bridge.stats();
    assert_eq!(st.ports[1].flooded, 1);
    assert_eq!(st.ports[0].tx_frames, 3);
}

#[test]
fn learned_unicast_goes_to_one_port_and_never_back() {
    let mut h = four_ports();
    h.learn(1, 1);
    h.learn(2, 2);
    h.rx(1, &frame(mac(2), mac(1), None, 100));
    h.poll();
    assert_eq!(h.sent.len(), 1);
    assert_eq!(h.sent[0].port, PortId(2));
    h.clear();
    // Destination learned on the ingress port itself: filtered, not sent back.
    h.rx(1, &frame(mac(1), mac(5), None, 100));
    h.poll();
    assert!(h.sent.is_empty(), "hairpin: {:?}", h.sent);
    assert_eq!(h.bridge.stats().ports[1].drop_reasons.no_route, 1);
    // Station moves to port 3.
    h.rx(3, &frame([0xff; 6], mac(2), None, 60));
    h.poll();
    h.clear();
    h.rx(1, &frame(mac(2), mac(1), None, 100));
    h.poll();
    assert_eq!(h.sent.len(), 1);
    assert_eq!(h.sent[0].port, PortId(3));
    assert_eq!(h.bridge.stats().fdb.moved, 1);
}

#[test]
fn entries_age_out() {
    let mut cfg = BridgeConfig::with_ports(Harness::ports(3));
    cfg.fdb.ageing = Duration::from_secs(10);
    let mut h = Harness::new(cfg);
    h.learn(2, 2);
    h.advance(Duration::from_secs(9));
    h.rx(1, &frame(mac(2), mac(1), None, 100));
    h.poll();
    assert_eq!(h.sent.len(), 1, "still known after 9 s");
    h.clear();
    h.advance(Duration::from_secs(1));
    h.rx(0, &frame(mac(2), mac(7), None, 100));
    h.poll();
    assert_eq!(h.sent.len(), 2, "flooded again once aged");
    h.bridge.age_fdb(h.now);
    let e = h.bridge.fdb_entries();
    assert!(e.iter().all(|e| e.mac != "02:00:00:00:10:02"), "{e:?}");
    assert!(h.bridge.stats().fdb.aged >= 1);
}

#[test]
fn vlans_learn_separately() {
    let mut h = four_ports();
    // mac(2) known in VLAN 10 on port 2 only.
    h.rx(2, &frame([0xff; 6], mac(2), Some((0, 10)), 64));
    h.poll();
    h.clear();
    h.rx(1, &frame(mac(2), mac(1), Some((0, 10)), 100));
    h.poll();
    assert_eq!(h.sent.len(), 1);
    assert_eq!(h.sent[0].port, PortId(2));
    h.clear();
    h.rx(1, &frame(mac(2), mac(1), Some((0, 20)), 100));
    h.poll();
    assert_eq!(h.sent.len(), 3, "unknown in VLAN 20: flooded");
    let e = h.bridge.fdb_entries();
    assert!(e.iter().any(|e| e.vid == 10 && e.port == 2));
}

#[test]
fn static_entries_win_over_learning() {
    let mut cfg = BridgeConfig::with_ports(Harness::ports(3));
    cfg.fdb.static_entries.push(StaticEntry {
        mac: cnm_proto::wire::EthernetAddress(mac(7)),
        vid: None,
        port: "p2".into(),
    });
    let mut h = Harness::new(cfg);
    h.rx(0, &frame(mac(7), mac(1), None, 100));
    h.poll();
    assert_eq!(h.sent.len(), 1);
    assert_eq!(h.sent[0].port, PortId(2));
    h.clear();
    // mac(7) appears as a source on port 1: the static entry stays.
    h.rx(1, &frame([0xff; 6], mac(7), None, 60));
    h.poll();
    h.clear();
    h.advance(Duration::from_secs(1000));
    h.rx(0, &frame(mac(7), mac(1), None, 100));
    h.poll();
    assert_eq!(h.sent.len(), 1);
    assert_eq!(h.sent[0].port, PortId(2));
    assert!(h.bridge.fdb_entries().iter().any(|e| e.is_static));
}

#[test]
fn fdb_bound_refuses_and_counts() {
    let mut cfg = BridgeConfig::with_ports(Harness::ports(2));
    cfg.fdb.max_entries = 4;
    let mut h = Harness::new(cfg);
    for n in 0..10 {
        h.rx(0, &frame([0xff; 6], mac(n), None, 60));
    }
    let s = h.bridge.stats().fdb;
    assert_eq!(s.dynamic_entries, 4);
    assert_eq!(s.refused_full, 6);
}

#[test]
fn malformed_frames_are_counted_drops() {
    let mut h = four_ports();
    h.rx(0, &[]);
    h.rx(0, &[0u8; 13]);
    // VLAN tag announced, cut short.
    let mut f = frame(mac(2), mac(1), None, 60);
    f[12..14].copy_from_slice(&[0x81, 0x00]);
    f.truncate(15);
    h.rx(0, &f);
    // Reserved VID 0xFFF.
    h.rx(0, &frame(mac(2), mac(1), Some((0, 0xFFF)), 64));
    // Truncated MAC control.
    let mut m = pause_frame(mac(1), 5);
    m.truncate(20);
    h.rx(0, &m);
    // Too long.
    h.rx(0, &vec![0u8; 10_000]);
    h.poll();
    assert!(h.sent.is_empty());
    let st = h.bridge.stats();
    assert_eq!(st.ports[0].drop_reasons.malformed, 5);
    assert_eq!(st.ports[0].drop_reasons.too_long, 1);
    assert_eq!(st.ports[0].drops, 6);
    assert_eq!(st.ports[0].rx_frames, 6);
    let mut n = 0;
    h.bridge.drain_events(&mut |_| n += 1);
    assert_eq!(n, 6);
}

#[test]
fn mac_control_is_consumed_not_forwarded() {
    let mut h = four_ports();
    h.rx(1, &pause_frame(mac(1), 0));
    let mut other = pause_frame(mac(1), 0);
    other[14..16].copy_from_slice(&[0x00, 0x02]);
    h.rx(1, &other);
    h.poll();
    assert!(h.sent.is_empty());
    let st = h.bridge.stats();
    assert_eq!(st.ports[1].pause_rx, 1);
    assert_eq!(st.ports[1].drops, 0);
    assert!(
        h.bridge.fdb_entries().is_empty(),
        "MAC control is not learned from"
    );
}

#[test]
fn port_down_drops_and_flushes() {
    let mut h = four_ports();
    h.learn(2, 2);
    h.bridge.set_port_up(h.now, PortId(2), false);
    h.rx(1, &frame(mac(2), mac(1), None, 100));
    h.rx(2, &frame(mac(1), mac(2), None, 100));
    h.poll();
    // mac(2)'s entry was flushed: flooded to 0 and 3, not 2.
    let mut p: Vec<u16> = h.sent.iter().map(|s| s.port.0).collect();
    p.sort();
    assert_eq!(p, vec![0, 3]);
    assert_eq!(h.bridge.stats().ports[2].drop_reasons.port_down, 1);
    h.bridge.set_port_up(h.now, PortId(2), true);
    h.clear();
    h.rx(1, &frame(mac(2), mac(1), None, 100));
    h.poll();
    assert_eq!(h.sent.len(), 3);
    let mut links = 0;
    h.bridge.drain_events(&mut |e| {
        if matches!(e, cp_switch::Event::Link { .. }) {
            links += 1;
        }
    });
    assert_eq!(links, 2);
    let _ = Instant::ZERO;
}

#[test]
fn random_bytes_never_panic_and_are_accounted() {
    use cnm_proto::rng::Rng;
    let mut cfg = BridgeConfig::with_ports(Harness::ports(4));
    cfg.lossless.mode = cp_switch::LosslessMode::Pfc;
    cfg.ports[1].rate = Some(cnm_proto::Rate::from_mbps(50));
    cfg.ports[2].delay = Duration::from_micros(20);
    let mut h = Harness::new(cfg);
    let mut rng = Rng::new(99);
    let mut buf = vec![0u8; 2000];
    let mut rx = [0u64; 4];
    for i in 0..20_000 {
        let len = rng.below(200) as usize;
        for b in buf.iter_mut().take(len) {
            *b = rng.next_u64() as u8;
        }
        // Sometimes make it look like a tagged frame or MAC control.
        if len > 18 && i % 3 == 0 {
            buf[12..14].copy_from_slice(if i % 2 == 0 {
                &[0x81, 0x00]
            } else {
                &[0x88, 0x08]
            });
        }
        let port = rng.below(5) as u16; // port 4 does not exist
        h.rx(port, &buf[..len]);
        if let Some(r) = rx.get_mut(usize::from(port)) {
            *r += 1;
        }
        if i % 16 == 0 {
            h.advance(Duration::from_micros(3));
            h.poll();
            h.clear();
        }
    }
    h.run_until(h.now + Duration::from_secs(1));
    let st = h.bridge.stats();
    for (p, n) in st.ports.iter().zip(rx) {
        assert_eq!(p.rx_frames, n);
    }
}
