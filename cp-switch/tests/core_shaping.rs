//! Line-rate emulation and propagation delay: accuracy, runtime changes.
#![allow(clippy::unwrap_used)]

mod core_support;

use cnm_proto::line::Overheads;
use cnm_proto::{Duration, Instant, Rate};
use core_support::*;
use cp_switch::{BridgeConfig, Event, PortConfig, PortId};

/// Bytes a frame of `len` octets costs on the line with the default shaper settings:
/// padding to 60, FCS 4, preamble + SFD + IPG 20.
fn wire(len: usize) -> u64 {
    Overheads::ETHERNET.octets(len)
}

/// Keeps output p1 backlogged from input p0 and measures its rate over `window` by the
/// departure times: bytes of all frames but the last / (last start − first start).
fn measure(h: &mut Harness, window: Duration, len: usize) -> f64 {
    let f = frame(mac(1), mac(0), None, len);
    let start = h.now;
    let first = h.sent.len();
    let end = start + window;
    loop {
        while h.bridge.input_queue_bytes(PortId(0), 0) + h.bridge.output_queue_bytes(PortId(1), 0)
            < 100_000
        {
            h.rx(0, &f);
        }
        let t = h.bridge.poll_timeout().unwrap();
        if t > end {
            break;
        }
        h.now = h.now.max(t);
        h.poll();
    }
    let out: Vec<&Sent> = h.sent[first..]
        .iter()
        .filter(|s| s.port == PortId(1))
        .collect();
    assert!(out.len() >= 10, "{} frames", out.len());
    let bytes: u64 = out[..out.len() - 1]
        .iter()
        .map(|s| wire(s.bytes.len()))
        .sum();
    let span = out.last().unwrap().at - out[0].at;
    bytes as f64 * 8.0 / span.as_secs_f64()
}

fn shaped(rate: Rate) -> Harness {
    let cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0"),
        PortConfig::new("p1").with_rate(rate),
    ]);
    let mut h = Harness::new(cfg);
    h.learn(1, 1);
    h.run_until(h.now + Duration::from_millis(1));
    h.clear();
    h
}

#[test]
fn shaper_is_accurate_to_1_percent_over_100_ms() {
    for (rate, len) in [
        (Rate::from_mbps(10), 200),
        (Rate::from_mbps(100), 1000),
        (Rate::from_gbps(1), 1500),
        (Rate::from_gbps(10), 1500),
        (Rate::from_gbps(1), 64),
    ] {
        let mut h = shaped(rate);
        let got = measure(&mut h, Duration::from_millis(100), len);
        let err = (got - rate.as_f64()).abs() / rate.as_f64();
        assert!(
            err < 0.01,
            "{rate} with {len} B frames: measured {got:.0} bit/s"
        );
        assert_eq!(h.bridge.stats().ports[0].drops, 0);
    }
}

#[test]
fn late_polls_catch_up_without_losing_rate() {
    // The daemon polls every 50 us (not at each departure): the long-run rate holds.
    let rate = Rate::from_gbps(1);
    let mut h = shaped(rate);
    let f = frame(mac(1), mac(0), None, 1000);
    let start = h.now;
    for _ in 0..2000 {
        while h.bridge.input_queue_bytes(PortId(0), 0) < 100_000 {
            h.rx(0, &f);
        }
        h.advance(Duration::from_micros(50));
        h.poll();
    }
    let bytes: u64 = h.data_out(1).iter().map(|s| wire(s.bytes.len())).sum();
    let got = bytes as f64 * 8.0 / (h.now - start).as_secs_f64();
    assert!((got / rate.as_f64() - 1.0).abs() < 0.01, "{got}");
}

#[test]
fn propagation_delay() {
    let cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0"),
        PortConfig::new("p1").with_delay(Duration::from_micros(25)),
        PortConfig::new("p2")
            .with_rate(Rate::from_gbps(1))
            .with_delay(Duration::from_micros(100)),
    ]);
    let mut h = Harness::new(cfg);
    h.bridge
        .handle_frame(h.now, PortId(1), &frame([0xff; 6], mac(1), None, 60));
    h.bridge
        .handle_frame(h.now, PortId(2), &frame([0xff; 6], mac(2), None, 60));
    h.run_until(h.now + Duration::from_millis(1));
    h.clear();
    let t0 = h.now;
    h.rx(0, &frame(mac(1), mac(0), None, 1000));
    h.rx(0, &frame(mac(2), mac(0), None, 1476)); // 1500 wire octets = 12 us at 1 Gb/s
    h.rx(0, &frame(mac(2), mac(0), None, 1476));
    h.poll();
    assert!(h.sent.is_empty());
    // Next event: p2's second frame leaves the shaper 12 us after the first.
    assert_eq!(
        h.bridge.poll_timeout(),
        Some(t0 + Duration::from_micros(12))
    );
    h.run_until(t0 + Duration::from_millis(1));
    let p1 = h.data_out(1);
    assert_eq!(p1.len(), 1);
    assert_eq!(p1[0].at, t0 + Duration::from_micros(25));
    let p2 = h.data_out(2);
    assert_eq!(p2.len(), 2);
    assert_eq!(p2[0].at, t0 + Duration::from_micros(100));
    assert_eq!(p2[1].at, t0 + Duration::from_micros(112));
    // Lowering the delay re-times the frame already in flight (it left at t1: due at t1 with
    // no delay) and never reorders frames.
    h.clear();
    let t1 = h.now;
    h.rx(0, &frame(mac(1), mac(0), None, 100));
    h.poll(); // on the line, due in 25 us
    h.bridge.set_port_delay(t1, PortId(1), Duration::ZERO);
    h.rx(0, &frame(mac(1), mac(0), None, 200));
    h.run_until(t1 + Duration::from_millis(1));
    let p1 = h.data_out(1);
    assert_eq!(p1.len(), 2);
    assert_eq!(p1[0].bytes.len(), 100);
    assert_eq!(p1[0].at, t1);
    assert_eq!(p1[1].at, t1);
    // With the delay gone and the line empty, frames leave at once.
    h.clear();
    h.rx(0, &frame(mac(1), mac(0), None, 100));
    h.poll();
    assert_eq!(h.data_out(1).len(), 1);
    assert_eq!(h.data_out(1)[0].at, h.now);
}

#[test]
fn runtime_rate_change_10_1_10() {
    let mut h = shaped(Rate::from_mbps(100));
    let fast = measure(&mut h, Duration::from_millis(20), 1000);
    h.bridge
        .set_port_rate(h.now, PortId(1), Some(Rate::from_mbps(10)));
    let slow = measure(&mut h, Duration::from_millis(50), 1000);
    h.bridge
        .set_port_rate(h.now, PortId(1), Some(Rate::from_mbps(100)));
    let fast2 = measure(&mut h, Duration::from_millis(20), 1000);
    h.bridge.set_port_rate(h.now, PortId(1), None);
    let before = h.data_out(1).len();
    h.rx(0, &frame(mac(1), mac(0), None, 1000));
    h.poll();
    assert!(
        h.data_out(1).len() > before + 50,
        "unshaped: the backlog leaves at once"
    );
    for (got, want) in [(fast, 100e6), (slow, 10e6), (fast2, 100e6)] {
        assert!((got / want - 1.0).abs() < 0.01, "{got} vs {want}");
    }
    let mut changes = Vec::new();
    h.bridge.drain_events(&mut |e| {
        if let Event::RateChange { rate, .. } = e {
            changes.push(*rate);
        }
    });
    assert_eq!(
        changes,
        vec![Some(Rate::from_mbps(10)), Some(Rate::from_mbps(100)), None]
    );
    let _ = Instant::ZERO;
}

/// Issue 15: `set rate P 1bit` then `set rate P 100mbit` left the frame started at 1 bit/s
/// holding the line for 12 000 s, and everything queued behind it.
#[test]
fn one_bit_then_100mbit_does_not_wedge_the_port() {
    let mut h = shaped(Rate::from_mbps(100));
    h.bridge
        .set_port_rate(h.now, PortId(1), Some(Rate::from_bps(1)));
    for _ in 0..3 {
        h.rx(0, &frame(mac(1), mac(0), None, 1000));
    }
    h.run_until(h.now + Duration::from_millis(1));
    assert_eq!(h.data_out(1).len(), 1, "one frame started at 1 bit/s");
    let t1 = h.now;
    h.bridge
        .set_port_rate(t1, PortId(1), Some(Rate::from_mbps(100)));
    // The rest of the first frame and the two others: about 3 × 82 µs at 100 Mb/s.
    h.run_until(t1 + Duration::from_millis(1));
    let out = h.data_out(1);
    assert_eq!(out.len(), 3);
    assert!(
        out[2].at < t1 + Duration::from_micros(300),
        "{:?}",
        out[2].at
    );
    assert_eq!(h.bridge.poll_timeout(), None);
}

/// Issue 15: `set delay P 100000s` then `set delay P 0s` held every later frame behind the one
/// on the wire for 100 000 s.
#[test]
fn a_huge_delay_then_zero_does_not_wedge_the_port() {
    let cfg = BridgeConfig::with_ports(Harness::ports(2));
    let mut h = Harness::new(cfg);
    h.learn(1, 1);
    h.bridge
        .set_port_delay(h.now, PortId(1), Duration::from_secs(100_000));
    h.rx(0, &frame(mac(1), mac(0), None, 100));
    h.run_until(h.now + Duration::from_millis(1));
    assert!(h.data_out(1).is_empty());
    let t1 = h.now;
    h.bridge.set_port_delay(t1, PortId(1), Duration::ZERO);
    h.rx(0, &frame(mac(1), mac(0), None, 200));
    h.run_until(t1 + Duration::from_millis(1));
    let out = h.data_out(1);
    assert_eq!(out.len(), 2);
    assert_eq!((out[0].bytes.len(), out[0].at), (100, t1));
    assert_eq!((out[1].bytes.len(), out[1].at), (200, t1));
}

/// A generated frame (`cnm_proto::wire::generated`) of `len` octets from `mac(0)` to
/// `mac(dst)`, stamped `stamp` ns by its sender.
fn generated_frame(dst: u8, len: usize, stamp: u64) -> Vec<u8> {
    use cnm_proto::wire::generated;
    let mut f = frame(mac(dst), mac(0), None, len);
    f[14..18].copy_from_slice(&generated::MAGIC.to_be_bytes());
    f[18..14 + generated::STAMPED_HEADER_LEN].fill(0);
    assert!(generated::set_departure(&mut f, Instant::from_nanos(stamp)));
    f
}

/// The departure stamps of the frames that left port `port`, in order (`None`: no stamp).
fn departures(h: &Harness, port: u16) -> Vec<Option<u64>> {
    use cnm_proto::wire::generated;
    h.data_out(port)
        .iter()
        .map(|s| generated::departure(&s.bytes).map(|t| t.as_nanos()))
        .collect()
}

/// Learns ports `1..=ports` (`mac(p)` behind port `p`), settles, then hands port 0 three
/// 1500-octet generated frames (stamp 7) for each of them at once and returns that instant.
fn three_generated_to_each(h: &mut Harness, ports: u8) -> Instant {
    for p in 1..=ports {
        h.learn(p, u16::from(p));
    }
    h.run_until(h.now + Duration::from_millis(1));
    h.clear();
    let t0 = h.now;
    for dst in 1..=ports {
        for _ in 0..3 {
            h.rx(0, &generated_frame(dst, 1500, 7));
        }
    }
    t0
}

/// A port with `stamp_departures` writes into each generated frame the instant its shaper
/// starts it (after the port's delay), not the instant it was polled: three 1500-octet frames
/// at 1 Gb/s (1524 octets on the line with FCS, preamble and gap: 12 192 ns each) that
/// arrived at t0 and were polled 100 µs late (within the shaper's 1 ms catch-up) carry t0,
/// t0 + 12 192 ns and t0 + 24 384 ns; behind a 5 µs delay, 5 µs more. Other frames leave as
/// they came, and so do generated frames on a port without the setting (the sender's stamp).
#[test]
fn a_stamping_port_writes_its_lines_start_instants() {
    let gbps = Rate::from_gbps(1);
    let stamping = |p: PortConfig| PortConfig {
        stamp_departures: true,
        ..p
    };
    let cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0"),
        stamping(PortConfig::new("p1").with_rate(gbps)),
        stamping(
            PortConfig::new("p2")
                .with_rate(gbps)
                .with_delay(Duration::from_micros(5)),
        ),
        PortConfig::new("p3").with_rate(gbps),
    ]);
    let mut h = Harness::new(cfg);
    let t0 = three_generated_to_each(&mut h, 3);
    let plain = frame(mac(1), mac(0), None, 1500);
    h.rx(0, &plain);
    h.advance(Duration::from_micros(100));
    h.run_until(h.now + Duration::from_millis(1));
    let stamps = |port: u16| departures(&h, port);
    let t = t0.as_nanos();
    assert_eq!(
        stamps(1),
        [Some(t), Some(t + 12_192), Some(t + 24_384), None]
    );
    assert_eq!(h.data_out(1)[3].bytes, plain);
    assert_eq!(
        stamps(2),
        [Some(t + 5_000), Some(t + 17_192), Some(t + 29_384)]
    );
    assert_eq!(stamps(3), [Some(7), Some(7), Some(7)]);
}

/// A port's own `catch_up` replaces the bridge's for that port alone: polled 100 µs late,
/// three generated frames that arrived at t0 start on a port with a 30 µs catch-up at
/// t0 + 70 µs (now − 30 µs) and 12 192 ns apart, while on a port with the bridge's 1 ms they
/// start at t0, as on a line that was never late. A stamping port towards a switch with a
/// 30 µs lookahead thereby never writes a departure that switch cannot place.
#[test]
fn a_ports_own_catch_up_bounds_how_far_its_late_poll_back_dates() {
    let gbps = Rate::from_gbps(1);
    let stamping = |p: PortConfig, catch_up: Option<Duration>| PortConfig {
        stamp_departures: true,
        catch_up,
        ..p
    };
    let cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0"),
        stamping(
            PortConfig::new("p1").with_rate(gbps),
            Some(Duration::from_micros(30)),
        ),
        stamping(PortConfig::new("p2").with_rate(gbps), None),
    ]);
    let mut h = Harness::new(cfg);
    let t0 = three_generated_to_each(&mut h, 2);
    h.advance(Duration::from_micros(100));
    h.run_until(h.now + Duration::from_millis(1));
    let stamps = |port: u16| departures(&h, port);
    let t = t0.as_nanos();
    let late = t + 70_000;
    assert_eq!(
        stamps(1),
        [Some(late), Some(late + 12_192), Some(late + 24_384)]
    );
    assert_eq!(stamps(2), [Some(t), Some(t + 12_192), Some(t + 24_384)]);
}
