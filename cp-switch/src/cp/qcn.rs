//! Standard QCN congestion point (IEEE 802.1Q-2011 clause 32.8, formerly 802.1Qau).
//!
//! # Source
//! IEEE 802.1Q-2011 clause 32.8 (formerly 802.1Qau-2010; congestion point variables and
//! procedures): the per-CP variables (set point `cpQSp`, weight `cpW`, queue length `cpQLen`
//! and its value at the previous sample `cpQLenOld`, the sample base and the octets left until
//! the next sample), the sampling procedure and the feedback computation; the managed objects
//! are in the IEEE8021-CN-MIB (`ieee8021CnCpTable`). The project's reference (QCN-REFERENCE
//! §2) restates them; Alizadeh et al., "Data Center Transport
//! Mechanisms: Congestion Control Theory and IEEE Standardization" (Allerton 2008), give the
//! same loop with the papers' parameter values.
//!
//! # Equations
//! A CP watches one queue (one CNPV priority of one port). On every frame **arrival** (after the
//! enqueue decision) it counts the frame's octets down from the current sampling interval; when
//! the count reaches zero the frame is *sampled*:
//!
//! ```text
//! Qoff = Q − Qeq                      Q: queue length now (octets), Qeq: set point
//! Qδ   = Q − Qold,  Qold ← Q          Qold: Q at the previous sample
//! Fb   = −(Qoff + w·Qδ)               w: feedback weight
//! ```
//!
//! If `Fb < 0` the queue is above the set point or growing fast: `|Fb|` is clamped to
//! `Fbmax = (2w + 1)·Qeq`, quantized to six bits
//! `QntzFb = max(1, round(63·|Fb| / Fbmax))` and a CNM goes to the source of the sampled frame.
//! The next sampling interval is `base / (1 + ⌊QntzFb / 8⌋)` octets — 150, 75, 50, 37.5, 30,
//! 25, 21.4, 18.75 KB for the eight QntzFb bands with the default base — or `base` when
//! `Fb ≥ 0`; either way multiplied by a uniform jitter in [0.85, 1.15] (±15 %, 802.1Q-2011
//! 32.8) drawn from the seeded generator the caller passes in.
//!
//! # Sampling tables (`cp_sample_table`)
//! * `standard` (default): `base / (1 + ⌊QntzFb / 8⌋)`, a sampling probability of 1 %, 2 %,
//!   …, 8 % of 1500-octet frames in the eight bands, scaling with `cp_min_sample_base`
//!   (`ieee8021CnCpMinSampleBase`, the only sampling object the MIB has).
//! * `pseudo-code`: the QCN pseudo-code v2.2's table of fixed intervals, 150, 75, 50, 37.5,
//!   30, 25, 21.5, 18.5 KB (as the ns-3 QCN model `cp-net-device.cc` has it), here scaled by
//!   `base / 150 KB`. Its top two bands differ from `standard` by +0.3 % and −1.3 %.
//! * `fqcn-paper`: the FQCN paper's eq. 2 (Zhang & Ansari §II-A, the paper's description of
//!   QCN's CP, which its simulations of both QCN and FQCN use): sampling probability
//!   `p = (1 + 9·Ψ(Fb)/64) %` when `Fb < 0`, `1 %` otherwise, Ψ(Fb) = QntzFb. As a byte
//!   countdown whose base stands for 1 %: `base · 64 / (64 + 9·QntzFb)` — 1.98 % at Ψ = 7
//!   where `standard` samples 1 %, 3.11 % at Ψ = 15 (`standard`: 2 %), 9.86 % at Ψ = 63
//!   (8 %). It is linear in Ψ rather than stepped by bands of eight; the paper's 10 % is at
//!   Ψ = 64, one more than the field holds.
//!
//! The jitter, the quantization and the rest of the sample are the same with every table.
//!
//! # Quantization, and what the other implementations do
//! QntzFb here is `max(1, round(63·|Fb|/Fbmax))`: every congested sample (`Fb < 0`) sends a
//! CNM with QntzFb ≥ 1, and `|Fb| ≥ Fbmax` maps to 63, the largest value of the six-bit
//! `cnmQntzFb` field (802.1Q-2011 33.4.4). The ns-3 QCN model (after the pseudo-code) uses
//! `min(63, ⌊64·|Fb|/Fbmax⌋)`, where a congested sample with `|Fb| < Fbmax/64` quantizes to 0
//! and sends no CNM; it agrees with this one to within one quantization step (1/63 of the
//! range). The Linux QCN prototype keeps the top six bits of `|Fb|` (a shift instead of the
//! division by Fbmax), which differs by the choice of scale. The choice made here keeps the
//! rule that *every* negative Fb is
//! signalled (802.1Q-2011 32.8: a CNM is generated when Fb is negative) and rounds to the
//! nearest level. The clause's own quantization formula could not be checked word for word;
//! what is certain is the field's width and the meaning of Fbmax.
//!
//! # Parameters (MIB name → default)
//! * `cp_queue_set_point` (`ieee8021CnCpQueueSizeSetPoint`): 26000 octets. The papers use 33 KB
//!   of a 150 KB buffer, 60 KB at input buffers, 14 KB for incast.
//! * `cp_feedback_weight` (`ieee8021CnCpFeedbackWeight`): 2. The MIB stores the weight as a
//!   power-of-two exponent; here the weight itself is configured (a power of two, 1..=64).
//! * `cp_min_sample_base` (`ieee8021CnCpMinSampleBase`): 150000 octets.
//!
//! Rounding: `round` is half away from zero on the non-negative ratio (31.5 → 32); `⌊QntzFb/8⌋`
//! and `base / (1 + ⌊QntzFb/8⌋)` are integer divisions, as in the reference.
//!
//! # Cost
//! The common case of [`Qcn::arrival`] is one subtraction and one compare; the sample itself is
//! a handful of integer operations and one draw from the generator.

use cnm_proto::rng::Rng;
use cnm_proto::Bytes;
use serde::{Deserialize, Serialize};

/// Default set point Qeq: 26000 octets (IEEE8021-CN-MIB `ieee8021CnCpQueueSizeSetPoint`
/// DEFVAL).
pub const DEFAULT_SET_POINT: Bytes = Bytes::new(26_000);
/// Default feedback weight w = 2 (IEEE8021-CN-MIB `ieee8021CnCpFeedbackWeight`, 802.1Q-2011
/// 32.8 `cpW`).
pub const DEFAULT_WEIGHT: u32 = 2;
/// Default minimum sample base: 150000 octets (IEEE8021-CN-MIB `ieee8021CnCpMinSampleBase`,
/// 802.1Q-2011 32.8 `cpSampleBase`).
pub const DEFAULT_SAMPLE_BASE: Bytes = Bytes::new(150_000);
/// Sampling-interval jitter: uniform in [1 − 0.15, 1 + 0.15] (802.1Q-2011 32.8).
pub const JITTER: f64 = 0.15;
/// Largest QntzFb (six bits, 802.1Q clause 33.4.4), from the CNM codec.
pub use cnm_proto::wire::cnm::QNTZ_FB_MAX;
/// Largest accepted feedback weight.
pub const MAX_WEIGHT: u32 = 64;

/// How the interval to the next sample follows QntzFb (`cp_sample_table`; see the module's
/// essay for the sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SampleTable {
    /// `base / (1 + ⌊QntzFb / 8⌋)` (802.1Q-2011 32.8).
    #[default]
    Standard,
    /// The pseudo-code v2.2 table 150, 75, 50, 37.5, 30, 25, 21.5, 18.5 KB, scaled by
    /// `base / 150 KB`.
    PseudoCode,
    /// The FQCN paper's eq. 2: `base · 64 / (64 + 9·QntzFb)`.
    FqcnPaper,
}

impl std::fmt::Display for SampleTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SampleTable::Standard => "standard",
            SampleTable::PseudoCode => "pseudo-code",
            SampleTable::FqcnPaper => "fqcn-paper",
        })
    }
}

/// The pseudo-code v2.2's sampling intervals per band of eight QntzFb values, in octets.
pub const PSEUDO_CODE_TABLE: [u64; 8] = [
    150_000, 75_000, 50_000, 37_500, 30_000, 25_000, 21_500, 18_500,
];

impl SampleTable {
    /// The sampling interval before jitter after a sample with `qntz_fb` (0 = no congestion),
    /// with sample base `base` (octets).
    pub fn interval(self, base: u64, qntz_fb: u8) -> u64 {
        let q = qntz_fb.min(QNTZ_FB_MAX);
        match self {
            SampleTable::Standard => sample_interval(base, q),
            SampleTable::PseudoCode => {
                let band = PSEUDO_CODE_TABLE[usize::from(q / 8)];
                (u128::from(base) * u128::from(band) / 150_000) as u64
            }
            SampleTable::FqcnPaper => (u128::from(base) * 64 / (64 + 9 * u128::from(q))) as u64,
        }
    }
}

/// Settings of one QCN congestion point (names follow the MIB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QcnParams {
    /// Qeq, the queue set point (`ieee8021CnCpQueueSizeSetPoint`). Default 26000 octets.
    pub cp_queue_set_point: Bytes,
    /// w, the weight of the queue growth in Fb (`ieee8021CnCpFeedbackWeight`). Default 2.
    pub cp_feedback_weight: u32,
    /// Octets between samples when there is no congestion (`ieee8021CnCpMinSampleBase`).
    /// Default 150000.
    pub cp_min_sample_base: Bytes,
    /// The sampling table. Default [`SampleTable::Standard`].
    pub cp_sample_table: SampleTable,
}

impl Default for QcnParams {
    fn default() -> Self {
        QcnParams {
            cp_queue_set_point: DEFAULT_SET_POINT,
            cp_feedback_weight: DEFAULT_WEIGHT,
            cp_min_sample_base: DEFAULT_SAMPLE_BASE,
            cp_sample_table: SampleTable::Standard,
        }
    }
}

impl QcnParams {
    /// Checks the values: a positive set point and sample base, and a weight that is a power of
    /// two in 1..=64. The error names the parameter.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.cp_queue_set_point.get() == 0 || self.cp_queue_set_point.get() > 1 << 40 {
            return Err((
                "cp_queue_set_point",
                "must be between 1 octet and 1 TB".into(),
            ));
        }
        let w = self.cp_feedback_weight;
        if w == 0 || w > MAX_WEIGHT || !w.is_power_of_two() {
            return Err((
                "cp_feedback_weight",
                format!("{w} is not a power of two in 1..={MAX_WEIGHT}"),
            ));
        }
        if self.cp_min_sample_base.get() == 0 || self.cp_min_sample_base.get() > 1 << 40 {
            return Err((
                "cp_min_sample_base",
                "must be between 1 octet and 1 TB".into(),
            ));
        }
        Ok(())
    }
}

/// Running state of one QCN congestion point (802.1Q-2011 32.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QcnVars {
    /// Octets still to arrive before the next sample (the countdown; ≤ 0 triggers a sample).
    pub bytes_to_sample: i64,
    /// Qold: the queue length at the previous sample (`cpQLenOld`), octets.
    pub q_old: u64,
    /// The current sampling interval before jitter (octets).
    pub interval: u64,
}

/// What one sample found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Q, the queue length at the sample (octets).
    pub q: u64,
    /// Qoff = Q − Qeq (octets).
    pub q_offset: i64,
    /// Qδ = Q − Qold (octets).
    pub q_delta: i64,
    /// Fb = −(Qoff + w·Qδ), before clamping.
    pub fb: i64,
    /// QntzFb, 1..=63 when `fb < 0` (a CNM is due), 0 otherwise.
    pub qntz_fb: u8,
    /// The next sampling interval before jitter (octets).
    pub interval: u64,
    /// The octets until the next sample after jitter.
    pub next: u64,
}

impl Sample {
    /// A CNM is due (Fb < 0).
    #[inline]
    pub fn congested(&self) -> bool {
        self.fb < 0
    }
}

/// Fb = −(Qoff + w·Qδ) = −((Q − Qeq) + w·(Q − Qold)) (802.1Q-2011 32.8).
#[inline]
pub fn feedback(q: u64, q_old: u64, qeq: u64, w: u32) -> i64 {
    let q = q as i64;
    let q_off = q - qeq as i64;
    let q_delta = q - q_old as i64;
    -(q_off + i64::from(w) * q_delta)
}

/// QntzFb for `fb`: 0 when `fb ≥ 0`, else `max(1, round(63·min(|Fb|, Fbmax) / Fbmax))` with
/// `Fbmax = (2w + 1)·Qeq` (802.1Q-2011 32.8).
#[inline]
pub fn quantize(fb: i64, qeq: u64, w: u32) -> u8 {
    if fb >= 0 {
        return 0;
    }
    let fb_max = (2 * u128::from(w) + 1) * u128::from(qeq.max(1));
    let mag = u128::from(fb.unsigned_abs()).min(fb_max);
    let max = u128::from(QNTZ_FB_MAX);
    // round(63·mag / fb_max), half up: ⌊(2·63·mag + fb_max) / (2·fb_max)⌋.
    let q = (2 * max * mag + fb_max) / (2 * fb_max);
    q.clamp(1, max) as u8
}

/// The sampling interval after a sample with `qntz_fb` (0 = no congestion):
/// `base / (1 + ⌊qntz_fb / 8⌋)` (802.1Q-2011 32.8, integer division).
#[inline]
pub fn sample_interval(base: u64, qntz_fb: u8) -> u64 {
    base / (1 + u64::from(qntz_fb.min(QNTZ_FB_MAX) / 8))
}

/// One standard QCN congestion point.
#[derive(Debug, Clone)]
pub struct Qcn {
    params: QcnParams,
    vars: QcnVars,
}

impl Qcn {
    /// A CP with `params` (validate them first: a zero sample base samples every frame); the
    /// first sampling interval is the base with jitter drawn from `rng`.
    pub fn new(params: QcnParams, rng: &mut Rng) -> Qcn {
        let base = params.cp_min_sample_base.get();
        Qcn {
            params,
            vars: QcnVars {
                bytes_to_sample: rng.jitter(base, JITTER) as i64,
                q_old: 0,
                interval: base,
            },
        }
    }

    /// The settings.
    pub fn params(&self) -> &QcnParams {
        &self.params
    }

    /// The running state.
    pub fn vars(&self) -> &QcnVars {
        &self.vars
    }

    /// New settings at run time (validate them first). Qold and the countdown in progress are
    /// kept, so the next sample compares against the same Qold; a countdown longer than the new
    /// sampling base is shortened to it (a smaller base takes effect at once).
    pub fn set_params(&mut self, params: QcnParams) {
        let base = params.cp_min_sample_base.get().max(1);
        self.params = params;
        self.vars.bytes_to_sample = self.vars.bytes_to_sample.min(base as i64);
        self.vars.interval = self.vars.interval.min(base);
    }

    /// A frame of `len` octets arrived; the queue now holds `qlen` octets (the frame included).
    /// Returns the sample when this frame is sampled.
    #[inline]
    pub fn arrival(&mut self, len: usize, qlen: u64, rng: &mut Rng) -> Option<Sample> {
        self.vars.bytes_to_sample -= len as i64;
        if self.vars.bytes_to_sample > 0 {
            return None;
        }
        Some(self.sample(qlen, rng))
    }

    /// Samples now with queue length `q`: computes Fb and QntzFb, updates Qold and reloads the
    /// countdown with the next (jittered) interval.
    #[cold]
    pub fn sample(&mut self, q: u64, rng: &mut Rng) -> Sample {
        let qeq = self.params.cp_queue_set_point.get();
        let w = self.params.cp_feedback_weight;
        let q_old = self.vars.q_old;
        let fb = feedback(q, q_old, qeq, w);
        let qntz_fb = quantize(fb, qeq, w);
        let interval = self
            .params
            .cp_sample_table
            .interval(self.params.cp_min_sample_base.get(), qntz_fb);
        let next = rng.jitter(interval, JITTER).max(1);
        self.vars.q_old = q;
        self.vars.interval = interval;
        self.vars.bytes_to_sample = next as i64;
        Sample {
            q,
            q_offset: q as i64 - qeq as i64,
            q_delta: q as i64 - q_old as i64,
            fb,
            qntz_fb,
            interval,
            next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (Q, Qold, Qeq, w) → (Fb, QntzFb, next interval before jitter), base 150000, every value
    /// worked by hand.
    #[test]
    fn hand_computed_table() {
        #[rustfmt::skip]
        let table: &[(u64, u64, u64, u32, i64, u8, u64)] = &[
            // Qoff = 30000−26000 = 4000, Qδ = 30000−20000 = 10000, Fb = −(4000 + 2·10000)
            // = −24000; Fbmax = 5·26000 = 130000; 63·24000/130000 = 11.63 → 12; ⌊12/8⌋ = 1
            // → 150000/2 = 75000.
            (30_000, 20_000, 26_000, 2, -24_000, 12, 75_000),
            // At the set point and steady: Fb = 0 → no CNM, base interval.
            (26_000, 26_000, 26_000, 2, 0, 0, 150_000),
            // Below the set point and draining: Qoff = −6000, Qδ = −10000,
            // Fb = −(−6000 − 20000) = 26000 > 0 → no CNM.
            (20_000, 30_000, 26_000, 2, 26_000, 0, 150_000),
            // Above the set point but draining fast: Qoff = 14000, Qδ = −10000,
            // Fb = −(14000 − 20000) = 6000 > 0 → no CNM.
            (40_000, 50_000, 26_000, 2, 6_000, 0, 150_000),
            // Qoff = 74000, Qδ = 100000, Fb = −274000, clamped to Fbmax = 130000 → 63;
            // ⌊63/8⌋ = 7 → 150000/8 = 18750.
            (100_000, 0, 26_000, 2, -274_000, 63, 18_750),
            // Qoff = 1000, Qδ = 100, Fb = −1200; 63·1200/130000 = 0.58 → 1; ⌊1/8⌋ = 0 → 150000.
            (27_000, 26_900, 26_000, 2, -1_200, 1, 150_000),
            // Qoff = 100, Qδ = 10, Fb = −120; 63·120/130000 = 0.058 → 0 → max(1, 0) = 1.
            (26_100, 26_090, 26_000, 2, -120, 1, 150_000),
            // Exactly half: Qoff = 39000, Qδ = 13000, Fb = −65000; 63·65000/130000 = 31.5
            // → 32; ⌊32/8⌋ = 4 → 150000/5 = 30000.
            (65_000, 52_000, 26_000, 2, -65_000, 32, 30_000),
            // The papers' Qeq = 33 KB: Fbmax = 165000; Qoff = 27000, Qδ = 10000, Fb = −47000;
            // 63·47000/165000 = 17.95 → 18; ⌊18/8⌋ = 2 → 50000.
            (60_000, 50_000, 33_000, 2, -47_000, 18, 50_000),
            // w = 4: Fbmax = 9·26000 = 234000; Qoff = 14000, Qδ = 10000,
            // Fb = −(14000 + 40000) = −54000; 63·54000/234000 = 14.54 → 15; ⌊15/8⌋ = 1 → 75000.
            (40_000, 30_000, 26_000, 4, -54_000, 15, 75_000),
            // w = 1: Fbmax = 3·26000 = 78000; Qoff = 24000, Qδ = 5000, Fb = −29000;
            // 63·29000/78000 = 23.42 → 23; ⌊23/8⌋ = 2 → 50000.
            (50_000, 45_000, 26_000, 1, -29_000, 23, 50_000),
            // Queue empty, was empty: Qoff = −26000, Fb = 26000 → no CNM.
            (0, 0, 26_000, 2, 26_000, 0, 150_000),
            // Input-buffer CP of the input-CP paper: Qeq = 60 KB, Fbmax = 300000;
            // Q = 110000, Qold = 90000: Qoff = 50000, Qδ = 20000, Fb = −90000;
            // 63·90000/300000 = 18.9 → 19; ⌊19/8⌋ = 2 → 50000.
            (110_000, 90_000, 60_000, 2, -90_000, 19, 50_000),
        ];
        for &(q, q_old, qeq, w, fb, qntz, next) in table {
            let got_fb = feedback(q, q_old, qeq, w);
            assert_eq!(got_fb, fb, "Fb for Q={q} Qold={q_old} Qeq={qeq} w={w}");
            let got_q = quantize(got_fb, qeq, w);
            assert_eq!(got_q, qntz, "QntzFb for Q={q} Qold={q_old} Qeq={qeq} w={w}");
            assert_eq!(
                sample_interval(150_000, got_q),
                next,
                "interval for QntzFb {qntz}"
            );

            // The same through the CP itself (Qold primed by a first sample at q_old).
            let params = QcnParams {
                cp_queue_set_point: Bytes::new(qeq),
                cp_feedback_weight: w,
                cp_min_sample_base: Bytes::new(150_000),
                cp_sample_table: SampleTable::Standard,
            };
            let mut rng = Rng::new(7);
            let mut cp = Qcn::new(params, &mut rng);
            cp.sample(q_old, &mut rng);
            let s = cp.sample(q, &mut rng);
            assert_eq!((s.fb, s.qntz_fb, s.interval), (fb, qntz, next));
            assert_eq!(s.congested(), fb < 0);
            assert_eq!(s.q_offset, q as i64 - qeq as i64);
            assert_eq!(s.q_delta, q as i64 - q_old as i64);
            assert_eq!(cp.vars().q_old, q);
        }
    }

    /// The eight sampling intervals: 150, 75, 50, 37.5, 30, 25, 21.4, 18.75 KB.
    #[test]
    fn sampling_interval_table() {
        let expect = [
            150_000, 75_000, 50_000, 37_500, 30_000, 25_000, 21_428, 18_750,
        ];
        for qntz in 0..=63u8 {
            assert_eq!(
                sample_interval(150_000, qntz),
                expect[usize::from(qntz / 8)],
                "QntzFb {qntz}"
            );
        }
        // Band edges.
        assert_eq!(sample_interval(150_000, 7), 150_000);
        assert_eq!(sample_interval(150_000, 8), 75_000);
        assert_eq!(sample_interval(150_000, 55), 21_428);
        assert_eq!(sample_interval(150_000, 56), 18_750);
    }

    /// FQCN eq. 2: p = (1 + 9Ψ/64) %, so the interval is base / (p / 1 %) = base·64/(64+9Ψ).
    #[test]
    fn fqcn_paper_sampling_probability() {
        let t = SampleTable::FqcnPaper;
        // Ψ = 0 (no congestion): 1 %, the base.
        assert_eq!(t.interval(150_000, 0), 150_000);
        // Ψ = 7: 1 + 63/64 = 1.984375 %: 150000·64/127 = 75590.55 → 75590 (standard: 150000).
        assert_eq!(t.interval(150_000, 7), 75_590);
        // Ψ = 15: 1 + 135/64 = 3.109375 %: 150000·64/199 = 48241.2 → 48241 (standard: 75000).
        assert_eq!(t.interval(150_000, 15), 48_241);
        // Ψ = 63: 1 + 567/64 = 9.859375 %: 150000·64/631 = 15213.9 → 15213 (standard: 18750).
        assert_eq!(t.interval(150_000, 63), 15_213);
        // Beyond six bits: as 63.
        assert_eq!(t.interval(150_000, 200), 15_213);
        // The probability implied by the interval (the base stands for 1 %), to within the
        // integer rounding of the interval (< 0.001 percentage points).
        let pct = |q: u8| 150_000.0 / t.interval(150_000, q) as f64;
        for (q, p) in [(0u8, 1.0), (7, 1.984_375), (15, 3.109_375), (63, 9.859_375)] {
            assert!((pct(q) - p).abs() < 1e-3, "Ψ {q}: {} vs {p}", pct(q));
        }
        // The FQCN incast scenario's base of 100 KB: Ψ = 63 → 100000·64/631 = 10142.6.
        assert_eq!(t.interval(100_000, 63), 10_142);
    }

    #[test]
    fn pseudo_code_table_and_standard_differ_in_the_top_bands() {
        let (p, s) = (SampleTable::PseudoCode, SampleTable::Standard);
        for q in 0..=47u8 {
            assert_eq!(p.interval(150_000, q), s.interval(150_000, q), "QntzFb {q}");
        }
        // Band 6: 21500 vs 21428 (+0.34 %); band 7: 18500 vs 18750 (−1.33 %).
        assert_eq!(
            (p.interval(150_000, 48), s.interval(150_000, 48)),
            (21_500, 21_428)
        );
        assert_eq!(
            (p.interval(150_000, 63), s.interval(150_000, 63)),
            (18_500, 18_750)
        );
        // Scaled with the base: 100 KB → 14333 in band 6 (21500·2/3).
        assert_eq!(p.interval(100_000, 50), 14_333);
        assert_eq!(SampleTable::default(), SampleTable::Standard);
    }

    #[test]
    fn sample_table_is_used_by_the_cp() {
        let params = QcnParams {
            cp_sample_table: SampleTable::FqcnPaper,
            ..QcnParams::default()
        };
        let mut rng = Rng::new(7);
        let mut cp = Qcn::new(params, &mut rng);
        cp.sample(0, &mut rng);
        // Q = 100000 from 0: |Fb| clamped to Fbmax → 63 → 15213.
        let s = cp.sample(100_000, &mut rng);
        assert_eq!((s.qntz_fb, s.interval), (63, 15_213));
        let j = s.next as f64 / 15_213.0;
        assert!((0.85..=1.15).contains(&j), "{j}");
        // Empty queue: base.
        assert_eq!(cp.sample(0, &mut rng).interval, 150_000);
    }

    #[test]
    fn quantization_edges() {
        // Fbmax = 130000 (Qeq 26000, w 2). One octet over → 1; Fbmax and beyond → 63.
        assert_eq!(quantize(-1, 26_000, 2), 1);
        assert_eq!(quantize(-130_000, 26_000, 2), 63);
        assert_eq!(quantize(i64::MIN, 26_000, 2), 63);
        assert_eq!(quantize(0, 26_000, 2), 0);
        assert_eq!(quantize(5, 26_000, 2), 0);
        // 63·|Fb|/130000 = 0.5 exactly at |Fb| = 130000/126 ≈ 1031.7: 1031 → 0.4996 → 0 →
        // max 1; 1032 → 0.5001 → 1.
        assert_eq!(quantize(-1_031, 26_000, 2), 1);
        // 62.5 at |Fb| = 128968.25: 128968 → 62.4999 → 62; 128969 → 63.
        assert_eq!(quantize(-128_968, 26_000, 2), 62);
        assert_eq!(quantize(-128_969, 26_000, 2), 63);
    }

    #[test]
    fn countdown_samples_after_the_interval() {
        let params = QcnParams {
            cp_min_sample_base: Bytes::new(10_000),
            ..QcnParams::default()
        };
        let mut rng = Rng::new(3);
        let mut cp = Qcn::new(params, &mut rng);
        let first = cp.vars().bytes_to_sample;
        assert!((8_500..=11_500).contains(&first), "{first}");
        // Frames of 100 octets: the sample falls on the frame that takes the count to ≤ 0.
        let mut n = 0;
        loop {
            n += 1;
            if let Some(s) = cp.arrival(100, 0, &mut rng) {
                // Empty queue: no congestion, next interval = base.
                assert_eq!((s.qntz_fb, s.interval), (0, 10_000));
                break;
            }
        }
        assert_eq!(n, (first as usize).div_ceil(100));
    }

    #[test]
    fn jitter_stays_within_fifteen_percent() {
        let params = QcnParams::default();
        let mut rng = Rng::new(11);
        let mut cp = Qcn::new(params, &mut rng);
        let (mut lo, mut hi) = (u64::MAX, 0);
        for _ in 0..20_000 {
            // Congested (QntzFb 63 → 18750) every other time, to cover two intervals.
            let s = cp.sample(0, &mut rng);
            assert!(s.next >= 127_500 && s.next <= 172_500, "{}", s.next);
            let s = cp.sample(200_000, &mut rng);
            assert_eq!(s.interval, 18_750);
            let j = s.next as f64 / 18_750.0;
            assert!((0.85..=1.15).contains(&j), "{j}");
            lo = lo.min(s.next);
            hi = hi.max(s.next);
        }
        // The whole range is used: within 0.5 % of both ends.
        assert!(lo < 16_040 && hi > 21_460, "{lo}..{hi}");
    }

    #[test]
    fn same_seed_same_samples() {
        let run = |seed| {
            let mut rng = Rng::new(seed);
            let mut cp = Qcn::new(QcnParams::default(), &mut rng);
            let mut out = Vec::new();
            for i in 0..100_000u64 {
                if let Some(s) = cp.arrival(1500, (i * 37) % 150_000, &mut rng) {
                    out.push((i, s));
                }
            }
            out
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }

    #[test]
    fn params_are_checked() {
        assert!(QcnParams::default().validate().is_ok());
        let bad = |f: fn(&mut QcnParams)| {
            let mut p = QcnParams::default();
            f(&mut p);
            p.validate().unwrap_err().0
        };
        assert_eq!(bad(|p| p.cp_feedback_weight = 3), "cp_feedback_weight");
        assert_eq!(bad(|p| p.cp_feedback_weight = 0), "cp_feedback_weight");
        assert_eq!(
            bad(|p| p.cp_queue_set_point = Bytes::ZERO),
            "cp_queue_set_point"
        );
        assert_eq!(
            bad(|p| p.cp_min_sample_base = Bytes::ZERO),
            "cp_min_sample_base"
        );
    }
}
