//! TCP incast with synchronized reads on real sockets (netns mode of `[[incast]]`).
//!
//! # Source
//! The incast setting of the FQCN paper (QCN-REFERENCE §5) after Phanishayee et al. (FAST
//! 2008): a client reads one Server Request Unit (SRU) from each of N servers at the same
//! moment and starts the next round only when every server has answered, so the round time is
//! that of the slowest server, and one server stuck in a retransmission timeout (Linux's
//! RTOmin is 200 ms, the paper's value) idles the bottleneck for the rest of the round.
//! Goodput = `N × SRU × 8 / round time`.
//!
//! # Endpoints
//! Two hidden subcommands of `testbed`, run inside the namespaces over the hosts' `rp-agent`
//! TAPs (so the agents' reaction points shape every server's traffic):
//! * `testbed incast-server --port P`: accepts connections; on each, reads an 8-octet
//!   big-endian request `n` and writes `n` octets, until the peer closes.
//! * `testbed incast-client --server IP:PORT ... --sru B --rounds N --duration D`: one
//!   persistent connection (`TCP_NODELAY`) per server, one thread each; per round the main
//!   thread wakes every thread at once, each writes its request and reads the SRU back, the
//!   round ends when all have reported. Prints JSON lines: `{"type":"round","round":k,
//!   "start_s":..,"secs":..,"bytes":..}` per round (times from the client's start, a round
//!   starting where the previous one ended) and a closing `{"type":"summary",...}` with the
//!   octets per server. Stops after `rounds` rounds or at `duration`, whichever is first.

use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use anyhow::{bail, Context};
use serde_json::{json, Value};

/// Request size on the wire: one big-endian u64.
const REQUEST_LEN: usize = 8;
/// Write chunk of a server.
const CHUNK: usize = 64 * 1024;
/// How long the client keeps trying to reach a server that is not listening yet.
const CONNECT_PATIENCE: StdDuration = StdDuration::from_secs(10);
/// First port of the incast servers (server `k` of incast `i` listens on
/// `BASE_PORT + 100 × i + k`).
pub const BASE_PORT: u16 = 6100;

/// Runs an incast server on `port` until the process is stopped.
pub fn serve(port: u16) -> anyhow::Result<()> {
    let l = TcpListener::bind(("0.0.0.0", port)).with_context(|| format!("bind port {port}"))?;
    tracing::info!("incast-server: listening on port {port}");
    for conn in l.incoming() {
        let Ok(mut s) = conn else { continue };
        std::thread::spawn(move || {
            let _ = s.set_nodelay(true);
            let zeros = vec![0u8; CHUNK];
            let mut req = [0u8; REQUEST_LEN];
            while s.read_exact(&mut req).is_ok() {
                let mut left = u64::from_be_bytes(req);
                while left > 0 {
                    let n = left.min(CHUNK as u64) as usize;
                    if s.write_all(&zeros[..n]).is_err() {
                        return;
                    }
                    left -= n as u64;
                }
            }
        });
    }
    Ok(())
}

fn connect(addr: SocketAddr) -> anyhow::Result<TcpStream> {
    let deadline = StdInstant::now() + CONNECT_PATIENCE;
    loop {
        match TcpStream::connect_timeout(&addr, StdDuration::from_secs(2)) {
            Ok(s) => return Ok(s),
            Err(e) if StdInstant::now() > deadline => bail!("connect {addr}: {e}"),
            Err(_) => std::thread::sleep(StdDuration::from_millis(50)),
        }
    }
}

/// Settings of an incast client.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The servers.
    pub servers: Vec<SocketAddr>,
    /// Octets asked of each server per round.
    pub sru: u64,
    /// Rounds at most.
    pub rounds: u64,
    /// Stop starting rounds after this long.
    pub duration: StdDuration,
}

/// Runs the client, writing JSON lines to `out`.
pub fn client(o: &ClientOptions, out: &mut dyn Write) -> anyhow::Result<()> {
    if o.servers.is_empty() {
        bail!("no servers");
    }
    let t0 = StdInstant::now();
    let (done_tx, done_rx) = mpsc::channel::<(usize, Result<u64, String>)>();
    let mut go = Vec::new();
    for (k, &addr) in o.servers.iter().enumerate() {
        let mut s = connect(addr)?;
        s.set_nodelay(true)?;
        let (tx, rx) = mpsc::channel::<u64>();
        go.push(tx);
        let done = done_tx.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; CHUNK];
            for n in rx {
                let r = (|| -> std::io::Result<u64> {
                    s.write_all(&n.to_be_bytes())?;
                    let mut left = n;
                    while left > 0 {
                        let want = left.min(buf.len() as u64) as usize;
                        let got = s.read(&mut buf[..want])?;
                        if got == 0 {
                            return Err(std::io::ErrorKind::UnexpectedEof.into());
                        }
                        left -= got as u64;
                    }
                    Ok(n)
                })();
                if done.send((k, r.map_err(|e| e.to_string()))).is_err() {
                    return;
                }
            }
        });
    }
    drop(done_tx);
    let connected = t0.elapsed().as_secs_f64();
    let mut per_server = vec![0u64; o.servers.len()];
    let mut round = 0u64;
    let mut start = StdInstant::now();
    let mut error = None;
    while round < o.rounds && t0.elapsed() < o.duration {
        for tx in &go {
            if tx.send(o.sru).is_err() {
                bail!("a connection thread ended");
            }
        }
        let mut bytes = 0;
        for _ in 0..go.len() {
            match done_rx.recv() {
                Ok((k, Ok(n))) => {
                    per_server[k] += n;
                    bytes += n;
                }
                Ok((k, Err(e))) => error = Some(format!("server {}: {e}", o.servers[k])),
                Err(_) => error = Some("connection threads gone".into()),
            }
        }
        if error.is_some() {
            break;
        }
        let end = StdInstant::now();
        writeln!(
            out,
            "{}",
            json!({
                "type": "round", "round": round,
                "start_s": start.duration_since(t0).as_secs_f64(),
                "secs": end.duration_since(start).as_secs_f64(),
                "bytes": bytes,
            })
        )?;
        out.flush()?;
        start = end;
        round += 1;
    }
    writeln!(
        out,
        "{}",
        json!({
            "type": "summary", "rounds": round, "servers": o.servers.len(), "sru": o.sru,
            "connect_s": connected, "per_server": per_server, "error": error,
        })
    )?;
    out.flush()?;
    match error {
        Some(e) => bail!("{e}"),
        None => Ok(()),
    }
}

/// One completed round as the client reported it.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    /// Round number (from 0).
    pub round: u64,
    /// Start, seconds after the client's start.
    pub start_s: f64,
    /// Duration (seconds).
    pub secs: f64,
    /// Octets received from all servers.
    pub bytes: u64,
}

impl Round {
    /// Goodput of the round (bit/s).
    pub fn goodput_bps(&self) -> f64 {
        if self.secs > 0.0 {
            self.bytes as f64 * 8.0 / self.secs
        } else {
            0.0
        }
    }
}

/// What an incast client's output says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientReport {
    /// Completed rounds.
    pub rounds: Vec<Round>,
    /// Octets per server (from the summary; empty when the client was stopped before it).
    pub per_server: Vec<u64>,
    /// The client's error, if it reported one.
    pub error: Option<String>,
}

impl ClientReport {
    /// Goodput over all completed rounds (bit/s).
    pub fn goodput_bps(&self) -> f64 {
        let secs: f64 = self.rounds.iter().map(|r| r.secs).sum();
        let bytes: u64 = self.rounds.iter().map(|r| r.bytes).sum();
        if secs > 0.0 {
            bytes as f64 * 8.0 / secs
        } else {
            0.0
        }
    }
}

/// Parses the client's JSON lines (lines that are not JSON are skipped).
pub fn parse_client_output(text: &str) -> ClientReport {
    let mut r = ClientReport::default();
    for line in text.as_bytes().lines().map_while(Result::ok) {
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match v["type"].as_str() {
            Some("round") => {
                if let (Some(round), Some(start_s), Some(secs), Some(bytes)) = (
                    v["round"].as_u64(),
                    v["start_s"].as_f64(),
                    v["secs"].as_f64(),
                    v["bytes"].as_u64(),
                ) {
                    r.rounds.push(Round {
                        round,
                        start_s,
                        secs,
                        bytes,
                    });
                }
            }
            Some("summary") => {
                r.per_server = v["per_server"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_u64).collect())
                    .unwrap_or_default();
                r.error = v["error"].as_str().map(str::to_string);
            }
            _ => {}
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_output_parses() {
        let text = r#"{"type":"round","round":0,"start_s":0.01,"secs":0.5,"bytes":1000000}
garbage
{"type":"round","round":1,"start_s":0.51,"secs":0.25,"bytes":1000000}
{"type":"summary","rounds":2,"per_server":[1000000,1000000],"error":null}
"#;
        let r = parse_client_output(text);
        assert_eq!(r.rounds.len(), 2);
        assert_eq!(r.rounds[1].round, 1);
        assert!((r.rounds[0].goodput_bps() - 16e6).abs() < 1.0);
        assert!((r.goodput_bps() - 2e6 * 8.0 / 0.75).abs() < 1.0);
        assert_eq!(r.per_server, vec![1_000_000, 1_000_000]);
        assert_eq!(r.error, None);
        assert_eq!(parse_client_output(""), ClientReport::default());
    }
}
