//! Output queues: one FIFO per (output port, priority), bounded in octets (default 150 KB).
//!
//! The scheduler ([`crate::sched`]) moves a frame from a VOQ into an output queue only when it
//! fits, so an output queue never overflows: backpressure holds frames in the input buffers
//! instead (which is what fills them and triggers PAUSE in lossless mode). This is the queue a
//! QCN output congestion point watches (802.1Q-2018 clause 32.8: the CP samples frames as they
//! are enqueued and compares the queue length with Qeq).

use crate::pool::Frame;
use crate::stats::QueueCounters;
use std::collections::VecDeque;

/// One output queue.
#[derive(Debug)]
pub struct OutputQueue {
    q: VecDeque<Frame>,
    bytes: u64,
    max: u64,
    /// Counters.
    pub counters: QueueCounters,
}

impl OutputQueue {
    /// An empty queue of `max` octets.
    pub fn new(max: u64) -> Self {
        OutputQueue {
            q: VecDeque::new(),
            bytes: 0,
            max,
            counters: QueueCounters::default(),
        }
    }

    /// Whether `len` more octets fit.
    #[inline]
    pub fn fits(&self, len: usize) -> bool {
        self.bytes + len as u64 <= self.max
    }

    /// Appends a frame (caller checked [`OutputQueue::fits`]).
    #[inline]
    pub fn push(&mut self, f: Frame) {
        let len = f.len() as u64;
        self.bytes += len;
        self.counters.enq_frames += 1;
        self.counters.enq_bytes += len;
        self.counters.peak_bytes = self.counters.peak_bytes.max(self.bytes);
        self.q.push_back(f);
    }

    /// The head frame.
    #[inline]
    pub fn front(&self) -> Option<&Frame> {
        self.q.front()
    }

    /// The frame enqueued last.
    #[inline]
    pub fn back(&self) -> Option<&Frame> {
        self.q.back()
    }

    /// The frame enqueued last, mutable (a congestion point tags it with its flow).
    #[inline]
    pub fn back_mut(&mut self) -> Option<&mut Frame> {
        self.q.back_mut()
    }

    /// Removes the head frame.
    #[inline]
    pub fn pop(&mut self) -> Option<Frame> {
        let f = self.q.pop_front()?;
        self.bytes -= f.len() as u64;
        self.counters.deq_frames += 1;
        Some(f)
    }

    /// Offers the head frame to `take` and removes it if `take` returns true. `take` may
    /// exchange the frame's buffer for another (the frame is accounted at its queued length).
    #[inline]
    pub fn pop_if(&mut self, take: impl FnOnce(&mut Frame) -> bool) -> Option<Frame> {
        let f = self.q.front_mut()?;
        let len = f.len() as u64;
        if !take(f) {
            return None;
        }
        let f = self.q.pop_front()?;
        self.bytes -= len;
        self.counters.deq_frames += 1;
        Some(f)
    }

    /// Occupancy (octets).
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Frames queued.
    pub fn frames(&self) -> usize {
        self.q.len()
    }

    /// Empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Capacity (octets).
    pub fn max(&self) -> u64 {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::FramePool;
    use cnm_proto::Instant;

    #[test]
    fn bounded_fifo() {
        let mut p = FramePool::new();
        let mut q = OutputQueue::new(2000);
        q.push(p.frame(&[1; 1000], Instant::ZERO, 0).unwrap());
        q.push(p.frame(&[2; 1000], Instant::ZERO, 0).unwrap());
        assert!(!q.fits(1));
        assert_eq!(q.pop().unwrap().buf[0], 1);
        assert!(q.fits(1000));
        assert_eq!(q.front().unwrap().buf[0], 2);
        assert_eq!(q.counters.peak_bytes, 2000);
    }

    #[test]
    fn a_head_taken_with_its_buffer_exchanged_is_accounted_as_queued() {
        let mut p = FramePool::new();
        let mut q = OutputQueue::new(3000);
        q.push(p.frame(&[1; 1000], Instant::ZERO, 0).unwrap());
        q.push(p.frame(&[2; 500], Instant::ZERO, 0).unwrap());
        // Refused: nothing moves.
        assert!(q.pop_if(|_| false).is_none());
        assert_eq!((q.bytes(), q.frames()), (1500, 2));
        // Taken, the frame's buffer replaced by an empty one.
        let mut out = Vec::new();
        let f = q
            .pop_if(|f| {
                std::mem::swap(&mut out, &mut f.buf);
                true
            })
            .unwrap();
        assert!(f.buf.is_empty());
        assert_eq!((out.len(), out[0]), (1000, 1));
        assert_eq!((q.bytes(), q.frames(), q.counters.deq_frames), (500, 1, 1));
    }
}
