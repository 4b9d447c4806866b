//! Recycled frame buffers.
//!
//! Queued frames live in `Vec<u8>`s taken from a [`BufPool`] and given back once sent. The pool
//! keeps one free list per power-of-two size class (128 to 16384 octets), so a small frame does
//! not pin a jumbo-sized buffer. Buffers are allocated only while the number of frames held
//! grows beyond anything seen before; in steady state no frame allocates. The free lists never
//! exceed the peak number of buffers in use, itself bounded by the configured queue limits.

const MIN_SHIFT: u32 = 7;
const MAX_SHIFT: u32 = 14;
const CLASSES: usize = (MAX_SHIFT - MIN_SHIFT + 1) as usize;

/// Free lists of frame buffers by size class.
#[derive(Debug, Default)]
pub struct BufPool {
    free: [Vec<Vec<u8>>; CLASSES],
    allocated: u64,
}

fn class_of(len: usize) -> usize {
    let need = len.max(1 << MIN_SHIFT);
    let shift = usize::BITS - (need - 1).leading_zeros();
    (shift.saturating_sub(MIN_SHIFT) as usize).min(CLASSES - 1)
}

impl BufPool {
    /// A buffer holding a copy of `bytes` (callers keep frames ≤ 16384 octets).
    pub fn take(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut b = self.take_empty(bytes.len());
        b.extend_from_slice(bytes);
        b
    }

    /// A buffer holding `headroom` octets (contents unspecified) and then a copy of `bytes`,
    /// taken from the class of `bytes`'s length as [`BufPool::take`] does; given back with
    /// [`BufPool::give_frame_of`] for that length.
    pub fn take_with_headroom(&mut self, bytes: &[u8], headroom: usize) -> Vec<u8> {
        let mut b = self.take_empty(bytes.len());
        b.resize(headroom, 0);
        b.extend_from_slice(bytes);
        b
    }

    /// An empty buffer with room for `len` octets.
    pub fn take_empty(&mut self, len: usize) -> Vec<u8> {
        let c = class_of(len);
        let mut b = match self.free[c].pop() {
            Some(b) => b,
            None => {
                self.allocated += 1;
                Vec::with_capacity((1usize << (c as u32 + MIN_SHIFT)).max(len))
            }
        };
        b.clear();
        b
    }

    /// A spare buffer for a frame of `bytes`'s length taken over in place: `bytes` gets the
    /// spare (contents unspecified; empty when that class's free list is) and its own buffer
    /// is returned. The free lists and [`BufPool::allocated`] move as with [`BufPool::take`]
    /// when the frame's buffer comes back through [`BufPool::give_frame`].
    pub fn exchange(&mut self, bytes: &mut Vec<u8>) -> Vec<u8> {
        let len = bytes.len();
        self.exchange_frame_of(bytes, len)
    }

    /// [`BufPool::exchange`] for a buffer holding a frame of `len` octets after some headroom:
    /// the spare comes from `len`'s class, and the buffer goes back with
    /// [`BufPool::give_frame_of`] for that length.
    pub fn exchange_frame_of(&mut self, bytes: &mut Vec<u8>, len: usize) -> Vec<u8> {
        let c = class_of(len);
        let spare = match self.free[c].pop() {
            Some(b) => b,
            None => {
                self.allocated += 1;
                Vec::new()
            }
        };
        std::mem::replace(bytes, spare)
    }

    /// Gives back a buffer still holding the frame it was taken (or exchanged) for, whatever
    /// its capacity: it is filed under that frame's class, the one it was taken from, so the
    /// free lists move as if every frame had been copied into a pool buffer (a buffer too
    /// small for a later frame grows once when used).
    pub fn give_frame(&mut self, b: Vec<u8>) {
        let len = b.len();
        self.give_frame_of(b, len);
    }

    /// [`BufPool::give_frame`] for a buffer taken for a frame of `len` octets, whatever it
    /// holds now (the frame after headroom, or a spare that replaced the frame's buffer when
    /// the frame left in it): filed under `len`'s class, so the free lists move exactly as
    /// with [`BufPool::give_frame`].
    pub fn give_frame_of(&mut self, b: Vec<u8>, len: usize) {
        self.free[class_of(len)].push(b);
    }

    /// Gives a buffer back.
    pub fn give(&mut self, b: Vec<u8>) {
        if b.capacity() == 0 {
            return;
        }
        // File it under the largest class it can serve.
        let cap = b.capacity();
        let mut c = class_of(cap);
        if (1usize << (c as u32 + MIN_SHIFT)) > cap {
            if c == 0 {
                return;
            }
            c -= 1;
        }
        self.free[c].push(b);
    }

    /// Buffers allocated so far (stays constant in steady state).
    pub fn allocated(&self) -> u64 {
        self.allocated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exchanged_frames_come_back_to_their_class() {
        let mut p = BufPool::default();
        let mut mine = vec![3u8; 1500];
        let b = p.exchange(&mut mine);
        assert_eq!((b.len(), b[0], mine.capacity()), (1500, 3, 0));
        assert_eq!(p.allocated(), 1);
        p.give_frame(b);
        // The empty spare that replaced it goes back in the class of the frame it held.
        let mut next = vec![4u8; 1400];
        let c = p.exchange(&mut next);
        assert_eq!((c.len(), next.len()), (1400, 1500));
        p.give_frame(c);
        let d = p.take(&[5u8; 1500]);
        assert_eq!(d.len(), 1500);
        assert_eq!(p.allocated(), 1);
    }

    #[test]
    fn recycles() {
        let mut p = BufPool::default();
        for _ in 0..10 {
            let a = p.take(&[1u8; 1500]);
            let b = p.take(&[2u8; 60]);
            assert_eq!(a.len(), 1500);
            p.give(a);
            p.give(b);
        }
        assert_eq!(p.allocated(), 2);
    }
}
