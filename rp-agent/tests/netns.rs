//! Real-network tests: two namespaces joined by a veth pair. Run as root; skipped otherwise.
#![allow(clippy::unwrap_used)]

use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicU32 = AtomicU32::new(0);
const BIN: &str = env!("CARGO_BIN_EXE_rp-agent");

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn sh(args: &[&str]) -> Output {
    let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Two namespaces `a` and `b` joined by veth `ia` (in a) — `ib` (in b); deleted on drop, with
/// every child process started through it.
struct Net {
    a: String,
    b: String,
    ia: String,
    ib: String,
    id: u32,
    children: Vec<Child>,
}

impl Net {
    fn new() -> Net {
        let id = (std::process::id() % 100_000) * 10 + COUNTER.fetch_add(1, Ordering::Relaxed);
        let n = Net {
            a: format!("rpa{id}a"),
            b: format!("rpa{id}b"),
            ia: format!("rpa{id}x"),
            ib: format!("rpa{id}y"),
            id,
            children: Vec::new(),
        };
        sh(&["ip", "netns", "add", &n.a]);
        sh(&["ip", "netns", "add", &n.b]);
        sh(&[
            "ip", "link", "add", &n.ia, "type", "veth", "peer", "name", &n.ib,
        ]);
        sh(&["ip", "link", "set", &n.ia, "netns", &n.a]);
        sh(&["ip", "link", "set", &n.ib, "netns", &n.b]);
        for (ns, i) in [(&n.a, &n.ia), (&n.b, &n.ib)] {
            sh(&["ip", "-n", ns, "link", "set", i, "up"]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        n
    }

    fn mac(&self, ns: &str, ifname: &str) -> String {
        let o = sh(&["ip", "-n", ns, "-o", "link", "show", ifname]);
        let s = String::from_utf8_lossy(&o.stdout).to_string();
        let i = s.find("link/ether ").unwrap() + 11;
        s[i..i + 17].to_string()
    }

    fn spawn(&mut self, ns: &str, args: &[&str]) -> usize {
        let c = Command::new("ip")
            .args(["netns", "exec", ns, BIN])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        self.children.push(c);
        self.children.len() - 1
    }

    fn wait(&mut self, i: usize, limit: Duration) -> Output {
        let t = Instant::now();
        loop {
            if let Some(_st) = self.children[i].try_wait().unwrap() {
                break;
            }
            assert!(t.elapsed() < limit, "child {i} did not finish");
            std::thread::sleep(Duration::from_millis(50));
        }
        let c = &mut self.children[i];
        let mut out = Vec::new();
        let mut err = Vec::new();
        use std::io::Read;
        c.stdout.take().unwrap().read_to_end(&mut out).unwrap();
        c.stderr.take().unwrap().read_to_end(&mut err).unwrap();
        Output {
            status: c.wait().unwrap(),
            stdout: out,
            stderr: err,
        }
    }

    fn terminate(&mut self, i: usize) {
        let pid = self.children[i].id().to_string();
        // `ip netns exec` execs the binary: the child is the agent itself.
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.a]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.b]).status();
    }
}

/// The JSON document `gen -J` / `sink -J` write at the end.
fn json_doc(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {}",
            String::from_utf8_lossy(&o.stdout)
        )
    })
}

/// Checks that the intervals of `doc` follow each other from 0 to the run's end, so none is
/// missing (the last, partial one included), and that their per-flow counts add up to the
/// totals; returns the end of the last interval (seconds since the start).
fn intervals_cover_the_run(doc: &serde_json::Value, key: &str) -> f64 {
    let ivs = doc["intervals"].as_array().expect("intervals");
    assert!(!ivs.is_empty(), "no interval: {doc}");
    let mut t = 0.0;
    for iv in ivs {
        assert_eq!(iv["start"].as_f64().unwrap(), t, "a gap before {iv}");
        t = iv["end"].as_f64().unwrap();
    }
    for total in doc["end"]["streams"].as_array().unwrap() {
        let sum: u64 = ivs
            .iter()
            .flat_map(|iv| iv["streams"].as_array().unwrap())
            .filter(|s| s[key] == total[key])
            .map(|s| s["frames"].as_u64().unwrap())
            .sum();
        assert_eq!(
            sum,
            total["frames"].as_u64().unwrap(),
            "{total} vs intervals"
        );
    }
    t
}

#[test]
fn gen_to_sink_without_loss() {
    gen_to_sink(false);
}

#[test]
fn gen_to_sink_udp_five_tuple() {
    gen_to_sink(true);
}

fn gen_to_sink(udp: bool) {
    if !is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    let mut net = Net::new();
    let (a, b, ia, ib) = (net.a.clone(), net.b.clone(), net.ia.clone(), net.ib.clone());
    let dst = net.mac(&b, &ib);
    let sink = net.spawn(&b, &["sink", "--uplink", &ib, "--duration", "4s", "--json"]);
    std::thread::sleep(Duration::from_millis(700));
    let mut args = vec![
        "gen",
        "--uplink",
        &ia,
        "--dst",
        &dst,
        "--flows",
        "2",
        "--pattern",
        "cbr:10mbit",
        "--size",
        "1000",
        "--duration",
        "2s",
        "--line-rate",
        "100mbit",
        "--json",
    ];
    if udp {
        args.extend([
            "--flow-key",
            "five-tuple",
            "--ip-src",
            "10.1.0.1",
            "--ip-dst",
            "10.1.0.2",
        ]);
    }
    let gen = net.spawn(&a, &args);
    let g = net.wait(gen, Duration::from_secs(20));
    assert!(
        g.status.success(),
        "gen: {}",
        String::from_utf8_lossy(&g.stderr)
    );
    let s = net.wait(sink, Duration::from_secs(20));
    assert!(
        s.status.success(),
        "sink: {}",
        String::from_utf8_lossy(&s.stderr)
    );
    let (gdoc, sdoc) = (json_doc(&g), json_doc(&s));
    // Every interval is reported, the last partial one included: the generator's intervals
    // reach its 2-second duration, the sink's its 4 seconds, and the counts add up.
    assert!(intervals_cover_the_run(&gdoc, "id") >= 2.0, "{gdoc}");
    assert!(intervals_cover_the_run(&sdoc, "flow") >= 4.0, "{sdoc}");
    let sent = gdoc["end"]["streams"].as_array().unwrap();
    let got = sdoc["end"]["streams"].as_array().unwrap();
    assert_eq!(sent.len(), 2, "{gdoc}");
    assert_eq!(got.len(), 2, "{sdoc}");
    // One limiter for both flows with the (destination, priority) key, one each with UDP and
    // the five-tuple key.
    let rps = gdoc["end"]["rps"].as_array().unwrap();
    assert_eq!(rps.len(), if udp { 2 } else { 1 }, "{gdoc}");
    for flow in 0..2u64 {
        let tx = sent.iter().find(|v| v["id"] == flow).unwrap();
        let rx = got.iter().find(|v| v["flow"] == flow).unwrap();
        let n = tx["frames"].as_u64().unwrap();
        // 10 Mb/s of 1000-octet frames for 2 s is about 2500 frames; a busy machine sends
        // fewer (a late CBR source skips ahead), so only check that traffic flowed.
        assert!(n > 100, "{tx}");
        assert_eq!(rx["frames"].as_u64().unwrap(), n, "{rx} vs {tx}");
        assert_eq!(rx["lost"], 0);
        assert_eq!(rx["reordered"], 0);
    }
    let _ = net.id;
}

/// An agent in namespace `a` with a TAP at `SUBNET.1/24` on the uplink `ia`, the far side
/// `ib` at `SUBNET.2/24`; `extra` are more agent arguments. Waits for its control socket.
struct TapAgent {
    idx: usize,
    sock: String,
    tap: String,
    subnet: String,
}

impl TapAgent {
    fn start(net: &mut Net, extra: &[&str]) -> TapAgent {
        let (a, b, ia, ib) = (net.a.clone(), net.b.clone(), net.ia.clone(), net.ib.clone());
        let subnet = format!("10.{}.{}", 100 + net.id % 100, (net.id / 100) % 250);
        sh(&[
            "ip",
            "-n",
            &b,
            "addr",
            "add",
            &format!("{subnet}.2/24"),
            "dev",
            &ib,
        ]);
        let sock = std::env::temp_dir().join(format!("rpa-{}.sock", net.id));
        let sock_s = sock.to_string_lossy().to_string();
        let tap = format!("rpa{}t", net.id);
        let cidr = format!("{subnet}.1/24");
        let mut args = vec![
            "--uplink", &ia, "--tap", &tap, "--tap-ip", &cidr, "--ctl", &sock_s,
        ];
        args.extend_from_slice(extra);
        let idx = net.spawn(&a, &args);
        let t = Instant::now();
        while !sock.exists() {
            assert!(t.elapsed() < Duration::from_secs(10), "agent did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        TapAgent {
            idx,
            sock: sock_s,
            tap,
            subnet,
        }
    }

    /// `ping -c N` from the host to the far side; its output.
    fn ping(&self, net: &Net, n: u32) -> String {
        let ping = Command::new("ip")
            .args([
                "netns",
                "exec",
                &net.a,
                "ping",
                "-c",
                &n.to_string(),
                "-i",
                "0.2",
                "-W",
                "2",
            ])
            .arg(format!("{}.2", self.subnet))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&ping.stdout).to_string();
        assert!(ping.status.success(), "ping: {text}");
        text
    }

    /// SIGTERM; the agent must exit cleanly.
    fn stop(&self, net: &mut Net) {
        net.terminate(self.idx);
        let out = net.wait(self.idx, Duration::from_secs(10));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn tap_ping_across() {
    if !is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    let mut net = Net::new();
    let agent = TapAgent::start(&mut net, &["--line-rate", "100mbit"]);
    agent.ping(&net, 3);
    let flows = Command::new(BIN)
        .args(["ctl", "--socket", &agent.sock, "show", "flows", "--json"])
        .output()
        .unwrap();
    assert!(flows.status.success());
    let v: serde_json::Value = serde_json::from_slice(&flows.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert!(
        rows.iter().any(|r| r["tx_bytes"].as_u64().unwrap() > 0),
        "{v}"
    );
    assert!(rows
        .iter()
        .all(|r| r["state"] == "released" && r["priority"] == 3));
    agent.stop(&mut net);
}

/// The host's MAC on its uplink too (as a NIC's own address kept for the host): every frame
/// the far side sends to the host must reach the host stack once, through the TAP — not a
/// second time through the uplink's own stack. `ping` marks a second copy of a reply `DUP!`.
/// The uplink takes another address while the agent runs and gets its own back at exit.
#[test]
fn host_gets_each_frame_once_when_the_uplink_carries_its_mac() {
    if !is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    let mut net = Net::new();
    let (a, ia) = (net.a.clone(), net.ia.clone());
    let uplink_mac = net.mac(&a, &ia);
    let cfg = std::env::temp_dir().join(format!("rpa-{}-mac.toml", net.id));
    std::fs::write(
        &cfg,
        format!("mac = \"{uplink_mac}\"\nline_rate = \"100mbit\"\n"),
    )
    .unwrap();
    let agent = TapAgent::start(&mut net, &["--config", &cfg.to_string_lossy()]);
    let _ = std::fs::remove_file(&cfg);
    assert_eq!(
        net.mac(&a, &agent.tap),
        uplink_mac,
        "the TAP carries the host's MAC"
    );
    assert_ne!(
        net.mac(&a, &ia),
        uplink_mac,
        "the uplink has another address meanwhile"
    );
    let text = agent.ping(&net, 5);
    assert!(
        !text.contains("DUP!") && text.contains("5 received"),
        "every reply once: {text}"
    );
    agent.stop(&mut net);
    assert_eq!(
        net.mac(&a, &ia),
        uplink_mac,
        "the uplink's address is given back"
    );
}

/// A CNM sent from the far side to the daemon's host MAC about the frames it sends: the flow
/// gets a limiter at the decreased rate, its next frames carry a CN-TAG with its RPID, and the
/// trace records the CNM.
#[test]
fn daemon_applies_a_cnm_from_the_wire() {
    use cnm_proto::phy::{self, AfPacketConfig, AfPacketPort, Port};
    use cnm_proto::wire::{build_cnm, walk, CnmParams, CpId, EthernetAddress};
    if !is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    let mut net = Net::new();
    let (a, b, ib) = (net.a.clone(), net.b.clone(), net.ib.clone());
    let dir = std::env::temp_dir().join(format!("rpa-cnm-{}", net.id));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.jsonl");
    let conf = dir.join("agent.toml");
    // A long RP timer keeps the decreased rate in place while the test looks at it.
    std::fs::write(
        &conf,
        "line_rate = \"100mbit\"\n[rp]\nrpg_time_reset = \"60s\"\nrp_jitter = 0.0\n",
    )
    .unwrap();
    let tap_agent = TapAgent::start(
        &mut net,
        &[
            "--config",
            conf.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:9465",
        ],
    );
    let (agent, subnet) = (tap_agent.idx, tap_agent.subnet.clone());
    let sock = std::path::PathBuf::from(&tap_agent.sock);
    let b_mac: EthernetAddress = net.mac(&b, &ib).parse().unwrap();
    let bns = b.clone();
    let ibn = ib.clone();
    // The far side: answer the first frame for B with a CNM, then report the RPID of the next.
    let far = std::thread::spawn(move || -> Option<u16> {
        phy::netns::enter(&bns).unwrap();
        let mut port = AfPacketPort::open(&ibn, &AfPacketConfig::default()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(8);
        let mut sent_cnm = false;
        let mut rpid = None;
        let mut out = [0u8; 128];
        while Instant::now() < deadline && rpid.is_none() {
            let mut cnm = None;
            port.recv_batch(16, &mut |f| {
                let Ok(info) = walk(f) else { return };
                if info.dst != b_mac {
                    return;
                }
                if !sent_cnm && cnm.is_none() {
                    let p = CnmParams {
                        cp_mac: b_mac,
                        cpid: CpId::output(b_mac, 1, 3),
                        qntz_fb: 63,
                        q_offset: 100,
                        q_delta: 10,
                        cnm_priority: 6,
                        default_priority: 0,
                        max_msdu: 64,
                    };
                    let n = build_cnm(f, &p, &mut out).unwrap();
                    cnm = Some(n);
                } else if sent_cnm && info.rpid.is_some() {
                    rpid = info.rpid;
                }
            })
            .unwrap();
            if let Some(n) = cnm {
                assert!(port.send(&out[..n]).unwrap());
                port.flush().unwrap();
                sent_cnm = true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        rpid
    });
    std::thread::sleep(Duration::from_millis(300));
    // Frames towards B (pings after the CNM carry a CN-TAG, which B's stack does not know:
    // the switch's edge port would strip it; here only the frames matter).
    let _ = Command::new("ip")
        .args([
            "netns", "exec", &a, "ping", "-c", "8", "-i", "0.3", "-W", "1",
        ])
        .arg(format!("{subnet}.2"))
        .output()
        .unwrap();
    let rpid = far
        .join()
        .unwrap()
        .expect("no CN-tagged frame after the CNM");
    let flows = Command::new(BIN)
        .args([
            "ctl",
            "--socket",
            sock.to_str().unwrap(),
            "show",
            "flows",
            "--json",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&flows.stdout).unwrap();
    let f = v
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["dst"] == b_mac.to_string())
        .unwrap_or_else(|| panic!("no flow to B: {v}"));
    assert_eq!(f["cnm_rx"], 1, "{f}");
    // 100 Mb/s × (1 − 63/128).
    assert_eq!(f["cr_bps"], 50_781_250, "{f}");
    assert_eq!(f["tr_bps"], 100_000_000, "{f}");
    assert_eq!(f["rpid"].as_u64().unwrap(), u64::from(rpid));
    assert!(f["state"] == "fr" || f["state"] == "ai", "{f}");
    // The same flow in the Prometheus exposition (namespace-local loopback, so a fixed port).
    let scrape = |path: &str| {
        let o = sh(&[
            "ip",
            "netns",
            "exec",
            &a,
            "curl",
            "-s",
            "-w",
            "\n%{http_code}",
            &format!("http://127.0.0.1:9465{path}"),
        ]);
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let text = scrape("/metrics");
    assert!(text.ends_with("\n200"), "{text}");
    let text = text.trim_end_matches("200");
    let labels = format!(
        "{{destination=\"{b_mac}\",flow=\"{}\",priority=\"3\"}}",
        f["flow"]
    );
    assert!(
        text.contains(&format!("rpagent_flow_cnms_applied_total{labels} 1\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "rpagent_flow_current_rate_bytes_per_second{labels} 6347656.25\n"
        )),
        "{text}"
    );
    assert!(text.contains("rpagent_cnms_applied_total 1\n"), "{text}");
    match daemon_kit::exposition::promtool_check(text) {
        None => eprintln!("promtool check skipped: promtool not installed"),
        Some(r) => r.unwrap(),
    }
    assert!(scrape("/").ends_with("\n404"));
    net.terminate(agent);
    let out = net.wait(agent, Duration::from_secs(10));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains("\"event\":\"cnm\"") && l.contains("\"qntz_fb\":63")),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
