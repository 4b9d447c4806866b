//! The CN-TAG.
//!
//! Source: IEEE 802.1Q clause 33.3 (CN-TAG format): EtherType 0x22E9 followed by a 2-octet Flow
//! Identifier, the reaction point identifier (RPID) chosen by the end station's reaction point.
//! The tag sits after the VLAN tag, if any, and before the payload's EtherType. RPID 0 means "no
//! flow identifier". A CN-TAG never leaves its congestion-notification domain: edge ports strip
//! it (802.1Q clause 32.4).
//!
//! Like [`super::VlanTag`], the [`CnTag`] view covers the octets after the 0x22E9 EtherType:
//! RPID and the encapsulated EtherType.

use super::{be_u16, put_u16, Error, EtherType, Result};

/// Byte ranges of the CN-TAG after its 0x22E9 EtherType (IEEE 802.1Q clause 33.3).
mod field {
    use core::ops::{Range, RangeFrom};
    /// Flow Identifier (RPID), 2 octets (802.1Q clause 33.3).
    pub const RPID: Range<usize> = 0..2;
    /// EtherType of what follows the CN-TAG.
    pub const ETHERTYPE: Range<usize> = 2..4;
    /// Everything after the tag.
    pub const PAYLOAD: RangeFrom<usize> = 4..;
}

/// Length of the CN-TAG after its EtherType: RPID and encapsulated EtherType.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A view of a CN-TAG: the 4 octets after EtherType 0x22E9, then the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CnTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> CnTag<T> {
    /// A view without length check: accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        CnTag { buffer }
    }

    /// A view of a buffer holding at least the RPID and the EtherType.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let t = Self::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
    }

    /// `Truncated` if the buffer cannot hold RPID and EtherType.
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

    /// The reaction point identifier (0 = none).
    pub fn rpid(&self) -> u16 {
        be_u16(self.buffer.as_ref(), field::RPID.start)
    }

    /// EtherType of what follows the tag.
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(be_u16(self.buffer.as_ref(), field::ETHERTYPE.start))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> CnTag<&'a T> {
    /// The octets after the tag.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> CnTag<T> {
    /// Sets the RPID.
    pub fn set_rpid(&mut self, rpid: u16) {
        put_u16(self.buffer.as_mut(), field::RPID.start, rpid);
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

/// A CN-TAG as a value (its 0x22E9 EtherType belongs to the enclosing header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CnTagRepr {
    /// Reaction point identifier (0 = none).
    pub rpid: u16,
    /// EtherType of what follows the tag.
    pub ethertype: EtherType,
}

impl CnTagRepr {
    /// Reads a tag.
    pub fn parse<T: AsRef<[u8]>>(tag: &CnTag<T>) -> Result<Self> {
        tag.check_len()?;
        Ok(CnTagRepr {
            rpid: tag.rpid(),
            ethertype: tag.ethertype(),
        })
    }

    /// Length of the tag after its EtherType (4).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes RPID and EtherType; the payload is untouched.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, tag: &mut CnTag<T>) {
        tag.set_rpid(self.rpid);
        tag.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CN-TAG after EtherType 0x22E9: RPID 0xbeef, then IPv6.
    const FIXTURE: [u8; 6] = [
        0xbe, 0xef, // Flow Identifier (RPID) 0xbeef
        0x86, 0xdd, // EtherType: IPv6
        0x60, 0x00, // payload
    ];

    #[test]
    fn parse_fixture() {
        let t = CnTag::new_checked(&FIXTURE[..]).unwrap();
        assert_eq!(t.rpid(), 0xbeef);
        assert_eq!(t.ethertype(), EtherType::Ipv6);
        assert_eq!(t.payload(), &[0x60, 0x00]);
        assert_eq!(
            CnTagRepr::parse(&t).unwrap(),
            CnTagRepr {
                rpid: 0xbeef,
                ethertype: EtherType::Ipv6
            }
        );
    }

    #[test]
    fn emit_with_prefill() {
        let r = CnTagRepr {
            rpid: 0xbeef,
            ethertype: EtherType::Ipv6,
        };
        let mut buf = [0xa5u8; 6];
        r.emit(&mut CnTag::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..4], &FIXTURE[..4]);
        assert_eq!(&buf[4..], &[0xa5, 0xa5]);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            CnTag::new_checked(&FIXTURE[..3]).unwrap_err(),
            Error::Truncated
        );
    }
}
