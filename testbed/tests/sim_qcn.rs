//! Closed-loop QCN in the simulator: the real `Bridge` (with its congestion point) and the real
//! `Agent` (with its reaction point) at the papers' parameters (QCN-REFERENCE §2, §3, §5):
//! 10 Gb/s, RTT 50 µs, 150 KB output buffer, Qeq 33 KB, w 2, Gd 1/128, BC_LIMIT 150 KB,
//! T 15 ms, R_AI 5 Mb/s, R_HAI 50 Mb/s, 1500-octet frames.
#![allow(clippy::unwrap_used)]

use cnm_proto::{Duration, Instant, Rate};
use testbed::sim::engine::{Action, Direction, SharedBuf};
use testbed::sim::topo::{Built, Topology};
use testbed::sim::{LinkId, NodeId, Sim};

const QEQ: f64 = 33_000.0;

/// `n` greedy senders → sw0 → r0, the papers' dumbbell.
fn dumbbell_toml(n: usize, seed: u64) -> String {
    let mut s = format!(
        r#"
seed = {seed}
duration = "1s"
[output]
warmup = "50ms"
bottleneck = "sw0-r0"
[switch.sw0.bridge]
buffers = {{ input = "150KB", output = "150KB", on_output_full = "drop" }}
cp = {{ placement = "output", cnpv = [3], cp_queue_set_point = "33KB", cp_feedback_weight = 2, cp_min_sample_base = "150KB" }}
[host.r0]
[[link]]
a = "sw0"
b = "r0"
rate = "10gbit"
delay = "12.5us"
"#
    );
    for i in 0..n {
        s += &format!(
            r#"
[host.h{i}.agent]
rp = {{ rpg_byte_reset = "150KB", rpg_time_reset = "15ms", rpg_ai_rate = "5mbit", rpg_hai_rate = "50mbit", rpg_gd = 7 }}
[[link]]
a = "h{i}"
b = "sw0"
rate = "10gbit"
delay = "12.5us"
[[flow]]
src = "h{i}"
dst = "r0"
pattern = "greedy"
frame_len = 1500
"#
        );
    }
    s
}

struct Run {
    sim: Sim,
    built: Built,
    sw: NodeId,
    bottleneck: LinkId,
}

fn build(text: &str) -> Run {
    let topo = Topology::parse(text, "test.toml").unwrap();
    let (sim, built) = topo.build().unwrap();
    let sw = sim.node_id("sw0").unwrap();
    let bottleneck = built.bottleneck.unwrap();
    Run {
        sim,
        built,
        sw,
        bottleneck,
    }
}

fn drops(r: &Run) -> u64 {
    let st = r.sim.bridge(r.sw).unwrap().stats();
    st.ports.iter().map(|p| p.drops).sum()
}

fn at(ms: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(ms)
}

/// Runs to 50 ms, then checks 50..150 ms: no drops, utilisation, queue mean near Qeq.
fn steady_state(n: usize) {
    let mut r = build(&dumbbell_toml(n, 1));
    r.sim.run_until(at(50));
    let d0 = drops(&r);
    let u0 = r.sim.link_stats(r.bottleneck, Direction::AtoB);
    r.sim.run_until(at(150));
    let d1 = drops(&r);
    let u1 = r.sim.link_stats(r.bottleneck, Direction::AtoB);
    let util = u1.utilization_since(&u0);
    let port = r.sim.bridge(r.sw).unwrap().port_id("r0").unwrap();
    let (q, _) = r.sim.queue_summary(r.sw, port).unwrap();
    let cnms: u64 = r
        .built
        .hosts
        .iter()
        .filter_map(|(_, id)| r.sim.host(*id))
        .map(|h| h.agent().stats().cnm_rx)
        .sum();
    println!(
        "{n} flows: start-up drops {d0}, drops 50-150 ms {}, utilisation {util:.4}, queue mean \
         {:.0} std {:.0} p99 {}, CNMs received {cnms}",
        d1 - d0,
        q.mean,
        q.std,
        q.p99
    );
    assert_eq!(d1, d0, "drops after 50 ms");
    assert!(util >= 0.95, "bottleneck utilisation {util}");
    assert!(
        (q.mean - QEQ).abs() <= 0.3 * QEQ,
        "queue mean {} not within 30 % of Qeq",
        q.mean
    );
    assert!(cnms > 0);
}

#[test]
fn two_greedy_flows_hold_the_queue_at_qeq() {
    steady_state(2);
}

#[test]
fn four_greedy_flows_hold_the_queue_at_qeq() {
    steady_state(4);
}

/// Utilisation of the bottleneck per 1 ms window over `[from, to)`.
fn utilisation_series(r: &mut Run, from: u64, to: u64) -> Vec<f64> {
    let mut out = Vec::new();
    r.sim.run_until(at(from));
    let mut prev = r.sim.link_stats(r.bottleneck, Direction::AtoB);
    for ms in from + 1..=to {
        r.sim.run_until(at(ms));
        let now = r.sim.link_stats(r.bottleneck, Direction::AtoB);
        out.push(now.utilization_since(&prev));
        prev = now;
    }
    out
}

struct Step {
    /// Drops from just before the step down to the step back.
    drops_low: u64,
    /// Drops from the step back to the end.
    drops_after: u64,
    /// Mean utilisation of the last 10 ms at 1 Gb/s.
    util_low: f64,
    /// First 1 ms window after the step back from which utilisation stays ≥ 95 % to the end.
    recovered_ms: Option<usize>,
}

/// 4 greedy flows; the bottleneck steps 10→1 Gb/s at 20 ms and back at 60 ms; observed until
/// `60 + tail` ms.
fn capacity_step(text: &str, tail: u64) -> Step {
    let mut r = build(text);
    let link = r.bottleneck;
    for (ms, g) in [(20, 1), (60, 10)] {
        r.sim.schedule(
            at(ms),
            Action::SetRate {
                link,
                dir: Direction::AtoB,
                rate: Rate::from_gbps(g),
            },
        );
    }
    r.sim.run_until(at(19));
    let d0 = drops(&r);
    let low = utilisation_series(&mut r, 19, 60);
    let d1 = drops(&r);
    let after = utilisation_series(&mut r, 60, 60 + tail);
    let d2 = drops(&r);
    let step = Step {
        drops_low: d1 - d0,
        drops_after: d2 - d1,
        util_low: low[low.len() - 10..].iter().sum::<f64>() / 10.0,
        recovered_ms: (0..after.len()).find(|&i| after[i..].iter().all(|&u| u >= 0.95)),
    };
    println!(
        "step 10→1→10 Gb/s: drops while at 1 Gb/s {}, after the step back {}; utilisation at \
         1 Gb/s {:.3}; recovered {:?} ms after the step back",
        step.drops_low, step.drops_after, step.util_low, step.recovered_ms
    );
    step
}

/// Drop-tail output queues (the papers' switch). Measured with the production cores: the
/// 150 KB queue overflows for a few hundred frames right after the 10→1 Gb/s step (one CNM
/// at most halves a rate, `rpg_min_dec_fac` 50 %, and the queue fills in 2.6 RTTs), and the
/// standard RP needs longer than 50 ms to climb back from 250 Mb/s per flow: hyper-active
/// increase starts only once BOTH the byte counter and the timer have passed `rpg_threshold`
/// (QCN-REFERENCE §3), and the timer fires every 15 ms, so HAI cannot begin before 5 × 15 ms
/// = 75 ms after the last CNM; until then R_AI adds 5 Mb/s per cycle. The issue's 50 ms is
/// therefore out of reach for standard QCN with the reference parameters; the traces show HAI
/// starting about 85 ms after the step back and full utilisation about 100 ms after it.
/// Asserted: the step back is absorbed without drops, the 1 Gb/s period is fully used, and
/// utilisation recovers within 200 ms.
#[test]
fn capacity_step_drop_tail() {
    let s = capacity_step(&dumbbell_toml(4, 1), 200);
    assert_eq!(s.drops_after, 0, "drops after the step back");
    assert!(s.util_low >= 0.95, "utilisation at 1 Gb/s {}", s.util_low);
    assert!(s.recovered_ms.is_some(), "no recovery within 200 ms");
}

/// The same step with PFC on priority 3 (802.1Qbb) under QCN, the 802.1Qau deployment: the
/// step is absorbed without a single drop. (Utilisation is not asserted: with the CP on the
/// output queue of a CIOQ switch with backpressure, the output queue sits full behind the
/// input buffers, every sample sees Fb at its floor, and the rates are cut too far — measured
/// utilisation at 1 Gb/s about 0.6. The input-buffer CP of QCN-REFERENCE §4 addresses this.)
#[test]
fn capacity_step_lossless_pfc() {
    let text = dumbbell_toml(4, 1).replace(
        "on_output_full = \"drop\" }",
        "on_output_full = \"backpressure\" }\nlossless = { mode = \"pfc\" }",
    );
    let s = capacity_step(&text, 200);
    assert_eq!(s.drops_low + s.drops_after, 0, "drops with PFC");
}

fn trace_of(seed: u64) -> Vec<u8> {
    let mut r = build(&dumbbell_toml(4, seed));
    let buf = SharedBuf::new();
    r.sim.trace_to(Box::new(buf.clone()));
    r.sim.run_until(at(10));
    r.sim.finish().unwrap();
    let mut out = buf.contents();
    out.extend_from_slice(r.sim.summary().to_string().as_bytes());
    out
}

#[test]
fn closed_loop_is_deterministic_per_seed() {
    let a = trace_of(11);
    let b = trace_of(11);
    let c = trace_of(12);
    assert!(a == b, "same seed, different traces");
    assert!(a != c, "different seeds, same trace");
    let text = String::from_utf8(a).unwrap();
    // Switch CNM events and agent rate events, both with their node.
    assert!(text.contains("\"event\":\"cnm\""));
    assert!(text.contains("\"node\":\"h0\""));
}

#[test]
fn every_generated_frame_is_received_or_dropped() {
    let mut text = dumbbell_toml(2, 5);
    text = text.replace(
        "pattern = \"greedy\"",
        "pattern = \"greedy\"\nstop = \"5ms\"",
    );
    let mut r = build(&text);
    // Sources stop at 5 ms; by 100 ms every queue has drained (the agents' RP timers keep
    // running, so the network never becomes "idle" in the engine's sense).
    r.sim.run_until(at(100));
    assert_eq!(r.sim.frames_in_flight(), 0);
    let mut generated = 0;
    let mut queued_at_agents = 0;
    for (name, id) in &r.built.hosts {
        let h = r.sim.host(*id).unwrap();
        if name.starts_with('h') {
            generated += h.agent().stats().host_rx_frames;
            queued_at_agents += h
                .agent()
                .flows()
                .iter()
                .map(|f| f.queued_frames)
                .sum::<u64>();
        }
    }
    let r0 = r.sim.node_id("r0").unwrap();
    let received: u64 = r
        .sim
        .host(r0)
        .unwrap()
        .sink()
        .flows()
        .map(|(_, c)| c.frames)
        .sum();
    assert_eq!(queued_at_agents, 0);
    assert_eq!(generated, received + drops(&r));
}

#[test]
fn trace_is_read_by_the_analysis_reader() {
    let text = String::from_utf8(trace_of(3)).unwrap();
    // `trace_of` appends the summary as a last line without a newline; keep the trace only.
    let trace: String = text
        .lines()
        .filter(|l| l.contains("\"type\":"))
        .map(|l| format!("{l}\n"))
        .collect();
    let data = testbed::analysis::trace::read_trace(
        trace.as_bytes(),
        "sim",
        &testbed::analysis::trace::TraceOptions::default(),
    );
    assert_eq!(data.stats.bad_lines, 0, "{:?}", data.stats.first_bad);
    assert!(!data.queues.is_empty());
    assert!(!data.events.is_empty());
}
