//! Micro-benchmark of the bridge core alone: frames per second through
//! `handle_frame` + `poll_transmit` on one core, no I/O.
//!
//! `cargo run --release -p cp-switch --example core_bench [seconds-per-case]`
//!
//! Each case feeds batches of 32 frames from port 0 to a learned host on port 1 and drains
//! them, with the clock advancing as the daemon's would (one read per batch).

use cnm_proto::rng::Rng;
use cnm_proto::{Duration, Instant, Rate};
use cp_switch::{Bridge, BridgeConfig, LosslessMode, PortConfig, PortId};

const BATCH: usize = 32;

fn frame(dst: [u8; 6], src: [u8; 6], len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x81, 0x00, 0x00, 0x01, 0x08, 0x00]);
    f.resize(len, 0x5a);
    f
}

fn run(name: &str, len: usize, rate: Option<Rate>, mode: LosslessMode, secs: f64) {
    let mut ports: Vec<PortConfig> = (0..4).map(|i| PortConfig::new(format!("p{i}"))).collect();
    ports[1].rate = rate;
    let mut cfg = BridgeConfig::with_ports(ports);
    cfg.lossless.mode = mode;
    let mut b = match Bridge::new(cfg, Rng::new(7)) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{e}");
            return;
        }
    };
    let h0 = [2, 0, 0, 0, 0, 1];
    let h1 = [2, 0, 0, 0, 0, 2];
    let mut now = Instant::from_nanos(1);
    b.handle_frame(now, PortId(1), &frame([0xff; 6], h1, 60));
    b.poll_transmit(now, &mut |_, _| true);
    let f = frame(h1, h0, len);
    // Emulated time advances per batch by the line time of the batch at 100 Gb/s, so a shaped
    // port never becomes the bottleneck of this CPU measurement.
    let step = Rate::from_gbps(100).tx_time(cnm_proto::Bytes::new(((len + 24) * BATCH) as u64));
    let mut tx = 0u64;
    let mut tx_bytes = 0u64;
    let wall = std::time::Instant::now();
    let mut batches = 0u64;
    loop {
        for _ in 0..BATCH {
            b.handle_frame(now, PortId(0), &f);
        }
        b.poll_transmit(now, &mut |_, bytes| {
            tx += 1;
            tx_bytes += bytes.len() as u64;
            true
        });
        now += step;
        batches += 1;
        if batches % 1024 == 0 && wall.elapsed().as_secs_f64() >= secs {
            break;
        }
    }
    let el = wall.elapsed().as_secs_f64();
    let st = b.stats();
    let drops: u64 = st.ports.iter().map(|p| p.drops).sum();
    println!(
        "{name:<28} {len:>5} B  {:>7.3} Mpps  {:>7.2} Gb/s  ({} frames, {} drops, {} buffers)",
        tx as f64 / el / 1e6,
        tx_bytes as f64 * 8.0 / el / 1e9,
        tx,
        drops,
        st.buffers_allocated
    );
    let _ = Duration::ZERO;
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    println!("bridge core, one thread, batches of {BATCH}, {secs} s per case");
    for len in [64, 1500] {
        run("unshaped", len, None, LosslessMode::None, secs);
        run(
            "shaped 100gbit",
            len,
            Some(Rate::from_gbps(100)),
            LosslessMode::None,
            secs,
        );
        run("unshaped, lossless pfc", len, None, LosslessMode::Pfc, secs);
    }
}
