//! The receiving end of [`super::Source`]: per-flow counters from the payload header.
//!
//! A flow is (source MAC, flow id). For each: frames and octets, loss (gaps in the sequence
//! numbers; a late frame that fills a gap takes one back from the loss count and counts as
//! reordered; a duplicate counts as reordered too), one-way delay `now − sent` (minimum, mean,
//! maximum; meaningful when sender and sink share a clock, e.g. two namespaces of one host),
//! the first and last frame (the flow's active time, [`Activity`]) and the counts of the current
//! reporting interval (octets, frames, loss, reordering and delay of that interval only). Memory
//! is bounded by `max_flows`; frames of further flows are counted in `untracked`.
//!
//! Counters live in a table in the order flows were first seen (the position is the flow's
//! [`FlowCounters::id`]), found through an index ordered by (source MAC, flow id). A sink of a
//! few interleaved flows (the dumbbell's four, an incast's sixteen) meets the same keys over and
//! over, so a small direct-mapped cache of key → position, placed by the flow id's low bits,
//! answers most frames without searching the index (that search was 3 % of the simulator's
//! instructions on the 4-flow dumbbell).
//!
//! Reports ([`FlowReport`]) give times in seconds since an origin the caller chooses (the
//! sink's start): an interval report covers the interval the caller names, a summary covers the
//! flow's active time, first to last frame, and its rate is [`Activity::active_bps`].

use super::report::{self, Activity};
use super::{header_offset, PayloadHeader};
use cnm_proto::wire::{walk, EthernetAddress};
use cnm_proto::{Duration, Instant};
use serde::Serialize;
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

/// Entries of [`Sink`]'s cache of recently met flows.
const CACHE: usize = 16;

/// Counters of one flow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FlowCounters {
    /// The flow's number in the order flows were first seen (from 0): the `[ ID]` of reports.
    pub id: u32,
    /// Frames and octets with the first and last frame's time.
    #[serde(skip)]
    pub activity: Activity,
    /// Frames received.
    pub frames: u64,
    /// Octets received (as seen on the sink's port).
    pub bytes: u64,
    /// Frames missing (sequence gaps not filled later).
    pub lost: u64,
    /// Frames that arrived after a higher sequence number.
    pub reordered: u64,
    /// Smallest one-way delay (ns).
    pub delay_min_ns: u64,
    /// Largest one-way delay (ns).
    pub delay_max_ns: u64,
    /// Sum of one-way delays (ns), for the mean.
    pub delay_sum_ns: u128,
    /// Next sequence number expected.
    pub next_seq: u64,
    /// Octets of the current interval.
    pub interval_bytes: u64,
    /// Frames of the current interval.
    pub interval_frames: u64,
    /// Smallest one-way delay of the current interval (ns).
    pub interval_delay_min_ns: u64,
    /// Largest one-way delay of the current interval (ns).
    pub interval_delay_max_ns: u64,
    /// Sum of the current interval's one-way delays (ns).
    pub interval_delay_sum_ns: u128,
    /// `lost` when the current interval started.
    pub interval_lost_base: u64,
    /// `reordered` when the current interval started.
    pub interval_reordered_base: u64,
}

impl FlowCounters {
    /// Mean one-way delay (ns).
    pub fn delay_mean_ns(&self) -> u64 {
        if self.frames == 0 {
            0
        } else {
            (self.delay_sum_ns / u128::from(self.frames)) as u64
        }
    }
}

/// One flow's line of a report: one interval, or (summary) the flow's active time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowReport {
    /// The flow's number in the order flows were first seen (the `[ ID]` column).
    pub id: u32,
    /// Source MAC.
    pub src: String,
    /// Flow id (from the payload header).
    pub flow: u32,
    /// Start of the period (s since the origin): the interval's start, or the first frame.
    pub start: f64,
    /// End of the period (s since the origin): the interval's end, or the last frame.
    pub end: f64,
    /// Seconds covered (`end − start`).
    pub secs: f64,
    /// Frames in the period.
    pub frames: u64,
    /// Octets in the period.
    pub bytes: u64,
    /// Throughput (bit/s) over the period (summary: over the active time, see
    /// [`Activity::active_bps`]).
    pub bps: f64,
    /// Frames lost in the period (sequence gaps opened, less those filled by late frames;
    /// never below 0).
    pub lost: u64,
    /// Frames that arrived late or twice in the period.
    pub reordered: u64,
    /// Smallest one-way delay of the period's frames (µs; 0 without frames).
    pub delay_min_us: f64,
    /// Mean one-way delay of the period's frames (µs).
    pub delay_mean_us: f64,
    /// Largest one-way delay of the period's frames (µs).
    pub delay_max_us: f64,
}

/// The sink.
#[derive(Debug)]
pub struct Sink {
    /// Counters by [`FlowCounters::id`].
    flows: Vec<FlowCounters>,
    /// (source MAC, flow id) to the position in `flows`, ordered by the key.
    index: BTreeMap<(EthernetAddress, u32), u32>,
    /// Recently met keys with their positions, at `flow id % CACHE`.
    cache: [Option<((EthernetAddress, u32), u32)>; CACHE],
    max_flows: usize,
    /// Frames that were not generated traffic.
    pub other: u64,
    /// Generated frames of flows beyond `max_flows`.
    pub untracked: u64,
}

impl Sink {
    /// A sink tracking at most `max_flows` flows.
    pub fn new(max_flows: usize) -> Sink {
        Sink {
            flows: Vec::new(),
            index: BTreeMap::new(),
            cache: [None; CACHE],
            max_flows,
            other: 0,
            untracked: 0,
        }
    }

    /// Counts `frame` received at `now`; false if it is not generated traffic.
    pub fn on_frame(&mut self, now: Instant, frame: &[u8]) -> bool {
        let Some((src, h)) = walk(frame).ok().and_then(|i| {
            let payload = frame.get(i.payload_offset..)?;
            let at = header_offset(i.ethertype.into(), payload)?;
            Some((i.src, PayloadHeader::parse(payload.get(at..)?)?))
        }) else {
            self.other += 1;
            return false;
        };
        let key = (src, h.flow);
        let line = h.flow as usize % CACHE;
        let pos = match self.cache[line] {
            Some((k, pos)) if k == key => pos,
            _ => {
                let id = self.flows.len() as u32;
                let full = self.flows.len() >= self.max_flows;
                // One search of the index: a new flow is added in the slot the search found.
                let pos = match self.index.entry(key) {
                    Entry::Occupied(o) => *o.get(),
                    Entry::Vacant(_) if full => {
                        self.untracked += 1;
                        return true;
                    }
                    Entry::Vacant(v) => {
                        self.flows.push(FlowCounters {
                            id,
                            ..FlowCounters::default()
                        });
                        *v.insert(id)
                    }
                };
                self.cache[line] = Some((key, pos));
                pos
            }
        };
        let Some(c) = self.flows.get_mut(pos as usize) else {
            // The index and the cache only name positions of the table.
            self.untracked += 1;
            return true;
        };
        let d = now.saturating_since(h.sent).as_nanos();
        if c.frames == 0 || d < c.delay_min_ns {
            c.delay_min_ns = d;
        }
        c.delay_max_ns = c.delay_max_ns.max(d);
        c.delay_sum_ns += u128::from(d);
        if c.interval_frames == 0 || d < c.interval_delay_min_ns {
            c.interval_delay_min_ns = d;
        }
        c.interval_delay_max_ns = c.interval_delay_max_ns.max(d);
        c.interval_delay_sum_ns += u128::from(d);
        c.frames += 1;
        c.bytes += frame.len() as u64;
        c.activity.on_frame(now, frame.len() as u64);
        c.interval_frames += 1;
        c.interval_bytes += frame.len() as u64;
        if h.seq >= c.next_seq {
            c.lost += h.seq - c.next_seq;
            c.next_seq = h.seq + 1;
        } else {
            c.reordered += 1;
            c.lost = c.lost.saturating_sub(1);
        }
        true
    }

    /// The counters of every flow.
    pub fn flows(&self) -> impl Iterator<Item = (&(EthernetAddress, u32), &FlowCounters)> {
        self.index
            .iter()
            .filter_map(|(k, &pos)| Some((k, self.flows.get(pos as usize)?)))
    }

    /// One report per flow (in order of [`FlowCounters::id`]) for the interval from `from` to
    /// `to` (offsets since the caller's origin), then a new interval starts.
    pub fn interval(&mut self, from: Duration, to: Duration) -> Vec<FlowReport> {
        let mut out: Vec<FlowReport> = self
            .flows()
            .map(|(k, c)| {
                let mean = if c.interval_frames == 0 {
                    0
                } else {
                    (c.interval_delay_sum_ns / u128::from(c.interval_frames)) as u64
                };
                let secs = to.saturating_sub(from).as_secs_f64();
                FlowReport {
                    id: c.id,
                    src: k.0.to_string(),
                    flow: k.1,
                    start: from.as_secs_f64(),
                    end: to.as_secs_f64(),
                    secs,
                    frames: c.interval_frames,
                    bytes: c.interval_bytes,
                    bps: report::bps(c.interval_bytes, secs),
                    lost: c.lost.saturating_sub(c.interval_lost_base),
                    reordered: c.reordered.saturating_sub(c.interval_reordered_base),
                    delay_min_us: c.interval_delay_min_ns as f64 / 1e3,
                    delay_mean_us: mean as f64 / 1e3,
                    delay_max_us: c.interval_delay_max_ns as f64 / 1e3,
                }
            })
            .collect();
        out.sort_by_key(|r| r.id);
        for c in &mut self.flows {
            c.interval_bytes = 0;
            c.interval_frames = 0;
            c.interval_delay_min_ns = 0;
            c.interval_delay_max_ns = 0;
            c.interval_delay_sum_ns = 0;
            c.interval_lost_base = c.lost;
            c.interval_reordered_base = c.reordered;
        }
        out
    }

    /// One report per flow (in order of [`FlowCounters::id`]) over its active time, first to
    /// last frame, with times as offsets since `origin`.
    pub fn summary(&self, origin: Instant) -> Vec<FlowReport> {
        let mut out: Vec<FlowReport> = self
            .flows()
            .map(|(k, c)| {
                let a = &c.activity;
                let first = a.first.map_or(origin, |(t, _)| t);
                FlowReport {
                    id: c.id,
                    src: k.0.to_string(),
                    flow: k.1,
                    start: first.saturating_since(origin).as_secs_f64(),
                    end: a.last.saturating_since(origin).as_secs_f64(),
                    secs: a.active().as_secs_f64(),
                    frames: c.frames,
                    bytes: c.bytes,
                    bps: a.active_bps().unwrap_or(0.0),
                    lost: c.lost,
                    reordered: c.reordered,
                    delay_min_us: c.delay_min_ns as f64 / 1e3,
                    delay_mean_us: c.delay_mean_ns() as f64 / 1e3,
                    delay_max_us: c.delay_max_ns as f64 / 1e3,
                }
            })
            .collect();
        out.sort_by_key(|r| r.id);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Pattern, Source, MAX_FRAME_LEN};
    use super::*;
    use cnm_proto::rng::Rng;

    const A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
    const B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);

    #[test]
    fn loss_reorder_delay_and_intervals() {
        let mut src = Source::new(Pattern::Greedy, 3, B, A, 100, Instant::ZERO);
        let mut rng = Rng::new(1);
        let mut frames = Vec::new();
        for i in 0..10u64 {
            let mut b = vec![0u8; MAX_FRAME_LEN];
            let n = src
                .next(Instant::from_nanos(i * 1000), &mut rng, &mut b)
                .unwrap();
            b.truncate(n);
            frames.push(b);
        }
        let mut sink = Sink::new(4);
        // Deliver 0 1 3 2 5 6 8 9 (4 and 7 lost, 2 reordered).
        for (k, i) in [0usize, 1, 3, 2, 5, 6, 8, 9].iter().enumerate() {
            assert!(sink.on_frame(
                Instant::from_nanos(1_000_000 + k as u64 * 1000),
                &frames[*i]
            ));
        }
        assert!(!sink.on_frame(Instant::from_nanos(5), &[0u8; 60]));
        let (_, c) = sink.flows().next().unwrap();
        assert_eq!((c.frames, c.lost, c.reordered), (8, 2, 1));
        // Delays: frame i sent at i µs, k-th delivered at 1000 + k µs.
        assert_eq!(c.delay_min_ns, 1_000_000 + 7_000 - 9_000);
        assert_eq!(c.delay_max_ns, 1_000_000 + 3_000 - 2_000);
        // The interval from the first frame (1 ms) to 1.008 ms.
        let r = sink.interval(
            Duration::from_nanos(1_000_000),
            Duration::from_nanos(1_008_000),
        );
        assert_eq!(r[0].frames, 8);
        assert_eq!(r[0].bytes, 800);
        assert!((r[0].bps - 800.0 * 8.0 / 8e-6).abs() < 1.0);
        // This interval's loss, reordering and delays.
        assert_eq!((r[0].lost, r[0].reordered), (2, 1));
        assert_eq!(r[0].delay_min_us, 998.0);
        assert_eq!(r[0].delay_max_us, 1001.0);
        let r = sink.interval(
            Duration::from_nanos(1_008_000),
            Duration::from_nanos(2_000_000),
        );
        assert_eq!((r[0].frames, r[0].lost, r[0].reordered), (0, 0, 0));
        assert_eq!(r[0].delay_max_us, 0.0);
        // The summary spans first to last frame (1.000 to 1.007 ms): 7 frames of 100 octets
        // after the first in 7 µs, 800 Mb/s; delays over all frames.
        let sum = sink.summary(Instant::ZERO);
        assert_eq!(sum[0].frames, 8);
        assert!((sum[0].start - 1e-3).abs() < 1e-12 && (sum[0].end - 1.007e-3).abs() < 1e-12);
        assert!((sum[0].bps - 700.0 * 8.0 / 7e-6).abs() < 1.0, "{sum:?}");
        assert_eq!((sum[0].lost, sum[0].reordered, sum[0].id), (2, 1, 0));
        assert_eq!(sink.other, 1);
        // Tagged frames (as sent up by the agent) count too.
        let mut tagged = Vec::new();
        crate::tagger::tag_for_uplink(&frames[0], 3, 0, Some(2), &mut tagged).unwrap();
        let mut s2 = Sink::new(1);
        assert!(s2.on_frame(Instant::ZERO, &tagged));
        // Bounded.
        let mut other = Source::new(Pattern::Greedy, 4, B, A, 100, Instant::ZERO);
        let mut b = vec![0u8; MAX_FRAME_LEN];
        let n = other.next(Instant::ZERO, &mut rng, &mut b).unwrap();
        assert!(s2.on_frame(Instant::ZERO, &b[..n]));
        assert_eq!(s2.untracked, 1);
    }

    /// Frames of interleaved flows, two of them on one cache line (flow ids 2 and 18). Each
    /// flow's counters are its own, ids follow the order of first sight, and `flows()` lists
    /// them by key.
    #[test]
    fn interleaved_flows_keep_their_own_counters() {
        let mut rng = Rng::new(1);
        let mut frame = |src: &mut Source, at: u64| {
            let mut b = vec![0u8; MAX_FRAME_LEN];
            let n = src.next(Instant::from_nanos(at), &mut rng, &mut b).unwrap();
            b.truncate(n);
            b
        };
        // Flow 18 from B is seen first, flow 2 from A second, flow 5 from A third.
        let mut b18 = Source::new(Pattern::Greedy, 18, A, B, 100, Instant::ZERO);
        let mut a2 = Source::new(Pattern::Greedy, 2, B, A, 200, Instant::ZERO);
        let mut a5 = Source::new(Pattern::Greedy, 5, B, A, 300, Instant::ZERO);
        let mut sink = Sink::new(2);
        // b18 b18 a2 b18 a2 a2 a5 (a5 is beyond the bound of two flows) b18.
        for (src, at) in [
            (0, 0),
            (0, 1),
            (1, 2),
            (0, 3),
            (1, 4),
            (1, 5),
            (2, 6),
            (0, 7),
        ] {
            let f = match src {
                0 => frame(&mut b18, at),
                1 => frame(&mut a2, at),
                _ => frame(&mut a5, at),
            };
            assert!(sink.on_frame(Instant::from_nanos(at + 10), &f));
        }
        assert_eq!(sink.untracked, 1);
        let got: Vec<_> = sink
            .flows()
            .map(|(k, c)| (k.0, k.1, c.id, c.frames, c.bytes, c.lost))
            .collect();
        // Ordered by (MAC, flow): A's flow 2 before B's flow 18; ids by first sight.
        assert_eq!(got, vec![(A, 2, 1, 3, 600, 0), (B, 18, 0, 4, 400, 0)]);
        let r = sink.summary(Instant::ZERO);
        assert_eq!((r[0].id, r[0].flow, r[1].id, r[1].flow), (0, 18, 1, 2));
    }
}
