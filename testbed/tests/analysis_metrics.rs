#![allow(clippy::unwrap_used)]
//! Metrics: Jain, max-min shares (parking lots, asymmetric, weighted, demand caps),
//! convergence detection, queue statistics.

use cnm_proto::Rate;
use testbed::analysis::maxmin::{max_min, MmFlow};
use testbed::analysis::metrics::{
    self, convergence_time, fair_share_epochs, jain, queue_stats, ConvergenceOptions,
};
use testbed::analysis::{FlowSeries, LinkSpec, QueueSeries, RunData, RunMeta};

const G: f64 = 1e9;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

fn assert_rates(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(close(*g, *w), "got {got:?}, want {want:?}");
    }
}

fn greedy(links: &[usize]) -> MmFlow {
    MmFlow {
        links: links.to_vec(),
        weight: 1.0,
        demand: None,
    }
}

#[test]
fn jain_known_vectors() {
    assert!(close(jain(&[1.0, 1.0, 1.0, 1.0]).unwrap(), 1.0));
    assert!(close(jain(&[1.0, 0.0, 0.0, 0.0]).unwrap(), 0.25));
    // (1+2+3+4)² / (4·30) = 100/120.
    assert!(close(jain(&[1.0, 2.0, 3.0, 4.0]).unwrap(), 100.0 / 120.0));
    // Scale invariant.
    assert!(close(jain(&[2.0, 4.0, 6.0, 8.0]).unwrap(), 100.0 / 120.0));
    // 5, 5, 0.5, 0.5: 11² / (4·50.5).
    assert!(close(jain(&[5.0, 5.0, 0.5, 0.5]).unwrap(), 121.0 / 202.0));
    // Normalized by max-min shares, the same allocation is perfectly fair.
    assert!(close(
        jain(&[5.0 / 5.0, 5.0 / 5.0, 0.5 / 0.5, 0.5 / 0.5]).unwrap(),
        1.0
    ));
    assert_eq!(jain(&[]), None);
}

/// Classic parking lot: a chain of 5 links, one long flow over all of them and one one-hop flow
/// per link (6 flows). Every link carries exactly 2 flows, so every flow gets C/2 — not C/5.
#[test]
fn parking_lot_long_flow_plus_one_hop_flows() {
    let caps = [10.0 * G; 5];
    let mut flows = vec![greedy(&[0, 1, 2, 3, 4])];
    flows.extend((0..5).map(|l| greedy(&[l])));
    assert_rates(&max_min(&caps, &flows).unwrap(), &[5.0 * G; 6]);
}

/// Parking lot where the sources join along the chain and all go to the far end (S1, S2 enter at
/// the first switch, S3..S6 at the next ones): the last link carries all 6 flows, each gets C/6.
#[test]
fn parking_lot_all_to_one_sink() {
    let caps = [10.0 * G; 5];
    let flows: Vec<MmFlow> = (0..6)
        .map(|i: usize| greedy(&(i.saturating_sub(1)..5).collect::<Vec<_>>()))
        .collect();
    assert_rates(&max_min(&caps, &flows).unwrap(), &[10.0 * G / 6.0; 6]);
}

/// "Every source 1/5 of a link" needs every link to carry 5 of the 6 flows: the long flow over
/// all 5 links plus flow i crossing every link but link i. Max-min then gives C/5 to all.
#[test]
fn parking_lot_every_source_one_fifth() {
    let caps = [10.0 * G; 5];
    let mut flows = vec![greedy(&[0, 1, 2, 3, 4])];
    flows.extend((0..5).map(|i| greedy(&(0..5).filter(|&l| l != i).collect::<Vec<_>>())));
    assert_rates(&max_min(&caps, &flows).unwrap(), &[2.0 * G; 6]);
}

/// Chain with unequal loads: the long flow is held by the busiest link and the others share
/// what it leaves (progressive filling freezes in two rounds).
#[test]
fn parking_lot_uneven() {
    // Link 0 carries long + 3 short flows, link 1 long + 1 short.
    let caps = [10.0 * G, 10.0 * G];
    let flows = vec![
        greedy(&[0, 1]),
        greedy(&[0]),
        greedy(&[0]),
        greedy(&[0]),
        greedy(&[1]),
    ];
    assert_rates(
        &max_min(&caps, &flows).unwrap(),
        &[2.5 * G, 2.5 * G, 2.5 * G, 2.5 * G, 7.5 * G],
    );
}

/// QCN-REFERENCE §5 ECN row, asymmetric: one 1 Gb/s link, 10 Gb/s elsewhere. Two sources
/// behind a 10 Gb/s bottleneck get 5 Gb/s each, two behind the 1 Gb/s link 0.5 Gb/s each.
#[test]
fn asymmetric_one_slow_link() {
    let caps = [10.0 * G, 1.0 * G, 10.0 * G, 10.0 * G, 10.0 * G, 10.0 * G];
    // Links 2..5 are the sources' 10 Gb/s access links.
    let flows = vec![
        greedy(&[2, 0]),
        greedy(&[3, 0]),
        greedy(&[4, 1]),
        greedy(&[5, 1]),
    ];
    assert_rates(
        &max_min(&caps, &flows).unwrap(),
        &[5.0 * G, 5.0 * G, 0.5 * G, 0.5 * G],
    );
    // If all four also shared one 10 Gb/s link, the fast pair would get (10 − 1)/2 = 4.5 Gb/s.
    let caps = [10.0 * G, 1.0 * G, 10.0 * G];
    let flows = vec![
        greedy(&[0, 2]),
        greedy(&[0, 2]),
        greedy(&[1, 2]),
        greedy(&[1, 2]),
    ];
    assert_rates(
        &max_min(&caps, &flows).unwrap(),
        &[4.5 * G, 4.5 * G, 0.5 * G, 0.5 * G],
    );
}

/// QCN-REFERENCE §5 FQCN on/off row: 3 static flows plus on/off flows of 1 and 5 Gb/s average on
/// 10 Gb/s: the 1 Gb/s flow gets its demand, the others (the 5 Gb/s one included) (10 − 1)/4.
#[test]
fn demand_caps_on_off_row() {
    let caps = [10.0 * G];
    let mut flows = vec![greedy(&[0]), greedy(&[0]), greedy(&[0])];
    flows.push(MmFlow {
        links: vec![0],
        weight: 1.0,
        demand: Some(1.0 * G),
    });
    flows.push(MmFlow {
        links: vec![0],
        weight: 1.0,
        demand: Some(5.0 * G),
    });
    assert_rates(
        &max_min(&caps, &flows).unwrap(),
        &[2.25 * G, 2.25 * G, 2.25 * G, 1.0 * G, 2.25 * G],
    );
}

/// Weighted 4:3:2:1 on 10 Gb/s, then flow 1 capped to 1 Gb/s at 3 s: the leftover is re-shared
/// 3:2:1 (QCN-REFERENCE §5 FQCN weights row), computed per epoch from the run model.
#[test]
fn weighted_with_cap_step() {
    let mut run = RunData::new(RunMeta::new("weights", "sim", 6.0, 1));
    run.add_link(LinkSpec::new("bn", Rate::from_gbps(10)));
    for (i, w) in [4.0, 3.0, 2.0, 1.0].into_iter().enumerate() {
        let mut f = FlowSeries::new(&format!("f{}", i + 1), &["bn"]).weight(w);
        if i == 0 {
            f = f.demand_step(3.0, Some(Rate::from_gbps(1)));
        }
        run.add_flow(f);
    }
    let epochs = fair_share_epochs(&run).unwrap();
    assert_eq!(epochs.len(), 2);
    let shares = |k: usize| {
        epochs[k]
            .shares
            .iter()
            .map(|s| s.unwrap())
            .collect::<Vec<_>>()
    };
    assert_rates(&shares(0), &[4.0 * G, 3.0 * G, 2.0 * G, 1.0 * G]);
    assert_rates(&shares(1), &[1.0 * G, 4.5 * G, 3.0 * G, 1.5 * G]);
    assert!(close(
        metrics::mean_share(&epochs, 1, 2.0, 4.0).unwrap(),
        3.75 * G
    ));
}

/// Flows started 1 s apart: the epochs follow the starts.
#[test]
fn staggered_starts() {
    let mut run = RunData::new(RunMeta::new("lot", "sim", 3.0, 1));
    run.add_link(LinkSpec::new("bn", Rate::from_gbps(10)).step(2.5, Rate::from_gbps(1)));
    for i in 0..3 {
        run.add_flow(FlowSeries::new(&format!("f{i}"), &["bn"]).active(i as f64, None));
    }
    let e = fair_share_epochs(&run).unwrap();
    let at = |i, t| metrics::share_at(&e, i, t);
    assert_eq!(at(0, 0.5), Some(10.0 * G));
    assert_eq!(at(1, 0.5), None);
    assert!(close(at(0, 1.5).unwrap(), 5.0 * G));
    assert!(close(at(2, 2.2).unwrap(), 10.0 * G / 3.0));
    assert!(close(at(2, 2.7).unwrap(), 1.0 * G / 3.0));
}

fn converging_run(tau: f64) -> RunData {
    let mut run = RunData::new(RunMeta::new("dumbbell", "sim", 4.0, 1));
    run.add_link(LinkSpec::new("bn", Rate::from_gbps(10)).step(2.0, Rate::from_gbps(1)));
    run.mark(2.0, "bottleneck 10→1 Gb/s");
    for name in ["f1", "f2"] {
        let mut f = FlowSeries::new(name, &["bn"]);
        for k in 1..=400 {
            let t = k as f64 * 0.01;
            let v = if t <= 2.0 {
                5.0 * G
            } else {
                0.5 * G + 4.5 * G * (-(t - 2.0) / tau).exp()
            };
            f.push_bps(t, v);
        }
        run.add_flow(f);
    }
    run
}

#[test]
fn convergence_detected() {
    let run = converging_run(0.1);
    let e = fair_share_epochs(&run).unwrap();
    // 4.5·exp(−x/0.1) ≤ 0.05 from x = 0.1·ln 90 ≈ 0.450 s; the last bad 10 ms sample ends at 2.44 s.
    let c = convergence_time(&run, &e, 2.0, 4.0, ConvergenceOptions::default()).unwrap();
    assert!((0.43..=0.46).contains(&c), "{c}");
    // Before the step everyone is at the share from the first sample.
    assert_eq!(
        convergence_time(&run, &e, 0.0, 2.0, ConvergenceOptions::default()),
        Some(0.0)
    );
    // Too slow to settle before the end of the run.
    let slow = converging_run(1.0);
    let e = fair_share_epochs(&slow).unwrap();
    assert_eq!(
        convergence_time(&slow, &e, 2.0, 4.0, ConvergenceOptions::default()),
        None
    );
}

#[test]
fn convergence_not_reached_when_oscillating() {
    let mut run = RunData::new(RunMeta::new("osc", "sim", 2.0, 1));
    run.add_link(LinkSpec::new("bn", Rate::from_gbps(10)));
    run.mark(0.0, "start");
    for (name, phase) in [("f1", 0), ("f2", 1)] {
        let mut f = FlowSeries::new(name, &["bn"]);
        for k in 1..=200 {
            f.push_bps(
                k as f64 * 0.01,
                if (k + phase) % 2 == 0 {
                    7.0 * G
                } else {
                    3.0 * G
                },
            );
        }
        run.add_flow(f);
    }
    let e = fair_share_epochs(&run).unwrap();
    assert_eq!(
        convergence_time(&run, &e, 0.0, 2.0, ConvergenceOptions::default()),
        None
    );
    // Means are still fair.
    let a = testbed::analysis::analyze(&run, &Default::default());
    assert!(close(a.summary.jain.unwrap(), 1.0));
    assert_eq!(a.summary.convergence_s, vec![None]);
}

#[test]
fn queue_stats_time_weighted() {
    let mut q = QueueSeries::new(Some("sw0"), "eth1", 0, "output");
    q.push(1.0, 100);
    q.push(2.0, 300);
    // [0,1): 0 (before the first sample), [1,2): 100, [2,4): 300.
    let s = queue_stats(&q, 0.0, 4.0, Some(150));
    assert!(close(s.mean, 175.0));
    assert!(close(s.std, 16875f64.sqrt()));
    assert!(close(s.p99, 300.0));
    assert_eq!(s.max, 300);
    assert!(close(s.time_above_s, 2.0));
    assert!(close(s.frac_above, 0.5));
    // Window inside a held value.
    let s = queue_stats(&q, 1.25, 1.75, None);
    assert!(close(s.mean, 100.0) && close(s.std, 0.0) && close(s.p99, 100.0));
    // A rare spike does not reach p99 when it lasts under 1 % of the time.
    let mut q = QueueSeries::new(None, "p", 0, "output");
    q.push(0.0, 10);
    q.push(0.995, 10_000);
    let s = queue_stats(&q, 0.0, 1.0, None);
    assert!(close(s.p99, 10.0), "{s:?}");
    assert_eq!(s.max, 10_000);
    // Irregular sampling: the long-held value dominates the mean.
    let mut q = QueueSeries::new(None, "p", 0, "output");
    for k in 0..100 {
        q.push(k as f64 * 0.001, 1000);
    }
    q.push(0.1, 0);
    let s = queue_stats(&q, 0.0, 1.0, None);
    assert!(close(s.mean, 100.0), "{s:?}");
}

#[test]
fn interval_builders() {
    let mut f = FlowSeries::new("f", &[]);
    f.push_interval(1.0, 2.0, cnm_proto::Bytes::new(125_000_000));
    f.push_interval(3.0, 4.0, cnm_proto::Bytes::new(250_000_000));
    // 1 Gb/s over [1,2), a zero gap over [2,3), 2 Gb/s over [3,4).
    assert!(close(metrics::mean_rate(&f, 1.0, 4.0).unwrap(), 1.0 * G));
    let mut g = FlowSeries::new("g", &[]);
    let mut prev = None;
    for (t, b) in [(0.5, 0u64), (1.5, 125_000_000), (2.5, 375_000_000)] {
        g.push_cumulative(t, cnm_proto::Bytes::new(b), &mut prev);
    }
    assert!(close(metrics::mean_rate(&g, 0.5, 2.5).unwrap(), 1.5 * G));
    assert!(close(metrics::mean_rate(&g, 2.0, 2.5).unwrap(), 2.0 * G));
}

#[test]
fn convergence_with_smoothing_ignores_sample_noise() {
    // Alternating ±15 % around the share: raw samples never settle, a 40 ms mean does.
    let mut run = RunData::new(RunMeta::new("noisy", "netns", 2.0, 1));
    run.add_link(LinkSpec::new("bn", Rate::from_mbps(100)));
    run.mark(0.0, "start");
    for name in ["f1", "f2"] {
        let mut f = FlowSeries::new(name, &["bn"]);
        for k in 1..=200 {
            let t = k as f64 * 0.01;
            let base = if t <= 0.5 { 90e6 } else { 50e6 };
            f.push_bps(t, base * if k % 2 == 0 { 1.15 } else { 0.85 });
        }
        run.add_flow(f);
    }
    let e = fair_share_epochs(&run).unwrap();
    assert_eq!(
        convergence_time(&run, &e, 0.0, 2.0, ConvergenceOptions::default()),
        None
    );
    let opts = ConvergenceOptions {
        smooth_s: 0.04,
        ..Default::default()
    };
    let c = convergence_time(&run, &e, 0.0, 2.0, opts).unwrap();
    // Samples ending at up to 0.5 s read 90 Mb/s (80 % above the 50 Mb/s share), and the 40 ms
    // mean still includes them until 0.54 s.
    assert!((0.5..=0.55).contains(&c), "{c}");
}
