//! Frame-level cross-check of the simulator against the real network (issue: simulator, last
//! test): one scripted frame sequence is offered to the same `Bridge` configuration with the
//! same random generator twice — once in [`testbed::sim`] (virtual time, injector nodes) and
//! once to the `cp-switch` daemon in network namespaces (raw `AF_PACKET` injectors and
//! captures on three hosts) — and the two runs must make the same forwarding decisions and
//! send the same congestion notification messages.
//!
//! # Topology and script
//! Hosts h1, h2, h3 on switch ports 1, 2, 3 (in that order: the port index is part of the
//! CPID, IEEE 802.1Q-2011 33.4.5). Every test frame is VLAN-tagged (VID 10) with EtherType
//! 0x88B6 (IEEE 802 local experimental, 802-2014 clause 9.2.2) and carries a 32-bit frame id.
//! In order:
//! 1. h3 → broadcast (PCP 0): flooded to h1 and h2; the switch learns h3.
//! 2. h3 → 802.3x PAUSE with 0xFFFF quanta (802.3-2018 annex 31B): the switch's port 3 stops.
//! 3. h1 → an address nobody has (PCP 0): unknown unicast, flooded to h2 and h3.
//! 4. h2 → h1 (PCP 0): h1 was learned in step 3, so it goes to h1 only.
//! 5. Four rounds of h1 → h3 × 8 then h2 → h3 × 8, 1000-octet frames at PCP 3, the CNPV:
//!    they pile up in the paused output queue (port 3, priority 3), whose congestion point
//!    samples them and sends CNMs back to h1 and h2.
//! 6. h3 → PAUSE with 0 quanta: port 3 drains at its shaped 10 Mb/s.
//! 7. h3 → h1 and h3 → h2, h1 → h2 (PCP 0): all learned by now, unicast only.
//!
//! # Why the queue is gated by PAUSE, not merely shaped
//! A congestion point computes, at each sampled arrival, `Qoff = Q − Qeq`, `Qδ = Q − Qold` and
//! `Fb = −(Qoff + w·Qδ)` from the queue length `Q` at that instant (802.1Q-2011 32.8.6), and the
//! octets to the next sample are `base / (1 + ⌊QntzFb/8⌋)` with ±15 % jitter (32.8.5). With
//! a merely shaped port, `Q` at an arrival depends on how many frames left between arrivals:
//! on wall-clock timing in the namespaces, on virtual timing in the simulator. So not only
//! QntzFb, cnmQOffset and cnmQDelta would be timing-dependent, but through the interval also
//! *which* frames are sampled, and with them the encapsulated MSDU and the CNM's destination.
//! Only the first sample is timing-free. Pausing the port while the burst arrives makes `Q`
//! at every arrival the sum of the frames before it, a function of the arrival order alone;
//! the arrival order is fixed by sending one host's frames at a time and waiting (through
//! the daemon's control socket) until the switch has received them before the next host
//! sends. The random draws are the same because the daemon's `--seed` is chosen so that
//! its `Rng::new(seed)` is exactly the generator the simulator forks for the switch node, and
//! the bridge draws from it in the same order (FDB hash seed, CP initial countdowns, one draw
//! per sample); no other queue of priority 3 receives frames, so no other CP draws.
//! Consequently *every* CNM field is compared exactly, and the CNM frames must be equal byte
//! for byte. What stays timing-dependent and is not compared: arrival instants, and the
//! order in which frames of *different* queues reach a host (a CNM from the control queue vs
//! data frames); per host, data frames and CNMs are compared as two separate sequences.
//!
//! # Differences between the worlds that do not affect the comparison
//! The simulator's ports get their links' rates (1 Gb/s to h1 and h2, where the daemon's
//! ports are unshaped) and the bridge's default shaper accounting (preamble, FCS, padding),
//! where the daemon on veth counts the frame's own octets; both only change when frames
//! leave. The bridge MAC (the MAC part of the CPID and, plus the port index, each port's
//! CNM source address) is set to the same value in both: the namespace interfaces p1-p3 get
//! exactly the addresses the bridge derives in the simulator.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;

use cnm_proto::phy::{self, AfPacketConfig, AfPacketPort, Port};
use cnm_proto::rng::Rng;
use cnm_proto::wire::{self, build_pause_frame, EtherType, EthernetAddress, MacControlRepr};
use cnm_proto::{Bytes, Duration, Instant, Rate};
use cp_switch::{BridgeConfig, Placement};
use serde_json::Value;
use testbed::netns::{can_run_network_tests, format_mac, Child, Lab, Namespace};
use testbed::sim::{LinkSpec, SimBuilder, SimNode};

/// Root seed of the simulator; the daemon gets the switch node's derived seed.
const SEED: u64 = 0x5EED_C0DE;
/// Bridge MAC; port `i` (0-based) gets this plus `i` in the last two octets.
const BRIDGE_MAC: [u8; 6] = [0x02, 0xc0, 0, 0, 0, 0x10];
/// VLAN of every test frame.
const VID: u16 = 10;
/// EtherType of the test frames (IEEE 802 local experimental 1).
const TEST_ETHERTYPE: u16 = 0x88B6;
/// Marks a test frame's payload.
const MAGIC: &[u8; 4] = b"XCHK";
/// The CNPV (the congestion point's priority).
const CNPV: u8 = 3;
/// Congestion point set point Qeq and sampling base, scaled down so that a 64 KB burst
/// triggers about a dozen samples.
const SET_POINT: u64 = 16_000;
const SAMPLE_BASE: u64 = 6_000;
/// Rounds of the burst and frames per host per round.
const ROUNDS: usize = 4;
const PER_ROUND: usize = 8;
const BIG: usize = 1000;
const SMALL: usize = 100;

fn host_mac(h: usize) -> EthernetAddress {
    EthernetAddress([0x02, 0, 0, 0, 0x01, h as u8])
}

fn unknown_mac() -> EthernetAddress {
    EthernetAddress([0x02, 0, 0, 0, 0x01, 0x99])
}

fn port_mac(i: usize) -> EthernetAddress {
    let mut m = BRIDGE_MAC;
    m[5] += i as u8;
    EthernetAddress(m)
}

/// The seed whose `Rng::new` equals the generator the simulator gives node 0 (the switch):
/// `Rng::new(seed).fork(0)` is `Rng::new(next_u64() ^ 0)`.
fn switch_seed(root: u64) -> u64 {
    Rng::new(root).next_u64()
}

fn test_frame(src: usize, dst: EthernetAddress, pcp: u8, id: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&host_mac(src).0);
    f.extend_from_slice(&0x8100u16.to_be_bytes());
    f.extend_from_slice(&((u16::from(pcp) << 13) | VID).to_be_bytes());
    f.extend_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(&id.to_be_bytes());
    f.resize(len, 0);
    f
}

fn pause_frame(h: usize, quanta: u16) -> Vec<u8> {
    let mut buf = [0u8; 64];
    let n = build_pause_frame(host_mac(h), &MacControlRepr::Pause { quanta }, &mut buf).unwrap();
    buf[..n].to_vec()
}

/// The frame id of a test frame (after the VLAN tag), if it is one.
fn frame_id(frame: &[u8]) -> Option<u32> {
    let info = wire::walk(frame).ok()?;
    if info.ethertype != EtherType::from(TEST_ETHERTYPE) {
        return None;
    }
    id_in_payload(frame.get(info.payload_offset..)?)
}

/// The id in a payload that starts with the magic (also the encapsulated MSDU of a CNM, minus
/// its EtherType).
fn id_in_payload(p: &[u8]) -> Option<u32> {
    if p.len() < 8 || &p[..4] != MAGIC {
        return None;
    }
    Some(u32::from_be_bytes([p[4], p[5], p[6], p[7]]))
}

/// What the network must settle before the next step may start (namespaces only; the
/// simulator just leaves time between steps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Settle {
    /// The switch received every frame sent so far.
    Received,
    /// ... and port 3 reports that it is paused by its peer.
    Paused,
    /// ... and every output queue is empty (after the XON).
    Drained,
}

/// One step of the script: host `host` (1-3) sends `frames` back to back.
#[derive(Clone, Debug)]
struct Step {
    host: usize,
    frames: Vec<Vec<u8>>,
    settle: Settle,
}

/// The script of the module documentation, steps 1-7.
fn script() -> Vec<Step> {
    let mut steps = Vec::new();
    let mut id = 0u32;
    let mut next = || {
        id += 1;
        id
    };
    let b = EthernetAddress::BROADCAST;
    steps.push(Step {
        host: 3,
        frames: vec![test_frame(3, b, 0, next(), SMALL)],
        settle: Settle::Received,
    });
    steps.push(Step {
        host: 3,
        frames: vec![pause_frame(3, 0xFFFF)],
        settle: Settle::Paused,
    });
    steps.push(Step {
        host: 1,
        frames: vec![test_frame(1, unknown_mac(), 0, next(), SMALL)],
        settle: Settle::Received,
    });
    steps.push(Step {
        host: 2,
        frames: vec![test_frame(2, host_mac(1), 0, next(), SMALL)],
        settle: Settle::Received,
    });
    for _ in 0..ROUNDS {
        for h in [1, 2] {
            let frames = (0..PER_ROUND)
                .map(|_| test_frame(h, host_mac(3), CNPV, next(), BIG))
                .collect();
            steps.push(Step {
                host: h,
                frames,
                settle: Settle::Received,
            });
        }
    }
    steps.push(Step {
        host: 3,
        frames: vec![pause_frame(3, 0)],
        settle: Settle::Drained,
    });
    steps.push(Step {
        host: 3,
        frames: vec![
            test_frame(3, host_mac(1), 0, next(), SMALL),
            test_frame(3, host_mac(2), 0, next(), SMALL),
        ],
        settle: Settle::Received,
    });
    steps.push(Step {
        host: 1,
        frames: vec![test_frame(1, host_mac(2), 0, next(), SMALL)],
        settle: Settle::Drained,
    });
    steps
}

fn bridge_config() -> BridgeConfig {
    let mut cfg = BridgeConfig {
        mac: EthernetAddress(BRIDGE_MAC),
        ..BridgeConfig::default()
    };
    cfg.cp.placement = Placement::Output;
    cfg.cp.cnpv = vec![CNPV];
    cfg.cp.cp_queue_set_point = Bytes::new(SET_POINT);
    cfg.cp.cp_min_sample_base = Bytes::new(SAMPLE_BASE);
    cfg
}

/// A CNM as compared between the worlds.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CnmSeen {
    da: EthernetAddress,
    sa: EthernetAddress,
    pcp: Option<u8>,
    vid: Option<u16>,
    cpid: u64,
    qntz_fb: u8,
    q_offset: i16,
    q_delta: i16,
    encap_priority: u8,
    encap_dst: EthernetAddress,
    /// The sampled frame's id, read from the encapsulated MSDU.
    sampled: Option<u32>,
    msdu: Vec<u8>,
    bytes: Vec<u8>,
}

/// What the hosts received in one world.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Outcome {
    /// Per host, the ids of the test frames received, in order of arrival.
    data: BTreeMap<usize, Vec<u32>>,
    /// Per host, the CNMs received, in order of arrival.
    cnms: BTreeMap<usize, Vec<CnmSeen>>,
    /// Frames neither test frames nor CNMs (per host): must be none.
    other: BTreeMap<usize, usize>,
}

impl Outcome {
    fn record(&mut self, host: usize, frame: &[u8]) {
        if let Some(id) = frame_id(frame) {
            self.data.entry(host).or_default().push(id);
            return;
        }
        if let Ok((info, c)) = wire::cnm::parse_frame(frame) {
            let msdu = c.encap_msdu.to_vec();
            // The MSDU starts at the sampled frame's EtherType.
            let sampled = msdu.get(2..).and_then(id_in_payload);
            let seen = CnmSeen {
                da: info.dst,
                sa: info.src,
                pcp: info.vlan.map(|v| v.pcp),
                vid: info.vlan.map(|v| v.vid),
                cpid: c.cpid.0,
                qntz_fb: c.qntz_fb,
                q_offset: c.q_offset,
                q_delta: c.q_delta,
                encap_priority: c.encap_priority,
                encap_dst: c.encap_dst,
                sampled,
                msdu,
                bytes: frame.to_vec(),
            };
            self.cnms.entry(host).or_default().push(seen);
            return;
        }
        *self.other.entry(host).or_default() += 1;
    }

    fn ids(&self, host: usize) -> Vec<u32> {
        self.data.get(&host).cloned().unwrap_or_default()
    }

    fn cnm_list(&self, host: usize) -> &[CnmSeen] {
        self.cnms.get(&host).map(|v| &v[..]).unwrap_or(&[])
    }

    fn summary(&self) -> String {
        let mut s = String::new();
        for h in 1..=3 {
            s += &format!("h{h}: data {:?}\n", self.ids(h));
            for c in self.cnm_list(h) {
                s += &format!(
                    "h{h}: CNM da {} sa {} pcp {:?} cpid {:016x} fb {} qoff {} qdelta {} \
                     prio {} encap_dst {} sampled {:?}\n",
                    c.da,
                    c.sa,
                    c.pcp,
                    c.cpid,
                    c.qntz_fb,
                    c.q_offset,
                    c.q_delta,
                    c.encap_priority,
                    c.encap_dst,
                    c.sampled
                );
            }
        }
        s
    }
}

// ---------------------------------------------------------------------------------------
// The simulator half.

/// A host that sends scripted frames at scripted instants and keeps what it receives.
#[derive(Debug)]
struct ScriptedHost {
    script: VecDeque<(Instant, Vec<u8>)>,
    got: Vec<Vec<u8>>,
}

impl SimNode for ScriptedHost {
    fn handle_frame(&mut self, _now: Instant, _port: usize, frame: &[u8]) {
        self.got.push(frame.to_vec());
    }

    fn poll(&mut self, now: Instant, tx: &mut dyn FnMut(usize, &[u8]) -> bool) {
        while let Some((t, f)) = self.script.front() {
            if *t > now || !tx(0, f) {
                return;
            }
            self.script.pop_front();
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.script.front().map(|(t, _)| *t)
    }
}

/// Virtual time between steps: far longer than a step takes to reach the switch, so the
/// arrival order is the script's order; after a drain step long enough for 64 KB at 10 Mb/s.
fn step_gap(settle: Settle) -> Duration {
    match settle {
        Settle::Drained => Duration::from_millis(200),
        _ => Duration::from_micros(200),
    }
}

fn run_sim(steps: &[Step], seed: u64) -> Outcome {
    let mut per_host: Vec<VecDeque<(Instant, Vec<u8>)>> = vec![VecDeque::new(); 4];
    let mut t = Instant::ZERO + Duration::from_micros(100);
    for s in steps {
        for f in &s.frames {
            per_host[s.host].push_back((t, f.clone()));
        }
        t += step_gap(s.settle);
    }
    let mut b = SimBuilder::with_custom_nodes(seed);
    // The switch must be node 0: the daemon's seed is derived for that position.
    let sw = b.switch("sw", bridge_config());
    let mut hosts = Vec::new();
    for (h, script) in per_host.into_iter().enumerate().skip(1) {
        let id = b.node(format!("h{h}"), move |_rng, _| ScriptedHost {
            script,
            got: Vec::new(),
        });
        hosts.push(id);
    }
    // Link order = port order: h1 → port 0, h2 → port 1, h3 → port 2 (shaped to 10 Mb/s).
    for (i, &h) in hosts.iter().enumerate() {
        let rate = if i == 2 {
            Rate::from_mbps(10)
        } else {
            Rate::from_gbps(1)
        };
        b.link(sw, h, LinkSpec::new(rate, Duration::from_micros(1)));
    }
    let mut sim = b.build().unwrap();
    assert!(
        sim.run_until_idle(t + Duration::from_secs(1)),
        "simulation did not go idle"
    );
    let mut out = Outcome::default();
    for (i, &h) in hosts.iter().enumerate() {
        for f in &sim.custom(h).unwrap().got {
            out.record(i + 1, f);
        }
    }
    out
}

/// Checks the decisions the script is built to provoke, in either world.
fn check_expected(o: &Outcome, world: &str) {
    let ctx = || format!("{world}:\n{}", o.summary());
    let burst: Vec<u32> = (4..4 + (ROUNDS * PER_ROUND * 2) as u32).collect();
    let after = 4 + (ROUNDS * PER_ROUND * 2) as u32;
    // h1: the broadcast (1), h2's frame to the learned h1 (3), h3's frame after learning.
    assert_eq!(o.ids(1), vec![1, 3, after], "{}", ctx());
    // h2: the broadcast, h1's unknown unicast (2), h3's and h1's frames after learning.
    assert_eq!(o.ids(2), vec![1, 2, after + 1, after + 2], "{}", ctx());
    // h3: the unknown unicast (held by the PAUSE with the burst), then the whole burst in order.
    let mut h3 = o.ids(3);
    h3.sort_unstable();
    let mut want = vec![2];
    want.extend(&burst);
    assert_eq!(h3, want, "{}", ctx());
    assert!(
        o.other.is_empty(),
        "unexpected frames {:?}\n{}",
        o.other,
        ctx()
    );
    assert!(o.cnm_list(3).is_empty(), "{}", ctx());
    for h in [1, 2] {
        assert!(!o.cnm_list(h).is_empty(), "no CNM reached h{h}\n{}", ctx());
        for c in o.cnm_list(h) {
            assert_eq!(c.da, host_mac(h), "{}", ctx());
            assert_eq!(c.sa, port_mac(h - 1), "{}", ctx());
            assert_eq!(c.encap_priority, CNPV, "{}", ctx());
            assert_eq!(c.encap_dst, host_mac(3), "{}", ctx());
            // CPID: bridge MAC, index port × 8 + priority (port 2 = h3's).
            assert_eq!(
                c.cpid,
                u64::from_be_bytes([0x02, 0xc0, 0, 0, 0, 0x10, 0, 2 * 8 + 3])
            );
            let id = c.sampled.unwrap();
            assert!(burst.contains(&id), "{}", ctx());
        }
    }
}

#[test]
fn simulator_makes_the_scripted_decisions() {
    let steps = script();
    let a = run_sim(&steps, SEED);
    check_expected(&a, "simulator");
    let b = run_sim(&steps, SEED);
    assert_eq!(a, b, "the simulator is not deterministic");
    // The comparison with the namespaces is not vacuous: another seed samples other frames
    // (the ±15 % jitter of every sampling interval comes from the switch's generator), while
    // the forwarding decisions stay the same.
    let c = run_sim(&steps, SEED + 1);
    check_expected(&c, "simulator, other seed");
    assert_eq!(a.data, c.data);
    let sampled = |o: &Outcome| -> Vec<Option<u32>> {
        (1..=3)
            .flat_map(|h| o.cnm_list(h).iter().map(|c| c.sampled).collect::<Vec<_>>())
            .collect()
    };
    assert_ne!(
        sampled(&a),
        sampled(&c),
        "the seed does not change the sampling"
    );
    eprintln!("simulator outcome:\n{}", a.summary());
}

// ---------------------------------------------------------------------------------------
// The namespace half.

fn cp_switch() -> PathBuf {
    let p = testbed::bins::path("cp-switch");
    assert!(
        p.exists(),
        "{} is not built (run `cargo build --workspace` first)",
        p.display()
    );
    p
}

fn ctl_json(ctl: &Path, words: &[&str]) -> Result<Value, String> {
    let out = Command::new(cp_switch())
        .arg("ctl")
        .arg("--socket")
        .arg(ctl)
        .args(words)
        .arg("--json")
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

enum Cmd {
    Send(Vec<Vec<u8>>),
    Stop,
}

/// A thread inside host namespace `ns`: sends what it is told on `eth0` and keeps every frame
/// it receives, until told to stop.
fn host_thread(ns: String, cmds: mpsc::Receiver<Cmd>, ready: mpsc::Sender<()>) -> Vec<Vec<u8>> {
    phy::netns::enter(&ns).unwrap();
    let mut port = AfPacketPort::open("eth0", &AfPacketConfig::default()).unwrap();
    ready.send(()).unwrap();
    let mut got = Vec::new();
    let fd = port.raw_fd().unwrap();
    loop {
        match cmds.try_recv() {
            Ok(Cmd::Send(frames)) => {
                for f in &frames {
                    while !port.send(f).unwrap() {
                        port.flush().unwrap();
                    }
                }
                port.flush().unwrap();
            }
            Ok(Cmd::Stop) | Err(mpsc::TryRecvError::Disconnected) => break,
            Err(mpsc::TryRecvError::Empty) => {}
        }
        while port.recv_batch(64, &mut |f| got.push(f.to_vec())).unwrap() > 0 {}
        phy::poll::wait(&[fd], Some(Duration::from_millis(1))).unwrap();
    }
    while port.recv_batch(64, &mut |f| got.push(f.to_vec())).unwrap() > 0 {}
    got
}

/// The namespaces, the daemon and the host threads; tears everything down on drop.
struct Net {
    lab: Lab,
    dir: PathBuf,
    daemon: Option<Child>,
    cmds: Vec<mpsc::Sender<Cmd>>,
    threads: Vec<std::thread::JoinHandle<Vec<Vec<u8>>>>,
}

impl Drop for Net {
    fn drop(&mut self) {
        for c in &self.cmds {
            let _ = c.send(Cmd::Stop);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.daemon.take();
        let _ = self.lab.teardown();
        if std::thread::panicking() {
            eprintln!(
                "cp-switch log:\n{}",
                std::fs::read_to_string(self.dir.join("cp-switch.log")).unwrap_or_default()
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn port_stat<'a>(stats: &'a Value, name: &str) -> &'a Value {
    stats["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap()
}

fn out_queue<'a>(stats: &'a Value, port: &str, prio: u64) -> &'a Value {
    stats["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["port"] == port && q["priority"] == prio && q["kind"] == "output")
        .unwrap()
}

fn run_netns(steps: &[Step]) -> Outcome {
    let lab = Lab::new("xchk").unwrap();
    let dir = std::env::temp_dir().join(lab.prefix());
    std::fs::create_dir_all(&dir).unwrap();
    let mut net = Net {
        lab,
        dir,
        daemon: None,
        cmds: Vec::new(),
        threads: Vec::new(),
    };
    let sw = net.lab.ns("sw").unwrap();
    sw.disable_ipv6().unwrap();
    let mut hosts: Vec<Namespace> = Vec::new();
    for i in 1..=3 {
        let h = net.lab.ns(&format!("h{i}")).unwrap();
        // No kernel chatter (router solicitations, MLD, DAD) on the test links.
        h.disable_ipv6().unwrap();
        net.lab
            .veth((&h, "eth0"), (&sw, &format!("p{i}")))
            .unwrap()
            .offloads_off()
            .unwrap();
        sw.set_mac(&format!("p{i}"), &format_mac(port_mac(i - 1).0))
            .unwrap();
        sw.set_up(&format!("p{i}")).unwrap();
        h.set_up("eth0").unwrap();
        hosts.push(h);
    }

    // The daemon, with the simulator's switch generator and the same CP settings.
    let ctl = net.dir.join("ctl.sock");
    let log = std::fs::File::create(net.dir.join("cp-switch.log")).unwrap();
    let mut cmd = sw.command(cp_switch()).unwrap();
    cmd.args(["--port", "p1", "--port", "p2", "--port", "p3,rate=10mbit"])
        .arg("--ctl")
        .arg(&ctl)
        .args(["--seed", &switch_seed(SEED).to_string()])
        .args(["--cp", "output", "--cnpv", &CNPV.to_string()])
        .args(["--cp-set-point", &format!("{SET_POINT}B")])
        .args(["--cp-sample-base", &format!("{SAMPLE_BASE}B")]);
    cmd.stdout(log.try_clone().unwrap()).stderr(log);
    let mut child = sw.spawn_command(cmd).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while ctl_json(&ctl, &["stats"]).is_err() {
        assert!(child.is_running(), "cp-switch exited");
        assert!(
            std::time::Instant::now() < deadline,
            "cp-switch did not come up"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    net.daemon = Some(child);

    for h in &hosts {
        let (ctx, crx) = mpsc::channel();
        let (rtx, rrx) = mpsc::channel();
        let ns = h.name().unwrap().to_string();
        net.threads
            .push(std::thread::spawn(move || host_thread(ns, crx, rtx)));
        rrx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        net.cmds.push(ctx);
    }

    let stats = ctl_json(&ctl, &["stats"]).unwrap();
    let names = ["p1", "p2", "p3"];
    let mut expect_rx: Vec<u64> = names
        .iter()
        .map(|n| port_stat(&stats, n)["rx_frames"].as_u64().unwrap())
        .collect();
    let burst = (ROUNDS * PER_ROUND * 2) as u64;
    for s in steps {
        if s.settle == Settle::Drained && s.host == 3 {
            // About to release the PAUSE: check that it held — nothing of the burst has left
            // port 3 yet, so every sample saw a queue that only grew.
            let st = ctl_json(&ctl, &["stats"]).unwrap();
            let q = out_queue(&st, "p3", u64::from(CNPV));
            assert_eq!(q["enqueued"].as_u64(), Some(burst), "{q}");
            assert_eq!(
                q["dequeued"].as_u64(),
                Some(0),
                "port 3 sent while paused: {q}"
            );
        }
        net.cmds[s.host - 1]
            .send(Cmd::Send(s.frames.clone()))
            .unwrap();
        expect_rx[s.host - 1] += s.frames.len() as u64;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let st = ctl_json(&ctl, &["stats"]).unwrap();
            let received = names
                .iter()
                .zip(&expect_rx)
                .all(|(n, &want)| port_stat(&st, n)["rx_frames"].as_u64().unwrap() >= want);
            let settled = received
                && match s.settle {
                    Settle::Received => true,
                    Settle::Paused => port_stat(&st, "p3")["paused_by_peer"] != 0,
                    Settle::Drained => st["queues"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(|q| q["bytes"] == 0),
                };
            if settled {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "step {s:?} did not settle: {st}"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    // Let the last frames reach the host threads.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let mut out = Outcome::default();
    for c in &net.cmds {
        c.send(Cmd::Stop).unwrap();
    }
    let threads: Vec<_> = net.threads.drain(..).collect();
    for (i, t) in threads.into_iter().enumerate() {
        for f in t.join().unwrap() {
            out.record(i + 1, &f);
        }
    }
    let cps = ctl_json(&ctl, &["stats"]).unwrap();
    eprintln!("daemon CPs: {}", cps["cps"]);
    out
}

#[test]
fn simulator_and_namespaces_agree_frame_by_frame() {
    if !can_run_network_tests("simulator_and_namespaces_agree_frame_by_frame") {
        return;
    }
    let steps = script();
    let sim = run_sim(&steps, SEED);
    let real = run_netns(&steps);
    eprintln!(
        "simulator:\n{}\nnamespaces:\n{}",
        sim.summary(),
        real.summary()
    );
    check_expected(&real, "namespaces");
    // Forwarding: every host received the same test frames in the same order.
    for h in 1..=3 {
        assert_eq!(sim.ids(h), real.ids(h), "data frames at h{h} differ");
    }
    // CNMs: the same ones, field by field, then byte for byte.
    for h in 1..=3 {
        let (a, b) = (sim.cnm_list(h), real.cnm_list(h));
        assert_eq!(a.len(), b.len(), "number of CNMs at h{h} differs");
        for (x, y) in a.iter().zip(b) {
            assert_eq!(
                (
                    x.da,
                    x.sa,
                    x.pcp,
                    x.vid,
                    x.cpid,
                    x.encap_priority,
                    x.encap_dst
                ),
                (
                    y.da,
                    y.sa,
                    y.pcp,
                    y.vid,
                    y.cpid,
                    y.encap_priority,
                    y.encap_dst
                ),
                "CNM header at h{h}"
            );
            assert_eq!(x.sampled, y.sampled, "sampled frame at h{h}");
            assert_eq!(x.msdu, y.msdu, "encapsulated MSDU at h{h}");
            assert_eq!(
                (x.qntz_fb, x.q_offset, x.q_delta),
                (y.qntz_fb, y.q_offset, y.q_delta),
                "feedback of the CNM for frame {:?} at h{h}",
                x.sampled
            );
            assert_eq!(x.bytes, y.bytes, "CNM bytes at h{h}");
        }
    }
    assert_eq!(sim, real);
}
