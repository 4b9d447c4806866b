//! The engine's event queue: a binary heap for the future plus a FIFO for the present.
//!
//! # Why two parts
//! Events are ordered by `(time, insertion sequence)`; ties break in the order the events were
//! scheduled, which makes a run a pure function of its topology and seed. A large share of the
//! events are scheduled for the very instant being processed (a host polled to take the frame
//! that just reached it, a switch whose idle port can send at once). Such an event always sorts
//! after every event already queued for that instant, and pushing it through a heap only to pop
//! it again costs two logarithmic sifts. So events for the current instant go to a FIFO.
//!
//! # Why the order is the single heap's
//! Let `now` be the current instant. Every event in the heap at time `now` was scheduled while
//! the clock was earlier than `now`; every event in the FIFO was scheduled while the clock was
//! at `now`. Sequence numbers grow with scheduling, so every heap event at `now` sorts before
//! every FIFO event, and the FIFO, filled in scheduling order, is already sorted. Popping the
//! heap's events at `now` first, then the FIFO's, then moving the clock to the heap's next
//! instant (the FIFO is empty by then) is exactly the order of one heap over `(time, sequence)`.
//!
//! # Why a four-ary heap of packed keys
//! The heap is small (one pending delivery per link direction with frames in flight, about one
//! wake-up per node, the periodic samples: under twenty entries on the dumbbell) and hot (about
//! three pops and pushes per frame hop). What it costs is the branches of its sifts, whose
//! outcomes are close to coin flips, not memory. So the heap is four-ary (half the levels of a
//! binary one: 21 entries fit in three), compares one `u128` per step (`time << 64 | sequence`,
//! the very `(time, sequence)` order), and keeps its keys apart from the event kinds so that a
//! sift reads a few contiguous 16-octet keys. Nearly every pop is followed by a push before
//! the next pop (the link direction's next frame, the node's next wake-up), so a pop leaves the
//! root in place, marked taken, and that push overwrites it and sifts down once: one sift per
//! event instead of two. A taken root nobody overwrote is replaced by the last entry before the
//! heap is next looked at. Sifts move a hole, one entry per level, no swaps.

use cnm_proto::Instant;
use std::collections::VecDeque;

/// One scheduled event, ordered by `(t, seq)` (sequence numbers are unique: the kind never
/// decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry<K> {
    /// When it is due.
    pub t: Instant,
    /// Scheduling order (unique).
    pub seq: u64,
    /// What happens.
    pub kind: K,
}

/// Children per heap node.
const ARITY: usize = 4;

/// The heap key of an event: `(t, seq)` ordered as one number.
#[inline]
fn key(t: Instant, seq: u64) -> u128 {
    (u128::from(t.as_nanos()) << 64) | u128::from(seq)
}

/// The instant of a key.
#[inline]
fn key_time(k: u128) -> Instant {
    // The high half is the instant's nanoseconds (see `key`): the shift leaves 64 bits.
    Instant::from_nanos((k >> 64) as u64)
}

/// Events in `(time, sequence)` order.
#[derive(Debug)]
pub(crate) struct EventQueue<K> {
    /// Keys of the events after the instant they were scheduled at: a four-ary min-heap.
    keys: Vec<u128>,
    /// `kinds[i]` is the kind of the event of `keys[i]`.
    kinds: Vec<K>,
    /// The heap's root was popped but is still in place, to be overwritten by the next push
    /// (or removed before the next look at the heap).
    root_taken: bool,
    /// Events scheduled at the current instant for the current instant, in sequence order.
    now_q: VecDeque<Entry<K>>,
    /// The instant `now_q` belongs to.
    now: Instant,
    /// The next sequence number.
    seq: u64,
}

impl<K: Copy> EventQueue<K> {
    /// An empty queue at time zero.
    pub fn new() -> Self {
        EventQueue {
            keys: Vec::new(),
            kinds: Vec::new(),
            root_taken: false,
            now_q: VecDeque::new(),
            now: Instant::ZERO,
            seq: 0,
        }
    }

    /// Schedules `kind` at `t` (not before the current instant: an earlier `t` is taken as
    /// now); returns its sequence number.
    #[inline]
    pub fn push(&mut self, t: Instant, kind: K) -> u64 {
        let seq = self.seq;
        self.seq += 1;
        if t <= self.now {
            self.now_q.push_back(Entry {
                t: self.now,
                seq,
                kind,
            });
        } else if self.root_taken {
            // The popped root's slot takes the new event: one sift instead of two.
            self.root_taken = false;
            self.sift_down_from_root(key(t, seq), kind);
        } else {
            self.heap_push(key(t, seq), kind);
        }
        seq
    }

    /// Whether any event is due at or before `t`. Reads the heap without settling a taken
    /// root (its replacement is the least of the root's children, by the heap property), so
    /// that a push after this look still overwrites it.
    #[inline]
    pub fn has_due_by(&self, t: Instant) -> bool {
        if !self.now_q.is_empty() {
            return true;
        }
        let least = if self.root_taken {
            self.keys.iter().skip(1).take(ARITY).min()
        } else {
            self.keys.first()
        };
        least.is_some_and(|&k| key_time(k) <= t)
    }

    /// Whether the next event comes from the heap (else from the FIFO), and the heap's
    /// earliest key.
    #[inline]
    fn next_from_heap(&mut self) -> Option<u128> {
        self.settle();
        let k = *self.keys.first()?;
        (key_time(k) == self.now || self.now_q.is_empty()).then_some(k)
    }

    /// The instant of the next event, if any.
    #[inline]
    pub fn peek_time(&mut self) -> Option<Instant> {
        match self.next_from_heap() {
            Some(k) => Some(key_time(k)),
            None => self.now_q.front().map(|e| e.t),
        }
    }

    /// Takes the next event if it is due at or before `end`, and moves the queue's clock to it.
    #[inline]
    pub fn pop_until(&mut self, end: Instant) -> Option<Entry<K>> {
        if let Some(k) = self.next_from_heap() {
            let t = key_time(k);
            if t > end {
                return None;
            }
            // Left in place: the next push overwrites it.
            self.root_taken = true;
            self.now = t;
            // The low half of the key is the sequence number.
            return Some(Entry {
                t,
                seq: k as u64,
                kind: self.kinds[0],
            });
        }
        if self.now_q.front()?.t > end {
            return None;
        }
        self.now_q.pop_front()
    }

    /// Removes a popped root still in place: the last entry fills its slot.
    #[inline]
    fn settle(&mut self) {
        if !self.root_taken {
            return;
        }
        self.root_taken = false;
        if let (Some(last), Some(last_kind)) = (self.keys.pop(), self.kinds.pop()) {
            if !self.keys.is_empty() {
                self.sift_down_from_root(last, last_kind);
            }
        }
    }

    /// Adds `k` to the heap: up from the new leaf through a hole.
    #[inline]
    fn heap_push(&mut self, k: u128, kind: K) {
        let mut i = self.keys.len();
        self.keys.push(k);
        self.kinds.push(kind);
        while i > 0 {
            let p = (i - 1) / ARITY;
            if self.keys[p] <= k {
                break;
            }
            self.keys[i] = self.keys[p];
            self.kinds[i] = self.kinds[p];
            i = p;
        }
        self.keys[i] = k;
        self.kinds[i] = kind;
    }

    /// Puts `(k, kind)` in the root's slot (the heap is not empty; the root's old entry is
    /// dropped) and moves it down through a hole to its place.
    #[inline]
    fn sift_down_from_root(&mut self, k: u128, kind: K) {
        let keys = &mut self.keys[..];
        let kinds = &mut self.kinds[..];
        let len = keys.len();
        let mut i = 0;
        loop {
            let c = ARITY * i + 1;
            if c >= len {
                break;
            }
            // The smallest child; all four compared without early exits when all are there.
            let (mut m, mut mk) = (c, keys[c]);
            if c + ARITY <= len {
                let kids = &keys[c..c + ARITY];
                let (a, ka) = if kids[1] < kids[0] {
                    (1, kids[1])
                } else {
                    (0, kids[0])
                };
                let (b, kb) = if kids[3] < kids[2] {
                    (3, kids[3])
                } else {
                    (2, kids[2])
                };
                (m, mk) = if kb < ka { (c + b, kb) } else { (c + a, ka) };
            } else {
                for (j, &kj) in keys.iter().enumerate().take(len).skip(c + 1) {
                    if kj < mk {
                        (m, mk) = (j, kj);
                    }
                }
            }
            if k <= mk {
                break;
            }
            keys[i] = mk;
            kinds[i] = kinds[m];
            i = m;
        }
        if let (Some(ks), Some(kd)) = (keys.get_mut(i), kinds.get_mut(i)) {
            *ks = k;
            *kd = kind;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cnm_proto::Duration;

    fn at(ns: u64) -> Instant {
        Instant::ZERO + Duration::from_nanos(ns)
    }

    /// The reference: one heap over (time, sequence).
    #[test]
    fn pops_in_time_then_scheduling_order() {
        let mut q = EventQueue::new();
        q.push(at(10), 'a');
        q.push(at(0), 'b');
        q.push(at(10), 'c');
        q.push(at(5), 'd');
        let e = q.pop_until(at(100)).unwrap();
        assert_eq!((e.t, e.kind), (at(0), 'b'));
        // Scheduled during instant 0 for instant 0: after nothing else at 0, so next.
        q.push(at(0), 'e');
        assert_eq!(q.pop_until(at(100)).unwrap().kind, 'e');
        assert_eq!(q.pop_until(at(100)).unwrap().kind, 'd');
        // At 5: a new event for 10 sorts after 'a' and 'c', which were scheduled earlier.
        q.push(at(10), 'f');
        assert_eq!(q.pop_until(at(100)).unwrap().kind, 'a');
        // At 10: an event for now sorts after 'c' and 'f' (heap, earlier sequence numbers).
        q.push(at(10), 'g');
        q.push(at(3), 'h'); // in the past: taken as now, after 'g'
        let rest: Vec<char> = std::iter::from_fn(|| q.pop_until(at(100)).map(|e| e.kind)).collect();
        assert_eq!(rest, vec!['c', 'f', 'g', 'h']);
        assert!(q.pop_until(at(100)).is_none());
    }

    #[test]
    fn nothing_after_the_end_and_sequence_numbers_count_every_push() {
        let mut q = EventQueue::new();
        assert_eq!(q.push(at(0), 1), 0);
        assert_eq!(q.push(at(20), 2), 1);
        assert_eq!(q.pop_until(at(10)).unwrap().kind, 1);
        assert!(q.pop_until(at(10)).is_none());
        assert_eq!(q.peek_time(), Some(at(20)));
        assert_eq!(q.pop_until(at(20)).unwrap().seq, 1);
        assert_eq!(q.peek_time(), None);
    }

    /// Against the reference, one binary heap over `(time, sequence)`: random schedules with
    /// many ties, events for the present and for the past, heaps of every size from empty to
    /// a few hundred (partial last families of children included), pops followed by a push,
    /// by a peek or by another pop.
    #[test]
    fn random_schedules_pop_in_the_order_of_one_heap() {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut rng = cnm_proto::rng::Rng::new(16);
        for round in 0..200u64 {
            let mut q = EventQueue::new();
            let mut reference = BinaryHeap::new();
            let mut now = 0u64;
            let span = 1 + rng.below(50);
            let target = rng.below(300);
            let mut popped = 0;
            while popped < 2000 {
                let grow = (reference.len() as u64) < target;
                if grow && rng.below(4) != 0 || reference.is_empty() {
                    // Ties are common (span is small); some events are for the past.
                    let t = (now + rng.below(span)).saturating_sub(rng.below(3));
                    let kind = round * 10_000 + popped;
                    let seq = q.push(at(t), kind);
                    reference.push(Reverse((t.max(now), seq, kind)));
                } else {
                    let Reverse((t, seq, kind)) = reference.pop().unwrap();
                    // A peek settles a taken root; without one the next push overwrites it.
                    if rng.below(2) == 0 {
                        assert_eq!(q.peek_time(), Some(at(t)));
                    }
                    let e = q.pop_until(at(u64::MAX)).unwrap();
                    assert_eq!((e.t, e.seq, e.kind), (at(t), seq, kind), "round {round}");
                    now = t;
                    popped += 1;
                }
            }
        }
    }

    /// `has_due_by` looks past a taken root without settling it, and sees the FIFO.
    #[test]
    fn whether_anything_is_due_by_an_instant() {
        let mut q = EventQueue::new();
        assert!(!q.has_due_by(Instant::MAX));
        q.push(at(10), 'a');
        q.push(at(20), 'b');
        q.push(at(10), 'c');
        assert!(!q.has_due_by(at(9)));
        assert!(q.has_due_by(at(10)));
        assert_eq!(q.pop_until(at(100)).unwrap().kind, 'a');
        // The root is taken; 'c' (10) and 'b' (20) remain.
        assert!(q.has_due_by(at(10)));
        assert_eq!(q.pop_until(at(100)).unwrap().kind, 'c');
        assert!(!q.has_due_by(at(10)));
        assert!(q.has_due_by(at(20)));
        // An event for the current instant (10) goes to the FIFO: due.
        q.push(at(10), 'd');
        assert!(q.has_due_by(at(10)));
        assert_eq!(q.pop_until(at(100)).unwrap().kind, 'd');
        // 'd' went to the FIFO, not over the taken root: 'b' is all that is left.
        assert!(!q.has_due_by(at(19)));
        assert_eq!(q.pop_until(at(100)).unwrap().kind, 'b');
        assert!(!q.has_due_by(Instant::MAX));
    }

    #[test]
    fn the_latest_instant_is_a_valid_time() {
        let mut q = EventQueue::new();
        q.push(Instant::MAX, 'z');
        q.push(at(1), 'a');
        assert_eq!(q.pop_until(Instant::MAX).unwrap().kind, 'a');
        let e = q.pop_until(Instant::MAX).unwrap();
        assert_eq!((e.t, e.seq, e.kind), (Instant::MAX, 0, 'z'));
    }
}
