//! One pass over the L2 headers of a frame: MAC header, VLAN tag(s), CN-TAG.
//!
//! Order on the wire (IEEE 802.1Q clauses 9.3 and 33.3): destination, source, then an optional
//! 802.1Q tag (TPID 0x8100, or an 802.1ad S-tag 0x88A8 possibly followed by a C-tag: at most
//! [`MAX_VLAN_TAGS`] stacked tags are walked), then an optional CN-TAG (0x22E9 · RPID), then the
//! payload's EtherType. [`walk`] records where each of them starts so that a switch can rewrite a
//! PCP or strip a CN-TAG in place, and the congestion point can build a CNM, without parsing
//! twice.

use super::cn_tag::CnTag;
use super::ethernet::{self, EthernetFrame};
use super::vlan::VlanTag;
use super::{Error, EtherType, EthernetAddress, Result};

/// Stacked VLAN tags [`walk`] looks through (an S-tag and a C-tag); a third tag is left as the
/// payload, with `ethertype` = [`EtherType::Vlan`].
pub const MAX_VLAN_TAGS: usize = 2;

/// The fields of the outermost VLAN tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VlanInfo {
    /// Priority code point, 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier.
    pub vid: u16,
}

/// What [`walk`] found. Offsets are from the start of the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct L2Info {
    /// Destination address.
    pub dst: EthernetAddress,
    /// Source address.
    pub src: EthernetAddress,
    /// The outermost VLAN tag, if any.
    pub vlan: Option<VlanInfo>,
    /// Offset of the outermost tag's TPID (12 when tagged).
    pub vlan_offset: Option<usize>,
    /// Offset of the CN-TAG's 0x22E9 EtherType; the RPID follows 2 octets later.
    pub cn_tag_offset: Option<usize>,
    /// The CN-TAG's RPID, if a CN-TAG is present.
    pub rpid: Option<u16>,
    /// The payload's EtherType, after VLAN tag(s) and CN-TAG.
    pub ethertype: EtherType,
    /// Offset of the first payload octet (just after `ethertype`).
    pub payload_offset: usize,
}

impl L2Info {
    /// The frame's priority: the outer tag's PCP if tagged, otherwise `default` (the port's
    /// default priority, IEEE 802.1Q clause 6.9.3).
    pub fn priority(&self, default: u8) -> u8 {
        self.vlan.map_or(default, |v| v.pcp)
    }

    /// Offset of the EtherType of what follows the VLAN tag(s): the CN-TAG's 0x22E9 when one is
    /// present, the payload's EtherType otherwise. This is where a CNM's encapsulated MSDU starts
    /// (see [`super::cnm`]).
    pub fn after_vlan_offset(&self) -> usize {
        self.cn_tag_offset.unwrap_or(self.payload_offset - 2)
    }
}

/// Walks the L2 headers of `frame`. `Truncated` if the frame is shorter than its MAC header, or
/// a VLAN tag or CN-TAG announced by an EtherType is cut short; every other input gives `Ok`.
pub fn walk(frame: &[u8]) -> Result<L2Info> {
    let eth = EthernetFrame::new_checked(frame)?;
    // `off` is the offset of the EtherType field being looked at; the header it announces starts
    // at `off + 2`, which is within the frame because that EtherType field was validated.
    let mut off = ethernet::HEADER_LEN - 2;
    let mut ethertype = eth.ethertype();
    let mut vlan = None;
    let mut vlan_offset = None;
    let mut tags = 0;
    while ethertype.is_vlan() && tags < MAX_VLAN_TAGS {
        let tag = VlanTag::new_checked(frame.get(off + 2..).ok_or(Error::Truncated)?)?;
        if vlan.is_none() {
            vlan = Some(VlanInfo {
                pcp: tag.pcp(),
                dei: tag.dei(),
                vid: tag.vid(),
            });
            vlan_offset = Some(off);
        }
        ethertype = tag.ethertype();
        off += 4;
        tags += 1;
    }
    let mut cn_tag_offset = None;
    let mut rpid = None;
    if ethertype == EtherType::CnTag {
        let tag = CnTag::new_checked(frame.get(off + 2..).ok_or(Error::Truncated)?)?;
        cn_tag_offset = Some(off);
        rpid = Some(tag.rpid());
        ethertype = tag.ethertype();
        off += 4;
    }
    Ok(L2Info {
        dst: eth.dst_addr(),
        src: eth.src_addr(),
        vlan,
        vlan_offset,
        cn_tag_offset,
        rpid,
        ethertype,
        payload_offset: off + 2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HDR: [u8; 12] = [
        0x02, 0, 0, 0, 0, 0x02, // DA
        0x02, 0, 0, 0, 0, 0x01, // SA
    ];

    fn frame(rest: &[u8]) -> Vec<u8> {
        let mut f = HDR.to_vec();
        f.extend_from_slice(rest);
        f
    }

    #[test]
    fn untagged() {
        let f = frame(&[0x08, 0x00, 0x45]);
        let i = walk(&f).unwrap();
        assert_eq!(i.dst, EthernetAddress::new(2, 0, 0, 0, 0, 2));
        assert_eq!(i.src, EthernetAddress::new(2, 0, 0, 0, 0, 1));
        assert_eq!(i.vlan, None);
        assert_eq!(i.vlan_offset, None);
        assert_eq!(i.cn_tag_offset, None);
        assert_eq!(i.rpid, None);
        assert_eq!(i.ethertype, EtherType::Ipv4);
        assert_eq!(i.payload_offset, 14);
        assert_eq!(i.priority(3), 3);
        assert_eq!(i.after_vlan_offset(), 12);
    }

    #[test]
    fn vlan_and_cn_tag() {
        let f = frame(&[
            0x81, 0x00, 0xa0, 0x0a, // C-tag: PCP 5, VID 10
            0x22, 0xe9, 0x00, 0x2a, // CN-TAG: RPID 42
            0x86, 0xdd, // IPv6
        ]);
        let i = walk(&f).unwrap();
        assert_eq!(
            i.vlan,
            Some(VlanInfo {
                pcp: 5,
                dei: false,
                vid: 10
            })
        );
        assert_eq!(i.vlan_offset, Some(12));
        assert_eq!(i.cn_tag_offset, Some(16));
        assert_eq!(i.rpid, Some(42));
        assert_eq!(i.ethertype, EtherType::Ipv6);
        assert_eq!(i.payload_offset, 22);
        assert_eq!(i.priority(0), 5);
        assert_eq!(i.after_vlan_offset(), 16);
    }

    #[test]
    fn cn_tag_without_vlan() {
        let f = frame(&[0x22, 0xe9, 0x12, 0x34, 0x08, 0x06]);
        let i = walk(&f).unwrap();
        assert_eq!(i.cn_tag_offset, Some(12));
        assert_eq!(i.rpid, Some(0x1234));
        assert_eq!(i.ethertype, EtherType::Arp);
        assert_eq!(i.payload_offset, 18);
    }

    #[test]
    fn qinq_reports_outer_tag() {
        let f = frame(&[
            0x88, 0xa8, 0x20, 0x64, // S-tag: PCP 1, VID 100
            0x81, 0x00, 0xe0, 0x05, // C-tag: PCP 7, VID 5
            0x81, 0x00, 0x00, 0x01, // a third tag is left as payload
        ]);
        let i = walk(&f).unwrap();
        assert_eq!(i.vlan.map(|v| (v.pcp, v.vid)), Some((1, 100)));
        assert_eq!(i.vlan_offset, Some(12));
        assert_eq!(i.ethertype, EtherType::Vlan);
        assert_eq!(i.payload_offset, 22);
    }

    #[test]
    fn truncations() {
        assert_eq!(walk(&HDR), Err(Error::Truncated));
        assert_eq!(walk(&frame(&[0x81, 0x00, 0xa0])), Err(Error::Truncated));
        assert_eq!(
            walk(&frame(&[0x81, 0x00, 0xa0, 0x0a, 0x22, 0xe9, 0, 1, 0x08])),
            Err(Error::Truncated)
        );
        // A header cut exactly after the payload EtherType is fine.
        let i = walk(&frame(&[0x81, 0x00, 0xa0, 0x0a, 0x08, 0x00])).unwrap();
        assert_eq!(i.payload_offset, 18);
    }
}
