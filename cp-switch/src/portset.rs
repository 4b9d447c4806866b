//! A set of port indices kept as a bitmap, visited in ascending order.
//!
//! The bridge serves (`poll_transmit`) and asks for deadlines (`poll_timeout`) only on its
//! *busy* ports, and both run once per frame or more. With one flag per port every call tests
//! every port, busy or not; with one bit per port a call skips 64 idle ports with one word test
//! and finds each busy one with one `trailing_zeros`, so its cost follows the busy ports, not
//! the port count. Ports are visited in ascending index order either way, so which port is
//! served first does not change.

/// A set of port indices below a fixed bound.
#[derive(Debug, Clone)]
pub struct PortSet {
    words: Vec<u64>,
    len: usize,
}

impl PortSet {
    /// A set for ports `0..len`: all of them when `full`, none otherwise.
    pub fn new(len: usize, full: bool) -> Self {
        let mut s = PortSet {
            words: vec![0; len.div_ceil(64)],
            len,
        };
        if full {
            s.fill();
        }
        s
    }

    /// Adds every port `0..len`.
    pub fn fill(&mut self) {
        for (w, word) in self.words.iter_mut().enumerate() {
            let left = self.len - w * 64;
            *word = if left >= 64 {
                u64::MAX
            } else {
                (1 << left) - 1
            };
        }
    }

    /// Adds port `i` (ignored at or above the bound).
    #[inline]
    pub fn insert(&mut self, i: usize) {
        if i >= self.len {
            return;
        }
        if let Some(w) = self.words.get_mut(i / 64) {
            *w |= 1 << (i % 64);
        }
    }

    /// Removes port `i`.
    #[inline]
    pub fn remove(&mut self, i: usize) {
        if let Some(w) = self.words.get_mut(i / 64) {
            *w &= !(1 << (i % 64));
        }
    }

    /// Port `i` is in the set.
    #[inline]
    pub fn contains(&self, i: usize) -> bool {
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// The smallest port in the set at or above `from`, read from the set as it is now (a
    /// caller changing the set between calls sees its changes).
    #[inline]
    pub fn next_from(&self, from: usize) -> Option<usize> {
        let mut w = from / 64;
        let mut word = self.words.get(w)? & (u64::MAX << (from % 64));
        loop {
            if word != 0 {
                return Some(w * 64 + word.trailing_zeros() as usize);
            }
            w += 1;
            word = *self.words.get(w)?;
        }
    }

    /// The ports in the set, ascending.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(w * 64 + b)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_in_ascending_order_across_words() {
        let mut s = PortSet::new(130, false);
        assert_eq!(s.iter().count(), 0);
        assert_eq!(s.next_from(0), None);
        for i in [129, 3, 64, 63, 0] {
            s.insert(i);
        }
        // Out of bounds: ignored.
        s.insert(192);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 3, 63, 64, 129]);
        assert!(s.contains(63) && s.contains(64) && !s.contains(65) && !s.contains(192));
        assert_eq!(s.next_from(0), Some(0));
        assert_eq!(s.next_from(1), Some(3));
        assert_eq!(s.next_from(4), Some(63));
        assert_eq!(s.next_from(64), Some(64));
        assert_eq!(s.next_from(65), Some(129));
        assert_eq!(s.next_from(130), None);
        assert_eq!(s.next_from(1000), None);
        s.remove(3);
        s.remove(64);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 63, 129]);
        assert_eq!(s.next_from(1), Some(63));
        assert_eq!(s.next_from(64), Some(129));
    }

    #[test]
    fn fill_stops_at_the_bound() {
        // 70 ports: all 64 bits of word 0, the low 6 of word 1.
        let s = PortSet::new(70, true);
        assert_eq!(s.words, vec![u64::MAX, 0x3F]);
        assert_eq!(s.iter().count(), 70);
        assert_eq!(s.next_from(69), Some(69));
        assert_eq!(PortSet::new(64, true).words, vec![u64::MAX]);
        assert_eq!(
            PortSet::new(5, true).iter().collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 4]
        );
        assert_eq!(PortSet::new(0, true).next_from(0), None);
        // A port at or above the bound is not added, though its word has the bit.
        let mut s = PortSet::new(5, false);
        s.insert(5);
        s.insert(63);
        s.insert(64);
        assert_eq!(s.words, vec![0]);
        assert_eq!(s.next_from(0), None);
    }

    #[test]
    fn a_walk_sees_members_added_ahead_of_it() {
        // poll_transmit serves busy ports in order; serving port 1 may make port 3 busy
        // (a PAUSE or CNM queued for it), which the same walk then reaches.
        let mut s = PortSet::new(5, false);
        s.insert(1);
        let mut seen = Vec::new();
        let mut from = 0;
        while let Some(o) = s.next_from(from) {
            seen.push(o);
            if o == 1 {
                s.insert(3);
                s.insert(0);
            }
            s.remove(o);
            from = o + 1;
        }
        assert_eq!(seen, vec![1, 3]);
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![0],
            "behind the walk: kept"
        );
    }
}
