//! Parameter-change events on namespaces (root only): a short two-sender dumbbell whose switch
//! gets `cp_queue_set_point = "20KB"` half way and whose first sender gets new reaction-point
//! settings; the switch trace records the change at about the scheduled time, the final
//! `show cps` has the new set point, and no command failed.
#![allow(clippy::unwrap_used)]

mod common;

use common::netns::{summary, testbed};
use std::path::PathBuf;
use std::process::Stdio;

const SCENARIO: &str = r#"
seed = 2
duration = "100ms"

[scenario]
scale = 100
[scenario.netns]
duration = "8s"

[output]
bottleneck = "sw0-r0"
trace_interval = "1ms"

[switch.sw0.bridge]
buffers = { output = "150KB", on_output_full = "drop" }
cp = { cp_queue_set_point = "33KB" }

[host.h0]
[host.h1]
[host.r0]

[[link]]
a = "h0"
b = "sw0"
rate = "10gbit"
delay = "12.5us"
[[link]]
a = "h1"
b = "sw0"
rate = "10gbit"
delay = "12.5us"
[[link]]
a = "sw0"
b = "r0"
rate = "10gbit"
delay = "12.5us"

[[flow]]
src = "h0"
dst = "r0"
pattern = "greedy"
[[flow]]
src = "h1"
dst = "r0"
pattern = "greedy"

[[event]]
at = "50ms"
switch = "sw0"
set = { cp_queue_set_point = "20KB" }
[[event]]
at = "60ms"
host = "h0"
set = { rpg_ai_rate = "10mbit" }
"#;

fn out_dir() -> PathBuf {
    std::env::temp_dir().join(format!("run-netns-params-{}", std::process::id()))
}

fn records(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn netns_parameter_events_reach_the_daemons_on_time() {
    if !testbed::netns::can_run_network_tests("netns_parameter_events_reach_the_daemons_on_time") {
        return;
    }
    let dir = out_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("params.toml");
    std::fs::write(&file, SCENARIO).unwrap();
    let out = dir.join("out");
    let status = testbed()
        .arg(&file)
        .args(["--mode", "netns", "--quiet", "--no-plots", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{status}");

    // The schedule runs at 8 s / 100 ms = 80 × scenario time: the CP event is due 4 s after
    // the generators start, the RP event 4.8 s.
    let trace = records(&out.join("trace-sw0.jsonl"));
    let changes: Vec<_> = trace.iter().filter(|r| r["type"] == "cp_config").collect();
    assert_eq!(changes.len(), 1, "{changes:?}");
    let c = changes[0];
    assert_eq!(c["set"]["cp_queue_set_point"], "20KB");
    assert_eq!(c["change"], "in-place");
    let busy = trace
        .iter()
        .find(|r| {
            r["type"] == "queues"
                && r["queues"]
                    .as_array()
                    .is_some_and(|q| q.iter().any(|x| x["bytes"].as_u64() > Some(0)))
        })
        .expect("traffic in the trace");
    let after_s = (c["t"].as_u64().unwrap() - busy["t"].as_u64().unwrap()) as f64 / 1e9;
    println!("cp_config {after_s:.3} s after the first queued frame (scheduled 4 s)");
    assert!((3.5..=5.0).contains(&after_s), "{after_s}");

    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("stats-sw0.json")).unwrap())
            .unwrap();
    let cps = stats["cps"].as_array().unwrap();
    assert!(!cps.is_empty());
    assert!(cps.iter().all(|c| c["qeq"] == 20_000), "{cps:?}");

    let warnings = summary(&out)["warnings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        !warnings
            .iter()
            .any(|w| w.as_str().is_some_and(|w| w.contains("event"))),
        "{warnings:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
