//! The `cp-switch` daemon around the sans-IO bridge: command line and TOML ([`cli`]), the
//! dataplane loop ([`driver`]), the control socket ([`ctl`]), Prometheus metrics ([`metrics`])
//! and the JSON-lines trace ([`daemon_kit::trace_writer`]).

pub mod cli;
pub mod ctl;
pub mod driver;
pub mod metrics;
