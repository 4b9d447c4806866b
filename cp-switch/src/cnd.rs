//! The congestion-notification-domain (CND) defence of a port (802.1Q clause 32.4): which
//! CN-TAGs leave the port, which CNPV frames entering it are remapped, and what the port
//! advertises and learns in the LLDP Congestion Notification TLV (802.1Q Annex D).
//!
//! A leaf of the crate: the configuration ([`crate::config::PortConfig`]), the bridge and its
//! statistics use it; it uses none of them.

use cnm_proto::Duration;
use serde::{Deserialize, Serialize};

/// The congestion-notification-domain (CND) defence of a port: 802.1Q clause 32.4's
/// per-port, per-CNPV defence mode (`ieee8021CnPortPriAdminDefenseMode`), here one mode for all
/// the bridge's CNPVs (QCN-REFERENCE §1: "a CN-TAG never leaves its congestion-notification
/// domain: edge ports strip it").
///
/// | mode | CNPV frames received | CN-TAG on frames sent at priority p | congestion points | LLDP |
/// |---|---|---|---|---|
/// | `disabled` | not remapped | kept | none on this port | — |
/// | `edge` | remapped to the alternate priority (PCP rewritten) | removed | yes | — |
/// | `interior` | not remapped | removed | yes | — |
/// | `interior-ready` | not remapped | kept | yes | — |
/// | `auto` (default) | not remapped | kept only if the neighbour's CN TLV has p Ready | yes | sent |
///
/// `edge` keeps traffic from outside the domain out of the CNPV queues; `interior` faces a
/// CN-aware neighbour that did not declare itself ready for CN-TAGs; `interior-ready` one that
/// did. CNMs are not stripped: they are addressed to a reaction point, and a reaction point's
/// port is never an edge of its own domain.
///
/// **`auto`** chooses from the neighbour's LLDP Congestion Notification TLV (802.1Q Annex D,
/// `cnm_proto::wire::lldp`), as clause 32.4's automatic defence mode
/// (`ieee8021CnPortPriDefModeChoice = cnpdAutoChoice`) does: the bridge advertises its CNPVs
/// in an LLDPDU on the port (at start, on link up, every [`LLDP_TX_INTERVAL`], and at once when
/// what it advertises changes), setting the Ready bit of priority p once the neighbour has
/// declared p a CNPV; frames leave with their CN-TAG only at priorities the neighbour declared
/// Ready. So two such bridges reach `interior-ready` after one exchange, and a plain host or
/// bridge — which sends no CN TLV — never receives a CN-TAG it would drop (counted
/// `cn_tag_stripped` on the port). The neighbour's information lasts its LLDP TTL and is
/// forgotten when the link goes down.
///
/// One deviation from the standard's automatic mode: a port without a CN-aware neighbour is
/// not treated as `edge` on *ingress* (no priority remapping). A reaction point need not speak
/// LLDP (`rp-agent` does not), and remapping its CNPV frames would take its flows out of
/// congestion control; removing the CN-TAG towards it costs nothing. A port that must keep
/// outside traffic out of the CNPV queues is configured `edge`.
///
/// `auto` is the default of configuration files and `--port`: a port of the daemon may face
/// anything, and `auto` is safe for every neighbour. A frame that leaves without its CN-TAG
/// reaches a plain host as an ordinary (priority-tagged) frame; `rp-agent` takes such frames
/// as well as tagged ones and keeps the host's kernel from taking them a second time through
/// its uplink (`rp-agent`'s `UplinkMac`). [`PortConfig::new`] keeps `interior-ready`, for
/// programs (the simulator, the core tests) that wire bridges to reaction points and bridges
/// only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CndDefense {
    /// Congestion notification administratively off on this port.
    Disabled,
    /// The port faces equipment outside the domain.
    Edge,
    /// A CN-aware neighbour that is not ready for CN-TAGs.
    Interior,
    /// A CN-aware neighbour ready for CN-TAGs.
    InteriorReady,
    /// Chosen from the neighbour's LLDP CN TLV (the default).
    #[default]
    Auto,
}

/// How often a port in `auto` mode advertises its CN TLV: 802.1AB-2016 clause 9.2.5.7
/// `msgTxInterval`, default 30 s.
pub const LLDP_TX_INTERVAL: Duration = Duration::from_secs(30);

/// The time to live of what a port advertises: `msgTxHold` (4, 802.1AB clause 9.2.5.6) ×
/// [`LLDP_TX_INTERVAL`] = 120 s (clause 9.2.5.22 `txTTL`).
pub const LLDP_TTL_SECS: u16 = 120;

impl CndDefense {
    /// The priorities whose frames leave the port without their CN-TAG (bit p: priority p),
    /// given what the neighbour last announced.
    pub fn strip_mask(self, neighbour: Option<NeighbourCn>) -> u8 {
        match self {
            CndDefense::Disabled | CndDefense::InteriorReady => 0,
            CndDefense::Edge | CndDefense::Interior => 0xff,
            CndDefense::Auto => !neighbour.map_or(0, |n| n.cnpv & n.ready),
        }
    }

    /// The Ready indicators the port advertises for the bridge's CNPVs `cnpv`: in `auto` mode
    /// the CNPVs the neighbour also declared (it is CN-aware for them, so CN-TAGs may come
    /// from it); the configured readiness otherwise. `None`: the port sends no LLDPDU.
    pub fn advertised_ready(self, cnpv: u8, neighbour: Option<NeighbourCn>) -> Option<u8> {
        match self {
            CndDefense::Auto => Some(cnpv & neighbour.map_or(0, |n| n.cnpv)),
            _ => None,
        }
    }
}

/// The alternate priority of an edge port: the next lower priority that is not a CNPV, else
/// the next higher one (802.1Q clause 32.4). `None` when all eight are CNPVs.
pub fn alternate_priority(cnpv_mask: u8, p: u8) -> Option<u8> {
    let free = |q: u8| cnpv_mask & (1 << q) == 0;
    (0..p)
        .rev()
        .find(|&q| free(q))
        .or_else(|| (p + 1..8).find(|&q| free(q)))
}

/// What a neighbour announced in the LLDP Congestion Notification TLV (802.1Q Annex D).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NeighbourCn {
    /// Per-priority CNPV indicators (bit p: priority p).
    pub cnpv: u8,
    /// Per-priority Ready indicators (bit p: priority p).
    pub ready: u8,
}
