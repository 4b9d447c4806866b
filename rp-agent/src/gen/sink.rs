//! The receiving end of [`super::Source`]: per-flow counters from the payload header.
//!
//! A flow is (source MAC, flow id). For each: frames and octets, loss (gaps in the sequence
//! numbers; a late frame that fills a gap takes one back from the loss count and counts as
//! reordered; a duplicate counts as reordered too), one-way delay `now − sent` (minimum, mean,
//! maximum; meaningful when sender and sink share a clock, e.g. two namespaces of one host),
//! and the octets of the current reporting interval for throughput lines. Memory is bounded by
//! `max_flows`; frames of further flows are counted in `untracked`.

use super::{header_offset, PayloadHeader};
use cnm_proto::wire::{walk, EthernetAddress};
use cnm_proto::{Duration, Instant};
use serde::Serialize;
use std::collections::BTreeMap;

/// Counters of one flow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FlowCounters {
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

/// One line of a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowReport {
    /// Source MAC.
    pub src: String,
    /// Flow id.
    pub flow: u32,
    /// Seconds covered.
    pub secs: f64,
    /// Frames in the period.
    pub frames: u64,
    /// Octets in the period.
    pub bytes: u64,
    /// Throughput (bit/s) over the period.
    pub bps: f64,
    /// Lost so far.
    pub lost: u64,
    /// Reordered so far.
    pub reordered: u64,
    /// Delay min / mean / max so far (µs).
    pub delay_min_us: f64,
    /// Mean delay (µs).
    pub delay_mean_us: f64,
    /// Max delay (µs).
    pub delay_max_us: f64,
}

/// The sink.
#[derive(Debug)]
pub struct Sink {
    flows: BTreeMap<(EthernetAddress, u32), FlowCounters>,
    max_flows: usize,
    /// Frames that were not generated traffic.
    pub other: u64,
    /// Generated frames of flows beyond `max_flows`.
    pub untracked: u64,
    start: Option<Instant>,
    interval_start: Option<Instant>,
}

impl Sink {
    /// A sink tracking at most `max_flows` flows.
    pub fn new(max_flows: usize) -> Sink {
        Sink {
            flows: BTreeMap::new(),
            max_flows,
            other: 0,
            untracked: 0,
            start: None,
            interval_start: None,
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
        self.start.get_or_insert(now);
        self.interval_start.get_or_insert(now);
        let key = (src, h.flow);
        if !self.flows.contains_key(&key) && self.flows.len() >= self.max_flows {
            self.untracked += 1;
            return true;
        }
        let c = self.flows.entry(key).or_default();
        let d = now.saturating_since(h.sent).as_nanos();
        if c.frames == 0 || d < c.delay_min_ns {
            c.delay_min_ns = d;
        }
        c.delay_max_ns = c.delay_max_ns.max(d);
        c.delay_sum_ns += u128::from(d);
        c.frames += 1;
        c.bytes += frame.len() as u64;
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
        self.flows.iter()
    }

    /// One report per flow for the interval ending at `now`, then a new interval starts.
    pub fn interval(&mut self, now: Instant) -> Vec<FlowReport> {
        let secs = self
            .interval_start
            .map_or(Duration::ZERO, |s| now.saturating_since(s))
            .as_secs_f64();
        let out = self
            .flows
            .iter()
            .map(|(k, c)| report(k, c, secs, c.interval_frames, c.interval_bytes))
            .collect();
        for c in self.flows.values_mut() {
            c.interval_bytes = 0;
            c.interval_frames = 0;
        }
        if self.interval_start.is_some() {
            self.interval_start = Some(now);
        }
        out
    }

    /// One report per flow covering everything since the first frame.
    pub fn summary(&self, now: Instant) -> Vec<FlowReport> {
        let secs = self
            .start
            .map_or(Duration::ZERO, |s| now.saturating_since(s))
            .as_secs_f64();
        self.flows
            .iter()
            .map(|(k, c)| report(k, c, secs, c.frames, c.bytes))
            .collect()
    }
}

fn report(
    k: &(EthernetAddress, u32),
    c: &FlowCounters,
    secs: f64,
    frames: u64,
    bytes: u64,
) -> FlowReport {
    FlowReport {
        src: k.0.to_string(),
        flow: k.1,
        secs,
        frames,
        bytes,
        bps: if secs > 0.0 {
            bytes as f64 * 8.0 / secs
        } else {
            0.0
        },
        lost: c.lost,
        reordered: c.reordered,
        delay_min_us: c.delay_min_ns as f64 / 1e3,
        delay_mean_us: c.delay_mean_ns() as f64 / 1e3,
        delay_max_us: c.delay_max_ns as f64 / 1e3,
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
        let r = sink.interval(Instant::from_nanos(1_000_000 + 8_000));
        assert_eq!(r[0].frames, 8);
        assert_eq!(r[0].bytes, 800);
        assert!((r[0].bps - 800.0 * 8.0 / 8e-6).abs() < 1.0);
        assert_eq!(sink.interval(Instant::from_nanos(2_000_000))[0].frames, 0);
        assert_eq!(sink.summary(Instant::from_nanos(2_000_000))[0].frames, 8);
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
}
