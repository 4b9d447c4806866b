//! cp-switch.
#![forbid(unsafe_code)]
