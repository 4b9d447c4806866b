//! The `cp-switch` daemon around the sans-IO bridge: command line and TOML ([`cli`]), the
//! dataplane loop ([`driver`]) with its ingress burst measure ([`ingress`]) and its ingress
//! link-rate stage ([`stage`]), the control socket ([`ctl`]), Prometheus metrics
//! ([`metrics`]) and the JSON-lines trace ([`daemon_kit::trace_writer`]).

pub mod cli;
pub mod ctl;
pub mod driver;
pub mod ingress;
pub mod metrics;
pub mod stage;
