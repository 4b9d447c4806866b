//! testbed.
#![forbid(unsafe_code)]
pub mod analysis;
pub mod report;
