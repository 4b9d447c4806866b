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
}

impl Default for PauseRx {
    fn default() -> Self {
        PauseRx {
            until: [Instant::ZERO; NUM_PRIORITIES],
        }
    }
}

impl PauseRx {
    /// Applies a received frame at `now` on a link of rate `rate`. Returns the priorities
    /// affected and the largest time requested (quanta).
    pub fn apply(&mut self, now: Instant, repr: &MacControlRepr, rate: Rate) -> (u8, u16) {
        match *repr {
            MacControlRepr::Pause { quanta } => {
                let until = now + quanta_time(quanta, rate);
                self.until = [until; NUM_PRIORITIES];
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
                        self.until[p] = now + quanta_time(*t, rate);
                        max = max.max(*t);
                    }
                }
                (mask, max)
            }
            MacControlRepr::Unknown { .. } => (0, 0),
        }
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
}
