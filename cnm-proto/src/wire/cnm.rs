//! The Congestion Notification Message (CNM) and its builder.
//!
//! Source: IEEE 802.1Q clause 33.4 (formerly 802.1Qau; CNM PDU format) and clause 32.8.3
//! (what a congestion point puts in a CNM). A congestion point (CP) that samples a frame while
//! its queue is above the set point sends a CNM back to the frame's source:
//!
//! ```text
//! DA = sampled SA · SA = CP MAC · [VLAN tag, PCP = CNM priority] · [CN-TAG, copied]
//! · EtherType 0x22E7 · CNM PDU (24..88 octets) · zero padding to 60 octets
//! ```
//!
//! The CNM PDU (all fields big-endian):
//!
//! | octets | field | bits |
//! |---|---|---|
//! | 0-1 | Version · Reserved · QntzFb | 4 · 6 · 6 |
//! | 2-9 | CPID | 64 |
//! | 10-11 | cnmQOffset, signed | 16 |
//! | 12-13 | cnmQDelta, signed | 16 |
//! | 14-15 | Encapsulated priority | 16 |
//! | 16-21 | Encapsulated destination MAC address | 48 |
//! | 22-23 | Encapsulated MSDU length (0..=64) | 16 |
//! | 24.. | Encapsulated MSDU | 0..=64 octets |
//!
//! Conventions this project fixed where the standard text could not be checked (**\[choice\]**,
//! shared by emitter, parser and the Wireshark dissector):
//!
//! * **CPID** = the CP's 6-octet MAC address followed by a 2-octet index `port × 8 + priority`,
//!   with the top bit of the index set for a CP at an input buffer ([`CpId`]).
//! * **cnmQOffset** = `Q − Qeq` and **cnmQDelta** = `Q − Qold`, both in units of 64 octets,
//!   saturating at the `i16` range ([`quantize_queue`]).
//! * **Encapsulated priority**: the sampled frame's priority in the 3 most significant bits of
//!   the 2-octet field, the other 13 bits zero.
//! * **Encapsulated MSDU**: the first octets of the sampled frame starting at the EtherType that
//!   follows its VLAN tag (so a CN-TAG, if any, is included), at most 64 octets.
//! * The CNM is sent at priority 6 ([`DEFAULT_CNM_PRIORITY`], the MIB's
//!   `ieee8021CnCpCnmTransmitPriority` setting) when the sampled frame was VLAN tagged; an
//!   untagged sampled frame gives an untagged CNM.
//!
//! Parsing keeps what the standard leaves open: a version other than 0 and non-zero reserved
//! bits parse. Octets after the encapsulated MSDU (Ethernet padding) are ignored. A PDU shorter
//! than 24 octets, or with an encapsulated MSDU length above 64 or above the octets present, is
//! an error.

use core::fmt;
use core::str::FromStr;

use super::ethernet::{self, EthernetFrame};
use super::vlan::VlanTag;
use super::{
    be_u16, be_u64, put_u16, put_u64, walk, Error, EtherType, EthernetAddress, L2Info, Result,
    MIN_FRAME_LEN,
};

/// Byte ranges of the CNM PDU after EtherType 0x22E7 (IEEE 802.1Q clause 33.4).
mod field {
    use core::ops::Range;
    /// Version (4 bits) · Reserved (6 bits) · QntzFb (6 bits) (802.1Q clause 33.4).
    pub const VER_RES_FB: Range<usize> = 0..2;
    /// Congestion point identifier, 8 octets (802.1Q clause 33.4; see [`super::CpId`]).
    pub const CPID: Range<usize> = 2..10;
    /// cnmQOffset, signed, 2 octets (802.1Q clause 33.4).
    pub const Q_OFFSET: Range<usize> = 10..12;
    /// cnmQDelta, signed, 2 octets (802.1Q clause 33.4).
    pub const Q_DELTA: Range<usize> = 12..14;
    /// Encapsulated priority, 2 octets, priority in the 3 MSBs (802.1Q clause 33.4).
    pub const ENCAP_PRIORITY: Range<usize> = 14..16;
    /// Encapsulated destination MAC address, 6 octets (802.1Q clause 33.4).
    pub const ENCAP_DA: Range<usize> = 16..22;
    /// Encapsulated MSDU length, 2 octets (802.1Q clause 33.4).
    pub const ENCAP_MSDU_LEN: Range<usize> = 22..24;
    /// First octet of the encapsulated MSDU (802.1Q clause 33.4).
    pub const ENCAP_MSDU: usize = 24;
}

/// Length of the CNM PDU without encapsulated MSDU (IEEE 802.1Q clause 33.4).
pub const HEADER_LEN: usize = field::ENCAP_MSDU;

/// Largest encapsulated MSDU (IEEE 802.1Q clause 33.4; MIB `CpMinHeaderOctets` 0..64).
pub const MAX_MSDU_LEN: usize = 64;

/// Largest CNM PDU: header and a 64-octet MSDU.
pub const MAX_PDU_LEN: usize = HEADER_LEN + MAX_MSDU_LEN;

/// Priority CNMs are sent at by default (**\[choice\]**; the MIB's CnmTransmitPriority).
pub const DEFAULT_CNM_PRIORITY: u8 = 6;

/// Largest QntzFb: the field is six bits (802.1Q clause 33.4.4). The one definition: the
/// congestion and reaction points re-export it.
pub const QNTZ_FB_MAX: u8 = 63;

/// A congestion point identifier (IEEE 802.1Q clause 33.4, 8 octets).
///
/// **\[choice\]** Its layout is the CP's 6-octet MAC address followed by a 2-octet index
/// `port × 8 + priority`; the top bit of the index ([`CpId::INPUT_FLAG`]) is set for a CP at an
/// input buffer. Displayed as 16 lowercase hex digits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpId(pub u64);

impl CpId {
    /// Index bit marking a CP that sits at an input buffer rather than an output queue.
    pub const INPUT_FLAG: u16 = 0x8000;

    /// The CPID of `mac` and `index`.
    pub const fn new(mac: EthernetAddress, index: u16) -> Self {
        CpId((mac.to_u64() << 16) | index as u64)
    }

    /// The CPID of the output CP of `port` and `priority`: index `port × 8 + priority`
    /// (bits of `port` beyond 12 and of `priority` beyond 3 are dropped).
    pub const fn output(mac: EthernetAddress, port: u16, priority: u8) -> Self {
        Self::new(mac, ((port & 0x0fff) << 3) | (priority & 7) as u16)
    }

    /// The CPID of the input-buffer CP of `port` and `priority`: as [`CpId::output`] with
    /// [`CpId::INPUT_FLAG`] set.
    pub const fn input(mac: EthernetAddress, port: u16, priority: u8) -> Self {
        CpId(Self::output(mac, port, priority).0 | Self::INPUT_FLAG as u64)
    }

    /// The MAC address part.
    pub const fn mac(self) -> EthernetAddress {
        EthernetAddress::from_u64(self.0 >> 16)
    }

    /// The 2-octet index part.
    pub const fn index(self) -> u16 {
        self.0 as u16
    }

    /// The index has [`CpId::INPUT_FLAG`] set.
    pub const fn is_input(self) -> bool {
        self.index() & Self::INPUT_FLAG != 0
    }

    /// The port of the index (`(index & 0x7fff) / 8`).
    pub const fn port(self) -> u16 {
        (self.index() & !Self::INPUT_FLAG) >> 3
    }

    /// The priority of the index (`index % 8`).
    pub const fn priority(self) -> u8 {
        (self.index() & 7) as u8
    }
}

impl fmt::Display for CpId {
    /// Sixteen lower-case hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(super::hex_text(&self.0.to_be_bytes(), None, &mut [0; 16]))
    }
}

impl FromStr for CpId {
    type Err = Error;

    /// Parses 1 to 16 hex digits, with an optional `0x` prefix.
    fn from_str(s: &str) -> Result<Self> {
        let h = s.strip_prefix("0x").unwrap_or(s);
        if h.is_empty() || h.len() > 16 || !h.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(Error::Malformed);
        }
        u64::from_str_radix(h, 16)
            .map(CpId)
            .map_err(|_| Error::Malformed)
    }
}

impl serde::Serialize for CpId {
    /// The `Display` text.
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.serialize_str(super::hex_text(&self.0.to_be_bytes(), None, &mut [0; 16]))
    }
}

impl<'de> serde::Deserialize<'de> for CpId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> core::result::Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse()
            .map_err(|_| serde::de::Error::custom(format!("invalid CPID {s:?}")))
    }
}

/// `bytes` in the CNM's queue units: 64 octets (**\[choice\]**), rounded toward zero, saturating
/// at `i16::MIN` / `i16::MAX`. Used for cnmQOffset and cnmQDelta.
pub fn quantize_queue(bytes: i64) -> i16 {
    (bytes / 64).clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16
}

/// A view of a CNM PDU: the octets after EtherType 0x22E7, Ethernet padding allowed at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cnm<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Cnm<T> {
    /// A view without checks: accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Cnm { buffer }
    }

    /// A view of a buffer holding a whole CNM PDU (see [`Cnm::check_len`]).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let c = Self::new_unchecked(buffer);
        c.check_len()?;
        Ok(c)
    }

    /// `Truncated` if the buffer is shorter than 24 octets or than the header plus the
    /// encapsulated MSDU length; `Malformed` if that length is above 64.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let msdu = usize::from(self.encap_msdu_len());
        if msdu > MAX_MSDU_LEN {
            return Err(Error::Malformed);
        }
        if len < HEADER_LEN + msdu {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Length of the PDU: header and encapsulated MSDU, padding excluded.
    pub fn pdu_len(&self) -> usize {
        HEADER_LEN + usize::from(self.encap_msdu_len())
    }

    fn ver_res_fb(&self) -> u16 {
        be_u16(self.buffer.as_ref(), field::VER_RES_FB.start)
    }

    /// Version (4 bits; 0 in this version of the standard, other values are kept).
    pub fn version(&self) -> u8 {
        (self.ver_res_fb() >> 12) as u8
    }

    /// Reserved (6 bits; sent as 0, kept as read).
    pub fn reserved(&self) -> u8 {
        ((self.ver_res_fb() >> 6) & 0x3f) as u8
    }

    /// QntzFb: the quantized |Fb|, 6 bits (1..63 in a CNM a CP sends).
    pub fn qntz_fb(&self) -> u8 {
        (self.ver_res_fb() & 0x3f) as u8
    }

    /// Congestion point identifier.
    pub fn cpid(&self) -> CpId {
        CpId(be_u64(self.buffer.as_ref(), field::CPID.start))
    }

    /// cnmQOffset = Q − Qeq in 64-octet units (**\[choice\]**).
    pub fn q_offset(&self) -> i16 {
        be_u16(self.buffer.as_ref(), field::Q_OFFSET.start) as i16
    }

    /// cnmQDelta = Q − Qold in 64-octet units (**\[choice\]**).
    pub fn q_delta(&self) -> i16 {
        be_u16(self.buffer.as_ref(), field::Q_DELTA.start) as i16
    }

    /// The whole 2-octet encapsulated priority field.
    pub fn encap_priority_field(&self) -> u16 {
        be_u16(self.buffer.as_ref(), field::ENCAP_PRIORITY.start)
    }

    /// Encapsulated priority 0..=7: the 3 most significant bits of its field (**\[choice\]**).
    pub fn encap_priority(&self) -> u8 {
        (self.encap_priority_field() >> 13) as u8
    }

    /// Encapsulated destination MAC address: the sampled frame's DA.
    pub fn encap_dst(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::ENCAP_DA]);
        EthernetAddress(a)
    }

    /// Encapsulated MSDU length field.
    pub fn encap_msdu_len(&self) -> u16 {
        be_u16(self.buffer.as_ref(), field::ENCAP_MSDU_LEN.start)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Cnm<&'a T> {
    /// The encapsulated MSDU (never longer than the octets present, even if a setter changed the
    /// length field after the check).
    pub fn encap_msdu(&self) -> &'a [u8] {
        let b = self.buffer.as_ref();
        let end = (HEADER_LEN + usize::from(self.encap_msdu_len())).min(b.len());
        &b[HEADER_LEN.min(end)..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Cnm<T> {
    fn set_ver_res_fb(&mut self, v: u16) {
        put_u16(self.buffer.as_mut(), field::VER_RES_FB.start, v);
    }

    /// Sets the version (low 4 bits used).
    pub fn set_version(&mut self, version: u8) {
        let v = (self.ver_res_fb() & 0x0fff) | (u16::from(version & 0x0f) << 12);
        self.set_ver_res_fb(v);
    }

    /// Sets the reserved bits (low 6 bits used).
    pub fn set_reserved(&mut self, reserved: u8) {
        let v = (self.ver_res_fb() & 0xf03f) | (u16::from(reserved & 0x3f) << 6);
        self.set_ver_res_fb(v);
    }

    /// Sets QntzFb (low 6 bits used).
    pub fn set_qntz_fb(&mut self, fb: u8) {
        let v = (self.ver_res_fb() & 0xffc0) | u16::from(fb & 0x3f);
        self.set_ver_res_fb(v);
    }

    /// Sets the CPID.
    pub fn set_cpid(&mut self, cpid: CpId) {
        put_u64(self.buffer.as_mut(), field::CPID.start, cpid.0);
    }

    /// Sets cnmQOffset.
    pub fn set_q_offset(&mut self, q: i16) {
        put_u16(self.buffer.as_mut(), field::Q_OFFSET.start, q as u16);
    }

    /// Sets cnmQDelta.
    pub fn set_q_delta(&mut self, q: i16) {
        put_u16(self.buffer.as_mut(), field::Q_DELTA.start, q as u16);
    }

    /// Sets the whole encapsulated priority field.
    pub fn set_encap_priority_field(&mut self, v: u16) {
        put_u16(self.buffer.as_mut(), field::ENCAP_PRIORITY.start, v);
    }

    /// Sets the encapsulated priority (low 3 bits of `p`, in the field's 3 MSBs, rest zero).
    pub fn set_encap_priority(&mut self, p: u8) {
        self.set_encap_priority_field(u16::from(p & 7) << 13);
    }

    /// Sets the encapsulated destination MAC address.
    pub fn set_encap_dst(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::ENCAP_DA].copy_from_slice(&a.0);
    }

    /// Sets the encapsulated MSDU length field.
    pub fn set_encap_msdu_len(&mut self, len: u16) {
        put_u16(self.buffer.as_mut(), field::ENCAP_MSDU_LEN.start, len);
    }

    /// The encapsulated MSDU, writable (clamped to the octets present).
    pub fn encap_msdu_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.encap_msdu_len());
        let b = self.buffer.as_mut();
        let end = (HEADER_LEN + len).min(b.len());
        &mut b[HEADER_LEN.min(end)..end]
    }
}

/// A CNM PDU as a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CnmRepr<'a> {
    /// Version, 4 bits (0).
    pub version: u8,
    /// Reserved, 6 bits (0).
    pub reserved: u8,
    /// QntzFb, 6 bits.
    pub qntz_fb: u8,
    /// Congestion point identifier.
    pub cpid: CpId,
    /// cnmQOffset in 64-octet units.
    pub q_offset: i16,
    /// cnmQDelta in 64-octet units.
    pub q_delta: i16,
    /// Encapsulated priority, 0..=7.
    pub encap_priority: u8,
    /// Encapsulated destination MAC address.
    pub encap_dst: EthernetAddress,
    /// Encapsulated MSDU, at most 64 octets (longer slices are cut to 64 by `emit`).
    pub encap_msdu: &'a [u8],
}

impl<'a> CnmRepr<'a> {
    /// Reads a CNM PDU.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(cnm: &Cnm<&'a T>) -> Result<Self> {
        cnm.check_len()?;
        Ok(CnmRepr {
            version: cnm.version(),
            reserved: cnm.reserved(),
            qntz_fb: cnm.qntz_fb(),
            cpid: cnm.cpid(),
            q_offset: cnm.q_offset(),
            q_delta: cnm.q_delta(),
            encap_priority: cnm.encap_priority(),
            encap_dst: cnm.encap_dst(),
            encap_msdu: cnm.encap_msdu(),
        })
    }

    fn msdu(&self) -> &'a [u8] {
        &self.encap_msdu[..self.encap_msdu.len().min(MAX_MSDU_LEN)]
    }

    /// Length of the PDU this writes: 24 + the MSDU length (at most 64).
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.msdu().len()
    }

    /// Writes the PDU into the first [`CnmRepr::buffer_len`] octets of the view. Bits beyond a
    /// field's width (version 4, reserved 6, QntzFb 6, priority 3) are dropped.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, cnm: &mut Cnm<T>) {
        let msdu = self.msdu();
        cnm.set_ver_res_fb(0);
        cnm.set_version(self.version);
        cnm.set_reserved(self.reserved);
        cnm.set_qntz_fb(self.qntz_fb);
        cnm.set_cpid(self.cpid);
        cnm.set_q_offset(self.q_offset);
        cnm.set_q_delta(self.q_delta);
        cnm.set_encap_priority(self.encap_priority);
        cnm.set_encap_dst(self.encap_dst);
        // At most 64, so the cast is exact.
        cnm.set_encap_msdu_len(msdu.len() as u16);
        cnm.encap_msdu_mut().copy_from_slice(msdu);
    }
}

/// Walks `frame` and parses its CNM: `Malformed` if the payload EtherType is not 0x22E7,
/// otherwise what [`walk`] and [`CnmRepr::parse`] return.
pub fn parse_frame(frame: &[u8]) -> Result<(L2Info, CnmRepr<'_>)> {
    let info = walk(frame)?;
    if info.ethertype != EtherType::Cnm {
        return Err(Error::Malformed);
    }
    let pdu = frame.get(info.payload_offset..).ok_or(Error::Truncated)?;
    let repr = CnmRepr::parse(&Cnm::new_checked(pdu)?)?;
    Ok((info, repr))
}

/// What a congestion point puts into a CNM besides what it copies from the sampled frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CnmParams {
    /// Source address of the CNM: the CP's port or bridge MAC.
    pub cp_mac: EthernetAddress,
    /// CPID of the CP.
    pub cpid: CpId,
    /// Quantized feedback, 1..=63 (larger values are sent as 63).
    pub qntz_fb: u8,
    /// cnmQOffset in 64-octet units (see [`quantize_queue`]).
    pub q_offset: i16,
    /// cnmQDelta in 64-octet units.
    pub q_delta: i16,
    /// PCP given to the copied VLAN tag (low 3 bits used; [`DEFAULT_CNM_PRIORITY`]).
    pub cnm_priority: u8,
    /// Priority of an untagged sampled frame (the port's default priority).
    pub default_priority: u8,
    /// Octets of the sampled frame to encapsulate; at most 64 are used.
    pub max_msdu: usize,
}

/// Builds in `out` the CNM for the `sampled` frame and returns its length (at least 60: the frame
/// is zero-padded to the minimum size).
///
/// DA = the sampled SA; SA = `p.cp_mac`; the sampled frame's VLAN tag(s) are copied with the
/// outer PCP set to `p.cnm_priority` (no tag in, no tag out); its CN-TAG is copied when present;
/// then EtherType 0x22E7 and the PDU: version 0, reserved 0, `p.qntz_fb`, `p.cpid`,
/// `p.q_offset`, `p.q_delta`, the sampled frame's priority (`p.default_priority` if untagged),
/// the sampled DA, and up to `min(p.max_msdu, 64)` octets of the sampled frame from the
/// EtherType after its VLAN tag(s).
///
/// Errors: those of [`walk`] on the sampled frame; `BufferTooSmall` if `out` cannot hold the
/// CNM. Nothing is allocated.
pub fn build_cnm(sampled: &[u8], p: &CnmParams, out: &mut [u8]) -> Result<usize> {
    let info = walk(sampled)?;
    // Tags (VLAN then CN-TAG) occupy [12, tags_end); the MSDU starts after the VLAN tag(s).
    let tags_end = info.payload_offset - 2;
    let msdu_start = info.after_vlan_offset();
    let msdu_len = p.max_msdu.min(MAX_MSDU_LEN).min(sampled.len() - msdu_start);
    let msdu = &sampled[msdu_start..msdu_start + msdu_len];

    let pdu_start = tags_end + 2;
    let len = pdu_start + HEADER_LEN + msdu_len;
    let padded = len.max(MIN_FRAME_LEN);
    let out = out.get_mut(..padded).ok_or(Error::BufferTooSmall)?;

    let mut eth = EthernetFrame::new_unchecked(&mut *out);
    eth.set_dst_addr(info.src);
    eth.set_src_addr(p.cp_mac);
    out[ethernet::HEADER_LEN - 2..tags_end]
        .copy_from_slice(&sampled[ethernet::HEADER_LEN - 2..tags_end]);
    if let Some(off) = info.vlan_offset {
        VlanTag::new_unchecked(&mut out[off + 2..]).set_pcp(p.cnm_priority);
    }
    put_u16(out, tags_end, EtherType::Cnm.into());

    let repr = CnmRepr {
        version: 0,
        reserved: 0,
        qntz_fb: p.qntz_fb.min(QNTZ_FB_MAX),
        cpid: p.cpid,
        q_offset: p.q_offset,
        q_delta: p.q_delta,
        encap_priority: info.priority(p.default_priority),
        encap_dst: info.dst,
        encap_msdu: msdu,
    };
    repr.emit(&mut Cnm::new_unchecked(&mut out[pdu_start..len]));
    out[len..].fill(0);
    Ok(padded)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CP_MAC: EthernetAddress = EthernetAddress([0x02, 0xc0, 0, 0, 0, 0x01]);

    /// A CN-tagged CNM written by hand from the field table of the module documentation.
    #[rustfmt::skip]
    const FIXTURE: [u8; 64] = [
        // --- Ethernet header
        0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, // DA: the sampled frame's SA
        0x02, 0xc0, 0x00, 0x00, 0x00, 0x01, // SA: the CP's MAC
        0x81, 0x00,                         // TPID: 802.1Q
        0xc0, 0x64,                         // TCI: PCP 6, DEI 0, VID 100
        0x22, 0xe9,                         // EtherType: CN-TAG
        0x00, 0x2a,                         // RPID 42
        0x22, 0xe7,                         // EtherType: CNM
        // --- CNM PDU
        0x00, 0x2d,                         // Version 0 · Reserved 0 · QntzFb 45 (0b101101)
        0x02, 0xc0, 0x00, 0x00, 0x00, 0x01, // CPID: MAC part 02:c0:00:00:00:01
        0x00, 0x1b,                         // CPID: index 27 = port 3 × 8 + priority 3
        0x01, 0x90,                         // cnmQOffset +400 (25600 octets)
        0xff, 0xfe,                         // cnmQDelta −2 (−128 octets)
        0x60, 0x00,                         // Encapsulated priority 3 in the 3 MSBs
        0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, // Encapsulated DA
        0x00, 0x0a,                         // Encapsulated MSDU length 10
        0x22, 0xe9, 0x00, 0x2a,             // MSDU: the sampled CN-TAG ...
        0x08, 0x00,                         // ... its payload EtherType (IPv4) ...
        0x45, 0x00, 0x00, 0x1c,             // ... the first IPv4 octets
        // --- Ethernet padding (ignored)
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    fn fixture_repr() -> CnmRepr<'static> {
        CnmRepr {
            version: 0,
            reserved: 0,
            qntz_fb: 45,
            cpid: CpId::output(CP_MAC, 3, 3),
            q_offset: 400,
            q_delta: -2,
            encap_priority: 3,
            encap_dst: EthernetAddress([2, 0, 0, 0, 0, 0x0b]),
            encap_msdu: &FIXTURE[46..56],
        }
    }

    #[test]
    fn parse_fixture() {
        let (info, r) = parse_frame(&FIXTURE).unwrap();
        assert_eq!(info.dst, EthernetAddress([2, 0, 0, 0, 0, 0x0a]));
        assert_eq!(info.src, CP_MAC);
        assert_eq!(info.priority(0), 6);
        assert_eq!(info.rpid, Some(42));
        assert_eq!(info.payload_offset, 22);
        assert_eq!(r, fixture_repr());

        let c = Cnm::new_checked(&FIXTURE[22..]).unwrap();
        assert_eq!(c.version(), 0);
        assert_eq!(c.reserved(), 0);
        assert_eq!(c.qntz_fb(), 45);
        assert_eq!(c.cpid().to_string(), "02c000000001001b");
        assert_eq!(c.cpid().mac(), CP_MAC);
        assert_eq!((c.cpid().port(), c.cpid().priority()), (3, 3));
        assert!(!c.cpid().is_input());
        assert_eq!(c.q_offset(), 400);
        assert_eq!(c.q_delta(), -2);
        assert_eq!(c.encap_priority_field(), 0x6000);
        assert_eq!(c.encap_priority(), 3);
        assert_eq!(c.encap_msdu_len(), 10);
        assert_eq!(
            c.encap_msdu(),
            &[0x22, 0xe9, 0, 0x2a, 8, 0, 0x45, 0, 0, 0x1c]
        );
        assert_eq!(c.pdu_len(), 34);
    }

    #[test]
    fn emit_matches_fixture_with_prefill() {
        let r = fixture_repr();
        assert_eq!(r.buffer_len(), 34);
        let mut buf = [0xa5u8; 36];
        r.emit(&mut Cnm::new_unchecked(&mut buf[..34]));
        assert_eq!(&buf[..34], &FIXTURE[22..56]);
        assert_eq!(&buf[34..], &[0xa5, 0xa5]);
    }

    #[test]
    fn length_rules() {
        let pdu = &FIXTURE[22..];
        // Padding after the PDU is ignored; exactly the PDU is fine.
        assert!(Cnm::new_checked(&pdu[..34]).is_ok());
        // MSDU cut short.
        assert_eq!(Cnm::new_checked(&pdu[..33]), Err(Error::Truncated));
        // Shorter than the 24-octet header.
        assert_eq!(Cnm::new_checked(&pdu[..23]), Err(Error::Truncated));
        // MSDU length above 64, even with the octets present.
        let mut big = [0u8; 24 + 65];
        big[22..24].copy_from_slice(&65u16.to_be_bytes());
        assert_eq!(Cnm::new_checked(&big[..]), Err(Error::Malformed));
        big[22..24].copy_from_slice(&64u16.to_be_bytes());
        assert!(Cnm::new_checked(&big[..]).is_ok());
    }

    #[test]
    fn unknown_version_and_reserved_are_kept() {
        let mut pdu = [0u8; 24];
        pdu[0..2].copy_from_slice(&0xffffu16.to_be_bytes());
        let r = CnmRepr::parse(&Cnm::new_checked(&pdu[..]).unwrap()).unwrap();
        assert_eq!((r.version, r.reserved, r.qntz_fb), (15, 63, 63));
        let mut out = [0xa5u8; 24];
        r.emit(&mut Cnm::new_unchecked(&mut out[..]));
        assert_eq!(out, pdu);
    }

    #[test]
    fn parse_frame_wants_a_cnm() {
        let mut f = FIXTURE;
        f[20..22].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(parse_frame(&f).unwrap_err(), Error::Malformed);
    }

    #[test]
    fn quantize() {
        assert_eq!(quantize_queue(0), 0);
        assert_eq!(quantize_queue(63), 0);
        assert_eq!(quantize_queue(64), 1);
        assert_eq!(quantize_queue(-127), -1);
        assert_eq!(quantize_queue(26_000), 406);
        assert_eq!(quantize_queue(i64::MAX), i16::MAX);
        assert_eq!(quantize_queue(i64::MIN), i16::MIN);
        assert_eq!(quantize_queue(64 * 40_000), i16::MAX);
    }

    #[test]
    fn cpid_layout() {
        let c = CpId::input(CP_MAC, 5, 7);
        assert_eq!(c.index(), 0x8000 | (5 * 8 + 7));
        assert!(c.is_input());
        assert_eq!((c.port(), c.priority(), c.mac()), (5, 7, CP_MAC));
        assert_eq!(CpId::new(CP_MAC, 0x8000 | 47), c);
        assert_eq!(c.to_string(), "02c000000001802f");
        assert_eq!("02c000000001802f".parse::<CpId>().unwrap(), c);
        assert_eq!("0x02c000000001802f".parse::<CpId>().unwrap(), c);
        assert!("".parse::<CpId>().is_err());
        assert!("02c000000001802f0".parse::<CpId>().is_err());
        assert!("+1".parse::<CpId>().is_err());
        let j = serde_json::to_string(&c).unwrap();
        assert_eq!(j, "\"02c000000001802f\"");
        assert_eq!(serde_json::from_str::<CpId>(&j).unwrap(), c);
    }

    fn params() -> CnmParams {
        CnmParams {
            cp_mac: CP_MAC,
            cpid: CpId::output(CP_MAC, 3, 3),
            qntz_fb: 45,
            q_offset: 400,
            q_delta: -2,
            cnm_priority: DEFAULT_CNM_PRIORITY,
            default_priority: 0,
            max_msdu: 64,
        }
    }

    #[test]
    fn build_from_tagged_cn_tagged_frame_gives_fixture() {
        #[rustfmt::skip]
        let mut sampled = vec![
            0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, // DA
            0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, // SA
            0x81, 0x00, 0x70, 0x64,             // VLAN: PCP 3, DEI 1, VID 100
            0x22, 0xe9, 0x00, 0x2a,             // CN-TAG, RPID 42
            0x08, 0x00,                         // IPv4
            0x45, 0x00, 0x00, 0x1c,
        ];
        sampled.resize(120, 0x77);
        let p = CnmParams {
            max_msdu: 10,
            ..params()
        };
        let mut out = [0xa5u8; 100];
        let n = build_cnm(&sampled, &p, &mut out).unwrap();
        assert_eq!(n, 60);
        // The fixture's TCI has DEI 0: the copied tag keeps the sampled DEI (1).
        let mut want = FIXTURE;
        want[14] |= 0x10;
        assert_eq!(&out[..60], &want[..60]);
        assert_eq!(out[60], 0xa5, "nothing written past the frame");
    }

    #[test]
    fn build_from_untagged_frame() {
        let mut sampled = vec![0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a, 0x86, 0xdd];
        sampled.extend(0u8..100);
        let p = CnmParams {
            default_priority: 2,
            ..params()
        };
        let mut out = [0xa5u8; 200];
        let n = build_cnm(&sampled, &p, &mut out).unwrap();
        assert_eq!(n, 14 + 24 + 64);
        let f = &out[..n];
        let info = walk(f).unwrap();
        assert_eq!(info.vlan, None, "untagged in, untagged out");
        assert_eq!(info.cn_tag_offset, None);
        assert_eq!(info.ethertype, EtherType::Cnm);
        assert_eq!(info.dst, EthernetAddress([2, 0, 0, 0, 0, 0x0a]));
        assert_eq!(info.src, CP_MAC);
        let c = Cnm::new_checked(&f[14..]).unwrap();
        assert_eq!(c.version(), 0);
        assert_eq!(c.reserved(), 0);
        assert_eq!(c.qntz_fb(), 45);
        assert_eq!(c.cpid(), p.cpid);
        assert_eq!(c.q_offset(), 400);
        assert_eq!(c.q_delta(), -2);
        assert_eq!(
            c.encap_priority(),
            2,
            "default priority of an untagged frame"
        );
        assert_eq!(c.encap_priority_field() & 0x1fff, 0);
        assert_eq!(c.encap_dst(), EthernetAddress([2, 0, 0, 0, 0, 0x0b]));
        assert_eq!(c.encap_msdu_len(), 64, "truncated to 64");
        assert_eq!(c.encap_msdu(), &sampled[12..76]);
        assert_eq!(out[n], 0xa5);
    }

    #[test]
    fn build_limits() {
        let sampled = [0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a, 0x08, 0x00];
        let mut out = [0xa5u8; 60];
        // A 2-octet MSDU (just the EtherType): padded to 60 with zeros.
        assert_eq!(build_cnm(&sampled, &params(), &mut out).unwrap(), 60);
        let c = Cnm::new_checked(&out[14..]).unwrap();
        assert_eq!(c.encap_msdu(), &[0x08, 0x00]);
        assert!(out[14 + 26..].iter().all(|&b| b == 0));
        // Too small an output, truncated input, clamped QntzFb, max_msdu 0.
        assert_eq!(
            build_cnm(&sampled, &params(), &mut [0u8; 59]),
            Err(Error::BufferTooSmall)
        );
        assert_eq!(
            build_cnm(&sampled[..13], &params(), &mut out),
            Err(Error::Truncated)
        );
        let p = CnmParams {
            qntz_fb: 200,
            max_msdu: 0,
            ..params()
        };
        build_cnm(&sampled, &p, &mut out).unwrap();
        let c = Cnm::new_checked(&out[14..]).unwrap();
        assert_eq!((c.qntz_fb(), c.encap_msdu_len()), (63, 0));
    }
}
