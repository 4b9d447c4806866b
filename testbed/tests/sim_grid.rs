//! The hosts' poll grid (`[host.NAME] poll_grid`, `HostNode::with_poll_grid`): a host whose
//! timers fire on a grid sends on the grid, and only the simulator takes the setting.
#![allow(clippy::unwrap_used)]

use cnm_proto::phy::pcap::PcapReader;
use cnm_proto::{Duration, Instant};
use testbed::sim::engine::SharedBuf;
use testbed::sim::topo::Topology;

mod common;

/// Two greedy 10 Gb/s senders into one 10 Gb/s port, standard QCN; `host_extra` is added to
/// each sender's `[host]` table.
fn dumbbell(host_extra: &str) -> String {
    common::sim::greedy_dumbbell(2, "20ms", 2, host_extra)
}

/// The instants (ns) at which h0 started each frame it put on its link, over 20 ms.
fn h0_send_instants(text: &str) -> Vec<u64> {
    let t = Topology::parse(text, "grid.toml").unwrap();
    let (mut sim, built) = t.build().unwrap();
    let h0 = built.hosts.iter().find(|h| h.0 == "h0").unwrap().1;
    let mac = sim.host(h0).unwrap().mac();
    let link = sim.link_id("h0-sw0").unwrap();
    let buf = SharedBuf::new();
    sim.capture(link, Box::new(buf.clone())).unwrap();
    sim.run_until(Instant::ZERO + Duration::from_millis(20));
    sim.finish().unwrap();
    let bytes = buf.contents();
    let mut r = PcapReader::new(bytes.as_slice()).unwrap();
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        // The capture holds both directions: h0's own frames carry its source address.
        if rec.data.get(6..12) == Some(&mac.0[..]) {
            out.push(rec.ts.as_nanos());
        }
    }
    out
}

/// Starts of frames sent back to back on a 10 Gb/s line are one frame time apart: 1222 or
/// 1223 ns for these frames (1500 octets with the agent's 802.1Q tag and CN-TAG, FCS, preamble
/// and gap; the line clock carries the remainder). Anything closer than this bound followed
/// the frame before it; a grid of 5 µs is four times further.
const BACK_TO_BACK_NS: u64 = 1_300;

/// Frames that start neither on a multiple of `grid` nor right behind the frame before them.
fn off_grid(starts: &[u64], grid: u64) -> Vec<u64> {
    let mut prev: Option<u64> = None;
    let mut out = Vec::new();
    for &t in starts {
        let behind = prev.is_some_and(|p| t - p <= BACK_TO_BACK_NS);
        if t % grid != 0 && !behind {
            out.push(t);
        }
        prev = Some(t);
    }
    out
}

/// On a 5 µs grid each burst h0 sends starts on a multiple of 5 µs, the rest of the burst
/// following back to back as the line takes it (the capture stamps a frame when its first bit
/// enters the link; a sender's polls are timer polls, the frames it receives being CNMs that
/// its agent takes on arrival). Without the grid most frames start elsewhere: the test could
/// not pass by accident.
#[test]
fn a_host_on_a_poll_grid_sends_on_the_grid() {
    const GRID: u64 = 5_000;
    let on = h0_send_instants(&dumbbell("poll_grid = \"5us\""));
    assert!(on.len() > 2_000, "h0 sent {} frames", on.len());
    let off = off_grid(&on, GRID);
    assert!(
        off.is_empty(),
        "{} frames off the grid: {:?}",
        off.len(),
        &off[..5.min(off.len())]
    );

    let free = h0_send_instants(&dumbbell(""));
    assert!(free.len() > 2_000, "h0 sent {} frames", free.len());
    let off = off_grid(&free, GRID).len();
    assert!(
        off * 2 > free.len(),
        "without a grid only {off} of {} frames started off a 5 µs multiple and not back to back",
        free.len()
    );
}

/// A zero grid is refused with the field's name (leaving the key out means none).
#[test]
fn a_zero_poll_grid_is_refused() {
    let e = Topology::parse(&dumbbell("poll_grid = \"0s\""), "grid.toml").unwrap_err();
    let text = e.to_string();
    assert!(text.contains("host.h0.poll_grid"), "{text}");
    assert!(text.contains("must be positive"), "{text}");
}
