//! The ingress link-rate stage: the bridge sees a port's frames no faster than its link could
//! have delivered them.
//!
//! # Why
//! A physical link delivers one frame at a time. The last bit of frame `i` reaches the switch
//! at least one serialisation time of frame `i` after the last bit of frame `i − 1` (IEEE
//! 802.3-2018 clause 4.4.2 and the line costs of [`cnm_proto::line`]: a frame of `L` octets
//! occupies `L'` octets of line time, `L' × 8 / R` seconds on a link of rate `R`). In an
//! emulation the link into a switch port is a veth pair fed by a sender process: a sender
//! descheduled for a while drains its backlog at memory speed, and the switch receives a burst
//! no link of rate `R` could have carried ([`super::ingress`] counts such frames). Handed to
//! the bridge as it came, the burst fills the output queue at once, the congestion points
//! answer it with CNMs, and the flows are cut for an artefact of the host's scheduler.
//!
//! The stage restores what the link would have done: it holds the frames of each port whose
//! rate is known and hands them on at the instants the link would have delivered them.
//!
//! # The model
//! Frame `i` of a port **arrives** at `a_i`: the kernel's receive time of the frame
//! ([`cnm_proto::phy::Port::recv_batch_stamped`], `CLOCK_REALTIME`) mapped onto the daemon's
//! clock ([`arrival`]), or the time the daemon read it when the port gives no stamp. The link
//! **delivers** it at
//!
//! `d_i = max(a_i, d_{i−1} + wire_i)`, with `wire_i = L'_i × 8 / R`,
//!
//! `L'_i` the octets the frame costs on the line with the port's [`Overheads`] (the same ones
//! the ingress measure and the port's own shaper charge). The stamp marks the frame's last bit,
//! so what separates two deliveries is the serialisation of the *later* frame, the rule of
//! the ingress measure. The serialisation is kept exact by a [`LineClock`] (the remainder of a
//! nanosecond is carried to the next frame), started at `a_i − wire_i` with no catch-up: a
//! link never delivers earlier than a frame arrived nor faster than its rate.
//!
//! * A frame whose `d_i` is later than the loop's `now` is **held** in the port's FIFO until
//!   then; the loop sleeps no later than the earliest `d_i` of all ports.
//! * The FIFO is bounded in octets ([`STAGE_LIMIT`]): a frame that does not fit is dropped and
//!   counted (`overflow_drops`); its line time is not charged (it never reached the link).
//! * A port whose link goes down loses what its stage held (`down_drops`); one that comes back
//!   starts with a free link.
//! * A port without a rate has no stage (its frames go straight to the bridge). When a port's
//!   rate is removed while frames are held, the frames keep their instants and later frames
//!   follow them in order (`d_i = max(a_i, d_{i−1})`) until the FIFO is empty. A new rate
//!   applies from the next frame; the frame in flight is re-timed like a line's
//!   ([`LineClock::set_rate`]).
//!
//! The driver hands the due frames of all ports to the bridge in `d_i` order, each at
//! `max(d_i, the bridge's latest time)`, and before each lets the bridge transmit what is due
//! up to `d_i`: arrivals and departures interleave as on a real switch, however late the loop
//! itself ran. That holds only if every frame that arrived before the bridge's time was read
//! before the bridge's time moved: a frame still in the kernel's ring when the loop transmits
//! at `now` is handed over later at the bridge's time, not its own, with the departures it
//! should have preceded already gone. After a stall the ring holds more than one batch, and
//! handing each batch's arrivals over before reading the next once collapsed the rest of a
//! stalled millisecond onto one instant (hundreds of frames, the output queue filled and
//! dropping at that instant, a burst of the deepest CNMs). So the loop reads a staged port
//! until its ring is empty (up to a ring's worth) before it releases anything, and a frame
//! that is late nonetheless is counted (`late`, `late_max_ns`; [`LinkStage::note_late`]).
//!
//! The stage delay of a frame is `d_i − a_i`, the time the link's rate adds to the frame's
//! arrival; the report ([`StageStats`], `stats` → `ports[].ingress.stage`) gives the frames
//! through the stage, the frames held, the total and the largest delay and the drops. The
//! early-frame measure of [`super::ingress`] stays on the raw stamps: it describes the
//! emulation, the stage corrects its effect.

use std::collections::VecDeque;

use cnm_proto::line::{LineClock, Overheads};
use cnm_proto::{Duration, Instant, Rate};

/// Octets a port's stage holds at most: 2 MB. A sender can dump at once what its kernel
/// queued behind its interface, 1000 frames with the default `txqueuelen`, i.e. 1.5 MB of
/// full-size frames; the limit keeps that and bounds how far the stage lags behind real time
/// (16 ms at 1 Gb/s).
pub const STAGE_LIMIT: u64 = 2_000_000;

/// A mapped receive stamp further than this from the daemon's clock is not trusted (a stamp
/// on another clock, a clock step): the frame arrives when it is read.
pub const STAMP_TRUST: Duration = Duration::from_secs(1);

/// Spare buffers a stage keeps for the frames it copies.
const SPARES: usize = 64;

/// The offset from `CLOCK_REALTIME` to the daemon's clock: both read at (nearly) the same
/// instant, `now` on the daemon's clock and `realtime_ns` on the realtime clock.
pub fn realtime_offset(now: Instant, realtime_ns: u64) -> i128 {
    i128::from(now.as_nanos()) - i128::from(realtime_ns)
}

/// A frame's arrival on the daemon's clock: its receive stamp moved by `offset`
/// ([`realtime_offset`]), never later than `now` (a frame cannot arrive after it was read);
/// `now` when there is no stamp or offset, or when the mapped stamp is further than
/// [`STAMP_TRUST`] from `now`.
pub fn arrival(stamp: Option<u64>, offset: Option<i128>, now: Instant) -> Instant {
    let (Some(s), Some(off)) = (stamp, offset) else {
        return now;
    };
    let t = i128::from(s) + off;
    let n = i128::from(now.as_nanos());
    if (n - t).abs() > i128::from(STAMP_TRUST.as_nanos()) {
        return now;
    }
    // Within a second of `now`, itself a u64: `t.min(n)` is in range.
    Instant::from_nanos(u64::try_from(t.min(n)).unwrap_or(0))
}

/// Counters of one port's stage (`stats` → `ports[].ingress.stage`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StageStats {
    /// Frames that went through the stage (admitted).
    pub staged: u64,
    /// Of those, frames due later than the loop's time when they were read (held back).
    pub held: u64,
    /// Sum of the stage delays `d_i − a_i` (ns).
    pub delay_total_ns: u64,
    /// Largest stage delay (ns).
    pub delay_max_ns: u64,
    /// Frames dropped because the stage was full.
    pub overflow_drops: u64,
    /// Frames lost from the stage when the port went down.
    pub down_drops: u64,
    /// Octets held now.
    pub queued_bytes: u64,
    /// Most octets held at once.
    pub queued_max_bytes: u64,
    /// Frames handed to the bridge after their delivery instant, because the bridge's time
    /// had already passed it (see [`LinkStage::note_late`]): their arrival was moved later,
    /// onto the bridge's time, and departures that should have come after it came before.
    pub late: u64,
    /// Sum of those shifts (ns).
    pub late_total_ns: u64,
    /// Largest such shift (ns).
    pub late_max_ns: u64,
}

/// A frame in the stage: when the link delivers it, and its octets.
#[derive(Debug)]
struct Held {
    due: Instant,
    frame: Vec<u8>,
}

/// The stage of one port (see the [module documentation](self)).
#[derive(Debug)]
pub struct LinkStage {
    /// The link (`None`: unshaped, no line time).
    line: Option<LineClock>,
    overheads: Overheads,
    /// Octets the FIFO may hold.
    limit: u64,
    /// Delivery time of the latest admitted frame (`d_{i−1}`).
    last_due: Instant,
    fifo: VecDeque<Held>,
    spare: Vec<Vec<u8>>,
    stats: StageStats,
}

impl LinkStage {
    /// A stage for a link of `rate` (`None`: no stage while nothing is held) charging
    /// `overheads`, holding at most `limit` octets.
    pub fn new(rate: Option<Rate>, overheads: Overheads, limit: u64) -> LinkStage {
        LinkStage {
            line: rate.map(|r| LineClock::new(r, overheads, Duration::ZERO)),
            overheads,
            limit,
            last_due: Instant::ZERO,
            fifo: VecDeque::new(),
            spare: Vec::new(),
            stats: StageStats::default(),
        }
    }

    /// Whether frames of this port go through the stage: it has a rate, or still holds frames
    /// that later ones must not overtake.
    #[inline]
    pub fn active(&self) -> bool {
        self.line.is_some() || !self.fifo.is_empty()
    }

    /// The link's rate changes at `now` (`None`: unshaped from now on).
    pub fn set_rate(&mut self, now: Instant, rate: Option<Rate>) {
        match (&mut self.line, rate) {
            (Some(l), Some(r)) => l.set_rate(now, r),
            (None, Some(r)) => {
                let mut l = LineClock::new(r, self.overheads, Duration::ZERO);
                l.reset(self.last_due);
                self.line = Some(l);
            }
            (_, None) => self.line = None,
        }
    }

    /// What frames cost on the line.
    pub fn set_overheads(&mut self, overheads: Overheads) {
        self.overheads = overheads;
        if let Some(l) = &mut self.line {
            let mut n = LineClock::new(l.rate(), overheads, Duration::ZERO);
            n.reset(l.next_free());
            *l = n;
        }
    }

    /// The port went down: what the stage held is lost (counted), and the link starts afresh.
    pub fn port_down(&mut self) {
        while let Some(h) = self.fifo.pop_front() {
            self.stats.down_drops += 1;
            self.recycle(h.frame);
        }
        self.stats.queued_bytes = 0;
        self.last_due = Instant::ZERO;
        if let Some(l) = &mut self.line {
            l.reset(Instant::ZERO);
        }
    }

    /// A frame that arrived at `arrival` read by the loop at `now`: its delivery instant
    /// `d_i`, or `None` when the stage is full (the frame is dropped and counted).
    pub fn admit(&mut self, arrival: Instant, now: Instant, frame: &[u8]) -> Option<Instant> {
        let len = frame.len() as u64;
        if self.stats.queued_bytes + len > self.limit {
            self.stats.overflow_drops += 1;
            return None;
        }
        let due = match &mut self.line {
            Some(l) => {
                // The link starts the frame so that its last bit arrives no earlier than
                // `arrival`, and no earlier than it is free.
                let wire = l.frame_time(frame.len());
                l.start(arrival - wire, arrival - wire, frame.len());
                l.next_free().max(arrival)
            }
            None => arrival,
        }
        .max(self.last_due);
        self.last_due = due;
        let delay = due.saturating_since(arrival).as_nanos();
        let s = &mut self.stats;
        s.staged += 1;
        s.held += u64::from(due > now);
        s.delay_total_ns = s.delay_total_ns.saturating_add(delay);
        s.delay_max_ns = s.delay_max_ns.max(delay);
        s.queued_bytes += len;
        s.queued_max_bytes = s.queued_max_bytes.max(s.queued_bytes);
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(frame);
        self.fifo.push_back(Held { due, frame: buf });
        Some(due)
    }

    /// When the first frame held is due.
    #[inline]
    pub fn next_due(&self) -> Option<Instant> {
        self.fifo.front().map(|h| h.due)
    }

    /// The first frame held, if it is due at `now`: its delivery instant and its octets (give
    /// the buffer back with [`LinkStage::recycle`]).
    pub fn pop_due(&mut self, now: Instant) -> Option<(Instant, Vec<u8>)> {
        if self.fifo.front()?.due > now {
            return None;
        }
        let h = self.fifo.pop_front()?;
        self.stats.queued_bytes -= h.frame.len() as u64;
        Some((h.due, h.frame))
    }

    /// The frame last taken with [`LinkStage::pop_due`] reached the bridge `by` after its
    /// delivery instant: the bridge's time had already moved past it (a frame the loop read
    /// only after it had let the bridge run on). The loop reads every frame waiting on a
    /// staged port before it moves the bridge's time, so this counts what that bound could
    /// not prevent; a run that has many is not the network it emulates.
    pub fn note_late(&mut self, by: Duration) {
        if by > Duration::ZERO {
            self.stats.late += 1;
            self.stats.late_total_ns = self.stats.late_total_ns.saturating_add(by.as_nanos());
            self.stats.late_max_ns = self.stats.late_max_ns.max(by.as_nanos());
        }
    }

    /// A buffer to copy later frames into.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if self.spare.len() < SPARES && buf.capacity() > 0 {
            self.spare.push(buf);
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> StageStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GBIT: Rate = Rate::from_bps(1_000_000_000);
    const T: Instant = Instant::from_nanos(1_000_000);

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    fn stage() -> LinkStage {
        LinkStage::new(Some(GBIT), Overheads::FRAME, STAGE_LIMIT)
    }

    #[test]
    fn a_burst_leaves_spaced_by_the_wire_time() {
        // Three 1000-octet frames at 1 Gb/s (8 µs each) read together at T: the first is
        // delivered when it arrived, the next two 8 and 16 µs later.
        let mut s = stage();
        let f = [0u8; 1000];
        assert_eq!(s.admit(T, T, &f), Some(T));
        assert_eq!(s.admit(T, T, &f), Some(T + us(8)));
        assert_eq!(s.admit(T, T, &f), Some(T + us(16)));
        assert_eq!(s.next_due(), Some(T));
        assert_eq!(s.pop_due(T).map(|(d, b)| (d, b.len())), Some((T, 1000)));
        assert_eq!(s.pop_due(T + us(7)), None, "not before its time");
        assert_eq!(s.next_due(), Some(T + us(8)));
        assert_eq!(s.pop_due(T + us(20)).map(|x| x.0), Some(T + us(8)));
        assert_eq!(s.stats().queued_bytes, 1000);
        assert_eq!(
            s.stats(),
            StageStats {
                staged: 3,
                held: 2,
                delay_total_ns: 24_000,
                delay_max_ns: 16_000,
                queued_bytes: 1000,
                queued_max_bytes: 3000,
                ..StageStats::default()
            }
        );
    }

    #[test]
    fn frames_spaced_wider_than_the_link_pass_unchanged() {
        // Stamps 12 µs apart for 1500-octet frames (12 µs): every frame is delivered when it
        // arrived; the first one is delivered at once although the link was idle before.
        let mut s = stage();
        let f = [0u8; 1500];
        for k in 0..4 {
            let a = T + us(12 * k);
            assert_eq!(s.admit(a, T + us(60), &f), Some(a));
        }
        assert_eq!(s.stats().delay_total_ns, 0);
        assert_eq!(s.stats().held, 0);
    }

    #[test]
    fn the_later_frame_owes_its_own_wire_time() {
        // A 100-octet frame (0.8 µs) arriving 1 µs after a 1500-octet one (12 µs): its last
        // bit needs only 0.8 µs after the first frame's, so it is not delayed. A 1500-octet
        // frame arriving 1 µs after it needs 12 µs after the small frame's delivery
        // (T + 1 µs): due at T + 13 µs, 11 µs late.
        let mut s = stage();
        assert_eq!(s.admit(T, T, &[0u8; 1500]), Some(T));
        assert_eq!(s.admit(T + us(1), T, &[0u8; 100]), Some(T + us(1)));
        assert_eq!(s.admit(T + us(2), T, &[0u8; 1500]), Some(T + us(13)));
        assert_eq!(s.stats().delay_total_ns, 11_000);
    }

    #[test]
    fn line_overheads_lengthen_the_spacing() {
        // 1000 octets + 24 of Ethernet overhead (pad not needed, FCS 4, preamble + IFG 20):
        // 1024 × 8 = 8 192 ns at 1 Gb/s.
        let mut s = LinkStage::new(Some(GBIT), Overheads::ETHERNET, STAGE_LIMIT);
        let f = [0u8; 1000];
        s.admit(T, T, &f);
        assert_eq!(s.admit(T, T, &f), Some(T + Duration::from_nanos(8_192)));
        s.set_overheads(Overheads::FRAME);
        assert_eq!(s.admit(T, T, &f), Some(T + Duration::from_nanos(16_192)));
    }

    #[test]
    fn exact_serialisation_does_not_accumulate_rounding() {
        // 64-octet frames at 3 Gb/s: 170.67 ns each. Three of them back to back end 512 ns
        // after the first one's start, so the third is due 2 × 170.67 = 341.33 → 341 ns
        // after the first (a per-frame round-up would say 342).
        let mut s = LinkStage::new(
            Some(Rate::from_bps(3_000_000_000)),
            Overheads::FRAME,
            STAGE_LIMIT,
        );
        let f = [0u8; 64];
        let d0 = s.admit(T, T, &f).unwrap();
        s.admit(T, T, &f);
        let d2 = s.admit(T, T, &f).unwrap();
        assert_eq!(d2 - d0, Duration::from_nanos(341));
    }

    #[test]
    fn a_full_stage_drops_and_counts_without_charging_the_link() {
        let mut s = LinkStage::new(Some(GBIT), Overheads::FRAME, 2500);
        let f = [0u8; 1000];
        assert_eq!(s.admit(T, T, &f), Some(T));
        assert_eq!(s.admit(T, T, &f), Some(T + us(8)));
        assert_eq!(s.admit(T, T, &f), None);
        assert_eq!(s.stats().overflow_drops, 1);
        // The dropped frame took no line time: after one frame leaves, the next one follows
        // the second.
        s.pop_due(T);
        assert_eq!(s.admit(T, T, &f), Some(T + us(16)));
    }

    #[test]
    fn a_port_going_down_loses_what_was_held_and_restarts_the_link() {
        let mut s = stage();
        let f = [0u8; 1000];
        s.admit(T, T, &f);
        s.admit(T, T, &f);
        s.port_down();
        assert_eq!((s.stats().down_drops, s.stats().queued_bytes), (2, 0));
        assert_eq!(s.next_due(), None);
        assert_eq!(s.admit(T + us(1), T + us(1), &f), Some(T + us(1)));
    }

    #[test]
    fn rate_changes_keep_order_and_retime_the_frame_in_flight() {
        let mut s = stage();
        let f = [0u8; 1000];
        s.admit(T, T, &f);
        assert_eq!(s.admit(T, T, &f), Some(T + us(8)));
        // Unshaped: the stage stays active while frames are held, and later frames do not
        // overtake them.
        s.set_rate(T, None);
        assert!(s.active());
        assert_eq!(s.admit(T + us(1), T + us(1), &f), Some(T + us(8)));
        while s.pop_due(T + us(8)).is_some() {}
        assert!(!s.active());
        // A rate again: the link is free from the last delivery on; 2 Gb/s is 4 µs a frame.
        s.set_rate(T + us(8), Some(Rate::from_bps(2_000_000_000)));
        assert_eq!(s.admit(T + us(8), T + us(8), &f), Some(T + us(12)));
        // Halved while that frame is in flight at T + 10 µs: the 2 µs (4000 bits) still owed
        // take 4 µs at 1 Gb/s, so the link is free at T + 14 µs and the next frame is due at
        // T + 22 µs.
        s.set_rate(T + us(10), Some(GBIT));
        assert_eq!(s.admit(T + us(10), T + us(10), &f), Some(T + us(22)));
    }

    #[test]
    fn stamps_map_onto_the_daemons_clock() {
        // The daemon's clock reads 5 s when realtime reads 1 000 s: offset −995 s.
        let now = Instant::from_nanos(5_000_000_000);
        let off = realtime_offset(now, 1_000_000_000_000);
        assert_eq!(off, -995_000_000_000);
        // Stamped 30 µs before the read: arrived 30 µs before now.
        let a = arrival(Some(999_999_970_000), Some(off), now);
        assert_eq!(a, now - us(30));
        // A stamp after `now` (the two clocks read a little apart): now.
        assert_eq!(arrival(Some(1_000_000_000_500), Some(off), now), now);
        // No stamp, no offset, or a stamp two seconds off: now.
        assert_eq!(arrival(None, Some(off), now), now);
        assert_eq!(arrival(Some(999_999_970_000), None, now), now);
        assert_eq!(arrival(Some(998_000_000_000), Some(off), now), now);
    }
}
