//! The TCP-like transport of the simulator in the incast setting (QCN-REFERENCE §5, FQCN
//! paper: 1 Gb/s, RTT 100 µs, 64 KB buffer, SRU 256 KB, RTOmin 200 ms, 1000-octet packets).
#![allow(clippy::unwrap_used)]

use cnm_proto::{Duration, Instant};
use testbed::sim::topo::Topology;

fn incast(n: usize, rounds: u32, cp: &str) -> String {
    let servers: Vec<String> = (0..n).map(|i| format!("\"s{i}\"")).collect();
    let mut s = format!(
        r#"
seed = 1
duration = "2s"
[output]
bottleneck = "sw0-client"
[switch.sw0.bridge]
buffers = {{ input = "64KB", output = "64KB", on_output_full = "drop" }}
cp = {{ placement = "{cp}", cnpv = [3], cp_queue_set_point = "14KB" }}
[host.client]
[[link]]
a = "sw0"
b = "client"
rate = "1gbit"
delay = "25us"
[[incast]]
client = "client"
servers = [{}]
sru = "256KB"
rounds = {rounds}
frame_len = 1000
rto_min = "200ms"
"#,
        servers.join(", ")
    );
    for i in 0..n {
        s += &format!("[host.s{i}]\n[[link]]\na = \"s{i}\"\nb = \"sw0\"\nrate = \"1gbit\"\ndelay = \"25us\"\n");
    }
    s
}

/// (rounds done, goodput bit/s, retransmission timeouts, switch drops) after `ms`.
fn run(text: &str, ms: u64) -> (u64, f64, u64, u64) {
    let topo = Topology::parse(text, "incast.toml").unwrap();
    let (mut sim, built) = topo.build().unwrap();
    sim.run_until(Instant::ZERO + Duration::from_millis(ms));
    let now = sim.now();
    let client = sim.node_id("client").unwrap();
    let (rounds, goodput) = sim
        .host(client)
        .unwrap()
        .tcp()
        .unwrap()
        .client_goodput(now)
        .unwrap();
    let timeouts = built
        .hosts
        .iter()
        .filter_map(|(_, id)| sim.host(*id)?.tcp().map(|t| t.timeouts()))
        .sum();
    let sw = sim.node_id("sw0").unwrap();
    let drops = sim
        .bridge(sw)
        .unwrap()
        .stats()
        .ports
        .iter()
        .map(|p| p.drops)
        .sum();
    println!(
        "{rounds} rounds, goodput {:.1} Mb/s, {timeouts} timeouts, {drops} drops",
        goodput / 1e6
    );
    (rounds, goodput, timeouts, drops)
}

#[test]
fn few_servers_finish_every_round_at_high_goodput() {
    let (rounds, goodput, timeouts, _) = run(&incast(4, 3, "off"), 500);
    assert_eq!(rounds, 3);
    assert_eq!(timeouts, 0);
    assert!(goodput > 800e6, "goodput {goodput}");
}

#[test]
fn many_servers_collapse_through_timeouts_but_stay_reliable() {
    // 16 × 256 KB into a 64 KB buffer: whole windows are lost, RTOmin idles the link.
    let (rounds, goodput, timeouts, drops) = run(&incast(16, 2, "off"), 1000);
    assert_eq!(rounds, 2, "every SRU is delivered despite {drops} drops");
    assert!(timeouts > 0);
    assert!(drops > 0);
    assert!(goodput < 500e6, "goodput {goodput}");
}
