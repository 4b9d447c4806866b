//! Lossless operation: generating and honouring IEEE 802.3x PAUSE and 802.1Qbb PFC.
//!
//! **Generation** (per input port). Each (input port, priority) buffer has two thresholds with
//! hysteresis, as in the QCN baseline switch (Alizadeh et al., Allerton 2008: 150 KB buffer,
//! Qhigh = 110 KB, Qlow = 44 KB): when its occupancy reaches `Qhigh` the priority becomes
//! *asserted* (XOFF) and stays so until the occupancy falls to `Qlow` or below (XON).
//! * PFC mode (802.1Q-2018 clause 36, formerly 802.1Qbb): each transition sends a PFC frame
//!   (opcode 0x0101) out of the input port. The frame states every priority: enable bit set,
//!   time = `quanta` for the asserted priorities and 0 (resume) for the others.
//! * PAUSE mode (802.3-2018 Annex 31B): the link is asserted while any priority is; XOFF is a
//!   PAUSE frame with `pause_time = quanta`, XON one with `pause_time = 0`.
//!
//! While asserted, the XOFF is re-sent before the peer's timer runs out: the pause lasts
//! `quanta × 512` bit times at the link rate (802.3-2018 clause 31B.2) and the refresh is sent
//! after half of it, so a lost or late refresh still leaves margin.
//!
//! The headroom above Qhigh (40 KB by default) must absorb what the peer sends before it
//! receives the XOFF: one round trip at line rate plus a maximum frame in each direction.
//!
//! **Reception** (per output port). A PAUSE stops every priority of the port's transmitter,
//! a PFC frame the enabled priorities, for `time × 512` bit times at the port's line rate
//! (802.3-2018 clause 31B.3.1 and Annex 31D.3); time 0 resumes at once. A frame already being
//! transmitted finishes; control frames are never paused (802.3-2018 clause 31B.3.1: PAUSE
//! inhibits only MAC-client data frames). An unshaped port has no line rate, so the quanta are
//! converted at `lossless.nominal_rate` (default 10 Gb/s).
//!
//! **Storm watchdog** (per output priority). A neighbour whose NIC or driver misbehaves can keep
//! a queue paused for ever (a PFC storm): everything waiting for that output, and through the
//! shared input buffers the other flows of the same inputs, stalls. Shipping DCB switches
//! therefore run a PFC watchdog that, when a queue stays paused longer than a detection time,
//! drops what is queued for it and what arrives for it until the pause stops, and reports the
//! event. 802.1Q does not specify one; the detection time here, `lossless.watchdog`, defaults
//! to 100 ms, a deployment default of the order vendors ship (their documented detection times
//! are 100-200 ms, e.g. SONiC's `pfcwd` 200 ms, Cisco Nexus 9000's 100 ms polling interval), not
//! a standard value; 0 turns the watchdog off. A storm is a pause the peer *keeps
//! re-asserting*: priority `p` has been stopped without a break since `since` and at least one
//! more PAUSE/PFC frame with a non-zero time for `p` arrived while it was stopped. A single
//! frame is not a storm: it stops the queue for at most 65535 quanta and then lapses on its
//! own. The storm ends (the queue is restored) when the pause lapses or the peer sends time 0.

use crate::config::{LosslessMode, NUM_PRIORITIES};
use cnm_proto::wire::MacControlRepr;
use cnm_proto::{Bytes, Duration, Instant, Rate};

/// Bits per pause quantum (802.3-2018 clause 31B.2).
pub const BITS_PER_QUANTUM: u64 = 512;

/// Time `quanta` pause quanta last at `rate`.
pub fn quanta_time(quanta: u16, rate: Rate) -> Duration {
    rate.tx_time(Bytes::new(u64::from(quanta) * BITS_PER_QUANTUM / 8))
}

/// XOFF/XON state of one input port.
#[derive(Debug, Clone)]
pub struct PauseGen {
    mode: LosslessMode,
    qhigh: u64,
    qlow: u64,
    quanta: u16,
    asserted: u8,
    refresh_at: Instant,
}

/// What [`PauseGen::update`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseAction {
    /// Nothing to send.
    None,
    /// Send a PAUSE/PFC frame now; `on` is the new state of the priority (or the link).
    Send {
        /// XOFF (true) or XON.
        on: bool,
    },
}

impl PauseGen {
    /// The generator of one input port.
    pub fn new(mode: LosslessMode, qhigh: Bytes, qlow: Bytes, quanta: u16) -> Self {
        PauseGen {
            mode,
            qhigh: qhigh.get(),
            qlow: qlow.get(),
            quanta,
            asserted: 0,
            refresh_at: Instant::MAX,
        }
    }

    /// Forgets every assertion (the link went down).
    pub fn reset(&mut self) {
        self.asserted = 0;
        self.refresh_at = Instant::MAX;
    }

    /// Lossless mode enabled.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.mode != LosslessMode::None
    }

    /// The mode.
    pub fn mode(&self) -> LosslessMode {
        self.mode
    }

    /// Priorities asserted (bit p).
    pub fn asserted(&self) -> u8 {
        self.asserted
    }

    /// Feeds the occupancy of priority `p`'s buffer after a change; applies the hysteresis.
    #[inline]
    pub fn update(&mut self, p: usize, bytes: u64) -> PauseAction {
        if self.mode == LosslessMode::None {
            return PauseAction::None;
        }
        let bit = 1u8 << p;
        let before = self.asserted;
        if before & bit == 0 && bytes >= self.qhigh {
            self.asserted |= bit;
        } else if before & bit != 0 && bytes <= self.qlow {
            self.asserted &= !bit;
        } else {
            return PauseAction::None;
        }
        match self.mode {
            LosslessMode::Pfc => PauseAction::Send {
                on: self.asserted & bit != 0,
            },
            LosslessMode::Pause => {
                if (before == 0) != (self.asserted == 0) {
                    PauseAction::Send {
                        on: self.asserted != 0,
                    }
                } else {
                    PauseAction::None
                }
            }
            LosslessMode::None => PauseAction::None,
        }
    }

    /// The frame stating the current state.
    pub fn repr(&self) -> MacControlRepr {
        match self.mode {
            LosslessMode::Pfc => {
                let mut times = [0u16; NUM_PRIORITIES];
                for (p, t) in times.iter_mut().enumerate() {
                    if self.asserted & (1 << p) != 0 {
                        *t = self.quanta;
                    }
                }
                MacControlRepr::Pfc {
                    class_enable: 0x00FF,
                    times,
                }
            }
            _ => MacControlRepr::Pause {
                quanta: if self.asserted != 0 { self.quanta } else { 0 },
            },
        }
    }

    /// Records that the current state was sent at `now` on a link of rate `rate`: schedules
    /// the refresh at half the pause time while asserted.
    pub fn sent(&mut self, now: Instant, rate: Rate) {
        self.refresh_at = if self.asserted != 0 {
            let half = Duration::from_nanos(quanta_time(self.quanta, rate).as_nanos() / 2);
            now + half.max(Duration::from_nanos(1))
        } else {
            Instant::MAX
        };
    }

    /// When the XOFF must be refreshed (`None` when nothing is asserted).
    #[inline]
    pub fn refresh_at(&self) -> Option<Instant> {
        (self.asserted != 0 && self.refresh_at != Instant::MAX).then_some(self.refresh_at)
    }
}

/// Pause state of one output port, set by received PAUSE/PFC frames.
#[derive(Debug, Clone)]
pub struct PauseRx {
    until: [Instant; NUM_PRIORITIES],
    /// Start of the current unbroken pause of each priority (`Instant::MAX`: not paused).
    since: [Instant; NUM_PRIORITIES],
    /// Priorities re-asserted (a further non-zero frame) during their current pause.
    reasserted: u8,
    /// Priorities the storm watchdog has declared in a storm.
    storm: u8,
    /// Priorities asked to stop since the watchdog last found them at rest (not stopped, no
    /// pause under way, not in a storm): the only ones besides `storm` it has to look at.
    armed: u8,
}

impl Default for PauseRx {
    fn default() -> Self {
        PauseRx {
            until: [Instant::ZERO; NUM_PRIORITIES],
            since: [Instant::MAX; NUM_PRIORITIES],
            reasserted: 0,
            storm: 0,
            armed: 0,
        }
    }
}

/// What [`PauseRx::watchdog`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StormChange {
    /// Priorities whose storm began now (bit p).
    pub started: u8,
    /// Priorities whose storm ended now (bit p).
    pub ended: u8,
}

impl PauseRx {
    /// Applies a received frame at `now` on a link of rate `rate`. Returns the priorities
    /// affected and the largest time requested (quanta).
    pub fn apply(&mut self, now: Instant, repr: &MacControlRepr, rate: Rate) -> (u8, u16) {
        match *repr {
            MacControlRepr::Pause { quanta } => {
                for p in 0..NUM_PRIORITIES {
                    self.set(p, now, quanta, rate);
                }
                (0xFF, quanta)
            }
            MacControlRepr::Pfc {
                class_enable,
                times,
            } => {
                let mut max = 0;
                let mask = (class_enable & 0xFF) as u8;
                for (p, t) in times.iter().enumerate() {
                    if mask & (1 << p) != 0 {
                        self.set(p, now, *t, rate);
                        max = max.max(*t);
                    }
                }
                (mask, max)
            }
            MacControlRepr::Unknown { .. } => (0, 0),
        }
    }

    /// Priority `p` asked to stop for `quanta` at `now`; tracks the unbroken pause.
    fn set(&mut self, p: usize, now: Instant, quanta: u16, rate: Rate) {
        let bit = 1u8 << p;
        let was_paused = self.until[p] > now;
        self.until[p] = now + quanta_time(quanta, rate);
        if quanta != 0 {
            self.armed |= bit;
        }
        if quanta == 0 {
            self.since[p] = Instant::MAX;
            self.reasserted &= !bit;
        } else if was_paused && self.since[p] != Instant::MAX {
            self.reasserted |= bit;
        } else {
            self.since[p] = now;
            self.reasserted &= !bit;
        }
    }

    /// Runs the storm watchdog at `now` with detection time `limit` (zero: off): a priority
    /// stopped without a break for at least `limit` and re-asserted meanwhile enters a storm;
    /// a priority in a storm whose pause lapsed (or was lifted) leaves it. See the module essay.
    pub fn watchdog(&mut self, now: Instant, limit: Duration) -> StormChange {
        let mut c = StormChange::default();
        // A priority neither armed nor in a storm is at rest: nothing to do or to change.
        let mut look = self.armed | self.storm;
        while look != 0 {
            let p = look.trailing_zeros() as usize;
            let bit = 1u8 << p;
            look &= !bit;
            let paused = self.until[p] > now;
            if !paused {
                self.since[p] = Instant::MAX;
                self.reasserted &= !bit;
                self.armed &= !bit;
                if self.storm & bit != 0 {
                    self.storm &= !bit;
                    c.ended |= bit;
                }
            } else if limit != Duration::ZERO
                && self.storm & bit == 0
                && self.reasserted & bit != 0
                && self.since[p] != Instant::MAX
                && now >= self.since[p] + limit
            {
                self.storm |= bit;
                c.started |= bit;
            }
        }
        c
    }

    /// Priorities in a storm (bit p).
    #[inline]
    pub fn storm(&self) -> u8 {
        self.storm
    }

    /// No priority armed, re-asserted or in a storm: [`PauseRx::watchdog`] has nothing to
    /// change and [`PauseRx::watchdog_due`] nothing to report until a
    /// PAUSE/PFC frame is received.
    #[inline]
    pub fn at_rest(&self) -> bool {
        self.armed | self.storm | self.reasserted == 0
    }

    /// When the watchdog next has something to decide with detection time `limit`: the
    /// earliest instant a re-asserted pause reaches `limit`, or a storm's pause lapses.
    pub fn watchdog_due(&self, limit: Duration) -> Option<Instant> {
        if limit == Duration::ZERO {
            return None;
        }
        let mut best: Option<Instant> = None;
        // Only priorities in a storm or re-asserted have a decision ahead.
        let mut look = self.storm | self.reasserted;
        while look != 0 {
            let p = look.trailing_zeros() as usize;
            let bit = 1u8 << p;
            look &= !bit;
            let t = if self.storm & bit != 0 {
                self.until[p]
            } else if self.reasserted & bit != 0 && self.since[p] != Instant::MAX {
                self.since[p] + limit
            } else {
                continue;
            };
            best = Some(best.map_or(t, |b| b.min(t)));
        }
        best
    }

    /// When priority `p` may transmit again (≤ now: it may).
    #[inline]
    pub fn until(&self, p: usize) -> Instant {
        self.until[p]
    }

    /// Priorities stopped at `now` (bit p).
    pub fn paused_mask(&self, now: Instant) -> u8 {
        let mut m = 0;
        for (p, u) in self.until.iter().enumerate() {
            if *u > now {
                m |= 1 << p;
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hysteresis_pfc() {
        let mut g = PauseGen::new(
            LosslessMode::Pfc,
            Bytes::new(110_000),
            Bytes::new(44_000),
            0xFFFF,
        );
        assert_eq!(g.update(3, 109_999), PauseAction::None);
        assert_eq!(g.update(3, 110_000), PauseAction::Send { on: true });
        assert_eq!(g.update(3, 120_000), PauseAction::None);
        assert_eq!(g.update(3, 44_001), PauseAction::None);
        assert_eq!(g.update(5, 110_000), PauseAction::Send { on: true });
        match g.repr() {
            MacControlRepr::Pfc {
                class_enable,
                times,
            } => {
                assert_eq!(class_enable, 0xFF);
                assert_eq!(times[3], 0xFFFF);
                assert_eq!(times[5], 0xFFFF);
                assert_eq!(times[0], 0);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(g.update(3, 44_000), PauseAction::Send { on: false });
        assert_eq!(g.asserted(), 1 << 5);
    }

    #[test]
    fn pause_mode_is_per_link() {
        let mut g = PauseGen::new(LosslessMode::Pause, Bytes::new(100), Bytes::new(10), 1000);
        assert_eq!(g.update(0, 100), PauseAction::Send { on: true });
        assert_eq!(g.update(1, 100), PauseAction::None);
        assert_eq!(g.update(0, 0), PauseAction::None);
        assert_eq!(g.repr(), MacControlRepr::Pause { quanta: 1000 });
        assert_eq!(g.update(1, 0), PauseAction::Send { on: false });
        assert_eq!(g.repr(), MacControlRepr::Pause { quanta: 0 });
        // Refresh at half of 1000 × 512 bit at 1 Gb/s = 256 us.
        g.update(0, 100);
        g.sent(Instant::ZERO, Rate::from_gbps(1));
        assert_eq!(
            g.refresh_at(),
            Some(Instant::ZERO + Duration::from_micros(256))
        );
    }

    #[test]
    fn reception() {
        let mut r = PauseRx::default();
        let t = Instant::from_nanos(1000);
        let (mask, q) = r.apply(
            t,
            &MacControlRepr::Pfc {
                class_enable: 0b100,
                times: [9, 9, 100, 9, 9, 9, 9, 9],
            },
            Rate::from_gbps(1),
        );
        assert_eq!((mask, q), (0b100, 100));
        assert_eq!(r.until(2), t + Duration::from_nanos(51_200));
        assert_eq!(r.until(1), Instant::ZERO);
        assert_eq!(r.paused_mask(t), 0b100);
        r.apply(t, &MacControlRepr::Pause { quanta: 0 }, Rate::from_gbps(1));
        assert_eq!(r.paused_mask(t), 0);
    }

    #[test]
    fn storm_watchdog() {
        // At 1 Gb/s 0xFFFF quanta last 33.55 ms; re-sent every 10 ms the pause never lapses.
        let rate = Rate::from_gbps(1);
        let limit = Duration::from_millis(100);
        let xoff = MacControlRepr::Pause { quanta: 0xFFFF };
        let mut r = PauseRx::default();
        let t0 = Instant::from_nanos(1_000_000);
        r.apply(t0, &xoff, rate);
        // One frame alone is no storm: the watchdog has nothing to wait for.
        assert_eq!(r.watchdog_due(limit), None);
        let early = t0 + Duration::from_millis(5);
        assert_eq!(r.watchdog(early, limit), StormChange::default());
        let mut t = t0;
        for _ in 0..9 {
            t += Duration::from_millis(10);
            r.apply(t, &xoff, rate);
        }
        assert_eq!(r.watchdog_due(limit), Some(t0 + limit));
        assert_eq!(
            r.watchdog(t0 + Duration::from_millis(99), limit),
            StormChange::default()
        );
        t += Duration::from_millis(10);
        r.apply(t, &xoff, rate);
        let c = r.watchdog(t0 + limit, limit);
        assert_eq!((c.started, c.ended), (0xFF, 0));
        assert_eq!(r.storm(), 0xFF);
        // The storm lasts while the peer keeps re-asserting, and ends when the pause lapses.
        let lapse = t + quanta_time(0xFFFF, rate);
        assert_eq!(r.watchdog_due(limit), Some(lapse));
        assert_eq!(r.watchdog(lapse - Duration::from_nanos(1), limit).ended, 0);
        let c = r.watchdog(lapse, limit);
        assert_eq!((c.started, c.ended), (0, 0xFF));
        assert_eq!(r.storm(), 0);
        // A PFC XON ends the unbroken pause of its priority at once; others keep theirs.
        let mut r = PauseRx::default();
        let pfc = |t3| MacControlRepr::Pfc {
            class_enable: 0b1000,
            times: [0, 0, 0, t3, 0, 0, 0, 0],
        };
        r.apply(t0, &pfc(0xFFFF), rate);
        r.apply(t0 + Duration::from_millis(10), &pfc(0xFFFF), rate);
        r.apply(t0 + Duration::from_millis(20), &pfc(0), rate);
        r.apply(t0 + Duration::from_millis(20), &pfc(0xFFFF), rate);
        assert_eq!(r.watchdog_due(limit), None, "restarted: one frame so far");
        // Off: never a storm.
        r.apply(t0 + Duration::from_millis(30), &pfc(0xFFFF), rate);
        assert_eq!(r.watchdog_due(Duration::ZERO), None);
        assert_eq!(r.watchdog_due(limit), Some(t0 + Duration::from_millis(120)));
        let late = t0 + Duration::from_millis(60);
        assert_eq!(r.watchdog(late, Duration::from_millis(1)).started, 0b1000);
    }
}
