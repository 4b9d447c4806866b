//! Standard QCN reaction point (IEEE 802.1Q-2011 clauses 32.13-32.14, formerly 802.1Qau; the
//! QCN pseudo-code v2.x by Alizadeh, Atikoglu, Kabbani, Lakshmikantha, Pan, Prabhakar and
//! Seaman, which the standard's RP state machines follow).
//!
//! Per rate-limited flow the RP keeps the current rate CR (the limiter's pacing rate), the
//! target rate TR (the rate before the last decrease, which recovery aims back at), two stage
//! counters — BC, expiries of the byte counter, and T, expiries of the timer — the bytes left
//! until the byte counter next expires, and the timer's deadline.
//!
//! **Decrease** (32.14.1, on a CNM with quantized feedback Fb, 1..=63):
//! if the byte counter has expired since the last CNM (BC > 0), or the limiter is still at
//! its ceiling (a limiter just created: TR = CR already), then TR ← CR and the byte counter is
//! reloaded; CR ← max(`rpg_min_rate`, CR · max(1 − Gd · Fb, `rpg_min_dec_fac`)); BC ← T ← 0;
//! the timer is reloaded. Which stage arms TR ← CR is `rp_clamp_tgt_rate`
//! ([`ClampTgtRate`], below).
//!
//! **Increase** (32.14.2-32.14.4): the byte counter expires every `rpg_byte_reset` octets sent
//! (half of it once BC > `rpg_threshold`), the timer every `rpg_time_reset` (half once
//! T > threshold); each reload is multiplied by U(1 − j, 1 + j), j = `rp_jitter` (±15 %).
//! On either expiry that stage counter is incremented, then
//! * first expiry after a decrease (pseudo-code v2.x): if TR > 10 · CR then TR ← TR / 8,
//!   so that a flow cut far down does not aim straight back at a stale target;
//! * max(BC, T) ≤ threshold — fast recovery: CR ← (CR + TR) / 2;
//! * max(BC, T) > threshold ≥ min(BC, T) — active increase: TR ← TR + R_AI, CR ← (CR + TR) / 2;
//! * min(BC, T) > threshold — hyper-active increase:
//!   TR ← TR + (min(BC, T) − threshold) · R_HAI, CR ← (CR + TR) / 2;
//! * CR is capped at `rpg_max_rate` (default: the line rate); TR is not (`rp_release`).
//!
//! The timer fires every expiry that is due, each from its own deadline: a poll that comes
//! late runs the expiries it missed in order, and the period does not stretch by the delay.
//!
//! With [`BcLimit::Adaptive`] ([`crate::rp::adaptive_bc`]) the byte counter's period is K·CR
//! instead of `rpg_byte_reset`; the octets left in mid-count are rescaled whenever CR moves
//! without a reload (a timer expiry, a CNM that does not reload the counter); everything else
//! is unchanged.
//!
//! When CR reaches `rpg_max_rate` the limiter is released ([`QcnRp::released`]): the agent
//! forgets it, stops CN-tagging the flow and sends it at the line rate. The timer runs
//! whether or not the flow sends, so an idle flow recovers by timer expiries alone: from
//! QntzFb 32 at 1 Gb/s in 7 expiries (97.5 ms), at 10 Gb/s in 8 (105 ms).
//!
//! # Rules the reference text leaves open, and who does what
//! The arithmetic above is the pseudo-code's. Four rules differ between readings; each is
//! settled here with its source, the default follows the standard as the deployed
//! implementations read it, and the others stay available as named parameters. The clause
//! text of 802.1Q-2011 32.13-32.14 itself was not available to check word for word: what is
//! cited is the pseudo-code v2.2 (as implemented, line for line, by the ns-3 QCN model
//! `rp-net-device.cc` of the ns-3-dcn tree), the 802.1Qau state machine of ns3-rdma
//! (`qbb-net-device.cc`, whose variables carry the standard's names `rpByteStage`,
//! `rpTimeStage`, `rpTargetRate`), the IEEE8021-CN-MIB / dcbnl `ieee_qcn` object
//! descriptions, and the mlx4/mlx5 drivers' parameter descriptions.
//!
//! 1. *What a CNM does to TR and to the byte counter* (`rp_clamp_tgt_rate`). The ns-3 QCN
//!    model (written after the pseudo-code v2.2) sets TR ← CR and reloads the byte counter only
//!    when the byte stage is above 0 (or the rate is at the line rate); ns3-rdma's 802.1Qau default branch
//!    does the same (`if (rpByteStage != 0)`) and marks the always-variant "QCN standard
//!    doesn't have this"; the mlx5 driver offers the timer stage as an extension
//!    (`rp_clamp_tgt_rate_ati`) and the always-variant as another (`rp_clamp_tgt_rate`, the
//!    DCQCN rule). The FQCN paper's eq. 3 writes TR = CR on every CNM. Default
//!    [`ClampTgtRate::ByteStage`]; `after-time-inc` was this module's rule before (it also
//!    reloaded the byte counter on every CNM); `always` is eq. 3. It matters under a storm of
//!    CNMs closer than `rpg_byte_reset`: with the byte counter reloaded on every CNM it never
//!    expires and CR falls geometrically (1 Gb/s, QntzFb 4 every 100 KB: 149 Mb/s after 60
//!    CNMs), where the byte-stage rule lets it expire every other CNM (392 Mb/s).
//! 2. *Timer catch-up.* The ns-3 model advances the deadline by one period per expiry
//!    (`timer += period` in a loop while it is due); so does this module.
//! 3. *Release* (`rp_release`). The ns-3 model and ns3-rdma cap CR at the line rate and never
//!    TR; `RPG_MAX_RATE` (`ieee8021CnRpgMaxRate`, dcbnl `rpg_max_rate`: "the maximum rate at
//!    which an RP can transmit", which Mellanox's firmware parameter description completes
//!    with "once this limit is reached, the RP rate limiter is released") is where the
//!    limiter goes. Default [`Release::MaxRate`]; `line-rate` keeps TR capped at the
//!    ceiling and releases only at the line rate — CR then halves its way up to a capped TR
//!    and an idle flow needs 28 expiries at 1 Gb/s (32 at 10 Gb/s), and a limiter with
//!    `rpg_max_rate` below the line rate is never released.
//! 4. *TR/8.* The pseudo-code applies TR ← TR/8 *instead of* the stage's increment on the
//!    first expiry (BC = 1 or T = 1); here it is applied before the increment on the first
//!    expiry after a decrease. With `rpg_threshold` ≥ 1 that expiry is always in fast
//!    recovery, whose increment is 0, so the two agree.
//!
//! **Arithmetic.** Rates are whole bits per second. The midpoint (CR + TR) / 2 is rounded
//! *up*, so CR reaches a capped TR exactly (in ⌈log2(TR − CR)⌉ expiries) rather than only
//! approaching it; the decrease CR · factor is computed in `f64` and rounded down. Both are
//! deterministic on every IEEE-754 platform, as the simulator needs.

use crate::config::{ClampTgtRate, Release, RpParams};
use crate::rp::adaptive_bc::{rescale_left, BcLimit};
use crate::rp::RpState;
use cnm_proto::rng::Rng;
use cnm_proto::{Duration, Instant, Rate};

/// Largest QntzFb (six bits, 802.1Q clause 33.4.4), from the CNM codec.
pub use cnm_proto::wire::cnm::QNTZ_FB_MAX;

/// Most timer expiries one [`QcnRp::on_timer`] call runs; a call later than that (a process
/// stopped for minutes) restarts the period from the call instead of replaying every expiry.
/// 1024 expiries are ≥ 7.7 s of timer at the default 15 ms, far beyond a release.
pub const MAX_CATCH_UP: u32 = 1024;

/// The state of one QCN reaction point.
#[derive(Debug, Clone)]
pub struct QcnRp {
    // Parameters (copied: a handful of words, and the RP stays self-contained).
    bc_limit: BcLimit,
    time_reset: Duration,
    threshold: u32,
    ai: u64,
    hai: u64,
    gd_log2: u8,
    min_dec_fac: f64,
    min_rate: u64,
    max_rate: u64,
    line_rate: u64,
    jitter: f64,
    clamp: ClampTgtRate,
    release: Release,
    // Variables.
    cr: u64,
    tr: u64,
    bc: u32,
    t: u32,
    bytes_left: u64,
    timer: Instant,
    first_after_decrease: bool,
}

impl QcnRp {
    /// A limiter at the line rate (capped at `rpg_max_rate`), timer and byte counter loaded;
    /// the byte counter is the standard one (`rpg_byte_reset`).
    pub fn new(p: &RpParams, line_rate: Rate, now: Instant, rng: &mut Rng) -> QcnRp {
        QcnRp::with_bc_limit(p, line_rate, BcLimit::Fixed(p.rpg_byte_reset), now, rng)
    }

    /// As [`QcnRp::new`], with the byte counter sized by `bc_limit` (standard or adaptive).
    pub fn with_bc_limit(
        p: &RpParams,
        line_rate: Rate,
        bc_limit: BcLimit,
        now: Instant,
        rng: &mut Rng,
    ) -> QcnRp {
        let max_rate = p.rpg_max_rate.unwrap_or(line_rate).min(line_rate).bps();
        let mut rp = QcnRp {
            bc_limit,
            time_reset: p.rpg_time_reset,
            threshold: p.rpg_threshold,
            ai: p.rpg_ai_rate.bps(),
            hai: p.rpg_hai_rate.bps(),
            gd_log2: p.rpg_gd.min(63),
            min_dec_fac: f64::from(p.rpg_min_dec_fac.min(100)) / 100.0,
            min_rate: p.rpg_min_rate.bps().min(max_rate),
            max_rate,
            line_rate: line_rate.bps(),
            jitter: p.rp_jitter,
            clamp: p.rp_clamp_tgt_rate,
            release: p.rp_release,
            cr: max_rate,
            tr: max_rate,
            bc: 0,
            t: 0,
            bytes_left: 0,
            timer: now,
            first_after_decrease: false,
        };
        rp.reload_bytes(rng);
        rp.reload_timer(now, rng);
        rp
    }

    /// New parameters at run time, keeping the limiter's state (CR, TR, BC, T): CR and TR
    /// are clamped into the new [`rpg_min_rate`, ceiling]; a byte counter or timer running
    /// longer than one period of the new settings is cut to it (their jittered maximum), so
    /// a shorter period takes effect at once and a longer one at the next reload.
    pub fn set_params(&mut self, p: &RpParams, bc_limit: BcLimit, now: Instant) {
        let line_rate = Rate::from_bps(self.line_rate);
        let max_rate = p.rpg_max_rate.unwrap_or(line_rate).min(line_rate).bps();
        self.bc_limit = bc_limit;
        self.time_reset = p.rpg_time_reset;
        self.threshold = p.rpg_threshold;
        self.ai = p.rpg_ai_rate.bps();
        self.hai = p.rpg_hai_rate.bps();
        self.gd_log2 = p.rpg_gd.min(63);
        self.min_dec_fac = f64::from(p.rpg_min_dec_fac.min(100)) / 100.0;
        self.min_rate = p.rpg_min_rate.bps().min(max_rate);
        self.max_rate = max_rate;
        self.jitter = p.rp_jitter;
        self.clamp = p.rp_clamp_tgt_rate;
        self.release = p.rp_release;
        self.cr = self.cr.clamp(self.min_rate, self.max_rate);
        self.tr = self.tr.clamp(self.cr, self.max_rate);
        let stretch = 1.0 + self.jitter;
        let bytes = (self.byte_limit() as f64 * stretch).ceil() as u64;
        self.bytes_left = self.bytes_left.min(bytes.max(1));
        let period = Duration::from_nanos((self.time_reset.as_nanos() as f64 * stretch) as u64);
        self.timer = self.timer.min(now.saturating_add(period));
    }

    /// A CNM with quantized feedback `qntz_fb` arrived (802.1Q 32.14.1). Values above 63 are
    /// treated as 63; 0 carries no congestion and changes nothing. TR and the byte counter
    /// follow `rp_clamp_tgt_rate` (see the module's essay).
    pub fn on_cnm(&mut self, now: Instant, qntz_fb: u8, rng: &mut Rng) {
        let fb = qntz_fb.min(QNTZ_FB_MAX);
        if fb == 0 {
            return;
        }
        let clamp = match self.clamp {
            ClampTgtRate::ByteStage => self.bc > 0 || self.cr >= self.max_rate,
            ClampTgtRate::AfterTimeInc => self.bc > 0 || self.t > 0 || self.cr >= self.max_rate,
            ClampTgtRate::Always => true,
        };
        if clamp {
            self.tr = self.cr;
        }
        let gd = 1.0 / (1u64 << self.gd_log2) as f64;
        let factor = (1.0 - gd * f64::from(fb)).max(self.min_dec_fac);
        let before = self.cr;
        let cr = (self.cr as f64 * factor).floor() as u64;
        self.cr = cr.max(self.min_rate).min(self.max_rate);
        self.bc = 0;
        self.t = 0;
        self.first_after_decrease = true;
        if clamp {
            // After the decrease and the stage reset: a full period, K·CR at the new CR.
            self.reload_bytes(rng);
        } else if self.bc_limit.is_adaptive() {
            // The count goes on; BC_LIMIT = K·CR follows CR in mid-count (see `adaptive_bc`).
            self.bytes_left = rescale_left(
                self.bytes_left,
                Rate::from_bps(before),
                Rate::from_bps(self.cr),
            );
        }
        self.reload_timer(now, rng);
    }

    /// The flow transmitted `n` octets: runs the byte counter (32.14.2), which may expire
    /// (several times for a large `n` and a tiny `rpg_byte_reset`).
    pub fn on_bytes_sent(&mut self, _now: Instant, n: u64, rng: &mut Rng) {
        let mut n = n;
        while n >= self.bytes_left {
            n -= self.bytes_left;
            self.bc = self.bc.saturating_add(1);
            self.increase();
            self.reload_bytes(rng);
        }
        self.bytes_left -= n;
    }

    /// Runs the timer (32.14.3): every expiry due by `now`, in order, each period counted
    /// from the previous deadline (so a late call loses no expiry and does not stretch the
    /// period). Stops early when the limiter is released; after [`MAX_CATCH_UP`] expiries in
    /// one call the next period is counted from `now` instead.
    pub fn on_timer(&mut self, now: Instant, rng: &mut Rng) {
        let mut n = 0;
        while now >= self.timer && !self.released() {
            if n == MAX_CATCH_UP {
                self.reload_timer(now, rng);
                return;
            }
            n += 1;
            self.t = self.t.saturating_add(1);
            let before = self.cr;
            self.increase();
            if self.bc_limit.is_adaptive() {
                // BC_LIMIT = K·CR follows CR in mid-count (see `adaptive_bc`).
                self.bytes_left = rescale_left(
                    self.bytes_left,
                    Rate::from_bps(before),
                    Rate::from_bps(self.cr),
                );
            }
            let deadline = self.timer;
            self.reload_timer(deadline, rng);
        }
    }

    /// The timer's deadline.
    pub fn next_timer(&self) -> Instant {
        self.timer
    }

    /// Current rate CR.
    pub fn rate(&self) -> Rate {
        Rate::from_bps(self.cr)
    }

    /// Target rate TR.
    pub fn target(&self) -> Rate {
        Rate::from_bps(self.tr)
    }

    /// Byte-counter and timer stages (BC, T).
    pub fn stages(&self) -> (u32, u32) {
        (self.bc, self.t)
    }

    /// Octets left until the byte counter expires.
    pub fn bytes_left(&self) -> u64 {
        self.bytes_left
    }

    /// The byte counter's period before jitter at the current CR and stage: `rpg_byte_reset`
    /// (halved past the threshold) or K·CR.
    pub fn byte_limit(&self) -> u64 {
        self.bc_limit
            .limit(Rate::from_bps(self.cr), self.bc > self.threshold)
    }

    /// Phase of the increase machinery.
    pub fn state(&self) -> RpState {
        if self.released() {
            RpState::Released
        } else if self.bc.max(self.t) <= self.threshold {
            RpState::Fr
        } else if self.bc.min(self.t) <= self.threshold {
            RpState::Ai
        } else {
            RpState::Hai
        }
    }

    /// The limiter can go: CR reached `rpg_max_rate` ([`Release::MaxRate`]) or the line rate
    /// ([`Release::LineRate`]).
    pub fn released(&self) -> bool {
        match self.release {
            Release::MaxRate => self.cr >= self.max_rate,
            Release::LineRate => self.cr >= self.line_rate,
        }
    }

    /// One expiry of either counter (the stage was already incremented).
    fn increase(&mut self) {
        if self.first_after_decrease {
            self.first_after_decrease = false;
            if self.tr > self.cr.saturating_mul(10) {
                self.tr /= 8;
            }
        }
        let th = self.threshold;
        let (hi, lo) = (self.bc.max(self.t), self.bc.min(self.t));
        if hi <= th {
            // Fast recovery: TR unchanged.
        } else if lo <= th {
            self.tr = self.tr.saturating_add(self.ai);
        } else {
            let i = u64::from(lo - th);
            self.tr = self.tr.saturating_add(i.saturating_mul(self.hai));
        }
        if self.release == Release::LineRate {
            self.tr = self.tr.min(self.max_rate);
        }
        // Rounded up: see the module's note on arithmetic. CR ≤ max_rate and TR is at most
        // u64::MAX (saturating), so the halved sum cannot overflow.
        self.cr = (self.cr / 2 + self.tr / 2 + (self.cr % 2 + self.tr % 2).div_ceil(2))
            .min(self.max_rate);
    }

    fn reload_bytes(&mut self, rng: &mut Rng) {
        let base = self.byte_limit();
        self.bytes_left = rng.jitter(base, self.jitter).max(1);
    }

    fn reload_timer(&mut self, now: Instant, rng: &mut Rng) {
        let base = if self.t > self.threshold {
            self.time_reset.as_nanos() / 2
        } else {
            self.time_reset.as_nanos()
        };
        self.timer = now + Duration::from_nanos(rng.jitter(base, self.jitter).max(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cnm_proto::Bytes;

    const MS: u64 = 1_000_000;

    /// The defaults (the standard's rules), without jitter.
    fn params() -> RpParams {
        RpParams {
            rp_jitter: 0.0,
            ..RpParams::default()
        }
    }

    /// The rules this module followed before they were settled against the standard: TR ← CR
    /// after a timer expiry too, TR capped at the ceiling and release only at the line rate.
    fn params_before() -> RpParams {
        RpParams {
            rp_clamp_tgt_rate: ClampTgtRate::AfterTimeInc,
            rp_release: Release::LineRate,
            ..params()
        }
    }

    /// Gd = 1/64, so that QntzFb 63 asks for a 98 % decrease and `rpg_min_dec_fac` (50 %) binds.
    fn params_gd6() -> RpParams {
        RpParams {
            rpg_gd: 6,
            ..params()
        }
    }

    fn at(ms_x10: u64) -> Instant {
        Instant::from_nanos(ms_x10 * MS / 10)
    }

    /// Fires the timer `n` times from `*now`, returning CR after each.
    fn timer_steps(rp: &mut QcnRp, now: &mut Instant, rng: &mut Rng, n: usize) -> Vec<u64> {
        let mut out = Vec::new();
        for _ in 0..n {
            *now = rp.next_timer();
            rp.on_timer(*now, rng);
            out.push(rp.rate().bps());
        }
        out
    }

    #[test]
    fn min_dec_fac_and_fast_recovery() {
        let mut rng = Rng::new(1);
        let mut now = at(0);
        let mut rp = QcnRp::new(&params(), Rate::from_gbps(1), now, &mut rng);
        assert!(rp.released());
        // Gd = 1/128: QntzFb 63 gives the factor 1 − 63/128 = 0.5078125.
        rp.on_cnm(now, 63, &mut rng);
        assert_eq!(rp.rate().bps(), 507_812_500);
        let mut rp = QcnRp::new(&params_gd6(), Rate::from_gbps(1), now, &mut rng);
        // Gd = 1/64: 1 − 63/64 < 0.5, so the minimum decrease factor applies.
        rp.on_cnm(now, 63, &mut rng);
        assert_eq!(rp.rate().bps(), 500_000_000);
        assert_eq!(rp.target().bps(), 1_000_000_000);
        assert_eq!(rp.state(), RpState::Fr);
        // A second CNM before any expiry keeps TR (the rate before the congestion episode).
        rp.on_cnm(now, 63, &mut rng);
        assert_eq!(rp.rate().bps(), 250_000_000);
        assert_eq!(rp.target().bps(), 1_000_000_000);
        assert_eq!(rp.next_timer(), at(150));
        // Five fast-recovery expiries halve the distance to TR each time.
        let cr = timer_steps(&mut rp, &mut now, &mut rng, 5);
        assert_eq!(
            cr,
            [
                625_000_000,
                812_500_000,
                906_250_000,
                953_125_000,
                976_562_500
            ]
        );
        assert_eq!(now, at(750));
        assert_eq!(rp.target().bps(), 1_000_000_000);
        assert_eq!(rp.stages(), (0, 5));
    }

    #[test]
    fn active_increase_by_timer_only_idle_flow() {
        // No byte is ever sent: the timer alone recovers the flow (fast recovery, then active
        // increase once T > threshold, with the timer period halved). Under `after-time-inc`,
        // where a timer expiry arms TR ← CR.
        let mut rng = Rng::new(1);
        let mut now = at(0);
        let mut rp = QcnRp::new(&params_before(), Rate::from_gbps(1), now, &mut rng);
        rp.on_cnm(now, 32, &mut rng); // 1 − 32/128 = 0.75
        assert_eq!(rp.rate().bps(), 750_000_000);
        timer_steps(&mut rp, &mut now, &mut rng, 2); // 875 M, 937.5 M
        assert_eq!(rp.rate().bps(), 937_500_000);
        // Decrease after increases: TR ← CR.
        rp.on_cnm(now, 16, &mut rng); // 0.875
        assert_eq!(rp.target().bps(), 937_500_000);
        assert_eq!(rp.rate().bps(), 820_312_500);
        let fr = timer_steps(&mut rp, &mut now, &mut rng, 5);
        assert_eq!(
            fr,
            [
                878_906_250,
                908_203_125,
                922_851_563,
                930_175_782,
                933_837_891
            ]
        );
        assert_eq!(rp.state(), RpState::Fr);
        let t_fr_end = now;
        // Sixth expiry: T = 6 > 5, BC = 0 ≤ 5: active increase, TR += 5 Mb/s.
        let ai = timer_steps(&mut rp, &mut now, &mut rng, 3);
        assert_eq!(rp.state(), RpState::Ai);
        // TR 942.5 M → CR ⌈(933 837 891 + 942 500 000)/2⌉ = 938 168 946; TR 947.5 M → 942 834 473;
        // TR 952.5 M → 947 667 237.
        assert_eq!(ai, [938_168_946, 942_834_473, 947_667_237]);
        assert_eq!(rp.target().bps(), 952_500_000);
        // The timer period is 15 ms for expiry 6 (loaded after expiry 5), then 7.5 ms.
        assert_eq!(
            now,
            t_fr_end + Duration::from_micros(15_000 + 7_500 + 7_500)
        );
    }

    #[test]
    fn timer_only_increase_does_not_arm_the_target() {
        // The default `byte-stage`: expiries of the timer alone do not make TR ← CR at the
        // next CNM (the pseudo-code's `if BC > 0`), so TR stays the rate before the episode.
        let mut rng = Rng::new(1);
        let mut now = at(0);
        let mut rp = QcnRp::new(&params(), Rate::from_gbps(1), now, &mut rng);
        rp.on_cnm(now, 32, &mut rng); // at the ceiling: TR ← CR = 1 G, CR 750 M
        assert_eq!(rp.bytes_left(), 150_000);
        rp.on_bytes_sent(now, 40_000, &mut rng);
        timer_steps(&mut rp, &mut now, &mut rng, 2); // 875 M, 937.5 M
        rp.on_cnm(now, 16, &mut rng); // BC = 0: TR stays 1 G, CR 937.5 M × 0.875
        assert_eq!(rp.target().bps(), 1_000_000_000);
        assert_eq!(rp.rate().bps(), 820_312_500);
        // Nor is the byte counter reloaded: 110 000 octets left of the period begun at 0.
        assert_eq!(rp.bytes_left(), 110_000);
        assert_eq!(rp.stages(), (0, 0));
        // One byte-counter expiry (FR: CR ⌈(820 312 500 + 1 G)/2⌉ = 910 156 250), then a CNM:
        // now TR ← CR and the byte counter restarts.
        rp.on_bytes_sent(now, 110_000, &mut rng);
        assert_eq!(rp.rate().bps(), 910_156_250);
        rp.on_cnm(now, 16, &mut rng); // CR 910 156 250 × 0.875 = 796 386 718.75
        assert_eq!(rp.target().bps(), 910_156_250);
        assert_eq!(rp.rate().bps(), 796_386_718);
        assert_eq!(rp.bytes_left(), 150_000);
    }

    #[test]
    fn cnm_storm_keeps_the_byte_counter_from_firing_only_when_it_reloads() {
        // 1 Gb/s, a CNM with QntzFb 4 (factor 1 − 4/128 = 0.96875) before every 100 000 octets
        // sent, BC_LIMIT 150 000. The timer never fires (all at one instant).
        let storm = |clamp: ClampTgtRate| {
            let p = RpParams {
                rp_clamp_tgt_rate: clamp,
                ..params()
            };
            let mut rng = Rng::new(1);
            let now = at(0);
            let mut rp = QcnRp::new(&p, Rate::from_gbps(1), now, &mut rng);
            let mut out = Vec::new();
            for _ in 0..60 {
                rp.on_cnm(now, 4, &mut rng);
                rp.on_bytes_sent(now, 100_000, &mut rng);
                out.push((rp.rate().bps(), rp.target().bps(), rp.stages().0));
            }
            out
        };
        // byte-stage: CNM 1 at the ceiling: TR 1 G, CR 968 750 000, counter 150 000 → 50 000
        // left after the send. CNM 2 (BC = 0, nothing armed): CR 938 476 562; the send expires
        // the counter after 50 000 (FR: CR ⌈(938 476 562 + 1 G)/2⌉ = 969 238 281), 100 000
        // left. CNM 3 (BC = 1): TR ← 969 238 281, CR 938 949 584, counter 150 000 → 50 000.
        // CNM 4: CR 909 607 409, expiry: ⌈(909 607 409 + 969 238 281)/2⌉ = 939 422 845.
        let b = storm(ClampTgtRate::ByteStage);
        assert_eq!(
            b[..4],
            [
                (968_750_000, 1_000_000_000, 0),
                (969_238_281, 1_000_000_000, 1),
                (938_949_584, 969_238_281, 0),
                (939_422_845, 969_238_281, 1),
            ]
        );
        // The counter expires every other CNM; after 60 CNMs the flow is at 391.7 Mb/s.
        assert_eq!(b[59], (391_666_799, 404_097_534, 1));
        // always (FQCN eq. 3): every CNM reloads the counter, 100 000 < 150 000, so it never
        // expires and CR = ⌊…⌊10⁹ · 0.96875⌋…⌋ (60 times) = 148 834 255 (0.96875⁶⁰ = 0.1488).
        let a = storm(ClampTgtRate::Always);
        assert!(a.iter().all(|&(_, _, bc)| bc == 0));
        assert_eq!(a[0].0, 968_750_000);
        assert_eq!(a[1].0, 938_476_562);
        assert_eq!(a[59].0, 148_834_255);
        // after-time-inc without timer expiries is byte-stage.
        assert_eq!(storm(ClampTgtRate::AfterTimeInc), b);
    }

    #[test]
    fn idle_flow_is_released_at_max_rate_in_7_and_8_expiries() {
        // The default `max-rate`: TR is not capped, so active increase lifts it above the
        // line rate and CR reaches the ceiling, where the limiter is released.
        let release = |line: Rate, p: &RpParams| {
            let mut rng = Rng::new(1);
            let mut now = at(0);
            let mut rp = QcnRp::new(p, line, now, &mut rng);
            rp.on_cnm(now, 32, &mut rng); // CR 0.75 × line, TR = line
            let mut cr = Vec::new();
            while !rp.released() {
                cr.extend(timer_steps(&mut rp, &mut now, &mut rng, 1));
                assert!(cr.len() < 100);
            }
            (cr, now)
        };
        // 1 Gb/s: FR 875 M, 937.5 M, 968.75 M, 984.375 M, 992.1875 M; AI: TR 1.005 G, CR
        // ⌈(992 187 500 + 1 005 000 000)/2⌉ = 998 593 750; TR 1.010 G, CR 1 004 296 875 →
        // capped 1 G: released at the 7th expiry, 5 × 15 + 15 + 7.5 = 97.5 ms after the CNM.
        let (cr, t) = release(Rate::from_gbps(1), &params());
        assert_eq!(
            cr,
            [
                875_000_000,
                937_500_000,
                968_750_000,
                984_375_000,
                992_187_500,
                998_593_750,
                1_000_000_000
            ]
        );
        assert_eq!(t, at(975));
        // 10 Gb/s: FR to 9.921875 G; AI: 9.9634375 G, 9.98671875 G, then 10.000859375 G →
        // capped: the 8th expiry, 105 ms.
        let (cr, t) = release(Rate::from_gbps(10), &params());
        assert_eq!(cr.len(), 8);
        assert_eq!(cr[5..], [9_963_437_500, 9_986_718_750, 10_000_000_000]);
        assert_eq!(t, at(1050));
        // `line-rate` (TR capped): 28 expiries at 1 Gb/s (see `released_at_line_rate`) and 32
        // at 10 Gb/s: the 2.5 G gap halves (rounded up) per expiry, 2^32 > 2.5e9 ≥ 2^31.
        let (cr, _) = release(Rate::from_gbps(1), &params_before());
        assert_eq!(cr.len(), 28);
        let (cr, t) = release(Rate::from_gbps(10), &params_before());
        assert_eq!(cr.len(), 32);
        // 6 × 15 ms (the 6th period was loaded at T = 5), then 26 × 7.5 ms: 285 ms.
        assert_eq!(t, at(900 + 26 * 75));
    }

    #[test]
    fn max_rate_below_line_is_released_there() {
        // `max-rate`: a ceiling below the line rate releases the limiter when CR reaches it
        // (the flow then goes at the line rate, untagged).
        let p = RpParams {
            rpg_max_rate: Some(Rate::from_mbps(500)),
            ..params()
        };
        let mut rng = Rng::new(1);
        let mut now = at(0);
        let mut rp = QcnRp::new(&p, Rate::from_gbps(1), now, &mut rng);
        assert_eq!(rp.rate(), Rate::from_mbps(500));
        rp.on_cnm(now, 32, &mut rng); // TR 500 M, CR 375 M
        assert!(!rp.released());
        // FR 437.5, 468.75, 484.375, 492.1875, 496.09375 M; AI TR 505 M → CR 500.546875 M
        // capped: released at the 6th expiry.
        let cr = timer_steps(&mut rp, &mut now, &mut rng, 6);
        assert_eq!(cr[4..], [496_093_750, 500_000_000]);
        assert!(rp.released());
        assert_eq!(rp.state(), RpState::Released);
    }

    #[test]
    fn late_poll_runs_every_expiry_from_its_own_deadline() {
        let mut rng = Rng::new(1);
        let now = at(0);
        let p = params();
        let mut late = QcnRp::new(&p, Rate::from_gbps(1), now, &mut rng);
        late.on_cnm(now, 32, &mut rng);
        // Expiries are due at 15, 30, 45, 60, 75, 90 ms (then every 7.5 ms). One poll at
        // 96 ms runs all six, in order, and the seventh is due at 97.5 ms, counted from the
        // sixth's deadline (90 ms), not from the poll.
        late.on_timer(at(960), &mut rng);
        assert_eq!(late.stages(), (0, 6));
        assert_eq!(late.rate().bps(), 998_593_750);
        assert_eq!(late.target().bps(), 1_005_000_000);
        assert_eq!(late.next_timer(), at(975));
        // A poll before the deadline does nothing.
        late.on_timer(at(970), &mut rng);
        assert_eq!(late.stages(), (0, 6));
        // The same as polling on time.
        let mut on_time = QcnRp::new(&p, Rate::from_gbps(1), now, &mut rng);
        on_time.on_cnm(now, 32, &mut rng);
        let mut t = now;
        timer_steps(&mut on_time, &mut t, &mut rng, 6);
        assert_eq!(
            (on_time.rate(), on_time.target(), on_time.next_timer()),
            (late.rate(), late.target(), late.next_timer())
        );
        // A poll an hour late: the expiries stop at the release (the 7th).
        let mut idle = QcnRp::new(&p, Rate::from_gbps(1), now, &mut rng);
        idle.on_cnm(now, 32, &mut rng);
        idle.on_timer(Instant::from_nanos(3_600 * 1_000 * MS), &mut rng);
        assert!(idle.released());
        assert_eq!(idle.stages(), (0, 7));
        // With a limiter that is never released (`line-rate`, ceiling below the line), at most
        // MAX_CATCH_UP expiries run, then the period restarts from the poll.
        let q = RpParams {
            rpg_max_rate: Some(Rate::from_mbps(500)),
            ..params_before()
        };
        let mut held = QcnRp::new(&q, Rate::from_gbps(1), now, &mut rng);
        held.on_cnm(now, 32, &mut rng);
        let hour = Instant::from_nanos(3_600 * 1_000 * MS);
        held.on_timer(hour, &mut rng);
        assert_eq!(held.stages(), (0, MAX_CATCH_UP));
        assert_eq!(held.next_timer(), hour + Duration::from_micros(7_500));
        assert_eq!(held.rate(), Rate::from_mbps(500));
    }

    #[test]
    fn hyper_active_increase_with_i_above_one() {
        // TR capped at the line rate (`rp_release = "line-rate"`).
        let p = RpParams {
            rpg_byte_reset: Bytes::new(100_000),
            rp_clamp_tgt_rate: ClampTgtRate::AfterTimeInc,
            rp_release: Release::LineRate,
            ..params_gd6()
        };
        let mut rng = Rng::new(1);
        let now = at(0);
        let mut rp = QcnRp::new(&p, Rate::from_gbps(10), now, &mut rng);
        rp.on_cnm(now, 63, &mut rng); // CR 5 G, TR 10 G
        rp.on_cnm(now, 63, &mut rng); // CR 2.5 G
        rp.on_cnm(now, 63, &mut rng); // CR 1.25 G; TR 10 G is not > 12.5 G: no TR/8
        assert_eq!(rp.rate().bps(), 1_250_000_000);
        // Six byte-counter expiries: 5 × fast recovery, then active increase.
        for _ in 0..6 {
            rp.on_bytes_sent(now, rp.bytes_left(), &mut rng);
        }
        // FR: 5.625 G, 7.8125 G, 8.90625 G, 9.453125 G, 9.7265625 G; AI: TR 10.005 G capped 10 G,
        // CR 9.86328125 G.
        assert_eq!(rp.stages(), (6, 0));
        assert_eq!(rp.rate().bps(), 9_863_281_250);
        // After BC > threshold the byte counter reloads with half of BC_LIMIT.
        assert_eq!(rp.bytes_left(), 50_000);
        // A fresh episode with TR well below the line rate: TR ← CR.
        rp.on_cnm(now, 16, &mut rng); // TR 9.86328125 G, CR 7.3974609375 G → 7 397 460 937
        assert_eq!(rp.target().bps(), 9_863_281_250);
        assert_eq!(rp.rate().bps(), 7_397_460_937);
        let mut t = now;
        for _ in 0..6 {
            rp.on_bytes_sent(t, rp.bytes_left(), &mut rng);
            t = rp.next_timer();
            rp.on_timer(t, &mut rng);
        }
        // The pairs (BC, T) went (1,0) (1,1) ... (6,5) (6,6): ten FR steps, then (6,5) AI and
        // (6,6) the first HAI with i = 1. Checked by the stage and the state only here:
        assert_eq!(rp.stages(), (6, 6));
        assert_eq!(rp.state(), RpState::Hai);
        // Now drive TR below the cap to see the HAI steps: a new CNM resets the stages, so
        // instead lower the ceiling with a rate far from line: start from a limited TR.
        let mut rp = QcnRp::new(&p, Rate::from_gbps(10), now, &mut rng);
        rp.on_cnm(now, 63, &mut rng); // CR 5 G
        rp.on_bytes_sent(now, 1, &mut rng); // no expiry
        rp.tr = 1_000_000_000; // a stale target well below line (white-box set-up)
        rp.cr = 900_000_000;
        rp.bc = 6;
        rp.t = 6;
        rp.first_after_decrease = false;
        // (7,6): i = min − 5 = 1: TR 1.05 G, CR 975 M.
        rp.on_bytes_sent(now, rp.bytes_left(), &mut rng);
        assert_eq!(
            (rp.target().bps(), rp.rate().bps()),
            (1_050_000_000, 975_000_000)
        );
        // (7,7): i = 2: TR 1.15 G, CR 1.0625 G.
        t = rp.next_timer();
        rp.on_timer(t, &mut rng);
        assert_eq!(
            (rp.target().bps(), rp.rate().bps()),
            (1_150_000_000, 1_062_500_000)
        );
        // (8,7): i = 2: TR 1.25 G, CR 1.15625 G.
        rp.on_bytes_sent(t, rp.bytes_left(), &mut rng);
        assert_eq!(
            (rp.target().bps(), rp.rate().bps()),
            (1_250_000_000, 1_156_250_000)
        );
        // (8,8): i = 3: TR 1.4 G, CR 1.278125 G.
        let t2 = rp.next_timer();
        rp.on_timer(t2, &mut rng);
        assert_eq!(
            (rp.target().bps(), rp.rate().bps()),
            (1_400_000_000, 1_278_125_000)
        );
        assert_eq!(rp.state(), RpState::Hai);
    }

    #[test]
    fn tr_over_eight_rule() {
        let mut rng = Rng::new(1);
        let mut now = at(0);
        let mut rp = QcnRp::new(&params_gd6(), Rate::from_gbps(10), now, &mut rng);
        for _ in 0..4 {
            rp.on_cnm(now, 63, &mut rng); // 5 G, 2.5 G, 1.25 G, 625 M
        }
        assert_eq!(rp.rate().bps(), 625_000_000);
        assert_eq!(rp.target().bps(), 10_000_000_000);
        // First expiry after the decrease: TR 10 G > 10 × 625 M, so TR ← 1.25 G, then
        // fast recovery: CR ← (625 M + 1.25 G) / 2.
        let cr = timer_steps(&mut rp, &mut now, &mut rng, 2);
        assert_eq!(rp.target().bps(), 1_250_000_000);
        assert_eq!(cr, [937_500_000, 1_093_750_000]);
    }

    #[test]
    fn min_rate_floor_and_huge_feedback() {
        let mut rng = Rng::new(1);
        let now = at(0);
        let mut rp = QcnRp::new(&params(), Rate::from_gbps(1), now, &mut rng);
        for _ in 0..20 {
            rp.on_cnm(now, 255, &mut rng); // clamped to 63
        }
        assert_eq!(rp.rate(), Rate::from_mbps(5));
        rp.on_cnm(now, 0, &mut rng); // no congestion: no change
        assert_eq!(rp.rate(), Rate::from_mbps(5));
    }

    #[test]
    fn released_at_line_rate() {
        // `rp_release = "line-rate"`: TR capped, CR halves its way up to it.
        let mut rng = Rng::new(1);
        let mut now = at(0);
        let mut rp = QcnRp::new(&params_before(), Rate::from_gbps(1), now, &mut rng);
        rp.on_cnm(now, 32, &mut rng); // 750 M, TR = 1 G
        let mut n = 0;
        while !rp.released() {
            timer_steps(&mut rp, &mut now, &mut rng, 1);
            n += 1;
            assert!(n < 100);
        }
        // The distance 250 M halves (rounded up) per expiry: 2^28 > 250e6 ≥ 2^27, so 28 expiries.
        assert_eq!(n, 28);
        assert_eq!(rp.rate(), Rate::from_gbps(1));
        assert_eq!(rp.state(), RpState::Released);
    }

    #[test]
    fn max_rate_below_line_keeps_limiter() {
        // `rp_release = "line-rate"`: a ceiling below the line rate holds the limiter.
        let p = RpParams {
            rpg_max_rate: Some(Rate::from_mbps(500)),
            ..params_before()
        };
        let mut rng = Rng::new(1);
        let mut now = at(0);
        let mut rp = QcnRp::new(&p, Rate::from_gbps(1), now, &mut rng);
        assert_eq!(rp.rate(), Rate::from_mbps(500));
        rp.on_cnm(now, 32, &mut rng);
        timer_steps(&mut rp, &mut now, &mut rng, 60);
        assert_eq!(rp.rate(), Rate::from_mbps(500));
        assert!(!rp.released());
    }

    #[test]
    fn adaptive_byte_counter_follows_cr() {
        use crate::rp::adaptive_bc::PAPER_K;
        let mut rng = Rng::new(1);
        let now = at(0);
        let bc = BcLimit::Adaptive { k: PAPER_K };
        let mut rp = QcnRp::with_bc_limit(&params(), Rate::from_gbps(10), bc, now, &mut rng);
        // At the line rate: K · 10 Gb/s = 300 000 octets.
        assert_eq!(rp.bytes_left(), 300_000);
        // Decrease: CR 10 G × (1 − 63/128) = 5.078125 G, reloaded with K·CR at that rate:
        // 5 078 125 000 × 240e-6 / 8 = 152 343.75 → 152 343.
        rp.on_cnm(now, 63, &mut rng);
        assert_eq!(rp.rate().bps(), 5_078_125_000);
        assert_eq!(rp.bytes_left(), 152_343);
        rp.on_bytes_sent(now, 52_343, &mut rng);
        assert_eq!(rp.bytes_left(), 100_000);
        // A timer expiry raises CR to ⌈(5.078125 G + 10 G)/2⌉ = 7.5390625 G in mid-count: the
        // octets left are rescaled, 100 000 × 7.5390625 / 5.078125 = 148 461.5 → 148 462.
        let t = rp.next_timer();
        rp.on_timer(t, &mut rng);
        assert_eq!(rp.rate().bps(), 7_539_062_500);
        assert_eq!(rp.bytes_left(), 148_462);
        assert_eq!(rp.byte_limit(), 226_171);
        // A byte-counter expiry: CR 8.76953125 G, reloaded with K·CR = 263 085.9375 → 263 085.
        rp.on_bytes_sent(t, 148_462, &mut rng);
        assert_eq!(rp.rate().bps(), 8_769_531_250);
        assert_eq!(rp.bytes_left(), 263_085);
        // Past the threshold the adaptive limit is not halved (Algorithm 1 reloads K·CR).
        for _ in 0..6 {
            rp.on_bytes_sent(t, rp.bytes_left(), &mut rng);
        }
        assert_eq!(rp.stages().0, 7);
        assert_eq!(rp.bytes_left(), rp.rate().bps() * 240 / 8_000_000);
    }

    #[test]
    fn invariants_under_random_inputs() {
        // min_rate ≤ CR ≤ TR ≤ max_rate whatever arrives, in whatever order.
        let mut rng = Rng::new(11);
        let mut ops = Rng::new(12);
        // Under `line-rate` TR stays ≤ the ceiling too; under `max-rate` TR may pass it while
        // the limiter lives, CR may not.
        for (line, release) in [
            (Rate::from_mbps(10), Release::LineRate),
            (Rate::from_gbps(1), Release::LineRate),
            (Rate::from_gbps(100), Release::LineRate),
            (Rate::from_mbps(10), Release::MaxRate),
            (Rate::from_gbps(1), Release::MaxRate),
            (Rate::from_gbps(100), Release::MaxRate),
        ] {
            let clamp = [
                ClampTgtRate::ByteStage,
                ClampTgtRate::AfterTimeInc,
                ClampTgtRate::Always,
            ][ops.below(3) as usize];
            let p = RpParams {
                rpg_gd: (ops.below(8) + 1) as u8,
                rp_clamp_tgt_rate: clamp,
                rp_release: release,
                ..RpParams::default()
            };
            let mut now = at(0);
            let mut rp = QcnRp::new(&p, line, now, &mut rng);
            for _ in 0..50_000 {
                match ops.below(3) {
                    0 => rp.on_cnm(now, ops.below(256) as u8, &mut rng),
                    1 => rp.on_bytes_sent(now, ops.below(20_000), &mut rng),
                    _ => {
                        now = rp.next_timer();
                        rp.on_timer(now, &mut rng);
                    }
                }
                let (cr, tr) = (rp.rate(), rp.target());
                assert!(cr >= p.rpg_min_rate.min(line), "{cr} {tr}");
                match release {
                    Release::LineRate => assert!(cr <= tr && tr <= line, "{cr} {tr}"),
                    Release::MaxRate => assert!(cr <= tr && cr <= line, "{cr} {tr}"),
                }
            }
        }
    }

    #[test]
    fn jitter_stays_within_fifteen_percent() {
        // `always`: every CNM reloads the byte counter, so each iteration draws anew.
        let p = RpParams {
            rp_clamp_tgt_rate: ClampTgtRate::Always,
            ..RpParams::default()
        };
        let mut rng = Rng::new(7);
        let now = at(0);
        let mut rp = QcnRp::new(&p, Rate::from_gbps(1), now, &mut rng);
        for _ in 0..200 {
            rp.on_cnm(now, 1, &mut rng);
            let d = rp.next_timer() - now;
            assert!(d >= Duration::from_micros(12_750) && d <= Duration::from_micros(17_250));
            assert!((127_500..=172_500).contains(&rp.bytes_left()));
        }
    }
}
