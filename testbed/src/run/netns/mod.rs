//! netns mode: the scenario on Linux network namespaces with the real daemons, scaled by S.
//!
//! [`NetnsWorld`] is the lab as a [`World`]; its parts live in the submodules:
//!
//! * [`lab`] — one namespace per node (`qtb-<pid>-<n>-run-<node>`), one veth pair per link
//!   with every offload off; a switch's interfaces carry the [graph](crate::scenario::graph)'s
//!   port names (named after their peers, as the simulator's ports), a host's single
//!   interface is `eth0` and carries the host's MAC.
//! * [`config`] — one `cp-switch` configuration per switch (the scenario's bridge table, veth
//!   line emulation, static FDB, `[[port]]` rates ÷ S and delays × S) and the agents'
//!   configurations (rates ÷ S, loop times × S).
//! * [`daemons`] — one `cp-switch` per switch; one sink (`--json`) per receiving host;
//!   for `tcp` and `udp:RATE` flows and `[[incast]]`, which use the hosts' kernels, every host
//!   taking part runs `rp-agent` in TAP mode (`qcn0`, the host's MAC and an address
//!   10.77.x.y/16, static neighbour entries for the other such hosts, so no ARP crosses the
//!   switches; the TAP's MTU follows the flows' `frame_len`). CNMs reaching these agents are
//!   read from their control sockets (`stats` → `cnm_rx`) and credited to the host's first
//!   such flow (the incast's servers: to `incast`).
//! * [`endpoints`] — one generator (`--json`) per generated flow, started at the flow's
//!   (scaled) start time with `--duration` = its active span; `iperf3` servers and clients
//!   ([`crate::run::iperf`]: the series is the receiver's goodput; generator series are wire
//!   rates); incast servers and clients ([`crate::run::incast`]; the rounds become the
//!   `incast` flow's goodput series). A host may have generator and iperf3 flows at once:
//!   `rp-agent gen` and the TAP agent then share the uplink, each with its own limiters and
//!   line-rate pacer (together they can exceed the host's line rate; the switch port beyond
//!   still shapes).
//! * [`captures`] — `tshark` on the switch side with `--capture`.
//! * [`events`] — timed congestion- and reaction-point parameter changes as `ctl set cp` /
//!   `ctl set rp` commands (each generator runs with `--ctl`); link-rate changes are
//!   `cp-switch ctl set rate` at a switch end and `rp-agent ctl set rate` at a host end.
//! * [`probe`] — measured while running: CPU (/proc/stat and each switch process), the
//!   bottleneck port's transmitted octets (ctl stats).
//! * [`collect`] — afterwards: generator and sink reports, iperf3 and incast outputs, the
//!   switches' traces and final statistics.
//!
//! Hosts: the generators and sinks run in one `rp-agent hosts` process by default
//! ([`daemons::HostProc`]; its own event loop over every host's packet socket, each opened in
//! its host's namespace), or one process each with `[scenario.netns] hosts = "per-process"`.
//! A generator `rp-agent gen` and a sink `rp-agent sink` are the same code either way.
//!
//! Readiness: each switch's control socket answers; each sink has its packet socket open;
//! each server listens. Teardown: the daemons are [`Child`] guards and the namespaces belong
//! to a [`Lab`], dropped last (the world's last field); both clean up on return, error, panic
//! and Ctrl-C ([`crate::signals`]).
//!
//! Limits: one flow per (source, destination) pair (the sink tells generated flows apart by
//! source MAC and flow id; the agents key their reaction points by destination and priority);
//! iperf3 takes whole seconds (`-t`), so a TCP/UDP flow's span is rounded down (at least 1 s).

pub mod captures;
pub mod collect;
pub mod config;
pub mod daemons;
pub mod endpoints;
pub mod events;
pub mod lab;
pub mod probe;
pub mod setup;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use anyhow::{bail, Context};
use cnm_proto::{Duration, Rate};
use serde_json::Value;

use super::progress::Progress;
use super::world::{Action, Cadence, Scaling, Timed, World};
use super::RunOptions;
use crate::analysis::{FlowSeries, RunData};
use crate::netns::{Child, Lab};
use crate::scenario::graph::Graph;
use crate::scenario::Scenario;
use crate::signals;
use crate::sim::topo::{DirSpec, EventKind, FlowKind};
use daemons::{ctl, tail, HostProc, SinkProc, StackHost, SwitchProc, TempDir};
use endpoints::{ClientProc, GenProc};
use events::ParamEvents;
pub use setup::{Bins, Pinning, Setup, RUN_ENV};

/// The lab as a [`World`]. Field order is drop order: processes first, then the socket
/// directory, the lab (namespaces) last.
#[derive(Debug)]
pub struct NetnsWorld {
    st: Setup,
    params: ParamEvents,
    /// Each TAP agent's CNMs go to the first flow it sources (an incast server's: `incast`).
    cnm_flow: BTreeMap<String, String>,
    /// The bottleneck's (switch, port).
    bn_switch: Option<(String, String)>,
    t0_mono: u64,
    /// The traces' clock and its offset to the captures' (read when the schedule starts).
    trace_clock: Option<crate::analysis::model::TraceClock>,
    probe: probe::Probe,
    /// The CPUs the run may use (the runner's affinity at its start; `probe`).
    run_cpus: Vec<usize>,
    gens: Vec<GenProc>,
    iperfs: Vec<ClientProc>,
    incasts: Vec<ClientProc>,
    captures: Vec<Child>,
    servers: Vec<Child>,
    stacks: Vec<StackHost>,
    sinks: Vec<SinkProc>,
    /// The generators' and sinks' process (one-process hosts).
    hosts: Option<HostProc>,
    switches: Vec<SwitchProc>,
    _sock_dir: TempDir,
    lab: Lab,
    /// The runner's lowered priority, given back at the end.
    _low: Option<crate::netns::LowPriority>,
    /// The runner's thread kept off the hosts loop's CPU, let go at the end.
    _confined: Option<crate::netns::Confined>,
}

/// How many nice steps the runner's thread goes below its priority during a namespace run
/// ([`crate::netns::LowPriority`]).
const RUNNER_NICE: i32 = 10;

/// Checks what netns mode needs before anything is built: support, root, one flow per pair,
/// flow kinds, iperf3, node names.
fn preflight(sc: &Scenario, graph: &Graph) -> anyhow::Result<Vec<FlowKind>> {
    if let Some(r) = &sc.meta.netns_unsupported {
        bail!("{}: netns mode is not available: {r}", sc.name);
    }
    if !crate::netns::is_root() {
        bail!("netns mode needs root (network namespaces); try --mode sim");
    }
    signals::install().context("installing signal handlers")?;
    let mut pairs = Vec::new();
    for (i, f) in sc.topo.flow.iter().enumerate() {
        if pairs.contains(&(&f.src, &f.dst)) {
            bail!(
                "{}: flow[{i}]: netns mode runs one flow per (src, dst) pair ({} -> {})",
                sc.file,
                f.src,
                f.dst
            );
        }
        pairs.push((&f.src, &f.dst));
    }
    let kinds: Vec<FlowKind> = sc.topo.flow.iter().map(|f| f.kind).collect();
    if kinds.iter().any(FlowKind::is_ip) {
        super::iperf::check_installed()?;
    }
    for n in graph.switches.iter().chain(&graph.hosts) {
        crate::netns::names::check_short(n)
            .with_context(|| format!("{}: node name {n:?} cannot name a namespace", sc.file))?;
    }
    Ok(kinds)
}

/// Hosts whose kernels take part (TCP/UDP flows, incasts), with the TAP MTU their flows ask
/// for.
fn stack_hosts(sc: &Scenario, kinds: &[FlowKind]) -> BTreeMap<String, u32> {
    let mut stack: BTreeMap<String, u32> = BTreeMap::new();
    let mut want_mtu = |h: &str, frame_len: usize| {
        let mtu = (frame_len.saturating_sub(14) as u32).clamp(576, 1492);
        let e = stack.entry(h.to_string()).or_insert(mtu);
        *e = (*e).min(mtu);
    };
    for (f, kind) in sc.topo.flow.iter().zip(kinds) {
        if kind.is_ip() {
            want_mtu(&f.src, f.frame_len);
            want_mtu(&f.dst, f.frame_len);
        }
    }
    for inc in &sc.topo.incast {
        want_mtu(&inc.client, inc.frame_len);
        for s in &inc.servers {
            want_mtu(s, inc.frame_len);
        }
    }
    stack
}

/// Each TAP agent's CNM flow: the first tcp/udp flow it sources, an incast server's `incast`.
fn cnm_flows(st: &Setup) -> BTreeMap<String, String> {
    let mut cnm_flow: BTreeMap<String, String> = BTreeMap::new();
    for (i, (f, kind)) in st.sc.topo.flow.iter().zip(&st.kinds).enumerate() {
        if kind.is_ip() && !cnm_flow.contains_key(&f.src) {
            cnm_flow.insert(f.src.clone(), st.flow_name(i));
        }
    }
    for inc in &st.sc.topo.incast {
        for srv in &inc.servers {
            cnm_flow
                .entry(srv.clone())
                .or_insert_with(|| "incast".into());
        }
    }
    cnm_flow
}

impl NetnsWorld {
    /// Builds the lab of `sc` in namespaces: network, switches, sinks, TAP agents, servers,
    /// captures; ready to start. `run` is the run's skeleton (the incast flow is added).
    pub fn build(
        sc: &Scenario,
        opts: &RunOptions,
        dir: &Path,
        seed: u64,
        run: &mut RunData,
        progress: &mut Progress,
    ) -> anyhow::Result<NetnsWorld> {
        let graph = sc.topo.graph();
        let kinds = preflight(sc, &graph)?;
        let bins = Bins::find(opts.bin_dir.as_deref())?;
        let k = Scaling::netns(sc);
        if !sc.topo.incast.is_empty() {
            let b = sc.bottleneck();
            let path: Vec<&str> = b.iter().map(String::as_str).collect();
            run.add_flow(FlowSeries::new("incast", &path));
        }
        let testbed_exe = if sc.topo.incast.is_empty() {
            PathBuf::new()
        } else {
            std::env::current_exe().context("the testbed executable (for the incast endpoints)")?
        };
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        // The hosts process runs when a generated flow has a receiver (`start_daemons`).
        let hosts_process = sc.meta.netns.hosts == crate::scenario::HostsMode::OneProcess
            && kinds.iter().any(|k| !k.is_ip());
        let mut pinning = None;
        // The CPUs the run may use, before the runner confines itself (`Confined`).
        let cpus = cnm_proto::phy::process::affinity().unwrap_or_default();
        if opts.pin && hosts_process {
            pinning = Pinning::plan(graph.switches.len(), &cpus);
            if pinning.is_none() {
                run.warnings.push(format!(
                    "note: daemons not pinned: {} switch(es) and the hosts process on {} CPU(s)",
                    graph.switches.len(),
                    cpus.len()
                ));
            }
        }
        if !hosts_process {
            run.warnings.extend(setup::shared_line_notes(sc, &kinds));
        }
        // Nothing else of the run on the hosts loop's CPU (`Pinning`): the runner's thread,
        // and every process it starts, which inherits its affinity.
        let confined = pinning
            .as_ref()
            .and_then(|p| crate::netns::Confined::to(&p.others));
        // The runner samples the lab while it runs; it must not preempt the daemons it
        // measures (`LowPriority`). They start at the priority it had.
        let low = crate::netns::LowPriority::lower(RUNNER_NICE);
        let lab = Lab::new("run")?;
        std::fs::write(dir.join("lab-prefix.txt"), format!("{}\n", lab.prefix()))?;
        let sock_dir = TempDir(std::env::temp_dir().join(lab.prefix()));
        std::fs::create_dir_all(&sock_dir.0)?;
        progress.note("building namespaces");
        progress.set(0.0);
        let macs = sc.topo.host_macs();
        let max_frame = sc.topo.flow.iter().map(|f| f.frame_len).max().unwrap_or(0);
        let ns = lab::build(&lab, &graph, &macs, max_frame)?;
        let span = k.at(sc.topo.duration);
        let interval = (span / 300.0).clamp(0.05, 1.0);
        let st = Setup {
            sc: sc.clone(),
            graph,
            k,
            seed,
            dir: dir.to_path_buf(),
            logs,
            bins,
            testbed_exe,
            prefix: lab.prefix().to_string(),
            sock_dir: sock_dir.0.clone(),
            ns,
            macs,
            kinds,
            span,
            interval_arg: format!("{}ms", (interval * 1000.0).round() as u64),
            // iperf3 reports every 0.1 s at the most.
            iperf_interval: format!("{:.3}", interval.max(0.1)),
            t0: StdInstant::now(),
            switch_sched: opts.switch_sched,
            // On a CPU of its own the hosts loop runs real-time unless told otherwise
            // (`Pinning::HOSTS_SCHED`).
            hosts_sched: opts
                .hosts_sched
                .or_else(|| pinning.as_ref().map(|_| Pinning::HOSTS_SCHED)),
            pinning,
        };
        let mut w = NetnsWorld {
            params: ParamEvents::new(sc, k)?,
            cnm_flow: cnm_flows(&st),
            bn_switch: None,
            t0_mono: 0,
            trace_clock: None,
            probe: probe::Probe::default(),
            run_cpus: cpus.clone(),
            gens: Vec::new(),
            iperfs: Vec::new(),
            incasts: Vec::new(),
            captures: Vec::new(),
            servers: Vec::new(),
            stacks: Vec::new(),
            sinks: Vec::new(),
            hosts: None,
            switches: Vec::new(),
            _sock_dir: sock_dir,
            lab,
            _low: low,
            _confined: confined,
            st,
        };
        w.start_daemons(opts, progress)?;
        Ok(w)
    }

    /// Switches, sinks, TAP agents, servers and captures, each waited for.
    fn start_daemons(&mut self, opts: &RunOptions, progress: &mut Progress) -> anyhow::Result<()> {
        let st = &self.st;
        progress.note("waiting for the switches");
        self.switches = daemons::start_switches(st)?;
        let mut receivers: Vec<String> = st
            .sc
            .topo
            .flow
            .iter()
            .zip(&st.kinds)
            .filter(|(_, k)| !k.is_ip())
            .map(|(f, _)| f.dst.clone())
            .collect();
        receivers.sort();
        receivers.dedup();
        let one_process = st.sc.meta.netns.hosts == crate::scenario::HostsMode::OneProcess;
        if one_process && !receivers.is_empty() {
            progress.note("starting the hosts process");
            self.hosts = Some(HostProc::start(st)?);
        }
        progress.note("waiting for the sinks");
        self.sinks = daemons::start_sinks(st, &receivers, self.hosts.as_ref())?;
        let stack = stack_hosts(&st.sc, &st.kinds);
        if !stack.is_empty() {
            progress.note("starting the TAP agents");
        }
        self.stacks = daemons::start_taps(st, &stack)?;
        progress.note("waiting for the servers");
        self.servers = endpoints::start_servers(st)?;
        if opts.capture.is_on() {
            self.captures = captures::start(st, &opts.capture)?;
        }
        self.bn_switch = st.bottleneck_link().map(|li| {
            let e = &st.graph.links[li].a;
            (e.node.clone(), e.port.clone())
        });
        Ok(())
    }

    fn ip_of(&self) -> impl Fn(&str) -> Option<String> + '_ {
        |h: &str| {
            self.stacks
                .iter()
                .find(|s| s.name == h)
                .map(|s| s.ip.clone())
        }
    }

    fn start_flow(&mut self, i: usize, now: f64) -> anyhow::Result<()> {
        if self.st.kinds[i].is_ip() {
            let c = endpoints::start_iperf(&self.st, i, now, &self.ip_of())?;
            self.iperfs.push(c);
        } else {
            let g = endpoints::start_gen(&self.st, i, self.st.flow_ctl(i), self.hosts.as_ref())?;
            self.gens.push(g);
        }
        Ok(())
    }

    /// A link-rate event: `set rate PORT R/S` to a switch end, `set rate R/S` to every agent
    /// sending from a host end.
    fn set_link_rate(&mut self, now: f64, link: &str, dir: DirSpec, rate: Rate, run: &mut RunData) {
        let Some(li) = self.st.graph.link_index(link) else {
            return;
        };
        let l = &self.st.graph.links[li];
        let ends = match dir {
            DirSpec::AToB => vec![&l.a],
            DirSpec::BToA => vec![&l.b],
            DirSpec::Both => vec![&l.a, &l.b],
        };
        let rate = crate::scenario::scale_rate(rate, self.st.k.rate_div);
        for e in ends {
            if e.switch {
                let (switch, port) = (&e.node, &e.port);
                if let Some(s) = self.switches.iter().find(|s| &s.name == switch) {
                    if let Err(e) = ctl(&s.ctl, &format!("set rate {port} {rate}")) {
                        run.warnings
                            .push(format!("rate change on {switch}/{port}: {e}"));
                    }
                }
            } else {
                self.set_host_rate(now, &e.node, rate, run);
            }
        }
    }

    /// A host's uplink rate: its agents' line rate (`rp-agent ctl set rate`): its generators
    /// and its TAP agent.
    fn set_host_rate(&self, now: f64, host: &str, rate: Rate, run: &mut RunData) {
        let mut socks: Vec<PathBuf> = self
            .st
            .sc
            .topo
            .flow
            .iter()
            .enumerate()
            .filter(|(_, f)| f.src == host)
            .map(|(i, _)| self.st.flow_ctl(i))
            .collect();
        socks.push(self.st.sock_dir.join(format!("agent-{host}.ctl")));
        socks.sort();
        socks.dedup();
        let mut told = 0;
        for sock in socks.iter().filter(|p| p.exists()) {
            match ctl(sock, &format!("set rate {rate}")) {
                Ok(_) => told += 1,
                Err(e) => run
                    .warnings
                    .push(format!("rate change on {host}'s uplink: {e}")),
            }
        }
        if told == 0 {
            run.warnings.push(format!(
                "rate change on {host}'s uplink at {now:.3} s: no agent of {host} was \
                 running (agents that start later start at the new rate)"
            ));
        }
    }

    /// Waits (up to 2 s) until no switch holds a frame: every frame the senders sent before
    /// they stopped has then been forwarded or dropped, so a sink stopped next has seen all
    /// it will see. Without the wait a sink stopped while the bottleneck still held a queue
    /// reported that queue's frames as neither received nor lost.
    fn await_switches_drained(&self, warnings: &mut Vec<String>) -> anyhow::Result<()> {
        let deadline = StdInstant::now() + StdDuration::from_secs(2);
        for s in &self.switches {
            loop {
                let Ok(stats) = ctl(&s.ctl, "stats") else {
                    break;
                };
                let held = backlog_bytes(&stats);
                if held == 0 {
                    break;
                }
                if StdInstant::now() >= deadline {
                    warnings.push(format!(
                        "switch {} still held {held} octets 2 s after the senders stopped: \
                         the sinks' reports miss those frames",
                        s.name
                    ));
                    break;
                }
                if signals::sleep_or_interrupted(StdDuration::from_millis(5)) {
                    bail!("interrupted");
                }
            }
        }
        Ok(())
    }

    /// Stops every process (generators and clients drain first, then the switches empty
    /// their queues, then the sinks stop) and saves the final statistics. What did not end
    /// in time is said in `warnings`: a report that misses frames says so.
    fn stop_all(&mut self, warnings: &mut Vec<String>) -> anyhow::Result<BTreeMap<String, Value>> {
        let span = self.st.span;
        // Generators stop by themselves (--duration) and drain for up to 1 s.
        let deadline = StdInstant::now() + StdDuration::from_secs(3);
        for g in &mut self.gens {
            let Some(child) = g.child.as_mut() else {
                continue;
            };
            while child.is_running() && StdInstant::now() < deadline {
                if signals::sleep_or_interrupted(StdDuration::from_millis(20)) {
                    bail!("interrupted");
                }
            }
            let _ = child.stop(StdDuration::from_secs(2));
        }
        // Those of the hosts process leave it when they have drained and reported.
        if let Some(hp) = &self.hosts {
            while hp.running_gens().is_some_and(|n| n > 0) && StdInstant::now() < deadline {
                if signals::sleep_or_interrupted(StdDuration::from_millis(20)) {
                    bail!("interrupted");
                }
            }
            if let Some(n) = hp.running_gens().filter(|&n| n > 0) {
                warnings.push(format!(
                    "{n} generator(s) had not drained 3 s after the run: their reports miss \
                     the frames still queued in their agents"
                ));
            }
        }
        // iperf3 clients end by themselves (-t) and then fetch the server's report; incast
        // clients start no round after their duration (one may still be running).
        for c in self.iperfs.iter_mut().chain(self.incasts.iter_mut()) {
            let deadline = self.st.t0 + StdDuration::from_secs_f64(c.ends_s.max(span) + 5.0);
            while c.child.is_running() && StdInstant::now() < deadline {
                if signals::sleep_or_interrupted(StdDuration::from_millis(20)) {
                    bail!("interrupted");
                }
            }
            let _ = c.child.stop(StdDuration::from_secs(2));
        }
        for mut c in self.servers.drain(..) {
            let _ = c.stop(StdDuration::from_secs(2));
        }
        self.await_switches_drained(warnings)?;
        for s in &mut self.sinks {
            s.stop_s = self.st.elapsed();
            if let Some(c) = s.child.as_mut() {
                let _ = c.stop(StdDuration::from_secs(3));
            }
        }
        // The hosts process reports every sink (and any generator left) when it stops.
        if let Some(hp) = &mut self.hosts {
            let _ = hp.child.stop(StdDuration::from_secs(3));
        }
        for mut c in self.captures.drain(..) {
            let _ = c.stop(StdDuration::from_secs(3));
        }
        let mut final_stats = BTreeMap::new();
        for s in &self.switches {
            if let Ok(v) = ctl(&s.ctl, "stats") {
                std::fs::write(
                    self.st.dir.join(format!("stats-{}.json", s.name)),
                    serde_json::to_string_pretty(&v)?,
                )?;
                final_stats.insert(s.name.clone(), v);
            }
        }
        for h in &mut self.stacks {
            if let Ok(v) = ctl(&h.ctl, "stats") {
                std::fs::write(
                    self.st.dir.join(format!("stats-agent-{}.json", h.name)),
                    serde_json::to_string_pretty(&v)?,
                )?;
            }
            let _ = h.agent.stop(StdDuration::from_secs(3));
        }
        for s in &mut self.switches {
            let _ = s.child.stop(StdDuration::from_secs(3));
        }
        Ok(final_stats)
    }
}

/// The octets a switch holds by its `stats`: in its queues (input and output), in its ports'
/// ingress stages and on its links' delay lines. Zero when it has forwarded or dropped
/// everything it received.
fn backlog_bytes(stats: &Value) -> u64 {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let items = |key: &str| stats[key].as_array().into_iter().flatten();
    let queued: u64 = items("queues").map(|q| n(&q["bytes"])).sum();
    let ports: u64 = items("ports")
        .map(|p| n(&p["in_flight_bytes"]) + n(&p["ingress"]["stage"]["queued_bytes"]))
        .sum();
    queued + ports
}

impl World for NetnsWorld {
    fn span(&self) -> f64 {
        self.st.span
    }

    fn cadence(&self) -> Cadence {
        Cadence {
            sample_every: Some(probe::EVERY),
        }
    }

    /// Lets the lab settle, then starts the wall clock; the plan is taken action by action.
    fn start(&mut self, _plan: &[Timed], _run: &mut RunData) -> anyhow::Result<bool> {
        let settle = self
            .st
            .sc
            .meta
            .netns
            .settle
            .unwrap_or(Duration::from_millis(300))
            .to_std();
        if signals::sleep_or_interrupted(settle) {
            bail!("interrupted");
        }
        self.st.t0 = StdInstant::now();
        self.t0_mono = cnm_proto::phy::clock::now().as_nanos();
        self.trace_clock = Some(crate::analysis::model::TraceClock::monotonic_now(
            self.t0_mono,
        ));
        let pids: Vec<u32> = self.switches.iter().map(|s| s.child.id()).collect();
        self.probe = probe::Probe::new(&pids, &self.run_cpus);
        Ok(false)
    }

    /// Sleeps 10 ms of wall-clock time.
    fn advance(&mut self) -> anyhow::Result<f64> {
        std::thread::sleep(StdDuration::from_millis(10));
        Ok(self.st.elapsed())
    }

    fn apply(&mut self, now: f64, t: &Timed, run: &mut RunData) -> anyhow::Result<()> {
        match t.action {
            Action::StartFlow(i) => self.start_flow(i, now)?,
            Action::StartIncast(j) => {
                let c = endpoints::start_incast(&self.st, j, now, &self.ip_of())?;
                self.incasts.push(c);
            }
            Action::Event(i) => match self.st.sc.topo.event[i].kind() {
                EventKind::Link { link, dir, rate } => {
                    let (link, dir, rate) = (link.clone(), *dir, *rate);
                    self.set_link_rate(now, &link, dir, rate, run);
                }
                _ => {
                    let switches = &self.switches;
                    let switch_ctl =
                        |n: &str| switches.iter().find(|s| s.name == n).map(|s| s.ctl.clone());
                    let st = &self.st;
                    let flow_ctl = |f: usize| st.flow_ctl(f);
                    self.params
                        .send(i, &switch_ctl, &flow_ctl, &mut run.warnings);
                }
            },
        }
        Ok(())
    }

    fn sample(&mut self, now: f64, run: &mut RunData) -> anyhow::Result<()> {
        let pids: Vec<(&str, u32)> = self
            .switches
            .iter()
            .map(|s| (s.name.as_str(), s.child.id()))
            .collect();
        self.probe.cpu(now, &pids, run);
        if let Some((sw, port)) = &self.bn_switch {
            let sock = self.switches.iter().find(|s| &s.name == sw).map(|s| &s.ctl);
            if let Some(v) = sock.and_then(|p| ctl(p, "stats").ok()) {
                self.probe.bottleneck(now, &v, port, run);
            }
        }
        for s in &mut self.switches {
            if !s.child.is_running() {
                bail!(
                    "cp-switch {} died during the run:\n{}",
                    s.name,
                    tail(&s.log, 10)
                );
            }
        }
        if let Some(hp) = &mut self.hosts {
            if !hp.child.is_running() {
                bail!("rp-agent hosts died during the run:\n{}", tail(&hp.log, 10));
            }
        }
        for h in &mut self.stacks {
            if let Ok(v) = ctl(&h.ctl, "stats") {
                let n = v["cnm_rx"].as_u64().unwrap_or(0);
                if n > h.cnm_prev {
                    if let Some(fs) = self.cnm_flow.get(&h.name).and_then(|f| run.flow_mut(f)) {
                        fs.push_cnm_count(now, n - h.cnm_prev);
                    }
                }
                h.cnm_prev = h.cnm_prev.max(n);
            }
            if !h.agent.is_running() {
                let log = self.st.logs.join(format!("rp-agent-tap-{}.log", h.name));
                bail!(
                    "rp-agent (TAP) on {} died during the run:\n{}",
                    h.name,
                    tail(&log, 10)
                );
            }
        }
        Ok(())
    }

    fn finish(mut self, run: &mut RunData) -> anyhow::Result<()> {
        let final_stats = self.stop_all(&mut run.warnings)?;
        run.meta.trace_clock = self.trace_clock;
        collect::collect_iperf(&self.st.sc, run, &self.iperfs);
        collect::collect_incast(&self.st.sc, run, &self.incasts);
        let outputs = collect::Outputs {
            gens: &self.gens,
            sinks: &self.sinks,
            stats: &final_stats,
            t0_mono: self.t0_mono,
            bn: &self.bn_switch,
        };
        collect::collect(
            &self.st.sc,
            &self.st.graph,
            self.st.k,
            run,
            &self.st.dir,
            &outputs,
        );
        drop(std::mem::take(&mut self.switches));
        drop(std::mem::take(&mut self.sinks));
        drop(std::mem::take(&mut self.gens));
        drop(self.hosts.take());
        drop(std::mem::take(&mut self.stacks));
        self.lab
            .teardown()
            .map_err(|e| anyhow::anyhow!("teardown: {e}"))?;
        Ok(())
    }
}
