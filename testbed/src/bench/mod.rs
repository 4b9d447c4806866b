//! Benchmarks that print numbers (performance is never asserted in tests).
//!
//! * [`forwarding`] — `testbed bench forwarding`: frames/s and Gb/s through a veth pair, the
//!   Linux bridge and cp-switch, measured in one run with the testbed's own raw-socket blaster
//!   and counter ([`blast`]).

pub mod frame;
pub mod report;

pub use report::{Measurement, Outcome, PathKind, Report, Row};
