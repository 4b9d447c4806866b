//! `testbed run` on namespaces end to end (root only): a short dumbbell run gives a sane
//! summary and leaves no namespace or process behind, also when interrupted by SIGINT.
#![allow(clippy::unwrap_used)]

mod common;

use common::netns::{
    assert_clean, dumbbell, namespaces_of, out_dir, prefix_of, processes_of, run_dumbbell,
};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn netns_dumbbell_end_to_end_and_interrupted() {
    if !testbed::netns::can_run_network_tests("netns_dumbbell_end_to_end_and_interrupted") {
        return;
    }
    // 1. A short complete run: 8 s of schedule (steps at 8/3 s and 16/3 s), at S = 100
    //    (100 Mb/s; the built-in's S = 10 needs the machine to itself, and tests share it).
    let dir = out_dir("run-netns", "full");
    let status = run_dumbbell(&dir, &["--set", "scenario.netns.duration=8s"]);
    assert!(status.success(), "{status}");
    let prefix = prefix_of(&dir).unwrap();
    assert_clean(&prefix);
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["mode"], "netns");
    assert_eq!(s["time_scale"], 100.0);
    let flows = s["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 4);
    let total: f64 = flows.iter().map(|f| f["mean_bps"].as_f64().unwrap()).sum();
    // The 100 Mb/s bottleneck (10 Gb/s ÷ 100) is shared, never exceeded.
    assert!((20e6..=105e6).contains(&total), "sum of flow rates {total}");
    assert!(
        flows.iter().any(|f| f["cnm_rx"].as_u64().unwrap() > 0),
        "no CNMs: {s}"
    );
    let b = &s["bottlenecks"][0];
    let util = b["utilization"].as_f64().unwrap();
    assert!((0.2..=1.05).contains(&util), "utilization {util}");
    let q = b["queue_mean_bytes"].as_f64().unwrap();
    assert!(q < 150_000.0, "queue mean {q} above the buffer");
    assert!(s["faithful"].is_boolean());
    assert!(dir.join("trace-sw0.jsonl").exists());
    let _ = std::fs::remove_dir_all(&dir);

    // 2. Interrupted mid-run by SIGINT: exit status 130, nothing left.
    let dir = out_dir("run-netns", "int");
    let mut child = dumbbell(&dir, &["--set", "scenario.netns.duration=30s"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the generators run.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !dir.join("gen-f3.json").exists() {
        assert!(Instant::now() < deadline, "the run did not start");
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    let prefix = prefix_of(&dir).unwrap();
    assert!(!namespaces_of(&prefix).unwrap().is_empty());
    assert!(!processes_of(&prefix).is_empty());
    let ok = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "testbed run ignored SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130), "{status}");
    assert_clean(&prefix);
    let _ = std::fs::remove_dir_all(&dir);
}
