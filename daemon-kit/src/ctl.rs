//! The daemons' control socket: a Unix stream socket (mode 0600) that takes one command per
//! line and answers one JSON object per line, `{"ok":true,"data":...}` or
//! `{"ok":false,"error":"..."}`.
//!
//! The machinery here is generic over the command type; each daemon supplies its own command
//! enum and a parser from whitespace-separated words. One listener thread serves every
//! connection at once (non-blocking sockets and `ppoll`), parses each line and hands the
//! command to the dataplane thread through a bounded channel ([`channel`]); the dataplane
//! answers between two batches from its own state ([`answer_pending`]), so its state is never
//! shared behind a lock and a client can never make it wait. [`client`] is the other end (the
//! daemons' `ctl` subcommand) and [`print_table`] renders an answer as an aligned text table.
//!
//! # Bounds
//!
//! A control socket faces whatever local process can open it, so every resource a client can
//! claim is bounded ([`Limits`]): at most 16 connections at once (the next one is answered
//! with an error and closed), a command line of at most 4096 octets (the listener never
//! buffers more: a longer line is answered with an error and the connection closed), 64
//! commands per connection, and 5 s for each command from the end of the previous one (a
//! client that drips a line byte by byte, or sends nothing, is cut off). One command per
//! connection waits for the dataplane at a time, so answers come back in order. Because the
//! listener waits on all connections together, a slow or idle client delays nobody else.
//!
//! # The socket path
//!
//! `--ctl PATH` binds a new socket at `PATH`. A socket file left there by a daemon that died
//! is replaced; a live socket (one that answers a connect) and anything that is not a socket
//! (a regular file, a directory, a link) are refused, so a mistyped path never destroys data.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cnm_proto::phy::poll;
use serde_json::{json, Value};

/// The answer to one command: the `data` of the reply, or an error message.
pub type Answer = Result<Value, String>;

/// A command on its way to the dataplane, with the channel for its answer.
pub type Request<C> = (C, SyncSender<Answer>);

/// Parses the words of one command line (`["set", "rate", "p1", "10mbit"]`).
pub type Parser<C> = fn(&[&str]) -> Result<C, String>;

/// Requests that may wait for the dataplane at once.
const CHANNEL_REQUESTS: usize = 16;

/// What one control socket lets its clients claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; one more is answered with an error and closed.
    pub max_connections: usize,
    /// Longest command line, in octets (the newline excluded).
    pub max_line_len: usize,
    /// Commands served per connection.
    pub max_lines: usize,
    /// Time a client has for each command line, counted from its connect or from the
    /// previous answer, and the dataplane for its answer.
    pub line_deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 16,
            max_line_len: 4096,
            max_lines: 64,
            line_deadline: Duration::from_secs(5),
        }
    }
}

/// How long the listener sleeps at most while it waits for the dataplane or for a client to
/// take an answer (neither has a descriptor it can poll).
const BUSY_TICK: Duration = Duration::from_millis(2);
/// How long the listener sleeps at most otherwise (to see the stop flag).
const IDLE_TICK: Duration = Duration::from_millis(50);

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
    /// Binds the socket at `path` (see the module documentation for what may already be
    /// there) with mode 0600 and starts the listener thread with the default [`Limits`].
    pub fn start<C: Send + 'static>(
        path: &Path,
        tx: SyncSender<Request<C>>,
        parse: Parser<C>,
    ) -> std::io::Result<CtlServer> {
        Self::start_with(path, tx, parse, Limits::default())
    }

    /// As [`start`](Self::start) with chosen limits.
    pub fn start_with<C: Send + 'static>(
        path: &Path,
        tx: SyncSender<Request<C>>,
        parse: Parser<C>,
        limits: Limits,
    ) -> std::io::Result<CtlServer> {
        clear_stale_socket(path)?;
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ctl".into())
            .spawn(move || serve(listener, tx, parse, limits, stop2))?;
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

/// Makes `path` free for a new socket: nothing there, or a socket nobody listens on (removed).
/// A live socket is `AddrInUse`; anything else that exists is `AlreadyExists`.
pub fn clear_stale_socket(path: &Path) -> std::io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_socket() {
        return Err(std::io::Error::new(
            ErrorKind::AlreadyExists,
            format!(
                "{} exists and is not a socket; refusing to replace it",
                path.display()
            ),
        ));
    }
    // A live daemon answers a connect; a stale file from a crashed run does not.
    if UnixStream::connect(path).is_ok() {
        return Err(std::io::Error::new(
            ErrorKind::AddrInUse,
            format!("{}: another daemon is listening there", path.display()),
        ));
    }
    std::fs::remove_file(path)
}

/// One client connection of the listener.
#[derive(Debug)]
struct Conn {
    stream: UnixStream,
    /// Octets of the command line being received (never more than `max_line_len` + 1).
    input: Vec<u8>,
    /// Answer octets not yet written, from `out_pos`.
    output: Vec<u8>,
    out_pos: usize,
    /// The answer of the command waiting for the dataplane.
    pending: Option<Receiver<Answer>>,
    /// Commands taken so far.
    lines: usize,
    /// When the current command must be complete (and answered).
    deadline: Instant,
    /// The client closed its side (or we stopped reading): answer what is there, then close.
    read_closed: bool,
    /// Close once the output is written.
    closing: bool,
}

impl Conn {
    fn new(stream: UnixStream, now: Instant, limits: &Limits) -> Conn {
        Conn {
            stream,
            input: Vec::new(),
            output: Vec::new(),
            out_pos: 0,
            pending: None,
            lines: 0,
            deadline: now + limits.line_deadline,
            read_closed: false,
            closing: false,
        }
    }

    fn reply(&mut self, answer: Answer) {
        let v = match answer {
            Ok(data) => json!({"ok": true, "data": data}),
            Err(error) => json!({"ok": false, "error": error}),
        };
        self.output.extend_from_slice(v.to_string().as_bytes());
        self.output.push(b'\n');
    }

    /// Reads what the client sent, without ever holding more than one line plus one octet.
    fn read(&mut self, limits: &Limits) -> std::io::Result<()> {
        let mut buf = [0u8; 1024];
        while !self.read_closed && !self.has_line() && self.input.len() <= limits.max_line_len {
            let room = (limits.max_line_len + 1 - self.input.len()).min(buf.len());
            match self.stream.read(&mut buf[..room]) {
                Ok(0) => {
                    self.read_closed = true;
                    // A last command without its newline still counts.
                    if !self.input.is_empty() {
                        self.input.push(b'\n');
                    }
                }
                Ok(n) => self.input.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        if !self.has_line() && self.input.len() > limits.max_line_len {
            self.reply(Err(format!(
                "command line longer than {} octets",
                limits.max_line_len
            )));
            self.input.clear();
            self.read_closed = true;
            self.closing = true;
        }
        Ok(())
    }

    fn has_line(&self) -> bool {
        self.input.contains(&b'\n')
    }

    /// Takes the next complete command line (if no command is waiting for the dataplane) and
    /// hands it on; collects the dataplane's answer.
    fn dispatch<C>(
        &mut self,
        tx: &SyncSender<Request<C>>,
        parse: Parser<C>,
        limits: &Limits,
        now: Instant,
    ) {
        if let Some(rx) = &self.pending {
            match rx.try_recv() {
                Ok(answer) => {
                    self.pending = None;
                    self.reply(answer);
                    self.deadline = now + limits.line_deadline;
                }
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    self.pending = None;
                    self.reply(Err("dataplane did not answer".into()));
                    self.closing = true;
                }
            }
        }
        while self.pending.is_none() && !self.closing {
            let Some(end) = self.input.iter().position(|&b| b == b'\n') else {
                return;
            };
            let line: Vec<u8> = self.input.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line[..end]);
            let words: Vec<&str> = text.split_whitespace().collect();
            if words.is_empty() {
                continue;
            }
            self.lines += 1;
            if self.lines >= limits.max_lines {
                self.read_closed = true;
                self.input.clear();
            }
            match parse(&words) {
                Err(e) => {
                    self.reply(Err(e));
                    self.deadline = now + limits.line_deadline;
                }
                Ok(cmd) => {
                    let (rtx, rrx) = mpsc::sync_channel(1);
                    match tx.try_send((cmd, rtx)) {
                        Ok(()) => self.pending = Some(rrx),
                        Err(TrySendError::Full(_)) => {
                            self.reply(Err("dataplane busy; try again".into()));
                        }
                        Err(TrySendError::Disconnected(_)) => {
                            self.reply(Err("dataplane is shutting down".into()));
                            self.closing = true;
                        }
                    }
                }
            }
        }
    }

    fn write(&mut self) -> std::io::Result<()> {
        while self.out_pos < self.output.len() {
            match self.stream.write(&self.output[self.out_pos..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.output.clear();
        self.out_pos = 0;
        Ok(())
    }

    fn output_pending(&self) -> bool {
        self.out_pos < self.output.len()
    }

    /// One step; false when the connection is finished.
    fn step<C>(
        &mut self,
        tx: &SyncSender<Request<C>>,
        parse: Parser<C>,
        limits: &Limits,
        now: Instant,
    ) -> bool {
        if now >= self.deadline && !self.closing {
            self.pending = None;
            self.reply(Err("timed out".into()));
            self.closing = true;
        }
        if !self.closing && self.read(limits).is_err() {
            return false;
        }
        self.dispatch(tx, parse, limits, now);
        if self.write().is_err() {
            return false;
        }
        if self.output_pending() {
            // A client that does not take its answer gets until the deadline, then nothing.
            return now < self.deadline || !self.closing;
        }
        let finished = self.read_closed && self.pending.is_none() && !self.has_line();
        !(self.closing || finished)
    }
}

fn serve<C>(
    listener: UnixListener,
    tx: SyncSender<Request<C>>,
    parse: Parser<C>,
    limits: Limits,
    stop: Arc<AtomicBool>,
) {
    let mut conns: Vec<Conn> = Vec::new();
    let max_conns = limits.max_connections.clamp(1, poll::MAX_FDS - 1);
    let mut fds = Vec::with_capacity(max_conns + 1);
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let mut c = Conn::new(stream, now, &limits);
                    if conns.len() >= max_conns {
                        c.reply(Err(format!(
                            "too many control connections (at most {max_conns}); try again"
                        )));
                        // Best effort: the answer fits any socket buffer.
                        let _ = c.write();
                    } else {
                        conns.push(c);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of descriptors and the like: try again after the next wait.
                    tracing::warn!("ctl accept: {e}");
                    break;
                }
            }
        }
        conns.retain_mut(|c| c.step(&tx, parse, &limits, now));

        let busy = conns
            .iter()
            .any(|c| c.pending.is_some() || c.output_pending());
        let mut wake = now + if busy { BUSY_TICK } else { IDLE_TICK };
        for c in &conns {
            wake = wake.min(c.deadline);
        }
        fds.clear();
        fds.push(listener.as_raw_fd());
        fds.extend(conns.iter().map(|c| {
            if c.read_closed || c.closing || c.has_line() {
                -1
            } else {
                c.stream.as_raw_fd()
            }
        }));
        let timeout = wake.saturating_duration_since(Instant::now());
        let timeout = cnm_proto::Duration::from_nanos(timeout.as_nanos() as u64);
        if let Err(e) = poll::wait(&fds, Some(timeout)) {
            tracing::warn!("ctl poll: {e}");
            std::thread::sleep(BUSY_TICK);
        }
    }
}

/// Hands `cmd` to the dataplane and waits for its answer (listener threads only); gives up
/// when the dataplane is gone or `stop` is set.
pub fn ask<C>(tx: &SyncSender<Request<C>>, cmd: C, stop: &AtomicBool) -> Answer {
    let (rtx, rrx) = mpsc::sync_channel(1);
    tx.send((cmd, rtx))
        .map_err(|_| "dataplane is shutting down".to_string())?;
    loop {
        match rrx.recv_timeout(Duration::from_millis(100)) {
            Ok(r) => return r,
            Err(mpsc::RecvTimeoutError::Timeout) if !stop.load(Ordering::Relaxed) => continue,
            Err(_) => return Err("dataplane did not answer".to_string()),
        }
    }
}

/// Why [`client`] got no answer data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The daemon could not be reached or answered nothing readable (exit status 1).
    #[error("{0}")]
    Unreachable(String),
    /// The daemon refused the command: unknown, or an invalid value (exit status 2, as every
    /// invalid configuration).
    #[error("{0}")]
    Refused(String),
}

impl ClientError {
    /// The exit status of a `ctl` subcommand that failed this way.
    pub fn exit_code(&self) -> i32 {
        match self {
            ClientError::Unreachable(_) => crate::error::EXIT_RUNTIME,
            ClientError::Refused(_) => crate::error::EXIT_CONFIG,
        }
    }
}

/// Client side: sends `words` as one command and returns the `data` of the answer.
pub fn client(path: &Path, words: &[String]) -> Result<Value, ClientError> {
    let gone = ClientError::Unreachable;
    let mut s = UnixStream::connect(path).map_err(|e| {
        gone(format!(
            "cannot connect to control socket {}: {e}",
            path.display()
        ))
    })?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| gone(e.to_string()))?;
    // A server that refuses the connection (too many clients) answers and closes at once, so
    // the command may meet a closed socket (EPIPE): its answer is still waiting to be read.
    let sent = writeln!(s, "{}", words.join(" "));
    let mut line = String::new();
    let received = BufReader::new(&s).read_line(&mut line);
    if line.is_empty() {
        sent.map_err(|e| gone(format!("send: {e}")))?;
    }
    received.map_err(|e| gone(format!("receive: {e}")))?;
    let v: Value =
        serde_json::from_str(&line).map_err(|e| gone(format!("bad answer {line:?}: {e}")))?;
    if v["ok"] == Value::Bool(true) {
        Ok(v["data"].clone())
    } else {
        let e = v["error"].as_str().unwrap_or("unknown error").to_string();
        Err(ClientError::Refused(e))
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
mod tests;
