//! Congestion points in the bridge core, driven in memory with a fake clock: CNM bytes field by
//! field, placement and CPID, what is never sampled, counters, events and determinism.
#![allow(clippy::unwrap_used)]

mod core_support;

use cnm_proto::rng::Rng;
use cnm_proto::wire::cnm::parse_frame;
use cnm_proto::wire::{CpId, EtherType, EthernetAddress};
use cnm_proto::{Bytes, Duration, Instant, Rate};
use core_support::*;
use cp_switch::{Bridge, BridgeConfig, Event, Placement, PortConfig, PortId};

/// The bridge MAC: port `i` sends from it with `i` added to the last octets; CPIDs start with it.
const BRIDGE_MAC: [u8; 6] = [0x02, 0xcc, 0, 0, 0, 0];
const VID: u16 = 10;
/// Frame length: a multiple of 64, so that Q − Qeq is an exact number of CNM queue units.
const LEN: usize = 1024;
/// Qeq, also a multiple of 64.
const QEQ: u64 = 25_600;

/// p0 ← h1, p1 ← h2 (senders, unshaped), p2 → h3 at 100 Mb/s (the bottleneck).
fn dumbbell(placement: Placement) -> BridgeConfig {
    let mut cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0"),
        PortConfig::new("p1"),
        PortConfig::new("p2").with_rate(Rate::from_mbps(100)),
    ]);
    cfg.mac = EthernetAddress(BRIDGE_MAC);
    cfg.cp.placement = placement;
    cfg.cp.cp_queue_set_point = Bytes::new(QEQ);
    cfg
}

/// A frame from host `src` to host `dst`, tagged (PCP `pcp`, VID 10) unless `pcp` is `None`,
/// EtherType `ethertype`, carrying `seq` right after the EtherType and then a counting pattern.
fn numbered(dst: u8, src: u8, pcp: Option<u8>, ethertype: u16, seq: u32) -> Vec<u8> {
    let mut f = Vec::with_capacity(LEN);
    f.extend_from_slice(&mac(dst));
    f.extend_from_slice(&mac(src));
    if let Some(p) = pcp {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&((u16::from(p) << 13) | VID).to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    while f.len() < LEN {
        f.push(f.len() as u8);
    }
    f
}

fn harness(cfg: BridgeConfig) -> Harness {
    let mut h = Harness::new(cfg);
    learn_all(&mut h);
    h
}

/// Teaches the bridge where h1, h2 and h3 are, untagged (PVID) and in VID 10.
fn learn_all(h: &mut Harness) {
    for (host, port) in [(1, 0), (2, 1), (3, 2)] {
        h.learn(host, port);
        let f = numbered(0xff, host, Some(0), 0x88B6, 0);
        let mut f = f;
        f[..6].copy_from_slice(&[0xff; 6]);
        h.rx(port, &f);
        h.poll();
        h.clear();
    }
}

/// Every `gap`, each sender `(port, host)` sends `mk(host, seq)` to h3; runs for `span`.
/// Returns every frame sent into the bridge, by sequence number.
fn drive(
    h: &mut Harness,
    senders: &[(u16, u8)],
    gap: Duration,
    span: Duration,
    mk: &dyn Fn(u8, u32) -> Vec<u8>,
) -> Vec<Vec<u8>> {
    let end = h.now + span;
    let mut sent_in = Vec::new();
    let mut next = h.now;
    while h.now < end {
        for &(port, host) in senders {
            let f = mk(host, sent_in.len() as u32);
            h.rx(port, &f);
            sent_in.push(f);
        }
        next += gap;
        h.run_until(next);
    }
    sent_in
}

/// The CNMs the bridge transmitted: (port, bytes).
fn cnms(h: &Harness) -> Vec<(PortId, Vec<u8>)> {
    h.sent
        .iter()
        .filter(|s| parse_frame(&s.bytes).is_ok())
        .map(|s| (s.port, s.bytes.clone()))
        .collect()
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// round(63·|Fb| / Fbmax) with |Fb| clamped, at least 1 — written out independently of the
/// library (802.1Q-2011 32.8.5; w = 2, Fbmax = 5·Qeq).
fn expected_qntz(q: i64, q_old: i64) -> u8 {
    let fb = -((q - QEQ as i64) + 2 * (q - q_old));
    assert!(fb < 0, "a CNM was sent with Fb = {fb}");
    let fb_max = 5 * QEQ as i64;
    let mag = (-fb).min(fb_max);
    ((2 * 63 * mag + fb_max) / (2 * fb_max)).clamp(1, 63) as u8
}

/// Two senders into one shaped output: CNMs come out of the ingress ports, addressed to the
/// senders, with the output CP's CPID, priority 6, and the sampled frame encapsulated.
#[test]
fn output_cp_cnm_fields() {
    let mut h = harness(dumbbell(Placement::Output));
    // 1024 octets every 20 µs from each sender: 2 × 410 Mb/s into 100 Mb/s.
    let frames = drive(
        &mut h,
        &[(0, 1), (1, 2)],
        Duration::from_micros(20),
        Duration::from_millis(60),
        &|host, seq| numbered(3, host, Some(3), 0x88B6, seq),
    );
    let out = cnms(&h);
    assert!(out.len() >= 4, "only {} CNMs", out.len());
    let hex: String = out[0].1.iter().map(|b| format!("{b:02x}")).collect();
    eprintln!("first CNM, out of {}: {hex}", out[0].0);
    let cpid = CpId::output(EthernetAddress(BRIDGE_MAC), 2, 3);
    let mut q_old = 0i64;
    let stats = h.bridge.stats();
    let cp = stats.cps.iter().find(|c| c.port == "p2").unwrap();
    // Every sample sent a CNM (the queue never fell below Qeq after filling), so the CNMs form
    // the whole Qold chain.
    assert_eq!(cp.samples, cp.cnm_tx);
    for (port, b) in &out {
        // Which frame was sampled: the sequence number right after the EtherType in the MSDU.
        let seq = u32::from_be_bytes(b[44..48].try_into().unwrap());
        let sampled = &frames[seq as usize];
        let sender = sampled[11];
        // Out of the port the sampled frame arrived on.
        assert_eq!(*port, PortId(u16::from(sender - 1)));
        // Ethernet header: DA = the sampled SA, SA = that port's MAC (bridge MAC + port).
        assert_eq!(&b[0..6], &mac(sender));
        let mut sa = BRIDGE_MAC;
        sa[5] = sender - 1;
        assert_eq!(&b[6..12], &sa);
        // VLAN tag copied, PCP = CNM priority 6, same VID.
        assert_eq!(be16(b, 12), 0x8100);
        assert_eq!(be16(b, 14), (6 << 13) | VID);
        assert_eq!(be16(b, 16), 0x22E7);
        // PDU: version 0, reserved 0, QntzFb.
        let vrq = be16(b, 18);
        assert_eq!(vrq >> 12, 0);
        assert_eq!((vrq >> 6) & 0x3f, 0);
        let qntz = (vrq & 0x3f) as u8;
        // CPID: bridge MAC · index 2 × 8 + 3 = 0x0013.
        assert_eq!(&b[20..26], &BRIDGE_MAC);
        assert_eq!(be16(b, 26), 0x0013);
        assert_eq!(u64::from_be_bytes(b[20..28].try_into().unwrap()), cpid.0);
        // cnmQOffset = (Q − Qeq)/64, exact here; cnmQDelta = (Q − Qold)/64.
        let q_off = i16::from_be_bytes([b[28], b[29]]);
        let q_delta = i16::from_be_bytes([b[30], b[31]]);
        let q = i64::from(q_off) * 64 + QEQ as i64;
        assert_eq!(q % LEN as i64, 0, "Q = {q} is not a whole number of frames");
        assert!(q > 0 && q <= 150_000, "{q}");
        assert_eq!(i64::from(q_delta) * 64, q - q_old);
        assert_eq!(qntz, expected_qntz(q, q_old), "Q {q} Qold {q_old}");
        q_old = q;
        // Encapsulated priority 3 in the 3 MSBs, encapsulated DA = h3.
        assert_eq!(be16(b, 32), 3 << 13);
        assert_eq!(&b[34..40], &mac(3));
        // Encapsulated MSDU: 64 octets from the EtherType after the VLAN tag.
        assert_eq!(be16(b, 40), 64);
        assert_eq!(&b[42..106], &sampled[16..80]);
        assert_eq!(b.len(), 106);
        // The same through the parser.
        let (_, repr) = parse_frame(b).unwrap();
        assert_eq!(repr.cpid, cpid);
        assert_eq!(repr.encap_priority, 3);
    }
    // Both senders were told.
    assert!(out.iter().any(|(p, _)| *p == PortId(0)));
    assert!(out.iter().any(|(p, _)| *p == PortId(1)));
    assert!(h.out(2).iter().all(|s| parse_frame(&s.bytes).is_err()));
    assert_eq!(cp.id, cpid);
    assert_eq!(cp.cnm_dropped, 0);
    let per: u64 = cp.cnm_per_dst.iter().map(|d| d.cnms).sum();
    assert_eq!(per, cp.cnm_tx);
    assert_eq!(cp.cnm_per_dst.len(), 2);
    // No CP on the senders' output queues saw anything, and ports count their CNMs.
    for c in stats.cps.iter().filter(|c| c.port != "p2") {
        assert_eq!(c.samples, 0, "{}", c.port);
    }
    let port_cnms: u64 = stats.ports.iter().map(|p| p.cnm_tx).sum();
    assert_eq!(port_cnms, out.len() as u64);
}

/// Input placement: the CP of the input buffer (p0, 3) has the top bit in its CPID index and
/// answers out of p0.
#[test]
fn input_cp_cpid_has_the_top_bit() {
    let mut h = harness(dumbbell(Placement::Input));
    drive(
        &mut h,
        &[(0, 1), (1, 2)],
        Duration::from_micros(20),
        Duration::from_millis(60),
        &|host, seq| numbered(3, host, Some(3), 0x88B6, seq),
    );
    let out = cnms(&h);
    assert!(!out.is_empty());
    for (port, b) in &out {
        let (info, repr) = parse_frame(b).unwrap();
        assert!(repr.cpid.is_input());
        assert_eq!(repr.cpid.index(), 0x8000 | (port.0 * 8 + 3));
        assert_eq!(repr.cpid.mac(), EthernetAddress(BRIDGE_MAC));
        assert_eq!(info.dst, EthernetAddress(mac(port.0 as u8 + 1)));
        assert_eq!(info.vlan.unwrap().pcp, 6);
    }
    let stats = h.bridge.stats();
    let ids: Vec<String> = stats.cps.iter().map(|c| c.id.to_string()).collect();
    assert_eq!(
        ids,
        ["02cc000000008003", "02cc00000000800b", "02cc000000008013"]
    );
    assert!(stats.cps.iter().all(|c| c.placement == Placement::Input));
    // The bottleneck's own input buffer receives nothing.
    assert_eq!(stats.cps[2].samples, 0);
    assert!(stats.cps[0].cnm_tx > 0 && stats.cps[1].cnm_tx > 0);
}

/// Priorities that are not CNPVs are never sampled; a CNPV set of {5} ignores priority 3.
#[test]
fn non_cnpv_priorities_are_never_sampled() {
    for (pcp, cnpv) in [(0u8, vec![3u8]), (3, vec![5])] {
        let mut cfg = dumbbell(Placement::Output);
        cfg.cp.cnpv = cnpv.clone();
        let mut h = harness(cfg);
        drive(
            &mut h,
            &[(0, 1), (1, 2)],
            Duration::from_micros(20),
            Duration::from_millis(30),
            &|host, seq| numbered(3, host, Some(pcp), 0x88B6, seq),
        );
        assert!(cnms(&h).is_empty(), "pcp {pcp} cnpv {cnpv:?}");
        let stats = h.bridge.stats();
        assert_eq!(stats.cps.len(), 3);
        assert!(stats.cps.iter().all(|c| c.samples == 0));
        assert!(stats.cps.iter().all(|c| c.priority == cnpv[0]));
    }
}

/// CNMs and rate-feedback frames crossing a congested CNPV queue are never sampled, and
/// neither are frames with a group source address; PAUSE never reaches a queue.
#[test]
fn feedback_frames_are_never_sampled() {
    for ethertype in [0x22E7u16, 0x88B5] {
        let mut h = harness(dumbbell(Placement::Output));
        drive(
            &mut h,
            &[(0, 1), (1, 2)],
            Duration::from_micros(20),
            Duration::from_millis(30),
            &|host, seq| numbered(3, host, Some(3), ethertype, seq),
        );
        let stats = h.bridge.stats();
        let q = stats
            .queues
            .iter()
            .find(|q| q.port == "p2" && q.priority == 3 && q.enqueued > 0)
            .unwrap();
        assert!(q.peak_bytes > 100_000, "the queue was congested");
        assert!(stats.cps.iter().all(|c| c.samples == 0), "{ethertype:#x}");
        assert!(stats.ports.iter().all(|p| p.cnm_tx == 0));
    }
    let mut h = harness(dumbbell(Placement::Output));
    drive(
        &mut h,
        &[(0, 1)],
        Duration::from_micros(10),
        Duration::from_millis(30),
        &|host, seq| {
            let mut f = numbered(3, host, Some(3), 0x88B6, seq);
            f[6] |= 1; // group source address
            f
        },
    );
    assert!(h.bridge.stats().cps.iter().all(|c| c.samples == 0));
}

/// Below the set point the CP samples but sends nothing (Fb ≥ 0).
#[test]
fn no_cnm_without_congestion() {
    let mut cfg = dumbbell(Placement::Output);
    cfg.cp.cp_min_sample_base = Bytes::new(10_000);
    let mut h = harness(cfg);
    // One sender at 1024 octets / 100 µs = 82 Mb/s into 100 Mb/s: the queue stays near empty.
    drive(
        &mut h,
        &[(0, 1)],
        Duration::from_micros(100),
        Duration::from_millis(50),
        &|host, seq| numbered(3, host, Some(3), 0x88B6, seq),
    );
    let stats = h.bridge.stats();
    let cp = stats.cps.iter().find(|c| c.port == "p2").unwrap();
    assert!(cp.samples >= 30, "{}", cp.samples);
    assert_eq!(cp.cnm_tx, 0);
    assert!(cp.last_fb > 0);
    assert!(cnms(&h).is_empty());
}

/// An untagged frame of a port whose default priority is a CNPV gets an untagged CNM whose
/// encapsulated priority is that default; a CN-TAG is copied so the RPID comes back.
#[test]
fn untagged_and_cn_tagged_samples() {
    let mut cfg = dumbbell(Placement::Output);
    cfg.ports[0].default_priority = Some(3);
    let mut h = harness(cfg);
    let frames = drive(
        &mut h,
        &[(0, 1), (1, 2)],
        Duration::from_micros(20),
        Duration::from_millis(40),
        &|host, seq| {
            if host == 1 {
                numbered(3, host, None, 0x88B6, seq)
            } else {
                // VLAN · CN-TAG (RPID 0x0abc) · EtherType.
                let mut f = numbered(3, host, Some(3), 0x22E9, seq);
                f[18..20].copy_from_slice(&[0x0a, 0xbc]);
                f[20..22].copy_from_slice(&[0x88, 0xB6]);
                f
            }
        },
    );
    let out = cnms(&h);
    let (mut untagged, mut cn_tagged) = (0, 0);
    for (port, b) in &out {
        let (info, repr) = parse_frame(b).unwrap();
        assert_eq!(repr.encap_priority, 3);
        if *port == PortId(0) {
            untagged += 1;
            assert!(info.vlan.is_none());
            assert_eq!(be16(b, 12), 0x22E7);
            let seq = u32::from_be_bytes(b[40..44].try_into().unwrap());
            assert_eq!(repr.encap_msdu, &frames[seq as usize][12..76]);
        } else {
            cn_tagged += 1;
            assert_eq!(info.rpid, Some(0x0abc));
            assert_eq!(be16(b, 16), 0x22E9);
            assert_eq!(be16(b, 18), 0x0abc);
            // The MSDU starts at the CN-TAG.
            assert_eq!(&repr.encap_msdu[..4], &[0x22, 0xE9, 0x0a, 0xbc]);
        }
    }
    assert!(untagged > 0 && cn_tagged > 0, "{untagged} {cn_tagged}");
}

/// `cp_min_header_octets` bounds the encapsulated MSDU; `cnm_priority` sets the PCP.
#[test]
fn msdu_length_and_cnm_priority_are_configurable() {
    let mut cfg = dumbbell(Placement::Output);
    cfg.cp.cp_min_header_octets = 16;
    cfg.cp.cnm_priority = 7;
    let mut h = harness(cfg);
    drive(
        &mut h,
        &[(0, 1), (1, 2)],
        Duration::from_micros(20),
        Duration::from_millis(30),
        &|host, seq| numbered(3, host, Some(3), 0x88B6, seq),
    );
    let out = cnms(&h);
    assert!(!out.is_empty());
    for (_, b) in &out {
        let (info, repr) = parse_frame(b).unwrap();
        assert_eq!(repr.encap_msdu.len(), 16);
        assert_eq!(info.vlan.unwrap().pcp, 7);
        // 18 (Ethernet + VLAN) + 2 + 24 + 16 = 60: no padding needed.
        assert_eq!(b.len(), 60);
    }
}

/// A full control queue loses CNMs, counted per CP and as `control_full` drops.
#[test]
fn cnms_dropped_when_the_control_queue_is_full() {
    let mut cfg = dumbbell(Placement::Output);
    cfg.buffers.control_frames = 1;
    cfg.cp.cp_min_sample_base = Bytes::new(2_000);
    let mut b = Bridge::new(cfg, Rng::new(1)).unwrap();
    let t = Instant::from_nanos(1_000_000);
    b.handle_frame(t, PortId(2), &numbered(0xff, 3, Some(0), 0x88B6, 0));
    // 400 frames from h1 with no transmission at all: the output queue fills, every sample
    // after the first wants to queue a CNM on p0, which holds one.
    for seq in 0..400 {
        b.handle_frame(t, PortId(0), &numbered(3, 1, Some(3), 0x88B6, seq));
    }
    let st = b.stats();
    let cp = st.cps.iter().find(|c| c.port == "p2").unwrap();
    assert!(cp.cnm_dropped > 0);
    assert_eq!(cp.cnm_tx, 1);
    assert_eq!(st.ports[0].drop_reasons.control_full, cp.cnm_dropped);
}

/// Same seed → the same CNMs at the same instants; another seed → other sample points.
#[test]
fn same_seed_same_cnm_sequence() {
    let run = |seed: u64| {
        let cfg = dumbbell(Placement::Output);
        let mut h = Harness {
            bridge: Bridge::new(cfg, Rng::new(seed)).unwrap(),
            now: Instant::from_nanos(1_000_000_000),
            sent: Vec::new(),
        };
        learn_all(&mut h);
        drive(
            &mut h,
            &[(0, 1), (1, 2)],
            Duration::from_micros(20),
            Duration::from_millis(40),
            &|host, seq| numbered(3, host, Some(3), 0x88B6, seq),
        );
        h.sent
            .iter()
            .filter(|s| parse_frame(&s.bytes).is_ok())
            .map(|s| (s.at, s.port, s.bytes.clone()))
            .collect::<Vec<_>>()
    };
    let a = run(42);
    assert!(a.len() >= 3);
    assert_eq!(a, run(42));
    assert_ne!(a, run(43));
}

/// Each CNM is an event with the values on the wire, and `stats` carries the `cps` keys.
#[test]
fn events_and_stats_json() {
    let mut cfg = dumbbell(Placement::Output);
    // Room for every drop event of the run besides the CNMs.
    cfg.event_capacity = 100_000;
    let mut h = harness(cfg);
    h.bridge.drain_events(&mut |_| {});
    drive(
        &mut h,
        &[(0, 1), (1, 2)],
        Duration::from_micros(20),
        Duration::from_millis(40),
        &|host, seq| numbered(3, host, Some(3), 0x88B6, seq),
    );
    let mut events = Vec::new();
    h.bridge.drain_events(&mut |e| {
        if let Event::Cnm { .. } = e {
            events.push(*e);
        }
    });
    let out = cnms(&h);
    assert_eq!(events.len(), out.len());
    for (e, (port, b)) in events.iter().zip(&out) {
        let (info, repr) = parse_frame(b).unwrap();
        let Event::Cnm {
            port: p,
            priority,
            cp_port,
            dst,
            qntz_fb,
            q_offset,
            q_delta,
            cpid,
            ..
        } = *e
        else {
            unreachable!()
        };
        assert_eq!((p, priority, cp_port), (*port, 3, PortId(2)));
        assert_eq!(dst, info.dst);
        assert_eq!(
            (qntz_fb, q_offset, q_delta, cpid),
            (repr.qntz_fb, repr.q_offset, repr.q_delta, repr.cpid)
        );
    }
    let j = serde_json::to_value(events[0]).unwrap();
    assert_eq!(j["event"], "cnm");
    assert_eq!(j["cpid"], "02cc000000000013");
    assert_eq!(j["dst"].as_str().unwrap().len(), 17);

    let v = serde_json::to_value(h.bridge.stats()).unwrap();
    let cps = v["cps"].as_array().unwrap();
    assert_eq!(cps.len(), 3);
    let cp = &cps[2];
    for k in [
        "id",
        "port",
        "priority",
        "placement",
        "samples",
        "cnm_tx",
        "cnm_dropped",
        "qlen",
        "qeq",
        "last_fb",
        "last_qntz_fb",
        "cnm_per_dst",
    ] {
        assert!(!cp[k].is_null(), "{k} missing: {cp}");
    }
    assert_eq!(cp["id"], "02cc000000000013");
    assert_eq!(cp["port"], "p2");
    assert_eq!(cp["placement"], "output");
    assert_eq!(cp["qeq"], QEQ);
    assert!(cp["cnm_per_dst"][0]["mac"].is_string());
}

/// With placement `off` there are no CPs and no CNMs.
#[test]
fn placement_off() {
    let mut h = harness(dumbbell(Placement::Off));
    drive(
        &mut h,
        &[(0, 1), (1, 2)],
        Duration::from_micros(20),
        Duration::from_millis(20),
        &|host, seq| numbered(3, host, Some(3), 0x88B6, seq),
    );
    assert!(h.bridge.stats().cps.is_empty());
    assert!(cnms(&h).is_empty());
    assert_eq!(EtherType::from(0x22E7), EtherType::Cnm);
}

/// Sampling and CNMs reuse the pooled buffers: once the queues have reached their largest
/// backlog, more CNMs allocate no more frame buffers.
#[test]
fn no_buffer_allocation_in_steady_state() {
    let mut h = harness(dumbbell(Placement::Output));
    let mk = |host, seq| numbered(3, host, Some(3), 0x88B6, seq);
    drive(
        &mut h,
        &[(0, 1), (1, 2)],
        Duration::from_micros(20),
        Duration::from_millis(60),
        &mk,
    );
    let before = h.bridge.stats();
    h.clear();
    drive(
        &mut h,
        &[(0, 1), (1, 2)],
        Duration::from_micros(20),
        Duration::from_millis(100),
        &mk,
    );
    let after = h.bridge.stats();
    let cnm = |s: &cp_switch::BridgeStats| s.cps.iter().map(|c| c.cnm_tx).sum::<u64>();
    assert!(cnm(&after) > cnm(&before) + 10);
    assert_eq!(after.buffers_allocated, before.buffers_allocated);
}
