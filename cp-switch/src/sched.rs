//! Scheduling: which input feeds an output queue next, and which priority an output port
//! transmits next.
//!
//! **VOQ → output queue** (the fabric). For each (output port, priority) the inputs whose VOQ
//! for that output holds frames form a ring; the fabric serves the ring round-robin, one frame
//! per turn (the round-robin pointer of iSLIP, McKeown, IEEE/ACM ToN 1999, without the request
//! and grant phases, since an emulated fabric has unlimited speedup). A frame moves only when it
//! fits in the output queue; when the head of the current input's VOQ does not fit, the fabric
//! stops for that (output, priority) and waits for the output queue to drain (no smaller frame
//! of a later input overtakes it, so large frames are not starved). The fabric runs whenever a
//! frame enters an empty VOQ and whenever the output queue frees room, so the work per frame is
//! O(1).
//!
//! **Output port → wire** (transmission selection, 802.1Q-2018 clause 8.6.8). Among the
//! priority queues of a port that hold frames and are not stopped by PFC/PAUSE:
//! * strict priority (clause 8.6.8.1): the highest traffic class first, with priorities mapped
//!   to traffic classes by the recommended table for 8 classes (802.1Q-2018 Table 8-5: priority
//!   1 (background) is the lowest class and priority 0 (best effort) the next);
//! * DWRR (deficit round robin, Shreedhar and Varghese, SIGCOMM 1995), the usual realisation of
//!   ETS (clause 8.6.8.3): each visit adds `weight[p] × max_frame` octets of credit to queue p;
//!   a queue sends while its head fits its credit; an emptied queue loses its credit.

use crate::config::{PriorityPolicy, SchedulerConfig, NUM_PRIORITIES};
use std::collections::VecDeque;

/// 802.1Q-2018 Table 8-5, 8 traffic classes: traffic class of each priority.
pub const TRAFFIC_CLASS: [u8; NUM_PRIORITIES] = [1, 0, 2, 3, 4, 5, 6, 7];

/// Priorities from the highest traffic class to the lowest.
const STRICT_ORDER: [usize; NUM_PRIORITIES] = [7, 6, 5, 4, 3, 2, 0, 1];

/// Round-robin ring of inputs with frames waiting for one (output, priority).
#[derive(Debug, Default)]
pub struct InputRing {
    ring: VecDeque<u16>,
}

impl InputRing {
    /// A ring able to hold `ports` inputs without reallocating.
    pub fn new(ports: usize) -> Self {
        InputRing {
            ring: VecDeque::with_capacity(ports),
        }
    }
    /// Adds an input whose VOQ just became non-empty.
    #[inline]
    pub fn join(&mut self, input: u16) {
        self.ring.push_back(input);
    }
    /// The input whose turn it is.
    #[inline]
    pub fn current(&self) -> Option<u16> {
        self.ring.front().copied()
    }
    /// Ends the current input's turn: it goes to the back if it still has frames.
    #[inline]
    pub fn advance(&mut self, still_backlogged: bool) {
        if let Some(i) = self.ring.pop_front() {
            if still_backlogged {
                self.ring.push_back(i);
            }
        }
    }
    /// Removes an input (its VOQ was flushed).
    pub fn remove(&mut self, input: u16) {
        self.ring.retain(|&i| i != input);
    }
    /// No input waiting.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }
}

/// Transmission selection state of one output port.
#[derive(Debug, Clone)]
pub struct PrioritySelector {
    policy: PriorityPolicy,
    quantum: [u64; NUM_PRIORITIES],
    deficit: [u64; NUM_PRIORITIES],
    cur: usize,
    fresh: bool,
}

impl PrioritySelector {
    /// A selector; `max_frame` scales the DWRR quanta.
    pub fn new(cfg: &SchedulerConfig, max_frame: u64) -> Self {
        let mut quantum = [0; NUM_PRIORITIES];
        for (q, w) in quantum.iter_mut().zip(cfg.weights) {
            *q = u64::from(w.max(1)) * max_frame;
        }
        PrioritySelector {
            policy: cfg.policy,
            quantum,
            deficit: [0; NUM_PRIORITIES],
            cur: 0,
            fresh: true,
        }
    }

    /// Picks the priority to transmit from. `head(p)` is the head frame length of priority
    /// `p`'s queue if it holds frames and may send now, else `None`.
    #[inline]
    pub fn select(&mut self, head: impl Fn(usize) -> Option<usize>) -> Option<usize> {
        match self.policy {
            PriorityPolicy::Strict => STRICT_ORDER.into_iter().find(|&p| head(p).is_some()),
            PriorityPolicy::Dwrr => {
                // With every quantum ≥ max_frame, any eligible queue is served within one
                // round plus one visit: 2 × 8 + 1 visits always suffice.
                for _ in 0..=2 * NUM_PRIORITIES {
                    let p = self.cur;
                    match head(p) {
                        None => {
                            self.next();
                        }
                        Some(len) => {
                            if self.fresh {
                                self.deficit[p] += self.quantum[p];
                                self.fresh = false;
                            }
                            if len as u64 <= self.deficit[p] {
                                return Some(p);
                            }
                            self.next();
                        }
                    }
                }
                None
            }
        }
    }

    /// Records that `len` octets were sent from `p`; `emptied` if its queue is now empty.
    #[inline]
    pub fn sent(&mut self, p: usize, len: usize, emptied: bool) {
        if self.policy == PriorityPolicy::Dwrr {
            self.deficit[p] = self.deficit[p].saturating_sub(len as u64);
            if emptied {
                self.deficit[p] = 0;
                self.next();
            }
        }
    }

    fn next(&mut self) {
        self.cur = (self.cur + 1) % NUM_PRIORITIES;
        self.fresh = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_round_robin() {
        let mut r = InputRing::new(4);
        r.join(2);
        r.join(0);
        assert_eq!(r.current(), Some(2));
        r.advance(true);
        assert_eq!(r.current(), Some(0));
        r.advance(false);
        assert_eq!(r.current(), Some(2));
        r.remove(2);
        assert!(r.is_empty());
    }

    #[test]
    fn strict_prefers_high_classes() {
        let mut s = PrioritySelector::new(&SchedulerConfig::default(), 1500);
        assert_eq!(s.select(|p| (p <= 1).then_some(100)), Some(0));
        assert_eq!(s.select(|p| (p == 1 || p == 3).then_some(100)), Some(3));
        assert_eq!(s.select(|_| None), None);
    }

    #[test]
    fn dwrr_shares_by_weight() {
        let mut cfg = SchedulerConfig {
            policy: PriorityPolicy::Dwrr,
            ..Default::default()
        };
        cfg.weights[2] = 3;
        let mut s = PrioritySelector::new(&cfg, 1500);
        let mut sent = [0u64; NUM_PRIORITIES];
        for _ in 0..4000 {
            // Priorities 1 and 2 always backlogged with 1000-octet frames.
            let p = s.select(|p| (p == 1 || p == 2).then_some(1000)).unwrap();
            sent[p] += 1000;
            s.sent(p, 1000, false);
        }
        let ratio = sent[2] as f64 / sent[1] as f64;
        assert!((ratio - 3.0).abs() < 0.05, "ratio {ratio}");
    }
}
