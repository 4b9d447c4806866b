//! The experimental explicit-rate feedback message (non-standard).
//!
//! **Not part of any standard.** The explicit-rate scheme of Jain, Jiang et al. (E-FECN, 2006)
//! has a switch measure its load every interval and advertise a rate `r` to the sources; no frame
//! format was ever standardized. This project carries it in a message of its own on the IEEE 802
//! local experimental EtherType 1, 0x88B5 (IEEE 802 clause 9.2.2: for experiments and
//! development, never for products). Emitter, parser and the Wireshark dissector share this
//! **\[choice\]** layout, 26 octets, big-endian:
//!
//! | octets | field |
//! |---|---|
//! | 0 | version, 0 |
//! | 1 | reserved, 0 |
//! | 2-3 | encapsulated priority: the priority of the flow, in the 3 most significant bits |
//! | 4-11 | CPID of the advertising switch queue (same layout as the CNM's, [`CpId`]) |
//! | 12-19 | advertised rate, `u64` bit/s |
//! | 20-25 | encapsulated destination MAC: the DA of the frames the rate applies to |
//!
//! As for the CNM, the frame is addressed to the source of the flow and zero-padded to 60
//! octets; octets after the 26 of the message are ignored. Unknown versions parse.

use super::ethernet::{self, EthernetFrame};
use super::vlan::VlanTag;
use super::{
    be_u16, be_u64, put_u16, put_u64, CpId, Error, EtherType, EthernetAddress, EthernetRepr,
    Result, VlanInfo, MIN_FRAME_LEN,
};
use crate::time::Rate;

/// Byte ranges after EtherType 0x88B5 (this project's **\[choice\]** layout, module docs).
mod field {
    use core::ops::Range;
    /// Version, 1 octet.
    pub const VERSION: usize = 0;
    /// Reserved, 1 octet.
    pub const RESERVED: usize = 1;
    /// Encapsulated priority, 2 octets, priority in the 3 MSBs.
    pub const ENCAP_PRIORITY: Range<usize> = 2..4;
    /// CPID, 8 octets.
    pub const CPID: Range<usize> = 4..12;
    /// Advertised rate in bit/s, 8 octets.
    pub const RATE: Range<usize> = 12..20;
    /// Encapsulated destination MAC address, 6 octets.
    pub const ENCAP_DA: Range<usize> = 20..26;
}

/// Length of the message.
pub const MSG_LEN: usize = field::ENCAP_DA.end;

/// A view of a rate feedback message: the octets after EtherType 0x88B5.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateFeedback<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> RateFeedback<T> {
    /// A view without length check: accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        RateFeedback { buffer }
    }

    /// A view of a buffer holding at least the 26 octets of the message.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let m = Self::new_unchecked(buffer);
        m.check_len()?;
        Ok(m)
    }

    /// `Truncated` if the buffer is shorter than 26 octets.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < MSG_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (0; others are kept).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// Reserved octet.
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED]
    }

    /// The whole encapsulated priority field.
    pub fn encap_priority_field(&self) -> u16 {
        be_u16(self.buffer.as_ref(), field::ENCAP_PRIORITY.start)
    }

    /// Encapsulated priority 0..=7 (the field's 3 MSBs).
    pub fn encap_priority(&self) -> u8 {
        (self.encap_priority_field() >> 13) as u8
    }

    /// CPID of the advertising queue.
    pub fn cpid(&self) -> CpId {
        CpId(be_u64(self.buffer.as_ref(), field::CPID.start))
    }

    /// Advertised rate.
    pub fn rate(&self) -> Rate {
        Rate::from_bps(be_u64(self.buffer.as_ref(), field::RATE.start))
    }

    /// Encapsulated destination MAC address.
    pub fn encap_dst(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::ENCAP_DA]);
        EthernetAddress(a)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RateFeedback<T> {
    /// Sets the version.
    pub fn set_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::VERSION] = v;
    }

    /// Sets the reserved octet.
    pub fn set_reserved(&mut self, v: u8) {
        self.buffer.as_mut()[field::RESERVED] = v;
    }

    /// Sets the encapsulated priority (low 3 bits of `p`, in the 3 MSBs, rest zero).
    pub fn set_encap_priority(&mut self, p: u8) {
        put_u16(
            self.buffer.as_mut(),
            field::ENCAP_PRIORITY.start,
            u16::from(p & 7) << 13,
        );
    }

    /// Sets the CPID.
    pub fn set_cpid(&mut self, c: CpId) {
        put_u64(self.buffer.as_mut(), field::CPID.start, c.0);
    }

    /// Sets the advertised rate.
    pub fn set_rate(&mut self, r: Rate) {
        put_u64(self.buffer.as_mut(), field::RATE.start, r.bps());
    }

    /// Sets the encapsulated destination MAC address.
    pub fn set_encap_dst(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::ENCAP_DA].copy_from_slice(&a.0);
    }
}

/// A rate feedback message as a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RateFeedbackRepr {
    /// Version (0).
    pub version: u8,
    /// Priority of the flow, 0..=7.
    pub encap_priority: u8,
    /// CPID of the advertising queue.
    pub cpid: CpId,
    /// Advertised rate.
    pub rate: Rate,
    /// Destination MAC of the frames the rate applies to.
    pub encap_dst: EthernetAddress,
}

impl RateFeedbackRepr {
    /// Reads a message.
    pub fn parse<T: AsRef<[u8]>>(m: &RateFeedback<T>) -> Result<Self> {
        m.check_len()?;
        Ok(RateFeedbackRepr {
            version: m.version(),
            encap_priority: m.encap_priority(),
            cpid: m.cpid(),
            rate: m.rate(),
            encap_dst: m.encap_dst(),
        })
    }

    /// Length of the message (26).
    pub const fn buffer_len(&self) -> usize {
        MSG_LEN
    }

    /// Writes the 26 octets of the message (reserved = 0; priority bits beyond 3 dropped).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, m: &mut RateFeedback<T>) {
        m.set_version(self.version);
        m.set_reserved(0);
        m.set_encap_priority(self.encap_priority);
        m.set_cpid(self.cpid);
        m.set_rate(self.rate);
        m.set_encap_dst(self.encap_dst);
    }
}

/// Builds a whole rate feedback frame in `out` and returns its length (60: zero-padded):
/// DA `dst` (the source of the flow), SA `src` (the advertising switch), an 802.1Q tag when
/// `vlan` is given, EtherType 0x88B5 and the message. `BufferTooSmall` if `out` is too small.
pub fn build_rate_feedback_frame(
    dst: EthernetAddress,
    src: EthernetAddress,
    vlan: Option<VlanInfo>,
    repr: &RateFeedbackRepr,
    out: &mut [u8],
) -> Result<usize> {
    let tag_len = if vlan.is_some() { 4 } else { 0 };
    let len = ethernet::HEADER_LEN + tag_len + MSG_LEN;
    let padded = len.max(MIN_FRAME_LEN);
    let out = out.get_mut(..padded).ok_or(Error::BufferTooSmall)?;
    let mut eth = EthernetFrame::new_unchecked(&mut *out);
    EthernetRepr {
        src_addr: src,
        dst_addr: dst,
        ethertype: if vlan.is_some() {
            EtherType::Vlan
        } else {
            EtherType::RateFeedback
        },
    }
    .emit(&mut eth);
    let payload = eth.payload_mut();
    if let Some(v) = vlan {
        let mut tag = VlanTag::new_unchecked(&mut *payload);
        tag.set_tci(0);
        tag.set_pcp(v.pcp);
        tag.set_dei(v.dei);
        tag.set_vid(v.vid);
        tag.set_ethertype(EtherType::RateFeedback);
    }
    repr.emit(&mut RateFeedback::new_unchecked(
        &mut payload[tag_len..tag_len + MSG_LEN],
    ));
    out[len..].fill(0);
    Ok(padded)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2.5 Gb/s advertised by CP 02:c0:00:00:00:01 index 9 for priority 3 traffic.
    #[rustfmt::skip]
    const FIXTURE: [u8; 28] = [
        0x00,                                           // version 0
        0x00,                                           // reserved
        0x60, 0x00,                                     // priority 3 in the 3 MSBs
        0x02, 0xc0, 0x00, 0x00, 0x00, 0x01, 0x00, 0x09, // CPID
        0x00, 0x00, 0x00, 0x00, 0x95, 0x02, 0xf9, 0x00, // 2 500 000 000 bit/s
        0x02, 0x00, 0x00, 0x00, 0x00, 0x0b,             // encapsulated DA
        0x00, 0x00,                                     // Ethernet padding (ignored)
    ];

    fn repr() -> RateFeedbackRepr {
        RateFeedbackRepr {
            version: 0,
            encap_priority: 3,
            cpid: CpId::new(EthernetAddress([2, 0xc0, 0, 0, 0, 1]), 9),
            rate: Rate::from_mbps(2500),
            encap_dst: EthernetAddress([2, 0, 0, 0, 0, 0x0b]),
        }
    }

    #[test]
    fn parse_fixture() {
        let m = RateFeedback::new_checked(&FIXTURE[..]).unwrap();
        assert_eq!(m.reserved(), 0);
        assert_eq!(m.encap_priority_field(), 0x6000);
        assert_eq!(RateFeedbackRepr::parse(&m).unwrap(), repr());
    }

    #[test]
    fn emit_with_prefill() {
        let mut buf = [0xa5u8; 27];
        repr().emit(&mut RateFeedback::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..26], &FIXTURE[..26]);
        assert_eq!(buf[26], 0xa5);
        assert_eq!(repr().buffer_len(), 26);
    }

    #[test]
    fn build_frames() {
        let (dst, src) = (
            EthernetAddress([2, 0, 0, 0, 0, 0x0a]),
            EthernetAddress([2, 0xc0, 0, 0, 0, 1]),
        );
        let mut out = [0xa5u8; 61];
        assert_eq!(
            build_rate_feedback_frame(dst, src, None, &repr(), &mut out),
            Ok(60)
        );
        let i = super::super::walk(&out[..60]).unwrap();
        assert_eq!(
            (i.dst, i.src, i.vlan, i.ethertype),
            (dst, src, None, EtherType::RateFeedback)
        );
        assert_eq!(&out[14..40], &FIXTURE[..26]);
        assert!(out[40..60].iter().all(|&b| b == 0));
        assert_eq!(out[60], 0xa5);

        let v = VlanInfo {
            pcp: 6,
            dei: false,
            vid: 100,
        };
        assert_eq!(
            build_rate_feedback_frame(dst, src, Some(v), &repr(), &mut out),
            Ok(60)
        );
        let i = super::super::walk(&out[..60]).unwrap();
        assert_eq!(
            (i.vlan, i.ethertype, i.payload_offset),
            (Some(v), EtherType::RateFeedback, 18)
        );
        let m = RateFeedback::new_checked(&out[18..60]).unwrap();
        assert_eq!(RateFeedbackRepr::parse(&m), Ok(repr()));
        assert_eq!(
            build_rate_feedback_frame(dst, src, None, &repr(), &mut [0u8; 59]),
            Err(Error::BufferTooSmall)
        );
    }

    #[test]
    fn short_and_other_versions() {
        assert_eq!(
            RateFeedback::new_checked(&FIXTURE[..25]).unwrap_err(),
            Error::Truncated
        );
        let mut b = FIXTURE;
        b[0] = 7;
        let m = RateFeedback::new_checked(&b[..]).unwrap();
        assert_eq!(RateFeedbackRepr::parse(&m).unwrap().version, 7);
    }
}
