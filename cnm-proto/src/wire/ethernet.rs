//! Ethernet II: MAC addresses, EtherTypes and the 14-octet MAC header.
//!
//! Source: IEEE 802.3 clause 3.2 (MAC frame format: destination address, source address,
//! length/type) and clause 3.2.6 (a length/type value ≥ 0x0600 is an EtherType). The frame check
//! sequence is not part of the buffers handled here: the kernel strips it.

use core::fmt;
use core::str::FromStr;

use super::{be_u16, put_u16, Error, Result};

/// A 48-bit MAC address (IEEE 802 clause 8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// The address from its six octets, first on the wire first.
    pub const fn new(a: u8, b: u8, c: u8, d: u8, e: u8, f: u8) -> Self {
        EthernetAddress([a, b, c, d, e, f])
    }

    /// The address from the first six octets of `data`; `Truncated` if there are fewer.
    pub fn from_bytes(data: &[u8]) -> Result<Self> {
        let mut a = [0u8; 6];
        a.copy_from_slice(data.get(..6).ok_or(Error::Truncated)?);
        Ok(EthernetAddress(a))
    }

    /// The six octets.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// The address as the low 48 bits of a `u64` (first octet most significant).
    pub const fn to_u64(self) -> u64 {
        let a = self.0;
        u64::from_be_bytes([0, 0, a[0], a[1], a[2], a[3], a[4], a[5]])
    }

    /// The address from the low 48 bits of `v` (the top 16 bits are ignored).
    pub const fn from_u64(v: u64) -> Self {
        let b = v.to_be_bytes();
        EthernetAddress([b[2], b[3], b[4], b[5], b[6], b[7]])
    }

    /// All ones.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// The individual/group bit (least significant bit of the first octet) is set
    /// (IEEE 802 clause 8.2). Broadcast is a multicast address.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// An individual address: not multicast (and so not broadcast).
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// The universal/local bit (second least significant bit of the first octet) is set.
    pub fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for EthernetAddress {
    /// `aa:bb:cc:dd:ee:ff`, lower-case.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(super::hex_text(&self.0, Some(b':'), &mut [0; 17]))
    }
}

impl FromStr for EthernetAddress {
    type Err = Error;

    /// Parses `aa:bb:cc:dd:ee:ff` or `aa-bb-cc-dd-ee-ff` (hex digits of either case, two per
    /// octet, one kind of separator). Anything else is `Error::Malformed`.
    fn from_str(s: &str) -> Result<Self> {
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut out = [0u8; 6];
        let mut n = 0;
        for part in s.split(sep) {
            if n == 6 || part.len() != 2 || !part.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(Error::Malformed);
            }
            out[n] = u8::from_str_radix(part, 16).map_err(|_| Error::Malformed)?;
            n += 1;
        }
        if n != 6 {
            return Err(Error::Malformed);
        }
        Ok(EthernetAddress(out))
    }
}

impl serde::Serialize for EthernetAddress {
    /// The `Display` text.
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.serialize_str(super::hex_text(&self.0, Some(b':'), &mut [0; 17]))
    }
}

impl<'de> serde::Deserialize<'de> for EthernetAddress {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> core::result::Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse()
            .map_err(|_| serde::de::Error::custom(format!("invalid MAC address {s:?}")))
    }
}

/// An EtherType (IEEE 802.3 clause 3.2.6; values from the IEEE EtherType registry).
///
/// Values below 0x0600 are 802.3 length fields, not EtherTypes; they are kept as
/// [`EtherType::Unknown`] like every unlisted value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EtherType {
    /// 0x0800, IPv4 (RFC 894).
    Ipv4,
    /// 0x0806, ARP (RFC 826).
    Arp,
    /// 0x86DD, IPv6 (RFC 2464).
    Ipv6,
    /// 0x8100, C-VLAN tag protocol identifier (IEEE 802.1Q clause 9.5, Table 9-1).
    Vlan,
    /// 0x88A8, S-VLAN tag protocol identifier, "Q-in-Q" (IEEE 802.1Q clause 9.5, Table 9-1).
    QinQ,
    /// 0x22E9, CN-TAG (IEEE 802.1Q clause 33.3, Table 9-1).
    CnTag,
    /// 0x22E7, Congestion Notification Message (IEEE 802.1Q clause 33.4, Table 9-1).
    Cnm,
    /// 0x8808, MAC Control: PAUSE and PFC (IEEE 802.3 clause 31.4).
    MacControl,
    /// 0x88CC, LLDP (IEEE 802.1AB clause 7.2).
    Lldp,
    /// 0x88B5, IEEE 802 local experimental EtherType 1 (IEEE 802 clause 9.2.2), used by this
    /// project's non-standard rate feedback message ([`super::rate_feedback`]).
    RateFeedback,
    /// Any other value, kept as read.
    Unknown(u16),
}

impl EtherType {
    /// The value as a `u16`.
    pub const fn to_u16(self) -> u16 {
        match self {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Ipv6 => 0x86DD,
            EtherType::Vlan => 0x8100,
            EtherType::QinQ => 0x88A8,
            EtherType::CnTag => 0x22E9,
            EtherType::Cnm => 0x22E7,
            EtherType::MacControl => 0x8808,
            EtherType::Lldp => 0x88CC,
            EtherType::RateFeedback => 0x88B5,
            EtherType::Unknown(v) => v,
        }
    }

    /// The EtherType for `v`; unlisted values become [`EtherType::Unknown`].
    pub const fn from_u16(v: u16) -> Self {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x86DD => EtherType::Ipv6,
            0x8100 => EtherType::Vlan,
            0x88A8 => EtherType::QinQ,
            0x22E9 => EtherType::CnTag,
            0x22E7 => EtherType::Cnm,
            0x8808 => EtherType::MacControl,
            0x88CC => EtherType::Lldp,
            0x88B5 => EtherType::RateFeedback,
            v => EtherType::Unknown(v),
        }
    }

    /// A VLAN tag protocol identifier (C-tag 0x8100 or S-tag 0x88A8).
    pub const fn is_vlan(self) -> bool {
        matches!(self, EtherType::Vlan | EtherType::QinQ)
    }
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        EtherType::from_u16(v)
    }
}

impl From<EtherType> for u16 {
    fn from(t: EtherType) -> u16 {
        t.to_u16()
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EtherType::Ipv4 => f.write_str("IPv4"),
            EtherType::Arp => f.write_str("ARP"),
            EtherType::Ipv6 => f.write_str("IPv6"),
            EtherType::Vlan => f.write_str("802.1Q"),
            EtherType::QinQ => f.write_str("802.1ad"),
            EtherType::CnTag => f.write_str("CN-TAG"),
            EtherType::Cnm => f.write_str("CNM"),
            EtherType::MacControl => f.write_str("MAC-Control"),
            EtherType::Lldp => f.write_str("LLDP"),
            EtherType::RateFeedback => f.write_str("rate-feedback"),
            EtherType::Unknown(v) => write!(f, "0x{v:04x}"),
        }
    }
}

/// Byte ranges of the MAC header (IEEE 802.3 clause 3.2.3-3.2.6).
mod field {
    use core::ops::{Range, RangeFrom};
    /// Destination address, 6 octets (802.3 clause 3.2.3).
    pub const DESTINATION: Range<usize> = 0..6;
    /// Source address, 6 octets (802.3 clause 3.2.3).
    pub const SOURCE: Range<usize> = 6..12;
    /// Length/Type, 2 octets (802.3 clause 3.2.6).
    pub const ETHERTYPE: Range<usize> = 12..14;
    /// MAC client data (802.3 clause 3.2.7).
    pub const PAYLOAD: RangeFrom<usize> = 14..;
}

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A view of an Ethernet II frame (header and payload, no FCS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// A view without length check: accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// A view of a buffer holding at least the 14-octet header; `Truncated` otherwise.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// `Truncated` if the buffer cannot hold the header.
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

    /// Length of the header (14).
    pub const fn header_len() -> usize {
        HEADER_LEN
    }

    /// Length of a frame with a payload of `payload_len` octets.
    pub const fn buffer_len(payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Destination address.
    pub fn dst_addr(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        EthernetAddress(a)
    }

    /// Source address.
    pub fn src_addr(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        EthernetAddress(a)
    }

    /// EtherType (or 802.3 length, as [`EtherType::Unknown`]).
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(be_u16(self.buffer.as_ref(), field::ETHERTYPE.start))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> EthernetFrame<&'a T> {
    /// The octets after the header.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&a.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&a.0);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, t: EtherType) {
        put_u16(self.buffer.as_mut(), field::ETHERTYPE.start, t.into());
    }

    /// The octets after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for EthernetFrame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The Ethernet II header as a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source address.
    pub src_addr: EthernetAddress,
    /// Destination address.
    pub dst_addr: EthernetAddress,
    /// EtherType.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Reads the header of a checked view.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<Self> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Length of the header (14).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into the first 14 octets of `frame`; the payload is untouched.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_src_addr(self.src_addr);
        frame.set_dst_addr(self.dst_addr);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A broadcast ARP request header from 02:00:00:00:00:01.
    const FIXTURE: [u8; 16] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // destination: broadcast
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // source: locally administered unicast
        0x08, 0x06, // EtherType: ARP
        0xaa, 0xbb, // first payload octets
    ];

    #[test]
    fn parse_fixture() {
        let f = EthernetFrame::new_checked(&FIXTURE[..]).unwrap();
        assert_eq!(f.dst_addr(), EthernetAddress::BROADCAST);
        assert_eq!(f.src_addr(), EthernetAddress::new(2, 0, 0, 0, 0, 1));
        assert_eq!(f.ethertype(), EtherType::Arp);
        assert_eq!(f.payload(), &[0xaa, 0xbb]);
        let r = EthernetRepr::parse(&f).unwrap();
        assert_eq!(r.ethertype, EtherType::Arp);
        assert_eq!(r.buffer_len(), 14);
    }

    #[test]
    fn emit_with_prefill() {
        let r = EthernetRepr {
            src_addr: EthernetAddress::new(2, 0, 0, 0, 0, 1),
            dst_addr: EthernetAddress::BROADCAST,
            ethertype: EtherType::Arp,
        };
        let mut buf = [0xa5u8; 16];
        r.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..14], &FIXTURE[..14]);
        assert_eq!(&buf[14..], &[0xa5, 0xa5], "payload untouched");
    }

    #[test]
    fn truncated() {
        assert_eq!(
            EthernetFrame::new_checked(&FIXTURE[..13]).unwrap_err(),
            Error::Truncated
        );
        assert!(EthernetFrame::new_checked(&FIXTURE[..14]).is_ok());
    }

    #[test]
    fn address_text() {
        let a: EthernetAddress = "02:1A:bb:00:00:ff".parse().unwrap();
        assert_eq!(a, EthernetAddress::new(2, 0x1a, 0xbb, 0, 0, 0xff));
        assert_eq!(a.to_string(), "02:1a:bb:00:00:ff");
        assert_eq!("02-1a-bb-00-00-ff".parse::<EthernetAddress>().unwrap(), a);
        for bad in [
            "",
            "02:1a:bb:00:00",
            "02:1a:bb:00:00:ff:00",
            "02:1a:bb:00:00:f",
            "02:1a:bb:00:00:fff",
            "02-1a:bb:00:00:ff",
            "0x:1a:bb:00:00:ff",
            "+2:1a:bb:00:00:ff",
        ] {
            assert_eq!(
                bad.parse::<EthernetAddress>(),
                Err(Error::Malformed),
                "{bad}"
            );
        }
    }

    #[test]
    fn address_classes() {
        assert!(EthernetAddress::BROADCAST.is_broadcast());
        assert!(EthernetAddress::BROADCAST.is_multicast());
        assert!(!EthernetAddress::BROADCAST.is_unicast());
        let m = EthernetAddress::new(0x01, 0x80, 0xc2, 0, 0, 1);
        assert!(m.is_multicast() && !m.is_broadcast() && !m.is_unicast());
        let u = EthernetAddress::new(0x02, 0, 0, 0, 0, 1);
        assert!(u.is_unicast() && u.is_local());
        assert_eq!(EthernetAddress::from_u64(u.to_u64()), u);
        assert_eq!(u.to_u64(), 0x0200_0000_0001);
    }

    #[test]
    fn address_serde() {
        let a = EthernetAddress::new(2, 0, 0, 0, 0, 0xab);
        let j = serde_json::to_string(&a).unwrap();
        assert_eq!(j, "\"02:00:00:00:00:ab\"");
        assert_eq!(serde_json::from_str::<EthernetAddress>(&j).unwrap(), a);
        assert!(serde_json::from_str::<EthernetAddress>("\"nope\"").is_err());
    }

    #[test]
    fn ethertype_values() {
        for (t, v) in [
            (EtherType::Ipv4, 0x0800),
            (EtherType::Arp, 0x0806),
            (EtherType::Ipv6, 0x86DD),
            (EtherType::Vlan, 0x8100),
            (EtherType::QinQ, 0x88A8),
            (EtherType::CnTag, 0x22E9),
            (EtherType::Cnm, 0x22E7),
            (EtherType::MacControl, 0x8808),
            (EtherType::Lldp, 0x88CC),
            (EtherType::RateFeedback, 0x88B5),
            (EtherType::Unknown(0x1234), 0x1234),
        ] {
            assert_eq!(u16::from(t), v);
            assert_eq!(EtherType::from(v), t);
        }
        assert_eq!(EtherType::Unknown(0x002e).to_string(), "0x002e");
        assert_eq!(EtherType::Cnm.to_string(), "CNM");
    }
}
