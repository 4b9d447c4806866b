//! netns mode: the scenario on Linux network namespaces with the real daemons, scaled by S.
//!
//! * One namespace per node (`qtb-<pid>-<n>-run-<node>`), one veth pair per link with every
//!   offload off; a switch's interfaces are named after their peers (as the simulator's ports),
//!   a host's single interface is `eth0` and carries the host's MAC.
//! * One `cp-switch` per switch with a generated `--config` file: the scenario's bridge table,
//!   the veth line emulation (no preamble/FCS/padding, 5 ms catch-up), static FDB entries
//!   towards every host (shortest path; receivers never send), `[[port]]` entries with
//!   `rate` = link rate ÷ S and `delay`; plus `--ctl`, `--trace` and `--seed`.
//!   A veth pair has no delay of its own and only the switch emulates one, so a switch port
//!   towards a host carries the delay of *both* directions of the link (2 × delay × S): the
//!   feedback loop (data frame up, CNM back) sees the same delay as in the simulator. Ports
//!   between switches carry one direction each.
//! * One `rp-agent sink --json` per receiving host, one `rp-agent gen --json` per flow started
//!   at the flow's (scaled) start time with `--duration` = its active span; the agent
//!   configuration is the scenario's `[host.X.agent]` with rates ÷ S and the RP timer × S.
//! * `tcp` and `udp:RATE` flows and `[[incast]]` use the hosts' kernels: every host taking part
//!   runs `rp-agent` in TAP mode (`qcn0`, the host's MAC and an address 10.77.x.y/16, static
//!   neighbour entries for the other such hosts, so no ARP crosses the switches; the TAP's MTU
//!   follows the flows' `frame_len`). A flow's destination runs `iperf3 -s -1 -J` on port
//!   [`super::iperf::BASE_PORT`] + flow index; its source `iperf3 -c` at the flow's start
//!   ([`super::iperf`]: the series is the receiver's goodput; generator series are wire rates).
//!   An incast's servers run `testbed incast-server`, its client `testbed incast-client`
//!   ([`super::incast`]); the rounds become the `incast` flow's goodput series. CNMs reaching
//!   these agents are read from their control sockets (`stats` → `cnm_rx`) and credited to the
//!   host's first such flow (the incast's servers: to `incast`).
//!   A host may have generator and iperf3 flows at once: `rp-agent gen` and the TAP agent then
//!   share the uplink, each with its own limiters and line-rate pacer (together they can exceed
//!   the host's line rate; the switch port beyond still shapes).
//! * Timed events: link-rate changes through `cp-switch ctl set rate`; congestion- and
//!   reaction-point parameter changes through `ctl set cp` / `ctl set rp` ([`super::events`];
//!   each generator runs with `--ctl`).
//! * Readiness: each switch's control socket answers; each sink has its packet socket open.
//! * Measured while running: CPU (/proc/stat and each switch process), the bottleneck port's
//!   transmitted octets (ctl stats). Afterwards: generator and sink reports, the switches'
//!   traces and final statistics.
//! * Teardown: the daemons are [`Child`] guards and the namespaces belong to a [`Lab`]; both
//!   clean up on return, error, panic and Ctrl-C ([`crate::signals`]).
//!
//! Limits: one flow per (source, destination) pair (the sink tells generated flows apart by
//! source MAC and flow id; the agents key their reaction points by destination and priority);
//! iperf3 takes whole seconds (`-t`), so a TCP/UDP flow's span is rounded down (at least 1 s).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use anyhow::{bail, Context};
use cnm_proto::{Bytes, Duration, Rate};
use serde_json::Value;

use super::incast;
use super::iperf;
use super::progress::Progress;
use super::shape::Shape;
use super::{skeleton, Mode, RunOptions, Scaling};
use crate::analysis::trace::{read_trace_file, TraceOptions};
use crate::analysis::RunData;
use crate::netns::{Child, Lab, Namespace};
use crate::scenario::Scenario;
use crate::signals;
use crate::sim::topo::FlowKind;
use rp_agent::gen::Pattern;

/// Environment variable set on every process a run starts, to the run's lab prefix (tests
/// and `ps e` find a run's processes by it).
pub const RUN_ENV: &str = "TESTBED_RUN";

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

/// Removes the run's socket directory on drop.
#[derive(Debug)]
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Asks a `cp-switch` control socket; returns `data`.
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

fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn scaled_pattern(p: &Pattern, s: f64) -> String {
    let r = |x: Rate| crate::scenario::scale_rate(x, s);
    match p {
        Pattern::Greedy => "greedy".into(),
        Pattern::Cbr(x) => format!("cbr:{}", r(*x)),
        Pattern::OnOff { rate, on } => format!("onoff:{},on={on}", r(*rate)),
        Pattern::Poisson { rate, mean, shape } => {
            format!("poisson:{},pareto-mean={mean},shape={shape}", r(*rate))
        }
    }
}

fn s(v: impl std::fmt::Display) -> toml::Value {
    toml::Value::String(v.to_string())
}

/// The `rp-agent --config` text of a host: its `[host.X.agent]` table with the rates ÷ S, the
/// RP timer, the adaptive byte counter's time constant and the explicit-rate timeout × S, and
/// the veth pacing defaults.
pub fn agent_config(
    sc: &Scenario,
    host: &str,
    line_rate: Rate,
    k: Scaling,
) -> anyhow::Result<String> {
    let mut t = sc
        .topo
        .host
        .get(host)
        .and_then(|h| h.agent.clone())
        .unwrap_or_default();
    let macs = sc.topo.host_macs();
    if !t.contains_key("line_rate") {
        t.insert("line_rate".into(), s(line_rate));
    }
    if let Some(m) = macs.get(host) {
        t.entry("mac").or_insert_with(|| s(m));
    }
    let cfg: rp_agent::AgentConfig = t
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| anyhow::anyhow!("host.{host}.agent: {}", e.message()))?;
    let sr = |x: Rate| s(crate::scenario::scale_rate(x, k.rate_div));
    let sd = |x: Duration| s(crate::scenario::scale_dur(x, k.loop_mul));
    t.insert("line_rate".into(), sr(cfg.line_rate));
    t.entry("wire_overhead")
        .or_insert(toml::Value::Boolean(false));
    t.entry("catch_up").or_insert_with(|| s("5ms"));
    let mut rp = t
        .get("rp")
        .and_then(|v| v.as_table())
        .cloned()
        .unwrap_or_default();
    rp.insert("rpg_time_reset".into(), sd(cfg.rp.rpg_time_reset));
    rp.insert("rpg_ai_rate".into(), sr(cfg.rp.rpg_ai_rate));
    rp.insert("rpg_hai_rate".into(), sr(cfg.rp.rpg_hai_rate));
    rp.insert("rpg_min_rate".into(), sr(cfg.rp.rpg_min_rate));
    rp.insert("rpg_adaptive_k".into(), sd(cfg.rp.rpg_adaptive_k));
    rp.insert("rp_er_timeout".into(), sd(cfg.rp.rp_er_timeout));
    if let Some(m) = cfg.rp.rpg_max_rate {
        rp.insert("rpg_max_rate".into(), sr(m));
    }
    t.insert("rp".into(), toml::Value::Table(rp));
    Ok(toml::to_string(&t)?)
}

/// The `cp-switch --config` text of a switch.
pub fn switch_config(
    sc: &Scenario,
    shape: &Shape,
    sw: &str,
    k: Scaling,
    ctl: &Path,
    trace: &Path,
    seed: u64,
) -> anyhow::Result<String> {
    let mut bridge = sc
        .topo
        .switch
        .get(sw)
        .and_then(|x| x.bridge.clone())
        .unwrap_or_default();
    let mut shaper = bridge
        .get("shaper")
        .and_then(|v| v.as_table())
        .cloned()
        .unwrap_or_default();
    for (key, v) in [
        ("wire_overhead", toml::Value::Boolean(false)),
        ("fcs", toml::Value::Boolean(false)),
        ("pad", toml::Value::Boolean(false)),
        ("catch_up", s("5ms")),
    ] {
        shaper.entry(key).or_insert(v);
    }
    bridge.insert("shaper".into(), toml::Value::Table(shaper));
    // PAUSE quanta are 512 bit times at the nominal rate: ÷ S keeps their duration × S.
    let parsed: cp_switch::BridgeConfig = bridge
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| anyhow::anyhow!("switch.{sw}.bridge: {}", e.message()))?;
    // The explicit-rate CP's interval and floor, when given, follow the time scale too.
    if let Some(cp) = bridge.get_mut("cp").and_then(|v| v.as_table_mut()) {
        if let Some(d) = parsed.cp.er_interval {
            cp.insert(
                "er_interval".into(),
                s(crate::scenario::scale_dur(d, k.loop_mul)),
            );
        }
        if let Some(r) = parsed.cp.er_min_rate {
            cp.insert(
                "er_min_rate".into(),
                s(crate::scenario::scale_rate(r, k.rate_div)),
            );
        }
    }
    let mut lossless = bridge
        .get("lossless")
        .and_then(|v| v.as_table())
        .cloned()
        .unwrap_or_default();
    lossless.insert(
        "nominal_rate".into(),
        s(crate::scenario::scale_rate(
            parsed.lossless.nominal_rate,
            k.rate_div,
        )),
    );
    bridge.insert("lossless".into(), toml::Value::Table(lossless));
    let static_fdb = sc.topo.switch.get(sw).map_or(true, |x| x.static_fdb);
    if static_fdb {
        let macs = sc.topo.host_macs();
        let mut fdb = bridge
            .get("fdb")
            .and_then(|v| v.as_table())
            .cloned()
            .unwrap_or_default();
        let mut entries = fdb
            .get("static_entries")
            .and_then(|v| v.as_array())
            .cloned()
            .unwrap_or_default();
        for (h, port) in shape.fdb(sw) {
            if let Some(m) = macs.get(&h) {
                let mut e = toml::Table::new();
                e.insert("mac".into(), s(m));
                e.insert("port".into(), s(port));
                entries.push(toml::Value::Table(e));
            }
        }
        fdb.insert("static_entries".into(), toml::Value::Array(entries));
        bridge.insert("fdb".into(), toml::Value::Table(fdb));
    }
    let mut top = toml::Table::new();
    top.insert("ctl".into(), s(ctl.display()));
    top.insert("trace".into(), s(trace.display()));
    let ti = sc
        .topo
        .output
        .trace_interval
        .map(|d| crate::scenario::scale_dur(d, k.loop_mul))
        .unwrap_or(Duration::from_millis(1))
        .min(Duration::from_millis(5))
        .max(Duration::from_millis(1));
    top.insert("trace_interval".into(), s(ti));
    top.insert("seed".into(), toml::Value::Integer(seed as i64 & i64::MAX));
    let mut ports = Vec::new();
    for (li, l) in shape.links.iter().enumerate() {
        let link = &sc.topo.link[li];
        for (me, peer) in [(&l.a, &l.b), (&l.b, &l.a)] {
            if me.node != sw {
                continue;
            }
            let mut p = toml::Table::new();
            p.insert("name".into(), s(&me.port));
            p.insert(
                "rate".into(),
                s(crate::scenario::scale_rate(link.rate, k.rate_div)),
            );
            let both = if shape.is_switch(&peer.node) {
                1.0
            } else {
                2.0
            };
            let d = crate::scenario::scale_dur(link.delay, k.loop_mul * both);
            p.insert("delay".into(), s(d));
            ports.push(toml::Value::Table(p));
        }
    }
    top.insert("port".into(), toml::Value::Array(ports));
    top.insert("bridge".into(), toml::Value::Table(bridge));
    Ok(toml::to_string(&top)?)
}

/// CPU time (jiffies) of a process: utime + stime.
fn proc_jiffies(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// (busy, total) jiffies of all CPUs.
fn cpu_jiffies() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// Clock ticks per second of /proc (USER_HZ; 100 on every Linux architecture in use).
const USER_HZ: f64 = 100.0;

#[derive(Debug)]
enum Action {
    StartFlow(usize),
    StartIncast(usize),
    SetRate {
        switch: String,
        port: String,
        rate: Rate,
    },
    /// A host's uplink rate: its agents' line rate (`rp-agent ctl set rate`).
    SetHostRate {
        host: String,
        rate: Rate,
    },
}

struct GenProc {
    flow: usize,
    child: Child,
    started_s: f64,
    out: PathBuf,
}

/// A host whose kernel takes part (TCP/UDP flows, incast): its TAP agent.
struct StackHost {
    name: String,
    ip: String,
    ctl: PathBuf,
    agent: Child,
    cnm_prev: u64,
}

/// An iperf3 client or incast client: what it writes and when it started.
struct ClientProc {
    /// Flow index (iperf3) or incast index.
    index: usize,
    child: Child,
    started_s: f64,
    /// Latest moment it should have finished by itself (seconds from t0).
    ends_s: f64,
    out: PathBuf,
}

/// The address of the `i`-th host on the TAP network 10.77.0.0/16.
fn stack_ip(i: usize) -> String {
    format!("10.77.{}.{}", i / 250, i % 250 + 1)
}

/// Whether a TCP port listens in `ns`.
fn listening(ns: &Namespace, port: u16) -> bool {
    ns.exec(&["ss", "-Hltn"])
        .map(|o| o.lines().any(|l| l.contains(&format!(":{port} "))))
        .unwrap_or(false)
}

/// Runs `sc` in namespaces, writing logs, traces and reports into `dir`.
pub fn run(sc: &Scenario, opts: &RunOptions, dir: &Path) -> anyhow::Result<RunData> {
    if let Some(r) = &sc.meta.netns_unsupported {
        bail!("{}: netns mode is not available: {r}", sc.name);
    }
    if !crate::netns::is_root() {
        bail!("netns mode needs root (network namespaces); try --mode sim");
    }
    signals::install().context("installing signal handlers")?;
    let bins = Bins::find(opts.bin_dir.as_deref())?;
    let k = Scaling::netns(sc);
    let seed = opts.seed.unwrap_or(sc.topo.seed);
    let (mut run, shape) = skeleton(sc, Mode::Netns, k, seed);
    if !sc.topo.incast.is_empty() {
        let b = sc.bottleneck();
        let path: Vec<&str> = b.iter().map(String::as_str).collect();
        run.add_flow(crate::analysis::FlowSeries::new("incast", &path));
    }
    let macs = sc.topo.host_macs();
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
    let kinds: Vec<FlowKind> = sc
        .topo
        .flow
        .iter()
        .enumerate()
        .map(|(i, f)| {
            f.kind()
                .map_err(|e| anyhow::anyhow!("{}: flow[{i}].pattern: {e}", sc.file))
        })
        .collect::<anyhow::Result<_>>()?;
    if kinds.iter().any(FlowKind::is_ip) {
        iperf::check_installed()?;
    }
    // Hosts whose kernels take part, with the TAP MTU their flows ask for.
    let mut stack: BTreeMap<String, u32> = BTreeMap::new();
    let mut want_mtu = |h: &str, frame_len: usize| {
        let mtu = (frame_len.saturating_sub(14) as u32).clamp(576, 1492);
        let e = stack.entry(h.to_string()).or_insert(mtu);
        *e = (*e).min(mtu);
    };
    for (f, kind) in sc.topo.flow.iter().zip(&kinds) {
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
    let testbed_exe = if sc.topo.incast.is_empty() {
        PathBuf::new()
    } else {
        std::env::current_exe().context("the testbed executable (for the incast endpoints)")?
    };
    for n in shape.switches.iter().chain(&shape.hosts) {
        crate::netns::names::check_short(n)
            .with_context(|| format!("{}: node name {n:?} cannot name a namespace", sc.file))?;
    }
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs)?;

    // The lab is declared first so that it is dropped last, after every daemon's guard.
    let lab = Lab::new("run")?;
    std::fs::write(dir.join("lab-prefix.txt"), format!("{}\n", lab.prefix()))?;
    let sock_dir = TempDir(std::env::temp_dir().join(lab.prefix()));
    std::fs::create_dir_all(&sock_dir.0)?;
    let mut progress = Progress::new(
        &format!("netns {}", sc.name),
        k.at(sc.topo.duration),
        opts.quiet,
    );
    progress.note("building namespaces");
    progress.set(0.0);

    let mut ns: BTreeMap<String, Namespace> = BTreeMap::new();
    for n in shape.switches.iter().chain(&shape.hosts) {
        let space = lab.ns(n)?;
        // No IPv6 autoconfiguration chatter (router solicitations, DAD) on the experiment's
        // links: only the scenario's traffic crosses the switches.
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
    // Frames longer than the default MTU allows (1514 octets untagged, e.g. the input-CP
    // paper's 1518-octet frames) need a larger MTU on every link, or the kernel refuses to
    // send or forward them; the MTU is the frame length itself, which leaves room for the
    // header, a VLAN tag and a CN-TAG.
    let mtu = sc.topo.flow.iter().map(|f| f.frame_len).max().unwrap_or(0);
    for l in &shape.links {
        let v = lab.veth((&ns[&l.a.node], &l.a.port), (&ns[&l.b.node], &l.b.port))?;
        v.offloads_off()?;
        if mtu > 1500 {
            v.mtu(u32::try_from(mtu).unwrap_or(u32::MAX))?;
        }
    }
    for h in &shape.hosts {
        if let Some(m) = macs.get(h) {
            if shape.uplink(h).is_some() {
                ns[h].set_mac("eth0", &m.to_string())?;
            }
        }
    }
    for l in &shape.links {
        ns[&l.a.node].set_up(&l.a.port)?;
        ns[&l.b.node].set_up(&l.b.port)?;
    }

    // Switches.
    let mut switches: Vec<(String, Child, PathBuf, PathBuf)> = Vec::new();
    for (i, sw) in shape.switches.iter().enumerate() {
        let ctl_path = sock_dir.0.join(format!("{sw}.ctl"));
        let trace = dir.join(format!("trace-{sw}.jsonl"));
        let cfg = switch_config(sc, &shape, sw, k, &ctl_path, &trace, seed + i as u64)?;
        let cfg_path = dir.join(format!("cp-switch-{sw}.toml"));
        std::fs::write(&cfg_path, cfg)?;
        let log = logs.join(format!("cp-switch-{sw}.log"));
        let logf = std::fs::File::create(&log)?;
        let mut c = ns[sw].command(&bins.cp_switch)?;
        c.arg("--config")
            .arg(&cfg_path)
            .env(RUN_ENV, lab.prefix())
            .stdout(Stdio::from(logf.try_clone()?))
            .stderr(Stdio::from(logf));
        let child = ns[sw].spawn_command(c)?;
        switches.push((sw.clone(), child, ctl_path, log));
    }
    progress.note("waiting for the switches");
    for (sw, child, ctl_path, log) in &mut switches {
        let deadline = StdInstant::now() + StdDuration::from_secs(10);
        loop {
            if signals::requested() {
                bail!("interrupted");
            }
            if ctl(ctl_path, "stats").is_ok() {
                break;
            }
            if !child.is_running() {
                bail!("cp-switch {sw} exited at start:\n{}", tail(log, 10));
            }
            if StdInstant::now() > deadline {
                bail!(
                    "cp-switch {sw}: control socket silent for 10 s:\n{}",
                    tail(log, 10)
                );
            }
            std::thread::sleep(StdDuration::from_millis(20));
        }
    }

    // Sinks on every receiving host.
    let span = k.at(sc.topo.duration);
    let interval = (span / 300.0).clamp(0.05, 1.0);
    let interval_arg = format!("{}ms", (interval * 1000.0).round() as u64);
    // iperf3 reports every 0.1 s at the most.
    let iperf_interval = format!("{:.3}", interval.max(0.1));
    let mut receivers: Vec<String> = sc
        .topo
        .flow
        .iter()
        .zip(&kinds)
        .filter(|(_, k)| !k.is_ip())
        .map(|(f, _)| f.dst.clone())
        .collect();
    receivers.sort();
    receivers.dedup();
    let mut sinks: Vec<(String, Child, PathBuf, f64)> = Vec::new();
    for r in &receivers {
        let out = dir.join(format!("sink-{r}.jsonl"));
        let mut c = ns[r].command(&bins.rp_agent)?;
        c.args([
            "sink",
            "--uplink",
            "eth0",
            "--json",
            "--interval",
            &interval_arg,
        ]);
        c.stdout(Stdio::from(std::fs::File::create(&out)?));
        c.stderr(Stdio::from(std::fs::File::create(
            logs.join(format!("sink-{r}.log")),
        )?));
        let child = ns[r].spawn_command(c)?;
        sinks.push((r.clone(), child, out, 0.0));
    }
    progress.note("waiting for the sinks");
    for (r, child, _, _) in &mut sinks {
        let deadline = StdInstant::now() + StdDuration::from_secs(10);
        loop {
            if signals::requested() {
                bail!("interrupted");
            }
            let packet = ns[r.as_str()]
                .exec(&["cat", "/proc/net/packet"])
                .unwrap_or_default();
            if packet.lines().count() > 1 {
                break;
            }
            if !child.is_running() {
                bail!(
                    "rp-agent sink on {r} exited at start:\n{}",
                    tail(&logs.join(format!("sink-{r}.log")), 10)
                );
            }
            if StdInstant::now() > deadline {
                bail!("rp-agent sink on {r}: no packet socket after 10 s");
            }
            std::thread::sleep(StdDuration::from_millis(20));
        }
    }

    // TAP agents of the hosts whose kernels take part, then the iperf3 and incast servers.
    let mut stacks: Vec<StackHost> = Vec::new();
    if !stack.is_empty() {
        progress.note("starting the TAP agents");
    }
    let host_index = |h: &str| shape.hosts.iter().position(|x| x == h).unwrap_or(0);
    for (h, mtu) in &stack {
        let space = &ns[h];
        let _ = space.sysctl("net.ipv4.conf.all.arp_ignore", "1");
        let ip = stack_ip(host_index(h));
        let uplink_rate = shape
            .uplink(h)
            .map(|li| sc.topo.link[li].rate)
            .unwrap_or(Rate::from_gbps(1));
        let cfg_path = dir.join(format!("rp-agent-tap-{h}.toml"));
        std::fs::write(
            &cfg_path,
            super::events::agent_config_at(sc, h, uplink_rate, k, Duration::ZERO)?,
        )?;
        let ctl_path = sock_dir.0.join(format!("agent-{h}.ctl"));
        let log = logs.join(format!("rp-agent-tap-{h}.log"));
        let logf = std::fs::File::create(&log)?;
        let mut c = space.command(&bins.rp_agent)?;
        c.env(RUN_ENV, lab.prefix())
            .args(["--uplink", "eth0", "--tap", "qcn0", "--tap-ip"])
            .arg(format!("{ip}/16"))
            .arg("--config")
            .arg(&cfg_path)
            .arg("--ctl")
            .arg(&ctl_path)
            .arg("--seed")
            .arg((seed.wrapping_mul(1000) + 500 + host_index(h) as u64).to_string())
            .stdout(Stdio::from(logf.try_clone()?))
            .stderr(Stdio::from(logf));
        let mut agent = space.spawn_command(c)?;
        let deadline = StdInstant::now() + StdDuration::from_secs(10);
        while ctl(&ctl_path, "stats").is_err() {
            if signals::requested() {
                bail!("interrupted");
            }
            if !agent.is_running() {
                bail!(
                    "rp-agent (TAP) on {h} exited at start:
{}",
                    tail(&log, 10)
                );
            }
            if StdInstant::now() > deadline {
                bail!("rp-agent (TAP) on {h}: control socket silent for 10 s");
            }
            std::thread::sleep(StdDuration::from_millis(20));
        }
        // The TAP carries the host's MAC: the agent takes only frames addressed to it (its
        // `mac`), and the switches' static FDB entries point at it.
        if let Some(m) = macs.get(h) {
            let m = m.to_string();
            space
                .ip(&["link", "set", "dev", "qcn0", "address", &m])
                .or_else(|_| {
                    space.set_down("qcn0")?;
                    space.ip(&["link", "set", "dev", "qcn0", "address", &m])?;
                    space.set_up("qcn0").map(|_| String::new())
                })
                .with_context(|| format!("{h}: TAP address {m}"))?;
        }
        if *mtu < 1492 {
            space.set_mtu("qcn0", *mtu)?;
        }
        stacks.push(StackHost {
            name: h.clone(),
            ip,
            ctl: ctl_path,
            agent,
            cnm_prev: 0,
        });
    }
    for me in &stacks {
        let mut batch = String::new();
        for other in stacks.iter().filter(|o| o.name != me.name) {
            if let Some(m) = macs.get(&other.name) {
                batch.push_str(&format!(
                    "neigh replace {} lladdr {m} dev qcn0 nud permanent\n",
                    other.ip
                ));
            }
        }
        if !batch.is_empty() {
            let p = dir.join(format!("neigh-{}.batch", me.name));
            std::fs::write(&p, batch)?;
            ns[&me.name]
                .exec(&[std::ffi::OsStr::new("ip"), "-batch".as_ref(), p.as_os_str()])
                .with_context(|| format!("{}: static neighbours", me.name))?;
        }
    }
    let ips: BTreeMap<String, String> = stacks
        .iter()
        .map(|s| (s.name.clone(), s.ip.clone()))
        .collect();
    let ip_of = |h: &str| ips.get(h).cloned();
    let mut servers: Vec<Child> = Vec::new();
    let mut wait_ports: Vec<(String, u16)> = Vec::new();
    for (i, (f, kind)) in sc.topo.flow.iter().zip(&kinds).enumerate() {
        if !kind.is_ip() {
            continue;
        }
        let name = f.name.clone().unwrap_or_else(|| format!("f{i}"));
        let port = iperf::BASE_PORT + i as u16;
        let mut c = ns[&f.dst].command("iperf3")?;
        c.env(RUN_ENV, lab.prefix())
            .args([
                "-s",
                "-1",
                "-J",
                "-p",
                &port.to_string(),
                "-i",
                &iperf_interval,
            ])
            .stdout(Stdio::from(std::fs::File::create(
                dir.join(format!("iperf-server-{name}.json")),
            )?))
            .stderr(Stdio::from(std::fs::File::create(
                logs.join(format!("iperf-server-{name}.log")),
            )?));
        servers.push(ns[&f.dst].spawn_command(c)?);
        wait_ports.push((f.dst.clone(), port));
    }
    for (j, inc) in sc.topo.incast.iter().enumerate() {
        for (kx, srv) in inc.servers.iter().enumerate() {
            let port = incast::BASE_PORT + (100 * j + kx) as u16;
            let mut c = ns[srv].command(&testbed_exe)?;
            c.env(RUN_ENV, lab.prefix())
                .args(["incast-server", "--port", &port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::from(std::fs::File::create(
                    logs.join(format!("incast-server-{srv}.log")),
                )?));
            servers.push(ns[srv].spawn_command(c)?);
            wait_ports.push((srv.clone(), port));
        }
    }
    if !wait_ports.is_empty() {
        progress.note("waiting for the servers");
    }
    for (si, (h, port)) in wait_ports.iter().enumerate() {
        let deadline = StdInstant::now() + StdDuration::from_secs(10);
        while !listening(&ns[h], *port) {
            if signals::requested() {
                bail!("interrupted");
            }
            if !servers[si].is_running() {
                bail!(
                    "the server on {h} (port {port}) exited at start; see {}",
                    logs.display()
                );
            }
            if StdInstant::now() > deadline {
                bail!("server on {h}: port {port} not listening after 10 s");
            }
            std::thread::sleep(StdDuration::from_millis(20));
        }
    }

    // Captures (switch side): the bottleneck port, and the CNMs sent towards the first
    // flow's source.
    let bn = sc.bottleneck().and_then(|b| shape.link_index(&b));
    let mut captures: Vec<Child> = Vec::new();
    if opts.capture {
        let mut wanted: Vec<(super::shape::End, PathBuf, Option<String>)> = Vec::new();
        if let Some(li) = bn {
            wanted.push((shape.links[li].a.clone(), dir.join("bottleneck.pcap"), None));
        }
        if let Some(f) = sc.topo.flow.first() {
            if let Some(li) = shape.uplink(&f.src) {
                let l = &shape.links[li];
                let end = if l.a.node == f.src { &l.b } else { &l.a };
                if shape.is_switch(&end.node) {
                    // What the switch sends to the source: its CNMs (and floods). A filter on
                    // the source address, not on the EtherType, so that a VLAN tag in the
                    // packet metadata cannot hide a CNM.
                    if let Some(m) = macs.get(&f.src) {
                        wanted.push((
                            end.clone(),
                            dir.join("cnms.pcap"),
                            Some(format!("not ether src {m}")),
                        ));
                    }
                }
            }
        }
        for (i, (end, pcap, filter)) in wanted.iter().enumerate() {
            let mut c = ns[&end.node].command("tshark")?;
            c.env(RUN_ENV, lab.prefix())
                .args(["-q", "-F", "pcap", "-i", &end.port, "-s", "256"]);
            if let Some(f) = filter {
                c.arg("-f").arg(f);
            }
            c.arg("-w")
                .arg(pcap)
                .stdout(Stdio::null())
                .stderr(Stdio::from(std::fs::File::create(
                    logs.join(format!("tshark-{i}.log")),
                )?));
            captures.push(ns[&end.node].spawn_command(c)?);
        }
        let deadline = StdInstant::now() + StdDuration::from_secs(10);
        while !wanted.iter().all(|w| w.1.exists())
            && StdInstant::now() < deadline
            && !signals::requested()
        {
            std::thread::sleep(StdDuration::from_millis(50));
        }
        // dumpcap starts capturing just after it creates the file.
        std::thread::sleep(StdDuration::from_millis(300));
    }
    let settle = sc
        .meta
        .netns
        .settle
        .unwrap_or(Duration::from_millis(300))
        .to_std();
    if signals::sleep_or_interrupted(settle) {
        bail!("interrupted");
    }

    // The schedule.
    let mut actions: Vec<(f64, Action)> = Vec::new();
    for (i, f) in sc.topo.flow.iter().enumerate() {
        actions.push((k.at(f.start), Action::StartFlow(i)));
    }
    for (j, inc) in sc.topo.incast.iter().enumerate() {
        actions.push((k.at(inc.start), Action::StartIncast(j)));
    }
    for ev in &sc.topo.event {
        use crate::sim::topo::{DirSpec, EventKind};
        let Ok(EventKind::Link { link, dir, rate }) = ev.kind() else {
            continue;
        };
        let Some(li) = shape.link_index(link) else {
            continue;
        };
        let l = &shape.links[li];
        let ends: Vec<&super::shape::End> = match dir {
            DirSpec::AToB => vec![&l.a],
            DirSpec::BToA => vec![&l.b],
            DirSpec::Both => vec![&l.a, &l.b],
        };
        for e in ends {
            if shape.is_switch(&e.node) {
                actions.push((
                    k.at(ev.at),
                    Action::SetRate {
                        switch: e.node.clone(),
                        port: e.port.clone(),
                        rate: crate::scenario::scale_rate(rate, k.rate_div),
                    },
                ));
            } else {
                actions.push((
                    k.at(ev.at),
                    Action::SetHostRate {
                        host: e.node.clone(),
                        rate: crate::scenario::scale_rate(rate, k.rate_div),
                    },
                ));
            }
        }
    }
    actions.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut next_action = 0;
    // CP/RP parameter events: control commands at their time (see super::events).
    let mut params = super::events::ParamEvents::new(sc, &shape, k)?;
    // A tcp/udp flow's reaction points are its source's TAP agent: host events go there.
    let gen_ctl = |f: usize| {
        if kinds.get(f).is_some_and(FlowKind::is_ip) {
            sock_dir
                .0
                .join(format!("agent-{}.ctl", sc.topo.flow[f].src))
        } else {
            super::events::gen_ctl(&sock_dir.0, sc, f)
        }
    };
    let mut gens: Vec<GenProc> = Vec::new();
    let mut iperfs: Vec<ClientProc> = Vec::new();
    let mut incasts: Vec<ClientProc> = Vec::new();
    // Each TAP agent's CNMs go to the first flow it sources (an incast server's: `incast`).
    let mut cnm_flow: BTreeMap<String, String> = BTreeMap::new();
    for (i, (f, kind)) in sc.topo.flow.iter().zip(&kinds).enumerate() {
        if kind.is_ip() && !cnm_flow.contains_key(&f.src) {
            let name = f.name.clone().unwrap_or_else(|| format!("f{i}"));
            cnm_flow.insert(f.src.clone(), name);
        }
    }
    for inc in &sc.topo.incast {
        for srv in &inc.servers {
            cnm_flow
                .entry(srv.clone())
                .or_insert_with(|| "incast".into());
        }
    }
    let bn_switch = bn.map(|li| {
        let e = &shape.links[li].a;
        (e.node.clone(), e.port.clone())
    });
    let bn_ctl = bn_switch
        .as_ref()
        .and_then(|(sw, _)| switches.iter().find(|s| &s.0 == sw).map(|s| s.2.clone()));
    let t0 = StdInstant::now();
    let t0_mono = cnm_proto::phy::clock::now().as_nanos();
    let mut cpu_prev = cpu_jiffies();
    let mut proc_prev: Vec<Option<u64>> = switches.iter().map(|s| proc_jiffies(s.1.id())).collect();
    let mut bn_prev: Option<(f64, u64)> = None;
    let mut last_sample = 0.0;
    progress.note("");
    loop {
        let now = t0.elapsed().as_secs_f64();
        if signals::requested() {
            bail!("interrupted");
        }
        while next_action < actions.len() && actions[next_action].0 <= now {
            match &actions[next_action].1 {
                Action::StartIncast(j) => {
                    let inc = &sc.topo.incast[*j];
                    let out = dir.join(format!("incast-{j}.jsonl"));
                    let mut c = ns[&inc.client].command(&testbed_exe)?;
                    c.env(RUN_ENV, lab.prefix()).arg("incast-client");
                    for (kx, srv) in inc.servers.iter().enumerate() {
                        let port = incast::BASE_PORT + (100 * *j + kx) as u16;
                        let ip = ip_of(srv).unwrap_or_default();
                        c.arg("--server").arg(format!("{ip}:{port}"));
                    }
                    let dur = (span - now).max(0.0);
                    c.arg("--sru")
                        .arg(inc.sru.to_string())
                        .arg("--rounds")
                        .arg(inc.rounds.to_string())
                        .arg("--duration")
                        .arg(format!("{}ms", (dur * 1000.0) as u64))
                        .stdout(Stdio::from(std::fs::File::create(&out)?))
                        .stderr(Stdio::from(std::fs::File::create(
                            logs.join(format!("incast-client-{j}.log")),
                        )?));
                    let child = ns[&inc.client].spawn_command(c)?;
                    incasts.push(ClientProc {
                        index: *j,
                        child,
                        started_s: t0.elapsed().as_secs_f64(),
                        ends_s: span,
                        out,
                    });
                }
                Action::StartFlow(i) if kinds[*i].is_ip() => {
                    let f = &sc.topo.flow[*i];
                    let name = f.name.clone().unwrap_or_else(|| format!("f{i}"));
                    let stop = f.stop.map_or(span, |x| k.at(x));
                    // iperf3 takes whole seconds.
                    let secs = ((stop - now).max(0.0).floor() as u64).max(1);
                    let port = iperf::BASE_PORT + *i as u16;
                    let out = dir.join(format!("iperf-{name}.json"));
                    let mut c = ns[&f.src].command("iperf3")?;
                    c.env(RUN_ENV, lab.prefix())
                        .arg("-c")
                        .arg(ip_of(&f.dst).unwrap_or_default())
                        .args(["-p", &port.to_string(), "-J", "--get-server-output"])
                        .args(["-t", &secs.to_string(), "-i", &iperf_interval]);
                    if let FlowKind::Udp(r) = kinds[*i] {
                        let (app, len) = iperf::udp_app_rate(k.rate(r), f.frame_len);
                        c.args(["-u", "-b", &format!("{}", app.round() as u64)])
                            .args(["-l", &len.to_string()]);
                    }
                    c.stdout(Stdio::from(std::fs::File::create(&out)?))
                        .stderr(Stdio::from(std::fs::File::create(
                            logs.join(format!("iperf-{name}.log")),
                        )?));
                    let child = ns[&f.src].spawn_command(c)?;
                    let started_s = t0.elapsed().as_secs_f64();
                    iperfs.push(ClientProc {
                        index: *i,
                        child,
                        started_s,
                        ends_s: started_s + secs as f64,
                        out,
                    });
                }
                Action::StartFlow(i) => {
                    let f = &sc.topo.flow[*i];
                    let name = f.name.clone().unwrap_or_else(|| format!("f{i}"));
                    let stop = f.stop.map_or(span, |x| k.at(x));
                    let dur = (stop - k.at(f.start)).max(0.0);
                    // Not reached for tcp/udp flows (the arm above takes them).
                    let pattern = match kinds[*i] {
                        FlowKind::Gen(p) => p,
                        _ => Pattern::Greedy,
                    };
                    let uplink_rate = shape
                        .uplink(&f.src)
                        .map(|li| sc.topo.link[li].rate)
                        .unwrap_or(Rate::from_gbps(1));
                    let cfg = super::events::agent_config_at(sc, &f.src, uplink_rate, k, f.start)?;
                    let cfg_path = dir.join(format!("rp-agent-{name}.toml"));
                    std::fs::write(&cfg_path, cfg)?;
                    let out = dir.join(format!("gen-{name}.jsonl"));
                    let dst = macs.get(&f.dst).map(|m| m.to_string()).unwrap_or_default();
                    let mut c = ns[&f.src].command(&bins.rp_agent)?;
                    c.env(RUN_ENV, lab.prefix())
                        .args(["gen", "--uplink", "eth0", "--dst", &dst, "--pattern"])
                        .arg(scaled_pattern(&pattern, k.rate_div))
                        .arg("--size")
                        .arg(f.frame_len.to_string())
                        .arg("--duration")
                        .arg(format!("{}ms", (dur * 1000.0).round() as u64))
                        .args(["--interval", &interval_arg, "--json", "--seed"])
                        .arg((seed.wrapping_mul(1000) + *i as u64 + 1).to_string())
                        .arg("--config")
                        .arg(&cfg_path)
                        .arg("--ctl")
                        .arg(gen_ctl(*i))
                        .stdout(Stdio::from(std::fs::File::create(&out)?))
                        .stderr(Stdio::from(std::fs::File::create(
                            logs.join(format!("gen-{name}.log")),
                        )?));
                    let child = ns[&f.src].spawn_command(c)?;
                    gens.push(GenProc {
                        flow: *i,
                        child,
                        started_s: t0.elapsed().as_secs_f64(),
                        out,
                    });
                }
                Action::SetRate { switch, port, rate } => {
                    if let Some(s) = switches.iter().find(|s| &s.0 == switch) {
                        if let Err(e) = ctl(&s.2, &format!("set rate {port} {rate}")) {
                            run.warnings
                                .push(format!("rate change on {switch}/{port}: {e}"));
                        }
                    }
                }
                Action::SetHostRate { host, rate } => {
                    // Every agent sending from the host: its generators and its TAP agent.
                    let mut socks: Vec<PathBuf> = sc
                        .topo
                        .flow
                        .iter()
                        .enumerate()
                        .filter(|(_, f)| &f.src == host)
                        .map(|(i, _)| gen_ctl(i))
                        .collect();
                    socks.push(sock_dir.0.join(format!("agent-{host}.ctl")));
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
                            "rate change on {host}'s uplink at {:.3} s: no agent of {host} was \
                             running (agents that start later start at the new rate)",
                            now
                        ));
                    }
                }
            }
            next_action += 1;
        }
        let switch_ctl = |n: &str| switches.iter().find(|s| s.0 == n).map(|s| s.2.clone());
        params.fire(now, &switch_ctl, &gen_ctl, &mut run.warnings);
        if now - last_sample >= 0.25 {
            last_sample = now;
            let c = cpu_jiffies();
            if let (Some((b0, t0j)), Some((b1, t1j))) = (cpu_prev, c) {
                if t1j > t0j {
                    run.fidelity.cpu.push((
                        "all CPUs".into(),
                        now,
                        (b1 - b0) as f64 / (t1j - t0j) as f64,
                    ));
                }
            }
            cpu_prev = c;
            for (i, s) in switches.iter().enumerate() {
                let j = proc_jiffies(s.1.id());
                if let (Some(a), Some(b)) = (proc_prev[i], j) {
                    run.fidelity.cpu.push((
                        format!("cp-switch {}", s.0),
                        now,
                        (b.saturating_sub(a)) as f64 / USER_HZ / 0.25,
                    ));
                }
                proc_prev[i] = j;
            }
            if let (Some(p), Some((_, port))) = (&bn_ctl, &bn_switch) {
                if let Ok(v) = ctl(p, "stats") {
                    let tx = v["ports"]
                        .as_array()
                        .and_then(|ps| ps.iter().find(|x| x["name"] == port.as_str()))
                        .and_then(|x| x["tx_bytes"].as_u64());
                    if let Some(tx) = tx {
                        if let Some((tp, bp)) = bn_prev {
                            if now > tp {
                                if let Some(b) = run.bottlenecks.first_mut() {
                                    b.tx_samples.push((
                                        now,
                                        tx.saturating_sub(bp) as f64 * 8.0 / (now - tp),
                                    ));
                                }
                            }
                        }
                        bn_prev = Some((now, tx));
                    }
                }
            }
            for (sw, child, _, log) in &mut switches {
                if !child.is_running() {
                    bail!("cp-switch {sw} died during the run:\n{}", tail(log, 10));
                }
            }
            for st in &mut stacks {
                if let Ok(v) = ctl(&st.ctl, "stats") {
                    let n = v["cnm_rx"].as_u64().unwrap_or(0);
                    if n > st.cnm_prev {
                        if let Some(fs) = cnm_flow.get(&st.name).and_then(|f| run.flow_mut(f)) {
                            fs.push_cnm_count(now, n - st.cnm_prev);
                        }
                    }
                    st.cnm_prev = st.cnm_prev.max(n);
                }
                if !st.agent.is_running() {
                    bail!(
                        "rp-agent (TAP) on {} died during the run:\n{}",
                        st.name,
                        tail(&logs.join(format!("rp-agent-tap-{}.log", st.name)), 10)
                    );
                }
            }
        }
        progress.set(now.min(span));
        if now >= span {
            break;
        }
        std::thread::sleep(StdDuration::from_millis(10));
    }
    progress.note("collecting");
    // Generators stop by themselves (--duration) and drain for up to 1 s.
    let deadline = StdInstant::now() + StdDuration::from_secs(3);
    for g in &mut gens {
        while g.child.is_running() && StdInstant::now() < deadline {
            if signals::sleep_or_interrupted(StdDuration::from_millis(20)) {
                bail!("interrupted");
            }
        }
        let _ = g.child.stop(StdDuration::from_secs(2));
    }
    // iperf3 clients end by themselves (-t) and then fetch the server's report; incast
    // clients start no round after their duration (one may still be running).
    for c in iperfs.iter_mut().chain(incasts.iter_mut()) {
        let deadline = t0 + StdDuration::from_secs_f64(c.ends_s.max(span) + 5.0);
        while c.child.is_running() && StdInstant::now() < deadline {
            if signals::sleep_or_interrupted(StdDuration::from_millis(20)) {
                bail!("interrupted");
            }
        }
        let _ = c.child.stop(StdDuration::from_secs(2));
    }
    for mut c in servers.drain(..) {
        let _ = c.stop(StdDuration::from_secs(2));
    }
    for (_, child, _, stop_s) in &mut sinks {
        *stop_s = t0.elapsed().as_secs_f64();
        let _ = child.stop(StdDuration::from_secs(3));
    }
    for mut c in captures.drain(..) {
        let _ = c.stop(StdDuration::from_secs(3));
    }
    let mut final_stats = BTreeMap::new();
    for (sw, _, ctl_path, _) in &switches {
        if let Ok(v) = ctl(ctl_path, "stats") {
            std::fs::write(
                dir.join(format!("stats-{sw}.json")),
                serde_json::to_string_pretty(&v)?,
            )?;
            final_stats.insert(sw.clone(), v);
        }
    }
    for st in &mut stacks {
        if let Ok(v) = ctl(&st.ctl, "stats") {
            std::fs::write(
                dir.join(format!("stats-agent-{}.json", st.name)),
                serde_json::to_string_pretty(&v)?,
            )?;
        }
        let _ = st.agent.stop(StdDuration::from_secs(3));
    }
    for (_, child, _, _) in &mut switches {
        let _ = child.stop(StdDuration::from_secs(3));
    }
    progress.finish();
    collect_iperf(sc, &mut run, &iperfs);
    collect_incast(sc, &mut run, &incasts);

    collect(
        sc,
        &shape,
        k,
        &mut run,
        dir,
        &gens,
        &sinks,
        &final_stats,
        t0_mono,
        &bn_switch,
    );
    drop(switches);
    drop(sinks);
    drop(gens);
    drop(stacks);
    lab.teardown()
        .map_err(|e| anyhow::anyhow!("teardown: {e}"))?;
    Ok(run)
}

/// iperf3 reports: each flow's goodput series (the receiver's intervals, anchored at the
/// client's start), the client's sending rate as `offered_bps`, retransmissions and losses as
/// notes.
fn collect_iperf(sc: &Scenario, run: &mut RunData, clients: &[ClientProc]) {
    for c in clients {
        let f = &sc.topo.flow[c.index];
        let name = f.name.clone().unwrap_or_else(|| format!("f{}", c.index));
        let text = std::fs::read_to_string(&c.out).unwrap_or_default();
        let r = match iperf::parse_report(&text) {
            Ok(r) => r,
            Err(e) => {
                run.warnings.push(format!("flow {name}: {e}"));
                continue;
            }
        };
        let mut note = format!(
            "flow {name}: iperf3 {} goodput {:.2} Mb/s ({} octets received, {} sent)",
            r.protocol,
            r.goodput_bps() / 1e6,
            r.received_bytes,
            r.sent_bytes
        );
        if let Some(x) = r.retransmits {
            note.push_str(&format!(", {x} retransmissions"));
        }
        if let (Some(l), Some(p)) = (r.lost_packets, r.packets) {
            note.push_str(&format!(", {l} of {p} datagrams lost"));
        }
        run.warnings.push(note);
        if let Some(fs) = run.flow_mut(&name) {
            for &(a, b, bytes) in &r.intervals {
                fs.push_interval(c.started_s + a, c.started_s + b, Bytes::new(bytes));
            }
            fs.offered_bps = Some(r.sent_bps());
        }
    }
}

/// Incast clients: the `incast` flow's goodput per round, rounds and octets per server as a
/// note (and `incast-N.jsonl` in the results directory).
fn collect_incast(sc: &Scenario, run: &mut RunData, clients: &[ClientProc]) {
    for c in clients {
        let text = std::fs::read_to_string(&c.out).unwrap_or_default();
        let r = incast::parse_client_output(&text);
        let inc = &sc.topo.incast[c.index];
        if let Some(fs) = run.flow_mut("incast") {
            for x in &r.rounds {
                fs.push_interval(
                    c.started_s + x.start_s,
                    c.started_s + x.start_s + x.secs,
                    Bytes::new(x.bytes),
                );
            }
        }
        let times: Vec<String> = r
            .rounds
            .iter()
            .map(|x| format!("{:.1}", x.secs * 1000.0))
            .collect();
        run.warnings.push(format!(
            "incast {}: {} servers, SRU {}, {} rounds completed, goodput {:.2} Mb/s; \
             round times (ms): [{}]; octets per server: {:?}{}",
            c.index,
            inc.servers.len(),
            inc.sru,
            r.rounds.len(),
            r.goodput_bps() / 1e6,
            times.join(", "),
            r.per_server,
            r.error.map(|e| format!("; error: {e}")).unwrap_or_default()
        ));
    }
}

fn read_json_lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn collect(
    sc: &Scenario,
    shape: &Shape,
    k: Scaling,
    run: &mut RunData,
    dir: &Path,
    gens: &[GenProc],
    sinks: &[(String, Child, PathBuf, f64)],
    stats: &BTreeMap<String, Value>,
    t0_mono: u64,
    bn: &Option<(String, String)>,
) {
    let macs = sc.topo.host_macs();
    let name_of = |i: usize| {
        sc.topo.flow[i]
            .name
            .clone()
            .unwrap_or_else(|| format!("f{i}"))
    };
    // Generators: offered rate, current rate of the limiter, CNMs.
    for g in gens {
        let f = &sc.topo.flow[g.flow];
        let name = name_of(g.flow);
        let lines = read_json_lines(&g.out);
        let line_rate = shape
            .uplink(&f.src)
            .map(|li| k.rate(sc.topo.link[li].rate))
            .unwrap_or(0.0);
        let pattern: Option<Pattern> = f.pattern.parse().ok();
        let mut cnm_prev = 0u64;
        let mut bp_prev = 0u64;
        let (mut want_sum, mut secs_sum) = (0.0, 0.0);
        let mut pacing = Vec::new();
        let Some(fs) = run.flow_mut(&name) else {
            continue;
        };
        for v in &lines {
            let secs = v["secs"].as_f64().unwrap_or(0.0);
            match v["type"].as_str() {
                Some("interval") => {
                    let t = g.started_s + v["start"].as_f64().unwrap_or(0.0) + secs;
                    let cnm = v["cnm_rx"].as_u64().unwrap_or(0);
                    if cnm > cnm_prev {
                        fs.push_cnm_count(t, cnm - cnm_prev);
                    }
                    cnm_prev = cnm;
                    let bps = v["bps"].as_f64().unwrap_or(0.0);
                    // A greedy generator is short when it left the agent's queue empty
                    // (no backpressure in the interval) while sending below the limiter's
                    // rate (or the line rate when no limiter is engaged).
                    let bp = v["backpressure"].as_u64().unwrap_or(0);
                    let pressed = bp > bp_prev;
                    bp_prev = bp;
                    // Any generator held back by its reaction point (the agent's queue full:
                    // backpressure) sent what the loop allowed; that is the experiment
                    // working, not a shortfall. Otherwise a patterned generator owes its
                    // pattern's rate, capped by the limiter and the line.
                    let cap = v["cr_bps"].as_f64().unwrap_or(line_rate).min(line_rate);
                    let want = match pattern {
                        _ if pressed => bps,
                        Some(Pattern::Greedy) | None => cap,
                        Some(Pattern::Cbr(r))
                        | Some(Pattern::OnOff { rate: r, .. })
                        | Some(Pattern::Poisson { rate: r, .. }) => k.rate(r).min(cap),
                    };
                    want_sum += want * secs;
                    secs_sum += secs;
                    // Pacing of a CBR generator, measured where nothing else set its pace.
                    if let Some(Pattern::Cbr(r)) = pattern {
                        let r = k.rate(r);
                        if !pressed && r > 0.0 && r <= cap {
                            pacing.push(((bps - r) / r).abs());
                        }
                    }
                }
                Some("summary") => {
                    fs.offered_bps = v["bps"].as_f64();
                }
                _ => {}
            }
        }
        if secs_sum > 0.0 {
            fs.intended_bps = Some(want_sum / secs_sum);
        }
        if !pacing.is_empty() {
            let e = pacing.iter().sum::<f64>() / pacing.len() as f64;
            run.fidelity.pacing_error.push((name.clone(), e));
        }
    }
    // Sinks: received throughput per flow; the reports are anchored at the sink's first frame
    // (its summary's `secs` before the stop) and follow each other by their `secs`.
    let mut lost_total = 0u64;
    for (host, _, out, stop_s) in sinks {
        let lines = read_json_lines(out);
        let span = lines
            .iter()
            .filter(|v| v["type"] == "summary")
            .filter_map(|v| v["secs"].as_f64())
            .fold(0.0, f64::max);
        let first_frame = stop_s - span;
        let mut t = first_frame;
        let mut group_secs = None::<f64>;
        let mut seen: Vec<(String, u64)> = Vec::new();
        for v in &lines {
            let key = (
                v["src"].as_str().unwrap_or("").to_ascii_lowercase(),
                v["flow"].as_u64().unwrap_or(0),
            );
            match v["type"].as_str() {
                Some("interval") => {
                    let secs = v["secs"].as_f64().unwrap_or(0.0);
                    if group_secs != Some(secs) || seen.contains(&key) {
                        t += secs;
                        group_secs = Some(secs);
                        seen.clear();
                    }
                    seen.push(key.clone());
                    let flow = sc.topo.flow.iter().enumerate().find(|(_, f)| {
                        &f.dst == host
                            && macs
                                .get(&f.src)
                                .is_some_and(|m| m.to_string().to_ascii_lowercase() == key.0)
                    });
                    if let Some((i, _)) = flow {
                        if let Some(fs) = run.flow_mut(&name_of(i)) {
                            fs.push_interval(
                                t - secs,
                                t,
                                Bytes::new(v["bytes"].as_u64().unwrap_or(0)),
                            );
                        }
                    }
                }
                Some("summary") => lost_total += v["lost"].as_u64().unwrap_or(0),
                _ => {}
            }
        }
    }
    // Frames the sinks missed that no switch dropped were lost in the kernel.
    let switch_drops: u64 = stats
        .values()
        .filter_map(|v| v["ports"].as_array())
        .flatten()
        .filter_map(|p| p["drops"].as_u64())
        .sum();
    if lost_total > switch_drops {
        run.fidelity.unexpected_drops.push((
            "outside the switches (veth, sockets)".into(),
            lost_total - switch_drops,
        ));
    }
    // Traces.
    for sw in &shape.switches {
        let p = dir.join(format!("trace-{sw}.jsonl"));
        if p.exists() {
            let t = read_trace_file(
                &p,
                &TraceOptions {
                    node: Some(sw.clone()),
                    t0_ns: t0_mono,
                },
            );
            run.absorb(t);
        }
    }
    if let (Some((sw, port)), Some(b)) = (bn, run.bottlenecks.first_mut()) {
        let st = stats.get(sw);
        let p = st
            .and_then(|v| v["ports"].as_array())
            .and_then(|ps| ps.iter().find(|x| x["name"] == port.as_str()));
        let idx = p.and_then(|x| x["index"].as_u64()).map(|i| i.to_string());
        let mut ports = vec![port.clone()];
        ports.extend(idx);
        let refs: Vec<&str> = ports.iter().map(String::as_str).collect();
        *b = b.clone().events_from(Some(sw), &refs);
        b.drops = p.and_then(|x| x["drops"].as_u64());
        b.pause_tx = st.and_then(|v| v["ports"].as_array()).map(|ps| {
            ps.iter()
                .filter_map(|x| x["pause_tx"].as_u64())
                .sum::<u64>()
        });
    }
    run.cnm_from_trace = false;
    run.warnings.push(format!(
        "netns run at time scale S = {} (rates ÷ S, loop times × S), schedule × {:.3}",
        k.rate_div, k.sched_mul
    ));
}
