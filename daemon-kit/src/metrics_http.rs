//! `--metrics ADDR`: a small HTTP/1.1 server that answers `GET /metrics` and nothing else.
//!
//! Prometheus pulls: it opens a TCP connection, sends one request and reads one answer. That is
//! all this server does, and it is built so that no client can hurt the daemon or the other
//! clients:
//!
//! - **Bounded request head.** The request line and headers are read into a buffer of at most
//!   [`Limits::max_head_bytes`]; a longer head is answered `431` and the connection closed. A
//!   client that streams a request line without end costs the daemon that many bytes, not its
//!   whole stream.
//! - **Bounded connections, one thread each.** Every accepted connection is served on its own
//!   thread, at most [`Limits::max_connections`] at once; beyond that the listener answers
//!   `503` at once and closes. An idle or slow client occupies one slot, never the listener, so a
//!   scrape is answered while others dawdle.
//! - **A deadline per connection.** Reading the head and writing the answer must finish within
//!   [`Limits::deadline`] of the accept; a client that has sent no complete head by then is
//!   answered `408` and dropped, which frees its slot.
//! - **One path.** `GET` (or `HEAD`) `/metrics` answers `200` with the exposition; other paths
//!   answer `404`, other methods `405`. Every answer closes the connection (`Connection: close`),
//!   as Prometheus opens a new one per scrape anyway.
//!
//! The exposition itself comes from a closure ([`Render`]) that asks the dataplane for a
//! snapshot; when the dataplane cannot answer the server says `503`. Off by default; a
//! non-loopback address is refused unless the daemon was told to allow remote scrapers.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::exposition::CONTENT_TYPE;

/// The path Prometheus scrapes by default.
pub const PATH: &str = "/metrics";

/// What one client may cost the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Octets of request line plus headers read at most (a browser's request is under 1 KiB).
    pub max_head_bytes: usize,
    /// Connections served at once.
    pub max_connections: usize,
    /// Time from accept to the end of the answer.
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_head_bytes: 8 * 1024,
            max_connections: 16,
            deadline: Duration::from_secs(5),
        }
    }
}

/// Produces the exposition text; the flag is set when the server is stopping (so that a wait for
/// the dataplane can give up).
pub type Render = Arc<dyn Fn(&AtomicBool) -> Result<String, String> + Send + Sync>;

/// The listener thread; dropping it stops accepting (connections being served finish within
/// their deadline).
pub struct MetricsHttp {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl std::fmt::Debug for MetricsHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsHttp")
            .field("addr", &self.addr)
            .finish()
    }
}

impl MetricsHttp {
    /// Binds `addr` and starts serving `render` at [`PATH`]. A non-loopback address is refused
    /// (`PermissionDenied`) unless `allow_remote`.
    pub fn start(
        addr: SocketAddr,
        allow_remote: bool,
        limits: Limits,
        render: Render,
    ) -> std::io::Result<MetricsHttp> {
        if !addr.ip().is_loopback() && !allow_remote {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("metrics address {addr} is not loopback (add --metrics-allow-remote)"),
            ));
        }
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || accept_loop(listener, limits, render, stop2))?;
        Ok(MetricsHttp {
            stop,
            thread: Some(thread),
            addr,
        })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsHttp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Gives a connection slot back when its thread ends, however it ends.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn accept_loop(listener: TcpListener, limits: Limits, render: Render, stop: Arc<AtomicBool>) {
    let active = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        let s = match listener.accept() {
            Ok((s, _)) => s,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if s.set_nonblocking(false).is_err() {
            continue;
        }
        if active.fetch_add(1, Ordering::AcqRel) >= limits.max_connections {
            active.fetch_sub(1, Ordering::AcqRel);
            // Answered from the listener thread: the write is small and bounded in time.
            let mut s = s;
            let _ = s.set_write_timeout(Some(Duration::from_millis(50)));
            let _ = respond(&mut s, 503, "text/plain", b"too many connections\n", false);
            continue;
        }
        let slot = Slot(active.clone());
        let render = render.clone();
        let stop = stop.clone();
        let spawned = std::thread::Builder::new()
            .name("metrics-conn".into())
            .spawn(move || {
                let _slot = slot;
                serve(s, limits, &render, &stop);
            });
        // On failure the closure (and with it the slot and the socket) is dropped.
        drop(spawned);
    }
}

/// Why a request head could not be read.
#[derive(Debug, PartialEq, Eq)]
enum HeadError {
    TooLarge,
    Timeout,
    Closed,
}

/// Reads up to the blank line that ends the head, within `max` octets and the deadline.
fn read_head(s: &mut TcpStream, max: usize, deadline: Instant) -> Result<Vec<u8>, HeadError> {
    let mut head = Vec::with_capacity(max.min(1024));
    let mut chunk = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HeadError::Timeout);
        }
        s.set_read_timeout(Some(left))
            .map_err(|_| HeadError::Closed)?;
        let room = (max + 1).saturating_sub(head.len()).min(chunk.len());
        let n = match s.read(&mut chunk[..room]) {
            Ok(0) => return Err(HeadError::Closed),
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HeadError::Timeout)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(HeadError::Closed),
        };
        // Look for the end only in the new octets (and the three before them).
        let from = head.len().saturating_sub(3);
        head.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_end(&head[from..]) {
            head.truncate(from + end);
            return Ok(head);
        }
        if head.len() > max {
            return Err(HeadError::TooLarge);
        }
    }
}

/// The offset just past `\r\n\r\n` (or a bare `\n\n`).
fn find_end(b: &[u8]) -> Option<usize> {
    (0..b.len()).find_map(|i| {
        if b[i..].starts_with(b"\r\n\r\n") {
            Some(i + 4)
        } else if b[i..].starts_with(b"\n\n") {
            Some(i + 2)
        } else {
            None
        }
    })
}

fn serve(mut s: TcpStream, limits: Limits, render: &Render, stop: &AtomicBool) {
    let deadline = Instant::now() + limits.deadline;
    let head = match read_head(&mut s, limits.max_head_bytes, deadline) {
        Ok(h) => h,
        Err(HeadError::TooLarge) => {
            let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
            let _ = respond(
                &mut s,
                431,
                "text/plain",
                b"request head too large\n",
                false,
            );
            return;
        }
        Err(HeadError::Timeout) => {
            let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
            let _ = respond(&mut s, 408, "text/plain", b"request timeout\n", false);
            return;
        }
        Err(HeadError::Closed) => return,
    };
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let _ = s.set_write_timeout(Some(left));
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        let _ = respond(&mut s, 405, "text/plain", b"only GET and HEAD\n", false);
        return;
    }
    if path != PATH {
        let body = format!("not found; metrics are at {PATH}\n");
        let _ = respond(&mut s, 404, "text/plain", body.as_bytes(), head_only);
        return;
    }
    match render(stop) {
        Ok(text) => {
            let _ = respond(&mut s, 200, CONTENT_TYPE, text.as_bytes(), head_only);
        }
        Err(e) => {
            let _ = respond(
                &mut s,
                503,
                "text/plain",
                format!("{e}\n").as_bytes(),
                head_only,
            );
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "",
    }
}

fn respond(
    s: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &[u8],
    head_only: bool,
) -> std::io::Result<()> {
    let allow = if status == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    s.write_all(head.as_bytes())?;
    if !head_only {
        s.write_all(body)?;
    }
    s.flush()?;
    // Half-close so that the client reads the whole answer before the socket goes away.
    s.shutdown(Shutdown::Write)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;

    fn server(limits: Limits) -> MetricsHttp {
        let render: Render = Arc::new(|_stop: &AtomicBool| Ok("x_total 1\n".to_string()));
        MetricsHttp::start("127.0.0.1:0".parse().unwrap(), false, limits, render).unwrap()
    }

    /// Sends `req` and reads the whole answer (the server closes after it). The read timeout
    /// only keeps a broken server from hanging the test run.
    fn get(addr: SocketAddr, req: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_metrics_path_only() {
        let m = server(Limits::default());
        let ok = get(m.local_addr(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("Content-Type: text/plain; version=0.0.4"));
        assert!(ok.ends_with("\r\n\r\nx_total 1\n"));
        let q = get(m.local_addr(), "GET /metrics?x=1 HTTP/1.0\r\n\r\n");
        assert!(q.starts_with("HTTP/1.1 200 "), "{q}");
        for path in ["/", "/metricsx", "/favicon.ico"] {
            let r = get(m.local_addr(), &format!("GET {path} HTTP/1.1\r\n\r\n"));
            assert!(r.starts_with("HTTP/1.1 404 "), "{path}: {r}");
        }
        let r = get(m.local_addr(), "POST /metrics HTTP/1.1\r\n\r\n");
        assert!(
            r.starts_with("HTTP/1.1 405 ") && r.contains("Allow: GET, HEAD"),
            "{r}"
        );
        let h = get(m.local_addr(), "HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(
            h.starts_with("HTTP/1.1 200 ") && h.ends_with("\r\n\r\n"),
            "{h}"
        );
    }

    #[test]
    fn refuses_remote_without_permission() {
        let render: Render = Arc::new(|_: &AtomicBool| Ok(String::new()));
        let e = MetricsHttp::start(
            "0.0.0.0:0".parse().unwrap(),
            false,
            Limits::default(),
            render,
        )
        .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
    }

    /// A 64 MB request line is cut off after `max_head_bytes`: the client gets `431` and cannot
    /// push its 64 MB (the server closed instead of reading on).
    #[test]
    fn endless_request_line_is_cut_off() {
        let m = server(Limits::default());
        let mut s = TcpStream::connect(m.local_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut w = s.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            let chunk = vec![b'A'; 64 * 1024];
            let mut sent = 0usize;
            let _ = w.write_all(b"GET /");
            while sent < 64 << 20 {
                match w.write(&chunk) {
                    Ok(n) => sent += n,
                    Err(_) => break,
                }
            }
            sent
        });
        let mut status = String::new();
        std::io::BufReader::new(&mut s)
            .read_line(&mut status)
            .unwrap();
        assert!(status.starts_with("HTTP/1.1 431 "), "{status:?}");
        // The server stopped reading: its socket closed, the writer's stream fails early.
        let _ = s.shutdown(Shutdown::Both);
        let sent = writer.join().unwrap();
        assert!(sent < 64 << 20, "the server read all {sent} octets");
    }

    /// Ten idle connections do not keep a scrape waiting.
    #[test]
    fn idle_connections_do_not_stall_a_scrape() {
        let m = server(Limits {
            // Far longer than the test: an idle client is only cut off by the deadline, so a
            // server that served connections one at a time would never reach the scrape.
            deadline: Duration::from_secs(3600),
            ..Limits::default()
        });
        let idle: Vec<TcpStream> = (0..10)
            .map(|_| {
                let mut s = TcpStream::connect(m.local_addr()).unwrap();
                s.write_all(b"GET /metr").unwrap();
                s
            })
            .collect();
        let ok = get(m.local_addr(), "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 "), "{ok}");
        drop(idle);
    }

    /// With every slot held by an idle client, a further connection is refused with `503` at
    /// once (connections are accepted in the order they were made).
    #[test]
    fn connections_beyond_the_cap_are_refused() {
        let m = server(Limits {
            max_connections: 2,
            deadline: Duration::from_secs(3600),
            ..Limits::default()
        });
        let idle: Vec<TcpStream> = (0..2)
            .map(|_| TcpStream::connect(m.local_addr()).unwrap())
            .collect();
        let r = get(m.local_addr(), "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 503 "), "{r}");
        drop(idle);
    }

    #[test]
    fn slow_client_gets_408_after_the_deadline() {
        let m = server(Limits {
            deadline: Duration::from_millis(100),
            ..Limits::default()
        });
        let r = get(m.local_addr(), "GET /metrics HTTP/1.1\r\n");
        assert!(r.starts_with("HTTP/1.1 408 "), "{r}");
    }

    #[test]
    fn head_end_found_across_reads() {
        assert_eq!(find_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(18));
        assert_eq!(find_end(b"GET /\n\n"), Some(7));
        assert_eq!(find_end(b"GET / HTTP/1.1\r\n"), None);
    }
}
