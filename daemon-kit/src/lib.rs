//! The shell both daemons (`cp-switch`, `rp-agent`) share around their sans-IO cores.
//!
//! `cnm-proto` keeps the codecs, units, the RNG and thin Linux I/O; what only a daemon (or the
//! testbed that reads a daemon's output) needs lives here.

#![forbid(unsafe_code)]
