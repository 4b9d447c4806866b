//! The arithmetic of `gen` and `sink` reports, kept apart from the I/O so it can be checked by
//! hand: when intervals end, how long a flow was active, what rate that makes, and how numbers
//! are printed.
//!
//! The reports follow iperf3's shape: a header line (`[ ID] Interval  Transfer  Bitrate ...`),
//! one line per flow per interval, and after a separator the totals of each flow. With `-J`
//! (`--json`) nothing is printed while the tool runs and one JSON document follows at the end:
//! `{"start": {...}, "intervals": [...], "end": {...}}`, as `iperf3 -J` writes.
//!
//! **Intervals.** A [`Schedule`] puts the interval boundaries at `start + k · every` (they do
//! not drift with the lateness of the loop that notices them), and the interval reported at a
//! boundary runs from the previous report to the instant the counters were read. When the tool
//! stops — its `--duration` reached or a signal — whatever time passed since the last report
//! is a last, usually partial, interval ([`Schedule::finish`]); it is printed like the others,
//! so `--duration 4s` with 1-second intervals prints four lines per flow and the intervals
//! together cover the whole run.
//!
//! **Active time.** A flow's final rate is taken over its own active time, from its first to its
//! last frame ([`Activity`]), not over the lifetime of the process: a sink that listens for 10 s
//! to a flow that sent 25 Mb/s for 4 s reports 25 Mb/s, not 10. Of `n` frames seen at
//! `t_1 ≤ … ≤ t_n`, the octets after the first crossed the gap `t_n − t_1` (the first frame's
//! octets arrived before `t_1`): rate = (octets − first frame's octets) · 8 / (t_n − t_1). A CBR
//! flow of one 1000-octet frame per millisecond then measures exactly 8 Mb/s whatever its length.
//!
//! **Units.** Transfers are in decimal octet multiples (kB = 10³, MB = 10⁶, GB = 10⁹ octets),
//! rates in decimal bit/s multiples (kbit/s, Mbit/s, Gbit/s) as tc writes them; times in
//! seconds since the tool started.

use cnm_proto::{Duration, Instant};

/// The `[ ID]` header of a generator's flow lines.
pub const GEN_HEADER: &str = "[ ID] Interval           Transfer      Bitrate           Frames  RP";
/// The header of a sink's flow lines.
pub const SINK_HEADER: &str =
    "[ ID] Interval           Transfer      Bitrate           Frames  Lost  Reord  Delay min/mean/max (us)";
/// The line between the intervals and the totals.
pub const SEPARATOR: &str = "- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -";

/// Interval boundaries at `start + k · every`, and the intervals reported so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    start: Instant,
    every: Duration,
    end: Option<Instant>,
    /// Where the next interval starts (the last report, or `start`).
    last: Instant,
    /// The next boundary.
    due: Instant,
}

impl Schedule {
    /// Intervals of `every` (at least 1 ms) from `start`, the last one ending at `end` if given.
    pub fn new(start: Instant, every: Duration, end: Option<Instant>) -> Schedule {
        let every = every.max(Duration::from_millis(1));
        let mut s = Schedule {
            start,
            every,
            end,
            last: start,
            due: start,
        };
        s.due = s.boundary_after(start);
        s
    }

    /// The first boundary strictly after `t` (capped at the end).
    fn boundary_after(&self, t: Instant) -> Instant {
        let k = t.saturating_since(self.start).as_nanos() / self.every.as_nanos() + 1;
        let b = self.start + self.every.saturating_mul(k);
        self.end.map_or(b, |e| b.min(e))
    }

    /// The next boundary: when the loop should wake up to report.
    pub fn due(&self) -> Instant {
        self.due
    }

    /// At `now`: if a boundary has come, the interval that ends (offsets `(from, to)` since the
    /// start, `to` = `now`) and the schedule moves to the next boundary after `now`; otherwise
    /// `None`.
    pub fn tick(&mut self, now: Instant) -> Option<(Duration, Duration)> {
        if now < self.due {
            return None;
        }
        let iv = self.close(now);
        self.due = self.boundary_after(now);
        Some(iv)
    }

    /// At the stop: the last interval, from the previous report to `now`, unless no time passed.
    pub fn finish(&mut self, now: Instant) -> Option<(Duration, Duration)> {
        if now <= self.last {
            return None;
        }
        Some(self.close(now))
    }

    fn close(&mut self, now: Instant) -> (Duration, Duration) {
        let iv = (
            self.last.saturating_since(self.start),
            now.saturating_since(self.start),
        );
        self.last = now;
        iv
    }
}

/// Frames and octets of one flow, with its first and last frame: the flow's active time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Activity {
    /// Frames counted.
    pub frames: u64,
    /// Octets counted.
    pub bytes: u64,
    /// When the first frame was counted and its length.
    pub first: Option<(Instant, u64)>,
    /// When the last frame was counted.
    pub last: Instant,
}

impl Activity {
    /// Counts a frame of `len` octets at `now`.
    pub fn on_frame(&mut self, now: Instant, len: u64) {
        self.frames += 1;
        self.bytes += len;
        self.first.get_or_insert((now, len));
        self.last = self.last.max(now);
    }

    /// First to last frame (zero with fewer than two frames).
    pub fn active(&self) -> Duration {
        self.first
            .map_or(Duration::ZERO, |(t, _)| self.last.saturating_since(t))
    }

    /// Rate over the active time (bit/s): the octets after the first frame over the time from
    /// the first to the last frame; `None` while that time is zero (fewer than two frames, or
    /// all at one instant).
    pub fn active_bps(&self) -> Option<f64> {
        let (_, first_len) = self.first?;
        let secs = self.active().as_secs_f64();
        (secs > 0.0).then(|| self.bytes.saturating_sub(first_len) as f64 * 8.0 / secs)
    }
}

/// Rate (bit/s) of `bytes` over `secs` (0 for an empty interval).
pub fn bps(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs
    } else {
        0.0
    }
}

/// The growth of a cumulative counter since `prev`; a counter that went backwards was reset
/// (a flow slot reused), so all of `now` is new.
pub fn counter_delta(prev: u64, now: u64) -> u64 {
    if now >= prev {
        now - prev
    } else {
        now
    }
}

/// Octets with a decimal unit, three significant digits as iperf3 prints: `512 B`, `1.19 MB`,
/// `25.0 MB`, `125 MB`.
pub fn fmt_octets(bytes: u64) -> String {
    scaled(bytes as f64, &["B", "kB", "MB", "GB", "TB"])
}

/// A rate with a decimal unit: `940 Mbit/s`, `9.81 Mbit/s`.
pub fn fmt_bps(bps: f64) -> String {
    scaled(bps, &["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"])
}

fn scaled(mut v: f64, units: &[&str]) -> String {
    let mut u = 0;
    while v >= 1000.0 && u + 1 < units.len() {
        v /= 1000.0;
        u += 1;
    }
    let digits = if u == 0 || v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {}", units[u])
}

/// An interval as iperf3 prints it: `  3.00-4.00   sec`.
pub fn fmt_interval(from: Duration, to: Duration) -> String {
    format!("{:6.2}-{:<6.2} sec", from.as_secs_f64(), to.as_secs_f64())
}

/// A list of flow ids as `0`, `0,1` or `0-3` (consecutive runs joined).
pub fn fmt_flows(flows: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < flows.len() {
        let mut j = i;
        while j + 1 < flows.len() && flows[j + 1] == flows[j] + 1 {
            j += 1;
        }
        out.push(if j >= i + 2 {
            format!("{}-{}", flows[i], flows[j])
        } else if j == i + 1 {
            format!("{},{}", flows[i], flows[j])
        } else {
            flows[i].to_string()
        });
        i = j + 1;
    }
    out.join(",")
}

/// Groups generator flows by the limiter (agent flow) that carries them: `of[i]` is the agent
/// flow of generator flow `i` (`None` while it has none); the result lists each agent flow once,
/// in order of its first generator flow, with its generator flows.
pub fn group_by_limiter(of: &[Option<u32>]) -> Vec<(u32, Vec<u32>)> {
    let mut out: Vec<(u32, Vec<u32>)> = Vec::new();
    for (i, a) in of.iter().enumerate() {
        let Some(a) = *a else { continue };
        match out.iter_mut().find(|(x, _)| *x == a) {
            Some((_, v)) => v.push(i as u32),
            None => out.push((a, vec![i as u32])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: u64) -> Instant {
        Instant::from_nanos(x * 1_000_000_000)
    }
    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    #[test]
    fn four_second_run_reports_four_intervals_including_the_last() {
        // --duration 4s --interval 1s from t = 10 s: boundaries at 11, 12, 13 and the end 14.
        let mut sc = Schedule::new(s(10), ms(1000), Some(s(14)));
        assert_eq!(sc.due(), s(11));
        assert_eq!(sc.tick(s(10) + ms(999)), None);
        // Noticed 2 ms late: the interval ends when the counters are read; the next boundary
        // stays at 12 s (no drift).
        assert_eq!(sc.tick(s(11) + ms(2)), Some((ms(0), ms(1002))));
        assert_eq!(sc.due(), s(12));
        assert_eq!(sc.tick(s(12)), Some((ms(1002), ms(2000))));
        assert_eq!(sc.tick(s(13)), Some((ms(2000), ms(3000))));
        // The last boundary is the end itself.
        assert_eq!(sc.due(), s(14));
        // The loop stops at the end (1 ms past it); the fourth interval is the last one.
        assert_eq!(sc.finish(s(14) + ms(1)), Some((ms(3000), ms(4001))));
        // Nothing after it.
        assert_eq!(sc.finish(s(14) + ms(1)), None);
    }

    #[test]
    fn a_stop_between_boundaries_is_a_partial_interval_and_a_late_tick_skips_boundaries() {
        let mut sc = Schedule::new(s(0), ms(1000), None);
        // Woken 2.5 s late: one interval covers it, the next boundary is 3 s.
        assert_eq!(sc.tick(s(2) + ms(500)), Some((ms(0), ms(2500))));
        assert_eq!(sc.due(), s(3));
        // SIGINT at 3.25 s: the boundary at 3 s was reported, 0.25 s remain.
        assert_eq!(sc.tick(s(3)), Some((ms(2500), ms(3000))));
        assert_eq!(sc.finish(s(3) + ms(250)), Some((ms(3000), ms(3250))));
        // A stop exactly at a reported boundary adds nothing.
        let mut sc = Schedule::new(s(0), ms(500), None);
        assert!(sc.tick(s(1)).is_some());
        assert_eq!(sc.finish(s(1)), None);
        // An interval under 1 ms is taken as 1 ms.
        assert_eq!(
            Schedule::new(s(0), ms(0), None).due(),
            Instant::from_nanos(1_000_000)
        );
    }

    #[test]
    fn rate_over_the_active_time() {
        // Ten 1000-octet frames, one per millisecond from 2 s: 9 ms between first and last,
        // 9000 octets after the first: 8 Mb/s exactly.
        let mut a = Activity::default();
        assert_eq!(a.active_bps(), None);
        for k in 0..10 {
            a.on_frame(s(2) + ms(k), 1000);
        }
        assert_eq!((a.frames, a.bytes), (10, 10_000));
        assert_eq!(a.active(), ms(9));
        assert!((a.active_bps().unwrap() - 8e6).abs() < 1e-3);
        // A process that lived 10 s would have said 10 000 · 8 / 10 = 8 kb/s.
        assert_eq!(bps(10_000, 10.0), 8000.0);
        // One frame: no active time, no rate.
        let mut one = Activity::default();
        one.on_frame(s(1), 1500);
        assert_eq!((one.active(), one.active_bps()), (Duration::ZERO, None));
        assert_eq!(bps(1, 0.0), 0.0);
    }

    #[test]
    fn deltas_and_groups() {
        assert_eq!(counter_delta(5, 12), 7);
        assert_eq!(counter_delta(12, 12), 0);
        // Reset (slot reused): the new count is all new.
        assert_eq!(counter_delta(12, 3), 3);
        // Flows 0 and 1 share agent flow 4, flow 2 has flow 7, flow 3 none yet.
        assert_eq!(
            group_by_limiter(&[Some(4), Some(4), Some(7), None]),
            vec![(4, vec![0, 1]), (7, vec![2])]
        );
        assert_eq!(fmt_flows(&[0, 1]), "0,1");
        assert_eq!(fmt_flows(&[0, 1, 2, 3, 7]), "0-3,7");
        assert_eq!(fmt_flows(&[5]), "5");
    }

    #[test]
    fn units_are_decimal_with_three_digits() {
        assert_eq!(fmt_octets(512), "512 B");
        assert_eq!(fmt_octets(1_190_000), "1.19 MB");
        assert_eq!(fmt_octets(25_000_000), "25.0 MB");
        assert_eq!(fmt_octets(125_000_000), "125 MB");
        assert_eq!(fmt_bps(940e6), "940 Mbit/s");
        assert_eq!(fmt_bps(9.81e6), "9.81 Mbit/s");
        assert_eq!(fmt_bps(0.0), "0 bit/s");
        assert_eq!(fmt_interval(ms(3000), ms(4000)), "  3.00-4.00   sec");
    }
}
