//! Benchmarks that print numbers (performance is never asserted in tests).
//!
//! * [`forwarding`] — `testbed bench forwarding`: frames/s and Gb/s through a veth pair, the
//!   Linux bridge and cp-switch, measured in one run with the testbed's own raw-socket blaster
//!   and counter ([`blast`]).
//! * [`qcn`] — `testbed bench qcn`: CNM reaction latency, forwarding cost of CP sampling,
//!   rp-agent throughput with 1 and 64 rate-limited flows, agent and generator pacing error over
//!   100 ms windows at 1 Gb/s.
//! * [`app`] — `testbed bench app`: iperf3 TCP through the agents and cp-switch against the
//!   Linux bridge, side by side, and through a shaped 1 Gb/s bottleneck with QCN active.
//! * `lab` — what the namespace benchmarks share: line topologies, working directory,
//!   daemon control sockets.
//! * [`sim`] — `testbed bench sim`: speed of the simulator on the 10 Gb/s dumbbell and
//!   parking lot (simulated seconds per wall second, CPU per simulated second, events and
//!   deliveries per second, peak memory).

pub mod app;
pub mod blast;
pub mod forwarding;
pub mod frame;
mod lab;
pub mod qcn;
pub mod report;
pub mod sim;

pub use report::{Measurement, Outcome, PathKind, Report, Row};

use crate::netns::NetnsError;

/// Errors of a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Namespaces need root.
    #[error("the benchmark builds network namespaces and must run as root")]
    NotRoot,
    /// A frame size outside what the links carry.
    #[error("frame size {0} is outside {min}..={max} octets", min = frame::MIN_SIZE, max = frame::MAX_SIZE)]
    BadSize(usize),
    /// Building or tearing down the topology.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// A packet port failed (the blaster's or the counter's).
    #[error("{role}: {source}")]
    Port {
        /// `blaster` or `counter`.
        role: &'static str,
        /// The port error.
        #[source]
        source: cnm_proto::phy::PortError,
    },
    /// Entering a namespace or another OS call failed.
    #[error("{role}: {source}")]
    Io {
        /// Which thread.
        role: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// No test frame reached the counter.
    #[error("no test frame reached the counter within {0}")]
    NothingReceived(cnm_proto::Duration),
    /// A worker thread panicked.
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
    /// SIGINT/SIGTERM.
    #[error(transparent)]
    Interrupted(#[from] crate::signals::Interrupted),
}
