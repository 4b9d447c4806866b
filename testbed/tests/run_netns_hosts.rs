//! The one-process hosts of a netns run (root only): a short dumbbell whose generators and
//! sink all run in one `rp-agent hosts` process writes complete reports, every frame the
//! generators sent is accounted for (received, or dropped where a counter saw it), and
//! nothing is left behind.
#![allow(clippy::unwrap_used)]

mod common;

use common::netns::{assert_clean, out_dir, prefix_of, run_dumbbell};
use serde_json::Value;

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
    let status = run_dumbbell(
        &dir,
        &[
            "--set",
            "scenario.netns.duration=4s",
            "--set",
            "scenario.netns.hosts=one-process",
        ],
    );
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
    let stats = read(&dir.join("stats-sw0.json"));
    let ports = stats["ports"].as_array().unwrap();
    let port = |name: &str| {
        ports
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no port {name} in {stats}"))
    };
    let n = |v: &Value| v.as_u64().unwrap();
    let (mut on_wire, mut received) = (0, 0);
    for f in 0..4 {
        let gen = read(&dir.join(format!("gen-f{f}.json")));
        assert_eq!(gen["start"]["tool"], "rp-agent gen");
        assert!(!gen["intervals"].as_array().unwrap().is_empty());
        let sent = n(&gen["end"]["sum"]["frames"]);
        let per: u64 = gen["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|iv| n(&iv["sum"]["frames"]))
            .sum();
        assert_eq!(per, sent, "f{f}: intervals and total disagree");
        assert!(sent > 1000, "f{f} sent {sent} frames");
        // What the generator handed over is what its agent sent plus what it still held
        // when its drain ended, and the switch port received all that was sent.
        let (unsent, tx) = (
            n(&gen["end"]["unsent"]),
            n(&gen["end"]["uplink"]["tx_frames"]),
        );
        assert_eq!(
            sent,
            tx + unsent,
            "f{f}: {sent} sent, {tx} on the wire, {unsent} unsent"
        );
        let ingress = port(&format!("h{f}"));
        assert_eq!(
            n(&ingress["rx_frames"]) + n(&ingress["io"]["rx_dropped"]),
            tx,
            "f{f}: the switch port saw another count than the agent sent"
        );
        on_wire += tx;
        let mac = format!("02:00:00:00:01:{f:02x}");
        let got = streams
            .iter()
            .find(|s| s["src"].as_str().unwrap().eq_ignore_ascii_case(&mac))
            .unwrap_or_else(|| panic!("the sink saw nothing from {mac}: {streams:?}"));
        let (frames, lost) = (n(&got["frames"]), n(&got["lost"]));
        // Sequence gaps (frames lost) are frames that were sent; a flow's tail dropped at a
        // full queue shows no gap, so received and lost may be fewer than sent, never more.
        assert!(
            frames + lost <= tx,
            "f{f}: {frames} + {lost} lost > {tx} sent"
        );
        received += frames;
    }
    // Every frame sent was received or dropped where a counter saw it: the switches drained
    // before the sink stopped, and the sink read what waited in its ring.
    let switch_drops: u64 = ports.iter().map(|p| n(&p["drops"])).sum();
    let ring_drops: u64 = ports.iter().map(|p| n(&p["io"]["rx_dropped"])).sum();
    let sink_drops = n(&sink["end"]["kernel_dropped"]);
    assert_eq!(
        on_wire,
        received + switch_drops + ring_drops + sink_drops,
        "{on_wire} frames sent, {received} received, {switch_drops} dropped by the switch, \
         {ring_drops} by its rings, {sink_drops} by the sink's ring"
    );
    let s = read(&dir.join("summary.json"));
    let warnings = s["warnings"].as_array().unwrap();
    assert!(
        !warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("still held")),
        "{warnings:?}"
    );
    let flows = s["flows"].as_array().unwrap();
    assert!(
        flows.iter().all(|f| f["mean_bps"].as_f64().unwrap() > 0.0),
        "{s}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A host with two generated flows sends both through one agent and one line, as the
/// simulator's host does: the fan-in victim's h1 (f1 greedy to r0, f6 at 7 Gb/s to r1, on a
/// 10 Gb/s link; S = 100) starts f1's generator, and f6's joins it. The two reports number
/// their flows 0 and 1 and count the same port; h1's port at the switch received no more than
/// the link carries (its ingress stage dropped nothing); the run says nothing about flows that
/// do not share a line.
#[test]
fn a_hosts_generated_flows_share_one_agent_and_line() {
    if !testbed::netns::can_run_network_tests("a_hosts_generated_flows_share_one_agent_and_line") {
        return;
    }
    let dir = out_dir("run-netns-hosts", "shared");
    let status = common::netns::testbed()
        .args(["fan-in-victim", "--quiet", "--no-plots"])
        // At S = 100 (100 Mb/s) rather than the built-in's S = 10: tests share the machine.
        .args(["--set", "scenario.scale=100"])
        .args(["--set", "scenario.netns.duration=3s"])
        .arg("--out")
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    // Not faithful is a verdict, not a failure: the run itself completes (0 or 1).
    assert!(matches!(status.code(), Some(0 | 1)), "{status}");
    let prefix = prefix_of(&dir).unwrap();
    assert_clean(&prefix);
    let n = |v: &Value| v.as_u64().unwrap();
    let (f1, f6) = (
        read(&dir.join("gen-f1.json")),
        read(&dir.join("gen-f6.json")),
    );
    assert_eq!(f1["start"]["first_flow_id"], 0);
    assert_eq!(f6["start"]["first_flow_id"], 1);
    assert!(n(&f1["end"]["sum"]["frames"]) > 100, "{}", f1["end"]);
    assert!(n(&f6["end"]["sum"]["frames"]) > 100, "{}", f6["end"]);
    // One port carried both: its count when the later of the two reported is every frame
    // either handed over, less what their agent still held when the drain ended.
    let tx = n(&f1["end"]["uplink"]["tx_frames"]).max(n(&f6["end"]["uplink"]["tx_frames"]));
    let handed: u64 = [&f1, &f6]
        .iter()
        .map(|g| n(&g["end"]["sum"]["frames"]) - n(&g["end"]["unsent"]))
        .sum();
    assert_eq!(tx, handed, "f1 {} f6 {}", f1["end"], f6["end"]);
    // The greedy f1 met backpressure; the 7 Gb/s f6 kept its rate.
    assert!(n(&f1["end"]["backpressure"]) > 0, "{}", f1["end"]);
    let stats = read(&dir.join("stats-sw0.json"));
    let h1 = stats["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "h1")
        .unwrap_or_else(|| panic!("no port h1 in {stats}"))
        .clone();
    let stage = &h1["ingress"]["stage"];
    assert!(stage.is_object(), "h1 has an ingress stage: {h1}");
    for k in ["overflow_drops", "down_drops"] {
        assert_eq!(n(&stage[k]), 0, "{k}: {h1}");
    }
    let s = read(&dir.join("summary.json"));
    let warnings: Vec<&str> = s["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        !warnings.iter().any(|w| w.contains("generated flows")
            || w.contains("ingress stage\"")
            || w.contains("unexpected drops")),
        "{warnings:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--hosts-sched` and `--switch-sched` reach the daemons: the hosts process and the switch
/// each log the real-time policy they were given, and the run still completes and cleans up.
#[test]
fn real_time_daemons_on_request() {
    if !testbed::netns::can_run_network_tests("real_time_daemons_on_request") {
        return;
    }
    let dir = out_dir("run-netns-hosts", "rt");
    let status = run_dumbbell(
        &dir,
        &[
            "--set",
            "scenario.netns.duration=2s",
            "--hosts-sched",
            "fifo:10",
            "--switch-sched",
            "fifo:10",
        ],
    );
    assert!(status.success(), "{status}");
    assert_clean(&prefix_of(&dir).unwrap());
    for log in ["rp-agent-hosts.log", "cp-switch-sw0.log"] {
        let text = std::fs::read_to_string(dir.join("logs").join(log)).unwrap();
        assert!(
            text.contains("scheduling policy set sched=fifo:10"),
            "{log}:\n{text}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
