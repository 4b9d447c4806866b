#![allow(clippy::unwrap_used)]
//! Summary schema, CSV, plots, report.md, comparison, terminal tables, trace reader on garbage.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use cnm_proto::Rate;
use testbed::analysis::trace::{read_trace, TraceOptions};
use testbed::analysis::{analyze, Bottleneck, FlowSeries, LinkSpec, RunData, RunMeta};
use testbed::report::{compare::write_compare, table, write_run, ReportOptions};

static N: AtomicU32 = AtomicU32::new(0);

/// A fresh output directory; kept under `$TESTBED_KEEP_PLOTS` when set (to look at the plots).
fn out_dir(name: &str) -> (PathBuf, bool) {
    if let Ok(keep) = std::env::var("TESTBED_KEEP_PLOTS") {
        return (PathBuf::from(keep).join(name), true);
    }
    let d = std::env::temp_dir().join(format!(
        "testbed-analysis-{}-{}-{name}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    (d, false)
}

/// Tiny deterministic noise.
fn noise(seed: &mut u64) -> f64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*seed >> 33) as f64 / (1u64 << 31) as f64) - 0.5
}

/// A synthetic dumbbell like QCN-REFERENCE §5 row 1: 4 flows on 10 Gb/s, bottleneck 10→1 Gb/s
/// at 2 s and back at 4 s. `fair` makes the flows converge to equal shares; otherwise they
/// settle unequal like standard QCN.
fn dumbbell(variant: &str, fair: bool) -> RunData {
    let mut meta = RunMeta::new("dumbbell", "sim", 6.0, 7);
    meta.variant = Some(variant.into());
    meta.steady_window = Some((1.0, 2.0));
    meta.q_eq_bytes = Some(33_000);
    meta.q_high_bytes = Some(100_000);
    let mut run = RunData::new(meta);
    run.add_link(
        LinkSpec::new("bn", Rate::from_gbps(10))
            .step(2.0, Rate::from_gbps(1))
            .step(4.0, Rate::from_gbps(10)),
    );
    run.mark(2.0, "bottleneck 10→1 Gb/s")
        .mark(4.0, "bottleneck back to 10 Gb/s");
    let unequal = [0.4, 0.3, 0.2, 0.1];
    let mut seed = 1u64;
    for (i, u) in unequal.iter().enumerate() {
        let mut f = FlowSeries::new(&format!("f{}", i + 1), &["h", "bn"][1..]);
        for k in 1..=600 {
            let t = k as f64 * 0.01;
            // Regime of the interval's middle.
            let m = t - 0.005;
            let cap = if (2.0..4.0).contains(&m) { 1e9 } else { 10e9 };
            let target = if fair { cap / 4.0 } else { cap * u };
            let since = if m > 4.0 {
                t - 4.0
            } else if m > 2.0 {
                t - 2.0
            } else {
                t
            };
            let prev = if m > 4.0 {
                1e9 / 4.0
            } else if m > 2.0 {
                10e9 * if fair { 0.25 } else { *u }
            } else {
                10e9
            };
            let v = target + (prev - target) * (-since / 0.15).exp();
            f.push_bps(t, (v * (1.0 + 0.04 * noise(&mut seed))).max(0.0));
        }
        for k in 0..(if fair { 900 } else { 400 + 300 * i }) {
            f.push_cnm(6.0 * k as f64 / if fair { 900.0 } else { (400 + 300 * i) as f64 });
        }
        run.add_flow(f);
    }
    let q = run.queue_mut(Some("sw0"), "eth4", 0, "output");
    for k in 0..6000 {
        let t = k as f64 * 0.001;
        let base = if (2.0..2.3).contains(&t) {
            120_000.0
        } else {
            33_000.0
        };
        q.push(t, (base * (1.0 + 0.5 * noise(&mut seed))).max(0.0) as u64);
    }
    run.add_bottleneck(
        Bottleneck::new("sw0:eth4", "bn", Some("sw0/eth4/p0/output"))
            .events_from(Some("sw0"), &["4", "eth4"]),
    );
    run
}

#[test]
fn summary_schema_keys() {
    let run = dumbbell("fqcn", true);
    let a = analyze(&run, &Default::default());
    let v: serde_json::Value = serde_json::from_str(&a.summary.to_json()).unwrap();
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
        assert!(v.get(k).is_some(), "summary lacks {k}: {v}");
    }
    for k in ["name", "mean_bps", "fair_share_bps", "cnm_rx"] {
        assert!(v["flows"][0].get(k).is_some(), "flow lacks {k}");
    }
    for k in [
        "name",
        "utilization",
        "queue_mean_bytes",
        "queue_std_bytes",
        "queue_p99_bytes",
        "drops",
        "pause_tx",
    ] {
        assert!(v["bottlenecks"][0].get(k).is_some(), "bottleneck lacks {k}");
    }
    assert_eq!(v["scenario"], "dumbbell");
    assert_eq!(v["mode"], "sim");
    assert!(v["convergence_s"].is_array());
    assert!(v["faithful"].as_bool().unwrap());
    // Values make sense: equal shares of 2.5 Gb/s, fair, full link, queue near Qeq.
    let s = &a.summary;
    assert!((s.flows[0].fair_share_bps.unwrap() - 2.5e9).abs() < 1.0);
    assert!(s.jain.unwrap() > 0.99, "{:?}", s.jain);
    let u = s.bottlenecks[0].utilization.unwrap();
    assert!((0.95..1.05).contains(&u), "{u}");
    let qm = s.bottlenecks[0].queue_mean_bytes.unwrap();
    assert!((30_000.0..36_000.0).contains(&qm), "{qm}");
    assert_eq!(s.convergence_s.len(), 2);
    assert!(
        s.convergence_s.iter().all(Option::is_some),
        "{:?}",
        s.convergence_s
    );
    assert_eq!(s.flows[0].cnm_rx, 900);
    assert!((s.flows[0].cnm_per_s - 150.0).abs() < 2.0);
    // Round trip.
    let back = testbed::analysis::Summary::from_json(&a.summary.to_json()).unwrap();
    assert_eq!(back.flows.len(), 4);
    assert_eq!(back.convergence_s.len(), 2);
    assert_eq!(back.bottlenecks[0].name, "sw0:eth4");
    let unfair = analyze(&dumbbell("qcn", false), &Default::default());
    assert!(
        unfair.summary.jain.unwrap() < 0.9,
        "{:?}",
        unfair.summary.jain
    );
}

fn nonempty(p: &std::path::Path) -> bool {
    std::fs::metadata(p)
        .map(|m| m.len() > 1000)
        .unwrap_or(false)
}

#[test]
fn results_directory_with_plots() {
    let (dir, keep) = out_dir("run");
    let run = dumbbell("qcn", false);
    let rep = write_run(&dir, &run, &ReportOptions::default()).unwrap();
    if let Some(e) = &rep.plot_error {
        // Only acceptable reason: no font on this machine; say so loudly.
        panic!("plots not drawn: {e}");
    }
    for name in [
        "summary.json",
        "flows.csv",
        "queues.csv",
        "cnms.csv",
        "report.md",
    ] {
        assert!(dir.join(name).is_file(), "{name} missing");
    }
    for name in ["throughput", "queues", "cnms"] {
        assert!(
            nonempty(&dir.join(format!("{name}.png"))),
            "{name}.png empty"
        );
        assert!(
            nonempty(&dir.join(format!("{name}.svg"))),
            "{name}.svg empty"
        );
        let png = std::fs::read(dir.join(format!("{name}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let svg = std::fs::read_to_string(dir.join(format!("{name}.svg"))).unwrap();
        assert!(svg.contains("<svg") && svg.contains("time (s)"));
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("![") && md.contains("throughput.png") && md.contains("| flow |"));
    let flows = std::fs::read_to_string(dir.join("flows.csv")).unwrap();
    assert!(flows.starts_with("t_s,flow,bps,fair_share_bps\n"));
    assert_eq!(flows.lines().count(), 1 + 4 * 600);
    let t = table::summary_table(&rep.summary);
    assert!(t.contains("Jain") && t.contains("f4") && t.contains("sw0:eth4"));
    println!("{t}");
    if !keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn comparison_side_by_side() {
    let (dir, keep) = out_dir("compare");
    let runs = [dumbbell("qcn", false), dumbbell("fqcn", true)];
    let rep = write_compare(&dir, &runs, &ReportOptions::default()).unwrap();
    assert!(rep.plot_error.is_none(), "{:?}", rep.plot_error);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
    assert_eq!(v["runs"][0]["label"], "qcn");
    assert!(v["runs"][1]["jain"].as_f64().unwrap() > v["runs"][0]["jain"].as_f64().unwrap());
    for name in ["throughput", "queues", "cnms"] {
        assert!(
            nonempty(&dir.join(format!("{name}.png")))
                && nonempty(&dir.join(format!("{name}.svg")))
        );
    }
    assert!(std::fs::read_to_string(dir.join("compare.md"))
        .unwrap()
        .contains("## fqcn"));
    assert!(rep.table.contains("qcn") && rep.table.contains("fqcn"));
    println!("{}", rep.table);
    if !keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn report_without_plots_still_writes_everything_else() {
    let (dir, keep) = out_dir("noplots");
    let opts = ReportOptions {
        no_plots: true,
        ..Default::default()
    };
    let rep = write_run(&dir, &dumbbell("qcn", false), &opts).unwrap();
    assert!(dir.join("summary.json").is_file() && dir.join("report.md").is_file());
    assert!(!dir.join("throughput.png").exists());
    assert!(rep.report_md().is_some());
    if !keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn trace_reader_tolerates_garbage() {
    let mut text = String::new();
    text.push_str("{\"type\":\"queues\",\"t\":1000000000,\"node\":\"sw0\",\"queues\":[{\"port\":\"eth1\",\"priority\":3,\"kind\":\"output\",\"bytes\":4000}]}\n");
    text.push_str("not json at all\n");
    text.push_str("[1,2,3]\n");
    text.push_str("{\"type\":\"queues\"}\n");
    text.push_str("{\"type\":\"queues\",\"t\":\"soon\",\"queues\":[]}\n");
    text.push_str("{\"type\":\"queues\",\"t\":2000000000,\"queues\":[{\"port\":null,\"bytes\":\"x\"},{\"port\":7,\"priority\":99,\"bytes\":5}]}\n");
    text.push_str("{\"type\":\"event\",\"at\":5}\n");
    text.push_str("{\"type\":\"event\",\"event\":\"drop\"}\n");
    text.push_str("{\"type\":\"event\",\"event\":\"drop\",\"at\":1500000000,\"port\":4,\"reason\":\"output_full\",\"extra\":{\"a\":[1]}}\n");
    text.push_str("{\"type\":\"event\",\"event\":\"pause_tx\",\"at\":1600000000,\"port\":\"eth4\",\"on\":true,\"priority\":null}\n");
    text.push_str("{\"type\":\"event\",\"event\":\"cnm\",\"at\":1700000000,\"flow\":\"f1\"}\n");
    text.push_str("{\"type\":\"future_thing\",\"t\":1}\n");
    text.push_str("{\"type\":\"queues\",\"t\":18446744073709551615,\"queues\":[{\"port\":\"eth1\",\"priority\":3,\"kind\":\"output\",\"bytes\":18446744073709551615}]}\n");
    text.push_str("{\"type\":\"queues\",\"t\":-5,\"queues\":[]}\n");
    text.push_str("{\"type\":\"event\",\"event\":\"drop\",\"at\":1.5e9}\n");
    text.push('\n');
    text.push_str("{\"type\":\"event\",\"event\":\"drop\",\"at\":17000"); // truncated last line
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(&[0xff, 0xfe, b'\n', 0x00, b'{', b'\n']);
    let d = read_trace(
        &bytes[..],
        "garbage",
        &TraceOptions {
            node: Some("sw9".into()),
            t0_ns: 0,
        },
    );
    // Never panics; the good lines are used.
    assert_eq!(
        d.queues
            .iter()
            .find(|q| q.name == "sw0/eth1/p3/output")
            .unwrap()
            .samples
            .len(),
        1
    );
    assert!(d.queues.iter().any(|q| q.name == "sw9/7/p7/output"));
    assert!(d.queues.iter().any(|q| q.name == "sw9/eth1/p3/output"));
    assert_eq!(d.events.iter().filter(|e| e.kind == "drop").count(), 2);
    assert!(d.events.iter().any(|e| e.kind == "pause_tx"
        && e.port.as_deref() == Some("eth4")
        && e.bool_field("on") == Some(true)));
    assert_eq!(d.stats.ignored, 1);
    assert!(d.stats.bad_lines >= 7, "{:?}", d.stats);
    assert!(d.stats.first_bad.is_some());
    // Into a run: CNM attributed, warning recorded, events counted on the bottleneck.
    let mut run = RunData::new(RunMeta::new("g", "netns", 3.0, 0));
    run.add_link(LinkSpec::new("bn", Rate::from_mbps(100)));
    run.add_flow(FlowSeries::new("f1", &["bn"]));
    run.add_bottleneck(
        Bottleneck::new("bn", "bn", Some("sw0/eth1/p3/output"))
            .events_from(Some("sw9"), &["4", "eth4"]),
    );
    run.absorb(d);
    assert!(run.warnings.iter().any(|w| w.contains("unreadable")));
    let a = analyze(&run, &Default::default());
    assert_eq!(a.summary.flows[0].cnm_rx, 1);
    assert_eq!(a.cnms.side, "rp");
    assert_eq!(a.summary.bottlenecks[0].drops, 1);
    assert_eq!(a.summary.bottlenecks[0].pause_tx, 1);
    // Pure random bytes.
    let mut seed = 99u64;
    let junk: Vec<u8> = (0..20_000)
        .map(|_| (noise(&mut seed) * 255.0) as i8 as u8)
        .collect();
    let d = read_trace(&junk[..], "junk", &TraceOptions::default());
    assert!(d.events.is_empty() && d.queues.is_empty());
}

#[test]
fn cnm_events_attributed_to_flows() {
    // CP side (switch sw0, "dst" = sampled source) only.
    let cp = "{\"type\":\"event\",\"event\":\"cnm\",\"at\":1000,\"node\":\"sw0\",\"port\":1,\"priority\":3,\"dst\":\"02:00:00:00:00:01\",\"qntz_fb\":5}\n\
              {\"type\":\"event\",\"event\":\"cnm\",\"at\":2000,\"node\":\"sw0\",\"port\":1,\"priority\":3,\"dst\":\"02:00:00:00:00:01\"}\n\
              {\"type\":\"event\",\"event\":\"cnm\",\"at\":3000,\"node\":\"sw0\",\"port\":2,\"priority\":3,\"dst\":\"02:00:00:00:00:02\"}\n\
              {\"type\":\"event\",\"event\":\"cnm\",\"at\":4000,\"node\":\"sw0\",\"port\":2,\"priority\":3,\"dst\":\"02:00:00:00:00:09\"}\n";
    // RP side (hosts, numeric flow ids), as the simulator and rp-agent trace them.
    let rp = "{\"type\":\"event\",\"event\":\"cnm\",\"at\":1500,\"node\":\"h1\",\"flow\":0,\"qntz_fb\":3}\n\
              {\"type\":\"event\",\"event\":\"cnm\",\"at\":2500,\"node\":\"h2\",\"flow\":0}\n\
              {\"type\":\"event\",\"event\":\"cnm\",\"at\":2600,\"node\":\"h2\",\"flow\":0}\n\
              {\"type\":\"event\",\"event\":\"rate_change\",\"at\":2700,\"node\":\"h2\",\"flow\":0,\"cr_bps\":5}\n";
    let flows = || {
        vec![
            FlowSeries::new("f1", &[])
                .source_mac("02-00-00-00-00-01")
                .at_host("h1", Some(0)),
            FlowSeries::new("f2", &[])
                .source_mac("02:00:00:00:00:02")
                .at_host("h2", Some(0)),
            FlowSeries::new("f3", &[])
                .source_mac("02:00:00:00:00:02")
                .at_host("h3", Some(0)),
        ]
    };
    let mut run = RunData::new(RunMeta::new("m", "sim", 1.0, 0));
    flows().into_iter().for_each(|f| {
        run.add_flow(f);
    });
    run.absorb(read_trace(cp.as_bytes(), "cp", &TraceOptions::default()));
    let a = analyze(&run, &Default::default());
    assert_eq!(a.cnms.side, "cp");
    assert_eq!(a.summary.flows[0].cnm_rx, 2);
    // Shared source MAC (f2, f3) and an unknown one: not attributed, and said so.
    assert_eq!(a.summary.flows[1].cnm_rx, 0);
    assert_eq!(a.cnms.unattributed, 2);
    assert!(
        a.summary
            .warnings
            .iter()
            .any(|w| w.contains("2 CNM trace events")),
        "{:?}",
        a.summary.warnings
    );
    // With the hosts' traces too, only the RP side counts (no double counting).
    run.absorb(read_trace(rp.as_bytes(), "rp", &TraceOptions::default()));
    let a = analyze(&run, &Default::default());
    assert_eq!(a.cnms.side, "rp");
    let got: Vec<u64> = a.summary.flows.iter().map(|f| f.cnm_rx).collect();
    assert_eq!(got, vec![1, 2, 0]);
    let csv = testbed::analysis::csv::cnms_csv(&run, &a.cnms.per_flow);
    assert_eq!(csv.lines().count(), 1 + 3);
    // Off when the runner counts CNMs itself.
    run.cnm_from_trace = false;
    run.flows[2].push_cnm_count(0.5, 7);
    let a = analyze(&run, &Default::default());
    let got: Vec<u64> = a.summary.flows.iter().map(|f| f.cnm_rx).collect();
    assert_eq!(got, vec![0, 0, 7]);
}

/// Explicit-rate feedback: the switches' `rate_feedback` events (one per message sent, with the
/// source as `dst`) are counted per flow over the whole run and over the window; the reaction
/// point's own `rate_feedback` events (only the ones that changed its rate, no `dst`) are not.
#[test]
fn rate_feedback_events_counted_per_flow_over_the_window() {
    let mut text = String::new();
    // f1: at 0.1, 0.2, ..., 0.9 s (9 messages), 4 of them in the window [0.5, 0.9).
    for k in 1..=9u64 {
        text.push_str(&format!(
            "{{\"type\":\"event\",\"event\":\"rate_feedback\",\"at\":{},\"node\":\"sw0\",\"port\":1,\"priority\":3,\"cp_port\":4,\"dst\":\"02:00:00:00:00:01\",\"rate\":1000000,\"cpid\":\"02:00:00:00:00:00:00:04\"}}\n",
            k * 100_000_000
        ));
    }
    // Unknown source: not attributed, and said so.
    text.push_str("{\"type\":\"event\",\"event\":\"rate_feedback\",\"at\":600000000,\"node\":\"sw0\",\"dst\":\"02:00:00:00:00:09\",\"rate\":1}\n");
    // The RP's own event: not a message sent.
    text.push_str("{\"type\":\"event\",\"event\":\"rate_feedback\",\"at\":700000000,\"node\":\"h1\",\"flow\":0,\"rate_bps\":1,\"cr_bps\":1}\n");
    let mut meta = RunMeta::new("er", "sim", 1.0, 0);
    meta.steady_window = Some((0.5, 0.9));
    let mut run = RunData::new(meta);
    run.add_flow(
        FlowSeries::new("f1", &[])
            .source_mac("02:00:00:00:00:01")
            .at_host("h1", Some(0)),
    );
    run.add_flow(FlowSeries::new("f2", &[]).source_mac("02:00:00:00:00:02"));
    // Two CNMs counted by the runner, one in the window.
    run.flows[1].push_cnm_count(0.2, 1);
    run.flows[1].push_cnm_count(0.6, 1);
    run.cnm_from_trace = false;
    run.absorb(read_trace(text.as_bytes(), "t", &TraceOptions::default()));
    let a = analyze(&run, &Default::default());
    let f1 = &a.summary.flows[0];
    assert_eq!(
        (f1.rate_feedback_rx, f1.rate_feedback_window),
        (9, 4),
        "{f1:?}"
    );
    assert!((f1.rate_feedback_per_s - 10.0).abs() < 1e-9, "{f1:?}");
    assert_eq!(f1.cnm_rx, 0);
    let f2 = &a.summary.flows[1];
    assert_eq!((f2.cnm_rx, f2.cnm_window), (2, 1));
    assert!((f2.cnm_per_s - 2.5).abs() < 1e-9);
    assert_eq!(a.cnms.rate_feedback_unattributed, 1);
    assert!(a
        .summary
        .warnings
        .iter()
        .any(|w| w.contains("1 rate-feedback trace events")));
    // The JSON carries the window count beside the whole-run one; no rate feedback keys for
    // a flow without any.
    let v: serde_json::Value = serde_json::from_str(&a.summary.to_json()).unwrap();
    assert_eq!(v["flows"][0]["rate_feedback_window"], 4);
    assert_eq!(v["flows"][1]["cnm_window"], 1);
    assert!(v["flows"][1].get("rate_feedback_rx").is_none());
    // Both tables show the rate-feedback columns and say which counts are the window's.
    let t = table::summary_table(&a.summary);
    assert!(t.contains("rate fb win") && t.contains("CNMs run") && t.contains("win: "));
    let md = testbed::report::summary_markdown(&a.summary);
    assert!(
        md.contains("| rate fb win |") || md.contains("rate fb win"),
        "{md}"
    );
    let csv = testbed::analysis::csv::cnms_csv(&run, &a.cnms.rate_feedback);
    assert_eq!(csv.lines().count(), 1 + 9);
}
