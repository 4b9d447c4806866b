//! The `rp-agent` binary around the sans-IO [`rp_agent::Agent`]: the TAP ⇄ uplink daemon
//! ([`run`]), the generator and sink modes ([`traffic`]), the control socket ([`ctl`]), Prometheus
//! metrics ([`metrics`]) and the JSON-lines trace ([`cnm_proto::phy::trace`]).

pub mod ctl;
pub mod metrics;
pub mod run;
pub mod traffic;

use cnm_proto::phy;

/// Why a mode could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Invalid configuration (exit code 2).
    #[error("{0}")]
    Config(String),
    /// A run-time failure (exit code 1).
    #[error("{0}")]
    Runtime(String),
}

impl DaemonError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            DaemonError::Config(_) => 2,
            DaemonError::Runtime(_) => 1,
        }
    }
}

/// Turns every offload of `name` off: with TSO/GSO/GRO or checksum offload on, AF_PACKET sees
/// frames larger than the MTU and partial checksums.
pub fn prepare_offloads(name: &str) -> Result<(), DaemonError> {
    let rt = |what: &str, e: &dyn std::fmt::Display| {
        DaemonError::Runtime(format!("uplink {name}: {what}: {e}"))
    };
    let off = phy::offload::get(name).map_err(|e| rt("reading offloads", &e))?;
    if off.all_off() {
        return Ok(());
    }
    phy::offload::disable_all(name).map_err(|e| rt("turning offloads off", &e))?;
    let after = phy::offload::get(name).map_err(|e| rt("reading offloads", &e))?;
    if !after.all_off() {
        return Err(DaemonError::Runtime(format!(
            "uplink {name}: offloads {:?} stay on (run: ethtool -K {name} tso off gso off gro off tx off rx off sg off)",
            after.enabled()
        )));
    }
    Ok(())
}
