//! The shell both daemons (`cp-switch`, `rp-agent`) share around their sans-IO cores.
//!
//! `cnm-proto` keeps the codecs, units, the RNG and thin Linux I/O; what only a daemon (or the
//! testbed that reads a daemon's output) needs lives here: the Prometheus exposition builder
//! ([`exposition`]) and the HTTP server that serves it ([`metrics_http`]).

#![forbid(unsafe_code)]

pub mod exposition;
pub mod metrics_http;
