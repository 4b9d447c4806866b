//! CIOQ behaviour: VOQ isolation, backpressure, drop-tail fan-in, transmission selection,
//! buffer recycling and the stats snapshot.
#![allow(clippy::unwrap_used)]

mod core_support;

use cnm_proto::{Bytes, Duration, Instant, Rate};
use core_support::*;
use cp_switch::config::PriorityPolicy;
use cp_switch::{BridgeConfig, PortConfig, PortId};

/// p0: congested output (10 Mb/s), p1: input, p2: idle output (unshaped).
fn isolation_bridge() -> Harness {
    let cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0").with_rate(Rate::from_mbps(10)),
        PortConfig::new("p1"),
        PortConfig::new("p2"),
    ]);
    let mut h = Harness::new(cfg);
    h.learn(0, 0);
    h.learn(2, 2);
    h.run_until(h.now + Duration::from_millis(10));
    h.clear();
    h
}

#[test]
fn congested_output_never_blocks_idle_output_from_same_input() {
    let mut h = isolation_bridge();
    // 250 KB for the congested output from input p1: fills the output queue (150 KB) and
    // leaves ~100 KB in p1's input buffer (VOQ for p0).
    for _ in 0..250 {
        h.rx(1, &frame(mac(0), mac(1), None, 1000));
    }
    h.poll();
    assert!(h.bridge.output_queue_bytes(PortId(0), 0) >= 149_000);
    let held = h.bridge.input_queue_bytes(PortId(1), 0);
    assert!(
        held >= 98_000,
        "backpressure holds frames in the VOQ: {held}"
    );
    let before = h.data_out(0).len();
    // A frame for the idle output from the same input leaves at once.
    h.rx(1, &frame(mac(2), mac(1), None, 1000));
    h.poll();
    let out2 = h.data_out(2);
    assert_eq!(out2.len(), 1);
    assert_eq!(out2[0].at, h.now);
    assert_eq!(h.data_out(0).len(), before);
    assert_eq!(h.bridge.stats().ports[1].drops, 0);
    // And keeps doing so while the congested VOQ stays backlogged.
    for k in 0..20 {
        h.advance(Duration::from_micros(100));
        h.rx(1, &frame(mac(2), mac(1), None, 1000));
        h.poll();
        assert_eq!(h.data_out(2).len(), 2 + k);
    }
}

#[test]
fn drop_tail_fan_in_counts_drops() {
    // Four 1 Gb/s senders into one 1 Gb/s output, nobody pauses.
    let mut ports = vec![PortConfig::new("p0").with_rate(Rate::from_gbps(1))];
    for i in 1..5 {
        ports.push(PortConfig::new(format!("p{i}")).with_rate(Rate::from_gbps(1)));
    }
    let mut h = Harness::new(BridgeConfig::with_ports(ports));
    h.learn(0, 0);
    let gap = Rate::from_gbps(1).tx_time(Bytes::new(1500 + 24));
    let end = h.now + Duration::from_millis(20);
    let mut sent = 0u64;
    while h.now < end {
        for k in 1..5u8 {
            h.rx(u16::from(k), &frame(mac(0), mac(k), None, 1500));
            sent += 1;
        }
        let next = h.now + gap;
        h.run_until(next);
    }
    h.run_until(h.now + Duration::from_millis(50));
    let st = h.bridge.stats();
    let dropped: u64 = (1..5).map(|i| st.ports[i].drop_reasons.input_full).sum();
    let delivered = h.data_out(0).len() as u64;
    assert!(dropped > 0);
    assert_eq!(
        delivered + dropped,
        sent,
        "every frame delivered or counted"
    );
    let qdrops: u64 = st
        .queues
        .iter()
        .filter(|q| q.kind == cp_switch::stats::QueueKind::Input)
        .map(|q| q.drops)
        .sum();
    assert_eq!(qdrops, dropped);
    // The output ran at line rate meanwhile: ~20 ms × 1 Gb/s / 1524 B ≈ 1640 frames.
    assert!(delivered > 1600, "{delivered}");
    let mut drop_events = 0;
    h.bridge.drain_events(&mut |e| {
        if matches!(e, cp_switch::Event::Drop { .. }) {
            drop_events += 1;
        }
    });
    assert!(drop_events > 0);
}

#[test]
fn strict_priority_and_dwrr_selection() {
    for policy in [PriorityPolicy::Strict, PriorityPolicy::Dwrr] {
        let mut cfg = BridgeConfig::with_ports(vec![
            PortConfig::new("p0").with_rate(Rate::from_mbps(100)),
            PortConfig::new("p1"),
            PortConfig::new("p2"),
        ]);
        cfg.scheduler.policy = policy;
        cfg.scheduler.weights[5] = 3;
        cfg.max_frame = Bytes::new(1518);
        let mut h = Harness::new(cfg);
        h.learn(0, 0);
        h.run_until(h.now + Duration::from_millis(1));
        h.clear();
        for _ in 0..250 {
            h.rx(1, &frame(mac(0), mac(1), Some((2, 1)), 1000));
            h.rx(2, &frame(mac(0), mac(2), Some((5, 1)), 1000));
        }
        // 16 ms at 100 Mb/s: ~195 frames, both priorities backlogged throughout.
        h.run_until(h.now + Duration::from_millis(16));
        let out = h.data_out(0);
        let hi = out.iter().filter(|s| s.bytes[14] >> 5 == 5).count();
        let lo = out.iter().filter(|s| s.bytes[14] >> 5 == 2).count();
        match policy {
            PriorityPolicy::Strict => assert_eq!(lo, 0, "hi {hi}"),
            PriorityPolicy::Dwrr => {
                let r = hi as f64 / lo as f64;
                assert!((2.5..=3.5).contains(&r), "ratio {r} ({hi}/{lo})");
            }
        }
    }
}

#[test]
fn steady_state_does_not_allocate_buffers() {
    let cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0").with_rate(Rate::from_gbps(1)),
        PortConfig::new("p1"),
    ]);
    let mut h = Harness::new(cfg);
    h.learn(0, 0);
    // Offered: two frames per two 1500-octet times, below the line rate.
    let gap = Rate::from_gbps(1).tx_time(Bytes::new(2 * (1500 + 24)));
    let run = |h: &mut Harness, ms: u64| {
        let end = h.now + Duration::from_millis(ms);
        while h.now < end {
            h.rx(1, &frame(mac(0), mac(1), None, 1500));
            h.rx(1, &frame(mac(0), mac(1), None, 64));
            let t = h.now + gap;
            h.run_until(t);
            h.clear();
        }
    };
    run(&mut h, 20);
    let a = h.bridge.stats().buffers_allocated;
    run(&mut h, 20);
    assert_eq!(h.bridge.stats().buffers_allocated, a);
    assert!(a < 400, "{a}");
}

#[test]
fn stats_json_has_the_stable_keys() {
    let mut h = isolation_bridge();
    h.rx(1, &frame(mac(0), mac(1), None, 500));
    h.poll();
    let v = serde_json::to_value(h.bridge.stats()).unwrap();
    let port = &v["ports"][0];
    for k in [
        "name",
        "rx_frames",
        "tx_frames",
        "rx_bytes",
        "tx_bytes",
        "drops",
        "pause_tx",
        "pause_rx",
    ] {
        assert!(!port[k].is_null(), "ports[].{k}");
    }
    assert_eq!(port["name"], "p0");
    assert_eq!(port["rate"], "10mbit");
    let queues = v["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 3 * 8 * 2);
    for k in ["port", "priority", "kind", "bytes", "max_bytes", "drops"] {
        assert!(!queues[0][k].is_null(), "queues[].{k}");
    }
    assert_eq!(queues[0]["kind"], "input");
    assert_eq!(queues[24]["kind"], "output");
    assert_eq!(queues[0]["max_bytes"], 150_000);
    let mut ev = Vec::new();
    h.bridge
        .set_port_rate(h.now, PortId(0), Some(Rate::from_mbps(5)));
    h.bridge
        .drain_events(&mut |e| ev.push(serde_json::to_value(e).unwrap()));
    assert_eq!(ev.last().unwrap()["event"], "rate_change");
    let _ = Instant::ZERO;
}

#[test]
fn output_queued_drop_tail_policy() {
    let mut ports = vec![PortConfig::new("p0").with_rate(Rate::from_gbps(1))];
    for i in 1..5 {
        ports.push(PortConfig::new(format!("p{i}")));
    }
    let mut cfg = BridgeConfig::with_ports(ports);
    cfg.buffers.on_output_full = cp_switch::config::OutputFullPolicy::Drop;
    let mut h = Harness::new(cfg);
    h.learn(0, 0);
    let mut sent = 0u64;
    for _ in 0..100 {
        for k in 1..5u8 {
            h.rx(u16::from(k), &frame(mac(0), mac(k), None, 1500));
            sent += 1;
        }
    }
    // Nothing waits in the input buffers; the output queue holds 150 KB = 100 frames.
    for k in 1..5 {
        assert_eq!(h.bridge.input_queue_bytes(PortId(k), 0), 0);
    }
    assert_eq!(h.bridge.output_queue_bytes(PortId(0), 0), 150_000);
    h.run_until(h.now + Duration::from_millis(10));
    let st = h.bridge.stats();
    assert_eq!(st.ports[0].drop_reasons.output_full, sent - 100);
    assert_eq!(h.data_out(0).len(), 100);
    let oq = st
        .queues
        .iter()
        .find(|q| {
            q.kind == cp_switch::stats::QueueKind::Output && q.port == "p0" && q.priority == 0
        })
        .unwrap();
    assert_eq!(oq.drops, sent - 100);
    // Not allowed together with lossless mode.
    let mut bad = BridgeConfig::with_ports(vec![PortConfig::new("a"), PortConfig::new("b")]);
    bad.buffers.on_output_full = cp_switch::config::OutputFullPolicy::Drop;
    bad.lossless.mode = cp_switch::LosslessMode::Pause;
    assert_eq!(bad.validate().unwrap_err().field, "buffers.on_output_full");
}

/// The trace's `queues` line built on demand is the one built from the stats snapshot, line
/// after line (queues filling, draining, and idle ones left out).
#[test]
fn queues_line_matches_the_snapshot_line() {
    use daemon_kit::trace_record::QueueTracker;
    let mut h = isolation_bridge();
    let (mut fast, mut slow) = (QueueTracker::default(), QueueTracker::default());
    let mut listed = 0;
    for round in 0..60u64 {
        if round < 3 {
            for _ in 0..30 {
                h.rx(1, &frame(mac(0), mac(1), None, 1000));
            }
        }
        h.advance(Duration::from_millis(5));
        h.poll();
        let t = h.now.as_nanos();
        let entries = h
            .bridge
            .stats()
            .queues
            .iter()
            .map(|q| q.trace_entry())
            .collect::<Vec<_>>();
        let want = slow.line(t, Some("sw"), entries.into_iter());
        let got = h.bridge.queues_line(&mut fast, t, Some("sw"));
        assert_eq!(got, want, "round {round}");
        listed += usize::from(got.is_some());
    }
    // Busy rounds, the round that writes the emptied queues at zero, then idle ones.
    assert!(listed > 5 && listed < 60, "{listed}");
}
