//! Lossless mode: PAUSE/PFC generation with hysteresis and refresh, reception stopping the
//! output for quanta × 512 bit times, and a 4:1 fan-in with honouring senders.
#![allow(clippy::unwrap_used)]

mod core_support;

use cnm_proto::wire::MacControlRepr;
use cnm_proto::{Bytes, Duration, Instant, Rate};
use core_support::*;
use cp_switch::pause::quanta_time;
use cp_switch::{BridgeConfig, Event, LosslessMode, Placement, PortConfig, PortId};

/// p0: 10 Mb/s bottleneck output; p1: 1 Gb/s input link.
fn slow_drain(mode: LosslessMode) -> Harness {
    let mut cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0").with_rate(Rate::from_mbps(10)),
        PortConfig::new("p1").with_rate(Rate::from_gbps(1)),
    ]);
    cfg.lossless.mode = mode;
    // These tests watch PAUSE/PFC alone: no congestion points on priority 3.
    cfg.cp.placement = Placement::Off;
    let mut h = Harness::new(cfg);
    h.learn(0, 0);
    h.run_until(h.now + Duration::from_millis(5));
    h.clear();
    h
}

#[test]
fn xoff_at_qhigh_xon_at_qlow_and_refresh_before_expiry() {
    for mode in [LosslessMode::Pause, LosslessMode::Pfc] {
        let mut h = slow_drain(mode);
        // Output queue (150 KB) fills first, then the input buffer.
        let mut xoff_at = None;
        for n in 0..300 {
            let before = h.bridge.input_queue_bytes(PortId(1), 3);
            h.rx(1, &frame(mac(0), mac(1), Some((3, 1)), 1000));
            h.poll();
            if h.out(1).iter().any(|s| as_mac_control(&s.bytes).is_some()) {
                let after = h.bridge.input_queue_bytes(PortId(1), 3);
                assert!(before < 110_000 && after >= 110_000, "{before} {after}");
                xoff_at = Some(n);
                break;
            }
        }
        assert!(xoff_at.is_some(), "{mode:?}: no XOFF");
        let xoff = as_mac_control(&h.out(1)[0].bytes).unwrap();
        match (mode, xoff) {
            (LosslessMode::Pause, MacControlRepr::Pause { quanta }) => assert_eq!(quanta, 0xFFFF),
            (
                LosslessMode::Pfc,
                MacControlRepr::Pfc {
                    class_enable,
                    times,
                },
            ) => {
                assert_eq!(class_enable & (1 << 3), 1 << 3);
                assert_eq!(times[3], 0xFFFF);
                assert_eq!(times[0], 0);
            }
            other => panic!("{other:?}"),
        }
        // Drain at 10 Mb/s; 66 KB from Qhigh to Qlow takes > 50 ms, the pause lasts
        // 65535 × 512 bit / 1 Gb/s = 33.6 ms, so refreshes must come in between.
        let pause_len = quanta_time(0xFFFF, Rate::from_gbps(1));
        let t_xoff = h.now;
        let mut last_ctl = t_xoff;
        let mut xon = None;
        let mut step = 0;
        while xon.is_none() && step < 100_000 {
            step += 1;
            let before = h.bridge.input_queue_bytes(PortId(1), 3);
            let n = h.sent.len();
            let t = h.bridge.poll_timeout().unwrap();
            h.now = h.now.max(t);
            h.poll();
            for s in &h.sent[n..] {
                if s.port != PortId(1) {
                    continue;
                }
                let Some(mc) = as_mac_control(&s.bytes) else {
                    continue;
                };
                assert!(s.at - last_ctl < pause_len, "refresh came too late");
                last_ctl = s.at;
                let off = match mc {
                    MacControlRepr::Pause { quanta } => quanta == 0,
                    MacControlRepr::Pfc { times, .. } => times[3] == 0,
                    _ => false,
                };
                if off {
                    let after = h.bridge.input_queue_bytes(PortId(1), 3);
                    assert!(before > 44_000 && after <= 44_000, "{before} {after}");
                    xon = Some(s.at);
                }
            }
        }
        let xon = xon.expect("no XON");
        let ctl = h
            .out(1)
            .iter()
            .filter(|s| as_mac_control(&s.bytes).is_some())
            .count();
        assert!(
            xon - t_xoff > pause_len,
            "the test needs a drain longer than one pause"
        );
        assert!(ctl >= 3, "{mode:?}: XOFF, refresh(es), XON: {ctl}");
        let st = h.bridge.stats();
        assert_eq!(st.ports[1].pause_tx as usize, ctl);
        assert_eq!(st.ports[1].drops, 0);
        let mut on_off = Vec::new();
        h.bridge.drain_events(&mut |e| {
            if let Event::PauseTx { on, priority, .. } = e {
                on_off.push((*on, *priority));
            }
        });
        let prio = (mode == LosslessMode::Pfc).then_some(3);
        assert_eq!(on_off, vec![(true, prio), (false, prio)]);
    }
}

#[test]
fn received_pause_stops_output_for_quanta_times_512_bit_times() {
    let cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0").with_rate(Rate::from_gbps(1)),
        PortConfig::new("p1"),
    ]);
    let mut h = Harness::new(cfg);
    h.learn(0, 0);
    h.run_until(h.now + Duration::from_millis(1));
    h.clear();
    let t0 = h.now;
    h.rx(0, &pause_frame(mac(0), 1000)); // 1000 × 512 bit at 1 Gb/s = 512 us
    h.rx(1, &frame(mac(0), mac(1), None, 500));
    h.poll();
    assert!(h.sent.is_empty());
    assert_eq!(
        h.bridge.poll_timeout(),
        Some(t0 + Duration::from_micros(512))
    );
    h.run_until(t0 + Duration::from_micros(511));
    assert!(h.sent.is_empty());
    h.run_until(t0 + Duration::from_micros(512));
    assert_eq!(h.data_out(0).len(), 1);
    assert_eq!(h.sent[0].at, t0 + Duration::from_micros(512));
    // Quanta 0 resumes at once.
    h.clear();
    h.rx(0, &pause_frame(mac(0), 0xFFFF));
    h.rx(1, &frame(mac(0), mac(1), None, 500));
    h.advance(Duration::from_micros(10));
    h.poll();
    assert!(h.sent.is_empty());
    h.rx(0, &pause_frame(mac(0), 0));
    h.poll();
    assert_eq!(h.data_out(0).len(), 1);
    assert_eq!(h.bridge.stats().ports[0].pause_rx, 3);
}

#[test]
fn received_pfc_stops_only_its_priority() {
    let cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0"), // unshaped: quanta at the nominal 10 Gb/s
        PortConfig::new("p1"),
    ]);
    let mut h = Harness::new(cfg);
    h.learn(0, 0);
    let t0 = h.now;
    let mut times = [0u16; 8];
    times[3] = 1000; // 1000 × 512 bit / 10 Gb/s = 51.2 us
    h.rx(0, &pfc_frame(mac(0), 1 << 3, times));
    h.rx(1, &frame(mac(0), mac(1), Some((3, 1)), 500));
    h.rx(1, &frame(mac(0), mac(1), Some((1, 1)), 500));
    h.poll();
    let out = h.data_out(0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].bytes[14] >> 5, 1);
    h.run_until(t0 + Duration::from_nanos(51_199));
    assert_eq!(h.data_out(0).len(), 1);
    h.run_until(t0 + Duration::from_nanos(51_200));
    assert_eq!(h.data_out(0).len(), 2);
    assert_eq!(h.sent.last().unwrap().at, t0 + Duration::from_nanos(51_200));
}

/// A host that sends 1500-octet frames back to back at its link rate and honours PAUSE/PFC.
struct Sender {
    port: u16,
    host: u8,
    next: Instant,
    paused_until: Instant,
    sent: u64,
}

fn fan_in(mode: LosslessMode) -> (u64, u64, u64, u64) {
    let rate = Rate::from_gbps(1);
    let mut ports = vec![PortConfig::new("p0").with_rate(rate)];
    for i in 1..5 {
        // 50 us one-way: the XOFF reaches the sender 50 us after it is sent.
        ports.push(
            PortConfig::new(format!("p{i}"))
                .with_rate(rate)
                .with_delay(Duration::from_micros(50)),
        );
    }
    let mut cfg = BridgeConfig::with_ports(ports);
    cfg.lossless.mode = mode;
    cfg.cp.placement = Placement::Off;
    // These tests watch PAUSE/PFC alone: no congestion points on priority 3.
    cfg.cp.placement = Placement::Off;
    let mut h = Harness::new(cfg);
    h.learn(0, 0);
    let gap = rate.tx_time(Bytes::new(1500 + 24));
    let start = h.now;
    let mut senders: Vec<Sender> = (1..5u8)
        .map(|k| Sender {
            port: u16::from(k),
            host: k,
            next: start,
            paused_until: Instant::ZERO,
            sent: 0,
        })
        .collect();
    let end = start + Duration::from_millis(30);
    let mut delivered_bytes = 0u64;
    let mut delivered = 0u64;
    loop {
        let ts = senders
            .iter()
            .map(|s| s.next.max(s.paused_until))
            .min()
            .unwrap();
        let t = h.bridge.poll_timeout().map_or(ts, |b| b.min(ts));
        if t > end {
            break;
        }
        h.now = h.now.max(t);
        for s in senders.iter_mut() {
            let at = s.next.max(s.paused_until);
            if at <= h.now {
                h.bridge.handle_frame(
                    h.now,
                    PortId(s.port),
                    &frame(mac(0), mac(s.host), Some((3, 1)), 1500),
                );
                s.next = at + gap;
                s.sent += 1;
            }
        }
        let now = h.now;
        h.bridge.poll_transmit(now, &mut |port, bytes| {
            if port.0 == 0 {
                if as_mac_control(bytes).is_none() {
                    delivered += 1;
                    delivered_bytes += bytes.len() as u64;
                }
            } else if let Some(mc) = as_mac_control(bytes) {
                let s = &mut senders[usize::from(port.0) - 1];
                let q = match mc {
                    MacControlRepr::Pause { quanta } => quanta,
                    MacControlRepr::Pfc { times, .. } => times[3],
                    _ => 0,
                };
                s.paused_until = now + quanta_time(q, rate);
            }
            true
        });
    }
    let st = h.bridge.stats();
    let drops: u64 = st.ports.iter().map(|p| p.drops).sum();
    let pause_tx: u64 = st.ports.iter().map(|p| p.pause_tx).sum();
    let offered: u64 = senders.iter().map(|s| s.sent).sum();
    assert_eq!(
        offered,
        delivered
            + st.queues.iter().map(|q| q.frames).sum::<u64>()
            + st.ports
                .iter()
                .map(|p| p.in_flight_bytes / 1500)
                .sum::<u64>()
            + drops
    );
    let _ = delivered_bytes;
    (drops, pause_tx, delivered, offered)
}

#[test]
fn lossless_fan_in_4_to_1_has_zero_drops() {
    for mode in [LosslessMode::Pause, LosslessMode::Pfc] {
        let (drops, pause_tx, delivered, offered) = fan_in(mode);
        assert_eq!(drops, 0, "{mode:?}");
        assert!(pause_tx > 0, "{mode:?}");
        // 30 ms at 1 Gb/s with 1524 wire octets per frame ≈ 2460 frames: the bottleneck stays
        // busy while its senders are paused.
        assert!(delivered >= 2440, "{mode:?}: {delivered} of {offered}");
    }
}

#[test]
fn drop_tail_fan_in_drops_without_pause() {
    let (drops, pause_tx, _, _) = fan_in(LosslessMode::None);
    assert!(drops > 0);
    assert_eq!(pause_tx, 0);
}
