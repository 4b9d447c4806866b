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
//!
//! # Frames that arrive in the caller's buffer
//! [`FramePool::take`] moves a frame the caller owns into the bridge and hands the caller a
//! spare buffer from the free list in exchange (a driver that recycles its buffers, such as
//! the simulator, then copies no frame octet); a frame handed out by
//! [`crate::Bridge::poll_transmit_buf`] may likewise leave in the caller's spare. Every buffer
//! therefore returns to the free list of the class it was taken from ([`Frame`] remembers it),
//! whatever its capacity: the free lists and the count of buffers brought in evolve exactly as
//! if every frame had been copied, and a spare too small for a later frame grows once on use.

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
    /// Offset of the frame's CN-TAG as classified on arrival (802.1Q clause 33.3), 0 when it
    /// has none (a CN-TAG follows at least the two addresses, so 0 is never an offset): a port
    /// that removes CN-TAGs cuts there without walking the headers again.
    pub cn_tag: u16,
    /// The free list the buffer returns to.
    class: u8,
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
            cn_tag: 0,
            class: c as u8,
        })
    }

    /// A frame made of the caller's buffer `bytes`, which gets a spare buffer of the frame's
    /// class in exchange (contents unspecified; empty when the free list is), or `None` (and
    /// `bytes` left alone) when the frame is longer than the largest class (16384 octets).
    /// The free lists and [`FramePool::allocated`] move as with [`FramePool::frame`].
    #[inline]
    pub fn take(&mut self, bytes: &mut Vec<u8>, ts: Instant, ingress: u16) -> Option<Frame> {
        if bytes.len() > 1 << MAX_CLASS_SHIFT {
            return None;
        }
        let c = class_of(bytes.len());
        let spare = match self.free[c].pop() {
            Some(b) => b,
            None => {
                self.allocated += 1;
                Vec::new()
            }
        };
        Some(Frame {
            buf: std::mem::replace(bytes, spare),
            ts,
            ingress,
            cn_exempt: false,
            flow: u16::MAX,
            cn_tag: 0,
            class: c as u8,
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
            cn_tag: 0,
            class: c as u8,
        })
    }

    /// Gives a frame's buffer back, to the free list it was taken from (a buffer exchanged
    /// on the way out included: it may then need to grow when next used).
    #[inline]
    pub fn recycle(&mut self, f: Frame) {
        self.free[usize::from(f.class)].push(f.buf);
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

    #[test]
    fn taken_buffers_are_exchanged_and_counted_like_copies() {
        let mut p = FramePool::new();
        let mut mine = vec![7u8; 1500];
        let f = p.take(&mut mine, Instant::ZERO, 3).unwrap();
        // Nothing free yet: the caller gets an empty spare, and one buffer is counted.
        assert_eq!((f.len(), f.buf[0], f.ingress), (1500, 7, 3));
        assert!(mine.is_empty() && mine.capacity() == 0);
        assert_eq!(p.allocated(), 1);
        // Handed out in exchange for the caller's empty buffer: that one is filed in the
        // frame's class, so the next 1500-octet frame finds it and nothing is counted.
        let mut f = f;
        let out = std::mem::take(&mut f.buf);
        assert_eq!(out.len(), 1500);
        p.recycle(f);
        let mut next = vec![9u8; 1400];
        let g = p.take(&mut next, Instant::ZERO, 0).unwrap();
        assert_eq!((g.len(), g.buf[0]), (1400, 9));
        assert_eq!(p.allocated(), 1);
        // A copy into a recycled buffer too small for it grows the buffer, keeps the count.
        p.recycle(g);
        let h = p.frame(&[5u8; 1500], Instant::ZERO, 0).unwrap();
        assert_eq!((h.len(), h.buf[1499]), (1500, 5));
        assert_eq!(p.allocated(), 1);
        // Too long: refused, the caller keeps its frame.
        let mut big = vec![0u8; 20000];
        assert!(p.take(&mut big, Instant::ZERO, 0).is_none());
        assert_eq!(big.len(), 20000);
    }
}
