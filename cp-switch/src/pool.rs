//! Frame buffers and their recycling pool.
//!
//! Every frame the bridge holds lives in a [`Frame`], whose bytes are a `Vec<u8>` taken from a
//! [`FramePool`] and given back when the frame leaves (transmitted or dropped). The pool keeps
//! one free list per size class (powers of two from 128 to 16384 octets), so a 64-octet frame
//! does not pin a jumbo-sized buffer. Buffers are only allocated while the number of frames in
//! flight grows beyond anything seen before; in steady state every frame reuses a buffer and no
//! heap allocation happens. Memory stays bounded by configuration: the queues are bounded in
//! bytes, and a buffer's capacity is at most `max(128, 2 × len)` for a frame of `len` octets,
//! so the buffers in use (and the free lists, which never exceed the peak in use) are at most
//! `128 / 14 ≈ 9×` the configured queue bytes for pathological 14-octet frames and about
//! 2× for real traffic.

use cnm_proto::Instant;

/// Smallest size class (octets).
const MIN_CLASS_SHIFT: u32 = 7;
/// Largest size class: 16384 octets.
const MAX_CLASS_SHIFT: u32 = 14;
const NUM_CLASSES: usize = (MAX_CLASS_SHIFT - MIN_CLASS_SHIFT + 1) as usize;

/// A frame held by the bridge.
#[derive(Debug)]
pub struct Frame {
    /// The frame's bytes (destination address first, no FCS).
    pub buf: Vec<u8>,
    /// When it entered its current queue.
    pub ts: Instant,
    /// Port it was received on (`u16::MAX` for frames the bridge built itself).
    pub ingress: u16,
    /// Never sampled by a congestion point: a CNM, MAC-control or rate-feedback frame, or one
    /// with a group source address.
    pub cn_exempt: bool,
    /// Flow-table index of the frame at the congestion point of the queue it sits in, when
    /// that CP accounts per-flow occupancy (`crate::cp::NO_FLOW` otherwise).
    pub flow: u16,
}

impl Frame {
    /// Length in octets.
    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    /// True for an empty frame (never queued by the bridge).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// Free lists of frame buffers by size class.
#[derive(Debug)]
pub struct FramePool {
    free: [Vec<Vec<u8>>; NUM_CLASSES],
    allocated: u64,
}

impl Default for FramePool {
    fn default() -> Self {
        Self::new()
    }
}

#[inline]
fn class_of(len: usize) -> usize {
    let need = len.max(1 << MIN_CLASS_SHIFT);
    let shift = usize::BITS - (need - 1).leading_zeros();
    (shift.saturating_sub(MIN_CLASS_SHIFT) as usize).min(NUM_CLASSES - 1)
}

impl FramePool {
    /// An empty pool.
    pub fn new() -> Self {
        FramePool {
            free: Default::default(),
            allocated: 0,
        }
    }

    /// A frame holding a copy of `bytes`, or `None` when `bytes` is longer than the largest
    /// class (16384 octets).
    #[inline]
    pub fn frame(&mut self, bytes: &[u8], ts: Instant, ingress: u16) -> Option<Frame> {
        if bytes.len() > 1 << MAX_CLASS_SHIFT {
            return None;
        }
        let c = class_of(bytes.len());
        let mut buf = match self.free[c].pop() {
            Some(b) => b,
            None => {
                self.allocated += 1;
                Vec::with_capacity(1 << (c as u32 + MIN_CLASS_SHIFT))
            }
        };
        buf.clear();
        buf.extend_from_slice(bytes);
        Some(Frame {
            buf,
            ts,
            ingress,
            cn_exempt: false,
            flow: u16::MAX,
        })
    }

    /// A zero-filled frame of `len` octets to build into (control frames).
    pub fn blank(&mut self, len: usize, ts: Instant) -> Option<Frame> {
        if len > 1 << MAX_CLASS_SHIFT {
            return None;
        }
        let c = class_of(len);
        let mut buf = match self.free[c].pop() {
            Some(b) => b,
            None => {
                self.allocated += 1;
                Vec::with_capacity(1 << (c as u32 + MIN_CLASS_SHIFT))
            }
        };
        buf.clear();
        buf.resize(len, 0);
        Some(Frame {
            buf,
            ts,
            ingress: u16::MAX,
            cn_exempt: true,
            flow: u16::MAX,
        })
    }

    /// Gives a frame's buffer back.
    #[inline]
    pub fn recycle(&mut self, f: Frame) {
        let cap = f.buf.capacity();
        if cap < 1 << MIN_CLASS_SHIFT {
            return;
        }
        // The class whose size is at most the capacity, so a reused buffer always fits.
        let shift = usize::BITS - 1 - cap.leading_zeros();
        let c = (shift.saturating_sub(MIN_CLASS_SHIFT) as usize).min(NUM_CLASSES - 1);
        self.free[c].push(f.buf);
    }

    /// Buffers allocated so far (grows only while the peak number of frames held grows).
    pub fn allocated(&self) -> u64 {
        self.allocated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(class_of(0), 0);
        assert_eq!(class_of(60), 0);
        assert_eq!(class_of(128), 0);
        assert_eq!(class_of(129), 1);
        assert_eq!(class_of(1514), 4);
        assert_eq!(class_of(16384), NUM_CLASSES - 1);
    }

    #[test]
    fn recycles_without_allocating() {
        let mut p = FramePool::new();
        let f = p.frame(&[1u8; 1500], Instant::ZERO, 0).unwrap();
        assert_eq!(f.len(), 1500);
        p.recycle(f);
        for _ in 0..100 {
            let f = p.frame(&[2u8; 1400], Instant::ZERO, 0).unwrap();
            assert_eq!(f.buf[0], 2);
            p.recycle(f);
        }
        assert_eq!(p.allocated(), 1);
        assert!(p.frame(&vec![0u8; 20000], Instant::ZERO, 0).is_none());
    }
}
