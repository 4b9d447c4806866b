//! `testbed run --mode netns` with the hosts' kernels in the loop (root only): iperf3 TCP and
//! UDP flows through `rp-agent` TAPs and a QCN `cp-switch`, and the TCP incast with
//! synchronized reads. Each run is a `testbed` child process that tears its lab down on exit
//! or error; each test checks that nothing is left behind.
#![allow(clippy::unwrap_used)]

mod common;

use common::netns::{assert_clean, assert_success, out_dir, prefix_of, summary, testbed};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;

use serde_json::Value;

/// One run at a time: each loads both CPUs.
static SERIAL: Mutex<()> = Mutex::new(());

/// One TCP and one UDP flow into r0 behind a 50 Mb/s QCN port (500 Mb/s ÷ S = 10).
const TCP_UDP: &str = r#"
seed = 1
duration = "60ms"

[scenario]
description = "iperf3 TCP + UDP through one QCN port"
bottleneck = "sw0-r0"
scale = 10

[scenario.netns]
duration = "6s"

[switch.sw0.bridge]
buffers = { output = "150KB", on_output_full = "drop" }
cp = { placement = "output", cnpv = [3], cp_queue_set_point = "26KB" }

[host.h0.agent]
priority = 3
[host.h1.agent]
priority = 3
[host.r0.agent]
priority = 3

[[link]]
a = "h0"
b = "sw0"
rate = "1gbit"
delay = "5us"
[[link]]
a = "h1"
b = "sw0"
rate = "1gbit"
delay = "5us"
[[link]]
a = "sw0"
b = "r0"
rate = "500mbit"
delay = "5us"

[[flow]]
name = "tcp0"
src = "h0"
dst = "r0"
pattern = "tcp"
[[flow]]
name = "udp0"
src = "h1"
dst = "r0"
pattern = "udp:200mbit"
"#;

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes the results directory on drop (also when the test fails).
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `TCP_UDP` into `dir` and runs it with `args`; the results go to `dir/res`.
fn run_tcp_udp(dir: &Path, args: &[&str]) -> Output {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("tcp-udp.toml");
    std::fs::write(&file, TCP_UDP).unwrap();
    testbed()
        .arg(&file)
        .args(args)
        .args(["--quiet", "--no-plots", "--out"])
        .arg(dir.join("res"))
        .stdout(Stdio::null())
        .output()
        .unwrap()
}

fn iperf3_missing(test: &str) -> bool {
    if Command::new("iperf3").arg("--version").output().is_err() {
        eprintln!("{test}: skipped: iperf3 is not installed");
        return true;
    }
    false
}

fn flow<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no flow {name} in {s}"))
}

#[test]
fn netns_iperf_tcp_and_udp_flows_through_qcn() {
    let test = "netns_iperf_tcp_and_udp_flows_through_qcn";
    if !testbed::netns::can_run_network_tests(test) || iperf3_missing(test) {
        return;
    }
    let _serial = serial();
    let dir = out_dir("run-netns-iperf", "tcpudp");
    let _cleanup = Cleanup(dir.clone());
    let out = run_tcp_udp(&dir, &[]);
    let res = dir.join("res");
    assert_success(&out);
    assert_clean(&prefix_of(&res).unwrap());
    let s = summary(&res);
    assert_eq!(s["mode"], "netns");
    let tcp = flow(&s, "tcp0");
    let udp = flow(&s, "udp0");
    let (t, u) = (
        tcp["mean_bps"].as_f64().unwrap(),
        udp["mean_bps"].as_f64().unwrap(),
    );
    eprintln!(
        "{test}: goodput tcp0 {:.1} Mb/s, udp0 {:.1} Mb/s; CNMs at tcp0's agent {}",
        t / 1e6,
        u / 1e6,
        tcp["cnm_rx"]
    );
    // A 50 Mb/s bottleneck: both flows move, together they never exceed it; the UDP flow asks
    // for 20 Mb/s of frames (19.4 Mb/s of payload).
    assert!(t > 2e6, "tcp0 goodput {t}");
    assert!((2e6..=21e6).contains(&u), "udp0 goodput {u}");
    assert!(t + u <= 52e6, "sum {} above the bottleneck", t + u);
    assert!(
        tcp["cnm_rx"].as_u64().unwrap() > 0,
        "no CNM reached the TCP source's agent: {tcp}"
    );
    let agent: Value =
        serde_json::from_str(&std::fs::read_to_string(res.join("stats-agent-h0.json")).unwrap())
            .unwrap();
    assert!(agent["cnm_rx"].as_u64().unwrap() > 0, "{agent}");
    assert!(res.join("iperf-tcp0.json").exists());
    assert!(res.join("report.md").exists());
}

#[test]
fn netns_incast_rounds_complete() {
    let test = "netns_incast_rounds_complete";
    if !testbed::netns::can_run_network_tests(test) {
        return;
    }
    let _serial = serial();
    let dir = out_dir("run-netns-iperf", "incast");
    let _cleanup = Cleanup(dir.clone());
    let out = testbed()
        .args([
            "incast",
            "--quiet",
            "--no-plots",
            // The default 10 s: with the hosts' RTOmin at 200 ms × S a round that ends in
            // timeouts takes 2 s or more.
            "--out",
        ])
        .arg(&dir)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert_success(&out);
    assert_clean(&prefix_of(&dir).unwrap());
    let r = testbed::run::incast::parse_client_output(
        &std::fs::read_to_string(dir.join("incast-0.jsonl")).unwrap(),
    );
    eprintln!(
        "{test}: {} rounds, goodput {:.1} Mb/s, per server {:?}",
        r.rounds.len(),
        r.goodput_bps() / 1e6,
        r.per_server
    );
    assert!(r.rounds.len() >= 2, "{r:?}");
    assert!(r.goodput_bps() > 0.0);
    // Every incast host's kernel had the scenario's RTOmin × S and Reno on its TAP route (the
    // batch the run gave `ip`, which fails the run if `ip` refuses it).
    for h in ["c0", "s00", "s15"] {
        let batch = std::fs::read_to_string(dir.join(format!("neigh-{h}.batch"))).unwrap();
        assert!(
            batch.contains("dev qcn0 proto kernel scope link src 10.77.")
                && batch.contains(" rto_min 2000ms initcwnd 2 congctl lock reno\n"),
            "{h}: {batch}"
        );
    }
    assert_eq!(r.error, None);
    let s = summary(&dir);
    let inc = flow(&s, "incast");
    assert!(inc["mean_bps"].as_f64().unwrap() > 0.0, "{inc}");
}

/// The same file in the simulator (no root needed): the bulk TCP sender and the UDP flow as a
/// CBR generator share the 500 Mb/s port.
#[test]
fn sim_runs_the_tcp_and_udp_scenario_too() {
    let dir = out_dir("run-netns-iperf", "sim");
    let _cleanup = Cleanup(dir.clone());
    let out = run_tcp_udp(&dir, &["--mode", "sim"]);
    assert_success(&out);
    let s = summary(&dir.join("res"));
    let t = flow(&s, "tcp0")["mean_bps"].as_f64().unwrap();
    let u = flow(&s, "udp0")["mean_bps"].as_f64().unwrap();
    // UDP gets its 200 Mb/s, TCP most of the remaining 300 Mb/s (payload of 1500-octet frames).
    assert!((190e6..=210e6).contains(&u), "udp0 {u}");
    assert!((200e6..=300e6).contains(&t), "tcp0 {t}");
}
