//! Sans-IO traffic models: frames with a small measurement header, produced on demand.
//!
//! A [`Source`] follows one [`Pattern`] for one flow and, asked with [`Source::next`] at `now`,
//! writes the next frame that is due into a caller's buffer (no allocation). Frames are
//! Ethernet II on EtherType 0x88B6 (IEEE 802 "local experimental EtherType 2", IEEE Std 802-2014
//! clause 9.2.4) and carry a [`PayloadHeader`] — magic, flow id, sequence number, send time —
//! that the [`sink::Sink`] reads to count loss, reordering and one-way delay.
//!
//! Rates count the octets of the frames as generated (MAC header and payload, without FCS,
//! preamble or the tags the agent adds).
//!
//! Patterns:
//! * **greedy** — always a frame due: the agent's backpressure is the only brake;
//! * **cbr:R** — one frame every `len · 8 / R`;
//! * **onoff:R,on=B** — bursts of `B` octets sent back to back, one burst every `B · 8 / R`
//!   (average rate R, as the FQCN paper's on/off sources with ON = 10 KB);
//! * **poisson:R,pareto-mean=M,shape=S** — messages arriving as a Poisson process of rate
//!   `R / (8 M)`, each of a Pareto-distributed size with mean M and shape S > 1
//!   (x_m = M (S − 1) / S, size = x_m · U^(−1/S), truncated at 1000 M), sent back to back.
//!
//! A source that falls behind (backpressure) catches up by at most 1 ms of its schedule.
//!
//! With [`Source::with_udp`] the header travels in a UDP/IPv4 datagram instead (RFC 768,
//! RFC 791; UDP checksum 0 = none), source port `base + flow id`, so the agent's `five-tuple`
//! flow key gives every generated flow its own limiter.

pub mod report;
pub mod sink;

use cnm_proto::rng::Rng;
use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Bytes, Duration, Instant, Rate};
use std::fmt;
use std::str::FromStr;

/// The frames' identity and header layout, shared with the switch (which reads the departure
/// stamp an emulated host writes after the header): [`cnm_proto::wire::generated`].
pub use cnm_proto::wire::generated::{header_offset, GEN_ETHERTYPE, HEADER_LEN, MAGIC};
/// Smallest frame a source emits: MAC header + payload header, padded to the 60-octet minimum.
pub const MIN_FRAME_LEN: usize = 60;
/// Largest frame a source emits.
pub const MAX_FRAME_LEN: usize = 9000;
/// Octets of the IPv4 and UDP headers of UDP-encapsulated frames.
pub const UDP_HEADERS: usize = 28;
/// Most a late source catches up on its schedule.
pub const MAX_LAG: Duration = Duration::from_millis(1);

/// The measurement header at the start of every generated payload. Layout (big-endian):
/// magic(4) · flow(4) · seq(8) · sent(8, ns of the sender's clock); the zeros after it hold
/// the departure stamp an emulated host may write ([`cnm_proto::wire::generated`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadHeader {
    /// Flow id chosen by the generator.
    pub flow: u32,
    /// Sequence number, from 0 per flow.
    pub seq: u64,
    /// Send time (the generator's `now`).
    pub sent: Instant,
}

impl PayloadHeader {
    /// Parses the header at the start of `payload`; `None` if too short or the magic differs.
    pub fn parse(payload: &[u8]) -> Option<PayloadHeader> {
        let p = payload.get(..HEADER_LEN)?;
        let u32_at = |i: usize| u32::from_be_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        let u64_at = |i: usize| (u64::from(u32_at(i)) << 32) | u64::from(u32_at(i + 4));
        if u32_at(0) != MAGIC {
            return None;
        }
        Some(PayloadHeader {
            flow: u32_at(4),
            seq: u64_at(8),
            sent: Instant::from_nanos(u64_at(16)),
        })
    }

    /// Writes the header at the start of `out`; `None` if `out` is shorter than [`HEADER_LEN`].
    pub fn emit(&self, out: &mut [u8]) -> Option<()> {
        let p = out.get_mut(..HEADER_LEN)?;
        p[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        p[4..8].copy_from_slice(&self.flow.to_be_bytes());
        p[8..16].copy_from_slice(&self.seq.to_be_bytes());
        p[16..24].copy_from_slice(&self.sent.as_nanos().to_be_bytes());
        Some(())
    }
}

/// A traffic pattern.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    /// As fast as the agent takes frames.
    Greedy,
    /// Constant bit rate.
    Cbr(Rate),
    /// Bursts of `on` octets at an average `rate`.
    OnOff {
        /// Average rate.
        rate: Rate,
        /// Burst size.
        on: Bytes,
    },
    /// Poisson message arrivals with Pareto sizes.
    Poisson {
        /// Average rate.
        rate: Rate,
        /// Mean message size.
        mean: Bytes,
        /// Pareto shape (> 1).
        shape: f64,
    },
}

/// A pattern string that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad pattern {0:?}: expected greedy | cbr:R | onoff:R,on=BYTES | poisson:R,pareto-mean=BYTES,shape=S")]
pub struct PatternError(pub String);

impl FromStr for Pattern {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Pattern, PatternError> {
        let err = || PatternError(s.to_string());
        let (kind, args) = s.split_once(':').unwrap_or((s, ""));
        let mut parts = args.split(',');
        let rate = |p: Option<&str>| -> Result<Rate, PatternError> {
            let r: Rate = p.ok_or_else(err)?.parse().map_err(|_| err())?;
            if r == Rate::ZERO {
                return Err(err());
            }
            Ok(r)
        };
        let kv = |p: Option<&str>, key: &str| -> Result<String, PatternError> {
            let (k, v) = p.ok_or_else(err)?.split_once('=').ok_or_else(err)?;
            if k != key {
                return Err(err());
            }
            Ok(v.to_string())
        };
        let bytes = |v: String| -> Result<Bytes, PatternError> {
            let b: Bytes = v.parse().map_err(|_| err())?;
            if b == Bytes::ZERO {
                return Err(err());
            }
            Ok(b)
        };
        let pat = match kind {
            "greedy" if args.is_empty() => return Ok(Pattern::Greedy),
            "cbr" => Pattern::Cbr(rate(parts.next())?),
            "onoff" => Pattern::OnOff {
                rate: rate(parts.next())?,
                on: bytes(kv(parts.next(), "on")?)?,
            },
            "poisson" => {
                let rate = rate(parts.next())?;
                let mean = bytes(kv(parts.next(), "pareto-mean")?)?;
                let shape: f64 = kv(parts.next(), "shape")?.parse().map_err(|_| err())?;
                if !(shape > 1.0 && shape.is_finite()) {
                    return Err(err());
                }
                Pattern::Poisson { rate, mean, shape }
            }
            _ => return Err(err()),
        };
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(pat)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Greedy => f.write_str("greedy"),
            Pattern::Cbr(r) => write!(f, "cbr:{r}"),
            Pattern::OnOff { rate, on } => write!(f, "onoff:{rate},on={on}"),
            Pattern::Poisson { rate, mean, shape } => {
                write!(f, "poisson:{rate},pareto-mean={mean},shape={shape}")
            }
        }
    }
}

/// One flow's traffic source.
#[derive(Debug, Clone)]
pub struct Source {
    pattern: Pattern,
    flow: u32,
    dst: EthernetAddress,
    src: EthernetAddress,
    frame_len: usize,
    seq: u64,
    /// When the next frame (CBR) or the next burst (on/off, Poisson) is due.
    next_at: Instant,
    /// Octets left in the current burst.
    pending: u64,
    udp: Option<UdpEncap>,
}

/// Addresses of UDP/IPv4-encapsulated generated frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpEncap {
    /// IPv4 source address.
    pub src_ip: std::net::Ipv4Addr,
    /// IPv4 destination address.
    pub dst_ip: std::net::Ipv4Addr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
}

impl Source {
    /// A source of `frame_len`-octet frames (clamped to 60..=9000) from `src` to `dst`,
    /// starting at `start`.
    pub fn new(
        pattern: Pattern,
        flow: u32,
        dst: EthernetAddress,
        src: EthernetAddress,
        frame_len: usize,
        start: Instant,
    ) -> Source {
        Source {
            pattern,
            flow,
            dst,
            src,
            frame_len: frame_len.clamp(MIN_FRAME_LEN, MAX_FRAME_LEN),
            seq: 0,
            next_at: start,
            pending: 0,
            udp: None,
        }
    }

    /// Builder: carry the payload header in UDP/IPv4 with these addresses.
    pub fn with_udp(mut self, udp: UdpEncap) -> Source {
        self.udp = Some(udp);
        self.frame_len = self.frame_len.max(self.min_len());
        self
    }

    /// Smallest frame this source emits: the 60-octet minimum, or all headers.
    fn min_len(&self) -> usize {
        let headers = 14 + HEADER_LEN + if self.udp.is_some() { UDP_HEADERS } else { 0 };
        MIN_FRAME_LEN.max(headers)
    }

    /// The flow id.
    pub fn flow(&self) -> u32 {
        self.flow
    }

    /// Frames produced so far.
    pub fn sent(&self) -> u64 {
        self.seq
    }

    /// When the next frame is due (a greedy source is always due).
    pub fn next_due(&self) -> Instant {
        match self.pattern {
            Pattern::Greedy => Instant::ZERO,
            _ if self.pending > 0 => Instant::ZERO,
            _ => self.next_at,
        }
    }

    /// Writes the next frame into `out` if one is due at `now`, returning its length.
    /// `out` must hold at least 9000 octets (shorter buffers give `None`).
    pub fn next(&mut self, now: Instant, rng: &mut Rng, out: &mut [u8]) -> Option<usize> {
        let len = match self.pattern {
            Pattern::Greedy => self.frame_len,
            Pattern::Cbr(rate) => {
                if now < self.next_at {
                    return None;
                }
                self.next_at = self.next_at.max(lag_floor(now))
                    + rate.tx_time(Bytes::new(self.frame_len as u64));
                self.frame_len
            }
            Pattern::OnOff { rate, on } => {
                if self.pending == 0 {
                    if now < self.next_at {
                        return None;
                    }
                    self.next_at = self.next_at.max(lag_floor(now));
                    self.pending = on.get();
                    self.next_at += rate.tx_time(on);
                }
                self.take_pending()
            }
            Pattern::Poisson { rate, mean, shape } => {
                if self.pending == 0 {
                    if now < self.next_at {
                        return None;
                    }
                    self.next_at = self.next_at.max(lag_floor(now));
                    let m = mean.get() as f64;
                    let xm = m * (shape - 1.0) / shape;
                    // U in (0, 1]: never infinite.
                    let u = 1.0 - rng.next_f64();
                    let size = (xm * u.powf(-1.0 / shape)).min(1000.0 * m).max(1.0);
                    self.pending = size as u64;
                    let mean_gap = rate.tx_time(mean).as_nanos() as f64;
                    let gap = -mean_gap * (1.0 - rng.next_f64()).ln();
                    self.next_at += Duration::from_nanos(gap as u64);
                }
                self.take_pending()
            }
        };
        if out.len() < len {
            return None;
        }
        let frame = &mut out[..len];
        frame[..6].copy_from_slice(&self.dst.0);
        frame[6..12].copy_from_slice(&self.src.0);
        let h = PayloadHeader {
            flow: self.flow,
            seq: self.seq,
            sent: now,
        };
        let at = match self.udp {
            None => {
                frame[12..14].copy_from_slice(&GEN_ETHERTYPE.to_be_bytes());
                14
            }
            Some(u) => {
                frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
                emit_udp_ipv4(&u, &mut frame[14..]);
                14 + UDP_HEADERS
            }
        };
        h.emit(&mut frame[at..])?;
        frame[at + HEADER_LEN..].fill(0);
        self.seq += 1;
        Some(len)
    }

    fn take_pending(&mut self) -> usize {
        let n = (self.pending as usize).min(self.frame_len);
        self.pending -= n as u64;
        n.max(self.min_len())
    }
}

/// Writes IPv4 (RFC 791: version 4, IHL 5, TTL 64, protocol 17, header checksum) and UDP
/// (RFC 768: checksum 0) headers for a datagram filling all of `ip` (at least 28 octets).
fn emit_udp_ipv4(u: &UdpEncap, ip: &mut [u8]) {
    let total = ip.len().min(usize::from(u16::MAX)) as u16;
    let h = &mut ip[..UDP_HEADERS];
    h.fill(0);
    h[0] = 0x45;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[6] = 0x40; // DF
    h[8] = 64;
    h[9] = 17;
    h[12..16].copy_from_slice(&u.src_ip.octets());
    h[16..20].copy_from_slice(&u.dst_ip.octets());
    let mut sum: u32 = h[..20]
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    h[20..22].copy_from_slice(&u.src_port.to_be_bytes());
    h[22..24].copy_from_slice(&u.dst_port.to_be_bytes());
    h[24..26].copy_from_slice(&(total - 20).to_be_bytes());
}

fn lag_floor(now: Instant) -> Instant {
    Instant::from_nanos(now.as_nanos().saturating_sub(MAX_LAG.as_nanos()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
    const B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);

    #[test]
    fn header_round_trip() {
        let h = PayloadHeader {
            flow: 7,
            seq: 0x0102_0304_0506_0708,
            sent: Instant::from_nanos(123_456_789),
        };
        let mut b = [0xa5u8; 30];
        h.emit(&mut b).unwrap();
        assert_eq!(&b[..8], &[0x51, 0x43, 0x4e, 0x47, 0, 0, 0, 7]);
        assert_eq!(b[24], 0xa5);
        assert_eq!(PayloadHeader::parse(&b), Some(h));
        assert_eq!(PayloadHeader::parse(&b[..23]), None);
        b[0] = 0;
        assert_eq!(PayloadHeader::parse(&b), None);
        assert!(h.emit(&mut [0u8; 10]).is_none());
    }

    #[test]
    fn udp_encapsulation() {
        let u = UdpEncap {
            src_ip: [10, 0, 0, 1].into(),
            dst_ip: [10, 0, 0, 2].into(),
            src_port: 40_007,
            dst_port: 5001,
        };
        let mut small = Source::new(Pattern::Greedy, 7, B, A, 10, Instant::ZERO).with_udp(u);
        let mut buf = vec![0u8; MAX_FRAME_LEN];
        assert_eq!(
            small.next(Instant::ZERO, &mut Rng::new(1), &mut buf),
            Some(66)
        );
        let mut s = Source::new(Pattern::Greedy, 7, B, A, 100, Instant::ZERO).with_udp(u);
        let n = s
            .next(Instant::from_nanos(5), &mut Rng::new(1), &mut buf)
            .unwrap();
        let f = &buf[..n];
        assert_eq!(n, 100);
        let k = cnm_proto::wire::FlowKey::extract(f, 0).unwrap();
        let t = k.l4.unwrap();
        assert_eq!((t.proto, t.src_port, t.dst_port), (17, 40_007, 5001));
        // The IPv4 header checksum verifies (sums to 0xffff).
        let mut sum: u32 = f[14..34]
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum();
        sum = (sum & 0xffff) + (sum >> 16);
        assert_eq!(sum, 0xffff);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 86);
        let off = header_offset(0x0800, &f[14..]).unwrap();
        let h = PayloadHeader::parse(&f[14 + off..]).unwrap();
        assert_eq!((h.flow, h.seq), (7, 0));
        assert_eq!(header_offset(0x86dd, &f[14..]), None);
    }

    #[test]
    fn patterns_parse() {
        assert_eq!("greedy".parse::<Pattern>().unwrap(), Pattern::Greedy);
        assert_eq!(
            "cbr:10mbit".parse::<Pattern>().unwrap(),
            Pattern::Cbr(Rate::from_mbps(10))
        );
        assert_eq!(
            "onoff:1gbit,on=10KB".parse::<Pattern>().unwrap(),
            Pattern::OnOff {
                rate: Rate::from_gbps(1),
                on: Bytes::new(10_000)
            }
        );
        let p: Pattern = "poisson:100mbit,pareto-mean=100KB,shape=1.5"
            .parse()
            .unwrap();
        assert_eq!(p.to_string().parse::<Pattern>().unwrap(), p);
        for bad in [
            "",
            "cbr",
            "cbr:0",
            "onoff:1gbit",
            "poisson:1gbit,pareto-mean=1KB,shape=1",
            "x",
            "greedy:1",
            "cbr:1mbit,x",
        ] {
            assert!(bad.parse::<Pattern>().is_err(), "{bad}");
        }
    }

    /// Average rate of `p` over `secs` of virtual time, polling every 10 µs.
    fn measured_rate(p: Pattern, secs: u64) -> f64 {
        let mut s = Source::new(p, 1, B, A, 1000, Instant::ZERO);
        let mut rng = Rng::new(5);
        let mut buf = vec![0u8; MAX_FRAME_LEN];
        let mut bytes = 0u64;
        let end = Instant::ZERO + Duration::from_secs(secs);
        let mut now = Instant::ZERO;
        while now < end {
            while let Some(n) = s.next(now, &mut rng, &mut buf) {
                bytes += n as u64;
                assert_eq!(PayloadHeader::parse(&buf[14..n]).unwrap().seq + 1, s.sent());
            }
            now += Duration::from_micros(10);
        }
        bytes as f64 * 8.0 / secs as f64
    }

    #[test]
    fn rates_match_patterns() {
        let r = measured_rate(Pattern::Cbr(Rate::from_mbps(100)), 1);
        assert!((r / 100e6 - 1.0).abs() < 0.01, "{r}");
        let r = measured_rate(
            Pattern::OnOff {
                rate: Rate::from_mbps(50),
                on: Bytes::new(10_000),
            },
            1,
        );
        assert!((r / 50e6 - 1.0).abs() < 0.01, "{r}");
        // Heavy tail: allow 15 % over 20 s.
        let r = measured_rate(
            Pattern::Poisson {
                rate: Rate::from_mbps(20),
                mean: Bytes::new(20_000),
                shape: 2.5,
            },
            20,
        );
        assert!((r / 20e6 - 1.0).abs() < 0.15, "{r}");
        let mut g = Source::new(Pattern::Greedy, 1, B, A, 10, Instant::ZERO);
        let mut buf = vec![0u8; MAX_FRAME_LEN];
        assert_eq!(g.next(Instant::ZERO, &mut Rng::new(1), &mut buf), Some(60));
        assert_eq!(g.next_due(), Instant::ZERO);
    }
}
