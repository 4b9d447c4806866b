//! The network of a netns run: one namespace per node (`qtb-<pid>-<n>-run-<node>`), one veth
//! pair per link with every offload off, named after the [graph](crate::scenario::graph)'s
//! ports (a host's single interface is `eth0` and carries the host's MAC).
//!
//! Frames longer than the default MTU allows (1514 octets untagged, e.g. the input-CP paper's
//! 1518-octet frames) need a larger MTU on every link, or the kernel refuses to send or
//! forward them; the MTU is then the longest flow's frame length itself, which leaves room for
//! the header, a VLAN tag and a CN-TAG.

use std::collections::BTreeMap;

use anyhow::bail;
use cnm_proto::wire::EthernetAddress;

use crate::netns::{Lab, Namespace};
use crate::scenario::graph::Graph;
use crate::signals;

/// Creates the namespaces of every node (no IPv6 autoconfiguration chatter), the links
/// between them, the hosts' MACs; every interface up.
pub fn build(
    lab: &Lab,
    graph: &Graph,
    macs: &BTreeMap<String, EthernetAddress>,
    max_frame_len: usize,
) -> anyhow::Result<BTreeMap<String, Namespace>> {
    let mut ns: BTreeMap<String, Namespace> = BTreeMap::new();
    for n in graph.switches.iter().chain(&graph.hosts) {
        let space = lab.ns(n)?;
        // No router solicitations or DAD on the experiment's links: only the scenario's
        // traffic crosses the switches.
        let _ = space.exec(&[
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ]);
        ns.insert(n.clone(), space);
        if signals::requested() {
            bail!("interrupted");
        }
    }
    for l in &graph.links {
        let v = lab.veth((&ns[&l.a.node], l.a.iface()), (&ns[&l.b.node], l.b.iface()))?;
        v.offloads_off()?;
        if max_frame_len > 1500 {
            v.mtu(u32::try_from(max_frame_len).unwrap_or(u32::MAX))?;
        }
    }
    for h in &graph.hosts {
        if let Some(m) = macs.get(h) {
            if graph.uplink(h).is_some() {
                ns[h].set_mac(crate::scenario::graph::HOST_IFACE, &m.to_string())?;
            }
        }
    }
    for l in &graph.links {
        ns[&l.a.node].set_up(l.a.iface())?;
        ns[&l.b.node].set_up(l.b.iface())?;
    }
    Ok(ns)
}
