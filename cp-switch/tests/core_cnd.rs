//! Congestion-notification-domain defence: CN-TAGs removed at `edge` and `interior` ports,
//! CNPV priorities remapped on input at `edge` ports, no congestion points on `disabled` ones
//! (802.1Q clause 32.4; QCN-REFERENCE §1).
#![allow(clippy::unwrap_used)]

mod core_support;

use cnm_proto::wire;
use core_support::*;
use cp_switch::config::{alternate_priority, CndDefense};
use cp_switch::{BridgeConfig, PortConfig};

/// A frame from `src` to `dst` carrying a CN-TAG with `rpid` (after the VLAN tag, if any).
fn cn_tagged(dst: [u8; 6], src: [u8; 6], tag: Option<(u8, u16)>, rpid: u16, len: usize) -> Vec<u8> {
    let f = frame(dst, src, tag, len);
    let at = if tag.is_some() { 16 } else { 12 };
    let mut out = f[..at].to_vec();
    out.extend_from_slice(&[0x22, 0xE9]);
    out.extend_from_slice(&rpid.to_be_bytes());
    out.extend_from_slice(&f[at..]);
    out
}

fn bridge(defence: [CndDefense; 3]) -> Harness {
    let ports = (0..3)
        .map(|i| {
            let mut p = PortConfig::new(format!("p{i}"));
            p.cnd_defense = defence[i];
            p
        })
        .collect();
    let mut h = Harness::new(BridgeConfig::with_ports(ports));
    h.learn(1, 0);
    h.learn(2, 1);
    h.learn(3, 2);
    h
}

#[test]
fn edge_and_interior_ports_remove_the_cn_tag() {
    let mut h = bridge([
        CndDefense::InteriorReady,
        CndDefense::Edge,
        CndDefense::Interior,
    ]);
    for tag in [None, Some((3, 10))] {
        if let Some((_, vid)) = tag {
            // Learn the hosts in VLAN 10 too.
            for (host, port) in [(1, 0), (2, 1), (3, 2)] {
                h.rx(port, &frame([0xff; 6], mac(host), Some((0, vid)), 60));
            }
            h.poll();
        }
        h.clear();
        let before = h.bridge.stats().ports[1].tx_bytes;
        let f = cn_tagged(mac(2), mac(1), tag, 0x0101, 200);
        h.rx(0, &f);
        h.rx(0, &cn_tagged(mac(3), mac(1), tag, 0x0102, 200));
        h.rx(1, &cn_tagged(mac(1), mac(2), tag, 0x0103, 200));
        h.poll();
        for (port, rpid) in [(1u16, None), (2, None), (0, Some(0x0103))] {
            let out = h.data_out(port);
            assert_eq!(out.len(), 1, "port {port}: {out:?}");
            let info = wire::walk(&out[0].bytes).unwrap();
            assert_eq!(info.rpid, rpid, "port {port}");
            // Everything else is the frame as received, 4 octets shorter when stripped.
            let want = 204 - if rpid.is_none() { 4 } else { 0 };
            assert_eq!(out[0].bytes.len(), want, "port {port}");
            assert_eq!(info.vlan.map(|v| v.vid), tag.map(|t| t.1));
            assert_eq!(info.ethertype, wire::EtherType::Unknown(0x88B6));
        }
        // The port counts the octets it sent: the frame without its tag.
        assert_eq!(h.bridge.stats().ports[1].tx_bytes - before, 200);
        let stripped = &h.data_out(1)[0].bytes;
        let mut want = f.clone();
        let at = if tag.is_some() { 16 } else { 12 };
        want.drain(at..at + 4);
        assert_eq!(stripped, &want);
    }
    let st = h.bridge.stats();
    assert_eq!(st.ports[1].cn_tag_stripped, 2);
    assert_eq!(st.ports[2].cn_tag_stripped, 2);
    assert_eq!(st.ports[0].cn_tag_stripped, 0);
}

#[test]
fn frames_without_a_cn_tag_pass_edge_ports_unchanged() {
    let mut h = bridge([
        CndDefense::InteriorReady,
        CndDefense::Edge,
        CndDefense::Edge,
    ]);
    let f = frame(mac(2), mac(1), Some((1, 7)), 300);
    h.rx(0, &f);
    h.poll();
    assert_eq!(h.data_out(1)[0].bytes, f);
    assert_eq!(h.bridge.stats().ports[1].cn_tag_stripped, 0);
}

#[test]
fn edge_ports_keep_outside_traffic_out_of_the_cnpv_queues() {
    // CNPV 3 (the default); the edge port p1 remaps priority 3 to 2.
    let mut h = bridge([
        CndDefense::InteriorReady,
        CndDefense::Edge,
        CndDefense::Interior,
    ]);
    let mut pcps = Vec::new();
    for (port, src, pcp) in [(1, 2, 3), (1, 2, 5), (2, 3, 3)] {
        h.clear();
        h.rx(port, &frame(mac(1), mac(src), Some((pcp, 10)), 200));
        h.poll();
        let out = h.data_out(0);
        pcps.push(wire::walk(&out[0].bytes).unwrap().vlan.unwrap().pcp);
    }
    assert_eq!(pcps, vec![2, 5, 3]);
    let st = h.bridge.stats();
    assert_eq!(st.ports[1].cn_remapped, 1);
    assert_eq!(st.ports[2].cn_remapped, 0);
    // Untagged frames at the port's default priority 3 are queued at 2 as well.
    let mut cfg = BridgeConfig::with_ports(Harness::ports(2));
    cfg.ports[1].cnd_defense = CndDefense::Edge;
    cfg.default_priority = 3;
    let mut h = Harness::new(cfg);
    h.rx(1, &frame(mac(1), mac(2), None, 200));
    assert_eq!(h.bridge.output_queue_bytes(cp_switch::PortId(0), 2), 200);
    assert_eq!(h.bridge.output_queue_bytes(cp_switch::PortId(0), 3), 0);
    // Summed over the priorities; a port the bridge lacks holds nothing.
    h.rx(1, &frame(mac(1), mac(2), Some((5, 10)), 300));
    assert_eq!(h.bridge.output_queue_bytes(cp_switch::PortId(0), 5), 300);
    assert_eq!(h.bridge.port_queue_bytes(cp_switch::PortId(0)), (500, 0));
    assert_eq!(h.bridge.port_queue_bytes(cp_switch::PortId(1)), (0, 0));
    assert_eq!(h.bridge.port_queue_bytes(cp_switch::PortId(9)), (0, 0));
}

#[test]
fn alternate_priority_follows_the_standard_rule() {
    // Next lower non-CNPV, else next higher.
    assert_eq!(alternate_priority(0b0000_1000, 3), Some(2));
    assert_eq!(alternate_priority(0b0000_1111, 3), Some(4));
    assert_eq!(alternate_priority(0b0000_0001, 0), Some(1));
    assert_eq!(alternate_priority(0b0010_1000, 5), Some(4));
    assert_eq!(alternate_priority(0xFF, 4), None);
    // A configured alternate priority wins, and must not be a CNPV.
    let mut cfg = BridgeConfig::with_ports(Harness::ports(2));
    cfg.ports[1].cnd_defense = CndDefense::Edge;
    cfg.ports[1].alternate_priority = Some(0);
    let mut h = Harness::new(cfg.clone());
    h.rx(1, &frame(mac(1), mac(2), Some((3, 1)), 100));
    assert_eq!(h.bridge.output_queue_bytes(cp_switch::PortId(0), 0), 100);
    cfg.ports[1].alternate_priority = Some(3);
    let e = cfg.validate().unwrap_err();
    assert!(e.to_string().contains("ports[1].alternate_priority"), "{e}");
    cfg.ports[1].alternate_priority = None;
    cfg.cp.cnpv = (0..8).collect();
    let e = cfg.validate().unwrap_err();
    assert!(e.to_string().contains("ports[1].cnd_defense"), "{e}");
}

#[test]
fn disabled_ports_have_no_congestion_points() {
    let mut cfg = BridgeConfig::with_ports(Harness::ports(3));
    cfg.ports[2].cnd_defense = CndDefense::Disabled;
    let h = Harness::new(cfg);
    let ports: Vec<String> = h.bridge.cp_stats().iter().map(|c| c.port.clone()).collect();
    assert_eq!(ports, vec!["p0", "p1"]);
}

#[test]
fn defence_modes_parse_from_toml() {
    let cfg: BridgeConfig = toml::from_str(
        r#"
        [[ports]]
        name = "up"
        [[ports]]
        name = "host"
        cnd_defense = "edge"
        alternate_priority = 1
        [[ports]]
        name = "peer"
        cnd_defense = "interior"
        "#,
    )
    .unwrap();
    // The file's default is `auto` (safe for a plain neighbour; see auto_mode_* below).
    assert_eq!(cfg.ports[0].cnd_defense, CndDefense::Auto);
    assert_eq!(cfg.ports[1].cnd_defense, CndDefense::Edge);
    assert_eq!(cfg.ports[1].alternate_priority, Some(1));
    assert_eq!(cfg.ports[2].cnd_defense, CndDefense::Interior);
    assert!(
        toml::from_str::<BridgeConfig>("[[ports]]\nname = \"a\"\ncnd_defense = \"outside\"\n")
            .is_err()
    );
}

#[test]
fn the_tag_is_removed_on_shaped_and_delayed_ports_too() {
    use cnm_proto::{Duration, Rate};
    let mut ports = Harness::ports(2);
    ports[1] = PortConfig::new("p1")
        .with_rate(Rate::from_bps(100_000_000))
        .with_delay(Duration::from_micros(50));
    ports[1].cnd_defense = CndDefense::Edge;
    let mut h = Harness::new(BridgeConfig::with_ports(ports));
    h.learn(1, 0);
    h.learn(2, 1);
    // Let the learning broadcasts leave the delay line.
    let t = h.now + Duration::from_millis(1);
    h.run_until(t);
    h.clear();
    for rpid in 1..=3 {
        h.rx(0, &cn_tagged(mac(2), mac(1), Some((3, 1)), rpid, 500));
    }
    let end = h.now + Duration::from_millis(1);
    h.run_until(end);
    let out = h.data_out(1);
    assert_eq!(out.len(), 3);
    for s in out {
        assert_eq!(s.bytes.len(), 500);
        assert_eq!(wire::walk(&s.bytes).unwrap().rpid, None);
    }
    let st = h.bridge.stats();
    assert_eq!(st.ports[1].cn_tag_stripped, 3);
}

/// An LLDPDU from a neighbour announcing `cn` (or no CN TLV when `None`) with `ttl`.
fn neighbour_lldp(cn: Option<(u8, u8)>, ttl: u16) -> Vec<u8> {
    let mut out = [0u8; 128];
    let src = wire::EthernetAddress(mac(9));
    match cn {
        Some((cnpv, ready)) => {
            let r = wire::lldp::LldpCnTlvRepr { cnpv, ready };
            let n = wire::lldp::build_lldp_frame(src, b"eth0", ttl, &r, &mut out).unwrap();
            out[..n].to_vec()
        }
        None => {
            // Chassis ID, Port ID, TTL, End: an LLDPDU of a station that is not CN-aware.
            let mut f = vec![0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e];
            f.extend_from_slice(&mac(9));
            f.extend_from_slice(&[0x88, 0xcc]);
            f.extend_from_slice(&[0x02, 0x07, 0x04]);
            f.extend_from_slice(&mac(9));
            f.extend_from_slice(&[0x04, 0x05, 0x07, b'e', b't', b'h', b'0']);
            f.extend_from_slice(&[0x06, 0x02]);
            f.extend_from_slice(&ttl.to_be_bytes());
            f.extend_from_slice(&[0x00, 0x00]);
            f.resize(60, 0);
            f
        }
    }
}

/// The LLDPDUs the bridge sent out of `port`, as (CNPV, Ready) of their CN TLV.
fn advertised(h: &Harness, port: u16) -> Vec<(u8, u8)> {
    h.out(port)
        .iter()
        .filter(|s| s.bytes[12..14] == [0x88, 0xcc])
        .map(|s| {
            let t = wire::lldp::find_cn_tlv(&s.bytes[14..]).unwrap().unwrap();
            (t.cnpv, t.ready)
        })
        .collect()
}

/// Whether a CN-tagged frame h1 (port 0) → h2 (port 1) leaves port 1 with its tag.
fn keeps_tag(h: &mut Harness) -> bool {
    h.clear();
    h.rx(0, &cn_tagged(mac(2), mac(1), Some((3, 1)), 0x0101, 200));
    h.poll();
    let out = h.data_out(1);
    let data: Vec<_> = out
        .iter()
        .filter(|s| s.bytes[12..14] != [0x88, 0xcc])
        .collect();
    assert_eq!(data.len(), 1, "{out:?}");
    wire::walk(&data[0].bytes).unwrap().rpid.is_some()
}

/// `auto` (802.1Q clause 32.4's automatic defence, QCN-REFERENCE §1): the port advertises the
/// bridge's CNPVs (priority 3: 0x08) with no Ready bit, and strips CN-TAGs towards a neighbour
/// that has not declared priority 3 Ready; a CN-aware neighbour's TLV makes it advertise
/// Ready at once (the handshake), its Ready bit lets tags through; an LLDPDU without a CN TLV,
/// a TTL running out, or the link going down take it back to stripping. Ingress is never
/// remapped (the CP on the port keeps sampling CNPV frames).
#[test]
fn auto_mode_follows_the_neighbours_cn_tlv() {
    let mut h = bridge([
        CndDefense::InteriorReady,
        CndDefense::Auto,
        CndDefense::InteriorReady,
    ]);
    // The first poll (in `bridge()`'s learning) advertised on the auto port only: CNPV bit 3,
    // Ready 0.
    let st = h.bridge.stats();
    assert_eq!(st.ports[1].lldp_tx, 1);
    assert_eq!(st.ports[0].lldp_tx + st.ports[2].lldp_tx, 0);
    assert_eq!(st.ports[1].cn_tag_kept, 0);
    // No neighbour yet: the tag is removed towards port 1.
    assert!(!keeps_tag(&mut h));
    assert_eq!(h.bridge.stats().ports[1].cn_tag_stripped, 1);

    // A CN-aware neighbour, not yet Ready: still stripped, but the port now advertises Ready.
    h.clear();
    h.rx(1, &neighbour_lldp(Some((0x08, 0x00)), 120));
    h.poll();
    assert_eq!(advertised(&h, 1), vec![(0x08, 0x08)]);
    assert!(!keeps_tag(&mut h));
    // Ready: tags pass.
    h.rx(1, &neighbour_lldp(Some((0x08, 0x08)), 120));
    h.poll();
    assert!(keeps_tag(&mut h));
    assert_eq!(h.bridge.stats().ports[1].cn_tag_kept, 0x08);
    // Nothing new to say: no LLDPDU on a repeated announcement.
    h.clear();
    h.rx(1, &neighbour_lldp(Some((0x08, 0x08)), 120));
    h.poll();
    assert!(advertised(&h, 1).is_empty());

    // The announcement lasts its TTL (120 s), then the port strips again and withdraws Ready;
    // the periodic announcement (every 30 s) went out meanwhile.
    h.clear();
    let t0 = h.now;
    h.run_until(t0 + cnm_proto::Duration::from_secs(119));
    let adv = advertised(&h, 1);
    assert!(
        adv.len() >= 3 && adv.iter().all(|a| *a == (0x08, 0x08)),
        "{adv:?}"
    );
    assert!(keeps_tag(&mut h));
    h.clear();
    h.run_until(t0 + cnm_proto::Duration::from_secs(121));
    // The withdrawal (and, in this window, also the 30 s periodic announcement).
    let adv = advertised(&h, 1);
    assert!(
        !adv.is_empty() && adv.iter().all(|a| *a == (0x08, 0x00)),
        "{adv:?}"
    );
    assert!(!keeps_tag(&mut h));

    // Ready again, then a neighbour that is not CN-aware (no CN TLV) replaces it.
    h.rx(1, &neighbour_lldp(Some((0x08, 0x08)), 120));
    h.poll();
    assert!(keeps_tag(&mut h));
    h.rx(1, &neighbour_lldp(None, 120));
    h.poll();
    assert!(!keeps_tag(&mut h));
    // A shutdown LLDPDU (TTL 0) also forgets it; and the link going down.
    h.rx(1, &neighbour_lldp(Some((0x08, 0x08)), 120));
    h.poll();
    h.rx(1, &neighbour_lldp(Some((0x08, 0x08)), 0));
    h.poll();
    assert!(!keeps_tag(&mut h));
    h.rx(1, &neighbour_lldp(Some((0x08, 0x08)), 120));
    h.poll();
    assert!(keeps_tag(&mut h));
    let now = h.now;
    h.bridge.set_port_up(now, cp_switch::PortId(1), false);
    h.clear();
    h.bridge.set_port_up(now, cp_switch::PortId(1), true);
    h.poll();
    // Back up: it announces itself (not Ready: it knows no neighbour) and strips.
    assert_eq!(advertised(&h, 1), vec![(0x08, 0x00)]);
    h.learn(2, 1);
    assert!(!keeps_tag(&mut h));
    // Ingress on the auto port is not remapped: a CNPV frame from port 1 stays at priority 3.
    assert_eq!(h.bridge.stats().ports[1].cn_remapped, 0);
}

#[test]
fn strip_and_advertise_rules_by_mode() {
    use cp_switch::stats::NeighbourCn;
    let ready3 = Some(NeighbourCn {
        cnpv: 0x08,
        ready: 0x08,
    });
    let aware3 = Some(NeighbourCn {
        cnpv: 0x28,
        ready: 0x00,
    });
    // Strip masks: static modes ignore the neighbour; auto keeps exactly CNPV ∧ Ready.
    assert_eq!(CndDefense::Disabled.strip_mask(None), 0);
    assert_eq!(CndDefense::InteriorReady.strip_mask(None), 0);
    assert_eq!(CndDefense::Edge.strip_mask(ready3), 0xff);
    assert_eq!(CndDefense::Interior.strip_mask(ready3), 0xff);
    assert_eq!(CndDefense::Auto.strip_mask(None), 0xff);
    assert_eq!(CndDefense::Auto.strip_mask(aware3), 0xff);
    assert_eq!(CndDefense::Auto.strip_mask(ready3), 0xf7);
    // Advertised Ready: the bridge's CNPVs (3 and 5: 0x28) the neighbour also declared.
    assert_eq!(CndDefense::Auto.advertised_ready(0x28, None), Some(0));
    assert_eq!(CndDefense::Auto.advertised_ready(0x28, ready3), Some(0x08));
    assert_eq!(CndDefense::Auto.advertised_ready(0x28, aware3), Some(0x28));
    assert_eq!(CndDefense::Edge.advertised_ready(0x28, aware3), None);
}
