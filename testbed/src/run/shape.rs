//! The graph of a scenario: port names, shortest paths, static FDB entries, link directions.
//!
//! Port names follow the simulator's rule ([`crate::sim::topo`]): a switch port is named after
//! its peer (`h0`, `sw1`), with `.2`, `.3` appended for parallel links; a host's single port is
//! `eth0` in netns mode.

use std::collections::{BTreeMap, VecDeque};

use crate::sim::topo::Topology;

/// One end of a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct End {
    /// Node name.
    pub node: String,
    /// Port name on that node (switch: after the peer; host: `eth0`).
    pub port: String,
}

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

/// The graph.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Switch names (sorted).
    pub switches: Vec<String>,
    /// Host names (sorted).
    pub hosts: Vec<String>,
    /// Links in file order.
    pub links: Vec<LinkInfo>,
    /// Adjacency: node → (link index, peer).
    adj: BTreeMap<String, Vec<(usize, String)>>,
}

/// A hop of a path: link index and whether it is crossed a → b.
pub type Hop = (usize, bool);

impl Shape {
    /// Builds the graph of a (validated) topology.
    pub fn of(topo: &Topology) -> Shape {
        let switches: Vec<String> = topo.switch.keys().cloned().collect();
        let hosts: Vec<String> = topo.host.keys().cloned().collect();
        let mut used: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut port = |node: &str, peer: &str, is_switch: bool| {
            if !is_switch {
                return "eth0".to_string();
            }
            let names = used.entry(node.to_string()).or_default();
            let mut nm = peer.to_string();
            let mut k = 1;
            while names.contains(&nm) {
                k += 1;
                nm = format!("{peer}.{k}");
            }
            names.push(nm.clone());
            nm
        };
        let mut links = Vec::new();
        let mut adj: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
        for (i, l) in topo.link.iter().enumerate() {
            let ap = port(&l.a, &l.b, topo.switch.contains_key(&l.a));
            let bp = port(&l.b, &l.a, topo.switch.contains_key(&l.b));
            links.push(LinkInfo {
                name: l.name.clone().unwrap_or_else(|| format!("{}-{}", l.a, l.b)),
                a: End {
                    node: l.a.clone(),
                    port: ap,
                },
                b: End {
                    node: l.b.clone(),
                    port: bp,
                },
            });
            adj.entry(l.a.clone()).or_default().push((i, l.b.clone()));
            adj.entry(l.b.clone()).or_default().push((i, l.a.clone()));
        }
        Shape {
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

    /// The port of `switch` on the first hop towards every host it reaches: (host, port).
    pub fn fdb(&self, switch: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for h in &self.hosts {
            if let Some(p) = self.path(switch, h) {
                if let Some(&(li, fwd)) = p.first() {
                    let l = &self.links[li];
                    out.push((
                        h.clone(),
                        if fwd {
                            l.a.port.clone()
                        } else {
                            l.b.port.clone()
                        },
                    ));
                }
            }
        }
        out
    }

    /// The sending end of a hop: (node, port).
    pub fn tx_end(&self, hop: Hop) -> &End {
        let l = &self.links[hop.0];
        if hop.1 {
            &l.a
        } else {
            &l.b
        }
    }

    /// Index of the link called `name`.
    pub fn link_index(&self, name: &str) -> Option<usize> {
        self.links.iter().position(|l| l.name == name)
    }

    /// The host's uplink index.
    pub fn uplink(&self, host: &str) -> Option<usize> {
        self.adj.get(host).and_then(|v| v.first()).map(|x| x.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumbbell_paths_and_fdb() {
        let sc = crate::scenario::load("chain3", &[]).unwrap();
        let s = Shape::of(&sc.topo);
        let p = s.path("h0", "r0").unwrap();
        let names: Vec<String> = p.iter().map(|h| s.hop_name(*h)).collect();
        assert_eq!(names, ["h0-sw0", "sw0-sw1", "sw1-sw2", "sw2-r0"]);
        let fdb = s.fdb("sw1");
        assert!(fdb.contains(&("r0".to_string(), "sw2".to_string())));
        assert!(fdb.contains(&("h0".to_string(), "sw0".to_string())));
        assert_eq!(s.tx_end(p[3]).port, "r0");
    }
}
