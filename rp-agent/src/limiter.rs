//! Byte-accurate pacers: one per rate-limited flow at its current rate CR, and one for the
//! uplink at the line rate.
//!
//! A pacer at rate `R` lets a frame of `L` octets start when `next_free ≤ now` and then moves
//! `next_free` on by `L' · 8 / R`, where `L'` is the frame's cost on the line
//! ([`Pacer::wire_bytes`]: padded to 60 octets, plus FCS and preamble/SFD/IPG when
//! `wire_overhead` is set, 802.3 clauses 3.1.1, 4.2.3.3, 4.4.2). The start of a frame is
//! `max(next_free, now − catch_up)`: a poll that comes late is back-dated so the long-run rate
//! stays exact (a burst of at most `catch_up` of line time), but a pacer that went idle never
//! banks credit older than `catch_up`. The division `L' · 8 · 10⁹ / R` keeps its remainder for
//! the next frame, so rounding never accumulates. This is the same arithmetic as the switch's
//! line emulation, so the agent's notion of "line rate" and the switch's agree to the octet.
//!
//! A flow with no limiter is not paced by itself; every frame of every flow goes through the
//! uplink pacer, which the agent serves round-robin across backlogged flows
//! ([`crate::Agent::poll_uplink`]).

use cnm_proto::{Bytes, Duration, Instant, Rate};

/// Preamble + SFD + minimum inter-packet gap (802.3 clauses 3.1.1, 4.4.2).
pub const WIRE_OVERHEAD: u64 = 20;
/// Frame check sequence (802.3 clause 3.2.9).
pub const FCS_LEN: u64 = 4;
/// Minimum frame without FCS (802.3 clause 4.2.3.3).
pub const MIN_FRAME: u64 = 60;

/// One pacer.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: Rate,
    next_free: Instant,
    /// Fraction of a nanosecond owed by `next_free`, in units of 1/rate ns (`0..rate`).
    rem: u64,
    wire_overhead: bool,
    catch_up: Duration,
}

impl Pacer {
    /// A pacer at `rate`, free from the start of time.
    pub fn new(rate: Rate, wire_overhead: bool, catch_up: Duration) -> Pacer {
        Pacer {
            rate,
            next_free: Instant::ZERO,
            rem: 0,
            wire_overhead,
            catch_up,
        }
    }

    /// The pacing rate.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// Changes the rate; the frame already paced keeps its departure time.
    pub fn set_rate(&mut self, rate: Rate) {
        if rate != self.rate {
            self.rate = rate;
            self.rem = 0;
        }
    }

    /// Octets a frame of `len` octets occupies on the line.
    #[inline]
    pub fn wire_bytes(&self, len: usize) -> Bytes {
        let l = len as u64;
        if self.wire_overhead {
            Bytes::new(l.max(MIN_FRAME) + FCS_LEN + WIRE_OVERHEAD)
        } else {
            Bytes::new(l)
        }
    }

    /// Earliest instant the next frame may start.
    #[inline]
    pub fn next_free(&self) -> Instant {
        self.next_free
    }

    /// Whether a frame may start at `now`.
    #[inline]
    pub fn may_start(&self, now: Instant) -> bool {
        self.next_free <= now
    }

    /// A frame became ready at `now` for a pacer with nothing queued: the pacer may not
    /// back-date a departure before it (credit is not banked across idle periods).
    pub fn wake(&mut self, now: Instant) {
        if self.next_free < now {
            self.next_free = now;
            self.rem = 0;
        }
    }

    /// Records a frame of `len` octets starting now (call when [`Pacer::may_start`] holds, or
    /// to charge a frame that had to go anyway). Returns its (possibly back-dated) start.
    pub fn start(&mut self, now: Instant, len: usize) -> Instant {
        let floor = Instant::from_nanos(now.as_nanos().saturating_sub(self.catch_up.as_nanos()));
        let start = if self.next_free >= floor {
            self.next_free
        } else {
            self.rem = 0;
            floor
        };
        let r = u128::from(self.rate.bps().max(1));
        let total =
            u128::from(self.wire_bytes(len).get()) * 8 * 1_000_000_000 + u128::from(self.rem);
        let ns = u64::try_from(total / r).unwrap_or(u64::MAX);
        // The remainder is below `r`, itself a u64.
        self.rem = (total % r) as u64;
        self.next_free = start.saturating_add(Duration::from_nanos(ns));
        start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_long_run_rate_and_bounded_catch_up() {
        let mut p = Pacer::new(Rate::from_gbps(1), true, Duration::from_micros(100));
        // 1476 + 4 + 20 = 1500 octets = 12 µs at 1 Gb/s.
        let t0 = Instant::from_nanos(1_000_000);
        p.wake(t0 - Duration::from_micros(30));
        // Polled 30 µs late: back-dated to when the frame became ready.
        assert_eq!(p.start(t0, 1476), t0 - Duration::from_micros(30));
        // A backlog polled 500 µs late: back-dated by at most `catch_up`.
        let late = t0 + Duration::from_micros(500);
        assert_eq!(p.start(late, 1476), late - Duration::from_micros(100));
        let mut p = Pacer::new(Rate::from_gbps(1), true, Duration::ZERO);
        assert_eq!(p.start(t0, 1476), t0);
        assert_eq!(p.next_free(), t0 + Duration::from_micros(12));
        assert!(!p.may_start(t0 + Duration::from_micros(11)));
        // 64-octet frames at 100 Gb/s cost 88 octets = 7.04 ns: no accumulated rounding.
        let mut f = Pacer::new(Rate::from_gbps(100), true, Duration::ZERO);
        let t = Instant::from_nanos(0);
        for _ in 0..100 {
            f.start(t, 64);
        }
        assert_eq!(f.next_free(), t + Duration::from_nanos(704));
        assert_eq!(f.wire_bytes(10), Bytes::new(84));
        let raw = Pacer::new(Rate::from_gbps(1), false, Duration::ZERO);
        assert_eq!(raw.wire_bytes(10), Bytes::new(10));
    }
}
