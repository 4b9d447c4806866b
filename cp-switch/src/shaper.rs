//! Byte-accurate line-rate emulation for one output port.
//!
//! A port with an emulated rate `R` transmits one frame at a time; a frame of `L` octets
//! occupies the line for `(L' × 8) / R` seconds, where `L'` is what the frame costs on a real
//! Ethernet: the frame padded to the 60-octet minimum (802.3-2018 clause 4.2.3.3), plus the
//! 4-octet FCS, plus 20 octets of preamble, SFD and minimum inter-packet gap (802.3-2018
//! clauses 3.1.1 and 4.4.2) — each part configurable ([`crate::config::ShaperConfig`]).
//!
//! The pacer keeps `next_free`, the instant the line becomes free. A frame may start when it
//! is ready (it reached the head of its queue, PAUSE over) and the line is free:
//!
//! `start = max(next_free, ready, now − catch_up)`, `next_free = start + L' × 8 / R`.
//!
//! Computing `start` from `next_free` rather than from `now` keeps the long-run rate exact even
//! when the caller polls late: a busy transmitter is back-dated to where the line really
//! became free, so a late poll sends the frames that would have left meanwhile (a burst of at
//! most `catch_up` worth of line time). A line that went idle starts again at the frame's
//! ready time, never earlier. The arithmetic is exact integer arithmetic: the serialisation
//! time `L' × 8 × 10⁹ / R` ns is split into whole nanoseconds and a remainder carried to the next
//! frame, so rounding never accumulates (a per-frame round-up would make 64-octet frames at
//! 100 Gb/s 14 % slow).

use crate::config::ShaperConfig;
use cnm_proto::{Bytes, Duration, Instant, Rate};

/// Preamble + SFD + minimum IPG: 7 + 1 + 12 octets (802.3-2018 clauses 3.1.1, 4.4.2).
pub const WIRE_OVERHEAD: u64 = 20;
/// Frame check sequence (802.3-2018 clause 3.2.9).
pub const FCS_LEN: u64 = 4;
/// Minimum frame without FCS (802.3-2018 clause 4.2.3.3: 64 octets with FCS).
pub const MIN_FRAME: u64 = 60;

/// The pacer of one output port.
#[derive(Debug, Clone)]
pub struct Shaper {
    rate: Option<Rate>,
    next_free: Instant,
    /// Fraction of a nanosecond owed by `next_free`, in units of 1/rate ns (`0..rate`).
    rem: u64,
    extra: u64,
    pad: bool,
    catch_up: Duration,
}

impl Shaper {
    /// A pacer at `rate` (`None` = unshaped).
    pub fn new(rate: Option<Rate>, cfg: &ShaperConfig) -> Self {
        let mut extra = 0;
        if cfg.wire_overhead {
            extra += WIRE_OVERHEAD;
        }
        if cfg.fcs {
            extra += FCS_LEN;
        }
        Shaper {
            rate,
            next_free: Instant::ZERO,
            rem: 0,
            extra,
            pad: cfg.pad,
            catch_up: cfg.catch_up,
        }
    }

    /// The emulated rate, `None` when unshaped.
    pub fn rate(&self) -> Option<Rate> {
        self.rate
    }

    /// Changes the rate. The frame in transmission finishes at the old rate.
    pub fn set_rate(&mut self, now: Instant, rate: Option<Rate>) {
        if self.rate.is_none() {
            self.next_free = now;
        }
        self.rem = 0;
        self.rate = rate;
    }

    /// Forgets the line's history (link came up): the next frame may start at `now`.
    pub fn reset(&mut self, now: Instant) {
        self.next_free = now;
        self.rem = 0;
    }

    /// Octets a frame of `len` octets occupies on the line.
    #[inline]
    pub fn wire_bytes(&self, len: usize) -> Bytes {
        let l = len as u64;
        let l = if self.pad { l.max(MIN_FRAME) } else { l };
        Bytes::new(l + self.extra)
    }

    /// When the line is free for the next frame (`None` if unshaped: always).
    #[inline]
    pub fn next_free(&self) -> Option<Instant> {
        self.rate.map(|_| self.next_free)
    }

    /// Whether a frame that became ready at `ready` may start at `now`.
    #[inline]
    pub fn may_start(&self, now: Instant, ready: Instant) -> bool {
        self.rate.is_none() || (self.next_free <= now && ready <= now)
    }

    /// Records the transmission of a frame of `len` octets that became ready at `ready`
    /// (call only when [`Shaper::may_start`] holds). Returns its start time.
    #[inline]
    pub fn start(&mut self, now: Instant, ready: Instant, len: usize) -> Instant {
        let Some(rate) = self.rate else {
            return now;
        };
        let start = self.next_free.max(ready).max(now - self.catch_up);
        self.occupy(start, rate, len);
        start
    }

    /// The line is busy from `start` for one frame of `len` octets.
    #[inline]
    fn occupy(&mut self, start: Instant, rate: Rate, len: usize) {
        if start != self.next_free {
            // The line was idle (or is being caught up): no fraction is owed.
            self.rem = 0;
        }
        let r = u128::from(rate.bps());
        let total =
            u128::from(self.wire_bytes(len).get()) * 8 * 1_000_000_000 + u128::from(self.rem);
        let ns = u64::try_from(total / r).unwrap_or(u64::MAX);
        // Below `rate`, so it fits.
        self.rem = (total % r) as u64;
        self.next_free = start + Duration::from_nanos(ns);
    }

    /// Charges a control frame sent immediately (ahead of data): it occupies the line too.
    pub fn charge_now(&mut self, now: Instant, len: usize) {
        if let Some(rate) = self.rate {
            let start = self.next_free.max(now - self.catch_up);
            self.occupy(start, rate, len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paces_at_rate_and_catches_up() {
        let mut s = Shaper::new(Some(Rate::from_gbps(1)), &ShaperConfig::default());
        // 1476 + 4 + 20 = 1500 octets = 12 us at 1 Gb/s.
        assert_eq!(s.wire_bytes(1476), Bytes::new(1500));
        assert_eq!(s.wire_bytes(10), Bytes::new(84));
        let t0 = Instant::from_nanos(1_000_000);
        assert!(s.may_start(t0, t0));
        assert_eq!(s.start(t0, t0, 1476), t0);
        assert_eq!(s.next_free(), Some(t0 + Duration::from_micros(12)));
        assert!(!s.may_start(t0 + Duration::from_micros(11), t0));
        // Polled 30 us late with a backlog: back-dated starts.
        let late = t0 + Duration::from_micros(42);
        assert_eq!(s.start(late, t0, 1476), t0 + Duration::from_micros(12));
        assert_eq!(s.start(late, t0, 1476), t0 + Duration::from_micros(24));
        // Idle line: starts at the frame's ready time.
        let much_later = t0 + Duration::from_millis(10);
        assert_eq!(s.start(much_later, much_later, 1476), much_later);
        // 64-octet frames at 100 Gb/s take 7.04 ns each: no accumulated rounding.
        let mut f = Shaper::new(Some(Rate::from_gbps(100)), &ShaperConfig::default());
        let t = Instant::from_nanos(0);
        for _ in 0..100 {
            let s = f.start(t, t, 64);
            assert!(s <= t + Duration::from_nanos(704));
        }
        assert_eq!(f.next_free(), Some(t + Duration::from_nanos(704)));
        let mut u = Shaper::new(None, &ShaperConfig::default());
        assert!(u.may_start(t0, t0));
        assert_eq!(u.start(t0, t0, 100), t0);
        assert_eq!(u.next_free(), None);
    }
}
