//! The bounded per-flow table the variant congestion points share.
//!
//! # Why
//! FQCN (Zhang & Ansari, eq. 7-9) counts the octets `B_i` each flow sent to the CP between two
//! sampling events; occupancy sampling (QCN at the input buffer, "deterministic" and "random
//! occupancy sampling") needs the octets `q_n` each flow holds in the CP's queue; the
//! explicit-rate CP (Jain, Jiang et al. 2006) needs the set of sources active in a measurement
//! interval. All three then send a message to a flow that is not necessarily the source of the
//! frame that just arrived, so the table also keeps **the header of a recent frame of each
//! flow**: the first [`HDR_LEN`] octets, enough for `build_cnm` (destination and source
//! address, up to two VLAN tags, the EtherType and the 64 MSDU octets a CNM encapsulates) and
//! for the rate-feedback message (the flow's source, VLAN and destination). The header is that
//! of the flow's first frame since the last reset of the counts (the last sample, or the last
//! measurement interval): copied once per flow and interval rather than per frame.
//!
//! # Flow
//! A flow is (source MAC, VID, priority) — the granularity at which a reaction point limits
//! its rate when frames carry no CN-TAG. The key packs into 63 bits: MAC (48) · VID (12) ·
//! priority (3). Untagged frames have VID 0.
//!
//! # Bounds and cost
//! At most `capacity` flows (default [`DEFAULT_MAX_FLOWS`]); the entries are a `Vec` reserved
//! up front, indexed by an open-addressing hash index of twice the capacity (linear probing),
//! so a lookup is O(1) expected and nothing is allocated per frame. A frame of a new flow when
//! the table is full first reclaims idle entries (no octets in the queue and none counted since
//! the last reset) — at most once between two resets, so a table full of live flows does not
//! pay for a scan per frame — and otherwise is counted in `overflow` and not tracked. Entry
//! indices are stable while an entry is live: frames in the queue refer to their flow by index
//! ([`crate::pool::Frame::flow`]) so that dequeueing subtracts their octets in O(1).

use crate::PortId;
use cnm_proto::wire::EthernetAddress;

/// Octets of a recent frame of each flow kept for building messages to it: 12 (addresses) +
/// 8 (two VLAN tags) + 2 (EtherType) + 64 (the most a CNM encapsulates, 802.1Q-2011 33.4)
/// = 86, rounded up.
pub const HDR_LEN: usize = 96;

/// Default bound on the flows tracked per CP.
pub const DEFAULT_MAX_FLOWS: usize = 1024;

/// Largest accepted bound (indices are `u16`, [`NO_FLOW`] is reserved).
pub const MAX_FLOWS: usize = 16384;

/// "Not tracked" flow index.
pub const NO_FLOW: u16 = u16::MAX;

const EMPTY: u16 = u16::MAX;

/// The identity of a flow: source MAC, VID (0 = untagged) and priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowId {
    /// Source MAC address.
    pub src: EthernetAddress,
    /// VLAN id, 0 when untagged.
    pub vid: u16,
    /// Priority (the CP's CNPV).
    pub priority: u8,
}

impl FlowId {
    /// The flow of `frame` at a CP of priority `priority`; `None` for a frame too short to
    /// have an Ethernet header. Reads the outer VLAN tag (TPID 0x8100 or 0x88A8) if any.
    #[inline]
    pub fn of(frame: &[u8], priority: u8) -> Option<FlowId> {
        let src: [u8; 6] = frame.get(6..12)?.try_into().ok()?;
        let tpid = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
        let vid = if tpid == 0x8100 || tpid == 0x88A8 {
            match frame.get(14..16) {
                Some(t) => u16::from_be_bytes([t[0], t[1]]) & 0x0FFF,
                None => 0,
            }
        } else {
            0
        };
        Some(FlowId {
            src: EthernetAddress(src),
            vid,
            priority: priority & 7,
        })
    }

    /// The 63-bit key: MAC · VID · priority.
    #[inline]
    pub fn key(&self) -> u64 {
        let m = &self.src.0;
        let mac = u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]]);
        mac << 15 | u64::from(self.vid & 0x0FFF) << 3 | u64::from(self.priority & 7)
    }
}

/// One tracked flow.
#[derive(Debug, Clone)]
pub struct FlowEntry {
    /// Who.
    pub id: FlowId,
    /// Weight `W_i` (FQCN eq. 7-9), ≥ 1.
    pub weight: u32,
    /// The port its frames arrive on (where messages to it leave).
    pub ingress: PortId,
    /// Octets arrived since the last reset (`B_i` of FQCN; the interval's arrivals for the
    /// explicit-rate CP).
    pub bytes: u64,
    /// Octets of this flow in the CP's queue now (`q_n` of occupancy sampling).
    pub occupancy: u64,
    /// Live (false: on the free list).
    pub live: bool,
    hdr_len: u8,
    hdr: [u8; HDR_LEN],
}

impl FlowEntry {
    /// The first octets of a recent frame of the flow (its first since the last reset).
    pub fn header(&self) -> &[u8] {
        &self.hdr[..usize::from(self.hdr_len)]
    }
}

/// The bounded flow table of one CP.
#[derive(Debug, Clone)]
pub struct FlowTable {
    entries: Vec<FlowEntry>,
    free: Vec<u16>,
    index: Vec<u16>,
    mask: usize,
    seed: u64,
    capacity: usize,
    live: usize,
    reclaimed_since_reset: bool,
    /// Frames of new flows not tracked because the table was full.
    pub overflow: u64,
}

impl FlowTable {
    /// A table for at most `capacity` flows (clamped to 1..=[`MAX_FLOWS`]); `seed` keys the
    /// hash.
    pub fn new(capacity: usize, seed: u64) -> FlowTable {
        let capacity = capacity.clamp(1, MAX_FLOWS);
        let slots = (2 * capacity).next_power_of_two();
        FlowTable {
            entries: Vec::with_capacity(capacity),
            free: Vec::with_capacity(capacity),
            index: vec![EMPTY; slots],
            mask: slots - 1,
            seed: seed | 1,
            capacity,
            live: 0,
            reclaimed_since_reset: false,
            overflow: 0,
        }
    }

    #[inline]
    fn slot_of(&self, key: u64) -> usize {
        // Multiplicative hashing (Knuth), keyed; the top bits are the best mixed.
        let h = (key ^ self.seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> 32) as usize & self.mask
    }

    /// Index of the flow `id`, if tracked.
    #[inline]
    pub fn find(&self, id: &FlowId) -> Option<u16> {
        let key = id.key();
        let mut s = self.slot_of(key);
        loop {
            let e = self.index[s];
            if e == EMPTY {
                return None;
            }
            if self.entries[usize::from(e)].id == *id {
                return Some(e);
            }
            s = (s + 1) & self.mask;
        }
    }

    /// The index of flow `id`, inserting it (weight from `weight`) if new; `None` when the
    /// table is full of live flows (counted in `overflow`).
    #[inline]
    pub fn get_or_insert(
        &mut self,
        id: &FlowId,
        ingress: PortId,
        weight: impl FnOnce(&FlowId) -> u32,
    ) -> Option<u16> {
        if let Some(i) = self.find(id) {
            return Some(i);
        }
        if self.live >= self.capacity && !self.reclaim() {
            self.overflow += 1;
            return None;
        }
        let e = FlowEntry {
            id: *id,
            weight: weight(id).max(1),
            ingress,
            bytes: 0,
            occupancy: 0,
            live: true,
            hdr_len: 0,
            hdr: [0; HDR_LEN],
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.entries[usize::from(i)] = e;
                i
            }
            None => {
                // live < capacity ≤ MAX_FLOWS < u16::MAX here.
                self.entries.push(e);
                (self.entries.len() - 1) as u16
            }
        };
        self.live += 1;
        let mut s = self.slot_of(id.key());
        while self.index[s] != EMPTY {
            s = (s + 1) & self.mask;
        }
        self.index[s] = i;
        Some(i)
    }

    /// Frees the entries that hold nothing in the queue and counted nothing since the last
    /// reset, and rebuilds the index. At most once between two [`FlowTable::reset_bytes`].
    /// Returns whether room was made.
    #[cold]
    fn reclaim(&mut self) -> bool {
        if self.reclaimed_since_reset {
            return false;
        }
        self.reclaimed_since_reset = true;
        self.index.fill(EMPTY);
        for (i, e) in self.entries.iter_mut().enumerate() {
            if e.live && e.occupancy == 0 && e.bytes == 0 {
                e.live = false;
                self.live -= 1;
                // i < entries.len() ≤ MAX_FLOWS.
                self.free.push(i as u16);
            }
        }
        for (i, e) in self.entries.iter().enumerate() {
            if e.live {
                let mut s = self.slot_of(e.id.key());
                while self.index[s] != EMPTY {
                    s = (s + 1) & self.mask;
                }
                self.index[s] = i as u16;
            }
        }
        self.live < self.capacity
    }

    /// A frame of flow `i` arrived: counts its octets and, for the first frame of the flow
    /// since the last reset, keeps its first [`HDR_LEN`] octets and its ingress port (so the
    /// header is copied once per flow per interval, not per frame; any frame of the flow
    /// serves to address a message to its source).
    #[inline]
    pub fn arrived(&mut self, i: u16, frame: &[u8], ingress: PortId) {
        if let Some(e) = self.entries.get_mut(usize::from(i)) {
            if e.bytes == 0 || e.hdr_len == 0 {
                e.ingress = ingress;
                let n = frame.len().min(HDR_LEN);
                e.hdr[..n].copy_from_slice(&frame[..n]);
                e.hdr_len = n as u8;
            }
            e.bytes += frame.len() as u64;
        }
    }

    /// `len` octets of flow `i` entered the queue.
    #[inline]
    pub fn occupy(&mut self, i: u16, len: usize) {
        if let Some(e) = self.entries.get_mut(usize::from(i)) {
            e.occupancy += len as u64;
        }
    }

    /// `len` octets of flow `i` left the queue.
    #[inline]
    pub fn release(&mut self, i: u16, len: usize) {
        if let Some(e) = self.entries.get_mut(usize::from(i)) {
            e.occupancy = e.occupancy.saturating_sub(len as u64);
        }
    }

    /// Zeroes every flow's `bytes` (a new sampling or measurement interval).
    pub fn reset_bytes(&mut self) {
        for e in &mut self.entries {
            e.bytes = 0;
        }
        self.reclaimed_since_reset = false;
    }

    /// Every entry slot (check [`FlowEntry::live`]).
    #[inline]
    pub fn entries(&self) -> &[FlowEntry] {
        &self.entries
    }

    /// Entry `i`.
    #[inline]
    pub fn get(&self, i: u16) -> Option<&FlowEntry> {
        self.entries.get(usize::from(i)).filter(|e| e.live)
    }

    /// Live flows.
    pub fn len(&self) -> usize {
        self.live
    }

    /// No live flow.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fr(src_last: u8, vid: Option<u16>, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x99]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 1, src_last]);
        match vid {
            Some(v) => {
                f[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
                f[14..16].copy_from_slice(&(0x6000 | v).to_be_bytes());
                f[16..18].copy_from_slice(&0x0800u16.to_be_bytes());
            }
            None => f[12..14].copy_from_slice(&0x0800u16.to_be_bytes()),
        }
        f
    }

    #[test]
    fn flow_ids_and_keys() {
        let a = FlowId::of(&fr(1, Some(10), 60), 3).unwrap();
        assert_eq!(a.vid, 10);
        assert_eq!(a.src.0[5], 1);
        let b = FlowId::of(&fr(1, None, 60), 3).unwrap();
        assert_eq!(b.vid, 0);
        assert_ne!(a.key(), b.key());
        assert!(FlowId::of(&[0; 13], 3).is_none());
        // A tagged TPID with a truncated tag is read as VID 0, never a panic.
        let mut t = fr(1, Some(5), 60);
        t.truncate(15);
        assert_eq!(FlowId::of(&t, 3).unwrap().vid, 0);
    }

    #[test]
    fn bounded_with_reclaim_and_stable_indices() {
        let mut t = FlowTable::new(4, 7);
        let ids: Vec<FlowId> = (0..6)
            .map(|k| FlowId::of(&fr(k, None, 60), 3).unwrap())
            .collect();
        let idx: Vec<u16> = ids[..4]
            .iter()
            .map(|id| t.get_or_insert(id, PortId(0), |_| 1).unwrap())
            .collect();
        for (k, &i) in idx.iter().enumerate() {
            t.arrived(i, &fr(k as u8, None, 100), PortId(1));
        }
        t.occupy(idx[0], 100);
        assert_eq!(t.len(), 4);
        // Full of flows that counted octets: no reclaim possible.
        assert!(t.get_or_insert(&ids[4], PortId(0), |_| 1).is_none());
        assert_eq!(t.overflow, 1);
        // After a reset, flows 1..3 are idle and reclaimable; flow 0 still holds queue octets.
        t.reset_bytes();
        let i4 = t.get_or_insert(&ids[4], PortId(0), |_| 1).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.find(&ids[0]), Some(idx[0]));
        assert_eq!(t.get(idx[0]).unwrap().occupancy, 100);
        assert!(t.find(&ids[1]).is_none());
        assert_eq!(t.get(i4).unwrap().id, ids[4]);
        assert_eq!(t.get(idx[0]).unwrap().header().len(), 96);
        assert_eq!(t.get(idx[0]).unwrap().ingress, PortId(1));
        t.release(idx[0], 1000);
        assert_eq!(t.get(idx[0]).unwrap().occupancy, 0);
    }
}
