//! Received PAUSE (802.3 Annex 31B) and PFC (802.1Q clause 36 / 802.1Qbb) frames.
//!
//! A PAUSE frame stops all transmission for `pause_time` quanta; PFC stops each priority whose
//! class-enable bit is set for its own time. A quantum is 512 bit times at the line rate
//! (802.3 clause 31B.2), so `q` quanta last `q · 512 / line_rate` seconds. A time of 0 resumes
//! at once; a new frame replaces the running time.

use crate::config::NUM_PRIORITIES;
use cnm_proto::wire::MacControlRepr;
use cnm_proto::{Bytes, Instant, Rate};

/// Until when each priority is paused.
#[derive(Debug, Clone, Default)]
pub struct PauseState {
    until: [Instant; NUM_PRIORITIES],
}

impl PauseState {
    /// Applies a received MAC Control frame. Returns the priorities affected (bit p = priority
    /// p) and the largest time in quanta, or `None` for an unknown opcode.
    pub fn on_frame(
        &mut self,
        now: Instant,
        repr: &MacControlRepr,
        line_rate: Rate,
    ) -> Option<(u8, u16)> {
        let dur = |q: u16| line_rate.tx_time(Bytes::new(u64::from(q) * 64));
        match *repr {
            MacControlRepr::Pause { quanta } => {
                let until = now.saturating_add(dur(quanta));
                self.until = [until; NUM_PRIORITIES];
                Some((0xff, quanta))
            }
            MacControlRepr::Pfc {
                class_enable,
                times,
            } => {
                let mut mask = 0u8;
                let mut max = 0;
                for (p, t) in times.iter().enumerate() {
                    if class_enable & (1 << p) != 0 {
                        self.until[p] = now.saturating_add(dur(*t));
                        mask |= 1 << p;
                        max = max.max(*t);
                    }
                }
                Some((mask, max))
            }
            MacControlRepr::Unknown { .. } => None,
        }
    }

    /// Whether `priority` may not transmit at `now`.
    #[inline]
    pub fn paused(&self, priority: u8, now: Instant) -> bool {
        self.until
            .get(usize::from(priority))
            .is_some_and(|u| now < *u)
    }

    /// When `priority` may transmit again.
    pub fn until(&self, priority: u8) -> Instant {
        self.until
            .get(usize::from(priority))
            .copied()
            .unwrap_or(Instant::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cnm_proto::Duration;

    #[test]
    fn pause_and_pfc_times() {
        let mut p = PauseState::default();
        let t0 = Instant::from_nanos(1_000);
        // 100 quanta at 1 Gb/s = 51 200 bit times = 51.2 µs.
        assert_eq!(
            p.on_frame(
                t0,
                &MacControlRepr::Pause { quanta: 100 },
                Rate::from_gbps(1)
            ),
            Some((0xff, 100))
        );
        assert!(p.paused(0, t0));
        assert!(p.paused(7, t0 + Duration::from_nanos(51_199)));
        assert!(!p.paused(7, t0 + Duration::from_nanos(51_200)));
        let mut times = [0u16; 8];
        times[3] = 10;
        times[5] = 20;
        let r = MacControlRepr::Pfc {
            class_enable: 1 << 3,
            times,
        };
        assert_eq!(p.on_frame(t0, &r, Rate::from_mbps(100)), Some((0x08, 10)));
        // 10 quanta at 100 Mb/s = 51.2 µs; priority 5 is not enabled; priority 3 replaced.
        assert_eq!(p.until(3), t0 + Duration::from_nanos(51_200));
        let r = MacControlRepr::Pfc {
            class_enable: 1 << 3,
            times: [0; 8],
        };
        p.on_frame(t0, &r, Rate::from_mbps(100));
        assert!(!p.paused(3, t0));
        assert_eq!(
            p.on_frame(
                t0,
                &MacControlRepr::Unknown { opcode: 9 },
                Rate::from_gbps(1)
            ),
            None
        );
        assert!(!p.paused(9, t0));
    }
}
