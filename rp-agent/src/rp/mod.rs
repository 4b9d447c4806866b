//! Reaction points: the per-flow rate controllers that turn congestion feedback into a rate.
//!
//! A reaction point (802.1Q-2011 clause 32.13) owns the rate of one rate-limited flow. It is fed
//! congestion feedback — a CNM's quantized feedback with the CPID of its sender, or an
//! explicit-rate message — the bytes the flow sent, and its own timer, and exposes the current
//! rate its limiter must pace at. Every algorithm is pure: time and randomness come in as
//! arguments, so the agent, the tests and the simulator drive it alike.
//!
//! [`Rp`] dispatches over the algorithms selected by [`crate::config::RpMode`]:
//! * `qcn` — standard QCN, [`qcn`];
//! * `adaptive-bc` — QCN with BC_LIMIT = K·CR, [`adaptive_bc`];
//! * `qcn-bs`, `adaptive-bc+qcn-bs` — one QCN limiter per congestion point, sent at the
//!   minimum, [`bs`];
//! * `explicit-rate` — the source rule of the explicit-rate scheme, [`explicit_rate`]; it is
//!   fed by rate-feedback messages (EtherType 0x88B5) through [`Rp::on_rate_feedback`] and
//!   ignores CNMs.
//!
//! Parameters change at run time through [`Rp::set_params`] (the agent's
//! `Agent::set_rp_config`): a limiter keeps its state (CR, TR, stages, table entries) and
//! takes the new values, clamped into the new rate bounds. A change of `rp_mode` within one
//! kind of limiter (`qcn` ⇄ `adaptive-bc`, `qcn-bs` ⇄ `adaptive-bc+qcn-bs`) only swaps the
//! byte counter; across kinds the agent releases its limiters instead.
//!
//! A new mode adds a module here, a variant to [`Rp`] and to `RpMode`, and an arm to each
//! method below.

pub mod adaptive_bc;
pub mod bs;
pub mod explicit_rate;
pub mod qcn;

use crate::config::AgentConfig;
use cnm_proto::rng::Rng;
use cnm_proto::wire::CpId;
use cnm_proto::{Instant, Rate};
use serde::Serialize;

pub use adaptive_bc::BcLimit;
pub use bs::{BsEntry, BsRp};
pub use explicit_rate::{ErOutcome, ErRp};
pub use qcn::QcnRp;

/// Phase of a flow's rate control, as shown by `ctl show flows`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RpState {
    /// Fast recovery: CR moves halfway to TR on each expiry (802.1Q 32.14, the first
    /// `rpg_threshold` expiries after a CNM).
    Fr,
    /// Active increase: TR grows by R_AI per expiry.
    Ai,
    /// Hyper-active increase: TR grows by (min(BC, T) − threshold) · R_HAI per expiry.
    Hai,
    /// Explicit rate: the flow is sent at the rate advertised by its bottleneck.
    Er,
    /// No limiter: the flow is sent at line rate without a CN-TAG.
    Released,
}

/// What a CNM did to a reaction point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CnmOutcome {
    /// Applied.
    Applied,
    /// Applied to a new QCN/BS entry that displaced the entry of this CPID (table full).
    Displaced(CpId),
    /// Not used by this mode (explicit rate).
    Ignored,
}

/// One congestion point's limiter of a QCN/BS flow, for `ctl show flows`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpRate {
    /// The congestion point.
    pub cpid: CpId,
    /// Its entry's current rate.
    pub cr: Rate,
    /// Its entry's target rate.
    pub tr: Rate,
}

/// One reaction point of the configured mode.
#[derive(Debug, Clone)]
pub enum Rp {
    /// Standard QCN, with the fixed or the adaptive byte counter.
    Qcn(QcnRp),
    /// QCN/BS, with the fixed or the adaptive byte counter in every entry.
    Bs(BsRp),
    /// Explicit-rate source.
    Er(ErRp),
}

impl Rp {
    /// A new limiter of the configured mode, created by the first feedback for a flow: a QCN
    /// limiter starts at the line rate (capped at `rpg_max_rate`), a QCN/BS table empty, an
    /// explicit-rate source at the ceiling with no congestion point. The caller then applies
    /// that feedback ([`Rp::on_cnm`] or [`Rp::on_rate_feedback`]).
    pub fn new(cfg: &AgentConfig, now: Instant, rng: &mut Rng) -> Rp {
        let bc = Rp::bc_limit(cfg);
        if cfg.rp_mode.explicit_rate() {
            Rp::Er(ErRp::new(&cfg.rp, cfg.line_rate, now))
        } else if cfg.rp_mode.per_cp() {
            Rp::Bs(BsRp::new(&cfg.rp, cfg.line_rate, bc))
        } else {
            Rp::Qcn(QcnRp::with_bc_limit(&cfg.rp, cfg.line_rate, bc, now, rng))
        }
    }

    /// The byte counter of `cfg`'s mode: K·CR for the adaptive modes, `rpg_byte_reset`
    /// otherwise.
    pub fn bc_limit(cfg: &AgentConfig) -> BcLimit {
        if cfg.rp_mode.adaptive_bc() {
            BcLimit::Adaptive {
                k: cfg.rp.rpg_adaptive_k,
            }
        } else {
            BcLimit::Fixed(cfg.rp.rpg_byte_reset)
        }
    }

    /// Whether a limiter made for mode `a` can carry on under mode `b` with new parameters
    /// ([`Rp::set_params`]): the same kind of limiter — QCN with either byte counter, QCN/BS
    /// with either, or the explicit-rate source.
    pub fn same_kind(a: crate::config::RpMode, b: crate::config::RpMode) -> bool {
        a.explicit_rate() == b.explicit_rate() && a.per_cp() == b.per_cp()
    }

    /// Run-time parameter change: the limiter takes `cfg`'s parameters (and byte counter)
    /// and keeps its state. `cfg.rp_mode` must be of the same kind as the mode the limiter
    /// was made for ([`Rp::same_kind`]); otherwise nothing changes and `false` is returned.
    pub fn set_params(&mut self, cfg: &AgentConfig, now: Instant) -> bool {
        let bc = Rp::bc_limit(cfg);
        match self {
            Rp::Qcn(q) if !cfg.rp_mode.per_cp() && !cfg.rp_mode.explicit_rate() => {
                q.set_params(&cfg.rp, bc, now)
            }
            Rp::Bs(b) if cfg.rp_mode.per_cp() => b.set_params(&cfg.rp, bc, now),
            Rp::Er(e) if cfg.rp_mode.explicit_rate() => e.set_params(&cfg.rp, now),
            _ => return false,
        }
        true
    }

    /// A CNM with this quantized feedback (1..=63) from congestion point `cpid` arrived for
    /// the flow. Standard QCN ignores the CPID; QCN/BS keys its limiters on it; the
    /// explicit-rate source ignores CNMs.
    pub fn on_cnm(&mut self, now: Instant, qntz_fb: u8, cpid: CpId, rng: &mut Rng) -> CnmOutcome {
        match self {
            Rp::Qcn(q) => {
                q.on_cnm(now, qntz_fb, rng);
                CnmOutcome::Applied
            }
            Rp::Bs(b) => match b.on_cnm(now, qntz_fb, cpid, rng) {
                Some(old) => CnmOutcome::Displaced(old),
                None => CnmOutcome::Applied,
            },
            Rp::Er(_) => CnmOutcome::Ignored,
        }
    }

    /// A rate-feedback message advertising `rate` from congestion point `cpid` arrived for the
    /// flow. Only the explicit-rate source uses it; the QCN modes answer
    /// [`ErOutcome::Ignored`].
    pub fn on_rate_feedback(&mut self, now: Instant, rate: Rate, cpid: CpId) -> ErOutcome {
        match self {
            Rp::Er(e) => e.on_feedback(now, rate, cpid),
            Rp::Qcn(_) | Rp::Bs(_) => ErOutcome::Ignored,
        }
    }

    /// The flow transmitted `n` more octets.
    pub fn on_bytes_sent(&mut self, now: Instant, n: u64, rng: &mut Rng) {
        match self {
            Rp::Qcn(q) => q.on_bytes_sent(now, n, rng),
            Rp::Bs(b) => b.on_bytes_sent(now, n, rng),
            Rp::Er(_) => {}
        }
    }

    /// Runs the timer(s) due at `now` (the explicit-rate source's is its expiry).
    pub fn on_timer(&mut self, now: Instant, rng: &mut Rng) {
        match self {
            Rp::Qcn(q) => q.on_timer(now, rng),
            Rp::Bs(b) => b.on_timer(now, rng),
            Rp::Er(e) => e.on_timer(now),
        }
    }

    /// When [`Rp::on_timer`] next has something to do.
    pub fn next_timer(&self) -> Instant {
        match self {
            Rp::Qcn(q) => q.next_timer(),
            Rp::Bs(b) => b.next_timer(),
            Rp::Er(e) => e.next_timer(),
        }
    }

    /// Current rate CR: the limiter's pacing rate (QCN/BS: the minimum over its entries;
    /// explicit rate: r).
    pub fn rate(&self) -> Rate {
        match self {
            Rp::Qcn(q) => q.rate(),
            Rp::Bs(b) => b.rate(),
            Rp::Er(e) => e.rate(),
        }
    }

    /// Target rate TR (QCN/BS: the selected entry's; explicit rate: r).
    pub fn target(&self) -> Rate {
        match self {
            Rp::Qcn(q) => q.target(),
            Rp::Bs(b) => b.target(),
            Rp::Er(e) => e.rate(),
        }
    }

    /// Phase ([`RpState::Released`] once [`Rp::released`]; QCN/BS: the selected entry's).
    pub fn state(&self) -> RpState {
        match self {
            Rp::Qcn(q) => q.state(),
            Rp::Bs(b) => b.state(),
            Rp::Er(e) => e.state(),
        }
    }

    /// True when the limiter may be removed: CR reached `rpg_max_rate` (the line rate under
    /// `rp_release = "line-rate"`; 802.1Q 32.14.2: the flow is then no longer rate limited nor
    /// CN-tagged, see [`qcn`]); QCN/BS: no entry left; explicit
    /// rate: r at the line rate or expired.
    pub fn released(&self) -> bool {
        match self {
            Rp::Qcn(q) => q.released(),
            Rp::Bs(b) => b.released(),
            Rp::Er(e) => e.released(),
        }
    }

    /// QCN/BS: every entry's congestion point and rates, in creation order; empty otherwise.
    pub fn cps(&self) -> Vec<CpRate> {
        match self {
            Rp::Bs(b) => b
                .entries()
                .iter()
                .map(|e| CpRate {
                    cpid: e.cpid,
                    cr: e.rp.rate(),
                    tr: e.rp.target(),
                })
                .collect(),
            Rp::Qcn(_) | Rp::Er(_) => Vec::new(),
        }
    }

    /// Explicit rate: the congestion point whose rate the flow follows (None while unset, and
    /// in the other modes).
    pub fn er_cpid(&self) -> Option<CpId> {
        match self {
            Rp::Er(e) => e.cpid(),
            Rp::Qcn(_) | Rp::Bs(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RpMode;
    use cnm_proto::wire::EthernetAddress;

    #[test]
    fn every_mode_keeps_its_rate_in_bounds_under_random_inputs() {
        // Under `rp_release = "line-rate"` TR too stays within the line rate; under the default
        // `max-rate` TR may pass it while the limiter lives (it is not capped), CR may not.
        use crate::config::Release;
        for (mode, release) in RpMode::ALL
            .into_iter()
            .flat_map(|m| [(m, Release::LineRate), (m, Release::MaxRate)])
        {
            let mut cfg = AgentConfig {
                line_rate: Rate::from_gbps(10),
                rp_mode: mode,
                ..AgentConfig::default()
            };
            cfg.rp.rp_release = release;
            let (min, line) = (cfg.rp.rpg_min_rate, cfg.line_rate);
            let mut rng = Rng::new(21);
            let mut ops = Rng::new(22);
            let mut now = Instant::from_nanos(1);
            let mut rp = Rp::new(&cfg, now, &mut rng);
            for _ in 0..30_000 {
                let cpid = CpId::new(EthernetAddress([2, 0, 0, 0, 0, ops.below(12) as u8]), 3);
                match ops.below(4) {
                    0 => {
                        rp.on_cnm(now, ops.below(64) as u8 + 1, cpid, &mut rng);
                    }
                    1 => rp.on_bytes_sent(now, ops.below(40_000), &mut rng),
                    2 => {
                        let r = Rate::from_bps(ops.next_u64() >> ops.below(64));
                        rp.on_rate_feedback(now, r, cpid);
                    }
                    _ => {
                        now = rp
                            .next_timer()
                            .min(now + cnm_proto::Duration::from_millis(20));
                        rp.on_timer(now, &mut rng);
                    }
                }
                if rp.released() {
                    // What the agent does: forget the limiter; the next feedback makes one.
                    rp = Rp::new(&cfg, now, &mut rng);
                    continue;
                }
                let (cr, tr) = (rp.rate(), rp.target());
                assert!(min <= cr && cr <= tr, "{mode}: {cr} {tr}");
                if release == Release::LineRate || mode.explicit_rate() {
                    assert!(tr <= line, "{mode}: {cr} {tr}");
                } else {
                    assert!(cr <= line, "{mode}: {cr} {tr}");
                }
                let cps = rp.cps();
                assert!(cps.len() <= cfg.rp.rpg_bs_max_cps);
                if mode.per_cp() {
                    assert_eq!(cps.iter().map(|c| c.cr).min(), Some(cr), "{mode}");
                }
            }
        }
    }
}
