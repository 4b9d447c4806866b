//! The line clock: when a frame finishes on a line of rate `R`, and what a frame costs there.
//!
//! # What a frame costs on an Ethernet line
//! A frame of `L` octets as a port hands it over (destination address to the end of the
//! payload, no FCS) occupies more than `L` octets of line time (IEEE 802.3-2018):
//!
//! * it is padded to [`MIN_FRAME`] − [`FCS_LEN`] = 60 octets: `minFrameSize` is 512 bits,
//!   FCS included (clause 4.4.2; the MAC pads short frames, clause 4.2.3.3);
//! * the 4-octet frame check sequence follows it ([`FCS_LEN`], clause 3.2.9);
//! * 7 octets of preamble and the start frame delimiter precede it ([`PREAMBLE_SFD`] = 8,
//!   clauses 3.1.1 and 4.2.5);
//! * the line then stays silent for the inter-frame gap, 96 bit times ([`IFG`] = 12 octets,
//!   `interFrameGap`, clause 4.4.2).
//!
//! So `L' = max(L, 60) + 4 + 8 + 12`: a 1500-octet frame costs 1524 octets, a 60-octet one 84.
//! [`Overheads`] says which of these parts a line charges: a real Ethernet all of them
//! ([`Overheads::ETHERNET`]), a veth pair or a TAP none ([`Overheads::FRAME`]), which is what
//! an emulation running over such a device configures.
//!
//! # When a frame finishes
//! A [`LineClock`] keeps `next_free`, the instant the line becomes free, and serialises one
//! frame at a time: a frame of `L'` octets that starts at `start` keeps the line busy for
//! `L' × 8 × 10⁹ / R` ns. The division is exact: the whole nanoseconds move `next_free` on and
//! the remainder (in bit·ns, below `R`) is carried to the frame that follows back to back, so
//! rounding never accumulates (a per-frame round-up would make 64-octet frames at 100 Gb/s
//! 14 % slow).
//!
//! **The one start rule.** A frame that became ready (reached the head of its queue, PAUSE
//! over, ...) at `ready` and is started by a caller polling at `now` starts at
//!
//! `start = max(next_free, ready, now − catch_up)`.
//!
//! * `next_free`: one frame at a time.
//! * `ready`: a line idle since `t` cannot transmit a frame before the frame exists, and so
//!   does not bank credit while it is idle; a caller that does not know when the frame became
//!   ready says so with [`LineClock::wake`] when the line's queue goes from empty to backlogged.
//! * `now − catch_up`: a caller that polls late (a busy machine, a coarse timer) is back-dated
//!   to where the line really became free, so the frames that would have left meanwhile leave
//!   now, a burst of at most `catch_up` of line time; the long-run rate stays exact. A frame
//!   never starts more than `catch_up` before the poll that sends it.
//!
//! The carried remainder belongs to the frame that follows back to back: when `start` is
//! later than `next_free` the line was idle for at least a nanosecond and nothing is owed.
//!
//! **Rate changes.** A physical line whose rate changes in the middle of a frame sends the
//! rest of the frame at the new rate. [`LineClock::set_rate`] does the same: the line time
//! still owed at `now`, `(next_free − now) × R_old` bit·ns (the bits of the frame(s) not yet
//! sent), is re-timed at `R_new`. A frame that started on a line at 1 bit/s therefore does not
//! keep the line for hours once the rate is raised again. A rate limiter whose rate only
//! governs the gap after the next frame (the reaction point's, 802.1Q clause 32.13) uses
//! [`LineClock::set_next_rate`] instead: the frame already paced keeps its departure.

use crate::wire::MIN_FRAME_LEN;
use crate::{Bytes, Duration, Instant, Rate};

/// Preamble (7 octets) and start frame delimiter (1 octet) before every frame (IEEE 802.3-2018
/// clauses 3.1.1, 4.2.5).
pub const PREAMBLE_SFD: u64 = 8;
/// Minimum inter-frame gap, 96 bit times (IEEE 802.3-2018 clause 4.4.2, `interFrameGap`).
pub const IFG: u64 = 12;
/// Preamble, SFD and inter-frame gap: what every frame adds around itself.
pub const WIRE_OVERHEAD: u64 = PREAMBLE_SFD + IFG;
/// Frame check sequence (IEEE 802.3-2018 clause 3.2.9).
pub const FCS_LEN: u64 = 4;
/// Minimum frame with its FCS, 512 bits (IEEE 802.3-2018 clause 4.4.2, `minFrameSize`).
pub const MIN_FRAME: u64 = 64;
/// Minimum frame as a port hands it over (no FCS): the MAC pads shorter ones to this length.
pub const MIN_FRAME_NO_FCS: u64 = MIN_FRAME - FCS_LEN;

// The codecs pad to the same length.
const _: () = assert!(MIN_FRAME_NO_FCS == MIN_FRAME_LEN as u64);

/// What a frame of `len` octets (as handed over: no FCS) costs on a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overheads {
    /// Octets added to every frame (FCS, preamble, SFD, inter-frame gap).
    pub extra: u64,
    /// Shorter frames count as this many octets (the MAC pads them); 0 = no padding.
    pub pad_to: u64,
}

impl Overheads {
    /// A real Ethernet line: padded to 60 octets, + 4 FCS, + 8 preamble/SFD, + 12 IFG.
    pub const ETHERNET: Overheads = Overheads {
        extra: FCS_LEN + WIRE_OVERHEAD,
        pad_to: MIN_FRAME_NO_FCS,
    };

    /// The frame's own octets only (a veth pair, a TAP device).
    pub const FRAME: Overheads = Overheads {
        extra: 0,
        pad_to: 0,
    };

    /// The parts a line charges: padding to the minimum frame, the FCS, and preamble/SFD/IFG.
    pub const fn new(pad: bool, fcs: bool, preamble_ifg: bool) -> Overheads {
        let mut extra = 0;
        if preamble_ifg {
            extra += WIRE_OVERHEAD;
        }
        if fcs {
            extra += FCS_LEN;
        }
        Overheads {
            extra,
            pad_to: if pad { MIN_FRAME_NO_FCS } else { 0 },
        }
    }

    /// Octets a frame of `len` octets occupies on the line.
    #[inline]
    pub fn octets(&self, len: usize) -> u64 {
        (len as u64).max(self.pad_to).saturating_add(self.extra)
    }

    /// [`Overheads::octets`] as [`Bytes`].
    #[inline]
    pub fn wire_bytes(&self, len: usize) -> Bytes {
        Bytes::new(self.octets(len))
    }
}

impl Default for Overheads {
    fn default() -> Self {
        Overheads::ETHERNET
    }
}

/// The line time still owed at `now` by a line that is busy until `next_free` (plus `rem`
/// bit·ns) at rate `old`, re-timed at rate `new`: the new `(next_free, rem)`. A line already
/// free at `now` owes nothing (`(next_free, 0)`).
pub fn retime(now: Instant, next_free: Instant, rem: u64, old: Rate, new: Rate) -> (Instant, u64) {
    if next_free < now || (next_free == now && rem == 0) {
        return (next_free, 0);
    }
    let owed = u128::from(next_free.saturating_since(now).as_nanos())
        * u128::from(old.bps().max(1))
        + u128::from(rem);
    let r = u128::from(new.bps().max(1));
    let ns = u64::try_from(owed / r).unwrap_or(u64::MAX);
    // Below `r`, itself a u64.
    let rem = (owed % r) as u64;
    (now.saturating_add(Duration::from_nanos(ns)), rem)
}

/// One line (or rate limiter) at rate `R`: see the [module documentation](self).
#[derive(Debug, Clone)]
pub struct LineClock {
    rate: Rate,
    overheads: Overheads,
    catch_up: Duration,
    next_free: Instant,
    /// Fraction of a nanosecond owed by `next_free`, in bit·ns (`0..rate`).
    rem: u64,
}

impl LineClock {
    /// A line at `rate` charging `overheads`, back-dating late polls by at most `catch_up`,
    /// free from the start of time.
    pub fn new(rate: Rate, overheads: Overheads, catch_up: Duration) -> LineClock {
        LineClock {
            rate,
            overheads,
            catch_up,
            next_free: Instant::ZERO,
            rem: 0,
        }
    }

    /// The line rate.
    #[inline]
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// What the line charges per frame.
    #[inline]
    pub fn overheads(&self) -> Overheads {
        self.overheads
    }

    /// The largest back-dating of a late poll.
    #[inline]
    pub fn catch_up(&self) -> Duration {
        self.catch_up
    }

    /// Octets a frame of `len` octets occupies on the line.
    #[inline]
    pub fn wire_bytes(&self, len: usize) -> Bytes {
        self.overheads.wire_bytes(len)
    }

    /// When the line is free for the next frame.
    #[inline]
    pub fn next_free(&self) -> Instant {
        self.next_free
    }

    /// Whether a frame may start at `now` (the line is free).
    #[inline]
    pub fn may_start(&self, now: Instant) -> bool {
        self.next_free <= now
    }

    /// A frame became ready at `now` on a line with nothing queued: the line cannot send it
    /// earlier (no credit is banked across an idle period).
    #[inline]
    pub fn wake(&mut self, now: Instant) {
        if self.next_free < now {
            self.next_free = now;
            self.rem = 0;
        }
    }

    /// Forgets the line's history (a link came up): the next frame may start at `now`.
    pub fn reset(&mut self, now: Instant) {
        self.next_free = now;
        self.rem = 0;
    }

    /// The instant [`LineClock::start`] would give a frame that became ready at `ready`, if
    /// started at `now`, without charging the line: when the line is free, not before
    /// `ready`, and not more than the catch-up before `now`.
    #[inline]
    pub fn start_instant(&self, now: Instant, ready: Instant) -> Instant {
        self.next_free.max(ready).max(now - self.catch_up)
    }

    /// Records a frame of `len` octets that became ready at `ready`, sent by a poll at `now`:
    /// it starts at `max(next_free, ready, now − catch_up)` and keeps the line busy for its
    /// serialisation time. Returns the start. Normally called when [`LineClock::may_start`]
    /// holds; a frame that has to go anyway (a control frame sent ahead of the queue) starts
    /// when the line is free, possibly later than `now`.
    #[inline]
    pub fn start(&mut self, now: Instant, ready: Instant, len: usize) -> Instant {
        let start = self.start_instant(now, ready);
        if start != self.next_free {
            // The line was idle (or is being caught up): no fraction is owed.
            self.rem = 0;
        }
        let bps = self.rate.bps().max(1);
        let wire = self.wire_bytes(len).get();
        // Bit-nanoseconds owed: in 64 bits for any frame (below about 2.3 GB), where the
        // division is a fraction of a 128-bit one; the same quotient and remainder either way.
        let (ns, rem) = match wire
            .checked_mul(8_000_000_000)
            .and_then(|t| t.checked_add(self.rem))
        {
            Some(total) => (total / bps, total % bps),
            None => {
                let total = u128::from(wire) * 8_000_000_000 + u128::from(self.rem);
                let r = u128::from(bps);
                // The remainder is below `r`, itself a u64.
                (
                    u64::try_from(total / r).unwrap_or(u64::MAX),
                    (total % r) as u64,
                )
            }
        };
        self.rem = rem;
        self.next_free = start.saturating_add(Duration::from_nanos(ns));
        start
    }

    /// The rate changes at `now`: what the line still owes (the rest of the frame in flight,
    /// and of any frame charged behind it) is sent at the new rate ([`retime`]).
    pub fn set_rate(&mut self, now: Instant, rate: Rate) {
        let (next_free, rem) = retime(now, self.next_free, self.rem, self.rate, rate);
        self.next_free = next_free;
        self.rem = rem;
        self.rate = rate;
    }

    /// The rate changes for the frames that start from now on: the frame already paced keeps
    /// its end (a rate limiter's gap, not a line's bits).
    pub fn set_next_rate(&mut self, rate: Rate) {
        if rate != self.rate {
            self.rate = rate;
            self.rem = 0;
        }
    }

    /// Serialisation time of one frame of `len` octets on its own, rounded up to the next
    /// nanosecond (a frame's latency through the line, not its pacing).
    #[inline]
    pub fn frame_time(&self, len: usize) -> Duration {
        self.rate.tx_time(self.wire_bytes(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overheads_follow_802_3() {
        let e = Overheads::ETHERNET;
        assert_eq!(e, Overheads::default());
        // 1500 + 4 FCS + 8 preamble/SFD + 12 IFG.
        assert_eq!(e.octets(1500), 1524);
        // Padded to 60, then the same 24.
        assert_eq!(e.octets(20), 84);
        assert_eq!(e.wire_bytes(60), Bytes::new(84));
        assert_eq!(Overheads::new(true, true, true), e);
        assert_eq!(Overheads::new(false, false, false), Overheads::FRAME);
        assert_eq!(Overheads::FRAME.octets(42), 42);
        assert_eq!(Overheads::new(false, false, true).octets(100), 120);
        assert_eq!(Overheads::new(true, false, false).octets(10), 60);
        assert_eq!(Overheads::new(false, true, false).octets(10), 14);
    }

    #[test]
    fn paces_exactly_without_accumulated_rounding() {
        let mut l = LineClock::new(Rate::from_gbps(1), Overheads::ETHERNET, Duration::ZERO);
        let t0 = Instant::from_nanos(1_000_000);
        // 1476 + 24 = 1500 octets = 12 µs at 1 Gb/s.
        assert!(l.may_start(t0));
        assert_eq!(l.start(t0, t0, 1476), t0);
        assert_eq!(l.next_free(), t0 + Duration::from_micros(12));
        assert!(!l.may_start(t0 + Duration::from_micros(11)));
        // 64-octet frames at 100 Gb/s: 88 octets = 7.04 ns each, 704 ns for 100.
        let mut f = LineClock::new(Rate::from_gbps(100), Overheads::ETHERNET, Duration::ZERO);
        let t = Instant::ZERO;
        for _ in 0..100 {
            let s = f.start(t, t, 64);
            assert!(s <= t + Duration::from_nanos(704));
        }
        assert_eq!(f.next_free(), t + Duration::from_nanos(704));
        assert_eq!(f.frame_time(64), Duration::from_nanos(8));
    }

    /// Frames back to back at rates that leave remainders: every end is where the exact
    /// sum of the bits owed puts it (128-bit reference), whichever width the division took;
    /// a length too large for 64 bits takes the 128-bit one.
    #[test]
    fn back_to_back_ends_are_exact_in_either_width() {
        for bps in [
            1u64,
            7,
            999_999_937,
            1_000_000_000,
            10_000_000_000,
            99_999_999_977,
        ] {
            let rate = Rate::from_bps(bps);
            let mut l = LineClock::new(rate, Overheads::ETHERNET, Duration::ZERO);
            let mut owed: u128 = 0;
            let mut t = Instant::ZERO;
            for (k, len) in [64usize, 1500, 9000, 60, 1514, 333]
                .iter()
                .cycle()
                .take(60)
                .enumerate()
            {
                assert_eq!(l.start(t, t, *len), t, "back to back: starts when ready");
                owed += u128::from(Overheads::ETHERNET.octets(*len)) * 8_000_000_000;
                let end = u64::try_from(owed / u128::from(bps)).unwrap();
                assert_eq!(
                    l.next_free(),
                    Instant::from_nanos(end),
                    "{bps} b/s, frame {k}"
                );
                t = l.next_free();
            }
        }
        // 2^32 octets: 8e9 bit-nanoseconds each overflow 64 bits.
        let mut l = LineClock::new(Rate::from_gbps(100), Overheads::FRAME, Duration::ZERO);
        let huge = 1usize << 32;
        l.start(Instant::ZERO, Instant::ZERO, huge);
        let ns = (huge as u128) * 8_000_000_000 / 100_000_000_000;
        assert_eq!(l.next_free(), Instant::from_nanos(ns as u64));
    }

    #[test]
    fn one_start_rule_back_dates_but_banks_no_credit() {
        let cu = Duration::from_micros(100);
        let mut l = LineClock::new(Rate::from_gbps(1), Overheads::ETHERNET, cu);
        let t0 = Instant::from_nanos(1_000_000);
        // Ready 30 µs ago on an idle line, polled now: starts when it became ready.
        assert_eq!(
            l.start(t0, t0 - Duration::from_micros(30), 1476),
            t0 - Duration::from_micros(30)
        );
        // A backlog polled 500 µs late: back-dated by at most `catch_up`.
        let late = t0 + Duration::from_micros(500);
        assert_eq!(l.start(late, t0, 1476), late - cu);
        // Back to back from there.
        assert_eq!(
            l.start(late, t0, 1476),
            late - cu + Duration::from_micros(12)
        );
        // Idle for 10 ms, a frame ready now: starts now, not `catch_up` earlier.
        let idle = t0 + Duration::from_millis(10);
        assert_eq!(l.start(idle, idle, 1476), idle);
        // The same through `wake` when the caller does not track ready times.
        let idle2 = idle + Duration::from_millis(10);
        l.wake(idle2);
        assert_eq!(l.start(idle2, Instant::ZERO, 1476), idle2);
        // A frame that has to go while the line is busy starts when it is free.
        let busy = idle2 + Duration::from_micros(1);
        assert_eq!(l.start(busy, busy, 1476), idle2 + Duration::from_micros(12));
    }

    #[test]
    fn a_rate_change_retimes_the_frame_in_flight() {
        let mut l = LineClock::new(Rate::from_gbps(1), Overheads::ETHERNET, Duration::ZERO);
        let t0 = Instant::from_nanos(1_000_000);
        l.start(t0, t0, 1476);
        // 4 µs into the 12 µs frame (4000 of 12000 bits sent), the rate halves: the other
        // 8000 bits take 16 µs.
        let t1 = t0 + Duration::from_micros(4);
        l.set_rate(t1, Rate::from_mbps(500));
        assert_eq!(l.next_free(), t1 + Duration::from_micros(16));
        // A frame started at 1 bit/s (12 000 s) ends 12 µs after the rate returns to 1 Gb/s.
        let mut w = LineClock::new(Rate::from_bps(1), Overheads::ETHERNET, Duration::ZERO);
        w.start(t0, t0, 1476);
        assert_eq!(w.next_free(), t0 + Duration::from_secs(12_000));
        // 1 s later: one bit sent, 11 999 to go.
        let t2 = t0 + Duration::from_secs(1);
        w.set_rate(t2, Rate::from_gbps(1));
        assert_eq!(w.next_free(), t2 + Duration::from_nanos(11_999));
        // An idle line just takes the rate.
        let t3 = t2 + Duration::from_secs(1);
        w.set_rate(t3, Rate::from_mbps(1));
        assert_eq!(w.next_free(), t2 + Duration::from_nanos(11_999));
        assert!(w.may_start(t3));
        assert_eq!(w.rate(), Rate::from_mbps(1));
    }

    #[test]
    fn a_limiter_rate_change_keeps_the_paced_gap() {
        let mut l = LineClock::new(Rate::from_bps(1), Overheads::ETHERNET, Duration::ZERO);
        let t0 = Instant::from_nanos(5);
        l.start(t0, t0, 1476);
        l.set_next_rate(Rate::from_gbps(1));
        assert_eq!(l.next_free(), t0 + Duration::from_secs(12_000));
    }

    #[test]
    fn retime_is_exact_in_bit_nanoseconds() {
        let now = Instant::from_nanos(100);
        // Free already: nothing owed.
        assert_eq!(
            retime(
                now,
                Instant::from_nanos(50),
                7,
                Rate::from_gbps(1),
                Rate::from_bps(1)
            ),
            (Instant::from_nanos(50), 0)
        );
        // 3 ns at 10 Gb/s = 30 bits = 30 ns at 1 Gb/s.
        assert_eq!(
            retime(
                now,
                Instant::from_nanos(103),
                0,
                Rate::from_gbps(10),
                Rate::from_gbps(1)
            ),
            (Instant::from_nanos(130), 0)
        );
        // 1 ns and 5·10⁹ bit·ns at 10 Gb/s (1.5 ns, 15 bits) at 4 Gb/s: 3.75 ns.
        assert_eq!(
            retime(
                now,
                Instant::from_nanos(101),
                5_000_000_000,
                Rate::from_gbps(10),
                Rate::from_gbps(4)
            ),
            (Instant::from_nanos(103), 3_000_000_000)
        );
    }
}
