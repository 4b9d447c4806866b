//! Input buffers with virtual output queues (VOQs).
//!
//! Combined input-output queueing (CIOQ; McKeown et al., "Achieving 100% throughput in an
//! input-queued switch", IEEE Trans. Commun. 1999, introduce VOQs to remove head-of-line
//! blocking). Each input port has, per priority, one shared buffer of `buffers.input` octets
//! (default 150 KB, the QCN baseline switch) holding one FIFO per output port. Admission is
//! drop-tail on the shared total: a frame is accepted if the buffer's occupancy plus its length
//! does not exceed the size. Because every output has its own FIFO, a frame for a congested
//! output never waits behind frames for another output: only the shared byte budget is common.
//!
//! The occupancy of this buffer is what lossless mode watches ([`crate::pause`]) and what an
//! input congestion point (`cp.placement = "input"`, [`crate::cp`]) samples: it observes every
//! enqueue with the buffer occupancy.

use crate::pool::Frame;
use crate::stats::QueueCounters;
use std::collections::VecDeque;

/// The shared buffer of one (input port, priority).
#[derive(Debug)]
pub struct InputBuffer {
    voqs: Vec<VecDeque<Frame>>,
    bytes: u64,
    frames: usize,
    max: u64,
    /// Counters.
    pub counters: QueueCounters,
}

impl InputBuffer {
    /// A buffer of `max` octets with one VOQ for each of `ports` outputs.
    pub fn new(ports: usize, max: u64) -> Self {
        InputBuffer {
            voqs: (0..ports).map(|_| VecDeque::new()).collect(),
            bytes: 0,
            frames: 0,
            max,
            counters: QueueCounters::default(),
        }
    }

    /// Whether `len` more octets fit.
    #[inline]
    pub fn fits(&self, len: usize) -> bool {
        self.bytes + len as u64 <= self.max
    }

    /// Appends a frame to the VOQ of output `out` (caller checked [`InputBuffer::fits`]).
    /// Returns true if that VOQ was empty before.
    #[inline]
    pub fn push(&mut self, out: usize, f: Frame) -> bool {
        let len = f.len() as u64;
        self.bytes += len;
        self.frames += 1;
        self.counters.enq_frames += 1;
        self.counters.enq_bytes += len;
        self.counters.peak_bytes = self.counters.peak_bytes.max(self.bytes);
        let q = &mut self.voqs[out];
        let was_empty = q.is_empty();
        q.push_back(f);
        was_empty
    }

    /// Length of the frame at the head of the VOQ of `out`.
    #[inline]
    pub fn head_len(&self, out: usize) -> Option<usize> {
        self.voqs[out].front().map(Frame::len)
    }

    /// The frame enqueued last in the VOQ for `out`.
    #[inline]
    pub fn back(&self, out: usize) -> Option<&Frame> {
        self.voqs.get(out)?.back()
    }

    /// The frame enqueued last in the VOQ for `out`, mutable (a congestion point tags it with
    /// its flow).
    #[inline]
    pub fn back_mut(&mut self, out: usize) -> Option<&mut Frame> {
        self.voqs.get_mut(out)?.back_mut()
    }

    /// Removes the head of the VOQ of `out`.
    #[inline]
    pub fn pop(&mut self, out: usize) -> Option<Frame> {
        let f = self.voqs[out].pop_front()?;
        self.bytes -= f.len() as u64;
        self.frames -= 1;
        self.counters.deq_frames += 1;
        Some(f)
    }

    /// Whether the VOQ of `out` is empty.
    #[inline]
    pub fn voq_is_empty(&self, out: usize) -> bool {
        self.voqs[out].is_empty()
    }

    /// Occupancy (octets, all VOQs).
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Frames held (all VOQs).
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Capacity (octets).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Octets waiting for output `out`.
    pub fn voq_bytes(&self, out: usize) -> u64 {
        self.voqs[out].iter().map(|f| f.len() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::FramePool;
    use cnm_proto::Instant;

    #[test]
    fn shared_budget_separate_fifos() {
        let mut p = FramePool::new();
        let mut b = InputBuffer::new(3, 3000);
        let f = |p: &mut FramePool, n: usize| p.frame(&vec![0; n], Instant::ZERO, 0).unwrap();
        assert!(b.push(1, f(&mut p, 1000)));
        assert!(!b.push(1, f(&mut p, 1000)));
        assert!(b.push(2, f(&mut p, 500)));
        assert!(b.fits(500) && !b.fits(501));
        assert_eq!(b.head_len(2), Some(500));
        assert_eq!(b.pop(2).unwrap().len(), 500);
        assert_eq!(b.bytes(), 2000);
        assert_eq!(b.voq_bytes(1), 2000);
        assert!(b.voq_is_empty(2));
    }
}
