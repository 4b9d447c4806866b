//! Byte-accurate pacers: one per rate-limited flow at its current rate CR, and one for the
//! uplink at the line rate.
//!
//! A pacer is a [`cnm_proto::line::LineClock`], the same line clock as the switch's line
//! emulation, so the agent's notion of "line rate" and the switch's agree to the octet. A pacer
//! at rate `R` lets a frame of `L` octets start when `next_free ≤ now` and then moves
//! `next_free` on by `L' · 8 / R`, where `L'` is the frame's cost on the line
//! ([`Pacer::wire_bytes`]: padded to 60 octets, plus FCS and preamble/SFD/IFG when
//! `wire_overhead` is set, 802.3 clauses 3.1.1, 3.2.9, 4.4.2). The start of a frame is the line
//! clock's one rule, `max(next_free, ready, now − catch_up)`, with `ready` given by
//! [`Pacer::wake`] when a flow's queue goes from empty to backlogged: a poll that comes late is
//! back-dated so the long-run rate stays exact (a burst of at most `catch_up` of line time),
//! and a pacer that went idle never banks credit.
//!
//! Two kinds of rate change. The uplink's line rate ([`Pacer::set_line_rate`], `ctl set rate`)
//! changes like a line's: the rest of the frame in flight goes at the new rate, so a line set
//! to 1 bit/s and back is not held for hours by the frame that started meanwhile. A flow's CR
//! ([`Pacer::set_rate`], after each CNM or rate increase) governs the gap after the frame
//! already paced, which keeps its departure (CR never falls below `rpg_min_rate`).
//!
//! A flow with no limiter is not paced by itself; every frame of every flow goes through the
//! uplink pacer, which the agent serves round-robin across backlogged flows
//! ([`crate::Agent::poll_uplink`]).

use cnm_proto::line::{LineClock, Overheads};
use cnm_proto::{Bytes, Duration, Instant, Rate};

/// One pacer.
#[derive(Debug, Clone)]
pub struct Pacer {
    clock: LineClock,
}

impl Pacer {
    /// A pacer at `rate`, free from the start of time; `wire_overhead` charges the 802.3
    /// padding, FCS and preamble/SFD/IFG ([`Overheads::ETHERNET`]), otherwise the frame's own
    /// octets only.
    pub fn new(rate: Rate, wire_overhead: bool, catch_up: Duration) -> Pacer {
        let overheads = if wire_overhead {
            Overheads::ETHERNET
        } else {
            Overheads::FRAME
        };
        Pacer {
            clock: LineClock::new(rate, overheads, catch_up),
        }
    }

    /// The pacing rate.
    pub fn rate(&self) -> Rate {
        self.clock.rate()
    }

    /// Changes a flow's rate; the frame already paced keeps its departure time.
    pub fn set_rate(&mut self, rate: Rate) {
        self.clock.set_next_rate(rate);
    }

    /// Changes the line rate at `now`: the rest of the frame in flight is sent at the new rate.
    pub fn set_line_rate(&mut self, now: Instant, rate: Rate) {
        self.clock.set_rate(now, rate);
    }

    /// Octets a frame of `len` octets occupies on the line.
    #[inline]
    pub fn wire_bytes(&self, len: usize) -> Bytes {
        self.clock.wire_bytes(len)
    }

    /// Earliest instant the next frame may start.
    #[inline]
    pub fn next_free(&self) -> Instant {
        self.clock.next_free()
    }

    /// Whether a frame may start at `now`.
    #[inline]
    pub fn may_start(&self, now: Instant) -> bool {
        self.clock.may_start(now)
    }

    /// A frame became ready at `now` for a pacer with nothing queued: the pacer may not
    /// back-date a departure before it (credit is not banked across idle periods).
    pub fn wake(&mut self, now: Instant) {
        self.clock.wake(now);
    }

    /// Records a frame of `len` octets starting now (call when [`Pacer::may_start`] holds, or
    /// to charge a frame that had to go anyway). Returns its (possibly back-dated) start.
    pub fn start(&mut self, now: Instant, len: usize) -> Instant {
        // The ready time was given to `wake`: it is already in `next_free`.
        self.clock.start(now, Instant::ZERO, len)
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

    #[test]
    fn a_line_rate_change_retimes_the_frame_in_flight() {
        let mut p = Pacer::new(Rate::from_gbps(1), true, Duration::ZERO);
        let t0 = Instant::from_nanos(1_000_000);
        p.set_line_rate(t0, Rate::from_bps(1));
        p.wake(t0);
        assert_eq!(p.start(t0, 1476), t0);
        assert_eq!(p.next_free(), t0 + Duration::from_secs(12_000));
        // 1 s later (one bit sent) back to 1 Gb/s: 11 999 bits = 11 999 ns to go.
        let t1 = t0 + Duration::from_secs(1);
        p.set_line_rate(t1, Rate::from_gbps(1));
        assert_eq!(p.next_free(), t1 + Duration::from_nanos(11_999));
        // A flow's rate change keeps the gap already paced.
        let mut f = Pacer::new(Rate::from_bps(1), true, Duration::ZERO);
        f.start(t0, 1476);
        f.set_rate(Rate::from_gbps(1));
        assert_eq!(f.next_free(), t0 + Duration::from_secs(12_000));
    }
}
