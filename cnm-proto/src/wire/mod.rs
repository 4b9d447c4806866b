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
}
