//! The reaction-point modes driven through the in-memory [`Agent`] with a fake clock: adaptive
//! BC_LIMIT, QCN/BS (alone and with adaptive BC_LIMIT) and the explicit-rate source. Expected
//! values are computed by hand in the comments.
#![allow(clippy::unwrap_used)]

use cnm_proto::rng::Rng;
use cnm_proto::wire::rate_feedback::build_rate_feedback_frame;
use cnm_proto::wire::{walk, EthernetAddress, RateFeedbackRepr, VlanInfo};
use cnm_proto::{Bytes, Duration, Instant, Rate};
use rp_agent::{Agent, AgentConfig, Event, Release, RpMode, RpParams, RpState};

mod support;
use support::{cnm, cpid};

const HOST: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const PEER: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const PEER2: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 3]);
const SW_A: EthernetAddress = EthernetAddress([2, 0xee, 0, 0, 0, 1]);
const SW_B: EthernetAddress = EthernetAddress([2, 0xee, 0, 0, 0, 2]);
const SW_C: EthernetAddress = EthernetAddress([2, 0xee, 0, 0, 0, 3]);

/// A host frame of `len` octets to `dst` (tagged on the way up: +4, +4 more with a CN-TAG).
fn frame(dst: EthernetAddress, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&HOST.0);
    f[12..14].copy_from_slice(&[0x88, 0xb6]);
    f
}

fn cfg(line: Rate, mode: RpMode, rp: RpParams) -> AgentConfig {
    AgentConfig {
        line_rate: line,
        mac: Some(HOST),
        rp_mode: mode,
        // Pace by the frame's own octets: the byte counter and the pacer count alike.
        wire_overhead: false,
        rp: RpParams {
            rp_jitter: 0.0,
            ..rp
        },
        ..AgentConfig::default()
    }
}

/// A rate-feedback message from switch `sw` advertising `rate` for (`dst`, priority 3) frames.
fn feedback(sw: EthernetAddress, rate: Rate, dst: EthernetAddress) -> Vec<u8> {
    let mut out = vec![0u8; 64];
    let repr = RateFeedbackRepr {
        version: 0,
        encap_priority: 3,
        cpid: cpid(sw),
        rate,
        encap_dst: dst,
    };
    let vlan = VlanInfo {
        pcp: 6,
        dei: false,
        vid: 0,
    };
    let n = build_rate_feedback_frame(HOST, sw, Some(vlan), &repr, &mut out).unwrap();
    out.truncate(n);
    out
}

fn send_all(a: &mut Agent, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    a.poll_uplink(now, &mut |f| {
        out.push(f.to_vec());
        true
    });
    out
}

fn events(a: &mut Agent) -> Vec<Event> {
    let mut v = Vec::new();
    a.drain_events(&mut |e| v.push(*e));
    v
}

/// Keeps the host queue of `f`'s flow full and sends until `until`; returns the start time of
/// every frame sent and the events raised, each with the time it was drained.
fn greedy(a: &mut Agent, f: &[u8], from: Instant, until: Instant) -> (Vec<Instant>, Vec<Event>) {
    let mut now = from;
    let mut sent = Vec::new();
    let mut ev = Vec::new();
    loop {
        while a.handle_host(now, f).is_ok() {}
        a.poll_uplink(now, &mut |_| {
            sent.push(now);
            true
        });
        a.drain_events(&mut |e| ev.push(*e));
        let Some(due) = a.poll_timeout() else { break };
        if due > until {
            break;
        }
        now = due.max(now);
    }
    (sent, ev)
}

fn rate_change_times(ev: &[Event]) -> Vec<Instant> {
    ev.iter()
        .filter_map(|e| match e {
            Event::RateChange { at, .. } => Some(*at),
            _ => None,
        })
        .collect()
}

/// Byte-counter intervals of a greedy flow cut by `cnms` CNMs of QntzFb 63 on a 10 Gb/s line,
/// the timer out of the way: (CR after the cut, the first four intervals between expiries).
fn byte_counter_intervals(mode: RpMode, cnms: usize) -> (Rate, Vec<Duration>) {
    let rp = RpParams {
        rpg_time_reset: Duration::from_secs(100),
        ..RpParams::default()
    };
    let mut a = Agent::new(cfg(Rate::from_gbps(10), mode, rp), Rng::new(1)).unwrap();
    let f = frame(PEER, 1492);
    let t0 = Instant::from_nanos(1_000_000);
    a.handle_host(t0, &f).unwrap();
    let up = send_all(&mut a, t0);
    for _ in 0..cnms {
        a.handle_uplink(t0, &cnm(&up[0], SW_A, 63));
    }
    let cr = a.flow_rate(1).unwrap();
    events(&mut a);
    let (_, ev) = greedy(&mut a, &f, t0, t0 + Duration::from_millis(60));
    let mut times = vec![t0];
    times.extend(rate_change_times(&ev));
    let iv = times.windows(2).take(4).map(|w| w[1] - w[0]).collect();
    (cr, iv)
}

#[test]
fn adaptive_bc_fires_at_a_rate_independent_interval() {
    // CR after n CNMs of QntzFb 63 (Gd = 1/128): 10 G × 0.5078125^n, rounded down each time.
    let k = Duration::from_micros(240);
    for (cnms, cr_bps) in [(1, 5_078_125_000), (3, 1_309_514_045), (5, 337_689_015)] {
        let (cr, iv) = byte_counter_intervals(RpMode::AdaptiveBc, cnms);
        assert_eq!(cr.bps(), cr_bps);
        assert_eq!(iv.len(), 4);
        // BC_LIMIT = K·CR: the expiries come every K of transmission, whatever the rate, to
        // within one 1500-octet frame at the slowest rate of the period (the expiry happens at
        // the start of the frame that crosses the limit).
        let frame_time = cr.tx_time(Bytes::new(1500));
        for d in &iv {
            let err = d.as_nanos().abs_diff(k.as_nanos());
            assert!(
                err <= frame_time.as_nanos(),
                "CR {cr}: interval {d} vs K {k}"
            );
        }
        let (_, fixed) = byte_counter_intervals(RpMode::Qcn, cnms);
        let us = |v: &[Duration]| {
            v.iter()
                .map(|d| format!("{:.1}", d.as_nanos() as f64 / 1e3))
                .collect::<Vec<_>>()
                .join(" ")
        };
        println!(
            "CR {cr}: byte-counter intervals (µs) adaptive-bc {}, qcn 150 KB {}",
            us(&iv),
            us(&fixed)
        );
    }
    // Standard QCN for contrast: 150 KB takes 236 µs at 5.08 Gb/s but 3.55 ms at 338 Mb/s.
    let (_, fast) = byte_counter_intervals(RpMode::Qcn, 1);
    let (_, slow) = byte_counter_intervals(RpMode::Qcn, 5);
    assert!(slow[0] > fast[0].saturating_mul(10), "{slow:?} vs {fast:?}");
}

#[test]
fn qcn_bs_one_limiter_per_cp_sent_at_the_minimum() {
    // Idle, both entries recover by their timers. Under `rp_release = "line-rate"` CR halves
    // its way up to a capped TR and CP B's entry (closer to the line) reaches it first and is
    // dropped, then CP A's. Under the default `max-rate` both reach the line at their 6th
    // timer expiry (active increase lifts TR past it: A 992.1875 → 998.6 M → released, B
    // 998.05 M → released) and go together.
    bs_minimum_then_release(Release::LineRate, &[2, 1, 0]);
    bs_minimum_then_release(Release::MaxRate, &[2, 0]);
}

fn bs_minimum_then_release(release: Release, expect_shapes: &[usize]) {
    let rp = RpParams {
        rpg_byte_reset: Bytes::new(10_000),
        rp_release: release,
        ..RpParams::default()
    };
    let mut a = Agent::new(cfg(Rate::from_gbps(1), RpMode::QcnBs, rp), Rng::new(1)).unwrap();
    let t = Instant::from_nanos(1_000_000);
    a.handle_host(t, &frame(PEER, 992)).unwrap();
    let up = send_all(&mut a, t);
    // Gd = 1/128: QntzFb 32 → ×0.75 (750 Mb/s), QntzFb 16 → ×0.875 (875 Mb/s).
    a.handle_uplink(t, &cnm(&up[0], SW_A, 32));
    a.handle_uplink(t, &cnm(&up[0], SW_B, 16));
    assert_eq!(a.stats().cnm_rx, 2);
    assert_eq!(a.stats().limiters_created, 1);
    let v = &a.flows()[0];
    assert_eq!(v.cps.len(), 2);
    assert_eq!(
        (v.cps[0].cpid, v.cps[0].cr_bps, v.cps[0].tr_bps),
        (cpid(SW_A), 750_000_000, 1_000_000_000)
    );
    assert_eq!((v.cps[1].cpid, v.cps[1].cr_bps), (cpid(SW_B), 875_000_000));
    // The flow shows the minimum-CR entry.
    assert_eq!(
        (v.cr_bps, v.tr_bps, v.state),
        (750_000_000, 1_000_000_000, RpState::Fr)
    );
    assert_eq!(a.flow_rate(1), Some(Rate::from_mbps(750)));
    let j = serde_json::to_value(a.flows()).unwrap();
    assert_eq!(j[0]["state"], "fr");
    assert_eq!(j[0]["cps"][1]["cpid"], cpid(SW_B).to_string());
    assert_eq!(j[0]["cps"][1]["cr_bps"], 875_000_000u64);
    assert_eq!(j[0]["cps"][1]["tr_bps"], 1_000_000_000u64);
    assert!(j[0].get("er_cpid").is_none());

    // Ten frames of 992 + 8 = 1000 octets, paced at the minimum, 750 Mb/s: one every
    // 8000 bit / 750 Mb/s = 10 666.67 ns. The 10 000 octets expire both byte counters once.
    let f = frame(PEER, 992);
    for _ in 0..10 {
        a.handle_host(t, &f).unwrap();
    }
    let mut starts = Vec::new();
    let mut now = t;
    while starts.len() < 10 {
        now = a.poll_timeout().unwrap().max(now);
        a.poll_uplink(now, &mut |fr| {
            assert_eq!(fr.len(), 1000);
            assert_eq!(walk(fr).unwrap().rpid, Some(1));
            starts.push(now);
            true
        });
    }
    // The first frame waits for the line (the 996 octets sent before the CNMs); the limiter
    // has been eligible since the CNM, so the second goes at t + 10 666.67 ns and the rest
    // follow at 750 Mb/s: 8 gaps after it take 85 333.33 ns.
    // The limiter has been eligible since the CNM at t: the first frames catch up at the line
    // rate (the pacer back-dates up to `catch_up`), then every frame starts on the 750 Mb/s
    // schedule t + k · 10 666.67 ns. Ten frames: the tenth at t + 96 000 ns.
    let rel: Vec<u64> = starts.iter().map(|s| (*s - t).as_nanos()).collect();
    assert_eq!(
        rel[3..],
        [32_000, 42_666, 53_333, 64_000, 74_666, 85_333, 96_000]
    );
    // Both entries moved halfway to TR = 1 G: 875 M and 937.5 M; the flow at 875 M.
    let v = &a.flows()[0];
    assert_eq!(
        v.cps.iter().map(|c| c.cr_bps).collect::<Vec<_>>(),
        [875_000_000, 937_500_000]
    );
    assert_eq!(v.cr_bps, 875_000_000);

    // Idle: both timers recover, the entries are dropped as they reach the line (see above),
    // and the flow's limiter is released.
    let mut shapes = vec![2];
    while a.stats().limited_flows > 0 {
        now = a.poll_timeout().unwrap().max(now);
        a.poll_uplink(now, &mut |_| true);
        let v = &a.flows()[0];
        if shapes.last() != Some(&v.cps.len()) {
            shapes.push(v.cps.len());
            if v.cps.len() == 1 {
                assert_eq!(v.cps[0].cpid, cpid(SW_A));
            }
        }
        assert!(now < t + Duration::from_secs(2));
    }
    assert_eq!(shapes, expect_shapes);
    assert_eq!(a.stats().limiters_released, 1);
    let v = &a.flows()[0];
    assert_eq!((v.state, v.cr_bps), (RpState::Released, 1_000_000_000));
    let j = serde_json::to_value(a.flows()).unwrap();
    assert!(j[0].get("cps").is_none());
    a.handle_host(now, &f).unwrap();
    assert_eq!(walk(&send_all(&mut a, now)[0]).unwrap().rpid, None);
}

#[test]
fn qcn_bs_table_bound_is_counted() {
    let rp = RpParams {
        rpg_bs_max_cps: 2,
        ..RpParams::default()
    };
    let mut a = Agent::new(cfg(Rate::from_gbps(1), RpMode::QcnBs, rp), Rng::new(1)).unwrap();
    let t = Instant::from_nanos(1);
    a.handle_host(t, &frame(PEER, 100)).unwrap();
    let up = send_all(&mut a, t);
    a.handle_uplink(t, &cnm(&up[0], SW_A, 32)); // 750 M
    a.handle_uplink(t, &cnm(&up[0], SW_B, 8)); // 937.5 M
    a.handle_uplink(t, &cnm(&up[0], SW_C, 16)); // 875 M, displaces B (the highest CR)
    assert_eq!(a.stats().bs_cp_overflow, 1);
    let cps: Vec<_> = a.flows()[0].cps.iter().map(|c| c.cpid).collect();
    assert_eq!(cps, [cpid(SW_A), cpid(SW_C)]);
    assert_eq!(a.flow_rate(1), Some(Rate::from_mbps(750)));
}

#[test]
fn qcn_bs_entry_at_the_line_rate_releases_the_flow_at_once() {
    // rpg_min_rate = line rate: a CNM cannot lower CR, the new entry is at the line rate, is
    // dropped, and the empty table releases the flow.
    let line = Rate::from_mbps(100);
    let rp = RpParams {
        rpg_min_rate: line,
        ..RpParams::default()
    };
    let mut a = Agent::new(cfg(line, RpMode::QcnBs, rp), Rng::new(1)).unwrap();
    let t = Instant::from_nanos(1);
    a.handle_host(t, &frame(PEER, 100)).unwrap();
    let up = send_all(&mut a, t);
    a.handle_uplink(t, &cnm(&up[0], SW_A, 63));
    let s = a.stats();
    assert_eq!(
        (s.limiters_created, s.limiters_released, s.limited_flows),
        (1, 1, 0)
    );
    assert_eq!(a.poll_timeout(), None);
}

#[test]
fn adaptive_bc_with_qcn_bs_sizes_each_entry_by_its_own_rate() {
    let rp = RpParams {
        rpg_time_reset: Duration::from_secs(100),
        ..RpParams::default()
    };
    let mode = RpMode::AdaptiveBcQcnBs;
    let mut a = Agent::new(cfg(Rate::from_gbps(10), mode, rp), Rng::new(1)).unwrap();
    let t = Instant::from_nanos(1_000_000);
    let f = frame(PEER, 1492);
    a.handle_host(t, &f).unwrap();
    let up = send_all(&mut a, t);
    // CP A: 10 G × (1 − 63/128) = 5.078125 G; CP B: 10 G × 0.75 = 7.5 G.
    a.handle_uplink(t, &cnm(&up[0], SW_A, 63));
    a.handle_uplink(t, &cnm(&up[0], SW_B, 32));
    assert_eq!(a.flow_rate(1).unwrap().bps(), 5_078_125_000);
    events(&mut a);
    // The flow sends at 5.078 G. CP A's counter (K·5.078 G = 152 343 octets) expires after
    // K = 240 µs; CP B's (K·7.5 G = 225 000 octets) after 225 000 / 152 343 × 240 µs ≈ 354 µs
    // of sending at the minimum. Each expiry of A moves the minimum; B's expiry does not
    // until it is the minimum.
    let (_, ev) = greedy(&mut a, &f, t, t + Duration::from_micros(300));
    let first = rate_change_times(&ev);
    assert_eq!(first.len(), 1, "{ev:?}");
    let d = first[0] - t;
    assert!(d.as_nanos().abs_diff(240_000) <= 2_400, "{d}");
    let v = &a.flows()[0];
    // A: ⌈(5.078125 G + 10 G) / 2⌉ = 7.5390625 G; B still 7.5 G and now the minimum.
    assert_eq!(
        v.cps.iter().map(|c| c.cr_bps).collect::<Vec<_>>(),
        [7_539_062_500, 7_500_000_000]
    );
    assert_eq!(v.cr_bps, 7_500_000_000);
}

#[test]
fn explicit_rate_follows_the_cpid_rule() {
    let rp = RpParams {
        rp_er_timeout: Duration::from_millis(10),
        ..RpParams::default()
    };
    let mut a = Agent::new(
        cfg(Rate::from_gbps(10), RpMode::ExplicitRate, rp),
        Rng::new(1),
    )
    .unwrap();
    let t = Instant::from_nanos(1_000_000);
    a.handle_host(t, &frame(PEER, 100)).unwrap();
    let up = send_all(&mut a, t);
    let g = Rate::from_gbps;
    // Feedback at the line rate for an unlimited flow: nothing to limit.
    a.handle_uplink(t, &feedback(SW_A, g(10), PEER));
    assert_eq!(a.stats().limiters_created, 0);
    assert_eq!(a.stats().rate_feedback_matched, 1);
    // (message from, advertised Gb/s) → (r Gb/s, CP).
    let rows = [
        // First message below the line: a limiter at r, CP ← A.
        ((SW_A, 5), (5, SW_A)),
        // A lower rate from another CP takes over.
        ((SW_B, 2), (2, SW_B)),
        // A higher rate from another CP is ignored.
        ((SW_A, 3), (2, SW_B)),
        // A higher rate from the same CP raises the rate.
        ((SW_B, 4), (4, SW_B)),
        // Equal rate from another CP: not lower, ignored.
        ((SW_C, 4), (4, SW_B)),
        // A lower rate from the same CP.
        ((SW_B, 1), (1, SW_B)),
    ];
    for ((from, ri), (r, cp)) in rows {
        a.handle_uplink(t, &feedback(from, g(ri), PEER));
        let v = &a.flows()[0];
        assert_eq!(
            (v.cr_bps, v.er_cpid, v.state),
            (g(r).bps(), Some(cpid(cp)), RpState::Er),
            "after {ri} G from {from}"
        );
        assert_eq!(a.flow_rate(1), Some(g(r)));
    }
    let s = a.stats();
    assert_eq!(s.limiters_created, 1);
    assert_eq!(s.rate_feedback_overridden, 2);
    assert_eq!(a.flows()[0].rate_feedback_rx, 7);
    let j = serde_json::to_value(a.flows()).unwrap();
    assert_eq!(j[0]["state"], "er");
    assert_eq!(j[0]["er_cpid"], cpid(SW_B).to_string());
    assert!(j[0].get("cps").is_none());
    // One event per change: the six rows changed the rate or CP four times.
    let ev = events(&mut a);
    let fb: Vec<u64> = ev
        .iter()
        .filter_map(|e| match e {
            Event::RateFeedback { cr_bps, .. } => Some(*cr_bps),
            _ => None,
        })
        .collect();
    assert_eq!(fb, [5, 2, 4, 1].map(|r| g(r).bps()));

    // CNMs are ignored in this mode, and counted.
    a.handle_uplink(t, &cnm(&up[0], SW_C, 63));
    assert_eq!(a.stats().cnm_mode_ignored, 1);
    assert_eq!(a.stats().cnm_rx, 0);
    assert_eq!(a.flow_rate(1), Some(g(1)));

    // The flow is paced at r: 1000-octet frames (992 + tag + CN-TAG) at 1 Gb/s, one per 8 µs
    // (after the first, which catches up with the time the limiter was already eligible).
    let f = frame(PEER, 992);
    for _ in 0..5 {
        a.handle_host(t, &f).unwrap();
    }
    let (sent, _) = greedy(&mut a, &f, t, t + Duration::from_micros(80));
    let gaps: Vec<u64> = sent.windows(2).map(|w| (w[1] - w[0]).as_nanos()).collect();
    assert!(
        gaps.len() >= 5 && gaps[1..].iter().all(|&d| d == 8_000),
        "{gaps:?}"
    );

    // A looser CP keeps talking, the followed one falls silent: released after rp_er_timeout
    // (10 ms) from the last applied message.
    let mut now = t + Duration::from_micros(80);
    while a.flows()[0].queued_frames > 0 {
        now = a.poll_timeout().unwrap().max(now);
        a.poll_uplink(now, &mut |_| true);
    }
    assert!(now < t + Duration::from_millis(5));
    while now < t + Duration::from_millis(9) {
        a.handle_uplink(now, &feedback(SW_A, g(3), PEER));
        a.poll_uplink(now, &mut |_| true);
        now += Duration::from_millis(1);
    }
    assert_eq!(a.stats().limited_flows, 1);
    let due = a.poll_timeout().unwrap();
    assert_eq!(due, t + Duration::from_millis(10));
    a.poll_uplink(due, &mut |_| true);
    let s = a.stats();
    assert_eq!(
        (s.er_timeouts, s.limiters_released, s.limited_flows),
        (1, 1, 0)
    );
    assert_eq!(a.flow_rate(1), Some(g(10)));
    // The next advertisement restores a rate, with the CP unset before it.
    a.handle_uplink(due, &feedback(SW_A, g(3), PEER));
    assert_eq!(a.flow_rate(1), Some(g(3)));
    assert_eq!(a.flows()[0].er_cpid, Some(cpid(SW_A)));
}

#[test]
fn explicit_rate_feedback_matches_dst_and_priority() {
    let mut a = Agent::new(
        cfg(
            Rate::from_gbps(1),
            RpMode::ExplicitRate,
            RpParams::default(),
        ),
        Rng::new(1),
    )
    .unwrap();
    let t = Instant::from_nanos(1);
    a.handle_host(t, &frame(PEER, 100)).unwrap();
    a.handle_host(t, &frame(PEER2, 100)).unwrap();
    a.handle_uplink(t, &feedback(SW_A, Rate::from_mbps(300), PEER2));
    assert_eq!(a.flow_rate(1), Some(Rate::from_gbps(1)));
    assert_eq!(a.flow_rate(2), Some(Rate::from_mbps(300)));
    // Another priority: no flow.
    let mut x = feedback(SW_A, Rate::from_mbps(100), PEER);
    x[18 + 2] = 5 << 5;
    a.handle_uplink(t, &x);
    assert_eq!(a.stats().rate_feedback_unmatched, 1);
    assert_eq!(a.flow_rate(1), Some(Rate::from_gbps(1)));
}

#[test]
fn hostile_rate_feedback_is_bounded_and_counted() {
    let line = Rate::from_gbps(1);
    let min = Rate::from_mbps(5);
    let mut a = Agent::new(
        cfg(line, RpMode::ExplicitRate, RpParams::default()),
        Rng::new(1),
    )
    .unwrap();
    let t = Instant::from_nanos(1);
    a.handle_host(t, &frame(PEER, 100)).unwrap();
    send_all(&mut a, t);
    // Rate 0: the flow is held at rpg_min_rate, never stopped.
    a.handle_uplink(t, &feedback(SW_A, Rate::ZERO, PEER));
    assert_eq!(a.flow_rate(1), Some(min));
    // Beyond the line, from the followed CP: clamped to the line, so the limiter is released.
    a.handle_uplink(t, &feedback(SW_A, Rate::from_bps(u64::MAX), PEER));
    assert_eq!(a.flow_rate(1), Some(line));
    assert_eq!(a.stats().limited_flows, 0);
    a.handle_uplink(t, &feedback(SW_A, Rate::ZERO, PEER));
    let good = feedback(SW_B, Rate::from_mbps(1), PEER);
    // Unknown version (PDU after the VLAN tag, at octet 18).
    let mut x = good.clone();
    x[18] = 1;
    a.handle_uplink(t, &x);
    // Truncated message.
    a.handle_uplink(t, &good[..30]);
    // Addressed to another station.
    let mut x = good.clone();
    x[..6].copy_from_slice(&PEER2.0);
    a.handle_uplink(t, &x);
    // About a destination we do not send to.
    a.handle_uplink(t, &feedback(SW_B, Rate::from_mbps(1), PEER2));
    let s = a.stats();
    assert_eq!(s.rate_feedback_rx, 7);
    assert_eq!(s.rate_feedback_bad_version, 1);
    assert_eq!(s.rate_feedback_malformed, 1);
    assert_eq!(s.rate_feedback_not_for_us, 1);
    assert_eq!(s.rate_feedback_unmatched, 1);
    assert_eq!(s.rate_feedback_matched, 3);
    assert_eq!(a.flow_rate(1), Some(min));
    // Random messages and random bytes never panic nor leave [rpg_min_rate, line].
    let mut rng = Rng::new(5);
    for i in 0..5000 {
        let mut x = good.clone();
        match i % 3 {
            0 => {
                let r = Rate::from_bps(rng.next_u64() >> rng.below(64));
                x = feedback(SW_A, r, PEER);
            }
            1 => {
                for b in x.iter_mut().skip(18) {
                    *b = rng.next_u64() as u8;
                }
                x[18] = 0;
                x[18 + 2] = 3 << 5;
                x[18 + 20..18 + 26].copy_from_slice(&PEER.0);
            }
            _ => {
                let n = 14 + rng.below(40) as usize;
                x.truncate(n.min(x.len()));
            }
        }
        a.handle_uplink(t, &x);
        let r = a.flow_rate(1).unwrap();
        assert!(r >= min && r <= line, "{r}");
    }
}

#[test]
fn rate_feedback_is_ignored_outside_explicit_rate_mode() {
    for mode in [
        RpMode::Qcn,
        RpMode::AdaptiveBc,
        RpMode::QcnBs,
        RpMode::AdaptiveBcQcnBs,
    ] {
        let mut a = Agent::new(
            cfg(Rate::from_gbps(1), mode, RpParams::default()),
            Rng::new(1),
        )
        .unwrap();
        let t = Instant::from_nanos(1);
        a.handle_host(t, &frame(PEER, 100)).unwrap();
        a.handle_uplink(t, &feedback(SW_A, Rate::from_mbps(10), PEER));
        let s = a.stats();
        assert_eq!((s.rate_feedback_rx, s.rate_feedback_mode_ignored), (1, 1));
        assert_eq!(s.limited_flows, 0);
        assert_eq!(a.flow_rate(1), Some(Rate::from_gbps(1)));
    }
}
