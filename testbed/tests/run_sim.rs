//! `testbed run --mode sim` on the default dumbbell (standard QCN, the FQCN paper's numbers),
//! shortened to 200 ms before the capacity step: the claims standard QCN makes there.
#![allow(clippy::unwrap_used)]

mod common;
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
    opts.capture = testbed::run::capture::Capture::Bottleneck;
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
    // Counts and rates over the same window: the window's count over its 100 ms is the rate.
    for f in &s.flows {
        assert!(f.cnm_window <= f.cnm_rx, "{f:?}");
        assert!(
            (f.cnm_window as f64 / 0.1 - f.cnm_per_s).abs() < 1e-6,
            "{f:?}"
        );
        assert_eq!(f.rate_feedback_rx, 0);
    }
    // The simulator's trace clock: virtual ns from 0, the pcaps on the same numbers.
    assert_eq!(json["trace_clock"]["clock"], "virtual");
    assert_eq!(json["trace_clock"]["realtime_offset_ns"], 0);
    // The RP loop at the defaults: R = 5 × 15 ms × 1.15 = 86.25 ms; a 100 ms window holds
    // 1.16 of them, fewer than 3: not faithful, and the warning says why.
    assert!((s.rp_recovery_s.unwrap() - 0.08625).abs() < 1e-9, "{s:?}");
    assert!((s.rp_recoveries_in_window.unwrap() - 0.1 / 0.08625).abs() < 1e-6);
    assert!(!s.faithful);
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("too short for the reaction points")),
        "{:?}",
        s.warnings
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--capture all` in the simulator: one readable pcap per link of the scenario, named after
/// the link; `--capture LINK` only that link; an unknown link is refused before anything runs.
#[test]
fn sim_capture_all_writes_one_pcap_per_link() {
    use testbed::run::capture::Capture;
    let sc = scenario::load("dumbbell", &["duration=20ms".to_string()]).unwrap();
    let graph = sc.topo.graph();
    let dir = std::env::temp_dir().join(format!("run-sim-capture-{}", std::process::id()));
    let mut opts = RunOptions::new(Mode::Sim);
    opts.out = Some(dir.clone());
    opts.quiet = true;
    opts.no_plots = true;
    opts.capture = Capture::All;
    run_scenario(&sc, &opts).unwrap();
    let pcaps = common::pcaps_under(&dir);
    assert_eq!(pcaps.len(), graph.links.len(), "{pcaps:?}");
    for l in &graph.links {
        let p = testbed::run::capture::link_file(&dir, &l.name);
        let bytes = std::fs::read(&p).unwrap();
        // Classic pcap, microsecond or nanosecond magic, Ethernet, and at least one frame.
        let magic = u32::from_le_bytes(bytes[..4].try_into().unwrap());
        assert!(
            magic == 0xa1b2_c3d4 || magic == 0xa1b2_3c4d,
            "{}",
            p.display()
        );
        assert_eq!(u32::from_le_bytes(bytes[20..24].try_into().unwrap()), 1);
        assert!(bytes.len() > 24 + 16, "{} has no frame", p.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
    // One link by name.
    let name = graph.links[0].name.clone();
    opts.capture = Capture::Links(vec![name.clone()]);
    run_scenario(&sc, &opts).unwrap();
    let pcaps = common::pcaps_under(&dir);
    assert_eq!(pcaps, vec![testbed::run::capture::link_file(&dir, &name)]);
    let _ = std::fs::remove_dir_all(&dir);
    // The CNMs towards the first flow's source alone.
    opts.capture = Capture::Cnms;
    run_scenario(&sc, &opts).unwrap();
    assert_eq!(common::pcaps_under(&dir), vec![dir.join("cnms.pcap")]);
    let _ = std::fs::remove_dir_all(&dir);
    // An unknown link: refused, nothing created.
    opts.capture = Capture::Links(vec!["sw0-nowhere".into()]);
    let e = run_scenario(&sc, &opts).unwrap_err().to_string();
    assert!(e.contains("\"sw0-nowhere\"") && e.contains(&name), "{e}");
    assert!(!dir.exists());
}

/// Explicit-rate runs send rate-feedback messages instead of CNMs: they are counted per flow
/// (whole run, window, per second) and written to `rate_feedback.csv`.
#[test]
fn sim_explicit_rate_feedback_is_counted() {
    let sc = scenario::load(
        "dumbbell",
        &[
            "duration=60ms".to_string(),
            "scenario.window=[\"30ms\", \"60ms\"]".to_string(),
        ],
    )
    .unwrap();
    let dir = std::env::temp_dir().join(format!("run-sim-er-{}", std::process::id()));
    let mut opts = RunOptions::new(Mode::Sim);
    opts.out = Some(dir.clone());
    opts.quiet = true;
    opts.no_plots = true;
    opts.variant = Some("explicit-rate".into());
    let out = run_scenario(&sc, &opts).unwrap();
    let s = &out.report.summary;
    for f in &s.flows {
        assert_eq!(f.cnm_rx, 0, "{f:?}");
        assert!(f.rate_feedback_window > 0, "{f:?}");
        assert!(f.rate_feedback_rx >= f.rate_feedback_window, "{f:?}");
        assert!(
            (f.rate_feedback_window as f64 / 0.03 - f.rate_feedback_per_s).abs() < 1e-6,
            "{f:?}"
        );
    }
    // No QCN reaction point: the RP-loop rule does not apply.
    assert_eq!(s.rp_recovery_s, None);
    let csv = std::fs::read_to_string(dir.join("rate_feedback.csv")).unwrap();
    assert!(csv.starts_with("t_s,flow,count\n") && csv.lines().count() > 4);
    let t = testbed::report::table::summary_table(s);
    assert!(t.contains("rate fb win"), "{t}");
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
