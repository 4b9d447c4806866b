//! The LLDP Congestion Notification TLV.
//!
//! Source: IEEE 802.1Q Annex D (IEEE 802.1 organizationally specific TLVs; Table D-1 gives the
//! Congestion Notification TLV subtype 8) on top of IEEE 802.1AB (LLDP): clause 8.4 (TLV header:
//! 7-bit type, 9-bit information string length), clause 8.6 (organizationally specific TLV:
//! type 127, 3-octet OUI, 1-octet subtype), clause 8.5 (mandatory Chassis ID, Port ID and TTL
//! TLVs; End of LLDPDU, type 0). A station announces with this TLV which priorities are
//! congestion-notification priority values (CNPV) and on which it is ready to act on CNMs
//! (802.1Q clause 32.3).
//!
//! The TLV, 8 octets in all:
//!
//! | octets | field |
//! |---|---|
//! | 0-1 | type 127 (7 bits) · length 6 (9 bits) |
//! | 2-4 | OUI 00-80-C2 |
//! | 5 | subtype 0x08 |
//! | 6 | per-priority CNPV indicators: bit `p` (LSB = priority 0) set if priority `p` is a CNPV |
//! | 7 | per-priority Ready indicators, same bit order |

use super::ethernet::{self, EthernetFrame};
use super::{be_u16, put_u16, Error, EtherType, EthernetAddress, EthernetRepr, Result};

/// The LLDP "nearest bridge" multicast address 01-80-C2-00-00-0E (IEEE 802.1AB clause 7.1).
pub const NEAREST_BRIDGE: EthernetAddress = EthernetAddress([0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e]);

/// Organizationally specific TLV type (IEEE 802.1AB clause 8.6).
pub const TLV_TYPE_ORG: u8 = 127;
/// End of LLDPDU TLV type (IEEE 802.1AB clause 8.5.1).
pub const TLV_TYPE_END: u8 = 0;
/// TLV type of Time To Live (802.1AB clause 8.5.4).
pub const TLV_TYPE_TTL: u8 = 3;
/// The IEEE 802.1 OUI (IEEE 802.1Q Annex D.1).
pub const OUI_IEEE_8021: [u8; 3] = [0x00, 0x80, 0xc2];
/// Subtype of the Congestion Notification TLV (IEEE 802.1Q Annex D, Table D-1).
pub const SUBTYPE_CN: u8 = 0x08;
/// Information string length of the CN TLV: OUI, subtype, two indicator octets.
pub const CN_INFO_LEN: u16 = 6;

/// Byte ranges of the CN TLV (IEEE 802.1AB clauses 8.4 and 8.6; IEEE 802.1Q Annex D).
mod field {
    use core::ops::Range;
    /// TLV type (7 bits) and information string length (9 bits) (802.1AB clause 8.4).
    pub const HEADER: Range<usize> = 0..2;
    /// Organizationally unique identifier (802.1AB clause 8.6).
    pub const OUI: Range<usize> = 2..5;
    /// Organizationally defined subtype (802.1AB clause 8.6).
    pub const SUBTYPE: usize = 5;
    /// Per-priority CNPV indicators (802.1Q Annex D, CN TLV).
    pub const CNPV: usize = 6;
    /// Per-priority Ready indicators (802.1Q Annex D, CN TLV).
    pub const READY: usize = 7;
}

/// Length of the whole CN TLV, header included.
pub const TLV_LEN: usize = field::READY + 1;

/// A view of an LLDP Congestion Notification TLV (header included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LldpCnTlv<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> LldpCnTlv<T> {
    /// A view without length check: accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        LldpCnTlv { buffer }
    }

    /// A view of a buffer holding at least the 8 octets of the TLV. The type, OUI and subtype
    /// are not checked here (see [`LldpCnTlvRepr::parse`]).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let t = Self::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
    }

    /// `Truncated` if the buffer is shorter than 8 octets.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < TLV_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// TLV type (7 bits).
    pub fn tlv_type(&self) -> u8 {
        (be_u16(self.buffer.as_ref(), field::HEADER.start) >> 9) as u8
    }

    /// TLV information string length (9 bits).
    pub fn tlv_len(&self) -> u16 {
        be_u16(self.buffer.as_ref(), field::HEADER.start) & 0x01ff
    }

    /// OUI.
    pub fn oui(&self) -> [u8; 3] {
        let mut o = [0u8; 3];
        o.copy_from_slice(&self.buffer.as_ref()[field::OUI]);
        o
    }

    /// Subtype.
    pub fn subtype(&self) -> u8 {
        self.buffer.as_ref()[field::SUBTYPE]
    }

    /// Per-priority CNPV indicators.
    pub fn cnpv(&self) -> u8 {
        self.buffer.as_ref()[field::CNPV]
    }

    /// Per-priority Ready indicators.
    pub fn ready(&self) -> u8 {
        self.buffer.as_ref()[field::READY]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> LldpCnTlv<T> {
    /// Sets TLV type (low 7 bits) and length (low 9 bits).
    pub fn set_header(&mut self, tlv_type: u8, len: u16) {
        let h = (u16::from(tlv_type & 0x7f) << 9) | (len & 0x01ff);
        put_u16(self.buffer.as_mut(), field::HEADER.start, h);
    }

    /// Sets the OUI.
    pub fn set_oui(&mut self, oui: [u8; 3]) {
        self.buffer.as_mut()[field::OUI].copy_from_slice(&oui);
    }

    /// Sets the subtype.
    pub fn set_subtype(&mut self, s: u8) {
        self.buffer.as_mut()[field::SUBTYPE] = s;
    }

    /// Sets the CNPV indicators.
    pub fn set_cnpv(&mut self, v: u8) {
        self.buffer.as_mut()[field::CNPV] = v;
    }

    /// Sets the Ready indicators.
    pub fn set_ready(&mut self, v: u8) {
        self.buffer.as_mut()[field::READY] = v;
    }
}

/// The Congestion Notification TLV as a value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LldpCnTlvRepr {
    /// Per-priority CNPV indicators: bit `p` set if priority `p` is a CNPV.
    pub cnpv: u8,
    /// Per-priority Ready indicators: bit `p` set if the station is ready on priority `p`.
    pub ready: u8,
}

impl LldpCnTlvRepr {
    /// Reads a CN TLV: `Malformed` unless the type is 127, the OUI 00-80-C2, the subtype 8 and
    /// the length at least 6 (octets beyond the sixth are ignored); `Truncated` if the length
    /// runs past the buffer.
    pub fn parse<T: AsRef<[u8]>>(tlv: &LldpCnTlv<T>) -> Result<Self> {
        tlv.check_len()?;
        if tlv.tlv_type() != TLV_TYPE_ORG
            || tlv.tlv_len() < CN_INFO_LEN
            || tlv.oui() != OUI_IEEE_8021
            || tlv.subtype() != SUBTYPE_CN
        {
            return Err(Error::Malformed);
        }
        if tlv.buffer.as_ref().len() < 2 + usize::from(tlv.tlv_len()) {
            return Err(Error::Truncated);
        }
        Ok(LldpCnTlvRepr {
            cnpv: tlv.cnpv(),
            ready: tlv.ready(),
        })
    }

    /// Length of the TLV, header included (8).
    pub const fn buffer_len(&self) -> usize {
        TLV_LEN
    }

    /// Writes the whole TLV.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, tlv: &mut LldpCnTlv<T>) {
        tlv.set_header(TLV_TYPE_ORG, CN_INFO_LEN);
        tlv.set_oui(OUI_IEEE_8021);
        tlv.set_subtype(SUBTYPE_CN);
        tlv.set_cnpv(self.cnpv);
        tlv.set_ready(self.ready);
    }

    /// Priority `p` (0..=7) is a CNPV.
    pub fn is_cnpv(&self, p: u8) -> bool {
        p < 8 && self.cnpv & (1 << p) != 0
    }

    /// The station is ready to act on CNMs at priority `p` (0..=7).
    pub fn is_ready(&self, p: u8) -> bool {
        p < 8 && self.ready & (1 << p) != 0
    }
}

/// Finds the Congestion Notification TLV in an LLDPDU (the octets after EtherType 0x88CC).
///
/// Walks the TLVs until End of LLDPDU or the end of the buffer. `Ok(None)` if there is no CN
/// TLV; `Truncated` if a TLV before it runs past the buffer; what [`LldpCnTlvRepr::parse`]
/// returns for an IEEE 802.1 subtype-8 TLV that is malformed.
pub fn find_cn_tlv(lldpdu: &[u8]) -> Result<Option<LldpCnTlvRepr>> {
    for tlv in tlvs(lldpdu) {
        let (ty, tlv) = tlv?;
        if ty == TLV_TYPE_ORG
            && tlv.len() >= 6
            && tlv[2..5] == OUI_IEEE_8021
            && tlv[5] == SUBTYPE_CN
        {
            return LldpCnTlvRepr::parse(&LldpCnTlv::new_checked(tlv)?).map(Some);
        }
    }
    Ok(None)
}

/// The TLVs of an LLDPDU up to End of LLDPDU or the end of the buffer (802.1AB clause 8.4: a
/// 7-bit type and a 9-bit length, then the value): each as its type and its whole octets,
/// header included; `Truncated` for one that runs past the buffer (and nothing after it).
fn tlvs(lldpdu: &[u8]) -> impl Iterator<Item = Result<(u8, &[u8])>> + '_ {
    let mut off = 0;
    std::iter::from_fn(move || {
        let h = lldpdu.get(off..off + 2)?;
        let h = u16::from_be_bytes([h[0], h[1]]);
        let (ty, len) = ((h >> 9) as u8, usize::from(h & 0x01ff));
        if ty == TLV_TYPE_END {
            return None;
        }
        match lldpdu.get(off..off + 2 + len) {
            Some(tlv) => {
                off += 2 + len;
                Some(Ok((ty, tlv)))
            }
            None => {
                off = lldpdu.len();
                Some(Err(Error::Truncated))
            }
        }
    })
}

/// The Time To Live TLV's value in an LLDPDU (type 3, 802.1AB clause 8.5.4: seconds the
/// receiver keeps the information; 0 = forget it now, a shutdown LLDPDU). `Ok(None)` if there
/// is none (a malformed LLDPDU, clause 8.5 makes the TLV mandatory); `Truncated` if a TLV
/// before it runs past the buffer or the TTL TLV is shorter than 2 octets.
pub fn find_ttl(lldpdu: &[u8]) -> Result<Option<u16>> {
    for tlv in tlvs(lldpdu) {
        let (ty, tlv) = tlv?;
        if ty == TLV_TYPE_TTL {
            let v = tlv.get(2..4).ok_or(Error::Truncated)?;
            return Ok(Some(u16::from_be_bytes([v[0], v[1]])));
        }
    }
    Ok(None)
}

/// Builds a minimal LLDP frame announcing `cn`: DA 01-80-C2-00-00-0E, SA `chassis`, then the
/// Chassis ID TLV (subtype 4, MAC address), the Port ID TLV (subtype 7, locally assigned,
/// `port_id`, 1..=255 octets), the TTL TLV (`ttl` seconds), the CN TLV and End of LLDPDU
/// (IEEE 802.1AB clause 8.5). Returns the frame length (at least 60, zero-padded).
/// `Malformed` for an empty or too long `port_id`, `BufferTooSmall` if `out` is too small.
pub fn build_lldp_frame(
    chassis: EthernetAddress,
    port_id: &[u8],
    ttl: u16,
    cn: &LldpCnTlvRepr,
    out: &mut [u8],
) -> Result<usize> {
    if port_id.is_empty() || port_id.len() > 255 {
        return Err(Error::Malformed);
    }
    let len = ethernet::HEADER_LEN + 9 + (3 + port_id.len()) + 4 + TLV_LEN + 2;
    let padded = len.max(super::MIN_FRAME_LEN);
    let out = out.get_mut(..padded).ok_or(Error::BufferTooSmall)?;
    EthernetRepr {
        src_addr: chassis,
        dst_addr: NEAREST_BRIDGE,
        ethertype: EtherType::Lldp,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut *out));
    let mut off = ethernet::HEADER_LEN;
    let mut tlv = |out: &mut [u8], ty: u8, value: &[&[u8]]| {
        let n: usize = value.iter().map(|v| v.len()).sum();
        // n ≤ 1 + 255 for every TLV written here, within the 9-bit length.
        put_u16(out, off, (u16::from(ty) << 9) | n as u16);
        off += 2;
        for v in value {
            out[off..off + v.len()].copy_from_slice(v);
            off += v.len();
        }
    };
    tlv(out, 1, &[&[4], &chassis.0]);
    tlv(out, 2, &[&[7], port_id]);
    tlv(out, 3, &[&ttl.to_be_bytes()]);
    let mut cn_bytes = [0u8; TLV_LEN];
    cn.emit(&mut LldpCnTlv::new_unchecked(&mut cn_bytes[..]));
    let cn_at = len - TLV_LEN - 2;
    out[cn_at..cn_at + TLV_LEN].copy_from_slice(&cn_bytes);
    out[len - 2..].fill(0); // End of LLDPDU, then padding
    Ok(padded)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CN TLV: priorities 3 and 5 are CNPVs, ready on 3.
    const FIXTURE: [u8; 8] = [
        0xfe, 0x06, // type 127 (1111111) · length 6 (000000110)
        0x00, 0x80, 0xc2, // OUI IEEE 802.1
        0x08, // subtype: Congestion Notification
        0x28, // CNPV indicators: bits 3 and 5
        0x08, // Ready indicators: bit 3
    ];

    fn repr() -> LldpCnTlvRepr {
        LldpCnTlvRepr {
            cnpv: 0x28,
            ready: 0x08,
        }
    }

    #[test]
    fn parse_fixture() {
        let t = LldpCnTlv::new_checked(&FIXTURE[..]).unwrap();
        assert_eq!((t.tlv_type(), t.tlv_len()), (127, 6));
        assert_eq!(t.oui(), OUI_IEEE_8021);
        assert_eq!(t.subtype(), 8);
        let r = LldpCnTlvRepr::parse(&t).unwrap();
        assert_eq!(r, repr());
        assert!(r.is_cnpv(3) && r.is_cnpv(5) && !r.is_cnpv(4) && !r.is_cnpv(9));
        assert!(r.is_ready(3) && !r.is_ready(5));
    }

    #[test]
    fn emit_with_prefill() {
        let mut buf = [0xa5u8; 9];
        repr().emit(&mut LldpCnTlv::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..8], &FIXTURE);
        assert_eq!(buf[8], 0xa5);
        assert_eq!(repr().buffer_len(), 8);
    }

    #[test]
    fn rejects_other_tlvs() {
        for (i, v) in [(0, 0x02), (2, 0x01), (5, 0x09)] {
            let mut b = FIXTURE;
            b[i] = v;
            let t = LldpCnTlv::new_checked(&b[..]).unwrap();
            assert_eq!(LldpCnTlvRepr::parse(&t), Err(Error::Malformed), "octet {i}");
        }
        let mut b = FIXTURE;
        b[1] = 0x07; // length 7 but only 6 octets of information present
        let t = LldpCnTlv::new_checked(&b[..]).unwrap();
        assert_eq!(LldpCnTlvRepr::parse(&t), Err(Error::Truncated));
        assert_eq!(
            LldpCnTlv::new_checked(&FIXTURE[..7]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn ttl_is_found_after_chassis_and_port() {
        let mut out = [0u8; 128];
        let n = build_lldp_frame(
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            b"p1",
            120,
            &repr(),
            &mut out,
        )
        .unwrap();
        let body = &out[ethernet::HEADER_LEN..n];
        assert_eq!(find_ttl(body), Ok(Some(120)));
        // Chassis ID (2 + 7), Port ID (2 + 3), then TTL: header 0x0602, value 0x0000.
        let mut shutdown = body.to_vec();
        shutdown[14..18].copy_from_slice(&[0x06, 0x02, 0x00, 0x00]);
        assert_eq!(find_ttl(&shutdown), Ok(Some(0)));
        assert_eq!(find_ttl(&[0x00, 0x00]), Ok(None));
        assert_eq!(find_ttl(&[0x06, 0x02, 0x00]), Err(Error::Truncated));
        assert_eq!(find_ttl(&[0x06, 0x01, 0x00]), Err(Error::Truncated));
    }

    #[test]
    fn build_and_find() {
        let chassis = EthernetAddress([0x02, 0, 0, 0, 0, 0x33]);
        let mut out = [0xa5u8; 80];
        let n = build_lldp_frame(chassis, b"p1", 120, &repr(), &mut out).unwrap();
        assert_eq!(n, 60);
        #[rustfmt::skip]
        let want: [u8; 43] = [
            0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e, // DA: nearest bridge
            0x02, 0x00, 0x00, 0x00, 0x00, 0x33, // SA
            0x88, 0xcc,                         // EtherType: LLDP
            0x02, 0x07, 0x04, 0x02, 0x00, 0x00, 0x00, 0x00, 0x33, // Chassis ID, MAC
            0x04, 0x03, 0x07, b'p', b'1',       // Port ID, locally assigned
            0x06, 0x02, 0x00, 0x78,             // TTL 120 s
            0xfe, 0x06, 0x00, 0x80, 0xc2, 0x08, 0x28, 0x08, // CN TLV
            0x00, 0x00,                         // End of LLDPDU
            0x00,                               // padding starts
        ];
        assert_eq!(&out[..43], &want);
        assert!(out[43..60].iter().all(|&b| b == 0));
        assert_eq!(out[60], 0xa5);
        let eth = EthernetFrame::new_checked(&out[..n]).unwrap();
        assert_eq!(find_cn_tlv(eth.payload()), Ok(Some(repr())));
        // Without the CN TLV (cut at its start: no End TLV either), and a TLV cut short.
        assert_eq!(find_cn_tlv(&out[14..32]), Ok(None));
        assert_eq!(find_cn_tlv(&out[14..31]), Err(Error::Truncated));
        assert_eq!(
            build_lldp_frame(chassis, b"", 1, &repr(), &mut out),
            Err(Error::Malformed)
        );
        assert_eq!(
            build_lldp_frame(chassis, b"p1", 1, &repr(), &mut [0u8; 59]),
            Err(Error::BufferTooSmall)
        );
    }
}
