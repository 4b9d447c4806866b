//! How fast do `AfPacketPort` rings move frames over a veth pair?
//!
//! `cargo run --release -p cnm-proto --example ring_bench [-- SECONDS [RX_SLOTS]]` (root). Builds a private
//! network namespace with veth pairs and measures, for 64- and 1500-octet frames:
//!
//! * **blast**: one thread sends as fast as the TX ring allows on one end, another counts what
//!   arrives on the other end;
//! * **one-thread**: a single thread alternates "send a batch of 64 on one end, flush,
//!   receive on the other end" — the kernel's veth delivery runs inside the flush, so this is
//!   the cost of one core moving frames through both rings, and the least sensitive to other
//!   load on the machine;
//! * **forward**: a generator, a forwarder (receive on one port, send the same frame on
//!   another, batches of 64, one flush per batch — the shape of the switch's loop) and a sink.
//!
//! Prints numbers only; nothing is asserted. The namespace is deleted on exit.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use cnm_proto::phy::{self, AfPacketConfig, AfPacketPort, Port};
use cnm_proto::Duration;

struct Netns(String);

impl Netns {
    fn create() -> Netns {
        let name = format!("qcnbench-{}", std::process::id());
        sh(&["netns", "add", &name]);
        Netns(name)
    }

    fn veth(&self, a: &str, b: &str) {
        sh(&[
            "-n", &self.0, "link", "add", a, "type", "veth", "peer", "name", b,
        ]);
        for i in [a, b] {
            sh(&["-n", &self.0, "link", "set", i, "up"]);
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn sh(args: &[&str]) {
    let st = Command::new("ip").args(args).status().unwrap();
    assert!(st.success(), "ip {}", args.join(" "));
}

fn frame(len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xb]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xa]);
    f[12..14].copy_from_slice(&0x88B5u16.to_be_bytes());
    f
}

/// Send `f` as fast as the ring takes it until `stop`; returns frames sent.
fn blast(port: &mut AfPacketPort, f: &[u8], stop: &AtomicBool) -> u64 {
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let mut n = 0;
        while n < 64 && port.send(f).unwrap() {
            n += 1;
        }
        sent += n;
        port.flush().unwrap();
        if n == 0 {
            thread::yield_now();
        }
    }
    sent
}

/// Count received frames for `secs` seconds after the first one.
fn sink(port: &mut AfPacketPort, secs: u64, started: &AtomicBool) -> (u64, u64, f64) {
    let fd = port.raw_fd().unwrap();
    let mut frames = 0u64;
    let mut bytes = 0u64;
    // Wait for traffic, then time a fixed window.
    while port.recv_batch(64, &mut |_| {}).unwrap() == 0 {
        phy::poll::wait(&[fd], Some(Duration::from_millis(100))).unwrap();
    }
    started.store(true, Ordering::Relaxed);
    let t0 = phy::clock::now();
    let end = t0 + Duration::from_secs(secs);
    loop {
        let now = phy::clock::now();
        if now >= end {
            break;
        }
        let n = port
            .recv_batch(64, &mut |f| bytes += f.len() as u64)
            .unwrap();
        frames += n as u64;
        if n == 0 {
            phy::poll::wait(&[fd], Some(end - now)).unwrap();
        }
    }
    let dt = (phy::clock::now() - t0).as_secs_f64();
    (frames, bytes, dt)
}

/// Forward until `stop`; returns (frames forwarded, frames refused by a full TX ring,
/// forwarding rate per CPU-second of this thread over the measured window).
fn forward(
    rx: &mut AfPacketPort,
    tx: &mut AfPacketPort,
    stop: &AtomicBool,
    started: &AtomicBool,
) -> (u64, u64, f64) {
    let fd = rx.raw_fd().unwrap();
    let (mut fwd, mut dropped) = (0u64, 0u64);
    let mut window: Option<(u64, u64)> = None;
    while !stop.load(Ordering::Relaxed) {
        let n = rx
            .recv_batch(64, &mut |f| {
                if tx.send(f).unwrap() {
                    fwd += 1;
                } else {
                    dropped += 1;
                }
            })
            .unwrap();
        tx.flush().unwrap();
        if window.is_none() && started.load(Ordering::Relaxed) {
            window = Some((fwd, thread_cpu_ns()));
        }
        if n == 0 {
            phy::poll::wait(&[fd], Some(Duration::from_millis(10))).unwrap();
        }
    }
    let per_cpu = window.map_or(0.0, |(f0, c0)| {
        (fwd - f0) as f64 / ((thread_cpu_ns() - c0) as f64 / 1e9).max(1e-9)
    });
    (fwd, dropped, per_cpu)
}

fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    let ns = ns.to_owned();
    thread::spawn(move || {
        phy::netns::enter(&ns).unwrap();
        f()
    })
}

/// The ring configuration of every port: the defaults, with the RX ring resized when the
/// second command-line argument gives a slot count.
fn base_config() -> AfPacketConfig {
    let mut cfg = AfPacketConfig::default();
    if let Some(slots) = std::env::args().nth(2).and_then(|s| s.parse::<u32>().ok()) {
        let per_block = cfg.block_size / cfg.frame_size;
        cfg.rx_blocks = slots.div_ceil(per_block).max(1);
    }
    cfg
}

fn open(ns: &str, name: &str) -> AfPacketPort {
    open_with(ns, name, base_config())
}

fn open_with(ns: &str, name: &str, cfg: AfPacketConfig) -> AfPacketPort {
    let (ns, name) = (ns.to_owned(), name.to_owned());
    in_ns(&ns, move || {
        phy::offload::disable_all(&name).unwrap();
        AfPacketPort::open(&name, &cfg).unwrap()
    })
    .join()
    .unwrap()
}

fn run_blast(ns: &str, len: usize, secs: u64) {
    let mut tx = open(ns, "ba");
    let mut rx = open(ns, "bb");
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let (s1, s2) = (Arc::clone(&stop), Arc::clone(&started));
    let sender = thread::spawn(move || {
        let f = frame(len);
        let sent = blast(&mut tx, &f, &s1);
        (sent, tx.stats().unwrap())
    });
    let receiver = thread::spawn(move || {
        let r = sink(&mut rx, secs, &s2);
        (r, rx.stats().unwrap())
    });
    let ((frames, bytes, dt), rxs) = receiver.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    let (sent, txs) = sender.join().unwrap();
    println!(
        "blast   {len:>5} B: rx {:>7.3} Mpps {:>6.2} Gbit/s | tx {sent} frames, ring full {} | rx ring drops {}",
        frames as f64 / dt / 1e6,
        bytes as f64 * 8.0 / dt / 1e9,
        txs.tx_full,
        rxs.rx_dropped,
    );
    let _ = started;
}

/// CPU time the calling thread has run, from `/proc/thread-self/schedstat` (nanoseconds).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

fn run_one_thread(ns: &str, len: usize, secs: u64, qdisc_bypass: bool) {
    let cfg = AfPacketConfig {
        qdisc_bypass,
        ..base_config()
    };
    let mut tx = open_with(ns, "ba", cfg);
    let mut rx = open(ns, "bb");
    let f = frame(len);
    let (mut sent, mut got) = (0u64, 0u64);
    // Warm up, then drain whatever is left.
    for _ in 0..100 {
        while tx.send(&f).unwrap() {}
        tx.flush().unwrap();
        while rx.recv_batch(64, &mut |_| {}).unwrap() > 0 {}
    }
    let before = rx.stats().unwrap().rx_dropped;
    let cpu0 = thread_cpu_ns();
    let t0 = phy::clock::now();
    let end = t0 + Duration::from_secs(secs);
    while phy::clock::now() < end {
        for _ in 0..64 {
            if !tx.send(&f).unwrap() {
                break;
            }
            sent += 1;
        }
        tx.flush().unwrap();
        loop {
            let n = rx.recv_batch(64, &mut |_| {}).unwrap();
            got += n as u64;
            if n < 64 {
                break;
            }
        }
    }
    let dt = (phy::clock::now() - t0).as_secs_f64();
    let cpu = (thread_cpu_ns() - cpu0) as f64 / 1e9;
    let drops = rx.stats().unwrap().rx_dropped - before;
    println!(
        "1-thread{len:>5} B: rx {:>7.3} Mpps {:>6.2} Gbit/s | {:>5.3} Mpps per CPU-second ({:.0}% of a core) | sent {sent}, rx ring drops {drops}{}",
        got as f64 / dt / 1e6,
        (got * len as u64) as f64 * 8.0 / dt / 1e9,
        got as f64 / cpu.max(1e-9) / 1e6,
        cpu / dt * 100.0,
        if qdisc_bypass { " (qdisc bypass)" } else { "" },
    );
}

fn run_forward(ns: &str, len: usize, secs: u64) {
    let mut gen = open(ns, "fa");
    let mut fin = open(ns, "fb");
    let mut fout = open(ns, "fc");
    let mut snk = open(ns, "fd");
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let (s1, s2, s3) = (Arc::clone(&stop), Arc::clone(&stop), Arc::clone(&started));
    let s4 = Arc::clone(&started);
    let g = thread::spawn(move || blast(&mut gen, &frame(len), &s1));
    let fw = thread::spawn(move || {
        let r = forward(&mut fin, &mut fout, &s2, &s4);
        (r, fin.stats().unwrap(), fout.stats().unwrap())
    });
    let s = thread::spawn(move || sink(&mut snk, secs, &s3));
    let (frames, _bytes, dt) = s.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    let _ = g.join().unwrap();
    let ((fwd, full, per_cpu), ins, _outs) = fw.join().unwrap();
    println!(
        "forward {len:>5} B: sink {:>7.3} Mpps | forwarder {:>5.3} Mpps per CPU-second | moved {fwd}, tx ring full {full}, rx ring drops {}",
        frames as f64 / dt / 1e6,
        per_cpu / 1e6,
        ins.rx_dropped,
    );
}

fn main() {
    let is_root = std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false);
    if !is_root {
        println!("ring_bench needs root (it builds a network namespace); skipping");
        return;
    }
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let ns = Netns::create();
    ns.veth("ba", "bb");
    ns.veth("fa", "fb");
    ns.veth("fc", "fd");
    let cfg = base_config();
    println!(
        "AfPacketPort TPACKET_V2 rings over veth, {secs} s per run, batches of 64, \
         RX ring {} slots, TX ring {} slots of {} B",
        cfg.rx_slots(),
        cfg.tx_slots(),
        cfg.frame_size
    );
    for len in [64, 1500] {
        run_one_thread(&ns.0, len, secs, false);
    }
    run_one_thread(&ns.0, 64, secs, true);
    for len in [64, 1500] {
        run_blast(&ns.0, len, secs);
    }
    for len in [64, 1500] {
        run_forward(&ns.0, len, secs);
    }
}
