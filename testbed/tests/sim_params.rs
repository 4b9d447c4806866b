//! Parameter-change events in the simulator: the QCN set point of the bottleneck switch drops
//! from 33 KB to 15 KB half way through a dumbbell run, and the queue follows it; a reaction-
//! point event reaches the hosts' agents. Bad events are refused at load with file, line and
//! field.
#![allow(clippy::unwrap_used)]

use cnm_proto::{Duration, Instant, Rate};
use testbed::sim::topo::Topology;

mod common;

/// Four greedy 10 Gb/s senders into one 10 Gb/s port (the FQCN paper's dumbbell, standard
/// QCN, Qeq 33 KB), `events` appended.
fn dumbbell(events: &str) -> String {
    common::sim::greedy_dumbbell(4, "400ms", 4, "") + events
}

/// Mean occupancy of the bottleneck's priority-3 output queue over [from, to), sampled every
/// 20 µs, in octets.
fn mean_queue(
    sim: &mut testbed::sim::engine::Sim,
    sw: testbed::sim::engine::NodeId,
    from: Duration,
    to: Duration,
) -> f64 {
    let port = sim.bridge(sw).unwrap().port_id("r0").unwrap();
    let (mut t, end) = (Instant::ZERO + from, Instant::ZERO + to);
    let (mut sum, mut n) = (0.0, 0u64);
    while t < end {
        sim.run_until(t);
        sum += sim.bridge(sw).unwrap().output_queue_bytes(port, 3) as f64;
        n += 1;
        t += Duration::from_micros(20);
    }
    sum / n as f64
}

#[test]
fn a_lower_set_point_at_half_time_lowers_the_queue() {
    let event = r#"
        [[event]]
        at = "200ms"
        switch = "sw0"
        set = { cp_queue_set_point = "15KB" }
    "#;
    let t = Topology::parse(&dumbbell(event), "dumbbell.toml").unwrap();
    let (mut sim, built) = t.build().unwrap();
    let sw = built.switches[0].1;
    let first = mean_queue(
        &mut sim,
        sw,
        Duration::from_millis(100),
        Duration::from_millis(200),
    );
    assert_eq!(
        sim.bridge(sw).unwrap().cp_config().cp_queue_set_point.get(),
        33_000
    );
    let second = mean_queue(
        &mut sim,
        sw,
        Duration::from_millis(300),
        Duration::from_millis(400),
    );
    assert_eq!(
        sim.bridge(sw).unwrap().cp_config().cp_queue_set_point.get(),
        15_000
    );
    println!("mean queue: {first:.0} B with Qeq 33 KB, {second:.0} B with Qeq 15 KB");
    assert!(first > 20_000.0, "{first}");
    assert!(second < 0.7 * first, "{first} -> {second}");
    assert!(second > 5_000.0, "the link stays busy: {second}");
}

#[test]
fn a_reaction_point_event_reaches_the_host_agents() {
    let event = r#"
        [[event]]
        at = "50ms"
        host = "h1"
        set = { rp_mode = "adaptive-bc", rpg_ai_rate = "10mbit" }
    "#;
    let mut text = dumbbell(event);
    text = text.replace("duration = \"400ms\"", "duration = \"60ms\"");
    let t = Topology::parse(&text, "dumbbell.toml").unwrap();
    let (mut sim, built) = t.build().unwrap();
    let host = |name: &str| built.hosts.iter().find(|h| h.0 == name).unwrap().1;
    sim.run_until(Instant::ZERO + Duration::from_millis(60));
    let h1 = sim.host(host("h1")).unwrap().agent().config();
    assert_eq!(h1.rp_mode, rp_agent::RpMode::AdaptiveBc);
    assert_eq!(h1.rp.rpg_ai_rate, Rate::from_mbps(10));
    let h0 = sim.host(host("h0")).unwrap().agent().config();
    assert_eq!(h0.rp_mode, rp_agent::RpMode::Qcn);
}

#[test]
fn scenario_errors_carry_the_line_of_the_bad_key() {
    let event = "\n[[event]]\nat = \"1ms\"\nswitch = \"sw0\"\nset = { cp_feedback_weight = 3 }\n";
    let text = dumbbell(event);
    let e = testbed::scenario::parse(&text, "bad.toml", "bad", &[]).unwrap_err();
    let want = text
        .lines()
        .position(|l| l.contains("cp_feedback_weight = 3"))
        .unwrap()
        + 1;
    assert_eq!(e.field, "event[0].set.cp_feedback_weight", "{e}");
    assert_eq!(e.line, Some(want), "{e}");
    assert!(e.to_string().contains("bad.toml"), "{e}");
}
