//! Ingress burstiness: did frames reach a port faster than its link could have delivered them?
//!
//! # Why
//! A physical link delivers one frame at a time: the last bit of frame `i` arrives at least one
//! serialisation time of frame `i` after the last bit of frame `i − 1`,
//!
//! `t_i − t_{i−1} ≥ L'_i × 8 / R`,
//!
//! where `L'_i` is what the frame costs on the line ([`cnm_proto::line::Overheads`], the same
//! octets the port's own line emulation charges) and `R` the link's rate. In an emulation the
//! "link" into the switch is a veth pair and a sender process: a sender descheduled for a while
//! drains its backlog at memory speed, and the switch sees a burst no link of rate `R` could
//! have carried. Its queues then grow from an artefact of the emulation, not from the network
//! being emulated, and the congestion points react to it. Counting such frames tells a run that
//! measured QCN from a run that measured its host's scheduler.
//!
//! # The measure
//! Each received frame carries the kernel's receive time ([`cnm_proto::phy::Port::recv_batch_stamped`],
//! `TPACKET_V2` `tp_sec`/`tp_nsec`). For consecutive stamped frames of one port whose rate is
//! known, frame `i` is **early** when
//!
//! `gap_i + tolerance_i < wire_time_i`, with `tolerance_i = wire_time_i / 10 + 1 µs`.
//!
//! * The relative part ([`TOLERANCE_FRACTION`]) accepts a sender pacing a little fast: a pacer
//!   woken late by its timer sends the next frame early by a fraction of a frame time, which
//!   no queue of the emulated network notices.
//! * The absolute part ([`TOLERANCE_NS`]) absorbs the noise of the stamp itself: the kernel
//!   takes it in the receiving softirq, after the veth backlog queue, so the stamps of frames
//!   spaced exactly one wire time apart jitter by the softirq's own latency (around a
//!   microsecond on an idle machine).
//!
//! Frames shorter than the tolerance (at 1 Gb/s, a frame of under about 140 octets) are never
//! early: the measure speaks of data frames. A stamp earlier than the previous one (clock
//! steps) counts as a zero gap. The first frame of a port (and the first after the port comes
//! back or its rate changes) has no predecessor and is not measured; neither is any frame of
//! an unshaped port (no rate, nothing to compare with) or a frame without a stamp (ports that
//! cannot tell, counted `unstamped`).
//!
//! The report ([`IngressStats`], `stats` → `ports[].ingress`) gives the frames measured, the
//! early ones and the longest run of consecutive early frames (the depth of the worst burst in
//! frames). `early / measured` is the share the fidelity check of a run compares with its limit.

use cnm_proto::line::Overheads;
use cnm_proto::Rate;

/// Relative tolerance on a frame's wire time (see the module documentation): 1/10.
pub const TOLERANCE_FRACTION: u64 = 10;
/// Absolute tolerance on a gap between two kernel receive stamps (ns).
pub const TOLERANCE_NS: u64 = 1_000;

/// Counters of one port's ingress measure (`stats` → `ports[].ingress`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct IngressStats {
    /// Frames compared with their predecessor's receive time.
    pub measured: u64,
    /// Measured frames that arrived faster than the link could have delivered them.
    pub early: u64,
    /// Longest run of consecutive early frames.
    pub longest_run: u64,
    /// Frames received without a receive time.
    pub unstamped: u64,
}

impl IngressStats {
    /// `early / measured` (0 when nothing was measured).
    pub fn early_share(&self) -> f64 {
        if self.measured == 0 {
            0.0
        } else {
            self.early as f64 / self.measured as f64
        }
    }
}

/// Whether a frame whose wire time is `wire_ns` and which arrived `gap_ns` after its
/// predecessor came faster than the link could have delivered it.
pub fn is_early(gap_ns: u64, wire_ns: u64) -> bool {
    let tolerance = wire_ns / TOLERANCE_FRACTION + TOLERANCE_NS;
    gap_ns.saturating_add(tolerance) < wire_ns
}

/// The ingress measure of one port.
#[derive(Debug, Clone)]
pub struct IngressMeter {
    rate: Option<Rate>,
    overheads: Overheads,
    /// Receive stamp of the previous frame (ns).
    last: Option<u64>,
    /// Early frames in a row, up to now.
    run: u64,
    stats: IngressStats,
}

impl IngressMeter {
    /// A meter for a link of `rate` (`None`: unshaped, not measured) whose frames cost
    /// `overheads` on the line.
    pub fn new(rate: Option<Rate>, overheads: Overheads) -> IngressMeter {
        IngressMeter {
            rate,
            overheads,
            last: None,
            run: 0,
            stats: IngressStats::default(),
        }
    }

    /// The link's rate changed: the next frame starts afresh.
    pub fn set_rate(&mut self, rate: Option<Rate>) {
        self.rate = rate;
        self.restart();
    }

    /// What frames cost on the line.
    pub fn set_overheads(&mut self, overheads: Overheads) {
        self.overheads = overheads;
    }

    /// What frames cost on the line.
    pub fn overheads(&self) -> Overheads {
        self.overheads
    }

    /// The port went away or came back: the next frame has no predecessor.
    pub fn restart(&mut self) {
        self.last = None;
        self.run = 0;
    }

    /// A frame of `len` octets received at `stamp` (ns, `None`: unknown).
    #[inline]
    pub fn record(&mut self, stamp: Option<u64>, len: usize) {
        let Some(t) = stamp else {
            self.stats.unstamped += 1;
            return;
        };
        let prev = self.last.replace(t);
        let (Some(prev), Some(rate)) = (prev, self.rate) else {
            return;
        };
        if rate.bps() == 0 {
            return;
        }
        let wire = rate.tx_time(self.overheads.wire_bytes(len)).as_nanos();
        self.stats.measured += 1;
        if is_early(t.saturating_sub(prev), wire) {
            self.stats.early += 1;
            self.run += 1;
            self.stats.longest_run = self.stats.longest_run.max(self.run);
        } else {
            self.run = 0;
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> IngressStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GBIT: Rate = Rate::from_bps(1_000_000_000);

    #[test]
    fn tolerance_is_a_tenth_plus_a_microsecond() {
        // 1500 octets at 1 Gb/s, frame octets only: 12 000 ns; tolerance 1 200 + 1 000.
        assert!(is_early(9_799, 12_000));
        assert!(!is_early(9_800, 12_000));
        assert!(!is_early(12_000, 12_000));
        // A 100-octet frame (800 ns) is shorter than the tolerance: never early.
        assert!(!is_early(0, 800));
    }

    #[test]
    fn hand_computed_arrivals() {
        let mut m = IngressMeter::new(Some(GBIT), Overheads::FRAME);
        // 1500-octet frames need 12 µs each at 1 Gb/s.
        let arrivals = [
            1_000_000, // first: not measured
            1_012_000, // 12 µs: on time
            1_013_000, // 1 µs: early
            1_014_000, // 1 µs: early
            1_015_000, // 1 µs: early (run of 3)
            1_030_000, // 15 µs: fine
            1_035_000, // 5 µs: early (run of 1)
            1_044_900, // 9.9 µs: within the tolerance
            1_044_000, // stepped back: a zero gap, early
        ];
        for t in arrivals {
            m.record(Some(t), 1500);
        }
        m.record(None, 1500);
        let s = m.stats();
        assert_eq!(
            s,
            IngressStats {
                measured: 8,
                early: 5,
                longest_run: 3,
                unstamped: 1,
            }
        );
        assert!((s.early_share() - 5.0 / 8.0).abs() < 1e-12);
    }

    #[test]
    fn line_overheads_lengthen_the_wire_time() {
        // 1500 + 24 octets of Ethernet overhead = 12 192 ns at 1 Gb/s; threshold 9 972.8 ns.
        let mut m = IngressMeter::new(Some(GBIT), Overheads::ETHERNET);
        m.record(Some(0), 1500);
        m.record(Some(9_950), 1500);
        assert_eq!(m.stats().early, 1);
        m.set_overheads(Overheads::FRAME);
        m.record(Some(9_950 + 9_950), 1500);
        assert_eq!(m.stats().early, 1);
    }

    #[test]
    fn unshaped_ports_and_restarts_are_not_measured() {
        let mut m = IngressMeter::new(None, Overheads::FRAME);
        m.record(Some(0), 1500);
        m.record(Some(1), 1500);
        assert_eq!(m.stats().measured, 0);
        m.set_rate(Some(GBIT));
        m.record(Some(2), 1500);
        assert_eq!(m.stats().measured, 0);
        m.record(Some(3), 1500);
        assert_eq!((m.stats().measured, m.stats().early), (1, 1));
        m.restart();
        m.record(Some(4), 1500);
        assert_eq!(m.stats().measured, 1);
        assert_eq!(IngressStats::default().early_share(), 0.0);
    }
}
