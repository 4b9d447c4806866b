//! `--capture`: which links of a run are written to pcap files.
//!
//! | option | files | where (netns) |
//! |---|---|---|
//! | `--capture` | `bottleneck.pcap` (the bottleneck link) and `cnms.pcap` (what the switch sends towards the first flow's source: its CNMs and floods) | the bottleneck's end a; the first flow's switch port |
//! | `--capture cnms` | `cnms.pcap` alone: a few hundred kilobytes where the bottleneck of a 60 s run at 1 Gb/s writes about 1 GB | the first flow's switch port |
//! | `--capture all` | `link-<LINK>.pcap` for every link | one interface per link, see below |
//! | `--capture s1-h1,s1-s2` | `link-<LINK>.pcap` for the links named | the same |
//!
//! Link names are the scenario's ([`crate::scenario::graph`]: `A-B` unless the link is named).
//! An unknown name is refused before anything runs, with the list of the scenario's links
//! ([`Capture::check`]).
//!
//! **One interface per link.** A veth end sees both directions of its link, so one capture per
//! link is enough. It is taken on the **switch's port**: end a when it is a switch, else end b
//! (a link between two hosts is captured on end a's `eth0`). The switch side is the one whose
//! interface only the switch daemon uses; a host's `eth0` may be a TAP agent's uplink.
//! Captures keep the first 256 octets of each frame (`tshark -s 256`: every header, no
//! payload).
//!
//! **Simulator.** The simulator writes the same files from its links (both directions into one
//! file, frames cut to 128 octets, the first 200 000 frames of each link, so that a 10 Gb/s run
//! does not write gigabytes), stamped with virtual time from the epoch.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::scenario::graph::{End, Graph, LinkInfo};

/// What `--capture` asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Capture {
    /// No capture.
    #[default]
    Off,
    /// `--capture` alone: `bottleneck.pcap` and `cnms.pcap`.
    Bottleneck,
    /// `--capture cnms`: `cnms.pcap` alone.
    Cnms,
    /// `--capture all`: one `link-<LINK>.pcap` per link.
    All,
    /// `--capture L1,L2`: one `link-<LINK>.pcap` per link named.
    Links(Vec<String>),
}

/// The value `--capture` takes when given without one.
pub const BOTTLENECK: &str = "bottleneck";

impl FromStr for Capture {
    type Err = String;

    /// `bottleneck` (what `--capture` alone means), `cnms`, `all`, or a comma-separated list of
    /// link names (checked against the scenario later, [`Capture::check`]).
    fn from_str(s: &str) -> Result<Capture, String> {
        match s.trim() {
            BOTTLENECK => Ok(Capture::Bottleneck),
            "cnms" => Ok(Capture::Cnms),
            "all" => Ok(Capture::All),
            "" => Err("expected all, bottleneck, cnms or a list of links (s1-h1,s1-s2)".into()),
            list => {
                let mut names: Vec<String> = Vec::new();
                for n in list.split(',').map(str::trim) {
                    if n.is_empty() {
                        return Err(format!("empty link name in {list:?}"));
                    }
                    if !names.iter().any(|m| m == n) {
                        names.push(n.to_string());
                    }
                }
                Ok(Capture::Links(names))
            }
        }
    }
}

impl Capture {
    /// Whether anything is captured.
    pub fn is_on(&self) -> bool {
        *self != Capture::Off
    }

    /// Whether `bottleneck.pcap` is written (`--capture` alone).
    pub fn bottleneck(&self) -> bool {
        *self == Capture::Bottleneck
    }

    /// Whether `cnms.pcap` is written (`--capture` alone, `--capture cnms`).
    pub fn cnms(&self) -> bool {
        matches!(self, Capture::Bottleneck | Capture::Cnms)
    }

    /// Refuses link names the scenario does not have, listing the ones it has.
    pub fn check(&self, graph: &Graph) -> anyhow::Result<()> {
        if let Capture::Links(names) = self {
            let unknown: Vec<&str> = names
                .iter()
                .filter(|n| graph.link_index(n).is_none())
                .map(String::as_str)
                .collect();
            if !unknown.is_empty() {
                let valid: Vec<&str> = graph.links.iter().map(|l| l.name.as_str()).collect();
                anyhow::bail!(
                    "--capture: no link {} in this scenario (its links: {}; or all, cnms, or \
                     --capture alone for the bottleneck)",
                    unknown
                        .iter()
                        .map(|n| format!("{n:?}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    valid.join(", ")
                );
            }
        }
        Ok(())
    }

    /// The links captured one file each (`All`, `Links`), as indices into `graph.links` in
    /// the graph's order; empty for `Off`, `Bottleneck` and `Cnms`. Unknown names are skipped
    /// ([`Capture::check`] refuses them first).
    pub fn links(&self, graph: &Graph) -> Vec<usize> {
        match self {
            Capture::Off | Capture::Bottleneck | Capture::Cnms => Vec::new(),
            Capture::All => (0..graph.links.len()).collect(),
            Capture::Links(names) => {
                let mut v: Vec<usize> = names.iter().filter_map(|n| graph.link_index(n)).collect();
                v.sort_unstable();
                v.dedup();
                v
            }
        }
    }
}

/// The file of link `name` in `dir`: `link-<name>.pcap`, characters other than letters,
/// digits, `-`, `_` and `.` replaced by `_`.
pub fn link_file(dir: &Path, name: &str) -> PathBuf {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    dir.join(format!("link-{safe}.pcap"))
}

/// The end a link is captured on in netns: the switch's port (end a when both are switches),
/// end a of a host-to-host link.
pub fn capture_end(l: &LinkInfo) -> &End {
    if l.a.switch || !l.b.switch {
        &l.a
    } else {
        &l.b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph() -> Graph {
        let sc = crate::scenario::load("chain3", &[]).unwrap();
        sc.topo.graph()
    }

    #[test]
    fn values_parse() {
        assert_eq!("bottleneck".parse::<Capture>(), Ok(Capture::Bottleneck));
        assert_eq!("cnms".parse::<Capture>(), Ok(Capture::Cnms));
        assert_eq!("all".parse::<Capture>(), Ok(Capture::All));
        let files = |c: Capture| (c.bottleneck(), c.cnms(), c.is_on());
        assert_eq!(files(Capture::Bottleneck), (true, true, true));
        assert_eq!(files(Capture::Cnms), (false, true, true));
        assert_eq!(files(Capture::All), (false, false, true));
        assert_eq!(files(Capture::Off), (false, false, false));
        assert_eq!(
            "s1-h1, s1-s2,s1-h1".parse::<Capture>(),
            Ok(Capture::Links(vec!["s1-h1".into(), "s1-s2".into()]))
        );
        assert!("".parse::<Capture>().is_err());
        assert!("a,,b".parse::<Capture>().is_err());
    }

    #[test]
    fn unknown_links_are_refused_with_the_valid_names() {
        let g = graph();
        let names: Vec<String> = g.links.iter().map(|l| l.name.clone()).collect();
        assert!(names.len() >= 3, "{names:?}");
        let ok = Capture::Links(vec![names[1].clone(), names[0].clone()]);
        ok.check(&g).unwrap();
        assert_eq!(ok.links(&g), vec![0, 1]);
        assert_eq!(Capture::All.links(&g), (0..names.len()).collect::<Vec<_>>());
        assert!(Capture::Bottleneck.links(&g).is_empty());
        assert!(Capture::Cnms.links(&g).is_empty());
        let bad = Capture::Links(vec![names[0].clone(), "nope-x".into()]);
        let e = bad.check(&g).unwrap_err().to_string();
        assert!(e.contains("\"nope-x\""), "{e}");
        for n in &names {
            assert!(e.contains(n.as_str()), "{e} lacks {n}");
        }
        Capture::All.check(&g).unwrap();
    }

    #[test]
    fn files_and_ends() {
        assert_eq!(
            link_file(Path::new("d"), "sw0-r0"),
            Path::new("d/link-sw0-r0.pcap")
        );
        assert_eq!(
            link_file(Path::new("d"), "a/b c"),
            Path::new("d/link-a_b_c.pcap")
        );
        let g = graph();
        for l in &g.links {
            let e = capture_end(l);
            assert!(e.switch || (!l.a.switch && !l.b.switch), "{l:?}");
        }
    }
}
