//! Input buffers with virtual output queues (VOQs).
//!
//! Combined input-output queueing (CIOQ; McKeown et al., "Achieving 100% throughput in an
//! input-queued switch", IEEE Trans. Commun. 1999, introduce VOQs to remove head-of-line
//! blocking). Each input port has, per priority, one shared buffer of `buffers.input` octets
//! (default 150 KB, the QCN baseline switch) holding one FIFO per output port. Because every
//! output has its own FIFO, a frame for a congested output never waits behind frames for
//! another output: only the shared byte budget is common.
//!
//! # Admission: a dynamic threshold per VOQ
//! A shared budget alone lets one stalled output take all of it: an output stopped by a PAUSE
//! flood, or a slow port receiving flooded copies, fills its VOQ until the whole input buffer
//! is full, and then every other flow of that input is dropped too. Each VOQ's share is
//! therefore bounded by the dynamic threshold of Choudhury and Hahne ("Dynamic queue length
//! thresholds for shared-memory packet switches", IEEE/ACM Trans. Networking 6(2), 1998): a
//! queue may grow only while its length is below `α × (B − Q)`, where `B` is the buffer size,
//! `Q` the occupancy of the whole buffer and `α` = `buffers.voq_alpha`. A frame of `len`
//! octets for output `o` is admitted when
//!
//! * `Q + len ≤ B` (it fits the shared buffer, as before), and
//! * `q_o < α × (B − Q)` (its VOQ is below the threshold; the paper's rule, checked before the
//!   frame is added, so that an empty VOQ always admits a frame that fits).
//!
//! With `n` VOQs backlogged the threshold settles where each holds `α·B / (1 + n·α)` and
//! `B / (1 + n·α)` stays free for queues that become active. With the default `α = 2` one
//! stalled VOQ holds at most about two thirds of the buffer (100 KB of 150 KB) and a third stays
//! for the other outputs; `α = 0` turns the threshold off (the plain shared drop-tail buffer).
//! A refused frame is counted `input_full` like one that did not fit.
//!
//! In lossless mode (PAUSE/PFC) the threshold is not applied: a frame from a peer that honours
//! XOFF must never be dropped, and PFC pauses a whole priority of the input anyway. There one
//! stalled output is bounded by the storm watchdog ([`crate::pause::PauseRx`]), which drops what
//! waits for an output paused longer than `lossless.watchdog`.
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
    /// Octets in each VOQ.
    voq_len: Vec<u64>,
    bytes: u64,
    frames: usize,
    max: u64,
    /// Dynamic-threshold factor α (0: no per-VOQ bound).
    alpha: f64,
    /// Counters.
    pub counters: QueueCounters,
}

impl InputBuffer {
    /// A buffer of `max` octets with one VOQ for each of `ports` outputs and no per-VOQ bound.
    pub fn new(ports: usize, max: u64) -> Self {
        InputBuffer {
            voqs: (0..ports).map(|_| VecDeque::new()).collect(),
            voq_len: vec![0; ports],
            bytes: 0,
            frames: 0,
            max,
            alpha: 0.0,
            counters: QueueCounters::default(),
        }
    }

    /// Builder: bounds each VOQ by the dynamic threshold `alpha × (free octets)`; 0 (or a value
    /// that is not a positive finite number) turns the bound off.
    pub fn with_alpha(mut self, alpha: f64) -> Self {
        self.alpha = if alpha.is_finite() && alpha > 0.0 {
            alpha
        } else {
            0.0
        };
        self
    }

    /// Whether `len` more octets fit the shared buffer.
    #[inline]
    pub fn fits(&self, len: usize) -> bool {
        self.bytes + len as u64 <= self.max
    }

    /// Whether a frame of `len` octets for output `out` is admitted: it fits the shared buffer
    /// and the VOQ of `out` is below its dynamic threshold `α × (B − Q)` (module essay).
    #[inline]
    pub fn admits(&self, out: usize, len: usize) -> bool {
        if !self.fits(len) {
            return false;
        }
        if self.alpha == 0.0 {
            return true;
        }
        let q = self.voq_len.get(out).copied().unwrap_or(0);
        // Both sides are below 2^53 for any buffer the configuration accepts: exact in f64.
        (q as f64) < self.alpha * (self.max - self.bytes) as f64
    }

    /// The VOQ's dynamic threshold now (octets; `None` when the bound is off).
    pub fn threshold(&self) -> Option<u64> {
        (self.alpha > 0.0).then(|| (self.alpha * (self.max - self.bytes) as f64) as u64)
    }

    /// Counts a frame of `len` octets (admitted: the caller checked [`InputBuffer::admits`])
    /// that enters the buffer and leaves it at once, as [`InputBuffer::push`] then
    /// [`InputBuffer::pop`] of that frame would: enqueued and dequeued, the peak taking the
    /// occupancy it had in between. The bridge's cut-through for a frame nothing waits ahead
    /// of (`crate::bridge`).
    #[inline]
    pub fn pass(&mut self, len: usize) {
        let len = len as u64;
        self.counters.enq_frames += 1;
        self.counters.enq_bytes += len;
        self.counters.peak_bytes = self.counters.peak_bytes.max(self.bytes + len);
        self.counters.deq_frames += 1;
    }

    /// Appends a frame to the VOQ of output `out` (caller checked [`InputBuffer::admits`]).
    /// Returns true if that VOQ was empty before.
    #[inline]
    pub fn push(&mut self, out: usize, f: Frame) -> bool {
        let len = f.len() as u64;
        self.bytes += len;
        self.frames += 1;
        self.counters.enq_frames += 1;
        self.counters.enq_bytes += len;
        self.counters.peak_bytes = self.counters.peak_bytes.max(self.bytes);
        self.voq_len[out] += len;
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
        self.voq_len[out] -= f.len() as u64;
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
        self.voq_len.get(out).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::FramePool;
    use cnm_proto::Instant;

    #[test]
    fn a_frame_passing_through_counts_as_push_then_pop() {
        let mut p = FramePool::new();
        let f = |p: &mut FramePool, n: usize| p.frame(&vec![0; n], Instant::ZERO, 0).unwrap();
        let mut a = InputBuffer::new(2, 3000);
        let mut b = InputBuffer::new(2, 3000);
        for q in [&mut a, &mut b] {
            q.push(0, f(&mut p, 1000));
        }
        // 1000 octets held; a 1500-octet frame through: peak 2500, held 1000 again.
        b.pass(1500);
        a.push(1, f(&mut p, 1500));
        let _ = a.pop(1);
        for q in [&a, &b] {
            assert_eq!(q.bytes(), 1000);
            assert_eq!(q.frames(), 1);
            assert_eq!(q.voq_bytes(1), 0);
            assert_eq!((q.counters.enq_frames, q.counters.enq_bytes), (2, 2500));
            assert_eq!(q.counters.deq_frames, 1);
            assert_eq!(q.counters.peak_bytes, 2500);
        }
    }

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

    #[test]
    fn dynamic_threshold_bounds_one_voq() {
        // B = 3000, α = 1: a lone VOQ grows while q < 3000 − q, i.e. up to 1500 (admitted at
        // q = 1000 < 2000, refused at q = 1500 = 3000 − 1500); another VOQ then still has
        // room: 0 < 1 × 1500.
        let mut p = FramePool::new();
        let mut b = InputBuffer::new(3, 3000).with_alpha(1.0);
        let f = |p: &mut FramePool, n: usize| p.frame(&vec![0; n], Instant::ZERO, 0).unwrap();
        for _ in 0..3 {
            assert!(b.admits(1, 500));
            b.push(1, f(&mut p, 500));
        }
        assert_eq!(b.threshold(), Some(1500));
        assert!(!b.admits(1, 500), "q = 1500 is not below 1 × (3000 − 1500)");
        assert!(b.fits(500));
        assert!(b.admits(2, 500));
        b.push(2, f(&mut p, 500));
        // Q = 2000: threshold 1000; VOQ 2 (500) still grows once, VOQ 1 (1500) not.
        assert!(b.admits(2, 500) && !b.admits(1, 1));
        assert_eq!((b.voq_bytes(1), b.voq_bytes(2)), (1500, 500));
        // Draining VOQ 1 raises the threshold again.
        b.pop(1);
        b.pop(1);
        assert!(b.admits(1, 500));
        // α = 0: only the shared budget.
        let b = InputBuffer::new(2, 3000).with_alpha(0.0);
        assert!(b.admits(0, 3000) && !b.admits(0, 3001));
        assert_eq!(b.threshold(), None);
    }
}
