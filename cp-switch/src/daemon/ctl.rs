//! The control socket: a Unix stream socket (mode 0600) that takes one command per line and
//! answers one JSON object per line, `{"ok":true,"data":...}` or `{"ok":false,"error":"..."}`.
//!
//! Commands are the words users type after `cp-switch ctl --socket PATH`: `show ports`,
//! `show fdb`, `show queues`, `show cps`, `stats`, `set rate PORT RATE`, `set delay PORT DUR`. The listener
//! runs on the daemon's second thread; every command is handed to the dataplane thread through a
//! channel and answered from the dataplane's own state between two batches, so the dataplane
//! never shares its state behind a lock.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use cnm_proto::{Duration, Rate};
use serde_json::{json, Value};

/// A parsed control command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `show ports`
    ShowPorts,
    /// `show fdb`
    ShowFdb,
    /// `show queues`
    ShowQueues,
    /// `show cps` (congestion points)
    ShowCps,
    /// `stats`
    Stats,
    /// `set rate PORT RATE` (`none` or `0` removes shaping)
    SetRate {
        /// Port name.
        port: String,
        /// New line rate; `None` = unshaped.
        rate: Option<Rate>,
    },
    /// `set delay PORT DUR`
    SetDelay {
        /// Port name.
        port: String,
        /// New propagation delay.
        delay: Duration,
    },
}

impl Command {
    /// Parses the command words (`["set", "rate", "p1", "10mbit"]`).
    pub fn parse<S: AsRef<str>>(words: &[S]) -> Result<Command, String> {
        let w: Vec<&str> = words.iter().map(|s| s.as_ref()).collect();
        match w.as_slice() {
            ["show", "ports"] => Ok(Command::ShowPorts),
            ["show", "fdb"] => Ok(Command::ShowFdb),
            ["show", "queues"] => Ok(Command::ShowQueues),
            ["show", "cps"] => Ok(Command::ShowCps),
            ["stats"] => Ok(Command::Stats),
            ["set", "rate", port, rate] => {
                let rate = match *rate {
                    "none" | "off" | "0" => None,
                    r => Some(
                        r.parse::<Rate>()
                            .map_err(|e| format!("set rate: invalid rate {r:?}: {e}"))?,
                    ),
                };
                Ok(Command::SetRate {
                    port: port.to_string(),
                    rate,
                })
            }
            ["set", "delay", port, d] => Ok(Command::SetDelay {
                port: port.to_string(),
                delay: d
                    .parse::<Duration>()
                    .map_err(|e| format!("set delay: invalid duration {d:?}: {e}"))?,
            }),
            _ => Err(format!(
                "unknown command {:?}; expected one of: show ports | show fdb | show queues | show cps | \
                 stats | set rate PORT RATE | set delay PORT DUR",
                w.join(" ")
            )),
        }
    }
}

/// A command on its way to the dataplane, with the channel for its answer.
pub type Request = (Command, SyncSender<Result<Value, String>>);

/// Creates the request channel shared by the control socket and the metrics endpoint; the
/// dataplane keeps the receiving end and answers with [`answer_pending`].
pub fn channel() -> (SyncSender<Request>, Receiver<Request>) {
    mpsc::sync_channel(16)
}

/// Answers every pending request with `handle` (called on the dataplane thread; never blocks).
pub fn answer_pending(
    requests: &Receiver<Request>,
    mut handle: impl FnMut(&Command) -> Result<Value, String>,
) {
    while let Ok((cmd, reply)) = requests.try_recv() {
        let _ = reply.try_send(handle(&cmd));
    }
}

/// The control socket's listener thread; dropping it stops the thread and removes the socket.
#[derive(Debug)]
pub struct CtlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl CtlServer {
    /// Binds the socket at `path` (replacing a stale socket file) with mode 0600 and starts the
    /// listener thread.
    pub fn start(path: &Path, tx: SyncSender<Request>) -> std::io::Result<CtlServer> {
        if path.exists() {
            // A live daemon answers a connect; a stale file from a crashed run does not.
            if UnixStream::connect(path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!("{}: another daemon is listening there", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ctl".into())
            .spawn(move || serve(listener, tx, stop2))?;
        Ok(CtlServer {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for CtlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve(listener: UnixListener, tx: SyncSender<Request>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Err(e) = serve_one(stream, &tx, &stop) {
                    tracing::debug!("ctl connection: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => {
                tracing::warn!("ctl accept: {e}");
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
}

fn serve_one(
    stream: UnixStream,
    tx: &SyncSender<Request>,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    let mut writer = stream.try_clone()?;
    let reader = BufReader::new(stream);
    // At most a few commands per connection, each line bounded.
    for line in reader.lines().take(64) {
        let line = line?;
        if line.len() > 4096 {
            break;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let answer = match Command::parse(&words) {
            Err(e) => Err(e),
            Ok(cmd) => ask(tx, cmd, stop),
        };
        let v = match answer {
            Ok(data) => json!({"ok": true, "data": data}),
            Err(error) => json!({"ok": false, "error": error}),
        };
        writeln!(writer, "{v}")?;
    }
    Ok(())
}

/// Hands `cmd` to the dataplane and waits for its answer (listener threads only).
pub fn ask(tx: &SyncSender<Request>, cmd: Command, stop: &AtomicBool) -> Result<Value, String> {
    let (rtx, rrx) = mpsc::sync_channel(1);
    tx.send((cmd, rtx))
        .map_err(|_| "dataplane is shutting down".to_string())?;
    loop {
        match rrx.recv_timeout(std::time::Duration::from_millis(100)) {
            Ok(r) => return r,
            Err(mpsc::RecvTimeoutError::Timeout) if !stop.load(Ordering::Relaxed) => continue,
            Err(_) => return Err("dataplane did not answer".to_string()),
        }
    }
}

/// Client side: sends `words` as one command and returns the `data` of the answer.
pub fn client(path: &Path, words: &[String]) -> Result<Value, String> {
    let mut s = UnixStream::connect(path)
        .map_err(|e| format!("cannot connect to control socket {}: {e}", path.display()))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    writeln!(s, "{}", words.join(" ")).map_err(|e| format!("send: {e}"))?;
    let mut line = String::new();
    BufReader::new(&s)
        .read_line(&mut line)
        .map_err(|e| format!("receive: {e}"))?;
    let v: Value = serde_json::from_str(&line).map_err(|e| format!("bad answer {line:?}: {e}"))?;
    if v["ok"] == Value::Bool(true) {
        Ok(v["data"].clone())
    } else {
        Err(v["error"].as_str().unwrap_or("unknown error").to_string())
    }
}

/// Prints an array of flat objects as an aligned text table (the non-`--json` output of `ctl`).
pub fn print_table(rows: &Value) -> String {
    let Some(rows) = rows.as_array() else {
        return format!("{rows:#}\n");
    };
    if rows.is_empty() {
        return "(none)\n".to_string();
    }
    let mut cols: Vec<String> = Vec::new();
    for r in rows {
        if let Some(o) = r.as_object() {
            for (k, v) in o {
                // Nested objects (per-reason counters) only appear in --json output.
                if !v.is_object() && !v.is_array() && !cols.contains(k) {
                    cols.push(k.clone());
                }
            }
        }
    }
    let cell = |r: &Value, c: &str| match &r[c] {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let widths: Vec<usize> = cols
        .iter()
        .map(|c| {
            rows.iter()
                .map(|r| cell(r, c).len())
                .max()
                .unwrap_or(0)
                .max(c.len())
        })
        .collect();
    let mut out = String::new();
    for (c, w) in cols.iter().zip(&widths) {
        out.push_str(&format!("{c:<w$}  "));
    }
    out = out.trim_end().to_string();
    out.push('\n');
    for r in rows {
        let mut line = String::new();
        for (c, w) in cols.iter().zip(&widths) {
            line.push_str(&format!("{:<w$}  ", cell(r, c)));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands() {
        assert_eq!(Command::parse(&["stats"]).unwrap(), Command::Stats);
        assert_eq!(
            Command::parse(&["set", "rate", "p1", "10mbit"]).unwrap(),
            Command::SetRate {
                port: "p1".into(),
                rate: Some(Rate::from_mbps(10))
            }
        );
        assert_eq!(
            Command::parse(&["set", "rate", "p1", "none"]).unwrap(),
            Command::SetRate {
                port: "p1".into(),
                rate: None
            }
        );
        assert!(Command::parse(&["set", "rate", "p1", "fast"]).is_err());
        assert!(Command::parse(&["reboot"]).is_err());
        assert_eq!(
            Command::parse(&["set", "delay", "p2", "25us"]).unwrap(),
            Command::SetDelay {
                port: "p2".into(),
                delay: Duration::from_micros(25)
            }
        );
    }

    #[test]
    fn round_trip_over_a_socket() {
        let dir = std::env::temp_dir().join(format!("cpsw-ctl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl.sock");
        let (tx, rx) = channel();
        let server = CtlServer::start(&path, tx).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let p2 = path.clone();
        let client_thread =
            std::thread::spawn(move || client(&p2, &["stats".to_string()]).unwrap());
        let mut answered = false;
        for _ in 0..500 {
            answer_pending(&rx, |c| {
                answered = true;
                assert_eq!(*c, Command::Stats);
                Ok(json!({"ports": []}))
            });
            if answered {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(client_thread.join().unwrap(), json!({"ports": []}));
        let err = client(&path, &["bogus".to_string()]).unwrap_err();
        assert!(err.contains("unknown command"), "{err}");
        drop(server);
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tables_align() {
        let t = print_table(&json!([{"name":"p1","rx":1},{"name":"port2","rx":12345}]));
        assert_eq!(t, "name   rx\np1     1\nport2  12345\n");
    }
}
