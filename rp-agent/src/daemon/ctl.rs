//! The control socket: a Unix stream socket (mode 0600) taking one command per line and
//! answering one JSON object per line, `{"ok":true,"data":...}` or `{"ok":false,"error":"..."}`.
//!
//! Commands: `show flows`, `stats`. A listener thread hands each command to the dataplane
//! through a channel; the dataplane answers between two batches from its own state.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use serde_json::{json, Value};

/// A control command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `show flows`
    ShowFlows,
    /// `stats`
    Stats,
}

impl Command {
    /// Parses the command words.
    pub fn parse<S: AsRef<str>>(words: &[S]) -> Result<Command, String> {
        let w: Vec<&str> = words.iter().map(|s| s.as_ref()).collect();
        match w.as_slice() {
            ["show", "flows"] => Ok(Command::ShowFlows),
            ["stats"] => Ok(Command::Stats),
            _ => Err(format!(
                "unknown command {:?}; expected: show flows | stats",
                w.join(" ")
            )),
        }
    }
}

/// A command with the channel for its answer.
pub type Request = (Command, SyncSender<Result<Value, String>>);

/// The request channel; the dataplane keeps the receiver.
pub fn channel() -> (SyncSender<Request>, Receiver<Request>) {
    mpsc::sync_channel(16)
}

/// Answers every pending request (dataplane thread; never blocks).
pub fn answer_pending(
    rx: &Receiver<Request>,
    mut handle: impl FnMut(Command) -> Result<Value, String>,
) {
    while let Ok((cmd, reply)) = rx.try_recv() {
        let _ = reply.try_send(handle(cmd));
    }
}

/// The listener thread; dropping it stops the thread and removes the socket file.
#[derive(Debug)]
pub struct CtlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl CtlServer {
    /// Binds `path` (replacing a stale socket file), mode 0600, and starts listening.
    pub fn start(path: &Path, tx: SyncSender<Request>) -> std::io::Result<CtlServer> {
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    "another daemon is listening there",
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
            Ok((s, _)) => {
                let _ = serve_one(s, &tx, &stop);
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}

fn serve_one(s: UnixStream, tx: &SyncSender<Request>, stop: &AtomicBool) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    let mut w = s.try_clone()?;
    for line in BufReader::new(s).lines().take(64) {
        let line = line?;
        if line.len() > 4096 {
            break;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let answer = Command::parse(&words).and_then(|c| ask(tx, c, stop));
        let v = match answer {
            Ok(data) => json!({"ok": true, "data": data}),
            Err(error) => json!({"ok": false, "error": error}),
        };
        writeln!(w, "{v}")?;
    }
    Ok(())
}

fn ask(tx: &SyncSender<Request>, cmd: Command, stop: &AtomicBool) -> Result<Value, String> {
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

/// Client side: sends `words` and returns the answer's `data`.
pub fn client(path: &Path, words: &[String]) -> Result<Value, String> {
    let mut s = UnixStream::connect(path)
        .map_err(|e| format!("cannot connect to {}: {e}", path.display()))?;
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

/// Columns shown first, in this order (the rest follow alphabetically).
const COLUMN_ORDER: [&str; 13] = [
    "flow",
    "dst",
    "priority",
    "five_tuple",
    "rpid",
    "state",
    "cr_bps",
    "tr_bps",
    "cnm_rx",
    "tx_frames",
    "tx_bytes",
    "queued_frames",
    "queued_bytes",
];

/// An array of flat objects as an aligned text table.
pub fn table(rows: &Value) -> String {
    let Some(rows) = rows.as_array() else {
        return format!("{rows:#}\n");
    };
    if rows.is_empty() {
        return "(none)\n".to_string();
    }
    let mut cols: Vec<&str> = Vec::new();
    for r in rows {
        for (k, v) in r.as_object().into_iter().flatten() {
            if !v.is_object() && !v.is_array() && !cols.contains(&k.as_str()) {
                cols.push(k);
            }
        }
    }
    cols.sort_by_key(|c| {
        COLUMN_ORDER
            .iter()
            .position(|o| o == c)
            .unwrap_or(COLUMN_ORDER.len())
    });
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
    let line = |cells: Vec<String>| {
        let mut l = String::new();
        for (c, w) in cells.iter().zip(&widths) {
            l.push_str(&format!("{c:<w$}  "));
        }
        format!("{}\n", l.trim_end())
    };
    let mut out = line(cols.iter().map(|c| c.to_string()).collect());
    for r in rows {
        out.push_str(&line(cols.iter().map(|c| cell(r, c)).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_over_a_socket() {
        assert_eq!(
            Command::parse(&["show", "flows"]).unwrap(),
            Command::ShowFlows
        );
        assert!(Command::parse(&["reboot"]).is_err());
        let dir = std::env::temp_dir().join(format!("rpag-ctl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl.sock");
        let (tx, rx) = channel();
        let server = CtlServer::start(&path, tx).unwrap();
        let p2 = path.clone();
        let c = std::thread::spawn(move || client(&p2, &["show".into(), "flows".into()]));
        for _ in 0..500 {
            let mut done = false;
            answer_pending(&rx, |_| {
                done = true;
                Ok(json!([{"flow": 0, "dst": "x"}]))
            });
            if done {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let v = c.join().unwrap().unwrap();
        assert_eq!(table(&v), "flow  dst\n0     x\n");
        drop(server);
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
