//! Shared helpers of the bridge-core tests: frame builders and a fake-clock driver.
#![allow(dead_code, clippy::unwrap_used)]

use cnm_proto::rng::Rng;
use cnm_proto::wire::{self, EtherType, MacControl, MacControlRepr};
use cnm_proto::{Duration, Instant};
use cp_switch::{Bridge, BridgeConfig, PortConfig, PortId};

/// Host address `n`.
pub fn mac(n: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 0x10, n]
}

/// An Ethernet frame of `len` octets from `src` to `dst`, tagged with (PCP, VID) if given.
pub fn frame(dst: [u8; 6], src: [u8; 6], tag: Option<(u8, u16)>, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len.max(64));
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    if let Some((pcp, vid)) = tag {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&((u16::from(pcp) << 13) | vid).to_be_bytes());
    }
    f.extend_from_slice(&[0x88, 0xB6]); // local experimental EtherType
    f.resize(len.max(f.len()), 0xA5);
    f
}

/// A PAUSE frame.
pub fn pause_frame(src: [u8; 6], quanta: u16) -> Vec<u8> {
    let mut b = [0u8; 60];
    let n = wire::build_pause_frame(
        wire::EthernetAddress(src),
        &MacControlRepr::Pause { quanta },
        &mut b,
    )
    .unwrap();
    b[..n].to_vec()
}

/// A PFC frame.
pub fn pfc_frame(src: [u8; 6], class_enable: u16, times: [u16; 8]) -> Vec<u8> {
    let mut b = [0u8; 60];
    let n = wire::build_pause_frame(
        wire::EthernetAddress(src),
        &MacControlRepr::Pfc {
            class_enable,
            times,
        },
        &mut b,
    )
    .unwrap();
    b[..n].to_vec()
}

/// The MAC-control content of `f`, if it is a MAC-control frame.
pub fn as_mac_control(f: &[u8]) -> Option<MacControlRepr> {
    let info = wire::walk(f).ok()?;
    if info.ethertype != EtherType::MacControl {
        return None;
    }
    MacControlRepr::parse(&MacControl::new_checked(&f[info.payload_offset..]).ok()?).ok()
}

/// A transmitted frame.
#[derive(Debug, Clone)]
pub struct Sent {
    pub at: Instant,
    pub port: PortId,
    pub bytes: Vec<u8>,
}

/// A bridge with a fake clock that records everything it transmits.
pub struct Harness {
    pub bridge: Bridge,
    pub now: Instant,
    pub sent: Vec<Sent>,
}

impl Harness {
    pub fn new(cfg: BridgeConfig) -> Self {
        Harness {
            bridge: Bridge::new(cfg, Rng::new(1)).unwrap(),
            now: Instant::from_nanos(1_000_000_000),
            sent: Vec::new(),
        }
    }

    /// `n` unshaped ports called p0, p1, ...
    pub fn ports(n: usize) -> Vec<PortConfig> {
        (0..n).map(|i| PortConfig::new(format!("p{i}"))).collect()
    }

    pub fn rx(&mut self, port: u16, f: &[u8]) {
        self.bridge.handle_frame(self.now, PortId(port), f);
    }

    pub fn poll(&mut self) {
        let now = self.now;
        let sent = &mut self.sent;
        self.bridge.poll_transmit(now, &mut |port, b| {
            sent.push(Sent {
                at: now,
                port,
                bytes: b.to_vec(),
            });
            true
        });
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
    }

    /// Polls at every instant the bridge asks for, up to and including `until`.
    pub fn run_until(&mut self, until: Instant) {
        self.poll();
        for _ in 0..10_000_000 {
            match self.bridge.poll_timeout() {
                Some(t) if t <= until => {
                    self.now = self.now.max(t);
                    self.poll();
                }
                _ => break,
            }
        }
        self.now = self.now.max(until);
        self.poll();
    }

    /// Frames sent out of `port` (data and control).
    pub fn out(&self, port: u16) -> Vec<&Sent> {
        self.sent
            .iter()
            .filter(|s| s.port == PortId(port))
            .collect()
    }

    /// Data frames (not MAC control) sent out of `port`.
    pub fn data_out(&self, port: u16) -> Vec<&Sent> {
        self.sent
            .iter()
            .filter(|s| s.port == PortId(port) && as_mac_control(&s.bytes).is_none())
            .collect()
    }

    pub fn clear(&mut self) {
        self.sent.clear();
    }

    /// Learns `mac(host)` on `port` by receiving one broadcast from it, then forgets the output.
    pub fn learn(&mut self, host: u8, port: u16) {
        let f = frame([0xff; 6], mac(host), None, 60);
        self.rx(port, &f);
        self.poll();
        self.clear();
    }
}
