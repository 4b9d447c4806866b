//! cp-switch: a userspace Ethernet bridge whose queues are real, bounded and observable — the
//! dataplane that QCN congestion points live in.
//!
//! The library is the sans-IO [`Bridge`] core (ARCHITECTURE.md rule 1): frames come in through
//! [`Bridge::handle_frame`], leave through [`Bridge::poll_transmit`], and time is whatever the
//! caller says it is, so the daemon, the simulator and the tests run the same code.
//!
//! Modules, in the order a frame meets them: [`forward`] (classification and forwarding
//! decision, with the [`fdb`]), [`voq`] (input buffers with virtual output queues), [`sched`]
//! (the fabric's round robin across inputs and transmission selection across priorities),
//! [`outq`] (output queues), [`shaper`] (line-rate emulation), [`delay`] (propagation delay);
//! beside them [`pause`] (802.3x PAUSE / 802.1Qbb PFC), [`cp`] (802.1Qau congestion points,
//! which sample the input buffers or output queues and send CNMs), [`stats`], [`config`] and
//! [`pool`] (recycled frame buffers).
#![forbid(unsafe_code)]

pub mod bridge;
pub mod cnd;
pub mod config;
pub mod cp;
pub mod delay;
pub mod error;
pub mod fdb;
pub mod forward;
pub mod outq;
pub mod pause;
pub mod pool;
pub mod portset;
pub mod sched;
pub mod shaper;
pub mod stats;
pub mod voq;

pub use bridge::{Bridge, CpChange};
pub use config::{BridgeConfig, ConfigError, LosslessMode, PortConfig};
pub use cp::{CpConfig, CpMode, CpPatch, CpStats, Culprit, Placement};
pub use fdb::FdbEntryView;
pub use stats::{BridgeStats, DropReason, Event};

use std::fmt;

/// A port of the bridge: its index in [`BridgeConfig::ports`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct PortId(pub u16);

impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl PortId {
    /// The index as `usize`.
    #[inline]
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}
