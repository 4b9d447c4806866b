//! `testbed run --mode sim` on the default dumbbell (standard QCN, the FQCN paper's numbers),
//! shortened to 200 ms before the capacity step: the claims standard QCN makes there.
#![allow(clippy::unwrap_used)]

use testbed::run::{run_scenario, Mode, RunOptions};
use testbed::scenario;

#[test]
fn sim_dumbbell_summary_is_sane() {
    let sc = scenario::load(
        "dumbbell",
        &[
            "duration=200ms".to_string(),
            "scenario.window=[\"100ms\", \"200ms\"]".to_string(),
        ],
    )
    .unwrap();
    let dir = std::env::temp_dir().join(format!("run-sim-{}", std::process::id()));
    let mut opts = RunOptions::new(Mode::Sim);
    opts.out = Some(dir.clone());
    opts.quiet = true;
    opts.no_plots = true;
    opts.capture = true;
    let out = run_scenario(&sc, &opts).unwrap();
    let s = &out.report.summary;
    assert_eq!(s.scenario, "dumbbell");
    assert_eq!(s.mode, "sim");
    assert_eq!(s.flows.len(), 4);
    let b = &s.bottlenecks[0];
    // Standard QCN keeps the 10 Gb/s port busy...
    assert!(b.utilization.unwrap() >= 0.95, "{b:?}");
    // ...with the queue near Qeq = 33 KB (well under the 150 KB buffer).
    let q = b.queue_mean_bytes.unwrap();
    assert!((15_000.0..=50_000.0).contains(&q), "queue mean {q}");
    // Every flow got CNMs and a non-trivial rate; the sum is the link rate.
    let total: f64 = s.flows.iter().map(|f| f.mean_bps.unwrap()).sum();
    assert!((9.0e9..=10.1e9).contains(&total), "{total}");
    for f in &s.flows {
        assert!(f.cnm_rx > 0, "{f:?}");
        assert!(f.mean_bps.unwrap() > 1e8, "{f:?}");
    }
    // Drops only in the first round trips, before the first CNMs bite: none in the window.
    let trace = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
    let late_drops = trace
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "drop")
        .filter(|v| v["at"].as_u64().unwrap_or(0) > 100_000_000)
        .count();
    assert_eq!(late_drops, 0);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    for k in [
        "scenario",
        "mode",
        "duration_s",
        "seed",
        "flows",
        "bottlenecks",
        "jain",
        "convergence_s",
        "faithful",
        "warnings",
    ] {
        assert!(json.get(k).is_some(), "summary.json lacks {k}");
    }
    assert!(dir.join("bottleneck.pcap").metadata().unwrap().len() > 24);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sim_compare_qcn_fqcn_off() {
    let sc = scenario::load(
        "dumbbell",
        &[
            "duration=100ms".to_string(),
            "scenario.window=[\"50ms\", \"100ms\"]".to_string(),
        ],
    )
    .unwrap();
    let dir = std::env::temp_dir().join(format!("run-compare-{}", std::process::id()));
    let mut opts = RunOptions::new(Mode::Sim);
    opts.quiet = true;
    opts.no_plots = true;
    let variants: Vec<String> = ["qcn", "fqcn", "off"].map(String::from).to_vec();
    let (outs, rep) = testbed::run::compare(&sc, &variants, &opts, &dir).unwrap();
    assert_eq!(outs.len(), 3);
    assert!(dir.join("compare.md").exists());
    for v in &variants {
        assert!(dir.join(v).join("summary.json").exists(), "{v}");
    }
    let s = |i: usize| &outs[i].report.summary;
    // FQCN: equal shares of the 10 Gb/s port.
    assert!(s(1).jain.unwrap() >= 0.98, "fqcn Jain {:?}", s(1).jain);
    // No congestion points: the drop-tail queue sits at the 150 KB buffer, no CNMs.
    let q_off = s(2).bottlenecks[0].queue_mean_bytes.unwrap();
    assert!(q_off > 120_000.0, "{q_off}");
    assert!(s(2).flows.iter().all(|f| f.cnm_rx == 0));
    assert!(rep.table.contains("fqcn"));
    let _ = std::fs::remove_dir_all(&dir);
}
