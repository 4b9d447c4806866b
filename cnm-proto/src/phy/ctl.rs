//! The daemons' control socket: a Unix stream socket (mode 0600) that takes one command per
//! line and answers one JSON object per line, `{"ok":true,"data":...}` or
//! `{"ok":false,"error":"..."}`.
//!
//! The machinery here is generic over the command type; each daemon supplies its own command
//! enum and a parser from whitespace-separated words. A listener thread parses every line and
//! hands the command to the dataplane thread through a bounded channel ([`channel`]); the
//! dataplane answers between two batches from its own state ([`answer_pending`]), so its state
//! is never shared behind a lock. [`client`] is the other end (the daemons' `ctl` subcommand)
//! and [`print_table`] renders an answer as an aligned text table.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use serde_json::{json, Value};

/// The answer to one command: the `data` of the reply, or an error message.
pub type Answer = Result<Value, String>;

/// A command on its way to the dataplane, with the channel for its answer.
pub type Request<C> = (C, SyncSender<Answer>);

/// Parses the words of one command line (`["set", "rate", "p1", "10mbit"]`).
pub type Parser<C> = fn(&[&str]) -> Result<C, String>;

/// Requests that may wait for the dataplane at once.
const CHANNEL_REQUESTS: usize = 16;
/// Command lines accepted per connection.
const MAX_LINES: usize = 64;
/// Longest command line accepted, in octets.
const MAX_LINE_LEN: usize = 4096;

/// Creates the request channel; the dataplane keeps the receiving end and answers with
/// [`answer_pending`].
pub fn channel<C>() -> (SyncSender<Request<C>>, Receiver<Request<C>>) {
    mpsc::sync_channel(CHANNEL_REQUESTS)
}

/// Answers every pending request with `handle` (called on the dataplane thread; never blocks).
pub fn answer_pending<C>(requests: &Receiver<Request<C>>, mut handle: impl FnMut(C) -> Answer) {
    while let Ok((cmd, reply)) = requests.try_recv() {
        let _ = reply.try_send(handle(cmd));
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
    /// listener thread, which parses each line with `parse` and sends the command on `tx`.
    pub fn start<C: Send + 'static>(
        path: &Path,
        tx: SyncSender<Request<C>>,
        parse: Parser<C>,
    ) -> std::io::Result<CtlServer> {
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
            .spawn(move || serve(listener, tx, parse, stop2))?;
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

fn serve<C>(
    listener: UnixListener,
    tx: SyncSender<Request<C>>,
    parse: Parser<C>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Err(e) = serve_one(stream, &tx, parse, &stop) {
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

fn serve_one<C>(
    stream: UnixStream,
    tx: &SyncSender<Request<C>>,
    parse: Parser<C>,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    let mut writer = stream.try_clone()?;
    let reader = BufReader::new(stream);
    // At most a few commands per connection, each line bounded.
    for line in reader.lines().take(MAX_LINES) {
        let line = line?;
        if line.len() > MAX_LINE_LEN {
            break;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let answer = parse(&words).and_then(|cmd| ask(tx, cmd, stop));
        let v = match answer {
            Ok(data) => json!({"ok": true, "data": data}),
            Err(error) => json!({"ok": false, "error": error}),
        };
        writeln!(writer, "{v}")?;
    }
    Ok(())
}

/// Hands `cmd` to the dataplane and waits for its answer (listener threads only); gives up
/// when the dataplane is gone or `stop` is set.
pub fn ask<C>(tx: &SyncSender<Request<C>>, cmd: C, stop: &AtomicBool) -> Answer {
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
pub fn client(path: &Path, words: &[String]) -> Answer {
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

/// Renders an array of flat objects as an aligned text table (the non-`--json` output of
/// `ctl`). Columns named in `first` come first, in that order; the others follow in the order
/// they first appear. Nested objects and arrays are left to the `--json` output; anything but
/// an array is pretty-printed as JSON.
pub fn print_table(rows: &Value, first: &[&str]) -> String {
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
    // A stable sort: columns not in `first` keep their order of appearance.
    cols.sort_by_key(|c| first.iter().position(|o| o == c).unwrap_or(first.len()));
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

/// The operands of a daemon's `set` command: `KEY=VALUE...` words, or the two words
/// `KEY VALUE`, as pairs in the order typed.
pub fn parse_pairs(w: &[&str]) -> Result<Vec<(String, String)>, String> {
    if let [k, v] = w {
        if !k.contains('=') && !v.contains('=') {
            return Ok(vec![(k.to_string(), v.to_string())]);
        }
    }
    if w.is_empty() {
        return Err("expected KEY=VALUE or KEY VALUE".into());
    }
    w.iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(format!("{p:?}: expected KEY=VALUE")),
        })
        .collect()
}

/// `KEY = VALUE` pairs as typed on a command line, as a TOML table: a value is read as a TOML
/// value when it parses as one (`4`, `1.5`, `true`, `[3, 5]`, `"x"`) and as a string otherwise
/// (`20KB`, `fqcn`, `3ms`), as the scenario files' `--set` overrides are.
pub fn overrides_table(pairs: &[(String, String)]) -> toml::Table {
    pairs
        .iter()
        .map(|(k, v)| (k.clone(), toml_value(v)))
        .collect()
}

/// One command-line value as a TOML value (see [`overrides_table`]).
pub fn toml_value(text: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {text}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum Cmd {
        Stats,
    }

    fn parse(words: &[&str]) -> Result<Cmd, String> {
        match words {
            ["stats"] => Ok(Cmd::Stats),
            _ => Err(format!("unknown command {:?}", words.join(" "))),
        }
    }

    #[test]
    fn round_trip_over_a_socket() {
        let dir = std::env::temp_dir().join(format!("cnmp-ctl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl.sock");
        let (tx, rx) = channel();
        let server = CtlServer::start(&path, tx, parse).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let p2 = path.clone();
        let client_thread =
            std::thread::spawn(move || client(&p2, &["stats".to_string()]).unwrap());
        let mut answered = false;
        for _ in 0..500 {
            answer_pending(&rx, |c| {
                answered = true;
                assert_eq!(c, Cmd::Stats);
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
        // A second server on a live socket is refused.
        let (tx2, _rx2) = channel();
        let e = CtlServer::start(&path, tx2, parse).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
        drop(server);
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn replaces_a_stale_socket_file() {
        let dir = std::env::temp_dir().join(format!("cnmp-ctl-stale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl.sock");
        drop(UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let (tx, _rx) = channel();
        let server = CtlServer::start(&path, tx, parse).unwrap();
        drop(server);
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tables_align() {
        let t = print_table(
            &json!([{"name":"p1","rx":1},{"name":"port2","rx":12345}]),
            &[],
        );
        assert_eq!(t, "name   rx\np1     1\nport2  12345\n");
        let t = print_table(&json!([{"dst":"x","flow":0,"z":null}]), &["flow", "dst"]);
        assert_eq!(t, "flow  dst  z\n0     x    -\n");
        assert_eq!(print_table(&json!([]), &[]), "(none)\n");
    }

    #[test]
    fn set_operands_become_pairs_and_toml_values() {
        assert_eq!(
            parse_pairs(&["qeq", "20KB"]).unwrap(),
            vec![("qeq".to_string(), "20KB".to_string())]
        );
        assert_eq!(parse_pairs(&["a=1", "mode=fqcn"]).unwrap().len(), 2);
        assert!(parse_pairs(&[]).is_err());
        assert!(parse_pairs(&["a=1", "b"]).is_err());
        assert!(parse_pairs(&["=1"]).is_err());
        assert!(parse_pairs(&["a", "b", "c"]).is_err());
        assert_eq!(toml_value("4"), toml::Value::Integer(4));
        assert_eq!(toml_value("1.5"), toml::Value::Float(1.5));
        assert_eq!(toml_value("20KB"), toml::Value::String("20KB".into()));
        assert_eq!(
            toml_value("adaptive-bc"),
            toml::Value::String("adaptive-bc".into())
        );
        assert_eq!(toml_value("\"x y\""), toml::Value::String("x y".into()));
        assert_eq!(
            toml_value("[3,5]"),
            toml::Value::Array(vec![toml::Value::Integer(3), toml::Value::Integer(5)])
        );
        let t = overrides_table(&[("a".into(), "1".into()), ("b".into(), "2s".into())]);
        assert_eq!(t.len(), 2);
    }
}
