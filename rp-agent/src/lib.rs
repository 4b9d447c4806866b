//! rp-agent: the QCN reaction point as a host agent.
//!
//! The library is the sans-IO [`Agent`] core and its parts; the binary (`rp-agent`) is the
//! daemon that runs it between a TAP device and an uplink, plus traffic generator and sink
//! modes.
//!
//! * [`config`] — [`AgentConfig`], RP parameters under the dcbnl `ieee_qcn` names.
//! * [`rp`] — reaction points: [`rp::qcn`] (802.1Q-2011 clauses 32.13-32.14),
//!   [`rp::adaptive_bc`] (BC_LIMIT = K·CR), [`rp::bs`] (QCN/BS: a limiter per congestion
//!   point), [`rp::explicit_rate`] (explicit-rate source); selected by [`RpMode`].
//! * [`classify`] — flow keys; [`limiter`] — byte-accurate pacers; [`tagger`] — 802.1Q tag and
//!   CN-TAG; [`pause`] — received PAUSE/PFC; [`stats`] — counters, views, events.
//! * [`gen`] — traffic models and the sink; [`held`] — frames refused with backpressure,
//!   kept by their producer until the agent has room (the daemon, the generator, the
//!   simulator).
#![forbid(unsafe_code)]

pub mod agent;
pub mod classify;
pub mod config;
pub mod gen;
pub mod held;
pub mod limiter;
pub mod pause;
pub mod pool;
pub mod rp;
pub mod stats;
pub mod tagger;

pub use agent::{Agent, HostError, RpChange};
pub use config::{
    AgentConfig, ClampTgtRate, ConfigError, FlowKeyMode, Release, RpMode, RpModeError, RpParams,
    RpPatch,
};
pub use rp::RpState;
pub use stats::{AgentStats, CnmIgnored, CpView, Event, FlowView};
