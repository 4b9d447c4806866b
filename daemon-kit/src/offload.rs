//! Offloads off before a port opens: with TSO/GSO/GRO or checksum offload on, an `AF_PACKET`
//! socket sees frames larger than the MTU and partial checksums, which a switch must not relay
//! and an agent must not pace as one frame.

use cnm_proto::phy;

use crate::DaemonError;

/// Turns every offload of interface `name` off, or explains how to. `role` names the port in
/// messages (`"port p1"`, `"uplink eth0"`).
pub fn prepare_offloads(role: &str, name: &str) -> Result<(), DaemonError> {
    let rt = |what: &str, e: &dyn std::fmt::Display| {
        DaemonError::Runtime(format!("{role} {name}: {what}: {e}"))
    };
    let off = phy::offload::get(name).map_err(|e| rt("reading offloads", &e))?;
    if off.all_off() {
        return Ok(());
    }
    let before = off.enabled();
    phy::offload::disable_all(name).map_err(|e| {
        DaemonError::Runtime(format!(
            "{role} {name}: offloads {before:?} are on and could not be turned off ({e}); \
             run: ethtool -K {name} tso off gso off gro off tx off rx off sg off"
        ))
    })?;
    let after = phy::offload::get(name).map_err(|e| rt("reading offloads", &e))?;
    if !after.all_off() {
        return Err(DaemonError::Runtime(format!(
            "{role} {name}: offloads {:?} stay on; refusing to start (run: ethtool -K {name} \
             tso off gso off gro off tx off rx off sg off)",
            after.enabled()
        )));
    }
    tracing::info!(port = name, turned_off = ?before, "offloads turned off");
    Ok(())
}
