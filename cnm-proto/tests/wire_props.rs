//! Property tests of `cnm_proto::wire`: every Repr survives emit then parse, and no parser,
//! walker or accessor panics on arbitrary bytes.
#![allow(clippy::unwrap_used)]

use cnm_proto::wire::cnm::{self, MAX_MSDU_LEN};
use cnm_proto::wire::{
    build_cnm, build_pause_frame, lldp, walk, CnTag, CnTagRepr, Cnm, CnmParams, CnmRepr, CpId,
    EtherType, EthernetAddress, EthernetFrame, EthernetRepr, FlowKey, LldpCnTlv, LldpCnTlvRepr,
    MacControl, MacControlRepr, RateFeedback, RateFeedbackRepr, VlanRepr, VlanTag,
};
use cnm_proto::Rate;
use proptest::prelude::*;

fn mac() -> impl Strategy<Value = EthernetAddress> {
    any::<[u8; 6]>().prop_map(EthernetAddress)
}

fn ethertype() -> impl Strategy<Value = EtherType> {
    any::<u16>().prop_map(EtherType::from)
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..=max)
}

fn ethernet_repr() -> impl Strategy<Value = EthernetRepr> {
    (mac(), mac(), ethertype()).prop_map(|(src_addr, dst_addr, ethertype)| EthernetRepr {
        src_addr,
        dst_addr,
        ethertype,
    })
}

fn vlan_repr() -> impl Strategy<Value = VlanRepr> {
    (0u8..8, any::<bool>(), 0u16..4096, ethertype()).prop_map(|(pcp, dei, vid, ethertype)| {
        VlanRepr {
            pcp,
            dei,
            vid,
            ethertype,
        }
    })
}

fn cn_tag_repr() -> impl Strategy<Value = CnTagRepr> {
    (any::<u16>(), ethertype()).prop_map(|(rpid, ethertype)| CnTagRepr { rpid, ethertype })
}

fn mac_control_repr() -> impl Strategy<Value = MacControlRepr> {
    prop_oneof![
        any::<u16>().prop_map(|quanta| MacControlRepr::Pause { quanta }),
        (any::<u16>(), any::<[u16; 8]>()).prop_map(|(class_enable, times)| {
            MacControlRepr::Pfc {
                class_enable,
                times,
            }
        }),
        any::<u16>()
            .prop_filter("not a known opcode", |o| *o != 0x0001 && *o != 0x0101)
            .prop_map(|opcode| MacControlRepr::Unknown { opcode }),
    ]
}

/// The fields of a CnmRepr, with an owned MSDU.
type CnmFields = (u8, u8, u8, u64, i16, i16, u8, EthernetAddress, Vec<u8>);

fn cnm_fields() -> impl Strategy<Value = CnmFields> {
    (
        0u8..16,
        0u8..64,
        0u8..64,
        any::<u64>(),
        any::<i16>(),
        any::<i16>(),
        0u8..8,
        mac(),
        bytes(MAX_MSDU_LEN),
    )
}

fn cnm_repr(f: &CnmFields) -> CnmRepr<'_> {
    CnmRepr {
        version: f.0,
        reserved: f.1,
        qntz_fb: f.2,
        cpid: CpId(f.3),
        q_offset: f.4,
        q_delta: f.5,
        encap_priority: f.6,
        encap_dst: f.7,
        encap_msdu: &f.8,
    }
}

fn rate_feedback_repr() -> impl Strategy<Value = RateFeedbackRepr> {
    (any::<u8>(), 0u8..8, any::<u64>(), any::<u64>(), mac()).prop_map(
        |(version, encap_priority, cpid, rate, encap_dst)| RateFeedbackRepr {
            version,
            encap_priority,
            cpid: CpId(cpid),
            rate: Rate::from_bps(rate),
            encap_dst,
        },
    )
}

/// A frame: Ethernet header, optional VLAN tag, optional CN-TAG, payload EtherType, payload.
#[derive(Clone, Debug)]
struct Sampled {
    dst: EthernetAddress,
    src: EthernetAddress,
    vlan: Option<VlanRepr>,
    rpid: Option<u16>,
    ethertype: u16,
    payload: Vec<u8>,
}

impl Sampled {
    fn bytes(&self) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&self.dst.0);
        f.extend_from_slice(&self.src.0);
        if let Some(v) = &self.vlan {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&v.tci().to_be_bytes());
        }
        if let Some(r) = self.rpid {
            f.extend_from_slice(&[0x22, 0xe9]);
            f.extend_from_slice(&r.to_be_bytes());
        }
        f.extend_from_slice(&self.ethertype.to_be_bytes());
        f.extend_from_slice(&self.payload);
        f
    }
}

fn sampled() -> impl Strategy<Value = Sampled> {
    (
        mac(),
        mac(),
        prop::option::of(vlan_repr()),
        prop::option::of(any::<u16>()),
        any::<u16>().prop_filter("a payload EtherType", |t| {
            !matches!(t, 0x8100 | 0x88a8 | 0x22e9)
        }),
        bytes(200),
    )
        .prop_map(|(dst, src, vlan, rpid, ethertype, payload)| Sampled {
            dst,
            src,
            vlan,
            rpid,
            ethertype,
            payload,
        })
}

fn params() -> impl Strategy<Value = CnmParams> {
    (
        mac(),
        any::<u64>(),
        1u8..64,
        any::<i16>(),
        any::<i16>(),
        0u8..8,
        0u8..8,
        0usize..100,
    )
        .prop_map(
            |(cp_mac, cpid, qntz_fb, q_offset, q_delta, cnm_priority, default_priority, max)| {
                CnmParams {
                    cp_mac,
                    cpid: CpId(cpid),
                    qntz_fb,
                    q_offset,
                    q_delta,
                    cnm_priority,
                    default_priority,
                    max_msdu: max,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn ethernet_round_trip(r in ethernet_repr(), payload in bytes(8)) {
        let mut buf = vec![0xa5; r.buffer_len() + payload.len()];
        let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
        r.emit(&mut f);
        f.payload_mut().copy_from_slice(&payload);
        let f = EthernetFrame::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(EthernetRepr::parse(&f).unwrap(), r);
        prop_assert_eq!(f.payload(), &payload[..]);
    }

    #[test]
    fn vlan_round_trip(r in vlan_repr()) {
        let mut buf = vec![0xa5; r.buffer_len()];
        r.emit(&mut VlanTag::new_unchecked(&mut buf[..]));
        prop_assert_eq!(VlanRepr::parse(&VlanTag::new_checked(&buf[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn cn_tag_round_trip(r in cn_tag_repr()) {
        let mut buf = vec![0xa5; r.buffer_len()];
        r.emit(&mut CnTag::new_unchecked(&mut buf[..]));
        prop_assert_eq!(CnTagRepr::parse(&CnTag::new_checked(&buf[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn mac_control_round_trip(r in mac_control_repr()) {
        let mut buf = vec![0xa5; r.buffer_len()];
        r.emit(&mut MacControl::new_unchecked(&mut buf[..]));
        let m = MacControl::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(MacControlRepr::parse(&m).unwrap(), r);
        // And through a whole frame.
        let mut frame = [0xa5u8; 60];
        let src = EthernetAddress([2, 0, 0, 0, 0, 1]);
        prop_assert_eq!(build_pause_frame(src, &r, &mut frame).unwrap(), 60);
        let info = walk(&frame).unwrap();
        prop_assert_eq!(info.ethertype, EtherType::MacControl);
        let m = MacControl::new_checked(&frame[info.payload_offset..]).unwrap();
        prop_assert_eq!(MacControlRepr::parse(&m).unwrap(), r);
    }

    #[test]
    fn cnm_round_trip(f in cnm_fields(), pad in 0usize..40) {
        let r = cnm_repr(&f);
        let mut buf = vec![0xa5; r.buffer_len() + pad];
        r.emit(&mut Cnm::new_unchecked(&mut buf[..]));
        let c = Cnm::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(CnmRepr::parse(&c).unwrap(), r);
        prop_assert!(buf[r.buffer_len()..].iter().all(|&b| b == 0xa5));
    }

    #[test]
    fn lldp_cn_round_trip(cnpv in any::<u8>(), ready in any::<u8>()) {
        let r = LldpCnTlvRepr { cnpv, ready };
        let mut buf = vec![0xa5; r.buffer_len()];
        r.emit(&mut LldpCnTlv::new_unchecked(&mut buf[..]));
        prop_assert_eq!(LldpCnTlvRepr::parse(&LldpCnTlv::new_checked(&buf[..]).unwrap()).unwrap(), r);
        let mut frame = [0u8; 80];
        let n = lldp::build_lldp_frame(EthernetAddress([2, 0, 0, 0, 0, 9]), b"x", 5, &r, &mut frame)
            .unwrap();
        prop_assert_eq!(lldp::find_cn_tlv(&frame[14..n]).unwrap(), Some(r));
    }

    #[test]
    fn rate_feedback_round_trip(r in rate_feedback_repr()) {
        let mut buf = vec![0xa5; r.buffer_len()];
        r.emit(&mut RateFeedback::new_unchecked(&mut buf[..]));
        let m = RateFeedback::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(RateFeedbackRepr::parse(&m).unwrap(), r);
    }

    #[test]
    fn walk_finds_what_was_built(s in sampled(), default in 0u8..8) {
        let f = s.bytes();
        let i = walk(&f).unwrap();
        prop_assert_eq!(i.dst, s.dst);
        prop_assert_eq!(i.src, s.src);
        prop_assert_eq!(i.vlan.map(|v| (v.pcp, v.dei, v.vid)), s.vlan.map(|v| (v.pcp, v.dei, v.vid)));
        prop_assert_eq!(i.vlan_offset, s.vlan.map(|_| 12));
        prop_assert_eq!(i.rpid, s.rpid);
        prop_assert_eq!(i.ethertype, EtherType::from(s.ethertype));
        prop_assert_eq!(i.payload_offset, f.len() - s.payload.len());
        prop_assert_eq!(i.priority(default), s.vlan.map_or(default, |v| v.pcp));
        let k = FlowKey::extract(&f, default).unwrap();
        prop_assert_eq!(k.rpid, s.rpid.unwrap_or(0));
        prop_assert_eq!(k.vid, s.vlan.map_or(0, |v| v.vid));
    }

    /// build_cnm on any frame with any parameters: every field where the contract puts it.
    #[test]
    fn build_cnm_fields(s in sampled(), p in params(), out_len in 0usize..160) {
        let f = s.bytes();
        let mut out = vec![0xa5; out_len];
        let tags = 4 * usize::from(s.vlan.is_some()) + 4 * usize::from(s.rpid.is_some());
        let msdu_start = 12 + 4 * usize::from(s.vlan.is_some());
        let msdu_len = p.max_msdu.min(64).min(f.len() - msdu_start);
        let want_len = (14 + tags + 24 + msdu_len).max(60);
        match build_cnm(&f, &p, &mut out) {
            Err(e) => {
                prop_assert_eq!(e, cnm_proto::wire::Error::BufferTooSmall);
                prop_assert!(out_len < want_len);
            }
            Ok(n) => {
                prop_assert_eq!(n, want_len);
                prop_assert!(out[n..].iter().all(|&b| b == 0xa5));
                let (info, r) = cnm::parse_frame(&out[..n]).unwrap();
                prop_assert_eq!(info.dst, s.src);
                prop_assert_eq!(info.src, p.cp_mac);
                prop_assert_eq!(info.vlan.map(|v| (v.pcp, v.dei, v.vid)),
                    s.vlan.map(|v| (p.cnm_priority, v.dei, v.vid)));
                prop_assert_eq!(info.rpid, s.rpid);
                prop_assert_eq!(r.version, 0);
                prop_assert_eq!(r.reserved, 0);
                prop_assert_eq!(r.qntz_fb, p.qntz_fb);
                prop_assert_eq!(r.cpid, p.cpid);
                prop_assert_eq!(r.q_offset, p.q_offset);
                prop_assert_eq!(r.q_delta, p.q_delta);
                prop_assert_eq!(r.encap_priority, s.vlan.map_or(p.default_priority, |v| v.pcp));
                prop_assert_eq!(r.encap_dst, s.dst);
                prop_assert_eq!(r.encap_msdu, &f[msdu_start..msdu_start + msdu_len]);
            }
        }
    }

    /// Arbitrary bytes through every parser and every accessor of every checked view.
    #[test]
    fn arbitrary_bytes_never_panic(b in bytes(120), default in any::<u8>()) {
        if let Ok(i) = walk(&b) {
            let _ = i.priority(default);
            prop_assert!(i.payload_offset <= b.len());
            prop_assert!(i.after_vlan_offset() < i.payload_offset);
        }
        let _ = FlowKey::extract(&b, default);
        let _ = cnm::parse_frame(&b);
        let _ = lldp::find_cn_tlv(&b);

        if let Ok(f) = EthernetFrame::new_checked(&b[..]) {
            let _ = (f.dst_addr(), f.src_addr(), f.ethertype(), f.payload());
            EthernetRepr::parse(&f).unwrap();
        }
        if let Ok(t) = VlanTag::new_checked(&b[..]) {
            let _ = (t.tci(), t.pcp(), t.dei(), t.vid(), t.ethertype(), t.payload());
            VlanRepr::parse(&t).unwrap();
        }
        if let Ok(t) = CnTag::new_checked(&b[..]) {
            let _ = (t.rpid(), t.ethertype(), t.payload());
            CnTagRepr::parse(&t).unwrap();
        }
        if let Ok(m) = MacControl::new_checked(&b[..]) {
            let _ = (m.opcode(), m.pause_time(), m.class_enable(), m.pfc_times(), m.reserved());
            for p in 0..16 {
                let _ = m.pfc_time(p);
            }
            MacControlRepr::parse(&m).unwrap();
        }
        match Cnm::new_checked(&b[..]) {
            Ok(c) => {
                let _ = (c.version(), c.reserved(), c.qntz_fb(), c.cpid(), c.q_offset(),
                    c.q_delta(), c.encap_priority(), c.encap_priority_field(), c.encap_dst());
                prop_assert!(usize::from(c.encap_msdu_len()) <= 64);
                prop_assert_eq!(c.encap_msdu().len(), usize::from(c.encap_msdu_len()));
                prop_assert!(c.pdu_len() <= b.len());
                CnmRepr::parse(&c).unwrap();
            }
            Err(_) => prop_assert!(
                b.len() < 24
                    || usize::from(u16::from_be_bytes([b[22], b[23]])) > (b.len() - 24).min(64)
            ),
        }
        if let Ok(t) = LldpCnTlv::new_checked(&b[..]) {
            let _ = (t.tlv_type(), t.tlv_len(), t.oui(), t.subtype(), t.cnpv(), t.ready());
            let _ = LldpCnTlvRepr::parse(&t);
        }
        if let Ok(m) = RateFeedback::new_checked(&b[..]) {
            let _ = (m.version(), m.reserved(), m.encap_priority(), m.encap_priority_field(),
                m.cpid(), m.rate(), m.encap_dst());
            RateFeedbackRepr::parse(&m).unwrap();
        }
    }

    /// Arbitrary bytes as a sampled frame: build_cnm returns Ok or an error, and an Ok CNM parses.
    #[test]
    fn build_cnm_on_arbitrary_bytes(b in bytes(120), p in params(), out_len in 0usize..160) {
        let mut out = vec![0u8; out_len];
        if let Ok(n) = build_cnm(&b, &p, &mut out) {
            prop_assert!(n >= 60 && n <= out_len);
            let (_, r) = cnm::parse_frame(&out[..n]).unwrap();
            prop_assert!(r.encap_msdu.len() <= p.max_msdu.min(64));
        }
    }

    /// Arbitrary bytes behind valid L2 headers reach the IP and LLDP parsers.
    #[test]
    fn arbitrary_l3_never_panics(ty in prop_oneof![Just(0x0800u16), Just(0x86dd), Just(0x88cc)],
                                 first in any::<u8>(), b in bytes(100)) {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
        f.extend_from_slice(&ty.to_be_bytes());
        f.push(first & 0x0f | if ty == 0x0800 { 0x40 } else { 0x60 });
        f.extend_from_slice(&b);
        let _ = FlowKey::extract(&f, 0).unwrap();
        let _ = lldp::find_cn_tlv(&f[14..]);
    }
}
