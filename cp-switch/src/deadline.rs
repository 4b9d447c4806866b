//! The bridge's earliest deadline, cached per port.
//!
//! [`crate::Bridge::poll_timeout`] answers "when is anything next due": the earliest of every
//! busy port's deadlines (PAUSE refresh, storm watchdog, neighbour expiry, control frames to
//! send, delay line, the head of each backlogged output queue behind its shaper and any PAUSE
//! received) and of the bridge-wide timers. A driver asks after every frame it hands in or
//! takes out, so recomputing all ports each time costs O(ports × priorities) per frame while a
//! frame changes the state of one or two ports.
//!
//! [`DeadlineCache`] keeps one [`Due`] per port and their minimum. A port's slot is *stale*
//! from the moment anything its deadline depends on may have changed until the next query,
//! which recomputes the stale slots only; a query with nothing stale is one load. The rule the
//! bridge follows: **every change of a port's state that
//! `Bridge::poll_timeout` reads marks that port stale**, at the same places it marks the port
//! busy, plus wherever serving a port changes it (a frame sent or delayed, a PAUSE refreshed,
//! the storm watchdog of a port not at rest, the port going idle) or it loses its neighbour
//! entry; run-time changes of a port's link mark every port. A port the driver polls before
//! anything of it is due is left as it was, so a poll costs a recomputation only for the
//! ports that did something. The slots are pure functions of the port's state, so
//! recomputing at query time instead of at the change gives the same answer as recomputing
//! every port at every query (the bridge's tests check the two against each other).
//!
//! The one input that moves without any port changing is the bridge's latest `now`: a port
//! with control frames waiting is due "at once", i.e. at that `now` (as [`Due::asap`]), which
//! the query reads fresh. The bridge-wide timers (explicit-rate intervals, LLDP) are read
//! fresh too.

use cnm_proto::Instant;
use std::cell::Cell;

/// What one port (or the minimum over ports) has due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Due {
    /// The earliest instant anything is due, if anything is.
    pub at: Option<Instant>,
    /// Something is due at once (control frames waiting): at the bridge's latest `now`.
    pub asap: bool,
}

impl Due {
    /// Nothing due.
    pub const NONE: Due = Due {
        at: None,
        asap: false,
    };

    /// Adds a deadline at `t`.
    #[inline]
    pub fn consider(&mut self, t: Instant) {
        self.at = Some(self.at.map_or(t, |b| b.min(t)));
    }

    /// The earlier of both (at once if either is).
    #[inline]
    pub fn min(self, other: Due) -> Due {
        let mut d = Due {
            at: self.at,
            asap: self.asap || other.asap,
        };
        if let Some(t) = other.at {
            d.consider(t);
        }
        d
    }
}

/// Per-port deadlines and their minimum, recomputed lazily (see the module essay).
#[derive(Debug)]
pub(crate) struct DeadlineCache {
    slots: Vec<Cell<Due>>,
    stale: Vec<Cell<bool>>,
    /// The minimum over `slots`, `None` when some slot is stale.
    total: Cell<Option<Due>>,
}

impl DeadlineCache {
    /// A cache for `n` ports, every slot stale.
    pub fn new(n: usize) -> DeadlineCache {
        DeadlineCache {
            slots: vec![Cell::new(Due::NONE); n],
            stale: vec![Cell::new(true); n],
            total: Cell::new(None),
        }
    }

    /// Port `o`'s deadline may have moved. (Through a shared reference, so the bridge can
    /// mark while it holds one of its ports mutably.)
    #[inline]
    pub fn invalidate(&self, o: usize) {
        if let Some(s) = self.stale.get(o) {
            s.set(true);
            self.total.set(None);
        }
    }

    /// Every port's deadline may have moved.
    pub fn invalidate_all(&self) {
        for s in &self.stale {
            s.set(true);
        }
        self.total.set(None);
    }

    /// The minimum over the ports, recomputing the stale slots with `due`.
    #[inline]
    pub fn get(&self, due: impl Fn(usize) -> Due) -> Due {
        if let Some(t) = self.total.get() {
            return t;
        }
        let mut t = Due::NONE;
        for (o, (slot, stale)) in self.slots.iter().zip(&self.stale).enumerate() {
            if stale.get() {
                slot.set(due(o));
                stale.set(false);
            }
            t = t.min(slot.get());
        }
        self.total.set(Some(t));
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ns: u64) -> Due {
        Due {
            at: Some(Instant::from_nanos(ns)),
            asap: false,
        }
    }

    #[test]
    fn min_of_dues() {
        assert_eq!(at(5).min(at(3)), at(3));
        assert_eq!(at(3).min(Due::NONE), at(3));
        assert_eq!(Due::NONE.min(at(7)), at(7));
        let now = Due {
            at: None,
            asap: true,
        };
        assert_eq!(
            now.min(at(4)),
            Due {
                at: Some(Instant::from_nanos(4)),
                asap: true
            }
        );
        assert_eq!(Due::NONE.min(Due::NONE), Due::NONE);
    }

    #[test]
    fn recomputes_only_stale_slots() {
        // Three ports due at 30, 10, 20 ns: the minimum is 10.
        let state = [Cell::new(30u64), Cell::new(10), Cell::new(20)];
        let calls = Cell::new(0);
        let due = |o: usize| {
            calls.set(calls.get() + 1);
            at(state[o].get())
        };
        let c = DeadlineCache::new(3);
        assert_eq!(c.get(due), at(10));
        assert_eq!(calls.get(), 3);
        // Nothing changed: no port is looked at.
        assert_eq!(c.get(due), at(10));
        assert_eq!(calls.get(), 3);
        // Port 0 moves earlier, to 5: seen once it is marked, and only it is recomputed.
        state[0].set(5);
        c.invalidate(0);
        assert_eq!(c.get(due), at(5));
        assert_eq!(calls.get(), 4);
        // Port 0 moves later, to 40: the minimum falls back to port 1's 10.
        state[0].set(40);
        c.invalidate(0);
        assert_eq!(c.get(due), at(10));
        assert_eq!(calls.get(), 5);
        // A change left unmarked is not seen: the cache trusts the marks.
        state[2].set(1);
        assert_eq!(c.get(due), at(10));
        c.invalidate_all();
        assert_eq!(c.get(due), at(1));
        assert_eq!(calls.get(), 8);
        // Marking a port that does not exist changes nothing.
        c.invalidate(9);
        assert_eq!(c.get(due), at(1));
        assert_eq!(calls.get(), 8);
    }
}
