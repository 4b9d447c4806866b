//! Isolation between outputs sharing one input buffer: a stalled output (paused by its peer,
//! or slow and receiving flooded copies) must not take the input buffer from an unrelated flow.
//! Each test first shows the failure with the per-VOQ bound off (`buffers.voq_alpha = 0`, the
//! former plain shared buffer), then that the dynamic threshold removes it.
#![allow(clippy::unwrap_used)]

mod core_support;

use cnm_proto::{Duration, Rate};
use core_support::*;
use cp_switch::{BridgeConfig, LosslessMode, Placement, PortConfig, PortId};

/// h1 on p0, h2 on p1, h3 on p2 (at `p2_rate`); every host learned.
fn three_hosts(alpha: f64, p2_rate: Rate, mode: LosslessMode) -> Harness {
    let mut cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0").with_rate(Rate::from_gbps(1)),
        PortConfig::new("p1").with_rate(Rate::from_gbps(1)),
        PortConfig::new("p2").with_rate(p2_rate),
    ]);
    cfg.buffers.voq_alpha = alpha;
    cfg.lossless.mode = mode;
    cfg.cp.placement = Placement::Off;
    let mut h = Harness::new(cfg);
    for k in 0..3u8 {
        h.learn(k + 1, u16::from(k));
    }
    h
}

/// Frames h1 sent to h2 that reached h2.
fn delivered_to_h2(h: &Harness) -> usize {
    h.data_out(1)
        .iter()
        .filter(|s| s.bytes[..6] == mac(2) && s.bytes[6..12] == mac(1))
        .count()
}

/// h1 sends 1000-octet unicast frames to h2 every 10 us (800 Mb/s on a 1 Gb/s output) and,
/// every fifth frame, a broadcast, for 60 ms, while h3 keeps port p2 paused (PAUSE with the
/// largest time, refreshed every 10 ms). Returns (unicast sent, unicast delivered, drops of p0).
fn pause_flood_run(alpha: f64) -> (usize, usize, u64) {
    let mut h = three_hosts(alpha, Rate::from_gbps(1), LosslessMode::None);
    let mut sent = 0;
    for n in 0..6000u32 {
        if n % 1000 == 0 {
            h.rx(2, &pause_frame(mac(3), 0xFFFF));
        }
        h.rx(0, &frame(mac(2), mac(1), None, 1000));
        sent += 1;
        if n % 5 == 4 {
            h.rx(0, &frame([0xff; 6], mac(1), None, 1000));
        }
        let next = h.now + Duration::from_micros(10);
        h.run_until(next);
    }
    h.run_until(h.now + Duration::from_millis(5));
    let st = h.bridge.stats();
    (
        sent,
        delivered_to_h2(&h),
        st.ports[0].drop_reasons.input_full,
    )
}

#[test]
fn paused_output_does_not_take_the_input_buffer_drop_tail() {
    // The former behaviour: the broadcast copies for the paused p2 fill its output queue, then
    // h1's whole input buffer, and h1's unicast to h2 finds no room.
    let (sent, got, drops) = pause_flood_run(0.0);
    println!("voq_alpha = 0: h1 -> h2 {got}/{sent} delivered, {drops} input drops");
    assert!(
        got < sent * 95 / 100,
        "without the bound the paused port costs the unrelated flow: {got}/{sent}"
    );
    // With the dynamic threshold the paused port's VOQ holds at most 2/3 of the buffer; the
    // broadcast copies beyond it are dropped (counted) and every unicast frame arrives.
    let (sent, got, drops) = pause_flood_run(2.0);
    println!("voq_alpha = 2: h1 -> h2 {got}/{sent} delivered, {drops} input drops");
    assert_eq!(got, sent, "the unrelated flow lost frames");
    assert!(
        drops > 0,
        "the copies for the paused port are dropped and counted"
    );
}

#[test]
fn dynamic_threshold_is_the_default() {
    assert_eq!(BridgeConfig::default().buffers.voq_alpha, 2.0);
}

/// Before h2 is learned, h1's flow to h2 is flooded, and its copy towards a 10 Mb/s port
/// backs up; the flow to h2 must keep its rate.
fn slow_flood_run(alpha: f64) -> (usize, usize) {
    let mut cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0").with_rate(Rate::from_gbps(1)),
        PortConfig::new("p1").with_rate(Rate::from_gbps(1)),
        PortConfig::new("p2").with_rate(Rate::from_mbps(10)),
    ]);
    cfg.buffers.voq_alpha = alpha;
    cfg.cp.placement = Placement::Off;
    let mut h = Harness::new(cfg);
    h.learn(1, 0);
    let mut sent = 0;
    // 500 Mb/s of 1000-octet frames for 40 ms towards an address nobody has announced.
    for _ in 0..2500 {
        h.rx(0, &frame(mac(2), mac(1), None, 1000));
        sent += 1;
        let next = h.now + Duration::from_micros(16);
        h.run_until(next);
    }
    h.run_until(h.now + Duration::from_millis(5));
    (sent, delivered_to_h2(&h))
}

#[test]
fn slow_port_flood_copy_does_not_throttle_the_flow() {
    let (sent, got) = slow_flood_run(0.0);
    println!("voq_alpha = 0: flooded flow {got}/{sent} reached h2");
    assert!(
        got < sent / 2,
        "without the bound the 10 Mb/s copy paces the flow: {got}/{sent}"
    );
    let (sent, got) = slow_flood_run(2.0);
    println!("voq_alpha = 2: flooded flow {got}/{sent} reached h2");
    assert_eq!(got, sent);
}

#[test]
fn lossless_mode_keeps_the_shared_buffer() {
    // In PFC mode the bound is not applied: a single backlogged VOQ still reaches Qhigh and
    // sends XOFF instead of dropping.
    let mut h = three_hosts(2.0, Rate::from_mbps(10), LosslessMode::Pfc);
    for _ in 0..300 {
        h.rx(0, &frame(mac(3), mac(1), Some((3, 1)), 1000));
        h.poll();
    }
    let st = h.bridge.stats();
    assert!(h.bridge.input_queue_bytes(PortId(0), 3) >= 110_000);
    assert!(st.ports[0].pause_tx > 0);
}

/// PFC mode; h1 honours the XOFF it receives (skips its turn while p0 asserts it) and offers
/// a 1000-octet frame every 10 us, every fifth a broadcast, for `secs`; h3 floods PFC XOFF
/// for priority 0 every 10 ms for the first `storm` of it. Returns (turns, unicast delivered,
/// the bridge's stats, events).
fn pfc_storm_run(
    watchdog: Duration,
    secs: Duration,
    storm: Duration,
) -> (u64, u64, cp_switch::BridgeStats, Vec<cp_switch::Event>) {
    let mut cfg = BridgeConfig::with_ports(vec![
        PortConfig::new("p0").with_rate(Rate::from_gbps(1)),
        PortConfig::new("p1").with_rate(Rate::from_gbps(1)),
        PortConfig::new("p2").with_rate(Rate::from_gbps(1)),
    ]);
    cfg.lossless.mode = LosslessMode::Pfc;
    cfg.lossless.watchdog = watchdog;
    cfg.cp.placement = Placement::Off;
    let mut h = Harness::new(cfg);
    for k in 0..3u8 {
        h.learn(k + 1, u16::from(k));
    }
    let start = h.now;
    let (mut turns, mut n) = (0u64, 0u64);
    let mut events = Vec::new();
    let xoff = pfc_frame(mac(3), 0x01, [0xFFFF, 0, 0, 0, 0, 0, 0, 0]);
    while h.now < start + secs {
        if turns % 1000 == 0 && h.now < start + storm {
            h.rx(2, &xoff);
        }
        turns += 1;
        if h.bridge.stats().ports[0].pause_asserted == 0 {
            h.rx(0, &frame(mac(2), mac(1), None, 1000));
            n += 1;
            if n % 5 == 0 {
                h.rx(0, &frame([0xff; 6], mac(1), None, 1000));
            }
        }
        let next = h.now + Duration::from_micros(10);
        h.run_until(next);
        // Keep the storm events (the log is bounded and drops fill it).
        h.bridge.drain_events(&mut |e| {
            if matches!(e, cp_switch::Event::PauseStorm { .. }) {
                events.push(*e);
            }
        });
    }
    h.run_until(h.now + Duration::from_millis(50));
    h.bridge.drain_events(&mut |e| events.push(*e));
    (turns, delivered_to_h2(&h) as u64, h.bridge.stats(), events)
}

#[test]
fn pfc_storm_watchdog_bounds_what_a_paused_port_costs() {
    let secs = Duration::from_millis(1000);
    let storm = Duration::from_millis(600);
    // Without the watchdog: h1's buffer fills with copies for the paused p2, h1 is paused
    // and stays so for the whole storm.
    let (turns, got, st, _) = pfc_storm_run(Duration::ZERO, secs, storm);
    println!("PFC, no watchdog: h1 -> h2 {got} of {turns} turns");
    assert!(got < turns / 2, "{got}/{turns}");
    assert_eq!(st.ports[2].pause_storms, 0);
    // With the 100 ms watchdog h1 loses at most the detection time (10 000 turns of 10 us)
    // plus the 2 % the broadcast copies cannot use while the queue refills, and the storm is
    // counted, written as events and ends when the XOFFs stop.
    let (turns, got, st, events) = pfc_storm_run(Duration::from_millis(100), secs, storm);
    println!(
        "PFC, watchdog 100 ms: h1 -> h2 {got} of {turns} turns; storm drops {}, storms {}",
        st.ports[2].drop_reasons.pause_storm, st.ports[2].pause_storms
    );
    assert!(got + 10_000 + turns / 50 >= turns, "{got}/{turns}");
    assert_eq!(st.ports[2].pause_storms, 1);
    assert!(st.ports[2].drop_reasons.pause_storm > 0);
    assert_eq!(st.ports[2].storm_priorities, 0, "restored after the storm");
    assert_eq!(st.ports[0].pause_asserted, 0);
    let storm_events: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            cp_switch::Event::PauseStorm {
                port,
                priorities,
                on,
                ..
            } => Some((*port, *priorities, *on)),
            _ => None,
        })
        .collect();
    assert_eq!(
        storm_events,
        vec![(PortId(2), 0x01, true), (PortId(2), 0x01, false)]
    );
    // After the storm broadcasts reach h3 again.
    assert!(st.ports[2].tx_frames > 0);
}
