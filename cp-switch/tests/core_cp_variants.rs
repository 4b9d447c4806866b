//! The variant congestion points in the bridge core, driven in memory with a fake clock: FQCN
//! culprits and their Ψ_i (Zhang & Ansari eq. 7-9), weights, occupancy culprits at an input CP,
//! the explicit-rate CP in a closed loop with obedient senders, rate-feedback frames field by
//! field, and configuration errors.
#![allow(clippy::unwrap_used)]

mod core_support;

use cnm_proto::rng::Rng;
use cnm_proto::wire::cnm::parse_frame;
use cnm_proto::wire::rate_feedback::{RateFeedback, MSG_LEN};
use cnm_proto::wire::{CpId, EthernetAddress, RateFeedbackRepr};
use cnm_proto::{Bytes, Duration, Rate};
use core_support::*;
use cp_switch::cp::FlowWeight;
use cp_switch::{Bridge, BridgeConfig, CpMode, Culprit, Placement, PortConfig, PortId};

const BRIDGE_MAC: [u8; 6] = [0x02, 0xcc, 0, 0, 0, 0];
const VID: u16 = 10;
const PCP: u8 = 3;

fn tagged(dst: u8, src: u8, len: usize) -> Vec<u8> {
    frame(mac(dst), mac(src), Some((PCP, VID)), len)
}

/// Teaches the bridge that `host` is behind `port`, in VID 10.
fn learn(h: &mut Harness, host: u8, port: u16) {
    let f = frame([0xff; 6], mac(host), Some((0, VID)), 60);
    h.rx(port, &f);
    h.poll();
    h.clear();
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The CNMs transmitted: (port, destination host, QntzFb, the whole frame).
fn cnms(h: &Harness) -> Vec<(u16, u8, u8, Vec<u8>)> {
    h.sent
        .iter()
        .filter_map(|s| {
            let (_, r) = parse_frame(&s.bytes).ok()?;
            Some((s.port.0, s.bytes[5], r.qntz_fb, s.bytes.clone()))
        })
        .collect()
}

/// Eq. 7-9 written out independently in floating point: the culprits of byte counts `b` with
/// weights `w` and their Ψ_i for Ψ(Fb) = `psi`.
fn fqcn_expected(b: &[f64], w: &[f64], psi: f64) -> Vec<(usize, u8)> {
    let sb: f64 = b.iter().sum();
    let sw: f64 = w.iter().sum();
    let high: Vec<usize> = (0..b.len()).filter(|&i| b[i] >= w[i] / sw * sb).collect();
    let hb: f64 = high.iter().map(|&i| b[i]).sum();
    let hw: f64 = high.iter().map(|&i| w[i]).sum();
    let culprits: Vec<usize> = high
        .iter()
        .copied()
        .filter(|&i| b[i] >= w[i] / hw * hb)
        .collect();
    let norm: f64 = culprits.iter().map(|&i| b[i] / w[i]).sum();
    culprits
        .iter()
        .map(|&i| {
            (
                i,
                ((b[i] / w[i]) / norm * psi).round().clamp(1.0, 63.0) as u8,
            )
        })
        .collect()
}

/// Four senders h1..h4 on p0..p3 send to h9 on p4 (10 Mb/s) in the proportions `pattern`,
/// interleaved smoothly, 200-octet frames, with the clock standing still, until the output CP
/// of p4 takes its first sample. Returns the octets each sender had sent then, Ψ(Fb), and the
/// CNMs.
#[allow(clippy::type_complexity)]
fn fqcn_first_sample(
    pattern: [u32; 4],
    weights: Vec<FlowWeight>,
) -> ([u64; 4], u8, Vec<(u16, u8, u8, Vec<u8>)>) {
    let mut ports: Vec<PortConfig> = (0..4).map(|i| PortConfig::new(format!("p{i}"))).collect();
    ports.push(PortConfig::new("p4").with_rate(Rate::from_mbps(10)));
    let mut cfg = BridgeConfig::with_ports(ports);
    cfg.mac = EthernetAddress(BRIDGE_MAC);
    cfg.cp.mode = CpMode::Fqcn;
    cfg.cp.cp_queue_set_point = Bytes::new(10_000);
    cfg.cp.cp_min_sample_base = Bytes::new(100_000);
    cfg.cp.fqcn_weights = weights;
    cfg.buffers.input = Bytes::new(1_000_000);
    cfg.buffers.output = Bytes::new(1_000_000);
    let mut h = Harness::new(cfg);
    for k in 0..4u8 {
        learn(&mut h, k + 1, u16::from(k));
    }
    learn(&mut h, 9, 4);
    let total: u32 = pattern.iter().sum();
    let mut credit = [0i64; 4];
    let mut sent = [0u64; 4];
    for _ in 0..10_000 {
        // Smooth weighted round robin: each slot goes to the sender with the most credit.
        for (c, &p) in credit.iter_mut().zip(&pattern) {
            *c += i64::from(p);
        }
        let k = (0..4).max_by_key(|&k| (credit[k], -(k as i64))).unwrap();
        credit[k] -= i64::from(total);
        let f = tagged(9, k as u8 + 1, 200);
        h.rx(k as u16, &f);
        sent[k] += 200;
        let cp = h
            .bridge
            .cp_stats()
            .into_iter()
            .find(|c| c.port == "p4")
            .unwrap();
        if cp.samples > 0 {
            h.poll();
            assert_eq!(cp.mode, CpMode::Fqcn);
            assert_eq!(cp.flows_tracked, 4);
            assert_eq!(cp.culprits, u64::from(cp.last_culprits));
            return (sent, cp.last_qntz_fb, cnms(&h));
        }
    }
    panic!("no sample");
}

/// B ≈ (10, 9, 7, 1) (equal weights): S_H = {h1, h2, h3}, S_R = {h1, h2}; one CNM to each
/// culprit, out of its own port, built from its own frame, with Ψ_i = B_i/(B_1+B_2)·Ψ(Fb).
#[test]
fn fqcn_one_cnm_per_culprit_with_its_own_psi() {
    let (b, psi, out) = fqcn_first_sample([10, 9, 7, 1], Vec::new());
    eprintln!("B = {b:?}, Ψ(Fb) = {psi}");
    // Q ≈ 100 kB against Qeq = 10 kB: |Fb| is past Fbmax.
    assert_eq!(psi, 63);
    let bf: Vec<f64> = b.iter().map(|&x| x as f64).collect();
    let want = fqcn_expected(&bf, &[1.0; 4], f64::from(psi));
    // Hand-worked with the exact proportions: culprits h1 and h2, Ψ = 10/19·63 = 33.2 and
    // 9/19·63 = 29.8.
    assert_eq!(want.iter().map(|w| w.0).collect::<Vec<_>>(), vec![0, 1]);
    assert!((i32::from(want[0].1) - 33).abs() <= 1 && (i32::from(want[1].1) - 30).abs() <= 1);
    assert_eq!(out.len(), 2, "one CNM per culprit");
    let cpid = CpId::output(EthernetAddress(BRIDGE_MAC), 4, PCP);
    for ((port, dst, qntz, bytes), (i, p)) in out.iter().zip(&want) {
        assert_eq!(usize::from(*dst), i + 1);
        assert_eq!(usize::from(*port), *i, "out of the culprit's own port");
        assert_eq!(*qntz, *p);
        let (_, r) = parse_frame(bytes).unwrap();
        assert_eq!(r.cpid, cpid);
        // Built from a frame of that flow: DA = its source, encapsulated DA = h9, tagged
        // VID 10 with the CNM priority.
        assert_eq!(&bytes[..6], &mac(*dst));
        assert_eq!(be16(bytes, 14), (6 << 13) | VID);
        assert_eq!(r.encap_dst.0, mac(9));
        assert_eq!(r.encap_priority, PCP);
    }
}

fn cp_of(s: &cp_switch::BridgeStats, port: &str) -> cp_switch::CpStats {
    s.cps.iter().find(|c| c.port == port).unwrap().clone()
}

/// B ≈ (8, 6, 4, 2): with equal weights h1 is the only culprit (M = 5, M^F = 7); with
/// W(h1) = 2 from the configuration h1 is within its doubled share and h2 is the culprit
/// (M = (8, 4, 4, 4), M^F = (9, 4.5, 4.5)).
#[test]
fn fqcn_weights_from_config_are_honoured() {
    let (b, psi, out) = fqcn_first_sample([8, 6, 4, 2], Vec::new());
    let bf: Vec<f64> = b.iter().map(|&x| x as f64).collect();
    assert_eq!(fqcn_expected(&bf, &[1.0; 4], 63.0), vec![(0, 63)]);
    assert_eq!(psi, 63);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].0, out[0].1, out[0].2), (0, 1, 63));

    let w = vec![FlowWeight {
        mac: Some(EthernetAddress(mac(1))),
        vid: Some(VID),
        priority: Some(PCP),
        weight: 2,
    }];
    let (b, _, out) = fqcn_first_sample([8, 6, 4, 2], w);
    let bf: Vec<f64> = b.iter().map(|&x| x as f64).collect();
    assert_eq!(
        fqcn_expected(&bf, &[2.0, 1.0, 1.0, 1.0], 63.0),
        vec![(1, 63)]
    );
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].0, out[0].1, out[0].2), (1, 2, 63));
}

/// The input-CP seed's scenario: h1 (to a 10 Mb/s port) and h6 (to an idle, unshaped port)
/// share the input buffer of p0. h6 arrives three times as often but holds nothing: arrival
/// sampling throttles it, occupancy sampling does not.
fn occupancy_run(culprit: Culprit) -> (u64, u64, Harness) {
    let mut cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0"),
        PortConfig::new("p1").with_rate(Rate::from_mbps(10)),
        PortConfig::new("p2"),
    ]);
    cfg.mac = EthernetAddress(BRIDGE_MAC);
    cfg.cp.placement = Placement::Input;
    cfg.cp.culprit = culprit;
    cfg.cp.cp_queue_set_point = Bytes::new(20_000);
    cfg.cp.cp_min_sample_base = Bytes::new(30_000);
    cfg.buffers.output = Bytes::new(10_000);
    // Large enough never to fill in the run (no drop-tail effects).
    cfg.buffers.input = Bytes::new(2_000_000);
    let mut h = Harness::new(cfg);
    learn(&mut h, 1, 0);
    learn(&mut h, 6, 0);
    learn(&mut h, 3, 1);
    learn(&mut h, 4, 2);
    let start = h.now;
    for n in 1..=1000u64 {
        h.rx(0, &tagged(3, 1, 1000));
        for _ in 0..3 {
            h.rx(0, &tagged(4, 6, 1000));
        }
        h.run_until(start + Duration::from_micros(100 * n));
    }
    let out = cnms(&h);
    let to = |host| out.iter().filter(|c| c.1 == host).count() as u64;
    (to(1), to(6), h)
}

#[test]
fn occupancy_culprits_spare_the_innocent_flow() {
    let (a1, a6, _) = occupancy_run(Culprit::Arrival);
    let (d1, d6, h) = occupancy_run(Culprit::OccupancyDeterministic);
    let (r1, r6, _) = occupancy_run(Culprit::OccupancyRandom);
    eprintln!("CNMs to (h1, h6): arrival {a1}/{a6}, deterministic {d1}/{d6}, random {r1}/{r6}");
    assert!(a6 > a1, "arrival sampling hits the frequent arrival");
    assert!(d1 > 20);
    assert_eq!(d6, 0, "deterministic occupancy never picks h6");
    assert!(r1 > 20);
    assert!(
        r6 * 10 <= r1 + r6,
        "random occupancy: h6 holds at most one frame"
    );
    // Every CNM leaves through p0 (where both flows arrive).
    assert!(cnms(&h).iter().all(|c| c.0 == 0));
    let s = h.bridge.stats();
    let cp = cp_of(&s, "p0");
    assert_eq!(cp.culprit, Culprit::OccupancyDeterministic);
    assert_eq!(cp.flows_tracked, 2);
    assert_eq!(cp.culprit_fallbacks, 0);
    assert_eq!(cp.culprits, cp.cnm_tx);
    // The per-flow accounting matches the buffer.
    assert_eq!(
        cp.flow_occupancy,
        h.bridge.input_queue_bytes(PortId(0), PCP)
    );
    assert!(cp.flow_occupancy > 20_000);
    // Taking p1 down empties h1's VOQ: the accounting follows.
    let mut h = h;
    let now = h.now;
    h.bridge.set_port_up(now, PortId(1), false);
    let cp = cp_of(&h.bridge.stats(), "p0");
    assert_eq!(
        cp.flow_occupancy,
        h.bridge.input_queue_bytes(PortId(0), PCP)
    );
}

/// The explicit-rate seed's loop: N greedy senders that obey the advertised rate (the seed's
/// source rule) into one 100 Mb/s port. r converges to C/N and the queue to qeq.
#[test]
fn explicit_rate_converges_to_the_fair_share() {
    const N: usize = 3;
    let c = Rate::from_mbps(100);
    let mut ports: Vec<PortConfig> = (0..N).map(|i| PortConfig::new(format!("p{i}"))).collect();
    ports.push(PortConfig::new("p3").with_rate(c));
    let mut cfg = BridgeConfig::with_ports(ports);
    cfg.mac = EthernetAddress(BRIDGE_MAC);
    cfg.cp.mode = CpMode::ExplicitRate;
    cfg.cp.cp_queue_set_point = Bytes::new(30_000);
    cfg.shaper.wire_overhead = false;
    cfg.shaper.fcs = false;
    cfg.shaper.pad = false;
    let mut h = Harness::new(cfg);
    for k in 0..N as u8 {
        learn(&mut h, k + 1, u16::from(k));
    }
    learn(&mut h, 9, 3);
    let t = h.now + Duration::from_millis(1);
    h.run_until(t);
    h.clear();
    assert_eq!(h.bridge.poll_timeout(), None, "idle: no timer");
    let cpid = CpId::output(EthernetAddress(BRIDGE_MAC), 3, PCP);
    // Each sender: (rate, CP) per the seed's source algorithm, starting at line rate.
    let mut rate = [c.as_f64(); N];
    let mut cp_of_src: [Option<CpId>; N] = [None; N];
    let mut next = [h.now; N];
    let len = 1000usize;
    let start = h.now;
    let end = start + Duration::from_millis(600);
    let mut checked_frame = false;
    let mut delivered_late = 0u64;
    while h.now < end {
        let k = (0..N).min_by_key(|&k| next[k]).unwrap();
        h.run_until(next[k]);
        for s in h.sent.drain(..) {
            if s.port.0 as usize >= N {
                if s.at >= start + Duration::from_millis(400) {
                    delivered_late += s.bytes.len() as u64;
                }
                continue;
            }
            let b = &s.bytes;
            if be16(b, 12) != 0x8100 || be16(b, 16) != 0x88B5 {
                continue;
            }
            let src = usize::from(b[5]) - 1;
            assert_eq!(usize::from(s.port.0), src, "out of the source's port");
            let r = RateFeedbackRepr::parse(&RateFeedback::new_checked(&b[18..]).unwrap()).unwrap();
            if !checked_frame {
                // Field by field: DA = the source, SA = the port's MAC, VLAN 10 at PCP 6,
                // EtherType 0x88B5, version 0, reserved 0, priority 3 in the top bits, CPID,
                // rate (u64 bit/s), encapsulated DA = h9; padded to 60 octets.
                assert_eq!(&b[..6], &mac(src as u8 + 1));
                let mut sa = BRIDGE_MAC;
                sa[5] = src as u8;
                assert_eq!(&b[6..12], &sa);
                assert_eq!(be16(b, 14), (6 << 13) | VID);
                assert_eq!((b[18], b[19]), (0, 0));
                assert_eq!(be16(b, 20), u16::from(PCP) << 13);
                assert_eq!(u64::from_be_bytes(b[22..30].try_into().unwrap()), cpid.0);
                let bps = u64::from_be_bytes(b[30..38].try_into().unwrap());
                assert_eq!(bps, r.rate.bps());
                assert!(bps > 0 && bps <= c.bps());
                assert_eq!(&b[38..44], &mac(9));
                assert_eq!(b.len(), 60);
                assert_eq!(18 + MSG_LEN, 44);
                assert!(b[44..].iter().all(|&x| x == 0));
                assert_eq!((r.version, r.encap_priority, r.cpid), (0, PCP, cpid));
                checked_frame = true;
            }
            // The source rule (seed, "Source Algorithm").
            let ri = r.rate.as_f64();
            if ri < rate[src] {
                rate[src] = ri;
                cp_of_src[src] = Some(r.cpid);
            } else if cp_of_src[src].map_or(true, |c| c == r.cpid) {
                rate[src] = ri;
            }
        }
        h.rx(k as u16, &tagged(9, k as u8 + 1, len));
        let gap = (len as f64 * 8.0 / rate[k] * 1e9) as u64;
        next[k] += Duration::from_nanos(gap.max(1));
    }
    let cp = cp_of(&h.bridge.stats(), "p3");
    let er = cp.explicit_rate.clone().unwrap();
    let share = c.as_f64() / N as f64;
    eprintln!(
        "r = {} ({:.3} of C/N), senders {:?}, q = {}, intervals {}, rate_fb_tx {}",
        er.advertised_rate,
        er.advertised_rate.as_f64() / share,
        rate,
        cp.qlen,
        er.intervals,
        cp.rate_fb_tx
    );
    assert_eq!(
        er.interval,
        Duration::from_millis(3),
        "0.03 ms × 10 Gb/s ÷ 100 Mb/s"
    );
    assert!((er.advertised_rate.as_f64() / share - 1.0).abs() < 0.05);
    for r in rate {
        assert!((r / share - 1.0).abs() < 0.05, "sender at {r}");
    }
    // The bottleneck stays busy: 200 ms at ≥ 95 % of C.
    assert!(delivered_late as f64 * 8.0 / 0.2 > 0.95 * c.as_f64());
    assert!(checked_frame);
    assert!(cp.rate_fb_tx >= 3 * er.intervals / 2);
    assert_eq!(cp.cnm_tx, 0);
    assert!(h.bridge.stats().ports[0].rate_fb_tx > 0);
    let mut saw = false;
    h.bridge.drain_events(&mut |e| {
        if let cp_switch::Event::RateFeedback { cpid: id, .. } = e {
            saw |= *id == cpid;
        }
    });
    assert!(saw, "a rate_feedback event");
    // Traffic stops: the queue drains and the timer stops.
    let later = h.now + Duration::from_millis(100);
    h.run_until(later);
    assert_eq!(h.bridge.output_queue_bytes(PortId(3), PCP), 0);
    assert_eq!(h.bridge.poll_timeout(), None);
    // C follows the port's emulated rate, and the default T scales with it.
    let now = h.now;
    h.bridge
        .set_port_rate(now, PortId(3), Some(Rate::from_mbps(50)));
    let er = cp_of(&h.bridge.stats(), "p3").explicit_rate.unwrap();
    assert_eq!(er.capacity, Rate::from_mbps(50));
    assert_eq!(er.interval, Duration::from_millis(6));
}

/// Combinations that make no sense are refused, naming the field.
#[test]
fn nonsense_combinations_are_config_errors() {
    for mode in [CpMode::Fqcn, CpMode::ExplicitRate] {
        let mut cfg = BridgeConfig::with_ports(Harness::ports(2));
        cfg.cp.mode = mode;
        cfg.cp.culprit = Culprit::OccupancyRandom;
        let e = Bridge::new(cfg, Rng::new(1)).unwrap_err();
        assert_eq!(e.field, "cp.culprit");
        assert!(e.to_string().contains("occupancy-random"), "{e}");
    }
    let mut cfg = BridgeConfig::with_ports(Harness::ports(2));
    cfg.cp.mode = CpMode::ExplicitRate;
    cfg.cp.er_b = 0.9;
    assert_eq!(Bridge::new(cfg, Rng::new(1)).unwrap_err().field, "cp.er_b");
    // Standard QCN with an occupancy culprit at an output CP is allowed.
    let mut cfg = BridgeConfig::with_ports(Harness::ports(2));
    cfg.cp.culprit = Culprit::OccupancyDeterministic;
    assert!(Bridge::new(cfg, Rng::new(1)).is_ok());
}
