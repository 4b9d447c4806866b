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

use cnm_proto::Instant;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// One scheduled event, ordered by `(t, seq)` (sequence numbers are unique: the kind never
/// decides).
#[derive(Debug)]
pub(crate) struct Entry<K> {
    /// When it is due.
    pub t: Instant,
    /// Scheduling order (unique).
    pub seq: u64,
    /// What happens.
    pub kind: K,
}

impl<K> PartialEq for Entry<K> {
    fn eq(&self, other: &Self) -> bool {
        (self.t, self.seq) == (other.t, other.seq)
    }
}

impl<K> Eq for Entry<K> {}

impl<K> PartialOrd for Entry<K> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<K> Ord for Entry<K> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.t, self.seq).cmp(&(other.t, other.seq))
    }
}

/// Events in `(time, sequence)` order.
#[derive(Debug)]
pub(crate) struct EventQueue<K> {
    /// Events after the instant they were scheduled at.
    heap: BinaryHeap<Reverse<Entry<K>>>,
    /// Events scheduled at the current instant for the current instant, in sequence order.
    now_q: VecDeque<Entry<K>>,
    /// The instant `now_q` belongs to.
    now: Instant,
    /// The next sequence number.
    seq: u64,
}

impl<K> EventQueue<K> {
    /// An empty queue at time zero.
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
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
            self.heap.push(Reverse(Entry { t, seq, kind }));
        }
        seq
    }

    /// The instant of the next event, if any.
    #[inline]
    pub fn peek_time(&self) -> Option<Instant> {
        if let Some(Reverse(e)) = self.heap.peek() {
            if e.t == self.now || self.now_q.is_empty() {
                return Some(e.t);
            }
        }
        self.now_q.front().map(|e| e.t)
    }

    /// Takes the next event if it is due at or before `end`, and moves the queue's clock to it.
    #[inline]
    pub fn pop_until(&mut self, end: Instant) -> Option<Entry<K>> {
        let t = self.peek_time()?;
        if t > end {
            return None;
        }
        let from_heap = match self.heap.peek() {
            Some(Reverse(e)) => e.t == self.now || self.now_q.is_empty(),
            None => false,
        };
        let e = if from_heap {
            self.heap.pop().map(|Reverse(e)| e)
        } else {
            self.now_q.pop_front()
        }?;
        self.now = e.t;
        Some(e)
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
}
