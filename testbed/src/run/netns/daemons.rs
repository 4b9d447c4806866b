//! The daemons of a netns run: one `cp-switch` per switch, one sink per receiving host, one
//! TAP-mode `rp-agent` per host whose kernel takes part; their binaries, control sockets and
//! readiness checks.
//!
//! The sinks (and the generators, [`super::endpoints`]) run in one `rp-agent hosts` process
//! ([`HostProc`]) by default: it opens each host's packet socket inside that host's namespace
//! and serves them all from one event loop, so six processes no longer compete for two cores
//! and a descheduled generator no longer drains in a burst. `[scenario.netns] hosts =
//! "per-process"` brings back one `rp-agent sink` and one `rp-agent gen` process each.
//!
//! * A switch is ready when its control socket answers `stats`.
//! * The hosts process is ready when its control socket answers `status`; a sink in it is
//!   ready when its `start sink` is answered (its port is open by then).
//! * A sink process is ready when its namespace has a packet socket open (`/proc/net/packet`).
//! * A TAP agent is ready when its control socket answers; then the TAP gets the host's MAC
//!   (the agent takes only frames addressed to it, and the switches' static FDB entries point
//!   at it), the MTU the host's flows ask for, and static neighbour entries for the other such
//!   hosts (so no ARP crosses the switches).
//!
//! Each daemon is a [`Child`] guard: stopped on drop, whatever ends the run.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use anyhow::{bail, Context};
use cnm_proto::Duration;
use serde_json::Value;

use super::config::{agent_config_at, switch_config, uplink_rate};
use super::setup::{Setup, RUN_ENV};
use crate::netns::Child;
use crate::signals;

/// Removes the run's socket directory on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Asks a daemon's control socket; returns `data`.
pub fn ctl(path: &Path, words: &str) -> anyhow::Result<Value> {
    let mut s = std::os::unix::net::UnixStream::connect(path)
        .with_context(|| format!("control socket {}", path.display()))?;
    s.set_read_timeout(Some(StdDuration::from_secs(5)))?;
    writeln!(s, "{words}")?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line)?;
    let v: Value = serde_json::from_str(&line).with_context(|| format!("answer {line:?}"))?;
    if v["ok"] == Value::Bool(true) {
        Ok(v["data"].clone())
    } else {
        bail!("{words}: {}", v["error"].as_str().unwrap_or("error"))
    }
}

/// The last `n` lines of a log.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Why a readiness wait ended without success.
#[derive(Debug)]
pub enum NotReady {
    /// The process exited.
    Exited,
    /// 10 s passed.
    Silent,
}

/// Polls `ready` every 20 ms for up to 10 s while `child` runs. Ctrl-C is an error.
pub fn wait_ready(
    child: &mut Child,
    mut ready: impl FnMut() -> bool,
) -> anyhow::Result<Result<(), NotReady>> {
    let deadline = StdInstant::now() + StdDuration::from_secs(10);
    loop {
        if signals::requested() {
            bail!("interrupted");
        }
        if ready() {
            return Ok(Ok(()));
        }
        if !child.is_running() {
            return Ok(Err(NotReady::Exited));
        }
        if StdInstant::now() > deadline {
            return Ok(Err(NotReady::Silent));
        }
        std::thread::sleep(StdDuration::from_millis(20));
    }
}

/// A running switch.
#[derive(Debug)]
pub struct SwitchProc {
    /// Switch name.
    pub name: String,
    /// The daemon.
    pub child: Child,
    /// Its control socket.
    pub ctl: PathBuf,
    /// Its log.
    pub log: PathBuf,
}

/// The `rp-agent hosts` process of a run: every generator and sink in one event loop.
#[derive(Debug)]
pub struct HostProc {
    /// The process.
    pub child: Child,
    /// Its control socket.
    pub ctl: PathBuf,
    /// Its log.
    pub log: PathBuf,
}

impl HostProc {
    /// Starts `rp-agent hosts` (in the initial namespace, working in the results directory)
    /// and waits until its control socket answers.
    pub fn start(st: &Setup) -> anyhow::Result<HostProc> {
        let ctl_path = st.sock_dir.join("hosts.ctl");
        let log = st.logs.join("rp-agent-hosts.log");
        let logf = std::fs::File::create(&log)?;
        let mut c = crate::netns::Namespace::root().command(&st.bins.rp_agent)?;
        c.env(RUN_ENV, &st.prefix)
            .current_dir(&st.dir)
            .args(["hosts", "--die-with-parent", "--ctl"])
            .arg(&ctl_path)
            .stdout(Stdio::from(logf.try_clone()?))
            .stderr(Stdio::from(logf));
        if let Some(p) = st.hosts_sched {
            c.arg("--sched").arg(p.to_string());
        }
        if let Some(p) = &st.pinning {
            c.arg("--cpu").arg(p.hosts.to_string());
        }
        let mut child = crate::netns::Namespace::root().spawn_command(c)?;
        match wait_ready(&mut child, || ctl(&ctl_path, "status").is_ok())? {
            Ok(()) => {}
            Err(NotReady::Exited) => {
                bail!("rp-agent hosts exited at start:\n{}", tail(&log, 10))
            }
            Err(NotReady::Silent) => bail!("rp-agent hosts: control socket silent for 10 s"),
        }
        Ok(HostProc {
            child,
            ctl: ctl_path,
            log,
        })
    }

    /// Starts a host (`start gen|sink NETNS OUT ARGS...`, the words as given) and returns when
    /// it started, in seconds of the schedule (`st`'s clock), from the start instant the
    /// process answers with.
    pub fn start_host(&self, st: &Setup, words: &[String]) -> anyhow::Result<f64> {
        if let Some(w) = words
            .iter()
            .find(|w| w.is_empty() || w.contains(char::is_whitespace))
        {
            bail!(
                "{w:?}: the hosts process takes no white space in a path or argument; \
                 set [scenario.netns] hosts = \"per-process\""
            );
        }
        let v = ctl(&self.ctl, &words.join(" "))?;
        let now_s = st.elapsed();
        let now_ns = cnm_proto::phy::clock::now().as_nanos();
        let started_ns = v["started_ns"].as_u64().unwrap_or(now_ns);
        Ok(now_s - now_ns.saturating_sub(started_ns) as f64 / 1e9)
    }

    /// The generators still running or draining (`status`); `None` when it does not answer.
    pub fn running_gens(&self) -> Option<usize> {
        ctl(&self.ctl, "status")
            .ok()
            .and_then(|v| v["gens"].as_array().map(Vec::len))
    }
}

/// A host's namespace as the hosts process names it (`-`: the initial one).
pub fn netns_word(st: &Setup, host: &str) -> String {
    st.ns[host].name().unwrap_or("-").to_string()
}

/// A running sink.
#[derive(Debug)]
pub struct SinkProc {
    /// Receiving host.
    pub host: String,
    /// Its own process (`None`: it runs in the [`HostProc`]).
    pub child: Option<Child>,
    /// Its JSON document (written when it stops).
    pub out: PathBuf,
    /// When it was stopped (seconds of the schedule).
    pub stop_s: f64,
}

/// A host whose kernel takes part (TCP/UDP flows, incast): its TAP agent.
#[derive(Debug)]
pub struct StackHost {
    /// Host name.
    pub name: String,
    /// Its address on 10.77.0.0/16.
    pub ip: String,
    /// The agent's control socket.
    pub ctl: PathBuf,
    /// The agent.
    pub agent: Child,
    /// CNMs counted so far.
    pub cnm_prev: u64,
}

/// The address of the `i`-th host on the TAP network 10.77.0.0/16.
fn stack_ip(i: usize) -> String {
    format!("10.77.{}.{}", i / 250, i % 250 + 1)
}

/// Starts one `cp-switch` per switch with its generated configuration and waits until every
/// control socket answers.
pub fn start_switches(st: &Setup) -> anyhow::Result<Vec<SwitchProc>> {
    let mut switches = Vec::new();
    for (i, sw) in st.graph.switches.iter().enumerate() {
        let ctl_path = st.sock_dir.join(format!("{sw}.ctl"));
        let trace = st.dir.join(format!("trace-{sw}.jsonl"));
        let cfg = switch_config(
            &st.sc,
            &st.graph,
            sw,
            st.k,
            &ctl_path,
            &trace,
            st.seed + i as u64,
        )?;
        let cfg_path = st.dir.join(format!("cp-switch-{sw}.toml"));
        std::fs::write(&cfg_path, cfg)?;
        let log = st.logs.join(format!("cp-switch-{sw}.log"));
        let logf = std::fs::File::create(&log)?;
        let mut c = st.ns[sw].command(&st.bins.cp_switch)?;
        c.arg("--config").arg(&cfg_path);
        if let Some(p) = st.switch_sched {
            c.arg("--sched").arg(p.to_string());
        }
        if let Some(cpu) = st.pinning.as_ref().and_then(|p| p.switches.get(i)) {
            c.arg("--cpu").arg(cpu.to_string());
        }
        c.env(RUN_ENV, &st.prefix)
            .stdout(Stdio::from(logf.try_clone()?))
            .stderr(Stdio::from(logf));
        let child = st.ns[sw].spawn_command(c)?;
        switches.push(SwitchProc {
            name: sw.clone(),
            child,
            ctl: ctl_path,
            log,
        });
    }
    for s in &mut switches {
        let ctl_path = s.ctl.clone();
        match wait_ready(&mut s.child, || ctl(&ctl_path, "stats").is_ok())? {
            Ok(()) => {}
            Err(NotReady::Exited) => {
                bail!(
                    "cp-switch {} exited at start:\n{}",
                    s.name,
                    tail(&s.log, 10)
                )
            }
            Err(NotReady::Silent) => bail!(
                "cp-switch {}: control socket silent for 10 s:\n{}",
                s.name,
                tail(&s.log, 10)
            ),
        }
    }
    Ok(switches)
}

/// Starts a sink (`--json`) on every host in `receivers`, in the hosts process `hosts` when
/// given, else as one `rp-agent sink` each, and waits until each has its packet socket open.
pub fn start_sinks(
    st: &Setup,
    receivers: &[String],
    hosts: Option<&HostProc>,
) -> anyhow::Result<Vec<SinkProc>> {
    let mut sinks = Vec::new();
    let args: Vec<String> = ["--uplink", "eth0", "--json", "--interval", &st.interval_arg]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for r in receivers {
        let name = format!("sink-{r}.json");
        let out = st.dir.join(&name);
        if let Some(hp) = hosts {
            let mut words: Vec<String> =
                vec!["start".into(), "sink".into(), netns_word(st, r), name];
            words.extend(args.iter().cloned());
            hp.start_host(st, &words)
                .with_context(|| format!("the sink on {r}"))?;
            sinks.push(SinkProc {
                host: r.clone(),
                child: None,
                out,
                stop_s: 0.0,
            });
            continue;
        }
        let mut c = st.ns[r].command(&st.bins.rp_agent)?;
        c.arg("sink").args(&args);
        c.stdout(Stdio::from(std::fs::File::create(&out)?));
        c.stderr(Stdio::from(std::fs::File::create(
            st.logs.join(format!("sink-{r}.log")),
        )?));
        let child = st.ns[r].spawn_command(c)?;
        sinks.push(SinkProc {
            host: r.clone(),
            child: Some(child),
            out,
            stop_s: 0.0,
        });
    }
    for s in &mut sinks {
        let Some(child) = s.child.as_mut() else {
            continue;
        };
        let space = &st.ns[s.host.as_str()];
        let ready = || {
            let packet = space.exec(&["cat", "/proc/net/packet"]).unwrap_or_default();
            packet.lines().count() > 1
        };
        match wait_ready(child, ready)? {
            Ok(()) => {}
            Err(NotReady::Exited) => bail!(
                "rp-agent sink on {} exited at start:\n{}",
                s.host,
                tail(&st.logs.join(format!("sink-{}.log", s.host)), 10)
            ),
            Err(NotReady::Silent) => {
                bail!("rp-agent sink on {}: no packet socket after 10 s", s.host)
            }
        }
    }
    Ok(sinks)
}

/// Starts the TAP agent of every host in `stack` (host → TAP MTU) and gives each its MAC,
/// MTU and static neighbours.
pub fn start_taps(st: &Setup, stack: &BTreeMap<String, u32>) -> anyhow::Result<Vec<StackHost>> {
    let mut stacks = Vec::new();
    for (h, mtu) in stack {
        stacks.push(start_tap(st, h, *mtu)?);
    }
    for me in &stacks {
        let mut batch = String::new();
        if let Some(t) = LabTcp::of(&st.sc, &me.name, st.k.loop_mul) {
            t.route(&me.ip, &mut batch);
        }
        for other in stacks.iter().filter(|o| o.name != me.name) {
            if let Some(m) = st.macs.get(&other.name) {
                batch.push_str(&format!(
                    "neigh replace {} lladdr {m} dev qcn0 nud permanent\n",
                    other.ip
                ));
            }
        }
        if !batch.is_empty() {
            let p = st.dir.join(format!("neigh-{}.batch", me.name));
            std::fs::write(&p, batch)?;
            st.ns[&me.name]
                .exec(&[std::ffi::OsStr::new("ip"), "-batch".as_ref(), p.as_os_str()])
                .with_context(|| format!("{}: static neighbours", me.name))?;
        }
    }
    Ok(stacks)
}

/// The TCP of an incast host's kernel in the lab: what of the scenario's `[[incast]]` (the
/// transport the simulator runs, [`crate::sim::tcp`]) a route can tell Linux.
///
/// * **RTOmin × S.** The kernel's floor is 200 ms (`TCP_RTO_MIN`) whatever the lab's scale,
///   which on a network run S times slower is RTOmin ÷ S of the emulated one: at S = 10 the
///   incast's rounds took 0.48-0.63 s of which 0.2 s was a timeout, where the simulator
///   (1 Gb/s, 200 ms) spends 32 ms of transfer and 200 ms of timeout. A route's `rto_min`
///   (locked) sets the floor of every connection over it.
/// * **The initial window** (`init_cwnd`, route `initcwnd`).
/// * **Reno's window rules** (route `congctl lock reno`): the model's congestion control is
///   RFC 5681's slow start, additive increase and halving, which is the kernel's `reno` (always
///   built in). Without it the lab ran whatever the machine's default was (`cubic` on most
///   machines, `bbr` on this kind, a rate-based algorithm that does not halve on loss), so the
///   same scenario ran a different transport on different machines. Measured at S = 10, one run
///   each, idle machine: with the default `bbr` 10 rounds in 10 s, two 2 s timeouts in the first
///   two rounds, goodput 34 %; with `reno` 15 rounds, no timeout, 48 % (the simulator: 13 %).
///
/// The model also ACKs every segment, where Linux delays some ACKs; the route's `quickack`
/// would match it but doubled the client's ACKs, which its TAP agent then sent in runs of up
/// to 62 frames faster than the link (5.1-5.9 % of the frames arriving early at the switch,
/// above the fidelity check's 5 %, on claim 9's QCN and FQCN runs): the delayed ACKs stay.
///
/// Loss recovery stays Linux's, which is not the model's NewReno, and the twin says so. Measured
/// at S = 10 (`testbed run incast --mode netns --twin`, idle machine; the simulator: 13 % of
/// the bottleneck, a timeout in every round), with the machine's default congestion control
/// (`bbr`), before `reno` was set:
///
/// | kernel | runs | rounds in 10 s | goodput |
/// |---|---:|---:|---:|
/// | as it comes (RTOmin 200 ms) | 1 | 19 | 60 % |
/// | RTOmin × S alone | 1 | 12 | 37 % |
/// | these settings | 2 | 15, 20 | 48 %, 63 %: a 2 s timeout in the first round or none, none after |
/// | these, `quickack` | 1 | 16 | 52 % |
/// | these, `quickack`, no tail loss probe, no RACK (`tcp_early_retrans`, `tcp_recovery` = 0) | 1 | 18 | 58 % |
/// | these, `quickack`, no SACK (`tcp_sack` = 0) | 1 | 1 | 3 %: timeouts backed off to 12 s |
/// | these, `quickack`, no SACK, no tail loss probe, no RACK | 1 | 2 | 4 % |
///
/// So the kernel's SACK recovery avoids the timeouts the model's incast is about, and without
/// SACK the kernel falls into repeated backed-off timeouts the model does not have; neither is
/// the paper's transport, and the run is judged against its twin as it is.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LabTcp {
    rto_min: Duration,
    init_cwnd: u32,
}

impl LabTcp {
    /// `host`'s settings: the largest `rto_min` and `init_cwnd` of the incasts it takes part
    /// in (client or server), `rto_min` × S like every loop time; `None` outside an incast.
    fn of(sc: &crate::scenario::Scenario, host: &str, loop_mul: f64) -> Option<LabTcp> {
        sc.topo
            .incast
            .iter()
            .filter(|inc| inc.client == host || inc.servers.iter().any(|s| s == host))
            .map(|inc| LabTcp {
                rto_min: crate::scenario::scale_dur(inc.rto_min, loop_mul),
                init_cwnd: inc.init_cwnd,
            })
            .reduce(|a, b| LabTcp {
                rto_min: a.rto_min.max(b.rto_min),
                init_cwnd: a.init_cwnd.max(b.init_cwnd),
            })
    }

    /// Appends to `batch` (an `ip -batch` of the host) the connected route of the TAP network
    /// as the kernel made it for the agent's address `ip`, with these settings.
    fn route(&self, ip: &str, batch: &mut String) {
        batch.push_str(&format!(
            "route change 10.77.0.0/16 dev qcn0 proto kernel scope link src {ip} rto_min {}ms \
             initcwnd {} congctl lock reno\n",
            self.rto_min.as_nanos().div_ceil(1_000_000).max(1),
            self.init_cwnd.max(1)
        ));
    }
}

/// One TAP agent (see [`start_taps`]).
fn start_tap(st: &Setup, h: &str, mtu: u32) -> anyhow::Result<StackHost> {
    let space = &st.ns[h];
    let _ = space.sysctl("net.ipv4.conf.all.arp_ignore", "1");
    let host_index = st.graph.hosts.iter().position(|x| x == h).unwrap_or(0);
    let ip = stack_ip(host_index);
    let cfg_path = st.dir.join(format!("rp-agent-tap-{h}.toml"));
    let line = uplink_rate(&st.sc, &st.graph, h);
    std::fs::write(
        &cfg_path,
        agent_config_at(&st.sc, h, line, st.k, Duration::ZERO)?,
    )?;
    let ctl_path = st.sock_dir.join(format!("agent-{h}.ctl"));
    let log = st.logs.join(format!("rp-agent-tap-{h}.log"));
    let logf = std::fs::File::create(&log)?;
    let mut c = space.command(&st.bins.rp_agent)?;
    c.env(RUN_ENV, &st.prefix)
        .args(["--uplink", "eth0", "--tap", "qcn0", "--tap-ip"])
        .arg(format!("{ip}/16"))
        .arg("--config")
        .arg(&cfg_path)
        .arg("--ctl")
        .arg(&ctl_path)
        .arg("--seed")
        .arg((st.seed.wrapping_mul(1000) + 500 + host_index as u64).to_string())
        .stdout(Stdio::from(logf.try_clone()?))
        .stderr(Stdio::from(logf));
    let mut agent = space.spawn_command(c)?;
    match wait_ready(&mut agent, || ctl(&ctl_path, "stats").is_ok())? {
        Ok(()) => {}
        Err(NotReady::Exited) => bail!(
            "rp-agent (TAP) on {h} exited at start:
{}",
            tail(&log, 10)
        ),
        Err(NotReady::Silent) => bail!("rp-agent (TAP) on {h}: control socket silent for 10 s"),
    }
    // The TAP carries the host's MAC: the agent's `mac` (in its configuration file) is put on
    // the TAP by the agent itself, and the uplink, which the lab gave the same address, gets
    // another while the agent runs (rp-agent's `UplinkMac`: else the host's kernel would take
    // every untagged frame twice).
    if mtu < 1492 {
        space.set_mtu("qcn0", mtu)?;
    }
    Ok(StackHost {
        name: h.to_string(),
        ip,
        ctl: ctl_path,
        agent,
        cnm_prev: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incast_hosts_get_the_scenarios_tcp_at_the_labs_scale() {
        // The built-in incast runs at S = 10: RTOmin 200 ms becomes 2 s, the initial window
        // stays 2 segments.
        let sc = crate::scenario::load("incast", &[]).unwrap();
        let k = crate::run::world::Scaling::netns(&sc);
        assert_eq!(k.loop_mul, 10.0);
        let want = LabTcp {
            rto_min: Duration::from_secs(2),
            init_cwnd: 2,
        };
        assert_eq!(LabTcp::of(&sc, "c0", k.loop_mul), Some(want));
        assert_eq!(LabTcp::of(&sc, "s15", k.loop_mul), Some(want));
        assert_eq!(LabTcp::of(&sc, "sw0", k.loop_mul), None);
        let mut batch = String::new();
        want.route("10.77.0.1", &mut batch);
        assert_eq!(
            batch,
            "route change 10.77.0.0/16 dev qcn0 proto kernel scope link src 10.77.0.1 \
             rto_min 2000ms initcwnd 2 congctl lock reno\n"
        );
        // Hosts outside an incast keep the kernel's TCP.
        let db = crate::scenario::load("dumbbell", &[]).unwrap();
        assert_eq!(LabTcp::of(&db, "h0", 10.0), None);
    }
}
