//! Filtering database: learning, ageing and static entries (IEEE 802.1Q-2018 clause 8.8).
//!
//! Entries are keyed by (MAC address, VID), i.e. Independent VLAN Learning (802.1Q-2018 clause
//! 8.8.7, one FID per VID). A dynamic entry records the port a station was last seen on and
//! when; it expires `ageing` after that (clause 8.8.3, default 300 s). Static entries
//! (clause 8.8.1) are never aged and never moved by learning.
//!
//! Cost: one hash lookup per learn and per query at most. The key packs into a `u64` (48-bit
//! address, 12-bit VID) and is hashed by one multiply with a per-bridge random odd constant
//! (Fibonacci hashing keyed from the bridge's RNG, so colliding addresses cannot be chosen in
//! advance). The table is reserved at its bound up front, so learning never allocates; when
//! the bound is reached, new stations are refused (counted) until ageing frees room.
//!
//! The entries themselves lie in one dense array (`slots`, with their keys); the hash table
//! maps a key to its position there, and 64 *hint lines* (the top six bits of another keyed
//! multiply) remember the position last seen for a key of each line. A learn or a query reads
//! the hint first and takes the slot if it holds that very key (a stale or colliding hint only
//! sends it on to the hash table). Reserved for thousands of stations, the hash table spread
//! the few stations of a small network over as many cache lines (a control group and a bucket
//! each, far apart), which the frames between two learns had evicted: `Fdb::learn` took 3.7 %
//! of the samples of the 10 Gb/s dumbbell simulation (`perf`, LTO build) for 1.2 % of its
//! instructions. Through the hints and the dense slots it took 2.4 %, and the run 407.5 M
//! instead of 411.0 M instructions (callgrind, 100 ms of `dumbbell4`). Removing an entry
//! (ageing, a port going down) moves the last entry into its place and updates that entry's
//! table position and hint line: a sweep stays one pass over the entries (a hint left naming
//! a moved or removed slot is caught by the key check).

use crate::PortId;
use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Duration, Instant};
use serde::Serialize;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// The filtering database.
#[derive(Debug)]
pub struct Fdb {
    /// Key → position of its entry in `slots`.
    map: HashMap<u64, u32, KeyedHash>,
    /// The entries with their keys, dense (see the module documentation).
    slots: Vec<(u64, Entry)>,
    /// Position in `slots` last known for the keys of each hint line (see [`Fdb::hint_line`]);
    /// checked against the slot's key before use.
    hints: [u32; HINTS],
    /// Multiplier of the hint lines' hash (odd).
    hint_mul: u64,
    ageing: Duration,
    max_dynamic: usize,
    dynamic: usize,
    stats: FdbStats,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    port: PortId,
    last_seen: Instant,
    is_static: bool,
}

/// Counters of the filtering database.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct FdbStats {
    /// Dynamic entries now.
    pub dynamic_entries: usize,
    /// Static entries.
    pub static_entries: usize,
    /// New stations learned.
    pub learned: u64,
    /// Stations seen on a different port than their entry (entry moved).
    pub moved: u64,
    /// New stations not learned because the table was full.
    pub refused_full: u64,
    /// Entries removed by ageing.
    pub aged: u64,
    /// Entries removed because their port went down.
    pub flushed: u64,
}

/// One FDB entry as shown to operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FdbEntryView {
    /// Station address (`aa:bb:cc:dd:ee:ff`).
    pub mac: String,
    /// VLAN.
    pub vid: u16,
    /// Port index.
    pub port: u16,
    /// Static entry.
    pub is_static: bool,
    /// Nanoseconds since the station was last seen (0 for static entries).
    pub age_ns: u64,
}

/// The learned outcome of [`Fdb::learn`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learn {
    /// Entry existed on that port and was refreshed.
    Refreshed,
    /// New entry.
    Learned,
    /// Entry moved from another port.
    Moved,
    /// Static entry, left alone.
    Static,
    /// Table full, not learned.
    Refused,
}

/// Hint lines: `2^HINT_BITS` of them.
const HINT_BITS: u32 = 6;
/// Number of hint lines.
const HINTS: usize = 1 << HINT_BITS;

/// The key of (`mac`, `vid`): the VID's 12 bits above the 48 of the address, read big-endian
/// (the first octet highest) in one load rather than octet by octet.
#[inline]
fn key(mac: EthernetAddress, vid: u16) -> u64 {
    let [a, b, c, d, e, f] = mac.0;
    u64::from(vid & 0x0FFF) << 48 | u64::from_be_bytes([0, 0, a, b, c, d, e, f])
}

fn unkey(k: u64) -> (EthernetAddress, u16) {
    let mut m = [0u8; 6];
    for (i, b) in m.iter_mut().enumerate() {
        *b = (k >> (8 * (5 - i))) as u8;
    }
    (EthernetAddress(m), (k >> 48) as u16)
}

impl Fdb {
    /// An empty table holding at most `max_dynamic` learned entries.
    pub fn new(ageing: Duration, max_dynamic: usize, seed: u64) -> Self {
        Fdb {
            map: HashMap::with_capacity_and_hasher(max_dynamic + 16, KeyedHash(seed | 1)),
            slots: Vec::with_capacity(max_dynamic + 16),
            hints: [u32::MAX; HINTS],
            hint_mul: seed.rotate_left(32) | 1,
            ageing,
            max_dynamic,
            dynamic: 0,
            stats: FdbStats::default(),
        }
    }

    /// Adds a static entry (replacing any entry for that key).
    pub fn add_static(&mut self, mac: EthernetAddress, vid: u16, port: PortId) {
        let e = Entry {
            port,
            last_seen: Instant::ZERO,
            is_static: true,
        };
        let k = key(mac, vid);
        match self.find(k) {
            Some(i) => {
                let old = std::mem::replace(&mut self.slots[i].1, e);
                if old.is_static {
                    return;
                }
                self.dynamic -= 1;
            }
            None => self.insert(k, e),
        }
        self.stats.static_entries += 1;
    }

    /// The hint line of key `k`: the top bits of a multiply by a per-bridge odd constant.
    #[inline]
    fn hint_line(&self, k: u64) -> usize {
        (k.wrapping_mul(self.hint_mul) >> (64 - HINT_BITS)) as usize
    }

    /// The position of `k`'s entry in `slots`: through its hint line when that names it, else
    /// through the hash table.
    #[inline]
    fn find(&self, k: u64) -> Option<usize> {
        let h = self.hints[self.hint_line(k)] as usize;
        match self.slots.get(h) {
            Some(&(sk, _)) if sk == k => Some(h),
            _ => self.map.get(&k).map(|&i| i as usize),
        }
    }

    /// Adds an entry for a key not in the table.
    fn insert(&mut self, k: u64, e: Entry) {
        let i = self.slots.len();
        self.slots.push((k, e));
        self.map.insert(k, i as u32);
        let line = self.hint_line(k);
        self.hints[line] = i as u32;
    }

    /// Removes the entries `keep` refuses: each leaves its place in `slots` to the last entry
    /// (whose table position and hint line are moved with it), so a sweep costs one pass over
    /// the entries and a few hash operations per entry removed, as the hash table's own
    /// `retain` did.
    fn remove_where(&mut self, keep: impl Fn(&Entry) -> bool) -> usize {
        let mut removed = 0;
        let mut i = 0;
        while let Some((k, e)) = self.slots.get(i) {
            if keep(e) {
                i += 1;
                continue;
            }
            let k = *k;
            self.slots.swap_remove(i);
            self.map.remove(&k);
            removed += 1;
            if let Some(&(moved, _)) = self.slots.get(i) {
                self.map.insert(moved, i as u32);
                let line = self.hint_line(moved);
                self.hints[line] = i as u32;
            }
        }
        removed
    }

    /// Records that `mac` was seen as a source on `port` in `vid` at `now` (802.1Q-2018
    /// clause 8.7, the learning process).
    #[inline]
    pub fn learn(&mut self, now: Instant, mac: EthernetAddress, vid: u16, port: PortId) -> Learn {
        let k = key(mac, vid);
        if let Some(i) = self.find(k) {
            let line = self.hint_line(k);
            self.hints[line] = i as u32;
            let e = &mut self.slots[i].1;
            if e.is_static {
                return Learn::Static;
            }
            e.last_seen = now;
            if e.port == port {
                return Learn::Refreshed;
            }
            e.port = port;
            self.stats.moved += 1;
            return Learn::Moved;
        }
        if self.dynamic >= self.max_dynamic {
            self.stats.refused_full += 1;
            return Learn::Refused;
        }
        self.insert(
            k,
            Entry {
                port,
                last_seen: now,
                is_static: false,
            },
        );
        self.dynamic += 1;
        self.stats.learned += 1;
        Learn::Learned
    }

    /// The port for (`mac`, `vid`), if known and not expired at `now`.
    #[inline]
    pub fn lookup(&self, now: Instant, mac: EthernetAddress, vid: u16) -> Option<PortId> {
        let (_, e) = self.slots.get(self.find(key(mac, vid))?)?;
        if e.is_static || now.saturating_since(e.last_seen) < self.ageing {
            Some(e.port)
        } else {
            None
        }
    }

    /// Removes dynamic entries not seen for the ageing time (802.1Q-2018 clause 8.8.3).
    pub fn age(&mut self, now: Instant) {
        let ageing = self.ageing;
        let removed =
            self.remove_where(|e| e.is_static || now.saturating_since(e.last_seen) < ageing);
        self.dynamic -= removed;
        self.stats.aged += removed as u64;
    }

    /// Removes the dynamic entries of `port` (its link went down).
    pub fn flush_port(&mut self, port: PortId) {
        let removed = self.remove_where(|e| e.is_static || e.port != port);
        self.dynamic -= removed;
        self.stats.flushed += removed as u64;
    }

    /// Changes the ageing time.
    pub fn set_ageing(&mut self, ageing: Duration) {
        self.ageing = ageing;
    }

    /// Counters.
    pub fn stats(&self) -> FdbStats {
        FdbStats {
            dynamic_entries: self.dynamic,
            ..self.stats
        }
    }

    /// All entries, sorted by port, VID and address.
    pub fn entries(&self, now: Instant) -> Vec<FdbEntryView> {
        let mut v: Vec<FdbEntryView> = self
            .slots
            .iter()
            .map(|(k, e)| {
                let (mac, vid) = unkey(*k);
                FdbEntryView {
                    mac: mac.to_string(),
                    vid,
                    port: e.port.0,
                    is_static: e.is_static,
                    age_ns: if e.is_static {
                        0
                    } else {
                        now.saturating_since(e.last_seen).as_nanos()
                    },
                }
            })
            .collect();
        v.sort_by(|a, b| (a.port, a.vid, &a.mac).cmp(&(b.port, b.vid, &b.mac)));
        v
    }
}

/// Multiply-shift hashing of the packed `u64` key with a secret odd multiplier.
#[derive(Debug, Clone, Copy)]
struct KeyedHash(u64);

impl BuildHasher for KeyedHash {
    type Hasher = KeyedHasher;
    fn build_hasher(&self) -> KeyedHasher {
        KeyedHasher {
            mul: self.0,
            state: 0,
        }
    }
}

#[derive(Debug)]
struct KeyedHasher {
    mul: u64,
    state: u64,
}

impl Hasher for KeyedHasher {
    fn finish(&self) -> u64 {
        // Fold the high bits down: hashbrown uses the top 7 bits as tags and the low bits as
        // the bucket index, so both halves must be well mixed.
        let h = self.state.wrapping_mul(self.mul);
        h ^ (h >> 29) ^ (h << 17)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.state = (self.state.rotate_left(8) ^ u64::from(*b)).wrapping_mul(self.mul);
        }
    }
    fn write_u64(&mut self, k: u64) {
        self.state ^= k.wrapping_add(0x9E37_79B9_7F4A_7C15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(n: u8) -> EthernetAddress {
        EthernetAddress([0x02, 0, 0, 0, 0, n])
    }

    #[test]
    fn key_packs_vid_above_the_address() {
        let m = EthernetAddress([0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(key(m, 0x123), 0x0123_0211_2233_4455);
        // Only the VID's 12 bits count.
        assert_eq!(key(m, 0xF123), 0x0123_0211_2233_4455);
        assert_eq!(unkey(0x0123_0211_2233_4455), (m, 0x123));
    }

    #[test]
    fn learn_lookup_move_age() {
        let mut f = Fdb::new(Duration::from_secs(300), 10, 42);
        let t0 = Instant::from_nanos(1);
        assert_eq!(f.learn(t0, mac(1), 1, PortId(3)), Learn::Learned);
        assert_eq!(f.lookup(t0, mac(1), 1), Some(PortId(3)));
        assert_eq!(f.lookup(t0, mac(1), 2), None, "VID separates");
        assert_eq!(f.learn(t0, mac(1), 1, PortId(3)), Learn::Refreshed);
        assert_eq!(f.learn(t0, mac(1), 1, PortId(4)), Learn::Moved);
        assert_eq!(f.lookup(t0, mac(1), 1), Some(PortId(4)));
        let late = t0 + Duration::from_secs(300);
        assert_eq!(
            f.lookup(late, mac(1), 1),
            None,
            "expired entries are not used"
        );
        f.age(late);
        assert_eq!(f.stats().dynamic_entries, 0);
        assert_eq!(f.stats().aged, 1);
    }

    #[test]
    fn bound_and_static() {
        let mut f = Fdb::new(Duration::from_secs(300), 2, 7);
        let t = Instant::ZERO;
        f.add_static(mac(9), 1, PortId(0));
        assert_eq!(f.learn(t, mac(1), 1, PortId(1)), Learn::Learned);
        assert_eq!(f.learn(t, mac(2), 1, PortId(1)), Learn::Learned);
        assert_eq!(f.learn(t, mac(3), 1, PortId(1)), Learn::Refused);
        assert_eq!(f.stats().refused_full, 1);
        assert_eq!(f.learn(t, mac(9), 1, PortId(2)), Learn::Static);
        f.age(t + Duration::from_secs(1000));
        assert_eq!(
            f.lookup(t + Duration::from_secs(1000), mac(9), 1),
            Some(PortId(0))
        );
        assert_eq!(f.learn(t, mac(3), 1, PortId(1)), Learn::Learned);
        f.flush_port(PortId(1));
        assert_eq!(f.stats().dynamic_entries, 0);
        let e = f.entries(t);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].mac, "02:00:00:00:00:09");
    }

    /// More stations than hint lines (colliding hints), then removals that move the slots:
    /// every station is still found on its port, and the removed ones are not.
    #[test]
    fn hints_never_name_another_station() {
        let mut f = Fdb::new(Duration::from_secs(300), 1000, 3);
        let t = Instant::ZERO;
        let st = |n: u16| EthernetAddress([0x02, 0, 0, 0, (n >> 8) as u8, n as u8]);
        for n in 0..300u16 {
            assert_eq!(f.learn(t, st(n), 1, PortId(n % 3)), Learn::Learned);
        }
        f.flush_port(PortId(1));
        f.add_static(st(7), 1, PortId(9));
        for n in 0..300u16 {
            let want = match n % 3 {
                _ if n == 7 => Some(PortId(9)),
                1 => None,
                p => Some(PortId(p)),
            };
            assert_eq!(f.lookup(t, st(n), 1), want, "station {n}");
        }
        assert_eq!(f.stats().dynamic_entries, 200);
        assert_eq!(f.learn(t, st(2), 1, PortId(1)), Learn::Moved);
        assert_eq!(f.lookup(t, st(2), 1), Some(PortId(1)));
        assert_eq!(f.entries(t).len(), 201);
    }

    #[test]
    fn key_round_trips() {
        let m = EthernetAddress([0xde, 0xad, 0xbe, 0xef, 0x01, 0x02]);
        assert_eq!(unkey(key(m, 4094)), (m, 4094));
    }
}
