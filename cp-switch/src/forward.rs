//! Frame classification and the forwarding decision (IEEE 802.1Q-2018 clause 8.6).
//!
//! One pass over the L2 headers (`cnm_proto::wire::walk`) gives the addresses, the VLAN tag
//! and the payload EtherType. From them:
//! * **VID** (clause 6.9): the tag's VID; untagged and priority-tagged (VID 0) frames belong to
//!   the port's PVID. VID 0xFFF is reserved (Table 9-2) and such frames are malformed.
//! * **Priority** (clause 6.9.3): the tag's PCP; untagged frames get the port's default priority.
//! * **MAC Control** (EtherType 0x8808, 802.3-2018 clause 31): consumed by the receiving MAC,
//!   never relayed; PAUSE and PFC act on the port's transmitter ([`crate::pause`]).
//! * **Destination** (clause 8.8.9): group addresses and unknown unicast are flooded to every
//!   other port that is up; a known unicast goes to its port, unless that is the reception port
//!   (clause 8.6.1: a frame is never transmitted on the port it was received on), in which case
//!   it is filtered.
//! * **Reserved group addresses** 01-80-C2-00-00-00 to 01-80-C2-00-00-0F (802.1Q-2018 clause
//!   8.6.3 and Table 8-1: STP/RSTP, MAC Control, Slow Protocols such as LACP, 802.1X port
//!   access, LLDP, ...): a bridge never relays them, whatever its filtering database says
//!   ([`is_reserved_group`]). The bridge consumes LLDP (the CN TLV of a neighbour,
//!   `cnm_proto::wire::lldp`) and drops the rest, counted `reserved_group`; neither is learned
//!   from, since such frames never reach the relay.

use crate::fdb::Fdb;
use crate::stats::DropReason;
use crate::PortId;
use cnm_proto::wire::{self, EtherType, EthernetAddress, MacControl, MacControlRepr};
use cnm_proto::Instant;

/// VID 0xFFF is reserved (802.1Q-2018 Table 9-2).
const VID_RESERVED: u16 = 0xFFF;

/// Whether `dst` is one of the 16 reserved group addresses 01-80-C2-00-00-00..0F that a
/// C-VLAN bridge must filter (802.1Q-2018 clause 8.6.3, Table 8-1).
#[inline]
pub fn is_reserved_group(dst: EthernetAddress) -> bool {
    let d = dst.0;
    d[..5] == [0x01, 0x80, 0xC2, 0x00, 0x00] && d[5] <= 0x0F
}

/// What the bridge learned from a frame's headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classified {
    /// Destination.
    pub dst: EthernetAddress,
    /// Source.
    pub src: EthernetAddress,
    /// VLAN the frame belongs to.
    pub vid: u16,
    /// Priority 0..=7.
    pub priority: u8,
    /// Offset of the outermost VLAN tag's TPID, when tagged.
    pub vlan_offset: Option<usize>,
    /// MAC-control content, if the frame is one.
    pub mac_control: Option<MacControlRepr>,
    /// EtherType of the payload (after the VLAN tags and any CN-TAG).
    pub ethertype: EtherType,
    /// Offset of the payload (after the EtherType).
    pub payload_offset: usize,
    /// The frame carries a CN-TAG (802.1Q clause 33.3).
    pub cn_tagged: bool,
    /// Offset of the CN-TAG's EtherType, when it carries one: kept with the queued frame so
    /// that a port removing CN-TAGs does not walk the headers again.
    pub cn_tag_offset: Option<usize>,
    /// A congestion point must not sample this frame: it is congestion feedback itself (CNM,
    /// 802.1Q-2011 33.4; rate feedback), MAC control, or has a group source address (no CNM can
    /// be addressed to it).
    pub cn_exempt: bool,
}

/// Parses the headers. Errors are counted drops.
#[inline]
pub fn classify(frame: &[u8], default_priority: u8, pvid: u16) -> Result<Classified, DropReason> {
    let info = wire::walk(frame).map_err(|_| DropReason::Malformed)?;
    let (vid, priority) = match info.vlan {
        Some(v) if v.vid == VID_RESERVED => return Err(DropReason::Malformed),
        Some(v) => (if v.vid == 0 { pvid } else { v.vid }, v.pcp & 7),
        None => (pvid, default_priority),
    };
    let mac_control = if info.ethertype == EtherType::MacControl {
        let body = frame
            .get(info.payload_offset..)
            .ok_or(DropReason::Malformed)?;
        let m = MacControl::new_checked(body).map_err(|_| DropReason::Malformed)?;
        Some(MacControlRepr::parse(&m).map_err(|_| DropReason::Malformed)?)
    } else {
        None
    };
    let cn_exempt = matches!(
        info.ethertype,
        EtherType::Cnm | EtherType::RateFeedback | EtherType::MacControl
    ) || !info.src.is_unicast();
    Ok(Classified {
        dst: info.dst,
        src: info.src,
        vid,
        priority,
        vlan_offset: info.vlan_offset,
        mac_control,
        ethertype: info.ethertype,
        payload_offset: info.payload_offset,
        cn_tagged: info.cn_tag_offset.is_some(),
        cn_tag_offset: info.cn_tag_offset,
        cn_exempt,
    })
}

/// Where a frame goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// To one port.
    Unicast(PortId),
    /// To every other port that is up.
    Flood,
    /// Nowhere (the destination is on the reception port).
    Filter,
}

/// The forwarding decision for a frame to `dst` in `vid` received on `ingress`.
#[inline]
pub fn decide(
    fdb: &Fdb,
    now: Instant,
    ingress: PortId,
    dst: EthernetAddress,
    vid: u16,
) -> Decision {
    if !dst.is_unicast() {
        return Decision::Flood;
    }
    match fdb.lookup(now, dst, vid) {
        Some(p) if p == ingress => Decision::Filter,
        Some(p) => Decision::Unicast(p),
        None => Decision::Flood,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cnm_proto::Duration;

    fn frame(tag: Option<[u8; 4]>, ethertype: [u8; 2]) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
        if let Some(t) = tag {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&t[..2]);
        }
        f.extend_from_slice(&ethertype);
        f.resize(60, 0);
        f
    }

    #[test]
    fn vid_and_priority() {
        let c = classify(&frame(None, [0x08, 0x00]), 3, 1).unwrap();
        assert_eq!((c.vid, c.priority), (1, 3));
        // PCP 5, VID 10.
        let c = classify(&frame(Some([0xA0, 0x0A, 0, 0]), [0x08, 0x00]), 3, 1).unwrap();
        assert_eq!((c.vid, c.priority), (10, 5));
        // Priority-tagged: VID 0 → PVID.
        let c = classify(&frame(Some([0x60, 0x00, 0, 0]), [0x08, 0x00]), 0, 7).unwrap();
        assert_eq!((c.vid, c.priority), (7, 3));
        assert_eq!(
            classify(&frame(Some([0x0F, 0xFF, 0, 0]), [0x08, 0x00]), 0, 1),
            Err(DropReason::Malformed)
        );
        assert_eq!(classify(&[0u8; 13], 0, 1), Err(DropReason::Malformed));
        // Tag announced but cut short.
        let mut f = frame(None, [0x81, 0x00]);
        f.truncate(15);
        assert_eq!(classify(&f, 0, 1), Err(DropReason::Malformed));
    }

    #[test]
    fn mac_control_is_recognised() {
        let mut f = frame(None, [0x88, 0x08]);
        f[14..18].copy_from_slice(&[0x00, 0x01, 0x00, 0x10]);
        let c = classify(&f, 0, 1).unwrap();
        assert_eq!(c.mac_control, Some(MacControlRepr::Pause { quanta: 16 }));
        f.truncate(20);
        assert_eq!(classify(&f, 0, 1), Err(DropReason::Malformed));
    }

    #[test]
    fn reserved_group_addresses() {
        for last in 0..=0x0F {
            assert!(is_reserved_group(EthernetAddress([
                0x01, 0x80, 0xC2, 0, 0, last
            ])));
        }
        assert!(!is_reserved_group(EthernetAddress([
            0x01, 0x80, 0xC2, 0, 0, 0x10
        ])));
        assert!(!is_reserved_group(EthernetAddress([
            0x01, 0x80, 0xC2, 0, 0x01, 0x00
        ])));
        assert!(!is_reserved_group(EthernetAddress::BROADCAST));
    }

    #[test]
    fn decisions() {
        let mut fdb = Fdb::new(Duration::from_secs(300), 16, 1);
        let t = Instant::ZERO;
        let a = EthernetAddress([2, 0, 0, 0, 0, 1]);
        fdb.learn(t, a, 1, PortId(1));
        assert_eq!(
            decide(&fdb, t, PortId(0), a, 1),
            Decision::Unicast(PortId(1))
        );
        assert_eq!(decide(&fdb, t, PortId(1), a, 1), Decision::Filter);
        assert_eq!(decide(&fdb, t, PortId(0), a, 2), Decision::Flood);
        assert_eq!(
            decide(&fdb, t, PortId(0), EthernetAddress::BROADCAST, 1),
            Decision::Flood
        );
    }
}
