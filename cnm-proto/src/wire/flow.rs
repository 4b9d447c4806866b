//! Flow keys: what a switch or an end station classifies a frame by.
//!
//! A [`FlowKey`] holds the L2 fields of [`super::walk`] (addresses, VID, priority, the CN-TAG's
//! RPID) and, when the payload is IPv4 (RFC 791, clause 3.1) or IPv6 (RFC 8200, clause 3), the
//! IP 5-tuple, with TCP (RFC 9293, clause 3.1) or UDP (RFC 768) ports.
//!
//! Extraction is tolerant above L2: a truncated or odd IP header, or a TCP/UDP header cut before
//! its ports, gives `l4: None` rather than an error. Only a frame whose L2 walk fails is an
//! error. IP protocols other than TCP and UDP, and IPv4 fragments other than the first, give a
//! 5-tuple whose ports are 0. IPv6 extension headers (hop-by-hop, routing, fragment, destination
//! options; RFC 8200 clause 4) are skipped, up to [`MAX_IPV6_EXT_HEADERS`] of them.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{be_u16, walk, EtherType, EthernetAddress, Result};

/// IP protocol numbers (IANA "Assigned Internet Protocol Numbers").
mod proto {
    pub const HOP_BY_HOP: u8 = 0;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const DEST_OPTS: u8 = 60;
}

/// IPv6 extension headers skipped before giving up on finding the transport header.
pub const MAX_IPV6_EXT_HEADERS: usize = 8;

/// An IP 5-tuple. Ports are 0 when the protocol has none or they are not in this packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FiveTuple {
    /// Source address.
    pub src_ip: IpAddr,
    /// Destination address.
    pub dst_ip: IpAddr,
    /// IP protocol (IPv4 Protocol, or the IPv6 Next Header after extension headers).
    pub proto: u8,
    /// TCP/UDP source port.
    pub src_port: u16,
    /// TCP/UDP destination port.
    pub dst_port: u16,
}

/// The classification key of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowKey {
    /// Destination MAC.
    pub dst: EthernetAddress,
    /// Source MAC.
    pub src: EthernetAddress,
    /// VID of the outer VLAN tag; 0 when untagged (the priority-tagged VID, 802.1Q clause 9.6).
    pub vid: u16,
    /// The frame's priority: the PCP if tagged, otherwise the default given to `extract`.
    pub priority: u8,
    /// The CN-TAG's RPID; 0 when there is no CN-TAG (RPID 0 means "none", 802.1Q clause 33.3).
    pub rpid: u16,
    /// The IP 5-tuple, when the payload is IPv4 or IPv6 with a complete header.
    pub l4: Option<FiveTuple>,
}

impl FlowKey {
    /// The key of `frame`; `default_priority` is used for untagged frames. Fails only when the
    /// L2 walk does ([`super::walk`]).
    pub fn extract(frame: &[u8], default_priority: u8) -> Result<FlowKey> {
        let info = walk(frame)?;
        let payload = frame.get(info.payload_offset..).unwrap_or(&[]);
        let l4 = match info.ethertype {
            EtherType::Ipv4 => ipv4_tuple(payload),
            EtherType::Ipv6 => ipv6_tuple(payload),
            _ => None,
        };
        Ok(FlowKey {
            dst: info.dst,
            src: info.src,
            vid: info.vlan.map_or(0, |v| v.vid),
            priority: info.priority(default_priority),
            rpid: info.rpid.unwrap_or(0),
            l4,
        })
    }
}

/// The 5-tuple of an IPv4 packet (RFC 791 clause 3.1: IHL in the low nibble of octet 0, fragment
/// offset in octets 6-7, protocol at 9, addresses at 12 and 16).
fn ipv4_tuple(p: &[u8]) -> Option<FiveTuple> {
    let first = *p.first()?;
    let ihl = usize::from(first & 0x0f) * 4;
    if first >> 4 != 4 || ihl < 20 || p.len() < ihl {
        return None;
    }
    let proto = p[9];
    let src = Ipv4Addr::new(p[12], p[13], p[14], p[15]);
    let dst = Ipv4Addr::new(p[16], p[17], p[18], p[19]);
    let first_fragment = be_u16(p, 6) & 0x1fff == 0;
    let (src_port, dst_port) = if first_fragment {
        ports(proto, &p[ihl..])?
    } else {
        (0, 0)
    };
    Some(FiveTuple {
        src_ip: IpAddr::V4(src),
        dst_ip: IpAddr::V4(dst),
        proto,
        src_port,
        dst_port,
    })
}

/// The 5-tuple of an IPv6 packet (RFC 8200 clause 3: Next Header at 6, addresses at 8 and 24,
/// 40-octet fixed header; clause 4 for the extension headers).
fn ipv6_tuple(p: &[u8]) -> Option<FiveTuple> {
    if p.len() < 40 || p[0] >> 4 != 6 {
        return None;
    }
    let addr = |at: usize| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&p[at..at + 16]);
        Ipv6Addr::from(a)
    };
    let (src, dst) = (addr(8), addr(24));
    let mut next = p[6];
    let mut off = 40;
    let mut has_ports = true;
    for _ in 0..MAX_IPV6_EXT_HEADERS {
        let ext_len = match next {
            proto::HOP_BY_HOP | proto::ROUTING | proto::DEST_OPTS => {
                (usize::from(*p.get(off + 1)?) + 1) * 8
            }
            proto::FRAGMENT => {
                // Fragment Offset in the 13 high bits of octets 2-3 (RFC 8200 clause 4.5).
                let frag = p.get(off + 2..off + 4)?;
                if u16::from_be_bytes([frag[0], frag[1]]) & 0xfff8 != 0 {
                    has_ports = false;
                }
                8
            }
            _ => break,
        };
        next = *p.get(off)?;
        off += ext_len;
    }
    let (src_port, dst_port) = if has_ports {
        ports(next, p.get(off..)?)?
    } else {
        (0, 0)
    };
    Some(FiveTuple {
        src_ip: IpAddr::V6(src),
        dst_ip: IpAddr::V6(dst),
        proto: next,
        src_port,
        dst_port,
    })
}

/// Source and destination ports of a TCP or UDP header (both start with them, RFC 9293 clause
/// 3.1, RFC 768); `(0, 0)` for other protocols; `None` if a TCP/UDP header is cut before them.
fn ports(proto: u8, l4: &[u8]) -> Option<(u16, u16)> {
    match proto {
        proto::TCP | proto::UDP => {
            let p = l4.get(..4)?;
            Some((be_u16(p, 0), be_u16(p, 2)))
        }
        _ => Some((0, 0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L2: [u8; 18] = [
        0x02, 0, 0, 0, 0, 0x02, // DA
        0x02, 0, 0, 0, 0, 0x01, // SA
        0x81, 0x00, 0x60, 0x07, // C-tag: PCP 3, VID 7
        0x22, 0xe9, // CN-TAG EtherType (RPID follows)
    ];

    fn tagged(rpid: u16, ethertype: u16, l3: &[u8]) -> Vec<u8> {
        let mut f = L2.to_vec();
        f.extend_from_slice(&rpid.to_be_bytes());
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(l3);
        f
    }

    fn ipv4_udp() -> Vec<u8> {
        vec![
            0x45, 0x00, 0x00, 0x20, // version 4, IHL 5, total length 32
            0x00, 0x01, 0x40, 0x00, // id 1, DF, fragment offset 0
            0x40, 0x11, 0x00, 0x00, // TTL 64, protocol UDP, checksum (unchecked)
            10, 0, 0, 1, // source
            10, 0, 0, 2, // destination
            0x30, 0x39, 0x00, 0x35, // UDP ports 12345 → 53
            0x00, 0x0c, 0x00, 0x00, // length, checksum
        ]
    }

    #[test]
    fn ipv4_udp_key() {
        let f = tagged(9, 0x0800, &ipv4_udp());
        let k = FlowKey::extract(&f, 0).unwrap();
        assert_eq!(k.dst, EthernetAddress::new(2, 0, 0, 0, 0, 2));
        assert_eq!(k.src, EthernetAddress::new(2, 0, 0, 0, 0, 1));
        assert_eq!((k.vid, k.priority, k.rpid), (7, 3, 9));
        assert_eq!(
            k.l4,
            Some(FiveTuple {
                src_ip: "10.0.0.1".parse().unwrap(),
                dst_ip: "10.0.0.2".parse().unwrap(),
                proto: 17,
                src_port: 12345,
                dst_port: 53,
            })
        );
    }

    #[test]
    fn ipv4_truncations_give_no_l4() {
        let ip = ipv4_udp();
        for cut in [0, 1, 19, 21, 23] {
            let f = tagged(0, 0x0800, &ip[..cut]);
            assert_eq!(FlowKey::extract(&f, 0).unwrap().l4, None, "cut {cut}");
        }
        let f = tagged(0, 0x0800, &ip[..24]);
        assert!(FlowKey::extract(&f, 0).unwrap().l4.is_some());
        // IHL below 5 is not IPv4.
        let mut bad = ip.clone();
        bad[0] = 0x44;
        assert_eq!(
            FlowKey::extract(&tagged(0, 0x0800, &bad), 0).unwrap().l4,
            None
        );
    }

    #[test]
    fn ipv4_later_fragment_and_icmp_have_no_ports() {
        let mut ip = ipv4_udp();
        ip[6..8].copy_from_slice(&[0x00, 0x10]);
        let t = FlowKey::extract(&tagged(0, 0x0800, &ip[..20]), 0)
            .unwrap()
            .l4
            .unwrap();
        assert_eq!((t.proto, t.src_port, t.dst_port), (17, 0, 0));
        let mut ip = ipv4_udp();
        ip[9] = 1;
        let t = FlowKey::extract(&tagged(0, 0x0800, &ip[..20]), 0)
            .unwrap()
            .l4
            .unwrap();
        assert_eq!((t.proto, t.src_port, t.dst_port), (1, 0, 0));
    }

    fn ipv6_tcp_with_ext() -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0x00, 0x20, 0x00, 0x40]; // next header: hop-by-hop
        p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        p.extend_from_slice(&[0; 11]);
        p.push(1); // source 2001:db8::1
        p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        p.extend_from_slice(&[0; 11]);
        p.push(2); // destination 2001:db8::2
        p.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 0]); // hop-by-hop: next TCP, 8 octets
        p.extend_from_slice(&[0x01, 0xbb, 0xc0, 0x00]); // TCP ports 443 → 49152
        p
    }

    #[test]
    fn ipv6_tcp_key() {
        let mut f = L2[..12].to_vec(); // untagged, no CN-TAG
        f.extend_from_slice(&[0x86, 0xdd]);
        f.extend_from_slice(&ipv6_tcp_with_ext());
        let k = FlowKey::extract(&f, 4).unwrap();
        assert_eq!((k.vid, k.priority, k.rpid), (0, 4, 0));
        let t = k.l4.unwrap();
        assert_eq!(t.src_ip, "2001:db8::1".parse::<IpAddr>().unwrap());
        assert_eq!(t.dst_ip, "2001:db8::2".parse::<IpAddr>().unwrap());
        assert_eq!((t.proto, t.src_port, t.dst_port), (6, 443, 49152));
        // Cut inside the ports: no 5-tuple, still a key.
        let n = f.len();
        assert_eq!(FlowKey::extract(&f[..n - 1], 4).unwrap().l4, None);
        assert_eq!(FlowKey::extract(&f[..n - 10], 4).unwrap().l4, None);
    }

    #[test]
    fn non_ip_and_bad_l2() {
        let k = FlowKey::extract(&tagged(1, 0x0806, &[0; 28]), 2).unwrap();
        assert_eq!(k.l4, None);
        assert_eq!(k.rpid, 1);
        assert!(FlowKey::extract(&L2[..13], 0).is_err());
        assert!(FlowKey::extract(&L2, 0).is_err(), "CN-TAG cut short");
    }
}
