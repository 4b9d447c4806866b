//! Generated test frames: where their measurement header sits, and the departure stamp an
//! emulated host writes into it.
//!
//! # The frames
//! The project's traffic generators (`rp_agent::gen`) send Ethernet II frames on EtherType
//! 0x88B6 (IEEE 802 "local experimental EtherType 2", IEEE Std 802-2014 clause 9.2.4), or UDP
//! datagrams over IPv4 (RFC 768, RFC 791), whose payload starts with a measurement header:
//!
//! ```text
//! offset  0  magic      "QCNG" (0x5143_4E47)
//!         4  flow       u32, the generator's flow id
//!         8  seq        u64, from 0 per flow
//!        16  sent       u64, ns of the generator's clock when it made the frame
//!        24  departure  u64, ns of the host's clock when the frame's first bit was meant to
//!                       leave it (0: not stamped)             -- optional, see below
//! ```
//!
//! All fields big-endian. The generators write the first 24 octets and zero the rest of the
//! payload, so the departure field reads 0 unless an emulated host stamped it.
//!
//! # The departure stamp
//! In a namespace emulation each host is a process, and a process sends a frame when its loop
//! runs: after the instant its pacers meant, by the loop's wake-up and turn (tens of µs on a
//! busy 2-core machine; the agent measures it, `tx_late`). A switch that takes the frame's
//! arrival from its receive time sees those frames bunched, and its congestion point answers
//! the bunching (the fidelity check's "senders' timing"). A physical host has no such lag:
//! its NIC starts the frame at the instant the pacer released it.
//!
//! The stamp carries that instant to the switch: the agent of an emulated host, when told to
//! (`departure_stamps`), writes into every generated frame it sends the instant its line,
//! pacers and PAUSE allowed the frame's first bit to start, back-dated by at most its catch-up
//! as its line clock charges it (`CLOCK_MONOTONIC`, the clock every daemon of the machine
//! reads). The switch's ingress stage (`cp_switch` daemon module
//! `stage`) of a port told to trust stamps then places the frame where the link would have:
//! last bit at `departure + wire time + the link's propagation delay`, as long as the frame
//! reached it before that instant. The link's delay is the lookahead that absorbs the
//! sender's lag (the idea of conservative parallel simulation: a link of delay `D` lets its
//! receiver run `D` behind its sender without changing what it computes). Frames later than
//! that are placed when read and counted.
//!
//! The stamp is a sideband of the emulation, in a header only this project's generators and
//! sinks read; real traffic (iperf3 through a TAP agent) carries none and is placed by its
//! receive time. Nothing here trusts a stamp blindly: [`departure`] only reads one from a
//! frame whose header is there and whose field is not 0, and the stage bounds what a stamp
//! can do to the frame's placement.

use super::walk;
use crate::Instant;

/// EtherType of generated frames: IEEE local experimental EtherType 2 (IEEE Std 802-2014
/// clause 9.2.4).
pub const GEN_ETHERTYPE: u16 = 0x88B6;
/// First four octets of every measurement header: "QCNG".
pub const MAGIC: u32 = 0x5143_4E47;
/// Length of the measurement header the generators write (without the departure field).
pub const HEADER_LEN: usize = 24;
/// Offset of the departure field in the measurement header.
pub const DEPARTURE_AT: usize = HEADER_LEN;
/// Length of a measurement header with its departure field.
pub const STAMPED_HEADER_LEN: usize = DEPARTURE_AT + 8;

/// Where the measurement header of a generated frame starts in its payload, once `walk` found
/// `ethertype` with its payload at `payload`: right there for 0x88B6, after the IPv4 and UDP
/// headers for UDP over IPv4 (IHL from the header, protocol 17). `None` otherwise. The magic
/// is not checked here.
pub fn header_offset(ethertype: u16, payload: &[u8]) -> Option<usize> {
    match ethertype {
        GEN_ETHERTYPE => Some(0),
        0x0800 => {
            let ihl = usize::from(*payload.first()? & 0x0f) * 4;
            (payload.get(9) == Some(&17) && ihl >= 20).then_some(ihl + 8)
        }
        _ => None,
    }
}

/// Where the departure field of `frame` starts, when `frame` is a generated frame (VLAN tags
/// and a CN-TAG walked through) with a measurement header long enough to hold one: its offset
/// from the start of the frame. `None` for anything else, however malformed.
pub fn departure_offset(frame: &[u8]) -> Option<usize> {
    let info = walk(frame).ok()?;
    let payload = frame.get(info.payload_offset..)?;
    let ethertype: u16 = info.ethertype.into();
    let at = info.payload_offset + header_offset(ethertype, payload)?;
    let h = frame.get(at..at + STAMPED_HEADER_LEN)?;
    (h[..4] == MAGIC.to_be_bytes()).then_some(at + DEPARTURE_AT)
}

/// The departure stamp of `frame`: `None` when it is not a generated frame with room for one,
/// or when the field is 0 (not stamped).
pub fn departure(frame: &[u8]) -> Option<Instant> {
    let at = departure_offset(frame)?;
    let b: [u8; 8] = frame.get(at..at + 8)?.try_into().ok()?;
    let ns = u64::from_be_bytes(b);
    (ns != 0).then(|| Instant::from_nanos(ns))
}

/// Writes `at` as the departure stamp of `frame`; false (the frame untouched) when it is not a
/// generated frame with room for one. An instant of 0 ns is written as 1 ns, so that the
/// stamp never reads as "not stamped".
pub fn set_departure(frame: &mut [u8], at: Instant) -> bool {
    let Some(off) = departure_offset(frame) else {
        return false;
    };
    let ns = at.as_nanos().max(1);
    match frame.get_mut(off..off + 8) {
        Some(f) => {
            f.copy_from_slice(&ns.to_be_bytes());
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A generated frame on 0x88B6 of `len` octets: MAC header, then the measurement header
    /// (magic, flow 7, seq 1, sent 5 ns), zeros after it.
    fn gen_frame(len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&GEN_ETHERTYPE.to_be_bytes());
        f[14..18].copy_from_slice(&MAGIC.to_be_bytes());
        f[18..22].copy_from_slice(&7u32.to_be_bytes());
        f[22..30].copy_from_slice(&1u64.to_be_bytes());
        f[30..38].copy_from_slice(&5u64.to_be_bytes());
        f
    }

    #[test]
    fn a_generated_frame_takes_a_stamp_and_gives_it_back() {
        let mut f = gen_frame(60);
        // 14 (MAC header) + 24 (measurement header): the field is at 38.
        assert_eq!(departure_offset(&f), Some(38));
        assert_eq!(departure(&f), None, "zero means not stamped");
        assert!(set_departure(
            &mut f,
            Instant::from_nanos(0x0102_0304_0506_0708)
        ));
        assert_eq!(&f[38..46], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            departure(&f),
            Some(Instant::from_nanos(0x0102_0304_0506_0708))
        );
        // The rest of the header is untouched.
        assert_eq!(&f[30..38], &5u64.to_be_bytes());
        // Instant 0 is written as 1 ns.
        assert!(set_departure(&mut f, Instant::ZERO));
        assert_eq!(departure(&f), Some(Instant::from_nanos(1)));
    }

    #[test]
    fn tags_and_udp_are_walked_through() {
        // Priority tag (0x8100, PCP 3) and CN-TAG (0x22E9, RPID 9) before 0x88B6.
        let g = gen_frame(60);
        let mut f = g[..12].to_vec();
        f.extend_from_slice(&[0x81, 0x00, 0x60, 0x00, 0x22, 0xE9, 0x00, 0x09]);
        f.extend_from_slice(&g[12..]);
        assert_eq!(departure_offset(&f), Some(46));
        assert!(set_departure(&mut f, Instant::from_nanos(77)));
        assert_eq!(departure(&f), Some(Instant::from_nanos(77)));
        // UDP over IPv4: IHL 5, protocol 17; the header after 14 + 20 + 8 octets.
        let mut u = vec![0u8; 80];
        u[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        u[14] = 0x45;
        u[23] = 17;
        u[42..46].copy_from_slice(&MAGIC.to_be_bytes());
        assert_eq!(departure_offset(&u), Some(42 + 24));
        // With IP options (IHL 6) the header moves 4 octets on.
        u[14] = 0x46;
        assert_eq!(departure_offset(&u), None, "the magic is not at 46");
        u[46..50].copy_from_slice(&MAGIC.to_be_bytes());
        assert_eq!(departure_offset(&u), Some(46 + 24));
    }

    #[test]
    fn anything_else_has_no_stamp_and_is_left_alone() {
        // Too short to hold the field: 14 + 24 + 7 octets.
        let mut f = gen_frame(45);
        assert_eq!(departure_offset(&f), None);
        assert!(!set_departure(&mut f, Instant::from_nanos(9)));
        assert_eq!(f, gen_frame(45));
        // Wrong magic.
        let mut f = gen_frame(60);
        f[14] ^= 1;
        assert!(!set_departure(&mut f, Instant::from_nanos(9)));
        assert_eq!(departure(&f), None);
        // Another EtherType (IPv6), UDP with another protocol, truncated frames, empty input.
        let mut f = gen_frame(60);
        f[12..14].copy_from_slice(&0x86DDu16.to_be_bytes());
        assert_eq!(departure_offset(&f), None);
        let mut u = vec![0u8; 80];
        u[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        u[14] = 0x45;
        u[23] = 6;
        assert_eq!(departure_offset(&u), None);
        u[23] = 17;
        u[14] = 0x44; // IHL 4 is not a valid IPv4 header
        assert_eq!(departure_offset(&u), None);
        for n in 0..60 {
            assert_eq!(departure(&gen_frame(60)[..n]), None, "{n} octets");
        }
        assert_eq!(departure(&[]), None);
    }
}
