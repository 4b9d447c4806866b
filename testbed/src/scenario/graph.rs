//! The graph of a scenario: port names, shortest paths, static FDB entries, link directions.
//!
//! Both worlds build their network from this one graph, so a switch port has the same name in
//! the simulator and on the namespaces, and the static FDB entries point the same way:
//!
//! * **Port names.** A port is named after its peer (`h0`, `sw1`); parallel links between the
//!   same two nodes get `.2`, `.3`, ... appended in file order (`sw1`, `sw1.2`). On the
//!   namespaces a host's single interface is `eth0` instead ([`End::iface`]); a switch's
//!   interfaces carry the port names.
//! * **Paths.** A path is the breadth-first shortest path from a node to another through
//!   switches only (a host forwards nothing), neighbours visited in file order of their links,
//!   so ties go to the link declared first.
//! * **Static FDB.** A switch's entry for a host is the port of the first hop of that path
//!   (receivers never send, so the switches could not learn them).

use std::collections::{BTreeMap, VecDeque};

/// One end of a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct End {
    /// Node name.
    pub node: String,
    /// Port name on that node: after the peer, `.K` for the K-th parallel link.
    pub port: String,
    /// Whether the node is a switch.
    pub switch: bool,
}

impl End {
    /// The interface name on the namespaces: the port name on a switch, `eth0` on a host.
    pub fn iface(&self) -> &str {
        if self.switch {
            &self.port
        } else {
            HOST_IFACE
        }
    }
}

/// A host's interface on the namespaces.
pub const HOST_IFACE: &str = "eth0";

/// A link of the scenario.
#[derive(Debug, Clone)]
pub struct LinkInfo {
    /// Link name (`A-B` by default).
    pub name: String,
    /// End a.
    pub a: End,
    /// End b.
    pub b: End,
}

/// A link as the graph is given it: end a, end b, optional name.
#[derive(Debug, Clone, Copy)]
pub struct LinkDecl<'a> {
    /// Node of end a.
    pub a: &'a str,
    /// Node of end b.
    pub b: &'a str,
    /// Name, `A-B` when `None`.
    pub name: Option<&'a str>,
}

/// The graph.
#[derive(Debug, Clone)]
pub struct Graph {
    /// Switch names (sorted).
    pub switches: Vec<String>,
    /// Host names (sorted).
    pub hosts: Vec<String>,
    /// Links in file order.
    pub links: Vec<LinkInfo>,
    /// Adjacency: node → (link index, peer), in file order.
    adj: BTreeMap<String, Vec<(usize, String)>>,
}

/// A hop of a path: link index and whether it is crossed a → b.
pub type Hop = (usize, bool);

impl Graph {
    /// Builds the graph of switches, hosts and links (whose ends are known nodes; the
    /// topology checks that first).
    pub fn new<'a>(
        switches: impl IntoIterator<Item = &'a String>,
        hosts: impl IntoIterator<Item = &'a String>,
        decls: &[LinkDecl<'_>],
    ) -> Graph {
        let mut switches: Vec<String> = switches.into_iter().cloned().collect();
        let mut hosts: Vec<String> = hosts.into_iter().cloned().collect();
        switches.sort();
        hosts.sort();
        let mut used: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut links = Vec::new();
        let mut adj: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
        for (i, l) in decls.iter().enumerate() {
            let a_port = port_name(&mut used, l.a, l.b);
            let b_port = port_name(&mut used, l.b, l.a);
            let is_sw = |n: &str| switches.iter().any(|s| s == n);
            links.push(LinkInfo {
                name: l
                    .name
                    .map_or_else(|| format!("{}-{}", l.a, l.b), str::to_string),
                a: End {
                    node: l.a.to_string(),
                    port: a_port,
                    switch: is_sw(l.a),
                },
                b: End {
                    node: l.b.to_string(),
                    port: b_port,
                    switch: is_sw(l.b),
                },
            });
            adj.entry(l.a.to_string())
                .or_default()
                .push((i, l.b.to_string()));
            adj.entry(l.b.to_string())
                .or_default()
                .push((i, l.a.to_string()));
        }
        Graph {
            switches,
            hosts,
            links,
            adj,
        }
    }

    /// Whether `n` is a switch.
    pub fn is_switch(&self, n: &str) -> bool {
        self.switches.iter().any(|s| s == n)
    }

    /// Shortest path from `src` to `dst` (through switches only), as hops.
    pub fn path(&self, src: &str, dst: &str) -> Option<Vec<Hop>> {
        let mut prev: BTreeMap<String, (String, usize)> = BTreeMap::new();
        let mut q = VecDeque::from([src.to_string()]);
        let mut seen = vec![src.to_string()];
        while let Some(u) = q.pop_front() {
            if u == dst {
                break;
            }
            if u != src && !self.is_switch(&u) {
                continue;
            }
            for (li, peer) in self.adj.get(&u).into_iter().flatten() {
                if !seen.contains(peer) {
                    seen.push(peer.clone());
                    prev.insert(peer.clone(), (u.clone(), *li));
                    q.push_back(peer.clone());
                }
            }
        }
        let mut hops = Vec::new();
        let mut cur = dst.to_string();
        while cur != src {
            let (p, li) = prev.get(&cur)?.clone();
            hops.push((li, self.links[li].a.node == p));
            cur = p;
        }
        hops.reverse();
        Some(hops)
    }

    /// Name of a hop's direction in the analysis: the link name crossed a → b, `NAME~` b → a.
    pub fn hop_name(&self, hop: Hop) -> String {
        let n = &self.links[hop.0].name;
        if hop.1 {
            n.clone()
        } else {
            format!("{n}~")
        }
    }

    /// The port of `switch` on the first hop towards every host it reaches: (host, port), in
    /// host name order.
    pub fn fdb(&self, switch: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for h in &self.hosts {
            if let Some(p) = self.path(switch, h) {
                if let Some(&hop) = p.first() {
                    out.push((h.clone(), self.tx_end(hop).port.clone()));
                }
            }
        }
        out
    }

    /// The sending end of a hop.
    pub fn tx_end(&self, hop: Hop) -> &End {
        let l = &self.links[hop.0];
        if hop.1 {
            &l.a
        } else {
            &l.b
        }
    }

    /// The ports of `node` in file order of their links.
    pub fn ports(&self, node: &str) -> Vec<&End> {
        self.adj
            .get(node)
            .into_iter()
            .flatten()
            .map(|(li, _)| {
                let l = &self.links[*li];
                if l.a.node == node {
                    &l.a
                } else {
                    &l.b
                }
            })
            .collect()
    }

    /// Index of the link called `name`.
    pub fn link_index(&self, name: &str) -> Option<usize> {
        self.links.iter().position(|l| l.name == name)
    }

    /// The host's uplink: the index of its first link.
    pub fn uplink(&self, host: &str) -> Option<usize> {
        self.adj.get(host).and_then(|v| v.first()).map(|x| x.0)
    }

    /// How many links end at `node`.
    pub fn degree(&self, node: &str) -> usize {
        self.adj.get(node).map_or(0, Vec::len)
    }
}

/// The next free port name of `node` towards `peer`: the peer's name, then `PEER.2`, ...
fn port_name(used: &mut BTreeMap<String, Vec<String>>, node: &str, peer: &str) -> String {
    let names = used.entry(node.to_string()).or_default();
    let mut nm = peer.to_string();
    let mut k = 1;
    while names.contains(&nm) {
        k += 1;
        nm = format!("{peer}.{k}");
    }
    names.push(nm.clone());
    nm
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn decl<'a>(a: &'a str, b: &'a str) -> LinkDecl<'a> {
        LinkDecl { a, b, name: None }
    }

    /// h0 - sw0 = sw1 - r0 with two parallel links sw0-sw1, and a longer way round through sw2.
    fn ring() -> Graph {
        let sw = names(&["sw0", "sw1", "sw2"]);
        let hosts = names(&["h0", "r0"]);
        Graph::new(
            &sw,
            &hosts,
            &[
                decl("h0", "sw0"),
                decl("sw0", "sw1"),
                decl("sw0", "sw1"),
                decl("sw1", "r0"),
                decl("sw0", "sw2"),
                decl("sw2", "sw1"),
            ],
        )
    }

    #[test]
    fn ports_are_named_after_peers_and_parallel_links_counted() {
        let g = ring();
        let ports: Vec<&str> = g.ports("sw0").iter().map(|e| e.port.as_str()).collect();
        assert_eq!(ports, ["h0", "sw1", "sw1.2", "sw2"]);
        let ports: Vec<&str> = g.ports("sw1").iter().map(|e| e.port.as_str()).collect();
        assert_eq!(ports, ["sw0", "sw0.2", "r0", "sw2"]);
        // A host's port follows the same rule; on the namespaces it is eth0.
        let h = g.ports("h0")[0];
        assert_eq!((h.port.as_str(), h.iface()), ("sw0", "eth0"));
        assert_eq!(g.ports("sw1")[0].iface(), "sw0");
        assert_eq!(g.links[2].name, "sw0-sw1");
        assert_eq!(g.link_index("sw2-sw1"), Some(5));
        assert_eq!((g.degree("sw0"), g.degree("r0"), g.degree("x")), (4, 1, 0));
    }

    #[test]
    fn shortest_paths_take_the_first_declared_link_and_skip_hosts() {
        let g = ring();
        let p = g.path("h0", "r0").unwrap();
        assert_eq!(p, [(0, true), (1, true), (3, true)]);
        let names: Vec<String> = p.iter().map(|h| g.hop_name(*h)).collect();
        assert_eq!(names, ["h0-sw0", "sw0-sw1", "sw1-r0"]);
        let back: Vec<String> = g
            .path("r0", "h0")
            .unwrap()
            .iter()
            .map(|h| g.hop_name(*h))
            .collect();
        assert_eq!(back, ["sw1-r0~", "sw0-sw1~", "h0-sw0~"]);
        assert_eq!(g.tx_end((3, false)).node, "r0");
        // No way through a host: r0 hangs off sw1 only, so sw2 reaches h0 via sw0.
        assert_eq!(g.path("sw2", "h0").unwrap(), [(4, false), (0, false)]);
        assert!(g.path("h0", "nowhere").is_none());
    }

    #[test]
    fn static_fdb_points_at_the_first_hop() {
        let g = ring();
        assert_eq!(
            g.fdb("sw1"),
            [
                ("h0".to_string(), "sw0".to_string()),
                ("r0".to_string(), "r0".to_string())
            ]
        );
        assert_eq!(
            g.fdb("sw2"),
            [
                ("h0".to_string(), "sw0".to_string()),
                ("r0".to_string(), "sw1".to_string())
            ]
        );
        assert_eq!(g.uplink("r0"), Some(3));
    }

    #[test]
    fn a_builtin_scenario_has_the_expected_paths() {
        let sc = crate::scenario::load("chain3", &[]).unwrap();
        let s = sc.topo.graph();
        let p = s.path("h0", "r0").unwrap();
        let names: Vec<String> = p.iter().map(|h| s.hop_name(*h)).collect();
        assert_eq!(names, ["h0-sw0", "sw0-sw1", "sw1-sw2", "sw2-r0"]);
        let fdb = s.fdb("sw1");
        assert!(fdb.contains(&("r0".to_string(), "sw2".to_string())));
        assert!(fdb.contains(&("h0".to_string(), "sw0".to_string())));
        assert_eq!(s.tx_end(p[3]).port, "r0");
    }
}
