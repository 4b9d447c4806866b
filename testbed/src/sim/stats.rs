//! Measurement helpers of the simulator: queue-occupancy histograms (mean, standard deviation,
//! 99th percentile; QCN-REFERENCE §6 "Queue: mean, std, p99 of occupancy") and link
//! utilisation.
//!
//! Memory is bounded by configuration, not traffic: a histogram has one bin per 64 octets of
//! the queue's capacity (the CNM's own quantum, QCN-REFERENCE §1 cnmQOffset units).

use serde::Serialize;

/// Width of a histogram bin in octets.
pub const BIN: u64 = 64;

/// Occupancy samples of one queue, taken at a fixed interval.
///
/// Most samples of most queues are 0 (a host's port, an input buffer the frames cut through):
/// those are only counted, and [`QueueHistogram::summary`] adds them to the first bin and to
/// the number of samples. Recorded one by one they would change nothing else (the sums gain
/// `0.0`, the maximum stays), so the summary is the same to the bit; on the simulator's
/// dumbbell this took eight of every ten records off its 10 µs sampling.
#[derive(Debug, Clone, Default)]
pub struct QueueHistogram {
    bins: Vec<u64>,
    /// Samples above 0.
    n: u64,
    /// Samples of 0.
    zeros: u64,
    sum: f64,
    sum_sq: f64,
    max: u64,
}

/// Summary of a [`QueueHistogram`], in octets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QueueSummary {
    /// Number of samples.
    pub samples: u64,
    /// Mean occupancy.
    pub mean: f64,
    /// Standard deviation.
    pub std: f64,
    /// 99th percentile (upper edge of its 64-octet bin).
    pub p99: u64,
    /// Largest sample.
    pub max: u64,
}

impl QueueHistogram {
    /// An empty histogram for a queue of at most `capacity` octets (larger samples land in
    /// the last bin).
    pub fn new(capacity: u64) -> Self {
        QueueHistogram {
            bins: vec![0; (capacity / BIN + 1) as usize],
            ..QueueHistogram::default()
        }
    }

    /// One sample.
    #[inline]
    pub fn record(&mut self, bytes: u64) {
        if bytes == 0 {
            self.zeros += 1;
            return;
        }
        let i = ((bytes / BIN) as usize).min(self.bins.len().saturating_sub(1));
        if let Some(b) = self.bins.get_mut(i) {
            *b += 1;
        }
        self.n += 1;
        let x = bytes as f64;
        self.sum += x;
        self.sum_sq += x * x;
        self.max = self.max.max(bytes);
    }

    /// Forgets every sample (end of a warm-up period).
    pub fn clear(&mut self) {
        self.bins.iter_mut().for_each(|b| *b = 0);
        self.n = 0;
        self.zeros = 0;
        self.sum = 0.0;
        self.sum_sq = 0.0;
        self.max = 0;
    }

    /// Mean, std, p99, max.
    pub fn summary(&self) -> QueueSummary {
        let samples = self.n + self.zeros;
        if samples == 0 {
            return QueueSummary {
                samples: 0,
                mean: 0.0,
                std: 0.0,
                p99: 0,
                max: 0,
            };
        }
        let n = samples as f64;
        let mean = self.sum / n;
        let var = (self.sum_sq / n - mean * mean).max(0.0);
        let target = (samples * 99).div_ceil(100);
        let mut acc = 0;
        let mut p99 = 0;
        for (i, b) in self.bins.iter().enumerate() {
            acc += b;
            if i == 0 {
                acc += self.zeros;
            }
            if acc >= target {
                p99 = if i + 1 == self.bins.len() {
                    self.max
                } else {
                    ((i as u64 + 1) * BIN).min(self.max)
                };
                break;
            }
        }
        QueueSummary {
            samples,
            mean,
            std: var.sqrt(),
            p99,
            max: self.max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_mean_std_p99() {
        let mut h = QueueHistogram::new(150_000);
        for i in 0..100 {
            h.record(i * 1000);
        }
        let s = h.summary();
        assert_eq!(s.samples, 100);
        assert!((s.mean - 49_500.0).abs() < 1e-6);
        assert!((s.std - 28_866.07).abs() < 1.0);
        // 99 % of the samples are at or below 98 000: its bin's upper edge.
        assert!(s.p99 >= 98_000 && s.p99 < 98_000 + BIN, "{}", s.p99);
        assert_eq!(s.max, 99_000);
        h.clear();
        assert_eq!(h.summary().samples, 0);
    }

    /// Zeros only counted give the summary of zeros recorded one by one: samples, mean, std,
    /// p99 (here the first bin's upper edge, 64) and max, also for zeros alone.
    #[test]
    fn zeros_count_as_samples_in_the_first_bin() {
        let mut h = QueueHistogram::new(150_000);
        for _ in 0..99 {
            h.record(0);
        }
        h.record(6_400);
        let s = h.summary();
        assert_eq!((s.samples, s.p99, s.max), (100, 64, 6_400));
        assert_eq!(s.mean, 64.0);
        // sqrt(6400² / 100 − 64²) = sqrt(409600 − 4096) = 636.792…
        assert!((s.std - 636.792).abs() < 1e-3, "{}", s.std);
        // One more sample above 0 and the 99th percentile is its bin's upper edge.
        h.record(6_400);
        assert_eq!(h.summary().p99, 6_400);
        let mut z = QueueHistogram::new(1000);
        z.record(0);
        let s = z.summary();
        assert_eq!(
            (s.samples, s.mean, s.std, s.p99, s.max),
            (1, 0.0, 0.0, 0, 0)
        );
        z.clear();
        assert_eq!(z.summary().samples, 0);
    }

    #[test]
    fn oversize_samples_land_in_last_bin() {
        let mut h = QueueHistogram::new(1000);
        h.record(10_000);
        assert_eq!(h.summary().p99, 10_000);
    }
}
