//! Frames to the reserved group addresses 01-80-C2-00-00-00..0F (802.1Q-2018 clause 8.6.3,
//! Table 8-1) are never relayed: LLDP is consumed (its CN TLV remembered), the rest dropped and
//! counted; none of them is learned from.
#![allow(clippy::unwrap_used)]

mod core_support;

use cnm_proto::wire::lldp::build_lldp_frame;
use cnm_proto::wire::{EthernetAddress, LldpCnTlvRepr};
use core_support::*;
use cp_switch::stats::NeighbourCn;
use cp_switch::{BridgeConfig, Event};

fn reserved(last: u8) -> [u8; 6] {
    [0x01, 0x80, 0xC2, 0x00, 0x00, last]
}

/// A frame to `dst` with EtherType `ethertype` from host 1.
fn typed(dst: [u8; 6], ethertype: u16) -> Vec<u8> {
    let mut f = frame(dst, mac(1), None, 64);
    f[12..14].copy_from_slice(&ethertype.to_be_bytes());
    f
}

#[test]
fn reserved_group_addresses_are_never_relayed() {
    let mut h = Harness::new(BridgeConfig::with_ports(Harness::ports(3)));
    let mut sent = 0;
    for last in 0..=0x0Fu8 {
        if last == 0x0E {
            continue; // LLDP's address: below.
        }
        // STP BPDUs (LLC), LACP (Slow Protocols 0x8809), EAPOL (0x888E), and whatever else.
        for ethertype in [0x0026, 0x8809, 0x888E, 0x88B6] {
            h.rx(0, &typed(reserved(last), ethertype));
            sent += 1;
        }
    }
    h.rx(0, &typed(reserved(0x0E), 0x88B6));
    sent += 1;
    h.poll();
    assert!(h.sent.is_empty(), "relayed: {:?}", h.sent.len());
    let st = h.bridge.stats();
    assert_eq!(st.ports[0].drop_reasons.reserved_group, sent);
    assert_eq!(st.ports[0].drops, sent);
    assert_eq!(st.ports[0].flooded, 0);
    assert!(
        h.bridge.fdb_entries().is_empty(),
        "learned from a reserved frame"
    );
    let mut drop_events = 0;
    h.bridge.drain_events(&mut |e| {
        if matches!(e, Event::Drop { .. }) {
            drop_events += 1;
        }
    });
    assert_eq!(drop_events, sent);
    // 01-80-C2-00-00-10 (all LANs bridge management group) is not reserved: flooded.
    h.rx(0, &typed([0x01, 0x80, 0xC2, 0x00, 0x00, 0x10], 0x88B6));
    h.poll();
    assert_eq!(h.sent.len(), 2);
}

#[test]
fn lldp_is_consumed_and_its_cn_tlv_remembered() {
    let mut h = Harness::new(BridgeConfig::with_ports(Harness::ports(3)));
    let mut b = [0u8; 128];
    let cn = LldpCnTlvRepr {
        cnpv: 0b1000,
        ready: 0b1000,
    };
    let n = build_lldp_frame(EthernetAddress(mac(1)), b"eth0", 120, &cn, &mut b).unwrap();
    h.rx(1, &b[..n]);
    h.poll();
    assert!(h.sent.is_empty());
    let st = h.bridge.stats();
    assert_eq!(st.ports[1].lldp_rx, 1);
    assert_eq!(st.ports[1].drops, 0);
    assert_eq!(
        st.ports[1].neighbour_cn,
        Some(NeighbourCn {
            cnpv: 0b1000,
            ready: 0b1000
        })
    );
    assert_eq!(st.ports[0].neighbour_cn, None);
    // A truncated LLDPDU whose CN TLV runs past the frame is a malformed drop.
    let mut bad = b[..n].to_vec();
    let tlv = bad
        .windows(4)
        .position(|w| w == [0xFE, 0x06, 0x00, 0x80])
        .unwrap();
    bad[tlv + 1] = 0xFF; // information string length 255
    h.rx(1, &bad);
    let st = h.bridge.stats();
    assert_eq!(st.ports[1].drop_reasons.malformed, 1);
    assert_eq!(st.ports[1].lldp_rx, 1);
}
