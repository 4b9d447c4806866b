//! Propagation delay line of one output port.
//!
//! A frame that starts transmission at `start` on a link with one-way propagation delay `d` is
//! handed to the wire (the caller's `tx`) at `start + d`, so a topology gets a real round-trip
//! time without `netem` (which this kernel lacks). A link does not reorder, so when the delay
//! changes at run time a frame is never delivered before one that left earlier:
//! `due = max(start + d, due of the previous frame)`.
//!
//! A delay change applies to the frames still on the wire too: each is re-timed to
//! `max(start + d_new, due of the previous frame)`, as if the link had had the new delay when
//! it left. So a port whose delay went to 100 000 s and back to 0 delivers what is waiting at
//! once instead of after the old delay.
//!
//! The frames "on the wire" are bounded in bytes (shaped ports hold at most `rate × d`, the
//! bound `buffers.delay_line` matters for unshaped ports); a frame that does not fit is dropped
//! and counted.

use crate::pool::Frame;
use cnm_proto::{Duration, Instant};
use std::collections::VecDeque;

/// Frames in flight on one link.
#[derive(Debug)]
pub struct DelayLine {
    delay: Duration,
    /// `(due, start, frame)`, dues non-decreasing.
    q: VecDeque<(Instant, Instant, Frame)>,
    bytes: u64,
    limit: u64,
    last_due: Instant,
}

impl DelayLine {
    /// A line with delay `delay` holding at most `limit` octets.
    pub fn new(delay: Duration, limit: u64) -> Self {
        DelayLine {
            delay,
            q: VecDeque::new(),
            bytes: 0,
            limit,
            last_due: Instant::ZERO,
        }
    }

    /// The one-way delay.
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// Changes the delay, for the frames on the wire as for the frames to come.
    pub fn set_delay(&mut self, delay: Duration) {
        self.delay = delay;
        let mut prev = Instant::ZERO;
        for (due, start, _) in self.q.iter_mut() {
            *due = (*start + delay).max(prev);
            prev = *due;
        }
        if !self.q.is_empty() {
            self.last_due = prev;
        }
    }

    /// True when no delay applies and nothing is in flight: frames may go straight out.
    #[inline]
    pub fn bypass(&self) -> bool {
        self.delay == Duration::ZERO && self.q.is_empty()
    }

    /// Puts a frame that started at `start` on the line; gives it back if the line is full.
    #[inline]
    pub fn push(&mut self, start: Instant, f: Frame) -> Result<(), Frame> {
        let len = f.len() as u64;
        if self.bytes + len > self.limit {
            return Err(f);
        }
        let due = (start + self.delay).max(self.last_due);
        self.last_due = due;
        self.bytes += len;
        self.q.push_back((due, start, f));
        Ok(())
    }

    /// When the first frame in flight arrives.
    #[inline]
    pub fn next_due(&self) -> Option<Instant> {
        self.q.front().map(|(t, _, _)| *t)
    }

    /// The first frame if it has arrived by `now`.
    #[inline]
    pub fn front_due(&self, now: Instant) -> Option<&Frame> {
        match self.q.front() {
            Some((t, _, f)) if *t <= now => Some(f),
            _ => None,
        }
    }

    /// Offers the first frame, if it has arrived by `now`, to `take` and removes it if `take`
    /// returns true. `take` may exchange the frame's buffer for another (the frame is
    /// accounted at the length it was put on the line with).
    #[inline]
    pub fn pop_due_if(
        &mut self,
        now: Instant,
        take: impl FnOnce(&mut Frame) -> bool,
    ) -> Option<Frame> {
        let (t, _, f) = self.q.front_mut()?;
        if *t > now {
            return None;
        }
        let len = f.len() as u64;
        if !take(f) {
            return None;
        }
        let (_, _, f) = self.q.pop_front()?;
        self.bytes -= len;
        Some(f)
    }

    /// Removes the first frame.
    #[inline]
    pub fn pop(&mut self) -> Option<Frame> {
        let (_, _, f) = self.q.pop_front()?;
        self.bytes -= f.len() as u64;
        Some(f)
    }

    /// Octets in flight.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Frames in flight.
    pub fn frames(&self) -> usize {
        self.q.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::FramePool;

    #[test]
    fn delays_and_never_reorders() {
        let mut p = FramePool::new();
        let mut d = DelayLine::new(Duration::from_micros(25), 3000);
        let t0 = Instant::from_nanos(1000);
        d.push(t0, p.frame(&[1; 1000], t0, 0).unwrap()).unwrap();
        assert_eq!(d.next_due(), Some(t0 + Duration::from_micros(25)));
        assert!(d.front_due(t0 + Duration::from_micros(24)).is_none());
        d.set_delay(Duration::ZERO);
        d.push(
            t0 + Duration::from_micros(1),
            p.frame(&[2; 1000], t0, 0).unwrap(),
        )
        .unwrap();
        assert!(d.push(t0, p.frame(&[3; 1001], t0, 0).unwrap()).is_err());
        let at = t0 + Duration::from_micros(25);
        assert_eq!(d.front_due(at).unwrap().buf[0], 1);
        d.pop();
        assert_eq!(d.front_due(at).unwrap().buf[0], 2);
        d.pop();
        assert!(d.bypass());
    }

    #[test]
    fn a_lowered_delay_releases_the_frames_waiting() {
        let mut p = FramePool::new();
        let mut d = DelayLine::new(Duration::from_secs(100_000), 10_000);
        let t0 = Instant::from_nanos(1_000);
        d.push(t0, p.frame(&[1; 100], t0, 0).unwrap()).unwrap();
        d.push(
            t0 + Duration::from_micros(5),
            p.frame(&[2; 100], t0, 0).unwrap(),
        )
        .unwrap();
        assert_eq!(d.next_due(), Some(t0 + Duration::from_secs(100_000)));
        let t1 = t0 + Duration::from_millis(1);
        d.set_delay(Duration::ZERO);
        // Both are due at their start now, in order.
        assert_eq!(d.next_due(), Some(t0));
        assert_eq!(d.front_due(t1).unwrap().buf[0], 1);
        d.pop();
        assert_eq!(d.front_due(t1).unwrap().buf[0], 2);
        d.pop();
        // The next frame is not held behind the old far-future due.
        d.push(t1, p.frame(&[3; 100], t1, 0).unwrap()).unwrap();
        assert_eq!(d.next_due(), Some(t1));
        // Raised again: what is on the wire waits for the new delay, still in order.
        d.push(
            t1 + Duration::from_micros(1),
            p.frame(&[4; 100], t1, 0).unwrap(),
        )
        .unwrap();
        d.set_delay(Duration::from_micros(10));
        assert_eq!(d.next_due(), Some(t1 + Duration::from_micros(10)));
        assert!(d.front_due(t1 + Duration::from_micros(9)).is_none());
    }
}
