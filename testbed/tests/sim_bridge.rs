//! Simulator tests with switch nodes only: the hosts are a minimal frame injector written
//! here (raw Ethernet frames, optional Poisson gaps, 802.3x PAUSE honoured), so these tests
//! exercise the engine, the links and the real `Bridge` core without the agent.
#![allow(clippy::unwrap_used)]

use cnm_proto::phy::pcap::PcapReader;
use cnm_proto::rng::Rng;
use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Bytes, Duration, Instant, Rate};
use cp_switch::config::{LosslessMode, OutputFullPolicy, StaticEntry};
use cp_switch::{BridgeConfig, PortId};
use testbed::sim::engine::{Direction, SharedBuf};
use testbed::sim::{LinkSpec, NodeId, Sim, SimBuilder, SimNode, TraceOptions};

/// A host that sends `count` frames of `len` octets to `dst`, back to back (as fast as its
/// link takes them) or with exponential gaps of mean `gap`, and counts what it receives.
#[derive(Debug)]
struct Injector {
    mac: EthernetAddress,
    left: u64,
    sent: u64,
    gap: Option<Duration>,
    next: Instant,
    rng: Rng,
    rate: Rate,
    paused_until: Instant,
    received: u64,
    received_bytes: u64,
    pause_rx: u64,
    frame: Vec<u8>,
}

impl Injector {
    fn new(mac: u8, dst: u8, len: usize, count: u64, gap: Option<Duration>, rng: Rng) -> Self {
        let mac = EthernetAddress([2, 0, 0, 0, 0, mac]);
        let dst = EthernetAddress([2, 0, 0, 0, 0, dst]);
        let mut frame = vec![0u8; len];
        frame[0..6].copy_from_slice(&dst.0);
        frame[6..12].copy_from_slice(&mac.0);
        frame[12..14].copy_from_slice(&0x88b6u16.to_be_bytes());
        Injector {
            mac,
            left: count,
            sent: 0,
            gap,
            next: Instant::ZERO,
            rng,
            rate: Rate::from_gbps(10),
            paused_until: Instant::ZERO,
            received: 0,
            received_bytes: 0,
            pause_rx: 0,
            frame,
        }
    }
}

impl SimNode for Injector {
    fn handle_frame(&mut self, now: Instant, _port: usize, frame: &[u8]) {
        if frame.len() >= 18 && frame[12..14] == [0x88, 0x08] && frame[14..16] == [0, 1] {
            // 802.3x PAUSE: stop for quanta × 512 bit times.
            self.pause_rx += 1;
            let quanta = u64::from(u16::from_be_bytes([frame[16], frame[17]]));
            self.paused_until = now + self.rate.tx_time(Bytes::new(quanta * 64));
            return;
        }
        if frame[0..6] == self.mac.0 {
            self.received += 1;
            self.received_bytes += frame.len() as u64;
        }
    }

    fn poll(&mut self, now: Instant, tx: &mut dyn FnMut(usize, &[u8]) -> bool) {
        while self.left > 0 && self.next <= now && self.paused_until <= now {
            self.frame[14..22].copy_from_slice(&self.sent.to_be_bytes());
            if !tx(0, &self.frame) {
                return;
            }
            self.sent += 1;
            self.left -= 1;
            if let Some(g) = self.gap {
                let u = self.rng.next_f64();
                let d = -(1.0 - u).ln() * g.as_secs_f64();
                self.next = now + Duration::from_secs_f64(d);
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        (self.left > 0).then(|| self.next.max(self.paused_until))
    }
}

struct Dumbbell {
    sim: Sim<Injector>,
    senders: Vec<NodeId>,
    rx: NodeId,
    sw: NodeId,
}

/// `n` senders → sw → rx, 10 Gb/s links of 12.5 µs (RTT 50 µs), 1500-octet frames.
fn dumbbell(n: usize, cfg: BridgeConfig, count: u64, gap: Option<Duration>, seed: u64) -> Dumbbell {
    let mut b = SimBuilder::with_custom_nodes(seed);
    b.options(TraceOptions {
        trace_interval: Duration::from_micros(50),
        ..TraceOptions::default()
    });
    let mut cfg = cfg;
    cfg.fdb.static_entries.push(StaticEntry {
        mac: EthernetAddress([2, 0, 0, 0, 0, 100]),
        vid: None,
        port: "rx".into(),
    });
    let sw = b.switch("sw", cfg);
    let rx = b.node("rx", |rng, _| Injector::new(100, 0, 60, 0, None, rng));
    let mut senders = Vec::new();
    for i in 0..n {
        let h = b.node(format!("h{i}"), move |rng, _| {
            Injector::new(i as u8 + 1, 100, 1500, count, gap, rng)
        });
        b.link(
            h,
            sw,
            LinkSpec::new(Rate::from_gbps(10), Duration::from_nanos(12_500)),
        );
        senders.push(h);
    }
    b.link(
        sw,
        rx,
        LinkSpec::new(Rate::from_gbps(10), Duration::from_nanos(12_500)),
    );
    Dumbbell {
        sim: b.build().unwrap(),
        senders,
        rx,
        sw,
    }
}

fn sent(d: &Dumbbell) -> u64 {
    d.senders
        .iter()
        .map(|&h| d.sim.custom(h).unwrap().sent)
        .sum()
}

fn received(d: &Dumbbell) -> u64 {
    d.sim.custom(d.rx).unwrap().received
}

fn bridge_drops(d: &Dumbbell) -> u64 {
    d.sim
        .bridge(d.sw)
        .unwrap()
        .stats()
        .ports
        .iter()
        .map(|p| p.drops)
        .sum()
}

fn drop_tail() -> BridgeConfig {
    let mut cfg = BridgeConfig::default();
    cfg.buffers.on_output_full = OutputFullPolicy::Drop;
    cfg
}

#[test]
fn drop_tail_dumbbell_runs_at_line_rate_and_counts_drops() {
    let mut d = dumbbell(4, drop_tail(), 2_000, None, 1);
    let bottleneck = d.sim.link_id("sw-rx").unwrap();
    d.sim.run_until(Instant::ZERO + Duration::from_millis(1));
    let a = d.sim.link_stats(bottleneck, Direction::AtoB);
    d.sim.run_until(Instant::ZERO + Duration::from_millis(2));
    let b = d.sim.link_stats(bottleneck, Direction::AtoB);
    let u = b.utilization_since(&a);
    assert!(u > 0.99, "bottleneck utilisation {u}");
    assert!(d.sim.run_until_idle(Instant::ZERO + Duration::from_secs(1)));
    let (s, r, dr) = (sent(&d), received(&d), bridge_drops(&d));
    assert_eq!(s, 8_000);
    assert!(
        dr > 0,
        "4 × 10 Gb/s into 10 Gb/s must overflow a 150 KB queue"
    );
    // Conservation: every frame sent is received or counted dropped.
    assert_eq!(s, r + dr, "sent {s} received {r} dropped {dr}");
    let st = d.sim.bridge(d.sw).unwrap().stats();
    let port = st.ports.iter().find(|p| p.name == "rx").unwrap();
    assert_eq!(port.drop_reasons.output_full, dr);
    assert_eq!(d.sim.stats().spin_breaks, 0);
}

#[test]
fn lossless_dumbbell_never_drops() {
    let mut cfg = BridgeConfig::default();
    cfg.lossless.mode = LosslessMode::Pause;
    let mut d = dumbbell(4, cfg, 2_000, None, 1);
    let bottleneck = d.sim.link_id("sw-rx").unwrap();
    d.sim.run_until(Instant::ZERO + Duration::from_millis(1));
    let a = d.sim.link_stats(bottleneck, Direction::AtoB);
    d.sim.run_until(Instant::ZERO + Duration::from_millis(2));
    let b = d.sim.link_stats(bottleneck, Direction::AtoB);
    let u = b.utilization_since(&a);
    assert!(u > 0.99, "bottleneck utilisation {u}");
    assert!(d.sim.run_until_idle(Instant::ZERO + Duration::from_secs(1)));
    assert_eq!(bridge_drops(&d), 0);
    assert_eq!(received(&d), 8_000);
    let paused: u64 = d
        .senders
        .iter()
        .map(|&h| d.sim.custom(h).unwrap().pause_rx)
        .sum();
    assert!(paused > 0, "the senders must have been paused");
}

fn traced_run(seed: u64) -> Vec<u8> {
    let mut d = dumbbell(
        4,
        drop_tail(),
        1_000,
        Some(Duration::from_nanos(1_500)),
        seed,
    );
    let buf = SharedBuf::new();
    d.sim.trace_to(Box::new(buf.clone()));
    d.sim.run_until(Instant::ZERO + Duration::from_millis(3));
    d.sim.finish().unwrap();
    let mut out = buf.contents();
    out.extend_from_slice(d.sim.summary().to_string().as_bytes());
    out
}

#[test]
fn same_seed_same_trace_other_seed_differs() {
    let a = traced_run(7);
    let b = traced_run(7);
    let c = traced_run(8);
    assert!(a.len() > 1000);
    assert!(a == b, "same seed, different traces");
    assert!(a != c, "different seeds, same trace");
    let text = String::from_utf8(a).unwrap();
    let first = text.lines().next().unwrap();
    let v: serde_json::Value = serde_json::from_str(first).unwrap();
    assert!(v["node"].is_string(), "{first}");
    assert!(text.contains("\"type\":\"queues\""));
    assert!(text.contains("\"event\":\"drop\""));
}

#[test]
fn pcap_of_a_link_holds_every_frame() {
    let mut d = dumbbell(2, drop_tail(), 100, None, 3);
    let link = d.sim.link_id("sw-rx").unwrap();
    let buf = SharedBuf::new();
    d.sim.capture(link, Box::new(buf.clone())).unwrap();
    assert!(d.sim.run_until_idle(Instant::ZERO + Duration::from_secs(1)));
    d.sim.finish().unwrap();
    let bytes = buf.contents();
    let mut r = PcapReader::new(&bytes[..]).unwrap();
    let mut n = 0;
    let mut last = Instant::ZERO;
    while let Some(rec) = r.next_record().unwrap() {
        assert_eq!(rec.data.len(), 1500);
        assert!(rec.ts >= last);
        last = rec.ts;
        n += 1;
    }
    assert_eq!(n, 200);
    assert_eq!(received(&d), 200);
}

#[test]
fn rate_step_on_the_bottleneck_follows_the_bridge_shaper() {
    let mut d = dumbbell(1, drop_tail(), 100_000, None, 1);
    let link = d.sim.link_id("sw-rx").unwrap();
    d.sim.schedule(
        Instant::ZERO + Duration::from_millis(1),
        testbed::sim::engine::Action::SetRate {
            link,
            dir: Direction::AtoB,
            rate: Rate::from_gbps(1),
        },
    );
    d.sim.run_until(Instant::ZERO + Duration::from_millis(2));
    let a = d.sim.link_stats(link, Direction::AtoB);
    d.sim.run_until(Instant::ZERO + Duration::from_millis(3));
    let b = d.sim.link_stats(link, Direction::AtoB);
    let bits = (b.wire_bytes - a.wire_bytes) * 8;
    assert!(
        (950_000..=1_010_000).contains(&bits),
        "1 ms at 1 Gb/s carried {bits} bits"
    );
    assert!(b.utilization_since(&a) > 0.95);
    let port = d.sim.bridge(d.sw).unwrap().port_id("rx").unwrap();
    assert_eq!(port, PortId(1));
    assert_eq!(
        d.sim.bridge(d.sw).unwrap().stats().ports[1].rate,
        Some(Rate::from_gbps(1))
    );
}

/// Issue 15 in the simulator: a host link and the switch's output link set to 1 bit/s and,
/// 1 ms later, back to 10 Gb/s. The frames that started at 1 bit/s finish at 10 Gb/s, so the
/// flow resumes at once instead of waiting 12 000 s behind them.
#[test]
fn one_bit_then_back_does_not_wedge_the_links() {
    let mut d = dumbbell(1, drop_tail(), 100_000, None, 1);
    let up = d.sim.link_id("h0-sw").unwrap();
    let down = d.sim.link_id("sw-rx").unwrap();
    let ms = |n: u64| Instant::ZERO + Duration::from_millis(n);
    for (at, rate) in [(1, Rate::from_bps(1)), (2, Rate::from_gbps(10))] {
        for link in [up, down] {
            d.sim.schedule(
                ms(at),
                testbed::sim::engine::Action::SetRate {
                    link,
                    dir: Direction::AtoB,
                    rate,
                },
            );
        }
    }
    d.sim.run_until(ms(2));
    let at2 = received(&d);
    d.sim.run_until(ms(3));
    let at3 = received(&d);
    // 1 ms at 10 Gb/s carries 820 frames of 1524 wire octets.
    assert!(
        at3 - at2 > 700,
        "{} frames in the millisecond after",
        at3 - at2
    );
    assert_eq!(bridge_drops(&d), 0);
}
