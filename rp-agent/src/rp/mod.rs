//! Reaction points: the per-flow rate controllers that turn congestion feedback into a rate.
//!
//! A reaction point (802.1Q-2011 clause 32.13) owns the rate of one rate-limited flow. It is fed
//! three inputs — a CNM's quantized feedback, the bytes the flow sent, and its own timer — and
//! exposes the current rate its limiter must pace at. Every algorithm is pure: time and
//! randomness come in as arguments, so the agent, the tests and the simulator drive it alike.
//!
//! [`Rp`] dispatches over the algorithms selected by [`crate::config::RpMode`]; only standard
//! QCN ([`qcn`]) exists so far. A new mode adds a module here, a variant to [`Rp`] and to
//! `RpMode`, and an arm to each method below. Explicit-rate feedback messages (0x88B5) are
//! parsed by nobody yet: the agent counts them (`rate_feedback_rx`) in
//! [`crate::Agent::handle_uplink`], where a mode that uses them would hook in.

pub mod qcn;

use crate::config::{AgentConfig, RpMode};
use cnm_proto::rng::Rng;
use cnm_proto::wire::CpId;
use cnm_proto::{Instant, Rate};
use serde::Serialize;

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
    /// No limiter: the flow is sent at line rate without a CN-TAG.
    Released,
}

/// One reaction point of the configured mode.
#[derive(Debug, Clone)]
pub enum Rp {
    /// Standard QCN.
    Qcn(QcnRp),
}

impl Rp {
    /// A new limiter, created by the first CNM of a flow: starts at the line rate (capped at
    /// `rpg_max_rate`). The caller then applies that CNM with [`Rp::on_cnm`].
    pub fn new(cfg: &AgentConfig, now: Instant, rng: &mut Rng) -> Rp {
        match cfg.rp_mode {
            RpMode::Qcn => Rp::Qcn(QcnRp::new(&cfg.rp, cfg.line_rate, now, rng)),
        }
    }

    /// A CNM with this quantized feedback (1..=63) from congestion point `cpid` arrived for
    /// the flow. Standard QCN ignores the CPID; per-CP modes (QCN/BS) key their limiters on it.
    pub fn on_cnm(&mut self, now: Instant, qntz_fb: u8, cpid: CpId, rng: &mut Rng) {
        let _ = cpid;
        match self {
            Rp::Qcn(q) => q.on_cnm(now, qntz_fb, rng),
        }
    }

    /// The flow transmitted `n` more octets.
    pub fn on_bytes_sent(&mut self, now: Instant, n: u64, rng: &mut Rng) {
        match self {
            Rp::Qcn(q) => q.on_bytes_sent(now, n, rng),
        }
    }

    /// Runs the timer if it is due at `now`.
    pub fn on_timer(&mut self, now: Instant, rng: &mut Rng) {
        match self {
            Rp::Qcn(q) => q.on_timer(now, rng),
        }
    }

    /// When [`Rp::on_timer`] next has something to do.
    pub fn next_timer(&self) -> Instant {
        match self {
            Rp::Qcn(q) => q.next_timer(),
        }
    }

    /// Current rate CR: the limiter's pacing rate.
    pub fn rate(&self) -> Rate {
        match self {
            Rp::Qcn(q) => q.rate(),
        }
    }

    /// Target rate TR.
    pub fn target(&self) -> Rate {
        match self {
            Rp::Qcn(q) => q.target(),
        }
    }

    /// Phase ([`RpState::Released`] once [`Rp::released`]).
    pub fn state(&self) -> RpState {
        match self {
            Rp::Qcn(q) => q.state(),
        }
    }

    /// True when the limiter may be removed: CR reached the line rate (802.1Q 32.14.2: the
    /// flow is then no longer rate limited nor CN-tagged).
    pub fn released(&self) -> bool {
        match self {
            Rp::Qcn(q) => q.released(),
        }
    }
}
