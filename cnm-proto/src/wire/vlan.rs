//! The 802.1Q VLAN tag.
//!
//! Source: IEEE 802.1Q clause 9.6 (VLAN tag control information). On the wire a tag is the tag
//! protocol identifier (TPID: 0x8100 for a C-tag, 0x88A8 for an S-tag, clause 9.5) followed by
//! the 2-octet TCI: priority code point PCP (3 bits), drop eligible indicator DEI (1 bit) and
//! VLAN identifier VID (12 bits). The TPID is the EtherType field of the enclosing header, so the
//! [`VlanTag`] view covers the 4 octets after it: the TCI and the encapsulated EtherType.

use super::{be_u16, put_u16, Error, EtherType, Result};

/// Byte ranges of the tag after its TPID (IEEE 802.1Q clause 9.6).
mod field {
    use core::ops::{Range, RangeFrom};
    /// Tag control information: PCP(3) · DEI(1) · VID(12) (802.1Q clause 9.6).
    pub const TCI: Range<usize> = 0..2;
    /// The EtherType of what follows the tag (802.1Q clause 9.6, "EtherType/Length" after TCI).
    pub const ETHERTYPE: Range<usize> = 2..4;
    /// Everything after the tag.
    pub const PAYLOAD: RangeFrom<usize> = 4..;
}

/// Length of the tag after its TPID: TCI and encapsulated EtherType.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// Largest valid VID; 0xFFF is reserved (802.1Q clause 9.6, Table 9-2) but kept when parsed.
pub const VID_MAX: u16 = 0x0FFF;

/// A view of an 802.1Q tag: the 4 octets after the TPID, then the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// A view without length check: accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        VlanTag { buffer }
    }

    /// A view of a buffer holding at least the 4 octets of TCI and EtherType.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let t = Self::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
    }

    /// `Truncated` if the buffer cannot hold TCI and EtherType.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The whole TCI.
    pub fn tci(&self) -> u16 {
        be_u16(self.buffer.as_ref(), field::TCI.start)
    }

    /// Priority code point, 0..=7 (TCI bits 15-13).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator (TCI bit 12).
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier, 0..=4095 (TCI bits 11-0).
    pub fn vid(&self) -> u16 {
        self.tci() & VID_MAX
    }

    /// EtherType of what follows the tag.
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(be_u16(self.buffer.as_ref(), field::ETHERTYPE.start))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> VlanTag<&'a T> {
    /// The octets after the tag.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    /// Sets the whole TCI.
    pub fn set_tci(&mut self, tci: u16) {
        put_u16(self.buffer.as_mut(), field::TCI.start, tci);
    }

    /// Sets the PCP (only the 3 low bits of `pcp` are used).
    pub fn set_pcp(&mut self, pcp: u8) {
        let tci = (self.tci() & 0x1FFF) | (u16::from(pcp & 7) << 13);
        self.set_tci(tci);
    }

    /// Sets the DEI.
    pub fn set_dei(&mut self, dei: bool) {
        let tci = (self.tci() & !0x1000) | if dei { 0x1000 } else { 0 };
        self.set_tci(tci);
    }

    /// Sets the VID (only the 12 low bits of `vid` are used).
    pub fn set_vid(&mut self, vid: u16) {
        let tci = (self.tci() & !VID_MAX) | (vid & VID_MAX);
        self.set_tci(tci);
    }

    /// Sets the encapsulated EtherType.
    pub fn set_ethertype(&mut self, t: EtherType) {
        put_u16(self.buffer.as_mut(), field::ETHERTYPE.start, t.into());
    }

    /// The octets after the tag, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// An 802.1Q tag as a value (the TPID belongs to the enclosing header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VlanRepr {
    /// Priority code point, 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 0..=4095.
    pub vid: u16,
    /// EtherType of what follows the tag.
    pub ethertype: EtherType,
}

impl VlanRepr {
    /// Reads a tag.
    pub fn parse<T: AsRef<[u8]>>(tag: &VlanTag<T>) -> Result<Self> {
        tag.check_len()?;
        Ok(VlanRepr {
            pcp: tag.pcp(),
            dei: tag.dei(),
            vid: tag.vid(),
            ethertype: tag.ethertype(),
        })
    }

    /// Length of the tag after its TPID (4).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// The TCI of this tag (out-of-range PCP and VID bits are dropped).
    pub fn tci(&self) -> u16 {
        (u16::from(self.pcp & 7) << 13) | if self.dei { 0x1000 } else { 0 } | (self.vid & VID_MAX)
    }

    /// Writes TCI and EtherType; the payload is untouched.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, tag: &mut VlanTag<T>) {
        tag.set_tci(self.tci());
        tag.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tag after TPID 0x8100: PCP 5, DEI 1, VID 0x123, then IPv4.
    const FIXTURE: [u8; 5] = [
        0xb1, 0x23, // TCI: 101 (PCP 5) · 1 (DEI) · 0001 0010 0011 (VID 0x123)
        0x08, 0x00, // EtherType: IPv4
        0x45, // payload
    ];

    #[test]
    fn parse_fixture() {
        let t = VlanTag::new_checked(&FIXTURE[..]).unwrap();
        assert_eq!(t.pcp(), 5);
        assert!(t.dei());
        assert_eq!(t.vid(), 0x123);
        assert_eq!(t.ethertype(), EtherType::Ipv4);
        assert_eq!(t.payload(), &[0x45]);
        assert_eq!(
            VlanRepr::parse(&t).unwrap(),
            VlanRepr {
                pcp: 5,
                dei: true,
                vid: 0x123,
                ethertype: EtherType::Ipv4
            }
        );
    }

    #[test]
    fn emit_with_prefill() {
        let r = VlanRepr {
            pcp: 5,
            dei: true,
            vid: 0x123,
            ethertype: EtherType::Ipv4,
        };
        let mut buf = [0xa5u8; 5];
        r.emit(&mut VlanTag::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..4], &FIXTURE[..4]);
        assert_eq!(buf[4], 0xa5);
        assert_eq!(r.buffer_len(), 4);
    }

    #[test]
    fn setters_touch_only_their_bits() {
        let mut buf = FIXTURE;
        let mut t = VlanTag::new_checked(&mut buf[..]).unwrap();
        t.set_pcp(2);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (2, true, 0x123));
        t.set_dei(false);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (2, false, 0x123));
        t.set_vid(0xfff);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (2, false, 0xfff));
    }

    #[test]
    fn truncated() {
        assert_eq!(
            VlanTag::new_checked(&FIXTURE[..3]).unwrap_err(),
            Error::Truncated
        );
    }
}
