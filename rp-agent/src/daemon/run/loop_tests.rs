//! The real agent loop on in-memory pipes and a warped clock: no root, no TAP, no namespaces.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use cnm_proto::phy::clock::WarpClock;
use cnm_proto::phy::PipePort;
use cnm_proto::wire::{build_cnm, CnmParams, CpId};
use daemon_kit::reopen::{Opener, Unavailable};

use super::*;

type Plugs = Arc<Mutex<BTreeMap<String, PipePort>>>;

/// Opens the uplink from the test's plugs; nothing plugged is `Missing`.
struct PipeOpener(Plugs);

impl Opener for PipeOpener {
    type Port = PipePort;
    fn open(&mut self, name: &str) -> Result<PipePort, Unavailable> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.remove(name).ok_or(Unavailable::Missing)
    }
}

const HOST: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const PEER: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const SWITCH: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x5a]);
const T0: Instant = Instant::from_nanos(1_000_000_000);

/// An agent between a host pipe and a network pipe.
struct Lab {
    host: PipePort,
    net: Option<PipePort>,
    plugs: Plugs,
    term: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), DaemonError>>>,
    ctl_path: PathBuf,
    _ctl: CtlServer,
    _dir: tempfile::TempDir,
}

impl Lab {
    fn start(clock: WarpClock) -> Lab {
        let args = AgentArgs {
            uplink: Some("up0".into()),
            line_rate: Some(Rate::from_mbps(10)),
            seed: Some(3),
            ..Default::default()
        };
        let cfg = args.agent_config(Some(HOST)).unwrap();
        let agent = Agent::new(cfg, Rng::new(3)).unwrap();
        let (tap, host) = PipePort::pair_named(256, "tap0", "host");
        let (up, net) = PipePort::pair_named(256, "up0", "net");
        let dir = tempfile::Builder::new()
            .prefix("rpa-loop-")
            .tempdir()
            .unwrap();
        let ctl_path = dir.path().join("ctl.sock");
        let (req_tx, req_rx) = ctl::channel();
        let ctl = CtlServer::start(&ctl_path, req_tx, Command::parse).unwrap();
        let plugs: Plugs = Arc::default();
        let reopener = Reopener::start(
            PipeOpener(plugs.clone()),
            std::time::Duration::from_millis(1),
        )
        .unwrap();
        let term = Arc::new(AtomicBool::new(false));
        let t = term.clone();
        let thread = std::thread::spawn(move || {
            HostLoop::new(agent, tap, Some(up), "up0", reopener, clock, req_rx).run(&t)
        });
        Lab {
            host,
            net: Some(net),
            plugs,
            term,
            thread: Some(thread),
            ctl_path,
            _ctl: ctl,
            _dir: dir,
        }
    }

    fn net(&mut self) -> &mut PipePort {
        self.net.as_mut().expect("network end plugged")
    }

    fn ctl(&self, words: &str) -> Value {
        let words: Vec<String> = words.split_whitespace().map(str::to_owned).collect();
        daemon_kit::ctl::client(&self.ctl_path, &words).unwrap()
    }

    fn until(&self, words: &str, ok: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..5000 {
            let v = self.ctl(words);
            if ok(&v) {
                return v;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        panic!(
            "`{words}` never reached the expected state: {}",
            self.ctl(words)
        );
    }

    fn stop(mut self) {
        self.term.store(true, Ordering::Relaxed);
        let r = self.thread.take().unwrap().join().unwrap();
        assert!(r.is_ok(), "{r:?}");
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.term.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn host_frame(len: usize, tag: u8) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&PEER.0);
    f[6..12].copy_from_slice(&HOST.0);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    // The last octet marks the frame (the agent adds tags after the addresses).
    f[len - 1] = tag;
    f
}

fn mark(f: &[u8]) -> u8 {
    f[f.len() - 1]
}

/// A CNM from the switch about `sampled` (a frame as the agent sent it up), QntzFb 63.
fn cnm(sampled: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 128];
    let p = CnmParams {
        cp_mac: SWITCH,
        cpid: CpId::new(SWITCH, 11),
        qntz_fb: 63,
        q_offset: 10,
        q_delta: 2,
        cnm_priority: 6,
        default_priority: 0,
        max_msdu: 64,
    };
    let n = build_cnm(sampled, &p, &mut out).unwrap();
    out.truncate(n);
    out
}

fn recv_one(p: &mut PipePort) -> Vec<u8> {
    for _ in 0..10_000 {
        let mut got = None;
        p.recv_batch(1, &mut |f| got = Some(f.to_vec())).unwrap();
        if let Some(f) = got {
            return f;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    panic!("no frame arrived on {}", p.name());
}

fn let_loop_sleep(clock: &WarpClock, n: u64) {
    let target = clock.waits() + n;
    for _ in 0..10_000 {
        if clock.waits() >= target {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    panic!("the loop stopped sleeping");
}

#[test]
fn paces_host_frames_at_the_line_rate_and_reacts_to_a_cnm() {
    let clock = WarpClock::stopped(T0);
    let mut lab = Lab::start(clock.clone());
    for tag in [1, 2] {
        assert!(lab.host.send(&host_frame(1000, tag)).unwrap());
    }
    let first = recv_one(lab.net());
    // Sent up with the agent's priority tag: 4 octets more than the host's frame.
    assert_eq!(first.len(), 1004);
    assert_eq!(&first[12..14], &[0x81, 0x00]);
    let_loop_sleep(&clock, 20);
    assert_eq!(
        lab.net().pending(),
        0,
        "the second frame left before its time"
    );
    // 1004 octets at 10 Mb/s: 1004 × 8 / 10e6 s = 803.2 us after the first.
    let due = T0 + Duration::from_nanos(803_200);
    assert_eq!(clock.last_deadline(), Some(due));
    clock.set(due);
    assert_eq!(mark(&recv_one(lab.net())), 2);

    // A CNM with the largest feedback about the first frame: the flow gets a rate limiter
    // below the line rate (CR = 10 Mb/s × (1 − 63/128), 802.1Q-2011 32.13.1).
    lab.net().send(&cnm(&first)).unwrap();
    let flows = lab.until("show flows", |v| v[0]["cnm_rx"] == 1);
    let cr = flows[0]["cr_bps"].as_u64().unwrap();
    assert!(cr < 10_000_000, "{flows}");
    let stats = lab.ctl("stats");
    assert_eq!(stats["uplink"]["up"], true);
    assert_eq!(stats["uplink"]["io"]["tx_frames"], 2);
    lab.stop();
}

#[test]
fn survives_the_uplinks_loss_and_keeps_its_flows() {
    let clock = WarpClock::stopped(T0);
    let mut lab = Lab::start(clock.clone());
    assert!(lab.host.send(&host_frame(500, 1)).unwrap());
    let first = recv_one(lab.net());
    lab.net().send(&cnm(&first)).unwrap();
    let before = lab.until("show flows", |v| v[0]["cnm_rx"] == 1);
    // The uplink goes away.
    lab.net = None;
    let st = lab.until("stats", |v| v["uplink"]["down_reason"] == "missing");
    assert_eq!(st["uplink"]["up"], false);
    // The host keeps sending: the frame waits in its flow's queue, not lost.
    assert!(lab.host.send(&host_frame(500, 2)).unwrap());
    lab.until("show flows", |v| v[0]["queued_frames"] == 1);
    clock.advance(Duration::from_millis(2));
    let_loop_sleep(&clock, 10);
    // The uplink returns: the queued frame goes out on it, and the flow is the same one.
    let (up, net) = PipePort::pair_named(256, "up0", "net");
    lab.plugs.lock().unwrap().insert("up0".into(), up);
    lab.net = Some(net);
    lab.until("stats", |v| v["uplink"]["up"] == true);
    clock.advance(Duration::from_millis(2));
    assert_eq!(mark(&recv_one(lab.net())), 2);
    let after = lab.ctl("show flows");
    assert_eq!(after[0]["rpid"], before[0]["rpid"]);
    assert_eq!(after[0]["cnm_rx"], 1);
    assert!(after[0]["cr_bps"].as_u64().unwrap() < 10_000_000, "{after}");
    let st = lab.ctl("stats");
    assert_eq!(st["uplink"]["io"]["tx_frames"], 2, "{st}");
    lab.stop();
}

/// The agent's queue emptied by the line in the turn that held host frames (the loop woke
/// 10 ms late; 5 ms of catch-up at 100 Mb/s is 62.5 kB, more than the queue holds): the
/// held frames are offered again within a pacing quantum. The agent has nothing queued and
/// so no deadline, and the TAP is not read while frames are held; the loop used to sleep its
/// longest sleep, 10 ms, with the line idle.
#[test]
fn held_frames_with_room_again_are_offered_within_a_quantum() {
    let clock = WarpClock::stopped(T0);
    let cfg = AgentConfig {
        line_rate: Rate::from_mbps(100),
        wire_overhead: false,
        catch_up: Duration::from_millis(5),
        queue_limit: cnm_proto::Bytes::new(rp_agent::config::MAX_FRAME as u64),
        mac: Some(HOST),
        ..AgentConfig::default()
    };
    let agent = Agent::new(cfg, Rng::new(3)).unwrap();
    let (tap, mut host) = PipePort::pair_named(256, "tap0", "host");
    let (up, mut net) = PipePort::pair_named(256, "up0", "net");
    let reopener = Reopener::start(
        PipeOpener(Plugs::default()),
        std::time::Duration::from_secs(1),
    )
    .unwrap();
    let (_req_tx, req_rx) = ctl::channel();
    let mut lp = HostLoop::new(agent, tap, Some(up), "up0", reopener, clock.clone(), req_rx);
    for i in 0..32 {
        host.send(&host_frame(1500, i)).unwrap();
    }
    host.flush().unwrap();
    // The first turn fills the queue (six frames; one leaves at once) and holds the rest.
    lp.step().unwrap();
    let now = clock.now();
    let (deadline, read_tap) = lp.next_wake(now);
    assert!(!read_tap, "frames are held: the TAP waits");
    assert!(deadline > now);
    clock.advance(Duration::from_millis(10));
    lp.step().unwrap();
    let mut sent = 0;
    while net.recv_batch(64, &mut |_| sent += 1).unwrap() > 0 {}
    assert!(sent >= 6, "the line took {sent} frames");
    let now = clock.now();
    let (deadline, _) = lp.next_wake(now);
    assert!(
        deadline <= now + PACE_QUANTUM,
        "due {:?} after the turn, with room for the held frames",
        deadline.saturating_since(now)
    );
}
