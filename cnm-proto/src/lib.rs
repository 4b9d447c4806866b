//! `cnm-proto`: the protocol crate of the QCN dataplane.
//!
//! * [`wire`] — zero-copy codecs for Ethernet II, 802.1Q tags, the CN-TAG and the Congestion
//!   Notification Message of IEEE 802.1Q clauses 30-33 (formerly 802.1Qau), 802.3x PAUSE,
//!   802.1Qbb PFC, the LLDP Congestion Notification TLV and the project's experimental
//!   explicit-rate feedback message. Pure functions of bytes: no I/O, no clock, no allocation.
//! * [`phy`] — thin Linux I/O: AF_PACKET ports with PACKET_MMAP rings, TAP devices, an in-memory
//!   pipe pair for tests, and classic pcap files. The only module allowed to use `unsafe`.
//! * [`time`] — [`time::Instant`], [`time::Duration`], [`time::Rate`], [`time::Bytes`].
//! * [`line`] — the line clock: what a frame costs on an 802.3 line and when it finishes
//!   there ([`line::LineClock`], [`line::Overheads`]), shared by the switch's shaper, the
//!   agent's pacers and the simulator's links.
//! * [`rng`] — the seeded generator every core takes as input.
//! * [`scale`] — [`Scale`]: the time scaling of rates and times (rates ÷ S, times × S).
#![deny(unsafe_code)]

pub mod line;
pub mod phy;
pub mod rng;
pub mod scale;
pub mod time;
pub mod wire;

pub use scale::Scale;
pub use time::{Bytes, Duration, Instant, Rate};
