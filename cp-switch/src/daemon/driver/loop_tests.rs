//! The real dataplane loop on in-memory pipes and a warped clock: no root, no namespaces.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use cnm_proto::phy::clock::WarpClock;
use cnm_proto::phy::PipePort;
use daemon_kit::reopen::{Opener, Unavailable};

use super::*;

/// What the test opener hands out per name: a pipe end, or a reason it cannot.
type Plugs = Arc<Mutex<BTreeMap<String, Result<PipePort, Unavailable>>>>;

/// Opens ports from the test's [`Plugs`]; an unknown name is `Missing`.
struct PipeOpener(Plugs);

impl Opener for PipeOpener {
    type Port = PipePort;
    fn open(&mut self, name: &str) -> Result<PipePort, Unavailable> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match m.remove(name) {
            Some(Ok(p)) => Ok(p),
            Some(Err(why)) => {
                m.insert(name.to_owned(), Err(why.clone()));
                Err(why)
            }
            None => Err(Unavailable::Missing),
        }
    }
}

/// A switch on pipes: `hosts[i]` is the far end of port `i`.
struct Lab {
    hosts: Vec<Option<PipePort>>,
    plugs: Plugs,
    term: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), DaemonError>>>,
    ctl_path: PathBuf,
    _ctl: CtlServer,
    _dir: tempfile::TempDir,
}

impl Lab {
    fn start(ports: &[&str], clock: WarpClock) -> Lab {
        Self::start_with_term(ports, clock, Arc::new(AtomicBool::new(false)))
    }

    /// As [`Lab::start`], with the ingress link-rate stage on, frames arriving when the loop
    /// reads them (the pipes' stamps are not on the warped clock).
    fn start_staged(ports: &[&str], clock: WarpClock) -> Lab {
        let term = Arc::new(AtomicBool::new(false));
        let arrivals = Some(Arrivals::ReadTime);
        Self::start_with(ports, clock, term, arrivals, |_| {}, None, Duration::ZERO)
    }

    /// As [`Lab::start_staged`], frames arriving at their pipe stamps (on the warped clock),
    /// after `preload` has given the hosts' ends their first frames; the clock moves on by
    /// `lead` once the switch exists, so the loop finds them all waiting on its first look,
    /// `lead` after its start.
    fn start_stamped(
        ports: &[&str],
        clock: WarpClock,
        lead: Duration,
        preload: impl FnOnce(&mut [Option<PipePort>]),
    ) -> Lab {
        let term = Arc::new(AtomicBool::new(false));
        let arrivals = Some(Arrivals::LoopStamps);
        Self::start_with(
            ports,
            clock,
            term,
            arrivals,
            preload,
            Some(lead),
            Duration::ZERO,
        )
    }

    /// Ports given without `cnd=` face CN-aware stations that do not speak LLDP
    /// (`interior-ready`): these tests are about the loop, and an `auto` port's LLDPDUs would
    /// be extra frames on every pipe (the test of `auto` ports asks for them explicitly).
    fn start_with_term(ports: &[&str], clock: WarpClock, term: Arc<AtomicBool>) -> Lab {
        Self::start_with(ports, clock, term, None, |_| {}, None, Duration::ZERO)
    }

    /// The loop over `ports`, its ingress stage with `staged` arrivals (`None`: off), the
    /// hosts' ends given their first frames by `preload`, the clock moved on by `lead` once
    /// the switch exists, running at most once per `quantum` (zero: no wake quantum).
    fn start_with(
        ports: &[&str],
        clock: WarpClock,
        term: Arc<AtomicBool>,
        staged: Option<Arrivals>,
        preload: impl FnOnce(&mut [Option<PipePort>]),
        lead: Option<Duration>,
        quantum: Duration,
    ) -> Lab {
        let args = RunArgs {
            ports: ports
                .iter()
                .map(|p| {
                    if p.contains("cnd=") {
                        p.parse().unwrap()
                    } else {
                        format!("{p},cnd=interior-ready").parse().unwrap()
                    }
                })
                .collect(),
            seed: Some(7),
            ..Default::default()
        };
        let cfg = bridge_config(&args).unwrap();
        let bridge = Bridge::new(cfg, Rng::new(7)).unwrap();
        let mut hosts = Vec::new();
        let mut ends = Vec::new();
        for i in 0..bridge.num_ports() {
            let name = bridge.port_name(PortId(i as u16)).unwrap().to_owned();
            let (sw, host) = PipePort::pair_named(256, &name, &format!("h{i}"));
            ends.push(Some(sw));
            hosts.push(Some(host));
        }
        let dir = tempfile::Builder::new()
            .prefix("cpsw-loop-")
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
        preload(&mut hosts);
        let (c, t) = (clock.clone(), term.clone());
        let thread = std::thread::spawn(move || {
            let mut dp = Dataplane::new(bridge, ends, reopener, c.clone(), req_rx)
                .with_wake_quantum(quantum);
            if let Some(arrivals) = staged {
                dp = dp.with_ingress_stage(arrivals);
            }
            if let Some(d) = lead {
                c.advance(d);
            }
            let r = dp.run(&t);
            dp.finish();
            r
        });
        Lab {
            hosts,
            plugs,
            term,
            thread: Some(thread),
            ctl_path,
            _ctl: ctl,
            _dir: dir,
        }
    }

    fn host(&mut self, i: usize) -> &mut PipePort {
        self.hosts[i].as_mut().expect("host end plugged")
    }

    fn ctl(&self, words: &str) -> Value {
        ctl_at(&self.ctl_path, words)
    }

    /// Waits (in real time, bounded) until `port`'s `stats` entry satisfies `ok`.
    fn until_port(&self, port: usize, ok: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..5000 {
            let v = self.ctl("stats");
            if ok(&v["ports"][port]) {
                return v["ports"][port].clone();
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        panic!(
            "port {port} never reached the expected state: {}",
            self.ctl("stats")
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

fn ctl_at(path: &Path, words: &str) -> Value {
    let words: Vec<String> = words.split_whitespace().map(str::to_owned).collect();
    daemon_kit::ctl::client(path, &words).unwrap()
}

fn frame(dst: u8, src: u8, len: usize, tag: u8) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, dst]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, src]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = tag;
    f
}

/// Receives one frame on `p`, waiting (in real time, bounded) for it.
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

/// Lets the loop go through `n` more sleeps (its progress, not a time).
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

const T0: Instant = Instant::from_nanos(1_000_000_000);

#[test]
fn forwards_between_pipes_and_answers_ctl_stats() {
    let mut lab = Lab::start(&["p1", "p2"], WarpClock::stopped(T0));
    let f = frame(2, 1, 100, 0xab);
    assert!(lab.host(0).send(&f).unwrap());
    assert_eq!(recv_one(lab.host(1)), f);
    // The answer comes from the dataplane's own state, through the real socket code.
    let v = lab.ctl("stats");
    assert_eq!(v["ports"][0]["name"], "p1");
    assert_eq!(v["ports"][0]["rx_frames"], 1);
    assert_eq!(v["ports"][1]["tx_frames"], 1);
    assert_eq!(v["ports"][1]["io"]["tx_frames"], 1);
    assert_eq!(v["ports"][0]["io"]["rx_bytes"], 100);
    // The reply goes back the way h2 learned: unicast to p1 only.
    let r = frame(1, 2, 80, 0xcd);
    assert!(lab.host(1).send(&r).unwrap());
    assert_eq!(recv_one(lab.host(0)), r);
    let ports = lab.ctl("show ports");
    assert_eq!(ports.as_array().map(Vec::len), Some(2));
    lab.stop();
}

#[test]
fn ingress_frames_faster_than_the_link_are_counted() {
    let mut lab = Lab::start(&["p1", "p2,rate=1gbit"], WarpClock::stopped(T0));
    // p1 is unshaped at start: its link rate comes with `set rate`.
    lab.ctl("set rate p1 1gbit");
    // 1000-octet frames take 8 µs at 1 Gb/s (frame octets only, the daemon's default line);
    // a gap below 8 − 0.8 − 1 = 6.2 µs is faster than the link.
    let stamps = [0u64, 8_000, 9_000, 10_000, 30_000, 36_000, 43_000];
    for (k, t) in stamps.iter().enumerate() {
        let f = frame(2, 1, 1000, k as u8);
        assert!(lab.host(0).send_stamped(&f, 5_000_000_000 + t).unwrap());
    }
    let p = lab.until_port(0, |p| p["rx_frames"] == stamps.len() as u64);
    // Measured: six gaps (8, 1, 1, 20, 6, 7 µs): three early, two of them in a row.
    assert_eq!(p["ingress"]["measured"], 6, "{p}");
    assert_eq!(p["ingress"]["early"], 3, "{p}");
    assert_eq!(p["ingress"]["longest_run"], 2, "{p}");
    assert_eq!(p["ingress"]["early_share"], 0.5, "{p}");
    lab.stop();
}

#[test]
fn the_ingress_stage_spaces_a_burst_by_the_wire_time() {
    let clock = WarpClock::stopped(T0);
    let mut lab = Lab::start_staged(&["p1,rate=1gbit", "p2"], clock.clone());
    // Four 1000-octet frames reach p1 at once (the clock stands still): its 1 Gb/s link
    // delivers them 8 µs apart (frame octets only, the daemon's default line), at T0, T0 + 8,
    // + 16 and + 24 µs. p2 is unshaped: each leaves as soon as the bridge has it.
    for tag in 1..=4 {
        assert!(lab.host(0).send(&frame(2, 1, 1000, tag)).unwrap());
    }
    assert_eq!(recv_one(lab.host(1))[14], 1);
    for (k, tag) in (2..=4u8).enumerate() {
        let due = T0 + Duration::from_micros(8 * (k as u64 + 1));
        let_loop_sleep(&clock, 5);
        assert_eq!(
            lab.host(1).pending(),
            0,
            "frame {tag} passed the stage early"
        );
        assert_eq!(
            clock.last_deadline(),
            Some(due),
            "the loop sleeps until the stage's next delivery"
        );
        clock.advance(Duration::from_nanos(7_999));
        let_loop_sleep(&clock, 5);
        assert_eq!(
            lab.host(1).pending(),
            0,
            "frame {tag} passed the stage early"
        );
        clock.advance(Duration::from_nanos(1));
        assert_eq!(recv_one(lab.host(1))[14], tag);
    }
    let p = lab.until_port(0, |p| p["rx_frames"] == 4);
    let st = &p["ingress"]["stage"];
    assert_eq!(st["staged"], 4, "{p}");
    assert_eq!(st["held"], 3, "{p}");
    assert_eq!(st["delay_total_ns"], 48_000, "{p}");
    assert_eq!(st["delay_max_ns"], 24_000, "{p}");
    assert_eq!(st["overflow_drops"], 0, "{p}");
    assert_eq!(st["queued_bytes"], 0, "{p}");
    // The unshaped port has a stage that passes its frames straight on.
    let v = lab.ctl("stats");
    assert_eq!(v["ports"][1]["ingress"]["stage"]["staged"], 0);
    lab.stop();
}

/// A stalled millisecond: 200 frames wait on a staged port when the loop first looks, three
/// batches and more, stamped 8 µs apart (1000 octets at 1 Gb/s: the link's own pace), all of
/// them due by now. Each must reach the bridge at its own instant, none after the bridge's
/// time has run on to `now`: the loop reads the whole ring before it releases anything. Read
/// a batch at a time, the 136 frames after the first batch were handed over at `now`
/// together (`late`), and the departures between them were gone.
#[test]
fn a_stalled_ring_is_read_whole_before_the_bridge_moves_on() {
    let at = |k: u64| (T0 + Duration::from_micros(8 * k)).as_nanos();
    let lead = Duration::from_millis(2);
    let mut lab = Lab::start_stamped(
        &["p1,rate=1gbit", "p2"],
        WarpClock::stopped(T0),
        lead,
        |hosts| {
            let h = hosts[0].as_mut().unwrap();
            for k in 0..200u64 {
                let f = frame(2, 1, 1000, k as u8);
                assert!(h.send_stamped(&f, at(k)).unwrap(), "the pipe holds 256");
            }
        },
    );
    for k in 0..200u64 {
        assert_eq!(recv_one(lab.host(1))[14], k as u8, "in order");
    }
    let p = lab.until_port(0, |p| p["rx_frames"] == 200);
    let st = &p["ingress"]["stage"];
    assert_eq!(st["staged"], 200, "{p}");
    assert_eq!(st["held"], 0, "every frame was due when read: {p}");
    assert_eq!(st["late"], 0, "{p}");
    assert_eq!(st["late_max_ns"], 0, "{p}");
    lab.stop();
}

/// A frame that reaches a staged port only after the bridge ran past its stamp (as one left in
/// a ring beyond what the loop reads at once) is handed over at the bridge's time, and counted
/// with how late it was.
#[test]
fn a_frame_read_after_the_bridge_ran_past_it_is_counted_late() {
    let lead = Duration::from_millis(1);
    let now = T0 + lead;
    let mut lab = Lab::start_stamped(
        &["p1,rate=1gbit", "p2,rate=1gbit", "p3"],
        WarpClock::stopped(T0),
        lead,
        |_| {},
    );
    // Through p1 at `now`: the bridge's time is `now` once it is forwarded.
    assert!(lab
        .host(0)
        .send_stamped(&frame(3, 1, 100, 1), now.as_nanos())
        .unwrap());
    assert_eq!(recv_one(lab.host(2))[14], 1);
    // Through p2, stamped 500 µs before that.
    let early = now - Duration::from_micros(500);
    assert!(lab
        .host(1)
        .send_stamped(&frame(3, 2, 100, 2), early.as_nanos())
        .unwrap());
    assert_eq!(recv_one(lab.host(2))[14], 2);
    let p = lab.until_port(1, |p| p["rx_frames"] == 1);
    let st = &p["ingress"]["stage"];
    assert_eq!(st["late"], 1, "{p}");
    assert_eq!(st["late_max_ns"], 500_000, "{p}");
    assert_eq!(st["late_total_ns"], 500_000, "{p}");
    let v = lab.ctl("stats");
    assert_eq!(v["ports"][0]["ingress"]["stage"]["late"], 0);
    lab.stop();
}

#[test]
fn without_the_stage_a_burst_reaches_the_bridge_at_once() {
    let mut lab = Lab::start(&["p1,rate=1gbit", "p2"], WarpClock::stopped(T0));
    for tag in 1..=4 {
        assert!(lab.host(0).send(&frame(2, 1, 1000, tag)).unwrap());
    }
    for tag in 1..=4 {
        assert_eq!(recv_one(lab.host(1))[14], tag);
    }
    assert_eq!(
        lab.ctl("stats")["ports"][0]["ingress"]["stage"],
        Value::Null
    );
    lab.stop();
}

#[test]
fn an_auto_port_advertises_its_cn_tlv_and_learns_the_neighbours() {
    let mut lab = Lab::start(&["p1,cnd=auto", "p2"], WarpClock::stopped(T0));
    // The first frame out of an auto port is its LLDPDU: CNPV 3, not yet Ready.
    let f = recv_one(lab.host(0));
    assert_eq!(&f[..6], &cnm_proto::wire::lldp::NEAREST_BRIDGE.0);
    assert_eq!(&f[12..14], &[0x88, 0xcc]);
    let tlv = cnm_proto::wire::lldp::find_cn_tlv(&f[14..])
        .unwrap()
        .unwrap();
    assert_eq!((tlv.cnpv, tlv.ready), (1 << 3, 0));
    assert_eq!(cnm_proto::wire::lldp::find_ttl(&f[14..]), Ok(Some(120)));
    // A CN-aware neighbour answers; the port says it is ready at once, and the neighbour's
    // Ready bit lets CN-tagged frames keep their tag.
    let mut nb = [0u8; 128];
    let cn = cnm_proto::wire::lldp::LldpCnTlvRepr {
        cnpv: 1 << 3,
        ready: 1 << 3,
    };
    let n = cnm_proto::wire::lldp::build_lldp_frame(
        cnm_proto::wire::EthernetAddress([2, 0, 0, 0, 0, 0x99]),
        b"eth0",
        120,
        &cn,
        &mut nb,
    )
    .unwrap();
    assert!(lab.host(0).send(&nb[..n]).unwrap());
    let f = recv_one(lab.host(0));
    let tlv = cnm_proto::wire::lldp::find_cn_tlv(&f[14..])
        .unwrap()
        .unwrap();
    assert_eq!((tlv.cnpv, tlv.ready), (1 << 3, 1 << 3));
    let v = lab.ctl("stats");
    assert_eq!(v["ports"][0]["cnd_defense"], "auto");
    assert_eq!(v["ports"][0]["lldp_tx"], 2);
    assert_eq!(v["ports"][0]["lldp_rx"], 1);
    assert_eq!(v["ports"][0]["cn_tag_kept"], 1 << 3);
    assert_eq!(v["ports"][1]["cnd_defense"], "interior-ready");
    assert_eq!(v["ports"][1]["lldp_tx"], 0);
    lab.stop();
}

/// With a wake quantum of 25 µs the loop runs at most once per quantum: three 1000-octet
/// frames towards a 1 Gb/s port are due at T0, T0 + 8 µs and T0 + 16 µs (no preamble, FCS or
/// padding by default on veth); the first leaves at once, then the loop sleeps until
/// T0 + 25 µs with no port to wake it, the second's departure at T0 + 8 µs included, and sends
/// the second and the third together.
#[test]
fn a_wake_quantum_spaces_the_loops_iterations() {
    let clock = WarpClock::stopped(T0);
    let q = Duration::from_micros(25);
    // The frames are given before the loop starts: one sent later at the same warped instant
    // would wait for a quantum the stopped clock never reaches.
    let preload = |hosts: &mut [Option<PipePort>]| {
        for tag in [1, 2, 3] {
            let h = hosts[0].as_mut().unwrap();
            assert!(h.send(&frame(2, 1, 1000, tag)).unwrap());
        }
    };
    let term = Arc::new(AtomicBool::new(false));
    let ports = ["p1", "p2,rate=1gbit"];
    let mut lab = Lab::start_with(&ports, clock.clone(), term, None, preload, None, q);
    assert_eq!(recv_one(lab.host(1))[14], 1);
    let_loop_sleep(&clock, 5);
    assert_eq!(clock.last_deadline(), Some(T0 + q));
    clock.advance(Duration::from_micros(8));
    let_loop_sleep(&clock, 5);
    assert_eq!(lab.host(1).pending(), 0, "a frame left inside the quantum");
    assert_eq!(clock.last_deadline(), Some(T0 + q));
    clock.advance(Duration::from_micros(17));
    assert_eq!(recv_one(lab.host(1))[14], 2);
    assert_eq!(recv_one(lab.host(1))[14], 3);
    lab.stop();
}

#[test]
fn sleeps_until_the_shapers_departure_on_the_warped_clock() {
    let clock = WarpClock::stopped(T0);
    let mut lab = Lab::start(&["p1", "p2,rate=10mbit"], clock.clone());
    // Two 1000-octet frames towards a 10 Mb/s port: the first leaves at once, the second
    // 1000 × 8 / 10e6 = 800 us later (no preamble, FCS or padding by default on veth).
    for tag in [1, 2] {
        assert!(lab.host(0).send(&frame(2, 1, 1000, tag)).unwrap());
    }
    assert_eq!(recv_one(lab.host(1))[14], 1);
    let_loop_sleep(&clock, 20);
    assert_eq!(
        lab.host(1).pending(),
        0,
        "the second frame left before its time"
    );
    assert_eq!(
        clock.last_deadline(),
        Some(T0 + Duration::from_micros(800)),
        "the loop sleeps exactly until the shaper's next departure"
    );
    clock.advance(Duration::from_micros(799));
    let_loop_sleep(&clock, 5);
    assert_eq!(lab.host(1).pending(), 0);
    clock.advance(Duration::from_micros(1));
    assert_eq!(recv_one(lab.host(1))[14], 2);
    // Idle again: the loop sleeps its longest (housekeeping) interval.
    let_loop_sleep(&clock, 5);
    assert_eq!(clock.last_deadline(), Some(clock.now() + MAX_SLEEP));
    lab.stop();
}

#[test]
fn a_lost_port_stays_down_while_the_others_forward_then_returns() {
    let mut lab = Lab::start(&["p1", "p2", "p3"], WarpClock::stopped(T0));
    // p3's far end goes away: the port is taken down and watched.
    lab.hosts[2] = None;
    let p3 = lab.until_port(2, |p| p["down_reason"] == "missing");
    assert_eq!(p3["up"], false);
    // The other ports keep forwarding meanwhile (a flood now reaches p2 only).
    let f = frame(9, 1, 90, 1);
    assert!(lab.host(0).send(&f).unwrap());
    assert_eq!(recv_one(lab.host(1)), f);
    // The interface returns: the loop takes the new port and floods to it again.
    let (sw, host) = PipePort::pair_named(256, "p3", "h2");
    lab.plugs.lock().unwrap().insert("p3".into(), Ok(sw));
    lab.hosts[2] = Some(host);
    let p3 = lab.until_port(2, |p| p["up"] == true);
    assert!(p3.get("down_reason").is_none(), "{p3}");
    let f = frame(9, 1, 90, 2);
    assert!(lab.host(0).send(&f).unwrap());
    assert_eq!(recv_one(lab.host(2)), f);
    assert_eq!(recv_one(lab.host(1)), f);
    lab.stop();
}

#[test]
fn an_administratively_down_port_is_not_brought_back() {
    let clock = WarpClock::stopped(T0);
    let mut lab = Lab::start(&["p1", "p2", "p3"], clock.clone());
    lab.plugs
        .lock()
        .unwrap()
        .insert("p2".into(), Err(Unavailable::AdminDown));
    lab.hosts[1] = None;
    lab.until_port(1, |p| p["down_reason"] == "admin-down");
    // Many retries later it is still down, and the others forward.
    let_loop_sleep(&clock, 50);
    let f = frame(9, 1, 64, 3);
    assert!(lab.host(0).send(&f).unwrap());
    assert_eq!(recv_one(lab.host(2)), f);
    let v = lab.ctl("stats");
    assert_eq!(v["ports"][1]["up"], false);
    assert_eq!(v["ports"][1]["down_reason"], "admin-down");
    // The operator sets it up.
    let (sw, host) = PipePort::pair_named(256, "p2", "h1");
    lab.plugs.lock().unwrap().insert("p2".into(), Ok(sw));
    lab.hosts[1] = Some(host);
    lab.until_port(1, |p| p["up"] == true);
    lab.stop();
}

#[test]
fn sigterm_stops_the_loop() {
    let term = daemon_kit::process::term_flag().unwrap();
    let lab = Lab::start_with_term(&["p1", "p2"], WarpClock::auto(T0), term);
    assert_eq!(lab.ctl("show ports").as_array().map(Vec::len), Some(2));
    signal_hook::low_level::raise(signal_hook::consts::SIGTERM).unwrap();
    lab.stop();
}

/// A full transmit ring does not hold the emulated line: the frames the bridge sends while
/// the far end does not read wait in the port's FIFO, in order, the bridge's own count and
/// queue moving on as if they had left; they reach the far end once it reads, and the spell
/// of the full ring is timed.
#[test]
fn frames_a_full_ring_refuses_wait_in_order_outside_the_bridges_queue() {
    let mut lab = Lab::start(&["p1", "p2"], WarpClock::stopped(T0));
    // The pipes hold 256 frames each way: 300 towards h1, which does not read yet.
    let tag = |i: usize| (i % 251) as u8;
    for (from, to) in [(0, 200), (200, 300)] {
        for i in from..to {
            assert!(lab.host(0).send(&frame(2, 1, 100, tag(i))).unwrap());
        }
        lab.until_port(0, |p| p["rx_frames"] == to);
    }
    let p2 = lab.until_port(1, |p| p["io"]["tx_deferred"] == 44);
    // The bridge sent all 300; the ring took 256 and the FIFO holds the rest.
    assert_eq!(p2["tx_frames"], 300, "{p2}");
    assert_eq!(p2["io"]["tx_frames"], 256, "{p2}");
    assert_eq!(p2["io"]["tx_deferred_max_bytes"], 4400, "{p2}");
    for i in 0..300 {
        let f = recv_one(lab.host(1));
        assert_eq!(f[14], tag(i), "frame {i}");
    }
    let p2 = lab.until_port(1, |p| p["io"]["tx_frames"] == 300);
    assert_eq!(p2["drops"], 0, "{p2}");
    assert!(p2["io"]["tx_blocked"]["spells"].as_u64() >= Some(1), "{p2}");
    lab.stop();
}
