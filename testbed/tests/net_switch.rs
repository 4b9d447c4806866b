//! Real-network tests of the `cp-switch` daemon (issue: cp-switch, "Tests — real namespaces"):
//! three hosts in their own namespaces, joined by veth pairs to a switch namespace where the
//! daemon runs (`common::switch_lab`). Each test builds its own lab (unique names) and tears it
//! down on drop, also when it fails. Run as root; otherwise each test prints why it skips.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::switch_lab::{cp_switch, ctl_json, ip, port, Ipv6, Net};
use serde_json::Value;
use testbed::netns::can_run_network_tests;

#[test]
fn ping_tcp_and_ctl_across_three_hosts() {
    if !can_run_network_tests("ping_tcp_and_ctl_across_three_hosts") {
        return;
    }
    let mut net = Net::new("swping", Ipv6::On);
    net.start_switch(["p1", "p2", "p3"], &[]);
    for (a, b) in [(1, 2), (1, 3), (2, 3)] {
        assert!(net.ping(a, b), "ping h{a} -> h{b} failed");
    }
    // TCP: one second of iperf3 from h1 to h3.
    let _server = net
        .host(3)
        .spawn(&["iperf3", "-s", "-1", "-p", "5301"])
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = net
        .host(1)
        .exec(&["iperf3", "-c", &ip(3), "-p", "5301", "-t", "1", "-J"])
        .unwrap();
    let j: Value = serde_json::from_str(&out).unwrap();
    let bps = j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap();
    assert!(bps > 1e6, "TCP through the switch carried only {bps} bit/s");

    // `ctl stats --json` parses and carries the stable keys.
    let stats = net.stats();
    for key in [
        "name",
        "rx_frames",
        "tx_frames",
        "rx_bytes",
        "tx_bytes",
        "drops",
        "pause_tx",
        "pause_rx",
    ] {
        assert!(!port(&stats, "p1")[key].is_null(), "ports[].{key} missing");
    }
    let q = &stats["queues"][0];
    for key in ["port", "priority", "kind", "bytes", "max_bytes", "drops"] {
        assert!(!q[key].is_null(), "queues[].{key} missing");
    }
    assert!(port(&stats, "p1")["rx_frames"].as_u64().unwrap() > 10);
    let fdb = ctl_json(&net.ctl_path(), &["show", "fdb"]).unwrap();
    assert!(fdb.as_array().unwrap().len() >= 3, "fdb: {fdb}");
}

#[test]
fn udp_at_twice_the_port_rate_is_received_at_the_port_rate() {
    if !can_run_network_tests("udp_at_twice_the_port_rate_is_received_at_the_port_rate") {
        return;
    }
    let mut net = Net::new("swudp", Ipv6::On);
    net.start_switch(["p1", "p2,rate=100mbit", "p3"], &[]);
    assert!(net.ping(1, 2));
    let _server = net
        .host(2)
        .spawn(&["iperf3", "-s", "-1", "-p", "5302"])
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let client = std::thread::spawn({
        let h1 = net.host(1).clone();
        move || {
            h1.exec(&[
                "iperf3",
                "-c",
                "10.77.0.2",
                "-p",
                "5302",
                "-u",
                "-b",
                "200M",
                "-l",
                "1400",
                "-t",
                "5",
            ])
        }
    });
    // Measure what h2's interface receives over 2.5 s in the middle of the 5 s flow.
    std::thread::sleep(Duration::from_millis(1500));
    let (b0, t0) = (net.rx_bytes(2), Instant::now());
    std::thread::sleep(Duration::from_millis(2500));
    let (b1, t1) = (net.rx_bytes(2), Instant::now());
    client.join().unwrap().unwrap();
    let rate = (b1 - b0) as f64 * 8.0 / (t1 - t0).as_secs_f64();
    assert!(
        (97e6..=103e6).contains(&rate),
        "received {:.2} Mb/s, expected 100 Mb/s ± 3 %",
        rate / 1e6
    );
    let stats = net.stats();
    let drops = port(&stats, "p1")["drops"].as_u64().unwrap();
    assert!(drops > 0, "2x overload in drop-tail mode must drop");
}

#[test]
fn lossless_mode_sends_pause_upstream_under_overload() {
    if !can_run_network_tests("lossless_mode_sends_pause_upstream_under_overload") {
        return;
    }
    if Command::new("tshark").arg("-v").output().is_err() {
        eprintln!("lossless_mode_sends_pause_upstream_under_overload: skipped: tshark missing");
        return;
    }
    let mut net = Net::new("swpause", Ipv6::On);
    net.start_switch(["p1", "p2,rate=50mbit", "p3"], &["--lossless", "pause"]);
    assert!(net.ping(1, 2));
    let pcap = net.dir.join("h1.pcap");
    let mut capture = net
        .host(1)
        .spawn(&[
            "tshark",
            "-q",
            "-i",
            "eth0",
            "-f",
            "ether proto 0x8808",
            "-a",
            "duration:6",
            "-w",
            pcap.to_str().unwrap(),
        ])
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let _server = net
        .host(2)
        .spawn(&["iperf3", "-s", "-1", "-p", "5303"])
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    net.host(1)
        .exec(&[
            "iperf3",
            "-c",
            "10.77.0.2",
            "-p",
            "5303",
            "-u",
            "-b",
            "200M",
            "-l",
            "1400",
            "-t",
            "2",
        ])
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while capture.is_running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = Command::new("tshark")
        .args([
            "-r",
            pcap.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            "macc.opcode",
            "-e",
            "macc.pause_time",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let pauses: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        pauses
            .iter()
            .any(|l| l.starts_with("0x0001") && !l.ends_with("\t0")),
        "no PAUSE (XOFF) frame captured on h1's link: {text:?}"
    );
    let stats = net.stats();
    assert!(port(&stats, "p1")["pause_tx"].as_u64().unwrap() > 0);
}

#[test]
fn missing_interface_is_a_clear_error() {
    // Needs no privileges: the switch checks its ports before opening anything.
    let out = Command::new(cp_switch())
        .args(["--port", "qcnnosuch0", "--port", "qcnnosuch1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(
        err.contains("qcnnosuch0") && err.contains("no such interface"),
        "{err}"
    );
    let out = Command::new(cp_switch())
        .args(["--port", "p1,rate=fast"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("rate"));
}

#[test]
fn a_port_that_disappears_is_marked_down_and_comes_back() {
    if !can_run_network_tests("a_port_that_disappears_is_marked_down_and_comes_back") {
        return;
    }
    let mut net = Net::new("swgone", Ipv6::On);
    net.start_switch(["p1", "p2", "p3"], &[]);
    assert!(net.ping(1, 3));
    let mac = net.host(3).mac("eth0").unwrap();
    net.host(3).del_link("eth0").unwrap();
    // The other ports keep working, and p3 is reported down.
    assert!(net.ping(1, 2));
    let deadline = Instant::now() + Duration::from_secs(5);
    while port(&net.stats(), "p3")["up"] != Value::Bool(false) {
        assert!(Instant::now() < deadline, "p3 never marked down");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Cable it again: the switch picks the port up.
    net.lab
        .veth((net.host(3), "eth0"), (&net.sw, "p3"))
        .unwrap()
        .offloads_off()
        .unwrap()
        .up()
        .unwrap();
    // The same host plugged in again (same MAC, so h1's ARP cache stays right).
    net.host(3)
        .set_mac("eth0", &testbed::netns::format_mac(mac))
        .unwrap();
    net.host(3).add_addr("eth0", "10.77.0.3/24").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !net.ping(1, 3) {
        assert!(Instant::now() < deadline, "p3 never came back");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(port(&net.stats(), "p3")["up"], Value::Bool(true));
}

#[test]
fn sigterm_flushes_the_trace_and_exits_zero() {
    if !can_run_network_tests("sigterm_flushes_the_trace_and_exits_zero") {
        return;
    }
    let mut net = Net::new("swterm", Ipv6::On);
    let trace = net.dir.join("trace.jsonl");
    net.start_switch(
        ["p1", "p2,rate=10mbit", "p3"],
        &[
            "--trace",
            trace.to_str().unwrap(),
            "--trace-interval",
            "1ms",
        ],
    );
    // 20 Mb/s into a 10 Mb/s port for one second: the output queue fills.
    let _server = net
        .host(2)
        .spawn(&["iperf3", "-s", "-1", "-p", "5304"])
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    net.host(1)
        .exec(&[
            "iperf3",
            "-c",
            "10.77.0.2",
            "-p",
            "5304",
            "-u",
            "-b",
            "20M",
            "-t",
            "1",
        ])
        .unwrap();
    let status = net
        .daemon
        .as_mut()
        .unwrap()
        .stop(Duration::from_secs(5))
        .unwrap();
    assert!(status.success(), "cp-switch exited with {status}");
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines.iter().any(|l| l["type"] == "queues"),
        "no queue records in the trace"
    );
    assert!(!net.ctl_path().exists(), "control socket not removed");
}
