//! Offload control through the legacy ethtool ioctls (`SIOCETHTOOL` with a
//! `struct ethtool_value`, `include/uapi/linux/ethtool.h`).
//!
//! Why it matters here: with TSO/GSO/GRO on, a veth hands `AF_PACKET` super-frames larger than
//! the MTU; with checksum offload on, frames carry partial checksums that a userspace switch
//! forwards as garbage; with VLAN receive offload the tag travels out of band. Every interface a
//! daemon touches therefore gets [`disable_all`].
//!
//! A feature the driver does not implement answers `EOPNOTSUPP`; it is reported as `None` by
//! [`get`] and skipped by [`disable_all`].

use std::fmt;

use super::iface::IfReq;
use super::PortError;

/// `SIOCETHTOOL` (`include/uapi/linux/sockios.h`).
const SIOCETHTOOL: libc::c_ulong = 0x8946;

/// Legacy ethtool command numbers (`include/uapi/linux/ethtool.h`).
mod cmd {
    pub const GRXCSUM: u32 = 0x0000_0014;
    pub const SRXCSUM: u32 = 0x0000_0015;
    pub const GTXCSUM: u32 = 0x0000_0016;
    pub const STXCSUM: u32 = 0x0000_0017;
    pub const GSG: u32 = 0x0000_0018;
    pub const SSG: u32 = 0x0000_0019;
    pub const GTSO: u32 = 0x0000_001e;
    pub const STSO: u32 = 0x0000_001f;
    pub const GGSO: u32 = 0x0000_0023;
    pub const SGSO: u32 = 0x0000_0024;
    pub const GFLAGS: u32 = 0x0000_0025;
    pub const SFLAGS: u32 = 0x0000_0026;
    pub const GGRO: u32 = 0x0000_002b;
    pub const SGRO: u32 = 0x0000_002c;
}

/// `ETH_FLAG_*` bits of `ETHTOOL_GFLAGS`/`ETHTOOL_SFLAGS` (`include/uapi/linux/ethtool.h`).
mod flag {
    /// TX VLAN offload (`NETIF_F_HW_VLAN_CTAG_TX`).
    pub const TXVLAN: u32 = 1 << 7;
    /// RX VLAN offload (`NETIF_F_HW_VLAN_CTAG_RX`).
    pub const RXVLAN: u32 = 1 << 8;
    /// Large receive offload (`NETIF_F_LRO`).
    pub const LRO: u32 = 1 << 15;
}

/// `struct ethtool_value` (`include/uapi/linux/ethtool.h`).
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// One offload feature, named as `ethtool -k` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Feature {
    /// `rx-checksumming` (`ETHTOOL_GRXCSUM`).
    RxChecksum,
    /// `tx-checksumming` (`ETHTOOL_GTXCSUM`).
    TxChecksum,
    /// `scatter-gather` (`ETHTOOL_GSG`).
    ScatterGather,
    /// `tcp-segmentation-offload` (`ETHTOOL_GTSO`).
    Tso,
    /// `generic-segmentation-offload` (`ETHTOOL_GGSO`).
    Gso,
    /// `generic-receive-offload` (`ETHTOOL_GGRO`).
    Gro,
    /// `large-receive-offload` (`ETH_FLAG_LRO`).
    Lro,
    /// `rx-vlan-offload` (`ETH_FLAG_RXVLAN`).
    RxVlan,
    /// `tx-vlan-offload` (`ETH_FLAG_TXVLAN`).
    TxVlan,
}

impl Feature {
    /// Every feature, in the order [`disable_all`] turns them off (segmentation before the
    /// scatter-gather and checksum features it depends on).
    pub const ALL: [Feature; 9] = [
        Feature::Tso,
        Feature::Gso,
        Feature::Gro,
        Feature::Lro,
        Feature::ScatterGather,
        Feature::TxChecksum,
        Feature::RxChecksum,
        Feature::RxVlan,
        Feature::TxVlan,
    ];

    /// The `ethtool -k` name.
    pub fn ethtool_name(self) -> &'static str {
        match self {
            Feature::RxChecksum => "rx-checksumming",
            Feature::TxChecksum => "tx-checksumming",
            Feature::ScatterGather => "scatter-gather",
            Feature::Tso => "tcp-segmentation-offload",
            Feature::Gso => "generic-segmentation-offload",
            Feature::Gro => "generic-receive-offload",
            Feature::Lro => "large-receive-offload",
            Feature::RxVlan => "rx-vlan-offload",
            Feature::TxVlan => "tx-vlan-offload",
        }
    }

    /// `(get, set)` commands of a per-feature ioctl, or the `ETH_FLAG_*` bit.
    fn access(self) -> Access {
        match self {
            Feature::RxChecksum => Access::Value(cmd::GRXCSUM, cmd::SRXCSUM),
            Feature::TxChecksum => Access::Value(cmd::GTXCSUM, cmd::STXCSUM),
            Feature::ScatterGather => Access::Value(cmd::GSG, cmd::SSG),
            Feature::Tso => Access::Value(cmd::GTSO, cmd::STSO),
            Feature::Gso => Access::Value(cmd::GGSO, cmd::SGSO),
            Feature::Gro => Access::Value(cmd::GGRO, cmd::SGRO),
            Feature::Lro => Access::Flag(flag::LRO),
            Feature::RxVlan => Access::Flag(flag::RXVLAN),
            Feature::TxVlan => Access::Flag(flag::TXVLAN),
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.ethtool_name())
    }
}

enum Access {
    Value(u32, u32),
    Flag(u32),
}

/// The offload state of one interface: `Some(on)` per feature, `None` when the driver does not
/// support querying it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offloads {
    /// `rx-checksumming`.
    pub rx_csum: Option<bool>,
    /// `tx-checksumming`.
    pub tx_csum: Option<bool>,
    /// `scatter-gather`.
    pub sg: Option<bool>,
    /// `tcp-segmentation-offload`.
    pub tso: Option<bool>,
    /// `generic-segmentation-offload`.
    pub gso: Option<bool>,
    /// `generic-receive-offload`.
    pub gro: Option<bool>,
    /// `large-receive-offload`.
    pub lro: Option<bool>,
    /// `rx-vlan-offload`.
    pub rx_vlan: Option<bool>,
    /// `tx-vlan-offload`.
    pub tx_vlan: Option<bool>,
}

impl Offloads {
    /// The state of one feature.
    pub fn feature(&self, f: Feature) -> Option<bool> {
        match f {
            Feature::RxChecksum => self.rx_csum,
            Feature::TxChecksum => self.tx_csum,
            Feature::ScatterGather => self.sg,
            Feature::Tso => self.tso,
            Feature::Gso => self.gso,
            Feature::Gro => self.gro,
            Feature::Lro => self.lro,
            Feature::RxVlan => self.rx_vlan,
            Feature::TxVlan => self.tx_vlan,
        }
    }

    fn slot(&mut self, f: Feature) -> &mut Option<bool> {
        match f {
            Feature::RxChecksum => &mut self.rx_csum,
            Feature::TxChecksum => &mut self.tx_csum,
            Feature::ScatterGather => &mut self.sg,
            Feature::Tso => &mut self.tso,
            Feature::Gso => &mut self.gso,
            Feature::Gro => &mut self.gro,
            Feature::Lro => &mut self.lro,
            Feature::RxVlan => &mut self.rx_vlan,
            Feature::TxVlan => &mut self.tx_vlan,
        }
    }

    /// True when no feature is on (unsupported ones count as off).
    pub fn all_off(&self) -> bool {
        Feature::ALL.iter().all(|f| self.feature(*f) != Some(true))
    }

    /// The features that are on.
    pub fn enabled(&self) -> Vec<Feature> {
        Feature::ALL
            .iter()
            .copied()
            .filter(|f| self.feature(*f) == Some(true))
            .collect()
    }
}

impl fmt::Display for Offloads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for feat in Feature::ALL {
            let v = match self.feature(feat) {
                Some(true) => "on",
                Some(false) => "off",
                None => "n/a",
            };
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{feat}: {v}")?;
        }
        Ok(())
    }
}

/// Read every offload feature of `name`.
pub fn get(name: &str) -> Result<Offloads, PortError> {
    let mut out = Offloads::default();
    let flags = match ethtool(name, "ethtool get flags", cmd::GFLAGS, 0) {
        Ok(v) => Some(v),
        Err(e) if is_unsupported(&e) => None,
        Err(e) => return Err(e),
    };
    for f in Feature::ALL {
        *out.slot(f) = match f.access() {
            Access::Value(get, _) => match ethtool(name, "ethtool get feature", get, 0) {
                Ok(v) => Some(v != 0),
                Err(e) if is_unsupported(&e) => None,
                Err(e) => return Err(e),
            },
            Access::Flag(bit) => flags.map(|v| v & bit != 0),
        };
    }
    Ok(out)
}

/// Turn one feature of `name` on or off. `EOPNOTSUPP` is returned as an error here; see
/// [`PortError::raw_os_error`].
pub fn set(name: &str, feature: Feature, on: bool) -> Result<(), PortError> {
    match feature.access() {
        Access::Value(_, set) => {
            ethtool(name, "ethtool set feature", set, u32::from(on))?;
        }
        Access::Flag(bit) => {
            let cur = ethtool(name, "ethtool get flags", cmd::GFLAGS, 0)?;
            let new = if on { cur | bit } else { cur & !bit };
            if new != cur {
                ethtool(name, "ethtool set flags", cmd::SFLAGS, new)?;
            }
        }
    }
    Ok(())
}

/// Turn every offload of `name` off. Returns the features that were on and are now off.
/// Features the driver does not support, or cannot change (`EOPNOTSUPP`, and `EINVAL` for a
/// fixed flag), are left alone.
pub fn disable_all(name: &str) -> Result<Vec<Feature>, PortError> {
    let before = get(name)?;
    for f in Feature::ALL {
        if before.feature(f) != Some(true) {
            continue;
        }
        match set(name, f, false) {
            Ok(()) => {}
            Err(e) if is_unsupported(&e) || e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => return Err(e),
        }
    }
    let after = get(name)?;
    Ok(Feature::ALL
        .iter()
        .copied()
        .filter(|f| before.feature(*f) == Some(true) && after.feature(*f) != Some(true))
        .collect())
}

fn is_unsupported(e: &PortError) -> bool {
    e.raw_os_error() == Some(libc::EOPNOTSUPP)
}

/// One `SIOCETHTOOL` round trip with a `struct ethtool_value`; returns `data`.
fn ethtool(name: &str, op: &'static str, command: u32, data: u32) -> Result<u32, PortError> {
    let mut req = IfReq::new(name, op)?;
    let mut val = EthtoolValue { cmd: command, data };
    req.req.ifr_ifru.ifru_data = (&mut val as *mut EthtoolValue).cast::<libc::c_char>();
    req.ioctl(SIOCETHTOOL)?;
    Ok(val.data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_off_predicate() {
        let mut o = Offloads::default();
        assert!(o.all_off());
        o.gro = Some(false);
        assert!(o.all_off());
        o.tso = Some(true);
        assert!(!o.all_off());
        assert_eq!(o.enabled(), vec![Feature::Tso]);
        assert!(o.to_string().contains("tcp-segmentation-offload: on"));
    }

    #[test]
    fn loopback_is_readable() {
        // Reading needs no privilege; loopback supports at least the checksum queries.
        let o = get("lo").unwrap();
        assert!(o.tx_csum.is_some() || o.rx_csum.is_some() || o.sg.is_some());
    }
}
