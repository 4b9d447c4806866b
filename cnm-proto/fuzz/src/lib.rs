//! The bodies of the fuzz targets, as plain functions.
//!
//! Each cargo-fuzz target in `fuzz_targets/` is one line calling the function of the same name
//! here, so the same bodies also run on a stable toolchain in the ordinary test suite
//! (`testbed/tests/fuzz_smoke.rs` replays every target's kept corpus, `corpus/<target>/`, and a
//! few seconds of seeded random inputs). A body panics exactly when it finds a bug: every parser
//! must refuse bad input with an error, and what it accepts must survive a round trip.
//!
//! Targets: the wire parsers of `cnm_proto::wire` (one per parser), the bridge core fed with
//! arbitrary frames (`bridge`), the control-socket command parsers of both daemons
//! (`ctl_command`) and the configuration loaders (`switch_config`, `agent_config`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cnm_proto::wire::cnm::{self, build_cnm, Cnm, CnmParams, CnmRepr, CpId};
use cnm_proto::wire::lldp::{find_cn_tlv, LldpCnTlv, LldpCnTlvRepr};
use cnm_proto::wire::{
    walk, CnTag, CnTagRepr, EthernetAddress, EthernetFrame, EthernetRepr, FlowKey, MacControl,
    MacControlRepr, RateFeedback, RateFeedbackRepr, VlanRepr, VlanTag,
};

/// The command parser of the switch's control socket (`cp-switch ctl ...`).
#[path = "../../../cp-switch/src/daemon/ctl.rs"]
#[allow(dead_code, unused_imports)]
mod switch_ctl;

/// The command parser of the agent's control socket (`rp-agent ctl ...`).
#[path = "../../../rp-agent/src/daemon/ctl.rs"]
#[allow(dead_code, unused_imports)]
mod agent_ctl;

/// The body of a target.
pub type Body = fn(&[u8]);

/// Every target: its name (the corpus directory and the cargo-fuzz binary) and its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("ethernet", ethernet),
    ("vlan", vlan),
    ("cn_tag", cn_tag),
    ("cnm", cnm),
    ("mac_control", mac_control),
    ("lldp_cn", lldp_cn),
    ("rate_feedback", rate_feedback),
    ("flow", flow),
    ("generated", generated),
    ("bridge", bridge),
    ("ctl_command", ctl_command),
    ("switch_config", switch_config),
    ("agent_config", agent_config),
];

/// The generated frames' departure stamp on arbitrary bytes: where the field is, it lies
/// inside the frame, reads back what was written, and writing it changes those 8 octets only.
pub fn generated(data: &[u8]) {
    use cnm_proto::wire::generated::{departure, departure_offset, set_departure};
    use cnm_proto::Instant;
    let at = departure_offset(data);
    let mut copy = data.to_vec();
    let wrote = set_departure(&mut copy, Instant::from_nanos(0x0102_0304_0506_0708));
    assert_eq!(wrote, at.is_some());
    match at {
        None => {
            assert_eq!(departure(data), None);
            assert_eq!(copy, data, "a frame without the field is left alone");
        }
        Some(off) => {
            assert!(off + 8 <= data.len());
            assert_eq!(
                departure(&copy),
                Some(Instant::from_nanos(0x0102_0304_0506_0708))
            );
            assert_eq!(&copy[..off], &data[..off]);
            assert_eq!(&copy[off + 8..], &data[off + 8..]);
        }
    }
}

/// Ethernet header view and the one-pass L2 walk on arbitrary bytes.
pub fn ethernet(data: &[u8]) {
    if let Ok(f) = EthernetFrame::new_checked(data) {
        let _ = (f.dst_addr(), f.src_addr(), f.ethertype(), f.payload());
        let r = EthernetRepr::parse(&f).expect("a checked view parses");
        let mut buf = [0u8; 14];
        r.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..], &data[..14], "emit(parse(x)) == x");
    }
    if let Ok(i) = walk(data) {
        assert!(i.payload_offset <= data.len());
        assert!(i.after_vlan_offset() + 2 <= i.payload_offset);
        if let Some(off) = i.cn_tag_offset {
            assert_eq!(&data[off..off + 2], &[0x22, 0xe9]);
        }
        let _ = i.priority(0);
    }
}

/// 802.1Q tag view and repr on arbitrary bytes.
pub fn vlan(data: &[u8]) {
    if let Ok(t) = VlanTag::new_checked(data) {
        let _ = (
            t.tci(),
            t.pcp(),
            t.dei(),
            t.vid(),
            t.ethertype(),
            t.payload(),
        );
        let r = VlanRepr::parse(&t).expect("a checked view parses");
        let mut buf = [0u8; 4];
        r.emit(&mut VlanTag::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..], &data[..4], "emit(parse(x)) == x");
    }
}

/// CN-TAG view and repr on arbitrary bytes.
pub fn cn_tag(data: &[u8]) {
    if let Ok(t) = CnTag::new_checked(data) {
        let _ = (t.rpid(), t.ethertype(), t.payload());
        let r = CnTagRepr::parse(&t).expect("a checked view parses");
        let mut buf = [0u8; 4];
        r.emit(&mut CnTag::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..], &data[..4], "emit(parse(x)) == x");
    }
}

/// CNM PDU view, repr and whole-frame parser on arbitrary bytes; the CNM builder with
/// parameters and sampled frame taken from the input.
pub fn cnm(data: &[u8]) {
    if let Ok(c) = Cnm::new_checked(data) {
        let _ = (
            c.version(),
            c.reserved(),
            c.qntz_fb(),
            c.cpid(),
            c.q_offset(),
            c.q_delta(),
            c.encap_priority(),
            c.encap_priority_field(),
            c.encap_dst(),
        );
        assert!(c.encap_msdu().len() <= 64);
        let r = CnmRepr::parse(&c).expect("a checked view parses");
        let mut buf = [0u8; 88];
        let n = r.buffer_len();
        r.emit(&mut Cnm::new_unchecked(&mut buf[..n]));
        let again = CnmRepr::parse(&Cnm::new_checked(&buf[..n]).expect("emitted PDU checks"));
        assert_eq!(again, Ok(r), "parse(emit(r)) == r");
    }
    let _ = cnm::parse_frame(data);

    // Builder: 4 octets of parameters, then the sampled frame.
    if let Some((p, sampled)) = data.split_first_chunk::<4>() {
        let params = CnmParams {
            cp_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
            cpid: CpId(u64::from(p[0]) << 8),
            qntz_fb: p[0],
            q_offset: i16::from(p[1]),
            q_delta: -i16::from(p[1]),
            cnm_priority: p[2],
            default_priority: p[2] >> 3,
            max_msdu: usize::from(p[3]),
        };
        let mut out = [0u8; 160];
        let out_len = 40 + usize::from(p[3] % 120);
        if let Ok(n) = build_cnm(sampled, &params, &mut out[..out_len]) {
            let (_, r) = cnm::parse_frame(&out[..n]).expect("a built CNM parses");
            assert_eq!(r.cpid, params.cpid);
            assert!(r.encap_msdu.len() <= params.max_msdu.min(64));
        }
    }
}

/// MAC Control (PAUSE / PFC) view and repr on arbitrary bytes.
pub fn mac_control(data: &[u8]) {
    if let Ok(m) = MacControl::new_checked(data) {
        let _ = (
            m.opcode(),
            m.pause_time(),
            m.class_enable(),
            m.pfc_times(),
            m.reserved(),
        );
        let r = MacControlRepr::parse(&m).expect("a checked view parses");
        let mut buf = [0u8; 46];
        r.emit(&mut MacControl::new_unchecked(&mut buf[..]));
        let again = MacControlRepr::parse(&MacControl::new_checked(&buf[..]).expect("checks"));
        assert_eq!(again, Ok(r), "parse(emit(r)) == r");
    }
}

/// LLDP CN TLV view and repr, and the TLV walk of a whole LLDPDU, on arbitrary bytes.
pub fn lldp_cn(data: &[u8]) {
    if let Ok(t) = LldpCnTlv::new_checked(data) {
        let _ = (
            t.tlv_type(),
            t.tlv_len(),
            t.oui(),
            t.subtype(),
            t.cnpv(),
            t.ready(),
        );
        if let Ok(r) = LldpCnTlvRepr::parse(&t) {
            let mut buf = [0u8; 8];
            r.emit(&mut LldpCnTlv::new_unchecked(&mut buf[..]));
            assert_eq!(&buf[2..], &data[2..8], "emit(parse(x)) == x");
        }
    }
    let _ = find_cn_tlv(data);
}

/// Rate feedback message view and repr on arbitrary bytes.
pub fn rate_feedback(data: &[u8]) {
    if let Ok(m) = RateFeedback::new_checked(data) {
        let _ = (m.reserved(), m.encap_priority_field());
        let r = RateFeedbackRepr::parse(&m).expect("a checked view parses");
        let mut buf = [0u8; 26];
        r.emit(&mut RateFeedback::new_unchecked(&mut buf[..]));
        let again = RateFeedbackRepr::parse(&RateFeedback::new_checked(&buf[..]).expect("checks"));
        assert_eq!(again, Ok(r), "parse(emit(r)) == r");
    }
}

/// Flow key extraction (L2 walk, IPv4/IPv6, TCP/UDP ports) on arbitrary bytes.
pub fn flow(data: &[u8]) {
    let default = data.first().copied().unwrap_or(0) & 7;
    match (FlowKey::extract(data, default), walk(data)) {
        (Ok(k), Ok(i)) => {
            assert_eq!((k.src, k.dst), (i.src, i.dst));
            assert_eq!(k.priority, i.priority(default));
        }
        (Err(a), Err(b)) => assert_eq!(a, b),
        _ => panic!("FlowKey::extract fails exactly when walk does"),
    }
}

/// The bridge core on arbitrary frames: the input is a sequence of records `port, len_hi,
/// len_lo, gap, frame...` fed to a three-port bridge (one port shaped to 10 Mb/s, lossless PFC
/// when the first octet is odd), polled between frames. Every frame must be counted as
/// received, and nothing may panic.
pub fn bridge(data: &[u8]) {
    use cnm_proto::rng::Rng;
    use cnm_proto::{Duration, Instant, Rate};
    use cp_switch::{Bridge, BridgeConfig, LosslessMode, PortConfig, PortId};

    let mut cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0"),
        PortConfig::new("p1").with_rate(Rate::from_mbps(10)),
        PortConfig::new("p2").with_rate(Rate::from_gbps(1)),
    ]);
    cfg.buffers.input = cnm_proto::Bytes::new(20_000);
    cfg.buffers.output = cnm_proto::Bytes::new(20_000);
    if data.first().is_some_and(|b| b & 1 == 1) {
        cfg.lossless.mode = LosslessMode::Pfc;
        cfg.lossless.qhigh = cnm_proto::Bytes::new(15_000);
        cfg.lossless.qlow = cnm_proto::Bytes::new(5_000);
    }
    cfg.cp.cnpv = vec![0, 3];
    let mut b = Bridge::new(cfg, Rng::new(7)).expect("a valid configuration");
    let mut now = Instant::from_nanos(1_000);
    let mut rest = data.get(1..).unwrap_or(&[]);
    let mut fed = [0u64; 3];
    while let [port, hi, lo, gap, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])) % 1600;
        let len = len.min(tail.len());
        let (frame, next) = tail.split_at(len);
        let p = usize::from(*port % 3);
        b.handle_frame(now, PortId(p as u16), frame);
        fed[p] += 1;
        now += Duration::from_micros(u64::from(*gap) * 10);
        b.poll_transmit(now, &mut |_, f| {
            assert!(!f.is_empty());
            true
        });
        if let Some(t) = b.poll_timeout() {
            assert!(t >= Instant::ZERO);
        }
        rest = next;
    }
    let st = b.stats();
    for (i, p) in st.ports.iter().enumerate() {
        assert_eq!(p.rx_frames, fed[i], "every frame is counted as received");
    }
    let _ = b.fdb_entries();
    b.drain_events(&mut |_| {});
}

/// The control-socket command parsers of both daemons on arbitrary text, one command per line
/// as the sockets read them, and the `set cp` / `set rp` operands applied to the default
/// settings and to a bridge: every line is a command or an error message, never a panic.
pub fn ctl_command(data: &[u8]) {
    use daemon_kit::patch::from_pairs;
    let text = String::from_utf8_lossy(data);
    let mut bridge: Option<cp_switch::Bridge> = None;
    for line in text.lines().take(16) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match switch_ctl::Command::parse(&words) {
            Ok(switch_ctl::Command::SetCp { set }) => {
                if let Ok(patch) = from_pairs::<cp_switch::CpPatch>(&set) {
                    if let Ok(cfg) = cp_switch::CpConfig::default().patched(&patch) {
                        assert!(cfg.validate().is_ok(), "patched returns valid settings");
                    }
                    let b = bridge.get_or_insert_with(|| {
                        cp_switch::Bridge::new(
                            cp_switch::BridgeConfig::with_ports(vec![
                                cp_switch::PortConfig::new("a"),
                                cp_switch::PortConfig::new("b"),
                            ]),
                            cnm_proto::rng::Rng::new(1),
                        )
                        .expect("a valid configuration")
                    });
                    let _ = b.apply_cp_patch(&patch);
                }
            }
            Ok(_) => {}
            Err(e) => assert!(!e.is_empty()),
        }
        match agent_ctl::Command::parse(&words) {
            Ok(agent_ctl::Command::SetRp { set }) => {
                if let Ok(patch) = from_pairs::<rp_agent::RpPatch>(&set) {
                    if let Ok(cfg) = rp_agent::config::AgentConfig::default().with_rp_patch(&patch)
                    {
                        assert!(
                            cfg.validate().is_ok(),
                            "with_rp_patch returns valid settings"
                        );
                    }
                }
            }
            Ok(agent_ctl::Command::SetRate(r)) => assert!(r.bps() > 0),
            Ok(_) => {}
            Err(e) => assert!(!e.is_empty()),
        }
    }
}

/// Sizes a configuration may ask for that this target still builds (octets or entries);
/// beyond them it stops at validation, so that a smoke run never asks the machine for more
/// memory than it has.
const BUILD_LIMIT: usize = 1 << 16;

/// The switch's configuration loader on arbitrary text: TOML onto `BridgeConfig`, then
/// validation, then (for sizes a test machine holds) the bridge itself.
pub fn switch_config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(cfg) = toml::from_str::<cp_switch::BridgeConfig>(&text) else {
        return;
    };
    if cfg.validate().is_err() {
        return;
    }
    let small = cfg.fdb.max_entries <= BUILD_LIMIT
        && cfg.event_capacity <= BUILD_LIMIT
        && cfg.buffers.control_frames <= BUILD_LIMIT
        && cfg.cp.max_flows <= BUILD_LIMIT
        && cfg.ports.len() <= 16;
    if small {
        let _ = cp_switch::Bridge::new(cfg, cnm_proto::rng::Rng::new(1));
    }
}

/// The agent's configuration loader on arbitrary text: TOML onto `AgentConfig`, validation,
/// then (for sizes a test machine holds) the agent itself.
pub fn agent_config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(cfg) = toml::from_str::<rp_agent::config::AgentConfig>(&text) else {
        return;
    };
    if cfg.validate().is_err() {
        return;
    }
    if cfg.event_capacity <= BUILD_LIMIT && cfg.max_flows <= BUILD_LIMIT {
        let _ = rp_agent::Agent::new(cfg, cnm_proto::rng::Rng::new(1));
    }
}
