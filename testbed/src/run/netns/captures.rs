//! Captures of a netns run (`--capture`, [`crate::run::capture`]), taken on the switch side
//! with `tshark`. `--capture` alone: the bottleneck port into `bottleneck.pcap`, and what the
//! switch sends towards the first flow's source into `cnms.pcap` (its CNMs and floods: a filter
//! on the source address, not on the EtherType, so that a VLAN tag in the packet metadata
//! cannot hide a CNM); `--capture cnms`: `cnms.pcap` alone. `--capture all` or a list of links: `link-<LINK>.pcap` per link, on the
//! link's switch port ([`crate::run::capture::capture_end`]), unfiltered.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use super::setup::{Setup, RUN_ENV};
use crate::netns::Child;
use crate::run::capture::{self, Capture};
use crate::scenario::graph::End;
use crate::signals;

/// Starts the captures and waits until each has created its file (then a moment more:
/// dumpcap starts capturing just after).
pub fn start(st: &Setup, what: &Capture) -> anyhow::Result<Vec<Child>> {
    let graph = &st.graph;
    let mut wanted: Vec<(End, PathBuf, Option<String>)> = Vec::new();
    for li in what.links(graph) {
        let l = &graph.links[li];
        wanted.push((
            capture::capture_end(l).clone(),
            capture::link_file(&st.dir, &l.name),
            None,
        ));
    }
    bottleneck_and_cnms(st, what, &mut wanted);
    let mut captures = Vec::new();
    for (i, (end, pcap, filter)) in wanted.iter().enumerate() {
        let mut c = st.ns[&end.node].command("tshark")?;
        c.env(RUN_ENV, &st.prefix)
            .args(["-q", "-F", "pcap", "-i", end.iface(), "-s", "256"]);
        if let Some(f) = filter {
            c.arg("-f").arg(f);
        }
        c.arg("-w")
            .arg(pcap)
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(
                st.logs.join(format!("tshark-{i}.log")),
            )?));
        captures.push(st.ns[&end.node].spawn_command(c)?);
    }
    let deadline = StdInstant::now() + StdDuration::from_secs(10);
    while !wanted.iter().all(|w| w.1.exists())
        && StdInstant::now() < deadline
        && !signals::requested()
    {
        std::thread::sleep(StdDuration::from_millis(50));
    }
    std::thread::sleep(StdDuration::from_millis(300));
    Ok(captures)
}

/// `--capture` alone: the bottleneck's end a into `bottleneck.pcap` and the first flow's switch
/// port into `cnms.pcap` (everything but the flow's own frames); `--capture cnms`: the latter.
fn bottleneck_and_cnms(
    st: &Setup,
    what: &Capture,
    wanted: &mut Vec<(End, PathBuf, Option<String>)>,
) {
    let graph = &st.graph;
    if !what.cnms() {
        return;
    }
    if let (true, Some(li)) = (what.bottleneck(), st.bottleneck_link()) {
        wanted.push((
            graph.links[li].a.clone(),
            st.dir.join("bottleneck.pcap"),
            None,
        ));
    }
    let Some(f) = st.sc.topo.flow.first() else {
        return;
    };
    if let Some(li) = graph.uplink(&f.src) {
        let l = &graph.links[li];
        let end = if l.a.node == f.src { &l.b } else { &l.a };
        if let (true, Some(m)) = (end.switch, st.macs.get(&f.src)) {
            wanted.push((
                end.clone(),
                st.dir.join("cnms.pcap"),
                Some(format!("not ether src {m}")),
            ));
        }
    }
}
