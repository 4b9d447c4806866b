//! Micro-benchmark of the agent core alone: frames per second through `handle_host` +
//! `poll_uplink` on one core, no I/O.
//!
//! `cargo run --release -p rp-agent --example agent_bench [seconds-per-case]`
//!
//! Cases: one unlimited flow; one rate-limited flow; 64 rate-limited flows (round-robin across
//! them). Batches of 32 host frames; the clock advances per batch by the batch's line time at
//! 80 Gb/s (the line rate configured is 100 Gb/s), so the measurement is CPU-bound; limited flows are set
//! (by a CNM) to a rate at which they are always eligible.

use cnm_proto::rng::Rng;
use cnm_proto::wire::{build_cnm, CnmParams, CpId, EthernetAddress};
use cnm_proto::{Bytes, Duration, Instant, Rate};
use rp_agent::{Agent, AgentConfig, RpParams};

const BATCH: usize = 32;

fn frame(dst: [u8; 6], len: usize) -> Vec<u8> {
    let mut f = vec![0x5a; len];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

fn run(name: &str, flows: usize, limited: bool, len: usize, secs: f64) {
    let line = Rate::from_gbps(100);
    let cfg = AgentConfig {
        line_rate: line,
        mac: Some(EthernetAddress([2, 0, 0, 0, 0, 1])),
        rp: RpParams {
            rpg_time_reset: Duration::from_secs(3600),
            rpg_byte_reset: Bytes::new(1 << 50),
            ..RpParams::default()
        },
        ..AgentConfig::default()
    };
    let Ok(mut a) = Agent::new(cfg, Rng::new(7)) else {
        eprintln!("bad config");
        return;
    };
    let frames: Vec<Vec<u8>> = (0..flows)
        .map(|i| frame([2, 0, 0, 1, (i >> 8) as u8, i as u8], len))
        .collect();
    let mut now = Instant::from_nanos(1);
    if limited {
        // One frame per flow up, then a CNM about it: every flow gets a limiter at 99.2 Gb/s,
        // which the byte counter and timer (set very long) never release.
        let mut sent = Vec::new();
        for f in &frames {
            let _ = a.handle_host(now, f);
        }
        while sent.len() < flows {
            now += Duration::from_micros(1);
            a.poll_uplink(now, &mut |f| {
                sent.push(f.to_vec());
                true
            });
        }
        let p = CnmParams {
            cp_mac: EthernetAddress([2, 0xee, 0, 0, 0, 1]),
            cpid: CpId::output(EthernetAddress([2, 0xee, 0, 0, 0, 1]), 1, 3),
            qntz_fb: 1,
            q_offset: 0,
            q_delta: 0,
            cnm_priority: 6,
            default_priority: 0,
            max_msdu: 64,
        };
        let mut out = [0u8; 128];
        for s in &sent {
            if let Ok(n) = build_cnm(s, &p, &mut out) {
                a.handle_uplink(now, &out[..n]);
            }
        }
    }
    let step = Rate::from_gbps(80).tx_time(Bytes::new(((len + 24) * BATCH) as u64));
    let (mut tx, mut tx_bytes, mut batches, mut k) = (0u64, 0u64, 0u64, 0usize);
    let wall = std::time::Instant::now();
    loop {
        for _ in 0..BATCH {
            let _ = a.handle_host(now, &frames[k % flows]);
            k += 1;
        }
        a.poll_uplink(now, &mut |f| {
            tx += 1;
            tx_bytes += f.len() as u64;
            true
        });
        now += step;
        batches += 1;
        if batches % 1024 == 0 && wall.elapsed().as_secs_f64() >= secs {
            break;
        }
    }
    let el = wall.elapsed().as_secs_f64();
    let s = a.stats();
    println!(
        "{name:<28} {len:5} B  {:7.3} Mpps  {:8.2} Gbit/s  limited flows {:3}  backpressure {}",
        tx as f64 / el / 1e6,
        tx_bytes as f64 * 8.0 / el / 1e9,
        s.limited_flows,
        s.host_backpressure
    );
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    for len in [64, 1500] {
        run("1 flow, unlimited", 1, false, len, secs);
        run("1 flow, rate limited", 1, true, len, secs);
        run("64 flows, rate limited", 64, true, len, secs);
    }
}
