//! Micro-benchmark of the bridge core alone: frames per second through
//! `handle_frame` + `poll_transmit` on one core, no I/O.
//!
//! `cargo run --release -p cp-switch --example core_bench [seconds-per-case]`
//!
//! Each case feeds batches of 32 frames from port 0 to a learned host on port 1 and drains
//! them, with the clock advancing as the daemon's would (one read per batch). The congestion
//! point cases send priority-3 frames (the default CNPV) with the CPs off, at the output queues
//! and at the input buffers: unshaped (sampling only, no CNM) and into a port shaped to half
//! the offered load (a CNM every few samples), so the ratio to "cp off" is the cost of the CPs.

use cnm_proto::rng::Rng;
use cnm_proto::{Duration, Instant, Rate};
use cp_switch::{
    Bridge, BridgeConfig, CpMode, Culprit, LosslessMode, Placement, PortConfig, PortId,
};

const BATCH: usize = 32;

fn frame(dst: [u8; 6], src: [u8; 6], len: usize, pcp: u8) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x81, 0x00, pcp << 5, 0x01, 0x08, 0x00]);
    f.resize(len, 0x5a);
    f
}

struct Case {
    rate: Option<Rate>,
    mode: LosslessMode,
    pcp: u8,
    cp: Placement,
    cp_mode: CpMode,
    culprit: Culprit,
}

fn run(name: &str, len: usize, c: Case, secs: f64) -> f64 {
    let mut ports: Vec<PortConfig> = (0..4).map(|i| PortConfig::new(format!("p{i}"))).collect();
    ports[1].rate = c.rate;
    let mut cfg = BridgeConfig::with_ports(ports);
    cfg.lossless.mode = c.mode;
    cfg.cp.placement = c.cp;
    cfg.cp.mode = c.cp_mode;
    cfg.cp.culprit = c.culprit;
    let mut b = match Bridge::new(cfg, Rng::new(7)) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{e}");
            return 0.0;
        }
    };
    let h0 = [2, 0, 0, 0, 0, 1];
    let h1 = [2, 0, 0, 0, 0, 2];
    let mut now = Instant::from_nanos(1);
    b.handle_frame(now, PortId(1), &frame([0xff; 6], h1, 60, c.pcp));
    b.poll_transmit(now, &mut |_, _| true);
    let f = frame(h1, h0, len, c.pcp);
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
        b.poll_transmit(now, &mut |port, bytes| {
            // Data frames only (CNMs leave through port 0).
            if port == PortId(1) {
                tx += 1;
                tx_bytes += bytes.len() as u64;
            }
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
    let samples: u64 = st.cps.iter().map(|c| c.samples).sum();
    let cnms: u64 = st.cps.iter().map(|c| c.cnm_tx).sum();
    let pps = tx as f64 / el;
    println!(
        "{name:<34} {len:>5} B  {:>7.3} Mpps  {:>7.2} Gb/s  ({} frames, {} drops, {} samples, {} CNMs, {} buffers)",
        pps / 1e6,
        tx_bytes as f64 * 8.0 / el / 1e9,
        tx,
        drops,
        samples,
        cnms,
        st.buffers_allocated
    );
    let _ = Duration::ZERO;
    pps
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    println!("bridge core, one thread, batches of {BATCH}, {secs} s per case");
    let plain = |rate, mode| Case {
        rate,
        mode,
        pcp: 0,
        cp: Placement::Off,
        cp_mode: CpMode::Qcn,
        culprit: Culprit::Arrival,
    };
    for len in [64, 1500] {
        run("unshaped", len, plain(None, LosslessMode::None), secs);
        run(
            "shaped 100gbit",
            len,
            plain(Some(Rate::from_gbps(100)), LosslessMode::None),
            secs,
        );
        run(
            "unshaped, lossless pfc",
            len,
            plain(None, LosslessMode::Pfc),
            secs,
        );
    }
    println!("congestion points (priority 3 = CNPV), throughput relative to cp off:");
    for len in [64, 1500] {
        for (label, rate) in [
            ("unshaped", None),
            ("shaped 50gbit", Some(Rate::from_gbps(50))),
        ] {
            let mut base = 0.0;
            for cp in [Placement::Off, Placement::Output, Placement::Input] {
                let c = Case {
                    rate,
                    mode: LosslessMode::None,
                    pcp: 3,
                    cp,
                    cp_mode: CpMode::Qcn,
                    culprit: Culprit::Arrival,
                };
                let pps = run(&format!("{label}, cp {cp}"), len, c, secs);
                if cp == Placement::Off {
                    base = pps;
                } else if base > 0.0 {
                    println!("{:>40} ratio {:.3}", "", pps / base);
                }
            }
            // The variant modes at the output CP (per-flow table, stored headers, timers).
            for (name, cp_mode, culprit) in [
                ("fqcn", CpMode::Fqcn, Culprit::Arrival),
                ("explicit-rate", CpMode::ExplicitRate, Culprit::Arrival),
                (
                    "qcn occupancy-random",
                    CpMode::Qcn,
                    Culprit::OccupancyRandom,
                ),
            ] {
                let c = Case {
                    rate,
                    mode: LosslessMode::None,
                    pcp: 3,
                    cp: Placement::Output,
                    cp_mode,
                    culprit,
                };
                let pps = run(&format!("{label}, {name}"), len, c, secs);
                if base > 0.0 {
                    println!("{:>40} ratio {:.3}", "", pps / base);
                }
            }
        }
    }
}
