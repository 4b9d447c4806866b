//! The uplink's line rate changed while frames wait: what is waiting is re-timed at the new
//! rate (issue 15: `rp-agent ctl set rate 1bit` then `1gbit` left the TAP path wedged behind
//! the frame started at 1 bit/s).
#![allow(clippy::unwrap_used)]

use cnm_proto::rng::Rng;
use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Duration, Instant, Rate};
use rp_agent::{Agent, AgentConfig};

const HOST: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const PEER: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);

fn frame(len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&PEER.0);
    f[6..12].copy_from_slice(&HOST.0);
    f[12..14].copy_from_slice(&[0x88, 0xb6]);
    f
}

fn send_all(a: &mut Agent, now: Instant) -> usize {
    let mut n = 0;
    a.poll_uplink(now, &mut |_| {
        n += 1;
        true
    });
    n
}

#[test]
fn one_bit_then_1gbit_does_not_wedge_the_uplink() {
    let cfg = AgentConfig {
        line_rate: Rate::from_gbps(1),
        mac: Some(HOST),
        ..AgentConfig::default()
    };
    let mut a = Agent::new(cfg, Rng::new(1)).unwrap();
    let t0 = Instant::from_nanos(1_000_000_000);
    a.set_line_rate(t0, Rate::from_bps(1)).unwrap();
    for _ in 0..3 {
        a.handle_host(t0, &frame(1000)).unwrap();
    }
    // One frame starts at 1 bit/s; the line owes hours for it.
    assert_eq!(send_all(&mut a, t0), 1);
    assert!(a.poll_timeout().unwrap() > t0 + Duration::from_secs(1000));
    let t1 = t0 + Duration::from_millis(1);
    assert_eq!(send_all(&mut a, t1), 0);
    a.set_line_rate(t1, Rate::from_gbps(1)).unwrap();
    // The rest of that frame takes about 8 µs at 1 Gb/s; then the other two go.
    let due = a.poll_timeout().unwrap();
    assert!(due <= t1 + Duration::from_micros(9), "{due}");
    let t2 = t1 + Duration::from_micros(100);
    assert_eq!(send_all(&mut a, t2), 2);
}
