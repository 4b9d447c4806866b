//! The `rp-agent` binary around the sans-IO [`rp_agent::Agent`]: the TAP ⇄ uplink daemon
//! ([`run`]), the generator and sink modes ([`traffic`]),
//! every generator and sink of a lab in one process ([`hosts`]), the control socket ([`ctl`]), Prometheus
//! metrics ([`metrics`]) and the JSON-lines trace ([`daemon_kit::trace_writer`]).

pub mod ctl;
pub mod hosts;
pub mod metrics;
pub mod run;
pub mod traffic;

pub use daemon_kit::DaemonError;

/// Turns every offload of the uplink `name` off (see [`daemon_kit::offload`]).
pub fn prepare_offloads(name: &str) -> Result<(), DaemonError> {
    daemon_kit::offload::prepare_offloads("uplink", name)
}
