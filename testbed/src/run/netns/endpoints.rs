//! The traffic endpoints of a netns run, besides the sinks: per flow an `rp-agent gen` (raw
//! frames) or an `iperf3` client (`tcp`, `udp:R`) started at the flow's time, their `iperf3`
//! servers, and the incast servers and clients ([`crate::run::incast`]) started by the
//! testbed's own executable.
//!
//! * A generator runs with `--duration` = its flow's active span, `--ctl` (parameter events
//!   reach it there) and the agent configuration of its host at its start time
//!   ([`super::config::agent_config_at`]); in the run's `rp-agent hosts` process
//!   ([`HostProc`], `start gen ...` with the same options, its socket opened in the source's
//!   namespace; its start is the instant the process answers with), or as its own process.
//! * An iperf3 client takes whole seconds (`-t`): a TCP/UDP flow's span is rounded down (at
//!   least 1 s). Its server runs `-1 -J` on port [`crate::run::iperf::BASE_PORT`] + flow index.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;

use anyhow::{bail, Context};
use rp_agent::gen::Pattern;

use super::config::{agent_config_at, scaled_pattern, uplink_rate};
use super::daemons::{netns_word, wait_ready, HostProc, NotReady};
use super::setup::{Setup, RUN_ENV};
use crate::netns::{Child, Namespace};
use crate::run::{incast, iperf};
use crate::sim::topo::FlowKind;

/// A running generator.
#[derive(Debug)]
pub struct GenProc {
    /// Flow index.
    pub flow: usize,
    /// Its own process (`None`: it runs in the [`HostProc`]).
    pub child: Option<Child>,
    /// When it started (seconds of the schedule).
    pub started_s: f64,
    /// Its JSON document (written when it stops).
    pub out: PathBuf,
}

/// An iperf3 client or incast client: what it writes and when it started.
#[derive(Debug)]
pub struct ClientProc {
    /// Flow index (iperf3) or incast index.
    pub index: usize,
    /// The process.
    pub child: Child,
    /// When it started (seconds of the schedule).
    pub started_s: f64,
    /// Latest moment it should have finished by itself (seconds of the schedule).
    pub ends_s: f64,
    /// Its output.
    pub out: PathBuf,
}

/// Whether a TCP port listens in `ns`.
fn listening(ns: &Namespace, port: u16) -> bool {
    ns.exec(&["ss", "-Hltn"])
        .map(|o| o.lines().any(|l| l.contains(&format!(":{port} "))))
        .unwrap_or(false)
}

/// The iperf3 server of every TCP/UDP flow and the servers of every incast, once each
/// listens.
pub fn start_servers(st: &Setup) -> anyhow::Result<Vec<Child>> {
    let mut servers: Vec<Child> = Vec::new();
    let mut wait_ports: Vec<(String, u16)> = Vec::new();
    for (i, (f, kind)) in st.sc.topo.flow.iter().zip(&st.kinds).enumerate() {
        if !kind.is_ip() {
            continue;
        }
        let name = st.flow_name(i);
        let port = iperf::BASE_PORT + i as u16;
        let mut c = st.ns[&f.dst].command("iperf3")?;
        c.env(RUN_ENV, &st.prefix)
            .args(["-s", "-1", "-J", "-p", &port.to_string()])
            .args(["-i", &st.iperf_interval])
            .stdout(Stdio::from(std::fs::File::create(
                st.dir.join(format!("iperf-server-{name}.json")),
            )?))
            .stderr(Stdio::from(std::fs::File::create(
                st.logs.join(format!("iperf-server-{name}.log")),
            )?));
        servers.push(st.ns[&f.dst].spawn_command(c)?);
        wait_ports.push((f.dst.clone(), port));
    }
    for (j, inc) in st.sc.topo.incast.iter().enumerate() {
        for (kx, srv) in inc.servers.iter().enumerate() {
            let port = incast::BASE_PORT + (100 * j + kx) as u16;
            let mut c = st.ns[srv].command(&st.testbed_exe)?;
            c.env(RUN_ENV, &st.prefix)
                .args(["incast-server", "--port", &port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::from(std::fs::File::create(
                    st.logs.join(format!("incast-server-{srv}.log")),
                )?));
            servers.push(st.ns[srv].spawn_command(c)?);
            wait_ports.push((srv.clone(), port));
        }
    }
    for (server, (h, port)) in servers.iter_mut().zip(&wait_ports) {
        match wait_ready(server, || listening(&st.ns[h], *port))? {
            Ok(()) => {}
            Err(NotReady::Exited) => bail!(
                "the server on {h} (port {port}) exited at start; see {}",
                st.logs.display()
            ),
            Err(NotReady::Silent) => {
                bail!("server on {h}: port {port} not listening after 10 s")
            }
        }
    }
    Ok(servers)
}

/// Starts incast `j`'s client at `now` (seconds of the schedule); `ip_of` gives a stack
/// host's address.
pub fn start_incast(
    st: &Setup,
    j: usize,
    now: f64,
    ip_of: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<ClientProc> {
    let inc = &st.sc.topo.incast[j];
    let out = st.dir.join(format!("incast-{j}.jsonl"));
    let mut c = st.ns[&inc.client].command(&st.testbed_exe)?;
    c.env(RUN_ENV, &st.prefix).arg("incast-client");
    for (kx, srv) in inc.servers.iter().enumerate() {
        let port = incast::BASE_PORT + (100 * j + kx) as u16;
        let ip = ip_of(srv).unwrap_or_default();
        c.arg("--server").arg(format!("{ip}:{port}"));
    }
    let dur = (st.span - now).max(0.0);
    c.arg("--sru")
        .arg(inc.sru.to_string())
        .arg("--rounds")
        .arg(inc.rounds.to_string())
        .arg("--duration")
        .arg(format!("{}ms", (dur * 1000.0) as u64))
        .stdout(Stdio::from(std::fs::File::create(&out)?))
        .stderr(Stdio::from(std::fs::File::create(
            st.logs.join(format!("incast-client-{j}.log")),
        )?));
    let child = st.ns[&inc.client].spawn_command(c)?;
    Ok(ClientProc {
        index: j,
        child,
        started_s: st.elapsed(),
        ends_s: st.span,
        out,
    })
}

/// Starts the iperf3 client of TCP/UDP flow `i` at `now`.
pub fn start_iperf(
    st: &Setup,
    i: usize,
    now: f64,
    ip_of: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<ClientProc> {
    let f = &st.sc.topo.flow[i];
    let name = st.flow_name(i);
    let stop = f.stop.map_or(st.span, |x| st.k.at(x));
    // iperf3 takes whole seconds.
    let secs = ((stop - now).max(0.0).floor() as u64).max(1);
    let port = iperf::BASE_PORT + i as u16;
    let out = st.dir.join(format!("iperf-{name}.json"));
    let mut c = st.ns[&f.src].command("iperf3")?;
    c.env(RUN_ENV, &st.prefix)
        .arg("-c")
        .arg(ip_of(&f.dst).unwrap_or_default())
        .args(["-p", &port.to_string(), "-J", "--get-server-output"])
        .args(["-t", &secs.to_string(), "-i", &st.iperf_interval]);
    if let FlowKind::Udp(r) = st.kinds[i] {
        let (app, len) = iperf::udp_app_rate(st.k.rate(r), f.frame_len);
        c.args(["-u", "-b", &format!("{}", app.round() as u64)])
            .args(["-l", &len.to_string()]);
    }
    c.stdout(Stdio::from(std::fs::File::create(&out)?))
        .stderr(Stdio::from(std::fs::File::create(
            st.logs.join(format!("iperf-{name}.log")),
        )?));
    let child = st.ns[&f.src].spawn_command(c)?;
    let started_s = st.elapsed();
    Ok(ClientProc {
        index: i,
        child,
        started_s,
        ends_s: started_s + secs as f64,
        out,
    })
}

/// Starts the generator of flow `i`, with its control socket `ctl`: in the hosts process
/// `hosts` when given, else as its own `rp-agent gen`.
pub fn start_gen(
    st: &Setup,
    i: usize,
    ctl: PathBuf,
    hosts: Option<&HostProc>,
) -> anyhow::Result<GenProc> {
    let f = &st.sc.topo.flow[i];
    let name = st.flow_name(i);
    let stop = f.stop.map_or(st.span, |x| st.k.at(x));
    let dur = (stop - st.k.at(f.start)).max(0.0);
    // Only generator flows come here; the others run iperf3.
    let pattern = match st.kinds[i] {
        FlowKind::Gen(p) => p,
        _ => Pattern::Greedy,
    };
    let line = uplink_rate(&st.sc, &st.graph, &f.src);
    let cfg = agent_config_at(&st.sc, &f.src, line, st.k, f.start)?;
    let cfg_name = format!("rp-agent-{name}.toml");
    std::fs::write(st.dir.join(&cfg_name), cfg)?;
    let out_name = format!("gen-{name}.json");
    let out = st.dir.join(&out_name);
    let dst = st
        .macs
        .get(&f.dst)
        .map(|m| m.to_string())
        .unwrap_or_default();
    let args: Vec<OsString> = vec![
        "--uplink".into(),
        "eth0".into(),
        "--dst".into(),
        dst.into(),
        "--pattern".into(),
        scaled_pattern(&pattern, st.k.rate_div).into(),
        "--size".into(),
        f.frame_len.to_string().into(),
        "--duration".into(),
        format!("{}ms", (dur * 1000.0).round() as u64).into(),
        "--interval".into(),
        st.interval_arg.clone().into(),
        "--json".into(),
        "--seed".into(),
        (st.seed.wrapping_mul(1000) + i as u64 + 1)
            .to_string()
            .into(),
        "--config".into(),
        // The hosts process works in the results directory.
        if hosts.is_some() {
            cfg_name.into()
        } else {
            st.dir.join(&cfg_name).into_os_string()
        },
        "--ctl".into(),
        ctl.into_os_string(),
    ];
    if let Some(hp) = hosts {
        let mut words = vec![
            "start".to_string(),
            "gen".into(),
            netns_word(st, &f.src),
            out_name,
        ];
        for a in args {
            match a.into_string() {
                Ok(a) => words.push(a),
                Err(a) => bail!("{a:?}: not UTF-8; set [scenario.netns] hosts = \"per-process\""),
            }
        }
        let started_s = hp
            .start_host(st, &words)
            .with_context(|| format!("the generator of {name}"))?;
        return Ok(GenProc {
            flow: i,
            child: None,
            started_s,
            out,
        });
    }
    let mut c = st.ns[&f.src].command(&st.bins.rp_agent)?;
    c.env(RUN_ENV, &st.prefix)
        .arg("gen")
        .args(args)
        .stdout(Stdio::from(std::fs::File::create(&out)?))
        .stderr(Stdio::from(std::fs::File::create(
            st.logs.join(format!("gen-{name}.log")),
        )?));
    let child = st.ns[&f.src].spawn_command(c)?;
    Ok(GenProc {
        flow: i,
        child: Some(child),
        started_s: st.elapsed(),
        out,
    })
}
