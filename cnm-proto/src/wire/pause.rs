//! MAC Control frames: 802.3x PAUSE and 802.1Qbb priority-based flow control (PFC).
//!
//! Source: IEEE 802.3 clause 31.4 (MAC Control frame: EtherType 0x8808, a 2-octet opcode, the
//! opcode's parameters, then reserved zeros up to `minFrameSize`), Annex 31B (PAUSE: opcode
//! 0x0001, one `pause_time` in quanta of 512 bit times, destination 01-80-C2-00-00-01) and
//! Annex 31D together with IEEE 802.1Q clause 36 (formerly 802.1Qbb; PFC: opcode 0x0101, a
//! 2-octet priority-enable vector, then eight 2-octet times, one per priority 0..7).
//!
//! The [`MacControl`] view covers the octets after EtherType 0x8808. Because a MAC Control frame
//! is always padded to the 60-octet minimum frame (46 octets after the EtherType), the view
//! requires the 20 octets that hold the largest parameter block this module reads (PFC's): no
//! conforming frame is rejected, and no accessor can read past the buffer.

use super::ethernet::{self, EthernetFrame};
use super::MIN_FRAME_LEN;
use super::{be_u16, put_u16, Error, EtherType, EthernetAddress, EthernetRepr, Result};

/// Destination of PAUSE and PFC frames, the MAC Control multicast address 01-80-C2-00-00-01
/// (IEEE 802.3 Annex 31B.1).
pub const PAUSE_DA: EthernetAddress = EthernetAddress([0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);

/// Opcode of PAUSE (IEEE 802.3 Annex 31A, Table 31A-1; Annex 31B).
pub const OPCODE_PAUSE: u16 = 0x0001;
/// Opcode of PFC (IEEE 802.3 Annex 31A, Table 31A-1; Annex 31D).
pub const OPCODE_PFC: u16 = 0x0101;

/// Byte ranges after EtherType 0x8808 (IEEE 802.3 clause 31.4.1, Annexes 31B.2 and 31D.2).
mod field {
    use core::ops::{Range, RangeFrom};
    /// MAC Control opcode (802.3 clause 31.4.1.3).
    pub const OPCODE: Range<usize> = 0..2;
    /// PAUSE `pause_time`, in quanta of 512 bit times (802.3 Annex 31B.2).
    pub const PAUSE_TIME: Range<usize> = 2..4;
    /// PFC priority-enable vector: one reserved zero octet, then `e[7..0]` (802.3 Annex 31D.2,
    /// 802.1Q clause 36.1.3).
    pub const PFC_CLASS_ENABLE: Range<usize> = 2..4;
    /// PFC `time[0]` .. `time[7]`, 2 octets each, priority 0 first (802.3 Annex 31D.2).
    pub const PFC_TIMES: Range<usize> = 4..20;
    /// Reserved octets after the parameters (802.3 clause 31.4.1.4).
    pub const RESERVED: RangeFrom<usize> = 20..;
}

/// Octets the view requires after the EtherType: opcode and the PFC parameters.
pub const MIN_LEN: usize = field::PFC_TIMES.end;

/// Octets after the EtherType in a minimum-size MAC Control frame (60 − 14), which is what
/// [`MacControlRepr::emit`] writes.
pub const PADDED_LEN: usize = MIN_FRAME_LEN - ethernet::HEADER_LEN;

/// A view of a MAC Control frame after its 0x8808 EtherType.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacControl<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> MacControl<T> {
    /// A view without length check: accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        MacControl { buffer }
    }

    /// A view of a buffer holding at least [`MIN_LEN`] octets.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let m = Self::new_unchecked(buffer);
        m.check_len()?;
        Ok(m)
    }

    /// `Truncated` if the buffer is shorter than [`MIN_LEN`].
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < MIN_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The opcode.
    pub fn opcode(&self) -> u16 {
        be_u16(self.buffer.as_ref(), field::OPCODE.start)
    }

    /// PAUSE `pause_time` in quanta of 512 bit times (meaningful when the opcode is PAUSE).
    pub fn pause_time(&self) -> u16 {
        be_u16(self.buffer.as_ref(), field::PAUSE_TIME.start)
    }

    /// PFC priority-enable vector; bit `i` enables `time[i]` (meaningful when the opcode is PFC).
    pub fn class_enable(&self) -> u16 {
        be_u16(self.buffer.as_ref(), field::PFC_CLASS_ENABLE.start)
    }

    /// PFC `time[priority]` in quanta of 512 bit times; `priority` is taken modulo 8.
    pub fn pfc_time(&self, priority: usize) -> u16 {
        be_u16(
            self.buffer.as_ref(),
            field::PFC_TIMES.start + 2 * (priority % 8),
        )
    }

    /// All eight PFC times, priority 0 first.
    pub fn pfc_times(&self) -> [u16; 8] {
        core::array::from_fn(|i| self.pfc_time(i))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> MacControl<&'a T> {
    /// The octets after the PFC parameters (reserved, normally zero).
    pub fn reserved(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::RESERVED]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MacControl<T> {
    /// Sets the opcode.
    pub fn set_opcode(&mut self, op: u16) {
        put_u16(self.buffer.as_mut(), field::OPCODE.start, op);
    }

    /// Sets the PAUSE `pause_time`.
    pub fn set_pause_time(&mut self, quanta: u16) {
        put_u16(self.buffer.as_mut(), field::PAUSE_TIME.start, quanta);
    }

    /// Sets the PFC priority-enable vector.
    pub fn set_class_enable(&mut self, v: u16) {
        put_u16(self.buffer.as_mut(), field::PFC_CLASS_ENABLE.start, v);
    }

    /// Sets PFC `time[priority]`; `priority` is taken modulo 8.
    pub fn set_pfc_time(&mut self, priority: usize, quanta: u16) {
        put_u16(
            self.buffer.as_mut(),
            field::PFC_TIMES.start + 2 * (priority % 8),
            quanta,
        );
    }

    /// Fills every octet after the opcode with zeros.
    pub fn clear_parameters(&mut self) {
        self.buffer.as_mut()[field::OPCODE.end..].fill(0);
    }
}

/// A MAC Control frame as a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MacControlRepr {
    /// 802.3x PAUSE (opcode 0x0001): stop for `quanta` × 512 bit times; 0 resumes.
    Pause {
        /// `pause_time`.
        quanta: u16,
    },
    /// 802.1Qbb PFC (opcode 0x0101): for each priority `i` whose bit is set in `class_enable`,
    /// stop for `times[i]` × 512 bit times.
    Pfc {
        /// Priority-enable vector (the high octet is reserved, zero).
        class_enable: u16,
        /// `time[0]` .. `time[7]`.
        times: [u16; 8],
    },
    /// Any other opcode, kept as read; its parameters are not interpreted.
    Unknown {
        /// The opcode.
        opcode: u16,
    },
}

impl MacControlRepr {
    /// Reads a MAC Control frame.
    pub fn parse<T: AsRef<[u8]>>(m: &MacControl<T>) -> Result<Self> {
        m.check_len()?;
        Ok(match m.opcode() {
            OPCODE_PAUSE => MacControlRepr::Pause {
                quanta: m.pause_time(),
            },
            OPCODE_PFC => MacControlRepr::Pfc {
                class_enable: m.class_enable(),
                times: m.pfc_times(),
            },
            opcode => MacControlRepr::Unknown { opcode },
        })
    }

    /// The opcode of this frame.
    pub const fn opcode(&self) -> u16 {
        match self {
            MacControlRepr::Pause { .. } => OPCODE_PAUSE,
            MacControlRepr::Pfc { .. } => OPCODE_PFC,
            MacControlRepr::Unknown { opcode } => *opcode,
        }
    }

    /// Octets after the EtherType in the padded frame this writes ([`PADDED_LEN`], 46).
    pub const fn buffer_len(&self) -> usize {
        PADDED_LEN
    }

    /// Writes opcode and parameters and zeros every other octet of the view.
    /// The view must hold at least [`MIN_LEN`] octets.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, m: &mut MacControl<T>) {
        m.clear_parameters();
        m.set_opcode(self.opcode());
        match *self {
            MacControlRepr::Pause { quanta } => m.set_pause_time(quanta),
            MacControlRepr::Pfc {
                class_enable,
                times,
            } => {
                m.set_class_enable(class_enable);
                for (i, t) in times.iter().enumerate() {
                    m.set_pfc_time(i, *t);
                }
            }
            MacControlRepr::Unknown { .. } => {}
        }
    }
}

/// Builds a whole PAUSE or PFC frame from `src` to [`PAUSE_DA`] in `out` and returns its length
/// (always 60: the frame is padded with zeros to the minimum frame size, 802.3 clause 31.4.1.4).
/// `BufferTooSmall` if `out` holds fewer than 60 octets.
pub fn build_pause_frame(
    src: EthernetAddress,
    repr: &MacControlRepr,
    out: &mut [u8],
) -> Result<usize> {
    let out = out.get_mut(..MIN_FRAME_LEN).ok_or(Error::BufferTooSmall)?;
    let eth = EthernetRepr {
        src_addr: src,
        dst_addr: PAUSE_DA,
        ethertype: EtherType::MacControl,
    };
    let mut frame = EthernetFrame::new_unchecked(&mut *out);
    eth.emit(&mut frame);
    repr.emit(&mut MacControl::new_unchecked(frame.payload_mut()));
    Ok(MIN_FRAME_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x07]);

    /// A whole PAUSE frame asking for 0x1234 quanta.
    fn pause_fixture() -> [u8; 60] {
        let mut f = [0u8; 60]; // reserved/pad octets are zero
        f[..20].copy_from_slice(&[
            0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, // DA: MAC Control multicast
            0x02, 0x00, 0x00, 0x00, 0x00, 0x07, // SA
            0x88, 0x08, // EtherType: MAC Control
            0x00, 0x01, // opcode: PAUSE
            0x12, 0x34, // pause_time
            0x00, 0x00, // reserved
        ]);
        f
    }

    /// A whole PFC frame pausing priorities 3 (for 0x0300) and 7 (for 0xffff).
    fn pfc_fixture() -> [u8; 60] {
        let mut f = [0u8; 60];
        f[..34].copy_from_slice(&[
            0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, // DA: MAC Control multicast
            0x02, 0x00, 0x00, 0x00, 0x00, 0x07, // SA
            0x88, 0x08, // EtherType: MAC Control
            0x01, 0x01, // opcode: PFC
            0x00, 0x88, // class-enable vector: reserved octet, e[7] and e[3]
            0x00, 0x00, // time[0]
            0x00, 0x00, // time[1]
            0x00, 0x00, // time[2]
            0x03, 0x00, // time[3]
            0x00, 0x00, // time[4]
            0x00, 0x00, // time[5]
            0x00, 0x00, // time[6]
            0xff, 0xff, // time[7]
        ]);
        f
    }

    fn pfc_repr() -> MacControlRepr {
        MacControlRepr::Pfc {
            class_enable: 0x0088,
            times: [0, 0, 0, 0x0300, 0, 0, 0, 0xffff],
        }
    }

    #[test]
    fn parse_pause_fixture() {
        let f = pause_fixture();
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!(eth.dst_addr(), PAUSE_DA);
        assert_eq!(eth.ethertype(), EtherType::MacControl);
        let m = MacControl::new_checked(eth.payload()).unwrap();
        assert_eq!(m.opcode(), OPCODE_PAUSE);
        assert_eq!(m.pause_time(), 0x1234);
        assert_eq!(
            MacControlRepr::parse(&m).unwrap(),
            MacControlRepr::Pause { quanta: 0x1234 }
        );
    }

    #[test]
    fn parse_pfc_fixture() {
        let f = pfc_fixture();
        let m = MacControl::new_checked(&f[14..]).unwrap();
        assert_eq!(m.opcode(), OPCODE_PFC);
        assert_eq!(m.class_enable(), 0x88);
        assert_eq!(m.pfc_time(3), 0x300);
        assert_eq!(MacControlRepr::parse(&m).unwrap(), pfc_repr());
    }

    #[test]
    fn build_frames_match_fixtures() {
        let mut out = [0xa5u8; 64];
        let n =
            build_pause_frame(SRC, &MacControlRepr::Pause { quanta: 0x1234 }, &mut out).unwrap();
        assert_eq!(n, 60);
        assert_eq!(out[..60], pause_fixture());
        assert_eq!(out[60..], [0xa5; 4], "nothing written past the frame");

        let mut out = [0xa5u8; 60];
        assert_eq!(build_pause_frame(SRC, &pfc_repr(), &mut out).unwrap(), 60);
        assert_eq!(out, pfc_fixture());

        assert_eq!(
            build_pause_frame(SRC, &pfc_repr(), &mut [0u8; 59]),
            Err(Error::BufferTooSmall)
        );
    }

    #[test]
    fn unknown_opcode_is_kept() {
        let mut f = pause_fixture();
        f[14..16].copy_from_slice(&[0x00, 0x02]);
        let m = MacControl::new_checked(&f[14..]).unwrap();
        assert_eq!(
            MacControlRepr::parse(&m).unwrap(),
            MacControlRepr::Unknown { opcode: 2 }
        );
        let mut buf = [0xa5u8; PADDED_LEN];
        let r = MacControlRepr::Unknown { opcode: 2 };
        r.emit(&mut MacControl::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..2], &[0, 2]);
        assert!(buf[2..].iter().all(|&b| b == 0));
    }

    #[test]
    fn short_is_truncated() {
        let f = pause_fixture();
        assert_eq!(
            MacControl::new_checked(&f[14..33]).unwrap_err(),
            Error::Truncated
        );
        assert!(MacControl::new_checked(&f[14..34]).is_ok());
    }
}
