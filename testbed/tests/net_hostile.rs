//! Hostile input on a real network (issue "hold under hostile input"): while a good UDP flow
//! h1 → h2 runs through `cp-switch`, an attacker h3 on its own port sends, as fast as its
//! `AF_PACKET` ring lets it, a mix of malformed frames (reserved VID 0xFFF, truncated VLAN
//! headers, broken LLDPDUs), spoofed CNMs with random source MACs and CPIDs and QntzFb 63,
//! PAUSE and PFC frames with the largest quanta, and a MAC flood (random source addresses).
//!
//! Asserted: the switch survives (no panic, still answers, exits 0 on SIGTERM); every attack
//! frame is accounted for (received and counted by the switch, or dropped by the kernel in the
//! switch's receive ring or the veth pair, each counted); the malformed, PAUSE/PFC and
//! reserved-group counters saw their share; the FDB stayed within its bound; the good flow
//! delivered at least [`DELIVERY_MARGIN`] of what it delivered in a clean run just before on
//! the same lab; the switch's resident memory grew by less than [`RSS_GROWTH_MAX`].
//!
//! Run as root; otherwise the test prints why it skips.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cnm_proto::phy::{AfPacketConfig, AfPacketPort, Port};
use cnm_proto::rng::Rng;
use cnm_proto::wire::{build_cnm, CnmParams, CpId, EthernetAddress};
use common::switch_lab::{counter, ip, port, Ipv6, Net};
use serde_json::Value;
use testbed::netns::{can_run_network_tests, Child};

/// The good flow under attack delivers at least this share of its clean-run delivery. The
/// attacker takes one of the machine's two CPUs, so the switch, iperf3 and the kernel share
/// the other: a margin, not a timing assertion.
const DELIVERY_MARGIN: f64 = 0.90;
/// The switch's resident set may grow by at most this much under the attack (bounded FDB,
/// bounded queues: the attack must not grow memory).
const RSS_GROWTH_MAX: u64 = 32 << 20;
/// A paused or flapping port costs an unrelated flow at most 2 % of its delivery.
const ISOLATION_MARGIN: f64 = 0.98;
/// The good flow's rate and length.
const GOOD_RATE: &str = "20M";
const GOOD_SECS: u64 = 4;
/// The FDB bound the switch runs with (its default, `FdbConfig::max_entries`).
const FDB_MAX: u64 = 8192;

/// One test at a time: each one loads both CPUs (an attacker at full speed, or a flood), and
/// two side by side would starve each other's good flow.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The lab of every test here: `common::switch_lab`'s, without IPv6 (its neighbour discovery
/// would add frames nobody counted as sent), the switch on p1-p3.
fn lab(tag: &str, extra: &[&str]) -> Net {
    let mut net = Net::new(tag, Ipv6::Off);
    net.start_switch(["p1", "p2", "p3"], extra);
    net
}

impl Net {
    /// The switch's resident set, from /proc.
    fn rss(&self) -> u64 {
        let pid = self.daemon.as_ref().unwrap().id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        kb * 1024
    }

    /// Pings between h1 and h2 both ways, so the switch has learned both.
    fn learn(&self) {
        for (a, b) in [(1, 2), (2, 1)] {
            assert!(self.ping(a, b), "ping h{a} -> {}", ip(b));
        }
    }

    /// One good UDP flow h1 → h2; returns the receiver's delivered share (1 − loss).
    fn good_flow(&self) -> f64 {
        let mut server = self.hosts[1].command("iperf3").unwrap();
        server
            .args(["-s", "-1", "-p", "5301"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _server = self.hosts[1].spawn_command(server).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let out = self.hosts[0]
            .exec_output(&[
                "iperf3",
                "-c",
                "10.77.0.2",
                "-p",
                "5301",
                "-u",
                "-b",
                GOOD_RATE,
                "-l",
                "1400",
                "-t",
                &GOOD_SECS.to_string(),
                "-J",
            ])
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let sum = &v["end"]["sum"];
        let (packets, lost) = (sum["packets"].as_f64(), sum["lost_packets"].as_f64());
        match (packets, lost) {
            (Some(p), Some(l)) if p > 0.0 => 1.0 - l / p,
            _ => panic!(
                "iperf3 gave no result: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }

    /// The good flow while h3 attacks with `kinds`: the attack starts `lead` before the flow and
    /// stops when it ends; with `broadcasts`, h1 also sends [`broadcast_pings`] during the flow.
    /// Returns the flow's delivered share and the attack frames sent per kind.
    fn good_flow_under_attack(
        &self,
        kinds: &[Kind],
        lead: Duration,
        broadcasts: bool,
    ) -> (f64, [u64; 7]) {
        let stop = AtomicBool::new(false);
        let h3 = self.hosts[2].name().unwrap().to_string();
        let h1 = self.hosts[0].mac("eth0").unwrap();
        std::thread::scope(|s| {
            let attacker = s.spawn(|| attack(&h3, h1, kinds, &stop));
            std::thread::sleep(lead);
            let _b = broadcasts.then(|| broadcast_pings(self));
            let d = self.good_flow();
            stop.store(true, Ordering::Relaxed);
            (d, attacker.join().unwrap())
        })
    }
}

/// The kinds of attack frames, sent in rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// VLAN tag with the reserved VID 0xFFF (802.1Q Table 9-2): malformed.
    ReservedVid,
    /// A frame ending inside its VLAN tag: malformed.
    TruncatedTag,
    /// An LLDPDU whose CN TLV runs past the frame: malformed.
    BrokenLldp,
    /// A CNM to h1 from a random source MAC and CPID, QntzFb 63.
    SpoofedCnm,
    /// 802.3x PAUSE with quanta 0xFFFF.
    Pause,
    /// 802.1Qbb PFC, every priority, quanta 0xFFFF.
    Pfc,
    /// A random source MAC to a random unknown unicast destination (flooded).
    MacFlood,
}

const KINDS: [Kind; 7] = [
    Kind::ReservedVid,
    Kind::TruncatedTag,
    Kind::BrokenLldp,
    Kind::SpoofedCnm,
    Kind::Pause,
    Kind::Pfc,
    Kind::MacFlood,
];

fn random_unicast(rng: &mut Rng) -> [u8; 6] {
    let mut m = rng.next_u64().to_be_bytes();
    m[2] = (m[2] & 0xfe) | 0x02; // locally administered unicast
    [m[2], m[3], m[4], m[5], m[6], m[7]]
}

fn attack_frame(kind: Kind, rng: &mut Rng, me: [u8; 6], h1: [u8; 6], buf: &mut Vec<u8>) {
    buf.clear();
    match kind {
        Kind::ReservedVid => {
            buf.extend_from_slice(&h1);
            buf.extend_from_slice(&me);
            buf.extend_from_slice(&[0x81, 0x00, 0x6f, 0xff, 0x08, 0x00]);
            buf.resize(64, 0);
        }
        Kind::TruncatedTag => {
            buf.extend_from_slice(&h1);
            buf.extend_from_slice(&me);
            buf.extend_from_slice(&[0x81, 0x00, 0x60]);
        }
        Kind::BrokenLldp => {
            buf.extend_from_slice(&[0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e]);
            buf.extend_from_slice(&me);
            buf.extend_from_slice(&[0x88, 0xcc]);
            // An organisational TLV that claims 300 octets.
            buf.extend_from_slice(&[0xfe | 1, 0x2c, 0x00, 0x80, 0xc2, 0x08]);
            buf.resize(64, 0);
        }
        Kind::SpoofedCnm => {
            let src = random_unicast(rng);
            let mut sampled = Vec::with_capacity(64);
            sampled.extend_from_slice(&random_unicast(rng));
            sampled.extend_from_slice(&h1);
            sampled.extend_from_slice(&[0x81, 0x00, 0x60, 0x01, 0x08, 0x00]);
            sampled.resize(64, 0);
            // The sampled frame came from h1: the CNM goes back to h1.
            let mut sampled_from_h1 = sampled.clone();
            sampled_from_h1[..6].copy_from_slice(&src);
            sampled_from_h1[6..12].copy_from_slice(&h1);
            let p = CnmParams {
                cp_mac: EthernetAddress(src),
                cpid: CpId::new(EthernetAddress(src), (rng.next_u64() & 0xffff) as u16),
                qntz_fb: 63,
                q_offset: 100,
                q_delta: 100,
                cnm_priority: 6,
                default_priority: 0,
                max_msdu: 64,
            };
            buf.resize(256, 0);
            let n = build_cnm(&sampled_from_h1, &p, buf).unwrap();
            buf.truncate(n);
        }
        Kind::Pause => {
            buf.extend_from_slice(&[0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);
            buf.extend_from_slice(&me);
            buf.extend_from_slice(&[0x88, 0x08, 0x00, 0x01, 0xff, 0xff]);
            buf.resize(60, 0);
        }
        Kind::Pfc => {
            buf.extend_from_slice(&[0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);
            buf.extend_from_slice(&me);
            buf.extend_from_slice(&[0x88, 0x08, 0x01, 0x01, 0x00, 0xff]);
            for _ in 0..8 {
                buf.extend_from_slice(&[0xff, 0xff]);
            }
            buf.resize(60, 0);
        }
        Kind::MacFlood => {
            buf.extend_from_slice(&random_unicast(rng));
            buf.extend_from_slice(&random_unicast(rng));
            buf.extend_from_slice(&[0x08, 0x00]);
            buf.resize(64, 0);
        }
    }
}

/// The attacker: sends the rotation from h3 until `stop`; returns frames handed to the kernel
/// per kind.
fn attack(ns: &str, h1: [u8; 6], kinds: &[Kind], stop: &AtomicBool) -> [u64; 7] {
    cnm_proto::phy::netns::enter(ns).unwrap();
    let cfg = AfPacketConfig {
        rx_blocks: 1,
        tx_blocks: 64,
        ..AfPacketConfig::default()
    };
    let mut port = AfPacketPort::open("eth0", &cfg).unwrap();
    let me = cnm_proto::phy::iface::mac("eth0").unwrap();
    let mut rng = Rng::new(0x5eed);
    let mut per_kind = [0u64; 7];
    let mut buf = Vec::with_capacity(256);
    let mut k = 0;
    while !stop.load(Ordering::Relaxed) {
        let mut queued = [0u64; 7];
        loop {
            attack_frame(kinds[k], &mut rng, me, h1, &mut buf);
            match port.send(&buf) {
                Ok(true) => {
                    queued[k] += 1;
                    k = (k + 1) % kinds.len();
                }
                Ok(false) => break,
                Err(e) => panic!("attacker send: {e}"),
            }
        }
        port.flush().unwrap();
        for (a, q) in per_kind.iter_mut().zip(queued) {
            *a += q;
        }
    }
    // Let the ring drain before the caller reads the counters.
    std::thread::sleep(Duration::from_millis(200));
    port.flush().unwrap();
    per_kind
}

#[test]
fn hostile_input_is_counted_and_the_good_flow_keeps_its_delivery() {
    let test = "hostile_input_is_counted_and_the_good_flow_keeps_its_delivery";
    if !can_run_network_tests(test) {
        return;
    }
    let _serial = serial();
    if Command::new("iperf3").arg("--version").output().is_err() {
        panic!("{test}: iperf3 is not installed (scripts/install-deps.sh installs it)");
    }
    let mut net = lab("hostile", &[]);
    // Learn h1 and h2 (ARP through the switch), then a clean run for the reference.
    net.learn();
    let clean = net.good_flow();
    let rss0 = net.rss();
    let before = net.stats();
    let h3_tx0 =
        counter(&net.hosts[2], "eth0", "tx_packets") + counter(&net.hosts[2], "eth0", "tx_dropped");
    let sw_drop0 = counter(&net.sw, "p3", "rx_dropped");

    // Let the attack build up, then run the good flow through it.
    let (attacked, per_kind) =
        net.good_flow_under_attack(&KINDS, Duration::from_millis(500), false);
    std::thread::sleep(Duration::from_millis(300));
    // h3's counters first: whatever it sends later cannot then be missing at the switch.
    let h3_tx = counter(&net.hosts[2], "eth0", "tx_packets")
        + counter(&net.hosts[2], "eth0", "tx_dropped")
        - h3_tx0;
    let h3_dropped = counter(&net.hosts[2], "eth0", "tx_dropped");
    // Frames still in the switch's receive ring are neither counted nor dropped yet: wait
    // (bounded) until the switch has taken them.
    let accounted = |v: &Value| {
        let p = port(v, "p3");
        p["rx_frames"].as_u64().unwrap_or(0) + p["io"]["rx_dropped"].as_u64().unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut after = net.stats();
    let target =
        accounted(&before) + h3_tx - (h3_dropped + counter(&net.sw, "p3", "rx_dropped") - sw_drop0);
    while accounted(&after) < target && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        after = net.stats();
    }
    let rss1 = net.rss();
    let sent: u64 = per_kind.iter().sum();
    eprintln!(
        "{test}: attack frames {sent} ({per_kind:?}); good-flow delivery clean {clean:.4}, \
         attacked {attacked:.4}; RSS {rss0} -> {rss1} B"
    );

    // Accounted for: received by the switch on p3, or dropped by the kernel (the switch's
    // receive ring, the veth pair either side), each counted somewhere.
    let (p3a, p3b) = (port(&after, "p3"), port(&before, "p3"));
    let delta = |k: &str| p3a[k].as_u64().unwrap_or(0) - p3b[k].as_u64().unwrap_or(0);
    let ring = p3a["io"]["rx_dropped"].as_u64().unwrap_or(0)
        - p3b["io"]["rx_dropped"].as_u64().unwrap_or(0);
    // h3's interface counts what it was handed: the attack plus any frame of its own kernel.
    let veth = h3_dropped + counter(&net.sw, "p3", "rx_dropped") - sw_drop0;
    let rx = delta("rx_frames");
    eprintln!("{test}: p3 after: {p3a}");
    assert!(
        (sent..sent + 64).contains(&h3_tx),
        "h3 handed its interface {h3_tx} frames for {sent} attack frames"
    );
    // The kernel itself may lose a runt frame between the veth ends without counting it (seen:
    // one in a few million): a handful is allowed, never more frames than were sent.
    let accounted = rx + ring + veth;
    assert!(
        accounted <= h3_tx && h3_tx - accounted <= 8,
        "every frame h3 sent ({h3_tx}) is received ({rx}) or dropped by the kernel (ring {ring}, \
         veth {veth})"
    );
    assert!(rx > 0, "the switch saw the attack");
    // Each category was counted by its counter (kinds rotate, so each has about 1/7 of rx).
    let share = rx / 7 / 2;
    let malformed = p3a["drop_reasons"]["malformed"].as_u64().unwrap()
        - p3b["drop_reasons"]["malformed"].as_u64().unwrap();
    for (k, n) in [
        ("malformed", malformed),
        ("pause_rx", delta("pause_rx")),
        ("flooded", delta("flooded")),
    ] {
        assert!(n >= share, "{k}: {n}, about {} expected", rx / 7);
    }
    // The FDB stayed within its bound (the flood's stations beyond it were refused, counted)
    // while the known hosts kept forwarding.
    let fdb = after["fdb"]["dynamic_entries"].as_u64().unwrap();
    assert!(fdb <= FDB_MAX, "FDB {fdb} entries over its bound {FDB_MAX}");
    assert!(
        after["fdb"]["refused_full"].as_u64().unwrap() > 0,
        "{}",
        after["fdb"]
    );
    assert!(
        attacked >= DELIVERY_MARGIN * clean,
        "good flow delivered {attacked:.4} under attack against {clean:.4} clean"
    );
    assert!(
        rss1 < rss0 + RSS_GROWTH_MAX,
        "RSS grew from {rss0} to {rss1} B under the attack"
    );
    // Still alive and answering, and a clean exit on SIGTERM.
    let mut child = net.daemon.take().unwrap();
    assert!(child.is_running(), "cp-switch died: {}", net.log());
    let status = child.stop(Duration::from_secs(5)).unwrap();
    assert!(status.success(), "cp-switch exit {status:?}: {}", net.log());
}

/// Broadcast pings from h1 (flooded to every port, so also towards h3) while the good flow
/// runs: what made one paused port take h1's whole input buffer.
fn broadcast_pings(net: &Net) -> Child {
    let mut cmd = net.hosts[0].command("ping").unwrap();
    cmd.args(["-b", "-q", "-i", "0.002", "-s", "1000", "10.77.0.255"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    net.hosts[0].spawn_command(cmd).unwrap()
}

/// A paused port costs an unrelated flow at most [`ISOLATION_MARGIN`] of its delivery: h3
/// floods PAUSE (or PFC) frames so that its port never transmits, h1 sends broadcasts (whose
/// copies for h3 pile up behind the pause) and the good flow h1 → h2; with drop-tail and with
/// PFC lossless operation (where the switch's storm watchdog must also trip).
#[test]
fn a_paused_port_does_not_cost_an_unrelated_flow() {
    let test = "a_paused_port_does_not_cost_an_unrelated_flow";
    if !can_run_network_tests(test) {
        return;
    }
    let _serial = serial();
    for (mode, kind, extra) in [
        ("drop-tail", Kind::Pause, &[][..]),
        ("pfc", Kind::Pfc, &["--lossless", "pfc"][..]),
    ] {
        let net = lab(&format!("iso_{}", mode.replace('-', "_")), extra);
        net.learn();
        let clean = {
            let _b = broadcast_pings(&net);
            net.good_flow()
        };
        let (paused, sent) = net.good_flow_under_attack(&[kind], Duration::from_millis(300), true);
        let st = net.stats();
        let p3 = port(&st, "p3");
        eprintln!(
            "{test} ({mode}): {} pause frames; good flow clean {clean:.4}, p3 paused {paused:.4}; \
             p3 pause_rx {} pause_storms {}",
            sent.iter().sum::<u64>(),
            p3["pause_rx"],
            p3["pause_storms"]
        );
        assert!(
            p3["pause_rx"].as_u64().unwrap() > 0,
            "the switch saw the pauses"
        );
        if mode == "pfc" {
            assert!(
                p3["pause_storms"].as_u64().unwrap() > 0,
                "the storm watchdog tripped"
            );
        }
        assert!(
            paused >= ISOLATION_MARGIN * clean,
            "{mode}: the good flow delivered {paused:.4} with p3 paused against {clean:.4}"
        );
    }
}

/// Ten flaps of an unrelated port (its veth deleted and re-created) while the good flow runs
/// cost it at most [`ISOLATION_MARGIN`] of its delivery: port loss and return must not stall
/// the other ports.
#[test]
fn a_flapping_port_does_not_cost_an_unrelated_flow() {
    let test = "a_flapping_port_does_not_cost_an_unrelated_flow";
    if !can_run_network_tests(test) {
        return;
    }
    let _serial = serial();
    let net = lab("flap", &[]);
    net.learn();
    let clean = net.good_flow();
    let flapped = std::thread::scope(|s| {
        let flows = s.spawn(|| net.good_flow());
        std::thread::sleep(Duration::from_millis(500));
        for _ in 0..10 {
            net.sw.del_link("p3").unwrap();
            std::thread::sleep(Duration::from_millis(100));
            net.lab
                .veth((&net.hosts[2], "eth0"), (&net.sw, "p3"))
                .unwrap()
                .offloads_off()
                .unwrap()
                .up()
                .unwrap();
            std::thread::sleep(Duration::from_millis(200));
        }
        flows.join().unwrap()
    });
    let st = net.stats();
    eprintln!("{test}: good flow clean {clean:.4}, with 10 flaps {flapped:.4}");
    assert!(
        flapped >= ISOLATION_MARGIN * clean,
        "the good flow delivered {flapped:.4} while p3 flapped against {clean:.4}"
    );
    assert!(st["ports"].as_array().unwrap().len() == 3, "{st}");
}

/// A frame longer than the egress interface's MTU is refused by the kernel: the switch counts
/// it as a `tx_refused` drop (and `io.tx_oversize`), never as transmitted, and frames that fit
/// keep flowing.
#[test]
fn frames_over_the_egress_mtu_are_drops_not_transmissions() {
    let test = "frames_over_the_egress_mtu_are_drops_not_transmissions";
    if !can_run_network_tests(test) {
        return;
    }
    let _serial = serial();
    let mut net = Net::new("mtu", Ipv6::Off);
    // h2's side of the link carries at most 1000-octet payloads.
    net.sw.set_mtu("p2", 1000).unwrap();
    net.hosts[1].set_mtu("eth0", 1000).unwrap();
    net.start_switch(["p1", "p2", "p3"], &[]);
    net.learn();
    let before = net.stats();
    // Five 1200-octet pings: 1242-octet frames that p2 cannot send (h1's MTU is 1500).
    let _ = net.hosts[0].exec_output(&[
        "ping",
        "-c",
        "5",
        "-i",
        "0.05",
        "-W",
        "1",
        "-s",
        "1200",
        "10.77.0.2",
    ]);
    let after = net.stats();
    let (a, b) = (port(&after, "p2"), port(&before, "p2"));
    let refused = a["drop_reasons"]["tx_refused"].as_u64().unwrap()
        - b["drop_reasons"]["tx_refused"].as_u64().unwrap();
    let oversize =
        a["io"]["tx_oversize"].as_u64().unwrap() - b["io"]["tx_oversize"].as_u64().unwrap();
    let tx = a["tx_frames"].as_u64().unwrap() - b["tx_frames"].as_u64().unwrap();
    let io_tx = a["io"]["tx_frames"].as_u64().unwrap() - b["io"]["tx_frames"].as_u64().unwrap();
    eprintln!("{test}: p2 refused {refused}, oversize {oversize}, tx {tx}, io tx {io_tx}");
    assert_eq!(refused, 5, "{a}");
    assert_eq!(oversize, 5, "{a}");
    assert_eq!(
        tx, io_tx,
        "the bridge counts as sent only what the interface took: {a}"
    );
    // What fits still goes through.
    let ok = net.hosts[0]
        .exec_output(&[
            "ping",
            "-c",
            "2",
            "-i",
            "0.2",
            "-W",
            "2",
            "-s",
            "900",
            "10.77.0.2",
        ])
        .unwrap()
        .status
        .success();
    assert!(ok, "a ping that fits the MTU");
}
