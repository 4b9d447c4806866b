//! The one-process hosts of a netns run (root only): a short dumbbell whose generators and
//! sink all run in one `rp-agent hosts` process writes complete reports, the sink accounts
//! for every frame the generators sent, and nothing is left behind.
#![allow(clippy::unwrap_used)]

mod common;

use common::netns::{assert_clean, out_dir, prefix_of, testbed};
use serde_json::Value;
use std::process::Stdio;

fn read(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn one_process_hosts_report_every_frame() {
    if !testbed::netns::can_run_network_tests("one_process_hosts_report_every_frame") {
        return;
    }
    let dir = out_dir("run-netns-hosts", "one");
    let status = testbed()
        .args([
            "dumbbell",
            "--quiet",
            "--no-plots",
            "--set",
            "scenario.netns.duration=4s",
            "--set",
            "scenario.netns.hosts=one-process",
        ])
        .arg("--out")
        .arg(&dir)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{status}");
    let prefix = prefix_of(&dir).unwrap();
    assert_clean(&prefix);
    // One hosts process, no generator or sink of its own.
    assert!(dir.join("logs/rp-agent-hosts.log").exists());
    assert!(!dir.join("logs/gen-f0.log").exists());
    assert!(!dir.join("logs/sink-r0.log").exists());
    let sink = read(&dir.join("sink-r0.json"));
    assert_eq!(sink["start"]["tool"], "rp-agent sink");
    assert!(!sink["intervals"].as_array().unwrap().is_empty());
    let streams = sink["end"]["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 4, "{streams:?}");
    for f in 0..4 {
        let gen = read(&dir.join(format!("gen-f{f}.json")));
        assert_eq!(gen["start"]["tool"], "rp-agent gen");
        assert!(!gen["intervals"].as_array().unwrap().is_empty());
        let sent = gen["end"]["sum"]["frames"].as_u64().unwrap();
        let per: u64 = gen["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|iv| iv["sum"]["frames"].as_u64().unwrap())
            .sum();
        assert_eq!(per, sent, "f{f}: intervals and total disagree");
        assert!(sent > 1000, "f{f} sent {sent} frames");
        let mac = format!("02:00:00:00:01:{f:02x}");
        let got = streams
            .iter()
            .find(|s| s["src"].as_str().unwrap().eq_ignore_ascii_case(&mac))
            .unwrap_or_else(|| panic!("the sink saw nothing from {mac}: {streams:?}"));
        let (frames, lost) = (
            got["frames"].as_u64().unwrap(),
            got["lost"].as_u64().unwrap(),
        );
        // Received and lost (sequence gaps: the switch's drops) are what was sent, but for
        // a tail a full queue may have dropped at the end (at most one buffer, 100 frames).
        assert!(
            frames + lost <= sent,
            "f{f}: {frames} + {lost} lost > {sent} sent"
        );
        assert!(
            sent - (frames + lost) <= 100,
            "f{f}: {frames} + {lost} lost of {sent} sent"
        );
    }
    let s = read(&dir.join("summary.json"));
    let flows = s["flows"].as_array().unwrap();
    assert!(
        flows.iter().all(|f| f["mean_bps"].as_f64().unwrap() > 0.0),
        "{s}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
