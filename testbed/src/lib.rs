//! testbed.
#![forbid(unsafe_code)]

pub mod sim;
