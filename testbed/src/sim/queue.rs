//! The engine's event queue: a sorted array for the future plus a FIFO for the present.
//!
//! # Why two parts
//! Events are ordered by `(time, insertion sequence)`; ties break in the order the events were
//! scheduled, which makes a run a pure function of its topology and seed. A large share of the
//! events are scheduled for the very instant being processed (a host polled to take the frame
//! that just reached it, a switch whose idle port can send at once). Such an event always sorts
//! after every event already queued for that instant; sorting it in among the future ones only
//! to take it out again is wasted work. So events for the current instant go to a FIFO.
//!
//! # Why the order is the single heap's
//! Let `now` be the current instant. Every future event at time `now` was scheduled while
//! the clock was earlier than `now`; every event in the FIFO was scheduled while the clock was
//! at `now`. Sequence numbers grow with scheduling, so every future event at `now` sorts before
//! every FIFO event, and the FIFO, filled in scheduling order, is already sorted. Popping the
//! future part's events at `now` first, then the FIFO's, then moving the clock to its next
//! instant (the FIFO is empty by then) is exactly the order of one heap over `(time, sequence)`.
//!
//! # Why a sorted array
//! The future part is small (one pending delivery per link direction with frames in flight,
//! about one wake-up per node, the periodic samples: under twenty entries on the dumbbell) and
//! hot (about four pushes and pops per frame hop). Its entries are kept in descending `(time,
//! sequence)` order, so the earliest event is the last entry: a pop is a truncation, a look at
//! the next event one read. A four-ary heap over the same keys had cost a sift per push whose
//! comparisons are close to coin flips (about 210 instructions per push on the dumbbell, a
//! tenth of the simulator's instructions); the array costs about two thirds of that (591.9 M to
//! 568.0 M instructions for 100 ms of the dumbbell, 338 k pushes).
//!
//! # Why a push walks instead of searching
//! On the dumbbell the array holds 11 or 12 entries and a new event lands anywhere among them
//! (counted over 100 ms: from 1 to 11 entries earlier than it, evenly spread). A push appends
//! the new entry and moves the entries earlier than it up by one, one at a time from the end,
//! then writes it where the last of them was. A binary search (four probes) followed by
//! `Vec::insert` did the same work with about the same instructions, but the probes' branches
//! are coin flips and the insert calls `memmove` for a few hundred octets: in the LTO build
//! the push and that `memmove` took 13 % of the samples. The walk has one unpredictable branch
//! (its end) and copies inline: 0.396 to 0.380 s of CPU per simulated second of the dumbbell
//! and 0.812 to 0.792 s for the parking lot (`testbed bench sim`, three interleaved pairs,
//! medians).
//!
//! # Why the walk compares instants only, through an iterator
//! A new event's sequence number is the largest yet, so it sorts after every entry at its own
//! instant: the entries earlier than it are exactly those due at or before its instant, and
//! the walk compares one `u64` per entry (the instants) where it compared `(time << 64 |
//! sequence)` as one `u128`. The walk runs over the entries as a reverse iterator, each entry
//! moved into the hole the previous one left, so that no index is bounds-checked: the indexed
//! loop took twelve instructions an entry (a bounds check the compiler could not lift), this
//! one nine, and the push, now small, is inlined where the engine calls it (it had been a call
//! of its own, saving and restoring six registers each time). Entries are 24 octets (instant,
//! sequence, kind) instead of 32 (a `u128` aligned to 16, and the kind). Counted with
//! callgrind over 100 ms of the dumbbell (LTO build): 433.6 M to 411.0 M instructions for the
//! whole run, the queue's own from 50.7 M to 17 M; in the `ci` profile 458.8 M to 456.7 M for
//! the instant comparison alone and to 442.2 M with the iterator.

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

/// Events in `(time, sequence)` order.
#[derive(Debug)]
pub(crate) struct EventQueue<K> {
    /// Events after the instant they were scheduled at, in descending `(t, seq)` order (the
    /// earliest last).
    future: Vec<Entry<K>>,
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
            future: Vec::new(),
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
        } else {
            // The new entry's sequence number is the largest yet: it sorts after every entry
            // at its instant, so the entries earlier than it (at the end) are those due at or
            // before `t`. They move up by one, one at a time, and it takes the place the last
            // of them left.
            let e = Entry { t, seq, kind };
            self.future.push(e);
            let mut slots = self.future.iter_mut().rev();
            if let Some(mut hole) = slots.next() {
                for slot in slots {
                    if slot.t > t {
                        break;
                    }
                    *hole = *slot;
                    hole = slot;
                }
                *hole = e;
            }
        }
        seq
    }

    /// Whether any event is due at or before `t`.
    #[inline]
    pub fn has_due_by(&self, t: Instant) -> bool {
        !self.now_q.is_empty() || self.future.last().is_some_and(|e| e.t <= t)
    }

    /// The earliest future event, if the next event comes from the future part (else from the
    /// FIFO).
    #[inline]
    fn next_from_future(&self) -> Option<Entry<K>> {
        let &e = self.future.last()?;
        (e.t == self.now || self.now_q.is_empty()).then_some(e)
    }

    /// The instant of the next event, if any.
    #[inline]
    pub fn peek_time(&self) -> Option<Instant> {
        match self.next_from_future() {
            Some(e) => Some(e.t),
            None => self.now_q.front().map(|e| e.t),
        }
    }

    /// Takes the next event if it is due at or before `end`, and moves the queue's clock to it.
    #[inline]
    pub fn pop_until(&mut self, end: Instant) -> Option<Entry<K>> {
        if let Some(e) = self.next_from_future() {
            if e.t > end {
                return None;
            }
            self.future.pop();
            self.now = e.t;
            return Some(e);
        }
        if self.now_q.front()?.t > end {
            return None;
        }
        self.now_q.pop_front()
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
        // At 10: an event for now sorts after 'c' and 'f' (scheduled earlier: smaller sequence numbers).
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
    /// many ties, events for the present and for the past, queues of every size from empty to
    /// a few hundred, pops followed by a push, by a peek or by another pop.
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

    /// `has_due_by` sees the future part and the FIFO.
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
        // 'c' (10) and 'b' (20) remain.
        assert!(q.has_due_by(at(10)));
        assert_eq!(q.pop_until(at(100)).unwrap().kind, 'c');
        assert!(!q.has_due_by(at(10)));
        assert!(q.has_due_by(at(20)));
        // An event for the current instant (10) goes to the FIFO: due.
        q.push(at(10), 'd');
        assert!(q.has_due_by(at(10)));
        assert_eq!(q.pop_until(at(100)).unwrap().kind, 'd');
        // 'd' went to the FIFO: 'b' is all that is left.
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
