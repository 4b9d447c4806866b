//! The benchmark's test frames.
//!
//! Only frames the blaster made may count, so each carries a marker: EtherType 0x88B6 (IEEE
//! 802 "Local Experimental EtherType 2", IEEE Std 802-2014 clause 9.2.4, reserved for
//! experiments and never emitted by the kernel), then
//!
//! ```text
//! offset 14  magic "QTB1"   (4)
//! offset 18  token          (4, big endian) — random per measurement, so frames of an
//!                                             earlier measurement still in flight never count
//! offset 22  kind           (1) — 0 = data, 1 = learning frame sent backwards before a run
//! offset 23  sequence       (8, big endian)
//! offset 31  zero padding up to the frame size
//! ```
//!
//! Sizes are Ethernet frames as a packet socket sees them: header and payload, without the
//! 4-octet FCS (so "64 B" is 64 octets on the socket, "1500 B" fits a 1500-octet MTU with
//! 1486 octets of payload).

/// Local Experimental EtherType 2 (IEEE Std 802-2014, 9.2.4).
pub const ETHERTYPE: u16 = 0x88B6;

/// Marker after the EtherType.
pub const MAGIC: [u8; 4] = *b"QTB1";

/// Smallest frame: the 60 octets Ethernet needs before the FCS (IEEE 802.3 clause 3.2.8
/// minimum of 64 octets including the FCS).
pub const MIN_SIZE: usize = 60;

/// Largest frame for a 1500-octet MTU: 14-octet header + 1500.
pub const MAX_SIZE: usize = 1514;

const HEADER: usize = 31;

/// What a test frame is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Counted by the receiver.
    Data = 0,
    /// Sent from the receiving host first, so that switches learn its address.
    Learn = 1,
}

/// Writes a test frame of `out.len()` octets (≥ [`MIN_SIZE`]) into `out`.
pub fn build(out: &mut [u8], dst: [u8; 6], src: [u8; 6], token: u32, kind: Kind, seq: u64) {
    debug_assert!(out.len() >= MIN_SIZE);
    out.fill(0);
    out[0..6].copy_from_slice(&dst);
    out[6..12].copy_from_slice(&src);
    out[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    out[14..18].copy_from_slice(&MAGIC);
    out[18..22].copy_from_slice(&token.to_be_bytes());
    out[22] = kind as u8;
    set_seq(out, seq);
}

/// Rewrites the sequence number of a frame made by [`build`].
pub fn set_seq(frame: &mut [u8], seq: u64) {
    frame[23..31].copy_from_slice(&seq.to_be_bytes());
}

/// The sequence number if `frame` is a data frame of measurement `token`; `None` for anything
/// else (other traffic, other measurements, short frames).
pub fn data_seq(frame: &[u8], token: u32) -> Option<u64> {
    if frame.len() < HEADER
        || frame[12..14] != ETHERTYPE.to_be_bytes()
        || frame[14..18] != MAGIC
        || frame[18..22] != token.to_be_bytes()
        || frame[22] != Kind::Data as u8
    {
        return None;
    }
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&frame[23..31]);
    Some(u64::from_be_bytes(seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_and_match() {
        let mut f = [0xa5u8; 64];
        build(
            &mut f,
            [2, 0, 0, 0, 2, 1],
            [2, 0, 0, 0, 1, 1],
            0xdead_beef,
            Kind::Data,
            7,
        );
        assert_eq!(&f[0..6], &[2, 0, 0, 0, 2, 1]);
        assert_eq!(&f[12..14], &[0x88, 0xb6]);
        assert_eq!(&f[31..], &[0u8; 33][..]);
        assert_eq!(data_seq(&f, 0xdead_beef), Some(7));
        set_seq(&mut f, u64::MAX);
        assert_eq!(data_seq(&f, 0xdead_beef), Some(u64::MAX));
        assert_eq!(data_seq(&f, 1), None, "other measurement");
        assert_eq!(data_seq(&f[..30], 0xdead_beef), None, "short");
        let mut l = [0u8; 60];
        build(&mut l, [0xff; 6], [2; 6], 5, Kind::Learn, 0);
        assert_eq!(data_seq(&l, 5), None, "learning frames do not count");
        let mut other = f;
        other[12] = 0x08;
        other[13] = 0x00;
        assert_eq!(data_seq(&other, 0xdead_beef), None);
    }

    #[test]
    fn never_panics_on_short_input() {
        for n in 0..40 {
            let v = vec![0x88u8; n];
            let _ = data_seq(&v, 0);
        }
    }
}
