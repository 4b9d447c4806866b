//! testbed.
#![forbid(unsafe_code)]
