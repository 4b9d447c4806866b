//! Real-network check of the congestion points: hosts h1, h2, h3 and a switch namespace `sw`
//! joined by veth pairs, the `cp-switch` daemon on the switch's three ports with the port to h3
//! shaped to 10 Mb/s, and a raw-socket sender in h1 sending priority-3 frames to h3 far above
//! that rate. CNMs must come back to h1, addressed to h1, with the output CP's CPID.
//!
//! Needs root (network namespaces); without it the test prints why and returns. Every name
//! carries the process id and a counter; a guard deletes the namespaces (and with them the
//! veths) on the way out, also when the test panics.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use cnm_proto::phy::{self, AfPacketConfig, AfPacketPort, Port};
use cnm_proto::wire::cnm::parse_frame;
use cnm_proto::wire::{CpId, EthernetAddress};

/// IEEE Std 802 local experimental EtherType 2: the test's data frames.
const TEST_ETHERTYPE: u16 = 0x88B6;
const H1: [u8; 6] = [0x02, 0, 0, 0, 0xc1, 0x01];
const H2: [u8; 6] = [0x02, 0, 0, 0, 0xc1, 0x02];
const H3: [u8; 6] = [0x02, 0, 0, 0, 0xc1, 0x03];
/// The switch ports' addresses; the first is also the bridge MAC in every CPID.
const SW: [[u8; 6]; 3] = [
    [0x02, 0x5c, 0, 0, 0, 0x01],
    [0x02, 0x5c, 0, 0, 0, 0x02],
    [0x02, 0x5c, 0, 0, 0, 0x03],
];

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

fn mac_str(m: [u8; 6]) -> String {
    EthernetAddress(m).to_string()
}

/// The namespaces of one test run; dropping it deletes them all (and their veths).
struct Topology {
    names: Vec<String>,
    /// Switch-side interface names, port 0..3.
    sw_ports: Vec<String>,
    /// Host-side interface names of h1, h2, h3.
    host_ifs: Vec<String>,
}

impl Topology {
    fn ns(&self, i: usize) -> &str {
        &self.names[i]
    }
    fn sw(&self) -> &str {
        &self.names[3]
    }

    /// h1, h2, h3, sw; veth hK ↔ sw port K−1.
    fn create(test: &str) -> Option<Topology> {
        if !is_root() {
            eprintln!("skipping {test}: needs root (network namespaces)");
            return None;
        }
        let seq = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let tag = format!("{}x{seq}", pid % 100_000);
        let mut topo = Topology {
            names: Vec::new(),
            sw_ports: Vec::new(),
            host_ifs: Vec::new(),
        };
        for role in ["h1", "h2", "h3", "sw"] {
            let name = format!("qcncp-{pid}-{seq}-{role}");
            if let Err(e) = ip(&["netns", "add", &name]) {
                eprintln!("skipping {test}: cannot create a namespace: {e}");
                return None;
            }
            topo.names.push(name);
            let _ = Command::new("ip")
                .args(["netns", "exec", topo.names.last().unwrap(), "sysctl", "-qw"])
                .arg("net.ipv6.conf.all.disable_ipv6=1")
                .status();
        }
        let sw = topo.sw().to_string();
        for k in 0..3 {
            let (s, h) = (format!("cs{tag}p{k}"), format!("ch{tag}h{k}"));
            assert!(s.len() <= 15 && h.len() <= 15, "{s} {h}");
            let host_ns = topo.ns(k).to_string();
            ip(&[
                "-n", &sw, "link", "add", &s, "type", "veth", "peer", "name", &h, "netns", &host_ns,
            ])
            .unwrap();
            ip(&["-n", &sw, "link", "set", &s, "address", &mac_str(SW[k])]).unwrap();
            ip(&["-n", &sw, "link", "set", &s, "up"]).unwrap();
            let hm = [H1, H2, H3][k];
            ip(&["-n", &host_ns, "link", "set", &h, "address", &mac_str(hm)]).unwrap();
            ip(&["-n", &host_ns, "link", "set", &h, "up"]).unwrap();
            topo.sw_ports.push(s);
            topo.host_ifs.push(h);
        }
        Some(topo)
    }

    /// Runs `body` in a thread that entered namespace `ns`.
    fn run_in<T: Send + 'static>(
        ns: &str,
        body: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let ns = ns.to_string();
        std::thread::spawn(move || {
            phy::netns::enter(&ns).unwrap();
            body()
        })
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = ip(&["netns", "del", n]);
        }
    }
}

/// The daemon; stopped (SIGTERM, then SIGKILL) and its socket removed on drop.
struct Daemon {
    child: Child,
    ctl: PathBuf,
    trace: PathBuf,
}

impl Daemon {
    /// SIGTERM, then waits up to 3 s for the exit (the trace is flushed on the way out).
    fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = StdInstant::now() + StdDuration::from_secs(3);
        while StdInstant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(StdDuration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.ctl);
        let _ = std::fs::remove_file(&self.trace);
    }
}

fn ctl(sock: &PathBuf, words: &[&str]) -> Option<serde_json::Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_cp-switch"))
        .arg("ctl")
        .arg("--socket")
        .arg(sock)
        .args(words)
        .arg("--json")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// A priority-tagged (VID 0, PCP 3) frame from h1 to h3 of 1000 octets carrying `seq`.
fn data_frame(seq: u32) -> Vec<u8> {
    let mut f = Vec::with_capacity(1000);
    f.extend_from_slice(&H3);
    f.extend_from_slice(&H1);
    f.extend_from_slice(&[0x81, 0x00, 0x60, 0x00]);
    f.extend_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(1000, 0x5a);
    f
}

#[test]
fn cnms_reach_the_sender_through_a_real_switch() {
    let Some(topo) = Topology::create("cnms_reach_the_sender_through_a_real_switch") else {
        return;
    };
    let ctl_path = std::env::temp_dir().join(format!(
        "qcncp-{}-{}.sock",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let trace_path = ctl_path.with_extension("jsonl");
    ip(&["-n", topo.sw(), "link", "set", "lo", "up"]).unwrap();
    let child = Command::new("ip")
        .args(["netns", "exec", topo.sw()])
        .arg(env!("CARGO_BIN_EXE_cp-switch"))
        .args(["--port", &topo.sw_ports[0]])
        .args(["--port", &topo.sw_ports[1]])
        .args(["--port", &format!("{},rate=10mbit", topo.sw_ports[2])])
        .args(["--cp", "output", "--cnpv", "3", "--cp-sample-base", "30KB"])
        .args(["--seed", "7"])
        .arg("--ctl")
        .arg(&ctl_path)
        .arg("--trace")
        .arg(&trace_path)
        // The namespace has its own loopback: a fixed port cannot collide.
        .args(["--metrics", "127.0.0.1:9464"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut daemon = Daemon {
        child,
        ctl: ctl_path.clone(),
        trace: trace_path.clone(),
    };
    let ready = StdInstant::now() + StdDuration::from_secs(10);
    while ctl(&daemon.ctl, &["stats"]).is_none() {
        assert!(StdInstant::now() < ready, "cp-switch did not come up");
        std::thread::sleep(StdDuration::from_millis(50));
    }

    // h3 announces itself so the switch forwards h1's frames to port 2 only.
    let h3_if = topo.host_ifs[2].clone();
    Topology::run_in(topo.ns(2), move || {
        let mut p = AfPacketPort::open(&h3_if, &AfPacketConfig::default()).unwrap();
        let mut f = Vec::new();
        f.extend_from_slice(&[0xff; 6]);
        f.extend_from_slice(&H3);
        f.extend_from_slice(&TEST_ETHERTYPE.to_be_bytes());
        f.resize(60, 0);
        assert!(p.send(&f).unwrap());
        p.flush().unwrap();
        std::thread::sleep(StdDuration::from_millis(50));
    })
    .join()
    .unwrap();

    // h1 sends ~400 Mb/s of priority-3 frames for up to 3 s and collects the CNMs it gets.
    let h1_if = topo.host_ifs[0].clone();
    let (sent, cnms) = Topology::run_in(topo.ns(0), move || {
        let mut p = AfPacketPort::open(&h1_if, &AfPacketConfig::default()).unwrap();
        let mut cnms: Vec<Vec<u8>> = Vec::new();
        let mut seq = 0u32;
        let start = StdInstant::now();
        while start.elapsed() < StdDuration::from_secs(3) && cnms.len() < 8 {
            for _ in 0..8 {
                if !p.send(&data_frame(seq)).unwrap() {
                    break;
                }
                seq += 1;
            }
            p.flush().unwrap();
            p.recv_batch(64, &mut |f| {
                if parse_frame(f).is_ok() {
                    cnms.push(f.to_vec());
                }
            })
            .unwrap();
            std::thread::sleep(StdDuration::from_micros(150));
        }
        // Late CNMs.
        let until = StdInstant::now() + StdDuration::from_millis(100);
        while StdInstant::now() < until {
            p.recv_batch(64, &mut |f| {
                if parse_frame(f).is_ok() {
                    cnms.push(f.to_vec());
                }
            })
            .unwrap();
            std::thread::sleep(StdDuration::from_millis(5));
        }
        (seq, cnms)
    })
    .join()
    .unwrap();

    let stats = ctl(&daemon.ctl, &["stats"]).unwrap();
    eprintln!(
        "h1 sent {sent} frames, received {} CNMs; cps: {}",
        cnms.len(),
        stats["cps"]
    );
    assert!(!cnms.is_empty(), "no CNM reached h1");
    let cpid = CpId::output(EthernetAddress(SW[0]), 2, 3);
    for b in &cnms {
        let (info, repr) = parse_frame(b).unwrap();
        assert_eq!(info.dst, EthernetAddress(H1));
        assert_eq!(info.src, EthernetAddress(SW[0]));
        let vlan = info.vlan.unwrap();
        assert_eq!((vlan.pcp, vlan.vid), (6, 0));
        assert_eq!(repr.cpid, cpid);
        assert!((1..=63).contains(&repr.qntz_fb));
        assert!(repr.q_offset > 0 || repr.q_delta > 0);
        assert_eq!(repr.encap_priority, 3);
        assert_eq!(repr.encap_dst, EthernetAddress(H3));
        assert_eq!(repr.encap_msdu.len(), 64);
        assert_eq!(&repr.encap_msdu[..2], &TEST_ETHERTYPE.to_be_bytes());
        let seq = u32::from_be_bytes(repr.encap_msdu[2..6].try_into().unwrap());
        assert_eq!(repr.encap_msdu, &data_frame(seq)[16..80]);
    }
    let hex: String = cnms[0].iter().map(|b| format!("{b:02x}")).collect();
    eprintln!("first CNM at h1: {hex}");

    // The daemon's view: the CP of (port 2, priority 3) sent them, all to h1.
    let cps = stats["cps"].as_array().unwrap();
    let cp = cps
        .iter()
        .find(|c| c["id"] == cpid.to_string().as_str())
        .unwrap();
    assert_eq!(cp["placement"], "output");
    assert!(cp["cnm_tx"].as_u64().unwrap() >= cnms.len() as u64);
    assert_eq!(cp["cnm_per_dst"][0]["mac"], mac_str(H1).as_str());
    let shown = ctl(&daemon.ctl, &["show", "cps"]).unwrap();
    assert_eq!(shown.as_array().unwrap().len(), 3);
    assert_eq!(shown[2]["id"], cpid.to_string().as_str());

    // The same counters in the Prometheus exposition.
    let scrape = |path: &str| {
        let o = Command::new("ip")
            .args([
                "netns",
                "exec",
                topo.sw(),
                "curl",
                "-s",
                "-w",
                "\n%{http_code}",
            ])
            .arg(format!("http://127.0.0.1:9464{path}"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let text = scrape("/metrics");
    assert!(text.ends_with("\n200"), "{text}");
    let text = text.trim_end_matches("200");
    let line = text
        .lines()
        .find(|l| {
            l.starts_with("cpswitch_cp_cnms_per_destination_total{")
                && l.contains(&format!("cp=\"{cpid}\""))
                && l.contains(&format!("destination=\"{}\"", mac_str(H1)))
        })
        .unwrap_or_else(|| panic!("no per-destination CNM series: {text}"));
    let n: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(n >= cnms.len() as u64, "{line}");
    assert!(text.contains("# TYPE cpswitch_cp_qlen_bytes gauge\n"));
    assert!(text.contains("cpswitch_port_rate_bytes_per_second{"));
    match daemon_kit::exposition::promtool_check(text) {
        None => eprintln!("promtool check skipped: promtool not installed"),
        Some(r) => r.unwrap(),
    }
    assert!(scrape("/").ends_with("\n404"));

    // The trace records every CNM as an event.
    daemon.stop();
    let trace = std::fs::read_to_string(&daemon.trace).unwrap();
    let events: Vec<serde_json::Value> = trace
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "cnm")
        .collect();
    assert_eq!(events.len() as u64, cp["cnm_tx"].as_u64().unwrap());
    assert_eq!(events[0]["cpid"], cpid.to_string().as_str());
    assert_eq!(events[0]["dst"], mac_str(H1).as_str());
    assert_eq!(events[0]["port"], 0);
    assert_eq!(events[0]["cp_port"], 2);
    drop(daemon);
    drop(topo);
}
