//! TCP segmentation and checksum completion for frames handed over with a `virtio_net_hdr`.
//!
//! A TAP opened with `IFF_VNET_HDR` and `TUNSETOFFLOAD(TUN_F_CSUM | TUN_F_TSO4)` lets the host
//! stack hand over what it would hand a NIC with checksum and TCP segmentation offload: a
//! frame whose TCP/UDP checksum is only seeded with the pseudo-header sum
//! (`VIRTIO_NET_HDR_F_NEEDS_CSUM`, the checksum field at `csum_start + csum_offset`), and a
//! TCP/IPv4 "super-segment" of up to 64 KiB of payload (`gso_type` TCPV4) that the NIC cuts
//! into segments of at most `gso_size` payload octets. [`segment`] does that cutting in
//! software, the way a NIC does it (and as Linux's own `tcp_gso_segment` does):
//!
//! * every segment gets a copy of the Ethernet, IPv4 and TCP headers;
//! * IPv4 total length is the segment's, the IPv4 identification grows by one per segment,
//!   the header checksum is recomputed (RFC 791 §3.1);
//! * the TCP sequence number grows by the payload already sent; FIN and PSH stay only on the
//!   last segment, CWR only on the first (RFC 3168 §6.1.2); the TCP checksum is computed over
//!   the pseudo-header, the header and the segment's payload (RFC 793 §3.1);
//! * checksums are the Internet checksum, the 16-bit ones' complement of the ones' complement
//!   sum (RFC 1071).
//!
//! The header layout is the legacy `struct virtio_net_hdr` (Linux
//! `include/uapi/linux/virtio_net.h`, 10 octets, guest-native byte order, which the tun driver
//! uses on little-endian machines unless told otherwise). [`coalesce`] is the opposite
//! direction: consecutive in-order TCP/IPv4 segments of one connection merged into one
//! super-segment (what GRO does on a receiving NIC), so that the host stack receives one large
//! segment instead of many.
//!
//! Pure functions over byte slices: nothing here performs I/O, allocates beyond the caller's
//! buffer, or panics on frame contents.

use core::fmt;

/// Octets of the legacy `struct virtio_net_hdr`.
pub const VNET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start + csum_offset` must be completed.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the checksums were verified.
pub const F_DATA_VALID: u8 = 2;
/// `VIRTIO_NET_HDR_GSO_NONE`.
pub const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_ECN` (ORed into the type: the segment carries CWR).
pub const GSO_ECN: u8 = 0x80;

const ETH_LEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_VLAN: u16 = 0x8100;
const PROTO_TCP: u8 = 6;
const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_ACK: u8 = 0x10;
const TCP_CWR: u8 = 0x80;
/// Largest IPv4 datagram (RFC 791: a 16-bit total length).
const IPV4_MAX: usize = 65_535;

/// The legacy `struct virtio_net_hdr`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `F_NEEDS_CSUM`, `F_DATA_VALID`.
    pub flags: u8,
    /// `GSO_NONE`, `GSO_TCPV4`, possibly ORed with `GSO_ECN`.
    pub gso_type: u8,
    /// Octets of headers (Ethernet + IP + TCP) of a GSO frame.
    pub hdr_len: u16,
    /// Payload octets per segment of a GSO frame (the MSS).
    pub gso_size: u16,
    /// Where the checksummed region starts (with `F_NEEDS_CSUM`).
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Reads the header from the first [`VNET_HDR_LEN`] octets of `b`.
    pub fn parse(b: &[u8]) -> Result<VnetHdr, SegmentError> {
        let b = b.get(..VNET_HDR_LEN).ok_or(SegmentError::Truncated)?;
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Ok(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    /// Writes the header into the first [`VNET_HDR_LEN`] octets of `b`.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), SegmentError> {
        let b = b.get_mut(..VNET_HDR_LEN).ok_or(SegmentError::Truncated)?;
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        Ok(())
    }
}

/// Why a frame could not be segmented or completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentError {
    /// Shorter than its headers say.
    Truncated,
    /// A GSO frame that is not TCP over IPv4 (optionally behind one 802.1Q tag).
    NotTcpIpv4,
    /// A GSO type this module does not cut (UDP, TCPv6, ...).
    UnsupportedGso(u8),
    /// A GSO frame with `gso_size` 0.
    ZeroMss,
    /// A checksum position outside the frame.
    BadChecksumOffset,
}

impl fmt::Display for SegmentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SegmentError::Truncated => write!(f, "frame shorter than its headers"),
            SegmentError::NotTcpIpv4 => write!(f, "GSO frame is not TCP over IPv4"),
            SegmentError::UnsupportedGso(t) => write!(f, "unsupported GSO type {t:#04x}"),
            SegmentError::ZeroMss => write!(f, "GSO frame with a segment size of 0"),
            SegmentError::BadChecksumOffset => write!(f, "checksum offset outside the frame"),
        }
    }
}

impl std::error::Error for SegmentError {}

/// Ones' complement sum of `data` as big-endian 16-bit words (an odd last octet is padded
/// with zero), added to `acc` (RFC 1071 §4.1), not yet folded.
pub fn sum16(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// [`sum16`] for long data (a segment's payload), four octets at a time: the big-endian 32-bit
/// words `hi·2¹⁶ + lo` are added, which is `hi + lo` modulo `2¹⁶ − 1` (as `2¹⁶ ≡ 1`), so the
/// result, not yet folded, differs from [`sum16`]'s but [`fold`]s to the same 16 bits (RFC
/// 1071 §2(C), "parallel summation"; RFC 1071 §4.1 sums 16 bits at a time). A zero sum only
/// comes from zero words in both. The words of `data` at and after a multiple of four octets
/// stay 16-bit aligned, so the tail goes to [`sum16`]. Frames are far below the 2³² words
/// that could overflow the accumulator.
pub fn sum16_wide(data: &[u8], acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(4);
    let mut wide = 0u64;
    for c in &mut chunks {
        wide += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    sum16(chunks.remainder(), acc + wide)
}

/// [`sum16`] for a segment's payload, the fastest of the three: the data is read as
/// little-endian 32-bit words (plain loads on the machines this runs on, which the compiler
/// turns into vector additions), whose sum folds to the ones' complement sum of the
/// little-endian 16-bit words (`2¹⁶ ≡ 1` modulo `2¹⁶ − 1`, as for [`sum16_wide`]); swapping the
/// two octets of that folded sum gives the folded sum of the big-endian words (RFC 1071 §2(B),
/// "byte order independence"). Zero stays zero and a non-zero sum stays non-zero under the
/// swap, so the result, added to `acc` and not yet folded, [`fold`]s to [`sum16`]'s. The tail
/// after the last whole word starts 16-bit aligned and goes to [`sum16`].
pub fn sum16_le(data: &[u8], acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(4);
    let mut wide = 0u64;
    for c in &mut chunks {
        wide += u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
    let swapped = fold(wide).swap_bytes();
    sum16(chunks.remainder(), acc + u64::from(swapped))
}

/// Folds a sum to 16 bits (end-around carry).
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    // The loop leaves at most 0xffff.
    acc as u16
}

/// The Internet checksum of `data`: the complement of the folded sum.
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum16(data, 0))
}

/// Offsets of a TCP/IPv4 frame's headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TcpV4 {
    /// Start of the IPv4 header.
    ip: usize,
    /// IPv4 header length.
    ihl: usize,
    /// Start of the TCP header.
    tcp: usize,
    /// End of the TCP header (start of the payload).
    end: usize,
}

fn tcp_v4(frame: &[u8]) -> Result<TcpV4, SegmentError> {
    let be = |i: usize| -> Result<u16, SegmentError> {
        frame
            .get(i..i + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or(SegmentError::Truncated)
    };
    let mut ip = ETH_LEN;
    let mut ethertype = be(12)?;
    if ethertype == ETHERTYPE_VLAN {
        ethertype = be(16)?;
        ip += 4;
    }
    if ethertype != ETHERTYPE_IPV4 {
        return Err(SegmentError::NotTcpIpv4);
    }
    let v = *frame.get(ip).ok_or(SegmentError::Truncated)?;
    let ihl = usize::from(v & 0x0f) * 4;
    if v >> 4 != 4 || ihl < 20 {
        return Err(SegmentError::NotTcpIpv4);
    }
    if *frame.get(ip + 9).ok_or(SegmentError::Truncated)? != PROTO_TCP {
        return Err(SegmentError::NotTcpIpv4);
    }
    let tcp = ip + ihl;
    let doff = usize::from(*frame.get(tcp + 12).ok_or(SegmentError::Truncated)? >> 4) * 4;
    if doff < 20 {
        return Err(SegmentError::NotTcpIpv4);
    }
    let end = tcp + doff;
    if frame.len() < end {
        return Err(SegmentError::Truncated);
    }
    Ok(TcpV4 { ip, ihl, tcp, end })
}

/// Rewrites the IPv4 total length, identification and header checksum, and the TCP sequence
/// number, flags and checksum of the TCP/IPv4 frame `f` (headers at `h`, payload to the end).
fn finish_tcp_v4(f: &mut [u8], h: TcpV4, id: u16, seq: u32, flags: u8) {
    let ip_len = f.len() - h.ip;
    // At most 65 535 octets: the callers cut payloads so that the datagram fits.
    let ip_len16 = ip_len.min(IPV4_MAX) as u16;
    f[h.ip + 2..h.ip + 4].copy_from_slice(&ip_len16.to_be_bytes());
    f[h.ip + 4..h.ip + 6].copy_from_slice(&id.to_be_bytes());
    f[h.ip + 10..h.ip + 12].copy_from_slice(&[0, 0]);
    let c = checksum(&f[h.ip..h.ip + h.ihl]);
    f[h.ip + 10..h.ip + 12].copy_from_slice(&c.to_be_bytes());
    f[h.tcp + 4..h.tcp + 8].copy_from_slice(&seq.to_be_bytes());
    f[h.tcp + 13] = flags;
    f[h.tcp + 16..h.tcp + 18].copy_from_slice(&[0, 0]);
    let tcp_len = (f.len() - h.tcp) as u64;
    // Pseudo-header (RFC 793 §3.1): source, destination, zero + protocol, TCP length.
    let pseudo = sum16(&f[h.ip + 12..h.ip + 20], u64::from(PROTO_TCP) + tcp_len);
    let c = !fold(sum16_le(&f[h.tcp..], pseudo));
    f[h.tcp + 16..h.tcp + 18].copy_from_slice(&c.to_be_bytes());
}

/// Turns one frame read with a `virtio_net_hdr` into wire frames, calling `out` with each (in
/// order). A frame without GSO and without `F_NEEDS_CSUM` is passed on as it is; one with
/// `F_NEEDS_CSUM` is copied into `buf` and its checksum completed; a TCP/IPv4 GSO frame is cut
/// into segments of at most `gso_size` payload octets, built one at a time in `buf`.
/// Returns the number of frames passed to `out`.
pub fn segment(
    hdr: &VnetHdr,
    frame: &[u8],
    buf: &mut Vec<u8>,
    out: &mut dyn FnMut(&[u8]),
) -> Result<usize, SegmentError> {
    match hdr.gso_type & !GSO_ECN {
        GSO_NONE => {
            if hdr.flags & F_NEEDS_CSUM == 0 {
                out(frame);
                return Ok(1);
            }
            let start = usize::from(hdr.csum_start);
            let at = start + usize::from(hdr.csum_offset);
            if at + 2 > frame.len() {
                return Err(SegmentError::BadChecksumOffset);
            }
            buf.clear();
            buf.extend_from_slice(frame);
            // The field holds the pseudo-header sum already (Linux CHECKSUM_PARTIAL); the sum
            // from `start` to the end includes it. A result of 0 is sent as 0xFFFF, the other
            // ones' complement zero, which UDP requires and TCP accepts (RFC 768).
            let mut c = !fold(sum16_le(&buf[start..], 0));
            if c == 0 {
                c = 0xffff;
            }
            buf[at..at + 2].copy_from_slice(&c.to_be_bytes());
            out(buf);
            Ok(1)
        }
        GSO_TCPV4 => {
            let mss = usize::from(hdr.gso_size);
            if mss == 0 {
                return Err(SegmentError::ZeroMss);
            }
            let h = tcp_v4(frame)?;
            let (head, payload) = frame.split_at(h.end);
            let id = u16::from_be_bytes([frame[h.ip + 4], frame[h.ip + 5]]);
            let seq = u32::from_be_bytes([
                frame[h.tcp + 4],
                frame[h.tcp + 5],
                frame[h.tcp + 6],
                frame[h.tcp + 7],
            ]);
            let flags = frame[h.tcp + 13];
            if payload.is_empty() {
                buf.clear();
                buf.extend_from_slice(frame);
                finish_tcp_v4(buf, h, id, seq, flags);
                out(buf);
                return Ok(1);
            }
            let n = payload.len().div_ceil(mss);
            for (i, chunk) in payload.chunks(mss).enumerate() {
                let mut fl = flags;
                if i + 1 < n {
                    fl &= !(TCP_FIN | TCP_PSH);
                }
                if i > 0 {
                    fl &= !TCP_CWR;
                }
                buf.clear();
                buf.extend_from_slice(head);
                buf.extend_from_slice(chunk);
                // Sequence numbers and identifications wrap (RFC 793 §3.3, RFC 791 §3.2).
                let off = (i * mss) as u32;
                finish_tcp_v4(buf, h, id.wrapping_add(i as u16), seq.wrapping_add(off), fl);
                out(buf);
            }
            Ok(n)
        }
        t => Err(SegmentError::UnsupportedGso(t)),
    }
}

/// Merges in-order TCP/IPv4 segments of one connection into one super-segment (what GRO does
/// on a receiving NIC), to be handed to the host with a `virtio_net_hdr`.
///
/// [`Coalescer::push`] takes wire frames one by one; a frame that continues the segment being
/// built (same Ethernet and IP addresses, ports and TCP options, next sequence number, only
/// ACK and PSH set, same acknowledgment and window, a full-sized previous segment, room left
/// under 64 KiB) is appended, anything else first ends the current one. The merged frame keeps
/// the first segment's headers, the last segment's PSH, and gets IPv4 total length, checksum
/// and a TCP checksum seeded with the pseudo-header sum (`F_NEEDS_CSUM`), as a NIC's GRO
/// leaves it (the receiving stack trusts it; `tcp_gro_complete` in Linux does the same).
#[derive(Debug, Default)]
pub struct Coalescer {
    buf: Vec<u8>,
    /// Headers of the frame in `buf`, when it is TCP/IPv4 and may grow.
    tcp: Option<TcpV4>,
    /// Payload octets of the first segment (the MSS of the merged frame).
    mss: usize,
    /// Segments merged into `buf`.
    segs: usize,
    /// Sequence number expected next.
    next_seq: u32,
    /// The last merged segment was shorter than `mss` (nothing may follow it).
    short: bool,
}

/// The header of a frame leaving a [`Coalescer`] and its octets.
pub type Merged<'a> = (VnetHdr, &'a [u8]);

impl Coalescer {
    /// An empty coalescer.
    pub fn new() -> Coalescer {
        Coalescer::default()
    }

    /// True when no frame is pending.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Segments merged into the pending frame (0 when empty).
    pub fn segments(&self) -> usize {
        if self.buf.is_empty() {
            0
        } else {
            self.segs
        }
    }

    /// True when `frame` continues the pending segment.
    fn continues(&self, frame: &[u8]) -> Option<TcpV4> {
        let h = self.tcp?;
        if self.short {
            return None;
        }
        let g = tcp_v4(frame).ok()?;
        let b = &self.buf;
        if g != h || frame.len() <= g.end {
            return None;
        }
        let payload = frame.len() - g.end;
        if payload > self.mss || b.len() + payload > h.ip + IPV4_MAX {
            return None;
        }
        // Same MACs and EtherType (and tag); same IP version/IHL/TOS, protocol, addresses and
        // options; same ports; same acknowledgment, header length, window and options.
        let same = frame[..h.ip] == b[..h.ip]
            && frame[h.ip..h.ip + 2] == b[h.ip..h.ip + 2]
            && frame[h.ip + 9] == b[h.ip + 9]
            && frame[h.ip + 12..h.tcp] == b[h.ip + 12..h.tcp]
            && frame[h.tcp..h.tcp + 4] == b[h.tcp..h.tcp + 4]
            && frame[h.tcp + 8..h.tcp + 13] == b[h.tcp + 8..h.tcp + 13]
            && frame[h.tcp + 14..h.tcp + 16] == b[h.tcp + 14..h.tcp + 16]
            && frame[h.tcp + 18..h.end] == b[h.tcp + 18..h.end];
        let seq = u32::from_be_bytes([
            frame[g.tcp + 4],
            frame[g.tcp + 5],
            frame[g.tcp + 6],
            frame[g.tcp + 7],
        ]);
        let flags_ok = frame[g.tcp + 13] & !(TCP_ACK | TCP_PSH) == 0;
        let more_frag = frame[g.ip + 6] & 0x3f != 0 || frame[g.ip + 7] != 0;
        (same && flags_ok && !more_frag && seq == self.next_seq).then_some(g)
    }

    /// Takes `frame`: merges it into the pending frame, or hands the pending frame to `out`
    /// and starts anew with `frame`.
    pub fn push(&mut self, frame: &[u8], out: &mut dyn FnMut(Merged<'_>)) {
        if let Some(g) = self.continues(frame) {
            let payload = &frame[g.end..];
            self.buf.extend_from_slice(payload);
            self.segs += 1;
            self.next_seq = self.next_seq.wrapping_add(payload.len() as u32);
            self.short = payload.len() < self.mss;
            // PSH of the last segment carries over.
            self.buf[g.tcp + 13] |= frame[g.tcp + 13] & TCP_PSH;
            return;
        }
        self.flush(out);
        self.buf.extend_from_slice(frame);
        self.segs = 1;
        self.tcp = None;
        if let Ok(h) = tcp_v4(frame) {
            let flags = frame[h.tcp + 13];
            let payload = frame.len() - h.end;
            let frag = frame[h.ip + 6] & 0x3f != 0 || frame[h.ip + 7] != 0;
            if flags & !(TCP_ACK | TCP_PSH) == 0 && payload > 0 && !frag && flags & TCP_PSH == 0 {
                let seq = u32::from_be_bytes([
                    frame[h.tcp + 4],
                    frame[h.tcp + 5],
                    frame[h.tcp + 6],
                    frame[h.tcp + 7],
                ]);
                self.tcp = Some(h);
                self.mss = payload;
                self.next_seq = seq.wrapping_add(payload as u32);
                self.short = false;
            }
        }
    }

    /// Hands the pending frame (if any) to `out`: as it came when it is a single segment
    /// (no GSO, checksums as received), merged with a TCPV4 GSO header otherwise.
    pub fn flush(&mut self, out: &mut dyn FnMut(Merged<'_>)) {
        if self.buf.is_empty() {
            return;
        }
        match self.tcp {
            Some(h) if self.segs > 1 => {
                let b = &mut self.buf;
                let ip_len = (b.len() - h.ip).min(IPV4_MAX) as u16;
                b[h.ip + 2..h.ip + 4].copy_from_slice(&ip_len.to_be_bytes());
                b[h.ip + 10..h.ip + 12].copy_from_slice(&[0, 0]);
                let c = checksum(&b[h.ip..h.ip + h.ihl]);
                b[h.ip + 10..h.ip + 12].copy_from_slice(&c.to_be_bytes());
                // The TCP checksum field seeded with the pseudo-header sum, as for
                // CHECKSUM_PARTIAL.
                let tcp_len = (b.len() - h.tcp) as u64;
                let pseudo = fold(sum16(
                    &b[h.ip + 12..h.ip + 20],
                    u64::from(PROTO_TCP) + tcp_len,
                ));
                b[h.tcp + 16..h.tcp + 18].copy_from_slice(&pseudo.to_be_bytes());
                let hdr = VnetHdr {
                    flags: F_NEEDS_CSUM,
                    gso_type: GSO_TCPV4,
                    hdr_len: h.end as u16,
                    gso_size: self.mss as u16,
                    csum_start: h.tcp as u16,
                    csum_offset: 16,
                };
                out((hdr, b));
            }
            _ => out((VnetHdr::default(), &self.buf)),
        }
        self.buf.clear();
        self.tcp = None;
        self.segs = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The IPv4 header of the usual worked example (192.168.0.1 → 192.168.0.199, UDP):
    /// checksum 0xB861, computed by hand as 0x4500 + 0x0073 + 0x0000 + 0x4000 + 0x4011 +
    /// 0xC0A8 + 0x0001 + 0xC0A8 + 0x00C7 = 0x2479C → 0x479E → complement 0xB861.
    #[test]
    fn internet_checksum_by_hand() {
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(sum16(&h, 0), 0x2479c);
        assert_eq!(fold(0x2479c), 0x479e);
        assert_eq!(checksum(&h), 0xb861);
        // An odd length pads the last octet: 0x0102 + 0x0300 = 0x0402.
        assert_eq!(sum16(&[1, 2, 3], 0), 0x0402);
    }

    /// The four-octet sum folds as the two-octet one, for every length (odd tails, tails of
    /// 1-3 octets after the words), every starting accumulator, and the sums that fold to
    /// 0xFFFF; by hand: 0x0102_0304 + 0x0506_0708 = 0x0608_0A0C, folded 0x0608 + 0x0A0C =
    /// 0x1014, as 0x0102 + 0x0304 + 0x0506 + 0x0708 = 0x1014.
    #[test]
    fn the_wide_sum_folds_as_the_two_octet_sum() {
        assert_eq!(sum16_wide(&[1, 2, 3, 4, 5, 6, 7, 8], 0), 0x0608_0a0c);
        assert_eq!(fold(0x0608_0a0c), 0x1014);
        assert_eq!(sum16(&[1, 2, 3, 4, 5, 6, 7, 8], 0), 0x1014);
        assert_eq!(sum16_wide(&[], 0), 0);
        // Little-endian words: 0x0403_0201 + 0x0807_0605 = 0x0C0A_0806, folded 0x0C0A +
        // 0x0806 = 0x1410, swapped 0x1014.
        assert_eq!(sum16_le(&[1, 2, 3, 4, 5, 6, 7, 8], 0), 0x1014);
        assert_eq!(
            sum16_le(&[1, 2, 3, 4, 5, 6, 7, 8, 9], 7),
            0x1014 + 7 + 0x0900
        );
        assert_eq!(sum16_le(&[0; 9], 0), 0);
        assert_eq!(fold(sum16_le(&[0xff, 0xff, 0, 0], 0)), 0xffff);
        assert_eq!(sum16_wide(&[0; 9], 0), 0);
        // 0xFFFF + 0x0000 words fold to 0xFFFF both ways (the other ones' complement zero).
        assert_eq!(fold(sum16_wide(&[0xff, 0xff, 0, 0], 0)), 0xffff);
        let mut rng = crate::rng::Rng::new(7);
        let mut data = vec![0u8; 1600];
        for len in (0..70).chain([1459, 1460, 1461, 1462, 1463, 1600]) {
            for fill in 0..4 {
                for b in data.iter_mut() {
                    *b = match fill {
                        0 => 0xff,
                        1 => 0,
                        _ => (rng.next_u64() & 0xff) as u8,
                    };
                }
                let acc = rng.next_u64() & 0xf_ffff;
                let d = &data[..len];
                assert_eq!(
                    fold(sum16_wide(d, acc)),
                    fold(sum16(d, acc)),
                    "len {len} fill {fill} acc {acc:#x}"
                );
                assert_eq!(
                    fold(sum16_le(d, acc)),
                    fold(sum16(d, acc)),
                    "little-endian words: len {len} fill {fill} acc {acc:#x}"
                );
            }
        }
    }

    /// A TCP/IPv4 frame 10.0.0.1:1000 → 10.0.0.2:2000, seq 100, ack 7, flags `flags`,
    /// window 0x1000, IP id 0x0010, the given payload; checksums left zero.
    fn tcp_frame(payload: &[u8], flags: u8) -> Vec<u8> {
        let mut f = vec![
            2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, // Ethernet
            0x45, 0, 0, 0, 0x00, 0x10, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, // IPv4
            0x03, 0xe8, 0x07, 0xd0, 0, 0, 0, 100, 0, 0, 0, 7, 0x50, flags, 0x10, 0x00, 0, 0, 0,
            0, // TCP
        ];
        f.extend_from_slice(payload);
        f
    }

    fn be16(f: &[u8], i: usize) -> u16 {
        u16::from_be_bytes([f[i], f[i + 1]])
    }

    fn be32(f: &[u8], i: usize) -> u32 {
        u32::from_be_bytes([f[i], f[i + 1], f[i + 2], f[i + 3]])
    }

    fn collect(hdr: &VnetHdr, frame: &[u8]) -> Result<Vec<Vec<u8>>, SegmentError> {
        let mut v = Vec::new();
        let mut buf = Vec::new();
        let n = segment(hdr, frame, &mut buf, &mut |f| v.push(f.to_vec()))?;
        assert_eq!(n, v.len());
        Ok(v)
    }

    fn gso(mss: u16) -> VnetHdr {
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 54,
            gso_size: mss,
            csum_start: 34,
            csum_offset: 16,
        }
    }

    /// Seven payload octets `a b c d e f g` cut at 3: three segments of 3, 3, 1 octets, by
    /// hand:
    ///
    /// * IPv4 total lengths 43, 43, 41 (20 + 20 + payload), ids 0x10, 0x11, 0x12, header
    ///   checksums: the constant part 0x4500 + 0x4000 + 0x4006 + 0x0a00 + 0x0001 + 0x0a00 +
    ///   0x0002 = 0xD909, plus length and id: 0xD909 + 0x2B + 0x10 = 0xD944 → complement
    ///   0x26BB; + 0x2B + 0x11 → 0x26BA; + 0x29 + 0x12 → 0x26BB.
    /// * sequence numbers 100, 103, 106; FIN|PSH|ACK only on the last, ACK on the others.
    /// * TCP checksum of the first: pseudo-header 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 6 + 23
    ///   = 0x1420; header 0x03E8 + 0x07D0 + 0 + 100 + 0 + 7 + 0x5010 + 0x1000 = 0x6C33;
    ///   payload 0x6162 + 0x6300 = 0xC462; total 0x1420 + 0x6C33 + 0xC462 = 0x144B5 → 0x44B6
    ///   → complement 0xBB49.
    #[test]
    fn cuts_a_super_segment_by_hand() {
        let f = tcp_frame(b"abcdefg", TCP_FIN | TCP_PSH | TCP_ACK);
        let segs = collect(&gso(3), &f).unwrap();
        assert_eq!(segs.len(), 3);
        let want = [
            (43, 0x10, 0x26bb, 100, TCP_ACK, &b"abc"[..]),
            (43, 0x11, 0x26ba, 103, TCP_ACK, &b"def"[..]),
            (
                41,
                0x12,
                0x26bb,
                106,
                TCP_FIN | TCP_PSH | TCP_ACK,
                &b"g"[..],
            ),
        ];
        for (s, (len, id, ipc, seq, flags, payload)) in segs.iter().zip(want) {
            assert_eq!(s[..14], f[..14]);
            assert_eq!(be16(s, 16), len);
            assert_eq!(be16(s, 18), id);
            assert_eq!(be16(s, 24), ipc);
            assert_eq!(checksum(&s[14..34]), 0, "IPv4 checksum verifies");
            assert_eq!(be32(s, 38), seq);
            assert_eq!(s[47], flags);
            assert_eq!(&s[54..], payload);
            // The receiver's check: pseudo-header + segment sums to 0xFFFF.
            let tcp_len = (s.len() - 34) as u64;
            let pseudo = sum16(&s[26..34], 6 + tcp_len);
            assert_eq!(fold(sum16(&s[34..], pseudo)), 0xffff);
        }
        assert_eq!(be16(&segs[0], 50), 0xbb49);
    }

    #[test]
    fn cwr_only_on_the_first_segment() {
        let f = tcp_frame(b"abcd", TCP_CWR | TCP_ACK | TCP_PSH);
        let mut h = gso(2);
        h.gso_type |= GSO_ECN;
        let segs = collect(&h, &f).unwrap();
        assert_eq!(segs[0][47], TCP_CWR | TCP_ACK);
        assert_eq!(segs[1][47], TCP_ACK | TCP_PSH);
    }

    #[test]
    fn completes_a_partial_checksum() {
        // The kernel leaves the pseudo-header sum in the field: 0x1420 for 23 TCP octets
        // (see above, with 23 = 20 + 3). Completing must give the same checksum as computing
        // it from scratch: 0x1420 + 0x6C33 + 0xC462 (payload "abc") → 0xBB49.
        let mut f = tcp_frame(b"abc", TCP_ACK);
        f[16..18].copy_from_slice(&43u16.to_be_bytes());
        f[50..52].copy_from_slice(&0x1420u16.to_be_bytes());
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 16,
            ..VnetHdr::default()
        };
        let out = collect(&h, &f).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(be16(&out[0], 50), 0xbb49);
        assert_eq!(out[0][..50], f[..50]);
        let bad = VnetHdr {
            csum_offset: 100,
            ..h
        };
        assert_eq!(collect(&bad, &f), Err(SegmentError::BadChecksumOffset));
    }

    #[test]
    fn plain_frames_pass_and_bad_ones_are_refused() {
        let f = tcp_frame(b"xyz", TCP_ACK);
        assert_eq!(collect(&VnetHdr::default(), &f).unwrap(), vec![f.clone()]);
        assert_eq!(collect(&gso(0), &f), Err(SegmentError::ZeroMss));
        let udp = VnetHdr {
            gso_type: 3,
            ..gso(3)
        };
        assert_eq!(collect(&udp, &f), Err(SegmentError::UnsupportedGso(3)));
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(collect(&gso(3), &arp), Err(SegmentError::NotTcpIpv4));
        assert_eq!(collect(&gso(3), &f[..40]), Err(SegmentError::Truncated));
        assert_eq!(VnetHdr::parse(&[0; 9]), Err(SegmentError::Truncated));
    }

    #[test]
    fn vnet_header_round_trips() {
        let h = gso(1448);
        let mut b = [0u8; VNET_HDR_LEN];
        h.emit(&mut b).unwrap();
        assert_eq!(b[0], F_NEEDS_CSUM);
        assert_eq!(b[1], GSO_TCPV4);
        assert_eq!(VnetHdr::parse(&b), Ok(h));
    }

    /// Segments with correct checksums, as they come off the wire.
    fn wire(seq: u32, payload: &[u8], flags: u8) -> Vec<u8> {
        let mut f = tcp_frame(payload, flags);
        let h = tcp_v4(&f).unwrap();
        finish_tcp_v4(&mut f, h, 0x10, seq, flags);
        f
    }

    #[test]
    fn coalesces_in_order_segments_and_cuts_back_to_them() {
        let mut c = Coalescer::new();
        let mut out: Vec<(VnetHdr, Vec<u8>)> = Vec::new();
        let mut take = |m: Merged<'_>| out.push((m.0, m.1.to_vec()));
        let a = wire(100, b"abc", TCP_ACK);
        let b = wire(103, b"def", TCP_ACK);
        let d = wire(106, b"g", TCP_ACK | TCP_PSH);
        for f in [&a, &b, &d] {
            c.push(f, &mut take);
        }
        assert_eq!(c.segments(), 3);
        // Out of order: ends the merged frame, starts a new one.
        let late = wire(50, b"zz", TCP_ACK);
        c.push(&late, &mut take);
        c.flush(&mut take);
        assert!(c.is_empty());
        assert_eq!(out.len(), 2);
        let (h, m) = &out[0];
        assert_eq!(h.gso_type, GSO_TCPV4);
        assert_eq!(h.gso_size, 3);
        assert_eq!(h.hdr_len, 54);
        assert_eq!((h.csum_start, h.csum_offset), (34, 16));
        assert_eq!(&m[54..], b"abcdefg");
        assert_eq!(be16(m, 16), 47);
        assert_eq!(checksum(&m[14..34]), 0);
        assert_eq!(m[47], TCP_ACK | TCP_PSH);
        // Seeded with the pseudo-header sum: 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 6 + 27.
        assert_eq!(be16(m, 50), 0x1424);
        // The single late segment leaves as it came, without GSO.
        assert_eq!(out[1], (VnetHdr::default(), late.clone()));
        // Segmenting the merged frame again gives back the three wire segments' payloads.
        let mut again = Vec::new();
        let mut buf = Vec::new();
        segment(h, m, &mut buf, &mut |f| again.push(f.to_vec())).unwrap();
        assert_eq!(again.len(), 3);
        assert_eq!(&again[0][54..], b"abc");
        assert_eq!(&again[2][54..], b"g");
        assert_eq!(again[2][47], TCP_ACK | TCP_PSH);
    }

    #[test]
    fn does_not_coalesce_across_flags_or_other_flows() {
        let mut c = Coalescer::new();
        let mut n = 0;
        let mut take = |_: Merged<'_>| n += 1;
        c.push(&wire(100, b"abc", TCP_ACK), &mut take);
        // A FIN ends it.
        c.push(&wire(103, b"def", TCP_ACK | TCP_FIN), &mut take);
        // Another port.
        let mut other = wire(106, b"ghi", TCP_ACK);
        other[35] ^= 1;
        c.push(&other, &mut take);
        // A non-TCP frame.
        c.push(&[0u8; 60], &mut take);
        c.flush(&mut take);
        assert_eq!(n, 4);
    }

    /// A merged frame stops short of 65 535 octets of IPv4 datagram: 1460-octet segments
    /// (40 octets of IPv4 and TCP headers) fill 20 + 20 + 44 × 1460 = 64 280 octets, and a
    /// 45th would make 65 740; it starts the next merged frame.
    #[test]
    fn merged_frames_stop_below_64_kib() {
        let mut c = Coalescer::new();
        let mut sizes = Vec::new();
        let mut take = |m: Merged<'_>| sizes.push((m.0.gso_type, m.1.len()));
        let payload = vec![7u8; 1460];
        for i in 0..46u32 {
            c.push(&wire(1 + i * 1460, &payload, TCP_ACK), &mut take);
        }
        c.flush(&mut take);
        assert_eq!(
            sizes,
            vec![
                (GSO_TCPV4, 14 + 20 + 20 + 44 * 1460),
                (GSO_TCPV4, 54 + 2 * 1460)
            ]
        );
    }
}
