//! Byte-accurate line-rate emulation for one output port.
//!
//! A port with an emulated rate `R` transmits one frame at a time on a
//! [`cnm_proto::line::LineClock`]: a frame of `L` octets occupies the line for `(L' × 8) / R`
//! seconds, where `L'` is what the frame costs on a real Ethernet (padding to the minimum
//! frame, FCS, preamble/SFD and inter-frame gap, IEEE 802.3-2018 clauses 3.1.1, 3.2.9, 4.4.2),
//! each part configurable ([`crate::config::ShaperConfig`], [`ShaperConfig::overheads`]).
//!
//! A frame may start when it is ready (it reached the head of its queue, PAUSE over) and the
//! line is free, and then starts at the line clock's one rule
//!
//! `start = max(next_free, ready, now − catch_up)`:
//!
//! a busy transmitter polled late is back-dated to where the line really became free, so a
//! late poll sends the frames that would have left meanwhile (a burst of at most `catch_up`
//! worth of line time); a line that went idle starts again at the frame's ready time, never
//! earlier. A control frame (PAUSE, CNM) sent ahead of the queues is ready when it is made, so
//! it starts when the line is free and not before `now`. The serialisation arithmetic is exact
//! (see [`cnm_proto::line`]).
//!
//! A rate change re-times what the line still owes at the new rate (the rest of the frame in
//! flight), so a port slowed to 1 bit/s and raised again is free within one frame time at the
//! new rate, not after the hours the old rate would have taken.

use crate::config::ShaperConfig;
use cnm_proto::line::{LineClock, Overheads};
use cnm_proto::{Bytes, Instant, Rate};

impl ShaperConfig {
    /// What the port's line emulation charges per frame, from the `pad`, `fcs` and
    /// `wire_overhead` settings (the congestion points' explicit-rate measurement counts the
    /// same octets).
    pub fn overheads(&self) -> Overheads {
        Overheads::new(self.pad, self.fcs, self.wire_overhead)
    }
}

/// The pacer of one output port.
#[derive(Debug, Clone)]
pub struct Shaper {
    /// `None`: unshaped (the clock then keeps the last rate, unused).
    rate: Option<Rate>,
    clock: LineClock,
}

impl Shaper {
    /// A pacer at `rate` (`None` = unshaped).
    pub fn new(rate: Option<Rate>, cfg: &ShaperConfig) -> Self {
        Shaper {
            rate,
            clock: LineClock::new(
                rate.unwrap_or(Rate::from_bps(1)),
                cfg.overheads(),
                cfg.catch_up,
            ),
        }
    }

    /// The emulated rate, `None` when unshaped.
    pub fn rate(&self) -> Option<Rate> {
        self.rate
    }

    /// Changes the rate at `now`. Between two rates, the rest of the frame in transmission is
    /// sent at the new rate ([`LineClock::set_rate`]); a port that was unshaped starts afresh
    /// at `now`.
    pub fn set_rate(&mut self, now: Instant, rate: Option<Rate>) {
        match (self.rate, rate) {
            (Some(_), Some(r)) => self.clock.set_rate(now, r),
            (None, Some(r)) => {
                self.clock.set_next_rate(r);
                self.clock.reset(now);
            }
            (_, None) => {}
        }
        self.rate = rate;
    }

    /// Forgets the line's history (link came up): the next frame may start at `now`.
    pub fn reset(&mut self, now: Instant) {
        self.clock.reset(now);
    }

    /// Octets a frame of `len` octets occupies on the line.
    #[inline]
    pub fn wire_bytes(&self, len: usize) -> Bytes {
        self.clock.wire_bytes(len)
    }

    /// When the line is free for the next frame (`None` if unshaped: always).
    #[inline]
    pub fn next_free(&self) -> Option<Instant> {
        self.rate.map(|_| self.clock.next_free())
    }

    /// Whether a frame that became ready at `ready` may start at `now`.
    #[inline]
    pub fn may_start(&self, now: Instant, ready: Instant) -> bool {
        self.rate.is_none() || (self.clock.may_start(now) && ready <= now)
    }

    /// The start time [`Shaper::start`] would record for a frame that became ready at
    /// `ready`, without recording it (`now` when the port is not shaped).
    #[inline]
    pub fn start_instant(&self, now: Instant, ready: Instant) -> Instant {
        if self.rate.is_none() {
            return now;
        }
        self.clock.start_instant(now, ready)
    }

    /// Records the transmission of a frame of `len` octets that became ready at `ready`
    /// (call only when [`Shaper::may_start`] holds). Returns its start time.
    #[inline]
    pub fn start(&mut self, now: Instant, ready: Instant, len: usize) -> Instant {
        if self.rate.is_none() {
            return now;
        }
        self.clock.start(now, ready, len)
    }

    /// Charges a control frame made and sent at `now` (ahead of data): it occupies the line
    /// too, from when the line is free and not before `now`.
    pub fn charge_now(&mut self, now: Instant, len: usize) {
        if self.rate.is_some() {
            self.clock.start(now, now, len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cnm_proto::Duration;

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

    #[test]
    fn overheads_follow_the_settings() {
        assert_eq!(ShaperConfig::default().overheads(), Overheads::ETHERNET);
        let veth = ShaperConfig {
            wire_overhead: false,
            fcs: false,
            pad: false,
            ..ShaperConfig::default()
        };
        assert_eq!(veth.overheads(), Overheads::FRAME);
        let ifg_only = ShaperConfig {
            fcs: false,
            pad: false,
            ..ShaperConfig::default()
        };
        assert_eq!(ifg_only.overheads().octets(100), 120);
    }

    #[test]
    fn a_control_frame_on_an_idle_line_banks_no_credit() {
        let mut s = Shaper::new(Some(Rate::from_gbps(1)), &ShaperConfig::default());
        let t0 = Instant::from_nanos(10_000_000);
        s.charge_now(t0, 1476);
        // The line was idle: the control frame occupies it from now, not `catch_up` earlier.
        assert_eq!(s.next_free(), Some(t0 + Duration::from_micros(12)));
        assert!(!s.may_start(t0 + Duration::from_micros(11), t0));
    }

    #[test]
    fn slowing_to_one_bit_and_back_does_not_wedge_the_port() {
        let mut s = Shaper::new(Some(Rate::from_mbps(100)), &ShaperConfig::default());
        let t0 = Instant::from_nanos(1_000_000);
        s.set_rate(t0, Some(Rate::from_bps(1)));
        // A 1500-octet (on the wire) frame at 1 bit/s: 12 000 s.
        assert_eq!(s.start(t0, t0, 1476), t0);
        assert_eq!(s.next_free(), Some(t0 + Duration::from_secs(12_000)));
        // 1 ms later the rate is 100 Mb/s again: the 11 999.999 bits still owed take
        // 119 999.99 ns, not hours.
        let t1 = t0 + Duration::from_millis(1);
        s.set_rate(t1, Some(Rate::from_mbps(100)));
        assert_eq!(s.next_free(), Some(t1 + Duration::from_nanos(119_999)));
        assert!(s.may_start(t1 + Duration::from_micros(120), t1));
        // Unshaped and back: starts afresh.
        s.set_rate(t1, None);
        assert!(s.may_start(t1, t1));
        let t2 = t1 + Duration::from_micros(1);
        s.set_rate(t2, Some(Rate::from_gbps(1)));
        assert_eq!(s.next_free(), Some(t2));
    }
}
