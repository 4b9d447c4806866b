//! Zero-copy wire codecs for the frames of the QCN dataplane.
//!
//! The shape follows smoltcp's `wire` module. Every header has
//!
//! * a view `Header<T: AsRef<[u8]>>` over a byte buffer, with a private `field` module listing the
//!   byte range of each field (each range cites the clause that defines it), `new_unchecked`,
//!   and `new_checked`, which validates the buffer length once so that no accessor can panic
//!   afterwards; setters exist when `T: AsMut<[u8]>`;
//! * a `HeaderRepr`, a plain value with `parse(&view)`, `buffer_len()` and `emit(&mut view)`.
//!
//! Views cover the bytes that follow the EtherType announcing them, so they stack like the
//! headers do: [`EthernetFrame::payload`] → [`VlanTag`] → [`CnTag`] → [`Cnm`].
//!
//! Parsing never allocates and never panics on frame contents: every parse of arbitrary bytes
//! returns `Ok` or an [`Error`]. Values the standards leave open are kept, not rejected: an
//! unknown EtherType is [`EtherType::Unknown`], a CNM with version ≠ 0 parses, an unknown MAC
//! Control opcode is [`MacControlRepr::Unknown`].
//!
//! Frames covered:
//!
//! | module | frame | source |
//! |---|---|---|
//! | [`ethernet`] | Ethernet II header, MAC addresses, EtherTypes | IEEE 802.3 clause 3.2 |
//! | [`vlan`] | 802.1Q / 802.1ad tag | IEEE 802.1Q clause 9.6 |
//! | [`cn_tag`] | CN-TAG (0x22E9) | IEEE 802.1Q clause 33.3 |
//! | [`cnm`] | Congestion Notification Message (0x22E7) and its builder | IEEE 802.1Q clause 33.4 |
//! | [`pause`] | 802.3x PAUSE and 802.1Qbb PFC (0x8808) | IEEE 802.3 Annex 31B, 31D; 802.1Q clause 36 |
//! | [`lldp`] | LLDP Congestion Notification TLV | IEEE 802.1Q Annex D |
//! | [`rate_feedback`] | experimental explicit-rate feedback (0x88B5) | this project (non-standard) |
//! | [`walk()`] | one pass over the L2 headers of a frame | — |
//! | [`flow`] | flow key (MACs, VID, priority, RPID, IP 5-tuple) | RFC 791, RFC 8200 |
//! | [`generated`] | generated test frames' measurement header and departure stamp | this project (non-standard) |
//! | [`segment`] | `virtio_net_hdr`, TCP/IPv4 segmentation (TSO) and coalescing (GRO), checksums | RFC 791, 793, 1071, 3168 |

use core::fmt;

pub mod cn_tag;
pub mod cnm;
pub mod ethernet;
pub mod flow;
pub mod generated;
pub mod lldp;
pub mod pause;
pub mod rate_feedback;
pub mod segment;
pub mod vlan;
mod walk;

pub use cn_tag::{CnTag, CnTagRepr};
pub use cnm::{build_cnm, quantize_queue, Cnm, CnmParams, CnmRepr, CpId};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
pub use flow::{FiveTuple, FlowKey};
pub use lldp::{LldpCnTlv, LldpCnTlvRepr};
pub use pause::{build_pause_frame, MacControl, MacControlRepr};
pub use rate_feedback::{RateFeedback, RateFeedbackRepr};
pub use vlan::{VlanRepr, VlanTag};
pub use walk::{walk, L2Info, VlanInfo};

/// The error of every codec in this module. Small and `Copy`: parsing never allocates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than the header, or than a length field inside it says.
    Truncated,
    /// A field holds a value the format forbids (e.g. a CNM encapsulated MSDU length above 64,
    /// a TLV that is not the one asked for, a MAC address that does not parse).
    Malformed,
    /// The output buffer given to an emitter or builder is too small for the frame.
    BufferTooSmall,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated",
            Error::Malformed => "malformed",
            Error::BufferTooSmall => "buffer too small",
        })
    }
}

impl std::error::Error for Error {}

/// The result of every codec in this module.
pub type Result<T> = core::result::Result<T, Error>;

/// Minimum length of an Ethernet frame without its FCS (IEEE 802.3 clause 4.4.2, `minFrameSize`
/// 64 octets including the 4-octet FCS). Builders pad their frames with zeros up to this length.
pub const MIN_FRAME_LEN: usize = 60;

/// A big-endian `u16` at `at`. Panics if out of range: callers index inside validated views.
#[inline]
/// Lower-case hex digits of `bytes` into `out`, two per octet, each pair followed by `sep` when
/// one is given (none after the last); returns the text. What `{:02x}` prints, without the
/// formatting machinery: addresses and CPIDs are written into every CNM's trace line, and one
/// `write!` of six octets cost about 1 200 instructions.
fn hex_text<'a>(bytes: &[u8], sep: Option<u8>, out: &'a mut [u8]) -> &'a str {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut n = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if i > 0 {
            if let Some(c) = sep {
                if let Some(o) = out.get_mut(n) {
                    *o = c;
                }
                n += 1;
            }
        }
        for d in [b >> 4, b & 0x0f] {
            if let Some(o) = out.get_mut(n) {
                *o = DIGITS[usize::from(d)];
            }
            n += 1;
        }
    }
    // ASCII throughout: never an error.
    core::str::from_utf8(&out[..n.min(out.len())]).unwrap_or("")
}

fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Writes `v` big-endian at `at`.
#[inline]
fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// A big-endian `u64` at `at`.
#[inline]
fn be_u64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

/// Writes `v` big-endian at `at`.
#[inline]
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_display() {
        assert_eq!(Error::Truncated.to_string(), "truncated");
        assert_eq!(Error::Malformed.to_string(), "malformed");
        assert_eq!(Error::BufferTooSmall.to_string(), "buffer too small");
        let e: Box<dyn std::error::Error> = Box::new(Error::Truncated);
        assert_eq!(e.to_string(), "truncated");
    }

    #[test]
    fn big_endian_helpers() {
        let mut b = [0u8; 10];
        put_u16(&mut b, 1, 0x1234);
        put_u64(&mut b, 2, 0x0102_0304_0506_0708);
        assert_eq!(be_u16(&b, 0), 0x0012);
        assert_eq!(be_u64(&b, 2), 0x0102_0304_0506_0708);
    }

    /// What `{:02x}` with separators prints, for every octet value; a short buffer gives the
    /// text that fits.
    #[test]
    fn hex_text_is_what_the_formatter_prints() {
        for b in 0..=255u8 {
            let want = format!("{b:02x}:{:02x}", b.wrapping_mul(7));
            assert_eq!(
                hex_text(&[b, b.wrapping_mul(7)], Some(b':'), &mut [0; 5]),
                want
            );
        }
        assert_eq!(
            hex_text(&0x0200_0000_0000_0023u64.to_be_bytes(), None, &mut [0; 16]),
            "0200000000000023"
        );
        assert_eq!(hex_text(&[0xab, 0xcd], Some(b'-'), &mut [0; 3]), "ab-");
        assert_eq!(hex_text(&[], Some(b':'), &mut [0; 3]), "");
        let a = EthernetAddress::new(0x02, 0xa0, 0, 0x0f, 0xff, 0x10);
        assert_eq!(a.to_string(), "02:a0:00:0f:ff:10");
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"02:a0:00:0f:ff:10\"");
        let c = cnm::CpId(0x0123_4567_89ab_cdef);
        assert_eq!(c.to_string(), "0123456789abcdef");
        assert_eq!(serde_json::to_string(&c).unwrap(), "\"0123456789abcdef\"");
    }
}
