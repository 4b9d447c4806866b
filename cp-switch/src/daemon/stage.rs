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
//! * A port without a rate, an ingress delay or stamps has no stage (its frames go straight to
//!   the bridge). When a port's
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
//! # The link's delay and the senders' departure stamps
//! A port may be given the propagation delay `D` of the link into it (`ingress_delay`): the
//! frame then arrives at `a_i = r_i + D`, `r_i` its receive time as above, and the link's
//! delay is emulated here rather than on the sender's side. Alone that changes nothing but
//! where the delay is spent. It gives the stage a **lookahead**: a frame may reach the switch
//! up to `D` after it left its sender without arriving late. A port that trusts **departure
//! stamps** (`departure_stamps`; [`cnm_proto::wire::generated`]) uses it: an emulated host's
//! agent writes into each generated frame the instant `s_i` its pacers let the frame's first
//! bit start (another switch's port with `stamp_departures`, the instant its shaper starts
//! the frame), and the frame arrives where the physical link would have delivered it,
//!
//! `a_i = s_i + wire_i + D`, kept within `[r_i, r_i + D]`,
//!
//! however late the sender's process actually sent it, as long as that lag stays under `D`
//! (the idea of conservative parallel simulation: a link of delay `D` lets its receiver run
//! `D` behind its sender). What a stamp can do is bounded: never later than `r_i + D` (a
//! frame cannot have left after it was received), never earlier than `r_i`: a frame whose
//! sender lagged by more than the lookahead arrives when it was received, spaced from the
//! frames before it at the link's rate like any frame, and is counted `behind`. Frames
//! without a stamp (real traffic, a frame too short for the field) arrive at `r_i + D`. The
//! order of a port's frames is the link's either way (`d_i ≥ d_{i−1} + wire_i`).
//!
//! The stage delay of a frame is `d_i − a_i`, the time the link's rate adds to the frame's
//! arrival; the report ([`StageStats`], `stats` → `ports[].ingress.stage`) gives the frames
//! through the stage, the frames held, the total and the largest delay and the drops. The
//! early-frame measure of [`super::ingress`] stays on the raw stamps: it describes the
//! emulation, the stage corrects its effect.

use std::collections::VecDeque;

use cnm_proto::line::{LineClock, Overheads};
use cnm_proto::wire::generated;
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
    /// Of those, frames the link's rate held back: due later than their own arrival and than
    /// the loop's time when they were read (a frame waiting only for its link's delay is not
    /// counted).
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
    /// Frames placed by their sender's departure stamp (a port that trusts them).
    pub stamped: u64,
    /// Of those, frames whose stamp was older than the lookahead allows (`s_i + wire_i + D`
    /// before their receive time): their sender's process lagged by more than the link's
    /// delay, and they could not be placed where the link would have delivered them.
    pub behind: u64,
    /// Largest such excess over the lookahead (ns).
    pub behind_max_ns: u64,
}

/// Where a frame received at `received` arrives, on a link of propagation delay `delay` whose
/// sender stamped it `stamp` (its first bit's departure; `None`: not stamped or not trusted)
/// and on which it takes `wire` to serialise: `stamp + wire + delay` kept within `[received,
/// received + delay]`, or `received + delay` without a stamp; and by how much the stamp was
/// behind the lookahead (`received − (stamp + wire + delay)` when positive). A frame behind
/// arrives when it was received: never in the past, where the link's clock would let a burst
/// of such frames through at once. See the module documentation.
pub fn placed_arrival(
    received: Instant,
    delay: Duration,
    stamp: Option<Instant>,
    wire: Duration,
) -> (Instant, Option<Duration>) {
    let Some(s) = stamp else {
        return (received + delay, None);
    };
    let meant = s + wire + delay;
    let behind = (meant < received).then(|| received.saturating_since(meant));
    (meant.clamp(received, received + delay), behind)
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
    /// The propagation delay of the link into the port, emulated here (the lookahead).
    delay: Duration,
    /// Whether the senders' departure stamps are trusted.
    stamps: bool,
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
            delay: Duration::ZERO,
            stamps: false,
            last_due: Instant::ZERO,
            fifo: VecDeque::new(),
            spare: Vec::new(),
            stats: StageStats::default(),
        }
    }

    /// The link into the port has propagation delay `delay`, emulated by the stage, and its
    /// sender's departure stamps are trusted when `stamps` (see the module documentation).
    /// The stage then also holds what is in flight on the link: its limit grows by the
    /// link's rate × `delay`.
    pub fn with_link(mut self, delay: Duration, stamps: bool) -> LinkStage {
        self.delay = delay;
        self.stamps = stamps;
        if let Some(l) = &self.line {
            self.limit = self.limit.saturating_add(l.rate().bytes_in(delay).get());
        }
        self
    }

    /// Whether frames of this port go through the stage: it has a rate, a link delay or
    /// stamps to apply, or still holds frames that later ones must not overtake.
    #[inline]
    pub fn active(&self) -> bool {
        self.line.is_some() || self.delay > Duration::ZERO || self.stamps || !self.fifo.is_empty()
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

    /// A frame received at `received` read by the loop at `now`: its delivery instant
    /// `d_i`, or `None` when the stage is full (the frame is dropped and counted).
    pub fn admit(&mut self, received: Instant, now: Instant, frame: &[u8]) -> Option<Instant> {
        let len = frame.len() as u64;
        if self.stats.queued_bytes + len > self.limit {
            self.stats.overflow_drops += 1;
            return None;
        }
        let wire = self
            .line
            .as_ref()
            .map_or(Duration::ZERO, |l| l.frame_time(frame.len()));
        let stamp = if self.stamps {
            generated::departure(frame)
        } else {
            None
        };
        let (arrival, behind) = placed_arrival(received, self.delay, stamp, wire);
        if stamp.is_some() {
            let s = &mut self.stats;
            s.stamped += 1;
            if let Some(b) = behind {
                s.behind += 1;
                s.behind_max_ns = s.behind_max_ns.max(b.as_nanos());
            }
        }
        let due = match &mut self.line {
            Some(l) => {
                // The link starts the frame so that its last bit arrives no earlier than
                // `arrival`, and no earlier than it is free.
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
        // Held back by the link's rate beyond the frame's arrival (a frame waiting only for
        // its link's delay is not).
        s.held += u64::from(due > now.max(arrival));
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
    fn placement_by_departure_stamp_within_the_lookahead() {
        let d = us(100);
        let wire = us(12);
        // No stamp: received + D.
        assert_eq!(placed_arrival(T, d, None, wire), (T + d, None));
        // Left 40 µs before it was received (its sender's loop lagged 28 µs beyond the wire
        // time): placed where the link would have delivered it, stamp + wire + D.
        let s = T - us(40);
        assert_eq!(placed_arrival(T, d, Some(s), wire), (T + us(72), None));
        // A stamp after the frame could have left (s + wire > received): received + D.
        assert_eq!(placed_arrival(T, d, Some(T), wire), (T + d, None));
        assert_eq!(
            placed_arrival(T, d, Some(Instant::MAX), wire),
            (T + d, None)
        );
        // Lagged 150 µs: 38 µs beyond the lookahead; placed when it was received, not in
        // the past.
        let s = T - us(150);
        assert_eq!(placed_arrival(T, d, Some(s), wire), (T, Some(us(38))));
        assert_eq!(
            placed_arrival(T, d, Some(Instant::from_nanos(1)), wire),
            (
                T,
                Some(T.saturating_since(Instant::from_nanos(1) + wire + d))
            )
        );
        // Exactly at the lookahead's edge: not behind.
        let s = T - us(112);
        assert_eq!(placed_arrival(T, d, Some(s), wire), (T, None));
    }

    /// A sender's process wakes late and sends three 1000-octet frames (8 µs each at 1 Gb/s)
    /// stamped 8 µs apart, all received at T + 30 µs, on a link of 100 µs: the stage delivers
    /// them 8 µs apart from the first one's stamp + 8 + 100 µs, as the link would have, not
    /// bunched at the receive time. A frame without a stamp follows the link's rule from
    /// received + D; frames stamped 158 µs before they were received are behind by 50 µs and
    /// arrive when received, spaced by the link; the stats count all of it.
    #[test]
    fn stamped_frames_are_delivered_where_their_link_would_have() {
        let stamped = |at: Instant| {
            let mut f = vec![0u8; 1000];
            f[12..14].copy_from_slice(&generated::GEN_ETHERTYPE.to_be_bytes());
            f[14..18].copy_from_slice(&generated::MAGIC.to_be_bytes());
            assert!(generated::set_departure(&mut f, at));
            f
        };
        let mut s = stage().with_link(us(100), true);
        assert!(s.active());
        let r = T + us(30);
        assert_eq!(s.admit(r, r, &stamped(T)), Some(T + us(108)));
        assert_eq!(s.admit(r, r, &stamped(T + us(8))), Some(T + us(116)));
        assert_eq!(s.admit(r, r, &stamped(T + us(16))), Some(T + us(124)));
        // Unstamped: received + D = T + 130 µs, but the link delivers the frame before it
        // at T + 124 µs and this one takes its own 8 µs: T + 132 µs.
        assert_eq!(s.admit(r, r, &[0u8; 1000]), Some(T + us(132)));
        // Received at T + 200 µs, stamped T + 42 µs: meant for T + 150, 50 µs behind; it
        // arrives when it was received, T + 200 µs. Four more like it, read together, leave
        // 8 µs apart from there, not at one instant.
        let r2 = T + us(200);
        assert_eq!(s.admit(r2, r2, &stamped(T + us(42))), Some(T + us(200)));
        for k in 1..=4 {
            assert_eq!(
                s.admit(r2, r2, &stamped(T + us(42 + 8 * k))),
                Some(T + us(200 + 8 * k))
            );
        }
        let st = s.stats();
        assert_eq!((st.stamped, st.behind, st.behind_max_ns), (8, 5, 50_000));
        // The unstamped frame waited for the link's rate 2 µs beyond its own arrival, the
        // four behind ones after the first 8, 16, 24 and 32 µs.
        assert_eq!((st.held, st.delay_total_ns), (5, 82_000));
        // A port that does not trust stamps places the same frames by their receive time.
        let mut s = stage().with_link(us(100), false);
        assert_eq!(s.admit(r, r, &stamped(T)), Some(r + us(100)));
        assert_eq!(s.admit(r, r, &stamped(T + us(8))), Some(r + us(108)));
        assert_eq!(s.stats().stamped, 0);
    }

    #[test]
    fn the_limit_makes_room_for_what_the_link_holds_in_flight() {
        // 2500 octets of stage, plus 1 Gb/s × 100 µs = 12 500 octets in flight: fifteen
        // 1000-octet frames fit, the sixteenth is dropped.
        let mut s = LinkStage::new(Some(GBIT), Overheads::FRAME, 2500).with_link(us(100), false);
        let f = [0u8; 1000];
        for _ in 0..15 {
            assert!(s.admit(T, T, &f).is_some());
        }
        assert_eq!(s.admit(T, T, &f), None);
        assert_eq!(s.stats().overflow_drops, 1);
    }

    #[test]
    fn a_link_delay_alone_makes_an_unshaped_port_staged() {
        let mut s = LinkStage::new(None, Overheads::FRAME, STAGE_LIMIT);
        assert!(!s.active());
        s = s.with_link(us(50), false);
        assert!(s.active());
        let f = [0u8; 100];
        assert_eq!(s.admit(T, T, &f), Some(T + us(50)));
        // Order is kept: an earlier receive time cannot overtake.
        assert_eq!(s.admit(T - us(10), T, &f), Some(T + us(50)));
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
