//! The benchmark's blaster and counter.
//!
//! Method, per measurement:
//!
//! 1. The **counter** thread enters the receiving host's namespace
//!    (`cnm_proto::phy::netns::enter`), opens an [`AfPacketPort`] on its interface, and first
//!    sends a few learning frames *backwards* (source = its own MAC, destination = the
//!    blaster's), so that a learning switch knows where the receiver is and forwards the test
//!    stream as known unicast. It then drains its receive ring, counting only data frames that
//!    carry this measurement's random token ([`frame::data_seq`]), and publishes the count
//!    after every batch; when the ring is empty it sleeps briefly ([`COUNTER_IDLE`]) rather
//!    than waking for every frame (it must not steal a CPU from the DUT on a 2-core machine).
//! 2. The **blaster** thread enters the sending host's namespace, opens an [`AfPacketPort`]
//!    with a large `TPACKET_V2` transmit ring, and loops: fill the ring with frames to the
//!    receiver's unicast MAC (sequence numbers increasing) until `send` reports it full, then
//!    `flush` (one `sendto` for the batch). It never waits for anything but ring space, so it
//!    offers more than a DUT can carry; frames are counted as sent when flushed.
//! 3. The **coordinator** (the calling thread) waits for both, lets the warm-up pass (and, if
//!    nothing has arrived yet, up to [`FIRST_FRAME_TIMEOUT`] more for a slow DUT), then reads
//!    (clock, sent, received) at the window's start and end. Rates are differences over the
//!    measured interval; nothing outside the window counts.
//!
//! The counter's ring drops (`PACKET_STATISTICS`) are reported: frames that reached the
//! receiving host but that the counter could not take are *not* counted as received, and a
//! large number there means the counter, not the DUT, was the limit.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use cnm_proto::phy::{self, AfPacketConfig, AfPacketPort, Port};
use cnm_proto::Duration;

use super::frame::{self, Kind};
use super::report::Measurement;
use super::BenchError;
use crate::netns::Namespace;
use crate::signals;

/// How long, after the warm-up, the coordinator waits for the first frame before giving up.
pub const FIRST_FRAME_TIMEOUT: Duration = Duration::from_secs(3);

/// Learning frames the counter sends before the run.
const LEARN_FRAMES: u64 = 3;

/// Frames the counter takes from its ring per call.
const RX_BATCH: usize = 256;

/// Memory of the counter's receive ring.
const COUNTER_RING_BYTES: u64 = 32 << 20;

/// The payload size (MTU) a frame of `size` octets needs.
fn mtu_for(size: usize) -> u32 {
    u32::try_from(size.saturating_sub(14)).unwrap_or(u32::MAX)
}

/// How long the counter sleeps when its ring is empty. Sleeping a fixed time instead of
/// waking on every frame (`poll`) lets frames accumulate and be counted in large batches, so the
/// counter costs little CPU, which on a 2-core machine it shares with the DUT. The ring holds
/// at least 16 ms of traffic at 1 Mpps; overflows show as `counter_ring_drops`.
const COUNTER_IDLE: std::time::Duration = std::time::Duration::from_micros(500);

/// One end of a measured path: a host namespace, its interface and MAC.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The host's namespace.
    pub ns: Namespace,
    /// The interface the blaster or counter uses.
    pub ifname: String,
    /// That interface's MAC.
    pub mac: [u8; 6],
}

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// Frame size (octets on the socket, FCS excluded).
    pub size: usize,
    /// Warm-up before the window.
    pub warmup: Duration,
    /// The window.
    pub window: Duration,
}

/// Flags and counters shared by the three threads.
#[derive(Debug, Default)]
struct Shared {
    /// Set by the coordinator at the end, or by a worker that failed.
    stop: AtomicBool,
    /// The counter's port is open and its learning frames are out.
    counter_ready: AtomicBool,
    /// The blaster's port is open and it is about to send.
    blaster_ready: AtomicBool,
    sent: AtomicU64,
    received: AtomicU64,
    /// Kernel thread ids of the workers (0 = unknown), to read their CPU time.
    blaster_tid: AtomicU32,
    counter_tid: AtomicU32,
}

impl Shared {
    /// Waits until `flag` or `stop` is set; returns whether `flag` is.
    fn wait_for(&self, flag: &AtomicBool) -> bool {
        loop {
            if flag.load(Ordering::Acquire) {
                return true;
            }
            if self.stop.load(Ordering::Relaxed) {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// Measures received frames/s from `tx` to `rx` (see the module documentation).
pub fn measure(tx: &Endpoint, rx: &Endpoint, spec: &Spec) -> Result<Measurement, BenchError> {
    let token = token();
    let shared = Shared::default();
    std::thread::scope(|s| {
        let counter = std::thread::Builder::new()
            .name("bench-counter".into())
            .spawn_scoped(s, || counter(rx, tx.mac, token, spec.size, &shared))
            .map_err(|source| BenchError::Io {
                role: "counter",
                source,
            })?;
        let blaster = std::thread::Builder::new()
            .name("bench-blaster".into())
            .spawn_scoped(s, || blaster(tx, rx.mac, token, spec.size, &shared))
            .map_err(|source| BenchError::Io {
                role: "blaster",
                source,
            });
        let blaster = match blaster {
            Ok(b) => b,
            Err(e) => {
                shared.stop.store(true, Ordering::Relaxed);
                return Err(e);
            }
        };
        let window = coordinate(spec, &shared, &counter, &blaster);
        shared.stop.store(true, Ordering::Relaxed);
        let counter_result = counter.join().map_err(|_| BenchError::Panicked("counter"));
        let blaster_result = blaster.join().map_err(|_| BenchError::Panicked("blaster"));
        let ring_drops = counter_result??;
        blaster_result??;
        let w = window?;
        let mut m = Measurement::from_counts(spec.size, w.secs, w.sent, w.received);
        m.counter_ring_drops = ring_drops;
        m.blaster_cpu = w.blaster_cpu;
        m.counter_cpu = w.counter_cpu;
        Ok(m)
    })
}

/// What the coordinator saw over the window.
#[derive(Debug, Default)]
struct Window {
    secs: f64,
    sent: u64,
    received: u64,
    blaster_cpu: Option<f64>,
    counter_cpu: Option<f64>,
}

/// The coordinator's part.
fn coordinate<A, B>(
    spec: &Spec,
    shared: &Shared,
    counter: &std::thread::ScopedJoinHandle<'_, A>,
    blaster: &std::thread::ScopedJoinHandle<'_, B>,
) -> Result<Window, BenchError> {
    // A worker that fails sets `stop` and returns its error, which the caller reports.
    let failed =
        || shared.stop.load(Ordering::Relaxed) || counter.is_finished() || blaster.is_finished();
    if !shared.wait_for(&shared.blaster_ready) || failed() {
        return Ok(Window::default());
    }
    if signals::sleep_or_interrupted(spec.warmup.to_std()) {
        return Err(signals::Interrupted.into());
    }
    let give_up = phy::clock::now() + FIRST_FRAME_TIMEOUT;
    while shared.received.load(Ordering::Relaxed) == 0 {
        if failed() {
            return Ok(Window::default());
        }
        if phy::clock::now() > give_up {
            return Err(BenchError::NothingReceived(
                spec.warmup + FIRST_FRAME_TIMEOUT,
            ));
        }
        if signals::sleep_or_interrupted(std::time::Duration::from_millis(10)) {
            return Err(signals::Interrupted.into());
        }
    }
    let tids = [&shared.blaster_tid, &shared.counter_tid].map(|t| t.load(Ordering::Relaxed));
    let cpu0 = tids.map(thread_cpu_ns);
    let t0 = phy::clock::now();
    let (s0, r0) = (
        shared.sent.load(Ordering::Relaxed),
        shared.received.load(Ordering::Relaxed),
    );
    if signals::sleep_or_interrupted(spec.window.to_std()) {
        return Err(signals::Interrupted.into());
    }
    let t1 = phy::clock::now();
    let (s1, r1) = (
        shared.sent.load(Ordering::Relaxed),
        shared.received.load(Ordering::Relaxed),
    );
    let cpu1 = tids.map(thread_cpu_ns);
    let secs = t1.saturating_since(t0).as_secs_f64();
    let share = |i: usize| match (cpu0[i], cpu1[i]) {
        (Some(a), Some(b)) if secs > 0.0 => Some(b.saturating_sub(a) as f64 / 1e9 / secs),
        _ => None,
    };
    Ok(Window {
        secs,
        sent: s1.saturating_sub(s0),
        received: r1.saturating_sub(r0),
        blaster_cpu: share(0),
        counter_cpu: share(1),
    })
}

/// The kernel thread id of the calling thread (from `/proc/thread-self`, which links to
/// `<pid>/task/<tid>`); 0 if unknown.
fn current_tid() -> u32 {
    std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse().ok())
        .unwrap_or(0)
}

/// CPU time (nanoseconds on a CPU, from `/proc/self/task/<tid>/schedstat`, whose first
/// field is the scheduler's exact run time; see the kernel's `Documentation/scheduler/
/// sched-stats.rst`) of thread `tid` of this process.
fn thread_cpu_ns(tid: u32) -> Option<u64> {
    if tid == 0 {
        return None;
    }
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// A token that differs between measurements of one run and between runs.
fn token() -> u32 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let t = phy::clock::now().as_nanos();
    let x = t ^ (u64::from(std::process::id()) << 32) ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // Fold to 32 bits; the low half of the multiply-xor mix is well spread.
    (x ^ (x >> 32)) as u32
}

fn open_in(
    ep: &Endpoint,
    role: &'static str,
    cfg: &AfPacketConfig,
) -> Result<AfPacketPort, BenchError> {
    if let Some(name) = ep.ns.name() {
        phy::netns::enter(name).map_err(|source| BenchError::Io { role, source })?;
    }
    AfPacketPort::open(&ep.ifname, cfg).map_err(|source| BenchError::Port { role, source })
}

/// The counter thread. Returns the receive ring's kernel drops.
fn counter(
    rx: &Endpoint,
    blaster_mac: [u8; 6],
    token: u32,
    size: usize,
    shared: &Shared,
) -> Result<u64, BenchError> {
    let role = "counter";
    // A deep receive ring (COUNTER_RING_BYTES, slots just large enough for the test frames:
    // 131 072 slots at 64 B, 16 384 at 1500 B) absorbs the scheduling hiccups of this thread.
    let slot = AfPacketConfig::for_mtu(mtu_for(size));
    let cfg = AfPacketConfig {
        rx_blocks: (COUNTER_RING_BYTES / u64::from(slot.block_size)).max(1) as u32,
        tx_blocks: 1,
        ..slot
    };
    let setup = || -> Result<AfPacketPort, BenchError> {
        let mut port = open_in(rx, role, &cfg)?;
        let mut learn = [0u8; frame::MIN_SIZE];
        for seq in 0..LEARN_FRAMES {
            frame::build(&mut learn, blaster_mac, rx.mac, token, Kind::Learn, seq);
            port.send(&learn)
                .map_err(|source| BenchError::Port { role, source })?;
        }
        port.flush()
            .map_err(|source| BenchError::Port { role, source })?;
        Ok(port)
    };
    let mut port = setup().inspect_err(|_| shared.stop.store(true, Ordering::Relaxed))?;
    shared.counter_tid.store(current_tid(), Ordering::Relaxed);
    shared.counter_ready.store(true, Ordering::Release);
    let mut count = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        let n = port
            .recv_batch(RX_BATCH, &mut |f| {
                if frame::data_seq(f, token).is_some() {
                    count += 1;
                }
            })
            .map_err(|source| BenchError::Port { role, source })?;
        shared.received.store(count, Ordering::Relaxed);
        if n == 0 {
            std::thread::sleep(COUNTER_IDLE);
        }
    }
    let stats = port
        .stats()
        .map_err(|source| BenchError::Port { role, source })?;
    Ok(stats.rx_dropped)
}

/// The blaster thread.
fn blaster(
    tx: &Endpoint,
    counter_mac: [u8; 6],
    token: u32,
    size: usize,
    shared: &Shared,
) -> Result<(), BenchError> {
    let role = "blaster";
    // A large transmit ring (2048 slots of 2 KiB) so one flush hands the kernel a long batch;
    // a minimal receive ring, since nothing is expected back. Not promiscuous: only the
    // counter's learning frames are addressed here.
    let cfg = AfPacketConfig {
        rx_blocks: 1,
        tx_blocks: 128,
        promiscuous: false,
        ..AfPacketConfig::default()
    };
    let mut port =
        open_in(tx, role, &cfg).inspect_err(|_| shared.stop.store(true, Ordering::Relaxed))?;
    // Blast only once the receiver is known to the DUT.
    if !shared.wait_for(&shared.counter_ready) {
        return Ok(());
    }
    shared.blaster_tid.store(current_tid(), Ordering::Relaxed);
    shared.blaster_ready.store(true, Ordering::Release);
    let mut buf = vec![0u8; size];
    frame::build(&mut buf, counter_mac, tx.mac, token, Kind::Data, 0);
    let mut seq = 0u64;
    let mut sink = |_: &[u8]| {};
    while !shared.stop.load(Ordering::Relaxed) {
        loop {
            frame::set_seq(&mut buf, seq);
            if !port
                .send(&buf)
                .map_err(|source| BenchError::Port { role, source })?
            {
                break;
            }
            seq += 1;
        }
        port.flush()
            .map_err(|source| BenchError::Port { role, source })?;
        shared.sent.store(seq, Ordering::Relaxed);
        // Keep the (tiny) receive ring from holding stale frames.
        port.recv_batch(RX_BATCH, &mut sink)
            .map_err(|source| BenchError::Port { role, source })?;
    }
    Ok(())
}
