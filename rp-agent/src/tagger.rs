//! Tags on the way up, tags off on the way down.
//!
//! Like a converged network adapter, the agent sends every frame with an 802.1Q tag
//! (802.1Q-2011 clause 9.6: TPID 0x8100, PCP = the flow's priority, DEI 0, VID = the configured
//! VID, 0 meaning "priority-tagged"), inserted after the MAC addresses; a frame the host already
//! tagged keeps its tag with the PCP rewritten. Frames of rate-limited flows also carry a
//! CN-TAG (clause 33.3: EtherType 0x22E9 · RPID) right before the payload's EtherType, so that
//! a congestion point copies the RPID into its CNM (clause 32.10.1) and the agent can find the
//! flow again. A CN-TAG the host supplied is replaced (or dropped for an unlimited flow).
//!
//! On the way down ([`strip_for_host`]) the CN-TAG is removed (clause 33.3: a CN-TAG never
//! leaves its domain) and so is an outer 802.1Q tag whose VID is 0 or the agent's VID, so an
//! unmodified host stack sees the untagged frames it sent. [`strip_in_place`] does the same
//! inside the received frame's own buffer: only the header octets before the removed tags
//! move (towards the payload), and the frame then starts at an offset into the buffer.
//!
//! The way up has the same in-place form, [`tag_in_place`]: a host frame queued with
//! [`UPLINK_HEADROOM`] free octets in front of it is tagged by moving its header (the MAC
//! addresses and any tags, a few dozen octets) into that room, the payload staying where it
//! is, so that the tagged frame starts at the buffer's first octet and the buffer itself goes
//! on the link. Only when the headroom does not match what tagging adds (the frame already
//! carried a tag, or the flow's CN-TAG came or went while the frame waited) is the frame
//! copied by [`tag_for_uplink`].

use cnm_proto::wire::{self, walk, EtherType};

/// 802.1Q C-tag TPID.
const TPID: u16 = 0x8100;

/// Writes `frame` as it goes up into `out`: 802.1Q tag with `pcp` (and `vid` when the host
/// frame is untagged), plus a CN-TAG with `rpid` when given.
pub fn tag_for_uplink(
    frame: &[u8],
    pcp: u8,
    vid: u16,
    rpid: Option<u16>,
    out: &mut Vec<u8>,
) -> wire::Result<()> {
    let info = walk(frame)?;
    out.clear();
    let head_end = match info.vlan_offset {
        Some(v) => {
            // Walk validated the tag: 4 octets at `v`.
            out.extend_from_slice(&frame[..v + 4]);
            let tci = u16::from_be_bytes([out[v + 2], out[v + 3]]);
            let tci = (tci & 0x1fff) | (u16::from(pcp & 7) << 13);
            out[v + 2..v + 4].copy_from_slice(&tci.to_be_bytes());
            v + 4
        }
        None => {
            out.extend_from_slice(&frame[..12]);
            out.extend_from_slice(&TPID.to_be_bytes());
            let tci = (u16::from(pcp & 7) << 13) | (vid & 0x0fff);
            out.extend_from_slice(&tci.to_be_bytes());
            12
        }
    };
    let (x, skip) = match info.cn_tag_offset {
        Some(c) => (c, 4),
        None => (info.payload_offset - 2, 0),
    };
    out.extend_from_slice(&frame[head_end..x]);
    if let Some(r) = rpid {
        out.extend_from_slice(&u16::from(EtherType::CnTag).to_be_bytes());
        out.extend_from_slice(&r.to_be_bytes());
    }
    out.extend_from_slice(&frame[x + skip..]);
    Ok(())
}

/// Octets tagging may add in front of a host frame's payload: an 802.1Q tag and a CN-TAG
/// (4 each, clauses 9.6 and 33.3). Host frames queued with this much headroom are tagged in
/// place ([`tag_in_place`]) when the host sent them untagged and their flow is rate-limited.
pub const UPLINK_HEADROOM: usize = 8;

/// The longest header [`tag_in_place`] moves: addresses, two VLAN tags, a CN-TAG and the
/// EtherType with room to spare; longer headers take the copying path.
const MOVED_HEADER_MAX: usize = 48;

/// What [`tag_in_place`] overwrote: [`Untag::restore`] puts the untagged frame back.
#[derive(Debug)]
pub struct Untag {
    start: usize,
    len: usize,
    head: [u8; MOVED_HEADER_MAX],
}

impl Untag {
    /// Restores the frame `buf` held before [`tag_in_place`] (headroom contents aside).
    pub fn restore(&self, buf: &mut [u8]) {
        if let Some(dst) = buf.get_mut(self.start..self.start + self.len) {
            dst.copy_from_slice(&self.head[..self.len]);
        }
    }
}

/// [`tag_for_uplink`] inside the buffer: the host frame `buf[start..]` becomes the whole of
/// `buf`, tagged, when `start` is exactly the octets tagging adds (4 per added tag, less 4
/// for a CN-TAG removed). Only the header before the payload's EtherType moves; the payload
/// stays. `None` (and `buf` untouched) when the frame does not walk, the headroom does not
/// match, or the header is unusually long: the caller then copies with [`tag_for_uplink`].
pub fn tag_in_place(
    buf: &mut [u8],
    start: usize,
    pcp: u8,
    vid: u16,
    rpid: Option<u16>,
) -> Option<Untag> {
    let info = walk(buf.get(start..)?).ok()?;
    tag_walked_in_place(buf, start, &TagLayout::of(&info)?, pcp, vid, rpid)
}

/// Where a walked frame's tags lie: what [`tag_in_place`] needs of its
/// [`wire::L2Info`], kept beside a queued frame so that tagging it does not walk it again.
/// Offsets into the frame in one octet each (a walked header is at most 26 octets: addresses,
/// two VLAN tags, a CN-TAG, the EtherType), so that it adds little to a queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagLayout {
    vlan_offset: Option<u8>,
    cn_tag_offset: Option<u8>,
    payload_offset: u8,
}

impl TagLayout {
    /// The layout of the frame `info` was walked from (`None` for offsets beyond an octet,
    /// which a walk does not give).
    pub fn of(info: &wire::L2Info) -> Option<TagLayout> {
        let small = |o: Option<usize>| match o {
            Some(o) => u8::try_from(o).ok().map(Some),
            None => Some(None),
        };
        Some(TagLayout {
            vlan_offset: small(info.vlan_offset)?,
            cn_tag_offset: small(info.cn_tag_offset)?,
            payload_offset: u8::try_from(info.payload_offset).ok()?,
        })
    }
}

/// [`tag_in_place`] for the frame `buf[start..]` whose walk gave `layout` (the frame's
/// header unchanged since).
pub fn tag_walked_in_place(
    buf: &mut [u8],
    start: usize,
    info: &TagLayout,
    pcp: u8,
    vid: u16,
    rpid: Option<u16>,
) -> Option<Untag> {
    let frame = buf.get(start..)?;
    let vlan_offset = info.vlan_offset.map(usize::from);
    let (x, skip) = match info.cn_tag_offset {
        Some(c) => (usize::from(c), 4),
        None => (usize::from(info.payload_offset).checked_sub(2)?, 0),
    };
    let grows = if vlan_offset.is_none() { 4 } else { 0 } + if rpid.is_some() { 4 } else { 0 };
    // The tagged header is x + grows octets long and must end where the old one did.
    let len = x + skip;
    if start + skip != grows || len > MOVED_HEADER_MAX {
        return None;
    }
    // A copy of fixed size (a few vector moves, not a call) when the frame is that long, as
    // data frames are; only `head[..len]` is used. Shorter frames go octet by octet: with one
    // `copy_from_slice` on each path the compiler had merged both into one call to `memcpy`
    // of either length (1.5 % of the simulator's samples, `perf`).
    let head: [u8; MOVED_HEADER_MAX] = match frame.get(..MOVED_HEADER_MAX) {
        Some(window) => window.try_into().ok()?,
        None => {
            let mut h = [0u8; MOVED_HEADER_MAX];
            for (d, s) in h.iter_mut().zip(frame.get(..len)?) {
                *d = *s;
            }
            h
        }
    };
    let old = &head[..len];
    let mut at = 0;
    let mut put = |b: &mut [u8], bytes: &[u8]| {
        b[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    let head_end = match vlan_offset {
        Some(v) => {
            // Walk validated the tag: 4 octets at `v`.
            let tci = u16::from_be_bytes([old[v + 2], old[v + 3]]);
            let tci = (tci & 0x1fff) | (u16::from(pcp & 7) << 13);
            put(buf, &old[..v + 2]);
            put(buf, &tci.to_be_bytes());
            v + 4
        }
        None => {
            put(buf, &old[..12]);
            put(buf, &TPID.to_be_bytes());
            put(
                buf,
                &((u16::from(pcp & 7) << 13) | (vid & 0x0fff)).to_be_bytes(),
            );
            12
        }
    };
    put(buf, &old[head_end..x]);
    if let Some(r) = rpid {
        put(buf, &u16::from(EtherType::CnTag).to_be_bytes());
        put(buf, &r.to_be_bytes());
    }
    debug_assert_eq!(at, start + len);
    Some(Untag { start, len, head })
}

/// Writes `frame` as the host should see it into `out`: without its CN-TAG, and without its
/// outer 802.1Q tag when that tag's VID is 0 or `vid`.
pub fn strip_for_host(frame: &[u8], vid: u16, out: &mut Vec<u8>) -> wire::Result<()> {
    let info = walk(frame)?;
    out.clear();
    out.extend_from_slice(&frame[..12]);
    let mut from = 12;
    if let (Some(v), Some(tag)) = (info.vlan_offset, info.vlan) {
        let tpid = u16::from_be_bytes([frame[v], frame[v + 1]]);
        if tpid == TPID && (tag.vid == 0 || tag.vid == vid) {
            from = v + 4;
        }
    }
    match info.cn_tag_offset {
        Some(c) => {
            out.extend_from_slice(&frame[from..c]);
            out.extend_from_slice(&frame[c + 4..]);
        }
        None => out.extend_from_slice(&frame[from..]),
    }
    Ok(())
}

/// [`strip_for_host`] inside `frame`'s own buffer, given its walked header `info`: the octets
/// before each removed tag move up against what follows it (the payload never moves) and the
/// returned offset is where the frame as the host should see it now starts.
pub fn strip_in_place(frame: &mut [u8], info: &wire::L2Info, vid: u16) -> usize {
    let mut from = 12;
    if let (Some(v), Some(tag)) = (info.vlan_offset, info.vlan) {
        let tpid = u16::from_be_bytes([frame[v], frame[v + 1]]);
        if tpid == TPID && (tag.vid == 0 || tag.vid == vid) {
            from = v + 4;
        }
    }
    // What the host sees is [..12] + [from..c] + [c + 4..] (or [..12] + [from..]): the
    // middle part moves up by the CN-TAG's 4 octets, then the addresses up against it.
    let end = match info.cn_tag_offset {
        Some(c) => {
            frame.copy_within(from..c, from + 4);
            from + 4
        }
        None => from,
    };
    let start = end - 12;
    frame.copy_within(..12, start);
    start
}

#[cfg(test)]
mod tests {
    use super::*;

    fn untagged() -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        f.extend_from_slice(&[0x45; 46]);
        f
    }

    #[test]
    fn round_trip_priority_tag_and_cn_tag() {
        let f = untagged();
        let mut up = Vec::new();
        tag_for_uplink(&f, 3, 0, Some(7), &mut up).unwrap();
        assert_eq!(up.len(), f.len() + 8);
        assert_eq!(
            &up[12..20],
            &[0x81, 0x00, 0x60, 0x00, 0x22, 0xe9, 0x00, 0x07]
        );
        assert_eq!(&up[20..22], &[0x08, 0x00]);
        let info = walk(&up).unwrap();
        assert_eq!(info.rpid, Some(7));
        assert_eq!(info.priority(0), 3);
        assert_eq!(info.ethertype, EtherType::Ipv4);
        let mut down = Vec::new();
        strip_for_host(&up, 0, &mut down).unwrap();
        assert_eq!(down, f);
        // Unlimited flow: tag only.
        tag_for_uplink(&f, 5, 100, None, &mut up).unwrap();
        assert_eq!(&up[12..18], &[0x81, 0x00, 0xa0, 0x64, 0x08, 0x00]);
        strip_for_host(&up, 100, &mut down).unwrap();
        assert_eq!(down, f);
        // A foreign VLAN is kept on the way down, the CN-TAG is not.
        tag_for_uplink(&f, 5, 200, Some(1), &mut up).unwrap();
        strip_for_host(&up, 100, &mut down).unwrap();
        assert_eq!(down.len(), f.len() + 4);
        assert_eq!(walk(&down).unwrap().rpid, None);
        assert_eq!(walk(&down).unwrap().vlan.unwrap().vid, 200);
    }

    /// `strip_in_place` gives what `strip_for_host` gives, for every tagging the uplink makes
    /// and for frames the agent did not tag.
    #[test]
    fn stripping_in_place_matches_stripping_into_a_copy() {
        let f = untagged();
        let mut tagged_by_host = Vec::new();
        tag_for_uplink(&f, 1, 42, Some(9), &mut tagged_by_host).unwrap();
        let mut cases = vec![f.clone(), tagged_by_host.clone()];
        for (vid, rpid) in [(0, Some(7)), (0, None), (100, Some(1)), (200, Some(3))] {
            for base in [&f, &tagged_by_host] {
                let mut up = Vec::new();
                tag_for_uplink(base, 5, vid, rpid, &mut up).unwrap();
                cases.push(up);
            }
        }
        for frame in &cases {
            for vid in [0, 42, 100] {
                let mut expect = Vec::new();
                strip_for_host(frame, vid, &mut expect).unwrap();
                let mut buf = frame.clone();
                let info = walk(&buf).unwrap();
                let start = strip_in_place(&mut buf, &info, vid);
                assert_eq!(&buf[start..], &expect[..], "frame {frame:02x?} vid {vid}");
            }
        }
    }

    /// `tag_in_place` gives what `tag_for_uplink` gives whenever the headroom matches, leaves
    /// the buffer alone when it does not, and `restore` gives the host frame back.
    #[test]
    fn tagging_in_place_matches_tagging_into_a_copy() {
        let f = untagged();
        let mut tagged_by_host = Vec::new();
        tag_for_uplink(&f, 1, 42, Some(9), &mut tagged_by_host).unwrap();
        let mut vlan_only = Vec::new();
        tag_for_uplink(&f, 2, 7, None, &mut vlan_only).unwrap();
        let mut in_place = 0;
        for base in [&f, &tagged_by_host, &vlan_only] {
            for (pcp, vid, rpid) in [(3, 0, Some(7)), (5, 100, None), (0, 200, Some(1))] {
                let mut expect = Vec::new();
                tag_for_uplink(base, pcp, vid, rpid, &mut expect).unwrap();
                for start in 0..=UPLINK_HEADROOM {
                    let mut buf = vec![0xee; start];
                    buf.extend_from_slice(base);
                    let before = buf.clone();
                    match tag_in_place(&mut buf, start, pcp, vid, rpid) {
                        Some(undo) => {
                            in_place += 1;
                            assert_eq!(buf, expect, "{base:02x?} {rpid:?} start {start}");
                            undo.restore(&mut buf);
                            assert_eq!(&buf[start..], &before[start..]);
                        }
                        None => {
                            assert_eq!(buf, before);
                            assert_ne!(expect.len(), base.len() + start);
                        }
                    }
                }
            }
        }
        // Each (frame, tagging) pair has one matching headroom (0, 4 or 8 octets), except a
        // CN-TAG removed without one added: the frame shrinks, which only a copy does.
        assert_eq!(in_place, 8);
        let mut short = vec![0u8; 10];
        assert!(tag_in_place(&mut short, 8, 3, 0, None).is_none());
        assert!(tag_in_place(&mut short, 11, 3, 0, None).is_none());
    }

    #[test]
    fn host_tagged_frame_keeps_vid_and_replaces_cn_tag() {
        let f = untagged();
        let mut tagged = Vec::new();
        tag_for_uplink(&f, 1, 42, Some(9), &mut tagged).unwrap();
        let mut up = Vec::new();
        tag_for_uplink(&tagged, 3, 0, Some(4), &mut up).unwrap();
        assert_eq!(up.len(), tagged.len());
        let info = walk(&up).unwrap();
        assert_eq!(info.vlan.unwrap().vid, 42);
        assert_eq!(info.vlan.unwrap().pcp, 3);
        assert_eq!(info.rpid, Some(4));
        tag_for_uplink(&tagged, 3, 0, None, &mut up).unwrap();
        assert_eq!(up.len(), tagged.len() - 4);
        assert_eq!(walk(&up).unwrap().rpid, None);
        assert!(tag_for_uplink(&[1, 2, 3], 3, 0, None, &mut up).is_err());
    }
}
