//! What every part of a netns run reads ([`Setup`]): the scenario, its graph and scaling,
//! the namespaces, where files and sockets go; the daemons' binaries ([`Bins`]); the names of
//! the generators' control sockets. It imports no other part of the lab.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant as StdInstant;

use anyhow::bail;
use cnm_proto::wire::EthernetAddress;

use super::super::world::Scaling;
use crate::netns::Namespace;
use crate::scenario::graph::Graph;
use crate::scenario::Scenario;
use crate::sim::topo::FlowKind;

/// Environment variable set on every process a run starts, to the run's lab prefix (tests
/// and `ps e` find a run's processes by it).
pub const RUN_ENV: &str = "TESTBED_RUN";

/// What every part of the lab reads: the scenario, its graph and scaling, where things go.
#[derive(Debug)]
pub struct Setup {
    /// The scenario.
    pub sc: Scenario,
    /// Its graph.
    pub graph: Graph,
    /// Its netns scaling.
    pub k: Scaling,
    /// The run's seed.
    pub seed: u64,
    /// The results directory.
    pub dir: PathBuf,
    /// `dir/logs`.
    pub logs: PathBuf,
    /// The daemons.
    pub bins: Bins,
    /// This program (incast endpoints), empty without incasts.
    pub testbed_exe: PathBuf,
    /// The lab's prefix ([`RUN_ENV`]).
    pub prefix: String,
    /// The control sockets' directory.
    pub sock_dir: PathBuf,
    /// Namespaces by node.
    pub ns: BTreeMap<String, Namespace>,
    /// The hosts' MACs.
    pub macs: BTreeMap<String, EthernetAddress>,
    /// Each flow's kind.
    pub kinds: Vec<FlowKind>,
    /// The run's length (seconds of the schedule).
    pub span: f64,
    /// The sinks' and generators' report interval (`--interval`).
    pub interval_arg: String,
    /// iperf3's report interval (`-i`, at least 0.1 s).
    pub iperf_interval: String,
    /// The schedule's start.
    pub t0: StdInstant,
    /// `--sched` of every switch daemon (`None`: its default).
    pub switch_sched: Option<daemon_kit::sched::SchedPolicy>,
    /// `--sched` of the `rp-agent hosts` process (`None`: time-shared).
    pub hosts_sched: Option<daemon_kit::sched::SchedPolicy>,
    /// The CPUs the daemons' loops are pinned to (`None`: not pinned).
    pub pinning: Option<Pinning>,
}

/// Where the daemons' loops run: each switch's dataplane thread on a CPU of its own, the
/// `rp-agent hosts` loop on another (their `--cpu`), and nothing else of the run on the hosts
/// loop's CPU: the runner's thread keeps to the others, and so does every process it starts
/// (they inherit its affinity; the hosts process's own helper threads too).
///
/// Left to the scheduler, the switch and the hosts process share a CPU now and then: on the
/// dumbbell at S = 10 the hosts loop then waited up to 2.4 ms behind the switch's (perf
/// sched), and the frames its generators owed meanwhile reached the switch later than its
/// link's delay allows. With the loops pinned, what still preempted the hosts loop was the
/// switch's control thread answering the runner's `stats` (0.4 ms), the runner itself
/// (0.3 ms) and a kernel thread (`kdamond`, 0.6-0.9 ms every 512 ms), hence the others kept
/// off its CPU. Only when the runner may use a CPU for each switch and one for the hosts: on
/// fewer, pinning would stack switches on one CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinning {
    /// The CPU of each switch, in the order of the graph's switches.
    pub switches: Vec<usize>,
    /// The CPU of the hosts process's loop.
    pub hosts: usize,
    /// The CPUs everything else of the run may use (the runner's, without `hosts`).
    pub others: Vec<usize>,
}

impl Pinning {
    /// The hosts loop's scheduling when it has a CPU of its own and `--hosts-sched` says
    /// nothing: `SCHED_FIFO` 50. Time-shared, even alone on its CPU, it was still preempted by
    /// kernel threads (`kdamond`, 0.6-0.9 ms every 512 ms on this machine), and each such stall
    /// sent a burst of frames later than their link's delay allows, which the congestion point
    /// answered with the deepest CNMs. Measured on the dumbbell at S = 10 (`--twin`): stamped
    /// frames too late 0.37-0.44 % time-shared (3 runs), 0.07 % real-time (2 runs); the CNMs'
    /// mean QntzFb 3.7-3.9 against 1.17-1.19 (the simulator: 1.13); the queue mean 24-27 kB
    /// against 29.2-29.6 kB (the simulator: 29.7 kB). The loop sleeps whenever nothing is due,
    /// the kernel's real-time throttling keeps 5 % of the CPU for others, and the switches stay
    /// time-shared: both real-time once starved the kernel's own work and lost frames.
    pub const HOSTS_SCHED: daemon_kit::sched::SchedPolicy =
        daemon_kit::sched::SchedPolicy::Fifo(50);

    /// The pinning of `switches` switches and the hosts process on the CPUs `cpus` (the
    /// runner's affinity, increasing): the first ones to the switches, the last to the hosts;
    /// `None` when there are too few.
    pub fn plan(switches: usize, cpus: &[usize]) -> Option<Pinning> {
        let (&hosts, rest) = cpus.split_last()?;
        (switches >= 1 && rest.len() >= switches).then(|| Pinning {
            switches: rest[..switches].to_vec(),
            hosts,
            others: rest.to_vec(),
        })
    }
}

impl Setup {
    /// Flow `i`'s name (`name`, or `fN`).
    pub fn flow_name(&self, i: usize) -> String {
        self.sc.topo.flow[i]
            .name
            .clone()
            .unwrap_or_else(|| format!("f{i}"))
    }

    /// Seconds since the schedule started.
    pub fn elapsed(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// The bottleneck link's index.
    pub fn bottleneck_link(&self) -> Option<usize> {
        self.sc.bottleneck().and_then(|b| self.graph.link_index(&b))
    }

    /// The control socket of flow `f`'s reaction points: its generator's, or for a tcp/udp
    /// flow its source's TAP agent.
    pub fn flow_ctl(&self, f: usize) -> PathBuf {
        if self.kinds.get(f).is_some_and(FlowKind::is_ip) {
            self.sock_dir
                .join(format!("agent-{}.ctl", self.sc.topo.flow[f].src))
        } else {
            gen_ctl(&self.sock_dir, &self.sc, f)
        }
    }
}

/// The daemons' binaries.
#[derive(Debug, Clone)]
pub struct Bins {
    /// `cp-switch`.
    pub cp_switch: PathBuf,
    /// `rp-agent`.
    pub rp_agent: PathBuf,
}

impl Bins {
    /// Looks in `dir`, else `$TESTBED_BIN_DIR`, else next to this program (for a test binary in
    /// `target/*/deps`, the directory above).
    pub fn find(dir: Option<&Path>) -> anyhow::Result<Bins> {
        let dir = match dir {
            Some(d) => d.to_path_buf(),
            None => match std::env::var_os("TESTBED_BIN_DIR") {
                Some(d) => PathBuf::from(d),
                None => crate::bins::dir(),
            },
        };
        // The daemons are started from other working directories (the results directory), so
        // a relative directory is made absolute here, where it was meant.
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        let b = Bins {
            cp_switch: dir.join("cp-switch"),
            rp_agent: dir.join("rp-agent"),
        };
        for p in [&b.cp_switch, &b.rp_agent] {
            if !p.exists() {
                bail!(
                    "{} is not built (cargo build --workspace, or --bin-dir DIR)",
                    p.display()
                );
            }
        }
        Ok(b)
    }
}

/// The flow name used for files and sockets (`name`, or `fN`).
fn flow_name(sc: &Scenario, i: usize) -> String {
    sc.topo.flow[i]
        .name
        .clone()
        .unwrap_or_else(|| format!("f{i}"))
}

/// The control socket of flow `i`'s generator in `dir`.
pub fn gen_ctl(dir: &Path, sc: &Scenario, i: usize) -> PathBuf {
    dir.join(format!("gen-{}.sock", flow_name(sc, i)))
}

/// A note for each host that sends more than one generated flow, for runs with
/// `[scenario.netns] hosts = "per-process"`: there each generated flow has its own
/// `rp-agent gen` process, agent and line, where the simulator's host is one agent whose flows
/// share one line. Together such flows may offer more than the host's link carries: the link's
/// ingress stage at the switch then holds them to its rate and, once full, drops (the fidelity
/// check counts those drops). The fan-in victim's h1 (a greedy flow and a 7 Gb/s one on a
/// 10 Gb/s link) is one. In the hosts process (the default) the generators of one host share
/// one agent and line, as in the simulator (`rp-agent hosts`: a `start gen` on a port that
/// already sends joins it), and no note is needed.
pub fn shared_line_notes(sc: &Scenario, kinds: &[FlowKind]) -> Vec<String> {
    let mut by_host: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (i, f) in sc.topo.flow.iter().enumerate() {
        if kinds.get(i).is_some_and(|k| !k.is_ip()) {
            by_host.entry(&f.src).or_default().push(flow_name(sc, i));
        }
    }
    by_host
        .into_iter()
        .filter(|(_, flows)| flows.len() > 1)
        .map(|(host, flows)| {
            format!(
                "note: host {host} sends {} generated flows ({}): with hosts = \"per-process\" \
                 each has its own generator, agent and line where the simulator's host shares \
                 one, so together they may offer more than {host}'s link carries (its ingress \
                 stage then holds them back and, when full, drops)",
                flows.len(),
                flows.join(", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_with_several_generated_flows_are_named() {
        let sc = crate::scenario::load("fan-in-victim", &[]).unwrap();
        let kinds: Vec<FlowKind> = sc.topo.flow.iter().map(|f| f.kind).collect();
        let notes = shared_line_notes(&sc, &kinds);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("host h1 sends 2 generated flows (f1, f6)"),
            "{notes:?}"
        );
        let sc = crate::scenario::load("dumbbell", &[]).unwrap();
        let kinds: Vec<FlowKind> = sc.topo.flow.iter().map(|f| f.kind).collect();
        assert!(shared_line_notes(&sc, &kinds).is_empty());
    }

    /// A relative `--bin-dir` names the daemons by absolute paths: they are started from the
    /// results directory, where the relative path would name nothing.
    #[test]
    fn a_relative_bin_dir_becomes_absolute() {
        let dir = tempfile::tempdir_in(".").unwrap();
        for name in ["cp-switch", "rp-agent"] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let rel = PathBuf::from(dir.path().file_name().unwrap());
        assert!(rel.is_relative());
        let b = Bins::find(Some(&rel)).unwrap();
        assert!(
            b.cp_switch.is_absolute() && b.rp_agent.is_absolute(),
            "{b:?}"
        );
        assert!(b.cp_switch.exists() && b.rp_agent.exists());
        let e = Bins::find(Some(Path::new("no-such-bin-dir"))).unwrap_err();
        assert!(e.to_string().contains("is not built"), "{e}");
    }
}

#[cfg(test)]
mod pinning_tests {
    use super::Pinning;

    #[test]
    fn a_cpu_per_switch_and_the_last_for_the_hosts_or_nothing() {
        assert_eq!(
            Pinning::plan(1, &[0, 1]),
            Some(Pinning {
                switches: vec![0],
                hosts: 1,
                others: vec![0]
            })
        );
        assert_eq!(
            Pinning::plan(2, &[2, 5, 7]),
            Some(Pinning {
                switches: vec![2, 5],
                hosts: 7,
                others: vec![2, 5]
            })
        );
        assert_eq!(Pinning::plan(2, &[0, 1]), None, "two switches on one CPU");
        assert_eq!(Pinning::plan(1, &[0]), None);
        assert_eq!(Pinning::plan(1, &[]), None);
        assert_eq!(Pinning::plan(0, &[0, 1]), None);
    }
}
